// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libnezha: an allreduce split between the aggregation rail and the
 * point-to-point rails (Documentation/aggregation.rst, "The split").
 *
 * A split allreduce of count elements sends its first k elements (the
 * *share*) through the aggregation node and runs the usual schedule over
 * the rest on the point-to-point rails, both at once.  Then every rank
 * takes part in an *agreement*: a small allreduce (MAX) on the
 * point-to-point rails of three numbers -- whether its share failed, how
 * long its share took, how long its part of the ring took.  If any rank's
 * share failed (the node or its link died, the node refused), every rank
 * puts the share's input back and reduces it on the point-to-point rails
 * (the *redo*), and the communicator stops using the node.  So the
 * allreduce completes with correct data whatever happens to the node, and
 * every rank decides the same: the agreement is what a rank whose share
 * finished cannot know alone (another rank's may not have).
 *
 * The split k is a function of the arguments and of state every rank
 * holds alike -- the measured times come from the agreements, which hand
 * every rank the same maxima -- so every rank cuts the same k without a
 * word exchanged ("The cut" below).  An allreduce below min_bytes is not
 * split: the agreement costs a small allreduce of its own, more than the
 * node could save on a small one.
 *
 * The share runs in a thread of the communicator, which owns the node's
 * socket (agg_client.c is a loop with its own retransmission timers); the
 * collectives' engine only looks at whether it is done.  Sequence numbers:
 * a split allreduce takes three (its schedule, the agreement, the redo),
 * every rank alike.
 *
 * One agreement at a time.  What an agreement teaches (the rates, the
 * node off or on again) decides the next allreduces' cut, so every rank
 * must have learnt it before the same allreduce: an allreduce that could
 * be split waits, when it starts, for the agreement of the one before it
 * (non-blocking allreduces started back to back would otherwise be cut by
 * a rank that has seen that agreement and by one that has not).  Only
 * allreduces of NEZHA_AGG_MIN bytes or more wait, and only while a node
 * is attached.
 *
 * Coming back.  Once off, the communicator's thread joins the node again
 * in the background, as a new job (the job id and an epoch), once the
 * module finds the aggregation rail up again (or, with NEZHA_AGG_NODE, at
 * growing intervals), and keeps that join alive.  Every
 * NZI_AGG_PROBE_EVERY-th allreduce that could be split is then a probe
 * whose agreement also says whether every rank has joined; if so, every
 * rank uses the node again, its cut cold.  A node unreachable when the
 * communicator is created is the same case: off from the start.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "agg_client.h"
#include "agg_wire.h"
#include "coll.h"

#define NZI_AGG_WARM		2	/* agreed samples before the rates count */
#define NZI_AGG_SAMPLE_MIN	(64u << 10)	/* bytes: shorter parts measure latency */
#define NZI_AGG_FMIN		0.05
#define NZI_AGG_FMAX		0.95
#define NZI_AGG_QUANTUM		1024	/* bytes: the node's payload per block */
#define NZI_AGG_DEF_MIN		(1u << 20)
#define NZI_AGG_PROBE_EVERY	16	/* eligible allreduces per probe */
#define NZI_AGG_WORSE		1.05	/* a split this much slower: shrink */
#define NZI_AGG_BETTER		0.95	/* this much faster: grow again */
#define NZI_AGG_SHRINK		0.5
#define NZI_AGG_GROW		1.25
/* Off: join again after this, doubling to the maximum while the node does
 * not answer (the module's rail, if any, is looked at every RETRY). */
#define NZI_AGG_RETRY_MS	1000
#define NZI_AGG_RETRY_MAX_MS	30000
#define NZI_AGG_JOIN_MS		2000	/* one join's bound */
#define NZI_AGG_REFRESH_MS	20000	/* a join kept alive (the node's idle
					 * reaping: 60 s by default) */

enum { NZI_AP_RUN, NZI_AP_AGREE, NZI_AP_REDO, NZI_AP_END };
enum { NZI_AV_FAIL, NZI_AV_T_AGG, NZI_AV_T_RING, NZI_AV_NOTREADY, NZI_AV_LEN };

struct nzi_agg_part {
	struct nzi_agg_part *next;	/* the worker's queue */
	struct nzi_coll_agg *ca;
	bool started;			/* counted in ca->pending until END */
	bool resume;			/* a probe that may turn the node on */
	bool lent;			/* it holds ca->ready still (ca->lent) */
	uint8_t *buf;			/* the share, at the start of recvbuf */
	const void *input;		/* its input: sendbuf, or backup */
	void *backup;			/* in place: a copy of the input */
	size_t count, bytes, ring_bytes;
	enum nz_dtype dtype;
	enum nz_redop op;
	bool done;			/* the worker's, under ca->mu */
	int ret;
	int64_t t_agg_us, t_start_us, t_ring_us;
	int phase;
	uint32_t seq_agree, seq_redo;
	int64_t av_in[NZI_AV_LEN], av_out[NZI_AV_LEN];
	struct nzi_sched s2;		/* the agreement, then the redo */
	bool s2_live;
	int result;
};

struct nzi_coll_agg {
	struct nzi_agg *agg;
	pthread_t tid;
	pthread_mutex_t mu;
	pthread_cond_t work, done;
	struct nzi_agg_part *head, *tail;
	bool stop;
	/* Agreed state: the same on every rank. */
	bool off;
	struct nzi_agg_cut cut;
	size_t min_bytes;
	double fixed;			/* > 0: this share, always (benchmarks) */
	uint64_t epoch;			/* joins anew since the first */
	uint64_t off_eligible;		/* allreduces that could be split, off */
	unsigned int pending;		/* measured allreduces not yet agreed */
	struct nzi_coll_agg_stats st;
	/* Joining again: how (this rank's), and the thread's state under mu. */
	struct nzi_agg_tmpl tmpl;
	int rail_fd;			/* /dev/nezha, -1: none */
	char rail[NZ_RAIL_NAME_LEN];	/* "": no rail to wait for */
	atomic_bool abort;		/* a join under way ends */
	bool want;			/* off: join again */
	struct nzi_agg *ready;		/* joined for epoch + 1 */
	bool lent;			/* a probe counts on ready: leave it be */
	int64_t ready_ms, next_try_ms, backoff_ms;
};

/* Wait on cond (mu held) for at most ms. */
static void nzi_cond_wait_ms(pthread_cond_t *cond, pthread_mutex_t *mu, int64_t ms)
{
	struct timespec ts;

	if (ms < 1)
		ms = 1;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	ts.tv_sec += ts.tv_nsec / 1000000000;
	ts.tv_nsec %= 1000000000;
	pthread_cond_timedwait(cond, mu, &ts);
}

/*
 * The rail's state as the module's sysfs shows it: 1 up, 0 not, -1 when
 * sysfs cannot tell (not mounted, as in some containers, or no such rail).
 * It reads the state alone, where NZ_IOC_RAIL_LIST takes RTNL to read
 * every rail's speed afresh: a communicator whose node is off asks every
 * NZI_AGG_RETRY_MS, and each rank of a node has one.
 */
static int nzi_agg_rail_state_sysfs(const char *rail)
{
	char path[48 + NZ_RAIL_NAME_LEN], state[32];
	FILE *f;
	int up = -1;

	if (strchr(rail, '/'))
		return -1;
	snprintf(path, sizeof(path), "/sys/class/nezha/rail-%.*s/state",
		 NZ_RAIL_NAME_LEN, rail);
	f = fopen(path, "re");
	if (!f)
		return -1;
	if (fgets(state, sizeof(state), f))
		up = !strcmp(state, "up\n");
	fclose(f);
	return up;
}

/* The module finds the aggregation rail up (or there is no rail). */
static bool nzi_agg_rail_up(const struct nzi_coll_agg *ca)
{
	struct nz_rail_info info[NZ_MAX_RAILS];
	unsigned int n;
	int up;

	if (!ca->rail[0])
		return true;
	up = nzi_agg_rail_state_sysfs(ca->rail);
	if (up >= 0)
		return up;
	/* The thread's own question: nz_last_error() is the caller's. */
	if (ca->rail_fd < 0 || nzi_rail_info_read(ca->rail_fd, info, &n))
		return false;
	for (unsigned int i = 0; i < n; i++)
		if (info[i].proto == NZ_PROTO_AGG &&
		    !strncmp(info[i].name, ca->rail, NZ_RAIL_NAME_LEN))
			return info[i].state == NZ_RAIL_UP;
	return false;
}

/* Join the node as the job's epoch: a job of its own at the node, so
 * that no slot of the old one (a block some ranks sent before it failed)
 * is met again. */
static int nzi_agg_join_epoch(struct nzi_coll_agg *ca, uint64_t epoch, struct nzi_agg **out)
{
	struct nzi_agg_cfg cfg = ca->tmpl.cfg;

	if (!cfg.node || !cfg.key)	/* never joinable from this rank */
		return -ENOKEY;
	cfg.job_id ^= epoch * 0x9e3779b97f4a7c15ull;
	if (!cfg.timeout_ms || cfg.timeout_ms > NZI_AGG_JOIN_MS)
		cfg.timeout_ms = NZI_AGG_JOIN_MS;
	cfg.abort = &ca->abort;
	return nzi_agg_join(&cfg, out);
}

/*
 * The thread, off: join for the next epoch, or keep that join alive.
 * Called and returns with ca->mu held; talks to the node without it.
 */
static void nzi_agg_try(struct nzi_coll_agg *ca)
{
	struct nzi_agg *a = ca->ready, *drop = NULL;
	uint64_t epoch = ca->epoch + 1;
	int64_t now = nzi_now_ms();
	int ret;

	if (ca->lent || (a && now - ca->ready_ms < NZI_AGG_REFRESH_MS)) {
		ca->next_try_ms = ca->lent ? now + NZI_AGG_RETRY_MS :
					     ca->ready_ms + NZI_AGG_REFRESH_MS;
		return;
	}
	ca->ready = NULL;	/* the thread's while it talks to the node */
	pthread_mutex_unlock(&ca->mu);
	if (!nzi_agg_rail_up(ca))
		ret = -ENETUNREACH;
	else if (a)
		ret = nzi_agg_rejoin(a);
	else
		ret = nzi_agg_join_epoch(ca, epoch, &a);
	if (ret) {
		drop = a;
		a = NULL;
	}
	pthread_mutex_lock(&ca->mu);
	now = nzi_now_ms();
	if (a && ca->want && !ca->stop && ca->epoch + 1 == epoch && !ca->ready) {
		ca->ready = a;
		ca->ready_ms = now;
		ca->next_try_ms = now + NZI_AGG_REFRESH_MS;
		ca->backoff_ms = NZI_AGG_RETRY_MS;
		a = NULL;
	} else if (ret == -ENETUNREACH) {
		ca->next_try_ms = now + NZI_AGG_RETRY_MS;	/* the module watches */
	} else if (ret) {
		ca->next_try_ms = now + ca->backoff_ms;
		ca->backoff_ms = 2 * ca->backoff_ms < NZI_AGG_RETRY_MAX_MS ?
				 2 * ca->backoff_ms : NZI_AGG_RETRY_MAX_MS;
	}
	pthread_mutex_unlock(&ca->mu);
	nzi_agg_close(drop);
	nzi_agg_close(a);	/* no longer wanted */
	pthread_mutex_lock(&ca->mu);
}

static void *nzi_agg_worker(void *arg)
{
	struct nzi_coll_agg *ca = arg;

	pthread_mutex_lock(&ca->mu);
	for (;;) {
		struct nzi_agg_part *p;
		int64_t t0;
		bool stop;
		int ret;

		while (!ca->head && !ca->stop) {
			int64_t wait = ca->next_try_ms - nzi_now_ms();

			if (!ca->want)
				pthread_cond_wait(&ca->work, &ca->mu);
			else if (wait > 0)
				nzi_cond_wait_ms(&ca->work, &ca->mu, wait);
			else
				nzi_agg_try(ca);
		}
		p = ca->head;
		if (!p)
			break;
		ca->head = p->next;
		if (!ca->head)
			ca->tail = NULL;
		stop = ca->stop;
		pthread_mutex_unlock(&ca->mu);
		t0 = nzi_now_us();
		ret = stop ? -ECANCELED :
		      nzi_agg_allreduce(ca->agg, p->buf, p->count, p->dtype, p->op);
		pthread_mutex_lock(&ca->mu);
		p->ret = ret;
		p->t_agg_us = nzi_now_us() - t0 + 1;
		p->done = true;
		pthread_cond_broadcast(&ca->done);
	}
	pthread_mutex_unlock(&ca->mu);
	return NULL;
}

/*
 * Attach a node to comm: joined as agg, or (agg NULL) off from the start,
 * to be joined later as tmpl says.  rail: the module's aggregation rail to
 * wait for, or NULL.
 */
static int nzi_agg_attach(struct nz_comm *comm, struct nzi_agg *agg,
			  const struct nzi_agg_cfg *tmpl, const char *rail, size_t min_bytes)
{
	struct nzi_coll_agg *ca;
	struct nzi_coll *c;
	int ret;

	if (!comm || (!agg && !tmpl) || comm->size < 2)
		return -EINVAL;
	ret = nzi_coll_get(comm, &c);
	if (ret)
		return ret;
	if (c->agg)
		return -EEXIST;
	ca = calloc(1, sizeof(*ca));
	if (!ca)
		return -ENOMEM;
	ca->agg = agg;
	ca->min_bytes = min_bytes;
	nzi_agg_cut_init(&ca->cut);
	if (tmpl)
		nzi_agg_tmpl_set(&ca->tmpl, tmpl);
	else
		nzi_agg_tmpl_of(&ca->tmpl, agg);
	ca->rail_fd = comm->q ? nz_queue_fd(comm->q) : -1;
	if (rail)
		snprintf(ca->rail, sizeof(ca->rail), "%s", rail);
	atomic_init(&ca->abort, false);
	ca->backoff_ms = NZI_AGG_RETRY_MS;
	if (!agg) {
		ca->off = true;
		ca->want = true;	/* the thread tries at once */
	}
	pthread_mutex_init(&ca->mu, NULL);
	pthread_cond_init(&ca->work, NULL);
	pthread_cond_init(&ca->done, NULL);
	ret = -pthread_create(&ca->tid, NULL, nzi_agg_worker, ca);
	if (ret) {
		pthread_cond_destroy(&ca->done);
		pthread_cond_destroy(&ca->work);
		pthread_mutex_destroy(&ca->mu);
		free(ca);
		return ret;
	}
	c->agg = ca;
	return 0;
}

int nzi_coll_agg_attach(struct nz_comm *comm, struct nzi_agg *agg, size_t min_bytes)
{
	return agg ? nzi_agg_attach(comm, agg, NULL, NULL, min_bytes) : -EINVAL;
}

/* Stop the worker (a share under way ends within a retransmission
 * timeout) and close the node's client.  Shares still queued, and the one
 * under way, end with -ECANCELED. */
void nzi_coll_agg_release(struct nzi_coll *c)
{
	struct nzi_coll_agg *ca = c->agg;

	if (!ca)
		return;
	/* Requests still held (the caller's, or detached) are freed after
	 * this: their parts no longer count anything in ca. */
	for (struct nz_coll_request *r = c->head; r; r = r->next)
		if (r->agg)
			r->agg->ca = NULL;
	pthread_mutex_lock(&ca->mu);
	ca->stop = true;
	pthread_cond_broadcast(&ca->work);
	pthread_mutex_unlock(&ca->mu);
	nzi_agg_cancel(ca->agg);	/* a share under way: not its timeout */
	atomic_store(&ca->abort, true);	/* a join under way */
	pthread_join(ca->tid, NULL);
	nzi_agg_close(ca->agg);
	nzi_agg_close(ca->ready);
	pthread_cond_destroy(&ca->done);
	pthread_cond_destroy(&ca->work);
	pthread_mutex_destroy(&ca->mu);
	free(ca);
	c->agg = NULL;
}

int nzi_coll_agg_fix(struct nz_comm *comm, double share)
{
	struct nzi_coll_agg *ca = comm && comm->coll ? comm->coll->agg : NULL;

	if (!ca)
		return -ENOENT;
	if (!(share >= 0 && share <= 1))
		return -EINVAL;
	ca->fixed = share;
	return 0;
}

int nzi_coll_agg_stats(struct nz_comm *comm, struct nzi_coll_agg_stats *out)
{
	struct nzi_coll_agg *ca = comm && comm->coll ? comm->coll->agg : NULL;

	if (!ca || !out)
		return -ENOENT;
	*out = ca->st;
	out->off = ca->off;
	pthread_mutex_lock(&ca->mu);
	out->ready = ca->ready != NULL;
	pthread_mutex_unlock(&ca->mu);
	out->paused = ca->cut.paused;
	out->rate_agg = ca->cut.rate_agg;
	out->rate_ring = ca->cut.rate_ring;
	out->scale = ca->cut.scale;
	return 0;
}

static bool nzi_agg_supported(enum nz_dtype dt, enum nz_redop op)
{
	return (dt == NZ_FLOAT32 || dt == NZ_FLOAT16 || dt == NZ_BFLOAT16 || dt == NZ_INT32) &&
	       (op == NZ_SUM || op == NZ_AVG || op == NZ_MIN || op == NZ_MAX);
}

/*
 * The cut.  Every input is agreed, so every rank computes the same.
 *
 * The rates rule: k/count = R_node / (R_node + R_rails), the two rates
 * learnt (EWMA 1/4) from the agreed times of each part; half and half
 * while cold (fewer than NZI_AGG_WARM measured splits); within [5 %, 95 %]
 * so that both paths stay measured.  It is right when the two paths are
 * independent (a switch aggregating, NICs of their own), and blind when
 * they share what limits them (one CPU carrying both, as in TCG guests):
 * both parts then end together wherever the cut is, any cut looks
 * balanced, and a split can be slower than the rails alone.
 *
 * So a guard: every NZI_AGG_PROBE_EVERY eligible allreduces (and the first
 * of each size, by powers of two, once warm) one is a *probe*: the rails
 * alone, timed and agreed like a split.  A split whose agreed total time
 * per byte is NZI_AGG_WORSE times the rails alone's at that size halves a
 * scale on the rates' share; one NZI_AGG_BETTER times faster grows it
 * again (up to 1).  Below the 5 % minimum the node is *paused*: allreduces
 * are not split, except one at 5 % per NZI_AGG_PROBE_EVERY that tells
 * whether it has become worth it again (faster than the rails alone at
 * all: at 5 % it cannot gain more than 5 %).
 */
static unsigned int nzi_agg_bucket(uint64_t bytes)
{
	unsigned int b = 0;

	while (bytes >>= 1)
		b++;
	return b < NZI_AGG_BUCKETS ? b : NZI_AGG_BUCKETS - 1;
}

static double nzi_agg_rates_share(const struct nzi_agg_cut *c)
{
	if (c->samples < NZI_AGG_WARM || c->rate_agg + c->rate_ring <= 0)
		return 0.5;
	return c->rate_agg / (c->rate_agg + c->rate_ring);
}

void nzi_agg_cut_init(struct nzi_agg_cut *c)
{
	memset(c, 0, sizeof(*c));
	c->scale = 1;
}

struct nzi_agg_choice nzi_agg_cut_next(struct nzi_agg_cut *c, size_t bytes)
{
	uint64_t n = c->eligible++;
	double f;

	if (c->samples < NZI_AGG_WARM)
		return (struct nzi_agg_choice){ 0.5, true };
	if (!c->alone[nzi_agg_bucket(bytes)] || n % NZI_AGG_PROBE_EVERY == 0)
		return (struct nzi_agg_choice){ 0, true };
	if (c->paused)
		return n % NZI_AGG_PROBE_EVERY == NZI_AGG_PROBE_EVERY / 2 ?
		       (struct nzi_agg_choice){ NZI_AGG_FMIN, true } :
		       (struct nzi_agg_choice){ 0, false };
	f = nzi_agg_rates_share(c) * c->scale;
	if (f < NZI_AGG_FMIN)
		f = NZI_AGG_FMIN;
	if (f > NZI_AGG_FMAX)
		f = NZI_AGG_FMAX;
	return (struct nzi_agg_choice){ f, true };
}

static void nzi_agg_rate(double *rate, uint64_t bytes, int64_t us, bool first)
{
	double r = (double)bytes / (double)us;

	*rate = first ? r : 0.75 * *rate + 0.25 * r;
}

void nzi_agg_cut_learn(struct nzi_agg_cut *c, uint64_t agg_bytes, uint64_t ring_bytes,
		       int64_t t_agg_us, int64_t t_ring_us)
{
	uint64_t total = agg_bytes + ring_bytes;
	int64_t t = t_agg_us > t_ring_us ? t_agg_us : t_ring_us;
	double *alone = &c->alone[nzi_agg_bucket(total)], cost, f;

	if (total < NZI_AGG_SAMPLE_MIN || t <= 0)
		return;		/* latency, not rate */
	cost = (double)t / (double)total;
	if (!agg_bytes) {
		*alone = *alone > 0 ? 0.75 * *alone + 0.25 * cost : cost;
		return;
	}
	if (agg_bytes >= NZI_AGG_SAMPLE_MIN && ring_bytes >= NZI_AGG_SAMPLE_MIN &&
	    t_agg_us > 0 && t_ring_us > 0) {
		bool first = !c->samples;

		nzi_agg_rate(&c->rate_agg, agg_bytes, t_agg_us, first);
		nzi_agg_rate(&c->rate_ring, ring_bytes, t_ring_us, first);
		c->samples++;
	}
	if (*alone <= 0)
		return;
	f = nzi_agg_rates_share(c);
	if (cost > NZI_AGG_WORSE * *alone && !c->paused) {
		c->scale *= NZI_AGG_SHRINK;
		c->paused = f * c->scale < NZI_AGG_FMIN;
	} else if (cost < (c->paused ? 1 : NZI_AGG_BETTER) * *alone) {
		if (c->paused || f * c->scale < NZI_AGG_FMIN)
			c->scale = NZI_AGG_FMIN / f;	/* from the probe's share */
		c->paused = false;
		c->scale *= NZI_AGG_GROW;
		if (c->scale > 1)
			c->scale = 1;
	}
}

/* An allreduce the node could take part in, whatever the state. */
static bool nzi_agg_candidate(const struct nzi_coll_agg *ca, const struct nzi_args *a)
{
	return a->coll == NZ_COLL_ALLREDUCE && nzi_agg_supported(a->dtype, a->op) && a->count &&
	       a->count * nz_dtype_size(a->dtype) >= ca->min_bytes;
}

/* Elements of a candidate for the node, and whether to measure: the same
 * on every rank.  k 0 and measure: a probe of the rails alone (resume:
 * one that may turn the node on again). */
static size_t nzi_agg_share(struct nzi_coll_agg *ca, const struct nzi_args *a, bool *measure,
			    bool *resume)
{
	size_t es = nz_dtype_size(a->dtype), q = NZI_AGG_QUANTUM / es;
	struct nzi_agg_choice ch;

	*measure = *resume = false;
	if (ca->off) {
		*resume = *measure = ca->off_eligible++ % NZI_AGG_PROBE_EVERY ==
				     NZI_AGG_PROBE_EVERY - 1;
		return 0;
	}
	*measure = true;
	if (ca->fixed >= 1)
		return a->count;
	if (ca->fixed > 0)
		return (size_t)(ca->fixed * (double)a->count) / q * q;
	ch = nzi_agg_cut_next(&ca->cut, a->count * es);
	*measure = ch.measure;
	return (size_t)(ch.share * (double)a->count) / q * q;
}

/* A measured part started and not ended: counted in its ca->pending. */
static bool nzi_agg_counted(const struct nzi_agg_part *p)
{
	return p->ca && p->started && p->phase != NZI_AP_END;
}

/* Settle the measured allreduce not yet agreed on, if any (at most one). */
static void nzi_agg_settle_pending(struct nzi_coll *c, struct nzi_coll_agg *ca)
{
	if (ca->pending)
		ca->st.waits++;
	while (ca->pending) {
		struct nz_coll_request *r = c->head;

		while (r && !(r->agg && nzi_agg_counted(r->agg)))
			r = r->next;
		if (!r || r->finished) {
			ca->pending = 0;	/* not reached: every end is counted */
			break;
		}
		nzi_coll_settle(r);
	}
}

int nzi_agg_split(struct nzi_coll *c, struct nz_comm *comm, struct nzi_args *a,
		  struct nz_coll_request *req, size_t *total)
{
	struct nzi_coll_agg *ca = c->agg;
	struct nzi_agg_part *p;
	bool measure, resume;
	size_t k, es;

	if (!ca || comm->size < 2 || !nzi_agg_candidate(ca, a))
		return 0;
	/* Every rank cuts with what the last agreement taught (the head
	 * comment, "One agreement at a time"). */
	nzi_agg_settle_pending(c, ca);
	k = nzi_agg_share(ca, a, &measure, &resume);
	if (!measure)
		return 0;
	es = nz_dtype_size(a->dtype);
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->ca = ca;
	p->resume = resume;
	p->buf = a->recvbuf;
	p->count = k;
	p->bytes = k * es;
	p->dtype = a->dtype;
	p->op = a->op;
	p->input = a->sendbuf;
	if (!k) {
		/* a probe: the rails alone, agreed on */
	} else if (a->sendbuf == a->recvbuf) {
		p->backup = malloc(p->bytes);
		if (!p->backup) {
			free(p);
			return -ENOMEM;
		}
		memcpy(p->backup, a->sendbuf, p->bytes);
		p->input = p->backup;
	} else {
		memcpy(p->buf, a->sendbuf, p->bytes);
	}
	p->seq_agree = c->seq++;
	p->seq_redo = c->seq++;
	a->sendbuf = (const uint8_t *)a->sendbuf + p->bytes;
	a->recvbuf = (uint8_t *)a->recvbuf + p->bytes;
	a->count -= k;
	p->ring_bytes = a->count * es;
	*total = p->ring_bytes;
	req->agg = p;
	return 0;
}

void nzi_agg_start(struct nz_coll_request *req)
{
	struct nzi_coll_agg *ca = req->owner->agg;
	struct nzi_agg_part *p = req->agg;

	p->t_start_us = nzi_now_us();
	p->started = true;
	ca->pending++;
	if (!p->count) {
		ca->st.probes++;
		p->done = true;		/* nothing for the node */
		return;
	}
	ca->st.splits++;
	ca->st.splits_on++;
	ca->st.agg_bytes += p->bytes;
	ca->st.ring_bytes += p->ring_bytes;
	pthread_mutex_lock(&ca->mu);
	if (ca->tail)
		ca->tail->next = p;
	else
		ca->head = p;
	ca->tail = p;
	pthread_cond_signal(&ca->work);
	pthread_mutex_unlock(&ca->mu);
}

void nzi_agg_part_free(struct nzi_agg_part *p)
{
	if (!p)
		return;
	if (nzi_agg_counted(p))
		p->ca->pending--;
	if (p->ca && p->lent) {
		pthread_mutex_lock(&p->ca->mu);
		p->ca->lent = false;
		pthread_mutex_unlock(&p->ca->mu);
	}
	if (p->s2_live)
		nzi_sched_free(&p->s2);
	free(p->backup);
	free(p);
}

static bool nzi_agg_worker_done(struct nzi_coll_agg *ca, struct nzi_agg_part *p)
{
	bool done;

	pthread_mutex_lock(&ca->mu);
	done = p->done;
	pthread_mutex_unlock(&ca->mu);
	return done;
}

bool nzi_agg_waiting(const struct nz_coll_request *req)
{
	return req->agg && req->agg->phase == NZI_AP_RUN;
}

void nzi_agg_wait(struct nz_coll_request *req, int timeout_ms)
{
	struct nzi_coll_agg *ca = req->owner->agg;

	pthread_mutex_lock(&ca->mu);
	if (!req->agg->done)
		nzi_cond_wait_ms(&ca->done, &ca->mu, timeout_ms);
	pthread_mutex_unlock(&ca->mu);
}

struct nzi_sched *nzi_agg_sched(struct nz_coll_request *req)
{
	return req->agg && req->agg->s2_live ? &req->agg->s2 : &req->s;
}

/* Start the agreement or the redo in p->s2. */
static int nzi_agg_launch(struct nz_coll_request *req, bool redo)
{
	struct nzi_agg_part *p = req->agg;
	struct nzi_args a = { .coll = NZ_COLL_ALLREDUCE };
	int ret;

	if (redo) {
		memcpy(p->buf, p->input, p->bytes);
		a.sendbuf = a.recvbuf = p->buf;
		a.count = p->count;
		a.dtype = p->dtype;
		a.op = p->op;
	} else {
		a.sendbuf = p->av_in;
		a.recvbuf = p->av_out;
		a.count = NZI_AV_LEN;
		a.dtype = NZ_INT64;
		a.op = NZ_MAX;
	}
	ret = nzi_coll_launch(req->s.comm, &p->s2, &a, redo ? p->seq_redo : p->seq_agree,
			      a.count * nz_dtype_size(a.dtype));
	p->s2_live = !ret;
	return ret;
}

/* The agreed maxima: the same on every rank, so is what they teach. */
static void nzi_agg_learn(struct nzi_coll_agg *ca, const struct nzi_agg_part *p)
{
	if (!p->av_out[NZI_AV_FAIL] && !(ca->fixed > 0))
		nzi_agg_cut_learn(&ca->cut, p->bytes, p->ring_bytes, p->av_out[NZI_AV_T_AGG],
				  p->av_out[NZI_AV_T_RING]);
}

static bool nzi_agg_end(struct nz_coll_request *req, int err, const char *msg)
{
	struct nzi_agg_part *p = req->agg;

	p->result = err;
	if (nzi_agg_counted(p))
		p->ca->pending--;
	p->phase = NZI_AP_END;
	if (err && msg && msg != req->s.errmsg)
		snprintf(req->s.errmsg, sizeof(req->s.errmsg), "%s", msg);
	return true;
}

/* Agreed: the node failed a share.  The thread starts joining anew. */
static void nzi_agg_go_off(struct nzi_coll_agg *ca)
{
	ca->off = true;
	ca->off_eligible = 0;
	pthread_mutex_lock(&ca->mu);
	ca->want = true;
	ca->next_try_ms = 0;
	ca->backoff_ms = NZI_AGG_RETRY_MS;
	pthread_cond_signal(&ca->work);
	pthread_mutex_unlock(&ca->mu);
}

/*
 * Agreed at a resume probe: every rank has joined anew (go) or not.  No
 * share is at the node now (one agreement at a time, and a probe has no
 * share), so the old client can go.
 */
static void nzi_agg_resume(struct nz_coll_request *req, bool go)
{
	struct nzi_coll_agg *ca = req->owner->agg;
	struct nzi_agg_part *p = req->agg;
	struct nzi_agg *old = NULL;

	pthread_mutex_lock(&ca->mu);
	if (go) {
		old = ca->agg;
		ca->agg = ca->ready;
		ca->ready = NULL;
		ca->epoch++;
		ca->want = false;
	}
	ca->lent = p->lent = false;
	pthread_mutex_unlock(&ca->mu);
	nzi_agg_close(old);
	if (!go)
		return;
	ca->off = false;
	nzi_agg_cut_init(&ca->cut);
	ca->st.resumes++;
	ca->st.splits_on = 0;
	nzi_log(req->s.comm->verbose, req->s.comm->rank,
		"aggregation node: every rank joined it again: using it (epoch %llu)",
		(unsigned long long)ca->epoch);
}

/*
 * req's schedule is over for the caller: carry its share through the
 * agreement (and a redo).  Returns true once req is finished, its outcome
 * in nzi_agg_result().
 */
bool nzi_agg_advance(struct nz_coll_request *req)
{
	struct nzi_coll_agg *ca = req->owner->agg;
	struct nzi_agg_part *p = req->agg;
	int ret;

	if (p->phase == NZI_AP_RUN) {
		if (!p->t_ring_us)
			p->t_ring_us = nzi_now_us() - p->t_start_us + 1;
		if (!nzi_agg_worker_done(ca, p))
			return false;
		/* A failed schedule fails on every rank (its abort spreads):
		 * there is nothing to agree on. */
		if (req->s.err)
			return nzi_agg_end(req, req->s.err, NULL);
		p->av_in[NZI_AV_FAIL] = p->ret != 0;
		p->av_in[NZI_AV_T_AGG] = p->t_agg_us;
		p->av_in[NZI_AV_T_RING] = p->t_ring_us;
		if (p->resume) {
			/* The thread must not join again meanwhile: the node
			 * would send to that socket's address. */
			pthread_mutex_lock(&ca->mu);
			p->lent = ca->lent = ca->ready != NULL;
			p->av_in[NZI_AV_NOTREADY] = !ca->ready;
			pthread_mutex_unlock(&ca->mu);
		}
		ret = nzi_agg_launch(req, false);
		if (ret)
			return nzi_agg_end(req, ret, "allreduce: cannot start the aggregation share's agreement");
		p->phase = NZI_AP_AGREE;
	}
	if (p->phase == NZI_AP_AGREE) {
		nzi_sched_progress(&p->s2);
		if (!nzi_sched_done(&p->s2))
			return false;
		if (p->s2.err)
			return nzi_agg_end(req, p->s2.err, p->s2.errmsg);
		nzi_sched_free(&p->s2);
		p->s2_live = false;
		nzi_agg_learn(ca, p);
		if (p->resume)
			nzi_agg_resume(req, !p->av_out[NZI_AV_NOTREADY]);
		if (!p->av_out[NZI_AV_FAIL])
			return nzi_agg_end(req, 0, NULL);
		/* Some rank's share failed: every rank redoes it here. */
		nzi_agg_go_off(ca);
		ca->st.redos++;
		ret = nzi_agg_launch(req, true);
		if (ret)
			return nzi_agg_end(req, ret, "allreduce: cannot start the aggregation share's redo");
		p->phase = NZI_AP_REDO;
	}
	if (p->phase == NZI_AP_REDO) {
		nzi_sched_progress(&p->s2);
		if (!nzi_sched_done(&p->s2))
			return false;
		return nzi_agg_end(req, p->s2.err, p->s2.errmsg);
	}
	return true;
}

int nzi_agg_result(const struct nz_coll_request *req)
{
	return req->agg->result;
}

/* ---- The node named by the environment ---- */

/*
 * "host", "host:port", "[v6]", "[v6]:port", or a bare IPv6 address (two
 * colons or more: all of it is the host).  Syntax only: the host is looked
 * up later.  0 or -EINVAL.
 */
int nzi_agg_spec_parse(const char *spec, char *host, size_t hostlen, uint16_t *port)
{
	const char *h = spec, *p = NULL, *colon;
	size_t hl;

	if (!spec)
		return -EINVAL;
	colon = strchr(spec, ':');
	if (spec[0] == '[') {
		const char *close = strchr(spec, ']');

		if (!close || (close[1] && close[1] != ':'))
			return -EINVAL;
		h = spec + 1;
		hl = (size_t)(close - h);
		p = close[1] ? close + 2 : NULL;
	} else if (colon && !strchr(colon + 1, ':')) {
		hl = (size_t)(colon - spec);
		p = colon + 1;
	} else {
		hl = strlen(spec);
	}
	if (!hl || hl >= hostlen || memchr(h, '/', hl))
		return -EINVAL;
	memcpy(host, h, hl);
	host[hl] = 0;
	*port = NZA_PORT;
	if (p) {
		unsigned long v = 0;

		if (!*p || strlen(p) > 5)
			return -EINVAL;
		for (const char *q = p; *q; q++) {
			if (*q < '0' || *q > '9')
				return -EINVAL;
			v = v * 10 + (unsigned long)(*q - '0');
		}
		if (!v || v > 65535)
			return -EINVAL;
		*port = (uint16_t)v;
	}
	return 0;
}

/* NEZHA_AGG_SHARE: a fixed share in (0, 1] of every split allreduce. */
static int nzi_agg_env_share(double *out)
{
	const char *v = getenv("NEZHA_AGG_SHARE");
	char *end;

	*out = 0;
	if (!v || !*v)
		return 0;
	*out = strtod(v, &end);
	if (end == v || *end || !(*out > 0 && *out <= 1))
		return nzi_error(-EINVAL, "environment: NEZHA_AGG_SHARE=\"%s\" is not a fraction in (0, 1]",
				 v);
	return 0;
}

/* The settings beyond the node's address. */
static int nzi_agg_env_values(struct nzi_agg_env *e)
{
	int ret = nzi_env_size("NEZHA_AGG_WINDOW", 1, NZA_MAX_WINDOW, &e->window);

	if (!ret)
		ret = nzi_env_size("NEZHA_AGG_TIMEOUT_MS", 1, 600000, &e->timeout_ms);
	if (!ret)
		ret = nzi_env_size("NEZHA_AGG_MIN", 0, SIZE_MAX >> 1, &e->min_bytes);
	if (!ret)
		ret = nzi_agg_env_share(&e->share);
	if (!ret)
		e->set = true;
	return ret;
}

static void nzi_agg_env_defaults(struct nzi_agg_env *e)
{
	*e = (struct nzi_agg_env){
		.window = 32, .timeout_ms = 5000, .min_bytes = NZI_AGG_DEF_MIN,
	};
}

int nzi_agg_env_parse(struct nzi_agg_env *e)
{
	const char *node = getenv("NEZHA_AGG_NODE");

	nzi_agg_env_defaults(e);
	if (!node || !*node)
		return 0;
	if (nzi_agg_spec_parse(node, e->host, sizeof(e->host), &e->port))
		return nzi_error(-EINVAL, "environment: NEZHA_AGG_NODE=\"%s\" is not HOST, HOST:PORT or [IPV6]:PORT",
				 node);
	return nzi_agg_env_values(e);
}

int nzi_agg_env_rail(struct nz_comm *comm, struct nzi_agg_env *e)
{
	const char *want = getenv("NEZHA_AGG_RAIL");
	struct nz_rail_info info[NZ_MAX_RAILS];
	const struct nz_rail_info *r = NULL;
	unsigned int n;
	int ret;

	nzi_agg_env_defaults(e);
	if (want && !*want)
		want = NULL;
	ret = nzi_rail_info_list(comm, info, &n);
	if (ret)
		return ret;
	for (unsigned int i = 0; i < n && !r; i++)
		if (info[i].proto == NZ_PROTO_AGG && (!want || !strcmp(info[i].name, want)))
			r = &info[i];
	if (!r && want)
		return nzi_error(-ENODEV, "environment: NEZHA_AGG_RAIL=\"%s\": no aggregation rail of that name (nezhactl rail show)",
				 want);
	if (!r)
		return 0;
	if (!inet_ntop(AF_INET, &r->peer_addr, e->host, sizeof(e->host)))
		return -EINVAL;
	e->port = ntohs(r->peer_port);
	e->local_addr = r->addr;
	e->rail_down = r->state != NZ_RAIL_UP;
	memcpy(e->rail, r->name, NZ_RAIL_NAME_LEN);
	return nzi_agg_env_values(e);
}

static int nzi_agg_resolve(const struct nzi_agg_env *e, struct sockaddr_storage *ss,
			   socklen_t *len)
{
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC, .ai_socktype = SOCK_DGRAM, .ai_flags = AI_NUMERICSERV,
	};
	struct addrinfo *res = NULL;
	char port[8];
	int ret;

	snprintf(port, sizeof(port), "%u", e->port);
	ret = getaddrinfo(e->host, port, &hints, &res);
	if (ret || !res)
		return -EHOSTUNREACH;
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

/* This rank's outcome, the first number of the agreement (MIN). */
enum { NZI_AJ_BAD = -1, NZI_AJ_OFF = 0, NZI_AJ_JOINED = 1 };
enum { NZI_AE_JOIN, NZI_AE_ATTACHED, NZI_AE_MIN, NZI_AE_NMIN, NZI_AE_SHARE, NZI_AE_NSHARE,
       NZI_AE_LEN };

/*
 * How this rank joins e's node: false (said why) if it never can -- no
 * job key, too many ranks, a name that does not resolve.  cfg points into
 * ss and local.
 */
static bool nzi_agg_env_cfg(struct nz_comm *comm, const uint8_t *key, const struct nzi_agg_env *e,
			    struct nzi_agg_cfg *cfg, struct sockaddr_storage *ss,
			    struct sockaddr_in *local)
{
	const char *who = e->rail[0] ? "aggregation rail" : "NEZHA_AGG_NODE";

	if (!key) {
		nzi_log(true, comm->rank, "%s: the node needs the job key given (NEZHA_JOB_KEY_FILE or NEZHA_JOB_KEY), not drawn at start: not using it",
			who);
		return false;
	}
	if (comm->size > NZA_MAX_RANKS) {
		nzi_log(true, comm->rank, "%s: %d ranks, more than the node takes (%d): not using it",
			who, comm->size, NZA_MAX_RANKS);
		return false;
	}
	*cfg = (struct nzi_agg_cfg){ 0 };
	if (nzi_agg_resolve(e, ss, &cfg->node_len)) {
		nzi_log(true, comm->rank, "%s: cannot resolve %s: not using it", who, e->host);
		return false;
	}
	cfg->node = (const struct sockaddr *)ss;
	if (e->rail[0]) {
		*local = (struct sockaddr_in){ .sin_family = AF_INET,
					       .sin_addr.s_addr = e->local_addr };
		cfg->local = (const struct sockaddr *)local;
		cfg->local_len = sizeof(*local);
	}
	cfg->key = key;
	cfg->job_id = comm->job_id;
	cfg->rank = (uint16_t)comm->rank;
	cfg->nranks = (uint16_t)comm->size;
	cfg->window = (uint16_t)e->window;
	cfg->timeout_ms = (unsigned int)e->timeout_ms;
	return true;
}

/* Join now if the rail is up: the client, or NULL (said why). */
static struct nzi_agg *nzi_agg_env_join(struct nz_comm *comm, const struct nzi_agg_env *e,
					const struct nzi_agg_cfg *cfg)
{
	const char *who = e->rail[0] ? "aggregation rail" : "NEZHA_AGG_NODE";
	struct nzi_agg *agg = NULL;
	int ret;

	if (e->rail_down) {
		nzi_log(true, comm->rank, "aggregation rail %s: the module finds node %s:%u unreachable (nezhactl rail show %s): not using it until it is up",
			e->rail, e->host, e->port, e->rail);
		return NULL;
	}
	ret = nzi_agg_join(cfg, &agg);
	if (ret) {
		nzi_log(true, comm->rank, "%s: join of %s port %u failed: %s: not using it for now",
			who, e->host, e->port, strerror(-ret));
		return NULL;
	}
	return agg;
}

int nzi_coll_agg_setup(struct nz_comm *comm, const uint8_t *key, const struct nzi_agg_env *e,
		       int parse_err)
{
	int64_t v[NZI_AE_LEN] = { NZI_AJ_BAD };
	struct sockaddr_storage ss;
	struct sockaddr_in local;
	struct nzi_agg_cfg cfg;
	struct nzi_agg *agg = NULL;
	bool attached = false;
	int ret;

	if (comm->size < 2)
		return parse_err;
	if (!parse_err) {
		/*
		 * Attached before the agreement -- joined, or off until it
		 * can join -- so that a rank that cannot attach (memory, a
		 * thread) says so in it.
		 */
		if (e->set && nzi_agg_env_cfg(comm, key, e, &cfg, &ss, &local)) {
			agg = nzi_agg_env_join(comm, e, &cfg);
			ret = nzi_agg_attach(comm, agg, &cfg, e->rail[0] ? e->rail : NULL,
					     e->min_bytes);
			if (ret) {
				nzi_log(true, comm->rank, "aggregation node: cannot attach it: %s: not using it",
					strerror(-ret));
				nzi_agg_close(agg);
				agg = NULL;
			}
			attached = !ret;
		}
		v[NZI_AE_JOIN] = agg ? NZI_AJ_JOINED : NZI_AJ_OFF;
		v[NZI_AE_ATTACHED] = attached;
		/* A rank without a node has no say in the settings. */
		v[NZI_AE_MIN] = e->set ? (int64_t)e->min_bytes : INT64_MAX;
		v[NZI_AE_NMIN] = e->set ? -(int64_t)e->min_bytes : INT64_MAX;
		v[NZI_AE_SHARE] = e->set ? (int64_t)(e->share * 1e9) : INT64_MAX;
		v[NZI_AE_NSHARE] = e->set ? -v[NZI_AE_SHARE] : INT64_MAX;
	}
	/*
	 * Every rank has the node attached, or none does; a rank whose
	 * settings are malformed or differ from the others' fails every
	 * rank's creation alike (the cut is computed apart on every rank
	 * from them).  Attached on every rank but not joined on every one:
	 * off, until every rank has joined anew.
	 */
	ret = nz_allreduce(comm, v, v, NZI_AE_LEN, NZ_INT64, NZ_MIN);
	if (!ret && v[NZI_AE_JOIN] == NZI_AJ_BAD)
		ret = parse_err ? parse_err :
		      nzi_error(-EINVAL, "NEZHA_AGG_*: malformed on another rank (see its message)");
	else if (!ret && v[NZI_AE_MIN] != INT64_MAX &&
		 (v[NZI_AE_MIN] != -v[NZI_AE_NMIN] || v[NZI_AE_SHARE] != -v[NZI_AE_NSHARE]))
		ret = nzi_error(-EINVAL, "NEZHA_AGG_MIN or NEZHA_AGG_SHARE: the ranks' values differ");
	if (!ret && v[NZI_AE_ATTACHED] && e->share > 0)
		ret = nzi_coll_agg_fix(comm, e->share);
	if (!ret && v[NZI_AE_ATTACHED]) {
		if (v[NZI_AE_JOIN] != NZI_AJ_JOINED) {
			nzi_log(comm->verbose, comm->rank, "aggregation node %s: a rank could not join: off until every rank has",
				e->host);
			nzi_agg_go_off(comm->coll->agg);
		}
		return 0;
	}
	if (!ret && e->set)
		nzi_log(comm->verbose, comm->rank, "aggregation node %s: a rank has none or cannot use it: not used",
			e->host);
	if (attached)
		nzi_coll_agg_release(comm->coll);	/* closes agg */
	return ret;
}

int nzi_coll_agg_env(struct nz_comm *comm, const uint8_t *key)
{
	struct nzi_agg_env e;
	int ret = nzi_agg_env_parse(&e);

	if (!ret && !e.set)
		ret = nzi_agg_env_rail(comm, &e);
	/* Every rank, node or not: one without agrees to none. */
	return nzi_coll_agg_setup(comm, key, &e, ret);
}
