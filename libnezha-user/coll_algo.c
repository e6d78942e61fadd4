// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Collective algorithms, each written as a schedule builder (coll.h).
 *
 * Conventions: n ranks, this is rank r; es = element size; a "block" is a
 * rank's share of a vector split n ways (block_off/block_len, the first
 * count % n blocks one element longer); a "segment" is the unit of a
 * pipelined algorithm (at most segment bytes; a block has at least one,
 * possibly empty, so that the message pattern depends only on n).
 * Small algorithms send header + payload in one message (NZI_F_HDR) and
 * stage the payload into a scratch buffer; pipelined ones send user
 * memory as it is and exchange headers first (nzi_hdr_send/recv), and
 * their receives from a peer wait for that peer's header, so that a
 * mismatch stops them before they post receives that would never match.
 *
 * Every builder creates ops in step order (see coll_sched.c) and gives
 * every message a tag (step, segment) unique between two ranks.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "coll.h"

#define H	NZI_HDR_LEN

static int nzi_mod(long a, int n)
{
	a %= n;
	return (int)(a < 0 ? a + n : a);
}

static size_t nzi_block_off(size_t count, int n, int b)
{
	size_t q = count / (size_t)n, rem = count % (size_t)n;

	return (size_t)b * q + ((size_t)b < rem ? (size_t)b : rem);
}

static size_t nzi_block_len(size_t count, int n, int b)
{
	return count / (size_t)n + ((size_t)b < count % (size_t)n);
}

static int nzi_log2(int p)
{
	int k = 0;

	while ((1 << k) < p)
		k++;
	return k;
}

/*
 * A pipeline needs several segments in flight to overlap anything: a unit
 * (block, or message) is cut into at least NZI_PIPE_SEGS of them as long
 * as they stay NZI_PIPE_MIN bytes or more (or the configured segment, if
 * smaller); larger units get segments of the configured size.
 */
#define NZI_PIPE_SEGS	4
#define NZI_PIPE_MIN	(64u << 10)

/* Elements per segment of a unit of `longest` elements. */
static size_t nzi_seg_elems(const struct nzi_args *a, size_t longest)
{
	size_t es = nz_dtype_size(a->dtype), seg = a->segment;
	size_t part = (longest * es + NZI_PIPE_SEGS - 1) / NZI_PIPE_SEGS;
	size_t min = longest / ((size_t)NZI_MAX_SEG + 1) + 1, e;

	if (part < seg) {
		/* A quarter of the unit, but none under 64 KiB unless seg is. */
		size_t floor = seg < NZI_PIPE_MIN ? seg : NZI_PIPE_MIN;

		seg = part > floor ? part : floor;
	}
	e = seg / es ? seg / es : 1;
	return e < min ? min : e;
}

static uint32_t nzi_nseg(size_t len, size_t e)
{
	return len ? (uint32_t)((len + e - 1) / e) : 1;
}

static size_t nzi_seg_len(size_t len, size_t e, uint32_t k)
{
	size_t off = (size_t)k * e;

	return off >= len ? 0 : (len - off < e ? len - off : e);
}

/* Rotating scratch slots of pipelined algorithms; user = last op on it. */
struct nzi_slots {
	uint8_t **buf;
	int *user;
	unsigned int n, next;
};

static int nzi_slots_init(struct nzi_sched *s, struct nzi_slots *sl,
			  unsigned int n, size_t len)
{
	sl->n = n ? n : 1;
	sl->next = 0;
	sl->buf = calloc(sl->n, sizeof(*sl->buf));
	sl->user = malloc(sl->n * sizeof(*sl->user));
	if (!sl->buf || !sl->user)
		return -ENOMEM;
	for (unsigned int i = 0; i < sl->n; i++) {
		sl->buf[i] = nzi_scratch(s, len);
		sl->user[i] = -1;
		if (!sl->buf[i])
			return -ENOMEM;
	}
	return 0;
}

static void nzi_slots_free(struct nzi_slots *sl)
{
	free(sl->buf);
	free(sl->user);
}

static unsigned int nzi_slot_take(struct nzi_slots *sl)
{
	unsigned int j = sl->next;

	sl->next = (sl->next + 1) % sl->n;
	return j;
}

/*
 * Pieces: the small algorithms may cut a vector into a few messages
 * (recursive doubling: above small_segment bytes, at most NZI_MAX_PIECES),
 * each reduced as it arrives; the module can carry them on different
 * rails at once.  Piece j holds elements [j * per, min(count, (j+1) * per)).
 * The number of pieces depends on the count, so the receives of pieces
 * 1.. of an exchange wait for piece 0, whose header shows a count that
 * differs: then no receive is posted for a piece that will not come.
 */
#define NZI_MAX_PIECES	16

struct nzi_pieces {
	uint32_t n;
	size_t per, count;
};

static void nzi_pieces_init(struct nzi_pieces *pc, size_t count, size_t es, size_t seg)
{
	size_t bytes = count * es, n;

	pc->count = count;
	pc->n = 1;
	pc->per = count;
	if (!seg || bytes <= seg)
		return;
	n = (bytes + seg - 1) / seg;
	n = n > NZI_MAX_PIECES ? NZI_MAX_PIECES : n;
	pc->per = (count + n - 1) / n;
	pc->n = (uint32_t)((count + pc->per - 1) / pc->per);
}

static size_t nzi_piece_off(const struct nzi_pieces *pc, uint32_t j)
{
	return (size_t)j * pc->per;
}

static size_t nzi_piece_len(const struct nzi_pieces *pc, uint32_t j)
{
	size_t off = (size_t)j * pc->per;

	return pc->count - off < pc->per ? pc->count - off : pc->per;
}

/*
 * The non-power-of-two fix-up of recursive doubling and halving-doubling:
 * with p the largest power of two <= n and rem = n - p, each even rank
 * below 2 rem hands its vector to the odd rank above it and waits for the
 * result; the others continue as p virtual ranks.  Returns the virtual
 * rank, or -1 for a rank that only waited (its schedule is complete).
 * last[j] is the op that last wrote piece j of acc.
 */
static int nzi_fixup_pre(struct nzi_sched *s, uint8_t *acc, const struct nzi_pieces *pc,
			 uint32_t final_step, int *last)
{
	int n = s->size, r = s->rank, p = nzi_pow2_floor(n), rem = n - p, first = -1;
	size_t es = nz_dtype_size(s->dtype);

	if (r >= 2 * rem)
		return r - rem;
	for (uint32_t j = 0; j < pc->n; j++) {
		size_t off = nzi_piece_off(pc, j) * es, len = nzi_piece_len(pc, j) * es;
		uint8_t *in = nzi_scratch(s, H + len), *out;
		int st, sd, rv, cp, rd;

		if (!in)
			return -1;
		if (r % 2 == 0) {
			out = nzi_scratch(s, H + len);
			if (!out)
				return -1;
			st = nzi_stage(s, out, acc + off, len);
			nzi_dep(s, st, last[j]);
			sd = nzi_send(s, r + 1, NZI_TAG(0, j), out, H + len, NZI_F_HDR);
			nzi_dep(s, sd, st);
			rv = nzi_recv(s, r + 1, NZI_TAG(final_step, j), in, H + len, NZI_F_HDR);
			nzi_dep(s, rv, first);
			first = j ? first : rv;
			cp = nzi_copy(s, acc + off, in + H, len);
			nzi_dep(s, cp, rv);
			nzi_dep(s, cp, st);
			continue;
		}
		rv = nzi_recv(s, r - 1, NZI_TAG(0, j), in, H + len, NZI_F_HDR);
		nzi_dep(s, rv, first);
		first = j ? first : rv;
		rd = nzi_reduce(s, acc + off, acc + off, in + H, nzi_piece_len(pc, j));
		nzi_dep(s, rd, rv);
		nzi_dep(s, rd, last[j]);
		last[j] = rd;
	}
	return r % 2 ? r / 2 : -1;
}

static int nzi_real_rank(int vr, int rem)
{
	return vr < rem ? 2 * vr + 1 : vr + rem;
}

static void nzi_fixup_post(struct nzi_sched *s, const uint8_t *acc,
			   const struct nzi_pieces *pc, uint32_t final_step, const int *last)
{
	int n = s->size, r = s->rank, rem = n - nzi_pow2_floor(n);
	size_t es = nz_dtype_size(s->dtype);

	if (r >= 2 * rem || r % 2 == 0)
		return;
	for (uint32_t j = 0; j < pc->n; j++) {
		size_t off = nzi_piece_off(pc, j) * es, len = nzi_piece_len(pc, j) * es;
		uint8_t *out = nzi_scratch(s, H + len);
		int st, sd;

		if (!out)
			return;
		st = nzi_stage(s, out, acc + off, len);
		nzi_dep(s, st, last[j]);
		sd = nzi_send(s, r - 1, NZI_TAG(final_step, j), out, H + len, NZI_F_HDR);
		nzi_dep(s, sd, st);
	}
}

/* ---- allreduce ---- */

/*
 * Recursive doubling: log2(p) exchanges of the whole vector, each piece
 * on its own: a piece goes on to the next step as soon as it is reduced.
 */
static int nzi_allreduce_rd(struct nzi_sched *s, const struct nzi_args *a)
{
	size_t es = nz_dtype_size(a->dtype);
	int p = nzi_pow2_floor(s->size), rem = s->size - p, steps = nzi_log2(p);
	uint32_t final_step = 1 + (uint32_t)steps;
	uint8_t *acc = a->recvbuf;
	int last[NZI_MAX_PIECES], vr, k = 0;
	struct nzi_pieces pc;

	nzi_pieces_init(&pc, a->count, es, a->small_segment);
	for (uint32_t j = 0; j < pc.n; j++) {
		size_t off = nzi_piece_off(&pc, j) * es;

		last[j] = a->sendbuf == a->recvbuf ? -1 :
			  nzi_copy(s, acc + off, (const uint8_t *)a->sendbuf + off,
				   nzi_piece_len(&pc, j) * es);
	}
	vr = nzi_fixup_pre(s, acc, &pc, final_step, last);
	if (vr < 0)
		return s->err;
	for (int d = 1; d < p; d <<= 1, k++) {
		int peer = nzi_real_rank(vr ^ d, rem), first = -1;

		for (uint32_t j = 0; j < pc.n; j++) {
			size_t off = nzi_piece_off(&pc, j) * es, len = nzi_piece_len(&pc, j) * es;
			uint8_t *out = nzi_scratch(s, H + len), *in = nzi_scratch(s, H + len);
			int st, sd, rv, rd;

			if (!out || !in)
				return -ENOMEM;
			st = nzi_stage(s, out, acc + off, len);
			nzi_dep(s, st, last[j]);
			sd = nzi_send(s, peer, NZI_TAG(1 + k, j), out, H + len, NZI_F_HDR);
			nzi_dep(s, sd, st);
			rv = nzi_recv(s, peer, NZI_TAG(1 + k, j), in, H + len, NZI_F_HDR);
			nzi_dep(s, rv, first);	/* a count mismatch shows in piece 0 */
			first = j ? first : rv;
			rd = nzi_reduce(s, acc + off, acc + off, in + H, nzi_piece_len(&pc, j));
			nzi_dep(s, rd, rv);
			nzi_dep(s, rd, st);
			last[j] = rd;
		}
	}
	for (uint32_t j = 0; j < pc.n && a->op == NZ_AVG; j++) {
		int av = nzi_avg(s, acc + nzi_piece_off(&pc, j) * es, nzi_piece_len(&pc, j));

		nzi_dep(s, av, last[j]);
		last[j] = av;
	}
	nzi_fixup_post(s, acc, &pc, final_step, last);
	return s->err;
}

/*
 * Recursive halving-doubling (Rabenseifner): reduce-scatter by recursive
 * halving (each step exchanges half of the remaining range), then
 * allgather by recursive doubling.  Bandwidth 2(p-1)/p of the vector, in
 * 2 log2(p) steps.
 */
static int nzi_allreduce_hd(struct nzi_sched *s, const struct nzi_args *a)
{
	size_t es = nz_dtype_size(a->dtype), bytes = a->count * es;
	int p = nzi_pow2_floor(s->size), rem = s->size - p, steps = nzi_log2(p);
	uint32_t final_step = 1 + 2 * (uint32_t)steps;
	uint8_t *acc = a->recvbuf;
	int last = -1, vr, lo = 0, k = 0;
	struct nzi_pieces whole;

	nzi_pieces_init(&whole, a->count, es, 0);
	if (a->sendbuf != a->recvbuf)
		last = nzi_copy(s, acc, a->sendbuf, bytes);
	vr = nzi_fixup_pre(s, acc, &whole, final_step, &last);
	if (vr < 0)
		return s->err;
	/* Halving: the range [lo, lo + 2d) of the p blocks splits in two. */
	for (int d = p / 2; d >= 1; d /= 2, k++) {
		int peer = nzi_real_rank(vr ^ d, rem), keep = (vr & d) ? lo + d : lo;
		int give = (vr & d) ? lo : lo + d, st, sd, rv, rd;
		size_t goff = nzi_block_off(a->count, p, give);
		size_t glen = nzi_block_off(a->count, p, give + d) - goff;
		size_t koff = nzi_block_off(a->count, p, keep);
		size_t klen = nzi_block_off(a->count, p, keep + d) - koff;
		uint8_t *out = nzi_scratch(s, H + glen * es), *in = nzi_scratch(s, H + klen * es);

		if (!out || !in)
			return -ENOMEM;
		st = nzi_stage(s, out, acc + goff * es, glen * es);
		nzi_dep(s, st, last);
		sd = nzi_send(s, peer, NZI_TAG(1 + k, 0), out, H + glen * es, NZI_F_HDR);
		nzi_dep(s, sd, st);
		rv = nzi_recv(s, peer, NZI_TAG(1 + k, 0), in, H + klen * es, NZI_F_HDR);
		rd = nzi_reduce(s, acc + koff * es, acc + koff * es, in + H, klen);
		nzi_dep(s, rd, rv);
		nzi_dep(s, rd, last);
		last = rd;
		lo = keep;
	}
	if (a->op == NZ_AVG) {
		size_t off = nzi_block_off(a->count, p, vr);
		int av = nzi_avg(s, acc + off * es, nzi_block_len(a->count, p, vr));

		nzi_dep(s, av, last);
		last = av;
	}
	/* Doubling: exchange the ranges aligned to d. */
	for (int d = 1; d < p; d <<= 1, k++) {
		int pv = vr ^ d, peer = nzi_real_rank(pv, rem), st, sd, rv, cp;
		int mlo = vr & ~(d - 1), plo = pv & ~(d - 1);
		size_t moff = nzi_block_off(a->count, p, mlo);
		size_t mlen = nzi_block_off(a->count, p, mlo + d) - moff;
		size_t poff = nzi_block_off(a->count, p, plo);
		size_t plen = nzi_block_off(a->count, p, plo + d) - poff;
		uint8_t *out = nzi_scratch(s, H + mlen * es), *in = nzi_scratch(s, H + plen * es);

		if (!out || !in)
			return -ENOMEM;
		st = nzi_stage(s, out, acc + moff * es, mlen * es);
		nzi_dep(s, st, last);
		sd = nzi_send(s, peer, NZI_TAG(1 + k, 0), out, H + mlen * es, NZI_F_HDR);
		nzi_dep(s, sd, st);
		rv = nzi_recv(s, peer, NZI_TAG(1 + k, 0), in, H + plen * es, NZI_F_HDR);
		cp = nzi_copy(s, acc + poff * es, in + H, plen * es);
		nzi_dep(s, cp, rv);
		nzi_dep(s, cp, last);
		last = cp;
	}
	nzi_fixup_post(s, acc, &whole, final_step, &last);
	return s->err;
}

/*
 * Pipelined ring: reduce-scatter then allgather, 2(n-1) steps.  In step t
 * of the reduce-scatter this rank sends block r-t to its right neighbour
 * and receives block r-t-1 from its left one, adding its own contribution;
 * after n-1 steps it holds the reduced block r+1, which the allgather
 * passes around.  Every block travels in segments, and a segment moves on
 * as soon as it is reduced: each segment is an independent chain through
 * the 2(n-1) steps, so reductions overlap transfers.  Out of place, data
 * is received straight into recvbuf; in place, into rotating slots.
 */
static int nzi_allreduce_ring(struct nzi_sched *s, const struct nzi_args *a)
{
	int n = s->size, r = s->rank, left = nzi_mod(r - 1, n), right = nzi_mod(r + 1, n);
	size_t es = nz_dtype_size(a->dtype), e = nzi_seg_elems(a, nzi_block_len(a->count, n, 0));
	const uint8_t *mine = a->sendbuf;
	uint8_t *acc = a->recvbuf;
	bool inplace = a->sendbuf == a->recvbuf;
	uint32_t nseg = nzi_nseg(nzi_block_len(a->count, n, 0), e);
	int *prod = NULL, *sent = NULL, hr, ret = -ENOMEM;
	struct nzi_slots sl = { 0 };

	/* Blocks differ by one element at most: nseg of the longest fits all. */
	prod = malloc((size_t)n * nseg * sizeof(*prod));
	sent = malloc((size_t)n * nseg * sizeof(*sent));
	if (!prod || !sent)
		goto out;
	for (size_t i = 0; i < (size_t)n * nseg; i++)
		prod[i] = sent[i] = -1;
	if (inplace && nzi_slots_init(s, &sl, a->window < nseg * (uint32_t)(n - 1) ?
				      a->window : nseg * (uint32_t)(n - 1), e * es))
		goto out;
	nzi_hdr_send(s, right);
	hr = nzi_hdr_recv(s, left);

	for (int g = 0; g < 2 * (n - 1); g++) {
		bool rs = g < n - 1;
		int t = rs ? g : g - (n - 1);
		int sb = rs ? nzi_mod(r - t, n) : nzi_mod(r + 1 - t, n);
		int rb = rs ? nzi_mod(r - t - 1, n) : nzi_mod(r - t, n);
		size_t sbl = nzi_block_len(a->count, n, sb), rbl = nzi_block_len(a->count, n, rb);
		size_t sbo = nzi_block_off(a->count, n, sb), rbo = nzi_block_off(a->count, n, rb);

		for (uint32_t k = 0; k < nseg; k++) {
			size_t slen = nzi_seg_len(sbl, e, k), rlen = nzi_seg_len(rbl, e, k);
			size_t so = (sbo + (size_t)k * e) * es, ro = (rbo + (size_t)k * e) * es;
			int *sp = &prod[(size_t)sb * nseg + k], *rp = &prod[(size_t)rb * nseg + k];
			int sd, rv, rd;

			if (k < nzi_nseg(sbl, e)) {
				const uint8_t *src = (rs && t == 0) ? mine + so : acc + so;

				sd = nzi_send(s, right, NZI_TAG(g, k), src, slen * es, 0);
				nzi_dep(s, sd, *sp);
				if (rs)
					sent[(size_t)sb * nseg + k] = sd;
			}
			if (k >= nzi_nseg(rbl, e))
				continue;
			if (!rs) {	/* allgather: straight into place */
				rv = nzi_recv(s, left, NZI_TAG(g, k), acc + ro, rlen * es, 0);
				nzi_dep(s, rv, hr);
				nzi_dep(s, rv, sent[(size_t)rb * nseg + k]);
				*rp = rv;
			} else if (!inplace) {
				rv = nzi_recv(s, left, NZI_TAG(g, k), acc + ro, rlen * es, 0);
				nzi_dep(s, rv, hr);
				rd = nzi_reduce(s, acc + ro, acc + ro, mine + ro, rlen);
				nzi_dep(s, rd, rv);
				*rp = rd;
			} else {
				unsigned int j = nzi_slot_take(&sl);

				rv = nzi_recv(s, left, NZI_TAG(g, k), sl.buf[j], rlen * es, 0);
				nzi_dep(s, rv, hr);
				nzi_dep(s, rv, sl.user[j]);
				rd = nzi_reduce(s, acc + ro, acc + ro, sl.buf[j], rlen);
				nzi_dep(s, rd, rv);
				sl.user[j] = rd;
				*rp = rd;
			}
			if (rs && t == n - 2 && a->op == NZ_AVG) {
				int av = nzi_avg(s, acc + ro, rlen);

				nzi_dep(s, av, *rp);
				*rp = av;
			}
		}
	}
	ret = s->err;
out:
	free(prod);
	free(sent);
	nzi_slots_free(&sl);
	return ret;
}

/* ---- broadcast ---- */

/*
 * Binomial tree rooted at root: virtual rank v = r - root receives from
 * v - lowbit(v) and sends to v + m for every power of two m < lowbit(v)
 * (the root: m < n), largest subtree first.  ceil(log2 n) steps.
 */
static int nzi_bcast_tree(struct nzi_sched *s, const struct nzi_args *a)
{
	int n = s->size, v = nzi_mod(s->rank - a->root, n), top = 1, from = -1;
	size_t bytes = a->count * nz_dtype_size(a->dtype);
	uint8_t *msg = nzi_scratch(s, H + bytes);
	int low = v ? (v & -v) : n;

	if (!msg)
		return -ENOMEM;
	if (v == 0) {
		if (a->sendbuf != a->recvbuf)
			nzi_copy(s, a->recvbuf, a->sendbuf, bytes);
		from = nzi_stage(s, msg, a->sendbuf, bytes);
	} else {
		int cp;

		from = nzi_recv(s, nzi_mod(v - low + a->root, n), NZI_TAG(0, 0), msg,
				H + bytes, NZI_F_HDR);
		cp = nzi_copy(s, a->recvbuf, msg + H, bytes);
		nzi_dep(s, cp, from);
	}
	while (top * 2 < low && top * 2 < n)
		top *= 2;
	for (int m = top; m >= 1; m /= 2) {
		int sd;

		if (m >= low || v + m >= n)
			continue;
		sd = nzi_send(s, nzi_mod(v + m + a->root, n), NZI_TAG(0, 0), msg, H + bytes, NZI_F_HDR);
		nzi_dep(s, sd, from);
	}
	return s->err;
}

/*
 * Pipelined chain root -> root+1 -> ... -> root-1: each rank receives a
 * segment straight into recvbuf and forwards it while the next arrives.
 * Time ~ (n - 2 + segments) segment transfers: link speed for large data.
 */
static int nzi_bcast_chain(struct nzi_sched *s, const struct nzi_args *a)
{
	int n = s->size, r = s->rank, v = nzi_mod(r - a->root, n);
	int prev = v > 0 ? nzi_mod(r - 1, n) : -1, next = v < n - 1 ? nzi_mod(r + 1, n) : -1;
	size_t es = nz_dtype_size(a->dtype), e = nzi_seg_elems(a, a->count);
	uint32_t nseg = nzi_nseg(a->count, e);
	const uint8_t *src = v == 0 ? a->sendbuf : a->recvbuf;
	uint8_t *dst = a->recvbuf;
	int hr = -1;

	if (next >= 0)
		nzi_hdr_send(s, next);
	if (prev >= 0)
		hr = nzi_hdr_recv(s, prev);
	if (v == 0 && a->sendbuf != a->recvbuf)
		nzi_copy(s, a->recvbuf, a->sendbuf, a->count * es);
	for (uint32_t k = 0; k < nseg; k++) {
		size_t off = (size_t)k * e * es, len = nzi_seg_len(a->count, e, k) * es;
		int rv = -1, sd;

		if (prev >= 0) {
			rv = nzi_recv(s, prev, NZI_TAG(0, k), dst + off, len, 0);
			nzi_dep(s, rv, hr);
		}
		if (next >= 0) {
			sd = nzi_send(s, next, NZI_TAG(0, k), src + off, len, 0);
			nzi_dep(s, sd, rv);
		}
	}
	return s->err;
}

/* ---- reduce ---- */

/* Binomial tree, the broadcast's mirror: children first, then the parent. */
static int nzi_reduce_tree(struct nzi_sched *s, const struct nzi_args *a)
{
	int n = s->size, v = nzi_mod(s->rank - a->root, n), last = -1;
	size_t bytes = a->count * nz_dtype_size(a->dtype);
	int low = v ? (v & -v) : n;
	uint8_t *acc, *msg = NULL;

	if (v == 0) {
		acc = a->recvbuf;
		if (a->sendbuf != a->recvbuf)
			last = nzi_copy(s, acc, a->sendbuf, bytes);
	} else {
		msg = nzi_scratch(s, H + bytes);
		if (!msg)
			return -ENOMEM;
		acc = msg + H;
		last = nzi_stage(s, msg, a->sendbuf, bytes);
	}
	for (int m = 1; m < low && v + m < n; m *= 2) {
		uint8_t *in = nzi_scratch(s, H + bytes);
		int rv, rd;

		if (!in)
			return -ENOMEM;
		rv = nzi_recv(s, nzi_mod(v + m + a->root, n), NZI_TAG(0, 0), in, H + bytes, NZI_F_HDR);
		rd = nzi_reduce(s, acc, acc, in + H, a->count);
		nzi_dep(s, rd, rv);
		nzi_dep(s, rd, last);
		last = rd;
	}
	if (v == 0) {
		if (a->op == NZ_AVG)
			nzi_dep(s, nzi_avg(s, acc, a->count), last);
	} else {
		int sd = nzi_send(s, nzi_mod(v - low + a->root, n), NZI_TAG(0, 0), msg,
				  H + bytes, NZI_F_HDR);

		nzi_dep(s, sd, last);
	}
	return s->err;
}

/*
 * Pipelined chain root-1 -> ... -> root+1 -> root: each rank adds its
 * contribution to a segment and passes it on.
 */
static int nzi_reduce_chain(struct nzi_sched *s, const struct nzi_args *a)
{
	int n = s->size, r = s->rank, v = nzi_mod(r - a->root, n);
	int up = v < n - 1 ? nzi_mod(r + 1, n) : -1, down = v > 0 ? nzi_mod(r - 1, n) : -1;
	size_t es = nz_dtype_size(a->dtype), e = nzi_seg_elems(a, a->count);
	uint32_t nseg = nzi_nseg(a->count, e);
	const uint8_t *mine = a->sendbuf;
	uint8_t *out = a->recvbuf;
	bool slots = up >= 0 && (v > 0 || a->sendbuf == a->recvbuf);
	struct nzi_slots sl = { 0 };
	int hr = -1, ret = -ENOMEM;

	if (slots && nzi_slots_init(s, &sl, a->window < nseg ? a->window : nseg, e * es))
		goto out;
	if (down >= 0)
		nzi_hdr_send(s, down);
	if (up >= 0)
		hr = nzi_hdr_recv(s, up);
	for (uint32_t k = 0; k < nseg; k++) {
		size_t off = (size_t)k * e * es, cnt = nzi_seg_len(a->count, e, k);
		unsigned int j;
		int rv, rd, sd;

		if (up < 0) {		/* the chain's start */
			nzi_send(s, down, NZI_TAG(0, k), mine + off, cnt * es, 0);
			continue;
		}
		if (!slots) {		/* the root, out of place: straight in */
			rv = nzi_recv(s, up, NZI_TAG(0, k), out + off, cnt * es, 0);
			nzi_dep(s, rv, hr);
			rd = nzi_reduce(s, out + off, out + off, mine + off, cnt);
			nzi_dep(s, rd, rv);
			if (a->op == NZ_AVG)
				nzi_dep(s, nzi_avg(s, out + off, cnt), rd);
			continue;
		}
		j = nzi_slot_take(&sl);
		rv = nzi_recv(s, up, NZI_TAG(0, k), sl.buf[j], cnt * es, 0);
		nzi_dep(s, rv, hr);
		nzi_dep(s, rv, sl.user[j]);
		if (v == 0) {		/* the root, in place */
			rd = nzi_reduce(s, out + off, mine + off, sl.buf[j], cnt);
			nzi_dep(s, rd, rv);
			sl.user[j] = rd;
			if (a->op == NZ_AVG)
				nzi_dep(s, nzi_avg(s, out + off, cnt), rd);
			continue;
		}
		rd = nzi_reduce(s, sl.buf[j], sl.buf[j], mine + off, cnt);
		nzi_dep(s, rd, rv);
		sd = nzi_send(s, down, NZI_TAG(0, k), sl.buf[j], cnt * es, 0);
		nzi_dep(s, sd, rd);
		sl.user[j] = sd;	/* the slot is free once the send is acked */
	}
	ret = s->err;
out:
	nzi_slots_free(&sl);
	return ret;
}

/* ---- allgather ---- */

/*
 * Bruck: ceil(log2 n) steps for any n.  tmp[i] holds the block of rank
 * r + i; step d sends the first min(d, n - d) blocks to rank r - d and
 * receives as many from rank r + d into tmp[d...].  A final rotation
 * puts the blocks in rank order.
 */
static int nzi_allgather_bruck(struct nzi_sched *s, const struct nzi_args *a)
{
	int n = s->size, r = s->rank, last, k = 0, c1, c2;
	size_t b = a->count * nz_dtype_size(a->dtype);
	uint8_t *tmp = nzi_scratch(s, (size_t)n * b), *rb = a->recvbuf;

	if (!tmp)
		return -ENOMEM;
	last = nzi_copy(s, tmp, a->sendbuf, b);
	for (int d = 1; d < n; d <<= 1, k++) {
		size_t len = (size_t)(d < n - d ? d : n - d) * b;
		uint8_t *out = nzi_scratch(s, H + len), *in = nzi_scratch(s, H + len);
		int st, sd, rv, cp;

		if (!out || !in)
			return -ENOMEM;
		st = nzi_stage(s, out, tmp, len);
		nzi_dep(s, st, last);
		sd = nzi_send(s, nzi_mod(r - d, n), NZI_TAG(k, 0), out, H + len, NZI_F_HDR);
		nzi_dep(s, sd, st);
		rv = nzi_recv(s, nzi_mod(r + d, n), NZI_TAG(k, 0), in, H + len, NZI_F_HDR);
		cp = nzi_copy(s, tmp + (size_t)d * b, in + H, len);
		nzi_dep(s, cp, rv);
		nzi_dep(s, cp, last);
		last = cp;
	}
	c1 = nzi_copy(s, rb + (size_t)r * b, tmp, (size_t)(n - r) * b);
	c2 = nzi_copy(s, rb, tmp + (size_t)(n - r) * b, (size_t)r * b);
	nzi_dep(s, c1, last);
	nzi_dep(s, c2, last);
	return s->err;
}

/* Ring: n-1 steps, block r-t to the right, segments forwarded on arrival. */
static int nzi_allgather_ring(struct nzi_sched *s, const struct nzi_args *a)
{
	int n = s->size, r = s->rank, left = nzi_mod(r - 1, n), right = nzi_mod(r + 1, n), hr;
	size_t es = nz_dtype_size(a->dtype), b = a->count * es, e = nzi_seg_elems(a, a->count);
	uint32_t nseg = nzi_nseg(a->count, e);
	uint8_t *rbuf = a->recvbuf;
	int *got = malloc((size_t)n * nseg * sizeof(*got));

	if (!got)
		return -ENOMEM;
	nzi_hdr_send(s, right);
	hr = nzi_hdr_recv(s, left);
	if (a->sendbuf != rbuf + (size_t)r * b)
		nzi_copy(s, rbuf + (size_t)r * b, a->sendbuf, b);
	for (int t = 0; t < n - 1; t++) {
		int sb = nzi_mod(r - t, n), rb = nzi_mod(r - t - 1, n);

		for (uint32_t k = 0; k < nseg; k++) {
			size_t off = (size_t)k * e * es, len = nzi_seg_len(a->count, e, k) * es;
			const uint8_t *src = t == 0 ? (const uint8_t *)a->sendbuf + off :
					     rbuf + (size_t)sb * b + off;
			int sd = nzi_send(s, right, NZI_TAG(t, k), src, len, 0);
			int rv;

			if (t > 0)
				nzi_dep(s, sd, got[(size_t)sb * nseg + k]);
			rv = nzi_recv(s, left, NZI_TAG(t, k), rbuf + (size_t)rb * b + off, len, 0);
			nzi_dep(s, rv, hr);
			got[(size_t)rb * nseg + k] = rv;
		}
	}
	free(got);
	return s->err;
}

/* ---- reduce_scatter ---- */

/* Direct: block j goes to rank j in one message; one step. */
static int nzi_reduce_scatter_direct(struct nzi_sched *s, const struct nzi_args *a)
{
	int n = s->size, r = s->rank, last = -1;
	size_t b = a->count * nz_dtype_size(a->dtype);
	const uint8_t *sb = a->sendbuf;
	uint8_t *acc = a->recvbuf;

	if (acc != sb + (size_t)r * b)
		last = nzi_copy(s, acc, sb + (size_t)r * b, b);
	for (int i = 1; i < n; i++) {
		int to = nzi_mod(r + i, n), st, sd;
		uint8_t *out = nzi_scratch(s, H + b);

		if (!out)
			return -ENOMEM;
		st = nzi_stage(s, out, sb + (size_t)to * b, b);
		sd = nzi_send(s, to, NZI_TAG(0, 0), out, H + b, NZI_F_HDR);
		nzi_dep(s, sd, st);
	}
	for (int i = 1; i < n; i++) {
		uint8_t *in = nzi_scratch(s, H + b);
		int rv, rd;

		if (!in)
			return -ENOMEM;
		rv = nzi_recv(s, nzi_mod(r - i, n), NZI_TAG(0, 0), in, H + b, NZI_F_HDR);
		rd = nzi_reduce(s, acc, acc, in + H, a->count);
		nzi_dep(s, rd, rv);
		nzi_dep(s, rd, last);
		last = rd;
	}
	if (a->op == NZ_AVG)
		nzi_dep(s, nzi_avg(s, acc, a->count), last);
	return s->err;
}

/*
 * Ring: in step t this rank sends its partial of block r-t-1 and receives
 * the partial of block r-t-2, to which it adds its own; the last step
 * brings block r, reduced into recvbuf.  Partials live in slots.
 */
static int nzi_reduce_scatter_ring(struct nzi_sched *s, const struct nzi_args *a)
{
	int n = s->size, r = s->rank, left = nzi_mod(r - 1, n), right = nzi_mod(r + 1, n), hr;
	size_t es = nz_dtype_size(a->dtype), b = a->count * es, e = nzi_seg_elems(a, a->count);
	uint32_t nseg = nzi_nseg(a->count, e);
	const uint8_t *sb = a->sendbuf;
	uint8_t *out = a->recvbuf;
	bool inplace = out == sb + (size_t)r * b;
	int *pop = malloc((size_t)n * nseg * sizeof(*pop));
	unsigned int *pslot = malloc((size_t)n * nseg * sizeof(*pslot));
	struct nzi_slots sl = { 0 };
	int ret = -ENOMEM;

	if (!pop || !pslot || nzi_slots_init(s, &sl, a->window < nseg * (uint32_t)(n - 1) ?
					      a->window : nseg * (uint32_t)(n - 1), e * es))
		goto out;
	nzi_hdr_send(s, right);
	hr = nzi_hdr_recv(s, left);
	for (int t = 0; t < n - 1; t++) {
		int sbk = nzi_mod(r - t - 1, n), rbk = nzi_mod(r - t - 2, n);

		for (uint32_t k = 0; k < nseg; k++) {
			size_t off = (size_t)k * e * es, cnt = nzi_seg_len(a->count, e, k);
			size_t pi = (size_t)sbk * nseg + k, ri = (size_t)rbk * nseg + k;
			int sd, rv, rd;

			if (t == 0) {
				nzi_send(s, right, NZI_TAG(t, k), sb + (size_t)sbk * b + off, cnt * es, 0);
			} else {
				sd = nzi_send(s, right, NZI_TAG(t, k), sl.buf[pslot[pi]], cnt * es, 0);
				nzi_dep(s, sd, pop[pi]);
				sl.user[pslot[pi]] = sd;
			}
			if (t == n - 2 && !inplace) {	/* block r, straight into recvbuf */
				rv = nzi_recv(s, left, NZI_TAG(t, k), out + off, cnt * es, 0);
				nzi_dep(s, rv, hr);
				rd = nzi_reduce(s, out + off, out + off, sb + (size_t)rbk * b + off, cnt);
				nzi_dep(s, rd, rv);
			} else {
				unsigned int j = nzi_slot_take(&sl);

				rv = nzi_recv(s, left, NZI_TAG(t, k), sl.buf[j], cnt * es, 0);
				nzi_dep(s, rv, hr);
				nzi_dep(s, rv, sl.user[j]);
				if (t == n - 2)
					rd = nzi_reduce(s, out + off, out + off, sl.buf[j], cnt);
				else
					rd = nzi_reduce(s, sl.buf[j], sl.buf[j],
							sb + (size_t)rbk * b + off, cnt);
				nzi_dep(s, rd, rv);
				sl.user[j] = rd;
				pop[ri] = rd;
				pslot[ri] = j;
			}
			if (t == n - 2 && a->op == NZ_AVG)
				nzi_dep(s, nzi_avg(s, out + off, cnt), rd);
		}
	}
	ret = s->err;
out:
	free(pop);
	free(pslot);
	nzi_slots_free(&sl);
	return ret;
}

/* ---- alltoall, barrier ---- */

/* Pairwise: block to rank r+i, block from rank r-i, all at once. */
static int nzi_alltoall_pairwise(struct nzi_sched *s, const struct nzi_args *a)
{
	int n = s->size, r = s->rank, cp = -1;
	size_t b = a->count * nz_dtype_size(a->dtype);
	const uint8_t *src = a->sendbuf;
	uint8_t *dst = a->recvbuf;
	int *hr = malloc((size_t)n * sizeof(*hr));

	if (!hr)
		return -ENOMEM;
	if (a->sendbuf == a->recvbuf) {		/* in place: send from a copy */
		uint8_t *tmp = nzi_scratch(s, (size_t)n * b);

		if (!tmp) {
			free(hr);
			return -ENOMEM;
		}
		cp = nzi_copy(s, tmp, src, (size_t)n * b);
		src = tmp;
	} else {
		nzi_copy(s, dst + (size_t)r * b, src + (size_t)r * b, b);
	}
	for (int i = 1; i < n; i++)
		nzi_hdr_send(s, nzi_mod(r + i, n));
	for (int i = 1; i < n; i++)
		hr[nzi_mod(r - i, n)] = nzi_hdr_recv(s, nzi_mod(r - i, n));
	for (int i = 1; i < n; i++) {
		int to = nzi_mod(r + i, n), from = nzi_mod(r - i, n);
		int sd = nzi_send(s, to, NZI_TAG(0, 0), src + (size_t)to * b, b, 0);
		int rv = nzi_recv(s, from, NZI_TAG(0, 0), dst + (size_t)from * b, b, 0);

		nzi_dep(s, sd, cp);
		nzi_dep(s, rv, cp);
		nzi_dep(s, rv, hr[from]);
	}
	free(hr);
	return s->err;
}

/*
 * Dissemination: in round k, a token to r + 2^k, one from r - 2^k.  The
 * token of round k leaves once the tokens of every earlier round have
 * arrived (a join of all of them, not only the last: they may arrive in
 * any order), so after the last round every rank has heard, transitively,
 * from all.  It does not wait for its own earlier tokens' acks.
 */
static int nzi_barrier_dissemination(struct nzi_sched *s)
{
	int n = s->size, r = s->rank, join = -1, k = 0;

	for (int d = 1; d < n; d <<= 1, k++) {
		uint8_t *in = nzi_scratch(s, H);
		int sd, rv, j;

		if (!in)
			return -ENOMEM;
		sd = nzi_send(s, nzi_mod(r + d, n), NZI_TAG(k, 0), s->hdrwire, H, NZI_F_HDR);
		nzi_dep(s, sd, join);
		rv = nzi_recv(s, nzi_mod(r - d, n), NZI_TAG(k, 0), in, H, NZI_F_HDR);
		j = nzi_nop(s);
		nzi_dep(s, j, rv);
		nzi_dep(s, j, join);
		join = j;
	}
	return s->err;
}

/* ---- Dispatch ---- */

/* One rank: copy what an out-of-place call must, nothing else. */
static int nzi_build_single(struct nzi_sched *s, const struct nzi_args *a)
{
	size_t bytes = a->count * nz_dtype_size(a->dtype);

	switch (a->coll) {
	case NZ_COLL_ALLREDUCE:
	case NZ_COLL_BROADCAST:
	case NZ_COLL_REDUCE:
	case NZ_COLL_ALLGATHER:
	case NZ_COLL_REDUCE_SCATTER:
	case NZ_COLL_ALLTOALL:
		if (a->recvbuf && a->sendbuf != a->recvbuf)
			nzi_copy(s, a->recvbuf, a->sendbuf, bytes);
		break;
	default:
		break;
	}
	return s->err;
}

int nzi_build(struct nzi_sched *s, const struct nzi_args *a)
{
	if (s->size == 1)
		return nzi_build_single(s, a);
	switch (a->algo) {
	case NZ_ALGO_RD:
		return nzi_allreduce_rd(s, a);
	case NZ_ALGO_HD:
		return nzi_allreduce_hd(s, a);
	case NZ_ALGO_RING:
		if (a->coll == NZ_COLL_ALLGATHER)
			return nzi_allgather_ring(s, a);
		if (a->coll == NZ_COLL_REDUCE_SCATTER)
			return nzi_reduce_scatter_ring(s, a);
		return nzi_allreduce_ring(s, a);
	case NZ_ALGO_TREE:
		return a->coll == NZ_COLL_BROADCAST ? nzi_bcast_tree(s, a) : nzi_reduce_tree(s, a);
	case NZ_ALGO_CHAIN:
		return a->coll == NZ_COLL_BROADCAST ? nzi_bcast_chain(s, a) : nzi_reduce_chain(s, a);
	case NZ_ALGO_BRUCK:
		return nzi_allgather_bruck(s, a);
	case NZ_ALGO_DIRECT:
		return nzi_reduce_scatter_direct(s, a);
	case NZ_ALGO_PAIRWISE:
		return nzi_alltoall_pairwise(s, a);
	case NZ_ALGO_DISSEMINATION:
		return nzi_barrier_dissemination(s);
	default:
		return -EINVAL;
	}
}
