// SPDX-License-Identifier: GPL-2.0
/*
 * nezha-aggd's core: the pool and the jobs, the rate limit, HELLO/JOIN,
 * LEAVE, idle jobs, counters (Documentation/aggregation.rst).
 *
 * The order of the checks on a packet is the order of their cost: the
 * source's token bucket, the decode, then (JOIN) the cookie that proves
 * the source address, the key id, the MAC -- or (DATA, LEAVE) the job
 * handle, the MAC, the rank's address.  Nothing is answered before the
 * source address is proven: the node reflects nothing at a spoofed one.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "aggd_int.h"
#include "internal.h"

#define AGGD_COOKIE_EPOCH_NS	(64ull * 1000000000ull)

void aggd_send(struct aggd *n, const struct aggd_addr *to, const uint8_t *buf, size_t len)
{
	n->st.tx++;
	n->st.tx_bytes += len;
	n->send(n->arg, to, buf, len);
}

static int cfg_check(const struct aggd_cfg *c)
{
	if (!c->slots || c->slots > AGGD_MAX_SLOTS || !c->max_jobs ||
	    c->max_jobs > AGGD_MAX_JOBS || !c->nkeys || c->nkeys > AGGD_MAX_KEYS)
		return -EINVAL;
	if (!c->job_slots || c->job_slots > NZA_MAX_WINDOW)
		return -EINVAL;
	return 0;
}

int aggd_create(const struct aggd_cfg *cfg, aggd_send_fn send, void *arg,
		struct aggd **out)
{
	struct aggd *n;
	int ret = cfg_check(cfg);

	if (ret)
		return ret;
	n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	n->cfg = *cfg;
	if (!n->cfg.burst)
		n->cfg.burst = cfg->rate / 10 > 2 * NZA_MAX_WINDOW ? cfg->rate / 10 :
			       2 * NZA_MAX_WINDOW;
	n->send = send;
	n->arg = arg;
	n->slots = calloc(cfg->slots, sizeof(*n->slots));
	n->slot_used = calloc(cfg->slots, 1);
	n->jobs = calloc(cfg->max_jobs, sizeof(*n->jobs));
	n->ranks = calloc((size_t)cfg->max_jobs * NZA_MAX_RANKS, sizeof(*n->ranks));
	n->buckets = calloc(AGGD_BUCKETS, sizeof(*n->buckets));
	if (!n->slots || !n->slot_used || !n->jobs || !n->ranks || !n->buckets) {
		ret = -ENOMEM;
		goto out_free;
	}
	if (cfg->cookie_secret)
		memcpy(n->cookie_secret, cfg->cookie_secret, sizeof(n->cookie_secret));
	else if ((ret = nzi_random(n->cookie_secret, sizeof(n->cookie_secret))))
		goto out_free;
	if ((ret = nzi_random(&n->hash_seed, sizeof(n->hash_seed))))
		goto out_free;
	for (unsigned int i = 0; i < cfg->max_jobs; i++)
		n->jobs[i].ranks = n->ranks + (size_t)i * NZA_MAX_RANKS;
	for (unsigned int k = 0; k < cfg->nkeys; k++)
		nza_key_id(cfg->keys[k], n->key_id[k]);
	*out = n;
	return 0;

out_free:
	aggd_destroy(n);
	return ret;
}

void aggd_destroy(struct aggd *n)
{
	if (!n)
		return;
	nzi_wipe(n->cfg.keys, sizeof(n->cfg.keys));
	nzi_wipe(n->cookie_secret, sizeof(n->cookie_secret));
	if (n->jobs)
		for (unsigned int i = 0; i < n->cfg.max_jobs; i++)
			nzi_wipe(&n->jobs[i].data, sizeof(n->jobs[i].data));
	free(n->slots);
	free(n->slot_used);
	free(n->jobs);
	free(n->ranks);
	free(n->buckets);
	free(n);
}

size_t aggd_pool_bytes(const struct aggd *n)
{
	return (size_t)n->cfg.slots * sizeof(struct aggd_slot);
}

size_t aggd_total_bytes(const struct aggd *n)
{
	return sizeof(*n) + aggd_pool_bytes(n) + n->cfg.slots +
	       n->cfg.max_jobs * sizeof(struct aggd_job) +
	       (size_t)n->cfg.max_jobs * NZA_MAX_RANKS * sizeof(struct aggd_rank) +
	       AGGD_BUCKETS * sizeof(struct aggd_bucket);
}

const struct aggd_stats *aggd_stats(const struct aggd *n)
{
	return &n->st;
}

/* ---- Source addresses: their bytes, the rate limit, the cookie ---- */

static void addr_key(const struct aggd_addr *a, uint8_t key[16], uint16_t *family)
{
	memset(key, 0, 16);
	*family = a->u.sa.sa_family;
	if (*family == AF_INET6)
		memcpy(key, &a->u.in6.sin6_addr, 16);
	else if (*family == AF_INET)
		memcpy(key, &a->u.in.sin_addr, 4);
}

static uint16_t addr_port(const struct aggd_addr *a)
{
	return a->u.sa.sa_family == AF_INET6 ? a->u.in6.sin6_port : a->u.in.sin_port;
}

static bool addr_equal(const struct aggd_addr *a, const struct aggd_addr *b)
{
	uint8_t ka[16], kb[16];
	uint16_t fa, fb;

	addr_key(a, ka, &fa);
	addr_key(b, kb, &fb);
	return fa == fb && addr_port(a) == addr_port(b) && !memcmp(ka, kb, 16);
}

/* A keyed mix (the seed is random): nobody picks a bucket to share. */
static uint64_t mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/*
 * One token per packet from the source's bucket, refilled at cfg.rate.
 * A source whose bucket another address holds takes it over once that
 * one is idle (full), and shares it until then: a table of fixed size,
 * never a lookup that grows.
 */
static bool rate_ok(struct aggd *n, const struct aggd_addr *from, uint64_t now)
{
	const uint64_t cost = 1000000000ull, cap = (uint64_t)n->cfg.burst * cost;
	struct aggd_bucket *b;
	uint8_t key[16];
	uint16_t family;
	uint64_t h, dt;

	if (!n->cfg.rate)
		return true;
	addr_key(from, key, &family);
	h = n->hash_seed ^ family;
	for (int i = 0; i < 16; i += 8) {
		uint64_t w;

		memcpy(&w, key + i, 8);
		h = mix(h ^ w);
	}
	b = &n->buckets[h % AGGD_BUCKETS];
	dt = now - b->last_ns;
	if (!b->family || now < b->last_ns || dt > cap / n->cfg.rate)
		b->tokens = cap;
	else if ((b->tokens += dt * n->cfg.rate) > cap)
		b->tokens = cap;
	b->last_ns = now;
	if (b->family != family || memcmp(b->addr, key, 16)) {
		if (b->tokens == cap) {
			memcpy(b->addr, key, 16);
			b->family = family;
		}
	}
	if (b->tokens < cost)
		return false;
	b->tokens -= cost;
	return true;
}

static void cookie_for(const struct aggd *n, const struct aggd_addr *a, uint64_t epoch,
		       uint8_t cookie[NZA_COOKIE_LEN])
{
	uint8_t msg[28], mac[NZI_SHA256_LEN];
	uint16_t family, port = addr_port(a);

	addr_key(a, msg + 12, &family);
	memcpy(msg, &epoch, 8);
	memcpy(msg + 8, &family, 2);
	memcpy(msg + 10, &port, 2);
	nzi_hmac_sha256(n->cookie_secret, sizeof(n->cookie_secret), msg, sizeof(msg), mac);
	memcpy(cookie, mac, NZA_COOKIE_LEN);
}

/* A cookie of this epoch or the one before: valid 64 to 128 s. */
static bool cookie_ok(const struct aggd *n, const struct aggd_addr *a, const uint8_t *c,
		      uint64_t now)
{
	uint64_t epoch = now / AGGD_COOKIE_EPOCH_NS;
	uint8_t want[NZA_COOKIE_LEN];

	cookie_for(n, a, epoch, want);
	if (nzi_mac_equal(want, c, NZA_COOKIE_LEN))
		return true;
	cookie_for(n, a, epoch - 1, want);
	return nzi_mac_equal(want, c, NZA_COOKIE_LEN);
}

static void on_hello(struct aggd *n, const struct aggd_addr *from, const uint8_t *buf,
		     size_t len, uint64_t now)
{
	struct nza_challenge c;
	struct nza_hello h;

	if (nza_decode_hello(buf, len, &h)) {
		n->st.drop_malformed++;
		return;
	}
	memcpy(c.nonce, h.nonce, sizeof(c.nonce));
	cookie_for(n, from, now / AGGD_COOKIE_EPOCH_NS, c.cookie);
	n->st.challenges++;
	aggd_send(n, from, n->out, nza_encode_challenge(n->out, &c));
}

/* ---- Jobs and the pool ---- */

/* The first free run of want slots, or -1 (*largest: the longest run). */
static int pool_find(const struct aggd *n, unsigned int want, unsigned int *largest)
{
	unsigned int run = 0;

	*largest = 0;
	for (unsigned int i = 0; i < n->cfg.slots; i++) {
		run = n->slot_used[i] ? 0 : run + 1;
		if (run > *largest)
			*largest = run;
		if (run == want)
			return (int)(i + 1 - want);
	}
	return -1;
}

static void job_release(struct aggd *n, struct aggd_job *j)
{
	memset(n->slot_used + j->base, 0, j->nslots);
	n->st.slots_used -= j->nslots;
	n->st.jobs_active--;
	memset(j->ranks, 0, NZA_MAX_RANKS * sizeof(*j->ranks));
	nzi_wipe(&j->data, sizeof(j->data));
	j->used = false;
}

static struct aggd_job *job_by_handle(struct aggd *n, uint32_t handle)
{
	unsigned int idx = handle & 0xff;
	struct aggd_job *j;

	if (idx >= n->cfg.max_jobs)
		return NULL;
	j = &n->jobs[idx];
	return j->used && j->gen == handle >> 8 ? j : NULL;
}

static struct aggd_job *job_find(struct aggd *n, unsigned int key, uint64_t job_id)
{
	for (unsigned int i = 0; i < n->cfg.max_jobs; i++)
		if (n->jobs[i].used && n->jobs[i].key == key && n->jobs[i].job_id == job_id)
			return &n->jobs[i];
	return NULL;
}

/* A new job for this JOIN, or 0 and *reason, *free_slots. */
static struct aggd_job *job_new(struct aggd *n, unsigned int key, const struct nza_join *jn,
				uint16_t *reason, uint16_t *free_slots)
{
	struct aggd_job *j = NULL;
	unsigned int largest;
	int base;

	if (jn->slots > n->cfg.job_slots) {
		*reason = NZA_R_TOO_BIG;
		*free_slots = n->cfg.job_slots;
		return NULL;
	}
	for (unsigned int i = 0; i < n->cfg.max_jobs && !j; i++)
		if (!n->jobs[i].used)
			j = &n->jobs[i];
	base = pool_find(n, jn->slots, &largest);
	*free_slots = largest > UINT16_MAX ? UINT16_MAX : largest;
	if (!j || base < 0) {
		*reason = j ? NZA_R_NO_SLOTS : NZA_R_NO_JOBS;
		return NULL;
	}
	if (nzi_random(j->session, sizeof(j->session))) {
		*reason = NZA_R_NO_JOBS;
		return NULL;
	}
	j->used = true;
	j->gen = (j->gen + 1) & 0xffffff;
	if (!j->gen)
		j->gen = 1;
	j->job_id = jn->job_id;
	j->key = key;
	j->nranks = jn->nranks;
	j->nslots = jn->slots;
	j->njoined = j->nleft = 0;
	j->base = (unsigned int)base;
	nza_data_key(n->cfg.keys[key], jn->job_id, j->session, &j->data);
	memset(n->slot_used + base, 1, jn->slots);
	aggd_slots_reset(n, j);
	n->st.slots_used += jn->slots;
	n->st.jobs_active++;
	return j;
}

static void send_refuse(struct aggd *n, const struct aggd_addr *to, const struct nza_join *jn,
			int key, uint16_t reason, uint16_t free_slots)
{
	struct nza_refuse r = {
		.job_id = jn->job_id, .reason = reason, .rank = jn->rank,
		.slots_free = free_slots,
	};

	nza_encode_refuse(n->out, &r);
	if (key >= 0) {
		nza_refuse_mac(n->cfg.keys[key], jn->nonce, n->out, r.mac);
		nza_encode_refuse(n->out, &r);
	}
	n->st.refusals++;
	n->st.refuse_reason[reason]++;
	aggd_send(n, to, n->out, NZA_REFUSE_LEN);
}

static void send_accept(struct aggd *n, const struct aggd_addr *to, const struct aggd_job *j,
			const struct nza_join *jn)
{
	struct nza_accept a = {
		.job_id = j->job_id, .handle = j->gen << 8 | (uint32_t)(j - n->jobs),
		.rank = jn->rank, .nranks = j->nranks, .slots = j->nslots,
	};

	memcpy(a.session, j->session, sizeof(a.session));
	nza_encode_accept(n->out, &a);
	nza_accept_mac(n->cfg.keys[j->key], jn->nonce, n->out, a.mac);
	aggd_send(n, to, n->out, nza_encode_accept(n->out, &a));
}

static int key_by_id(const struct aggd *n, const uint8_t *id)
{
	for (unsigned int k = 0; k < n->cfg.nkeys; k++)
		if (!memcmp(n->key_id[k], id, NZA_KEY_ID_LEN))
			return (int)k;
	return -1;
}

static void on_join(struct aggd *n, const struct aggd_addr *from, const uint8_t *buf,
		    size_t len, uint64_t now)
{
	uint8_t mac[NZI_SHA256_LEN];
	uint16_t reason, free_slots = 0;
	struct aggd_rank *r;
	struct aggd_job *j;
	struct nza_join jn;
	int key;

	if (nza_decode_join(buf, len, &jn)) {
		n->st.drop_malformed++;
		return;
	}
	if (!cookie_ok(n, from, jn.cookie, now)) {
		n->st.drop_cookie++;
		return;
	}
	key = key_by_id(n, jn.key_id);
	if (key < 0) {
		send_refuse(n, from, &jn, -1, NZA_R_UNKNOWN_KEY, 0);
		return;
	}
	nza_join_mac(n->cfg.keys[key], buf, mac);
	if (!nzi_mac_equal(mac, jn.mac, sizeof(mac))) {
		n->st.drop_join_mac++;
		return;
	}
	j = job_find(n, (unsigned int)key, jn.job_id);
	if (j && (j->nranks != jn.nranks || j->nslots != jn.slots)) {
		send_refuse(n, from, &jn, key, NZA_R_MISMATCH, 0);
		return;
	}
	if (!j && !(j = job_new(n, (unsigned int)key, &jn, &reason, &free_slots))) {
		send_refuse(n, from, &jn, key, reason, free_slots);
		return;
	}
	r = &j->ranks[jn.rank];
	if (r->joined) {
		n->st.rejoins++;
	} else {
		r->joined = true;
		j->njoined++;
		n->st.joins++;
	}
	if (r->left) {
		r->left = false;
		j->nleft--;
	}
	r->addr = *from;
	j->last_ns = now;
	send_accept(n, from, j, &jn);
}

/* ---- DATA and LEAVE: the job, the MAC, the rank's address ---- */

static void on_data(struct aggd *n, const struct aggd_addr *from, const uint8_t *buf,
		    size_t len, uint64_t now)
{
	struct aggd_rank *r;
	struct aggd_job *j;
	struct nza_data d;

	if (nza_decode_data(buf, len, &d)) {
		n->st.drop_malformed++;
		return;
	}
	if (d.type == NZA_RESULT) {
		n->st.drop_type++;
		return;
	}
	if (d.type == NZA_DATA && n->cfg.drop_rx_every &&
	    ++n->rx_data_n % n->cfg.drop_rx_every == 0) {
		n->st.drop_injected++;
		return;
	}
	j = job_by_handle(n, d.handle);
	if (!j) {
		n->st.drop_no_job++;
		return;
	}
	if (!nza_data_mac_ok(&j->data, buf, len)) {
		n->st.drop_mac++;
		return;
	}
	r = &j->ranks[d.rank];
	if (d.rank >= j->nranks || !r->joined || !addr_equal(&r->addr, from)) {
		n->st.drop_addr++;
		return;
	}
	j->last_ns = now;
	if (d.type == NZA_DATA) {
		aggd_slot_input(n, j, &d);
		return;
	}
	n->st.leaves++;
	if (!r->left) {
		r->left = true;
		if (++j->nleft == j->nranks)
			job_release(n, j);
	}
}

void aggd_input(struct aggd *n, const struct aggd_addr *from, const uint8_t *buf,
		size_t len, uint64_t now)
{
	int type;

	n->st.rx++;
	n->st.rx_bytes += len;
	if (!rate_ok(n, from, now)) {
		n->st.drop_rate++;
		return;
	}
	type = nza_peek_type(buf, len);
	switch (type) {
	case NZA_HELLO:
		on_hello(n, from, buf, len, now);
		break;
	case NZA_JOIN:
		on_join(n, from, buf, len, now);
		break;
	case NZA_DATA:
	case NZA_LEAVE:
	case NZA_RESULT:
		on_data(n, from, buf, len, now);
		break;
	case NZA_CHALLENGE:
	case NZA_ACCEPT:
	case NZA_REFUSE:
		n->st.drop_type++;
		break;
	default:
		n->st.drop_malformed++;
		break;
	}
}

void aggd_tick(struct aggd *n, uint64_t now)
{
	for (unsigned int i = 0; i < n->cfg.max_jobs; i++) {
		struct aggd_job *j = &n->jobs[i];

		if (j->used && now - j->last_ns > n->cfg.idle_ns) {
			job_release(n, j);
			n->st.jobs_reaped++;
		}
	}
}

void aggd_stats_print(const struct aggd *n, FILE *f)
{
	const struct aggd_stats *s = &n->st;

	fprintf(f, "aggd: rx %llu (%llu B) tx %llu (%llu B) jobs %llu slots %llu/%u"
		" joins %llu rejoins %llu leaves %llu reaped %llu challenges %llu"
		" contributions %llu results %llu resent %llu"
		" refused %llu (no_slots %llu no_jobs %llu mismatch %llu too_big %llu unknown_key %llu)"
		" drop: rate %llu malformed %llu type %llu cookie %llu join_mac %llu no_job %llu"
		" mac %llu addr %llu stale %llu early %llu dup %llu mismatch %llu injected %llu\n",
		(unsigned long long)s->rx, (unsigned long long)s->rx_bytes,
		(unsigned long long)s->tx, (unsigned long long)s->tx_bytes,
		(unsigned long long)s->jobs_active, (unsigned long long)s->slots_used,
		n->cfg.slots, (unsigned long long)s->joins, (unsigned long long)s->rejoins,
		(unsigned long long)s->leaves, (unsigned long long)s->jobs_reaped,
		(unsigned long long)s->challenges, (unsigned long long)s->contributions,
		(unsigned long long)s->results, (unsigned long long)s->results_resent,
		(unsigned long long)s->refusals,
		(unsigned long long)s->refuse_reason[NZA_R_NO_SLOTS],
		(unsigned long long)s->refuse_reason[NZA_R_NO_JOBS],
		(unsigned long long)s->refuse_reason[NZA_R_MISMATCH],
		(unsigned long long)s->refuse_reason[NZA_R_TOO_BIG],
		(unsigned long long)s->refuse_reason[NZA_R_UNKNOWN_KEY],
		(unsigned long long)s->drop_rate, (unsigned long long)s->drop_malformed,
		(unsigned long long)s->drop_type, (unsigned long long)s->drop_cookie,
		(unsigned long long)s->drop_join_mac, (unsigned long long)s->drop_no_job,
		(unsigned long long)s->drop_mac, (unsigned long long)s->drop_addr,
		(unsigned long long)s->drop_stale, (unsigned long long)s->drop_early,
		(unsigned long long)s->drop_dup, (unsigned long long)s->drop_mismatch,
		(unsigned long long)s->drop_injected);
	fflush(f);
}
