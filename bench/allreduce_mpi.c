/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Allreduce benchmark of Open MPI's MPI_Allreduce (fp32 sum, in place with
 * MPI_IN_PLACE), the peer libddp is compared with. Built with mpicc by
 * bench/run only, never by `make`. Method and output: bench/ar_driver.h.
 */
#include "ar_driver.h"

#include <mpi.h>
#include <stdio.h>

static int
mpi_fail(const char *what, int err)
{
	char msg[MPI_MAX_ERROR_STRING];
	int len = 0;

	MPI_Error_string(err, msg, &len);
	fprintf(stderr, "allreduce_mpi: %s: %.*s\n", what, len, msg);
	return -1;
}

static int
mpi_barrier_op(void *ctx)
{
	int err = MPI_Barrier(MPI_COMM_WORLD);

	return err == MPI_SUCCESS ? 0 : mpi_fail("MPI_Barrier", err);
}

static int
mpi_sum_op(void *ctx, float *buf, size_t count)
{
	int err = MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT,
				MPI_SUM, MPI_COMM_WORLD);

	return err == MPI_SUCCESS ? 0 : mpi_fail("MPI_Allreduce", err);
}

static int
mpi_max_op(void *ctx, double *v)
{
	int err = MPI_Allreduce(MPI_IN_PLACE, v, 1, MPI_DOUBLE, MPI_MAX,
				MPI_COMM_WORLD);

	return err == MPI_SUCCESS ? 0 : mpi_fail("MPI_Allreduce (max)", err);
}

int
main(int argc, char **argv)
{
	struct ar_ops ops = {.barrier = mpi_barrier_op,
			     .sum_f32 = mpi_sum_op,
			     .max_f64 = mpi_max_op};
	int rc;

	MPI_Init(&argc, &argv);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Comm_rank(MPI_COMM_WORLD, &ops.rank);
	MPI_Comm_size(MPI_COMM_WORLD, &ops.size);
	rc = ar_main(&ops, "allreduce_mpi", argc, argv);
	MPI_Finalize();
	return rc;
}
