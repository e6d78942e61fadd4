// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Bootstrap: the rendezvous of the ranks of a job, torchrun style.
 *
 * Rank 0 listens on MASTER_ADDR:MASTER_PORT; every other rank connects
 * (retrying until the timeout) and sends a HELLO with its rank, the job
 * size and its rails.  Rank 0 checks each HELLO, drops (and counts) what is
 * not a rank of this job, and once every rank is there draws a job id and
 * a secret, computes the rail slots (the names every rank has, in rank 0's
 * order) and the address table, and sends them in a WELCOME to every rank.
 * If a rank is still missing at the timeout, rank 0 sends an ABORT to those
 * that came, so that nobody waits longer than needed.
 *
 * Messages: a 12-byte header (magic "NZBS", version, type, payload length)
 * and a payload; every integer is big endian.
 *   HELLO    rank u32, size u32, nrails u32, rsvd u32,
 *            nrails x { name[16], addr be32, port be16, rsvd u16 }
 *   WELCOME  job_id u64, secret[32], size u32, nrails u32,
 *            names[nrails][16], addrs[size * nrails] { addr be32, port be16,
 *            rsvd u16 }
 *   ABORT    errno u32 (positive), reason (text, not NUL terminated)
 *
 * The network this runs on must be trusted: the secret travels in clear.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/random.h>
#include <sys/socket.h>
#include "internal.h"

/* How long a fresh connection may take to deliver its HELLO. */
#define NZI_HELLO_TIMEOUT_MS	5000
/* Unidentified connections rank 0 keeps at once; more are refused. */
#define NZI_MAX_PENDING		64
/*
 * A connected rank waits this long past its own deadline for rank 0's
 * verdict: rank 0 decides, so every rank reports the same outcome.
 */
#define NZI_VERDICT_GRACE_MS	500
#define NZI_REASON_MAX		240
#define NZI_WELCOME_FIXED	(8 + NZ_SECRET_LEN + 12)
#define NZI_ADDR_LEN		8

int64_t nzi_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int nzi_left(int64_t deadline)
{
	int64_t left = deadline - nzi_now_ms();

	return left < 0 ? 0 : (int)left;
}

/* ---- Byte order helpers ---- */

static void put_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put_be32(uint8_t *p, uint32_t v)
{
	put_be16(p, (uint16_t)(v >> 16));
	put_be16(p + 2, (uint16_t)v);
}

static void put_be64(uint8_t *p, uint64_t v)
{
	put_be32(p, (uint32_t)(v >> 32));
	put_be32(p + 4, (uint32_t)v);
}

static uint16_t get_be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)get_be16(p) << 16 | get_be16(p + 2);
}

static uint64_t get_be64(const uint8_t *p)
{
	return (uint64_t)get_be32(p) << 32 | get_be32(p + 4);
}

static void put_hdr(uint8_t *p, uint16_t type, uint32_t len)
{
	put_be32(p, NZI_BOOT_MAGIC);
	put_be16(p + 4, NZI_BOOT_VERSION);
	put_be16(p + 6, type);
	put_be32(p + 8, len);
}

/* Addresses and ports are already in network order: copied byte for byte. */
static void put_addr(uint8_t *p, uint32_t addr_be, uint16_t port_be)
{
	memcpy(p, &addr_be, 4);
	memcpy(p + 4, &port_be, 2);
	p[6] = p[7] = 0;
}

static void get_addr(const uint8_t *p, uint32_t *addr_be, uint16_t *port_be)
{
	memcpy(addr_be, p, 4);
	memcpy(port_be, p + 4, 2);
}

/* A rail name into a NUL-padded NZ_RAIL_NAME_LEN field. */
static void nzi_copy_name(char *dst, const char *src)
{
	size_t len = strnlen(src, NZ_RAIL_NAME_LEN - 1);

	memset(dst, 0, NZ_RAIL_NAME_LEN);
	memcpy(dst, src, len);
}

size_t nzi_boot_encode_hello(uint8_t *buf, int rank, int size,
			     const struct nzi_rail *rails, unsigned int nrails,
			     unsigned int unit)
{
	uint8_t *p = buf + NZI_BOOT_HDR_LEN;

	if (nrails > NZ_MAX_RAILS)
		nrails = NZ_MAX_RAILS;
	put_be32(p, (uint32_t)rank);
	put_be32(p + 4, (uint32_t)size);
	put_be32(p + 8, nrails);
	put_be32(p + 12, unit);
	p += 16;
	for (unsigned int i = 0; i < nrails; i++, p += NZI_BOOT_RAIL_LEN) {
		nzi_copy_name((char *)p, rails[i].name);
		put_addr(p + NZ_RAIL_NAME_LEN, rails[i].addr, rails[i].port);
		put_be32(p + NZ_RAIL_NAME_LEN + 8, rails[i].speed_mbps);
	}
	put_hdr(buf, NZI_BOOT_HELLO, (uint32_t)(p - buf - NZI_BOOT_HDR_LEN));
	return (size_t)(p - buf);
}

static int nzi_find_rail(const struct nzi_rail *rails, unsigned int n,
			 const char *name);
static int nzi_parse_welcome(const struct nzi_boot_cfg *cfg, const uint8_t *p,
			     size_t len, struct nzi_boot_job *job);

/* A rail name from the wire: NUL terminated within its field, non-empty. */
static bool nzi_name_ok(const uint8_t *p)
{
	return p[0] && memchr(p, 0, NZ_RAIL_NAME_LEN);
}

int nzi_boot_parse_hello(const uint8_t *buf, size_t len, int size,
			 struct nzi_boot_hello *h)
{
	const uint8_t *b = buf + NZI_BOOT_HDR_LEN;
	uint32_t nrails;

	if (len < NZI_BOOT_HDR_LEN + 16 || get_be32(buf) != NZI_BOOT_MAGIC ||
	    get_be16(buf + 4) != NZI_BOOT_VERSION ||
	    get_be16(buf + 6) != NZI_BOOT_HELLO ||
	    get_be32(buf + 8) != len - NZI_BOOT_HDR_LEN)
		return nzi_error(-EPROTO, "rendezvous: malformed HELLO");
	h->rank = (int)get_be32(b);
	nrails = get_be32(b + 8);
	h->unit = get_be32(b + 12);
	if (get_be32(b + 4) != (uint32_t)size)
		return nzi_error(-EINVAL, "rendezvous: job size mismatch: rank 0 has WORLD_SIZE=%d, rank %d has %u",
				 size, h->rank, get_be32(b + 4));
	if (nrails > NZ_MAX_RAILS || len != NZI_BOOT_HDR_LEN + 16 + nrails * NZI_BOOT_RAIL_LEN)
		return nzi_error(-EPROTO, "rendezvous: malformed rail list (%u rails)", nrails);
	if (h->unit && !nzi_unit_ok(h->unit))
		return nzi_error(-EINVAL, "rendezvous: chunk unit %u is not a power of two in %d..%d",
				 h->unit, NZ_MIN_UNIT, NZ_MAX_UNIT);
	b += 16;
	for (uint32_t k = 0; k < nrails; k++, b += NZI_BOOT_RAIL_LEN) {
		struct nzi_rail *r = &h->rails[k];

		if (!nzi_name_ok(b) || nzi_find_rail(h->rails, k, (const char *)b) >= 0)
			return nzi_error(-EPROTO, "rendezvous: malformed or duplicate rail name in rail list");
		memcpy(r->name, b, NZ_RAIL_NAME_LEN);
		get_addr(b + NZ_RAIL_NAME_LEN, &r->addr, &r->port);
		r->speed_mbps = get_be32(b + NZ_RAIL_NAME_LEN + 8);
	}
	h->nrails = nrails;
	return 0;
}

/* ---- Environment ---- */

int nzi_parse_int(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	/* Digits only (and a sign): no blanks, no "0x", no trailing junk. */
	if (!s || !(*s == '-' || (*s >= '0' && *s <= '9')))
		return -EINVAL;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

static int nzi_env_int(const char *name, long min, long max, long *out)
{
	const char *s = getenv(name);

	if (nzi_parse_int(s, min, max, out))
		return nzi_error(-EINVAL, "environment: %s=\"%s\" is not an integer in [%ld, %ld]",
				 name, s ? s : "", min, max);
	return 0;
}

int nzi_env_parse(struct nzi_env *env)
{
	const char *rank_var = "RANK", *size_var = "WORLD_SIZE";
	const char *addr;
	long v;
	int ret;

	memset(env, 0, sizeof(*env));
	if (!getenv(rank_var) && !getenv(size_var)) {
		rank_var = "OMPI_COMM_WORLD_RANK";
		size_var = "OMPI_COMM_WORLD_SIZE";
	}
	if (!getenv(rank_var) || !getenv(size_var))
		return nzi_error(-EINVAL, "environment: set RANK and WORLD_SIZE (torchrun) or OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE (mpirun); %s is missing",
				 getenv(rank_var) ? size_var : rank_var);
	ret = nzi_env_int(size_var, 1, NZ_MAX_RANKS, &v);
	if (ret)
		return ret;
	env->size = (int)v;
	ret = nzi_env_int(rank_var, 0, env->size - 1, &v);
	if (ret)
		return ret;
	env->rank = (int)v;

	addr = getenv("MASTER_ADDR");
	if (addr) {
		if (!*addr || strlen(addr) >= sizeof(env->master_addr))
			return nzi_error(-EINVAL, "environment: MASTER_ADDR=\"%s\" is empty or too long",
					 addr);
		strcpy(env->master_addr, addr);
	} else if (env->size > 1) {
		return nzi_error(-EINVAL, "environment: MASTER_ADDR (rank 0's address) is missing");
	}
	if (getenv("MASTER_PORT")) {
		ret = nzi_env_int("MASTER_PORT", 1, 65535, &v);
		if (ret)
			return ret;
		env->master_port = (int)v;
	} else if (env->size > 1) {
		return nzi_error(-EINVAL, "environment: MASTER_PORT (rank 0's port) is missing");
	}
	if (getenv("NEZHA_TIMEOUT_MS")) {
		ret = nzi_env_int("NEZHA_TIMEOUT_MS", 1, 86400000, &v);
		if (ret)
			return ret;
		env->timeout_ms = (int)v;
	}
	return 0;
}

/* ---- Slots and the address table ---- */

static int nzi_find_rail(const struct nzi_rail *rails, unsigned int n,
			 const char *name)
{
	for (unsigned int i = 0; i < n; i++)
		if (!strncmp(rails[i].name, name, NZ_RAIL_NAME_LEN))
			return (int)i;
	return -1;
}

int nzi_boot_slots(struct nzi_boot_job *job, unsigned int size,
		   const struct nzi_rail *const *rails,
		   const unsigned int *nrails)
{
	int idx[NZ_MAX_RAILS];	/* slot -> index in rank 0's list */
	unsigned int n = 0;

	for (unsigned int i = 0; i < nrails[0] && n < NZ_MAX_RAILS; i++) {
		unsigned int r;

		if (nzi_find_rail(rails[0], i, rails[0][i].name) >= 0)
			continue;	/* a name listed twice counts once */
		for (r = 1; r < size; r++)
			if (nzi_find_rail(rails[r], nrails[r], rails[0][i].name) < 0)
				break;
		if (r == size)
			idx[n++] = (int)i;
	}
	job->size = size;
	job->nrails = n;
	job->addrs = NULL;
	job->min_speed_mbps = 0;
	if (!n)
		return 0;
	job->addrs = calloc((size_t)size * n, sizeof(*job->addrs));
	if (!job->addrs)
		return -ENOMEM;
	for (unsigned int s = 0; s < n; s++) {
		const char *name = rails[0][idx[s]].name;

		nzi_copy_name(job->rails[s], name);
		for (unsigned int r = 0; r < size; r++) {
			int k = nzi_find_rail(rails[r], nrails[r], name);
			struct nz_comm_addr *a = &job->addrs[(size_t)r * n + s];

			a->addr = rails[r][k].addr;
			a->port = rails[r][k].port;
			if (rails[r][k].speed_mbps &&
			    (!job->min_speed_mbps ||
			     rails[r][k].speed_mbps < job->min_speed_mbps))
				job->min_speed_mbps = rails[r][k].speed_mbps;
		}
	}
	return 0;
}

unsigned int nzi_unit_for_speed(uint32_t mbps)
{
	/* Bytes the link carries in NZI_UNIT_CHUNK_US: mbps * us / 8. */
	uint64_t bytes = (uint64_t)mbps * NZI_UNIT_CHUNK_US / 8;
	unsigned int unit = NZI_UNIT_FLOOR;

	if (!mbps)
		return NZ_DEFAULT_UNIT;
	while (unit < NZ_DEFAULT_UNIT && 2ull * unit <= bytes)
		unit *= 2;
	return unit;
}

void nzi_boot_job_free(struct nzi_boot_job *job)
{
	if (!job)
		return;
	free(job->addrs);
	job->addrs = NULL;
}

static int nzi_random(void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = getrandom(p, len, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return nzi_error(-errno, "rendezvous: getrandom: %s", strerror(errno));
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int nzi_boot_identity(struct nzi_boot_job *job)
{
	int ret;

	do {
		ret = nzi_random(&job->job_id, sizeof(job->job_id));
	} while (!ret && !job->job_id);
	return ret ? ret : nzi_random(job->secret, sizeof(job->secret));
}

/* ---- Socket helpers ---- */

static int nzi_set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

static void nzi_sockname(const struct sockaddr *sa, char *out, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned int port = 0;

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;

		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		port = ntohs(in->sin_port);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;

		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		port = ntohs(in6->sin6_port);
	}
	snprintf(out, len, "%s:%u", host, port);
}

/*
 * Move exactly len bytes (wr: send, else receive) before deadline.
 * Returns 0, -ETIMEDOUT, -ECONNRESET (the peer closed) or -errno.
 */
static int nzi_xfer_all(int fd, void *buf, size_t len, int64_t deadline,
			bool wr)
{
	uint8_t *p = buf;

	while (len) {
		struct pollfd pfd = { .fd = fd, .events = wr ? POLLOUT : POLLIN };
		ssize_t n;
		int left = nzi_left(deadline);

		n = poll(&pfd, 1, left);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -ETIMEDOUT;
		n = wr ? send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT) :
			 recv(fd, p, len, MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return errno == EPIPE ? -ECONNRESET : -errno;
		}
		if (n == 0)
			return -ECONNRESET;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Best effort: tell a connection why it is being dropped. */
static void nzi_send_abort(int fd, int err, const char *reason)
{
	uint8_t msg[NZI_BOOT_HDR_LEN + 4 + NZI_REASON_MAX];
	size_t rlen = strnlen(reason, NZI_REASON_MAX);

	put_hdr(msg, NZI_BOOT_ABORT, (uint32_t)(4 + rlen));
	put_be32(msg + NZI_BOOT_HDR_LEN, (uint32_t)err);
	memcpy(msg + NZI_BOOT_HDR_LEN + 4, reason, rlen);
	nzi_xfer_all(fd, msg, NZI_BOOT_HDR_LEN + 4 + rlen,
		     nzi_now_ms() + 200, true);
}

/* ---- Rank 0 ---- */

struct nzi_pending {		/* a connection that has not said who it is */
	int fd;
	int64_t deadline;
	size_t got;
	uint8_t buf[NZI_BOOT_HELLO_MAX];
	char from[64];
};

struct nzi_member {		/* a rank that has joined */
	int fd;			/* -1: not (yet) there */
	unsigned int unit;	/* the chunk unit it asked for, 0 = any */
	unsigned int nrails;
	struct nzi_rail rails[NZ_MAX_RAILS];
	char from[64];
};

struct nzi_server {
	const struct nzi_boot_cfg *cfg;
	int lfd;
	char where[80];
	struct nzi_pending *pend[NZI_MAX_PENDING];
	unsigned int npend;
	struct nzi_member *mem;
	int joined;		/* members present, rank 0 included */
	unsigned int rejected;
};

static void nzi_drop_pending(struct nzi_server *s, unsigned int i)
{
	close(s->pend[i]->fd);
	free(s->pend[i]);
	s->pend[i] = s->pend[--s->npend];
}

/*
 * Reject connection i: log, count, tell it why when it speaks our protocol
 * (err != 0).  Returns -1, the "connection gone" result of its callers.
 */
__attribute__((format(printf, 4, 5)))	/* user space: no __printf() */
static int nzi_reject(struct nzi_server *s, unsigned int i, int err,
		       const char *fmt, ...)
{
	char reason[NZI_REASON_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	nzi_log(s->cfg->verbose, 0, "dropped connection from %s: %s",
		s->pend[i]->from, reason);
	if (err)
		nzi_send_abort(s->pend[i]->fd, err, reason);
	s->rejected++;
	nzi_drop_pending(s, i);
	return -1;
}

static int nzi_listen_on(const struct addrinfo *ai, int backlog)
{
	int fd, one = 1, zero = 0;

	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ai->ai_family == AF_INET6)	/* a wildcard v6 socket takes v4 too */
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, backlog) < 0 ||
	    nzi_set_nonblock(fd) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

/*
 * Listen on master_addr when it is one of ours, else on every address (it
 * may be a name that others reach through NAT or a service address).
 */
static int nzi_server_listen(struct nzi_server *s)
{
	const struct nzi_boot_cfg *cfg = s->cfg;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *res, *ai;
	char port[8];
	int backlog = cfg->size + NZI_MAX_PENDING, fd = -EADDRNOTAVAIL, ret;

	snprintf(port, sizeof(port), "%d", cfg->master_port);
	ret = getaddrinfo(cfg->master_addr, port, &hints, &res);
	if (!ret) {
		for (ai = res; ai; ai = ai->ai_next) {
			fd = nzi_listen_on(ai, backlog);
			if (fd >= 0 || fd == -EADDRINUSE)
				break;
		}
		freeaddrinfo(res);
	}
	if (fd < 0 && fd != -EADDRINUSE) {
		/* Not a local address (or unresolvable here): the wildcard. */
		if (!getaddrinfo(NULL, port, &hints, &res)) {
			for (ai = res; ai; ai = ai->ai_next) {
				fd = nzi_listen_on(ai, backlog);
				if (fd >= 0 || fd == -EADDRINUSE)
					break;
			}
			freeaddrinfo(res);
		}
		snprintf(s->where, sizeof(s->where), "*:%d (for %s)",
			 cfg->master_port, cfg->master_addr);
	} else {
		snprintf(s->where, sizeof(s->where), "%s:%d", cfg->master_addr,
			 cfg->master_port);
	}
	if (fd < 0)
		return nzi_error(fd, "rendezvous: rank 0 cannot listen on %s: %s%s",
				 s->where, strerror(-fd),
				 fd == -EADDRINUSE ? " (another job's rank 0, or a leftover process, holds MASTER_PORT)" : "");
	s->lfd = fd;
	nzi_log(cfg->verbose, 0, "listening on %s for %d ranks", s->where,
		cfg->size);
	return 0;
}

static void nzi_server_accept(struct nzi_server *s)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int fd;

	while ((fd = accept4(s->lfd, (struct sockaddr *)&ss, &sl,
			     SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		struct nzi_pending *p = NULL;

		if (s->npend < NZI_MAX_PENDING)
			p = calloc(1, sizeof(*p));
		if (!p) {
			nzi_log(s->cfg->verbose, 0, "too many unidentified connections: refusing one");
			s->rejected++;
			close(fd);
			continue;
		}
		p->fd = fd;
		p->deadline = nzi_now_ms() + NZI_HELLO_TIMEOUT_MS;
		nzi_sockname((struct sockaddr *)&ss, p->from, sizeof(p->from));
		s->pend[s->npend++] = p;
		sl = sizeof(ss);
	}
}

/* A complete HELLO from pending connection i: admit (0) or reject (-1). */
static int nzi_server_hello(struct nzi_server *s, unsigned int i)
{
	struct nzi_pending *p = s->pend[i];
	const uint8_t *b = p->buf + NZI_BOOT_HDR_LEN;
	uint32_t rank = get_be32(b), size = get_be32(b + 4);
	uint32_t nrails = get_be32(b + 8), unit = get_be32(b + 12);
	struct nzi_member *m;
	size_t len = get_be32(p->buf + 8);

	if (size != (uint32_t)s->cfg->size)
		return nzi_reject(s, i, EINVAL, "job size mismatch: rank 0 has WORLD_SIZE=%d, this rank %u",
				  s->cfg->size, size);
	if (rank == 0 || rank >= size)
		return nzi_reject(s, i, EINVAL, "rank %u is not a valid non-zero rank of a job of %u",
				  rank, size);
	if (nrails > NZ_MAX_RAILS || len != 16 + nrails * NZI_BOOT_RAIL_LEN)
		return nzi_reject(s, i, EINVAL, "malformed rail list (%u rails)", nrails);
	if (unit && !nzi_unit_ok(unit))
		return nzi_reject(s, i, EINVAL, "chunk unit %u is not a power of two in %d..%d",
				  unit, NZ_MIN_UNIT, NZ_MAX_UNIT);
	m = &s->mem[rank];
	if (m->fd >= 0)
		return nzi_reject(s, i, EEXIST, "rank %u already joined from %s",
				  rank, m->from);
	b += 16;
	for (uint32_t k = 0; k < nrails; k++, b += NZI_BOOT_RAIL_LEN) {
		struct nzi_rail *r = &m->rails[k];

		if (!nzi_name_ok(b) || nzi_find_rail(m->rails, k, (const char *)b) >= 0)
			return nzi_reject(s, i, EINVAL, "malformed or duplicate rail name in rail list");
		memcpy(r->name, b, NZ_RAIL_NAME_LEN);
		get_addr(b + NZ_RAIL_NAME_LEN, &r->addr, &r->port);
		r->speed_mbps = get_be32(b + NZ_RAIL_NAME_LEN + 8);
	}
	m->nrails = nrails;
	m->unit = unit;
	m->fd = p->fd;
	memcpy(m->from, p->from, sizeof(m->from));
	s->joined++;
	nzi_log(s->cfg->verbose, 0, "rank %u joined from %s with %u rails (%d of %d)",
		rank, m->from, nrails, s->joined, s->cfg->size);
	free(p);
	s->pend[i] = s->pend[--s->npend];
	return 0;
}

/* Read what pending connection i has sent; admit or reject when complete. */
static int nzi_server_read(struct nzi_server *s, unsigned int i)
{
	struct nzi_pending *p = s->pend[i];
	size_t want = NZI_BOOT_HDR_LEN;
	ssize_t n;

	if (p->got >= NZI_BOOT_HDR_LEN)
		want += get_be32(p->buf + 8);
	n = recv(p->fd, p->buf + p->got, want - p->got, MSG_DONTWAIT);
	if (n == 0)
		return nzi_reject(s, i, 0, "closed before its hello");
	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return 0;
		return nzi_reject(s, i, 0, "%s", strerror(errno));
	}
	p->got += (size_t)n;
	if (p->got == NZI_BOOT_HDR_LEN) {
		uint32_t len = get_be32(p->buf + 8);

		if (get_be32(p->buf) != NZI_BOOT_MAGIC)
			return nzi_reject(s, i, 0, "bad magic 0x%08x", get_be32(p->buf));
		if (get_be16(p->buf + 4) != NZI_BOOT_VERSION)
			return nzi_reject(s, i, EPROTO, "rendezvous protocol version %u, rank 0 speaks %u (mixed libnezha versions)",
					  get_be16(p->buf + 4), NZI_BOOT_VERSION);
		if (get_be16(p->buf + 6) != NZI_BOOT_HELLO ||
		    len < 16 || len > NZI_BOOT_HELLO_MAX - NZI_BOOT_HDR_LEN)
			return nzi_reject(s, i, EPROTO, "not a hello (type %u, %u bytes)",
					  get_be16(p->buf + 6), len);
	}
	if (p->got > NZI_BOOT_HDR_LEN && p->got == NZI_BOOT_HDR_LEN + get_be32(p->buf + 8))
		return nzi_server_hello(s, i);
	return 0;
}

/* A member's connection is readable: it left (or broke the protocol). */
static void nzi_server_member_event(struct nzi_server *s, int rank)
{
	struct nzi_member *m = &s->mem[rank];
	uint8_t b;
	ssize_t n = recv(m->fd, &b, 1, MSG_DONTWAIT);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	nzi_log(s->cfg->verbose, 0, "rank %d (%s) %s before the job formed: it may join again",
		rank, m->from, n == 0 ? "left" : "broke the protocol");
	close(m->fd);
	m->fd = -1;
	s->joined--;
}

static void nzi_missing_list(const struct nzi_server *s, char *out, size_t len)
{
	size_t used = 0;
	int shown = 0, missing = 0;

	out[0] = 0;
	for (int r = 1; r < s->cfg->size; r++) {
		if (s->mem[r].fd >= 0)
			continue;
		missing++;
		if (shown < 8 && used < len) {
			used += (size_t)snprintf(out + used, len - used, "%s%d",
						 shown ? ", " : "", r);
			shown++;
		}
	}
	if (missing > shown && used < len)
		snprintf(out + used, len - used, " and %d more", missing - shown);
}

/* Tell every rank that joined that the job will not form, and why. */
static void nzi_server_abort_all(struct nzi_server *s, int err,
				 const char *reason)
{
	for (int r = 1; r < s->cfg->size; r++)
		if (s->mem[r].fd >= 0)
			nzi_send_abort(s->mem[r].fd, err, reason);
}

static int nzi_server_timeout(struct nzi_server *s)
{
	char missing[96], reason[NZI_REASON_MAX];

	nzi_missing_list(s, missing, sizeof(missing));
	snprintf(reason, sizeof(reason), "rank(s) %s of %d did not join at %s within %d ms",
		 missing, s->cfg->size, s->where, s->cfg->timeout_ms);
	nzi_server_abort_all(s, ETIMEDOUT, reason);
	return nzi_error(-ETIMEDOUT, "rendezvous: %s", reason);
}

/*
 * The job's chunk unit: the one its ranks asked for, which must then be the
 * same on every rank that asked, or one chosen from the slowest link.
 */
static int nzi_server_unit(struct nzi_server *s, struct nzi_boot_job *job)
{
	unsigned int size = (unsigned int)s->cfg->size, asked = 0, by = 0;
	char reason[NZI_REASON_MAX];

	s->mem[0].unit = s->cfg->unit;
	for (unsigned int r = 0; r < size; r++) {
		unsigned int u = s->mem[r].unit;

		if (!u || u == asked)
			continue;
		if (!asked) {
			asked = u;
			by = r;
			continue;
		}
		snprintf(reason, sizeof(reason), "ranks %u and %u ask for different chunk units (%u and %u bytes): pass the same nz_comm_opts.unit, or 0, on every rank",
			 by, r, asked, u);
		nzi_server_abort_all(s, EINVAL, reason);
		return nzi_error(-EINVAL, "rendezvous: %s", reason);
	}
	job->unit = asked ? asked : nzi_unit_for_speed(job->min_speed_mbps);
	return 0;
}

uint8_t *nzi_boot_encode_welcome(const struct nzi_boot_job *job, size_t *lenp)
{
	size_t len = NZI_BOOT_HDR_LEN + NZI_WELCOME_FIXED + job->nrails * NZ_RAIL_NAME_LEN +
		     (size_t)job->size * job->nrails * NZI_ADDR_LEN;
	uint8_t *msg = malloc(len), *p;

	if (!msg)
		return NULL;
	put_hdr(msg, NZI_BOOT_WELCOME, (uint32_t)(len - NZI_BOOT_HDR_LEN));
	p = msg + NZI_BOOT_HDR_LEN;
	put_be64(p, job->job_id);
	memcpy(p + 8, job->secret, NZ_SECRET_LEN);
	put_be32(p + 8 + NZ_SECRET_LEN, job->size);
	put_be32(p + 12 + NZ_SECRET_LEN, job->nrails);
	put_be32(p + 16 + NZ_SECRET_LEN, job->unit);
	p += NZI_WELCOME_FIXED;
	for (unsigned int k = 0; k < job->nrails; k++, p += NZ_RAIL_NAME_LEN)
		memcpy(p, job->rails[k], NZ_RAIL_NAME_LEN);
	for (size_t k = 0; k < (size_t)job->size * job->nrails; k++, p += NZI_ADDR_LEN)
		put_addr(p, job->addrs[k].addr, job->addrs[k].port);
	*lenp = len;
	return msg;
}

size_t nzi_boot_encode_abort(uint8_t *buf, size_t cap, int err, const char *reason)
{
	size_t rlen = strlen(reason);

	if (rlen > cap - NZI_BOOT_HDR_LEN - 4)
		rlen = cap - NZI_BOOT_HDR_LEN - 4;
	put_hdr(buf, NZI_BOOT_ABORT, (uint32_t)(4 + rlen));
	put_be32(buf + NZI_BOOT_HDR_LEN, (uint32_t)err);
	memcpy(buf + NZI_BOOT_HDR_LEN + 4, reason, rlen);
	return NZI_BOOT_HDR_LEN + 4 + rlen;
}

int nzi_boot_parse_answer(const struct nzi_boot_cfg *cfg, const uint8_t *buf,
			  size_t len, struct nzi_boot_job *job)
{
	int ret;

	if (len < NZI_BOOT_HDR_LEN || get_be32(buf) != NZI_BOOT_MAGIC ||
	    get_be16(buf + 4) != NZI_BOOT_VERSION ||
	    get_be32(buf + 8) != len - NZI_BOOT_HDR_LEN)
		return nzi_error(-EPROTO, "rendezvous: malformed answer of rank 0");
	if (get_be16(buf + 6) == NZI_BOOT_WELCOME)
		return nzi_parse_welcome(cfg, buf + NZI_BOOT_HDR_LEN,
					 len - NZI_BOOT_HDR_LEN, job);
	if (get_be16(buf + 6) != NZI_BOOT_ABORT || len < NZI_BOOT_HDR_LEN + 4)
		return nzi_error(-EPROTO, "rendezvous: unexpected message type %u from rank 0",
				 get_be16(buf + 6));
	ret = -(int)get_be32(buf + NZI_BOOT_HDR_LEN);
	if (ret >= 0 || ret < -4095)
		ret = -EPROTO;
	return nzi_error(ret, "rendezvous: rank 0 stopped rank %d: %.*s", cfg->rank,
			 (int)(len - NZI_BOOT_HDR_LEN - 4),
			 (const char *)buf + NZI_BOOT_HDR_LEN + 4);
}

/* Every rank is here: compute the job and send it to everyone. */
static int nzi_server_welcome(struct nzi_server *s, struct nzi_boot_job *job,
			      int64_t deadline)
{
	unsigned int size = (unsigned int)s->cfg->size;
	const struct nzi_rail *rails[NZ_MAX_RANKS];
	unsigned int nrails[NZ_MAX_RANKS];
	uint8_t *msg;
	size_t len;
	int ret;

	for (unsigned int r = 0; r < size; r++) {
		rails[r] = s->mem[r].rails;
		nrails[r] = s->mem[r].nrails;
	}
	ret = nzi_boot_slots(job, size, rails, nrails);
	if (ret)
		return nzi_error(ret, "rendezvous: out of memory");
	if (!job->nrails) {
		char reason[NZI_REASON_MAX];

		snprintf(reason, sizeof(reason), "no rail name is configured (up, weight > 0) on every rank; rank 0 has %u such rails: compare nezhactl rail show on the nodes",
			 nrails[0]);
		nzi_server_abort_all(s, ENODEV, reason);
		return nzi_error(-ENODEV, "rendezvous: %s", reason);
	}
	ret = nzi_server_unit(s, job);
	if (!ret)
		ret = nzi_boot_identity(job);
	if (ret)
		return ret;

	msg = nzi_boot_encode_welcome(job, &len);
	if (!msg)
		return nzi_error(-ENOMEM, "rendezvous: out of memory");

	for (unsigned int r = 1; r < size && !ret; r++) {
		ret = nzi_xfer_all(s->mem[r].fd, msg, len,
				   deadline + NZI_VERDICT_GRACE_MS, true);
		if (ret)
			nzi_error(ret == -ETIMEDOUT ? -ETIMEDOUT : -ECONNRESET,
				  "rendezvous: rank %u (%s) went away before it got the job: %s",
				  r, s->mem[r].from, strerror(-ret));
	}
	free(msg);
	if (ret)
		return ret == -ETIMEDOUT ? -ETIMEDOUT : -ECONNRESET;
	nzi_log(s->cfg->verbose, 0, "job %016llx formed: %d ranks, %u rail slots, %u connections dropped",
		(unsigned long long)job->job_id, s->cfg->size, job->nrails,
		s->rejected);
	return 0;
}

static int nzi_server_poll(struct nzi_server *s, int64_t deadline)
{
	struct pollfd *pfd;
	int *who;		/* >= 0: member rank; < 0: -1 - pending index */
	unsigned int n = 0, max = 1 + NZI_MAX_PENDING + (unsigned int)s->cfg->size;
	int64_t now = nzi_now_ms(), wake = deadline;
	int ret;

	pfd = calloc(max, sizeof(*pfd));
	who = calloc(max, sizeof(*who));
	if (!pfd || !who) {
		free(pfd);
		free(who);
		return nzi_error(-ENOMEM, "rendezvous: out of memory");
	}
	pfd[n].fd = s->lfd;
	pfd[n++].events = POLLIN;
	for (unsigned int i = 0; i < s->npend; i++) {
		pfd[n].fd = s->pend[i]->fd;
		pfd[n].events = POLLIN;
		who[n++] = -1 - (int)i;
		if (s->pend[i]->deadline < wake)
			wake = s->pend[i]->deadline;
	}
	for (int r = 1; r < s->cfg->size; r++) {
		if (s->mem[r].fd < 0)
			continue;
		pfd[n].fd = s->mem[r].fd;
		pfd[n].events = POLLIN;
		who[n++] = r;
	}
	ret = poll(pfd, n, wake > now ? (int)(wake - now) : 0);
	if (ret < 0 && errno != EINTR) {
		ret = nzi_error(-errno, "rendezvous: poll: %s", strerror(errno));
		goto out;
	}
	/* Pending entries move when one is dropped: walk them backwards. */
	for (unsigned int k = n; ret > 0 && k-- > 1;) {
		if (!pfd[k].revents)
			continue;
		if (who[k] >= 0)
			nzi_server_member_event(s, who[k]);
		else
			nzi_server_read(s, (unsigned int)(-1 - who[k]));
	}
	now = nzi_now_ms();
	for (unsigned int i = s->npend; i-- > 0;)
		if (s->pend[i]->deadline <= now)
			nzi_reject(s, i, 0, "no hello within %d ms", NZI_HELLO_TIMEOUT_MS);
	if (ret > 0 && pfd[0].revents)
		nzi_server_accept(s);
	ret = 0;
out:
	free(pfd);
	free(who);
	return ret;
}

static int nzi_serve(const struct nzi_boot_cfg *cfg, struct nzi_boot_job *job,
		     int64_t deadline)
{
	struct nzi_server s = { .cfg = cfg, .lfd = -1, .joined = 1 };
	int ret;

	s.mem = calloc((size_t)cfg->size, sizeof(*s.mem));
	if (!s.mem)
		return nzi_error(-ENOMEM, "rendezvous: out of memory");
	for (int r = 0; r < cfg->size; r++)
		s.mem[r].fd = -1;
	s.mem[0].nrails = cfg->nrails;
	memcpy(s.mem[0].rails, cfg->rails, cfg->nrails * sizeof(*cfg->rails));
	ret = nzi_server_listen(&s);
	while (!ret && s.joined < cfg->size) {
		if (nzi_now_ms() >= deadline) {
			ret = nzi_server_timeout(&s);
			break;
		}
		ret = nzi_server_poll(&s, deadline);
	}
	/* Nobody else may join from now on. */
	if (s.lfd >= 0)
		close(s.lfd);
	if (!ret)
		ret = nzi_server_welcome(&s, job, deadline);
	job->rejected = s.rejected;
	while (s.npend)
		nzi_drop_pending(&s, s.npend - 1);
	for (int r = 1; r < cfg->size; r++)
		if (s.mem[r].fd >= 0)
			close(s.mem[r].fd);
	free(s.mem);
	if (ret)
		nzi_boot_job_free(job);
	return ret;
}

/* ---- Other ranks ---- */

/* One connection attempt to any address of rank 0; fd or -errno. */
static int nzi_try_connect(const struct nzi_boot_cfg *cfg, int64_t deadline)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res, *ai;
	char port[8];
	int ret, fd = -EHOSTUNREACH;

	snprintf(port, sizeof(port), "%d", cfg->master_port);
	ret = getaddrinfo(cfg->master_addr, port, &hints, &res);
	if (ret)
		return ret == EAI_SYSTEM ? -errno : -EHOSTUNREACH;
	for (ai = res; ai; ai = ai->ai_next) {
		struct pollfd pfd;
		int err = 0, one = 1;
		socklen_t el = sizeof(err);

		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			    ai->ai_protocol);
		if (fd < 0) {
			fd = -errno;
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
			err = errno;
			if (err == EINPROGRESS) {
				int left = nzi_left(deadline);

				pfd.fd = fd;
				pfd.events = POLLOUT;
				if (poll(&pfd, 1, left < 2000 ? left : 2000) <= 0)
					err = ETIMEDOUT;
				else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el))
					err = errno;
			}
		}
		if (!err)
			break;
		close(fd);
		fd = -err;
	}
	freeaddrinfo(res);
	return fd;
}

static int nzi_connect(const struct nzi_boot_cfg *cfg, int64_t deadline)
{
	int backoff = 10, fd;

	for (;;) {
		int left;

		fd = nzi_try_connect(cfg, deadline);
		if (fd >= 0)
			return fd;
		left = nzi_left(deadline);
		if (!left)
			break;
		usleep((useconds_t)(backoff < left ? backoff : left) * 1000);
		backoff = backoff * 2 > 250 ? 250 : backoff * 2;
	}
	return nzi_error(-ETIMEDOUT, "rendezvous: rank %d could not reach rank 0 at %s:%d within %d ms (last error: %s)",
			 cfg->rank, cfg->master_addr, cfg->master_port,
			 cfg->timeout_ms,
			 fd == -EHOSTUNREACH ? "cannot resolve or reach the host" : strerror(-fd));
}

static int nzi_parse_welcome(const struct nzi_boot_cfg *cfg, const uint8_t *p,
			     size_t len, struct nzi_boot_job *job)
{
	uint32_t size, nrails;

	if (len < NZI_WELCOME_FIXED)
		goto bad;
	size = get_be32(p + 8 + NZ_SECRET_LEN);
	nrails = get_be32(p + 12 + NZ_SECRET_LEN);
	if (size != (uint32_t)cfg->size || !nrails || nrails > NZ_MAX_RAILS ||
	    len != NZI_WELCOME_FIXED + nrails * NZ_RAIL_NAME_LEN +
		   (size_t)size * nrails * NZI_ADDR_LEN)
		goto bad;
	job->unit = get_be32(p + 16 + NZ_SECRET_LEN);
	if (!nzi_unit_ok(job->unit) || (cfg->unit && job->unit != cfg->unit))
		goto bad;
	job->job_id = get_be64(p);
	memcpy(job->secret, p + 8, NZ_SECRET_LEN);
	job->size = size;
	job->nrails = nrails;
	p += NZI_WELCOME_FIXED;
	for (uint32_t k = 0; k < nrails; k++, p += NZ_RAIL_NAME_LEN) {
		if (!nzi_name_ok(p))
			goto bad;
		memcpy(job->rails[k], p, NZ_RAIL_NAME_LEN);
	}
	job->addrs = calloc((size_t)size * nrails, sizeof(*job->addrs));
	if (!job->addrs)
		return nzi_error(-ENOMEM, "rendezvous: out of memory");
	for (size_t k = 0; k < (size_t)size * nrails; k++, p += NZI_ADDR_LEN)
		get_addr(p, &job->addrs[k].addr, &job->addrs[k].port);
	return 0;
bad:
	return nzi_error(-EPROTO, "rendezvous: malformed job description from rank 0");
}

static int nzi_join(const struct nzi_boot_cfg *cfg, struct nzi_boot_job *job,
		    int64_t deadline)
{
	uint8_t hello[NZI_BOOT_HELLO_MAX], hdr[NZI_BOOT_HDR_LEN], *body = NULL;
	int64_t verdict = deadline + NZI_VERDICT_GRACE_MS;
	uint32_t len;
	size_t hlen;
	int fd, ret;

	fd = nzi_connect(cfg, deadline);
	if (fd < 0)
		return fd;
	nzi_log(cfg->verbose, cfg->rank, "connected to rank 0 at %s:%d",
		cfg->master_addr, cfg->master_port);
	hlen = nzi_boot_encode_hello(hello, cfg->rank, cfg->size, cfg->rails,
				     cfg->nrails, cfg->unit);
	ret = nzi_xfer_all(fd, hello, hlen, verdict, true);
	if (!ret)
		ret = nzi_xfer_all(fd, hdr, sizeof(hdr), verdict, false);
	if (ret) {
		if (ret == -ETIMEDOUT)
			nzi_error(ret, "rendezvous: rank %d reached rank 0 at %s:%d, but the job did not form within %d ms",
				  cfg->rank, cfg->master_addr, cfg->master_port,
				  cfg->timeout_ms);
		else
			nzi_error(-ECONNRESET, "rendezvous: rank 0 at %s:%d closed the connection (%s): is it another service, or did it fail?",
				  cfg->master_addr, cfg->master_port, strerror(-ret));
		ret = ret == -ETIMEDOUT ? -ETIMEDOUT : -ECONNRESET;
		goto out;
	}
	len = get_be32(hdr + 8);
	if (get_be32(hdr) != NZI_BOOT_MAGIC || get_be16(hdr + 4) != NZI_BOOT_VERSION ||
	    len > NZI_WELCOME_FIXED + NZ_MAX_RAILS * NZ_RAIL_NAME_LEN +
		  (size_t)NZ_MAX_RANKS * NZ_MAX_RAILS * NZI_ADDR_LEN) {
		ret = nzi_error(-EPROTO, "rendezvous: %s:%d does not speak the libnezha rendezvous protocol (version %u)",
				cfg->master_addr, cfg->master_port, NZI_BOOT_VERSION);
		goto out;
	}
	body = malloc(len + 1);
	if (!body) {
		ret = nzi_error(-ENOMEM, "rendezvous: out of memory");
		goto out;
	}
	ret = nzi_xfer_all(fd, body, len, verdict, false);
	if (ret) {
		ret = nzi_error(ret == -ETIMEDOUT ? -ETIMEDOUT : -ECONNRESET,
				"rendezvous: truncated answer from rank 0: %s",
				strerror(-ret));
		goto out;
	}
	switch (get_be16(hdr + 6)) {
	case NZI_BOOT_WELCOME:
		ret = nzi_parse_welcome(cfg, body, len, job);
		break;
	case NZI_BOOT_ABORT:
		if (len < 4) {
			ret = nzi_error(-EPROTO, "rendezvous: malformed abort from rank 0");
			break;
		}
		body[len] = 0;
		ret = -(int)get_be32(body);
		if (ret >= 0 || ret < -4095)
			ret = -EPROTO;
		nzi_error(ret, "rendezvous: rank 0 stopped rank %d: %.*s", cfg->rank,
			  (int)(len - 4), (const char *)body + 4);
		break;
	default:
		ret = nzi_error(-EPROTO, "rendezvous: unexpected message type %u from rank 0",
				get_be16(hdr + 6));
	}
out:
	free(body);
	close(fd);
	return ret;
}

/* ---- Entry point ---- */

static int nzi_boot_check(const struct nzi_boot_cfg *cfg)
{
	if (cfg->size < 1 || cfg->size > NZ_MAX_RANKS || cfg->rank < 0 ||
	    cfg->rank >= cfg->size)
		return nzi_error(-EINVAL, "rendezvous: rank %d of %d is out of range (size 1..%d)",
				 cfg->rank, cfg->size, NZ_MAX_RANKS);
	if (cfg->nrails > NZ_MAX_RAILS || (cfg->nrails && !cfg->rails))
		return nzi_error(-EINVAL, "rendezvous: %u rails (at most %d)",
				 cfg->nrails, NZ_MAX_RAILS);
	if (cfg->unit && !nzi_unit_ok(cfg->unit))
		return nzi_error(-EINVAL, "rendezvous: chunk unit %u is not a power of two in %d..%d",
				 cfg->unit, NZ_MIN_UNIT, NZ_MAX_UNIT);
	for (unsigned int i = 0; i < cfg->nrails; i++)
		if (!cfg->rails[i].name[0] ||
		    !memchr(cfg->rails[i].name, 0, NZ_RAIL_NAME_LEN) ||
		    nzi_find_rail(cfg->rails, i, cfg->rails[i].name) >= 0)
			return nzi_error(-EINVAL, "rendezvous: rail %u has no valid, unique name", i);
	if (cfg->size == 1)
		return 0;
	if (!cfg->master_addr || !*cfg->master_addr)
		return nzi_error(-EINVAL, "rendezvous: no master address (MASTER_ADDR)");
	if (cfg->master_port < 1 || cfg->master_port > 65535)
		return nzi_error(-EINVAL, "rendezvous: master port %d is out of range",
				 cfg->master_port);
	if (cfg->timeout_ms <= 0)
		return nzi_error(-EINVAL, "rendezvous: timeout %d ms", cfg->timeout_ms);
	return 0;
}

int nzi_bootstrap(const struct nzi_boot_cfg *cfg, struct nzi_boot_job *job)
{
	int64_t deadline;
	int ret;

	if (!cfg || !job)
		return nzi_error(-EINVAL, "rendezvous: NULL argument");
	memset(job, 0, sizeof(*job));
	ret = nzi_boot_check(cfg);
	if (ret)
		return ret;
	if (cfg->size == 1) {
		const struct nzi_rail *rails[1] = { cfg->rails };
		unsigned int nrails[1] = { cfg->nrails };

		ret = nzi_boot_slots(job, 1, rails, nrails);
		job->unit = cfg->unit ? cfg->unit :
			    nzi_unit_for_speed(job->min_speed_mbps);
		if (!ret)
			ret = nzi_boot_identity(job);
		if (ret)
			nzi_boot_job_free(job);
		return ret;
	}
	deadline = nzi_now_ms() + cfg->timeout_ms;
	if (cfg->rank == 0)
		return nzi_serve(cfg, job, deadline);
	return nzi_join(cfg, job, deadline);
}
