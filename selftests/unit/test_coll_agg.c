// SPDX-License-Identifier: GPL-2.0
/*
 * Host test of an allreduce split between the aggregation rail and the
 * point-to-point rails (libnezha-user/coll_agg.c): 4 ranks as threads,
 * their collectives over the in-process transport (tw_xport.c), their
 * shares through nezha-aggd's core serving 127.0.0.1 (agg_node.c).
 *
 * - every dtype and operator the node reduces, in place and not: exact
 *   results (the inputs are chosen so that every sum is exact in any
 *   order), and both paths carried part of each;
 * - the cut: half and half while cold, then in proportion to the agreed
 *   rates, the rails alone probed: a node limited to a trickle ends with
 *   the minimum share or paused, alike on every rank (the cut's rules
 *   themselves: test_agg_cut.c);
 * - what is not split: a small allreduce, a dtype the node lacks;
 * - a fixed share (benchmarks): 1, however small; 1/4;
 * - loss on the way to and from the node: still exact;
 * - the node stopped in the middle of a share (part of it reduced in
 *   place already): every allreduce exact, the failed share redone on the
 *   ring on every rank, the node no longer used;
 * - one rank's share fails while the others' succeed: all redo it;
 * - coming back: after a failed share, and after the node was stopped
 *   and started again, every rank joins anew and uses the node again;
 * - non-blocking allreduces started back to back while a rank finishes
 *   the first before it starts the second: every rank cuts alike;
 * - a share cancelled (as nz_comm_destroy() does) ends at once;
 * - the NEZHA_AGG_* settings: malformed values refused; a rank whose
 *   settings are malformed or differ fails every rank's set-up alike, a
 *   node one rank cannot reach leaves it off on every rank.
 */
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agg_client.h"
#include "agg_node.h"
#include "reduce.h"
#include "tap.h"
#include "tw_xport.h"

#define NR	4

static uint8_t key[NZA_KEY_LEN];
static uint64_t next_job = 100;

/* Rank r's element i: half integers in [-100, 100] (0 often): every sum
 * of 4 of them is exact in f32, f16 and (integers only) bf16. */
static float input_f(int r, size_t i, enum nz_dtype dt)
{
	int v = (int)((i * 2654435761u + (unsigned int)r * 40503u) % 401) - 200;

	if (i % 29 == 0)
		v = 0;
	return dt == NZ_BFLOAT16 ? (float)(v / 2) : (float)v / 2;
}

static int32_t input_i(int r, size_t i)
{
	return (int32_t)((i * 2654435761u ^ (unsigned int)(r + 1) * 0x9e3779b9u) >> 4);
}

static void fill(int r, void *buf, size_t count, enum nz_dtype dt)
{
	for (size_t i = 0; i < count; i++) {
		float f = input_f(r, i, dt);

		switch (dt) {
		case NZ_FLOAT32: ((float *)buf)[i] = f; break;
		case NZ_FLOAT64: ((double *)buf)[i] = f; break;
		case NZ_FLOAT16: ((uint16_t *)buf)[i] = nz_f32_to_f16(f); break;
		case NZ_BFLOAT16: ((uint16_t *)buf)[i] = nz_f32_to_bf16(f); break;
		default: ((int32_t *)buf)[i] = input_i(r, i); break;
		}
	}
}

static double get(const void *buf, size_t i, enum nz_dtype dt)
{
	switch (dt) {
	case NZ_FLOAT32: return ((const float *)buf)[i];
	case NZ_FLOAT64: return ((const double *)buf)[i];
	case NZ_FLOAT16: return nz_f16_to_f32(((const uint16_t *)buf)[i]);
	case NZ_BFLOAT16: return nz_bf16_to_f32(((const uint16_t *)buf)[i]);
	default: return ((const int32_t *)buf)[i];
	}
}

/* Elements of buf that differ from the reduction of every rank's input. */
static size_t wrong(const void *buf, size_t count, enum nz_dtype dt, enum nz_redop op)
{
	size_t bad = 0;

	for (size_t i = 0; i < count; i++) {
		double want = 0, x;

		for (int r = 0; r < NR; r++) {
			x = dt == NZ_INT32 ? (double)input_i(r, i) : (double)input_f(r, i, dt);
			if (!r || op == NZ_SUM || op == NZ_AVG)
				want = r && (op == NZ_SUM || op == NZ_AVG) ? want + x : x;
			else if (op == NZ_MIN)
				want = x < want ? x : want;
			else
				want = x > want ? x : want;
		}
		if (op == NZ_AVG) {
			if (dt == NZ_INT32) {
				int32_t s = 0;

				for (int r = 0; r < NR; r++)
					s += input_i(r, i);
				want = s / NR;
			} else {
				want /= NR;
				if (dt == NZ_FLOAT16)
					want = nz_f16_to_f32(nz_f32_to_f16((float)want));
				else if (dt == NZ_BFLOAT16)
					want = nz_bf16_to_f32(nz_f32_to_bf16((float)want));
			}
		} else if (dt == NZ_INT32 && op == NZ_SUM) {
			int32_t s = 0;

			for (int r = 0; r < NR; r++)
				s = (int32_t)((uint32_t)s + (uint32_t)input_i(r, i));
			want = s;
		}
		bad += get(buf, i, dt) != want;
	}
	return bad;
}

struct job {
	struct tw_world w;
	struct agg_node *node;
	uint64_t job_id;
	size_t min_bytes;
	double share;			/* nzi_coll_agg_fix() */
	unsigned int timeout_ms, drop;	/* the clients' */
	int deaf;			/* this rank loses results (0: none) */
	unsigned int deaf_after;	/* every one after the first deaf_after */
	/* the allreduces each rank runs */
	size_t count;
	enum nz_dtype dtype;
	enum nz_redop op;
	int iters;
	bool in_place;
	bool pairs;			/* iallreduce pairs, the last rank slow */
	unsigned int pause_us;		/* between allreduces */
	/* results, by rank */
	int ret[NR];
	size_t bad[NR];
	int failed_iter[NR];
	struct nzi_coll_agg_stats st[NR];
	uint64_t first_agg[NR], first_ring[NR];	/* the first split's cut */
	uint64_t last_agg[NR], last_ring[NR];	/* the last one's */
	uint64_t retransmits[NR];
	bool attached[NR];
};

struct rank_arg {
	struct job *j;
	int rank;
	struct tw_ctx ctx;
	pthread_t tid;
};

static struct nzi_agg *join(struct job *j, int rank)
{
	struct nzi_agg_cfg cfg = {
		.node = (const struct sockaddr *)&j->node->addr, .node_len = sizeof(j->node->addr),
		.key = key, .job_id = j->job_id, .rank = (uint16_t)rank, .nranks = NR,
		.window = 16, .rto_ms = 10, .timeout_ms = j->timeout_ms,
		.drop_tx_every = j->drop, .drop_rx_every = j->drop ? j->drop + 2 : 0,
	};

	if (j->deaf && rank == j->deaf)
		cfg.drop_rx_after = j->deaf_after;
	struct nzi_agg *a = NULL;

	return nzi_agg_join(&cfg, &a) ? NULL : a;
}

/*
 * One iteration of j->pairs: two non-blocking allreduces; every rank but
 * the last starts both back to back, the last finishes the first before it
 * starts the second (a rank busy computing between two buckets).
 */
static int pair_iter(struct job *j, struct nz_comm *c, int r, uint8_t *in, uint8_t *out,
		     uint8_t *out2)
{
	size_t len = j->count * nz_dtype_size(j->dtype);
	struct nz_coll_request *q1 = NULL, *q2 = NULL;
	int ret, ret2 = 0;

	fill(r, in, j->count, j->dtype);
	memset(out, 0xa5, len);
	memset(out2, 0x5a, len);
	ret = nz_iallreduce(c, in, out, j->count, j->dtype, j->op, &q1);
	if (!ret && r == NR - 1) {
		ret = nz_coll_wait(q1);
		q1 = NULL;
	}
	if (!ret)
		ret = nz_iallreduce(c, in, out2, j->count, j->dtype, j->op, &q2);
	if (q1)
		ret2 = nz_coll_wait(q1);
	if (q2)
		ret2 = ret2 ? ret2 : nz_coll_wait(q2);
	j->bad[r] += wrong(out, j->count, j->dtype, j->op) + wrong(out2, j->count, j->dtype, j->op);
	return ret ? ret : ret2;
}

static void *rank_main(void *arg)
{
	struct rank_arg *ra = arg;
	struct job *j = ra->j;
	int r = ra->rank;
	size_t es = nz_dtype_size(j->dtype), len = j->count * es;
	struct nzi_coll_agg_stats prev = { 0 }, now;
	struct nz_comm *c = NULL;
	struct nzi_agg *a;
	uint8_t *in = malloc(len ? len : 1), *out = malloc(len ? len : 1);
	uint8_t *out2 = malloc(len ? len : 1);

	j->failed_iter[r] = -1;
	if (!in || !out || !out2 || nzi_coll_comm_new(&c, r, NR, &tw_xport, &ra->ctx)) {
		j->ret[r] = -ENOMEM;
		goto out;
	}
	a = join(j, r);
	if (!a || nzi_coll_agg_attach(c, a, j->min_bytes)) {
		nzi_agg_close(a);
		j->ret[r] = -ENOTCONN;
		goto out;
	}
	j->attached[r] = true;
	if (j->share > 0 && nzi_coll_agg_fix(c, j->share)) {
		j->ret[r] = -EINVAL;
		goto out;
	}
	for (int it = 0; it < j->iters && !j->ret[r]; it++) {
		if (j->pause_us)
			usleep(j->pause_us);
		if (j->pairs) {
			j->ret[r] = pair_iter(j, c, r, in, out, out2);
			goto counters;
		}
		fill(r, in, j->count, j->dtype);
		if (j->in_place)
			memcpy(out, in, len);
		else
			memset(out, 0xa5, len);
		j->ret[r] = nz_allreduce(c, j->in_place ? out : in, out, j->count, j->dtype, j->op);
		j->bad[r] += wrong(out, j->count, j->dtype, j->op);
		if (!j->in_place) {	/* the send buffer is left as it was */
			uint8_t *again = malloc(len ? len : 1);

			if (again) {
				fill(r, again, j->count, j->dtype);
				j->bad[r] += memcmp(again, in, len) != 0;
				free(again);
			}
		}
counters:
		nzi_coll_agg_stats(c, &now);
		if (now.splits > prev.splits) {
			if (!prev.splits) {
				j->first_agg[r] = now.agg_bytes;
				j->first_ring[r] = now.ring_bytes;
			}
			j->last_agg[r] = now.agg_bytes - prev.agg_bytes;
			j->last_ring[r] = now.ring_bytes - prev.ring_bytes;
		}
		if (now.redos > prev.redos && j->failed_iter[r] < 0)
			j->failed_iter[r] = it;
		prev = now;
	}
	nzi_coll_agg_stats(c, &j->st[r]);
	/* a: closed if the node was joined anew */
	if (!j->st[r].resumes)
		j->retransmits[r] = nzi_agg_stats(a)->retransmits;
out:
	if (c)
		nz_comm_destroy(c);
	free(in);
	free(out);
	free(out2);
	return NULL;
}

static void run(struct job *j)
{
	struct rank_arg ra[NR];

	j->job_id = next_job++;
	tw_init(&j->w, NR, 20000);
	for (int r = 0; r < NR; r++) {
		ra[r] = (struct rank_arg){ .j = j, .rank = r, .ctx = { .w = &j->w, .rank = r } };
		pthread_create(&ra[r].tid, NULL, rank_main, &ra[r]);
	}
	for (int r = 0; r < NR; r++)
		pthread_join(ra[r].tid, NULL);
	tw_destroy(&j->w);
}

static bool all(const struct job *j, int what)
{
	for (int r = 0; r < NR; r++) {
		switch (what) {
		case 0: if (j->ret[r] || j->bad[r]) return false; break;
		case 1:
			if (j->st[r].splits + j->st[r].probes != (uint64_t)j->iters ||
			    j->st[r].splits < 2)
				return false;
			break;
		case 2: if (j->st[r].splits) return false; break;
		}
	}
	return true;
}

static const char *dt_name(enum nz_dtype dt)
{
	return dt == NZ_FLOAT32 ? "f32" : dt == NZ_FLOAT16 ? "f16" : dt == NZ_BFLOAT16 ? "bf16" :
	       dt == NZ_INT32 ? "i32" : "f64";
}

static const char *op_name(enum nz_redop op)
{
	return op == NZ_SUM ? "sum" : op == NZ_AVG ? "avg" : op == NZ_MIN ? "min" : "max";
}

static struct aggd_cfg node_cfg(uint32_t rate)
{
	struct aggd_cfg cfg = { .slots = 256, .max_jobs = 8, .job_slots = 64,
				.idle_ns = 60ull * 1000000000ull, .nkeys = 1, .rate = rate };

	memcpy(cfg.keys[0], key, NZA_KEY_LEN);
	return cfg;
}

static void test_types(struct agg_node *node)
{
	static const struct { enum nz_dtype dt; enum nz_redop op; bool in_place; } cases[] = {
		{ NZ_FLOAT32, NZ_SUM, false }, { NZ_FLOAT32, NZ_AVG, true },
		{ NZ_FLOAT16, NZ_SUM, true }, { NZ_FLOAT16, NZ_AVG, false },
		{ NZ_BFLOAT16, NZ_MAX, false }, { NZ_BFLOAT16, NZ_AVG, true },
		{ NZ_INT32, NZ_MIN, true }, { NZ_INT32, NZ_SUM, false },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct job j = { .node = node, .min_bytes = 64 << 10, .timeout_ms = 5000,
				 .count = 300001, .dtype = cases[i].dt, .op = cases[i].op,
				 .iters = 3, .in_place = cases[i].in_place };
		bool both = true;

		run(&j);
		for (int r = 0; r < NR; r++)
			both &= j.last_agg[r] > 0 && j.last_ring[r] > 0;
		tap_ok(all(&j, 0) && all(&j, 1) && both,
		       "%s %s, %s, 4 ranks: exact, split (or the rails alone probed) every time, both paths used (rank 0: %d, %zu wrong, %llu splits, %llu probes, last cut %llu/%llu bytes)",
		       dt_name(cases[i].dt), op_name(cases[i].op),
		       cases[i].in_place ? "in place" : "out of place", j.ret[0], j.bad[0],
		       (unsigned long long)j.st[0].splits, (unsigned long long)j.st[0].probes,
		       (unsigned long long)j.last_agg[0],
		       (unsigned long long)j.last_ring[0]);
	}
}

static void test_not_split(struct agg_node *node)
{
	struct job small = { .node = node, .min_bytes = 64 << 10, .timeout_ms = 5000,
			     .count = 1000, .dtype = NZ_FLOAT32, .op = NZ_SUM, .iters = 4 };
	struct job f64 = { .node = node, .min_bytes = 64 << 10, .timeout_ms = 5000,
			   .count = 100000, .dtype = NZ_FLOAT64, .op = NZ_SUM, .iters = 2 };

	run(&small);
	tap_ok(all(&small, 0) && all(&small, 2),
	       "4 KB allreduces (below min_bytes) are not split, and exact (%llu splits)",
	       (unsigned long long)small.st[0].splits);
	run(&f64);
	tap_ok(all(&f64, 0) && all(&f64, 2),
	       "f64 (the node has no f64) is not split, and exact (%llu splits)",
	       (unsigned long long)f64.st[0].splits);
}

static void test_fixed(struct agg_node *node)
{
	struct job all8 = { .node = node, .min_bytes = 0, .timeout_ms = 5000, .share = 1,
			    .count = 2, .dtype = NZ_FLOAT32, .op = NZ_SUM, .iters = 3 };
	struct job quarter = { .node = node, .min_bytes = 0, .timeout_ms = 5000, .share = 0.25,
			       .count = 1 << 16, .dtype = NZ_INT32, .op = NZ_MAX, .iters = 3 };

	run(&all8);
	tap_ok(all(&all8, 0) && all(&all8, 1) && all8.st[0].agg_bytes == 3 * 8 &&
	       !all8.st[0].ring_bytes,
	       "a fixed share of 1: allreduces of 8 bytes go whole through the node, exact (%llu bytes there, %llu on the rails)",
	       (unsigned long long)all8.st[0].agg_bytes, (unsigned long long)all8.st[0].ring_bytes);
	run(&quarter);
	tap_ok(all(&quarter, 0) && all(&quarter, 1) && quarter.last_agg[0] == 65536,
	       "a fixed share of 1/4: a quarter through the node, exact (%llu of %d bytes)",
	       (unsigned long long)quarter.last_agg[0], 4 << 16);
}

static void test_cut(void)
{
	struct aggd_cfg cfg = node_cfg(3000);	/* packets/s from 127.0.0.1 */
	struct agg_node slow = { 0 };
	struct job j = { .node = &slow, .min_bytes = 64 << 10, .timeout_ms = 20000,
			 .count = 1 << 18, .dtype = NZ_FLOAT32, .op = NZ_SUM, .iters = 6 };
	double first, last;
	bool same = true;

	if (agg_node_start(&slow, &cfg)) {
		tap_ok(0, "a rate-limited node starts");
		return;
	}
	run(&j);
	agg_node_stop(&slow);
	aggd_destroy(slow.n);
	first = (double)j.first_agg[0] / (double)(j.first_agg[0] + j.first_ring[0]);
	last = (double)j.last_agg[0] / (double)(j.last_agg[0] + j.last_ring[0]);
	for (int r = 1; r < NR; r++)
		same &= j.last_agg[r] == j.last_agg[0] && j.st[r].splits == j.st[0].splits &&
			j.st[r].probes == j.st[0].probes && j.st[r].paused == j.st[0].paused &&
			j.st[r].scale == j.st[0].scale;
	tap_ok(all(&j, 0) && j.st[0].splits >= 2 && j.st[0].probes >= 1,
	       "a node limited to 3000 packets/s: every allreduce exact, %llu split, %llu the rails alone probed (%zu wrong)",
	       (unsigned long long)j.st[0].splits, (unsigned long long)j.st[0].probes, j.bad[0]);
	tap_ok(first > 0.49 && first < 0.51, "cold: the first cut is half and half (%.3f to the node)",
	       first);
	tap_ok((last < 0.15 || j.st[0].paused) && same,
	       "hot: the node's share fell near the minimum (5 %%) or the node paused, the same on every rank (last cut %.3f, %s, scale %.3f; rates %.1f vs %.1f bytes/us)",
	       last, j.st[0].paused ? "paused" : "not paused", j.st[0].scale, j.st[0].rate_agg,
	       j.st[0].rate_ring);
}

static void test_loss(struct agg_node *node)
{
	struct job j = { .node = node, .min_bytes = 64 << 10, .timeout_ms = 5000, .drop = 9,
			 .count = 200000, .dtype = NZ_FLOAT32, .op = NZ_SUM, .iters = 3 };

	run(&j);
	tap_ok(all(&j, 0) && all(&j, 1) && j.retransmits[0] > 0 && !j.st[0].redos,
	       "every 9th packet to the node and 11th back lost: exact, no redo (%llu retransmits)",
	       (unsigned long long)j.retransmits[0]);
}

struct killer {
	struct agg_node *node;
	uint64_t after_rx;	/* stop the node once it received this many */
	unsigned int restart_ms;	/* then start it again after this (0: not) */
	int restarted;
};

static void *kill_main(void *arg)
{
	struct killer *k = arg;

	/* The counter is the node thread's: a racy read is enough here. */
	while (__atomic_load_n(&aggd_stats(k->node->n)->rx, __ATOMIC_RELAXED) < k->after_rx)
		usleep(1000);
	agg_node_stop(k->node);
	if (k->restart_ms) {
		struct aggd_cfg cfg = node_cfg(0);
		uint16_t port = ntohs(k->node->addr.sin_port);

		usleep(k->restart_ms * 1000);
		aggd_destroy(k->node->n);
		k->restarted = !agg_node_start_on(k->node, &cfg, port);
	}
	return NULL;
}

/* Start k's node, run j with the killer, clean up: 0, or -1 (said so). */
static int run_killed(struct job *j, struct killer *k, const struct aggd_cfg *cfg)
{
	pthread_t tid;

	if (agg_node_start(k->node, cfg)) {
		tap_ok(0, "a node starts");
		return -1;
	}
	pthread_create(&tid, NULL, kill_main, k);
	run(j);
	pthread_join(tid, NULL);
	if (k->restarted)
		agg_node_stop(k->node);
	aggd_destroy(k->node->n);
	return 0;
}

static void test_node_dies(void)
{
	struct aggd_cfg cfg = node_cfg(0);
	struct agg_node node = { 0 };
	struct job j = { .node = &node, .min_bytes = 64 << 10, .timeout_ms = 300,
			 .count = 1 << 20, .dtype = NZ_FLOAT32, .op = NZ_SUM, .iters = 6 };
	/* The first two allreduces are cold, half and half: 2048 packets per
	 * rank each; stop in the middle of the second one's share. */
	struct killer k = { .node = &node, .after_rx = 4 * 2048 + 2 * 2048 };
	bool redone = true, off = true, stopped = true;

	if (run_killed(&j, &k, &cfg))
		return;
	for (int r = 0; r < NR; r++) {
		redone &= j.st[r].redos == 1 && j.failed_iter[r] == j.failed_iter[0];
		off &= j.st[r].off;
		stopped &= j.st[r].splits == (uint64_t)j.failed_iter[0] + 1;
	}
	tap_ok(all(&j, 0), "the node stopped in the middle of an allreduce's share: every allreduce exact on every rank (%d, %zu wrong)",
	       j.ret[0], j.bad[0]);
	tap_ok(redone && j.failed_iter[0] == 1,
	       "the share that failed was redone on the ring, on every rank alike (allreduce #%d)",
	       j.failed_iter[0]);
	tap_ok(off && stopped, "after that no allreduce is split (%llu splits of %d)",
	       (unsigned long long)j.st[0].splits, j.iters);
}

/* What every rank of j must show after one failed share and one join anew. */
static bool came_back(const struct job *j, uint64_t *splits_after)
{
	bool ok = true;

	for (int r = 0; r < NR; r++) {
		splits_after[r] = j->st[r].splits_on;
		ok &= j->st[r].redos == 1 && j->st[r].resumes == 1 && !j->st[r].off &&
		      j->failed_iter[r] == j->failed_iter[0] && splits_after[r] >= 1 &&
		      j->st[r].splits == j->st[0].splits &&
		      j->st[r].splits == (uint64_t)j->failed_iter[r] + 1 + splits_after[r];
	}
	if (!ok)
		for (int r = 0; r < NR; r++)
			tap_diag("rank %d: redos %llu, resumes %llu, off %d, failed at %d, splits %llu",
				 r, (unsigned long long)j->st[r].redos,
				 (unsigned long long)j->st[r].resumes, j->st[r].off,
				 j->failed_iter[r], (unsigned long long)j->st[r].splits);
	return ok;
}

/*
 * Rank 2 loses every result after its 100th: the first split's share
 * fails there, the node goes off on every rank.  Each rank's thread joins
 * anew at once (the node is alive; a new join has no lost results), and
 * the 16th allreduce after is the probe that turns the node on again.
 */
static void test_resume(struct agg_node *node)
{
	struct job j = { .node = node, .min_bytes = 64 << 10, .timeout_ms = 300, .deaf = 2,
			 .deaf_after = 100, .count = 1 << 18, .dtype = NZ_FLOAT32, .op = NZ_SUM,
			 .iters = 40, .pause_us = 2000 };
	uint64_t after[NR];
	bool back;

	run(&j);
	back = came_back(&j, after);
	tap_ok(all(&j, 0) && back && j.failed_iter[0] == 0,
	       "rank 2 loses the node's results: the share redone, the node off, then joined anew by every rank and used again (%llu splits after; %d, %zu wrong)",
	       (unsigned long long)after[0], j.ret[0], j.bad[0]);
}

/* The node stopped in the middle of a share, started again on its port
 * 300 ms later: every rank joins it anew, as a new job (the old one died
 * with it), and uses it again. */
static void test_restart(void)
{
	struct aggd_cfg cfg = node_cfg(0);
	struct agg_node node = { 0 };
	struct job j = { .node = &node, .min_bytes = 64 << 10, .timeout_ms = 300,
			 .count = 1 << 18, .dtype = NZ_FLOAT32, .op = NZ_SUM, .iters = 64,
			 .pause_us = 20000 };
	struct killer k = { .node = &node, .after_rx = 4 * 512 + 2 * 512, .restart_ms = 300 };
	uint64_t after[NR];
	bool back;

	if (run_killed(&j, &k, &cfg))
		return;
	back = came_back(&j, after);
	tap_ok(k.restarted && all(&j, 0) && back,
	       "the node stopped mid-share and started again: every allreduce exact, the node joined anew by every rank and used again (%llu splits after; failed at #%d)",
	       (unsigned long long)after[0], j.failed_iter[0]);
}

/*
 * Non-blocking allreduces in pairs; ranks 0-2 start both back to back,
 * rank 3 finishes the first before it starts the second, so it has seen
 * the first one's agreement when it cuts the second and they have not.
 * Every rank must cut alike all the same (else the parts on the rails
 * differ in size between ranks: wrong sums or a stall).  The node is
 * limited, so that the cut moves.
 */
static void test_pairs(void)
{
	struct aggd_cfg cfg = node_cfg(20000);
	struct agg_node node = { 0 };
	struct job j = { .node = &node, .min_bytes = 64 << 10, .timeout_ms = 5000,
			 .count = 1 << 17, .dtype = NZ_FLOAT32, .op = NZ_SUM, .iters = 12,
			 .pairs = true };
	bool same = true;
	uint64_t waits = 0;

	if (agg_node_start(&node, &cfg)) {
		tap_ok(0, "a node starts");
		return;
	}
	run(&j);
	agg_node_stop(&node);
	aggd_destroy(node.n);
	for (int r = 0; r < NR; r++) {
		same &= j.st[r].splits == j.st[0].splits && j.st[r].probes == j.st[0].probes &&
			j.st[r].agg_bytes == j.st[0].agg_bytes;
		waits += j.st[r].waits;
	}
	tap_ok(all(&j, 0) && same && j.st[0].splits >= 4 && waits > 0,
	       "non-blocking pairs, rank 3 late with the second: every allreduce exact, every rank cut alike (%llu splits, %llu probes, %llu bytes to the node; %llu waits; %d %d %d %d, %zu wrong)",
	       (unsigned long long)j.st[0].splits, (unsigned long long)j.st[0].probes,
	       (unsigned long long)j.st[0].agg_bytes, (unsigned long long)waits, j.ret[0],
	       j.ret[1], j.ret[2], j.ret[3], j.bad[0] + j.bad[1] + j.bad[2] + j.bad[3]);
}

static void test_one_rank_fails(struct agg_node *node)
{
	/* The first allreduce's share: 1/2 of 2^18 f32, 512 blocks.  Rank 3
	 * loses the results of its last 12 (its window is 16, so it sent
	 * them all): the node completed every block and the others have
	 * every result; rank 3's share times out. */
	struct job j = { .node = node, .min_bytes = 64 << 10, .timeout_ms = 300, .deaf = 3,
			 .deaf_after = 500, .count = 1 << 18, .dtype = NZ_FLOAT32, .op = NZ_SUM,
			 .iters = 3 };
	bool redone = true;

	run(&j);
	for (int r = 0; r < NR; r++)
		redone &= j.st[r].redos == 1 && j.failed_iter[r] == 0 && j.st[r].splits == 1;
	tap_ok(all(&j, 0) && redone,
	       "rank 3 misses the last results, the others have them all: every rank redoes the share, all exact (%d %d %d %d, redos %llu %llu)",
	       j.ret[0], j.ret[1], j.ret[2], j.ret[3], (unsigned long long)j.st[0].redos,
	       (unsigned long long)j.st[3].redos);
}

struct cancel_arg {
	struct nzi_agg *a;
	float *buf;
	int ret;
	double t_end;
};

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *cancel_main(void *arg)
{
	struct cancel_arg *ca = arg;

	ca->ret = nzi_agg_allreduce(ca->a, ca->buf, 65536, NZ_FLOAT32, NZ_SUM);
	ca->t_end = mono_s();
	return NULL;
}

/*
 * A share waiting for a rank that never comes (rank 1 of 2 never joins),
 * cancelled from another thread, as nz_comm_destroy() does: it ends with
 * -ECANCELED at once, not after the client's 10 s timeout.
 */
static void test_cancel(struct agg_node *node)
{
	struct nzi_agg_cfg cfg = {
		.node = (const struct sockaddr *)&node->addr, .node_len = sizeof(node->addr),
		.key = key, .job_id = next_job++, .rank = 0, .nranks = 2, .window = 16,
		.timeout_ms = 10000,
	};
	struct cancel_arg ca = { .buf = calloc(65536, sizeof(float)) };
	double t_cancel = 0;
	pthread_t t;
	int joined;

	joined = ca.buf ? nzi_agg_join(&cfg, &ca.a) : -ENOMEM;
	if (!joined && !pthread_create(&t, NULL, cancel_main, &ca)) {
		usleep(300000);
		t_cancel = mono_s();
		nzi_agg_cancel(ca.a);
		pthread_join(t, NULL);
	}
	tap_ok(!joined && ca.ret == -ECANCELED && ca.t_end - t_cancel < 0.5,
	       "a share waiting for a rank that never comes, cancelled: -ECANCELED %.3f s after (%d, the timeout 10 s)",
	       ca.t_end - t_cancel, ca.ret);
	nzi_agg_close(ca.a);
	free(ca.buf);
}

static void test_spec(void)
{
	static const struct { const char *spec, *host; unsigned int port; } good[] = {
		{ "10.0.0.1", "10.0.0.1", NZA_PORT }, { "node7:29700", "node7", 29700 },
		{ "[::1]:5", "::1", 5 }, { "[fe80::2%eth1]", "fe80::2%eth1", NZA_PORT },
		{ "fd00::7", "fd00::7", NZA_PORT }, { "h:65535", "h", 65535 },
	};
	static const char *const bad[] = {
		"", ":29600", "h:", "h:0", "h:65536", "h:123456", "h:12a", "h:-1", "[::1",
		"[::1]x", "[::1]:", "[]:5", "a/b:5",
	};
	char big[300], host[256];
	uint16_t port;
	size_t ok = 0, refused = 0;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		int ret = nzi_agg_spec_parse(good[i].spec, host, sizeof(host), &port);

		if (!ret && !strcmp(host, good[i].host) && port == good[i].port)
			ok++;
		else
			tap_diag("NEZHA_AGG_NODE=%s: %d, \"%s\" port %u", good[i].spec, ret,
				 ret ? "" : host, ret ? 0 : port);
	}
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	refused += nzi_agg_spec_parse(big, host, sizeof(host), &port) == -EINVAL;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (nzi_agg_spec_parse(bad[i], host, sizeof(host), &port) == -EINVAL)
			refused++;
		else
			tap_diag("NEZHA_AGG_NODE=\"%s\" accepted", bad[i]);
	}
	tap_ok(ok == sizeof(good) / sizeof(good[0]) && refused == 1 + sizeof(bad) / sizeof(bad[0]),
	       "NEZHA_AGG_NODE: %zu host[:port] forms read right, %zu malformed refused", ok, refused);
}

static void test_env_parse(void)
{
	static const struct { const char *name, *value; } bad[] = {
		{ "NEZHA_AGG_NODE", "h:0" }, { "NEZHA_AGG_WINDOW", "0" },
		{ "NEZHA_AGG_WINDOW", "abc" }, { "NEZHA_AGG_WINDOW", "1025" },
		{ "NEZHA_AGG_TIMEOUT_MS", "0" }, { "NEZHA_AGG_TIMEOUT_MS", "10m" },
		{ "NEZHA_AGG_MIN", "-1" }, { "NEZHA_AGG_MIN", "1x" },
		{ "NEZHA_AGG_SHARE", "0" }, { "NEZHA_AGG_SHARE", "1.5" },
		{ "NEZHA_AGG_SHARE", "nan" }, { "NEZHA_AGG_SHARE", "-0.25" },
		{ "NEZHA_AGG_SHARE", "0.5x" },
	};
	struct nzi_agg_env e;
	size_t refused = 0;
	bool unset, good;

	unsetenv("NEZHA_AGG_NODE");
	unset = !nzi_agg_env_parse(&e) && !e.set;
	setenv("NEZHA_AGG_NODE", "127.0.0.1:29700", 1);
	setenv("NEZHA_AGG_WINDOW", "64", 1);
	setenv("NEZHA_AGG_MIN", "4M", 1);
	setenv("NEZHA_AGG_SHARE", "0.25", 1);
	good = !nzi_agg_env_parse(&e) && e.set && e.port == 29700 && e.window == 64 &&
	       e.min_bytes == 4u << 20 && e.share == 0.25 && e.timeout_ms == 5000;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *was = getenv(bad[i].name);
		char keep[64];

		snprintf(keep, sizeof(keep), "%s", was ? was : "");
		setenv(bad[i].name, bad[i].value, 1);
		if (nzi_agg_env_parse(&e) == -EINVAL && !e.set)
			refused++;
		else
			tap_diag("%s=%s accepted", bad[i].name, bad[i].value);
		if (was)
			setenv(bad[i].name, keep, 1);
		else
			unsetenv(bad[i].name);
	}
	unsetenv("NEZHA_AGG_NODE");
	unsetenv("NEZHA_AGG_WINDOW");
	unsetenv("NEZHA_AGG_MIN");
	unsetenv("NEZHA_AGG_SHARE");
	tap_ok(unset && good && refused == sizeof(bad) / sizeof(bad[0]),
	       "NEZHA_AGG_*: unset is off, good values read, %zu of %zu malformed refused",
	       refused, sizeof(bad) / sizeof(bad[0]));
}

/* Each rank's settings for nzi_coll_agg_setup(), as if from its own
 * environment. */
struct setup_job {
	struct tw_world w;
	const struct agg_node *node;
	uint64_t job_id;
	struct nzi_agg_env e[NR];
	int parse_err[NR];
	bool taken[NR];			/* a node attached before: -EEXIST */
	int ret[NR], fix_range[NR];
	bool attached[NR], off[NR], works[NR];
};

struct setup_arg {
	struct setup_job *j;
	int rank;
	struct tw_ctx ctx;
	pthread_t tid;
};

static void *setup_main(void *arg)
{
	struct setup_arg *sa = arg;
	struct setup_job *j = sa->j;
	int r = sa->rank;
	struct nzi_coll_agg_stats st;
	struct nz_comm *c = NULL;

	if (nzi_coll_comm_new(&c, r, NR, &tw_xport, &sa->ctx)) {
		j->ret[r] = -ENOMEM;
		return NULL;
	}
	c->job_id = j->job_id;
	if (j->taken[r]) {
		/* this rank's attach fails (-EEXIST), as it would without
		 * memory or a thread */
		struct nzi_agg_cfg cfg = {
			.node = (const struct sockaddr *)&j->node->addr,
			.node_len = sizeof(j->node->addr), .key = key, .job_id = j->job_id + 1000,
			.rank = 0, .nranks = 2, .window = 16, .timeout_ms = 2000,
		};
		struct nzi_agg *other = NULL;

		if (nzi_agg_join(&cfg, &other) || nzi_coll_agg_attach(c, other, 0)) {
			nzi_agg_close(other);
			j->ret[r] = -ENOTCONN;
			nz_comm_destroy(c);
			return NULL;
		}
	}
	j->ret[r] = nzi_coll_agg_setup(c, key, &j->e[r], j->parse_err[r]);
	j->attached[r] = !nzi_coll_agg_stats(c, &st);
	j->off[r] = j->attached[r] && st.off;
	if (j->attached[r]) {
		/* nzi_coll_agg_fix's range, then one allreduce through it all */
		j->fix_range[r] = (nzi_coll_agg_fix(c, 1.5) == -EINVAL) +
				  (nzi_coll_agg_fix(c, -0.1) == -EINVAL) +
				  (nzi_coll_agg_fix(c, NAN) == -EINVAL);
		if (!nzi_coll_agg_fix(c, 1)) {
			int32_t x[256];

			for (int i = 0; i < 256; i++)
				x[i] = r + i;
			j->works[r] = !nz_allreduce(c, x, x, 256, NZ_INT32, NZ_SUM) &&
				      x[255] == NR * 255 + NR * (NR - 1) / 2 &&
				      !nzi_coll_agg_stats(c, &st) && st.splits == 1;
		}
	} else {
		j->fix_range[r] = nzi_coll_agg_fix(c, 0.5) == -ENOENT;
	}
	nz_comm_destroy(c);
	return NULL;
}

static void setup_run(struct setup_job *j)
{
	struct setup_arg sa[NR];

	j->job_id = next_job++;
	tw_init(&j->w, NR, 20000);
	for (int r = 0; r < NR; r++) {
		sa[r] = (struct setup_arg){ .j = j, .rank = r, .ctx = { .w = &j->w, .rank = r } };
		pthread_create(&sa[r].tid, NULL, setup_main, &sa[r]);
	}
	for (int r = 0; r < NR; r++)
		pthread_join(sa[r].tid, NULL);
	tw_destroy(&j->w);
}

static struct setup_job *setup_job(const struct agg_node *node)
{
	struct setup_job *j = calloc(1, sizeof(*j));

	if (j)
		j->node = node;
	for (int r = 0; j && r < NR; r++)
		j->e[r] = (struct nzi_agg_env){
			.set = true, .host = "127.0.0.1", .port = ntohs(node->addr.sin_port),
			.window = 16, .timeout_ms = 2000, .min_bytes = 0,
		};
	return j;
}

/* How many ranks returned ret, were attached (att) and off or not,
 * passed fix's checks, used the node if attached and on. */
static int count_off(const struct setup_job *j, int ret, bool att, bool off)
{
	int n = 0;

	for (int r = 0; r < NR; r++)
		n += j->ret[r] == ret && j->attached[r] == att && j->off[r] == off &&
		     j->fix_range[r] == (att ? 3 : 1) && j->works[r] == (att && !off);
	if (n != NR)
		for (int r = 0; r < NR; r++)
			tap_diag("rank %d: %d, attached %d, off %d, fix %d, used %d", r, j->ret[r],
				 j->attached[r], j->off[r], j->fix_range[r], j->works[r]);
	return n;
}

static int count(const struct setup_job *j, int ret, bool att)
{
	return count_off(j, ret, att, false);
}

static void test_setup(const struct agg_node *node)
{
	struct setup_job *good = setup_job(node), *bad = setup_job(node);
	struct setup_job *differ = setup_job(node), *away = setup_job(node);
	struct setup_job *taken = setup_job(node), *none = setup_job(node);
	struct setup_job *partial = setup_job(node), *down = setup_job(node);
	int off = 0;

	if (!good || !bad || !differ || !away || !taken || !none || !partial || !down) {
		tap_ok(0, "set-up jobs allocated");
		goto out;
	}
	setup_run(good);
	tap_ok(count(good, 0, true) == NR,
	       "NEZHA_AGG_NODE on every rank: the node attached on %d of %d ranks, its share used, nzi_coll_agg_fix refuses 1.5, -0.1, NaN",
	       count(good, 0, true), NR);
	bad->parse_err[2] = -EINVAL;
	bad->e[2].set = false;
	setup_run(bad);
	tap_ok(count(bad, -EINVAL, false) == NR,
	       "rank 2's NEZHA_AGG_* malformed: -EINVAL on %d of %d ranks, none attached, none waits for it",
	       count(bad, -EINVAL, false), NR);
	differ->e[1].min_bytes = 4 << 20;
	setup_run(differ);
	tap_ok(count(differ, -EINVAL, false) == NR,
	       "rank 1's NEZHA_AGG_MIN differs: -EINVAL on %d of %d ranks, none attached",
	       count(differ, -EINVAL, false), NR);
	away->e[3].port = 9;	/* nothing listens there */
	away->e[3].timeout_ms = 300;
	setup_run(away);
	tap_ok(count_off(away, 0, true, true) == NR,
	       "rank 3 cannot reach the node: 0 on %d of %d ranks, the node attached and off on all (until every rank joins)",
	       count_off(away, 0, true, true), NR);
	taken->taken[2] = true;
	setup_run(taken);
	for (int r = 0; r < NR; r++)
		off += !taken->ret[r] && (r == 2 || !taken->attached[r]);
	tap_ok(off == NR,
	       "rank 2 cannot attach the node (-EEXIST): 0 on %d of %d ranks, the node off on the others",
	       off, NR);
	/* Every rank enters the agreement, node or not (comm.c calls the
	 * set-up for every communicator). */
	for (int r = 0; r < NR; r++)
		none->e[r] = (struct nzi_agg_env){ .window = 32, .timeout_ms = 5000,
						   .min_bytes = 1 << 20 };
	setup_run(none);
	tap_ok(count(none, 0, false) == NR,
	       "no rank has a node: 0 on %d of %d ranks, none attached", count(none, 0, false), NR);
	/* Rank 1 has none, with other NEZHA_AGG_MIN than the rest: it has
	 * no say in the settings, and the others go without the node. */
	partial->e[1] = none->e[1];
	setup_run(partial);
	tap_ok(count(partial, 0, false) == NR,
	       "rank 1 has no node (its NEZHA_AGG_MIN other): 0 on %d of %d ranks, the node off on all, none waits",
	       count(partial, 0, false), NR);
	/* Rank 0's node from a rail the module finds unreachable. */
	snprintf(down->e[0].rail, sizeof(down->e[0].rail), "ra");
	down->e[0].rail_down = true;
	setup_run(down);
	tap_ok(count_off(down, 0, true, true) == NR,
	       "rank 0's aggregation rail unreachable: 0 on %d of %d ranks, the node attached and off on all",
	       count_off(down, 0, true, true), NR);
out:
	free(none);
	free(partial);
	free(down);
	free(good);
	free(bad);
	free(differ);
	free(away);
	free(taken);
}

int main(void)
{
	struct aggd_cfg cfg;
	struct agg_node node = { 0 };

	tap_plan(34);
	for (size_t i = 0; i < sizeof(key); i++)
		key[i] = (uint8_t)(i * 7 + 3);
	cfg = node_cfg(0);
	if (agg_node_start(&node, &cfg)) {
		tap_ok(0, "an aggregation node starts on 127.0.0.1");
		return tap_exit();
	}
	test_types(&node);
	test_not_split(&node);
	test_loss(&node);
	test_one_rank_fails(&node);
	test_resume(&node);
	test_fixed(&node);
	test_cancel(&node);
	test_spec();
	test_env_parse();
	test_setup(&node);
	agg_node_stop(&node);
	aggd_destroy(node.n);
	test_cut();
	test_node_dies();
	test_restart();
	test_pairs();
	return tap_exit();
}
