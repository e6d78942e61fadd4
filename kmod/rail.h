/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Rails: the module-wide table of configured network paths.  A rail is a
 * local endpoint (a TCP listener on a netdev's address, or an RDMA device
 * port); communicators open connections to their peers over every rail.
 *
 * Lifetime: the table holds one reference on each rail it lists, every
 * connection holds one more (nz_rail_get/nz_rail_put).  nz_rail_del()
 * unlinks the rail, closes its connections, stops its listener, removes its
 * sysfs directory and drops the table's reference; the memory (and the
 * rail's hold on its network namespace) goes with the last reference.
 */
#ifndef _NZ_RAIL_H
#define _NZ_RAIL_H

#include <linux/kref.h>
#include <linux/netdevice.h>
#include <linux/spinlock.h>
#include <uapi/linux/nezha.h>
#include "health_learn.h"

struct nz_transport;
struct socket;
struct device;
struct netlink_ext_ack;

struct nz_rail_stats {
	atomic64_t bytes_tx;
	atomic64_t bytes_rx;
	atomic64_t chunks_tx;
	atomic64_t chunks_rx;
	atomic64_t errors;		/* connections closed on an error */
	atomic64_t hs_refused;		/* handshakes refused */
	atomic_t conns;			/* connections up */
	atomic64_t failovers;		/* connections lost, traffic rerouted */
	atomic64_t false_suspects;	/* suspect paths that echoed at once */
	atomic64_t resent;		/* chunks moved to other connections */
	atomic64_t acks_late;		/* ACKs of chunks moved off their conn */
	atomic64_t sends_confirmed;	/* completed by a leaver's DONE */
	atomic64_t ctrl_dropped;	/* ACKs/echoes past max_ctrl_frames */
	atomic64_t hb_frames;		/* probes and echoes queued */
	atomic64_t redials;		/* dials at once: the peer's end came back */
	atomic64_t last_failover_ms;	/* boot-time ms of the last; 0 never */
	atomic64_t mac_failures;	/* frames whose MAC did not check */
	atomic64_t agg_probes;		/* agg: probes sent to the node */
	atomic64_t agg_answers;		/* agg: probes it answered */
	atomic64_t agg_dropped;		/* agg: datagrams that were none */
	atomic64_t agg_lost;		/* agg: times it became unreachable */
};

/* Longest device name: RDMA devices have up to IB_DEVICE_NAME_MAX - 1. */
#define NZ_RAIL_DEV_LEN		64
#define NZ_GID_INDEX_AUTO	(-1)

/* What nezhactl rail add asks for (validated by netlink.c and rail.c). */
struct nz_rail_cfg {
	char name[NZ_RAIL_NAME_LEN];
	u32 proto;			/* enum nz_rail_proto */
	char dev[NZ_RAIL_DEV_LEN];	/* netdev (TCP) or RDMA device */
	char netdev[IFNAMSIZ];		/* RDMA: the netdev of the device */
	u32 ib_port;			/* RDMA: 0 = the netdev's or the first */
	s32 gid_index;			/* RDMA: NZ_GID_INDEX_AUTO or an index */
	__be32 addr;			/* 0 = the device's first IPv4 address */
	u16 port;			/* 0 = NZ_DEFAULT_PORT */
	u32 weight;
	bool frame_mac;			/* TCP: a MAC on every frame */
	__be32 agg_addr;		/* agg: the node (required) */
	u16 agg_port;			/* agg: its UDP port, 0 = default */
};

/*
 * Every field but weight, speed_mbps, admin_down, failed, unreachable,
 * peer_rtt_us, dead, priv and stats is set before the rail is published in the table and never
 * changes afterwards.
 */
struct nz_rail {
	char name[NZ_RAIL_NAME_LEN];
	u32 id;				/* slot in the rail table */
	u32 proto;			/* enum nz_rail_proto */
	const struct nz_transport *ops;
	struct net *net;		/* namespace it was created in (held) */
	char dev[NZ_RAIL_DEV_LEN];	/* as configured: netdev or RDMA device */
	char netdev[IFNAMSIZ];		/* its netdev: link state, address */
	u32 ib_port;			/* RDMA device port, 0 for TCP */
	s32 gid_index;			/* RDMA: NZ_GID_INDEX_AUTO or as given */
	int ifindex;			/* of netdev */
	__be32 addr;
	u16 port;			/* host order */
	u32 weight;			/* read locklessly: READ_ONCE */
	u32 speed_mbps;			/* netdev link speed, 0 = unknown */
	bool frame_mac;			/* TCP: a MAC on every frame */
	__be32 peer_addr;		/* agg: the node's address */
	u16 peer_port;			/* agg: its UDP port, host order */
	bool unreachable;		/* agg: the node is silent: READ_ONCE */
	u32 peer_rtt_us;		/* agg: last probe's: READ_ONCE */
	bool admin_down;		/* read locklessly: READ_ONCE */
	bool failed;			/* no listener (device gone): READ_ONCE */
	bool dead;			/* deleted; no new connections */
	struct kref ref;		/* the table and each connection */
	void *priv;			/* the transport's rail state */
	struct nz_rail_stats stats;
	struct device *sysdev;		/* /sys/class/nezha/rail-NAME */
	/* Our queue on it: nz_rail_egress_sample(), under egress_lock. */
	spinlock_t egress_lock;
	struct nz_egress egress;
	struct nz_late late;		/* its delay, held */
	u32 egress_ms;			/* its delay now: READ_ONCE */
};

/*
 * rail.c.  Configuration calls (add, del, set) are serialised and may
 * sleep; they return 0 or a negative errno (-ENOENT: no rail of that name).
 * Lookups (get, list, for_each) may sleep too: process context only.
 */
int nz_rail_add(struct net *net, const struct nz_rail_cfg *cfg,
		struct netlink_ext_ack *extack);
int nz_rail_del(const char *name);
/* weight and/or admin_up may be NULL: that value is left alone. */
int nz_rail_set(const char *name, const u32 *weight, const bool *admin_up);
struct nz_rail *nz_rail_get(const char *name);	/* takes a reference */
void nz_rail_put(struct nz_rail *rail);
u32 nz_rail_state(const struct nz_rail *rail);	/* enum nz_rail_state */
/*
 * Bind sock (IPv4) to the rail's address, port 0, and to its device
 * unless dst is an address of this host: what leaves by it leaves by the
 * rail.  0 or a negative errno.
 */
int nz_rail_bind(struct nz_rail *rail, struct socket *sock, __be32 dst);
/* Under RTNL: read the link speed of dev, the rail's netdev, into the rail. */
void nz_rail_set_speed(struct nz_rail *rail, struct net_device *dev);
/*
 * Sample the rail's queue (its qdisc's backlog, the rate it drains at)
 * when the last sample is older than min_us; any context but hard irq.
 */
void nz_rail_egress_sample(struct nz_rail *rail, u64 min_us);
/* ms our answers on the rail wait in its queue now, and held (ticks). */
unsigned int nz_rail_egress_ms(const struct nz_rail *rail);
unsigned int nz_rail_late_ms(struct nz_rail *rail, unsigned long now);
/* 1..15 characters of [A-Za-z0-9_.-]; name must be NUL terminated. */
bool nz_rail_name_valid(const char *name);
/*
 * Fill up to cap entries of out, in table order; *count is set to the
 * number of rails configured (which may exceed cap).
 */
int nz_rail_list(struct nz_rail_info *out, u32 cap, u32 *count);
/*
 * Call fn for every rail in a slot >= start, in slot order, under the
 * table lock (for netlink dumps).  Stops at and returns fn's first
 * non-zero return value; 0 when every rail was visited.
 */
int nz_rail_for_each(int (*fn)(struct nz_rail *rail, void *arg), void *arg,
		     u32 start);
int nz_rails_init(void);
void nz_rails_exit(void);	/* deletes every rail */

/* sysfs.c: /sys/class/nezha/rail-NAME (sets rail->sysdev). */
int nz_sysfs_rail_add(struct nz_rail *rail);
/* Returns once no show() of the rail's files can run any more. */
void nz_sysfs_rail_del(struct nz_rail *rail);

/* comm.c: close every connection that uses rail (before it is freed). */
void nz_comm_rail_removed(struct nz_rail *rail);
/* comm.c: the rail's usability changed (admin up/down, weight). */
void nz_comm_rail_changed(struct nz_rail *rail);

#endif /* _NZ_RAIL_H */
