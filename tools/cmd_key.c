// SPDX-License-Identifier: GPL-2.0
/*
 * nezhactl key generate [FILE] | key check FILE: the job key that every
 * rank of a job must hold to join it (Documentation/libnezha.rst, "The
 * job key").  No module is needed: this is libnezha's nz_job_key_*().
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "nezha.h"
#include "nezhactl.h"

#define NZCTL_KEY_USAGE "nezhactl key { generate [FILE] | check FILE | help }"

/* A new file of mode 0600 holding hex and a newline; never an old file. */
static int nzctl_key_write(const char *path, const char *hex)
{
	size_t len = strlen(hex);
	int fd, ret = 0;

	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		ret = -errno;
		fprintf(stderr, "nezhactl: key generate: %s: %s%s\n", path, strerror(errno),
			errno == EEXIST ? " (remove it first: a key file is never overwritten)" : "");
		return ret;
	}
	/* Whatever the umask did, the mode is 0600. */
	if (fchmod(fd, 0600) || write(fd, hex, len) != (ssize_t)len ||
	    write(fd, "\n", 1) != 1 || fsync(fd))
		ret = -errno;
	if (close(fd) && !ret)
		ret = -errno;
	if (ret) {
		fprintf(stderr, "nezhactl: key generate: %s: %s\n", path, strerror(-ret));
		unlink(path);
	}
	return ret;
}

int nzctl_key(int argc, char **argv)
{
	static const struct nzctl_kw subs[] = {
		{ "generate", 0 }, { "check", 1 }, { "help", 2 }, { NULL, 0 },
	};
	char hex[NZ_JOB_KEY_HEX_LEN + 1];
	uint8_t key[NZ_JOB_KEY_LEN];
	int sub, ret;

	if (argc < 2)
		return nzctl_usage_err(NZCTL_KEY_USAGE, "key: generate or check?");
	sub = nzctl_is_help(argv[1]) ? 2 :
	      nzctl_kw(argv[1], subs, "key", NZCTL_KEY_USAGE);
	if (sub < 0)
		return sub;
	if (sub == 2) {
		printf("usage: %s\n", NZCTL_KEY_USAGE);
		return 0;
	}
	if (sub == 0) {
		if (argc > 3)
			return nzctl_usage_err(NZCTL_KEY_USAGE, "key generate: too many arguments");
		ret = nz_job_key_generate(hex, sizeof(hex));
		if (ret) {
			fprintf(stderr, "nezhactl: key generate: %s\n", nz_last_error());
			return ret;
		}
		if (argc == 3)
			ret = nzctl_key_write(argv[2], hex);
		else
			printf("%s\n", hex);
		memset(hex, 0, sizeof(hex));
		return ret;
	}
	if (argc != 3)
		return nzctl_usage_err(NZCTL_KEY_USAGE, "key check: one FILE");
	ret = nz_job_key_read_file(argv[2], key);
	memset(key, 0, sizeof(key));
	if (ret) {
		fprintf(stderr, "nezhactl: key check: %s\n", nz_last_error());
		return ret;
	}
	printf("%s: a job key, readable by its owner only\n", argv[2]);
	return 0;
}
