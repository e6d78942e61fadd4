/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nezha-aggd's core, inside: the structs aggd_core.c and aggd_slot.c share.
 */
#ifndef NEZHA_AGGD_INT_H
#define NEZHA_AGGD_INT_H

#include <stdbool.h>

#include "aggd.h"

#define AGGD_SEQ_NONE	UINT64_MAX
#define AGGD_BITMAP	(NZA_MAX_RANKS / 64)

/*
 * One half of a slot: the block it reduces now, or reduced last.  A slot's
 * two halves take the job's blocks seq with (seq / window) even and odd in
 * turn, so that the result of block seq stays in its half while the ranks
 * that have it already send block seq + window into the other half: a
 * rank whose RESULT was lost gets it again from here (SwitchML's shadow
 * copy).  Which rank contributed is a bitmap: a retransmitted contribution
 * is never added twice.
 */
/* A block's elements: f32 for f32, f16 and bf16; i32 for i32. */
union aggd_acc {
	float f[NZA_MAX_ELEMS];
	int32_t i[NZA_MAX_ELEMS];
};

struct aggd_half {
	uint64_t seq;				/* AGGD_SEQ_NONE: unused */
	uint64_t seen[AGGD_BITMAP];		/* ranks counted */
	uint16_t nseen;
	uint16_t count;				/* elements of the block */
	uint8_t dtype, op;
	bool done;				/* all ranks counted */
	union aggd_acc acc;
};

struct aggd_slot {
	struct aggd_half half[2];
};

struct aggd_rank {
	struct aggd_addr addr;
	bool joined, left;
};

struct aggd_job {
	bool used;
	uint32_t gen;			/* handle = gen << 8 | index */
	uint64_t job_id;
	unsigned int key;		/* index in cfg.keys */
	uint16_t nranks, nslots, njoined, nleft;
	unsigned int base;		/* first slot of the job's range */
	uint8_t session[NZA_NONCE_LEN];
	struct nza_data_key data;	/* the session's data key */
	uint64_t last_ns;		/* last authentic packet */
	struct aggd_rank *ranks;	/* NZA_MAX_RANKS entries */
};

/* One source address's token bucket (tokens in packet-nanoseconds). */
struct aggd_bucket {
	uint8_t addr[16];
	uint16_t family;
	uint64_t tokens, last_ns;
};

#define AGGD_BUCKETS	4096

struct aggd {
	struct aggd_cfg cfg;
	aggd_send_fn send;
	void *arg;
	struct aggd_stats st;
	struct aggd_slot *slots;
	uint8_t *slot_used;
	struct aggd_job *jobs;
	struct aggd_rank *ranks;
	struct aggd_bucket *buckets;
	uint8_t key_id[AGGD_MAX_KEYS][NZA_KEY_ID_LEN];
	uint8_t cookie_secret[NZI_SHA256_LEN];
	uint64_t hash_seed;
	uint64_t rx_data_n, tx_result_n;
	uint8_t out[NZA_PKT_MAX];
};

/* aggd_core.c */
void aggd_send(struct aggd *n, const struct aggd_addr *to, const uint8_t *buf, size_t len);

/* aggd_slot.c: an authentic DATA of rank d->rank of job j. */
void aggd_slot_input(struct aggd *n, struct aggd_job *j, const struct nza_data *d);
/* A fresh job's range: every half unused. */
void aggd_slots_reset(struct aggd *n, const struct aggd_job *j);

#endif /* NEZHA_AGGD_INT_H */
