// SPDX-License-Identifier: GPL-2.0
/*
 * The scheduler: on which rails a message travels, and which bytes a
 * connection carries next (Documentation/sched.rst).
 *
 * Connections pull.  When a connection's transport has room it asks for a
 * chunk; it gets one only while the chunk fits in its window next to the
 * bytes it holds (handed to its transport, not yet acknowledged by the
 * peer's: nz_sched_held()).  A fast rail drains its window sooner and so pulls
 * more: the split follows each rail's delivered capacity from moment to
 * moment.
 *
 * In the default "measured" mode every connection keeps online estimates
 * (struct nz_est): delivered bandwidth from acknowledged bytes over time,
 * the round trip of its heartbeats, and its start-up latency (how long the
 * first chunk after an idle period takes, minus its serialisation).  From
 * them:
 *
 *  - the window is the bandwidth times a short target time (twice the
 *    unloaded round trip, or the start-up latency, if longer), plus one
 *    chunk: enough to keep the rail busy, little to wait behind when a
 *    rail fails;
 *  - near the end of the data a connection leaves the rest to the others
 *    when they would finish all of it before it finishes one more chunk:
 *    the tail never waits on a slow rail while a fast one is idle;
 *  - a message sent while nothing else is queued for the peer goes on the
 *    rails that pay off (nz_sched_msg_new()): sorted
 *    by start-up latency a1 <= a2 <= ..., rail j joins when the message is
 *    larger than sum over the rails before it of (aj - ai) * Bi, the bytes
 *    those would carry while j is still starting.  One chunk goes on the
 *    rail that delivers it first.  A cold TCP connection is charged the
 *    round trips slow start costs it again.
 *
 * The state machine of each connection (PROBE, HOT, COLD) is in comm.h;
 * every transition fires the nezha_sched_state tracepoint.
 *
 * Ablation (sched_mode): "weights" splits every message in fixed shares
 * proportional to the rails' configured weights, "equal" in equal shares;
 * neither measures anything.  In every mode a weight of 0 (or a rail that
 * is down) takes nothing, and in "measured" mode the weight scales the
 * measured window (100 = as measured).
 *
 * Chunks of a connection that failed (peer->resend) are taken first, so a
 * reroute finishes the oldest data before new data starts.  A connection
 * the health code suspects (silent) takes nothing; while one is in doubt
 * (silent half as long), the others keep short queues.
 */
#include <linux/math64.h>
#include <linux/module.h>
#include <linux/string.h>
#include <linux/timekeeping.h>
#include "comm.h"
#include "sched_est.h"
#include "transport.h"
#include "trace.h"

enum nz_sched_mode {
	NZ_SCHED_MEASURED,
	NZ_SCHED_WEIGHTS,
	NZ_SCHED_EQUAL,
};

static const char * const nz_sched_mode_names[] = {
	[NZ_SCHED_MEASURED] = "measured",
	[NZ_SCHED_WEIGHTS] = "weights",
	[NZ_SCHED_EQUAL] = "equal",
};

static unsigned int sched_mode = NZ_SCHED_MEASURED;

static int nz_sched_mode_set(const char *val, const struct kernel_param *kp)
{
	int i = sysfs_match_string(nz_sched_mode_names, val);

	if (i < 0)
		return -EINVAL;
	WRITE_ONCE(sched_mode, i);
	return 0;
}

static int nz_sched_mode_get(char *buf, const struct kernel_param *kp)
{
	return scnprintf(buf, PAGE_SIZE, "%s\n",
			 nz_sched_mode_names[READ_ONCE(sched_mode)]);
}

static const struct kernel_param_ops nz_sched_mode_ops = {
	.set = nz_sched_mode_set,
	.get = nz_sched_mode_get,
};

module_param_cb(sched_mode, &nz_sched_mode_ops, NULL, 0644);
MODULE_PARM_DESC(sched_mode,
		 "how messages are split: measured (default), weights or equal");

static unsigned int window_units = 8;
module_param(window_units, uint, 0644);
MODULE_PARM_DESC(window_units,
		 "chunk units a connection may have unacknowledged before it is measured (and in the static modes)");

static unsigned int sched_target_ms = 20;
module_param(sched_target_ms, uint, 0644);
MODULE_PARM_DESC(sched_target_ms,
		 "measured mode: least time a connection's window lasts (ms)");

static unsigned int sched_cool_ms = 300;
module_param(sched_cool_ms, uint, 0644);
MODULE_PARM_DESC(sched_cool_ms, "idle time after which a connection is cold (ms)");

static unsigned int sched_stale_ms = 5000;
module_param(sched_stale_ms, uint, 0644);
MODULE_PARM_DESC(sched_stale_ms,
		 "age after which a cold connection's estimates are dropped and it is probed again (ms)");

#define NZ_EST_MINRTT_WIN_NS	(10ULL * NSEC_PER_SEC)

const char *nz_sched_state_name(u8 state)
{
	static const char *const names[] = {
		[NZ_SCHED_PROBE] = "probe",
		[NZ_SCHED_HOT] = "hot",
		[NZ_SCHED_COLD] = "cold",
	};

	return state < ARRAY_SIZE(names) ? names[state] : "?";
}

static bool nz_sched_rail_usable(const struct nz_rail *rail)
{
	return READ_ONCE(rail->weight) && !READ_ONCE(rail->admin_down) &&
	       !READ_ONCE(rail->dead);
}

/* Under peer->lock. */
static bool nz_sched_conn_usable(const struct nz_conn *c)
{
	return c->state == NZ_CONN_UP && !READ_ONCE(c->suspect) &&
	       nz_sched_rail_usable(c->rail);
}

static void nz_sched_set_state(struct nz_conn *conn, u8 state)
{
	struct nz_est *e = &conn->est;
	struct nz_comm *comm = conn->peer->comm;

	if (e->state == state)
		return;
	trace_nezha_sched_state(conn->rail->name, comm->job_id, comm->rank,
				conn->peer->rank, e->state, state, e->bw,
				nz_est_min_rtt(e), e->start_us);
	e->state = state;
	e->transitions++;
}

u64 nz_sched_window(const struct nz_conn *conn)
{
	u32 unit = conn->peer->comm->unit;
	u32 weight = READ_ONCE(conn->rail->weight);
	u64 w = (u64)max(READ_ONCE(window_units), 1U) * unit;

	switch (READ_ONCE(sched_mode)) {
	case NZ_SCHED_EQUAL:
		return w;
	case NZ_SCHED_MEASURED:
		if (conn->est.bw)
			w = nz_est_window(&conn->est,
					  READ_ONCE(sched_target_ms), unit);
		break;
	}
	w = div_u64(w * weight, NZ_DEFAULT_WEIGHT);
	return max_t(u64, w, unit);
}

/*
 * What the window counts: the bytes a connection still holds on its way,
 * not yet acknowledged by the peer's transport.  That is less than what
 * awaits our ACK frames when those queue behind the peer's own data in
 * the other direction: they arrive a whole reverse queue late, and a
 * window counted in them ran dry while the rail was idle -- at 2.4 MB/s
 * of a 5 MB/s rail, with window-limited samples then lowering the
 * estimate further.  Without a transport figure, the ACK frames tell.
 */
static u64 nz_sched_held(const struct nz_conn *c)
{
	return min(c->inflight_bytes, READ_ONCE(c->tp_held));
}

/* Choose the rails of a new send, under peer->lock. */
void nz_sched_msg_new(struct nz_peer *p, struct nz_msg *m)
{
	struct nz_sched_cand c[NZ_MAX_RAILS], add;
	struct nz_comm *comm = p->comm;
	u32 i, n = 0, mask;

	m->rail_mask = GENMASK(comm->nrails - 1, 0);
	/*
	 * Start-up costs are paid by a rail that starts from idle.  Behind
	 * other sends every rail is already busy (or about to be): then the
	 * pull spreads the stream over all of them.
	 */
	if (READ_ONCE(sched_mode) != NZ_SCHED_MEASURED ||
	    !list_empty(&p->tx_msgs))
		return;
	for (i = 0; i < comm->nrails; i++) {
		struct nz_conn *conn = &p->conns[i];

		if (!nz_sched_conn_usable(conn))
			continue;
		add.slot = i;
		add.a = nz_est_start_ns(&conn->est, m->total,
					conn->rail->ops->restart_rtts);
		add.bw = conn->est.bw;
		nz_est_cand_add(c, &n, &add);
	}
	if (n < 2)
		return;
	mask = nz_est_pick_rails(c, n, m->total, comm->unit);
	if (mask)
		m->rail_mask = mask;
}

/* The conn's fixed share of m is used up (static modes). */
static bool nz_sched_share_done(const struct nz_peer *p,
				const struct nz_conn *conn,
				const struct nz_msg *m, unsigned int mode)
{
	u64 wsum = 0;
	u32 i, wi, w = 0;

	for (i = 0; i < p->comm->nrails; i++) {
		const struct nz_conn *c = &p->conns[i];

		if (!nz_sched_conn_usable(c))
			continue;
		wi = mode == NZ_SCHED_EQUAL ? 1 : READ_ONCE(c->rail->weight);
		wsum += wi;
		if (c == conn)
			w = wi;
	}
	return nz_est_share_done(m->slot_bytes[conn->slot], m->total, w, wsum);
}

/*
 * Measured mode, near the end of the data: would the other connections
 * finish everything not yet assigned before conn finishes one more chunk
 * of len bytes?  Then leave it to them.
 */
static bool nz_sched_tail_defer(const struct nz_peer *p,
				const struct nz_conn *conn, u64 len)
{
	struct nz_est_conn c[NZ_MAX_RAILS];
	u64 need, rest = 0;
	const struct nz_msg *m;
	u32 i;

	for (i = 0; i < p->comm->nrails; i++) {
		c[i].usable = nz_sched_conn_usable(&p->conns[i]);
		c[i].bw = p->conns[i].est.bw;
		c[i].held = nz_sched_held(&p->conns[i]);
	}
	need = nz_est_tail_need(c, p->comm->nrails, conn->slot, len);
	if (!need)
		return false;
	list_for_each_entry(m, &p->tx_msgs, node) {
		rest += m->total - m->next_off;
		if (rest >= need)
			return false;
	}
	return true;
}

/*
 * Is another path to the peer in doubt (health.c: silent for a while with
 * chunks on the way)?  Its chunks may have to move to conn soon.
 */
static bool nz_sched_doubt(const struct nz_peer *p, const struct nz_conn *conn)
{
	u32 i;

	for (i = 0; i < p->comm->nrails; i++) {
		const struct nz_conn *c = &p->conns[i];

		if (c != conn && c->state == NZ_CONN_UP &&
		    READ_ONCE(c->doubt) && !READ_ONCE(c->suspect))
			return true;
	}
	return false;
}

/* Under peer->lock: the rail slots any usable connection serves. */
static u32 nz_sched_usable_mask(const struct nz_peer *p)
{
	u32 i, mask = 0;

	for (i = 0; i < p->comm->nrails; i++)
		if (nz_sched_conn_usable(&p->conns[i]))
			mask |= BIT(i);
	return mask;
}

static void nz_sched_assigned(struct nz_conn *conn, struct nz_chunk *ch)
{
	struct nz_est *e = &conn->est;
	u64 now = ktime_get_ns();

	ch->t_assign = now;
	ch->first = nz_est_assign(e, now, conn->inflight_bytes, ch->len,
				  conn->rail->ops->restart_rtts);
	if (e->state == NZ_SCHED_COLD)
		nz_sched_set_state(conn, NZ_SCHED_HOT);
	list_add_tail(&ch->node, &conn->chunks);
	conn->inflight_bytes += ch->len;
}

struct nz_chunk *nz_sched_next_chunk(struct nz_conn *conn,
				     struct nz_chunk **spare)
{
	unsigned int mode = READ_ONCE(sched_mode);
	struct nz_peer *p = conn->peer;
	struct nz_comm *comm = p->comm;
	struct nz_chunk *ch;
	u32 usable = 0;
	u64 oldest = 0, len, window, held;
	struct nz_msg *m;
	bool first = true, full, braked, limited;

	lockdep_assert_held(&p->lock);
	if (!nz_sched_rail_usable(conn->rail) || READ_ONCE(conn->suspect))
		return NULL;
	window = nz_sched_window(conn);
	held = nz_sched_held(conn);

	/*
	 * Chunks of a failed path first, and up to twice the window: the
	 * receiver is waiting for them, they should not queue for an ACK.
	 */
	ch = list_first_entry_or_null(&p->resend, struct nz_chunk, node);
	if (ch && held < 2 * window) {
		list_del(&ch->node);
		nz_sched_assigned(conn, ch);
		ch->first = false;
		return ch;
	}
	/*
	 * A new chunk must fit in the window, all of it: a failed rail's
	 * chunks wait here behind the window, not behind the window and one
	 * chunk more.  Not a window under two chunks, though: one chunk at a
	 * time, a rail measured low at the start (a slow first sample)
	 * samples no more than that per round trip and never recovers.  While
	 * another path is in doubt, its chunks may come here next: take a
	 * chunk only while holding less than half of one.
	 */
	braked = mode == NZ_SCHED_MEASURED && nz_sched_doubt(p, conn);
	if (braked)
		window = min_t(u64, window, comm->unit / 2);
	full = held >= window ||
	       (window >= 2ULL * comm->unit && held + comm->unit > window);
	/*
	 * A full window makes the sample window-limited only when there was
	 * something to take (a chunk to resend, or one the loop below finds):
	 * a ping-pong fills its window with its one message, and flagging
	 * that would let an idle period set the estimate.  Nor when the
	 * brake filled it: that says nothing about the rail.
	 */
	limited = full && !braked;
	if (full && ch) {
		conn->est.sample_limited |= limited;
		return NULL;
	}

	/*
	 * The receiver tracks NZ_SEQWIN_SIZE messages at most, from the
	 * oldest it has not finished: a send of ours in flight, or one we
	 * withdrew and it has not answered for yet.
	 */
	oldest = nz_peer_oldest_abort(p);
	list_for_each_entry(m, &p->tx_msgs, node) {
		if (!oldest || m->msg_id < oldest)
			oldest = m->msg_id;
		if (m->msg_id - oldest >= NZ_SEQWIN_SIZE)
			break;
		if (m->assigned_all)
			continue;
		if (!(m->rail_mask & BIT(conn->slot))) {
			/* Not for this rail, unless none of its rails is up. */
			if (!usable)
				usable = nz_sched_usable_mask(p) | BIT(31);
			if (m->rail_mask & usable)
				continue;
		}
		if (mode != NZ_SCHED_MEASURED &&
		    nz_sched_share_done(p, conn, m, mode))
			continue;
		if (full) {
			conn->est.sample_limited |= limited;
			return NULL;
		}
		len = nz_wire_chunk_len(m->total, m->next_off, 1, comm->unit);
		/* Leave it to the others only if they may take it. */
		if (first && mode == NZ_SCHED_MEASURED &&
		    (m->rail_mask & ~BIT(conn->slot) &
		     (usable ? usable : nz_sched_usable_mask(p))) &&
		    nz_sched_tail_defer(p, conn, len))
			return NULL;
		first = false;
		if (!*spare)	/* the caller allocates one and asks again */
			return ERR_PTR(-ENOMEM);
		ch = *spare;
		*spare = NULL;
		kref_get(&m->ref);
		ch->msg = m;
		ch->offset = m->next_off;
		ch->len = len;
		m->next_off += ch->len;
		m->assigned_all = m->next_off == m->total;
		m->outstanding++;
		m->slot_bytes[conn->slot] += ch->len;
		nz_sched_assigned(conn, ch);
		return ch;
	}
	return NULL;
}

/* A chunk of conn was acknowledged, under peer->lock. */
void nz_sched_acked(struct nz_conn *conn, const struct nz_chunk *ch)
{
	lockdep_assert_held(&conn->peer->lock);
	if (nz_est_acked(&conn->est, ktime_get_ns(), ch->len, ch->first,
			 ch->t_assign, conn->peer->comm->unit,
			 !conn->inflight_bytes))
		nz_sched_set_state(conn, NZ_SCHED_HOT);
}

/*
 * A heartbeat came back.  The smoothed round trip takes every sample; the
 * minimum only those of heartbeats sent while nothing else was in flight,
 * so that its own queue never inflates the target time.
 */
void nz_sched_rtt(struct nz_conn *conn, u64 ts_ns, u64 flags)
{
	struct nz_peer *p = conn->peer;
	struct nz_est *e = &conn->est;
	u64 now = ktime_get_ns();
	u32 us;

	lockdep_assert_held(&p->lock);
	/* The echo is the peer's word: ignore what cannot be ours. */
	if (!ts_ns || ts_ns > now || now - ts_ns > 10 * NSEC_PER_SEC)
		return;
	us = max_t(u64, div_u64(now - ts_ns, NSEC_PER_USEC), 1);
	/* The path carried a round trip that began then (health: suspect). */
	if (ts_ns > conn->echo_ns)
		WRITE_ONCE(conn->echo_ns, ts_ns);
	e->srtt_us = e->srtt_us ? div_u64(7ULL * e->srtt_us + us, 8) : us;
	if (flags & NZ_HB_IDLE) {
		if (!e->min_rtt_stamp ||
		    now - e->min_rtt_stamp > NZ_EST_MINRTT_WIN_NS) {
			e->min_rtt_prev_us = e->min_rtt_us;
			e->min_rtt_us = us;
			e->min_rtt_stamp = now;
		} else if (us < e->min_rtt_us) {
			e->min_rtt_us = us;
		}
	}
}

/* conn was found silent with chunks on the way (heartbeat.c). */
void nz_sched_conn_fault(struct nz_conn *conn)
{
	struct nz_peer *p = conn->peer;

	spin_lock_bh(&p->lock);
	nz_est_fault(&conn->est, ktime_get_ns());
	spin_unlock_bh(&p->lock);
}

/* conn came up (again): it starts cold, with nothing measured. */
void nz_sched_conn_up(struct nz_conn *conn)
{
	u64 transitions;

	lockdep_assert_held(&conn->peer->lock);
	nz_sched_set_state(conn, NZ_SCHED_PROBE);
	transitions = conn->est.transitions;
	memset(&conn->est, 0, sizeof(conn->est));
	conn->est.state = NZ_SCHED_PROBE;
	conn->est.transitions = transitions;
}

/* Every heartbeat period: cool down, let estimates go stale. */
void nz_sched_tick(struct nz_conn *conn)
{
	u64 now = ktime_get_ns(), cool, stale;
	struct nz_peer *p = conn->peer;
	struct nz_est *e = &conn->est;

	cool = (u64)READ_ONCE(sched_cool_ms) * NSEC_PER_MSEC;
	stale = (u64)READ_ONCE(sched_stale_ms) * NSEC_PER_MSEC;
	spin_lock_bh(&p->lock);
	if (e->state == NZ_SCHED_HOT && !conn->inflight_bytes &&
	    now - e->last_active > cool)
		nz_sched_set_state(conn, NZ_SCHED_COLD);
	if (e->state == NZ_SCHED_COLD && now - e->last_sample > stale) {
		e->bw = 0;
		e->start_us = 0;
		nz_est_sample_reset(e);
		nz_sched_set_state(conn, NZ_SCHED_PROBE);
	}
	spin_unlock_bh(&p->lock);
}
