// SPDX-License-Identifier: GPL-2.0
/* nezha-bench: benchmarks of Nezha, one mode per file (tools/bench_*.c). */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "bench.h"

static const struct nzb_mode nzb_modes[] = {
	{ "nop", nzb_bench_nop,
	  "NOP commands/s through /dev/nezha vs io_uring's own IORING_OP_NOP" },
	{ "p2p", nzb_bench_p2p,
	  "point-to-point bandwidth and latency between 2 ranks (torchrun env)" },
	{ "allreduce", nzb_bench_coll, "collective, nccl-tests layout (torchrun env)" },
	{ "broadcast", nzb_bench_coll, "collective, nccl-tests layout" },
	{ "reduce", nzb_bench_coll, "collective, nccl-tests layout" },
	{ "allgather", nzb_bench_coll, "collective, nccl-tests layout" },
	{ "reduce_scatter", nzb_bench_coll, "collective, nccl-tests layout" },
	{ "alltoall", nzb_bench_coll, "collective, nccl-tests layout" },
	{ "barrier", nzb_bench_coll, "collective: time of a barrier" },
};

#define NZB_NMODES (sizeof(nzb_modes) / sizeof(nzb_modes[0]))

double nzb_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void nzb_usage(void)
{
	size_t i;

	fprintf(stderr, "usage: nezha-bench MODE [OPTIONS]\n\nmodes:\n");
	for (i = 0; i < NZB_NMODES; i++)
		fprintf(stderr, "  %-15s %s\n", nzb_modes[i].name, nzb_modes[i].help);
}

int main(int argc, char **argv)
{
	size_t i;

	if (argc < 2) {
		nzb_usage();
		return 1;
	}
	for (i = 0; i < NZB_NMODES; i++)
		if (!strcmp(argv[1], nzb_modes[i].name))
			return nzb_modes[i].run(argc - 1, argv + 1) ? 1 : 0;
	nzb_usage();
	return 1;
}
