// SPDX-License-Identifier: GPL-2.0
/* Generic netlink plumbing of nezhactl: resolve the family, talk to it. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <linux/nezha_netlink.h>
#include "nezhactl.h"

static int nzctl_mcgrp_cb(const struct nlattr *grp, void *data)
{
	struct nlattr *attr;
	const char *name = NULL;
	uint32_t id = 0;

	mnl_attr_for_each_nested(attr, grp) {
		if (mnl_attr_get_type(attr) == CTRL_ATTR_MCAST_GRP_NAME &&
		    mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) >= 0)
			name = mnl_attr_get_str(attr);
		else if (mnl_attr_get_type(attr) == CTRL_ATTR_MCAST_GRP_ID &&
			 mnl_attr_validate(attr, MNL_TYPE_U32) >= 0)
			id = mnl_attr_get_u32(attr);
	}
	if (name && !strcmp(name, NZ_GENL_MCGRP_EVENTS))
		((struct nzctl_nl *)data)->mcgrp_events = id;
	return MNL_CB_OK;
}

static int nzctl_family_cb(const struct nlmsghdr *nlh, void *data)
{
	struct nzctl_nl *nl = data;
	struct nlattr *attr;

	mnl_attr_for_each(attr, nlh, sizeof(struct genlmsghdr)) {
		if (mnl_attr_get_type(attr) == CTRL_ATTR_FAMILY_ID &&
		    mnl_attr_validate(attr, MNL_TYPE_U16) >= 0)
			nl->family = mnl_attr_get_u16(attr);
		else if (mnl_attr_get_type(attr) == CTRL_ATTR_MCAST_GROUPS)
			mnl_attr_parse_nested(attr, nzctl_mcgrp_cb, nl);
	}
	return MNL_CB_OK;
}

static struct nlmsghdr *nzctl_nl_put(struct nzctl_nl *nl, uint16_t type,
				     uint8_t cmd, uint8_t version,
				     uint16_t flags)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(nl->buf);
	struct genlmsghdr *genl;

	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
	nlh->nlmsg_seq = ++nl->seq;
	genl = mnl_nlmsg_put_extra_header(nlh, sizeof(*genl));
	genl->cmd = cmd;
	genl->version = version;
	return nlh;
}

struct nzctl_talk {
	struct nzctl_nl *nl;
	mnl_cb_t cb;
	void *data;
};

static int nzctl_talk_data_cb(const struct nlmsghdr *nlh, void *arg)
{
	struct nzctl_talk *t = arg;

	return t->cb ? t->cb(nlh, t->data) : MNL_CB_OK;
}

static int nzctl_ext_policy_cb(const struct nlattr *attr, void *data)
{
	struct nzctl_nl *nl = data;

	if (mnl_attr_validate(attr, MNL_TYPE_U64) < 0)
		return MNL_CB_OK;
	switch (mnl_attr_get_type(attr)) {
	case NL_POLICY_TYPE_ATTR_MIN_VALUE_U:
		nl->ext_min = mnl_attr_get_u64(attr);
		nl->ext_range |= 1;
		break;
	case NL_POLICY_TYPE_ATTR_MAX_VALUE_U:
		nl->ext_max = mnl_attr_get_u64(attr);
		nl->ext_range |= 2;
		break;
	}
	return MNL_CB_OK;
}

/* The TLVs of an extended ack: payload + off .. end of the message. */
static void nzctl_parse_ext_ack(struct nzctl_nl *nl,
				const struct nlmsghdr *nlh, size_t off)
{
	size_t len = mnl_nlmsg_get_payload_len(nlh);
	const struct nlattr *attr;
	const void *tlvs;

	if (!(nlh->nlmsg_flags & NLM_F_ACK_TLVS) || off > len)
		return;
	tlvs = (const char *)mnl_nlmsg_get_payload(nlh) + off;
	mnl_attr_for_each_payload(tlvs, len - off) {
		switch (mnl_attr_get_type(attr)) {
		case NLMSGERR_ATTR_MSG:
			if (mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) >= 0)
				snprintf(nl->ext_msg, sizeof(nl->ext_msg), "%s",
					 mnl_attr_get_str(attr));
			break;
		case NLMSGERR_ATTR_POLICY:
			mnl_attr_parse_nested(attr, nzctl_ext_policy_cb, nl);
			break;
		case NLMSGERR_ATTR_MISS_TYPE:
			if (mnl_attr_validate(attr, MNL_TYPE_U32) >= 0)
				nl->ext_missing = mnl_attr_get_u32(attr);
			break;
		}
	}
}

static int nzctl_talk_error_cb(const struct nlmsghdr *nlh, void *arg)
{
	const struct nlmsgerr *err = mnl_nlmsg_get_payload(nlh);
	struct nzctl_talk *t = arg;
	size_t off;

	if (nlh->nlmsg_len < mnl_nlmsg_size(sizeof(*err))) {
		errno = EBADMSG;
		return MNL_CB_ERROR;
	}
	if (!err->error)
		return MNL_CB_STOP;	/* the ack of a request that worked */
	/* The request comes back too, unless NETLINK_CAP_ACK trimmed it. */
	off = sizeof(*err);
	if (!(nlh->nlmsg_flags & NLM_F_CAPPED))
		off = MNL_ALIGN(off + err->msg.nlmsg_len - sizeof(err->msg));
	nzctl_parse_ext_ack(t->nl, nlh, off);
	errno = err->error < 0 ? -err->error : err->error;
	return MNL_CB_ERROR;
}

/* The end of a dump; it carries the dump's error, if it failed. */
static int nzctl_talk_done_cb(const struct nlmsghdr *nlh, void *arg)
{
	struct nzctl_talk *t = arg;
	int err;

	if (mnl_nlmsg_get_payload_len(nlh) < sizeof(err))
		return MNL_CB_STOP;
	memcpy(&err, mnl_nlmsg_get_payload(nlh), sizeof(err));
	if (!err)
		return MNL_CB_STOP;
	nzctl_parse_ext_ack(t->nl, nlh, sizeof(err));
	errno = err < 0 ? -err : err;
	return MNL_CB_ERROR;
}

static mnl_cb_t nzctl_ctl_cbs[NLMSG_MIN_TYPE] = {
	[NLMSG_ERROR] = nzctl_talk_error_cb,
	[NLMSG_DONE] = nzctl_talk_done_cb,
};

int nzctl_nl_talk(struct nzctl_nl *nl, struct nlmsghdr *req,
		  mnl_cb_t cb, void *data)
{
	struct nzctl_talk t = { .nl = nl, .cb = cb, .data = data };
	unsigned int seq = req->nlmsg_seq;
	int ret;

	nl->ext_msg[0] = '\0';
	nl->ext_range = 0;
	nl->ext_missing = 0;
	if (mnl_socket_sendto(nl->sock, req, req->nlmsg_len) < 0)
		return -errno;
	do {
		ret = mnl_socket_recvfrom(nl->sock, nl->buf, sizeof(nl->buf));
		if (ret < 0)
			return -errno;
		ret = mnl_cb_run2(nl->buf, ret, seq, nl->portid,
				  nzctl_talk_data_cb, &t, nzctl_ctl_cbs,
				  NLMSG_MIN_TYPE);
	} while (ret > 0);
	return ret < 0 ? -errno : 0;
}

void nzctl_nl_perror(const struct nzctl_nl *nl, int err, const char *what)
{
	fprintf(stderr, "nezhactl: %s: %s", what, strerror(-err));
	if (nl->ext_msg[0])
		fprintf(stderr, ": %s", nl->ext_msg);
	if (nl->ext_range == 3)
		fprintf(stderr, " (valid: %" PRIu64 "..%" PRIu64 ")",
			nl->ext_min, nl->ext_max);
	else if (nl->ext_range == 1)
		fprintf(stderr, " (valid: %" PRIu64 " or more)", nl->ext_min);
	else if (nl->ext_range == 2)
		fprintf(stderr, " (valid: up to %" PRIu64 ")", nl->ext_max);
	if (nl->ext_missing)
		fprintf(stderr, " (attribute %" PRIu32 " missing)",
			nl->ext_missing);
	fputc('\n', stderr);
}

int nzctl_nl_open(struct nzctl_nl *nl)
{
	struct nlmsghdr *nlh;
	int ret, one = 1;

	memset(nl, 0, sizeof(*nl));
	nl->seq = (unsigned int)time(NULL);
	nl->sock = mnl_socket_open(NETLINK_GENERIC);
	if (!nl->sock) {
		ret = -errno;
		fprintf(stderr, "nezhactl: generic netlink: %s\n", strerror(-ret));
		return ret;
	}
	if (mnl_socket_bind(nl->sock, 0, MNL_SOCKET_AUTOPID) < 0) {
		ret = -errno;
		goto out_close;
	}
	nl->portid = mnl_socket_get_portid(nl->sock);
	/* nlctrl's one multicast group, "notify", has the family's id. */
	nl->mcgrp_ctrl = GENL_ID_CTRL;
	/* Best effort: older kernels simply explain less. */
	mnl_socket_setsockopt(nl->sock, NETLINK_EXT_ACK, &one, sizeof(one));
	mnl_socket_setsockopt(nl->sock, NETLINK_CAP_ACK, &one, sizeof(one));

	nlh = nzctl_nl_put(nl, GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 1, 0);
	mnl_attr_put_strz(nlh, CTRL_ATTR_FAMILY_NAME, NZ_GENL_NAME);
	ret = nzctl_nl_talk(nl, nlh, nzctl_family_cb, nl);
	if (ret == -ENOENT || (!ret && !nl->family)) {
		fprintf(stderr,
			"nezhactl: the nezha module is not loaded (no netlink family \"%s\")\n",
			NZ_GENL_NAME);
		ret = -ENOENT;
	}
	if (ret)
		goto out_close;
	return 0;

out_close:
	/* Said above when the module is missing; anything else here. */
	if (ret != -ENOENT)
		fprintf(stderr, "nezhactl: generic netlink: %s\n", strerror(-ret));
	mnl_socket_close(nl->sock);
	nl->sock = NULL;
	return ret;
}

void nzctl_nl_close(struct nzctl_nl *nl)
{
	if (nl->sock)
		mnl_socket_close(nl->sock);
	nl->sock = NULL;
}

struct nlmsghdr *nzctl_nl_request(struct nzctl_nl *nl, uint8_t cmd,
				  uint16_t flags)
{
	return nzctl_nl_put(nl, nl->family, cmd, NZ_GENL_VERSION, flags);
}
