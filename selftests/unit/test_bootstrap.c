// SPDX-License-Identifier: GPL-2.0
/*
 * Host unit tests of libnezha's rendezvous (bootstrap.c) and environment
 * parsing.  Each job is a set of forked processes that rendezvous on
 * 127.0.0.1 with fake rail lists (the module is not needed: the rail list
 * is an input of the bootstrap); results come back through shared memory.
 * Timeouts are short so that the whole file runs in a few seconds.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include "internal.h"
#include "tap.h"

#define MAXP		8	/* processes per job */
#define TMO		800	/* ms: rendezvous timeout of the failure cases */

struct result {
	int ret;		/* nzi_bootstrap()'s result; 1000 = died */
	int64_t elapsed_ms;
	uint64_t job_id;
	uint8_t secret[NZ_SECRET_LEN];
	unsigned int size, nrails, rejected, unit;
	char rails[NZ_MAX_RAILS][NZ_RAIL_NAME_LEN];
	struct nz_comm_addr addrs[MAXP * NZ_MAX_RAILS];
	char err[256];
};

struct proc {
	int rank, size;
	const char *rails;	/* space-separated names, each NAME[:MBPS] */
	int delay_ms;		/* start this much later */
	unsigned int unit;	/* chunk unit asked for, 0 = chosen */
};

static struct result *res;	/* MAXP entries, shared with the children */
static const char *const names[] = { "eth0", "eth1", "ib0", "roce1" };

static int name_idx(const char *n)
{
	for (unsigned int i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(names[i], n))
			return (int)i;
	return -1;
}

/* Rank r's rail "name" listens on 10.<name index>.0.<r+1>, port 7470+index. */
static struct nz_comm_addr fake_addr(int rank, const char *name)
{
	struct nz_comm_addr a = { 0 };
	int i = name_idx(name);

	a.addr = htonl((10u << 24) | ((unsigned int)i << 16) | (unsigned int)(rank + 1));
	a.port = htons((uint16_t)(7470 + i));
	return a;
}

static unsigned int make_rails(int rank, const char *spec, struct nzi_rail *out)
{
	char buf[128], *save, *tok;
	unsigned int n = 0;

	snprintf(buf, sizeof(buf), "%s", spec);
	for (tok = strtok_r(buf, " ", &save); tok && n < NZ_MAX_RAILS;
	     tok = strtok_r(NULL, " ", &save)) {
		char *speed = strchr(tok, ':');
		struct nz_comm_addr a;

		if (speed)
			*speed++ = 0;
		a = fake_addr(rank, tok);
		memset(&out[n], 0, sizeof(out[n]));
		snprintf(out[n].name, sizeof(out[n].name), "%s", tok);
		out[n].speed_mbps = speed ? (uint32_t)atoi(speed) : 0;
		out[n].addr = a.addr;
		out[n].port = a.port;
		n++;
	}
	return n;
}

static int free_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	getsockname(fd, (struct sockaddr *)&sa, &sl);
	port = ntohs(sa.sin_port);
	close(fd);
	return port;
}

static void child(int slot, const struct proc *p, int port, int timeout_ms)
{
	struct nzi_rail rails[NZ_MAX_RAILS];
	struct nzi_boot_cfg cfg = {
		.rank = p->rank, .size = p->size, .master_addr = "127.0.0.1",
		.master_port = port, .timeout_ms = timeout_ms, .rails = rails,
		.unit = p->unit, .verbose = getenv("NZ_TEST_VERBOSE") != NULL,
	};
	struct nzi_boot_job job;
	struct result *r = &res[slot];
	int64_t t0;

	alarm(10);	/* a hung child must not hang the test */
	cfg.nrails = make_rails(p->rank, p->rails, rails);
	if (p->delay_ms)
		usleep((useconds_t)p->delay_ms * 1000);
	t0 = nzi_now_ms();
	r->ret = nzi_bootstrap(&cfg, &job);
	r->elapsed_ms = nzi_now_ms() - t0;
	snprintf(r->err, sizeof(r->err), "%s", nz_last_error());
	if (!r->ret) {
		r->job_id = job.job_id;
		memcpy(r->secret, job.secret, sizeof(r->secret));
		r->size = job.size;
		r->nrails = job.nrails;
		r->unit = job.unit;
		memcpy(r->rails, job.rails, sizeof(r->rails));
		if ((size_t)job.size * job.nrails <= MAXP * NZ_MAX_RAILS)
			memcpy(r->addrs, job.addrs,
			       (size_t)job.size * job.nrails * sizeof(*job.addrs));
		nzi_boot_job_free(&job);
	}
	r->rejected = job.rejected;
	_exit(0);
}

static pid_t pids[MAXP];

static void start_job(const struct proc *procs, int n, int port, int timeout_ms)
{
	memset(res, 0, MAXP * sizeof(*res));
	fflush(stdout);
	for (int i = 0; i < n; i++) {
		pids[i] = fork();
		if (pids[i] == 0)
			child(i, &procs[i], port, timeout_ms);
	}
}

static void finish_job(int n)
{
	for (int i = 0; i < n; i++) {
		int st;

		waitpid(pids[i], &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			res[i].ret = 1000;
			snprintf(res[i].err, sizeof(res[i].err), "process died (status 0x%x)", st);
		}
	}
}

static void run_job(const struct proc *procs, int n, int port, int timeout_ms)
{
	start_job(procs, n, port, timeout_ms);
	finish_job(n);
}

/* Every process in procs[0..n) that succeeded agrees with process ref. */
static int same_job(int ref, int n)
{
	const struct result *a = &res[ref];

	for (int i = 0; i < n; i++) {
		const struct result *b = &res[i];

		if (b->ret)
			continue;
		if (b->job_id != a->job_id || memcmp(b->secret, a->secret, NZ_SECRET_LEN) ||
		    b->size != a->size || b->nrails != a->nrails || b->unit != a->unit ||
		    memcmp(b->rails, a->rails, sizeof(a->rails)) ||
		    memcmp(b->addrs, a->addrs, a->size * a->nrails * sizeof(a->addrs[0])))
			return 0;
	}
	return 1;
}

/* The table holds rank r's own address of each slot's rail. */
static int table_ok(const struct result *r)
{
	for (unsigned int k = 0; k < r->size; k++)
		for (unsigned int s = 0; s < r->nrails; s++) {
			struct nz_comm_addr want = fake_addr((int)k, r->rails[s]);
			const struct nz_comm_addr *got = &r->addrs[k * r->nrails + s];

			if (got->addr != want.addr || got->port != want.port || got->rsvd)
				return 0;
		}
	return 1;
}

static int slots_are(const struct result *r, const char *want)
{
	char got[128] = "";

	for (unsigned int s = 0; s < r->nrails; s++) {
		strcat(got, s ? " " : "");
		strcat(got, r->rails[s]);
	}
	return !strcmp(got, want);
}

static int secret_nonzero(const struct result *r)
{
	for (int i = 0; i < NZ_SECRET_LEN; i++)
		if (r->secret[i])
			return 1;
	return 0;
}

static uint64_t job_ids[8];
static int njob_ids;

static void check_formed(const char *what, const struct proc *procs, int n,
			 const char *slots)
{
	int all = 1;

	for (int i = 0; i < n; i++)
		if (res[i].ret) {
			tap_diag("%s: process %d (rank %d): %d %s", what, i,
				 procs[i].rank, res[i].ret, res[i].err);
			all = 0;
		}
	tap_ok(all, "%s: every rank joined", what);
	tap_ok(all && same_job(0, n), "%s: identical job id, secret, slots and table on every rank", what);
	tap_ok(!res[0].ret && res[0].job_id && secret_nonzero(&res[0]),
	       "%s: job id and secret are drawn (non-zero)", what);
	tap_ok(!res[0].ret && slots_are(&res[0], slots),
	       "%s: rail slots are \"%s\" (rails on every rank, rank 0's order)", what, slots);
	tap_ok(!res[0].ret && table_ok(&res[0]), "%s: address table addrs[rank * nrails + slot]", what);
	tap_ok(res[0].rejected == 0, "%s: no connection dropped", what);
	for (int i = 0; i < njob_ids; i++)
		if (job_ids[i] == res[0].job_id)
			all = 0;
	tap_ok(all, "%s: the job id differs from the other jobs'", what);
	if (njob_ids < 8)
		job_ids[njob_ids++] = res[0].job_id;
}

static void test_formation(void)
{
	/* Rank 0 starts late: rank 1 retries until it listens. */
	static const struct proc two[] = {
		{ 0, 2, "eth0 eth1", 200, 0 },
		{ 1, 2, "eth1 eth0", 0, 0 },
	};
	/* Rank 2 has no ib0: it is not a slot.  Rank 1 lists another order. */
	static const struct proc three[] = {
		{ 0, 3, "eth0 ib0 eth1", 0, 0 },
		{ 1, 3, "eth1 ib0 eth0", 0, 0 },
		{ 2, 3, "eth0 eth1", 0, 0 },
	};
	/* roce1 is missing on rank 4 only; eth1 only on rank 0. */
	static const struct proc five[] = {
		{ 0, 5, "ib0 roce1 eth0 eth1", 0, 0 },
		{ 1, 5, "eth0 ib0 roce1", 0, 0 },
		{ 2, 5, "roce1 ib0 eth0", 30, 0 },
		{ 3, 5, "eth0 roce1 ib0", 0, 0 },
		{ 4, 5, "ib0 eth0", 60, 0 },
	};
	int64_t t0 = nzi_now_ms();

	run_job(two, 2, free_port(), 3000);
	check_formed("2 ranks", two, 2, "eth0 eth1");
	run_job(three, 3, free_port(), 3000);
	check_formed("3 ranks", three, 3, "eth0 eth1");
	run_job(five, 5, free_port(), 3000);
	check_formed("5 ranks", five, 5, "ib0 eth0");
	tap_diag("three jobs formed in %lld ms", (long long)(nzi_now_ms() - t0));
}

static void test_timeouts(void)
{
	static const struct proc missing2[] = {
		{ 0, 3, "eth0", 0, 0 },
		{ 1, 3, "eth0", 0, 0 },
	};
	static const struct proc no_root[] = {
		{ 1, 2, "eth0", 0, 0 },
	};
	static const struct proc no_common[] = {
		{ 0, 2, "eth0", 0, 0 },
		{ 1, 2, "ib0", 0, 0 },
	};

	run_job(missing2, 2, free_port(), TMO);
	tap_ok(res[0].ret == -ETIMEDOUT && res[1].ret == -ETIMEDOUT,
	       "rank 2 missing: ranks 0 and 1 get -ETIMEDOUT (%d, %d)", res[0].ret, res[1].ret);
	tap_ok(res[0].elapsed_ms <= TMO + 1000 && res[1].elapsed_ms <= TMO + 1000,
	       "rank 2 missing: both give up within timeout + 1 s (%lld, %lld ms)",
	       (long long)res[0].elapsed_ms, (long long)res[1].elapsed_ms);
	tap_ok(strstr(res[0].err, "rank(s) 2 of 3") && strstr(res[1].err, "rank(s) 2 of 3"),
	       "rank 2 missing: every rank's message names the missing rank");
	tap_diag("rank 1 says: %s", res[1].err);

	run_job(no_root, 1, free_port(), TMO);
	tap_ok(res[0].ret == -ETIMEDOUT && res[0].elapsed_ms <= TMO + 1000,
	       "rank 0 missing: rank 1 gets -ETIMEDOUT within timeout + 1 s (%d, %lld ms)",
	       res[0].ret, (long long)res[0].elapsed_ms);
	tap_diag("rank 1 says: %s", res[0].err);

	run_job(no_common, 2, free_port(), 3000);
	tap_ok(res[0].ret == -ENODEV && res[1].ret == -ENODEV,
	       "no rail on every rank: -ENODEV everywhere (%d, %d)", res[0].ret, res[1].ret);
}

/* ---- Strangers on the rendezvous port ---- */

static int connect_retry(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

	for (int i = 0; i < 200; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		if (!connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
			return fd;
		close(fd);
		usleep(5000);
	}
	return -1;
}

static void put32(uint8_t *p, uint32_t v)
{
	v = htonl(v);
	memcpy(p, &v, 4);
}

/* Send a message, return the errno of rank 0's ABORT answer (0: none). */
static int send_expect_abort(int port, const uint8_t *msg, size_t len)
{
	uint8_t ans[512];
	struct timeval tv = { .tv_sec = 3 };
	size_t got = 0;
	ssize_t n;
	int fd = connect_retry(port), err = 0;

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	send(fd, msg, len, MSG_NOSIGNAL);
	while ((n = recv(fd, ans + got, sizeof(ans) - got, 0)) > 0)
		got += (size_t)n;
	if (got >= NZI_BOOT_HDR_LEN + 4 && ntohs(*(uint16_t *)(ans + 6)) == NZI_BOOT_ABORT) {
		uint32_t e;

		memcpy(&e, ans + NZI_BOOT_HDR_LEN, 4);
		err = (int)ntohl(e);
	}
	close(fd);
	return err;
}

static size_t hello(uint8_t *buf, int rank, int size)
{
	struct nzi_rail r[1];

	make_rails(rank, "eth0", r);
	return nzi_boot_encode_hello(buf, rank, size, r, 1, 0);
}

static void test_strangers(void)
{
	static const struct proc job[] = {
		{ 0, 3, "eth0", 0, 0 },
		{ 1, 3, "eth0", 600, 0 },
		{ 2, 3, "eth0", 600, 0 },
		{ 3, 4, "eth0", 100, 0 },	/* a rank of a 4-rank job */
	};
	uint8_t msg[NZI_BOOT_HELLO_MAX + 64];
	int port = free_port(), idle, fd, e1, e2, e3, e4, e5;
	size_t len;

	start_job(job, 4, port, 4000);
	idle = connect_retry(port);	/* connects and never says a word */
	/* Garbage. */
	memset(msg, 0x5a, 64);
	e1 = send_expect_abort(port, msg, 64);
	/* A hello with a wrong magic. */
	len = hello(msg, 1, 3);
	put32(msg, 0x12345678);
	e2 = send_expect_abort(port, msg, len);
	/* Right magic, unknown protocol version. */
	len = hello(msg, 1, 3);
	msg[4] = 0;
	msg[5] = 99;
	e3 = send_expect_abort(port, msg, len);
	/* Rank out of range. */
	len = hello(msg, 7, 3);
	e4 = send_expect_abort(port, msg, len);
	/* A malformed rail list (length does not match nrails). */
	len = hello(msg, 1, 3);
	put32(msg + NZI_BOOT_HDR_LEN + 8, 5);
	e5 = send_expect_abort(port, msg, len);
	/* A real-looking rank 1 that leaves before the job forms. */
	fd = connect_retry(port);
	len = hello(msg, 1, 3);
	send(fd, msg, len, MSG_NOSIGNAL);
	usleep(50000);
	close(fd);
	finish_job(4);
	if (idle >= 0)
		close(idle);

	tap_ok(e1 == 0 && e2 == 0, "garbage and a wrong magic are dropped without an answer (%d, %d)",
	       e1, e2);
	tap_ok(e3 == EPROTO, "another protocol version is told EPROTO (%d)", e3);
	tap_ok(e4 == EINVAL, "rank >= size is told EINVAL (%d)", e4);
	tap_ok(e5 == EINVAL, "a malformed rail list is told EINVAL (%d)", e5);
	tap_ok(res[3].ret == -EINVAL && strstr(res[3].err, "size"),
	       "a rank of a job of another size gets -EINVAL (%d: %s)", res[3].ret, res[3].err);
	tap_ok(!res[0].ret && !res[1].ret && !res[2].ret && same_job(0, 3),
	       "strangers and a rank that left: the job still forms (%d %d %d)",
	       res[0].ret, res[1].ret, res[2].ret);
	tap_ok(res[0].rejected >= 6, "rank 0 counted the dropped connections (%u)", res[0].rejected);
}

/* ---- Chunk units ---- */

/* Run job; every rank must get unit (0: every rank must fail with -EINVAL). */
static void check_unit(const char *what, const struct proc *procs, int n,
		       unsigned int unit)
{
	int all = 1;

	run_job(procs, n, free_port(), 3000);
	for (int i = 0; i < n; i++) {
		if (unit ? !res[i].ret && res[i].unit == unit :
			   res[i].ret == -EINVAL && strstr(res[i].err, "chunk units"))
			continue;
		tap_diag("%s: rank %d: %d unit %u: %s", what, procs[i].rank,
			 res[i].ret, res[i].unit, res[i].err);
		all = 0;
	}
	if (unit)
		tap_ok(all && same_job(0, n), "%s: unit %u on every rank", what, unit);
	else
		tap_ok(all, "%s: every rank fails with -EINVAL naming the chunk units", what);
}

static void test_units(void)
{
	static const struct { uint32_t mbps; unsigned int unit; } t[] = {
		{ 0, 65536 }, { 1, 16384 }, { 20, 16384 }, { 32, 16384 },
		{ 33, 32768 }, { 40, 32768 }, { 65, 32768 }, { 66, 65536 },
		{ 100, 65536 }, { 400000, 65536 },
	};
	/* The slowest known link of the slots: eth1 at 20 on rank 2. */
	static const struct proc slowest[] = {
		{ 0, 3, "eth0:1000 eth1:100", 0, 0 },
		{ 1, 3, "eth1 eth0:1000", 0, 0 },
		{ 2, 3, "eth0:25000 eth1:20", 0, 0 },
	};
	/* ib0 at 10 is on rank 0 only: not a slot, so it does not count. */
	static const struct proc noslot[] = {
		{ 0, 2, "eth0:1000 ib0:10", 0, 0 },
		{ 1, 2, "eth0:1000", 0, 0 },
	};
	static const struct proc unknown[] = {
		{ 0, 2, "eth0 eth1", 0, 0 },
		{ 1, 2, "eth0 eth1", 0, 0 },
	};
	/* One rank asks: every rank gets it, whatever the speeds. */
	static const struct proc asked[] = {
		{ 0, 3, "eth0:40", 0, 0 },
		{ 1, 3, "eth0:40", 0, 262144 },
		{ 2, 3, "eth0:40", 0, 0 },
	};
	static const struct proc differ[] = {
		{ 0, 2, "eth0:40", 0, 65536 },
		{ 1, 2, "eth0:40", 0, 32768 },
	};
	struct nzi_rail rails[2];
	struct nzi_boot_cfg cfg = { .rank = 0, .size = 1, .rails = rails };
	struct nzi_boot_job job;
	uint8_t msg[NZI_BOOT_HELLO_MAX];
	int bad = 0, port, e;
	size_t len;

	for (unsigned int i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (nzi_unit_for_speed(t[i].mbps) != t[i].unit) {
			tap_diag("%u Mbit/s: unit %u, want %u", t[i].mbps,
				 nzi_unit_for_speed(t[i].mbps), t[i].unit);
			bad++;
		}
	tap_ok(!bad, "nzi_unit_for_speed: 8 ms of the link, 16..64 KiB, 64 KiB unknown");
	tap_ok(nzi_unit_ok(4096) && nzi_unit_ok(1 << 22) && !nzi_unit_ok(0) &&
	       !nzi_unit_ok(2048) && !nzi_unit_ok(3 << 12) && !nzi_unit_ok(1 << 23),
	       "nzi_unit_ok: powers of two in NZ_MIN_UNIT..NZ_MAX_UNIT");

	check_unit("3 ranks, slowest slot link 20 Mbit/s", slowest, 3, 16384);
	check_unit("a slow rail on one rank only", noslot, 2, 65536);
	check_unit("no link reports its speed", unknown, 2, 65536);
	check_unit("rank 1 asks for 256 KiB", asked, 3, 262144);
	check_unit("ranks ask for different units", differ, 2, 0);

	cfg.nrails = make_rails(0, "eth0:40 eth1:1000", rails);
	e = nzi_bootstrap(&cfg, &job);
	tap_ok(!e && job.unit == 32768, "size 1: the unit from the local rails (%d, %u)",
	       e, e ? 0 : job.unit);
	if (!e)
		nzi_boot_job_free(&job);
	cfg.unit = 8192;
	e = nzi_bootstrap(&cfg, &job);
	tap_ok(!e && job.unit == 8192, "size 1: the unit asked for (%d)", e);
	if (!e)
		nzi_boot_job_free(&job);
	cfg.unit = 12288;
	tap_ok(nzi_bootstrap(&cfg, &job) == -EINVAL, "a unit not a power of two -> EINVAL");

	/* A hostile hello asking for a unit the module would refuse. */
	{
		static const struct proc one[] = { { 0, 2, "eth0", 0, 0 } };

		port = free_port();
		start_job(one, 1, port, 1500);
		len = hello(msg, 1, 2);
		put32(msg + NZI_BOOT_HDR_LEN + 12, 1000);
		e = send_expect_abort(port, msg, len);
		finish_job(1);
		tap_ok(e == EINVAL, "a hello asking for a 1000-byte unit is told EINVAL (%d)", e);
	}
}

static void test_duplicate(void)
{
	static const struct proc job[] = {
		{ 0, 3, "eth0", 0, 0 },
		{ 1, 3, "eth0", 0, 0 },
		{ 1, 3, "eth0", 0, 0 },	/* a second rank 1 */
		{ 2, 3, "eth0", 500, 0 },
	};
	int ok1, dup;

	run_job(job, 4, free_port(), 3000);
	ok1 = (res[1].ret == 0) + (res[2].ret == 0);
	dup = res[1].ret == -EEXIST ? 1 : res[2].ret == -EEXIST ? 2 : 0;
	tap_ok(ok1 == 1 && dup, "duplicate rank 1: one joins, the other gets -EEXIST (%d, %d)",
	       res[1].ret, res[2].ret);
	tap_ok(dup && strstr(res[dup].err, "already joined"),
	       "duplicate rank 1: its message says so (%s)", dup ? res[dup].err : "");
	tap_ok(!res[0].ret && !res[3].ret && same_job(0, 4),
	       "duplicate rank 1: the job forms without it");
}

static void test_single_and_args(void)
{
	struct nzi_rail rails[3];
	struct nzi_boot_cfg cfg = { .rank = 0, .size = 1, .rails = rails };
	struct nzi_boot_job job;
	int ret;

	cfg.nrails = make_rails(0, "ib0 eth0", rails);
	ret = nzi_bootstrap(&cfg, &job);
	tap_ok(!ret && job.nrails == 2 && !strcmp(job.rails[0], "ib0") && job.job_id,
	       "size 1: no network, every local rail is a slot (%d)", ret);
	if (!ret)
		nzi_boot_job_free(&job);
	cfg.nrails = 0;
	ret = nzi_bootstrap(&cfg, &job);
	tap_ok(!ret && job.nrails == 0, "size 1 without rails is legal (%d)", ret);
	nzi_boot_job_free(&job);

	cfg.size = 2;
	cfg.rank = 2;
	tap_ok(nzi_bootstrap(&cfg, &job) == -EINVAL, "rank >= size -> EINVAL");
	cfg.rank = 1;
	tap_ok(nzi_bootstrap(&cfg, &job) == -EINVAL, "no master address -> EINVAL");
	cfg.master_addr = "127.0.0.1";
	cfg.master_port = 70000;
	cfg.timeout_ms = 100;
	tap_ok(nzi_bootstrap(&cfg, &job) == -EINVAL, "port out of range -> EINVAL");
	cfg.master_port = 1;
	cfg.nrails = make_rails(1, "eth0 eth0", rails);
	tap_ok(nzi_bootstrap(&cfg, &job) == -EINVAL, "a rail named twice -> EINVAL");
	tap_ok(nzi_bootstrap(NULL, &job) == -EINVAL, "NULL configuration -> EINVAL");
}

/* ---- Environment ---- */

static const char *const env_vars[] = {
	"RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
	"MASTER_ADDR", "MASTER_PORT", "NEZHA_TIMEOUT_MS", NULL,
};

static void env_clear(void)
{
	for (int i = 0; env_vars[i]; i++)
		unsetenv(env_vars[i]);
}

/* env_set("RANK=1 WORLD_SIZE=2 ..."): a clean environment with these. */
static void env_set(const char *spec)
{
	char buf[256], *save, *tok;

	env_clear();
	snprintf(buf, sizeof(buf), "%s", spec);
	for (tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		char *eq = strchr(tok, '=');

		*eq = 0;
		setenv(tok, eq + 1, 1);
	}
}

static int env_fails(const char *spec, const char *mention)
{
	struct nzi_env e;
	int ret;

	env_set(spec);
	ret = nzi_env_parse(&e);
	if (ret != -EINVAL || !strstr(nz_last_error(), mention)) {
		tap_diag("\"%s\": %d \"%s\"", spec, ret, nz_last_error());
		return 0;
	}
	return 1;
}

static void test_env(void)
{
	struct nzi_env e;
	struct nz_comm *c = (struct nz_comm *)1;
	int ret;

	env_set("RANK=3 WORLD_SIZE=4 MASTER_ADDR=node0.example MASTER_PORT=29500");
	ret = nzi_env_parse(&e);
	tap_ok(!ret && e.rank == 3 && e.size == 4 && !strcmp(e.master_addr, "node0.example") &&
	       e.master_port == 29500 && e.timeout_ms == 0, "torchrun variables");
	env_set("OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 MASTER_ADDR=10.0.0.1 MASTER_PORT=1234 NEZHA_TIMEOUT_MS=1500");
	ret = nzi_env_parse(&e);
	tap_ok(!ret && e.rank == 1 && e.size == 2 && e.master_port == 1234 && e.timeout_ms == 1500,
	       "Open MPI variables and NEZHA_TIMEOUT_MS");
	env_set("RANK=0 WORLD_SIZE=3 OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 MASTER_ADDR=a MASTER_PORT=1");
	ret = nzi_env_parse(&e);
	tap_ok(!ret && e.rank == 0 && e.size == 3, "torchrun's variables win over Open MPI's");
	env_set("RANK=0 WORLD_SIZE=1");
	ret = nzi_env_parse(&e);
	tap_ok(!ret && e.size == 1 && !e.master_addr[0], "one rank needs no MASTER_ADDR/PORT");

	tap_ok(env_fails("", "RANK"), "nothing set -> EINVAL naming RANK");
	tap_ok(env_fails("RANK=0 MASTER_ADDR=a MASTER_PORT=1", "WORLD_SIZE"),
	       "RANK without WORLD_SIZE -> EINVAL");
	tap_ok(env_fails("OMPI_COMM_WORLD_RANK=0 MASTER_ADDR=a MASTER_PORT=1", "OMPI_COMM_WORLD_SIZE"),
	       "OMPI rank without size -> EINVAL");
	tap_ok(env_fails("RANK=0 WORLD_SIZE=2 MASTER_PORT=1", "MASTER_ADDR"),
	       "missing MASTER_ADDR -> EINVAL");
	tap_ok(env_fails("RANK=0 WORLD_SIZE=2 MASTER_ADDR=a", "MASTER_PORT"),
	       "missing MASTER_PORT -> EINVAL");
	tap_ok(env_fails("RANK=2 WORLD_SIZE=2 MASTER_ADDR=a MASTER_PORT=1", "RANK"),
	       "RANK >= WORLD_SIZE -> EINVAL");
	tap_ok(env_fails("RANK=x1 WORLD_SIZE=2 MASTER_ADDR=a MASTER_PORT=1", "RANK") &&
	       env_fails("RANK=1 WORLD_SIZE=2junk MASTER_ADDR=a MASTER_PORT=1", "WORLD_SIZE") &&
	       env_fails("RANK=-1 WORLD_SIZE=2 MASTER_ADDR=a MASTER_PORT=1", "RANK") &&
	       env_fails("RANK=0 WORLD_SIZE=0 MASTER_ADDR=a MASTER_PORT=1", "WORLD_SIZE") &&
	       env_fails("RANK=0 WORLD_SIZE=1025 MASTER_ADDR=a MASTER_PORT=1", "WORLD_SIZE"),
	       "malformed or out-of-range ranks and sizes -> EINVAL");
	tap_ok(env_fails("RANK=0 WORLD_SIZE=2 MASTER_ADDR=a MASTER_PORT=0", "MASTER_PORT") &&
	       env_fails("RANK=0 WORLD_SIZE=2 MASTER_ADDR=a MASTER_PORT=65536", "MASTER_PORT") &&
	       env_fails("RANK=0 WORLD_SIZE=2 MASTER_ADDR=a MASTER_PORT=0x10", "MASTER_PORT"),
	       "bad MASTER_PORT -> EINVAL");
	tap_ok(env_fails("RANK=0 WORLD_SIZE=1 NEZHA_TIMEOUT_MS=0", "NEZHA_TIMEOUT_MS") &&
	       env_fails("RANK=0 WORLD_SIZE=1 NEZHA_TIMEOUT_MS=5s", "NEZHA_TIMEOUT_MS"),
	       "bad NEZHA_TIMEOUT_MS -> EINVAL");

	env_clear();
	ret = nz_comm_init_env(&c);
	tap_ok(ret == -EINVAL && c == NULL && strstr(nz_last_error(), "RANK"),
	       "nz_comm_init_env without variables -> EINVAL, before touching the device");
	env_set("RANK=0 WORLD_SIZE=1");
	setenv("NEZHA_DEVICE", "/nonexistent/nezha", 1);
	ret = nz_comm_init_env(&c);
	tap_ok(ret == -ENOENT && strstr(nz_last_error(), "module"),
	       "nz_comm_init_env without the module -> ENOENT (%s)", nz_last_error());
	setenv("NEZHA_DEVICE", "/dev/null", 1);
	ret = nz_comm_init_env(&c);
	tap_ok(ret == -ENODEV || ret == -EPERM || ret == -ENOSYS,
	       "nz_comm_init on a file that is not /dev/nezha fails (%d: %s)", ret, nz_last_error());
	setenv("NEZHA_RAILS", "a,b,c,d,e,f,g,h,i", 1);
	tap_ok(nz_comm_init_env(&c) == -EINVAL, "NEZHA_RAILS with more than %d names -> EINVAL",
	       NZ_MAX_RAILS);
	unsetenv("NEZHA_RAILS");
	unsetenv("NEZHA_DEVICE");
	env_clear();
}

static void test_comm_opts(void)
{
	const char *const many[] = { "a", "b", "c", "d", "e", "f", "g", "h", "i", NULL };
	const char *const empty[] = { NULL };
	struct nz_comm_opts o = { .rank = 0, .size = 2 };
	struct nz_comm *c;

	tap_ok(nz_comm_init(&c, NULL) == -EINVAL && nz_comm_init(NULL, &o) == -EINVAL,
	       "nz_comm_init: NULL arguments -> EINVAL");
	tap_ok(nz_comm_init(&c, &o) == -EINVAL && strstr(nz_last_error(), "master"),
	       "nz_comm_init: 2 ranks without a master -> EINVAL");
	o.master_addr = "127.0.0.1";
	o.master_port = 29500;
	o.rank = 2;
	tap_ok(nz_comm_init(&c, &o) == -EINVAL, "nz_comm_init: rank >= size -> EINVAL");
	o.rank = 0;
	o.flags = 0x80;
	tap_ok(nz_comm_init(&c, &o) == -EINVAL, "nz_comm_init: unknown flag -> EINVAL");
	o.flags = 0;
	o.unit = 100;
	tap_ok(nz_comm_init(&c, &o) == -EINVAL, "nz_comm_init: unit below NZ_MIN_UNIT -> EINVAL");
	o.unit = 0;
	o.rails = many;
	tap_ok(nz_comm_init(&c, &o) == -EINVAL, "nz_comm_init: more than NZ_MAX_RAILS names -> EINVAL");
	o.rails = empty;
	tap_ok(nz_comm_init(&c, &o) == -EINVAL, "nz_comm_init: an empty rail list -> EINVAL");
}

static void test_slots(void)
{
	struct nzi_rail r0[3], r1[2];
	const struct nzi_rail *rails[2] = { r0, r1 };
	unsigned int n[2];
	struct nzi_boot_job job = { 0 };

	n[0] = make_rails(0, "ib0 eth0 ib0", r0);	/* a name twice */
	n[1] = make_rails(1, "eth0 ib0", r1);
	tap_ok(!nzi_boot_slots(&job, 2, rails, n) && job.nrails == 2 &&
	       !strcmp(job.rails[0], "ib0") && !strcmp(job.rails[1], "eth0") &&
	       job.addrs[3].addr == fake_addr(1, "eth0").addr,
	       "nzi_boot_slots: a name listed twice makes one slot; table by name");
	nzi_boot_job_free(&job);
}

int main(void)
{
	res = mmap(NULL, MAXP * sizeof(*res), PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (res == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	test_slots();
	test_single_and_args();
	test_env();
	test_comm_opts();
	test_formation();
	test_duplicate();
	test_strangers();
	test_units();
	test_timeouts();
	tap_plan(tap_n);
	return tap_exit();
}
