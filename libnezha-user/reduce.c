// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libnezha: local reduction kernels, element types and operators.
 *
 * Design notes
 *
 * Every (element class, operator) pair has two kernels:
 *   NAME_3(out, a, b, n): out[i] = a[i] OP b[i], out disjoint from a and b;
 *   NAME_2(io, b, n):     io[i] = io[i] OP b[i], io disjoint from b.
 * Both take restrict-qualified typed pointers, which is what lets the
 * compiler vectorise them without run-time alias checks.  The aliasing
 * cases of nz_reduce3() map onto them: out == a uses NAME_2(out, b),
 * out == b uses NAME_2(out, a) (all operators are treated as commutative,
 * see reduce.h), and out == a == b copies b through a stack buffer.
 *
 * Signed and unsigned integers share the SUM and PROD kernels: the low bits
 * of a two's complement sum or product do not depend on signedness, and
 * computing in unsigned types keeps wrap-around defined.  Float MIN/MAX
 * work on the bit patterns (see okey*() below) so that they return an
 * operand unchanged, honour the sign of zero and need no float compares.
 *
 * The hot loops are processed in blocks of NZ_BLK elements with a constant
 * trip count, so that even GCC's -O2 "very cheap" vectoriser cost model
 * (which refuses loops needing a scalar epilogue) vectorises them; a plain
 * scalar loop handles the remainder.  NZ_CLONES compiles each kernel for
 * AVX-512F, AVX2 and the baseline ISA and picks one at load time (GNU
 * ifunc).  float16 SUM/PROD additionally have an explicit F16C version.
 */
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "reduce.h"

_Static_assert(FLT_RADIX == 2 && FLT_MANT_DIG == 24 && FLT_MAX_EXP == 128,
	       "float must be IEEE 754 binary32");
_Static_assert(DBL_MANT_DIG == 53 && DBL_MAX_EXP == 1024,
	       "double must be IEEE 754 binary64");
_Static_assert(sizeof(float) == 4 && sizeof(double) == 8, "float sizes");
_Static_assert(UINT_MAX == 0xffffffffu,
	       "32-bit unsigned arithmetic must not promote to int");

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) &&	\
	defined(__has_attribute)
#if __has_attribute(target)
#define NZ_X86 1
#include <cpuid.h>
#include <immintrin.h>
#endif
#endif

/* Multi-versioning needs GNU ifunc, i.e. glibc. */
#if defined(NZ_X86) && defined(__GLIBC__) && defined(__ELF__) &&	\
	!defined(NZ_NO_TARGET_CLONES)
#if __has_attribute(target_clones)
#define NZ_CLONES							\
	__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#endif
#ifndef NZ_CLONES
#define NZ_CLONES
#endif

#define NZ_BLK 64	/* elements per constant-trip-count inner loop */

/* ------------------------------------------------------------------ */
/* Bit access without aliasing violations                              */

static inline uint32_t f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static inline float f32_from_bits(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static inline uint64_t f64_bits(double d)
{
	uint64_t u;

	memcpy(&u, &d, sizeof(u));
	return u;
}

/*
 * Branch-free select: GCC's -O2 if-conversion gives up on chains of
 * conditional expressions (multi-way PHIs), which would stop the loops
 * calling these helpers from vectorising.
 */
static inline uint32_t sel32(int c, uint32_t x, uint32_t y)
{
	uint32_t m = 0u - (uint32_t)(c != 0);

	return (x & m) | (y & ~m);
}

/* ------------------------------------------------------------------ */
/* 16-bit float conversions (portable, branch free so they vectorise)  */

/*
 * binary16 -> binary32 bits.  Exact; a signalling NaN is quieted and the
 * payload is shifted up, exactly like VCVTPH2PS.
 */
static inline uint32_t h2f_bits(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t em = h & 0x7fffu;
	uint32_t norm = (em << 13) + ((uint32_t)(127 - 15) << 23);
	uint32_t special = (em << 13) | 0x7f800000u |
			   ((uint32_t)(em > 0x7c00u) << 22);
	/* subnormal: em * 2^-24, exact in binary32 */
	uint32_t sub = f32_bits((float)(int32_t)em * 0x1p-24f);
	uint32_t r;

	r = sel32(em >= 0x0400u, norm, sub);
	r = sel32(em >= 0x7c00u, special, r);
	return r | sign;
}

/*
 * binary32 bits -> binary16, round to nearest-even in integer arithmetic
 * (independent of MXCSR), like VCVTPS2PH with imm8 = 0: overflow gives
 * infinity, subnormal results are rounded (not flushed), a NaN becomes a
 * quiet NaN keeping the sign and the top 10 payload bits.
 */
static inline uint16_t f2h_bits(uint32_t u)
{
	uint32_t sign = (u >> 16) & 0x8000u;
	uint32_t a = u & 0x7fffffffu;
	/* normal result: rebias, then round at bit 13 */
	uint32_t norm = (a - ((uint32_t)(127 - 15) << 23) + 0x0fffu +
			 ((a >> 13) & 1u)) >> 13;
	/* subnormal result: value / 2^-24, rounded; e in [102, 112] */
	uint32_t e = a >> 23;
	uint32_t m = (a & 0x007fffffu) | 0x00800000u;
	uint32_t sh = sel32(e - 102u <= 10u, 126u - e, 24u);
	uint32_t sub = (m + (1u << (sh - 1u)) - 1u + ((m >> sh) & 1u)) >> sh;
	uint32_t nan = 0x7e00u | ((a >> 13) & 0x03ffu);
	uint32_t r;

	r = sel32(a > 0x33000000u, sub, 0u);	/* > 2^-25: subnormal */
	r = sel32(a >= 0x38800000u, norm, r);	/* >= 2^-14: normal */
	r = sel32(a >= 0x477ff000u, 0x7c00u, r); /* >= 65520: infinity */
	r = sel32(a > 0x7f800000u, nan, r);	/* NaN */
	return (uint16_t)(r | sign);
}

/* bfloat16 -> binary32 bits: exact; a signalling NaN is quieted. */
static inline uint32_t b2f_bits(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;

	return u | ((uint32_t)((u & 0x7fffffffu) > 0x7f800000u) << 22);
}

/*
 * binary32 bits -> bfloat16, round to nearest-even.  The carry of the
 * rounding increment walks naturally across the subnormal/normal boundary
 * and into infinity; a NaN becomes quiet, keeping sign and top payload.
 */
static inline uint16_t f2b_bits(uint32_t u)
{
	uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
	uint32_t nan = (u >> 16) | 0x0040u;

	return (uint16_t)sel32((u & 0x7fffffffu) > 0x7f800000u, nan, r);
}

/*
 * Lean bfloat16 conversions for the arithmetic kernels.  Widening by a
 * plain shift leaves a signalling NaN signalling, but the binary32 add,
 * multiply or divide that follows quiets it (the payload is kept), so the
 * result is the same as with b2f_bits().  Every binary32 result computed
 * from such operands has zero low 16 bits when it is a NaN (a propagated
 * operand, or the all-zero-payload default NaN), so the rounding increment
 * below cannot carry out of a NaN and the NaN test of f2b_bits() is not
 * needed.  Only valid for results of arithmetic on widened bfloat16.
 */
static inline float b2f_arith(uint16_t h)
{
	return f32_from_bits((uint32_t)h << 16);
}

static inline uint16_t f2b_arith(float f)
{
	uint32_t u = f32_bits(f);

	return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

float nz_f16_to_f32(uint16_t h)
{
	return f32_from_bits(h2f_bits(h));
}

uint16_t nz_f32_to_f16(float f)
{
	return f2h_bits(f32_bits(f));
}

float nz_bf16_to_f32(uint16_t h)
{
	return f32_from_bits(b2f_bits(h));
}

uint16_t nz_f32_to_bf16(float f)
{
	return f2b_bits(f32_bits(f));
}

/*
 * binary64 -> 16-bit float with @mb significand bits and exponent @bias,
 * round to nearest-even.  Scalar; used only by the rare paths of
 * nz_reduce_finish_avg().
 */
static uint16_t d2narrow(double d, unsigned mb, int bias)
{
	uint64_t u = f64_bits(d);
	uint16_t sign = (uint16_t)((u >> 48) & 0x8000u);
	uint64_t a = u & 0x7fffffffffffffffull;
	uint64_t inf = (uint64_t)(2 * bias + 1) << mb;
	uint64_t m, q, r;
	unsigned shift;
	int e, te;

	if (a > 0x7ff0000000000000ull)
		return (uint16_t)(sign | inf | (1u << (mb - 1)) |
				  ((a >> (52 - mb)) & ((1u << mb) - 1)));
	if (a == 0x7ff0000000000000ull)
		return (uint16_t)(sign | inf);
	e = (int)(a >> 52);
	if (e == 0)	/* binary64 subnormal: far below any 16-bit value */
		return sign;
	m = (a & 0x000fffffffffffffull) | 0x0010000000000000ull;
	te = e - 1023 + bias;
	shift = 52 - mb;
	if (te < 1) {	/* subnormal (or zero) result */
		if (1 - te > 60)
			return sign;
		shift += (unsigned)(1 - te);
		if (shift > 60)
			return sign;
	}
	q = (m + (1ull << (shift - 1)) - 1 + ((m >> shift) & 1)) >> shift;
	r = te < 1 ? q : ((uint64_t)te << mb) + q - (1ull << mb);
	if (r >= inf)
		return (uint16_t)(sign | inf);
	return (uint16_t)(sign | r);
}

/* ------------------------------------------------------------------ */
/* Element operators                                                   */

/* Integers: SUM/PROD in unsigned arithmetic (wraps, shared by signed). */
static inline uint8_t add_u8(uint8_t x, uint8_t y) { return (uint8_t)(x + y); }
static inline uint8_t mul_u8(uint8_t x, uint8_t y) { return (uint8_t)(x * y); }
static inline uint32_t add_u32(uint32_t x, uint32_t y) { return x + y; }
static inline uint32_t mul_u32(uint32_t x, uint32_t y) { return x * y; }
static inline uint64_t add_u64(uint64_t x, uint64_t y) { return x + y; }
static inline uint64_t mul_u64(uint64_t x, uint64_t y) { return x * y; }

#define NZ_MINMAX(sfx, T)						\
static inline T min_##sfx(T x, T y) { return x < y ? x : y; }		\
static inline T max_##sfx(T x, T y) { return x > y ? x : y; }
NZ_MINMAX(i8, int8_t)
NZ_MINMAX(u8, uint8_t)
NZ_MINMAX(i32, int32_t)
NZ_MINMAX(u32, uint32_t)
NZ_MINMAX(i64, int64_t)
NZ_MINMAX(u64, uint64_t)
#undef NZ_MINMAX

/*
 * Float MIN/MAX on bit patterns.  okey() maps a float's bits to an
 * unsigned key whose order is the numeric order, with -0 < +0 (flip all
 * bits of negatives, only the sign bit of positives).  A NaN operand wins
 * (propagates); otherwise the operand with the smaller/larger key.
 */
static inline uint16_t okey16(uint16_t u)
{
	return (uint16_t)(u ^ (0x8000u | (0u - (uint32_t)(u >> 15))));
}

static inline uint32_t okey32(uint32_t u)
{
	return u ^ (0x80000000u | (0u - (u >> 31)));
}

static inline uint64_t okey64(uint64_t u)
{
	return u ^ (0x8000000000000000ull | (0ull - (u >> 63)));
}

#define NZ_FMINMAX(sfx, T, U, bitsof, keyof, nanp)			\
static inline T min_##sfx(T x, T y)					\
{									\
	U u = bitsof(x), v = bitsof(y);					\
	int pick_x = nanp(u) | (!nanp(v) & (keyof(u) < keyof(v)));	\
	return pick_x ? x : y;						\
}									\
static inline T max_##sfx(T x, T y)					\
{									\
	U u = bitsof(x), v = bitsof(y);					\
	int pick_x = nanp(u) | (!nanp(v) & (keyof(u) > keyof(v)));	\
	return pick_x ? x : y;						\
}

#define NZ_ID(x)		(x)
#define NZ_NAN_F16(u)		(((u) & 0x7fffu) > 0x7c00u)
#define NZ_NAN_BF16(u)		(((u) & 0x7fffu) > 0x7f80u)
#define NZ_NAN_F32(u)		(((u) & 0x7fffffffu) > 0x7f800000u)
#define NZ_NAN_F64(u)		(((u) & 0x7fffffffffffffffull) >	\
				 0x7ff0000000000000ull)
NZ_FMINMAX(f16, uint16_t, uint16_t, NZ_ID, okey16, NZ_NAN_F16)
NZ_FMINMAX(bf16, uint16_t, uint16_t, NZ_ID, okey16, NZ_NAN_BF16)
NZ_FMINMAX(f32, float, uint32_t, f32_bits, okey32, NZ_NAN_F32)
NZ_FMINMAX(f64, double, uint64_t, f64_bits, okey64, NZ_NAN_F64)
#undef NZ_FMINMAX

static inline float add_f32(float x, float y) { return x + y; }
static inline float mul_f32(float x, float y) { return x * y; }
static inline double add_f64(double x, double y) { return x + y; }
static inline double mul_f64(double x, double y) { return x * y; }

/* 16-bit floats: widen exactly, operate in binary32, round once. */
static inline float h2f(uint16_t h)
{
	return f32_from_bits(h2f_bits(h));
}

static inline uint16_t f2h(float f)
{
	return f2h_bits(f32_bits(f));
}

static inline uint16_t add_f16(uint16_t x, uint16_t y)
{
	return f2h(h2f(x) + h2f(y));
}

static inline uint16_t mul_f16(uint16_t x, uint16_t y)
{
	return f2h(h2f(x) * h2f(y));
}

/*
 * bfloat16 SUM/PROD two elements at a time.  A 32-bit word holding two
 * bfloat16 values widens to two binary32 values with a shift (low half)
 * and a mask (high half), so the whole loop runs in 32-bit lanes without
 * 16 <-> 32-bit unpack/pack shuffles (about 3x the element-wise speed with
 * GCC 12).  Both halves are treated alike, so byte order does not matter.
 * Rounding as f2b_arith(), kept in the high half.
 */
static inline uint32_t bf16_rne_hi(float f)
{
	uint32_t u = f32_bits(f);

	return (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
}

static inline uint32_t add_bf16x2(uint32_t x, uint32_t y)
{
	float lo = f32_from_bits(x << 16) + f32_from_bits(y << 16);
	float hi = f32_from_bits(x & 0xffff0000u) +
		   f32_from_bits(y & 0xffff0000u);

	return (bf16_rne_hi(lo) >> 16) | bf16_rne_hi(hi);
}

static inline uint32_t mul_bf16x2(uint32_t x, uint32_t y)
{
	float lo = f32_from_bits(x << 16) * f32_from_bits(y << 16);
	float hi = f32_from_bits(x & 0xffff0000u) *
		   f32_from_bits(y & 0xffff0000u);

	return (bf16_rne_hi(lo) >> 16) | bf16_rne_hi(hi);
}

/* ------------------------------------------------------------------ */
/* Kernels                                                             */

typedef void nz_k3_fn(void *out, const void *a, const void *b, size_t n);
typedef void nz_k2_fn(void *io, const void *b, size_t n);

/*
 * NZ_KERNEL(name, T, OPF) defines the typed, multi-versioned kernels
 * name##_3t / name##_2t and the untyped entry points name##_3 / name##_2
 * that the dispatch table points at.
 */
#define NZ_KERNEL(name, T, OPF)						\
static NZ_CLONES void name##_3t(T *restrict o, const T *restrict a,	\
				const T *restrict b, size_t n)		\
{									\
	size_t i = 0;							\
									\
	for (; n - i >= NZ_BLK; i += NZ_BLK)				\
		for (size_t j = 0; j < NZ_BLK; j++)			\
			o[i + j] = OPF(a[i + j], b[i + j]);		\
	for (; i < n; i++)						\
		o[i] = OPF(a[i], b[i]);					\
}									\
static NZ_CLONES void name##_2t(T *restrict o, const T *restrict b,	\
				size_t n)				\
{									\
	size_t i = 0;							\
									\
	for (; n - i >= NZ_BLK; i += NZ_BLK)				\
		for (size_t j = 0; j < NZ_BLK; j++)			\
			o[i + j] = OPF(o[i + j], b[i + j]);		\
	for (; i < n; i++)						\
		o[i] = OPF(o[i], b[i]);					\
}									\
static void name##_3(void *o, const void *a, const void *b, size_t n)	\
{									\
	name##_3t(o, a, b, n);						\
}									\
static void name##_2(void *o, const void *b, size_t n)			\
{									\
	name##_2t(o, b, n);						\
}

/*
 * Kernels over pairs of 16-bit elements (see add_bf16x2()).  memcpy keeps
 * the 4-byte accesses legal on 2-byte aligned buffers; an odd last element
 * goes through the same pair function with a zero high half.
 */
#define NZ_PAIR(o, a, b, k, OPF2)					\
	do {								\
		uint32_t x_, y_;					\
									\
		memcpy(&x_, (a) + (k), sizeof(x_));			\
		memcpy(&y_, (b) + (k), sizeof(y_));			\
		x_ = OPF2(x_, y_);					\
		memcpy((o) + (k), &x_, sizeof(x_));			\
	} while (0)

#define NZ_KERNEL_X2(name, OPF2)					\
static NZ_CLONES void name##_3t(uint16_t *restrict o,			\
				const uint16_t *restrict a,		\
				const uint16_t *restrict b, size_t n)	\
{									\
	size_t np = n / 2, i = 0;					\
									\
	for (; np - i >= NZ_BLK; i += NZ_BLK)				\
		for (size_t j = 0; j < NZ_BLK; j++)			\
			NZ_PAIR(o, a, b, 2 * (i + j), OPF2);		\
	for (; i < np; i++)						\
		NZ_PAIR(o, a, b, 2 * i, OPF2);				\
	if (n & 1)							\
		o[n - 1] = (uint16_t)OPF2(a[n - 1], b[n - 1]);		\
}									\
static NZ_CLONES void name##_2t(uint16_t *restrict o,			\
				const uint16_t *restrict b, size_t n)	\
{									\
	size_t np = n / 2, i = 0;					\
									\
	for (; np - i >= NZ_BLK; i += NZ_BLK)				\
		for (size_t j = 0; j < NZ_BLK; j++)			\
			NZ_PAIR(o, o, b, 2 * (i + j), OPF2);		\
	for (; i < np; i++)						\
		NZ_PAIR(o, o, b, 2 * i, OPF2);				\
	if (n & 1)							\
		o[n - 1] = (uint16_t)OPF2(o[n - 1], b[n - 1]);		\
}									\
static void name##_3(void *o, const void *a, const void *b, size_t n)	\
{									\
	name##_3t(o, a, b, n);						\
}									\
static void name##_2(void *o, const void *b, size_t n)			\
{									\
	name##_2t(o, b, n);						\
}

NZ_KERNEL(add_u8, uint8_t, add_u8)
NZ_KERNEL(mul_u8, uint8_t, mul_u8)
NZ_KERNEL(add_u32, uint32_t, add_u32)
NZ_KERNEL(mul_u32, uint32_t, mul_u32)
NZ_KERNEL(add_u64, uint64_t, add_u64)
NZ_KERNEL(mul_u64, uint64_t, mul_u64)
NZ_KERNEL(min_i8, int8_t, min_i8)
NZ_KERNEL(max_i8, int8_t, max_i8)
NZ_KERNEL(min_u8, uint8_t, min_u8)
NZ_KERNEL(max_u8, uint8_t, max_u8)
NZ_KERNEL(min_i32, int32_t, min_i32)
NZ_KERNEL(max_i32, int32_t, max_i32)
NZ_KERNEL(min_u32, uint32_t, min_u32)
NZ_KERNEL(max_u32, uint32_t, max_u32)
NZ_KERNEL(min_i64, int64_t, min_i64)
NZ_KERNEL(max_i64, int64_t, max_i64)
NZ_KERNEL(min_u64, uint64_t, min_u64)
NZ_KERNEL(max_u64, uint64_t, max_u64)
NZ_KERNEL(pf16_add, uint16_t, add_f16)	/* portable; see f16_add_* */
NZ_KERNEL(pf16_mul, uint16_t, mul_f16)
NZ_KERNEL(min_f16, uint16_t, min_f16)
NZ_KERNEL(max_f16, uint16_t, max_f16)
NZ_KERNEL_X2(add_bf16, add_bf16x2)
NZ_KERNEL_X2(mul_bf16, mul_bf16x2)
NZ_KERNEL(min_bf16, uint16_t, min_bf16)
NZ_KERNEL(max_bf16, uint16_t, max_bf16)
NZ_KERNEL(add_f32, float, add_f32)
NZ_KERNEL(mul_f32, float, mul_f32)
NZ_KERNEL(min_f32, float, min_f32)
NZ_KERNEL(max_f32, float, max_f32)
NZ_KERNEL(add_f64, double, add_f64)
NZ_KERNEL(mul_f64, double, mul_f64)
NZ_KERNEL(min_f64, double, min_f64)
NZ_KERNEL(max_f64, double, max_f64)

/* ------------------------------------------------------------------ */
/* float16 SUM/PROD with F16C                                          */

static atomic_int f16_impl = NZ_F16_IMPL_AUTO;

#ifdef NZ_X86
/*
 * o[i] = a[i] OP b[i]; o may equal a or b exactly (every vector is loaded
 * before the store of the same indices), so one function serves both the
 * 3- and the 2-operand form.  The tail goes through zero-padded
 * temporaries so that every element takes the F16C path.
 */
#define NZ_F16C_KERNEL(name, VOP)					\
__attribute__((target("avx,f16c")))					\
static void name(uint16_t *o, const uint16_t *a, const uint16_t *b,	\
		 size_t n)						\
{									\
	size_t i = 0;							\
									\
	for (; n - i >= 8; i += 8) {					\
		__m256 x = _mm256_cvtph_ps(				\
			_mm_loadu_si128((const __m128i *)(a + i)));	\
		__m256 y = _mm256_cvtph_ps(				\
			_mm_loadu_si128((const __m128i *)(b + i)));	\
		_mm_storeu_si128((__m128i *)(o + i),			\
				 _mm256_cvtps_ph(VOP(x, y),		\
						 _MM_FROUND_TO_NEAREST_INT)); \
	}								\
	if (i < n) {							\
		uint16_t ta[8] = { 0 }, tb[8] = { 0 }, to[8];		\
		size_t rest = n - i;					\
		__m256 x, y;						\
									\
		memcpy(ta, a + i, rest * sizeof(*a));			\
		memcpy(tb, b + i, rest * sizeof(*b));			\
		x = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)ta)); \
		y = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)tb)); \
		_mm_storeu_si128((__m128i *)to,				\
				 _mm256_cvtps_ph(VOP(x, y),		\
						 _MM_FROUND_TO_NEAREST_INT)); \
		memcpy(o + i, to, rest * sizeof(*o));			\
	}								\
}
NZ_F16C_KERNEL(f16c_add, _mm256_add_ps)
NZ_F16C_KERNEL(f16c_mul, _mm256_mul_ps)
#undef NZ_F16C_KERNEL

static int detect_f16c(void)
{
	unsigned int eax, ebx, ecx, edx;

	/* "avx" also checks that the OS saves the YMM state. */
	if (!__builtin_cpu_supports("avx"))
		return 0;
	if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx))
		return 0;
	return (ecx & bit_F16C) != 0;
}
#endif /* NZ_X86 */

int nz_reduce_have_f16c(void)
{
#ifdef NZ_X86
	static atomic_int cached = -1;
	int v = atomic_load_explicit(&cached, memory_order_relaxed);

	if (v < 0) {
		v = detect_f16c();
		atomic_store_explicit(&cached, v, memory_order_relaxed);
	}
	return v;
#else
	return 0;
#endif
}

int nz_reduce_set_f16_impl(enum nz_f16_impl impl)
{
	switch (impl) {
	case NZ_F16_IMPL_AUTO:
	case NZ_F16_IMPL_PORTABLE:
		break;
	case NZ_F16_IMPL_F16C:
		if (!nz_reduce_have_f16c())
			return -ENOTSUP;
		break;
	default:
		return -EINVAL;
	}
	atomic_store_explicit(&f16_impl, (int)impl, memory_order_relaxed);
	return 0;
}

static inline int use_f16c(void)
{
	int impl = atomic_load_explicit(&f16_impl, memory_order_relaxed);

	if (impl == NZ_F16_IMPL_PORTABLE)
		return 0;
	return nz_reduce_have_f16c();
}

#ifdef NZ_X86
#define NZ_F16_DISPATCH(op)						\
static void f16_##op##_3(void *o, const void *a, const void *b, size_t n) \
{									\
	if (use_f16c())							\
		f16c_##op(o, a, b, n);					\
	else								\
		pf16_##op##_3(o, a, b, n);				\
}									\
static void f16_##op##_2(void *o, const void *b, size_t n)		\
{									\
	if (use_f16c())							\
		f16c_##op(o, o, b, n);					\
	else								\
		pf16_##op##_2(o, b, n);					\
}
#else
#define NZ_F16_DISPATCH(op)						\
static void f16_##op##_3(void *o, const void *a, const void *b, size_t n) \
{									\
	pf16_##op##_3(o, a, b, n);					\
}									\
static void f16_##op##_2(void *o, const void *b, size_t n)		\
{									\
	pf16_##op##_2(o, b, n);						\
}
#endif
NZ_F16_DISPATCH(add)
NZ_F16_DISPATCH(mul)
#undef NZ_F16_DISPATCH

/* ------------------------------------------------------------------ */
/* Dispatch                                                            */

struct nz_kern {
	nz_k3_fn *k3;
	nz_k2_fn *k2;
};

#define K(name) { name##_3, name##_2 }

/* Indexed by dtype and by op for NZ_SUM..NZ_MAX (NZ_AVG uses NZ_SUM). */
static const struct nz_kern kern_tab[NZ_DTYPE_COUNT][4] = {
	[NZ_INT8]     = { K(add_u8), K(mul_u8), K(min_i8), K(max_i8) },
	[NZ_UINT8]    = { K(add_u8), K(mul_u8), K(min_u8), K(max_u8) },
	[NZ_INT32]    = { K(add_u32), K(mul_u32), K(min_i32), K(max_i32) },
	[NZ_UINT32]   = { K(add_u32), K(mul_u32), K(min_u32), K(max_u32) },
	[NZ_INT64]    = { K(add_u64), K(mul_u64), K(min_i64), K(max_i64) },
	[NZ_UINT64]   = { K(add_u64), K(mul_u64), K(min_u64), K(max_u64) },
	[NZ_FLOAT16]  = { K(f16_add), K(f16_mul), K(min_f16), K(max_f16) },
	[NZ_BFLOAT16] = { K(add_bf16), K(mul_bf16), K(min_bf16),
			  K(max_bf16) },
	[NZ_FLOAT32]  = { K(add_f32), K(mul_f32), K(min_f32), K(max_f32) },
	[NZ_FLOAT64]  = { K(add_f64), K(mul_f64), K(min_f64), K(max_f64) },
};
#undef K

_Static_assert(NZ_SUM == 0 && NZ_PROD == 1 && NZ_MIN == 2 && NZ_MAX == 3,
	       "kern_tab column order");

static const unsigned char dtype_size[NZ_DTYPE_COUNT] = {
	[NZ_INT8] = 1, [NZ_UINT8] = 1, [NZ_INT32] = 4, [NZ_UINT32] = 4,
	[NZ_INT64] = 8, [NZ_UINT64] = 8, [NZ_FLOAT16] = 2,
	[NZ_BFLOAT16] = 2, [NZ_FLOAT32] = 4, [NZ_FLOAT64] = 8,
};

size_t nz_dtype_size(enum nz_dtype t)
{
	if ((unsigned int)t >= NZ_DTYPE_COUNT)
		return 0;
	return dtype_size[t];
}

static const struct nz_kern *lookup(enum nz_dtype t, enum nz_redop op)
{
	if ((unsigned int)t >= NZ_DTYPE_COUNT ||
	    (unsigned int)op >= NZ_REDOP_COUNT)
		return NULL;
	if (op == NZ_AVG)
		op = NZ_SUM;
	return &kern_tab[t][op];
}

/* Do the @bytes long ranges at @p and @q overlap without being equal? */
static int partial_overlap(const void *p, const void *q, size_t bytes)
{
	uintptr_t x = (uintptr_t)p, y = (uintptr_t)q;

	return x != y && x < y + bytes && y < x + bytes;
}

/* x[i] = x[i] OP x[i]: feed a private copy as the second operand. */
static void reduce_self(const struct nz_kern *k, void *x, size_t n,
			size_t esz)
{
	_Alignas(64) unsigned char tmp[4096];
	size_t per = sizeof(tmp) / esz;
	unsigned char *p = x;

	while (n) {
		size_t c = n < per ? n : per;

		memcpy(tmp, p, c * esz);
		k->k2(p, tmp, c);
		p += c * esz;
		n -= c;
	}
}

int nz_reduce3(void *out, const void *a, const void *b, size_t count,
	       enum nz_dtype dtype, enum nz_redop op)
{
	const struct nz_kern *k = lookup(dtype, op);
	size_t esz, bytes;

	if (!k)
		return -EINVAL;
	if (count == 0)
		return 0;
	esz = dtype_size[dtype];
	if (!out || !a || !b || count > SIZE_MAX / esz)
		return -EINVAL;
	bytes = count * esz;
	if (partial_overlap(out, a, bytes) || partial_overlap(out, b, bytes))
		return -EINVAL;

	if (out == a && out == b)
		reduce_self(k, out, count, esz);
	else if (out == a)
		k->k2(out, b, count);
	else if (out == b)
		k->k2(out, a, count);
	else
		k->k3(out, a, b, count);
	return 0;
}

int nz_reduce2(void *inout, const void *in, size_t count,
	      enum nz_dtype dtype, enum nz_redop op)
{
	return nz_reduce3(inout, inout, in, count, dtype, op);
}

/* ------------------------------------------------------------------ */
/* AVG finish                                                          */

/*
 * 8- and 32-bit integers divide in binary64: for |x| < 2^32 the rounding
 * error of x/n is below 2^-21/n, less than the distance 1/n of a
 * non-integral quotient to the next integer, so truncating the binary64
 * quotient is exactly C's truncating division (and it vectorises, unlike
 * integer division).  64-bit integers use integer division.
 */
#define NZ_DIV_INT_VIA_F64(name, T)					\
static NZ_CLONES void name(T *restrict p, size_t n, double dn)		\
{									\
	size_t i = 0;							\
									\
	for (; n - i >= NZ_BLK; i += NZ_BLK)				\
		for (size_t j = 0; j < NZ_BLK; j++)			\
			p[i + j] = (T)((double)p[i + j] / dn);		\
	for (; i < n; i++)						\
		p[i] = (T)((double)p[i] / dn);				\
}
NZ_DIV_INT_VIA_F64(avg_i8, int8_t)
NZ_DIV_INT_VIA_F64(avg_u8, uint8_t)
NZ_DIV_INT_VIA_F64(avg_i32, int32_t)
NZ_DIV_INT_VIA_F64(avg_u32, uint32_t)
#undef NZ_DIV_INT_VIA_F64

static void avg_i64(int64_t *p, size_t n, unsigned nranks)
{
	int64_t d = (int64_t)nranks;

	for (size_t i = 0; i < n; i++)
		p[i] /= d;
}

static void avg_u64(uint64_t *p, size_t n, unsigned nranks)
{
	uint64_t d = nranks;

	for (size_t i = 0; i < n; i++)
		p[i] /= d;
}

/* binary32 quotient in binary64: correctly rounded for nranks < 2^28. */
static NZ_CLONES void avg_f32(float *restrict p, size_t n, double dn)
{
	size_t i = 0;

	for (; n - i >= NZ_BLK; i += NZ_BLK)
		for (size_t j = 0; j < NZ_BLK; j++)
			p[i + j] = (float)((double)p[i + j] / dn);
	for (; i < n; i++)
		p[i] = (float)((double)p[i] / dn);
}

static NZ_CLONES void avg_f64(double *restrict p, size_t n, double dn)
{
	size_t i = 0;

	for (; n - i >= NZ_BLK; i += NZ_BLK)
		for (size_t j = 0; j < NZ_BLK; j++)
			p[i + j] = p[i + j] / dn;
	for (; i < n; i++)
		p[i] = p[i] / dn;
}

/*
 * 16-bit floats, fast path: the binary32 quotient x/n rounded once more to
 * 16 bits equals the correctly rounded quotient as long as the binary32
 * rounding cannot land exactly on a 16-bit midpoint.  A midpoint m = M*2^b
 * (M odd, M < 2^(p+1)) differs from x/n by at least 2^b/n = m/(M*n), which
 * exceeds binary32's half ulp (<= m*2^-24) when M*n <= 2^24, i.e. for
 * n < 2^12 (float16, p = 11) and n < 2^15 (bfloat16, p = 8); the subnormal
 * ranges are at least as safe.  Larger n takes the scalar binary64 path,
 * where the same argument holds for every 32-bit n.
 */
#define NZ_AVG16(name, WIDEN, NARROW)					\
static NZ_CLONES void name(uint16_t *restrict p, size_t n, float fn)	\
{									\
	size_t i = 0;							\
									\
	for (; n - i >= NZ_BLK; i += NZ_BLK)				\
		for (size_t j = 0; j < NZ_BLK; j++)			\
			p[i + j] = NARROW(WIDEN(p[i + j]) / fn);	\
	for (; i < n; i++)						\
		p[i] = NARROW(WIDEN(p[i]) / fn);			\
}
NZ_AVG16(avg_f16_fast, h2f, f2h)
NZ_AVG16(avg_bf16_fast, b2f_arith, f2b_arith)
#undef NZ_AVG16

static void avg_f16_slow(uint16_t *p, size_t n, double dn)
{
	for (size_t i = 0; i < n; i++)
		p[i] = d2narrow((double)f32_from_bits(h2f_bits(p[i])) / dn,
				10, 15);
}

static void avg_bf16_slow(uint16_t *p, size_t n, double dn)
{
	for (size_t i = 0; i < n; i++)
		p[i] = d2narrow((double)f32_from_bits(b2f_bits(p[i])) / dn,
				7, 127);
}

int nz_reduce_finish_avg(void *buf, size_t count, enum nz_dtype dtype,
			 unsigned nranks)
{
	double dn = (double)nranks;

	if ((unsigned int)dtype >= NZ_DTYPE_COUNT || nranks == 0)
		return -EINVAL;
	if (count == 0)
		return 0;
	if (!buf)
		return -EINVAL;
	if (nranks == 1)
		return 0;

	switch (dtype) {
	case NZ_INT8:
		avg_i8(buf, count, dn);
		break;
	case NZ_UINT8:
		avg_u8(buf, count, dn);
		break;
	case NZ_INT32:
		avg_i32(buf, count, dn);
		break;
	case NZ_UINT32:
		avg_u32(buf, count, dn);
		break;
	case NZ_INT64:
		avg_i64(buf, count, nranks);
		break;
	case NZ_UINT64:
		avg_u64(buf, count, nranks);
		break;
	case NZ_FLOAT16:
		if (nranks < (1u << 12))
			avg_f16_fast(buf, count, (float)nranks);
		else
			avg_f16_slow(buf, count, dn);
		break;
	case NZ_BFLOAT16:
		if (nranks < (1u << 15))
			avg_bf16_fast(buf, count, (float)nranks);
		else
			avg_bf16_slow(buf, count, dn);
		break;
	case NZ_FLOAT32:
		avg_f32(buf, count, dn);
		break;
	case NZ_FLOAT64:
		avg_f64(buf, count, dn);
		break;
	default:
		return -EINVAL;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Names                                                               */

static const char *const dtype_names[NZ_DTYPE_COUNT] = {
	[NZ_INT8] = "int8", [NZ_UINT8] = "uint8",
	[NZ_INT32] = "int32", [NZ_UINT32] = "uint32",
	[NZ_INT64] = "int64", [NZ_UINT64] = "uint64",
	[NZ_FLOAT16] = "half", [NZ_BFLOAT16] = "bfloat16",
	[NZ_FLOAT32] = "float", [NZ_FLOAT64] = "double",
};

static const char *const redop_names[NZ_REDOP_COUNT] = {
	[NZ_SUM] = "sum", [NZ_PROD] = "prod", [NZ_MIN] = "min",
	[NZ_MAX] = "max", [NZ_AVG] = "avg",
};

static const struct {
	const char *name;
	enum nz_dtype t;
} dtype_aliases[] = {
	{ "i8", NZ_INT8 }, { "char", NZ_INT8 }, { "int8_t", NZ_INT8 },
	{ "u8", NZ_UINT8 }, { "uint8_t", NZ_UINT8 },
	{ "i32", NZ_INT32 }, { "int", NZ_INT32 }, { "int32_t", NZ_INT32 },
	{ "u32", NZ_UINT32 }, { "uint", NZ_UINT32 },
	{ "uint32_t", NZ_UINT32 },
	{ "i64", NZ_INT64 }, { "int64_t", NZ_INT64 },
	{ "u64", NZ_UINT64 }, { "uint64_t", NZ_UINT64 },
	{ "f16", NZ_FLOAT16 }, { "fp16", NZ_FLOAT16 },
	{ "float16", NZ_FLOAT16 },
	{ "bf16", NZ_BFLOAT16 },
	{ "f32", NZ_FLOAT32 }, { "fp32", NZ_FLOAT32 },
	{ "float32", NZ_FLOAT32 },
	{ "f64", NZ_FLOAT64 }, { "fp64", NZ_FLOAT64 },
	{ "float64", NZ_FLOAT64 },
};

static const struct {
	const char *name;
	enum nz_redop op;
} redop_aliases[] = {
	{ "product", NZ_PROD }, { "mean", NZ_AVG },
};

const char *nz_dtype_name(enum nz_dtype t)
{
	if ((unsigned int)t >= NZ_DTYPE_COUNT)
		return NULL;
	return dtype_names[t];
}

const char *nz_redop_name(enum nz_redop op)
{
	if ((unsigned int)op >= NZ_REDOP_COUNT)
		return NULL;
	return redop_names[op];
}

/* ASCII case-insensitive equality (locale independent). */
static int name_eq(const char *s, const char *lower)
{
	for (;; s++, lower++) {
		unsigned char c = (unsigned char)*s;

		if (c >= 'A' && c <= 'Z')
			c = (unsigned char)(c - 'A' + 'a');
		if (c != (unsigned char)*lower)
			return 0;
		if (!c)
			return 1;
	}
}

int nz_dtype_parse(const char *s, enum nz_dtype *out)
{
	if (!s || !out)
		return -EINVAL;
	for (unsigned int i = 0; i < NZ_DTYPE_COUNT; i++) {
		if (name_eq(s, dtype_names[i])) {
			*out = (enum nz_dtype)i;
			return 0;
		}
	}
	for (size_t i = 0; i < sizeof(dtype_aliases) / sizeof(dtype_aliases[0]);
	     i++) {
		if (name_eq(s, dtype_aliases[i].name)) {
			*out = dtype_aliases[i].t;
			return 0;
		}
	}
	return -EINVAL;
}

int nz_redop_parse(const char *s, enum nz_redop *out)
{
	if (!s || !out)
		return -EINVAL;
	for (unsigned int i = 0; i < NZ_REDOP_COUNT; i++) {
		if (name_eq(s, redop_names[i])) {
			*out = (enum nz_redop)i;
			return 0;
		}
	}
	for (size_t i = 0; i < sizeof(redop_aliases) / sizeof(redop_aliases[0]);
	     i++) {
		if (name_eq(s, redop_aliases[i].name)) {
			*out = redop_aliases[i].op;
			return 0;
		}
	}
	return -EINVAL;
}
