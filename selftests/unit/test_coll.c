// SPDX-License-Identifier: GPL-2.0
/*
 * Host unit tests of libnezha's collectives, without the module: N ranks
 * run as threads of this process, each with a communicator whose
 * collectives go through an in-process transport (the seam of coll.h)
 * that behaves like the module's point to point: eager sends, receives
 * matched in order per (peer, tag), -EMSGSIZE for a message longer than
 * the buffer, -ECONNRESET once a peer has left, -ETIMEDOUT after the
 * transfer timeout.  Completions are reported out of order on purpose.
 *
 * Every collective and algorithm runs on 1, 2, 3, 4, 5, 7 and 8 ranks,
 * sizes 0, 1, odd, prime and a few MiB, in place and out of place, over
 * rotating dtype x operator pairs, and each rank compares its result with
 * a straightforward reference computed element by element.  Then: every
 * dtype x operator; non-blocking collectives in flight together; the
 * error cases (arguments that differ between ranks, a rank that leaves,
 * a rank that never comes, invalid arguments) must fail, never hang.
 *
 * NZ_TEST_QUICK=1 skips the multi-MiB sizes; NZ_TEST_ONLY=errors (or
 * basic, matrix, types, nonblocking; comma separated) runs those groups.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "coll.h"
#include "tap.h"
#include "tw_xport.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#include "test_coll_ref.h"

/* ------------------------------------------------------------------ */
/* Running ranks                                                       */

struct tcase {
	enum nz_coll coll;
	enum nz_coll_algo algo;
	enum nz_dtype dt;
	enum nz_redop op;
	size_t count;
	int n, root, inplace;
	size_t segment, small_segment;
	unsigned int window;
	int check;		/* agreement round */
	int timeout_ms;		/* transport's transfer timeout */
	int wait_timeout_ms;	/* communicator's */
	/* per-rank deviations, for the error tests */
	size_t count_of[MAXR];	/* 0: count */
	int dt_of[MAXR], op_of[MAXR], root_of[MAXR], algo_of[MAXR];	/* -1: same */
	int leave;		/* rank that leaves before the collective, -1 */
	int absent;		/* rank that never calls it, -1 */
	int absent_ms;		/* how long it stays silent; 0: timeout_ms + 500 */
	int leave_during;	/* rank that leaves right after starting it, -1 */
	int poll;		/* start it non-blocking, then nz_coll_test() */
};

struct rank_run {
	const struct tcase *tc;
	const unsigned char *expect;	/* reductions: the reduced vector */
	unsigned char *const *in;	/* every rank's send vector */
	struct tw_world *w;
	struct tw_ctx ctx;
	int rank;
	int ret;		/* the collective's */
	long wrong;		/* elements that differ from the reference */
	int64_t ms;		/* in the collective */
	char why[320];
};

static size_t case_count(const struct tcase *tc, int r)
{
	return tc->count_of[r] ? tc->count_of[r] : tc->count;
}

static int call_coll(struct nz_comm *c, enum nz_coll coll, const void *sb, void *rb,
		     size_t count, enum nz_dtype dt, enum nz_redop op, int root)
{
	switch (coll) {
	case NZ_COLL_ALLREDUCE: return nz_allreduce(c, sb, rb, count, dt, op);
	case NZ_COLL_BROADCAST: return nz_broadcast(c, sb, rb, count, dt, root);
	case NZ_COLL_REDUCE: return nz_reduce(c, sb, rb, count, dt, op, root);
	case NZ_COLL_ALLGATHER: return nz_allgather(c, sb, rb, count, dt);
	case NZ_COLL_REDUCE_SCATTER: return nz_reduce_scatter(c, sb, rb, count, dt, op);
	case NZ_COLL_ALLTOALL: return nz_alltoall(c, sb, rb, count, dt);
	default: return nz_barrier(c);
	}
}

static int icall_coll(struct nz_comm *c, enum nz_coll coll, const void *sb, void *rb,
		      size_t count, enum nz_dtype dt, enum nz_redop op, int root,
		      struct nz_coll_request **req)
{
	switch (coll) {
	case NZ_COLL_ALLREDUCE: return nz_iallreduce(c, sb, rb, count, dt, op, req);
	case NZ_COLL_BROADCAST: return nz_ibroadcast(c, sb, rb, count, dt, root, req);
	case NZ_COLL_REDUCE: return nz_ireduce(c, sb, rb, count, dt, op, root, req);
	case NZ_COLL_ALLGATHER: return nz_iallgather(c, sb, rb, count, dt, req);
	case NZ_COLL_REDUCE_SCATTER: return nz_ireduce_scatter(c, sb, rb, count, dt, op, req);
	case NZ_COLL_ALLTOALL: return nz_ialltoall(c, sb, rb, count, dt, req);
	default: return nz_ibarrier(c, req);
	}
}

/* Buffers of one rank for one collective, filled, and their check. */
struct rbufs {
	unsigned char *snd, *rcv;	/* what the call gets */
	unsigned char *mem1, *mem2;	/* what to free */
	size_t rcount;			/* elements of rcv to check */
};

static int is_reduction(enum nz_coll c)
{
	return c == NZ_COLL_ALLREDUCE || c == NZ_COLL_REDUCE || c == NZ_COLL_REDUCE_SCATTER;
}

/* Elements of the send (*sn) and receive (*rn) vectors of a rank. */
static void vec_len(enum nz_coll coll, int n, size_t count, size_t *sn, size_t *rn)
{
	*sn = *rn = count;
	if (coll == NZ_COLL_ALLGATHER)
		*rn = (size_t)n * count;
	else if (coll == NZ_COLL_REDUCE_SCATTER)
		*sn = (size_t)n * count;
	else if (coll == NZ_COLL_ALLTOALL)
		*sn = *rn = (size_t)n * count;
}

static int setup_bufs(const struct tcase *tc, int r, size_t count, enum nz_dtype dt,
		      const unsigned char *input, int root, struct rbufs *b)
{
	size_t es = nz_dtype_size(dt), sn, rn;

	memset(b, 0, sizeof(*b));
	vec_len(tc->coll, tc->n, count, &sn, &rn);
	b->mem1 = malloc(sn * es + 64);
	b->mem2 = malloc(rn * es + 64);
	if (!b->mem1 || !b->mem2)
		return -ENOMEM;
	memset(b->mem2, 0xa5, rn * es);
	memcpy(b->mem1, input, sn * es);
	b->snd = b->mem1;
	b->rcv = b->mem2;
	b->rcount = rn;
	if ((tc->coll == NZ_COLL_REDUCE && r != root) || tc->coll == NZ_COLL_BARRIER)
		b->rcount = 0;
	if (!tc->inplace)
		return 0;
	switch (tc->coll) {
	case NZ_COLL_ALLGATHER:		/* own block in place */
		memcpy(b->mem2 + (size_t)r * count * es, b->mem1, count * es);
		b->snd = b->mem2 + (size_t)r * count * es;
		break;
	case NZ_COLL_REDUCE_SCATTER:
		b->rcv = b->mem1 + (size_t)r * count * es;
		break;
	case NZ_COLL_BROADCAST:
		if (r == root)
			memcpy(b->mem2, b->mem1, count * es);
		b->snd = b->mem2;
		break;
	default:
		b->rcv = b->mem1;
		break;
	}
	return 0;
}

/* Elements of rank r's result that differ from the reference. */
static long check_bufs(const struct tcase *tc, int r, const struct rbufs *b, int root,
		       const unsigned char *expect, unsigned char *const *in)
{
	size_t es = nz_dtype_size(tc->dt), count = tc->count;
	long wrong = 0;

	if (is_reduction(tc->coll)) {
		const unsigned char *e;

		if (!expect)		/* arguments differ: nothing to compare */
			return 0;
		e = expect + (tc->coll == NZ_COLL_REDUCE_SCATTER ? (size_t)r * count * es : 0);
		if (!memcmp(e, b->rcv, b->rcount * es))
			return 0;
		for (size_t i = 0; i < b->rcount; i++)
			wrong += memcmp(e + i * es, b->rcv + i * es, es) != 0;
		return wrong;
	}
	for (size_t i = 0; i < b->rcount; i++) {
		const unsigned char *w;

		switch (tc->coll) {
		case NZ_COLL_BROADCAST:
			w = in[root] + i * es;
			break;
		case NZ_COLL_ALLGATHER:
			w = in[i / count] + (i % count) * es;
			break;
		case NZ_COLL_ALLTOALL:
			w = in[i / count] + ((size_t)r * count + i % count) * es;
			break;
		default:
			w = b->rcv + i * es;
			break;
		}
		if (i % count == 0 && count > 1 && b->rcount - i >= count &&
		    !memcmp(w, b->rcv + i * es, count * es)) {	/* a whole block */
			i += count - 1;
			continue;
		}
		wrong += memcmp(w, b->rcv + i * es, es) != 0;
	}
	return wrong;
}

static void *rank_main(void *arg)
{
	struct rank_run *rr = arg;
	const struct tcase *tc = rr->tc;
	int r = rr->rank;
	enum nz_dtype dt = tc->dt_of[r] >= 0 ? (enum nz_dtype)tc->dt_of[r] : tc->dt;
	enum nz_redop op = tc->op_of[r] >= 0 ? (enum nz_redop)tc->op_of[r] : tc->op;
	int root = tc->root_of[r] >= 0 ? tc->root_of[r] : tc->root;
	size_t count = case_count(tc, r);
	struct nz_coll_tuning tune;
	struct nz_comm *c = NULL;
	struct rbufs b = { 0 };
	int ret;

	rr->ctx.w = rr->w;
	rr->ctx.rank = r;
	ret = nzi_coll_comm_new(&c, r, tc->n, &tw_xport, &rr->ctx);
	if (!ret)
		ret = nz_coll_get_tuning(c, &tune);
	if (ret) {
		snprintf(rr->why, sizeof(rr->why), "rank %d: set-up: %s", r, strerror(-ret));
		rr->ret = ret;
		goto out;
	}
	memset(tune.algo, NZ_ALGO_AUTO, sizeof(tune.algo));
	tune.algo[tc->coll] = (unsigned char)(tc->algo_of[r] >= 0 ? tc->algo_of[r] : (int)tc->algo);
	if (tc->segment)
		tune.segment = tc->segment;
	if (tc->small_segment)
		tune.small_segment = tc->small_segment;
	if (tc->window)
		tune.window = tc->window;
	tune.check = tc->check;
	ret = nz_coll_set_tuning(c, &tune);
	if (ret) {
		snprintf(rr->why, sizeof(rr->why), "rank %d: tuning: %s", r, nz_last_error());
		rr->ret = ret;
		goto out;
	}
	nz_comm_set_wait_timeout(c, tc->wait_timeout_ms);
	if (setup_bufs(tc, r, count, dt, rr->in[r], root, &b)) {
		rr->ret = -ENOMEM;
		goto out;
	}
	if (r == tc->leave || r == tc->absent) {
		if (r == tc->absent)	/* alive but silent */
			usleep(1000 * (useconds_t)(tc->absent_ms ? tc->absent_ms :
						   tc->timeout_ms + 500));
		rr->ret = 0;
		goto out;
	}
	if (r == tc->leave_during) {
		struct nz_coll_request *req;

		rr->ret = icall_coll(c, tc->coll, b.snd, b.rcv, count, dt, op, root, &req);
		goto out;	/* destroy with it in flight, then leave */
	}
	rr->ms = now_ms();
	if (tc->poll) {
		struct nz_coll_request *req;

		rr->ret = icall_coll(c, tc->coll, b.snd, b.rcv, count, dt, op, root, &req);
		if (!rr->ret)
			while ((rr->ret = nz_coll_test(req)) == -EAGAIN)
				usleep(500);
	} else {
		rr->ret = call_coll(c, tc->coll, b.snd, b.rcv, count, dt, op, root);
	}
	rr->ms = now_ms() - rr->ms;
	if (rr->ret)
		snprintf(rr->why, sizeof(rr->why), "rank %d: %s", r, nz_last_error());
	else
		rr->wrong = check_bufs(tc, r, &b, root, rr->expect, rr->in);
out:
	if (r == tc->leave || r == tc->leave_during)
		tw_kill(rr->w, r);
	nz_comm_destroy(c);
	free(b.mem1);
	free(b.mem2);
	return NULL;
}

struct outcome {
	int ret[MAXR];
	long wrong;
	char why[320];
	int64_t ms;
	int64_t call_ms;	/* the longest time a rank spent in it */
	unsigned long msgs;	/* sent by all ranks */
	unsigned long cancelled;	/* receives the engine cancelled */
};

/* Every rank has the same arguments: the results can be checked. */
static int uniform(const struct tcase *tc)
{
	for (int r = 0; r < tc->n; r++)
		if (tc->count_of[r] || tc->dt_of[r] >= 0 || tc->op_of[r] >= 0 ||
		    tc->root_of[r] >= 0 || tc->algo_of[r] >= 0)
			return 0;
	return 1;
}

static void run_case(const struct tcase *tc, struct outcome *o)
{
	struct rank_run rr[MAXR];
	pthread_t th[MAXR];
	struct tw_world w;
	int64_t t0 = now_ms();

	unsigned char *expect = NULL, *in[MAXR] = { 0 };

	memset(o, 0, sizeof(*o));
	/* Every rank's input, with its own arguments, and the reference. */
	for (int r = 0; r < tc->n; r++) {
		enum nz_dtype dt = tc->dt_of[r] >= 0 ? (enum nz_dtype)tc->dt_of[r] : tc->dt;
		int op = tc->op_of[r] >= 0 ? tc->op_of[r] : (int)tc->op;
		size_t es = nz_dtype_size(dt), sn, rn;

		vec_len(tc->coll, tc->n, case_count(tc, r), &sn, &rn);
		in[r] = malloc(sn * es + 8);
		if (!in[r])
			goto oom;
		for (size_t i = 0; i < sn; i++)
			gen(in[r] + i * es, dt, is_reduction(tc->coll) ? op : -1, r, i);
	}
	if (is_reduction(tc->coll) && uniform(tc)) {
		size_t es = nz_dtype_size(tc->dt), sn, rn;

		vec_len(tc->coll, tc->n, tc->count, &sn, &rn);
		expect = malloc(sn * es + 8);
		if (!expect)
			goto oom;
		for (size_t i = 0; i < sn; i++)
			ref(expect + i * es, tc->dt, tc->op, tc->n, i, in);
	}
	tw_init(&w, tc->n, tc->timeout_ms ? tc->timeout_ms : 10000);
	for (int r = 0; r < tc->n; r++) {
		memset(&rr[r], 0, sizeof(rr[r]));
		rr[r].tc = tc;
		rr[r].expect = expect;
		rr[r].in = in;
		rr[r].w = &w;
		rr[r].rank = r;
		if (pthread_create(&th[r], NULL, rank_main, &rr[r])) {
			o->ret[r] = -EAGAIN;
			th[r] = 0;
		}
	}
	for (int r = 0; r < tc->n; r++) {
		if (th[r])
			pthread_join(th[r], NULL);
		o->ret[r] = rr[r].ret;
		o->wrong += rr[r].wrong;
		if (rr[r].ms > o->call_ms)
			o->call_ms = rr[r].ms;
		if (!o->why[0] && (rr[r].ret || rr[r].wrong)) {
			if (rr[r].wrong)
				snprintf(o->why, sizeof(o->why), "rank %d: %ld wrong elements", r,
					 rr[r].wrong);
			else
				snprintf(o->why, sizeof(o->why), "%s", rr[r].why);
		}
	}
	o->msgs = w.msgs;
	o->cancelled = w.cancelled;
	tw_destroy(&w);
	o->ms = now_ms() - t0;
	goto out;
oom:
	snprintf(o->why, sizeof(o->why), "out of memory");
	o->ret[0] = -ENOMEM;
out:
	free(expect);
	for (int r = 0; r < tc->n; r++)
		free(in[r]);
}

static void case_init(struct tcase *tc, enum nz_coll coll, enum nz_coll_algo algo, int n)
{
	memset(tc, 0, sizeof(*tc));
	tc->coll = coll;
	tc->algo = algo;
	tc->n = n;
	tc->dt = NZ_FLOAT32;
	tc->op = NZ_SUM;
	tc->leave = tc->absent = tc->leave_during = -1;
	for (int r = 0; r < MAXR; r++)
		tc->dt_of[r] = tc->op_of[r] = tc->root_of[r] = tc->algo_of[r] = -1;
}

static int all_ok(const struct tcase *tc, const struct outcome *o)
{
	for (int r = 0; r < tc->n; r++)
		if (o->ret[r])
			return 0;
	return !o->wrong;
}

/* ------------------------------------------------------------------ */
/* The matrix                                                          */

static const struct { enum nz_dtype dt; enum nz_redop op; } combos[] = {
	{ NZ_FLOAT32, NZ_SUM }, { NZ_INT8, NZ_SUM }, { NZ_FLOAT16, NZ_AVG },
	{ NZ_BFLOAT16, NZ_PROD }, { NZ_UINT64, NZ_MAX }, { NZ_INT32, NZ_MIN },
	{ NZ_FLOAT64, NZ_AVG }, { NZ_UINT8, NZ_PROD }, { NZ_INT64, NZ_AVG },
	{ NZ_UINT32, NZ_SUM }, { NZ_FLOAT32, NZ_MAX }, { NZ_BFLOAT16, NZ_SUM },
};

static const int nranks[] = { 1, 2, 3, 4, 5, 7, 8 };

static void matrix(enum nz_coll coll, enum nz_coll_algo algo, int quick)
{
	static unsigned int rot;
	/* 0, 1, odd, prime; pipelined algorithms in 4 KiB segments. */
	static const size_t sizes[] = { 0, 1, 37, 1009 };

	for (size_t k = 0; k < ARRAY_SIZE(nranks); k++) {
		int n = nranks[k], cases = 0, bad = 0;
		int64_t ms = 0;
		char why[400] = "";

		for (size_t si = 0; si <= ARRAY_SIZE(sizes); si++) {
			for (int inplace = 0; inplace < 2; inplace++) {
				struct tcase tc;
				struct outcome o;
				size_t count;

				case_init(&tc, coll, algo, n);
				tc.inplace = inplace;
				tc.dt = combos[rot % ARRAY_SIZE(combos)].dt;
				tc.op = combos[rot % ARRAY_SIZE(combos)].op;
				rot++;
				tc.root = (int)((si + (size_t)inplace) % (size_t)n);
				if (si < ARRAY_SIZE(sizes)) {
					count = sizes[si];
					tc.segment = 4096;
					tc.small_segment = 1024;	/* rd in pieces */
					tc.window = 3;
				} else {	/* a few MiB in all */
					if (quick || (n != 2 && n != 5 && n != 8))
						continue;
					tc.dt = inplace ? NZ_INT32 : NZ_FLOAT32;
					tc.op = inplace ? NZ_MAX : NZ_SUM;
					count = (coll == NZ_COLL_ALLREDUCE || coll == NZ_COLL_BROADCAST ||
						 coll == NZ_COLL_REDUCE) ? 786433 : 786433 / (size_t)n;
					tc.segment = 256 << 10;
				}
				tc.count = count;
				run_case(&tc, &o);
				cases++;
				ms += o.ms;
				if (!all_ok(&tc, &o)) {
					bad++;
					if (!why[0])
						snprintf(why, sizeof(why), "count %zu %s %s/%s root %d: %s",
							 count, inplace ? "in place" : "out of place",
							 nz_dtype_name(tc.dt), nz_redop_name(tc.op),
							 tc.root, o.why);
				}
			}
		}
		tap_ok(!bad, "%s/%s on %d rank%s: %d cases (sizes 0 1 37 1009%s, in and out of place, %lld ms)%s%s",
		       nz_coll_name(coll), nz_coll_algo_name(algo), n, n > 1 ? "s" : "",
		       cases, quick || (n != 2 && n != 5 && n != 8) ? "" : " 3 MiB",
		       (long long)ms, bad ? ": " : "", why);
	}
}

/* Every dtype x operator, allreduce and reduce_scatter, 5 ranks, odd count. */
static void test_all_types(void)
{
	static const enum nz_coll colls[] = { NZ_COLL_ALLREDUCE, NZ_COLL_REDUCE_SCATTER };
	static const enum nz_coll_algo algos[] = { NZ_ALGO_RD, NZ_ALGO_RING };

	for (size_t c = 0; c < ARRAY_SIZE(colls); c++) {
		for (size_t a = 0; a < ARRAY_SIZE(algos); a++) {
			int cases = 0, bad = 0;
			char why[400] = "";

			for (int t = 0; t < NZ_DTYPE_COUNT; t++) {
				for (int op = 0; op < NZ_REDOP_COUNT; op++) {
					struct tcase tc;
					struct outcome o;

					case_init(&tc, colls[c], colls[c] == NZ_COLL_ALLREDUCE ? algos[a] :
						  (a ? NZ_ALGO_RING : NZ_ALGO_DIRECT), 5);
					tc.dt = (enum nz_dtype)t;
					tc.op = (enum nz_redop)op;
					tc.count = 101;
					tc.segment = 4096;
					run_case(&tc, &o);
					cases++;
					if (!all_ok(&tc, &o)) {
						bad++;
						if (!why[0])
							snprintf(why, sizeof(why), ": %s/%s: %s",
								 nz_dtype_name(tc.dt), nz_redop_name(tc.op),
								 o.why);
					}
				}
			}
			tap_ok(!bad, "%s/%s, 5 ranks: every dtype x operator (%d cases)%s",
			       nz_coll_name(colls[c]),
			       colls[c] == NZ_COLL_ALLREDUCE ? nz_coll_algo_name(algos[a]) :
			       (a ? "ring" : "direct"), cases, why);
		}
	}
}

/* ------------------------------------------------------------------ */
/* Non-blocking                                                        */

struct nb_run {
	struct tw_world *w;
	struct tw_ctx ctx;
	int rank, n, ok;
	char why[200];
};

/*
 * Four collectives in flight at once (allreduce rd and ring, allgather,
 * barrier), advanced by nz_coll_test() between slices of "compute", then
 * waited for in reverse order.
 */
static void *nb_main(void *arg)
{
	enum { C1 = 1001, C2 = 300000, C3 = 77 };
	struct nb_run *nr = arg;
	int r = nr->rank, n = nr->n, ret = 0, polls = 0;
	struct nz_coll_request *req[4] = { 0 };
	float *a = malloc(C1 * 4), *b = malloc(C2 * 4);
	int32_t *g = malloc(C3 * 4), *gall = malloc((size_t)n * C3 * 4);
	struct nz_coll_tuning t;
	struct nz_comm *c = NULL;
	unsigned char want[8];

	nr->ctx.w = nr->w;
	nr->ctx.rank = r;
	nr->ok = 0;
	if (!a || !b || !g || !gall || nzi_coll_comm_new(&c, r, n, &tw_xport, &nr->ctx))
		goto out;
	nz_coll_get_tuning(c, &t);
	t.segment = 16384;
	nz_coll_set_tuning(c, &t);
	for (size_t i = 0; i < C1; i++)
		gen(&a[i], NZ_FLOAT32, NZ_SUM, r, i);
	for (size_t i = 0; i < C2; i++)
		gen(&b[i], NZ_FLOAT32, NZ_SUM, r, i);
	for (size_t i = 0; i < C3; i++)
		gen(&g[i], NZ_INT32, -1, r, i);
	ret = nz_iallreduce(c, a, a, C1, NZ_FLOAT32, NZ_SUM, &req[0]);
	if (!ret)
		ret = nz_iallreduce(c, b, b, C2, NZ_FLOAT32, NZ_SUM, &req[1]);
	if (!ret)
		ret = nz_iallgather(c, g, gall, C3, NZ_INT32, &req[2]);
	if (!ret)
		ret = nz_ibarrier(c, &req[3]);
	if (ret) {
		snprintf(nr->why, sizeof(nr->why), "start: %s", nz_last_error());
		goto out;
	}
	/* "Compute" while they run; nz_coll_progress() keeps them moving. */
	while (nz_coll_progress(c) > 0 && polls < 100000) {
		volatile double x = 0;

		for (int i = 0; i < 1000; i++)
			x += i;
		polls++;
	}
	for (int k = 3; k >= 0; k--) {
		ret = nz_coll_wait(req[k]);
		req[k] = NULL;
		if (ret) {
			snprintf(nr->why, sizeof(nr->why), "wait %d: %s", k, nz_last_error());
			goto out;
		}
	}
	for (size_t i = 0; i < C1; i++) {
		ref(want, NZ_FLOAT32, NZ_SUM, n, i, NULL);
		if (memcmp(want, &a[i], 4))
			goto wrong;
	}
	for (size_t i = 0; i < C2; i++) {
		ref(want, NZ_FLOAT32, NZ_SUM, n, i, NULL);
		if (memcmp(want, &b[i], 4))
			goto wrong;
	}
	for (size_t i = 0; i < (size_t)n * C3; i++) {
		gen(want, NZ_INT32, -1, (int)(i / C3), i % C3);
		if (memcmp(want, &gall[i], 4))
			goto wrong;
	}
	nr->ok = 1;
	goto out;
wrong:
	snprintf(nr->why, sizeof(nr->why), "rank %d: wrong result", r);
out:
	for (int k = 0; k < 4; k++)
		if (req[k])
			nz_coll_wait(req[k]);
	nz_comm_destroy(c);
	free(a);
	free(b);
	free(g);
	free(gall);
	return NULL;
}

static void test_nonblocking(void)
{
	for (int n = 2; n <= 7; n += 5) {
		struct nb_run nr[MAXR];
		pthread_t th[MAXR];
		struct tw_world w;
		int good = 0;
		const char *why = "";

		tw_init(&w, n, 10000);
		for (int r = 0; r < n; r++) {
			memset(&nr[r], 0, sizeof(nr[r]));
			nr[r].w = &w;
			nr[r].rank = r;
			nr[r].n = n;
			pthread_create(&th[r], NULL, nb_main, &nr[r]);
		}
		for (int r = 0; r < n; r++) {
			pthread_join(th[r], NULL);
			good += nr[r].ok;
			if (!nr[r].ok && !*why)
				why = nr[r].why;
		}
		tw_destroy(&w);
		tap_ok(good == n, "%d ranks: 4 non-blocking collectives in flight at once, progressed while computing, waited in reverse order%s%s",
		       n, *why ? ": " : "", why);
	}
}

/*
 * Acknowledgements that come late: a small collective's result does not
 * wait for the acks of the sends from its own buffers, so 100 allreduces
 * and barriers back to back take far less than 100 acks; the finished ones
 * linger until their acks come, and the communicator's destruction waits
 * for the last.
 */
struct linger_run {
	struct tw_world *w;
	struct tw_ctx ctx;
	int rank, n, ok;
};

static void *linger_main(void *arg)
{
	struct linger_run *lr = arg;
	struct nz_comm *c = NULL;
	unsigned char want[4];
	float x[33];
	int bad = 0;

	lr->ctx.w = lr->w;
	lr->ctx.rank = lr->rank;
	if (nzi_coll_comm_new(&c, lr->rank, lr->n, &tw_xport, &lr->ctx))
		return NULL;
	for (int it = 0; it < 100 && !bad; it++) {
		for (int i = 0; i < 33; i++)
			gen(&x[i], NZ_FLOAT32, NZ_SUM, lr->rank, (size_t)i + (size_t)it);
		if (nz_allreduce(c, x, x, 33, NZ_FLOAT32, NZ_SUM) || nz_barrier(c))
			bad++;
		for (int i = 0; i < 33 && !bad; i++) {
			ref(want, NZ_FLOAT32, NZ_SUM, lr->n, (size_t)i + (size_t)it, NULL);
			bad += memcmp(want, &x[i], 4) != 0;
		}
	}
	nz_comm_destroy(c);
	lr->ok = !bad;
	return NULL;
}

static void test_linger(void)
{
	struct linger_run lr[MAXR];
	pthread_t th[MAXR];
	struct tw_world w;
	int64_t t0 = now_ms(), ms;
	int good = 0;

	tw_init(&w, 5, 10000);
	w.ack_ms = 50;
	for (int r = 0; r < 5; r++) {
		lr[r] = (struct linger_run){ .w = &w, .rank = r, .n = 5 };
		pthread_create(&th[r], NULL, linger_main, &lr[r]);
	}
	for (int r = 0; r < 5; r++) {
		pthread_join(th[r], NULL);
		good += lr[r].ok;
	}
	ms = now_ms() - t0;
	tw_destroy(&w);
	tap_ok(good == 5 && ms < 2000,
	       "acks 50 ms late: 100 allreduces + 100 barriers on 5 ranks in %lld ms (not 10 s), results right",
	       (long long)ms);
}

/*
 * AVG of 16-bit floats must not overflow: 4 ranks x 20000 sum to 80000,
 * above float16's 65504, yet the average is 20000.  Every collective that
 * reduces, with each algorithm its size selects, float16 and bfloat16.
 */
struct avg16_run {
	struct tw_world *w;
	struct tw_ctx ctx;
	int rank, n, bad;
	enum nz_dtype dt;
	char why[160];
};

static void *avg16_main(void *arg)
{
	struct avg16_run *ar = arg;
	enum { N = 3000 };
	static const float vals[] = { 20000.0f, -20000.0f, 0.5f, 60000.0f };
	uint16_t snd[4 * N], rcv[4 * N];
	struct nz_comm *c = NULL;
	bool bf = ar->dt == NZ_BFLOAT16;

	ar->ctx.w = ar->w;
	ar->ctx.rank = ar->rank;
	if (nzi_coll_comm_new(&c, ar->rank, ar->n, &tw_xport, &ar->ctx)) {
		ar->bad = 1;
		return NULL;
	}
	for (size_t i = 0; i < 4 * N; i++) {
		float v = vals[i % 4];

		snd[i] = bf ? nz_f32_to_bf16(v) : nz_f32_to_f16(v);
	}
	for (int k = 0; k < 3 && !ar->bad; k++) {
		size_t counts[3] = { 4 * N, 4 * N, N };
		int ret;

		memset(rcv, 0xff, sizeof(rcv));
		ret = k == 0 ? nz_allreduce(c, snd, rcv, counts[k], ar->dt, NZ_AVG) :
		      k == 1 ? nz_reduce(c, snd, rcv, counts[k], ar->dt, NZ_AVG, 1) :
			       nz_reduce_scatter(c, snd, rcv, counts[k], ar->dt, NZ_AVG);
		if (ret) {
			snprintf(ar->why, sizeof(ar->why), "call %d: %s", k, nz_last_error());
			ar->bad = 1;
			break;
		}
		if (k == 1 && ar->rank != 1)
			continue;
		for (size_t i = 0; i < counts[k]; i++) {
			float got = bf ? nz_bf16_to_f32(rcv[i]) : nz_f16_to_f32(rcv[i]);
			size_t j = k == 2 ? (size_t)ar->rank * N + i : i;

			if (got != (bf ? nz_bf16_to_f32(snd[j]) : nz_f16_to_f32(snd[j]))) {
				snprintf(ar->why, sizeof(ar->why), "call %d: element %zu is %g, not %g",
					 k, i, (double)got, (double)vals[j % 4]);
				ar->bad = 1;
				break;
			}
		}
	}
	nz_comm_destroy(c);
	return NULL;
}

static void test_avg16(void)
{
	for (int t = 0; t < 2; t++) {
		struct avg16_run ar[4];
		pthread_t th[4];
		struct tw_world w;
		int bad = 0;
		const char *why = "";

		tw_init(&w, 4, 10000);
		for (int r = 0; r < 4; r++) {
			ar[r] = (struct avg16_run){ .w = &w, .rank = r, .n = 4,
						    .dt = t ? NZ_BFLOAT16 : NZ_FLOAT16 };
			pthread_create(&th[r], NULL, avg16_main, &ar[r]);
		}
		for (int r = 0; r < 4; r++) {
			pthread_join(th[r], NULL);
			if (ar[r].bad && !bad)
				why = ar[r].why;
			bad += ar[r].bad;
		}
		tap_ok(!bad, "%s AVG on 4 ranks of 20000, -20000, 0.5, 60000: allreduce, reduce and reduce_scatter give the inputs back, no inf %s",
		       t ? "bfloat16" : "float16", why);
		tw_destroy(&w);
	}
}

/*
 * How the ring cuts its blocks: into at least 4 segments while they stay
 * 64 KiB or more, else of the configured size (1 MiB).  Counted as the
 * messages both ranks of a 2-rank allreduce send: one header each, then a
 * segment per step (reduce-scatter, allgather) and segment.
 */
static void test_segments(void)
{
	static const struct { size_t bytes; unsigned long segs; } cases[] = {
		{ 1 << 20, 4 },		/* 512 KiB blocks: 4 x 128 KiB */
		{ 4 << 20, 4 },		/* 2 MiB blocks: 4 x 512 KiB */
		{ 16 << 20, 8 },	/* 8 MiB blocks: 8 x 1 MiB */
	};

	for (size_t k = 0; k < ARRAY_SIZE(cases); k++) {
		unsigned long want = 2 * (1 + 2 * cases[k].segs);
		struct outcome o;
		struct tcase tc;

		case_init(&tc, NZ_COLL_ALLREDUCE, NZ_ALGO_AUTO, 2);
		tc.count = cases[k].bytes / 4;
		tc.inplace = 1;
		run_case(&tc, &o);
		tap_ok(all_ok(&tc, &o) && o.msgs == want,
		       "2 ranks, %zu KiB allreduce: ring, %lu segments per block (%lu messages, want %lu), results right%s%s",
		       cases[k].bytes >> 10, cases[k].segs, o.msgs, want, o.why[0] ? ": " : "", o.why);
	}
}

/* ------------------------------------------------------------------ */
/* Errors                                                              */

/* "r0 r1 ...": every rank's result, for failure reports. */
static const char *rets(const struct tcase *tc, const struct outcome *o)
{
	static char buf[128];
	size_t at = 0;

	for (int r = 0; r < tc->n && at < sizeof(buf); r++)
		at += (size_t)snprintf(buf + at, sizeof(buf) - at, "%s%d", r ? " " : "", o->ret[r]);
	return buf;
}

static int count_fail(const struct tcase *tc, const struct outcome *o, int err, int skip)
{
	int k = 0;

	for (int r = 0; r < tc->n; r++)
		if (r != skip && (err ? o->ret[r] == err : o->ret[r] != 0))
			k++;
	return k;
}

static void test_mismatch(void)
{
	static const enum nz_coll_algo algos[] = { NZ_ALGO_RD, NZ_ALGO_HD, NZ_ALGO_RING };
	struct tcase tc;
	struct outcome o;

	/* A different count on one rank: every rank fails, -EPROTO where seen. */
	for (size_t a = 0; a < ARRAY_SIZE(algos); a++) {
		case_init(&tc, NZ_COLL_ALLREDUCE, algos[a], 5);
		tc.count = 1000;
		tc.count_of[2] = 1001;
		tc.segment = 4096;
		tc.timeout_ms = 5000;
		run_case(&tc, &o);
		tap_ok(count_fail(&tc, &o, 0, -1) == 5 && count_fail(&tc, &o, -EPROTO, -1) >= 1 &&
		       o.ms < 2500,
		       "allreduce/%s, 5 ranks, count 1001 on rank 2, 1000 elsewhere: all %d fail (%d with EPROTO) in %lld ms (%s)",
		       nz_coll_algo_name(algos[a]), count_fail(&tc, &o, 0, -1),
		       count_fail(&tc, &o, -EPROTO, -1), (long long)o.ms, o.why);
	}
	/* Recursive doubling in pieces: 1 piece here, 2 there. */
	case_init(&tc, NZ_COLL_ALLREDUCE, NZ_ALGO_RD, 6);
	tc.count = 4096;
	tc.count_of[5] = 4097;
	tc.small_segment = 16384;
	tc.timeout_ms = 5000;
	run_case(&tc, &o);
	tap_ok(count_fail(&tc, &o, 0, -1) == 6 && o.ms < 2500,
	       "allreduce/rd in 16 KiB pieces, 6 ranks, count 4097 (2 pieces) on rank 5, 4096 (1) elsewhere: all fail in %lld ms (%s)",
	       (long long)o.ms, o.why);
	/* Same bytes, another dtype; another operator. */
	case_init(&tc, NZ_COLL_ALLREDUCE, NZ_ALGO_RING, 4);
	tc.count = 5000;
	tc.segment = 4096;
	tc.dt_of[1] = NZ_INT32;
	tc.timeout_ms = 5000;
	run_case(&tc, &o);
	tap_ok(count_fail(&tc, &o, 0, -1) == 4 && count_fail(&tc, &o, -EPROTO, -1) >= 1 && o.ms < 2500,
	       "allreduce/ring: float on 3 ranks, int32 on rank 1: all fail in %lld ms (%s)",
	       (long long)o.ms, o.why);
	case_init(&tc, NZ_COLL_ALLREDUCE, NZ_ALGO_RD, 4);
	tc.count = 10;
	tc.op_of[3] = NZ_MAX;
	tc.timeout_ms = 5000;
	run_case(&tc, &o);
	tap_ok(count_fail(&tc, &o, 0, -1) == 4 && o.ms < 2500,
	       "allreduce/rd: sum on 3 ranks, max on rank 3: all fail in %lld ms (%s)",
	       (long long)o.ms, o.why);
	case_init(&tc, NZ_COLL_REDUCE_SCATTER, NZ_ALGO_DIRECT, 3);
	tc.count = 10;
	tc.count_of[0] = 9;
	tc.timeout_ms = 5000;
	run_case(&tc, &o);
	tap_ok(count_fail(&tc, &o, 0, -1) == 3 && o.ms < 2500,
	       "reduce_scatter/direct: count 9 on rank 0, 10 elsewhere: all fail (%s)", o.why);
	case_init(&tc, NZ_COLL_ALLGATHER, NZ_ALGO_RING, 4);
	tc.count = 20000;
	tc.segment = 4096;
	tc.count_of[3] = 20001;
	tc.timeout_ms = 5000;
	run_case(&tc, &o);
	tap_ok(count_fail(&tc, &o, 0, -1) == 4 && o.ms < 2500,
	       "allgather/ring: count 20001 on rank 3: all fail in %lld ms (%s)",
	       (long long)o.ms, o.why);

	/* The agreement round catches what data cannot show. */
	case_init(&tc, NZ_COLL_BROADCAST, NZ_ALGO_TREE, 4);
	tc.count = 100;
	tc.root_of[2] = 1;
	tc.check = 1;
	tc.timeout_ms = 5000;
	run_case(&tc, &o);
	tap_ok(count_fail(&tc, &o, -EPROTO, -1) == 4 && o.ms < 2500,
	       "NEZHA_COLL_CHECK: broadcast root 1 on rank 2, root 0 elsewhere: EPROTO on all 4 [%s] (%s)",
	       rets(&tc, &o), o.why);
	case_init(&tc, NZ_COLL_ALLREDUCE, NZ_ALGO_RD, 7);
	tc.count = 100;
	tc.algo_of[6] = NZ_ALGO_RING;
	tc.check = 1;
	tc.timeout_ms = 5000;
	run_case(&tc, &o);
	tap_ok(count_fail(&tc, &o, -EPROTO, -1) == 7 && o.ms < 2500,
	       "NEZHA_COLL_CHECK: allreduce ring on rank 6, rd elsewhere: EPROTO on all 7 (%s)",
	       o.why);
	case_init(&tc, NZ_COLL_ALLREDUCE, NZ_ALGO_AUTO, 8);
	tc.count = 12345;
	tc.check = 1;
	run_case(&tc, &o);
	tap_ok(all_ok(&tc, &o), "NEZHA_COLL_CHECK: a matching allreduce passes (%s)", o.why);
	/* Without it, different algorithms are still bounded by the timeout. */
	case_init(&tc, NZ_COLL_ALLREDUCE, NZ_ALGO_RD, 4);
	tc.count = 100;
	tc.algo_of[1] = NZ_ALGO_RING;
	tc.timeout_ms = 300;
	run_case(&tc, &o);
	tap_ok(count_fail(&tc, &o, 0, -1) == 4 && o.ms < 3000,
	       "allreduce ring on rank 1, rd elsewhere, no check: all fail within the transfer timeout (%lld ms; %s)",
	       (long long)o.ms, o.why);
}

static void test_leave(void)
{
	static const struct { enum nz_coll c; enum nz_coll_algo a; } cs[] = {
		{ NZ_COLL_ALLREDUCE, NZ_ALGO_RD }, { NZ_COLL_ALLREDUCE, NZ_ALGO_HD },
		{ NZ_COLL_ALLREDUCE, NZ_ALGO_RING }, { NZ_COLL_ALLGATHER, NZ_ALGO_BRUCK },
		{ NZ_COLL_ALLGATHER, NZ_ALGO_RING }, { NZ_COLL_REDUCE_SCATTER, NZ_ALGO_DIRECT },
		{ NZ_COLL_REDUCE_SCATTER, NZ_ALGO_RING }, { NZ_COLL_ALLTOALL, NZ_ALGO_AUTO },
		{ NZ_COLL_BARRIER, NZ_ALGO_AUTO },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cs); i++) {
		struct tcase tc;
		struct outcome o;

		case_init(&tc, cs[i].c, cs[i].a, 6);
		tc.count = 3000;
		tc.segment = 4096;
		tc.leave = 4;
		tc.timeout_ms = 8000;
		run_case(&tc, &o);
		tap_ok(count_fail(&tc, &o, 0, 4) == 5 && o.ms < 4000,
		       "%s/%s, 6 ranks, rank 4 left before it: the other 5 fail in %lld ms, ECONNRESET on %d [%s] (%s)",
		       nz_coll_name(cs[i].c), nz_coll_algo_name(cs[i].a), (long long)o.ms,
		       count_fail(&tc, &o, -ECONNRESET, 4), rets(&tc, &o), o.why);
	}
	{
		struct tcase tc;
		struct outcome o;

		case_init(&tc, NZ_COLL_ALLREDUCE, NZ_ALGO_RING, 5);
		tc.count = 400000;
		tc.segment = 4096;
		tc.leave_during = 2;
		tc.timeout_ms = 8000;
		run_case(&tc, &o);
		tap_ok(count_fail(&tc, &o, 0, 2) == 4 && o.ms < 4000,
		       "allreduce/ring, rank 2 leaves with it in flight: the other 4 fail in %lld ms (%s)",
		       (long long)o.ms, o.why);
		/* Alive but silent: the wait timeout bounds it. */
		case_init(&tc, NZ_COLL_ALLREDUCE, NZ_ALGO_RD, 4);
		tc.count = 10;
		tc.absent = 3;
		tc.timeout_ms = 1500;
		tc.wait_timeout_ms = 200;
		run_case(&tc, &o);
		tap_ok(count_fail(&tc, &o, 0, 3) == 3 && count_fail(&tc, &o, -ETIMEDOUT, 3) >= 1,
		       "allreduce, rank 3 never calls it, wait timeout 200 ms: the others fail (%d with ETIMEDOUT) in %lld ms (%s)",
		       count_fail(&tc, &o, -ETIMEDOUT, 3), (long long)o.ms, o.why);
		/*
		 * The same, but the others' receives do not time out by
		 * themselves (the module's receives have no timeout) and rank
		 * 3 stays silent for 6 s: an aborting rank must not wait for a
		 * message that will never come (it did: until the transfer
		 * timeout, 20 s here -- for ever on the module).
		 */
		case_init(&tc, NZ_COLL_ALLREDUCE, NZ_ALGO_RD, 4);
		tc.count = 10;
		tc.absent = 3;
		tc.absent_ms = 6000;
		tc.timeout_ms = 20000;
		tc.wait_timeout_ms = 200;
		run_case(&tc, &o);
		tap_ok(count_fail(&tc, &o, 0, 3) == 3 && count_fail(&tc, &o, -ETIMEDOUT, 3) >= 1 &&
		       o.call_ms < 3000 && o.cancelled >= 1,
		       "allreduce, rank 3 silent for 6 s, receives without timeout, wait timeout 200 ms: the others fail within %lld ms (< 3000), %lu receives cancelled (%d with ETIMEDOUT; %s)",
		       (long long)o.call_ms, o.cancelled, count_fail(&tc, &o, -ETIMEDOUT, 3),
		       o.why);
		/*
		 * Polled with nz_coll_test(), no blocking call: an alltoall of
		 * 4, rank 2 left, rank 3 silent for 6 s.  Rank 0's receive from
		 * rank 2 fails and it aborts, with its receive from rank 3 in
		 * flight; nz_coll_test() cancels it too (it did not: 20 s).
		 */
		case_init(&tc, NZ_COLL_ALLTOALL, NZ_ALGO_PAIRWISE, 4);
		tc.count = 1000;
		tc.leave = 2;
		tc.absent = 3;
		tc.absent_ms = 6000;
		tc.timeout_ms = 20000;
		tc.wait_timeout_ms = 200;
		tc.poll = 1;
		run_case(&tc, &o);
		tap_ok(o.ret[0] && o.ret[1] && o.call_ms < 3000 && o.cancelled >= 1,
		       "alltoall polled with nz_coll_test, rank 2 left, rank 3 silent for 6 s: ranks 0 and 1 fail within %lld ms (< 3000), %lu receives cancelled [%s] (%s)",
		       (long long)o.call_ms, o.cancelled, rets(&tc, &o), o.why);
	}
}

/*
 * An argument error on one rank: it still takes the collective's sequence
 * number, so once the others have failed too (their transfer timeout),
 * the next collective works everywhere.
 */
struct skew_run {
	struct tw_world *w;
	struct tw_ctx ctx;
	int rank, n, first, second;
};

static void *skew_main(void *arg)
{
	struct skew_run *sr = arg;
	struct nz_comm *c = NULL;
	float x[16], y[16];

	sr->ctx.w = sr->w;
	sr->ctx.rank = sr->rank;
	for (int i = 0; i < 16; i++)
		x[i] = (float)sr->rank;
	if (nzi_coll_comm_new(&c, sr->rank, sr->n, &tw_xport, &sr->ctx)) {
		sr->first = sr->second = -ENOMEM;
		return NULL;
	}
	sr->first = nz_allreduce(c, x, y, 16, sr->rank == 1 ? NZ_DTYPE_COUNT : NZ_FLOAT32, NZ_SUM);
	if (sr->rank == 1)	/* retry once the others gave up (400 ms) */
		usleep(550 * 1000);
	sr->second = nz_allreduce(c, x, y, 16, NZ_FLOAT32, NZ_SUM);
	if (!sr->second && y[5] != (float)(sr->n * (sr->n - 1) / 2))
		sr->second = -EBADMSG;
	nz_comm_destroy(c);
	return NULL;
}

static void test_skew(void)
{
	struct skew_run sr[4];
	pthread_t th[4];
	struct tw_world w;
	int first_fail = 0, second_ok = 0;

	tw_init(&w, 4, 400);
	for (int r = 0; r < 4; r++) {
		sr[r] = (struct skew_run){ .w = &w, .rank = r, .n = 4 };
		pthread_create(&th[r], NULL, skew_main, &sr[r]);
	}
	for (int r = 0; r < 4; r++) {
		pthread_join(th[r], NULL);
		first_fail += sr[r].first != 0;
		second_ok += sr[r].second == 0;
	}
	tw_destroy(&w);
	tap_ok(sr[1].first == -EINVAL && first_fail == 4 && second_ok == 4,
	       "an invalid dtype on rank 1: EINVAL there, an error elsewhere, and the next allreduce works on all 4 (%d %d %d %d / %d %d %d %d)",
	       sr[0].first, sr[1].first, sr[2].first, sr[3].first,
	       sr[0].second, sr[1].second, sr[2].second, sr[3].second);
}

static void test_args(void)
{
	struct tw_world w;
	struct tw_ctx ctx = { 0 };
	struct nz_comm *c = NULL;
	struct nz_coll_request *req = (void *)1, *reqs[NZ_COLL_MAX_ACTIVE + 1];
	struct nz_coll_tuning t;
	float buf[64] = { 0 };
	enum nz_coll_algo a;
	int ret, started = 0;

	tw_init(&w, 1, 1000);
	ctx.w = &w;
	tap_ok(nzi_coll_comm_new(&c, 0, 1, &tw_xport, &ctx) == 0, "a 1-rank test communicator");
	tap_ok(nz_allreduce(NULL, buf, buf, 4, NZ_FLOAT32, NZ_SUM) == -EINVAL &&
	       nz_iallreduce(c, buf, buf, 4, NZ_FLOAT32, NZ_SUM, NULL) == -EINVAL &&
	       nz_coll_wait(NULL) == -EINVAL && nz_coll_test(NULL) == -EINVAL &&
	       nz_coll_progress(NULL) == -EINVAL,
	       "NULL communicator, request pointer or request: EINVAL");
	tap_ok(nz_allreduce(c, buf, buf, 4, NZ_DTYPE_COUNT, NZ_SUM) == -EINVAL &&
	       nz_allreduce(c, buf, buf, 4, NZ_FLOAT32, NZ_REDOP_COUNT) == -EINVAL &&
	       nz_broadcast(c, buf, buf, 4, NZ_FLOAT32, 1) == -EINVAL &&
	       nz_reduce(c, buf, buf, 4, NZ_FLOAT32, NZ_SUM, -1) == -EINVAL,
	       "invalid dtype, operator, root: EINVAL");
	tap_ok(nz_allreduce(c, buf, buf + 1, 4, NZ_FLOAT32, NZ_SUM) == -EINVAL &&
	       nz_alltoall(c, buf, buf + 2, 4, NZ_FLOAT32) == -EINVAL &&
	       nz_allreduce(c, NULL, buf, 4, NZ_FLOAT32, NZ_SUM) == -EINVAL &&
	       nz_allreduce(c, (char *)buf + 1, buf + 8, 4, NZ_FLOAT32, NZ_SUM) == -EINVAL &&
	       nz_allreduce(c, buf, buf, SIZE_MAX / 2, NZ_FLOAT32, NZ_SUM) == -EINVAL,
	       "overlapping, NULL, misaligned buffers, huge count: EINVAL");
	tap_ok(nz_allreduce(c, NULL, NULL, 0, NZ_FLOAT32, NZ_SUM) == 0 &&
	       nz_reduce(c, buf, NULL, 4, NZ_FLOAT32, NZ_SUM, 0) == -EINVAL &&
	       nz_barrier(c) == 0,
	       "count 0 with NULL buffers is fine; the root's NULL recvbuf is not");
	buf[0] = 3;
	tap_ok(nz_allreduce(c, buf, buf + 32, 1, NZ_FLOAT32, NZ_AVG) == 0 && buf[32] == 3,
	       "1 rank: out-of-place allreduce copies");
	/* -EBUSY past NZ_COLL_MAX_ACTIVE (a 1-rank collective stays "in flight"
	 * until someone tests it). */
	for (int i = 0; i <= NZ_COLL_MAX_ACTIVE; i++) {
		reqs[i] = NULL;
		ret = nz_ibarrier(c, &reqs[i]);
		started += ret == 0;
	}
	tap_ok(started == NZ_COLL_MAX_ACTIVE && ret == -EBUSY && !reqs[NZ_COLL_MAX_ACTIVE],
	       "the %dth collective in flight: EBUSY", NZ_COLL_MAX_ACTIVE + 1);
	tap_ok(nz_coll_progress(c) == 0 && nz_coll_test(reqs[0]) == 0,
	       "nz_coll_progress: none running; nz_coll_test reports a finished one");
	for (int i = 1; i < NZ_COLL_MAX_ACTIVE; i++)
		nz_coll_wait(reqs[i]);
	ret = nz_iallreduce(c, buf, buf, 4, NZ_FLOAT32, NZ_SUM, &req);
	tap_ok(ret == 0 && nz_coll_wait(req) == 0, "iallreduce then wait");

	nz_coll_get_tuning(c, &t);
	tap_ok(t.segment == 1 << 20 && t.window == 24 && t.small_max == 64 << 10 &&
	       t.allreduce_crossover == 1 << 20 && t.small_segment == 16 << 10 && !t.check,
	       "default tuning: 1 MiB segments, 16 KiB pieces, window 24, small 64 KiB, crossover 1 MiB");
	t.algo[NZ_COLL_BROADCAST] = NZ_ALGO_RING;
	tap_ok(nz_coll_set_tuning(c, &t) == -EINVAL, "broadcast has no ring: EINVAL");
	tap_ok(nz_coll_algo_parse("Ring", &a) == 0 && a == NZ_ALGO_RING &&
	       nz_coll_algo_parse("rabenseifner", &a) == 0 && a == NZ_ALGO_HD &&
	       nz_coll_algo_parse("nope", &a) == -EINVAL &&
	       !strcmp(nz_coll_algo_name(NZ_ALGO_DISSEMINATION), "dissemination") &&
	       !nz_coll_algo_name(NZ_ALGO_COUNT) && !strcmp(nz_coll_name(NZ_COLL_REDUCE_SCATTER), "reduce_scatter"),
	       "algorithm and collective names");
	nz_comm_destroy(c);
	tw_destroy(&w);
}

/* The selection and its environment overrides. */
static void test_select(void)
{
	struct tw_world w;
	struct tw_ctx ctx = { 0 };
	struct nz_comm *c2 = NULL, *c8 = NULL, *ce = NULL;

	tw_init(&w, 8, 1000);
	ctx.w = &w;
	nzi_coll_comm_new(&c2, 0, 2, &tw_xport, &ctx);
	nzi_coll_comm_new(&c8, 0, 8, &tw_xport, &ctx);
	tap_ok(nz_coll_select(c2, NZ_COLL_ALLREDUCE, 8) == NZ_ALGO_RD &&
	       nz_coll_select(c2, NZ_COLL_ALLREDUCE, 256 << 10) == NZ_ALGO_RD &&
	       nz_coll_select(c2, NZ_COLL_ALLREDUCE, (256 << 10) + 4) == NZ_ALGO_RING &&
	       nz_coll_select(c2, NZ_COLL_ALLREDUCE, (1 << 20) + 4) == NZ_ALGO_RING &&
	       nz_coll_select(c8, NZ_COLL_ALLREDUCE, 16 << 10) == NZ_ALGO_RD &&
	       nz_coll_select(c8, NZ_COLL_ALLREDUCE, 64 << 10) == NZ_ALGO_HD &&
	       nz_coll_select(c8, NZ_COLL_ALLREDUCE, 4 << 20) == NZ_ALGO_RING,
	       "allreduce: rd up to 256 KiB then ring (2-3 ranks); rd up to 16 KiB, hd up to 1 MiB, ring above");
	tap_ok(nz_coll_select(c8, NZ_COLL_BROADCAST, 1000) == NZ_ALGO_TREE &&
	       nz_coll_select(c8, NZ_COLL_BROADCAST, 1 << 20) == NZ_ALGO_CHAIN &&
	       nz_coll_select(c8, NZ_COLL_REDUCE, 1 << 20) == NZ_ALGO_CHAIN &&
	       nz_coll_select(c8, NZ_COLL_ALLGATHER, 1000) == NZ_ALGO_BRUCK &&
	       nz_coll_select(c8, NZ_COLL_ALLGATHER, 1 << 20) == NZ_ALGO_RING &&
	       nz_coll_select(c8, NZ_COLL_REDUCE_SCATTER, 1000) == NZ_ALGO_DIRECT &&
	       nz_coll_select(c8, NZ_COLL_ALLTOALL, 1000) == NZ_ALGO_PAIRWISE &&
	       nz_coll_select(c8, NZ_COLL_BARRIER, 0) == NZ_ALGO_DISSEMINATION,
	       "the other collectives: small algorithms up to 64 KiB, pipelined ones above");
	setenv("NEZHA_ALGO", "ring,broadcast=tree", 1);
	setenv("NEZHA_ALLREDUCE_CROSSOVER", "2M", 1);
	setenv("NEZHA_COLL_SEGMENT", "64k", 1);
	tap_ok(nzi_coll_comm_new(&ce, 0, 8, &tw_xport, &ctx) == 0 &&
	       nz_coll_select(ce, NZ_COLL_ALLREDUCE, 8) == NZ_ALGO_RING &&
	       nz_coll_select(ce, NZ_COLL_ALLGATHER, 8) == NZ_ALGO_RING &&
	       nz_coll_select(ce, NZ_COLL_BROADCAST, 1 << 30) == NZ_ALGO_TREE &&
	       nz_coll_select(ce, NZ_COLL_REDUCE, 8) == NZ_ALGO_TREE,
	       "NEZHA_ALGO=ring,broadcast=tree forces those algorithms");
	nz_comm_destroy(ce);
	ce = NULL;
	unsetenv("NEZHA_ALGO");
	tap_ok(nzi_coll_comm_new(&ce, 0, 8, &tw_xport, &ctx) == 0 &&
	       nz_coll_select(ce, NZ_COLL_ALLREDUCE, 2 << 20) == NZ_ALGO_HD &&
	       nz_coll_select(ce, NZ_COLL_ALLREDUCE, (2 << 20) + 1) == NZ_ALGO_RING,
	       "NEZHA_ALLREDUCE_CROSSOVER=2M moves the switch to the ring");
	nz_comm_destroy(ce);
	ce = NULL;
	setenv("NEZHA_ALGO", "broadcast=ring", 1);
	tap_ok(nzi_coll_comm_new(&ce, 0, 8, &tw_xport, &ctx) == -EINVAL,
	       "NEZHA_ALGO=broadcast=ring is refused (%s)", nz_last_error());
	unsetenv("NEZHA_ALGO");
	unsetenv("NEZHA_ALLREDUCE_CROSSOVER");
	unsetenv("NEZHA_COLL_SEGMENT");
	nz_comm_destroy(c2);
	nz_comm_destroy(c8);
	tw_destroy(&w);
}

static void test_header(void)
{
	struct nzi_hdr h = { .coll = 1, .dtype = 8, .op = 4, .algo = 3, .seq = 0x7fffffff,
			     .flags = NZI_HDR_ABORT, .root = 5, .err = -ECONNRESET,
			     .param = 65536, .count = 0x123456789abULL }, g;
	unsigned char buf[NZI_HDR_LEN];

	nzi_hdr_encode(buf, &h);
	tap_ok(nzi_hdr_decode(buf, sizeof(buf), &g) && !memcmp(&g, &h, sizeof(h)),
	       "header: encode/decode round trip");
	buf[26] ^= 1;
	tap_ok(!nzi_hdr_decode(buf, sizeof(buf), &g) && !nzi_hdr_decode(buf, 47, &g),
	       "header: a flipped bit or a short buffer is refused");
	tap_ok((nzi_coll_tag(5, NZI_TAG(3, 7)) >> 63) == 1 &&
	       nzi_coll_tag(5, NZI_TAG(3, 7)) == (NZ_TAG_COLL | 5ULL << 32 | 3u << 20 | 7),
	       "tags: bit 63 | sequence << 32 | step << 20 | segment");
}

/* NZ_TEST_ONLY=group[,group]: basic matrix types nonblocking errors. */
static int want(const char *group)
{
	const char *only = getenv("NZ_TEST_ONLY");

	return !only || !*only || strstr(only, group);
}

int main(void)
{
	static const struct { enum nz_coll c; enum nz_coll_algo a; } algos[] = {
		{ NZ_COLL_ALLREDUCE, NZ_ALGO_RD }, { NZ_COLL_ALLREDUCE, NZ_ALGO_HD },
		{ NZ_COLL_ALLREDUCE, NZ_ALGO_RING }, { NZ_COLL_ALLREDUCE, NZ_ALGO_AUTO },
		{ NZ_COLL_BROADCAST, NZ_ALGO_TREE }, { NZ_COLL_BROADCAST, NZ_ALGO_CHAIN },
		{ NZ_COLL_REDUCE, NZ_ALGO_TREE }, { NZ_COLL_REDUCE, NZ_ALGO_CHAIN },
		{ NZ_COLL_ALLGATHER, NZ_ALGO_BRUCK }, { NZ_COLL_ALLGATHER, NZ_ALGO_RING },
		{ NZ_COLL_REDUCE_SCATTER, NZ_ALGO_DIRECT }, { NZ_COLL_REDUCE_SCATTER, NZ_ALGO_RING },
		{ NZ_COLL_ALLTOALL, NZ_ALGO_PAIRWISE }, { NZ_COLL_BARRIER, NZ_ALGO_DISSEMINATION },
	};
	const char *q = getenv("NZ_TEST_QUICK");
	int quick = q && *q && strcmp(q, "0");
	int64_t t0 = now_ms();

	for (const char *const *v = (const char *const[]){ "NEZHA_ALGO", "NEZHA_ALLREDUCE_RD_MAX",
			"NEZHA_ALLREDUCE_CROSSOVER", "NEZHA_COLL_SMALL", "NEZHA_COLL_SEGMENT",
			"NEZHA_COLL_WINDOW", "NEZHA_COLL_CHECK", NULL }; *v; v++)
		unsetenv(*v);
	if (want("basic")) {
		test_header();
		test_args();
		test_select();
	}
	for (size_t i = 0; i < ARRAY_SIZE(algos) && want("matrix"); i++)
		matrix(algos[i].c, algos[i].a, quick);
	if (want("types")) {
		test_all_types();
		test_avg16();
	}
	if (want("nonblocking")) {
		test_nonblocking();
		test_linger();
		test_segments();
	}
	if (want("errors")) {
		test_mismatch();
		test_leave();
		test_skew();
	}
	tap_diag("%lld ms", (long long)(now_ms() - t0));
	tap_plan(tap_n);
	return tap_exit();
}
