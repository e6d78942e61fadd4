// SPDX-License-Identifier: GPL-2.0
/*
 * Host unit tests of the rendezvous through a framework's key-value store
 * (boot_kv.c).  The ranks of a job are threads of this process, the store
 * is an in-memory table behind a mutex (as torch's TCPStore is a table
 * behind a socket), the rails are fake lists: no module, no socket.
 *
 * The store is also the attacker's: whoever can write it (anyone who
 * reaches torch's TCPStore) forges HELLOs and answers, or replays those
 * of an earlier job; without the job key none is believed, and nothing
 * in the store lets its readers derive the job's secret (issue 20).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include <unistd.h>
#include "internal.h"
#include "tap.h"

#define MAXP	8
#define MAXKEYS	64

struct kv_store {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned int n, sets;
	/* A set of `hold` waits (up to 2 s) until some rank has read it. */
	const char *hold;
	unsigned int hold_gets;
	char key[MAXKEYS][NZ_KV_KEY_MAX + 1];
	uint8_t *val[MAXKEYS];
	size_t len[MAXKEYS];
};

static int kv_find(struct kv_store *s, const char *key)
{
	for (unsigned int i = 0; i < s->n; i++)
		if (!strcmp(s->key[i], key))
			return (int)i;
	return -1;
}

/* CLOCK_REALTIME timeout_ms from now, for pthread_cond_timedwait(). */
static struct timespec kv_deadline(int timeout_ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += timeout_ms / 1000;
	ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	return ts;
}

static int kv_set(void *ctx, const char *key, const void *val, size_t len)
{
	struct kv_store *s = ctx;
	int i;

	if (strlen(key) > NZ_KV_KEY_MAX)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	if (s->hold && !strcmp(key, s->hold)) {
		struct timespec ts = kv_deadline(2000);

		while (!s->hold_gets && !pthread_cond_timedwait(&s->cond, &s->lock, &ts))
			;
	}
	i = kv_find(s, key);
	if (i < 0 && s->n < MAXKEYS) {
		i = (int)s->n++;
		strcpy(s->key[i], key);
	}
	if (i >= 0) {
		free(s->val[i]);
		s->val[i] = malloc(len ? len : 1);
		memcpy(s->val[i], val, len);
		s->len[i] = len;
		s->sets++;
	}
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return i >= 0 ? 0 : -ENOSPC;
}

static int kv_wait(void *ctx, const char *key, int timeout_ms)
{
	struct kv_store *s = ctx;
	struct timespec ts = kv_deadline(timeout_ms);
	int ret = 0;

	pthread_mutex_lock(&s->lock);
	while (kv_find(s, key) < 0 && !ret)
		ret = pthread_cond_timedwait(&s->cond, &s->lock, &ts);
	if (kv_find(s, key) >= 0)
		ret = 0;
	pthread_mutex_unlock(&s->lock);
	return ret ? -ETIMEDOUT : 0;
}

static int kv_get(void *ctx, const char *key, void *buf, size_t cap, size_t *len)
{
	struct kv_store *s = ctx;
	int i, ret = 0;

	pthread_mutex_lock(&s->lock);
	if (s->hold && !strcmp(key, s->hold)) {
		s->hold_gets++;
		pthread_cond_broadcast(&s->cond);
	}
	i = kv_find(s, key);
	if (i < 0) {
		ret = -ENOENT;
	} else {
		*len = s->len[i];
		if (s->len[i] > cap)
			ret = -ENOSPC;
		else
			memcpy(buf, s->val[i], s->len[i]);
	}
	pthread_mutex_unlock(&s->lock);
	return ret;
}

static void kv_reset(struct kv_store *s)
{
	for (unsigned int i = 0; i < s->n; i++) {
		free(s->val[i]);
		s->val[i] = NULL;
	}
	s->n = s->sets = 0;
	s->hold = NULL;
	s->hold_gets = 0;
}

struct rank_arg {
	struct nz_kv kv;
	struct nzi_boot_cfg cfg;
	struct nzi_rail rails[NZ_MAX_RAILS];
	struct nzi_boot_job job;
	int ret;
	char err[512];
};

static struct kv_store store = {
	.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER,
};
static uint8_t job_key[NZ_JOB_KEY_LEN], other_key[NZ_JOB_KEY_LEN];

/* Some store value holds these bytes. */
static bool in_store(const void *what, size_t len)
{
	bool found = false;

	pthread_mutex_lock(&store.lock);
	for (unsigned int i = 0; i < store.n; i++)
		found |= memmem(store.val[i], store.len[i], what, len) != NULL;
	pthread_mutex_unlock(&store.lock);
	return found;
}

/* A copy of the value of key (NULL if none); *len its length. */
static uint8_t *kv_copy(const char *key, size_t *len)
{
	uint8_t *v = NULL;
	int i;

	pthread_mutex_lock(&store.lock);
	i = kv_find(&store, key);
	if (i >= 0) {
		v = malloc(store.len[i]);
		memcpy(v, store.val[i], store.len[i]);
		*len = store.len[i];
	}
	pthread_mutex_unlock(&store.lock);
	return v;
}

static void *rank_main(void *p)
{
	struct rank_arg *a = p;

	a->ret = nzi_bootstrap_kv(&a->cfg, &a->kv, &a->job);
	snprintf(a->err, sizeof(a->err), "%s", nz_last_error());
	return NULL;
}

/* Rank r's rails: "rail0" and "rail1" (10.<k>.0.<r+1>), maybe "ib0" too. */
static void setup(struct rank_arg *a, int rank, int size, int wsize,
		  unsigned int nrails, unsigned int unit, int tmo)
{
	memset(a, 0, sizeof(*a));
	a->kv = (struct nz_kv){ .ctx = &store, .set = kv_set, .wait = kv_wait,
				.get = kv_get, .prefix = "pg0" };
	for (unsigned int k = 0; k < nrails; k++) {
		snprintf(a->rails[k].name, NZ_RAIL_NAME_LEN, k < 2 ? "rail%u" : "ib%u", k);
		a->rails[k].addr = htonl(0x0a000001u | k << 16 | (uint32_t)rank);
		a->rails[k].port = htons((uint16_t)(7470 + k));
		a->rails[k].speed_mbps = 40;
	}
	a->cfg = (struct nzi_boot_cfg){ .rank = rank, .size = wsize ? wsize : size,
					.timeout_ms = tmo, .rails = a->rails,
					.nrails = nrails, .unit = unit, .key = job_key };
}

static pthread_t threads[MAXP];

static void start(struct rank_arg *a, int n, const int *present)
{
	for (int r = 0; r < n; r++)
		if (!present || present[r])
			pthread_create(&threads[r], NULL, rank_main, &a[r]);
}

static void finish(int n, const int *present)
{
	for (int r = 0; r < n; r++)
		if (!present || present[r])
			pthread_join(threads[r], NULL);
}

static void run(struct rank_arg *a, int n, const int *present)
{
	start(a, n, present);
	finish(n, present);
}

static void test_formation(int size)
{
	struct rank_arg a[MAXP];
	bool same = true, addrs = true;

	kv_reset(&store);
	for (int r = 0; r < size; r++)
		setup(&a[r], r, size, 0, r == 1 ? 3 : 2, 0, 5000);
	run(a, size, NULL);
	for (int r = 0; r < size; r++) {
		if (a[r].ret) {
			same = false;
			tap_diag("rank %d: %d %s", r, a[r].ret, a[r].err);
			continue;
		}
		same &= a[r].job.job_id == a[0].job.job_id && a[r].job.job_id &&
			!memcmp(a[r].job.secret, a[0].job.secret, NZ_SECRET_LEN) &&
			a[r].job.nrails == 2 && a[r].job.unit == a[0].job.unit;
		for (int p = 0; p < size && same; p++)
			for (int k = 0; k < 2; k++)
				addrs &= a[r].job.addrs[p * 2 + k].addr ==
					 htonl(0x0a000001u | (uint32_t)k << 16 | (uint32_t)p);
	}
	tap_ok(same, "kv: %d ranks agree on job id, secret, 2 common rails (rank 1's ib2 left out) and unit", size);
	tap_ok(same && addrs, "kv: %d ranks: address table has every rank's rail addresses", size);
	tap_ok(same && !strcmp(a[0].job.rails[0], "rail0") && !strcmp(a[0].job.rails[1], "rail1"),
	       "kv: slots in rank 0's order");
	tap_ok(store.sets == (unsigned int)size + 1, "kv: %d ranks write %d keys (a challenge, one HELLO each but rank 0's, one job)",
	       size, size + 1);
	tap_ok(same && in_store(a[0].job.nonce, NZI_NONCE_LEN) &&
	       !in_store(a[0].job.secret, NZ_SECRET_LEN) && !in_store(job_key, NZ_JOB_KEY_LEN),
	       "kv: the store holds the job's nonce, neither its secret nor the key");
	for (int r = 0; r < size; r++)
		nzi_boot_job_free(&a[r].job);
}

static void test_missing_rank(void)
{
	struct rank_arg a[3];
	int present[3] = { 1, 1, 0 };
	int64_t t0 = nzi_now_ms();

	kv_reset(&store);
	for (int r = 0; r < 3; r++)
		setup(&a[r], r, 3, 0, 2, 0, 400);
	run(a, 3, present);
	tap_ok(a[0].ret == -ETIMEDOUT && strstr(a[0].err, "rank 2 of 3"),
	       "kv: rank 0 times out naming the missing rank (%d: %s)", a[0].ret, a[0].err);
	tap_ok(a[1].ret == -ETIMEDOUT, "kv: rank 1 fails too (%d: %s)", a[1].ret, a[1].err);
	tap_ok(nzi_now_ms() - t0 < 2000, "kv: within the timeout (%lld ms)",
	       (long long)(nzi_now_ms() - t0));
}

static void test_mismatch(void)
{
	struct rank_arg a[2];

	kv_reset(&store);
	setup(&a[0], 0, 2, 0, 2, 0, 3000);
	setup(&a[1], 1, 2, 3, 2, 0, 3000);
	run(a, 2, NULL);
	tap_ok(a[0].ret == -EINVAL && strstr(a[0].err, "size mismatch"),
	       "kv: rank 0 refuses a HELLO of another job size (%s)", a[0].err);
	tap_ok(a[1].ret == -EINVAL && strstr(a[1].err, "rank 0 stopped rank 1"),
	       "kv: the other rank gets rank 0's reason through the store (%s)", a[1].err);

	kv_reset(&store);
	setup(&a[0], 0, 2, 0, 2, 16384, 3000);
	setup(&a[1], 1, 2, 0, 2, 32768, 3000);
	run(a, 2, NULL);
	tap_ok(a[0].ret == -EINVAL && a[1].ret == -EINVAL && strstr(a[1].err, "chunk units"),
	       "kv: different chunk units fail every rank (%s)", a[1].err);

	kv_reset(&store);
	setup(&a[0], 0, 2, 0, 2, 0, 3000);
	setup(&a[1], 1, 2, 0, 0, 0, 3000);
	run(a, 2, NULL);
	tap_ok(a[0].ret == -ENODEV && a[1].ret == -ENODEV,
	       "kv: no common rail: -ENODEV on both ranks (%d, %d)", a[0].ret, a[1].ret);
}

static void test_args(void)
{
	struct rank_arg a;

	setup(&a, 0, 2, 0, 2, 0, 1000);
	a.kv.wait = NULL;
	tap_ok(nzi_bootstrap_kv(&a.cfg, &a.kv, &a.job) == -EINVAL,
	       "kv: a store without wait is refused");
	setup(&a, 0, 2, 0, 2, 0, 1000);
	a.kv.prefix = "a-prefix-that-is-much-too-long-to-fit-into-one-key-of-the-store-because-keys-are-bounded-by-NZ_KV_KEY_MAX-bytes-xxxxxxxxxxxxxx";
	tap_ok(nzi_bootstrap_kv(&a.cfg, &a.kv, &a.job) == -EINVAL,
	       "kv: an over-long prefix is refused (%s)", nz_last_error());
}

/* The store's writers forge a HELLO of rank 1 before it comes. */
static void test_forged_hello(void)
{
	struct rank_arg a[2];
	uint8_t msg[NZI_BOOT_HELLO_MAX], nonce_s[NZI_NONCE_LEN] = { 0 }, nonce_c[NZI_NONCE_LEN] = { 0 };
	struct nzi_hello_auth auth = { .key = other_key, .nonce_s = nonce_s, .nonce_c = nonce_c };
	uint8_t *ch;
	size_t len;

	kv_reset(&store);
	setup(&a[0], 0, 2, 0, 2, 0, 3000);
	setup(&a[1], 1, 2, 0, 2, 0, 3000);
	start(a, 1, NULL);		/* rank 0 alone: it writes its challenge */
	kv_wait(&store, "nezha/pg0/challenge", 1000);
	ch = kv_copy("nezha/pg0/challenge", &len);
	if (ch && len == NZI_BOOT_CHALLENGE_LEN)
		memcpy(nonce_s, ch + NZI_BOOT_HDR_LEN, NZI_NONCE_LEN);
	free(ch);
	/* Right challenge, another key: rank 0 must not take it. */
	len = nzi_boot_encode_hello(msg, &auth, 1, 2, a[1].rails, 2, 0);
	kv_set(&store, "nezha/pg0/hello/1", msg, len);
	usleep(100000);
	pthread_create(&threads[1], NULL, rank_main, &a[1]);
	finish(2, NULL);
	tap_ok(!a[0].ret && !a[1].ret && a[0].job.job_id == a[1].job.job_id &&
	       !memcmp(a[0].job.secret, a[1].job.secret, NZ_SECRET_LEN),
	       "kv: a HELLO of rank 1 under another key, there first: the real rank 1 still joins (%d, %d: %s)",
	       a[0].ret, a[1].ret, a[1].err);
	tap_ok(a[0].job.bad_mac >= 1, "kv: rank 0 dropped the forged HELLO (%u)", a[0].job.bad_mac);
	for (int r = 0; r < 2; r++)
		nzi_boot_job_free(&a[r].job);
}

/*
 * Job A's HELLO of rank 1, replayed into job B's store before rank 1
 * writes its own: rank 0 must not form B with A's rails.  Before the
 * challenge (issue 20) it did: nothing told the two apart.
 */
static void test_replay(void)
{
	struct rank_arg a[2];
	uint8_t *old;
	size_t len = 0;

	kv_reset(&store);
	setup(&a[0], 0, 2, 0, 2, 0, 3000);
	setup(&a[1], 1, 2, 0, 2, 0, 3000);
	a[1].rails[0].addr = htonl(0x0a0000aa);	/* job A's rank 1 elsewhere */
	run(a, 2, NULL);
	old = kv_copy("nezha/pg0/hello/1", &len);
	tap_ok(!a[0].ret && !a[1].ret && old, "kv: job A forms (%d, %d)", a[0].ret, a[1].ret);
	for (int r = 0; r < 2; r++)
		nzi_boot_job_free(&a[r].job);

	kv_reset(&store);
	if (old)
		kv_set(&store, "nezha/pg0/hello/1", old, len);
	free(old);
	setup(&a[0], 0, 2, 0, 2, 0, 3000);
	setup(&a[1], 1, 2, 0, 2, 0, 3000);
	start(a, 1, NULL);
	usleep(150000);
	pthread_create(&threads[1], NULL, rank_main, &a[1]);
	finish(2, NULL);
	tap_ok(!a[0].ret && !a[1].ret && a[0].job.addrs &&
	       a[0].job.addrs[2].addr == htonl(0x0a000001u | 1u),
	       "kv: job B forms with rank 1's own rails, not the replayed ones (%d, %d)",
	       a[0].ret, a[1].ret);
	tap_ok(a[0].job.bad_mac >= 1, "kv: rank 0 dropped the replayed HELLO (%u)", a[0].job.bad_mac);
	for (int r = 0; r < 2; r++)
		nzi_boot_job_free(&a[r].job);
}

/* A forged answer in "job" before rank 0 writes its own. */
static void test_forged_answer(void)
{
	struct rank_arg a[2];
	struct nzi_boot_job fake = { .job_id = 42, .size = 2, .nrails = 1, .unit = 65536 };
	struct nz_comm_addr addrs[2] = { { 0 } };
	uint8_t hash[32], *msg;
	size_t len;

	kv_reset(&store);
	strcpy(fake.rails[0], "rail0");
	fake.addrs = addrs;
	msg = nzi_boot_encode_welcome(&fake, 1, &len, hash);
	nzi_boot_welcome_tag(other_key, hash, hash, 1, hash, msg + len - 32);
	kv_set(&store, "nezha/pg0/job", msg, len);
	free(msg);
	/* Rank 0's answer waits until rank 1 has read the forged one. */
	store.hold = "nezha/pg0/job";
	setup(&a[0], 0, 2, 0, 2, 0, 3000);
	setup(&a[1], 1, 2, 0, 2, 0, 3000);
	start(a, 2, NULL);
	finish(2, NULL);
	tap_ok(!a[0].ret && !a[1].ret && a[1].job.job_id == a[0].job.job_id && a[1].job.job_id != 42,
	       "kv: a forged answer is not taken; rank 1 gets rank 0's (%d, %d: %s)",
	       a[0].ret, a[1].ret, a[1].err);
	tap_ok(a[1].job.bad_mac >= 1, "kv: rank 1 dropped the forged answer (%u)", a[1].job.bad_mac);
	for (int r = 0; r < 2; r++)
		nzi_boot_job_free(&a[r].job);
}

static void test_keys(void)
{
	struct rank_arg a[3];
	uint8_t secret[NZ_SECRET_LEN], *k;
	size_t len = 0;

	/* Rank 1 has another key: nobody joins, both say why. */
	kv_reset(&store);
	setup(&a[0], 0, 2, 0, 2, 0, 500);
	setup(&a[1], 1, 2, 0, 2, 0, 500);
	a[1].cfg.key = other_key;
	run(a, 2, NULL);
	tap_ok(a[0].ret == -ETIMEDOUT && strstr(a[0].err, "another key"),
	       "kv: rank 1 with another key: rank 0 times out saying so (%s)", a[0].err);
	tap_ok(a[1].ret == -ETIMEDOUT, "kv: and rank 1 times out (%d: %s)", a[1].ret, a[1].err);

	setup(&a[0], 0, 2, 0, 2, 0, 500);
	a[0].cfg.key = NULL;
	tap_ok(nzi_bootstrap_kv(&a[0].cfg, &a[0].kv, &a[0].job) == -ENOKEY,
	       "kv: no key, not from the store -> ENOKEY");

	/* The key from the store: rank 0 draws it, the others read it. */
	kv_reset(&store);
	for (int r = 0; r < 3; r++) {
		setup(&a[r], r, 3, 0, 2, 0, 3000);
		a[r].cfg.key = NULL;
		a[r].cfg.key_from_store = true;
	}
	run(a, 3, NULL);
	k = kv_copy("nezha/pg0/key", &len);
	tap_ok(!a[0].ret && !a[1].ret && !a[2].ret && a[1].job.job_id == a[0].job.job_id &&
	       !memcmp(a[2].job.secret, a[0].job.secret, NZ_SECRET_LEN) && k && len == NZ_JOB_KEY_LEN,
	       "kv: NEZHA_KEY_FROM_STORE: 3 ranks form the job with the key rank 0 wrote (%d %d %d)",
	       a[0].ret, a[1].ret, a[2].ret);
	tap_ok(!in_store(a[0].job.secret, NZ_SECRET_LEN),
	       "kv: even then the secret itself is not in the store");
	free(k);
	memcpy(secret, a[0].job.secret, sizeof(secret));
	for (int r = 0; r < 3; r++)
		nzi_boot_job_free(&a[r].job);

	/* Two jobs, one key: two secrets. */
	kv_reset(&store);
	setup(&a[0], 0, 2, 0, 2, 0, 3000);
	setup(&a[1], 1, 2, 0, 2, 0, 3000);
	run(a, 2, NULL);
	memcpy(secret, a[0].job.secret, sizeof(secret));
	nzi_boot_job_free(&a[0].job);
	nzi_boot_job_free(&a[1].job);
	kv_reset(&store);
	setup(&a[0], 0, 2, 0, 2, 0, 3000);
	setup(&a[1], 1, 2, 0, 2, 0, 3000);
	run(a, 2, NULL);
	tap_ok(!a[0].ret && memcmp(secret, a[0].job.secret, NZ_SECRET_LEN) &&
	       !memcmp(a[1].job.secret, a[0].job.secret, NZ_SECRET_LEN),
	       "kv: two jobs under one key: two secrets, each the same on its ranks");
	nzi_boot_job_free(&a[0].job);
	nzi_boot_job_free(&a[1].job);
}

int main(void)
{
	if (nzi_random(job_key, sizeof(job_key)) || nzi_random(other_key, sizeof(other_key)))
		return 1;
	test_formation(2);
	test_formation(4);
	test_formation(8);
	test_missing_rank();
	test_mismatch();
	test_args();
	test_forged_hello();
	test_replay();
	test_forged_answer();
	test_keys();
	kv_reset(&store);
	tap_plan(tap_n);
	return tap_failed ? 1 : 0;
}
