/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The aggregation rail's wire protocol (Documentation/aggregation.rst):
 * fixed-size UDP packets between the ranks of a job and the aggregation
 * node (tools/nezha-aggd).  Pure C, no I/O: the node, the client
 * (agg_client.c) and the host tests share it.
 *
 * Every header field is in network byte order; tensor elements in a
 * payload are little-endian.  Every decode checks the magic, the version,
 * the type, the exact length, every reserved field (zero) and every range
 * before it fills its struct: a packet that decodes is well-formed, not
 * yet authentic -- the MACs are checked by the caller, with the key.
 *
 * Private to libnezha and its tools: nza_ names, not in libnezha.map.
 */
#ifndef NEZHA_AGG_WIRE_H
#define NEZHA_AGG_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sha256.h"

#define NZA_MAGIC		0x4e5a4147u	/* "NZAG" */
#define NZA_VERSION		2		/* 2: Poly1305 on data packets */
#define NZA_PORT		29600		/* the node's default UDP port */

/* Tensor bytes per data packet: 256 f32/i32 or 512 f16/bf16 elements. */
#define NZA_PAYLOAD		1024
#define NZA_MAX_ELEMS		(NZA_PAYLOAD / 2)
#define NZA_MAX_RANKS		256		/* ranks of one job */
#define NZA_MAX_WINDOW		1024		/* slots of one job */
#define NZA_DATA_MAC_LEN	16		/* Poly1305 */
#define NZA_NONCE_LEN		16
#define NZA_COOKIE_LEN		16
#define NZA_KEY_ID_LEN		8
#define NZA_KEY_LEN		32		/* = NZ_JOB_KEY_LEN */

/* Fixed packet sizes. */
#define NZA_HDR_LEN		8
#define NZA_HELLO_LEN		64
#define NZA_CHALLENGE_LEN	32
#define NZA_JOIN_LEN		96
#define NZA_ACCEPT_LEN		80
#define NZA_REFUSE_LEN		56
#define NZA_DATA_HDR_LEN	48		/* + count * element size */
#define NZA_LEAVE_LEN		NZA_DATA_HDR_LEN
#define NZA_PKT_MAX		(NZA_DATA_HDR_LEN + NZA_PAYLOAD)

enum nza_type {
	NZA_HELLO = 1,		/* rank -> node: asks for a cookie */
	NZA_CHALLENGE,		/* node -> rank: the cookie for its address */
	NZA_JOIN,		/* rank -> node: cookie + HMAC(job key) */
	NZA_ACCEPT,		/* node -> rank: handle, window, session */
	NZA_REFUSE,		/* node -> rank: why not */
	NZA_DATA,		/* rank -> node: one contribution */
	NZA_RESULT,		/* node -> ranks: one reduced block */
	NZA_LEAVE,		/* rank -> node: done with the job */
	NZA_TYPE_LAST = NZA_LEAVE,
};

/* Element types on the wire (f16/bf16 are reduced in f32 by the node). */
enum nza_dtype {
	NZA_F32 = 1,
	NZA_F16,
	NZA_BF16,
	NZA_I32,
	NZA_DTYPE_LAST = NZA_I32,
};

enum nza_op {
	NZA_OP_SUM = 1,
	NZA_OP_MIN,
	NZA_OP_MAX,
	NZA_OP_LAST = NZA_OP_MAX,
};

/*
 * Why a JOIN was refused.  Refusals for a key the node holds carry a MAC
 * (the rank may believe them and give up); the others do not, and a rank
 * treats them as advice until its own timeout.
 */
enum nza_refuse_reason {
	NZA_R_NO_SLOTS = 1,	/* the pool has no free range of that size */
	NZA_R_NO_JOBS,		/* --max-jobs jobs are registered */
	NZA_R_MISMATCH,		/* the job exists with another size or window */
	NZA_R_TOO_BIG,		/* more slots than the node gives one job */
	NZA_R_UNKNOWN_KEY,	/* no key with that id (no MAC) */
	NZA_R_LAST = NZA_R_UNKNOWN_KEY,
};

struct nza_hello {
	uint8_t nonce[8];		/* echoed in the CHALLENGE */
};

struct nza_challenge {
	uint8_t nonce[8];
	uint8_t cookie[NZA_COOKIE_LEN];
};

struct nza_join {
	uint64_t job_id;
	uint8_t key_id[NZA_KEY_ID_LEN];
	uint16_t rank, nranks, slots;
	uint8_t cookie[NZA_COOKIE_LEN];
	uint8_t nonce[NZA_NONCE_LEN];
	uint8_t mac[NZI_SHA256_LEN];
};

struct nza_accept {
	uint64_t job_id;
	uint32_t handle;
	uint16_t rank, nranks, slots;
	uint8_t session[NZA_NONCE_LEN];
	uint8_t mac[NZI_SHA256_LEN];
};

struct nza_refuse {
	uint64_t job_id;
	uint16_t reason, rank, slots_free;
	uint8_t mac[NZI_SHA256_LEN];	/* all zero: unauthenticated */
};

/* DATA, RESULT and LEAVE (count 0, no payload). */
struct nza_data {
	uint8_t type;
	uint32_t handle;
	uint16_t rank;			/* RESULT: NZA_RANK_ALL */
	uint16_t count;			/* elements in the payload */
	uint8_t dtype, op;		/* LEAVE: 0 */
	uint64_t seq;			/* the block's number in the job */
	uint8_t mac[NZA_DATA_MAC_LEN];
	const uint8_t *payload;		/* count * nza_dtype_size(dtype) bytes */
};

#define NZA_RANK_ALL	0xffff

/* 4 or 2 for a known dtype, 0 otherwise. */
unsigned int nza_dtype_size(unsigned int dtype);
/* Elements of one full packet of this dtype (NZA_PAYLOAD / size). */
unsigned int nza_dtype_elems(unsigned int dtype);

/* The type of a packet with a valid common header, or -EINVAL (too short,
 * bad magic, unknown type, non-zero flags) or -EPROTONOSUPPORT (version). */
int nza_peek_type(const uint8_t *buf, size_t len);

/* Encoders write exactly NZA_*_LEN bytes (data: the header + payload) and
 * return that length; MAC fields are copied from the struct as they are. */
size_t nza_encode_hello(uint8_t *buf, const struct nza_hello *h);
size_t nza_encode_challenge(uint8_t *buf, const struct nza_challenge *c);
size_t nza_encode_join(uint8_t *buf, const struct nza_join *j);
size_t nza_encode_accept(uint8_t *buf, const struct nza_accept *a);
size_t nza_encode_refuse(uint8_t *buf, const struct nza_refuse *r);
size_t nza_encode_data(uint8_t *buf, const struct nza_data *d);

/* Decoders: 0, or -EINVAL for anything malformed (nothing is believed). */
int nza_decode_hello(const uint8_t *buf, size_t len, struct nza_hello *h);
int nza_decode_challenge(const uint8_t *buf, size_t len, struct nza_challenge *c);
int nza_decode_join(const uint8_t *buf, size_t len, struct nza_join *j);
int nza_decode_accept(const uint8_t *buf, size_t len, struct nza_accept *a);
int nza_decode_refuse(const uint8_t *buf, size_t len, struct nza_refuse *r);
int nza_decode_data(const uint8_t *buf, size_t len, struct nza_data *d);

/*
 * The MACs.  Each use of the job key has its own label, so that no MAC
 * computed for one message can stand for another.
 *
 *  key id    HMAC(key, "nezha agg key id")[0..8)         names the key
 *  JOIN      HMAC(key, "nezha agg join" | JOIN[0..64))
 *  ACCEPT    HMAC(key, "nezha agg accept" | join nonce | ACCEPT[0..48))
 *  REFUSE    HMAC(key, "nezha agg refuse" | join nonce | REFUSE[0..24))
 *  data key  HMAC(key, "nezha agg data" | job id | session)
 *  DATA, RESULT, LEAVE
 *            Poly1305(BLAKE2s(key: data key, pkt[0..32)), pkt[0..32) | payload)
 *
 * A data packet's first 32 bytes (type, handle, rank, count, dtype, op,
 * seq) differ between any two packets of a session whose payloads differ
 * (a block's sequence number is never reused; a resent packet is the same
 * packet), so the keyed BLAKE2s of them is a one-time key for Poly1305,
 * as the module's per-frame MAC does (kmod/frame_mac.c).  The HMAC this
 * replaces (protocol version 1) cost 45 % of the node's path's cycles.
 */
void nza_key_id(const uint8_t *key, uint8_t id[NZA_KEY_ID_LEN]);
void nza_join_mac(const uint8_t *key, const uint8_t *pkt, uint8_t mac[NZI_SHA256_LEN]);
void nza_accept_mac(const uint8_t *key, const uint8_t *join_nonce, const uint8_t *pkt,
		    uint8_t mac[NZI_SHA256_LEN]);
void nza_refuse_mac(const uint8_t *key, const uint8_t *join_nonce, const uint8_t *pkt,
		    uint8_t mac[NZI_SHA256_LEN]);
/* A session's data key. */
struct nza_data_key {
	uint8_t k[NZI_SHA256_LEN];
};

void nza_data_key(const uint8_t *key, uint64_t job_id, const uint8_t *session,
		  struct nza_data_key *dk);
/* Fill the MAC of an encoded DATA/RESULT/LEAVE packet of len bytes. */
void nza_data_seal(const struct nza_data_key *dk, uint8_t *pkt, size_t len);
/* Whether the MAC of a decoded packet of len bytes is right. */
bool nza_data_mac_ok(const struct nza_data_key *dk, const uint8_t *pkt, size_t len);

/* Tensor elements <-> little-endian wire bytes (a copy on LE hosts). */
void nza_to_wire(uint8_t *dst, const void *src, size_t count, unsigned int esize);
void nza_from_wire(void *dst, const uint8_t *src, size_t count, unsigned int esize);

#endif /* NEZHA_AGG_WIRE_H */
