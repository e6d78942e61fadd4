// SPDX-License-Identifier: GPL-2.0
/*
 * RDMA rails: a connection's queue pair and its traffic.  One reliable
 * connected queue pair per (peer, rail) carries the same frames as a TCP
 * rail: every SEND is one whole frame.  How connections are set up is in
 * rdma_conn.c; Documentation/rdma.rst has the design.
 *
 * Buffers: each connection registers its buffers once, when it is set up:
 * rx_depth receive slots and as many transmit slots, each a 48-byte header
 * area plus a payload buffer of one chunk unit, DMA mapped for the life of
 * the connection and used through the PD's local DMA key.  A message is
 * scattered into (header, payload) and gathered from them.  Payload is
 * copied between these buffers and the user's pinned pages.
 *
 * Credits: a SEND needs a posted receive at the peer.  Each side starts
 * with the peer's receive depth as credits, spends one per message and gets
 * them back in the immediate data that every message carries: the number
 * of receives its sender has posted again since its last message.  The last
 * credit is kept for a message that returns credits, so two peers can never
 * wait for each other; a side owing half its depth with nothing else to
 * send sends an empty message that only returns credits.
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

#define NZ_RDMA_HDR_SLOT	64	/* header area per slot (48 used) */
#define NZ_RDMA_BYE_TIMEOUT	(HZ / 5)
#define NZ_RDMA_RX_BUDGET	64	/* messages per receive work run */
#define NZ_RDMA_TX_BUDGET	64	/* messages per transmit work run */
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

/* Handshake frames carry no DATA: these limits admit none. */
static const struct nz_wire_limits nz_rdma_hs_lim = {
	.max_msg = 0,
	.max_payload = 0,
};

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
	if (!attached && !rc->client && !rc->destroy_queued) {
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

static void nz_rdma_wc_error(struct nz_rdma_conn *rc, const struct ib_wc *wc,
			     const char *what)
{
	bool closing;

	spin_lock_bh(&rc->lock);
	closing = rc->closing;
	spin_unlock_bh(&rc->lock);
	if (closing)
		return;
	/* A flush only follows the error that moved the QP to error. */
	if (wc->status != IB_WC_WR_FLUSH_ERR) {
		atomic64_inc(&nz_rdma_stats(rc)->wc_errors);
		pr_warn_ratelimited("rail %s: %s completion error: %s (%d), vendor 0x%x\n",
				    nz_rdma_rail_name(rc), what,
				    ib_wc_status_msg(wc->status), wc->status,
				    wc->vendor_err);
	}
	nz_rdma_error(rc, wc->status == IB_WC_WR_FLUSH_ERR ? -ECONNRESET :
			  -EIO);
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

static struct ib_device *nz_rdma_dev(struct nz_rdma_conn *rc)
{
	return rc->pd->device;
}

static u64 nz_rdma_hdr_dma(struct nz_rdma_conn *rc, bool rx, u32 i)
{
	return (rx ? rc->rx_hdr_dma : rc->tx_hdr_dma) + i * NZ_RDMA_HDR_SLOT;
}

static void *nz_rdma_hdr(struct nz_rdma_conn *rc, bool rx, u32 i)
{
	return (rx ? rc->rx_hdr : rc->tx_hdr) + i * NZ_RDMA_HDR_SLOT;
}

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

/* ---- posting ------------------------------------------------------------------ */

static void nz_rdma_recv_done(struct ib_cq *cq, struct ib_wc *wc);
static void nz_rdma_send_done(struct ib_cq *cq, struct ib_wc *wc);

static int nz_rdma_post_recv(struct nz_rdma_conn *rc, struct nz_rdma_slot *s)
{
	struct ib_device *dev = nz_rdma_dev(rc);
	struct ib_sge sge[2] = {
		{
			.addr = nz_rdma_hdr_dma(rc, true, s->index),
			.length = NZ_WIRE_HDR_LEN,
			.lkey = rc->pd->local_dma_lkey,
		}, {
			.addr = s->dma,
			.length = rc->unit,
			.lkey = rc->pd->local_dma_lkey,
		},
	};
	struct ib_recv_wr wr = {
		.wr_cqe = &s->cqe,
		.sg_list = sge,
		.num_sge = ARRAY_SIZE(sge),
	};
	int ret;

	ib_dma_sync_single_for_device(dev, sge[0].addr, sge[0].length,
				      DMA_FROM_DEVICE);
	ib_dma_sync_single_for_device(dev, sge[1].addr, sge[1].length,
				      DMA_FROM_DEVICE);
	s->cqe.done = nz_rdma_recv_done;
	ret = ib_post_recv(rc->qp, &wr, NULL);
	if (!ret)
		atomic64_inc(&nz_rdma_stats(rc)->recv_posted);
	return ret;
}

/*
 * A transmit slot and a credit for one message, and the credits it
 * returns (*imm).  The last credit only goes to a message that returns
 * credits, or to the final CLOSE (last_ok).
 */
static bool nz_rdma_tx_take(struct nz_rdma_conn *rc, bool last_ok, u32 *idx,
			    u32 *imm)
{
	bool ok = false;

	spin_lock_bh(&rc->lock);
	if (rc->tx_nfree && (rc->send_credits > 1 ||
			     (rc->send_credits == 1 &&
			      (rc->credits_owed || last_ok)))) {
		*idx = rc->tx_free[--rc->tx_nfree];
		rc->send_credits--;
		*imm = rc->credits_owed;
		rc->credits_owed = 0;
		ok = true;
	} else {
		/* The completion that frees a slot or brings credits kicks. */
		rc->tx_waiting = true;
		if (rc->tx_nfree && !rc->starved) {
			rc->starved = true;
			atomic64_inc(&nz_rdma_stats(rc)->credit_stalls);
		}
	}
	spin_unlock_bh(&rc->lock);
	return ok;
}

static void nz_rdma_tx_untake(struct nz_rdma_conn *rc, u32 idx, u32 imm)
{
	spin_lock_bh(&rc->lock);
	rc->tx_free[rc->tx_nfree++] = idx;
	rc->send_credits++;
	rc->credits_owed += imm;
	spin_unlock_bh(&rc->lock);
}

/* Post slot idx: hdr_len header bytes and len payload bytes (0, 0: empty). */
static int nz_rdma_post_send(struct nz_rdma_conn *rc, u32 idx, u32 imm,
			     u32 hdr_len, u32 len)
{
	struct ib_device *dev = nz_rdma_dev(rc);
	struct nz_rdma_slot *s = &rc->tx[idx];
	struct ib_sge sge[2] = {
		{
			.addr = nz_rdma_hdr_dma(rc, false, idx),
			.length = hdr_len,
			.lkey = rc->pd->local_dma_lkey,
		}, {
			.addr = s->dma,
			.length = len,
			.lkey = rc->pd->local_dma_lkey,
		},
	};
	struct ib_send_wr wr = {
		.wr_cqe = &s->cqe,
		.sg_list = sge,
		.num_sge = hdr_len ? (len ? 2 : 1) : 0,
		.opcode = IB_WR_SEND_WITH_IMM,
		.send_flags = IB_SEND_SIGNALED,
		.ex.imm_data = cpu_to_be32(imm),
	};
	int ret;

	if (hdr_len)
		ib_dma_sync_single_for_device(dev, sge[0].addr, hdr_len,
					      DMA_TO_DEVICE);
	if (len)
		ib_dma_sync_single_for_device(dev, s->dma, len, DMA_TO_DEVICE);
	s->cqe.done = nz_rdma_send_done;
	ret = ib_post_send(rc->qp, &wr, NULL);
	if (!ret)
		atomic64_inc(&nz_rdma_stats(rc)->send_posted);
	return ret;
}

/*
 * Encode f into slot idx and post it: the header into the slot's header
 * area, a HELLO body or the DATA payload (copied from *payload) into its
 * buffer.
 */
static int nz_rdma_post_frame(struct nz_rdma_conn *rc, u32 idx, u32 imm,
			      const struct nz_frame *f,
			      const struct nz_wire_limits *lim,
			      struct iov_iter *payload)
{
	u8 buf[NZ_WIRE_HDR_LEN + NZ_WIRE_HELLO_LEN];
	struct nz_rdma_slot *s = &rc->tx[idx];
	u32 len = 0;
	int ret;

	ret = nz_wire_encode(f, lim, buf, sizeof(buf));
	if (ret < 0)
		return ret;
	memcpy(nz_rdma_hdr(rc, false, idx), buf, NZ_WIRE_HDR_LEN);
	if (ret > NZ_WIRE_HDR_LEN) {
		len = ret - NZ_WIRE_HDR_LEN;
		memcpy(s->buf, buf + NZ_WIRE_HDR_LEN, len);
	} else if (f->type == NZ_FRAME_DATA && f->len) {
		if (f->len > rc->unit)
			return -EMSGSIZE;
		if (copy_from_iter(s->buf, f->len, payload) != f->len)
			return -EFAULT;
		len = f->len;
	}
	return nz_rdma_post_send(rc, idx, imm, NZ_WIRE_HDR_LEN, len);
}

/* A handshake frame, or a CLOSE (last_ok: it may take the last credit). */
int nz_rdma_send_ctl(struct nz_rdma_conn *rc, const struct nz_frame *f,
			    bool last_ok)
{
	u32 idx, imm;
	int ret;

	if (!nz_rdma_tx_take(rc, last_ok, &idx, &imm))
		return -ENOBUFS;
	ret = nz_rdma_post_frame(rc, idx, imm, f, &nz_rdma_hs_lim, NULL);
	if (ret)
		nz_rdma_tx_untake(rc, idx, imm);
	return ret;
}

void nz_rdma_send_close(struct nz_rdma_conn *rc, u32 reason)
{
	struct nz_frame f;

	nz_frame_init(&f, NZ_FRAME_CLOSE);
	f.close.reason = reason;
	nz_rdma_send_ctl(rc, &f, true);
}

/* ---- completions (softirq) ------------------------------------------------------ */

static u32 nz_rdma_owed_max(const struct nz_rdma_conn *rc)
{
	return max(rc->rx_depth / 2, 1U);
}

static void nz_rdma_recv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct nz_rdma_slot *s = container_of(wc->wr_cqe, struct nz_rdma_slot,
					      cqe);
	struct nz_rdma_conn *rc = s->rc;
	bool attached, closing, kick_tx = false;
	u32 credits = 0;
	int err = 0;

	if (wc->status != IB_WC_SUCCESS) {
		nz_rdma_wc_error(rc, wc, "receive");
		return;
	}
	atomic64_inc(&nz_rdma_stats(rc)->recv_completed);
	/* Every message returns credits in its immediate data. */
	if (!(wc->wc_flags & IB_WC_WITH_IMM))
		err = -EPROTO;
	else
		credits = be32_to_cpu(wc->ex.imm_data);

	spin_lock_bh(&rc->lock);
	if (!err && credits > rc->peer_depth - rc->send_credits)
		err = -EPROTO;		/* more than it ever had from us */
	if (!err && credits) {
		rc->send_credits += credits;
		rc->starved = false;
		kick_tx = rc->tx_waiting;
		rc->tx_waiting = false;
	}
	attached = rc->attached;
	closing = rc->closing;
	spin_unlock_bh(&rc->lock);
	if (err) {
		pr_warn_ratelimited("rail %s: bad credit return from the peer\n",
				    nz_rdma_rail_name(rc));
		nz_rdma_error(rc, err);
		return;
	}
	s->len = wc->byte_len;
	/* Pairs with rx_work's acquire: it sees len once it sees done. */
	smp_store_release(&s->done, true);
	if (closing)
		return;
	if (attached)
		nz_conn_rx_mark(rc->conn);
	queue_work(nz_rdma_wq, &rc->rx_work);
	if (kick_tx && attached)
		queue_work(nz_rdma_wq, &rc->tx_work);
}

static void nz_rdma_send_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct nz_rdma_slot *s = container_of(wc->wr_cqe, struct nz_rdma_slot,
					      cqe);
	struct nz_rdma_conn *rc = s->rc;
	bool attached, closing, kick_tx;

	spin_lock_bh(&rc->lock);
	rc->tx_free[rc->tx_nfree++] = s->index;
	attached = rc->attached;
	closing = rc->closing;
	kick_tx = rc->tx_waiting;
	rc->tx_waiting = false;
	spin_unlock_bh(&rc->lock);
	if (wc->status != IB_WC_SUCCESS) {
		nz_rdma_wc_error(rc, wc, "send");
		wake_up_all(&rc->waitq);
		return;
	}
	atomic64_inc(&nz_rdma_stats(rc)->send_completed);
	if (closing || !attached)
		wake_up_all(&rc->waitq);	/* teardown or handshake */
	else if (kick_tx)
		queue_work(nz_rdma_wq, &rc->tx_work);
}

/* ---- transmit ------------------------------------------------------------------------ */

static void nz_rdma_tx_work(struct work_struct *work)
{
	struct nz_rdma_conn *rc = container_of(work, struct nz_rdma_conn,
					       tx_work);
	struct nz_conn *conn = rc->conn;
	struct nz_tx_item it;
	u32 idx, imm;
	int n, ret;

	for (n = 0; n < NZ_RDMA_TX_BUDGET; n++) {
		if (!nz_rdma_tx_take(rc, false, &idx, &imm))
			return;		/* a completion or credits bring us back */
		ret = nz_conn_tx_next(conn, &it);
		if (ret == -ENODATA) {
			if (imm < nz_rdma_owed_max(rc)) {
				nz_rdma_tx_untake(rc, idx, imm);
				return;
			}
			/* Nothing to say but credits: an empty message. */
			ret = nz_rdma_post_send(rc, idx, imm, 0, 0);
			if (ret)
				goto fail;
			atomic64_inc(&nz_rdma_stats(rc)->credit_updates);
			return;
		}
		if (ret) {
			nz_rdma_tx_untake(rc, idx, imm);
			goto fail;
		}
		ret = nz_rdma_post_frame(rc, idx, imm, &it.f,
					 &conn->peer->comm->lim,
					 it.chunk ? &it.iter : NULL);
		if (ret) {
			nz_conn_tx_abort(conn, &it);
			goto fail;
		}
		nz_conn_tx_done(conn, &it);
	}
	queue_work(nz_rdma_wq, &rc->tx_work);	/* more later, be fair */
	return;
fail:
	nz_rdma_error(rc, ret);
}

void nz_rdma_conn_kick(struct nz_conn *conn)
{
	struct nz_rdma_conn *rc = conn->tp;

	queue_work(nz_rdma_wq, &rc->tx_work);
	if (READ_ONCE(rc->rx_stalled))
		queue_work(nz_rdma_wq, &rc->rx_work);
}

/* ---- receive --------------------------------------------------------------------------- */

/*
 * One message is one whole frame, scattered: its 48-byte header in the
 * slot's header area, the rest in its buffer.  The same checks as
 * nz_wire_decode(): the message is exactly 48 + len bytes.
 */
static int nz_rdma_decode(struct nz_rdma_conn *rc, struct nz_rdma_slot *s,
			  const struct nz_wire_limits *lim, struct nz_frame *f)
{
	int ret;

	if (s->len < NZ_WIRE_HDR_LEN)
		return -EPROTO;
	ret = nz_wire_decode_hdr(nz_rdma_hdr(rc, true, s->index), lim, f);
	if (ret)
		return ret;
	if (s->len - NZ_WIRE_HDR_LEN != f->len)
		return -EPROTO;
	return nz_wire_decode_body(f, s->buf);
}

static int nz_rdma_rx_frame(struct nz_rdma_conn *rc, const struct nz_frame *f,
			    const void *payload)
{
	struct nz_conn *conn = rc->conn;
	struct nz_rx_dest d;
	int ret;

	if (f->type != NZ_FRAME_DATA)
		return nz_conn_rx_ctrl(conn, f);
	/* Set first: a kick that comes while we look is not lost. */
	WRITE_ONCE(rc->rx_stalled, true);
	ret = nz_conn_rx_data(conn, f, &d);
	if (ret == -EAGAIN) {
		WRITE_ONCE(conn->rx_blocked, true);
		return ret;	/* budget full: a kick brings us back */
	}
	WRITE_ONCE(rc->rx_stalled, false);
	WRITE_ONCE(conn->rx_blocked, false);
	if (ret)
		return ret;
	if (!d.drain && f->len &&
	    copy_to_iter(payload, f->len, &d.iter) != f->len) {
		nz_conn_rx_data_abort(conn, &d);
		return -EFAULT;
	}
	return nz_conn_rx_data_done(conn, &d);
}

/* Client: hand the handshake frame to conn_connect, read no further. */
static int nz_rdma_client_frame(struct nz_rdma_conn *rc,
				const struct nz_frame *f)
{
	int ret = 0;

	spin_lock_bh(&rc->lock);
	if (rc->hs_have) {
		ret = -EPROTO;
	} else {
		rc->hs_frame = *f;
		rc->hs_have = true;
		WRITE_ONCE(rc->rx_hold, true);
	}
	spin_unlock_bh(&rc->lock);
	wake_up_all(&rc->waitq);
	return ret;
}

static int nz_rdma_rx_one(struct nz_rdma_conn *rc, struct nz_rdma_slot *s)
{
	struct ib_device *dev = nz_rdma_dev(rc);
	enum nz_wire_state ws = READ_ONCE(rc->ws);
	const struct nz_wire_limits *lim = &nz_rdma_hs_lim;
	struct nz_frame f;
	int ret;

	if (!s->len)
		return 0;		/* it only returned credits */
	ib_dma_sync_single_for_cpu(dev, nz_rdma_hdr_dma(rc, true, s->index),
				   NZ_WIRE_HDR_LEN, DMA_FROM_DEVICE);
	if (s->len > NZ_WIRE_HDR_LEN)
		ib_dma_sync_single_for_cpu(dev, s->dma,
					   s->len - NZ_WIRE_HDR_LEN,
					   DMA_FROM_DEVICE);
	if (ws == NZ_WS_ESTABLISHED)
		lim = &rc->conn->peer->comm->lim;
	ret = nz_rdma_decode(rc, s, lim, &f);
	if (ret)
		return ret;
	if (!nz_wire_type_expected(ws, f.type))
		return -EPROTO;
	switch (ws) {
	case NZ_WS_ESTABLISHED:
		return nz_rdma_rx_frame(rc, &f, s->buf);
	case NZ_WS_SERVER_WAIT_HELLO:
		return nz_rdma_server_hello(rc, &f);
	default:
		return nz_rdma_client_frame(rc, &f);
	}
}

static void nz_rdma_rx_work(struct work_struct *work)
{
	struct nz_rdma_conn *rc = container_of(work, struct nz_rdma_conn,
					       rx_work);
	struct nz_rdma_slot *s;
	u32 owed;
	int n, ret;

	for (n = 0; n < NZ_RDMA_RX_BUDGET; n++) {
		s = &rc->rx[rc->rx_head];
		/* Pairs with the release in the handshake: ws is visible. */
		if (smp_load_acquire(&rc->rx_hold))
			return;	/* the handshake requeues us */
		/* Pairs with the release in recv_done: len is visible. */
		if (!smp_load_acquire(&s->done))
			return;	/* a completion requeues us */
		ret = nz_rdma_rx_one(rc, s);
		if (ret == -EAGAIN)
			return;
		if (ret) {
			if (ret == -EPROTO || ret == -EMSGSIZE ||
			    ret == -EPROTONOSUPPORT)
				pr_warn_ratelimited("rail %s: malformed message from the peer, closing\n",
						    nz_rdma_rail_name(rc));
			nz_rdma_error(rc, ret);
			return;
		}
		s->done = false;
		ret = nz_rdma_post_recv(rc, s);
		if (ret) {
			nz_rdma_error(rc, ret);
			return;
		}
		rc->rx_head = (rc->rx_head + 1) % rc->rx_depth;
		spin_lock_bh(&rc->lock);
		owed = ++rc->credits_owed;
		spin_unlock_bh(&rc->lock);
		/* Owing half our depth: tell the peer, if need be alone. */
		if (owed >= nz_rdma_owed_max(rc) &&
		    READ_ONCE(rc->ws) == NZ_WS_ESTABLISHED)
			queue_work(nz_rdma_wq, &rc->tx_work);
	}
	queue_work(nz_rdma_wq, &rc->rx_work);	/* more later, be fair */
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
	if (!in_destroy)
		cancel_work_sync(&rc->destroy_work);
	cancel_work_sync(&rc->rx_work);
	cancel_work_sync(&rc->tx_work);
	if (rc->qp_init) {
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
	INIT_DELAYED_WORK(&rc->hs_timer, nz_rdma_hs_expired);
	return rc;
}
