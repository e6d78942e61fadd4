// SPDX-License-Identifier: GPL-2.0
/*
 * nezha-aggd: the slots.  A job of window W owns W slots; its block seq
 * (each block one packet of every rank) goes to slot seq % W, half
 * (seq / W) % 2.  The state of a half, for block seq:
 *
 *   unused --first contribution--> filling --last of N--> done
 *     done --first contribution of seq + 2W--> filling (a new block)
 *
 * A rank sends block seq + W only once it has the result of block seq,
 * so the first contribution of seq + 2W proves every rank holds the
 * result of seq: the half may start over.  Until then the result of seq
 * stays, and a contribution to seq that arrives again (the rank timed
 * out: its contribution or its RESULT was lost) is answered with that
 * result, never added twice.  Sequence numbers are 64 bits and never
 * wrap, so a packet of a block long past is told from a new one.
 */
#include <string.h>

#include "aggd_int.h"
#include "reduce.h"

void aggd_slots_reset(struct aggd *n, const struct aggd_job *j)
{
	for (unsigned int s = 0; s < j->nslots; s++)
		for (int v = 0; v < 2; v++) {
			struct aggd_half *h = &n->slots[j->base + s].half[v];

			h->seq = AGGD_SEQ_NONE;
			h->done = false;
		}
}

static enum nz_redop redop(uint8_t op)
{
	return op == NZA_OP_MIN ? NZ_MIN : op == NZA_OP_MAX ? NZ_MAX : NZ_SUM;
}

/* The payload, widened: f16/bf16 to f32 (exactly), the others as they are. */
static void widen(union aggd_acc *dst, const struct nza_data *d)
{
	uint16_t h[NZA_MAX_ELEMS];

	switch (d->dtype) {
	case NZA_F32:
		nza_from_wire(dst->f, d->payload, d->count, 4);
		break;
	case NZA_I32:
		nza_from_wire(dst->i, d->payload, d->count, 4);
		break;
	case NZA_F16:
		nza_from_wire(h, d->payload, d->count, 2);
		for (unsigned int i = 0; i < d->count; i++)
			dst->f[i] = nz_f16_to_f32(h[i]);
		break;
	case NZA_BF16:
		nza_from_wire(h, d->payload, d->count, 2);
		for (unsigned int i = 0; i < d->count; i++)
			dst->f[i] = nz_bf16_to_f32(h[i]);
		break;
	}
}

/* The half's result in its dtype, rounded once for f16/bf16. */
static void narrow(uint8_t *dst, const struct aggd_half *h)
{
	uint16_t v[NZA_MAX_ELEMS];

	switch (h->dtype) {
	case NZA_F32:
		nza_to_wire(dst, h->acc.f, h->count, 4);
		return;
	case NZA_I32:
		nza_to_wire(dst, h->acc.i, h->count, 4);
		return;
	case NZA_F16:
		for (unsigned int i = 0; i < h->count; i++)
			v[i] = nz_f32_to_f16(h->acc.f[i]);
		break;
	case NZA_BF16:
		for (unsigned int i = 0; i < h->count; i++)
			v[i] = nz_f32_to_bf16(h->acc.f[i]);
		break;
	}
	nza_to_wire(dst, v, h->count, 2);
}

/* Encode and seal the RESULT of half h in n->out; its length. */
static size_t result_encode(struct aggd *n, const struct aggd_job *j, const struct aggd_half *h)
{
	struct nza_data d = {
		.type = NZA_RESULT, .handle = j->gen << 8 | (uint32_t)(j - n->jobs),
		.rank = NZA_RANK_ALL, .count = h->count, .dtype = h->dtype, .op = h->op,
		.seq = h->seq, .payload = n->out + NZA_DATA_HDR_LEN,
	};
	size_t len;

	narrow(n->out + NZA_DATA_HDR_LEN, h);
	len = nza_encode_data(n->out, &d);
	nza_data_seal(&j->data, n->out, len);
	return len;
}

static void result_send(struct aggd *n, const struct aggd_job *j, unsigned int rank, size_t len)
{
	if (n->cfg.drop_tx_every && ++n->tx_result_n % n->cfg.drop_tx_every == 0) {
		n->st.drop_injected++;
		return;
	}
	aggd_send(n, &j->ranks[rank].addr, n->out, len);
}

static void contribute(struct aggd *n, const struct aggd_job *j, struct aggd_half *h,
		       const struct nza_data *d)
{
	union aggd_acc in;
	enum nz_dtype acc = d->dtype == NZA_I32 ? NZ_INT32 : NZ_FLOAT32;
	size_t len;

	widen(&in, d);
	if (!h->nseen)
		memcpy(&h->acc, &in, (size_t)d->count * 4);
	else
		nz_reduce2(&h->acc, &in, d->count, acc, redop(d->op));
	h->seen[d->rank / 64] |= 1ull << (d->rank % 64);
	h->nseen++;
	n->st.contributions++;
	if (h->nseen < j->nranks)
		return;
	h->done = true;
	n->st.results++;
	len = result_encode(n, j, h);
	for (unsigned int r = 0; r < j->nranks; r++)
		result_send(n, j, r, len);
}

static void half_start(struct aggd_half *h, const struct nza_data *d)
{
	h->seq = d->seq;
	memset(h->seen, 0, sizeof(h->seen));
	h->nseen = 0;
	h->count = d->count;
	h->dtype = d->dtype;
	h->op = d->op;
	h->done = false;
}

void aggd_slot_input(struct aggd *n, struct aggd_job *j, const struct nza_data *d)
{
	uint64_t w = j->nslots, seq = d->seq;
	struct aggd_slot *slot = &n->slots[j->base + seq % w];
	struct aggd_half *h = &slot->half[(seq / w) & 1], *o = &slot->half[!((seq / w) & 1)];
	bool mine = h->seen[d->rank / 64] >> (d->rank % 64) & 1;

	if (h->seq == seq) {
		if (h->count != d->count || h->dtype != d->dtype || h->op != d->op) {
			n->st.drop_mismatch++;
		} else if (!mine) {
			contribute(n, j, h, d);
		} else if (h->done) {
			/* The rank's RESULT was lost: the same bytes again. */
			n->st.results_resent++;
			result_send(n, j, d->rank, result_encode(n, j, h));
		} else {
			n->st.drop_dup++;
		}
		return;
	}
	if (h->seq != AGGD_SEQ_NONE && seq < h->seq) {
		n->st.drop_stale++;
		return;
	}
	/* A new block for this half: its turn, and the slot's last block done. */
	if (h->seq == AGGD_SEQ_NONE ? seq >= 2 * w : seq != h->seq + 2 * w) {
		n->st.drop_early++;
		return;
	}
	if (seq >= w && (o->seq != seq - w || !o->done)) {
		n->st.drop_early++;
		return;
	}
	half_start(h, d);
	contribute(n, j, h, d);
}
