// SPDX-License-Identifier: GPL-2.0
/*
 * TCP rails: an established connection's transmit work: the next frame
 * from the data path (tx.c), written without blocking, and the unsent
 * bytes its socket may hold (tcp_notsent_kb, tcp_bidir_notsent_kb).
 */
#include <linux/module.h>
#include <linux/net.h>
#include <linux/tcp.h>
#include <net/sock.h>
#include <net/tcp.h>
#include "transport_tcp.h"

#define NZ_TCP_TX_BUDGET	64		/* frames per tx work run */

/*
 * Unsent bytes a connection's socket may hold (TCP_NOTSENT_LOWAT); the
 * rest of its window waits in the module.  When a rail fails, its chunks
 * are resent on the others behind whatever their sockets already hold, so
 * this bounds the reroute's wait.  Off by default: on CPU-starved guests
 * the socket ran dry before the sender was woken (bench-p2p 0.85-0.92 of
 * the rails' sum with 64 KiB, 0.97 without).  0: the system's default.
 */
static unsigned int tcp_notsent_kb;
module_param(tcp_notsent_kb, uint, 0644);
MODULE_PARM_DESC(tcp_notsent_kb,
		 "KiB of unsent data a TCP rail's socket may hold (0: no limit)");

/*
 * The same limit, only while DATA also arrives on the connection (within
 * NZ_TCP_BIDIR_MS): then the ACKs it owes the peer wait behind whatever
 * its socket holds, and a peer whose ACKs come late sees a slow rail and
 * moves its data to another.  In an allreduce over two rails each
 * direction ended up on one rail -- where the other direction carried
 * only ACKs -- at one rail's rate.  A sender whose peer only acknowledges
 * is not limited (no wake-up cost on a one-way stream).  0: no limit.
 */
static unsigned int tcp_bidir_notsent_kb = 64;
module_param(tcp_bidir_notsent_kb, uint, 0644);
MODULE_PARM_DESC(tcp_bidir_notsent_kb,
		 "KiB of unsent data a TCP rail's socket may hold while data also arrives on it (0: no limit)");
#define NZ_TCP_BIDIR_MS		100

/*
 * DATA payloads from this size on go out of the user's pages without a
 * copy (tx.c: the CQE of a send waits until TCP holds none of them).
 * Below it, the copy costs less than pinning pages into socket buffers
 * and calling back as each is freed.  A device without scatter-gather
 * makes TCP copy anyway.
 */
static unsigned int tcp_zerocopy_kb = 16;
module_param(tcp_zerocopy_kb, uint, 0644);
MODULE_PARM_DESC(tcp_zerocopy_kb,
		 "smallest chunk in KiB a TCP rail sends without copying it (0: always copy)");

static int nz_tcp_send(struct nz_tcp_conn *tc, struct iov_iter *iter,
		       bool more, struct ubuf_info *zc)
{
	struct msghdr msg = {
		.msg_flags = MSG_DONTWAIT | MSG_NOSIGNAL | (more ? MSG_MORE : 0),
	};
	int ret;

	if (zc) {
		msg.msg_ubuf = zc;
		msg.msg_flags |= MSG_ZEROCOPY;
	}
	msg.msg_iter = *iter;
	ret = sock_sendmsg(tc->sock, &msg);
	*iter = msg.msg_iter;
	return ret;
}

/*
 * Encode f into buf, followed by its tag if the connection has the
 * per-frame MAC.  Returns the bytes used or a negative errno.
 */
int nz_tcp_tx_encode(struct nz_tcp_conn *tc, const struct nz_frame *f,
		     u8 *buf, size_t size)
{
	int ret;

	if (size < nz_tcp_hdr_len(tc))
		return -ENOSPC;
	ret = nz_wire_encode(f, &tc->conn->peer->comm->lim, buf, size);
	if (ret < 0 || !tc->mac.on)
		return ret;
	return nz_fmac_tag(&tc->mac.tx, buf, ret, buf + ret) ?:
	       ret + NZ_FMAC_TAG_LEN;
}

/* The tag of the DATA payload about to go, sent after it. */
static int nz_tcp_tx_tag_payload(struct nz_tcp_conn *tc)
{
	int ret;

	tc->tx_tag_len = 0;
	tc->tx_tag_sent = 0;
	if (!tc->mac.on || !tc->tx_left)
		return 0;
	ret = nz_fmac_tag_iter(&tc->mac.tx, &tc->tx.iter, tc->tx_left,
			       tc->tx_tag);
	if (ret)
		return ret;
	tc->tx_tag_len = NZ_FMAC_TAG_LEN;
	return 0;
}

/* Push the current frame; returns 0 when it is all out, -EAGAIN, error. */
static int nz_tcp_tx_frame(struct nz_tcp_conn *tc)
{
	int ret;

	while (tc->tx_hdr_sent < tc->tx_hdr_len) {
		struct kvec kv = { tc->tx_hdr + tc->tx_hdr_sent,
				   tc->tx_hdr_len - tc->tx_hdr_sent };
		struct iov_iter it;

		iov_iter_kvec(&it, ITER_SOURCE, &kv, 1, kv.iov_len);
		ret = nz_tcp_send(tc, &it, tc->tx_left > 0, NULL);
		if (ret < 0)
			return ret;
		tc->tx_hdr_sent += ret;
	}
	while (tc->tx_left) {
		ret = nz_tcp_send(tc, &tc->tx.iter, tc->tx_tag_len > 0,
				  tc->tx.zc);
		if (ret < 0)
			return ret;
		if (!ret)
			return -EIO;
		tc->tx_left -= ret;
	}
	while (tc->tx_tag_sent < tc->tx_tag_len) {
		struct kvec kv = { tc->tx_tag + tc->tx_tag_sent,
				   tc->tx_tag_len - tc->tx_tag_sent };
		struct iov_iter it;

		iov_iter_kvec(&it, ITER_SOURCE, &kv, 1, kv.iov_len);
		ret = nz_tcp_send(tc, &it, false, NULL);
		if (ret < 0)
			return ret;
		tc->tx_tag_sent += ret;
	}
	return 0;
}

/* The socket's unsent limit now: tcp_notsent_kb, tcp_bidir_notsent_kb. */
void nz_tcp_set_lowat(struct nz_tcp_conn *tc)
{
	u32 kb = min(READ_ONCE(tcp_notsent_kb), 1U << 20);
	u32 bidir = min(READ_ONCE(tcp_bidir_notsent_kb), 1U << 20);
	unsigned long at = READ_ONCE(tc->rx_data_at);

	if (bidir && at &&
	    time_before(jiffies, at + msecs_to_jiffies(NZ_TCP_BIDIR_MS)))
		kb = kb ? min(kb, bidir) : bidir;
	if (kb << 10 == tc->tx_lowat)
		return;
	tc->tx_lowat = kb << 10;
	/* Read locklessly by TCP (tcp_notsent_lowat()). */
	WRITE_ONCE(tcp_sk(tc->sock->sk)->notsent_lowat, tc->tx_lowat);
}

/* The scheduler's view of what the socket still holds (conn->tp_held). */
static void nz_tcp_update_held(struct nz_tcp_conn *tc)
{
	const struct tcp_sock *tp = tcp_sk(tc->sock->sk);

	/* Lockless, as tcp_notsent_lowat() reads it: a hint, not a count. */
	WRITE_ONCE(tc->conn->tp_held,
		   (u32)(READ_ONCE(tp->write_seq) - READ_ONCE(tp->snd_una)));
}

/*
 * Behind an ACK or echo just encoded, the others queued: one write, one
 * TCP segment for a run of them.  Each frame stands alone on the wire, so
 * the peer reads them as before.  Established connections carry no frame
 * longer than a header (HELLO is the handshake's).
 */
static int nz_tcp_tx_ctrl_batch(struct nz_tcp_conn *tc)
{
	struct nz_conn *conn = tc->conn;
	struct nz_frame f;
	int ret;

	BUILD_BUG_ON(NZ_WIRE_HDR_LEN + NZ_WIRE_HELLO_LEN > NZ_TCP_TX_HDR_MAX);
	while (tc->tx_hdr_len + nz_tcp_hdr_len(tc) <= sizeof(tc->tx_hdr) &&
	       !nz_conn_tx_next_ctrl(conn, &f)) {
		ret = nz_tcp_tx_encode(tc, &f, tc->tx_hdr + tc->tx_hdr_len,
				       sizeof(tc->tx_hdr) - tc->tx_hdr_len);
		if (ret < 0)
			return ret;
		tc->tx_hdr_len += ret;
	}
	return 0;
}

void nz_tcp_tx_work(struct work_struct *work)
{
	struct nz_tcp_conn *tc = container_of(work, struct nz_tcp_conn,
					      tx_work);
	struct nz_conn *conn = tc->conn;
	int n, ret;

	for (n = 0; n < NZ_TCP_TX_BUDGET; n++) {
		if (!tc->tx_busy) {
			nz_tcp_update_held(tc);
			tc->tx.zc_min = min(READ_ONCE(tcp_zerocopy_kb),
					    1U << 20) << 10;
			ret = nz_conn_tx_next(conn, &tc->tx);
			if (ret == -ENODATA)
				return;
			if (ret)
				goto fail;
			ret = nz_tcp_tx_encode(tc, &tc->tx.f, tc->tx_hdr,
					       sizeof(tc->tx_hdr));
			if (ret >= 0) {
				tc->tx_hdr_len = ret;
				tc->tx_left = tc->tx.chunk ?
					      tc->tx.chunk->len : 0;
				ret = nz_tcp_tx_tag_payload(tc);
			}
			if (ret < 0) {
				nz_conn_tx_abort(conn, &tc->tx);
				goto fail;
			}
			tc->tx_hdr_sent = 0;
			if (!tc->tx.chunk) {
				ret = nz_tcp_tx_ctrl_batch(tc);
				if (ret)
					goto fail;
			}
			tc->tx_zc |= !!tc->tx.zc;
			tc->tx_busy = true;
			nz_tcp_set_lowat(tc);
		}
		ret = nz_tcp_tx_frame(tc);
		if (ret == -EAGAIN)
			return;		/* write_space brings us back */
		if (ret)
			goto fail;
		nz_conn_tx_done(conn, &tc->tx);
		tc->tx_busy = false;
	}
	queue_work(nz_wq, &tc->tx_work);
	return;
fail:
	nz_tcp_fail(tc, ret);
}
