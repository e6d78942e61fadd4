// SPDX-License-Identifier: GPL-2.0
/*
 * Host unit tests of the aggregation rail's codec (libnezha-user/agg_wire.c):
 * golden bytes (layouts from aggregation.rst; MACs from Python's hmac,
 * hashlib.blake2s and the cryptography package's Poly1305),
 * round trips of every packet, the rejection of every malformed field and
 * of every truncated length, the data MAC against any flipped bit, and
 * random bytes that never decode into a packet with a bad field.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg_wire.h"
#include "tap.h"

static const char golden_join[] =
	"4e5a41470203000001020304050607081cb56f29e56921880001000400080000"
	"101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f"
	"046a90a96b7b0e182b510a5e1436f65132fb764784e8e647a93a05737d0b19af";
static const char golden_data[] =
	"4e5a414702060000010203040005000201010000000000001122334455667788"
	"73e1882dc0da80bbdb8e15c6389c60770000803f000000c0";

static uint8_t key[NZA_KEY_LEN];

static size_t unhex(const char *s, uint8_t *out)
{
	size_t n = strlen(s) / 2;

	for (size_t i = 0; i < n; i++)
		sscanf(s + 2 * i, "%2hhx", &out[i]);
	return n;
}

static int bytes_are(const uint8_t *got, size_t len, const char *want)
{
	uint8_t w[NZA_PKT_MAX];
	size_t wl = unhex(want, w);

	if (wl != len || memcmp(got, w, len)) {
		for (size_t i = 0; i < len && i < wl; i++)
			if (got[i] != w[i]) {
				tap_diag("byte %zu: got %02x want %02x", i, got[i], w[i]);
				break;
			}
		if (wl != len)
			tap_diag("length %zu, want %zu", len, wl);
		return 0;
	}
	return 1;
}

static struct nza_join sample_join(void)
{
	struct nza_join j = { .job_id = 0x0102030405060708ull, .rank = 1, .nranks = 4,
			      .slots = 8 };

	nza_key_id(key, j.key_id);
	for (int i = 0; i < 16; i++) {
		j.cookie[i] = 0x10 + i;
		j.nonce[i] = 0x20 + i;
	}
	return j;
}

static void test_golden(void)
{
	static const char kid[] = "1cb56f29e5692188";
	uint8_t buf[NZA_PKT_MAX], id[NZA_KEY_ID_LEN], session[16];
	struct nza_join j = sample_join();
	struct nza_data d = { .type = NZA_DATA, .handle = 0x01020304, .rank = 5, .count = 2,
			      .dtype = NZA_F32, .op = NZA_OP_SUM, .seq = 0x1122334455667788ull };
	const float v[2] = { 1.0f, -2.0f };
	struct nza_data_key ctx;
	size_t len;

	nza_key_id(key, id);
	tap_ok(bytes_are(id, sizeof(id), kid), "key id = HMAC(key, label)[0..8)");
	nza_encode_join(buf, &j);
	nza_join_mac(key, buf, j.mac);
	len = nza_encode_join(buf, &j);
	tap_ok(bytes_are(buf, len, golden_join), "JOIN: golden bytes and MAC");

	for (int i = 0; i < 16; i++)
		session[i] = 0x40 + i;
	nza_data_key(key, 0x0102030405060708ull, session, &ctx);
	nza_to_wire(buf + NZA_DATA_HDR_LEN, v, 2, 4);
	d.payload = buf + NZA_DATA_HDR_LEN;
	len = nza_encode_data(buf, &d);
	nza_data_seal(&ctx, buf, len);
	tap_ok(bytes_are(buf, len, golden_data), "DATA: golden bytes, LE payload, Poly1305 MAC");
	tap_ok(nza_data_mac_ok(&ctx, buf, len), "DATA: its MAC checks");
}

static void test_round_trips(void)
{
	uint8_t buf[NZA_PKT_MAX];
	struct nza_hello h = { .nonce = { 1, 2, 3, 4, 5, 6, 7, 8 } }, h2;
	struct nza_challenge c = { .nonce = { 8, 7 }, .cookie = { 0 } }, c2;
	struct nza_join j = sample_join(), j2;
	struct nza_accept a = { .job_id = 7, .handle = 0x100, .rank = 3, .nranks = 4,
				.slots = 1024 }, a2;
	struct nza_refuse r = { .job_id = 9, .reason = NZA_R_NO_SLOTS, .rank = 2,
				.slots_free = 5 }, r2;
	struct nza_data d = { .type = NZA_RESULT, .handle = 0x201, .rank = NZA_RANK_ALL,
			      .count = 512, .dtype = NZA_BF16, .op = NZA_OP_MAX, .seq = 42 }, d2;
	int ok;

	memset(c.cookie, 0xcc, sizeof(c.cookie));
	memset(a.session, 0x5e, sizeof(a.session));
	memset(a.mac, 0xaa, sizeof(a.mac));
	memset(r.mac, 0xbb, sizeof(r.mac));
	ok = nza_encode_hello(buf, &h) == NZA_HELLO_LEN && !nza_decode_hello(buf, NZA_HELLO_LEN, &h2) &&
	     !memcmp(&h, &h2, sizeof(h));
	tap_ok(ok, "HELLO round trip");
	ok = nza_encode_challenge(buf, &c) == NZA_CHALLENGE_LEN &&
	     !nza_decode_challenge(buf, NZA_CHALLENGE_LEN, &c2) && !memcmp(&c, &c2, sizeof(c));
	tap_ok(ok, "CHALLENGE round trip");
	ok = nza_encode_join(buf, &j) == NZA_JOIN_LEN && !nza_decode_join(buf, NZA_JOIN_LEN, &j2) &&
	     j2.job_id == j.job_id && j2.rank == 1 && j2.nranks == 4 && j2.slots == 8 &&
	     !memcmp(j2.cookie, j.cookie, 16) && !memcmp(j2.nonce, j.nonce, 16) &&
	     !memcmp(j2.key_id, j.key_id, 8);
	tap_ok(ok, "JOIN round trip");
	ok = nza_encode_accept(buf, &a) == NZA_ACCEPT_LEN &&
	     !nza_decode_accept(buf, NZA_ACCEPT_LEN, &a2) && a2.job_id == 7 &&
	     a2.handle == 0x100 && a2.rank == 3 && a2.nranks == 4 && a2.slots == 1024 &&
	     !memcmp(a2.session, a.session, 16) && !memcmp(a2.mac, a.mac, 32);
	tap_ok(ok, "ACCEPT round trip");
	ok = nza_encode_refuse(buf, &r) == NZA_REFUSE_LEN &&
	     !nza_decode_refuse(buf, NZA_REFUSE_LEN, &r2) && r2.job_id == 9 &&
	     r2.reason == NZA_R_NO_SLOTS && r2.rank == 2 && r2.slots_free == 5 &&
	     !memcmp(r2.mac, r.mac, 32);
	tap_ok(ok, "REFUSE round trip");
	memset(buf + NZA_DATA_HDR_LEN, 0x3c, NZA_PAYLOAD);
	d.payload = buf + NZA_DATA_HDR_LEN;
	ok = nza_encode_data(buf, &d) == NZA_PKT_MAX && !nza_decode_data(buf, NZA_PKT_MAX, &d2) &&
	     d2.type == NZA_RESULT && d2.handle == 0x201 && d2.rank == NZA_RANK_ALL &&
	     d2.count == 512 && d2.dtype == NZA_BF16 && d2.op == NZA_OP_MAX && d2.seq == 42 &&
	     d2.payload == buf + NZA_DATA_HDR_LEN;
	tap_ok(ok, "RESULT round trip: 512 bf16 = 1 KiB, the largest packet (%d B)", NZA_PKT_MAX);
	d = (struct nza_data){ .type = NZA_LEAVE, .handle = 5, .rank = 255, .seq = 3 };
	ok = nza_encode_data(buf, &d) == NZA_LEAVE_LEN && !nza_decode_data(buf, NZA_LEAVE_LEN, &d2) &&
	     d2.type == NZA_LEAVE && d2.rank == 255 && !d2.count;
	tap_ok(ok, "LEAVE round trip");
}

/* A well-formed DATA of 4 f32 in buf; its length. */
static size_t good_data(uint8_t *buf, uint8_t type)
{
	struct nza_data d = { .type = type, .handle = 0x101, .count = 4, .dtype = NZA_F32,
			      .op = NZA_OP_SUM, .seq = 1, .rank = type == NZA_RESULT ? NZA_RANK_ALL : 0 };

	memset(buf + NZA_DATA_HDR_LEN, 0, 16);
	d.payload = buf + NZA_DATA_HDR_LEN;
	return nza_encode_data(buf, &d);
}

struct mutation {
	const char *what;
	size_t off;
	uint8_t val;
};

static int data_rejects(const struct mutation *m, uint8_t type)
{
	uint8_t buf[NZA_PKT_MAX];
	struct nza_data d;
	size_t len = good_data(buf, type);

	buf[m->off] = m->val;
	return nza_decode_data(buf, len, &d) != 0;
}

static void test_data_rejections(void)
{
	static const struct mutation m[] = {
		{ "magic", 0, 0x4f }, { "version 0", 4, 0 }, { "version 1", 4, 1 }, { "version 3", 4, 3 },
		{ "type 0", 5, 0 }, { "type 9", 5, 9 }, { "type HELLO", 5, NZA_HELLO },
		{ "flags", 7, 1 }, { "flags high", 6, 0x80 },
		{ "handle 0", 11, 0 }, /* handle 0x101 -> 0x100 is fine; below: 0 */
		{ "rank 256", 12, 1 }, { "count 0", 15, 0 }, { "count 3 != length", 15, 3 },
		{ "count 257", 14, 1 }, { "dtype 0", 16, 0 }, { "dtype 5", 16, 5 },
		{ "dtype f16: length", 16, NZA_F16 }, { "op 0", 17, 0 }, { "op 4", 17, 4 },
		{ "reserved 18", 18, 1 }, { "reserved 19", 19, 1 }, { "reserved 20", 20, 1 },
		{ "reserved 23", 23, 1 },
	};
	uint8_t buf[NZA_PKT_MAX + 1];
	struct nza_data d;
	bool all = true;
	size_t len;

	for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
		struct mutation x = m[i];

		if (!strcmp(x.what, "handle 0")) {
			len = good_data(buf, NZA_DATA);
			memset(buf + 8, 0, 4);
			if (!nza_decode_data(buf, len, &d)) {
				tap_diag("accepted: handle 0");
				all = false;
			}
			continue;
		}
		if (!data_rejects(&x, NZA_DATA)) {
			tap_diag("accepted: %s", x.what);
			all = false;
		}
	}
	tap_ok(all, "DATA: each of %zu malformed fields is refused", sizeof(m) / sizeof(m[0]));

	len = good_data(buf, NZA_RESULT);
	buf[13] = 0;
	tap_ok(nza_decode_data(buf, len, &d) == -EINVAL, "RESULT: a rank other than ALL is refused");
	len = good_data(buf, NZA_DATA);
	tap_ok(nza_decode_data(buf, len - 1, &d) == -EINVAL &&
	       nza_decode_data(buf, len + 1, &d) == -EINVAL, "DATA: one byte short or long is refused");
	tap_ok(nza_peek_type(buf, len) == NZA_DATA && (buf[4] = 1, nza_peek_type(buf, len)) ==
	       -EPROTONOSUPPORT, "another version is told apart (-EPROTONOSUPPORT)");
	len = good_data(buf, NZA_LEAVE);
	buf[16] = NZA_F32;
	tap_ok(nza_decode_data(buf, NZA_LEAVE_LEN, &d) == -EINVAL, "LEAVE: a dtype is refused");
}

static void test_ctrl_rejections(void)
{
	struct { const char *what; size_t off; uint16_t val; } jm[] = {
		{ "nranks 0", 26, 0 }, { "nranks 257", 26, 257 }, { "rank = nranks", 24, 4 },
		{ "slots 0", 28, 0 }, { "slots 1025", 28, 1025 }, { "reserved", 30, 1 },
	};
	uint8_t buf[NZA_PKT_MAX];
	struct nza_join j = sample_join(), j2;
	struct nza_accept a = { .job_id = 1, .handle = 1, .rank = 0, .nranks = 1, .slots = 1 }, a2;
	struct nza_refuse r = { .reason = NZA_R_NO_JOBS }, r2;
	struct nza_hello h = { { 0 } }, h2;
	bool all = true;

	for (size_t i = 0; i < sizeof(jm) / sizeof(jm[0]); i++) {
		nza_encode_join(buf, &j);
		buf[jm[i].off] = jm[i].val >> 8;
		buf[jm[i].off + 1] = jm[i].val;
		if (!nza_decode_join(buf, NZA_JOIN_LEN, &j2)) {
			tap_diag("JOIN accepted: %s", jm[i].what);
			all = false;
		}
	}
	tap_ok(all, "JOIN: rank, size, window and reserved fields out of range are refused");
	nza_encode_accept(buf, &a);
	buf[26] = 0x02;
	all = nza_decode_accept(buf, NZA_ACCEPT_LEN, &a2) == -EINVAL;
	nza_encode_accept(buf, &a);
	buf[19] = 0;
	all &= nza_decode_accept(buf, NZA_ACCEPT_LEN, &a2) == -EINVAL;
	tap_ok(all, "ACCEPT: another payload size or handle 0 is refused");
	nza_encode_refuse(buf, &r);
	buf[17] = 0;
	all = nza_decode_refuse(buf, NZA_REFUSE_LEN, &r2) == -EINVAL;
	buf[17] = NZA_R_LAST + 1;
	all &= nza_decode_refuse(buf, NZA_REFUSE_LEN, &r2) == -EINVAL;
	tap_ok(all, "REFUSE: unknown reasons are refused");
	nza_encode_hello(buf, &h);
	buf[40] = 1;
	tap_ok(nza_decode_hello(buf, NZA_HELLO_LEN, &h2) == -EINVAL,
	       "HELLO: padding must be zero (no amplification, no covert bytes)");
}

static void test_truncation(void)
{
	union { struct nza_hello h; struct nza_challenge c; struct nza_join j;
		struct nza_accept a; struct nza_refuse r; struct nza_data d; } u;
	uint8_t buf[NZA_PKT_MAX];
	struct nza_join j = sample_join();
	struct nza_accept a = { .handle = 1, .nranks = 1, .slots = 1 };
	struct nza_refuse r = { .reason = 1 };
	struct nza_challenge c;
	struct nza_hello h;
	bool all = true;
	size_t full[6];

	memset(&c, 0, sizeof(c));
	memset(&h, 0, sizeof(h));
	full[0] = nza_encode_hello(buf, &h);
	full[1] = nza_encode_challenge(buf, &c);
	full[2] = nza_encode_join(buf, &j);
	full[3] = nza_encode_accept(buf, &a);
	full[4] = nza_encode_refuse(buf, &r);
	full[5] = good_data(buf, NZA_DATA);
	for (int k = 0; k < 6; k++) {
		for (size_t len = 0; len < full[k]; len++) {
			int ret;

			switch (k) {
			case 0: nza_encode_hello(buf, &h); ret = nza_decode_hello(buf, len, &u.h); break;
			case 1: nza_encode_challenge(buf, &c); ret = nza_decode_challenge(buf, len, &u.c); break;
			case 2: nza_encode_join(buf, &j); ret = nza_decode_join(buf, len, &u.j); break;
			case 3: nza_encode_accept(buf, &a); ret = nza_decode_accept(buf, len, &u.a); break;
			case 4: nza_encode_refuse(buf, &r); ret = nza_decode_refuse(buf, len, &u.r); break;
			default: good_data(buf, NZA_DATA); ret = nza_decode_data(buf, len, &u.d); break;
			}
			if (!ret) {
				tap_diag("type %d decoded from %zu of %zu bytes", k, len, full[k]);
				all = false;
			}
		}
	}
	tap_ok(all, "every packet cut short, at any length, is refused");
}

static void test_mac(void)
{
	uint8_t buf[NZA_PKT_MAX], other[NZA_KEY_LEN], session[16] = { 1 };
	struct nza_data_key ctx, ctx2, ctx3;
	bool all = true;
	size_t len = good_data(buf, NZA_DATA);

	memset(other, 0x55, sizeof(other));
	nza_data_key(key, 1, session, &ctx);
	nza_data_key(other, 1, session, &ctx2);
	nza_data_key(key, 2, session, &ctx3);
	nza_data_seal(&ctx, buf, len);
	for (size_t bit = 0; bit < len * 8; bit++) {
		buf[bit / 8] ^= 1 << (bit % 8);
		if (nza_data_mac_ok(&ctx, buf, len)) {
			tap_diag("bit %zu flipped: MAC still good", bit);
			all = false;
		}
		buf[bit / 8] ^= 1 << (bit % 8);
	}
	tap_ok(all && nza_data_mac_ok(&ctx, buf, len), "data MAC: any of the %zu bits flipped fails it",
	       len * 8);
	tap_ok(!nza_data_mac_ok(&ctx2, buf, len) && !nza_data_mac_ok(&ctx3, buf, len),
	       "data MAC: another key, or another job under the key, fails it");
	buf[5] = NZA_RESULT;
	buf[12] = buf[13] = 0xff;
	tap_ok(!nza_data_mac_ok(&ctx, buf, len), "a DATA's MAC does not stand for a RESULT");
}

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

/* Random bytes, half of them behind a valid common header: a decode that
 * succeeds must give fields within their ranges. */
static void test_random(void)
{
	uint8_t buf[NZA_PKT_MAX + 8];
	unsigned long decoded = 0, bad = 0;

	for (int i = 0; i < 200000; i++) {
		size_t len = rnd() % sizeof(buf);
		struct nza_data d;
		struct nza_join j;

		for (size_t k = 0; k < len; k++)
			buf[k] = rnd();
		if (i & 1 && len >= 8) {
			uint8_t type = 1 + rnd() % NZA_TYPE_LAST;

			memcpy(buf, "NZAG\x02", 5);
			buf[5] = type;
			buf[6] = buf[7] = 0;
			if (type >= NZA_DATA && len >= NZA_DATA_HDR_LEN) {
				memset(buf + 18, 0, 6);
				buf[16] = 1 + rnd() % 4;
				buf[17] = 1 + rnd() % 3;
				buf[12] = type == NZA_RESULT ? 0xff : 0;
				buf[13] = type == NZA_RESULT ? 0xff : buf[13];
				buf[14] = 0;
				len = NZA_DATA_HDR_LEN + buf[15] * nza_dtype_size(buf[16]);
				if (type == NZA_LEAVE)
					len = NZA_LEAVE_LEN, buf[15] = buf[16] = buf[17] = 0;
			}
		}
		if (!nza_decode_data(buf, len, &d)) {
			decoded++;
			if (d.type != NZA_LEAVE &&
			    (d.count > nza_dtype_elems(d.dtype) ||
			     len != NZA_DATA_HDR_LEN + d.count * nza_dtype_size(d.dtype)))
				bad++;
		}
		if (!nza_decode_join(buf, len, &j) && (j.rank >= j.nranks || j.slots > NZA_MAX_WINDOW))
			bad++;
	}
	tap_ok(!bad && decoded > 1000, "200000 random packets: %lu decoded, none out of range",
	       decoded);
}

int main(void)
{
	for (int i = 0; i < NZA_KEY_LEN; i++)
		key[i] = i;
	tap_plan(25);
	test_golden();
	test_round_trips();
	test_data_rejections();
	test_ctrl_rejections();
	test_truncation();
	test_mac();
	test_random();
	return tap_exit();
}
