// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The progress engine (nezha.h, "Progress engine"): a thread that owns a
 * communicator and runs the operations other threads post.
 *
 * Ownership.  Everything under e->lock is shared: the posted list, the
 * abort errno and the stop flag.  Everything else (the communicator, the
 * pending and active lists, the v-collective sequence) is the engine
 * thread's alone.  Posting signals e->efd; so does every completion the
 * ring posts (nz_queue_register_eventfd), so that the thread sleeps in
 * poll() and wakes for either.  The thread reads the eventfd *before* it
 * reaps and advances, so that no completion or post is ever missed.
 *
 * Order.  Operations start in the order they were posted: an operation
 * that cannot start yet (NZ_COLL_MAX_ACTIVE collectives or too many
 * point-to-point requests in flight) holds back every later one, so that
 * every rank starts its collectives in the same order.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include "internal.h"

#define NZI_ENGINE_TICK_MS	10	/* re-check while operations run */
/* At destruction, operations still running after this are aborted. */
#define NZI_ENGINE_DRAIN_MS	5000

struct nzi_eop {
	struct nzi_eop *next;
	struct nz_op op;
	nz_done_fn fn;
	void *arg;
	/* v-collectives: the copied arrays (size entries each) */
	const void **sendbufs;
	void **recvbufs;
	size_t *sendcounts, *recvcounts;
	/* running */
	struct nz_coll_request *creq;
	struct nz_request **preqs;	/* point-to-point requests, NULL: done */
	unsigned int npreqs;
	int err;
	size_t bytes;
	char msg[320];
};

struct nz_engine {
	struct nz_comm *comm;
	pthread_t thread;
	int efd;

	pthread_mutex_t lock;		/* guards the three below */
	struct nzi_eop *posted, *posted_tail;
	int abort_err;
	bool stopping;

	/* the engine thread's own */
	struct nzi_eop *pending, *pending_tail;
	struct nzi_eop *active;
	bool aborted;			/* abort applied */
	uint32_t vseq;
};

static bool nzi_op_is_coll(enum nz_op_kind k)
{
	return k <= NZ_OP_BARRIER;
}

static void nzi_eop_free(struct nzi_eop *o)
{
	free(o->sendbufs);
	free(o->recvbufs);
	free(o->sendcounts);
	free(o->recvcounts);
	free(o->preqs);
	free(o);
}

static void nzi_eop_done(struct nzi_eop *o)
{
	o->fn(o->arg, o->err, o->err ? o->msg : "", o->bytes);
	nzi_eop_free(o);
}

static void nzi_eop_fail(struct nzi_eop *o, int err, const char *msg)
{
	if (!o->err) {
		o->err = err;
		snprintf(o->msg, sizeof(o->msg), "%s", msg);
	}
}

/* ---- Posting (any thread) ---- */

static void nzi_kick(struct nz_engine *e)
{
	uint64_t one = 1;

	if (write(e->efd, &one, sizeof(one)) < 0) {
		/* the counter is saturated: the thread is awake anyway */
	}
}

static void *nzi_dup(const void *src, size_t n, size_t es, bool *bad)
{
	void *p;

	if (!src) {
		*bad = true;
		return NULL;
	}
	p = malloc(n * es);
	if (p)
		memcpy(p, src, n * es);
	else
		*bad = true;
	return p;
}

static int nzi_op_check(const struct nz_engine *e, const struct nz_op *op)
{
	int n = e->comm->size;

	if ((unsigned int)op->kind >= NZ_OP_KIND_COUNT)
		return nzi_error(-EINVAL, "engine: unknown operation %d", op->kind);
	if (op->kind != NZ_OP_BARRIER && !nz_dtype_size(op->dtype))
		return nzi_error(-EINVAL, "engine: invalid dtype");
	if ((op->kind == NZ_OP_SEND || op->kind == NZ_OP_RECV) &&
	    (op->root < 0 || op->root >= n || op->root == e->comm->rank))
		return nzi_error(-EINVAL, "engine: peer %d is not another rank of %d", op->root, n);
	if ((op->kind == NZ_OP_SEND || op->kind == NZ_OP_RECV) && op->tag >= NZ_TAG_RESERVED)
		return nzi_error(-EINVAL, "engine: tag %llu is reserved", (unsigned long long)op->tag);
	if ((op->kind == NZ_OP_GATHER || op->kind == NZ_OP_SCATTER) &&
	    (op->root < 0 || op->root >= n))
		return nzi_error(-EINVAL, "engine: root %d is not a rank of %d", op->root, n);
	return 0;
}

/* Copy what the v-collectives point to: the caller's arrays may go. */
static int nzi_op_copy(const struct nz_engine *e, struct nzi_eop *o)
{
	size_t n = (size_t)e->comm->size;
	const struct nz_op *op = &o->op;
	bool root = op->root == e->comm->rank, bad = false;

	switch (op->kind) {
	case NZ_OP_ALLGATHERV:
		o->recvbufs = nzi_dup(op->recvbufs, n, sizeof(void *), &bad);
		o->recvcounts = nzi_dup(op->recvcounts, n, sizeof(size_t), &bad);
		break;
	case NZ_OP_ALLTOALLV:
		o->sendbufs = nzi_dup(op->sendbufs, n, sizeof(void *), &bad);
		o->recvbufs = nzi_dup(op->recvbufs, n, sizeof(void *), &bad);
		o->sendcounts = nzi_dup(op->sendcounts, n, sizeof(size_t), &bad);
		o->recvcounts = nzi_dup(op->recvcounts, n, sizeof(size_t), &bad);
		break;
	case NZ_OP_GATHER:
		if (root)
			o->recvbufs = nzi_dup(op->recvbufs, n, sizeof(void *), &bad);
		break;
	case NZ_OP_SCATTER:
		if (root)
			o->sendbufs = nzi_dup(op->sendbufs, n, sizeof(void *), &bad);
		break;
	default:
		break;
	}
	if (bad)
		return nzi_error(-EINVAL, "engine: %s needs its per-rank arrays (or out of memory)",
				 op->kind == NZ_OP_ALLGATHERV ? "allgatherv" :
				 op->kind == NZ_OP_ALLTOALLV ? "alltoallv" :
				 op->kind == NZ_OP_GATHER ? "gather" : "scatter");
	return 0;
}

int nz_engine_post(struct nz_engine *e, const struct nz_op *op,
		   nz_done_fn fn, void *arg)
{
	struct nzi_eop *o;
	int ret;

	if (!e || !op || !fn)
		return nzi_error(-EINVAL, "engine: NULL argument");
	ret = nzi_op_check(e, op);
	if (ret)
		return ret;
	o = calloc(1, sizeof(*o));
	if (!o)
		return nzi_error(-ENOMEM, "engine: out of memory");
	o->op = *op;
	o->fn = fn;
	o->arg = arg;
	ret = nzi_op_copy(e, o);
	if (ret) {
		nzi_eop_free(o);
		return ret;
	}
	pthread_mutex_lock(&e->lock);
	ret = e->abort_err;
	if (!ret && e->stopping)
		ret = -ESHUTDOWN;
	if (!ret) {
		if (e->posted_tail)
			e->posted_tail->next = o;
		else
			e->posted = o;
		e->posted_tail = o;
	}
	pthread_mutex_unlock(&e->lock);
	if (ret) {
		nzi_eop_free(o);
		return nzi_error(ret, "engine: the communicator was %s",
				 ret == -ESHUTDOWN ? "shut down" : "aborted");
	}
	nzi_kick(e);
	return 0;
}

int nz_engine_abort(struct nz_engine *e, int err)
{
	if (!e || err >= 0)
		return -EINVAL;
	pthread_mutex_lock(&e->lock);
	if (!e->abort_err)
		e->abort_err = err;
	pthread_mutex_unlock(&e->lock);
	nzi_kick(e);
	return 0;
}

const struct nz_comm *nz_engine_comm(const struct nz_engine *e)
{
	return e ? e->comm : NULL;
}

/* ---- Starting operations (engine thread) ---- */

static int nzi_start_coll(struct nz_engine *e, struct nzi_eop *o)
{
	const struct nz_op *p = &o->op;
	struct nz_comm *c = e->comm;

	switch (p->kind) {
	case NZ_OP_ALLREDUCE:
		return nz_iallreduce(c, p->sendbuf, p->recvbuf, p->count, p->dtype, p->op, &o->creq);
	case NZ_OP_BROADCAST:
		return nz_ibroadcast(c, p->sendbuf, p->recvbuf, p->count, p->dtype, p->root, &o->creq);
	case NZ_OP_REDUCE:
		return nz_ireduce(c, p->sendbuf, p->recvbuf, p->count, p->dtype, p->op, p->root,
				  &o->creq);
	case NZ_OP_ALLGATHER:
		return nz_iallgather(c, p->sendbuf, p->recvbuf, p->count, p->dtype, &o->creq);
	case NZ_OP_REDUCE_SCATTER:
		return nz_ireduce_scatter(c, p->sendbuf, p->recvbuf, p->count, p->dtype, p->op,
					  &o->creq);
	case NZ_OP_ALLTOALL:
		return nz_ialltoall(c, p->sendbuf, p->recvbuf, p->count, p->dtype, &o->creq);
	default:
		return nz_ibarrier(c, &o->creq);
	}
}

/* Requests a point-to-point operation needs (at most). */
static unsigned int nzi_p2p_need(const struct nz_engine *e, const struct nzi_eop *o)
{
	unsigned int n = (unsigned int)e->comm->size;

	switch (o->op.kind) {
	case NZ_OP_SEND:
	case NZ_OP_RECV:
		return 1;
	case NZ_OP_GATHER:
	case NZ_OP_SCATTER:
		return n;
	default:
		return 2 * n;
	}
}

static int nzi_p2p_add(struct nz_engine *e, struct nzi_eop *o, bool send,
		       const void *buf, size_t len, int peer, uint64_t tag)
{
	struct nz_request **r = &o->preqs[o->npreqs];
	int ret = send ? nz_isend(e->comm, buf, len, peer, tag, r) :
			 nz_irecv(e->comm, (void *)buf, len, peer, tag, r);

	if (ret)
		return ret;
	o->npreqs++;
	return 0;
}

/* One message per pair of ranks: every send and receive at once. */
static int nzi_start_p2p(struct nz_engine *e, struct nzi_eop *o)
{
	const struct nz_op *p = &o->op;
	int n = e->comm->size, me = e->comm->rank, ret = 0;
	size_t es = nz_dtype_size(p->dtype);
	uint64_t tag = p->tag;

	o->preqs = calloc(nzi_p2p_need(e, o), sizeof(*o->preqs));
	if (!o->preqs)
		return -ENOMEM;
	if (p->kind != NZ_OP_SEND && p->kind != NZ_OP_RECV)
		tag = NZ_TAG_VCOLL | e->vseq++;
	switch (p->kind) {
	case NZ_OP_SEND:
		return nzi_p2p_add(e, o, true, p->sendbuf, p->count * es, p->root, tag);
	case NZ_OP_RECV:
		return nzi_p2p_add(e, o, false, p->recvbuf, p->count * es, p->root, tag);
	case NZ_OP_ALLGATHERV:
		for (int r = 0; r < n && !ret; r++) {
			if (r == me) {
				if (o->recvbufs[r] != p->sendbuf)
					memmove(o->recvbufs[r], p->sendbuf, o->recvcounts[me] * es);
				continue;
			}
			ret = nzi_p2p_add(e, o, false, o->recvbufs[r], o->recvcounts[r] * es, r, tag);
			if (!ret)
				ret = nzi_p2p_add(e, o, true, p->sendbuf, o->recvcounts[me] * es, r, tag);
		}
		return ret;
	case NZ_OP_ALLTOALLV:
		for (int r = 0; r < n && !ret; r++) {
			if (r == me) {
				if (o->sendcounts[r] != o->recvcounts[r])
					return nzi_error(-EINVAL, "alltoallv: this rank sends itself %zu elements but expects %zu",
							 o->sendcounts[r], o->recvcounts[r]);
				if (o->recvbufs[r] != o->sendbufs[r])
					memmove(o->recvbufs[r], o->sendbufs[r], o->recvcounts[r] * es);
				continue;
			}
			ret = nzi_p2p_add(e, o, false, o->recvbufs[r], o->recvcounts[r] * es, r, tag);
			if (!ret)
				ret = nzi_p2p_add(e, o, true, o->sendbufs[r], o->sendcounts[r] * es, r, tag);
		}
		return ret;
	case NZ_OP_GATHER:
		if (me != p->root)
			return nzi_p2p_add(e, o, true, p->sendbuf, p->count * es, p->root, tag);
		for (int r = 0; r < n && !ret; r++) {
			if (r == me) {
				if (o->recvbufs[r] != p->sendbuf)
					memmove(o->recvbufs[r], p->sendbuf, p->count * es);
				continue;
			}
			ret = nzi_p2p_add(e, o, false, o->recvbufs[r], p->count * es, r, tag);
		}
		return ret;
	default:	/* NZ_OP_SCATTER */
		if (me != p->root)
			return nzi_p2p_add(e, o, false, p->recvbuf, p->count * es, p->root, tag);
		for (int r = 0; r < n && !ret; r++) {
			if (r == me) {
				if (o->sendbufs[r] != p->recvbuf)
					memmove(p->recvbuf, o->sendbufs[r], p->count * es);
				continue;
			}
			ret = nzi_p2p_add(e, o, true, o->sendbufs[r], p->count * es, r, tag);
		}
		return ret;
	}
}

/*
 * Start pending operations in order.  Returns true when one had to wait
 * for room (the caller then re-checks soon even without a completion).
 */
static bool nzi_start_pending(struct nz_engine *e)
{
	while (e->pending) {
		struct nzi_eop *o = e->pending;
		int ret;

		if (nzi_op_is_coll(o->op.kind)) {
			ret = nzi_start_coll(e, o);
			if (ret == -EBUSY)
				return true;
		} else {
			if (e->comm->inflight + nzi_p2p_need(e, o) > NZ_COMM_MAX_INFLIGHT)
				return true;
			ret = nzi_start_p2p(e, o);
		}
		e->pending = o->next;
		if (!e->pending)
			e->pending_tail = NULL;
		o->next = e->active;
		e->active = o;
		if (ret)
			nzi_eop_fail(o, ret, nz_last_error()[0] ? nz_last_error() : strerror(-ret));
	}
	return false;
}

/* ---- Completion (engine thread) ---- */

/* Whether o is over; fills o->err and o->bytes. */
static bool nzi_eop_test(struct nzi_eop *o)
{
	bool over = true;

	if (o->creq) {
		int ret = nz_coll_test(o->creq);

		if (ret == -EAGAIN)
			return false;
		o->creq = NULL;
		if (ret)
			nzi_eop_fail(o, ret, nz_last_error());
		return true;
	}
	for (unsigned int i = 0; i < o->npreqs; i++) {
		struct nz_status st;

		if (!o->preqs[i])
			continue;
		if (nz_test(o->preqs[i], &st) == -EAGAIN) {
			over = false;
			continue;
		}
		o->preqs[i] = NULL;
		if (st.error) {
			char m[160];

			snprintf(m, sizeof(m), "%s rank %d: %s",
				 o->op.kind == NZ_OP_RECV ? "receive from" : "transfer with",
				 st.peer, strerror(-st.error));
			nzi_eop_fail(o, st.error, m);
		}
		if (o->op.kind == NZ_OP_RECV)
			o->bytes = st.bytes;
	}
	return over;
}

static void nzi_complete_active(struct nz_engine *e)
{
	struct nzi_eop **pp = &e->active;

	while (*pp) {
		struct nzi_eop *o = *pp;

		if (!nzi_eop_test(o)) {
			pp = &o->next;
			continue;
		}
		*pp = o->next;
		if (e->aborted && o->err == -ECANCELED) {
			pthread_mutex_lock(&e->lock);
			o->err = e->abort_err;
			pthread_mutex_unlock(&e->lock);
		}
		nzi_eop_done(o);
	}
}

/* Apply an abort: nothing new starts, every transfer in flight fails. */
static void nzi_apply_abort(struct nz_engine *e, int err)
{
	char m[200];

	snprintf(m, sizeof(m), "engine: the communicator was aborted (%s)", strerror(-err));
	e->aborted = true;
	while (e->pending) {
		struct nzi_eop *o = e->pending;

		e->pending = o->next;
		nzi_eop_fail(o, err, m);
		nzi_eop_done(o);
	}
	e->pending_tail = NULL;
	for (struct nzi_eop *o = e->active; o; o = o->next)
		nzi_eop_fail(o, err, m);
	if (e->comm->has_kcomm) {
		uint32_t id = e->comm->comm_id;

		ioctl(nz_queue_fd(e->comm->q), NZ_IOC_COMM_DESTROY, &id);
		e->comm->has_kcomm = false;
	}
}

static void *nzi_engine_main(void *arg)
{
	struct nz_engine *e = arg;
	int64_t drain_end = -1;

	for (;;) {
		struct pollfd pfd = { .fd = e->efd, .events = POLLIN };
		struct nzi_eop *got;
		uint64_t cnt;
		bool stop, wait_room;
		int abort_err;

		if (read(e->efd, &cnt, sizeof(cnt)) < 0) {
			/* EAGAIN: nothing signalled since the last read */
		}
		pthread_mutex_lock(&e->lock);
		got = e->posted;
		e->posted = e->posted_tail = NULL;
		abort_err = e->abort_err;
		stop = e->stopping;
		pthread_mutex_unlock(&e->lock);
		if (got) {
			if (e->pending_tail)
				e->pending_tail->next = got;
			else
				e->pending = got;
			while (got->next)
				got = got->next;
			e->pending_tail = got;
		}
		if (abort_err && !e->aborted)
			nzi_apply_abort(e, abort_err);
		nzi_comm_reap(e->comm);
		if (e->comm->coll)
			nz_coll_progress(e->comm);
		nzi_complete_active(e);
		wait_room = e->aborted ? false : nzi_start_pending(e);
		if (e->aborted && e->pending)
			nzi_apply_abort(e, abort_err);
		nzi_complete_active(e);
		if (stop && !e->pending && !e->active)
			break;
		if (stop && drain_end < 0)
			drain_end = nzi_now_ms() + NZI_ENGINE_DRAIN_MS;
		if (stop && !e->aborted && nzi_now_ms() > drain_end) {
			/* a receive nobody answers must not hold the exit */
			pthread_mutex_lock(&e->lock);
			if (!e->abort_err)
				e->abort_err = -ESHUTDOWN;
			pthread_mutex_unlock(&e->lock);
			continue;
		}
		if (!poll(&pfd, 1, wait_room ? 1 : e->active ? NZI_ENGINE_TICK_MS : -1) &&
		    e->active)
			nzi_comm_wait_any(e->comm, 0);	/* enters the kernel: flushes
							 * what the CQ could not hold */
	}
	return NULL;
}

int nz_engine_start(struct nz_engine **out, struct nz_comm *comm)
{
	struct nz_engine *e;
	int ret;

	if (!out || !comm)
		return nzi_error(-EINVAL, "engine: NULL argument");
	*out = NULL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return nzi_error(-ENOMEM, "engine: out of memory");
	e->comm = comm;
	e->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (e->efd < 0) {
		ret = -errno;
		free(e);
		return nzi_error(ret, "engine: eventfd: %s", strerror(-ret));
	}
	ret = nz_queue_register_eventfd(comm->q, e->efd);
	if (ret) {
		close(e->efd);
		free(e);
		return nzi_error(ret, "engine: cannot register an eventfd with the ring: %s",
				 strerror(-ret));
	}
	pthread_mutex_init(&e->lock, NULL);
	ret = -pthread_create(&e->thread, NULL, nzi_engine_main, e);
	if (ret) {
		nz_queue_register_eventfd(comm->q, -1);
		pthread_mutex_destroy(&e->lock);
		close(e->efd);
		free(e);
		return nzi_error(ret, "engine: cannot start its thread: %s", strerror(-ret));
	}
	*out = e;
	return 0;
}

void nz_engine_destroy(struct nz_engine *e)
{
	if (!e)
		return;
	pthread_mutex_lock(&e->lock);
	e->stopping = true;
	pthread_mutex_unlock(&e->lock);
	nzi_kick(e);
	pthread_join(e->thread, NULL);
	nz_queue_register_eventfd(e->comm->q, -1);
	nz_comm_destroy(e->comm);
	pthread_mutex_destroy(&e->lock);
	close(e->efd);
	free(e);
}
