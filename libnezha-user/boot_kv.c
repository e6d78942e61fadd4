// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The rendezvous through a key-value store the framework provides
 * (struct nz_kv): the messages of bootstrap.c, carried as values.
 *
 *   every rank r   set  nezha/<prefix>/hello/<r>   its HELLO
 *   rank 0         wait + get every HELLO, form the job (slots, unit,
 *                  job id and secret) as nzi_serve() does
 *   rank 0         set  nezha/<prefix>/job         WELCOME, or ABORT
 *   rank r > 0     wait + get nezha/<prefix>/job
 *
 * Nothing listens: under torchrun the only port is the framework's own
 * store (MASTER_PORT).  The job's secret is written once, by rank 0, when
 * every rank has said it is there.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

#define NZI_KV_ANSWER_MAX	(NZI_BOOT_HDR_LEN + 8 + NZ_SECRET_LEN + 12 + \
				 NZ_MAX_RAILS * NZ_RAIL_NAME_LEN + \
				 (size_t)NZ_MAX_RANKS * NZ_MAX_RAILS * 8)
#define NZI_KV_REASON_MAX	240

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

/* Rank 0 could not form the job: tell the others why, then return err. */
static int nzi_kv_abort(const struct nz_kv *kv, const char *jobkey, int err)
{
	uint8_t msg[NZI_BOOT_HDR_LEN + 4 + NZI_KV_REASON_MAX];
	size_t len = nzi_boot_encode_abort(msg, sizeof(msg), -err, nz_last_error());

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

static int nzi_kv_form(const struct nzi_boot_cfg *cfg, const struct nz_kv *kv,
		       struct nzi_boot_job *job, int64_t deadline)
{
	unsigned int size = (unsigned int)cfg->size;
	const struct nzi_rail *rails[NZ_MAX_RANKS];
	unsigned int nrails[NZ_MAX_RANKS];
	uint8_t buf[NZI_BOOT_HELLO_MAX];
	char key[NZ_KV_KEY_MAX + 1];
	struct nzi_boot_hello *h;
	uint8_t *msg;
	size_t len;
	int ret;

	h = calloc(size, sizeof(*h));
	if (!h)
		return nzi_error(-ENOMEM, "rendezvous: out of memory");
	h[0].unit = cfg->unit;
	h[0].nrails = cfg->nrails;
	memcpy(h[0].rails, cfg->rails, cfg->nrails * sizeof(*cfg->rails));
	for (unsigned int r = 1; r < size; r++) {
		ret = nzi_kv_key(kv, key, "hello", (int)r);
		if (!ret)
			ret = nzi_kv_fetch(kv, key, buf, sizeof(buf), &len, deadline);
		if (ret == -ETIMEDOUT)
			nzi_error(ret, "rendezvous: rank %u of %u did not write %s to the store within %d ms",
				  r, size, key, cfg->timeout_ms);
		if (!ret)
			ret = nzi_boot_parse_hello(buf, len, cfg->size, &h[r]);
		if (!ret && h[r].rank != (int)r)
			ret = nzi_error(-EPROTO, "rendezvous: %s holds rank %d's HELLO", key, h[r].rank);
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
	msg = nzi_boot_encode_welcome(job, &len);
	if (!msg) {
		ret = nzi_error(-ENOMEM, "rendezvous: out of memory");
		goto out;
	}
	ret = nzi_kv_key(kv, key, "job", -1);
	if (!ret) {
		ret = kv->set(kv->ctx, key, msg, len);
		if (ret)
			nzi_error(ret, "rendezvous: writing %s to the store failed: %s",
				  key, strerror(-ret));
	}
	free(msg);
	nzi_log(cfg->verbose, 0, "job %016llx formed through the store: %d ranks, %u rail slots",
		(unsigned long long)job->job_id, cfg->size, job->nrails);
out:
	free(h);
	return ret;
}

int nzi_bootstrap_kv(const struct nzi_boot_cfg *cfg, const struct nz_kv *kv,
		     struct nzi_boot_job *job)
{
	uint8_t hello[NZI_BOOT_HELLO_MAX], *ans;
	char key[NZ_KV_KEY_MAX + 1], jobkey[NZ_KV_KEY_MAX + 1];
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
	ret = nzi_kv_key(kv, jobkey, "job", -1);
	if (ret)
		return ret;
	deadline = nzi_now_ms() + cfg->timeout_ms;
	if (cfg->rank == 0) {
		ret = nzi_kv_form(cfg, kv, job, deadline);
		if (ret && ret != -ENOMEM) {
			nzi_kv_abort(kv, jobkey, ret);
			nzi_boot_job_free(job);
		}
		return ret;
	}
	len = nzi_boot_encode_hello(hello, cfg->rank, cfg->size, cfg->rails,
				    cfg->nrails, cfg->unit);
	ret = nzi_kv_key(kv, key, "hello", cfg->rank);
	if (ret)
		return ret;
	ret = kv->set(kv->ctx, key, hello, len);
	if (ret)
		return nzi_error(ret, "rendezvous: writing %s to the store failed: %s",
				 key, strerror(-ret));
	nzi_log(cfg->verbose, cfg->rank, "wrote %s; waiting for rank 0's %s", key, jobkey);
	ans = malloc(NZI_KV_ANSWER_MAX);
	if (!ans)
		return nzi_error(-ENOMEM, "rendezvous: out of memory");
	ret = nzi_kv_fetch(kv, jobkey, ans, NZI_KV_ANSWER_MAX, &len, deadline);
	if (ret == -ETIMEDOUT)
		nzi_error(ret, "rendezvous: rank 0 did not write %s to the store within %d ms (a rank missing?)",
			  jobkey, cfg->timeout_ms);
	if (!ret)
		ret = nzi_boot_parse_answer(cfg, ans, len, job);
	free(ans);
	if (ret)
		nzi_boot_job_free(job);
	return ret;
}
