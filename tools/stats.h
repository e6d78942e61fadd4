/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nezhactl stats: the sysfs files it knows and how each is exported
 * (tools/stats.c formats them; unit-tested on the host with made-up data).
 */
#ifndef NZCTL_STATS_H
#define NZCTL_STATS_H

#include <stdio.h>

enum nzst_kind {
	NZST_LABEL,	/* a property, a label of the family's _info metric */
	NZST_COUNTER,	/* only grows: <family>_total */
	NZST_GAUGE,
};

struct nzst_metric {
	const char *file;	/* sysfs file */
	enum nzst_kind kind;
	const char *name;	/* Prometheus name, after the family's prefix */
	double scale;		/* value x scale (microseconds -> seconds, ...) */
	const char *help;
};

extern const struct nzst_metric nzst_module_info[], nzst_module_stats[],
	nzst_rail_info[], nzst_rail_stats[], nzst_rail_rdma[], nzst_peer_files[];

#define NZST_MAX_VALUES	32
#define NZST_VALUE_LEN	64
#define NZST_MAX_RAILS	64
#define NZST_MAX_PEERS	256

struct nzst_values {
	int n;
	const struct nzst_metric *m[NZST_MAX_VALUES];
	char v[NZST_MAX_VALUES][NZST_VALUE_LEN];
};

struct nzst_peer {
	char dirname[96];
	char comm[24];		/* the communicator's serial, not its job */
	unsigned int rank, peer;
	struct nzst_values vals;
};

struct nzst_rail {
	char name[64];
	struct nzst_values info, stats, rdma;
	int npeers;
	struct nzst_peer peers[NZST_MAX_PEERS];
};

struct nzst_all {
	struct nzst_values module, module_stats;
	int nrails;
	struct nzst_rail rails[NZST_MAX_RAILS];
};

enum { NZST_TEXT, NZST_JSON, NZST_PROMETHEUS };

void nzst_print(FILE *f, const struct nzst_all *all, int fmt, int pretty);

#endif /* NZCTL_STATS_H */
