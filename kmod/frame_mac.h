/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The per-frame MAC of a rail connection (NZ_A_RAIL_FRAME_MAC,
 * Documentation/wire.rst "Per-frame MAC"): a Poly1305 tag after every
 * frame header and after every DATA payload, each with a one-time key
 * drawn from the connection's key for that direction and the tag's
 * number (keyed BLAKE2s), so that a frame dropped, replayed, reordered or
 * moved from another connection fails the next check.
 */
#ifndef _NZ_FRAME_MAC_H
#define _NZ_FRAME_MAC_H

#include <crypto/hash.h>
#include <linux/uio.h>

#define NZ_FMAC_TAG_LEN		16
#define NZ_FMAC_KEY_LEN		32

/* One direction of a connection. */
struct nz_fmac {
	u8 key[NZ_FMAC_KEY_LEN];
	u64 ctr;		/* tags made (sender) or checked (receiver) */
};

/* A connection's, from its handshake; on == false: no MAC. */
struct nz_fmac_keys {
	bool on;
	struct nz_fmac tx;
	struct nz_fmac rx;
};

/*
 * The Poly1305 implementation (the crypto API's "poly1305": its SIMD
 * version where the CPU has one), taken when the first rail with the MAC
 * is added, kept until the module goes.  Process context.
 */
int nz_fmac_get(void);
void nz_fmac_exit(void);
/* Bytes of a descriptor for a tag in progress (nz_fmac_get() first). */
size_t nz_fmac_desc_size(void);

/*
 * A tag over several pieces: begin (takes the next number), add the
 * pieces, end or check.  desc holds nz_fmac_desc_size() bytes.
 */
int nz_fmac_begin(struct nz_fmac *m, struct shash_desc *desc);
static inline void nz_fmac_add(struct shash_desc *desc, const void *p,
			       size_t len)
{
	crypto_shash_update(desc, p, len);
}

int nz_fmac_add_iter(struct shash_desc *desc, const struct iov_iter *it,
		     size_t len);
int nz_fmac_end(struct shash_desc *desc, u8 *tag);
/* 0 if tag is the one desc computed, -EBADMSG if not. */
int nz_fmac_check(struct shash_desc *desc, const u8 *tag);

/* The tag of one piece, or of len bytes at the start of it. */
int nz_fmac_tag(struct nz_fmac *m, const void *p, size_t len, u8 *tag);
int nz_fmac_tag_iter(struct nz_fmac *m, const struct iov_iter *it,
		     size_t len, u8 *tag);

#endif /* _NZ_FRAME_MAC_H */
