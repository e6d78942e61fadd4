// SPDX-License-Identifier: GPL-2.0
/*
 * The per-frame MAC (frame_mac.h).  Tag number n of a direction with key
 * k is Poly1305 with the one-time key r || s = BLAKE2s-256(key k, be64(n))
 * -- a one-time authenticator needs a key of its own for every message,
 * and a keyed BLAKE2s is a PRF -- over the frame's header or payload.
 * Poly1305 runs at memory speed on CPUs with SIMD (the crypto API's
 * poly1305-simd on x86), several times faster than a hash over the
 * payload would.  No allocation and no sleeping per tag: the connections'
 * works compute them.  The keys come from the handshake (handshake.c).
 */
#include <crypto/algapi.h>
#include <crypto/blake2s.h>
#include <crypto/poly1305.h>
#include <linux/bvec.h>
#include <linux/highmem.h>
#include <linux/mutex.h>
#include "frame_mac.h"

static struct crypto_shash *nz_fmac_tfm;
static DEFINE_MUTEX(nz_fmac_lock);

int nz_fmac_get(void)
{
	struct crypto_shash *tfm;
	int ret = 0;

	mutex_lock(&nz_fmac_lock);
	if (!nz_fmac_tfm) {
		tfm = crypto_alloc_shash("poly1305", 0, 0);
		if (IS_ERR(tfm)) {
			ret = PTR_ERR(tfm);
			pr_warn("nezha: no Poly1305 for the per-frame MAC: %d\n", ret);
		} else {
			pr_info("nezha: per-frame MAC by Poly1305 (%s)\n",
				crypto_shash_driver_name(tfm));
			WRITE_ONCE(nz_fmac_tfm, tfm);
		}
	}
	mutex_unlock(&nz_fmac_lock);
	return ret;
}

void nz_fmac_exit(void)
{
	if (nz_fmac_tfm)
		crypto_free_shash(nz_fmac_tfm);
	nz_fmac_tfm = NULL;
}

size_t nz_fmac_desc_size(void)
{
	return sizeof(struct shash_desc) + crypto_shash_descsize(nz_fmac_tfm);
}

int nz_fmac_begin(struct nz_fmac *m, struct shash_desc *desc)
{
	u8 otk[POLY1305_KEY_SIZE];
	__be64 n = cpu_to_be64(m->ctr++);
	int ret;

	BUILD_BUG_ON(POLY1305_KEY_SIZE > BLAKE2S_HASH_SIZE);
	BUILD_BUG_ON(POLY1305_DIGEST_SIZE != NZ_FMAC_TAG_LEN);
	blake2s(otk, (const u8 *)&n, m->key, sizeof(otk), sizeof(n),
		NZ_FMAC_KEY_LEN);
	desc->tfm = nz_fmac_tfm;
	/* The shash takes the key as its first 32 bytes of input. */
	ret = crypto_shash_init(desc) ?:
	      crypto_shash_update(desc, otk, sizeof(otk));
	memzero_explicit(otk, sizeof(otk));
	return ret;
}

/*
 * len bytes at the start of it, which is left where it was: the payload
 * a DATA frame is about to send, or the one just received into it.
 * Kernel iterators only (bvec of pinned pages, kvec): -EINVAL otherwise.
 */
int nz_fmac_add_iter(struct shash_desc *desc, const struct iov_iter *it,
		     size_t len)
{
	size_t skip = it->iov_offset;
	unsigned long i;

	if (len > iov_iter_count(it))
		return -EINVAL;
	if (iov_iter_is_kvec(it)) {
		for (i = 0; len && i < it->nr_segs; i++, skip = 0) {
			const struct kvec *kv = &it->kvec[i];
			size_t n;

			if (skip >= kv->iov_len)
				continue;
			n = min(len, kv->iov_len - skip);
			crypto_shash_update(desc, kv->iov_base + skip, n);
			len -= n;
		}
		return len ? -EINVAL : 0;
	}
	if (!iov_iter_is_bvec(it))
		return -EINVAL;
	for (i = 0; len && i < it->nr_segs; i++, skip = 0) {
		const struct bio_vec *bv = &it->bvec[i];
		size_t off, n;

		if (skip >= bv->bv_len)
			continue;
		off = bv->bv_offset + skip;
		n = min(len, (size_t)bv->bv_len - skip);
		len -= n;
		/* A segment may span pages (a folio): map one at a time. */
		while (n) {
			struct page *pg = bv->bv_page + off / PAGE_SIZE;
			size_t in = min(n, PAGE_SIZE - off % PAGE_SIZE);
			void *va = kmap_local_page(pg);

			crypto_shash_update(desc, va + off % PAGE_SIZE, in);
			kunmap_local(va);
			off += in;
			n -= in;
		}
	}
	return len ? -EINVAL : 0;
}

int nz_fmac_end(struct shash_desc *desc, u8 *tag)
{
	return crypto_shash_final(desc, tag);
}

int nz_fmac_check(struct shash_desc *desc, const u8 *tag)
{
	u8 want[NZ_FMAC_TAG_LEN];
	int ret;

	ret = crypto_shash_final(desc, want);
	if (!ret && crypto_memneq(want, tag, sizeof(want)))
		ret = -EBADMSG;
	memzero_explicit(want, sizeof(want));
	return ret;
}


int nz_fmac_tag_iter(struct nz_fmac *m, const struct iov_iter *it,
		     size_t len, u8 *tag)
{
	SHASH_DESC_ON_STACK(desc, nz_fmac_tfm);
	int ret;

	ret = nz_fmac_begin(m, desc) ?:
	      nz_fmac_add_iter(desc, it, len) ?:
	      crypto_shash_final(desc, tag);
	shash_desc_zero(desc);
	return ret;
}

int nz_fmac_tag(struct nz_fmac *m, const void *p, size_t len, u8 *tag)
{
	struct kvec kv = { (void *)p, len };
	struct iov_iter it;

	iov_iter_kvec(&it, ITER_SOURCE, &kv, 1, len);
	return nz_fmac_tag_iter(m, &it, len, tag);
}
