// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Keyed BLAKE2s (RFC 7693) and Poly1305 (RFC 8439), written from the
 * RFCs' descriptions (mac.h).  Checked against their test vectors and a
 * reference implementation's outputs by selftests/unit/test_mac.c.
 */
#include <string.h>
#include "mac.h"
#include "sha256.h"

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

/* ---- BLAKE2s ---- */

static const uint32_t b2s_iv[8] = {
	0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
	0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
};

static const uint8_t b2s_sigma[10][16] = {
	{ 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 },
	{ 14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3 },
	{ 11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4 },
	{ 7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8 },
	{ 9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13 },
	{ 2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9 },
	{ 12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11 },
	{ 13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10 },
	{ 6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5 },
	{ 10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0 },
};

static uint32_t ror32(uint32_t x, unsigned int n)
{
	return x >> n | x << (32 - n);
}

static void b2s_g(uint32_t v[16], int a, int b, int c, int d, uint32_t x, uint32_t y)
{
	v[a] = v[a] + v[b] + x;
	v[d] = ror32(v[d] ^ v[a], 16);
	v[c] = v[c] + v[d];
	v[b] = ror32(v[b] ^ v[c], 12);
	v[a] = v[a] + v[b] + y;
	v[d] = ror32(v[d] ^ v[a], 8);
	v[c] = v[c] + v[d];
	v[b] = ror32(v[b] ^ v[c], 7);
}

/* One 64-byte block; t: bytes hashed so far, this block included. */
static void b2s_compress(uint32_t h[8], const uint8_t block[64], uint64_t t, int last)
{
	uint32_t m[16], v[16];

	for (int i = 0; i < 16; i++)
		m[i] = get_le32(block + 4 * i);
	for (int i = 0; i < 8; i++) {
		v[i] = h[i];
		v[i + 8] = b2s_iv[i];
	}
	v[12] ^= (uint32_t)t;
	v[13] ^= (uint32_t)(t >> 32);
	if (last)
		v[14] = ~v[14];
	for (int r = 0; r < 10; r++) {
		const uint8_t *s = b2s_sigma[r];

		b2s_g(v, 0, 4, 8, 12, m[s[0]], m[s[1]]);
		b2s_g(v, 1, 5, 9, 13, m[s[2]], m[s[3]]);
		b2s_g(v, 2, 6, 10, 14, m[s[4]], m[s[5]]);
		b2s_g(v, 3, 7, 11, 15, m[s[6]], m[s[7]]);
		b2s_g(v, 0, 5, 10, 15, m[s[8]], m[s[9]]);
		b2s_g(v, 1, 6, 11, 12, m[s[10]], m[s[11]]);
		b2s_g(v, 2, 7, 8, 13, m[s[12]], m[s[13]]);
		b2s_g(v, 3, 4, 9, 14, m[s[14]], m[s[15]]);
	}
	for (int i = 0; i < 8; i++)
		h[i] ^= v[i] ^ v[i + 8];
	nzi_wipe(v, sizeof(v));
	nzi_wipe(m, sizeof(m));
}

void nzi_blake2s(uint8_t *out, size_t outlen, const uint8_t *key, size_t keylen,
		 const void *in, size_t inlen)
{
	const uint8_t *p = in;
	uint8_t block[64], full[NZI_BLAKE2S_LEN];
	uint32_t h[8];
	uint64_t t = 0;

	if (!outlen || outlen > NZI_BLAKE2S_LEN || keylen > NZI_BLAKE2S_LEN)
		return;
	memcpy(h, b2s_iv, sizeof(h));
	h[0] ^= 0x01010000u ^ (uint32_t)keylen << 8 ^ (uint32_t)outlen;
	if (keylen) {
		/* the key is the first block, padded with zeros */
		memset(block, 0, sizeof(block));
		memcpy(block, key, keylen);
		t = 64;
		b2s_compress(h, block, t, !inlen);
	}
	/* every block but the last, which is compressed with the flag */
	while (inlen > 64) {
		t += 64;
		b2s_compress(h, p, t, 0);
		p += 64;
		inlen -= 64;
	}
	if (inlen || !keylen) {
		memset(block, 0, sizeof(block));
		memcpy(block, p, inlen);
		t += inlen;
		b2s_compress(h, block, t, 1);
	}
	for (int i = 0; i < 8; i++)
		put_le32(full + 4 * i, h[i]);
	memcpy(out, full, outlen);
	nzi_wipe(full, sizeof(full));
	nzi_wipe(block, sizeof(block));
	nzi_wipe(h, sizeof(h));
}

/* ---- Poly1305: h = (h + block) * r mod 2^130 - 5, in 26-bit limbs ---- */

void nzi_poly1305_init(struct nzi_poly1305 *p, const uint8_t key[NZI_POLY1305_KEY_LEN])
{
	/* r clamped as RFC 8439 says, split in five limbs of 26 bits */
	p->r[0] = get_le32(key + 0) & 0x3ffffff;
	p->r[1] = (get_le32(key + 3) >> 2) & 0x3ffff03;
	p->r[2] = (get_le32(key + 6) >> 4) & 0x3ffc0ff;
	p->r[3] = (get_le32(key + 9) >> 6) & 0x3f03fff;
	p->r[4] = (get_le32(key + 12) >> 8) & 0x00fffff;
	for (int i = 0; i < 4; i++)
		p->s[i] = get_le32(key + 16 + 4 * i);
	memset(p->h, 0, sizeof(p->h));
	p->fill = 0;
}

/* One 16-byte block; hibit: 1 << 24 for a full block (its 2^128 bit),
 * 0 for the last, padded one (which carries its own 1 byte). */
static void poly_block(struct nzi_poly1305 *p, const uint8_t m[16], uint32_t hibit)
{
	const uint32_t r0 = p->r[0], r1 = p->r[1], r2 = p->r[2], r3 = p->r[3], r4 = p->r[4];
	const uint32_t s1 = r1 * 5, s2 = r2 * 5, s3 = r3 * 5, s4 = r4 * 5;
	uint32_t h0 = p->h[0], h1 = p->h[1], h2 = p->h[2], h3 = p->h[3], h4 = p->h[4];
	uint64_t d0, d1, d2, d3, d4, c;

	h0 += get_le32(m + 0) & 0x3ffffff;
	h1 += (get_le32(m + 3) >> 2) & 0x3ffffff;
	h2 += (get_le32(m + 6) >> 4) & 0x3ffffff;
	h3 += (get_le32(m + 9) >> 6) & 0x3ffffff;
	h4 += (get_le32(m + 12) >> 8) | hibit;

	/* 2^130 = 5 mod p: a limb product past the top wraps times 5 */
	d0 = (uint64_t)h0 * r0 + (uint64_t)h1 * s4 + (uint64_t)h2 * s3 +
	     (uint64_t)h3 * s2 + (uint64_t)h4 * s1;
	d1 = (uint64_t)h0 * r1 + (uint64_t)h1 * r0 + (uint64_t)h2 * s4 +
	     (uint64_t)h3 * s3 + (uint64_t)h4 * s2;
	d2 = (uint64_t)h0 * r2 + (uint64_t)h1 * r1 + (uint64_t)h2 * r0 +
	     (uint64_t)h3 * s4 + (uint64_t)h4 * s3;
	d3 = (uint64_t)h0 * r3 + (uint64_t)h1 * r2 + (uint64_t)h2 * r1 +
	     (uint64_t)h3 * r0 + (uint64_t)h4 * s4;
	d4 = (uint64_t)h0 * r4 + (uint64_t)h1 * r3 + (uint64_t)h2 * r2 +
	     (uint64_t)h3 * r1 + (uint64_t)h4 * r0;

	c = d0 >> 26;
	h0 = (uint32_t)d0 & 0x3ffffff;
	d1 += c;
	c = d1 >> 26;
	h1 = (uint32_t)d1 & 0x3ffffff;
	d2 += c;
	c = d2 >> 26;
	h2 = (uint32_t)d2 & 0x3ffffff;
	d3 += c;
	c = d3 >> 26;
	h3 = (uint32_t)d3 & 0x3ffffff;
	d4 += c;
	c = d4 >> 26;
	h4 = (uint32_t)d4 & 0x3ffffff;
	h0 += (uint32_t)c * 5;
	h1 += h0 >> 26;
	h0 &= 0x3ffffff;

	p->h[0] = h0;
	p->h[1] = h1;
	p->h[2] = h2;
	p->h[3] = h3;
	p->h[4] = h4;
}

void nzi_poly1305_update(struct nzi_poly1305 *p, const void *data, size_t len)
{
	const uint8_t *m = data;

	if (p->fill) {
		size_t take = 16 - p->fill < len ? 16 - p->fill : len;

		memcpy(p->buf + p->fill, m, take);
		p->fill += take;
		m += take;
		len -= take;
		if (p->fill < 16)
			return;
		poly_block(p, p->buf, 1u << 24);
		p->fill = 0;
	}
	for (; len >= 16; m += 16, len -= 16)
		poly_block(p, m, 1u << 24);
	memcpy(p->buf, m, len);
	p->fill = len;
}

void nzi_poly1305_final(struct nzi_poly1305 *p, uint8_t tag[NZI_POLY1305_TAG_LEN])
{
	uint32_t h0, h1, h2, h3, h4, g0, g1, g2, g3, g4, c, mask;
	uint64_t f;

	if (p->fill) {
		p->buf[p->fill] = 1;
		memset(p->buf + p->fill + 1, 0, 16 - p->fill - 1);
		poly_block(p, p->buf, 0);
	}
	h0 = p->h[0];
	h1 = p->h[1];
	h2 = p->h[2];
	h3 = p->h[3];
	h4 = p->h[4];
	/* carry fully */
	c = h1 >> 26;
	h1 &= 0x3ffffff;
	h2 += c;
	c = h2 >> 26;
	h2 &= 0x3ffffff;
	h3 += c;
	c = h3 >> 26;
	h3 &= 0x3ffffff;
	h4 += c;
	c = h4 >> 26;
	h4 &= 0x3ffffff;
	h0 += c * 5;
	c = h0 >> 26;
	h0 &= 0x3ffffff;
	h1 += c;

	/* g = h + 5 - 2^130: h itself if that is negative, else g */
	g0 = h0 + 5;
	c = g0 >> 26;
	g0 &= 0x3ffffff;
	g1 = h1 + c;
	c = g1 >> 26;
	g1 &= 0x3ffffff;
	g2 = h2 + c;
	c = g2 >> 26;
	g2 &= 0x3ffffff;
	g3 = h3 + c;
	c = g3 >> 26;
	g3 &= 0x3ffffff;
	g4 = h4 + c - (1u << 26);

	mask = (g4 >> 31) - 1;	/* all ones when g >= 0 */
	h0 = (h0 & ~mask) | (g0 & mask);
	h1 = (h1 & ~mask) | (g1 & mask);
	h2 = (h2 & ~mask) | (g2 & mask);
	h3 = (h3 & ~mask) | (g3 & mask);
	h4 = (h4 & ~mask) | (g4 & mask);

	/* h mod 2^128 in four words, plus s */
	h0 = h0 | h1 << 26;
	h1 = h1 >> 6 | h2 << 20;
	h2 = h2 >> 12 | h3 << 14;
	h3 = h3 >> 18 | h4 << 8;
	f = (uint64_t)h0 + p->s[0];
	put_le32(tag + 0, (uint32_t)f);
	f = (uint64_t)h1 + p->s[1] + (f >> 32);
	put_le32(tag + 4, (uint32_t)f);
	f = (uint64_t)h2 + p->s[2] + (f >> 32);
	put_le32(tag + 8, (uint32_t)f);
	f = (uint64_t)h3 + p->s[3] + (f >> 32);
	put_le32(tag + 12, (uint32_t)f);
	nzi_wipe(p, sizeof(*p));
}
