// SPDX-License-Identifier: GPL-2.0
/*
 * TCP rails: an established connection's receive work.  It reads frame
 * headers and payload from the socket without blocking, hands each frame
 * to the data path (rx.c) and keeps its progress in struct nz_tcp_conn.
 */
#include <linux/net.h>
#include <linux/uio.h>
#include <net/sock.h>
#include "transport_tcp.h"

#define NZ_TCP_RX_BUDGET	(2U << 20)	/* bytes per rx work run */
/*
 * The ACKs of frames read in a row are written together, when the socket
 * runs dry or every this many bytes of payload: fewer wake-ups and TCP
 * segments for the receiver, and an ACK waits at most for the time it
 * takes to read this much (26 us at 80 Gbit/s, 0.1 s at 20 Mbit/s --
 * where a frame rarely follows another without a pause).
 */
#define NZ_TCP_ACK_BYTES	(256U << 10)

static int nz_tcp_recv(struct nz_tcp_conn *tc, struct iov_iter *iter)
{
	struct msghdr msg = { .msg_flags = MSG_DONTWAIT };
	int ret;

	msg.msg_iter = *iter;
	ret = sock_recvmsg(tc->sock, &msg, MSG_DONTWAIT);
	*iter = msg.msg_iter;
	if (ret == 0)
		return -ECONNRESET;	/* orderly shutdown by the peer */
	return ret;
}

static int nz_tcp_recv_buf(struct nz_tcp_conn *tc, void *buf, size_t len)
{
	struct kvec kv = { buf, len };
	struct iov_iter it;

	iov_iter_kvec(&it, ITER_DEST, &kv, 1, len);
	return nz_tcp_recv(tc, &it);
}

/*
 * A frame that failed its MAC: whatever wrote it, it was not the peer's
 * module (or not as it was sent).  Nothing of it was acted on; its
 * payload, if any, was not counted, so its chunk is resent.
 */
static int nz_tcp_rx_mac_failed(struct nz_tcp_conn *tc, const char *what)
{
	atomic64_inc(&tc->conn->rail->stats.mac_failures);
	pr_warn_ratelimited("rail %s: a frame %s from rank %u failed its MAC, closing\n",
			    tc->conn->rail->name, what, tc->conn->peer->rank);
	return -EBADMSG;
}

/* A frame header is complete: act on it.  Returns 0, -EAGAIN or an error. */
static int nz_tcp_rx_header(struct nz_tcp_conn *tc)
{
	struct nz_conn *conn = tc->conn;
	struct nz_frame *f = &tc->rx_frame;
	int ret;

	if (!tc->rx_decoded) {
		if (tc->mac.on) {
			ret = nz_fmac_begin(&tc->mac.rx, tc->rx_mac);
			if (ret)
				return ret;
			nz_fmac_add(tc->rx_mac, tc->rx_hdr, NZ_WIRE_HDR_LEN);
			if (nz_fmac_check(tc->rx_mac,
					  tc->rx_hdr + NZ_WIRE_HDR_LEN))
				return nz_tcp_rx_mac_failed(tc, "header");
		}
		ret = nz_wire_decode_hdr(tc->rx_hdr, &conn->peer->comm->lim, f);
		if (ret)
			return ret;
		if (!nz_wire_type_expected(NZ_WS_ESTABLISHED, f->type))
			return -EPROTO;
		tc->rx_decoded = true;
	}
	if (f->type != NZ_FRAME_DATA) {
		tc->rx_hdr_got = 0;
		tc->rx_decoded = false;
		return nz_conn_rx_ctrl(conn, f);
	}
	WRITE_ONCE(tc->rx_data_at, jiffies);
	ret = nz_conn_rx_data(conn, f, &tc->rx_dest);
	if (ret == -EAGAIN) {
		tc->rx_stalled = true;	/* a kick brings us back */
		WRITE_ONCE(conn->rx_blocked, true);
		return ret;
	}
	if (ret)
		return ret;
	tc->rx_stalled = false;
	WRITE_ONCE(conn->rx_blocked, false);
	tc->rx_in_body = true;
	tc->rx_left = f->len;
	tc->rx_tag_got = 0;
	if (tc->mac.on && f->len)
		return nz_fmac_begin(&tc->mac.rx, tc->rx_mac);
	return 0;
}

/* Read some payload into its destination (and the MAC); > 0 bytes read. */
static int nz_tcp_rx_payload(struct nz_tcp_conn *tc)
{
	struct nz_rx_dest *d = &tc->rx_dest;
	struct iov_iter at = d->iter;
	int ret;

	if (d->drain) {
		ret = nz_tcp_recv_buf(tc, tc->scratch,
				      min_t(u64, tc->rx_left, PAGE_SIZE));
		if (ret > 0 && tc->mac.on)
			nz_fmac_add(tc->rx_mac, tc->scratch, ret);
		return ret;
	}
	ret = nz_tcp_recv(tc, &d->iter);
	/* Hashed where it landed: what the MAC checks is what was written. */
	if (ret > 0 && tc->mac.on && nz_fmac_add_iter(tc->rx_mac, &at, ret))
		return -EINVAL;
	return ret;
}

/* The payload's tag: 0 once it came and checks, -EAGAIN, or an error. */
static int nz_tcp_rx_payload_tag(struct nz_tcp_conn *tc)
{
	int ret;

	if (!tc->mac.on || !tc->rx_frame.len)
		return 0;
	while (tc->rx_tag_got < NZ_FMAC_TAG_LEN) {
		ret = nz_tcp_recv_buf(tc, tc->rx_tag + tc->rx_tag_got,
				      NZ_FMAC_TAG_LEN - tc->rx_tag_got);
		if (ret < 0)
			return ret;
		tc->rx_tag_got += ret;
	}
	if (nz_fmac_check(tc->rx_mac, tc->rx_tag))
		return nz_tcp_rx_mac_failed(tc, "payload");
	return 0;
}

/* Write the ACKs queued since the last time. */
static void nz_tcp_rx_kick(struct nz_tcp_conn *tc)
{
	if (!tc->rx_ack_due)
		return;
	tc->rx_ack_due = false;
	tc->rx_ack_bytes = 0;
	nz_conn_kick(tc->conn);
}

static int nz_tcp_rx_body(struct nz_tcp_conn *tc)
{
	struct nz_rx_dest *d = &tc->rx_dest;
	int ret;

	if (tc->rx_left) {
		ret = nz_tcp_rx_payload(tc);
		if (ret <= 0)
			return ret;
		tc->rx_left -= ret;
		if (tc->rx_left)
			return ret;
	}
	ret = nz_tcp_rx_payload_tag(tc);
	if (ret)
		return ret;
	tc->rx_in_body = false;
	tc->rx_hdr_got = 0;
	tc->rx_decoded = false;
	ret = nz_conn_rx_data_end(tc->conn, d);
	d->msg = NULL;
	tc->rx_ack_due = true;
	tc->rx_ack_bytes += tc->rx_frame.len;
	if (tc->rx_ack_bytes >= NZ_TCP_ACK_BYTES)
		nz_tcp_rx_kick(tc);
	return ret ? ret : 1;
}

void nz_tcp_rx_work(struct work_struct *work)
{
	struct nz_tcp_conn *tc = container_of(work, struct nz_tcp_conn,
					      rx_work);
	unsigned int budget = NZ_TCP_RX_BUDGET;
	int ret;

	/* Half-way through a frame of a message that completed elsewhere. */
	if (tc->rx_in_body)
		nz_conn_rx_data_release(tc->conn, &tc->rx_dest);

	while (budget) {
		if (tc->rx_in_body) {
			ret = nz_tcp_rx_body(tc);
		} else if (tc->rx_hdr_got < nz_tcp_hdr_len(tc)) {
			ret = nz_tcp_recv_buf(tc, tc->rx_hdr + tc->rx_hdr_got,
					      nz_tcp_hdr_len(tc) - tc->rx_hdr_got);
			if (ret > 0)
				tc->rx_hdr_got += ret;
		} else {
			ret = nz_tcp_rx_header(tc);
			if (!ret)
				ret = 1;
		}
		if (ret == -EAGAIN) {
			nz_tcp_rx_kick(tc);
			return;
		}
		if (ret < 0) {
			if (ret == -EPROTO || ret == -EMSGSIZE ||
			    ret == -EPROTONOSUPPORT)
				pr_warn_ratelimited("rail %s: malformed frame from rank %u, closing\n",
						    tc->conn->rail->name,
						    tc->conn->peer->rank);
			nz_tcp_fail(tc, ret);
			return;
		}
		budget -= min_t(unsigned int, budget, ret);
	}
	nz_tcp_rx_kick(tc);
	queue_work(nz_wq, &tc->rx_work);	/* more later, be fair */
}
