/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libnezha private: the collectives (collective.c, coll_sched.c,
 * coll_algo.c, coll_xport.c).
 *
 * A collective is compiled, when it starts, into a *schedule*: a small DAG
 * of operations -- sends, receives, local reductions and copies -- with the
 * dependencies between them (coll_algo.c builds one per algorithm).  One
 * engine (coll_sched.c) runs every schedule: it starts network operations
 * as soon as their dependencies are done, within a window, runs local ones
 * when they become ready, checks every message, and turns any failure into
 * an abort that it propagates to the peers (see "Errors" below).  The
 * engine reaches the network only through struct nzi_coll_xport, so that
 * host unit tests run the very same code over an in-process transport.
 *
 * Tags.  Collectives use the tags with bit 63 set (NZ_TAG_COLL in nezha.h):
 *
 *     63   62 ........ 32   31 ... 20   19 ........ 0
 *   [ 1 |  sequence (31) |  step (12) |  segment (20) ]
 *
 * The sequence number counts the collectives started on the communicator
 * (every rank starts them in the same order, as in MPI); step and segment
 * name one message of the schedule, so that no two messages of a
 * collective between two ranks share a tag and the order in which the
 * engine starts them does not matter.  Step NZI_STEP_HDR carries the
 * header exchange, steps from NZI_STEP_AGREE the agreement prologue.
 *
 * Header.  Every message that travels with a header (small algorithms:
 * the header is prefixed to the payload) or the header exchange that
 * precedes the data of pipelined algorithms carries struct nzi_hdr: the
 * collective, dtype, operator, count, root, algorithm, segment size and
 * sequence number as the sender sees them.  The receiver compares it with
 * its own: any difference fails the collective with -EPROTO.
 *
 * Errors.  A failing rank (mismatch, a peer gone, a timeout) enters
 * *abort mode*: every send of its schedule not yet started becomes an
 * abort frame (a header with NZI_HDR_ABORT and the errno), it starts no
 * new receive, and it waits for what is in flight.  A peer that receives an
 * abort frame in place of data fails with the errno it carries, and aborts
 * in turn; the failure spreads along the schedule, so that every rank
 * returns an error instead of waiting for messages that will not come.
 */
#ifndef NEZHA_COLL_H
#define NEZHA_COLL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "internal.h"
#include "nezha_dtype.h"
#include "reduce.h"

/* ---- Tags ---- */

#define NZI_SEQ_BITS		31
#define NZI_STEP_BITS		12
#define NZI_SEG_BITS		20
#define NZI_MAX_STEP		((1u << NZI_STEP_BITS) - 1)
#define NZI_MAX_SEG		((1u << NZI_SEG_BITS) - 1)
#define NZI_STEP_HDR		NZI_MAX_STEP		/* header exchange */
#define NZI_STEP_AGREE		(NZI_MAX_STEP - 64)	/* + round */
#define NZI_TAG(step, seg)	((uint32_t)(step) << NZI_SEG_BITS | (uint32_t)(seg))

static inline uint64_t nzi_coll_tag(uint32_t seq, uint32_t low)
{
	return NZ_TAG_COLL | (uint64_t)(seq & ((1u << NZI_SEQ_BITS) - 1)) << 32 | low;
}

/* ---- Header ---- */

#define NZI_HDR_MAGIC		0x4e5a434fu	/* "NZCO" */
#define NZI_HDR_VERSION		1
#define NZI_HDR_LEN		48

#define NZI_HDR_ABORT		(1u << 0)	/* the sender failed: see err */
#define NZI_HDR_SEEN		(1u << 1)	/* agreement: a mismatch was seen */

/* What every rank must agree on (and the abort information). */
struct nzi_hdr {
	uint8_t coll;		/* enum nz_coll */
	uint8_t dtype;		/* enum nz_dtype */
	uint8_t op;		/* enum nz_redop */
	uint8_t algo;		/* enum nz_coll_algo actually used */
	uint32_t seq;
	uint32_t flags;		/* NZI_HDR_* */
	int32_t root;
	int32_t err;		/* ABORT: negative errno */
	uint32_t param;		/* segment size of pipelined algorithms */
	uint64_t count;
};

/* Wire form: little endian, NZI_HDR_LEN bytes, with a check word. */
void nzi_hdr_encode(void *buf, const struct nzi_hdr *h);
/* Decode and validate magic, version and check word; false if invalid. */
bool nzi_hdr_decode(const void *buf, size_t len, struct nzi_hdr *h);

/* ---- Transport seam ---- */

/*
 * The engine's view of the network.  A handle is opaque; each successful
 * isend/irecv gives one that the engine later passes to test or wait
 * until they report it complete, which releases it.  *res is then the
 * byte count (for a receive: the message's length) or a negative errno
 * (-EMSGSIZE: the message is longer than the buffer, -ECONNRESET: the peer
 * left, -ETIMEDOUT, -ENETDOWN...).  The default transport is the
 * communicator's own (nz_isend, nz_irecv, nz_test, nz_wait).
 */
struct nzi_coll_xport {
	/* Start a transfer.  0, -EBUSY (too many in flight: retry later) or
	 * another negative errno (the transfer was not started). */
	int (*isend)(void *ctx, const void *buf, size_t len, int peer,
		     uint64_t tag, void **handle);
	int (*irecv)(void *ctx, void *buf, size_t len, int peer,
		     uint64_t tag, void **handle);
	/* 0 and *res if handle completed (and is released), else -EAGAIN. */
	int (*test)(void *ctx, void *handle, int64_t *res);
	/*
	 * Block until handle completes (0 and *res, released) or timeout_ms
	 * (< 0: none) passes (-ETIME) or a signal arrives (-EINTR).  Other
	 * transfers may complete meanwhile; the engine tests them next.
	 */
	int (*wait)(void *ctx, void *handle, int timeout_ms, int64_t *res);
	/*
	 * Block until some transfer of ctx may have completed (0; the engine
	 * then tests them), timeout_ms (< 0: none) passes (-ETIME) or a
	 * signal arrives (-EINTR).  Returns at once while a completion is
	 * waiting to be tested.  Other negative errnos: the transport failed.
	 */
	int (*wait_any)(void *ctx, int timeout_ms);
	/*
	 * Optional.  Ask that handle, a receive whose message has not started
	 * to arrive, complete soon with -ECANCELED (reported through test or
	 * wait as usual; its message is refused if it comes later).  0, or a
	 * negative errno: -EBUSY (its message is already arriving, or it is
	 * over), -EINVAL (the transport cannot cancel).
	 */
	int (*cancel)(void *ctx, void *handle);
};

/*
 * A communicator of `size` in-process ranks whose collectives use xport
 * (host tests).  Point-to-point calls on it fail; nz_comm_destroy() frees
 * it.  Returns 0 or -ENOMEM/-EINVAL.
 */
int nzi_coll_comm_new(struct nz_comm **out, int rank, int size,
		      const struct nzi_coll_xport *xport, void *ctx);

/* The default transport (coll_xport.c); ctx is the communicator. */
extern const struct nzi_coll_xport nzi_coll_xport_p2p;

/* ---- Schedules (coll_sched.c) ---- */

enum nzi_op_kind {
	NZI_OP_SEND,	/* src[0..len) to peer under tag */
	NZI_OP_RECV,	/* exactly len bytes from peer into dst */
	NZI_OP_REDUCE,	/* dst[0..len) = src OP src2, len in elements */
	NZI_OP_COPY,	/* dst[0..len) = src[0..len), bytes */
	NZI_OP_STAGE,	/* header into dst, then src[0..len) after it */
	NZI_OP_AVG,	/* dst[0..len) /= nranks (NZ_AVG's last step) */
	NZI_OP_NOP,	/* a join point (check mode's gate) */
};

/* Op flags. */
#define NZI_F_HDR	(1u << 0)	/* message = header + payload */
#define NZI_F_HDRONLY	(1u << 1)	/* message = a header (exchange) */
#define NZI_F_AGREE	(1u << 2)	/* agreement round: record, go on */
#define NZI_F_OWNED	(1u << 3)	/* send from the schedule's own memory */

enum nzi_op_state {
	NZI_OS_WAIT,		/* dependencies pending */
	NZI_OS_READY,		/* may start */
	NZI_OS_FLIGHT,		/* in the transport */
	NZI_OS_DONE,
};

struct nzi_op {
	uint8_t kind;		/* enum nzi_op_kind */
	uint8_t flags;		/* NZI_F_* */
	uint8_t state;		/* enum nzi_op_state */
	int32_t peer;
	uint32_t tag;		/* low 32 bits of the tag: NZI_TAG() */
	uint32_t ndeps;		/* dependencies not done yet */
	uint32_t succ, nsucc;	/* successors: sched->succ[succ..+nsucc) */
	void *dst;
	const void *src, *src2;
	size_t len;
	void *handle;		/* NZI_OS_FLIGHT */
};

struct nzi_edge {
	uint32_t from, to;
};

struct nzi_span {
	void *p;
	size_t len;
};

/* One running collective. */
struct nzi_sched {
	struct nz_comm *comm;
	const struct nzi_coll_xport *xp;
	void *xctx;
	int rank, size;
	enum nz_dtype dtype;
	enum nz_redop op;
	struct nzi_hdr hdr;	/* ours, as sent */
	uint8_t hdrwire[NZI_HDR_LEN];	/* encoded, for header exchanges */
	uint8_t abortwire[NZI_HDR_LEN];	/* the abort frame, once aborting */
	unsigned int max_recv, max_send;	/* in flight */

	struct nzi_op *ops;
	uint32_t nops, cap;
	struct nzi_edge *edges;
	uint32_t nedges, ecap;
	uint32_t *succ;		/* CSR of the edges, by op */
	int gate;		/* check mode: every new op waits for it */

	struct nzi_span *scratch;	/* buffers to free at the end */
	uint32_t nscratch, scap;

	/* Execution. */
	uint32_t *recvs;	/* receive ops in index order */
	uint32_t nrecvs, next_recv;
	uint32_t *sendq;	/* ready sends, FIFO */
	uint32_t sq_head, sq_tail, nsends;
	uint32_t *localq;	/* ready local ops (stack) */
	uint32_t nlocal;
	uint32_t *flight;	/* ops in flight */
	uint32_t nflight, flight_recv, flight_send;
	uint32_t flight_owned;	/* owned sends in flight (see user_done) */
	uint32_t ndone;
	bool aborting;
	bool seen;		/* agreement: a mismatch somewhere */
	int err;		/* first error, 0 */
	char errmsg[256];
	int64_t last_progress;	/* ms */
	int64_t abort_ms;	/* when abort mode began, then last cancel */
};

int nzi_sched_init(struct nzi_sched *s, struct nz_comm *comm,
		   const struct nzi_hdr *hdr);
void nzi_sched_free(struct nzi_sched *s);

/*
 * Builders: each returns the new op's index, or -1 after a failed
 * allocation (sticky: nzi_sched_start() then fails with -ENOMEM).  Ops
 * must be created in an order consistent with the algorithm's steps (a
 * receive of step t after every receive of earlier steps): the engine posts
 * receives in that order, which is what keeps windows deadlock free.
 */
int nzi_send(struct nzi_sched *s, int peer, uint32_t tag, const void *buf,
	     size_t len, unsigned int flags);
int nzi_recv(struct nzi_sched *s, int peer, uint32_t tag, void *buf,
	     size_t len, unsigned int flags);
int nzi_reduce(struct nzi_sched *s, void *dst, const void *a, const void *b,
	       size_t count);
int nzi_copy(struct nzi_sched *s, void *dst, const void *src, size_t len);
int nzi_stage(struct nzi_sched *s, void *dst, const void *src, size_t len);
int nzi_avg(struct nzi_sched *s, void *buf, size_t count);
int nzi_nop(struct nzi_sched *s);
/* op waits for dep (both may be -1: ignored); dep < op. */
void nzi_dep(struct nzi_sched *s, int op, int dep);
/* Header exchange with peer before the data: see coll_sched.c. */
int nzi_hdr_send(struct nzi_sched *s, int peer);
int nzi_hdr_recv(struct nzi_sched *s, int peer);
/* A buffer freed with the schedule (64-byte aligned); NULL on failure. */
void *nzi_scratch(struct nzi_sched *s, size_t len);
/* Check mode: an agreement prologue; every later op waits for it. */
void nzi_agree(struct nzi_sched *s);

/* Freeze the DAG and start what is ready.  0 or -errno. */
int nzi_sched_start(struct nzi_sched *s);
/* Advance without blocking.  Returns true when the schedule is finished. */
bool nzi_sched_progress(struct nzi_sched *s);
bool nzi_sched_done(const struct nzi_sched *s);
/*
 * Finished as far as the caller is concerned: every op is done except
 * sends from the schedule's own memory already in the module, whose
 * acknowledgements the result does not depend on.  The schedule must
 * then be kept (and progressed) until nzi_sched_done().
 */
bool nzi_sched_user_done(const struct nzi_sched *s);
/* Enter abort mode with err (first error wins), message for nz_last_error. */
__attribute__((format(printf, 3, 4)))
void nzi_sched_fail(struct nzi_sched *s, int err, const char *fmt, ...);
/* The handle to block on, or NULL when nothing is in flight. */
void *nzi_sched_critical(struct nzi_sched *s, uint32_t *op);
/*
 * Abort mode: cancel the receives in flight that no message has started
 * to fill (their peers may never send now).  Returns how many the
 * transport took; restarts the grace period of nzi_sched_abort_due().
 */
uint32_t nzi_sched_cancel_recvs(struct nzi_sched *s);
/*
 * Abort mode: ms until the receives still in flight are to be cancelled
 * (0: now), counted from the last progress, the start of abort mode or
 * the last cancel, whichever is latest; -1: not aborting, no receive in
 * flight, or the transport cannot cancel.
 */
int64_t nzi_sched_abort_due(const struct nzi_sched *s, int64_t now, int grace_ms);
/* Abort mode: forget the abort frames that could not be started. */
void nzi_sched_drop_unsent(struct nzi_sched *s);
/* Record the completion of op (after a blocking wait reported it). */
void nzi_sched_complete(struct nzi_sched *s, uint32_t op, int64_t res);

/* ---- Algorithms (coll_algo.c) ---- */

/* The arguments of one collective, as the API received them. */
struct nzi_args {
	enum nz_coll coll;
	enum nz_coll_algo algo;	/* resolved: never NZ_ALGO_AUTO */
	const void *sendbuf;
	void *recvbuf;
	size_t count;		/* per the API's convention for coll */
	enum nz_dtype dtype;
	enum nz_redop op;
	int root;
	size_t segment;		/* bytes, pipelined algorithms */
	size_t small_segment;	/* bytes, pieces of recursive doubling */
	unsigned int window;	/* scratch slots of pipelined algorithms */
};

int nzi_build(struct nzi_sched *s, const struct nzi_args *a);

/* Largest power of two <= n (n >= 1). */
static inline int nzi_pow2_floor(int n)
{
	int p = 1;

	while (p * 2 <= n)
		p *= 2;
	return p;
}

/* ---- Per-communicator state (collective.c) ---- */

struct nzi_coll_agg;
struct nzi_agg_part;

struct nzi_coll {
	uint32_t seq;			/* of the next collective */
	struct nz_coll_request *head, *tail;	/* started, not freed */
	unsigned int nactive;		/* the caller's (not detached) */
	unsigned int ndetached;
	const struct nzi_coll_xport *xp;
	void *xctx;
	struct nz_coll_tuning tune;
	bool check;			/* agreement prologue (NEZHA_COLL_CHECK) */
	struct nzi_coll_agg *agg;	/* the aggregation rail, NULL: none */
};

/*
 * A collective in flight.  finished: done for the caller (result in s.err);
 * detached: reported to the caller, kept only until its last sends from
 * its own buffers are acknowledged.
 */
struct nz_coll_request {
	struct nz_coll_request *next;
	struct nzi_coll *owner;
	bool finished;
	bool detached;
	int result;
	/* 16-bit float AVG, run as a binary32 SUM (collective.c) */
	void *wide;		/* the binary32 copy, NULL: not widened */
	void *wide_out;		/* the caller's recvbuf, NULL once written */
	size_t wide_off, wide_count;
	float wide_div;
	bool wide_bf16;
	struct nzi_agg_part *agg;	/* the share of the aggregation rail */
	struct nzi_sched s;
};

/*
 * $name as a size in min..max (K, M, G suffixes) into *out, left alone
 * when unset: 0 or -EINVAL (nz_last_error() says why).
 */
int nzi_env_size(const char *name, size_t min, size_t max, size_t *out);
/* The communicator's collective state, created on first use. */
int nzi_coll_get(struct nz_comm *comm, struct nzi_coll **out);
/*
 * Start a schedule running a (algo chosen by total bytes) with sequence
 * number seq in s.  0 or -errno (s then freed).
 */
int nzi_coll_launch(struct nz_comm *comm, struct nzi_sched *s, struct nzi_args *a,
		    uint32_t seq, size_t total);

/*
 * Block until req is finished for its caller (its outcome recorded), as
 * nz_coll_wait() does, without reporting it to the caller.
 */
void nzi_coll_settle(struct nz_coll_request *req);

/* ---- The aggregation rail's share of an allreduce (coll_agg.c) ---- */

struct nzi_agg;

struct nzi_coll_agg_stats {
	uint64_t splits;		/* allreduces split */
	uint64_t agg_bytes, ring_bytes;	/* of those, bytes each way went */
	uint64_t redos;			/* shares redone on the ring */
	uint64_t probes;		/* the rails alone, measured */
	uint64_t resumes;		/* off, then on again (joined anew) */
	uint64_t splits_on;		/* splits since the last time on again */
	uint64_t waits;			/* allreduces that waited for an
					 * earlier one's agreement to start */
	bool off;			/* the node is not used (now) */
	bool ready;			/* off, and this rank joined anew */
	bool paused;			/* splits were slower than the rails alone */
	double rate_agg, rate_ring;	/* agreed estimates, bytes per us */
	double scale;			/* the rates' share is scaled by this */
};

/*
 * The cut (coll_agg.c, "The cut"): a pure function of what every rank
 * holds alike, kept apart from the I/O so that a model can drive it.
 */
#define NZI_AGG_BUCKETS		48	/* log2 of an allreduce's bytes */

struct nzi_agg_cut {
	double rate_agg, rate_ring;	/* bytes per us, EWMA */
	unsigned int samples;		/* split allreduces measured */
	double scale;			/* (0, 1]: share = scale * rates' share */
	bool paused;			/* split only to probe */
	uint64_t eligible;		/* allreduces that could be split */
	double alone[NZI_AGG_BUCKETS];	/* us per byte, the rails alone; 0: unknown */
};

/* What nzi_agg_cut_next() decided for one allreduce. */
struct nzi_agg_choice {
	double share;			/* of the elements, to the node */
	bool measure;			/* agree on the times (split or probe) */
};

void nzi_agg_cut_init(struct nzi_agg_cut *c);
/* The next eligible allreduce, of bytes bytes. */
struct nzi_agg_choice nzi_agg_cut_next(struct nzi_agg_cut *c, size_t bytes);
/* The agreed maxima of a measured one (agg_bytes 0: a probe). */
void nzi_agg_cut_learn(struct nzi_agg_cut *c, uint64_t agg_bytes, uint64_t ring_bytes,
		       int64_t t_agg_us, int64_t t_ring_us);

/*
 * Use the node joined as agg for comm's allreduces from now on, sending
 * shares of those of at least min_bytes through it.  Every rank must
 * attach before the same collective.  Takes agg (closed with the
 * communicator).  0, -EINVAL, -EEXIST, -ENOMEM or -EAGAIN.
 */
int nzi_coll_agg_attach(struct nz_comm *comm, struct nzi_agg *agg, size_t min_bytes);
/*
 * Benchmarks ($NEZHA_AGG_SHARE): every split allreduce sends this share
 * (0 < share <= 1; 1: all of it, however small) through the node; 0: the
 * measured cut again.  Every rank alike.  0, -ENOENT (no node), -EINVAL.
 */
int nzi_coll_agg_fix(struct nz_comm *comm, double share);
/* The NEZHA_AGG_* variables (Documentation/collectives.rst). */
struct nzi_agg_env {
	bool set;			/* a node named, all well-formed */
	char host[256];
	uint16_t port;
	/* From the module's aggregation rail (NEZHA_AGG_NODE unset). */
	char rail[NZ_RAIL_NAME_LEN];	/* "": no rail */
	uint32_t local_addr;		/* the rail's IPv4 address, network order */
	bool rail_down;			/* the module finds the node unreachable */
	size_t window, timeout_ms, min_bytes;
	double share;			/* NEZHA_AGG_SHARE, 0: measured */
};

/* NEZHA_AGG_NODE's syntax: 0 or -EINVAL (host and port then undefined). */
int nzi_agg_spec_parse(const char *spec, char *host, size_t hostlen, uint16_t *port);
/* Read the variables: 0 (e->set: a node is named) or -EINVAL, said why. */
int nzi_agg_env_parse(struct nzi_agg_env *e);
/*
 * No NEZHA_AGG_NODE: the module's aggregation rail ($NEZHA_AGG_RAIL, else
 * the first) names the node, and the other NEZHA_AGG_* values are read.
 * 0 (e->set if there is one), -ENODEV (NEZHA_AGG_RAIL names none),
 * -EINVAL (a malformed value) or the ioctl's -errno; said why.
 */
int nzi_agg_env_rail(struct nz_comm *comm, struct nzi_agg_env *e);
/*
 * Join e's node and attach it if every rank could, every rank alike;
 * parse_err is this rank's nzi_agg_env_parse() result.  A rank's
 * malformed settings, or min_bytes or share differing between ranks, fail
 * every rank with -EINVAL; a node a rank cannot reach leaves it off
 * everywhere (0).  Every rank of comm calls it, with e set or not: a rank
 * without a node agrees to none.
 */
int nzi_coll_agg_setup(struct nz_comm *comm, const uint8_t *key, const struct nzi_agg_env *e,
		       int parse_err);
/* $NEZHA_AGG_NODE: nzi_coll_agg_setup() with the environment's settings. */
int nzi_coll_agg_env(struct nz_comm *comm, const uint8_t *key);
void nzi_coll_agg_release(struct nzi_coll *c);
int nzi_coll_agg_stats(struct nz_comm *comm, struct nzi_coll_agg_stats *out);

/* Cut a's share (req->agg) off a; total becomes the rest's bytes. */
int nzi_agg_split(struct nzi_coll *c, struct nz_comm *comm, struct nzi_args *a,
		  struct nz_coll_request *req, size_t *total);
void nzi_agg_start(struct nz_coll_request *req);
bool nzi_agg_advance(struct nz_coll_request *req);
int nzi_agg_result(const struct nz_coll_request *req);
/* The share is still at the node (its worker). */
bool nzi_agg_waiting(const struct nz_coll_request *req);
void nzi_agg_wait(struct nz_coll_request *req, int timeout_ms);
/* The schedule req runs now: the agreement or redo, else req->s. */
struct nzi_sched *nzi_agg_sched(struct nz_coll_request *req);
void nzi_agg_part_free(struct nzi_agg_part *p);

#endif /* NEZHA_COLL_H */
