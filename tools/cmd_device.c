// SPDX-License-Identifier: GPL-2.0
/*
 * nezhactl device [show]
 * nezhactl device set [group GROUP] [mode MODE] [owner USER]
 * nezhactl device apply [FILE]
 *
 * Who may open /dev/nezha.  The module creates it root-owned with mode
 * dev_mode (0660); "set" changes it now, and "apply" runs the "device"
 * lines of /etc/nezha/nezha.conf -- what the udev rule does whenever the
 * device appears, so that the setting survives a reboot or a module reload.
 */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "nezhactl.h"

#define NZCTL_DEVICE_USAGE \
	"nezhactl [-j] [-p] device [show]\n" \
	"       nezhactl device set [group GROUP] [mode MODE] [owner USER]\n" \
	"       nezhactl device apply [FILE]"

static int nzctl_device_stat(struct stat *st)
{
	int ret;

	if (!stat(nzctl.devnode, st))
		return 0;
	ret = -errno;
	fprintf(stderr, "nezhactl: device: %s: %s%s\n", nzctl.devnode, strerror(-ret),
		ret == -ENOENT ? " (is the nezha module loaded?)" : "");
	return ret;
}

static int nzctl_device_show(void)
{
	char owner[64], group[64], mode[8];
	struct passwd *pw;
	struct group *gr;
	struct stat st;
	int ret = nzctl_device_stat(&st);

	if (ret)
		return ret;
	pw = getpwuid(st.st_uid);
	gr = getgrgid(st.st_gid);
	snprintf(owner, sizeof(owner), "%s", pw ? pw->pw_name : "");
	snprintf(group, sizeof(group), "%s", gr ? gr->gr_name : "");
	if (!pw)
		snprintf(owner, sizeof(owner), "%u", (unsigned int)st.st_uid);
	if (!gr)
		snprintf(group, sizeof(group), "%u", (unsigned int)st.st_gid);
	snprintf(mode, sizeof(mode), "%04o", (unsigned int)(st.st_mode & 07777));
	if (nzctl.json) {
		nzj_obj_open(&nzctl.j, NULL);
		nzj_str(&nzctl.j, "path", nzctl.devnode);
		nzj_str(&nzctl.j, "owner", owner);
		nzj_str(&nzctl.j, "group", group);
		nzj_str(&nzctl.j, "mode", mode);
		nzj_obj_close(&nzctl.j);
		nzj_end(&nzctl.j);
	} else {
		printf("%s owner %s group %s mode %s\n", nzctl.devnode, owner, group, mode);
	}
	return 0;
}

/* A user or group by name or number. */
static int nzctl_id(const char *s, int group, unsigned int *out)
{
	uint32_t v;

	if (!nzctl_parse_u32(s, UINT32_MAX - 1, &v)) {
		*out = v;
		return 0;
	}
	if (group) {
		struct group *gr = getgrnam(s);

		if (!gr)
			return -ENOENT;
		*out = gr->gr_gid;
	} else {
		struct passwd *pw = getpwnam(s);

		if (!pw)
			return -ENOENT;
		*out = pw->pw_uid;
	}
	return 0;
}

static int nzctl_device_set(int argc, char **argv)
{
	static const struct nzctl_kw kws[] = {
		{ "group", 0 }, { "mode", 1 }, { "owner", 2 }, { NULL, 0 },
	};
	unsigned int gid = (unsigned int)-1, uid = (unsigned int)-1;
	uint32_t mode = 0;
	int have[3] = { 0, 0, 0 }, i, ret;
	struct stat st;

	if (argc < 3)
		return nzctl_usage_err(NZCTL_DEVICE_USAGE, "device set: nothing to set");
	for (i = 1; i < argc; i += 2) {
		int k = nzctl_kw(argv[i], kws, "device set", NZCTL_DEVICE_USAGE);

		if (k < 0)
			return k;
		if (i + 1 >= argc)
			return nzctl_usage_err(NZCTL_DEVICE_USAGE,
					       "device set: \"%s\" needs a value", argv[i]);
		if (have[k]++)
			return nzctl_usage_err(NZCTL_DEVICE_USAGE,
					       "device set: \"%s\" given twice", kws[k].name);
		if (k == 1 && (nzctl_parse_mode(argv[i + 1], &mode) || mode > 0777))
			return nzctl_usage_err(NZCTL_DEVICE_USAGE,
					       "device set: bad mode \"%s\" (octal, 0..0777)",
					       argv[i + 1]);
		if (k != 1 && nzctl_id(argv[i + 1], k == 0, k == 0 ? &gid : &uid))
			return nzctl_usage_err(NZCTL_DEVICE_USAGE,
					       "device set: no such %s \"%s\"",
					       k == 0 ? "group" : "user", argv[i + 1]);
	}
	ret = nzctl_device_stat(&st);
	if (ret)
		return ret;
	if ((have[0] || have[2]) && chown(nzctl.devnode, uid, gid)) {
		ret = -errno;
		fprintf(stderr, "nezhactl: device set: chown %s: %s\n", nzctl.devnode,
			strerror(-ret));
		return ret;
	}
	if (have[1] && chmod(nzctl.devnode, (mode_t)mode)) {
		ret = -errno;
		fprintf(stderr, "nezhactl: device set: chmod %s: %s\n", nzctl.devnode,
			strerror(-ret));
		return ret;
	}
	return 0;
}

int nzctl_device(int argc, char **argv)
{
	static const struct nzctl_kw subs[] = {
		{ "show", 0 }, { "list", 0 }, { "set", 1 }, { "apply", 2 }, { NULL, 0 },
	};
	int sub = 0;

	if (argc > 1 && nzctl_is_help(argv[1])) {
		printf("usage: %s\n", NZCTL_DEVICE_USAGE);
		return 0;
	}
	if (argc > 1 && (sub = nzctl_kw(argv[1], subs, "device", NZCTL_DEVICE_USAGE)) < 0)
		return sub;
	switch (sub) {
	case 1:
		return nzctl_device_set(argc - 1, argv + 1);
	case 2:
		if (argc > 3)
			return nzctl_usage_err(NZCTL_DEVICE_USAGE, "device apply: one FILE at most");
		/* No file, nothing to apply: the module's default stays. */
		if (argc == 2 && access(nzctl.conf, F_OK))
			return 0;
		return nzctl_batch(argc == 3 ? argv[2] : nzctl.conf, "device");
	default:
		if (argc > 2)
			return nzctl_usage_err(NZCTL_DEVICE_USAGE, "device show: too many arguments");
		return nzctl_device_show();
	}
}
