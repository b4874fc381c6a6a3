/* SPDX-License-Identifier: BSD-3-Clause */
/* ddp-plan: prints the placement --ddp would give the ranks of one node of a
 * given hwloc topology, one line per rank, for admins and golden tests. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp_util.h"
#include "gpulist.h"
#include "placement.h"

static void
usage(FILE *f)
{
	fprintf(f,
		"usage: ddp-plan --topology FILE --ranks N [--cpus LIST] "
		"[--slurm-cores LIST]\n"
		"                [--gpus LIST] [--bind none|numa|core]\n"
		"  --cpus LIST         allowed OS CPU numbers (default: all "
		"allowed)\n"
		"  --slurm-cores LIST  Slurm's abstract core ids for the step\n"
		"  --gpus LIST         the step's GPU indices as Slurm gives "
		"them (default: all)\n");
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"topology", required_argument, NULL, 't'},
		{"ranks", required_argument, NULL, 'n'},
		{"cpus", required_argument, NULL, 'c'},
		{"slurm-cores", required_argument, NULL, 's'},
		{"gpus", required_argument, NULL, 'g'},
		{"bind", required_argument, NULL, 'b'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *topo_path = NULL, *cpus = NULL, *cores = NULL, *gpus = NULL;
	struct ddp_plan_req req;
	struct ddp_topo *t = NULL;
	struct ddp_plan *plan = NULL;
	hwloc_bitmap_t allowed = NULL;
	unsigned step[DDP_GPU_MAX];
	long *map = NULL, nranks = 0, nstep = 0, r;
	char err[512];
	int c, rc = 2;

	memset(&req, 0, sizeof(req));
	req.bind = DDP_BIND_CORE;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			topo_path = optarg;
			break;
		case 'n':
			if (ddp_parse_long(optarg, 1, 4096, &nranks) < 0) {
				fprintf(stderr,
					"ddp-plan: --ranks: want 1..4096\n");
				goto out;
			}
			break;
		case 'c':
			cpus = optarg;
			break;
		case 's':
			cores = optarg;
			break;
		case 'g':
			gpus = optarg;
			break;
		case 'b':
			if (ddp_bind_parse(optarg, &req.bind) < 0) {
				fprintf(stderr, "ddp-plan: --bind: want none, "
						"numa or core\n");
				goto out;
			}
			break;
		case 'h':
			usage(stdout);
			rc = 0;
			goto out;
		default:
			usage(stderr);
			goto out;
		}
	}
	if (!topo_path || nranks == 0 || optind != argc) {
		usage(stderr);
		goto out;
	}
	rc = 1;
	if (ddp_topo_load(&t, topo_path, err, sizeof(err)) < 0) {
		fprintf(stderr, "ddp-plan: %s\n", err);
		goto out;
	}
	allowed = hwloc_bitmap_alloc();
	map = calloc((size_t)nranks, sizeof(*map));
	if (!allowed || !map) {
		fprintf(stderr, "ddp-plan: out of memory\n");
		goto out;
	}
	if (cpus &&
	    ddp_topo_cpus_from_list(t, cpus, allowed, err, sizeof(err)) < 0) {
		fprintf(stderr, "ddp-plan: --cpus: %s\n", err);
		goto out;
	}
	if (cores && !cpus &&
	    ddp_topo_cpus_from_slurm_cores(t, cores, allowed, err,
					   sizeof(err)) < 0) {
		printf("note slurm cores not mapped: %s\n", err);
		cores = NULL;
	}
	if (gpus) {
		nstep = ddp_gpulist_parse(gpus, step, DDP_GPU_MAX);
		if (nstep < 0) {
			fprintf(stderr, "ddp-plan: --gpus: want a list of GPU "
					"indices such as 0-3\n");
			goto out;
		}
	} else {
		for (nstep = 0;
		     nstep < (long)ddp_topo_ngpus(t) && nstep < DDP_GPU_MAX;
		     nstep++)
			step[nstep] = (unsigned)nstep;
	}
	for (r = 0; r < nranks; r++) {
		map[r] = r < nstep ? (long)step[r] : -1;
		if (map[r] >= (long)ddp_topo_ngpus(t))
			map[r] = -1;
	}
	req.nranks = (unsigned)nranks;
	req.cpus = (cpus || cores) ? allowed : NULL;
	req.gpu = map;
	if (ddp_plan_compute(t, &req, &plan, err, sizeof(err)) < 0) {
		fprintf(stderr, "ddp-plan: %s\n", err);
		goto out;
	}
	printf("plan gpus=%u thissystem=%d bind=%s shared=%d\n",
	       ddp_topo_ngpus(t), ddp_topo_is_thissystem(t),
	       ddp_bind_name(plan->bind), plan->shared);
	for (r = 0; r < nranks; r++) {
		const struct ddp_rank_place *rp = &plan->rank[r];

		printf("rank=%ld gpu=%s cpus=%s ncpus=%u numa=%s nic=%s "
		       "hca=%s bind=%s locality=%s\n",
		       r, rp->busid, rp->cpus, rp->ncpus,
		       rp->numa[0] ? rp->numa : "-", rp->nic[0] ? rp->nic : "-",
		       rp->hca[0] ? rp->hca : "-",
		       rp->bindcpus[0] ? rp->bindcpus : "-", rp->locality);
	}
	rc = 0;
out:
	ddp_plan_free(plan);
	ddp_topo_destroy(t);
	hwloc_bitmap_free(allowed);
	free(map);
	return rc;
}
