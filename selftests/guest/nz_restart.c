// SPDX-License-Identifier: GPL-2.0
/*
 * A rank that restarts with the job it had (issue 19, defect 7): its new
 * communicator has the same job id and secret as the one that died, so
 * its handshakes check out -- but its message ids start again from 1,
 * where its peer's duplicate window has long passed them.  Before wire
 * version 3 the peer took the new instance for the old one reconnecting,
 * drained its messages as repeats and acknowledged them: the restarted
 * rank's sends completed and reached nobody.  Now the handshake names the
 * instance; the peer refuses the new one and fails what it had with the
 * old one (-ECONNRESET).
 *
 * Two guests, each its own rank of one job (fixed id and secret, module
 * ioctls directly: libnezha's rendezvous would not let a restarted rank
 * back in, but a framework that keeps the job's record could):
 *
 *   nz_restart serve N GOFILE   rank 0: receive N messages from rank 1;
 *                               once GOFILE exists, a receive and a send
 *                               with rank 1 must fail with ECONNRESET,
 *                               not time out
 *   nz_restart send N           rank 1: send N messages, print "sent",
 *                               then wait to be killed
 *   nz_restart again            rank 1 restarted: one send, which must
 *                               fail rather than complete
 *
 * Rails r0 and r1, port 7470, rank r's address on rail s 10.77.s.(r+1).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>
#include "nezha.h"
#include "tap.h"

#define JOB		0x5245535441525431ULL	/* "RESTART1" */
#define MSG		4096
#define PORT		7470
#define TIMEOUT_MS	10000

static int peer;	/* the other rank */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int comm_create(int fd, uint32_t rank)
{
	struct nz_comm_create cc = { 0 };
	struct nz_comm_addr a[4];
	char ip[32];
	int r, s;

	for (r = 0; r < 2; r++)
		for (s = 0; s < 2; s++) {
			snprintf(ip, sizeof(ip), "10.77.%d.%d", s, r + 1);
			inet_pton(AF_INET, ip, &a[r * 2 + s].addr);
			a[r * 2 + s].port = htons(PORT);
			a[r * 2 + s].rsvd = 0;
		}
	cc.job_id = JOB;
	memset(cc.secret, 0x3c, sizeof(cc.secret));
	cc.rank = rank;
	cc.size = 2;
	cc.nrails = 2;
	cc.timeout_ms = TIMEOUT_MS;
	snprintf(cc.rails[0], NZ_RAIL_NAME_LEN, "r0");
	snprintf(cc.rails[1], NZ_RAIL_NAME_LEN, "r1");
	cc.addrs = (uintptr_t)a;
	return ioctl(fd, NZ_IOC_COMM_CREATE, &cc) ? -errno : (int)cc.comm_id;
}

/* One command, waited for: its result (bytes or -errno). */
static int xfer(struct nz_queue *q, int comm, uint32_t op, void *buf,
		uint64_t len)
{
	struct nz_sqe cmd = { 0 };
	struct nz_cqe cqe;
	int ret;

	cmd.comm_id = (uint32_t)comm;
	cmd.xfer.addr = (uintptr_t)buf;
	cmd.xfer.len = len;
	cmd.xfer.peer = (uint32_t)peer;
	cmd.xfer.tag = 9;
	ret = nz_queue_prep(q, op, &cmd, 1, -1);
	if (!ret && nz_queue_submit(q) != 1)
		ret = -EIO;
	if (!ret)
		ret = nz_queue_wait(q, &cqe, TIMEOUT_MS + 5000);
	return ret ? ret : cqe.res;
}

static void fill(uint8_t *b, unsigned int seed)
{
	for (size_t i = 0; i < MSG; i++)
		b[i] = (uint8_t)(i * 13 + seed);
}

int main(int argc, char **argv)
{
	static uint8_t buf[MSG], want[MSG];
	struct nz_queue_opts o = { .entries = 8 };
	struct nz_comm_wait w = { 0 };
	struct nz_queue *q;
	int rank, comm, n = 0, i, ret, good = 0;
	double t0;

	if (argc < 2 || (strcmp(argv[1], "serve") && strcmp(argv[1], "send") &&
			 strcmp(argv[1], "again"))) {
		fprintf(stderr, "usage: nz_restart serve N GOFILE | send N | again\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	rank = strcmp(argv[1], "serve") ? 1 : 0;
	peer = 1 - rank;
	n = argc > 2 ? atoi(argv[2]) : 1;
	ret = nz_queue_open(&q, &o);
	if (ret) {
		tap_ok(0, "open /dev/nezha (%s)", strerror(-ret));
		return 1;
	}
	comm = comm_create(nz_queue_fd(q), (uint32_t)rank);
	if (comm < 0) {
		tap_ok(0, "rank %d's communicator (%s)", rank,
		       strerror(-comm));
		return 1;
	}
	w.comm_id = (uint32_t)comm;
	w.timeout_ms = strcmp(argv[1], "again") ? 30000 : 5000;
	ret = ioctl(nz_queue_fd(q), NZ_IOC_COMM_WAIT, &w) ? -errno : 0;

	if (!strcmp(argv[1], "again")) {
		/* The peer may or may not let us connect: either way no send
		 * of ours may complete as if it had been delivered. */
		printf("# restarted rank 1: %u of %u connections came up (%s)\n",
		       w.up, w.expected, ret ? strerror(-ret) : "all");
		fill(buf, 1000);
		t0 = now_s();
		ret = xfer(q, comm, NZ_CMD_SEND, buf, MSG);
		tap_ok(ret < 0,
		       "the restarted rank's send is not taken for its old instance's: %s after %.1f s",
		       ret < 0 ? strerror(-ret) : "COMPLETED (delivered nowhere)",
		       now_s() - t0);
		nz_queue_close(q);
		return tap_failed ? 1 : 0;
	}
	if (ret) {
		tap_ok(0, "rank %d connected (%u of %u)", rank, w.up,
		       w.expected);
		return 1;
	}
	if (rank == 1) {
		for (i = 0; i < n; i++) {
			fill(buf, (unsigned int)i);
			if (xfer(q, comm, NZ_CMD_SEND, buf, MSG) == MSG)
				good++;
		}
		tap_ok(good == n, "rank 1 sent %d of %d messages", good,
		       n);
		printf("sent\n");
		pause();	/* until killed: the "crash" */
		return 0;
	}
	for (i = 0; i < n; i++) {
		memset(buf, 0, MSG);
		fill(want, (unsigned int)i);
		if (xfer(q, comm, NZ_CMD_RECV, buf, MSG) == MSG &&
		    !memcmp(buf, want, MSG))
			good++;
	}
	tap_ok(good == n, "rank 0 received %d of %d messages intact",
	       good, n);
	for (i = 0; i < 600 && access(argv[3], F_OK); i++)
		usleep(100000);
	t0 = now_s();
	ret = xfer(q, comm, NZ_CMD_RECV, buf, MSG);
	tap_ok(ret == -ECONNRESET,
	       "once rank 1 restarted, a receive from it fails with ECONNRESET: %s after %.1f s",
	       ret < 0 ? strerror(-ret) : "completed", now_s() - t0);
	t0 = now_s();
	ret = xfer(q, comm, NZ_CMD_SEND, buf, MSG);
	tap_ok(ret == -ECONNRESET, "... and a send to it: %s after %.1f s",
	       ret < 0 ? strerror(-ret) : "completed", now_s() - t0);
	nz_queue_close(q);
	return tap_failed ? 1 : 0;
}
