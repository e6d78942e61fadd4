// SPDX-License-Identifier: GPL-2.0
/*
 * Host test of the aggregation rail end to end on 127.0.0.1: nezha-aggd's
 * core and UDP loop (tools/aggd_*.c) in a thread (agg_node.c), ranks in threads using
 * libnezha's client (agg_client.c).  Packets are lost on purpose, by
 * deterministic hooks in the node (every Kth DATA in, every Kth RESULT
 * out) and in each rank (every Kth DATA out, every Kth RESULT in): the
 * results must still be exact, for every dtype and operator, while a
 * second job shares the node.  Then the refusals a rank sees, and a node
 * that is gone.  Nothing here depends on timing but the retransmission
 * timer; the throughput printed at the end is information, not a check.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agg_node.h"
#include "agg_client.h"
#include "reduce.h"
#include "tap.h"

#define NRANKS 4

static uint8_t key_a[NZA_KEY_LEN], key_b[NZA_KEY_LEN];
static struct sockaddr_in node_addr;

static int node_start(struct agg_node *t, unsigned int drop_rx, unsigned int drop_tx)
{
	struct aggd_cfg cfg = { .slots = 256, .max_jobs = 4, .job_slots = 64,
				.idle_ns = 60ull * 1000000000ull, .nkeys = 2,
				.drop_rx_every = drop_rx, .drop_tx_every = drop_tx };
	int ret;

	memcpy(cfg.keys[0], key_a, NZA_KEY_LEN);
	memcpy(cfg.keys[1], key_b, NZA_KEY_LEN);
	ret = agg_node_start(t, &cfg);
	node_addr = t->addr;
	return ret;
}

static struct nzi_agg_cfg rank_cfg(const uint8_t *key, uint64_t job, uint16_t rank,
				   uint16_t nranks, uint16_t window)
{
	return (struct nzi_agg_cfg){
		.node = (const struct sockaddr *)&node_addr, .node_len = sizeof(node_addr),
		.key = key, .job_id = job, .rank = rank, .nranks = nranks, .window = window,
		.rto_ms = 10, .timeout_ms = 5000,
	};
}

/* Rank r's element i: dyadic values whose f32 sums are exact (see below). */
static float input_f(unsigned int r, size_t i, enum nz_dtype dt)
{
	int v = (int)((i * 2654435761u + r * 40503u) % 401) - 200;

	if (i % 31 == 0)
		v = 0;
	return dt == NZ_BFLOAT16 ? (float)(v / 2) : (float)v / 2;
}

static int32_t input_i(unsigned int r, size_t i)
{
	return (int32_t)(i * 2654435761u ^ (r + 1) * 0x9e3779b9u);
}

static void fill(unsigned int r, void *buf, size_t count, enum nz_dtype dt)
{
	for (size_t i = 0; i < count; i++) {
		float f = input_f(r, i, dt);

		switch (dt) {
		case NZ_FLOAT32: ((float *)buf)[i] = f; break;
		case NZ_FLOAT16: ((uint16_t *)buf)[i] = nz_f32_to_f16(f); break;
		case NZ_BFLOAT16: ((uint16_t *)buf)[i] = nz_f32_to_bf16(f); break;
		default: ((int32_t *)buf)[i] = input_i(r, i); break;
		}
	}
}

/* The reference: reduce in f32 (exact for these values) or i32, round once. */
static bool check(const void *buf, size_t count, enum nz_dtype dt, enum nz_redop op,
		  unsigned int nranks)
{
	for (size_t i = 0; i < count; i++) {
		float acc = input_f(0, i, dt);
		uint32_t iacc = (uint32_t)input_i(0, i);
		uint32_t want, got = 0;

		for (unsigned int r = 1; r < nranks; r++) {
			float f = input_f(r, i, dt);
			int32_t v = input_i(r, i);

			acc = op == NZ_MIN ? fminf(acc, f) : op == NZ_MAX ? fmaxf(acc, f) : acc + f;
			iacc = op == NZ_MIN ? (uint32_t)(v < (int32_t)iacc ? v : (int32_t)iacc) :
			       op == NZ_MAX ? (uint32_t)(v > (int32_t)iacc ? v : (int32_t)iacc) :
			       iacc + (uint32_t)v;
		}
		if (op == NZ_AVG)
			acc = (float)((double)acc / nranks);
		switch (dt) {
		case NZ_FLOAT32: memcpy(&want, &acc, 4); memcpy(&got, (const float *)buf + i, 4); break;
		case NZ_FLOAT16: want = nz_f32_to_f16(acc); got = ((const uint16_t *)buf)[i]; break;
		case NZ_BFLOAT16: want = nz_f32_to_bf16(acc); got = ((const uint16_t *)buf)[i]; break;
		default: want = iacc; memcpy(&got, (const int32_t *)buf + i, 4); break;
		}
		if (got != want) {
			printf("# element %zu: got %#x want %#x\n", i, got, want);
			return false;
		}
	}
	return true;
}

static const struct { enum nz_dtype dt; enum nz_redop op; size_t count; } cases[] = {
	{ NZ_FLOAT32, NZ_SUM, 20000 }, { NZ_FLOAT32, NZ_MAX, 3001 }, { NZ_FLOAT32, NZ_AVG, 5000 },
	{ NZ_FLOAT16, NZ_SUM, 9000 }, { NZ_FLOAT16, NZ_MIN, 700 },
	{ NZ_BFLOAT16, NZ_SUM, 4100 }, { NZ_BFLOAT16, NZ_MAX, 1 },
	{ NZ_INT32, NZ_SUM, 12345 }, { NZ_INT32, NZ_MIN, 256 },
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

struct rank_thread {
	pthread_t tid;
	const uint8_t *key;
	uint64_t job;
	unsigned int rank, nranks, drop_tx, drop_rx;
	int join_ret, ret[NCASES];
	bool ok[NCASES];
	struct nzi_agg_stats st;
};

static void *rank_main(void *arg)
{
	struct rank_thread *t = arg;
	struct nzi_agg_cfg cfg = rank_cfg(t->key, t->job, t->rank, t->nranks, 8);
	struct nzi_agg *a;
	void *buf;

	cfg.drop_tx_every = t->drop_tx;
	cfg.drop_rx_every = t->drop_rx;
	t->join_ret = nzi_agg_join(&cfg, &a);
	if (t->join_ret)
		return NULL;
	for (size_t c = 0; c < NCASES; c++) {
		buf = malloc(cases[c].count * 4);
		fill(t->rank, buf, cases[c].count, cases[c].dt);
		t->ret[c] = nzi_agg_allreduce(a, buf, cases[c].count, cases[c].dt, cases[c].op);
		t->ok[c] = !t->ret[c] && check(buf, cases[c].count, cases[c].dt, cases[c].op,
					       t->nranks);
		free(buf);
	}
	t->st = *nzi_agg_stats(a);
	nzi_agg_close(a);
	return NULL;
}

static void test_lossy(void)
{
	struct rank_thread r[NRANKS + 2];
	struct agg_node node;
	const struct aggd_stats *st;
	uint64_t retx = 0, lost = 0;
	bool joined = true;

	if (node_start(&node, 13, 11)) {
		tap_ok(0, "node on 127.0.0.1");
		return;
	}
	for (unsigned int i = 0; i < NRANKS + 2; i++) {
		/* Ranks 0-3: job 1 under key a; two more: job 1 under key b. */
		bool b = i >= NRANKS;

		r[i] = (struct rank_thread){ .key = b ? key_b : key_a, .job = 1,
					     .rank = b ? i - NRANKS : i, .nranks = b ? 2 : NRANKS,
					     .drop_tx = 7 + i, .drop_rx = 5 + i };
		pthread_create(&r[i].tid, NULL, rank_main, &r[i]);
	}
	for (unsigned int i = 0; i < NRANKS + 2; i++) {
		pthread_join(r[i].tid, NULL);
		joined &= !r[i].join_ret;
		retx += r[i].st.retransmits;
		lost += r[i].st.drop_injected;
	}
	agg_node_stop(&node);
	st = aggd_stats(node.n);
	tap_ok(joined, "4 ranks of one job and 2 of another (same job id, another key) join");
	for (size_t c = 0; c < NCASES; c++) {
		bool ok = true;
		int ret = 0;

		for (unsigned int i = 0; i < NRANKS + 2; i++) {
			ok &= r[i].ok[c];
			ret = ret ? ret : r[i].ret[c];
		}
		tap_ok(ok, "%s %s of %zu elements, packets lost both ways: every rank of both jobs exact (%d)",
		       cases[c].dt == NZ_FLOAT32 ? "f32" : cases[c].dt == NZ_FLOAT16 ? "f16" :
		       cases[c].dt == NZ_BFLOAT16 ? "bf16" : "i32",
		       cases[c].op == NZ_SUM ? "sum" : cases[c].op == NZ_MIN ? "min" :
		       cases[c].op == NZ_MAX ? "max" : "avg", cases[c].count, ret);
	}
	tap_ok(st->drop_injected > 0 && lost > 0 && retx > 0 && st->results_resent > 0,
	       "losses happened and were repaired: node lost %llu, ranks lost %llu, retransmitted %llu, results resent %llu",
	       (unsigned long long)st->drop_injected, (unsigned long long)lost,
	       (unsigned long long)retx, (unsigned long long)st->results_resent);
	tap_ok(st->jobs_active == 0 && st->slots_used == 0 && st->leaves == NRANKS + 2,
	       "every rank left: both jobs and their slots are free");
	printf("# ");
	aggd_stats_print(node.n, stdout);
	aggd_destroy(node.n);
}

static void test_refusals(void)
{
	struct nzi_agg_cfg cfg;
	struct agg_node node;
	struct nzi_agg *a = NULL, *more[4] = { NULL };
	uint8_t nokey[NZA_KEY_LEN] = { 1 };
	float x = 1;
	int ret;

	if (node_start(&node, 0, 0)) {
		tap_ok(0, "node on 127.0.0.1");
		return;
	}
	cfg = rank_cfg(key_a, 2, 0, 1, 65);
	tap_ok(nzi_agg_join(&cfg, &a) == -EINVAL, "a window over --job-slots: -EINVAL at once");
	cfg = rank_cfg(nokey, 2, 0, 1, 4);
	cfg.timeout_ms = 200;
	tap_ok(nzi_agg_join(&cfg, &a) == -EKEYREJECTED, "a key the node lacks: -EKEYREJECTED");
	/* 4 jobs of 64 slots fill the pool (256) and --max-jobs (4). */
	cfg = rank_cfg(key_a, 3, 0, 1, 64);
	cfg.timeout_ms = 300;		/* the node is stopped below */
	ret = nzi_agg_join(&cfg, &a);
	for (int i = 0; i < 4 && !ret; i++) {
		cfg.job_id = 4 + i;
		ret = nzi_agg_join(&cfg, &more[i]);
	}
	tap_ok(ret == -ENOSPC, "the pool full: -ENOSPC (%d)", ret);
	tap_ok(a && nzi_agg_allreduce(a, &x, 1, NZ_FLOAT64, NZ_SUM) == -EOPNOTSUPP &&
	       nzi_agg_allreduce(a, &x, 1, NZ_FLOAT32, NZ_PROD) == -EOPNOTSUPP,
	       "f64 and PROD are not for the node: -EOPNOTSUPP");
	for (int i = 0; i < 4; i++)
		nzi_agg_close(more[i]);
	agg_node_stop(&node);
	aggd_destroy(node.n);
	/* The node is gone: no progress, then no further use. */
	if (a) {
		tap_ok(nzi_agg_allreduce(a, &x, 1, NZ_FLOAT32, NZ_SUM) == -ETIMEDOUT &&
		       nzi_agg_allreduce(a, &x, 1, NZ_FLOAT32, NZ_SUM) == -EPIPE,
		       "the node gone: -ETIMEDOUT, then -EPIPE");
		nzi_agg_close(a);
	} else {
		tap_ok(0, "the node gone");
	}
}

struct bench_thread {
	pthread_t tid;
	unsigned int rank;
	size_t count;
	int iters, ret;
};

static void *bench_main(void *arg)
{
	struct bench_thread *t = arg;
	struct nzi_agg_cfg cfg = rank_cfg(key_a, 99, t->rank, NRANKS, 64);
	struct nzi_agg *a;
	float *buf = calloc(t->count, sizeof(*buf));

	cfg.rto_ms = 100;	/* 2 shared cores: no spurious resends */
	t->ret = nzi_agg_join(&cfg, &a);
	for (int i = 0; i < t->iters && !t->ret; i++)
		t->ret = nzi_agg_allreduce(a, buf, t->count, NZ_FLOAT32, NZ_SUM);
	if (!t->ret)
		nzi_agg_close(a);
	free(buf);
	return NULL;
}

/* Throughput of the node with 4 ranks on this host: printed, not checked. */
static void bench(void)
{
	const char *mb = getenv("NZ_AGG_BENCH_MB");
	struct bench_thread t[NRANKS];
	struct agg_node node;
	struct timespec t0, t1;
	uint64_t rx0;
	double s;
	int ret = 0;

	if (node_start(&node, 0, 0)) {
		tap_ok(0, "node for the throughput run");
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rx0 = aggd_stats(node.n)->rx;
	for (unsigned int i = 0; i < NRANKS; i++) {
		t[i] = (struct bench_thread){ .rank = i, .count = (mb ? atoi(mb) : 4) << 18,
					      .iters = 2 };
		pthread_create(&t[i].tid, NULL, bench_main, &t[i]);
	}
	for (unsigned int i = 0; i < NRANKS; i++) {
		pthread_join(t[i].tid, NULL);
		ret = ret ? ret : t[i].ret;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	agg_node_stop(&node);
	s = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	tap_ok(!ret, "4 ranks x 2 allreduces of %zu MiB f32, window 64", t[0].count >> 18);
	tap_diag("node: %.0f packets/s in, %.1f MiB/s of contributions, %.2f s (2 cores shared by node and ranks)",
		 (double)(aggd_stats(node.n)->rx - rx0) / s,
		 (double)aggd_stats(node.n)->contributions * NZA_PAYLOAD / s / (1 << 20), s);
	printf("# ");
	aggd_stats_print(node.n, stdout);
	aggd_destroy(node.n);
}

int main(void)
{
	for (int i = 0; i < NZA_KEY_LEN; i++) {
		key_a[i] = 3 * i;
		key_b[i] = 0xff - i;
	}
	tap_plan(NCASES + 3 + 5 + 1);
	test_lossy();
	test_refusals();
	bench();
	return tap_exit();
}
