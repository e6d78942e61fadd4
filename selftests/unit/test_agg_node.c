// SPDX-License-Identifier: GPL-2.0
/*
 * Host unit tests of nezha-aggd's core (tools/aggd_core.c, aggd_slot.c),
 * driven packet by packet with a made-up clock and no socket: the JOIN
 * exchange, the reduction of every dtype and operator against a reference,
 * duplicates and lost results, slot reuse, the pool's refusals, isolation
 * of jobs, hostile packets, the rate limit and idle jobs.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/aggd.h"
#include "reduce.h"
#include "tap.h"

#define SEC 1000000000ull

struct sent {
	struct aggd_addr to;
	size_t len;
	uint8_t buf[NZA_PKT_MAX];
};

static struct sent sent[4096];
static unsigned int nsent;
static uint64_t now = 10 * SEC;
static uint8_t key_a[NZA_KEY_LEN], key_b[NZA_KEY_LEN], key_x[NZA_KEY_LEN];

static void capture(void *arg, const struct aggd_addr *to, const uint8_t *buf, size_t len)
{
	(void)arg;
	if (nsent < sizeof(sent) / sizeof(sent[0])) {
		sent[nsent].to = *to;
		sent[nsent].len = len;
		memcpy(sent[nsent].buf, buf, len);
		nsent++;
	}
}

static struct aggd_addr addr_of(unsigned int host, unsigned int port)
{
	struct aggd_addr a = { .len = sizeof(struct sockaddr_in) };

	a.u.in.sin_family = AF_INET;
	a.u.in.sin_addr.s_addr = htonl(0x0a000000 | host);
	a.u.in.sin_port = htons(port);
	return a;
}

/* A rank as the node sees it: its address, and what its ACCEPT said. */
struct vrank {
	struct aggd_addr addr;
	const uint8_t *key;
	uint8_t nonce[NZA_NONCE_LEN];
	struct nza_accept acc;
	struct nza_refuse ref;
	bool accepted, refused, refuse_mac_ok;
	struct nza_data_key ctx;
};

static void cfg_init(struct aggd_cfg *c, unsigned int slots, unsigned int jobs)
{
	static const uint8_t secret[32] = { 9 };

	*c = (struct aggd_cfg){ .slots = slots, .max_jobs = jobs, .job_slots = 64,
				.idle_ns = 30 * SEC, .nkeys = 2, .cookie_secret = secret };
	memcpy(c->keys[0], key_a, NZA_KEY_LEN);
	memcpy(c->keys[1], key_b, NZA_KEY_LEN);
}

/* HELLO, CHALLENGE, JOIN, then ACCEPT or REFUSE. */
static void join(struct aggd *n, struct vrank *r, uint64_t job, uint16_t rank,
		 uint16_t nranks, uint16_t slots)
{
	uint8_t buf[NZA_PKT_MAX], mac[NZI_SHA256_LEN];
	struct nza_hello h = { .nonce = { (uint8_t)rank } };
	struct nza_challenge c;
	struct nza_join j = { .job_id = job, .rank = rank, .nranks = nranks, .slots = slots };
	int t;

	r->accepted = r->refused = false;
	nsent = 0;
	aggd_input(n, &r->addr, buf, nza_encode_hello(buf, &h), now);
	if (nsent != 1 || nza_decode_challenge(sent[0].buf, sent[0].len, &c))
		return;
	memcpy(j.cookie, c.cookie, sizeof(j.cookie));
	memset(r->nonce, 0x70 + rank, sizeof(r->nonce));
	memcpy(j.nonce, r->nonce, sizeof(j.nonce));
	nza_key_id(r->key, j.key_id);
	nza_encode_join(buf, &j);
	nza_join_mac(r->key, buf, j.mac);
	nsent = 0;
	aggd_input(n, &r->addr, buf, nza_encode_join(buf, &j), now);
	if (nsent != 1)
		return;
	t = nza_peek_type(sent[0].buf, sent[0].len);
	if (t == NZA_ACCEPT && !nza_decode_accept(sent[0].buf, sent[0].len, &r->acc)) {
		nza_accept_mac(r->key, r->nonce, sent[0].buf, mac);
		r->accepted = nzi_mac_equal(mac, r->acc.mac, sizeof(mac));
		nza_data_key(r->key, job, r->acc.session, &r->ctx);
	} else if (t == NZA_REFUSE && !nza_decode_refuse(sent[0].buf, sent[0].len, &r->ref)) {
		r->refused = true;
		nza_refuse_mac(r->key, r->nonce, sent[0].buf, mac);
		r->refuse_mac_ok = nzi_mac_equal(mac, r->ref.mac, sizeof(mac));
	}
}

static struct aggd *node_new(unsigned int slots, unsigned int jobs)
{
	struct aggd_cfg cfg;
	struct aggd *n = NULL;

	cfg_init(&cfg, slots, jobs);
	if (aggd_create(&cfg, capture, NULL, &n))
		return NULL;
	return n;
}

static bool join_all(struct aggd *n, struct vrank *r, unsigned int nr, uint64_t job,
		     uint16_t slots, const uint8_t *key, unsigned int host)
{
	bool ok = true;

	for (unsigned int i = 0; i < nr; i++) {
		r[i].addr = addr_of(host + i, 5000 + i);
		r[i].key = key;
		join(n, &r[i], job, i, nr, slots);
		ok &= r[i].accepted && r[i].acc.handle == r[0].acc.handle;
	}
	return ok;
}

static void send_data(struct aggd *n, const struct vrank *r, uint64_t seq, uint8_t dtype,
		      uint8_t op, const void *vals, uint16_t count)
{
	uint8_t buf[NZA_PKT_MAX];
	struct nza_data d = { .type = NZA_DATA, .handle = r->acc.handle, .rank = r->acc.rank,
			      .count = count, .dtype = dtype, .op = op, .seq = seq,
			      .payload = buf + NZA_DATA_HDR_LEN };
	size_t len;

	nza_to_wire(buf + NZA_DATA_HDR_LEN, vals, count, nza_dtype_size(dtype));
	len = nza_encode_data(buf, &d);
	nza_data_seal(&r->ctx, buf, len);
	aggd_input(n, &r->addr, buf, len, now);
}

static bool addr_is(const struct aggd_addr *a, const struct aggd_addr *b)
{
	return a->u.in.sin_addr.s_addr == b->u.in.sin_addr.s_addr &&
	       a->u.in.sin_port == b->u.in.sin_port;
}

/* The RESULT for seq sent to r since nsent was cleared: its payload in out. */
static int result_for(const struct vrank *r, uint64_t seq, void *out)
{
	int found = 0;

	for (unsigned int i = 0; i < nsent; i++) {
		struct nza_data d;

		if (!addr_is(&sent[i].to, &r->addr) ||
		    nza_decode_data(sent[i].buf, sent[i].len, &d) || d.type != NZA_RESULT ||
		    d.seq != seq || !nza_data_mac_ok(&r->ctx, sent[i].buf, sent[i].len))
			continue;
		nza_from_wire(out, d.payload, d.count, nza_dtype_size(d.dtype));
		found++;
	}
	return found;
}

static uint64_t rnd_state = 0x243f6a8885a308d3ull;

static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

/* IEEE 754-2019 minimum/maximum without NaNs: -0 below +0. */
static float ref_minmax(float a, float b, bool max)
{
	if (a == b)
		return (signbit(a) != max) ? a : b;
	return (a < b) != max ? a : b;
}

#define NR 4

/* The inputs of NR ranks for one block and the reference result. */
static void make_block(uint8_t dtype, uint8_t op, unsigned int count,
		       uint32_t in[NR][NZA_MAX_ELEMS], uint32_t *want)
{
	for (unsigned int e = 0; e < count; e++) {
		float acc = 0;
		uint32_t iacc = 0;

		for (int r = 0; r < NR; r++) {
			/* Dyadic values: every f32 sum of them is exact, so
			 * the order of arrival cannot change the result. */
			float f = (float)((int)(rnd() % 2001) - 1000) / 4;
			int32_t i = (int32_t)rnd();

			if (e % 17 == 0)
				f = (r & 1) ? -0.0f : 0.0f;
			if (dtype == NZA_BF16)
				f = (float)((int)(rnd() % 255) - 127);
			if (dtype == NZA_F32) {
				memcpy(&in[r][e], &f, 4);
			} else if (dtype == NZA_F16) {
				in[r][e] = nz_f32_to_f16(f);
				f = nz_f16_to_f32((uint16_t)in[r][e]);
			} else if (dtype == NZA_BF16) {
				in[r][e] = nz_f32_to_bf16(f);
			} else {
				in[r][e] = (uint32_t)i;
			}
			if (dtype == NZA_I32) {
				int32_t cur = (int32_t)iacc;

				iacc = !r || op == NZA_OP_SUM ? iacc + (uint32_t)i :
				       (op == NZA_OP_MIN) == (i < cur) ? (uint32_t)i : iacc;
			} else {
				acc = !r ? f : op == NZA_OP_SUM ? acc + f :
				      ref_minmax(acc, f, op == NZA_OP_MAX);
			}
		}
		if (dtype == NZA_F32)
			memcpy(&want[e], &acc, 4);
		else if (dtype == NZA_F16)
			want[e] = nz_f32_to_f16(acc);
		else if (dtype == NZA_BF16)
			want[e] = nz_f32_to_bf16(acc);
		else
			want[e] = iacc;
	}
}

/* Pack 32-bit holders into the dtype's width (16-bit types). */
static void pack(uint8_t dtype, const uint32_t *in, void *out, unsigned int count)
{
	for (unsigned int e = 0; e < count; e++)
		if (nza_dtype_size(dtype) == 2)
			((uint16_t *)out)[e] = (uint16_t)in[e];
		else
			((uint32_t *)out)[e] = in[e];
}

static void test_reductions(void)
{
	static const char *dn[] = { "", "f32", "f16", "bf16", "i32" };
	static const char *on[] = { "", "sum", "min", "max" };
	static uint32_t in[NR][NZA_MAX_ELEMS], want[NZA_MAX_ELEMS];
	static uint8_t packed[NR][NZA_PAYLOAD], wpacked[NZA_PAYLOAD], got[NZA_PAYLOAD];
	struct aggd *n = node_new(64, 4);
	struct vrank r[NR];
	uint64_t seq = 0;

	if (!n || !join_all(n, r, NR, 77, 8, key_a, 1)) {
		tap_ok(0, "4 ranks join job 77");
		return;
	}
	tap_ok(1, "4 ranks join job 77: one handle, ACCEPT MACs check");
	for (uint8_t dt = NZA_F32; dt <= NZA_DTYPE_LAST; dt++)
		for (uint8_t op = NZA_OP_SUM; op <= NZA_OP_LAST; op++) {
			unsigned int count = seq & 1 ? 100 : nza_dtype_elems(dt);
			bool ok = true;

			make_block(dt, op, count, in, want);
			for (int k = 0; k < NR; k++)
				pack(dt, in[k], packed[k], count);
			pack(dt, want, wpacked, count);
			nsent = 0;
			/* Arrival order differs from rank order. */
			for (int k = NR - 1; k >= 0; k--)
				send_data(n, &r[k], seq, dt, op, packed[k], count);
			for (int k = 0; k < NR; k++) {
				memset(got, 0xee, sizeof(got));
				ok &= result_for(&r[k], seq, got) == 1 &&
				      !memcmp(got, wpacked, count * nza_dtype_size(dt));
			}
			tap_ok(ok, "%s %s of %u elements: every rank gets the reference", dn[dt],
			       on[op], count);
			seq++;
		}
	aggd_destroy(n);
}

/* Duplicates, a lost RESULT, slot reuse, stale and early packets. */
static void test_retransmission(void)
{
	struct aggd *n = node_new(16, 2);
	const struct aggd_stats *st;
	int32_t one = 1, got[1] = { 0 }, want;
	struct vrank r[3];
	bool ok = true;

	if (!n || !join_all(n, r, 3, 5, 2, key_a, 20)) {
		tap_ok(0, "3 ranks join with a window of 2");
		return;
	}
	st = aggd_stats(n);
	nsent = 0;
	send_data(n, &r[0], 0, NZA_I32, NZA_OP_SUM, &one, 1);
	send_data(n, &r[0], 0, NZA_I32, NZA_OP_SUM, &one, 1);
	send_data(n, &r[1], 0, NZA_I32, NZA_OP_SUM, &one, 1);
	send_data(n, &r[2], 0, NZA_I32, NZA_OP_SUM, &one, 1);
	tap_ok(st->drop_dup == 1 && result_for(&r[0], 0, got) == 1 && got[0] == 3,
	       "a contribution sent twice is counted once (sum 3, not 4)");
	nsent = 0;
	send_data(n, &r[1], 0, NZA_I32, NZA_OP_SUM, &one, 1);
	tap_ok(st->results_resent == 1 && nsent == 1 && result_for(&r[1], 0, got) == 1 &&
	       got[0] == 3, "a rank whose RESULT was lost sends again: it alone gets the result");
	/* Blocks 1..9 through a window of 2: every slot half reused. */
	for (uint64_t seq = 1; seq < 10; seq++) {
		int32_t v[3] = { (int32_t)seq, 10, 100 };

		nsent = 0;
		for (int k = 0; k < 3; k++)
			send_data(n, &r[k], seq, NZA_I32, NZA_OP_SUM, &v[k], 1);
		want = (int32_t)seq + 110;
		for (int k = 0; k < 3; k++)
			ok &= result_for(&r[k], seq, got) == 1 && got[0] == want;
	}
	tap_ok(ok, "blocks 1-9 through 2 slots: each result right");
	nsent = 0;
	send_data(n, &r[0], 5, NZA_I32, NZA_OP_SUM, &one, 1);
	tap_ok(st->drop_stale == 1 && nsent == 0, "a contribution to a block long past is stale");
	send_data(n, &r[0], 14, NZA_I32, NZA_OP_SUM, &one, 1);
	send_data(n, &r[0], 10, NZA_I32, NZA_OP_SUM, &one, 1);
	send_data(n, &r[0], 12, NZA_I32, NZA_OP_SUM, &one, 1);
	tap_ok(st->drop_early == 2, "blocks beyond the window are early: 14 and 12 dropped, 10 taken");
	send_data(n, &r[1], 10, NZA_F32, NZA_OP_SUM, &one, 1);
	tap_ok(st->drop_mismatch == 1, "a contribution of another dtype to the block is dropped");
	aggd_destroy(n);
}

static void test_pool(void)
{
	struct aggd *n = node_new(8, 3);
	struct vrank a[2], b, c, d = { 0 }, e;
	const struct aggd_stats *st;

	if (!n) {
		tap_ok(0, "node of 8 slots");
		return;
	}
	st = aggd_stats(n);
	tap_ok(join_all(n, a, 2, 1, 6, key_a, 40) && st->slots_used == 6,
	       "job 1 takes 6 of 8 slots");
	b.addr = addr_of(50, 1);
	b.key = key_a;
	join(n, &b, 2, 0, 2, 4);
	tap_ok(b.refused && b.ref.reason == NZA_R_NO_SLOTS && b.ref.slots_free == 2 &&
	       b.refuse_mac_ok, "job 2 asking 4: refused NO_SLOTS, 2 free, under the key's MAC");
	join(n, &b, 2, 0, 2, 2);
	tap_ok(b.accepted && b.acc.handle != a[0].acc.handle && st->slots_used == 8,
	       "job 2 asking 2: its own slots and handle");
	c.addr = addr_of(60, 1);
	c.key = key_b;
	join(n, &c, 1, 0, 1, 1);
	tap_ok(c.refused && c.ref.reason == NZA_R_NO_SLOTS,
	       "job 1 under another key is another job (no slots left for it)");
	join(n, &a[1], 1, 1, 2, 5);
	tap_ok(a[1].refused && a[1].ref.reason == NZA_R_MISMATCH,
	       "a JOIN with another window than its job's: MISMATCH");
	d.addr = addr_of(70, 1);
	d.key = key_x;
	join(n, &d, 3, 0, 1, 1);
	tap_ok(d.refused && d.ref.reason == NZA_R_UNKNOWN_KEY && !d.refuse_mac_ok,
	       "a key the node does not hold: UNKNOWN_KEY, without a MAC");
	e.addr = addr_of(80, 1);
	e.key = key_a;
	join(n, &e, 4, 0, 1, 65);
	tap_ok(e.refused && e.ref.reason == NZA_R_TOO_BIG, "more slots than --job-slots: TOO_BIG");
	aggd_destroy(n);
	n = node_new(8, 1);
	join_all(n, a, 1, 1, 1, key_a, 40);
	join(n, &e, 4, 0, 1, 1);
	tap_ok(e.refused && e.ref.reason == NZA_R_NO_JOBS, "--max-jobs 1: a second job gets NO_JOBS");
	aggd_destroy(n);
}

static void test_isolation(void)
{
	struct aggd *n = node_new(16, 4);
	struct vrank a[2], b[2], stranger;
	const struct aggd_stats *st;
	int32_t v = 7, got[1];

	if (!n || !join_all(n, a, 2, 1, 2, key_a, 90) || !join_all(n, b, 2, 1, 2, key_b, 95)) {
		tap_ok(0, "two jobs of 2 ranks");
		return;
	}
	st = aggd_stats(n);
	/* Job b's rank 0 aims at job a's slot with its own key. */
	stranger = b[0];
	stranger.acc.handle = a[0].acc.handle;
	nsent = 0;
	send_data(n, &stranger, 0, NZA_I32, NZA_OP_SUM, &v, 1);
	tap_ok(st->drop_mac == 1 && !st->contributions, "a DATA under another job's key is dropped (MAC)");
	stranger = a[1];
	stranger.addr = addr_of(200, 1);
	send_data(n, &stranger, 0, NZA_I32, NZA_OP_SUM, &v, 1);
	tap_ok(st->drop_addr == 1 && !st->contributions,
	       "a rank's DATA from another address is dropped");
	send_data(n, &a[0], 0, NZA_I32, NZA_OP_SUM, &v, 1);
	send_data(n, &b[0], 0, NZA_I32, NZA_OP_SUM, &v, 1);
	send_data(n, &b[1], 0, NZA_I32, NZA_OP_SUM, &v, 1);
	send_data(n, &a[1], 0, NZA_I32, NZA_OP_SUM, &v, 1);
	tap_ok(result_for(&a[0], 0, got) == 1 && got[0] == 14 && result_for(&b[1], 0, got) == 1 &&
	       got[0] == 14 && st->results == 2, "the same block of two jobs: two results, each 7+7");
	for (int k = 0; k < 2; k++) {
		uint8_t buf[NZA_LEAVE_LEN];
		struct nza_data d = { .type = NZA_LEAVE, .handle = a[k].acc.handle,
				      .rank = a[k].acc.rank };

		nza_encode_data(buf, &d);
		nza_data_seal(&a[k].ctx, buf, NZA_LEAVE_LEN);
		aggd_input(n, &a[k].addr, buf, NZA_LEAVE_LEN, now);
	}
	send_data(n, &a[0], 1, NZA_I32, NZA_OP_SUM, &v, 1);
	tap_ok(st->jobs_active == 1 && st->slots_used == 2 && st->drop_no_job == 1,
	       "both ranks LEAVE: the job and its slots are free, its handle dead");
	now += 31 * SEC;
	aggd_tick(n, now);
	tap_ok(st->jobs_active == 0 && st->slots_used == 0 && st->jobs_reaped == 1,
	       "a job silent for --idle is released");
	aggd_destroy(n);
}

static void test_hostile(void)
{
	struct aggd *n = node_new(16, 4);
	struct aggd_addr from = addr_of(123, 4);
	const struct aggd_stats *st;
	uint8_t buf[NZA_PKT_MAX + 16];
	struct nza_join j = { .job_id = 1, .nranks = 1, .slots = 1 };
	struct vrank r[2];
	uint64_t drops;

	if (!n || !join_all(n, r, 2, 9, 4, key_a, 100)) {
		tap_ok(0, "a job to attack");
		return;
	}
	st = aggd_stats(n);
	nsent = 0;
	for (int i = 0; i < 20000; i++) {
		size_t len = rnd() % sizeof(buf);

		for (size_t k = 0; k < len; k++)
			buf[k] = rnd();
		if (i & 1) {
			/* Well-formed DATA with a forged MAC, for the job's
			 * handle (i % 4 == 1) or a guessed one. */
			struct nza_data d = { .type = NZA_DATA, .rank = rnd() % 2,
					      .count = 1 + rnd() % 256, .dtype = NZA_F32,
					      .op = NZA_OP_SUM, .seq = rnd() % 8,
					      .payload = buf + NZA_DATA_HDR_LEN };

			d.handle = i % 4 == 1 ? r[0].acc.handle : (uint32_t)rnd() | 1;
			len = nza_encode_data(buf, &d);
		}
		aggd_input(n, i % 4 == 1 ? &r[0].addr : &from, buf, len, now);
	}
	drops = st->drop_malformed + st->drop_type + st->drop_no_job + st->drop_mac;
	tap_ok(drops == 20000 && nsent == 0 && !st->contributions,
	       "20000 random packets: each dropped and counted, none answered (%llu malformed, %llu no job, %llu MAC)",
	       (unsigned long long)st->drop_malformed, (unsigned long long)st->drop_no_job,
	       (unsigned long long)st->drop_mac);
	nza_key_id(key_a, j.key_id);
	nza_encode_join(buf, &j);
	aggd_input(n, &from, buf, NZA_JOIN_LEN, now);
	tap_ok(st->drop_cookie == 1 && nsent == 0, "a JOIN without the cookie of its address: dropped");
	/* A cookie earned by one address, used from another. */
	r[1].addr = addr_of(124, 4);
	join(n, &r[1], 1, 0, 1, 1);
	tap_ok(r[1].accepted, "(a JOIN with its own cookie is accepted)");
	nsent = 0;
	aggd_input(n, &r[1].addr, (uint8_t *)"NZAG\x01\x01\0\0", 8, now);
	tap_ok(nsent == 0 && st->drop_malformed > 0, "a HELLO shorter than its answer gets none");
	now += 200 * SEC;
	join(n, &r[1], 1, 0, 1, 1);
	tap_ok(r[1].accepted, "cookies are re-issued after their epoch");
	aggd_destroy(n);
}

static void test_rate(void)
{
	struct aggd_cfg cfg;
	struct aggd *n = NULL;
	struct aggd_addr a = addr_of(1, 1), b = addr_of(2, 1);
	uint8_t junk[8] = { 0 };

	cfg_init(&cfg, 4, 1);
	cfg.rate = 100;
	cfg.burst = 10;
	if (aggd_create(&cfg, capture, NULL, &n)) {
		tap_ok(0, "node with --rate 100 --burst 10");
		return;
	}
	for (int i = 0; i < 50; i++)
		aggd_input(n, &a, junk, sizeof(junk), now);
	aggd_input(n, &b, junk, sizeof(junk), now);
	tap_ok(aggd_stats(n)->drop_rate == 40, "50 packets at once from one source: 40 over the burst dropped (%llu)",
	       (unsigned long long)aggd_stats(n)->drop_rate);
	for (int i = 0; i < 5; i++)
		aggd_input(n, &a, junk, sizeof(junk), now + SEC / 20);
	tap_ok(aggd_stats(n)->drop_rate == 40, "50 ms later 5 tokens are back (100/s)");
	aggd_input(n, &a, junk, sizeof(junk), now + SEC / 20);
	tap_ok(aggd_stats(n)->drop_rate == 41, "and no sixth");
	aggd_destroy(n);
}

static void test_config(void)
{
	struct aggd_cfg cfg;
	struct aggd *n = NULL;

	cfg_init(&cfg, 0, 1);
	tap_ok(aggd_create(&cfg, capture, NULL, &n) == -EINVAL, "0 slots: -EINVAL");
	cfg_init(&cfg, 4, 1);
	cfg.nkeys = 0;
	tap_ok(aggd_create(&cfg, capture, NULL, &n) == -EINVAL, "no key: -EINVAL");
	cfg_init(&cfg, 1024, 16);
	if (!aggd_create(&cfg, capture, NULL, &n)) {
		tap_ok(aggd_pool_bytes(n) <= 1024 * (2 * NZA_MAX_ELEMS * 4 + 128),
		       "1024 slots: a pool of %zu KiB (%zu KiB in all), allocated once",
		       aggd_pool_bytes(n) >> 10, aggd_total_bytes(n) >> 10);
		aggd_destroy(n);
	} else {
		tap_ok(0, "1024 slots");
	}
}

int main(void)
{
	for (int i = 0; i < NZA_KEY_LEN; i++) {
		key_a[i] = i;
		key_b[i] = 0x80 + i;
		key_x[i] = 0x40;
	}
	tap_plan(43);
	test_config();
	test_reductions();
	test_retransmission();
	test_pool();
	test_isolation();
	test_hostile();
	test_rate();
	return tap_exit();
}
