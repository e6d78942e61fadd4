// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Point to point: NZ_CMD_SEND / NZ_CMD_RECV on the communicator's queue.
 *
 * Every transfer is a request submitted at once (one SQE, one
 * io_uring_enter).  Completions come back in any order; whoever waits
 * reaps every completion that is there and marks the request it belongs
 * to done, so waiting for one request never loses another's completion.
 * A completion names its request by index and generation (user_data =
 * gen << 32 | idx), so a stale or foreign completion can never complete a
 * recycled request: it is counted and ignored.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "internal.h"

static uint64_t nzi_req_ud(const struct nz_request *r)
{
	return (uint64_t)r->gen << 32 | r->idx;
}

static struct nz_request *nzi_req_get(struct nz_comm *c)
{
	struct nz_request *r = c->free_reqs;

	if (r) {
		c->free_reqs = r->next_free;
	} else {
		if (c->nreqs == c->reqs_cap) {
			unsigned int cap = c->reqs_cap ? 2 * c->reqs_cap : 16;
			struct nz_request **t = realloc(c->reqs, cap * sizeof(*t));

			if (!t)
				return NULL;
			c->reqs = t;
			c->reqs_cap = cap;
		}
		r = calloc(1, sizeof(*r));
		if (!r)
			return NULL;
		r->idx = c->nreqs;
		c->reqs[c->nreqs++] = r;
	}
	r->comm = c;
	r->gen++;
	if (!r->gen)	/* keep user_data non-zero */
		r->gen = 1;
	r->orphan = false;
	r->next_free = NULL;
	return r;
}

static void nzi_req_put(struct nz_comm *c, struct nz_request *r)
{
	r->state = NZI_REQ_FREE;
	r->next_free = c->free_reqs;
	c->free_reqs = r;
}

void nzi_comm_free_requests(struct nz_comm *c)
{
	for (unsigned int i = 0; i < c->nreqs; i++)
		free(c->reqs[i]);
	free(c->reqs);
	c->reqs = NULL;
	c->nreqs = c->reqs_cap = 0;
	c->free_reqs = NULL;
}

static void nzi_complete(struct nz_comm *c, const struct nz_cqe *cqe)
{
	uint32_t idx = (uint32_t)cqe->user_data;
	uint32_t gen = (uint32_t)(cqe->user_data >> 32);
	struct nz_request *r = idx < c->nreqs ? c->reqs[idx] : NULL;

	c->reaped++;
	if (!r || r->gen != gen || r->state != NZI_REQ_INFLIGHT) {
		c->stray++;
		return;
	}
	r->res = cqe->res;
	r->state = NZI_REQ_DONE;
	c->inflight--;
	if (r->orphan)
		nzi_req_put(c, r);
}

int nzi_comm_reap(struct nz_comm *c)
{
	struct nz_cqe cqes[32];
	int n, total = 0;

	do {
		n = nz_queue_peek_batch(c->q, cqes, 32);
		for (int i = 0; i < n; i++)
			nzi_complete(c, &cqes[i]);
		total += n;
	} while (n == 32);
	return total;
}

/* The registered buffer that holds buf[0..len), or -1. */
int nzi_fixed_index(const struct nz_comm *c, const void *buf, size_t len)
{
	uintptr_t a = (uintptr_t)buf;

	if (!buf)
		return -1;
	for (unsigned int i = 0; i < c->nbufs; i++) {
		uintptr_t b = (uintptr_t)c->bufs[i].iov_base;

		if (b && a >= b && a - b <= c->bufs[i].iov_len &&
		    len <= c->bufs[i].iov_len - (a - b))
			return (int)i;
	}
	return -1;
}

/*
 * Submit what is prepared.  Transient failures (a full completion ring,
 * memory pressure, a signal) are retried after reaping; the request is
 * already in the ring, so giving up would still let it run later.
 */
static int nzi_submit(struct nz_comm *c)
{
	for (int tries = 0;; tries++) {
		int ret = nz_queue_submit(c->q);

		if (ret >= 0)
			return 0;
		if ((ret != -EBUSY && ret != -EAGAIN && ret != -EINTR) || tries == 1000)
			return ret;
		if (!nzi_comm_reap(c))
			usleep(1000);
	}
}

static int nzi_start(struct nz_comm *c, uint32_t op, const void *buf,
		     size_t len, int peer, uint64_t tag, struct nz_request **out)
{
	const char *what = op == NZ_CMD_SEND ? "send" :
			   op == NZ_CMD_RECV ? "recv" : "cancel";
	struct nz_request *r;
	struct nz_sqe sqe;
	int fixed, ret;

	if (out)
		*out = NULL;
	if (!c || !out)
		return nzi_error(-EINVAL, "%s: NULL communicator or request pointer", what);
	if (peer < 0 || peer >= c->size || peer == c->rank)
		return nzi_error(-EINVAL, "%s: peer %d is not another rank of this communicator (rank %d of %d)",
				 what, peer, c->rank, c->size);
	if (!buf && len)
		return nzi_error(-EINVAL, "%s: NULL buffer of %zu bytes", what, len);
	if (c->inflight >= NZ_COMM_MAX_INFLIGHT) {
		nzi_comm_reap(c);
		if (c->inflight >= NZ_COMM_MAX_INFLIGHT)
			return nzi_error(-EBUSY, "%s: %d requests in flight: wait for some first",
					 what, NZ_COMM_MAX_INFLIGHT);
	}
	r = nzi_req_get(c);
	if (!r)
		return nzi_error(-ENOMEM, "%s: out of memory", what);
	memset(&sqe, 0, sizeof(sqe));
	sqe.comm_id = c->comm_id;
	sqe.xfer.addr = (uint64_t)(uintptr_t)buf;
	sqe.xfer.len = len;
	sqe.xfer.tag = tag;
	sqe.xfer.peer = (uint32_t)peer;
	fixed = nzi_fixed_index(c, buf, len);
	ret = nz_queue_prep(c->q, op, &sqe, nzi_req_ud(r), fixed);
	if (ret == -EBUSY) {	/* left over from a failed submission */
		nzi_submit(c);
		ret = nz_queue_prep(c->q, op, &sqe, nzi_req_ud(r), fixed);
	}
	if (ret) {
		nzi_req_put(c, r);
		return nzi_error(ret, "%s: no room in the submission ring", what);
	}
	r->op = op;
	r->peer = peer;
	r->tag = tag;
	r->len = len;
	r->res = 0;
	r->state = NZI_REQ_INFLIGHT;
	c->inflight++;
	ret = nzi_submit(c);
	if (ret) {
		/* In the ring for good: its completion will free it. */
		r->orphan = true;
		return nzi_error(ret, "%s: io_uring_enter failed: %s", what, strerror(-ret));
	}
	*out = r;
	return 0;
}

int nz_isend(struct nz_comm *comm, const void *buf, size_t len, int peer,
	     uint64_t tag, struct nz_request **req)
{
	return nzi_start(comm, NZ_CMD_SEND, buf, len, peer, tag, req);
}

int nz_irecv(struct nz_comm *comm, void *buf, size_t len, int peer,
	     uint64_t tag, struct nz_request **req)
{
	return nzi_start(comm, NZ_CMD_RECV, buf, len, peer, tag, req);
}

int nz_cancel_recvs(struct nz_comm *comm, int peer, uint64_t tag)
{
	struct nz_status st;
	struct nz_request *r;
	int ret;

	ret = nzi_start(comm, NZ_CMD_CANCEL, NULL, 0, peer, tag, &r);
	if (ret)
		return ret;
	do {	/* the module answers at once: no transfer to wait for */
		ret = nz_wait(r, &st);
	} while (ret == -ETIME || ret == -EINTR);
	return ret ? ret : (int)st.bytes;
}

static bool nzi_req_valid(const struct nz_request *r)
{
	return r && r->comm && r->state != NZI_REQ_FREE && !r->orphan;
}

/* A done request: report, recycle, return its outcome. */
static int nzi_finish(struct nz_request *r, struct nz_status *st)
{
	int res = r->res < 0 ? r->res : 0;

	if (res)
		nzi_error(res, "%s rank %d (tag %llu, %zu bytes) failed: %s%s",
			  r->op == NZ_CMD_SEND ? "send to" : "receive from", r->peer,
			  (unsigned long long)r->tag, r->len, strerror(-res),
			  res == -EMSGSIZE ? " (the message is longer than the buffer)" :
			  res == -ENETDOWN ? " (no rail left to the peer)" : "");
	if (st) {
		st->peer = r->peer;
		st->tag = r->tag;
		st->bytes = r->res > 0 ? (size_t)r->res : 0;
		st->error = res;
	}
	nzi_req_put(r->comm, r);
	return res;
}

/*
 * Block for one completion on c, until deadline (< 0: none).  Returns 0
 * (something was reaped), -ETIME or -EINTR.
 */
static int nzi_wait_one(struct nz_comm *c, int64_t deadline)
{
	struct nz_cqe cqe;
	int tmo = -1, ret;

	if (deadline >= 0) {
		int64_t left = deadline - nzi_now_ms();

		if (left <= 0)
			return -ETIME;
		tmo = left > 1000000 ? 1000000 : (int)left;
	}
	ret = nz_queue_wait(c->q, &cqe, tmo);
	if (ret == -ETIME)
		return deadline >= 0 && nzi_now_ms() >= deadline ? -ETIME : 0;
	if (ret)
		return ret;
	nzi_complete(c, &cqe);
	return 0;
}

/*
 * Return once something completed since the last return: a caller that
 * tests its requests one by one may have reaped, while testing a later
 * one, the completion of one it had already found pending, and must look
 * again rather than sleep for a completion that already came.
 */
int nzi_comm_wait_any(struct nz_comm *c, int timeout_ms)
{
	int ret = 0;

	if (c->reaped == c->reaped_seen && !nzi_comm_reap(c))
		ret = nzi_wait_one(c, timeout_ms < 0 ? -1 : nzi_now_ms() + timeout_ms);
	c->reaped_seen = c->reaped;
	return ret;
}

static int64_t nzi_deadline(const struct nz_comm *c)
{
	return c->wait_timeout_ms > 0 ? nzi_now_ms() + c->wait_timeout_ms : -1;
}

static int nzi_wait_error(const struct nz_comm *c, int ret)
{
	if (ret == -ETIME)
		return nzi_error(ret, "wait: no completion within %d ms (the communicator's wait timeout); the request is still in flight",
				 c->wait_timeout_ms);
	if (ret == -EINTR)
		return nzi_error(ret, "wait: interrupted by a signal; the request is still in flight");
	return nzi_error(ret, "wait: reaping completions failed: %s", strerror(-ret));
}

int nz_wait(struct nz_request *req, struct nz_status *status)
{
	struct nz_comm *c;
	int64_t deadline;

	if (!nzi_req_valid(req))
		return nzi_error(-EINVAL, "wait: not a request in progress");
	c = req->comm;
	deadline = nzi_deadline(c);
	while (req->state == NZI_REQ_INFLIGHT) {
		int ret;

		if (nzi_comm_reap(c) && req->state != NZI_REQ_INFLIGHT)
			break;
		/* A rank blocked here must not stall its collectives' peers. */
		if (c->coll && !c->in_coll) {
			nz_coll_progress(c);
			if (req->state != NZI_REQ_INFLIGHT)
				break;
		}
		ret = nzi_wait_one(c, deadline);
		if (ret)
			return nzi_wait_error(c, ret);
	}
	return nzi_finish(req, status);
}

int nz_test(struct nz_request *req, struct nz_status *status)
{
	if (!nzi_req_valid(req))
		return nzi_error(-EINVAL, "test: not a request in progress");
	if (req->state == NZI_REQ_INFLIGHT)
		nzi_comm_reap(req->comm);
	if (req->state == NZI_REQ_INFLIGHT)
		return -EAGAIN;
	nzi_finish(req, status);
	return 0;
}

int nz_waitall(struct nz_request **reqs, unsigned int n,
	       struct nz_status *statuses)
{
	struct nz_comm *c = NULL;
	int64_t deadline = -1;
	int first = 0;

	if (!reqs && n)
		return nzi_error(-EINVAL, "waitall: NULL request array");
	for (unsigned int i = 0; i < n; i++) {
		if (!reqs[i])
			continue;
		if (!nzi_req_valid(reqs[i]))
			return nzi_error(-EINVAL, "waitall: entry %u is not a request in progress", i);
		if (!c) {
			c = reqs[i]->comm;
			deadline = nzi_deadline(c);
		}
	}
	for (;;) {
		struct nz_request *pending = NULL;
		bool reaped = false;
		int ret;

		for (unsigned int i = 0; i < n; i++) {
			struct nz_request *r = reqs[i];

			if (!r)
				continue;
			if (r->state == NZI_REQ_INFLIGHT && nzi_comm_reap(r->comm))
				reaped = true;
			if (r->state == NZI_REQ_INFLIGHT) {
				pending = r;
				continue;
			}
			ret = nzi_finish(r, statuses ? &statuses[i] : NULL);
			reqs[i] = NULL;
			if (ret && !first)
				first = ret;
		}
		if (!pending)
			return first;
		/*
		 * A reap for a later entry may have completed an earlier one
		 * already found pending: look again before sleeping, or the
		 * sleep waits for a completion that already came.
		 */
		if (reaped && (deadline < 0 || nzi_now_ms() < deadline))
			continue;
		c = pending->comm;
		if (c->coll && !c->in_coll) {
			unsigned long before = c->reaped;

			nz_coll_progress(c);
			if (c->reaped != before)
				continue;
		}
		ret = nzi_wait_one(c, deadline);
		if (ret)
			return nzi_wait_error(pending->comm, ret);
	}
}

/* A blocking call that gives up leaves its request to be freed on completion. */
static int nzi_blocking(struct nz_request *r, struct nz_status *st)
{
	int ret = nz_wait(r, st);

	if ((ret == -ETIME || ret == -EINTR) && r->state == NZI_REQ_INFLIGHT)
		r->orphan = true;
	return ret;
}

int nz_send(struct nz_comm *comm, const void *buf, size_t len, int peer,
	    uint64_t tag)
{
	struct nz_request *r;
	int ret = nz_isend(comm, buf, len, peer, tag, &r);

	return ret ? ret : nzi_blocking(r, NULL);
}

int nz_recv(struct nz_comm *comm, void *buf, size_t len, int peer,
	    uint64_t tag, size_t *received)
{
	struct nz_status st = { 0 };
	struct nz_request *r;
	int ret = nz_irecv(comm, buf, len, peer, tag, &r);

	if (!ret)
		ret = nzi_blocking(r, &st);
	if (received)
		*received = ret ? 0 : st.bytes;
	return ret;
}

/* ---- Registered (fixed) buffers ---- */

/* Replace the ring's registration with table[0..n). */
static int nzi_register(struct nz_comm *c, const struct iovec *table,
			unsigned int n)
{
	int ret;

	if (c->nbufs)
		nz_queue_unregister_buffers(c->q);
	if (!n)
		return 0;
	ret = nz_queue_register_buffers(c->q, table, n);
	if (ret && c->nbufs)	/* put the previous set back */
		nz_queue_register_buffers(c->q, c->bufs, c->nbufs);
	return ret;
}

static int nzi_buffers_idle(struct nz_comm *c, const char *what)
{
	nzi_comm_reap(c);
	if (c->inflight)
		return nzi_error(-EBUSY, "%s: %u requests in flight: registration waits for them in the kernel",
				 what, c->inflight);
	return 0;
}

int nz_comm_register_buffer(struct nz_comm *comm, void *buf, size_t len,
			    int *index)
{
	struct iovec table[NZ_COMM_MAX_BUFFERS];
	unsigned int i, n;
	int ret;

	if (!comm || !buf || !len || !index)
		return nzi_error(-EINVAL, "register_buffer: NULL argument or empty buffer");
	if (!(comm->features & NZ_FEAT_FIXED_BUF))
		return nzi_error(-EOPNOTSUPP, "register_buffer: the module has no fixed-buffer support");
	ret = nzi_buffers_idle(comm, "register_buffer");
	if (ret)
		return ret;
	for (i = 0; i < NZ_COMM_MAX_BUFFERS && comm->bufs[i].iov_base; i++)
		;
	if (i == NZ_COMM_MAX_BUFFERS)
		return nzi_error(-ENOSPC, "register_buffer: %d buffers are registered already",
				 NZ_COMM_MAX_BUFFERS);
	memcpy(table, comm->bufs, sizeof(table));
	table[i].iov_base = buf;
	table[i].iov_len = len;
	n = i + 1 > comm->nbufs ? i + 1 : comm->nbufs;
	ret = nzi_register(comm, table, n);
	if (ret)
		return nzi_error(ret, "register_buffer: %s%s", strerror(-ret),
				 ret == -ENOMEM ? " (pinned memory is limited by RLIMIT_MEMLOCK: ulimit -l)" : "");
	comm->bufs[i] = table[i];
	comm->nbufs = n;
	*index = (int)i;
	return 0;
}

int nz_comm_unregister_buffer(struct nz_comm *comm, int index)
{
	struct iovec table[NZ_COMM_MAX_BUFFERS];
	unsigned int n;
	int ret;

	if (!comm || index < 0 || (unsigned int)index >= comm->nbufs ||
	    !comm->bufs[index].iov_base)
		return nzi_error(-EINVAL, "unregister_buffer: no buffer %d", index);
	ret = nzi_buffers_idle(comm, "unregister_buffer");
	if (ret)
		return ret;
	memcpy(table, comm->bufs, sizeof(table));
	table[index].iov_base = NULL;
	table[index].iov_len = 0;
	for (n = comm->nbufs; n && !table[n - 1].iov_base; n--)
		;
	ret = nzi_register(comm, table, n);
	if (ret)
		return nzi_error(ret, "unregister_buffer: %s", strerror(-ret));
	memcpy(comm->bufs, table, sizeof(table));
	comm->nbufs = n;
	return 0;
}
