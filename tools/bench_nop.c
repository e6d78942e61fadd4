// SPDX-License-Identifier: GPL-2.0
/*
 * nezha-bench nop: the cost of the /dev/nezha command path.  Runs the same
 * number of commands, in the same batch sizes, through NZ_CMD_NOP (a uring
 * command on the device, through libnezha) and through io_uring's own
 * IORING_OP_NOP on an identical SQE128 ring, and prints the ratio.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <liburing.h>
#include "nezha.h"
#include "bench.h"

/* Completions of one batch; returns 0 or a negative errno. */
static int nzb_reap(struct nz_queue *q, unsigned int n)
{
	struct nz_cqe cqes[64];
	int got;

	while (n) {
		got = nz_queue_peek_batch(q, cqes, n < 64 ? n : 64);
		if (got == 0) {
			int ret = nz_queue_wait(q, cqes, 5000);

			if (ret)
				return ret;
			got = 1;
		}
		for (int i = 0; i < got; i++)
			if (cqes[i].res)
				return cqes[i].res;
		n -= (unsigned int)got;
	}
	return 0;
}

static double nzb_nezha_rate(unsigned long n, unsigned int batch)
{
	struct nz_queue_opts o = { .entries = 128 };
	struct nz_queue *q;
	struct nz_sqe cmd;
	unsigned long done = 0;
	double t;
	int ret;

	ret = nz_queue_open(&q, &o);
	if (ret) {
		fprintf(stderr, "nezha-bench: open: %s\n", strerror(-ret));
		return -1;
	}
	nz_sqe_nop(&cmd, 0, 0, 0, 0);
	t = nzb_now();
	while (done < n) {
		for (unsigned int i = 0; i < batch; i++)
			nz_queue_prep(q, NZ_CMD_NOP, &cmd, done + i, -1);
		if (nz_queue_submit(q) != (int)batch ||
		    nzb_reap(q, batch)) {
			nz_queue_close(q);
			return -1;
		}
		done += batch;
	}
	t = nzb_now() - t;
	nz_queue_close(q);
	return (double)n / t;
}

static double nzb_uring_rate(unsigned long n, unsigned int batch)
{
	struct io_uring ring;
	struct io_uring_cqe *cqe;
	unsigned long done = 0;
	double t;

	if (io_uring_queue_init(128, &ring, IORING_SETUP_SQE128))
		return -1;
	t = nzb_now();
	while (done < n) {
		for (unsigned int i = 0; i < batch; i++) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);

			io_uring_prep_nop(sqe);
			sqe->user_data = done + i;
		}
		if (io_uring_submit_and_wait(&ring, batch) != (int)batch)
			goto fail;
		for (unsigned int i = 0; i < batch; i++) {
			if (io_uring_wait_cqe(&ring, &cqe) || cqe->res)
				goto fail;
			io_uring_cqe_seen(&ring, cqe);
		}
		done += batch;
	}
	t = nzb_now() - t;
	io_uring_queue_exit(&ring);
	return (double)n / t;
fail:
	io_uring_queue_exit(&ring);
	return -1;
}

int nzb_bench_nop(int argc, char **argv)
{
	static const unsigned int batches[] = { 1, 8, 64 };
	unsigned long n = 200000;
	int opt, rounds = 3;

	while ((opt = getopt(argc, argv, "n:r:")) != -1) {
		switch (opt) {
		case 'n':
			n = strtoul(optarg, NULL, 0);
			break;
		case 'r':
			rounds = atoi(optarg);
			break;
		default:
			fprintf(stderr, "usage: nezha-bench nop [-n COMMANDS] [-r ROUNDS]\n");
			return -EINVAL;
		}
	}
	if (n < 64 || rounds < 1)
		return -EINVAL;
	n -= n % 64;
	printf("# nezha-bench nop: %lu commands per run, best of %d rounds, SQE128 rings\n",
	       n, rounds);
	printf("# %6s %16s %16s %8s\n", "batch", "nezha NOP/s", "io_uring NOP/s",
	       "ratio");
	for (size_t b = 0; b < sizeof(batches) / sizeof(batches[0]); b++) {
		double best_nz = 0, best_ur = 0;

		for (int r = 0; r < rounds; r++) {
			/* Interleave so drift hits both alike. */
			double nz = nzb_nezha_rate(n, batches[b]);
			double ur = nzb_uring_rate(n, batches[b]);

			if (nz < 0 || ur < 0) {
				fprintf(stderr, "nezha-bench: a run failed\n");
				return -EIO;
			}
			best_nz = nz > best_nz ? nz : best_nz;
			best_ur = ur > best_ur ? ur : best_ur;
		}
		printf("  %6u %16.0f %16.0f %8.3f\n", batches[b], best_nz,
		       best_ur, best_nz / best_ur);
	}
	return 0;
}
