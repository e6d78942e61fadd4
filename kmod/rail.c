// SPDX-License-Identifier: GPL-2.0
/*
 * The rail table: NZ_MAX_RAILS slots, module-wide, names unique.
 *
 * Locking: nz_rail_cfg_lock serialises configuration (add, del, set and
 * module exit) including the transport's rail_start/rail_stop, so that a
 * rail deleted and added again never sees its own old listener.
 * nz_rail_lock protects the slots and is held only briefly, so lookups
 * (connections being set up, dumps, the list ioctl) never wait for a
 * listener to start or stop.  A slot changes only under both locks; it may
 * be read under either.  Order: nz_rail_cfg_lock, then nz_rail_lock.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/ethtool.h>
#include <linux/inetdevice.h>
#include <linux/module.h>
#include <linux/error-injection.h>
#include <linux/mutex.h>
#include <linux/netdevice.h>
#include <linux/rtnetlink.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/sysfs.h>
#include <net/net_namespace.h>
#include <net/route.h>
#include <net/sch_generic.h>
#include <net/sock.h>
#include <net/netlink.h>
#include <uapi/linux/nezha_netlink.h>
#include "nezha.h"
#include "frame_mac.h"
#include "rail.h"
#include "transport.h"

static DEFINE_MUTEX(nz_rail_cfg_lock);
static DEFINE_MUTEX(nz_rail_lock);
static struct nz_rail *nz_rails[NZ_MAX_RAILS];

static bool nz_rail_name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

bool nz_rail_name_valid(const char *name)
{
	size_t i, len = strnlen(name, NZ_RAIL_NAME_LEN);

	if (!len || len == NZ_RAIL_NAME_LEN)
		return false;
	/* Not isalnum(): the kernel's ctype also knows Latin-1 letters. */
	for (i = 0; i < len; i++)
		if (!nz_rail_name_char(name[i]))
			return false;
	return true;
}

/* Under either lock. */
static struct nz_rail *nz_rail_find(const char *name)
{
	int i;

	for (i = 0; i < NZ_MAX_RAILS; i++)
		if (nz_rails[i] &&
		    !strncmp(nz_rails[i]->name, name, NZ_RAIL_NAME_LEN))
			return nz_rails[i];
	return NULL;
}

static void nz_rail_release(struct kref *ref)
{
	struct nz_rail *rail = container_of(ref, struct nz_rail, ref);

	nz_transport_put(rail->ops);	/* may let its module go */
	put_net(rail->net);
	kfree(rail);
}

struct nz_rail *nz_rail_get(const char *name)
{
	struct nz_rail *rail;

	mutex_lock(&nz_rail_lock);
	rail = nz_rail_find(name);
	if (rail)
		kref_get(&rail->ref);
	mutex_unlock(&nz_rail_lock);
	return rail;
}

void nz_rail_put(struct nz_rail *rail)
{
	kref_put(&rail->ref, nz_rail_release);
}

u32 nz_rail_state(const struct nz_rail *rail)
{
	struct net_device *dev;
	bool link;

	if (READ_ONCE(rail->admin_down))
		return NZ_RAIL_ADMIN_DOWN;
	rcu_read_lock();
	dev = dev_get_by_index_rcu(rail->net, rail->ifindex);
	link = dev && netif_running(dev) && netif_carrier_ok(dev);
	rcu_read_unlock();
	if (!link)
		return NZ_RAIL_NO_LINK;
	if (READ_ONCE(rail->failed))
		return NZ_RAIL_FAILED;
	if (READ_ONCE(rail->unreachable))
		return NZ_RAIL_UNREACHABLE;
	return NZ_RAIL_UP;
}

/*
 * Bytes waiting in dev's qdiscs: the root's, or each queue's under a
 * multiqueue root (every tx queue points at the root otherwise).
 */
static u32 nz_dev_backlog(struct net_device *dev)
{
	struct Qdisc *q, *last = NULL;
	u32 sum = 0, qlen, backlog;
	unsigned int i;

	for (i = 0; i < dev->real_num_tx_queues; i++) {
		q = rcu_dereference(netdev_get_tx_queue(dev, i)->qdisc);
		if (!q || q == last)
			continue;
		last = q;
		qdisc_qstats_qlen_backlog(q, &qlen, &backlog);
		sum += backlog;
	}
	return sum;
}

/*
 * What delays our answers on a rail beside a dead path (health.rst,
 * "Queues are not silence"): the frames ahead of them in our own queue.
 * On 4 guests of 2 Mbit/s rails a tbf queue held up to 100 ms, and the
 * peers declared healthy paths silent after 48-80 ms.  Every
 * communicator's heartbeat work offers a sample; one every min_us is
 * taken, by whoever gets the lock.
 */
void nz_rail_egress_sample(struct nz_rail *rail, u64 min_us)
{
	u64 now = div_u64(ktime_get_ns(), NSEC_PER_USEC);
	struct rtnl_link_stats64 st;
	struct net_device *dev;
	unsigned int ms;
	u32 backlog;

	if (now - READ_ONCE(rail->egress.at_us) < min_us ||
	    !spin_trylock_bh(&rail->egress_lock))
		return;
	if (now - rail->egress.at_us < min_us)
		goto out;
	rcu_read_lock();
	dev = dev_get_by_index_rcu(rail->net, rail->ifindex);
	if (dev) {
		backlog = nz_dev_backlog(dev);
		dev_get_stats(dev, &st);
		ms = nz_egress_sample(&rail->egress, now, st.tx_bytes, backlog,
				      READ_ONCE(rail->speed_mbps));
		WRITE_ONCE(rail->egress_ms, ms);
		nz_late_note(&rail->late, jiffies,
			     msecs_to_jiffies(NZ_LATE_HOLD_MS), ms);
	}
	rcu_read_unlock();
out:
	spin_unlock_bh(&rail->egress_lock);
}

unsigned int nz_rail_egress_ms(const struct nz_rail *rail)
{
	return READ_ONCE(rail->egress_ms);
}

unsigned int nz_rail_late_ms(struct nz_rail *rail, unsigned long now)
{
	unsigned int ms;

	spin_lock_bh(&rail->egress_lock);
	ms = nz_late_ms(&rail->late, now, msecs_to_jiffies(NZ_LATE_HOLD_MS));
	spin_unlock_bh(&rail->egress_lock);
	return ms;
}

int nz_rail_bind(struct nz_rail *rail, struct socket *sock, __be32 dst)
{
	struct sockaddr_in local = {
		.sin_family = AF_INET, .sin_addr.s_addr = rail->addr,
	};
	int ret;

	if (inet_addr_type(rail->net, dst) != RTN_LOCAL) {
		ret = sock_bindtoindex(sock->sk, rail->ifindex, true);
		if (ret)
			return ret;
	}
	return kernel_bind(sock, (struct sockaddr *)&local, sizeof(local));
}

void nz_rail_set_speed(struct nz_rail *rail, struct net_device *dev)
{
	struct ethtool_link_ksettings ks;
	u32 speed = 0;

	ASSERT_RTNL();
	if (!__ethtool_get_link_ksettings(dev, &ks) &&
	    ks.base.speed != SPEED_UNKNOWN)
		speed = ks.base.speed;
	WRITE_ONCE(rail->speed_mbps, speed);
}

/* Under RTNL: read the link speed of the rail's netdev, if it is there. */
static void nz_rail_read_speed(struct nz_rail *rail)
{
	struct net_device *dev;

	ASSERT_RTNL();
	dev = __dev_get_by_index(rail->net, rail->ifindex);
	if (dev)
		nz_rail_set_speed(rail, dev);
}

/* The transport of proto, with a reference on its module. */
static const struct nz_transport *nz_rail_transport(u32 proto,
						    struct netlink_ext_ack *extack)
{
	const struct nz_transport *ops;

	if (proto != NZ_PROTO_TCP && proto != NZ_PROTO_RDMA &&
	    proto != NZ_PROTO_AGG) {
		NL_SET_ERR_MSG(extack, "unknown rail protocol");
		return ERR_PTR(-EINVAL);
	}
	ops = nz_transport_get(proto);
	if (!ops) {
		NL_SET_ERR_MSG(extack,
			       "RDMA rails need the nezha_rdma module: load nezha_rdma");
		return ERR_PTR(-EPROTONOSUPPORT);
	}
	return ops;
}

/* An agg rail: the node's address; its own port is the kernel's pick. */
static int nz_rail_resolve_agg(struct nz_rail *rail,
			       const struct nz_rail_cfg *cfg,
			       struct netlink_ext_ack *extack)
{
	__be32 a = cfg->agg_addr;

	if (!a) {
		NL_SET_ERR_MSG(extack, "an agg rail needs its aggregator's address");
		return -EDESTADDRREQ;
	}
	if (ipv4_is_multicast(a) || ipv4_is_lbcast(a) || ipv4_is_zeronet(a)) {
		NL_SET_ERR_MSG(extack, "the aggregator must be a unicast address");
		return -EINVAL;
	}
	if (cfg->port) {
		NL_SET_ERR_MSG(extack,
			       "an agg rail takes no port: its probes leave from one the kernel picks");
		return -EINVAL;
	}
	rail->peer_addr = a;
	rail->peer_port = cfg->agg_port ?: NZ_AGG_DEFAULT_PORT;
	rail->port = 0;		/* set by rail_start() */
	return 0;
}

/*
 * The protocol-specific part of the configuration: a transport that has
 * devices of its own resolves them (and may pin the address); for the
 * others the configured device is the netdev.
 */
static int nz_rail_resolve_dev(struct nz_rail *rail,
			       const struct nz_rail_cfg *cfg, __be32 *want,
			       struct netlink_ext_ack *extack)
{
	int ret;

	*want = cfg->addr;
	rail->gid_index = NZ_GID_INDEX_AUTO;
	if (rail->proto == NZ_PROTO_AGG) {
		ret = nz_rail_resolve_agg(rail, cfg, extack);
		if (ret)
			return ret;
	} else if (cfg->agg_addr || cfg->agg_port) {
		NL_SET_ERR_MSG(extack, "an aggregator is for agg rails");
		return -EINVAL;
	}
	if (rail->ops->rail_resolve)
		return rail->ops->rail_resolve(rail, cfg, want, extack);
	if (cfg->netdev[0] || cfg->ib_port ||
	    cfg->gid_index != NZ_GID_INDEX_AUTO) {
		NL_SET_ERR_MSG(extack,
			       "netdev, ib-port and gid-index are for RDMA rails");
		return -EINVAL;
	}

	if (!cfg->dev[0]) {
		NL_SET_ERR_MSG(extack, "no network device");
		return -EINVAL;
	}
	if (strnlen(cfg->dev, IFNAMSIZ) == IFNAMSIZ) {
		NL_SET_ERR_MSG(extack,
			       "device name is longer than 15 characters");
		return -EINVAL;
	}
	strscpy(rail->dev, cfg->dev, sizeof(rail->dev));
	strscpy(rail->netdev, cfg->dev, sizeof(rail->netdev));
	return 0;
}

/*
 * Find the rail's netdev in its namespace and the address to listen on:
 * want if it is one of the netdev's IPv4 addresses, else (want == 0) the
 * netdev's first (primary) one.
 */
static int nz_rail_resolve(struct nz_rail *rail, __be32 want,
			   struct netlink_ext_ack *extack)
{
	const struct in_ifaddr *ifa;
	struct in_device *in_dev;
	struct net_device *dev;
	int ret = -EADDRNOTAVAIL;

	rcu_read_lock();
	dev = dev_get_by_name_rcu(rail->net, rail->netdev);
	if (!dev) {
		rcu_read_unlock();
		NL_SET_ERR_MSG(extack, "no such network device");
		return -ENODEV;
	}
	rail->ifindex = dev->ifindex;
	in_dev = __in_dev_get_rcu(dev);
	if (in_dev) {
		in_dev_for_each_ifa_rcu(ifa, in_dev) {
			if (!want || ifa->ifa_local == want) {
				rail->addr = ifa->ifa_local;
				ret = 0;
				break;
			}
		}
	}
	rcu_read_unlock();
	if (ret && want)
		NL_SET_ERR_MSG(extack, "address is not on the device");
	else if (ret)
		NL_SET_ERR_MSG(extack, "device has no IPv4 address");
	return ret;
}

/* Under nz_rail_cfg_lock: the checks against the other rails. */
static int nz_rail_claim(struct nz_rail *rail, struct netlink_ext_ack *extack)
{
	int i, id = -1;

	for (i = 0; i < NZ_MAX_RAILS; i++) {
		struct nz_rail *r = nz_rails[i];

		if (!r) {
			if (id < 0)
				id = i;
			continue;
		}
		if (!strcmp(r->name, rail->name)) {
			NL_SET_ERR_MSG(extack, "a rail of that name exists");
			return -EEXIST;
		}
	}
	if (id < 0) {
		NL_SET_ERR_MSG(extack, "rail table full (NZ_MAX_RAILS)");
		return -ENOSPC;
	}
	rail->id = id;
	return 0;
}

/* Under nz_rail_cfg_lock, after nz_rail_resolve(). */
static int nz_rail_check_endpoint(const struct nz_rail *rail,
				  struct netlink_ext_ack *extack)
{
	int i;

	for (i = 0; i < NZ_MAX_RAILS; i++) {
		const struct nz_rail *r = nz_rails[i];

		/*
		 * rdma_cm's port space is its own, apart from TCP's; an agg
		 * rail's port is the kernel's pick (0 until it started).
		 */
		if (r && rail->proto != NZ_PROTO_AGG && net_eq(r->net, rail->net) && r->proto == rail->proto &&
		    r->addr == rail->addr && r->port == rail->port) {
			NL_SET_ERR_MSG(extack,
				       "another rail listens on that address and port");
			return -EADDRINUSE;
		}
	}
	return 0;
}

static struct nz_rail *nz_rail_alloc(struct net *net,
				     const struct nz_rail_cfg *cfg,
				     struct netlink_ext_ack *extack)
{
	const struct nz_transport *ops;
	struct nz_rail *rail;
	int err;

	if (!nz_rail_name_valid(cfg->name)) {
		NL_SET_ERR_MSG(extack,
			       "rail name must be 1-15 characters of A-Z a-z 0-9 _ . -");
		return ERR_PTR(-EINVAL);
	}
	if (strnlen(cfg->dev, sizeof(cfg->dev)) == sizeof(cfg->dev) ||
	    strnlen(cfg->netdev, sizeof(cfg->netdev)) == sizeof(cfg->netdev) ||
	    (!cfg->dev[0] && !cfg->netdev[0])) {
		NL_SET_ERR_MSG(extack, "bad device name");
		return ERR_PTR(-EINVAL);
	}
	if (cfg->weight > NZ_MAX_WEIGHT) {
		NL_SET_ERR_MSG(extack, "weight above NZ_MAX_WEIGHT");
		return ERR_PTR(-EINVAL);
	}
	ops = nz_rail_transport(cfg->proto, extack);
	if (IS_ERR(ops))
		return ERR_CAST(ops);
	err = -EOPNOTSUPP;
	if (cfg->frame_mac && !ops->frame_mac) {
		NL_SET_ERR_MSG(extack, "no per-frame MAC on this protocol");
		goto put_ops;
	}
	if (cfg->frame_mac && nz_fmac_get()) {
		NL_SET_ERR_MSG(extack, "no Poly1305 in this kernel for the per-frame MAC");
		goto put_ops;
	}

	err = -ENOMEM;
	rail = kzalloc(sizeof(*rail), GFP_KERNEL);
	if (!rail)
		goto put_ops;
	strscpy(rail->name, cfg->name, sizeof(rail->name));
	rail->proto = cfg->proto;
	rail->ops = ops;
	rail->port = cfg->port ?: NZ_DEFAULT_PORT;
	rail->weight = cfg->weight;
	rail->frame_mac = cfg->frame_mac;
	kref_init(&rail->ref);
	spin_lock_init(&rail->egress_lock);
	rail->net = get_net(net);
	return rail;

put_ops:
	nz_transport_put(ops);
	return ERR_PTR(err);
}

/* The transport's statistics group in the rail's sysfs directory. */
static int nz_rail_group_add(struct nz_rail *rail)
{
	if (!rail->ops->rail_group)
		return 0;
	return sysfs_create_group(&rail->sysdev->kobj, rail->ops->rail_group);
}

static void nz_rail_group_del(struct nz_rail *rail)
{
	if (rail->ops->rail_group)
		sysfs_remove_group(&rail->sysdev->kobj, rail->ops->rail_group);
}

int nz_rail_add(struct net *net, const struct nz_rail_cfg *cfg,
		struct netlink_ext_ack *extack)
{
	struct nz_rail *rail;
	__be32 want;
	int ret;

	rail = nz_rail_alloc(net, cfg, extack);
	if (IS_ERR(rail))
		return PTR_ERR(rail);

	mutex_lock(&nz_rail_cfg_lock);
	ret = nz_rail_claim(rail, extack);
	if (ret)
		goto out_unlock;
	ret = nz_rail_resolve_dev(rail, cfg, &want, extack);
	if (ret)
		goto out_unlock;
	ret = nz_rail_resolve(rail, want, extack);
	if (ret)
		goto out_unlock;
	ret = nz_rail_check_endpoint(rail, extack);
	if (ret)
		goto out_unlock;
	rtnl_lock();
	nz_rail_read_speed(rail);
	rtnl_unlock();
	ret = rail->ops->rail_start(rail);
	if (ret == -EADDRINUSE) {
		NL_SET_ERR_MSG(extack, "address and port are in use");
		goto out_unlock;
	} else if (ret) {
		NL_SET_ERR_MSG(extack, "could not start the rail's listener");
		goto out_unlock;
	}
	ret = nz_sysfs_rail_add(rail);
	if (ret)
		goto out_stop;
	ret = nz_rail_group_add(rail);
	if (ret)
		goto out_sysfs;

	/* Complete: publish it. */
	mutex_lock(&nz_rail_lock);
	nz_rails[rail->id] = rail;
	mutex_unlock(&nz_rail_lock);
	mutex_unlock(&nz_rail_cfg_lock);

	if (rail->proto == NZ_PROTO_AGG)
		pr_info("rail %s: agg dev %s %pI4:%u node %pI4:%u\n",
			rail->name, rail->dev, &rail->addr, rail->port,
			&rail->peer_addr, rail->peer_port);
	else if (rail->ib_port)
		pr_info("rail %s: %s dev %s ib-port %u netdev %s %pI4:%u weight %u speed %u Mbit/s\n",
			rail->name, rail->ops->name, rail->dev, rail->ib_port,
			rail->netdev, &rail->addr, rail->port, rail->weight,
			rail->speed_mbps);
	else
		pr_info("rail %s: %s dev %s %pI4:%u weight %u speed %u Mbit/s\n",
			rail->name, rail->ops->name, rail->dev, &rail->addr,
			rail->port, rail->weight, rail->speed_mbps);
	return 0;

out_sysfs:
	nz_sysfs_rail_del(rail);
out_stop:
	rail->ops->rail_stop(rail);
out_unlock:
	mutex_unlock(&nz_rail_cfg_lock);
	nz_rail_put(rail);
	return ret;
}
ALLOW_ERROR_INJECTION(nz_rail_add, ERRNO);

/* Under nz_rail_cfg_lock. */
static void nz_rail_destroy(struct nz_rail *rail)
{
	/* Unlink: lookups no longer find it, new connections cannot use it. */
	mutex_lock(&nz_rail_lock);
	nz_rails[rail->id] = NULL;
	WRITE_ONCE(rail->dead, true);
	mutex_unlock(&nz_rail_lock);

	/* Close its connections; they drop their references. */
	nz_comm_rail_removed(rail);
	/* No reader of the transport's statistics after this returns. */
	nz_rail_group_del(rail);
	/* Stop accepting; no listener callback runs after this returns. */
	rail->ops->rail_stop(rail);
	/* Waits for readers of its sysfs files. */
	nz_sysfs_rail_del(rail);

	pr_info("rail %s deleted\n", rail->name);
	/* The table's reference; the rail goes with the last one. */
	nz_rail_put(rail);
}

int nz_rail_del(const char *name)
{
	struct nz_rail *rail;

	mutex_lock(&nz_rail_cfg_lock);
	rail = nz_rail_find(name);
	if (rail)
		nz_rail_destroy(rail);
	mutex_unlock(&nz_rail_cfg_lock);
	return rail ? 0 : -ENOENT;
}

int nz_rail_set(const char *name, const u32 *weight, const bool *admin_up)
{
	struct nz_rail *rail;
	bool changed = false;
	int ret = 0;

	if (weight && *weight > NZ_MAX_WEIGHT)
		return -EINVAL;

	mutex_lock(&nz_rail_cfg_lock);
	rail = nz_rail_find(name);
	if (!rail) {
		ret = -ENOENT;
		goto out_unlock;
	}
	if (weight && *weight != rail->weight) {
		WRITE_ONCE(rail->weight, *weight);
		changed = true;
	}
	if (admin_up && *admin_up == rail->admin_down) {
		WRITE_ONCE(rail->admin_down, !*admin_up);
		pr_info("rail %s: administratively %s\n", rail->name,
			*admin_up ? "up" : "down");
		changed = true;
	}
	if (changed)
		nz_comm_rail_changed(rail);
out_unlock:
	mutex_unlock(&nz_rail_cfg_lock);
	return ret;
}

static void nz_rail_fill_info(struct nz_rail_info *info,
			      const struct nz_rail *rail)
{
	memset(info, 0, sizeof(*info));
	strscpy(info->name, rail->name, sizeof(info->name));
	info->id = rail->id;
	info->proto = rail->proto;
	info->state = nz_rail_state(rail);
	info->weight = READ_ONCE(rail->weight);
	info->addr = rail->addr;
	info->port = htons(rail->port);
	info->speed_mbps = READ_ONCE(rail->speed_mbps);
	info->peer_addr = rail->peer_addr;
	info->peer_port = htons(rail->peer_port);
}

int nz_rail_list(struct nz_rail_info *out, u32 cap, u32 *count)
{
	u32 i, n = 0;

	/*
	 * RTNL first, as the netdev notifier holds it when it walks the
	 * rails: the speed is read afresh for the job about to use it (a
	 * speed set with ethtool sends no notification).
	 */
	rtnl_lock();
	mutex_lock(&nz_rail_lock);
	for (i = 0; i < NZ_MAX_RAILS; i++) {
		if (!nz_rails[i])
			continue;
		nz_rail_read_speed(nz_rails[i]);
		if (n < cap)
			nz_rail_fill_info(&out[n], nz_rails[i]);
		n++;
	}
	mutex_unlock(&nz_rail_lock);
	rtnl_unlock();
	*count = n;
	return 0;
}

int nz_rail_for_each(int (*fn)(struct nz_rail *rail, void *arg), void *arg,
		     u32 start)
{
	int ret = 0;
	u32 i;

	mutex_lock(&nz_rail_lock);
	for (i = start; i < NZ_MAX_RAILS && !ret; i++)
		if (nz_rails[i])
			ret = fn(nz_rails[i], arg);
	mutex_unlock(&nz_rail_lock);
	return ret;
}

int nz_rails_init(void)
{
	return 0;
}

/*
 * Module exit: no netlink request or open file can add or use a rail any
 * more.  The connections' references are gone once nz_comm_rail_removed()
 * returned (or their work was queued on nz_wq, destroyed after us).
 */
void nz_rails_exit(void)
{
	int i;

	mutex_lock(&nz_rail_cfg_lock);
	for (i = 0; i < NZ_MAX_RAILS; i++)
		if (nz_rails[i])
			nz_rail_destroy(nz_rails[i]);
	mutex_unlock(&nz_rail_cfg_lock);
}
