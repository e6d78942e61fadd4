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
#include "rail.h"
#include "transport.h"
#include "comm.h"

void nz_fill_version(struct nz_version *v)
{
	memset(v, 0, sizeof(*v));
	v->abi_version = NZ_ABI_VERSION;
	v->max_rails = NZ_MAX_RAILS;
	v->features = NZ_FEAT_NOP | NZ_FEAT_NOP_DEFER | NZ_FEAT_P2P |
		      NZ_FEAT_FIXED_BUF | NZ_FEAT_TCP | NZ_FEAT_CANCEL |
		      NZ_FEAT_FRAME_MAC | NZ_FEAT_AGG_RAIL;
	if (nz_transport_loaded(NZ_PROTO_RDMA))
		v->features |= NZ_FEAT_RDMA;
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

/* Rails. */

static int nz_nl_require(struct genl_info *info, int attr, const char *msg)
{
	if (!GENL_REQ_ATTR_CHECK(info, attr))
		return 0;
	/* msg has static storage: every caller passes a literal. */
	if (info->extack)
		info->extack->_msg = msg;
	return -EINVAL;
}

static int nz_nl_check_name(const struct nlattr *attr,
			    struct netlink_ext_ack *extack)
{
	size_t len = strnlen(nla_data(attr), nla_len(attr));

	if (!len) {
		NL_SET_ERR_MSG_ATTR(extack, attr, "rail name is empty");
		return -EINVAL;
	}
	if (len >= NZ_RAIL_NAME_LEN) {
		NL_SET_ERR_MSG_ATTR(extack, attr,
				    "rail name is longer than 15 characters");
		return -EINVAL;
	}
	if (!nz_rail_name_valid(nla_data(attr))) {
		NL_SET_ERR_MSG_ATTR(extack, attr,
				    "rail name may only contain A-Z a-z 0-9 _ . -");
		return -EINVAL;
	}
	return 0;
}

/* A netdev (TCP) or an RDMA device name (up to 63 characters). */
static int nz_nl_check_dev(const struct nlattr *attr,
			   struct netlink_ext_ack *extack)
{
	size_t len = strnlen(nla_data(attr), nla_len(attr));

	if (!len) {
		NL_SET_ERR_MSG_ATTR(extack, attr, "device name is empty");
		return -EINVAL;
	}
	if (len >= NZ_RAIL_DEV_LEN) {
		NL_SET_ERR_MSG_ATTR(extack, attr,
				    "device name is longer than 63 characters");
		return -EINVAL;
	}
	return 0;
}

static int nz_nl_check_netdev(const struct nlattr *attr,
			      struct netlink_ext_ack *extack)
{
	size_t len = strnlen(nla_data(attr), nla_len(attr));

	if (!len) {
		NL_SET_ERR_MSG_ATTR(extack, attr, "netdev name is empty");
		return -EINVAL;
	}
	if (len >= IFNAMSIZ) {
		NL_SET_ERR_MSG_ATTR(extack, attr,
				    "netdev name is longer than 15 characters");
		return -EINVAL;
	}
	return 0;
}

static int nz_nl_put_rail_stats(struct sk_buff *skb,
				const struct nz_rail_stats *st)
{
	const struct {
		int attr;
		u64 val;
	} tbl[] = {
		{ NZ_RSTAT_BYTES_TX, atomic64_read(&st->bytes_tx) },
		{ NZ_RSTAT_BYTES_RX, atomic64_read(&st->bytes_rx) },
		{ NZ_RSTAT_CHUNKS_TX, atomic64_read(&st->chunks_tx) },
		{ NZ_RSTAT_CHUNKS_RX, atomic64_read(&st->chunks_rx) },
		{ NZ_RSTAT_ERRORS, atomic64_read(&st->errors) },
		{ NZ_RSTAT_HS_REFUSED, atomic64_read(&st->hs_refused) },
		{ NZ_RSTAT_CONNS, atomic_read(&st->conns) },
		{ NZ_RSTAT_FAILOVERS, atomic64_read(&st->failovers) },
		{ NZ_RSTAT_RESENT, atomic64_read(&st->resent) },
		{ NZ_RSTAT_MAC_FAILURES, atomic64_read(&st->mac_failures) },
		{ NZ_RSTAT_AGG_PROBES, atomic64_read(&st->agg_probes) },
		{ NZ_RSTAT_AGG_ANSWERS, atomic64_read(&st->agg_answers) },
		{ NZ_RSTAT_AGG_DROPPED, atomic64_read(&st->agg_dropped) },
		{ NZ_RSTAT_AGG_LOST, atomic64_read(&st->agg_lost) },
	};
	struct nlattr *nest;
	int i;

	nest = nla_nest_start(skb, NZ_A_RAIL_STATS);
	if (!nest)
		return -EMSGSIZE;
	for (i = 0; i < ARRAY_SIZE(tbl); i++)
		if (nla_put_u64_64bit(skb, tbl[i].attr, tbl[i].val,
				      NZ_RSTAT_PAD))
			return -EMSGSIZE;
	nla_nest_end(skb, nest);
	return 0;
}

static int nz_nl_put_rail(struct sk_buff *skb, struct nz_rail *rail)
{
	if (nla_put_string(skb, NZ_A_RAIL_NAME, rail->name) ||
	    nla_put_u32(skb, NZ_A_RAIL_ID, rail->id) ||
	    nla_put_u32(skb, NZ_A_RAIL_PROTO, rail->proto) ||
	    nla_put_string(skb, NZ_A_RAIL_DEV, rail->dev) ||
	    nla_put_u32(skb, NZ_A_RAIL_IFINDEX, rail->ifindex) ||
	    nla_put_in_addr(skb, NZ_A_RAIL_ADDR, rail->addr) ||
	    nla_put_u16(skb, NZ_A_RAIL_PORT, rail->port) ||
	    nla_put_u32(skb, NZ_A_RAIL_WEIGHT, READ_ONCE(rail->weight)) ||
	    nla_put_u32(skb, NZ_A_RAIL_STATE, nz_rail_state(rail)) ||
	    nla_put_string(skb, NZ_A_RAIL_NETDEV, rail->netdev) ||
	    nla_put_u32(skb, NZ_A_RAIL_SPEED, READ_ONCE(rail->speed_mbps)) ||
	    nla_put_u8(skb, NZ_A_RAIL_FRAME_MAC, rail->frame_mac) ||
	    nz_nl_put_rail_stats(skb, &rail->stats))
		return -EMSGSIZE;
	if (rail->ib_port &&
	    nla_put_u32(skb, NZ_A_RAIL_IBPORT, rail->ib_port))
		return -EMSGSIZE;
	if (rail->gid_index != NZ_GID_INDEX_AUTO &&
	    nla_put_u32(skb, NZ_A_RAIL_GID_INDEX, rail->gid_index))
		return -EMSGSIZE;
	if (rail->proto == NZ_PROTO_AGG &&
	    (nla_put_in_addr(skb, NZ_A_RAIL_AGG_ADDR, rail->peer_addr) ||
	     nla_put_u16(skb, NZ_A_RAIL_AGG_PORT, rail->peer_port) ||
	     nla_put_u32(skb, NZ_A_RAIL_AGG_RTT_US,
			 READ_ONCE(rail->peer_rtt_us))))
		return -EMSGSIZE;
	return 0;
}

/* Point the error at the attribute the rail table objected to. */
static void nz_nl_blame(struct genl_info *info, int err)
{
	struct nlattr **attrs = info->attrs;
	struct nlattr *attr;

	switch (err) {
	case -EEXIST:
		attr = attrs[NZ_A_RAIL_NAME];
		break;
	case -EPROTONOSUPPORT:
		attr = attrs[NZ_A_RAIL_PROTO];
		break;
	case -ENODEV:
		attr = attrs[NZ_A_RAIL_DEV] ?: attrs[NZ_A_RAIL_NETDEV];
		break;
	case -EADDRNOTAVAIL:
		attr = attrs[NZ_A_RAIL_ADDR] ?: attrs[NZ_A_RAIL_DEV];
		break;
	case -EADDRINUSE:
		attr = attrs[NZ_A_RAIL_PORT] ?: attrs[NZ_A_RAIL_ADDR];
		break;
	case -EDESTADDRREQ:
		attr = attrs[NZ_A_RAIL_PROTO];
		break;
	default:
		return;
	}
	if (attr)
		NL_SET_BAD_ATTR(info->extack, attr);
}

static void nz_nl_config_event(struct genl_info *info, u32 type,
				const char *name);

static int nz_nl_rail_add(struct sk_buff *skb, struct genl_info *info)
{
	struct nz_rail_cfg cfg = {
		.weight = NZ_DEFAULT_WEIGHT,
		.gid_index = NZ_GID_INDEX_AUTO,
	};
	struct nlattr **attrs = info->attrs;
	int ret;

	ret = nz_nl_require(info, NZ_A_RAIL_NAME, "rail name missing") ?:
	      nz_nl_require(info, NZ_A_RAIL_PROTO, "rail protocol missing");
	if (ret)
		return ret;
	if (!attrs[NZ_A_RAIL_NETDEV]) {
		ret = nz_nl_require(info, NZ_A_RAIL_DEV, "rail device missing");
		if (ret)
			return ret;
	}
	nla_strscpy(cfg.name, attrs[NZ_A_RAIL_NAME], sizeof(cfg.name));
	cfg.proto = nla_get_u32(attrs[NZ_A_RAIL_PROTO]);
	if (attrs[NZ_A_RAIL_DEV])
		nla_strscpy(cfg.dev, attrs[NZ_A_RAIL_DEV], sizeof(cfg.dev));
	if (attrs[NZ_A_RAIL_NETDEV])
		nla_strscpy(cfg.netdev, attrs[NZ_A_RAIL_NETDEV],
			    sizeof(cfg.netdev));
	if (attrs[NZ_A_RAIL_IBPORT])
		cfg.ib_port = nla_get_u32(attrs[NZ_A_RAIL_IBPORT]);
	if (attrs[NZ_A_RAIL_GID_INDEX])
		cfg.gid_index = nla_get_u32(attrs[NZ_A_RAIL_GID_INDEX]);
	if (attrs[NZ_A_RAIL_ADDR])
		cfg.addr = nla_get_in_addr(attrs[NZ_A_RAIL_ADDR]);
	if (attrs[NZ_A_RAIL_PORT])
		cfg.port = nla_get_u16(attrs[NZ_A_RAIL_PORT]);
	if (attrs[NZ_A_RAIL_WEIGHT])
		cfg.weight = nla_get_u32(attrs[NZ_A_RAIL_WEIGHT]);
	if (attrs[NZ_A_RAIL_FRAME_MAC])
		cfg.frame_mac = nla_get_u8(attrs[NZ_A_RAIL_FRAME_MAC]);
	if (attrs[NZ_A_RAIL_AGG_ADDR])
		cfg.agg_addr = nla_get_in_addr(attrs[NZ_A_RAIL_AGG_ADDR]);
	if (attrs[NZ_A_RAIL_AGG_PORT])
		cfg.agg_port = nla_get_u16(attrs[NZ_A_RAIL_AGG_PORT]);

	ret = nz_rail_add(genl_info_net(info), &cfg, info->extack);
	if (ret)
		nz_nl_blame(info, ret);
	else
		nz_nl_config_event(info, NZ_EV_RAIL_ADD, cfg.name);
	return ret;
}

static int nz_nl_rail_del(struct sk_buff *skb, struct genl_info *info)
{
	struct nlattr *name = info->attrs[NZ_A_RAIL_NAME];
	int ret;

	ret = nz_nl_require(info, NZ_A_RAIL_NAME, "rail name missing");
	if (ret)
		return ret;
	ret = nz_rail_del(nla_data(name));
	if (ret == -ENOENT)
		NL_SET_ERR_MSG_ATTR(info->extack, name, "no such rail");
	else if (!ret)
		nz_nl_config_event(info, NZ_EV_RAIL_DEL, nla_data(name));
	return ret;
}

static int nz_nl_rail_set(struct sk_buff *skb, struct genl_info *info)
{
	struct nlattr **attrs = info->attrs;
	u32 weight, *pweight = NULL;
	bool up, *pup = NULL;
	int ret;

	ret = nz_nl_require(info, NZ_A_RAIL_NAME, "rail name missing");
	if (ret)
		return ret;
	if (!attrs[NZ_A_RAIL_WEIGHT] && !attrs[NZ_A_RAIL_ADMIN]) {
		GENL_SET_ERR_MSG(info, "nothing to set: no weight, no admin state");
		return -EINVAL;
	}
	if (attrs[NZ_A_RAIL_WEIGHT]) {
		weight = nla_get_u32(attrs[NZ_A_RAIL_WEIGHT]);
		pweight = &weight;
	}
	if (attrs[NZ_A_RAIL_ADMIN]) {
		up = nla_get_u8(attrs[NZ_A_RAIL_ADMIN]);
		pup = &up;
	}
	ret = nz_rail_set(nla_data(attrs[NZ_A_RAIL_NAME]), pweight, pup);
	if (ret == -ENOENT)
		NL_SET_ERR_MSG_ATTR(info->extack, attrs[NZ_A_RAIL_NAME],
				    "no such rail");
	else if (!ret)
		nz_nl_config_event(info, NZ_EV_RAIL_SET,
				   nla_data(attrs[NZ_A_RAIL_NAME]));
	return ret;
}

static int nz_nl_rail_get(struct sk_buff *skb, struct genl_info *info)
{
	struct nlattr *name = info->attrs[NZ_A_RAIL_NAME];
	struct nz_rail *rail;
	struct sk_buff *msg;
	void *hdr;
	int ret;

	ret = nz_nl_require(info, NZ_A_RAIL_NAME, "rail name missing");
	if (ret)
		return ret;
	rail = nz_rail_get(nla_data(name));
	if (!rail) {
		NL_SET_ERR_MSG_ATTR(info->extack, name, "no such rail");
		return -ENOENT;
	}
	ret = -ENOMEM;
	msg = genlmsg_new(NLMSG_GOODSIZE, GFP_KERNEL);
	if (!msg)
		goto out_put;
	ret = -EMSGSIZE;
	hdr = genlmsg_put_reply(msg, info, &nz_genl_family, 0,
				NZ_CMD_RAIL_GET);
	if (!hdr || nz_nl_put_rail(msg, rail)) {
		nlmsg_free(msg);
		goto out_put;
	}
	genlmsg_end(msg, hdr);
	ret = genlmsg_reply(msg, info);
out_put:
	nz_rail_put(rail);
	return ret;
}

struct nz_nl_dump {
	struct sk_buff *skb;
	struct netlink_callback *cb;
};

static int nz_nl_dump_rail(struct nz_rail *rail, void *arg)
{
	struct nz_nl_dump *d = arg;
	void *hdr;

	hdr = genlmsg_put(d->skb, NETLINK_CB(d->cb->skb).portid,
			  d->cb->nlh->nlmsg_seq, &nz_genl_family, NLM_F_MULTI,
			  NZ_CMD_RAIL_GET);
	if (!hdr)
		return -EMSGSIZE;
	if (nz_nl_put_rail(d->skb, rail)) {
		genlmsg_cancel(d->skb, hdr);
		return -EMSGSIZE;
	}
	genlmsg_end(d->skb, hdr);
	/* Resume after this slot if the next rail does not fit. */
	d->cb->args[0] = rail->id + 1;
	return 0;
}

static int nz_nl_rail_dump(struct sk_buff *skb, struct netlink_callback *cb)
{
	struct nz_nl_dump d = { .skb = skb, .cb = cb };
	int ret;

	ret = nz_rail_for_each(nz_nl_dump_rail, &d, cb->args[0]);
	/* A full skb ends this round; an empty one means no rail fits. */
	if (ret && (ret != -EMSGSIZE || !skb->len))
		return ret;
	return skb->len;
}

static const struct nla_policy nz_genl_policy[NZ_A_MAX + 1] = {
	[NZ_A_ABI_VERSION] = { .type = NLA_U32 },
	[NZ_A_RELEASE] = { .type = NLA_NUL_STRING },
	[NZ_A_FEATURES] = { .type = NLA_U64 },
	[NZ_A_OPEN_FILES] = { .type = NLA_U32 },
	[NZ_A_INFLIGHT] = { .type = NLA_U32 },
	[NZ_A_STATS] = { .type = NLA_NESTED },
};

#define NZ_POLICY_RAIL_NAME NLA_POLICY_VALIDATE_FN(NLA_NUL_STRING, nz_nl_check_name)

/* Beyond the s16 of NLA_POLICY_MAX. */
static struct netlink_range_validation nz_gid_index_range = {
	.max = NZ_MAX_GID_INDEX,
};

static const struct nla_policy nz_rail_add_policy[NZ_A_MAX + 1] = {
	[NZ_A_RAIL_NAME] = NZ_POLICY_RAIL_NAME,
	[NZ_A_RAIL_PROTO] = NLA_POLICY_RANGE(NLA_U32, NZ_PROTO_TCP,
					     NZ_PROTO_AGG),
	[NZ_A_RAIL_DEV] = NLA_POLICY_VALIDATE_FN(NLA_NUL_STRING,
						 nz_nl_check_dev),
	[NZ_A_RAIL_ADDR] = { .type = NLA_BE32 },
	[NZ_A_RAIL_PORT] = NLA_POLICY_MIN(NLA_U16, 1),
	[NZ_A_RAIL_WEIGHT] = NLA_POLICY_MAX(NLA_U32, NZ_MAX_WEIGHT),
	[NZ_A_RAIL_NETDEV] = NLA_POLICY_VALIDATE_FN(NLA_NUL_STRING,
						    nz_nl_check_netdev),
	[NZ_A_RAIL_IBPORT] = NLA_POLICY_RANGE(NLA_U32, 1, NZ_MAX_IBPORT),
	[NZ_A_RAIL_GID_INDEX] = NLA_POLICY_FULL_RANGE(NLA_U32,
						      &nz_gid_index_range),
	[NZ_A_RAIL_FRAME_MAC] = NLA_POLICY_MAX(NLA_U8, 1),
	[NZ_A_RAIL_AGG_ADDR] = { .type = NLA_BE32 },
	[NZ_A_RAIL_AGG_PORT] = NLA_POLICY_MIN(NLA_U16, 1),
};

/* RAIL_DEL and RAIL_GET: a name, nothing else. */
static const struct nla_policy nz_rail_name_policy[NZ_A_MAX + 1] = {
	[NZ_A_RAIL_NAME] = NZ_POLICY_RAIL_NAME,
};

static const struct nla_policy nz_rail_set_policy[NZ_A_MAX + 1] = {
	[NZ_A_RAIL_NAME] = NZ_POLICY_RAIL_NAME,
	[NZ_A_RAIL_WEIGHT] = NLA_POLICY_MAX(NLA_U32, NZ_MAX_WEIGHT),
	[NZ_A_RAIL_ADMIN] = NLA_POLICY_MAX(NLA_U8, 1),
};

/*
 * Commands from NZ_CMD_RAIL_ADD on are validated strictly against their own
 * policy (resv_start_op): unknown and out-of-place attributes are errors.
 */
/* ---- health parameters and path events ---------------------------------- */

static struct netlink_range_validation nz_grace_range = {
	.max = 3600000,
};

static const struct nla_policy nz_health_policy[NZ_A_MAX + 1] = {
	[NZ_A_HB_INTERVAL_MS] = NLA_POLICY_RANGE(NLA_U32, 1, 10000),
	[NZ_A_HB_MISSES] = NLA_POLICY_RANGE(NLA_U32, 2, 100),
	[NZ_A_GRACE_MS] = NLA_POLICY_FULL_RANGE(NLA_U32, &nz_grace_range),
};

static int nz_nl_health_get(struct sk_buff *skb, struct genl_info *info)
{
	struct sk_buff *msg;
	void *hdr;

	msg = genlmsg_new(NLMSG_GOODSIZE, GFP_KERNEL);
	if (!msg)
		return -ENOMEM;
	hdr = genlmsg_put_reply(msg, info, &nz_genl_family, 0,
				NZ_CMD_HEALTH_GET);
	if (!hdr ||
	    nla_put_u32(msg, NZ_A_HB_INTERVAL_MS,
			READ_ONCE(nz_health.hb_interval_ms)) ||
	    nla_put_u32(msg, NZ_A_HB_MISSES, READ_ONCE(nz_health.hb_misses)) ||
	    nla_put_u32(msg, NZ_A_GRACE_MS, READ_ONCE(nz_health.grace_ms))) {
		nlmsg_free(msg);
		return -EMSGSIZE;
	}
	genlmsg_end(msg, hdr);
	return genlmsg_reply(msg, info);
}

static const u32 *nz_nl_u32_or_null(struct genl_info *info, int attr,
				    u32 *store)
{
	if (!info->attrs[attr])
		return NULL;
	*store = nla_get_u32(info->attrs[attr]);
	return store;
}

static int nz_nl_health_set(struct sk_buff *skb, struct genl_info *info)
{
	u32 iv, mi, gr;
	const u32 *piv = nz_nl_u32_or_null(info, NZ_A_HB_INTERVAL_MS, &iv);
	const u32 *pmi = nz_nl_u32_or_null(info, NZ_A_HB_MISSES, &mi);
	const u32 *pgr = nz_nl_u32_or_null(info, NZ_A_GRACE_MS, &gr);

	int ret;

	if (!piv && !pmi && !pgr) {
		NL_SET_ERR_MSG(info->extack, "nothing to set");
		return -EINVAL;
	}
	ret = nz_health_set(piv, pmi, pgr);
	if (!ret)
		nz_nl_config_event(info, NZ_EV_HEALTH_SET, NULL);
	return ret;
}

/*
 * Events name jobs: only an administrator may listen.  Kernels without
 * GENL_MCAST_CAP_NET_ADMIN (older than 6.6 and its stable backports)
 * leave the group open; there the events carry no job id.
 */
#ifdef GENL_MCAST_CAP_NET_ADMIN
#define NZ_EVENTS_ADMIN_ONLY	true
#define NZ_EVENTS_GRP_FLAGS	GENL_MCAST_CAP_NET_ADMIN
#else
#define NZ_EVENTS_ADMIN_ONLY	false
#define NZ_EVENTS_GRP_FLAGS	0
#endif

static const struct genl_multicast_group nz_genl_mcgrps[] = {
	{ .name = NZ_GENL_MCGRP_EVENTS, .flags = NZ_EVENTS_GRP_FLAGS },
};

/* Announce a path event to NZ_GENL_MCGRP_EVENTS listeners, best effort. */
void nz_netlink_event(const struct nz_event *ev)
{
	struct sk_buff *msg;
	void *hdr;

	msg = genlmsg_new(NLMSG_GOODSIZE, GFP_KERNEL);
	if (!msg)
		return;
	hdr = genlmsg_put(msg, 0, 0, &nz_genl_family, 0, NZ_CMD_EVENT);
	if (!hdr ||
	    nla_put_u32(msg, NZ_A_EV_TYPE, ev->type) ||
	    nla_put_string(msg, NZ_A_RAIL_NAME, ev->rail->name) ||
	    (NZ_EVENTS_ADMIN_ONLY &&
	     nla_put_u64_64bit(msg, NZ_A_EV_JOB, ev->job, NZ_A_PAD)) ||
	    nla_put_u32(msg, NZ_A_EV_RANK, ev->rank) ||
	    nla_put_u32(msg, NZ_A_EV_PEER, ev->peer) ||
	    nla_put_u32(msg, NZ_A_EV_ERROR, -ev->err) ||
	    nla_put_u32(msg, NZ_A_EV_RESENT, ev->resent)) {
		nlmsg_free(msg);
		return;
	}
	genlmsg_end(msg, hdr);
	genlmsg_multicast_netns(&nz_genl_family, ev->rail->net, msg, 0, 0,
				GFP_KERNEL);
}

/* The event's own attributes: the rail as RAIL_GET has it, or health. */
static int nz_nl_put_config(struct sk_buff *msg, u32 type, const char *name)
{
	struct nz_rail *rail;
	int ret;

	if (type == NZ_EV_HEALTH_SET)
		return nla_put_u32(msg, NZ_A_HB_INTERVAL_MS,
				   READ_ONCE(nz_health.hb_interval_ms)) ?:
		       nla_put_u32(msg, NZ_A_HB_MISSES,
				   READ_ONCE(nz_health.hb_misses)) ?:
		       nla_put_u32(msg, NZ_A_GRACE_MS,
				   READ_ONCE(nz_health.grace_ms));
	if (type == NZ_EV_RAIL_DEL)
		return nla_put_string(msg, NZ_A_RAIL_NAME, name);
	rail = nz_rail_get(name);
	if (!rail)		/* deleted meanwhile: its DEL event follows */
		return -ENOENT;
	ret = nz_nl_put_rail(msg, rail);
	nz_rail_put(rail);
	return ret;
}

/*
 * Tell NZ_GENL_MCGRP_EVENTS listeners of the request's namespace about a
 * configuration change that succeeded; best effort, like path events.
 */
static void nz_nl_config_event(struct genl_info *info, u32 type,
			       const char *name)
{
	struct sk_buff *msg;
	void *hdr;

	msg = genlmsg_new(NLMSG_GOODSIZE, GFP_KERNEL);
	if (!msg)
		return;
	hdr = genlmsg_put(msg, 0, 0, &nz_genl_family, 0, NZ_CMD_EVENT);
	if (!hdr || nla_put_u32(msg, NZ_A_EV_TYPE, type) ||
	    nz_nl_put_config(msg, type, name)) {
		nlmsg_free(msg);
		return;
	}
	genlmsg_end(msg, hdr);
	genlmsg_multicast_netns(&nz_genl_family, genl_info_net(info), msg, 0,
				0, GFP_KERNEL);
}

static const struct genl_ops nz_genl_ops[] = {
	{
		.cmd = NZ_CMD_GET_INFO,
		.validate = GENL_DONT_VALIDATE_DUMP,
		.doit = nz_nl_get_info,
	},
	{
		.cmd = NZ_CMD_RAIL_ADD,
		.flags = GENL_ADMIN_PERM,
		.policy = nz_rail_add_policy,
		.maxattr = NZ_A_MAX,
		.doit = nz_nl_rail_add,
	},
	{
		.cmd = NZ_CMD_RAIL_DEL,
		.flags = GENL_ADMIN_PERM,
		.policy = nz_rail_name_policy,
		.maxattr = NZ_A_MAX,
		.doit = nz_nl_rail_del,
	},
	{
		.cmd = NZ_CMD_RAIL_SET,
		.flags = GENL_ADMIN_PERM,
		.policy = nz_rail_set_policy,
		.maxattr = NZ_A_MAX,
		.doit = nz_nl_rail_set,
	},
	{
		.cmd = NZ_CMD_RAIL_GET,
		.policy = nz_rail_name_policy,
		.maxattr = NZ_A_MAX,
		.doit = nz_nl_rail_get,
		.dumpit = nz_nl_rail_dump,
	},
	{
		.cmd = NZ_CMD_HEALTH_GET,
		.policy = nz_health_policy,
		.maxattr = NZ_A_MAX,
		.doit = nz_nl_health_get,
	},
	{
		.cmd = NZ_CMD_HEALTH_SET,
		.flags = GENL_ADMIN_PERM,
		.policy = nz_health_policy,
		.maxattr = NZ_A_MAX,
		.doit = nz_nl_health_set,
	},
};

static struct genl_family nz_genl_family __ro_after_init = {
	.name = NZ_GENL_NAME,
	.version = NZ_GENL_VERSION,
	.maxattr = NZ_A_MAX,
	.policy = nz_genl_policy,
	.netnsok = true,
	.module = THIS_MODULE,
	.ops = nz_genl_ops,
	.n_ops = ARRAY_SIZE(nz_genl_ops),
	.mcgrps = nz_genl_mcgrps,
	.n_mcgrps = ARRAY_SIZE(nz_genl_mcgrps),
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
