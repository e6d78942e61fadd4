// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Job keys: where a job's key comes from, and making one.
 *
 * A job is joinable only by who holds its key, which the launcher hands
 * every rank out of band, as NCCL's unique id: in the options, in
 * $NEZHA_JOB_KEY (hex), or in a file named by $NEZHA_JOB_KEY_FILE that
 * nobody but its owner may read (checked as ssh checks a private key).
 * Through a framework's store, rank 0 may draw it and write it there
 * ($NEZHA_KEY_FROM_STORE=1: the store's readers can then join).  Without
 * any of these a job of several ranks is refused, unless $NEZHA_INSECURE=1
 * asks for the fixed public key of trusted test networks.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/random.h>
#include <sys/stat.h>
#include "internal.h"
#include "sha256.h"

/* Room for the hex digits, blanks and a newline; longer is not a key. */
#define NZI_KEY_FILE_MAX	256

int nzi_random(void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = getrandom(p, len, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return nzi_error(-errno, "getrandom: %s", strerror(errno));
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

bool nzi_env_flag(const char *name)
{
	const char *v = getenv(name);

	return v && *v && strcmp(v, "0");
}

static int nzi_hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static bool nzi_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

int nzi_key_parse(const char *s, size_t len, uint8_t key[NZ_JOB_KEY_LEN])
{
	while (len && nzi_blank(*s)) {
		s++;
		len--;
	}
	while (len && nzi_blank(s[len - 1]))
		len--;
	if (len != NZ_JOB_KEY_HEX_LEN)
		return -EINVAL;
	for (size_t i = 0; i < NZ_JOB_KEY_LEN; i++) {
		int hi = nzi_hexval(s[2 * i]), lo = nzi_hexval(s[2 * i + 1]);

		if (hi < 0 || lo < 0) {
			nzi_wipe(key, NZ_JOB_KEY_LEN);
			return -EINVAL;
		}
		key[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

int nz_job_key_generate(char *hex, size_t cap)
{
	static const char digits[] = "0123456789abcdef";
	uint8_t key[NZ_JOB_KEY_LEN];
	int ret;

	if (!hex || cap <= NZ_JOB_KEY_HEX_LEN)
		return nzi_error(-ENOSPC, "job key: %d hex digits and a NUL need %d bytes",
				 NZ_JOB_KEY_HEX_LEN, NZ_JOB_KEY_HEX_LEN + 1);
	ret = nzi_random(key, sizeof(key));
	if (ret)
		return ret;
	for (size_t i = 0; i < NZ_JOB_KEY_LEN; i++) {
		hex[2 * i] = digits[key[i] >> 4];
		hex[2 * i + 1] = digits[key[i] & 15];
	}
	hex[NZ_JOB_KEY_HEX_LEN] = 0;
	nzi_wipe(key, sizeof(key));
	return 0;
}

int nz_job_key_read_file(const char *path, uint8_t key[NZ_JOB_KEY_LEN])
{
	char buf[NZI_KEY_FILE_MAX + 1];
	struct stat st;
	ssize_t n;
	size_t got = 0;
	int fd, ret;

	if (!path || !*path || !key)
		return nzi_error(-EINVAL, "job key file: no path");
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return nzi_error(-errno, "job key file %s: %s", path, strerror(errno));
	/* The file that was opened is the one checked (no race with a rename). */
	if (fstat(fd, &st)) {
		ret = nzi_error(-errno, "job key file %s: %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		ret = nzi_error(-EINVAL, "job key file %s is not a regular file", path);
		goto out;
	}
	if (st.st_uid != geteuid() && st.st_uid != 0) {
		ret = nzi_error(-EPERM, "job key file %s belongs to uid %u, not to this user (uid %u): refused",
				path, (unsigned int)st.st_uid, (unsigned int)geteuid());
		goto out;
	}
	if (st.st_mode & (S_IRWXG | S_IRWXO)) {
		ret = nzi_error(-EPERM, "job key file %s has mode %04o: others may read or change it, so it is refused (chmod 600 %s)",
				path, (unsigned int)(st.st_mode & 07777), path);
		goto out;
	}
	while (got < sizeof(buf)) {
		n = read(fd, buf + got, sizeof(buf) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = nzi_error(-errno, "job key file %s: %s", path, strerror(errno));
			goto out;
		}
		if (!n)
			break;
		got += (size_t)n;
	}
	ret = got > NZI_KEY_FILE_MAX ? -EINVAL : nzi_key_parse(buf, got, key);
	if (ret)
		nzi_error(ret, "job key file %s does not hold a key of %d hex digits (nezhactl key generate makes one)",
			  path, NZ_JOB_KEY_HEX_LEN);
out:
	nzi_wipe(buf, sizeof(buf));
	close(fd);
	return ret;
}

/* Said once per process: a job without a key is open to its network. */
static void nzi_warn_insecure(void)
{
	static bool warned;

	if (warned)
		return;
	warned = true;
	fprintf(stderr, "libnezha: warning: NEZHA_INSECURE=1: this job has no key; any host that reaches rank 0 and the rails can join it (Documentation/security.rst)\n");
}

int nzi_key_resolve(const struct nz_comm_opts *o, bool kv, struct nzi_key *k)
{
	const char *hex = getenv("NEZHA_JOB_KEY"), *file = getenv("NEZHA_JOB_KEY_FILE");
	bool from_store = (o->flags & NZ_COMM_F_KEY_FROM_STORE) ||
			  nzi_env_flag("NEZHA_KEY_FROM_STORE");
	bool insecure = (o->flags & NZ_COMM_F_INSECURE) || nzi_env_flag("NEZHA_INSECURE");
	int ret;

	memset(k, 0, sizeof(*k));
	k->mode = NZI_KEY_GIVEN;
	if (hex && !*hex)
		hex = NULL;
	if (file && !*file)
		file = NULL;
	if (o->size == 1)	/* no peer to prove anything to */
		return nzi_random(k->key, sizeof(k->key));
	if (o->key) {
		memcpy(k->key, o->key, NZ_JOB_KEY_LEN);
		return 0;
	}
	if (hex && file)
		return nzi_error(-EINVAL, "job key: both NEZHA_JOB_KEY and NEZHA_JOB_KEY_FILE are set: set one");
	if ((hex || file) && from_store)
		return nzi_error(-EINVAL, "job key: NEZHA_KEY_FROM_STORE=1 and a key (NEZHA_JOB_KEY%s) are both set: set one",
				 file ? "_FILE" : "");
	if (hex) {
		ret = nzi_key_parse(hex, strlen(hex), k->key);
		if (ret)
			return nzi_error(ret, "job key: NEZHA_JOB_KEY is not %d hex digits (nezhactl key generate makes one)",
					 NZ_JOB_KEY_HEX_LEN);
		return 0;
	}
	if (file)
		return nz_job_key_read_file(file, k->key);
	if (from_store) {
		if (!kv)
			return nzi_error(-EINVAL, "job key: NEZHA_KEY_FROM_STORE=1 needs a rendezvous through a store (nz_comm_init_kv, the torch backend)");
		k->mode = NZI_KEY_FROM_STORE;
		return 0;
	}
	if (insecure) {
		nzi_warn_insecure();
		k->mode = NZI_KEY_INSECURE;	/* the all-zero key */
		return 0;
	}
	return nzi_error(-ENOKEY, "job key: none for this job of %d ranks: give every rank the same key in NEZHA_JOB_KEY (%d hex digits, from nezhactl key generate) or NEZHA_JOB_KEY_FILE (a file of mode 0600)%s, or set NEZHA_INSECURE=1 on a trusted network (Documentation/libnezha.rst, \"The job key\")",
			 o->size, NZ_JOB_KEY_HEX_LEN,
			 kv ? ", or NEZHA_KEY_FROM_STORE=1 to trust the framework's store with it" : "");
}
