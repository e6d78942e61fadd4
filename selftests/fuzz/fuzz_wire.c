// SPDX-License-Identifier: GPL-2.0
/*
 * Fuzz target for the wire codec and the receive bookkeeping.
 *
 * The input is what one rail connection receives, preceded by two bytes of
 * set-up.  Frames are decoded the way the TCP receiver does (header, then
 * len bytes), run through the handshake state machine, and DATA frames go
 * through nz_seqwin and nz_reasm, checked against a simple model:
 *
 *   - every decoded frame re-encodes to exactly the bytes it came from;
 *   - a decoded DATA frame is inside its message and the job's limits;
 *   - nz_reasm_add() accepts a frame iff it obeys the chunking rule and is
 *     all new (NEW) or all old (DUP); nothing out of range is accepted;
 *   - received bytes and nz_reasm_done() match the model after every frame,
 *     so completion comes exactly when every byte has been seen;
 *   - a completed message is marked in the window exactly once.
 * Any violation aborts.
 *
 * Set-up bytes:
 *   byte 0: bits 0-3 unit = 4 KiB << (n % 11); bit 4 DATA payload inline
 *           (else elided, as if placed by RDMA); bits 5-6 initial state
 *   byte 1: bits 0-1 max_payload = unit << n; bits 2-7 trimmed off max_msg
 *
 * Build from the top directory with this file, kmod/wire.c and
 * kmod/reasm.c, and -Ikmod:
 *   libFuzzer:  clang -std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined
 *   standalone: cc -std=gnu11 -DNZ_FUZZ_STANDALONE
 * The standalone binary replays files, directories or stdin, and writes a
 * seed corpus with "-s DIR".
 */
#include <stdio.h>
#include <stdlib.h>

#include "wire.h"
#include "reasm.h"

#define FZ_MAX_UNITS	1024	/* per message: bounds the bitmaps */
#define FZ_SLOTS	4	/* messages in progress at once */

#define FZ_ASSERT(cond) do {						\
	if (!(cond)) {							\
		fprintf(stderr, "fuzz_wire: %s:%d: %s\n",		\
			__FILE__, __LINE__, #cond);			\
		abort();						\
	}								\
} while (0)

struct fz_msg {
	bool		used;
	u64		id, tag, tag_seq, total;
	struct nz_reasm	r;
	u64		map[FZ_MAX_UNITS / 64];
	bool		seen[FZ_MAX_UNITS];	/* model: units seen */
	u64		bytes;			/* model: bytes seen */
	bool		zero_seen;
};

struct fz_conn {
	struct nz_wire_limits	lim;
	u32			unit;
	bool			inline_payload;
	enum nz_wire_state	st;
	struct nz_seqwin	win;
	struct fz_msg		msg[FZ_SLOTS];
	u64			payload_sum;
};

/* The chunking rule, written again from the document, with division. */
static bool model_chunk_ok(u64 total, u64 off, u64 len, u32 unit)
{
	if (total == 0)
		return off == 0 && len == 0;
	if (off >= total || len == 0 || len > total - off)
		return false;
	if (off % unit)
		return false;
	return off + len == total || len % unit == 0;
}

static int model_add(struct fz_msg *m, u64 off, u64 len, u32 unit)
{
	u64 first, n, i, seen = 0;

	if (!model_chunk_ok(m->total, off, len, unit))
		return -EPROTO;
	if (!m->total) {
		if (m->zero_seen)
			return NZ_REASM_DUP;
		m->zero_seen = true;
		return NZ_REASM_NEW;
	}
	first = off / unit;
	n = (len + unit - 1) / unit;
	FZ_ASSERT(first + n <= FZ_MAX_UNITS);
	for (i = first; i < first + n; i++)
		seen += m->seen[i];
	if (seen == n)
		return NZ_REASM_DUP;
	if (seen)
		return -EPROTO;
	for (i = first; i < first + n; i++)
		m->seen[i] = true;
	m->bytes += len;
	return NZ_REASM_NEW;
}

static bool model_done(const struct fz_msg *m, u32 unit)
{
	u64 i, n = (m->total + unit - 1) / unit;

	if (!m->total)
		return m->zero_seen;
	for (i = 0; i < n; i++)
		if (!m->seen[i]) {
			FZ_ASSERT(m->bytes < m->total);
			return false;
		}
	FZ_ASSERT(m->bytes == m->total);
	return true;
}

static struct fz_msg *fz_find(struct fz_conn *c, u64 id)
{
	struct fz_msg *free_slot = NULL;
	unsigned int i;

	for (i = 0; i < FZ_SLOTS; i++) {
		if (c->msg[i].used && c->msg[i].id == id)
			return &c->msg[i];
		if (!c->msg[i].used && !free_slot)
			free_slot = &c->msg[i];
	}
	return free_slot;
}

/* Returns false when the receiver would close the connection. */
static bool fz_data(struct fz_conn *c, const struct nz_frame *f)
{
	const struct nz_frame_data *d = &f->data;
	u64 len = f->len;
	struct fz_msg *m;
	int ret, want;
	bool done;

	FZ_ASSERT(d->msg_id != 0);
	FZ_ASSERT(d->total <= c->lim.max_msg);
	FZ_ASSERT(len <= c->lim.max_payload);
	FZ_ASSERT(d->offset <= d->total && len <= d->total - d->offset);
	FZ_ASSERT(len || !d->total);
	FZ_ASSERT(nz_wire_chunk_ok(d->total, d->offset, len, c->unit) ==
		  model_chunk_ok(d->total, d->offset, len, c->unit));

	if (nz_seqwin_is_done(&c->win, d->msg_id))
		return true;		/* late duplicate: ACK and drop */
	if (!nz_seqwin_in_window(&c->win, d->msg_id)) {
		FZ_ASSERT(nz_seqwin_mark_done(&c->win, d->msg_id) == -ERANGE);
		return false;
	}

	m = fz_find(c, d->msg_id);
	if (!m)
		return false;		/* out of slots: NZ_CLOSE_RESOURCE */
	if (!m->used) {
		memset(m, 0, sizeof(*m));
		FZ_ASSERT(nz_reasm_bitmap_words(d->total, c->unit) <=
			  ARRAY_SIZE(m->map));
		FZ_ASSERT(!nz_reasm_init(&m->r, d->total, c->unit, m->map));
		m->used = true;
		m->id = d->msg_id;
		m->tag = d->tag;
		m->tag_seq = d->tag_seq;
		m->total = d->total;
	} else if (m->total != d->total || m->tag != d->tag ||
		   m->tag_seq != d->tag_seq) {
		return false;		/* one msg_id, two messages */
	}

	ret = nz_reasm_add(&m->r, d->offset, len);
	want = model_add(m, d->offset, len, c->unit);
	FZ_ASSERT(ret == want);
	FZ_ASSERT(m->r.received == m->bytes);
	done = nz_reasm_done(&m->r);
	FZ_ASSERT(done == model_done(m, c->unit));
	if (ret < 0)
		return false;

	if (ret == NZ_REASM_NEW && c->inline_payload) {
		u64 i;

		/* The payload is where the transport would copy from. */
		for (i = 0; i < len; i++)
			c->payload_sum += f->payload[i];
	}
	if (done) {
		FZ_ASSERT(nz_seqwin_mark_done(&c->win, m->id) == 0);
		FZ_ASSERT(nz_seqwin_is_done(&c->win, m->id));
		FZ_ASSERT(nz_seqwin_mark_done(&c->win, m->id) == -EALREADY);
		m->used = false;
	}
	return true;
}

static void fz_ack(struct fz_conn *c, const struct nz_frame *f)
{
	FZ_ASSERT(f->ack.msg_id != 0);
	FZ_ASSERT(f->ack.len <= c->lim.max_payload);
	FZ_ASSERT(f->ack.offset <= c->lim.max_msg);
	FZ_ASSERT(f->ack.len <= c->lim.max_msg - f->ack.offset);
	FZ_ASSERT(f->ack.len || !f->ack.offset);
}

static void fz_hello(const struct nz_frame *f)
{
	const struct nz_frame_hello *h = &f->hello;
	u8 in[NZ_WIRE_HELLO_MAC_MAX], nonce_s[NZ_WIRE_NONCE_LEN] = { 0 };
	unsigned int len;

	FZ_ASSERT(nz_wire_unit_ok(h->unit));
	FZ_ASSERT(h->rail < h->nrails);
	FZ_ASSERT(h->src_rank != h->dst_rank);
	FZ_ASSERT(!(h->flags & ~NZ_HELLO_F_KNOWN));
	len = nz_wire_hello_mac_input(h, nonce_s, in);
	FZ_ASSERT(len == (h->flags ? NZ_WIRE_HELLO_MAC_MAX :
			  NZ_WIRE_HELLO_MAC_LEN));
	FZ_ASSERT(!memcmp(in, "NZHELLO1", 8));
	FZ_ASSERT(!memcmp(in + 24, h->nonce_c, NZ_WIRE_NONCE_LEN));
	FZ_ASSERT(get_unaligned_be64(in + 40) == h->job_id);
	FZ_ASSERT(get_unaligned_be32(in + 60) == h->unit);
	FZ_ASSERT(h->incarnation &&
		  get_unaligned_be64(in + 64) == h->incarnation);
}

/* Answer a CHALLENGE or a HEARTBEAT, and decode our own answer. */
static void fz_reply(const struct nz_frame *f, const struct nz_wire_limits *l)
{
	u8 out[NZ_WIRE_HDR_LEN + NZ_WIRE_HELLO_LEN];
	struct nz_frame r, back;
	int n;

	if (f->type == NZ_FRAME_CHALLENGE) {
		nz_frame_init(&r, NZ_FRAME_HELLO);
		r.hello.incarnation = 1;
		r.hello.src_rank = 1;
		r.hello.nrails = 1;
		r.hello.unit = NZ_WIRE_UNIT_MIN;
		memcpy(r.hello.nonce_c, f->challenge.nonce_s,
		       NZ_WIRE_NONCE_LEN);
	} else {
		nz_frame_init(&r, NZ_FRAME_HEARTBEAT_ACK);
		r.hb = f->hb;
	}
	n = nz_wire_encode(&r, l, out, sizeof(out));
	FZ_ASSERT(n == NZ_WIRE_HDR_LEN + (int)r.len);
	FZ_ASSERT(nz_wire_decode(out, n, l, &back) == 0);
	FZ_ASSERT(back.type == r.type);
	if (r.type == NZ_FRAME_HEARTBEAT_ACK)
		FZ_ASSERT(back.hb.ts_ns == f->hb.ts_ns &&
			  back.hb.seq == f->hb.seq);
	else
		FZ_ASSERT(!memcmp(back.hello.nonce_c, f->challenge.nonce_s,
				  NZ_WIRE_NONCE_LEN));
}

/* Whatever decodes must encode back to the very same bytes. */
static void fz_reencode(const struct nz_frame *f, const u8 *raw,
			const struct nz_wire_limits *l, bool have_body)
{
	u8 out[NZ_WIRE_HDR_LEN + NZ_WIRE_HELLO_LEN];
	struct nz_frame g;
	int n = nz_wire_encode(f, l, out, sizeof(out));

	FZ_ASSERT(nz_wire_check(f, l) == 0);
	FZ_ASSERT(n == NZ_WIRE_HDR_LEN +
		  (f->type == NZ_FRAME_HELLO ? NZ_WIRE_HELLO_LEN : 0));
	FZ_ASSERT(!memcmp(out, raw, n));
	if (have_body) {
		FZ_ASSERT(nz_wire_decode(raw, NZ_WIRE_HDR_LEN + f->len, l,
					 &g) == 0);
		FZ_ASSERT(g.type == f->type && g.len == f->len);
	}
}

static void fz_state(struct fz_conn *c, unsigned int type)
{
	switch (type) {
	case NZ_FRAME_CHALLENGE:
		c->st = NZ_WS_CLIENT_WAIT_WELCOME;
		break;
	case NZ_FRAME_HELLO:
	case NZ_FRAME_WELCOME:
		c->st = NZ_WS_ESTABLISHED;
		break;
	}
}

static struct fz_conn conn;

int LLVMFuzzerTestOneInput(const u8 *data, size_t size)
{
	struct fz_conn *c = &conn;
	const u8 *p = data + 2;
	size_t left;

	if (size < 2)
		return 0;
	left = size - 2;
	memset(c, 0, sizeof(*c));
	c->unit = NZ_WIRE_UNIT_MIN << ((data[0] & 0x0f) % 11);
	c->inline_payload = data[0] & 0x10;
	c->st = (data[0] >> 5) & 3;
	c->lim.max_payload = c->unit << (data[1] & 3);
	c->lim.max_msg = (u64)c->unit * FZ_MAX_UNITS - (data[1] >> 2);
	nz_seqwin_init(&c->win);

	while (left >= NZ_WIRE_HDR_LEN) {
		struct nz_frame f;
		size_t body;
		int ret;

		ret = nz_wire_decode_hdr(p, &c->lim, &f);
		if (ret) {
			FZ_ASSERT(ret == -EPROTO || ret == -EMSGSIZE ||
				  ret == -EPROTONOSUPPORT);
			break;
		}
		FZ_ASSERT(nz_wire_type_expected(NZ_WS_ESTABLISHED, f.type) ||
			  f.type < NZ_FRAME_DATA);
		body = f.type == NZ_FRAME_DATA && !c->inline_payload ?
		       0 : f.len;
		if (left - NZ_WIRE_HDR_LEN < body)
			break;
		ret = nz_wire_decode_body(&f, p + NZ_WIRE_HDR_LEN);
		if (ret) {
			FZ_ASSERT(f.type == NZ_FRAME_HELLO && ret == -EPROTO);
			break;
		}
		fz_reencode(&f, p, &c->lim, body == f.len);
		p += NZ_WIRE_HDR_LEN + body;
		left -= NZ_WIRE_HDR_LEN + body;

		if (!nz_wire_type_expected(c->st, f.type))
			break;
		fz_state(c, f.type);
		if (f.type == NZ_FRAME_DATA && !fz_data(c, &f))
			break;
		if (f.type == NZ_FRAME_ACK)
			fz_ack(c, &f);
		if (f.type == NZ_FRAME_HELLO)
			fz_hello(&f);
		if (f.type == NZ_FRAME_CHALLENGE ||
		    f.type == NZ_FRAME_HEARTBEAT)
			fz_reply(&f, &c->lim);
		if (f.type == NZ_FRAME_CLOSE)
			break;
	}
	return 0;
}

#ifdef NZ_FUZZ_STANDALONE

#include <dirent.h>
#include <sys/stat.h>

static int replay_file(const char *path)
{
	FILE *fp = strcmp(path, "-") ? fopen(path, "rb") : stdin;
	size_t cap = 1 << 16, len = 0, n;
	u8 *buf = malloc(cap);

	if (!fp || !buf) {
		perror(path);
		free(buf);
		return 1;
	}
	while ((n = fread(buf + len, 1, cap - len, fp)) > 0) {
		len += n;
		if (len == cap) {
			u8 *nb = realloc(buf, cap *= 2);

			if (!nb) {
				free(buf);
				return 1;
			}
			buf = nb;
		}
	}
	if (fp != stdin)
		fclose(fp);
	LLVMFuzzerTestOneInput(buf, len);
	free(buf);
	return 0;
}

static int replay(const char *path, unsigned int *count)
{
	struct dirent *de;
	struct stat st;
	char sub[4096];
	int err = 0;
	DIR *dir;

	if (strcmp(path, "-") && !stat(path, &st) && S_ISDIR(st.st_mode)) {
		dir = opendir(path);
		if (!dir) {
			perror(path);
			return 1;
		}
		while ((de = readdir(dir))) {
			if (de->d_name[0] == '.')
				continue;
			snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
			err |= replay(sub, count);
		}
		closedir(dir);
		return err;
	}
	(*count)++;
	return replay_file(path);
}

/* Seeds: one valid conversation per feature, for a fuzzer to start from. */
static size_t put(u8 *out, struct nz_frame *f, const struct nz_wire_limits *l)
{
	int n = nz_wire_encode(f, l, out, NZ_WIRE_HDR_LEN + NZ_WIRE_HELLO_LEN);

	FZ_ASSERT(n > 0);
	return n;
}

static size_t put_data(u8 *out, u64 id, u64 total, u64 off, u32 len,
		       bool with_payload)
{
	const struct nz_wire_limits l = { U64_MAX, U32_MAX };
	struct nz_frame f;
	size_t n;

	nz_frame_init(&f, NZ_FRAME_DATA);
	f.data.msg_id = id;
	f.data.tag = 7;
	f.data.total = total;
	f.data.offset = off;
	f.len = len;
	n = put(out, &f, &l);
	if (with_payload) {
		memset(out + n, 0xa5, len);
		n += len;
	}
	return n;
}

static int write_seed(const char *dir, const char *name, const u8 *b,
		      size_t n)
{
	char path[4096];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fp = fopen(path, "wb");
	if (!fp || fwrite(b, 1, n, fp) != n) {
		perror(path);
		if (fp)
			fclose(fp);
		return 1;
	}
	return fclose(fp) ? 1 : 0;
}

static int make_seeds(const char *dir)
{
	const struct nz_wire_limits l = { U64_MAX, U32_MAX };
	static u8 b[1 << 16];
	const u64 u = NZ_WIRE_UNIT_MIN;
	struct nz_frame f;
	size_t n;
	int err = 0;

	/* Established, payload elided, 4 KiB units, max_payload 2 units. */
	b[0] = 0x60;
	b[1] = 0x01;
	n = 2;
	n += put_data(b + n, 1, 3 * u + 5, 2 * u, u, false);
	n += put_data(b + n, 1, 3 * u + 5, 0, 2 * u, false);
	n += put_data(b + n, 1, 3 * u + 5, 2 * u, u, false);	/* dup */
	n += put_data(b + n, 2, 0, 0, 0, false);
	n += put_data(b + n, 1, 3 * u + 5, 3 * u, 5, false);
	n += put_data(b + n, 1, 3 * u + 5, 0, 2 * u, false);	/* late */
	nz_frame_init(&f, NZ_FRAME_ACK);
	f.ack.msg_id = 1;
	f.ack.len = 2 * u;
	n += put(b + n, &f, &l);
	nz_frame_init(&f, NZ_FRAME_HEARTBEAT);
	f.hb.ts_ns = 123456789;
	f.hb.seq = 1;
	n += put(b + n, &f, &l);
	nz_frame_init(&f, NZ_FRAME_CLOSE);
	n += put(b + n, &f, &l);
	err |= write_seed(dir, "established", b, n);

	/* Client side of a handshake, then data with inline payload. */
	b[0] = 0x10;
	b[1] = 0x00;
	n = 2;
	nz_frame_init(&f, NZ_FRAME_CHALLENGE);
	memset(f.challenge.nonce_s, 0x11, NZ_WIRE_NONCE_LEN);
	n += put(b + n, &f, &l);
	nz_frame_init(&f, NZ_FRAME_WELCOME);
	memset(f.welcome.mac, 0x22, NZ_WIRE_MAC_LEN);
	f.welcome.incarnation = 0x33;
	n += put(b + n, &f, &l);
	n += put_data(b + n, 1, u + 1, u, 1, true);
	n += put_data(b + n, 1, u + 1, 0, u, true);
	err |= write_seed(dir, "client", b, n);

	/* Server side of a handshake, 64 KiB units. */
	b[0] = 0x24;
	b[1] = 0x03;
	n = 2;
	nz_frame_init(&f, NZ_FRAME_HELLO);
	f.hello.incarnation = 0x44;
	f.hello.job_id = 42;
	f.hello.src_rank = 1;
	f.hello.nrails = 2;
	f.hello.rail = 1;
	f.hello.unit = 16 * u;
	n += put(b + n, &f, &l);
	n += put_data(b + n, 1, 64 * u, 0, 64 * u, false);
	n += put_data(b + n, 3, 64 * u, 0, 32 * u, false);
	n += put_data(b + n, 2, 0, 0, 0, false);
	err |= write_seed(dir, "server", b, n);
	return err;
}

int main(int argc, char **argv)
{
	unsigned int count = 0;
	int i, err = 0;

	if (argc == 3 && !strcmp(argv[1], "-s"))
		return make_seeds(argv[2]);
	if (argc == 1)
		err = replay("-", &count);
	for (i = 1; i < argc; i++)
		err |= replay(argv[i], &count);
	printf("fuzz_wire: %u input(s) replayed%s\n", count,
	       err ? ", with errors" : "");
	return err;
}

#endif /* NZ_FUZZ_STANDALONE */
