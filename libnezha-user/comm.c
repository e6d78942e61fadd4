// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Communicators: one queue on /dev/nezha, the rendezvous of the job's
 * ranks (bootstrap.c), and the module's communicator created from its
 * result (NZ_IOC_COMM_CREATE) and waited for (NZ_IOC_COMM_WAIT).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include "coll.h"
#include "internal.h"
#include "sha256.h"

#define NZI_QUEUE_ENTRIES	256	/* CQ: 512 = NZ_COMM_MAX_INFLIGHT */

/* ---- Error detail ---- */

static _Thread_local char nzi_errbuf[512];

int nzi_error(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(nzi_errbuf, sizeof(nzi_errbuf), fmt, ap);
	va_end(ap);
	return err;
}

const char *nz_last_error(void)
{
	return nzi_errbuf;
}

void nzi_log(bool verbose, int rank, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	if (!verbose)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "libnezha[rank %d]: %s\n", rank, line);
}

/* ---- Accessors ---- */

int nz_comm_rank(const struct nz_comm *comm)
{
	return comm ? comm->rank : -EINVAL;
}

int nz_comm_size(const struct nz_comm *comm)
{
	return comm ? comm->size : -EINVAL;
}

int nz_comm_nrails(const struct nz_comm *comm)
{
	return comm ? (int)comm->nrails : -EINVAL;
}

int nz_comm_unit(const struct nz_comm *comm)
{
	return comm ? (int)comm->unit : -EINVAL;
}

const char *nz_comm_rail_name(const struct nz_comm *comm, int slot)
{
	if (!comm || slot < 0 || (unsigned int)slot >= comm->nrails)
		return NULL;
	return comm->rails[slot];
}

int nz_comm_set_wait_timeout(struct nz_comm *comm, int timeout_ms)
{
	if (!comm)
		return -EINVAL;
	comm->wait_timeout_ms = timeout_ms > 0 ? timeout_ms : 0;
	return 0;
}

struct nz_queue *nzi_comm_queue(struct nz_comm *comm)
{
	return comm->q;
}

unsigned long nzi_comm_stray(const struct nz_comm *comm)
{
	return comm->stray;
}

int nzi_comm_wrap(struct nz_comm **out, struct nz_queue *q, int rank,
		  int size, uint32_t comm_id, uint64_t features)
{
	struct nz_comm *c;

	if (!out || !q || size < 1 || rank < 0 || rank >= size)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->q = q;
	c->rank = rank;
	c->size = size;
	c->comm_id = comm_id;
	c->features = features;
	*out = c;
	return 0;
}

/* ---- Set-up ---- */

static int nzi_opts_check(const struct nz_comm_opts *o, bool kv)
{
	unsigned int n = 0;

	if (o->size < 1 || o->size > NZ_MAX_RANKS)
		return nzi_error(-EINVAL, "comm: size %d is out of range (1..%d)",
				 o->size, NZ_MAX_RANKS);
	if (o->rank < 0 || o->rank >= o->size)
		return nzi_error(-EINVAL, "comm: rank %d is out of range (0..%d)",
				 o->rank, o->size - 1);
	if (o->flags & ~NZ_COMM_FLAGS)
		return nzi_error(-EINVAL, "comm: unknown flags 0x%x", o->flags & ~NZ_COMM_FLAGS);
	if (o->unit && !nzi_unit_ok(o->unit))
		return nzi_error(-EINVAL, "comm: chunk unit %u is not a power of two in %d..%d",
				 o->unit, NZ_MIN_UNIT, NZ_MAX_UNIT);
	if (o->timeout_ms < 0)
		return nzi_error(-EINVAL, "comm: negative timeout");
	for (; o->rails && o->rails[n]; n++) {
		size_t len = strlen(o->rails[n]);

		if (n == NZ_MAX_RAILS || !len || len >= NZ_RAIL_NAME_LEN)
			return nzi_error(-EINVAL, "comm: the rail list must name 1..%d rails of 1..%d characters",
					 NZ_MAX_RAILS, NZ_RAIL_NAME_LEN - 1);
	}
	if (o->rails && !n)
		return nzi_error(-EINVAL, "comm: the rail list is empty");
	if (o->size > 1 && !kv && (!o->master_addr || !*o->master_addr ||
			    o->master_port < 1 || o->master_port > 65535))
		return nzi_error(-EINVAL, "comm: a job of %d ranks needs master_addr and master_port (1..65535)",
				 o->size);
	return 0;
}

static int nzi_open(struct nz_comm *c)
{
	struct nz_queue_opts qo = { .entries = NZI_QUEUE_ENTRIES };
	struct nz_version v;
	int ret;

	ret = nz_queue_open(&c->q, &qo);
	if (ret == -ENOENT)
		return nzi_error(ret, "comm: no %s: is the nezha module loaded (modprobe nezha)?",
				 getenv("NEZHA_DEVICE") ? getenv("NEZHA_DEVICE") : NZ_DEVICE_PATH);
	if (ret)
		return nzi_error(ret, "comm: cannot open the device or set up its ring: %s",
				 strerror(-ret));
	if (ioctl(nz_queue_fd(c->q), NZ_IOC_VERSION, &v) < 0) {
		ret = errno == ENOTTY ? -ENODEV : -errno;
		return nzi_error(ret, "comm: the device does not answer NZ_IOC_VERSION (%s): not /dev/nezha?",
				 strerror(errno));
	}
	if (v.abi_version != NZ_ABI_VERSION)
		return nzi_error(-EPROTO, "comm: module ABI %u, libnezha ABI %u: rebuild one of them",
				 v.abi_version, NZ_ABI_VERSION);
	c->features = v.features;
	return 0;
}

static bool nzi_named(const char *const *names, const char *name)
{
	if (!names)
		return true;
	for (; *names; names++)
		if (!strcmp(*names, name))
			return true;
	return false;
}

/* The module's rails through fd, without a word to nz_last_error(). */
int nzi_rail_info_read(int fd, struct nz_rail_info info[NZ_MAX_RAILS], unsigned int *n)
{
	struct nz_rail_list list = { .count = NZ_MAX_RAILS,
				     .rails = (uint64_t)(uintptr_t)info };

	memset(info, 0, sizeof(*info) * NZ_MAX_RAILS);
	if (ioctl(fd, NZ_IOC_RAIL_LIST, &list) < 0)
		return -errno;
	*n = list.count > NZ_MAX_RAILS ? NZ_MAX_RAILS : list.count;
	for (unsigned int i = 0; i < *n; i++)
		info[i].name[NZ_RAIL_NAME_LEN - 1] = 0;
	return 0;
}

int nzi_rail_info_list(struct nz_comm *c, struct nz_rail_info info[NZ_MAX_RAILS],
		       unsigned int *n)
{
	int ret = nzi_rail_info_read(nz_queue_fd(c->q), info, n);

	if (ret)
		return nzi_error(ret, "comm: NZ_IOC_RAIL_LIST: %s", strerror(-ret));
	return 0;
}

/*
 * The local rails the job may use: point to point (TCP, RDMA), up, with a
 * weight, and named in the restriction list if there is one (where every
 * name must then be usable).
 */
static int nzi_local_rails(struct nz_comm *c, const char *const *only,
			   struct nzi_rail *out, unsigned int *nout)
{
	struct nz_rail_info info[NZ_MAX_RAILS];
	unsigned int n = 0, count;
	int ret = nzi_rail_info_list(c, info, &count);

	if (ret)
		return ret;
	for (unsigned int i = 0; i < count; i++) {
		struct nz_rail_info *r = &info[i];

		if (r->proto != NZ_PROTO_TCP && r->proto != NZ_PROTO_RDMA)
			continue;
		if (r->state != NZ_RAIL_UP || !r->weight || !nzi_named(only, r->name))
			continue;
		memcpy(out[n].name, r->name, NZ_RAIL_NAME_LEN);
		out[n].addr = r->addr;
		out[n].port = r->port;
		out[n].speed_mbps = r->speed_mbps;
		n++;
	}
	for (; only && *only; only++) {
		unsigned int k;

		for (k = 0; k < n && strcmp(out[k].name, *only); k++)
			;
		if (k == n)
			return nzi_error(-ENODEV, "comm: rail \"%s\" is not configured here, or not up with a weight (nezhactl rail show)",
					 *only);
	}
	*nout = n;
	return 0;
}

static int nzi_comm_create(struct nz_comm *c, const struct nz_comm_opts *o,
			   const struct nzi_boot_job *job)
{
	struct nz_comm_create cc;
	int ret;

	memset(&cc, 0, sizeof(cc));
	cc.job_id = job->job_id;
	memcpy(cc.secret, job->secret, NZ_SECRET_LEN);	/* derived, never sent */
	cc.rank = (uint32_t)o->rank;
	cc.size = (uint32_t)o->size;
	cc.nrails = job->nrails;
	cc.unit = job->unit;
	cc.timeout_ms = o->op_timeout_ms;
	memcpy(cc.rails, job->rails, sizeof(cc.rails));
	cc.addrs = (uint64_t)(uintptr_t)job->addrs;
	ret = ioctl(nz_queue_fd(c->q), NZ_IOC_COMM_CREATE, &cc) < 0 ? -errno : 0;
	nzi_wipe(cc.secret, sizeof(cc.secret));
	if (ret)
		return nzi_error(ret, "comm: NZ_IOC_COMM_CREATE: %s", strerror(-ret));
	c->comm_id = cc.comm_id;
	c->has_kcomm = true;
	return 0;
}

static int nzi_comm_wait(struct nz_comm *c, int timeout_ms)
{
	int64_t deadline = nzi_now_ms() + timeout_ms;
	struct nz_comm_wait w;

	for (;;) {
		int64_t left = deadline - nzi_now_ms();

		memset(&w, 0, sizeof(w));
		w.comm_id = c->comm_id;
		w.timeout_ms = left > 0 ? (uint32_t)left : 0;
		if (!ioctl(nz_queue_fd(c->q), NZ_IOC_COMM_WAIT, &w))
			return 0;
		if (errno == EINTR && left > 0)
			continue;
		if (errno == ETIMEDOUT || errno == EINTR)
			return nzi_error(-ETIMEDOUT, "comm: only %u of %u rail connections to the other ranks came up within %d ms: check that every rail reaches the same rail of every node (ping), and the modules' kernel logs",
					 w.up, w.expected, timeout_ms);
		return nzi_error(-errno, "comm: NZ_IOC_COMM_WAIT: %s", strerror(errno));
	}
}

static void nzi_comm_teardown(struct nz_comm *c)
{
	nzi_coll_release(c);
	if (c->has_kcomm) {
		uint32_t id = c->comm_id;

		ioctl(nz_queue_fd(c->q), NZ_IOC_COMM_DESTROY, &id);
	}
	nz_queue_close(c->q);
	nzi_comm_free_requests(c);
	free(c);
}

static int nzi_comm_init(struct nz_comm **out, const struct nz_comm_opts *o,
			 const struct nz_kv *kv)
{
	struct nzi_rail rails[NZ_MAX_RAILS];
	struct nzi_boot_cfg cfg = { 0 };
	struct nzi_boot_job job = { 0 };
	const char *dbg = getenv("NEZHA_DEBUG");
	struct nzi_key key;
	struct nz_comm *c;
	int ret, timeout;

	if (!out || !o)
		return nzi_error(-EINVAL, "comm: NULL argument");
	*out = NULL;
	ret = nzi_opts_check(o, kv);
	if (!ret)	/* before the device: a job without a key goes no further */
		ret = nzi_key_resolve(o, kv && o->size > 1, &key);
	if (ret)
		return ret;
	c = calloc(1, sizeof(*c));
	if (!c) {
		nzi_wipe(&key, sizeof(key));
		return nzi_error(-ENOMEM, "comm: out of memory");
	}
	c->rank = o->rank;
	c->size = o->size;
	c->wait_timeout_ms = o->wait_timeout_ms > 0 ? o->wait_timeout_ms : 0;
	c->verbose = (o->flags & NZ_COMM_F_VERBOSE) || (dbg && *dbg && strcmp(dbg, "0"));
	timeout = o->timeout_ms ? o->timeout_ms : NZ_DEFAULT_TIMEOUT_MS;

	ret = nzi_open(c);
	if (!ret)
		ret = nzi_local_rails(c, o->rails, rails, &cfg.nrails);
	if (ret)
		goto out_close;
	nzi_log(c->verbose, c->rank, "%u usable local rails; rendezvous with %d ranks",
		cfg.nrails, c->size);
	cfg.rank = o->rank;
	cfg.size = o->size;
	cfg.master_addr = o->master_addr;
	cfg.master_port = o->master_port;
	cfg.timeout_ms = timeout;
	cfg.rails = rails;
	cfg.unit = o->unit;
	cfg.verbose = c->verbose;
	cfg.key_from_store = key.mode == NZI_KEY_FROM_STORE;
	cfg.key = cfg.key_from_store ? NULL : key.key;
	ret = kv && o->size > 1 ? nzi_bootstrap_kv(&cfg, kv, &job) :
				  nzi_bootstrap(&cfg, &job);
	if (ret)
		goto out_close;
	c->job_id = job.job_id;
	c->nrails = job.nrails;
	c->unit = job.unit;
	memcpy(c->rails, job.rails, sizeof(c->rails));
	if (job.nrails) {
		ret = nzi_comm_create(c, o, &job);
		if (!ret)
			ret = nzi_comm_wait(c, timeout);
	}
	nzi_boot_job_free(&job);
	if (ret)
		goto out_close;
	nzi_log(c->verbose, c->rank, "communicator %u of job %016llx ready: %d ranks, %u rails",
		c->comm_id, (unsigned long long)c->job_id, c->size, c->nrails);
	/* The aggregation node holds the job key: one drawn at start it
	 * cannot know. */
	ret = nzi_coll_agg_env(c, key.mode == NZI_KEY_FROM_STORE ? NULL : key.key);
	if (ret)
		goto out_close;
	nzi_wipe(&key, sizeof(key));
	*out = c;
	return 0;

out_close:
	nzi_wipe(&key, sizeof(key));
	if (c->q)
		nzi_comm_teardown(c);
	else
		free(c);
	return ret;
}

int nz_comm_init(struct nz_comm **out, const struct nz_comm_opts *o)
{
	return nzi_comm_init(out, o, NULL);
}

int nz_comm_init_kv(struct nz_comm **out, const struct nz_comm_opts *o,
		    const struct nz_kv *kv)
{
	if (!kv)
		return nzi_error(-EINVAL, "comm: NULL key-value store");
	return nzi_comm_init(out, o, kv);
}

/* Split $NEZHA_RAILS ("a,b,c") into names; buf keeps the strings. */
static int nzi_env_rails(char *buf, size_t len, const char **names)
{
	const char *env = getenv("NEZHA_RAILS");
	unsigned int n = 0;
	char *save, *tok;

	if (!env || !*env)
		return 0;
	if (strlen(env) >= len)
		return nzi_error(-EINVAL, "environment: NEZHA_RAILS is too long");
	strcpy(buf, env);
	for (tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
		if (n == NZ_MAX_RAILS)
			return nzi_error(-EINVAL, "environment: NEZHA_RAILS names more than %d rails",
					 NZ_MAX_RAILS);
		names[n++] = tok;
	}
	names[n] = NULL;
	return n ? 1 : 0;
}

int nz_comm_init_env(struct nz_comm **out)
{
	const char *names[NZ_MAX_RAILS + 1];
	char railbuf[NZ_MAX_RAILS * (NZ_RAIL_NAME_LEN + 1) + 1];
	struct nz_comm_opts o = { 0 };
	struct nzi_env env;
	long v;
	int ret;

	if (!out)
		return nzi_error(-EINVAL, "comm: NULL argument");
	*out = NULL;
	ret = nzi_env_parse(&env);
	if (ret)
		return ret;
	ret = nzi_env_rails(railbuf, sizeof(railbuf), names);
	if (ret < 0)
		return ret;
	o.rails = ret ? names : NULL;
	if (getenv("NEZHA_WAIT_TIMEOUT_MS")) {
		if (nzi_parse_int(getenv("NEZHA_WAIT_TIMEOUT_MS"), 0, 86400000, &v))
			return nzi_error(-EINVAL, "environment: NEZHA_WAIT_TIMEOUT_MS is not a number of milliseconds");
		o.wait_timeout_ms = (int)v;
	}
	if (getenv("NEZHA_OP_TIMEOUT_MS")) {
		if (nzi_parse_int(getenv("NEZHA_OP_TIMEOUT_MS"), 0, 86400000, &v))
			return nzi_error(-EINVAL, "environment: NEZHA_OP_TIMEOUT_MS is not a number of milliseconds");
		o.op_timeout_ms = (unsigned int)v;
	}
	o.rank = env.rank;
	o.size = env.size;
	o.master_addr = env.master_addr;
	o.master_port = env.master_port;
	o.timeout_ms = env.timeout_ms;
	return nz_comm_init(out, &o);
}

void nz_comm_destroy(struct nz_comm *comm)
{
	if (comm)
		nzi_comm_teardown(comm);
}
