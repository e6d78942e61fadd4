/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libnezha: the user-space API of Nezha.
 *
 * Conventions: every function that can fail returns 0 (or a non-negative
 * count where documented) on success and a negative errno on failure; no
 * function sets errno as its only report.  Objects are opaque and owned by
 * the caller between their _open/_close (or _init/_exit) pair.  A queue is
 * not thread safe: use one queue per thread, or lock around it.
 */
#ifndef NEZHA_H
#define NEZHA_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include <linux/nezha.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Queue layer: Nezha commands over an io_uring on /dev/nezha ---- */

struct nz_queue;

/* Options of nz_queue_open(); zero-initialise and set what you need. */
struct nz_queue_opts {
	unsigned int entries;	/* submission ring size; 0 = 64 */
	unsigned int flags;	/* NZ_QUEUE_* */
	const char *path;	/* device; NULL = $NEZHA_DEVICE or /dev/nezha */
};

/* Post a second 64-bit result per completion (IORING_SETUP_CQE32). */
#define NZ_QUEUE_CQE32		(1U << 0)

/* A completion, as nz_queue_wait()/nz_queue_peek() return it. */
struct nz_cqe {
	uint64_t user_data;	/* as given to nz_queue_prep() */
	int32_t res;		/* >= 0 result, or a negative errno */
	uint32_t flags;		/* io_uring CQE flags */
	uint64_t res2;		/* second result (NZ_QUEUE_CQE32 queues) */
};

/*
 * Open the device and set up a ring.  *qp receives the queue.
 * Returns 0, -ENOENT (no /dev/nezha: module not loaded), -EACCES, -EINVAL
 * (bad options) or another negative errno from io_uring set-up.
 */
int nz_queue_open(struct nz_queue **qp, const struct nz_queue_opts *opts);

/* Tear the ring down and close the device.  Accepts NULL. */
void nz_queue_close(struct nz_queue *q);

/* The /dev/nezha file descriptor behind q (owned by q). */
int nz_queue_fd(const struct nz_queue *q);

/*
 * Have every completion posted to q signal eventfd efd (io_uring's
 * eventfd registration), so that a thread can sleep in poll() on it
 * together with its own events; efd < 0 unregisters.  Returns 0 or -errno.
 */
int nz_queue_register_eventfd(struct nz_queue *q, int efd);

/*
 * Put one command in the next free SQE: op is an NZ_CMD_* opcode, cmd its
 * payload (copied; NULL = all zero).  fixed_index >= 0 marks addr as lying
 * in registered buffer fixed_index (see nz_queue_register_buffers()); pass
 * -1 otherwise.  Returns 0, or -EBUSY when the ring is full (submit first).
 */
int nz_queue_prep(struct nz_queue *q, uint32_t op, const struct nz_sqe *cmd,
		  uint64_t user_data, int fixed_index);

/* Submit every prepared command.  Returns how many, or a negative errno. */
int nz_queue_submit(struct nz_queue *q);

/*
 * Wait for one completion and consume it.  timeout_ms < 0 waits forever.
 * Returns 0, -ETIME on timeout, -EINTR, or another negative errno.
 */
int nz_queue_wait(struct nz_queue *q, struct nz_cqe *cqe, int timeout_ms);

/* Consume one completion if any.  Returns 0 or -EAGAIN. */
int nz_queue_peek(struct nz_queue *q, struct nz_cqe *cqe);

/*
 * Consume up to max completions already posted, without waiting.
 * Returns how many were consumed (0..max).
 */
int nz_queue_peek_batch(struct nz_queue *q, struct nz_cqe *cqes,
			unsigned int max);

/* Register buffers for zero-copy commands (io_uring fixed buffers). */
int nz_queue_register_buffers(struct nz_queue *q, const struct iovec *iov,
			      unsigned int nr);
int nz_queue_unregister_buffers(struct nz_queue *q);

/* Query the module's ABI version and features through the ring. */
int nz_queue_version(struct nz_queue *q, struct nz_version *out);

/* Convenience payload builders. */
void nz_sqe_nop(struct nz_sqe *cmd, uint32_t flags, int32_t result,
		uint32_t delay_us, uint64_t res2);

/* The library's own version string, e.g. "0.1.0". */
const char *nz_library_version(void);

/* ---- Communicators and point-to-point ---- */

/*
 * A communicator is the set of ranks of one job, joined by every rail that
 * all of them have.  nz_comm_init() rendezvouses with the other ranks over
 * TCP at master_addr:master_port (rank 0 listens there; the others connect),
 * agrees on a job id and the rail table, then has the module connect every
 * pair of ranks on every rail.
 *
 * A job is joinable only with its key: NZ_JOB_KEY_LEN random bytes that the
 * launcher hands every rank out of band (opts->key, $NEZHA_JOB_KEY or
 * $NEZHA_JOB_KEY_FILE; nz_job_key_generate() or `nezhactl key generate`
 * make one), as NCCL's unique id.  Every rendezvous message carries a MAC
 * under it, answering a fresh challenge; the secret the modules
 * authenticate each other's rail connections with is derived from it on
 * every rank and never crosses the network (Documentation/security.rst).
 *
 * A communicator owns one queue and is not thread safe: use one
 * communicator per thread, or serialise every call on it with a lock.
 */
struct nz_comm;
struct nz_request;

/* Options of nz_comm_init(); zero-initialise and set what you need. */
struct nz_comm_opts {
	int rank;		/* this rank, 0..size-1 */
	int size;		/* ranks in the job, 1..NZ_MAX_RANKS */
	const char *master_addr;/* rank 0's host name or address (size > 1) */
	int master_port;	/* its TCP port, 1..65535 (size > 1) */
	int timeout_ms;		/* bound of each set-up phase (rendezvous,
				 * connections); 0 = NZ_DEFAULT_TIMEOUT_MS */
	unsigned int unit;	/* chunk unit in bytes, a power of two; 0 =
				 * chosen from the rails' link speeds */
	const char *const *rails; /* NULL, or a NULL-terminated list of
				   * rail names to restrict the job to */
	unsigned int flags;	/* NZ_COMM_F_* */
	unsigned int op_timeout_ms; /* default timeout of each transfer in the
				     * module; 0 = the module's default */
	int wait_timeout_ms;	/* bound of the blocking calls (nz_wait,
				 * nz_waitall, nz_send, nz_recv); <= 0 = none,
				 * rely on the module's transfer timeout */
	const uint8_t *key;	/* the job key, NZ_JOB_KEY_LEN bytes, the same
				 * on every rank (size > 1); NULL = from the
				 * environment: $NEZHA_JOB_KEY (hex) or
				 * $NEZHA_JOB_KEY_FILE (a file of mode 0600) */
};

/* Log the rendezvous and set-up steps on stderr. */
#define NZ_COMM_F_VERBOSE	(1U << 0)
/*
 * No key (as $NEZHA_INSECURE=1): a fixed, public key, so anyone who can
 * reach rank 0 and the rails can join the job.  Trusted test networks only.
 */
#define NZ_COMM_F_INSECURE	(1U << 1)
/*
 * nz_comm_init_kv() only, without a key (as $NEZHA_KEY_FROM_STORE=1): rank
 * 0 draws the key and writes it to the store, so the job is as private as
 * the store (torch's TCPStore: anyone who can reach MASTER_PORT).
 */
#define NZ_COMM_F_KEY_FROM_STORE (1U << 2)
#define NZ_COMM_FLAGS		(NZ_COMM_F_VERBOSE | NZ_COMM_F_INSECURE | \
				 NZ_COMM_F_KEY_FROM_STORE)

/* ---- Job keys ---- */

#define NZ_JOB_KEY_LEN		32
#define NZ_JOB_KEY_HEX_LEN	(2 * NZ_JOB_KEY_LEN)

/*
 * Draw a fresh job key (getrandom) and write it as NZ_JOB_KEY_HEX_LEN
 * lowercase hex digits and a NUL into hex[0..cap): what $NEZHA_JOB_KEY and
 * a key file hold.  -ENOSPC when cap <= NZ_JOB_KEY_HEX_LEN.
 */
int nz_job_key_generate(char *hex, size_t cap);

/*
 * Read a job key from a key file: NZ_JOB_KEY_HEX_LEN hex digits (blanks and
 * a newline around them are allowed).  Like ssh with a private key, the
 * file must be a regular file owned by this user (or root) that nobody
 * else may read or write: -EPERM otherwise, -EINVAL for a malformed key,
 * the -errno of open() or read().  nz_last_error() explains.
 */
int nz_job_key_read_file(const char *path, uint8_t key[NZ_JOB_KEY_LEN]);

/*
 * Join the job: open /dev/nezha, list the local rails (those up, with a
 * non-zero weight, and named in opts->rails if given), rendezvous, create
 * the communicator in the module and wait until every rail connection to
 * every peer is up.  Every rank of the job must call it with the same size
 * and master, and the same unit or 0.  size 1 is legal (no peers, no rendezvous).
 * Returns 0 and *out, or a negative errno with nz_last_error() explaining:
 * -EINVAL bad options, -ENOENT module not loaded, -ETIMEDOUT a rank or a
 * rail connection missing at the timeout, -EEXIST rank taken, -ENODEV no
 * rail common to every rank, -EPROTO incompatible library or module,
 * -ENOKEY no job key (size > 1: none given, none in the environment, and
 * no opt-out), -EKEYREJECTED rank 0 refused this rank's key (another job
 * key), -EPERM a key file that others may read, -EADDRNOTAVAIL rank 0
 * cannot listen on master_addr (not one of its addresses).
 */
int nz_comm_init(struct nz_comm **out, const struct nz_comm_opts *opts);

/*
 * nz_comm_init() from the environment: RANK and WORLD_SIZE (torchrun), or
 * OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE (Open MPI); MASTER_ADDR and
 * MASTER_PORT (required above one rank); the job key as nz_comm_init()
 * reads it (NEZHA_JOB_KEY, NEZHA_JOB_KEY_FILE, NEZHA_INSECURE=1); optional
 * NEZHA_TIMEOUT_MS,
 * NEZHA_OP_TIMEOUT_MS, NEZHA_WAIT_TIMEOUT_MS, NEZHA_RAILS (comma-separated
 * rail names) and NEZHA_DEBUG=1 (NZ_COMM_F_VERBOSE).
 */
int nz_comm_init_env(struct nz_comm **out);

/*
 * A key-value store that the framework already runs for its own rendezvous
 * (torch.distributed's TCPStore/FileStore, a PMIx server, ...), seen
 * through three callbacks.  nz_comm_init_kv() forms the job through it,
 * with no socket of its own: no second port, nothing listening on
 * MASTER_PORT.  Every callback returns 0 or a negative errno and may be
 * called from the calling thread only, during nz_comm_init_kv().
 *
 *  - set: store len bytes under key (a NUL-terminated string of at most
 *    NZ_KV_KEY_MAX bytes), replacing any older value.
 *  - wait: return 0 once key exists, -ETIMEDOUT if it does not within
 *    timeout_ms.
 *  - get: copy the value of an existing key into buf[0..cap) and its length
 *    into *len; -ENOSPC (with *len) when it is longer than cap.
 *
 * Keys are "nezha/<prefix>/challenge" (rank 0's nonce), "nezha/<prefix>/
 * hello/<rank>" (each rank's rails, with a MAC under the job key) and
 * "nezha/<prefix>/job" (rank 0's answer: the job id and nonce, the rail
 * table and a MAC for each rank; or why the job failed), and
 * "nezha/<prefix>/key" with NZ_COMM_F_KEY_FROM_STORE only.  The job key
 * comes as for nz_comm_init(), so by default the store carries nothing
 * that lets its readers join: the secret is derived on every rank.  With
 * NZ_COMM_F_KEY_FROM_STORE the key itself is in the store, and the job is
 * only as private as the store.  A process group made twice on one store
 * needs a distinct prefix each time (torch's PrefixStore gives one).
 */
#define NZ_KV_KEY_MAX		128
struct nz_kv {
	void *ctx;
	int (*set)(void *ctx, const char *key, const void *val, size_t len);
	int (*wait)(void *ctx, const char *key, int timeout_ms);
	int (*get)(void *ctx, const char *key, void *buf, size_t cap,
		   size_t *len);
	const char *prefix;	/* NULL or "": none */
};

/*
 * nz_comm_init() with the rendezvous through kv instead of a TCP listener
 * (opts->master_addr and master_port are ignored).  Same errors, and those
 * of the callbacks (-ETIMEDOUT: a rank's key did not appear in time).
 */
int nz_comm_init_kv(struct nz_comm **out, const struct nz_comm_opts *opts,
		    const struct nz_kv *kv);

/*
 * Leave the job and free the communicator and its requests.  Call it with
 * no request in flight; those still in flight are cancelled by the module
 * (their buffers may be written until the module completes them).
 * Accepts NULL.
 */
void nz_comm_destroy(struct nz_comm *comm);

/* This rank, the number of ranks (-EINVAL for a NULL comm). */
int nz_comm_rank(const struct nz_comm *comm);
int nz_comm_size(const struct nz_comm *comm);

/* Rail slots of the job and their names (NULL when slot is out of range). */
int nz_comm_nrails(const struct nz_comm *comm);
const char *nz_comm_rail_name(const struct nz_comm *comm, int slot);

/*
 * The job's chunk unit in bytes (-EINVAL for a NULL comm): the one asked
 * for, or, when no rank asked, the largest power of two from 16 KiB to 64
 * KiB that the slowest link of the job's rails carries in 8 ms (64 KiB
 * when no link reports its speed).  Messages are cut into chunks of it,
 * and a failed rail's chunks are resent whole.
 */
int nz_comm_unit(const struct nz_comm *comm);

/* Change the bound of the blocking calls (<= 0: none).  Returns 0. */
int nz_comm_set_wait_timeout(struct nz_comm *comm, int timeout_ms);

/*
 * Register buf[0..len) as an io_uring fixed buffer (pinned memory): a
 * transfer whose buffer lies entirely inside a registered one is submitted
 * with its fixed index, which spares the module the page pinning of every
 * transfer.  *index receives the index.  Returns -EBUSY while requests are
 * in flight, -ENOSPC when NZ_COMM_MAX_BUFFERS are registered, -EOPNOTSUPP
 * when the module has no NZ_FEAT_FIXED_BUF, -ENOMEM when the memory-lock
 * limit is reached (ulimit -l).
 */
#define NZ_COMM_MAX_BUFFERS	64
int nz_comm_register_buffer(struct nz_comm *comm, void *buf, size_t len,
			    int *index);
/* Forget registered buffer index (-EBUSY while requests are in flight). */
int nz_comm_unregister_buffer(struct nz_comm *comm, int index);

/* Outcome of a completed request. */
struct nz_status {
	int peer;		/* the peer rank */
	uint64_t tag;		/* the tag */
	size_t bytes;		/* bytes moved; for a receive, the message's
				 * length */
	int error;		/* 0, or the transfer's negative errno */
};

/*
 * Start sending len bytes at buf to rank peer under tag; *req receives the
 * request, to be completed by nz_wait(), nz_test() or nz_waitall().  The
 * buffer must stay untouched (send) or unread (receive) until then.
 * Messages between two ranks on one tag are matched in the order they were
 * started.  Returns 0, -EINVAL (bad comm, peer or self, NULL buffer with a
 * length), -EBUSY (NZ_COMM_MAX_INFLIGHT requests in flight) or a
 * submission error.
 */
#define NZ_COMM_MAX_INFLIGHT	512
int nz_isend(struct nz_comm *comm, const void *buf, size_t len, int peer,
	     uint64_t tag, struct nz_request **req);
/* Start receiving a message of at most len bytes from peer under tag. */
int nz_irecv(struct nz_comm *comm, void *buf, size_t len, int peer,
	     uint64_t tag, struct nz_request **req);

/*
 * Wait until req completes, fill *status (may be NULL) and free req.
 * Returns the transfer's outcome: 0, or its negative errno (-EMSGSIZE
 * message longer than the receive buffer, -ETIMEDOUT, -ENETDOWN no rail
 * left, -ECANCELED).  Returns -ETIME (the communicator's wait timeout
 * passed) or -EINTR (a signal) with req still pending and valid.
 */
int nz_wait(struct nz_request *req, struct nz_status *status);

/*
 * If req has completed: fill *status (may be NULL), free req and return 0
 * (the outcome is status->error).  Otherwise return -EAGAIN.
 */
int nz_test(struct nz_request *req, struct nz_status *status);

/*
 * Wait for n requests (NULL entries are skipped; each completed entry is
 * freed and set to NULL).  statuses, if not NULL, has n entries.  Returns
 * 0 when all succeeded, the first failure's errno otherwise, or -ETIME /
 * -EINTR with the unfinished requests left in place.
 */
int nz_waitall(struct nz_request **reqs, unsigned int n,
	       struct nz_status *statuses);

/*
 * Cancel the receives from peer under tag that no message has started to
 * fill yet: each completes with -ECANCELED (nz_wait()).  The messages they
 * were for are refused when they come (their senders get -ECONNABORTED);
 * the next messages on the tag match the next receives.  A receive whose
 * message is already arriving is not stopped.  Returns how many were
 * cancelled, -EINVAL (also from a module without NZ_CMD_CANCEL, which
 * NZ_FEAT_CANCEL tells) or a submission error.
 */
int nz_cancel_recvs(struct nz_comm *comm, int peer, uint64_t tag);

/* Blocking send and receive: nz_isend/nz_irecv followed by nz_wait. */
int nz_send(struct nz_comm *comm, const void *buf, size_t len, int peer,
	    uint64_t tag);
int nz_recv(struct nz_comm *comm, void *buf, size_t len, int peer,
	    uint64_t tag, size_t *received);

/*
 * A description of the last failure of a libnezha call in this thread
 * (thread-local; "" when there was none), e.g. "rendezvous: rank 3 of 4
 * did not connect to 10.0.0.1:29500 within 30000 ms".
 */
const char *nz_last_error(void);

/* ---- Collectives ---- */

/*
 * Collective operations over every rank of a communicator, shaped like
 * NCCL's (and MPI's).  Documentation/collectives.rst explains the
 * algorithms, their selection and the error model; in short:
 *
 *  - Every rank calls the same collectives in the same order, with the
 *    same count, dtype, op and root.  A rank that does not is detected:
 *    the collective fails with -EPROTO on the ranks that receive from it
 *    (and, through abort messages, on the others); NEZHA_COLL_CHECK=1 adds
 *    an agreement round to every collective that detects any mismatch,
 *    root and algorithm included, on every rank.
 *  - Buffers hold count elements of dtype (nezha_dtype.h), aligned to the
 *    element size.  In place as NCCL defines it: sendbuf == recvbuf
 *    (allreduce, broadcast, reduce at the root, alltoall), sendbuf ==
 *    recvbuf + rank * count elements (allgather), recvbuf == sendbuf +
 *    rank * count elements (reduce_scatter).  Other overlaps: -EINVAL.
 *  - Every call returns 0 or a negative errno, never hangs: -EINVAL bad
 *    arguments, -EPROTO arguments differ between ranks, -ECONNRESET a
 *    rank left the job, -ENETDOWN no rail left to a peer, -ETIMEDOUT a
 *    transfer (the module's timeout) or the communicator's wait timeout
 *    (no progress for wait_timeout_ms) expired, -ENOMEM.  After an error
 *    the contents of recvbuf are undefined; the communicator stays
 *    usable for later collectives when every rank saw the error.
 *    nz_last_error() says what happened and which rank.
 *  - All ranks end with bit-identical results (each element is reduced
 *    once, in one order, and the result is copied).
 *
 * Non-blocking forms (nz_iallreduce, ...) start the collective and return
 * a request.  Progress happens inside libnezha calls on the communicator:
 * nz_coll_test(), nz_coll_wait(), nz_coll_progress() and every blocking
 * collective advance every collective in flight on it.  Between calls the
 * module keeps moving the bytes of the transfers already started (a
 * window of segments), so a trainer overlaps compute with communication by
 * calling nz_coll_test() or nz_coll_progress() now and then (e.g. after
 * each layer) and nz_coll_wait() when it needs the result.  Collectives
 * are not thread safe, like the communicator; at most NZ_COLL_MAX_ACTIVE
 * may be in flight on one communicator.
 *
 * Tags with bit 63 set (NZ_TAG_COLL) are reserved for the collectives:
 * point-to-point messages must use tags below it.
 */
#include "nezha_dtype.h"

#define NZ_TAG_COLL		(1ULL << 63)
#define NZ_COLL_MAX_ACTIVE	8

struct nz_coll_request;

/* The collectives, for tuning and reports. */
enum nz_coll {
	NZ_COLL_ALLREDUCE,
	NZ_COLL_BROADCAST,
	NZ_COLL_REDUCE,
	NZ_COLL_ALLGATHER,
	NZ_COLL_REDUCE_SCATTER,
	NZ_COLL_ALLTOALL,
	NZ_COLL_BARRIER,
	NZ_COLL_COUNT		/* not a collective */
};

/* Algorithms; each collective implements a few of them (collectives.rst). */
enum nz_coll_algo {
	NZ_ALGO_AUTO,		/* chosen by size and rank count */
	NZ_ALGO_RD,		/* recursive doubling (allreduce) */
	NZ_ALGO_HD,		/* recursive halving-doubling (allreduce) */
	NZ_ALGO_RING,		/* pipelined ring (allreduce, allgather,
				 * reduce_scatter) */
	NZ_ALGO_TREE,		/* binomial tree (broadcast, reduce) */
	NZ_ALGO_CHAIN,		/* pipelined chain (broadcast, reduce) */
	NZ_ALGO_BRUCK,		/* Bruck (allgather) */
	NZ_ALGO_DIRECT,		/* one message per pair (reduce_scatter) */
	NZ_ALGO_PAIRWISE,	/* one message per pair (alltoall) */
	NZ_ALGO_DISSEMINATION,	/* dissemination (barrier) */
	NZ_ALGO_COUNT		/* not an algorithm */
};

/*
 * Algorithm selection and pipelining of one communicator.  Defaults come
 * from the environment when the first collective runs (NEZHA_ALGO,
 * NEZHA_ALLREDUCE_RD_MAX, NEZHA_ALLREDUCE_CROSSOVER, NEZHA_COLL_SMALL,
 * NEZHA_COLL_SEGMENT, NEZHA_COLL_SMALL_SEGMENT, NEZHA_COLL_WINDOW,
 * NEZHA_COLL_CHECK; see
 * collectives.rst).  Every rank must use the same tuning (a difference is
 * detected as a mismatch).
 */
struct nz_coll_tuning {
	unsigned char algo[NZ_COLL_COUNT];	/* enum nz_coll_algo, AUTO = by size */
	size_t allreduce_rd_max;	/* bytes: recursive doubling up to this */
	size_t allreduce_crossover;	/* bytes: halving-doubling up to this,
					 * ring above (4 ranks or more) */
	size_t small_max;		/* bytes: tree/bruck/direct up to this,
					 * pipelined algorithms above */
	size_t segment;			/* bytes per pipelined message, at
					 * most (units under 4 segments of
					 * it are cut in 4 of >= 64 KiB) */
	size_t small_segment;		/* recursive doubling sends larger
					 * vectors as pieces of this size
					 * (at most 16; 0: never) */
	unsigned int window;		/* pipelined receives in flight */
	int check;			/* 1: agreement round before each collective */
};

int nz_coll_get_tuning(struct nz_comm *comm, struct nz_coll_tuning *out);
/* Returns -EINVAL for an algorithm a collective does not implement. */
int nz_coll_set_tuning(struct nz_comm *comm, const struct nz_coll_tuning *t);
/* The algorithm a collective of `bytes` would use (bytes as nezha-bench counts them). */
enum nz_coll_algo nz_coll_select(struct nz_comm *comm, enum nz_coll coll,
				 size_t bytes);
/* "rd", "hd", "ring", ... (NULL for an invalid value); and the reverse. */
const char *nz_coll_algo_name(enum nz_coll_algo algo);
int nz_coll_algo_parse(const char *name, enum nz_coll_algo *out);
const char *nz_coll_name(enum nz_coll coll);

/* recvbuf[i] = OP over the ranks of sendbuf[i], on every rank. */
int nz_allreduce(struct nz_comm *comm, const void *sendbuf, void *recvbuf,
		 size_t count, enum nz_dtype dtype, enum nz_redop op);
/* recvbuf = root's sendbuf on every rank (sendbuf is read at the root only). */
int nz_broadcast(struct nz_comm *comm, const void *sendbuf, void *recvbuf,
		 size_t count, enum nz_dtype dtype, int root);
/* The root's recvbuf[i] = OP over the ranks of sendbuf[i] (recvbuf is
 * used at the root only and may be NULL elsewhere). */
int nz_reduce(struct nz_comm *comm, const void *sendbuf, void *recvbuf,
	      size_t count, enum nz_dtype dtype, enum nz_redop op, int root);
/* recvbuf (size * count elements) = every rank's sendbuf, in rank order. */
int nz_allgather(struct nz_comm *comm, const void *sendbuf, void *recvbuf,
		 size_t count, enum nz_dtype dtype);
/* sendbuf holds size blocks of count elements; recvbuf (count) = OP over
 * the ranks of block `rank`. */
int nz_reduce_scatter(struct nz_comm *comm, const void *sendbuf,
		      void *recvbuf, size_t count, enum nz_dtype dtype,
		      enum nz_redop op);
/* Block j of sendbuf (count elements each, size blocks) goes to rank j,
 * which stores it as its block `rank` of recvbuf. */
int nz_alltoall(struct nz_comm *comm, const void *sendbuf, void *recvbuf,
		size_t count, enum nz_dtype dtype);
/* Returns when every rank has entered it. */
int nz_barrier(struct nz_comm *comm);

/*
 * Non-blocking forms: *req receives the request (NULL on failure).  The
 * buffers belong to the collective until nz_coll_wait() or nz_coll_test()
 * reports it finished.  -EBUSY when NZ_COLL_MAX_ACTIVE are in flight.
 */
int nz_iallreduce(struct nz_comm *comm, const void *sendbuf, void *recvbuf,
		  size_t count, enum nz_dtype dtype, enum nz_redop op,
		  struct nz_coll_request **req);
int nz_ibroadcast(struct nz_comm *comm, const void *sendbuf, void *recvbuf,
		  size_t count, enum nz_dtype dtype, int root,
		  struct nz_coll_request **req);
int nz_ireduce(struct nz_comm *comm, const void *sendbuf, void *recvbuf,
	       size_t count, enum nz_dtype dtype, enum nz_redop op, int root,
	       struct nz_coll_request **req);
int nz_iallgather(struct nz_comm *comm, const void *sendbuf, void *recvbuf,
		  size_t count, enum nz_dtype dtype,
		  struct nz_coll_request **req);
int nz_ireduce_scatter(struct nz_comm *comm, const void *sendbuf,
		       void *recvbuf, size_t count, enum nz_dtype dtype,
		       enum nz_redop op, struct nz_coll_request **req);
int nz_ialltoall(struct nz_comm *comm, const void *sendbuf, void *recvbuf,
		 size_t count, enum nz_dtype dtype,
		 struct nz_coll_request **req);
int nz_ibarrier(struct nz_comm *comm, struct nz_coll_request **req);

/*
 * Wait until req finishes, free it and return its outcome (0 or -errno).
 * The wait is bounded: by the module's transfer timeout, and by the
 * communicator's wait timeout (nz_comm_set_wait_timeout) as a limit on
 * the time without any progress, which fails the collective with
 * -ETIMEDOUT.  It returns only when no transfer of req can still touch
 * its buffers.
 */
int nz_coll_wait(struct nz_coll_request *req);
/* Advance; -EAGAIN while req runs, else free req and return its outcome. */
int nz_coll_test(struct nz_coll_request *req);
/* Advance every collective of comm without blocking; returns how many are
 * still running, or -EINVAL. */
int nz_coll_progress(struct nz_comm *comm);

/* ---- Progress engine: one communicator for many threads ---- */

/*
 * A communicator is not thread safe and advances only inside libnezha
 * calls.  A framework (torch.distributed, with DDP's buckets reduced while
 * backward still runs) needs the opposite: operations posted from any
 * thread, many in flight, completing on their own.  An engine owns a
 * communicator and one thread that runs everything on it:
 *
 *  - nz_engine_post() (any thread) queues an operation and returns; the
 *    engine starts operations in the order they were posted (the order
 *    every rank must post its collectives in), several at once, and calls
 *    the operation's done callback from its thread when no transfer of it
 *    can still touch its buffers.
 *  - The thread sleeps in poll() on an eventfd that the ring's completions
 *    and new posts signal: completion never depends on a caller polling,
 *    a point-to-point receive and the collectives in flight advance
 *    together, and an idle engine costs no CPU.
 *  - nz_engine_abort() (any thread, also while operations are in flight)
 *    fails what has not started, destroys the module's communicator (which
 *    fails every transfer in flight with -ECANCELED and closes the rails,
 *    so that the peers' operations fail too) and completes everything
 *    with the abort's errno.
 *  - Timeouts: an operation fails when one of its transfers fails (no
 *    rail left: -ENETDOWN; the peer left: -ECONNRESET) or exceeds the
 *    module's transfer timeout (nz_comm_opts.op_timeout_ms, which a
 *    framework sets to its own collective timeout).  A peer that is busy
 *    computing is not an error before that: the rails' health is watched
 *    by the module, not by the engine.
 *
 * Operations (struct nz_op, counts in elements of dtype):
 *   ALLREDUCE .. BARRIER  as nz_iallreduce() .. nz_ibarrier();
 *   ALLGATHERV  sendbuf (counts[rank] elements) -> recvbufs[r] on every
 *               rank, counts[r] elements from rank r;
 *   ALLTOALLV   sendbufs[r] (sendcounts[r]) -> rank r's recvbufs[rank]
 *               (its recvcounts[rank]);
 *   GATHER      sendbuf (count) -> the root's recvbufs[r];
 *   SCATTER     the root's sendbufs[r] (count) -> rank r's recvbuf;
 *   SEND, RECV  count elements to / from rank `root` under tag (below
 *               NZ_TAG_RESERVED); a RECV's done callback gets the message's
 *               length in bytes.
 * The arrays (sendbufs, recvbufs, counts) are copied at post; the buffers
 * belong to the operation until its callback.  The v-variants and
 * GATHER/SCATTER move one message per pair of ranks, on tags with bit 62
 * set (NZ_TAG_VCOLL).
 */
#define NZ_TAG_VCOLL		(1ULL << 62)
#define NZ_TAG_RESERVED		NZ_TAG_VCOLL	/* user tags are below this */

enum nz_op_kind {
	NZ_OP_ALLREDUCE,
	NZ_OP_BROADCAST,
	NZ_OP_REDUCE,
	NZ_OP_ALLGATHER,
	NZ_OP_REDUCE_SCATTER,
	NZ_OP_ALLTOALL,
	NZ_OP_BARRIER,
	NZ_OP_ALLGATHERV,
	NZ_OP_ALLTOALLV,
	NZ_OP_GATHER,
	NZ_OP_SCATTER,
	NZ_OP_SEND,
	NZ_OP_RECV,
	NZ_OP_KIND_COUNT	/* not an operation */
};

struct nz_op {
	enum nz_op_kind kind;
	const void *sendbuf;
	void *recvbuf;
	size_t count;
	enum nz_dtype dtype;
	enum nz_redop op;
	int root;			/* root, or the peer of SEND/RECV */
	uint64_t tag;			/* SEND/RECV */
	const void *const *sendbufs;	/* ALLTOALLV, SCATTER: size entries */
	void *const *recvbufs;		/* ALLGATHERV, ALLTOALLV, GATHER */
	const size_t *sendcounts;	/* ALLTOALLV */
	const size_t *recvcounts;	/* ALLGATHERV, ALLTOALLV */
};

/*
 * Called once per operation, from the engine's thread: err is 0 or the
 * negative errno, msg libnezha's explanation ("" on success; valid during
 * the call only), bytes what a RECV received.  It must not block on the
 * engine (posting more from it is fine).
 */
typedef void (*nz_done_fn)(void *arg, int err, const char *msg, size_t bytes);

struct nz_engine;

/* Take comm over (nothing else may use it any more) and start the thread. */
int nz_engine_start(struct nz_engine **out, struct nz_comm *comm);
/* Queue op.  Returns 0 (fn will be called), or -EINVAL (bad op, with
 * nz_last_error()), -ENOMEM, or the abort's errno after nz_engine_abort(). */
int nz_engine_post(struct nz_engine *e, const struct nz_op *op,
		   nz_done_fn fn, void *arg);
/* Fail everything with err (< 0, e.g. -ECANCELED); see above.  Any thread. */
int nz_engine_abort(struct nz_engine *e, int err);
/* Finish what was posted (what still runs 5 s later is aborted with
 * -ESHUTDOWN), stop the thread, destroy the communicator. */
void nz_engine_destroy(struct nz_engine *e);
/* The communicator's rank and size (read-only: safe from any thread). */
const struct nz_comm *nz_engine_comm(const struct nz_engine *e);

#ifdef __cplusplus
}
#endif

#endif /* NEZHA_H */
