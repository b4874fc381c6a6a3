/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of GPU list parsing, the mapping of CUDA ordinals to node
 * GPUs with and without Slurm's device-cgroup renumbering, and the GPUs a
 * node's ranks see (ddp_gpu_resolve, the plugin's decision). */
#include <stdio.h>
#include <string.h>

#include "gpulist.h"
#include "tap.h"

/* ddp_gpu_resolve with 8 topology GPUs and nranks ranks; 1 when it
 * returns rc and gives the visible list and ordinals ("4,5,-"). */
static int
resolved(const char *vis, const char *step, unsigned long nranks, int rc,
	 const char *visible, const char *ordinals)
{
	struct ddp_gpu_sel sel;
	char err[256], got[256];
	size_t k, len = 0;
	int r;

	r = ddp_gpu_resolve(vis, step, 8, nranks, &sel, err, sizeof(err));
	got[0] = '\0';
	for (k = 0; k < sel.n && len + 8 < sizeof(got); k++) {
		if (sel.gpu_of[k] < 0)
			snprintf(got + len, sizeof(got) - len, "%s-",
				 k ? "," : "");
		else
			snprintf(got + len, sizeof(got) - len, "%s%ld",
				 k ? "," : "", sel.gpu_of[k]);
		len += strlen(got + len);
	}
	if (r == rc && !strcmp(sel.visible, visible) && !strcmp(got, ordinals))
		return 1;
	tap_diag("rc %d visible '%s' ordinals '%s' err '%s'", r, sel.visible,
		 got, r < 0 ? err : "");
	return 0;
}

static void
test_resolve(void)
{
	struct ddp_gpu_sel sel;
	char err[256], big[DDP_GPU_LIST_LEN + 8];
	size_t k, len = 0;

	tap_ok(resolved(NULL, NULL, 4, 0, "", ""),
	       "resolve: no list, no GPUs, any rank count");
	tap_ok(resolved("", "", 1, 0, "", ""), "resolve: empty lists unset");
	tap_ok(resolved("0,1,2,3", "0,1,2,3", 4, 0, "0,1,2,3", "0,1,2,3"),
	       "resolve: whole node, node-level indices");
	tap_ok(resolved("0,1", "6,2", 2, 0, "0,1", "2,6"),
	       "resolve: device cgroup renumbering, step sorted");
	tap_ok(resolved("0", "4-7", 4, 0, "0,1,2,3", "4,5,6,7"),
	       "resolve: narrowed in a device cgroup, widened 0-based");
	tap_ok(resolved("5", "4-7", 4, 0, "4,5,6,7", "4,5,6,7"),
	       "resolve: narrowed without cgroup, widened node-level");
	tap_ok(resolved(NULL, "1,2", 2, 0, "1,2", "1,2"),
	       "resolve: SLURM_STEP_GPUS alone");
	tap_ok(resolved("2,3", NULL, 1, 0, "2,3", "2,3"),
	       "resolve: CUDA_VISIBLE_DEVICES alone, node-level");
	tap_ok(resolved("6,7,8,9", NULL, 4, 0, "6,7,8,9", "6,7,-,-"),
	       "resolve: GPUs the topology lacks map to -1");
	tap_ok(resolved("0,5", "1,2", 2, 0, "0,5", "-,-"),
	       "resolve: inconsistent lists give unknown GPUs");
	tap_ok(resolved("GPU-0a1b", "0,1", 2, 0, "0,1", "0,1"),
	       "resolve: UUIDs count as unset");
	tap_ok(resolved("NoDevFiles", NULL, 3, 0, "", ""),
	       "resolve: NoDevFiles, no GPUs");
	tap_ok(resolved("0,1", "0,1", 3, -1, "0,1", "0,1"),
	       "resolve: more ranks than the step's GPUs refused");

	ddp_gpu_resolve("0,1", "0,1", 8, 3, &sel, err, sizeof(err));
	tap_ok(strstr(err, "3 ranks on this node") &&
		       strstr(err, "only 2 GPUs") &&
		       strstr(err, "--ntasks-per-node"),
	       "resolve: the refusal names both counts and the option");
	ddp_gpu_resolve("GPU-\033[2J", NULL, 8, 1, &sel, err, sizeof(err));
	tap_ok(strstr(sel.note, "CUDA_VISIBLE_DEVICES=GPU-?[2J") &&
		       strstr(sel.note, "ignored"),
	       "resolve: the note names the input, control bytes shown as ?");
	ddp_gpu_resolve(NULL, "0-255", 256, 256, &sel, err, sizeof(err));
	tap_ok(sel.n == DDP_GPU_MAX && sel.gpu_of[255] == 255 &&
		       strlen(sel.visible) < sizeof(sel.visible) &&
		       !strcmp(sel.visible + strlen(sel.visible) - 8,
			       ",254,255"),
	       "resolve: %d GPUs fit the visible list", DDP_GPU_MAX);
	for (k = 0; k <= DDP_GPU_MAX; k++) {
		snprintf(big + len, sizeof(big) - len, "%s%zu", k ? "," : "",
			 k % DDP_GPU_MAX);
		len += strlen(big + len);
		if (len + 8 >= sizeof(big))
			break;
	}
	tap_ok(ddp_gpu_resolve(big, NULL, 8, 1, &sel, err, sizeof(err)) == 0 &&
		       sel.n == 0 && sel.note[0],
	       "resolve: an over-long list is ignored, with a note");
}

int
main(void)
{
	unsigned v[DDP_GPU_MAX], s[DDP_GPU_MAX];
	long out[DDP_GPU_MAX], nv, ns;
	static const char *bad[] = {"",		  ",",	   "0,",   "0,,1",
				    "1-0",	  "0-",	   "-1",   "+1",
				    "0,0",	  "0-2,1", "256",  "GPU-1",
				    "NoDevFiles", "0 ,1",  "MIG-0"};
	size_t i;

	tap_ok(ddp_gpulist_parse("0,1,2,3", v, DDP_GPU_MAX) == 4 && v[3] == 3,
	       "plain list");
	tap_ok(ddp_gpulist_parse("4-7", v, DDP_GPU_MAX) == 4 && v[0] == 4 &&
		       v[3] == 7,
	       "range");
	tap_ok(ddp_gpulist_parse("3,1", v, DDP_GPU_MAX) == 2 && v[0] == 3,
	       "order kept");
	tap_ok(ddp_gpulist_parse("0-3", v, 2) < 0, "capacity respected");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		tap_ok(ddp_gpulist_parse(bad[i], v, DDP_GPU_MAX) < 0,
		       "refused: '%s'", bad[i]);
	tap_ok(ddp_gpulist_parse(NULL, v, DDP_GPU_MAX) < 0, "NULL refused");

	nv = ddp_gpulist_parse("4,5,6,7", v, DDP_GPU_MAX);
	ns = ddp_gpulist_parse("4,5,6,7", s, DDP_GPU_MAX);
	tap_ok(ddp_gpu_map(v, (size_t)nv, s, (size_t)ns, out) == 0 &&
		       out[0] == 4 && out[3] == 7,
	       "node-level indices kept");
	nv = ddp_gpulist_parse("0,1", v, DDP_GPU_MAX);
	ns = ddp_gpulist_parse("6,2", s, DDP_GPU_MAX);
	tap_ok(ddp_gpu_map(v, (size_t)nv, s, (size_t)ns, out) == 0 &&
		       out[0] == 2 && out[1] == 6,
	       "cgroup-local indices mapped through the sorted step GPUs");
	nv = ddp_gpulist_parse("0,1", v, DDP_GPU_MAX);
	tap_ok(ddp_gpu_map(v, (size_t)nv, s, 0, out) == 0 && out[1] == 1,
	       "no step list: indices taken as node-level");
	nv = ddp_gpulist_parse("0,5", v, DDP_GPU_MAX);
	ns = ddp_gpulist_parse("1,2", s, DDP_GPU_MAX);
	tap_ok(ddp_gpu_map(v, (size_t)nv, s, (size_t)ns, out) == 1 &&
		       out[0] == -1,
	       "inconsistent lists give unknown GPUs");
	test_resolve();
	return tap_done();
}
