// SPDX-License-Identifier: GPL-2.0
/*
 * Aggregation rails (NZ_PROTO_AGG): the path from this node to an
 * in-network aggregation node (tools/nezha-aggd, Documentation/
 * aggregation.rst).  Unlike TCP and RDMA rails it has no listener and no
 * connections per peer: one UDP socket, bound to the rail's device and
 * address and connected to the node.
 *
 * This file keeps the node's health.  Every NZ_AGG_PROBE_MS the rail sends
 * the aggregation protocol's HELLO (64 bytes, a random 8-byte nonce); the
 * node answers any HELLO statelessly with a CHALLENGE of 32 bytes that
 * echoes the nonce (it never amplifies, and rate-limits each source).  A
 * node that answered none of the last NZ_AGG_MISSES probes makes the rail
 * NZ_RAIL_UNREACHABLE; one answer makes it usable again.  A rail starts
 * unreachable, until the node's first answer.
 *
 * Why this long: libnezha reads the state when a communicator is set up
 * and before it sends a share through the node; a share that is under way
 * when the node dies is redone over the point-to-point rails by libnezha's
 * own timeout.  A false "unreachable" costs the node's share of a few
 * allreduces, so a loaded node that drops a few probes (its rate limit, a
 * full socket buffer, a shaped link queueing 20 ms) must not look dead:
 * 20 probes over two seconds must all go unanswered.
 *
 * Nothing a datagram says is believed unless it is a CHALLENGE of exactly
 * 32 bytes whose nonce is one of the outstanding probes'; anything else is
 * counted (agg_dropped) and dropped.  The socket is connected, so the
 * kernel hands us only the node's datagrams (or a forged source).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/inetdevice.h>
#include <linux/ktime.h>
#include <linux/random.h>
#include <linux/slab.h>
#include <linux/sysfs.h>
#include <linux/workqueue.h>
#include <net/sock.h>
#include <net/udp.h>
#include "nezha.h"
#include "rail.h"
#include "transport.h"

#define NZ_AGG_PROBE_MS		100
#define NZ_AGG_MISSES		20
#define NZ_AGG_NONCES		16	/* probes whose answer is still taken */
#define NZ_AGG_RX_BUDGET	64	/* datagrams per run of the rx work */

/* The aggregation protocol (Documentation/aggregation.rst, "Packets"). */
#define NZ_AGG_MAGIC		0x4e5a4147	/* "NZAG" */
#define NZ_AGG_VERSION		2
#define NZ_AGG_HELLO		1
#define NZ_AGG_CHALLENGE	2
#define NZ_AGG_HELLO_LEN	64
#define NZ_AGG_CHALLENGE_LEN	32
#define NZ_AGG_NONCE_LEN	8

struct nz_agg_hdr {
	__be32 magic;
	u8 version;
	u8 type;
	__be16 flags;
	u8 nonce[NZ_AGG_NONCE_LEN];
} __packed;

struct nz_agg_rail {
	struct nz_rail *rail;
	struct socket *sock;
	void (*saved_data_ready)(struct sock *sk);
	struct delayed_work probe_work;
	struct work_struct rx_work;
	spinlock_t lock;			/* the fields below */
	u8 nonce[NZ_AGG_NONCES][NZ_AGG_NONCE_LEN];
	ktime_t sent[NZ_AGG_NONCES];		/* 0: answered or none */
	unsigned int next;			/* slot of the next probe */
	unsigned int silent;			/* probes since an answer */
	bool stopping;
};

/* Under ar->lock: whether the rail's reachability changed. */
static bool nz_agg_set_reachable(struct nz_agg_rail *ar, bool reachable)
{
	struct nz_rail *rail = ar->rail;

	if (READ_ONCE(rail->unreachable) == !reachable)
		return false;
	WRITE_ONCE(rail->unreachable, !reachable);
	if (!reachable)
		atomic64_inc(&rail->stats.agg_lost);
	return true;
}

static void nz_agg_log(struct nz_agg_rail *ar, bool reachable)
{
	struct nz_rail *rail = ar->rail;

	if (reachable)
		pr_info_ratelimited("rail %s: aggregation node %pI4:%u answers (%u us)\n",
				    rail->name, &rail->peer_addr,
				    rail->peer_port,
				    READ_ONCE(rail->peer_rtt_us));
	else
		pr_info_ratelimited("rail %s: aggregation node %pI4:%u unreachable: no answer to %u probes\n",
				    rail->name, &rail->peer_addr,
				    rail->peer_port, NZ_AGG_MISSES);
}

/*
 * The rail's device went and a device of its name came back under another
 * ifindex (health.c adopts it into rail->ifindex): bind the socket to the
 * new one.  A socket bound to no device (the node is on this host) stays.
 */
static void nz_agg_follow_dev(struct nz_agg_rail *ar)
{
	struct sock *sk = ar->sock->sk;
	int bound = READ_ONCE(sk->sk_bound_dev_if);
	int ifindex = READ_ONCE(ar->rail->ifindex);

	if (bound && bound != ifindex)
		sock_bindtoindex(sk, ifindex, true);
}

static void nz_agg_probe_work(struct work_struct *work)
{
	struct nz_agg_rail *ar = container_of(to_delayed_work(work),
					      struct nz_agg_rail, probe_work);
	struct nz_agg_hdr *h;
	u8 pkt[NZ_AGG_HELLO_LEN] = {};
	struct msghdr msg = { .msg_flags = MSG_DONTWAIT | MSG_NOSIGNAL };
	struct kvec vec = { .iov_base = pkt, .iov_len = sizeof(pkt) };
	bool lost = false;

	h = (struct nz_agg_hdr *)pkt;
	h->magic = cpu_to_be32(NZ_AGG_MAGIC);
	h->version = NZ_AGG_VERSION;
	h->type = NZ_AGG_HELLO;
	get_random_bytes(h->nonce, sizeof(h->nonce));

	spin_lock_bh(&ar->lock);
	if (ar->stopping) {
		spin_unlock_bh(&ar->lock);
		return;
	}
	if (ar->silent >= NZ_AGG_MISSES)
		lost = nz_agg_set_reachable(ar, false);
	memcpy(ar->nonce[ar->next], h->nonce, sizeof(h->nonce));
	ar->sent[ar->next] = ktime_get();
	ar->next = (ar->next + 1) % NZ_AGG_NONCES;
	if (ar->silent < U32_MAX)
		ar->silent++;
	spin_unlock_bh(&ar->lock);
	if (lost)
		nz_agg_log(ar, false);

	nz_agg_follow_dev(ar);
	/* A send that fails (no route, link down) is a probe unanswered. */
	kernel_sendmsg(ar->sock, &msg, &vec, 1, sizeof(pkt));
	atomic64_inc(&ar->rail->stats.agg_probes);
	queue_delayed_work(nz_wq, &ar->probe_work,
			   msecs_to_jiffies(NZ_AGG_PROBE_MS));
}

/* One datagram from the node: an answer to an outstanding probe? */
static bool nz_agg_answer(struct nz_agg_rail *ar, const u8 *pkt, int len,
			  int flags)
{
	const struct nz_agg_hdr *h = (const struct nz_agg_hdr *)pkt;
	ktime_t now = ktime_get();
	bool found = false, back = false;
	int i;

	if (len != NZ_AGG_CHALLENGE_LEN || (flags & MSG_TRUNC) ||
	    h->magic != cpu_to_be32(NZ_AGG_MAGIC) ||
	    h->version != NZ_AGG_VERSION || h->type != NZ_AGG_CHALLENGE ||
	    h->flags)
		return false;
	spin_lock_bh(&ar->lock);
	for (i = 0; i < NZ_AGG_NONCES; i++) {
		if (!ar->sent[i] ||
		    memcmp(ar->nonce[i], h->nonce, NZ_AGG_NONCE_LEN))
			continue;
		WRITE_ONCE(ar->rail->peer_rtt_us,
			   (u32)clamp_t(s64, ktime_us_delta(now, ar->sent[i]),
					1, U32_MAX));
		ar->sent[i] = 0;	/* a replay is no second answer */
		ar->silent = 0;
		back = nz_agg_set_reachable(ar, true);
		found = true;
		break;
	}
	spin_unlock_bh(&ar->lock);
	if (back)
		nz_agg_log(ar, true);
	return found;
}

static void nz_agg_rx_work(struct work_struct *work)
{
	struct nz_agg_rail *ar = container_of(work, struct nz_agg_rail,
					      rx_work);
	struct nz_rail *rail = ar->rail;
	int n, errors = 0;

	for (n = 0; n < NZ_AGG_RX_BUDGET; n++) {
		u8 pkt[NZ_AGG_CHALLENGE_LEN];
		struct msghdr msg = {};
		struct kvec vec = { .iov_base = pkt, .iov_len = sizeof(pkt) };
		int len;

		len = kernel_recvmsg(ar->sock, &msg, &vec, 1, sizeof(pkt),
				     MSG_DONTWAIT);
		if (len == -EAGAIN)
			return;
		/*
		 * A pending ICMP error (the node's port closed) is reported
		 * once and is no answer; a second error in a row ends the
		 * run (the next datagram queues it again).
		 */
		if (len < 0) {
			if (++errors > 1)
				return;
			continue;
		}
		if (nz_agg_answer(ar, pkt, len, msg.msg_flags))
			atomic64_inc(&rail->stats.agg_answers);
		else
			atomic64_inc(&rail->stats.agg_dropped);
	}
	/* More queued than one run takes: let other work run first. */
	queue_work(nz_wq, &ar->rx_work);
}

static void nz_agg_data_ready(struct sock *sk)
{
	struct nz_agg_rail *ar;

	read_lock_bh(&sk->sk_callback_lock);
	ar = sk->sk_user_data;
	if (ar)
		queue_work(nz_wq, &ar->rx_work);
	read_unlock_bh(&sk->sk_callback_lock);
}

static int nz_agg_open(struct nz_agg_rail *ar)
{
	struct nz_rail *rail = ar->rail;
	struct sockaddr_in local, node = {
		.sin_family = AF_INET, .sin_addr.s_addr = rail->peer_addr,
		.sin_port = htons(rail->peer_port),
	};
	struct socket *sock;
	int ret;

	ret = sock_create_kern(rail->net, AF_INET, SOCK_DGRAM, IPPROTO_UDP,
			       &sock);
	if (ret)
		return ret;
	ret = nz_rail_bind(rail, sock, rail->peer_addr);
	if (ret)
		goto out_release;
	ret = kernel_connect(sock, (struct sockaddr *)&node, sizeof(node), 0);
	if (ret)
		goto out_release;
	ret = kernel_getsockname(sock, (struct sockaddr *)&local);
	if (ret < 0)
		goto out_release;
	rail->port = ntohs(local.sin_port);

	write_lock_bh(&sock->sk->sk_callback_lock);
	ar->saved_data_ready = sock->sk->sk_data_ready;
	sock->sk->sk_user_data = ar;
	sock->sk->sk_data_ready = nz_agg_data_ready;
	write_unlock_bh(&sock->sk->sk_callback_lock);
	ar->sock = sock;
	return 0;

out_release:
	sock_release(sock);
	return ret;
}

static int nz_agg_rail_start(struct nz_rail *rail)
{
	struct nz_agg_rail *ar;
	int ret;

	ar = kzalloc(sizeof(*ar), GFP_KERNEL);
	if (!ar)
		return -ENOMEM;
	ar->rail = rail;
	spin_lock_init(&ar->lock);
	INIT_DELAYED_WORK(&ar->probe_work, nz_agg_probe_work);
	INIT_WORK(&ar->rx_work, nz_agg_rx_work);
	/* Unreachable until the node answered its first probe. */
	WRITE_ONCE(rail->unreachable, true);
	ret = nz_agg_open(ar);
	if (ret) {
		kfree(ar);
		return ret;
	}
	rail->priv = ar;
	queue_delayed_work(nz_wq, &ar->probe_work, 0);
	return 0;
}

static void nz_agg_rail_stop(struct nz_rail *rail)
{
	struct nz_agg_rail *ar = rail->priv;
	struct sock *sk = ar->sock->sk;

	spin_lock_bh(&ar->lock);
	ar->stopping = true;
	spin_unlock_bh(&ar->lock);
	write_lock_bh(&sk->sk_callback_lock);
	sk->sk_user_data = NULL;
	sk->sk_data_ready = ar->saved_data_ready;
	write_unlock_bh(&sk->sk_callback_lock);
	/* Neither work queues the other: no order between the cancels. */
	cancel_delayed_work_sync(&ar->probe_work);
	cancel_work_sync(&ar->rx_work);
	sock_release(ar->sock);
	rail->priv = NULL;
	kfree(ar);
}

/* ---- sysfs: rail-NAME/agg/ ------------------------------------------------------------------- */

/* rail.c adds the group after rail_start() and removes it before rail_stop(). */
static ssize_t nz_agg_node_show(struct device *d, struct device_attribute *a,
				char *buf)
{
	struct nz_rail *rail = dev_get_drvdata(d);

	return sysfs_emit(buf, "%pI4:%u\n", &rail->peer_addr, rail->peer_port);
}

static ssize_t nz_agg_rtt_us_show(struct device *d,
				  struct device_attribute *a, char *buf)
{
	struct nz_rail *rail = dev_get_drvdata(d);

	return sysfs_emit(buf, "%u\n", READ_ONCE(rail->peer_rtt_us));
}

static struct device_attribute nz_agg_attr_node =
	__ATTR(node, 0444, nz_agg_node_show, NULL);
static struct device_attribute nz_agg_attr_rtt_us =
	__ATTR(rtt_us, 0444, nz_agg_rtt_us_show, NULL);

#define NZ_AGG_STAT(_name)						\
static ssize_t nz_agg_##_name##_show(struct device *d,			\
				     struct device_attribute *a,	\
				     char *buf)				\
{									\
	struct nz_rail *rail = dev_get_drvdata(d);			\
									\
	return sysfs_emit(buf, "%lld\n",				\
			  (long long)atomic64_read(&rail->stats.agg_##_name)); \
}									\
static struct device_attribute nz_agg_attr_##_name =			\
	__ATTR(_name, 0444, nz_agg_##_name##_show, NULL)

NZ_AGG_STAT(probes);
NZ_AGG_STAT(answers);
NZ_AGG_STAT(dropped);
NZ_AGG_STAT(lost);

static struct attribute *nz_agg_attrs[] = {
	&nz_agg_attr_node.attr,
	&nz_agg_attr_rtt_us.attr,
	&nz_agg_attr_probes.attr,
	&nz_agg_attr_answers.attr,
	&nz_agg_attr_dropped.attr,
	&nz_agg_attr_lost.attr,
	NULL,
};

static const struct attribute_group nz_agg_group = {
	.name = "agg",
	.attrs = nz_agg_attrs,
};

/* No connections: NZ_IOC_COMM_CREATE refuses the rail (comm.c). */
const struct nz_transport nz_agg_transport = {
	.name = "agg",
	.proto = NZ_PROTO_AGG,
	.rail_group = &nz_agg_group,
	.rail_start = nz_agg_rail_start,
	.rail_stop = nz_agg_rail_stop,
};
