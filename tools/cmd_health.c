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

static int nzctl_health_usage(void)
{
	fprintf(stderr,
		"usage: nezhactl health [show]\n"
		"       nezhactl health set [interval MS] [misses N] [grace MS]\n");
	return -EINVAL;
}

static int nzctl_health_cb(const struct nlmsghdr *nlh, void *data)
{
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
	printf("heartbeat interval %u ms misses %u (dead after %u ms) grace %u ms\n",
	       v[0], v[1], v[0] * v[1], v[2]);
	return MNL_CB_OK;
}

static int nzctl_parse_u32(const char *s, uint32_t *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || end == s || v > UINT32_MAX)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

int nzctl_health(int argc, char **argv)
{
	static const struct { const char *kw; int attr; } kws[] = {
		{ "interval", NZ_A_HB_INTERVAL_MS },
		{ "misses", NZ_A_HB_MISSES },
		{ "grace", NZ_A_GRACE_MS },
	};
	struct nlmsghdr *nlh;
	struct nzctl_nl nl;
	bool set;
	int i, k, ret;

	if (argc > 1 && strcmp(argv[1], "show") && strcmp(argv[1], "set"))
		return nzctl_health_usage();
	set = argc > 1 && !strcmp(argv[1], "set");
	if (set && (argc < 4 || argc % 2))
		return nzctl_health_usage();
	if (!set && argc > 2)
		return nzctl_health_usage();
	/* Check every argument before talking to the kernel. */
	for (i = 2; set && i < argc; i += 2) {
		uint32_t v;

		for (k = 0; k < 3 && strcmp(argv[i], kws[k].kw); k++)
			;
		if (k == 3 || nzctl_parse_u32(argv[i + 1], &v)) {
			fprintf(stderr, "nezhactl: health set: bad \"%s %s\"\n",
				argv[i], argv[i + 1]);
			return nzctl_health_usage();
		}
	}
	ret = nzctl_nl_open(&nl);
	if (ret)
		return ret;
	if (set) {
		nlh = nzctl_nl_request(&nl, NZ_CMD_HEALTH_SET, 0);
		for (i = 2; i < argc; i += 2) {
			uint32_t v;

			for (k = 0; strcmp(argv[i], kws[k].kw); k++)
				;
			nzctl_parse_u32(argv[i + 1], &v);
			mnl_attr_put_u32(nlh, kws[k].attr, v);
		}
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
