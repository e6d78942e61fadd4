/* SPDX-License-Identifier: GPL-2.0 */
/* nezhactl: shared declarations of the subcommands and the netlink helper. */
#ifndef NEZHACTL_H
#define NEZHACTL_H

#include <stdint.h>
#include <stdio.h>
#include <libmnl/libmnl.h>
#include "json.h"
#include "parse.h"

/*
 * What a command returns: 0, NZCTL_EUSAGE for a usage error (found before
 * anything was changed; exit status 255), or -errno of what failed in the
 * kernel or the system (exit status 1).
 */
#define NZCTL_EUSAGE		(-1000)
#define NZCTL_EXIT_FAIL		1
#define NZCTL_EXIT_USAGE	255

struct nzctl_cmd {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *help;
};

/* Global options and the places nezhactl reads (tests point them elsewhere). */
struct nzctl_global {
	int json, pretty;	/* -j, -p */
	int force;		/* -force: a batch goes on after an error */
	int wait;		/* -w: a batch waits for the devices of its rails */
	int pending_quiet;	/* rail add: say nothing of a missing device */
	const char *netns;	/* -n */
	const char *sysfs;	/* /sys/class/nezha (NEZHACTL_SYSFS) */
	const char *sysmodule;	/* /sys/module (NEZHACTL_SYSMODULE) */
	const char *devnode;	/* /dev/nezha (NEZHACTL_DEV) */
	const char *conf;	/* /etc/nezha/nezha.conf (NEZHACTL_CONF) */
	struct nzj j;		/* the JSON writer on stdout */
};
extern struct nzctl_global nzctl;

/* One generic netlink request/response exchange with the nezha family. */
struct nzctl_nl {
	struct mnl_socket *sock;
	uint16_t family;
	uint32_t mcgrp_events;		/* multicast group id, 0 unknown */
	uint32_t mcgrp_ctrl;		/* nlctrl's "notify" group, 0 unknown */
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

/* "nezhactl: ..." and the command's usage on stderr; NZCTL_EUSAGE. */
__attribute__((format(printf, 2, 3)))
int nzctl_usage_err(const char *usage, const char *fmt, ...);
/*
 * The id of keyword arg among kws; else prints "nezhactl: WHAT: unknown
 * (or ambiguous) "arg"; one of: ..." with the usage and returns
 * NZCTL_EUSAGE.
 */
int nzctl_kw(const char *arg, const struct nzctl_kw *kws, const char *what,
	     const char *usage);
/* Is arg a request for help (help, -h, --help)? */
int nzctl_is_help(const char *arg);

/* One value of a file, newline dropped; 0 or -errno. */
int nzctl_read_value(const char *path, char *buf, size_t len);

int nzctl_run(int argc, char **argv);
int nzctl_version(int argc, char **argv);
int nzctl_show(int argc, char **argv);
int nzctl_rail(int argc, char **argv);
int nzctl_health(int argc, char **argv);
int nzctl_monitor(int argc, char **argv);
int nzctl_key(int argc, char **argv);
int nzctl_param(int argc, char **argv);
int nzctl_device(int argc, char **argv);
int nzctl_stats(int argc, char **argv);
/* Batch mode: the commands of a file (- for stdin); only is NULL or the
 * one object to run ("device"). */
int nzctl_batch(const char *file, const char *only);

#endif /* NEZHACTL_H */
