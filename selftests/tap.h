/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Minimal TAP output for Nezha's C tests: each test program prints a plan
 * and one line per check; the runner (selftests/run.sh) counts the lines,
 * and a program that ran another number of checks than it planned exits 1.
 * A check that cannot run is a SKIP with its reason, never an "ok".
 */
#ifndef NZ_TAP_H
#define NZ_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int tap_n, tap_failed, tap_planned = -1;

static inline void tap_plan(int n)
{
	tap_planned = n;
	printf("1..%d\n", n);
	fflush(stdout);
}

__attribute__((format(printf, 2, 3)))
static inline int tap_ok(int cond, const char *fmt, ...)
{
	va_list ap;

	printf("%sok %d - ", cond ? "" : "not ", ++tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (!cond)
		tap_failed++;
	return cond;
}

__attribute__((format(printf, 2, 3)))
static inline void tap_skip(const char *name, const char *fmt, ...)
{
	va_list ap;

	printf("ok %d - %s # SKIP ", ++tap_n, name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

__attribute__((format(printf, 1, 2)))
static inline void tap_diag(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

/*
 * A plan that the checks did not meet is a failure: a check that never
 * ran (an early return, a miscounted plan) says nothing, and the runner
 * counts only the lines it sees.
 */
static inline int tap_exit(void)
{
	if (tap_planned >= 0 && tap_n != tap_planned) {
		printf("# planned %d checks, ran %d\n", tap_planned, tap_n);
		return 1;
	}
	return tap_failed ? 1 : 0;
}

#endif /* NZ_TAP_H */
