// SPDX-License-Identifier: GPL-2.0
/*
 * nezhactl health [show]
 * nezhactl health set [interval MS] [misses N] [grace MS]
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/genetlink.h>
#include <linux/nezha_netlink.h>
#include "nezhactl.h"

#define NZCTL_HEALTH_USAGE \
	"nezhactl [-j] [-p] health [show]\n" \
	"       nezhactl health set [interval MS] [misses N] [grace MS]"

/*
 * The extra silence a new peer's paths are allowed, from the module
 * parameter (Documentation/health.rst, "A job's first seconds"); -1 if
 * it cannot be read (an older module).
 */
static long nzctl_start_tolerance(void)
{
	char path[512];
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/nezha/parameters/start_tolerance_ms",
		 nzctl.sysmodule);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%ld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

static int nzctl_health_cb(const struct nlmsghdr *nlh, void *data)
{
	long start = nzctl_start_tolerance();
	uint32_t v[3] = { 0, 0, 0 };
	struct nlattr *attr;

	(void)data;
	mnl_attr_for_each(attr, nlh, sizeof(struct genlmsghdr)) {
		if (mnl_attr_validate(attr, MNL_TYPE_U32) < 0)
			continue;
		switch (mnl_attr_get_type(attr)) {
		case NZ_A_HB_INTERVAL_MS:
			v[0] = mnl_attr_get_u32(attr);
			break;
		case NZ_A_HB_MISSES:
			v[1] = mnl_attr_get_u32(attr);
			break;
		case NZ_A_GRACE_MS:
			v[2] = mnl_attr_get_u32(attr);
			break;
		}
	}
	if (nzctl.json) {
		nzj_obj_open(&nzctl.j, NULL);
		nzj_u64(&nzctl.j, "interval_ms", v[0]);
		nzj_u64(&nzctl.j, "misses", v[1]);
		nzj_u64(&nzctl.j, "suspect_after_ms", (uint64_t)v[0] * v[1]);
		nzj_u64(&nzctl.j, "grace_ms", v[2]);
		if (start >= 0)
			nzj_u64(&nzctl.j, "start_tolerance_ms", (uint64_t)start);
		nzj_obj_close(&nzctl.j);
		nzj_end(&nzctl.j);
		return MNL_CB_OK;
	}
	printf("heartbeat interval %u ms misses %u (dead after %u ms) grace %u ms\n",
	       v[0], v[1], v[0] * v[1], v[2]);
	/* The period is the module's NZ_SUSPECT_DECAY_S (kmod/health.c). */
	if (start > 0)
		printf("new peers: %ld ms more, halving every 120 s\n", start);
	return MNL_CB_OK;
}

int nzctl_health(int argc, char **argv)
{
	static const struct nzctl_kw subs[] = {
		{ "show", 0 }, { "list", 0 }, { "set", 1 }, { "help", 2 }, { NULL, 0 },
	};
	static const struct nzctl_kw kws[] = {
		{ "interval", 0 }, { "misses", 1 }, { "grace", 2 }, { NULL, 0 },
	};
	static const int attrs[] = { NZ_A_HB_INTERVAL_MS, NZ_A_HB_MISSES, NZ_A_GRACE_MS };
	uint32_t val[3];
	int have[3] = { 0, 0, 0 };
	struct nlmsghdr *nlh;
	struct nzctl_nl nl;
	int i, k, sub = 0, ret;

	if (argc > 1 && nzctl_is_help(argv[1]))
		sub = 2;
	else if (argc > 1 && (sub = nzctl_kw(argv[1], subs, "health",
					     NZCTL_HEALTH_USAGE)) < 0)
		return sub;
	if (sub == 2) {
		printf("usage: %s\n", NZCTL_HEALTH_USAGE);
		return 0;
	}
	if (!sub && argc > 2)
		return nzctl_usage_err(NZCTL_HEALTH_USAGE, "health show: too many arguments");
	if (sub == 1 && argc < 4)
		return nzctl_usage_err(NZCTL_HEALTH_USAGE, "health set: nothing to set");
	/* Check every argument before talking to the kernel. */
	for (i = 2; sub == 1 && i < argc; i += 2) {
		k = nzctl_kw(argv[i], kws, "health set", NZCTL_HEALTH_USAGE);
		if (k < 0)
			return k;
		if (i + 1 >= argc)
			return nzctl_usage_err(NZCTL_HEALTH_USAGE,
					       "health set: \"%s\" needs a value", argv[i]);
		if (have[k]++)
			return nzctl_usage_err(NZCTL_HEALTH_USAGE,
					       "health set: \"%s\" given twice", kws[k].name);
		if (nzctl_parse_u32(argv[i + 1], UINT32_MAX, &val[k]))
			return nzctl_usage_err(NZCTL_HEALTH_USAGE,
					       "health set: bad %s \"%s\"", kws[k].name,
					       argv[i + 1]);
	}
	ret = nzctl_nl_open(&nl);
	if (ret)
		return ret;
	if (sub == 1) {
		nlh = nzctl_nl_request(&nl, NZ_CMD_HEALTH_SET, 0);
		for (k = 0; k < 3; k++)
			if (have[k])
				mnl_attr_put_u32(nlh, attrs[k], val[k]);
		ret = nzctl_nl_talk(&nl, nlh, NULL, NULL);
		if (ret)
			nzctl_nl_perror(&nl, ret, "health set");
	} else {
		nlh = nzctl_nl_request(&nl, NZ_CMD_HEALTH_GET, 0);
		ret = nzctl_nl_talk(&nl, nlh, nzctl_health_cb, NULL);
		if (ret)
			nzctl_nl_perror(&nl, ret, "health show");
	}
	nzctl_nl_close(&nl);
	return ret;
}
