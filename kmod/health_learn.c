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
 * its decay starts again from what is left.  True if it was one.
 */
bool nz_learn_near_miss(struct nz_learn *l, unsigned long now,
			unsigned long decay, unsigned int base_ms,
			unsigned int owed_ms)
{
	unsigned int extra = nz_learn_extra(l, now, decay);

	if (!extra || owed_ms * 2 < base_ms + extra)
		return false;
	l->extra_ms = extra;
	l->since = now;
	return true;
}
