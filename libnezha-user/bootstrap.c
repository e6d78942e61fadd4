// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Bootstrap: the rendezvous of the ranks of a job, torchrun style, over
 * TCP.  The messages and their MACs are in boot_msg.c (layout in
 * internal.h); this file owns the sockets.
 *
 * Rank 0 listens on MASTER_ADDR:MASTER_PORT, and there only: when that is
 * not one of its addresses it fails (-EADDRNOTAVAIL) rather than listen on
 * every address.  It sends each connection a CHALLENGE (a fresh nonce);
 * every other rank connects (retrying until the timeout) and answers with a
 * HELLO: its rank, the job size, its rails and its own nonce, under a MAC
 * of the job key over rank 0's nonce.  Rank 0 binds a rank to a
 * connection only once that MAC checks: a HELLO without the key, with
 * another key, or recorded from another rendezvous is dropped and
 * counted, and the rank it named stays free for the real one.  Once every
 * rank is there, rank 0 draws a job id and a job nonce, computes the rail
 * slots (the names every rank has, in rank 0's order) and the address
 * table, and sends them in a WELCOME with a MAC for that rank's nonce.
 * Every rank derives the job's secret from the key and the job nonce: the
 * secret never crosses the network.  If a rank is still missing at the
 * timeout, rank 0 sends an ABORT to those that came, so that nobody waits
 * longer than needed.
 *
 * Connections that have not authenticated cost rank 0 a slot among
 * NZI_MAX_PENDING (at most NZI_MAX_PENDING_PER_SOURCE from one host) for at
 * most NZI_HELLO_TIMEOUT_MS: a full table drops its oldest entry, never
 * the newcomer, and a rank whose connection was dropped before it was
 * answered connects again.  So a flood of strangers delays a rank, it does
 * not lock it out.
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
#include <sys/socket.h>
#include "internal.h"
#include "sha256.h"

/* How long a fresh connection may take to deliver its HELLO. */
#define NZI_HELLO_TIMEOUT_MS	5000
/* Unauthenticated connections rank 0 keeps at once (the oldest goes). */
#define NZI_MAX_PENDING		64
/* ... of which from one host. */
#define NZI_MAX_PENDING_PER_SOURCE 16
/*
 * A connected rank waits this long past its own deadline for rank 0's
 * verdict: rank 0 decides, so every rank reports the same outcome.
 */
#define NZI_VERDICT_GRACE_MS	500
#define NZI_REASON_MAX		240

int64_t nzi_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t nzi_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int nzi_left(int64_t deadline)
{
	int64_t left = deadline - nzi_now_ms();

	return left < 0 ? 0 : (int)left;
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

/* Two peers on the same host (address, port aside). */
static bool nzi_same_host(const struct sockaddr_storage *a,
			  const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (a->ss_family == AF_INET6)
		return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
			       &((const struct sockaddr_in6 *)b)->sin6_addr,
			       sizeof(struct in6_addr));
	return false;
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
	size_t len = nzi_boot_encode_abort(msg, sizeof(msg), err, reason);

	nzi_xfer_all(fd, msg, len, nzi_now_ms() + 200, true);
}

/* nz_last_error() without its "rendezvous: " prefix, for a peer. */
static const char *nzi_reason(void)
{
	const char *e = nz_last_error();

	return strncmp(e, "rendezvous: ", 12) ? e : e + 12;
}

/* ---- Rank 0 ---- */

struct nzi_pending {		/* a connection that has not authenticated */
	int fd;
	int64_t deadline;
	size_t got;
	uint8_t nonce_s[NZI_NONCE_LEN];	/* the challenge it was sent */
	uint8_t buf[NZI_BOOT_HELLO_MAX];
	struct sockaddr_storage src;
	char from[64];
};

struct nzi_member {		/* a rank that has joined */
	int fd;			/* -1: not (yet) there */
	unsigned int unit;	/* the chunk unit it asked for, 0 = any */
	unsigned int nrails;
	struct nzi_rail rails[NZ_MAX_RAILS];
	uint8_t nonce_s[NZI_NONCE_LEN];	/* its challenge */
	uint8_t nonce_c[NZI_NONCE_LEN];	/* its HELLO's nonce */
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
	unsigned int rejected;	/* connections dropped */
	unsigned int bad_mac;	/* of which HELLOs whose MAC failed */
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
	int fd, one = 1;

	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, backlog) < 0 ||
	    nzi_set_nonblock(fd) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

/*
 * Listen on master_addr, and only there: the rendezvous is reachable where
 * the job was told it is, not on every network of the host.
 */
static int nzi_server_listen(struct nzi_server *s)
{
	const struct nzi_boot_cfg *cfg = s->cfg;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res, *ai;
	char port[8];
	int backlog = cfg->size + NZI_MAX_PENDING, fd = -EADDRNOTAVAIL, ret;

	snprintf(port, sizeof(port), "%d", cfg->master_port);
	snprintf(s->where, sizeof(s->where), "%s:%d", cfg->master_addr,
		 cfg->master_port);
	ret = getaddrinfo(cfg->master_addr, port, &hints, &res);
	if (ret)
		return nzi_error(-EADDRNOTAVAIL, "rendezvous: rank 0 cannot resolve MASTER_ADDR=%s: %s",
				 cfg->master_addr,
				 ret == EAI_SYSTEM ? strerror(errno) : gai_strerror(ret));
	for (ai = res; ai; ai = ai->ai_next) {
		int f = nzi_listen_on(ai, backlog);

		if (f >= 0) {
			fd = f;
			break;
		}
		if (fd != -EADDRINUSE)	/* the most telling error wins */
			fd = f;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return nzi_error(fd, "rendezvous: rank 0 cannot listen on %s: %s%s",
				 s->where, strerror(-fd),
				 fd == -EADDRINUSE ? " (another job's rank 0, or a leftover process, holds MASTER_PORT)" :
				 fd == -EADDRNOTAVAIL ? " (MASTER_ADDR must be an address of rank 0's own host that the other ranks reach: rank 0 listens there only)" : "");
	s->lfd = fd;
	nzi_log(cfg->verbose, 0, "listening on %s for %d ranks", s->where,
		cfg->size);
	return 0;
}

/* Make room for one more pending connection from src. */
static void nzi_server_make_room(struct nzi_server *s,
				 const struct sockaddr_storage *src)
{
	unsigned int same = 0, oldest = 0, oldest_same = 0;
	bool any_same = false;

	for (unsigned int i = 0; i < s->npend; i++) {
		if (s->pend[i]->deadline < s->pend[oldest]->deadline)
			oldest = i;
		if (!nzi_same_host(&s->pend[i]->src, src))
			continue;
		if (!any_same || s->pend[i]->deadline < s->pend[oldest_same]->deadline)
			oldest_same = i;
		any_same = true;
		same++;
	}
	if (same >= NZI_MAX_PENDING_PER_SOURCE)
		nzi_reject(s, oldest_same, 0, "its host has %u unauthenticated connections: the oldest goes",
			   same);
	else if (s->npend == NZI_MAX_PENDING)
		nzi_reject(s, oldest, 0, "%d unauthenticated connections: the oldest goes",
			   NZI_MAX_PENDING);
}

static void nzi_server_accept(struct nzi_server *s)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int fd;

	while ((fd = accept4(s->lfd, (struct sockaddr *)&ss, &sl,
			     SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		uint8_t ch[NZI_BOOT_CHALLENGE_LEN];
		struct nzi_pending *p;
		int one = 1;

		sl = sizeof(ss);
		nzi_server_make_room(s, &ss);
		p = calloc(1, sizeof(*p));
		if (!p || nzi_random(p->nonce_s, sizeof(p->nonce_s))) {
			s->rejected++;
			free(p);
			close(fd);
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		/* An empty socket buffer takes 44 bytes at once, or never. */
		nzi_boot_encode_challenge(ch, p->nonce_s);
		if (send(fd, ch, sizeof(ch), MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof(ch)) {
			s->rejected++;
			free(p);
			close(fd);
			continue;
		}
		p->fd = fd;
		p->deadline = nzi_now_ms() + NZI_HELLO_TIMEOUT_MS;
		p->src = ss;
		nzi_sockname((struct sockaddr *)&ss, p->from, sizeof(p->from));
		s->pend[s->npend++] = p;
	}
}

/* The member's connection is still open (its peer has not closed it). */
static bool nzi_conn_alive(int fd)
{
	uint8_t b;
	ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);

	return n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR));
}

/* A complete HELLO from pending connection i: admit (0) or reject (-1). */
static int nzi_server_hello(struct nzi_server *s, unsigned int i)
{
	struct nzi_pending *p = s->pend[i];
	struct nzi_boot_hello h;
	struct nzi_member *m;
	int ret;

	ret = nzi_boot_parse_hello(p->buf, p->got, s->cfg->size, s->cfg->key,
				   p->nonce_s, &h);
	if (ret == -EKEYREJECTED) {
		s->bad_mac++;
		return nzi_reject(s, i, EKEYREJECTED, "its HELLO's MAC does not check: it does not hold this job's key (NEZHA_JOB_KEY), or it replays another rendezvous");
	}
	if (ret)
		return nzi_reject(s, i, ret == -EPROTO ? EPROTO : EINVAL, "%s", nzi_reason());
	/* From here on, a rank of this job's key speaks. */
	m = &s->mem[h.rank];
	if (m->fd >= 0 && nzi_conn_alive(m->fd))
		return nzi_reject(s, i, EEXIST, "rank %d already joined from %s",
				  h.rank, m->from);
	if (m->fd >= 0) {	/* it left, and we had not seen it yet */
		close(m->fd);
		s->joined--;
	}
	memcpy(m->rails, h.rails, sizeof(h.rails));
	m->nrails = h.nrails;
	m->unit = h.unit;
	memcpy(m->nonce_s, p->nonce_s, sizeof(m->nonce_s));
	memcpy(m->nonce_c, h.nonce_c, sizeof(m->nonce_c));
	m->fd = p->fd;
	memcpy(m->from, p->from, sizeof(m->from));
	s->joined++;
	nzi_log(s->cfg->verbose, 0, "rank %d joined from %s with %u rails (%d of %d)",
		h.rank, m->from, h.nrails, s->joined, s->cfg->size);
	free(p);
	s->pend[i] = s->pend[--s->npend];
	return 0;
}

static uint32_t nzi_hdr_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Read what pending connection i has sent; admit or reject when complete. */
static int nzi_server_read(struct nzi_server *s, unsigned int i)
{
	struct nzi_pending *p = s->pend[i];
	size_t want = NZI_BOOT_HDR_LEN;
	ssize_t n;

	if (p->got >= NZI_BOOT_HDR_LEN)
		want += nzi_hdr_be32(p->buf + 8);
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
		uint32_t len = nzi_hdr_be32(p->buf + 8);
		unsigned int version = (unsigned int)p->buf[4] << 8 | p->buf[5];
		unsigned int type = (unsigned int)p->buf[6] << 8 | p->buf[7];

		if (nzi_hdr_be32(p->buf) != NZI_BOOT_MAGIC)
			return nzi_reject(s, i, 0, "bad magic 0x%08x", nzi_hdr_be32(p->buf));
		if (version != NZI_BOOT_VERSION)
			return nzi_reject(s, i, EPROTO, "rendezvous protocol version %u, rank 0 speaks %u (mixed libnezha versions)",
					  version, NZI_BOOT_VERSION);
		if (type != NZI_BOOT_HELLO || len < NZI_HELLO_FIXED + NZI_MAC_LEN ||
		    len > NZI_BOOT_HELLO_MAX - NZI_BOOT_HDR_LEN)
			return nzi_reject(s, i, EPROTO, "not a hello (type %u, %u bytes)",
					  type, len);
	}
	if (p->got > NZI_BOOT_HDR_LEN && p->got == NZI_BOOT_HDR_LEN + nzi_hdr_be32(p->buf + 8))
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
	char missing[96], reason[NZI_REASON_MAX], keys[96] = "";

	nzi_missing_list(s, missing, sizeof(missing));
	if (s->bad_mac)
		snprintf(keys, sizeof(keys), " (%u HELLOs under another key were dropped: does every rank have this job's key?)",
			 s->bad_mac);
	snprintf(reason, sizeof(reason), "rank(s) %s of %d did not join at %s within %d ms%s",
		 missing, s->cfg->size, s->where, s->cfg->timeout_ms, keys);
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

/* Every rank is here: compute the job and send it to everyone. */
static int nzi_server_welcome(struct nzi_server *s, struct nzi_boot_job *job,
			      int64_t deadline)
{
	unsigned int size = (unsigned int)s->cfg->size;
	const struct nzi_rail *rails[NZ_MAX_RANKS];
	unsigned int nrails[NZ_MAX_RANKS];
	uint8_t *msg, hash[NZI_SHA256_LEN];
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

	msg = nzi_boot_encode_welcome(job, 1, &len, hash);
	if (!msg)
		return nzi_error(-ENOMEM, "rendezvous: out of memory");
	/* One body; each rank gets the tag of its own nonces. */
	for (unsigned int r = 1; r < size && !ret; r++) {
		nzi_boot_welcome_tag(s->cfg->key, hash, s->mem[r].nonce_s, (int)r,
				     s->mem[r].nonce_c, msg + len - NZI_MAC_LEN);
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
	nzi_boot_derive_secret(s->cfg->key, job);
	nzi_log(s->cfg->verbose, 0, "job %016llx formed: %d ranks, %u rail slots, %u connections dropped (%u without the key)",
		(unsigned long long)job->job_id, s->cfg->size, job->nrails,
		s->rejected, s->bad_mac);
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
	job->bad_mac = s.bad_mac;
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

/*
 * Connect to rank 0, retrying until deadline.  heard: rank 0 already
 * challenged this rank once, so a refused connection now means it closed
 * its port (the job formed or failed): no point in waiting.
 */
static int nzi_connect(const struct nzi_boot_cfg *cfg, int64_t deadline,
		       bool heard)
{
	int backoff = 10, fd;

	for (;;) {
		int left;

		fd = nzi_try_connect(cfg, deadline);
		if (fd >= 0)
			return fd;
		if (heard && fd == -ECONNREFUSED)
			return nzi_error(-ECONNRESET, "rendezvous: rank 0 at %s:%d dropped rank %d before answering it and no longer listens: the job formed without it, or failed",
					 cfg->master_addr, cfg->master_port, cfg->rank);
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

/* Rank 0's answer on fd, whole, into *msg (malloc'd) and *len. */
static int nzi_read_answer(const struct nzi_boot_cfg *cfg, int fd, int64_t verdict,
			   uint8_t **msg, size_t *len)
{
	uint8_t hdr[NZI_BOOT_HDR_LEN];
	uint32_t plen;
	int ret;

	*msg = NULL;
	ret = nzi_xfer_all(fd, hdr, sizeof(hdr), verdict, false);
	if (ret)
		return ret;
	plen = nzi_hdr_be32(hdr + 8);
	if (nzi_hdr_be32(hdr) != NZI_BOOT_MAGIC ||
	    plen > NZI_WELCOME_MAX + NZI_MAC_LEN)
		return nzi_error(-EPROTO, "rendezvous: %s:%d does not speak the libnezha rendezvous protocol (version %u)",
				 cfg->master_addr, cfg->master_port, NZI_BOOT_VERSION);
	*msg = malloc(NZI_BOOT_HDR_LEN + plen);
	if (!*msg)
		return nzi_error(-ENOMEM, "rendezvous: out of memory");
	memcpy(*msg, hdr, sizeof(hdr));
	ret = nzi_xfer_all(fd, *msg + NZI_BOOT_HDR_LEN, plen, verdict, false);
	*len = NZI_BOOT_HDR_LEN + plen;
	return ret;
}

/*
 * One attempt: connect, take the challenge, send the HELLO, read and check
 * the answer.  -EAGAIN: rank 0 dropped the connection before answering
 * (a full table of unauthenticated connections): connect again.
 */
static int nzi_join_once(const struct nzi_boot_cfg *cfg, struct nzi_boot_job *job,
			 int64_t deadline, bool *heard)
{
	uint8_t ch[NZI_BOOT_CHALLENGE_LEN], hello[NZI_BOOT_HELLO_MAX], *ans = NULL;
	uint8_t nonce_s[NZI_NONCE_LEN], nonce_c[NZI_NONCE_LEN];
	struct nzi_hello_auth auth = { .key = cfg->key, .nonce_s = nonce_s,
				       .nonce_c = nonce_c };
	int64_t verdict = deadline + NZI_VERDICT_GRACE_MS;
	size_t hlen, alen = 0;
	int fd, ret;

	fd = nzi_connect(cfg, deadline, *heard);
	if (fd < 0)
		return fd;
	ret = nzi_xfer_all(fd, ch, sizeof(ch), verdict, false);
	if (ret == -ECONNRESET) {
		ret = -EAGAIN;
		goto out;
	}
	if (ret == -ETIMEDOUT) {
		ret = nzi_error(-ETIMEDOUT, "rendezvous: %s:%d accepted rank %d's connection but sent no challenge within %d ms: another service, or a libnezha older than rendezvous version %u?",
				cfg->master_addr, cfg->master_port, cfg->rank,
				cfg->timeout_ms, NZI_BOOT_VERSION);
		goto out;
	}
	if (!ret && nzi_hdr_be32(ch) == NZI_BOOT_MAGIC && (ch[4] << 8 | ch[5]) != NZI_BOOT_VERSION)
		ret = nzi_error(-EPROTO, "rendezvous: rank 0 speaks rendezvous protocol version %u, rank %d %u (mixed libnezha versions)",
				ch[4] << 8 | ch[5], cfg->rank, NZI_BOOT_VERSION);
	else if (!ret && nzi_boot_parse_challenge(ch, sizeof(ch), nonce_s))
		ret = nzi_error(-EPROTO, "rendezvous: %s:%d does not speak the libnezha rendezvous protocol (version %u)",
				cfg->master_addr, cfg->master_port, NZI_BOOT_VERSION);
	if (ret)
		goto out;
	*heard = true;
	ret = nzi_random(nonce_c, sizeof(nonce_c));
	if (ret)
		goto out;
	nzi_log(cfg->verbose, cfg->rank, "challenged by rank 0 at %s:%d", cfg->master_addr,
		cfg->master_port);
	hlen = nzi_boot_encode_hello(hello, &auth, cfg->rank, cfg->size, cfg->rails,
				     cfg->nrails, cfg->unit);
	ret = nzi_xfer_all(fd, hello, hlen, verdict, true);
	if (!ret)
		ret = nzi_read_answer(cfg, fd, verdict, &ans, &alen);
	if (ret == -ECONNRESET && !alen) {
		ret = -EAGAIN;
	} else if (ret == -ETIMEDOUT) {
		nzi_error(ret, "rendezvous: rank %d reached rank 0 at %s:%d, but the job did not form within %d ms",
			  cfg->rank, cfg->master_addr, cfg->master_port, cfg->timeout_ms);
	} else if (ret == -ECONNRESET) {
		nzi_error(ret, "rendezvous: rank 0 at %s:%d closed the connection in the middle of its answer",
			  cfg->master_addr, cfg->master_port);
	} else if (!ret) {
		ret = nzi_boot_parse_answer(cfg, &auth, ans, alen, job);
		if (ret == -EKEYREJECTED)
			job->bad_mac++;
	}
out:
	free(ans);
	nzi_wipe(hello, sizeof(hello));
	close(fd);
	return ret;
}

static int nzi_join(const struct nzi_boot_cfg *cfg, struct nzi_boot_job *job,
		    int64_t deadline)
{
	bool heard = false;
	int ret;

	while ((ret = nzi_join_once(cfg, job, deadline, &heard)) == -EAGAIN) {
		nzi_log(cfg->verbose, cfg->rank, "rank 0 dropped the connection before answering: connecting again");
		if (nzi_now_ms() >= deadline)
			return nzi_error(-ETIMEDOUT, "rendezvous: rank 0 at %s:%d dropped every connection of rank %d before answering it, for %d ms",
					 cfg->master_addr, cfg->master_port, cfg->rank,
					 cfg->timeout_ms);
		usleep(10000);
	}
	if (ret)
		nzi_boot_job_free(job);
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
	for (unsigned int i = 0; i < cfg->nrails; i++) {
		const char *name = cfg->rails[i].name;
		bool dup = false;

		for (unsigned int k = 0; k < i; k++)
			dup |= !strncmp(cfg->rails[k].name, name, NZ_RAIL_NAME_LEN);
		if (!name[0] || !memchr(name, 0, NZ_RAIL_NAME_LEN) || dup)
			return nzi_error(-EINVAL, "rendezvous: rail %u has no valid, unique name", i);
	}
	if (cfg->size == 1)
		return 0;
	if (!cfg->key)
		return nzi_error(-ENOKEY, "rendezvous: no job key for a job of %d ranks", cfg->size);
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
		/* No peer: a secret nobody else needs to derive. */
		if (!ret)
			ret = nzi_random(job->secret, sizeof(job->secret));
		if (ret)
			nzi_boot_job_free(job);
		return ret;
	}
	deadline = nzi_now_ms() + cfg->timeout_ms;
	if (cfg->rank == 0)
		return nzi_serve(cfg, job, deadline);
	return nzi_join(cfg, job, deadline);
}
