/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libnezha internal: local (CPU) reduction kernels.
 *
 * These combine a received chunk with a local one; the collectives call
 * them between network transfers.  Element semantics are documented with
 * enum nz_redop in nezha_dtype.h; in short:
 *
 *  - integers: SUM and PROD wrap modulo 2^bits, signed types included (the
 *    kernels compute in unsigned arithmetic, so there is no overflow UB);
 *    MIN/MAX compare as signed or unsigned according to the type.
 *  - float32/float64: computed in the element type, in the thread's current
 *    rounding mode, which must be the default round-to-nearest-even for the
 *    results documented here.
 *  - float16/bfloat16: operands are widened exactly to binary32, combined
 *    there and rounded back to nearest-even.  Because binary32 has more than
 *    2p+2 significand bits for both formats, this single sum or product is
 *    correctly rounded.  Overflow gives infinity; subnormals are kept (never
 *    flushed).  The conversions back to 16 bits use integer arithmetic (or
 *    F16C with a fixed round-to-nearest-even immediate) and do not depend
 *    on the rounding mode.
 *  - NaN: SUM and PROD of a NaN give a quiet NaN (float16/bfloat16 keep the
 *    sign and the leading payload bits, as F16C does).  MIN and MAX return
 *    one operand bit for bit: a NaN operand wins ("NaN propagates", like
 *    torch.minimum and NCCL); otherwise the smaller/larger value, with -0
 *    ordered below +0 (IEEE 754-2019 minimum/maximum).  When both operands
 *    are NaN it is unspecified whose payload the result carries.
 *  - all operators are treated as commutative: the kernels may evaluate
 *    a OP b as b OP a, which is only observable in NaN payloads.
 *
 * Buffers must be aligned to the element size; nothing more is needed.
 * The hot loops are compiled several times (AVX-512F, AVX2, baseline) and
 * the variant matching the running CPU is selected at load time; float16
 * SUM/PROD use F16C conversions when the CPU has AVX and F16C, and a
 * bit-identical portable conversion otherwise.
 *
 * All functions are thread safe and do not allocate.
 */
#ifndef NEZHA_REDUCE_H
#define NEZHA_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "nezha_dtype.h"

/*
 * nz_reduce2() - inout[i] = inout[i] OP in[i] for i in [0, count).
 *
 * NZ_AVG reduces like NZ_SUM; the collective calls nz_reduce_finish_avg()
 * once on the final sum.  @inout and @in must be the same pointer or must
 * not overlap.  Either may be NULL when @count is 0.
 *
 * Returns 0, or -EINVAL for an invalid @dtype or @op, a NULL buffer with a
 * non-zero @count, or partially overlapping buffers.  On error nothing is
 * written.
 */
int nz_reduce2(void *inout, const void *in, size_t count,
	      enum nz_dtype dtype, enum nz_redop op);

/*
 * nz_reduce3() - out[i] = a[i] OP b[i] for i in [0, count).
 *
 * @out may be the same pointer as @a and/or @b (in-place step of the ring
 * algorithm) or must not overlap either; @a and @b may overlap each other
 * arbitrarily.  NZ_AVG behaves as NZ_SUM.
 *
 * Returns 0 or -EINVAL as nz_reduce2().
 */
int nz_reduce3(void *out, const void *a, const void *b, size_t count,
	       enum nz_dtype dtype, enum nz_redop op);

/*
 * nz_reduce_finish_avg() - turn the sum of @nranks contributions into their
 * average, in place: buf[i] = buf[i] / nranks.
 *
 *  - integers: C division truncating toward zero of the (wrapped) sum as
 *    stored in the element type, e.g. int8 100+100 wraps to -56, giving
 *    -28 for two ranks.
 *  - floats: the quotient sum/nranks correctly rounded (to nearest-even)
 *    in the element type.  float32 divides in binary64 and rounds once
 *    more, which is correctly rounded for nranks < 2^28 (beyond, a double
 *    rounding can cost one ulp); float64 divides directly;
 *    float16/bfloat16 divide in binary32 for nranks < 2^12 / 2^15, where
 *    that provably gives the correctly rounded result, and in binary64
 *    (exact for every nranks) above.  A division was chosen over a
 *    multiplication by a rounded 1/nranks so that the result does not
 *    depend on how 1/nranks rounds: 41 ranks contributing 1.0f average to
 *    exactly 1.0f, where 41.0f * (1.0f/41) gives 0.99999994f.
 *    Infinities stay infinite; a NaN stays a NaN.
 *  - nranks == 1 leaves the buffer untouched.
 *
 * Returns 0, or -EINVAL for an invalid @dtype, @nranks == 0, or a NULL
 * @buf with a non-zero @count.
 */
int nz_reduce_finish_avg(void *buf, size_t count, enum nz_dtype dtype,
			 unsigned nranks);

/*
 * Scalar conversions between the 16-bit float formats and binary32, with
 * the same semantics as the kernels: widening is exact (a signalling NaN is
 * quieted), narrowing rounds to nearest-even, overflows to infinity, keeps
 * subnormals and turns a NaN into a quiet NaN with the sign and the leading
 * payload bits.  Exported for the collectives' helpers and the tests.
 */
float nz_f16_to_f32(uint16_t h);
uint16_t nz_f32_to_f16(float f);
float nz_bf16_to_f32(uint16_t h);
uint16_t nz_f32_to_bf16(float f);

/*
 * Selection of the float16 SUM/PROD implementation, for tests and
 * benchmarks.  NZ_F16_IMPL_AUTO (the default) uses F16C when the CPU
 * supports it; the others force one path.  The setting is process wide.
 */
enum nz_f16_impl {
	NZ_F16_IMPL_AUTO,
	NZ_F16_IMPL_PORTABLE,
	NZ_F16_IMPL_F16C,
};

/* Returns 1 if the F16C path is available on this CPU and build, else 0. */
int nz_reduce_have_f16c(void);

/*
 * Returns 0, -EINVAL for an unknown @impl, or -ENOTSUP when F16C is
 * requested but nz_reduce_have_f16c() is 0.
 */
int nz_reduce_set_f16_impl(enum nz_f16_impl impl);

#endif /* NEZHA_REDUCE_H */
