/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libnezha: element data types and reduction operators.
 *
 * Collectives (all-reduce, reduce-scatter, ...) describe their buffers as a
 * count of elements of one enum nz_dtype and combine them with one
 * enum nz_redop.  This header names both enumerations and provides the
 * size, printable name and parser of each value.
 *
 * Element formats:
 *   NZ_INT8 .. NZ_UINT64  two's complement / unsigned integers, host order
 *   NZ_FLOAT16            IEEE 754 binary16 ("half"), stored as 16 bits
 *   NZ_BFLOAT16           bfloat16 (upper 16 bits of a binary32)
 *   NZ_FLOAT32            IEEE 754 binary32 (C float)
 *   NZ_FLOAT64            IEEE 754 binary64 (C double)
 * Buffers must be aligned to the element size.
 *
 * The numeric values of both enumerations are part of the library ABI; new
 * values are only ever added before the *_COUNT sentinel.
 */
#ifndef NEZHA_DTYPE_H
#define NEZHA_DTYPE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element type of a collective's buffers. */
enum nz_dtype {
	NZ_INT8,	/* int8_t */
	NZ_UINT8,	/* uint8_t */
	NZ_INT32,	/* int32_t */
	NZ_UINT32,	/* uint32_t */
	NZ_INT64,	/* int64_t */
	NZ_UINT64,	/* uint64_t */
	NZ_FLOAT16,	/* IEEE 754 binary16 */
	NZ_BFLOAT16,	/* bfloat16 */
	NZ_FLOAT32,	/* IEEE 754 binary32 */
	NZ_FLOAT64,	/* IEEE 754 binary64 */
	NZ_DTYPE_COUNT	/* number of types; not a valid type */
};

/*
 * Reduction operator.  All operators are applied element by element.
 *
 *   NZ_SUM   integer sums wrap modulo 2^bits (also for signed types);
 *            float sums are rounded to nearest-even in the element type
 *            (binary16/bfloat16 are computed in binary32, which gives the
 *            correctly rounded result).
 *   NZ_PROD  like NZ_SUM, for the product.
 *   NZ_MIN   minimum; NZ_MAX maximum.  For floats a NaN operand propagates
 *            (the result is a NaN if either operand is one) and -0 is
 *            ordered below +0.
 *   NZ_AVG   the sum divided by the number of ranks, once, at the end:
 *            integers use C truncating division of the wrapped sum, floats
 *            give the rounded quotient (see the collective's documentation);
 *            the collectives sum binary16/bfloat16 in binary32, so that the
 *            sum never overflows before the division.
 */
enum nz_redop {
	NZ_SUM,
	NZ_PROD,
	NZ_MIN,
	NZ_MAX,
	NZ_AVG,
	NZ_REDOP_COUNT	/* number of operators; not a valid operator */
};

/*
 * nz_dtype_size() - size of one element of type @t in bytes.
 *
 * Returns 1, 2, 4 or 8, or 0 if @t is not a valid enum nz_dtype.
 */
size_t nz_dtype_size(enum nz_dtype t);

/*
 * nz_dtype_name() - printable name of type @t.
 *
 * The names are those nccl-tests prints: "int8", "uint8", "int32",
 * "uint32", "int64", "uint64", "half", "bfloat16", "float", "double".
 * Returns a static string, or NULL if @t is not a valid enum nz_dtype.
 */
const char *nz_dtype_name(enum nz_dtype t);

/*
 * nz_redop_name() - printable name of operator @op.
 *
 * Returns "sum", "prod", "min", "max" or "avg" (as nccl-tests prints them),
 * or NULL if @op is not a valid enum nz_redop.
 */
const char *nz_redop_name(enum nz_redop op);

/*
 * nz_dtype_parse() - parse a type name.
 * @s:   the name; ASCII case is ignored
 * @out: receives the type on success, untouched on failure
 *
 * Accepts every name nz_dtype_name() returns and these aliases:
 *   int8:   i8, char, int8_t          uint8:  u8, uint8_t
 *   int32:  i32, int, int32_t         uint32: u32, uint, uint32_t
 *   int64:  i64, int64_t              uint64: u64, uint64_t
 *   half:   f16, fp16, float16        bfloat16: bf16
 *   float:  f32, fp32, float32        double: f64, fp64, float64
 *
 * Returns 0 on success, -EINVAL if @s is NULL or not a known name, or if
 * @out is NULL.
 */
int nz_dtype_parse(const char *s, enum nz_dtype *out);

/*
 * nz_redop_parse() - parse an operator name.
 * @s:   the name; ASCII case is ignored
 * @out: receives the operator on success, untouched on failure
 *
 * Accepts every name nz_redop_name() returns and the aliases "product"
 * (prod) and "mean" (avg).
 *
 * Returns 0 on success, -EINVAL if @s is NULL or not a known name, or if
 * @out is NULL.
 */
int nz_redop_parse(const char *s, enum nz_redop *out);

#ifdef __cplusplus
}
#endif

#endif /* NEZHA_DTYPE_H */
