/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The scheduler's arithmetic (Documentation/sched.rst): a connection's
 * online estimates, the window they give, its start-up cost, which rails a
 * new message uses and how an acknowledgement updates the estimates.
 *
 * Pure C over small structs, no locks, no clock: the caller passes the
 * time in ns.  sched.c calls it under peer->lock; tools/nezha-sim and the
 * host unit tests compile the same file.
 */
#ifndef _NZ_SCHED_EST_H
#define _NZ_SCHED_EST_H

#include "nz_compat.h"

/*
 * The scheduler's view of a connection (sched.c, Documentation/sched.rst):
 *
 *   PROBE --sample--> HOT --idle cool_ms--> COLD --used--> HOT
 *     ^                                       |
 *     +------- estimates older than stale_ms -+
 */
enum nz_sched_state {
	NZ_SCHED_PROBE,			/* nothing measured yet, or stale */
	NZ_SCHED_HOT,			/* carried data lately; fresh estimates */
	NZ_SCHED_COLD,			/* idle: its start-up cost is paid again */
};

/* Online estimates of one connection, under peer->lock. */
struct nz_est {
	u8 state;			/* enum nz_sched_state */
	u64 bw;				/* delivered bytes/s, smoothed; 0 unknown */
	u32 srtt_us;			/* heartbeat round trip, smoothed */
	u32 min_rtt_us;			/* lowest round trip, this window */
	u32 min_rtt_prev_us;		/* ... and the window before */
	u64 min_rtt_stamp;		/* ns: the current window started */
	u32 start_us;			/* start-up latency from idle; 0 unknown */
	u64 sample_start;		/* ns: this busy period's first ACK; 0 idle */
	u64 sample_busy;		/* ns of the sample's earlier busy periods */
	u64 sample_bytes;		/* acknowledged in the sample's busy time */
	bool sample_limited;		/* window-limited during the sample */
	u64 last_active;		/* ns: chunk assigned or acknowledged */
	u64 last_sample;		/* ns: last bandwidth or start-up sample */
	u64 fault_ns;			/* ns: last found silent; 0 never */
	u64 samples;			/* bandwidth samples taken */
	u64 transitions;		/* state changes */
};

/* A usable connection, as nz_est_pick_rails() weighs it. */
struct nz_sched_cand {
	u32 slot;
	u64 a;				/* start-up, ns */
	u64 bw;				/* bytes/s; 0 unknown */
};

/* A connection to the same peer, as the tail rule weighs it. */
struct nz_est_conn {
	u64 bw;				/* est.bw: bytes/s; 0 unknown */
	u64 held;			/* bytes on its way */
	bool usable;			/* may take chunks */
};

#define NZ_EST_MAX_WINDOW	(64ULL << 20)

u32 nz_est_min_rtt(const struct nz_est *e);
u64 nz_est_target_ns(const struct nz_est *e, u32 target_ms);
u64 nz_est_window(const struct nz_est *e, u32 target_ms, u32 unit);
u64 nz_est_start_ns(const struct nz_est *e, u64 size, u32 restart_rtts);
void nz_est_cand_add(struct nz_sched_cand *c, u32 *n,
		     const struct nz_sched_cand *add);
u32 nz_est_pick_rails(const struct nz_sched_cand *c, u32 n, u64 total,
		      u32 unit);
bool nz_est_assign(struct nz_est *e, u64 now, u64 inflight, u32 len,
		   u32 restart_rtts);
bool nz_est_acked(struct nz_est *e, u64 now, u32 len, bool first,
		  u64 t_assign, u32 unit, bool idle);
void nz_est_sample_reset(struct nz_est *e);
void nz_est_fault(struct nz_est *e, u64 now);
u64 nz_est_tail_need(const struct nz_est_conn *c, u32 n, u32 self, u64 len);
bool nz_est_share_done(u64 sent, u64 total, u32 w, u64 wsum);

#endif /* _NZ_SCHED_EST_H */
