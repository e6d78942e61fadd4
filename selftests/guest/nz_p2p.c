// SPDX-License-Identifier: GPL-2.0
/*
 * Guest test of point-to-point transfers over the module's rails, run as
 * rank 0 and rank 1 (one per guest, bootstrap from the environment).
 * Every message carries a pattern derived from (seed, length, tag), and
 * the receiver checks every byte against it.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include "nezha.h"
#include "tap.h"
#include "nz_sysfs.h"

static int rank, peer;

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	return x ^ (x >> 33);
}

static void fill(uint8_t *p, size_t len, uint64_t seed)
{
	uint64_t s = mix(seed ^ len);
	size_t i;

	for (i = 0; i < len; i++) {
		if ((i & 7) == 0)
			s = mix(s + i);
		p[i] = (uint8_t)(s >> ((i & 7) * 8));
	}
}

/* Index of the first wrong byte, or -1. */
static long check(const uint8_t *p, size_t len, uint64_t seed)
{
	uint64_t s = mix(seed ^ len);
	size_t i;

	for (i = 0; i < len; i++) {
		if ((i & 7) == 0)
			s = mix(s + i);
		if (p[i] != (uint8_t)(s >> ((i & 7) * 8)))
			return (long)i;
	}
	return -1;
}

static bool all_zero(const uint8_t *p, size_t len)
{
	while (len--)
		if (*p++)
			return false;
	return true;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Rank 0 sends len bytes to rank 1, which checks them; true if intact. */
static bool one_transfer(struct nz_comm *c, size_t len, uint64_t tag,
			 uint64_t seed, int *err)
{
	uint8_t *buf = malloc(len ? len : 1);
	size_t got = 0;
	bool ok = false;

	*err = -ENOMEM;
	if (!buf)
		return false;
	if (rank == 0) {
		fill(buf, len, seed);
		*err = nz_send(c, buf, len, peer, tag);
		ok = !*err;
	} else {
		memset(buf, 0xee, len);
		*err = nz_recv(c, buf, len, peer, tag, &got);
		ok = !*err && got == len && check(buf, len, seed) < 0;
	}
	free(buf);
	return ok;
}

static void test_sizes(struct nz_comm *c)
{
	static const size_t sizes[] = {
		0, 1, 7, 4095, 4096, 65535, 65536, 65537, 262144 + 3,
		1 << 20, (1 << 20) + 12345, 3 << 20,
	};
	unsigned int i, bad = 0;
	int err = 0;

	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		if (!one_transfer(c, sizes[i], 100 + i, 7 * i + 1, &err)) {
			tap_diag("size %zu failed: %s", sizes[i], strerror(-err));
			bad++;
		}
	tap_ok(!bad, "integrity over 12 edge sizes 0 B .. 3 MiB");
}

static void test_random(struct nz_comm *c, unsigned int n, uint64_t seed)
{
	unsigned int i, bad = 0;
	double t = now_s();
	uint64_t bytes = 0;
	int err = 0;

	for (i = 0; i < n; i++) {
		/* Both ranks draw the same sequence. */
		uint64_t r = mix(seed + i);
		size_t len = (r & 1) ? r % 70000 : r % (4u << 20);
		uint64_t tag = mix(r) % 1000;

		bytes += len;
		if (!one_transfer(c, len, tag, r, &err)) {
			tap_diag("random #%u (%zu B, tag %" PRIu64 ") failed: %s",
				 i, len, tag, strerror(-err));
			bad++;
		}
	}
	tap_ok(!bad, "integrity over %u random sizes and tags (%.1f MB in %.1f s)",
	       n, bytes / 1e6, now_s() - t);
}

static void test_big(struct nz_comm *c)
{
	size_t len = 64u << 20;
	double t = now_s();
	int err = 0;
	bool ok = one_transfer(c, len, 4242, 99, &err);

	tap_ok(ok, "one 64 MiB message intact (%.2f s, %s)", now_s() - t,
	       ok ? "ok" : strerror(-err));
}

/*
 * The receiver of the late-receive test: wait until a message has arrived
 * before its receive (the module's count of them passed um0), 10 s at
 * most (times the kernel's slowness), then 1.5 s more for the others.
 */
static void await_unexpected(long long um0)
{
	double end = now_s() + 10 * nz_time_scale();

	while (nz_dev_stat("stats/msgs_unexpected") <= um0 && now_s() < end)
		usleep(20 * 1000);
	usleep(1500 * 1000);
}

/* Many messages in flight at once, several on the same tag. */
static void test_inflight(struct nz_comm *c, bool late_recv)
{
	enum { N = 48 };
	struct nz_request *req[N];
	struct nz_status st[N];
	uint8_t *buf[N];
	unsigned int i, bad = 0;
	long long um0, ub0, um, ub;
	uint8_t go = 1;
	size_t got;
	int ret;

	/*
	 * The late receives must come after the messages: the sender says
	 * "go" right before it sends them, and the receiver posts its
	 * receives once the first of them has arrived unexpected (at most
	 * 10 s), then 1.5 s later.  Timed from its own start, a sender still
	 * waiting for the last ACKs of the test before was more than 1.5 s
	 * behind once (CI, 2026-12-07); timed from "go", whose send waits
	 * for its ACK, again (CI, the same night): every receive was posted
	 * first, and none was unexpected.
	 */
	if (late_recv) {
		ret = rank == 0 ? nz_send(c, &go, 1, peer, 6006) :
				  nz_recv(c, &go, 1, peer, 6006, &got);
		if (ret)
			tap_diag("the go message: %s", strerror(-ret));
	}
	um0 = nz_dev_stat("stats/msgs_unexpected");
	ub0 = nz_dev_stat("stats/bytes_unexpected");
	for (i = 0; i < N; i++) {
		size_t len = 1000 + (size_t)mix(i) % 300000;

		buf[i] = malloc(len);
		if (!buf[i])
			return;
		/* Tags 0..5: same-tag messages must match in order. */
		if (rank == 0) {
			fill(buf[i], len, 1000 + i);
			ret = nz_isend(c, buf[i], len, peer, i % 6, &req[i]);
		} else {
			if (late_recv && i == 0)
				await_unexpected(um0);
			ret = nz_irecv(c, buf[i], len, peer, i % 6, &req[i]);
		}
		if (ret) {
			tap_diag("post #%u: %s", i, strerror(-ret));
			req[i] = NULL;
			bad++;
		}
	}
	for (i = 0; i < N; i++) {
		size_t len = 1000 + (size_t)mix(i) % 300000;

		if (!req[i])
			continue;
		ret = nz_wait(req[i], &st[i]);
		if (ret || st[i].error || st[i].bytes != len ||
		    (rank == 1 && check(buf[i], len, 1000 + i) >= 0))
			bad++;
		free(buf[i]);
	}
	tap_ok(!bad, "%d messages in flight on 6 tags%s, matched in order",
	       N, late_recv ? ", receives posted 1.5 s late (unexpected)" : "");
	if (!late_recv || rank != 1)
		return;
	/* Those that came before their receive are counted, with their bytes. */
	um = nz_dev_stat("stats/msgs_unexpected") - um0;
	ub = nz_dev_stat("stats/bytes_unexpected") - ub0;
	tap_ok(um0 >= 0 && ub0 >= 0 && um >= 1 && ub >= 1000,
	       "receiver counted %lld unexpected messages, %lld bytes", um, ub);
}

static void test_truncate(struct nz_comm *c)
{
	uint8_t big[100000], small[1000];
	size_t got = 0;
	int ret;

	if (rank == 0) {
		fill(big, sizeof(big), 5);
		ret = nz_send(c, big, sizeof(big), peer, 77);
		tap_ok(ret == 0, "sender of a message too long for the receive completes (%d)", ret);
		fill(small, sizeof(small), 6);
		ret = nz_send(c, small, sizeof(small), peer, 77);
		tap_ok(ret == 0, "next message on that tag sent");
	} else {
		ret = nz_recv(c, small, sizeof(small), peer, 77, &got);
		tap_ok(ret == -EMSGSIZE, "receive buffer smaller than the message -> EMSGSIZE (%d)", ret);
		memset(small, 0, sizeof(small));
		ret = nz_recv(c, small, sizeof(small), peer, 77, &got);
		tap_ok(ret == 0 && got == sizeof(small) &&
		       check(small, sizeof(small), 6) < 0,
		       "the next message on that tag arrives intact");
	}
}

static void test_fixed(struct nz_comm *c)
{
	size_t len = 5u << 20;
	uint8_t *buf = malloc(len);
	int idx = -1, ret;
	size_t got = 0;

	if (!buf)
		return;
	ret = nz_comm_register_buffer(c, buf, len, &idx);
	if (ret) {
		tap_ok(0, "register a 5 MiB buffer: %s", strerror(-ret));
		free(buf);
		return;
	}
	if (rank == 0) {
		fill(buf, len, 31337);
		ret = nz_send(c, buf, len, peer, 9);
		tap_ok(ret == 0, "send from a registered buffer (%d)", ret);
	} else {
		memset(buf, 0, len);
		ret = nz_recv(c, buf, len, peer, 9, &got);
		tap_ok(ret == 0 && got == len && check(buf, len, 31337) < 0,
		       "receive into a registered buffer, intact (%d)", ret);
	}
	/*
	 * A part of it, from and to odd places: the module finds each chunk's
	 * page in the registered buffer by arithmetic (nz_ubuf_fixed_seek()).
	 */
	size_t sub = (3u << 20) + 777, from = 12345, to = 4097;

	if (rank == 0) {
		fill(buf + from, sub, 4242);
		ret = nz_send(c, buf + from, sub, peer, 10);
		tap_ok(ret == 0, "send 3 MiB + 777 from offset 12345 of a registered buffer (%d)",
		       ret);
	} else {
		memset(buf, 0, len);
		ret = nz_recv(c, buf + to, sub, peer, 10, &got);
		tap_ok(ret == 0 && got == sub && check(buf + to, sub, 4242) < 0 &&
		       all_zero(buf, to) && all_zero(buf + to + sub, len - to - sub),
		       "receive it at offset 4097 of a registered buffer: intact, nothing around it written (%d)",
		       ret);
	}
	nz_comm_unregister_buffer(c, idx);
	free(buf);
}

static void test_split(struct nz_comm *c)
{
	int n = nz_comm_nrails(c), s, starved = 0;
	long long before[8], delta[8], sum = 0;
	const char *what = rank == 0 ? "bytes_tx" : "bytes_rx";
	int err = 0;

	char go = 1;
	size_t got;

	for (s = 0; s < n && s < 8; s++)
		before[s] = nz_rail_stat(nz_comm_rail_name(c, s), what);
	/* Both have their counters before the first byte moves. */
	if (rank == 1)
		nz_send(c, &go, 1, peer, 556);
	else
		nz_recv(c, &go, 1, peer, 556, &got);
	one_transfer(c, 16u << 20, 555, 555, &err);
	for (s = 0; s < n && s < 8; s++) {
		delta[s] = nz_rail_stat(nz_comm_rail_name(c, s), what) - before[s];
		sum += delta[s];
	}
	/* ... and after the last, before the next test's bytes move. */
	if (rank == 1)
		nz_send(c, &go, 1, peer, 557);
	else
		nz_recv(c, &go, 1, peer, 557, &got);
	for (s = 0; s < n && s < 8; s++) {
		tap_diag("rail %s carried %.1f%% (%lld bytes)",
			 nz_comm_rail_name(c, s), sum ? 100.0 * delta[s] / sum : 0,
			 delta[s]);
		if (sum && delta[s] * n * 4 < sum)	/* < 1/4 of a fair share */
			starved++;
	}
	tap_ok(!err && n >= 2 && sum >= (16 << 20) && !starved,
	       "a 16 MiB message is striped over all %d rails", n);
}

/*
 * "stream": rank 0 sends 8 MiB messages until it is killed or seconds
 * pass; rank 1 receives until the stream ends.  Rank 1's exit status says
 * how: 0 all received, 3 the peer's loss was reported as an error.
 */
static int stream(struct nz_comm *c, int seconds)
{
	size_t len = 8u << 20;
	uint8_t *buf = malloc(len);
	double end = now_s() + seconds;
	unsigned int n = 0;
	size_t got;
	int ret = 0;

	if (!buf)
		return 1;
	fill(buf, len, 1);
	while (now_s() < end) {
		if (rank == 0)
			ret = nz_send(c, buf, len, peer, 1);
		else
			ret = nz_recv(c, buf, len, peer, 1, &got);
		if (ret)
			break;
		n++;
	}
	printf("# rank %d: %u messages, then %s\n", rank, n,
	       ret ? strerror(-ret) : "time up");
	free(buf);
	return ret ? 3 : 0;
}

/*
 * "overdue SECONDS": rank 1 posts a receive on tag 7 at once, which rank 0
 * sends only after SECONDS of 64 KiB messages on tag 8, one every 100 ms
 * (rank 1 receives them), and an empty one that ends them.  With
 * NEZHA_OP_TIMEOUT_MS under half of SECONDS the receive passes its deadline
 * by a whole timeout while other traffic with its peer keeps it alive:
 * the module says so in its log, and the receive still completes.
 * Exit status 0 when every transfer succeeded.
 */
static int overdue(struct nz_comm *c, int seconds)
{
	size_t len = 64u << 10, got = 0;
	uint8_t *buf = malloc(len), small[4096];
	struct nz_request *req = NULL;
	double end = now_s() + seconds;
	struct nz_status st;
	int ret = 0, n = 0;

	if (!buf)
		return 1;
	if (rank == 1)
		ret = nz_irecv(c, small, sizeof(small), peer, 7, &req);
	while (!ret) {
		if (rank == 0) {
			size_t l = now_s() < end ? len : 0;

			fill(buf, l, n);
			ret = nz_send(c, buf, l, peer, 8);
			if (!l)
				break;
			usleep(100000);
		} else {
			ret = nz_recv(c, buf, len, peer, 8, &got);
			if (!ret && !got)
				break;
		}
		n++;
	}
	if (!ret && rank == 0) {
		fill(small, sizeof(small), 7);
		ret = nz_send(c, small, sizeof(small), peer, 7);
	} else if (!ret) {
		ret = nz_wait(req, &st);
		if (!ret && (st.bytes != sizeof(small) ||
			     check(small, sizeof(small), 7) >= 0))
			ret = -EBADMSG;
	}
	printf("# rank %d: %d messages on tag 8, then the one on tag 7: %s\n",
	       rank, n, ret ? strerror(-ret) : "ok");
	free(buf);
	return ret ? 1 : 0;
}

/* One value of our connection's sysfs directory on rail slot s. */
static int peer_sysfs_read(struct nz_comm *c, int s, const char *file,
			   char *line, size_t len)
{
	return nz_peer_sysfs_read(nz_comm_rail_name(c, s), rank, peer, file,
				  line, len);
}

/* /sys/class/nezha/rail-R/peer-COMM-RANK-PEER/: state up, bytes moved. */
static void test_peer_sysfs(struct nz_comm *c)
{
	int s, good = 0, n = nz_comm_nrails(c);
	char line[64];

	for (s = 0; s < n; s++)
		if (!peer_sysfs_read(c, s, "state", line, sizeof(line)) &&
		    !strcmp(line, "up") &&
		    !peer_sysfs_read(c, s, rank == 0 ? "bytes_tx" : "bytes_rx",
				     line, sizeof(line)) &&
		    atoll(line) > 0)
			good++;
	tap_ok(good == n, "per (peer, rail) sysfs: %d of %d rails up with traffic",
	       good, n);
}

/*
 * "drill SECONDS [T:COMMAND]...": rank 0 streams 2 MiB messages for
 * SECONDS, then an empty one; rank 1 checks every byte of every message
 * and measures the longest time between two completions (the failover
 * gap as the receiver sees it).  Each COMMAND runs (sh -c) at T seconds
 * after the communicator is up, on the rank whose command line has it.
 * A negative SECONDS streams nothing: rank 1's receive waits that long
 * for rank 0's empty message.  Each rank prints when its stream ended
 * (end_ms=, since the communicator was up): with a fault scheduled at a
 * known time, how long after it the stream ended.  With NZ_DRILL_PAUSE_MS
 * in its environment rank 0 waits that long after each message: a stream
 * with pauses, during which an idle path carries nothing at all.
 * Exit status: 0 all intact and the stream ended normally; 1 otherwise.
 */
static int drill(struct nz_comm *c, int seconds, int nsched, char **sched)
{
	const char *pause_env = getenv("NZ_DRILL_PAUSE_MS");
	long pause_ms = pause_env ? strtol(pause_env, NULL, 10) : 0;
	size_t len = 2u << 20, got = 0;
	double t0 = now_s(), last, gap = 0, gap_at = 0, end;
	uint64_t n = 0, bad = 0;
	uint8_t *buf = malloc(len);
	pid_t kid;
	int ret = 0;

	if (!buf)
		return 1;
	kid = fork();
	if (kid == 0) {
		for (int i = 0; i < nsched; i++) {
			double at = atof(sched[i]);
			char *cmd = strchr(sched[i], ':');

			while (now_s() < t0 + at)
				usleep(2000);
			if (cmd && system(cmd + 1))
				printf("# rank %d: '%s' failed\n", rank, cmd + 1);
			else
				printf("# rank %d: t=%.2f %s\n", rank, now_s() - t0,
				       cmd ? cmd + 1 : "?");
			fflush(stdout);
		}
		_exit(0);
	}
	while (rank == 0 && now_s() < t0 - seconds)
		usleep(10000);
	last = now_s();
	for (;;) {
		if (rank == 0) {
			size_t l = now_s() < t0 + seconds ? len : 0;

			fill(buf, l, n);
			ret = nz_send(c, buf, l, peer, 1);
			if (ret || !l)
				break;
			if (pause_ms > 0)
				usleep(pause_ms * 1000);
		} else {
			ret = nz_recv(c, buf, len, peer, 1, &got);
			if (ret || !got)
				break;
			if (check(buf, got, n) >= 0)
				bad++;
			if (now_s() - last > gap) {
				gap = now_s() - last;
				gap_at = now_s() - t0;
			}
			last = now_s();
		}
		n++;
	}
	end = now_s() - t0;
	waitpid(kid, NULL, 0);
	printf("# rank %d: %" PRIu64 " messages of 2 MiB, %" PRIu64
	       " corrupt, ended with %s; longest gap %.0f ms at t=%.1f s\n",
	       rank, n, bad, ret ? strerror(-ret) : "the last message",
	       gap * 1000, gap_at);
	printf("gap_ms=%.0f\n", gap * 1000);
	printf("end_ms=%.0f\n", end * 1000);
	free(buf);
	return ret || bad ? 1 : 0;
}

/*
 * "gapmeter STOPFILE": rank 0 streams 64 KiB messages, 16 in flight, until
 * STOPFILE exists, then an empty one; rank 1 receives them, 16 posted,
 * checks every byte of each, and prints the longest time between two
 * completions after the first second (gap_ms=) and the messages that were
 * short or wrong (bad=).  The failover benchmark pulls a cable in the
 * middle.
 */
static int gapmeter(struct nz_comm *c, const char *stop)
{
	enum { DEPTH = 16 };
	size_t len = 64u << 10, got;
	struct nz_request *req[DEPTH];
	struct nz_status st;
	uint8_t *buf = malloc(DEPTH * len);
	double start = now_s(), last = start, gap = 0, deadline = start + 180;
	double gap_at = 0;
	uint64_t n = 0, bytes = 0, bad = 0;
	int i, ret = 0, done = 0;

	if (!buf)
		return 1;
	for (i = 0; i < DEPTH; i++) {
		if (rank == 0)
			fill(buf + i * len, len, (uint64_t)i + 1);
		ret = rank == 0 ? nz_isend(c, buf + i * len, len, peer, 3, &req[i]) :
			nz_irecv(c, buf + i * len, len, peer, 3, &req[i]);
		if (ret)
			return 1;
	}
	for (i = 0; !done && !ret; i = (i + 1) % DEPTH, n++) {
		ret = nz_wait(req[i], &st);
		if (ret || st.error) {
			ret = ret ? ret : st.error;
			break;
		}
		if (rank == 1) {
			double t = now_s();

			got = st.bytes;
			if (!got) {
				done = 1;
				break;
			}
			bytes += got;
			if (t - start > 1.0 && t - last > gap) {
				gap = t - last;
				gap_at = last;
			}
			/* Messages complete in order: this is message n. */
			if (got != len || check(buf + i * len, len, n + 1) >= 0)
				bad++;
			last = now_s();
			ret = nz_irecv(c, buf + i * len, len, peer, 3, &req[i]);
		} else {
			bool end = !access(stop, F_OK) || now_s() > deadline;

			if (!end)
				fill(buf + i * len, len, n + DEPTH + 1);
			ret = nz_isend(c, buf + i * len, end ? 0 : len, peer, 3,
				       &req[i]);
			done = end;
		}
	}
	/* Rank 0: wait for what is still in flight, the empty one last. */
	for (int k = 1; rank == 0 && !ret && k <= DEPTH; k++)
		ret = nz_wait(req[(i + k - 1) % DEPTH], &st);
	if (rank == 1)
		printf("gap_ms=%.0f bytes=%" PRIu64 " messages=%" PRIu64
		       " bad=%" PRIu64 " gap_from=%.3f\n", gap * 1000, bytes, n,
		       bad, gap_at);
	free(buf);
	return ret ? 1 : 0;
}

/*
 * "burst SIZE COUNT": rank 0 sends COUNT messages of SIZE bytes, rank 1
 * receives and checks each; then rank 0 prints, for every rail, the
 * scheduler's view of the connection from sysfs:
 *   est RAIL state=S est_bw=B srtt_us=R min_rtt_us=M start_us=A chunks_tx=N
 * "pieces SIZE COUNT": the same, but all COUNT messages (at most 64) in
 * flight at once, as a collective sends the pieces of one exchange.
 * Exit status 0 iff every message arrived intact.
 */
static int burst_at_once(struct nz_comm *c, uint8_t *buf, size_t len,
			 int count, int *bad)
{
	struct nz_request *r[64];
	struct nz_status st[64];
	int i, ret = 0;

	for (i = 0; i < count && !ret; i++) {
		if (rank == 0) {
			fill(buf + i * len, len, i + 1);
			ret = nz_isend(c, buf + i * len, len, peer, 5, &r[i]);
		} else {
			ret = nz_irecv(c, buf + i * len, len, peer, 5, &r[i]);
		}
	}
	if (ret)
		return ret;
	ret = nz_waitall(r, count, st);
	for (i = 0; rank == 1 && !ret && i < count; i++)
		*bad += st[i].bytes != len || check(buf + i * len, len, i + 1) >= 0;
	return ret;
}

static int burst(struct nz_comm *c, size_t len, int count, bool at_once)
{
	static const char *const files[] = {
		"sched_state", "est_bw", "srtt_us", "min_rtt_us", "start_us",
		"window_bytes", "chunks_tx",
	};
	uint8_t *buf;
	int i, s, ret = 0, bad = 0;
	char line[64];
	size_t got;

	if (at_once && (count < 1 || count > 64))
		return 1;
	buf = malloc((at_once ? count : 1) * (len ? len : 1));
	if (!buf)
		return 1;
	if (at_once)
		ret = burst_at_once(c, buf, len, count, &bad);
	for (i = at_once ? count : 0; i < count && !ret; i++) {
		if (rank == 0) {
			fill(buf, len, i + 1);
			ret = nz_send(c, buf, len, peer, 5);
		} else {
			ret = nz_recv(c, buf, len, peer, 5, &got);
			bad += !ret && (got != len || check(buf, len, i + 1) >= 0);
		}
	}
	for (s = 0; rank == 0 && s < nz_comm_nrails(c); s++) {
		if (peer_sysfs_read(c, s, "state", line, sizeof(line)))
			continue;
		printf("est %s", nz_comm_rail_name(c, s));
		for (size_t k = 0; k < sizeof(files) / sizeof(files[0]); k++) {
			if (peer_sysfs_read(c, s, files[k], line, sizeof(line)))
				snprintf(line, sizeof(line), "-");
			printf(" %s=%s", files[k], line);
		}
		printf("\n");
	}
	printf("# rank %d: %d messages of %zu bytes, %d corrupt, %s\n", rank,
	       i, len, bad, ret ? strerror(-ret) : "ok");
	free(buf);
	return ret || bad ? 1 : 0;
}

/* Round i of a series of short jobs: a communicator on MASTER_PORT + 1 + i. */
static int round_comm(const char *base, int i, struct nz_comm **c)
{
	char port[16];
	int ret;

	snprintf(port, sizeof(port), "%d", atoi(base) + 1 + i);
	setenv("MASTER_PORT", port, 1);
	ret = nz_comm_init_env(c);
	if (ret)
		tap_diag("round %d: %s", i, nz_last_error());
	return ret;
}

/*
 * "leave ROUNDS SIZE": ROUNDS short jobs one after the other, on
 * MASTER_PORT + 1 + round.  In each, rank 1 sends SIZE bytes and leaves;
 * rank 0 leaves the moment its receive returns.  The ACK rank 0 owes must
 * still reach rank 1, and rank 0's wait for its connections must count
 * those rank 1 already closed again.  Stops at the first failure (the
 * ranks are out of step then).  TAP on rank 1, a summary on rank 0.
 */
static int leave(int rounds, size_t len)
{
	const char *base = getenv("MASTER_PORT");
	uint8_t *buf = malloc(len ? len : 1);
	int i, ret = 0, bad = 0;
	struct nz_comm *c;
	size_t got;

	if (!buf || !base)
		return 1;
	rank = atoi(getenv("RANK") ? getenv("RANK") : "0");
	for (i = 0; i < rounds && !ret; i++) {
		ret = round_comm(base, i, &c);
		if (ret)
			break;
		peer = 1 - rank;
		if (rank == 1) {
			fill(buf, len, i + 1);
			ret = nz_send(c, buf, len, peer, 7);
		} else {
			ret = nz_recv(c, buf, len, peer, 7, &got);
			bad += !ret && (got != len || check(buf, len, i + 1) >= 0);
		}
		nz_comm_destroy(c);
		if (ret)
			tap_diag("round %d: %s", i, strerror(-ret));
	}
	free(buf);
	if (rank == 1) {
		tap_ok(!ret && i == rounds,
		       "%d jobs: every send completed although the receiver left at once",
		       rounds);
		tap_plan(tap_n);
		return tap_exit();
	}
	printf("# rank 0: %d of %d jobs, %s, %d corrupt\n", i, rounds,
	       ret ? strerror(-ret) : "ok", bad);
	return ret || bad ? 1 : 0;
}

/*
 * "unacked ROUNDS": ACKs lost with a path that goes down as the receiver
 * leaves.  p2p.sh holds every frame rank 1 (the receiver) sends for 1 s
 * (netem on both of its rails).  In each of ROUNDS jobs rank 0 sends 16
 * empty messages at once, over both rails as the scheduler splits them
 * (slot 1 carried none in 1 job of 8: the test asks for one job in which
 * it did); rank 1 receives them and leaves at once, its ACKs, DONE and
 * CLOSE still held back.  400 ms in, rank 0 sets rail slot 1 down -- as a
 * rail deleted or a NIC unbound at that moment did in the churn suite on
 * the debug kernel -- and the ACKs held on it are lost.  Every send must
 * complete: rank 1's DONE on slot 0, ahead of its CLOSE there, says it
 * has them all (wire version 4).  Before, the sends whose chunks went on
 * slot 1 failed (ECONNRESET).  TAP on rank 0.
 */
#define UNACKED_MSGS 16

/* Run nezhactl (ctl) with args (argv[0] included); 0 if it exited 0. */
static int ctl_run(const char *ctl, char *const args[])
{
	int status;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		execv(ctl, args);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) && !WEXITSTATUS(status) ? 0 : -1;
}

/* nezhactl rail set RAIL STATE; 0 on success. */
static int rail_set(const char *ctl, const char *rail, const char *state)
{
	return ctl_run(ctl, (char *const[]){ (char *)ctl, "rail", "set",
		       (char *)rail, (char *)state, NULL });
}

static int unacked(int rounds)
{
	const char *base = getenv("MASTER_PORT"), *ctl = getenv("NZCTL");
	int i, k, ret = 0, failed = 0, pending = 0, err = 0, now, on_r1 = 0;
	struct nz_request *reqs[UNACKED_MSGS];
	struct nz_status st[UNACKED_MSGS];
	long long tx0[2], tx1[2];
	static uint8_t none[1];
	const char *r0, *r1;
	struct nz_comm *c;
	double t0;

	if (!base || !ctl)
		return 1;
	rank = atoi(getenv("RANK") ? getenv("RANK") : "0");
	peer = 1 - rank;
	for (i = 0; i < rounds && !ret; i++) {
		ret = round_comm(base, i, &c);
		if (ret)
			break;
		if (nz_comm_nrails(c) < 2) {
			tap_diag("round %d: %d rail", i, nz_comm_nrails(c));
			ret = -EINVAL;
			nz_comm_destroy(c);
			break;
		}
		r0 = nz_comm_rail_name(c, 0);
		r1 = nz_comm_rail_name(c, 1);
		tx0[0] = nz_rail_stat(r0, "chunks_tx");
		tx0[1] = nz_rail_stat(r1, "chunks_tx");
		memset(st, 0, sizeof(st));
		for (k = 0; k < UNACKED_MSGS && !ret; k++)
			ret = rank ? nz_irecv(c, none, 0, peer, 7, &reqs[k]) :
				     nz_isend(c, none, 0, peer, 7, &reqs[k]);
		if (ret) {
			tap_diag("round %d: start: %s", i, strerror(-ret));
			nz_comm_destroy(c);
			break;
		}
		if (rank) {
			/* Leave the moment the last message is here. */
			ret = nz_waitall(reqs, UNACKED_MSGS, st);
			nz_comm_destroy(c);
			if (ret)
				tap_diag("round %d: receive: %s", i,
					 strerror(-ret));
			continue;
		}
		t0 = now_s();
		usleep(400000);
		now = 0;
		for (k = 0; k < UNACKED_MSGS; k++) {
			if (nz_test(reqs[k], &st[k]) == -EAGAIN)
				now++;
			else
				reqs[k] = NULL;	/* freed, st[k] filled */
		}
		err |= rail_set(ctl, r1, "down");
		tx1[0] = nz_rail_stat(r0, "chunks_tx");
		tx1[1] = nz_rail_stat(r1, "chunks_tx");
		printf("# round %d: %s set down after %.0f ms, %d sends pending then; chunks sent on %s %lld, on %s %lld\n",
		       i, r1, (now_s() - t0) * 1e3, now, r0, tx1[0] - tx0[0],
		       r1, tx1[1] - tx0[1]);
		on_r1 += tx1[1] > tx0[1];
		pending += now;
		ret = nz_waitall(reqs, UNACKED_MSGS, st);
		for (k = 0; k < UNACKED_MSGS; k++)
			failed += st[k].error != 0;
		if (ret)
			tap_diag("round %d: a send failed: %s", i,
				 strerror(-ret));
		err |= rail_set(ctl, r1, "up");
		nz_comm_destroy(c);
	}
	if (rank) {
		/* p2p.sh removes the netem: its queue goes with it. */
		sleep(2);
		printf("# rank 1: %d of %d jobs, %s\n", i, rounds,
		       ret ? strerror(-ret) : "ok");
		return ret ? 1 : 0;
	}
	tap_ok(!err, "rail set down and up again (nezhactl)");
	tap_ok(pending > 0 && on_r1 > 0,
	       "%d of %d sends unacknowledged when slot 1 went down, which carried chunks in %d of %d jobs",
	       pending, i * UNACKED_MSGS, on_r1, i);
	tap_ok(!ret && i == rounds && !failed,
	       "%d jobs: every send completed although its ACKs were lost (%d failed)",
	       rounds, failed);
	tap_plan(tap_n);
	return tap_exit();
}

/*
 * "ratemeter SECONDS [AT COMMAND]": rank 0 streams 64 KiB messages, 64 in
 * flight, for SECONDS, then an empty one, and runs COMMAND (sh -c) AT
 * seconds in; rank 1 prints the throughput of every 250 ms ("rate
 * t=SECONDS mbit=RATE", t from the end of the rendezvous, which both ranks
 * leave together), from which the scheduler benchmark reads how fast the
 * split follows a rail whose rate changes mid-stream.
 */
static int ratemeter(struct nz_comm *c, int seconds, double at, const char *cmd)
{
	enum { DEPTH = 64 };
	size_t len = 64u << 10;
	struct nz_request *req[DEPTH];
	struct nz_status st;
	uint8_t *buf = malloc(DEPTH * len);
	double start = now_s(), bucket = 0.25, next = start + bucket;
	uint64_t in_bucket = 0;
	int i, ret = 0, done = 0;
	pid_t kid = -1;

	if (!buf)
		return 1;
	for (i = 0; i < DEPTH; i++) {
		ret = rank == 0 ? nz_isend(c, buf + i * len, len, peer, 4, &req[i]) :
			nz_irecv(c, buf + i * len, len, peer, 4, &req[i]);
		if (ret)
			return 1;
	}
	for (i = 0; !done && !ret; i = (i + 1) % DEPTH) {
		ret = nz_wait(req[i], &st);
		if (ret || st.error) {
			ret = ret ? ret : st.error;
			break;
		}
		if (rank == 1) {
			double t = now_s();

			for (; t >= next; next += bucket) {
				printf("rate t=%.1f mbit=%.2f\n", next - start,
				       in_bucket * 8 / bucket / 1e6);
				in_bucket = 0;
			}
			if (!st.bytes)
				break;
			in_bucket += st.bytes;
			ret = nz_irecv(c, buf + i * len, len, peer, 4, &req[i]);
		} else {
			if (cmd && kid < 0 && now_s() - start >= at) {
				printf("# t=%.3f: %s\n", now_s() - start, cmd);
				fflush(stdout);
				kid = fork();
				if (kid == 0) {
					execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
					_exit(127);
				}
			}
			done = now_s() - start > seconds;
			ret = nz_isend(c, buf + i * len, done ? 0 : len, peer, 4,
				       &req[i]);
		}
	}
	for (int k = 1; rank == 0 && !ret && k <= DEPTH; k++)
		ret = nz_wait(req[(i + k - 1) % DEPTH], &st);
	if (kid > 0)
		waitpid(kid, NULL, 0);
	free(buf);
	return ret ? 1 : 0;
}

/* ---- "recover": the pair works on after every kind of failed transfer -- */

/* A blocking receive on k that needs no more than to be matched. */
static int ctl_sync(struct nz_comm *k)
{
	size_t got;
	int ret;

	if (rank == 0) {
		ret = nz_send(k, "", 0, peer, 1);
		return ret ? ret : nz_recv(k, NULL, 0, peer, 2, &got);
	}
	ret = nz_recv(k, NULL, 0, peer, 1, &got);
	return ret ? ret : nz_send(k, "", 0, peer, 2);
}

/* A counter of every rail of c, summed; -1 if one cannot be read. */
static long long rails_sum(struct nz_comm *c, const char *what)
{
	long long sum = 0, v;
	int s;

	for (s = 0; s < nz_comm_nrails(c); s++) {
		v = nz_rail_stat(nz_comm_rail_name(c, s), what);
		if (v < 0)
			return -1;
		sum += v;
	}
	return sum;
}

/*
 * 2000 messages each way on d, of 1 to 8 KiB, 50 in flight at a time,
 * every byte checked, no path closed on an error meanwhile (a window
 * left behind by a failed send closed them: "malformed frame"), and no
 * rail failing over meanwhile but for a false suspicion: under TCG a
 * burst of 100 transfers leaves a path silent for 16 ms now and then,
 * with any module, and the path echoes at once (stats/false_suspects;
 * issue 23's busy-node suspicions, Documentation/health.rst).  Those are
 * counted, not failed.
 */
static void exchange(struct nz_comm *d, const char *after, unsigned int phase)
{
	enum { N = 2000, B = 50, MAX = 8192 };
	static uint8_t out[B][MAX], in[B][MAX];
	struct nz_request *req[2 * B];
	struct nz_status st;
	unsigned int i, j, bad = 0, first = N;
	long long f0, f1, e0, e1, s0, s1, real;
	int ret, err = 0;

	/*
	 * The failure before may have consequences of its own: a path torn
	 * down by one side (until 2026-12-04, one whose receiver held back
	 * for budget, see held_back()) reconnects, and the reset reaches the
	 * other side a little later.  Those are not this exchange's.  On a
	 * kernel NZ_TIME_SCALE times slower, a little later is that much
	 * later (the debug kernel: "1 failed over meanwhile" in the exchange
	 * right after an 83 s outage, 2026-12-05).
	 */
	usleep((useconds_t)(1e6 * nz_time_scale()));
	f0 = rails_sum(d, "failovers");
	e0 = rails_sum(d, "errors");
	s0 = rails_sum(d, "false_suspects");

	for (i = 0; i < N && !err; i += B) {
		for (j = 0; j < B; j++) {
			size_t len = 1 + mix(phase * N + i + j) % MAX;

			fill(out[j], len, (uint64_t)phase << 32 | (i + j) << 1 | rank);
			ret = nz_isend(d, out[j], len, peer, 100, &req[j]);
			if (!ret)
				ret = nz_irecv(d, in[j], MAX, peer, 100,
					       &req[B + j]);
			if (ret) {
				err = ret;
				break;
			}
		}
		for (j = 0; j < 2 * B && !err; j++) {
			unsigned int k = j % B;
			size_t len = 1 + mix(phase * N + i + k) % MAX;

			ret = nz_wait(req[j], &st);
			if (ret || st.error) {
				err = ret ? ret : st.error;
			} else if (j >= B &&
				   (st.bytes != len ||
				    check(in[k], len, (uint64_t)phase << 32 |
					  (i + k) << 1 | peer) >= 0)) {
				if (first == N)
					first = i + k;
				bad++;
			}
		}
	}
	/* A suspicion is found false when its path echoes, 250 ms at most. */
	usleep(300000);
	f1 = rails_sum(d, "failovers");
	e1 = rails_sum(d, "errors");
	s1 = rails_sum(d, "false_suspects");
	real = f0 < 0 || f1 < 0 || s0 < 0 || s1 < 0 ? -1 : (f1 - f0) - (s1 - s0);
	if (err)
		tap_diag("exchange after %s: message #%u: %s", after, i,
			 strerror(-err));
	else if (bad)
		tap_diag("exchange after %s: %u messages wrong, the first #%u",
			 after, bad, first);
	tap_ok(!err && !bad && e0 >= 0 && e1 == e0 && real == 0,
	       "after %s: %d messages each way intact, %lld paths closed on an error and %lld failed over meanwhile (%lld more suspected that echoed at once)",
	       after, N, e0 < 0 || e1 < 0 ? -1 : e1 - e0, real,
	       s0 < 0 || s1 < 0 ? -1 : s1 - s0);
}

static bool err_in(int err, int a, int b)
{
	return err == a || err == b;
}

/*
 * 1b. A message bigger than the receiver's budget, no receive posted, and
 * a timeout of 15 s (more than NZ_DEAD_PEER_MS): the receiver holds its
 * paths back all that time and refuses it at the end.  Meanwhile it must
 * keep answering: until 2026-12-04 it said nothing (nothing of its own
 * pending with the sender), the sender heard nothing on any path for
 * 10 s and tore them down as if the receiver were gone -- on the debug
 * kernel, whose timeouts are 20 times longer, the send then failed with
 * ENETDOWN instead of ENOBUFS.  No path may close on an error meanwhile.
 */
static void held_back(struct nz_comm *k, int port, uint8_t *big, size_t len)
{
	struct nz_comm *e;
	char v[16];
	long long e0, closed;
	double t0, t = 0;
	int ret = 0;

	snprintf(v, sizeof(v), "%d", port + 2);
	setenv("MASTER_PORT", v, 1);
	/* Not scaled: what matters is that it outlasts those 10 s. */
	setenv("NEZHA_OP_TIMEOUT_MS", "15000", 1);
	ret = nz_comm_init_env(&e);
	if (ret) {
		tap_ok(0, "held back 15 s: init: %s", nz_last_error());
		return;
	}
	ctl_sync(k);
	e0 = rails_sum(e, "errors");
	if (rank == 0) {
		t0 = now_s();
		ret = nz_send(e, big, len, peer, 9);
		t = now_s() - t0;
	}
	ctl_sync(k);
	closed = rails_sum(e, "errors");
	closed = e0 < 0 || closed < 0 ? -1 : closed - e0;
	if (rank == 0)
		tap_ok(err_in(ret, -ETIMEDOUT, -ENOBUFS) && t > 14 && !closed,
		       "8 MiB send held back 15 s by its receiver: failed in %.1f s (%s), %lld paths closed on an error meanwhile",
		       t, strerror(-ret), closed);
	else
		tap_ok(!closed, "held back 15 s: %lld paths closed on an error meanwhile",
		       closed);
	ctl_sync(k);
	nz_comm_destroy(e);
}

/* The netdev of c's rail s (sysfs), into dev; 0 or -errno. */
static int rail_dev(struct nz_comm *c, int s, char *dev, size_t len)
{
	char path[128];
	int ret = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/nezha/rail-%s/dev",
		 nz_comm_rail_name(c, s));
	f = fopen(path, "r");
	if (!f)
		return -errno;
	if (!fgets(dev, len, f))
		ret = -EIO;
	fclose(f);
	dev[strcspn(dev, "\n")] = 0;
	return ret;
}

/*
 * Blackhole every rail of c (netem loss 100% as the root qdisc of its
 * device) from at s to at + len s, in a child; its exit status says
 * whether the outage was in place, and its lines say when.
 */
static pid_t outage(struct nz_comm *c, double at, double len)
{
	char cmd[600], devs[8][64];	/* cmd: room for any devs[s] */
	double t0 = now_s();
	int s, try, n = nz_comm_nrails(c);
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid)
		return pid;
	if (n < 1 || n > 8)
		_exit(2);
	for (s = 0; s < n; s++) {
		int err = rail_dev(c, s, devs[s], sizeof(devs[s]));

		if (err) {
			printf("# outage: rail %s: no device: %s\n",
			       nz_comm_rail_name(c, s), strerror(-err));
			_exit(3);
		}
	}
	usleep(at * 1e6);
	for (s = 0; s < n; s++) {
		snprintf(cmd, sizeof(cmd),
			 "tc qdisc replace dev %s root netem loss 100%%",
			 devs[s]);
		for (try = 0; system(cmd); try++) {
			printf("# outage: %s: netem not in place (try %d)\n",
			       devs[s], try + 1);
			fflush(stdout);
			if (try == 2)
				_exit(4);
			usleep(100000);
		}
	}
	printf("# outage: %d rails blackholed %.2f s after the start\n", n,
	       now_s() - t0);
	fflush(stdout);
	usleep(len * 1e6);
	for (s = 0; s < n; s++) {
		snprintf(cmd, sizeof(cmd), "tc qdisc del dev %s root", devs[s]);
		if (system(cmd))
			_exit(5);
	}
	printf("# outage: over %.2f s after the start\n", now_s() - t0);
	fflush(stdout);
	_exit(0);
}

/* nezhactl health set interval MS misses N (NZCTL); 0 on success. */
static int health_set(unsigned int ms, unsigned int misses)
{
	const char *ctl = getenv("NZCTL");
	char a[16], b[16];

	if (!ctl)
		return -1;
	snprintf(a, sizeof(a), "%u", ms);
	snprintf(b, sizeof(b), "%u", misses);
	return ctl_run(ctl, (char *const[]){ (char *)ctl, "health", "set",
		       "interval", a, "misses", b, NULL });
}

/*
 * 5. An 8 MiB send from a registered buffer, its receive never posted
 * (held back: 1 MiB budget) and every rail blackholed meanwhile: it fails,
 * and right after its CQE the buffer is unregistered and unmapped.  Its
 * chunks still unacknowledged must then be dropped, never sent: after its
 * CQE the module must not touch the buffer.  A module that resent them
 * (issue 19, defect 2) reads io_uring's freed bio_vec array and pages it
 * no longer holds, and sends what they hold to the peer; here that shows
 * as payload rank 0 sends after the CQE, with nothing else of d's or k's
 * in flight, or as the kernel's report when the pages were reused.
 *
 * No path may be suspected during the outage (health: 10 s x ts of
 * silence, the outage is 4 s x ts), so the send's chunks are still on
 * the paths that carried them at the CQE.  With the default 16 ms the
 * paths were suspected and every chunk rerouted before the CQE, the
 * receiver's ACKs of the first copies freed the rest, and the old code
 * passed (2026-12-05).  With the paths left alone the old code sent
 * 6.1 MB after the CQE or crashed the kernel ("list_add corruption", most
 * likely from the reused pages it sent from), and in a run that also
 * pulled a link after the CQE it sent 2.8 MB after it
 * (scripts/planted/failed-send-resent.patch).  The "# cut:" line says
 * what the step moved.
 */
static void cut_fixed(struct nz_comm *k, struct nz_comm *d, double ts)
{
	size_t len = 8u << 20;
	long long b0 = -1, b1 = -1, bs, rs, r0;
	int idx = -1, ret, unreg = -1;
	unsigned int f = ts > 1 ? (unsigned int)ts : 1;
	uint8_t *buf;
	pid_t op;

	if (rank == 0) {
		buf = mmap(NULL, len, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		ret = buf == MAP_FAILED ? -ENOMEM :
		      nz_comm_register_buffer(d, buf, len, &idx);
		/* No path suspected during the outage (see above). */
		if (!ret && health_set(100 * f, 100))
			ret = -EINVAL;
		if (!ret) {
			fill(buf, len, 15);
			bs = rails_sum(d, "bytes_tx");
			rs = rails_sum(d, "chunks_resent");
			op = outage(d, 0.3 * ts, 4.0 * ts);
			ret = nz_send(d, buf, len, peer, 15);
			b0 = rails_sum(d, "bytes_tx");
			r0 = rails_sum(d, "chunks_resent");
			unreg = nz_comm_unregister_buffer(d, idx);
			munmap(buf, len);
			printf("# cut: %lld payload bytes sent before the CQE, %lld chunks rerouted before it\n",
			       b0 - bs, r0 - rs);
			if (op > 0)
				waitpid(op, NULL, 0);
			/* The paths come back and anything still held goes. */
			usleep(3 * ts * 1e6);
			b1 = rails_sum(d, "bytes_tx");
		}
		/* Back to the default (scaled as nz_load() set it). */
		health_set(4 * f, 4);
		tap_ok(ret < 0 && !unreg,
		       "8 MiB send from a registered buffer, cut off by an outage: failed (%s), buffer unregistered (%d) and unmapped after its CQE",
		       strerror(-ret), unreg);
		tap_ok(b0 >= 0 && b1 == b0,
		       "after that CQE no chunk of it is sent again (%lld payload bytes sent since)",
		       b0 < 0 || b1 < 0 ? -1 : b1 - b0);
	}
	ctl_sync(k);
	exchange(d, "a registered-buffer send cut off by an outage", 6);
}

/*
 * "recover": on a communicator d with a 2 s transfer timeout (and a 1 MiB
 * budget for messages that come before their receive), fail transfers in
 * each way the issue names, and after each check that 2000 messages each
 * way still arrive intact on d.  A second communicator k (default
 * timeout) only keeps the two ranks in step.
 */
static int recover(void)
{
	static uint8_t big[8u << 20];
	struct nz_comm *k, *d;
	double ts = nz_time_scale();
	char tmo[16];
	long long old_mb;
	size_t got;
	double t0, t, t_over = 0;
	int ret, port, n, st, fails = 0, wrong = 0, okn = 0;
	const char *outage_err = "";
	pid_t pid;

	/*
	 * The control communicator's waits must outlast d's failures: on a
	 * slow kernel d's sends give up after 2 s x ts, past k's default
	 * 30 s, and a rank whose ctl_sync() gave up went on and posted the
	 * receive its peer's send was meant to miss.
	 */
	if (ts > 1) {
		snprintf(tmo, sizeof(tmo), "%d", (int)(30000 * ts));
		setenv("NEZHA_OP_TIMEOUT_MS", tmo, 1);
	}
	ret = nz_comm_init_env(&k);
	if (ret) {
		printf("# init: %s\n", nz_last_error());
		return 1;
	}
	rank = nz_comm_rank(k);
	peer = 1 - rank;
	port = atoi(getenv("MASTER_PORT") ? getenv("MASTER_PORT") : "0");
	snprintf((char *)big, 16, "%d", port + 1);
	setenv("MASTER_PORT", (char *)big, 1);
	snprintf(tmo, sizeof(tmo), "%d", (int)(2000 * ts));
	setenv("NEZHA_OP_TIMEOUT_MS", tmo, 1);
	ret = nz_comm_init_env(&d);
	if (ret) {
		printf("# init d: %s\n", nz_last_error());
		return 1;
	}
	old_mb = nz_param_rw("unexpected_mb", -1);
	tap_ok(old_mb > 0 && nz_param_rw("unexpected_mb", 1) == 1,
	       "unexpected budget down to 1 MiB a peer (was %lld)", old_mb);
	exchange(d, "nothing", 0);

	/* 1. A send that times out, its receive never posted. */
	ctl_sync(k);
	if (rank == 0) {
		long long zc0 = nz_dev_stat("stats/chunks_zerocopy"), zc1, held;

		t0 = now_s();
		ret = nz_send(d, big, sizeof(big), peer, 10);
		t = now_s() - t0;
		held = nz_dev_stat("zerocopy_held");
		zc1 = nz_dev_stat("stats/chunks_zerocopy");
		tap_ok(err_in(ret, -ETIMEDOUT, -ENOBUFS) && t < 30 * ts,
		       "8 MiB send nobody receives: failed in %.1f s (%s)", t,
		       strerror(-ret));
		/*
		 * Its chunks went out of our buffer without a copy; once its
		 * CQE is here no socket may transmit from it any more.
		 */
		tap_ok(zc1 > zc0 && held == 0,
		       "at that CQE no socket holds its pages (zerocopy_held %lld, %lld chunks sent without a copy)",
		       held, zc1 - zc0);
	}
	ctl_sync(k);
	exchange(d, "a send that timed out", 1);
	held_back(k, port, big, sizeof(big));

	/* 2. The receive posted after its send gave up. */
	if (rank == 0) {
		ret = nz_send(d, big, sizeof(big), peer, 11);
		tap_ok(err_in(ret, -ETIMEDOUT, -ENOBUFS),
		       "8 MiB send not yet received: failed (%s)",
		       strerror(-ret));
	}
	ctl_sync(k);
	if (rank == 1) {
		t0 = now_s();
		ret = nz_recv(d, big, sizeof(big), peer, 11, &got);
		t = now_s() - t0;
		tap_ok(err_in(ret, -ECONNABORTED, -ENOBUFS) && t < 1.5 * ts,
		       "its receive, posted after: failed at once (%.2f s, %s)",
		       t, strerror(-ret));
	}
	ctl_sync(k);
	exchange(d, "a receive posted too late", 2);

	/* 3. A receive that gave up before its message was sent. */
	if (rank == 1) {
		ret = nz_recv(d, big, sizeof(big), peer, 12, &got);
		tap_ok(ret == -ETIMEDOUT, "receive with no send: %s",
		       strerror(-ret));
	}
	ctl_sync(k);
	if (rank == 0) {
		ret = nz_send(d, big, sizeof(big), peer, 12);
		tap_ok(ret == -ECONNABORTED,
		       "the 8 MiB send for that receive, after it gave up: refused (%s)",
		       strerror(-ret));
		fill(big, 65536, 12);
		ret = nz_send(d, big, 65536, peer, 12);
	} else {
		memset(big, 0, 65536);
		ret = nz_recv(d, big, sizeof(big), peer, 12, &got);
		if (!ret && (got != 65536 || check(big, 65536, 12) >= 0))
			ret = -EBADMSG;
	}
	tap_ok(!ret, "the next message on that tag: %s",
	       ret ? strerror(-ret) : "intact");
	ctl_sync(k);
	exchange(d, "a receive that gave up", 3);

	/* 3b. Two receives cancelled (NZ_CMD_CANCEL) before their messages. */
	if (rank == 1) {
		struct nz_request *r[2];
		struct nz_status st;
		int n1, e0, e1;

		ret = nz_irecv(d, big, 4096, peer, 13, &r[0]);
		if (!ret)
			ret = nz_irecv(d, big + 4096, 4096, peer, 13, &r[1]);
		n1 = ret ? ret : nz_cancel_recvs(d, peer, 13);
		e0 = ret ? ret : nz_wait(r[0], &st);
		e1 = ret ? ret : nz_wait(r[1], &st);
		tap_ok(n1 == 2 && e0 == -ECANCELED && e1 == -ECANCELED,
		       "two receives cancelled: %d cancelled, they end with %s, %s",
		       n1, strerror(-e0), strerror(-e1));
		n1 = nz_cancel_recvs(d, peer, 13);
		tap_ok(n1 == 0, "cancelling again finds none (%d)", n1);
	}
	ctl_sync(k);
	if (rank == 0) {
		int e0 = nz_send(d, big, 4096, peer, 13);
		int e1 = nz_send(d, big, 4096, peer, 13);

		tap_ok(e0 == -ECONNABORTED && e1 == -ECONNABORTED,
		       "their two sends, after: refused (%s, %s)",
		       strerror(-e0), strerror(-e1));
		fill(big, 65536, 13);
		ret = nz_send(d, big, 65536, peer, 13);
	} else {
		memset(big, 0, 65536);
		ret = nz_recv(d, big, sizeof(big), peer, 13, &got);
		if (!ret && (got != 65536 || check(big, 65536, 13) >= 0))
			ret = -EBADMSG;
	}
	tap_ok(!ret, "the next message on that tag: %s",
	       ret ? strerror(-ret) : "intact");
	ctl_sync(k);
	exchange(d, "two cancelled receives", 5);

	/*
	 * 4. Every rail blackholed for 4 s (rank 0 drops all it sends) under
	 * a stream of 256 KiB messages: transfers time out on both sides.
	 * Each side goes on with its next message; a receive either fails or
	 * gets exactly the message of its own sequence number.  Then an
	 * empty message, sent until one is received, ends the stream.
	 */
	pid = rank == 0 ? outage(d, 1.0 * ts, 4.0 * ts) : 0;
	t0 = now_s();
	if (pid < 0) {
		/* No child to wait for: waitpid(-1) would reap any other. */
		outage_err = "; the outage was not in place (fork failed)";
		t_over = t0;
		pid = 0;
	}
	for (n = 0;; n++) {
		size_t len = 256u << 10;

		if (rank == 0) {
			bool end;

			/*
			 * The stream goes on until 2 s after the outage: its
			 * tc commands took from 1 to 9 s to run in a guest
			 * busy with the stream (make check), and a stream of
			 * a fixed 9 s ended before the outage came.
			 */
			if (!t_over && waitpid(pid, &st, WNOHANG) == pid) {
				t_over = now_s();
				pid = 0;
				if (!WIFEXITED(st) || WEXITSTATUS(st))
					outage_err = "; the outage was not in place";
			}
			end = t_over && now_s() - t_over > 2 * ts;

			fill(big, end ? 0 : len, 4000 + n);
			ret = nz_send(d, big, end ? 0 : len, peer, 14);
			if (end && !ret)
				break;
		} else {
			ret = nz_recv(d, big, len, peer, 14, &got);
			if (!ret && !got)
				break;
			if (!ret && (got != len || check(big, len, 4000 + n) >= 0))
				wrong++;
		}
		if (ret)
			fails++;
		else
			okn++;
		if (now_s() - t0 > 60 * ts) {
			ret = -ETIME;
			break;
		}
	}
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		outage_err = "; the outage did not end";
	}
	tap_ok(!ret && !wrong && fails > 0 && !outage_err[0],
	       "every rail down 4 s under a stream: %d transfers failed, %d succeeded, %d wrong%s%s",
	       fails, okn, wrong, ret ? ", no end" : "", outage_err);
	ctl_sync(k);
	exchange(d, "an outage of every rail", 4);
	cut_fixed(k, d, ts);

	nz_param_rw("unexpected_mb", old_mb);
	nz_comm_destroy(d);
	nz_comm_destroy(k);
	tap_plan(tap_n);
	return tap_exit();
}

int main(int argc, char **argv)
{
	struct nz_comm *c;
	int ret;

	if (argc == 4 && !strcmp(argv[1], "leave"))
		return leave(atoi(argv[2]), strtoul(argv[3], NULL, 0));
	if (argc == 2 && !strcmp(argv[1], "recover"))
		return recover();
	if (argc == 3 && !strcmp(argv[1], "unacked"))
		return unacked(atoi(argv[2]));
	ret = nz_comm_init_env(&c);
	if ((argc == 3 && !strcmp(argv[1], "gapmeter")) ||
	    ((argc == 3 || argc == 5) && !strcmp(argv[1], "ratemeter")) ||
	    (argc == 4 && (!strcmp(argv[1], "burst") || !strcmp(argv[1], "pieces")))) {
		if (ret) {
			printf("# init: %s\n", nz_last_error());
			return 1;
		}
		rank = nz_comm_rank(c);
		peer = 1 - rank;
		if (argv[1][0] == 'g')
			ret = gapmeter(c, argv[2]);
		else if (argv[1][0] == 'r')
			ret = ratemeter(c, atoi(argv[2]),
					argc == 5 ? atof(argv[3]) : 0,
					argc == 5 ? argv[4] : NULL);
		else
			ret = burst(c, strtoul(argv[2], NULL, 0), atoi(argv[3]),
				    argv[1][0] == 'p');
		nz_comm_destroy(c);
		return ret;
	}
	if ((argc >= 3 && !strcmp(argv[1], "drill")) ||
	    (argc == 3 && (!strcmp(argv[1], "overdue") ||
			   !strcmp(argv[1], "stream")))) {
		if (ret) {
			printf("# init: %s\n", nz_last_error());
			return 1;
		}
		rank = nz_comm_rank(c);
		peer = 1 - rank;
		if (argv[1][0] == 'd')
			ret = drill(c, atoi(argv[2]), argc - 3, argv + 3);
		else if (argv[1][0] == 'o')
			ret = overdue(c, atoi(argv[2]));
		else
			ret = stream(c, atoi(argv[2]));
		nz_comm_destroy(c);
		return ret;
	}
	if (!tap_ok(ret == 0, "communicator from the environment (%s)",
		    ret ? nz_last_error() : "ok")) {
		tap_plan(tap_n);
		return 1;
	}
	rank = nz_comm_rank(c);
	peer = 1 - rank;
	tap_ok(nz_comm_size(c) == 2 && nz_comm_nrails(c) >= 2,
	       "2 ranks over %d rails", nz_comm_nrails(c));
	test_sizes(c);
	test_truncate(c);
	test_inflight(c, false);
	test_inflight(c, true);
	test_fixed(c);
	test_split(c);
	test_peer_sysfs(c);
	test_random(c, 40, 2024);
	test_big(c);
	nz_comm_destroy(c);
	tap_plan(tap_n);
	return tap_exit();
}
