/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Inputs and reference results of the collective tests, shared by the
 * host unit test (selftests/unit/test_coll.c) and the guest test
 * (selftests/guest/nz_coll.c).  Header-only: every function is static.
 */
#ifndef NZ_TEST_COLL_REF_H
#define NZ_TEST_COLL_REF_H

#include <stdint.h>
#include <string.h>
#include "nezha_dtype.h"
#include "reduce.h"

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static uint64_t hash3(uint64_t a, uint64_t b, uint64_t c)
{
	return mix(a * 0x9e3779b97f4a7c15ULL + b * 0xd1b54a32d192ed03ULL + c * 0x8cb92ba72f3d8dd7ULL);
}

static int is_float(enum nz_dtype t)
{
	return t == NZ_FLOAT16 || t == NZ_BFLOAT16 || t == NZ_FLOAT32 || t == NZ_FLOAT64;
}

static int is_signed(enum nz_dtype t)
{
	return t == NZ_INT8 || t == NZ_INT32 || t == NZ_INT64;
}

static double fget(const void *p, enum nz_dtype t)
{
	uint16_t h;
	float f;
	double d;

	switch (t) {
	case NZ_FLOAT16: memcpy(&h, p, 2); return nz_f16_to_f32(h);
	case NZ_BFLOAT16: memcpy(&h, p, 2); return nz_bf16_to_f32(h);
	case NZ_FLOAT32: memcpy(&f, p, 4); return f;
	default: memcpy(&d, p, 8); return d;
	}
}

static void fput(void *p, enum nz_dtype t, double v)
{
	uint16_t h;
	float f = (float)v;

	switch (t) {
	case NZ_FLOAT16: h = nz_f32_to_f16(f); memcpy(p, &h, 2); break;
	case NZ_BFLOAT16: h = nz_f32_to_bf16(f); memcpy(p, &h, 2); break;
	case NZ_FLOAT32: memcpy(p, &f, 4); break;
	default: memcpy(p, &v, 8); break;
	}
}

static uint64_t iget(const void *p, enum nz_dtype t)
{
	uint64_t v = 0;

	memcpy(&v, p, nz_dtype_size(t));	/* little endian host */
	return v;
}

static void iput(void *p, enum nz_dtype t, uint64_t v)
{
	memcpy(p, &v, nz_dtype_size(t));
}

static int64_t sext(uint64_t v, enum nz_dtype t)
{
	unsigned int bits = 8 * (unsigned int)nz_dtype_size(t);

	if (bits == 64)
		return (int64_t)v;
	v &= (1ULL << bits) - 1;
	return (v >> (bits - 1)) ? (int64_t)(v | ~((1ULL << bits) - 1)) : (int64_t)v;
}

/*
 * Element i of rank r's input.  Reductions: floats get small integers
 * (SUM/AVG), +-2^k (PROD) or eighths rounded to the type (MIN/MAX), so
 * that any order of evaluation gives the same exact result; integers get
 * all 64 random bits (wrapping sums and products are exact too).  Other
 * collectives: random bits.
 */
static void gen(void *p, enum nz_dtype t, int op, int r, size_t i)
{
	uint64_t h = hash3((uint64_t)r, i, (uint64_t)(t * 8 + op));

	if (op < 0 || !is_float(t)) {
		iput(p, t, h);
	} else if (op == NZ_SUM || op == NZ_AVG) {
		fput(p, t, (double)((int)(h % 11) - 5));
	} else if (op == NZ_PROD) {
		static const double f[] = { 1, 2, -1, 0.5 };

		fput(p, t, f[h % 4]);
	} else {
		fput(p, t, ((double)(int)(h % 2001) - 1000) / 8.0);
	}
}

/* out = OP over ranks 0..n-1 of element i of in[r] (gen(r, i) if NULL). */
static void ref(void *out, enum nz_dtype t, enum nz_redop op, int n, size_t i,
		unsigned char *const *in)
{
	size_t es = nz_dtype_size(t);
	unsigned char x[8];
	enum nz_redop fold = op == NZ_AVG ? NZ_SUM : op;

	if (is_float(t)) {
		double acc = 0, v;

		for (int r = 0; r < n; r++) {
			if (in)
				memcpy(x, in[r] + i * es, es);
			else
				gen(x, t, op, r, i);
			v = fget(x, t);
			if (!r)
				acc = v;
			else if (fold == NZ_SUM)
				acc += v;
			else if (fold == NZ_PROD)
				acc *= v;
			else if (fold == NZ_MIN)
				acc = v < acc ? v : acc;
			else
				acc = v > acc ? v : acc;
		}
		fput(out, t, acc);
	} else {
		uint64_t acc = 0, v;

		for (int r = 0; r < n; r++) {
			if (in)
				memcpy(x, in[r] + i * es, es);
			else
				gen(x, t, op, r, i);
			v = iget(x, t);
			if (!r)
				acc = v;
			else if (fold == NZ_SUM)
				acc += v;
			else if (fold == NZ_PROD)
				acc *= v;
			else if (is_signed(t))
				acc = (fold == NZ_MIN) == (sext(v, t) < sext(acc, t)) ? v : acc;
			else
				acc = (fold == NZ_MIN) == ((v & ((nz_dtype_size(t) == 8) ? ~0ULL :
						(1ULL << (8 * nz_dtype_size(t))) - 1)) <
						(acc & ((nz_dtype_size(t) == 8) ? ~0ULL :
						(1ULL << (8 * nz_dtype_size(t))) - 1))) ? v : acc;
		}
		iput(out, t, acc);
	}
	if (op == NZ_AVG)
		nz_reduce_finish_avg(out, 1, t, (unsigned int)n);
}

#endif /* NZ_TEST_COLL_REF_H */
