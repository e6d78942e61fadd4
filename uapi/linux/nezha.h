/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * Nezha: multi-rail, multi-protocol communication device.
 *
 * This header is the ABI between user space (libnezha, nezhactl, tests) and
 * nezha.ko.  Every structure has explicit widths and reserved fields that
 * user space must zero; the module rejects non-zero reserved fields, unknown
 * opcodes and unknown flags with -EINVAL.
 *
 * Submission model: user space opens /dev/nezha, creates an io_uring with
 * IORING_SETUP_SQE128 and submits IORING_OP_URING_CMD SQEs on the device fd.
 * sqe->cmd_op holds an NZ_CMD_* opcode, the 80-byte sqe->cmd area holds a
 * struct nz_sqe.  The CQE's res carries the result: >= 0 on success (the
 * meaning is per opcode), a negative errno on failure.  When the ring uses
 * IORING_SETUP_CQE32, big_cqe[0] carries a per-opcode second result.
 *
 * Ownership: user space writes every field of struct nz_sqe; the kernel reads
 * the SQE once, at submission, and never writes it back.  Output buffers
 * named by an SQE (addr/len) are written by the kernel before the CQE is
 * posted and belong to user space again once it is reaped.
 */
#ifndef _UAPI_LINUX_NEZHA_H
#define _UAPI_LINUX_NEZHA_H

#include <linux/types.h>
#include <linux/ioctl.h>

#define NZ_DEVICE_NAME		"nezha"
#define NZ_DEVICE_PATH		"/dev/nezha"

/* Bumped on any incompatible ABI change; features are additive bits. */
#define NZ_ABI_VERSION		2

/* Feature bits reported by NZ_CMD_VERSION / NZ_IOC_VERSION. */
#define NZ_FEAT_NOP		(1ULL << 0)	/* NZ_CMD_NOP */
#define NZ_FEAT_NOP_DEFER	(1ULL << 1)	/* NZ_NOP_F_DEFER */
#define NZ_FEAT_P2P		(1ULL << 2)	/* NZ_CMD_SEND / NZ_CMD_RECV */
#define NZ_FEAT_FIXED_BUF	(1ULL << 3)	/* IORING_URING_CMD_FIXED */
#define NZ_FEAT_TCP		(1ULL << 4)	/* TCP rails */
#define NZ_FEAT_RDMA		(1ULL << 5)	/* RDMA rails */
#define NZ_FEAT_CANCEL		(1ULL << 6)	/* NZ_CMD_CANCEL */
#define NZ_FEAT_FRAME_MAC	(1ULL << 7)	/* NZ_A_RAIL_FRAME_MAC */
#define NZ_FEAT_AGG_RAIL	(1ULL << 8)	/* NZ_PROTO_AGG rails */

/* Hard limits of this ABI version. */
#define NZ_MAX_RAILS		8
#define NZ_MAX_RANKS		1024
#define NZ_RAIL_NAME_LEN	16	/* including the NUL */
#define NZ_SECRET_LEN		32

/* io_uring command opcodes (sqe->cmd_op). */
enum nz_cmd_op {
	NZ_CMD_NOP	= 0x01,	/* no I/O; see struct nz_sqe_nop */
	NZ_CMD_VERSION	= 0x02,	/* fill a struct nz_version at addr */
	NZ_CMD_SEND	= 0x10,	/* point to point send (struct nz_sqe_xfer) */
	NZ_CMD_RECV	= 0x11,	/* point to point receive (struct nz_sqe_xfer) */
	NZ_CMD_CANCEL	= 0x12,	/* cancel receives (struct nz_sqe_xfer) */
	__NZ_CMD_MAX,
};

/*
 * NZ_CMD_NOP: completes without any I/O.
 *   flags & NZ_NOP_F_RESULT: the CQE's res is nop.result (any value,
 *                            including a negative errno) instead of 0;
 *                            with CQE32, big_cqe[0] is nop.res2.
 *   flags & NZ_NOP_F_DEFER:  complete asynchronously, from a kernel worker,
 *                            after nop.delay_us microseconds (<= 1 s) — the
 *                            same path real I/O takes.
 */
#define NZ_NOP_F_RESULT		(1U << 0)
#define NZ_NOP_F_DEFER		(1U << 1)
#define NZ_NOP_FLAGS		(NZ_NOP_F_RESULT | NZ_NOP_F_DEFER)
#define NZ_NOP_MAX_DELAY_US	1000000U

struct nz_sqe_nop {
	__s32	result;		/* in: injected result (NZ_NOP_F_RESULT) */
	__u32	delay_us;	/* in: deferral delay (NZ_NOP_F_DEFER) */
	__u64	res2;		/* in: injected big_cqe[0] (CQE32 rings) */
};

/*
 * NZ_CMD_VERSION: the module writes struct nz_version to addr (len must be
 * at least sizeof(struct nz_version)); the CQE's res is the number of bytes
 * written.
 */
struct nz_sqe_version {
	__u64	addr;		/* in: user pointer to struct nz_version */
	__u32	len;		/* in: size of that buffer */
	__u32	rsvd;
};

struct nz_version {
	__u32	abi_version;	/* NZ_ABI_VERSION of the module */
	__u32	max_rails;	/* NZ_MAX_RAILS */
	__u64	features;	/* NZ_FEAT_* */
	char	release[32];	/* module version string, NUL terminated */
	__u64	rsvd[4];
};

/*
 * NZ_CMD_SEND / NZ_CMD_RECV: move len bytes to/from rank peer of
 * communicator comm_id under tag.  Messages on one (peer, tag) are matched
 * in the order they were submitted.  With IORING_URING_CMD_FIXED in
 * sqe->uring_cmd_flags, addr is inside the registered buffer at
 * sqe->buf_index.  res: bytes moved (RECV: the message's length), or a
 * negative errno (-EMSGSIZE: the message is longer than the buffer,
 * -ETIMEDOUT, -ENETDOWN: no rail left, -ECANCELED: device closed,
 * -ECONNABORTED: the other side gave up on this message first -- its
 * send failed, or its receive did before the message came -- and
 * -ENOBUFS: the message found no receive and no room at the receiver for
 * a whole timeout).  After any of these the next messages between the two
 * ranks work as before.
 */
#define NZ_XFER_FLAGS		0U

/*
 * NZ_CMD_CANCEL: fail every receive of comm_id from peer under tag that no
 * message has started to fill yet, with -ECANCELED; addr, len and
 * timeout_ms must be 0.  res: how many it failed (0: none waiting), or
 * -EINVAL.  A receive already being filled is not stopped: it completes
 * or fails on its own.  The messages those receives were for are refused
 * when they come (their sends fail with -ECONNABORTED), and the next ones
 * on the tag match the next receives, as after a receive that timed out.
 */

struct nz_sqe_xfer {
	__u64	addr;		/* in: user buffer */
	__u64	len;		/* in: buffer length in bytes */
	__u64	tag;		/* in: match tag */
	__u32	peer;		/* in: rank of the peer */
	__u32	timeout_ms;	/* in: 0 = the communicator's default; <= 1 h */
};

/* The 80-byte payload of an SQE128 IORING_OP_URING_CMD. */
struct nz_sqe {
	__u32	flags;		/* in: per-opcode NZ_*_F_* flags */
	__u32	comm_id;	/* in: communicator; 0 for NOP and VERSION */
	union {
		struct nz_sqe_nop	nop;
		struct nz_sqe_version	version;
		struct nz_sqe_xfer	xfer;
		__u8			__pad[64];
	};
	__u64	rsvd;		/* must be 0 */
};

/* Rail protocols and states (also used by the netlink family). */
enum nz_rail_proto {
	NZ_PROTO_TCP	= 1,
	NZ_PROTO_RDMA	= 2,
	NZ_PROTO_AGG	= 3,	/* an aggregation node (UDP), not point to point */
};

enum nz_rail_state {
	NZ_RAIL_UP		= 1,	/* usable */
	NZ_RAIL_ADMIN_DOWN	= 2,	/* nezhactl rail set NAME down */
	NZ_RAIL_NO_LINK		= 3,	/* its device is down or gone */
	NZ_RAIL_FAILED		= 4,	/* its listener could not be set up */
	NZ_RAIL_UNREACHABLE	= 5,	/* agg: the node does not answer */
};

#define NZ_DEFAULT_PORT		7470
#define NZ_DEFAULT_WEIGHT	100
#define NZ_MAX_WEIGHT		10000
#define NZ_DEFAULT_UNIT		(64 * 1024)	/* chunk unit, bytes */
#define NZ_MIN_UNIT		4096
#define NZ_MAX_UNIT		(4 * 1024 * 1024)
#define NZ_DEFAULT_TIMEOUT_MS	30000

/* One configured rail, as NZ_IOC_RAIL_LIST reports it. */
struct nz_rail_info {
	char	name[NZ_RAIL_NAME_LEN];	/* NUL terminated */
	__u32	id;		/* index in the module's rail table */
	__u32	proto;		/* enum nz_rail_proto */
	__u32	state;		/* enum nz_rail_state */
	__u32	weight;		/* configured weight, 0 = excluded */
	__be32	addr;		/* IPv4 address the rail listens on */
	/* Its TCP port (network order); agg: its probes' local UDP port. */
	__be16	port;
	__be16	peer_port;	/* agg: the node's UDP port, else 0 */
	__u32	speed_mbps;	/* its netdev's link speed, 0 = unknown */
	__be32	peer_addr;	/* agg: the node's IPv4 address, else 0 */
};

/*
 * NZ_IOC_RAIL_LIST: in: count = capacity of the array at rails; out: count
 * = number of rails configured (may exceed the capacity; only capacity
 * entries are written).
 */
struct nz_rail_list {
	__u32	count;
	__u32	rsvd;
	__u64	rails;		/* user pointer to struct nz_rail_info[] */
};

/* Where rank r listens on rail slot s: addrs[r * nrails + s]. */
struct nz_comm_addr {
	__be32	addr;		/* IPv4, network order */
	__be16	port;		/* network order */
	__u16	rsvd;
};

/*
 * NZ_IOC_COMM_CREATE: create a communicator on this file.  Every rank of a
 * job passes the same job_id, secret, size, nrails, unit and address
 * table, and its own rank; rail slot s is the local rail named rails[s].
 * The module then connects every pair of ranks on every slot (the higher
 * rank connects to the lower one) and proves knowledge of the secret in the
 * handshake.  Returns with comm_id filled in; connections come up in the
 * background (see NZ_IOC_COMM_WAIT).
 */
struct nz_comm_create {
	__u64	job_id;			/* in: same on every rank */
	__u8	secret[NZ_SECRET_LEN];	/* in: same on every rank */
	__u32	rank;			/* in: this rank, < size */
	__u32	size;			/* in: ranks, 1..NZ_MAX_RANKS */
	__u32	nrails;			/* in: rail slots, 1..NZ_MAX_RAILS */
	__u32	unit;			/* in: chunk unit, 0 = default */
	__u32	timeout_ms;		/* in: default command timeout, 0 = default */
	__u32	comm_id;		/* out: handle for nz_sqe.comm_id */
	char	rails[NZ_MAX_RAILS][NZ_RAIL_NAME_LEN];	/* in: local rails */
	__u64	addrs;			/* in: struct nz_comm_addr[size * nrails] */
	__u64	serial;			/* out: its number in sysfs (not the job id) */
	__u64	rsvd[3];
};

/*
 * NZ_IOC_COMM_WAIT: wait up to timeout_ms (interruptible) until every
 * (peer, rail slot) connection of comm_id has been established -- it may
 * have closed again since, when a quick peer already sent what it had and
 * left.  Returns 0 when all were, -ETIMEDOUT otherwise; up/expected report
 * the counts either way.
 */
struct nz_comm_wait {
	__u32	comm_id;	/* in */
	__u32	timeout_ms;	/* in */
	__u32	up;		/* out: connections established once */
	__u32	expected;	/* out: (size - 1) * nrails */
	__u64	rsvd;
};

/* ioctls on /dev/nezha, for set-up and tools. */
#define NZ_IOC_MAGIC		0xE7
#define NZ_IOC_VERSION		_IOR(NZ_IOC_MAGIC, 0x00, struct nz_version)
#define NZ_IOC_RAIL_LIST	_IOWR(NZ_IOC_MAGIC, 0x01, struct nz_rail_list)
#define NZ_IOC_COMM_CREATE	_IOWR(NZ_IOC_MAGIC, 0x02, struct nz_comm_create)
#define NZ_IOC_COMM_WAIT	_IOWR(NZ_IOC_MAGIC, 0x03, struct nz_comm_wait)
#define NZ_IOC_COMM_DESTROY	_IOW(NZ_IOC_MAGIC, 0x04, __u32)

#endif /* _UAPI_LINUX_NEZHA_H */
