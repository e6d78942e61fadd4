// SPDX-License-Identifier: GPL-2.0
/*
 * The scheduler: which bytes a connection carries next.
 *
 * Connections pull.  When a connection's transport has room it asks for a
 * chunk; it gets one only while the bytes it has in flight (sent, not yet
 * acknowledged) stay below its window, which is proportional to its rail's
 * weight.  A fast rail drains its window sooner and so pulls more chunks: the
 * split follows each rail's delivered capacity, and the last chunks of a
 * message go to whichever rail has room instead of queueing behind a slow
 * one.  A weight of 0 (or an administratively downed rail) takes nothing.
 *
 * Chunks of a connection that failed (peer->resend) are taken first, so
 * that a reroute finishes the oldest data before new data starts.  A
 * connection the health code suspects (silent) takes nothing.
 */
#include <linux/module.h>
#include "comm.h"

static unsigned int window_units = 8;
module_param(window_units, uint, 0644);
MODULE_PARM_DESC(window_units,
		 "chunk units a default-weight connection may have unacknowledged");

u64 nz_sched_window(const struct nz_conn *conn)
{
	u64 w = (u64)max(READ_ONCE(window_units), 1U) * conn->peer->comm->unit;
	u32 weight = READ_ONCE(conn->rail->weight);

	w = div_u64(w * weight, NZ_DEFAULT_WEIGHT);
	return max_t(u64, w, conn->peer->comm->unit);
}

static bool nz_sched_rail_usable(const struct nz_rail *rail)
{
	return READ_ONCE(rail->weight) && !READ_ONCE(rail->admin_down) &&
	       !READ_ONCE(rail->dead);
}

struct nz_chunk *nz_sched_next_chunk(struct nz_conn *conn,
				     struct nz_chunk **spare)
{
	struct nz_peer *p = conn->peer;
	struct nz_comm *comm = p->comm;
	struct nz_chunk *ch;
	struct nz_msg *m;
	u64 oldest = 0;

	lockdep_assert_held(&p->lock);
	if (!nz_sched_rail_usable(conn->rail) || READ_ONCE(conn->suspect) ||
	    conn->inflight_bytes >= nz_sched_window(conn))
		return NULL;

	ch = list_first_entry_or_null(&p->resend, struct nz_chunk, node);
	if (ch) {
		list_move_tail(&ch->node, &conn->chunks);
		conn->inflight_bytes += ch->len;
		return ch;
	}

	list_for_each_entry(m, &p->tx_msgs, node) {
		/* The receiver tracks NZ_SEQWIN_SIZE messages at most. */
		if (!oldest)
			oldest = m->msg_id;
		if (m->msg_id - oldest >= NZ_SEQWIN_SIZE)
			break;
		if (m->assigned_all)
			continue;
		ch = *spare;
		*spare = NULL;
		kref_get(&m->ref);
		ch->msg = m;
		ch->offset = m->next_off;
		ch->len = nz_wire_chunk_len(m->total, m->next_off, 1,
					    comm->unit);
		m->next_off += ch->len;
		m->assigned_all = m->next_off == m->total;
		m->outstanding++;
		list_add_tail(&ch->node, &conn->chunks);
		conn->inflight_bytes += ch->len;
		return ch;
	}
	return NULL;
}
