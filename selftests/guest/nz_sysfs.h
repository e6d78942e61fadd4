/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Guest test programs: the kernel's time scale, the module's parameters,
 * and one value of a connection's sysfs directory, /sys/class/nezha/rail-RAIL/peer-COMM-RANK-PEER/FILE.
 */
#ifndef NZ_SELFTEST_SYSFS_H
#define NZ_SELFTEST_SYSFS_H

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * NZ_TIME_SCALE (vm.sh): how much slower this guest's kernel is than the
 * one the tests' time bounds are for; 1 when unset or below 1.
 */
static inline double nz_time_scale(void)
{
	const char *v = getenv("NZ_TIME_SCALE");

	return v && atof(v) >= 1 ? atof(v) : 1;
}

/*
 * Module parameter NAME of nezha.ko: its value with set < 0, else set it
 * to set and return set; -1 if it cannot be read or written.
 */
static inline long long nz_param_rw(const char *name, long long set)
{
	char path[256], line[64];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/module/nezha/parameters/%s", name);
	f = fopen(path, set < 0 ? "r" : "w");
	if (!f)
		return -1;
	if (set >= 0)
		v = fprintf(f, "%lld\n", set) > 0 ? set : -1;
	else if (fgets(line, sizeof(line), f))
		v = atoll(line);
	if (fclose(f))
		v = -1;
	return v;
}

/* The number in /sys/class/nezha/DIR/FILE; -1 if it cannot be read. */
static inline long long nz_sysfs_num(const char *dir, const char *file)
{
	char path[256], line[64];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/nezha/%s/%s", dir, file);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fgets(line, sizeof(line), f))
		v = atoll(line);
	fclose(f);
	return v;
}

/* The module's device directory: "zerocopy_held", "stats/opens", ... */
static inline long long nz_dev_stat(const char *file)
{
	return nz_sysfs_num("nezha", file);
}

/* A rail's directory: "bytes_tx", "stats/chunks_tx", ... */
static inline long long nz_rail_num(const char *rail, const char *file)
{
	char dir[128];

	snprintf(dir, sizeof(dir), "rail-%s", rail);
	return nz_sysfs_num(dir, file);
}

/* One of a rail's counters: /sys/class/nezha/rail-RAIL/stats/WHAT. */
static inline long long nz_rail_stat(const char *rail, const char *what)
{
	char file[96];

	snprintf(file, sizeof(file), "stats/%s", what);
	return nz_rail_num(rail, file);
}

/*
 * FILE of rank's connection to peer on rail, without its newline, into
 * line; 0, or -1 if there is not exactly one such directory or the file
 * cannot be read.
 */
static inline int nz_peer_sysfs_read(const char *rail, int rank, int peer,
				     const char *file, char *line, size_t len)
{
	char pat[256], path[300];
	int ret = -1;
	glob_t g;
	FILE *f;

	snprintf(pat, sizeof(pat), "/sys/class/nezha/rail-%s/peer-*-%d-%d",
		 rail, rank, peer);
	if (glob(pat, 0, NULL, &g) || g.gl_pathc != 1) {
		globfree(&g);
		return -1;
	}
	snprintf(path, sizeof(path), "%s/%s", g.gl_pathv[0], file);
	globfree(&g);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fgets(line, (int)len, f)) {
		line[strcspn(line, "\n")] = '\0';
		ret = 0;
	}
	fclose(f);
	return ret;
}

#endif /* NZ_SELFTEST_SYSFS_H */
