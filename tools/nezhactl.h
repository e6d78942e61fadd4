/* SPDX-License-Identifier: GPL-2.0 */
/* nezhactl: shared declarations of the subcommands and the netlink helper. */
#ifndef NEZHACTL_H
#define NEZHACTL_H

#include <stdint.h>
#include <libmnl/libmnl.h>

struct nzctl_cmd {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *help;
};

/* One generic netlink request/response exchange with the nezha family. */
struct nzctl_nl {
	struct mnl_socket *sock;
	uint16_t family;
	uint32_t mcgrp_events;		/* multicast group id, 0 unknown */
	unsigned int seq;
	unsigned int portid;
	/* The extended ack of the last error (NETLINK_EXT_ACK), if any. */
	char ext_msg[256];
	int ext_range;			/* the policy's range is known */
	uint64_t ext_min, ext_max;
	uint32_t ext_missing;		/* missing attribute type, or 0 */
	char buf[65536];
};

int nzctl_nl_open(struct nzctl_nl *nl);
void nzctl_nl_close(struct nzctl_nl *nl);
struct nlmsghdr *nzctl_nl_request(struct nzctl_nl *nl, uint8_t cmd,
				  uint16_t flags);
/* 0 or -errno; on an error, nl->ext_* hold what the kernel explained. */
int nzctl_nl_talk(struct nzctl_nl *nl, struct nlmsghdr *req,
		  mnl_cb_t cb, void *data);
/* "nezhactl: WHAT: strerror(-err)[: kernel's message]" on stderr. */
void nzctl_nl_perror(const struct nzctl_nl *nl, int err, const char *what);

int nzctl_version(int argc, char **argv);
int nzctl_show(int argc, char **argv);
int nzctl_rail(int argc, char **argv);
int nzctl_health(int argc, char **argv);
int nzctl_monitor(int argc, char **argv);
int nzctl_key(int argc, char **argv);

#endif /* NEZHACTL_H */
