/* SPDX-License-Identifier: BSD-3-Clause */
/* ddp-plan: prints the placement --ddp would give the ranks of one node of a
 * given hwloc topology, and the variables the plugin would set from it and
 * from the site configuration, for admins and golden tests. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp_conf.h"
#include "ddp_util.h"
#include "gpulist.h"
#include "placement.h"
#include "topocache.h"

static void
usage(FILE *f)
{
	fprintf(f,
		"usage: ddp-plan --topology FILE --ranks N [--cpus LIST] "
		"[--slurm-cores LIST]\n"
		"                [--gpus LIST] [--cuda-visible-devices LIST] "
		"[--bind " DDP_BIND_USAGE "]\n"
		"                [--config FILE] [--cache PATH]\n"
		"       ddp-plan -h|--help|--version\n"
		"  --cpus LIST         allowed OS CPU numbers (default: all "
		"allowed)\n"
		"  --slurm-cores LIST  Slurm's abstract core ids for the step\n"
		"  --gpus LIST         the step's GPUs as Slurm gives them "
		"(SLURM_STEP_GPUS)\n"
		"  --cuda-visible-devices LIST\n"
		"                      CUDA_VISIBLE_DEVICES as Slurm set it "
		"for the tasks\n"
		"  --bind MODE         binding (default: the site's "
		"default_bind)\n"
		"  --config FILE       site configuration (default: %s if "
		"present)\n"
		"  --cache PATH        write FILE as the plugin's topology "
		"cache PATH (as root),\n"
		"                      then plan from what the plugin would "
		"read back from it\n"
		"With --gpus or --cuda-visible-devices the GPUs are chosen as "
		"the plugin\n"
		"chooses them and a 'gpus' line shows the CUDA_VISIBLE_DEVICES "
		"every rank gets\n"
		"and the GPU of each CUDA ordinal; without either, rank k "
		"gets the topology's\n"
		"GPU k while there are GPUs. Prints a plan line, one line per "
		"rank, and one\n"
		"'env' line per rank with the variables the plugin sets; "
		"NAME?=VALUE is set\n"
		"only when the user has not set NAME.\n",
		DDP_CONF_DEFAULT);
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
		{"cuda-visible-devices", required_argument, NULL, 'v'},
		{"bind", required_argument, NULL, 'b'},
		{"config", required_argument, NULL, 'C'},
		{"cache", required_argument, NULL, 'K'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	const char *topo_path = NULL, *cpus = NULL, *cores = NULL, *gpus = NULL;
	const char *visible = NULL, *config = NULL, *cache = NULL;
	struct ddp_conf conf;
	struct ddp_place_env env;
	struct ddp_topo *t = NULL;
	struct ddp_plan *plan = NULL;
	hwloc_bitmap_t allowed = NULL;
	struct ddp_gpu_sel sel;
	unsigned k;
	long nranks = 0, r;
	enum ddp_bind bind = DDP_BIND_CORE;
	int bind_given = 0;
	char err[DDP_ERR_LEN];
	int c, rc = 2;

	ddp_conf_defaults(&conf);
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			topo_path = optarg;
			break;
		case 'n':
			if (ddp_parse_long(optarg, 1, DDP_PLAN_MAX_RANKS,
					   &nranks) < 0) {
				fprintf(stderr,
					"ddp-plan: --ranks: want 1..%d\n",
					DDP_PLAN_MAX_RANKS);
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
		case 'v':
			visible = optarg;
			break;
		case 'b':
			if (ddp_bind_parse(optarg, &bind) < 0) {
				fprintf(stderr, "ddp-plan: --bind: "
						"want " DDP_BIND_ACCEPTED "\n");
				goto out;
			}
			bind_given = 1;
			break;
		case 'C':
			config = optarg;
			break;
		case 'K':
			cache = optarg;
			break;
		case 'h':
			usage(stdout);
			rc = 0;
			goto out;
		case 'V':
			printf("ddp-plan %s\n", DDP_VERSION);
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
	if (ddp_conf_load(&conf, config ? config : DDP_CONF_DEFAULT, !config,
			  err, sizeof(err)) < 0) {
		fprintf(stderr, "ddp-plan: %s\n", err);
		goto out;
	}
	if (!bind_given)
		bind = conf.default_bind;
	if (cache) {
		/* The plugin's cache path both ways: written from FILE, read
		 * back through the same checks (FILE is not this machine, so
		 * nothing of this machine's allowed CPUs is applied). */
		if (ddp_topo_cache_write(cache, topo_path, err, sizeof(err)) <
			    0 ||
		    ddp_topo_cache_read(cache, 0, &t, err, sizeof(err)) != 1) {
			fprintf(stderr, "ddp-plan: --cache %s: %s\n", cache,
				err);
			goto out;
		}
	} else if (ddp_topo_load(&t, topo_path, err, sizeof(err)) < 0) {
		fprintf(stderr, "ddp-plan: %s\n", err);
		goto out;
	}
	allowed = hwloc_bitmap_alloc();
	if (!allowed) {
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
	if (gpus || visible) {
		/* The plugin's own decision, on the values Slurm would set. */
		if (ddp_gpu_resolve(visible, gpus, ddp_topo_ngpus(t),
				    (unsigned long)nranks, &sel, err,
				    sizeof(err)) < 0) {
			fprintf(stderr, "ddp-plan: %s\n", err);
			goto out;
		}
	} else {
		memset(&sel, 0, sizeof(sel));
		for (; sel.n < ddp_topo_ngpus(t) && sel.n < DDP_GPU_MAX;
		     sel.n++)
			sel.gpu_of[sel.n] = (long)sel.n;
	}
	if (ddp_plan_node(t, (unsigned long)nranks, sel.gpu_of, sel.n,
			  (cpus || cores) ? allowed : NULL, bind, &plan, err,
			  sizeof(err)) < 0) {
		fprintf(stderr, "ddp-plan: %s\n", err);
		goto out;
	}
	printf("plan gpus=%u thissystem=%d bind=%s shared=%d\n",
	       ddp_topo_ngpus(t), ddp_topo_is_thissystem(t),
	       ddp_bind_name(plan->bind), plan->shared);
	if (gpus || visible) {
		printf("gpus CUDA_VISIBLE_DEVICES=%s ordinals=",
		       sel.n ? sel.visible : "-");
		for (k = 0; k < sel.n; k++)
			if (sel.gpu_of[k] < 0)
				printf("%s-", k ? "," : "");
			else
				printf("%s%ld", k ? "," : "", sel.gpu_of[k]);
		printf("%s\n", sel.n ? "" : "-");
		if (sel.note[0])
			printf("note %s\n", sel.note);
	}
	for (r = 0; r < nranks; r++) {
		const struct ddp_rank_place *rp = &plan->rank[r];

		printf("rank=%ld gpu=%s cpus=%s ncpus=%u numa=%s nic=%s "
		       "hca=%s bind=%s locality=%s\n",
		       r, rp->busid, rp->cpus, rp->ncpus,
		       rp->numa[0] ? rp->numa : "-", rp->nic[0] ? rp->nic : "-",
		       rp->hca[0] ? rp->hca : "-",
		       rp->bindcpus[0] ? rp->bindcpus : "-", rp->locality);
	}
	for (r = 0; r < nranks; r++) {
		if (ddp_plan_rank_env(plan, (unsigned)r, &conf, &env) < 0) {
			fprintf(stderr,
				"ddp-plan: no environment for rank %ld\n", r);
			goto out;
		}
		printf("env rank=%ld", r);
		for (k = 0; k < env.n; k++)
			printf(" %s%s=%s", env.var[k].name,
			       env.var[k].keep ? "?" : "", env.var[k].value);
		printf("\n");
	}
	rc = 0;
out:
	ddp_plan_free(plan);
	ddp_topo_destroy(t);
	hwloc_bitmap_free(allowed);
	return rc;
}
