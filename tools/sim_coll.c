// SPDX-License-Identifier: GPL-2.0
/*
 * nezha-sim's collectives: libnezha's own schedules over the modelled
 * network (Documentation/sim.rst).
 *
 * For every rank the DAG of an allreduce is built exactly as nz_allreduce()
 * builds it -- nz_coll_select() picks the algorithm, nzi_build()
 * (coll_algo.c) makes the sends, receives and reductions with their
 * dependencies -- and then executed here in simulated time instead of by
 * coll_sched.c's engine: a send becomes a message of sim_net (done when
 * acknowledged, as its CQE is), a receive completes when its message has
 * arrived whole, a local operation takes bytes / reduce_rate of its rank's
 * CPU.  The buffers are never touched: only their addresses are recorded.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "nezha.h"
#include "coll.h"
#include "sim.h"

struct cop {
	uint8_t kind;		/* enum nzi_op_kind */
	int32_t peer;
	uint32_t tag;
	uint64_t bytes;
	uint32_t deps;		/* as built */
	uint32_t ndeps;		/* not done yet, this iteration */
	uint32_t succ, nsucc;
	bool ready, arrived, done;
};

struct crank {
	struct cop *ops;
	uint32_t nops, ndone;
	uint32_t *succ;
	uint32_t *recv_idx;	/* receive ops sorted by (peer, tag) */
	uint32_t nrecv;
	uint64_t cpu_free;
};

struct csim {
	struct sim_cfg cfg;
	struct sim_net *net;
	struct crank *rank;
	int n;
	uint64_t last;		/* last op done */
	uint64_t *work;		/* ranks and ops to make ready: rank << 32 | op */
	size_t nwork, capwork;
	int err;
};

/* ---- building the DAGs with libnezha ---- */

static int dummy_isend(void *ctx, const void *buf, size_t len, int peer,
		       uint64_t tag, void **handle)
{
	(void)ctx; (void)buf; (void)len; (void)peer; (void)tag; (void)handle;
	return -EOPNOTSUPP;
}

static int dummy_irecv(void *ctx, void *buf, size_t len, int peer,
		       uint64_t tag, void **handle)
{
	(void)ctx; (void)buf; (void)len; (void)peer; (void)tag; (void)handle;
	return -EOPNOTSUPP;
}

static int dummy_test(void *ctx, void *handle, int64_t *res)
{
	(void)ctx; (void)handle; (void)res;
	return -EOPNOTSUPP;
}

static int dummy_wait(void *ctx, void *handle, int timeout_ms, int64_t *res)
{
	(void)ctx; (void)handle; (void)timeout_ms; (void)res;
	return -EOPNOTSUPP;
}

static int dummy_wait_any(void *ctx, int timeout_ms)
{
	(void)ctx; (void)timeout_ms;
	return -EOPNOTSUPP;
}

/* The schedule is built, never run: no transfer reaches this. */
static const struct nzi_coll_xport sim_xport = {
	.isend = dummy_isend, .irecv = dummy_irecv, .test = dummy_test,
	.wait = dummy_wait, .wait_any = dummy_wait_any,
};

static const struct crank *cmp_rank;

static int cmp_recv(const void *a, const void *b)
{
	const struct cop *x = &cmp_rank->ops[*(const uint32_t *)a];
	const struct cop *y = &cmp_rank->ops[*(const uint32_t *)b];

	if (x->peer != y->peer)
		return x->peer < y->peer ? -1 : 1;
	return x->tag < y->tag ? -1 : x->tag > y->tag;
}

/* Copy the DAG nzi_build() made into cr; the schedule is then freed. */
static int take_dag(struct crank *cr, const struct nzi_sched *s)
{
	uint32_t *cnt;

	cr->nops = s->nops;
	cr->ops = calloc(s->nops + 1, sizeof(*cr->ops));
	cr->succ = malloc((s->nedges + 1) * sizeof(*cr->succ));
	cr->recv_idx = malloc((s->nops + 1) * sizeof(*cr->recv_idx));
	cnt = calloc(s->nops + 1, sizeof(*cnt));
	if (!cr->ops || !cr->succ || !cr->recv_idx || !cnt) {
		free(cnt);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < s->nops; i++) {
		const struct nzi_op *o = &s->ops[i];
		struct cop *c = &cr->ops[i];

		c->kind = o->kind;
		c->peer = o->peer;
		c->tag = o->tag;
		c->bytes = o->len;
		/* Reductions count elements (float32 here). */
		if (o->kind == NZI_OP_REDUCE || o->kind == NZI_OP_AVG)
			c->bytes = o->len * sizeof(float);
		if (o->kind == NZI_OP_RECV)
			cr->recv_idx[cr->nrecv++] = i;
	}
	for (uint32_t e = 0; e < s->nedges; e++) {
		cr->ops[s->edges[e].to].deps++;
		cnt[s->edges[e].from]++;
	}
	for (uint32_t i = 0, at = 0; i < s->nops; i++) {
		cr->ops[i].succ = at;
		at += cnt[i];
		cnt[i] = 0;
	}
	for (uint32_t e = 0; e < s->nedges; e++) {
		struct cop *f = &cr->ops[s->edges[e].from];

		cr->succ[f->succ + cnt[s->edges[e].from]++] = s->edges[e].to;
		f->nsucc++;
	}
	free(cnt);
	cmp_rank = cr;
	qsort(cr->recv_idx, cr->nrecv, sizeof(*cr->recv_idx), cmp_recv);
	return 0;
}

static int build_rank(struct crank *cr, int rank, int n, uint64_t bytes,
		      int algo, const void *sb, void *rb, int *used)
{
	struct nz_coll_tuning t;
	struct nzi_hdr hdr = { 0 };
	struct nzi_args a = { 0 };
	struct nzi_sched s;
	struct nz_comm *comm;
	int ret;

	ret = nzi_coll_comm_new(&comm, rank, n, &sim_xport, NULL);
	if (ret)
		return ret;
	ret = nz_coll_get_tuning(comm, &t);
	if (ret)
		goto out;
	a.coll = NZ_COLL_ALLREDUCE;
	a.algo = algo >= 0 ? (enum nz_coll_algo)algo :
		 nz_coll_select(comm, NZ_COLL_ALLREDUCE, bytes);
	a.sendbuf = sb;
	a.recvbuf = rb;
	a.count = bytes / sizeof(float);
	a.dtype = NZ_FLOAT32;
	a.op = NZ_SUM;
	a.segment = t.segment;
	a.small_segment = t.small_segment;
	a.window = t.window;
	hdr.coll = NZ_COLL_ALLREDUCE;
	hdr.dtype = NZ_FLOAT32;
	hdr.op = NZ_SUM;
	hdr.algo = (uint8_t)a.algo;
	hdr.count = a.count;
	*used = (int)a.algo;
	nzi_sched_init(&s, comm, &hdr);
	ret = nzi_build(&s, &a);
	if (!ret)
		ret = take_dag(cr, &s);
	nzi_sched_free(&s);
out:
	nz_comm_destroy(comm);
	return ret;
}

/* ---- executing them ---- */

static int work_push(struct csim *cs, int rank, uint32_t op)
{
	if (cs->nwork == cs->capwork) {
		size_t cap = cs->capwork ? 2 * cs->capwork : 256;
		uint64_t *w = realloc(cs->work, cap * sizeof(*w));

		if (!w)
			return -ENOMEM;
		cs->work = w;
		cs->capwork = cap;
	}
	cs->work[cs->nwork++] = (uint64_t)rank << 32 | op;
	return 0;
}

static void run_work(struct csim *cs);

static void op_done(struct csim *cs, int rank, uint32_t i)
{
	struct crank *cr = &cs->rank[rank];
	struct cop *o = &cr->ops[i];
	uint64_t now = sim_now(cs->net);

	o->done = true;
	cr->ndone++;
	if (now > cs->last)
		cs->last = now;
	for (uint32_t k = 0; k < o->nsucc; k++) {
		uint32_t j = cr->succ[o->succ + k];

		if (!--cr->ops[j].ndeps && work_push(cs, rank, j))
			cs->err = -ENOMEM;
	}
}

static void local_done(void *ctx, uint64_t arg)
{
	struct csim *cs = ctx;

	op_done(cs, (int)(arg >> 32), (uint32_t)arg);
	run_work(cs);
}

static void make_ready(struct csim *cs, int rank, uint32_t i)
{
	struct crank *cr = &cs->rank[rank];
	struct cop *o = &cr->ops[i];
	uint64_t now = sim_now(cs->net), start, dur = 0;

	o->ready = true;
	switch (o->kind) {
	case NZI_OP_SEND:
		if (!sim_send(cs->net, rank, o->peer, o->bytes, i))
			cs->err = -ENOMEM;
		return;
	case NZI_OP_RECV:
		if (o->arrived)
			op_done(cs, rank, i);
		return;
	case NZI_OP_NOP:
		op_done(cs, rank, i);
		return;
	default:
		break;
	}
	if (cs->cfg.reduce_rate > 0)
		dur = (uint64_t)((double)o->bytes / cs->cfg.reduce_rate * 1e9);
	start = cr->cpu_free > now ? cr->cpu_free : now;
	cr->cpu_free = start + dur;
	if (cr->cpu_free == now)
		op_done(cs, rank, i);
	else if (sim_at(cs->net, cr->cpu_free, local_done, cs,
			(uint64_t)rank << 32 | i))
		cs->err = -ENOMEM;
}

static void run_work(struct csim *cs)
{
	while (cs->nwork && !cs->err) {
		uint64_t w = cs->work[--cs->nwork];

		make_ready(cs, (int)(w >> 32), (uint32_t)w);
	}
}

static struct cop *find_recv(struct crank *cr, int peer, uint32_t tag)
{
	size_t lo = 0, hi = cr->nrecv;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		struct cop *o = &cr->ops[cr->recv_idx[mid]];

		if (o->peer == peer && o->tag == tag)
			return o;
		if (o->peer < peer || (o->peer == peer && o->tag < tag))
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static void on_msg(void *ctx, struct sim_msg *m, bool delivered)
{
	struct csim *cs = ctx;
	int src = sim_msg_src(m), dst = sim_msg_dst(m);
	uint32_t si = (uint32_t)sim_msg_key(m);
	struct crank *d = &cs->rank[dst];
	struct cop *r;

	if (!delivered) {
		op_done(cs, src, si);
		run_work(cs);
		return;
	}
	r = find_recv(d, src, cs->rank[src].ops[si].tag);
	if (!r) {
		cs->err = -EPROTO;
		return;
	}
	r->arrived = true;
	if (r->ready && !r->done)
		op_done(cs, dst, (uint32_t)(r - d->ops));
	run_work(cs);
}

static void free_ranks(struct csim *cs)
{
	for (int i = 0; cs->rank && i < cs->n; i++) {
		free(cs->rank[i].ops);
		free(cs->rank[i].succ);
		free(cs->rank[i].recv_idx);
	}
	free(cs->rank);
	free(cs->work);
}

/* The Gloo and MPTCP models run libnezha's ring on their own links. */
static void model_cfg(const struct sim_cfg *in, struct sim_cfg *out)
{
	double sum = 0, failed = 0;
	uint64_t lat = SIM_NEVER, fail = SIM_NEVER;
	int fnode = -1;

	*out = *in;
	if (in->model == SIM_NEZHA)
		return;
	out->algo = NZ_ALGO_RING;
	if (in->model != SIM_MPTCP)
		return;
	/* MPTCP's subflows are TCP: an RDMA rail adds nothing to it. */
	for (int r = 0; r < in->nrails; r++) {
		if (in->rail[r].rdma)
			continue;
		sum += in->rail[r].rate;
		if (in->rail[r].lat_ns < lat)
			lat = in->rail[r].lat_ns;
		if (in->rail[r].fail_ns != SIM_NEVER) {
			failed += in->rail[r].rate;
			fail = in->rail[r].fail_ns;
			fnode = in->rail[r].fail_node;
		}
	}
	if (sum <= 0) {		/* no TCP rail: MPTCP has nothing */
		sum = in->rail[0].rate;
		lat = in->rail[0].lat_ns;
	}
	out->nrails = 1;
	out->rail[0].rate = sum * (1 - in->mptcp_overhead);
	out->rail[0].lat_ns = lat;
	out->rail[0].rdma = false;
	out->rail[0].fail_ns = fail;
	out->rail[0].fail_node = fnode;
	out->rail[0].degrade = true;
	out->rail[0].stall_ns = in->mptcp_stall_ns;
	out->rail[0].rate_after = (sum - failed) * (1 - in->mptcp_overhead);
	/* The same chunk grain as Nezha's run, so that only the links differ. */
	if (!out->unit)
		out->unit = sim_auto_unit(in);
}

int sim_allreduce(const struct sim_cfg *cfg, uint64_t bytes, int iters,
		  struct sim_result *r)
{
	struct csim cs = { .n = cfg->nodes };
	void *sb = NULL, *rb = NULL;
	uint64_t t0 = 0;
	int ret = 0;

	memset(r, 0, sizeof(*r));
	model_cfg(cfg, &cs.cfg);
	if (cs.cfg.model == SIM_GLOO && !cs.cfg.unit)
		cs.cfg.unit = sim_auto_unit(cfg);
	if (cfg->nodes < 1 || cfg->nrails < 1 || cfg->nrails > SIM_MAX_RAILS ||
	    iters < 1)
		return -EINVAL;
	bytes &= ~(uint64_t)(sizeof(float) - 1);
	if (!bytes)
		bytes = sizeof(float);
	/* Addresses for the builder only: never written, never read. */
	sb = malloc(bytes);
	rb = malloc(bytes);
	cs.rank = calloc((size_t)cfg->nodes, sizeof(*cs.rank));
	cs.net = sim_net_new(&cs.cfg, on_msg, &cs);
	if (!sb || !rb || !cs.rank || !cs.net) {
		ret = -ENOMEM;
		goto out;
	}
	for (int i = 0; i < cfg->nodes && !ret; i++)
		ret = build_rank(&cs.rank[i], i, cfg->nodes, bytes, cs.cfg.algo,
				 sb, rb, &r->algo);
	for (int it = 0; it < iters && !ret; it++) {
		t0 = sim_now(cs.net);
		if (it == iters - 1 && sim_arm_failures(cs.net, t0)) {
			ret = -ENOMEM;
			break;
		}
		cs.last = t0;
		for (int i = 0; i < cfg->nodes; i++) {
			struct crank *cr = &cs.rank[i];

			cr->ndone = 0;
			cr->cpu_free = t0;
			for (uint32_t k = 0; k < cr->nops; k++) {
				struct cop *o = &cr->ops[k];

				o->ndeps = o->deps;
				o->ready = o->arrived = o->done = false;
			}
		}
		for (int i = 0; i < cfg->nodes; i++)
			for (uint32_t k = 0; k < cs.rank[i].nops; k++)
				if (!cs.rank[i].ops[k].deps)
					work_push(&cs, i, k);
		run_work(&cs);
		sim_run(cs.net);
		ret = cs.err;
		for (int i = 0; i < cfg->nodes && !ret; i++)
			if (cs.rank[i].ndone != cs.rank[i].nops)
				ret = -ENETDOWN;
	}
	r->ns = cs.last - t0;
	r->err = ret;
	sim_stats(cs.net, r);
	if (ret == -ENETDOWN)
		ret = 0;	/* a result: the collective cannot finish */
out:
	sim_net_free(cs.net);
	free_ranks(&cs);
	free(sb);
	free(rb);
	return ret;
}

/* ---- point to point ---- */

struct p2p {
	struct sim_net *net;
	uint64_t delivered;
};

static void p2p_msg(void *ctx, struct sim_msg *m, bool delivered)
{
	struct p2p *p = ctx;

	(void)m;
	if (delivered)
		p->delivered = sim_now(p->net);
}

int sim_p2p(const struct sim_cfg *cfg, uint64_t bytes, struct sim_result *r)
{
	struct sim_cfg c;
	struct p2p p = { 0 };

	memset(r, 0, sizeof(*r));
	if (cfg->nodes < 2)
		return -EINVAL;
	model_cfg(cfg, &c);
	if (!c.unit)
		c.unit = sim_auto_unit(cfg);
	p.net = sim_net_new(&c, p2p_msg, &p);
	if (!p.net)
		return -ENOMEM;
	if (sim_arm_failures(p.net, 0) || !sim_send(p.net, 0, 1, bytes, 0)) {
		sim_net_free(p.net);
		return -ENOMEM;
	}
	sim_run(p.net);
	r->err = sim_stuck(p.net) ? -ENETDOWN : 0;
	r->ns = p.delivered;
	sim_stats(p.net, r);
	sim_net_free(p.net);
	return 0;
}
