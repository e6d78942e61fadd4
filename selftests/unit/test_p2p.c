// SPDX-License-Identifier: GPL-2.0
/*
 * Host unit tests of libnezha's point-to-point layer (p2p.c) without the
 * module: argument checks, and the request machinery on a communicator
 * whose queue targets /dev/null.  io_uring carries the SEND/RECV commands
 * to /dev/null and back (it completes them at once: 0 since Linux 6.3,
 * -EOPNOTSUPP before), which exercises submission, reaping by user_data,
 * out-of-order waits, waitall, stray completions and fixed buffers.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "tap.h"

static int devnull_ok(int res)
{
	return res == 0 || res == -EOPNOTSUPP;
}

static void test_null_args(void)
{
	struct nz_request *r = (struct nz_request *)1;
	struct nz_status st;
	char b[8] = { 0 };
	size_t got = 7;

	tap_ok(nz_isend(NULL, b, 8, 1, 0, &r) == -EINVAL && r == NULL,
	       "isend: NULL comm -> EINVAL, *req cleared");
	tap_ok(nz_irecv(NULL, b, 8, 1, 0, &r) == -EINVAL, "irecv: NULL comm -> EINVAL");
	tap_ok(nz_send(NULL, b, 8, 1, 0) == -EINVAL, "send: NULL comm -> EINVAL");
	tap_ok(nz_recv(NULL, b, 8, 1, 0, &got) == -EINVAL && got == 0,
	       "recv: NULL comm -> EINVAL, *received = 0");
	tap_ok(nz_wait(NULL, &st) == -EINVAL && nz_test(NULL, &st) == -EINVAL,
	       "wait/test: NULL request -> EINVAL");
	tap_ok(nz_waitall(NULL, 2, NULL) == -EINVAL && nz_waitall(NULL, 0, NULL) == 0,
	       "waitall: NULL array -> EINVAL, empty -> 0");
	tap_ok(nz_comm_rank(NULL) == -EINVAL && nz_comm_size(NULL) == -EINVAL &&
	       nz_comm_nrails(NULL) == -EINVAL && nz_comm_rail_name(NULL, 0) == NULL &&
	       nz_comm_set_wait_timeout(NULL, 1) == -EINVAL,
	       "accessors: NULL comm -> EINVAL / NULL");
	tap_ok(nz_comm_register_buffer(NULL, b, 8, NULL) == -EINVAL &&
	       nz_comm_unregister_buffer(NULL, 0) == -EINVAL,
	       "buffers: NULL comm -> EINVAL");
	nz_comm_destroy(NULL);
	tap_ok(1, "destroy accepts NULL");
}

static struct nz_comm *devnull_comm(int rank, int size, uint64_t features)
{
	struct nz_queue_opts o = { .path = "/dev/null", .entries = 16 };
	struct nz_queue *q;
	struct nz_comm *c;

	if (nz_queue_open(&q, &o))
		return NULL;
	if (nzi_comm_wrap(&c, q, rank, size, 7, features)) {
		nz_queue_close(q);
		return NULL;
	}
	return c;
}

static void test_args(struct nz_comm *c)
{
	struct nz_request *r;
	char b[16] = { 0 };

	tap_ok(nz_comm_rank(c) == 1 && nz_comm_size(c) == 4 && nz_comm_nrails(c) == 0 &&
	       nz_comm_rail_name(c, 0) == NULL && nz_comm_rail_name(c, -1) == NULL,
	       "accessors report rank 1 of 4, no rails");
	tap_ok(nz_isend(c, b, 16, -1, 0, &r) == -EINVAL, "negative peer -> EINVAL");
	tap_ok(nz_isend(c, b, 16, 4, 0, &r) == -EINVAL, "peer >= size -> EINVAL");
	tap_ok(nz_irecv(c, b, 16, 1, 0, &r) == -EINVAL && strstr(nz_last_error(), "peer 1"),
	       "self as peer -> EINVAL, message names the peer");
	tap_ok(nz_isend(c, NULL, 16, 0, 0, &r) == -EINVAL, "NULL buffer with a length -> EINVAL");
	tap_ok(nz_isend(c, b, 16, 0, 0, NULL) == -EINVAL, "NULL request pointer -> EINVAL");
	tap_ok(nz_comm_register_buffer(c, b, 0, &(int){ 0 }) == -EINVAL,
	       "registering an empty buffer -> EINVAL");
	tap_ok(nz_comm_unregister_buffer(c, 0) == -EINVAL, "unregistering nothing -> EINVAL");
}

static void test_requests(struct nz_comm *c)
{
	struct nz_request *r[8], *extra;
	struct nz_status st[8];
	char buf[8][64] = { { 0 } };
	int ret, good = 1, res0 = 1;

	for (int i = 0; i < 8; i++) {
		ret = (i & 1) ? nz_irecv(c, buf[i], 64, i % 4 == 1 ? 0 : 2, 100 + (uint64_t)i, &r[i])
			      : nz_isend(c, buf[i], (size_t)i, 3, 100 + (uint64_t)i, &r[i]);
		if (ret) {
			tap_diag("start %d: %d %s", i, ret, nz_last_error());
			good = 0;
		}
	}
	if (!tap_ok(good, "8 sends and receives start"))
		return;
	/* Wait in reverse order: others' completions must not be lost. */
	for (int i = 7; i >= 0; i--) {
		ret = nz_wait(r[i], &st[i]);
		if (!devnull_ok(ret) || st[i].tag != 100 + (uint64_t)i || st[i].error != ret ||
		    st[i].peer != ((i & 1) ? (i % 4 == 1 ? 0 : 2) : 3))
			good = 0;
		if (ret)
			res0 = 0;
	}
	tap_ok(good, "waiting in reverse order: each status is its own request's");
	if (res0)
		tap_ok(st[0].bytes == 0 && st[6].bytes == 0, "statuses carry the byte count (0 from /dev/null)");
	else
		tap_skip("byte counts", "/dev/null has no uring_cmd on this kernel");

	for (int i = 0; i < 8; i++)
		r[i] = NULL;
	nz_isend(c, buf[0], 1, 0, 1, &r[1]);
	nz_isend(c, buf[0], 1, 0, 2, &r[4]);
	nz_irecv(c, buf[0], 1, 0, 3, &r[6]);
	memset(st, 0xff, sizeof(st));
	ret = nz_waitall(r, 8, st);
	tap_ok(devnull_ok(ret) && !r[1] && !r[4] && !r[6] && st[1].tag == 1 && st[4].tag == 2 &&
	       st[6].tag == 3 && st[0].peer == -1, "waitall: skips NULL entries, clears the rest");

	ret = nz_isend(c, buf[0], 1, 0, 9, &extra);
	tap_ok(!ret && nz_test(extra, &st[0]) == 0 && st[0].tag == 9,
	       "test: a completed request -> 0 with its status");

	/* A completion nobody asked for: counted, ignored. */
	nz_queue_prep(nzi_comm_queue(c), NZ_CMD_NOP, NULL, 0xdead00000099ULL, -1);
	nz_queue_submit(nzi_comm_queue(c));
	nz_queue_prep(nzi_comm_queue(c), NZ_CMD_NOP, NULL, 0, -1);
	nz_queue_submit(nzi_comm_queue(c));
	ret = nz_send(c, buf[0], 4, 2, 5);
	tap_ok(devnull_ok(ret) && nzi_comm_stray(c) == 2,
	       "stray completions are counted and ignored (%lu)", nzi_comm_stray(c));

	/* Many more requests than ring entries, reused from the pool. */
	good = 1;
	for (int round = 0; round < 50 && good; round++) {
		for (int i = 0; i < 8; i++)
			if (nz_isend(c, buf[i], 64, 0, (uint64_t)i, &r[i]))
				good = 0;
		if (!devnull_ok(nz_waitall(r, 8, NULL)))
			good = 0;
	}
	tap_ok(good && c->nreqs <= 16, "400 requests through a 16-entry ring reuse %u request slots",
	       c->nreqs);
}

/*
 * Completions that come late: nz_queue_peek_batch() is wrapped (deps.mk)
 * so that the next hide_peeks reaps find nothing, as if the completion
 * were not there yet when the first reap looked.
 */
static int hide_peeks;
int __real_nz_queue_peek_batch(struct nz_queue *q, struct nz_cqe *cqes, unsigned int max);
int __wrap_nz_queue_peek_batch(struct nz_queue *q, struct nz_cqe *cqes, unsigned int max);
int __wrap_nz_queue_peek_batch(struct nz_queue *q, struct nz_cqe *cqes, unsigned int max)
{
	if (hide_peeks > 0) {
		hide_peeks--;
		return 0;
	}
	return __real_nz_queue_peek_batch(q, cqes, max);
}

static void test_late_completion(struct nz_comm *c)
{
	struct nz_request *r[2] = { NULL, NULL };
	char b[4] = { 0 };
	int64_t t0;
	int ret;

	nz_comm_set_wait_timeout(c, 500);
	/*
	 * Both complete at once (/dev/null).  The reap made for r[0] finds
	 * nothing; the one made for r[1] brings both: waitall must look at
	 * r[0] again instead of sleeping for a completion that already came.
	 */
	if (nz_isend(c, b, 4, 0, 21, &r[0]) || nz_isend(c, b, 4, 0, 22, &r[1])) {
		tap_ok(0, "two sends for the late-completion checks start");
		return;
	}
	hide_peeks = 1;
	ret = nz_waitall(r, 2, NULL);
	hide_peeks = 0;
	tap_ok(devnull_ok(ret) && !r[0] && !r[1],
	       "waitall: an entry completed by the reap for a later one is not waited for (%d)", ret);

	/*
	 * The collectives' engine tests its transfers one by one and then
	 * waits for "anything": a completion reaped by a test must end the
	 * next wait at once, even if its transfer was tested before.
	 */
	if (nz_isend(c, b, 4, 0, 23, &r[0]) || nz_isend(c, b, 4, 0, 24, &r[1])) {
		tap_ok(0, "two more sends start");
		return;
	}
	tap_ok(nz_test(r[1], NULL) == 0 && r[0]->state == NZI_REQ_DONE,
	       "testing the second request reaps the first one's completion too");
	t0 = nzi_now_ms();
	ret = nzi_comm_wait_any(c, 500);
	tap_ok(ret == 0 && nzi_now_ms() - t0 < 250,
	       "wait_any: returns at once after a completion reaped since it last returned (%d, %lld ms)",
	       ret, (long long)(nzi_now_ms() - t0));
	tap_ok(devnull_ok(nz_wait(r[0], NULL)), "the first request is done");
	ret = nzi_comm_wait_any(c, 100);
	tap_ok(ret == -ETIME, "wait_any: with nothing new it waits out its timeout (%d)", ret);
	nz_comm_set_wait_timeout(c, 0);
}

static void test_buffers(struct nz_comm *c, struct nz_comm *nofix)
{
	static char big[1 << 20], second[4096], outside[16];
	struct nz_request *r;
	int i0 = -1, i1 = -1, ret;

	tap_ok(nz_comm_register_buffer(nofix, big, sizeof(big), &i0) == -EOPNOTSUPP,
	       "register without NZ_FEAT_FIXED_BUF -> EOPNOTSUPP");
	ret = nz_comm_register_buffer(c, big, sizeof(big), &i0);
	if (ret == -ENOMEM || ret == -EPERM) {
		tap_skip("fixed buffers", "cannot pin memory here (%s)", nz_last_error());
		return;
	}
	tap_ok(!ret && i0 == 0, "register a 1 MiB buffer -> index 0 (%d)", ret);
	tap_ok(!nz_comm_register_buffer(c, second, sizeof(second), &i1) && i1 == 1,
	       "register a second one -> index 1");
	tap_ok(nzi_fixed_index(c, big + 4096, 65536) == 0 &&
	       nzi_fixed_index(c, big, sizeof(big)) == 0 &&
	       nzi_fixed_index(c, second + 10, 100) == 1,
	       "a transfer inside a registered buffer takes its fixed index");
	tap_ok(nzi_fixed_index(c, big + sizeof(big) - 10, 20) == -1 &&
	       nzi_fixed_index(c, outside, 2) == -1 && nzi_fixed_index(c, NULL, 0) == -1,
	       "a transfer straddling or outside a registered buffer does not");
	ret = nz_isend(c, big + 4096, 65536, 0, 1, &r);
	tap_ok(!ret && devnull_ok(nz_wait(r, NULL)),
	       "a send with a fixed index is accepted by io_uring");
	tap_ok(!nz_comm_unregister_buffer(c, 0) && nz_comm_unregister_buffer(c, 0) == -EINVAL,
	       "unregister index 0; again -> EINVAL");
	tap_ok(!nz_comm_register_buffer(c, big, 4096, &i0) && i0 == 0,
	       "the freed index is reused");
	ret = nz_irecv(c, second, sizeof(second), 2, 1, &r);
	tap_ok(!ret && devnull_ok(nz_wait(r, NULL)), "a receive into registered index 1");
	tap_ok(!nz_comm_unregister_buffer(c, 1) && !nz_comm_unregister_buffer(c, 0) && c->nbufs == 0,
	       "unregister everything");
}

int main(void)
{
	struct nz_comm *c, *nofix;

	test_null_args();
	c = devnull_comm(1, 4, NZ_FEAT_P2P | NZ_FEAT_FIXED_BUF);
	nofix = devnull_comm(0, 2, 0);
	if (!c || !nofix) {
		tap_skip("request machinery", "io_uring is not available on this host");
	} else {
		test_args(c);
		test_requests(c);
		test_late_completion(c);
		test_buffers(c, nofix);
	}
	nz_comm_destroy(c);
	nz_comm_destroy(nofix);
	tap_plan(tap_n);
	return tap_exit();
}
