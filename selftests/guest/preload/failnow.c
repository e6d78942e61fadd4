// SPDX-License-Identifier: GPL-2.0
/*
 * LD_PRELOAD=failnow.so CMD: CMD runs with the kernel's fault injection
 * aimed at it (failslab's and fail_page_alloc's task filter), from its
 * main() on -- not during its exec and dynamic loading, which would fail
 * first and test nothing of ours (faults.sh).  Its memory is locked
 * before, so that a page fault on its text does not fail instead.  When
 * CMD returns from main() or calls exit(), failnot() turns it off again.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static int fd = -1;

__attribute__((constructor)) static void failnow(void)
{
	if (mlockall(MCL_CURRENT | MCL_FUTURE)) {
		perror("failnow: mlockall");
		_exit(125);
	}
	fd = open("/proc/self/make-it-fail", O_WRONLY);
	if (fd < 0 || pwrite(fd, "1", 1, 0) != 1) {
		perror("failnow: /proc/self/make-it-fail");
		_exit(125);
	}
}

/*
 * Off again before the exit: its own requests to the host's 9p share
 * (the files of the binary and its libraries closed) failed under it and
 * left the guest's root unreadable (nz_faults.c).
 */
__attribute__((destructor)) static void failnot(void)
{
	if (fd >= 0 && pwrite(fd, "0", 1, 0) != 1)
		perror("failnow: /proc/self/make-it-fail");
}
