// SPDX-License-Identifier: GPL-2.0
/*
 * Host test of libnezha's keyed BLAKE2s and Poly1305 (libnezha-user/mac.c):
 * the RFCs' own test vectors, and digests of patterned keys and inputs
 * of awkward lengths (0, 1, a block less or more by one, the aggregation
 * protocol's 1071 and 1072 bytes) computed by Python's hashlib (BLAKE2s)
 * and the cryptography package (Poly1305, OpenSSL underneath).  Poly1305
 * also fed in pieces of every size from 1 to 17, which must not matter.
 */
#include <stdio.h>
#include <string.h>

#include "mac.h"
#include "tap.h"

/* keylen, inlen, outlen, digest: keys and inputs from pattern() */
static const struct { unsigned int kl, il, ol; const char *hex; } b2s_vec[] = {
	{ 0, 0, 32, "69217a3079908094e11121d042354a7c1f55b6482ca1a51e1b250dfd1ed0eef9" },
	{ 0, 3, 32, "c901eeb59a6fa3d65083bce866828fe11a8cd47ca06058621ec49c8d27eb3ed9" },
	{ 32, 0, 32, "70d736dfc12509deb2daf23172fcf08bc28136907b9ab4a7880a0755d1ebc2da" },
	{ 32, 1, 32, "3792acbb888508c641c2508c3d110ee5ad8e7ab6a3461757da19af8cbacdb82a" },
	{ 16, 63, 32, "ad187625b4bc3ffb505cc2ab2b28817feece32b5c2cf25712eb90b3b39939a03" },
	{ 32, 64, 32, "6ed5abf8b98505f671026c1b00c85b9ad31243528eb324925d1fe13e7d5871b6" },
	{ 32, 65, 32, "73ca445501261c78b737cef5fdcc3ffea6ece019c2632bdcb84185c888120c52" },
	{ 32, 128, 32, "ec6296e6b9ab208387218949b645d4f6c851e1e72e18572e0edd916d7dea6ad6" },
	{ 8, 1071, 16, "d25c60124c65a4d24b9273501e94a289" },
	{ 32, 200, 32, "dccf476285b1f6e205d1629d48d11f8c69216ad07724f539e03cbe1ebbe31bd5" },
	{ 1, 129, 1, "b2" },
};
static const struct { unsigned int il; const char *hex; } p1305_vec[] = {
	{ 0, "d5e2effc091623303d4a5764717e8b98" },
	{ 1, "f81c566f93003a3344e51ef8f4c903bd" },
	{ 15, "87214a26538ba39c266f76d6661fe6f9" },
	{ 16, "687500acfaa63a771c98a9ae1481eeca" },
	{ 17, "348d0a2df51ec68560afc00cbb12b818" },
	{ 32, "1b5ffce82d444160495afc31d06dec54" },
	{ 63, "06ee280c054bb46975747edfd9225e5a" },
	{ 1071, "7ac9421b2f999f3ec2c763652b33a19d" },
	{ 1072, "a2dda4855d181ff73c436688d647f955" },
};
/* key and 64-byte message all 0xff */
static const char *p1305_ff = "900fe32bc15fa8d7bca8efe4c7e37eb1";
/* RFC 8439, 2.5.2 */
static const char *p1305_rfc = "a8061dc1305136c6c22b8baf0c0127a9";
/* RFC 7693, appendix B: BLAKE2s-256("abc") */
static const char *b2s_abc = "508c5e8c327c14e2e1a72ba34eeb452f37458b209ed63a294d999b4c86675982";

static void pattern(uint8_t *p, size_t n, unsigned int seed, unsigned int mul, unsigned int add)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * mul + seed * add + 5);
}

static void hex(const uint8_t *p, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", p[i]);
}

static void poly(const uint8_t *key, const uint8_t *m, size_t len, size_t piece, uint8_t *tag)
{
	struct nzi_poly1305 p;

	nzi_poly1305_init(&p, key);
	for (size_t off = 0; off < len; off += piece)
		nzi_poly1305_update(&p, m + off, len - off < piece ? len - off : piece);
	nzi_poly1305_final(&p, tag);
}

int main(void)
{
	static const uint8_t rfc_key[32] = {
		0x85, 0xd6, 0xbe, 0x78, 0x57, 0x55, 0x6d, 0x33, 0x7f, 0x44, 0x52, 0xfe,
		0x42, 0xd5, 0x06, 0xa8, 0x01, 0x03, 0x80, 0x8a, 0xfb, 0x0d, 0xb2, 0xfd,
		0x4a, 0xbf, 0xf6, 0xaf, 0x41, 0x49, 0xf5, 0x1b,
	};
	static const char rfc_msg[] = "Cryptographic Forum Research Group";
	uint8_t key[32], m[2048], out[32], ff[64];
	char h[65];
	int bad = 0, n;

	tap_plan(5);
	nzi_blake2s(out, 32, NULL, 0, "abc", 3);
	hex(out, 32, h);
	tap_ok(!strcmp(h, b2s_abc), "BLAKE2s-256(\"abc\"), RFC 7693 appendix B (%s)", h);

	n = (int)(sizeof(b2s_vec) / sizeof(b2s_vec[0]));
	for (int s = 0; s < n; s++) {
		pattern(key, b2s_vec[s].kl, (unsigned int)s, 13, 7);
		pattern(m, b2s_vec[s].il, (unsigned int)s, 31, 17);
		nzi_blake2s(out, b2s_vec[s].ol, key, b2s_vec[s].kl, m, b2s_vec[s].il);
		hex(out, b2s_vec[s].ol, h);
		if (strcmp(h, b2s_vec[s].hex)) {
			tap_diag("BLAKE2s key %u bytes, input %u, out %u: %s, want %s", b2s_vec[s].kl,
				 b2s_vec[s].il, b2s_vec[s].ol, h, b2s_vec[s].hex);
			bad++;
		}
	}
	tap_ok(!bad, "keyed BLAKE2s: %d of %d digests as hashlib's (keys 0-32 bytes, inputs 0-1071)",
	       n - bad, n);

	poly(rfc_key, (const uint8_t *)rfc_msg, strlen(rfc_msg), 64, out);
	hex(out, 16, h);
	tap_ok(!strcmp(h, p1305_rfc), "Poly1305, RFC 8439 section 2.5.2 (%s)", h);

	bad = 0;
	n = (int)(sizeof(p1305_vec) / sizeof(p1305_vec[0]));
	for (int s = 0; s < n; s++) {
		pattern(key, 32, (unsigned int)s, 13, 7);
		pattern(m, p1305_vec[s].il, (unsigned int)s, 31, 17);
		for (size_t piece = 1; piece <= 17; piece++) {
			poly(key, m, p1305_vec[s].il, p1305_vec[s].il > 64 && piece < 16 ? 16 : piece, out);
			hex(out, 16, h);
			if (strcmp(h, p1305_vec[s].hex)) {
				tap_diag("Poly1305 of %u bytes in pieces of %zu: %s, want %s",
					 p1305_vec[s].il, piece, h, p1305_vec[s].hex);
				bad++;
				break;
			}
		}
	}
	memset(key, 0xff, sizeof(key));
	memset(ff, 0xff, sizeof(ff));
	poly(key, ff, sizeof(ff), 64, out);
	hex(out, 16, h);
	if (strcmp(h, p1305_ff)) {
		tap_diag("Poly1305, all 0xff: %s, want %s", h, p1305_ff);
		bad++;
	}
	tap_ok(!bad, "Poly1305: %d of %d tags as OpenSSL's (0-1072 bytes, fed in pieces of 1-17), and all-0xff key and input",
	       n + 1 - bad, n + 1);

	/* A changed byte anywhere changes the tag. */
	bad = 0;
	pattern(key, 32, 3, 13, 7);
	pattern(m, 1072, 3, 31, 17);
	poly(key, m, 1072, 1072, ff);
	for (size_t i = 0; i < 1072; i += 67) {
		m[i] ^= 0x40;
		poly(key, m, 1072, 1072, out);
		bad += !memcmp(out, ff, 16);
		m[i] ^= 0x40;
	}
	tap_ok(!bad, "Poly1305: one flipped bit, at 17 places of 1072 bytes: every tag differs");
	return tap_exit();
}
