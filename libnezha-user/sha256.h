/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * SHA-256 and HMAC-SHA256 of libnezha (sha256.c): private, nzi_ names only.
 */
#ifndef NEZHA_SHA256_H
#define NEZHA_SHA256_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NZI_SHA256_LEN		32
#define NZI_SHA256_BLOCK	64

struct nzi_sha256 {
	uint32_t h[8];
	uint64_t bytes;			/* hashed so far */
	uint8_t buf[NZI_SHA256_BLOCK];	/* a partial block */
	size_t fill;			/* bytes in buf */
};

void nzi_sha256_init(struct nzi_sha256 *c);
void nzi_sha256_update(struct nzi_sha256 *c, const void *data, size_t len);
/* The digest; the context is wiped and must be initialised again. */
void nzi_sha256_final(struct nzi_sha256 *c, uint8_t out[NZI_SHA256_LEN]);
void nzi_sha256(const void *data, size_t len, uint8_t out[NZI_SHA256_LEN]);

struct nzi_hmac {
	struct nzi_sha256 inner, outer;
};

void nzi_hmac_init(struct nzi_hmac *m, const void *key, size_t klen);
void nzi_hmac_update(struct nzi_hmac *m, const void *data, size_t len);
void nzi_hmac_final(struct nzi_hmac *m, uint8_t out[NZI_SHA256_LEN]);
void nzi_hmac_sha256(const void *key, size_t klen, const void *data, size_t len,
		     uint8_t out[NZI_SHA256_LEN]);

/* a[0..len) == b[0..len), in a time that does not depend on the bytes. */
bool nzi_mac_equal(const uint8_t *a, const uint8_t *b, size_t len);
/* Clear memory that held a key or a secret (not optimised away). */
void nzi_wipe(void *p, size_t len);

#endif /* NEZHA_SHA256_H */
