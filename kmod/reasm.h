/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Nezha receive-side bookkeeping, pure C (built into nezha.ko and tests).
 *
 * struct nz_reasm tracks which units of one in-progress message arrived.
 * The DATA frames of a message may come over any rail, in any order, and
 * a frame resent after a failover may arrive twice; the sender resends a
 * chunk with exactly its first offset and length, so a frame is either all
 * new, all old, or a protocol error.
 *
 * struct nz_seqwin tracks, per peer and direction, which whole messages
 * are complete, so that a late duplicate of a finished message is dropped
 * (and acknowledged) instead of starting a new one.
 *
 * Locking is the caller's: none of these functions sleeps or allocates.
 */
#ifndef _NZ_REASM_H
#define _NZ_REASM_H

#include "nz_compat.h"

enum nz_reasm_result {
	NZ_REASM_NEW	= 1,	/* every unit new: copy the payload, ACK */
	NZ_REASM_DUP	= 2,	/* every unit seen: drop the payload, ACK */
};

struct nz_reasm {
	u64	total;		/* message length */
	u64	received;	/* distinct payload bytes seen so far */
	u64	nunits;		/* units in the message */
	u64	*map;		/* nunits bits, caller-allocated */
	u32	unit;
	u8	unit_shift;
	bool	zero_seen;	/* total == 0: its one frame arrived */
};

/* u64 words of bitmap nz_reasm_init() needs; 0 if @unit is invalid. */
u64 nz_reasm_bitmap_words(u64 total, u32 unit);

/*
 * Start a message of @total bytes cut in units of @unit bytes.  @map holds
 * nz_reasm_bitmap_words() words (may be NULL when that is 0); it is zeroed
 * here and must live until the message is done or abandoned.
 * Returns 0 or -EINVAL (bad unit, missing map).
 */
int nz_reasm_init(struct nz_reasm *r, u64 total, u32 unit, u64 *map);

/*
 * Account a DATA frame's [offset, offset + len).  The caller has checked
 * that the frame's total equals r->total.  Returns NZ_REASM_NEW,
 * NZ_REASM_DUP, or -EPROTO (breaks the chunking rule, out of range, or
 * partly overlaps what arrived before); on -EPROTO nothing changes.
 */
int nz_reasm_add(struct nz_reasm *r, u64 offset, u64 len);

/* Every byte arrived (for a zero-length message: its one frame). */
bool nz_reasm_done(const struct nz_reasm *r);

/*
 * Duplicate window over msg_id, per (sender, receiver) direction.  base is
 * the lowest msg_id not yet complete; ids below it are done; ids in
 * [base, base + NZ_SEQWIN_SIZE) are tracked by a ring bitmap; ids beyond
 * are out of range: the sender keeps at most NZ_SEQWIN_SIZE messages in
 * flight per direction, so such an id is a protocol error.  msg_id 0 is
 * never valid and counts as below the window.
 */
#define NZ_SEQWIN_SIZE	1024

struct nz_seqwin {
	u64	base;
	u64	map[NZ_SEQWIN_SIZE / 64];
};

void nz_seqwin_init(struct nz_seqwin *w);

bool nz_seqwin_is_done(const struct nz_seqwin *w, u64 id);

/* Not done, and close enough to base to be tracked. */
bool nz_seqwin_in_window(const struct nz_seqwin *w, u64 id);

/*
 * Record message @id as complete and move base past every contiguous
 * complete id.  Returns 0, -EALREADY if @id was already done, or -ERANGE
 * if @id >= base + NZ_SEQWIN_SIZE.
 */
int nz_seqwin_mark_done(struct nz_seqwin *w, u64 id);

#endif /* _NZ_REASM_H */
