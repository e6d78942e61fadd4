// SPDX-License-Identifier: GPL-2.0
/*
 * Nezha receive-side bookkeeping: which units of a message arrived, and
 * which messages of a peer are complete.  See reasm.h for the contract and
 * Documentation/wire.rst for the rules it enforces.
 *
 * Bitmaps are arrays of u64 handled with plain shifts and masks, so that
 * the code is the same in the kernel and on the host; unit sizes are powers
 * of two, so no 64-bit division is needed either.
 */
#include "reasm.h"
#include "wire.h"

/* Bits [lo, hi) of one word, 0 <= lo < hi <= 64. */
static u64 nz_word_mask(unsigned int lo, unsigned int hi)
{
	u64 m = ~0ULL << lo;

	return hi == 64 ? m : m & ((1ULL << hi) - 1);
}

/*
 * Walk bits [first, first + n) word by word: count the set bits, and set
 * them all when @set is true.  Returns the count before setting.
 */
static u64 nz_bits_range(u64 *map, u64 first, u64 n, bool set)
{
	u64 end = first + n, count = 0;

	while (first < end) {
		unsigned int lo = first & 63;
		unsigned int hi = min_t(u64, 64, lo + (end - first));
		u64 m = nz_word_mask(lo, hi);
		u64 *w = &map[first >> 6];

		count += hweight64(*w & m);
		if (set)
			*w |= m;
		first += hi - lo;
	}
	return count;
}

u64 nz_reasm_bitmap_words(u64 total, u32 unit)
{
	u64 units;

	if (!nz_wire_unit_ok(unit))
		return 0;
	units = nz_wire_unit_count(total, unit);
	return (units >> 6) + !!(units & 63);
}

int nz_reasm_init(struct nz_reasm *r, u64 total, u32 unit, u64 *map)
{
	u64 words = nz_reasm_bitmap_words(total, unit);

	if (!nz_wire_unit_ok(unit) || (words && !map))
		return -EINVAL;
	memset(r, 0, sizeof(*r));
	r->total = total;
	r->nunits = nz_wire_unit_count(total, unit);
	r->map = map;
	r->unit = unit;
	r->unit_shift = ilog2(unit);
	if (words)
		memset(map, 0, words * sizeof(*map));
	return 0;
}

static int nz_reasm_add_empty(struct nz_reasm *r, u64 offset, u64 len)
{
	if (offset || len)
		return -EPROTO;
	if (r->zero_seen)
		return NZ_REASM_DUP;
	r->zero_seen = true;
	return NZ_REASM_NEW;
}

int nz_reasm_add(struct nz_reasm *r, u64 offset, u64 len)
{
	u64 mask = (u64)r->unit - 1;
	u64 first, n, seen;

	if (!r->total)
		return nz_reasm_add_empty(r, offset, len);
	/* The chunking rule; offset + len cannot wrap after the 2nd test. */
	if (!len || offset >= r->total || len > r->total - offset)
		return -EPROTO;
	if ((offset & mask) || ((len & mask) && offset + len != r->total))
		return -EPROTO;

	first = offset >> r->unit_shift;
	n = (len >> r->unit_shift) + !!(len & mask);
	seen = nz_bits_range(r->map, first, n, false);
	if (seen == n)
		return NZ_REASM_DUP;
	if (seen)
		return -EPROTO;
	nz_bits_range(r->map, first, n, true);
	r->received += len;
	return NZ_REASM_NEW;
}

bool nz_reasm_done(const struct nz_reasm *r)
{
	return r->total ? r->received == r->total : r->zero_seen;
}

/* Ring position of @id; meaningful only inside the window. */
static unsigned int nz_seqwin_pos(u64 id)
{
	return id & (NZ_SEQWIN_SIZE - 1);
}

static bool nz_seqwin_test(const struct nz_seqwin *w, u64 id)
{
	unsigned int pos = nz_seqwin_pos(id);

	return w->map[pos >> 6] & BIT_ULL(pos & 63);
}

void nz_seqwin_init(struct nz_seqwin *w)
{
	memset(w, 0, sizeof(*w));
	w->base = 1;
}

bool nz_seqwin_is_done(const struct nz_seqwin *w, u64 id)
{
	if (id < w->base)
		return true;
	if (id - w->base >= NZ_SEQWIN_SIZE)
		return false;
	return nz_seqwin_test(w, id);
}

bool nz_seqwin_in_window(const struct nz_seqwin *w, u64 id)
{
	return id >= w->base && id - w->base < NZ_SEQWIN_SIZE &&
	       !nz_seqwin_test(w, id);
}

int nz_seqwin_mark_done(struct nz_seqwin *w, u64 id)
{
	unsigned int pos;

	if (id < w->base)
		return -EALREADY;
	if (id - w->base >= NZ_SEQWIN_SIZE)
		return -ERANGE;
	if (nz_seqwin_test(w, id))
		return -EALREADY;

	pos = nz_seqwin_pos(id);
	w->map[pos >> 6] |= BIT_ULL(pos & 63);
	/* Clear each bit as base passes it: its slot is reused for base + N. */
	while (nz_seqwin_test(w, w->base)) {
		pos = nz_seqwin_pos(w->base);
		w->map[pos >> 6] &= ~BIT_ULL(pos & 63);
		w->base++;
	}
	return 0;
}
