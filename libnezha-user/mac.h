/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Two primitives for per-packet MACs (libnezha-user/mac.c): keyed BLAKE2s
 * (RFC 7693) and Poly1305 (RFC 8439, section 2.5).  Poly1305 is a one-time
 * authenticator: every message needs a key of its own, which a keyed
 * BLAKE2s of a value unique to the message gives -- the construction of
 * the module's per-frame MAC (kmod/frame_mac.c).  Plain C, no allocation.
 *
 * Private to libnezha and its tools: nzi_ names, not in libnezha.map.
 */
#ifndef NEZHA_MAC_H
#define NEZHA_MAC_H

#include <stddef.h>
#include <stdint.h>

#define NZI_BLAKE2S_LEN		32	/* the longest digest and key */
#define NZI_POLY1305_KEY_LEN	32
#define NZI_POLY1305_TAG_LEN	16

/* out: outlen (1..32) bytes of BLAKE2s of in, keyed with key (keylen
 * 0..32; 0: unkeyed). */
void nzi_blake2s(uint8_t *out, size_t outlen, const uint8_t *key, size_t keylen,
		 const void *in, size_t inlen);

struct nzi_poly1305 {
	uint32_t r[5], h[5], s[4];
	uint8_t buf[16];
	size_t fill;
};

void nzi_poly1305_init(struct nzi_poly1305 *p, const uint8_t key[NZI_POLY1305_KEY_LEN]);
void nzi_poly1305_update(struct nzi_poly1305 *p, const void *data, size_t len);
/* The tag; p is wiped. */
void nzi_poly1305_final(struct nzi_poly1305 *p, uint8_t tag[NZI_POLY1305_TAG_LEN]);

#endif /* NEZHA_MAC_H */
