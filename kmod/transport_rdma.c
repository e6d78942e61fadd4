// SPDX-License-Identifier: GPL-2.0
/*
 * RDMA rails: a connection's traffic.  One reliable connected queue pair
 * per (peer, rail) carries the same frames as a TCP rail: every SEND is
 * one whole frame, scattered into a slot's header area and payload buffer
 * and gathered from them.  How connections are set up is in rdma_conn.c,
 * their verbs objects, buffers and teardown in rdma_qp.c;
 * Documentation/rdma.rst has the design.
 *
 * Credits: a SEND needs a posted receive at the peer.  Each side starts
 * with the peer's receive depth as credits, spends one per message and gets
 * them back in the immediate data that every message carries: the number
 * of receives its sender has posted again since its last message.  The last
 * credit is kept for a message that returns credits, so two peers can never
 * wait for each other; a side owing half its depth with nothing else to
 * send sends an empty message that only returns credits.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/slab.h>
#include <linux/uio.h>
#include "rdma.h"

#define NZ_RDMA_RX_BUDGET	64	/* messages per receive work run */
#define NZ_RDMA_TX_BUDGET	64	/* messages per transmit work run */

/* Handshake frames carry no DATA: these limits admit none. */
static const struct nz_wire_limits nz_rdma_hs_lim = {
	.max_msg = 0,
	.max_payload = 0,
};

static u64 nz_rdma_hdr_dma(struct nz_rdma_conn *rc, bool rx, u32 i)
{
	return (rx ? rc->rx_hdr_dma : rc->tx_hdr_dma) + i * NZ_RDMA_HDR_SLOT;
}

static void *nz_rdma_hdr(struct nz_rdma_conn *rc, bool rx, u32 i)
{
	return (rx ? rc->rx_hdr : rc->tx_hdr) + i * NZ_RDMA_HDR_SLOT;
}

/* ---- posting ------------------------------------------------------------------ */

static void nz_rdma_recv_done(struct ib_cq *cq, struct ib_wc *wc);
static void nz_rdma_send_done(struct ib_cq *cq, struct ib_wc *wc);

int nz_rdma_post_recv(struct nz_rdma_conn *rc, struct nz_rdma_slot *s)
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

void nz_rdma_tx_work(struct work_struct *work)
{
	struct nz_rdma_conn *rc = container_of(work, struct nz_rdma_conn,
					       tx_work);
	struct nz_conn *conn = rc->conn;
	struct nz_tx_item it = { .zc_min = 0 };	/* copies into its buffers */
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

/*
 * Server: hand the HELLO to hs_work, read no further.  The handshake
 * waits for the communicator and attaches to it under conn->io_lock, which
 * the teardown of an attached connection holds while it cancels rx_work:
 * rx_work itself never takes that lock.
 */
static int nz_rdma_server_frame(struct nz_rdma_conn *rc,
				const struct nz_frame *f)
{
	rc->hs_frame = *f;
	WRITE_ONCE(rc->rx_hold, true);
	queue_work(nz_rdma_wq, &rc->hs_work);
	return 0;
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
		return nz_rdma_server_frame(rc, &f);
	default:
		return nz_rdma_client_frame(rc, &f);
	}
}

void nz_rdma_rx_work(struct work_struct *work)
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
