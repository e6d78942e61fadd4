// SPDX-License-Identifier: GPL-2.0
/*
 * TCP rails: the listener and the server's side of the handshake, driven
 * by the accepted socket's callbacks with non-blocking calls only (see
 * "server side" below).  A connection that proved the job's key is handed
 * to its communicator (transport_tcp.c).
 */
#include <linux/net.h>
#include <linux/random.h>
#include <linux/slab.h>
#include <net/sock.h>
#include <net/tcp.h>
#include "transport_tcp.h"
#include "handshake.h"

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

/*
 * A handshake frame, or nothing: a few bytes on a socket that has sent
 * next to nothing yet always fit, and the server never waits for a client.
 */
int nz_tcp_send_frame_nowait(struct socket *sock, const struct nz_frame *f)
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

void nz_tcp_send_close_nowait(struct socket *sock, u32 reason)
{
	struct nz_frame f;

	nz_frame_init(&f, NZ_FRAME_CLOSE);
	f.close.reason = reason;
	nz_tcp_send_frame_nowait(sock, &f);
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
	nz_hs_make_challenge(hs->nonce_s, &f);
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
	struct nz_rail *rail = hs->rail;
	struct nz_comm *comm = NULL;
	struct nz_conn *conn = NULL;
	const struct nz_frame_hello *h = &hs->hello.hello;
	u32 reason = NZ_CLOSE_PROTO;
	struct nz_fmac_keys keys = {};
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

	ret = nz_hs_make_welcome(comm, h, hs->nonce_s, &f) ?:
	      nz_hs_server_keys(comm, h, hs->nonce_s, &keys);
	nz_tcp_hs_unhook(hs);
	if (!ret)
		ret = nz_tcp_send_frame_nowait(hs->sock, &f);
	/* Off the list before the socket becomes the connection's. */
	if (!nz_tcp_hs_unlist(hs) && !ret)
		ret = -ESHUTDOWN;
	if (!ret)
		ret = nz_tcp_attach(conn, hs->sock, &keys);
	memzero_explicit(&keys, sizeof(keys));
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
			    reason == NZ_CLOSE_FRAME_MAC ?
			    "per-frame MAC set differently" :
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

int nz_tcp_rail_start(struct nz_rail *rail)
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

void nz_tcp_rail_stop(struct nz_rail *rail)
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
