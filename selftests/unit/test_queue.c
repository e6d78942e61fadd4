// SPDX-License-Identifier: GPL-2.0
/*
 * Host unit tests of libnezha's queue layer.  The host cannot load the
 * module, so the ring is pointed at /dev/null: io_uring still carries the
 * SQE128 commands to the file and back, which checks everything but the
 * module's own handling (that is the guests' job).
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "nezha.h"
#include "tap.h"

static void test_abi_layout(void)
{
	tap_ok(sizeof(struct nz_sqe) == 80, "struct nz_sqe fills the 80-byte SQE128 payload");
	tap_ok(sizeof(struct nz_version) == 80, "struct nz_version is 80 bytes");
	tap_ok(offsetof(struct nz_sqe, nop.result) == 8 &&
	       offsetof(struct nz_sqe, nop.delay_us) == 12 &&
	       offsetof(struct nz_sqe, nop.res2) == 16 &&
	       offsetof(struct nz_sqe, xfer.peer) == 32 &&
	       offsetof(struct nz_sqe, rsvd) == 72,
	       "payload field offsets are the documented ones");
}

static void test_open_errors(void)
{
	struct nz_queue_opts o = { .path = "/nonexistent/nezha" };
	struct nz_queue *q = (struct nz_queue *)1;

	tap_ok(nz_queue_open(&q, &o) == -ENOENT && q == NULL,
	       "missing device -> ENOENT, *qp cleared");
	o.path = "/dev/null";
	o.flags = 1u << 5;
	tap_ok(nz_queue_open(&q, &o) == -EINVAL, "unknown queue flag -> EINVAL");
	o.flags = 0;
	o.entries = 1u << 20;
	tap_ok(nz_queue_open(&q, &o) == -EINVAL, "absurd ring size -> EINVAL");
	tap_ok(nz_queue_open(NULL, NULL) == -EINVAL, "NULL out pointer -> EINVAL");
	setenv("NEZHA_DEVICE", "/nonexistent/from-env", 1);
	tap_ok(nz_queue_open(&q, NULL) == -ENOENT, "$NEZHA_DEVICE is honoured");
	unsetenv("NEZHA_DEVICE");
}

static void test_ring(void)
{
	struct nz_queue_opts o = { .path = "/dev/null", .entries = 8,
				   .flags = NZ_QUEUE_CQE32 };
	struct nz_cqe cqe, batch[8];
	struct nz_queue *q;
	struct nz_sqe cmd;
	int ret, i, busy = 0;

	ret = nz_queue_open(&q, &o);
	if (ret == -EPERM || ret == -ENOSYS) {
		tap_skip("ring tests", "io_uring unavailable on this host (%s)",
			 strerror(-ret));
		return;
	}
	if (!tap_ok(ret == 0, "queue on /dev/null opens (%d)", ret))
		return;
	tap_ok(nz_queue_fd(q) >= 0, "queue exposes its fd");
	tap_ok(nz_queue_peek(q, &cqe) == -EAGAIN, "peek on an empty ring -> EAGAIN");
	tap_ok(nz_queue_wait(q, &cqe, 20) == -ETIME, "wait with a timeout -> ETIME");

	nz_sqe_nop(&cmd, NZ_NOP_F_RESULT, 5, 0, 9);
	tap_ok(cmd.flags == NZ_NOP_F_RESULT && cmd.nop.result == 5 &&
	       cmd.nop.res2 == 9 && !cmd.rsvd, "nz_sqe_nop packs its fields");
	tap_ok(nz_queue_prep(q, NZ_CMD_NOP, &cmd, 1, 70000) == -EINVAL,
	       "fixed index beyond u16 -> EINVAL");
	for (i = 0; i < 9; i++)
		if (nz_queue_prep(q, NZ_CMD_NOP, &cmd, 100 + i, -1) == -EBUSY)
			busy++;
	tap_ok(busy == 1, "ninth prep on an 8-entry ring -> EBUSY");
	tap_ok(nz_queue_submit(q) == 8, "submit returns the number submitted");
	ret = nz_queue_wait(q, &cqe, 2000);
	/* /dev/null has a no-op uring_cmd since Linux 6.3; before, none. */
	tap_ok(!ret && cqe.user_data == 100 &&
	       (cqe.res == 0 || cqe.res == -EOPNOTSUPP),
	       "uring_cmd reaches the file and comes back (res %d)", cqe.res);
	ret = nz_queue_peek_batch(q, batch, 8);
	tap_ok(ret == 7 && batch[0].user_data == 101 && batch[6].user_data == 107,
	       "peek_batch reaps the other 7 in order");
	tap_ok(nz_queue_peek_batch(q, batch, 8) == 0, "and then nothing is left");
	nz_queue_close(q);
	nz_queue_close(NULL);
	tap_ok(1, "close accepts NULL");
}

int main(void)
{
	tap_ok(!strcmp(nz_library_version(), NZ_LIB_VERSION),
	       "library version %s", nz_library_version());
	test_abi_layout();
	test_open_errors();
	test_ring();
	tap_plan(tap_n);
	return tap_exit();
}
