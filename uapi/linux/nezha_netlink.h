/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * Nezha generic netlink family: configuration and status.
 *
 * Family name NZ_GENL_NAME, version NZ_GENL_VERSION.  Every command is a
 * request from user space; the kernel answers with a message of the same
 * command.  Commands that change state need CAP_NET_ADMIN.  Unknown
 * attributes are rejected (strict validation).
 *
 * NZ_CMD_GET_INFO (doit, no attributes in the request)
 *   reply: NZ_A_ABI_VERSION    u32     NZ_ABI_VERSION of the module
 *          NZ_A_RELEASE        string  module release
 *          NZ_A_FEATURES       u64     NZ_FEAT_* bits
 *          NZ_A_OPEN_FILES     u32     open files of /dev/nezha
 *          NZ_A_INFLIGHT       u32     commands queued, not completed
 *          NZ_A_STATS          nested  NZ_STAT_* u64 counters
 *
 * NZ_CMD_RAIL_ADD (CAP_NET_ADMIN)
 *   request: NZ_A_RAIL_NAME    string  1..15 chars [A-Za-z0-9_.-], unique
 *            NZ_A_RAIL_PROTO   u32     enum nz_rail_proto
 *            NZ_A_RAIL_DEV     string  netdev (TCP) or RDMA device (RDMA,
 *                                      up to 63 chars); RDMA: optional when
 *                                      NZ_A_RAIL_NETDEV is given
 *            NZ_A_RAIL_NETDEV  string  RDMA only, optional: the netdev
 *                                      whose RDMA device (RoCE) to use
 *            NZ_A_RAIL_IBPORT  u32     RDMA only, optional: device port,
 *                                      1..NZ_MAX_IBPORT (default: the
 *                                      netdev's port, else the first)
 *            NZ_A_RAIL_GID_INDEX u32   RDMA only, optional: the rail uses
 *                                      the IPv4 address of this GID entry
 *            NZ_A_RAIL_ADDR    be32    optional: IPv4 address to listen on
 *                                      (default: the netdev's first one)
 *            NZ_A_RAIL_PORT    u16     optional: TCP port, or rdma_cm port
 *                                      (RDMA_PS_TCP) of an RDMA rail
 *                                      (NZ_DEFAULT_PORT)
 *            NZ_A_RAIL_WEIGHT  u32     optional: 0..NZ_MAX_WEIGHT (100)
 *            NZ_A_RAIL_FRAME_MAC u8    optional: 1 = every frame on the
 *                                      rail's connections carries a MAC
 *                                      (TCP only; both ends must agree);
 *                                      0 (default) = only the handshake's
 *            NZ_A_RAIL_AGG_ADDR be32   NZ_PROTO_AGG only, required: the
 *                                      aggregation node's IPv4 address
 *            NZ_A_RAIL_AGG_PORT u16    NZ_PROTO_AGG only, optional: its
 *                                      UDP port (NZ_AGG_DEFAULT_PORT)
 *            An NZ_PROTO_AGG rail takes no NZ_A_RAIL_PORT (its probes
 *            leave from a port the kernel picks), no RDMA attribute and no
 *            NZ_A_RAIL_FRAME_MAC; it is not a point-to-point rail
 *            (NZ_IOC_COMM_CREATE refuses it: -EPROTOTYPE).
 *   errors: -EEXIST name taken, -ENODEV no such device, -EADDRNOTAVAIL
 *           address not on the device, -ENOSPC NZ_MAX_RAILS reached,
 *           -EPROTONOSUPPORT protocol's module not loaded (nezha_rdma),
 *           -EOPNOTSUPP device unfit (iWARP) or NZ_A_RAIL_FRAME_MAC on an
 *           RDMA rail, -EINVAL bad attribute.
 *
 * NZ_CMD_RAIL_DEL (CAP_NET_ADMIN)
 *   request: NZ_A_RAIL_NAME; connections on the rail are closed.
 *
 * NZ_CMD_RAIL_SET (CAP_NET_ADMIN)
 *   request: NZ_A_RAIL_NAME and at least one of
 *            NZ_A_RAIL_WEIGHT  u32     new weight (0 excludes the rail)
 *            NZ_A_RAIL_ADMIN   u8      1 = up, 0 = administratively down
 *
 * NZ_CMD_RAIL_GET (doit with NZ_A_RAIL_NAME, or dump: one message a rail)
 *   reply:   NZ_A_RAIL_NAME, NZ_A_RAIL_ID u32, NZ_A_RAIL_PROTO,
 *            NZ_A_RAIL_DEV, NZ_A_RAIL_IFINDEX u32, NZ_A_RAIL_ADDR,
 *            NZ_A_RAIL_PORT, NZ_A_RAIL_WEIGHT, NZ_A_RAIL_STATE u32
 *            (enum nz_rail_state), NZ_A_RAIL_STATS nested NZ_RSTAT_* u64,
 *            NZ_A_RAIL_NETDEV, NZ_A_RAIL_SPEED u32 (the netdev's link
 *            speed in Mbit/s, 0 = unknown), NZ_A_RAIL_FRAME_MAC; RDMA
 *            rails also NZ_A_RAIL_IBPORT and, when configured,
 *            NZ_A_RAIL_GID_INDEX; agg rails also NZ_A_RAIL_AGG_ADDR,
 *            NZ_A_RAIL_AGG_PORT and NZ_A_RAIL_AGG_RTT_US u32 (the last
 *            probe's round trip, 0 = none answered yet)
 *
 * NZ_CMD_HEALTH_GET (doit, no attributes) / NZ_CMD_HEALTH_SET (CAP_NET_ADMIN)
 *            NZ_A_HB_INTERVAL_MS u32   heartbeat period per connection,
 *                                      1..10000 (default 4)
 *            NZ_A_HB_MISSES     u32    silent periods before a connection
 *                                      is suspect and its chunks move to
 *                                      other rails, 2..100 (default 4)
 *            NZ_A_GRACE_MS      u32    how long transfers wait with no
 *                                      connection to their peer before
 *                                      failing with -ENETDOWN,
 *                                      0..3600000 (default 5000)
 *   SET takes any subset; GET replies with all three.
 *
 * NZ_CMD_EVENT (kernel -> user, multicast group NZ_GENL_MCGRP_EVENTS)
 *   path events (NZ_EV_CONN_DOWN, NZ_EV_CONN_UP, NZ_EV_PEER_LOST):
 *            NZ_A_EV_TYPE       u32    enum nz_event_type
 *            NZ_A_RAIL_NAME     string the rail
 *            NZ_A_EV_JOB        u64    job id of the communicator
 *            NZ_A_EV_RANK       u32    this communicator's rank
 *            NZ_A_EV_PEER       u32    the peer's rank
 *            NZ_A_EV_ERROR      u32    the errno (positive) that caused it
 *            NZ_A_EV_RESENT     u32    chunks moved to other connections
 *   configuration events, sent to the namespace of the request after it
 *   succeeded:
 *     NZ_EV_RAIL_ADD, NZ_EV_RAIL_SET: NZ_A_EV_TYPE and the rail as
 *            NZ_CMD_RAIL_GET describes it (name, state, weight, ...)
 *     NZ_EV_RAIL_DEL: NZ_A_EV_TYPE, NZ_A_RAIL_NAME
 *     NZ_EV_HEALTH_SET: NZ_A_EV_TYPE and the three values of
 *            NZ_CMD_HEALTH_GET as they now are
 */
#ifndef _UAPI_LINUX_NEZHA_NETLINK_H
#define _UAPI_LINUX_NEZHA_NETLINK_H

#define NZ_GENL_NAME		"nezha"
#define NZ_GENL_VERSION		1

#define NZ_MAX_IBPORT		255	/* NZ_A_RAIL_IBPORT */
#define NZ_MAX_GID_INDEX	65535	/* NZ_A_RAIL_GID_INDEX */
#define NZ_AGG_DEFAULT_PORT	29600	/* NZ_A_RAIL_AGG_PORT: nezha-aggd's */

enum nz_genl_cmd {
	NZ_CMD_UNSPEC,
	NZ_CMD_GET_INFO,
	NZ_CMD_RAIL_ADD,
	NZ_CMD_RAIL_DEL,
	NZ_CMD_RAIL_SET,
	NZ_CMD_RAIL_GET,
	NZ_CMD_HEALTH_GET,
	NZ_CMD_HEALTH_SET,
	NZ_CMD_EVENT,
	__NZ_CMD_GENL_MAX,
};
#define NZ_CMD_GENL_MAX (__NZ_CMD_GENL_MAX - 1)

enum nz_genl_attr {
	NZ_A_UNSPEC,
	NZ_A_PAD,
	NZ_A_ABI_VERSION,	/* u32 */
	NZ_A_RELEASE,		/* string */
	NZ_A_FEATURES,		/* u64 */
	NZ_A_OPEN_FILES,	/* u32 */
	NZ_A_INFLIGHT,		/* u32 */
	NZ_A_STATS,		/* nested: enum nz_genl_stat */
	NZ_A_RAIL_NAME,		/* string */
	NZ_A_RAIL_ID,		/* u32 */
	NZ_A_RAIL_PROTO,	/* u32: enum nz_rail_proto */
	NZ_A_RAIL_DEV,		/* string */
	NZ_A_RAIL_IFINDEX,	/* u32 */
	NZ_A_RAIL_ADDR,		/* be32 */
	NZ_A_RAIL_PORT,		/* u16 */
	NZ_A_RAIL_WEIGHT,	/* u32 */
	NZ_A_RAIL_STATE,	/* u32: enum nz_rail_state */
	NZ_A_RAIL_ADMIN,	/* u8: 1 up, 0 down */
	NZ_A_RAIL_STATS,	/* nested: enum nz_rail_stat */
	NZ_A_HB_INTERVAL_MS,	/* u32 */
	NZ_A_HB_MISSES,		/* u32 */
	NZ_A_GRACE_MS,		/* u32 */
	NZ_A_EV_TYPE,		/* u32: enum nz_event_type */
	NZ_A_EV_JOB,		/* u64 */
	NZ_A_EV_RANK,		/* u32 */
	NZ_A_EV_PEER,		/* u32 */
	NZ_A_EV_ERROR,		/* u32 */
	NZ_A_EV_RESENT,		/* u32 */
	NZ_A_RAIL_NETDEV,	/* string */
	NZ_A_RAIL_IBPORT,	/* u32 */
	NZ_A_RAIL_GID_INDEX,	/* u32 */
	NZ_A_RAIL_SPEED,	/* u32: link speed, Mbit/s, 0 = unknown */
	NZ_A_RAIL_FRAME_MAC,	/* u8: 1 = per-frame MAC on the rail */
	NZ_A_RAIL_AGG_ADDR,	/* be32: the aggregation node */
	NZ_A_RAIL_AGG_PORT,	/* u16: its UDP port */
	NZ_A_RAIL_AGG_RTT_US,	/* u32: last probe's round trip */
	__NZ_A_MAX,
};
#define NZ_A_MAX (__NZ_A_MAX - 1)

/* Attributes nested in NZ_A_STATS, each a u64 counter. */
enum nz_genl_stat {
	NZ_STAT_UNSPEC,
	NZ_STAT_PAD,
	NZ_STAT_OPENS,
	NZ_STAT_CMDS_SUBMITTED,
	NZ_STAT_CMDS_COMPLETED,
	NZ_STAT_CMDS_FAILED,
	NZ_STAT_CMDS_REJECTED,
	NZ_STAT_CMDS_CANCELLED,
	__NZ_STAT_MAX,
};
#define NZ_STAT_MAX (__NZ_STAT_MAX - 1)

#define NZ_GENL_MCGRP_EVENTS	"events"

enum nz_event_type {
	NZ_EV_CONN_DOWN = 1,	/* a (peer, rail) connection failed */
	NZ_EV_CONN_UP = 2,	/* a (peer, rail) connection is (back) up */
	NZ_EV_PEER_LOST = 3,	/* no connection to a peer for the grace */
	NZ_EV_RAIL_ADD = 4,	/* a rail was added */
	NZ_EV_RAIL_DEL = 5,	/* a rail was deleted */
	NZ_EV_RAIL_SET = 6,	/* a rail's weight or admin state was set */
	NZ_EV_HEALTH_SET = 7,	/* the health parameters were set */
};

/* Attributes nested in NZ_A_RAIL_STATS, each a u64 counter. */
enum nz_rail_stat {
	NZ_RSTAT_UNSPEC,
	NZ_RSTAT_PAD,
	NZ_RSTAT_BYTES_TX,	/* payload bytes sent (DATA frames) */
	NZ_RSTAT_BYTES_RX,	/* payload bytes received */
	NZ_RSTAT_CHUNKS_TX,	/* DATA frames sent */
	NZ_RSTAT_CHUNKS_RX,	/* DATA frames received */
	NZ_RSTAT_ERRORS,	/* connections closed on an error */
	NZ_RSTAT_HS_REFUSED,	/* handshakes refused (bad secret, ...) */
	NZ_RSTAT_CONNS,		/* connections currently up */
	NZ_RSTAT_FAILOVERS,	/* connections lost and rerouted */
	NZ_RSTAT_RESENT,	/* chunks moved to other connections */
	NZ_RSTAT_MAC_FAILURES,	/* frames whose per-frame MAC did not check */
	NZ_RSTAT_AGG_PROBES,	/* agg: probes sent to the node */
	NZ_RSTAT_AGG_ANSWERS,	/* agg: probes the node answered */
	NZ_RSTAT_AGG_DROPPED,	/* agg: datagrams that were no answer */
	NZ_RSTAT_AGG_LOST,	/* agg: times the node became unreachable */
	__NZ_RSTAT_MAX,
};
#define NZ_RSTAT_MAX (__NZ_RSTAT_MAX - 1)

#endif /* _UAPI_LINUX_NEZHA_NETLINK_H */
