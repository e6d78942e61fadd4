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
 * those must close the connection, and be counted; no other may.  The
 * well-formed frames carry messages the fuzzer receives itself, and each
 * must end as its model says (intact, or withdrawn); afterwards a message
 * from the same peer must still land intact.  Deterministic per seed.
 * With -x, N strangers that connect and stay silent (from SRC, another
 * address of this guest) must not keep the job's own peer from connecting
 * and delivering within a second.
 * Links the module's own wire codec (kmod/wire.c); HMAC-SHA256 comes from
 * the kernel through AF_ALG.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
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

#define DATA_OFF_OFFSET	40	/* DATA header: offset field (wire.rst) */
#define UNIT		65536

static const char *rail;
static struct sockaddr_in target;
static const struct nz_wire_limits lim = { .max_msg = 1ULL << 40,
					   .max_payload = UNIT };

static long long sysfs_rail(const char *what)
{
	char path[256], line[64];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/nezha/rail-%s/stats/%s",
		 rail, what);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fgets(line, sizeof(line), f))
		v = atoll(line);
	fclose(f);
	return v;
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

/* The server closes on us within 8 s: read until EOF or reset. */
static bool closed_by_peer(int fd)
{
	char buf[256];
	ssize_t n;

	do {
		n = read(fd, buf, sizeof(buf));
	} while (n > 0);
	return n == 0 || errno == ECONNRESET;
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

static double fz_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
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

/*
 * The fuzzer's model of its messages.  Each DATA frame of the stream
 * belongs to a message the fuzzer started: an id of its own (ids follow
 * each other with no hole, as an honest sender's do: a hole holds the
 * module's duplicate window, and 1024 ids past it every frame is out of
 * range), a tag of 100..103 and that tag's next sequence number.  Every
 * message gets a receive, posted in sequence before or after its frames
 * (so both the posted and the unexpected path are taken), and its outcome
 * is known: the whole message intact when every chunk of it went out in a
 * frame the module takes, otherwise -ECONNABORTED, for the fuzzer
 * withdraws (ABORT) each message it did not finish once its connection is
 * over.  Without the withdrawals and receives the module kept every
 * unfinished message, its window stopped, and from then on the stream was
 * mostly refused: 78 of the 89 connections without a malformed frame were
 * closed (2026-12-04).
 */
#define FZ_TAGS		4
#define FZ_OPEN		512	/* messages not yet resolved */
#define FZ_RECENT	64

struct fz_msg {
	uint64_t id, tag, seq, total;
	unsigned int sent;	/* bitmap of the chunks gone out (<= 3) */
	unsigned int conn;	/* the connection it was started on */
	bool posted;		/* its receive is posted */
	bool withdraw;		/* ABORT it (until ABORT_ACK) */
	bool aborted;		/* ABORT_ACK seen */
	bool uncertain;		/* its connection ended unforeseen */
	uint8_t *buf;
};

static struct {
	struct fz_msg m[FZ_OPEN];
	unsigned int n;
	uint64_t next_id;
	uint64_t next_seq[FZ_TAGS];	/* next tag_seq of each tag */
	uint64_t recent[FZ_RECENT];	/* resolved ids: duplicates drain */
	unsigned int nrecent;
	struct nz_queue *q;
	uint32_t comm_id;
} fzm;

static struct {
	uint64_t frames, conns, bad_pred, closed_bad, closed_good, open_bad;
	uint64_t hs_conns, hs_closed, hs_open;
	uint64_t delivered, withdrawn, wrong, stalls, unmodelled;
	char first[160];
} fz;

static char fz_why[128];	/* what ended the last connection */

static void fz_fail(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

static void fz_fail(const char *fmt, ...)
{
	va_list ap;

	if (fz.first[0])
		return;
	va_start(ap, fmt);
	vsnprintf(fz.first, sizeof(fz.first), fmt, ap);
	va_end(ap);
}

static void fz_short_timeout(int fd, int ms)
{
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

static int fz_chunks(uint64_t total)
{
	return total ? (int)((total + UNIT - 1) / UNIT) : 1;
}

/* Every chunk of it went out in a frame the module took. */
static bool fz_whole(const struct fz_msg *m)
{
	return m->sent == (1u << fz_chunks(m->total)) - 1;
}

static struct fz_msg *fz_find(uint64_t id)
{
	for (unsigned int i = 0; i < fzm.n; i++)
		if (fzm.m[i].id == id)
			return &fzm.m[i];
	return NULL;
}

/* Post the receives of tag's messages up to and including seq. */
static void fz_post(uint64_t tag, uint64_t seq)
{
	for (unsigned int i = 0; i < fzm.n; i++) {
		struct fz_msg *m = &fzm.m[i];
		struct nz_sqe cmd = { 0 };

		if (m->tag != tag || m->seq > seq || m->posted)
			continue;
		m->buf = malloc(m->total ? m->total : 1);
		if (!m->buf)
			continue;
		memset(m->buf, 0xee, m->total ? m->total : 1);
		cmd.comm_id = fzm.comm_id;
		cmd.xfer.addr = (uintptr_t)m->buf;
		cmd.xfer.len = m->total;
		cmd.xfer.tag = m->tag;
		cmd.xfer.peer = 1;
		if (nz_queue_prep(fzm.q, NZ_CMD_RECV, &cmd, m->id, -1) == -EBUSY) {
			nz_queue_submit(fzm.q);
			nz_queue_prep(fzm.q, NZ_CMD_RECV, &cmd, m->id, -1);
		}
		m->posted = true;
	}
	nz_queue_submit(fzm.q);
}

/* A receive completed: check it against the model, forget the message. */
static void fz_resolve(const struct nz_cqe *cqe)
{
	struct fz_msg *m = fz_find(cqe->user_data);
	bool whole;

	if (!m) {
		fz.wrong++;
		fz_fail("a completion for no message (%#" PRIx64 ", %d)",
			cqe->user_data, cqe->res);
		return;
	}
	whole = fz_whole(m) && (!m->withdraw || m->uncertain);
	if (cqe->res >= 0) {
		bool ok = whole && (uint64_t)cqe->res == m->total;

		for (uint64_t i = 0; ok && i < m->total; i++)
			ok = m->buf[i] == (uint8_t)m->id;
		fz.delivered++;
		if (!ok) {
			fz.wrong++;
			fz_fail("message %" PRIu64 " (%" PRIu64 " B, chunks %#x%s): delivered %d B, not intact",
				m->id, m->total, m->sent,
				m->withdraw ? ", withdrawn" : "", cqe->res);
		}
	} else if (cqe->res == -ECONNABORTED && (!whole || m->uncertain)) {
		fz.withdrawn++;
	} else {
		fz.wrong++;
		fz_fail("message %" PRIu64 " (%" PRIu64 " B, chunks %#x%s): receive ended with %s",
			m->id, m->total, m->sent,
			m->withdraw ? ", withdrawn" : "", strerror(-cqe->res));
	}
	fzm.recent[fzm.nrecent++ % FZ_RECENT] = m->id;
	free(m->buf);
	*m = fzm.m[--fzm.n];
}

/* Reap completions; wait up to ms for the last one expected, if any. */
static void fz_reap(int ms)
{
	struct nz_cqe cqe;
	double end = fz_now() + ms / 1000.0;

	while (nz_queue_peek(fzm.q, &cqe) == 0)
		fz_resolve(&cqe);
	for (;;) {
		unsigned int i, due = 0;

		for (i = 0; i < fzm.n; i++)
			due += fzm.m[i].posted &&
			       (fzm.m[i].aborted ||
				(fz_whole(&fzm.m[i]) && !fzm.m[i].withdraw));
		if (!due || fz_now() >= end)
			break;
		if (nz_queue_wait(fzm.q, &cqe, 100) == 0)
			fz_resolve(&cqe);
	}
}

/* A new message: id, tag and sequence in order; its receive now or later. */
static struct fz_msg *fz_start(struct fz_rng *r, uint64_t total)
{
	struct fz_msg *m;

	if (fzm.n == FZ_OPEN)
		return NULL;
	m = &fzm.m[fzm.n++];
	memset(m, 0, sizeof(*m));
	m->id = fzm.next_id++;
	m->tag = 100 + fz_below(r, FZ_TAGS);
	m->seq = fzm.next_seq[m->tag - 100]++;
	m->total = total;
	m->conn = (unsigned int)fz.conns;
	if (fz_below(r, 2))
		fz_post(m->tag, m->seq);
	return m;
}

static size_t fz_data(uint8_t *out, const struct fz_msg *m, uint64_t off)
{
	struct nz_frame f;

	nz_frame_init(&f, NZ_FRAME_DATA);
	f.data.msg_id = m->id;
	f.data.tag = m->tag;
	f.data.tag_seq = m->seq;
	f.data.total = m->total;
	f.data.offset = off;
	f.len = (uint32_t)nz_wire_chunk_len(m->total, off, 1, UNIT);
	if (nz_wire_encode(&f, &lim, out, NZ_WIRE_HDR_LEN) != NZ_WIRE_HDR_LEN)
		return 0;
	memset(out + NZ_WIRE_HDR_LEN, (uint8_t)m->id, f.len);
	return NZ_WIRE_HDR_LEN + f.len;
}

/*
 * One well-formed frame after the handshake into out (header and
 * payload): a chunk of a new message or of one of this connection's
 * (again, as a retransmission does), a frame of a message already over
 * (drained, whatever it says), acknowledgments of messages never sent,
 * heartbeats.  Sets *m to the message whose chunk it carries.
 */
static size_t fz_frame(struct fz_rng *r, uint8_t *out, struct fz_msg **mp)
{
	struct nz_frame f;
	unsigned int k = fz_below(r, 100);

	*mp = NULL;
	if (k < 30 || (k < 45 && !fzm.n)) {
		uint64_t total = fz_below(r, 10) ? fz_below(r, 2048) :
				 fz_below(r, 3 * UNIT);
		struct fz_msg *m = fz_start(r, total);
		int c = fz_chunks(total);

		if (!m)
			return 0;
		*mp = m;
		return fz_data(out, m, total ? fz_below(r, (uint32_t)c) * (uint64_t)UNIT : 0);
	}
	if (k < 40) {	/* a chunk of an unresolved message */
		struct fz_msg *m = &fzm.m[fz_below(r, fzm.n)];

		if (m->withdraw)
			return 0;
		*mp = m;
		return fz_data(out, m, m->total ? fz_below(r, (uint32_t)fz_chunks(m->total)) *
					     (uint64_t)UNIT : 0);
	}
	if (k < 45) {	/* a frame of a message over: anything goes */
		struct fz_msg old = { .tag = 100 + fz_below(r, FZ_TAGS),
				      .seq = fz_rnd(r),
				      .total = fz_below(r, 3 * UNIT) };

		if (!fzm.nrecent)
			return 0;
		old.id = fzm.recent[fz_below(r, fzm.nrecent < FZ_RECENT ?
						  fzm.nrecent : FZ_RECENT)];
		return fz_data(out, &old, old.total ? fz_below(r, (uint32_t)fz_chunks(old.total)) *
						      (uint64_t)UNIT : 0);
	}
	if (k < 65) {
		nz_frame_init(&f, NZ_FRAME_ACK);
		f.ack.msg_id = 1 + fz_below(r, 1000);
		f.ack.offset = (uint64_t)fz_below(r, 4) * UNIT;
		f.ack.len = 1 + fz_below(r, UNIT);
	} else if (k < 90) {
		nz_frame_init(&f, NZ_FRAME_HEARTBEAT);
		f.hb.ts_ns = fz_rnd(r);
		f.hb.seq = fz_below(r, 4);
	} else {
		nz_frame_init(&f, NZ_FRAME_HEARTBEAT_ACK);
		f.hb.ts_ns = fz_rnd(r);
		f.hb.seq = fz_rnd(r);
	}
	if (nz_wire_encode(&f, &lim, out, NZ_WIRE_HDR_LEN) != NZ_WIRE_HDR_LEN)
		return 0;
	return NZ_WIRE_HDR_LEN;
}

/*
 * Would the module close on this header (its own codec, and its rules)?
 * A frame the model cannot follow (a DATA or ABORT frame the mutation left
 * valid: a message of unknown id, tag or length) is not sent: *unmodelled.
 */
static bool fz_malformed(const uint8_t *hdr, struct nz_frame *f, bool *unmodelled)
{
	*unmodelled = false;
	if (nz_wire_decode_hdr(hdr, &lim, f))
		return true;
	if (!nz_wire_type_expected(NZ_WS_ESTABLISHED, f->type))
		return true;
	if (f->type == NZ_FRAME_CLOSE)
		return true;
	if (f->type == NZ_FRAME_DATA &&
	    !nz_wire_chunk_ok(f->data.total, f->data.offset, f->len, UNIT))
		return true;
	*unmodelled = f->type == NZ_FRAME_DATA || f->type == NZ_FRAME_ABORT;
	return false;
}

/* ABORT every message marked for it and not yet answered. */
static size_t fz_withdrawals(uint8_t *out, size_t cap)
{
	size_t n = 0;

	for (unsigned int i = 0; i < fzm.n && n + NZ_WIRE_HDR_LEN <= cap; i++) {
		struct fz_msg *m = &fzm.m[i];
		struct nz_frame f;

		if (!m->withdraw || m->aborted)
			continue;
		nz_frame_init(&f, NZ_FRAME_ABORT);
		f.abort.msg_id = m->id;
		f.abort.tag = m->tag;
		f.abort.tag_seq = m->seq;
		f.abort.reason = ETIMEDOUT;
		if (nz_wire_encode(&f, &lim, out + n, NZ_WIRE_HDR_LEN) == NZ_WIRE_HDR_LEN)
			n += NZ_WIRE_HDR_LEN;
	}
	return n;
}

/*
 * The end of a connection with no malformed frame: withdraw what it left
 * unfinished, then ask for a heartbeat echo and read until it comes.  The
 * module handles a connection's frames in order, so the echo says it took
 * every one; on the way its ABORT_ACKs are noted.  0: echoed; -1: closed;
 * -2: no echo within ms.
 */
static int fz_barrier(int fd, int ms)
{
	static uint8_t out[FZ_OPEN * NZ_WIRE_HDR_LEN + NZ_WIRE_HDR_LEN];
	uint8_t body[NZ_WIRE_HELLO_LEN];
	uint64_t ts = 0x4e5a000000000000ULL | fz.conns;
	struct nz_frame f;
	size_t n;

	for (unsigned int i = 0; i < fzm.n; i++)
		if (!fz_whole(&fzm.m[i]))
			fzm.m[i].withdraw = true;
	n = fz_withdrawals(out, sizeof(out) - NZ_WIRE_HDR_LEN);
	nz_frame_init(&f, NZ_FRAME_HEARTBEAT);
	f.hb.ts_ns = ts;
	f.hb.seq = NZ_HB_ECHO;
	if (nz_wire_encode(&f, &lim, out + n, NZ_WIRE_HDR_LEN) != NZ_WIRE_HDR_LEN)
		return -1;
	n += NZ_WIRE_HDR_LEN;
	if (write_all(fd, out, n))
		return -1;
	fz_short_timeout(fd, ms);
	for (;;) {
		uint8_t hdr[NZ_WIRE_HDR_LEN];

		errno = 0;
		if (read_all(fd, hdr, sizeof(hdr)))
			return errno == EAGAIN || errno == EWOULDBLOCK ? -2 : -1;
		if (nz_wire_decode_hdr(hdr, &lim, &f) || f.len > NZ_WIRE_HELLO_LEN ||
		    read_all(fd, body, f.len) || nz_wire_decode_body(&f, body)) {
			snprintf(fz_why, sizeof(fz_why),
				 "a frame from the module we cannot read: type %u len %u",
				 hdr[3], f.len);
			return -1;
		}
		if (f.type == NZ_FRAME_ABORT_ACK) {
			struct fz_msg *m = fz_find(f.abort.msg_id);

			if (m)
				m->aborted = true;
		} else if (f.type == NZ_FRAME_HEARTBEAT_ACK && f.hb.ts_ns == ts) {
			return 0;
		}
	}
}

/* Read until the module closes the connection, for at most ms. */
static bool fz_closed_within(int fd, int ms)
{
	double end = fz_now() + ms / 1000.0;
	char buf[4096];
	ssize_t n;

	fz_short_timeout(fd, 200);
	while (fz_now() < end) {
		n = read(fd, buf, sizeof(buf));
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return true;
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return true;
	}
	return false;
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

/* Messages of a connection that ended unforeseen: any outcome will do. */
static void fz_uncertain(unsigned int conn)
{
	for (unsigned int i = 0; i < fzm.n; i++)
		if (fzm.m[i].conn == conn) {
			fzm.m[i].uncertain = true;
			fzm.m[i].withdraw = true;
		}
}

/* The peer that knows the secret: frame streams, some ending in a bad one. */
static void fz_auth(struct fz_rng *r, const struct job *j, uint64_t frames,
		    double ts)
{
	static uint8_t buf[1 << 20];
	struct timeval tv = { .tv_sec = (time_t)(10 * ts) };

	while (fz.frames < frames) {
		unsigned int k, nframes = 1 + fz_below(r, 200);
		unsigned int conn = (unsigned int)fz.conns;
		bool bad = false, failed = false, last_mutated = false;
		unsigned int last_type = 0;
		size_t len;
		int fd = connect_rail(), ret;

		if (fd < 0 || handshake(fd, j, j->secret)) {
			if (fd >= 0)
				close(fd);
			fz_fail("handshake %" PRIu64 " failed", fz.conns);
			fz.open_bad++;
			return;
		}
		fz.conns++;
		/* A module that stops reading must not hang us: a stall. */
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		fz_why[0] = 0;
		/* What the connection before left unfinished goes first. */
		len = fz_withdrawals(buf, sizeof(buf) / 4);
		for (k = 0; k < nframes && !bad && !failed; k++) {
			uint8_t orig[NZ_WIRE_HDR_LEN];
			bool unmodelled = false, mutated = false;
			struct fz_msg *m;
			struct nz_frame f;
			size_t n;

			if (len + NZ_WIRE_HDR_LEN + UNIT > sizeof(buf)) {
				failed = write_all(fd, buf, len) != 0;
				/* ACKs and echoes: read, so they never fill up */
				while (recv(fd, orig, sizeof(orig), MSG_DONTWAIT) > 0)
					;
				len = 0;
				continue;
			}
			n = fz_frame(r, buf + len, &m);
			if (!n)
				continue;
			if (k == nframes - 1 && fz_below(r, 3)) {
				memcpy(orig, buf + len, sizeof(orig));
				fz_mutate(r, buf + len);
				mutated = memcmp(orig, buf + len, sizeof(orig)) != 0;
				bad = fz_malformed(buf + len, &f, &unmodelled);
				if (unmodelled) {
					memcpy(buf + len, orig, sizeof(orig));
					fz.unmodelled++;
				} else {
					/* the payload the damaged header announces, if sane */
					if (!bad)
						n = NZ_WIRE_HDR_LEN + (f.len <= UNIT ? f.len : 0);
					m = NULL;
				}
			}
			if (m && !nz_wire_decode_hdr(buf + len, &lim, &f))
				m->sent |= 1u << (f.data.offset / UNIT);
			last_type = buf[len + 3];
			last_mutated = mutated && !unmodelled;
			len += n;
			fz.frames++;
		}
		if (failed || write_all(fd, buf, len)) {
			ret = errno == EAGAIN || errno == EWOULDBLOCK ? -2 : -1;
		} else if (bad) {
			fz.bad_pred++;
			if (fz_closed_within(fd, (int)(3000 * ts))) {
				fz.closed_bad++;
			} else {
				fz.open_bad++;
				fz_fail("connection %u: a malformed frame (type %u) did not close it",
					conn, last_type);
			}
			ret = 0;
		} else {
			ret = fz_barrier(fd, (int)(10000 * ts));
		}
		if (ret == -1) {
			fz.closed_good++;
			fz_fail("connection %u closed without a malformed frame (%s; its last frame type %u%s)",
				conn, fz_why[0] ? fz_why : "closed", last_type,
				last_mutated ? ", mutated" : "");
		} else if (ret == -2) {
			fz.stalls++;
			fz_fail("connection %u: the module stopped reading for %.0f s", conn,
				10 * ts);
		}
		close(fd);
		if (ret)
			fz_uncertain(conn);
		/* The next connection withdraws what this one left unfinished. */
		for (k = 0; k < fzm.n; k++)
			if (!fz_whole(&fzm.m[k]))
				fzm.m[k].withdraw = true;
		/* Every receive posted now: a message that came first waits. */
		for (k = 0; k < FZ_TAGS; k++)
			fz_post(100 + k, UINT64_MAX);
		fz_reap((int)(5000 * ts));
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
	double t0 = fz_now(), t1, ts = 1;
	bool canary_ok = true;
	int fd, ret, i;

	/* NZ_TIME_SCALE: how much slower this guest's kernel is (vm.sh). */
	if (getenv("NZ_TIME_SCALE") && atof(getenv("NZ_TIME_SCALE")) >= 1)
		ts = atof(getenv("NZ_TIME_SCALE"));
	fzm.q = q;
	fzm.comm_id = comm_id;
	fzm.next_id = 3;	/* 1 and 2 went before */
	fz_rnd(&r);
	fz_unauth(&r, j, unauth);
	tap_ok(fz.hs_open == 0 && fz.hs_conns > 0,
	       "wire fuzz, no secret: %" PRIu64 " mutated HELLOs, every one refused (%" PRIu64 " closed)%s%s",
	       fz.frames, fz.hs_closed, fz.first[0] ? ": " : "", fz.first);
	tap_ok(sysfs_rail("handshakes_refused") - refused0 >= (long long)fz.hs_closed,
	       "wire fuzz, no secret: refusals counted (+%lld for %" PRIu64 ")",
	       sysfs_rail("handshakes_refused") - refused0, fz.hs_closed);
	fz.first[0] = 0;
	fz_auth(&r, j, frames, ts);
	/* Withdraw what the last connection left, then every receive ends. */
	fd = connect_rail();
	if (fd < 0 || handshake(fd, j, j->secret) || fz_barrier(fd, (int)(10000 * ts)))
		fz_fail("the connection that withdraws the last messages failed");
	if (fd >= 0)
		close(fd);
	fz_reap((int)(10000 * ts));
	t1 = fz_now();
	tap_ok(fz.open_bad == 0,
	       "wire fuzz, with the secret: %" PRIu64 " frames in %" PRIu64 " connections, each of the %" PRIu64 " malformed closed its connection%s%s",
	       fz.frames - unauth, fz.conns, fz.bad_pred, fz.first[0] ? ": " : "", fz.first);
	tap_ok(fz.closed_good == 0 && fz.stalls == 0,
	       "wire fuzz: no connection without a malformed frame closed (%" PRIu64 ") or stalled (%" PRIu64 ")",
	       fz.closed_good, fz.stalls);
	tap_ok(fz.wrong == 0 && fzm.n == 0 && fz.delivered > 0 && fz.withdrawn > 0,
	       "wire fuzz: every message ended as the model says: %" PRIu64 " delivered intact, %" PRIu64 " withdrawn (ECONNABORTED), %" PRIu64 " wrong, %u never ended",
	       fz.delivered, fz.withdrawn, fz.wrong, fzm.n);
	tap_diag("wire fuzz: ids %d..%" PRIu64 ", %" PRIu64 " mutated frames the model cannot follow sent unmutated",
		 3, fzm.next_id - 1, fz.unmodelled);
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
	data_frame(hdr, fzm.next_id, 77, UNIT, 0, UNIT);	/* the next id */
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
	/* 4 MiB of heartbeats, each asking for an echo; 10 s at most. */
	len = len > 0 ? k * len : 0;
	t0 = fz_now();
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	for (k = 0; !ret && len > 0 && k < 64 && fz_now() - t0 < 10; k++) {
		if (write_all(fd, burst, (size_t)len))
			break;
		sent++;
	}
	usleep(300 * 1000);
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

int main(int argc, char **argv)
{
	struct nz_queue_opts qo = { .entries = 256 };
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
	tap_ok(sysfs_rail("handshakes_refused") == refused0 + 1,
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
	tap_ok(sysfs_rail("handshakes_refused") == refused0 + 2,
	       "wrong secret: counted as refused");

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
