// SPDX-License-Identifier: GPL-2.0
/*
 * The transports, by protocol.  TCP is part of nezha.ko; every other
 * transport is a module of its own that registers here when it loads and
 * unregisters when it goes, so that nezha.ko never needs the modules of a
 * stack it may not use (ib_core and rdma_cm for RDMA).
 *
 * A rail takes a reference on its transport's module (nz_transport_get)
 * and drops it when the rail's memory goes: a transport module cannot be
 * removed while any rail of its protocol exists, and the ops a rail points
 * to stay valid for the rail's whole life.  try_module_get() fails once a
 * module's removal has begun, so a rail is never added under a transport
 * that is about to unregister.
 */
#include <linux/module.h>
#include <linux/spinlock.h>
#include "nezha.h"
#include "transport.h"
#include "handshake.h"
#include "comm.h"

#define NZ_TRANSPORT_SLOTS	(NZ_PROTO_AGG + 1)

static DEFINE_SPINLOCK(nz_transports_lock);
static const struct nz_transport *nz_transports[NZ_TRANSPORT_SLOTS] = {
	[NZ_PROTO_TCP] = &nz_tcp_transport,
	[NZ_PROTO_AGG] = &nz_agg_transport,
};

int nz_transport_register(const struct nz_transport *t)
{
	int ret = 0;

	if (!t->proto || t->proto >= NZ_TRANSPORT_SLOTS || !t->rail_start ||
	    !t->rail_stop || !t->conn_connect || !t->conn_kick ||
	    !t->conn_close)
		return -EINVAL;
	spin_lock(&nz_transports_lock);
	if (nz_transports[t->proto])
		ret = -EEXIST;
	else
		nz_transports[t->proto] = t;
	spin_unlock(&nz_transports_lock);
	if (!ret)
		pr_info("nezha: %s transport registered\n", t->name);
	return ret;
}
EXPORT_SYMBOL_GPL(nz_transport_register);

/*
 * Called from the transport module's exit: its rails, which hold its
 * module, are all gone by then.
 */
void nz_transport_unregister(const struct nz_transport *t)
{
	spin_lock(&nz_transports_lock);
	if (t->proto < NZ_TRANSPORT_SLOTS && nz_transports[t->proto] == t)
		nz_transports[t->proto] = NULL;
	spin_unlock(&nz_transports_lock);
}
EXPORT_SYMBOL_GPL(nz_transport_unregister);

const struct nz_transport *nz_transport_get(u32 proto)
{
	const struct nz_transport *t = NULL;

	if (proto >= NZ_TRANSPORT_SLOTS)
		return NULL;
	spin_lock(&nz_transports_lock);
	if (nz_transports[proto] && try_module_get(nz_transports[proto]->owner))
		t = nz_transports[proto];
	spin_unlock(&nz_transports_lock);
	return t;
}

void nz_transport_put(const struct nz_transport *t)
{
	module_put(t->owner);
}

bool nz_transport_loaded(u32 proto)
{
	bool loaded;

	if (proto >= NZ_TRANSPORT_SLOTS)
		return false;
	spin_lock(&nz_transports_lock);
	loaded = nz_transports[proto];
	spin_unlock(&nz_transports_lock);
	return loaded;
}

/*
 * What a transport module may call: the connection events, receive and
 * transmit hooks of comm.h, the wire codec and the handshake's MAC.  They
 * are exported here, in one list, because this list is the interface a
 * transport module is written against.
 */
#define NZ_TRANSPORT_EXPORT(sym) EXPORT_SYMBOL_GPL(sym)

NZ_TRANSPORT_EXPORT(nz_conn_attach);
NZ_TRANSPORT_EXPORT(nz_conn_dial_begin);
NZ_TRANSPORT_EXPORT(nz_conn_dial_end);
NZ_TRANSPORT_EXPORT(nz_conn_detach);
NZ_TRANSPORT_EXPORT(nz_conn_fail);
NZ_TRANSPORT_EXPORT(nz_conn_rx_data);
NZ_TRANSPORT_EXPORT(nz_conn_rx_data_done);
NZ_TRANSPORT_EXPORT(nz_conn_rx_data_end);
NZ_TRANSPORT_EXPORT(nz_conn_rx_data_abort);
NZ_TRANSPORT_EXPORT(nz_conn_rx_ctrl);
NZ_TRANSPORT_EXPORT(nz_conn_tx_next);
NZ_TRANSPORT_EXPORT(nz_conn_tx_next_ctrl);
NZ_TRANSPORT_EXPORT(nz_conn_tx_done);
NZ_TRANSPORT_EXPORT(nz_conn_tx_abort);
NZ_TRANSPORT_EXPORT(nz_conn_done_frame);
NZ_TRANSPORT_EXPORT(nz_comm_conn);
NZ_TRANSPORT_EXPORT(nz_comm_find_hello);
NZ_TRANSPORT_EXPORT(nz_hs_make_challenge);
NZ_TRANSPORT_EXPORT(nz_hs_make_welcome);
NZ_TRANSPORT_EXPORT(nz_hs_client);
NZ_TRANSPORT_EXPORT(nz_comm_job_fits);
NZ_TRANSPORT_EXPORT(nz_comm_put);
NZ_TRANSPORT_EXPORT(nz_comm_mac);
NZ_TRANSPORT_EXPORT(nz_frame_init);
NZ_TRANSPORT_EXPORT(nz_wire_encode);
NZ_TRANSPORT_EXPORT(nz_wire_decode_hdr);
NZ_TRANSPORT_EXPORT(nz_wire_decode_body);
NZ_TRANSPORT_EXPORT(nz_wire_type_expected);
NZ_TRANSPORT_EXPORT(nz_wire_hello_mac_input);
NZ_TRANSPORT_EXPORT(nz_wire_welcome_mac_input);
