// SPDX-License-Identifier: GPL-2.0
/*
 * Host unit tests of libnezha's rendezvous (bootstrap.c) and environment
 * parsing.  Each job is a set of forked processes that rendezvous on
 * 127.0.0.1 with fake rail lists (the module is not needed: the rail list
 * is an input of the bootstrap); results come back through shared memory.
 * Timeouts are short so that the whole file runs in a few seconds.
 *
 * Every job runs under a job key drawn at start; strangers (the test
 * itself, speaking the protocol byte by byte) have none, another one, or
 * replay what they recorded, and must neither claim a rank nor learn the
 * job's secret (issue 20, defect 5).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "internal.h"
#include "sha256.h"
#include "tap.h"

#define MAXP		8	/* processes per job */
#define TMO		800	/* ms: rendezvous timeout of the failure cases */

struct result {
	int ret;		/* nzi_bootstrap()'s result; 1000 = died */
	int64_t elapsed_ms;
	uint64_t job_id;
	uint8_t nonce[NZI_NONCE_LEN];
	uint8_t secret[NZ_SECRET_LEN];
	unsigned int size, nrails, rejected, bad_mac, unit;
	char rails[NZ_MAX_RAILS][NZ_RAIL_NAME_LEN];
	struct nz_comm_addr addrs[MAXP * NZ_MAX_RAILS];
	char err[256];
};

struct proc {
	int rank, size;
	const char *rails;	/* space-separated names, each NAME[:MBPS] */
	int delay_ms;		/* start this much later */
	unsigned int unit;	/* chunk unit asked for, 0 = chosen */
	const uint8_t *key;	/* NULL: the job key */
	int port;		/* 0: the job's port (else a proxy's) */
};

static struct result *res;	/* MAXP entries, shared with the children */
static uint8_t job_key[NZ_JOB_KEY_LEN], other_key[NZ_JOB_KEY_LEN];
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
		.master_port = p->port && p->rank ? p->port : port,
		.timeout_ms = timeout_ms, .rails = rails, .unit = p->unit,
		.key = p->key ? p->key : job_key,
		.verbose = getenv("NZ_TEST_VERBOSE") != NULL,
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
		memcpy(r->nonce, job.nonce, sizeof(r->nonce));
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
	r->bad_mac = job.bad_mac;
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
		{ 0, 2, "eth0 eth1", 200, 0, NULL, 0 },
		{ 1, 2, "eth1 eth0", 0, 0, NULL, 0 },
	};
	/* Rank 2 has no ib0: it is not a slot.  Rank 1 lists another order. */
	static const struct proc three[] = {
		{ 0, 3, "eth0 ib0 eth1", 0, 0, NULL, 0 },
		{ 1, 3, "eth1 ib0 eth0", 0, 0, NULL, 0 },
		{ 2, 3, "eth0 eth1", 0, 0, NULL, 0 },
	};
	/* roce1 is missing on rank 4 only; eth1 only on rank 0. */
	static const struct proc five[] = {
		{ 0, 5, "ib0 roce1 eth0 eth1", 0, 0, NULL, 0 },
		{ 1, 5, "eth0 ib0 roce1", 0, 0, NULL, 0 },
		{ 2, 5, "roce1 ib0 eth0", 30, 0, NULL, 0 },
		{ 3, 5, "eth0 roce1 ib0", 0, 0, NULL, 0 },
		{ 4, 5, "ib0 eth0", 60, 0, NULL, 0 },
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
		{ 0, 3, "eth0", 0, 0, NULL, 0 },
		{ 1, 3, "eth0", 0, 0, NULL, 0 },
	};
	static const struct proc no_root[] = {
		{ 1, 2, "eth0", 0, 0, NULL, 0 },
	};
	static const struct proc no_common[] = {
		{ 0, 2, "eth0", 0, 0, NULL, 0 },
		{ 1, 2, "ib0", 0, 0, NULL, 0 },
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

/* Connect to rank 0 and take its challenge: fd, or -1. */
static int stranger_connect(int port, uint8_t *nonce_s)
{
	uint8_t ch[NZI_BOOT_CHALLENGE_LEN];
	struct timeval tv = { .tv_sec = 3 };
	size_t got = 0;
	ssize_t n;
	int fd = connect_retry(port);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	while (got < sizeof(ch) && (n = recv(fd, ch + got, sizeof(ch) - got, 0)) > 0)
		got += (size_t)n;
	if (got != sizeof(ch) || nzi_boot_parse_challenge(ch, got, nonce_s)) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * Send msg on fd and read rank 0's answer until it closes: the errno of
 * its ABORT, 0 for none, -2 for any other answer (a WELCOME: a stranger
 * was let in).
 */
static int answer_of(int fd, const uint8_t *msg, size_t len)
{
	uint8_t ans[512];
	size_t got = 0;
	ssize_t n;
	uint32_t e;

	send(fd, msg, len, MSG_NOSIGNAL);
	while ((n = recv(fd, ans + got, sizeof(ans) - got, 0)) > 0 && got + (size_t)n < sizeof(ans))
		got += (size_t)n;
	close(fd);
	if (got < NZI_BOOT_HDR_LEN)
		return 0;
	if (ntohs(*(uint16_t *)(ans + 6)) != NZI_BOOT_ABORT || got < NZI_BOOT_HDR_LEN + 4)
		return -2;
	memcpy(&e, ans + NZI_BOOT_HDR_LEN, 4);
	return (int)ntohl(e);
}

/* Send a raw message after the challenge; see answer_of() (-1: no challenge). */
static int send_expect_abort(int port, const uint8_t *msg, size_t len)
{
	uint8_t nonce_s[NZI_NONCE_LEN];
	int fd = stranger_connect(port, nonce_s);

	return fd < 0 ? -1 : answer_of(fd, msg, len);
}

/* A HELLO of rank of a job of size with one rail, answering nonce_s under key. */
static size_t hello(uint8_t *buf, const uint8_t *key, const uint8_t *nonce_s,
		    int rank, int size)
{
	uint8_t nonce_c[NZI_NONCE_LEN];
	struct nzi_hello_auth auth = { .key = key, .nonce_s = nonce_s, .nonce_c = nonce_c };
	struct nzi_rail r[1];

	memset(nonce_c, rank, sizeof(nonce_c));
	make_rails(rank, "eth0", r);
	return nzi_boot_encode_hello(buf, &auth, rank, size, r, 1, 0);
}

/* Send a HELLO under key (tweak: 1 = 5 rails announced, 2 = unit 1000). */
static int hello_expect_abort(int port, const uint8_t *key, int rank, int size, int tweak)
{
	uint8_t nonce_s[NZI_NONCE_LEN], msg[NZI_BOOT_HELLO_MAX];
	int fd = stranger_connect(port, nonce_s);
	size_t len;

	if (fd < 0)
		return -1;
	len = hello(msg, key, nonce_s, rank, size);
	if (tweak) {	/* change a field, then MAC it again under key */
		struct nzi_hmac m;

		put32(msg + NZI_BOOT_HDR_LEN + (tweak == 1 ? 8 : 12), tweak == 1 ? 5 : 1000);
		nzi_hmac_init(&m, key, NZ_JOB_KEY_LEN);
		nzi_hmac_update(&m, "nezha rendezvous v3 hello", 26);
		nzi_hmac_update(&m, nonce_s, NZI_NONCE_LEN);
		nzi_hmac_update(&m, msg, len - NZI_MAC_LEN);
		nzi_hmac_final(&m, msg + len - NZI_MAC_LEN);
	}
	return answer_of(fd, msg, len);
}

static void test_strangers(void)
{
	static const struct proc job[] = {
		{ 0, 3, "eth0", 0, 0, NULL, 0 },
		{ 1, 3, "eth0", 600, 0, NULL, 0 },
		{ 2, 3, "eth0", 600, 0, NULL, 0 },
		{ 3, 4, "eth0", 100, 0, NULL, 0 },	/* a rank of a 4-rank job */
	};
	uint8_t msg[NZI_BOOT_HELLO_MAX + 64], nonce_s[NZI_NONCE_LEN];
	int port = free_port(), idle, fd, e1, e2, e3, e4, e5, e6, e7;
	size_t len;

	start_job(job, 4, port, 4000);
	idle = connect_retry(port);	/* connects and never says a word */
	/* Garbage. */
	memset(msg, 0x5a, 64);
	e1 = send_expect_abort(port, msg, 64);
	/* A hello with a wrong magic. */
	memset(nonce_s, 0, sizeof(nonce_s));
	len = hello(msg, job_key, nonce_s, 1, 3);
	put32(msg, 0x12345678);
	e2 = send_expect_abort(port, msg, len);
	/* Right magic, unknown protocol version. */
	len = hello(msg, job_key, nonce_s, 1, 3);
	msg[4] = 0;
	msg[5] = 99;
	e3 = send_expect_abort(port, msg, len);
	/* Rank 1 without the key (a key of its own). */
	e4 = hello_expect_abort(port, other_key, 1, 3, 0);
	/* With the key: a rank out of range, a malformed rail list, a bad unit. */
	e5 = hello_expect_abort(port, job_key, 7, 3, 0);
	e6 = hello_expect_abort(port, job_key, 1, 3, 1);
	e7 = hello_expect_abort(port, job_key, 1, 3, 2);
	/* A real rank 1 that leaves before the job forms. */
	fd = stranger_connect(port, nonce_s);
	if (fd >= 0) {
		len = hello(msg, job_key, nonce_s, 1, 3);
		send(fd, msg, len, MSG_NOSIGNAL);
		usleep(50000);
		close(fd);
	}
	finish_job(4);
	if (idle >= 0)
		close(idle);

	tap_ok(e1 == 0 && e2 == 0, "garbage and a wrong magic are dropped without an answer (%d, %d)",
	       e1, e2);
	tap_ok(e3 == EPROTO, "another protocol version is told EPROTO (%d)", e3);
	tap_ok(e4 == EKEYREJECTED, "a HELLO under another key is told EKEYREJECTED (%d)", e4);
	tap_ok(e5 == EINVAL, "rank >= size, with the key, is told EINVAL (%d)", e5);
	tap_ok(e6 == EPROTO, "a malformed rail list is told EPROTO (%d)", e6);
	tap_ok(e7 == EINVAL, "a hello asking for a 1000-byte unit is told EINVAL (%d)", e7);
	tap_ok(res[3].ret == -EINVAL && strstr(res[3].err, "size"),
	       "a rank of a job of another size gets -EINVAL (%d: %s)", res[3].ret, res[3].err);
	tap_ok(!res[0].ret && !res[1].ret && !res[2].ret && same_job(0, 3),
	       "strangers and a rank that left: the job still forms (%d %d %d)",
	       res[0].ret, res[1].ret, res[2].ret);
	tap_ok(res[0].rejected >= 8 && res[0].bad_mac == 1,
	       "rank 0 counted the dropped connections (%u), one without the key (%u)",
	       res[0].rejected, res[0].bad_mac);
}

/*
 * A stranger reaches rank 0 before the real rank 1 and claims rank 1:
 * without the key, with another key, and with a HELLO under the key of
 * another job's challenge.  Before the key (issue 20) it got the WELCOME,
 * the job's secret in it, and the real rank 1 was shut out.
 */
static void test_claim(void)
{
	static const struct proc job[] = {
		{ 0, 2, "eth0", 0, 0, NULL, 0 },
		{ 1, 2, "eth0", 500, 0, NULL, 0 },
	};
	uint8_t msg[NZI_BOOT_HELLO_MAX], nonce_s[NZI_NONCE_LEN], zero[NZ_JOB_KEY_LEN] = { 0 };
	int port = free_port(), e1, e2, e3 = -1, fd;
	size_t len;

	start_job(job, 2, port, 3000);
	e1 = hello_expect_abort(port, zero, 1, 2, 0);		/* no key (all zero) */
	e2 = hello_expect_abort(port, other_key, 1, 2, 0);	/* another key */
	fd = stranger_connect(port, nonce_s);
	if (fd >= 0) {		/* the key, but another challenge */
		nonce_s[0] ^= 1;
		len = hello(msg, job_key, nonce_s, 1, 2);
		e3 = answer_of(fd, msg, len);
	}
	finish_job(2);
	tap_ok(e1 == EKEYREJECTED && e2 == EKEYREJECTED && e3 == EKEYREJECTED,
	       "a stranger claiming rank 1 first, without the key, with another, or off the challenge: EKEYREJECTED, no WELCOME (%d, %d, %d)",
	       e1, e2, e3);
	tap_ok(!res[0].ret && !res[1].ret && same_job(0, 2),
	       "the real rank 1, coming later, joins and the job forms (%d, %d: %s)",
	       res[0].ret, res[1].ret, res[1].err);
	tap_ok(res[0].bad_mac == 3, "rank 0 counted 3 HELLOs whose MAC failed (%u)", res[0].bad_mac);
}

/* ---- A recording proxy in front of rank 0 ---- */

#define REC_MAX	(64 * 1024)
struct recording {
	size_t n[2];		/* [0] rank -> rank 0, [1] rank 0 -> rank */
	uint8_t buf[2][REC_MAX];
	int conns;
};
static struct recording *rec;

/* Relay every connection to listen_port on to port, recording both ways. */
static pid_t start_proxy(int listen_port, int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)listen_port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	pid_t pid;

	memset(rec, 0, sizeof(*rec));
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 8))
		return -1;
	fflush(stdout);
	pid = fork();
	if (pid) {
		close(lfd);
		return pid;
	}
	alarm(10);
	for (;;) {
		int c = accept(lfd, NULL, NULL), u = c < 0 ? -1 : connect_retry(port);
		struct pollfd pfd[2] = { { .fd = c, .events = POLLIN }, { .fd = u, .events = POLLIN } };

		if (u < 0) {
			close(c);
			continue;
		}
		rec->conns++;
		while (poll(pfd, 2, 5000) > 0) {
			int from = pfd[0].revents ? 0 : 1;
			uint8_t b[4096];
			ssize_t n = recv(pfd[from].fd, b, sizeof(b), 0);

			if (n <= 0)
				break;
			if (rec->n[from] + (size_t)n <= REC_MAX) {
				memcpy(rec->buf[from] + rec->n[from], b, (size_t)n);
				rec->n[from] += (size_t)n;
			}
			send(pfd[!from].fd, b, (size_t)n, MSG_NOSIGNAL);
		}
		close(c);
		close(u);
	}
}

static void stop_proxy(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static bool recorded(const void *what, size_t len)
{
	return memmem(rec->buf[0], rec->n[0], what, len) ||
	       memmem(rec->buf[1], rec->n[1], what, len);
}

/*
 * Rank 1 of job A talks to rank 0 through a recording proxy.  The bytes:
 * the job id and job nonce travel (the recording works), the secret and
 * the key do not (before issue 20 the WELCOME carried the secret).  Then
 * job B under the same key: a stranger replays rank 1's recorded HELLO
 * first, and is refused; the secrets of A and B differ.
 */
static void test_replay_and_wire(void)
{
	struct proc job[] = {
		{ 0, 2, "eth0 eth1", 0, 0, NULL, 0 },
		{ 1, 2, "eth0 eth1", 200, 0, NULL, 0 },
	};
	uint8_t nonce_s[NZI_NONCE_LEN], id[8], secret_a[NZ_SECRET_LEN], hello_a[NZI_BOOT_HELLO_MAX];
	size_t hlen = 0;
	int port = free_port(), pport = free_port(), e = -1, fd;
	uint64_t id_a;
	pid_t proxy;

	proxy = start_proxy(pport, port);
	job[1].port = pport;
	run_job(job, 2, port, 3000);
	if (proxy > 0)
		stop_proxy(proxy);
	tap_ok(proxy > 0 && !res[0].ret && !res[1].ret && same_job(0, 2) && rec->conns == 1,
	       "job A forms with rank 1 behind a recording proxy (%d, %d, %d connection)",
	       res[0].ret, res[1].ret, rec->conns);
	id_a = res[0].job_id;
	for (int i = 0; i < 8; i++)
		id[i] = (uint8_t)(id_a >> (56 - 8 * i));
	tap_ok(recorded(id, 8) && recorded(res[0].nonce, NZI_NONCE_LEN),
	       "the recording holds the WELCOME: job id and job nonce (%zu and %zu bytes each way)",
	       rec->n[0], rec->n[1]);
	tap_ok(!recorded(res[0].secret, NZ_SECRET_LEN) && !recorded(res[1].secret, NZ_SECRET_LEN),
	       "the job's secret is never on the wire");
	tap_ok(!recorded(job_key, NZ_JOB_KEY_LEN), "nor is the job key");
	memcpy(secret_a, res[0].secret, sizeof(secret_a));
	/* Rank 1's HELLO: what it sent after connecting. */
	if (rec->n[0] >= NZI_BOOT_HDR_LEN) {
		hlen = NZI_BOOT_HDR_LEN + ntohl(*(uint32_t *)(rec->buf[0] + 8));
		if (hlen <= sizeof(hello_a) && hlen <= rec->n[0])
			memcpy(hello_a, rec->buf[0], hlen);
		else
			hlen = 0;
	}

	/* Job B, same key: the stranger replays the HELLO before rank 1 comes. */
	job[1].port = 0;
	job[1].delay_ms = 500;
	port = free_port();
	start_job(job, 2, port, 3000);
	fd = stranger_connect(port, nonce_s);
	if (fd >= 0 && hlen)
		e = answer_of(fd, hello_a, hlen);
	finish_job(2);
	tap_ok(hlen && e == EKEYREJECTED, "job B: rank 1's HELLO of job A, replayed, is told EKEYREJECTED (%d)", e);
	tap_ok(!res[0].ret && !res[1].ret && same_job(0, 2) && res[0].bad_mac == 1,
	       "job B: the real rank 1 joins after the replay (%d, %d, %u dropped)",
	       res[0].ret, res[1].ret, res[0].bad_mac);
	tap_ok(!res[0].ret && memcmp(res[0].secret, secret_a, NZ_SECRET_LEN) &&
	       memcmp(res[0].secret, job_key, NZ_SECRET_LEN),
	       "jobs A and B, one key: two secrets, neither of them the key");
}

/* A rank with another key is refused at once; rank 0 says why it waited. */
static void test_wrong_key(void)
{
	static const struct proc job[] = {
		{ 0, 2, "eth0", 0, 0, NULL, 0 },
		{ 1, 2, "eth0", 0, 0, other_key, 0 },
	};

	run_job(job, 2, free_port(), TMO);
	tap_ok(res[1].ret == -EKEYREJECTED && strstr(res[1].err, "key") &&
	       res[1].elapsed_ms < TMO,
	       "a rank with another key gets -EKEYREJECTED before the timeout (%d, %lld ms: %s)",
	       res[1].ret, (long long)res[1].elapsed_ms, res[1].err);
	tap_ok(res[0].ret == -ETIMEDOUT && strstr(res[0].err, "another key"),
	       "rank 0 times out saying a HELLO under another key came (%s)", res[0].err);
}

/* Rank 0 listens on MASTER_ADDR only, never on every address. */
static void test_listen(void)
{
	static const struct proc one[] = { { 0, 2, "eth0", 0, 0, NULL, 0 } };
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(0x7f000002) };	/* 127.0.0.2 */
	struct nzi_rail rails[1];
	struct nzi_boot_cfg cfg = { .rank = 0, .size = 2, .master_addr = "192.0.2.1",
				    .master_port = free_port(), .timeout_ms = 2000,
				    .rails = rails, .key = job_key };
	struct nzi_boot_job job;
	int64_t t0 = nzi_now_ms();
	int ret, fd, port = free_port(), conn;

	cfg.nrails = make_rails(0, "eth0", rails);
	ret = nzi_bootstrap(&cfg, &job);	/* TEST-NET-1: no host has it */
	tap_ok(ret == -EADDRNOTAVAIL && strstr(nz_last_error(), "MASTER_ADDR") &&
	       nzi_now_ms() - t0 < 1000,
	       "MASTER_ADDR not an address of rank 0: -EADDRNOTAVAIL at once, no listening on every address (%d: %s)",
	       ret, nz_last_error());
	cfg.master_addr = "no-such-host.invalid";
	ret = nzi_bootstrap(&cfg, &job);
	tap_ok(ret == -EADDRNOTAVAIL && strstr(nz_last_error(), "resolve"),
	       "MASTER_ADDR that does not resolve: -EADDRNOTAVAIL (%s)", nz_last_error());

	start_job(one, 1, port, 800);
	fd = connect_retry(port);	/* 127.0.0.1: rank 0 is there */
	sa.sin_port = htons((uint16_t)port);
	conn = socket(AF_INET, SOCK_STREAM, 0);
	ret = connect(conn, (struct sockaddr *)&sa, sizeof(sa)) ? errno : 0;
	close(conn);
	if (fd >= 0)
		close(fd);
	finish_job(1);
	tap_ok(fd >= 0 && ret == ECONNREFUSED,
	       "rank 0 on 127.0.0.1 is not reachable on 127.0.0.2 (%s)", strerror(ret));
}

/*
 * Strangers fill rank 0's table of unauthenticated connections and keep
 * opening more while rank 1 joins.  Before issue 20 a full table refused
 * the newcomer: rank 1 got -ECONNRESET.
 */
static void test_flood(void)
{
	static const struct proc job[] = {
		{ 0, 2, "eth0", 0, 0, NULL, 0 },
		{ 1, 2, "eth0", 500, 0, NULL, 0 },
	};
	int port = free_port(), status = 0;
	pid_t flooder;

	start_job(job, 2, port, 4000);
	fflush(stdout);
	flooder = fork();
	if (!flooder) {
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
					  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		static int fds[400];
		int n = 0, made = 0;
		int64_t end = nzi_now_ms() + 1500;

		alarm(5);
		close(connect_retry(port));	/* rank 0 listens */
		while (nzi_now_ms() < end) {	/* 80 at once, then one every ms */
			if (n == 400) {
				for (int i = 0; i < 200; i++)
					close(fds[i]);
				memmove(fds, fds + 200, 200 * sizeof(fds[0]));
				n = 200;
			}
			/* Not waiting for the handshake: a full backlog stalls nobody. */
			fds[n] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
			connect(fds[n++], (struct sockaddr *)&sa, sizeof(sa));
			if (++made > 80)
				usleep(1000);
		}
		_exit(0);
	}
	finish_job(2);
	waitpid(flooder, &status, 0);
	tap_ok(!res[0].ret && !res[1].ret && same_job(0, 2),
	       "a flood of idle connections: rank 1 still joins (%d, %d in %lld ms)",
	       res[0].ret, res[1].ret, (long long)res[1].elapsed_ms);
	tap_ok(res[0].rejected >= 64, "rank 0 dropped the oldest strangers (%u)", res[0].rejected);
}

/* ---- Job keys ---- */

static char keydir[] = "/tmp/nz-test-key.XXXXXX";

/* A key file of mode with content; returns its path (static buffer). */
static const char *key_file(const char *name, mode_t mode, const char *content)
{
	static char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", keydir, name);
	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd >= 0) {
		if (write(fd, content, strlen(content)) < 0)
			tap_diag("write %s: %s", path, strerror(errno));
		fchmod(fd, mode);
		close(fd);
	}
	return path;
}

static void test_keys(void)
{
	char hex[NZ_JOB_KEY_HEX_LEN + 1], hex2[NZ_JOB_KEY_HEX_LEN + 1], line[100];
	uint8_t k1[NZ_JOB_KEY_LEN], k2[NZ_JOB_KEY_LEN];
	struct nz_comm_opts o = { .rank = 0, .size = 2 };
	struct nzi_key k;
	bool hexok = true;
	int ret;

	tap_ok(!nz_job_key_generate(hex, sizeof(hex)) && !nz_job_key_generate(hex2, sizeof(hex2)) &&
	       strlen(hex) == NZ_JOB_KEY_HEX_LEN && strcmp(hex, hex2),
	       "nz_job_key_generate: 64 hex digits, a new key each time");
	for (int i = 0; hex[i]; i++)
		hexok &= !!strchr("0123456789abcdef", hex[i]);
	tap_ok(hexok && nz_job_key_generate(hex2, NZ_JOB_KEY_HEX_LEN) == -ENOSPC,
	       "nz_job_key_generate: lowercase hex; -ENOSPC without room for the NUL");
	snprintf(line, sizeof(line), "  %s\n", hex);
	tap_ok(!nzi_key_parse(line, strlen(line), k1) && !nzi_key_parse(hex, 64, k2) &&
	       !memcmp(k1, k2, sizeof(k1)),
	       "nzi_key_parse: blanks around the digits are allowed");
	for (int i = 0; i < 64; i++)
		line[i] = (char)(hex[i] >= 'a' ? hex[i] - 32 : hex[i]);
	tap_ok(!nzi_key_parse(line, 64, k2) && !memcmp(k1, k2, sizeof(k1)),
	       "nzi_key_parse: uppercase digits are the same key");
	tap_ok(nzi_key_parse(hex, 63, k2) == -EINVAL && nzi_key_parse("zz", 2, k2) == -EINVAL,
	       "nzi_key_parse: 63 digits, or not hex -> EINVAL");
	line[5] = 'g';
	tap_ok(nzi_key_parse(line, 64, k2) == -EINVAL, "nzi_key_parse: a non-hex digit inside -> EINVAL");

	if (!mkdtemp(keydir)) {
		tap_skip("key files", "mkdtemp: %s", strerror(errno));
		return;
	}
	snprintf(line, sizeof(line), "%s\n", hex);
	tap_ok(!nz_job_key_read_file(key_file("ok", 0600, line), k2) && !memcmp(k1, k2, sizeof(k1)),
	       "a key file of mode 0600 is read (%s)", nz_last_error());
	tap_ok(!nz_job_key_read_file(key_file("ro", 0400, line), k2),
	       "a key file of mode 0400 is read");
	ret = nz_job_key_read_file(key_file("world", 0644, line), k2);
	tap_ok(ret == -EPERM && strstr(nz_last_error(), "0644") && strstr(nz_last_error(), "chmod 600"),
	       "a world-readable key file (0644) is refused with -EPERM (%s)", nz_last_error());
	tap_ok(nz_job_key_read_file(key_file("group", 0640, line), k2) == -EPERM &&
	       nz_job_key_read_file(key_file("gw", 0620, line), k2) == -EPERM &&
	       nz_job_key_read_file(key_file("ox", 0601, line), k2) == -EPERM,
	       "group-readable (0640), group-writable (0620), other-executable (0601): -EPERM");
	tap_ok(nz_job_key_read_file(key_file("short", 0600, "abcd\n"), k2) == -EINVAL &&
	       strstr(nz_last_error(), "64 hex digits"),
	       "a key file without a key -> EINVAL (%s)", nz_last_error());
	tap_ok(nz_job_key_read_file(keydir, k2) == -EINVAL &&
	       nz_job_key_read_file("/nonexistent/key", k2) == -ENOENT,
	       "a directory -> EINVAL, a missing file -> ENOENT");
	if (geteuid() == 0 && !chmod(keydir, 0711)) {
		const char *p = key_file("theirs", 0600, line);
		int mine = -1, theirs = -1, own = -1;

		/* As user 4242: root's 0600 key file cannot even be opened. */
		if (!setegid(4242) && !seteuid(4242)) {
			mine = nz_job_key_read_file(p, k2);
			if (seteuid(0) || setegid(0))
				tap_diag("cannot get root back");
		}
		/* The file becomes user 4242's: root refuses it, 4242 reads it. */
		if (!chown(p, 4242, 4242)) {
			theirs = nz_job_key_read_file(p, k2);
			if (!setegid(4242) && !seteuid(4242)) {
				own = nz_job_key_read_file(p, k2);
				if (seteuid(0) || setegid(0))
					tap_diag("cannot get root back");
			}
		}
		tap_ok(mine == -EACCES, "another user cannot open a 0600 key file (%d)", mine);
		tap_ok(theirs == -EPERM, "a key file of another user is refused, even by root (%d)", theirs);
		tap_ok(own == 0, "its owner reads it (%d)", own);
	} else {
		tap_skip("another user cannot open a 0600 key file", "not root");
		tap_skip("a key file of another user is refused", "not root");
		tap_skip("its owner reads it", "not root");
	}

	/* Where nz_comm_init() finds the key. */
	unsetenv("NEZHA_JOB_KEY");
	unsetenv("NEZHA_JOB_KEY_FILE");
	unsetenv("NEZHA_INSECURE");
	unsetenv("NEZHA_KEY_FROM_STORE");
	ret = nzi_key_resolve(&o, false, &k);
	tap_ok(ret == -ENOKEY && strstr(nz_last_error(), "NEZHA_JOB_KEY") &&
	       strstr(nz_last_error(), "NEZHA_JOB_KEY_FILE") && strstr(nz_last_error(), "NEZHA_INSECURE"),
	       "no key for 2 ranks -> ENOKEY naming the variables (%s)", nz_last_error());
	o.size = 1;
	tap_ok(!nzi_key_resolve(&o, false, &k) && k.mode == NZI_KEY_GIVEN,
	       "one rank needs no key");
	o.size = 2;
	setenv("NEZHA_JOB_KEY", hex, 1);
	tap_ok(!nzi_key_resolve(&o, false, &k) && !memcmp(k.key, k1, sizeof(k1)),
	       "NEZHA_JOB_KEY is the key");
	o.key = job_key;
	tap_ok(!nzi_key_resolve(&o, false, &k) && !memcmp(k.key, job_key, sizeof(k1)),
	       "opts.key wins over the environment");
	o.key = NULL;
	setenv("NEZHA_JOB_KEY_FILE", key_file("ok", 0600, line), 1);
	tap_ok(nzi_key_resolve(&o, false, &k) == -EINVAL, "both NEZHA_JOB_KEY and NEZHA_JOB_KEY_FILE -> EINVAL");
	unsetenv("NEZHA_JOB_KEY");
	tap_ok(!nzi_key_resolve(&o, false, &k) && !memcmp(k.key, k1, sizeof(k1)),
	       "NEZHA_JOB_KEY_FILE is read");
	setenv("NEZHA_JOB_KEY_FILE", key_file("world", 0644, line), 1);
	tap_ok(nzi_key_resolve(&o, false, &k) == -EPERM, "NEZHA_JOB_KEY_FILE of mode 0644 -> EPERM");
	unsetenv("NEZHA_JOB_KEY_FILE");
	setenv("NEZHA_JOB_KEY", "0123", 1);
	tap_ok(nzi_key_resolve(&o, false, &k) == -EINVAL && strstr(nz_last_error(), "NEZHA_JOB_KEY"),
	       "a malformed NEZHA_JOB_KEY -> EINVAL naming it");
	unsetenv("NEZHA_JOB_KEY");
	setenv("NEZHA_KEY_FROM_STORE", "1", 1);
	tap_ok(nzi_key_resolve(&o, false, &k) == -EINVAL && !nzi_key_resolve(&o, true, &k) &&
	       k.mode == NZI_KEY_FROM_STORE,
	       "NEZHA_KEY_FROM_STORE=1: only through a store");
	unsetenv("NEZHA_KEY_FROM_STORE");
	setenv("NEZHA_INSECURE", "0", 1);
	tap_ok(nzi_key_resolve(&o, false, &k) == -ENOKEY, "NEZHA_INSECURE=0 is no opt-out");
	setenv("NEZHA_INSECURE", "1", 1);
	memset(k2, 0, sizeof(k2));
	tap_ok(!nzi_key_resolve(&o, false, &k) && k.mode == NZI_KEY_INSECURE &&
	       !memcmp(k.key, k2, sizeof(k2)),
	       "NEZHA_INSECURE=1: the public all-zero key");
	unsetenv("NEZHA_INSECURE");

	unlink(key_file("ok", 0600, ""));
	unlink(key_file("ro", 0600, ""));
	unlink(key_file("world", 0600, ""));
	unlink(key_file("group", 0600, ""));
	unlink(key_file("gw", 0600, ""));
	unlink(key_file("ox", 0600, ""));
	unlink(key_file("short", 0600, ""));
	unlink(key_file("theirs", 0600, ""));
	rmdir(keydir);
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
		{ 0, 3, "eth0:1000 eth1:100", 0, 0, NULL, 0 },
		{ 1, 3, "eth1 eth0:1000", 0, 0, NULL, 0 },
		{ 2, 3, "eth0:25000 eth1:20", 0, 0, NULL, 0 },
	};
	/* ib0 at 10 is on rank 0 only: not a slot, so it does not count. */
	static const struct proc noslot[] = {
		{ 0, 2, "eth0:1000 ib0:10", 0, 0, NULL, 0 },
		{ 1, 2, "eth0:1000", 0, 0, NULL, 0 },
	};
	static const struct proc unknown[] = {
		{ 0, 2, "eth0 eth1", 0, 0, NULL, 0 },
		{ 1, 2, "eth0 eth1", 0, 0, NULL, 0 },
	};
	/* One rank asks: every rank gets it, whatever the speeds. */
	static const struct proc asked[] = {
		{ 0, 3, "eth0:40", 0, 0, NULL, 0 },
		{ 1, 3, "eth0:40", 0, 262144, NULL, 0 },
		{ 2, 3, "eth0:40", 0, 0, NULL, 0 },
	};
	static const struct proc differ[] = {
		{ 0, 2, "eth0:40", 0, 65536, NULL, 0 },
		{ 1, 2, "eth0:40", 0, 32768, NULL, 0 },
	};
	struct nzi_rail rails[2];
	struct nzi_boot_cfg cfg = { .rank = 0, .size = 1, .rails = rails };
	struct nzi_boot_job job;
	int bad = 0, e;

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
}

static void test_duplicate(void)
{
	static const struct proc job[] = {
		{ 0, 3, "eth0", 0, 0, NULL, 0 },
		{ 1, 3, "eth0", 0, 0, NULL, 0 },
		{ 1, 3, "eth0", 0, 0, NULL, 0 },	/* a second rank 1 */
		{ 2, 3, "eth0", 500, 0, NULL, 0 },
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
	tap_ok(nzi_bootstrap(&cfg, &job) == -ENOKEY, "2 ranks without a key -> ENOKEY");
	cfg.key = job_key;
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
	"MASTER_ADDR", "MASTER_PORT", "NEZHA_TIMEOUT_MS", "NEZHA_JOB_KEY",
	"NEZHA_JOB_KEY_FILE", "NEZHA_INSECURE", "NEZHA_KEY_FROM_STORE", NULL,
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
	env_set("RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1");
	setenv("NEZHA_DEVICE", "/nonexistent/nezha", 1);
	ret = nz_comm_init_env(&c);
	tap_ok(ret == -ENOKEY && strstr(nz_last_error(), "NEZHA_JOB_KEY"),
	       "nz_comm_init_env of 2 ranks without a key -> ENOKEY, before touching the device (%s)",
	       nz_last_error());
	env_set("RANK=0 WORLD_SIZE=1");
	setenv("NEZHA_DEVICE", "/dev/null", 1);
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
	rec = mmap(NULL, sizeof(*rec), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (rec == MAP_FAILED || nzi_random(job_key, sizeof(job_key)) ||
	    nzi_random(other_key, sizeof(other_key))) {
		perror("set-up");
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	test_keys();
	test_slots();
	test_single_and_args();
	test_env();
	test_comm_opts();
	test_formation();
	test_duplicate();
	test_strangers();
	test_claim();
	test_replay_and_wire();
	test_wrong_key();
	test_listen();
	test_flood();
	test_units();
	test_timeouts();
	tap_plan(tap_n);
	return tap_exit();
}
