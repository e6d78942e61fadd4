// SPDX-License-Identifier: GPL-2.0
/*
 * nezha_rdma.ko: RDMA rails.  Module init and exit, the transport's rail
 * operations (which RDMA device, port and address; the rdma_cm listener),
 * the RDMA devices coming and going (an ib_client), and the rail's
 * statistics in sysfs.  The connections are in rdma_conn.c, rdma_qp.c and
 * transport_rdma.c.
 *
 * A rail's listener is an rdma_cm ID bound to the rail's IPv4 address and
 * port in the RDMA_PS_TCP port space (rdma_cm's own, apart from the
 * kernel's TCP ports).  When the device goes away (`rdma link delete`,
 * hot unplug), our ib_client's remove callback runs before rdma_cm's own:
 * it destroys the listener, fails every connection of the rail and waits
 * until they are gone, so the device's unregistration finds nothing of
 * ours.  The rail is then "failed"; when a device of the same name comes
 * back, the listener is set up again and connections return.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/inetdevice.h>
#include <linux/netdevice.h>
#include <linux/slab.h>
#include <net/ipv6.h>
#include <rdma/ib_cache.h>
#include "rdma.h"

#define NZ_RDMA_BACKLOG		128
#define NZ_RDMA_RELISTEN_TRIES	30	/* one a second */

struct workqueue_struct *nz_rdma_wq;
static LIST_HEAD(nz_rdma_rails);
DEFINE_MUTEX(nz_rdma_rails_lock);

/* ---- which device, port and address ------------------------------------------- */

/* The netdev of a RoCE port (that of its GID 0), held; NULL on IB. */
static struct net_device *nz_rdma_port_netdev(struct ib_device *ibdev,
					      u32 port)
{
	const struct ib_gid_attr *attr;
	struct net_device *ndev;

	attr = rdma_get_gid_attr(ibdev, port, 0);
	if (IS_ERR(attr))
		return NULL;
	rcu_read_lock();
	ndev = rdma_read_gid_attr_ndev_rcu(attr);
	if (IS_ERR(ndev))
		ndev = NULL;
	else
		dev_hold(ndev);
	rcu_read_unlock();
	rdma_put_gid_attr(attr);
	return ndev;
}

static int nz_rdma_pick_port(struct ib_device *ibdev,
			     const struct nz_rail_cfg *cfg,
			     struct net_device *ndev, u32 *port,
			     struct netlink_ext_ack *extack)
{
	struct net_device *pndev;
	u32 p;

	if (cfg->ib_port) {
		if (!rdma_is_port_valid(ibdev, cfg->ib_port)) {
			NL_SET_ERR_MSG(extack, "the RDMA device has no such port");
			return -EINVAL;
		}
		*port = cfg->ib_port;
		return 0;
	}
	if (!ndev) {
		*port = rdma_start_port(ibdev);
		return 0;
	}
	rdma_for_each_port(ibdev, p) {
		pndev = nz_rdma_port_netdev(ibdev, p);
		dev_put(pndev);
		if (pndev == ndev) {
			*port = p;
			return 0;
		}
	}
	NL_SET_ERR_MSG(extack, "no port of the RDMA device uses that netdev");
	return -ENODEV;
}

/* gid-index G: the rail uses the IPv4 address held in GID entry G. */
static int nz_rdma_gid_addr(struct ib_device *ibdev, u32 port, u32 index,
			    __be32 *addr, struct netlink_ext_ack *extack)
{
	const struct ib_gid_attr *attr;
	const struct in6_addr *gid;
	__be32 a;

	attr = rdma_get_gid_attr(ibdev, port, index);
	if (IS_ERR(attr)) {
		NL_SET_ERR_MSG(extack, "no GID at that index");
		return -EINVAL;
	}
	gid = (const struct in6_addr *)attr->gid.raw;
	if (!ipv6_addr_v4mapped(gid)) {
		rdma_put_gid_attr(attr);
		NL_SET_ERR_MSG(extack, "that GID holds no IPv4 address");
		return -EINVAL;
	}
	a = gid->s6_addr32[3];
	rdma_put_gid_attr(attr);
	if (*addr && *addr != a) {
		NL_SET_ERR_MSG(extack, "addr is not the address of that GID");
		return -EINVAL;
	}
	*addr = a;
	return 0;
}

/* The RDMA device of the rail, by name or behind cfg->netdev; held. */
static struct ib_device *nz_rdma_find_dev(struct nz_rail *rail,
					  const struct nz_rail_cfg *cfg,
					  struct net_device **ndevp,
					  struct netlink_ext_ack *extack)
{
	struct ib_device *ibdev;
	struct net_device *ndev;

	if (!cfg->netdev[0]) {
		ibdev = ib_device_get_by_name(cfg->dev, RDMA_DRIVER_UNKNOWN);
		if (!ibdev)
			NL_SET_ERR_MSG(extack, "no such RDMA device");
		return ibdev ?: ERR_PTR(-ENODEV);
	}
	ndev = dev_get_by_name(rail->net, cfg->netdev);
	if (!ndev) {
		NL_SET_ERR_MSG(extack, "no such network device");
		return ERR_PTR(-ENODEV);
	}
	ibdev = ib_device_get_by_netdev(ndev, RDMA_DRIVER_UNKNOWN);
	if (!ibdev) {
		dev_put(ndev);
		NL_SET_ERR_MSG(extack,
			       "no RDMA device on that netdev (rdma link add ...)");
		return ERR_PTR(-ENODEV);
	}
	if (cfg->dev[0] && strcmp(cfg->dev, dev_name(&ibdev->dev))) {
		ib_device_put(ibdev);
		dev_put(ndev);
		NL_SET_ERR_MSG(extack, "dev and netdev name different RDMA devices");
		return ERR_PTR(-EINVAL);
	}
	*ndevp = ndev;
	return ibdev;
}

static int nz_rdma_rail_resolve(struct nz_rail *rail,
				const struct nz_rail_cfg *cfg, __be32 *addr,
				struct netlink_ext_ack *extack)
{
	struct net_device *ndev = NULL, *pndev = NULL;
	struct ib_device *ibdev;
	u32 port;
	int ret;

	ibdev = nz_rdma_find_dev(rail, cfg, &ndev, extack);
	if (IS_ERR(ibdev))
		return PTR_ERR(ibdev);
	ret = nz_rdma_pick_port(ibdev, cfg, ndev, &port, extack);
	if (ret)
		goto out;
	ret = -EOPNOTSUPP;
	if (!rdma_cap_ib_cm(ibdev, port)) {
		NL_SET_ERR_MSG(extack,
			       "only InfiniBand and RoCE ports (iWARP has no immediate data)");
		goto out;
	}
	ret = -ENODEV;
	pndev = nz_rdma_port_netdev(ibdev, port);
	if (ndev && pndev != ndev) {
		NL_SET_ERR_MSG(extack, "that port does not use that netdev");
		goto out;
	}
	if (!pndev && cfg->addr)	/* InfiniBand: the IPoIB netdev */
		pndev = ip_dev_find(rail->net, cfg->addr);
	if (!pndev) {
		NL_SET_ERR_MSG(extack,
			       "the port has no netdev: give the address (addr)");
		ret = -EADDRNOTAVAIL;
		goto out;
	}
	if (!net_eq(dev_net(pndev), rail->net)) {
		NL_SET_ERR_MSG(extack, "the device's netdev is in another namespace");
		goto out;
	}
	if (cfg->gid_index != NZ_GID_INDEX_AUTO) {
		ret = nz_rdma_gid_addr(ibdev, port, cfg->gid_index, addr, extack);
		if (ret)
			goto out;
	}
	strscpy(rail->dev, dev_name(&ibdev->dev), sizeof(rail->dev));
	strscpy(rail->netdev, pndev->name, sizeof(rail->netdev));
	rail->ib_port = port;
	rail->gid_index = cfg->gid_index;
	ret = 0;
out:
	dev_put(pndev);
	dev_put(ndev);
	ib_device_put(ibdev);
	return ret;
}

/* ---- the listener --------------------------------------------------------------- */

/*
 * The listener lost its device before our ib_client heard of it: let
 * rdma_cm destroy it (return 1), unless rail_stop or the client has it.
 */
static int nz_rdma_listen_removed(struct nz_rdma_rail *rr,
				  struct rdma_cm_id *id)
{
	bool mine = false;

	mutex_lock(&rr->lock);
	if (rr->listen_id == id) {
		rr->listen_id = NULL;
		rr->ibdev = NULL;
		mine = true;
	}
	mutex_unlock(&rr->lock);
	if (mine)
		WRITE_ONCE(rr->rail->failed, true);
	return mine;
}

static int nz_rdma_listen_handler(struct rdma_cm_id *id,
				  struct rdma_cm_event *ev)
{
	struct nz_rdma_rail *rr = id->context;

	switch (ev->event) {
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		/* id is the new connection's ID */
		return nz_rdma_cm_request(rr, id, ev);
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		return nz_rdma_listen_removed(rr, id);
	default:
		return 0;
	}
}

/* Listen on the rail's address and port, on the rail's device. */
static int nz_rdma_listen(struct nz_rdma_rail *rr)
{
	struct nz_rail *rail = rr->rail;
	struct sockaddr_in sin = {
		.sin_family = AF_INET,
		.sin_addr.s_addr = rail->addr,
		.sin_port = htons(rail->port),
	};
	struct rdma_cm_id *id;
	int ret;

	id = rdma_create_id(rail->net, nz_rdma_listen_handler, rr, RDMA_PS_TCP,
			    IB_QPT_RC);
	if (IS_ERR(id))
		return PTR_ERR(id);
	ret = rdma_bind_addr(id, (struct sockaddr *)&sin);
	if (ret)
		goto out_destroy;
	/* The address must lead to the configured device and port. */
	ret = -EADDRNOTAVAIL;
	if (!id->device || strcmp(dev_name(&id->device->dev), rail->dev) ||
	    id->port_num != rail->ib_port)
		goto out_destroy;
	mutex_lock(&rr->lock);
	ret = -ESHUTDOWN;
	if (!rr->stopping) {
		rr->listen_id = id;
		rr->ibdev = id->device;
		ret = 0;
	}
	mutex_unlock(&rr->lock);
	if (ret)
		goto out_destroy;
	ret = rdma_listen(id, NZ_RDMA_BACKLOG);
	if (!ret)
		return 0;
	mutex_lock(&rr->lock);
	rr->listen_id = NULL;
	rr->ibdev = NULL;
	mutex_unlock(&rr->lock);
out_destroy:
	rdma_destroy_id(id);
	return ret;
}

/* ---- rails --------------------------------------------------------------------------- */

static void nz_rdma_relisten_work(struct work_struct *work)
{
	struct nz_rdma_rail *rr = container_of(to_delayed_work(work),
					       struct nz_rdma_rail,
					       relisten_work);
	struct nz_rail *rail = rr->rail;

	if (!nz_rdma_listen(rr)) {
		WRITE_ONCE(rail->failed, false);
		pr_info("rail %s: RDMA device %s is back\n", rail->name,
			rail->dev);
		return;
	}
	mutex_lock(&rr->lock);
	if (!rr->stopping && ++rr->relisten_tries < NZ_RDMA_RELISTEN_TRIES)
		queue_delayed_work(nz_rdma_wq, &rr->relisten_work, HZ);
	mutex_unlock(&rr->lock);
}

static int nz_rdma_rail_start(struct nz_rail *rail)
{
	struct nz_rdma_rail *rr;
	int ret;

	rr = kzalloc(sizeof(*rr), GFP_KERNEL);
	if (!rr)
		return -ENOMEM;
	rr->rail = rail;
	mutex_init(&rr->lock);
	INIT_LIST_HEAD(&rr->conns);
	init_waitqueue_head(&rr->waitq);
	INIT_DELAYED_WORK(&rr->relisten_work, nz_rdma_relisten_work);

	/* Under the list lock: a device removal sees all of it or none. */
	mutex_lock(&nz_rdma_rails_lock);
	ret = nz_rdma_listen(rr);
	if (!ret) {
		list_add_tail(&rr->node, &nz_rdma_rails);
		rail->priv = rr;
	}
	mutex_unlock(&nz_rdma_rails_lock);
	if (ret)
		kfree(rr);
	return ret;
}

/*
 * The rail is unlinked and its connections closed (nz_rail_destroy()):
 * stop listening, end the handshakes still running, free.
 */
static void nz_rdma_rail_stop(struct nz_rail *rail)
{
	struct nz_rdma_rail *rr = rail->priv;
	struct rdma_cm_id *id;

	if (!rr)
		return;
	mutex_lock(&nz_rdma_rails_lock);
	list_del(&rr->node);
	rail->priv = NULL;		/* no new client connection */
	mutex_unlock(&nz_rdma_rails_lock);

	mutex_lock(&rr->lock);
	rr->stopping = true;
	id = rr->listen_id;
	rr->listen_id = NULL;
	mutex_unlock(&rr->lock);
	cancel_delayed_work_sync(&rr->relisten_work);
	/* Waits for a CONNECT_REQUEST handler that is running. */
	if (id)
		rdma_destroy_id(id);
	nz_rdma_rail_flush(rr, -ESHUTDOWN);
	kfree(rr);
}

/* ---- devices coming and going ------------------------------------------------------------ */

static void nz_rdma_rail_down(struct nz_rdma_rail *rr, struct ib_device *dev)
{
	struct nz_rail *rail = rr->rail;
	struct rdma_cm_id *id;

	mutex_lock(&rr->lock);
	if (rr->ibdev != dev) {
		mutex_unlock(&rr->lock);
		return;
	}
	id = rr->listen_id;
	rr->listen_id = NULL;
	rr->ibdev = NULL;		/* no new connection */
	mutex_unlock(&rr->lock);

	WRITE_ONCE(rail->failed, true);
	atomic64_inc(&rr->stats.device_removals);
	pr_warn("rail %s: RDMA device %s removed, rail failed until it returns\n",
		rail->name, dev_name(&dev->dev));
	if (id)
		rdma_destroy_id(id);
	nz_rdma_rail_flush(rr, -ENODEV);
}

/*
 * Runs before rdma_cm's own removal (clients go in reverse order of
 * registration), from the thread unregistering the device: when it
 * returns, nothing of ours uses the device.
 */
static void nz_rdma_remove_one(struct ib_device *dev, void *client_data)
{
	struct nz_rdma_rail *rr;

	mutex_lock(&nz_rdma_rails_lock);
	list_for_each_entry(rr, &nz_rdma_rails, node)
		nz_rdma_rail_down(rr, dev);
	mutex_unlock(&nz_rdma_rails_lock);
}

/* A device appeared: a failed rail of that device name listens again. */
static int nz_rdma_add_one(struct ib_device *dev)
{
	struct nz_rdma_rail *rr;

	mutex_lock(&nz_rdma_rails_lock);
	list_for_each_entry(rr, &nz_rdma_rails, node) {
		if (!READ_ONCE(rr->rail->failed) ||
		    strcmp(rr->rail->dev, dev_name(&dev->dev)))
			continue;
		mutex_lock(&rr->lock);
		rr->relisten_tries = 0;
		if (!rr->stopping)
			mod_delayed_work(nz_rdma_wq, &rr->relisten_work, 0);
		mutex_unlock(&rr->lock);
	}
	mutex_unlock(&nz_rdma_rails_lock);
	return 0;
}

static struct ib_client nz_rdma_client = {
	.name = "nezha_rdma",
	.add = nz_rdma_add_one,
	.remove = nz_rdma_remove_one,
};

/* ---- sysfs: rail-NAME/rdma/ --------------------------------------------------------------- */

/*
 * rail.c removes this group before rail_stop() frees rail->priv, and adds
 * it after rail_start() set it: priv is valid in every show().
 */
static struct nz_rdma_rail *nz_rdma_dev_rail(struct device *d)
{
	struct nz_rail *rail = dev_get_drvdata(d);

	return rail->priv;
}

#define NZ_RDMA_STAT(_name, _read)					\
static ssize_t nz_rdma_##_name##_show(struct device *d,		\
				      struct device_attribute *a,	\
				      char *buf)			\
{									\
	struct nz_rdma_rail *rr = nz_rdma_dev_rail(d);			\
									\
	return sysfs_emit(buf, "%lld\n", (long long)_read(&rr->stats._name)); \
}									\
static struct device_attribute nz_rdma_attr_##_name =			\
	__ATTR(_name, 0444, nz_rdma_##_name##_show, NULL)

NZ_RDMA_STAT(send_posted, atomic64_read);
NZ_RDMA_STAT(send_completed, atomic64_read);
NZ_RDMA_STAT(recv_posted, atomic64_read);
NZ_RDMA_STAT(recv_completed, atomic64_read);
NZ_RDMA_STAT(wc_errors, atomic64_read);
NZ_RDMA_STAT(async_errors, atomic64_read);
NZ_RDMA_STAT(credit_stalls, atomic64_read);
NZ_RDMA_STAT(credit_updates, atomic64_read);
NZ_RDMA_STAT(cm_rejects, atomic64_read);
NZ_RDMA_STAT(device_removals, atomic64_read);
NZ_RDMA_STAT(qps, atomic_read);

static ssize_t nz_rdma_device_show(struct device *d, struct device_attribute *a,
				   char *buf)
{
	struct nz_rdma_rail *rr = nz_rdma_dev_rail(d);
	ssize_t len;

	mutex_lock(&rr->lock);
	len = sysfs_emit(buf, "%s\n", rr->ibdev ? dev_name(&rr->ibdev->dev) :
			 "-");
	mutex_unlock(&rr->lock);
	return len;
}

static struct device_attribute nz_rdma_attr_device =
	__ATTR(device, 0444, nz_rdma_device_show, NULL);

static ssize_t nz_rdma_ib_port_show(struct device *d,
				    struct device_attribute *a, char *buf)
{
	return sysfs_emit(buf, "%u\n", nz_rdma_dev_rail(d)->rail->ib_port);
}

static struct device_attribute nz_rdma_attr_ib_port =
	__ATTR(ib_port, 0444, nz_rdma_ib_port_show, NULL);

static ssize_t nz_rdma_netdev_show(struct device *d,
				   struct device_attribute *a, char *buf)
{
	return sysfs_emit(buf, "%s\n", nz_rdma_dev_rail(d)->rail->netdev);
}

static struct device_attribute nz_rdma_attr_netdev =
	__ATTR(netdev, 0444, nz_rdma_netdev_show, NULL);

static ssize_t nz_rdma_gid_index_show(struct device *d,
				      struct device_attribute *a, char *buf)
{
	s32 g = nz_rdma_dev_rail(d)->rail->gid_index;

	if (g == NZ_GID_INDEX_AUTO)
		return sysfs_emit(buf, "auto\n");
	return sysfs_emit(buf, "%d\n", g);
}

static struct device_attribute nz_rdma_attr_gid_index =
	__ATTR(gid_index, 0444, nz_rdma_gid_index_show, NULL);

static struct attribute *nz_rdma_attrs[] = {
	&nz_rdma_attr_device.attr,
	&nz_rdma_attr_ib_port.attr,
	&nz_rdma_attr_netdev.attr,
	&nz_rdma_attr_gid_index.attr,
	&nz_rdma_attr_send_posted.attr,
	&nz_rdma_attr_send_completed.attr,
	&nz_rdma_attr_recv_posted.attr,
	&nz_rdma_attr_recv_completed.attr,
	&nz_rdma_attr_wc_errors.attr,
	&nz_rdma_attr_async_errors.attr,
	&nz_rdma_attr_credit_stalls.attr,
	&nz_rdma_attr_credit_updates.attr,
	&nz_rdma_attr_cm_rejects.attr,
	&nz_rdma_attr_device_removals.attr,
	&nz_rdma_attr_qps.attr,
	NULL,
};

static const struct attribute_group nz_rdma_group = {
	.name = "rdma",
	.attrs = nz_rdma_attrs,
};

/* ---- module ---------------------------------------------------------------------------------- */

static const struct nz_transport nz_rdma_transport = {
	.name = "rdma",
	.proto = NZ_PROTO_RDMA,
	.owner = THIS_MODULE,
	.rail_group = &nz_rdma_group,
	.rail_resolve = nz_rdma_rail_resolve,
	.rail_start = nz_rdma_rail_start,
	.rail_stop = nz_rdma_rail_stop,
	.conn_connect = nz_rdma_conn_connect,
	.dial_abort = nz_rdma_dial_abort,
	.conn_kick = nz_rdma_conn_kick,
	.conn_close = nz_rdma_conn_close,
};

static int __init nz_rdma_init(void)
{
	int ret;

	ret = nz_rdma_params_check();
	if (ret)
		return ret;
	nz_rdma_wq = alloc_workqueue("nezha_rdma", WQ_UNBOUND | WQ_MEM_RECLAIM,
				     0);
	if (!nz_rdma_wq)
		return -ENOMEM;
	ret = ib_register_client(&nz_rdma_client);
	if (ret)
		goto out_destroy_wq;
	/* Last: from here on rails can be added. */
	ret = nz_transport_register(&nz_rdma_transport);
	if (ret)
		goto out_unregister_client;
	return 0;

out_unregister_client:
	ib_unregister_client(&nz_rdma_client);
out_destroy_wq:
	destroy_workqueue(nz_rdma_wq);
	return ret;
}

/*
 * Every RDMA rail holds this module: none is left here, and with the rails
 * went their listeners and connections.
 */
static void __exit nz_rdma_exit(void)
{
	nz_transport_unregister(&nz_rdma_transport);
	ib_unregister_client(&nz_rdma_client);
	destroy_workqueue(nz_rdma_wq);
}

module_init(nz_rdma_init);
module_exit(nz_rdma_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Nezha RDMA rails: kernel verbs and rdma_cm");
MODULE_VERSION(NZ_RELEASE);
