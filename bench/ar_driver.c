/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The allreduce benchmark loop shared by bench/allreduce_ddp.c and
 * bench/allreduce_mpi.c; see ar_driver.h for the method.
 */
#include "ar_driver.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct ar_args {
	size_t sizes[64];
	int nsizes;
	long min_iters;	  /* stop after this many ... */
	double min_time;  /* ... once this much time was timed */
	long floor_iters; /* never fewer than this many */
	double cap_time;  /* stop once this much time was timed */
	long max_iters;	  /* hard cap */
	long warmup;	  /* warm-up iterations below big_bytes */
	long big_warmup;  /* warm-up iterations from big_bytes */
	FILE *iters;	  /* -i FILE: every iteration's time, in order */
	size_t big_bytes;
};

static void
ar_usage(const char *prog)
{
	fprintf(stderr,
		"usage: %s [-s BYTES,...] [-n MIN_ITERS] [-t MIN_SECONDS] "
		"[-f FLOOR_ITERS] [-c CAP_SECONDS] [-m MAX_ITERS] "
		"[-w WARMUP] [-W BIG_WARMUP] [-i ITER_CSV]\n"
		"  Sizes are multiples of 4 bytes (fp32). Per size: warm-up, "
		"then iterate until\n"
		"  (MIN_ITERS and MIN_SECONDS) or (FLOOR_ITERS and "
		"CAP_SECONDS) or MAX_ITERS.\n"
		"  -i: rank 0 appends bytes,iteration,us for every timed "
		"iteration to ITER_CSV.\n",
		prog);
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int
parse_num(const char *s, double lo, double hi, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

static int
parse_sizes(const char *s, struct ar_args *a)
{
	const char *p = s;
	char *end;
	unsigned long long v;

	a->nsizes = 0;
	while (*p) {
		if (a->nsizes == (int)(sizeof(a->sizes) / sizeof(a->sizes[0])))
			return -1;
		errno = 0;
		v = strtoull(p, &end, 10);
		if (errno || end == p || v < 4 || v % 4 || v > (1ULL << 34))
			return -1;
		a->sizes[a->nsizes++] = (size_t)v;
		if (*end == ',')
			end++;
		else if (*end)
			return -1;
		p = end;
	}
	return a->nsizes > 0 ? 0 : -1;
}

static int
parse_args(int argc, char **argv, struct ar_args *a)
{
	double v;
	int c;

	*a = (struct ar_args){.min_iters = 20,
			      .min_time = 0.25,
			      .floor_iters = 5,
			      .cap_time = 1.0,
			      .max_iters = 1000,
			      .warmup = 5,
			      .big_warmup = 2,
			      .big_bytes = 32u << 20};
	if (parse_sizes("8,1024,1048576", a))
		return -1;
	while ((c = getopt(argc, argv, "s:n:t:f:c:m:w:W:i:")) != -1) {
		switch (c) {
		case 'i':
			if (a->iters)
				fclose(a->iters);
			a->iters = fopen(optarg, "a");
			if (!a->iters) {
				perror(optarg);
				return -1;
			}
			break;
		case 's':
			if (parse_sizes(optarg, a))
				return -1;
			break;
		case 't':
		case 'c':
			if (parse_num(optarg, 0, 3600, &v))
				return -1;
			*(c == 't' ? &a->min_time : &a->cap_time) = v;
			break;
		case 'n':
		case 'f':
		case 'm':
		case 'w':
		case 'W':
			if (parse_num(optarg, 0, 1e7, &v) || v != (long)v)
				return -1;
			*(c == 'n'   ? &a->min_iters
			  : c == 'f' ? &a->floor_iters
			  : c == 'm' ? &a->max_iters
			  : c == 'w' ? &a->warmup
				     : &a->big_warmup) = (long)v;
			break;
		default:
			return -1;
		}
	}
	if (optind != argc || a->max_iters < 1)
		return -1;
	return 0;
}

static int
cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return (a > b) - (a < b);
}

/*
 * The input of a rank and the exact result, made once per size: refilling
 * and checking are then a memcpy and a memcmp, so the harness leaves the
 * CPU to the allreduce (with several ranks per core, a rank checking its
 * result would otherwise slow a neighbour still inside its timed call).
 */
struct ar_bufs {
	float *buf;  /* the allreduce's buffer */
	float *init; /* this rank's input */
	float *want; /* every element n*((i%13)+1) + n(n-1)/2: exact in fp32 */
};

static void
make_pattern(const struct ar_bufs *b, size_t count, int rank, int n)
{
	size_t i;

	for (i = 0; i < count; i++) {
		int v = (int)(i % 13) + 1;

		b->init[i] = (float)(v + rank);
		b->want[i] = (float)(n * v + n * (n - 1) / 2);
	}
}

/* Wrong elements of the result: 0 when it matches the pattern. */
static size_t
check(const struct ar_bufs *b, size_t count)
{
	size_t i, bad = 0;

	if (!memcmp(b->buf, b->want, count * sizeof(float)))
		return 0;
	for (i = 0; i < count; i++)
		bad += b->buf[i] != b->want[i];
	return bad;
}

static int
run_size(const struct ar_ops *ops, const struct ar_args *a, size_t bytes,
	 const struct ar_bufs *b, double *times)
{
	size_t count = bytes / 4, bad = 0;
	long warm = bytes >= a->big_bytes ? a->big_warmup : a->warmup;
	long i, it = 0;
	double total = 0, t0, t, med, p95, algbw, busbw;

	make_pattern(b, count, ops->rank, ops->size);
	for (i = 0; i < warm; i++) {
		memcpy(b->buf, b->init, bytes);
		if (ops->sum_f32(ops->ctx, b->buf, count))
			return -1;
		bad += check(b, count);
	}
	for (;;) {
		if (it >= a->max_iters ||
		    (it >= a->min_iters && total >= a->min_time) ||
		    (it >= a->floor_iters && total >= a->cap_time))
			break;
		memcpy(b->buf, b->init, bytes);
		if (ops->barrier(ops->ctx))
			return -1;
		t0 = now_s();
		if (ops->sum_f32(ops->ctx, b->buf, count))
			return -1;
		t = now_s() - t0;
		bad += check(b, count);
		/* The same maximum on every rank keeps the stop rule
		 * collective. */
		if (ops->max_f64(ops->ctx, &t))
			return -1;
		if (a->iters && ops->rank == 0)
			fprintf(a->iters, "%zu,%ld,%.3f\n", bytes, it, t * 1e6);
		times[it++] = t;
		total += t;
	}
	/* Every rank's verdict: the count of wrong elements, as a maximum. */
	t = (double)bad;
	if (ops->max_f64(ops->ctx, &t))
		return -1;
	qsort(times, (size_t)it, sizeof(*times), cmp_double);
	med = it % 2 ? times[it / 2] : (times[it / 2 - 1] + times[it / 2]) / 2;
	p95 = times[(size_t)((double)it * 0.95 + 0.999999) - 1];
	algbw = (double)bytes / med / 1e9;
	busbw = algbw * 2.0 * (ops->size - 1) / ops->size;
	if (ops->rank == 0) {
		printf("%zu,%ld,%.3f,%.3f,%.3f,%.3f,%.6f,%.6f,%s\n", bytes, it,
		       med * 1e6, p95 * 1e6, times[0] * 1e6,
		       times[it - 1] * 1e6, algbw, busbw,
		       t == 0 ? "yes" : "NO");
		fflush(stdout);
	}
	if (t != 0 && ops->rank == 0)
		fprintf(stderr, "allreduce of %zu bytes: %.0f wrong elements\n",
			bytes, t);
	return t == 0 ? 0 : 1;
}

int
ar_main(const struct ar_ops *ops, const char *prog, int argc, char **argv)
{
	struct ar_args a;
	size_t maxb = 0;
	double *times;
	struct ar_bufs b;
	int k, rc = 0, r;

	if (parse_args(argc, argv, &a)) {
		if (ops->rank == 0)
			ar_usage(prog);
		return 2;
	}
	for (k = 0; k < a.nsizes; k++)
		if (a.sizes[k] > maxb)
			maxb = a.sizes[k];
	b.buf = malloc(maxb);
	b.init = malloc(maxb);
	b.want = malloc(maxb);
	times = malloc(sizeof(*times) * (size_t)a.max_iters);
	if (!b.buf || !b.init || !b.want || !times) {
		fprintf(stderr, "%s: out of memory for 3 x %zu bytes\n", prog,
			maxb);
		rc = 1;
		goto out;
	}
	if (ops->rank == 0)
		printf("bytes,iters,median_us,p95_us,min_us,max_us,"
		       "algbw_GBps,busbw_GBps,ok\n");
	for (k = 0; k < a.nsizes; k++) {
		r = run_size(ops, &a, a.sizes[k], &b, times);
		if (r < 0) {
			rc = 1;
			break;
		}
		rc |= r;
	}
out:
	free(b.buf);
	free(b.init);
	free(b.want);
	free(times);
	if (a.iters)
		fclose(a.iters);
	return rc;
}
