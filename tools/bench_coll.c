// SPDX-License-Identifier: GPL-2.0
/*
 * nezha-bench allreduce | broadcast | reduce | allgather | reduce_scatter |
 * alltoall | barrier: the collectives of libnezha, measured and printed
 * the way nccl-tests does, with nccl-tests' options, on ranks set up like
 * a torchrun job (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, and the job
 * key in NEZHA_JOB_KEY or NEZHA_JOB_KEY_FILE).
 *
 * For every size from -b to -e (times -f, or plus -i): a barrier, -w
 * warm-up iterations, then -n timed ones, each of -m collectives
 * (issued together, non-blocking, unless -z 1); time is the mean per
 * collective, averaged over the ranks (-a 1; -a 0 rank 0's, 2 the
 * least, 3 the largest).  size is the whole buffer as nccl-tests counts
 * it (allgather: the gathered buffer; reduce_scatter: the input;
 * alltoall: either buffer), count its elements.  algbw = size / time;
 * busbw = algbw x the collective's factor (nccl-tests' PERFORMANCE.md):
 * allreduce 2(n-1)/n; allgather, reduce_scatter, alltoall (n-1)/n;
 * broadcast, reduce 1.  -c N (default 1) runs N more, untimed
 * iterations on known data and counts the elements that differ from the
 * expected result (#wrong, all ranks): integers and MIN/MAX/PROD exactly,
 * sums and averages of floating-point types within the rounding error
 * that n contributions can carry in that type (see nzb_tolerance()).
 *
 * Rank 0 broadcasts its options, so every rank runs the same plan.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "coll.h"
#include "nezha.h"
#include "reduce.h"
#include "bench.h"

#define NZB_MAX_CONC	8
#define NZB_PERIOD	61	/* data patterns repeat with this period */

enum { PLACE_OUT = 1, PLACE_IN = 2, PLACE_BOTH = 3 };

/* The plan, as rank 0 broadcasts it. */
struct nzb_plan {
	uint64_t min, max, step;
	uint32_t factor, iters, warmup, check, dtype, op, root, algo, conc, place;
	uint32_t stop_s, average, blocking, rsvd;
};

enum { AVG_RANK0, AVG_MEAN, AVG_MIN, AVG_MAX };

struct nzb_coll {
	struct nz_comm *comm;
	enum nz_coll coll;
	struct nzb_plan p;
	int rank, size;
	size_t es;
	unsigned char *sbuf[NZB_MAX_CONC], *rbuf[NZB_MAX_CONC];
	size_t buflen;
	unsigned char *want;		/* -c: one period of the result */
	double *want_f, *tol;		/* floating-point sums: value, tolerance */
};

static bool nzb_reduces(enum nz_coll c)
{
	return c == NZ_COLL_ALLREDUCE || c == NZ_COLL_REDUCE || c == NZ_COLL_REDUCE_SCATTER;
}

static bool nzb_rooted(enum nz_coll c)
{
	return c == NZ_COLL_BROADCAST || c == NZ_COLL_REDUCE;
}

static double nzb_busbw_factor(enum nz_coll c, int n)
{
	switch (c) {
	case NZ_COLL_ALLREDUCE:
		return 2.0 * (n - 1) / n;
	case NZ_COLL_ALLGATHER:
	case NZ_COLL_REDUCE_SCATTER:
	case NZ_COLL_ALLTOALL:
		return (double)(n - 1) / n;
	case NZ_COLL_BROADCAST:
	case NZ_COLL_REDUCE:
		return 1;
	default:
		return 0;
	}
}

/* Elements per rank's call (the API's count) for a size in bytes. */
static size_t nzb_count(const struct nzb_coll *b, size_t size)
{
	size_t c = size / b->es;

	if (b->coll == NZ_COLL_ALLGATHER || b->coll == NZ_COLL_REDUCE_SCATTER ||
	    b->coll == NZ_COLL_ALLTOALL)
		c /= (size_t)b->size;
	return b->coll == NZ_COLL_BARRIER ? 0 : c;
}

/* ---- Data (--check) ---- */

static bool nzb_is_float(enum nz_dtype t)
{
	return t == NZ_FLOAT16 || t == NZ_BFLOAT16 || t == NZ_FLOAT32 || t == NZ_FLOAT64;
}

static bool nzb_is_signed(enum nz_dtype t)
{
	return t == NZ_INT8 || t == NZ_INT32 || t == NZ_INT64 || nzb_is_float(t);
}

/* Input element k (mod the period) of rank r, exact in every type. */
static long nzb_value(const struct nzb_coll *b, int r, size_t k)
{
	enum nz_dtype t = (enum nz_dtype)b->p.dtype;
	long x;

	switch ((enum nz_redop)b->p.op) {
	case NZ_PROD:
		x = (long)((r + k) % 3);
		return nzb_is_signed(t) ? (x ? 1 : -1) : (x ? 1 : 3);
	case NZ_MIN:
	case NZ_MAX:
		x = (long)((r * 7 + 5 * k) % 23);
		return nzb_is_signed(t) ? x - 11 : x;
	default:
		x = (long)((r + 3 * k) % 9);
		return nzb_is_signed(t) ? x - 4 : x;
	}
}

/*
 * Sums and averages of floating-point types get thirds (not exact in
 * binary): their result depends on the order of the additions, which the
 * algorithm chooses, and the check needs its tolerance.
 */
static bool nzb_inexact(const struct nzb_coll *b)
{
	enum nz_redop op = (enum nz_redop)b->p.op;

	return nzb_is_float((enum nz_dtype)b->p.dtype) && (op == NZ_SUM || op == NZ_AVG);
}

static double nzb_fvalue(const struct nzb_coll *b, int r, size_t k)
{
	return (double)nzb_value(b, r, k) / (nzb_inexact(b) ? 3.0 : 1.0);
}

/* Unit roundoff of a floating-point type: half its epsilon. */
static double nzb_unit_roundoff(enum nz_dtype t)
{
	switch (t) {
	case NZ_FLOAT16: return ldexp(1, -11);
	case NZ_BFLOAT16: return ldexp(1, -8);
	case NZ_FLOAT32: return ldexp(1, -24);
	default: return ldexp(1, -53);
	}
}

static void nzb_putd(void *p, enum nz_dtype t, double d)
{
	uint16_t h;
	float f = (float)d;

	switch (t) {
	case NZ_FLOAT16: h = nz_f32_to_f16(f); memcpy(p, &h, 2); break;
	case NZ_BFLOAT16: h = nz_f32_to_bf16(f); memcpy(p, &h, 2); break;
	case NZ_FLOAT32: memcpy(p, &f, 4); break;
	default: memcpy(p, &d, 8); break;
	}
}

/* A floating-point element as a double. */
static double nzb_getd(const void *p, enum nz_dtype t)
{
	uint16_t h;
	float f;
	double d;

	switch (t) {
	case NZ_FLOAT16: memcpy(&h, p, 2); return nz_f16_to_f32(h);
	case NZ_BFLOAT16: memcpy(&h, p, 2); return nz_bf16_to_f32(h);
	case NZ_FLOAT32: memcpy(&f, p, 4); return f;
	default: memcpy(&d, p, 8); return d;
	}
}

/* The input element as it is in its type (rounded once). */
static double nzb_input(const struct nzb_coll *b, int r, size_t k)
{
	unsigned char buf[8];

	nzb_putd(buf, (enum nz_dtype)b->p.dtype, nzb_fvalue(b, r, k));
	return nzb_getd(buf, (enum nz_dtype)b->p.dtype);
}

static void nzb_put(void *p, enum nz_dtype t, long v)
{
	uint64_t u = (uint64_t)v;
	uint16_t h;
	float f = (float)v;
	double d = (double)v;

	switch (t) {
	case NZ_FLOAT16: h = nz_f32_to_f16(f); memcpy(p, &h, 2); break;
	case NZ_BFLOAT16: h = nz_f32_to_bf16(f); memcpy(p, &h, 2); break;
	case NZ_FLOAT32: memcpy(p, &f, 4); break;
	case NZ_FLOAT64: memcpy(p, &d, 8); break;
	default: memcpy(p, &u, nz_dtype_size(t)); break;	/* little endian */
	}
}

/* A byte pattern for the collectives that only move data. */
static unsigned char nzb_byte(int r, size_t blk, size_t j)
{
	uint64_t x = (uint64_t)r * 0x9e3779b97f4a7c15ULL + blk * 0xbf58476d1ce4e5b9ULL + j;

	x ^= x >> 29;
	x *= 0x94d049bb133111ebULL;
	return (unsigned char)(x >> 32);
}

/* Fill rank r's send buffer: reductions by value, others by byte. */
static void nzb_fill(const struct nzb_coll *b, unsigned char *buf, size_t count)
{
	size_t n = b->coll == NZ_COLL_REDUCE_SCATTER || b->coll == NZ_COLL_ALLTOALL ?
		   (size_t)b->size * count : count;

	if (nzb_reduces(b->coll)) {
		for (size_t i = 0; i < n; i++) {
			if (nzb_inexact(b))
				nzb_putd(buf + i * b->es, (enum nz_dtype)b->p.dtype,
					 nzb_fvalue(b, b->rank, i % NZB_PERIOD));
			else
				nzb_put(buf + i * b->es, (enum nz_dtype)b->p.dtype,
					nzb_value(b, b->rank, i % NZB_PERIOD));
		}
		return;
	}
	for (size_t i = 0; i < n * b->es; i++) {
		size_t blk = b->coll == NZ_COLL_ALLTOALL ? i / (count * b->es) : 0;
		size_t j = b->coll == NZ_COLL_ALLTOALL ? i % (count * b->es) : i;

		buf[i] = nzb_byte(b->rank, blk, j % (NZB_PERIOD * b->es));
	}
}

/*
 * The tolerance of a floating-point sum of n inputs x_i, whatever the order
 * of the n - 1 additions: each rounds to the type, a relative error of at
 * most u (its unit roundoff) on a partial sum no larger than S = sum |x_i|,
 * so |result - exact| <= (n - 1) u S; one more u for the rounding of the
 * result itself (the average: its division), and the bound of an average
 * is that of the sum over n.  (nccl-tests' fixed per-type bounds, 1e-5 for
 * float, ignore n; this one grows with the rank count as the error can.)
 */
static double nzb_tolerance(const struct nzb_coll *b, double abs_sum)
{
	double u = nzb_unit_roundoff((enum nz_dtype)b->p.dtype), n = b->size;
	double bound = n * u * abs_sum;

	return (enum nz_redop)b->p.op == NZ_AVG ? bound / n * (1 + u) : bound;
}

static int nzb_expect_inexact(struct nzb_coll *b)
{
	b->want_f = malloc(NZB_PERIOD * sizeof(double));
	b->tol = malloc(NZB_PERIOD * sizeof(double));
	if (!b->want_f || !b->tol)
		return -ENOMEM;
	for (size_t k = 0; k < NZB_PERIOD; k++) {
		double sum = 0, abs_sum = 0;

		for (int r = 0; r < b->size; r++) {
			double x = nzb_input(b, r, k);

			sum += x;
			abs_sum += fabs(x);
		}
		b->want_f[k] = (enum nz_redop)b->p.op == NZ_AVG ? sum / b->size : sum;
		b->tol[k] = nzb_tolerance(b, abs_sum);
	}
	return 0;
}

/* One period of the reduced result. */
static int nzb_expect(struct nzb_coll *b)
{
	enum nz_dtype t = (enum nz_dtype)b->p.dtype;
	enum nz_redop op = (enum nz_redop)b->p.op;

	if (nzb_inexact(b))
		return nzb_expect_inexact(b);
	b->want = malloc(NZB_PERIOD * b->es);
	if (!b->want)
		return -ENOMEM;
	for (size_t k = 0; k < NZB_PERIOD; k++) {
		long acc = nzb_value(b, 0, k);

		for (int r = 1; r < b->size; r++) {
			long v = nzb_value(b, r, k);

			if (op == NZ_PROD)
				acc *= v;
			else if (op == NZ_MIN)
				acc = v < acc ? v : acc;
			else if (op == NZ_MAX)
				acc = v > acc ? v : acc;
			else
				acc += v;
		}
		nzb_put(b->want + k * b->es, t, acc);
		if (op == NZ_AVG)
			nz_reduce_finish_avg(b->want + k * b->es, 1, t, (unsigned int)b->size);
	}
	return 0;
}

/* Elements of this rank's result that are wrong. */
static uint64_t nzb_wrong(const struct nzb_coll *b, const unsigned char *res, size_t count)
{
	uint64_t wrong = 0;
	size_t n = count, es = b->es;

	if (b->coll == NZ_COLL_REDUCE && b->rank != (int)b->p.root)
		return 0;
	if (b->coll == NZ_COLL_ALLGATHER || b->coll == NZ_COLL_ALLTOALL)
		n = (size_t)b->size * count;
	for (size_t i = 0; i < n; i++) {
		const unsigned char *got = res + i * es;

		if (nzb_reduces(b->coll)) {
			size_t k = (b->coll == NZ_COLL_REDUCE_SCATTER ?
				    (size_t)b->rank * count + i : i) % NZB_PERIOD;

			if (b->want_f) {
				double d = nzb_getd(got, (enum nz_dtype)b->p.dtype);

				/* NaN fails too: the comparison is false. */
				wrong += !(fabs(d - b->want_f[k]) <= b->tol[k]);
			} else {
				wrong += memcmp(got, b->want + k * es, es) != 0;
			}
			continue;
		}
		for (size_t j = 0; j < es; j++) {
			size_t byte = (i % (count ? count : 1)) * es + j;
			int from = b->coll == NZ_COLL_BROADCAST ? (int)b->p.root : (int)(i / count);
			size_t blk = b->coll == NZ_COLL_ALLTOALL ? (size_t)b->rank : 0;

			if (got[j] != nzb_byte(from, blk, byte % (NZB_PERIOD * es))) {
				wrong++;
				break;
			}
		}
	}
	return wrong;
}

/* ---- Running ---- */

/* Buffers of set k for placement in/out: what the call gets. */
static void nzb_bufs(const struct nzb_coll *b, int k, bool inplace, size_t count,
		     const void **snd, void **rcv)
{
	unsigned char *s = b->sbuf[k], *r = b->rbuf[k];
	size_t blk = count * b->es * (size_t)b->rank;

	*snd = s;
	*rcv = r;
	if (!inplace)
		return;
	switch (b->coll) {
	case NZ_COLL_ALLGATHER:
		*snd = r + blk;
		break;
	case NZ_COLL_REDUCE_SCATTER:
		*rcv = s + blk;
		break;
	default:
		*snd = r;
		break;
	}
}

static int nzb_start(struct nzb_coll *b, int k, bool inplace, size_t count,
		     struct nz_coll_request **req)
{
	enum nz_dtype t = (enum nz_dtype)b->p.dtype;
	enum nz_redop op = (enum nz_redop)b->p.op;
	int root = (int)b->p.root;
	const void *s;
	void *r;

	nzb_bufs(b, k, inplace, count, &s, &r);
	switch (b->coll) {
	case NZ_COLL_ALLREDUCE: return nz_iallreduce(b->comm, s, r, count, t, op, req);
	case NZ_COLL_BROADCAST: return nz_ibroadcast(b->comm, s, r, count, t, root, req);
	case NZ_COLL_REDUCE: return nz_ireduce(b->comm, s, r, count, t, op, root, req);
	case NZ_COLL_ALLGATHER: return nz_iallgather(b->comm, s, r, count, t, req);
	case NZ_COLL_REDUCE_SCATTER: return nz_ireduce_scatter(b->comm, s, r, count, t, op, req);
	case NZ_COLL_ALLTOALL: return nz_ialltoall(b->comm, s, r, count, t, req);
	default: return nz_ibarrier(b->comm, req);
	}
}

/*
 * One iteration: p.conc collectives (-m), issued together and then all
 * waited for; with -z 1 each is waited for before the next starts.
 */
static int nzb_iter(struct nzb_coll *b, bool inplace, size_t count)
{
	struct nz_coll_request *req[NZB_MAX_CONC] = { 0 };
	int ret = 0;

	for (uint32_t k = 0; k < b->p.conc && !ret; k++) {
		ret = nzb_start(b, (int)k, inplace, count, &req[k]);
		if (!ret && b->p.blocking) {
			ret = nz_coll_wait(req[k]);
			req[k] = NULL;
		}
	}
	for (uint32_t k = 0; k < b->p.conc; k++) {
		if (req[k]) {
			int w = nz_coll_wait(req[k]);

			ret = ret ? ret : w;
		}
	}
	return ret;
}

static int nzb_fail(const struct nzb_coll *b, const char *what, size_t size, int ret)
{
	fprintf(stderr, "nezha-bench %s: rank %d: %s (size %zu): %s: %s\n",
		nz_coll_name(b->coll), b->rank, what, size, strerror(-ret), nz_last_error());
	return ret;
}

/* -c: fill the inputs of every buffer set, run once, count. */
static int nzb_check_once(struct nzb_coll *b, size_t size, bool inplace, uint64_t *wrong)
{
	size_t count = nzb_count(b, size);
	int ret;

	for (uint32_t k = 0; k < b->p.conc; k++) {
		const void *s;
		void *r;

		nzb_bufs(b, (int)k, inplace, count, &s, &r);
		if (!inplace || b->coll == NZ_COLL_REDUCE_SCATTER) {
			nzb_fill(b, b->sbuf[k], count);
		} else if (b->coll == NZ_COLL_ALLGATHER) {
			nzb_fill(b, b->sbuf[k], count);
			memcpy((void *)s, b->sbuf[k], count * b->es);
		} else {
			nzb_fill(b, r, count);
		}
	}
	ret = nzb_iter(b, inplace, count);
	if (ret)
		return nzb_fail(b, "check", size, ret);
	for (uint32_t k = 0; k < b->p.conc; k++) {
		const void *s;
		void *r;

		nzb_bufs(b, (int)k, inplace, count, &s, &r);
		*wrong += nzb_wrong(b, r, count);
	}
	return 0;
}

/* -c N: N checked iterations, each on freshly written inputs. */
static int nzb_check(struct nzb_coll *b, size_t size, bool inplace, uint64_t *wrong)
{
	int ret = 0;

	for (uint32_t i = 0; i < b->p.check && !ret; i++)
		ret = nzb_check_once(b, size, inplace, wrong);
	return ret;
}

/* The time the table shows: rank 0's, or the mean, least or largest. */
static int nzb_combine(struct nzb_coll *b, double t, double *usec)
{
	int ret;

	switch (b->p.average) {
	case AVG_RANK0:
		*usec = t;
		return nz_broadcast(b->comm, usec, usec, 1, NZ_FLOAT64, 0);
	case AVG_MIN:
		return nz_allreduce(b->comm, &t, usec, 1, NZ_FLOAT64, NZ_MIN);
	case AVG_MAX:
		return nz_allreduce(b->comm, &t, usec, 1, NZ_FLOAT64, NZ_MAX);
	default:
		ret = nz_allreduce(b->comm, &t, usec, 1, NZ_FLOAT64, NZ_SUM);
		*usec /= b->size;
		return ret;
	}
}

/*
 * Timed run of one placement: *usec per collective (combined over the
 * ranks as -a says).  With -t, rank 0 derives the number of timed iterations from
 * the warm-up's pace, so that no decision falls inside the timed loop.
 */
static int nzb_measure(struct nzb_coll *b, size_t size, bool inplace, double *usec,
		       uint64_t *wrong)
{
	size_t count = nzb_count(b, size);
	uint32_t iters = b->p.iters;
	double t0, t, start;
	int ret;

	*wrong = 0;
	if (b->p.check && (ret = nzb_check(b, size, inplace, wrong)))
		return ret;
	ret = nz_barrier(b->comm);
	if (ret)
		return nzb_fail(b, "barrier", size, ret);
	start = nzb_now();
	for (uint32_t it = 0; it < b->p.warmup; it++) {
		ret = nzb_iter(b, inplace, count);
		if (ret)
			return nzb_fail(b, "warm-up", size, ret);
	}
	if (b->p.stop_s && b->p.warmup) {
		double each = (nzb_now() - start) / b->p.warmup;

		/* Rank 0 decides, so that every rank runs as many. */
		if (each * iters > b->p.stop_s)
			iters = each > 0 ? (uint32_t)(b->p.stop_s / each) : iters;
		iters = iters ? iters : 1;
		ret = nz_broadcast(b->comm, &iters, &iters, 1, NZ_UINT32, 0);
		if (!ret)
			ret = nz_barrier(b->comm);
		if (ret)
			return nzb_fail(b, "plan", size, ret);
	}
	t0 = nzb_now();
	for (uint32_t it = 0; it < iters; it++) {
		ret = nzb_iter(b, inplace, count);
		if (ret)
			return nzb_fail(b, "run", size, ret);
	}
	t = (nzb_now() - t0) * 1e6 / iters / b->p.conc;
	ret = nzb_combine(b, t, usec);
	if (!ret)
		ret = nz_allreduce(b->comm, wrong, wrong, 1, NZ_UINT64, NZ_SUM);
	return ret ? nzb_fail(b, "report", size, ret) : 0;
}

/* ---- Output ---- */

static void nzb_header(const struct nzb_coll *b)
{
	struct nz_coll_tuning t;

	nz_coll_get_tuning(b->comm, &t);
	printf("# nezha-bench %s: %d ranks, %d rail%s:", nz_coll_name(b->coll), b->size,
	       nz_comm_nrails(b->comm), nz_comm_nrails(b->comm) == 1 ? "" : "s");
	for (int s = 0; s < nz_comm_nrails(b->comm); s++)
		printf(" %s", nz_comm_rail_name(b->comm, s));
	printf(", chunk unit %d KiB", nz_comm_unit(b->comm) / 1024);
	printf("\n# %u iterations after %u warm-up%s, %u collective%s each (%s), data check %u, time %s, algorithm %s\n",
	       b->p.iters, b->p.warmup, b->p.stop_s ? " (fewer when slower than --time-cap)" : "",
	       b->p.conc, b->p.conc == 1 ? "" : "s", b->p.blocking ? "blocking" : "non-blocking",
	       b->p.check,
	       (const char *[]){ "of rank 0", "averaged over ranks", "least of ranks",
				 "largest of ranks" }[b->p.average],
	       b->p.algo ? nz_coll_algo_name((enum nz_coll_algo)b->p.algo) : "auto");
	printf("# tuning: rd up to %zu B (0: by ranks), hd up to %zu B, small %zu B, segment %zu B, pieces %zu B, window %u\n#\n",
	       t.allreduce_rd_max, t.allreduce_crossover, t.small_max, t.segment, t.small_segment,
	       t.window);
	printf("# %10s %12s %8s %6s %6s", "", "", "", "", "");
	if (b->p.place & PLACE_OUT)
		printf("  %31s", "out-of-place                  ");
	if (b->p.place & PLACE_IN)
		printf("  %31s", "in-place                      ");
	printf("\n# %10s %12s %8s %6s %6s", "size", "count", "type", "redop", "root");
	for (int k = 0; k < 2; k++)
		if (b->p.place & (1 << k))
			printf("  %9s %8s %8s %6s", "time", "algbw", "busbw", "#wrong");
	printf("  %s\n# %10s %12s %8s %6s %6s", "algo", "(B)", "(elements)", "", "", "");
	for (int k = 0; k < 2; k++)
		if (b->p.place & (1 << k))
			printf("  %9s %8s %8s %6s", "(us)", "(GB/s)", "(GB/s)", "");
	printf("\n");
	fflush(stdout);
}

static void nzb_row_start(const struct nzb_coll *b, size_t size)
{
	size_t count = nzb_count(b, size);

	if (b->coll == NZ_COLL_ALLGATHER || b->coll == NZ_COLL_REDUCE_SCATTER ||
	    b->coll == NZ_COLL_ALLTOALL)
		count *= (size_t)b->size;
	printf("  %10zu %12zu %8s %6s %6d", size, count,
	       b->coll == NZ_COLL_BARRIER ? "none" : nz_dtype_name((enum nz_dtype)b->p.dtype),
	       nzb_reduces(b->coll) ? nz_redop_name((enum nz_redop)b->p.op) : "none",
	       nzb_rooted(b->coll) ? (int)b->p.root : -1);
}

static void nzb_cell(const struct nzb_coll *b, size_t size, double usec, uint64_t wrong)
{
	double algbw = usec > 0 ? (double)size / usec / 1e3 : 0;
	char w[24] = "N/A";

	if (b->p.check)
		snprintf(w, sizeof(w), "%llu", (unsigned long long)wrong);
	printf("  %9.1f %8.4f %8.4f %6s", usec, algbw, algbw * nzb_busbw_factor(b->coll, b->size), w);
}

/* ---- Set-up ---- */

/*
 * The communicator from the torchrun environment, as nz_comm_init_env()
 * builds it, but with the chunk unit of -u (which the environment cannot
 * set); unit 0 keeps nz_comm_init_env() itself.
 */
static int nzb_init(struct nz_comm **comm, unsigned int unit)
{
	struct nz_comm_opts o = { 0 };
	const char *v;

	if (!unit)
		return nz_comm_init_env(comm);
	if (!getenv("RANK") || !getenv("WORLD_SIZE")) {
		fprintf(stderr, "nezha-bench: -u needs RANK and WORLD_SIZE (torchrun style)\n");
		return -EINVAL;
	}
	o.rank = atoi(getenv("RANK"));
	o.size = atoi(getenv("WORLD_SIZE"));
	o.master_addr = getenv("MASTER_ADDR");
	o.master_port = getenv("MASTER_PORT") ? atoi(getenv("MASTER_PORT")) : 0;
	o.timeout_ms = (v = getenv("NEZHA_TIMEOUT_MS")) ? atoi(v) : 0;
	o.op_timeout_ms = (v = getenv("NEZHA_OP_TIMEOUT_MS")) ? (unsigned int)atoi(v) : 0;
	o.unit = unit;
	return nz_comm_init(comm, &o);
}

/* ---- Options ---- */

static int nzb_parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);

	switch (*end) {
	case 'G': case 'g': v <<= 10; /* fall through */
	case 'M': case 'm': v <<= 10; /* fall through */
	case 'K': case 'k': v <<= 10; end++; break;
	default: break;
	}
	if (end == s || *end || v > (1ULL << 34))
		return -EINVAL;
	*out = v;
	return 0;
}

static void nzb_usage(const char *mode)
{
	fprintf(stderr,
		"usage: nezha-bench %s [-b MINBYTES] [-e MAXBYTES] [-i STEPBYTES | -f STEPFACTOR]\n"
		"         [-n ITERS] [-w WARMUP] [-m AGG] [-c CHECK] [-z 0|1] [-a 0|1|2|3]\n"
		"         [-d DTYPE] [-o OP] [-r ROOT] [-T SECONDS] [-t 1] [-g 1] [-p 0|1]\n"
		"         [-A ALGO] [-u UNIT] [--place out|in|both] [--time-cap SECONDS]\n"
		"  nccl-tests' options and defaults: -b 32M -e 32M -i 1M -n 20 -w 5 -m 1 -c 1\n"
		"  -z 0 -a 1 -d float -o sum -r 0; sizes take K/M/G suffixes\n"
		"  -m: collectives per iteration (1..%d), -z 1: each waited for before the next\n"
		"  -c N: N checked iterations (0: none); -a: time of rank 0, mean, least, largest\n"
		"  ranks set up like torchrun: MASTER_ADDR MASTER_PORT RANK WORLD_SIZE,\n"
		"  and the job key: NEZHA_JOB_KEY or NEZHA_JOB_KEY_FILE (nezhactl key generate)\n"
		"  -t, -g: threads and GPUs per process: 1 only (one rank per process: torchrun)\n"
		"  -p: accepted, no effect (no parallel init without threads)\n"
		"  -T: fail when one wait makes no progress for this long (120)\n"
		"  -A: force an algorithm (rd hd ring tree chain bruck direct pairwise ...)\n"
		"  -u: the communicator's chunk unit in bytes (the same on every rank)\n"
		"  --place: out-of-place, in-place or both columns (both)\n"
		"  --time-cap: fewer iterations when they would take longer than this\n"
		"  ranks set up like torchrun: MASTER_ADDR MASTER_PORT RANK WORLD_SIZE;\n"
		"  every rank follows rank 0's plan; only -T and -u are its own\n",
		mode, NZB_MAX_CONC);
}

/* A whole number lo..hi, nothing else. */
static int nzb_num(const char *s, long lo, long hi, uint32_t *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (end == s || *end || errno || v < lo || v > hi)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

enum { OPT_PLACE = 256, OPT_TIME_CAP };

static int nzb_options(int argc, char **argv, struct nzb_plan *p, int *wait_s,
		       unsigned int *unit)
{
	static const struct option longopts[] = {
		{ "nthreads", required_argument, NULL, 't' },
		{ "ngpus", required_argument, NULL, 'g' },
		{ "minbytes", required_argument, NULL, 'b' },
		{ "maxbytes", required_argument, NULL, 'e' },
		{ "stepbytes", required_argument, NULL, 'i' },
		{ "stepfactor", required_argument, NULL, 'f' },
		{ "op", required_argument, NULL, 'o' },
		{ "datatype", required_argument, NULL, 'd' },
		{ "root", required_argument, NULL, 'r' },
		{ "iters", required_argument, NULL, 'n' },
		{ "warmup_iters", required_argument, NULL, 'w' },
		{ "agg_iters", required_argument, NULL, 'm' },
		{ "average", required_argument, NULL, 'a' },
		{ "parallel_init", required_argument, NULL, 'p' },
		{ "check", optional_argument, NULL, 'c' },
		{ "blocking", required_argument, NULL, 'z' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "cudagraph", required_argument, NULL, 'G' },
		{ "algo", required_argument, NULL, 'A' },
		{ "unit", required_argument, NULL, 'u' },
		{ "place", required_argument, NULL, OPT_PLACE },
		{ "time-cap", required_argument, NULL, OPT_TIME_CAP },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	enum nz_dtype dt;
	enum nz_redop op;
	enum nz_coll_algo algo;
	uint32_t v;
	int opt;

	*p = (struct nzb_plan){ .min = 32 << 20, .max = 32 << 20, .step = 1 << 20,
				.factor = 1, .iters = 20, .warmup = 5, .check = 1,
				.dtype = NZ_FLOAT32, .op = NZ_SUM, .conc = 1,
				.place = PLACE_BOTH, .average = AVG_MEAN };
	optind = 1;
	while ((opt = getopt_long(argc, argv, "t:g:b:e:i:f:o:d:r:n:w:m:a:p:c:z:T:G:A:u:h",
				  longopts, NULL)) != -1) {
		switch (opt) {
		case 't': case 'g':
			/* Threads or GPUs per process: one rank is one process. */
			if (nzb_num(optarg, 1, 1, &v)) {
				fprintf(stderr, "nezha-bench: -%c %s: one rank per process only "
					"(start more processes, torchrun --nproc-per-node)\n",
					opt, optarg);
				goto bad;
			}
			break;
		case 'G':
			if (nzb_num(optarg, 0, 0, &v)) {
				fprintf(stderr, "nezha-bench: -G: no CUDA graphs without GPUs\n");
				goto bad;
			}
			break;
		case 'p':
			if (nzb_num(optarg, 0, 1, &v))
				goto bad;
			break;
		case 'u': {
			uint64_t u;

			if (nzb_parse_size(optarg, &u) || (u && (u < NZ_MIN_UNIT || u > NZ_MAX_UNIT)))
				goto bad;
			*unit = (unsigned int)u;
			break;
		}
		case 'b':
			if (nzb_parse_size(optarg, &p->min))
				goto bad;
			break;
		case 'e':
			if (nzb_parse_size(optarg, &p->max))
				goto bad;
			break;
		case 'i':
			if (nzb_parse_size(optarg, &p->step) || !p->step)
				goto bad;
			break;
		case 'd':
			if (nz_dtype_parse(optarg, &dt))
				goto bad;
			p->dtype = dt;
			break;
		case 'o':
			if (nz_redop_parse(optarg, &op))
				goto bad;
			p->op = op;
			break;
		case 'A':
			if (nz_coll_algo_parse(optarg, &algo))
				goto bad;
			p->algo = algo;
			break;
		case OPT_PLACE:
			p->place = !strcmp(optarg, "out") ? PLACE_OUT : !strcmp(optarg, "in") ?
				   PLACE_IN : !strcmp(optarg, "both") ? PLACE_BOTH : 0;
			if (!p->place)
				goto bad;
			break;
		case 'c':
			/* --check alone (as before nccl-tests took a count) is 1. */
			if (!optarg)
				p->check = 1;
			else if (nzb_num(optarg, 0, 1000, &p->check))
				goto bad;
			break;
		case 'f':
			if (nzb_num(optarg, 1, 1000000, &p->factor))
				goto bad;
			break;
		case 'n':
			if (nzb_num(optarg, 1, 1000000, &p->iters))
				goto bad;
			break;
		case 'w':
			if (nzb_num(optarg, 0, 1000000, &p->warmup))
				goto bad;
			break;
		case 'r':
			if (nzb_num(optarg, 0, 1000000, &p->root))
				goto bad;
			break;
		case 'm':
			if (nzb_num(optarg, 1, NZB_MAX_CONC, &p->conc))
				goto bad;
			break;
		case 'a':
			if (nzb_num(optarg, 0, 3, &p->average))
				goto bad;
			break;
		case 'z':
			if (nzb_num(optarg, 0, 1, &p->blocking))
				goto bad;
			break;
		case OPT_TIME_CAP:
			if (nzb_num(optarg, 0, 1000000, &p->stop_s))
				goto bad;
			break;
		case 'T':
			if (nzb_num(optarg, 1, 1000000, &v))
				goto bad;
			*wait_s = (int)v;
			break;
		case 'h':
			nzb_usage(argv[0]);
			return 1;
		default:
			goto bad;
		}
	}
	if (optind != argc || p->min > p->max)
		goto bad;
	return 0;
bad:
	nzb_usage(argv[0]);
	return -EINVAL;
}

static int nzb_setup(struct nzb_coll *b)
{
	struct nz_coll_tuning t;
	int ret, idx;

	if (b->p.root >= (uint32_t)b->size) {
		fprintf(stderr, "nezha-bench: root %u is not a rank (%d ranks)\n", b->p.root, b->size);
		return -EINVAL;
	}
	if (b->p.algo) {
		ret = nz_coll_get_tuning(b->comm, &t);
		t.algo[b->coll] = (unsigned char)b->p.algo;
		if (!ret)
			ret = nz_coll_set_tuning(b->comm, &t);
		if (ret) {
			fprintf(stderr, "nezha-bench: %s\n", nz_last_error());
			return ret;
		}
	}
	b->es = nz_dtype_size((enum nz_dtype)b->p.dtype);
	b->buflen = b->coll == NZ_COLL_BARRIER ? 64 : (size_t)b->p.max + 64;
	for (uint32_t k = 0; k < b->p.conc; k++) {
		b->sbuf[k] = aligned_alloc(4096, (b->buflen + 4095) & ~(size_t)4095);
		b->rbuf[k] = aligned_alloc(4096, (b->buflen + 4095) & ~(size_t)4095);
		if (!b->sbuf[k] || !b->rbuf[k])
			return -ENOMEM;
		memset(b->sbuf[k], 0, b->buflen);
		memset(b->rbuf[k], 0, b->buflen);
		/* Pinned once rather than at every transfer, when possible. */
		nz_comm_register_buffer(b->comm, b->sbuf[k], b->buflen, &idx);
		nz_comm_register_buffer(b->comm, b->rbuf[k], b->buflen, &idx);
	}
	return b->p.check && nzb_reduces(b->coll) ? nzb_expect(b) : 0;
}

/*
 * With an aggregation node ($NEZHA_AGG_NODE): a comment line with what the
 * last size's allreduces sent through it and how many were redone.
 */
static void nzb_agg_line(struct nzb_coll *b, struct nzi_coll_agg_stats *prev)
{
	struct nzi_coll_agg_stats st;
	uint64_t agg, ring;

	if (nzi_coll_agg_stats(b->comm, &st))
		return;
	agg = st.agg_bytes - prev->agg_bytes;
	ring = st.ring_bytes - prev->ring_bytes;
	printf("# agg: %llu allreduces split, %.1f %% of their bytes through the node, %llu redone, %llu probes of the rails alone%s%s\n",
	       (unsigned long long)(st.splits - prev->splits),
	       agg + ring ? 100.0 * (double)agg / (double)(agg + ring) : 0.0,
	       (unsigned long long)(st.redos - prev->redos),
	       (unsigned long long)(st.probes - prev->probes),
	       st.paused ? "; paused: splits were slower than the rails alone" : "",
	       st.off ? "; the node is off" : "");
	*prev = st;
}

int nzb_bench_coll(int argc, char **argv)
{
	struct nzb_coll b = { 0 };
	struct nzi_coll_agg_stats agg_prev = { 0 };
	uint64_t bad = 0;
	double sum_bw = 0;
	int wait_s = 120, nsizes = 0, ret;
	unsigned int unit = 0;

	for (int c = 0; c < NZ_COLL_COUNT; c++)
		if (!strcmp(argv[0], nz_coll_name((enum nz_coll)c)))
			b.coll = (enum nz_coll)c;
	ret = nzb_options(argc, argv, &b.p, &wait_s, &unit);
	if (ret)
		return ret > 0 ? 0 : ret;	/* -h: the usage was asked for */
	ret = nzb_init(&b.comm, unit);
	if (ret) {
		fprintf(stderr, "nezha-bench %s: %s\n", argv[0], nz_last_error());
		return ret;
	}
	b.rank = nz_comm_rank(b.comm);
	b.size = nz_comm_size(b.comm);
	nz_comm_set_wait_timeout(b.comm, wait_s * 1000);
	ret = nz_broadcast(b.comm, &b.p, &b.p, sizeof(b.p), NZ_UINT8, 0);
	if (ret) {
		nzb_fail(&b, "sharing the plan", sizeof(b.p), ret);
		goto out;
	}
	ret = nzb_setup(&b);
	if (ret)
		goto out;
	if (b.rank == 0)
		nzb_header(&b);
	nzi_coll_agg_stats(b.comm, &agg_prev);
	for (uint64_t s = b.p.min; s <= b.p.max;
	     s = b.p.factor > 1 ? (s ? s * b.p.factor : 1) : s + b.p.step) {
		size_t size = b.coll == NZ_COLL_BARRIER ? 0 : (size_t)s;
		double us[2] = { 0, 0 };
		uint64_t wrong[2] = { 0, 0 };

		/* A whole number of elements (per rank, where split). */
		size = nzb_count(&b, size) * b.es *
		       (b.coll == NZ_COLL_ALLREDUCE || nzb_rooted(b.coll) ? 1 : (size_t)b.size);
		for (int k = 0; k < 2 && !ret; k++)
			if (b.p.place & (1 << k))
				ret = nzb_measure(&b, size, k == 1, &us[k], &wrong[k]);
		if (ret)
			break;
		if (b.rank == 0) {
			nzb_row_start(&b, size);
			for (int k = 0; k < 2; k++)
				if (b.p.place & (1 << k))
					nzb_cell(&b, size, us[k], wrong[k]);
			printf("  %s\n", nz_coll_algo_name(nz_coll_select(b.comm, b.coll, size)));
			nzb_agg_line(&b, &agg_prev);
			fflush(stdout);
			sum_bw += us[(b.p.place & PLACE_OUT) ? 0 : 1] > 0 ?
				  (double)size / us[(b.p.place & PLACE_OUT) ? 0 : 1] / 1e3 *
				  nzb_busbw_factor(b.coll, b.size) : 0;
			nsizes++;
		}
		bad += wrong[0] + wrong[1];
		if (b.coll == NZ_COLL_BARRIER)
			break;
	}
	if (b.rank == 0 && !ret) {
		printf("# Out of bounds values : %llu %s\n", (unsigned long long)bad,
		       bad ? "FAILED" : "OK");
		printf("# Avg bus bandwidth    : %.6f GB/s\n#\n", nsizes ? sum_bw / nsizes : 0);
	}
	if (!ret && bad)
		ret = -EBADMSG;
out:
	nz_comm_destroy(b.comm);
	for (int k = 0; k < NZB_MAX_CONC; k++) {
		free(b.sbuf[k]);
		free(b.rbuf[k]);
	}
	free(b.want);
	free(b.want_f);
	free(b.tol);
	return ret;
}
