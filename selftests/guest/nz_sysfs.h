/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Guest test programs: one value of a connection's sysfs directory,
 * /sys/class/nezha/rail-RAIL/peer-JOB-RANK-PEER/FILE.
 */
#ifndef NZ_SELFTEST_SYSFS_H
#define NZ_SELFTEST_SYSFS_H

#include <glob.h>
#include <stdio.h>
#include <string.h>

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
