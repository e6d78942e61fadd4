// SPDX-License-Identifier: GPL-2.0
/*
 * Host test of the aggregation split's cut (libnezha-user/coll_agg.c,
 * "The cut"), driven by models of the two paths instead of a network, so
 * that what it converges to can be checked exactly and quickly:
 *
 * - independent paths (a switch that aggregates, NICs of their own): the
 *   cut goes to the rates' balance and the split beats the rails alone;
 * - both paths limited by one CPU, the node's path costly per byte (as
 *   in the TCG guests of make bench-agg): every cut looks balanced to the
 *   rates, and every split is slower than the rails alone: the guard
 *   pauses the node, and the allreduces cost what the rails alone do,
 *   give or take the probes; the same with +-15 % noise on every time;
 * - one CPU but the node's path cheap: the split is kept;
 * - the node slowed down half-way (another job on it): paused; speeds up
 *   again: the probes find it and the split comes back;
 * - every decision a pure function of the agreed inputs: two copies fed
 *   the same agree on every cut.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "coll.h"
#include "tap.h"

/* Microseconds per byte on each resource, and a fixed latency per part. */
struct model {
	double cpu_agg, cpu_ring;	/* one CPU carries both (0: free) */
	double link_agg, link_ring;	/* each path's own limit */
	double lat;
	double noise;			/* +- this fraction on every time */
	uint64_t rng;
};

static double jitter(struct model *m)
{
	m->rng = m->rng * 6364136223846793005ull + 1442695040888963407ull;
	return 1 + m->noise * ((double)(m->rng >> 11) / 9007199254740992.0 * 2 - 1);
}

/* Both parts run at once: each ends when its link has carried it or, if
 * the CPU is what limits, when the CPU has done both parts' work. */
static double run(struct model *m, struct nzi_agg_cut *c, size_t bytes, double *share)
{
	struct nzi_agg_choice ch = nzi_agg_cut_next(c, bytes);
	uint64_t agg = (uint64_t)(ch.share * (double)bytes) / 1024 * 1024;
	uint64_t ring = bytes - agg;
	double cpu = m->cpu_agg * (double)agg + m->cpu_ring * (double)ring;
	double ta = agg ? fmax(m->link_agg * (double)agg, cpu) + m->lat : 0;
	double tr = fmax(m->link_ring * (double)ring, cpu) + m->lat;

	ta *= agg ? jitter(m) : 1;
	tr *= jitter(m);
	if (ch.measure)
		nzi_agg_cut_learn(c, agg, ring, (int64_t)ta, (int64_t)tr);
	*share = (double)agg / (double)bytes;
	return fmax(ta, tr);
}

static double alone(const struct model *m, size_t bytes)
{
	return fmax(m->link_ring, m->cpu_ring) * (double)bytes + m->lat;
}

struct outcome {
	double ratio;		/* total time of the last n / the rails alone's */
	double share;		/* mean share of the last n */
	unsigned int splits;	/* of the last n */
};

/* iters allreduces cycling over 1, 4, 16 MiB; the last n are judged. */
static struct outcome drive(struct model *m, struct nzi_agg_cut *c, int iters, int n)
{
	static const size_t sizes[] = { 1u << 20, 4u << 20, 16u << 20 };
	struct outcome o = { 0 };
	double t = 0, t0 = 0;

	for (int i = 0; i < iters; i++) {
		size_t bytes = sizes[i % 3];
		double f, ti = run(m, c, bytes, &f);

		if (i >= iters - n) {
			t += ti;
			t0 += alone(m, bytes);
			o.share += f / n;
			o.splits += f > 0;
		}
	}
	o.ratio = t / t0;
	return o;
}

static void test_independent(void)
{
	/* the node 2 B/us, the rails 6 B/us: best cut 1/4, 0.75 of alone */
	struct model m = { .link_agg = 0.5, .link_ring = 1.0 / 6, .lat = 200 };
	struct nzi_agg_cut c;
	struct outcome o;

	nzi_agg_cut_init(&c);
	o = drive(&m, &c, 96, 48);
	tap_ok(fabs(o.share - 0.25) < 0.03 && o.ratio < 0.80 && !c.paused && c.scale == 1,
	       "independent paths: the cut at the rates' balance (%.3f, best 0.25), %.2f of the rails alone's time (best 0.75)",
	       o.share, o.ratio);
}

static void test_shared_cpu(double noise)
{
	/*
	 * make bench-agg's guests: the rails 0.36 us/B (link), their CPU
	 * 0.3; the node's path 2.4 us/B of the same CPU.  A 14 % share
	 * takes 1.65 times the rails alone (measured there: 1.6).
	 */
	struct model m = { .cpu_agg = 2.4, .cpu_ring = 0.3, .link_agg = 0.25, .link_ring = 0.36,
			   .lat = 500, .noise = noise, .rng = 42 };
	struct nzi_agg_cut c;
	struct outcome o;

	nzi_agg_cut_init(&c);
	o = drive(&m, &c, 160, 96);
	tap_ok(c.paused && o.ratio < 1.03 && o.splits <= 96 / 8,
	       "one CPU for both, the node's path costly%s: paused, %.3f of the rails alone's time, %u of 96 split",
	       noise > 0 ? " (+-15 % noise)" : "", o.ratio, o.splits);
}

static void test_shared_cheap(void)
{
	/* one CPU, but the rails' links limit first: best cut 1/3 */
	struct model m = { .cpu_agg = 0.4, .cpu_ring = 0.2, .link_agg = 1.0, .link_ring = 0.5,
			   .lat = 200 };
	struct nzi_agg_cut c;
	struct outcome o;

	nzi_agg_cut_init(&c);
	o = drive(&m, &c, 96, 48);
	tap_ok(!c.paused && fabs(o.share - 1.0 / 3) < 0.04 && o.ratio < 0.72,
	       "one CPU, the node's path cheap: kept split at %.3f (best 1/3), %.2f of the rails alone's time (best 0.67)",
	       o.share, o.ratio);
}

static void test_node_varies(void)
{
	struct model m = { .link_agg = 0.5, .link_ring = 1.0 / 6, .lat = 200 };
	struct nzi_agg_cut c;
	struct outcome slow, back;

	nzi_agg_cut_init(&c);
	drive(&m, &c, 48, 1);
	m.cpu_agg = 3;		/* another job takes the node's path's CPU */
	m.cpu_ring = 0.1;
	slow = drive(&m, &c, 96, 48);
	m.cpu_agg = m.cpu_ring = 0;
	back = drive(&m, &c, 96, 48);
	tap_ok(slow.ratio < 1.05 && back.share > 0.2 && back.ratio < 0.8 && !c.paused,
	       "the node slowed: %.3f of the rails alone's time (paused); fast again: split at %.3f again, %.2f of it",
	       slow.ratio, back.share, back.ratio);
}

static void test_same_everywhere(void)
{
	struct model m = { .cpu_agg = 2.4, .cpu_ring = 0.3, .link_agg = 0.25, .link_ring = 0.36,
			   .lat = 500, .noise = 0.15, .rng = 7 };
	struct nzi_agg_cut a, b;
	int differ = 0, probes = 0;

	nzi_agg_cut_init(&a);
	nzi_agg_cut_init(&b);
	for (int i = 0; i < 200; i++) {
		size_t bytes = (size_t)1 << (20 + i % 5);
		struct nzi_agg_choice ca = nzi_agg_cut_next(&a, bytes);
		struct nzi_agg_choice cb = nzi_agg_cut_next(&b, bytes);
		uint64_t agg = (uint64_t)(ca.share * (double)bytes) / 1024 * 1024;
		int64_t ta = (int64_t)(1000 * jitter(&m)), tr = (int64_t)(3000 * jitter(&m));

		differ += ca.share != cb.share || ca.measure != cb.measure;
		probes += ca.measure && !agg;
		if (ca.measure) {	/* both learn the agreed (same) times */
			nzi_agg_cut_learn(&a, agg, bytes - agg, agg ? ta : 0, tr);
			nzi_agg_cut_learn(&b, agg, bytes - agg, agg ? ta : 0, tr);
		}
	}
	tap_ok(!differ && probes >= 200 / 16 && !memcmp(&a, &b, sizeof(a)),
	       "fed the same agreed times, two ranks cut alike 200 times (%d differ, %d probes)",
	       differ, probes);
}

int main(void)
{
	tap_plan(6);
	test_independent();
	test_shared_cpu(0);
	test_shared_cpu(0.15);
	test_shared_cheap();
	test_node_varies();
	test_same_everywhere();
	return tap_exit();
}
