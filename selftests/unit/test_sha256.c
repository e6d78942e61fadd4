// SPDX-License-Identifier: GPL-2.0
/*
 * Host unit tests of libnezha's own SHA-256 and HMAC-SHA256 (sha256.c),
 * which authenticate the rendezvous and derive every job's secret: the
 * examples of FIPS 180-2 (appendix B) and the test cases of RFC 4231, the
 * padding boundaries (55, 56, 63, 64, 65, 119, 120, 128 bytes, digests
 * from Python's hashlib), and the same digest whatever the update sizes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sha256.h"
#include "tap.h"

static void hex(const uint8_t *p, size_t len, char *out)
{
	for (size_t i = 0; i < len; i++)
		sprintf(out + 2 * i, "%02x", p[i]);
}

static int digest_is(const uint8_t *d, size_t len, const char *want)
{
	char got[2 * NZI_SHA256_LEN + 1];

	hex(d, len, got);
	if (strcmp(got, want)) {
		tap_diag("got  %s", got);
		tap_diag("want %s", want);
		return 0;
	}
	return 1;
}

static void test_fips(void)
{
	static const struct { const char *msg, *want; } t[] = {
		{ "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" },
		{ "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" },
		{ "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
		  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1" },
		{ "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
		  "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1" },
	};
	uint8_t d[NZI_SHA256_LEN];
	struct nzi_sha256 c;
	char block[1000];

	for (unsigned int i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		nzi_sha256(t[i].msg, strlen(t[i].msg), d);
		tap_ok(digest_is(d, sizeof(d), t[i].want), "SHA-256 of the %zu-byte FIPS 180 example",
		       strlen(t[i].msg));
	}
	/* One million 'a', in updates of 1000. */
	memset(block, 'a', sizeof(block));
	nzi_sha256_init(&c);
	for (int i = 0; i < 1000; i++)
		nzi_sha256_update(&c, block, sizeof(block));
	nzi_sha256_final(&c, d);
	tap_ok(digest_is(d, sizeof(d), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"),
	       "SHA-256 of one million 'a'");
}

static void test_padding(void)
{
	static const struct { size_t n; const char *want; } t[] = {
		{ 55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318" },
		{ 56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a" },
		{ 63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34" },
		{ 64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb" },
		{ 65, "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0" },
		{ 119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb" },
		{ 120, "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c" },
		{ 128, "6836cf13bac400e9105071cd6af47084dfacad4e5e302c94bfed24e013afb73e" },
	};
	uint8_t msg[300], d[NZI_SHA256_LEN], d2[NZI_SHA256_LEN];
	int bad = 0;

	memset(msg, 'a', sizeof(msg));
	for (unsigned int i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		nzi_sha256(msg, t[i].n, d);
		if (!digest_is(d, sizeof(d), t[i].want)) {
			tap_diag("%zu bytes of 'a'", t[i].n);
			bad++;
		}
	}
	tap_ok(!bad, "SHA-256 across the padding boundaries (55..128 bytes)");

	/* Any split into updates gives the one-shot digest. */
	for (size_t i = 0; i < sizeof(msg); i++)
		msg[i] = (uint8_t)(i * 7 + 3);
	bad = 0;
	for (size_t len = 0; len <= sizeof(msg); len += 13) {
		nzi_sha256(msg, len, d);
		for (size_t step = 1; step <= 70; step += 23) {
			struct nzi_sha256 c;

			nzi_sha256_init(&c);
			for (size_t off = 0; off < len; off += step)
				nzi_sha256_update(&c, msg + off, off + step > len ? len - off : step);
			nzi_sha256_final(&c, d2);
			bad += memcmp(d, d2, sizeof(d)) != 0;
		}
	}
	tap_ok(!bad, "SHA-256: updates of 1, 24, 47 and 70 bytes give the one-shot digest");
}

static void test_rfc4231(void)
{
	static const char big[] = "This is a test using a larger than block-size key and a larger than block-size data. The key needs to be hashed before being used by the HMAC algorithm.";
	uint8_t k0b[20], kaa[131], k19[25], k0c[20], dd[50], cd[50], d[NZI_SHA256_LEN];
	struct nzi_hmac m;

	memset(k0b, 0x0b, sizeof(k0b));
	memset(kaa, 0xaa, sizeof(kaa));
	memset(k0c, 0x0c, sizeof(k0c));
	memset(dd, 0xdd, sizeof(dd));
	memset(cd, 0xcd, sizeof(cd));
	for (int i = 0; i < 25; i++)
		k19[i] = (uint8_t)(i + 1);

	nzi_hmac_sha256(k0b, 20, "Hi There", 8, d);
	tap_ok(digest_is(d, 32, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
	       "HMAC-SHA256: RFC 4231 test case 1");
	nzi_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, d);
	tap_ok(digest_is(d, 32, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
	       "HMAC-SHA256: RFC 4231 test case 2 (a key shorter than the digest)");
	nzi_hmac_sha256(kaa, 20, dd, 50, d);
	tap_ok(digest_is(d, 32, "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"),
	       "HMAC-SHA256: RFC 4231 test case 3");
	nzi_hmac_sha256(k19, 25, cd, 50, d);
	tap_ok(digest_is(d, 32, "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"),
	       "HMAC-SHA256: RFC 4231 test case 4");
	nzi_hmac_sha256(k0c, 20, "Test With Truncation", 20, d);
	tap_ok(digest_is(d, 16, "a3b6167473100ee06e0c796c2955552b"),
	       "HMAC-SHA256: RFC 4231 test case 5 (truncated to 128 bits)");
	nzi_hmac_sha256(kaa, 131, "Test Using Larger Than Block-Size Key - Hash Key First", 54, d);
	tap_ok(digest_is(d, 32, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"),
	       "HMAC-SHA256: RFC 4231 test case 6 (a key longer than a block)");
	/* Case 7 in three updates. */
	nzi_hmac_init(&m, kaa, 131);
	nzi_hmac_update(&m, big, 10);
	nzi_hmac_update(&m, big + 10, 70);
	nzi_hmac_update(&m, big + 80, strlen(big) - 80);
	nzi_hmac_final(&m, d);
	tap_ok(digest_is(d, 32, "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"),
	       "HMAC-SHA256: RFC 4231 test case 7 (long key and data, in three updates)");
}

static void test_equal(void)
{
	uint8_t a[32], b[32];

	memset(a, 0x11, sizeof(a));
	memcpy(b, a, sizeof(b));
	tap_ok(nzi_mac_equal(a, b, 32), "nzi_mac_equal: equal MACs");
	b[31] ^= 1;
	tap_ok(!nzi_mac_equal(a, b, 32), "nzi_mac_equal: the last bit differs");
	b[31] ^= 1;
	b[0] ^= 0x80;
	tap_ok(!nzi_mac_equal(a, b, 32), "nzi_mac_equal: the first bit differs");
}

int main(void)
{
	test_fips();
	test_padding();
	test_rfc4231();
	test_equal();
	tap_plan(tap_n);
	return tap_exit();
}
