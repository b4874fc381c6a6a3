/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Minimal TAP producer for the unit tests: one "ok N - name" line per
 * check, a plan at the end, exit status non-zero when any check failed.
 * Not thread-safe; call from the main thread only.
 */
#ifndef DDP_TAP_H
#define DDP_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_count;
static int tap_failed;

__attribute__((format(printf, 2, 3), unused)) static int
tap_ok(int cond, const char *fmt, ...)
{
	va_list ap;

	tap_count++;
	if (!cond)
		tap_failed++;
	printf("%sok %d - ", cond ? "" : "not ", tap_count);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	return cond;
}

/* Prints a diagnostic line that TAP consumers show but do not count. */
__attribute__((format(printf, 1, 2), unused)) static void
tap_diag(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

__attribute__((unused)) static int
tap_done(void)
{
	printf("1..%d\n", tap_count);
	return tap_failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/*
 * The upper bound of a time a check measures. The unit tier runs inside
 * the package builds (debian/rules, slurm-ddp.spec) on hosts whose load
 * no test controls: there a bound is `loose`, far enough from the design
 * to pass on any busy host and still catch a wait that fell back to
 * another, longer timeout. The timing tier (tests/run timing sets
 * DDP_TEST_TIMING=strict; no package build runs it) holds the `tight`
 * bound the design promises.
 */
__attribute__((unused)) static double
tap_bound(double tight, double loose)
{
	const char *v = getenv("DDP_TEST_TIMING");

	return v && strcmp(v, "strict") == 0 ? tight : loose;
}

/* 1 when every one of the n bytes at p is zero (a wiped key). */
__attribute__((unused)) static int
tap_all_zero(const void *p, size_t n)
{
	const unsigned char *b = p;
	size_t i;

	for (i = 0; i < n; i++)
		if (b[i])
			return 0;
	return 1;
}

#define TAP_STREQ(got, want, name)                                          \
	do {                                                                \
		const char *g_ = (got), *w_ = (want);                       \
		int eq_ = (g_ && w_) ? strcmp(g_, w_) == 0 : g_ == w_;      \
		if (!tap_ok(eq_, "%s", (name)))                             \
			tap_diag("got '%s', want '%s'", g_ ? g_ : "(null)", \
				 w_ ? w_ : "(null)");                       \
	} while (0)

#endif
