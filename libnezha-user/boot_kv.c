// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The rendezvous through a key-value store the framework provides
 * (struct nz_kv): the messages of boot_msg.c, carried as values.
 *
 *   rank 0         set  nezha/<prefix>/key          the job key, only when
 *                                                   it comes from the store
 *   rank 0         set  nezha/<prefix>/challenge    CHALLENGE (its nonce)
 *   every rank r   wait + get the challenge, then
 *                  set  nezha/<prefix>/hello/<r>    its HELLO, MAC'd
 *   rank 0         wait + get every HELLO, check its MAC, form the job
 *                  (slots, unit, job id and nonce) as nzi_serve() does
 *   rank 0         set  nezha/<prefix>/job          WELCOME with a tag per
 *                                                   rank, or ABORT
 *   rank r > 0     wait + get the job, check its tag
 *
 * Nothing listens: under torchrun the only port is the framework's own
 * store (MASTER_PORT).  Whoever can write the store can stop the job (as
 * it can stop the framework's own rendezvous), but without the key it
 * can neither join it nor learn its secret: a HELLO or an answer whose
 * MAC fails is counted and read again until a good one is there (the
 * real rank's set replaces a forged value), and the job's secret is
 * derived on every rank, never written.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "internal.h"
#include "sha256.h"

#define NZI_KV_ANSWER_MAX	(NZI_BOOT_HDR_LEN + NZI_WELCOME_MAX + \
				 (size_t)NZ_MAX_RANKS * NZI_MAC_LEN)
#define NZI_KV_REASON_MAX	240
/* Between two reads of a value whose MAC failed: a forger's head start. */
#define NZI_KV_REREAD_MS	20

static int nzi_kv_key(const struct nz_kv *kv, char *key, const char *what, int rank)
{
	const char *pfx = kv->prefix && *kv->prefix ? kv->prefix : "default";
	int n = rank >= 0 ? snprintf(key, NZ_KV_KEY_MAX + 1, "nezha/%s/%s/%d", pfx, what, rank)
			  : snprintf(key, NZ_KV_KEY_MAX + 1, "nezha/%s/%s", pfx, what);

	if (n < 0 || n > NZ_KV_KEY_MAX)
		return nzi_error(-EINVAL, "rendezvous: store key prefix \"%s\" is too long", pfx);
	return 0;
}

static int nzi_left_ms(int64_t deadline)
{
	int64_t left = deadline - nzi_now_ms();

	return left > 0 ? (int)left : 0;
}

/* Wait for key and read its value into buf[0..cap). */
static int nzi_kv_fetch(const struct nz_kv *kv, const char *key, uint8_t *buf,
			size_t cap, size_t *len, int64_t deadline)
{
	int ret = kv->wait(kv->ctx, key, nzi_left_ms(deadline));

	if (ret == -ETIMEDOUT || ret == -ETIME)
		return -ETIMEDOUT;
	if (ret)
		return nzi_error(ret, "rendezvous: the store's wait for %s failed: %s",
				 key, strerror(-ret));
	*len = 0;
	ret = kv->get(kv->ctx, key, buf, cap, len);
	if (ret == -ENOSPC)
		return nzi_error(-EPROTO, "rendezvous: %s holds %zu bytes, more than a rendezvous message",
				 key, *len);
	if (ret)
		return nzi_error(ret, "rendezvous: reading %s from the store failed: %s",
				 key, strerror(-ret));
	return 0;
}

static int nzi_kv_set(const struct nz_kv *kv, const char *key, const void *val,
		      size_t len)
{
	int ret = kv->set(kv->ctx, key, val, len);

	if (ret)
		return nzi_error(ret, "rendezvous: writing %s to the store failed: %s",
				 key, strerror(-ret));
	return 0;
}

/* Give a forged value time to be replaced; false when the deadline passed. */
static bool nzi_kv_reread(int64_t deadline)
{
	if (nzi_left_ms(deadline) <= NZI_KV_REREAD_MS)
		return false;
	usleep(NZI_KV_REREAD_MS * 1000);
	return true;
}

/* Rank 0 could not form the job: tell the others why, then return err. */
static int nzi_kv_abort(const struct nz_kv *kv, const char *jobkey, int err)
{
	uint8_t msg[NZI_BOOT_HDR_LEN + 4 + NZI_KV_REASON_MAX];
	const char *why = nz_last_error();
	size_t len;

	if (!strncmp(why, "rendezvous: ", 12))
		why += 12;
	len = nzi_boot_encode_abort(msg, sizeof(msg), -err, why);
	kv->set(kv->ctx, jobkey, msg, len);
	return err;
}

/* The chunk unit: the one asked for (the same everywhere), or chosen. */
static int nzi_kv_unit(const struct nzi_boot_hello *h, unsigned int size,
		       struct nzi_boot_job *job)
{
	unsigned int asked = 0, by = 0;

	for (unsigned int r = 0; r < size; r++) {
		if (!h[r].unit || h[r].unit == asked)
			continue;
		if (asked)
			return nzi_error(-EINVAL, "rendezvous: ranks %u and %u ask for different chunk units (%u and %u bytes): pass the same nz_comm_opts.unit, or 0, on every rank",
					 by, r, asked, h[r].unit);
		asked = h[r].unit;
		by = r;
	}
	job->unit = asked ? asked : nzi_unit_for_speed(job->min_speed_mbps);
	return 0;
}

/* Rank 0: read rank r's HELLO until one under the key answers nonce_s. */
static int nzi_kv_hello(const struct nzi_boot_cfg *cfg, const struct nz_kv *kv,
			const uint8_t *key, const uint8_t *nonce_s, int r,
			struct nzi_boot_hello *h, struct nzi_boot_job *job,
			int64_t deadline)
{
	uint8_t buf[NZI_BOOT_HELLO_MAX];
	char name[NZ_KV_KEY_MAX + 1];
	size_t len;
	int ret;

	ret = nzi_kv_key(kv, name, "hello", r);
	for (;;) {
		if (!ret)
			ret = nzi_kv_fetch(kv, name, buf, sizeof(buf), &len, deadline);
		if (ret == -ETIMEDOUT)
			return nzi_error(ret, "rendezvous: rank %d of %d did not write %s to the store within %d ms%s",
					 r, cfg->size, name, cfg->timeout_ms,
					 job->bad_mac ? " (HELLOs under another key were there: does every rank have this job's key?)" : "");
		if (!ret)
			ret = nzi_boot_parse_hello(buf, len, cfg->size, key, nonce_s, h);
		if (!ret && h->rank != r)
			ret = nzi_error(-EPROTO, "rendezvous: %s holds rank %d's HELLO", name, h->rank);
		/* Not under this key, or not an answer to this challenge. */
		if (ret != -EKEYREJECTED && ret != -EPROTO)
			return ret;
		job->rejected++;
		job->bad_mac += ret == -EKEYREJECTED;
		nzi_log(cfg->verbose, 0, "dropped %s: %s", name, nz_last_error());
		if (!nzi_kv_reread(deadline))
			ret = -ETIMEDOUT;
		else
			ret = 0;
	}
}

static int nzi_kv_form(const struct nzi_boot_cfg *cfg, const struct nz_kv *kv,
		       const uint8_t *key, struct nzi_boot_job *job, int64_t deadline)
{
	unsigned int size = (unsigned int)cfg->size;
	const struct nzi_rail *rails[NZ_MAX_RANKS];
	uint8_t nonce_s[NZI_NONCE_LEN], ch[NZI_BOOT_CHALLENGE_LEN];
	uint8_t hash[NZI_SHA256_LEN];
	unsigned int nrails[NZ_MAX_RANKS];
	char name[NZ_KV_KEY_MAX + 1];
	struct nzi_boot_hello *h;
	uint8_t *msg;
	size_t len;
	int ret;

	ret = nzi_random(nonce_s, sizeof(nonce_s));
	if (!ret)
		ret = nzi_kv_key(kv, name, "challenge", -1);
	if (ret)
		return ret;
	nzi_boot_encode_challenge(ch, nonce_s);
	ret = nzi_kv_set(kv, name, ch, sizeof(ch));
	if (ret)
		return ret;
	h = calloc(size, sizeof(*h));
	if (!h)
		return nzi_error(-ENOMEM, "rendezvous: out of memory");
	h[0].unit = cfg->unit;
	h[0].nrails = cfg->nrails;
	memcpy(h[0].rails, cfg->rails, cfg->nrails * sizeof(*cfg->rails));
	for (unsigned int r = 1; r < size; r++) {
		ret = nzi_kv_hello(cfg, kv, key, nonce_s, (int)r, &h[r], job, deadline);
		if (ret)
			goto out;
	}
	for (unsigned int r = 0; r < size; r++) {
		rails[r] = h[r].rails;
		nrails[r] = h[r].nrails;
	}
	ret = nzi_boot_slots(job, size, rails, nrails);
	if (ret) {
		ret = nzi_error(ret, "rendezvous: out of memory");
		goto out;
	}
	if (!job->nrails) {
		ret = nzi_error(-ENODEV, "rendezvous: no rail name is configured (up, weight > 0) on every rank; rank 0 has %u such rails: compare nezhactl rail show on the nodes",
				nrails[0]);
		goto out;
	}
	ret = nzi_kv_unit(h, size, job);
	if (!ret)
		ret = nzi_boot_identity(job);
	if (ret)
		goto out;
	/* One value for everyone: the tag of rank r is at index r - 1. */
	msg = nzi_boot_encode_welcome(job, size - 1, &len, hash);
	if (!msg) {
		ret = nzi_error(-ENOMEM, "rendezvous: out of memory");
		goto out;
	}
	for (unsigned int r = 1; r < size; r++)
		nzi_boot_welcome_tag(key, hash, nonce_s, (int)r, h[r].nonce_c,
				     msg + len - (size_t)(size - r) * NZI_MAC_LEN);
	ret = nzi_kv_key(kv, name, "job", -1);
	if (!ret)
		ret = nzi_kv_set(kv, name, msg, len);
	free(msg);
	if (ret)
		goto out;
	nzi_boot_derive_secret(key, job);
	nzi_log(cfg->verbose, 0, "job %016llx formed through the store: %d ranks, %u rail slots, %u values dropped",
		(unsigned long long)job->job_id, cfg->size, job->nrails, job->rejected);
out:
	free(h);
	return ret;
}

/* Rank r > 0: its HELLO, then rank 0's answer to it. */
static int nzi_kv_join(const struct nzi_boot_cfg *cfg, const struct nz_kv *kv,
		       const uint8_t *key, struct nzi_boot_job *job, int64_t deadline)
{
	uint8_t nonce_s[NZI_NONCE_LEN], nonce_c[NZI_NONCE_LEN];
	uint8_t ch[NZI_BOOT_CHALLENGE_LEN], hello[NZI_BOOT_HELLO_MAX], *ans;
	struct nzi_hello_auth auth = { .key = key, .nonce_s = nonce_s,
				       .nonce_c = nonce_c };
	char name[NZ_KV_KEY_MAX + 1], jobname[NZ_KV_KEY_MAX + 1];
	size_t len;
	int ret;

	ret = nzi_kv_key(kv, name, "challenge", -1);
	if (!ret)
		ret = nzi_kv_key(kv, jobname, "job", -1);
	if (!ret)
		ret = nzi_kv_fetch(kv, name, ch, sizeof(ch), &len, deadline);
	if (ret == -ETIMEDOUT)
		return nzi_error(ret, "rendezvous: rank 0 did not write %s to the store within %d ms",
				 name, cfg->timeout_ms);
	if (!ret)
		ret = nzi_boot_parse_challenge(ch, len, nonce_s);
	if (!ret)
		ret = nzi_random(nonce_c, sizeof(nonce_c));
	if (!ret)
		ret = nzi_kv_key(kv, name, "hello", cfg->rank);
	if (ret)
		return ret;
	len = nzi_boot_encode_hello(hello, &auth, cfg->rank, cfg->size, cfg->rails,
				    cfg->nrails, cfg->unit);
	ret = nzi_kv_set(kv, name, hello, len);
	if (ret)
		return ret;
	nzi_log(cfg->verbose, cfg->rank, "wrote %s; waiting for rank 0's %s", name, jobname);
	ans = malloc(NZI_KV_ANSWER_MAX);
	if (!ans)
		return nzi_error(-ENOMEM, "rendezvous: out of memory");
	for (;;) {
		ret = nzi_kv_fetch(kv, jobname, ans, NZI_KV_ANSWER_MAX, &len, deadline);
		if (ret == -ETIMEDOUT) {
			nzi_error(ret, "rendezvous: rank 0 did not write %s to the store within %d ms (a rank missing?)%s",
				  jobname, cfg->timeout_ms,
				  job->bad_mac ? " (an answer there did not authenticate: does every rank have this job's key?)" : "");
			break;
		}
		if (!ret)
			ret = nzi_boot_parse_answer(cfg, &auth, ans, len, job);
		if (ret != -EKEYREJECTED)
			break;
		/* Not rank 0's answer to this HELLO (forged, or stale). */
		job->bad_mac++;
		nzi_log(cfg->verbose, cfg->rank, "dropped %s: %s", jobname, nz_last_error());
		if (!nzi_kv_reread(deadline)) {
			ret = nzi_error(-ETIMEDOUT, "rendezvous: no answer in %s authenticated within %d ms: does every rank have this job's key?",
					jobname, cfg->timeout_ms);
			break;
		}
	}
	free(ans);
	return ret;
}

int nzi_bootstrap_kv(const struct nzi_boot_cfg *cfg, const struct nz_kv *kv,
		     struct nzi_boot_job *job)
{
	char name[NZ_KV_KEY_MAX + 1], jobkey[NZ_KV_KEY_MAX + 1];
	uint8_t key[NZ_JOB_KEY_LEN];
	int64_t deadline;
	size_t len;
	int ret;

	if (!cfg || !job || !kv || !kv->set || !kv->wait || !kv->get)
		return nzi_error(-EINVAL, "rendezvous: the store needs set, wait and get callbacks");
	memset(job, 0, sizeof(*job));
	if (cfg->size < 1 || cfg->size > NZ_MAX_RANKS || cfg->rank < 0 ||
	    cfg->rank >= cfg->size || cfg->nrails > NZ_MAX_RAILS || cfg->timeout_ms <= 0)
		return nzi_error(-EINVAL, "rendezvous: rank %d of %d, %u rails, timeout %d ms: out of range",
				 cfg->rank, cfg->size, cfg->nrails, cfg->timeout_ms);
	if (!cfg->key && !cfg->key_from_store)
		return nzi_error(-ENOKEY, "rendezvous: no job key for a job of %d ranks", cfg->size);
	ret = nzi_kv_key(kv, jobkey, "job", -1);
	if (!ret)
		ret = nzi_kv_key(kv, name, "key", -1);
	if (ret)
		return ret;
	deadline = nzi_now_ms() + cfg->timeout_ms;
	if (cfg->key) {
		memcpy(key, cfg->key, sizeof(key));
	} else if (cfg->rank == 0) {
		/* The store's readers can join: what the caller chose. */
		ret = nzi_random(key, sizeof(key));
		if (!ret)
			ret = nzi_kv_set(kv, name, key, sizeof(key));
	} else {
		ret = nzi_kv_fetch(kv, name, key, sizeof(key), &len, deadline);
		if (ret == -ETIMEDOUT)
			nzi_error(ret, "rendezvous: rank 0 did not write %s to the store within %d ms",
				  name, cfg->timeout_ms);
		else if (!ret && len != sizeof(key))
			ret = nzi_error(-EPROTO, "rendezvous: %s holds %zu bytes, not a job key", name, len);
	}
	if (ret)
		goto out;
	if (cfg->rank == 0) {
		ret = nzi_kv_form(cfg, kv, key, job, deadline);
		if (ret && ret != -ENOMEM)
			nzi_kv_abort(kv, jobkey, ret);
	} else {
		ret = nzi_kv_join(cfg, kv, key, job, deadline);
	}
out:
	nzi_wipe(key, sizeof(key));
	if (ret)
		nzi_boot_job_free(job);
	return ret;
}
