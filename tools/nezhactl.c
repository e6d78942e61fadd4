// SPDX-License-Identifier: GPL-2.0
/*
 * nezhactl: configure and inspect the Nezha module.
 *
 *   nezhactl [OPTIONS] OBJECT [COMMAND [ARGS]]
 *   nezhactl [OPTIONS] -b FILE
 *
 * Every keyword may be shortened to a unique prefix.  Exit status: 0 when
 * everything worked, 1 when the kernel or the system refused, 255 on a
 * usage error (found before anything changed) -- as ip(8) does.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <linux/rtnetlink.h>
#include "nezhactl.h"

#define NZCTL_USAGE \
	"usage: nezhactl [OPTIONS] OBJECT [COMMAND [ARGS]]\n" \
	"       nezhactl [OPTIONS] -b FILE\n" \
	"options: -j[son] -p[retty] -n[etns] NETNS -b[atch] FILE -force -w[ait]\n" \
	"         -h[elp] -V[ersion]\n"

struct nzctl_global nzctl = {
	.sysfs = "/sys/class/nezha",
	.sysmodule = "/sys/module",
	.devnode = "/dev/nezha",
	.conf = "/etc/nezha/nezha.conf",
};

static int nzctl_help(int argc, char **argv);

static const struct nzctl_cmd nzctl_cmds[] = {
	{ "version", nzctl_version, "versions of nezhactl, libnezha and the module" },
	{ "show", nzctl_show, "module status and command counters" },
	{ "rail", nzctl_rail, "add, delete, change, show and flush rails" },
	{ "health", nzctl_health, "heartbeat and failover parameters: show | set ..." },
	{ "param", nzctl_param, "module parameters (scheduler, transports): show | set ..." },
	{ "device", nzctl_device, "group and mode of /dev/nezha: show | set ... | apply" },
	{ "stats", nzctl_stats, "per-rail and per-peer counters (-o text|json|prometheus)" },
	{ "key", nzctl_key, "a job key for NEZHA_JOB_KEY(_FILE): generate [FILE] | check FILE" },
	{ "monitor", nzctl_monitor, "print rail and path events as they happen" },
	{ "help", nzctl_help, "this list, or: help OBJECT" },
};

#define NZCTL_NCMDS (sizeof(nzctl_cmds) / sizeof(nzctl_cmds[0]))

static const struct nzctl_kw nzctl_cmd_kws[] = {
	{ "version", 0 }, { "show", 1 }, { "rail", 2 }, { "health", 3 },
	{ "param", 4 }, { "device", 5 }, { "stats", 6 }, { "key", 7 },
	{ "monitor", 8 }, { "help", 9 }, { NULL, 0 },
};

int nzctl_is_help(const char *arg)
{
	return !strcmp(arg, "help") || !strcmp(arg, "-h") ||
	       !strcmp(arg, "--help") || !strcmp(arg, "-help");
}

int nzctl_usage_err(const char *usage, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "nezhactl: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (usage)
		fprintf(stderr, "usage: %s\n", usage);
	return NZCTL_EUSAGE;
}

int nzctl_kw(const char *arg, const struct nzctl_kw *kws, const char *what,
	     const char *usage)
{
	int id = nzctl_kw_find(arg, kws);
	char list[256];

	if (id >= 0)
		return id;
	if (id == NZCTL_KW_AMBIGUOUS) {
		nzctl_kw_candidates(arg, kws, list, sizeof(list));
		return nzctl_usage_err(usage, "%s: \"%s\" is ambiguous: %s", what,
				       arg, list);
	}
	nzctl_kw_candidates("", kws, list, sizeof(list));
	return nzctl_usage_err(usage, "%s: unknown \"%s\"; one of: %s", what,
			       arg, list);
}

int nzctl_read_value(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	int ret = 0;

	if (len)
		buf[0] = '\0';
	if (!f)
		return -errno;
	if (!fgets(buf, (int)len, f))
		ret = ferror(f) ? -EIO : 0;
	buf[strcspn(buf, "\n")] = '\0';
	fclose(f);
	return ret;
}

static int nzctl_help(int argc, char **argv)
{
	size_t i;
	int id;

	if (argc > 2)
		return nzctl_usage_err("nezhactl help [OBJECT]", "help: too many arguments");
	if (argc == 2) {
		id = nzctl_kw(argv[1], nzctl_cmd_kws, "help", "nezhactl help [OBJECT]");
		if (id < 0)
			return id;
		if (nzctl_cmds[id].run == nzctl_help)
			return nzctl_help(1, argv);
		{
			char *hargv[] = { (char *)nzctl_cmds[id].name, (char *)"help", NULL };

			return nzctl_cmds[id].run(2, hargv);
		}
	}
	printf(NZCTL_USAGE "\nobjects:\n");
	for (i = 0; i < NZCTL_NCMDS; i++)
		printf("  %-10s %s\n", nzctl_cmds[i].name, nzctl_cmds[i].help);
	printf("\n\"nezhactl OBJECT help\" for one object; keywords may be shortened.\n"
	       "exit status: 0 ok, 1 the kernel or the system refused, 255 usage error\n");
	return 0;
}

int nzctl_run(int argc, char **argv)
{
	int id;

	if (argc < 1)
		return nzctl_usage_err(NULL, "no object; try \"nezhactl help\"");
	id = nzctl_kw(argv[0], nzctl_cmd_kws, "object", NULL);
	if (id < 0) {
		fprintf(stderr, "try \"nezhactl help\"\n");
		return id;
	}
	return nzctl_cmds[id].run(argc, argv);
}

static int nzctl_exit_code(int ret)
{
	if (!ret)
		return 0;
	return ret == NZCTL_EUSAGE ? NZCTL_EXIT_USAGE : NZCTL_EXIT_FAIL;
}

static int nzctl_batch_file(const char *file, const char *only);

/* ---- batch mode ------------------------------------------------------------ */

#define NZCTL_MAX_WORDS 64
#define NZCTL_MAX_PENDING 64

struct nzctl_pending {
	char *line;		/* the command, to split again */
	char *where;		/* "FILE:LINE" */
};

static struct nzctl_pending nzctl_pend[NZCTL_MAX_PENDING];
static int nzctl_npend;

/* A rail that is waiting for its device or its address. */
static int nzctl_is_rail_add(int argc, char **argv)
{
	static const struct nzctl_kw rail[] = { { "rail", 0 }, { NULL, 0 } };
	static const struct nzctl_kw add[] = { { "add", 0 }, { NULL, 0 } };

	return argc > 2 && nzctl_kw_find(argv[0], rail) == 0 &&
	       nzctl_kw_find(argv[1], add) == 0;
}

static int nzctl_is_missing(int ret)
{
	return ret == -ENODEV || ret == -EADDRNOTAVAIL;
}

static int nzctl_only(int argc, char **argv, const char *only)
{
	const struct nzctl_kw kw[] = { { only, 0 }, { NULL, 0 } };

	return argc > 0 && nzctl_kw_find(argv[0], kw) == 0;
}

/* Run one line of a batch; a rail whose device is missing may wait. */
static int nzctl_batch_line(const char *line, const char *where,
			    const char *only)
{
	char *copy = strdup(line), *argv[NZCTL_MAX_WORDS + 1];
	const char *err;
	int argc, ret, rail_add;

	if (!copy)
		return -ENOMEM;
	argc = nzctl_tokenize(copy, argv, NZCTL_MAX_WORDS, &err);
	if (argc < 0) {
		fprintf(stderr, "nezhactl: %s: %s\n", where, err);
		free(copy);
		return NZCTL_EUSAGE;
	}
	if (!argc || (only && !nzctl_only(argc, argv, only))) {
		free(copy);
		return 0;
	}
	argv[argc] = NULL;
	rail_add = nzctl.wait && nzctl_is_rail_add(argc, argv);
	nzctl.pending_quiet = rail_add;
	optind = 1;
	ret = nzctl_run(argc, argv);
	nzctl.pending_quiet = 0;
	if (rail_add && nzctl_is_missing(ret) && nzctl_npend < NZCTL_MAX_PENDING) {
		fprintf(stderr, "nezhactl: %s: rail %s: %s: waiting for it\n",
			where, argv[2], ret == -ENODEV ? "no such device" :
			"its device has no IPv4 address");
		nzctl_pend[nzctl_npend].line = strdup(line);
		nzctl_pend[nzctl_npend].where = strdup(where);
		if (nzctl_pend[nzctl_npend].line && nzctl_pend[nzctl_npend].where)
			nzctl_npend++;
		ret = 0;
	} else if (ret) {
		fprintf(stderr, "nezhactl: %s: command failed\n", where);
	}
	free(copy);
	return ret;
}

/*
 * Under systemd (Type=notify): tell the service manager that the file is
 * applied -- every rail whose device is there is added -- so that
 * "systemctl start nezha" returns only then, while rails still waiting for
 * their device do not hold up the boot.  The protocol is one datagram to
 * $NOTIFY_SOCKET (sd_notify(3)); a name starting with '@' is abstract.
 */
static void nzctl_notify_ready(void)
{
	static int sent;
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char msg[96];
	size_t len;
	int fd;

	if (sent || !path || (path[0] != '/' && path[0] != '@'))
		return;
	len = strlen(path);
	if (len >= sizeof(sa.sun_path))
		return;
	memcpy(sa.sun_path, path, len);
	if (path[0] == '@')
		sa.sun_path[0] = '\0';
	snprintf(msg, sizeof(msg), "READY=1\nSTATUS=%d rail(s) waiting for a device",
		 nzctl_npend);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	if (sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&sa,
		   (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len)) < 0)
		fprintf(stderr, "nezhactl: $NOTIFY_SOCKET: %s\n", strerror(errno));
	else
		sent = 1;
	close(fd);
}

/* Retry the waiting rails; drop those added or refused for good. */
static int nzctl_retry_pending(void)
{
	int i, ret, first = 0;

	for (i = 0; i < nzctl_npend;) {
		char *copy = strdup(nzctl_pend[i].line), *argv[NZCTL_MAX_WORDS + 1];
		const char *err;
		int argc = copy ? nzctl_tokenize(copy, argv, NZCTL_MAX_WORDS, &err) : -ENOMEM;

		if (argc < 3) {
			free(copy);
			return argc < 0 ? argc : -EINVAL;
		}
		argv[argc] = NULL;
		nzctl.pending_quiet = 1;
		ret = nzctl_run(argc, argv);
		nzctl.pending_quiet = 0;
		if (nzctl_is_missing(ret)) {
			free(copy);
			i++;
			continue;
		}
		if (!ret)
			fprintf(stderr, "nezhactl: %s: rail %s added\n",
				nzctl_pend[i].where, argv[2]);
		else
			fprintf(stderr, "nezhactl: %s: command failed\n",
				nzctl_pend[i].where);
		if (ret && !first)
			first = ret;
		free(copy);
		free(nzctl_pend[i].line);
		free(nzctl_pend[i].where);
		nzctl_pend[i] = nzctl_pend[--nzctl_npend];
	}
	return first;
}

/*
 * -w: wait until every waiting rail could be added.  Any link or IPv4
 * address event may be the one (and a device of another kind, an RDMA
 * device, says nothing on rtnetlink: try again every few seconds too).
 */
static int nzctl_wait_pending(void)
{
	struct mnl_socket *rt;
	char buf[8192];
	int first = 0, ret;

	if (!nzctl_npend)
		return 0;
	rt = mnl_socket_open(NETLINK_ROUTE);
	if (!rt || mnl_socket_bind(rt, RTMGRP_LINK | RTMGRP_IPV4_IFADDR,
				   MNL_SOCKET_AUTOPID) < 0) {
		ret = -errno;
		fprintf(stderr, "nezhactl: -w: rtnetlink: %s\n", strerror(-ret));
		if (rt)
			mnl_socket_close(rt);
		return ret;
	}
	/* An event between the first try and the bind must not be missed. */
	ret = nzctl_retry_pending();
	first = ret;
	while (nzctl_npend) {
		struct pollfd pfd = { .fd = mnl_socket_get_fd(rt), .events = POLLIN };

		ret = poll(&pfd, 1, 5000);
		if (ret < 0 && errno != EINTR) {
			ret = -errno;
			fprintf(stderr, "nezhactl: -w: poll: %s\n", strerror(-ret));
			first = first ? first : ret;
			break;
		}
		if (ret > 0 && mnl_socket_recvfrom(rt, buf, sizeof(buf)) < 0 &&
		    errno != ENOBUFS) {
			ret = -errno;
			fprintf(stderr, "nezhactl: -w: rtnetlink: %s\n", strerror(-ret));
			first = first ? first : ret;
			break;
		}
		ret = nzctl_retry_pending();
		first = first ? first : ret;
	}
	mnl_socket_close(rt);
	return first;
}

int nzctl_batch(const char *file, const char *only)
{
	static int depth;
	int ret;

	/* "device apply" in the file it applies would never end. */
	if (depth)
		return nzctl_usage_err(NULL, "%s: batch files do not nest", file);
	depth++;
	ret = nzctl_batch_file(file, only);
	depth--;
	return ret;
}

static int nzctl_batch_file(const char *file, const char *only)
{
	FILE *f = strcmp(file, "-") ? fopen(file, "r") : stdin;
	char *line = NULL, *cmd = NULL, where[512];
	size_t cap = 0, cmdlen = 0;
	unsigned int lineno = 0, start = 0;
	int first = 0, ret;
	ssize_t n;

	if (!f) {
		ret = -errno;
		fprintf(stderr, "nezhactl: %s: %s\n", file, strerror(-ret));
		return ret;
	}
	while ((n = getline(&line, &cap, f)) >= 0) {
		int more = nzctl_line_continues(line, (size_t)n);
		char *grown;

		lineno++;
		if (!cmdlen)
			start = lineno;
		while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
			line[--n] = '\0';
		if (more)
			line[--n] = '\0';	/* the backslash */
		grown = realloc(cmd, cmdlen + (size_t)n + 2);
		if (!grown) {
			first = -ENOMEM;
			break;
		}
		cmd = grown;
		memcpy(cmd + cmdlen, line, (size_t)n);
		cmdlen += (size_t)n;
		cmd[cmdlen++] = ' ';
		cmd[cmdlen] = '\0';
		if (more)
			continue;
		snprintf(where, sizeof(where), "%s:%u", file, start);
		ret = nzctl_batch_line(cmd, where, only);
		cmdlen = 0;
		if (ret && !first)
			first = ret;
		if (ret && !nzctl.force)
			break;
	}
	if (cmdlen && (!first || nzctl.force)) {
		snprintf(where, sizeof(where), "%s:%u", file, start);
		ret = nzctl_batch_line(cmd, where, only);
		first = first ? first : ret;
	}
	free(line);
	free(cmd);
	if (f != stdin)
		fclose(f);
	if ((!first || nzctl.force) && nzctl_npend) {
		nzctl_notify_ready();
		ret = nzctl_wait_pending();
		first = first ? first : ret;
	}
	return first;
}

/* ---- main ------------------------------------------------------------------ */

/* -n NETNS: what ip netns exec does for the network namespace. */
static int nzctl_setns(const char *name)
{
	char path[512];
	int fd, ret = 0;

	if (strchr(name, '/'))
		snprintf(path, sizeof(path), "%s", name);
	else
		snprintf(path, sizeof(path), "/var/run/netns/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET) < 0) {
		ret = -errno;
		fprintf(stderr, "nezhactl: network namespace \"%s\": %s\n", name,
			strerror(-ret));
	}
	if (fd >= 0)
		close(fd);
	return ret;
}

enum { OPT_JSON, OPT_PRETTY, OPT_NETNS, OPT_BATCH, OPT_FORCE, OPT_WAIT,
       OPT_HELP, OPT_VERSION };

static const struct nzctl_kw nzctl_opt_kws[] = {
	{ "json", OPT_JSON }, { "pretty", OPT_PRETTY }, { "netns", OPT_NETNS },
	{ "batch", OPT_BATCH }, { "force", OPT_FORCE }, { "wait", OPT_WAIT },
	{ "help", OPT_HELP }, { "Version", OPT_VERSION }, { NULL, 0 },
};

int main(int argc, char **argv)
{
	const char *batch = NULL, *env;
	int i, id, ret;

	if ((env = getenv("NEZHACTL_SYSFS")))
		nzctl.sysfs = env;
	if ((env = getenv("NEZHACTL_SYSMODULE")))
		nzctl.sysmodule = env;
	if ((env = getenv("NEZHACTL_DEV")))
		nzctl.devnode = env;
	if ((env = getenv("NEZHACTL_CONF")))
		nzctl.conf = env;

	for (i = 1; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
		const char *o = argv[i] + 1 + (argv[i][1] == '-');

		id = nzctl_kw(o, nzctl_opt_kws, "option", NULL);
		if (id < 0) {
			fputs(NZCTL_USAGE, stderr);
			return NZCTL_EXIT_USAGE;
		}
		switch (id) {
		case OPT_JSON: nzctl.json = 1; break;
		case OPT_PRETTY: nzctl.pretty = 1; break;
		case OPT_FORCE: nzctl.force = 1; break;
		case OPT_WAIT: nzctl.wait = 1; break;
		case OPT_HELP: return nzctl_help(1, argv);
		case OPT_VERSION:
			printf("nezhactl %s\n", NZ_LIB_VERSION);
			return 0;
		case OPT_NETNS:
		case OPT_BATCH:
			if (i + 1 >= argc) {
				nzctl_usage_err(NULL, "-%s needs an argument", o);
				fputs(NZCTL_USAGE, stderr);
				return NZCTL_EXIT_USAGE;
			}
			if (id == OPT_NETNS)
				nzctl.netns = argv[++i];
			else
				batch = argv[++i];
			break;
		}
	}
	/* -p alone means JSON too, pretty (as with ip -p -j, but shorter). */
	if (nzctl.pretty)
		nzctl.json = 1;
	nzj_init(&nzctl.j, stdout, nzctl.pretty);
	if (batch && i < argc) {
		nzctl_usage_err(NULL, "-b takes no command on the line");
		return NZCTL_EXIT_USAGE;
	}
	if (nzctl.wait && !batch) {
		nzctl_usage_err(NULL, "-w is for batch mode (-b FILE)");
		return NZCTL_EXIT_USAGE;
	}
	if (!batch && i >= argc) {
		fputs(NZCTL_USAGE, stderr);
		fprintf(stderr, "try \"nezhactl help\"\n");
		return NZCTL_EXIT_USAGE;
	}
	if (nzctl.netns && nzctl_setns(nzctl.netns))
		return NZCTL_EXIT_FAIL;
	ret = batch ? nzctl_batch(batch, NULL) : nzctl_run(argc - i, argv + i);
	if (batch && !ret)
		nzctl_notify_ready();
	if (fflush(stdout) && !ret)
		ret = -EIO;
	return nzctl_exit_code(ret);
}
