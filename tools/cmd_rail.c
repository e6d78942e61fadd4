// SPDX-License-Identifier: GPL-2.0
/*
 * nezhactl rail: add, delete, change and show rails.
 *
 *   nezhactl rail add NAME proto tcp dev NETDEV [addr A.B.C.D]
 *                     [port PORT] [weight W]
 *   nezhactl rail add NAME proto rdma {dev IBDEV | netdev NETDEV}
 *                     [ib-port N] [gid-index G] [addr A.B.C.D]
 *                     [port PORT] [weight W]
 *   nezhactl rail del NAME
 *   nezhactl rail set NAME [weight W] [up|down]
 *   nezhactl rail [show|list] [NAME]
 *
 * Arguments are checked here first, so that a usage error never reaches
 * the kernel; the kernel checks everything again (names, devices,
 * addresses, ranges) and explains its refusals in the extended ack.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
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
	"       nezhactl rail add NAME proto rdma {dev IBDEV | netdev NETDEV} [ib-port N]\n" \
	"                         [gid-index G] [addr A.B.C.D] [port PORT] [weight W]"
#define NZCTL_RAIL_DEL_USAGE	"nezhactl rail del NAME"
#define NZCTL_RAIL_SET_USAGE	"nezhactl rail set NAME [weight W] [up|down]"
#define NZCTL_RAIL_SHOW_USAGE	"nezhactl rail [show|list] [NAME]"

static int nzctl_rail_usage(const char *usage)
{
	fprintf(stderr, "usage: %s\n", usage);
	return -EINVAL;
}

/* "nezhactl: <what is wrong>" and the usage line; returns -EINVAL. */
__attribute__((format(printf, 2, 3)))
static int nzctl_rail_bad(const char *usage, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "nezhactl: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return nzctl_rail_usage(usage);
}

static void nzctl_rail_help(FILE *f)
{
	fprintf(f, "usage: %s\n       %s\n       %s\n       %s\n",
		NZCTL_RAIL_ADD_USAGE, NZCTL_RAIL_DEL_USAGE,
		NZCTL_RAIL_SET_USAGE, NZCTL_RAIL_SHOW_USAGE);
}

/* A decimal number 0..max, nothing else (no sign, no blanks). */
static int nzctl_parse_u32(const char *s, uint32_t max, uint32_t *out)
{
	unsigned long long v;
	char *end;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v > max)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

static const char *const nzctl_proto_names[] = {
	[NZ_PROTO_TCP] = "tcp",
	[NZ_PROTO_RDMA] = "rdma",
};

static const char *const nzctl_state_names[] = {
	[NZ_RAIL_UP] = "up",
	[NZ_RAIL_ADMIN_DOWN] = "admin-down",
	[NZ_RAIL_NO_LINK] = "no-link",
	[NZ_RAIL_FAILED] = "failed",
};

#define NZCTL_NAME(tbl, i) \
	((i) < sizeof(tbl) / sizeof(tbl[0]) && tbl[i] ? tbl[i] : "unknown")

/* Open the family, send req, report a failure as "nezhactl: WHAT: ...". */
static int nzctl_rail_request(struct nzctl_nl *nl, struct nlmsghdr *req,
			      const char *what, mnl_cb_t cb, void *data)
{
	int ret = nzctl_nl_talk(nl, req, cb, data);

	if (ret)
		nzctl_nl_perror(nl, ret, what);
	return ret;
}

/* --- add ------------------------------------------------------------------ */

#define ADD_BAD(...) nzctl_rail_bad(NZCTL_RAIL_ADD_USAGE, __VA_ARGS__)

struct nzctl_rail_add_args {
	const char *name, *dev, *netdev;
	uint32_t proto, port, weight, ib_port, gid_index;
	int have_port, have_weight, have_addr, have_ib_port, have_gid_index;
	struct in_addr addr;
};

/* One "KEYWORD VALUE" pair of rail add. */
static int nzctl_rail_add_arg(struct nzctl_rail_add_args *a, const char *kw,
			      const char *val)
{
	if (!strcmp(kw, "proto")) {
		if (a->proto)
			goto twice;
		if (!strcmp(val, "tcp"))
			a->proto = NZ_PROTO_TCP;
		else if (!strcmp(val, "rdma"))
			a->proto = NZ_PROTO_RDMA;
		else
			return ADD_BAD("rail add: unknown protocol \"%s\"", val);
	} else if (!strcmp(kw, "dev")) {
		if (a->dev)
			goto twice;
		a->dev = val;
	} else if (!strcmp(kw, "netdev")) {
		if (a->netdev)
			goto twice;
		a->netdev = val;
	} else if (!strcmp(kw, "ib-port")) {
		if (a->have_ib_port++)
			goto twice;
		if (nzctl_parse_u32(val, NZ_MAX_IBPORT, &a->ib_port) || !a->ib_port)
			return ADD_BAD("rail add: bad ib-port \"%s\" (1..%d)", val,
				       NZ_MAX_IBPORT);
	} else if (!strcmp(kw, "gid-index")) {
		if (a->have_gid_index++)
			goto twice;
		if (nzctl_parse_u32(val, NZ_MAX_GID_INDEX, &a->gid_index))
			return ADD_BAD("rail add: bad gid-index \"%s\" (0..%d)", val,
				       NZ_MAX_GID_INDEX);
	} else if (!strcmp(kw, "addr")) {
		if (a->have_addr++)
			goto twice;
		if (inet_pton(AF_INET, val, &a->addr) != 1)
			return ADD_BAD("rail add: bad IPv4 address \"%s\"", val);
	} else if (!strcmp(kw, "port")) {
		if (a->have_port++)
			goto twice;
		if (nzctl_parse_u32(val, 65535, &a->port) || !a->port)
			return ADD_BAD("rail add: bad port \"%s\" (1..65535)", val);
	} else if (!strcmp(kw, "weight")) {
		if (a->have_weight++)
			goto twice;
		/* The range is the kernel's: it says so if it objects. */
		if (nzctl_parse_u32(val, UINT32_MAX, &a->weight))
			return ADD_BAD("rail add: bad weight \"%s\"", val);
	} else {
		return ADD_BAD("rail add: unknown argument \"%s\"", kw);
	}
	return 0;

twice:
	return ADD_BAD("rail add: \"%s\" given twice", kw);
}

static int nzctl_rail_add(int argc, char **argv)
{
	struct nzctl_rail_add_args a = { 0 };
	struct nzctl_nl nl;
	struct nlmsghdr *nlh;
	char what[64];
	int i, ret;

	if (argc < 2)
		return ADD_BAD("rail add: no name");
	a.name = argv[1];
	for (i = 2; i < argc; i += 2) {
		if (i + 1 >= argc)
			return ADD_BAD("rail add: \"%s\" needs a value", argv[i]);
		ret = nzctl_rail_add_arg(&a, argv[i], argv[i + 1]);
		if (ret)
			return ret;
	}
	if (!a.proto)
		return ADD_BAD("rail add %s: no protocol", a.name);
	if (a.proto == NZ_PROTO_TCP && (a.netdev || a.have_ib_port || a.have_gid_index))
		return ADD_BAD("rail add %s: netdev, ib-port and gid-index are for rdma rails",
			       a.name);
	if (!a.dev && !a.netdev)
		return ADD_BAD("rail add %s: no device", a.name);

	ret = nzctl_nl_open(&nl);
	if (ret)
		return ret;
	nlh = nzctl_nl_request(&nl, NZ_CMD_RAIL_ADD, 0);
	mnl_attr_put_strz(nlh, NZ_A_RAIL_NAME, a.name);
	mnl_attr_put_u32(nlh, NZ_A_RAIL_PROTO, a.proto);
	if (a.dev)
		mnl_attr_put_strz(nlh, NZ_A_RAIL_DEV, a.dev);
	if (a.netdev)
		mnl_attr_put_strz(nlh, NZ_A_RAIL_NETDEV, a.netdev);
	if (a.have_ib_port)
		mnl_attr_put_u32(nlh, NZ_A_RAIL_IBPORT, a.ib_port);
	if (a.have_gid_index)
		mnl_attr_put_u32(nlh, NZ_A_RAIL_GID_INDEX, a.gid_index);
	if (a.have_addr)
		mnl_attr_put_u32(nlh, NZ_A_RAIL_ADDR, a.addr.s_addr);
	if (a.have_port)
		mnl_attr_put_u16(nlh, NZ_A_RAIL_PORT, (uint16_t)a.port);
	if (a.have_weight)
		mnl_attr_put_u32(nlh, NZ_A_RAIL_WEIGHT, a.weight);
	snprintf(what, sizeof(what), "rail add %s", a.name);
	ret = nzctl_rail_request(&nl, nlh, what, NULL, NULL);
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
		if (!strcmp(argv[i], "up") || !strcmp(argv[i], "down")) {
			if (admin >= 0)
				return SET_BAD("rail set: up or down given twice");
			admin = !strcmp(argv[i], "up");
		} else if (!strcmp(argv[i], "weight")) {
			if (have_weight++)
				return SET_BAD("rail set: \"weight\" given twice");
			if (++i >= argc)
				return SET_BAD("rail set: \"weight\" needs a value");
			if (nzctl_parse_u32(argv[i], UINT32_MAX, &weight))
				return SET_BAD("rail set: bad weight \"%s\"", argv[i]);
		} else {
			return SET_BAD("rail set: unknown argument \"%s\"", argv[i]);
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
	int64_t gid_index;		/* -1: not configured */
	uint32_t addr;			/* network order */
	uint16_t port;
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
		else
			r->addr = mnl_attr_get_u32(attr);
		break;
	case NZ_A_RAIL_PORT:
		if (mnl_attr_validate(attr, MNL_TYPE_U16) >= 0)
			r->port = mnl_attr_get_u16(attr);
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
	char path[512];
	FILE *f;

	snprintf(buf, len, "-");
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	f = fopen(path, "r");
	if (!f)
		return;
	if (fgets(buf, (int)len, f))
		buf[strcspn(buf, "\n")] = '\0';
	fclose(f);
}

/*
 * The scheduler's view of each (peer, rail) connection, from sysfs:
 *     peer 1 job 00c0ffee00000001: hot bw 4.98 MB/s rtt 2.3 ms (min 2.1)
 *       start 2.4 ms window 262144 inflight 131072 (rank 0)
 */
static void nzctl_rail_show_peers(const char *rail)
{
	char dir[320], v[7][64];
	static const char *const files[] = {
		"sched_state", "est_bw", "srtt_us", "min_rtt_us", "start_us",
		"window_bytes", "inflight_bytes",
	};
	unsigned int job_rank, peer;
	unsigned long long job;
	struct dirent *de;
	size_t i;
	DIR *d;

	snprintf(dir, sizeof(dir), "/sys/class/nezha/rail-%s", rail);
	d = opendir(dir);
	if (!d)
		return;
	while ((de = readdir(d))) {
		if (sscanf(de->d_name, "peer-%llx-%u-%u", &job, &job_rank,
			   &peer) != 3)
			continue;
		snprintf(dir, sizeof(dir), "/sys/class/nezha/rail-%s/%s", rail,
			 de->d_name);
		for (i = 0; i < 7; i++)
			nzctl_sysfs_read(dir, files[i], v[i], sizeof(v[i]));
		printf("    peer %u job %016llx (rank %u): %s bw %.2f MB/s rtt %.1f ms"
		       " (min %.1f) start %.1f ms window %s inflight %s\n",
		       peer, job, job_rank, v[0], strtod(v[1], NULL) / 1e6,
		       strtod(v[2], NULL) / 1e3, strtod(v[3], NULL) / 1e3,
		       strtod(v[4], NULL) / 1e3, v[5], v[6]);
	}
	closedir(d);
}

/*
 * 0: r0 tcp dev eth0 10.77.0.1:7470 weight 100 state up conns 1
 *     tx 123 bytes 4 chunks  rx 0 bytes 0 chunks  errors 0 refused 0
 * RDMA rails name their device's port and netdev (and a GID, if given):
 * 1: r1 rdma dev rxe0 ib-port 1 netdev eth1 10.77.1.1:7470 weight 100 ...
 * A link that reports its speed adds it: "... conns 1 speed 40 Mbit/s".
 */
static int nzctl_rail_show_cb(const struct nlmsghdr *nlh, void *data)
{
	char addr[INET_ADDRSTRLEN], rdma[160] = "", speed[32] = "";
	struct nzctl_rail r;

	(void)data;
	memset(&r, 0, sizeof(r));
	r.gid_index = -1;
	mnl_attr_parse(nlh, sizeof(struct genlmsghdr), nzctl_rail_attr_cb, &r);
	if (!inet_ntop(AF_INET, &r.addr, addr, sizeof(addr)))
		snprintf(addr, sizeof(addr), "?");
	if (r.ib_port && r.gid_index >= 0)
		snprintf(rdma, sizeof(rdma), " ib-port %" PRIu32 " gid-index %" PRId64
			 " netdev %s", r.ib_port, r.gid_index, r.netdev);
	else if (r.ib_port)
		snprintf(rdma, sizeof(rdma), " ib-port %" PRIu32 " netdev %s",
			 r.ib_port, r.netdev);
	if (r.speed)
		snprintf(speed, sizeof(speed), " speed %" PRIu32 " Mbit/s", r.speed);
	printf("%" PRIu32 ": %s %s dev %s%s %s:%u weight %" PRIu32
	       " state %s conns %" PRIu64 "%s\n",
	       r.id, r.name, NZCTL_NAME(nzctl_proto_names, r.proto), r.dev,
	       rdma, addr, r.port, r.weight,
	       NZCTL_NAME(nzctl_state_names, r.state), r.stats[NZ_RSTAT_CONNS],
	       speed);
	printf("    tx %" PRIu64 " bytes %" PRIu64 " chunks  rx %" PRIu64
	       " bytes %" PRIu64 " chunks  errors %" PRIu64 " refused %" PRIu64
	       "\n",
	       r.stats[NZ_RSTAT_BYTES_TX], r.stats[NZ_RSTAT_CHUNKS_TX],
	       r.stats[NZ_RSTAT_BYTES_RX], r.stats[NZ_RSTAT_CHUNKS_RX],
	       r.stats[NZ_RSTAT_ERRORS], r.stats[NZ_RSTAT_HS_REFUSED]);
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
	ret = nzctl_rail_request(&nl, nlh, what, nzctl_rail_show_cb, NULL);
	nzctl_nl_close(&nl);
	return ret;
}

/* --- dispatch ------------------------------------------------------------- */

int nzctl_rail(int argc, char **argv)
{
	const char *sub = argc > 1 ? argv[1] : "show";

	if (argc <= 1 || !strcmp(sub, "show") || !strcmp(sub, "list"))
		return nzctl_rail_show(argc > 1 ? argc - 1 : 1, argv + 1);
	if (!strcmp(sub, "add"))
		return nzctl_rail_add(argc - 1, argv + 1);
	if (!strcmp(sub, "del") || !strcmp(sub, "delete"))
		return nzctl_rail_del(argc - 1, argv + 1);
	if (!strcmp(sub, "set"))
		return nzctl_rail_set(argc - 1, argv + 1);
	if (!strcmp(sub, "help")) {
		nzctl_rail_help(stdout);
		return 0;
	}
	fprintf(stderr, "nezhactl: rail: unknown command \"%s\"\n", sub);
	nzctl_rail_help(stderr);
	return -EINVAL;
}
