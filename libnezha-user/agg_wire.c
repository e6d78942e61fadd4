// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The aggregation rail's packet codec (agg_wire.h): byte layouts, their
 * validation and the MACs.  Layouts are drawn in aggregation.rst.
 */
#include <errno.h>
#include <string.h>

#include "agg_wire.h"
#include "mac.h"
#include "bytes.h"

static const char nza_label_key_id[] = "nezha agg key id";
static const char nza_label_join[] = "nezha agg join";
static const char nza_label_accept[] = "nezha agg accept";
static const char nza_label_refuse[] = "nezha agg refuse";
static const char nza_label_data[] = "nezha agg data";

static bool all_zero(const uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i])
			return false;
	return true;
}

unsigned int nza_dtype_size(unsigned int dtype)
{
	switch (dtype) {
	case NZA_F32:
	case NZA_I32:
		return 4;
	case NZA_F16:
	case NZA_BF16:
		return 2;
	}
	return 0;
}

unsigned int nza_dtype_elems(unsigned int dtype)
{
	unsigned int size = nza_dtype_size(dtype);

	return size ? NZA_PAYLOAD / size : 0;
}

static void put_hdr(uint8_t *p, enum nza_type type)
{
	nzi_put_be32(p, NZA_MAGIC);
	p[4] = NZA_VERSION;
	p[5] = type;
	nzi_put_be16(p + 6, 0);
}

int nza_peek_type(const uint8_t *buf, size_t len)
{
	if (!buf || len < NZA_HDR_LEN || nzi_get_be32(buf) != NZA_MAGIC)
		return -EINVAL;
	if (buf[4] != NZA_VERSION)
		return -EPROTONOSUPPORT;
	if (buf[5] < NZA_HELLO || buf[5] > NZA_TYPE_LAST || nzi_get_be16(buf + 6))
		return -EINVAL;
	return buf[5];
}

static bool hdr_is(const uint8_t *buf, size_t len, size_t want, enum nza_type type)
{
	return len == want && nza_peek_type(buf, len) == (int)type;
}

size_t nza_encode_hello(uint8_t *buf, const struct nza_hello *h)
{
	memset(buf, 0, NZA_HELLO_LEN);
	put_hdr(buf, NZA_HELLO);
	memcpy(buf + 8, h->nonce, sizeof(h->nonce));
	return NZA_HELLO_LEN;
}

/* A HELLO is padded to twice the CHALLENGE: the node never amplifies. */
int nza_decode_hello(const uint8_t *buf, size_t len, struct nza_hello *h)
{
	if (!hdr_is(buf, len, NZA_HELLO_LEN, NZA_HELLO) || !all_zero(buf + 16, 48))
		return -EINVAL;
	memcpy(h->nonce, buf + 8, sizeof(h->nonce));
	return 0;
}

size_t nza_encode_challenge(uint8_t *buf, const struct nza_challenge *c)
{
	put_hdr(buf, NZA_CHALLENGE);
	memcpy(buf + 8, c->nonce, sizeof(c->nonce));
	memcpy(buf + 16, c->cookie, NZA_COOKIE_LEN);
	return NZA_CHALLENGE_LEN;
}

int nza_decode_challenge(const uint8_t *buf, size_t len, struct nza_challenge *c)
{
	if (!hdr_is(buf, len, NZA_CHALLENGE_LEN, NZA_CHALLENGE))
		return -EINVAL;
	memcpy(c->nonce, buf + 8, sizeof(c->nonce));
	memcpy(c->cookie, buf + 16, NZA_COOKIE_LEN);
	return 0;
}

static bool job_shape_ok(uint16_t rank, uint16_t nranks, uint16_t slots)
{
	return nranks >= 1 && nranks <= NZA_MAX_RANKS && rank < nranks &&
	       slots >= 1 && slots <= NZA_MAX_WINDOW;
}

size_t nza_encode_join(uint8_t *buf, const struct nza_join *j)
{
	put_hdr(buf, NZA_JOIN);
	nzi_put_be64(buf + 8, j->job_id);
	memcpy(buf + 16, j->key_id, NZA_KEY_ID_LEN);
	nzi_put_be16(buf + 24, j->rank);
	nzi_put_be16(buf + 26, j->nranks);
	nzi_put_be16(buf + 28, j->slots);
	nzi_put_be16(buf + 30, 0);
	memcpy(buf + 32, j->cookie, NZA_COOKIE_LEN);
	memcpy(buf + 48, j->nonce, NZA_NONCE_LEN);
	memcpy(buf + 64, j->mac, NZI_SHA256_LEN);
	return NZA_JOIN_LEN;
}

int nza_decode_join(const uint8_t *buf, size_t len, struct nza_join *j)
{
	if (!hdr_is(buf, len, NZA_JOIN_LEN, NZA_JOIN) || nzi_get_be16(buf + 30))
		return -EINVAL;
	if (!job_shape_ok(nzi_get_be16(buf + 24), nzi_get_be16(buf + 26), nzi_get_be16(buf + 28)))
		return -EINVAL;
	j->job_id = nzi_get_be64(buf + 8);
	memcpy(j->key_id, buf + 16, NZA_KEY_ID_LEN);
	j->rank = nzi_get_be16(buf + 24);
	j->nranks = nzi_get_be16(buf + 26);
	j->slots = nzi_get_be16(buf + 28);
	memcpy(j->cookie, buf + 32, NZA_COOKIE_LEN);
	memcpy(j->nonce, buf + 48, NZA_NONCE_LEN);
	memcpy(j->mac, buf + 64, NZI_SHA256_LEN);
	return 0;
}

size_t nza_encode_accept(uint8_t *buf, const struct nza_accept *a)
{
	put_hdr(buf, NZA_ACCEPT);
	nzi_put_be64(buf + 8, a->job_id);
	nzi_put_be32(buf + 16, a->handle);
	nzi_put_be16(buf + 20, a->rank);
	nzi_put_be16(buf + 22, a->nranks);
	nzi_put_be16(buf + 24, a->slots);
	nzi_put_be16(buf + 26, NZA_PAYLOAD);
	nzi_put_be32(buf + 28, 0);
	memcpy(buf + 32, a->session, NZA_NONCE_LEN);
	memcpy(buf + 48, a->mac, NZI_SHA256_LEN);
	return NZA_ACCEPT_LEN;
}

int nza_decode_accept(const uint8_t *buf, size_t len, struct nza_accept *a)
{
	if (!hdr_is(buf, len, NZA_ACCEPT_LEN, NZA_ACCEPT) || !nzi_get_be32(buf + 16) ||
	    nzi_get_be16(buf + 26) != NZA_PAYLOAD || nzi_get_be32(buf + 28))
		return -EINVAL;
	if (!job_shape_ok(nzi_get_be16(buf + 20), nzi_get_be16(buf + 22), nzi_get_be16(buf + 24)))
		return -EINVAL;
	a->job_id = nzi_get_be64(buf + 8);
	a->handle = nzi_get_be32(buf + 16);
	a->rank = nzi_get_be16(buf + 20);
	a->nranks = nzi_get_be16(buf + 22);
	a->slots = nzi_get_be16(buf + 24);
	memcpy(a->session, buf + 32, NZA_NONCE_LEN);
	memcpy(a->mac, buf + 48, NZI_SHA256_LEN);
	return 0;
}

size_t nza_encode_refuse(uint8_t *buf, const struct nza_refuse *r)
{
	put_hdr(buf, NZA_REFUSE);
	nzi_put_be64(buf + 8, r->job_id);
	nzi_put_be16(buf + 16, r->reason);
	nzi_put_be16(buf + 18, r->rank);
	nzi_put_be16(buf + 20, r->slots_free);
	nzi_put_be16(buf + 22, 0);
	memcpy(buf + 24, r->mac, NZI_SHA256_LEN);
	return NZA_REFUSE_LEN;
}

int nza_decode_refuse(const uint8_t *buf, size_t len, struct nza_refuse *r)
{
	if (!hdr_is(buf, len, NZA_REFUSE_LEN, NZA_REFUSE) || nzi_get_be16(buf + 22))
		return -EINVAL;
	if (nzi_get_be16(buf + 16) < NZA_R_NO_SLOTS || nzi_get_be16(buf + 16) > NZA_R_LAST ||
	    nzi_get_be16(buf + 18) >= NZA_MAX_RANKS)
		return -EINVAL;
	r->job_id = nzi_get_be64(buf + 8);
	r->reason = nzi_get_be16(buf + 16);
	r->rank = nzi_get_be16(buf + 18);
	r->slots_free = nzi_get_be16(buf + 20);
	memcpy(r->mac, buf + 24, NZI_SHA256_LEN);
	return 0;
}

size_t nza_encode_data(uint8_t *buf, const struct nza_data *d)
{
	size_t plen = (size_t)d->count * nza_dtype_size(d->dtype);

	put_hdr(buf, d->type);
	nzi_put_be32(buf + 8, d->handle);
	nzi_put_be16(buf + 12, d->rank);
	nzi_put_be16(buf + 14, d->count);
	buf[16] = d->dtype;
	buf[17] = d->op;
	nzi_put_be16(buf + 18, 0);
	nzi_put_be32(buf + 20, 0);
	nzi_put_be64(buf + 24, d->seq);
	memcpy(buf + 32, d->mac, NZA_DATA_MAC_LEN);
	if (plen && buf + NZA_DATA_HDR_LEN != d->payload)
		memmove(buf + NZA_DATA_HDR_LEN, d->payload, plen);
	return NZA_DATA_HDR_LEN + plen;
}

/* DATA and RESULT: a payload of 1..one packet of known elements; LEAVE: none. */
static bool data_fields_ok(uint8_t type, uint16_t rank, uint16_t count,
			   uint8_t dtype, uint8_t op, size_t len)
{
	if (type == NZA_LEAVE)
		return rank < NZA_MAX_RANKS && !count && !dtype && !op &&
		       len == NZA_LEAVE_LEN;
	if (type == NZA_RESULT ? rank != NZA_RANK_ALL : rank >= NZA_MAX_RANKS)
		return false;
	if (!nza_dtype_size(dtype) || op < NZA_OP_SUM || op > NZA_OP_LAST)
		return false;
	if (!count || count > nza_dtype_elems(dtype))
		return false;
	return len == NZA_DATA_HDR_LEN + (size_t)count * nza_dtype_size(dtype);
}

int nza_decode_data(const uint8_t *buf, size_t len, struct nza_data *d)
{
	int type = nza_peek_type(buf, len);

	if (type != NZA_DATA && type != NZA_RESULT && type != NZA_LEAVE)
		return -EINVAL;
	if (len < NZA_DATA_HDR_LEN || len > NZA_PKT_MAX || !nzi_get_be32(buf + 8) ||
	    nzi_get_be16(buf + 18) || nzi_get_be32(buf + 20))
		return -EINVAL;
	if (!data_fields_ok(type, nzi_get_be16(buf + 12), nzi_get_be16(buf + 14), buf[16], buf[17], len))
		return -EINVAL;
	d->type = type;
	d->handle = nzi_get_be32(buf + 8);
	d->rank = nzi_get_be16(buf + 12);
	d->count = nzi_get_be16(buf + 14);
	d->dtype = buf[16];
	d->op = buf[17];
	d->seq = nzi_get_be64(buf + 24);
	memcpy(d->mac, buf + 32, NZA_DATA_MAC_LEN);
	d->payload = buf + NZA_DATA_HDR_LEN;
	return 0;
}

void nza_key_id(const uint8_t *key, uint8_t id[NZA_KEY_ID_LEN])
{
	uint8_t mac[NZI_SHA256_LEN];

	nzi_hmac_sha256(key, NZA_KEY_LEN, nza_label_key_id, sizeof(nza_label_key_id), mac);
	memcpy(id, mac, NZA_KEY_ID_LEN);
}

void nza_join_mac(const uint8_t *key, const uint8_t *pkt, uint8_t mac[NZI_SHA256_LEN])
{
	struct nzi_hmac m;

	nzi_hmac_init(&m, key, NZA_KEY_LEN);
	nzi_hmac_update(&m, nza_label_join, sizeof(nza_label_join));
	nzi_hmac_update(&m, pkt, 64);
	nzi_hmac_final(&m, mac);
}

static void answer_mac(const char *label, size_t llen, const uint8_t *key,
		       const uint8_t *nonce, const uint8_t *pkt, size_t len, uint8_t *mac)
{
	struct nzi_hmac m;

	nzi_hmac_init(&m, key, NZA_KEY_LEN);
	nzi_hmac_update(&m, label, llen);
	nzi_hmac_update(&m, nonce, NZA_NONCE_LEN);
	nzi_hmac_update(&m, pkt, len);
	nzi_hmac_final(&m, mac);
}

void nza_accept_mac(const uint8_t *key, const uint8_t *join_nonce, const uint8_t *pkt,
		    uint8_t mac[NZI_SHA256_LEN])
{
	answer_mac(nza_label_accept, sizeof(nza_label_accept), key, join_nonce, pkt, 48, mac);
}

void nza_refuse_mac(const uint8_t *key, const uint8_t *join_nonce, const uint8_t *pkt,
		    uint8_t mac[NZI_SHA256_LEN])
{
	answer_mac(nza_label_refuse, sizeof(nza_label_refuse), key, join_nonce, pkt, 24, mac);
}

void nza_data_key(const uint8_t *key, uint64_t job_id, const uint8_t *session,
		  struct nza_data_key *dk)
{
	uint8_t id[8];
	struct nzi_hmac m;

	nzi_put_be64(id, job_id);
	nzi_hmac_init(&m, key, NZA_KEY_LEN);
	nzi_hmac_update(&m, nza_label_data, sizeof(nza_label_data));
	nzi_hmac_update(&m, id, sizeof(id));
	nzi_hmac_update(&m, session, NZA_NONCE_LEN);
	nzi_hmac_final(&m, dk->k);
	nzi_wipe(&m, sizeof(m));
}

static void data_mac(const struct nza_data_key *dk, const uint8_t *pkt, size_t len,
		     uint8_t mac[NZI_POLY1305_TAG_LEN])
{
	uint8_t otk[NZI_POLY1305_KEY_LEN];
	struct nzi_poly1305 p;

	nzi_blake2s(otk, sizeof(otk), dk->k, sizeof(dk->k), pkt, 32);
	nzi_poly1305_init(&p, otk);
	nzi_poly1305_update(&p, pkt, 32);
	nzi_poly1305_update(&p, pkt + NZA_DATA_HDR_LEN, len - NZA_DATA_HDR_LEN);
	nzi_poly1305_final(&p, mac);
	nzi_wipe(otk, sizeof(otk));
}

void nza_data_seal(const struct nza_data_key *dk, uint8_t *pkt, size_t len)
{
	uint8_t mac[NZI_POLY1305_TAG_LEN];

	data_mac(dk, pkt, len, mac);
	memcpy(pkt + 32, mac, NZA_DATA_MAC_LEN);
}

bool nza_data_mac_ok(const struct nza_data_key *dk, const uint8_t *pkt, size_t len)
{
	uint8_t mac[NZI_POLY1305_TAG_LEN];

	if (len < NZA_DATA_HDR_LEN)
		return false;
	data_mac(dk, pkt, len, mac);
	return nzi_mac_equal(mac, pkt + 32, NZA_DATA_MAC_LEN);
}

static bool host_is_le(void)
{
	return __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;
}

static void copy_swapped(uint8_t *d, const uint8_t *s, size_t count, unsigned int esize)
{
	for (size_t i = 0; i < count; i++)
		for (unsigned int b = 0; b < esize; b++)
			d[i * esize + b] = s[i * esize + esize - 1 - b];
}

void nza_to_wire(uint8_t *dst, const void *src, size_t count, unsigned int esize)
{
	if (host_is_le())
		memcpy(dst, src, count * esize);
	else
		copy_swapped(dst, src, count, esize);
}

void nza_from_wire(void *dst, const uint8_t *src, size_t count, unsigned int esize)
{
	if (host_is_le())
		memcpy(dst, src, count * esize);
	else
		copy_swapped(dst, src, count, esize);
}
