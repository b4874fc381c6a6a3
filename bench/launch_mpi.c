/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Launch probe for Open MPI, the anchor of bench/scale: MPI_Init and one
 * 4-byte MPI_Allreduce, then on every rank the same line launch_ddp
 * prints with LAUNCH_STATS=1 (time done, open descriptors, CPU time,
 * peak resident memory). Built with mpicc by bench/scale, never by make.
 */
#include <dirent.h>
#include <mpi.h>
#include <stdio.h>
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

int
main(int argc, char **argv)
{
	struct timespec ts;
	struct rusage ru;
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
	getrusage(RUSAGE_SELF, &ru);
	printf("stats rank %d done %lld.%09ld fds %d cpu %.3f rss_kb %ld\n",
	       rank, (long long)ts.tv_sec, ts.tv_nsec, open_fds(),
	       (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
		       (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6,
	       ru.ru_maxrss);
	MPI_Finalize();
	return v == (float)world ? 0 : 1;
}
