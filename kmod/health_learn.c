// SPDX-License-Identifier: GPL-2.0
/*
 * The rules by which a peer's lateness is learned and forgotten
 * (health_learn.h).  Compiled into nezha.ko and into the host unit test
 * selftests/unit/test_health_learn.c.
 */
#include "health_learn.h"

unsigned int nz_learn_alarm_window_ms(unsigned int base_ms)
{
	if (base_ms > ~0U / NZ_FALSE_ALARM_TIMES)
		return ~0U;
	if (base_ms * NZ_FALSE_ALARM_TIMES < NZ_FALSE_ALARM_MS)
		return NZ_FALSE_ALARM_MS;
	return base_ms * NZ_FALSE_ALARM_TIMES;
}

/* The extra silence allowed now: what was learned, halved per period. */
unsigned int nz_learn_extra(const struct nz_learn *l, unsigned long now,
			    unsigned long decay)
{
	unsigned long halvings;

	if (!l->extra_ms)
		return 0;
	halvings = (now - l->since) / (decay ? decay : 1);
	return halvings >= 8 ? 0 : l->extra_ms >> halvings;
}

/*
 * A new peer starts as if a false alarm had just been seen, with
 * start_ms, in a job of more than 2 ranks; in a job of 2 with nothing.
 */
void nz_learn_start(struct nz_learn *l, unsigned long now, u32 ranks,
		    unsigned int start_ms)
{
	l->extra_ms = ranks > 2 ? min_t(unsigned int, start_ms,
					NZ_LEARN_MAX_MS) : 0;
	l->since = now;
}

/* A suspect path echoed at once: more patience, from what is left now. */
void nz_learn_false_alarm(struct nz_learn *l, unsigned long now,
			  unsigned long decay, unsigned int base_ms)
{
	unsigned int extra = nz_learn_extra(l, now, decay);

	l->extra_ms = min_t(unsigned int, max(extra * 2, base_ms),
			    NZ_LEARN_MAX_MS);
	l->since = now;
}

/*
 * A path owed an answer for owed_ms, then spoke.  At least half of what
 * it is allowed (base_ms plus the extra): the lesson still holds, and
 * its decay starts again from what is left, now with room for twice this
 * lateness (at most NZ_LEARN_MAX_MS).  True if it was one.
 */
bool nz_learn_near_miss(struct nz_learn *l, unsigned long now,
			unsigned long decay, unsigned int base_ms,
			unsigned int owed_ms)
{
	unsigned int extra = nz_learn_extra(l, now, decay);

	if (!extra || owed_ms * 2 < base_ms + extra)
		return false;
	l->extra_ms = clamp_t(unsigned int, owed_ms * 2 - base_ms, extra,
			      NZ_LEARN_MAX_MS);
	l->since = now;
	return true;
}

/*
 * A sample of the rail's device: tx_bytes sent so far, backlog bytes in
 * its queues now.  Returns the ms that backlog takes to drain, at most
 * NZ_LATE_MAX_MS; 0 when no rate is known.
 */
unsigned int nz_egress_sample(struct nz_egress *e, u64 now_us, u64 tx_bytes,
			      u32 backlog, u32 speed_mbps)
{
	u64 rate = e->rate, dt = now_us - e->at_us, sent = tx_bytes - e->tx_bytes;

	/*
	 * Busy at both ends: the device sent all along.  A counter that went
	 * back (a device replaced under the same index) or nothing sent (a
	 * paused queue) measures nothing.
	 */
	if (e->at_us && e->backlog && backlog && dt && tx_bytes > e->tx_bytes) {
		u64 s = div64_u64(sent * 1000, dt);

		s = max_t(u64, min_t(u64, s, U32_MAX), 1);
		rate = rate ? (3 * rate + s) / 4 : s;
		e->rate = rate;
	}
	e->tx_bytes = tx_bytes;
	e->backlog = backlog;
	e->at_us = now_us ? now_us : 1;
	/*
	 * No faster than the link: a shaper's burst (tbf sends its bucket at
	 * the device's speed) measured 5-20x the rate it then keeps.
	 */
	if (speed_mbps && (!rate || rate > (u64)speed_mbps * 125))
		rate = (u64)speed_mbps * 125;	/* bytes per ms */
	if (!backlog || !rate)
		return 0;
	return min_t(u64, div64_u64(backlog + rate - 1, rate), NZ_LATE_MAX_MS);
}

void nz_late_note(struct nz_late *l, unsigned long now, unsigned long hold,
		  unsigned int ms)
{
	ms = min_t(unsigned int, ms, NZ_LATE_MAX_MS);
	if (ms >= nz_late_ms(l, now, hold)) {
		l->ms = ms;
		l->at = now;
	}
}

unsigned int nz_late_ms(const struct nz_late *l, unsigned long now,
			unsigned long hold)
{
	if (!l->ms || now - l->at > hold)
		return 0;
	return l->ms;
}
