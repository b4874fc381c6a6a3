/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Launch probe for libddp: joins the job, completes one allreduce and
 * prints the wall-clock time (CLOCK_REALTIME, seconds) on rank 0, so
 * bench/run can measure srun-to-first-allreduce. With LAUNCH_STATS=1
 * every rank also prints, after that allreduce, the time, its open
 * descriptors, its CPU time and its peak resident memory (bench/scale).
 */
#include <ddp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "launch_stats.h"

int
main(void)
{
	struct ddp_comm *comm = NULL;
	struct timespec ts;
	float v = 1.0f;
	enum ddp_status st;
	const char *stats;
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
	stats = getenv("LAUNCH_STATS");
	if (stats && strcmp(stats, "1") == 0)
		launch_print_stats(ddp_comm_rank(comm), &ts);
	if (ddp_comm_rank(comm) == 0)
		printf("first_allreduce %lld.%09ld world %d sum %g\n",
		       (long long)ts.tv_sec, ts.tv_nsec, world, (double)v);
	ddp_comm_destroy(comm);
	return v == (float)world ? 0 : 1;
}
