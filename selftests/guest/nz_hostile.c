// SPDX-License-Identifier: GPL-2.0
/*
 * A hostile or broken peer, from user space, against the module's TCP rail
 * on this guest: garbage instead of a handshake, a HELLO with the wrong
 * secret, then (with the right secret) frames that point outside the
 * receive buffer or break the chunking rule.  Each must close only that
 * connection, be counted, and leave the posted receive and the memory
 * around it untouched; a well-formed message afterwards must still land.
 *
 * Usage: nz_hostile RAIL ADDR PORT [-n FRAMES] [-s SEED] [-x N [-S SRC]].  With -n, a
 * fuzzing phase follows: FRAMES structure-aware mutated frames, first from
 * peers without the secret (mutated HELLOs), then from one that knows it
 * (streams of well-formed frames ending, often, in a mutated one).  The
 * host's copy of the codec predicts which frames are malformed: each of
 * those must close the connection, and be counted; afterwards a message
 * from the same peer must still land intact.  Deterministic per seed.
 * With -x, N strangers that connect and stay silent (from SRC, another
 * address of this guest) must not keep the job's own peer from connecting
 * and delivering within a second.
 * Links the module's own wire codec (kmod/wire.c); HMAC-SHA256 comes from
 * the kernel through AF_ALG.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <linux/if_alg.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <inttypes.h>
#include <poll.h>
#include <string.h>
#include <time.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include "nezha.h"
#include "wire.h"
#include "tap.h"
#include "nz_sysfs.h"
#include "health_learn.h"

#define DATA_OFF_OFFSET	40	/* DATA header: offset field (wire.rst) */
#define UNIT		65536

static const char *rail;
static struct sockaddr_in target;
/* NZ_TIME_SCALE: how much slower this guest's kernel is (vm.sh). */
static double tscale = 1;
static const struct nz_wire_limits lim = { .max_msg = 1ULL << 40,
					   .max_payload = UNIT };

static long long sysfs_rail(const char *what)
{
	return nz_rail_stat(rail, what);
}

static int hmac(const uint8_t *key, size_t klen, const uint8_t *in,
		size_t len, uint8_t *out)
{
	struct sockaddr_alg sa = { .salg_family = AF_ALG, .salg_type = "hash",
				   .salg_name = "hmac(sha256)" };
	int tfm, op, ret = -1;

	tfm = socket(AF_ALG, SOCK_SEQPACKET, 0);
	if (tfm < 0)
		return -1;
	if (bind(tfm, (struct sockaddr *)&sa, sizeof(sa)) ||
	    setsockopt(tfm, SOL_ALG, ALG_SET_KEY, key, klen))
		goto out;
	op = accept(tfm, NULL, 0);
	if (op < 0)
		goto out;
	if (write(op, in, len) == (ssize_t)len &&
	    read(op, out, 32) == 32)
		ret = 0;
	close(op);
out:
	close(tfm);
	return ret;
}

static int connect_rail(void)
{
	struct timeval tv = { .tv_sec = 8 };
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&target, sizeof(target))) {
		close(fd);
		return -1;
	}
	return fd;
}

static int read_all(int fd, void *buf, size_t len)
{
	size_t got = 0;
	ssize_t n;

	while (got < len) {
		n = read(fd, (char *)buf + got, len - got);
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

static int write_all(int fd, const void *buf, size_t len)
{
	return write(fd, buf, len) == (ssize_t)len ? 0 : -1;
}

static double fz_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * The counter once it reaches want, or after 5 s x NZ_TIME_SCALE: the
 * module counts a refusal when its handshake work gets to the connection,
 * which after a long campaign on a busy guest can come after our close()
 * (the 10^7 campaign, 2026-12-05: "wrong secret: counted as refused" read
 * one too few right after it).
 */
static long long sysfs_rail_wait(const char *what, long long want)
{
	double end = fz_now() + 5 * tscale;
	long long v;

	while ((v = sysfs_rail(what)) >= 0 && v < want && fz_now() < end)
		usleep(10000);
	return v;
}

/*
 * The server closes on us within 8 s (times the kernel's slowness): read
 * until EOF or reset.  What it sends meanwhile (an authenticated
 * connection's heartbeats) does not extend that: a connection left open
 * once made this loop read heartbeats for ever on the debug kernel.
 */
static bool closed_by_peer(int fd)
{
	double end = fz_now() + 8 * tscale;
	char buf[256];

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int left = (int)((end - fz_now()) * 1000);
		ssize_t n;

		if (left <= 0 || poll(&p, 1, left) <= 0)
			return false;
		n = read(fd, buf, sizeof(buf));
		if (n == 0)
			return true;
		if (n < 0)
			return errno == ECONNRESET;
	}
}

static int read_frame(int fd, struct nz_frame *f, uint8_t *body)
{
	uint8_t hdr[NZ_WIRE_HDR_LEN];

	if (read_all(fd, hdr, sizeof(hdr)) || nz_wire_decode_hdr(hdr, &lim, f))
		return -1;
	if (f->len > NZ_WIRE_HELLO_LEN || read_all(fd, body, f->len))
		return -1;
	return nz_wire_decode_body(f, body);
}

struct job {
	uint64_t id;
	uint64_t inc;		/* our communicator's instance (wire v3) */
	uint8_t secret[NZ_SECRET_LEN];
};

/* Client side of the handshake as rank 1; 0 when WELCOME checks out. */
static int handshake(int fd, const struct job *j, const uint8_t *secret)
{
	uint8_t body[NZ_WIRE_HELLO_LEN], buf[128], in[NZ_WIRE_HELLO_MAC_LEN], mac[32];
	uint8_t nonce_s[NZ_WIRE_NONCE_LEN], nonce_c[NZ_WIRE_NONCE_LEN];
	struct nz_frame f;
	int len;

	if (read_frame(fd, &f, body) || f.type != NZ_FRAME_CHALLENGE)
		return -1;
	memcpy(nonce_s, f.challenge.nonce_s, sizeof(nonce_s));
	nz_frame_init(&f, NZ_FRAME_HELLO);
	f.hello.incarnation = j->inc;
	f.hello.job_id = j->id;
	f.hello.src_rank = 1;
	f.hello.dst_rank = 0;
	f.hello.rail = 0;
	f.hello.nrails = 1;
	f.hello.unit = UNIT;
	getrandom(f.hello.nonce_c, sizeof(f.hello.nonce_c), 0);
	nz_wire_hello_mac_input(&f.hello, nonce_s, in);
	if (hmac(secret, NZ_SECRET_LEN, in, NZ_WIRE_HELLO_MAC_LEN,
		 f.hello.mac))
		return -1;
	len = nz_wire_encode(&f, &lim, buf, sizeof(buf));
	if (len < 0 || write_all(fd, buf, (size_t)len))
		return -1;
	memcpy(nonce_c, f.hello.nonce_c, sizeof(nonce_c));
	if (read_frame(fd, &f, body) || f.type != NZ_FRAME_WELCOME)
		return -2;
	nz_wire_welcome_mac_input(nonce_c, nonce_s, j->id, 0, 1, 0,
				  f.welcome.incarnation, in);
	if (hmac(secret, NZ_SECRET_LEN, in, NZ_WIRE_WELCOME_MAC_LEN, mac))
		return -1;
	return memcmp(mac, f.welcome.mac, 32) ? -3 : 0;
}

static int data_frame(uint8_t *hdr, uint64_t msg_id, uint64_t tag,
		      uint64_t total, uint64_t off, uint32_t len)
{
	struct nz_frame f;

	nz_frame_init(&f, NZ_FRAME_DATA);
	f.len = len;
	f.data.msg_id = msg_id;
	f.data.tag = tag;
	f.data.total = total;
	f.data.offset = off;
	return nz_wire_encode(&f, &lim, hdr, NZ_WIRE_HDR_LEN);
}

static void put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

/* ---- the fuzzing phase (-n FRAMES) -------------------------------------- */

struct fz_rng {
	uint64_t s;
};

static uint64_t fz_rnd(struct fz_rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint32_t fz_below(struct fz_rng *r, uint32_t n)
{
	return n ? (uint32_t)(fz_rnd(r) % n) : 0;
}

static uint64_t fz_edge(struct fz_rng *r)
{
	static const uint64_t e[] = { 0, 1, 4095, 4096, UNIT - 1, UNIT, UNIT + 1,
		0xffffffff, 1ULL << 40, (1ULL << 40) + 1, 1ULL << 63, ~0ULL };

	return e[fz_below(r, sizeof(e) / sizeof(e[0]))];
}

static struct {
	uint64_t frames, conns, bad_pred, closed_bad, closed_good, open_bad;
	uint64_t hs_conns, hs_closed, hs_open;
	char first[256];
} fz;

static void fz_short_timeout(int fd, int ms)
{
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

/* Damage one header field, or one bit anywhere in the header. */
static void fz_mutate(struct fz_rng *r, uint8_t *hdr)
{
	switch (fz_below(r, 6)) {
	case 0:
		hdr[fz_below(r, NZ_WIRE_HDR_LEN)] ^= (uint8_t)(1u << fz_below(r, 8));
		break;
	case 1:
		hdr[fz_below(r, NZ_WIRE_HDR_LEN)] = (uint8_t)fz_rnd(r);
		break;
	case 2:	/* one 64-bit field of the frame's body in the header */
		put_be64(hdr + 8 + 8 * fz_below(r, 5), fz_edge(r));
		break;
	case 3:	/* the type */
		hdr[4 + fz_below(r, 2)] = (uint8_t)fz_below(r, 12);
		break;
	default: {	/* a 32-bit field of the first 8 bytes */
		uint32_t v = (uint32_t)fz_edge(r);
		uint8_t *p = hdr + 4 * fz_below(r, 2);

		p[0] = (uint8_t)(v >> 24);
		p[1] = (uint8_t)(v >> 16);
		p[2] = (uint8_t)(v >> 8);
		p[3] = (uint8_t)v;
		break;
	}
	}
}

/* Would the module close on this header (its own codec, and its rules)? */
static bool fz_malformed(const uint8_t *hdr, struct nz_frame *f)
{
	if (nz_wire_decode_hdr(hdr, &lim, f))
		return true;
	if (!nz_wire_type_expected(NZ_WS_ESTABLISHED, f->type))
		return true;
	if (f->type == NZ_FRAME_CLOSE)
		return true;
	return f->type == NZ_FRAME_DATA &&
	       !nz_wire_chunk_ok(f->data.total, f->data.offset, f->len, UNIT);
}

/*
 * One well-formed frame after the handshake into out (header and payload):
 * DATA of messages nobody receives (tags 100..103), acknowledgments of
 * messages never sent, heartbeats.  Returns its length.
 */
static size_t fz_frame(struct fz_rng *r, uint8_t *out, uint64_t *next_id)
{
	struct nz_frame f;
	unsigned int k = fz_below(r, 100);
	size_t n = NZ_WIRE_HDR_LEN;

	if (k < 45) {
		uint64_t total = fz_below(r, 10) ? fz_below(r, 2048) :
				 fz_below(r, 3 * UNIT);
		uint64_t units = total ? (total + UNIT - 1) / UNIT : 1;
		uint64_t off = fz_below(r, (uint32_t)units) * (uint64_t)UNIT;

		nz_frame_init(&f, NZ_FRAME_DATA);
		/* Ids from 1000: those below are the fixed tests' own. */
		f.data.msg_id = fz_below(r, 8) ? (*next_id)++ :
				1000 + fz_below(r, (uint32_t)(*next_id - 999));	/* a duplicate */
		f.data.tag = 100 + fz_below(r, 4);
		f.data.tag_seq = fz_below(r, 4) ? f.data.msg_id : fz_rnd(r);
		f.data.total = total;
		f.data.offset = total ? off : 0;
		f.len = (uint32_t)nz_wire_chunk_len(total, f.data.offset, 1, UNIT);
		memset(out + NZ_WIRE_HDR_LEN, (int)(f.data.msg_id & 0xff), f.len);
		n += f.len;
	} else if (k < 65) {
		nz_frame_init(&f, NZ_FRAME_ACK);
		f.ack.msg_id = 1 + fz_below(r, 1000);
		f.ack.offset = (uint64_t)fz_below(r, 4) * UNIT;
		f.ack.len = 1 + fz_below(r, UNIT);
	} else if (k < 90) {
		nz_frame_init(&f, NZ_FRAME_HEARTBEAT);
		f.hb.ts_ns = fz_rnd(r);
		/* Now and then redial and queue-delay bits too (wire.rst). */
		f.hb.seq = fz_below(r, 8) ? fz_below(r, 4) : fz_rnd(r);
	} else {
		nz_frame_init(&f, NZ_FRAME_HEARTBEAT_ACK);
		f.hb.ts_ns = fz_rnd(r);
		f.hb.seq = fz_rnd(r);
	}
	if (nz_wire_encode(&f, &lim, out, NZ_WIRE_HDR_LEN) != NZ_WIRE_HDR_LEN)
		return 0;
	return n;
}

/* Read whatever the module sent (ACKs, heartbeats) without waiting. */
static void fz_drain(int fd)
{
	char buf[4096];

	while (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0)
		;
}

/* A mutated HELLO from a peer without the secret, after its CHALLENGE. */
static size_t fz_hello(struct fz_rng *r, const struct job *j, const uint8_t *chal,
		       uint8_t *buf, size_t cap)
{
	uint8_t secret[NZ_SECRET_LEN], in[NZ_WIRE_HELLO_MAC_LEN];
	struct nz_frame f, c;
	size_t len;

	nz_frame_init(&f, NZ_FRAME_HELLO);
	f.hello.incarnation = fz_below(r, 8) ? j->inc : fz_rnd(r);
	f.hello.job_id = fz_below(r, 4) ? j->id : fz_rnd(r);
	f.hello.src_rank = fz_below(r, 4) ? 1 : (uint32_t)fz_edge(r);
	f.hello.dst_rank = fz_below(r, 4) ? 0 : (uint32_t)fz_edge(r);
	f.hello.rail = (uint16_t)(fz_below(r, 4) ? 0 : fz_rnd(r));
	f.hello.nrails = (uint16_t)(fz_below(r, 4) ? 1 : fz_rnd(r));
	f.hello.unit = fz_below(r, 4) ? UNIT : (uint32_t)fz_edge(r);
	for (size_t i = 0; i < sizeof(secret); i++)
		secret[i] = (uint8_t)fz_rnd(r);
	for (size_t i = 0; i < sizeof(f.hello.nonce_c); i++)
		f.hello.nonce_c[i] = (uint8_t)fz_rnd(r);
	memset(&c, 0, sizeof(c));
	if (nz_wire_decode_hdr(chal, &lim, &c) || c.type != NZ_FRAME_CHALLENGE)
		memset(c.challenge.nonce_s, 0, sizeof(c.challenge.nonce_s));
	nz_wire_hello_mac_input(&f.hello, c.challenge.nonce_s, in);
	hmac(secret, sizeof(secret), in, NZ_WIRE_HELLO_MAC_LEN, f.hello.mac);
	len = nz_wire_encode(&f, &lim, buf, cap) > 0 ? NZ_WIRE_HDR_LEN + NZ_WIRE_HELLO_LEN : 0;
	if (!len || fz_below(r, 3) == 0) {	/* not even a frame */
		len = NZ_WIRE_HDR_LEN + fz_below(r, NZ_WIRE_HELLO_LEN + 1);
		for (size_t i = 0; i < len; i++)
			buf[i] = (uint8_t)fz_rnd(r);
	} else if (fz_below(r, 2)) {
		fz_mutate(r, buf);
		if (fz_below(r, 2))
			buf[NZ_WIRE_HDR_LEN + fz_below(r, NZ_WIRE_HELLO_LEN)] ^= 0x10;
	}
	return len;
}

/*
 * Peers without the secret, 32 at a time (a HELLO naming no job here costs
 * the module a wait of its own): every one must be refused within 8 s.
 */
static void fz_unauth(struct fz_rng *r, const struct job *j, uint64_t frames)
{
	while (fz.frames < frames) {
		uint8_t buf[NZ_WIRE_HDR_LEN + NZ_WIRE_HELLO_LEN + 64], hdr[NZ_WIRE_HDR_LEN];
		int fds[32], n = 0, k;
		double end;

		for (k = 0; k < 32 && fz.frames < frames; k++) {
			struct nz_frame g;
			size_t len;
			int fd = connect_rail();

			if (fd < 0) {
				snprintf(fz.first, sizeof(fz.first), "connect: %s", strerror(errno));
				fz.hs_open++;
				return;
			}
			fz_short_timeout(fd, 8000);
			fz.hs_conns++;
			if (read_all(fd, hdr, sizeof(hdr))) {
				close(fd);
				continue;
			}
			len = fz_hello(r, j, hdr, buf, sizeof(buf));
			if (write_all(fd, buf, len)) {
				close(fd);
				continue;
			}
			fz.frames++;
			/* A header that promises more than was sent: the module
			 * waits for the rest and its handshake timeout ends it. */
			if (!nz_wire_decode_hdr(buf, &lim, &g) &&
			    NZ_WIRE_HDR_LEN + (size_t)g.len > len) {
				close(fd);
				continue;
			}
			fds[n++] = fd;
		}
		end = fz_now() + 8;
		while (n && fz_now() < end) {
			struct pollfd p[32];

			for (k = 0; k < n; k++)
				p[k] = (struct pollfd){ .fd = fds[k], .events = POLLIN };
			if (poll(p, (nfds_t)n, 200) <= 0)
				continue;
			for (k = 0; k < n; k++) {
				char b[256];
				ssize_t got;

				if (!p[k].revents)
					continue;
				got = recv(fds[k], b, sizeof(b), MSG_DONTWAIT);
				if (got == 0 || (got < 0 && errno != EAGAIN)) {
					close(fds[k]);
					fds[k] = -1;
					fz.hs_closed++;
				}
			}
			for (k = 0; k < n;)
				if (fds[k] < 0)
					fds[k] = fds[--n];
				else
					k++;
		}
		for (k = 0; k < n; k++) {
			close(fds[k]);
			fz.hs_open++;
			if (!fz.first[0])
				snprintf(fz.first, sizeof(fz.first),
					 "a HELLO without the secret not refused within 8 s");
		}
	}
}

/* The peer that knows the secret: frame streams, some ending in a bad one. */
static void fz_auth(struct fz_rng *r, const struct job *j, uint64_t frames)
{
	static uint8_t buf[1 << 20];
	uint64_t next_id = 1000;

	while (fz.frames < frames) {
		unsigned int k, nframes = 1 + fz_below(r, 200);
		bool bad = false;
		size_t len = 0, last = 0;
		int fd = connect_rail();

		if (fd < 0 || handshake(fd, j, j->secret)) {
			if (fd >= 0)
				close(fd);
			if (!fz.first[0])
				snprintf(fz.first, sizeof(fz.first), "handshake %" PRIu64 " failed",
					 fz.conns);
			fz.open_bad++;
			return;
		}
		fz.conns++;
		for (k = 0; k < nframes && !bad; k++) {
			size_t n;
			struct nz_frame f;

			if (len + NZ_WIRE_HDR_LEN + 3 * UNIT > sizeof(buf)) {
				write_all(fd, buf, len);
				fz_drain(fd);
				len = 0;
			}
			n = fz_frame(r, buf + len, &next_id);
			if (!n)
				continue;
			if (k == nframes - 1 && fz_below(r, 3)) {
				fz_mutate(r, buf + len);
				bad = fz_malformed(buf + len, &f);
				/* the payload the damaged header announces, if sane */
				if (!bad && f.len != n - NZ_WIRE_HDR_LEN)
					n = NZ_WIRE_HDR_LEN + (f.len <= UNIT ? f.len : 0);
			}
			last = len;
			len += n;
			fz.frames++;
		}
		if (write_all(fd, buf, len) == 0 && bad) {
			fz.bad_pred++;
			fz_short_timeout(fd, 3000);
			if (closed_by_peer(fd)) {
				fz.closed_bad++;
			} else {
				fz.open_bad++;
				if (!fz.first[0]) {
					int at = snprintf(fz.first, sizeof(fz.first),
							  "connection %" PRIu64 ": a malformed frame did not close it; its header:",
							  fz.conns);

					for (k = 0; k < NZ_WIRE_HDR_LEN && at > 0 &&
					     at < (int)sizeof(fz.first) - 3; k++)
						at += snprintf(fz.first + at, sizeof(fz.first) - at,
							       "%s%02x", k % 8 ? "" : " ", buf[last + k]);
				}
			}
		} else {
			fz_drain(fd);
		}
		close(fd);
	}
}


static void fz_phase(const struct job *j, struct nz_queue *q, uint32_t comm_id,
		     uint64_t frames, uint64_t seed)
{
	struct fz_rng r = { seed };
	long long refused0 = sysfs_rail("handshakes_refused");
	long long errors0 = sysfs_rail("errors");
	uint64_t unauth = frames / 10 < 1000 ? frames / 10 : 1000;
	struct nz_cqe cqe;
	struct nz_sqe cmd = { 0 };
	uint8_t *area = malloc(3 * UNIT), *rbuf = area + UNIT, *payload = malloc(UNIT);
	uint8_t hdr[NZ_WIRE_HDR_LEN];
	double t0 = fz_now(), t1;
	bool canary_ok = true;
	int fd, ret, i;

	fz_rnd(&r);
	fz_unauth(&r, j, unauth);
	tap_ok(fz.hs_open == 0 && fz.hs_conns > 0,
	       "wire fuzz, no secret: %" PRIu64 " mutated HELLOs, every one refused (%" PRIu64 " closed)%s%s",
	       fz.frames, fz.hs_closed, fz.first[0] ? ": " : "", fz.first);
	tap_ok(sysfs_rail("handshakes_refused") - refused0 >= (long long)fz.hs_closed,
	       "wire fuzz, no secret: refusals counted (+%lld for %" PRIu64 ")",
	       sysfs_rail("handshakes_refused") - refused0, fz.hs_closed);
	fz.first[0] = 0;
	fz_auth(&r, j, frames);
	t1 = fz_now();
	tap_ok(fz.open_bad == 0,
	       "wire fuzz, with the secret: %" PRIu64 " frames in %" PRIu64 " connections, each of the %" PRIu64 " malformed closed its connection%s%s",
	       fz.frames - unauth, fz.conns, fz.bad_pred, fz.first[0] ? ": " : "", fz.first);
	usleep(300 * 1000);
	tap_ok(sysfs_rail("errors") - errors0 >= (long long)fz.closed_bad,
	       "wire fuzz: malformed frames counted as connection errors (+%lld for %" PRIu64 ")",
	       sysfs_rail("errors") - errors0, fz.closed_bad);
	tap_diag("wire fuzz: %" PRIu64 " frames in %.1f s = %.0f frames/s (seed %#" PRIx64 ")",
		 fz.frames, t1 - t0, fz.frames / (t1 - t0), seed);

	/*
	 * The job still works: once the peer is connected again, a receive
	 * posted gets its message.  (Posted before that, it may fail with
	 * -ENETDOWN: the peer spent the fuzz mostly without a connection.)
	 */
	memset(area, 0x5c, 3 * UNIT);
	for (i = 0; i < UNIT; i++)
		payload[i] = (uint8_t)(i * 13 + 1);
	fd = connect_rail();
	ret = fd >= 0 ? handshake(fd, j, j->secret) : -1;
	usleep(100 * 1000);
	cmd.comm_id = comm_id;
	cmd.xfer.addr = (uintptr_t)rbuf;
	cmd.xfer.len = UNIT;
	cmd.xfer.tag = 77;
	cmd.xfer.peer = 1;
	nz_queue_prep(q, NZ_CMD_RECV, &cmd, 78, -1);
	nz_queue_submit(q);
	data_frame(hdr, 5, 77, UNIT, 0, UNIT);	/* in the receive window */
	ret = ret || write_all(fd, hdr, sizeof(hdr)) || write_all(fd, payload, UNIT);
	ret = ret || nz_queue_wait(q, &cqe, 8000);
	for (i = 0; i < 3 * UNIT; i++)
		if ((i < UNIT || i >= 2 * UNIT) && area[i] != 0x5c)
			canary_ok = false;
	tap_ok(!ret && cqe.user_data == 78 && cqe.res == UNIT &&
	       !memcmp(rbuf, payload, UNIT) && canary_ok,
	       "after the wire fuzz a well-formed message still lands intact (res %d)",
	       ret ? ret : cqe.res);
	if (fd >= 0)
		close(fd);
	free(area);
	free(payload);
}

/* Connect from src (any address if src is 0), without waiting long. */
static int connect_from(in_addr_t src)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_addr.s_addr = src };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		return -1;
	if ((src && bind(fd, (struct sockaddr *)&sin, sizeof(sin))) ||
	    connect(fd, (struct sockaddr *)&target, sizeof(target))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The job's own peer connects and delivers one message: seconds, or -1. */
static double peer_delivers(const struct job *j, struct nz_queue *q,
			    uint32_t comm_id, uint64_t msg_id, int *res)
{
	uint8_t *rbuf = malloc(UNIT), *payload = malloc(UNIT), hdr[NZ_WIRE_HDR_LEN];
	struct nz_sqe cmd = { 0 };
	struct nz_cqe cqe = { 0 };
	double t0 = fz_now();
	int fd, ret;

	memset(payload, 0x33, UNIT);
	/*
	 * Connect first, then post the receive.  Posted before, it fails
	 * with -ENETDOWN whenever opening the strangers took longer than the
	 * no-rail grace (5 s) on a busy host: the peer has had no connection
	 * since the test before.  The module sends WELCOME just before it
	 * takes the connection on: give it that moment.
	 */
	fd = connect_rail();
	ret = fd >= 0 ? handshake(fd, j, j->secret) : -1;
	usleep(50 * 1000);
	cmd.comm_id = comm_id;
	cmd.xfer.addr = (uintptr_t)rbuf;
	cmd.xfer.len = UNIT;
	cmd.xfer.tag = 70 + msg_id;	/* a tag of its own: sequence 0 */
	cmd.xfer.peer = 1;
	nz_queue_prep(q, NZ_CMD_RECV, &cmd, 79, -1);
	nz_queue_submit(q);
	data_frame(hdr, msg_id, 70 + msg_id, UNIT, 0, UNIT);
	ret = ret || write_all(fd, hdr, sizeof(hdr)) || write_all(fd, payload, UNIT);
	ret = ret || nz_queue_wait(q, &cqe, 15000);
	*res = ret ? -1 : cqe.res;
	ret = ret || cqe.res != UNIT || memcmp(rbuf, payload, UNIT);
	if (fd >= 0)
		close(fd);
	free(rbuf);
	free(payload);
	return ret ? -1 : fz_now() - t0;
}

/*
 * -x N [-S ADDR]: N strangers connect and never say a word, then the
 * job's own peer connects and sends one message, which must land within
 * a second.  The strangers come from ADDR (another address of this
 * guest), the peer from the rail's own: one address may hold 256
 * handshakes, the rest of the N are refused at once.  Then 300 more come
 * from the peer's own address, and the peer, once they are half a second
 * old, takes the place of the oldest.  Before, the rail took 64
 * handshakes from anybody, each held a worker for up to 5 s, and every
 * connection past them was refused -- the job's own peers' too.
 */
static void silent_probe(const struct job *j, struct nz_queue *q, uint32_t comm_id,
			 unsigned int n, in_addr_t src)
{
	unsigned int k, opened = 0, opened2 = 0, n2 = 300;
	int *fds = calloc(n + n2, sizeof(int)), res;
	long long refused0 = sysfs_rail("handshakes_refused"), refused;
	struct rlimit rl;
	double t;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < n + n2 + 64) {
		rl.rlim_cur = rl.rlim_max < n + n2 + 64 ? rl.rlim_max : n + n2 + 64;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	for (k = 0; k < n; k++) {
		fds[k] = connect_from(src);
		opened += fds[k] >= 0;
	}
	usleep(200 * 1000);	/* their handshakes are under way */
	refused = sysfs_rail("handshakes_refused") - refused0;
	t = peer_delivers(j, q, comm_id, 3, &res);
	tap_ok(t >= 0 && t < 1.0,
	       "%u silent strangers from another address (%u connected, %lld refused at once): the job's peer gets in and delivers in %.2f s (%d)",
	       n, opened, refused, t, res);
	tap_ok(!src || n <= 256 || refused >= n - 256,
	       "one address holds at most 256 waiting handshakes (%lld of %u refused)",
	       refused, n);
	for (k = 0; k < n2; k++) {
		fds[n + k] = connect_from(0);
		opened2 += fds[n + k] >= 0;
	}
	usleep(700 * 1000);	/* older than NZ_TCP_HS_STALE */
	t = peer_delivers(j, q, comm_id, 4, &res);
	tap_ok(t >= 0 && t < 1.0,
	       "%u silent strangers from the peer's own address (%u connected): it takes the place of a stale one and delivers in %.2f s (%d)",
	       n2, opened2, t, res);
	for (k = 0; k < n + n2; k++)
		if (fds[k] >= 0)
			close(fds[k]);
	free(fds);
}

/*
 * 7. An authenticated peer that asks for heartbeat echoes as fast as it
 * can and never reads one: the module queued an echo for each, without
 * end.  Now at most max_ctrl_frames wait (stats/ctrl_dropped counts the
 * rest), and a well-behaved peer still gets in and delivers.
 */
static void never_reads(const struct job *j, struct nz_queue *q,
			uint32_t comm_id)
{
	long long old = nz_param_rw("max_ctrl_frames", -1);
	long long dropped0 = sysfs_rail("ctrl_dropped");
	uint8_t *burst = malloc(1 << 16), *rbuf = malloc(UNIT);
	uint8_t *payload = malloc(UNIT), hdr[NZ_WIRE_HDR_LEN];
	int rcv = 4096, fd, ret, len = 0, k, sent = 0;
	struct timeval tv = { .tv_sec = 2 };
	struct nz_sqe cmd = { 0 };
	struct nz_frame f;
	struct nz_cqe cqe;
	double t0;

	if (old < 0 || nz_param_rw("max_ctrl_frames", 256) != 256) {
		tap_ok(0, "never reads: max_ctrl_frames not settable");
		goto out;
	}
	fd = socket(AF_INET, SOCK_STREAM, 0);
	/* A small window: the module's writes back up at once. */
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
	ret = connect(fd, (struct sockaddr *)&target, sizeof(target)) ||
	      handshake(fd, j, j->secret);
	nz_frame_init(&f, NZ_FRAME_HEARTBEAT);
	f.hb.seq = NZ_HB_ECHO;
	len = nz_wire_encode(&f, &lim, burst, 64);
	for (k = 1; len > 0 && (k + 1) * len <= 1 << 16; k++)
		memcpy(burst + k * len, burst, (size_t)len);
	/*
	 * 4 MiB of heartbeats, each asking for an echo; 10 s at most (times
	 * the kernel's slowness).  A write may wait as long: the module
	 * reads at its own pace, and on the debug kernel a 2 s timeout
	 * stopped the writer after 2.5 MiB, which the module's socket
	 * buffers took whole (0 dropped).
	 */
	len = len > 0 ? k * len : 0;
	t0 = fz_now();
	tv.tv_sec = (time_t)(10 * tscale);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	for (k = 0; !ret && len > 0 && k < 64 && fz_now() - t0 < 10 * tscale; k++) {
		if (write_all(fd, burst, (size_t)len))
			break;
		sent++;
	}
	/*
	 * The module reads what we wrote in its own time: 300 ms was enough
	 * on Debian's kernel, not on the debug kernel (0 dropped yet).
	 */
	t0 = fz_now();
	do
		usleep(100 * 1000);
	while (sysfs_rail("ctrl_dropped") == dropped0 && fz_now() - t0 < 0.3 * tscale);
	tap_ok(!ret && sysfs_rail("ctrl_dropped") > dropped0,
	       "a peer that asks for echoes and reads none: at most max_ctrl_frames queued, %lld dropped (%d KiB of heartbeats sent)",
	       sysfs_rail("ctrl_dropped") - dropped0, sent * (len / 1024));
	close(fd);

	/* The job itself goes on. */
	memset(payload, 0x6b, UNIT);
	cmd.comm_id = comm_id;
	cmd.xfer.addr = (uintptr_t)rbuf;
	cmd.xfer.len = UNIT;
	cmd.xfer.tag = 79;
	cmd.xfer.peer = 1;
	nz_queue_prep(q, NZ_CMD_RECV, &cmd, 80, -1);
	nz_queue_submit(q);
	fd = connect_rail();
	ret = fd >= 0 ? handshake(fd, j, j->secret) : -1;
	data_frame(hdr, 2, 79, UNIT, 0, UNIT);	/* the message after 1 */
	ret = ret || write_all(fd, hdr, sizeof(hdr)) || write_all(fd, payload, UNIT);
	ret = ret || nz_queue_wait(q, &cqe, 15000);
	tap_ok(!ret && cqe.res == UNIT && !memcmp(rbuf, payload, UNIT),
	       "never reads: then a peer that does still delivers (%d)",
	       ret ? ret : cqe.res);
	if (fd >= 0)
		close(fd);
out:
	if (old >= 0)
		nz_param_rw("max_ctrl_frames", old);
	free(burst);
	free(rbuf);
	free(payload);
}

/* One HEARTBEAT (header only): 0 once written. */
static int send_hb(int fd, uint64_t ts, uint64_t seq)
{
	uint8_t hdr[NZ_WIRE_HDR_LEN];
	struct nz_frame f;

	nz_frame_init(&f, NZ_FRAME_HEARTBEAT);
	f.hb.ts_ns = ts;
	f.hb.seq = seq;
	if (nz_wire_encode(&f, &lim, hdr, sizeof(hdr)) != NZ_WIRE_HDR_LEN)
		return -1;
	return write_all(fd, hdr, sizeof(hdr));
}

/* Read up to max frames for the echo of heartbeat ts, into *f: 0 if found. */
static int await_echo(int fd, uint64_t ts, struct nz_frame *f, int max)
{
	uint8_t body[NZ_WIRE_HELLO_LEN];
	int k;

	for (k = 0; k < max; k++) {
		if (read_frame(fd, f, body))
			return -1;
		if (f->type == NZ_FRAME_HEARTBEAT_ACK && f->hb.ts_ns == ts)
			return 0;
	}
	return -1;
}

/* MemFree: a 2 MiB map is kmalloc'ed or vmalloc'ed, pages either way. */
static long long memfree_kb(void)
{
	char line[128];
	long long kb = -1;
	FILE *f = fopen("/proc/meminfo", "r");

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "MemFree:", 8))
			kb = strtoll(line + 8, NULL, 10);
	if (f)
		fclose(f);
	return kb;
}

/*
 * 8. An authenticated peer answers each of 32 posted receives of 64 KiB
 * with a message that claims 1 TiB.  Each receive fails (-EMSGSIZE) and
 * its message is drained, which needs a map of one bit per unit of the
 * claimed total: 2 MiB each.  Those maps were allocated whatever the
 * unexpected budget said and kept until the communicator went (64 MiB for
 * 32; 1,024 at once fit the duplicate window).  Now they are charged to
 * the budget (here 8 MiB), and what does not fit is refused.  Measured as
 * free memory: a map is kmalloc'ed or vmalloc'ed.
 */
static void toolong_maps(const struct job *j, struct nz_queue *q, uint32_t comm_id)
{
	enum { N = 32 };
	long long old = nz_param_rw("unexpected_mb", -1);
	long long refused0 = nz_dev_stat("stats/msgs_refused"), free0, free1, refused;
	uint8_t *rbuf = malloc(UNIT), *payload = calloc(1, UNIT), hdr[NZ_WIRE_HDR_LEN];
	struct nz_sqe cmd = { 0 };
	struct nz_cqe cqe;
	int fd = -1, ret = 0, k, emsgsize = 0, done = 0, other = 0;

	if (old < 0 || nz_param_rw("unexpected_mb", 8) != 8) {
		tap_ok(0, "too long: set-up (unexpected_mb settable)");
		goto out;
	}
	free0 = memfree_kb();
	cmd.comm_id = comm_id;
	cmd.xfer.addr = (uintptr_t)rbuf;
	cmd.xfer.len = UNIT;
	cmd.xfer.peer = 1;
	/* On the communicator's own queue (its file): 8 entries, one at a time. */
	for (k = 0; !ret && k < N; k++) {
		cmd.xfer.tag = 300 + k;		/* tags of their own: sequence 0 */
		ret = nz_queue_prep(q, NZ_CMD_RECV, &cmd, 300 + k, -1) ||
		      nz_queue_submit(q) != 1;
	}
	fd = ret ? -1 : connect_rail();
	ret = ret || fd < 0 || handshake(fd, j, j->secret);
	for (k = 0; !ret && k < N; k++) {
		data_frame(hdr, 100 + k, 300 + k, 1ULL << 40, 0, UNIT);
		ret = write_all(fd, hdr, sizeof(hdr)) || write_all(fd, payload, UNIT);
	}
	for (k = 0; !ret && k < N; k++) {
		if (nz_queue_wait(q, &cqe, (int)(15000 * tscale)))
			break;
		done++;
		if (cqe.res == -EMSGSIZE)
			emsgsize++;
		else
			other = cqe.res;
	}
	free1 = memfree_kb();
	refused = nz_dev_stat("stats/msgs_refused") - refused0;
	tap_ok(!ret && emsgsize == N,
	       "too long: %d of %d receives answered with 1 TiB messages fail with -EMSGSIZE (%d done, other %d)",
	       emsgsize, N, done, other);
	tap_ok(free0 >= 0 && free0 - free1 < 24 << 10,
	       "too long: their drain maps held within the 8 MiB budget (free memory -%lld KiB; 2 MiB each)",
	       free0 - free1);
	tap_ok(refused >= N - 4,
	       "too long: the messages whose map does not fit are refused (%lld of %d)", refused, N);
out:
	if (fd >= 0)
		close(fd);
	if (old >= 0)
		nz_param_rw("unexpected_mb", old);
	free(rbuf);
	free(payload);
}

/*
 * A peer that holds the key sets every bit a heartbeat has: an echo asked
 * for, a redial of every slot (the module is this connection's server:
 * it dials none of them) and the largest queue delay there is.  The echo
 * carries the module's own queue delay, not ours; no redial is counted;
 * the connection stays, and a flood of them changes nothing.
 */
static void hb_bits(const struct job *j)
{
	const uint64_t ts = 0x4e5a4842ULL, bits = NZ_HB_ECHO | NZ_HB_REDIAL_ALL;
	long long redials0 = sysfs_rail("redials");
	struct nz_frame f;
	int fd, ret, k;

	fd = connect_rail();
	ret = fd >= 0 ? handshake(fd, j, j->secret) : -1;
	ret = ret || send_hb(fd, ts, bits | NZ_HB_LATE(0xffff));
	fz_short_timeout(fd, (int)(5000 * tscale));
	ret = ret || await_echo(fd, ts, &f, 1000);
	tap_ok(!ret && (f.hb.seq & ~NZ_HB_LATE(0xffff)) == bits &&
	       NZ_HB_LATE_MS(f.hb.seq) <= NZ_LATE_MAX_MS,
	       "every heartbeat bit set: echoed, with the module's own queue delay (%u ms, not 65535)",
	       ret ? 0 : NZ_HB_LATE_MS(f.hb.seq));
	/* 2,000 more, no echo asked: each one a redial of every slot. */
	for (k = 0; !ret && k < 2000; k++)
		ret = send_hb(fd, (uint64_t)k, NZ_HB_REDIAL_ALL | NZ_HB_LATE(0xffff));
	/* Still there: one more asks for an echo, which comes. */
	ret = ret || send_hb(fd, ts + 1, bits);
	ret = ret || await_echo(fd, ts + 1, &f, 100000);
	tap_ok(!ret && sysfs_rail("redials") == redials0,
	       "2000 heartbeats asking to redial every slot: connection kept, %lld redials (0: the module dials none here)",
	       sysfs_rail("redials") - redials0);
	if (fd >= 0)
		close(fd);
}

int main(int argc, char **argv)
{
	struct nz_queue_opts qo = { .entries = 8 };
	struct nz_comm_create cc = { 0 };
	struct nz_comm_addr addrs[2] = { 0 };
	struct nz_comm_wait w = { 0 };
	uint8_t hdr[NZ_WIRE_HDR_LEN], junk[NZ_WIRE_HDR_LEN];
	uint8_t *area, *rbuf, *payload;
	long long refused0, errors0;
	struct nz_queue *q;
	struct nz_cqe cqe;
	struct nz_sqe cmd = { 0 };
	struct job j;
	uint8_t wrong[NZ_SECRET_LEN];
	bool canary_ok = true;
	int fd, ret, i;
	uint64_t frames = 0, seed = 0x4e5a57495245ULL, silent = 0;
	in_addr_t src = 0;

	/*
	 * The module closes a connection on the first frame it rejects (a
	 * fuzzed DATA out of its window, say) while we may still be writing
	 * the rest of a batch: that write must fail with EPIPE, not kill us
	 * (one CI run: "wire fuzz: exit status 141").
	 */
	signal(SIGPIPE, SIG_IGN);
	tscale = nz_time_scale();

	if (argc < 4)
		return 2;
	for (i = 4; i < argc; i += 2) {
		if (!strcmp(argv[i], "-D")) {	/* the check is always on now */
			i--;
			continue;
		}
		if (i + 1 >= argc)
			return 2;
		if (!strcmp(argv[i], "-n"))
			frames = strtoull(argv[i + 1], NULL, 0);
		else if (!strcmp(argv[i], "-s"))
			seed = strtoull(argv[i + 1], NULL, 0);
		else if (!strcmp(argv[i], "-x"))
			silent = strtoull(argv[i + 1], NULL, 0);
		else if (!strcmp(argv[i], "-S"))
			src = inet_addr(argv[i + 1]);
		else
			return 2;
	}
	rail = argv[1];
	target.sin_family = AF_INET;
	inet_pton(AF_INET, argv[2], &target.sin_addr);
	target.sin_port = htons((uint16_t)atoi(argv[3]));
	j.id = 0x4e5a4f5354494c45ULL;
	j.inc = 0x4e5a494e43000001ULL;
	getrandom(j.secret, sizeof(j.secret), 0);
	memcpy(wrong, j.secret, sizeof(wrong));
	wrong[0] ^= 1;

	/* 1. Garbage where a HELLO should be. */
	refused0 = sysfs_rail("handshakes_refused");
	fd = connect_rail();
	memset(junk, 0xa5, sizeof(junk));
	ret = fd >= 0 && !read_all(fd, hdr, sizeof(hdr)) &&
	      !write_all(fd, junk, sizeof(junk));
	tap_ok(ret && closed_by_peer(fd), "garbage handshake: connection closed");
	close(fd);
	tap_ok(sysfs_rail_wait("handshakes_refused", refused0 + 1) == refused0 + 1,
	       "garbage handshake: counted as refused");

	/* A communicator of our own that expects rank 1 on this rail. */
	if (nz_queue_open(&q, &qo)) {
		tap_ok(0, "open /dev/nezha");
		return tap_exit();
	}
	cc.job_id = j.id;
	memcpy(cc.secret, j.secret, sizeof(cc.secret));
	cc.rank = 0;
	cc.size = 2;
	cc.nrails = 1;
	cc.unit = UNIT;
	cc.timeout_ms = 60000;
	snprintf(cc.rails[0], sizeof(cc.rails[0]), "%s", rail);
	addrs[1].addr = target.sin_addr.s_addr;
	addrs[1].port = htons(1);	/* never used: rank 1 connects to us */
	cc.addrs = (uintptr_t)addrs;
	ret = ioctl(nz_queue_fd(q), NZ_IOC_COMM_CREATE, &cc);
	tap_ok(ret == 0 && cc.comm_id, "communicator created (%s)",
	       ret ? strerror(errno) : "ok");

	/* 2. The right job, the wrong secret. */
	fd = connect_rail();
	ret = fd >= 0 ? handshake(fd, &j, wrong) : -1;
	tap_ok(ret == -2, "HELLO with a wrong secret: no WELCOME (%d)", ret);
	close(fd);
	tap_ok(sysfs_rail_wait("handshakes_refused", refused0 + 2) == refused0 + 2,
	       "wrong secret: counted as refused (%lld)",
	       sysfs_rail("handshakes_refused") - refused0);

	/* A posted receive with canaries on both sides. */
	area = malloc(3 * UNIT);
	rbuf = area + UNIT;
	payload = malloc(UNIT);
	memset(area, 0x5c, 3 * UNIT);
	for (i = 0; i < UNIT; i++)
		payload[i] = (uint8_t)(i * 7 + 3);
	cmd.comm_id = cc.comm_id;
	cmd.xfer.addr = (uintptr_t)rbuf;
	cmd.xfer.len = UNIT;
	cmd.xfer.tag = 5;
	cmd.xfer.peer = 1;
	nz_queue_prep(q, NZ_CMD_RECV, &cmd, 77, -1);
	nz_queue_submit(q);

	/* 3. Authenticated, then a frame whose offset lies past the end. */
	errors0 = sysfs_rail("errors");
	fd = connect_rail();
	ret = fd >= 0 ? handshake(fd, &j, j.secret) : -1;
	tap_ok(ret == 0, "handshake with the right secret (%d)", ret);
	w.comm_id = cc.comm_id;
	w.timeout_ms = 5000;
	tap_ok(!ioctl(nz_queue_fd(q), NZ_IOC_COMM_WAIT, &w) && w.up == 1,
	       "the module counts the connection up");
	data_frame(hdr, 1, 5, UNIT, 0, UNIT);
	put_be64(hdr + DATA_OFF_OFFSET, 3 * UNIT);	/* outside */
	write_all(fd, hdr, sizeof(hdr));
	write_all(fd, payload, UNIT);
	tap_ok(closed_by_peer(fd), "DATA past the end of the message: closed");
	close(fd);

	/* 4. Authenticated, then a frame breaking the chunking rule. */
	fd = connect_rail();
	ret = fd >= 0 ? handshake(fd, &j, j.secret) : -1;
	data_frame(hdr, 1, 5, UNIT, 0, UNIT);
	put_be64(hdr + DATA_OFF_OFFSET, 100);		/* misaligned */
	write_all(fd, hdr, sizeof(hdr));
	write_all(fd, payload, 100);
	tap_ok(!ret && closed_by_peer(fd), "misaligned DATA offset: closed");
	close(fd);

	/* 5. Authenticated, then a header of garbage. */
	fd = connect_rail();
	ret = fd >= 0 ? handshake(fd, &j, j.secret) : -1;
	write_all(fd, junk, sizeof(junk));
	tap_ok(!ret && closed_by_peer(fd), "garbage frame header: closed");
	close(fd);

	usleep(300 * 1000);
	tap_ok(sysfs_rail("errors") >= errors0 + 3,
	       "each malformed frame counted as a connection error (+%lld)",
	       sysfs_rail("errors") - errors0);
	tap_ok(nz_queue_peek(q, &cqe) == -EAGAIN,
	       "the posted receive was not completed by any of it");
	for (i = 0; i < 3 * UNIT; i++)
		if ((i < UNIT || i >= 2 * UNIT) && area[i] != 0x5c)
			canary_ok = false;
	tap_ok(canary_ok && rbuf[0] == 0x5c,
	       "no byte written into or around the receive buffer");

	/* 6. A well-formed message still lands, and is acknowledged. */
	fd = connect_rail();
	ret = fd >= 0 ? handshake(fd, &j, j.secret) : -1;
	data_frame(hdr, 1, 5, UNIT, 0, UNIT);
	ret = ret || write_all(fd, hdr, sizeof(hdr)) ||
	      write_all(fd, payload, UNIT);
	ret = ret || nz_queue_wait(q, &cqe, 8000);
	tap_ok(!ret && cqe.user_data == 77 && cqe.res == UNIT &&
	       !memcmp(rbuf, payload, UNIT),
	       "then a well-formed message is delivered intact (res %d)",
	       cqe.res);
	canary_ok = true;
	for (i = 0; i < 3 * UNIT; i++)
		if ((i < UNIT || i >= 2 * UNIT) && area[i] != 0x5c)
			canary_ok = false;
	tap_ok(canary_ok, "and nothing around the buffer changed");
	{
		struct nz_frame f;
		uint8_t body[NZ_WIRE_HELLO_LEN];

		/* Heartbeats may come first: the module sends them. */
		for (i = 0; i < 1000; i++) {
			ret = read_frame(fd, &f, body);
			if (ret || f.type != NZ_FRAME_HEARTBEAT)
				break;
		}
		tap_ok(!ret && f.type == NZ_FRAME_ACK && f.ack.msg_id == 1 &&
		       f.ack.len == UNIT, "and acknowledged");
	}
	close(fd);
	never_reads(&j, q, cc.comm_id);
	hb_bits(&j);
	toolong_maps(&j, q, cc.comm_id);
	if (frames)
		fz_phase(&j, q, cc.comm_id, frames, seed);
	if (silent)
		silent_probe(&j, q, cc.comm_id, (unsigned int)silent, src);
	ret = ioctl(nz_queue_fd(q), NZ_IOC_COMM_DESTROY, &cc.comm_id);
	tap_ok(ret == 0, "communicator destroyed");
	nz_queue_close(q);
	free(area);
	free(payload);
	tap_plan(tap_n);
	return tap_exit();
}
