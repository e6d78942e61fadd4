// SPDX-License-Identifier: GPL-2.0
/*
 * nz_fuzz: a fuzzer of nezha.ko's local interface, run in a guest with the
 * module loaded and at least one TCP rail added.
 *
 * Every input is generated from (seed, index) alone, so any input can be
 * generated again: "-r SEED:INDEX" replays one.  An input is one of
 *   - an IORING_OP_URING_CMD SQE128 on /dev/nezha: every opcode and random
 *     ones, flags, reserved fields, padding, lengths at and past every
 *     limit, bogus, unaligned and kernel addresses, fixed buffers with
 *     indexes in and out of range, communicator ids of this file, of no
 *     file and of another file;
 *   - an ioctl: every NZ_IOC_* with edge payloads, and unknown numbers;
 *   - a generic netlink message to the nezha family: every command,
 *     attributes at their limits, nested garbage, broken lengths;
 *   - rarely a scenario: threads racing create / destroy / send / recv /
 *     close on one file, a child killed with commands in flight, the ring
 *     or the file replaced with commands in flight.
 * Communicators made by the fuzzer have peers that never answer (a closed
 * port, a listener that never speaks, an address nobody has, a rail's own
 * listener that knows nothing of the job) or are pairs of ranks of one job
 * in this process, so that data really moves.
 *
 * A failure is a result outside what the ABI allows for that input (the
 * fuzzer knows which inputs must be refused with -EINVAL and which errno
 * classes each command may return), a command not completed by its bound,
 * an operation that blocks longer than -w seconds (a watchdog ends the run),
 * or, after the campaign, anything left behind: open files, commands in
 * flight, peers in sysfs.  The harness adds the kernel log (oops, WARN).
 *
 * Classes of input that hit module bugs not yet fixed are off unless -K.
 *
 * Usage: nz_fuzz [-s SEED] [-n COUNT] [-r SEED:INDEX] [-u UID] [-K] [-v]
 *                [-w HANG_S] [-R RELEASE_S] [-p EVERY] [-c CASE]
 * Output is TAP; exit status 0 iff every check passed.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <liburing.h>
#include "linux/nezha.h"
#include "linux/nezha_netlink.h"
#include "tap.h"

#define SYS		"/sys/class/nezha/"
#define DEF_SEED	0x4e5a46555a5a0001ULL
#define MAX_OUT		2048	/* commands in flight, main ring */
#define SLOT_BITS	12
#define MAX_COMMS	8
#define NREG		4	/* registered buffers */
#define REG_LEN		(64 * 1024)
#define BIG_LEN		(1024 * 1024)	/* the good buffer */
#define MAX_MSG		(1ULL << 40)
#define MAX_TMO		(3600U * 1000)
#define BLACKHOLE_PORT	7990
#define JOB_MAIN	0x4e5a000000000000ULL
#define JOB_NEIGH	0x4e5b000000000000ULL
#define JOB_RACE	0x4e5c000000000000ULL
#define JOB_KILL	0x4e5d000000000000ULL
#define KADDR		0xffff888000000000ULL

/* ---- options, counters -------------------------------------------------- */

static uint64_t opt_seed = DEF_SEED;
static uint64_t opt_count = 100000;
static uint64_t opt_progress = 10000;	/* a diagnostic line every so many */
static bool opt_replay, opt_known, opt_verbose;
static uint64_t opt_replay_index;
static double opt_hang_s = 20, opt_release_s = 3;
static long opt_uid = -1;
static const char *opt_case;
static bool priv;
static uint64_t max_len = 16ULL << 30;	/* max_msg_mb of the module, bytes */
#define TASK_TOP	0x00007ffffffff000ULL	/* TASK_SIZE_MAX on x86-64 */

static struct {
	uint64_t sqe, ioctl, netlink, scenario, filtered, race_ops, kills;
	uint64_t gone_einval;	/* -EINVAL: the comm destroyed before issue */
	uint64_t fails, slow_ops, creates_ok, pairs, destroys;
	double max_op_s;
	char max_op[96];
	double t_sqe, t_ioctl, t_netlink, t_race, t_kill, t_cycle;
} st;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- deterministic randomness ------------------------------------------- */

struct rng {
	uint64_t s;
};

static uint64_t rnd(struct rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint32_t below(struct rng *r, uint32_t n)
{
	return n ? (uint32_t)(rnd(r) % n) : 0;
}

/* True with probability per_mille / 1000. */
static bool pm(struct rng *r, unsigned int per_mille)
{
	return below(r, 1000) < per_mille;
}

static struct rng rng_for(uint64_t seed, uint64_t index, uint64_t salt)
{
	struct rng r = { seed ^ (index * 0xd1342543de82ef95ULL) ^ salt };

	rnd(&r);
	return r;
}

/* A value near one of the interesting edges. */
static uint64_t edge64(struct rng *r)
{
	static const uint64_t e[] = {
		0, 1, 2, 7, 8, 4095, 4096, 4097, 65535, 65536, 65537,
		0x7fffffff, 0x80000000, 0xffffffff, 0x100000000ULL,
		MAX_MSG - 1, MAX_MSG, MAX_MSG + 1, 1ULL << 62, 1ULL << 63,
		(1ULL << 63) - 1, ~0ULL, ~0ULL - 4095,
	};
	uint64_t v = e[below(r, sizeof(e) / sizeof(e[0]))];

	return pm(r, 200) ? v + below(r, 3) - 1 : v;
}

/* ---- errno classes ------------------------------------------------------ */

/* A set of results: bit e for -e, bit 0 for any res >= 0. */
typedef unsigned __int128 emask;
#define A(e)	((emask)1 << (e))
#define A_OK	((emask)1)
/*
 * What a transfer may end with; ECONNABORTED and ENOBUFS when the other
 * side gave up on the message first or had no room for it
 * (Documentation/wire.rst, "Failed transfers").
 */
#define XFER_ERRS (A(EINVAL) | A(EFAULT) | A(ENOMEM) | A(ETIMEDOUT) | \
		   A(ENETDOWN) | A(ECANCELED) | A(ECONNRESET) | A(EMSGSIZE) | \
		   A(ECONNABORTED) | A(ENOBUFS))

static bool allowed(emask mask, long res)
{
	if (res >= 0)
		return mask & A_OK;
	return -res < 128 && (mask & A(-res));
}

/* Four buffers: a message may name two results, and be built twice. */
static const char *errname(long res)
{
	static char bufs[4][32];
	static unsigned int next;
	char *buf = bufs[next++ % 4];

	if (res >= 0) {
		snprintf(buf, sizeof(bufs[0]), "%ld", res);
		return buf;
	}
	snprintf(buf, sizeof(bufs[0]), "-%s", strerrorname_np((int)-res) ?: "?");
	return buf;
}

__attribute__((format(printf, 2, 3)))
static void fail(uint64_t index, const char *fmt, ...)
{
	va_list ap;

	st.fails++;
	if (st.fails > 30)
		return;
	printf("# FAIL input %#" PRIx64 ":%" PRIu64 ": ", opt_seed, index);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("  (replay: nz_fuzz -r %#" PRIx64 ":%" PRIu64 "%s)\n", opt_seed,
	       index, opt_known ? " -K" : "");
	fflush(stdout);
}

/* ---- the watchdog: no operation may block longer than opt_hang_s -------- */

static _Atomic double wd_start;		/* 0 = idle */
static _Atomic uint64_t wd_index;
static char wd_what[128];

static void op_begin(uint64_t index, const char *what)
{
	wd_index = index;
	snprintf(wd_what, sizeof(wd_what), "%s", what);
	wd_start = now_s();
}

static void op_end(void)
{
	double t = now_s() - wd_start;

	wd_start = 0;
	if (t > st.max_op_s) {
		st.max_op_s = t;
		snprintf(st.max_op, sizeof(st.max_op), "%.90s", wd_what);
	}
	if (t > 1.0)
		st.slow_ops++;
}

static void *watchdog(void *arg)
{
	(void)arg;
	for (;;) {
		double s = wd_start;

		if (s && now_s() - s > opt_hang_s) {
			char path[64], buf[2048];
			FILE *f;
			size_t n;

			printf("not ok %d - hang: %s blocked > %.0f s (input %#" PRIx64 ":%" PRIu64 ")\n",
			       tap_n + 1, wd_what, opt_hang_s, opt_seed,
			       (uint64_t)wd_index);
			snprintf(path, sizeof(path), "/proc/%d/stack", getpid());
			f = fopen(path, "r");
			if (f) {
				n = fread(buf, 1, sizeof(buf) - 1, f);
				buf[n] = 0;
				for (char *l = strtok(buf, "\n"); l; l = strtok(NULL, "\n"))
					printf("# stack: %s\n", l);
				fclose(f);
			}
			printf("1..%d\n", tap_n + 1);
			fflush(stdout);
			_exit(1);
		}
		usleep(100 * 1000);
	}
	return NULL;
}

/* ---- sysfs -------------------------------------------------------------- */

static long long sys_ll(const char *name)
{
	char path[256], buf[64];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), SYS "nezha/%s", name);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fgets(buf, sizeof(buf), f))
		v = strtoll(buf, NULL, 0);
	fclose(f);
	return v;
}

/* Peers (one directory per communicator, peer and rail) left in sysfs. */
static int sys_peers(char *first, size_t len)
{
	DIR *d = opendir(SYS), *r;
	struct dirent *de, *pe;
	char path[300];
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, "rail-", 5))
			continue;
		snprintf(path, sizeof(path), SYS "%s", de->d_name);
		r = opendir(path);
		if (!r)
			continue;
		while ((pe = readdir(r)))
			if (!strncmp(pe->d_name, "peer-", 5)) {
				if (!n && first)
					snprintf(first, len, "%.60s/%.60s",
						 de->d_name, pe->d_name);
				n++;
			}
		closedir(r);
	}
	closedir(d);
	return n;
}

/* ---- memory the inputs point at ----------------------------------------- */

static uint8_t *big;		/* BIG_LEN read-write, then a guard page */
static uint8_t *ro;		/* one read-only page */
static uint8_t *reg[NREG];	/* registered buffers */
static uint8_t *argm;		/* ARG_LEN for ioctl arguments, then a guard page */
static long page;
#define ARG_LEN		(4 * 4096)

static int mem_setup(void)
{
	uint8_t *m;
	int i;

	page = sysconf(_SC_PAGESIZE);
	m = mmap(NULL, BIG_LEN + page, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return -1;
	mprotect(m + BIG_LEN, page, PROT_NONE);
	memset(m, 0x5a, BIG_LEN);
	big = m;
	ro = mmap(NULL, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (ro == MAP_FAILED)
		return -1;
	/* Commands write into big at any time: arguments live apart. */
	m = mmap(NULL, ARG_LEN + page, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return -1;
	mprotect(m + ARG_LEN, page, PROT_NONE);
	argm = m;
	for (i = 0; i < NREG; i++) {
		reg[i] = mmap(NULL, REG_LEN, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (reg[i] == MAP_FAILED)
			return -1;
		memset(reg[i], i, REG_LEN);
	}
	return 0;
}

enum acls { AC_GOOD, AC_BAD, AC_PARTIAL, AC_RO, AC_MAYBE };

/* An address for a buffer of len bytes and how it should fare. */
static uint64_t gen_addr(struct rng *r, uint64_t len, enum acls *cls)
{
	uint64_t a;

	switch (below(r, 12)) {
	case 0:
		*cls = AC_BAD;
		return 0;
	case 1:
		*cls = AC_BAD;
		return below(r, 2) ? 1 + below(r, 4095) : 16;
	case 2:
		*cls = AC_BAD;
		return below(r, 2) ? KADDR + below(r, 1 << 20) :
				     0xffffffff81000000ULL;
	case 3:
		*cls = AC_BAD;	/* not canonical */
		return below(r, 2) ? 0x0000800000000000ULL : ~0ULL - below(r, 64);
	case 4:
		*cls = AC_RO;
		return (uintptr_t)ro + below(r, (uint32_t)page);
	case 5:
		*cls = AC_PARTIAL;	/* runs into the guard page */
		a = (uintptr_t)big + BIG_LEN - below(r, 8192);
		return a;
	case 6:
		*cls = AC_MAYBE;
		return rnd(r);
	default:
		if (len <= BIG_LEN) {
			uint64_t room = BIG_LEN - len;

			a = (uintptr_t)big + (room ? rnd(r) % (room + 1) : 0);
			if (pm(r, 700))
				a &= ~(uint64_t)(page - 1);
			if (a + len > (uintptr_t)big + BIG_LEN)
				a = (uintptr_t)big;
			*cls = AC_GOOD;
			return a;
		}
		*cls = AC_PARTIAL;
		return (uintptr_t)big + below(r, 4096);
	}
}

/* A length for SEND/RECV: the limits and both sides of each. */
static uint64_t gen_len(struct rng *r)
{
	switch (below(r, 10)) {
	case 0:
		return 0;
	case 1:
		return edge64(r);
	case 2:
		return 1 + below(r, 64);
	case 3:
		return 1 + below(r, BIG_LEN);
	case 4:
		return (4096ULL << below(r, 11)) + below(r, 3) - 1;
	case 5:
		return rnd(r) >> below(r, 64);
	default:
		return 1 + below(r, 65536);
	}
}

/* ---- rails and the netlink family --------------------------------------- */

struct rail {
	char name[NZ_RAIL_NAME_LEN];
	char dev[32];
	uint32_t addr;		/* network order */
	uint16_t port;		/* host order */
	bool orig, exists;
	bool agg;		/* NZ_PROTO_AGG: no communicator takes it */
};

static struct rail rails[16];
static int nrails;		/* entries used in rails[] */
static int nl_fd = -1;
static uint16_t nl_family;
static uint32_t hb0[3];		/* health parameters at start */

static int ioc_rail_list(struct nz_rail_info *out, uint32_t cap, uint32_t *n)
{
	struct nz_rail_list l = { .count = cap, .rails = (uintptr_t)out };
	int fd = open(NZ_DEVICE_PATH, O_RDWR), ret;

	if (fd < 0)
		return -errno;
	ret = ioctl(fd, NZ_IOC_RAIL_LIST, &l) ? -errno : 0;
	close(fd);
	*n = l.count;
	return ret;
}

static void dev_of_addr(uint32_t addr, char *dev, size_t len)
{
	struct ifaddrs *ifa, *i;

	dev[0] = 0;
	if (getifaddrs(&ifa))
		return;
	for (i = ifa; i; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
		    ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr == addr) {
			snprintf(dev, len, "%s", i->ifa_name);
			break;
		}
	freeifaddrs(ifa);
}

static struct rail *rail_find(const char *name)
{
	for (int i = 0; i < nrails; i++)
		if (!strcmp(rails[i].name, name))
			return &rails[i];
	return NULL;
}

static int rails_setup(void)
{
	struct nz_rail_info info[NZ_MAX_RAILS];
	uint32_t n, i;

	if (ioc_rail_list(info, NZ_MAX_RAILS, &n) || !n)
		return -1;
	for (i = 0; i < n && i < NZ_MAX_RAILS; i++) {
		struct rail *r = &rails[nrails++];

		snprintf(r->name, sizeof(r->name), "%.15s", info[i].name);
		r->addr = info[i].addr;
		r->port = ntohs(info[i].port);
		r->orig = r->exists = true;
		dev_of_addr(r->addr, r->dev, sizeof(r->dev));
	}
	return 0;
}

static int rails_existing(void)
{
	int n = 0;

	for (int i = 0; i < nrails; i++)
		n += rails[i].exists;
	return n;
}

struct nlbuf {
	uint8_t b[8192];
	size_t len;
};

static struct nlattr *nl_put(struct nlbuf *m, uint16_t type, const void *data,
			     size_t len)
{
	struct nlattr *a = (struct nlattr *)(m->b + m->len);
	size_t al = NLA_ALIGN(NLA_HDRLEN + len);

	if (m->len + al > sizeof(m->b))
		return NULL;
	a->nla_type = type;
	a->nla_len = (uint16_t)(NLA_HDRLEN + len);
	if (len)
		memcpy((uint8_t *)a + NLA_HDRLEN, data, len);
	memset((uint8_t *)a + NLA_HDRLEN + len, 0, al - NLA_HDRLEN - len);
	m->len += al;
	return a;
}

static void nl_put_u32(struct nlbuf *m, uint16_t type, uint32_t v)
{
	nl_put(m, type, &v, 4);
}

static void nl_put_str(struct nlbuf *m, uint16_t type, const char *s)
{
	nl_put(m, type, s, strlen(s) + 1);
}

static void nl_start(struct nlbuf *m, uint16_t family, uint8_t cmd,
		     uint16_t flags, uint32_t seq)
{
	struct nlmsghdr *h = (struct nlmsghdr *)m->b;
	struct genlmsghdr *g = (struct genlmsghdr *)(m->b + NLMSG_HDRLEN);

	memset(m->b, 0, NLMSG_HDRLEN + GENL_HDRLEN);
	h->nlmsg_type = family;
	h->nlmsg_flags = flags;
	h->nlmsg_seq = seq;
	g->cmd = cmd;
	g->version = NZ_GENL_VERSION;
	m->len = NLMSG_HDRLEN + GENL_HDRLEN;
}

/*
 * Send m (its nlmsg_len is set here unless keep_len) and read until the
 * ACK or error of seq.  Returns the error (0 or -errno), 1 when no answer
 * came within wait_ms, and passes each reply of seq to cb.
 */
static int nl_talk(struct nlbuf *m, bool keep_len, int wait_ms,
		   void (*cb)(struct nlmsghdr *, void *), void *arg)
{
	struct nlmsghdr *h = (struct nlmsghdr *)m->b;
	uint32_t seq = h->nlmsg_seq;
	static uint8_t rb[65536];
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	double end = now_s() + wait_ms / 1000.0;

	if (!keep_len)
		h->nlmsg_len = (uint32_t)m->len;
	if (sendto(nl_fd, m->b, m->len, 0, (struct sockaddr *)&sa,
		   sizeof(sa)) < 0)
		return -errno;
	for (;;) {
		struct pollfd p = { .fd = nl_fd, .events = POLLIN };
		int left = (int)((end - now_s()) * 1000);
		ssize_t n;

		if (left <= 0 || poll(&p, 1, left) <= 0)
			return 1;
		n = recv(nl_fd, rb, sizeof(rb), MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			return -errno;
		}
		for (struct nlmsghdr *r = (struct nlmsghdr *)rb;
		     NLMSG_OK(r, (size_t)n); r = NLMSG_NEXT(r, n)) {
			if (r->nlmsg_seq != seq)
				continue;
			if (r->nlmsg_type == NLMSG_ERROR) {
				struct nlmsgerr *e = NLMSG_DATA(r);

				return e->error;
			}
			if (r->nlmsg_type == NLMSG_DONE)
				return 0;
			if (cb)
				cb(r, arg);
		}
	}
}

static void nl_family_cb(struct nlmsghdr *r, void *arg)
{
	struct nlattr *a = (struct nlattr *)((uint8_t *)NLMSG_DATA(r) + GENL_HDRLEN);
	int left = (int)r->nlmsg_len - NLMSG_HDRLEN - GENL_HDRLEN;

	while (left >= NLA_HDRLEN && a->nla_len >= NLA_HDRLEN && a->nla_len <= left) {
		if ((a->nla_type & NLA_TYPE_MASK) == CTRL_ATTR_FAMILY_ID)
			*(uint16_t *)arg = *(uint16_t *)((uint8_t *)a + NLA_HDRLEN);
		left -= NLA_ALIGN(a->nla_len);
		a = (struct nlattr *)((uint8_t *)a + NLA_ALIGN(a->nla_len));
	}
}

static void nl_health_cb(struct nlmsghdr *r, void *arg)
{
	struct nlattr *a = (struct nlattr *)((uint8_t *)NLMSG_DATA(r) + GENL_HDRLEN);
	int left = (int)r->nlmsg_len - NLMSG_HDRLEN - GENL_HDRLEN;
	uint32_t *hb = arg;

	while (left >= NLA_HDRLEN && a->nla_len >= NLA_HDRLEN && a->nla_len <= left) {
		uint32_t v = *(uint32_t *)((uint8_t *)a + NLA_HDRLEN);

		switch (a->nla_type) {
		case NZ_A_HB_INTERVAL_MS:
			hb[0] = v;
			break;
		case NZ_A_HB_MISSES:
			hb[1] = v;
			break;
		case NZ_A_GRACE_MS:
			hb[2] = v;
			break;
		}
		left -= NLA_ALIGN(a->nla_len);
		a = (struct nlattr *)((uint8_t *)a + NLA_ALIGN(a->nla_len));
	}
}

static int nl_setup(void)
{
	struct timeval tv = { .tv_sec = 5 };
	struct nlbuf m;

	nl_fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	if (nl_fd < 0)
		return -1;
	setsockopt(nl_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	nl_start(&m, GENL_ID_CTRL, CTRL_CMD_GETFAMILY, NLM_F_REQUEST | NLM_F_ACK, 1);
	((struct genlmsghdr *)(m.b + NLMSG_HDRLEN))->version = 1;
	nl_put_str(&m, CTRL_ATTR_FAMILY_NAME, NZ_GENL_NAME);
	if (nl_talk(&m, false, 5000, nl_family_cb, &nl_family) || !nl_family)
		return -1;
	nl_start(&m, nl_family, NZ_CMD_HEALTH_GET, NLM_F_REQUEST | NLM_F_ACK, 2);
	return nl_talk(&m, false, 5000, nl_health_cb, hb0) ? -1 : 0;
}

static int nl_rail_add(const struct rail *r)
{
	struct nlbuf m;
	uint32_t proto = NZ_PROTO_TCP;
	uint16_t port = r->port;

	nl_start(&m, nl_family, NZ_CMD_RAIL_ADD, NLM_F_REQUEST | NLM_F_ACK, 3);
	nl_put_str(&m, NZ_A_RAIL_NAME, r->name);
	nl_put(&m, NZ_A_RAIL_PROTO, &proto, 4);
	nl_put_str(&m, NZ_A_RAIL_DEV, r->dev);
	nl_put(&m, NZ_A_RAIL_PORT, &port, 2);
	return nl_talk(&m, false, (int)(opt_hang_s * 1000), NULL, NULL);
}

static int nl_rail_del(const char *name)
{
	struct nlbuf m;

	nl_start(&m, nl_family, NZ_CMD_RAIL_DEL, NLM_F_REQUEST | NLM_F_ACK, 4);
	nl_put_str(&m, NZ_A_RAIL_NAME, name);
	return nl_talk(&m, false, (int)(opt_hang_s * 1000), NULL, NULL);
}

static int nl_health_restore(void)
{
	struct nlbuf m;

	nl_start(&m, nl_family, NZ_CMD_HEALTH_SET, NLM_F_REQUEST | NLM_F_ACK, 5);
	nl_put_u32(&m, NZ_A_HB_INTERVAL_MS, hb0[0]);
	nl_put_u32(&m, NZ_A_HB_MISSES, hb0[1]);
	nl_put_u32(&m, NZ_A_GRACE_MS, hb0[2]);
	return nl_talk(&m, false, (int)(opt_hang_s * 1000), NULL, NULL);
}

/* ---- communicators ------------------------------------------------------ */

struct comm {
	uint32_t id, rank, size, nrails, timeout_ms;
	uint64_t job;
	uint64_t born;		/* input index */
	bool pair;		/* the other rank of its job is here too */
};

/* A device file and the communicators the fuzzer made on it. */
struct dev {
	int fd;
	struct comm comms[MAX_COMMS];
	int ncomms;
};

static struct dev dmain, dother;	/* dother never has communicators */
static int pipefd[2];
static int blackhole = -1;
static uint64_t neigh_jobs[4];		/* (job, rank 0) of the neighbour */
static pid_t neigh_pid;

static struct comm *comm_by_id(struct dev *d, uint32_t id)
{
	for (int i = 0; i < d->ncomms; i++)
		if (d->comms[i].id == id)
			return &d->comms[i];
	return NULL;
}

/* (job, rank) is unique across every file of the module. */
static bool job_taken(uint64_t job, uint32_t rank)
{
	for (int i = 0; i < dmain.ncomms; i++)
		if (dmain.comms[i].job == job && dmain.comms[i].rank == rank)
			return true;
	for (int i = 0; i < 4; i++)
		if (neigh_jobs[i] == job && rank == 0)
			return true;
	return false;
}

/* Pick n distinct existing rails for a communicator; false if too few. */
/* n rails that exist (p2p: no aggregation rail, which takes no comm). */
static bool pick_rails(struct rng *r, struct nz_comm_create *cc, uint32_t n,
		       int *idx, bool p2p)
{
	int have[16], nh = 0;

	for (int i = 0; i < nrails; i++)
		if (rails[i].exists && !(p2p && rails[i].agg))
			have[nh++] = i;
	if ((uint32_t)nh < n)
		return false;
	for (uint32_t s = 0; s < n; s++) {
		int k = (int)below(r, (uint32_t)(nh - s)) + (int)s, t = have[k];

		have[k] = have[s];
		have[s] = t;
		idx[s] = t;
		snprintf(cc->rails[s], NZ_RAIL_NAME_LEN, "%s", rails[t].name);
	}
	return true;
}

/* Where a peer that never answers "listens", per rail slot. */
static void peer_addr(struct rng *r, const struct rail *rl,
		      struct nz_comm_addr *a, unsigned int kind)
{
	a->addr = rl->addr;
	a->rsvd = 0;
	switch (kind) {
	case 0:	/* the rail's own listener: the job is unknown there */
		a->port = htons(rl->port);
		break;
	case 1:	/* a closed port: refused at once */
		a->port = htons(1);
		break;
	case 2:	/* a listener that never speaks */
		a->addr = rails[0].addr;
		a->port = htons(BLACKHOLE_PORT);
		break;
	default: /* nobody has that address */
		a->addr = (rl->addr & htonl(0xffffff00)) | htonl(250);
		a->port = htons((uint16_t)(1000 + below(r, 60000)));
		break;
	}
}

static struct nz_comm_addr addr_tab[NZ_MAX_RANKS * 2];

/* A valid COMM_CREATE: size, rank, rails, peers as above.  false: no rails. */
static bool gen_create_valid(struct rng *r, struct nz_comm_create *cc,
			     uint64_t jobbase)
{
	int idx[NZ_MAX_RAILS];
	uint32_t nr, i, s, kind = below(r, 10);

	memset(cc, 0, sizeof(*cc));
	cc->job_id = jobbase | below(r, 16);
	for (i = 0; i < NZ_SECRET_LEN; i++)
		cc->secret[i] = (uint8_t)rnd(r);
	cc->size = pm(r, 700) ? 2 : pm(r, 900) ? 2 + below(r, 3) :
		   pm(r, 500) ? 1 : 5 + below(r, 60);
	cc->rank = below(r, cc->size);
	nr = 1 + below(r, (uint32_t)rails_existing());
	if (nr > 2 && pm(r, 700))
		nr = 2;
	cc->nrails = nr;
	if (!pick_rails(r, cc, nr, idx, false))
		return false;
	cc->unit = pm(r, 500) ? 0 : 4096U << below(r, 11);
	cc->timeout_ms = pm(r, 100) ? 0 : 100 + below(r, 2900);
	kind = kind < 4 ? 0 : kind < 7 ? 1 : kind < 9 ? 2 : 3;
	if (cc->size > 4)
		kind = 1;	/* many peers: refuse them fast */
	for (i = 0; i < cc->size; i++)
		for (s = 0; s < nr; s++)
			peer_addr(r, &rails[idx[s]], &addr_tab[i * nr + s], kind);
	cc->addrs = (uintptr_t)addr_tab;
	return true;
}

/* The module's own checks of nz_comm_check_create(), written again. */
static bool create_check_ok(const struct nz_comm_create *cc)
{
	for (size_t i = 0; i < sizeof(cc->rsvd) / sizeof(cc->rsvd[0]); i++)
		if (cc->rsvd[i])
			return false;
	if (!cc->size || cc->size > NZ_MAX_RANKS || cc->rank >= cc->size)
		return false;
	if (!cc->nrails || cc->nrails > NZ_MAX_RAILS)
		return false;
	if (cc->unit && (cc->unit & (cc->unit - 1) || cc->unit < 4096 ||
			 cc->unit > (4U << 20)))
		return false;
	if (cc->timeout_ms > MAX_TMO)
		return false;
	for (uint32_t i = 0; i < NZ_MAX_RAILS; i++) {
		size_t n = strnlen(cc->rails[i], NZ_RAIL_NAME_LEN);

		if (n == NZ_RAIL_NAME_LEN || (i < cc->nrails) != (n > 0))
			return false;
	}
	return true;
}

/*
 * What a create that passed the checks above should return, given what the
 * fuzzer knows of rails and memory: 0, or the errno of the first failure.
 * *late: that failure happens after the communicator was allocated (the
 * path of a module bug not yet fixed: -K only).
 */
static int create_outcome(const struct nz_comm_create *cc,
			  enum acls tcls, bool *late)
{
	uint64_t n = (uint64_t)cc->size * cc->nrails;
	const struct nz_comm_addr *t = (const void *)(uintptr_t)cc->addrs;

	*late = true;
	for (uint32_t s = 0; s < cc->nrails; s++) {
		struct rail *rl = rail_find(cc->rails[s]);

		if (!rl || !rl->exists)
			return -ENODEV;
		if (rl->agg)
			return -EPROTOTYPE;
		for (uint32_t u = 0; u < s; u++)
			if (!strcmp(cc->rails[u], cc->rails[s]))
				return -EINVAL;
	}
	if (tcls != AC_GOOD)
		return -EFAULT;
	for (uint64_t i = 0; i < n; i++)
		if (t[i].rsvd || (i / cc->nrails != cc->rank &&
				  (!t[i].addr || !t[i].port)))
			return -EINVAL;
	*late = false;
	if (job_taken(cc->job_id, cc->rank))
		return -EEXIST;
	return 0;
}

/* ---- the ring and commands in flight ------------------------------------ */

struct expect {
	bool used;
	uint64_t index;
	uint32_t op;
	emask mask;		/* allowed results */
	bool exact;
	int32_t want;
	uint64_t len;		/* SEND: a result >= 0 must be this */
	uint32_t comm_id;	/* 0: none */
	bool async;		/* IOSQE_ASYNC: issued later, by io-wq */
	bool gone;		/* its communicator destroyed since */
	double deadline;	/* 0: until its communicator goes */
	char desc[120];
};

static struct io_uring ring;
static bool ring_ok, ring_cqe32;
static struct expect outs[MAX_OUT];
static int nout, free_hint;
static int batch;		/* SQEs prepared, not submitted */

static int ring_open(struct rng *r)
{
	struct io_uring_params p = { .flags = IORING_SETUP_SQE128 | IORING_SETUP_CQSIZE,
				     .cq_entries = 4096 };
	struct iovec iov[NREG];
	int ret;

	ring_cqe32 = r && pm(r, 300);
	if (ring_cqe32)
		p.flags |= IORING_SETUP_CQE32;
	ret = io_uring_queue_init_params(64, &ring, &p);
	if (ret)
		return ret;
	for (int i = 0; i < NREG; i++) {
		iov[i].iov_base = reg[i];
		iov[i].iov_len = REG_LEN;
	}
	ret = io_uring_register_buffers(&ring, iov, NREG);
	if (ret) {
		io_uring_queue_exit(&ring);
		return ret;
	}
	ring_ok = true;
	return 0;
}

static int slot_get(void)
{
	for (int k = 0; k < MAX_OUT; k++) {
		int i = (free_hint + k) % MAX_OUT;

		if (!outs[i].used) {
			free_hint = i + 1;
			return i;
		}
	}
	return -1;
}

static void check_cqe(const struct io_uring_cqe *c)
{
	int slot = (int)(c->user_data & ((1U << SLOT_BITS) - 1));
	struct expect *e = &outs[slot];

	if (slot >= MAX_OUT || !e->used || e->index != c->user_data >> SLOT_BITS) {
		fail(c->user_data >> SLOT_BITS, "CQE with unknown user_data %#llx (res %d)",
		     (unsigned long long)c->user_data, c->res);
		return;
	}
	if (opt_verbose)
		printf("# %" PRIu64 ": %s -> %s\n", e->index, e->desc, errname(c->res));
	if ((e->exact ? c->res != e->want : !allowed(e->mask, c->res)) &&
	    e->gone && e->comm_id && c->res == -EINVAL) {
		/*
		 * Its communicator was destroyed after the command was
		 * submitted: one not yet issued (IOSQE_ASYNC: io-wq issues it
		 * later) finds no such communicator, rightly.
		 */
		st.gone_einval++;
	} else if (e->exact ? c->res != e->want : !allowed(e->mask, c->res)) {
		fail(e->index, "%s%s%s: got %s, want %s", e->desc, e->async ? " async" : "",
		     e->gone ? " (comm destroyed since)" : "", errname(c->res),
		     e->exact ? errname(e->want) : "an allowed class");
	} else if (e->op == NZ_CMD_SEND && c->res >= 0 && (uint64_t)c->res != e->len &&
		 e->len <= INT32_MAX)
		fail(e->index, "%s: SEND completed with %d bytes of %" PRIu64,
		     e->desc, c->res, e->len);
	e->used = false;
	nout--;
}

static void submit_batch(void)
{
	int ret;

	if (!batch)
		return;
	op_begin(0, "io_uring_submit");
	ret = io_uring_submit(&ring);
	op_end();
	if (ret < 0)
		fail(0, "io_uring_submit: %s", strerror(-ret));
	batch = 0;
}

/* Reap what is there; with wait, also wait up to wait_s for one. */
static int reap(double wait_s)
{
	struct io_uring_cqe *c;
	int n = 0;

	submit_batch();
	for (;;) {
		int ret;

		if (wait_s > 0 && !n) {
			struct __kernel_timespec ts = {
				.tv_sec = (long)wait_s,
				.tv_nsec = (long)((wait_s - (long)wait_s) * 1e9),
			};

			ret = io_uring_wait_cqe_timeout(&ring, &c, &ts);
		} else {
			ret = io_uring_peek_cqe(&ring, &c);
		}
		if (ret)
			return n;
		check_cqe(c);
		io_uring_cqe_seen(&ring, c);
		n++;
	}
}

/* Every command whose deadline passed is a hang. */
static void check_deadlines(void)
{
	double t = now_s();

	for (int i = 0; i < MAX_OUT; i++) {
		struct expect *e = &outs[i];

		if (e->used && e->deadline && t > e->deadline) {
			fail(e->index, "%s: no completion by its deadline",
			     e->desc);
			e->deadline = 0;	/* report once */
		}
	}
}

/* A communicator went: its commands must now complete soon. */
static void comm_gone(uint32_t id)
{
	double t = now_s() + opt_hang_s;

	for (int i = 0; i < MAX_OUT; i++) {
		if (!outs[i].used || (id && outs[i].comm_id != id))
			continue;
		outs[i].gone = true;
		if (!outs[i].deadline || outs[i].deadline > t)
			outs[i].deadline = t;
	}
}

/* Wait until nothing is in flight, or report what is stuck. */
static void drain(double max_s)
{
	double end = now_s() + max_s;

	while (nout && now_s() < end) {
		reap(0.2);
		check_deadlines();
	}
	if (nout) {
		for (int i = 0; i < MAX_OUT; i++)
			if (outs[i].used) {
				fail(outs[i].index, "%s: still in flight after %.0f s",
				     outs[i].desc, max_s);
				outs[i].used = false;
			}
		nout = 0;
	}
}

/* ---- generating one SQE ------------------------------------------------- */

static void gen_sqe(struct rng *r, uint64_t index)
{
	static const uint32_t ops[] = { NZ_CMD_SEND, NZ_CMD_SEND, NZ_CMD_SEND,
		NZ_CMD_RECV, NZ_CMD_RECV, NZ_CMD_RECV, NZ_CMD_NOP, NZ_CMD_NOP,
		NZ_CMD_VERSION, NZ_CMD_CANCEL };
	struct nz_sqe p;
	struct io_uring_sqe *sqe;
	struct expect *e;
	struct comm *c = NULL;
	uint32_t op, allowed_flags = 0, payload = 0, fixed_idx = 0;
	bool comm_op, fixed = false, reject = false, noise = false;
	enum acls acls = AC_GOOD;
	int slot, fd = dmain.fd;
	struct dev *target = &dmain;
	char *d;

	if (nout >= MAX_OUT - 64)
		reap(1.0);
	if (nout >= MAX_OUT - 64) {
		st.filtered++;
		return;
	}
	slot = slot_get();
	if (slot < 0)
		return;
	e = &outs[slot];
	memset(e, 0, sizeof(*e));
	d = e->desc;
	memset(&p, 0, sizeof(p));

	op = pm(r, 900) ? ops[below(r, sizeof(ops) / sizeof(ops[0]))] :
	     pm(r, 500) ? below(r, 0x20) : (uint32_t)edge64(r);
	switch (op) {
	case NZ_CMD_NOP:
		allowed_flags = NZ_NOP_FLAGS;
		payload = sizeof(struct nz_sqe_nop);
		break;
	case NZ_CMD_VERSION:
		payload = sizeof(struct nz_sqe_version);
		break;
	case NZ_CMD_SEND:
	case NZ_CMD_RECV:
	case NZ_CMD_CANCEL:
		payload = sizeof(struct nz_sqe_xfer);
		break;
	default:
		reject = true;
		break;
	}
	comm_op = op == NZ_CMD_SEND || op == NZ_CMD_RECV || op == NZ_CMD_CANCEL;

	/* which file */
	if (pm(r, 30)) {
		fd = dother.fd;
		target = &dother;
	} else if (pm(r, 5)) {
		fd = pipefd[0];
		target = NULL;
	}

	/* flags */
	if (op == NZ_CMD_NOP)
		p.flags = below(r, 4);
	if (pm(r, 60))
		p.flags |= pm(r, 500) ? 1U << below(r, 32) : (uint32_t)rnd(r);
	if (p.flags & ~allowed_flags)
		reject = true;

	/* communicator */
	if (comm_op || pm(r, 30)) {
		unsigned int k = below(r, 10);

		if (k < 7 && dmain.ncomms) {
			c = &dmain.comms[below(r, (uint32_t)dmain.ncomms)];
			p.comm_id = c->id;
		} else if (k < 8) {
			p.comm_id = 0;
		} else {
			p.comm_id = pm(r, 500) ? below(r, 64) : (uint32_t)rnd(r);
			c = comm_by_id(&dmain, p.comm_id);
		}
		if (target != &dmain)
			c = NULL;	/* ids are per file */
		if (!comm_op && p.comm_id)
			reject = true;
	}

	/* reserved and padding */
	if (pm(r, 30)) {
		p.rsvd = pm(r, 500) ? 1ULL << below(r, 64) : rnd(r);
		reject |= p.rsvd != 0;
	}
	if (pm(r, 30)) {
		uint32_t at = payload + below(r, 64 - payload + 1);

		if (at < 64) {
			p.__pad[at] = (uint8_t)(1 + below(r, 255));
			reject = true;
		}
	}

	/* fixed buffers */
	if (pm(r, comm_op ? 150 : 20)) {
		fixed = true;
		fixed_idx = pm(r, 800) ? below(r, NREG) :
			    pm(r, 500) ? NREG + below(r, 4) : below(r, 65536);
		if (!comm_op || op == NZ_CMD_CANCEL)
			reject = true;
	}

	/* payload */
	if (op == NZ_CMD_NOP || (!comm_op && op != NZ_CMD_VERSION && pm(r, 500))) {
		struct nz_sqe_nop *n = &p.nop;

		n->result = pm(r, 500) ? -(int32_t)below(r, 140) : (int32_t)rnd(r);
		n->delay_us = pm(r, 600) ? 0 : pm(r, 900) ? below(r, 20000) :
			      NZ_NOP_MAX_DELAY_US + below(r, 3) - 1;
		n->res2 = pm(r, 500) ? 0 : rnd(r);
		if (pm(r, 300))
			n->result = 0;
		if (!reject && op == NZ_CMD_NOP) {
			bool inj = p.flags & NZ_NOP_F_RESULT;
			bool def = p.flags & NZ_NOP_F_DEFER;

			if ((!inj && (n->result || n->res2)) ||
			    (!def && n->delay_us) || n->delay_us > NZ_NOP_MAX_DELAY_US)
				reject = true;
			else {
				e->exact = true;
				e->want = inj ? n->result : 0;
			}
		}
		snprintf(d, sizeof(e->desc), "NOP flags %#x res %d delay %u res2 %#" PRIx64,
			 p.flags, n->result, n->delay_us, (uint64_t)n->res2);
	} else if (op == NZ_CMD_VERSION) {
		struct nz_sqe_version *v = &p.version;

		v->len = pm(r, 800) ? sizeof(struct nz_version) + below(r, 64) :
			 (uint32_t)edge64(r);
		v->addr = gen_addr(r, sizeof(struct nz_version), &acls);
		if (pm(r, 30))
			v->rsvd = (uint32_t)rnd(r) | 1;
		if (!reject) {
			e->exact = true;
			if (v->rsvd || v->len < sizeof(struct nz_version))
				reject = true;
			else if (acls == AC_GOOD)
				e->want = sizeof(struct nz_version);
			else if (acls == AC_BAD || acls == AC_RO)
				e->want = -EFAULT;
			else
				e->exact = false, e->mask = A_OK | A(EFAULT);
		}
		snprintf(d, sizeof(e->desc), "VERSION addr %#" PRIx64 " len %u rsvd %u",
			 (uint64_t)v->addr, v->len, v->rsvd);
	} else {
		struct nz_sqe_xfer *x = &p.xfer;
		uint64_t base;

		x->len = gen_len(r);
		if (fixed && fixed_idx < NREG && pm(r, 800)) {
			base = (uintptr_t)reg[fixed_idx];
			if (x->len > REG_LEN && pm(r, 700))
				x->len = below(r, REG_LEN + 1);
			x->addr = base + (pm(r, 800) ? below(r, (uint32_t)(REG_LEN - (x->len < REG_LEN ? x->len : REG_LEN)) + 1) :
					  below(r, 2 * REG_LEN));
			acls = x->addr + x->len <= base + REG_LEN && x->addr >= base ? AC_GOOD : AC_BAD;
		} else {
			x->addr = gen_addr(r, x->len, &acls);
			if (fixed)
				acls = AC_MAYBE;
		}
		if (!c || pm(r, 50))
			x->peer = pm(r, 500) ? below(r, 8) : (uint32_t)edge64(r);
		else
			x->peer = pm(r, 950) ? (c->rank + 1 + below(r, c->size - 1 ? c->size - 1 : 1)) % c->size :
				  c->rank;
		x->tag = pm(r, 800) ? below(r, 4) : rnd(r);
		x->timeout_ms = pm(r, 100) ? 0 : pm(r, 850) ? 1 + below(r, 300) :
				pm(r, 700) ? 1 + below(r, 3000) : (uint32_t)edge64(r);
		snprintf(d, sizeof(e->desc), "%s %#x comm %u peer %u addr %#" PRIx64 " len %#" PRIx64 " tag %#" PRIx64 " tmo %u%s%u",
			 op == NZ_CMD_SEND ? "SEND" : op == NZ_CMD_RECV ? "RECV" :
			 op == NZ_CMD_CANCEL ? "CANCEL" : "op", op,
			 p.comm_id, x->peer,
			 (uint64_t)x->addr, (uint64_t)x->len, (uint64_t)x->tag,
			 x->timeout_ms, fixed ? " fixed " : " ", fixed_idx);
		if (!reject && target) {
			bool live = c && comm_by_id(target, p.comm_id);
			bool peer_ok = live && x->peer < c->size && x->peer != c->rank;

			e->mask = XFER_ERRS | A_OK;
			/* a timeout past a communicator's longest: refused */
			if (!live || !peer_ok || x->timeout_ms > MAX_TMO) {
				e->exact = true;
				e->want = -EINVAL;
			} else if (fixed && fixed_idx >= NREG) {
				e->exact = true;
				e->want = -EFAULT;
			} else if (x->len > max_len) {
				/* SEND and RECV alike, before anything is allocated */
				e->exact = true;
				e->want = -EMSGSIZE;
			} else if (!fixed && x->len &&
				   (x->addr + x->len < x->addr || x->addr + x->len > TASK_TOP)) {
				e->exact = true;
				e->want = -EFAULT;
			} else if (x->len && (acls == AC_BAD || acls == AC_RO) &&
				   !(acls == AC_RO && op == NZ_CMD_SEND)) {
				/* ENOMEM: the pin is charged (RLIMIT_MEMLOCK) first */
				e->mask = A(EFAULT) | A(EINVAL) | A(ENOMEM);
			}
			/* a RECV over memory not ours: maybe a shared file mapping */
			if (op == NZ_CMD_RECV && acls != AC_GOOD)
				e->mask |= A(EOPNOTSUPP);
			e->len = x->len;
			if (op == NZ_CMD_SEND && x->len > INT32_MAX)
				e->mask &= ~A_OK;
			if (op == NZ_CMD_CANCEL) {
				/* How many it cancelled, or EINVAL (a buffer
				 * or timeout given, no such comm or peer). */
				e->exact = false;
				e->mask = A_OK | A(EINVAL);
			}
		}
	}
	if (reject) {
		e->exact = true;
		e->want = -EINVAL;
	}
	if (!target) {	/* not the device: io_uring refuses */
		e->exact = false;
		e->mask = A(EOPNOTSUPP);
	}

	sqe = io_uring_get_sqe(&ring);
	if (!sqe) {
		submit_batch();
		sqe = io_uring_get_sqe(&ring);
		if (!sqe) {
			st.filtered++;
			return;
		}
	}
	memset(sqe, 0, sizeof(*sqe));	/* the rest: the payload below */
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = fd;
	sqe->cmd_op = op;
	if (fixed) {
		sqe->uring_cmd_flags = IORING_URING_CMD_FIXED;
		sqe->buf_index = (uint16_t)fixed_idx;
	}
	if (pm(r, 10)) {	/* io_uring's own flags of a command */
		sqe->uring_cmd_flags |= 1U << (1 + below(r, 31));
		noise = true;
	}
	if (pm(r, 20))
		sqe->flags |= IOSQE_ASYNC;
	e->async = sqe->flags & IOSQE_ASYNC;
	if (pm(r, 10)) {	/* fields of the SQE a command does not use */
		sqe->addr = rnd(r);
		sqe->len = (uint32_t)rnd(r);
	}
	memcpy(sqe->cmd, &p, sizeof(p));
	sqe->user_data = (index << SLOT_BITS) | (uint64_t)slot;
	/* io_uring's preparation comes first: its flags, then the index */
	if (noise) {
		e->exact = true;
		e->want = -EINVAL;
	} else if (fixed && fixed_idx >= NREG) {
		e->exact = true;
		e->want = -EFAULT;
	}
	if (e->exact)
		e->mask = 0;
	e->used = true;
	e->index = index;
	e->op = op;
	e->comm_id = c && target == &dmain ? c->id : 0;
	if (comm_op && !e->exact) {
		uint32_t tmo = p.xfer.timeout_ms ? p.xfer.timeout_ms :
			       c ? c->timeout_ms : NZ_DEFAULT_TIMEOUT_MS;

		/* peers that never answer: bounded by the timeout and the grace */
		e->deadline = tmo > 60000 ? 0 :
			      now_s() + tmo / 1000.0 + hb0[2] / 1000.0 + opt_hang_s;
	} else {
		e->deadline = now_s() + opt_hang_s + 1;
	}
	nout++;
	batch++;
	st.sqe++;
	if (batch >= 16 || opt_replay)
		submit_batch();
}

/* ---- ioctls ------------------------------------------------------------- */

/* Where an ioctl's argument lives: *cls as gen_addr(). */
static void *arg_place(struct rng *r, size_t len, enum acls *cls)
{
	switch (below(r, 20)) {
	case 0:
		*cls = AC_BAD;
		return NULL;
	case 1:
		*cls = AC_BAD;
		return (void *)(uintptr_t)(KADDR + below(r, 4096));
	case 2:
		*cls = AC_PARTIAL;
		return argm + ARG_LEN - 1 - below(r, (uint32_t)len - 1);
	case 3:
		*cls = AC_RO;
		return ro;
	default:
		*cls = AC_GOOD;
		return argm + (pm(r, 200) ? 1 + below(r, 7) : 0) + 4096 * below(r, 2);
	}
}

static long do_ioctl(int fd, unsigned long nr, void *arg, uint64_t index,
		     const char *what)
{
	long ret;

	op_begin(index, what);
	ret = ioctl(fd, nr, arg);
	op_end();
	return ret < 0 ? -errno : ret;
}

static void comm_add(struct dev *d, const struct nz_comm_create *cc,
		     uint64_t index, bool pair)
{
	struct comm *c = &d->comms[d->ncomms++];

	c->id = cc->comm_id;
	c->rank = cc->rank;
	c->size = cc->size;
	c->nrails = cc->nrails;
	c->timeout_ms = cc->timeout_ms ? cc->timeout_ms : NZ_DEFAULT_TIMEOUT_MS;
	c->job = cc->job_id;
	c->born = index;
	c->pair = pair;
	st.creates_ok++;
}

static void comm_del(struct dev *d, uint32_t id)
{
	for (int i = 0; i < d->ncomms; i++)
		if (d->comms[i].id == id) {
			d->comms[i] = d->comms[--d->ncomms];
			break;
		}
	comm_gone(id);
	st.destroys++;
}

static long destroy(struct dev *d, uint32_t id, uint64_t index)
{
	static uint32_t *idp;
	char what[64];
	long ret;

	if (!idp)
		idp = (uint32_t *)(argm + 3 * 4096);
	*idp = id;
	snprintf(what, sizeof(what), "COMM_DESTROY %u", id);
	ret = do_ioctl(d->fd, NZ_IOC_COMM_DESTROY, idp, index, what);
	if (!ret)
		comm_del(d, id);
	return ret;
}

/* Two ranks of one job in this process: rank 1 connects to rank 0. */
static void create_pair(struct rng *r, uint64_t index)
{
	struct nz_comm_create *cc = (void *)(argm + 2 * 4096);
	int idx[NZ_MAX_RAILS];
	uint32_t nr = 1 + below(r, (uint32_t)(rails_existing() < 2 ? 1 : 2));
	uint64_t job = JOB_MAIN | 0x1000 | below(r, 64);
	long ret;

	if (dmain.ncomms > MAX_COMMS - 2 || job_taken(job, 0) ||
	    job_taken(job, 1))
		return;
	memset(cc, 0, sizeof(*cc));
	cc->job_id = job;
	for (int i = 0; i < NZ_SECRET_LEN; i++)
		cc->secret[i] = (uint8_t)rnd(r);
	cc->size = 2;
	cc->nrails = nr;
	if (!pick_rails(r, cc, nr, idx, true))
		return;
	cc->unit = pm(r, 500) ? 0 : 4096U << below(r, 5);
	cc->timeout_ms = 500 + below(r, 3000);
	for (uint32_t k = 0; k < 2; k++)
		for (uint32_t s = 0; s < nr; s++) {
			addr_tab[k * nr + s].addr = rails[idx[s]].addr;
			addr_tab[k * nr + s].port = htons(rails[idx[s]].port);
			addr_tab[k * nr + s].rsvd = 0;
		}
	cc->addrs = (uintptr_t)addr_tab;
	for (uint32_t k = 0; k < 2; k++) {
		cc->rank = k;
		cc->comm_id = 0;
		ret = do_ioctl(dmain.fd, NZ_IOC_COMM_CREATE, cc, index, "COMM_CREATE pair");
		if (ret) {
			fail(index, "COMM_CREATE of a pair, rank %u: %s", k, errname(ret));
			return;
		}
		comm_add(&dmain, cc, index, true);
	}
	st.pairs++;
}

static void gen_ioctl(struct rng *r, uint64_t index)
{
	struct dev *d = pm(r, 100) ? &dother : &dmain;
	enum acls cls;
	char what[160];
	long ret, want;
	emask mask = 0;
	unsigned int k = below(r, 100);

	st.ioctl++;
	if (k < 30) {			/* COMM_CREATE */
		struct nz_comm_create *cc = arg_place(r, sizeof(*cc), &cls);
		struct nz_comm_create tmp;
		enum acls tcls = AC_GOOD;
		bool late = false, valid;

		valid = gen_create_valid(r, &tmp, JOB_MAIN);
		if (!valid)
			memset(&tmp, 0, sizeof(tmp));
		if (pm(r, 60) && neigh_pid) {	/* the neighbour's job */
			tmp.job_id = neigh_jobs[below(r, 4)];
			tmp.rank = 0;
		}
		/* mutate: each field at its edges */
		if (pm(r, 400)) {
			switch (below(r, 12)) {
			case 0: tmp.size = (uint32_t)edge64(r); break;
			case 1: tmp.rank = (uint32_t)edge64(r); break;
			case 2: tmp.nrails = (uint32_t)edge64(r) % 12; break;
			case 3: tmp.unit = (uint32_t)edge64(r); break;
			case 4: tmp.timeout_ms = MAX_TMO + below(r, 3) - 1; break;
			case 5: tmp.rsvd[below(r, 3)] = rnd(r) | 1; break;
			case 6: memset(tmp.rails[below(r, NZ_MAX_RAILS)], 'a' + below(r, 26),
				       below(r, 2) ? NZ_RAIL_NAME_LEN : 1 + below(r, 15));
				break;
			case 7: snprintf(tmp.rails[below(r, tmp.nrails ? tmp.nrails : 1)],
					 NZ_RAIL_NAME_LEN, "nosuch%u", below(r, 9));
				break;
			case 8: if (tmp.nrails > 1)
					memcpy(tmp.rails[1], tmp.rails[0], NZ_RAIL_NAME_LEN);
				break;
			case 9: {
				uint64_t n = (uint64_t)tmp.size * tmp.nrails;

				if (n && n <= NZ_MAX_RANKS * 2) {
					struct nz_comm_addr *a = &addr_tab[below(r, (uint32_t)n)];

					switch (below(r, 3)) {
					case 0: a->port = 0; break;
					case 1: a->addr = 0; break;
					default: a->rsvd = (uint16_t)(1 + below(r, 65535)); break;
					}
				}
				break;
			}
			case 10:
				tmp.addrs = gen_addr(r, 8, &tcls);
				if (tcls != AC_BAD)
					tcls = AC_MAYBE;
				break;
			default: {
				/* the table runs into the guard page: at least its
				 * last entry is there, whatever its length */
				uint64_t n = (uint64_t)tmp.size * tmp.nrails;

				tmp.addrs = (uintptr_t)big + BIG_LEN -
					    8 * below(r, n && n < 4 ? (uint32_t)n : 4);
				if (n < 4 && n * 8 > BIG_LEN - (tmp.addrs - (uintptr_t)big))
					tcls = AC_BAD;
				else if (n >= 4)
					tcls = AC_BAD;
				else
					tcls = AC_MAYBE;
				break;
			}
			}
		}
		snprintf(what, sizeof(what), "COMM_CREATE job %#" PRIx64 " rank %u size %u nrails %u unit %u tmo %u rails %s,%s arg %d",
			 (uint64_t)tmp.job_id, tmp.rank, tmp.size, tmp.nrails, tmp.unit,
			 tmp.timeout_ms, tmp.rails[0], tmp.rails[1], cls);
		if (cls == AC_BAD || cls == AC_PARTIAL) {
			want = -EFAULT;
		} else if (!create_check_ok(&tmp)) {
			want = -EINVAL;
		} else {
			if (tmp.addrs == (uintptr_t)addr_tab &&
			    (uint64_t)tmp.size * tmp.nrails > NZ_MAX_RANKS * 2)
				tcls = AC_MAYBE;
			want = create_outcome(&tmp, tcls, &late);
			if (tcls == AC_MAYBE)
				want = 1;	/* any of the create errors */
			(void)late;	/* fixed on main: these end in clean errors */
			if (!want && cls == AC_RO)
				want = -EFAULT;	/* created, then comm_id not written */
			/* a success costs a destroy: only into a free slot */
			if (!want && (d != &dmain || dmain.ncomms >= MAX_COMMS)) {
				st.filtered++;
				return;
			}
		}
		if (cls == AC_GOOD)
			memcpy(cc, &tmp, sizeof(tmp));
		/* ro is read-only: the module reads zeros there */
		if (cls == AC_RO) {
			want = 1;
			mask = A(EFAULT) | A(EINVAL);
		}
		ret = do_ioctl(d->fd, NZ_IOC_COMM_CREATE, cc, index, what);
		if (want == 1) {
			if (!mask)
				mask = A(ENODEV) | A(EINVAL) | A(EFAULT) | A(EEXIST) |
				       A(EPROTOTYPE) | A_OK;
			if (!allowed(mask, ret))
				fail(index, "%s: got %s", what, errname(ret));
		} else if (ret != want) {
			const struct nz_comm_addr *t = (const void *)(uintptr_t)tmp.addrs;
			bool tab = tmp.addrs == (uintptr_t)addr_tab;

			fail(index, "%s: got %s, want %s (table %s: %08x:%u/%u %08x:%u/%u)", what,
			     errname(ret), errname(want), tab ? "ours" : "elsewhere",
			     tab ? t[0].addr : 0, tab ? t[0].port : 0, tab ? t[0].rsvd : 0,
			     tab ? t[tmp.nrails].addr : 0, tab ? t[tmp.nrails].port : 0,
			     tab ? t[tmp.nrails].rsvd : 0);
		}
		if (!ret && cls == AC_GOOD) {
			if (!cc->comm_id || comm_by_id(d, cc->comm_id))
				fail(index, "%s: comm_id %u not new", what, cc->comm_id);
			if (d == &dother) {
				/* keep dother empty */
				destroy(d, cc->comm_id, index);
			} else if (d->ncomms < MAX_COMMS) {
				comm_add(d, cc, index, false);
				if (cc->size > 4)	/* many peers: do not keep */
					destroy(d, cc->comm_id, index);
			} else {	/* no slot: the fuzzer must know every one */
				destroy(d, cc->comm_id, index);
			}
		}
	} else if (k < 35) {
		create_pair(r, index);
	} else if (k < 50) {		/* COMM_WAIT */
		struct nz_comm_wait *w = arg_place(r, sizeof(*w), &cls);
		struct nz_comm_wait tmp = { 0 };
		struct comm *c = d->ncomms && pm(r, 800) ?
				 &d->comms[below(r, (uint32_t)d->ncomms)] : NULL;

		tmp.comm_id = c ? c->id : pm(r, 500) ? 0 : (uint32_t)rnd(r) % 100;
		c = comm_by_id(d, tmp.comm_id);
		tmp.timeout_ms = pm(r, 950) ? below(r, 20) : pm(r, 500) ? below(r, 200) :
				 MAX_TMO + below(r, 3) - 1;
		if (pm(r, 30))
			tmp.rsvd = rnd(r) | 1;
		if (cls == AC_BAD || cls == AC_PARTIAL) {
			want = -EFAULT;
		} else if (tmp.rsvd || tmp.timeout_ms > MAX_TMO || !c) {
			want = -EINVAL;
		} else {
			want = 1;
			mask = A_OK | A(ETIMEDOUT) | (cls == AC_RO ? A(EFAULT) : 0);
			if (tmp.timeout_ms > 200)
				tmp.timeout_ms = 200;
		}
		if (cls == AC_RO)
			want = 1, mask = A(EFAULT) | A(EINVAL) | A_OK | A(ETIMEDOUT);
		else if (cls == AC_GOOD)
			*w = tmp;
		snprintf(what, sizeof(what), "COMM_WAIT comm %u tmo %u rsvd %#" PRIx64 " arg %d",
			 tmp.comm_id, tmp.timeout_ms, (uint64_t)tmp.rsvd, cls);
		ret = do_ioctl(d->fd, NZ_IOC_COMM_WAIT, w, index, what);
		if (want == 1 ? !allowed(mask, ret) : ret != want)
			fail(index, "%s: got %s", what, errname(ret));
		else if (!ret && cls == AC_GOOD && c && w->up < w->expected)
			fail(index, "%s: 0 but up %u < expected %u", what, w->up, w->expected);
	} else if (k < 62) {		/* COMM_DESTROY */
		uint32_t *idp = arg_place(r, 4, &cls);
		uint32_t id = d->ncomms && pm(r, 30) ? d->comms[below(r, (uint32_t)d->ncomms)].id :
			      pm(r, 500) ? below(r, 100) : (uint32_t)rnd(r);

		if (cls == AC_PARTIAL) {
			idp = (uint32_t *)(argm + ARG_LEN - 4);
			cls = AC_GOOD;
		}
		if (cls == AC_GOOD)
			*idp = id;
		else if (cls == AC_RO)
			id = *idp;
		want = cls == AC_BAD ? -EFAULT : comm_by_id(d, id) ? 0 : -EINVAL;
		snprintf(what, sizeof(what), "COMM_DESTROY %u arg %d", id, cls);
		ret = do_ioctl(d->fd, NZ_IOC_COMM_DESTROY, idp, index, what);
		if (ret != want)
			fail(index, "%s: got %s, want %s", what, errname(ret), errname(want));
		if (!ret)
			comm_del(d, id);
	} else if (k < 72) {		/* RAIL_LIST */
		struct nz_rail_list *l = arg_place(r, sizeof(*l), &cls);
		struct nz_rail_list tmp = { 0 };
		enum acls rc = AC_GOOD;
		uint32_t n = (uint32_t)rails_existing();

		tmp.count = pm(r, 800) ? below(r, 12) : (uint32_t)edge64(r);
		tmp.rails = gen_addr(r, sizeof(struct nz_rail_info) * (tmp.count < 8 ? tmp.count : 8), &rc);
		if (pm(r, 30))
			tmp.rsvd = (uint32_t)rnd(r) | 1;
		if (cls == AC_BAD || cls == AC_PARTIAL)
			want = -EFAULT;
		else if (cls == AC_RO)
			want = 1, mask = A(EFAULT) | A(EINVAL);
		else if (tmp.rsvd)
			want = -EINVAL;
		else if ((tmp.count < n ? tmp.count : n) && rc != AC_GOOD)
			want = rc == AC_MAYBE || rc == AC_PARTIAL ?
			       (mask = A_OK | A(EFAULT), 1) : -EFAULT;
		else
			want = 0;
		if (cls == AC_GOOD)
			*l = tmp;
		snprintf(what, sizeof(what), "RAIL_LIST count %u rails %#" PRIx64 " rsvd %u arg %d",
			 tmp.count, (uint64_t)tmp.rails, tmp.rsvd, cls);
		ret = do_ioctl(d->fd, NZ_IOC_RAIL_LIST, l, index, what);
		if (want == 1 ? !allowed(mask, ret) : ret != want)
			fail(index, "%s: got %s, want %s", what, errname(ret), errname(want));
		else if (!ret && cls == AC_GOOD && l->count != n)
			fail(index, "%s: %u rails, the fuzzer counts %u", what, l->count, n);
	} else if (k < 77) {		/* VERSION */
		struct nz_version *v = arg_place(r, sizeof(*v), &cls);

		want = cls == AC_GOOD ? 0 : -EFAULT;
		snprintf(what, sizeof(what), "IOC_VERSION arg %d", cls);
		ret = do_ioctl(d->fd, NZ_IOC_VERSION, v, index, what);
		if (ret != want)
			fail(index, "%s: got %s", what, errname(ret));
		else if (!ret && v->abi_version != NZ_ABI_VERSION)
			fail(index, "%s: abi %u", what, v->abi_version);
	} else {			/* a number the module does not know */
		static const unsigned long known[] = { NZ_IOC_VERSION, NZ_IOC_RAIL_LIST,
			NZ_IOC_COMM_CREATE, NZ_IOC_COMM_WAIT, NZ_IOC_COMM_DESTROY };
		unsigned long nr;
		unsigned int type;
		void *arg = arg_place(r, 64, &cls);
		bool is_known = false;

		do {	/* not a type the VFS itself handles for every file */
			type = pm(r, 700) ? NZ_IOC_MAGIC : below(r, 256);
		} while (type == 'T' || type == 'X' || type == 'f' || type == 0x94 ||
			 type == 0 || type == 0x12 || type == 'F');
		nr = _IOC(below(r, 4), type, pm(r, 600) ? below(r, 8) : below(r, 256),
			  pm(r, 500) ? (sizeof(struct nz_comm_create) + below(r, 3) - 1) :
			  below(r, 1 << 14));
		for (unsigned int i = 0; i < 5; i++)
			is_known |= nr == known[i];
		if (is_known)
			return;
		snprintf(what, sizeof(what), "ioctl %#lx", nr);
		ret = do_ioctl(d->fd, nr, arg, index, what);
		if (ret != -ENOTTY)
			fail(index, "%s: got %s, want -ENOTTY", what, errname(ret));
	}
	(void)mask;
}

/* ---- netlink ------------------------------------------------------------ */

static const char *gen_name(struct rng *r, char *buf, size_t len)
{
	static const char ok_chars[] =
		"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-";

	switch (below(r, 8)) {
	case 0:
	case 1:
	case 2:
		snprintf(buf, len, "fz%u", below(r, 4));
		break;
	case 3:
		snprintf(buf, len, "%.15s", rails[below(r, (uint32_t)nrails)].name);
		break;
	case 4: {
		size_t n = below(r, 2) ? 15 + below(r, 3) : 1 + below(r, 14);

		for (size_t i = 0; i < n && i + 1 < len; i++)
			buf[i] = ok_chars[below(r, sizeof(ok_chars) - 1)];
		buf[n < len ? n : len - 1] = 0;
		break;
	}
	case 5:
		buf[0] = 0;
		break;
	default: {
		size_t n = 1 + below(r, 20);

		for (size_t i = 0; i < n && i + 1 < len; i++)
			buf[i] = (char)(1 + below(r, 255));
		buf[n < len ? n : len - 1] = 0;
		break;
	}
	}
	return buf;
}

/* Random attributes, some nested, some with broken lengths. */
static void nl_garbage(struct rng *r, struct nlbuf *m, int depth)
{
	unsigned int n = below(r, 6);

	for (unsigned int i = 0; i < n; i++) {
		uint16_t type = pm(r, 800) ? (uint16_t)below(r, NZ_A_MAX + 3) : (uint16_t)rnd(r);
		uint8_t data[300];
		size_t len = pm(r, 700) ? below(r, 9) : below(r, sizeof(data));

		for (size_t j = 0; j < len; j++)
			data[j] = (uint8_t)rnd(r);
		if (depth < 4 && pm(r, 200)) {
			size_t at = m->len;
			struct nlattr *a = nl_put(m, type | NLA_F_NESTED, NULL, 0);

			if (!a)
				return;
			nl_garbage(r, m, depth + 1);
			a = (struct nlattr *)(m->b + at);
			a->nla_len = (uint16_t)(m->len - at);
			continue;
		}
		if (pm(r, 50))
			type |= NLA_F_NET_BYTEORDER;
		nl_put(m, type, data, len);
	}
}

/* A structurally right request with each value at an edge. */
static void nl_attrs(struct rng *r, struct nlbuf *m, uint8_t cmd, bool *mutating)
{
	char name[24];
	uint32_t v;

	*mutating = false;
	switch (cmd) {
	case NZ_CMD_RAIL_ADD: {
		struct rail *rl = &rails[below(r, (uint32_t)nrails)];
		uint16_t port = pm(r, 800) ? (uint16_t)(7600 + below(r, 8)) : (uint16_t)rnd(r);

		if (pm(r, 950))
			nl_put_str(m, NZ_A_RAIL_NAME, gen_name(r, name, sizeof(name)));
		v = pm(r, 850) ? NZ_PROTO_TCP : pm(r, 600) ? NZ_PROTO_AGG : (uint32_t)edge64(r);
		if (pm(r, 950))
			nl_put_u32(m, NZ_A_RAIL_PROTO, v);
		/* an aggregator: mostly this host (probes answered by none) */
		if (pm(r, v == NZ_PROTO_AGG ? 800 : 50)) {
			uint32_t a = pm(r, 700) ? htonl(0x7f000001) : (uint32_t)rnd(r);

			nl_put(m, NZ_A_RAIL_AGG_ADDR, &a, 4);
		}
		if (pm(r, v == NZ_PROTO_AGG ? 300 : 20)) {
			uint16_t ap = pm(r, 500) ? (uint16_t)(29600 + below(r, 4)) : (uint16_t)rnd(r);

			nl_put(m, NZ_A_RAIL_AGG_PORT, &ap, 2);
		}
		if (pm(r, 900))
			nl_put_str(m, NZ_A_RAIL_DEV, pm(r, 900) ? rl->dev :
				   pm(r, 500) ? "lo" : gen_name(r, name, sizeof(name)));
		if (pm(r, v == NZ_PROTO_AGG ? 200 : 800))
			nl_put(m, NZ_A_RAIL_PORT, &port, 2);
		if (pm(r, 200)) {
			v = pm(r, 500) ? rl->addr : (uint32_t)rnd(r);
			nl_put(m, NZ_A_RAIL_ADDR, &v, 4);
		}
		if (pm(r, 200))
			nl_put_u32(m, NZ_A_RAIL_WEIGHT, pm(r, 500) ? NZ_MAX_WEIGHT + below(r, 3) - 1 :
				   (uint32_t)edge64(r));
		if (pm(r, 100))
			nl_put_u32(m, NZ_A_RAIL_IBPORT, (uint32_t)edge64(r));
		if (pm(r, 100))
			nl_put_u32(m, NZ_A_RAIL_GID_INDEX, (uint32_t)edge64(r));
		if (pm(r, 100))
			nl_put_str(m, NZ_A_RAIL_NETDEV, gen_name(r, name, sizeof(name)));
		*mutating = true;
		break;
	}
	case NZ_CMD_RAIL_DEL:
	case NZ_CMD_RAIL_GET:
		if (pm(r, 950)) {
			gen_name(r, name, sizeof(name));
			/* deleting a rail the communicators use: rarely */
			if (cmd == NZ_CMD_RAIL_DEL && rail_find(name) &&
			    rail_find(name)->orig && !pm(r, 20))
				snprintf(name, sizeof(name), "fz9");
			nl_put_str(m, NZ_A_RAIL_NAME, name);
		}
		*mutating = cmd == NZ_CMD_RAIL_DEL;
		break;
	case NZ_CMD_RAIL_SET:
		if (pm(r, 950))
			nl_put_str(m, NZ_A_RAIL_NAME, gen_name(r, name, sizeof(name)));
		if (pm(r, 500))
			nl_put_u32(m, NZ_A_RAIL_WEIGHT, pm(r, 500) ? below(r, NZ_MAX_WEIGHT + 2) :
				   (uint32_t)edge64(r));
		if (pm(r, 500)) {
			uint8_t u = pm(r, 800) ? (uint8_t)below(r, 2) : (uint8_t)rnd(r);

			nl_put(m, NZ_A_RAIL_ADMIN, &u, 1);
		}
		*mutating = true;
		break;
	case NZ_CMD_HEALTH_SET:
		if (pm(r, 600))
			nl_put_u32(m, NZ_A_HB_INTERVAL_MS, pm(r, 500) ? 1 + below(r, 10000) :
				   (uint32_t)edge64(r));
		if (pm(r, 600))
			nl_put_u32(m, NZ_A_HB_MISSES, pm(r, 500) ? 2 + below(r, 99) :
				   (uint32_t)edge64(r));
		if (pm(r, 600))
			nl_put_u32(m, NZ_A_GRACE_MS, pm(r, 500) ? below(r, 3600001) :
				   (uint32_t)edge64(r));
		*mutating = true;
		break;
	default:
		break;
	}
}

/* After an accepted change: put back the rails and health of the test. */
static void nl_repair(uint64_t index)
{
	struct nz_rail_info info[NZ_MAX_RAILS];
	uint32_t n;
	int i, ret;

	if (ioc_rail_list(info, NZ_MAX_RAILS, &n))
		return;
	for (i = 0; i < nrails; i++)
		rails[i].exists = false;
	for (uint32_t k = 0; k < n && k < NZ_MAX_RAILS; k++) {
		struct rail *rl = rail_find(info[k].name);

		if (!rl && nrails < 16) {
			rl = &rails[nrails++];
			memset(rl, 0, sizeof(*rl));
			snprintf(rl->name, sizeof(rl->name), "%.15s", info[k].name);
			rl->addr = info[k].addr;
			rl->port = ntohs(info[k].port);
			dev_of_addr(rl->addr, rl->dev, sizeof(rl->dev));
		}
		if (!rl)
			continue;
		rl->exists = true;
		rl->agg = info[k].proto == NZ_PROTO_AGG;
	}
	for (i = 0; i < nrails; i++) {
		struct rail *rl = &rails[i];

		if (rl->orig && !rl->exists) {
			op_begin(index, "restore a deleted rail");
			ret = nl_rail_add(rl);
			op_end();
			if (ret)
				fail(index, "restoring rail %s: %s", rl->name, errname(ret));
			else
				rl->exists = true;
		}
	}
	if (n >= NZ_MAX_RAILS - 1) {
		for (i = 0; i < nrails; i++)
			if (!rails[i].orig && rails[i].exists) {
				op_begin(index, "delete a fuzzer's rail");
				if (!nl_rail_del(rails[i].name))
					rails[i].exists = false;
				op_end();
			}
	}
}

static void nl_rail_reset(const char *name)
{
	struct nlbuf m;
	uint8_t up = 1;

	nl_start(&m, nl_family, NZ_CMD_RAIL_SET, NLM_F_REQUEST | NLM_F_ACK, 6);
	nl_put_str(&m, NZ_A_RAIL_NAME, name);
	nl_put_u32(&m, NZ_A_RAIL_WEIGHT, NZ_DEFAULT_WEIGHT);
	nl_put(&m, NZ_A_RAIL_ADMIN, &up, 1);
	nl_talk(&m, false, (int)(opt_hang_s * 1000), NULL, NULL);
}

#define NL_ERRS (A(EINVAL) | A(ENOENT) | A(EEXIST) | A(ENODEV) | \
		 A(EADDRNOTAVAIL) | A(ENOSPC) | A(EPROTONOSUPPORT) | \
		 A(EOPNOTSUPP) | A(ERANGE) | A(EADDRINUSE) | A(EMSGSIZE) | \
		 A(ENOMEM) | A(ENOBUFS))

static uint64_t nl_changes;	/* accepted rail adds and dels */

static bool nl_admin_cmd(uint8_t cmd)
{
	return cmd == NZ_CMD_RAIL_ADD || cmd == NZ_CMD_RAIL_DEL ||
	       cmd == NZ_CMD_RAIL_SET || cmd == NZ_CMD_HEALTH_SET;
}

static void gen_netlink(struct rng *r, uint64_t index)
{
	struct nlbuf m;
	struct nlmsghdr *h = (struct nlmsghdr *)m.b;
	struct genlmsghdr *g = (struct genlmsghdr *)(m.b + NLMSG_HDRLEN);
	uint16_t flags = NLM_F_REQUEST | NLM_F_ACK;
	bool mutating = false, broken = false, keep = false;
	char what[128], name[NZ_RAIL_NAME_LEN] = "";
	uint8_t cmd;
	emask mask;
	int ret;

	st.netlink++;
	cmd = pm(r, 900) ? (uint8_t)(1 + below(r, NZ_CMD_GENL_MAX)) :
	      pm(r, 500) ? 0 : (uint8_t)rnd(r);
	if (pm(r, 40) || (cmd == NZ_CMD_RAIL_GET && pm(r, 300)))
		flags |= NLM_F_DUMP;
	if (pm(r, 20))
		flags = (uint16_t)(rnd(r) | NLM_F_REQUEST);
	nl_start(&m, nl_family, cmd, flags, (uint32_t)index | 0x40000000U);
	if (pm(r, 30))
		g->version = (uint8_t)rnd(r);
	if (pm(r, 30))
		g->reserved = (uint16_t)(rnd(r) | 1);
	if (pm(r, 800))
		nl_attrs(r, &m, cmd, &mutating);
	if (pm(r, 250))
		nl_garbage(r, &m, 0);
	/* the name of a structured request, for the budget and the repair */
	if (m.len > NLMSG_HDRLEN + GENL_HDRLEN) {
		struct nlattr *a = (struct nlattr *)(m.b + NLMSG_HDRLEN + GENL_HDRLEN);

		if (a->nla_type == NZ_A_RAIL_NAME && a->nla_len > NLA_HDRLEN)
			snprintf(name, sizeof(name), "%.*s", a->nla_len - NLA_HDRLEN,
				 (char *)a + NLA_HDRLEN);
	}
	{	/* printable in the log, the same bytes otherwise */
		char shown[NZ_RAIL_NAME_LEN];

		for (size_t i = 0; i < sizeof(shown); i++)
			shown[i] = name[i] && (name[i] < 0x20 || name[i] > 0x7e) ? '?' : name[i];
		snprintf(what, sizeof(what), "%.15s", shown);
	}
	/* Accepted rail adds and dels are slow: a budget keeps the rate. */
	if (priv && !g->reserved && nl_changes > 1 + st.netlink / 1000 &&
	    ((cmd == NZ_CMD_RAIL_DEL && rail_find(name) && rail_find(name)->exists) ||
	     (cmd == NZ_CMD_RAIL_ADD && name[0] &&
	      !(rail_find(name) && rail_find(name)->exists)))) {
		st.filtered++;
		return;
	}
	if (pm(r, 30)) {		/* lengths that lie */
		broken = true;
		switch (below(r, 3)) {
		case 0:
			m.len = NLMSG_HDRLEN + below(r, GENL_HDRLEN);
			break;
		case 1:
			if (m.len > NLMSG_HDRLEN + GENL_HDRLEN + 1)
				m.len -= 1 + below(r, (uint32_t)(m.len - NLMSG_HDRLEN - GENL_HDRLEN));
			break;
		default:
			h->nlmsg_len = (uint32_t)m.len + 1 + below(r, 100);
			keep = true;
			break;
		}
	}
	{
		char shown[NZ_RAIL_NAME_LEN];

		snprintf(shown, sizeof(shown), "%.15s", what);
		snprintf(what, sizeof(what), "netlink cmd %u flags %#x ver %u rsvd %u len %zu name '%s'%s",
			 cmd, h->nlmsg_flags, g->version, g->reserved, m.len, shown,
			 broken ? " broken" : "");
	}
	op_begin(index, what);
	ret = nl_talk(&m, keep, broken || !(flags & NLM_F_ACK) ? 200 :
		      (int)(opt_hang_s * 1000), NULL, NULL);
	op_end();
	if (opt_verbose)
		printf("# %" PRIu64 ": %s -> %s\n", index, what, ret == 1 ? "no answer" : errname(ret));
	if (broken || !(h->nlmsg_flags & NLM_F_ACK) || !(h->nlmsg_flags & NLM_F_REQUEST)) {
		mask = NL_ERRS | A_OK | A(EPERM);
	} else if (!priv && nl_admin_cmd(cmd) && !g->reserved &&
		   h->nlmsg_flags == (NLM_F_REQUEST | NLM_F_ACK)) {
		mask = A(EPERM);	/* before anything else is looked at */
	} else if (cmd < NZ_CMD_GET_INFO || cmd > NZ_CMD_HEALTH_SET) {
		mask = A(EOPNOTSUPP) | A(EINVAL);
	} else {
		mask = NL_ERRS | A_OK | (priv ? 0 : A(EPERM));
	}
	if (ret == 1 && !broken && (h->nlmsg_flags & NLM_F_ACK) &&
	    (h->nlmsg_flags & NLM_F_REQUEST))
		fail(index, "%s: no answer in %.0f s", what, opt_hang_s);
	else if (ret != 1 && !allowed(mask, ret))
		fail(index, "%s: got %s", what, errname(ret));
	if (priv && ret == 0 && (mutating || nl_admin_cmd(cmd))) {
		struct rail *rl = rail_find(name);

		if (cmd == NZ_CMD_RAIL_ADD || cmd == NZ_CMD_RAIL_DEL)
			nl_changes++;
		if (cmd == NZ_CMD_HEALTH_SET)
			nl_health_restore();
		if (cmd == NZ_CMD_RAIL_SET && rl && rl->orig)
			nl_rail_reset(rl->name);
		nl_repair(index);
	} else if (priv && (cmd == NZ_CMD_RAIL_ADD || cmd == NZ_CMD_RAIL_DEL)) {
		/*
		 * No ACK asked for (or none in time, or lengths that lie): the
		 * command may have taken effect without a word, so the rails
		 * are read back.  A definite error that changed them anyway is
		 * the module's fault.  (Until 2026-12-05 only ret 0 was read
		 * back: a rail added without an ACK went uncounted, and every
		 * RAIL_LIST after it "failed".)
		 */
		struct nz_rail_info info[NZ_MAX_RAILS];
		int before = rails_existing();
		uint32_t n;

		if (!ioc_rail_list(info, NZ_MAX_RAILS, &n) && (int)n != before) {
			if (ret < 0)
				fail(index, "%s: failed (%s) but the rails went from %d to %u",
				     what, errname(ret), before, n);
			nl_changes++;
			nl_repair(index);
		}
	}
}

/* ---- scenarios: races, kills, a ring or file replaced --------------------- */

struct race {
	int fd;			/* the file number every thread uses */
	atomic_bool stop;
	_Atomic uint32_t ids[8];
	uint64_t seed;
	_Atomic uint64_t ops, bad;
	char badmsg[200];
	pthread_mutex_t lock;
};

static void race_bad(struct race *rc, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void race_bad(struct race *rc, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&rc->lock);
	if (!rc->bad++) {
		va_start(ap, fmt);
		vsnprintf(rc->badmsg, sizeof(rc->badmsg), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&rc->lock);
}

static void *race_creator(void *arg)
{
	struct race *rc = arg;
	struct rng r = { rc->seed ^ 1 };
	struct nz_comm_create cc;
	struct nz_comm_addr tab[2 * NZ_MAX_RAILS];

	for (int i = 0; i < 20 && !rc->stop; i++) {
		unsigned int k = below(&r, 10);
		long ret;

		rc->ops++;
		if (k < 4) {
			memset(&cc, 0, sizeof(cc));
			cc.job_id = JOB_RACE | below(&r, 1 << 20);
			cc.rank = below(&r, 2);
			cc.size = 2;
			cc.nrails = 1;
			cc.timeout_ms = 100 + below(&r, 400);
			snprintf(cc.rails[0], NZ_RAIL_NAME_LEN, "%s", rails[0].name);
			for (int j = 0; j < 2; j++) {
				tab[j].addr = rails[0].addr;
				tab[j].port = htons(1);	/* refused at once */
				tab[j].rsvd = 0;
			}
			cc.addrs = (uintptr_t)tab;
			ret = ioctl(rc->fd, NZ_IOC_COMM_CREATE, &cc) ? -errno : 0;
			if (!ret)
				rc->ids[below(&r, 8)] = cc.comm_id;
			else if (ret != -EEXIST)
				race_bad(rc, "race: COMM_CREATE: %s", errname(ret));
		} else if (k < 8) {
			uint32_t id = pm(&r, 800) ? rc->ids[below(&r, 8)] : below(&r, 20);

			ret = ioctl(rc->fd, NZ_IOC_COMM_DESTROY, &id) ? -errno : 0;
			if (ret && ret != -EINVAL)
				race_bad(rc, "race: COMM_DESTROY %u: %s", id, errname(ret));
		} else {
			struct nz_comm_wait w = { .comm_id = rc->ids[below(&r, 8)],
						  .timeout_ms = below(&r, 3) };

			ret = ioctl(rc->fd, NZ_IOC_COMM_WAIT, &w) ? -errno : 0;
			if (ret && ret != -EINVAL && ret != -ETIMEDOUT &&
			    ret != -ECANCELED && ret != -EINTR)
				race_bad(rc, "race: COMM_WAIT: %s", errname(ret));
		}
	}
	return NULL;
}

static void *race_xfer(void *arg)
{
	struct race *rc = arg;
	struct rng r = { rc->seed ^ (uint64_t)pthread_self() };
	struct io_uring_params p = { .flags = IORING_SETUP_SQE128 };
	struct io_uring rg;
	struct io_uring_cqe *c;
	unsigned int inflight = 0;
	uint8_t *buf = big + 65536 * (1 + below(&r, 8));

	if (io_uring_queue_init_params(32, &rg, &p)) {
		race_bad(rc, "race: io_uring_queue_init failed");
		return NULL;
	}
	for (int i = 0; i < 150 && !rc->stop; i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&rg);
		struct nz_sqe s = { 0 };
		uint32_t op = below(&r, 3) ? NZ_CMD_SEND + below(&r, 2) : NZ_CMD_NOP;

		rc->ops++;
		if (!sqe)
			break;
		if (op == NZ_CMD_NOP) {
			s.flags = NZ_NOP_F_DEFER;
			s.nop.delay_us = below(&r, 5000);
		} else {
			s.comm_id = pm(&r, 800) ? rc->ids[below(&r, 8)] : below(&r, 20);
			s.xfer.addr = (uintptr_t)buf;
			s.xfer.len = below(&r, 65536);
			s.xfer.tag = below(&r, 3);
			s.xfer.peer = below(&r, 2);
			s.xfer.timeout_ms = 1 + below(&r, 300);
		}
		memset(sqe, 0, sizeof(*sqe));	/* the rest: the payload below */
		sqe->opcode = IORING_OP_URING_CMD;
		sqe->fd = rc->fd;
		sqe->cmd_op = op;
		memcpy(sqe->cmd, &s, sizeof(s));
		sqe->user_data = op;
		if (io_uring_submit(&rg) == 1)
			inflight++;
		while (!io_uring_peek_cqe(&rg, &c)) {
			/* any errno of a transfer; EBADF: the number was being swapped */
			if (!allowed(XFER_ERRS | A_OK | A(EBADF), c->res))
				race_bad(rc, "race: op %#llx: %s", (unsigned long long)c->user_data,
					 errname(c->res));
			io_uring_cqe_seen(&rg, c);
			inflight--;
		}
		if (inflight > 24) {
			struct __kernel_timespec ts = { .tv_sec = 2 };

			if (!io_uring_wait_cqe_timeout(&rg, &c, &ts)) {
				io_uring_cqe_seen(&rg, c);
				inflight--;
			}
		}
	}
	if (below(&r, 2)) {	/* exit the ring with commands in flight */
		io_uring_queue_exit(&rg);
		return NULL;
	}
	{
		double end = now_s() + opt_hang_s;

		while (inflight && now_s() < end) {
			struct __kernel_timespec ts = { .tv_sec = 1 };

			if (!io_uring_wait_cqe_timeout(&rg, &c, &ts)) {
				io_uring_cqe_seen(&rg, c);
				inflight--;
			}
		}
		if (inflight)
			race_bad(rc, "race: %u commands not completed in %.0f s",
				 inflight, opt_hang_s);
	}
	io_uring_queue_exit(&rg);
	return NULL;
}

static void *race_closer(void *arg)
{
	struct race *rc = arg;
	struct rng r = { rc->seed ^ 3 };

	for (int i = 0; i < 6 && !rc->stop; i++) {
		int nfd;

		usleep(below(&r, 20000));
		nfd = open(NZ_DEVICE_PATH, O_RDWR | O_CLOEXEC);
		if (nfd < 0) {
			race_bad(rc, "race: open: %s", strerror(errno));
			break;
		}
		dup2(nfd, rc->fd);	/* the old file goes under the others */
		close(nfd);
		rc->ops++;
	}
	return NULL;
}

static void scenario_race(struct rng *r, uint64_t index)
{
	struct race rc = { .seed = rnd(r) };
	pthread_t t[4];
	void *(*fn[4])(void *) = { race_creator, race_xfer, race_xfer, race_closer };
	int n = 0;

	pthread_mutex_init(&rc.lock, NULL);
	rc.fd = open(NZ_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (rc.fd < 0) {
		fail(index, "race: open: %s", strerror(errno));
		return;
	}
	op_begin(index, "race scenario");
	for (int i = 0; i < 4; i++)
		if (!pthread_create(&t[n], NULL, fn[i], &rc))
			n++;
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	close(rc.fd);
	op_end();
	st.race_ops += rc.ops;
	if (rc.bad)
		fail(index, "%s (%" PRIu64 " such)", rc.badmsg, (uint64_t)rc.bad);
}

/* The child of a kill scenario: commands in flight, then SIGKILL. */
static void kill_child(uint64_t seed, int wfd)
{
	struct rng r = { seed };
	struct io_uring_params p = { .flags = IORING_SETUP_SQE128 };
	struct io_uring rg;
	struct nz_comm_create cc;
	uint32_t ids[4] = { 0 };
	int fd, n = 0;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	alarm(10);
	fd = open(NZ_DEVICE_PATH, O_RDWR);
	if (fd < 0 || io_uring_queue_init_params(64, &rg, &p))
		_exit(2);
	for (int i = 0; i < 1 + (int)below(&r, 3); i++) {
		if (!gen_create_valid(&r, &cc, JOB_KILL | ((uint64_t)getpid() << 8)))
			break;
		if (cc.size > 4)
			cc.size = 2, cc.rank = below(&r, 2);
		if (getenv("NZ_FUZZ_DEBUG")) {
			FILE *k = fopen("/dev/kmsg", "w");

			if (k) {
				fprintf(k, "kill child %d: create job %#llx rank %u size %u nrails %u %s %s unit %u tmo %u a0 %x:%u a1 %x:%u\n",
					getpid(), (unsigned long long)cc.job_id, cc.rank, cc.size, cc.nrails,
					cc.rails[0], cc.rails[1], cc.unit, cc.timeout_ms,
					addr_tab[0].addr, addr_tab[0].port, addr_tab[cc.nrails].addr,
					addr_tab[cc.nrails].port);
				fclose(k);
			}
		}
		if (!ioctl(fd, NZ_IOC_COMM_CREATE, &cc))
			ids[n++] = cc.comm_id;
	}
	for (int i = 0; i < 16 + (int)below(&r, 40); i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&rg);
		struct nz_sqe s = { 0 };
		uint32_t op = below(&r, 4) ? NZ_CMD_SEND + below(&r, 2) : NZ_CMD_NOP;

		if (!sqe) {
			io_uring_submit(&rg);
			continue;
		}
		if (op == NZ_CMD_NOP) {
			s.flags = NZ_NOP_F_DEFER;
			s.nop.delay_us = below(&r, 1000000);
		} else {
			s.comm_id = n ? ids[below(&r, (uint32_t)n)] : 1;
			s.xfer.addr = (uintptr_t)big + 4096 * below(&r, 16);
			s.xfer.len = below(&r, 65536);
			s.xfer.peer = below(&r, 2);
			s.xfer.tag = below(&r, 4);
			s.xfer.timeout_ms = pm(&r, 300) ? MAX_TMO : 1 + below(&r, 1000);
		}
		memset(sqe, 0, sizeof(*sqe));	/* the rest: the payload below */
		sqe->opcode = IORING_OP_URING_CMD;
		sqe->fd = fd;
		sqe->cmd_op = op;
		memcpy(sqe->cmd, &s, sizeof(s));
	}
	io_uring_submit(&rg);
	if (write(wfd, "r", 1) != 1)
		_exit(2);
	for (;;) {	/* keep the module busy until the signal */
		uint32_t id = n ? ids[below(&r, (uint32_t)n)] : 1;
		struct nz_comm_wait w = { .comm_id = id, .timeout_ms = 5 };

		ioctl(fd, NZ_IOC_COMM_WAIT, &w);
	}
}

static void scenario_kill(struct rng *r, uint64_t index)
{
	uint64_t cseed = rnd(r);
	int p[2], status;
	double end;
	pid_t pid;
	char c;

	if (pipe(p))
		return;
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		kill_child(cseed, p[1]);
		_exit(0);
	}
	close(p[1]);
	if (pid < 0) {
		close(p[0]);
		return;
	}
	{
		struct pollfd pf = { .fd = p[0], .events = POLLIN };

		if (poll(&pf, 1, (int)(opt_hang_s * 1000)) != 1 || read(p[0], &c, 1) != 1)
			fail(index, "kill: the child never got its commands in flight");
	}
	close(p[0]);
	usleep(below(r, 30000));
	kill(pid, SIGKILL);
	end = now_s() + opt_hang_s;
	while (waitpid(pid, &status, WNOHANG) == 0) {
		if (now_s() > end) {
			fail(index, "kill: child %d still not gone %.0f s after SIGKILL",
			     pid, opt_hang_s);
			return;
		}
		usleep(10000);
	}
	st.kills++;
}

static void destroy_all(struct dev *d, uint64_t index)
{
	while (d->ncomms) {
		uint32_t id = d->comms[0].id;
		long ret = destroy(d, id, index);

		if (ret) {
			fail(index, "COMM_DESTROY %u of a live communicator: %s", id,
			     errname(ret));
			comm_del(d, id);
		}
	}
}

/* The ring, or the file, replaced with commands in flight. */
static void scenario_cycle(struct rng *r, uint64_t index)
{
	submit_batch();
	if (below(r, 2)) {
		/* Exit the ring: its CQEs are lost to us, not to the module. */
		io_uring_queue_exit(&ring);
		ring_ok = false;
		for (int i = 0; i < MAX_OUT; i++)
			outs[i].used = false;
		nout = 0;
		/* what was in flight lives on: destroy or the end cancels it */
		if (ring_open(r))
			fail(index, "cycle: io_uring set-up again failed");
	} else {
		int nfd;

		/* the old file's communicators would be out of reach */
		destroy_all(&dmain, index);
		nfd = open(NZ_DEVICE_PATH, O_RDWR | O_CLOEXEC);
		if (nfd < 0) {
			fail(index, "cycle: open: %s", strerror(errno));
			return;
		}
		dup2(nfd, dmain.fd);	/* the old file: released by the module */
		close(nfd);
		dmain.ncomms = 0;
		comm_gone(0);
	}
}

/* ---- the neighbour: another process with communicators of its own --------- */

static void neighbour_start(void)
{
	int p[2];
	char c;

	for (int i = 0; i < 4; i++)
		neigh_jobs[i] = JOB_NEIGH | (uint64_t)i;
	if (pipe(p))
		return;
	neigh_pid = fork();
	if (neigh_pid == 0) {
		struct nz_comm_create cc;
		struct rng r = { opt_seed ^ 0x4e };
		int fd = open(NZ_DEVICE_PATH, O_RDWR);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(p[0]);
		for (int i = 0; fd >= 0 && i < 4; i++) {
			if (!gen_create_valid(&r, &cc, JOB_NEIGH))
				break;
			cc.job_id = neigh_jobs[i];
			cc.size = 2;
			cc.rank = 0;
			if (ioctl(fd, NZ_IOC_COMM_CREATE, &cc))
				_exit(3);
		}
		if (write(p[1], "r", 1) != 1)
			_exit(2);
		for (;;)
			pause();
	}
	close(p[1]);
	if (neigh_pid < 0 || read(p[0], &c, 1) != 1) {
		if (neigh_pid > 0)
			kill(neigh_pid, SIGKILL);
		neigh_pid = 0;
		memset(neigh_jobs, 0, sizeof(neigh_jobs));
		tap_diag("no neighbour process: its jobs are not tried");
	}
	close(p[0]);
}

static void neighbour_stop(void)
{
	if (neigh_pid > 0) {
		kill(neigh_pid, SIGKILL);
		waitpid(neigh_pid, NULL, 0);
	}
	neigh_pid = 0;
}

static int blackhole_start(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = rails[0].addr,
				  .sin_port = htons(BLACKHOLE_PORT) };
	int one = 1;

	blackhole = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (blackhole < 0)
		return -1;
	setsockopt(blackhole, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(blackhole, (struct sockaddr *)&sa, sizeof(sa)) || listen(blackhole, 8))
		return -1;
	return 0;	/* never accepts, never speaks */
}

/* ---- one input ----------------------------------------------------------- */

static void one_input(uint64_t index)
{
	struct rng r = rng_for(opt_seed, index, 0);
	uint32_t k = below(&r, 100000);
	double t = now_s(), *acc;

	if (k < 70000) {
		gen_sqe(&r, index);
		acc = &st.t_sqe;
	} else if (k < 90000) {
		submit_batch();
		gen_ioctl(&r, index);
		acc = &st.t_ioctl;
	} else if (k < 99850) {
		submit_batch();
		gen_netlink(&r, index);
		acc = &st.t_netlink;
	} else {
		submit_batch();
		st.scenario++;
		if (k < 99900) {
			scenario_race(&r, index);
			acc = &st.t_race;
		} else if (k < 99950) {
			scenario_kill(&r, index);
			acc = &st.t_kill;
		} else {
			scenario_cycle(&r, index);
			acc = &st.t_cycle;
		}
	}
	*acc += now_s() - t;
}

/* The same starting state for a campaign and a replay. */
static void initial_state(void)
{
	struct rng r = rng_for(opt_seed, ~0ULL, 1);
	struct nz_comm_create *cc = (void *)(argm + 2 * 4096);

	create_pair(&r, 0);
	if (gen_create_valid(&r, cc, JOB_MAIN | 0x2000)) {
		cc->size = 2;
		cc->rank = 0;
		if (!do_ioctl(dmain.fd, NZ_IOC_COMM_CREATE, cc, 0, "initial COMM_CREATE"))
			comm_add(&dmain, cc, 0, false);
	}
}

/* Communicators do not live for ever: new ones get made. */
static void age_comms(uint64_t index)
{
	for (int i = 0; i < dmain.ncomms; i++)
		if (index - dmain.comms[i].born > 30000) {
			destroy(&dmain, dmain.comms[i].id, index);
			break;
		}
}

/* ---- after the campaign: is everything released? ------------------------ */

static long long comms0;

static bool released(long long files0, double bound, char *why, size_t len)
{
	double end = now_s() + bound;
	long long files, inflight, comms;
	char first[300] = "";
	int peers;

	do {
		files = sys_ll("open_files");
		inflight = sys_ll("inflight");
		comms = sys_ll("comms");	/* -1: a module without the file */
		peers = sys_peers(first, sizeof(first));
		if (files == files0 && inflight == 0 && peers == 0 && comms <= comms0)
			return true;
		usleep(50000);
	} while (now_s() < end);
	snprintf(why, len, "open files %lld (baseline %lld), in flight %lld, communicators %lld (baseline %lld), peers %d%s%s",
		 files, files0, inflight, comms, comms0, peers, peers ? ", first " : "", first);
	return false;
}

static void restore_rails(void)
{
	struct nz_rail_info info[NZ_MAX_RAILS];
	uint32_t n;

	if (!priv || ioc_rail_list(info, NZ_MAX_RAILS, &n))
		return;
	for (uint32_t k = 0; k < n && k < NZ_MAX_RAILS; k++) {
		struct rail *rl = rail_find(info[k].name);

		if (!rl || !rl->orig)
			nl_rail_del(info[k].name);
		else
			nl_rail_reset(rl->name);
	}
	nl_health_restore();
}

static int drop_privileges(long uid)
{
	if (setgroups(0, NULL) || setresgid((gid_t)uid, (gid_t)uid, (gid_t)uid) ||
	    setresuid((uid_t)uid, (uid_t)uid, (uid_t)uid))
		return -errno;
	return 0;
}

/* ---- regression cases: one per bug the fuzzer found, replayed alone ------- */

/* A COMM_CREATE that passes the checks, then fails: a clean errno. */
static void case_create_late(const char *name, int how, long want)
{
	struct nz_comm_create cc;
	struct rng r = { 7 };
	int fd = open(NZ_DEVICE_PATH, O_RDWR);
	long ret;

	gen_create_valid(&r, &cc, JOB_MAIN | 0x3000);
	cc.size = 2;
	cc.rank = 0;
	cc.nrails = 1;
	memset(cc.rails[1], 0, sizeof(cc.rails) - NZ_RAIL_NAME_LEN);
	switch (how) {
	case 0:
		snprintf(cc.rails[0], NZ_RAIL_NAME_LEN, "nosuchrail");
		break;
	case 1:
		addr_tab[1].port = 0;
		break;
	case 2:
		cc.addrs = 0;
		break;
	default:
		if (rails_existing() > 1 || 1) {
			cc.nrails = 2;
			memcpy(cc.rails[1], cc.rails[0], NZ_RAIL_NAME_LEN);
		}
		break;
	}
	ret = fd < 0 ? -errno : ioctl(fd, NZ_IOC_COMM_CREATE, &cc) ? -errno : 0;
	tap_ok(ret == want, "%s: COMM_CREATE -> %s (want %s)", name, errname(ret),
	       errname(want));
	if (fd >= 0)
		close(fd);
}

/* A transfer longer than anything pinnable: refused, nothing allocated. */
static void case_xfer_huge(const char *name, uint32_t op, uint64_t len)
{
	struct io_uring_params p = { .flags = IORING_SETUP_SQE128 };
	struct nz_comm_create cc;
	struct io_uring rg;
	struct io_uring_cqe *c;
	struct io_uring_sqe *sqe;
	struct nz_sqe s = { 0 };
	struct rng r = { 8 };
	struct __kernel_timespec ts = { .tv_sec = 10 };
	int fd = open(NZ_DEVICE_PATH, O_RDWR), res = 1;

	gen_create_valid(&r, &cc, JOB_MAIN | 0x3100);
	cc.size = 2;
	cc.rank = 0;
	if (fd < 0 || ioctl(fd, NZ_IOC_COMM_CREATE, &cc) ||
	    io_uring_queue_init_params(8, &rg, &p)) {
		tap_ok(0, "%s: set-up: %s", name, strerror(errno));
		return;
	}
	s.comm_id = cc.comm_id;
	s.xfer.addr = (uintptr_t)big;
	s.xfer.len = len;
	s.xfer.peer = 1;
	s.xfer.timeout_ms = 1000;
	sqe = io_uring_get_sqe(&rg);
	if (!sqe) {
		tap_ok(0, "%s: no SQE", name);
		return;
	}
	memset(sqe, 0, sizeof(*sqe));	/* the rest: the payload below */
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = fd;
	sqe->cmd_op = op;
	memcpy(sqe->cmd, &s, sizeof(s));
	io_uring_submit(&rg);
	if (!io_uring_wait_cqe_timeout(&rg, &c, &ts)) {
		res = c->res;
		io_uring_cqe_seen(&rg, c);
	}
	tap_ok(res < 0 && res != -ETIMEDOUT,
	       "%s: %s of %#" PRIx64 " bytes refused at once (%s)", name,
	       op == NZ_CMD_SEND ? "SEND" : "RECV", len, res == 1 ? "no CQE" : errname(res));
	io_uring_queue_exit(&rg);
	close(fd);
}

/*
 * A process killed with a receive of an hour in flight: released at once.
 * With async, the receive is issued by an io-wq worker (IOSQE_ASYNC),
 * which exits with the process while the receive waits: a module that
 * kept that worker's task without a reference, and looked at it every
 * scan, read freed memory (issue 19, defect 4; KASAN on the debug kernel).
 */
static void case_exit_inflight(const char *name, bool async)
{
	long long files0 = sys_ll("open_files");
	char why[400] = "";
	int p[2];
	pid_t pid;
	char c;

	if (pipe(p)) {
		tap_ok(0, "%s: pipe", name);
		return;
	}
	pid = fork();
	if (pid == 0) {
		struct io_uring_params pr = { .flags = IORING_SETUP_SQE128 };
		struct nz_comm_create cc;
		struct io_uring rg;
		struct io_uring_sqe *sqe;
		struct nz_sqe s = { 0 };
		struct rng r = { 9 };
		int fd = open(NZ_DEVICE_PATH, O_RDWR);

		gen_create_valid(&r, &cc, JOB_MAIN | 0x3200);
		cc.size = 2;
		cc.rank = 0;
		if (fd < 0 || ioctl(fd, NZ_IOC_COMM_CREATE, &cc) ||
		    io_uring_queue_init_params(8, &rg, &pr))
			_exit(2);
		s.comm_id = cc.comm_id;
		s.xfer.addr = (uintptr_t)big;
		s.xfer.len = 4096;
		s.xfer.peer = 1;
		s.xfer.timeout_ms = MAX_TMO;
		sqe = io_uring_get_sqe(&rg);
		if (!sqe)
			_exit(2);
		memset(sqe, 0, sizeof(*sqe));	/* the rest: the payload below */
		sqe->opcode = IORING_OP_URING_CMD;
		sqe->fd = fd;
		sqe->cmd_op = NZ_CMD_RECV;
		if (async)
			sqe->flags |= IOSQE_ASYNC;
		memcpy(sqe->cmd, &s, sizeof(s));
		io_uring_submit(&rg);
		if (write(p[1], "r", 1) != 1)
			_exit(2);
		pause();
		_exit(0);
	}
	close(p[1]);
	if (read(p[0], &c, 1) != 1) {
		tap_ok(0, "%s: the child did not start", name);
		return;
	}
	close(p[0]);
	/* Issued (the worker's is, as a rule, within this) and waiting. */
	usleep(100000);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	tap_ok(released(files0, 1.0, why, sizeof(why)),
	       "%s: killed with an hour-long RECV%s in flight: released within 1 s%s%s",
	       name, async ? " issued by an io-wq worker" : "",
	       why[0] ? ": " : "", why[0] ? why : "");
	/* A few more scans (50 ms each) of whatever the module still holds. */
	usleep(300000);
}

/* A communicator whose peers never answer: destroyed without waiting. */
static void case_destroy_fast(const char *name, bool rail_del)
{
	struct nz_comm_create cc = { 0 };
	struct rail tr = rails[0];
	const char *rname = rails[0].name;
	double t;
	long ret;
	int fd = open(NZ_DEVICE_PATH, O_RDWR);

	if (rail_del) {
		if (!priv) {
			tap_skip(name, "needs CAP_NET_ADMIN");
			return;
		}
		snprintf(tr.name, sizeof(tr.name), "fzdel");
		tr.port = 7690;
		if (nl_rail_add(&tr)) {
			tap_ok(0, "%s: rail add fzdel", name);
			return;
		}
		rname = tr.name;
	}
	cc.job_id = JOB_MAIN | 0x3300 | rail_del;
	cc.size = 4;
	cc.rank = 3;		/* connects to ranks 0..2: none answers */
	cc.nrails = 1;
	snprintf(cc.rails[0], NZ_RAIL_NAME_LEN, "%s", rname);
	for (int i = 0; i < 4; i++)
		peer_addr(&(struct rng){ 1 }, &tr, &addr_tab[i], i == 0 ? 2 : i == 1 ? 3 : 2);
	cc.addrs = (uintptr_t)addr_tab;
	if (fd < 0 || ioctl(fd, NZ_IOC_COMM_CREATE, &cc)) {
		tap_ok(0, "%s: COMM_CREATE: %s", name, strerror(errno));
		return;
	}
	usleep(300000);	/* the connects are under way */
	t = now_s();
	if (rail_del)
		ret = nl_rail_del(rname);
	else
		ret = ioctl(fd, NZ_IOC_COMM_DESTROY, &cc.comm_id) ? -errno : 0;
	t = now_s() - t;
	tap_ok(!ret && t < 1.0, "%s: %s with peers that never answer returns in %.2f s (%s)",
	       name, rail_del ? "rail del" : "COMM_DESTROY", t, errname(ret));
	close(fd);
}

static int run_cases(const char *which)
{
	struct {
		const char *name;
		int arg;
	} cases[] = {
		{ "create-no-rail", 0 }, { "create-port0", 1 }, { "create-addr-null", 2 },
		{ "create-dup-rail", 3 }, { "send-1tib", 4 }, { "recv-huge", 5 },
		{ "exit-inflight", 6 }, { "destroy-fast", 7 }, { "raildel-fast", 8 },
		{ "exit-inflight-async", 9 },
	};
	bool any = false;

	for (unsigned int i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char list[256];
		bool hit = !strcmp(which, "all");

		snprintf(list, sizeof(list), ",%s,", which);
		{
			char key[64];

			snprintf(key, sizeof(key), ",%s,", cases[i].name);
			hit |= strstr(list, key) != NULL;
		}
		if (!hit)
			continue;
		any = true;
		switch (cases[i].arg) {
		case 0: case_create_late(cases[i].name, 0, -ENODEV); break;
		case 1: case_create_late(cases[i].name, 1, -EINVAL); break;
		case 2: case_create_late(cases[i].name, 2, -EFAULT); break;
		case 3: case_create_late(cases[i].name, 3, -EINVAL); break;
		case 4: case_xfer_huge(cases[i].name, NZ_CMD_SEND, MAX_MSG); break;
		case 5: case_xfer_huge(cases[i].name, NZ_CMD_RECV, 1ULL << 41); break;
		case 6: case_exit_inflight(cases[i].name, false); break;
		case 7: case_destroy_fast(cases[i].name, false); break;
		case 9: case_exit_inflight(cases[i].name, true); break;
		default: case_destroy_fast(cases[i].name, true); break;
		}
	}
	if (!any)
		tap_ok(0, "no regression case named %s", which);
	tap_plan(tap_n);
	return tap_exit();
}

/* ---- main ---------------------------------------------------------------- */

static void usage(void)
{
	fprintf(stderr,
		"usage: nz_fuzz [-s SEED] [-n COUNT] [-r SEED:INDEX] [-u UID] [-K] [-v]\n"
		"               [-w HANG_S] [-R RELEASE_S] [-p EVERY] [-c CASE[,CASE...]|all]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	long long files0;
	pthread_t wd;
	double t0, t1;
	char why[400] = "";
	int o;

	while ((o = getopt(argc, argv, "s:n:r:u:Kvw:R:c:p:")) != -1) {
		switch (o) {
		case 's': opt_seed = strtoull(optarg, NULL, 0); break;
		case 'n': opt_count = strtoull(optarg, NULL, 0); break;
		case 'r': {
			char *colon = strchr(optarg, ':');

			if (!colon)
				usage();
			opt_seed = strtoull(optarg, NULL, 0);
			opt_replay_index = strtoull(colon + 1, NULL, 0);
			opt_replay = true;
			break;
		}
		case 'u': opt_uid = strtol(optarg, NULL, 0); break;
		case 'K': opt_known = true; break;
		case 'v': opt_verbose = true; break;
		case 'w': opt_hang_s = strtod(optarg, NULL); break;
		case 'R': opt_release_s = strtod(optarg, NULL); break;
		case 'c': opt_case = optarg; break;
		case 'p': opt_progress = strtoull(optarg, NULL, 0) ?: 1; break;
		default: usage();
		}
	}
	signal(SIGPIPE, SIG_IGN);
	if (access(NZ_DEVICE_PATH, F_OK)) {
		tap_skip("nz_fuzz", "no %s: module not loaded", NZ_DEVICE_PATH);
		tap_plan(tap_n);
		return 0;
	}
	files0 = sys_ll("open_files");
	comms0 = sys_ll("comms");
	{
		FILE *f = fopen("/sys/module/nezha/parameters/max_msg_mb", "r");
		unsigned long long mb;

		if (f && fscanf(f, "%llu", &mb) == 1)
			max_len = (uint64_t)mb << 20;
		if (f)
			fclose(f);
	}
	if (mem_setup() || pipe(pipefd)) {
		tap_ok(0, "memory set-up");
		return 1;
	}
	if (rails_setup()) {
		tap_skip("nz_fuzz", "no rail configured (nezhactl rail add)");
		tap_plan(tap_n);
		return 0;
	}
	if (!tap_ok(!nl_setup(), "generic netlink family %s found", NZ_GENL_NAME))
		return tap_exit();
	priv = geteuid() == 0;
	if (opt_case)
		return run_cases(opt_case);
	if (blackhole_start())
		tap_diag("no listener at port %d: %s", BLACKHOLE_PORT, strerror(errno));
	neighbour_start();
	if (opt_uid >= 0) {
		int ret = drop_privileges(opt_uid);

		if (!tap_ok(!ret, "drop privileges to uid %ld", opt_uid))
			return tap_exit();
		close(nl_fd);
		if (nl_setup())
			tap_diag("netlink set-up again as uid %ld failed", opt_uid);
	}
	priv = geteuid() == 0;
	dmain.fd = open(NZ_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	dother.fd = open(NZ_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (!tap_ok(dmain.fd >= 0 && dother.fd >= 0 && !ring_open(NULL),
		    "open %s and an SQE128 ring as uid %d", NZ_DEVICE_PATH, geteuid()))
		return tap_exit();
	tap_diag("seed %#" PRIx64 ", %" PRIu64 " inputs, uid %d%s, rails %d, known-bug classes %s",
		 opt_seed, opt_replay ? 1 : opt_count, geteuid(), priv ? " (CAP_NET_ADMIN)" : "",
		 nrails, opt_known ? "on" : "off");
	pthread_create(&wd, NULL, watchdog, NULL);
	initial_state();
	t0 = now_s();
	if (opt_replay) {
		opt_verbose = true;
		one_input(opt_replay_index);
	} else {
		for (uint64_t i = 0; i < opt_count; i++) {
			one_input(i);
			if ((i & 255) == 255) {
				reap(0);
				check_deadlines();
				age_comms(i);
			}
			if (!opt_verbose && (i + 1) % opt_progress == 0)
				tap_diag("%" PRIu64 " inputs, %.0f/s; s in SQEs %.0f ioctls %.0f netlink %.0f races %.0f kills %.0f cycles %.0f; slowest %.1f s (%s)",
					 i + 1, (i + 1) / (now_s() - t0), st.t_sqe, st.t_ioctl,
					 st.t_netlink, st.t_race, st.t_kill, st.t_cycle,
					 st.max_op_s, st.max_op);
		}
	}
	submit_batch();
	reap(0);
	t1 = now_s();
	destroy_all(&dmain, opt_count);
	drain(opt_hang_s + hb0[2] / 1000.0);
	tap_ok(!st.fails,
	       "%" PRIu64 " inputs: %" PRIu64 " SQEs, %" PRIu64 " ioctls, %" PRIu64 " netlink, %" PRIu64 " scenarios (%" PRIu64 " racing ops, %" PRIu64 " kills), %" PRIu64 " filtered: %" PRIu64 " unexpected",
	       opt_replay ? 1 : opt_count, st.sqe, st.ioctl, st.netlink, st.scenario,
	       st.race_ops, st.kills, st.filtered, st.fails);
	tap_diag("communicators: %" PRIu64 " created (%" PRIu64 " pairs), %" PRIu64 " destroyed, %" PRIu64 " commands issued after theirs was (-EINVAL); slowest operation %.2f s (%s), %" PRIu64 " over 1 s",
		 st.creates_ok, st.pairs, st.destroys, st.gone_einval, st.max_op_s, st.max_op,
		 st.slow_ops);
	tap_diag("time: SQEs %.1f s, ioctls %.1f s, netlink %.1f s, races %.1f s, kills %.1f s, cycles %.1f s",
		 st.t_sqe, st.t_ioctl, st.t_netlink, st.t_race, st.t_kill, st.t_cycle);
	tap_diag("rate: %" PRIu64 " inputs in %.1f s = %.0f inputs/s",
		 opt_replay ? 1 : opt_count, t1 - t0, (opt_replay ? 1 : opt_count) / (t1 - t0));

	op_begin(0, "teardown");
	io_uring_queue_exit(&ring);
	close(dmain.fd);
	close(dother.fd);
	neighbour_stop();
	if (blackhole >= 0)
		close(blackhole);
	restore_rails();
	op_end();
	tap_ok(released(files0, opt_release_s, why, sizeof(why)),
	       "every file, command and peer released within %.0f s%s%s", opt_release_s,
	       why[0] ? ": " : "", why);
	tap_plan(tap_n);
	return tap_exit();
}
