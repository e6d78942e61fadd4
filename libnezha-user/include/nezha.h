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

#ifdef __cplusplus
}
#endif

#endif /* NEZHA_H */
