// SPDX-License-Identifier: GPL-2.0
/*
 * nezhactl stats [-o text|json|prometheus] [RAIL]
 *
 * The module's counters as sysfs has them (Documentation/ABI/testing/
 * sysfs-class-nezha): module-wide, per rail (with the RDMA transport's),
 * and per (rail, peer) connection.  -o prometheus writes the Prometheus
 * text exposition format, for node_exporter's textfile collector:
 *
 *   nezhactl stats -o prometheus > /var/lib/node_exporter/nezha.prom.$$ &&
 *       mv /var/lib/node_exporter/nezha.prom.$$ /var/lib/node_exporter/nezha.prom
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nezhactl.h"
#include "stats.h"

#define NZCTL_STATS_USAGE "nezhactl stats [-o text|json|prometheus] [RAIL]"

/* Read dir/file into v; "" if it is not there. */
static void nzctl_stats_read(const char *dir, const char *file, char *v, size_t len)
{
	char path[1024];

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	if (nzctl_read_value(path, v, len))
		v[0] = '\0';
}

/* Every file of a table that exists in dir, into a set of values. */
static void nzctl_stats_load(const char *dir, const struct nzst_metric *tbl,
			     struct nzst_values *vals)
{
	vals->n = 0;
	for (const struct nzst_metric *m = tbl; m->file; m++) {
		char v[NZST_VALUE_LEN];

		nzctl_stats_read(dir, m->file, v, sizeof(v));
		if (!v[0] || vals->n == NZST_MAX_VALUES)
			continue;
		vals->m[vals->n] = m;
		snprintf(vals->v[vals->n], NZST_VALUE_LEN, "%s", v);
		vals->n++;
	}
}

static int nzctl_peer_cmp(const void *a, const void *b)
{
	return strcmp(((const struct nzst_peer *)a)->dirname,
		      ((const struct nzst_peer *)b)->dirname);
}

static int nzctl_rail_cmp(const void *a, const void *b)
{
	return strcmp(((const struct nzst_rail *)a)->name,
		      ((const struct nzst_rail *)b)->name);
}

/* The whole of /sys/class/nezha (or one rail of it). */
static int nzctl_stats_collect(struct nzst_all *all, const char *only)
{
	char dir[768];
	struct dirent *de;
	DIR *d;

	memset(all, 0, sizeof(*all));
	snprintf(dir, sizeof(dir), "%s/nezha", nzctl.sysfs);
	nzctl_stats_load(dir, nzst_module_info, &all->module);
	snprintf(dir, sizeof(dir), "%s/nezha/stats", nzctl.sysfs);
	nzctl_stats_load(dir, nzst_module_stats, &all->module_stats);
	if (!all->module.n && !all->module_stats.n) {
		fprintf(stderr, "nezhactl: stats: the nezha module is not loaded (no %s/nezha)\n",
			nzctl.sysfs);
		return -ENOENT;
	}
	d = opendir(nzctl.sysfs);
	if (!d)
		return -errno;
	while ((de = readdir(d)) && all->nrails < NZST_MAX_RAILS) {
		struct nzst_rail *r = &all->rails[all->nrails];
		struct dirent *pe;
		DIR *pd;

		if (strncmp(de->d_name, "rail-", 5) || (only && strcmp(de->d_name + 5, only)))
			continue;
		snprintf(r->name, sizeof(r->name), "%s", de->d_name + 5);
		snprintf(dir, sizeof(dir), "%s/%s", nzctl.sysfs, de->d_name);
		nzctl_stats_load(dir, nzst_rail_info, &r->info);
		snprintf(dir, sizeof(dir), "%s/%s/stats", nzctl.sysfs, de->d_name);
		nzctl_stats_load(dir, nzst_rail_stats, &r->stats);
		snprintf(dir, sizeof(dir), "%s/%s/rdma", nzctl.sysfs, de->d_name);
		nzctl_stats_load(dir, nzst_rail_rdma, &r->rdma);
		snprintf(dir, sizeof(dir), "%s/%s", nzctl.sysfs, de->d_name);
		pd = opendir(dir);
		while (pd && (pe = readdir(pd)) && r->npeers < NZST_MAX_PEERS) {
			struct nzst_peer *p = &r->peers[r->npeers];
			unsigned long long serial;
			char pdir[1024];

			if (sscanf(pe->d_name, "peer-%llx-%u-%u", &serial, &p->rank,
				   &p->peer) != 3)
				continue;
			if (snprintf(p->dirname, sizeof(p->dirname), "%s", pe->d_name) >=
			    (int)sizeof(p->dirname))
				continue;
			snprintf(p->comm, sizeof(p->comm), "%016llx", serial);
			snprintf(pdir, sizeof(pdir), "%s/%s", dir, pe->d_name);
			nzctl_stats_load(pdir, nzst_peer_files, &p->vals);
			r->npeers++;
		}
		if (pd)
			closedir(pd);
		qsort(r->peers, (size_t)r->npeers, sizeof(r->peers[0]), nzctl_peer_cmp);
		all->nrails++;
	}
	closedir(d);
	qsort(all->rails, (size_t)all->nrails, sizeof(all->rails[0]), nzctl_rail_cmp);
	if (only && !all->nrails) {
		fprintf(stderr, "nezhactl: stats: no rail \"%s\"\n", only);
		return -ENOENT;
	}
	return 0;
}

int nzctl_stats(int argc, char **argv)
{
	static const struct nzctl_kw fmts[] = {
		{ "text", NZST_TEXT }, { "json", NZST_JSON },
		{ "prometheus", NZST_PROMETHEUS }, { NULL, 0 },
	};
	int fmt = nzctl.json ? NZST_JSON : NZST_TEXT, i, ret;
	const char *only = NULL;
	struct nzst_all *all;

	for (i = 1; i < argc; i++) {
		if (nzctl_is_help(argv[i])) {
			printf("usage: %s\n", NZCTL_STATS_USAGE);
			return 0;
		}
		if (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output") ||
		    !strcmp(argv[i], "format")) {
			if (++i >= argc)
				return nzctl_usage_err(NZCTL_STATS_USAGE, "stats: -o needs a format");
			fmt = nzctl_kw(argv[i], fmts, "stats -o", NZCTL_STATS_USAGE);
			if (fmt < 0)
				return fmt;
		} else if (!only && argv[i][0] != '-') {
			only = argv[i];
		} else {
			return nzctl_usage_err(NZCTL_STATS_USAGE, "stats: unexpected \"%s\"",
					       argv[i]);
		}
	}
	all = calloc(1, sizeof(*all));
	if (!all)
		return -ENOMEM;
	ret = nzctl_stats_collect(all, only);
	if (!ret)
		nzst_print(stdout, all, fmt, nzctl.pretty);
	free(all);
	return ret;
}
