/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libnezha internal: big-endian (network order) integers in byte buffers,
 * for the codecs of the rendezvous (boot_msg.c) and of the aggregation
 * rail (agg_wire.c).  No alignment is assumed.
 */
#ifndef NEZHA_BYTES_H
#define NEZHA_BYTES_H

#include <stdint.h>

static inline void nzi_put_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void nzi_put_be32(uint8_t *p, uint32_t v)
{
	nzi_put_be16(p, (uint16_t)(v >> 16));
	nzi_put_be16(p + 2, (uint16_t)v);
}

static inline void nzi_put_be64(uint8_t *p, uint64_t v)
{
	nzi_put_be32(p, (uint32_t)(v >> 32));
	nzi_put_be32(p + 4, (uint32_t)v);
}

static inline uint16_t nzi_get_be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t nzi_get_be32(const uint8_t *p)
{
	return (uint32_t)nzi_get_be16(p) << 16 | nzi_get_be16(p + 2);
}

static inline uint64_t nzi_get_be64(const uint8_t *p)
{
	return (uint64_t)nzi_get_be32(p) << 32 | nzi_get_be32(p + 4);
}

#endif /* NEZHA_BYTES_H */
