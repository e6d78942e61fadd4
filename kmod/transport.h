/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The contract every rail type implements.  The scheduler and the wire
 * semantics (sequence/offset/length, acknowledgements, duplicates) live in
 * comm.c and sched.c and are shared; a transport only moves frames.
 *
 * Return values: 0 on success; -EAGAIN "no room now, you will be kicked
 * when there is"; any other negative errno is fatal for that connection.
 */
#ifndef _NZ_TRANSPORT_H
#define _NZ_TRANSPORT_H

struct nz_rail;
struct nz_conn;

struct nz_transport {
	const char *name;
	u32 proto;			/* enum nz_rail_proto */

	/*
	 * Rail level.  rail_start() resolves the device and address and
	 * starts accepting connections; it may sleep.  rail_stop() stops
	 * accepting and returns only when no callback of the listener can
	 * run any more.
	 */
	int (*rail_start)(struct nz_rail *rail);
	void (*rail_stop)(struct nz_rail *rail);

	/*
	 * Connection level, driven by comm.c.  conn_connect() opens an
	 * outgoing connection and runs the client side of the handshake; it
	 * sleeps, bounded by timeouts, and on success has attached the
	 * transport state with nz_conn_attach().  conn_kick() queues the
	 * connection's transmit and receive work; comm.c calls it under
	 * conn->kick_lock while the state is alive.  conn_close() detaches
	 * and frees the transport state; it is called under conn->io_lock
	 * and returns when no transport work for it can run any more.
	 */
	int (*conn_connect)(struct nz_conn *conn);
	void (*conn_kick)(struct nz_conn *conn);
	void (*conn_close)(struct nz_conn *conn);
};

extern const struct nz_transport nz_tcp_transport;

#endif /* _NZ_TRANSPORT_H */
