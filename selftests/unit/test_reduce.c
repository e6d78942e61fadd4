// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Unit tests for libnezha's local reduction kernels (libnezha-user/reduce.c)
 * and the dtype/redop helpers of nezha_dtype.h.  Output is TAP; the exit
 * status is 0 iff every test passed (skips count as passes).
 *
 * Build (from the top of the tree):
 *   cc -std=c11 -Wall -Wextra -Werror -O2 -Ilibnezha-user/include \
 *      -Ilibnezha-user selftests/unit/test_reduce.c libnezha-user/reduce.c \
 *      -o build/unit/test_reduce
 *
 * Environment:
 *   NZ_TEST_SEED=<n>      seed of the random data (default fixed, printed)
 *   NZ_TEST_EXHAUSTIVE=1  also check every binary32 -> binary16 conversion
 *                         and every float16 SUM/PROD operand pair, F16C
 *                         against portable (slow: about a minute)
 *
 * The reference implementation here is deliberately independent of the
 * library: 16-bit and binary32 values are decoded to binary64 by scaling,
 * the operation is done in binary64 and the result is rounded back by
 * scaling to an integer significand and comparing the remainder with 1/2.
 * For SUM and PROD binary64 has more than twice the significand bits plus
 * two of every target format, so that double rounding is exact.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>		/* NAN and INFINITY only; no libm needed */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nezha_dtype.h"
#include "reduce.h"

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && \
	defined(__has_attribute)
#if __has_attribute(target)
#define HAVE_X86 1
#include <immintrin.h>
#endif
#endif

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------------ */
/* TAP harness                                                         */

typedef int test_fn(int p, int q);	/* 1 pass, 0 fail, -1 skip */

struct test {
	char name[96];
	test_fn *fn;
	int p, q;
};

static struct test tests[256];
static int ntests;
static int diag_budget;
static char skip_reason[128];
static uint64_t seed = 0x6e657a6861ull;	/* "nezha" */
static int exhaustive;

static void add_test(test_fn *fn, int p, int q, const char *fmt, ...)
{
	va_list ap;

	if (ntests >= (int)ARRAY_SIZE(tests)) {
		fprintf(stderr, "too many tests\n");
		exit(2);
	}
	va_start(ap, fmt);
	vsnprintf(tests[ntests].name, sizeof(tests[ntests].name), fmt, ap);
	va_end(ap);
	tests[ntests].fn = fn;
	tests[ntests].p = p;
	tests[ntests].q = q;
	ntests++;
}

/* A "# " diagnostic line; at most a few per test. */
static void diag(const char *fmt, ...)
{
	va_list ap;

	if (diag_budget <= 0)
		return;
	if (--diag_budget == 0) {
		printf("#   (further diagnostics suppressed)\n");
		return;
	}
	printf("#   ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

static int skip(const char *why)
{
	snprintf(skip_reason, sizeof(skip_reason), "%s", why);
	return -1;
}

/* ------------------------------------------------------------------ */
/* Random numbers (splitmix64)                                         */

static uint64_t rng;

static uint64_t rnd(void)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* ------------------------------------------------------------------ */
/* Element access and formats                                          */

static uint64_t get_el(const void *p, size_t i, size_t esz)
{
	const unsigned char *c = (const unsigned char *)p + i * esz;
	uint8_t v8;
	uint16_t v16;
	uint32_t v32;
	uint64_t v64;

	switch (esz) {
	case 1:
		memcpy(&v8, c, 1);
		return v8;
	case 2:
		memcpy(&v16, c, 2);
		return v16;
	case 4:
		memcpy(&v32, c, 4);
		return v32;
	default:
		memcpy(&v64, c, 8);
		return v64;
	}
}

static void set_el(void *p, size_t i, size_t esz, uint64_t v)
{
	unsigned char *c = (unsigned char *)p + i * esz;
	uint8_t v8 = (uint8_t)v;
	uint16_t v16 = (uint16_t)v;
	uint32_t v32 = (uint32_t)v;

	switch (esz) {
	case 1:
		memcpy(c, &v8, 1);
		break;
	case 2:
		memcpy(c, &v16, 2);
		break;
	case 4:
		memcpy(c, &v32, 4);
		break;
	default:
		memcpy(c, &v, 8);
		break;
	}
}

static uint64_t mask_of(size_t esz)
{
	return esz == 8 ? ~0ull : (1ull << (8 * esz)) - 1;
}

static int is_signed(enum nz_dtype t)
{
	return t == NZ_INT8 || t == NZ_INT32 || t == NZ_INT64;
}

static int64_t sext(uint64_t v, size_t esz)
{
	uint64_t sign = 1ull << (8 * esz - 1);

	/* two's complement sign extension without implementation-defined
	 * conversions: subtract 2^bits from negative values */
	if (esz == 8)
		return v & sign ? -(int64_t)(~v) - 1 : (int64_t)v;
	return v & sign ? (int64_t)v - (int64_t)(sign << 1) : (int64_t)v;
}

struct fmt {
	int eb, mb;		/* exponent and stored significand bits */
};

static const struct fmt fmt_f16 = { 5, 10 }, fmt_bf16 = { 8, 7 },
			fmt_f32 = { 8, 23 }, fmt_f64 = { 11, 52 };

static const struct fmt *fmt_of(enum nz_dtype t)
{
	switch (t) {
	case NZ_FLOAT16:
		return &fmt_f16;
	case NZ_BFLOAT16:
		return &fmt_bf16;
	case NZ_FLOAT32:
		return &fmt_f32;
	case NZ_FLOAT64:
		return &fmt_f64;
	default:
		return NULL;
	}
}

static int fbias(const struct fmt *f) { return (1 << (f->eb - 1)) - 1; }
static uint64_t femask(const struct fmt *f) { return (1ull << f->eb) - 1; }
static uint64_t fmmask(const struct fmt *f) { return (1ull << f->mb) - 1; }
static uint64_t fsign(const struct fmt *f)
{
	return 1ull << (f->eb + f->mb);
}

static uint64_t fexp(const struct fmt *f, uint64_t v)
{
	return (v >> f->mb) & femask(f);
}

static int f_isnan(const struct fmt *f, uint64_t v)
{
	return fexp(f, v) == femask(f) && (v & fmmask(f)) != 0;
}

static uint64_t d_bits(double d)
{
	uint64_t u;

	memcpy(&u, &d, 8);
	return u;
}

static double bits_d(uint64_t u)
{
	double d;

	memcpy(&d, &u, 8);
	return d;
}

/* 2^k for binary64-normal k */
static double pow2(int k)
{
	return bits_d((uint64_t)(k + 1023) << 52);
}

/* Decode any of the float formats to binary64 by scaling. */
static double dec(const struct fmt *f, uint64_t v)
{
	uint64_t e = fexp(f, v), m = v & fmmask(f);
	int bias = fbias(f);
	double d;

	if (f == &fmt_f64)
		return bits_d(v);
	if (e == femask(f))
		d = m ? NAN : INFINITY;
	else if (e == 0)
		d = (double)m * pow2(1 - bias - f->mb);
	else
		d = (double)(m | (1ull << f->mb)) * pow2((int)e - bias - f->mb);
	return (v & fsign(f)) ? -d : d;
}

/*
 * Round binary64 to nearest-even in format @f (not binary64): scale to an
 * integer significand, compare the fraction with 1/2.
 */
static uint64_t enc(const struct fmt *f, double d)
{
	uint64_t u = d_bits(d);
	uint64_t sign = (u >> 63) ? fsign(f) : 0;
	uint64_t inf = femask(f) << f->mb;
	int bias = fbias(f), E, qexp;
	double x = bits_d(u & ~(1ull << 63)), y, frac;
	uint64_t q, r;

	if (x != x)
		return sign | inf | (1ull << (f->mb - 1));
	if (x == 0)
		return sign;
	if (x == INFINITY)
		return sign | inf;
	E = (int)((d_bits(x) >> 52) & 0x7ff) - 1023;	/* x >= 2^-1022 here */
	qexp = E < 1 - bias ? 1 - bias - f->mb : E - f->mb;
	if (qexp > 1023)
		return sign | inf;
	y = x * pow2(-qexp);	/* exact: power-of-two scaling */
	q = (uint64_t)y;
	frac = y - (double)q;
	if (frac > 0.5 || (frac == 0.5 && (q & 1)))
		q++;
	if (E < 1 - bias)
		r = q;		/* subnormal; q == 2^mb is the smallest normal */
	else
		r = ((uint64_t)(E + bias) << f->mb) + q - (1ull << f->mb);
	if (r >= inf)
		r = inf;
	return sign | r;
}

/* ------------------------------------------------------------------ */
/* Reference reduction                                                 */

/* Is @r an acceptable result of a OP b? */
static int elem_ok(enum nz_dtype t, enum nz_redop op, uint64_t a, uint64_t b,
		   uint64_t r)
{
	size_t esz = nz_dtype_size(t);
	uint64_t mask = mask_of(esz);
	const struct fmt *f = fmt_of(t);

	if (op == NZ_AVG)
		op = NZ_SUM;
	if (!f) {
		uint64_t want;
		int lt;

		switch (op) {
		case NZ_SUM:
			want = (a + b) & mask;
			break;
		case NZ_PROD:
			want = (a * b) & mask;
			break;
		default:
			lt = is_signed(t) ? sext(a, esz) < sext(b, esz) : a < b;
			want = (op == NZ_MIN) == lt ? a : b;
			break;
		}
		return r == want;
	}

	if (op == NZ_MIN || op == NZ_MAX) {
		int an = f_isnan(f, a), bn = f_isnan(f, b);
		double x, y;
		uint64_t want;

		if (an && bn)
			return r == a || r == b;
		if (an)
			return r == a;
		if (bn)
			return r == b;
		x = dec(f, a);
		y = dec(f, b);
		if (x < y)
			want = op == NZ_MIN ? a : b;
		else if (y < x)
			want = op == NZ_MIN ? b : a;
		else if (x == 0)	/* +-0: -0 is the smaller */
			want = (op == NZ_MIN) == !!(a & fsign(f)) ? a : b;
		else
			want = a;	/* equal non-zero: same encoding */
		return r == want;
	} else {
		double x = dec(f, a), y = dec(f, b);
		double z = op == NZ_SUM ? x + y : x * y;

		if (z != z)
			return f_isnan(f, r);
		if (f == &fmt_f64)
			return r == d_bits(z);
		return r == enc(f, z);
	}
}

static const char *hexfmt(size_t esz)
{
	switch (esz) {
	case 1:
		return "%02llx";
	case 2:
		return "%04llx";
	case 4:
		return "%08llx";
	default:
		return "%016llx";
	}
}

static int check_result(enum nz_dtype t, enum nz_redop op, const void *res,
			const void *a, const void *b, size_t n,
			const char *what)
{
	size_t esz = nz_dtype_size(t);
	int ok = 1;

	for (size_t i = 0; i < n; i++) {
		uint64_t x = get_el(a, i, esz), y = get_el(b, i, esz);
		uint64_t r = get_el(res, i, esz);
		char s[3][24];

		if (elem_ok(t, op, x, y, r))
			continue;
		snprintf(s[0], sizeof(s[0]), hexfmt(esz), (unsigned long long)x);
		snprintf(s[1], sizeof(s[1]), hexfmt(esz), (unsigned long long)y);
		snprintf(s[2], sizeof(s[2]), hexfmt(esz), (unsigned long long)r);
		diag("%s: [%zu] %s %s %s = %s", what, i, s[0],
		     nz_redop_name(op), s[1], s[2]);
		ok = 0;
	}
	return ok;
}

/* ------------------------------------------------------------------ */
/* Data generation and guarded buffers                                 */

static uint64_t special_float(const struct fmt *f, unsigned int k)
{
	uint64_t s = fsign(f), inf = femask(f) << f->mb;
	uint64_t one = (uint64_t)fbias(f) << f->mb;
	uint64_t maxf = inf - 1, minn = 1ull << f->mb;
	const uint64_t v[] = {
		0, s, inf, s | inf, inf | (1ull << (f->mb - 1)),
		s | inf | (1ull << (f->mb - 1)), inf | 1 /* sNaN */,
		1 /* min subnormal */, s | 1, minn - 1 /* max subnormal */,
		minn, s | minn, maxf, s | maxf, one, s | one,
		one + (1ull << f->mb), one - (1ull << f->mb), maxf - 1,
	};

	return v[k % ARRAY_SIZE(v)];
}

static uint64_t rand_elem(enum nz_dtype t)
{
	size_t esz = nz_dtype_size(t);
	uint64_t mask = mask_of(esz);
	const struct fmt *f = fmt_of(t);
	unsigned int sel = (unsigned int)(rnd() & 7);

	if (!f) {
		const uint64_t ext[] = { 0, 1, mask, mask >> 1, (mask >> 1) + 1,
					 2, mask - 1 };

		if (sel < 2)
			return (uint64_t)((int64_t)(rnd() % 7) - 3) & mask;
		if (sel == 2)
			return ext[rnd() % ARRAY_SIZE(ext)];
		return rnd() & mask;
	}
	if (sel < 3)
		return rnd() & mask;	/* any pattern: NaN, inf, subnormal */
	if (sel == 3)
		return special_float(f, (unsigned int)rnd());
	/* "nice" values around 1 */
	return ((rnd() & 1) ? fsign(f) : 0) |
	       (((uint64_t)fbias(f) - 4 + rnd() % 9) << f->mb) |
	       (rnd() & fmmask(f));
}

#define GUARD 64
#define GUARD_BYTE 0xa5

struct buf {
	unsigned char *base, *p;
	size_t total, bytes;
};

static void buf_alloc(struct buf *b, size_t n, size_t esz, size_t off)
{
	b->bytes = n * esz;
	b->total = GUARD + off * esz + b->bytes + GUARD;
	b->base = malloc(b->total);
	if (!b->base) {
		fprintf(stderr, "out of memory\n");
		exit(2);
	}
	memset(b->base, GUARD_BYTE, b->total);
	b->p = b->base + GUARD + off * esz;
}

static int buf_guards_ok(const struct buf *b, const char *what)
{
	size_t lo = (size_t)(b->p - b->base), hi = lo + b->bytes;

	for (size_t i = 0; i < b->total; i++) {
		if ((i < lo || i >= hi) && b->base[i] != GUARD_BYTE) {
			diag("%s: write outside the buffer at offset %ld",
			     what, (long)i - (long)lo);
			return 0;
		}
	}
	return 1;
}

static void buf_free(struct buf *b)
{
	free(b->base);
	b->base = b->p = NULL;
}

static void fill_random(void *p, size_t n, enum nz_dtype t)
{
	size_t esz = nz_dtype_size(t);

	for (size_t i = 0; i < n; i++)
		set_el(p, i, esz, rand_elem(t));
}

/* Force a float16 implementation for one test; -1 leaves AUTO. */
static int with_f16_impl(int impl)
{
	if (impl < 0)
		return nz_reduce_set_f16_impl(NZ_F16_IMPL_AUTO);
	return nz_reduce_set_f16_impl((enum nz_f16_impl)impl);
}

static const char *impl_name(int impl)
{
	return impl == NZ_F16_IMPL_PORTABLE ? "portable" :
	       impl == NZ_F16_IMPL_F16C ? "f16c" : "auto";
}

/* ------------------------------------------------------------------ */
/* dtype x op against the reference, every aliasing form               */

static const size_t counts[] = { 0, 1, 7, 31, 63, 64, 65, 1000, 4097 };
static const size_t offsets[][3] = { { 0, 0, 0 }, { 1, 2, 3 }, { 3, 1, 2 } };

static int t_reduce(int p, int impl)
{
	enum nz_dtype t = (enum nz_dtype)(p / NZ_REDOP_COUNT);
	enum nz_redop op = (enum nz_redop)(p % NZ_REDOP_COUNT);
	size_t esz = nz_dtype_size(t);
	int ok = 1;

	if (impl == NZ_F16_IMPL_F16C && !nz_reduce_have_f16c())
		return skip("CPU has no F16C");
	if (with_f16_impl(impl)) {
		diag("nz_reduce_set_f16_impl(%d) failed", impl);
		return 0;
	}

	for (size_t c = 0; c < ARRAY_SIZE(counts); c++) {
		for (size_t o = 0; o < ARRAY_SIZE(offsets); o++) {
			size_t n = counts[c], bytes = n * esz;
			struct buf A, B, O, X;
			unsigned char *ca, *cb;
			char what[96];
			int rc;

			buf_alloc(&A, n, esz, offsets[o][0]);
			buf_alloc(&B, n, esz, offsets[o][1]);
			buf_alloc(&O, n, esz, offsets[o][2]);
			buf_alloc(&X, n, esz, offsets[o][2]);
			fill_random(A.p, n, t);
			fill_random(B.p, n, t);
			ca = malloc(bytes + 1);
			cb = malloc(bytes + 1);
			if (!ca || !cb)
				exit(2);
			memcpy(ca, A.p, bytes);
			memcpy(cb, B.p, bytes);

#define STEP(label, call, res, ra, rb)					\
	do {								\
		snprintf(what, sizeof(what), "n=%zu off=%zu/%zu/%zu %s", \
			 n, offsets[o][0], offsets[o][1], offsets[o][2], \
			 label);					\
		rc = (call);						\
		if (rc) {						\
			diag("%s: returned %d", what, rc);		\
			ok = 0;						\
		}							\
		ok &= check_result(t, op, res, ra, rb, n, what);	\
		ok &= buf_guards_ok(&O, what) & buf_guards_ok(&X, what); \
		if (memcmp(A.p, ca, bytes) || memcmp(B.p, cb, bytes)) { \
			diag("%s: an input was modified", what);	\
			ok = 0;						\
		}							\
	} while (0)

			memset(O.p, 0x5a, bytes);
			STEP("reduce3(o,a,b)",
			     nz_reduce3(O.p, A.p, B.p, n, t, op), O.p, ca, cb);
			memcpy(X.p, ca, bytes);
			STEP("reduce(x=a,b)",
			     nz_reduce2(X.p, B.p, n, t, op), X.p, ca, cb);
			memcpy(X.p, ca, bytes);
			STEP("reduce3(x=a,x,b)",
			     nz_reduce3(X.p, X.p, B.p, n, t, op), X.p, ca, cb);
			memcpy(X.p, cb, bytes);
			STEP("reduce3(x=b,a,x)",
			     nz_reduce3(X.p, A.p, X.p, n, t, op), X.p, ca, cb);
			memcpy(X.p, ca, bytes);
			STEP("reduce3(x=a,x,x)",
			     nz_reduce3(X.p, X.p, X.p, n, t, op), X.p, ca, ca);
			memcpy(X.p, ca, bytes);
			STEP("reduce(x=a,x)",
			     nz_reduce2(X.p, X.p, n, t, op), X.p, ca, ca);
			memset(O.p, 0x5a, bytes);
			STEP("reduce3(o,a,a)",
			     nz_reduce3(O.p, A.p, A.p, n, t, op), O.p, ca, ca);
#undef STEP
			free(ca);
			free(cb);
			buf_free(&A);
			buf_free(&B);
			buf_free(&O);
			buf_free(&X);
		}
	}
	with_f16_impl(-1);
	return ok;
}

/*
 * Exactly sized heap buffers (no slack), so that an over-read or
 * over-write is caught by AddressSanitizer; results checked too.
 */
static int t_exact_buffers(int p, int q)
{
	static const size_t ns[] = { 1, 7, 31, 65, 4097 };
	int ok = 1;

	(void)p;
	(void)q;
	for (int t = 0; t < NZ_DTYPE_COUNT; t++) {
		size_t esz = nz_dtype_size((enum nz_dtype)t);

		for (int op = 0; op < NZ_REDOP_COUNT; op++) {
			for (size_t k = 0; k < ARRAY_SIZE(ns); k++) {
				size_t n = ns[k];
				unsigned char *a = malloc(n * esz);
				unsigned char *b = malloc(n * esz);
				unsigned char *o = malloc(n * esz);

				if (!a || !b || !o)
					exit(2);
				fill_random(a, n, (enum nz_dtype)t);
				fill_random(b, n, (enum nz_dtype)t);
				if (nz_reduce3(o, a, b, n, (enum nz_dtype)t,
					       (enum nz_redop)op))
					ok = 0;
				ok &= check_result((enum nz_dtype)t,
						   (enum nz_redop)op, o, a, b,
						   n, "exact reduce3");
				memcpy(o, a, n * esz);
				if (nz_reduce2(o, b, n, (enum nz_dtype)t,
					      (enum nz_redop)op))
					ok = 0;
				ok &= check_result((enum nz_dtype)t,
						   (enum nz_redop)op, o, a, b,
						   n, "exact reduce");
				if (op == NZ_AVG &&
				    nz_reduce_finish_avg(o, n,
							 (enum nz_dtype)t, 3))
					ok = 0;
				free(a);
				free(b);
				free(o);
			}
		}
	}
	return ok;
}

/* ------------------------------------------------------------------ */
/* Fixed cases                                                         */

struct fcase {
	enum nz_dtype t;
	enum nz_redop op;
	uint64_t a, b, want;
	int flags;
};

#define ANY_NAN		1	/* any NaN is fine */
#define QUIET_NAN	2	/* a quiet NaN (any payload) */

static int run_cases(const struct fcase *cs, size_t n, const char *tag)
{
	int ok = 1;

	for (size_t i = 0; i < n; i++) {
		const struct fcase *c = &cs[i];
		size_t esz = nz_dtype_size(c->t);
		const struct fmt *f = fmt_of(c->t);
		unsigned char a[8], b[8], r[8];
		uint64_t got;
		int good;

		set_el(a, 0, esz, c->a);
		set_el(b, 0, esz, c->b);
		memset(r, 0, sizeof(r));
		if (nz_reduce3(r, a, b, 1, c->t, c->op)) {
			diag("%s case %zu: error", tag, i);
			ok = 0;
			continue;
		}
		got = get_el(r, 0, esz);
		if (c->flags & (ANY_NAN | QUIET_NAN)) {
			good = f && f_isnan(f, got);
			if (c->flags & QUIET_NAN)
				good = good && (got & (1ull << (f->mb - 1)));
		} else {
			good = got == c->want;
		}
		/* the 2-operand form, both operand orders */
		memcpy(r, a, esz);
		nz_reduce2(r, b, 1, c->t, c->op);
		if (!(c->flags & (ANY_NAN | QUIET_NAN)))
			good = good && get_el(r, 0, esz) == c->want;
		memcpy(r, b, esz);
		nz_reduce2(r, a, 1, c->t, c->op);
		if (!(c->flags & (ANY_NAN | QUIET_NAN)) && c->op != NZ_MIN &&
		    c->op != NZ_MAX)
			good = good && get_el(r, 0, esz) == c->want;
		if (!good) {
			diag("%s case %zu: %s %s(%llx, %llx) = %llx, want %llx%s",
			     tag, i, nz_dtype_name(c->t), nz_redop_name(c->op),
			     (unsigned long long)c->a, (unsigned long long)c->b,
			     (unsigned long long)got,
			     (unsigned long long)c->want,
			     c->flags ? " (NaN)" : "");
			ok = 0;
		}
	}
	return ok;
}

/* float16 / bfloat16 rounding through the kernels. */
static int t_round16(int p, int impl)
{
	static const struct fcase cs[] = {
		/* float16: ties to even */
		{ NZ_FLOAT16, NZ_SUM, 0x3c00, 0x1000, 0x3c00, 0 }, /* 1+2^-11 */
		{ NZ_FLOAT16, NZ_SUM, 0x3c01, 0x1000, 0x3c02, 0 },
		{ NZ_FLOAT16, NZ_SUM, 0x3c00, 0x1001, 0x3c01, 0 }, /* > tie */
		{ NZ_FLOAT16, NZ_SUM, 0xbc00, 0x9000, 0xbc00, 0 },
		{ NZ_FLOAT16, NZ_PROD, 0x3e00, 0x3e00, 0x4080, 0 }, /* 2.25 */
		{ NZ_FLOAT16, NZ_PROD, 0x3c01, 0x3c01, 0x3c02, 0 },
		/* overflow */
		{ NZ_FLOAT16, NZ_SUM, 0x7bff, 0x7bff, 0x7c00, 0 },
		{ NZ_FLOAT16, NZ_SUM, 0x7bff, 0x4c00, 0x7c00, 0 }, /* 65520 */
		{ NZ_FLOAT16, NZ_SUM, 0x7bff, 0x4b00, 0x7bff, 0 }, /* 65518 */
		{ NZ_FLOAT16, NZ_SUM, 0xfbff, 0xcc00, 0xfc00, 0 },
		{ NZ_FLOAT16, NZ_PROD, 0x5c00, 0x5c00, 0x7c00, 0 }, /* 256^2 */
		{ NZ_FLOAT16, NZ_PROD, 0x7bff, 0x3c00, 0x7bff, 0 },
		/* subnormals */
		{ NZ_FLOAT16, NZ_SUM, 0x0001, 0x0001, 0x0002, 0 },
		{ NZ_FLOAT16, NZ_SUM, 0x03ff, 0x0001, 0x0400, 0 },
		{ NZ_FLOAT16, NZ_SUM, 0x8001, 0x0001, 0x0000, 0 },
		{ NZ_FLOAT16, NZ_PROD, 0x0001, 0x3800, 0x0000, 0 }, /* 2^-25 */
		{ NZ_FLOAT16, NZ_PROD, 0x0003, 0x3800, 0x0002, 0 }, /* 1.5 */
		{ NZ_FLOAT16, NZ_PROD, 0x0001, 0x3a00, 0x0001, 0 }, /* .75 */
		{ NZ_FLOAT16, NZ_PROD, 0x8001, 0x3800, 0x8000, 0 },
		{ NZ_FLOAT16, NZ_PROD, 0x0400, 0x3800, 0x0200, 0 },
		{ NZ_FLOAT16, NZ_PROD, 0x0200, 0x4000, 0x0400, 0 },
		/* inf and NaN */
		{ NZ_FLOAT16, NZ_SUM, 0x7c00, 0x3c00, 0x7c00, 0 },
		{ NZ_FLOAT16, NZ_SUM, 0x7c00, 0xfc00, 0, QUIET_NAN },
		{ NZ_FLOAT16, NZ_PROD, 0x7c00, 0x0000, 0, QUIET_NAN },
		{ NZ_FLOAT16, NZ_SUM, 0x7e00, 0x3c00, 0, QUIET_NAN },
		{ NZ_FLOAT16, NZ_SUM, 0x7c01, 0x0000, 0, QUIET_NAN }, /* sNaN */
		{ NZ_FLOAT16, NZ_PROD, 0x3c00, 0xfd55, 0, QUIET_NAN },
		{ NZ_FLOAT16, NZ_MIN, 0x7c01, 0x3c00, 0x7c01, 0 },
		{ NZ_FLOAT16, NZ_MAX, 0x3c00, 0xfe00, 0xfe00, 0 },
		{ NZ_FLOAT16, NZ_MIN, 0x8000, 0x0000, 0x8000, 0 },
		{ NZ_FLOAT16, NZ_MAX, 0x8000, 0x0000, 0x0000, 0 },
		{ NZ_FLOAT16, NZ_MIN, 0xfc00, 0xfbff, 0xfc00, 0 },
		{ NZ_FLOAT16, NZ_MAX, 0x0001, 0x8001, 0x0001, 0 },
		/* bfloat16 */
		{ NZ_BFLOAT16, NZ_SUM, 0x3f80, 0x3b80, 0x3f80, 0 }, /* 1+2^-8 */
		{ NZ_BFLOAT16, NZ_SUM, 0x3f81, 0x3b80, 0x3f82, 0 },
		{ NZ_BFLOAT16, NZ_SUM, 0x3f80, 0x3b81, 0x3f81, 0 },
		{ NZ_BFLOAT16, NZ_SUM, 0x7f7f, 0x7f7f, 0x7f80, 0 },
		{ NZ_BFLOAT16, NZ_SUM, 0x7f7f, 0x7b00, 0x7f80, 0 }, /* tie */
		{ NZ_BFLOAT16, NZ_SUM, 0x7f7f, 0x7a80, 0x7f7f, 0 },
		{ NZ_BFLOAT16, NZ_PROD, 0x5f80, 0x5f80, 0x7f80, 0 }, /* 2^128 */
		{ NZ_BFLOAT16, NZ_SUM, 0x0001, 0x0001, 0x0002, 0 },
		{ NZ_BFLOAT16, NZ_SUM, 0x007f, 0x0001, 0x0080, 0 },
		{ NZ_BFLOAT16, NZ_PROD, 0x0001, 0x3f00, 0x0000, 0 },
		{ NZ_BFLOAT16, NZ_PROD, 0x0003, 0x3f00, 0x0002, 0 },
		{ NZ_BFLOAT16, NZ_PROD, 0x0080, 0x3f00, 0x0040, 0 },
		{ NZ_BFLOAT16, NZ_SUM, 0x7f80, 0xff80, 0, QUIET_NAN },
		{ NZ_BFLOAT16, NZ_SUM, 0x7f81, 0x0000, 0, QUIET_NAN }, /* sNaN */
		{ NZ_BFLOAT16, NZ_PROD, 0x0000, 0xff80, 0, QUIET_NAN },
		{ NZ_BFLOAT16, NZ_MAX, 0x7f81, 0x3f80, 0x7f81, 0 },
		{ NZ_BFLOAT16, NZ_MIN, 0x0000, 0x8000, 0x8000, 0 },
	};
	int ok;

	(void)p;
	if (impl == NZ_F16_IMPL_F16C && !nz_reduce_have_f16c())
		return skip("CPU has no F16C");
	if (with_f16_impl(impl))
		return 0;
	ok = run_cases(cs, ARRAY_SIZE(cs), impl_name(impl));
	with_f16_impl(-1);
	return ok;
}

/* Float NaN / infinity / signed zero semantics, binary32 and binary64. */
static int t_float_special(int p, int q)
{
	static const struct fcase cs[] = {
		{ NZ_FLOAT32, NZ_MIN, 0x7fc00001, 0x3f800000, 0x7fc00001, 0 },
		{ NZ_FLOAT32, NZ_MIN, 0x3f800000, 0xffc00002, 0xffc00002, 0 },
		{ NZ_FLOAT32, NZ_MAX, 0x7f800001, 0xff800000, 0x7f800001, 0 },
		{ NZ_FLOAT32, NZ_MAX, 0x7f800000, 0xffc00000, 0xffc00000, 0 },
		{ NZ_FLOAT32, NZ_MIN, 0x80000000, 0x00000000, 0x80000000, 0 },
		{ NZ_FLOAT32, NZ_MIN, 0x00000000, 0x80000000, 0x80000000, 0 },
		{ NZ_FLOAT32, NZ_MAX, 0x80000000, 0x00000000, 0x00000000, 0 },
		{ NZ_FLOAT32, NZ_MIN, 0xff800000, 0xff7fffff, 0xff800000, 0 },
		{ NZ_FLOAT32, NZ_MAX, 0x00000001, 0x80000001, 0x00000001, 0 },
		{ NZ_FLOAT32, NZ_MIN, 0xbf800000, 0xc0000000, 0xc0000000, 0 },
		{ NZ_FLOAT32, NZ_SUM, 0x7f800000, 0xff800000, 0, QUIET_NAN },
		{ NZ_FLOAT32, NZ_SUM, 0x7f800000, 0x3f800000, 0x7f800000, 0 },
		{ NZ_FLOAT32, NZ_SUM, 0x7f7fffff, 0x7f7fffff, 0x7f800000, 0 },
		{ NZ_FLOAT32, NZ_SUM, 0x80000000, 0x80000000, 0x80000000, 0 },
		{ NZ_FLOAT32, NZ_SUM, 0x3f800000, 0xbf800000, 0x00000000, 0 },
		{ NZ_FLOAT32, NZ_SUM, 0x00000001, 0x00000001, 0x00000002, 0 },
		{ NZ_FLOAT32, NZ_PROD, 0x00000000, 0x7f800000, 0, QUIET_NAN },
		{ NZ_FLOAT32, NZ_PROD, 0x7fc00000, 0x00000000, 0, QUIET_NAN },
		{ NZ_FLOAT32, NZ_AVG, 0x7f800001, 0x3f800000, 0, QUIET_NAN },
		{ NZ_FLOAT64, NZ_MIN, 0x7ff8000000000001ull, 0x3ff0000000000000ull,
		  0x7ff8000000000001ull, 0 },
		{ NZ_FLOAT64, NZ_MAX, 0x3ff0000000000000ull, 0xfff0000000000001ull,
		  0xfff0000000000001ull, 0 },
		{ NZ_FLOAT64, NZ_MIN, 0x8000000000000000ull, 0,
		  0x8000000000000000ull, 0 },
		{ NZ_FLOAT64, NZ_MAX, 0x8000000000000000ull, 0, 0, 0 },
		{ NZ_FLOAT64, NZ_SUM, 0x7ff0000000000000ull, 0xfff0000000000000ull,
		  0, QUIET_NAN },
		{ NZ_FLOAT64, NZ_PROD, 0x7ff0000000000000ull, 0xbff0000000000000ull,
		  0xfff0000000000000ull, 0 },
	};

	(void)p;
	(void)q;
	return run_cases(cs, ARRAY_SIZE(cs), "special");
}

/* Integer SUM/PROD wrap around (and MIN/MAX sign handling). */
static int t_int_wrap(int p, int q)
{
	static const struct fcase cs[] = {
		{ NZ_INT8, NZ_SUM, 100, 100, 0xc8, 0 },		/* -56 */
		{ NZ_INT8, NZ_SUM, 0x80, 0xff, 0x7f, 0 },	/* -128-1 */
		{ NZ_INT8, NZ_PROD, 16, 16, 0, 0 },
		{ NZ_INT8, NZ_PROD, 0x80, 0xff, 0x80, 0 },	/* -128*-1 */
		{ NZ_INT8, NZ_PROD, 0xf6, 13, 0x7e, 0 },	/* -130 */
		{ NZ_INT8, NZ_AVG, 127, 1, 0x80, 0 },
		{ NZ_INT8, NZ_MIN, 0x80, 0x7f, 0x80, 0 },
		{ NZ_INT8, NZ_MAX, 0xff, 0x00, 0x00, 0 },
		{ NZ_UINT8, NZ_SUM, 200, 100, 44, 0 },
		{ NZ_UINT8, NZ_PROD, 16, 16, 0, 0 },
		{ NZ_UINT8, NZ_PROD, 255, 255, 1, 0 },
		{ NZ_UINT8, NZ_MIN, 0x80, 0x7f, 0x7f, 0 },
		{ NZ_INT32, NZ_SUM, 0x7fffffff, 1, 0x80000000, 0 },
		{ NZ_INT32, NZ_SUM, 0x80000000, 0x80000000, 0, 0 },
		{ NZ_INT32, NZ_PROD, 65536, 65536, 0, 0 },
		{ NZ_INT32, NZ_PROD, 0x7fffffff, 2, 0xfffffffe, 0 },
		{ NZ_INT32, NZ_PROD, 0x80000000, 0xffffffff, 0x80000000, 0 },
		{ NZ_INT32, NZ_MIN, 0x80000000, 1, 0x80000000, 0 },
		{ NZ_UINT32, NZ_SUM, 0xffffffff, 2, 1, 0 },
		{ NZ_UINT32, NZ_PROD, 0xffffffff, 0xffffffff, 1, 0 },
		{ NZ_UINT32, NZ_MAX, 0x80000000, 1, 0x80000000, 0 },
		{ NZ_INT64, NZ_SUM, 0x7fffffffffffffffull, 1,
		  0x8000000000000000ull, 0 },
		{ NZ_INT64, NZ_PROD, 0x8000000000000000ull,
		  0xffffffffffffffffull, 0x8000000000000000ull, 0 },
		{ NZ_INT64, NZ_PROD, 0x100000000ull, 0x100000000ull, 0, 0 },
		{ NZ_INT64, NZ_PROD, 0x7fffffffffffffffull, 3,
		  0x7ffffffffffffffdull, 0 },
		{ NZ_INT64, NZ_MAX, 0x8000000000000000ull, 0, 0, 0 },
		{ NZ_UINT64, NZ_SUM, 0xffffffffffffffffull, 1, 0, 0 },
		{ NZ_UINT64, NZ_PROD, 0xffffffffffffffffull, 2,
		  0xfffffffffffffffeull, 0 },
		{ NZ_UINT64, NZ_MIN, 0x8000000000000000ull, 1, 1, 0 },
	};

	(void)p;
	(void)q;
	return run_cases(cs, ARRAY_SIZE(cs), "int");
}

/* ------------------------------------------------------------------ */
/* 16-bit conversions                                                  */

#ifdef HAVE_X86
__attribute__((target("avx,f16c")))
static uint16_t hw_f32_to_f16(float f)
{
	return (uint16_t)_mm_extract_epi16(
		_mm_cvtps_ph(_mm_set_ss(f), _MM_FROUND_TO_NEAREST_INT), 0);
}

__attribute__((target("avx,f16c")))
static float hw_f16_to_f32(uint16_t h)
{
	return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}
#endif

static uint32_t fbits(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

static float bitsf(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

/* Expected narrowing of binary32 bits @u to format @f (16-bit). */
static uint64_t want_narrow(const struct fmt *f, uint32_t u)
{
	if ((u & 0x7fffffffu) > 0x7f800000u)	/* quiet NaN, top payload */
		return ((u & 0x80000000u) ? fsign(f) : 0) |
		       (femask(f) << f->mb) | (1ull << (f->mb - 1)) |
		       ((u >> (23 - f->mb)) & fmmask(f));
	return enc(f, (double)bitsf(u));
}

/* Expected widening of 16-bit @h in format @f to binary32 bits. */
static uint32_t want_widen(const struct fmt *f, uint16_t h)
{
	if (f_isnan(f, h))	/* quiet NaN, payload shifted up */
		return (h & fsign(f) ? 0x80000000u : 0) | 0x7fc00000u |
		       (uint32_t)((h & fmmask(f)) << (23 - f->mb));
	return fbits((float)dec(f, h));
}

/* Boundary binary32 patterns: every exponent, rounding bit positions. */
static uint32_t boundary_f32(uint64_t i)
{
	uint32_t e = (uint32_t)(i % 256), k = (uint32_t)((i / 256) % 23);
	uint32_t v = (uint32_t)((i / (256 * 23)) % 6);
	uint32_t bit = 1u << k, m;

	switch (v) {
	case 0:
		m = bit;
		break;
	case 1:
		m = bit - 1;
		break;
	case 2:
		m = bit + 1;
		break;
	case 3:
		m = bit | (bit << 1);
		break;
	case 4:
		m = bit | (uint32_t)(rnd() & ~(2 * bit - 1));
		break;
	default:
		m = (uint32_t)(rnd() & (bit - 1)) | (bit << 1);
		break;
	}
	return ((rnd() & 1) ? 0x80000000u : 0) | (e << 23) | (m & 0x7fffffu);
}

static int t_conv16(int p, int q)
{
	const struct fmt *f = p ? &fmt_bf16 : &fmt_f16;
	const uint64_t nrand = 2000000, nbound = 256ull * 23 * 6 * 4;
	int ok = 1, hw = 0;

	(void)q;
#ifdef HAVE_X86
	hw = !p && nz_reduce_have_f16c();
#endif
	(void)hw;
	for (uint32_t h = 0; h < 65536; h++) {
		float got = p ? nz_bf16_to_f32((uint16_t)h) :
				nz_f16_to_f32((uint16_t)h);
		uint32_t want = want_widen(f, (uint16_t)h);

		if (fbits(got) != want) {
			diag("widen %04x = %08x, want %08x", h, fbits(got), want);
			ok = 0;
		}
#ifdef HAVE_X86
		if (hw && fbits(hw_f16_to_f32((uint16_t)h)) != fbits(got)) {
			diag("widen %04x = %08x, F16C %08x", h, fbits(got),
			     fbits(hw_f16_to_f32((uint16_t)h)));
			ok = 0;
		}
#endif
	}
	for (uint64_t i = 0; i < nrand + nbound; i++) {
		uint32_t u = i < nbound ? boundary_f32(i) : (uint32_t)rnd();
		uint16_t got = p ? nz_f32_to_bf16(bitsf(u)) :
				   nz_f32_to_f16(bitsf(u));
		uint64_t want = want_narrow(f, u);

		if (got != want) {
			diag("narrow %08x = %04x, want %04llx", u, got,
			     (unsigned long long)want);
			ok = 0;
		}
#ifdef HAVE_X86
		if (hw && hw_f32_to_f16(bitsf(u)) != got) {
			diag("narrow %08x = %04x, F16C %04x", u, got,
			     hw_f32_to_f16(bitsf(u)));
			ok = 0;
		}
#endif
	}
#ifdef HAVE_X86
	if (hw && exhaustive) {
		uint32_t u = 0;

		printf("#   exhaustive binary32 -> binary16 against F16C\n");
		do {
			if (hw_f32_to_f16(bitsf(u)) != nz_f32_to_f16(bitsf(u))) {
				diag("narrow %08x = %04x, F16C %04x", u,
				     nz_f32_to_f16(bitsf(u)),
				     hw_f32_to_f16(bitsf(u)));
				ok = 0;
			}
		} while (++u != 0);
	}
#endif
	return ok;
}

/*
 * float16 SUM/PROD: the F16C kernels against the portable kernels, bit for
 * bit (when both operands are NaN, which payload wins may differ).
 * Every float16 value is combined with a set of special and random values;
 * with NZ_TEST_EXHAUSTIVE, with every float16 value.
 */
static int t_f16c_vs_portable(int p, int q)
{
	enum nz_redop op = p ? NZ_PROD : NZ_SUM;
	const size_t n = 65536;
	uint16_t *a, *b, *r1, *r2;
	unsigned int nb = exhaustive ? 65536 : 320;
	int ok = 1;

	(void)q;
	if (!nz_reduce_have_f16c())
		return skip("CPU has no F16C");
	a = malloc(n * 2);
	b = malloc(n * 2);
	r1 = malloc(n * 2);
	r2 = malloc(n * 2);
	if (!a || !b || !r1 || !r2)
		exit(2);
	for (size_t i = 0; i < n; i++)
		a[i] = (uint16_t)i;
	for (unsigned int k = 0; k < nb; k++) {
		uint16_t v;

		if (exhaustive)
			v = (uint16_t)k;
		else if (k < 32)
			v = (uint16_t)special_float(&fmt_f16, k);
		else
			v = (uint16_t)rnd();
		for (size_t i = 0; i < n; i++)
			b[i] = v;
		/* also exercise a shuffled second operand */
		if (!exhaustive && k >= 256)
			for (size_t i = 0; i < n; i++)
				b[i] = (uint16_t)rnd();

		nz_reduce_set_f16_impl(NZ_F16_IMPL_PORTABLE);
		nz_reduce3(r1, a, b, n, NZ_FLOAT16, op);
		nz_reduce_set_f16_impl(NZ_F16_IMPL_F16C);
		nz_reduce3(r2, a, b, n, NZ_FLOAT16, op);
		for (size_t i = 0; i < n; i++) {
			if (r1[i] == r2[i])
				continue;
			if (f_isnan(&fmt_f16, a[i]) && f_isnan(&fmt_f16, b[i]) &&
			    f_isnan(&fmt_f16, r1[i]) &&
			    f_isnan(&fmt_f16, r2[i]))
				continue;
			diag("%04x %s %04x: portable %04x, F16C %04x", a[i],
			     nz_redop_name(op), b[i], r1[i], r2[i]);
			ok = 0;
		}
		/* 2-operand (in-place) form through F16C */
		memcpy(r2, a, n * 2);
		nz_reduce2(r2, b, n, NZ_FLOAT16, op);
		for (size_t i = 0; i < n; i++) {
			if (r1[i] != r2[i] && !(f_isnan(&fmt_f16, r1[i]) &&
						f_isnan(&fmt_f16, r2[i]))) {
				diag("in-place %04x %s %04x: %04x vs %04x",
				     a[i], nz_redop_name(op), b[i], r2[i],
				     r1[i]);
				ok = 0;
			}
		}
	}
	nz_reduce_set_f16_impl(NZ_F16_IMPL_AUTO);
	free(a);
	free(b);
	free(r1);
	free(r2);
	return ok;
}

/* ------------------------------------------------------------------ */
/* AVG                                                                 */

static int avg_ok(enum nz_dtype t, uint64_t x, unsigned int nr, uint64_t r)
{
	size_t esz = nz_dtype_size(t);
	const struct fmt *f = fmt_of(t);

	if (!f) {
		if (is_signed(t))
			return r == ((uint64_t)(sext(x, esz) / (int64_t)nr) &
				     mask_of(esz));
		return r == x / nr;
	}
	if (nr == 1)
		return r == x;
	if (f_isnan(f, x))
		return f_isnan(f, r);
	if (f == &fmt_f64)
		return r == d_bits(bits_d(x) / nr);
	return r == enc(f, dec(f, x) / nr);
}

static int t_avg(int p, int q)
{
	static const unsigned int nrs[] = { 1, 2, 3, 7, 8, 1000, 1024, 4095,
					    4096, 5000, 32767, 32768, 100000,
					    UINT_MAX };
	static const size_t ns[] = { 0, 1, 7, 100, 1000, 4097 };
	enum nz_dtype t = (enum nz_dtype)p;
	size_t esz = nz_dtype_size(t);
	int ok = 1;

	(void)q;
	for (size_t k = 0; k < ARRAY_SIZE(nrs); k++) {
		for (size_t j = 0; j < ARRAY_SIZE(ns); j++) {
			size_t n = ns[j];
			struct buf B;
			unsigned char *orig;

			buf_alloc(&B, n, esz, j & 3);
			fill_random(B.p, n, t);
			orig = malloc(n * esz + 1);
			if (!orig)
				exit(2);
			memcpy(orig, B.p, n * esz);
			if (nz_reduce_finish_avg(B.p, n, t, nrs[k])) {
				diag("nranks %u: error", nrs[k]);
				ok = 0;
			}
			for (size_t i = 0; i < n; i++) {
				uint64_t x = get_el(orig, i, esz);
				uint64_t r = get_el(B.p, i, esz);

				if (!avg_ok(t, x, nrs[k], r)) {
					diag("%llx / %u = %llx",
					     (unsigned long long)x, nrs[k],
					     (unsigned long long)r);
					ok = 0;
				}
			}
			ok &= buf_guards_ok(&B, "avg");
			free(orig);
			buf_free(&B);
		}
	}
	return ok;
}

/* Fixed AVG cases, through nz_reduce2(NZ_AVG) + nz_reduce_finish_avg(). */
static int t_avg_cases(int p, int q)
{
	static const struct {
		enum nz_dtype t;
		uint64_t a, b;
		unsigned int nr;
		uint64_t want;
	} cs[] = {
		{ NZ_INT8, 100, 100, 2, 0xe4 },		/* wraps to -56: -28 */
		{ NZ_INT8, 0xf9, 0, 2, 0xfd },		/* -7/2 = -3 */
		{ NZ_INT8, 0x80, 0, 3, 0xd6 },		/* -128/3 = -42 */
		{ NZ_INT8, 0x80, 0, 128, 0xff },	/* -1 */
		{ NZ_INT8, 0x7f, 0, 128, 0 },
		{ NZ_UINT8, 200, 100, 2, 22 },		/* 44/2 */
		{ NZ_UINT8, 255, 0, 2, 127 },
		{ NZ_INT32, 0x80000000, 0, 2, 0xc0000000 },
		{ NZ_INT32, 0xfffffffd, 0, 2, 0xffffffff },	/* -3/2 */
		{ NZ_INT32, 0x80000000, 0, UINT_MAX, 0 },
		{ NZ_UINT32, 0xffffffff, 0, UINT_MAX, 1 },
		{ NZ_UINT32, 0xfffffffe, 0, UINT_MAX, 0 },
		{ NZ_INT64, 0x8000000000000000ull, 0, 3,
		  0xd555555555555556ull },
		{ NZ_INT64, 0xfffffffffffffff9ull, 0, 2,
		  0xfffffffffffffffdull },
		{ NZ_UINT64, 0xffffffffffffffffull, 0, 2,
		  0x7fffffffffffffffull },
		/* 3 ranks of 1.0 average to exactly 1.0 */
		{ NZ_FLOAT16, 0x4000, 0x3c00, 3, 0x3c00 },
		{ NZ_BFLOAT16, 0x4000, 0x3f80, 3, 0x3f80 },
		{ NZ_FLOAT32, 0x40000000, 0x3f800000, 3, 0x3f800000 },
		{ NZ_FLOAT64, 0x4000000000000000ull, 0x3ff0000000000000ull, 3,
		  0x3ff0000000000000ull },
		{ NZ_FLOAT16, 0x7bff, 0x7bff, 2, 0x7c00 },	/* sum overflowed */
		{ NZ_FLOAT16, 0x0001, 0, 2, 0x0000 },		/* tie to even */
		{ NZ_FLOAT16, 0x0003, 0, 2, 0x0002 },
		{ NZ_FLOAT16, 0x0001, 0x0002, 3, 0x0001 },
		{ NZ_BFLOAT16, 0x0003, 0, 2, 0x0002 },
		{ NZ_FLOAT32, 0xff800000, 0, 3, 0xff800000 },
		{ NZ_FLOAT32, 0x00000003, 0, 2, 0x00000002 },
		{ NZ_FLOAT64, 0x0000000000000001ull, 0, 2, 0 },
		{ NZ_FLOAT16, 0x3c00, 0, 1, 0x3c00 },
		/* 41 x 1.0: exact, unlike 41 * fl(1/41) */
		{ NZ_FLOAT32, 0x42200000, 0x3f800000, 41, 0x3f800000 },
		{ NZ_FLOAT64, 0x4044000000000000ull, 0x3ff0000000000000ull,
		  41, 0x3ff0000000000000ull },
		/* binary32 division would double-round this one to 0x0556 */
		{ NZ_FLOAT16, 0x3956, 0, 8195, 0x0555 },
	};
	int ok = 1;

	(void)p;
	(void)q;
	for (size_t i = 0; i < ARRAY_SIZE(cs); i++) {
		size_t esz = nz_dtype_size(cs[i].t);
		unsigned char a[8], b[8];
		uint64_t got;

		set_el(a, 0, esz, cs[i].a);
		set_el(b, 0, esz, cs[i].b);
		if (nz_reduce2(a, b, 1, cs[i].t, NZ_AVG) ||
		    nz_reduce_finish_avg(a, 1, cs[i].t, cs[i].nr)) {
			diag("case %zu: error", i);
			ok = 0;
			continue;
		}
		got = get_el(a, 0, esz);
		if (got != cs[i].want) {
			diag("case %zu: %s avg(%llx, %llx) / %u = %llx, want %llx",
			     i, nz_dtype_name(cs[i].t),
			     (unsigned long long)cs[i].a,
			     (unsigned long long)cs[i].b, cs[i].nr,
			     (unsigned long long)got,
			     (unsigned long long)cs[i].want);
			ok = 0;
		}
	}
	/* NaN stays NaN, infinity stays infinite */
	{
		float v[3] = { NAN, INFINITY, -INFINITY };

		nz_reduce_finish_avg(v, 3, NZ_FLOAT32, 5);
		if (v[0] == v[0] || v[1] != INFINITY || v[2] != -INFINITY) {
			diag("float NaN/inf average");
			ok = 0;
		}
	}
	return ok;
}

/* ------------------------------------------------------------------ */
/* Argument checking                                                   */

static int t_invalid(int p, int q)
{
	float x[4] = { 1, 2, 3, 4 }, y[4] = { 1, 1, 1, 1 };
	float keep[4];
	int ok = 1;

	(void)p;
	(void)q;
	memcpy(keep, x, sizeof(x));

#define EXPECT(expr, want)						\
	do {								\
		long long _r = (long long)(expr);			\
		if (_r != (long long)(want)) {				\
			diag("%s = %lld, want %lld", #expr, _r,		\
			     (long long)(want));			\
			ok = 0;						\
		}							\
	} while (0)

	EXPECT(nz_reduce2(x, y, 4, NZ_DTYPE_COUNT, NZ_SUM), -EINVAL);
	EXPECT(nz_reduce2(x, y, 4, (enum nz_dtype)-1, NZ_SUM), -EINVAL);
	EXPECT(nz_reduce2(x, y, 4, (enum nz_dtype)1000, NZ_SUM), -EINVAL);
	EXPECT(nz_reduce2(x, y, 4, NZ_FLOAT32, NZ_REDOP_COUNT), -EINVAL);
	EXPECT(nz_reduce2(x, y, 4, NZ_FLOAT32, (enum nz_redop)-1), -EINVAL);
	EXPECT(nz_reduce2(x, y, 0, NZ_DTYPE_COUNT, NZ_SUM), -EINVAL);
	EXPECT(nz_reduce3(x, x, y, 4, NZ_DTYPE_COUNT, NZ_MAX), -EINVAL);
	EXPECT(nz_reduce3(x, x, y, 4, NZ_INT8, NZ_REDOP_COUNT), -EINVAL);
	EXPECT(nz_reduce_finish_avg(x, 4, NZ_DTYPE_COUNT, 2), -EINVAL);
	EXPECT(nz_reduce_finish_avg(x, 4, (enum nz_dtype)-5, 2), -EINVAL);
	EXPECT(nz_reduce_finish_avg(x, 4, NZ_FLOAT32, 0), -EINVAL);
	EXPECT(nz_reduce_finish_avg(x, 0, NZ_FLOAT32, 0), -EINVAL);
	/* NULL buffers: fine with count 0 only */
	EXPECT(nz_reduce2(NULL, NULL, 0, NZ_FLOAT32, NZ_SUM), 0);
	EXPECT(nz_reduce3(NULL, NULL, NULL, 0, NZ_INT64, NZ_PROD), 0);
	EXPECT(nz_reduce_finish_avg(NULL, 0, NZ_INT8, 3), 0);
	EXPECT(nz_reduce2(NULL, y, 4, NZ_FLOAT32, NZ_SUM), -EINVAL);
	EXPECT(nz_reduce2(x, NULL, 4, NZ_FLOAT32, NZ_SUM), -EINVAL);
	EXPECT(nz_reduce3(x, y, NULL, 4, NZ_FLOAT32, NZ_SUM), -EINVAL);
	EXPECT(nz_reduce3(NULL, x, y, 4, NZ_FLOAT32, NZ_SUM), -EINVAL);
	EXPECT(nz_reduce_finish_avg(NULL, 4, NZ_FLOAT32, 2), -EINVAL);
	/* count * size overflow (wraps to 4 bytes) */
	EXPECT(nz_reduce2(x, y, SIZE_MAX / 4 + 2, NZ_FLOAT32, NZ_SUM), -EINVAL);
	EXPECT(nz_reduce3(x, x, y, SIZE_MAX / 2 + 2, NZ_FLOAT64, NZ_MIN),
	       -EINVAL);
	/* partially overlapping output and input */
	EXPECT(nz_reduce2(x + 1, x, 3, NZ_FLOAT32, NZ_SUM), -EINVAL);
	EXPECT(nz_reduce2(x, x + 1, 3, NZ_FLOAT32, NZ_SUM), -EINVAL);
	EXPECT(nz_reduce3(x + 1, y, x, 3, NZ_FLOAT32, NZ_SUM), -EINVAL);
	EXPECT(nz_reduce3((char *)x + 1, y, x, 3, NZ_INT8, NZ_SUM), -EINVAL);
	EXPECT(nz_reduce2((char *)x, (char *)x + 2, 3, NZ_INT8, NZ_SUM),
	       -EINVAL);	/* last byte of out is first of in */
	EXPECT(nz_reduce2((char *)x + 2, (char *)x, 3, NZ_INT8, NZ_MAX),
	       -EINVAL);
	if (memcmp(x, keep, sizeof(x))) {
		diag("a failing call wrote its output");
		ok = 0;
	}
	/* overlapping inputs with a disjoint output are fine */
	{
		float o[3];

		EXPECT(nz_reduce3(o, x, x + 1, 3, NZ_FLOAT32, NZ_SUM), 0);
		if (o[0] != 3 || o[1] != 5 || o[2] != 7) {
			diag("overlapping inputs: %g %g %g", o[0], o[1], o[2]);
			ok = 0;
		}
	}
	/* adjacent (touching) buffers are not overlapping */
	EXPECT(nz_reduce2(x, x + 2, 2, NZ_FLOAT32, NZ_SUM), 0);
	if (x[0] != 4 || x[1] != 6) {
		diag("adjacent buffers: %g %g", x[0], x[1]);
		ok = 0;
	}
	EXPECT(nz_reduce_set_f16_impl((enum nz_f16_impl)7), -EINVAL);
	EXPECT(nz_reduce_set_f16_impl(NZ_F16_IMPL_F16C),
	       nz_reduce_have_f16c() ? 0 : -ENOTSUP);
	EXPECT(nz_reduce_set_f16_impl(NZ_F16_IMPL_AUTO), 0);
#undef EXPECT
	return ok;
}

/* ------------------------------------------------------------------ */
/* Names                                                               */

static int t_names(int p, int q)
{
	static const struct {
		const char *s;
		int v;
	} dt[] = {
		{ "int8", NZ_INT8 }, { "i8", NZ_INT8 }, { "char", NZ_INT8 },
		{ "INT8_T", NZ_INT8 }, { "uint8", NZ_UINT8 },
		{ "u8", NZ_UINT8 }, { "int32", NZ_INT32 }, { "int", NZ_INT32 },
		{ "I32", NZ_INT32 }, { "uint32", NZ_UINT32 },
		{ "uint", NZ_UINT32 }, { "u32", NZ_UINT32 },
		{ "int64", NZ_INT64 }, { "i64", NZ_INT64 },
		{ "uint64", NZ_UINT64 }, { "u64", NZ_UINT64 },
		{ "half", NZ_FLOAT16 }, { "f16", NZ_FLOAT16 },
		{ "fp16", NZ_FLOAT16 }, { "Float16", NZ_FLOAT16 },
		{ "bfloat16", NZ_BFLOAT16 }, { "bf16", NZ_BFLOAT16 },
		{ "BF16", NZ_BFLOAT16 }, { "float", NZ_FLOAT32 },
		{ "f32", NZ_FLOAT32 }, { "fp32", NZ_FLOAT32 },
		{ "float32", NZ_FLOAT32 }, { "double", NZ_FLOAT64 },
		{ "f64", NZ_FLOAT64 }, { "fp64", NZ_FLOAT64 },
		{ "float64", NZ_FLOAT64 },
	};
	static const char *const bad[] = {
		"", "float8", "f8", "int16", "floa", "floatx", " float",
		"float ", "bfloat", "i", "sum", "uint8_", "\xc3\xa9",
	};
	static const char *const nccl_dt[NZ_DTYPE_COUNT] = {
		"int8", "uint8", "int32", "uint32", "int64", "uint64",
		"half", "bfloat16", "float", "double",
	};
	static const char *const nccl_op[NZ_REDOP_COUNT] = {
		"sum", "prod", "min", "max", "avg",
	};
	static const size_t sizes[NZ_DTYPE_COUNT] = { 1, 1, 4, 4, 8, 8,
						      2, 2, 4, 8 };
	enum nz_dtype t;
	enum nz_redop op;
	int ok = 1;

	(void)p;
	(void)q;
	for (int i = 0; i < NZ_DTYPE_COUNT; i++) {
		const char *n = nz_dtype_name((enum nz_dtype)i);

		if (!n || strcmp(n, nccl_dt[i]) ||
		    nz_dtype_parse(n, &t) || t != (enum nz_dtype)i ||
		    nz_dtype_size((enum nz_dtype)i) != sizes[i]) {
			diag("dtype %d: name %s size %zu", i, n ? n : "(null)",
			     nz_dtype_size((enum nz_dtype)i));
			ok = 0;
		}
	}
	for (int i = 0; i < NZ_REDOP_COUNT; i++) {
		const char *n = nz_redop_name((enum nz_redop)i);

		if (!n || strcmp(n, nccl_op[i]) || nz_redop_parse(n, &op) ||
		    op != (enum nz_redop)i) {
			diag("redop %d: name %s", i, n ? n : "(null)");
			ok = 0;
		}
	}
	for (size_t i = 0; i < ARRAY_SIZE(dt); i++) {
		if (nz_dtype_parse(dt[i].s, &t) || t != (enum nz_dtype)dt[i].v) {
			diag("parse \"%s\"", dt[i].s);
			ok = 0;
		}
	}
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		t = (enum nz_dtype)99;
		if (nz_dtype_parse(bad[i], &t) != -EINVAL ||
		    t != (enum nz_dtype)99) {
			diag("parse \"%s\" accepted", bad[i]);
			ok = 0;
		}
	}
	if (nz_redop_parse("SUM", &op) || op != NZ_SUM ||
	    nz_redop_parse("Product", &op) || op != NZ_PROD ||
	    nz_redop_parse("mean", &op) || op != NZ_AVG ||
	    nz_redop_parse("Max", &op) || op != NZ_MAX) {
		diag("redop aliases");
		ok = 0;
	}
	op = (enum nz_redop)99;
	if (nz_redop_parse("add", &op) != -EINVAL ||
	    nz_redop_parse("", &op) != -EINVAL ||
	    nz_redop_parse("float", &op) != -EINVAL ||
	    nz_redop_parse("mi", &op) != -EINVAL ||
	    nz_redop_parse("minx", &op) != -EINVAL ||
	    op != (enum nz_redop)99) {
		diag("bad redop accepted");
		ok = 0;
	}
	if (nz_dtype_parse(NULL, &t) != -EINVAL ||
	    nz_dtype_parse("float", NULL) != -EINVAL ||
	    nz_redop_parse(NULL, &op) != -EINVAL ||
	    nz_redop_parse("sum", NULL) != -EINVAL) {
		diag("NULL arguments");
		ok = 0;
	}
	if (nz_dtype_name(NZ_DTYPE_COUNT) || nz_dtype_name((enum nz_dtype)-1) ||
	    nz_redop_name(NZ_REDOP_COUNT) ||
	    nz_redop_name((enum nz_redop)-1) ||
	    nz_dtype_size(NZ_DTYPE_COUNT) ||
	    nz_dtype_size((enum nz_dtype)-1)) {
		diag("invalid values have names or sizes");
		ok = 0;
	}
	return ok;
}

/* ------------------------------------------------------------------ */

int main(void)
{
	const char *s = getenv("NZ_TEST_SEED");
	int failed = 0;

	if (s && *s)
		seed = strtoull(s, NULL, 0);
	s = getenv("NZ_TEST_EXHAUSTIVE");
	exhaustive = s && *s && strcmp(s, "0");

	for (int t = 0; t < NZ_DTYPE_COUNT; t++)
		for (int op = 0; op < NZ_REDOP_COUNT; op++)
			add_test(t_reduce, t * NZ_REDOP_COUNT + op, -1,
				 "reduce %s %s vs reference",
				 nz_dtype_name((enum nz_dtype)t),
				 nz_redop_name((enum nz_redop)op));
	for (int impl = NZ_F16_IMPL_PORTABLE; impl <= NZ_F16_IMPL_F16C; impl++)
		for (int op = 0; op < NZ_REDOP_COUNT; op++)
			add_test(t_reduce, NZ_FLOAT16 * NZ_REDOP_COUNT + op,
				 impl, "reduce half %s vs reference (%s)",
				 nz_redop_name((enum nz_redop)op),
				 impl_name(impl));
	add_test(t_exact_buffers, 0, 0, "exactly sized buffers, all types");
	add_test(t_round16, 0, -1, "half/bfloat16 rounding cases (auto)");
	add_test(t_round16, 0, NZ_F16_IMPL_PORTABLE,
		 "half/bfloat16 rounding cases (portable)");
	add_test(t_round16, 0, NZ_F16_IMPL_F16C,
		 "half/bfloat16 rounding cases (f16c)");
	add_test(t_float_special, 0, 0, "float/double NaN, inf, signed zero");
	add_test(t_int_wrap, 0, 0, "integer wrap-around and signedness");
	add_test(t_conv16, 0, 0, "half <-> float conversions");
	add_test(t_conv16, 1, 0, "bfloat16 <-> float conversions");
	add_test(t_f16c_vs_portable, 0, 0, "half sum: F16C == portable");
	add_test(t_f16c_vs_portable, 1, 0, "half prod: F16C == portable");
	for (int t = 0; t < NZ_DTYPE_COUNT; t++)
		add_test(t_avg, t, 0, "finish_avg %s vs reference",
			 nz_dtype_name((enum nz_dtype)t));
	add_test(t_avg_cases, 0, 0, "avg fixed cases");
	add_test(t_invalid, 0, 0, "invalid arguments");
	add_test(t_names, 0, 0, "names, parsing, sizes");

	printf("# seed=0x%llx f16c=%d%s\n", (unsigned long long)seed,
	       nz_reduce_have_f16c(), exhaustive ? " exhaustive" : "");
	printf("1..%d\n", ntests);
	for (int i = 0; i < ntests; i++) {
		int r;

		rng = seed ^ ((uint64_t)(i + 1) * 0x9e3779b97f4a7c15ull);
		diag_budget = 12;
		skip_reason[0] = 0;
		r = tests[i].fn(tests[i].p, tests[i].q);
		if (r < 0)
			printf("ok %d - %s # SKIP %s\n", i + 1, tests[i].name,
			       skip_reason);
		else if (r)
			printf("ok %d - %s\n", i + 1, tests[i].name);
		else
			printf("not ok %d - %s\n", i + 1, tests[i].name);
		if (r == 0)
			failed++;
		fflush(stdout);
	}
	if (failed)
		printf("# %d of %d tests failed\n", failed, ntests);
	return failed ? 1 : 0;
}
