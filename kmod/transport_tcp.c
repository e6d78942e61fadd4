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
 * side" below).
 *
 * Once established, the socket is driven by two work items, one per
 * direction, woken by the socket's callbacks and by comm.c's kicks; they
 * use non-blocking calls only and keep their progress (a frame half read
 * or half written) in struct nz_tcp_conn.  Payload bytes move directly
 * between the socket and the user's pinned pages.
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

#define NZ_TCP_HS_TIMEOUT	(5 * HZ)
#define NZ_TCP_RX_BUDGET	(2U << 20)	/* bytes per rx work run */
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

struct nz_tcp_rail {
	struct nz_rail *rail;
	struct socket *lsock;
	struct work_struct accept_work;
	void (*saved_data_ready)(struct sock *sk);
	atomic_t handshakes;		/* struct nz_tcp_hs alive */
	/*
	 * Server handshakes in progress, oldest first, so that rail_stop()
	 * can end them and a newcomer can take the place of a stale one.
	 */
	struct mutex hs_lock;
	struct list_head hs_list;
};

enum nz_tcp_hs_state {
	NZ_HS_CHALLENGE,		/* our nonce to send */
	NZ_HS_HELLO,			/* reading the client's HELLO */
	NZ_HS_COMM,			/* waiting for the communicator it names */
};

struct nz_tcp_hs {
	struct delayed_work work;
	struct socket *sock;
	struct nz_rail *rail;		/* holds a reference */
	struct nz_tcp_rail *tr;		/* rail_stop() waits for us */
	struct list_head node;		/* tr->hs_list, under tr->hs_lock */
	bool stop;			/* shut down: rail_stop() or evicted */
	bool authed;			/* the HELLO's MAC checked out */
	enum nz_tcp_hs_state state;
	__be32 src;			/* the client's address */
	unsigned long born;		/* jiffies at accept */
	unsigned long deadline;		/* for the HELLO, then for the comm */
	void (*saved_data_ready)(struct sock *sk);
	void (*saved_state_change)(struct sock *sk);
	u8 nonce_s[NZ_WIRE_NONCE_LEN];
	u32 got;			/* bytes of rx read */
	u8 rx[NZ_WIRE_HDR_LEN + NZ_WIRE_HELLO_LEN];
	struct nz_frame hello;
};

struct nz_tcp_conn {
	struct nz_conn *conn;
	struct socket *sock;
	struct work_struct rx_work;
	struct work_struct tx_work;
	void (*saved_data_ready)(struct sock *sk);
	void (*saved_write_space)(struct sock *sk);
	void (*saved_state_change)(struct sock *sk);

	/* Receive progress; touched by rx_work only. */
	u8 rx_hdr[NZ_WIRE_HDR_LEN];
	u32 rx_hdr_got;
	bool rx_decoded;
	bool rx_in_body;
	bool rx_stalled;
	u64 rx_left;
	struct nz_frame rx_frame;
	struct nz_rx_dest rx_dest;
	u8 *scratch;			/* where drained payload goes */
	unsigned long rx_data_at;	/* jiffies a DATA frame last began */

	/* Transmit progress; touched by tx_work only. */
	struct nz_tx_item tx;
	bool tx_busy;
	u32 tx_lowat;			/* notsent_lowat set on the socket */
	u8 tx_hdr[NZ_WIRE_HDR_LEN + NZ_WIRE_HELLO_LEN];
	u32 tx_hdr_len;
	u32 tx_hdr_sent;
	u64 tx_left;
};

/* Handshake frames carry no DATA: these limits admit none. */
static const struct nz_wire_limits nz_tcp_hs_lim = {
	.max_msg = 0,
	.max_payload = 0,
};

/* ---- blocking helpers for the handshake ------------------------------------ */

static int nz_tcp_send_all(struct socket *sock, const void *buf, size_t len)
{
	struct msghdr msg = { .msg_flags = MSG_NOSIGNAL };
	struct kvec kv = { (void *)buf, len };
	int ret;

	ret = kernel_sendmsg(sock, &msg, &kv, 1, len);
	if (ret == len)
		return 0;
	return ret < 0 ? ret : -EIO;
}

static int nz_tcp_recv_all(struct socket *sock, void *buf, size_t len)
{
	struct msghdr msg = { };
	struct kvec kv = { buf, len };
	int ret;

	if (!len)
		return 0;
	ret = kernel_recvmsg(sock, &msg, &kv, 1, len, MSG_WAITALL);
	if (ret == len)
		return 0;
	if (ret == -EAGAIN)
		return -ETIMEDOUT;
	return ret < 0 ? ret : -ECONNRESET;
}

static int nz_tcp_send_frame(struct socket *sock, const struct nz_frame *f)
{
	u8 buf[NZ_WIRE_HDR_LEN + NZ_WIRE_HELLO_LEN];
	int len;

	len = nz_wire_encode(f, &nz_tcp_hs_lim, buf, sizeof(buf));
	if (len < 0)
		return len;
	return nz_tcp_send_all(sock, buf, len);
}

/* Read one handshake frame expected in state st. */
static int nz_tcp_recv_frame(struct socket *sock, enum nz_wire_state st,
			     struct nz_frame *f)
{
	u8 hdr[NZ_WIRE_HDR_LEN], body[NZ_WIRE_HELLO_LEN];
	int ret;

	ret = nz_tcp_recv_all(sock, hdr, sizeof(hdr));
	if (ret)
		return ret;
	ret = nz_wire_decode_hdr(hdr, &nz_tcp_hs_lim, f);
	if (ret)
		return ret;
	if (!nz_wire_type_expected(st, f->type) || f->len > sizeof(body))
		return -EPROTO;
	ret = nz_tcp_recv_all(sock, body, f->len);
	if (ret)
		return ret;
	ret = nz_wire_decode_body(f, body);
	if (ret)
		return ret;
	return f->type == NZ_FRAME_CLOSE ? -ECONNREFUSED : 0;
}

/*
 * A handshake frame, or nothing: a few bytes on a socket that has sent
 * next to nothing yet always fit, and the server never waits for a client.
 */
static int nz_tcp_send_frame_nowait(struct socket *sock,
				    const struct nz_frame *f)
{
	struct msghdr msg = { .msg_flags = MSG_DONTWAIT | MSG_NOSIGNAL };
	u8 buf[NZ_WIRE_HDR_LEN + NZ_WIRE_HELLO_LEN];
	struct kvec kv;
	int len, ret;

	len = nz_wire_encode(f, &nz_tcp_hs_lim, buf, sizeof(buf));
	if (len < 0)
		return len;
	kv.iov_base = buf;
	kv.iov_len = len;
	ret = kernel_sendmsg(sock, &msg, &kv, 1, len);
	if (ret == len)
		return 0;
	return ret < 0 ? ret : -EIO;
}

static void nz_tcp_send_close_nowait(struct socket *sock, u32 reason)
{
	struct nz_frame f;

	nz_frame_init(&f, NZ_FRAME_CLOSE);
	f.close.reason = reason;
	nz_tcp_send_frame_nowait(sock, &f);
}

static void nz_tcp_set_timeouts(struct socket *sock)
{
	struct sock *sk = sock->sk;

	lock_sock(sk);
	sk->sk_rcvtimeo = NZ_TCP_HS_TIMEOUT;
	sk->sk_sndtimeo = NZ_TCP_HS_TIMEOUT;
	release_sock(sk);
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

static void nz_tcp_fail(struct nz_tcp_conn *tc, int err)
{
	nz_conn_fail(tc->conn, tc, err);
}

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

/* A frame header is complete: act on it.  Returns 0, -EAGAIN or an error. */
static int nz_tcp_rx_header(struct nz_tcp_conn *tc)
{
	struct nz_conn *conn = tc->conn;
	struct nz_frame *f = &tc->rx_frame;
	int ret;

	if (!tc->rx_decoded) {
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
	return 0;
}

static int nz_tcp_rx_body(struct nz_tcp_conn *tc)
{
	struct nz_rx_dest *d = &tc->rx_dest;
	int ret;

	if (tc->rx_left) {
		if (d->drain)
			ret = nz_tcp_recv_buf(tc, tc->scratch,
					      min_t(u64, tc->rx_left, PAGE_SIZE));
		else
			ret = nz_tcp_recv(tc, &d->iter);
		if (ret <= 0)
			return ret;
		tc->rx_left -= ret;
		if (tc->rx_left)
			return ret;
	}
	tc->rx_in_body = false;
	tc->rx_hdr_got = 0;
	tc->rx_decoded = false;
	ret = nz_conn_rx_data_done(tc->conn, d);
	d->msg = NULL;
	return ret ? ret : 1;
}

static void nz_tcp_rx_work(struct work_struct *work)
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
		} else if (tc->rx_hdr_got < NZ_WIRE_HDR_LEN) {
			ret = nz_tcp_recv_buf(tc, tc->rx_hdr + tc->rx_hdr_got,
					      NZ_WIRE_HDR_LEN - tc->rx_hdr_got);
			if (ret > 0)
				tc->rx_hdr_got += ret;
		} else {
			ret = nz_tcp_rx_header(tc);
			if (!ret)
				ret = 1;
		}
		if (ret == -EAGAIN)
			return;
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
	queue_work(nz_wq, &tc->rx_work);	/* more later, be fair */
}

static int nz_tcp_send(struct nz_tcp_conn *tc, struct iov_iter *iter,
		       bool more)
{
	struct msghdr msg = {
		.msg_flags = MSG_DONTWAIT | MSG_NOSIGNAL | (more ? MSG_MORE : 0),
	};
	int ret;

	msg.msg_iter = *iter;
	ret = sock_sendmsg(tc->sock, &msg);
	*iter = msg.msg_iter;
	return ret;
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
		ret = nz_tcp_send(tc, &it, tc->tx_left > 0);
		if (ret < 0)
			return ret;
		tc->tx_hdr_sent += ret;
	}
	while (tc->tx_left) {
		ret = nz_tcp_send(tc, &tc->tx.iter, false);
		if (ret < 0)
			return ret;
		if (!ret)
			return -EIO;
		tc->tx_left -= ret;
	}
	return 0;
}

/* The socket's unsent limit now: tcp_notsent_kb, tcp_bidir_notsent_kb. */
static void nz_tcp_set_lowat(struct nz_tcp_conn *tc)
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

static void nz_tcp_tx_work(struct work_struct *work)
{
	struct nz_tcp_conn *tc = container_of(work, struct nz_tcp_conn,
					      tx_work);
	struct nz_conn *conn = tc->conn;
	int n, ret;

	for (n = 0; n < NZ_TCP_TX_BUDGET; n++) {
		if (!tc->tx_busy) {
			nz_tcp_update_held(tc);
			ret = nz_conn_tx_next(conn, &tc->tx);
			if (ret == -ENODATA)
				return;
			if (ret)
				goto fail;
			ret = nz_wire_encode(&tc->tx.f, &conn->peer->comm->lim,
					     tc->tx_hdr, sizeof(tc->tx_hdr));
			if (ret < 0) {
				nz_conn_tx_abort(conn, &tc->tx);
				goto fail;
			}
			tc->tx_hdr_len = ret;
			tc->tx_hdr_sent = 0;
			tc->tx_left = tc->tx.chunk ? tc->tx.chunk->len : 0;
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
	kfree(tc->scratch);
	kfree(tc);
}

/* Hand an established socket to the connection; takes conn->io_lock. */
static int nz_tcp_attach(struct nz_conn *conn, struct socket *sock)
{
	struct nz_tcp_conn *tc = nz_tcp_conn_new(conn, sock);
	struct sock *sk = sock->sk;
	int ret;

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
};

static atomic_t nz_tcp_lingering = ATOMIC_INIT(0);
static bool nz_tcp_exiting;

static void nz_tcp_linger_work(struct work_struct *work)
{
	struct nz_tcp_linger *l = container_of(to_delayed_work(work),
					       struct nz_tcp_linger, work);
	struct sock *sk = l->sock->sk;

	nz_tcp_discard_rx(l->sock);
	if (!((1 << READ_ONCE(sk->sk_state)) &
	      (TCPF_FIN_WAIT2 | TCPF_TIME_WAIT | TCPF_CLOSE)) &&
	    !READ_ONCE(sk->sk_err) && !READ_ONCE(nz_tcp_exiting) &&
	    time_before(jiffies, l->deadline)) {
		queue_delayed_work(nz_wq, &l->work, NZ_TCP_LINGER_POLL);
		return;
	}
	kernel_sock_shutdown(l->sock, SHUT_RDWR);
	sock_release(l->sock);
	kfree(l);
	if (atomic_dec_and_test(&nz_tcp_lingering))
		wake_up_var(&nz_tcp_lingering);
}

/* Hand sock to a linger; false (sock still ours) if out of memory. */
static bool nz_tcp_linger(struct socket *sock)
{
	struct nz_tcp_linger *l = kzalloc(sizeof(*l), GFP_KERNEL);

	if (!l)
		return false;
	l->sock = sock;
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

	/* Leaving the job: say so, unless a frame is half written. */
	leaving = conn->state == NZ_CONN_DEAD && !tc->tx_busy;
	if (leaving) {
		nz_tcp_send_close_nowait(tc->sock, NZ_CLOSE_NORMAL);
		nz_tcp_discard_rx(tc->sock);
	}
	if (tc->rx_in_body)
		nz_conn_rx_data_abort(conn, &tc->rx_dest);
	if (tc->tx_busy) {
		nz_conn_tx_abort(conn, &tc->tx);
		tc->tx_busy = false;
	}
	if (!leaving || !nz_tcp_linger(tc->sock)) {
		kernel_sock_shutdown(tc->sock, SHUT_RDWR);
		sock_release(tc->sock);
	}
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

/* ---- client side --------------------------------------------------------------- */

static int nz_tcp_client_handshake(struct nz_conn *conn, struct socket *sock)
{
	u8 nonce_s[NZ_WIRE_NONCE_LEN], nonce_c[NZ_WIRE_NONCE_LEN];
	struct nz_frame f;
	int ret;

	ret = nz_tcp_recv_frame(sock, NZ_WS_CLIENT_WAIT_CHALLENGE, &f);
	if (ret)
		return ret;
	memcpy(nonce_s, f.challenge.nonce_s, sizeof(nonce_s));

	ret = nz_conn_make_hello(conn, nonce_s, &f);
	if (ret)
		return ret;
	ret = nz_tcp_send_frame(sock, &f);
	if (ret)
		return ret;
	memcpy(nonce_c, f.hello.nonce_c, sizeof(nonce_c));
	ret = nz_tcp_recv_frame(sock, NZ_WS_CLIENT_WAIT_WELCOME, &f);
	if (ret)
		return ret;
	return nz_conn_check_welcome(conn, &f.welcome, nonce_c, nonce_s);
}

static int nz_tcp_conn_connect(struct nz_conn *conn)
{
	struct nz_comm *comm = conn->peer->comm;
	const struct nz_comm_addr *a;
	struct nz_rail *rail = conn->rail;
	struct sockaddr_in local = { .sin_family = AF_INET };
	struct sockaddr_in peer = { .sin_family = AF_INET };
	struct socket *sock;
	int ret;

	a = &comm->addrs[conn->peer->rank * comm->nrails + conn->slot];
	peer.sin_addr.s_addr = a->addr;
	peer.sin_port = a->port;
	local.sin_addr.s_addr = rail->addr;

	ret = sock_create_kern(rail->net, AF_INET, SOCK_STREAM, IPPROTO_TCP,
			       &sock);
	if (ret)
		return ret;
	ret = nz_conn_dial_begin(conn, sock);
	if (ret)
		goto out_release;
	nz_tcp_set_timeouts(sock);
	/* Leave by the rail's device, unless the peer is on this host. */
	if (inet_addr_type(rail->net, a->addr) != RTN_LOCAL) {
		ret = sock_bindtoindex(sock->sk, rail->ifindex, true);
		if (ret)
			goto out_release;
	}
	ret = kernel_bind(sock, (struct sockaddr *)&local, sizeof(local));
	if (ret)
		goto out_release;
	ret = kernel_connect(sock, (struct sockaddr *)&peer, sizeof(peer), 0);
	if (ret)
		goto out_release;
	ret = nz_tcp_client_handshake(conn, sock);
	if (ret) {
		if (ret == -EACCES) {
			atomic64_inc(&rail->stats.hs_refused);
			pr_warn_ratelimited("rail %s: rank %u failed to authenticate\n",
					    rail->name, conn->peer->rank);
		}
		goto out_release;
	}
	/* Aborted after the handshake: the socket is shut, do not attach. */
	ret = nz_conn_dial_end(conn);
	if (!ret)
		ret = nz_tcp_attach(conn, sock);
	if (ret)
		goto out_release;
	return 0;

out_release:
	nz_conn_dial_end(conn);
	sock_release(sock);
	return ret;
}

/*
 * Teardown: a dial in progress gives up at once.  Shutting the socket down
 * wakes a connect() waiting for SYN-ACK (or for ARP) and a handshake
 * waiting to read: both return an error and the connect work ends.
 */
static void nz_tcp_dial_abort(void *dial)
{
	kernel_sock_shutdown(dial, SHUT_RDWR);
}

/* ---- server side --------------------------------------------------------------- */

/*
 * The ranks of a job create their communicators at about the same time; a
 * client may knock before ours exists.  Give it NZ_TCP_COMM_GRACE_MS.
 */
#define NZ_TCP_COMM_GRACE_MS	2000

/*
 * What an unauthenticated client can hold.  Each handshake that has not
 * shown the job's key costs a socket and a struct nz_tcp_hs, no worker.
 * Per rail at most NZ_TCP_MAX_HANDSHAKES of them wait, of those at most
 * NZ_TCP_MAX_HS_PER_SRC from one address (a node with many ranks opens
 * one per rank pair at once: 64 with 8 ranks on each side).  A newcomer
 * past either limit takes the place of the oldest such handshake (of its
 * address, at that limit) if that one has waited NZ_TCP_HS_STALE already:
 * a client with the key answers the CHALLENGE within a round trip, so it
 * is never the stale one, while strangers that connect and stay silent
 * lose their places to each newcomer.  Only when all are fresher is the
 * newcomer refused (stats/handshakes_refused) -- its client retries.
 */
#define NZ_TCP_MAX_HANDSHAKES	1024
#define NZ_TCP_MAX_HS_PER_SRC	256
#define NZ_TCP_HS_STALE		(HZ / 2)
/* Those ended for a newcomer still unwinding: bounds memory meanwhile. */
#define NZ_TCP_MAX_HS_ALIVE	(2 * NZ_TCP_MAX_HANDSHAKES)

/* Queue hs's work now, unless it is gone; under sk_callback_lock. */
static void nz_tcp_hs_wake(struct sock *sk)
{
	struct nz_tcp_hs *hs;

	read_lock_bh(&sk->sk_callback_lock);
	hs = sk->sk_user_data;
	if (hs)
		mod_delayed_work(nz_wq, &hs->work, 0);
	read_unlock_bh(&sk->sk_callback_lock);
}

/* Give the socket its stock callbacks back: no more wake-ups of hs. */
static void nz_tcp_hs_unhook(struct nz_tcp_hs *hs)
{
	struct sock *sk = hs->sock->sk;

	write_lock_bh(&sk->sk_callback_lock);
	sk->sk_user_data = NULL;
	sk->sk_data_ready = hs->saved_data_ready;
	sk->sk_state_change = hs->saved_state_change;
	write_unlock_bh(&sk->sk_callback_lock);
}

/* End hs early (rail_stop(), or a newcomer's place); under tr->hs_lock. */
static void nz_tcp_hs_end(struct nz_tcp_hs *hs)
{
	lockdep_assert_held(&hs->tr->hs_lock);
	WRITE_ONCE(hs->stop, true);
	kernel_sock_shutdown(hs->sock, SHUT_RDWR);
	mod_delayed_work(nz_wq, &hs->work, 0);
}

/*
 * Leave tr's list; false if hs was ended meanwhile.  After this, only hs's
 * own work can queue it again.
 */
static bool nz_tcp_hs_unlist(struct nz_tcp_hs *hs)
{
	struct nz_tcp_rail *tr = hs->tr;
	bool live;

	mutex_lock(&tr->hs_lock);
	list_del_init(&hs->node);
	live = !hs->stop;
	mutex_unlock(&tr->hs_lock);
	return live;
}

static int nz_tcp_hs_challenge(struct nz_tcp_hs *hs)
{
	struct nz_frame f;

	get_random_bytes(hs->nonce_s, sizeof(hs->nonce_s));
	nz_frame_init(&f, NZ_FRAME_CHALLENGE);
	memcpy(f.challenge.nonce_s, hs->nonce_s, sizeof(hs->nonce_s));
	return nz_tcp_send_frame_nowait(hs->sock, &f);
}

/*
 * Read what has come of the HELLO, without waiting: 0 once it is whole
 * and decoded, -EAGAIN for more, or an error.
 */
static int nz_tcp_hs_read(struct nz_tcp_hs *hs)
{
	struct msghdr msg = { .msg_flags = MSG_DONTWAIT };
	struct kvec kv;
	u32 need;
	int ret;

	for (;;) {
		need = NZ_WIRE_HDR_LEN;
		if (hs->got >= NZ_WIRE_HDR_LEN)
			need += hs->hello.len;
		if (hs->got == need)
			break;
		kv.iov_base = hs->rx + hs->got;
		kv.iov_len = need - hs->got;
		ret = kernel_recvmsg(hs->sock, &msg, &kv, 1, kv.iov_len,
				     MSG_DONTWAIT);
		if (ret == 0)
			return -ECONNRESET;
		if (ret < 0)
			return ret;
		hs->got += ret;
		if (hs->got != NZ_WIRE_HDR_LEN)
			continue;
		ret = nz_wire_decode_hdr(hs->rx, &nz_tcp_hs_lim, &hs->hello);
		if (ret)
			return ret;
		if (!nz_wire_type_expected(NZ_WS_SERVER_WAIT_HELLO,
					   hs->hello.type) ||
		    hs->hello.len > NZ_WIRE_HELLO_LEN)
			return -EPROTO;
	}
	ret = nz_wire_decode_body(&hs->hello, hs->rx + NZ_WIRE_HDR_LEN);
	if (ret)
		return ret;
	return hs->hello.type == NZ_FRAME_CLOSE ? -ECONNREFUSED : 0;
}

/*
 * The server's side of a handshake, one step per run: woken by the
 * socket (data, close), by rail_stop() or a newcomer (hs->stop), and by
 * its own timer (the deadline, or the next look for the communicator).
 */
static void nz_tcp_server_hs_work(struct work_struct *work)
{
	struct nz_tcp_hs *hs = container_of(to_delayed_work(work),
					    struct nz_tcp_hs, work);
	struct nz_tcp_rail *tr = hs->tr;
	u8 in[NZ_WIRE_WELCOME_MAC_LEN];
	struct nz_rail *rail = hs->rail;
	struct nz_comm *comm = NULL;
	struct nz_conn *conn = NULL;
	const struct nz_frame_hello *h = &hs->hello.hello;
	u32 reason = NZ_CLOSE_PROTO;
	struct nz_frame f;
	int ret = -ESHUTDOWN;

	if (READ_ONCE(hs->stop))
		goto refuse;
	if (hs->state == NZ_HS_CHALLENGE) {
		ret = nz_tcp_hs_challenge(hs);
		if (ret)
			goto refuse;
		hs->state = NZ_HS_HELLO;
	}
	if (hs->state == NZ_HS_HELLO) {
		ret = nz_tcp_hs_read(hs);
		if (ret == -EAGAIN && time_before(jiffies, hs->deadline))
			goto again;
		if (ret) {
			if (ret == -EAGAIN)
				ret = -ETIMEDOUT;
			goto refuse;
		}
		hs->state = NZ_HS_COMM;
		hs->deadline = jiffies + msecs_to_jiffies(NZ_TCP_COMM_GRACE_MS);
	}
	reason = NZ_CLOSE_IDENTITY;
	ret = 0;
	if (READ_ONCE(rail->dead) || READ_ONCE(rail->admin_down))
		goto refuse;
	comm = nz_comm_find_hello(rail, h, hs->nonce_s, &conn, &reason);
	if (!comm) {
		if (reason == NZ_CLOSE_IDENTITY &&
		    time_before(jiffies, hs->deadline)) {
			queue_delayed_work(nz_wq, &hs->work,
					   msecs_to_jiffies(20));
			return;
		}
		goto refuse;
	}
	mutex_lock(&tr->hs_lock);
	hs->authed = !hs->stop;
	mutex_unlock(&tr->hs_lock);
	ret = -ESHUTDOWN;
	if (!hs->authed)
		goto refuse;

	nz_frame_init(&f, NZ_FRAME_WELCOME);
	f.welcome.incarnation = comm->incarnation;
	nz_wire_welcome_mac_input(h->nonce_c, hs->nonce_s, comm->job_id,
				  comm->rank, h->src_rank, h->rail,
				  comm->incarnation, in);
	ret = nz_comm_mac(comm, in, sizeof(in), f.welcome.mac);
	nz_tcp_hs_unhook(hs);
	if (!ret)
		ret = nz_tcp_send_frame_nowait(hs->sock, &f);
	/* Off the list before the socket becomes the connection's. */
	if (!nz_tcp_hs_unlist(hs) && !ret)
		ret = -ESHUTDOWN;
	if (!ret)
		ret = nz_tcp_attach(conn, hs->sock);
	if (ret)
		sock_release(hs->sock);	/* not the client's fault */
	goto out;

again:
	/* The deadline may have passed since: then at once, not in 49 days. */
	queue_delayed_work(nz_wq, &hs->work,
			   time_before(jiffies, hs->deadline) ?
			   hs->deadline - jiffies : 0);
	return;

refuse:
	nz_tcp_hs_unhook(hs);
	if (ret != -ECONNRESET && ret != -ESHUTDOWN)
		nz_tcp_send_close_nowait(hs->sock, reason);
	atomic64_inc(&rail->stats.hs_refused);
	pr_info_ratelimited("rail %s: refused a connection (%s, %d)\n",
			    rail->name,
			    reason == NZ_CLOSE_AUTH ? "bad secret" :
			    reason == NZ_CLOSE_IDENTITY ? "unknown job or rank" :
			    ret == -ETIMEDOUT ? "no HELLO in time" :
			    ret == -ESHUTDOWN ? "ended for a newer one" :
			    "malformed handshake", ret);
	nz_tcp_hs_unlist(hs);
	kernel_sock_shutdown(hs->sock, SHUT_RDWR);
	sock_release(hs->sock);
out:
	/* Nobody else queues it now (unhooked, unlisted): drop a pending run. */
	cancel_delayed_work(&hs->work);
	if (comm)
		nz_comm_put(comm);
	/* tr may be freed once the count is 0: wake_up_var() only hashes it. */
	if (atomic_dec_and_test(&tr->handshakes))
		wake_up_var(&tr->handshakes);
	nz_rail_put(rail);
	kfree(hs);
}

/*
 * Room for a handshake from src: see NZ_TCP_MAX_HANDSHAKES.  Ends the
 * stale one whose place it takes; under tr->hs_lock.
 */
static bool nz_tcp_hs_room(struct nz_tcp_rail *tr, __be32 src)
{
	struct nz_tcp_hs *hs, *oldest = NULL, *oldest_src = NULL, *victim;
	unsigned int waiting = 0, from_src = 0;

	lockdep_assert_held(&tr->hs_lock);
	list_for_each_entry(hs, &tr->hs_list, node) {
		if (hs->stop || hs->authed)
			continue;
		waiting++;
		oldest = oldest ?: hs;
		if (hs->src == src) {
			from_src++;
			oldest_src = oldest_src ?: hs;
		}
	}
	if (from_src >= NZ_TCP_MAX_HS_PER_SRC)
		victim = oldest_src;
	else if (waiting >= NZ_TCP_MAX_HANDSHAKES)
		victim = oldest;
	else
		return true;
	if (time_before(jiffies, victim->born + NZ_TCP_HS_STALE))
		return false;
	nz_tcp_hs_end(victim);
	return true;
}

static void nz_tcp_accept_work(struct work_struct *work)
{
	struct nz_tcp_rail *tr = container_of(work, struct nz_tcp_rail,
					      accept_work);
	struct sockaddr_in sin;
	struct socket *sock;
	struct nz_tcp_hs *hs;
	struct sock *sk;
	bool room;

	while (!kernel_accept(tr->lsock, &sock, O_NONBLOCK)) {
		sk = sock->sk;
		/*
		 * TCP clones the listener: the child inherits our listener
		 * callback and its user data.  Give it the stock ones back
		 * until it is ours.
		 */
		write_lock_bh(&sk->sk_callback_lock);
		sk->sk_user_data = NULL;
		sk->sk_data_ready = tr->saved_data_ready;
		write_unlock_bh(&sk->sk_callback_lock);
		hs = NULL;
		if (atomic_inc_return(&tr->handshakes) <= NZ_TCP_MAX_HS_ALIVE &&
		    kernel_getpeername(sock, (struct sockaddr *)&sin) > 0)
			hs = kzalloc(sizeof(*hs), GFP_KERNEL);
		if (hs) {
			hs->sock = sock;
			hs->rail = tr->rail;
			hs->tr = tr;
			hs->src = sin.sin_addr.s_addr;
			hs->born = jiffies;
			hs->deadline = jiffies + NZ_TCP_HS_TIMEOUT;
			INIT_DELAYED_WORK(&hs->work, nz_tcp_server_hs_work);
			INIT_LIST_HEAD(&hs->node);
			mutex_lock(&tr->hs_lock);
			room = nz_tcp_hs_room(tr, hs->src);
			if (room)
				list_add_tail(&hs->node, &tr->hs_list);
			mutex_unlock(&tr->hs_lock);
			if (!room) {
				kfree(hs);
				hs = NULL;
			}
		}
		if (!hs) {
			atomic_dec(&tr->handshakes);
			atomic64_inc(&tr->rail->stats.hs_refused);
			pr_info_ratelimited("rail %s: refused a connection (too many handshakes waiting)\n",
					    tr->rail->name);
			sock_release(sock);
			continue;
		}
		kref_get(&tr->rail->ref);
		write_lock_bh(&sk->sk_callback_lock);
		hs->saved_data_ready = sk->sk_data_ready;
		hs->saved_state_change = sk->sk_state_change;
		sk->sk_user_data = hs;
		sk->sk_data_ready = nz_tcp_hs_wake;
		sk->sk_state_change = nz_tcp_hs_wake;
		write_unlock_bh(&sk->sk_callback_lock);
		mod_delayed_work(nz_wq, &hs->work, 0);
	}
}

/*
 * Also called for a child not accepted yet: TCP clones the listener's
 * callbacks into it.  Only the listener may queue the accept work -- a
 * child's copy of the pointer may outlive the rail (rail_stop() resets the
 * listener, not its children), and a child needs no wake-up: the accept
 * work reads it once it has taken it.
 */
static void nz_tcp_listen_data_ready(struct sock *sk)
{
	struct nz_tcp_rail *tr;

	read_lock_bh(&sk->sk_callback_lock);
	tr = sk->sk_user_data;
	if (tr && sk->sk_state == TCP_LISTEN)
		queue_work(nz_wq, &tr->accept_work);
	read_unlock_bh(&sk->sk_callback_lock);
}

static int nz_tcp_rail_start(struct nz_rail *rail)
{
	struct sockaddr_in sin = {
		.sin_family = AF_INET,
		.sin_addr.s_addr = rail->addr,
		.sin_port = htons(rail->port),
	};
	struct nz_tcp_rail *tr;
	struct sock *sk;
	int ret;

	tr = kzalloc(sizeof(*tr), GFP_KERNEL);
	if (!tr)
		return -ENOMEM;
	tr->rail = rail;
	INIT_WORK(&tr->accept_work, nz_tcp_accept_work);
	mutex_init(&tr->hs_lock);
	INIT_LIST_HEAD(&tr->hs_list);
	ret = sock_create_kern(rail->net, AF_INET, SOCK_STREAM, IPPROTO_TCP,
			       &tr->lsock);
	if (ret)
		goto out_free;
	sk = tr->lsock->sk;
	sock_set_reuseaddr(sk);
	ret = kernel_bind(tr->lsock, (struct sockaddr *)&sin, sizeof(sin));
	if (ret)
		goto out_release;
	ret = kernel_listen(tr->lsock, 128);
	if (ret)
		goto out_release;
	write_lock_bh(&sk->sk_callback_lock);
	sk->sk_user_data = tr;
	tr->saved_data_ready = sk->sk_data_ready;
	sk->sk_data_ready = nz_tcp_listen_data_ready;
	write_unlock_bh(&sk->sk_callback_lock);
	rail->priv = tr;
	return 0;

out_release:
	sock_release(tr->lsock);
out_free:
	kfree(tr);
	return ret;
}

static void nz_tcp_rail_stop(struct nz_rail *rail)
{
	struct nz_tcp_rail *tr = rail->priv;
	struct nz_tcp_hs *hs;
	struct sock *sk;

	if (!tr)
		return;
	sk = tr->lsock->sk;
	write_lock_bh(&sk->sk_callback_lock);
	sk->sk_user_data = NULL;
	sk->sk_data_ready = tr->saved_data_ready;
	write_unlock_bh(&sk->sk_callback_lock);
	cancel_work_sync(&tr->accept_work);
	kernel_sock_shutdown(tr->lsock, SHUT_RDWR);
	sock_release(tr->lsock);
	/*
	 * Handshakes in flight hold the rail, not tr.  End them -- their
	 * reads fail at once on a shut socket, and a wait for the job's
	 * communicator sees hs->stop -- then wait for the last one.
	 */
	mutex_lock(&tr->hs_lock);
	list_for_each_entry(hs, &tr->hs_list, node)
		nz_tcp_hs_end(hs);
	mutex_unlock(&tr->hs_lock);
	wait_var_event(&tr->handshakes, !atomic_read(&tr->handshakes));
	rail->priv = NULL;
	kfree(tr);
}

const struct nz_transport nz_tcp_transport = {
	.name = "tcp",
	.proto = NZ_PROTO_TCP,
	.restart_rtts = 3,
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
