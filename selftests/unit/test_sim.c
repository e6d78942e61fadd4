// SPDX-License-Identifier: GPL-2.0
/*
 * nezha-sim's model against what it must reproduce exactly or nearly
 * (Documentation/sim.rst, "Tests").  Simulated time only: nothing here
 * reads a clock, so a slow machine cannot make it fail.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include "tap.h"
#include "nezha.h"
#include "../../tools/sim.h"

#define MiB (1ull << 20)

/* n nodes, r rails of rate bytes/s and lat ns each, no header overhead. */
static void cfg(struct sim_cfg *c, int n, int r, double rate, uint64_t lat)
{
	sim_cfg_init(c);
	c->nodes = n;
	c->nrails = r;
	c->mtu = 0;
	for (int i = 0; i < r; i++) {
		c->rail[i].rate = rate;
		c->rail[i].lat_ns = lat;
	}
}

static double rel(double got, double want)
{
	return fabs(got / want - 1);
}

int main(void)
{
	struct sim_result r1, r2, r3;
	struct sim_cfg c;
	double want;
	int ret;

	tap_plan(9);

	/* 1. One link: size / rate + latency, to the rounding of its chunks. */
	cfg(&c, 2, 1, 5e6, 1000000);
	ret = sim_p2p(&c, 4 * MiB, &r1);
	want = 4.0 * MiB / 5e6 * 1e9 + 1e6;
	tap_ok(!ret && !r1.err && fabs((double)r1.ns - want) < 1000,
	       "one link: 4 MiB in %.0f ns, size/rate + lat = %.0f", (double)r1.ns, want);

	/* 2. Two equal rails halve a large message's time. */
	cfg(&c, 2, 2, 5e6, 1000000);
	ret = sim_p2p(&c, 64 * MiB, &r2);
	cfg(&c, 2, 1, 5e6, 1000000);
	ret |= sim_p2p(&c, 64 * MiB, &r1);
	tap_ok(!ret && rel((double)r2.ns, r1.ns / 2.0) < 0.01 &&
	       rel((double)r2.rail_bytes[0], (double)r2.rail_bytes[1]) < 0.05,
	       "two rails: 64 MiB in %.3f s against %.3f s on one, split %llu/%llu",
	       r2.ns / 1e9, r1.ns / 1e9, (unsigned long long)r2.rail_bytes[0],
	       (unsigned long long)r2.rail_bytes[1]);

	/* 3. A rail that fails: its share and its chunks in flight move. */
	cfg(&c, 2, 2, 5e6, 1000000);
	c.rail[1].fail_ns = 1000000000;
	ret = sim_p2p(&c, 64 * MiB, &r3);
	/* 1 s on both rails, then the rest on one, plus what was lost. */
	want = 1e9 + (64.0 * MiB - 2 * 5e6) / 5e6 * 1e9;
	tap_ok(!ret && !r3.err && r3.resent > 0 &&
	       r3.rail_bytes[0] > 3 * r3.rail_bytes[1] &&
	       r3.ns > want && r3.ns < want + 2e8,
	       "rail 1 fails at 1 s: done in %.3f s (no-loss bound %.3f s), %llu chunks resent, split %llu/%llu",
	       r3.ns / 1e9, want / 1e9, (unsigned long long)r3.resent,
	       (unsigned long long)r3.rail_bytes[0], (unsigned long long)r3.rail_bytes[1]);

	/* 4. Ring allreduce: 2(N-1)/N S/B + 2(N-1) lat, one rail. */
	cfg(&c, 4, 1, 5e6, 1000000);
	c.algo = NZ_ALGO_RING;
	ret = sim_allreduce(&c, 16 * MiB, 2, &r1);
	want = 2.0 * 3 / 4 * 16 * MiB / 5e6 * 1e9 + 2 * 3 * 1e6;
	tap_ok(!ret && !r1.err && rel((double)r1.ns, want) < 0.03,
	       "ring, 4 nodes, 16 MiB: %.4f s, textbook %.4f s", r1.ns / 1e9, want / 1e9);

	/* 5. The same with 8 nodes on two rails: B is their sum. */
	cfg(&c, 8, 2, 5e6, 1000000);
	c.algo = NZ_ALGO_RING;
	ret = sim_allreduce(&c, 16 * MiB, 2, &r1);
	want = 2.0 * 7 / 8 * 16 * MiB / 10e6 * 1e9 + 2 * 7 * 1e6;
	tap_ok(!ret && !r1.err && rel((double)r1.ns, want) < 0.05,
	       "ring, 8 nodes, 2 rails, 16 MiB: %.4f s, textbook %.4f s", r1.ns / 1e9,
	       want / 1e9);

	/* 6. Deterministic given a seed; the seed matters where loss draws. */
	cfg(&c, 4, 2, 5e6, 1000000);
	c.rail[0].loss = c.rail[1].loss = 0.01;
	c.mtu = 9000;
	c.seed = 7;
	ret = sim_allreduce(&c, 4 * MiB, 1, &r1);
	ret |= sim_allreduce(&c, 4 * MiB, 1, &r2);
	c.seed = 8;
	ret |= sim_allreduce(&c, 4 * MiB, 1, &r3);
	tap_ok(!ret && r1.ns == r2.ns && r1.ns != r3.ns,
	       "seed 7 twice: %llu and %llu ns; seed 8: %llu ns",
	       (unsigned long long)r1.ns, (unsigned long long)r2.ns,
	       (unsigned long long)r3.ns);

	/* 7. One chunk goes on the rail that delivers it first (sched_est.c). */
	cfg(&c, 2, 2, 5e6, 1000000);
	c.rail[1].lat_ns = 100000;
	c.rail[1].rdma = true;
	ret = sim_p2p(&c, 8, &r1);
	tap_ok(!ret && r1.rail_bytes[0] == 0 && r1.rail_bytes[1] == 8 &&
	       r1.ns == 100000 + (uint64_t)(8 / 5e6 * 1e9 + 0.5),
	       "8 B on the low-latency rail: %llu/%llu bytes, %llu ns",
	       (unsigned long long)r1.rail_bytes[0],
	       (unsigned long long)r1.rail_bytes[1], (unsigned long long)r1.ns);

	/* 8. Gloo's one NIC fails with it; Nezha finishes on the other. */
	cfg(&c, 4, 2, 5e6, 1000000);
	c.rail[0].fail_ns = 200000000;
	ret = sim_allreduce(&c, 4 * MiB, 1, &r1);
	c.model = SIM_GLOO;
	ret |= sim_allreduce(&c, 4 * MiB, 1, &r2);
	tap_ok(!ret && !r1.err && r2.err == -ENETDOWN,
	       "rail 0 fails: Nezha done in %.3f s, Gloo %s", r1.ns / 1e9,
	       r2.err ? "cannot finish" : "finished");

	/* 9. MPTCP: the rails' sum less its overhead, Gloo: one rail. */
	cfg(&c, 2, 2, 5e6, 1000000);
	c.model = SIM_MPTCP;
	c.mptcp_overhead = 0.1;
	ret = sim_p2p(&c, 64 * MiB, &r1);
	c.model = SIM_GLOO;
	ret |= sim_p2p(&c, 64 * MiB, &r2);
	tap_ok(!ret && rel((double)r1.ns, 64.0 * MiB / 9e6 * 1e9) < 0.01 &&
	       rel((double)r2.ns, 64.0 * MiB / 5e6 * 1e9) < 0.01,
	       "p2p 64 MiB: MPTCP %.3f s (9 MB/s), Gloo %.3f s (5 MB/s)",
	       r1.ns / 1e9, r2.ns / 1e9);
	return tap_exit();
}
