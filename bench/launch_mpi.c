/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Launch probe for Open MPI, the anchor of bench/scale: MPI_Init and one
 * 4-byte MPI_Allreduce, then on every rank the same line launch_ddp
 * prints with LAUNCH_STATS=1 (time done, open descriptors, CPU time,
 * peak resident memory). Built with mpicc by bench/scale, never by make.
 */
#include <mpi.h>
#include <stdio.h>
#include <time.h>

#include "launch_stats.h"

int
main(int argc, char **argv)
{
	struct timespec ts;
	float v = 1.0f;
	int rank = 0, world = 0;

	if (MPI_Init(&argc, &argv) != MPI_SUCCESS ||
	    MPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS ||
	    MPI_Comm_size(MPI_COMM_WORLD, &world) != MPI_SUCCESS ||
	    MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_FLOAT, MPI_SUM,
			  MPI_COMM_WORLD) != MPI_SUCCESS) {
		fprintf(stderr, "launch_mpi: MPI failed\n");
		return 1;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	launch_print_stats(rank, &ts);
	MPI_Finalize();
	return v == (float)world ? 0 : 1;
}
