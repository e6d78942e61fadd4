/* SPDX-License-Identifier: GPL-2.0 */
/* nezha-bench: shared declarations of the benchmark modes. */
#ifndef NZ_BENCH_H
#define NZ_BENCH_H

struct nzb_mode {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *help;
};

double nzb_now(void);
int nzb_bench_nop(int argc, char **argv);
int nzb_bench_p2p(int argc, char **argv);
int nzb_bench_coll(int argc, char **argv);

#endif /* NZ_BENCH_H */
