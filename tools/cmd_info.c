// SPDX-License-Identifier: GPL-2.0
/* nezhactl version | show: what the loaded module is and how it fares. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <linux/genetlink.h>
#include <linux/nezha_netlink.h>
#include "nezha.h"
#include "nezhactl.h"

struct nzctl_info {
	uint32_t abi;
	char release[64];
	uint64_t features;
	uint32_t open_files;
	uint32_t inflight;
	uint64_t stats[NZ_STAT_MAX + 1];
	int have_stats;
};

static int nzctl_stats_cb(const struct nlattr *attr, void *data)
{
	struct nzctl_info *info = data;
	int type = mnl_attr_get_type(attr);

	if (type > NZ_STAT_PAD && type <= NZ_STAT_MAX &&
	    mnl_attr_validate(attr, MNL_TYPE_U64) >= 0)
		info->stats[type] = mnl_attr_get_u64(attr);
	return MNL_CB_OK;
}

static int nzctl_info_cb(const struct nlmsghdr *nlh, void *data)
{
	struct nzctl_info *info = data;
	struct nlattr *attr;

	mnl_attr_for_each(attr, nlh, sizeof(struct genlmsghdr)) {
		switch (mnl_attr_get_type(attr)) {
		case NZ_A_ABI_VERSION:
			info->abi = mnl_attr_get_u32(attr);
			break;
		case NZ_A_RELEASE:
			snprintf(info->release, sizeof(info->release), "%s",
				 mnl_attr_get_str(attr));
			break;
		case NZ_A_FEATURES:
			info->features = mnl_attr_get_u64(attr);
			break;
		case NZ_A_OPEN_FILES:
			info->open_files = mnl_attr_get_u32(attr);
			break;
		case NZ_A_INFLIGHT:
			info->inflight = mnl_attr_get_u32(attr);
			break;
		case NZ_A_STATS:
			info->have_stats = 1;
			mnl_attr_parse_nested(attr, nzctl_stats_cb, info);
			break;
		}
	}
	return MNL_CB_OK;
}

static int nzctl_get_info(struct nzctl_info *info)
{
	struct nzctl_nl nl;
	int ret;

	memset(info, 0, sizeof(*info));
	ret = nzctl_nl_open(&nl);
	if (ret)
		return ret;
	ret = nzctl_nl_talk(&nl, nzctl_nl_request(&nl, NZ_CMD_GET_INFO, 0),
			    nzctl_info_cb, info);
	if (ret)
		nzctl_nl_perror(&nl, ret, "get info");
	nzctl_nl_close(&nl);
	return ret;
}

static const char *const nzctl_feature_names[] = {
	"nop", "nop-defer", "p2p", "fixed-buffers", "tcp", "rdma", "cancel",
};

int nzctl_version(int argc, char **argv)
{
	struct nzctl_info info;
	int ret;

	if (argc > 1 && nzctl_is_help(argv[1])) {
		printf("usage: nezhactl [-j] [-p] version\n");
		return 0;
	}
	if (argc > 1)
		return nzctl_usage_err("nezhactl [-j] [-p] version",
				       "version: too many arguments");
	if (!nzctl.json)
		printf("nezhactl %s, libnezha %s, abi %d\n", NZ_LIB_VERSION,
		       nz_library_version(), NZ_ABI_VERSION);
	ret = nzctl_get_info(&info);
	if (ret)
		return ret;
	if (nzctl.json) {
		nzj_obj_open(&nzctl.j, NULL);
		nzj_str(&nzctl.j, "nezhactl", NZ_LIB_VERSION);
		nzj_str(&nzctl.j, "libnezha", nz_library_version());
		nzj_u64(&nzctl.j, "abi", NZ_ABI_VERSION);
		nzj_obj_open(&nzctl.j, "module");
		nzj_str(&nzctl.j, "release", info.release);
		nzj_u64(&nzctl.j, "abi", info.abi);
		nzj_obj_close(&nzctl.j);
		nzj_obj_close(&nzctl.j);
		nzj_end(&nzctl.j);
	} else {
		printf("module nezha %s, abi %" PRIu32 "\n", info.release, info.abi);
	}
	if (info.abi != NZ_ABI_VERSION)
		fprintf(stderr, "nezhactl: warning: module abi %" PRIu32
			" differs from ours (%d)\n", info.abi, NZ_ABI_VERSION);
	return 0;
}

static void nzctl_print_features(uint64_t f)
{
	size_t i;

	printf("features:");
	for (i = 0; i < sizeof(nzctl_feature_names) /
		    sizeof(nzctl_feature_names[0]); i++)
		if (f & (1ULL << i))
			printf(" %s", nzctl_feature_names[i]);
	printf("\n");
}

static void nzctl_show_json(const struct nzctl_info *info,
			    const char *const *names)
{
	struct nzj *j = &nzctl.j;
	size_t i;

	nzj_obj_open(j, NULL);
	nzj_str(j, "release", info->release);
	nzj_u64(j, "abi", info->abi);
	nzj_arr_open(j, "features");
	for (i = 0; i < sizeof(nzctl_feature_names) / sizeof(nzctl_feature_names[0]); i++)
		if (info->features & (1ULL << i))
			nzj_str(j, NULL, nzctl_feature_names[i]);
	nzj_arr_close(j);
	nzj_u64(j, "open_files", info->open_files);
	nzj_u64(j, "inflight", info->inflight);
	nzj_obj_open(j, "commands");
	for (i = NZ_STAT_PAD + 1; i <= NZ_STAT_MAX; i++)
		if (names[i])
			nzj_u64(j, names[i], info->stats[i]);
	nzj_obj_close(j);
	nzj_obj_close(j);
	nzj_end(j);
}

int nzctl_show(int argc, char **argv)
{
	static const char *const names[NZ_STAT_MAX + 1] = {
		[NZ_STAT_OPENS] = "opens",
		[NZ_STAT_CMDS_SUBMITTED] = "submitted",
		[NZ_STAT_CMDS_COMPLETED] = "completed",
		[NZ_STAT_CMDS_FAILED] = "failed",
		[NZ_STAT_CMDS_REJECTED] = "rejected",
		[NZ_STAT_CMDS_CANCELLED] = "cancelled",
	};
	struct nzctl_info info;
	int i, ret;

	if (argc > 1 && nzctl_is_help(argv[1])) {
		printf("usage: nezhactl [-j] [-p] show\n");
		return 0;
	}
	if (argc > 1)
		return nzctl_usage_err("nezhactl [-j] [-p] show", "show: too many arguments");
	ret = nzctl_get_info(&info);
	if (ret)
		return ret;
	if (nzctl.json) {
		nzctl_show_json(&info, names);
		return 0;
	}
	printf("nezha %s abi %" PRIu32 "\n", info.release, info.abi);
	nzctl_print_features(info.features);
	printf("files: %" PRIu32 " open, %" PRIu32 " commands in flight\n",
	       info.open_files, info.inflight);
	if (!info.have_stats)
		return 0;
	printf("commands:");
	for (i = NZ_STAT_PAD + 1; i <= NZ_STAT_MAX; i++)
		if (names[i])
			printf(" %s %" PRIu64, names[i], info.stats[i]);
	printf("\n");
	return 0;
}
