// SPDX-License-Identifier: GPL-2.0
/*
 * What each heartbeat period does to a connection that is up, for
 * health.c, which owns the timers and the thresholds: its silence
 * measured, the path made suspect, re-admitted or torn down, a probe sent
 * when an answer is needed.  And a peer left with no rail.
 */
#include <linux/module.h>
#include <linux/slab.h>
#include "comm.h"
#include "transport.h"

/* Periods a path that came up is probed at most, for its first round trip. */
#define NZ_HB_WARMUP		8
#define NZ_SUSPECT_MIN_MS	500	/* suspect without an echo, at least */

/* The path went silent: move its unacknowledged chunks elsewhere. */
static void nz_conn_suspect(struct nz_conn *conn, unsigned int learned,
			    unsigned int late)
{
	struct nz_rail_stats *st = &conn->rail->stats;
	u32 resent;

	nz_sched_conn_fault(conn);
	resent = nz_conn_requeue_chunks(conn, false);
	atomic64_inc(&st->failovers);
	atomic64_add(resent, &st->resent);
	atomic64_set(&st->last_failover_ms, nz_health_now_ms());
	pr_info("rail %s: path to rank %u silent for %u ms (%u learned, %u queued), %u chunks rerouted\n",
		conn->rail->name, conn->peer->rank,
		jiffies_to_msecs(jiffies - conn->quiet_since), learned, late,
		resent);
	nz_health_event(conn, NZ_EV_CONN_DOWN, -ETIMEDOUT, resent);
	nz_peer_kick_all(conn->peer);
}

/*
 * Did the peer speak after since on another path that is up (and, with
 * usable, not suspect)?
 */
static bool nz_conn_other_heard(const struct nz_conn *conn,
				unsigned long since, bool usable)
{
	const struct nz_peer *p = conn->peer;
	u32 s;

	for (s = 0; s < p->comm->nrails; s++) {
		const struct nz_conn *o = &p->conns[s];

		if (o != conn && READ_ONCE(o->state) == NZ_CONN_UP &&
		    !(usable && READ_ONCE(o->suspect)) &&
		    time_after(o->quiet_since, since))
			return true;
	}
	return false;
}

/*
 * Is another path to the peer alive: did something arrive on it after this
 * one went quiet (by more than a heartbeat period)?  When every path went
 * silent at once it is the peer (or this host) that stalls, not a path:
 * moving chunks between silent paths would only send them twice.
 */
static bool nz_conn_other_alive(const struct nz_conn *conn)
{
	unsigned long period = msecs_to_jiffies(READ_ONCE(nz_health.hb_interval_ms));

	return nz_conn_other_heard(conn, conn->quiet_since + period, true);
}

/* The transport's last arrival of any packet (jiffies), or 0. */
static unsigned long nz_conn_rx_seen(struct nz_conn *conn)
{
	unsigned long seen = 0;

	if (!conn->rail->ops->conn_rx_seen)
		return 0;
	spin_lock_bh(&conn->kick_lock);
	if (conn->tp && !conn->tp_dead)
		seen = conn->rail->ops->conn_rx_seen(conn);
	spin_unlock_bh(&conn->kick_lock);
	return seen;
}

/*
 * The path's unloaded round trip in ms: the transport's measure (TCP's,
 * from the handshake on), else the heartbeats' (0 until measured).
 */
static unsigned int nz_conn_min_rtt_ms(struct nz_conn *conn)
{
	u32 us = 0;

	spin_lock_bh(&conn->kick_lock);
	if (conn->tp && !conn->tp_dead && conn->rail->ops->conn_min_rtt_us)
		us = conn->rail->ops->conn_min_rtt_us(conn);
	spin_unlock_bh(&conn->kick_lock);
	if (!us) {
		spin_lock_bh(&conn->peer->lock);
		us = nz_est_min_rtt(&conn->est);
		spin_unlock_bh(&conn->peer->lock);
	}
	return us / USEC_PER_MSEC;
}

void nz_conn_peer_late(struct nz_conn *conn, unsigned int ms)
{
	lockdep_assert_held(&conn->peer->lock);
	nz_late_note(&conn->peer_late, jiffies,
		     msecs_to_jiffies(NZ_LATE_HOLD_MS), ms);
}

/*
 * Queues are not silence (health.rst): what waits ahead of our chunks in
 * our queue on the rail, and ahead of the peer's answers in its queue,
 * as measured (ours) and said (the peer's, on its heartbeats and echoes),
 * each the largest of the last NZ_LATE_HOLD_MS.  The peer's word comes
 * only with its heartbeats and echoes, which a path busy both ways does
 * not send, and which its queue delays too: its last one stands until a
 * newer one comes, NZ_LATE_KEEP_MS at most.  A queue that drains takes
 * that long whether the path is alive or not; a dead path behind an
 * empty queue is suspected as soon as before.
 */
static unsigned int nz_conn_late_ms(struct nz_conn *conn, unsigned long now)
{
	unsigned long keep = msecs_to_jiffies(NZ_LATE_KEEP_MS);
	unsigned int ms;

	spin_lock_bh(&conn->peer->lock);
	ms = nz_late_ms(&conn->peer_late, now, keep);
	spin_unlock_bh(&conn->peer->lock);
	return min_t(unsigned int, ms + nz_rail_late_ms(conn->rail, now),
		     NZ_LATE_MAX_MS);
}

/*
 * conn is torn down: its peer answered nothing on it for long enough to
 * call the peer gone (nz_health_peer_gone()).  The peer's other paths
 * that heard nothing from it since @half, the middle of that silence, go
 * too (the half: the rule that tells a broken path from a gone peer), so
 * that its transfers fail one grace period later, not when each path has
 * run up a silence of its own.  A path's silence counts only while it waits
 * for an answer, and one torn down alone left the next to count from
 * when the chunks of the first moved to it: the error came up to 10 s
 * later (make check, failover suite, "peer vanished from every rail").
 */
static void nz_peer_gone(struct nz_conn *conn, unsigned long half)
{
	struct nz_peer *p = conn->peer;
	u32 s;

	for (s = 0; s < p->comm->nrails; s++) {
		struct nz_conn *o = &p->conns[s];

		if (o != conn && READ_ONCE(o->state) == NZ_CONN_UP &&
		    !time_after(o->quiet_since, half))
			nz_conn_fail_live(o, -ETIMEDOUT);
	}
}

/*
 * How a path is probed now.  A probe is a HEARTBEAT that asks for an echo:
 * it makes the other end speak, and only the end that needs an answer
 * sends one.
 *  - FAST, every period: chunks wait for an answer on it (this is what
 *    detects a dead path in tens of ms), it is suspect (only an echo
 *    re-admits it), it came up a moment ago and has no round trip
 *    measured yet (until the first echo, at most NZ_HB_WARMUP periods), or
 *    another path to the same peer is in doubt: answers on this one tell
 *    a silent path from a silent (busy, descheduled) peer
 *    (nz_conn_other_alive()).
 *  - WAIT, a few times a second: we wait for the peer (a send or receive
 *    with it is pending) and nothing of ours is on this path.  Enough for
 *    the dead timer to notice a peer that went away.  A send the peer
 *    confirmed whose pages TCP still holds (zero-copy: its completion
 *    waits for TCP's ACK) is pending too: without it, a peer that
 *    vanished right after confirming one left only the path that held
 *    those pages counting its silence, and the others none until the
 *    first was torn down 10 s later (make check, failover suite).
 *    So is a path we stopped reading for want of budget (rx_blocked):
 *    its sender waits for us, and a receiver that held back a message
 *    bigger than its budget, with no receive posted, said nothing at all;
 *    with a timeout over 10 s its sender heard nothing on any path and
 *    tore them all down (p2p suite, recover, on the debug kernel).
 *  - NONE: nothing pending with the peer.  Silence then is nobody's
 *    business, and the idle cost of watching paths does not grow with
 *    the ranks of a job (issue 23): until 2026-12-02 every path sent a
 *    heartbeat every period, idle or not, 148-230 a second each way.
 */
enum nz_probe { NZ_PROBE_NONE, NZ_PROBE_WAIT, NZ_PROBE_FAST };

static enum nz_probe nz_conn_probe(const struct nz_conn *conn,
				   unsigned long now, unsigned long period)
{
	const struct nz_peer *p = conn->peer;
	bool held = false;
	u32 s;

	if (conn->suspect || READ_ONCE(conn->inflight_bytes) ||
	    (!READ_ONCE(conn->est.srtt_us) &&
	     time_before(now, conn->up_since + NZ_HB_WARMUP * period)))
		return NZ_PROBE_FAST;
	for (s = 0; s < p->comm->nrails; s++) {
		if (READ_ONCE(p->conns[s].doubt))
			return NZ_PROBE_FAST;
		if (READ_ONCE(p->conns[s].rx_blocked))
			held = true;
	}
	if (held || !list_empty(&p->tx_msgs) || !list_empty(&p->posted) ||
	    !list_empty(&p->rx_msgs) || atomic_read(&p->zc_held))
		return NZ_PROBE_WAIT;
	return NZ_PROBE_NONE;
}

/* health.c, every heartbeat period, for each connection. */
void nz_conn_heartbeat(struct nz_conn *conn, unsigned long stall)
{
	unsigned int marks = READ_ONCE(conn->rx_marks);
	unsigned int ms = max(READ_ONCE(nz_health.hb_interval_ms), 1U);
	unsigned long now = jiffies, last, period, seen;
	bool blocked = READ_ONCE(conn->rx_blocked), echoed;
	struct nz_peer *p = conn->peer;
	struct nz_ctrl *c;
	unsigned int rtt = 0, owed, extra, late;
	enum nz_probe probe;
	u64 waiting;

	if (READ_ONCE(conn->state) != NZ_CONN_UP)
		return;
	period = msecs_to_jiffies(ms);
	/*
	 * The carrier is read here, every period: the netdev notifier hears
	 * of its loss only from linkwatch, under RTNL, which in a busy guest
	 * came as late as silence (25 ms and more).
	 */
	if (nz_rail_state(conn->rail) == NZ_RAIL_NO_LINK) {
		nz_conn_fail_live(conn, -ENETDOWN);
		return;
	}
	smp_rmb();	/* rx_last as new as the marks: nz_conn_rx_mark() */
	last = READ_ONCE(conn->rx_last);
	seen = nz_conn_rx_seen(conn);
	/*
	 * Bytes arrived, or we stopped reading on purpose: not silent.
	 * Silence counts from the arrival itself, not from this run, which
	 * may come a period later.  Packets that reached the transport but
	 * no frame yet (TCP holds the data behind a lost segment until its
	 * retransmission, a round trip or more on a loaded rail) count too:
	 * in bidirectional bulk traffic that wait made healthy paths suspect
	 * every few seconds.
	 */
	if (seen && time_after(seen, conn->quiet_since) &&
	    time_after(seen, last))
		last = seen;
	else
		seen = 0;
	/* Silence counts only while someone needs an answer on the path. */
	probe = nz_conn_probe(conn, now, period);
	if (probe == NZ_PROBE_NONE)
		conn->probe_since = now;
	/* Held back for budget a whole timeout: now it refuses (rx.c). */
	if (blocked && nz_conn_refuse_due(conn))
		nz_conn_kick(conn);
	if (marks != conn->hb_marks || blocked || seen) {
		/* Late, but it spoke (nz_health_near_miss()). */
		if (conn->owed_last && !conn->suspect &&
		    (marks != conn->hb_marks || seen))
			nz_health_near_miss(conn, now, conn->owed_last * ms);
		conn->hb_marks = marks;
		if (blocked || time_after(last, now))
			last = now;
		if (time_after(last, conn->quiet_since))
			conn->quiet_since = last;
		conn->silent = 0;
	} else {
		unsigned long from;
		unsigned int quiet;

		/* Our own stall is nobody's silence. */
		conn->quiet_since += min(stall, now - conn->quiet_since);
		conn->owed_since += min(stall, now - conn->owed_since);
		conn->probe_since += min(stall, now - conn->probe_since);
		from = conn->quiet_since;
		if (time_after(conn->probe_since, from))
			from = conn->probe_since;
		quiet = jiffies_to_msecs(now - from);
		/*
		 * Nor is a round trip longer than the time that makes a path
		 * suspect: on a path of 40 ms, healthy ones fell silent for
		 * 12-16 ms in bursts (make check, sched tests).  Its unloaded
		 * round trip on top, then, from the start: the heartbeats'
		 * first sample came after the first burst had made such a path
		 * suspect at every new communicator.  Not a shorter one: in a
		 * busy guest the heartbeats' round trip on a quick rail came
		 * out at 8-12 ms, and a blackhole took 24-48 ms to notice
		 * instead of 16-20.
		 */
		rtt = nz_conn_min_rtt_ms(conn);
		if (rtt < ms * READ_ONCE(nz_health.hb_misses))
			rtt = 0;
		conn->silent = quiet > rtt ? (quiet - rtt) / ms : 0;
	}
	/*
	 * A suspect path is re-admitted when a heartbeat sent after it became
	 * suspect comes back: a round trip that works now.  Not on any
	 * arrival: frames sent before the fault still came in after it (a
	 * busy guest read them from its NIC tens of ms late), and a path
	 * dead one way only still carries the peer's frames to us.  Each such
	 * arrival re-admitted a blackholed path, which then took chunks to
	 * lose again 16 ms later, back and forth with the survivor (a 225 ms
	 * gap with 16 KiB chunks, make bench-failover).  Should no echo come
	 * while frames do, the arrivals re-admit it after NZ_SUSPECT_MIN_MS:
	 * a path that is wrong, then, is suspect again at most that often.
	 */
	echoed = conn->suspect && READ_ONCE(conn->echo_ns) >= conn->suspect_ns;
	if (echoed)
		nz_health_readmitted(conn, now);
	if (conn->suspect &&
	    (echoed ||
	     (time_after(conn->quiet_since, conn->suspect_since) &&
	      time_after(now, conn->suspect_since +
			 msecs_to_jiffies(NZ_SUSPECT_MIN_MS))))) {
		WRITE_ONCE(conn->suspect, false);
		nz_health_event(conn, NZ_EV_CONN_UP, 0, 0);
		nz_peer_kick_all(p);
	}
	/*
	 * Only silence while chunks wait for an answer counts against a
	 * path.  One that owes us nothing holds up no transfer, and a busy
	 * receiver (whose paths carry only its ACKs back) saw them quiet for
	 * 16-36 ms about once a second, a failover counted, logged and
	 * announced each time.  Nor does the quiet before its chunks came: a
	 * path quiet while it owed nothing had no reason to speak, and
	 * judged on that, chunks moved to it were moved off again at the
	 * next period, back and forth between two rails of a busy guest
	 * until a transfer timed out (make check, 4 ranks on 2 guests).
	 */
	waiting = READ_ONCE(conn->inflight_bytes);
	owed = conn->silent;
	if (!waiting) {
		conn->owed_since = now;
		owed = 0;
	} else if (time_after(conn->owed_since, conn->quiet_since)) {
		unsigned int w = jiffies_to_msecs(now - conn->owed_since);

		owed = min(owed, w > rtt ? (w - rtt) / ms : 0);
	}
	/*
	 * What the queues on the way hold up, and then what this peer's
	 * lateness taught us (nz_health_readmitted()).  A near miss is
	 * lateness beyond the queues: they explain the rest.  Nothing owed
	 * needs no explaining: the two locks are not taken then, the common
	 * case at every period of every path.
	 */
	late = owed ? nz_conn_late_ms(conn, now) : 0;
	owed = owed > late / ms ? owed - late / ms : 0;
	conn->owed_last = owed;
	extra = nz_health_suspect_extra_ms(p, now);
	owed = owed > extra / ms ? owed - extra / ms : 0;
	/*
	 * Half way to suspect: the other rails stop queueing more
	 * (nz_sched_next_chunk()), so that these chunks, if they must move,
	 * wait behind little there.
	 */
	WRITE_ONCE(conn->doubt, !conn->suspect && nz_health_doubt(owed));
	if (nz_health_suspect(owed) && !conn->suspect &&
	    nz_conn_other_alive(conn)) {
		conn->suspect_ns = ktime_get_ns();
		conn->suspect_since = now;
		WRITE_ONCE(conn->suspect, true);
		nz_conn_suspect(conn, extra, late);
	}
	/*
	 * Silent long enough to tear down: a broken path if the peer spoke
	 * on another one within the last half of this silence, else the
	 * peer stalls (or is gone) and gets longer (nz_health_peer_gone()).
	 */
	if (nz_health_dead(conn->silent)) {
		unsigned long half = now - msecs_to_jiffies(ms * conn->silent / 2);
		bool gone = nz_health_peer_gone(conn->silent);

		if (gone || nz_conn_other_heard(conn, half, false)) {
			if (gone)
				nz_peer_gone(conn, half);
			nz_conn_fail_live(conn, -ETIMEDOUT);
			return;
		}
	}
	/* Up and quiet for a while: forget past backoff. */
	if (conn->backoff_ms && time_after(jiffies, conn->up_since + 10 * HZ))
		conn->backoff_ms = 0;
	nz_sched_tick(conn);
	/*
	 * Frames went both ways within the period: each end has just seen
	 * the other, a probe would tell neither anything.  It would only
	 * cost both CPUs a frame in the middle of the traffic.  But a suspect
	 * path sends one every period: only an echo re-admits it.
	 */
	if (probe == NZ_PROBE_NONE)
		return;
	if (probe == NZ_PROBE_WAIT) {
		period = nz_health_wait_period();
		if (time_before(now, conn->probe_last + period))
			return;
	}
	if (!conn->suspect &&
	    time_before(now, READ_ONCE(conn->tx_last) + period) &&
	    time_before(now, last + period))
		return;
	conn->probe_last = now;
	c = kzalloc(sizeof(*c), GFP_KERNEL);
	if (!c)
		return;
	nz_frame_init(&c->f, NZ_FRAME_HEARTBEAT);
	c->f.hb.ts_ns = ktime_get_ns();
	spin_lock_bh(&p->lock);
	if (conn->state == NZ_CONN_UP && conn->nctrl < 64) {
		list_add_tail(&c->node, &conn->ctrl);
		conn->nctrl++;
		conn->hb_sent++;
		atomic64_inc(&conn->rail->stats.hb_frames);
		/* Every probe is a round-trip sample; unloaded ones are marked. */
		c->f.hb.seq = NZ_HB_ECHO;
		if (!conn->inflight_bytes)
			c->f.hb.seq |= NZ_HB_IDLE;
		c = NULL;
	}
	spin_unlock_bh(&p->lock);
	kfree(c);
	nz_conn_kick(conn);
}

/*
 * health.c, every scan: no connection to p for the grace period.  Quiet
 * when nothing was pending (a peer that left in order, an idle job).
 */
void nz_peer_no_rail(struct nz_peer *p)
{
	u32 n = nz_peer_fail_pending(p, -ENETDOWN);

	if (n)
		pr_warn_ratelimited("no rail left to rank %u: %u transfers failed\n",
				    p->rank, n);
}
