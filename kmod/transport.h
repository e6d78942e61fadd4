/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The contract every rail type implements.  The scheduler (sched.c) and
 * the wire semantics (sequence/offset/length, acknowledgements, duplicates:
 * msg.c, rx.c, tx.c) are shared; a transport only moves frames.
 *
 * Return values: 0 on success; -EAGAIN "no room now, you will be kicked
 * when there is"; any other negative errno is fatal for that connection.
 *
 * TCP is built into nezha.ko.  Other transports live in their own modules
 * (nezha_rdma.ko), so that nezha.ko loads without their stacks, and
 * register here when they load (transport.c).  A rail holds a reference on
 * its transport's module for as long as the rail exists.
 */
#ifndef _NZ_TRANSPORT_H
#define _NZ_TRANSPORT_H

#include <linux/types.h>

struct attribute_group;
struct module;
struct netlink_ext_ack;
struct nz_rail;
struct nz_rail_cfg;
struct nz_conn;

struct nz_transport {
	const char *name;
	u32 proto;			/* enum nz_rail_proto */
	struct module *owner;		/* NULL when built into nezha.ko */
	/*
	 * Round trips an idle connection pays again before it runs at full
	 * rate (TCP restarts slow start after an idle period; 0 for RDMA).
	 * The scheduler charges them to a cold connection (sched.c).
	 */
	u32 restart_rtts;
	/* It can put a MAC on every frame of a connection (frame_mac.c). */
	bool frame_mac;

	/*
	 * Optional: statistics of the transport, a named group of files in
	 * the rail's sysfs directory.  rail.c adds it after rail_start() and
	 * removes it before rail_stop(); drvdata of the device is the rail.
	 */
	const struct attribute_group *rail_group;

	/*
	 * Optional.  rail_resolve() checks the protocol's part of cfg (an
	 * RDMA device, its port and GID) and fills rail->dev, rail->netdev
	 * (the network device whose link and IPv4 address the rail uses),
	 * rail->ib_port and rail->gid_index; it may set *addr to the address
	 * the rail must listen on.  Without it, cfg->dev names the network
	 * device.  It may sleep; errors explain themselves in extack.
	 */
	int (*rail_resolve)(struct nz_rail *rail, const struct nz_rail_cfg *cfg,
			    __be32 *addr, struct netlink_ext_ack *extack);

	/*
	 * Rail level.  rail_start() resolves the device and address and
	 * starts accepting connections; it may sleep.  rail_stop() stops
	 * accepting and returns only when no callback of the listener can
	 * run any more.
	 */
	int (*rail_start)(struct nz_rail *rail);
	void (*rail_stop)(struct nz_rail *rail);

	/*
	 * Connection level, driven by conn.c.  conn_connect() opens an
	 * outgoing connection and runs the client side of the handshake; it
	 * sleeps, bounded by timeouts, and on success has attached the
	 * transport state with nz_conn_attach().  conn_kick() queues the
	 * connection's transmit and receive work; conn.c calls it under
	 * conn->kick_lock while the state is alive.  conn_close() detaches
	 * and frees the transport state; it is called under conn->io_lock
	 * and returns when no transport work for it can run any more.
	 */
	int (*conn_connect)(struct nz_conn *conn);
	void (*conn_kick)(struct nz_conn *conn);
	void (*conn_close)(struct nz_conn *conn);

	/*
	 * Optional: make the conn_connect() that registered dial (with
	 * nz_conn_dial_begin()) give up now -- its socket shut down, its
	 * waits woken -- so that teardown never waits for a dial or a
	 * handshake to time out.  Called under the core's dial lock, in
	 * process context; dial stays valid until nz_conn_dial_end().
	 */
	void (*dial_abort)(void *dial);

	/*
	 * Optional, under conn->kick_lock like conn_kick(): a message this
	 * connection may be writing a frame into (nz_rx_dest.msg) is complete
	 * -- its bytes came over other rails.  The transport stops writing
	 * into it soon (nz_conn_rx_data_release()) and drains the rest of
	 * the frame, so the receive completes without waiting for a path
	 * that may be dead.  Transports that never hold a frame half-read
	 * across calls do not need it.
	 */
	void (*conn_release_msg)(struct nz_conn *conn);

	/*
	 * Optional, under conn->kick_lock like conn_kick(): jiffies of the
	 * last packet of any kind that arrived on the connection -- a TCP
	 * segment out of order or a duplicate ACK included -- or 0.  Frames
	 * held behind a lost segment do not make a path silent (health.c).
	 */
	unsigned long (*conn_rx_seen)(struct nz_conn *conn);

	/*
	 * Optional, under conn->kick_lock like conn_kick(): the lowest round
	 * trip the transport measured on the connection, in us, or 0.  TCP
	 * has one from its handshake on; the heartbeats' own samples come a
	 * period or more later (health.c).
	 */
	u32 (*conn_min_rtt_us)(struct nz_conn *conn);
};

extern const struct nz_transport nz_tcp_transport;
/* transport_agg.c: a rail to an aggregation node; no connections. */
extern const struct nz_transport nz_agg_transport;
void nz_tcp_exit(void);	/* sockets still leaving: transport_tcp.c */

/*
 * transport.c.  register: 0, -EINVAL (bad proto or ops), -EEXIST (that
 * proto has a transport).  get: the transport of proto with a reference on
 * its module, or NULL (none loaded, or its module is going away).
 */
int nz_transport_register(const struct nz_transport *t);
void nz_transport_unregister(const struct nz_transport *t);
const struct nz_transport *nz_transport_get(u32 proto);
void nz_transport_put(const struct nz_transport *t);
bool nz_transport_loaded(u32 proto);

#endif /* _NZ_TRANSPORT_H */
