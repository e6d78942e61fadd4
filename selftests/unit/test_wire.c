// SPDX-License-Identifier: GPL-2.0
/*
 * Host unit tests for kmod/wire.c: layout, round trips, every validation
 * rule, the chunking rule and the MAC inputs.  Prints TAP; exits 0 iff all
 * tests pass.
 *
 * Build from the top directory with this file and kmod/wire.c:
 *   cc -std=gnu11 -Wall -Wextra -Werror -Ikmod <this file> kmod/wire.c
 */
#include <stdio.h>
#include <stdlib.h>

#include "wire.h"

#define CHECK(cond) do {						\
	if (!(cond)) {							\
		printf("#   %s:%d: CHECK(%s) failed\n",			\
		       __FILE__, __LINE__, #cond);			\
		return false;						\
	}								\
} while (0)

#define CHECK_EQ(got, want) do {					\
	unsigned long long __g = (unsigned long long)(got);		\
	unsigned long long __w = (unsigned long long)(want);		\
	if (__g != __w) {						\
		printf("#   %s:%d: %s = %lld (%#llx), want %s = %lld (%#llx)\n",\
		       __FILE__, __LINE__, #got, (long long)__g, __g,	\
		       #want, (long long)__w, __w);			\
		return false;						\
	}								\
} while (0)

#define KIB	1024ULL
#define MIB	(1024ULL * KIB)

static const struct nz_wire_limits lim = {
	.max_msg	= 1ULL << 40,
	.max_payload	= 16 * MIB,
};

static const struct nz_wire_limits lim_huge = {
	.max_msg	= U64_MAX,
	.max_payload	= U32_MAX,
};

static u8 buf[NZ_WIRE_HDR_LEN + NZ_WIRE_HELLO_LEN + 64];

static void fill(u8 *p, size_t n, u8 first)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = first + i;
}

/* A valid frame of @type with distinctive field values. */
static bool nz_all_zero_test(const u8 *p, size_t n)
{
	while (n--)
		if (*p++)
			return false;
	return true;
}

static void mk(struct nz_frame *f, enum nz_frame_type type)
{
	nz_frame_init(f, type);
	switch (type) {
	case NZ_FRAME_CHALLENGE:
		fill(f->challenge.nonce_s, NZ_WIRE_NONCE_LEN, 0xb0);
		break;
	case NZ_FRAME_HELLO:
		f->hello.incarnation = 0xe1e2e3e4e5e6e7e8ULL;
		f->hello.job_id = 0xa1a2a3a4a5a6a7a8ULL;
		f->hello.src_rank = 3;
		f->hello.dst_rank = 7;
		f->hello.rail = 1;
		f->hello.nrails = 2;
		f->hello.unit = 64 * KIB;
		fill(f->hello.nonce_c, NZ_WIRE_NONCE_LEN, 0xc0);
		fill(f->hello.mac, NZ_WIRE_MAC_LEN, 0xd0);
		break;
	case NZ_FRAME_WELCOME:
		fill(f->welcome.mac, NZ_WIRE_MAC_LEN, 0x30);
		f->welcome.incarnation = 0xf1f2f3f4f5f6f7f8ULL;
		break;
	case NZ_FRAME_DATA:
		f->data.msg_id = 0x0102030405060708ULL;
		f->data.tag = 0x1112131415161718ULL;
		f->data.tag_seq = 0x2122232425262728ULL;
		f->data.total = 0x10000;
		f->data.offset = 0x8000;
		f->len = 0x1000;
		break;
	case NZ_FRAME_ACK:
		f->ack.msg_id = 0x0102030405060708ULL;
		f->ack.offset = 0x8000;
		f->ack.len = 0x1000;
		break;
	case NZ_FRAME_HEARTBEAT:
	case NZ_FRAME_HEARTBEAT_ACK:
		f->hb.ts_ns = 0x1716151413121110ULL;
		f->hb.seq = 0x2726252423222120ULL;
		break;
	case NZ_FRAME_CLOSE:
		f->close.reason = NZ_CLOSE_AUTH;
		break;
	case NZ_FRAME_ABORT:
		f->abort.tag = 0x1112131415161718ULL;
		f->abort.tag_seq = 0x2122232425262728ULL;
		f->abort.msg_id = 0x0102030405060708ULL;
		f->abort.reason = 110;
		break;
	case NZ_FRAME_REFUSE:
		f->abort.reason = 105;
		f->abort.msg_id = 0x0102030405060708ULL;
		break;
	case NZ_FRAME_ABORT_ACK:
		f->abort.msg_id = 0x0102030405060708ULL;
		break;
	case NZ_FRAME_DONE:
		f->done.base = 0x0102030405060708ULL;
		f->done.mask = 0xf1f2f3f4f5f6f7f8ULL;
		f->done.floor = 0x0101010101010101ULL;
		break;
	default:
		break;
	}
}

static bool same_frame(const struct nz_frame *a, const struct nz_frame *b)
{
	if (a->type != b->type || a->len != b->len)
		return false;
	switch (a->type) {
	case NZ_FRAME_CHALLENGE:
		return !memcmp(&a->challenge, &b->challenge,
			       sizeof(a->challenge));
	case NZ_FRAME_HELLO:
		return a->hello.incarnation == b->hello.incarnation &&
		       a->hello.job_id == b->hello.job_id &&
		       a->hello.src_rank == b->hello.src_rank &&
		       a->hello.dst_rank == b->hello.dst_rank &&
		       a->hello.rail == b->hello.rail &&
		       a->hello.nrails == b->hello.nrails &&
		       a->hello.unit == b->hello.unit &&
		       !memcmp(a->hello.nonce_c, b->hello.nonce_c,
			       NZ_WIRE_NONCE_LEN) &&
		       !memcmp(a->hello.mac, b->hello.mac, NZ_WIRE_MAC_LEN);
	case NZ_FRAME_WELCOME:
		return !memcmp(a->welcome.mac, b->welcome.mac, NZ_WIRE_MAC_LEN) &&
		       a->welcome.incarnation == b->welcome.incarnation;
	case NZ_FRAME_DATA:
		return a->data.msg_id == b->data.msg_id &&
		       a->data.tag == b->data.tag &&
		       a->data.tag_seq == b->data.tag_seq &&
		       a->data.total == b->data.total &&
		       a->data.offset == b->data.offset;
	case NZ_FRAME_ACK:
		return a->ack.msg_id == b->ack.msg_id &&
		       a->ack.offset == b->ack.offset &&
		       a->ack.len == b->ack.len;
	case NZ_FRAME_HEARTBEAT:
	case NZ_FRAME_HEARTBEAT_ACK:
		return a->hb.ts_ns == b->hb.ts_ns && a->hb.seq == b->hb.seq;
	case NZ_FRAME_CLOSE:
		return a->close.reason == b->close.reason;
	case NZ_FRAME_ABORT:
	case NZ_FRAME_ABORT_ACK:
	case NZ_FRAME_REFUSE:
		return a->abort.msg_id == b->abort.msg_id &&
		       a->abort.tag == b->abort.tag &&
		       a->abort.tag_seq == b->abort.tag_seq &&
		       a->abort.reason == b->abort.reason;
	case NZ_FRAME_DONE:
		return a->done.base == b->done.base &&
		       a->done.mask == b->done.mask &&
		       a->done.floor == b->done.floor;
	}
	return false;
}

/*
 * Encode @f, decode it back (header alone, then as a whole frame) and
 * encode the result again: same fields, same bytes.
 */
static bool roundtrip(const struct nz_frame *f,
		      const struct nz_wire_limits *l)
{
	u8 again[sizeof(buf)];
	struct nz_frame g;
	int n, m;

	memset(buf, 0xee, sizeof(buf));
	n = nz_wire_encode(f, l, buf, sizeof(buf));
	CHECK_EQ(n, NZ_WIRE_HDR_LEN +
		 (f->type == NZ_FRAME_HELLO ? NZ_WIRE_HELLO_LEN : 0));
	CHECK_EQ(buf[n], 0xee);		/* wrote no more than it said */

	CHECK_EQ(nz_wire_decode_hdr(buf, l, &g), 0);
	CHECK_EQ(g.type, f->type);
	CHECK_EQ(g.len, f->len);
	CHECK_EQ(nz_wire_decode_body(&g, buf + NZ_WIRE_HDR_LEN), 0);
	CHECK(same_frame(f, &g));

	if (f->type != NZ_FRAME_DATA || !f->len) {
		CHECK_EQ(nz_wire_decode(buf, n, l, &g), 0);
		CHECK(same_frame(f, &g));
	}
	m = nz_wire_encode(&g, l, again, sizeof(again));
	CHECK_EQ(m, n);
	CHECK(!memcmp(buf, again, n));
	return true;
}

/* Encode a valid @type, patch it with @patch, expect decode to fail. */
static int decode_patched(const struct nz_frame *f, unsigned int at,
			  const u8 *patch, size_t n)
{
	struct nz_frame g;
	u8 b[NZ_WIRE_HDR_LEN];

	if (nz_wire_encode(f, &lim, buf, sizeof(buf)) < 0)
		return 1;
	memcpy(b, buf, sizeof(b));
	memcpy(b + at, patch, n);
	return nz_wire_decode_hdr(b, &lim, &g);
}

/* Header bytes [from, 48) of @type are reserved: each must be zero. */
static bool reserved_rejected(enum nz_frame_type type, unsigned int from)
{
	static const u8 vals[] = { 0x01, 0x80, 0xff };
	struct nz_frame f, g;
	unsigned int i, v;

	mk(&f, type);
	CHECK_EQ(nz_wire_encode(&f, &lim, buf, sizeof(buf)) > 0, 1);
	CHECK_EQ(nz_wire_decode_hdr(buf, &lim, &g), 0);
	for (i = from; i < NZ_WIRE_HDR_LEN; i++) {
		for (v = 0; v < ARRAY_SIZE(vals); v++) {
			if (decode_patched(&f, i, &vals[v], 1) != -EPROTO) {
				printf("#   type %u byte %u = %#x accepted\n",
				       type, i, vals[v]);
				return false;
			}
		}
	}
	/* The last used byte is not reserved: changing it is accepted. */
	if (from > 8) {
		u8 b[NZ_WIRE_HDR_LEN];

		memcpy(b, buf, sizeof(b));
		b[from - 1] ^= 0x01;
		CHECK_EQ(nz_wire_decode_hdr(b, &lim, &g), 0);
	}
	return true;
}

/* A frame of @type with header len @len is rejected. */
static bool len_rejected(enum nz_frame_type type)
{
	static const u32 lens[] = { 1, 8, NZ_WIRE_HELLO_LEN, U32_MAX };
	struct nz_frame f;
	unsigned int i;
	u8 be[4];

	mk(&f, type);
	for (i = 0; i < ARRAY_SIZE(lens); i++) {
		put_unaligned_be32(lens[i], be);
		CHECK_EQ(decode_patched(&f, 4, be, 4), -EPROTO);
	}
	/* The sender refuses to build it too. */
	f.len = 1;
	CHECK_EQ(nz_wire_encode(&f, &lim, buf, sizeof(buf)), -EPROTO);
	return true;
}

/* @f (invalid) is refused by check, encode and decode with @err. */
static bool rejected(const struct nz_frame *f,
		     const struct nz_wire_limits *l, int err)
{
	struct nz_frame g;
	u8 b[sizeof(buf)];
	int n;

	CHECK_EQ(nz_wire_check(f, l), err);
	CHECK_EQ(nz_wire_encode(f, l, b, sizeof(b)), err);

	/* Build the bytes by hand: encode with relaxed limits, then patch. */
	memset(b, 0, sizeof(b));
	put_unaligned_be16(NZ_WIRE_MAGIC, b);
	b[2] = NZ_WIRE_VERSION;
	b[3] = f->type;
	put_unaligned_be32(f->len, b + 4);
	switch (f->type) {
	case NZ_FRAME_DATA:
		put_unaligned_be64(f->data.msg_id, b + 8);
		put_unaligned_be64(f->data.tag, b + 16);
		put_unaligned_be64(f->data.tag_seq, b + 24);
		put_unaligned_be64(f->data.total, b + 32);
		put_unaligned_be64(f->data.offset, b + 40);
		break;
	case NZ_FRAME_ACK:
		put_unaligned_be64(f->ack.msg_id, b + 8);
		put_unaligned_be64(f->ack.offset, b + 16);
		put_unaligned_be32(f->ack.len, b + 24);
		break;
	case NZ_FRAME_HELLO:
		put_unaligned_be64(f->hello.incarnation, b + 8);
		put_unaligned_be64(f->hello.job_id, b + 48);
		put_unaligned_be32(f->hello.src_rank, b + 56);
		put_unaligned_be32(f->hello.dst_rank, b + 60);
		put_unaligned_be16(f->hello.rail, b + 64);
		put_unaligned_be16(f->hello.nrails, b + 66);
		put_unaligned_be32(f->hello.unit, b + 68);
		break;
	default:
		return false;
	}
	n = NZ_WIRE_HDR_LEN + (f->type == NZ_FRAME_HELLO ? f->len : 0);
	if (f->type == NZ_FRAME_HELLO) {
		/* The header is fine; the body is not. */
		CHECK_EQ(nz_wire_decode_hdr(b, l, &g), 0);
		CHECK_EQ(nz_wire_decode_body(&g, b + NZ_WIRE_HDR_LEN), err);
		CHECK_EQ(nz_wire_decode(b, n, l, &g), err);
	} else {
		CHECK_EQ(nz_wire_decode_hdr(b, l, &g), err);
	}
	return true;
}

static void mk_data(struct nz_frame *f, u64 id, u64 total, u64 off, u32 len)
{
	nz_frame_init(f, NZ_FRAME_DATA);
	f->data.msg_id = id;
	f->data.total = total;
	f->data.offset = off;
	f->len = len;
}

static void mk_ack(struct nz_frame *f, u64 id, u64 off, u32 len)
{
	nz_frame_init(f, NZ_FRAME_ACK);
	f->ack.msg_id = id;
	f->ack.offset = off;
	f->ack.len = len;
}

/* ---- layout ---------------------------------------------------------- */

static bool t_header_constants(void)
{
	CHECK_EQ(NZ_WIRE_HDR_LEN, 48);
	CHECK_EQ(NZ_WIRE_HDR_LEN % 8, 0);
	CHECK_EQ(NZ_WIRE_HELLO_LEN, 72);
	CHECK_EQ(NZ_WIRE_HELLO_MAC_LEN, 72);
	CHECK_EQ(NZ_WIRE_WELCOME_MAC_LEN, 66);
	CHECK_EQ(NZ_WIRE_UNIT_MIN, 4096);
	CHECK_EQ(NZ_WIRE_UNIT_MAX, 4 * MIB);
	return true;
}

static bool t_golden_data(void)
{
	static const u8 want[NZ_WIRE_HDR_LEN] = {
		0x4e, 0x5a, 0x05, 0x04, 0x00, 0x00, 0x10, 0x00,
		0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
		0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18,
		0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x00,
	};
	struct nz_frame f;

	mk(&f, NZ_FRAME_DATA);
	CHECK_EQ(nz_wire_encode(&f, &lim, buf, sizeof(buf)), NZ_WIRE_HDR_LEN);
	CHECK(!memcmp(buf, want, sizeof(want)));
	return true;
}

static bool t_golden_hello(void)
{
	u8 want[NZ_WIRE_HDR_LEN + NZ_WIRE_HELLO_LEN] = {
		0x4e, 0x5a, 0x05, 0x02, 0x00, 0x00, 0x00, 0x48,
		0xe1, 0xe2, 0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8,	/* incarnation */
	};
	static const u8 ids[24] = {
		0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8,	/* job */
		0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x07,	/* ranks */
		0x00, 0x01, 0x00, 0x02, 0x00, 0x01, 0x00, 0x00,	/* rail.. */
	};
	struct nz_frame f;

	memcpy(want + 48, ids, sizeof(ids));
	fill(want + 72, 16, 0xc0);
	fill(want + 88, 32, 0xd0);
	mk(&f, NZ_FRAME_HELLO);
	CHECK_EQ(nz_wire_encode(&f, &lim, buf, sizeof(buf)), sizeof(want));
	CHECK(!memcmp(buf, want, sizeof(want)));
	return true;
}

static bool t_golden_small_frames(void)
{
	struct nz_frame f;

	mk(&f, NZ_FRAME_ACK);
	CHECK_EQ(nz_wire_encode(&f, &lim, buf, sizeof(buf)), 48);
	CHECK_EQ(buf[3], NZ_FRAME_ACK);
	CHECK_EQ(get_unaligned_be64(buf + 8), 0x0102030405060708ULL);
	CHECK_EQ(get_unaligned_be64(buf + 16), 0x8000);
	CHECK_EQ(get_unaligned_be32(buf + 24), 0x1000);

	mk(&f, NZ_FRAME_HEARTBEAT_ACK);
	CHECK_EQ(nz_wire_encode(&f, &lim, buf, sizeof(buf)), 48);
	CHECK_EQ(buf[3], 7);
	CHECK_EQ(get_unaligned_be64(buf + 8), 0x1716151413121110ULL);
	CHECK_EQ(get_unaligned_be64(buf + 16), 0x2726252423222120ULL);

	mk(&f, NZ_FRAME_CLOSE);
	CHECK_EQ(nz_wire_encode(&f, &lim, buf, sizeof(buf)), 48);
	CHECK_EQ(buf[3], 8);
	CHECK_EQ(get_unaligned_be32(buf + 8), NZ_CLOSE_AUTH);

	mk(&f, NZ_FRAME_CHALLENGE);
	CHECK_EQ(nz_wire_encode(&f, &lim, buf, sizeof(buf)), 48);
	CHECK_EQ(buf[3], 1);
	CHECK_EQ(buf[8], 0xb0);
	CHECK_EQ(buf[23], 0xbf);
	CHECK_EQ(buf[24], 0);

	mk(&f, NZ_FRAME_WELCOME);
	CHECK_EQ(nz_wire_encode(&f, &lim, buf, sizeof(buf)), 48);
	CHECK_EQ(buf[3], 3);
	CHECK_EQ(buf[8], 0x30);
	CHECK_EQ(buf[39], 0x4f);
	CHECK_EQ(get_unaligned_be64(buf + 40), 0xf1f2f3f4f5f6f7f8ULL);
	return true;
}

/* Version 2's frames: a message withdrawn, its answer, a refusal. */
static bool t_golden_abort_frames(void)
{
	struct nz_frame f;

	mk(&f, NZ_FRAME_ABORT);
	CHECK_EQ(nz_wire_encode(&f, &lim, buf, sizeof(buf)), 48);
	CHECK_EQ(buf[2], NZ_WIRE_VERSION);
	CHECK_EQ(buf[3], 9);
	CHECK_EQ(get_unaligned_be64(buf + 8), 0x0102030405060708ULL);
	CHECK_EQ(get_unaligned_be64(buf + 16), 0x1112131415161718ULL);
	CHECK_EQ(get_unaligned_be64(buf + 24), 0x2122232425262728ULL);
	CHECK_EQ(get_unaligned_be32(buf + 32), 110);
	CHECK(nz_all_zero_test(buf + 36, 12));

	mk(&f, NZ_FRAME_ABORT_ACK);
	CHECK_EQ(nz_wire_encode(&f, &lim, buf, sizeof(buf)), 48);
	CHECK_EQ(buf[3], 10);
	CHECK_EQ(get_unaligned_be64(buf + 8), 0x0102030405060708ULL);
	CHECK(nz_all_zero_test(buf + 16, 32));

	mk(&f, NZ_FRAME_REFUSE);
	CHECK_EQ(nz_wire_encode(&f, &lim, buf, sizeof(buf)), 48);
	CHECK_EQ(buf[3], 11);
	CHECK_EQ(get_unaligned_be64(buf + 8), 0x0102030405060708ULL);
	CHECK_EQ(get_unaligned_be32(buf + 16), 105);
	CHECK(nz_all_zero_test(buf + 20, 28));
	return true;
}

static bool t_roundtrip_abort_frames(void)
{
	struct nz_frame f;

	mk(&f, NZ_FRAME_ABORT);
	CHECK(roundtrip(&f, &lim));
	mk(&f, NZ_FRAME_ABORT_ACK);
	CHECK(roundtrip(&f, &lim));
	mk(&f, NZ_FRAME_REFUSE);
	CHECK(roundtrip(&f, &lim));
	return true;
}

/* Version 4's frame (its floor: version 5): what a leaving receiver has. */
static bool t_golden_done_frame(void)
{
	struct nz_frame f;

	mk(&f, NZ_FRAME_DONE);
	CHECK_EQ(nz_wire_encode(&f, &lim, buf, sizeof(buf)), 48);
	CHECK_EQ(buf[2], 5);
	CHECK_EQ(buf[3], 12);
	CHECK_EQ(get_unaligned_be64(buf + 8), 0x0102030405060708ULL);
	CHECK_EQ(get_unaligned_be64(buf + 16), 0xf1f2f3f4f5f6f7f8ULL);
	CHECK_EQ(get_unaligned_be64(buf + 24), 0x0101010101010101ULL);
	CHECK(nz_all_zero_test(buf + 32, 16));
	CHECK(roundtrip(&f, &lim));
	f.done.base = 1;
	f.done.mask = 0;
	f.done.floor = 1;
	CHECK(roundtrip(&f, &lim));
	return true;
}

/* Base and floor 0 name no message; no body; reserved bytes zero. */
static bool t_reject_done_frame(void)
{
	static const u8 zero8[8];
	struct nz_frame f;

	mk(&f, NZ_FRAME_DONE);
	CHECK_EQ(decode_patched(&f, 8, zero8, 8), -EPROTO);
	CHECK_EQ(decode_patched(&f, 24, zero8, 8), -EPROTO);
	CHECK(len_rejected(NZ_FRAME_DONE));
	CHECK(reserved_rejected(NZ_FRAME_DONE, 32));
	f.done.base = 0;
	CHECK_EQ(nz_wire_encode(&f, &lim, buf, sizeof(buf)), -EPROTO);
	mk(&f, NZ_FRAME_DONE);
	f.done.floor = 0;
	CHECK_EQ(nz_wire_encode(&f, &lim, buf, sizeof(buf)), -EPROTO);
	return true;
}

/* No message 0, no errno 0 or past 4095, no body, reserved bytes zero. */
static bool t_reject_abort_frames(void)
{
	static const enum nz_frame_type types[] = {
		NZ_FRAME_ABORT, NZ_FRAME_ABORT_ACK, NZ_FRAME_REFUSE,
	};
	static const u8 zero8[8];
	u8 be[4];
	struct nz_frame f;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(types); i++) {
		mk(&f, types[i]);
		CHECK_EQ(decode_patched(&f, 8, zero8, 8), -EPROTO);
		CHECK(len_rejected(types[i]));
	}
	CHECK(reserved_rejected(NZ_FRAME_ABORT, 36));
	CHECK(reserved_rejected(NZ_FRAME_ABORT_ACK, 16));
	CHECK(reserved_rejected(NZ_FRAME_REFUSE, 20));
	mk(&f, NZ_FRAME_ABORT);
	put_unaligned_be32(0, be);
	CHECK_EQ(decode_patched(&f, 32, be, 4), -EPROTO);
	put_unaligned_be32(4096, be);
	CHECK_EQ(decode_patched(&f, 32, be, 4), -EPROTO);
	mk(&f, NZ_FRAME_REFUSE);
	put_unaligned_be32(0, be);
	CHECK_EQ(decode_patched(&f, 16, be, 4), -EPROTO);
	f.abort.reason = 5000;
	CHECK_EQ(nz_wire_encode(&f, &lim, buf, sizeof(buf)), -EPROTO);
	return true;
}

/* ---- round trips ------------------------------------------------------ */

static bool t_roundtrip_challenge(void)
{
	struct nz_frame f;

	mk(&f, NZ_FRAME_CHALLENGE);
	return roundtrip(&f, &lim);
}

static bool t_roundtrip_hello(void)
{
	struct nz_frame f;

	mk(&f, NZ_FRAME_HELLO);
	CHECK(roundtrip(&f, &lim));
	f.hello.src_rank = U32_MAX;
	f.hello.dst_rank = 0;
	f.hello.rail = U16_MAX - 1;
	f.hello.nrails = U16_MAX;
	f.hello.unit = NZ_WIRE_UNIT_MAX;
	f.hello.job_id = U64_MAX;
	CHECK(roundtrip(&f, &lim));
	f.hello.unit = NZ_WIRE_UNIT_MIN;
	f.hello.rail = 0;
	f.hello.nrails = 1;
	return roundtrip(&f, &lim);
}

static bool t_roundtrip_welcome(void)
{
	struct nz_frame f;

	mk(&f, NZ_FRAME_WELCOME);
	return roundtrip(&f, &lim);
}

static bool t_roundtrip_data(void)
{
	struct nz_frame f, g;
	u8 frame[NZ_WIRE_HDR_LEN + 16];

	mk(&f, NZ_FRAME_DATA);
	CHECK(roundtrip(&f, &lim));

	/* Whole-frame decode points payload just after the header. */
	mk_data(&f, 9, 100, 96, 4);
	CHECK_EQ(nz_wire_encode(&f, &lim, frame, sizeof(frame)), 48);
	memcpy(frame + 48, "abcd", 4);
	CHECK_EQ(nz_wire_decode(frame, 52, &lim, &g), 0);
	CHECK(g.payload == frame + 48);
	CHECK_EQ(g.len, 4);
	CHECK(same_frame(&f, &g));
	return true;
}

static bool t_roundtrip_data_zero_length(void)
{
	struct nz_frame f, g;

	mk_data(&f, 1, 0, 0, 0);
	CHECK(roundtrip(&f, &lim));
	CHECK_EQ(nz_wire_decode(buf, NZ_WIRE_HDR_LEN, &lim, &g), 0);
	CHECK_EQ(g.data.total, 0);
	return true;
}

static bool t_roundtrip_data_at_limits(void)
{
	struct nz_frame f;

	mk_data(&f, U64_MAX, lim.max_msg, lim.max_msg - lim.max_payload,
		lim.max_payload);
	f.data.tag = U64_MAX;
	f.data.tag_seq = U64_MAX;
	CHECK(roundtrip(&f, &lim));
	/* The whole u64 range, with the frame flush against U64_MAX. */
	mk_data(&f, 1, U64_MAX, U64_MAX - U32_MAX, U32_MAX);
	CHECK(roundtrip(&f, &lim_huge));
	mk_data(&f, 1, U64_MAX, U64_MAX, 0);
	CHECK_EQ(nz_wire_check(&f, &lim_huge), -EPROTO);	/* len 0 */
	mk_data(&f, 1, U64_MAX, U64_MAX - 1, 1);
	return roundtrip(&f, &lim_huge);
}

static bool t_roundtrip_ack(void)
{
	struct nz_frame f;

	mk(&f, NZ_FRAME_ACK);
	CHECK(roundtrip(&f, &lim));
	mk_ack(&f, U64_MAX, lim.max_msg - lim.max_payload, lim.max_payload);
	return roundtrip(&f, &lim);
}

static bool t_roundtrip_ack_zero_length(void)
{
	struct nz_frame f;

	mk_ack(&f, 5, 0, 0);
	return roundtrip(&f, &lim);
}

static bool t_roundtrip_heartbeat(void)
{
	struct nz_frame f;

	mk(&f, NZ_FRAME_HEARTBEAT);
	CHECK(roundtrip(&f, &lim));
	f.hb.ts_ns = 0;
	f.hb.seq = U64_MAX;
	return roundtrip(&f, &lim);
}

static bool t_roundtrip_heartbeat_ack(void)
{
	struct nz_frame f;

	mk(&f, NZ_FRAME_HEARTBEAT_ACK);
	return roundtrip(&f, &lim);
}

static bool t_roundtrip_close(void)
{
	struct nz_frame f;

	mk(&f, NZ_FRAME_CLOSE);
	CHECK(roundtrip(&f, &lim));
	f.close.reason = 0xdeadbeef;	/* unknown reasons still close */
	return roundtrip(&f, &lim);
}

/* The TCP receiver reads exactly the header, then len bytes. */
static bool t_stream_header_then_body(void)
{
	u8 *hdr = malloc(NZ_WIRE_HDR_LEN);	/* exact size: ASan sees overreads */
	u8 *body = malloc(NZ_WIRE_HELLO_LEN);
	struct nz_frame f, g;
	bool ok = false;

	if (!hdr || !body)
		goto out;
	mk(&f, NZ_FRAME_HELLO);
	if (nz_wire_encode(&f, &lim, buf, sizeof(buf)) != 120)
		goto out;
	memcpy(hdr, buf, NZ_WIRE_HDR_LEN);
	memcpy(body, buf + NZ_WIRE_HDR_LEN, NZ_WIRE_HELLO_LEN);
	if (nz_wire_decode_hdr(hdr, &lim, &g) || g.len != NZ_WIRE_HELLO_LEN)
		goto out;
	if (g.hello.unit)		/* body not parsed yet */
		goto out;
	if (nz_wire_decode_body(&g, body) || !same_frame(&f, &g))
		goto out;
	ok = true;
out:
	free(hdr);
	free(body);
	return ok;
}

/* ---- header rejections ------------------------------------------------ */

static bool t_reject_bad_magic(void)
{
	static const u8 m1[] = { 0x5a, 0x4e }, m2[] = { 0x4e, 0x5b };
	static const u8 m3[] = { 0, 0 };
	struct nz_frame f;

	mk(&f, NZ_FRAME_HEARTBEAT);
	CHECK_EQ(decode_patched(&f, 0, m1, 2), -EPROTO);
	CHECK_EQ(decode_patched(&f, 0, m2, 2), -EPROTO);
	CHECK_EQ(decode_patched(&f, 0, m3, 2), -EPROTO);
	return true;
}

static bool t_reject_bad_version(void)
{
	static const u8 v[] = { 0, 1, 2, 3, 4, 6, 0xff };
	struct nz_frame f;
	unsigned int i;

	mk(&f, NZ_FRAME_HELLO);
	for (i = 0; i < ARRAY_SIZE(v); i++)
		CHECK_EQ(decode_patched(&f, 2, &v[i], 1), -EPROTONOSUPPORT);
	return true;
}

static bool t_reject_type_zero(void)
{
	const u8 t = 0;
	struct nz_frame f;

	mk(&f, NZ_FRAME_CLOSE);
	CHECK_EQ(decode_patched(&f, 3, &t, 1), -EPROTO);
	nz_frame_init(&f, 0);
	CHECK_EQ(nz_wire_encode(&f, &lim, buf, sizeof(buf)), -EPROTO);
	return true;
}

static bool t_reject_type_unknown(void)
{
	static const u8 t[] = { __NZ_FRAME_MAX, 0x40, 0x84, 0xff };
	struct nz_frame f;
	unsigned int i;

	mk(&f, NZ_FRAME_CLOSE);
	for (i = 0; i < ARRAY_SIZE(t); i++)
		CHECK_EQ(decode_patched(&f, 3, &t[i], 1), -EPROTO);
	f.type = __NZ_FRAME_MAX;
	CHECK_EQ(nz_wire_check(&f, &lim), -EPROTO);
	return true;
}

static bool t_reject_reserved_challenge(void)
{
	return reserved_rejected(NZ_FRAME_CHALLENGE, 24);
}

static bool t_reject_reserved_hello(void)
{
	return reserved_rejected(NZ_FRAME_HELLO, 20);
}

/* HELLO flags: the one known travels; an unknown one is malformed. */
static bool t_hello_flags(void)
{
	static const u32 bad[] = { 0x2, 0x80000000, 0xffffffff };
	u8 b[NZ_WIRE_HDR_LEN + NZ_WIRE_HELLO_LEN];
	struct nz_frame f, g;
	unsigned int i;
	int n;

	mk(&f, NZ_FRAME_HELLO);
	f.hello.flags = NZ_HELLO_F_FRAME_MAC;
	n = nz_wire_encode(&f, &lim, b, sizeof(b));
	CHECK_EQ(n, (int)sizeof(b));
	CHECK_EQ(get_unaligned_be32(b + 16), NZ_HELLO_F_FRAME_MAC);
	CHECK_EQ(nz_wire_decode(b, sizeof(b), &lim, &g), 0);
	CHECK_EQ(g.hello.flags, NZ_HELLO_F_FRAME_MAC);
	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		put_unaligned_be32(bad[i], b + 16);
		CHECK_EQ(nz_wire_decode(b, sizeof(b), &lim, &g), -EPROTO);
		f.hello.flags = bad[i];
		CHECK_EQ(nz_wire_encode(&f, &lim, b, sizeof(b)), -EPROTO);
	}
	return true;
}

static bool t_reject_reserved_welcome(void)
{
	return reserved_rejected(NZ_FRAME_WELCOME, 48);
}

static bool t_reject_reserved_ack(void)
{
	return reserved_rejected(NZ_FRAME_ACK, 28);
}

static bool t_reject_reserved_heartbeat(void)
{
	return reserved_rejected(NZ_FRAME_HEARTBEAT, 24);
}

static bool t_reject_reserved_heartbeat_ack(void)
{
	return reserved_rejected(NZ_FRAME_HEARTBEAT_ACK, 24);
}

static bool t_reject_reserved_close(void)
{
	return reserved_rejected(NZ_FRAME_CLOSE, 12);
}

static bool t_reject_len_challenge(void)
{
	return len_rejected(NZ_FRAME_CHALLENGE);
}

static bool t_reject_len_welcome(void)
{
	return len_rejected(NZ_FRAME_WELCOME);
}

static bool t_reject_len_ack(void)
{
	return len_rejected(NZ_FRAME_ACK);
}

static bool t_reject_len_heartbeat(void)
{
	return len_rejected(NZ_FRAME_HEARTBEAT);
}

static bool t_reject_len_heartbeat_ack(void)
{
	return len_rejected(NZ_FRAME_HEARTBEAT_ACK);
}

static bool t_reject_len_close(void)
{
	return len_rejected(NZ_FRAME_CLOSE);
}

static bool t_reject_len_hello(void)
{
	static const u32 lens[] = { 0, NZ_WIRE_HELLO_LEN - 1,
				    NZ_WIRE_HELLO_LEN + 1, U32_MAX };
	struct nz_frame f;
	unsigned int i;
	u8 be[4];

	mk(&f, NZ_FRAME_HELLO);
	for (i = 0; i < ARRAY_SIZE(lens); i++) {
		put_unaligned_be32(lens[i], be);
		CHECK_EQ(decode_patched(&f, 4, be, 4), -EPROTO);
	}
	f.len = 0;
	CHECK_EQ(nz_wire_encode(&f, &lim, buf, sizeof(buf)), -EPROTO);
	return true;
}

/* ---- DATA rejections -------------------------------------------------- */

static bool t_reject_data_len_over_max_payload(void)
{
	struct nz_frame f;

	mk_data(&f, 1, lim.max_msg, 0, lim.max_payload + 1);
	CHECK(rejected(&f, &lim, -EMSGSIZE));
	mk_data(&f, 1, U64_MAX, 0, U32_MAX);
	return rejected(&f, &lim, -EMSGSIZE);
}

static bool t_reject_data_total_over_max_msg(void)
{
	struct nz_frame f;

	mk_data(&f, 1, lim.max_msg + 1, 0, 4096);
	CHECK(rejected(&f, &lim, -EMSGSIZE));
	mk_data(&f, 1, U64_MAX, 0, 4096);
	return rejected(&f, &lim, -EMSGSIZE);
}

static bool t_reject_data_offset_past_total(void)
{
	struct nz_frame f;

	mk_data(&f, 1, 8192, 8193, 1);
	CHECK(rejected(&f, &lim, -EPROTO));
	mk_data(&f, 1, 8192, U64_MAX, 1);
	return rejected(&f, &lim, -EPROTO);
}

static bool t_reject_data_len_past_total(void)
{
	struct nz_frame f;

	mk_data(&f, 1, 8192, 4096, 4097);
	CHECK(rejected(&f, &lim, -EPROTO));
	mk_data(&f, 1, 1, 0, 2);
	return rejected(&f, &lim, -EPROTO);
}

static bool t_reject_data_wraparound(void)
{
	struct nz_frame f;

	/* offset + len wraps to a small number that is <= total. */
	mk_data(&f, 1, U64_MAX - 10, U64_MAX - 4095, 8192);
	CHECK(rejected(&f, &lim_huge, -EPROTO));
	mk_data(&f, 1, 4096, 0xfffffffffffff000ULL, 0x2000);
	CHECK(rejected(&f, &lim_huge, -EPROTO));
	mk_data(&f, 1, U64_MAX, U64_MAX, 1);
	return rejected(&f, &lim_huge, -EPROTO);
}

static bool t_reject_data_empty_frame(void)
{
	struct nz_frame f;

	mk_data(&f, 1, 10, 0, 0);
	CHECK(rejected(&f, &lim, -EPROTO));
	mk_data(&f, 1, 8192, 8192, 0);		/* offset == total */
	return rejected(&f, &lim, -EPROTO);
}

static bool t_reject_data_zero_msg_offset(void)
{
	struct nz_frame f;

	mk_data(&f, 1, 0, 1, 0);
	CHECK(rejected(&f, &lim, -EPROTO));
	mk_data(&f, 1, 0, 0, 1);
	return rejected(&f, &lim, -EPROTO);
}

static bool t_reject_data_msg_id_zero(void)
{
	struct nz_frame f;

	mk_data(&f, 0, 8192, 0, 4096);
	return rejected(&f, &lim, -EPROTO);
}

/* ---- ACK rejections --------------------------------------------------- */

static bool t_reject_ack_msg_id_zero(void)
{
	struct nz_frame f;

	mk_ack(&f, 0, 0, 4096);
	return rejected(&f, &lim, -EPROTO);
}

static bool t_reject_ack_len_over_max_payload(void)
{
	struct nz_frame f;

	mk_ack(&f, 1, 0, lim.max_payload + 1);
	return rejected(&f, &lim, -EPROTO);
}

static bool t_reject_ack_past_max_msg(void)
{
	struct nz_frame f;

	mk_ack(&f, 1, lim.max_msg - 4096, 4097);
	CHECK(rejected(&f, &lim, -EPROTO));
	mk_ack(&f, 1, lim.max_msg + 4096, 4096);
	return rejected(&f, &lim, -EPROTO);
}

static bool t_reject_ack_wraparound(void)
{
	struct nz_frame f;

	mk_ack(&f, 1, U64_MAX, 1);
	CHECK(rejected(&f, &lim_huge, -EPROTO));
	mk_ack(&f, 1, 0xfffffffffffff000ULL, 0x2000);
	return rejected(&f, &lim_huge, -EPROTO);
}

static bool t_reject_ack_empty_with_offset(void)
{
	struct nz_frame f;

	mk_ack(&f, 1, 4096, 0);
	return rejected(&f, &lim, -EPROTO);
}

/* ---- HELLO rejections ------------------------------------------------- */

static bool t_reject_hello_unit_not_pow2(void)
{
	struct nz_frame f;

	mk(&f, NZ_FRAME_HELLO);
	f.hello.unit = 3 * 4096;
	CHECK(rejected(&f, &lim, -EPROTO));
	f.hello.unit = 65536 + 1;
	return rejected(&f, &lim, -EPROTO);
}

static bool t_reject_hello_unit_too_small(void)
{
	struct nz_frame f;

	mk(&f, NZ_FRAME_HELLO);
	f.hello.unit = NZ_WIRE_UNIT_MIN / 2;
	CHECK(rejected(&f, &lim, -EPROTO));
	f.hello.unit = 0;
	return rejected(&f, &lim, -EPROTO);
}

static bool t_reject_hello_unit_too_large(void)
{
	struct nz_frame f;

	mk(&f, NZ_FRAME_HELLO);
	f.hello.unit = NZ_WIRE_UNIT_MAX * 2;
	CHECK(rejected(&f, &lim, -EPROTO));
	f.hello.unit = 1U << 31;
	return rejected(&f, &lim, -EPROTO);
}

static bool t_reject_hello_rail_out_of_range(void)
{
	struct nz_frame f;

	mk(&f, NZ_FRAME_HELLO);
	f.hello.rail = 2;
	f.hello.nrails = 2;
	CHECK(rejected(&f, &lim, -EPROTO));
	f.hello.rail = U16_MAX;
	f.hello.nrails = U16_MAX;
	return rejected(&f, &lim, -EPROTO);
}

static bool t_reject_hello_nrails_zero(void)
{
	struct nz_frame f;

	mk(&f, NZ_FRAME_HELLO);
	f.hello.rail = 0;
	f.hello.nrails = 0;
	return rejected(&f, &lim, -EPROTO);
}

static bool t_reject_hello_self(void)
{
	struct nz_frame f;

	mk(&f, NZ_FRAME_HELLO);
	f.hello.dst_rank = f.hello.src_rank;
	return rejected(&f, &lim, -EPROTO);
}

/* Version 3: every HELLO and WELCOME names its communicator's instance. */
static bool t_reject_hello_no_incarnation(void)
{
	struct nz_frame f;

	mk(&f, NZ_FRAME_HELLO);
	f.hello.incarnation = 0;
	return rejected(&f, &lim, -EPROTO);
}

static bool t_reject_welcome_no_incarnation(void)
{
	struct nz_frame f, g;
	static const u8 zero[8];

	mk(&f, NZ_FRAME_WELCOME);
	CHECK_EQ(decode_patched(&f, 40, zero, sizeof(zero)), -EPROTO);
	f.welcome.incarnation = 0;
	CHECK_EQ(nz_wire_check(&f, &lim), -EPROTO);
	CHECK_EQ(nz_wire_encode(&f, &lim, buf, sizeof(buf)), -EPROTO);
	f.welcome.incarnation = 1;
	CHECK_EQ(nz_wire_encode(&f, &lim, buf, sizeof(buf)), 48);
	CHECK_EQ(nz_wire_decode_hdr(buf, &lim, &g), 0);
	CHECK_EQ(g.welcome.incarnation, 1);
	return true;
}

/* ---- whole-frame decode and encode ------------------------------------ */

static bool t_decode_truncated(void)
{
	struct nz_frame f, g;

	mk(&f, NZ_FRAME_HEARTBEAT);
	CHECK_EQ(nz_wire_encode(&f, &lim, buf, sizeof(buf)), 48);
	CHECK_EQ(nz_wire_decode(buf, 0, &lim, &g), -EPROTO);
	CHECK_EQ(nz_wire_decode(buf, 47, &lim, &g), -EPROTO);
	CHECK_EQ(nz_wire_decode(buf, 48, &lim, &g), 0);

	mk(&f, NZ_FRAME_HELLO);
	CHECK_EQ(nz_wire_encode(&f, &lim, buf, sizeof(buf)), 120);
	CHECK_EQ(nz_wire_decode(buf, 48, &lim, &g), -EPROTO);
	CHECK_EQ(nz_wire_decode(buf, 119, &lim, &g), -EPROTO);

	mk_data(&f, 1, 8192, 0, 4096);
	CHECK_EQ(nz_wire_encode(&f, &lim, buf, sizeof(buf)), 48);
	CHECK_EQ(nz_wire_decode(buf, 48 + 4095, &lim, &g), -EPROTO);
	return true;
}

static bool t_decode_trailing_bytes(void)
{
	struct nz_frame f, g;

	mk(&f, NZ_FRAME_CLOSE);
	CHECK_EQ(nz_wire_encode(&f, &lim, buf, sizeof(buf)), 48);
	CHECK_EQ(nz_wire_decode(buf, 49, &lim, &g), -EPROTO);
	mk(&f, NZ_FRAME_HELLO);
	CHECK_EQ(nz_wire_encode(&f, &lim, buf, sizeof(buf)), 120);
	CHECK_EQ(nz_wire_decode(buf, 121, &lim, &g), -EPROTO);
	CHECK_EQ(nz_wire_decode(buf, 120, &lim, &g), 0);
	return true;
}

static bool t_encode_enospc(void)
{
	struct nz_frame f;

	mk(&f, NZ_FRAME_ACK);
	memset(buf, 0x5a, sizeof(buf));
	CHECK_EQ(nz_wire_encode(&f, &lim, buf, 47), -ENOSPC);
	CHECK_EQ(buf[0], 0x5a);			/* nothing written */
	CHECK_EQ(nz_wire_encode(&f, &lim, buf, 48), 48);
	mk(&f, NZ_FRAME_HELLO);
	CHECK_EQ(nz_wire_encode(&f, &lim, buf, 119), -ENOSPC);
	CHECK_EQ(nz_wire_encode(&f, &lim, buf, 120), 120);
	return true;
}

static bool t_decode_error_clears_frame(void)
{
	struct nz_frame g;

	memset(&g, 0xaa, sizeof(g));
	memset(buf, 0, NZ_WIRE_HDR_LEN);
	CHECK_EQ(nz_wire_decode_hdr(buf, &lim, &g), -EPROTO);
	CHECK_EQ(g.type, 0);
	CHECK_EQ(g.len, 0);
	CHECK(!g.payload);
	return true;
}

/* ---- MAC inputs ------------------------------------------------------- */

static bool t_hello_mac_input_golden(void)
{
	u8 want[NZ_WIRE_HELLO_MAC_LEN], out[NZ_WIRE_HELLO_MAC_LEN + 1];
	u8 nonce_s[NZ_WIRE_NONCE_LEN];
	static const u8 ids[24] = {
		0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8,
		0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x07,
		0x00, 0x01, 0x00, 0x02, 0x00, 0x01, 0x00, 0x00,
	};
	struct nz_frame f;

	mk(&f, NZ_FRAME_HELLO);
	fill(nonce_s, sizeof(nonce_s), 0xb0);
	memcpy(want, "NZHELLO1", 8);
	fill(want + 8, 16, 0xb0);
	fill(want + 24, 16, 0xc0);
	memcpy(want + 40, ids, sizeof(ids));
	put_unaligned_be64(0xe1e2e3e4e5e6e7e8ULL, want + 64);
	memset(out, 0x77, sizeof(out));
	nz_wire_hello_mac_input(&f.hello, nonce_s, out);
	CHECK(!memcmp(out, want, sizeof(want)));
	CHECK_EQ(out[NZ_WIRE_HELLO_MAC_LEN], 0x77);
	return true;
}

/*
 * Flags join the MAC input only when set: a HELLO without flags makes the
 * 72 bytes it made before there were any; the flag cannot be stripped.
 */
static bool t_hello_mac_input_flags(void)
{
	u8 plain[NZ_WIRE_HELLO_MAC_MAX], out[NZ_WIRE_HELLO_MAC_MAX + 1];
	u8 ns[NZ_WIRE_NONCE_LEN] = { 1 };
	struct nz_frame f;

	mk(&f, NZ_FRAME_HELLO);
	CHECK_EQ(nz_wire_hello_mac_input(&f.hello, ns, plain),
		 NZ_WIRE_HELLO_MAC_LEN);
	f.hello.flags = NZ_HELLO_F_FRAME_MAC;
	memset(out, 0x77, sizeof(out));
	CHECK_EQ(nz_wire_hello_mac_input(&f.hello, ns, out),
		 NZ_WIRE_HELLO_MAC_MAX);
	CHECK(!memcmp(out, plain, NZ_WIRE_HELLO_MAC_LEN));
	CHECK_EQ(get_unaligned_be32(out + NZ_WIRE_HELLO_MAC_LEN),
		 NZ_HELLO_F_FRAME_MAC);
	CHECK_EQ(out[NZ_WIRE_HELLO_MAC_MAX], 0x77);
	return true;
}

/* The per-frame key input: its layout, and every field bound. */
static bool t_frame_key_input(void)
{
	u8 want[NZ_WIRE_FRAME_KEY_LEN], out[NZ_WIRE_FRAME_KEY_LEN + 1];
	u8 base[NZ_WIRE_FRAME_KEY_LEN];
	u8 nc[NZ_WIRE_NONCE_LEN], ns[NZ_WIRE_NONCE_LEN];
	unsigned int i;

	fill(nc, sizeof(nc), 0xc0);
	fill(ns, sizeof(ns), 0xb0);
	memcpy(want, "NZFRAME1", 8);
	want[8] = 1;
	fill(want + 9, 16, 0xc0);
	fill(want + 25, 16, 0xb0);
	put_unaligned_be64(0xa1a2a3a4a5a6a7a8ULL, want + 41);
	put_unaligned_be32(3, want + 49);
	put_unaligned_be32(7, want + 53);
	put_unaligned_be16(5, want + 57);
	memset(out, 0x77, sizeof(out));
	nz_wire_frame_key_input(1, nc, ns, 0xa1a2a3a4a5a6a7a8ULL, 3, 7, 5, out);
	CHECK(!memcmp(out, want, sizeof(want)));
	CHECK_EQ(out[NZ_WIRE_FRAME_KEY_LEN], 0x77);
	nz_wire_frame_key_input(0, nc, ns, 1, 3, 7, 5, base);
	for (i = 0; i < 8; i++) {
		nc[0] ^= i == 1;
		ns[0] ^= i == 2;
		nz_wire_frame_key_input(i == 0, nc, ns, 1 + (i == 3),
					3 + (i == 4), 7 + (i == 5),
					5 + (i == 6), out);
		if (i < 7 && !memcmp(out, base, sizeof(base))) {
			printf("#   field %u not bound\n", i);
			return false;
		}
		nc[0] = 0xc0;
		ns[0] = 0xb0;
	}
	return true;
}

static bool t_hello_mac_input_binds_fields(void)
{
	u8 base[NZ_WIRE_HELLO_MAC_LEN], out[NZ_WIRE_HELLO_MAC_LEN];
	u8 ns[NZ_WIRE_NONCE_LEN] = { 1 };
	struct nz_frame f, g;
	unsigned int i;

	mk(&f, NZ_FRAME_HELLO);
	nz_wire_hello_mac_input(&f.hello, ns, base);
	for (i = 0; i < 9; i++) {
		g = f;
		g.hello.incarnation ^= i == 8;
		g.hello.job_id ^= i == 0;
		g.hello.src_rank ^= i == 1;
		g.hello.dst_rank ^= i == 2;
		g.hello.rail ^= i == 3;
		g.hello.nrails ^= i == 4;
		g.hello.unit <<= i == 5;
		g.hello.nonce_c[15] ^= i == 6;
		ns[15] ^= i == 7;
		nz_wire_hello_mac_input(&g.hello, ns, out);
		if (!memcmp(out, base, sizeof(out))) {
			printf("#   field %u not bound\n", i);
			return false;
		}
		ns[15] = 0;
	}
	/* The MAC field itself is not part of its input. */
	g = f;
	g.hello.mac[0] ^= 0xff;
	nz_wire_hello_mac_input(&g.hello, ns, out);
	CHECK(!memcmp(out, base, sizeof(out)));
	return true;
}

static bool t_welcome_mac_input_golden(void)
{
	u8 want[NZ_WIRE_WELCOME_MAC_LEN] = "NZWELC01";
	u8 out[NZ_WIRE_WELCOME_MAC_LEN + 1];
	u8 nc[NZ_WIRE_NONCE_LEN], ns[NZ_WIRE_NONCE_LEN];
	static const u8 ids[18] = {
		0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
		0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x03,
		0x00, 0x01,
	};

	fill(nc, sizeof(nc), 0xc0);
	fill(ns, sizeof(ns), 0xb0);
	fill(want + 8, 16, 0xc0);
	fill(want + 24, 16, 0xb0);
	memcpy(want + 40, ids, sizeof(ids));
	put_unaligned_be64(0xf1f2f3f4f5f6f7f8ULL, want + 58);
	memset(out, 0x77, sizeof(out));
	nz_wire_welcome_mac_input(nc, ns, 0x0102030405060708ULL, 7, 3, 1,
				  0xf1f2f3f4f5f6f7f8ULL, out);
	CHECK(!memcmp(out, want, sizeof(want)));
	CHECK_EQ(out[NZ_WIRE_WELCOME_MAC_LEN], 0x77);
	return true;
}

static bool t_welcome_mac_input_binds_fields(void)
{
	u8 base[NZ_WIRE_WELCOME_MAC_LEN], out[NZ_WIRE_WELCOME_MAC_LEN];
	u8 nc[NZ_WIRE_NONCE_LEN] = { 0 }, ns[NZ_WIRE_NONCE_LEN] = { 0 };

	nz_wire_welcome_mac_input(nc, ns, 1, 2, 3, 4, 9, base);
	nz_wire_welcome_mac_input(nc, ns, 5, 2, 3, 4, 9, out);
	CHECK(memcmp(out, base, sizeof(out)));
	nz_wire_welcome_mac_input(nc, ns, 1, 3, 2, 4, 9, out);	/* swapped */
	CHECK(memcmp(out, base, sizeof(out)));
	nz_wire_welcome_mac_input(nc, ns, 1, 2, 3, 5, 9, out);
	CHECK(memcmp(out, base, sizeof(out)));
	nz_wire_welcome_mac_input(nc, ns, 1, 2, 3, 4, 10, out);	/* instance */
	CHECK(memcmp(out, base, sizeof(out)));
	nc[0] = 1;
	nz_wire_welcome_mac_input(nc, ns, 1, 2, 3, 4, 9, out);
	CHECK(memcmp(out, base, sizeof(out)));
	/* Swapping the nonces changes the input: order is fixed. */
	nz_wire_welcome_mac_input(ns, nc, 1, 2, 3, 4, 9, out);
	CHECK(memcmp(out, base, sizeof(out)));
	return true;
}

static bool t_mac_inputs_domain_separated(void)
{
	u8 h[NZ_WIRE_HELLO_MAC_LEN], w[NZ_WIRE_WELCOME_MAC_LEN];
	u8 nonce[NZ_WIRE_NONCE_LEN] = { 0 };
	struct nz_frame f;

	mk(&f, NZ_FRAME_HELLO);
	nz_wire_hello_mac_input(&f.hello, nonce, h);
	nz_wire_welcome_mac_input(nonce, nonce, f.hello.job_id, 3, 7, 1, 1, w);
	CHECK(memcmp(h, w, 8));
	CHECK(!memcmp(h, "NZHELLO1", 8));
	CHECK(!memcmp(w, "NZWELC01", 8));
	return true;
}

/* ---- handshake state, names ------------------------------------------- */

static bool t_type_expected(void)
{
	/* Rows: states; columns: types 0..13; '1' = expected. */
	static const char *const table[] = {
		[NZ_WS_CLIENT_WAIT_CHALLENGE]	= "01000000100000",
		[NZ_WS_SERVER_WAIT_HELLO]	= "00100000100000",
		[NZ_WS_CLIENT_WAIT_WELCOME]	= "00010000100000",
		[NZ_WS_ESTABLISHED]		= "00001111111110",
	};
	unsigned int st, t;

	for (st = 0; st < ARRAY_SIZE(table); st++) {
		for (t = 0; t < 14; t++) {
			bool want = table[st][t] == '1';

			if (nz_wire_type_expected(st, t) != want) {
				printf("#   state %u type %u\n", st, t);
				return false;
			}
		}
	}
	CHECK(!nz_wire_type_expected(NZ_WS_ESTABLISHED, 255));
	CHECK(!nz_wire_type_expected(99, NZ_FRAME_DATA));
	return true;
}

static bool t_type_name(void)
{
	CHECK(!strcmp(nz_wire_type_name(NZ_FRAME_CHALLENGE), "CHALLENGE"));
	CHECK(!strcmp(nz_wire_type_name(NZ_FRAME_DATA), "DATA"));
	CHECK(!strcmp(nz_wire_type_name(NZ_FRAME_HEARTBEAT_ACK),
		      "HEARTBEAT_ACK"));
	CHECK(!strcmp(nz_wire_type_name(NZ_FRAME_CLOSE), "CLOSE"));
	CHECK(!strcmp(nz_wire_type_name(0), "UNKNOWN"));
	CHECK(!strcmp(nz_wire_type_name(__NZ_FRAME_MAX), "UNKNOWN"));
	CHECK(!strcmp(nz_wire_type_name(~0U), "UNKNOWN"));
	return true;
}

/* ---- chunking --------------------------------------------------------- */

static bool t_unit_ok(void)
{
	u32 u;

	CHECK(nz_wire_unit_ok(4096));
	CHECK(nz_wire_unit_ok(4 * MIB));
	CHECK(!nz_wire_unit_ok(0));
	CHECK(!nz_wire_unit_ok(2048));
	CHECK(!nz_wire_unit_ok(8 * MIB));
	CHECK(!nz_wire_unit_ok(4097));
	CHECK(!nz_wire_unit_ok(U32_MAX));
	for (u = 4096; u <= 4 * MIB; u <<= 1)
		CHECK(nz_wire_unit_ok(u) && !nz_wire_unit_ok(u + 1) &&
		      !nz_wire_unit_ok(u - 1) && !nz_wire_unit_ok(u * 3));
	return true;
}

static bool t_unit_count(void)
{
	CHECK_EQ(nz_wire_unit_count(0, 4096), 0);
	CHECK_EQ(nz_wire_unit_count(1, 4096), 1);
	CHECK_EQ(nz_wire_unit_count(4095, 4096), 1);
	CHECK_EQ(nz_wire_unit_count(4096, 4096), 1);
	CHECK_EQ(nz_wire_unit_count(4097, 4096), 2);
	CHECK_EQ(nz_wire_unit_count(U64_MAX, 4096), 1ULL << 52);
	CHECK_EQ(nz_wire_unit_count(U64_MAX - 4094, 4096), 1ULL << 52);
	CHECK_EQ(nz_wire_unit_count(U64_MAX - 4095, 4096), (1ULL << 52) - 1);
	CHECK_EQ(nz_wire_unit_count(U64_MAX - 4096, 4096), (1ULL << 52) - 1);
	CHECK_EQ(nz_wire_unit_count(U64_MAX - 8191, 4096), (1ULL << 52) - 2);
	CHECK_EQ(nz_wire_unit_count(U64_MAX, 4 * MIB), 1ULL << 42);
	return true;
}

static bool t_chunk_zero_length(void)
{
	CHECK(nz_wire_chunk_ok(0, 0, 0, 4096));
	CHECK(!nz_wire_chunk_ok(0, 0, 1, 4096));
	CHECK(!nz_wire_chunk_ok(0, 1, 0, 4096));
	CHECK(!nz_wire_chunk_ok(0, 4096, 0, 4096));
	return true;
}

static bool t_chunk_one_byte(void)
{
	CHECK(nz_wire_chunk_ok(1, 0, 1, 4096));
	CHECK(!nz_wire_chunk_ok(1, 0, 0, 4096));
	CHECK(!nz_wire_chunk_ok(1, 1, 0, 4096));
	CHECK(!nz_wire_chunk_ok(1, 0, 2, 4096));
	CHECK(!nz_wire_chunk_ok(1, 0, 4096, 4096));
	return true;
}

static bool t_chunk_exactly_one_unit(void)
{
	CHECK(nz_wire_chunk_ok(4096, 0, 4096, 4096));
	CHECK(!nz_wire_chunk_ok(4096, 0, 4095, 4096));	/* short, not last */
	CHECK(!nz_wire_chunk_ok(4096, 0, 4097, 4096));
	CHECK(!nz_wire_chunk_ok(4096, 4096, 0, 4096));
	return true;
}

static bool t_chunk_unit_plus_one(void)
{
	CHECK(nz_wire_chunk_ok(4097, 0, 4096, 4096));
	CHECK(nz_wire_chunk_ok(4097, 4096, 1, 4096));
	CHECK(nz_wire_chunk_ok(4097, 0, 4097, 4096));	/* one frame */
	CHECK(!nz_wire_chunk_ok(4097, 0, 1, 4096));
	CHECK(!nz_wire_chunk_ok(4097, 1, 4096, 4096));
	CHECK(!nz_wire_chunk_ok(4097, 4096, 2, 4096));
	return true;
}

static bool t_chunk_multi_unit(void)
{
	const u32 u = 64 * KIB;
	const u64 total = 10 * u + 123;

	CHECK(nz_wire_chunk_ok(total, 0, 3 * u, u));
	CHECK(nz_wire_chunk_ok(total, 3 * u, 7 * u + 123, u));
	CHECK(nz_wire_chunk_ok(total, 9 * u, u + 123, u));
	CHECK(!nz_wire_chunk_ok(total, 3 * u, 3 * u + 1, u));
	CHECK(!nz_wire_chunk_ok(total, 3 * u, 7 * u + 122, u));
	return true;
}

static bool t_chunk_misaligned(void)
{
	CHECK(!nz_wire_chunk_ok(65536, 1, 4096, 4096));
	CHECK(!nz_wire_chunk_ok(65536, 2048, 4096, 4096));
	CHECK(!nz_wire_chunk_ok(65536, 4095, 1, 4096));
	CHECK(!nz_wire_chunk_ok(65536, 4096, 8192, 8192));
	CHECK(nz_wire_chunk_ok(65536, 8192, 8192, 8192));
	return true;
}

static bool t_chunk_out_of_range(void)
{
	CHECK(!nz_wire_chunk_ok(8192, 12288, 4096, 4096));
	CHECK(!nz_wire_chunk_ok(8192, 4096, 8192, 4096));
	CHECK(!nz_wire_chunk_ok(8192, 8192, 0, 4096));
	CHECK(!nz_wire_chunk_ok(8192, 0, 0, 4096));
	CHECK(!nz_wire_chunk_ok(8192, U64_MAX & ~4095ULL, 4096, 4096));
	return true;
}

static bool t_chunk_wraparound(void)
{
	/* offset + len wraps to 0x1000, "inside" the message. */
	CHECK(!nz_wire_chunk_ok(8192, 0xfffffffffffff000ULL, 0x2000, 4096));
	CHECK(!nz_wire_chunk_ok(U64_MAX, 0xfffffffffffff000ULL, U64_MAX,
				4096));
	CHECK(!nz_wire_chunk_ok(U64_MAX, 4096, U64_MAX, 4096));
	return true;
}

static bool t_chunk_huge_total(void)
{
	const u64 last = U64_MAX & ~(u64)(4 * MIB - 1);

	CHECK(nz_wire_chunk_ok(U64_MAX, 0, 4 * MIB, 4 * MIB));
	CHECK(nz_wire_chunk_ok(U64_MAX, last, U64_MAX - last, 4 * MIB));
	CHECK(nz_wire_chunk_ok(U64_MAX, last - 4 * MIB, 4 * MIB, 4 * MIB));
	CHECK(!nz_wire_chunk_ok(U64_MAX, last, U64_MAX - last + 1, 4 * MIB));
	CHECK(!nz_wire_chunk_ok(U64_MAX, last, U64_MAX - last - 1, 4 * MIB));
	/* Whole message in one frame, through u64's end. */
	CHECK(nz_wire_chunk_ok(U64_MAX, 0, U64_MAX, 4096));
	return true;
}

static bool t_chunk_bad_unit(void)
{
	CHECK(!nz_wire_chunk_ok(8192, 0, 4096, 0));
	CHECK(!nz_wire_chunk_ok(8192, 0, 4096, 4095));
	CHECK(!nz_wire_chunk_ok(8192, 0, 8192, 8 * MIB));
	CHECK(!nz_wire_chunk_ok(0, 0, 0, 0));
	return true;
}

static bool t_chunk_len(void)
{
	CHECK_EQ(nz_wire_chunk_len(10000, 0, 1, 4096), 4096);
	CHECK_EQ(nz_wire_chunk_len(10000, 0, 2, 4096), 8192);
	CHECK_EQ(nz_wire_chunk_len(10000, 0, 3, 4096), 10000);
	CHECK_EQ(nz_wire_chunk_len(10000, 8192, 5, 4096), 1808);
	CHECK_EQ(nz_wire_chunk_len(10000, 10000, 5, 4096), 0);
	CHECK_EQ(nz_wire_chunk_len(10000, 10001, 5, 4096), 0);
	CHECK_EQ(nz_wire_chunk_len(0, 0, 1, 4096), 0);
	CHECK_EQ(nz_wire_chunk_len(10000, 0, 1, 4095), 0);
	/* nunits << shift would wrap: the rest of the message instead. */
	CHECK_EQ(nz_wire_chunk_len(U64_MAX, 0, U64_MAX, 4096), U64_MAX);
	CHECK_EQ(nz_wire_chunk_len(U64_MAX, 4096, 1ULL << 52, 4096),
		 U64_MAX - 4096);
	CHECK_EQ(nz_wire_chunk_len(U64_MAX, 0, (1ULL << 52) - 1, 4096),
		 U64_MAX - 4095);
	return true;
}

/* A sender cutting with nz_wire_chunk_len() always obeys the rule. */
static bool t_chunk_split_tiles_message(void)
{
	static const u64 totals[] = { 0, 1, 4095, 4096, 4097, 65536,
				      65537, 1000000, 4 * MIB + 1 };
	static const u64 steps[] = { 1, 2, 3, 16 };
	unsigned int i, j;

	for (i = 0; i < ARRAY_SIZE(totals); i++) {
		for (j = 0; j < ARRAY_SIZE(steps); j++) {
			u64 total = totals[i], off = 0, frames = 0, len;

			do {
				len = nz_wire_chunk_len(total, off, steps[j],
							4096);
				CHECK(nz_wire_chunk_ok(total, off, len, 4096));
				off += len;
				frames++;
			} while (off < total);
			CHECK_EQ(off, total);
			len = DIV_ROUND_UP(nz_wire_unit_count(total, 4096),
					   steps[j]);
			CHECK_EQ(frames, total ? len : 1);
		}
	}
	return true;
}

#define T(name)	{ #name, t_##name }

static const struct {
	const char *name;
	bool (*fn)(void);
} tests[] = {
	T(header_constants),
	T(golden_data),
	T(golden_hello),
	T(golden_small_frames),
	T(roundtrip_challenge),
	T(roundtrip_hello),
	T(roundtrip_welcome),
	T(roundtrip_data),
	T(roundtrip_data_zero_length),
	T(roundtrip_data_at_limits),
	T(roundtrip_ack),
	T(roundtrip_ack_zero_length),
	T(roundtrip_heartbeat),
	T(roundtrip_heartbeat_ack),
	T(roundtrip_close),
	T(stream_header_then_body),
	T(reject_bad_magic),
	T(reject_bad_version),
	T(reject_type_zero),
	T(reject_type_unknown),
	T(reject_reserved_challenge),
	T(reject_reserved_hello),
	T(reject_reserved_welcome),
	T(reject_reserved_ack),
	T(reject_reserved_heartbeat),
	T(reject_reserved_heartbeat_ack),
	T(reject_reserved_close),
	T(reject_len_challenge),
	T(reject_len_welcome),
	T(reject_len_ack),
	T(reject_len_heartbeat),
	T(reject_len_heartbeat_ack),
	T(reject_len_close),
	T(reject_len_hello),
	T(reject_data_len_over_max_payload),
	T(reject_data_total_over_max_msg),
	T(reject_data_offset_past_total),
	T(reject_data_len_past_total),
	T(reject_data_wraparound),
	T(reject_data_empty_frame),
	T(reject_data_zero_msg_offset),
	T(reject_data_msg_id_zero),
	T(reject_ack_msg_id_zero),
	T(reject_ack_len_over_max_payload),
	T(reject_ack_past_max_msg),
	T(reject_ack_wraparound),
	T(reject_ack_empty_with_offset),
	T(reject_hello_unit_not_pow2),
	T(reject_hello_unit_too_small),
	T(reject_hello_unit_too_large),
	T(reject_hello_rail_out_of_range),
	T(reject_hello_nrails_zero),
	T(reject_hello_self),
	T(reject_hello_no_incarnation),
	T(reject_welcome_no_incarnation),
	T(decode_truncated),
	T(decode_trailing_bytes),
	T(encode_enospc),
	T(decode_error_clears_frame),
	T(hello_mac_input_golden),
	T(hello_mac_input_binds_fields),
	T(hello_mac_input_flags),
	T(frame_key_input),
	T(hello_flags),
	T(welcome_mac_input_golden),
	T(welcome_mac_input_binds_fields),
	T(mac_inputs_domain_separated),
	T(type_expected),
	T(type_name),
	T(golden_abort_frames),
	T(roundtrip_abort_frames),
	T(reject_abort_frames),
	T(golden_done_frame),
	T(reject_done_frame),
	T(unit_ok),
	T(unit_count),
	T(chunk_zero_length),
	T(chunk_one_byte),
	T(chunk_exactly_one_unit),
	T(chunk_unit_plus_one),
	T(chunk_multi_unit),
	T(chunk_misaligned),
	T(chunk_out_of_range),
	T(chunk_wraparound),
	T(chunk_huge_total),
	T(chunk_bad_unit),
	T(chunk_len),
	T(chunk_split_tiles_message),
};

int main(void)
{
	unsigned int i, failed = 0;

	printf("1..%zu\n", ARRAY_SIZE(tests));
	for (i = 0; i < ARRAY_SIZE(tests); i++) {
		bool ok = tests[i].fn();

		printf("%sok %u - %s\n", ok ? "" : "not ", i + 1,
		       tests[i].name);
		failed += !ok;
	}
	return failed ? 1 : 0;
}
