/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The allreduce benchmark loop shared by the libddp and the Open MPI
 * programs, so both are timed, verified and reported in exactly one way.
 *
 * Method (bench/README.md): per size, warm-up iterations, then iterations
 * each preceded by a barrier; every rank times its own call, and the
 * iteration's time is the maximum over ranks (a MAX allreduce of the
 * per-rank times, outside the timed region). The buffer is refilled before
 * every iteration and the in-place result is checked element by element
 * after every iteration. Rank 0 prints one CSV row per size:
 *   bytes,iters,median_us,p95_us,min_us,max_us,algbw_GBps,busbw_GBps,ok
 * with algbw = bytes / median and busbw = algbw * 2(n-1)/n (nccl-tests).
 */
#ifndef BENCH_AR_DRIVER_H
#define BENCH_AR_DRIVER_H

#include <stddef.h>

struct ar_ops {
	int rank;
	int size;
	void *ctx;
	/* Each returns 0 on success; on failure a message on stderr. */
	int (*barrier)(void *ctx);
	int (*sum_f32)(void *ctx, float *buf, size_t count); /* in place */
	int (*max_f64)(void *ctx, double *v);		     /* one value */
};

/*
 * Runs the benchmark as described by argv (see ar_usage) and returns the
 * process exit status: 0 when every size ran and verified, 1 when a
 * result was wrong or a call failed, 2 on a usage error.
 */
int ar_main(const struct ar_ops *ops, const char *prog, int argc, char **argv);

#endif
