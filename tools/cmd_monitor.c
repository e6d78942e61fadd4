// SPDX-License-Identifier: GPL-2.0
/*
 * nezhactl monitor [count N] [timeout SECONDS]
 *
 * Prints one line per path event the module multicasts: a (peer, rail)
 * connection lost (with why and how many chunks it rerouted) or (back) up.
 * Runs until interrupted, or until N events or SECONDS have passed.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <linux/genetlink.h>
#include <linux/nezha_netlink.h>
#include "nezhactl.h"

static int nzctl_event_cb(const struct nlmsghdr *nlh, void *data)
{
	const struct genlmsghdr *g = mnl_nlmsg_get_payload(nlh);
	uint32_t type = 0, rank = 0, peer = 0, err = 0, resent = 0;
	const char *rail = "?";
	struct nlattr *attr;
	uint64_t job = 0;
	struct timespec ts;

	if (g->cmd != NZ_CMD_EVENT)
		return MNL_CB_OK;
	mnl_attr_for_each(attr, nlh, sizeof(*g)) {
		switch (mnl_attr_get_type(attr)) {
		case NZ_A_EV_TYPE:
			type = mnl_attr_get_u32(attr);
			break;
		case NZ_A_RAIL_NAME:
			rail = mnl_attr_get_str(attr);
			break;
		case NZ_A_EV_JOB:
			job = mnl_attr_get_u64(attr);
			break;
		case NZ_A_EV_RANK:
			rank = mnl_attr_get_u32(attr);
			break;
		case NZ_A_EV_PEER:
			peer = mnl_attr_get_u32(attr);
			break;
		case NZ_A_EV_ERROR:
			err = mnl_attr_get_u32(attr);
			break;
		case NZ_A_EV_RESENT:
			resent = mnl_attr_get_u32(attr);
			break;
		}
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	printf("[%ld.%03ld] rail %s job %016" PRIx64 " rank %u peer %u: ",
	       (long)ts.tv_sec, ts.tv_nsec / 1000000, rail, job, rank, peer);
	if (type == NZ_EV_CONN_UP)
		printf("up\n");
	else if (err)
		printf("down (%s), %u chunks rerouted\n", strerror((int)err),
		       resent);
	else
		printf("closed\n");
	fflush(stdout);
	(*(unsigned int *)data)++;
	return MNL_CB_OK;
}

int nzctl_monitor(int argc, char **argv)
{
	unsigned int count = 0, max = 0;
	struct nzctl_nl nl;
	time_t end = 0;
	int i, ret, grp;

	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "count"))
			max = (unsigned int)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "timeout"))
			end = time(NULL) + atoi(argv[i + 1]);
		else
			break;
	}
	if (i != argc) {
		fprintf(stderr, "usage: nezhactl monitor [count N] [timeout SECONDS]\n");
		return -EINVAL;
	}
	ret = nzctl_nl_open(&nl);
	if (ret)
		return ret;
	grp = (int)nl.mcgrp_events;
	if (!grp || mnl_socket_setsockopt(nl.sock, NETLINK_ADD_MEMBERSHIP,
					  &grp, sizeof(grp)) < 0) {
		fprintf(stderr, "nezhactl: monitor: cannot join the events group\n");
		nzctl_nl_close(&nl);
		return -ENOENT;
	}
	printf("monitoring nezha path events\n");
	fflush(stdout);
	while (!max || count < max) {
		struct pollfd pfd = { .fd = mnl_socket_get_fd(nl.sock),
				      .events = POLLIN };
		int wait = end ? (int)(end - time(NULL)) * 1000 : -1;

		if (end && wait <= 0)
			break;
		if (poll(&pfd, 1, wait) <= 0)
			continue;
		ret = mnl_socket_recvfrom(nl.sock, nl.buf, sizeof(nl.buf));
		if (ret < 0)
			break;
		mnl_cb_run(nl.buf, ret, 0, 0, nzctl_event_cb, &count);
	}
	nzctl_nl_close(&nl);
	return 0;
}
