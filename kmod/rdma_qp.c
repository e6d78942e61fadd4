// SPDX-License-Identifier: GPL-2.0
/*
 * RDMA rails: a connection's verbs objects and its lifetime: allocated,
 * on its rail's list, its PD, CQ, queue pair and buffers set up, its
 * errors reported, and torn down.  Its traffic is in transport_rdma.c, how
 * it connects in rdma_conn.c; Documentation/rdma.rst has the design.
 *
 * Buffers: each connection registers its buffers once, when it is set up:
 * rx_depth receive slots and as many transmit slots, each a 48-byte header
 * area plus a payload buffer of one chunk unit, DMA mapped for the life of
 * the connection and used through the PD's local DMA key.  A message is
 * scattered into (header, payload) and gathered from them.  Payload is
 * copied between these buffers and the user's pinned pages.
 *
 * Teardown: mark closing (no work is queued any more, errors are ignored),
 * let the last sends complete (a CLOSE frame when leaving the job), stop
 * the works, disconnect, drain the queue pair (every posted request
 * completes, flushed), destroy the CM ID (no handler after that), then the
 * queue pair, the CQ, the buffers and the PD, in that order.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/slab.h>
#include <linux/uio.h>
#include "rdma.h"

#define NZ_RDMA_BYE_TIMEOUT	(HZ / 5)
#define NZ_RDMA_MAX_HANDSHAKES	64	/* per rail, server side */
/*
 * Buffers of server handshakes whose request names no communicator of
 * this host (yet: a client may knock before ours exists): a stranger
 * without the job's id gets no more than this per rail, however large a
 * unit it asks for.
 */
#define NZ_RDMA_HS_STRANGER_BYTES	(16ULL << 20)

static unsigned int rx_depth = 16;
module_param(rx_depth, uint, 0444);
MODULE_PARM_DESC(rx_depth,
		 "receives (and transmit buffers) per connection, 4..256");

static unsigned int ring_mb = 4;
module_param(ring_mb, uint, 0444);
MODULE_PARM_DESC(ring_mb,
		 "at most this many MiB of receive buffers per connection (but at least 4 buffers)");

/* ---- errors ----------------------------------------------------------------- */

/*
 * Report that rc failed; any context but hard interrupts.  An attached
 * connection fails through the communicator (which detaches and closes it);
 * a client in its handshake is woken; a server handshake is torn down by
 * its destroy work.  Nothing happens once teardown has begun.
 */
void nz_rdma_error(struct nz_rdma_conn *rc, int err)
{
	bool attached, destroy = false;

	spin_lock_bh(&rc->lock);
	if (rc->closing) {
		spin_unlock_bh(&rc->lock);
		return;
	}
	if (!rc->err)
		rc->err = err;
	attached = rc->attached;
	/* Being attached: the error is read there (nz_rdma_attach()). */
	if (!attached && !rc->client && !rc->destroy_queued && !rc->claimed) {
		rc->destroy_queued = true;
		destroy = true;
	}
	spin_unlock_bh(&rc->lock);

	if (attached)
		nz_conn_fail(rc->conn, rc, err);
	else if (rc->client)
		wake_up_all(&rc->waitq);
	else if (destroy)
		queue_work(nz_rdma_wq, &rc->destroy_work);
}

static void nz_rdma_err_work(struct work_struct *work)
{
	struct nz_rdma_conn *rc = container_of(work, struct nz_rdma_conn,
					       err_work);

	nz_rdma_error(rc, READ_ONCE(rc->async_err));
}

/* May run in interrupt context: count, and let a work report it. */
static void nz_rdma_qp_event(struct ib_event *ev, void *ctx)
{
	struct nz_rdma_conn *rc = ctx;

	switch (ev->event) {
	case IB_EVENT_QP_FATAL:
	case IB_EVENT_QP_REQ_ERR:
	case IB_EVENT_QP_ACCESS_ERR:
	case IB_EVENT_DEVICE_FATAL:
		atomic64_inc(&nz_rdma_stats(rc)->async_errors);
		pr_warn_ratelimited("rail %s: queue pair event: %s\n",
				    nz_rdma_rail_name(rc),
				    ib_event_msg(ev->event));
		WRITE_ONCE(rc->async_err, -EIO);
		queue_work(nz_rdma_wq, &rc->err_work);
		break;
	default:
		/*
		 * COMM_EST needs no rdma_notify(): the server speaks first,
		 * after ESTABLISHED, so no message can precede the RTU.
		 */
		break;
	}
}

/* ---- buffers ---------------------------------------------------------------- */

static int nz_rdma_map(struct ib_device *dev, void *buf, size_t len,
		       enum dma_data_direction dir, u64 *dma)
{
	*dma = ib_dma_map_single(dev, buf, len, dir);
	return ib_dma_mapping_error(dev, *dma) ? -ENOMEM : 0;
}

static int nz_rdma_slots_alloc(struct nz_rdma_conn *rc, struct nz_rdma_slot *s,
			       u32 n, enum dma_data_direction dir)
{
	struct ib_device *dev = nz_rdma_dev(rc);
	u32 i;

	for (i = 0; i < n; i++) {
		s[i].rc = rc;
		s[i].index = i;
		s[i].buf = kmalloc(rc->unit, GFP_KERNEL | __GFP_NOWARN);
		if (!s[i].buf)
			return -ENOMEM;
		if (nz_rdma_map(dev, s[i].buf, rc->unit, dir, &s[i].dma))
			return -ENOMEM;
		s[i].mapped = true;
	}
	return 0;
}

static void nz_rdma_slots_free(struct nz_rdma_conn *rc, struct nz_rdma_slot *s,
			       u32 n, enum dma_data_direction dir)
{
	u32 i;

	if (!s)
		return;
	for (i = 0; i < n; i++) {
		if (s[i].mapped)
			ib_dma_unmap_single(nz_rdma_dev(rc), s[i].dma, rc->unit,
					    dir);
		kfree(s[i].buf);
	}
	kfree(s);
}

static void nz_rdma_ring_free(struct nz_rdma_conn *rc)
{
	struct ib_device *dev = rc->pd ? nz_rdma_dev(rc) : NULL;

	nz_rdma_slots_free(rc, rc->rx, rc->rx_depth, DMA_FROM_DEVICE);
	nz_rdma_slots_free(rc, rc->tx, rc->tx_slots, DMA_TO_DEVICE);
	if (rc->rx_hdr_mapped)
		ib_dma_unmap_single(dev, rc->rx_hdr_dma,
				    rc->rx_depth * NZ_RDMA_HDR_SLOT,
				    DMA_FROM_DEVICE);
	if (rc->tx_hdr_mapped)
		ib_dma_unmap_single(dev, rc->tx_hdr_dma,
				    rc->tx_slots * NZ_RDMA_HDR_SLOT,
				    DMA_TO_DEVICE);
	kfree(rc->rx_hdr);
	kfree(rc->tx_hdr);
	kfree(rc->tx_free);
	rc->rx = NULL;
	rc->tx = NULL;
	rc->rx_hdr = NULL;
	rc->tx_hdr = NULL;
	rc->tx_free = NULL;
}

/* The connection's buffers, registered (DMA mapped) once for its life. */
static int nz_rdma_ring_alloc(struct nz_rdma_conn *rc)
{
	struct ib_device *dev = nz_rdma_dev(rc);
	u32 i;

	rc->rx = kcalloc(rc->rx_depth, sizeof(*rc->rx), GFP_KERNEL);
	rc->tx = kcalloc(rc->tx_slots, sizeof(*rc->tx), GFP_KERNEL);
	rc->tx_free = kcalloc(rc->tx_slots, sizeof(*rc->tx_free), GFP_KERNEL);
	rc->rx_hdr = kcalloc(rc->rx_depth, NZ_RDMA_HDR_SLOT, GFP_KERNEL);
	rc->tx_hdr = kcalloc(rc->tx_slots, NZ_RDMA_HDR_SLOT, GFP_KERNEL);
	if (!rc->rx || !rc->tx || !rc->tx_free || !rc->rx_hdr || !rc->tx_hdr)
		return -ENOMEM;
	if (nz_rdma_map(dev, rc->rx_hdr, rc->rx_depth * NZ_RDMA_HDR_SLOT,
			DMA_FROM_DEVICE, &rc->rx_hdr_dma))
		return -ENOMEM;
	rc->rx_hdr_mapped = true;
	if (nz_rdma_map(dev, rc->tx_hdr, rc->tx_slots * NZ_RDMA_HDR_SLOT,
			DMA_TO_DEVICE, &rc->tx_hdr_dma))
		return -ENOMEM;
	rc->tx_hdr_mapped = true;
	if (nz_rdma_slots_alloc(rc, rc->rx, rc->rx_depth, DMA_FROM_DEVICE) ||
	    nz_rdma_slots_alloc(rc, rc->tx, rc->tx_slots, DMA_TO_DEVICE))
		return -ENOMEM;
	for (i = 0; i < rc->tx_slots; i++)
		rc->tx_free[i] = rc->tx_slots - 1 - i;
	rc->tx_nfree = rc->tx_slots;
	return 0;
}

/* Receives for the chunk unit: rx_depth, within ring_mb. */
u32 nz_rdma_depth(u32 unit)
{
	u64 cap = div_u64((u64)READ_ONCE(ring_mb) << 20, unit);

	return clamp_t(u64, min_t(u64, READ_ONCE(rx_depth), cap),
		       NZ_RDMA_MIN_DEPTH, NZ_RDMA_MAX_DEPTH);
}

int nz_rdma_params_check(void)
{
	if (rx_depth < NZ_RDMA_MIN_DEPTH || rx_depth > NZ_RDMA_MAX_DEPTH) {
		pr_err("rx_depth must be %d..%d\n", NZ_RDMA_MIN_DEPTH,
		       NZ_RDMA_MAX_DEPTH);
		return -EINVAL;
	}
	return 0;
}

/* ---- the rail's list ------------------------------------------------------------ */

/* Client: rc joins its rail, unless the rail is going or has no device. */
int nz_rdma_rail_add_client(struct nz_rail *rail,
				   struct nz_rdma_conn *rc)
{
	struct nz_rdma_rail *rr;
	int ret = -ENETDOWN;

	mutex_lock(&nz_rdma_rails_lock);
	rr = rail->priv;
	if (rr) {
		mutex_lock(&rr->lock);
		if (!rr->stopping && rr->ibdev) {
			rc->rr = rr;
			list_add_tail(&rc->node, &rr->conns);
			ret = 0;
		}
		mutex_unlock(&rr->lock);
	}
	mutex_unlock(&nz_rdma_rails_lock);
	return ret;
}

/* Server, from the listener's handler: rr cannot go meanwhile. */
int nz_rdma_rail_add_server(struct nz_rdma_rail *rr,
				   struct nz_rdma_conn *rc,
				   struct ib_device *dev)
{
	int ret = -ENETDOWN;

	mutex_lock(&rr->lock);
	if (!rr->stopping && rr->ibdev == dev &&
	    rr->handshakes < NZ_RDMA_MAX_HANDSHAKES &&
	    rr->hs_stranger_bytes + rc->hs_cost <= NZ_RDMA_HS_STRANGER_BYTES) {
		rr->handshakes++;
		rr->hs_stranger_bytes += rc->hs_cost;
		rc->rr = rr;
		list_add_tail(&rc->node, &rr->conns);
		ret = 0;
	}
	mutex_unlock(&rr->lock);
	return ret;
}

static void nz_rdma_rail_del_conn(struct nz_rdma_rail *rr,
				  struct nz_rdma_conn *rc, bool server_hs)
{
	mutex_lock(&rr->lock);
	list_del(&rc->node);
	if (server_hs) {
		rr->handshakes--;
		rr->hs_stranger_bytes -= rc->hs_cost;
	}
	mutex_unlock(&rr->lock);
	wake_up_all(&rr->waitq);
}

void nz_rdma_rail_flush(struct nz_rdma_rail *rr, int err)
{
	struct nz_rdma_conn *rc;

	for (;;) {
		mutex_lock(&rr->lock);
		if (list_empty(&rr->conns)) {
			mutex_unlock(&rr->lock);
			return;
		}
		/* Again each round: a failure report can get lost. */
		list_for_each_entry(rc, &rr->conns, node)
			nz_rdma_error(rc, err);
		mutex_unlock(&rr->lock);
		wait_event_timeout(rr->waitq, list_empty_careful(&rr->conns),
				   HZ / 10);
	}
}

/* ---- queue pair ---------------------------------------------------------------------------- */

/* Move the queue pair to state, with what rdma_cm knows of the path. */
int nz_rdma_qp_move(struct nz_rdma_conn *rc, enum ib_qp_state state)
{
	struct ib_qp_attr attr = { .qp_state = state };
	int mask, ret;

	ret = rdma_init_qp_attr(rc->cm_id, &attr, &mask);
	if (ret)
		return ret;
	return ib_modify_qp(rc->qp, &attr, mask);
}

/*
 * The connection's verbs objects on the CM ID's device: a PD, a CQ from
 * the device's pool, the queue pair (ours: ib_create_qp names it after this
 * module) moved to INIT, the buffers, and every receive posted.
 */
int nz_rdma_setup_qp(struct nz_rdma_conn *rc)
{
	struct ib_device *dev = rc->cm_id->device;
	struct ib_qp_init_attr attr = {
		.event_handler = nz_rdma_qp_event,
		.qp_context = rc,
		.sq_sig_type = IB_SIGNAL_REQ_WR,
		.qp_type = IB_QPT_RC,
		.port_num = rc->cm_id->port_num,
		.cap.max_send_sge = 2,
		.cap.max_recv_sge = 2,
	};
	u32 i, max_wr;
	int ret;

	if (dev->attrs.max_send_sge < 2 || dev->attrs.max_recv_sge < 2 ||
	    dev->attrs.max_qp_wr <= NZ_RDMA_MIN_DEPTH)
		return -EOPNOTSUPP;
	/* One more work request each way, for ib_drain_qp(). */
	max_wr = dev->attrs.max_qp_wr - 1;
	rc->rx_depth = min(rc->rx_depth, max_wr);
	rc->tx_slots = min(rc->tx_slots, max_wr);

	rc->pd = ib_alloc_pd(dev, 0);
	if (IS_ERR(rc->pd)) {
		ret = PTR_ERR(rc->pd);
		rc->pd = NULL;
		return ret;
	}
	rc->cq_size = rc->rx_depth + rc->tx_slots + 2;
	rc->cq = ib_cq_pool_get(dev, rc->cq_size, -1, IB_POLL_SOFTIRQ);
	if (IS_ERR(rc->cq)) {
		ret = PTR_ERR(rc->cq);
		rc->cq = NULL;
		return ret;
	}
	attr.send_cq = rc->cq;
	attr.recv_cq = rc->cq;
	attr.cap.max_send_wr = rc->tx_slots + 1;
	attr.cap.max_recv_wr = rc->rx_depth + 1;
	rc->qp = ib_create_qp(rc->pd, &attr);
	if (IS_ERR(rc->qp)) {
		ret = PTR_ERR(rc->qp);
		rc->qp = NULL;
		return ret;
	}
	atomic_inc(&nz_rdma_stats(rc)->qps);
	ret = nz_rdma_ring_alloc(rc);
	if (ret)
		return ret;
	ret = nz_rdma_qp_move(rc, IB_QPS_INIT);
	if (ret)
		return ret;
	rc->qp_init = true;
	for (i = 0; i < rc->rx_depth; i++) {
		ret = nz_rdma_post_recv(rc, &rc->rx[i]);
		if (ret)
			return ret;
	}
	return 0;
}

/* ---- teardown ------------------------------------------------------------------------------- */

static bool nz_rdma_sends_done(struct nz_rdma_conn *rc)
{
	bool done;

	spin_lock_bh(&rc->lock);
	done = rc->tx_nfree == rc->tx_slots;
	spin_unlock_bh(&rc->lock);
	return done;
}

/*
 * Tear rc down and free it, in the order of the file's header comment.
 * bye: we leave the job, tell the peer with CLOSE.  in_destroy: called by
 * rc's own destroy_work.  Never called from rc's CM handler or works.
 */
void nz_rdma_teardown(struct nz_rdma_conn *rc, bool bye, bool in_destroy)
{
	struct nz_rdma_rail *rr = rc->rr;
	bool server_hs;

	spin_lock_bh(&rc->lock);
	rc->closing = true;
	server_hs = !rc->client && !rc->attached;
	spin_unlock_bh(&rc->lock);

	cancel_delayed_work_sync(&rc->hs_timer);
	/*
	 * A server's handshake works: an attached rc is past them, and its
	 * teardown holds conn->io_lock, which hs_work takes (nz_rdma_attach()).
	 */
	if (server_hs) {
		if (!in_destroy)
			cancel_work_sync(&rc->destroy_work);
		cancel_work_sync(&rc->hs_work);
	}
	cancel_work_sync(&rc->rx_work);
	cancel_work_sync(&rc->tx_work);
	if (rc->qp_init) {
		struct nz_frame done;

		/* What we have first (DONE): what is still queued is dropped. */
		if (bye && rc->conn && nz_conn_done_frame(rc->conn, &done))
			nz_rdma_send_ctl(rc, &done, false);
		if (bye)
			nz_rdma_send_close(rc, NZ_CLOSE_NORMAL);
		/* What is posted (a CLOSE, a refusal) should reach the peer. */
		wait_event_timeout(rc->waitq, nz_rdma_sends_done(rc),
				   NZ_RDMA_BYE_TIMEOUT);
		if (rc->cm_id)
			rdma_disconnect(rc->cm_id);
		/* The QP goes to error; every posted request completes. */
		ib_drain_qp(rc->qp);
	}
	/* No CM handler runs for rc after this. */
	if (rc->cm_id)
		rdma_destroy_id(rc->cm_id);
	if (rc->qp) {
		ib_destroy_qp(rc->qp);
		atomic_dec(&rr->stats.qps);
	}
	cancel_work_sync(&rc->err_work);	/* no QP event after this */
	if (rc->cq)
		ib_cq_pool_put(rc->cq, rc->cq_size);
	nz_rdma_ring_free(rc);
	if (rc->pd)
		ib_dealloc_pd(rc->pd);
	nz_rdma_rail_del_conn(rr, rc, server_hs);
	kfree(rc);
}

void nz_rdma_conn_close(struct nz_conn *conn)
{
	nz_rdma_teardown(conn->tp, conn->state == NZ_CONN_DEAD, false);
}

struct nz_rdma_conn *nz_rdma_conn_alloc(bool client)
{
	struct nz_rdma_conn *rc = kzalloc(sizeof(*rc), GFP_KERNEL);

	if (!rc)
		return NULL;
	rc->client = client;
	INIT_LIST_HEAD(&rc->node);
	spin_lock_init(&rc->lock);
	init_waitqueue_head(&rc->waitq);
	INIT_WORK(&rc->rx_work, nz_rdma_rx_work);
	INIT_WORK(&rc->tx_work, nz_rdma_tx_work);
	INIT_WORK(&rc->err_work, nz_rdma_err_work);
	INIT_WORK(&rc->destroy_work, nz_rdma_destroy_work);
	INIT_WORK(&rc->hs_work, nz_rdma_hs_work);
	INIT_DELAYED_WORK(&rc->hs_timer, nz_rdma_hs_expired);
	return rc;
}
