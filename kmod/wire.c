// SPDX-License-Identifier: GPL-2.0
/*
 * Nezha wire codec: every frame that reaches a rail connection goes through
 * nz_wire_decode_hdr() before any of its fields is used, and every frame we
 * send goes through the same checks in nz_wire_encode(), so a peer running
 * this code never sees a frame from us that it would reject.
 *
 * Layout (byte offsets; Documentation/wire.rst has the tables):
 *   0 magic (be16)   2 version   3 type   4 len (be32)   8..47 per type
 * Bytes of the per-type area that a type does not use are reserved and
 * must be zero, as must be every field that the rules below pin to zero.
 */
#include "wire.h"

enum {
	NZ_OFF_MAGIC		= 0,
	NZ_OFF_VERSION		= 2,
	NZ_OFF_TYPE		= 3,
	NZ_OFF_LEN		= 4,
	NZ_OFF_AREA		= 8,	/* start of the per-type area */

	NZ_OFF_NONCE_S		= 8,	/* CHALLENGE */
	NZ_OFF_WELCOME_MAC	= 8,	/* WELCOME */
	NZ_OFF_WELCOME_INC	= 40,
	NZ_OFF_HELLO_INC	= 8,	/* HELLO (the rest is its body) */
	NZ_OFF_HELLO_FLAGS	= 16,

	NZ_OFF_MSG_ID		= 8,	/* DATA and ACK */
	NZ_OFF_TAG		= 16,	/* DATA */
	NZ_OFF_TAG_SEQ		= 24,
	NZ_OFF_TOTAL		= 32,
	NZ_OFF_OFFSET		= 40,
	NZ_OFF_ACK_OFFSET	= 16,	/* ACK */
	NZ_OFF_ACK_LEN		= 24,

	NZ_OFF_TS		= 8,	/* HEARTBEAT, HEARTBEAT_ACK */
	NZ_OFF_SEQ		= 16,

	NZ_OFF_REASON		= 8,	/* CLOSE */

	NZ_OFF_AB_TAG		= 16,	/* ABORT (msg_id at NZ_OFF_MSG_ID) */
	NZ_OFF_AB_TAG_SEQ	= 24,
	NZ_OFF_AB_REASON	= 32,
	NZ_OFF_RF_REASON	= 16,	/* REFUSE */

	NZ_OFF_DN_BASE		= 8,	/* DONE */
	NZ_OFF_DN_MASK		= 16,
	NZ_OFF_DN_FLOOR		= 24,
};

/* HELLO body, relative to the end of the header. */
enum {
	NZ_HB_JOB	= 0,
	NZ_HB_SRC	= 8,
	NZ_HB_DST	= 12,
	NZ_HB_RAIL	= 16,
	NZ_HB_NRAILS	= 18,
	NZ_HB_UNIT	= 20,
	NZ_HB_NONCE_C	= 24,
	NZ_HB_MAC	= 40,
};

static_assert(NZ_OFF_OFFSET + 8 == NZ_WIRE_HDR_LEN, "DATA fills the header");
static_assert(NZ_HB_MAC + NZ_WIRE_MAC_LEN == NZ_WIRE_HELLO_LEN,
	      "HELLO body length");
static_assert(NZ_WIRE_HDR_LEN % 8 == 0, "header keeps payload aligned");

/* End of the used part of the per-type area; the rest is reserved. */
static const u8 nz_area_end[__NZ_FRAME_MAX] = {
	[NZ_FRAME_CHALLENGE]		= NZ_OFF_NONCE_S + NZ_WIRE_NONCE_LEN,
	[NZ_FRAME_HELLO]		= NZ_OFF_HELLO_FLAGS + 4,
	[NZ_FRAME_WELCOME]		= NZ_OFF_WELCOME_INC + 8,
	[NZ_FRAME_DATA]			= NZ_OFF_OFFSET + 8,
	[NZ_FRAME_ACK]			= NZ_OFF_ACK_LEN + 4,
	[NZ_FRAME_HEARTBEAT]		= NZ_OFF_SEQ + 8,
	[NZ_FRAME_HEARTBEAT_ACK]	= NZ_OFF_SEQ + 8,
	[NZ_FRAME_CLOSE]		= NZ_OFF_REASON + 4,
	[NZ_FRAME_ABORT]		= NZ_OFF_AB_REASON + 4,
	[NZ_FRAME_ABORT_ACK]		= NZ_OFF_MSG_ID + 8,
	[NZ_FRAME_REFUSE]		= NZ_OFF_RF_REASON + 4,
	[NZ_FRAME_DONE]			= NZ_OFF_DN_FLOOR + 8,
};

static const char *const nz_type_names[__NZ_FRAME_MAX] = {
	[NZ_FRAME_CHALLENGE]		= "CHALLENGE",
	[NZ_FRAME_HELLO]		= "HELLO",
	[NZ_FRAME_WELCOME]		= "WELCOME",
	[NZ_FRAME_DATA]			= "DATA",
	[NZ_FRAME_ACK]			= "ACK",
	[NZ_FRAME_HEARTBEAT]		= "HEARTBEAT",
	[NZ_FRAME_HEARTBEAT_ACK]	= "HEARTBEAT_ACK",
	[NZ_FRAME_CLOSE]		= "CLOSE",
	[NZ_FRAME_ABORT]		= "ABORT",
	[NZ_FRAME_ABORT_ACK]		= "ABORT_ACK",
	[NZ_FRAME_REFUSE]		= "REFUSE",
	[NZ_FRAME_DONE]			= "DONE",
};

/* Domain labels: a HELLO MAC can never pass for a WELCOME MAC. */
#define NZ_HELLO_LABEL		"NZHELLO1"
#define NZ_WELCOME_LABEL	"NZWELC01"
#define NZ_FRAME_KEY_LABEL	"NZFRAME1"
#define NZ_LABEL_LEN		8

static bool nz_type_known(unsigned int type)
{
	return type >= NZ_FRAME_CHALLENGE && type < __NZ_FRAME_MAX;
}

static bool nz_all_zero(const u8 *p, size_t n)
{
	while (n--)
		if (*p++)
			return false;
	return true;
}

void nz_frame_init(struct nz_frame *f, enum nz_frame_type type)
{
	memset(f, 0, sizeof(*f));
	f->type = type;
	if (type == NZ_FRAME_HELLO)
		f->len = NZ_WIRE_HELLO_LEN;
}

static int nz_check_data(const struct nz_frame *f,
			 const struct nz_wire_limits *lim)
{
	const struct nz_frame_data *d = &f->data;

	if (f->len > lim->max_payload || d->total > lim->max_msg)
		return -EMSGSIZE;
	if (!d->msg_id)
		return -EPROTO;
	/* Two comparisons, no addition: offset + len must not wrap. */
	if (d->offset > d->total || f->len > d->total - d->offset)
		return -EPROTO;
	if (!f->len && d->total)
		return -EPROTO;
	return 0;
}

static int nz_check_ack(const struct nz_frame *f,
			const struct nz_wire_limits *lim)
{
	const struct nz_frame_ack *a = &f->ack;

	if (!a->msg_id || a->len > lim->max_payload)
		return -EPROTO;
	if (a->offset > lim->max_msg || a->len > lim->max_msg - a->offset)
		return -EPROTO;
	/* Only the one frame of a zero-length message has len 0. */
	if (!a->len && a->offset)
		return -EPROTO;
	return 0;
}

/* ABORT, ABORT_ACK and REFUSE name a message; the errno is a small one. */
static int nz_check_abort(const struct nz_frame *f)
{
	const struct nz_frame_abort *a = &f->abort;

	if (f->len || !a->msg_id)
		return -EPROTO;
	if (f->type == NZ_FRAME_ABORT_ACK)
		return 0;
	return a->reason && a->reason < 4096 ? 0 : -EPROTO;
}

static int nz_check_hello(const struct nz_frame_hello *h)
{
	if (!h->incarnation || !nz_wire_unit_ok(h->unit))
		return -EPROTO;
	if (h->flags & ~NZ_HELLO_F_KNOWN)
		return -EPROTO;
	if (!h->nrails || h->rail >= h->nrails)
		return -EPROTO;
	/* A rank never opens a rail to itself. */
	if (h->src_rank == h->dst_rank)
		return -EPROTO;
	return 0;
}

/* The rules that need only the header. */
static int nz_check_hdr(const struct nz_frame *f,
			const struct nz_wire_limits *lim)
{
	switch (f->type) {
	case NZ_FRAME_DATA:
		return nz_check_data(f, lim);
	case NZ_FRAME_HELLO:
		return f->len == NZ_WIRE_HELLO_LEN ? 0 : -EPROTO;
	case NZ_FRAME_ACK:
		if (f->len)
			return -EPROTO;
		return nz_check_ack(f, lim);
	case NZ_FRAME_ABORT:
	case NZ_FRAME_ABORT_ACK:
	case NZ_FRAME_REFUSE:
		return nz_check_abort(f);
	case NZ_FRAME_WELCOME:
		return f->len || !f->welcome.incarnation ? -EPROTO : 0;
	case NZ_FRAME_DONE:
		return f->len || !f->done.base || !f->done.floor ? -EPROTO : 0;
	case NZ_FRAME_CHALLENGE:
	case NZ_FRAME_HEARTBEAT:
	case NZ_FRAME_HEARTBEAT_ACK:
	case NZ_FRAME_CLOSE:
		return f->len ? -EPROTO : 0;
	default:
		return -EPROTO;
	}
}

int nz_wire_check(const struct nz_frame *f, const struct nz_wire_limits *lim)
{
	int ret = nz_check_hdr(f, lim);

	if (ret)
		return ret;
	if (f->type == NZ_FRAME_HELLO)
		return nz_check_hello(&f->hello);
	return 0;
}

static void nz_put_hello(const struct nz_frame_hello *h, u8 *b)
{
	put_unaligned_be64(h->job_id, b + NZ_HB_JOB);
	put_unaligned_be32(h->src_rank, b + NZ_HB_SRC);
	put_unaligned_be32(h->dst_rank, b + NZ_HB_DST);
	put_unaligned_be16(h->rail, b + NZ_HB_RAIL);
	put_unaligned_be16(h->nrails, b + NZ_HB_NRAILS);
	put_unaligned_be32(h->unit, b + NZ_HB_UNIT);
	memcpy(b + NZ_HB_NONCE_C, h->nonce_c, NZ_WIRE_NONCE_LEN);
	memcpy(b + NZ_HB_MAC, h->mac, NZ_WIRE_MAC_LEN);
}

static void nz_get_hello(struct nz_frame_hello *h, const u8 *b)
{
	h->job_id = get_unaligned_be64(b + NZ_HB_JOB);
	h->src_rank = get_unaligned_be32(b + NZ_HB_SRC);
	h->dst_rank = get_unaligned_be32(b + NZ_HB_DST);
	h->rail = get_unaligned_be16(b + NZ_HB_RAIL);
	h->nrails = get_unaligned_be16(b + NZ_HB_NRAILS);
	h->unit = get_unaligned_be32(b + NZ_HB_UNIT);
	memcpy(h->nonce_c, b + NZ_HB_NONCE_C, NZ_WIRE_NONCE_LEN);
	memcpy(h->mac, b + NZ_HB_MAC, NZ_WIRE_MAC_LEN);
}

static void nz_put_area(const struct nz_frame *f, u8 *p)
{
	switch (f->type) {
	case NZ_FRAME_CHALLENGE:
		memcpy(p + NZ_OFF_NONCE_S, f->challenge.nonce_s,
		       NZ_WIRE_NONCE_LEN);
		break;
	case NZ_FRAME_HELLO:
		put_unaligned_be64(f->hello.incarnation, p + NZ_OFF_HELLO_INC);
		put_unaligned_be32(f->hello.flags, p + NZ_OFF_HELLO_FLAGS);
		break;
	case NZ_FRAME_WELCOME:
		memcpy(p + NZ_OFF_WELCOME_MAC, f->welcome.mac, NZ_WIRE_MAC_LEN);
		put_unaligned_be64(f->welcome.incarnation,
				   p + NZ_OFF_WELCOME_INC);
		break;
	case NZ_FRAME_DATA:
		put_unaligned_be64(f->data.msg_id, p + NZ_OFF_MSG_ID);
		put_unaligned_be64(f->data.tag, p + NZ_OFF_TAG);
		put_unaligned_be64(f->data.tag_seq, p + NZ_OFF_TAG_SEQ);
		put_unaligned_be64(f->data.total, p + NZ_OFF_TOTAL);
		put_unaligned_be64(f->data.offset, p + NZ_OFF_OFFSET);
		break;
	case NZ_FRAME_ACK:
		put_unaligned_be64(f->ack.msg_id, p + NZ_OFF_MSG_ID);
		put_unaligned_be64(f->ack.offset, p + NZ_OFF_ACK_OFFSET);
		put_unaligned_be32(f->ack.len, p + NZ_OFF_ACK_LEN);
		break;
	case NZ_FRAME_HEARTBEAT:
	case NZ_FRAME_HEARTBEAT_ACK:
		put_unaligned_be64(f->hb.ts_ns, p + NZ_OFF_TS);
		put_unaligned_be64(f->hb.seq, p + NZ_OFF_SEQ);
		break;
	case NZ_FRAME_CLOSE:
		put_unaligned_be32(f->close.reason, p + NZ_OFF_REASON);
		break;
	case NZ_FRAME_ABORT:
	case NZ_FRAME_ABORT_ACK:
	case NZ_FRAME_REFUSE:
		put_unaligned_be64(f->abort.msg_id, p + NZ_OFF_MSG_ID);
		if (f->type == NZ_FRAME_REFUSE)
			put_unaligned_be32(f->abort.reason,
					   p + NZ_OFF_RF_REASON);
		if (f->type != NZ_FRAME_ABORT)
			break;
		put_unaligned_be64(f->abort.tag, p + NZ_OFF_AB_TAG);
		put_unaligned_be64(f->abort.tag_seq, p + NZ_OFF_AB_TAG_SEQ);
		put_unaligned_be32(f->abort.reason, p + NZ_OFF_AB_REASON);
		break;
	case NZ_FRAME_DONE:
		put_unaligned_be64(f->done.base, p + NZ_OFF_DN_BASE);
		put_unaligned_be64(f->done.mask, p + NZ_OFF_DN_MASK);
		put_unaligned_be64(f->done.floor, p + NZ_OFF_DN_FLOOR);
		break;
	}
}

static void nz_get_area(struct nz_frame *f, const u8 *p)
{
	switch (f->type) {
	case NZ_FRAME_CHALLENGE:
		memcpy(f->challenge.nonce_s, p + NZ_OFF_NONCE_S,
		       NZ_WIRE_NONCE_LEN);
		break;
	case NZ_FRAME_HELLO:
		f->hello.incarnation = get_unaligned_be64(p + NZ_OFF_HELLO_INC);
		f->hello.flags = get_unaligned_be32(p + NZ_OFF_HELLO_FLAGS);
		break;
	case NZ_FRAME_WELCOME:
		memcpy(f->welcome.mac, p + NZ_OFF_WELCOME_MAC, NZ_WIRE_MAC_LEN);
		f->welcome.incarnation =
			get_unaligned_be64(p + NZ_OFF_WELCOME_INC);
		break;
	case NZ_FRAME_DATA:
		f->data.msg_id = get_unaligned_be64(p + NZ_OFF_MSG_ID);
		f->data.tag = get_unaligned_be64(p + NZ_OFF_TAG);
		f->data.tag_seq = get_unaligned_be64(p + NZ_OFF_TAG_SEQ);
		f->data.total = get_unaligned_be64(p + NZ_OFF_TOTAL);
		f->data.offset = get_unaligned_be64(p + NZ_OFF_OFFSET);
		break;
	case NZ_FRAME_ACK:
		f->ack.msg_id = get_unaligned_be64(p + NZ_OFF_MSG_ID);
		f->ack.offset = get_unaligned_be64(p + NZ_OFF_ACK_OFFSET);
		f->ack.len = get_unaligned_be32(p + NZ_OFF_ACK_LEN);
		break;
	case NZ_FRAME_HEARTBEAT:
	case NZ_FRAME_HEARTBEAT_ACK:
		f->hb.ts_ns = get_unaligned_be64(p + NZ_OFF_TS);
		f->hb.seq = get_unaligned_be64(p + NZ_OFF_SEQ);
		break;
	case NZ_FRAME_CLOSE:
		f->close.reason = get_unaligned_be32(p + NZ_OFF_REASON);
		break;
	case NZ_FRAME_ABORT:
	case NZ_FRAME_ABORT_ACK:
	case NZ_FRAME_REFUSE:
		f->abort.msg_id = get_unaligned_be64(p + NZ_OFF_MSG_ID);
		if (f->type == NZ_FRAME_REFUSE)
			f->abort.reason = get_unaligned_be32(p + NZ_OFF_RF_REASON);
		if (f->type != NZ_FRAME_ABORT)
			break;
		f->abort.tag = get_unaligned_be64(p + NZ_OFF_AB_TAG);
		f->abort.tag_seq = get_unaligned_be64(p + NZ_OFF_AB_TAG_SEQ);
		f->abort.reason = get_unaligned_be32(p + NZ_OFF_AB_REASON);
		break;
	case NZ_FRAME_DONE:
		f->done.base = get_unaligned_be64(p + NZ_OFF_DN_BASE);
		f->done.mask = get_unaligned_be64(p + NZ_OFF_DN_MASK);
		f->done.floor = get_unaligned_be64(p + NZ_OFF_DN_FLOOR);
		break;
	}
}

int nz_wire_encode(const struct nz_frame *f, const struct nz_wire_limits *lim,
		   void *buf, size_t size)
{
	size_t need = NZ_WIRE_HDR_LEN;
	u8 *p = buf;
	int ret;

	ret = nz_wire_check(f, lim);
	if (ret)
		return ret;
	if (f->type == NZ_FRAME_HELLO)
		need += NZ_WIRE_HELLO_LEN;
	if (size < need)
		return -ENOSPC;

	memset(p, 0, need);
	put_unaligned_be16(NZ_WIRE_MAGIC, p + NZ_OFF_MAGIC);
	p[NZ_OFF_VERSION] = NZ_WIRE_VERSION;
	p[NZ_OFF_TYPE] = f->type;
	put_unaligned_be32(f->len, p + NZ_OFF_LEN);
	nz_put_area(f, p);
	if (f->type == NZ_FRAME_HELLO)
		nz_put_hello(&f->hello, p + NZ_WIRE_HDR_LEN);
	return need;
}

int nz_wire_decode_hdr(const void *hdr, const struct nz_wire_limits *lim,
		       struct nz_frame *f)
{
	const u8 *p = hdr;
	unsigned int end;

	memset(f, 0, sizeof(*f));
	if (get_unaligned_be16(p + NZ_OFF_MAGIC) != NZ_WIRE_MAGIC)
		return -EPROTO;
	if (p[NZ_OFF_VERSION] != NZ_WIRE_VERSION)
		return -EPROTONOSUPPORT;
	f->type = p[NZ_OFF_TYPE];
	if (!nz_type_known(f->type))
		return -EPROTO;
	end = nz_area_end[f->type];
	if (!nz_all_zero(p + end, NZ_WIRE_HDR_LEN - end))
		return -EPROTO;
	f->len = get_unaligned_be32(p + NZ_OFF_LEN);
	nz_get_area(f, p);
	return nz_check_hdr(f, lim);
}

int nz_wire_decode_body(struct nz_frame *f, const void *body)
{
	switch (f->type) {
	case NZ_FRAME_DATA:
		f->payload = body;
		return 0;
	case NZ_FRAME_HELLO:
		nz_get_hello(&f->hello, body);
		return nz_check_hello(&f->hello);
	default:
		return 0;
	}
}

int nz_wire_decode(const void *buf, size_t size,
		   const struct nz_wire_limits *lim, struct nz_frame *f)
{
	const u8 *p = buf;
	int ret;

	if (size < NZ_WIRE_HDR_LEN) {
		memset(f, 0, sizeof(*f));
		return -EPROTO;
	}
	ret = nz_wire_decode_hdr(p, lim, f);
	if (ret)
		return ret;
	if (size - NZ_WIRE_HDR_LEN != f->len)
		return -EPROTO;
	return nz_wire_decode_body(f, p + NZ_WIRE_HDR_LEN);
}

unsigned int nz_wire_hello_mac_input(const struct nz_frame_hello *h,
				     const u8 *nonce_s, u8 *out)
{
	memcpy(out, NZ_HELLO_LABEL, NZ_LABEL_LEN);
	memcpy(out + 8, nonce_s, NZ_WIRE_NONCE_LEN);
	memcpy(out + 24, h->nonce_c, NZ_WIRE_NONCE_LEN);
	put_unaligned_be64(h->job_id, out + 40);
	put_unaligned_be32(h->src_rank, out + 48);
	put_unaligned_be32(h->dst_rank, out + 52);
	put_unaligned_be16(h->rail, out + 56);
	put_unaligned_be16(h->nrails, out + 58);
	put_unaligned_be32(h->unit, out + 60);
	put_unaligned_be64(h->incarnation, out + 64);
	if (!h->flags)		/* as before there were flags */
		return NZ_WIRE_HELLO_MAC_LEN;
	put_unaligned_be32(h->flags, out + 72);
	return NZ_WIRE_HELLO_MAC_MAX;
}

void nz_wire_welcome_mac_input(const u8 *nonce_c, const u8 *nonce_s,
			       u64 job_id, u32 server_rank, u32 client_rank,
			       u16 rail, u64 incarnation, u8 *out)
{
	memcpy(out, NZ_WELCOME_LABEL, NZ_LABEL_LEN);
	memcpy(out + 8, nonce_c, NZ_WIRE_NONCE_LEN);
	memcpy(out + 24, nonce_s, NZ_WIRE_NONCE_LEN);
	put_unaligned_be64(job_id, out + 40);
	put_unaligned_be32(server_rank, out + 48);
	put_unaligned_be32(client_rank, out + 52);
	put_unaligned_be16(rail, out + 56);
	put_unaligned_be64(incarnation, out + 58);
}

void nz_wire_frame_key_input(unsigned int dir, const u8 *nonce_c,
			     const u8 *nonce_s, u64 job_id, u32 client_rank,
			     u32 server_rank, u16 rail, u8 *out)
{
	memcpy(out, NZ_FRAME_KEY_LABEL, NZ_LABEL_LEN);
	out[8] = dir;
	memcpy(out + 9, nonce_c, NZ_WIRE_NONCE_LEN);
	memcpy(out + 25, nonce_s, NZ_WIRE_NONCE_LEN);
	put_unaligned_be64(job_id, out + 41);
	put_unaligned_be32(client_rank, out + 49);
	put_unaligned_be32(server_rank, out + 53);
	put_unaligned_be16(rail, out + 57);
}

bool nz_wire_type_expected(enum nz_wire_state st, unsigned int type)
{
	if (type == NZ_FRAME_CLOSE)
		return true;
	switch (st) {
	case NZ_WS_CLIENT_WAIT_CHALLENGE:
		return type == NZ_FRAME_CHALLENGE;
	case NZ_WS_SERVER_WAIT_HELLO:
		return type == NZ_FRAME_HELLO;
	case NZ_WS_CLIENT_WAIT_WELCOME:
		return type == NZ_FRAME_WELCOME;
	case NZ_WS_ESTABLISHED:
		return type == NZ_FRAME_DATA || type == NZ_FRAME_ACK ||
		       type == NZ_FRAME_HEARTBEAT ||
		       type == NZ_FRAME_HEARTBEAT_ACK ||
		       type == NZ_FRAME_ABORT || type == NZ_FRAME_ABORT_ACK ||
		       type == NZ_FRAME_REFUSE || type == NZ_FRAME_DONE;
	}
	return false;
}

const char *nz_wire_type_name(unsigned int type)
{
	return nz_type_known(type) ? nz_type_names[type] : "UNKNOWN";
}

bool nz_wire_chunk_ok(u64 total, u64 offset, u64 len, u32 unit)
{
	u64 mask = (u64)unit - 1;

	if (!nz_wire_unit_ok(unit))
		return false;
	if (offset > total || len > total - offset)
		return false;
	if (!total)
		return true;			/* offset == len == 0 */
	if (!len || (offset & mask))
		return false;
	return offset + len == total || !(len & mask);
}

u64 nz_wire_chunk_len(u64 total, u64 offset, u64 nunits, u32 unit)
{
	u64 rest;

	if (!nz_wire_unit_ok(unit) || offset > total)
		return 0;
	rest = total - offset;
	/* nunits << shift may wrap; compare in units instead. */
	if (nunits >= nz_wire_unit_count(rest, unit))
		return rest;
	return nunits << ilog2(unit);
}
