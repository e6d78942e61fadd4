// SPDX-License-Identifier: GPL-2.0
/*
 * Guest load for the fault-injection suite (faults.sh): ITERS rounds of
 * the communicator and transfer paths in one process, while the kernel
 * fails some of its allocations or some of the module's functions.
 *
 *   nz_faults RAIL0,RAIL1 ADDR0,ADDR1 PORT ITERS [-q | -F]
 *
 * Each round opens a queue, creates the two ranks of a job in this one
 * guest (rank 1 dials rank 0 over both rails), waits for the connections,
 * moves a 256 KiB and a 4 KiB message from rank 1 to rank 0, destroys both
 * and closes.  Any step may fail with a negative errno -- that is what an
 * injected failure should cause -- but none may hang: every command's
 * completion must come within its timeout plus a margin.  Prints one line
 * of counts; exits 0 unless something hung or a transfer that completed
 * carried wrong bytes, 1 otherwise.  -q: also require every step to
 * succeed (the runs without injection).  -F: fail this process's own
 * allocations (failslab's and fail_page_alloc's task filter): its memory
 * locked first, so that from then on only what it asks of the kernel
 * allocates, not its exec, loader or page faults.  Timeouts scale with
 * NZ_TIME_SCALE (vm.sh; at most 3 times: a failed connection costs a
 * send its whole timeout, and that in many rounds).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "nezha.h"
#include "tap.h"

#define CMD_TIMEOUT_MS	(3000 * time_scale)
#define MARGIN_MS	(5000 * time_scale)
#define BIG		(256 << 10)
#define SMALL		4096

static char rails[2][NZ_RAIL_NAME_LEN];
static struct in_addr addrs[2];
static uint16_t port;
static bool strict;
static int time_scale = 1;

static struct {
	unsigned long rounds, ok_rounds, errors, hangs, corrupt, cut_short;
	unsigned long err_by[140];
} st;

static void count_err(int err)
{
	st.errors++;
	if (err < 0 && -err < (int)(sizeof(st.err_by) / sizeof(st.err_by[0])))
		st.err_by[-err]++;
}

static int comm_create(int fd, uint32_t rank, uint64_t job)
{
	struct nz_comm_create cc = { 0 };
	struct nz_comm_addr a[4];
	int r, s;

	for (r = 0; r < 2; r++)
		for (s = 0; s < 2; s++) {
			a[r * 2 + s].addr = addrs[s].s_addr;
			a[r * 2 + s].port = htons(port);
			a[r * 2 + s].rsvd = 0;
		}
	cc.job_id = job;
	memset(cc.secret, 0x5a, sizeof(cc.secret));
	cc.rank = rank;
	cc.size = 2;
	cc.nrails = 2;
	cc.timeout_ms = CMD_TIMEOUT_MS;
	memcpy(cc.rails, rails, sizeof(rails));
	cc.addrs = (uintptr_t)a;
	return ioctl(fd, NZ_IOC_COMM_CREATE, &cc) ? -errno : (int)cc.comm_id;
}

static int prep(struct nz_queue *q, uint32_t op, int comm, uint32_t peer,
		void *buf, uint64_t len, uint64_t ud)
{
	struct nz_sqe cmd = { 0 };

	cmd.comm_id = (uint32_t)comm;
	cmd.xfer.addr = (uintptr_t)buf;
	cmd.xfer.len = len;
	cmd.xfer.peer = peer;
	cmd.xfer.tag = 7;
	return nz_queue_prep(q, op, &cmd, ud, -1);
}

/*
 * Wait for the completions of what was posted (posted[user_data], 0..3:
 * two receives, then two sends); results into res[].  Once every send has
 * completed and one of them failed, its receive would wait out its whole
 * timeout: stop there (-ECANCELED), and the destroy cancels the rest.
 */
static int reap(struct nz_queue *q, const bool *posted, int *res)
{
	int i, left = 0, sends = posted[2] + posted[3], failed = 0;
	struct nz_cqe cqe;
	int ret;

	for (i = 0; i < 4; i++)
		left += posted[i];
	while (left) {
		ret = nz_queue_wait(q, &cqe, CMD_TIMEOUT_MS + MARGIN_MS);
		if (ret)
			return ret;
		left--;
		if (cqe.user_data >= 4)
			continue;
		res[cqe.user_data] = cqe.res;
		if (cqe.user_data >= 2) {
			sends--;
			failed += cqe.res < 0;
		}
		if (!sends && failed && left)
			return -ECANCELED;
	}
	return 0;
}

static void fill(uint8_t *b, size_t n, unsigned int seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		b[i] = (uint8_t)(i * 31 + seed);
}

static bool round_ok(unsigned int iter)
{
	static uint8_t sbig[BIG], rbig[BIG], ssmall[SMALL], rsmall[SMALL];
	struct nz_queue_opts o = { .entries = 16 };
	struct nz_comm_wait w = { 0 };
	int res[4] = { 1, 1, 1, 1 }, a = -1, b = -1, fd, ret, n, i;
	bool posted[4];
	struct nz_queue *q;
	bool good = false;

	st.rounds++;
	ret = nz_queue_open(&q, &o);
	if (ret) {
		count_err(ret);
		return false;
	}
	fd = nz_queue_fd(q);
	a = comm_create(fd, 0, 0x46415500000000ULL + iter);
	b = a > 0 ? comm_create(fd, 1, 0x46415500000000ULL + iter) : a;
	if (a < 0 || b < 0) {
		count_err(a < 0 ? a : b);
		goto out;
	}
	w.comm_id = (uint32_t)b;
	w.timeout_ms = CMD_TIMEOUT_MS;
	if (ioctl(fd, NZ_IOC_COMM_WAIT, &w))
		count_err(-errno);	/* go on: some rails may be up */

	fill(sbig, BIG, iter);
	fill(ssmall, SMALL, iter + 1);
	memset(rbig, 0, BIG);
	memset(rsmall, 0, SMALL);
	posted[0] = !prep(q, NZ_CMD_RECV, a, 1, rbig, BIG, 0);
	posted[1] = !prep(q, NZ_CMD_RECV, a, 1, rsmall, SMALL, 1);
	posted[2] = !prep(q, NZ_CMD_SEND, b, 0, sbig, BIG, 2);
	posted[3] = !prep(q, NZ_CMD_SEND, b, 0, ssmall, SMALL, 3);
	n = posted[0] + posted[1] + posted[2] + posted[3];
	if (nz_queue_submit(q) != n) {
		count_err(-EIO);
		goto out;
	}
	ret = reap(q, posted, res);
	if (ret == -ECANCELED)
		st.cut_short++;
	if (ret == -ETIME) {
		st.hangs++;
		printf("# round %u: a command gave no completion in %d ms\n",
		       iter, CMD_TIMEOUT_MS + MARGIN_MS);
		goto out;
	}
	for (i = 0; i < 4; i++)
		if (res[i] < 0)
			count_err(res[i]);
	if (res[0] == BIG && memcmp(rbig, sbig, BIG)) {
		st.corrupt++;
		printf("# round %u: 256 KiB message completed with wrong bytes\n", iter);
	}
	if (res[1] == SMALL && memcmp(rsmall, ssmall, SMALL)) {
		st.corrupt++;
		printf("# round %u: 4 KiB message completed with wrong bytes\n", iter);
	}
	good = n == 4 && res[0] == BIG && res[1] == SMALL && res[2] >= 0 &&
	       res[3] >= 0;
out:
	if (b > 0 && ioctl(fd, NZ_IOC_COMM_DESTROY, &b))
		count_err(-errno);
	if (a > 0 && ioctl(fd, NZ_IOC_COMM_DESTROY, &a))
		count_err(-errno);
	/* What destroy cancelled completes now; a queue that hangs here hangs. */
	nz_queue_close(q);
	st.ok_rounds += good;
	return good;
}

static int split2(char *s, char out[2][NZ_RAIL_NAME_LEN])
{
	char *c = strchr(s, ',');

	if (!c)
		return -1;
	*c = '\0';
	snprintf(out[0], NZ_RAIL_NAME_LEN, "%s", s);
	snprintf(out[1], NZ_RAIL_NAME_LEN, "%s", c + 1);
	return 0;
}

/*
 * -F: from here on the kernel may fail this task's allocations, until
 * make_it_fail(false) at the end.  That must come before exit: the exit's
 * own 9p requests (closing the binary's and libraries' files on the
 * host's share) failed under it and left the guest's root unreadable --
 * every later exec failed with 127 (debug kernel, failslab 10 %).
 */
static int make_it_fail(bool on)
{
	static int fd = -1;

	if (on && mlockall(MCL_CURRENT | MCL_FUTURE)) {
		perror("mlockall");
		return -1;
	}
	if (fd < 0)
		fd = open("/proc/self/make-it-fail", O_WRONLY);
	if (fd < 0 || pwrite(fd, on ? "1" : "0", 1, 0) != 1) {
		perror("/proc/self/make-it-fail");
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	char a[2][NZ_RAIL_NAME_LEN];
	unsigned long iters, i;
	char errs[1024] = "";
	bool faulty;
	size_t len = 0;

	if (argc < 5 || split2(argv[1], rails) || split2(argv[2], a)) {
		fprintf(stderr, "usage: nz_faults RAIL0,RAIL1 ADDR0,ADDR1 PORT ITERS [-q]\n");
		return 2;
	}
	inet_pton(AF_INET, a[0], &addrs[0]);
	inet_pton(AF_INET, a[1], &addrs[1]);
	port = (uint16_t)atoi(argv[3]);
	iters = strtoul(argv[4], NULL, 0);
	strict = argc > 5 && !strcmp(argv[5], "-q");
	if (getenv("NZ_TIME_SCALE"))
		time_scale = atoi(getenv("NZ_TIME_SCALE"));
	time_scale = time_scale < 1 ? 1 : time_scale > 3 ? 3 : time_scale;
	setvbuf(stdout, NULL, _IOLBF, 0);
	faulty = argc > 5 && !strcmp(argv[5], "-F");
	if (faulty && make_it_fail(true))
		return 2;

	for (i = 0; i < iters && !st.hangs; i++)
		round_ok((unsigned int)i);
	if (faulty && make_it_fail(false))
		return 2;
	for (i = 0; i < sizeof(st.err_by) / sizeof(st.err_by[0]); i++)
		if (st.err_by[i] && len < sizeof(errs) - 32)
			len += snprintf(errs + len, sizeof(errs) - len, " %s:%lu",
					strerrorname_np((int)i) ?: "?", st.err_by[i]);
	printf("rounds %lu whole %lu errors %lu hangs %lu corrupt %lu cut short %lu;%s\n",
	       st.rounds, st.ok_rounds, st.errors, st.hangs, st.corrupt,
	       st.cut_short, errs);
	if (st.hangs || st.corrupt)
		return 1;
	return strict && st.ok_rounds != st.rounds ? 1 : 0;
}
