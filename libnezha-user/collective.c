// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Collectives: the public entry points, argument checks, algorithm
 * selection and tuning, and the requests of non-blocking collectives.
 * The algorithms are in coll_algo.c, the engine that runs them in
 * coll_sched.c; Documentation/collectives.rst is the guide.
 *
 * Progress: a collective advances only inside libnezha calls on its
 * communicator (nz_coll_test/wait/progress and the blocking collectives,
 * which advance every collective in flight).  The module moves the bytes
 * of every transfer already started in the background, and the engine
 * keeps a window of them started, so the calls are only needed at the
 * steps of the algorithm: to reduce a segment that arrived and send the
 * result on.  A progress thread would have to share the communicator's
 * queue (a lock on every transfer) and compete with the trainer for cores;
 * the trainer knows better when it has a moment, and can dedicate a
 * thread to a communicator of its own if it wants one.  The one thread
 * libnezha starts itself carries the aggregation node's share of a split
 * allreduce (coll_agg.c): that share is a UDP exchange with timers, not
 * transfers of the module.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "coll.h"

/* ---- Names ---- */

static const char *const nzi_coll_names[NZ_COLL_COUNT] = {
	"allreduce", "broadcast", "reduce", "allgather", "reduce_scatter",
	"alltoall", "barrier",
};

static const char *const nzi_algo_names[NZ_ALGO_COUNT] = {
	"auto", "rd", "hd", "ring", "tree", "chain", "bruck", "direct",
	"pairwise", "dissemination",
};

const char *nz_coll_name(enum nz_coll coll)
{
	return (unsigned int)coll < NZ_COLL_COUNT ? nzi_coll_names[coll] : NULL;
}

const char *nz_coll_algo_name(enum nz_coll_algo algo)
{
	return (unsigned int)algo < NZ_ALGO_COUNT ? nzi_algo_names[algo] : NULL;
}

int nz_coll_algo_parse(const char *name, enum nz_coll_algo *out)
{
	if (!name || !out)
		return -EINVAL;
	for (int i = 0; i < NZ_ALGO_COUNT; i++)
		if (!strcasecmp(name, nzi_algo_names[i])) {
			*out = (enum nz_coll_algo)i;
			return 0;
		}
	if (!strcasecmp(name, "recursive_doubling"))
		*out = NZ_ALGO_RD;
	else if (!strcasecmp(name, "halving_doubling") || !strcasecmp(name, "rabenseifner"))
		*out = NZ_ALGO_HD;
	else
		return -EINVAL;
	return 0;
}

/* Which algorithms each collective implements (AUTO always). */
static bool nzi_algo_valid(enum nz_coll coll, enum nz_coll_algo algo)
{
	static const unsigned int ok[NZ_COLL_COUNT] = {
		[NZ_COLL_ALLREDUCE] = 1u << NZ_ALGO_RD | 1u << NZ_ALGO_HD | 1u << NZ_ALGO_RING,
		[NZ_COLL_BROADCAST] = 1u << NZ_ALGO_TREE | 1u << NZ_ALGO_CHAIN,
		[NZ_COLL_REDUCE] = 1u << NZ_ALGO_TREE | 1u << NZ_ALGO_CHAIN,
		[NZ_COLL_ALLGATHER] = 1u << NZ_ALGO_BRUCK | 1u << NZ_ALGO_RING,
		[NZ_COLL_REDUCE_SCATTER] = 1u << NZ_ALGO_DIRECT | 1u << NZ_ALGO_RING,
		[NZ_COLL_ALLTOALL] = 1u << NZ_ALGO_PAIRWISE,
		[NZ_COLL_BARRIER] = 1u << NZ_ALGO_DISSEMINATION,
	};

	if ((unsigned int)coll >= NZ_COLL_COUNT || (unsigned int)algo >= NZ_ALGO_COUNT)
		return false;
	return algo == NZ_ALGO_AUTO || (ok[coll] >> algo & 1);
}

/* ---- Tuning ---- */

#define NZI_DEF_SEGMENT		(1u << 20)
#define NZI_DEF_SMALL_SEGMENT	(16u << 10)
#define NZI_DEF_WINDOW		24
#define NZI_DEF_SMALL		(64u << 10)
#define NZI_DEF_CROSSOVER	(1u << 20)
#define NZI_MIN_SEGMENT		4096
#define NZI_MAX_WINDOW		256
#define NZI_MAX_DETACHED	64	/* finished, sends still unacknowledged */

int nzi_env_size(const char *name, size_t min, size_t max, size_t *out)
{
	const char *v = getenv(name);
	char *end;
	unsigned long long x;

	if (!v || !*v)
		return 0;
	x = strtoull(v, &end, 10);
	if (*end && strchr("kKmMgG", *end)) {
		x <<= *end == 'k' || *end == 'K' ? 10 : *end == 'm' || *end == 'M' ? 20 : 30;
		end++;
	}
	if (end == v || *end || x < min || x > max)
		return nzi_error(-EINVAL, "environment: %s=\"%s\" is not a size in %zu..%zu (K, M, G suffixes)",
				 name, v, min, max);
	*out = (size_t)x;
	return 0;
}

/* NEZHA_ALGO: "ring" (every collective that has it) or "allreduce=rd,...". */
static int nzi_env_algo(struct nz_coll_tuning *t)
{
	const char *env = getenv("NEZHA_ALGO");
	char buf[256], *save, *tok;

	if (!env || !*env)
		return 0;
	if (strlen(env) >= sizeof(buf))
		return nzi_error(-EINVAL, "environment: NEZHA_ALGO is too long");
	strcpy(buf, env);
	for (tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
		char *eq = strchr(tok, '=');
		enum nz_coll_algo algo;
		int coll = -1, hits = 0;

		if (eq) {
			*eq = 0;
			for (int c = 0; c < NZ_COLL_COUNT; c++)
				if (!strcasecmp(tok, nzi_coll_names[c]))
					coll = c;
			if (coll < 0)
				return nzi_error(-EINVAL, "environment: NEZHA_ALGO: no collective \"%s\"", tok);
			tok = eq + 1;
		}
		if (nz_coll_algo_parse(tok, &algo))
			return nzi_error(-EINVAL, "environment: NEZHA_ALGO: no algorithm \"%s\"", tok);
		for (int c = 0; c < NZ_COLL_COUNT; c++) {
			if ((coll >= 0 && c != coll) || !nzi_algo_valid((enum nz_coll)c, algo))
				continue;
			t->algo[c] = (unsigned char)algo;
			hits++;
		}
		if (!hits)
			return nzi_error(-EINVAL, "environment: NEZHA_ALGO: %s has no algorithm \"%s\"",
					 coll >= 0 ? nzi_coll_names[coll] : "no collective", tok);
	}
	return 0;
}

static int nzi_tuning_env(struct nz_coll_tuning *t)
{
	size_t v;
	int ret;

	memset(t, 0, sizeof(*t));
	t->segment = NZI_DEF_SEGMENT;
	t->small_segment = NZI_DEF_SMALL_SEGMENT;
	t->window = NZI_DEF_WINDOW;
	t->small_max = NZI_DEF_SMALL;
	t->allreduce_crossover = NZI_DEF_CROSSOVER;
	ret = nzi_env_algo(t);
	if (!ret)
		ret = nzi_env_size("NEZHA_ALLREDUCE_RD_MAX", 0, SIZE_MAX >> 1, &t->allreduce_rd_max);
	if (!ret)
		ret = nzi_env_size("NEZHA_ALLREDUCE_CROSSOVER", 0, SIZE_MAX >> 1,
				   &t->allreduce_crossover);
	if (!ret)
		ret = nzi_env_size("NEZHA_COLL_SMALL", 0, SIZE_MAX >> 1, &t->small_max);
	if (!ret)
		ret = nzi_env_size("NEZHA_COLL_SEGMENT", NZI_MIN_SEGMENT, 1u << 30, &t->segment);
	if (!ret)
		ret = nzi_env_size("NEZHA_COLL_SMALL_SEGMENT", 0, 1u << 30, &t->small_segment);
	v = t->window;
	if (!ret)
		ret = nzi_env_size("NEZHA_COLL_WINDOW", 1, NZI_MAX_WINDOW, &v);
	t->window = (unsigned int)v;
	v = 0;
	if (!ret)
		ret = nzi_env_size("NEZHA_COLL_CHECK", 0, 1, &v);
	t->check = (int)v;
	return ret;
}

/*
 * Recursive doubling moves the whole vector log2(p) times, halving-doubling
 * and the ring 2(n-1)/n of it; with two ranks all of them move it once,
 * and recursive doubling does it in one message.  So the default switch to
 * halving-doubling comes late for 2 ranks and early for many.
 */
static size_t nzi_rd_max(const struct nz_coll_tuning *t, int n)
{
	if (t->allreduce_rd_max)
		return t->allreduce_rd_max;
	return nzi_pow2_floor(n) == 2 ? 256u << 10 : 16u << 10;
}

static enum nz_coll_algo nzi_select(const struct nz_coll_tuning *t, int n,
				    enum nz_coll coll, size_t bytes)
{
	if (t->algo[coll] != NZ_ALGO_AUTO)
		return (enum nz_coll_algo)t->algo[coll];
	switch (coll) {
	case NZ_COLL_ALLREDUCE:
		if (bytes <= nzi_rd_max(t, n))
			return NZ_ALGO_RD;
		/* With 2-3 ranks hd makes the ring's two steps, unpipelined. */
		if (nzi_pow2_floor(n) == 2)
			return NZ_ALGO_RING;
		return bytes <= t->allreduce_crossover ? NZ_ALGO_HD : NZ_ALGO_RING;
	case NZ_COLL_BROADCAST:
	case NZ_COLL_REDUCE:
		return bytes <= t->small_max ? NZ_ALGO_TREE : NZ_ALGO_CHAIN;
	case NZ_COLL_ALLGATHER:
		return bytes <= t->small_max ? NZ_ALGO_BRUCK : NZ_ALGO_RING;
	case NZ_COLL_REDUCE_SCATTER:
		return bytes <= t->small_max ? NZ_ALGO_DIRECT : NZ_ALGO_RING;
	case NZ_COLL_ALLTOALL:
		return NZ_ALGO_PAIRWISE;
	default:
		return NZ_ALGO_DISSEMINATION;
	}
}

static bool nzi_pipelined(enum nz_coll_algo a)
{
	return a == NZ_ALGO_RING || a == NZ_ALGO_CHAIN;
}

/* ---- Per-communicator state ---- */

int nzi_coll_get(struct nz_comm *comm, struct nzi_coll **out)
{
	struct nzi_coll *c = comm->coll;
	int ret;

	if (!c) {
		c = calloc(1, sizeof(*c));
		if (!c)
			return nzi_error(-ENOMEM, "collective: out of memory");
		ret = nzi_tuning_env(&c->tune);
		if (ret) {
			free(c);
			return ret;
		}
		c->xp = &nzi_coll_xport_p2p;
		c->xctx = comm;
		comm->coll = c;
	}
	*out = c;
	return 0;
}

static void nzi_req_unlink(struct nzi_coll *c, struct nz_coll_request *req)
{
	struct nz_coll_request **pp = &c->head, *prev = NULL;

	for (; *pp; prev = *pp, pp = &(*pp)->next) {
		if (*pp != req)
			continue;
		*pp = req->next;
		if (c->tail == req)
			c->tail = prev;
		if (req->detached)
			c->ndetached--;
		else
			c->nactive--;
		return;
	}
}

static void nzi_req_free(struct nz_coll_request *req)
{
	nzi_req_unlink(req->owner, req);
	nzi_sched_free(&req->s);
	nzi_agg_part_free(req->agg);
	free(req->wide);
	free(req);
}

/* Block until every transfer of s is over (the module bounds each one). */
static void nzi_sched_drain(struct nzi_sched *s)
{
	uint32_t op;
	void *h;

	while ((h = nzi_sched_critical(s, &op))) {
		int64_t res = 0;

		if (!s->xp->wait(s->xctx, h, -1, &res))
			nzi_sched_complete(s, op, res);
	}
}

/*
 * The communicator goes away.  Detached collectives only wait for the
 * acknowledgements of their last sends: wait for them, so that the
 * module never reads freed memory.  The caller's own collectives should
 * be over (as for point to point); their transfers are left to the
 * module, which cancels them when the device is closed.
 */
void nzi_coll_release(struct nz_comm *comm)
{
	struct nzi_coll *c = comm->coll;

	if (!c)
		return;
	nzi_coll_agg_release(c);	/* no share is at the node after this */
	while (c->head) {
		struct nz_coll_request *r = c->head;

		if (r->detached)
			nzi_sched_drain(&r->s);
		nzi_req_free(r);
	}
	free(c);
	comm->coll = NULL;
}

int nzi_coll_comm_new(struct nz_comm **out, int rank, int size,
		      const struct nzi_coll_xport *xport, void *ctx)
{
	struct nz_comm *comm;
	struct nzi_coll *c;
	int ret;

	if (!out || size < 1 || rank < 0 || rank >= size || !xport)
		return -EINVAL;
	comm = calloc(1, sizeof(*comm));
	if (!comm)
		return -ENOMEM;
	comm->rank = rank;
	comm->size = size;
	ret = nzi_coll_get(comm, &c);
	if (ret) {
		free(comm);
		return ret;
	}
	c->xp = xport;
	c->xctx = ctx;
	*out = comm;
	return 0;
}

int nz_coll_get_tuning(struct nz_comm *comm, struct nz_coll_tuning *out)
{
	struct nzi_coll *c;
	int ret;

	if (!comm || !out)
		return nzi_error(-EINVAL, "coll_get_tuning: NULL argument");
	ret = nzi_coll_get(comm, &c);
	if (!ret)
		*out = c->tune;
	return ret;
}

int nz_coll_set_tuning(struct nz_comm *comm, const struct nz_coll_tuning *t)
{
	struct nzi_coll *c;
	int ret;

	if (!comm || !t)
		return nzi_error(-EINVAL, "coll_set_tuning: NULL argument");
	for (int i = 0; i < NZ_COLL_COUNT; i++)
		if (!nzi_algo_valid((enum nz_coll)i, (enum nz_coll_algo)t->algo[i]))
			return nzi_error(-EINVAL, "coll_set_tuning: %s has no algorithm %d",
					 nzi_coll_names[i], t->algo[i]);
	if (t->segment < NZI_MIN_SEGMENT || t->segment > (1u << 30) ||
	    t->small_segment > (1u << 30) || !t->window ||
	    t->window > NZI_MAX_WINDOW || (t->check != 0 && t->check != 1))
		return nzi_error(-EINVAL, "coll_set_tuning: segment %zu (%d..%u), window %u (1..%d) or check %d out of range",
				 t->segment, NZI_MIN_SEGMENT, 1u << 30, t->window, NZI_MAX_WINDOW,
				 t->check);
	ret = nzi_coll_get(comm, &c);
	if (!ret)
		c->tune = *t;
	return ret;
}

enum nz_coll_algo nz_coll_select(struct nz_comm *comm, enum nz_coll coll,
				 size_t bytes)
{
	struct nzi_coll *c;

	if (!comm || (unsigned int)coll >= NZ_COLL_COUNT || nzi_coll_get(comm, &c))
		return NZ_ALGO_AUTO;
	return nzi_select(&c->tune, comm->size, coll, bytes);
}

/* ---- Argument checks ---- */

static bool nzi_disjoint(const void *a, size_t alen, const void *b, size_t blen)
{
	uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;

	return !alen || !blen || x + alen <= y || y + blen <= x;
}

static int nzi_bad(const struct nzi_args *a, const char *why)
{
	return nzi_error(-EINVAL, "%s: %s", nzi_coll_names[a->coll], why);
}

/*
 * Sizes and buffers of a as the collective sees them: snd/rcv bytes of
 * the send and receive buffers on this rank (0: not used here).
 */
static int nzi_check(const struct nz_comm *comm, struct nzi_args *a,
		     size_t *total)
{
	int n = comm->size, r = comm->rank;
	size_t es, b, nb, snd = 0, rcv = 0;
	const uint8_t *sb = a->sendbuf;
	uint8_t *rb = a->recvbuf;
	bool root;

	if (a->coll == NZ_COLL_BARRIER) {
		*total = 0;
		return 0;
	}
	es = nz_dtype_size(a->dtype);
	if (!es)
		return nzi_bad(a, "invalid dtype");
	if ((a->coll == NZ_COLL_ALLREDUCE || a->coll == NZ_COLL_REDUCE ||
	     a->coll == NZ_COLL_REDUCE_SCATTER) && (unsigned int)a->op >= NZ_REDOP_COUNT)
		return nzi_bad(a, "invalid reduction operator");
	if ((a->coll == NZ_COLL_BROADCAST || a->coll == NZ_COLL_REDUCE) &&
	    (a->root < 0 || a->root >= n))
		return nzi_bad(a, "root is not a rank of the communicator");
	if (a->count > SIZE_MAX / es / (size_t)n / 2)
		return nzi_bad(a, "count too large");
	b = a->count * es;
	nb = b * (size_t)n;
	root = a->root == r;
	switch (a->coll) {
	case NZ_COLL_ALLREDUCE:
		snd = rcv = b;
		*total = b;
		break;
	case NZ_COLL_BROADCAST:
		snd = root ? b : 0;
		rcv = b;
		*total = b;
		break;
	case NZ_COLL_REDUCE:
		snd = b;
		rcv = root ? b : 0;
		*total = b;
		break;
	case NZ_COLL_ALLGATHER:
		snd = b;
		rcv = nb;
		*total = nb;
		if (b && sb == rb + (size_t)r * b)
			goto buffers;
		break;
	case NZ_COLL_REDUCE_SCATTER:
		snd = nb;
		rcv = b;
		*total = nb;
		if (b && rb == sb + (size_t)r * b)
			goto buffers;
		break;
	case NZ_COLL_ALLTOALL:
		snd = rcv = nb;
		*total = nb;
		break;
	default:
		return nzi_bad(a, "unknown collective");
	}
	if (snd && rcv && sb != rb && !nzi_disjoint(sb, snd, rb, rcv))
		return nzi_bad(a, "send and receive buffers overlap without being in place");
buffers:
	if ((snd && !sb) || (rcv && !rb))
		return nzi_bad(a, "NULL buffer");
	if (!rcv)
		a->recvbuf = NULL;
	if (!snd && a->coll == NZ_COLL_BROADCAST)
		a->sendbuf = NULL;
	if (((uintptr_t)sb % es && snd) || ((uintptr_t)rb % es && rcv))
		return nzi_bad(a, "buffer not aligned to the element size");
	return 0;
}

/* ---- Requests ---- */

/* Report req's outcome to the caller; keep it while its sends linger. */
static int nzi_finish(struct nz_coll_request *req)
{
	struct nzi_coll *c = req->owner;
	int ret = req->result;

	if (ret)
		nzi_error(ret, "%s", req->s.errmsg);
	if (nzi_sched_done(&req->s)) {
		nzi_req_free(req);
		return ret;
	}
	req->detached = true;
	c->nactive--;
	c->ndetached++;
	return ret;
}

static void nzi_widen_finish(struct nz_coll_request *req);

/* When req's schedules are over for the caller, record its outcome. */
static void nzi_settle(struct nz_coll_request *req)
{
	if (req->finished || !nzi_sched_user_done(&req->s))
		return;
	if (req->agg && !nzi_agg_advance(req))
		return;
	req->finished = true;
	req->result = req->agg ? nzi_agg_result(req) : req->s.err;
	nzi_widen_finish(req);
}

/*
 * How long an aborting collective waits for its receives before it
 * cancels them: the wait timeout, at most NZI_ABORT_GRACE_MS -- also
 * without a wait timeout, as a collective that fails returns an error
 * anyway, and a rank that waits for a peer that never sends would stay
 * in it for good.
 */
#define NZI_ABORT_GRACE_MS	10000

static int nzi_abort_grace(int stall)
{
	return stall > 0 && stall < NZI_ABORT_GRACE_MS ? stall : NZI_ABORT_GRACE_MS;
}

/*
 * Aborting, with receives in flight that nothing completes: their peers
 * may never send now (they failed, or wait for us).  Without this an
 * aborted collective would wait for ever -- in a blocking call as in
 * nz_coll_test() -- so every progress pass looks.
 */
static void nzi_abort_cancel(struct nz_coll_request *r)
{
	struct nzi_sched *w = nzi_agg_sched(r);

	if (w->aborting &&
	    !nzi_sched_abort_due(w, nzi_now_ms(), nzi_abort_grace(w->comm->wait_timeout_ms)))
		nzi_sched_cancel_recvs(w);
}

static void nzi_progress_all(struct nzi_coll *c)
{
	struct nz_coll_request *r = c->head, *next;

	for (; r; r = next) {
		next = r->next;
		if (r->finished && nzi_sched_done(&r->s)) {
			if (r->detached)
				nzi_req_free(r);
			continue;
		}
		nzi_sched_progress(&r->s);
		if (!r->detached)
			nzi_abort_cancel(r);
		nzi_settle(r);
		if (r->detached && nzi_sched_done(&r->s))
			nzi_req_free(r);
	}
}

/*
 * AVG of 16-bit floats: the ranks' sum can leave float16's range (4 ranks
 * x 20000 is above 65504) before the division brings it back, and the
 * schedules store every partial sum in the element type.  Run the
 * collective in binary32 instead -- a SUM over a widened copy, in place --
 * and divide and narrow into the caller's buffer when it finishes
 * (nzi_widen_finish): no overflow, and the result is the binary32 quotient
 * rounded once more to 16 bits.  It moves twice the bytes.
 */
static int nzi_widen(const struct nz_comm *comm, struct nzi_args *a,
		     struct nz_coll_request *req)
{
	size_t n = a->count, off = 0;
	const uint16_t *src = a->sendbuf;
	bool bf = a->dtype == NZ_BFLOAT16;
	float *w;

	if (a->op != NZ_AVG || (a->dtype != NZ_FLOAT16 && !bf) || comm->size == 1 ||
	    (a->coll != NZ_COLL_ALLREDUCE && a->coll != NZ_COLL_REDUCE &&
	     a->coll != NZ_COLL_REDUCE_SCATTER))
		return 0;
	if (a->coll == NZ_COLL_REDUCE_SCATTER) {
		off = (size_t)comm->rank * a->count;
		n *= (size_t)comm->size;
	}
	w = malloc(n ? n * sizeof(float) : sizeof(float));
	if (!w)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		w[i] = bf ? nz_bf16_to_f32(src[i]) : nz_f16_to_f32(src[i]);
	req->wide = w;
	req->wide_out = a->recvbuf;
	req->wide_off = off;
	req->wide_count = a->count;
	req->wide_bf16 = bf;
	req->wide_div = (float)comm->size;
	a->sendbuf = w;
	a->recvbuf = a->recvbuf ? w + off : NULL;
	a->dtype = NZ_FLOAT32;
	a->op = NZ_SUM;
	return 0;
}

/* The widened collective is over: narrow its result for the caller. */
static void nzi_widen_finish(struct nz_coll_request *req)
{
	uint16_t *out = req->wide_out;
	const float *w = (const float *)req->wide + req->wide_off;

	if (!req->wide || !out || req->result)
		return;
	for (size_t i = 0; i < req->wide_count; i++)
		out[i] = req->wide_bf16 ? nz_f32_to_bf16(w[i] / req->wide_div) :
					  nz_f32_to_f16(w[i] / req->wide_div);
	req->wide_out = NULL;
}

int nzi_coll_launch(struct nz_comm *comm, struct nzi_sched *s, struct nzi_args *a,
		    uint32_t seq, size_t total)
{
	struct nzi_coll *c = comm->coll;
	struct nzi_hdr hdr = { .seq = seq };
	int ret;

	a->algo = nzi_select(&c->tune, comm->size, a->coll, total);
	a->segment = c->tune.segment;
	a->small_segment = c->tune.small_segment;
	a->window = c->tune.window;
	hdr.coll = (uint8_t)a->coll;
	hdr.dtype = a->coll == NZ_COLL_BARRIER ? 0 : (uint8_t)a->dtype;
	hdr.op = (a->coll == NZ_COLL_ALLREDUCE || a->coll == NZ_COLL_REDUCE ||
		  a->coll == NZ_COLL_REDUCE_SCATTER) ? (uint8_t)a->op : 0;
	hdr.algo = (uint8_t)a->algo;
	hdr.root = (a->coll == NZ_COLL_BROADCAST || a->coll == NZ_COLL_REDUCE) ? a->root : 0;
	hdr.count = a->count;
	hdr.param = nzi_pipelined(a->algo) ? (uint32_t)a->segment :
		    a->algo == NZ_ALGO_RD ? (uint32_t)a->small_segment : 0;

	nzi_sched_init(s, comm, &hdr);
	if (c->tune.check && comm->size > 1)
		nzi_agree(s);
	ret = nzi_build(s, a);
	if (!ret)
		ret = nzi_sched_start(s);
	if (ret)
		nzi_sched_free(s);
	return ret;
}

static int nzi_start(struct nz_comm *comm, struct nzi_args *a,
		     struct nz_coll_request **out)
{

	struct nz_coll_request *req;
	struct nzi_coll *c;
	size_t total = 0;
	uint32_t seq;
	int ret;

	if (out)
		*out = NULL;
	if (!comm)
		return nzi_error(-EINVAL, "%s: NULL communicator", nzi_coll_names[a->coll]);
	ret = nzi_coll_get(comm, &c);
	if (ret)
		return ret;
	if (c->nactive >= NZ_COLL_MAX_ACTIVE)	/* retry later: no number taken */
		return nzi_error(-EBUSY, "%s: %d collectives in flight: wait for one first",
				 nzi_coll_names[a->coll], NZ_COLL_MAX_ACTIVE);
	/* Bound the memory of finished collectives still waiting for acks. */
	nzi_progress_all(c);
	while (c->ndetached > NZI_MAX_DETACHED) {
		struct nz_coll_request *old = c->head;

		while (old && !old->detached)
			old = old->next;
		if (!old)
			break;
		nzi_sched_drain(&old->s);
		nzi_req_free(old);
	}
	/* Every other call takes a sequence number, so that a call that fails
	 * keeps this rank in step with the others for the next ones. */
	seq = c->seq++;
	ret = nzi_check(comm, a, &total);
	if (ret)
		return ret;
	req = calloc(1, sizeof(*req));
	if (!req || nzi_widen(comm, a, req)) {
		free(req);
		return nzi_error(-ENOMEM, "%s: out of memory", nzi_coll_names[a->coll]);
	}
	if (req->wide)
		total *= 2;
	req->owner = c;
	/* The aggregation rail's share, if any, leaves a (and total) the rest. */
	ret = nzi_agg_split(c, comm, a, req, &total);
	if (!ret)
		ret = nzi_coll_launch(comm, &req->s, a, seq, total);
	if (ret) {
		nzi_agg_part_free(req->agg);
		free(req->wide);
		free(req);
		return nzi_error(ret, "%s: cannot set up the schedule: %s",
				 nzi_coll_names[a->coll], strerror(-ret));
	}
	if (c->tail)
		c->tail->next = req;
	else
		c->head = req;
	c->tail = req;
	c->nactive++;
	if (req->agg)
		nzi_agg_start(req);
	nzi_settle(req);
	if (out) {
		*out = req;
		return 0;
	}
	return nz_coll_wait(req);
}

static bool nzi_req_valid(const struct nz_coll_request *req)
{
	return req && req->owner && req->s.comm && !req->detached;
}

int nz_coll_test(struct nz_coll_request *req)
{
	if (!nzi_req_valid(req))
		return nzi_error(-EINVAL, "coll_test: not a collective in flight");
	if (!req->finished)
		nzi_progress_all(req->owner);
	return req->finished ? nzi_finish(req) : -EAGAIN;
}

int nz_coll_progress(struct nz_comm *comm)
{
	int n = 0;

	if (!comm)
		return nzi_error(-EINVAL, "coll_progress: NULL communicator");
	if (!comm->coll)
		return 0;
	nzi_progress_all(comm->coll);
	for (struct nz_coll_request *r = comm->coll->head; r; r = r->next)
		n += !r->finished && !r->detached;
	return n;
}

/*
 * Block until req finishes.  Each round advances every collective in
 * flight, then waits for any completion of the communicator: a segment
 * that arrives is reduced and passed on at once, whichever collective it
 * belongs to and whatever else is still on the way.
 */
int nz_coll_wait(struct nz_coll_request *req)
{
	if (!nzi_req_valid(req))
		return nzi_error(-EINVAL, "coll_wait: not a collective in flight");
	nzi_coll_settle(req);
	return nzi_finish(req);
}

void nzi_coll_settle(struct nz_coll_request *req)
{
	struct nzi_coll *c = req->owner;
	struct nz_comm *comm = req->s.comm;

	for (;;) {
		struct nzi_sched *w, *fw;
		int tmo = -1, stall = comm->wait_timeout_ms, ret;
		bool at_node;
		int64_t now, due, res = 0;
		uint32_t op;
		void *h;

		nzi_progress_all(c);
		if (req->finished)
			return;
		w = nzi_agg_sched(req);
		fw = w->nflight ? w : NULL;
		/* Only the aggregation share is left: its client has a timeout. */
		at_node = nzi_agg_waiting(req) && nzi_sched_user_done(w);
		now = nzi_now_ms();
		if (stall > 0 && !at_node && !w->aborting && now - w->last_progress >= stall) {
			nzi_sched_fail(w, -ETIMEDOUT, "no progress for %d ms (the communicator's wait timeout): a rank is missing or slow",
				       stall);
			continue;
		}
		/* Aborting: wake up when its receives are to be cancelled
		 * (nzi_progress_all() cancels them). */
		due = nzi_sched_abort_due(w, now, nzi_abort_grace(stall));
		for (struct nz_coll_request *r = c->head; r && !fw; r = r->next)
			if (!r->detached && nzi_agg_sched(r)->nflight)
				fw = nzi_agg_sched(r);
		if (!fw && at_node) {
			nzi_agg_wait(req, 10);
			continue;
		}
		if (!fw) {	/* only sends refused for lack of room */
			if (w->aborting && now - w->last_progress > 1000)
				nzi_sched_drop_unsent(w);
			usleep(1000);
			continue;
		}
		if (stall > 0 && !w->aborting)
			tmo = (int)(w->last_progress + stall - now);
		else if (due >= 0)
			tmo = (int)due;
		if (at_node && (tmo < 0 || tmo > 10))
			tmo = 10;	/* look at the share again soon */
		ret = fw->xp->wait_any(fw->xctx, tmo);
		if (!ret || ret == -ETIME || ret == -EINTR)
			continue;
		/* The transport fails: let it say so for one transfer. */
		h = nzi_sched_critical(fw, &op);
		if (h && !fw->xp->wait(fw->xctx, h, tmo, &res))
			nzi_sched_complete(fw, op, res);
	}
}

/* ---- Entry points ---- */

static int nzi_call(struct nz_comm *comm, struct nzi_args *a,
		    struct nz_coll_request **req, bool nonblocking)
{
	if (nonblocking && !req)
		return nzi_error(-EINVAL, "%s: NULL request pointer", nzi_coll_names[a->coll]);
	return nzi_start(comm, a, nonblocking ? req : NULL);
}

#define NZI_ARGS(c, sb, rb, n, dt, o, rt) \
	((struct nzi_args){ .coll = (c), .sendbuf = (sb), .recvbuf = (rb), \
			    .count = (n), .dtype = (dt), .op = (o), .root = (rt) })

int nz_iallreduce(struct nz_comm *comm, const void *sendbuf, void *recvbuf,
		  size_t count, enum nz_dtype dtype, enum nz_redop op,
		  struct nz_coll_request **req)
{
	struct nzi_args a = NZI_ARGS(NZ_COLL_ALLREDUCE, sendbuf, recvbuf, count, dtype, op, 0);

	return nzi_call(comm, &a, req, true);
}

int nz_allreduce(struct nz_comm *comm, const void *sendbuf, void *recvbuf,
		 size_t count, enum nz_dtype dtype, enum nz_redop op)
{
	struct nzi_args a = NZI_ARGS(NZ_COLL_ALLREDUCE, sendbuf, recvbuf, count, dtype, op, 0);

	return nzi_call(comm, &a, NULL, false);
}

int nz_ibroadcast(struct nz_comm *comm, const void *sendbuf, void *recvbuf,
		  size_t count, enum nz_dtype dtype, int root,
		  struct nz_coll_request **req)
{
	struct nzi_args a = NZI_ARGS(NZ_COLL_BROADCAST, sendbuf, recvbuf, count, dtype, 0, root);

	return nzi_call(comm, &a, req, true);
}

int nz_broadcast(struct nz_comm *comm, const void *sendbuf, void *recvbuf,
		 size_t count, enum nz_dtype dtype, int root)
{
	struct nzi_args a = NZI_ARGS(NZ_COLL_BROADCAST, sendbuf, recvbuf, count, dtype, 0, root);

	return nzi_call(comm, &a, NULL, false);
}

int nz_ireduce(struct nz_comm *comm, const void *sendbuf, void *recvbuf,
	       size_t count, enum nz_dtype dtype, enum nz_redop op, int root,
	       struct nz_coll_request **req)
{
	struct nzi_args a = NZI_ARGS(NZ_COLL_REDUCE, sendbuf, recvbuf, count, dtype, op, root);

	return nzi_call(comm, &a, req, true);
}

int nz_reduce(struct nz_comm *comm, const void *sendbuf, void *recvbuf,
	      size_t count, enum nz_dtype dtype, enum nz_redop op, int root)
{
	struct nzi_args a = NZI_ARGS(NZ_COLL_REDUCE, sendbuf, recvbuf, count, dtype, op, root);

	return nzi_call(comm, &a, NULL, false);
}

int nz_iallgather(struct nz_comm *comm, const void *sendbuf, void *recvbuf,
		  size_t count, enum nz_dtype dtype, struct nz_coll_request **req)
{
	struct nzi_args a = NZI_ARGS(NZ_COLL_ALLGATHER, sendbuf, recvbuf, count, dtype, 0, 0);

	return nzi_call(comm, &a, req, true);
}

int nz_allgather(struct nz_comm *comm, const void *sendbuf, void *recvbuf,
		 size_t count, enum nz_dtype dtype)
{
	struct nzi_args a = NZI_ARGS(NZ_COLL_ALLGATHER, sendbuf, recvbuf, count, dtype, 0, 0);

	return nzi_call(comm, &a, NULL, false);
}

int nz_ireduce_scatter(struct nz_comm *comm, const void *sendbuf,
		       void *recvbuf, size_t count, enum nz_dtype dtype,
		       enum nz_redop op, struct nz_coll_request **req)
{
	struct nzi_args a = NZI_ARGS(NZ_COLL_REDUCE_SCATTER, sendbuf, recvbuf, count, dtype, op, 0);

	return nzi_call(comm, &a, req, true);
}

int nz_reduce_scatter(struct nz_comm *comm, const void *sendbuf,
		      void *recvbuf, size_t count, enum nz_dtype dtype,
		      enum nz_redop op)
{
	struct nzi_args a = NZI_ARGS(NZ_COLL_REDUCE_SCATTER, sendbuf, recvbuf, count, dtype, op, 0);

	return nzi_call(comm, &a, NULL, false);
}

int nz_ialltoall(struct nz_comm *comm, const void *sendbuf, void *recvbuf,
		 size_t count, enum nz_dtype dtype, struct nz_coll_request **req)
{
	struct nzi_args a = NZI_ARGS(NZ_COLL_ALLTOALL, sendbuf, recvbuf, count, dtype, 0, 0);

	return nzi_call(comm, &a, req, true);
}

int nz_alltoall(struct nz_comm *comm, const void *sendbuf, void *recvbuf,
		size_t count, enum nz_dtype dtype)
{
	struct nzi_args a = NZI_ARGS(NZ_COLL_ALLTOALL, sendbuf, recvbuf, count, dtype, 0, 0);

	return nzi_call(comm, &a, NULL, false);
}

int nz_ibarrier(struct nz_comm *comm, struct nz_coll_request **req)
{
	struct nzi_args a = NZI_ARGS(NZ_COLL_BARRIER, NULL, NULL, 0, NZ_UINT8, 0, 0);

	return nzi_call(comm, &a, req, true);
}

int nz_barrier(struct nz_comm *comm)
{
	struct nzi_args a = NZI_ARGS(NZ_COLL_BARRIER, NULL, NULL, 0, NZ_UINT8, 0, 0);

	return nzi_call(comm, &a, NULL, false);
}
