/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The line bench/scale reads from every rank of launch_ddp and
 * launch_mpi: when the first allreduce completed, the descriptors the
 * process holds, its CPU time and its peak resident memory. Header-only,
 * since launch_mpi is built with mpicc alone.
 */
#ifndef BENCH_LAUNCH_STATS_H
#define BENCH_LAUNCH_STATS_H

#include <dirent.h>
#include <stdio.h>
#include <sys/resource.h>
#include <time.h>

static inline int
launch_open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = -1; /* the directory's own descriptor */

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* "stats rank R done T fds N cpu S rss_kb K" on stdout. */
static inline void
launch_print_stats(int rank, const struct timespec *done)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return;
	printf("stats rank %d done %lld.%09ld fds %d cpu %.3f rss_kb %ld\n",
	       rank, (long long)done->tv_sec, done->tv_nsec, launch_open_fds(),
	       (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
		       (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6,
	       ru.ru_maxrss);
}

#endif
