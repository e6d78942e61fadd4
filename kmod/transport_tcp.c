// SPDX-License-Identifier: GPL-2.0
/*
 * TCP rails: kernel TCP sockets.
 *
 * Each rail listens on its address.  The rank with the higher number
 * connects; the two ends then prove knowledge of the job's secret
 * (Documentation/wire.rst): the server sends a fresh nonce (CHALLENGE), the
 * client answers with HELLO and an HMAC over both nonces and its identity,
 * the server answers WELCOME with its own HMAC.  The client's side runs in
 * its dial work item with blocking socket calls bounded by
 * NZ_TCP_HS_TIMEOUT.  The server's side is driven by the socket's callbacks
 * with non-blocking calls only: a stranger that connects and says nothing
 * holds a little memory until its deadline, never a worker (see "server
 * side" in tcp_listen.c).
 *
 * Once established, the socket is driven by two work items, one per
 * direction, woken by the socket's callbacks and by conn.c's kicks; they
 * use non-blocking calls only and keep their progress (a frame half read
 * or half written) in struct nz_tcp_conn.  Payload bytes move directly
 * between the socket and the user's pinned pages.
 *
 * This file: the transport's operations and an established connection's
 * socket (callbacks, attach, close, linger).  The client's side is in
 * tcp_dial.c, the listener and the server's side in tcp_listen.c, the
 * receive work in tcp_rx.c, the transmit work in tcp_tx.c; what they share
 * is in transport_tcp.h.
 */
#include <linux/module.h>
#include <linux/net.h>
#include <linux/slab.h>
#include <linux/random.h>
#include <linux/delay.h>
#include <linux/sizes.h>
#include <linux/tcp.h>
#include <linux/inet.h>
#include <net/sock.h>
#include <net/tcp.h>
#include <net/route.h>
#include <crypto/algapi.h>
#include "comm.h"
#include "transport.h"
#include "transport_tcp.h"

/*
 * Congestion control of the rails' connections; empty: the namespace's
 * default.  A loss-based one (cubic) fills a bottleneck's buffer, and a
 * rerouted chunk or an ACK then waits behind that queue; a model-based one
 * (bbr) keeps it short.
 */
static char tcp_cc[TCP_CA_NAME_MAX];
module_param_string(tcp_cc, tcp_cc, sizeof(tcp_cc), 0644);
MODULE_PARM_DESC(tcp_cc,
		 "congestion control of TCP rails, e.g. bbr (empty: the system's default; new connections)");

static void nz_tcp_set_cc(struct sock *sk, const struct nz_rail *rail)
{
	char name[TCP_CA_NAME_MAX];
	int ret;

	kernel_param_lock(THIS_MODULE);
	strscpy(name, tcp_cc, sizeof(name));
	kernel_param_unlock(THIS_MODULE);
	name[strcspn(name, "\n")] = '\0';	/* as echo writes it */
	if (!name[0])
		return;
	ret = tcp_setsockopt(sk, SOL_TCP, TCP_CONGESTION,
			     KERNEL_SOCKPTR(name), strlen(name));
	if (ret)
		pr_warn_ratelimited("rail %s: congestion control %s: error %d, the default stays\n",
				    rail->name, name, ret);
}

/* ---- established connections ------------------------------------------------ */

static void nz_tcp_data_ready(struct sock *sk)
{
	struct nz_tcp_conn *tc;

	read_lock_bh(&sk->sk_callback_lock);
	tc = sk->sk_user_data;
	if (tc) {
		/* Liveness is bytes arriving, however late we read them. */
		nz_conn_rx_mark(tc->conn);
		queue_work(nz_wq, &tc->rx_work);
	}
	read_unlock_bh(&sk->sk_callback_lock);
}

static void nz_tcp_write_space(struct sock *sk)
{
	struct nz_tcp_conn *tc;

	read_lock_bh(&sk->sk_callback_lock);
	tc = sk->sk_user_data;
	if (tc && sk_stream_is_writeable(sk)) {
		clear_bit(SOCK_NOSPACE, &sk->sk_socket->flags);
		queue_work(nz_wq, &tc->tx_work);
	}
	read_unlock_bh(&sk->sk_callback_lock);
}

static void nz_tcp_state_change(struct sock *sk)
{
	struct nz_tcp_conn *tc;

	read_lock_bh(&sk->sk_callback_lock);
	tc = sk->sk_user_data;
	if (tc && sk->sk_state != TCP_ESTABLISHED)
		queue_work(nz_wq, &tc->rx_work);	/* it sees the error */
	read_unlock_bh(&sk->sk_callback_lock);
}

void nz_tcp_fail(struct nz_tcp_conn *tc, int err)
{
	nz_conn_fail(tc->conn, tc, err);
}

static struct nz_tcp_conn *nz_tcp_conn_new(struct nz_conn *conn,
					   struct socket *sock)
{
	struct nz_tcp_conn *tc = kzalloc(sizeof(*tc), GFP_KERNEL);

	if (!tc)
		return NULL;
	tc->scratch = kmalloc(PAGE_SIZE, GFP_KERNEL);
	if (!tc->scratch) {
		kfree(tc);
		return NULL;
	}
	tc->conn = conn;
	tc->sock = sock;
	INIT_WORK(&tc->rx_work, nz_tcp_rx_work);
	INIT_WORK(&tc->tx_work, nz_tcp_tx_work);
	return tc;
}

static void nz_tcp_conn_free(struct nz_tcp_conn *tc)
{
	kfree_sensitive(tc->rx_mac);
	kfree(tc->scratch);
	kfree_sensitive(tc);		/* the MAC keys */
}

/*
 * Hand an established socket to the connection, with its per-frame MAC
 * keys (zeroed here); takes conn->io_lock.
 */
int nz_tcp_attach(struct nz_conn *conn, struct socket *sock,
		  struct nz_fmac_keys *keys)
{
	struct nz_tcp_conn *tc = nz_tcp_conn_new(conn, sock);
	struct sock *sk = sock->sk;
	int ret;

	if (tc && keys->on) {
		tc->mac = *keys;
		tc->rx_mac = kmalloc(nz_fmac_desc_size(), GFP_KERNEL);
		if (!tc->rx_mac) {
			nz_tcp_conn_free(tc);
			tc = NULL;
		}
	}
	memzero_explicit(keys, sizeof(*keys));
	if (!tc)
		return -ENOMEM;
	tcp_sock_set_nodelay(sk);
	nz_tcp_set_cc(sk, conn->rail);
	lock_sock(sk);
	/* What is queued behind a failed rail's chunks: see tcp_notsent_kb. */
	nz_tcp_set_lowat(tc);
	sk->sk_rcvtimeo = MAX_SCHEDULE_TIMEOUT;
	sk->sk_sndtimeo = MAX_SCHEDULE_TIMEOUT;
	release_sock(sk);

	mutex_lock(&conn->io_lock);
	nz_conn_detach(conn, -ECONNRESET);	/* a stale one, if any */
	ret = nz_conn_attach(conn, tc);
	if (!ret) {
		write_lock_bh(&sk->sk_callback_lock);
		sk->sk_user_data = tc;
		tc->saved_data_ready = sk->sk_data_ready;
		tc->saved_write_space = sk->sk_write_space;
		tc->saved_state_change = sk->sk_state_change;
		sk->sk_data_ready = nz_tcp_data_ready;
		sk->sk_write_space = nz_tcp_write_space;
		sk->sk_state_change = nz_tcp_state_change;
		write_unlock_bh(&sk->sk_callback_lock);
		/* Frames may already wait in the socket. */
		queue_work(nz_wq, &tc->rx_work);
		queue_work(nz_wq, &tc->tx_work);
	}
	mutex_unlock(&conn->io_lock);
	if (ret)
		nz_tcp_conn_free(tc);
	return ret;
}

/* A last frame of a connection whose works are stopped, or nothing. */
static void nz_tcp_send_last(struct nz_tcp_conn *tc, const struct nz_frame *f)
{
	struct msghdr msg = { .msg_flags = MSG_DONTWAIT | MSG_NOSIGNAL };
	u8 buf[NZ_WIRE_HDR_LEN + NZ_FMAC_TAG_LEN];
	struct kvec kv = { buf };
	int len;

	len = nz_tcp_tx_encode(tc, f, buf, sizeof(buf));
	if (len < 0)
		return;
	kv.iov_len = len;
	kernel_sendmsg(tc->sock, &msg, &kv, 1, len);
}

/*
 * Closing a TCP socket with unread bytes in its receive queue resets the
 * connection (RFC 2525, 2.17): the peer gets an RST in place of our CLOSE
 * and FIN, and what we had queued for it -- the CLOSE, the last ACKs --
 * is thrown away.  A rank that leaves the job often has such bytes: the
 * sender resent chunks it already had.  Drop them first, so the peer sees
 * an orderly leave.  Bounded: a peer that keeps sending must not hold us.
 */
static void nz_tcp_discard_rx(struct socket *sock)
{
	struct msghdr msg = {};
	int i, n;

	for (i = 0; i < 64; i++) {
		n = kernel_recvmsg(sock, &msg, NULL, 0, SZ_1M,
				   MSG_DONTWAIT | MSG_TRUNC);
		if (n <= 0)
			break;
	}
}

/*
 * A socket that leaves the job in order: closed at once it could still
 * lose our last frames.  Bytes the peer sends after we stopped reading
 * (its retransmissions, chunks already on their way) draw a reset, and a
 * reset throws away what we still had to retransmit -- the CLOSE and the
 * last ACKs among it, when a segment of them was lost: the sender's last
 * transfer then failed with ECONNRESET.  So only writing is shut down (a
 * FIN after our frames); the socket goes on reading and dropping what
 * comes, on its own timer, until the peer acknowledged all we sent or
 * closed as well, NZ_TCP_LINGER at most.  Nobody waits for it but rmmod.
 */
#define NZ_TCP_LINGER		(2 * HZ)
#define NZ_TCP_LINGER_POLL	(HZ / 100 ?: 1)

struct nz_tcp_linger {
	struct delayed_work work;
	struct socket *sock;
	unsigned long deadline;
	bool zc;		/* it may hold pages of zero-copy sends */
};

/*
 * Release a socket.  One that may still hold the pages of zero-copy sends
 * (tx.c) is reset, which frees what it had yet to transmit: closed in
 * order, an orphan would retransmit from those pages to a peer that went
 * away for minutes, and every send and rmmod would wait for it.
 */
static void nz_tcp_release(struct socket *sock, bool zc)
{
	if (zc)
		sock_no_linger(sock->sk);
	kernel_sock_shutdown(sock, SHUT_RDWR);
	sock_release(sock);
}

static atomic_t nz_tcp_lingering = ATOMIC_INIT(0);
static bool nz_tcp_exiting;

static void nz_tcp_linger_work(struct work_struct *work)
{
	struct nz_tcp_linger *l = container_of(to_delayed_work(work),
					       struct nz_tcp_linger, work);
	struct sock *sk = l->sock->sk;
	bool acked;

	nz_tcp_discard_rx(l->sock);
	acked = (1 << READ_ONCE(sk->sk_state)) &
		(TCPF_FIN_WAIT2 | TCPF_TIME_WAIT | TCPF_CLOSE);
	if (!acked && !READ_ONCE(sk->sk_err) && !READ_ONCE(nz_tcp_exiting) &&
	    time_before(jiffies, l->deadline)) {
		queue_delayed_work(nz_wq, &l->work, NZ_TCP_LINGER_POLL);
		return;
	}
	/* Acknowledged: nothing of ours left, and no reset for the peer. */
	nz_tcp_release(l->sock, l->zc && !acked);
	kfree(l);
	if (atomic_dec_and_test(&nz_tcp_lingering))
		wake_up_var(&nz_tcp_lingering);
}

/* Hand sock to a linger; false (sock still ours) if out of memory. */
static bool nz_tcp_linger(struct socket *sock, bool zc)
{
	struct nz_tcp_linger *l = kzalloc(sizeof(*l), GFP_KERNEL);

	if (!l)
		return false;
	l->sock = sock;
	l->zc = zc;
	l->deadline = jiffies + NZ_TCP_LINGER;
	INIT_DELAYED_WORK(&l->work, nz_tcp_linger_work);
	atomic_inc(&nz_tcp_lingering);
	kernel_sock_shutdown(sock, SHUT_WR);
	queue_delayed_work(nz_wq, &l->work, NZ_TCP_LINGER_POLL);
	return true;
}

/* Module exit, before the workqueue goes: end the lingers at once. */
void nz_tcp_exit(void)
{
	WRITE_ONCE(nz_tcp_exiting, true);
	wait_var_event(&nz_tcp_lingering, !atomic_read(&nz_tcp_lingering));
}

static void nz_tcp_conn_close(struct nz_conn *conn)
{
	struct nz_tcp_conn *tc = conn->tp;
	struct sock *sk = tc->sock->sk;
	bool leaving;

	/* No callback queues our work after this; then no work runs. */
	write_lock_bh(&sk->sk_callback_lock);
	sk->sk_user_data = NULL;
	sk->sk_data_ready = tc->saved_data_ready;
	sk->sk_write_space = tc->saved_write_space;
	sk->sk_state_change = tc->saved_state_change;
	write_unlock_bh(&sk->sk_callback_lock);
	cancel_work_sync(&tc->rx_work);
	cancel_work_sync(&tc->tx_work);

	/*
	 * Leaving the job: say so, unless a frame is half written -- and say
	 * first what we have (DONE): frames still queued are dropped here.
	 */
	leaving = conn->state == NZ_CONN_DEAD && !tc->tx_busy;
	if (leaving) {
		struct nz_frame done;

		if (nz_conn_done_frame(conn, &done))
			nz_tcp_send_last(tc, &done);
		nz_frame_init(&done, NZ_FRAME_CLOSE);
		done.close.reason = NZ_CLOSE_NORMAL;
		nz_tcp_send_last(tc, &done);
		nz_tcp_discard_rx(tc->sock);
	}
	if (tc->rx_in_body)
		nz_conn_rx_data_abort(conn, &tc->rx_dest);
	if (tc->tx_busy) {
		nz_conn_tx_abort(conn, &tc->tx);
		tc->tx_busy = false;
	}
	if (!leaving || !nz_tcp_linger(tc->sock, tc->tx_zc))
		nz_tcp_release(tc->sock, tc->tx_zc);
	nz_tcp_conn_free(tc);
}

/*
 * TCP stamps every segment that carries an acceptable ACK -- in an
 * established connection, every segment that arrives, in order or not
 * (tcp_ack()) -- with the low 32 bits of jiffies.
 */
static unsigned long nz_tcp_conn_rx_seen(struct nz_conn *conn)
{
	struct nz_tcp_conn *tc = conn->tp;
	unsigned long now = jiffies;
	s32 ago = (u32)now - READ_ONCE(tcp_sk(tc->sock->sk)->rcv_tstamp);

	return ago > 0 ? now - ago : now;
}

/* TCP's windowed minimum of its round-trip samples; ~0U before the first. */
static u32 nz_tcp_conn_min_rtt_us(struct nz_conn *conn)
{
	struct nz_tcp_conn *tc = conn->tp;
	u32 us = tcp_min_rtt(tcp_sk(tc->sock->sk));

	return us == ~0U ? 0 : us;
}

static void nz_tcp_conn_kick(struct nz_conn *conn)
{
	struct nz_tcp_conn *tc = conn->tp;

	queue_work(nz_wq, &tc->tx_work);
	if (READ_ONCE(tc->rx_stalled))
		queue_work(nz_wq, &tc->rx_work);
}

/* The rx work checks its frame's message first thing. */
static void nz_tcp_conn_release_msg(struct nz_conn *conn)
{
	struct nz_tcp_conn *tc = conn->tp;

	queue_work(nz_wq, &tc->rx_work);
}

const struct nz_transport nz_tcp_transport = {
	.name = "tcp",
	.proto = NZ_PROTO_TCP,
	.restart_rtts = 3,
	.frame_mac = true,
	.rail_start = nz_tcp_rail_start,
	.rail_stop = nz_tcp_rail_stop,
	.conn_connect = nz_tcp_conn_connect,
	.conn_kick = nz_tcp_conn_kick,
	.conn_rx_seen = nz_tcp_conn_rx_seen,
	.conn_min_rtt_us = nz_tcp_conn_min_rtt_us,
	.conn_close = nz_tcp_conn_close,
	.dial_abort = nz_tcp_dial_abort,
	.conn_release_msg = nz_tcp_conn_release_msg,
};
