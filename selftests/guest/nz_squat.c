// SPDX-License-Identifier: GPL-2.0
/*
 * The isolation drill's squatter (issue 20, selftests/guest/drill.sh): a
 * user who has learned a running job's id tries, for SECS seconds, to
 * take the job's ranks on this node -- creates a communicator under that
 * id as rank 0 and as rank 1, with the job's own rail addresses but not
 * its secret, holds it long enough for its dials to reach the peers, and
 * destroys it, over and over.  Per-user job slots keep its communicators
 * apart from the job's, and without the secret none of its handshakes
 * checks out; the drill checks that the job does not notice.
 *
 *   nz_squat RAIL JOB_ID_HEX ADDR0 ADDR1 PORT SECS
 *
 * Prints one line, also when stopped by SIGTERM: "squat: N creates (C
 * created, E refused: last errno), D destroyed"; exit status 0 unless the
 * device could not be opened.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>
#include "nezha.h"

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	unsigned long created = 0, refused = 0, destroyed = 0, tries = 0;
	struct nz_comm_addr a[2] = { 0 };
	int fd, last_err = 0;
	double end;

	if (argc != 7) {
		fprintf(stderr, "usage: nz_squat RAIL JOB_ID_HEX ADDR0 ADDR1 PORT SECS\n");
		return 2;
	}
	if (inet_pton(AF_INET, argv[3], &a[0].addr) != 1 ||
	    inet_pton(AF_INET, argv[4], &a[1].addr) != 1) {
		fprintf(stderr, "nz_squat: bad address\n");
		return 2;
	}
	a[0].port = a[1].port = htons((uint16_t)atoi(argv[5]));
	fd = open("/dev/nezha", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		perror("nz_squat: /dev/nezha");
		return 1;
	}
	/* Stopped by SIGTERM (the drill, once its job is done): still report. */
	signal(SIGTERM, on_term);
	end = now_s() + atof(argv[6]);
	while (!stop && now_s() < end) {
		struct nz_comm_create cc = { 0 };

		cc.job_id = strtoull(argv[2], NULL, 16);
		memset(cc.secret, 0x5a, sizeof(cc.secret));	/* not the job's */
		cc.rank = tries++ % 2;
		cc.size = 2;
		cc.nrails = 1;
		cc.timeout_ms = 10000;
		snprintf(cc.rails[0], sizeof(cc.rails[0]), "%s", argv[1]);
		cc.addrs = (uintptr_t)a;
		if (ioctl(fd, NZ_IOC_COMM_CREATE, &cc)) {
			refused++;
			last_err = errno;
			usleep(50 * 1000);
			continue;
		}
		created++;
		usleep(200 * 1000);	/* its dials reach the job's peers */
		if (!ioctl(fd, NZ_IOC_COMM_DESTROY, &cc.comm_id))
			destroyed++;
	}
	printf("squat: %lu creates (%lu created, %lu refused%s%s), %lu destroyed\n",
	       tries, created, refused, last_err ? ": last " : "",
	       last_err ? strerror(last_err) : "", destroyed);
	close(fd);
	return 0;
}
