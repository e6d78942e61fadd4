/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * Nezha generic netlink family: configuration and status.
 *
 * Family name NZ_GENL_NAME, version NZ_GENL_VERSION.  Every command is a
 * request from user space; the kernel answers with a message of the same
 * command.  Commands that change state need CAP_NET_ADMIN.  Unknown
 * attributes are rejected (strict validation).
 *
 * NZ_CMD_GET_INFO (doit, no attributes in the request)
 *   reply: NZ_A_ABI_VERSION    u32     NZ_ABI_VERSION of the module
 *          NZ_A_RELEASE        string  module release
 *          NZ_A_FEATURES       u64     NZ_FEAT_* bits
 *          NZ_A_OPEN_FILES     u32     open files of /dev/nezha
 *          NZ_A_INFLIGHT       u32     commands queued, not completed
 *          NZ_A_STATS          nested  NZ_STAT_* u64 counters
 */
#ifndef _UAPI_LINUX_NEZHA_NETLINK_H
#define _UAPI_LINUX_NEZHA_NETLINK_H

#define NZ_GENL_NAME		"nezha"
#define NZ_GENL_VERSION		1

enum nz_genl_cmd {
	NZ_CMD_UNSPEC,
	NZ_CMD_GET_INFO,
	__NZ_CMD_GENL_MAX,
};
#define NZ_CMD_GENL_MAX (__NZ_CMD_GENL_MAX - 1)

enum nz_genl_attr {
	NZ_A_UNSPEC,
	NZ_A_PAD,
	NZ_A_ABI_VERSION,	/* u32 */
	NZ_A_RELEASE,		/* string */
	NZ_A_FEATURES,		/* u64 */
	NZ_A_OPEN_FILES,	/* u32 */
	NZ_A_INFLIGHT,		/* u32 */
	NZ_A_STATS,		/* nested: enum nz_genl_stat */
	__NZ_A_MAX,
};
#define NZ_A_MAX (__NZ_A_MAX - 1)

/* Attributes nested in NZ_A_STATS, each a u64 counter. */
enum nz_genl_stat {
	NZ_STAT_UNSPEC,
	NZ_STAT_PAD,
	NZ_STAT_OPENS,
	NZ_STAT_CMDS_SUBMITTED,
	NZ_STAT_CMDS_COMPLETED,
	NZ_STAT_CMDS_FAILED,
	NZ_STAT_CMDS_REJECTED,
	NZ_STAT_CMDS_CANCELLED,
	__NZ_STAT_MAX,
};
#define NZ_STAT_MAX (__NZ_STAT_MAX - 1)

#endif /* _UAPI_LINUX_NEZHA_NETLINK_H */
