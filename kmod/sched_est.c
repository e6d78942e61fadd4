// SPDX-License-Identifier: GPL-2.0
/*
 * The scheduler's arithmetic, moved out of sched.c unchanged so that the
 * host (tools/nezha-sim, unit tests) runs the very code the module runs.
 * sched.c keeps the locking, the lists, the clock, the module parameters
 * and the tracepoint; everything here is a function of its arguments.
 */
#include "sched_est.h"

#define NZ_EST_DEFAULT_START_US	10000
#define NZ_EST_TCP_IW		(10 * 1448)	/* bytes of TCP's restart window */

u32 nz_est_min_rtt(const struct nz_est *e)
{
	if (!e->min_rtt_us)
		return e->min_rtt_prev_us;
	if (!e->min_rtt_prev_us)
		return e->min_rtt_us;
	return min(e->min_rtt_us, e->min_rtt_prev_us);
}

/*
 * How long a connection's window should last, in ns: the target, twice its
 * unloaded round trip, or its start-up latency (round trip plus what the
 * two ends take to process a chunk), whichever is longest, so that the
 * window covers what is on the way.  Short, so that little waits in a
 * queue: a chunk of a failed rail is resent behind at most that much.
 */
u64 nz_est_target_ns(const struct nz_est *e, u32 target_ms)
{
	u64 us = max(2ULL * nz_est_min_rtt(e), (u64)e->start_us);

	return max_t(u64, (u64)target_ms * NSEC_PER_MSEC,
		     us * NSEC_PER_USEC);
}

/* The measured window, before the rail's weight; 0 when bw is unknown. */
u64 nz_est_window(const struct nz_est *e, u32 target_ms, u32 unit)
{
	u64 w;

	if (!e->bw)
		return 0;
	w = mul_u64_u64_div_u64(e->bw, nz_est_target_ns(e, target_ms),
				NSEC_PER_SEC);
	/* One chunk more: the one being written (Documentation/sched.rst). */
	return min(w, NZ_EST_MAX_WINDOW) + 1ULL * unit;
}

/* Start-up latency of a connection for a message of size bytes, in ns. */
u64 nz_est_start_ns(const struct nz_est *e, u64 size, u32 restart_rtts)
{
	u32 rtt = nz_est_min_rtt(e);
	u64 a = e->start_us;

	if (!a)
		a = rtt ? rtt : (e->srtt_us ? e->srtt_us :
				 NZ_EST_DEFAULT_START_US);
	a *= NSEC_PER_USEC;
	/* Slow start again: one round trip per doubling past the restart window. */
	if (e->state != NZ_SCHED_HOT && restart_rtts && size > NZ_EST_TCP_IW)
		a += (u64)min_t(u32, restart_rtts,
				fls64(div_u64(size, NZ_EST_TCP_IW))) *
		     rtt * NSEC_PER_USEC;
	return a;
}

/* Insert add into c[0..*n), kept sorted by start-up latency. */
void nz_est_cand_add(struct nz_sched_cand *c, u32 *n,
		     const struct nz_sched_cand *add)
{
	struct nz_sched_cand tmp;
	u32 j;

	c[*n] = *add;
	for (j = (*n)++; j > 0 && c[j - 1].a > c[j].a; j--) {
		tmp = c[j];
		c[j] = c[j - 1];
		c[j - 1] = tmp;
	}
}

/*
 * The rail slots a new message of total bytes goes on, from n >= 2
 * candidates sorted by start-up latency; 0: no choice, every rail.  One
 * chunk goes on the rail that delivers it first; rail j joins a larger
 * message when it is larger than what the rails before j carry while j is
 * still starting.
 */
u32 nz_est_pick_rails(const struct nz_sched_cand *c, u32 n, u64 total,
		      u32 unit)
{
	u64 best = U64_MAX, t, cost;
	u32 i, j, mask = 0;

	if (total <= unit) {
		for (i = 0; i < n; i++) {
			t = c[i].a;
			if (c[i].bw)
				t += div64_u64(total * NSEC_PER_SEC, c[i].bw);
			if (t < best) {
				best = t;
				mask = BIT(c[i].slot);
			}
		}
		return mask;
	}

	mask = BIT(c[0].slot);
	for (j = 1; j < n; j++) {
		cost = 0;
		for (i = 0; i < j; i++) {
			if (!(mask & BIT(c[i].slot)))
				continue;
			/* Unmeasured: no model yet, take every rail. */
			if (!c[i].bw || !c[j].bw) {
				cost = 0;
				break;
			}
			cost += mul_u64_u64_div_u64(c[j].a - c[i].a, c[i].bw,
						    NSEC_PER_SEC);
		}
		if (total > cost)
			mask |= BIT(c[j].slot);
	}
	return mask;
}

/*
 * A chunk of len bytes is assigned at now to a connection that holds
 * inflight bytes.  Returns whether its ACK is a start-up sample: the
 * connection was idle, and hot -- or the chunk fits in TCP's restart
 * window, or the transport has no slow start (restart_rtts 0).  A larger
 * chunk on a new or cold TCP connection goes out in slow start: its ACK
 * times the restart, which nz_est_start_ns() charges on its own for a
 * connection that is not hot.  Until 2026-12-06 it was a sample: a path
 * that reconnected measured 19.9 ms against its peer rail's 7.5 ms hot,
 * every 2 MiB message then finished sooner on the other rail alone (at
 * 279 MB/s), and the new path carried nothing until its estimates went
 * stale 5 s later (the failover suite, "link down twice, server side").
 */
bool nz_est_assign(struct nz_est *e, u64 now, u64 inflight, u32 len,
		   u32 restart_rtts)
{
	e->last_active = now;
	return !inflight && (e->state == NZ_SCHED_HOT || !restart_rtts ||
			     len <= NZ_EST_TCP_IW);
}

/*
 * A chunk of len bytes was acknowledged at now; first: it was assigned
 * (at t_assign) to an idle connection; idle: nothing is in flight any more.
 * Returns true when the connection has a sample: it is then hot.
 *
 * The bandwidth sample's clock runs only while the connection is busy, from
 * the first ACK of a busy period to its last (so a period's start-up is not
 * in it), and a sample spans busy periods until it holds 50 ms or four round
 * trips.  Until 2026-12-05 each busy period started a new sample: a rail
 * whose periods were all shorter than that (a burst of 16 MiB at 100 MB/s
 * is 160 ms; four round trips of a guest's slow heartbeat can be longer)
 * carried 62 MiB hot without ever being measured.
 */
bool nz_est_acked(struct nz_est *e, u64 now, u32 len, bool first,
		  u64 t_assign, u32 unit, bool idle)
{
	u64 dt, rate, lat, ser;

	e->last_active = now;
	/* Not a chunk that waited through a fault (nz_est_fault()). */
	if (first && t_assign > e->fault_ns && now > t_assign) {
		lat = now - t_assign;
		if (e->bw) {
			ser = div64_u64((u64)len * NSEC_PER_SEC, e->bw);
			lat = lat > ser ? lat - ser : 0;
		}
		lat = clamp_t(u64, div_u64(lat, NSEC_PER_USEC), 1, U32_MAX);
		e->start_us = e->start_us ?
			div_u64(7ULL * e->start_us + lat, 8) : lat;
		e->last_sample = now;
	}
	if (!e->sample_start) {
		/* The busy period's first ACK: its bytes came before the clock. */
		e->sample_start = now;
	} else if (now > e->sample_start) {
		e->sample_bytes += len;
		dt = e->sample_busy + (now - e->sample_start);
		if (dt >= max_t(u64, 50 * NSEC_PER_MSEC, 4ULL *
				nz_est_min_rtt(e) * NSEC_PER_USEC)) {
			rate = mul_u64_u64_div_u64(e->sample_bytes,
						   NSEC_PER_SEC, dt);
			/*
			 * An app-limited sample only ever raises it, and
			 * sets it first only if it carried a chunk unit or
			 * more: a few header bytes acknowledged 50 ms later
			 * made it 560 bytes/s, a one-chunk window.
			 */
			if (e->sample_limited ||
			    (e->bw ? rate > e->bw : e->sample_bytes >= unit)) {
				e->bw = e->bw ? div_u64(3 * e->bw + rate, 4) :
						rate;
				e->samples++;
				e->last_sample = now;
			}
			e->sample_start = now;
			e->sample_busy = 0;
			e->sample_bytes = 0;
			e->sample_limited = false;
		}
	}
	/* Idle: the clock stops until the next busy period's first ACK. */
	if (idle) {
		e->sample_busy += now - e->sample_start;
		e->sample_start = 0;
	}
	return e->last_sample != 0;
}

/* The sample collected so far is dropped (its connection went stale). */
void nz_est_sample_reset(struct nz_est *e)
{
	e->sample_start = 0;
	e->sample_busy = 0;
	e->sample_bytes = 0;
	e->sample_limited = false;
}

/*
 * The path was found silent with chunks on the way (health: suspect) at
 * now.  What was on it then waited through the fault: its ACKs time the
 * fault, not the path.  The bandwidth sample in progress is dropped, and a
 * chunk assigned before now gives no start-up sample.  Until 2026-12-06 the
 * chunk a suspect TCP path was still writing did: its ACK, 100 ms or more
 * after it was assigned, raised the start-up estimate of a 180 MB/s rail
 * from 11 to 27 ms, and then every 2 MiB message finished sooner on the
 * other rail alone (nz_est_pick_rails()); idle, the rail went cold, took no
 * chunk and so no sample, and stayed unused until its estimates went stale
 * 5 s later (the failover suite's "r1 re-admitted, carrying traffic").
 */
void nz_est_fault(struct nz_est *e, u64 now)
{
	e->fault_ns = now;
	nz_est_sample_reset(e);
}

/*
 * The tail rule (Documentation/sched.rst, "The tail"), for connection self
 * among c[0..n): the bytes still unassigned that the others would not
 * finish before self finishes len more.  0: self takes the chunk whatever
 * is left; else it leaves the chunk to the others if no more than that
 * many bytes are left.
 *
 * A connection not measured yet (nothing but short exchanges so far: a
 * sample needs a longer busy period) counts as the mean of the measured
 * ones, or all as equal: otherwise the first connection to pull would
 * take every chunk of a short message.
 */
u64 nz_est_tail_need(const struct nz_est_conn *c, u32 n, u32 self, u64 len)
{
	u64 obw = 0, oinfl = 0, sum = 0, guess, bw, need;
	u32 i, cnt = 0, unmeasured = 0;

	for (i = 0; i < n; i++) {
		bool other = i != self;

		if (other && !c[i].usable)
			continue;
		if (c[i].bw) {
			sum += c[i].bw;
			cnt++;
		}
		if (!other)
			continue;
		if (c[i].bw)
			obw += c[i].bw;
		else
			unmeasured++;
		oinfl += c[i].held;
	}
	guess = cnt ? div_u64(sum, cnt) : 1;
	obw += unmeasured * guess;
	if (!obw)
		return 0;
	bw = c[self].bw ? c[self].bw : guess;
	/* What the others deliver in the time self needs for its share. */
	need = mul_u64_u64_div_u64(c[self].held + len, obw, bw);
	if (need <= oinfl)
		return 0;
	return need - oinfl;
}

/*
 * Static modes (sched_mode equal or weights): has a connection of weight
 * w, of the usable connections' wsum, sent its share of a message of
 * total bytes?  The shares are rounded up, so that together they cover
 * every byte (rounded down, the last bytes of 2 chunks + 1 byte on two
 * rails were nobody's), and an empty message is never a finished share:
 * its one empty chunk must still go.
 */
bool nz_est_share_done(u64 sent, u64 total, u32 w, u64 wsum)
{
	if (!total || !w || !wsum)
		return false;
	return sent >= div64_u64(total * w + wsum - 1, wsum);
}
