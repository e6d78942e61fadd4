// SPDX-License-Identifier: GPL-2.0
/*
 * Host unit tests of libnezha's progress engine (engine.c) without the
 * module: the engine runs a communicator whose queue targets /dev/null,
 * where io_uring completes every SEND/RECV command at once (0 since Linux
 * 6.3, -EOPNOTSUPP before).  That exercises what is the engine's own:
 * posting from many threads, the eventfd wake-up by ring completions and
 * by posts (an idle engine sleeps without a timeout: a missed wake-up
 * hangs the test), callbacks from the engine's thread, the v-collectives'
 * local copies, argument checks, errors carried with their message, abort
 * and destruction with operations queued.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "internal.h"
#include "tap.h"

struct done_log {
	atomic_int n, errors, other_thread;
	pthread_t poster;
	int last_err;
	char msg[256];
};

static void on_done(void *arg, int err, const char *msg, size_t bytes)
{
	struct done_log *d = arg;

	(void)bytes;
	if (err && err != -EOPNOTSUPP) {
		atomic_fetch_add(&d->errors, 1);
		d->last_err = err;
		snprintf(d->msg, sizeof(d->msg), "%s", msg);
	}
	if (!pthread_equal(pthread_self(), d->poster))
		atomic_fetch_add(&d->other_thread, 1);
	atomic_fetch_add(&d->n, 1);
}

static bool wait_n(struct done_log *d, int n, int ms)
{
	for (int i = 0; i < ms && atomic_load(&d->n) < n; i++)
		usleep(1000);
	return atomic_load(&d->n) >= n;
}

static struct nz_engine *devnull_engine(int rank, int size)
{
	/* As comm.c sizes a communicator's ring: its CQ holds every
	 * request that may be in flight (NZ_COMM_MAX_INFLIGHT). */
	struct nz_queue_opts o = { .path = "/dev/null", .entries = 256 };
	struct nz_queue *q;
	struct nz_comm *c;
	struct nz_engine *e;

	if (nz_queue_open(&q, &o))
		return NULL;
	if (nzi_comm_wrap(&c, q, rank, size, 7, 0)) {
		nz_queue_close(q);
		return NULL;
	}
	if (nz_engine_start(&e, c)) {
		nz_comm_destroy(c);
		return NULL;
	}
	return e;
}

struct poster {
	struct nz_engine *e;
	struct done_log *d;
	int id, bad;
	char buf[64];
};

static void *post_many(void *arg)
{
	struct poster *p = arg;

	for (int i = 0; i < 50; i++) {
		struct nz_op op = { .kind = i % 2 ? NZ_OP_SEND : NZ_OP_RECV,
				    .sendbuf = p->buf, .recvbuf = p->buf, .count = 64,
				    .dtype = NZ_UINT8, .root = (p->id + i) % 3 ? 0 : 2,
				    .tag = (uint64_t)i };

		p->bad += nz_engine_post(p->e, &op, on_done, p->d) != 0;
	}
	return NULL;
}

static void test_threads(void)
{
	struct nz_engine *e = devnull_engine(1, 4);
	struct done_log d = { .poster = pthread_self() };
	struct poster p[4];
	pthread_t t[4];
	int bad = 0;
	bool ok;

	if (!e) {
		tap_skip("engine on /dev/null", "cannot open an io_uring on /dev/null here");
		return;
	}
	for (int i = 0; i < 4; i++) {
		p[i] = (struct poster){ .e = e, .d = &d, .id = i };
		pthread_create(&t[i], NULL, post_many, &p[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		bad += p[i].bad;
	}
	tap_ok(!bad, "4 threads post 50 sends and receives each");
	ok = wait_n(&d, 200, 5000);
	tap_ok(ok, "every one completes by callback (%d of 200)", atomic_load(&d.n));
	tap_ok(!atomic_load(&d.errors), "with the transport's result (%s)", d.msg);
	tap_ok(atomic_load(&d.other_thread) == atomic_load(&d.n),
	       "callbacks run on the engine's thread, not the posters'");

	/* An idle engine sleeps without a timeout: only the post wakes it. */
	usleep(100 * 1000);
	{
		struct nz_op op = { .kind = NZ_OP_SEND, .sendbuf = p[0].buf, .count = 1,
				    .dtype = NZ_UINT8, .root = 0 };
		int64_t t0 = nzi_now_ms();

		nz_engine_post(e, &op, on_done, &d);
		tap_ok(wait_n(&d, 201, 2000) && nzi_now_ms() - t0 < 500,
		       "an idle engine wakes for a post (%lld ms)", (long long)(nzi_now_ms() - t0));
	}
	nz_engine_destroy(e);
}

static void test_vcoll(void)
{
	struct nz_engine *e = devnull_engine(2, 4);
	struct done_log d = { .poster = pthread_self() };
	int32_t snd[4][5], rcv[4][5], g[4][3], one[3] = { 7, 8, 9 };
	const void *sb[4];
	void *rb[4], *gb[4];
	size_t sc[4] = { 5, 5, 5, 5 }, rc[4] = { 5, 5, 5, 5 };
	struct nz_op op = { .kind = NZ_OP_ALLTOALLV, .dtype = NZ_INT32,
			    .sendbufs = sb, .recvbufs = rb, .sendcounts = sc, .recvcounts = rc };
	bool ok;

	if (!e) {
		tap_skip("v-collectives on /dev/null", "cannot open an io_uring on /dev/null here");
		return;
	}
	for (int r = 0; r < 4; r++) {
		for (int k = 0; k < 5; k++)
			snd[r][k] = r * 10 + k;
		sb[r] = snd[r];
		rb[r] = rcv[r];
		gb[r] = g[r];
	}
	memset(rcv, 0, sizeof(rcv));
	tap_ok(nz_engine_post(e, &op, on_done, &d) == 0, "alltoallv posted");
	memset(sb, 0, sizeof(sb));	/* the engine copied the arrays */
	tap_ok(wait_n(&d, 1, 5000) && !memcmp(rcv[2], snd[2], sizeof(snd[2])),
	       "alltoallv completes once; this rank's own block is copied locally");
	op = (struct nz_op){ .kind = NZ_OP_GATHER, .dtype = NZ_INT32, .sendbuf = one,
			     .count = 3, .root = 2, .recvbufs = gb };
	memset(g, 0, sizeof(g));
	tap_ok(nz_engine_post(e, &op, on_done, &d) == 0 && wait_n(&d, 2, 5000) &&
	       !memcmp(g[2], one, sizeof(one)), "gather at the root keeps its own block");
	op.recvbufs = NULL;
	tap_ok(nz_engine_post(e, &op, on_done, &d) == -EINVAL && strstr(nz_last_error(), "gather"),
	       "gather without its array: -EINVAL (%s)", nz_last_error());
	op = (struct nz_op){ .kind = NZ_OP_SEND, .dtype = NZ_UINT8, .root = 2, .count = 1,
			     .sendbuf = one };
	tap_ok(nz_engine_post(e, &op, on_done, &d) == -EINVAL, "a send to oneself: -EINVAL (%s)",
	       nz_last_error());
	op.root = 1;
	op.tag = NZ_TAG_RESERVED;
	tap_ok(nz_engine_post(e, &op, on_done, &d) == -EINVAL, "a reserved tag: -EINVAL (%s)",
	       nz_last_error());
	op = (struct nz_op){ .kind = NZ_OP_ALLREDUCE, .dtype = NZ_FLOAT32, .op = NZ_SUM,
			     .sendbuf = snd, .recvbuf = rcv, .count = 4 };
	ok = nz_engine_post(e, &op, on_done, &d) == 0 && wait_n(&d, 3, 5000);
	tap_ok(ok && d.errors == 1 && d.msg[0],
	       "an allreduce whose messages come back empty fails with libnezha's message (%d: %s)",
	       d.last_err, d.msg);
	nz_engine_destroy(e);
}

static void test_abort(void)
{
	struct nz_engine *e = devnull_engine(0, 2);
	struct done_log d = { .poster = pthread_self() };
	char b[8];
	struct nz_op op = { .kind = NZ_OP_RECV, .recvbuf = b, .count = 8, .dtype = NZ_UINT8,
			    .root = 1 };
	int posted = 0;
	bool ok;

	if (!e) {
		tap_skip("abort on /dev/null", "cannot open an io_uring on /dev/null here");
		return;
	}
	for (int i = 0; i < 100; i++)
		posted += nz_engine_post(e, &op, on_done, &d) == 0;
	tap_ok(nz_engine_abort(e, -ECANCELED) == 0, "abort while %d operations were posted", posted);
	tap_ok(nz_engine_post(e, &op, on_done, &d) == -ECANCELED && strstr(nz_last_error(), "aborted"),
	       "a post after the abort fails at once (%s)", nz_last_error());
	ok = wait_n(&d, posted, 5000);
	tap_ok(ok, "every posted operation is called back (%d of %d)", atomic_load(&d.n), posted);
	tap_ok(nz_engine_abort(NULL, -ECANCELED) == -EINVAL && nz_engine_abort(e, 0) == -EINVAL,
	       "abort needs an engine and an errno");
	nz_engine_destroy(e);

	e = devnull_engine(0, 2);
	memset(&d, 0, sizeof(d));
	d.poster = pthread_self();
	posted = 0;
	for (int i = 0; i < 300; i++)
		posted += nz_engine_post(e, &op, on_done, &d) == 0;
	nz_engine_destroy(e);
	tap_ok(atomic_load(&d.n) == posted, "destroy returns after every callback (%d of %d)",
	       atomic_load(&d.n), posted);
}

int main(void)
{
	test_threads();
	test_vcoll();
	test_abort();
	tap_plan(tap_n);
	return tap_failed ? 1 : 0;
}
