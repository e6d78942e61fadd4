// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), for the rendezvous'
 * MACs and the derivation of a job's secret (jobkey.c, boot_msg.c).
 *
 * Written here from the two specifications, so that libnezha needs no
 * crypto library at run time; selftests/unit/test_sha256.c checks it
 * against the FIPS 180 examples and the RFC 4231 vectors.  Speed does not
 * matter: a rendezvous hashes a few kilobytes per rank.
 */
#include <string.h>
#include "sha256.h"

static const uint32_t nzi_k[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
	0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
	0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
	0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
	0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
	0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
	0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
	0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
	0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t nzi_ror(uint32_t x, unsigned int n)
{
	return x >> n | x << (32 - n);
}

/* One 64-byte block into the state (FIPS 180-4, 6.2.2). */
static void nzi_sha256_block(uint32_t h[8], const uint8_t *p)
{
	uint32_t w[64], a, b, c, d, e, f, g, hh;

	for (int t = 0; t < 16; t++, p += 4)
		w[t] = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
		       (uint32_t)p[2] << 8 | p[3];
	for (int t = 16; t < 64; t++) {
		uint32_t s0 = nzi_ror(w[t - 15], 7) ^ nzi_ror(w[t - 15], 18) ^ w[t - 15] >> 3;
		uint32_t s1 = nzi_ror(w[t - 2], 17) ^ nzi_ror(w[t - 2], 19) ^ w[t - 2] >> 10;

		w[t] = w[t - 16] + s0 + w[t - 7] + s1;
	}
	a = h[0]; b = h[1]; c = h[2]; d = h[3];
	e = h[4]; f = h[5]; g = h[6]; hh = h[7];
	for (int t = 0; t < 64; t++) {
		uint32_t s1 = nzi_ror(e, 6) ^ nzi_ror(e, 11) ^ nzi_ror(e, 25);
		uint32_t ch = (e & f) ^ (~e & g);
		uint32_t t1 = hh + s1 + ch + nzi_k[t] + w[t];
		uint32_t s0 = nzi_ror(a, 2) ^ nzi_ror(a, 13) ^ nzi_ror(a, 22);
		uint32_t maj = (a & b) ^ (a & c) ^ (b & c);

		hh = g; g = f; f = e; e = d + t1;
		d = c; c = b; b = a; a = t1 + s0 + maj;
	}
	h[0] += a; h[1] += b; h[2] += c; h[3] += d;
	h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
}

void nzi_sha256_init(struct nzi_sha256 *c)
{
	static const uint32_t h0[8] = {
		0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
		0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
	};

	memcpy(c->h, h0, sizeof(h0));
	c->bytes = 0;
	c->fill = 0;
}

void nzi_sha256_update(struct nzi_sha256 *c, const void *data, size_t len)
{
	const uint8_t *p = data;

	c->bytes += len;
	if (c->fill) {
		size_t take = NZI_SHA256_BLOCK - c->fill;

		if (take > len)
			take = len;
		memcpy(c->buf + c->fill, p, take);
		c->fill += take;
		p += take;
		len -= take;
		if (c->fill < NZI_SHA256_BLOCK)
			return;
		nzi_sha256_block(c->h, c->buf);
		c->fill = 0;
	}
	for (; len >= NZI_SHA256_BLOCK; p += NZI_SHA256_BLOCK, len -= NZI_SHA256_BLOCK)
		nzi_sha256_block(c->h, p);
	memcpy(c->buf, p, len);
	c->fill = len;
}

void nzi_sha256_final(struct nzi_sha256 *c, uint8_t out[NZI_SHA256_LEN])
{
	uint64_t bits = c->bytes * 8;
	uint8_t pad[NZI_SHA256_BLOCK + 8] = { 0x80 };
	size_t padlen = (c->fill < 56 ? 56 : 120) - c->fill;

	/* 0x80, zeros up to 56 mod 64, then the length in bits, big endian. */
	for (int i = 0; i < 8; i++)
		pad[padlen + i] = (uint8_t)(bits >> (56 - 8 * i));
	nzi_sha256_update(c, pad, padlen + 8);
	for (int i = 0; i < 8; i++) {
		out[4 * i] = (uint8_t)(c->h[i] >> 24);
		out[4 * i + 1] = (uint8_t)(c->h[i] >> 16);
		out[4 * i + 2] = (uint8_t)(c->h[i] >> 8);
		out[4 * i + 3] = (uint8_t)c->h[i];
	}
	nzi_wipe(c, sizeof(*c));
}

void nzi_sha256(const void *data, size_t len, uint8_t out[NZI_SHA256_LEN])
{
	struct nzi_sha256 c;

	nzi_sha256_init(&c);
	nzi_sha256_update(&c, data, len);
	nzi_sha256_final(&c, out);
}

/* HMAC (RFC 2104): H(K ^ opad || H(K ^ ipad || text)), K padded to a block. */
void nzi_hmac_init(struct nzi_hmac *m, const void *key, size_t klen)
{
	uint8_t k[NZI_SHA256_BLOCK] = { 0 }, pad[NZI_SHA256_BLOCK];

	if (klen > NZI_SHA256_BLOCK)
		nzi_sha256(key, klen, k);	/* a long key is hashed first */
	else
		memcpy(k, key, klen);
	for (int i = 0; i < NZI_SHA256_BLOCK; i++)
		pad[i] = k[i] ^ 0x36;
	nzi_sha256_init(&m->inner);
	nzi_sha256_update(&m->inner, pad, sizeof(pad));
	for (int i = 0; i < NZI_SHA256_BLOCK; i++)
		pad[i] = k[i] ^ 0x5c;
	nzi_sha256_init(&m->outer);
	nzi_sha256_update(&m->outer, pad, sizeof(pad));
	nzi_wipe(k, sizeof(k));
	nzi_wipe(pad, sizeof(pad));
}

void nzi_hmac_update(struct nzi_hmac *m, const void *data, size_t len)
{
	nzi_sha256_update(&m->inner, data, len);
}

void nzi_hmac_final(struct nzi_hmac *m, uint8_t out[NZI_SHA256_LEN])
{
	uint8_t ih[NZI_SHA256_LEN];

	nzi_sha256_final(&m->inner, ih);
	nzi_sha256_update(&m->outer, ih, sizeof(ih));
	nzi_sha256_final(&m->outer, out);
	nzi_wipe(ih, sizeof(ih));
}

void nzi_hmac_sha256(const void *key, size_t klen, const void *data, size_t len,
		     uint8_t out[NZI_SHA256_LEN])
{
	struct nzi_hmac m;

	nzi_hmac_init(&m, key, klen);
	nzi_hmac_update(&m, data, len);
	nzi_hmac_final(&m, out);
}

bool nzi_mac_equal(const uint8_t *a, const uint8_t *b, size_t len)
{
	volatile uint8_t diff = 0;

	/* Every byte is compared: the time says nothing of where they differ. */
	for (size_t i = 0; i < len; i++)
		diff |= a[i] ^ b[i];
	return !diff;
}

void nzi_wipe(void *p, size_t len)
{
	explicit_bzero(p, len);
}
