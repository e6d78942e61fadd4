// SPDX-License-Identifier: GPL-2.0
/*
 * Host unit tests for kmod/reasm.c: unit bitmaps of in-progress messages
 * (new, duplicate, overlap, out of order, completion) and the per-peer
 * window of completed msg_ids.  Prints TAP; exits 0 iff all tests pass.
 *
 * Build from the top directory with this file and kmod/reasm.c:
 *   cc -std=gnu11 -Wall -Wextra -Werror -Ikmod <this file> kmod/reasm.c
 */
#include <stdio.h>
#include <stdlib.h>

#include "reasm.h"
#include "wire.h"

#define CHECK(cond) do {						\
	if (!(cond)) {							\
		printf("#   %s:%d: CHECK(%s) failed\n",			\
		       __FILE__, __LINE__, #cond);			\
		return false;						\
	}								\
} while (0)

#define CHECK_EQ(got, want) do {					\
	unsigned long long __g = (unsigned long long)(got);		\
	unsigned long long __w = (unsigned long long)(want);		\
	if (__g != __w) {						\
		printf("#   %s:%d: %s = %lld (%#llx), want %s = %lld (%#llx)\n",\
		       __FILE__, __LINE__, #got, (long long)__g, __g,	\
		       #want, (long long)__w, __w);			\
		return false;						\
	}								\
} while (0)

#define KIB	1024ULL
#define MIB	(1024ULL * KIB)
#define U	4096ULL			/* the unit of most tests */

static u64 map[4096];			/* room for 262144 units */

/*
 * Start a message; poison the map first to prove that init clears its
 * words and no more.
 */
static bool start(struct nz_reasm *r, u64 total, u32 unit)
{
	u64 words = nz_reasm_bitmap_words(total, unit), i;

	if (words > ARRAY_SIZE(map))
		return false;
	memset(map, 0xff, sizeof(map));
	if (nz_reasm_init(r, total, unit, map))
		return false;
	for (i = 0; i < words; i++)
		if (map[i])
			return false;
	return words == ARRAY_SIZE(map) || map[words] == U64_MAX;
}

/* ---- bitmap sizing and init ------------------------------------------- */

static bool t_bitmap_words(void)
{
	CHECK_EQ(nz_reasm_bitmap_words(0, U), 0);
	CHECK_EQ(nz_reasm_bitmap_words(1, U), 1);
	CHECK_EQ(nz_reasm_bitmap_words(64 * U, U), 1);
	CHECK_EQ(nz_reasm_bitmap_words(64 * U + 1, U), 2);
	CHECK_EQ(nz_reasm_bitmap_words(128 * U, U), 2);
	CHECK_EQ(nz_reasm_bitmap_words(1ULL << 40, 4 * MIB), 4096);
	CHECK_EQ(nz_reasm_bitmap_words(U64_MAX, U), 1ULL << 46);
	CHECK_EQ(nz_reasm_bitmap_words(U64_MAX, 4 * MIB), 1ULL << 36);
	CHECK_EQ(nz_reasm_bitmap_words(8192, 0), 0);
	CHECK_EQ(nz_reasm_bitmap_words(8192, 5000), 0);
	return true;
}

static bool t_init_rejects_bad_unit(void)
{
	struct nz_reasm r;

	CHECK_EQ(nz_reasm_init(&r, 8192, 0, map), -EINVAL);
	CHECK_EQ(nz_reasm_init(&r, 8192, 2048, map), -EINVAL);
	CHECK_EQ(nz_reasm_init(&r, 8192, 6144, map), -EINVAL);
	CHECK_EQ(nz_reasm_init(&r, 8192, 8 * MIB, map), -EINVAL);
	CHECK_EQ(nz_reasm_init(&r, 8192, U, map), 0);
	return true;
}

static bool t_init_needs_map(void)
{
	struct nz_reasm r;

	CHECK_EQ(nz_reasm_init(&r, 1, U, NULL), -EINVAL);
	CHECK_EQ(nz_reasm_init(&r, 0, U, NULL), 0);	/* no units */
	CHECK(!nz_reasm_done(&r));
	return true;
}

static bool t_init_clears_only_its_words(void)
{
	struct nz_reasm r;

	memset(map, 0xff, sizeof(map));
	CHECK_EQ(nz_reasm_init(&r, 65 * U, U, map), 0);
	CHECK_EQ(map[0], 0);
	CHECK_EQ(map[1], 0);
	CHECK_EQ(map[2], U64_MAX);
	CHECK_EQ(r.nunits, 65);
	CHECK_EQ(r.received, 0);
	CHECK(!nz_reasm_done(&r));
	return true;
}

/* ---- message shapes --------------------------------------------------- */

static bool t_zero_length_message(void)
{
	struct nz_reasm r;

	CHECK(start(&r, 0, U));
	CHECK(!nz_reasm_done(&r));
	CHECK_EQ(nz_reasm_add(&r, 0, 1), -EPROTO);
	CHECK_EQ(nz_reasm_add(&r, U, 0), -EPROTO);
	CHECK_EQ(nz_reasm_add(&r, 1, 0), -EPROTO);
	CHECK(!nz_reasm_done(&r));
	CHECK_EQ(nz_reasm_add(&r, 0, 0), NZ_REASM_NEW);
	CHECK(nz_reasm_done(&r));
	CHECK_EQ(r.received, 0);
	CHECK_EQ(nz_reasm_add(&r, 0, 0), NZ_REASM_DUP);
	CHECK(nz_reasm_done(&r));
	return true;
}

static bool t_one_byte_message(void)
{
	struct nz_reasm r;

	CHECK(start(&r, 1, U));
	CHECK_EQ(nz_reasm_add(&r, 0, 0), -EPROTO);
	CHECK_EQ(nz_reasm_add(&r, 0, 2), -EPROTO);
	CHECK_EQ(nz_reasm_add(&r, 1, 0), -EPROTO);
	CHECK(!nz_reasm_done(&r));
	CHECK_EQ(nz_reasm_add(&r, 0, 1), NZ_REASM_NEW);
	CHECK_EQ(r.received, 1);
	CHECK(nz_reasm_done(&r));
	CHECK_EQ(nz_reasm_add(&r, 0, 1), NZ_REASM_DUP);
	CHECK_EQ(r.received, 1);
	return true;
}

static bool t_exactly_one_unit(void)
{
	struct nz_reasm r;

	CHECK(start(&r, U, U));
	CHECK_EQ(nz_reasm_add(&r, 0, U - 1), -EPROTO);	/* short, not last */
	CHECK_EQ(nz_reasm_add(&r, 0, U + 1), -EPROTO);
	CHECK_EQ(nz_reasm_add(&r, U, U), -EPROTO);
	CHECK(!nz_reasm_done(&r));
	CHECK_EQ(nz_reasm_add(&r, 0, U), NZ_REASM_NEW);
	CHECK(nz_reasm_done(&r));
	CHECK_EQ(r.received, U);
	return true;
}

static bool t_unit_plus_one_in_order(void)
{
	struct nz_reasm r;

	CHECK(start(&r, U + 1, U));
	CHECK_EQ(nz_reasm_add(&r, 0, U), NZ_REASM_NEW);
	CHECK(!nz_reasm_done(&r));
	CHECK_EQ(r.received, U);
	CHECK_EQ(nz_reasm_add(&r, U, 1), NZ_REASM_NEW);
	CHECK(nz_reasm_done(&r));
	CHECK_EQ(r.received, U + 1);
	return true;
}

static bool t_unit_plus_one_reversed(void)
{
	struct nz_reasm r;

	CHECK(start(&r, U + 1, U));
	CHECK_EQ(nz_reasm_add(&r, U, 1), NZ_REASM_NEW);
	CHECK(!nz_reasm_done(&r));
	CHECK_EQ(r.received, 1);
	CHECK_EQ(nz_reasm_add(&r, 0, U), NZ_REASM_NEW);
	CHECK(nz_reasm_done(&r));
	return true;
}

static bool t_unit_plus_one_single_frame(void)
{
	struct nz_reasm r;

	CHECK(start(&r, U + 1, U));
	CHECK_EQ(nz_reasm_add(&r, 0, U + 1), NZ_REASM_NEW);
	CHECK(nz_reasm_done(&r));
	/* Each half of it is now a duplicate. */
	CHECK_EQ(nz_reasm_add(&r, 0, U), NZ_REASM_DUP);
	CHECK_EQ(nz_reasm_add(&r, U, 1), NZ_REASM_DUP);
	CHECK_EQ(r.received, U + 1);
	return true;
}

/* ---- order, duplicates, overlaps --------------------------------------- */

static bool t_out_of_order(void)
{
	static const unsigned int order[] = { 7, 2, 9, 0, 5, 1, 8, 3, 6, 4 };
	const u64 total = 10 * 2 * U - 100;	/* 10 frames of 2 units */
	struct nz_reasm r;
	unsigned int i;

	CHECK(start(&r, total, U));
	for (i = 0; i < ARRAY_SIZE(order); i++) {
		u64 off = order[i] * 2 * U;
		u64 len = order[i] == 9 ? total - off : 2 * U;

		CHECK(!nz_reasm_done(&r));
		CHECK_EQ(nz_reasm_add(&r, off, len), NZ_REASM_NEW);
	}
	CHECK(nz_reasm_done(&r));
	CHECK_EQ(r.received, total);
	return true;
}

static bool t_duplicate_frame(void)
{
	struct nz_reasm r;

	CHECK(start(&r, 4 * U, U));
	CHECK_EQ(nz_reasm_add(&r, U, 2 * U), NZ_REASM_NEW);
	CHECK_EQ(nz_reasm_add(&r, U, 2 * U), NZ_REASM_DUP);
	CHECK_EQ(r.received, 2 * U);
	CHECK(!nz_reasm_done(&r));
	/* Any whole-unit part of a seen frame is a duplicate too. */
	CHECK_EQ(nz_reasm_add(&r, 2 * U, U), NZ_REASM_DUP);
	CHECK_EQ(r.received, 2 * U);
	return true;
}

static bool t_duplicate_after_done(void)
{
	struct nz_reasm r;

	CHECK(start(&r, 3 * U, U));
	CHECK_EQ(nz_reasm_add(&r, 0, 3 * U), NZ_REASM_NEW);
	CHECK(nz_reasm_done(&r));
	CHECK_EQ(nz_reasm_add(&r, 0, 3 * U), NZ_REASM_DUP);
	CHECK_EQ(nz_reasm_add(&r, U, U), NZ_REASM_DUP);
	CHECK(nz_reasm_done(&r));
	CHECK_EQ(r.received, 3 * U);
	return true;
}

static bool t_partial_overlap_rejected(void)
{
	struct nz_reasm r;

	CHECK(start(&r, 8 * U, U));
	CHECK_EQ(nz_reasm_add(&r, 2 * U, 2 * U), NZ_REASM_NEW);
	CHECK_EQ(nz_reasm_add(&r, 3 * U, 2 * U), -EPROTO);	/* tail */
	CHECK_EQ(nz_reasm_add(&r, U, 2 * U), -EPROTO);		/* head */
	CHECK_EQ(r.received, 2 * U);
	/* The rejected frames changed nothing: their new units are new. */
	CHECK_EQ(nz_reasm_add(&r, 4 * U, U), NZ_REASM_NEW);
	CHECK_EQ(nz_reasm_add(&r, U, U), NZ_REASM_NEW);
	CHECK_EQ(r.received, 4 * U);
	return true;
}

static bool t_superset_rejected(void)
{
	struct nz_reasm r;

	CHECK(start(&r, 8 * U, U));
	CHECK_EQ(nz_reasm_add(&r, 3 * U, U), NZ_REASM_NEW);
	CHECK_EQ(nz_reasm_add(&r, 0, 8 * U), -EPROTO);
	CHECK_EQ(nz_reasm_add(&r, 2 * U, 3 * U), -EPROTO);
	CHECK_EQ(r.received, U);
	CHECK(!nz_reasm_done(&r));
	return true;
}

static bool t_gap_between_old_units(void)
{
	struct nz_reasm r;

	/* Units 0 and 2 seen, 1 not: [0, 3U) is partly new. */
	CHECK(start(&r, 4 * U, U));
	CHECK_EQ(nz_reasm_add(&r, 0, U), NZ_REASM_NEW);
	CHECK_EQ(nz_reasm_add(&r, 2 * U, U), NZ_REASM_NEW);
	CHECK_EQ(nz_reasm_add(&r, 0, 3 * U), -EPROTO);
	CHECK_EQ(nz_reasm_add(&r, U, U), NZ_REASM_NEW);
	CHECK_EQ(nz_reasm_add(&r, 0, 3 * U), NZ_REASM_DUP);
	return true;
}

/* ---- chunking rule and ranges ----------------------------------------- */

static bool t_misaligned_rejected(void)
{
	struct nz_reasm r;

	CHECK(start(&r, 8 * U, U));
	CHECK_EQ(nz_reasm_add(&r, 1, U), -EPROTO);
	CHECK_EQ(nz_reasm_add(&r, U / 2, U), -EPROTO);
	CHECK_EQ(nz_reasm_add(&r, 2 * U - 1, 1), -EPROTO);
	CHECK_EQ(r.received, 0);
	return true;
}

static bool t_short_middle_frame_rejected(void)
{
	struct nz_reasm r;

	CHECK(start(&r, 8 * U + 5, U));
	CHECK_EQ(nz_reasm_add(&r, 0, U - 1), -EPROTO);
	CHECK_EQ(nz_reasm_add(&r, U, U + 1), -EPROTO);
	CHECK_EQ(nz_reasm_add(&r, 7 * U, U + 4), -EPROTO);
	CHECK_EQ(nz_reasm_add(&r, 7 * U, U + 5), NZ_REASM_NEW);
	CHECK_EQ(nz_reasm_add(&r, 8 * U, 5), NZ_REASM_DUP);
	return true;
}

static bool t_out_of_range_rejected(void)
{
	struct nz_reasm r;

	CHECK(start(&r, 4 * U, U));
	CHECK_EQ(nz_reasm_add(&r, 4 * U, U), -EPROTO);	/* at total */
	CHECK_EQ(nz_reasm_add(&r, 5 * U, U), -EPROTO);
	CHECK_EQ(nz_reasm_add(&r, 3 * U, 2 * U), -EPROTO);
	CHECK_EQ(nz_reasm_add(&r, 0, 4 * U + 1), -EPROTO);
	CHECK_EQ(nz_reasm_add(&r, 0, 0), -EPROTO);
	CHECK_EQ(nz_reasm_add(&r, 4 * U, 0), -EPROTO);
	CHECK_EQ(r.received, 0);
	return true;
}

static bool t_wraparound_rejected(void)
{
	struct nz_reasm r;

	CHECK(start(&r, 4 * U, U));
	/* offset + len wraps to U: must not pass as [0, U). */
	CHECK_EQ(nz_reasm_add(&r, 0ULL - U, 2 * U), -EPROTO);
	CHECK_EQ(nz_reasm_add(&r, U, U64_MAX), -EPROTO);
	CHECK_EQ(nz_reasm_add(&r, U64_MAX & ~(U - 1), U64_MAX), -EPROTO);
	CHECK_EQ(r.received, 0);
	CHECK_EQ(map[0], 0);
	return true;
}

static bool t_huge_total(void)
{
	const u64 total = (1ULL << 40) - 3;	/* 2^18 units of 4 MiB */
	const u64 last = (1ULL << 40) - 4 * MIB;
	struct nz_reasm r;

	CHECK(start(&r, total, 4 * MIB));
	CHECK_EQ(r.nunits, 1ULL << 18);
	CHECK_EQ(nz_reasm_add(&r, last, total - last), NZ_REASM_NEW);
	CHECK_EQ(nz_reasm_add(&r, 0, 16 * MIB), NZ_REASM_NEW);
	CHECK_EQ(r.received, total - last + 16 * MIB);
	CHECK_EQ(map[(1 << 12) - 1], 1ULL << 63);
	CHECK_EQ(map[0], 0xf);
	CHECK_EQ(nz_reasm_add(&r, last, total - last + 1), -EPROTO);
	CHECK(!nz_reasm_done(&r));
	return true;
}

static bool t_word_boundaries(void)
{
	struct nz_reasm r;
	u64 u;

	CHECK(start(&r, 200 * U, U));
	/* Units 60..69 straddle words 0 and 1. */
	CHECK_EQ(nz_reasm_add(&r, 60 * U, 10 * U), NZ_REASM_NEW);
	CHECK_EQ(map[0], 0xfULL << 60);
	CHECK_EQ(map[1], 0x3f);
	CHECK_EQ(nz_reasm_add(&r, 63 * U, 2 * U), NZ_REASM_DUP);
	CHECK_EQ(nz_reasm_add(&r, 56 * U, 8 * U), -EPROTO);
	CHECK_EQ(nz_reasm_add(&r, 69 * U, 2 * U), -EPROTO);
	/* Exactly word 2, then a frame over three words. */
	CHECK_EQ(nz_reasm_add(&r, 128 * U, 64 * U), NZ_REASM_NEW);
	CHECK_EQ(map[2], U64_MAX);
	CHECK_EQ(nz_reasm_add(&r, 0, 60 * U), NZ_REASM_NEW);
	CHECK_EQ(nz_reasm_add(&r, 70 * U, 58 * U), NZ_REASM_NEW);
	CHECK_EQ(map[0], U64_MAX);
	CHECK_EQ(map[1], U64_MAX);
	CHECK(!nz_reasm_done(&r));
	CHECK_EQ(nz_reasm_add(&r, 0, 200 * U), -EPROTO);
	for (u = 192; u < 200; u++)
		CHECK_EQ(nz_reasm_add(&r, u * U, U), NZ_REASM_NEW);
	CHECK(nz_reasm_done(&r));
	CHECK_EQ(nz_reasm_add(&r, 0, 200 * U), NZ_REASM_DUP);
	CHECK_EQ(map[3], 0xff);		/* nothing past nunits */
	return true;
}

static bool t_unit_sizes(void)
{
	u32 unit;

	for (unit = NZ_WIRE_UNIT_MIN; unit <= NZ_WIRE_UNIT_MAX; unit <<= 1) {
		const u64 total = 3ULL * unit + 1;
		struct nz_reasm r;

		CHECK(start(&r, total, unit));
		CHECK_EQ(r.nunits, 4);
		CHECK_EQ(nz_reasm_add(&r, unit, unit / 2), -EPROTO);
		CHECK_EQ(nz_reasm_add(&r, unit / 2, unit), -EPROTO);
		CHECK_EQ(nz_reasm_add(&r, 3ULL * unit, 1), NZ_REASM_NEW);
		CHECK_EQ(nz_reasm_add(&r, 0, 3ULL * unit), NZ_REASM_NEW);
		CHECK(nz_reasm_done(&r));
	}
	return true;
}

/* Random frame cuts, shuffled, each delivered twice: always complete. */
static bool t_random_cuts_with_dups(void)
{
	static u64 offs[512], lens[512];
	unsigned int seed = 12345, iter;

	for (iter = 0; iter < 200; iter++) {
		u64 total = rand_r(&seed) % (300 * U), off = 0, got = 0;
		unsigned int n = 0, i;
		struct nz_reasm r;

		CHECK(start(&r, total, U));
		do {
			u64 len = (1 + rand_r(&seed) % 8) * U;

			len = len < total - off ? len : total - off;
			offs[n] = off;
			lens[n++] = len;
			off += len;
		} while (off < total);
		for (i = n - 1; i > 0; i--) {
			unsigned int j = rand_r(&seed) % (i + 1);
			u64 o = offs[i], l = lens[i];

			offs[i] = offs[j];
			lens[i] = lens[j];
			offs[j] = o;
			lens[j] = l;
		}
		for (i = 0; i < n; i++) {
			CHECK(!nz_reasm_done(&r));
			CHECK_EQ(nz_reasm_add(&r, offs[i], lens[i]),
				 NZ_REASM_NEW);
			got += lens[i];
			CHECK_EQ(r.received, got);
			CHECK_EQ(nz_reasm_add(&r, offs[i], lens[i]),
				 NZ_REASM_DUP);
		}
		CHECK(nz_reasm_done(&r));
		CHECK_EQ(r.received, total);
	}
	return true;
}

/* ---- seqwin ----------------------------------------------------------- */

static bool t_seqwin_init(void)
{
	struct nz_seqwin w;

	memset(&w, 0xff, sizeof(w));
	nz_seqwin_init(&w);
	CHECK_EQ(w.base, 1);
	CHECK(nz_seqwin_is_done(&w, 0));	/* id 0 is never valid */
	CHECK(!nz_seqwin_in_window(&w, 0));
	CHECK(!nz_seqwin_is_done(&w, 1));
	CHECK(nz_seqwin_in_window(&w, 1));
	CHECK(nz_seqwin_in_window(&w, NZ_SEQWIN_SIZE));
	CHECK(!nz_seqwin_in_window(&w, NZ_SEQWIN_SIZE + 1));
	CHECK(!nz_seqwin_is_done(&w, NZ_SEQWIN_SIZE + 1));
	CHECK(!nz_seqwin_is_done(&w, U64_MAX));
	return true;
}

static bool t_seqwin_in_order(void)
{
	struct nz_seqwin w;
	u64 id;

	nz_seqwin_init(&w);
	for (id = 1; id <= 10; id++) {
		CHECK_EQ(nz_seqwin_mark_done(&w, id), 0);
		CHECK_EQ(w.base, id + 1);
		CHECK(nz_seqwin_is_done(&w, id));
		CHECK(!nz_seqwin_is_done(&w, id + 1));
	}
	return true;
}

static bool t_seqwin_out_of_order(void)
{
	struct nz_seqwin w;

	nz_seqwin_init(&w);
	CHECK_EQ(nz_seqwin_mark_done(&w, 3), 0);
	CHECK_EQ(w.base, 1);
	CHECK(nz_seqwin_is_done(&w, 3));
	CHECK(!nz_seqwin_is_done(&w, 2));
	CHECK(!nz_seqwin_in_window(&w, 3));
	CHECK_EQ(nz_seqwin_mark_done(&w, 1), 0);
	CHECK_EQ(w.base, 2);
	CHECK_EQ(nz_seqwin_mark_done(&w, 2), 0);
	CHECK_EQ(w.base, 4);
	CHECK(nz_seqwin_is_done(&w, 1) && nz_seqwin_is_done(&w, 2) &&
	      nz_seqwin_is_done(&w, 3));
	CHECK(!nz_seqwin_is_done(&w, 4));
	return true;
}

static bool t_seqwin_already_done(void)
{
	struct nz_seqwin w;

	nz_seqwin_init(&w);
	CHECK_EQ(nz_seqwin_mark_done(&w, 1), 0);
	CHECK_EQ(nz_seqwin_mark_done(&w, 1), -EALREADY);	/* below base */
	CHECK_EQ(nz_seqwin_mark_done(&w, 5), 0);
	CHECK_EQ(nz_seqwin_mark_done(&w, 5), -EALREADY);	/* in window */
	CHECK_EQ(nz_seqwin_mark_done(&w, 0), -EALREADY);
	CHECK_EQ(w.base, 2);
	return true;
}

static bool t_seqwin_range(void)
{
	struct nz_seqwin w;

	nz_seqwin_init(&w);
	CHECK_EQ(nz_seqwin_mark_done(&w, 1 + NZ_SEQWIN_SIZE), -ERANGE);
	CHECK_EQ(nz_seqwin_mark_done(&w, U64_MAX), -ERANGE);
	CHECK(!nz_seqwin_is_done(&w, 1 + NZ_SEQWIN_SIZE));
	CHECK_EQ(nz_seqwin_mark_done(&w, NZ_SEQWIN_SIZE), 0);	/* last */
	CHECK_EQ(w.base, 1);
	CHECK_EQ(nz_seqwin_mark_done(&w, 1), 0);
	CHECK_EQ(w.base, 2);
	CHECK_EQ(nz_seqwin_mark_done(&w, 1 + NZ_SEQWIN_SIZE), 0);
	CHECK_EQ(nz_seqwin_mark_done(&w, 2 + NZ_SEQWIN_SIZE), -ERANGE);
	return true;
}

/* Slots are reused for id + SIZE: a passed id must not leave a stale bit. */
static bool t_seqwin_ring_reuse(void)
{
	struct nz_seqwin w;
	u64 id;

	nz_seqwin_init(&w);
	for (id = 1; id <= NZ_SEQWIN_SIZE; id++)
		CHECK_EQ(nz_seqwin_mark_done(&w, id), 0);
	CHECK_EQ(w.base, NZ_SEQWIN_SIZE + 1);
	for (id = w.base; id < w.base + NZ_SEQWIN_SIZE; id++)
		CHECK(!nz_seqwin_is_done(&w, id));
	for (id = 0; id < ARRAY_SIZE(w.map); id++)
		CHECK_EQ(w.map[id], 0);
	return true;
}

/* The whole window filled in reverse: base jumps by SIZE at once. */
static bool t_seqwin_full_window_reverse(void)
{
	struct nz_seqwin w;
	u64 id;

	nz_seqwin_init(&w);
	for (id = NZ_SEQWIN_SIZE; id >= 2; id--) {
		CHECK_EQ(nz_seqwin_mark_done(&w, id), 0);
		CHECK_EQ(w.base, 1);
	}
	CHECK_EQ(nz_seqwin_mark_done(&w, 1), 0);
	CHECK_EQ(w.base, NZ_SEQWIN_SIZE + 1);
	CHECK(!nz_seqwin_is_done(&w, NZ_SEQWIN_SIZE + 1));
	CHECK(!nz_seqwin_is_done(&w, 2 * NZ_SEQWIN_SIZE));
	CHECK_EQ(nz_seqwin_mark_done(&w, 2 * NZ_SEQWIN_SIZE), 0);
	CHECK_EQ(nz_seqwin_mark_done(&w, 2 * NZ_SEQWIN_SIZE + 1), -ERANGE);
	return true;
}

/*
 * Many laps of the ring with completions in random order inside the
 * window, checked against a plain array.
 */
static bool t_seqwin_random_laps(void)
{
	enum { N = 20 * NZ_SEQWIN_SIZE };
	static bool done[N + 2];
	unsigned int seed = 777;
	struct nz_seqwin w;
	u64 id, base = 1, marked = 0;

	memset(done, 0, sizeof(done));
	nz_seqwin_init(&w);
	while (marked < N) {
		u64 span = N + 1 - base;

		if (span > NZ_SEQWIN_SIZE)
			span = NZ_SEQWIN_SIZE;
		id = base + rand_r(&seed) % span;
		if (done[id]) {
			CHECK_EQ(nz_seqwin_mark_done(&w, id), -EALREADY);
			continue;
		}
		CHECK_EQ(nz_seqwin_mark_done(&w, id), 0);
		done[id] = true;
		marked++;
		while (base <= N && done[base])
			base++;
		CHECK_EQ(w.base, base);
		CHECK_EQ(nz_seqwin_mark_done(&w, base + NZ_SEQWIN_SIZE),
			 -ERANGE);
		if (!(marked & 255)) {
			for (id = 1; id < base + NZ_SEQWIN_SIZE; id++)
				CHECK_EQ(nz_seqwin_is_done(&w, id),
					 id <= N && done[id]);
		}
	}
	CHECK_EQ(w.base, (u64)N + 1);
	return true;
}

static bool t_seqwin_near_u64_max(void)
{
	struct nz_seqwin w;

	nz_seqwin_init(&w);
	w.base = U64_MAX - 10;
	CHECK(!nz_seqwin_is_done(&w, U64_MAX));
	CHECK(nz_seqwin_in_window(&w, U64_MAX));
	CHECK(nz_seqwin_is_done(&w, U64_MAX - 11));
	CHECK_EQ(nz_seqwin_mark_done(&w, U64_MAX), 0);
	CHECK(nz_seqwin_is_done(&w, U64_MAX));
	CHECK_EQ(w.base, U64_MAX - 10);
	CHECK_EQ(nz_seqwin_mark_done(&w, 5), -EALREADY);
	return true;
}

#define T(name)	{ #name, t_##name }

static const struct {
	const char *name;
	bool (*fn)(void);
} tests[] = {
	T(bitmap_words),
	T(init_rejects_bad_unit),
	T(init_needs_map),
	T(init_clears_only_its_words),
	T(zero_length_message),
	T(one_byte_message),
	T(exactly_one_unit),
	T(unit_plus_one_in_order),
	T(unit_plus_one_reversed),
	T(unit_plus_one_single_frame),
	T(out_of_order),
	T(duplicate_frame),
	T(duplicate_after_done),
	T(partial_overlap_rejected),
	T(superset_rejected),
	T(gap_between_old_units),
	T(misaligned_rejected),
	T(short_middle_frame_rejected),
	T(out_of_range_rejected),
	T(wraparound_rejected),
	T(huge_total),
	T(word_boundaries),
	T(unit_sizes),
	T(random_cuts_with_dups),
	T(seqwin_init),
	T(seqwin_in_order),
	T(seqwin_out_of_order),
	T(seqwin_already_done),
	T(seqwin_range),
	T(seqwin_ring_reuse),
	T(seqwin_full_window_reverse),
	T(seqwin_random_laps),
	T(seqwin_near_u64_max),
};

int main(void)
{
	unsigned int i, failed = 0;

	printf("1..%zu\n", ARRAY_SIZE(tests));
	for (i = 0; i < ARRAY_SIZE(tests); i++) {
		bool ok = tests[i].fn();

		printf("%sok %u - %s\n", ok ? "" : "not ", i + 1,
		       tests[i].name);
		failed += !ok;
	}
	return failed ? 1 : 0;
}
