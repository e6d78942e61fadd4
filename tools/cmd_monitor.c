// SPDX-License-Identifier: GPL-2.0
/*
 * nezhactl [-j] monitor [count N] [timeout SECONDS]
 *
 * One line per event the module multicasts: a rail added, deleted or set,
 * the health parameters set, a (peer, rail) connection lost (with why and
 * how many chunks it rerouted) or (back) up, a peer lost.  With -j, one
 * JSON object per line.  Runs until interrupted, or until N events or
 * SECONDS have passed (exit 0).  It never stops silently: events lost
 * to a full socket buffer are reported and monitoring goes on; the module
 * going away or a socket error end it with a message and exit status 1.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <linux/genetlink.h>
#include <linux/nezha.h>
#include <linux/nezha_netlink.h>
#include "nezhactl.h"

#define NZCTL_MONITOR_USAGE "nezhactl [-j] monitor [count N] [timeout SECONDS]"

struct nzctl_event {
	uint32_t type, rank, peer, err, resent, weight, state, proto, port, addr;
	uint32_t interval, misses, grace;
	int have_weight, have_state;
	const char *rail, *dev;
	uint64_t job;
};

static const char *const nzctl_ev_names[] = {
	[NZ_EV_CONN_DOWN] = "conn-down", [NZ_EV_CONN_UP] = "conn-up",
	[NZ_EV_PEER_LOST] = "peer-lost", [NZ_EV_RAIL_ADD] = "rail-add",
	[NZ_EV_RAIL_DEL] = "rail-del", [NZ_EV_RAIL_SET] = "rail-set",
	[NZ_EV_HEALTH_SET] = "health-set",
};

static const char *const nzctl_ev_states[] = {
	[NZ_RAIL_UP] = "up", [NZ_RAIL_ADMIN_DOWN] = "admin-down",
	[NZ_RAIL_NO_LINK] = "no-link", [NZ_RAIL_FAILED] = "failed",
	[NZ_RAIL_UNREACHABLE] = "unreachable",
};

static const char *const nzctl_ev_protos[] = {
	[NZ_PROTO_TCP] = "tcp", [NZ_PROTO_RDMA] = "rdma", [NZ_PROTO_AGG] = "agg",
};

#define NZCTL_TBL(tbl, i) \
	((i) < sizeof(tbl) / sizeof(tbl[0]) && tbl[i] ? tbl[i] : "unknown")

static int nzctl_event_attr(const struct nlattr *attr, void *data)
{
	struct nzctl_event *e = data;
	int type = mnl_attr_get_type(attr);

	switch (type) {
	case NZ_A_RAIL_NAME:
	case NZ_A_RAIL_DEV:
		if (mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) < 0)
			break;
		if (type == NZ_A_RAIL_NAME)
			e->rail = mnl_attr_get_str(attr);
		else
			e->dev = mnl_attr_get_str(attr);
		break;
	case NZ_A_EV_JOB:
		if (mnl_attr_validate(attr, MNL_TYPE_U64) >= 0)
			e->job = mnl_attr_get_u64(attr);
		break;
	case NZ_A_RAIL_PORT:
		if (mnl_attr_validate(attr, MNL_TYPE_U16) >= 0)
			e->port = mnl_attr_get_u16(attr);
		break;
	default:
		if (mnl_attr_validate(attr, MNL_TYPE_U32) < 0)
			break;
		switch (type) {
		case NZ_A_EV_TYPE: e->type = mnl_attr_get_u32(attr); break;
		case NZ_A_EV_RANK: e->rank = mnl_attr_get_u32(attr); break;
		case NZ_A_EV_PEER: e->peer = mnl_attr_get_u32(attr); break;
		case NZ_A_EV_ERROR: e->err = mnl_attr_get_u32(attr); break;
		case NZ_A_EV_RESENT: e->resent = mnl_attr_get_u32(attr); break;
		case NZ_A_RAIL_PROTO: e->proto = mnl_attr_get_u32(attr); break;
		case NZ_A_RAIL_ADDR: e->addr = mnl_attr_get_u32(attr); break;
		case NZ_A_HB_INTERVAL_MS: e->interval = mnl_attr_get_u32(attr); break;
		case NZ_A_HB_MISSES: e->misses = mnl_attr_get_u32(attr); break;
		case NZ_A_GRACE_MS: e->grace = mnl_attr_get_u32(attr); break;
		case NZ_A_RAIL_WEIGHT:
			e->weight = mnl_attr_get_u32(attr);
			e->have_weight = 1;
			break;
		case NZ_A_RAIL_STATE:
			e->state = mnl_attr_get_u32(attr);
			e->have_state = 1;
			break;
		}
	}
	return MNL_CB_OK;
}

static void nzctl_event_json(const struct nzctl_event *e, const struct timespec *ts,
			     const char *addr)
{
	struct nzj *j = &nzctl.j;
	char job[24];

	nzj_obj_open(j, NULL);
	nzj_dbl(j, "time", (double)ts->tv_sec + ts->tv_nsec / 1e9);
	nzj_str(j, "event", NZCTL_TBL(nzctl_ev_names, e->type));
	if (e->type == NZ_EV_HEALTH_SET) {
		nzj_u64(j, "interval_ms", e->interval);
		nzj_u64(j, "misses", e->misses);
		nzj_u64(j, "grace_ms", e->grace);
	} else {
		nzj_str(j, "rail", e->rail ? e->rail : "?");
	}
	if (e->type >= NZ_EV_CONN_DOWN && e->type <= NZ_EV_PEER_LOST) {
		snprintf(job, sizeof(job), "%016" PRIx64, e->job);
		nzj_str(j, "job", job);
		nzj_u64(j, "rank", e->rank);
		nzj_u64(j, "peer", e->peer);
		if (e->err)
			nzj_str(j, "error", strerror((int)e->err));
		nzj_u64(j, "resent", e->resent);
	}
	if (e->type == NZ_EV_RAIL_ADD || e->type == NZ_EV_RAIL_SET) {
		nzj_str(j, "proto", NZCTL_TBL(nzctl_ev_protos, e->proto));
		nzj_str(j, "dev", e->dev ? e->dev : "");
		nzj_str(j, "addr", addr);
		nzj_u64(j, "port", e->port);
		nzj_u64(j, "weight", e->weight);
		nzj_str(j, "state", NZCTL_TBL(nzctl_ev_states, e->state));
	}
	nzj_obj_close(j);
	nzj_end(j);
}

static int nzctl_event_cb(const struct nlmsghdr *nlh, void *data)
{
	const struct genlmsghdr *g = mnl_nlmsg_get_payload(nlh);
	struct nzctl_event e = { 0 };
	char addr[INET_ADDRSTRLEN] = "?";
	struct timespec ts;

	if (g->cmd != NZ_CMD_EVENT)
		return MNL_CB_OK;
	mnl_attr_parse(nlh, sizeof(*g), nzctl_event_attr, &e);
	inet_ntop(AF_INET, &e.addr, addr, sizeof(addr));
	clock_gettime(CLOCK_REALTIME, &ts);
	(*(unsigned int *)data)++;
	if (nzctl.json) {
		nzctl_event_json(&e, &ts, addr);
		fflush(stdout);
		return MNL_CB_OK;
	}
	printf("[%ld.%03ld] ", (long)ts.tv_sec, ts.tv_nsec / 1000000);
	switch (e.type) {
	case NZ_EV_RAIL_ADD:
	case NZ_EV_RAIL_SET:
		printf("rail %s %s: %s dev %s %s:%u weight %u state %s\n",
		       e.rail ? e.rail : "?", e.type == NZ_EV_RAIL_ADD ? "added" : "set",
		       NZCTL_TBL(nzctl_ev_protos, e.proto), e.dev ? e.dev : "?",
		       addr, e.port, e.weight, NZCTL_TBL(nzctl_ev_states, e.state));
		break;
	case NZ_EV_RAIL_DEL:
		printf("rail %s deleted\n", e.rail ? e.rail : "?");
		break;
	case NZ_EV_HEALTH_SET:
		printf("health set: interval %u ms misses %u grace %u ms\n",
		       e.interval, e.misses, e.grace);
		break;
	default:
		printf("rail %s job %016" PRIx64 " rank %u peer %u: ",
		       e.rail ? e.rail : "?", e.job, e.rank, e.peer);
		if (e.type == NZ_EV_CONN_UP)
			printf("up\n");
		else if (e.type == NZ_EV_PEER_LOST)
			printf("peer lost (%s)\n", strerror((int)e.err));
		else if (e.err)
			printf("down (%s), %u chunks rerouted\n", strerror((int)e.err),
			       e.resent);
		else
			printf("closed\n");
	}
	fflush(stdout);
	return MNL_CB_OK;
}

/* nlctrl's notifications: the family going away is the module unloading. */
static int nzctl_ctrl_cb(const struct nlmsghdr *nlh, void *data)
{
	const struct genlmsghdr *g = mnl_nlmsg_get_payload(nlh);
	struct nlattr *attr;

	if (g->cmd != CTRL_CMD_DELFAMILY)
		return MNL_CB_OK;
	mnl_attr_for_each(attr, nlh, sizeof(*g)) {
		if (mnl_attr_get_type(attr) == CTRL_ATTR_FAMILY_NAME &&
		    mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) >= 0 &&
		    !strcmp(mnl_attr_get_str(attr), NZ_GENL_NAME)) {
			*(int *)data = 1;
			return MNL_CB_STOP;
		}
	}
	return MNL_CB_OK;
}

static int nzctl_monitor_recv(struct nzctl_nl *nl, unsigned int *count)
{
	const struct nlmsghdr *nlh;
	int len, gone = 0;

	len = (int)mnl_socket_recvfrom(nl->sock, nl->buf, sizeof(nl->buf));
	if (len < 0) {
		if (errno == ENOBUFS) {
			/* The kernel dropped events: say so, then go on. */
			fprintf(stderr, "nezhactl: monitor: events lost (socket buffer full)\n");
			if (nzctl.json) {
				nzj_obj_open(&nzctl.j, NULL);
				nzj_str(&nzctl.j, "event", "lost");
				nzj_obj_close(&nzctl.j);
				nzj_end(&nzctl.j);
				fflush(stdout);
			}
			return 0;
		}
		if (errno == EINTR || errno == EAGAIN)
			return 0;
		fprintf(stderr, "nezhactl: monitor: %s\n", strerror(errno));
		return -errno;
	}
	for (nlh = (const struct nlmsghdr *)nl->buf; mnl_nlmsg_ok(nlh, len);
	     nlh = mnl_nlmsg_next(nlh, &len)) {
		if (nlh->nlmsg_type == nl->family)
			nzctl_event_cb(nlh, count);
		else if (nlh->nlmsg_type == GENL_ID_CTRL)
			nzctl_ctrl_cb(nlh, &gone);
	}
	if (gone) {
		fprintf(stderr, "nezhactl: monitor: the nezha module was unloaded\n");
		return -ENOENT;
	}
	return 0;
}

int nzctl_monitor(int argc, char **argv)
{
	static const struct nzctl_kw kws[] = {
		{ "count", 0 }, { "timeout", 1 }, { NULL, 0 },
	};
	unsigned int count = 0, max = 0, secs = 0;
	struct nzctl_nl nl;
	struct timespec now, end = { 0, 0 };
	int i, ret, grp;

	if (argc > 1 && nzctl_is_help(argv[1])) {
		printf("usage: %s\n", NZCTL_MONITOR_USAGE);
		return 0;
	}
	for (i = 1; i < argc; i += 2) {
		int k = nzctl_kw(argv[i], kws, "monitor", NZCTL_MONITOR_USAGE);

		if (k < 0)
			return k;
		if (i + 1 >= argc || nzctl_parse_u32(argv[i + 1], UINT32_MAX / 1000,
						     k ? &secs : &max))
			return nzctl_usage_err(NZCTL_MONITOR_USAGE,
					       "monitor: %s needs a number", kws[k].name);
	}
	ret = nzctl_nl_open(&nl);
	if (ret)
		return ret;
	grp = (int)nl.mcgrp_events;
	if (!grp || mnl_socket_setsockopt(nl.sock, NETLINK_ADD_MEMBERSHIP,
					  &grp, sizeof(grp)) < 0) {
		fprintf(stderr, "nezhactl: monitor: cannot join the events group: %s\n",
			grp ? strerror(errno) : "the module has none");
		nzctl_nl_close(&nl);
		return -ENOENT;
	}
	/* Best effort: without it, an unloaded module is only silence. */
	grp = (int)nl.mcgrp_ctrl;
	if (grp)
		mnl_socket_setsockopt(nl.sock, NETLINK_ADD_MEMBERSHIP, &grp, sizeof(grp));
	if (!nzctl.json) {
		printf("monitoring nezha events\n");
		fflush(stdout);
	}
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += secs;
	ret = 0;
	while (!ret && (!max || count < max)) {
		struct pollfd pfd = { .fd = mnl_socket_get_fd(nl.sock),
				      .events = POLLIN };
		long wait = -1;

		if (secs) {
			clock_gettime(CLOCK_MONOTONIC, &now);
			wait = (end.tv_sec - now.tv_sec) * 1000 +
			       (end.tv_nsec - now.tv_nsec) / 1000000;
			if (wait <= 0)
				break;
		}
		ret = poll(&pfd, 1, (int)wait);
		if (ret < 0 && errno == EINTR) {
			ret = 0;
			continue;
		}
		if (ret < 0) {
			ret = -errno;
			fprintf(stderr, "nezhactl: monitor: poll: %s\n", strerror(-ret));
			break;
		}
		/* POLLERR too: the error (ENOBUFS, ...) comes with recvfrom. */
		ret = ret ? nzctl_monitor_recv(&nl, &count) : 0;
	}
	nzctl_nl_close(&nl);
	return ret;
}
