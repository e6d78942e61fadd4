// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The collective engine: runs one schedule (coll.h) to completion.
 *
 * Ops become ready when their dependencies are done.  Local ops
 * (reductions, copies) run at once on the calling thread; sends start in
 * the order they became ready, at most max_send in flight; receives are
 * posted strictly in index order, at most max_recv in flight.  Builders
 * number ops consistently with the steps of the algorithm on every rank,
 * so the oldest unfinished receive of the whole job is always posted and
 * its matching send always started: windows never deadlock.
 *
 * Every received message is checked: its length, and the header when it
 * carries one (coll.h).  The first failure puts the schedule in abort
 * mode (coll.h, "Errors"); a schedule is finished when every op is done
 * and nothing is in flight, so a finished schedule never has a transfer
 * that could still write its buffers.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "coll.h"

/* ---- Header wire format ---- */

static void nzi_put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t nzi_get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint32_t nzi_hdr_check(const uint8_t *p)
{
	uint32_t h = 2166136261u;	/* FNV-1a over bytes 0..43 */

	for (int i = 0; i < 44; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

/*
 *  0 magic  4 version  5 coll  6 dtype  7 op  8 seq  12 flags  16 root
 * 20 err   24 count (u64)  32 algo  33..35 0  36 param  40 0  44 check
 */
void nzi_hdr_encode(void *buf, const struct nzi_hdr *h)
{
	uint8_t *p = buf;

	memset(p, 0, NZI_HDR_LEN);
	nzi_put32(p, NZI_HDR_MAGIC);
	p[4] = NZI_HDR_VERSION;
	p[5] = h->coll;
	p[6] = h->dtype;
	p[7] = h->op;
	nzi_put32(p + 8, h->seq);
	nzi_put32(p + 12, h->flags);
	nzi_put32(p + 16, (uint32_t)h->root);
	nzi_put32(p + 20, (uint32_t)h->err);
	nzi_put32(p + 24, (uint32_t)h->count);
	nzi_put32(p + 28, (uint32_t)(h->count >> 32));
	p[32] = h->algo;
	nzi_put32(p + 36, h->param);
	nzi_put32(p + 44, nzi_hdr_check(p));
}

bool nzi_hdr_decode(const void *buf, size_t len, struct nzi_hdr *h)
{
	const uint8_t *p = buf;

	if (len < NZI_HDR_LEN || nzi_get32(p) != NZI_HDR_MAGIC ||
	    p[4] != NZI_HDR_VERSION || nzi_get32(p + 44) != nzi_hdr_check(p))
		return false;
	h->coll = p[5];
	h->dtype = p[6];
	h->op = p[7];
	h->seq = nzi_get32(p + 8);
	h->flags = nzi_get32(p + 12);
	h->root = (int32_t)nzi_get32(p + 16);
	h->err = (int32_t)nzi_get32(p + 20);
	h->count = nzi_get32(p + 24) | (uint64_t)nzi_get32(p + 28) << 32;
	h->algo = p[32];
	h->param = nzi_get32(p + 36);
	return true;
}

/* ---- Building ---- */

int nzi_sched_init(struct nzi_sched *s, struct nz_comm *comm,
		   const struct nzi_hdr *hdr)
{
	struct nzi_coll *c = comm->coll;

	memset(s, 0, sizeof(*s));
	s->comm = comm;
	s->xp = c->xp;
	s->xctx = c->xctx;
	s->rank = comm->rank;
	s->size = comm->size;
	s->dtype = (enum nz_dtype)hdr->dtype;
	s->op = (enum nz_redop)hdr->op;
	s->hdr = *hdr;
	nzi_hdr_encode(s->hdrwire, hdr);
	s->max_recv = c->tune.window ? c->tune.window : 1;
	s->max_send = 32;
	s->gate = -1;
	return 0;
}

void nzi_sched_free(struct nzi_sched *s)
{
	for (uint32_t i = 0; i < s->nscratch; i++)
		free(s->scratch[i].p);
	free(s->scratch);
	free(s->ops);
	free(s->edges);
	free(s->succ);
	free(s->recvs);
	free(s->sendq);
	free(s->localq);
	free(s->flight);
	memset(s, 0, sizeof(*s));
}

static bool nzi_grow(void **arr, uint32_t *cap, uint32_t need, size_t elem)
{
	uint32_t n;
	void *p;

	if (need <= *cap)
		return true;
	n = *cap ? *cap * 2 : 64;
	while (n < need)
		n *= 2;
	p = realloc(*arr, (size_t)n * elem);
	if (!p)
		return false;
	*arr = p;
	*cap = n;
	return true;
}

void nzi_dep(struct nzi_sched *s, int op, int dep)
{
	if (op < 0 || dep < 0 || s->err)
		return;
	if (!nzi_grow((void **)&s->edges, &s->ecap, s->nedges + 1, sizeof(*s->edges))) {
		s->err = -ENOMEM;
		return;
	}
	s->edges[s->nedges].from = (uint32_t)dep;
	s->edges[s->nedges].to = (uint32_t)op;
	s->nedges++;
}

static int nzi_op_new(struct nzi_sched *s, enum nzi_op_kind kind)
{
	struct nzi_op *o;
	int idx;

	if (s->err)
		return -1;
	if (!nzi_grow((void **)&s->ops, &s->cap, s->nops + 1, sizeof(*s->ops))) {
		s->err = -ENOMEM;
		return -1;
	}
	idx = (int)s->nops++;
	o = &s->ops[idx];
	memset(o, 0, sizeof(*o));
	o->kind = (uint8_t)kind;
	o->peer = -1;
	nzi_dep(s, idx, s->gate);
	return idx;
}

int nzi_send(struct nzi_sched *s, int peer, uint32_t tag, const void *buf,
	     size_t len, unsigned int flags)
{
	int i = nzi_op_new(s, NZI_OP_SEND);

	if (i >= 0) {
		s->ops[i].peer = peer;
		s->ops[i].tag = tag;
		s->ops[i].src = buf;
		s->ops[i].len = len;
		s->ops[i].flags = (uint8_t)flags;
	}
	return i;
}

int nzi_recv(struct nzi_sched *s, int peer, uint32_t tag, void *buf,
	     size_t len, unsigned int flags)
{
	int i = nzi_op_new(s, NZI_OP_RECV);

	if (i >= 0) {
		s->ops[i].peer = peer;
		s->ops[i].tag = tag;
		s->ops[i].dst = buf;
		s->ops[i].len = len;
		s->ops[i].flags = (uint8_t)flags;
	}
	return i;
}

static int nzi_local(struct nzi_sched *s, enum nzi_op_kind kind, void *dst,
		     const void *a, const void *b, size_t len)
{
	int i = nzi_op_new(s, kind);

	if (i >= 0) {
		s->ops[i].dst = dst;
		s->ops[i].src = a;
		s->ops[i].src2 = b;
		s->ops[i].len = len;
	}
	return i;
}

int nzi_reduce(struct nzi_sched *s, void *dst, const void *a, const void *b,
	       size_t count)
{
	return nzi_local(s, NZI_OP_REDUCE, dst, a, b, count);
}

int nzi_copy(struct nzi_sched *s, void *dst, const void *src, size_t len)
{
	return nzi_local(s, NZI_OP_COPY, dst, src, NULL, len);
}

int nzi_stage(struct nzi_sched *s, void *dst, const void *src, size_t len)
{
	return nzi_local(s, NZI_OP_STAGE, dst, src, NULL, len);
}

int nzi_avg(struct nzi_sched *s, void *buf, size_t count)
{
	return nzi_local(s, NZI_OP_AVG, buf, NULL, NULL, count);
}

int nzi_nop(struct nzi_sched *s)
{
	return nzi_local(s, NZI_OP_NOP, NULL, NULL, NULL, 0);
}

void *nzi_scratch(struct nzi_sched *s, size_t len)
{
	void *p;

	if (s->err)
		return NULL;
	if (!nzi_grow((void **)&s->scratch, &s->scap, s->nscratch + 1, sizeof(*s->scratch)))
		goto fail;
	p = aligned_alloc(64, (len + 63) & ~(size_t)63 ? (len + 63) & ~(size_t)63 : 64);
	if (!p)
		goto fail;
	s->scratch[s->nscratch].p = p;
	s->scratch[s->nscratch].len = len;
	s->nscratch++;
	return p;
fail:
	s->err = -ENOMEM;
	return NULL;
}

/* A header-only message to peer, before the data that follows it. */
int nzi_hdr_send(struct nzi_sched *s, int peer)
{
	return nzi_send(s, peer, NZI_TAG(NZI_STEP_HDR, 0), s->hdrwire,
			NZI_HDR_LEN, NZI_F_HDRONLY);
}

int nzi_hdr_recv(struct nzi_sched *s, int peer)
{
	void *buf = nzi_scratch(s, NZI_HDR_LEN);

	return buf ? nzi_recv(s, peer, NZI_TAG(NZI_STEP_HDR, 0), buf,
			      NZI_HDR_LEN, NZI_F_HDRONLY) : -1;
}

/*
 * Check mode: a dissemination exchange of headers in ceil(log2 n) rounds.
 * Round k sends to rank + 2^k and receives from rank - 2^k; each frame
 * says whether its sender saw a mismatch so far (NZI_HDR_SEEN).  If any
 * two ranks differ, two neighbours differ and one of them sees it in round
 * 0; the flag then reaches every rank by the last round, as a
 * dissemination barrier's tokens do.  The pattern depends on the size
 * only, so it completes whatever the arguments; the data ops wait for the
 * gate, which fails the collective on every rank when a mismatch was seen.
 */
void nzi_agree(struct nzi_sched *s)
{
	int join = -1, k = 0;

	for (int d = 1; d < s->size; d <<= 1, k++) {
		void *out = nzi_scratch(s, NZI_HDR_LEN);
		void *in = nzi_scratch(s, NZI_HDR_LEN);
		int sd, rv, j;

		if (!out || !in)
			return;
		sd = nzi_send(s, (s->rank + d) % s->size, NZI_TAG(NZI_STEP_AGREE + k, 0),
			      out, NZI_HDR_LEN, NZI_F_AGREE);
		/* Round k starts when every earlier round's frame has come. */
		nzi_dep(s, sd, join);
		rv = nzi_recv(s, (s->rank - d + s->size) % s->size,
			      NZI_TAG(NZI_STEP_AGREE + k, 0), in, NZI_HDR_LEN, NZI_F_AGREE);
		j = nzi_nop(s);
		nzi_dep(s, j, rv);
		nzi_dep(s, j, join);
		join = j;
	}
	s->gate = nzi_nop(s);
	nzi_dep(s, s->gate, join);
}

/* ---- Failure ---- */

static const char *nzi_coll_what(const struct nzi_sched *s)
{
	const char *n = nz_coll_name((enum nz_coll)s->hdr.coll);

	return n ? n : "collective";
}

static void nzi_enter_abort(struct nzi_sched *s);

void nzi_sched_fail(struct nzi_sched *s, int err, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!s->err) {
		s->err = err;
		n = snprintf(s->errmsg, sizeof(s->errmsg), "%s #%u (rank %d of %d): ",
			     nzi_coll_what(s), s->hdr.seq, s->rank, s->size);
		if (n < 0 || (size_t)n >= sizeof(s->errmsg))
			n = 0;
		va_start(ap, fmt);
		vsnprintf(s->errmsg + n, sizeof(s->errmsg) - (size_t)n, fmt, ap);
		va_end(ap);
	}
	if (!s->aborting)
		nzi_enter_abort(s);
}

/* ---- Running ---- */

static bool nzi_is_local(const struct nzi_op *o)
{
	return o->kind != NZI_OP_SEND && o->kind != NZI_OP_RECV;
}

static void nzi_make_ready(struct nzi_sched *s, uint32_t i)
{
	struct nzi_op *o = &s->ops[i];

	o->state = NZI_OS_READY;
	if (o->kind == NZI_OP_SEND)
		s->sendq[s->sq_tail++] = i;
	else if (nzi_is_local(o))
		s->localq[s->nlocal++] = i;
	/* receives: posted by the cursor, in index order */
}

static void nzi_op_done(struct nzi_sched *s, uint32_t i)
{
	struct nzi_op *o = &s->ops[i];

	o->state = NZI_OS_DONE;
	s->ndone++;
	if (s->aborting)
		return;
	for (uint32_t k = o->succ; k < o->succ + o->nsucc; k++) {
		uint32_t j = s->succ[k];

		if (--s->ops[j].ndeps == 0 && s->ops[j].state == NZI_OS_WAIT)
			nzi_make_ready(s, j);
	}
}

/*
 * Abort mode: every send not started becomes an abort frame, every other
 * op not started is dropped; what is in flight finishes normally.
 */
static void nzi_enter_abort(struct nzi_sched *s)
{
	struct nzi_hdr h = s->hdr;

	s->aborting = true;
	s->abort_ms = nzi_now_ms();
	h.flags |= NZI_HDR_ABORT;
	h.err = s->err ? s->err : -ECANCELED;
	nzi_hdr_encode(s->abortwire, &h);
	if (!s->sendq)		/* not started yet: nothing to convert */
		return;
	for (uint32_t i = 0; i < s->nops; i++) {
		struct nzi_op *o = &s->ops[i];

		if (o->state == NZI_OS_DONE || o->state == NZI_OS_FLIGHT)
			continue;
		if (o->kind == NZI_OP_SEND) {
			if (o->state == NZI_OS_WAIT) {
				o->state = NZI_OS_READY;
				s->sendq[s->sq_tail++] = i;
			}
			continue;
		}
		o->state = NZI_OS_DONE;
		s->ndone++;
	}
	s->nlocal = 0;
	s->next_recv = s->nrecvs;
}

static void nzi_describe(char *buf, size_t len, const struct nzi_hdr *h)
{
	const char *d = nz_dtype_name((enum nz_dtype)h->dtype);
	const char *o = nz_redop_name((enum nz_redop)h->op);
	const char *c = nz_coll_name((enum nz_coll)h->coll);
	const char *a = nz_coll_algo_name((enum nz_coll_algo)h->algo);

	snprintf(buf, len, "%s(count %llu, %s, %s, root %d, algorithm %s, segment %u)",
		 c ? c : "?", (unsigned long long)h->count, d ? d : "?", o ? o : "?",
		 (int)h->root, a ? a : "?", h->param);
}

/* 0 if the peer's header h matches ours, else describe the difference. */
static bool nzi_hdr_same(const struct nzi_hdr *a, const struct nzi_hdr *b)
{
	return a->coll == b->coll && a->dtype == b->dtype && a->op == b->op &&
	       a->algo == b->algo && a->seq == b->seq && a->root == b->root &&
	       a->count == b->count && a->param == b->param;
}

static void nzi_mismatch(struct nzi_sched *s, int peer, const struct nzi_hdr *h)
{
	char theirs[160], ours[160];

	nzi_describe(theirs, sizeof(theirs), h);
	nzi_describe(ours, sizeof(ours), &s->hdr);
	if (h->seq != s->hdr.seq)
		nzi_sched_fail(s, -EPROTO, "rank %d is at collective #%u: the ranks did not call the same collectives in the same order",
			       peer, h->seq);
	else
		nzi_sched_fail(s, -EPROTO, "arguments differ between ranks: rank %d called %s, this rank %s",
			       peer, theirs, ours);
}

static void nzi_remote_abort(struct nzi_sched *s, int peer, const struct nzi_hdr *h)
{
	int err = h->err < 0 && h->err > -4096 ? h->err : -EPROTO;

	nzi_sched_fail(s, err, "rank %d failed (%s), so this rank cannot finish",
		       peer, strerror(-err));
}

/* A receive that carries a header: check it.  False if the op failed. */
static bool nzi_check_hdr(struct nzi_sched *s, struct nzi_op *o, int64_t res)
{
	struct nzi_hdr h;

	if (!nzi_hdr_decode(o->dst, (size_t)res, &h)) {
		nzi_sched_fail(s, -EPROTO, "message of %lld bytes from rank %d has no valid header (expected %zu bytes)",
			       (long long)res, o->peer, o->len);
		return false;
	}
	if (h.flags & NZI_HDR_ABORT) {
		nzi_remote_abort(s, o->peer, &h);
		return false;
	}
	if (o->flags & NZI_F_AGREE) {
		if (!nzi_hdr_same(&h, &s->hdr) || (h.flags & NZI_HDR_SEEN))
			s->seen = true;
		return true;
	}
	if (!nzi_hdr_same(&h, &s->hdr)) {
		nzi_mismatch(s, o->peer, &h);
		return false;
	}
	if ((uint64_t)res != o->len) {
		nzi_sched_fail(s, -EPROTO, "message of %lld bytes from rank %d, expected %zu: arguments differ between ranks",
			       (long long)res, o->peer, o->len);
		return false;
	}
	return true;
}

/* A plain data receive: exactly len bytes, and not an abort frame. */
static bool nzi_check_data(struct nzi_sched *s, struct nzi_op *o, int64_t res)
{
	struct nzi_hdr h;

	if ((uint64_t)res == o->len && o->len != NZI_HDR_LEN)
		return true;
	if (res == NZI_HDR_LEN && nzi_hdr_decode(o->dst, NZI_HDR_LEN, &h) &&
	    (h.flags & NZI_HDR_ABORT) && h.seq == s->hdr.seq) {
		nzi_remote_abort(s, o->peer, &h);
		return false;
	}
	if ((uint64_t)res == o->len)
		return true;
	nzi_sched_fail(s, -EPROTO, "message of %lld bytes from rank %d, expected %zu: arguments differ between ranks",
		       (long long)res, o->peer, o->len);
	return false;
}

static void nzi_xfer_done(struct nzi_sched *s, uint32_t i, int64_t res)
{
	struct nzi_op *o = &s->ops[i];

	if (o->kind == NZI_OP_SEND) {
		s->flight_send--;
		if (o->flags & NZI_F_OWNED)
			s->flight_owned--;
	} else {
		s->flight_recv--;
	}
	s->last_progress = nzi_now_ms();
	if (s->aborting) {
		nzi_op_done(s, i);
		return;
	}
	if (res < 0) {
		if (res == -EMSGSIZE)
			nzi_sched_fail(s, -EPROTO, "message from rank %d is longer than the %zu bytes expected: arguments differ between ranks",
				       o->peer, o->len);
		else
			nzi_sched_fail(s, (int)res, "%s rank %d failed: %s%s",
				       o->kind == NZI_OP_SEND ? "send to" : "receive from",
				       o->peer, strerror((int)-res),
				       res == -ECONNRESET ? " (the rank left the job)" :
				       res == -ENETDOWN ? " (no rail left to it)" : "");
	} else if (o->kind == NZI_OP_RECV) {
		/* A failed check enters abort mode; the op is done either way. */
		if (o->flags & (NZI_F_HDR | NZI_F_HDRONLY | NZI_F_AGREE))
			nzi_check_hdr(s, o, res);
		else
			nzi_check_data(s, o, res);
	}
	nzi_op_done(s, i);
}

static void nzi_run_local(struct nzi_sched *s, uint32_t i)
{
	struct nzi_op *o = &s->ops[i];
	int ret = 0;

	switch (o->kind) {
	case NZI_OP_REDUCE:
		ret = nz_reduce3(o->dst, o->src, o->src2, o->len, s->dtype, s->op);
		break;
	case NZI_OP_COPY:
		if (o->dst != o->src && o->len)
			memcpy(o->dst, o->src, o->len);
		break;
	case NZI_OP_STAGE:
		memcpy(o->dst, s->hdrwire, NZI_HDR_LEN);
		if (o->len)
			memcpy((uint8_t *)o->dst + NZI_HDR_LEN, o->src, o->len);
		break;
	case NZI_OP_AVG:
		ret = nz_reduce_finish_avg(o->dst, o->len, s->dtype, (unsigned int)s->size);
		break;
	case NZI_OP_NOP:
		if ((int)i == s->gate && s->seen)
			nzi_sched_fail(s, -EPROTO, "arguments differ between ranks (found by the agreement round: NEZHA_COLL_CHECK)");
		break;
	default:
		break;
	}
	if (ret)
		nzi_sched_fail(s, ret, "local reduction failed: %s", strerror(-ret));
	if (o->state != NZI_OS_DONE)
		nzi_op_done(s, i);
}

/* Start one transfer: 1 started (or failed for good), 0 retry later. */
static int nzi_start_xfer(struct nzi_sched *s, uint32_t i)
{
	struct nzi_op *o = &s->ops[i];
	uint64_t tag = nzi_coll_tag(s->hdr.seq, o->tag);
	const void *buf = o->src;
	size_t len = o->len;
	void *h = NULL;
	int ret;

	if (o->kind == NZI_OP_SEND) {
		if (s->aborting) {
			buf = s->abortwire;
			len = NZI_HDR_LEN;
		} else if (o->flags & NZI_F_AGREE) {
			struct nzi_hdr hd = s->hdr;

			hd.flags |= s->seen ? NZI_HDR_SEEN : 0;
			nzi_hdr_encode((void *)o->src, &hd);
		}
		ret = s->xp->isend(s->xctx, buf, len, o->peer, tag, &h);
	} else {
		ret = s->xp->irecv(s->xctx, o->dst, o->len, o->peer, tag, &h);
	}
	if (ret == -EBUSY)
		return 0;
	if (ret) {
		nzi_sched_fail(s, ret, "cannot start a %s rank %d: %s",
			       o->kind == NZI_OP_SEND ? "send to" : "receive from",
			       o->peer, strerror(-ret));
		if (o->state != NZI_OS_DONE)
			nzi_op_done(s, i);
		return 1;
	}
	o->handle = h;
	o->state = NZI_OS_FLIGHT;
	s->flight[s->nflight++] = i;
	if (o->kind == NZI_OP_SEND) {
		if (s->aborting)	/* the abort frame is ours */
			o->flags |= NZI_F_OWNED;
		s->flight_send++;
		if (o->flags & NZI_F_OWNED)
			s->flight_owned++;
	} else {
		s->flight_recv++;
	}
	return 1;
}

bool nzi_sched_done(const struct nzi_sched *s)
{
	return s->ndone == s->nops && !s->nflight;
}

bool nzi_sched_user_done(const struct nzi_sched *s)
{
	return s->ndone + s->flight_owned == s->nops && s->nflight == s->flight_owned;
}

bool nzi_sched_progress(struct nzi_sched *s)
{
	bool moved;

	do {
		moved = false;
		for (uint32_t k = 0; k < s->nflight;) {
			uint32_t i = s->flight[k];
			int64_t res = 0;

			if (s->xp->test(s->xctx, s->ops[i].handle, &res)) {
				k++;
				continue;
			}
			s->flight[k] = s->flight[--s->nflight];
			nzi_xfer_done(s, i, res);
			moved = true;
		}
		while (s->nlocal) {
			nzi_run_local(s, s->localq[--s->nlocal]);
			moved = true;
		}
		while (s->sq_head != s->sq_tail && s->flight_send < s->max_send) {
			if (!nzi_start_xfer(s, s->sendq[s->sq_head]))
				break;
			s->sq_head++;
			moved = true;
		}
		while (s->next_recv < s->nrecvs && s->flight_recv < s->max_recv) {
			uint32_t i = s->recvs[s->next_recv];

			if (s->ops[i].state != NZI_OS_READY || !nzi_start_xfer(s, i))
				break;
			s->next_recv++;
			moved = true;
		}
	} while (moved && !nzi_sched_done(s));
	return nzi_sched_done(s);
}

static int nzi_span_cmp(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)((const struct nzi_span *)a)->p;
	uintptr_t y = (uintptr_t)((const struct nzi_span *)b)->p;

	return x < y ? -1 : x > y;
}

/* Does the send read the schedule's own memory (scratch, headers)? */
static bool nzi_owned(const struct nzi_sched *s, const struct nzi_op *o)
{
	uintptr_t a = (uintptr_t)o->src;
	uint32_t lo = 0, hi = s->nscratch;

	if (o->src == s->hdrwire)
		return true;
	while (lo < hi) {	/* the last span starting at or below a */
		uint32_t mid = (lo + hi) / 2;

		if ((uintptr_t)s->scratch[mid].p <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && a + o->len <= (uintptr_t)s->scratch[lo - 1].p + s->scratch[lo - 1].len;
}

int nzi_sched_start(struct nzi_sched *s)
{
	uint32_t n = s->nops, *deg;

	if (s->err)
		return s->err;
	s->err = 0;
	deg = calloc((size_t)n + 1, sizeof(*deg));
	s->succ = malloc(((size_t)s->nedges + 1) * sizeof(*s->succ));
	s->recvs = malloc(((size_t)n + 1) * sizeof(*s->recvs));
	s->sendq = malloc(((size_t)n + 1) * sizeof(*s->sendq));
	s->localq = malloc(((size_t)n + 1) * sizeof(*s->localq));
	s->flight = malloc(((size_t)n + 1) * sizeof(*s->flight));
	if (!deg || !s->succ || !s->recvs || !s->sendq || !s->localq || !s->flight) {
		free(deg);
		return -ENOMEM;
	}
	/* Successor lists (CSR) and dependency counts. */
	for (uint32_t e = 0; e < s->nedges; e++) {
		deg[s->edges[e].from]++;
		s->ops[s->edges[e].to].ndeps++;
	}
	for (uint32_t i = 0, at = 0; i < n; i++) {
		s->ops[i].succ = at;
		at += deg[i];
		deg[i] = s->ops[i].succ;
	}
	for (uint32_t e = 0; e < s->nedges; e++)
		s->succ[deg[s->edges[e].from]++] = s->edges[e].to;
	for (uint32_t i = 0; i < n; i++)
		s->ops[i].nsucc = deg[i] - s->ops[i].succ;
	free(deg);
	free(s->edges);
	s->edges = NULL;
	s->nedges = s->ecap = 0;

	if (s->nscratch)
		qsort(s->scratch, s->nscratch, sizeof(*s->scratch), nzi_span_cmp);
	for (uint32_t i = 0; i < n; i++) {
		if (s->ops[i].kind == NZI_OP_RECV)
			s->recvs[s->nrecvs++] = i;
		else if (s->ops[i].kind == NZI_OP_SEND && nzi_owned(s, &s->ops[i]))
			s->ops[i].flags |= NZI_F_OWNED;
		s->ops[i].state = NZI_OS_WAIT;
	}
	for (uint32_t i = 0; i < n; i++)
		if (!s->ops[i].ndeps)
			nzi_make_ready(s, i);
	s->last_progress = nzi_now_ms();
	nzi_sched_progress(s);
	return 0;
}

void *nzi_sched_critical(struct nzi_sched *s, uint32_t *op)
{
	uint32_t best = UINT32_MAX;

	for (uint32_t k = 0; k < s->nflight; k++) {
		uint32_t i = s->flight[k];
		bool recv = s->ops[i].kind == NZI_OP_RECV;

		/* The oldest receive, else the oldest send. */
		if (best == UINT32_MAX ||
		    (recv && s->ops[best].kind != NZI_OP_RECV) ||
		    (recv == (s->ops[best].kind == NZI_OP_RECV) && i < best))
			best = i;
	}
	if (best == UINT32_MAX)
		return NULL;
	*op = best;
	return s->ops[best].handle;
}

void nzi_sched_complete(struct nzi_sched *s, uint32_t op, int64_t res)
{
	for (uint32_t k = 0; k < s->nflight; k++) {
		if (s->flight[k] == op) {
			s->flight[k] = s->flight[--s->nflight];
			nzi_xfer_done(s, op, res);
			return;
		}
	}
}

uint32_t nzi_sched_cancel_recvs(struct nzi_sched *s)
{
	uint32_t n = 0;

	s->abort_ms = nzi_now_ms();
	if (!s->aborting || !s->xp->cancel)
		return 0;
	for (uint32_t k = 0; k < s->nflight; k++) {
		const struct nzi_op *o = &s->ops[s->flight[k]];

		if (o->kind == NZI_OP_RECV && !s->xp->cancel(s->xctx, o->handle))
			n++;
	}
	return n;
}

int64_t nzi_sched_abort_due(const struct nzi_sched *s, int64_t now, int grace_ms)
{
	int64_t since = s->last_progress > s->abort_ms ? s->last_progress : s->abort_ms;

	if (!s->aborting || !s->flight_recv || !s->xp->cancel || grace_ms <= 0)
		return -1;
	return since + grace_ms > now ? since + grace_ms - now : 0;
}

/* Abort mode, and the abort frames cannot even be started: give up on them. */
void nzi_sched_drop_unsent(struct nzi_sched *s)
{
	while (s->aborting && s->sq_head != s->sq_tail)
		nzi_op_done(s, s->sendq[s->sq_head++]);
}
