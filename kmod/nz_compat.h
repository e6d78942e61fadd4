/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nz_compat.h - the kernel names used by Nezha's pure-C logic.
 *
 * The wire codec, the reassembly bookkeeping, the scheduler's split and the
 * health state machines make no kernel calls, so they are compiled twice:
 * into nezha.ko and into host unit tests and fuzzers.  Such a file includes
 * only this header.  In the kernel it pulls in the real definitions; in user
 * space it supplies the same names with the same meaning.  Add a name here
 * only when the kernel has it under exactly that name.
 */
#ifndef _NZ_COMPAT_H
#define _NZ_COMPAT_H

#ifdef __KERNEL__

#include <linux/types.h>
#include <linux/errno.h>
#include <linux/kernel.h>
#include <linux/limits.h>
#include <linux/log2.h>
#include <linux/string.h>
#include <linux/bitops.h>
#include <linux/build_bug.h>
#include <linux/math64.h>
#include <linux/time64.h>
#include <asm/unaligned.h>

#else /* !__KERNEL__ */

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* The kernel's own choice (int-ll64), so format strings agree. */
typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef signed int s32;
typedef signed long long s64;

#define U8_MAX		((u8)~0U)
#define U16_MAX		((u16)~0U)
#define U32_MAX		((u32)~0U)
#define U64_MAX		((u64)~0ULL)

#define likely(x)	__builtin_expect(!!(x), 1)
#define unlikely(x)	__builtin_expect(!!(x), 0)

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))
#define BIT(n)		(1UL << (n))
#define BIT_ULL(n)	(1ULL << (n))
#define DIV_ROUND_UP(n, d)	(((n) + (d) - 1) / (d))

#define min_t(type, a, b) ({		\
	type __a = (a);			\
	type __b = (b);			\
	__a < __b ? __a : __b; })

#define max_t(type, a, b) ({		\
	type __a = (a);			\
	type __b = (b);			\
	__a > __b ? __a : __b; })

#define min(a, b)	min_t(__typeof__(a), a, b)
#define max(a, b)	max_t(__typeof__(a), a, b)
#define clamp_t(type, v, lo, hi)	min_t(type, max_t(type, v, lo), hi)

#define NSEC_PER_USEC	1000L
#define NSEC_PER_MSEC	1000000L
#define NSEC_PER_SEC	1000000000L

static inline u64 div_u64(u64 a, u32 b)
{
	return a / b;
}

static inline u64 div64_u64(u64 a, u64 b)
{
	return a / b;
}

/* a * b / c without overflowing the product, as the kernel's. */
static inline u64 mul_u64_u64_div_u64(u64 a, u64 b, u64 c)
{
	return (u64)((__uint128_t)a * b / c);
}

/* Last set bit, 1-based; 0 for 0. */
static inline int fls64(u64 x)
{
	return x ? 64 - __builtin_clzll(x) : 0;
}

static inline bool is_power_of_2(unsigned long n)
{
	return n != 0 && (n & (n - 1)) == 0;
}

/* Only for n != 0, as in the kernel. */
#define ilog2(n)	((int)(63 - __builtin_clzll((unsigned long long)(n))))
#define hweight64(w)	((unsigned int)__builtin_popcountll(w))

static inline u16 get_unaligned_be16(const void *p)
{
	const u8 *b = p;

	return (u16)(b[0] << 8 | b[1]);
}

static inline u32 get_unaligned_be32(const void *p)
{
	const u8 *b = p;

	return (u32)b[0] << 24 | (u32)b[1] << 16 | (u32)b[2] << 8 | b[3];
}

static inline u64 get_unaligned_be64(const void *p)
{
	const u8 *b = p;

	return (u64)get_unaligned_be32(b) << 32 | get_unaligned_be32(b + 4);
}

static inline void put_unaligned_be16(u16 v, void *p)
{
	u8 *b = p;

	b[0] = v >> 8;
	b[1] = v;
}

static inline void put_unaligned_be32(u32 v, void *p)
{
	u8 *b = p;

	b[0] = v >> 24;
	b[1] = v >> 16;
	b[2] = v >> 8;
	b[3] = v;
}

static inline void put_unaligned_be64(u64 v, void *p)
{
	u8 *b = p;

	put_unaligned_be32(v >> 32, b);
	put_unaligned_be32((u32)v, b + 4);
}

#endif /* __KERNEL__ */

#endif /* _NZ_COMPAT_H */
