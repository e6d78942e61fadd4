// SPDX-License-Identifier: GPL-2.0
/*
 * nezha-bench -c: the data check of the collectives must accept every
 * correct result -- whatever order the algorithm added the ranks'
 * contributions in, in the element type -- and reject a wrong one, for
 * every dtype and rank count.  The reductions here are libnezha's own
 * (nz_reduce2, nz_reduce_finish_avg) in three orders: rank 0 first, the
 * last rank first, and a pairwise tree (what rd/hd/ring/tree do).
 */
#include <math.h>
#include "tap.h"
#include "../../tools/bench_coll.c"

double nzb_now(void)
{
	return 0;
}

enum { FORWARD, BACKWARD, TREE, NORDERS };

/* acc = the reduction of the ranks' buffers in one order. */
static void reduce_order(const struct nzb_coll *b, unsigned char **in, unsigned char *acc,
			 int order)
{
	size_t len = NZB_PERIOD * b->es;
	int n = b->size;
	enum nz_dtype t = (enum nz_dtype)b->p.dtype;
	enum nz_redop op = (enum nz_redop)b->p.op == NZ_AVG ? NZ_SUM : (enum nz_redop)b->p.op;

	if (order == TREE) {
		unsigned char *tmp[1024] = { 0 };

		for (int r = 0; r < n; r++) {
			tmp[r] = malloc(len);
			memcpy(tmp[r], in[r], len);
		}
		for (int step = 1; step < n; step *= 2)
			for (int r = 0; r + step < n; r += 2 * step)
				nz_reduce2(tmp[r], tmp[r + step], NZB_PERIOD, t, op);
		memcpy(acc, tmp[0], len);
		for (int r = 0; r < n; r++)
			free(tmp[r]);
	} else {
		memcpy(acc, in[order == FORWARD ? 0 : n - 1], len);
		for (int i = 1; i < n; i++)
			nz_reduce2(acc, in[order == FORWARD ? i : n - 1 - i], NZB_PERIOD, t, op);
	}
	if ((enum nz_redop)b->p.op == NZ_AVG)
		nz_reduce_finish_avg(acc, NZB_PERIOD, t, (unsigned int)n);
}

static void one_case(enum nz_dtype t, enum nz_redop op, int n)
{
	struct nzb_coll b = { 0 };
	unsigned char *in[1024], *acc;
	uint64_t wrong[NORDERS];
	double maxerr = 0;
	size_t kbad = 0;

	b.coll = NZ_COLL_ALLREDUCE;
	b.size = n;
	b.p.dtype = t;
	b.p.op = op;
	b.p.check = 1;
	b.es = nz_dtype_size(t);
	if (nzb_expect(&b)) {
		tap_ok(0, "%s %s %d ranks: expected values", nz_dtype_name(t), nz_redop_name(op), n);
		return;
	}
	for (int r = 0; r < n; r++) {
		in[r] = malloc(NZB_PERIOD * b.es);
		b.rank = r;
		nzb_fill(&b, in[r], NZB_PERIOD);
	}
	b.rank = 0;
	acc = malloc(NZB_PERIOD * b.es);
	for (int o = 0; o < NORDERS; o++) {
		reduce_order(&b, in, acc, o);
		wrong[o] = nzb_wrong(&b, acc, NZB_PERIOD);
		for (size_t k = 0; b.want_f && k < NZB_PERIOD; k++) {
			double e = fabs(nzb_getd(acc + k * b.es, t) - b.want_f[k]);

			if (e > maxerr)
				maxerr = e;
		}
	}
	tap_ok(!wrong[0] && !wrong[1] && !wrong[2],
	       "%s %s %d ranks: every order of additions passes (wrong %llu %llu %llu, largest error %.3g)",
	       nz_dtype_name(t), nz_redop_name(op), n, (unsigned long long)wrong[0],
	       (unsigned long long)wrong[1], (unsigned long long)wrong[2], maxerr);

	/* One element off by more than its tolerance (or by one, if exact). */
	reduce_order(&b, in, acc, FORWARD);
	for (size_t k = 0; k < NZB_PERIOD; k++)
		if (b.want_f ? b.tol[k] > 0 : 1) {
			kbad = k;
			break;
		}
	if (b.want_f) {
		nzb_putd(acc + kbad * b.es, t, b.want_f[kbad] + 4 * b.tol[kbad] + 1);
	} else {
		acc[kbad * b.es] ^= 1;
	}
	tap_ok(nzb_wrong(&b, acc, NZB_PERIOD) == 1, "%s %s %d ranks: one wrong element is counted",
	       nz_dtype_name(t), nz_redop_name(op), n);
	for (int r = 0; r < n; r++)
		free(in[r]);
	free(acc);
	free(b.want);
	free(b.want_f);
	free(b.tol);
}

int main(void)
{
	static const enum nz_dtype fl[] = { NZ_FLOAT16, NZ_BFLOAT16, NZ_FLOAT32, NZ_FLOAT64 };
	static const enum nz_dtype in[] = { NZ_INT8, NZ_UINT8, NZ_INT32, NZ_INT64, NZ_UINT64 };
	static const int ranks[] = { 2, 3, 8, 64, 512 };
	struct nzb_plan p;
	unsigned int unit = 0;
	int wait_s = 0;
	char *argv1[] = { "allreduce", NULL };
	char *argv2[] = { "allreduce", "-t", "2", NULL };
	char *argv3[] = { "allreduce", "-b", "8", "-e", "1M", "-f", "2", "-c", "0", "-z", "1",
			  "-a", "3", "-m", "4", "-g", "1", "-p", "1", NULL };
	char *argv4[] = { "allreduce", "-N", "2", NULL };
	char *argv5[] = { "allreduce", "--check", NULL };

	tap_plan(2 * (4 * 2 * 5 + 5 * 2 * 2) + 8);
	for (size_t d = 0; d < 4; d++)
		for (int op = 0; op < 2; op++)
			for (size_t n = 0; n < 5; n++)
				one_case(fl[d], op ? NZ_AVG : NZ_SUM, ranks[n]);
	for (size_t d = 0; d < 5; d++)
		for (int op = 0; op < 2; op++)
			for (size_t n = 0; n < 2; n++)
				one_case(in[d], op ? NZ_MAX : NZ_SUM, ranks[n + 1]);

	/* nccl-tests' command lines. */
	tap_ok(!nzb_options(1, argv1, &p, &wait_s, &unit) && p.min == 32 << 20 &&
	       p.max == 32 << 20 && p.step == 1 << 20 && p.iters == 20 && p.warmup == 5 &&
	       p.check == 1 && p.average == AVG_MEAN && !p.blocking && p.conc == 1,
	       "defaults are nccl-tests': -b 32M -e 32M -i 1M -n 20 -w 5 -c 1 -a 1 -z 0 -m 1");
	fflush(stdout);
	{
		FILE *err = freopen("/dev/null", "w", stderr);

		tap_ok(nzb_options(3, argv2, &p, &wait_s, &unit) == -EINVAL,
		       "-t 2 (threads per process) is refused");
		tap_ok(nzb_options(3, argv4, &p, &wait_s, &unit) == -EINVAL,
		       "-N is not nezha-bench's concurrency any more (nccl-tests has -m)");
		(void)err;
	}
	tap_ok(!nzb_options(19, argv3, &p, &wait_s, &unit) && p.min == 8 && p.max == 1 << 20 &&
	       p.factor == 2 && p.check == 0 && p.blocking == 1 && p.average == AVG_MAX &&
	       p.conc == 4, "-b 8 -e 1M -f 2 -c 0 -z 1 -a 3 -m 4 -g 1 -p 1 are taken as nccl-tests' ");
	tap_ok(!nzb_options(2, argv5, &p, &wait_s, &unit) && p.check == 1,
	       "--check alone is -c 1");
	{
		struct nzb_coll b = { .size = 8, .p = { .dtype = NZ_FLOAT32, .op = NZ_SUM } };

		tap_ok(nzb_tolerance(&b, 1.0) == 8 * ldexp(1, -24),
		       "float32 sum of 8 ranks: tolerance 8 u S");
		b.size = 64;
		tap_ok(nzb_tolerance(&b, 1.0) == 64 * ldexp(1, -24),
		       "the tolerance grows with the rank count");
		b.p.op = NZ_AVG;
		tap_ok(fabs(nzb_tolerance(&b, 64.0) - 64 * ldexp(1, -24) * (1 + ldexp(1, -24))) < 1e-15,
		       "an average's tolerance is its sum's over n (and one rounding)");
		b.p.dtype = NZ_FLOAT16;
		b.p.op = NZ_SUM;
		b.size = 2;
		tap_ok(nzb_tolerance(&b, 1.0) == 2 * ldexp(1, -11), "float16: u = 2^-11");
	}
	return tap_failed ? 1 : 0;
}
