// SPDX-License-Identifier: GPL-2.0
/* Generic netlink plumbing of nezhactl: resolve the family, talk to it. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <linux/genetlink.h>
#include <linux/nezha_netlink.h>
#include "nezhactl.h"

static int nzctl_family_cb(const struct nlmsghdr *nlh, void *data)
{
	struct nlattr *attr;

	mnl_attr_for_each(attr, nlh, sizeof(struct genlmsghdr))
		if (mnl_attr_get_type(attr) == CTRL_ATTR_FAMILY_ID &&
		    mnl_attr_validate(attr, MNL_TYPE_U16) >= 0)
			*(uint16_t *)data = mnl_attr_get_u16(attr);
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

int nzctl_nl_talk(struct nzctl_nl *nl, struct nlmsghdr *req,
		  mnl_cb_t cb, void *data)
{
	unsigned int seq = req->nlmsg_seq;
	int ret;

	if (mnl_socket_sendto(nl->sock, req, req->nlmsg_len) < 0)
		return -errno;
	do {
		ret = mnl_socket_recvfrom(nl->sock, nl->buf, sizeof(nl->buf));
		if (ret < 0)
			return -errno;
		ret = mnl_cb_run(nl->buf, ret, seq, nl->portid, cb, data);
	} while (ret > 0);
	return ret < 0 ? -errno : 0;
}

int nzctl_nl_open(struct nzctl_nl *nl)
{
	struct nlmsghdr *nlh;
	int ret;

	memset(nl, 0, sizeof(*nl));
	nl->seq = (unsigned int)time(NULL);
	nl->sock = mnl_socket_open(NETLINK_GENERIC);
	if (!nl->sock)
		return -errno;
	if (mnl_socket_bind(nl->sock, 0, MNL_SOCKET_AUTOPID) < 0) {
		ret = -errno;
		goto out_close;
	}
	nl->portid = mnl_socket_get_portid(nl->sock);

	nlh = nzctl_nl_put(nl, GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 1, 0);
	mnl_attr_put_strz(nlh, CTRL_ATTR_FAMILY_NAME, NZ_GENL_NAME);
	ret = nzctl_nl_talk(nl, nlh, nzctl_family_cb, &nl->family);
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
