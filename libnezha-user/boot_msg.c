// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The messages of the rendezvous, shared by its TCP form (bootstrap.c) and
 * its store form (boot_kv.c): encoding, checks, MACs, and what rank 0
 * computes from the HELLOs (rail slots, address table, chunk unit).  The
 * layout is in internal.h.
 *
 * Every HELLO answers a fresh challenge of rank 0 with a MAC under the job
 * key, and is believed only once the MAC checks; every WELCOME carries a
 * MAC for the rank it answers, over that rank's own fresh nonce.  So a
 * stranger can claim no rank, a recorded HELLO is worth nothing in
 * another rendezvous, and a rank accepts no WELCOME but the answer to its
 * HELLO.  The job's secret is derived from the key and the job's nonce
 * on every rank: it is never on the wire.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "bytes.h"
#include "internal.h"
#include "sha256.h"

/* MAC labels: one per use of the key, NUL included (domain separation). */
static const char nzi_label_hello[] = "nezha rendezvous v3 hello";
static const char nzi_label_welcome[] = "nezha rendezvous v3 welcome";
static const char nzi_label_secret[] = "nezha rendezvous v3 job secret";

static void put_hdr(uint8_t *p, uint16_t type, uint32_t len)
{
	nzi_put_be32(p, NZI_BOOT_MAGIC);
	nzi_put_be16(p + 4, NZI_BOOT_VERSION);
	nzi_put_be16(p + 6, type);
	nzi_put_be32(p + 8, len);
}

/* A whole message of this type and version whose length field is right. */
static bool nzi_hdr_ok(const uint8_t *buf, size_t len, uint16_t type)
{
	return len >= NZI_BOOT_HDR_LEN && nzi_get_be32(buf) == NZI_BOOT_MAGIC &&
	       nzi_get_be16(buf + 4) == NZI_BOOT_VERSION && nzi_get_be16(buf + 6) == type &&
	       nzi_get_be32(buf + 8) == len - NZI_BOOT_HDR_LEN;
}

/* Addresses and ports are already in network order: copied byte for byte. */
static void put_addr(uint8_t *p, uint32_t addr_be, uint16_t port_be)
{
	memcpy(p, &addr_be, 4);
	memcpy(p + 4, &port_be, 2);
	p[6] = p[7] = 0;
}

static void get_addr(const uint8_t *p, uint32_t *addr_be, uint16_t *port_be)
{
	memcpy(addr_be, p, 4);
	memcpy(port_be, p + 4, 2);
}

/* A rail name into a NUL-padded NZ_RAIL_NAME_LEN field. */
static void nzi_copy_name(char *dst, const char *src)
{
	size_t len = strnlen(src, NZ_RAIL_NAME_LEN - 1);

	memset(dst, 0, NZ_RAIL_NAME_LEN);
	memcpy(dst, src, len);
}

/* A rail name from the wire: NUL terminated within its field, non-empty. */
static bool nzi_name_ok(const uint8_t *p)
{
	return p[0] && memchr(p, 0, NZ_RAIL_NAME_LEN);
}

static int nzi_find_rail(const struct nzi_rail *rails, unsigned int n,
			 const char *name)
{
	for (unsigned int i = 0; i < n; i++)
		if (!strncmp(rails[i].name, name, NZ_RAIL_NAME_LEN))
			return (int)i;
	return -1;
}

/* ---- CHALLENGE ---- */

size_t nzi_boot_encode_challenge(uint8_t *buf, const uint8_t *nonce_s)
{
	put_hdr(buf, NZI_BOOT_CHALLENGE, NZI_NONCE_LEN);
	memcpy(buf + NZI_BOOT_HDR_LEN, nonce_s, NZI_NONCE_LEN);
	return NZI_BOOT_CHALLENGE_LEN;
}

int nzi_boot_parse_challenge(const uint8_t *buf, size_t len, uint8_t *nonce_s)
{
	if (len != NZI_BOOT_CHALLENGE_LEN || !nzi_hdr_ok(buf, len, NZI_BOOT_CHALLENGE))
		return nzi_error(-EPROTO, "rendezvous: malformed challenge from rank 0");
	memcpy(nonce_s, buf + NZI_BOOT_HDR_LEN, NZI_NONCE_LEN);
	return 0;
}

/* ---- HELLO ---- */

static void nzi_hello_mac(const uint8_t *key, const uint8_t *nonce_s,
			  const uint8_t *msg, size_t len, uint8_t *mac)
{
	struct nzi_hmac m;

	nzi_hmac_init(&m, key, NZ_JOB_KEY_LEN);
	nzi_hmac_update(&m, nzi_label_hello, sizeof(nzi_label_hello));
	nzi_hmac_update(&m, nonce_s, NZI_NONCE_LEN);
	nzi_hmac_update(&m, msg, len);
	nzi_hmac_final(&m, mac);
}

size_t nzi_boot_encode_hello(uint8_t *buf, const struct nzi_hello_auth *auth,
			     int rank, int size, const struct nzi_rail *rails,
			     unsigned int nrails, unsigned int unit)
{
	uint8_t *p = buf + NZI_BOOT_HDR_LEN;

	if (nrails > NZ_MAX_RAILS)
		nrails = NZ_MAX_RAILS;
	nzi_put_be32(p, (uint32_t)rank);
	nzi_put_be32(p + 4, (uint32_t)size);
	nzi_put_be32(p + 8, nrails);
	nzi_put_be32(p + 12, unit);
	memcpy(p + 16, auth->nonce_c, NZI_NONCE_LEN);
	p += NZI_HELLO_FIXED;
	for (unsigned int i = 0; i < nrails; i++, p += NZI_BOOT_RAIL_LEN) {
		nzi_copy_name((char *)p, rails[i].name);
		put_addr(p + NZ_RAIL_NAME_LEN, rails[i].addr, rails[i].port);
		nzi_put_be32(p + NZ_RAIL_NAME_LEN + 8, rails[i].speed_mbps);
	}
	put_hdr(buf, NZI_BOOT_HELLO, (uint32_t)(p + NZI_MAC_LEN - buf - NZI_BOOT_HDR_LEN));
	nzi_hello_mac(auth->key, auth->nonce_s, buf, (size_t)(p - buf), p);
	return (size_t)(p - buf) + NZI_MAC_LEN;
}

int nzi_boot_parse_hello(const uint8_t *buf, size_t len, int size,
			 const uint8_t *key, const uint8_t *nonce_s,
			 struct nzi_boot_hello *h)
{
	const uint8_t *b = buf + NZI_BOOT_HDR_LEN;
	uint8_t mac[NZI_MAC_LEN];
	uint32_t nrails, rank, hsize;
	bool ok;

	if (len < NZI_BOOT_HDR_LEN + NZI_HELLO_FIXED + NZI_MAC_LEN ||
	    !nzi_hdr_ok(buf, len, NZI_BOOT_HELLO))
		return nzi_error(-EPROTO, "rendezvous: malformed HELLO");
	nrails = nzi_get_be32(b + 8);
	if (nrails > NZ_MAX_RAILS ||
	    len != NZI_BOOT_HDR_LEN + NZI_HELLO_FIXED + nrails * NZI_BOOT_RAIL_LEN + NZI_MAC_LEN)
		return nzi_error(-EPROTO, "rendezvous: malformed rail list (%u rails)", nrails);
	/* Nothing in it is believed before its MAC checks. */
	nzi_hello_mac(key, nonce_s, buf, len - NZI_MAC_LEN, mac);
	ok = nzi_mac_equal(mac, buf + len - NZI_MAC_LEN, NZI_MAC_LEN);
	nzi_wipe(mac, sizeof(mac));
	if (!ok)
		return nzi_error(-EKEYREJECTED, "rendezvous: a HELLO's MAC does not check: not this job's key, or not an answer to this challenge");
	rank = nzi_get_be32(b);
	hsize = nzi_get_be32(b + 4);
	h->rank = (int)rank;
	h->unit = nzi_get_be32(b + 12);
	if (hsize != (uint32_t)size)
		return nzi_error(-EINVAL, "rendezvous: job size mismatch: rank 0 has WORLD_SIZE=%d, rank %u has %u",
				 size, rank, hsize);
	if (rank == 0 || rank >= (uint32_t)size)
		return nzi_error(-EINVAL, "rendezvous: rank %u is not a valid non-zero rank of a job of %d",
				 rank, size);
	if (h->unit && !nzi_unit_ok(h->unit))
		return nzi_error(-EINVAL, "rendezvous: chunk unit %u is not a power of two in %d..%d",
				 h->unit, NZ_MIN_UNIT, NZ_MAX_UNIT);
	memcpy(h->nonce_c, b + 16, NZI_NONCE_LEN);
	b += NZI_HELLO_FIXED;
	for (uint32_t k = 0; k < nrails; k++, b += NZI_BOOT_RAIL_LEN) {
		struct nzi_rail *r = &h->rails[k];

		if (!nzi_name_ok(b) || nzi_find_rail(h->rails, k, (const char *)b) >= 0)
			return nzi_error(-EINVAL, "rendezvous: malformed or duplicate rail name in rail list");
		memcpy(r->name, b, NZ_RAIL_NAME_LEN);
		get_addr(b + NZ_RAIL_NAME_LEN, &r->addr, &r->port);
		r->speed_mbps = nzi_get_be32(b + NZ_RAIL_NAME_LEN + 8);
	}
	h->nrails = nrails;
	return 0;
}

/* ---- WELCOME ---- */

static size_t nzi_welcome_body_len(unsigned int size, unsigned int nrails)
{
	return NZI_WELCOME_FIXED + nrails * NZ_RAIL_NAME_LEN +
	       (size_t)size * nrails * NZI_ADDR_LEN;
}

uint8_t *nzi_boot_encode_welcome(const struct nzi_boot_job *job, unsigned int ntags,
				 size_t *lenp, uint8_t *hash)
{
	size_t body = nzi_welcome_body_len(job->size, job->nrails);
	size_t len = NZI_BOOT_HDR_LEN + body + (size_t)ntags * NZI_MAC_LEN;
	uint8_t *msg = calloc(1, len), *p;

	if (!msg)
		return NULL;
	put_hdr(msg, NZI_BOOT_WELCOME, (uint32_t)(len - NZI_BOOT_HDR_LEN));
	p = msg + NZI_BOOT_HDR_LEN;
	nzi_put_be64(p, job->job_id);
	memcpy(p + 8, job->nonce, NZI_NONCE_LEN);
	p += 8 + NZI_NONCE_LEN;
	nzi_put_be32(p, job->size);
	nzi_put_be32(p + 4, job->nrails);
	nzi_put_be32(p + 8, job->unit);
	nzi_put_be32(p + 12, ntags);
	p += 16;
	for (unsigned int k = 0; k < job->nrails; k++, p += NZ_RAIL_NAME_LEN)
		memcpy(p, job->rails[k], NZ_RAIL_NAME_LEN);
	for (size_t k = 0; k < (size_t)job->size * job->nrails; k++, p += NZI_ADDR_LEN)
		put_addr(p, job->addrs[k].addr, job->addrs[k].port);
	nzi_sha256(msg + NZI_BOOT_HDR_LEN, body, hash);
	*lenp = len;
	return msg;
}

void nzi_boot_welcome_tag(const uint8_t *key, const uint8_t *hash,
			  const uint8_t *nonce_s, int rank, const uint8_t *nonce_c,
			  uint8_t *tag)
{
	struct nzi_hmac m;
	uint8_t r[4];

	nzi_put_be32(r, (uint32_t)rank);
	nzi_hmac_init(&m, key, NZ_JOB_KEY_LEN);
	nzi_hmac_update(&m, nzi_label_welcome, sizeof(nzi_label_welcome));
	nzi_hmac_update(&m, r, sizeof(r));
	nzi_hmac_update(&m, nonce_c, NZI_NONCE_LEN);
	nzi_hmac_update(&m, nonce_s, NZI_NONCE_LEN);
	nzi_hmac_update(&m, hash, NZI_SHA256_LEN);
	nzi_hmac_final(&m, tag);
}

void nzi_boot_derive_secret(const uint8_t *key, struct nzi_boot_job *job)
{
	struct nzi_hmac m;
	uint8_t id[8];

	nzi_put_be64(id, job->job_id);
	nzi_hmac_init(&m, key, NZ_JOB_KEY_LEN);
	nzi_hmac_update(&m, nzi_label_secret, sizeof(nzi_label_secret));
	nzi_hmac_update(&m, id, sizeof(id));
	nzi_hmac_update(&m, job->nonce, NZI_NONCE_LEN);
	nzi_hmac_final(&m, job->secret);
}

/* A WELCOME's payload p[0..len): check it, then fill job. */
static int nzi_parse_welcome(const struct nzi_boot_cfg *cfg,
			     const struct nzi_hello_auth *auth, const uint8_t *p,
			     size_t len, struct nzi_boot_job *job)
{
	uint8_t hash[NZI_SHA256_LEN], tag[NZI_MAC_LEN];
	uint32_t size, nrails, ntags;
	size_t body;
	bool ok;

	if (len < NZI_WELCOME_FIXED)
		goto bad;
	size = nzi_get_be32(p + 8 + NZI_NONCE_LEN);
	nrails = nzi_get_be32(p + 12 + NZI_NONCE_LEN);
	ntags = nzi_get_be32(p + 20 + NZI_NONCE_LEN);
	if (size != (uint32_t)cfg->size || !nrails || nrails > NZ_MAX_RAILS ||
	    (ntags != 1 && ntags != size - 1))
		goto bad;
	body = nzi_welcome_body_len(size, nrails);
	if (len != body + (size_t)ntags * NZI_MAC_LEN)
		goto bad;
	/* The tag for this rank: its own, or its entry among ranks 1..size-1. */
	nzi_sha256(p, body, hash);
	nzi_boot_welcome_tag(auth->key, hash, auth->nonce_s, cfg->rank, auth->nonce_c, tag);
	ok = nzi_mac_equal(tag, p + body + (ntags == 1 ? 0 : (size_t)(cfg->rank - 1) * NZI_MAC_LEN),
			   NZI_MAC_LEN);
	if (!ok)
		return nzi_error(-EKEYREJECTED, "rendezvous: rank 0's answer does not authenticate: not rank 0 of this job key, or not an answer to this rank's HELLO");
	job->unit = nzi_get_be32(p + 16 + NZI_NONCE_LEN);
	if (!nzi_unit_ok(job->unit) || (cfg->unit && job->unit != cfg->unit))
		goto bad;
	job->job_id = nzi_get_be64(p);
	memcpy(job->nonce, p + 8, NZI_NONCE_LEN);
	job->size = size;
	job->nrails = nrails;
	p += NZI_WELCOME_FIXED;
	for (uint32_t k = 0; k < nrails; k++, p += NZ_RAIL_NAME_LEN) {
		if (!nzi_name_ok(p))
			goto bad;
		memcpy(job->rails[k], p, NZ_RAIL_NAME_LEN);
	}
	job->addrs = calloc((size_t)size * nrails, sizeof(*job->addrs));
	if (!job->addrs)
		return nzi_error(-ENOMEM, "rendezvous: out of memory");
	for (size_t k = 0; k < (size_t)size * nrails; k++, p += NZI_ADDR_LEN)
		get_addr(p, &job->addrs[k].addr, &job->addrs[k].port);
	nzi_boot_derive_secret(auth->key, job);
	return 0;
bad:
	return nzi_error(-EPROTO, "rendezvous: malformed job description from rank 0");
}

/* ---- ABORT and the answer ---- */

size_t nzi_boot_encode_abort(uint8_t *buf, size_t cap, int err, const char *reason)
{
	size_t rlen = strlen(reason);

	if (rlen > cap - NZI_BOOT_HDR_LEN - 4)
		rlen = cap - NZI_BOOT_HDR_LEN - 4;
	put_hdr(buf, NZI_BOOT_ABORT, (uint32_t)(4 + rlen));
	nzi_put_be32(buf + NZI_BOOT_HDR_LEN, (uint32_t)err);
	memcpy(buf + NZI_BOOT_HDR_LEN + 4, reason, rlen);
	return NZI_BOOT_HDR_LEN + 4 + rlen;
}

int nzi_boot_parse_answer(const struct nzi_boot_cfg *cfg,
			  const struct nzi_hello_auth *auth, const uint8_t *buf,
			  size_t len, struct nzi_boot_job *job)
{
	int ret;

	if (len < NZI_BOOT_HDR_LEN || nzi_get_be32(buf) != NZI_BOOT_MAGIC ||
	    nzi_get_be32(buf + 8) != len - NZI_BOOT_HDR_LEN)
		return nzi_error(-EPROTO, "rendezvous: malformed answer of rank 0");
	if (nzi_get_be16(buf + 4) != NZI_BOOT_VERSION)
		return nzi_error(-EPROTO, "rendezvous: rank 0 speaks rendezvous protocol version %u, this rank %u (mixed libnezha versions)",
				 nzi_get_be16(buf + 4), NZI_BOOT_VERSION);
	if (nzi_get_be16(buf + 6) == NZI_BOOT_WELCOME)
		return nzi_parse_welcome(cfg, auth, buf + NZI_BOOT_HDR_LEN,
					 len - NZI_BOOT_HDR_LEN, job);
	if (nzi_get_be16(buf + 6) != NZI_BOOT_ABORT || len < NZI_BOOT_HDR_LEN + 4)
		return nzi_error(-EPROTO, "rendezvous: unexpected message type %u from rank 0",
				 nzi_get_be16(buf + 6));
	ret = -(int)nzi_get_be32(buf + NZI_BOOT_HDR_LEN);
	if (ret >= 0 || ret < -4095)
		ret = -EPROTO;
	return nzi_error(ret, "rendezvous: rank 0 stopped rank %d: %.*s", cfg->rank,
			 (int)(len - NZI_BOOT_HDR_LEN - 4),
			 (const char *)buf + NZI_BOOT_HDR_LEN + 4);
}

/* ---- What rank 0 computes ---- */

int nzi_boot_slots(struct nzi_boot_job *job, unsigned int size,
		   const struct nzi_rail *const *rails,
		   const unsigned int *nrails)
{
	int idx[NZ_MAX_RAILS];	/* slot -> index in rank 0's list */
	unsigned int n = 0;

	for (unsigned int i = 0; i < nrails[0] && n < NZ_MAX_RAILS; i++) {
		unsigned int r;

		if (nzi_find_rail(rails[0], i, rails[0][i].name) >= 0)
			continue;	/* a name listed twice counts once */
		for (r = 1; r < size; r++)
			if (nzi_find_rail(rails[r], nrails[r], rails[0][i].name) < 0)
				break;
		if (r == size)
			idx[n++] = (int)i;
	}
	job->size = size;
	job->nrails = n;
	job->addrs = NULL;
	job->min_speed_mbps = 0;
	if (!n)
		return 0;
	job->addrs = calloc((size_t)size * n, sizeof(*job->addrs));
	if (!job->addrs)
		return -ENOMEM;
	for (unsigned int s = 0; s < n; s++) {
		const char *name = rails[0][idx[s]].name;

		nzi_copy_name(job->rails[s], name);
		for (unsigned int r = 0; r < size; r++) {
			int k = nzi_find_rail(rails[r], nrails[r], name);
			struct nz_comm_addr *a = &job->addrs[(size_t)r * n + s];

			a->addr = rails[r][k].addr;
			a->port = rails[r][k].port;
			if (rails[r][k].speed_mbps &&
			    (!job->min_speed_mbps ||
			     rails[r][k].speed_mbps < job->min_speed_mbps))
				job->min_speed_mbps = rails[r][k].speed_mbps;
		}
	}
	return 0;
}

unsigned int nzi_unit_for_speed(uint32_t mbps)
{
	/* Bytes the link carries in NZI_UNIT_CHUNK_US: mbps * us / 8. */
	uint64_t bytes = (uint64_t)mbps * NZI_UNIT_CHUNK_US / 8;
	unsigned int unit = NZI_UNIT_FLOOR;

	if (!mbps)
		return NZ_DEFAULT_UNIT;
	while (unit < NZ_DEFAULT_UNIT && 2ull * unit <= bytes)
		unit *= 2;
	return unit;
}

void nzi_boot_job_free(struct nzi_boot_job *job)
{
	if (!job)
		return;
	free(job->addrs);
	job->addrs = NULL;
	nzi_wipe(job->secret, sizeof(job->secret));
}

int nzi_boot_identity(struct nzi_boot_job *job)
{
	int ret;

	do {
		ret = nzi_random(&job->job_id, sizeof(job->job_id));
	} while (!ret && !job->job_id);
	return ret ? ret : nzi_random(job->nonce, sizeof(job->nonce));
}
