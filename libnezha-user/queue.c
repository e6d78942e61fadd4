// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Queue layer: Nezha commands as IORING_OP_URING_CMD SQE128 entries on an
 * io_uring whose requests target the /dev/nezha file descriptor.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <liburing.h>
#include "nezha.h"

#define NZ_QUEUE_DEFAULT_ENTRIES 64

struct nz_queue {
	struct io_uring ring;
	int fd;
	unsigned int flags;
};

const char *nz_library_version(void)
{
	return NZ_LIB_VERSION;
}

static const char *nz_device_path(const struct nz_queue_opts *opts)
{
	const char *env;

	if (opts && opts->path)
		return opts->path;
	env = getenv("NEZHA_DEVICE");
	return env && *env ? env : NZ_DEVICE_PATH;
}

int nz_queue_open(struct nz_queue **qp, const struct nz_queue_opts *opts)
{
	unsigned int entries = NZ_QUEUE_DEFAULT_ENTRIES;
	unsigned int ring_flags = IORING_SETUP_SQE128;
	struct nz_queue *q;
	int ret;

	if (!qp)
		return -EINVAL;
	*qp = NULL;
	if (opts) {
		if (opts->flags & ~NZ_QUEUE_CQE32)
			return -EINVAL;
		if (opts->entries)
			entries = opts->entries;
		if (opts->flags & NZ_QUEUE_CQE32)
			ring_flags |= IORING_SETUP_CQE32;
	}
	if (entries > 32768)
		return -EINVAL;

	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	q->flags = opts ? opts->flags : 0;
	q->fd = open(nz_device_path(opts), O_RDWR | O_CLOEXEC);
	if (q->fd < 0) {
		ret = -errno;
		goto out_free;
	}
	ret = io_uring_queue_init(entries, &q->ring, ring_flags);
	if (ret < 0)
		goto out_close;
	*qp = q;
	return 0;

out_close:
	close(q->fd);
out_free:
	free(q);
	return ret;
}

void nz_queue_close(struct nz_queue *q)
{
	if (!q)
		return;
	io_uring_queue_exit(&q->ring);
	close(q->fd);
	free(q);
}

int nz_queue_fd(const struct nz_queue *q)
{
	return q->fd;
}

int nz_queue_register_eventfd(struct nz_queue *q, int efd)
{
	return efd < 0 ? io_uring_unregister_eventfd(&q->ring) :
			 io_uring_register_eventfd(&q->ring, efd);
}

int nz_queue_prep(struct nz_queue *q, uint32_t op, const struct nz_sqe *cmd,
		  uint64_t user_data, int fixed_index)
{
	struct io_uring_sqe *sqe;

	if (fixed_index > UINT16_MAX)
		return -EINVAL;
	sqe = io_uring_get_sqe(&q->ring);
	if (!sqe)
		return -EBUSY;
	/* An SQE128 entry: the command payload follows the 64-byte SQE. */
	memset(sqe, 0, 2 * sizeof(*sqe));
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = q->fd;
	sqe->cmd_op = op;
	sqe->user_data = user_data;
	if (fixed_index >= 0) {
		sqe->uring_cmd_flags = IORING_URING_CMD_FIXED;
		sqe->buf_index = (uint16_t)fixed_index;
	}
	if (cmd)
		memcpy(sqe->cmd, cmd, sizeof(*cmd));
	return 0;
}

int nz_queue_submit(struct nz_queue *q)
{
	return io_uring_submit(&q->ring);
}

static void nz_cqe_fill(const struct nz_queue *q, const struct io_uring_cqe *c,
			struct nz_cqe *out)
{
	out->user_data = c->user_data;
	out->res = c->res;
	out->flags = c->flags;
	out->res2 = (q->flags & NZ_QUEUE_CQE32) ? c->big_cqe[0] : 0;
}

int nz_queue_wait(struct nz_queue *q, struct nz_cqe *cqe, int timeout_ms)
{
	struct io_uring_cqe *c;
	int ret;

	if (timeout_ms < 0) {
		ret = io_uring_wait_cqe(&q->ring, &c);
	} else {
		struct __kernel_timespec ts = {
			.tv_sec = timeout_ms / 1000,
			.tv_nsec = (long long)(timeout_ms % 1000) * 1000000,
		};

		ret = io_uring_wait_cqe_timeout(&q->ring, &c, &ts);
	}
	if (ret < 0)
		return ret;
	nz_cqe_fill(q, c, cqe);
	io_uring_cqe_seen(&q->ring, c);
	return 0;
}

int nz_queue_peek(struct nz_queue *q, struct nz_cqe *cqe)
{
	struct io_uring_cqe *c;

	if (io_uring_peek_cqe(&q->ring, &c) < 0)
		return -EAGAIN;
	nz_cqe_fill(q, c, cqe);
	io_uring_cqe_seen(&q->ring, c);
	return 0;
}

int nz_queue_peek_batch(struct nz_queue *q, struct nz_cqe *cqes,
			unsigned int max)
{
	struct io_uring_cqe *c;
	unsigned int head, n = 0;

	io_uring_for_each_cqe(&q->ring, head, c) {
		if (n == max)
			break;
		nz_cqe_fill(q, c, &cqes[n++]);
	}
	io_uring_cq_advance(&q->ring, n);
	return (int)n;
}

int nz_queue_register_buffers(struct nz_queue *q, const struct iovec *iov,
			      unsigned int nr)
{
	return io_uring_register_buffers(&q->ring, iov, nr);
}

int nz_queue_unregister_buffers(struct nz_queue *q)
{
	return io_uring_unregister_buffers(&q->ring);
}

void nz_sqe_nop(struct nz_sqe *cmd, uint32_t flags, int32_t result,
		uint32_t delay_us, uint64_t res2)
{
	memset(cmd, 0, sizeof(*cmd));
	cmd->flags = flags;
	cmd->nop.result = result;
	cmd->nop.delay_us = delay_us;
	cmd->nop.res2 = res2;
}

/*
 * Synchronous helper: only valid on a queue with no other command in
 * flight, since it consumes the next completion.
 */
int nz_queue_version(struct nz_queue *q, struct nz_version *out)
{
	struct nz_sqe cmd = { 0 };
	struct nz_cqe cqe;
	int ret;

	cmd.version.addr = (uint64_t)(uintptr_t)out;
	cmd.version.len = sizeof(*out);
	ret = nz_queue_prep(q, NZ_CMD_VERSION, &cmd, 0, -1);
	if (ret)
		return ret;
	ret = nz_queue_submit(q);
	if (ret < 0)
		return ret;
	ret = nz_queue_wait(q, &cqe, 5000);
	if (ret)
		return ret;
	return cqe.res < 0 ? cqe.res : 0;
}
