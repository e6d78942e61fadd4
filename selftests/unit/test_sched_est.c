// SPDX-License-Identifier: GPL-2.0
/*
 * The scheduler's arithmetic (kmod/sched_est.c, compiled as nezha.ko
 * compiles it) against the rules Documentation/sched.rst states.
 */
#include <stdio.h>
#include <string.h>
#include "tap.h"
#include "sched_est.h"

/* The rails a message of total bytes takes, from r0's and r1's estimates. */
static u32 pick2(const struct nz_est *r0, const struct nz_est *r1, u64 total)
{
	struct nz_sched_cand c[2], add;
	const struct nz_est *r[2] = { r0, r1 };
	u32 n = 0, i;

	for (i = 0; i < 2; i++) {
		add.slot = i;
		add.a = nz_est_start_ns(r[i], total, 3);
		add.bw = r[i]->bw;
		nz_est_cand_add(c, &n, &add);
	}
	return nz_est_pick_rails(c, n, total, 65536);
}

static void est(struct nz_est *e, u64 bw, u32 min_rtt_us, u32 start_us, u8 state)
{
	memset(e, 0, sizeof(*e));
	e->bw = bw;
	e->min_rtt_us = min_rtt_us;
	e->start_us = start_us;
	e->state = state;
}

/*
 * Static modes: rails take chunks of unit bytes in turn while their share
 * (nz_est_share_done) is not sent; does every message go out whole, each
 * rail within a chunk of its share?  The old rule (shares rounded down)
 * left 0- and 1-byte messages to nobody, and the last byte of 2 chunks +
 * 1 byte on two rails (seen on 8 guests: "send of 0 bytes, not all
 * assigned").  Returns the cases that fail.
 */
static int split_fails(void)
{
	static const u64 sizes[] = { 0, 1, 2, 3, 4095, 4096, 4097, 8191, 8193,
				     12289, 65536, 65537, 1 << 20 };
	static const u32 weights[][3] = { { 1, 1, 1 }, { 1, 2, 3 }, { 5, 1, 1 } };
	const u32 unit = 4096;
	int fails = 0;

	for (u32 wi = 0; wi < 3; wi++)
		for (u32 n = 1; n <= 3; n++)
			for (u32 k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
				u64 total = sizes[k], off = 0, sent[3] = { 0 }, wsum = 0;
				bool done = false, took = true;

				for (u32 r = 0; r < n; r++)
					wsum += weights[wi][r];
				while (!done && took) {
					took = false;
					for (u32 r = 0; r < n && !done; r++) {
						u64 len = total - off < unit ? total - off : unit;

						if (nz_est_share_done(sent[r], total, weights[wi][r], wsum))
							continue;
						sent[r] += len;
						off += len;
						took = true;
						done = off == total;
					}
				}
				for (u32 r = 0; r < n && done; r++)
					if (sent[r] > (total * weights[wi][r] + wsum - 1) / wsum + unit)
						done = false;
				if (!done) {
					fails++;
					tap_diag("%llu B on %u rails, weights %u:%u:%u: %llu B sent",
						 (unsigned long long)total, n, weights[wi][0],
						 weights[wi][1], weights[wi][2],
						 (unsigned long long)off);
				}
			}
	return fails;
}

int main(void)
{
	struct nz_sched_cand c[4], add;
	struct nz_est e;
	u32 n = 0, i;
	bool hot;
	u64 t;

	tap_plan(17);

	/* Windows: bw x max(target, 2 x min_rtt, start-up) + one chunk. */
	est(&e, 5000000, 1000, 0, NZ_SCHED_HOT);
	tap_ok(nz_est_window(&e, 20, 32768) == 100000 + 32768,
	       "window at 5 MB/s, 20 ms target: %llu", nz_est_window(&e, 20, 32768));
	e.start_us = 30000;
	t = nz_est_window(&e, 20, 32768);
	e.bw = 0;
	tap_ok(t == 150000 + 32768 && !nz_est_window(&e, 20, 32768),
	       "a 30 ms start-up lengthens it (%llu); unmeasured: no window", t);

	/* Start-up: the round trip, plus slow start's round trips when cold. */
	est(&e, 0, 1000, 0, NZ_SCHED_COLD);
	t = nz_est_start_ns(&e, 1 << 20, 3);
	tap_ok(t == 4000000 && nz_est_start_ns(&e, 1 << 20, 0) == 1000000 &&
	       nz_est_start_ns(&e, 14480, 3) == 1000000,
	       "cold TCP, 1 MiB: %llu ns (rtt + 3 rtts); RDMA or within the restart window: rtt", t);
	e.state = NZ_SCHED_HOT;
	tap_ok(nz_est_start_ns(&e, 1 << 20, 3) == 1000000, "hot TCP: no slow-start charge");

	/* The crossover: rail 2 joins when S > (a2 - a1) x B1. */
	add = (struct nz_sched_cand){ .slot = 1, .a = 3000000, .bw = 5000000 };
	nz_est_cand_add(c, &n, &add);
	add = (struct nz_sched_cand){ .slot = 0, .a = 1000000, .bw = 5000000 };
	nz_est_cand_add(c, &n, &add);
	tap_ok(n == 2 && c[0].slot == 0 && c[1].slot == 1 &&
	       nz_est_pick_rails(c, n, 10000, 4096) == 1 &&
	       nz_est_pick_rails(c, n, 10001, 4096) == 3,
	       "sorted by start-up; 10000 B on rail 0 alone, 10001 B on both");
	/* One chunk: the rail that delivers it first, a + S / B. */
	c[1].bw = 500000000;	/* rail 1 starts later, delivers 4 KiB far sooner */
	c[0].bw = 1000;
	tap_ok(nz_est_pick_rails(c, n, 4096, 4096) == 2,
	       "one chunk goes where a + S/B is least");
	c[1].bw = 0;
	tap_ok(nz_est_pick_rails(c, n, 1 << 20, 4096) == 3,
	       "an unmeasured rail is always in a multi-chunk message");

	/* Estimator: start-up sample, then a window-limited bandwidth sample
	 * sets the rate and an app-limited lower one leaves it. */
	est(&e, 0, 1000, 0, NZ_SCHED_PROBE);
	e.sample_start = 1000;	/* a busy period's first ACK came at 1 us */
	hot = nz_est_acked(&e, 2001000, 0, true, 1000, 32768, false);
	tap_ok(hot && e.start_us == 2000 && !e.bw,
	       "first chunk acknowledged after 2 ms: start_us %u, hot", e.start_us);
	e.sample_limited = true;
	for (i = 1; i <= 10; i++)
		nz_est_acked(&e, 1000 + i * 6000000ULL, 30000, false, 0, 32768, false);
	t = e.bw;
	for (i = 1; i <= 20; i++)
		nz_est_acked(&e, 60001000 + i * 6000000ULL, 3000, false, 0, 32768, false);
	tap_ok(t == 5000000 && e.bw == t && e.samples == 1,
	       "60 ms of 30 kB per 6 ms, window-limited: %llu B/s; a slower app-limited sample keeps it (%llu)",
	       t, e.bw);

	/*
	 * Busy periods shorter than a sample: 16 MiB bursts are ~160 ms at
	 * 100 MB/s, and a guest's heartbeat round trip can make four of them
	 * longer.  Here: bursts of three 256 KiB ACKs 10 ms apart, 100 ms
	 * apart, min_rtt 15 ms (a sample needs 60 ms).  The clock runs from
	 * each burst's first ACK to its last: 20 ms a burst, so the third
	 * completes the sample at 256 KiB / 10 ms.
	 */
	est(&e, 0, 15000, 0, NZ_SCHED_PROBE);
	for (i = 0; i < 5; i++) {
		u64 t0 = 1000000 + i * 100000000ULL;

		nz_est_acked(&e, t0 + 2000000, 262144, true, t0, 65536, false);
		nz_est_acked(&e, t0 + 12000000, 262144, false, 0, 65536, false);
		nz_est_acked(&e, t0 + 22000000, 262144, false, 0, 65536, true);
		if (i == 2)
			t = e.bw;
	}
	tap_ok(t == 26214400 && e.samples == 1,
	       "bursts of 20 ms each, idle between: measured after the third (%llu B/s, %llu samples)",
	       t, e.samples);
	tap_ok(!e.sample_start && e.sample_busy == 40000000 &&
	       e.sample_bytes == 2 * 524288 && e.bw == t,
	       "the clock stops while idle: 40 ms and 1 MiB into the next sample");

	/*
	 * A fault: the failover suite on 2026-12-06, two unshaped rails of a
	 * guest.  r1 (120 MB/s, start-up 11 ms) is suspect 30 ms after it
	 * took the first chunk of a message from idle; the chunk it was
	 * writing then is acknowledged 150 ms after it was assigned.  That
	 * ACK times the fault: r1's start-up stays what it was, and a 2 MiB
	 * message still goes on both rails (r0: 180 MB/s, 6.2 ms).
	 */
	{
		struct nz_est r0, r1;
		u64 t0 = 10000000000ULL;

		est(&r0, 180000000, 1600, 6167, NZ_SCHED_HOT);
		est(&r1, 120000000, 1780, 11000, NZ_SCHED_HOT);
		tap_ok(pick2(&r0, &r1, 2 << 20) == 3,
		       "before the fault, 2 MiB goes on both rails");
		r1.sample_start = t0 - 5000000;
		r1.sample_bytes = 1 << 20;
		nz_est_fault(&r1, t0 + 30000000);
		nz_est_acked(&r1, t0 + 150000000, 65536, true, t0, 65536, true);
		tap_ok(r1.start_us == 11000 && r1.bw == 120000000 &&
		       !r1.sample_bytes && pick2(&r0, &r1, 2 << 20) == 3,
		       "a chunk that waited through a fault is no sample: start_us %u, bw %llu; 2 MiB on rails %#x",
		       r1.start_us, r1.bw, pick2(&r0, &r1, 2 << 20));
		nz_est_acked(&r1, t0 + 212000000, 65536, true,
			     t0 + 200000000, 65536, true);
		tap_ok(r1.start_us == (7 * 11000 + 11453) / 8,
		       "one assigned after it is: 12 ms -> start_us %u",
		       r1.start_us);
	}

	/*
	 * Which ACKs are start-up samples: an idle connection's first chunk,
	 * if the connection is hot, or the chunk fits in TCP's restart window
	 * (14480 bytes), or the transport has no slow start (RDMA: 0).
	 */
	est(&e, 0, 2000, 0, NZ_SCHED_PROBE);
	hot = !nz_est_assign(&e, 1, 0, 65536, 3) &&	/* new TCP, 64 KiB */
	      nz_est_assign(&e, 1, 0, 14480, 3) &&	/* within its window */
	      nz_est_assign(&e, 1, 0, 65536, 0) &&	/* RDMA */
	      !nz_est_assign(&e, 1, 4096, 4096, 0);	/* not idle */
	e.state = NZ_SCHED_COLD;
	hot = hot && !nz_est_assign(&e, 1, 0, 65536, 3);
	e.state = NZ_SCHED_HOT;
	hot = hot && nz_est_assign(&e, 2, 0, 65536, 3) && e.last_active == 2;
	tap_ok(hot, "start-up samples: idle and hot, or within the restart window, or no slow start");

	/*
	 * The failover suite on 2026-12-06: r1 reconnected (estimates
	 * reset), and its first 64 KiB chunk, in slow start, was acknowledged
	 * 19.9 ms after it was assigned, against r0's 7.5 ms hot at 279 MB/s.
	 * Then its first bandwidth sample (24.8 MB/s, app-limited) made it
	 * hot.  A 2 MiB message must still go on both rails: the start-up of
	 * a hot r1 is not known yet, its round trip (2.2 ms) stands for it.
	 */
	{
		struct nz_est r0, r1;
		u64 t0 = 20000000000ULL;
		bool first;

		est(&r0, 279402967, 763, 7537, NZ_SCHED_HOT);
		est(&r1, 0, 2230, 0, NZ_SCHED_PROBE);
		first = nz_est_assign(&r1, t0, 0, 65536, 3);
		nz_est_acked(&r1, t0 + 19914000, 65536, first, t0, 65536, true);
		r1.sample_busy = 60000000;
		r1.sample_bytes = 1486848 - 65536;
		r1.sample_start = t0 + 20000000;
		hot = nz_est_acked(&r1, t0 + 20000001, 65536, false, 0, 65536,
				   true);
		tap_ok(hot && !r1.start_us && r1.bw &&
		       pick2(&r0, &r1, 2 << 20) == 3,
		       "a reconnected path's slow start is no start-up sample: start_us %u, bw %llu, 2 MiB on rails %#x",
		       r1.start_us, r1.bw, pick2(&r0, &r1, 2 << 20));
	}
	i = split_fails();
	tap_ok(!i, "static modes: 0 B .. 1 MiB on 1-3 rails, equal and weighted, sent whole (%u cases fail)", i);
	return tap_exit();
}
