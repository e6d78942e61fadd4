// SPDX-License-Identifier: GPL-2.0
/*
 * Guest test of RDMA rails (selftests/guest/rdma.sh), run as rank 0 and
 * rank 1, one per guest, with the communicator's rails from the module's
 * rail table (an RDMA rail alone, or next to a TCP rail).  Every message
 * carries a pattern derived from (seed, length); the receiver checks
 * every byte.
 *
 *   nz_rdma data               sizes 0 B .. 64 MiB, many messages in
 *                              flight, random sizes; bytes per rail
 *   nz_rdma failover RAIL IBDEV NETDEV
 *                              rank 0 deletes its RDMA device (rdma link
 *                              delete IBDEV) while a 64 MiB message is on
 *                              the wire; the message must arrive intact
 *                              over the other rail.  Then it adds the
 *                              device again and waits for RAIL to carry
 *                              traffic again.
 *   nz_rdma hold FILE          keep the communicator up until FILE exists
 *                              (rank 1 creates it); write "SLOT NRAILS"
 *                              of the RDMA rail to FILE.info.RANK first
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
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

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A value of /sys/class/nezha/rail-RAIL/FILE: a number, or -1. */
static long long rail_val(const char *rail, const char *file)
{
	return nz_rail_num(rail, file);
}

static bool rail_str(const char *rail, const char *file, const char *want)
{
	char path[256], line[64];
	bool same = false;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/nezha/rail-%s/%s", rail, file);
	f = fopen(path, "r");
	if (!f)
		return false;
	if (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		same = !strcmp(line, want);
	}
	fclose(f);
	return same;
}

/* State of our connection to the peer on rail: "up", "idle", ... */
static bool peer_state(const char *rail, const char *want)
{
	char line[64];

	return !nz_peer_sysfs_read(rail, rank, peer, "state", line,
				   sizeof(line)) &&
	       !strcmp(line, want);
}

/* The scheduler's view of our connection on rail, as a TAP comment. */
static void peer_est_diag(const char *rail)
{
	static const char *const files[] = {
		"state", "sched_state", "est_bw", "start_us", "min_rtt_us",
		"window_bytes", "inflight_bytes",
	};
	char out[256] = "", v[64];
	size_t i, n = 0;

	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		if (nz_peer_sysfs_read(rail, rank, peer, files[i], v, sizeof(v)))
			snprintf(v, sizeof(v), "?");
		n += snprintf(out + n, sizeof(out) - n, " %s %s", files[i], v);
		if (n >= sizeof(out))
			break;
	}
	tap_diag("rail %s:%s", rail, out);
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

/* Both ranks at the same point (rank 1 speaks first). */
static int sync_ranks(struct nz_comm *c, uint64_t tag)
{
	char b = 1;
	size_t got;

	if (rank == 1)
		return nz_send(c, &b, 1, peer, tag);
	return nz_recv(c, &b, 1, peer, tag, &got);
}

static void test_sizes(struct nz_comm *c)
{
	static const size_t sizes[] = {
		0, 1, 47, 48, 49, 4095, 4096, 65535, 65536, 65537,
		131072 + 7, 1 << 20, (1 << 20) + 12345, 16 << 20, 64 << 20,
	};
	unsigned int i, bad = 0;
	double t = now_s();
	int err = 0;

	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		if (!one_transfer(c, sizes[i], 100 + i, 7 * i + 1, &err)) {
			tap_diag("size %zu failed: %s", sizes[i], strerror(-err));
			bad++;
		}
	tap_ok(!bad, "integrity over %zu sizes 0 B .. 64 MiB (%.1f s)",
	       sizeof(sizes) / sizeof(sizes[0]), now_s() - t);
}

/* Many messages in flight at once, on 8 tags, received in order per tag. */
static void test_inflight(struct nz_comm *c)
{
	enum { N = 64 };
	struct nz_request *req[N];
	struct nz_status st;
	uint8_t *buf[N];
	unsigned int i, bad = 0;
	int ret;

	for (i = 0; i < N; i++) {
		size_t len = 1 + (size_t)mix(i + 77) % 400000;

		req[i] = NULL;
		buf[i] = malloc(len);
		if (!buf[i]) {
			bad++;
			continue;
		}
		if (rank == 0) {
			fill(buf[i], len, 5000 + i);
			ret = nz_isend(c, buf[i], len, peer, i % 8, &req[i]);
		} else {
			ret = nz_irecv(c, buf[i], len, peer, i % 8, &req[i]);
		}
		if (ret) {
			tap_diag("post #%u: %s", i, strerror(-ret));
			req[i] = NULL;
			bad++;
		}
	}
	for (i = 0; i < N; i++) {
		size_t len = 1 + (size_t)mix(i + 77) % 400000;

		if (!req[i])
			continue;
		ret = nz_wait(req[i], &st);
		if (ret || st.error || st.bytes != len ||
		    (rank == 1 && check(buf[i], len, 5000 + i) >= 0))
			bad++;
		free(buf[i]);
	}
	tap_ok(!bad, "%d messages in flight on 8 tags, all intact", N);
}

static void test_random(struct nz_comm *c, unsigned int n, uint64_t seed)
{
	unsigned int i, bad = 0;
	double t = now_s();
	uint64_t bytes = 0;
	int err = 0;

	for (i = 0; i < n; i++) {
		uint64_t r = mix(seed + i);	/* the same on both ranks */
		size_t len = (r & 1) ? r % 70000 : r % (3u << 20);

		bytes += len;
		if (!one_transfer(c, len, mix(r) % 100, r, &err)) {
			tap_diag("random #%u (%zu B) failed: %s", i, len,
				 strerror(-err));
			bad++;
		}
	}
	tap_ok(!bad, "integrity over %u random sizes (%.1f MB in %.1f s)", n,
	       bytes / 1e6, now_s() - t);
}

/* Every rail carries a share of one 16 MiB message. */
static void test_split(struct nz_comm *c)
{
	const char *what = rank == 0 ? "stats/bytes_tx" : "stats/bytes_rx";
	int n = nz_comm_nrails(c), s, idle = 0, err = 0;
	long long before[8], delta[8], sum = 0;
	bool ok;

	for (s = 0; s < n && s < 8; s++) {
		before[s] = rail_val(nz_comm_rail_name(c, s), what);
		peer_est_diag(nz_comm_rail_name(c, s));
	}
	sync_ranks(c, 901);
	ok = one_transfer(c, 16u << 20, 902, 902, &err);
	for (s = 0; s < n && s < 8; s++) {
		delta[s] = rail_val(nz_comm_rail_name(c, s), what) - before[s];
		sum += delta[s];
	}
	sync_ranks(c, 903);
	for (s = 0; s < n && s < 8; s++) {
		tap_diag("rail %s carried %.1f%% (%lld bytes)",
			 nz_comm_rail_name(c, s),
			 sum ? 100.0 * delta[s] / sum : 0, delta[s]);
		if (delta[s] <= 0)
			idle++;
	}
	tap_ok(ok && sum >= (16 << 20) && !idle,
	       "a 16 MiB message travels over all %d rails, intact", n);
}

static int data(struct nz_comm *c)
{
	test_sizes(c);
	test_inflight(c);
	test_random(c, 30, 4711);
	test_split(c);
	return 0;
}

/* Rank 0: wait until fn(rail) holds, up to secs; false on timeout. */
static bool wait_for(const char *rail, bool (*fn)(const char *), int secs)
{
	double end = now_s() + secs;

	while (now_s() < end) {
		if (fn(rail))
			return true;
		usleep(20000);
	}
	return false;
}

static bool rail_failed(const char *rail)
{
	return rail_str(rail, "state", "failed");
}

static bool rail_back(const char *rail)
{
	return rail_str(rail, "state", "up") && peer_state(rail, "up");
}

static int run(const char *cmd)
{
	int ret = system(cmd);

	if (ret)
		tap_diag("'%s' exited %d", cmd, ret);
	return ret;
}

/* Rank 0 deletes the RDMA device under a 64 MiB message. */
static int failover(struct nz_comm *c, const char *rail, const char *ibdev,
		    const char *netdev)
{
	size_t len = 64u << 20;
	uint8_t *buf = malloc(len);
	struct nz_request *req = NULL;
	struct nz_status st = { 0 };
	long long start, fo0;
	bool deleted = false;
	double t0;
	char cmd[256];
	int ret, err = 0;

	if (!buf)
		return 1;
	if (sync_ranks(c, 1000))
		return 1;
	if (rank == 1) {
		memset(buf, 0, len);
		ret = nz_recv(c, buf, len, peer, 1001, &st.bytes);
		tap_ok(!ret && st.bytes == len && check(buf, len, 1001) < 0,
		       "64 MiB received intact while the peer's RDMA device went away (%s)",
		       strerror(-ret));
		/* The rail came back on rank 0: traffic over it again. */
		ret = one_transfer(c, 16u << 20, 1002, 1002, &err);
		tap_ok(ret, "16 MiB intact after the device came back");
		free(buf);
		return 0;
	}

	fill(buf, len, 1001);
	start = rail_val(rail, "stats/bytes_tx");
	fo0 = rail_val(rail, "stats/failovers");
	t0 = now_s();
	ret = nz_isend(c, buf, len, peer, 1001, &req);
	if (ret) {
		tap_ok(0, "isend 64 MiB: %s", strerror(-ret));
		return 1;
	}
	/* Once the RDMA rail carries the message, pull its device. */
	while (now_s() - t0 < 60) {
		if (!nz_test(req, &st)) {
			req = NULL;	/* done (and freed) already */
			break;
		}
		if (rail_val(rail, "stats/bytes_tx") - start >= (1 << 20)) {
			snprintf(cmd, sizeof(cmd), "rdma link delete %s", ibdev);
			deleted = !run(cmd);
			break;
		}
		usleep(5000);
	}
	tap_ok(deleted && req,
	       "%s deleted while it carried the message (%lld bytes in)",
	       ibdev, rail_val(rail, "stats/bytes_tx") - start);
	ret = req ? nz_wait(req, &st) : 0;
	tap_ok(!ret && !st.error && st.bytes == len,
	       "the 64 MiB send completed over the other rail (%.1f s, %s)",
	       now_s() - t0, strerror(-(ret ?: st.error)));
	tap_ok(wait_for(rail, rail_failed, 10) &&
	       rail_val(rail, "rdma/device_removals") == 1 &&
	       rail_val(rail, "rdma/qps") == 0 && !peer_state(rail, "up"),
	       "rail %s failed: no QP left, device removal counted", rail);
	tap_ok(rail_val(rail, "stats/failovers") > fo0,
	       "the lost path counted as a failover");

	snprintf(cmd, sizeof(cmd), "rdma link add %s type rxe netdev %s",
		 ibdev, netdev);
	ret = run(cmd);
	tap_ok(!ret && wait_for(rail, rail_back, 30),
	       "%s added again: rail %s up, connected again", ibdev, rail);
	start = rail_val(rail, "stats/bytes_tx");
	ret = one_transfer(c, 16u << 20, 1002, 1002, &err);
	tap_ok(ret && rail_val(rail, "stats/bytes_tx") > start,
	       "16 MiB after the device came back, %lld bytes over %s",
	       rail_val(rail, "stats/bytes_tx") - start, rail);
	free(buf);
	return 0;
}

/*
 * Keep the communicator up for nz_rdma_hostile (rdma.sh): once a message
 * went both ways, write FILE.info.RANK, then wait for FILE.
 */
static int hold(struct nz_comm *c, const char *file)
{
	char info[512];
	double end = now_s() + 180;
	int s, slot = -1;
	FILE *f;

	for (s = 0; s < nz_comm_nrails(c); s++) {
		if (rail_str(nz_comm_rail_name(c, s), "proto", "rdma"))
			slot = s;
	}
	if (sync_ranks(c, 1999))
		return 1;
	snprintf(info, sizeof(info), "%s.info.%d", file, rank);
	f = fopen(info, "w");
	if (!f)
		return 1;
	fprintf(f, "%d %d\n", slot, nz_comm_nrails(c));
	fclose(f);
	if (rank == 1)
		while (access(file, F_OK) && now_s() < end)
			usleep(100000);
	return sync_ranks(c, 2000) ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct nz_comm *c;
	int ret;

	if (argc < 2) {
		fprintf(stderr, "usage: nz_rdma data | failover RAIL IBDEV NETDEV | hold FILE\n");
		return 2;
	}
	ret = nz_comm_init_env(&c);
	if (!tap_ok(ret == 0, "communicator from the environment (%s)",
		    ret ? nz_last_error() : "ok")) {
		tap_plan(tap_n);
		return 1;
	}
	rank = nz_comm_rank(c);
	peer = 1 - rank;
	if (!strcmp(argv[1], "data"))
		ret = data(c);
	else if (!strcmp(argv[1], "failover") && argc == 5)
		ret = failover(c, argv[2], argv[3], argv[4]);
	else if (!strcmp(argv[1], "hold") && argc == 3)
		ret = hold(c, argv[2]);
	else
		ret = 2;
	nz_comm_destroy(c);
	tap_plan(tap_n);
	return ret ? ret : tap_exit();
}
