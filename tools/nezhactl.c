// SPDX-License-Identifier: GPL-2.0
/* nezhactl: configure and inspect the Nezha module. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "nezhactl.h"

static int nzctl_help(int argc, char **argv);

static const struct nzctl_cmd nzctl_cmds[] = {
	{ "version", nzctl_version, "versions of nezhactl, libnezha and the module" },
	{ "show", nzctl_show, "module status and command counters" },
	{ "rail", nzctl_rail, "add, delete, change and show rails" },
	{ "health", nzctl_health, "heartbeat and failover parameters: show | set ..." },
	{ "monitor", nzctl_monitor, "print path events (failovers, re-admissions) as they happen" },
	{ "key", nzctl_key, "a job key for NEZHA_JOB_KEY(_FILE): generate [FILE] | check FILE" },
	{ "help", nzctl_help, "this list" },
};

#define NZCTL_NCMDS (sizeof(nzctl_cmds) / sizeof(nzctl_cmds[0]))

static int nzctl_help(int argc, char **argv)
{
	size_t i;

	(void)argc;
	(void)argv;
	printf("usage: nezhactl COMMAND [ARGS]\n\ncommands:\n");
	for (i = 0; i < NZCTL_NCMDS; i++)
		printf("  %-10s %s\n", nzctl_cmds[i].name, nzctl_cmds[i].help);
	return 0;
}

int main(int argc, char **argv)
{
	size_t i;

	if (argc < 2) {
		nzctl_help(0, NULL);
		return 1;
	}
	for (i = 0; i < NZCTL_NCMDS; i++) {
		/* Unique prefixes are accepted, as with ip(8). */
		if (!strncmp(argv[1], nzctl_cmds[i].name, strlen(argv[1])))
			return nzctl_cmds[i].run(argc - 1, argv + 1) ? 1 : 0;
	}
	fprintf(stderr, "nezhactl: unknown command \"%s\"; try \"nezhactl help\"\n",
		argv[1]);
	return 1;
}
