/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Allreduce benchmark of libddp's TCP backend (fp32 sum, in place), run as
 * one rank per task with RANK/WORLD_SIZE/MASTER_* from srun --ddp or
 * bench/lib/rankenv. Method and output: bench/ar_driver.h.
 */
#include "ar_driver.h"

#include <ddp.h>
#include <stdio.h>

static int
fail(const char *what, enum ddp_status st)
{
	fprintf(stderr, "allreduce_ddp: %s: %s: %s\n", what, ddp_strerror(st),
		ddp_last_error());
	return -1;
}

static int
ddp_barrier_op(void *ctx)
{
	enum ddp_status st = ddp_barrier(ctx);

	return st ? fail("barrier", st) : 0;
}

static int
ddp_sum_op(void *ctx, float *buf, size_t count)
{
	enum ddp_status st =
		ddp_allreduce(ctx, buf, buf, count, DDP_FLOAT32, DDP_SUM);

	return st ? fail("allreduce", st) : 0;
}

static int
ddp_max_op(void *ctx, double *v)
{
	enum ddp_status st = ddp_allreduce(ctx, v, v, 1, DDP_FLOAT64, DDP_MAX);

	return st ? fail("allreduce (max)", st) : 0;
}

int
main(int argc, char **argv)
{
	struct ddp_comm *comm = NULL;
	struct ar_ops ops;
	enum ddp_status st;
	int rc;

	st = ddp_comm_init_env(&comm);
	if (st) {
		fail("init", st);
		return 1;
	}
	ops = (struct ar_ops){.rank = ddp_comm_rank(comm),
			      .size = ddp_comm_size(comm),
			      .ctx = comm,
			      .barrier = ddp_barrier_op,
			      .sum_f32 = ddp_sum_op,
			      .max_f64 = ddp_max_op};
	rc = ar_main(&ops, "allreduce_ddp", argc, argv);
	ddp_comm_destroy(comm);
	return rc;
}
