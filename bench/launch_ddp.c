/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Launch probe for libddp: joins the job, completes one allreduce and
 * prints the wall-clock time (CLOCK_REALTIME, seconds) on rank 0, so
 * bench/run can measure srun-to-first-allreduce. With LAUNCH_STATS=1
 * every rank also prints, after that allreduce, the time, its open
 * descriptors, its CPU time and its peak resident memory (bench/scale).
 */
#include <ddp.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static int
open_fds(void)
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

static void
print_stats(int rank, const struct timespec *ts)
{
	struct rusage ru;
	const char *v = getenv("LAUNCH_STATS");

	if (!v || strcmp(v, "1") != 0 || getrusage(RUSAGE_SELF, &ru) != 0)
		return;
	printf("stats rank %d done %lld.%09ld fds %d cpu %.3f rss_kb %ld\n",
	       rank, (long long)ts->tv_sec, ts->tv_nsec, open_fds(),
	       (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
		       (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6,
	       ru.ru_maxrss);
}

int
main(void)
{
	struct ddp_comm *comm = NULL;
	struct timespec ts;
	float v = 1.0f;
	enum ddp_status st;
	int world;

	st = ddp_comm_init_env(&comm);
	if (!st)
		st = ddp_allreduce(comm, &v, &v, 1, DDP_FLOAT32, DDP_SUM);
	if (st) {
		fprintf(stderr, "launch_ddp: %s: %s\n", ddp_strerror(st),
			ddp_last_error());
		ddp_comm_destroy(comm);
		return 1;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	world = ddp_comm_size(comm);
	print_stats(ddp_comm_rank(comm), &ts);
	if (ddp_comm_rank(comm) == 0)
		printf("first_allreduce %lld.%09ld world %d sum %g\n",
		       (long long)ts.tv_sec, ts.tv_nsec, world, (double)v);
	ddp_comm_destroy(comm);
	return v == (float)world ? 0 : 1;
}
