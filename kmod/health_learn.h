/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What a peer's lateness taught (Documentation/health.rst, "A busy node is
 * not a dead path"): how much more silence its paths are allowed before
 * doubt and suspicion, on top of the suspect time.
 *
 *   - learned from false alarms (a suspect path that echoed at once): the
 *     suspect time on the first, twice the previous extra on each next
 *     one, at most NZ_LEARN_MAX_MS;
 *   - halving every decay period without a lesson;
 *   - kept by near misses (a path late by at least half of what it is
 *     allowed, that then spoke), and raised to twice their lateness: the
 *     decay starts again;
 *   - given at the start in a job of more than 2 ranks.
 *
 * Pure C over a small struct, no locks, no clock: the caller passes the
 * time in ticks (jiffies in the module, ms in the host unit test) and the
 * decay period in the same ticks.  health.c calls it from a
 * communicator's heartbeat work, the only writer.
 */
#ifndef _NZ_HEALTH_LEARN_H
#define _NZ_HEALTH_LEARN_H

#include "nz_compat.h"

#define NZ_LEARN_MAX_MS		240	/* learned tolerance, at most */
#define NZ_FALSE_ALARM_MS	250	/* an echo this soon: it was alive */
#define NZ_FALSE_ALARM_TIMES	16	/* ... or within this many suspect times */

struct nz_learn {
	u32 extra_ms;			/* as learned at @since */
	unsigned long since;		/* ticks: the last lesson */
};

unsigned int nz_learn_extra(const struct nz_learn *l, unsigned long now,
			    unsigned long decay);
void nz_learn_start(struct nz_learn *l, unsigned long now, u32 ranks,
		    unsigned int start_ms);
void nz_learn_false_alarm(struct nz_learn *l, unsigned long now,
			  unsigned long decay, unsigned int base_ms);
/*
 * How soon after its suspicion a path's echo proves it was alive (a false
 * alarm), for a suspect time of base_ms: NZ_FALSE_ALARM_MS, or
 * NZ_FALSE_ALARM_TIMES suspect times where the operator set a longer
 * heartbeat period or more misses (a slow node).  Never shorter than the
 * suspect time itself.
 */
unsigned int nz_learn_alarm_window_ms(unsigned int base_ms);
bool nz_learn_near_miss(struct nz_learn *l, unsigned long now,
			unsigned long decay, unsigned int base_ms,
			unsigned int owed_ms);

/*
 * How late a node's answers on a rail may be because of its own queue
 * (Documentation/health.rst, "Queues are not silence"): the bytes waiting
 * in the rail's qdisc, at the rate that queue drains.  The rate is
 * measured while the queue holds something at both ends of a sample
 * (the device sent all that time, so what it sent is its rate); before a
 * first such sample, the link speed if the device tells one.  No rate, no
 * delay: a queue that never drained teaches nothing, and a stalled
 * device is left to the silence rules.
 */
#define NZ_LATE_MAX_MS		1000	/* a queue's delay, at most */
#define NZ_LATE_HOLD_MS		1000	/* a report stands this long */
#define NZ_LATE_KEEP_MS		10000	/* a peer's last, if none came since */

struct nz_egress {
	u64 tx_bytes;			/* the device's counter at @at_us */
	u64 at_us;			/* the last sample; 0 before one */
	u32 backlog;			/* bytes queued at @at_us */
	u32 rate;			/* bytes per ms; 0 = not measured */
};

unsigned int nz_egress_sample(struct nz_egress *e, u64 now_us, u64 tx_bytes,
			      u32 backlog, u32 speed_mbps);

/*
 * A delay reported (by the peer, or by our own queue), held as the
 * largest of those within NZ_LATE_HOLD_MS: a queue that fills again at
 * each burst is judged on its bursts, not on the instant between them.
 * nz_late_note() takes that hold; nz_late_ms() may be asked with a
 * longer one, so that the last report stands until a newer one comes (a
 * peer's, which comes only on its heartbeats and echoes).  Times in
 * ticks, as for struct nz_learn.
 */
struct nz_late {
	u32 ms;
	unsigned long at;
};

void nz_late_note(struct nz_late *l, unsigned long now, unsigned long hold,
		  unsigned int ms);
unsigned int nz_late_ms(const struct nz_late *l, unsigned long now,
			unsigned long hold);

#endif
