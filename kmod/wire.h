/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Nezha wire protocol: frame layout, encode/decode and validation.
 *
 * Every rail connection, TCP or RDMA, carries the same frames: a fixed
 * NZ_WIRE_HDR_LEN-byte header, big-endian, followed by hdr.len bytes
 * (DATA payload, or the fixed HELLO body).  The layout, the handshake and
 * the acknowledgment rules are in Documentation/wire.rst.
 *
 * Pure C without kernel calls: built into nezha.ko and into host tests.
 * Functions that can fail return 0 (or a byte count) or a negative errno:
 *   -EPROTO           malformed frame: close the rail connection, count it
 *   -EPROTONOSUPPORT  good magic, but a wire version this module lacks
 *   -EMSGSIZE         DATA payload or message beyond the job's limits
 * The MAC itself (HMAC-SHA256 with the job secret) and its constant-time
 * comparison are the transport's; this file only builds its input.
 */
#ifndef _NZ_WIRE_H
#define _NZ_WIRE_H

#include "nz_compat.h"

#define NZ_WIRE_MAGIC		0x4e5a	/* "NZ" */
#define NZ_WIRE_VERSION		5	/* 2: ABORT..REFUSE; 3: incarnation; 4: DONE; 5: its floor */
#define NZ_WIRE_HDR_LEN		48
#define NZ_WIRE_NONCE_LEN	16
#define NZ_WIRE_MAC_LEN		32
#define NZ_WIRE_HELLO_LEN	72	/* HELLO body, after the header */

/*
 * Canonical byte strings fed to HMAC-SHA256 for HELLO (72 bytes, 76 with
 * flags), WELCOME and the per-frame MAC keys of a connection.
 */
#define NZ_WIRE_HELLO_MAC_LEN	72
#define NZ_WIRE_HELLO_MAC_MAX	76
#define NZ_WIRE_FRAME_KEY_LEN	59
#define NZ_WIRE_WELCOME_MAC_LEN	66

/* Chunk unit: a power of two in [NZ_WIRE_UNIT_MIN, NZ_WIRE_UNIT_MAX]. */
#define NZ_WIRE_UNIT_MIN	(4U << 10)
#define NZ_WIRE_UNIT_MAX	(4U << 20)

enum nz_frame_type {
	NZ_FRAME_CHALLENGE	= 1,	/* server -> client, on accept */
	NZ_FRAME_HELLO		= 2,	/* client -> server */
	NZ_FRAME_WELCOME	= 3,	/* server -> client */
	NZ_FRAME_DATA		= 4,
	NZ_FRAME_ACK		= 5,
	NZ_FRAME_HEARTBEAT	= 6,
	NZ_FRAME_HEARTBEAT_ACK	= 7,
	NZ_FRAME_CLOSE		= 8,
	NZ_FRAME_ABORT		= 9,	/* sender gave up on a message */
	NZ_FRAME_ABORT_ACK	= 10,	/* receiver took note of an ABORT */
	NZ_FRAME_REFUSE		= 11,	/* receiver will not deliver a message */
	NZ_FRAME_DONE		= 12,	/* a leaving receiver: what it has */
	__NZ_FRAME_MAX,
};

/* CLOSE reasons.  A receiver accepts any value: CLOSE is final anyway. */
enum nz_close_reason {
	NZ_CLOSE_NORMAL		= 0,	/* communicator or module going away */
	NZ_CLOSE_PROTO		= 1,	/* malformed or unexpected frame */
	NZ_CLOSE_AUTH		= 2,	/* MAC mismatch */
	NZ_CLOSE_IDENTITY	= 3,	/* unknown job, rank or rail */
	NZ_CLOSE_VERSION	= 4,	/* wire version not supported */
	NZ_CLOSE_TIMEOUT	= 5,	/* handshake or heartbeat timeout */
	NZ_CLOSE_ADMIN		= 6,	/* rail set down by the administrator */
	NZ_CLOSE_RESOURCE	= 7,	/* out of memory or of a limit */
	NZ_CLOSE_RESTARTED	= 8,	/* another instance of that rank was here */
	NZ_CLOSE_FRAME_MAC	= 9,	/* per-frame MAC set differently here */
};

/* Connection states, for nz_wire_type_expected(). */
enum nz_wire_state {
	NZ_WS_CLIENT_WAIT_CHALLENGE,
	NZ_WS_SERVER_WAIT_HELLO,
	NZ_WS_CLIENT_WAIT_WELCOME,
	NZ_WS_ESTABLISHED,
};

/* Per-job limits; the same on every rail, so any chunk can be rerouted. */
struct nz_wire_limits {
	u64	max_msg;	/* largest DATA total */
	u32	max_payload;	/* largest DATA len (>= the chunk unit) */
};

struct nz_frame_challenge {
	u8	nonce_s[NZ_WIRE_NONCE_LEN];
};

/* HELLO flags: what the client asks of the connection. */
#define NZ_HELLO_F_FRAME_MAC	0x1	/* a MAC on every frame after WELCOME */
#define NZ_HELLO_F_KNOWN	NZ_HELLO_F_FRAME_MAC

struct nz_frame_hello {
	u64	incarnation;	/* the client's communicator instance, != 0 */
	u32	flags;		/* NZ_HELLO_F_* */
	u64	job_id;
	u32	src_rank;	/* the client */
	u32	dst_rank;	/* the server */
	u16	rail;		/* rail index, < nrails */
	u16	nrails;		/* rails the client has towards this peer */
	u32	unit;		/* chunk unit in bytes */
	u8	nonce_c[NZ_WIRE_NONCE_LEN];
	u8	mac[NZ_WIRE_MAC_LEN];
};

struct nz_frame_welcome {
	u8	mac[NZ_WIRE_MAC_LEN];
	u64	incarnation;	/* the server's communicator instance, != 0 */
};

struct nz_frame_data {
	u64	msg_id;		/* per direction, from 1: duplicate detection */
	u64	tag;
	u64	tag_seq;	/* k-th message on (sender, receiver, tag) */
	u64	total;		/* whole message length */
	u64	offset;		/* of this frame's payload in the message */
};

struct nz_frame_ack {
	u64	msg_id;
	u64	offset;		/* of the acknowledged DATA frame */
	u32	len;		/* its payload length */
};

/* HEARTBEAT and HEARTBEAT_ACK; the ACK echoes both fields unchanged. */
struct nz_frame_heartbeat {
	u64	ts_ns;		/* sender's clock; only the sender reads it */
	u64	seq;		/* the sender's flags (NZ_HB_*), echoed */
};

/* Sent with nothing of ours in flight: its round trip is unloaded. */
#define NZ_HB_IDLE	1ULL
/* Echo it (HEARTBEAT_ACK): a round-trip sample.  Otherwise its arrival,
 * and the peer's own heartbeats, are all that liveness needs.
 */
#define NZ_HB_ECHO	2ULL
/*
 * Bit 8 + s: the sender's end of rail slot s came back (its link, or the
 * rail set up) and it has no connection there; it is the server, so dial
 * now rather than at the next backoff.  A module without it ignores it.
 */
#define NZ_HB_REDIAL_SHIFT	8
#define NZ_HB_REDIAL(slot)	(1ULL << (NZ_HB_REDIAL_SHIFT + (slot)))
/* The slots a REDIAL can name: bits 8 to 47. */
#define NZ_HB_REDIAL_ALL	((~0ULL >> 24) & ~0xffULL)
/*
 * Bits 48-63: how late the sender's answers on this path may be, in ms:
 * the time its own queue on the rail takes to drain (health.rst, "Queues
 * are not silence").  Set by the sender of every HEARTBEAT and
 * HEARTBEAT_ACK, so an echo carries the echoer's, not the prober's.  A
 * module without it ignores them (or, echoing, returns the prober's own);
 * a receiver takes at most NZ_LATE_MAX_MS of it.
 */
#define NZ_HB_LATE_SHIFT	48
#define NZ_HB_LATE(ms)		((u64)((ms) & 0xffff) << NZ_HB_LATE_SHIFT)
#define NZ_HB_LATE_MASK		NZ_HB_LATE(0xffff)
#define NZ_HB_LATE_MS(seq)	((u32)((seq) >> NZ_HB_LATE_SHIFT))

struct nz_frame_close {
	u32	reason;		/* enum nz_close_reason */
};

/*
 * ABORT: the sender failed message msg_id (which is tag_seq on tag) and
 * will send no more of it; the receiver drops what it has of it, fails
 * the receive that claims it, and answers ABORT_ACK (msg_id only).  The
 * sender repeats it on every path until that answer.
 * REFUSE: the receiver will not deliver the sender's message msg_id (its
 * receive gave up first, or no room and no receive for a whole timeout);
 * the sender fails its send with -reason.  Not repeated: a lost one
 * leaves the send to complete or time out as before.
 */
struct nz_frame_abort {
	u64	msg_id;
	u64	tag;		/* ABORT only */
	u64	tag_seq;	/* ABORT only */
	u32	reason;		/* a positive errno: ABORT and REFUSE */
};

/*
 * DONE: sent by a receiver that leaves the job, ahead of its CLOSE on
 * each path: every message of the sender with floor <= msg_id < base, and
 * base + i for each bit i of mask with base + i >= floor, has every byte
 * there and was not refused.  It stands for the ACKs that a path lost on
 * its way down.
 */
#define NZ_DONE_MASK_BITS	64

struct nz_frame_done {
	u64	base;		/* >= 1: msg_id 0 is never used */
	u64	mask;
	u64	floor;		/* >= 1: nothing below it is named */
};

/* A decoded frame, or one to encode. */
struct nz_frame {
	u8		type;		/* enum nz_frame_type */
	u32		len;		/* bytes after the header */
	const u8	*payload;	/* DATA: set by the decoder */
	union {
		struct nz_frame_challenge	challenge;
		struct nz_frame_hello		hello;
		struct nz_frame_welcome		welcome;
		struct nz_frame_data		data;
		struct nz_frame_ack		ack;
		struct nz_frame_heartbeat	hb;
		struct nz_frame_close		close;
		struct nz_frame_abort		abort;
		struct nz_frame_done		done;
	};
};

/* Zero @f and set its type and, for HELLO, the fixed body length. */
void nz_frame_init(struct nz_frame *f, enum nz_frame_type type);

/* Every rule the decoder applies, applied to a frame before sending. */
int nz_wire_check(const struct nz_frame *f, const struct nz_wire_limits *lim);

/*
 * Write the header (and the HELLO body) of @f to @buf; the DATA payload is
 * not copied, the transport sends it from the caller's pages.  Returns the
 * number of bytes written, -ENOSPC if @size is too small, or the error of
 * nz_wire_check().
 */
int nz_wire_encode(const struct nz_frame *f, const struct nz_wire_limits *lim,
		   void *buf, size_t size);

/*
 * Decode and validate exactly NZ_WIRE_HDR_LEN bytes at @hdr.  On success
 * f->len bytes follow: read them, then call nz_wire_decode_body().
 */
int nz_wire_decode_hdr(const void *hdr, const struct nz_wire_limits *lim,
		       struct nz_frame *f);

/* Parse the f->len bytes at @body (HELLO) or point f->payload at them. */
int nz_wire_decode_body(struct nz_frame *f, const void *body);

/* One whole frame in @size bytes, no more and no less (RDMA messages). */
int nz_wire_decode(const void *buf, size_t size,
		   const struct nz_wire_limits *lim, struct nz_frame *f);

/*
 * HMAC input of HELLO: "NZHELLO1" nonce_s nonce_c job src dst rail n unit
 * incarnation, and flags if any.  @out holds NZ_WIRE_HELLO_MAC_MAX bytes;
 * returns the length used.
 */
unsigned int nz_wire_hello_mac_input(const struct nz_frame_hello *h,
				     const u8 *nonce_s, u8 *out);

/*
 * HMAC input of WELCOME: "NZWELC01" nonce_c nonce_s job server client rail
 * incarnation (the server's).
 */
void nz_wire_welcome_mac_input(const u8 *nonce_c, const u8 *nonce_s,
			       u64 job_id, u32 server_rank, u32 client_rank,
			       u16 rail, u64 incarnation, u8 *out);

/*
 * HMAC input of a connection's per-frame MAC key for direction @dir (0:
 * client to server, 1: server to client): "NZFRAME1" dir nonce_c nonce_s
 * job client server rail.  NZ_WIRE_FRAME_KEY_LEN bytes.
 */
void nz_wire_frame_key_input(unsigned int dir, const u8 *nonce_c,
			     const u8 *nonce_s, u64 job_id, u32 client_rank,
			     u32 server_rank, u16 rail, u8 *out);

/* May a frame of @type arrive in state @st?  CLOSE always may. */
bool nz_wire_type_expected(enum nz_wire_state st, unsigned int type);

const char *nz_wire_type_name(unsigned int type);

/*
 * Chunking rule, shared by sender and receiver: a message is cut in units
 * of @unit bytes; a DATA frame starts at a unit boundary and covers whole
 * units, except that a frame ending at total may end short of a boundary.
 * A zero-length message is one frame with offset 0 and len 0.
 */
bool nz_wire_chunk_ok(u64 total, u64 offset, u64 len, u32 unit);

/* Payload length of a frame of at most @nunits units starting at @offset. */
u64 nz_wire_chunk_len(u64 total, u64 offset, u64 nunits, u32 unit);

static inline bool nz_wire_unit_ok(u32 unit)
{
	return is_power_of_2(unit) && unit >= NZ_WIRE_UNIT_MIN &&
	       unit <= NZ_WIRE_UNIT_MAX;
}

/* Units in a message of @total bytes; @unit must satisfy nz_wire_unit_ok(). */
static inline u64 nz_wire_unit_count(u64 total, u32 unit)
{
	unsigned int shift = ilog2(unit);

	return (total >> shift) + !!(total & (unit - 1));
}

#endif /* _NZ_WIRE_H */
