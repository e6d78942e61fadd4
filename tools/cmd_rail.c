// SPDX-License-Identifier: GPL-2.0
/*
 * nezhactl rail: add, delete, change and show rails.
 *
 *   nezhactl rail add NAME proto tcp dev NETDEV [addr A.B.C.D]
 *                     [port PORT] [weight W] [frame-mac on|off]
 *   nezhactl rail add NAME proto rdma {dev IBDEV | netdev NETDEV}
 *                     [ib-port N] [gid-index G] [addr A.B.C.D]
 *                     [port PORT] [weight W]
 *   nezhactl rail add NAME proto agg dev NETDEV aggregator A.B.C.D[:PORT]
 *                     [addr A.B.C.D]
 *   nezhactl rail del NAME
 *   nezhactl rail set NAME [weight W] [up|down]
 *   nezhactl rail [show|list] [NAME]
 *   nezhactl rail flush
 *
 * Every keyword may be a unique prefix ("r a r0 pr t d eth0").
 * Arguments are checked here first, so that a usage error never reaches
 * the kernel; the kernel checks everything again (names, devices,
 * addresses, ranges) and explains its refusals in the extended ack.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <spawn.h>
#include <sys/wait.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/genetlink.h>
#include <linux/nezha.h>
#include <linux/nezha_netlink.h>
#include "nezhactl.h"

#define NZCTL_RAIL_ADD_USAGE \
	"nezhactl rail add NAME proto tcp dev NETDEV [addr A.B.C.D] [port PORT] [weight W]\n" \
	"                         [frame-mac on|off]\n" \
	"       nezhactl rail add NAME proto rdma {dev IBDEV | netdev NETDEV} [ib-port N]\n" \
	"                         [gid-index G] [addr A.B.C.D] [port PORT] [weight W]\n" \
	"       nezhactl rail add NAME proto agg dev NETDEV aggregator A.B.C.D[:PORT]\n" \
	"                         [addr A.B.C.D]"
#define NZCTL_RAIL_DEL_USAGE	"nezhactl rail del NAME"
#define NZCTL_RAIL_SET_USAGE	"nezhactl rail set NAME [weight W] [up|down]"
#define NZCTL_RAIL_SHOW_USAGE	"nezhactl [-j] [-p] rail [show|list] [NAME]"
#define NZCTL_RAIL_FLUSH_USAGE	"nezhactl rail flush"

static int nzctl_rail_usage(const char *usage)
{
	fprintf(stderr, "usage: %s\n", usage);
	return NZCTL_EUSAGE;
}

#define nzctl_rail_bad nzctl_usage_err

static void nzctl_rail_help(FILE *f)
{
	fprintf(f, "usage: %s\n       %s\n       %s\n       %s\n       %s\n",
		NZCTL_RAIL_ADD_USAGE, NZCTL_RAIL_DEL_USAGE,
		NZCTL_RAIL_SET_USAGE, NZCTL_RAIL_SHOW_USAGE,
		NZCTL_RAIL_FLUSH_USAGE);
}

static const char *const nzctl_proto_names[] = {
	[NZ_PROTO_TCP] = "tcp",
	[NZ_PROTO_RDMA] = "rdma",
	[NZ_PROTO_AGG] = "agg",
};

static const char *const nzctl_state_names[] = {
	[NZ_RAIL_UP] = "up",
	[NZ_RAIL_ADMIN_DOWN] = "admin-down",
	[NZ_RAIL_NO_LINK] = "no-link",
	[NZ_RAIL_FAILED] = "failed",
	[NZ_RAIL_UNREACHABLE] = "unreachable",
};

#define NZCTL_NAME(tbl, i) \
	((i) < sizeof(tbl) / sizeof(tbl[0]) && tbl[i] ? tbl[i] : "unknown")

/* Open the family, send req, report a failure as "nezhactl: WHAT: ...". */
static int nzctl_rail_request(struct nzctl_nl *nl, struct nlmsghdr *req,
			      const char *what, mnl_cb_t cb, void *data)
{
	int ret = nzctl_nl_talk(nl, req, cb, data);

	/* A batch with -w waits for a missing device: that is no error yet. */
	if (ret && !(nzctl.pending_quiet &&
		     (ret == -ENODEV || ret == -EADDRNOTAVAIL)))
		nzctl_nl_perror(nl, ret, what);
	return ret;
}

/* --- add ------------------------------------------------------------------ */

#define ADD_BAD(...) nzctl_rail_bad(NZCTL_RAIL_ADD_USAGE, __VA_ARGS__)

struct nzctl_rail_add_args {
	const char *name, *dev, *netdev;
	uint32_t proto, port, weight, ib_port, gid_index;
	int have_port, have_weight, have_addr, have_ib_port, have_gid_index;
	int frame_mac;			/* -1: not given */
	struct in_addr addr;
	int have_agg;
	struct in_addr agg_addr;
	uint32_t agg_port;		/* 0: the kernel's default */
};

enum { ADD_PROTO, ADD_DEV, ADD_NETDEV, ADD_IBPORT, ADD_GID, ADD_ADDR,
       ADD_PORT, ADD_WEIGHT, ADD_FRAME_MAC, ADD_AGG };

static const struct nzctl_kw nzctl_rail_add_kws[] = {
	{ "proto", ADD_PROTO }, { "dev", ADD_DEV }, { "netdev", ADD_NETDEV },
	{ "ib-port", ADD_IBPORT }, { "gid-index", ADD_GID }, { "addr", ADD_ADDR },
	{ "port", ADD_PORT }, { "weight", ADD_WEIGHT },
	{ "frame-mac", ADD_FRAME_MAC }, { "aggregator", ADD_AGG }, { NULL, 0 },
};

static const struct nzctl_kw nzctl_onoff_kws[] = {
	{ "off", 0 }, { "on", 1 }, { NULL, 0 },
};

static const struct nzctl_kw nzctl_proto_kws[] = {
	{ "tcp", NZ_PROTO_TCP }, { "rdma", NZ_PROTO_RDMA }, { "agg", NZ_PROTO_AGG },
	{ NULL, 0 },
};

/* "A.B.C.D" or "A.B.C.D:PORT" (1..65535): 0 or -1. */
static int nzctl_parse_agg(const char *val, struct nzctl_rail_add_args *a)
{
	const char *colon = strchr(val, ':');
	char host[INET_ADDRSTRLEN];
	size_t len = colon ? (size_t)(colon - val) : strlen(val);

	if (!len || len >= sizeof(host))
		return -1;
	memcpy(host, val, len);
	host[len] = 0;
	if (inet_pton(AF_INET, host, &a->agg_addr) != 1)
		return -1;
	if (colon && (nzctl_parse_u32(colon + 1, 65535, &a->agg_port) ||
		      !a->agg_port))
		return -1;
	return 0;
}

/* One "KEYWORD VALUE" pair of rail add. */
static int nzctl_rail_add_arg(struct nzctl_rail_add_args *a, int kw,
			      const char *kwname, const char *val)
{
	int p;

	switch (kw) {
	case ADD_PROTO:
		if (a->proto)
			goto twice;
		p = nzctl_kw(val, nzctl_proto_kws, "rail add: protocol",
			     NZCTL_RAIL_ADD_USAGE);
		if (p < 0)
			return p;
		a->proto = (uint32_t)p;
		break;
	case ADD_DEV:
		if (a->dev)
			goto twice;
		a->dev = val;
		break;
	case ADD_NETDEV:
		if (a->netdev)
			goto twice;
		a->netdev = val;
		break;
	case ADD_IBPORT:
		if (a->have_ib_port++)
			goto twice;
		if (nzctl_parse_u32(val, NZ_MAX_IBPORT, &a->ib_port) || !a->ib_port)
			return ADD_BAD("rail add: bad ib-port \"%s\" (1..%d)", val,
				       NZ_MAX_IBPORT);
		break;
	case ADD_GID:
		if (a->have_gid_index++)
			goto twice;
		if (nzctl_parse_u32(val, NZ_MAX_GID_INDEX, &a->gid_index))
			return ADD_BAD("rail add: bad gid-index \"%s\" (0..%d)", val,
				       NZ_MAX_GID_INDEX);
		break;
	case ADD_ADDR:
		if (a->have_addr++)
			goto twice;
		if (inet_pton(AF_INET, val, &a->addr) != 1)
			return ADD_BAD("rail add: bad IPv4 address \"%s\"", val);
		break;
	case ADD_PORT:
		if (a->have_port++)
			goto twice;
		if (nzctl_parse_u32(val, 65535, &a->port) || !a->port)
			return ADD_BAD("rail add: bad port \"%s\" (1..65535)", val);
		break;
	case ADD_WEIGHT:
		if (a->have_weight++)
			goto twice;
		/* The range is the kernel's: it says so if it objects. */
		if (nzctl_parse_u32(val, UINT32_MAX, &a->weight))
			return ADD_BAD("rail add: bad weight \"%s\"", val);
		break;
	case ADD_FRAME_MAC:
		if (a->frame_mac >= 0)
			goto twice;
		p = nzctl_kw(val, nzctl_onoff_kws, "rail add: frame-mac",
			     NZCTL_RAIL_ADD_USAGE);
		if (p < 0)
			return p;
		a->frame_mac = p;
		break;
	case ADD_AGG:
		if (a->have_agg++)
			goto twice;
		if (nzctl_parse_agg(val, a))
			return ADD_BAD("rail add: bad aggregator \"%s\" (A.B.C.D or A.B.C.D:PORT)",
				       val);
		break;
	}
	return 0;

twice:
	return ADD_BAD("rail add: \"%s\" given twice", kwname);
}

/* RDMA rails need nezha_rdma: load it, as the kernel would load a protocol. */
static int nzctl_modprobe(const char *mod)
{
	char *argv[] = { (char *)"modprobe", (char *)"-q", (char *)mod, NULL };
	extern char **environ;
	int status;
	pid_t pid;

	if (posix_spawnp(&pid, "modprobe", NULL, NULL, argv, environ))
		return -ENOENT;
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) ||
	    WEXITSTATUS(status))
		return -ENOENT;
	return 0;
}

static void nzctl_rail_add_msg(struct nzctl_nl *nl, struct nlmsghdr *nlh,
			       const struct nzctl_rail_add_args *a)
{
	mnl_attr_put_strz(nlh, NZ_A_RAIL_NAME, a->name);
	mnl_attr_put_u32(nlh, NZ_A_RAIL_PROTO, a->proto);
	if (a->dev)
		mnl_attr_put_strz(nlh, NZ_A_RAIL_DEV, a->dev);
	if (a->netdev)
		mnl_attr_put_strz(nlh, NZ_A_RAIL_NETDEV, a->netdev);
	if (a->have_ib_port)
		mnl_attr_put_u32(nlh, NZ_A_RAIL_IBPORT, a->ib_port);
	if (a->have_gid_index)
		mnl_attr_put_u32(nlh, NZ_A_RAIL_GID_INDEX, a->gid_index);
	if (a->have_addr)
		mnl_attr_put_u32(nlh, NZ_A_RAIL_ADDR, a->addr.s_addr);
	if (a->have_port)
		mnl_attr_put_u16(nlh, NZ_A_RAIL_PORT, (uint16_t)a->port);
	if (a->have_weight)
		mnl_attr_put_u32(nlh, NZ_A_RAIL_WEIGHT, a->weight);
	if (a->frame_mac > 0)
		mnl_attr_put_u8(nlh, NZ_A_RAIL_FRAME_MAC, 1);
	if (a->have_agg)
		mnl_attr_put_u32(nlh, NZ_A_RAIL_AGG_ADDR, a->agg_addr.s_addr);
	if (a->agg_port)
		mnl_attr_put_u16(nlh, NZ_A_RAIL_AGG_PORT, (uint16_t)a->agg_port);
	(void)nl;
}

static int nzctl_rail_add(int argc, char **argv)
{
	struct nzctl_rail_add_args a = { .frame_mac = -1 };
	struct nzctl_nl nl;
	struct nlmsghdr *nlh;
	char what[64];
	int i, ret;

	if (argc < 2)
		return ADD_BAD("rail add: no name");
	a.name = argv[1];
	for (i = 2; i < argc; i += 2) {
		int kw = nzctl_kw(argv[i], nzctl_rail_add_kws, "rail add",
				  NZCTL_RAIL_ADD_USAGE);

		if (kw < 0)
			return kw;
		if (i + 1 >= argc)
			return ADD_BAD("rail add: \"%s\" needs a value", argv[i]);
		ret = nzctl_rail_add_arg(&a, kw, nzctl_rail_add_kws[kw].name,
					 argv[i + 1]);
		if (ret)
			return ret;
	}
	if (!a.proto)
		return ADD_BAD("rail add %s: no protocol", a.name);
	if (a.proto == NZ_PROTO_TCP && (a.netdev || a.have_ib_port || a.have_gid_index))
		return ADD_BAD("rail add %s: netdev, ib-port and gid-index are for rdma rails",
			       a.name);
	if (a.proto == NZ_PROTO_AGG && !a.have_agg)
		return ADD_BAD("rail add %s: an agg rail needs its aggregator", a.name);
	if (a.proto != NZ_PROTO_AGG && a.have_agg)
		return ADD_BAD("rail add %s: aggregator is for agg rails", a.name);
	if (a.proto == NZ_PROTO_AGG && (a.netdev || a.have_ib_port || a.have_gid_index ||
					a.have_port || a.frame_mac > 0))
		return ADD_BAD("rail add %s: an agg rail takes dev, aggregator, addr and weight only",
			       a.name);
	if (!a.dev && !a.netdev)
		return ADD_BAD("rail add %s: no device", a.name);

	ret = nzctl_nl_open(&nl);
	if (ret)
		return ret;
	nlh = nzctl_nl_request(&nl, NZ_CMD_RAIL_ADD, 0);
	nzctl_rail_add_msg(&nl, nlh, &a);
	snprintf(what, sizeof(what), "rail add %s", a.name);
	ret = nzctl_nl_talk(&nl, nlh, NULL, NULL);
	if (ret == -EPROTONOSUPPORT && a.proto == NZ_PROTO_RDMA &&
	    !nzctl_modprobe("nezha_rdma")) {
		nlh = nzctl_nl_request(&nl, NZ_CMD_RAIL_ADD, 0);
		nzctl_rail_add_msg(&nl, nlh, &a);
		ret = nzctl_nl_talk(&nl, nlh, NULL, NULL);
	}
	if (ret && !(nzctl.pending_quiet &&
		     (ret == -ENODEV || ret == -EADDRNOTAVAIL)))
		nzctl_nl_perror(&nl, ret, what);
	nzctl_nl_close(&nl);
	return ret;
}

/* --- del ------------------------------------------------------------------ */

static int nzctl_rail_del(int argc, char **argv)
{
	struct nzctl_nl nl;
	struct nlmsghdr *nlh;
	char what[64];
	int ret;

	if (argc != 2)
		return nzctl_rail_usage(NZCTL_RAIL_DEL_USAGE);
	ret = nzctl_nl_open(&nl);
	if (ret)
		return ret;
	nlh = nzctl_nl_request(&nl, NZ_CMD_RAIL_DEL, 0);
	mnl_attr_put_strz(nlh, NZ_A_RAIL_NAME, argv[1]);
	snprintf(what, sizeof(what), "rail del %s", argv[1]);
	ret = nzctl_rail_request(&nl, nlh, what, NULL, NULL);
	nzctl_nl_close(&nl);
	return ret;
}

/* --- set ------------------------------------------------------------------ */

#define SET_BAD(...) nzctl_rail_bad(NZCTL_RAIL_SET_USAGE, __VA_ARGS__)

static int nzctl_rail_set(int argc, char **argv)
{
	int have_weight = 0, admin = -1, i, ret;
	struct nzctl_nl nl;
	struct nlmsghdr *nlh;
	uint32_t weight = 0;
	char what[64];

	if (argc < 2)
		return SET_BAD("rail set: no name");
	if (argc < 3)
		return SET_BAD("rail set %s: nothing to set", argv[1]);
	for (i = 2; i < argc; i++) {
		static const struct nzctl_kw kws[] = {
			{ "weight", 0 }, { "up", 1 }, { "down", 2 }, { NULL, 0 },
		};
		int kw = nzctl_kw(argv[i], kws, "rail set", NZCTL_RAIL_SET_USAGE);

		if (kw < 0)
			return kw;
		if (kw > 0) {
			if (admin >= 0)
				return SET_BAD("rail set: up or down given twice");
			admin = kw == 1;
		} else {
			if (have_weight++)
				return SET_BAD("rail set: \"weight\" given twice");
			if (++i >= argc)
				return SET_BAD("rail set: \"weight\" needs a value");
			if (nzctl_parse_u32(argv[i], UINT32_MAX, &weight))
				return SET_BAD("rail set: bad weight \"%s\"", argv[i]);
		}
	}

	ret = nzctl_nl_open(&nl);
	if (ret)
		return ret;
	nlh = nzctl_nl_request(&nl, NZ_CMD_RAIL_SET, 0);
	mnl_attr_put_strz(nlh, NZ_A_RAIL_NAME, argv[1]);
	if (have_weight)
		mnl_attr_put_u32(nlh, NZ_A_RAIL_WEIGHT, weight);
	if (admin >= 0)
		mnl_attr_put_u8(nlh, NZ_A_RAIL_ADMIN, (uint8_t)admin);
	snprintf(what, sizeof(what), "rail set %s", argv[1]);
	ret = nzctl_rail_request(&nl, nlh, what, NULL, NULL);
	nzctl_nl_close(&nl);
	return ret;
}

/* --- show ----------------------------------------------------------------- */

struct nzctl_rail {
	char name[NZ_RAIL_NAME_LEN];
	char dev[64];
	char netdev[64];
	uint32_t id, proto, weight, state, ib_port, speed;
	int frame_mac;
	int64_t gid_index;		/* -1: not configured */
	uint32_t addr;			/* network order */
	uint16_t port;
	uint32_t agg_addr, agg_rtt_us;	/* agg rails */
	uint16_t agg_port;
	uint64_t stats[NZ_RSTAT_MAX + 1];
};

static int nzctl_rail_stats_cb(const struct nlattr *attr, void *data)
{
	struct nzctl_rail *r = data;
	int type = mnl_attr_get_type(attr);

	if (type > NZ_RSTAT_PAD && type <= NZ_RSTAT_MAX &&
	    mnl_attr_validate(attr, MNL_TYPE_U64) >= 0)
		r->stats[type] = mnl_attr_get_u64(attr);
	return MNL_CB_OK;
}

static int nzctl_rail_attr_cb(const struct nlattr *attr, void *data)
{
	struct nzctl_rail *r = data;
	int type = mnl_attr_get_type(attr);

	switch (type) {
	case NZ_A_RAIL_NAME:
	case NZ_A_RAIL_DEV:
	case NZ_A_RAIL_NETDEV:
		if (mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) < 0)
			break;
		if (type == NZ_A_RAIL_NAME)
			snprintf(r->name, sizeof(r->name), "%s",
				 mnl_attr_get_str(attr));
		else if (type == NZ_A_RAIL_DEV)
			snprintf(r->dev, sizeof(r->dev), "%s",
				 mnl_attr_get_str(attr));
		else
			snprintf(r->netdev, sizeof(r->netdev), "%s",
				 mnl_attr_get_str(attr));
		break;
	case NZ_A_RAIL_IBPORT:
	case NZ_A_RAIL_GID_INDEX:
		if (mnl_attr_validate(attr, MNL_TYPE_U32) < 0)
			break;
		if (type == NZ_A_RAIL_IBPORT)
			r->ib_port = mnl_attr_get_u32(attr);
		else
			r->gid_index = mnl_attr_get_u32(attr);
		break;
	case NZ_A_RAIL_ID:
	case NZ_A_RAIL_PROTO:
	case NZ_A_RAIL_WEIGHT:
	case NZ_A_RAIL_STATE:
	case NZ_A_RAIL_ADDR:
	case NZ_A_RAIL_SPEED:
	case NZ_A_RAIL_AGG_ADDR:
	case NZ_A_RAIL_AGG_RTT_US:
		if (mnl_attr_validate(attr, MNL_TYPE_U32) < 0)
			break;
		if (type == NZ_A_RAIL_ID)
			r->id = mnl_attr_get_u32(attr);
		else if (type == NZ_A_RAIL_PROTO)
			r->proto = mnl_attr_get_u32(attr);
		else if (type == NZ_A_RAIL_WEIGHT)
			r->weight = mnl_attr_get_u32(attr);
		else if (type == NZ_A_RAIL_STATE)
			r->state = mnl_attr_get_u32(attr);
		else if (type == NZ_A_RAIL_SPEED)
			r->speed = mnl_attr_get_u32(attr);
		else if (type == NZ_A_RAIL_AGG_ADDR)
			r->agg_addr = mnl_attr_get_u32(attr);
		else if (type == NZ_A_RAIL_AGG_RTT_US)
			r->agg_rtt_us = mnl_attr_get_u32(attr);
		else
			r->addr = mnl_attr_get_u32(attr);
		break;
	case NZ_A_RAIL_PORT:
		if (mnl_attr_validate(attr, MNL_TYPE_U16) >= 0)
			r->port = mnl_attr_get_u16(attr);
		break;
	case NZ_A_RAIL_AGG_PORT:
		if (mnl_attr_validate(attr, MNL_TYPE_U16) >= 0)
			r->agg_port = mnl_attr_get_u16(attr);
		break;
	case NZ_A_RAIL_FRAME_MAC:
		if (mnl_attr_validate(attr, MNL_TYPE_U8) >= 0)
			r->frame_mac = mnl_attr_get_u8(attr);
		break;
	case NZ_A_RAIL_STATS:
		if (mnl_attr_validate(attr, MNL_TYPE_NESTED) >= 0)
			mnl_attr_parse_nested(attr, nzctl_rail_stats_cb, r);
		break;
	}
	return MNL_CB_OK;
}

/* One value of a sysfs file of dir, or "-". */
static void nzctl_sysfs_read(const char *dir, const char *file, char *buf,
			     size_t len)
{
	char path[768];

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	if (nzctl_read_value(path, buf, len) || !buf[0])
		snprintf(buf, len, "-");
}

static const char *const nzctl_peer_files[] = {
	"sched_state", "est_bw", "srtt_us", "min_rtt_us", "start_us",
	"window_bytes", "inflight_bytes", "state",
};
#define NZCTL_PEER_FILES (sizeof(nzctl_peer_files) / sizeof(nzctl_peer_files[0]))

/* A number from sysfs into JSON; a value that is not one stays a string. */
static void nzctl_json_value(const char *key, const char *v)
{
	char *end;
	unsigned long long n;

	errno = 0;
	n = strtoull(v, &end, 10);
	if (*v >= '0' && *v <= '9' && !*end && !errno)
		nzj_u64(&nzctl.j, key, n);
	else if (!strcmp(v, "-"))
		nzj_null(&nzctl.j, key);
	else
		nzj_str(&nzctl.j, key, v);
}

/*
 * The scheduler's view of each (peer, rail) connection, from sysfs:
 *     peer 1 job 00c0ffee00000001 (rank 0): hot bw 4.98 MB/s rtt 2.3 ms
 *       (min 2.1) start 2.4 ms window 262144 inflight 131072
 */
static void nzctl_rail_show_peers(const char *rail)
{
	char dir[512], v[NZCTL_PEER_FILES][64], hex[24];
	unsigned int job_rank, peer;
	unsigned long long serial;
	struct dirent *de;
	size_t i;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/rail-%s", nzctl.sysfs, rail);
	if (nzctl.json)
		nzj_arr_open(&nzctl.j, "peers");
	d = opendir(dir);
	while (d && (de = readdir(d))) {
		if (sscanf(de->d_name, "peer-%llx-%u-%u", &serial, &job_rank,
			   &peer) != 3)
			continue;
		snprintf(dir, sizeof(dir), "%s/rail-%s/%s", nzctl.sysfs, rail,
			 de->d_name);
		for (i = 0; i < NZCTL_PEER_FILES; i++)
			nzctl_sysfs_read(dir, nzctl_peer_files[i], v[i], sizeof(v[i]));
		if (nzctl.json) {
			snprintf(hex, sizeof(hex), "%016llx", serial);
			nzj_obj_open(&nzctl.j, NULL);
			nzj_str(&nzctl.j, "comm", hex);
			nzj_u64(&nzctl.j, "rank", job_rank);
			nzj_u64(&nzctl.j, "peer", peer);
			for (i = 0; i < NZCTL_PEER_FILES; i++)
				nzctl_json_value(nzctl_peer_files[i], v[i]);
			nzj_obj_close(&nzctl.j);
			continue;
		}
		printf("    peer %u comm %016llx (rank %u): %s bw %.2f MB/s rtt %.1f ms"
		       " (min %.1f) start %.1f ms window %s inflight %s\n",
		       peer, serial, job_rank, v[0], strtod(v[1], NULL) / 1e6,
		       strtod(v[2], NULL) / 1e3, strtod(v[3], NULL) / 1e3,
		       strtod(v[4], NULL) / 1e3, v[5], v[6]);
	}
	if (d)
		closedir(d);
	if (nzctl.json)
		nzj_arr_close(&nzctl.j);
}

static const char *const nzctl_rstat_names[NZ_RSTAT_MAX + 1] = {
	[NZ_RSTAT_BYTES_TX] = "bytes_tx",
	[NZ_RSTAT_BYTES_RX] = "bytes_rx",
	[NZ_RSTAT_CHUNKS_TX] = "chunks_tx",
	[NZ_RSTAT_CHUNKS_RX] = "chunks_rx",
	[NZ_RSTAT_ERRORS] = "errors",
	[NZ_RSTAT_HS_REFUSED] = "handshakes_refused",
	[NZ_RSTAT_CONNS] = "conns",
	[NZ_RSTAT_FAILOVERS] = "failovers",
	[NZ_RSTAT_RESENT] = "chunks_resent",
	[NZ_RSTAT_MAC_FAILURES] = "mac_failures",
	[NZ_RSTAT_AGG_PROBES] = "agg_probes",
	[NZ_RSTAT_AGG_ANSWERS] = "agg_answers",
	[NZ_RSTAT_AGG_DROPPED] = "agg_dropped",
	[NZ_RSTAT_AGG_LOST] = "agg_lost",
};

static void nzctl_rail_json(const struct nzctl_rail *r, const char *addr)
{
	struct nzj *j = &nzctl.j;
	int i;

	nzj_obj_open(j, NULL);
	nzj_u64(j, "id", r->id);
	nzj_str(j, "name", r->name);
	nzj_str(j, "proto", NZCTL_NAME(nzctl_proto_names, r->proto));
	nzj_str(j, "dev", r->dev);
	nzj_str(j, "netdev", r->netdev);
	nzj_str(j, "addr", addr);
	nzj_u64(j, "port", r->port);
	nzj_u64(j, "weight", r->weight);
	nzj_str(j, "state", NZCTL_NAME(nzctl_state_names, r->state));
	nzj_u64(j, "speed_mbps", r->speed);
	nzj_bool(j, "frame_mac", r->frame_mac);
	if (r->ib_port)
		nzj_u64(j, "ib_port", r->ib_port);
	if (r->gid_index >= 0)
		nzj_u64(j, "gid_index", (uint64_t)r->gid_index);
	if (r->proto == NZ_PROTO_AGG) {
		char node[INET_ADDRSTRLEN];

		if (!inet_ntop(AF_INET, &r->agg_addr, node, sizeof(node)))
			snprintf(node, sizeof(node), "?");
		nzj_str(j, "aggregator", node);
		nzj_u64(j, "aggregator_port", r->agg_port);
		nzj_u64(j, "aggregator_rtt_us", r->agg_rtt_us);
	}
	nzj_obj_open(j, "stats");
	for (i = NZ_RSTAT_PAD + 1; i <= NZ_RSTAT_MAX; i++)
		if (nzctl_rstat_names[i])
			nzj_u64(j, nzctl_rstat_names[i], r->stats[i]);
	nzj_obj_close(j);
	nzctl_rail_show_peers(r->name);
	nzj_obj_close(j);
}

/*
 * 0: r0 tcp dev eth0 10.77.0.1:7470 weight 100 state up conns 1
 *     tx 123 bytes 4 chunks  rx 0 bytes 0 chunks  errors 0 refused 0
 * RDMA rails name their device's port and netdev (and a GID, if given):
 * 1: r1 rdma dev rxe0 ib-port 1 netdev eth1 10.77.1.1:7470 weight 100 ...
 * A link that reports its speed adds it: "... conns 1 speed 40 Mbit/s";
 * a rail with the per-frame MAC says "frame-mac" there, and counts the
 * frames that failed it on the second line ("mac-failures 0").
 * An agg rail names its node, and its probes on the second line:
 * 2: ra agg dev eth2 10.77.1.1:41234 weight 100 state up aggregator
 *     10.77.1.5:29600 rtt 0.4 ms
 *     probes 120 answers 120 dropped 0 lost 0
 */
static void nzctl_rail_show_agg(const struct nzctl_rail *r, const char *addr)
{
	char node[INET_ADDRSTRLEN];

	if (!inet_ntop(AF_INET, &r->agg_addr, node, sizeof(node)))
		snprintf(node, sizeof(node), "?");
	printf("%" PRIu32 ": %s agg dev %s %s:%u weight %" PRIu32
	       " state %s aggregator %s:%u rtt %.1f ms\n",
	       r->id, r->name, r->dev, addr, r->port, r->weight,
	       NZCTL_NAME(nzctl_state_names, r->state), node, r->agg_port,
	       r->agg_rtt_us / 1e3);
	printf("    probes %" PRIu64 " answers %" PRIu64 " dropped %" PRIu64
	       " lost %" PRIu64 "\n",
	       r->stats[NZ_RSTAT_AGG_PROBES], r->stats[NZ_RSTAT_AGG_ANSWERS],
	       r->stats[NZ_RSTAT_AGG_DROPPED], r->stats[NZ_RSTAT_AGG_LOST]);
}

/* One rail of a RAIL_GET answer, as text or JSON. */
static int nzctl_rail_show_cb(const struct nlmsghdr *nlh, void *data)
{
	char addr[INET_ADDRSTRLEN], rdma[160] = "", speed[32] = "", macf[40] = "";
	struct nzctl_rail r;

	(void)data;
	memset(&r, 0, sizeof(r));
	r.gid_index = -1;
	mnl_attr_parse(nlh, sizeof(struct genlmsghdr), nzctl_rail_attr_cb, &r);
	if (!inet_ntop(AF_INET, &r.addr, addr, sizeof(addr)))
		snprintf(addr, sizeof(addr), "?");
	if (nzctl.json) {
		nzctl_rail_json(&r, addr);
		return MNL_CB_OK;
	}
	if (r.proto == NZ_PROTO_AGG) {
		nzctl_rail_show_agg(&r, addr);
		return MNL_CB_OK;
	}
	if (r.ib_port && r.gid_index >= 0)
		snprintf(rdma, sizeof(rdma), " ib-port %" PRIu32 " gid-index %" PRId64
			 " netdev %s", r.ib_port, r.gid_index, r.netdev);
	else if (r.ib_port)
		snprintf(rdma, sizeof(rdma), " ib-port %" PRIu32 " netdev %s",
			 r.ib_port, r.netdev);
	if (r.speed)
		snprintf(speed, sizeof(speed), " speed %" PRIu32 " Mbit/s", r.speed);
	if (r.frame_mac)
		snprintf(macf, sizeof(macf), " mac-failures %" PRIu64,
			 r.stats[NZ_RSTAT_MAC_FAILURES]);
	printf("%" PRIu32 ": %s %s dev %s%s %s:%u weight %" PRIu32
	       " state %s conns %" PRIu64 "%s%s\n",
	       r.id, r.name, NZCTL_NAME(nzctl_proto_names, r.proto), r.dev,
	       rdma, addr, r.port, r.weight,
	       NZCTL_NAME(nzctl_state_names, r.state), r.stats[NZ_RSTAT_CONNS],
	       speed, r.frame_mac ? " frame-mac" : "");
	printf("    tx %" PRIu64 " bytes %" PRIu64 " chunks  rx %" PRIu64
	       " bytes %" PRIu64 " chunks  errors %" PRIu64 " refused %" PRIu64
	       "%s\n",
	       r.stats[NZ_RSTAT_BYTES_TX], r.stats[NZ_RSTAT_CHUNKS_TX],
	       r.stats[NZ_RSTAT_BYTES_RX], r.stats[NZ_RSTAT_CHUNKS_RX],
	       r.stats[NZ_RSTAT_ERRORS], r.stats[NZ_RSTAT_HS_REFUSED], macf);
	nzctl_rail_show_peers(r.name);
	return MNL_CB_OK;
}

static int nzctl_rail_show(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : NULL;
	struct nzctl_nl nl;
	struct nlmsghdr *nlh;
	char what[64];
	int ret;

	if (argc > 2)
		return nzctl_rail_usage(NZCTL_RAIL_SHOW_USAGE);
	ret = nzctl_nl_open(&nl);
	if (ret)
		return ret;
	if (name) {
		nlh = nzctl_nl_request(&nl, NZ_CMD_RAIL_GET, 0);
		mnl_attr_put_strz(nlh, NZ_A_RAIL_NAME, name);
		snprintf(what, sizeof(what), "rail show %s", name);
	} else {
		nlh = nzctl_nl_request(&nl, NZ_CMD_RAIL_GET, NLM_F_DUMP);
		snprintf(what, sizeof(what), "rail show");
	}
	if (nzctl.json)
		nzj_arr_open(&nzctl.j, NULL);
	ret = nzctl_rail_request(&nl, nlh, what, nzctl_rail_show_cb, NULL);
	if (nzctl.json) {
		nzj_arr_close(&nzctl.j);
		nzj_end(&nzctl.j);
	}
	nzctl_nl_close(&nl);
	return ret;
}

/* --- flush ---------------------------------------------------------------- */

struct nzctl_names {
	char name[NZ_MAX_RAILS * 4][NZ_RAIL_NAME_LEN];
	int n;
};

static int nzctl_rail_name_cb(const struct nlmsghdr *nlh, void *data)
{
	struct nzctl_names *names = data;
	struct nzctl_rail r;

	memset(&r, 0, sizeof(r));
	mnl_attr_parse(nlh, sizeof(struct genlmsghdr), nzctl_rail_attr_cb, &r);
	if (r.name[0] && names->n < (int)(sizeof(names->name) / sizeof(names->name[0])))
		snprintf(names->name[names->n++], NZ_RAIL_NAME_LEN, "%s", r.name);
	return MNL_CB_OK;
}

/* Delete every rail (of this network namespace's view: all of them). */
static int nzctl_rail_flush(int argc, char **argv)
{
	struct nzctl_names names = { .n = 0 };
	struct nzctl_nl nl;
	struct nlmsghdr *nlh;
	char what[64];
	int i, ret, first = 0;

	(void)argv;
	if (argc != 1)
		return nzctl_rail_usage(NZCTL_RAIL_FLUSH_USAGE);
	ret = nzctl_nl_open(&nl);
	if (ret)
		return ret;
	nlh = nzctl_nl_request(&nl, NZ_CMD_RAIL_GET, NLM_F_DUMP);
	ret = nzctl_rail_request(&nl, nlh, "rail flush", nzctl_rail_name_cb, &names);
	for (i = 0; !ret && i < names.n; i++) {
		nlh = nzctl_nl_request(&nl, NZ_CMD_RAIL_DEL, 0);
		mnl_attr_put_strz(nlh, NZ_A_RAIL_NAME, names.name[i]);
		snprintf(what, sizeof(what), "rail flush: del %s", names.name[i]);
		/* Gone meanwhile is what we wanted. */
		ret = nzctl_nl_talk(&nl, nlh, NULL, NULL);
		if (ret && ret != -ENOENT) {
			nzctl_nl_perror(&nl, ret, what);
			first = first ? first : ret;
		}
		ret = 0;
	}
	nzctl_nl_close(&nl);
	return ret ? ret : first;
}

/* --- dispatch ------------------------------------------------------------- */

enum { RAIL_SHOW, RAIL_ADD, RAIL_DEL, RAIL_SET, RAIL_FLUSH, RAIL_HELP };

static const struct nzctl_kw nzctl_rail_kws[] = {
	{ "show", RAIL_SHOW }, { "list", RAIL_SHOW }, { "add", RAIL_ADD },
	{ "del", RAIL_DEL }, { "delete", RAIL_DEL }, { "set", RAIL_SET },
	{ "flush", RAIL_FLUSH }, { "help", RAIL_HELP }, { NULL, 0 },
};

int nzctl_rail(int argc, char **argv)
{
	int sub;

	if (argc <= 1)
		return nzctl_rail_show(1, argv);
	if (nzctl_is_help(argv[1])) {
		nzctl_rail_help(stdout);
		return 0;
	}
	sub = nzctl_kw(argv[1], nzctl_rail_kws, "rail", NULL);
	if (sub < 0) {
		nzctl_rail_help(stderr);
		return sub;
	}
	/* "nezhactl rail add help": the usage of that command. */
	if (argc > 2 && nzctl_is_help(argv[2]) && sub != RAIL_SHOW) {
		static const char *const u[] = {
			[RAIL_ADD] = NZCTL_RAIL_ADD_USAGE, [RAIL_DEL] = NZCTL_RAIL_DEL_USAGE,
			[RAIL_SET] = NZCTL_RAIL_SET_USAGE, [RAIL_FLUSH] = NZCTL_RAIL_FLUSH_USAGE,
			[RAIL_HELP] = NZCTL_RAIL_SHOW_USAGE,
		};

		printf("usage: %s\n", u[sub]);
		return 0;
	}
	switch (sub) {
	case RAIL_SHOW: return nzctl_rail_show(argc - 1, argv + 1);
	case RAIL_ADD: return nzctl_rail_add(argc - 1, argv + 1);
	case RAIL_DEL: return nzctl_rail_del(argc - 1, argv + 1);
	case RAIL_SET: return nzctl_rail_set(argc - 1, argv + 1);
	case RAIL_FLUSH: return nzctl_rail_flush(argc - 1, argv + 1);
	default:
		nzctl_rail_help(stdout);
		return 0;
	}
}
