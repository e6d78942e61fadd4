// SPDX-License-Identifier: GPL-2.0
/*
 * Generic netlink family "nezha": the configuration and status interface
 * nezhactl talks to.  The ABI is documented in uapi/linux/nezha_netlink.h.
 */
#include <linux/module.h>
#include <linux/string.h>
#include <net/genetlink.h>
#include <uapi/linux/nezha_netlink.h>
#include "nezha.h"

void nz_fill_version(struct nz_version *v)
{
	memset(v, 0, sizeof(*v));
	v->abi_version = NZ_ABI_VERSION;
	v->max_rails = NZ_MAX_RAILS;
	v->features = NZ_FEAT_NOP | NZ_FEAT_NOP_DEFER;
	strscpy(v->release, NZ_RELEASE, sizeof(v->release));
}

static struct genl_family nz_genl_family;

static int nz_put_stats(struct sk_buff *skb)
{
	static const struct {
		int attr;
		atomic64_t *val;
	} tbl[] = {
		{ NZ_STAT_OPENS, &nz_stats.opens },
		{ NZ_STAT_CMDS_SUBMITTED, &nz_stats.cmds_submitted },
		{ NZ_STAT_CMDS_COMPLETED, &nz_stats.cmds_completed },
		{ NZ_STAT_CMDS_FAILED, &nz_stats.cmds_failed },
		{ NZ_STAT_CMDS_REJECTED, &nz_stats.cmds_rejected },
		{ NZ_STAT_CMDS_CANCELLED, &nz_stats.cmds_cancelled },
	};
	struct nlattr *nest;
	int i;

	nest = nla_nest_start(skb, NZ_A_STATS);
	if (!nest)
		return -EMSGSIZE;
	for (i = 0; i < ARRAY_SIZE(tbl); i++)
		if (nla_put_u64_64bit(skb, tbl[i].attr,
				      atomic64_read(tbl[i].val), NZ_STAT_PAD))
			return -EMSGSIZE;
	nla_nest_end(skb, nest);
	return 0;
}

static int nz_nl_get_info(struct sk_buff *skb, struct genl_info *info)
{
	struct nz_version v;
	struct sk_buff *msg;
	void *hdr;

	msg = genlmsg_new(NLMSG_GOODSIZE, GFP_KERNEL);
	if (!msg)
		return -ENOMEM;
	hdr = genlmsg_put_reply(msg, info, &nz_genl_family, 0,
				NZ_CMD_GET_INFO);
	if (!hdr)
		goto nla_put_failure;
	nz_fill_version(&v);
	if (nla_put_u32(msg, NZ_A_ABI_VERSION, v.abi_version) ||
	    nla_put_string(msg, NZ_A_RELEASE, v.release) ||
	    nla_put_u64_64bit(msg, NZ_A_FEATURES, v.features, NZ_A_PAD) ||
	    nla_put_u32(msg, NZ_A_OPEN_FILES,
			atomic_read(&nz_stats.open_files)) ||
	    nla_put_u32(msg, NZ_A_INFLIGHT, atomic_read(&nz_stats.inflight)) ||
	    nz_put_stats(msg))
		goto nla_put_failure;
	genlmsg_end(msg, hdr);
	return genlmsg_reply(msg, info);

nla_put_failure:
	nlmsg_free(msg);
	return -EMSGSIZE;
}

static const struct nla_policy nz_genl_policy[NZ_A_MAX + 1] = {
	[NZ_A_ABI_VERSION] = { .type = NLA_U32 },
	[NZ_A_RELEASE] = { .type = NLA_NUL_STRING },
	[NZ_A_FEATURES] = { .type = NLA_U64 },
	[NZ_A_OPEN_FILES] = { .type = NLA_U32 },
	[NZ_A_INFLIGHT] = { .type = NLA_U32 },
	[NZ_A_STATS] = { .type = NLA_NESTED },
};

static const struct genl_small_ops nz_genl_ops[] = {
	{
		.cmd = NZ_CMD_GET_INFO,
		.validate = GENL_DONT_VALIDATE_DUMP,
		.doit = nz_nl_get_info,
	},
};

static struct genl_family nz_genl_family __ro_after_init = {
	.name = NZ_GENL_NAME,
	.version = NZ_GENL_VERSION,
	.maxattr = NZ_A_MAX,
	.policy = nz_genl_policy,
	.netnsok = true,
	.module = THIS_MODULE,
	.small_ops = nz_genl_ops,
	.n_small_ops = ARRAY_SIZE(nz_genl_ops),
	.resv_start_op = NZ_CMD_GET_INFO + 1,
};

int nz_netlink_init(void)
{
	return genl_register_family(&nz_genl_family);
}

void nz_netlink_exit(void)
{
	genl_unregister_family(&nz_genl_family);
}
