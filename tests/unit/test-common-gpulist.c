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
	char err[512], got[256];
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

/* Two GPU UUIDs as nvidia-smi -L prints them, and a MIG device of each
 * form (the current one, and the older GPU UUID with GI/CI). */
#define UUID_A "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6"
#define UUID_B "GPU-0c3c2b5e-1f0a-4a34-9d5d-3c1e0b7b2a11"
#define MIG_A "MIG-4e6f0ab1-52c8-5d0e-a1c2-7f1be0dd2c35"
#define MIG_B "MIG-GPU-8932f937-d72c-4106-c12f-20bd9faed9f6/1/0"

/* gres.conf Flags=env_uuid: GPU UUIDs in CUDA_VISIBLE_DEVICES. */
static void
test_uuids(void)
{
	static char big[DDP_GPU_LIST_LEN], step[DDP_GPU_LIST_LEN];
	static struct ddp_gpu_sel sel;
	char err[512];
	size_t k, len = 0, slen = 0;
	static const char *bad[] = {"",		  "GPU-",	  "GPU-a,",
				    ",GPU-a",	  "GPU-a,,GPU-b", "GPU-a,GPU-a",
				    "GPU-a,0",	  "0,GPU-a",	  "GPU-a b",
				    "GPU-a;b",	  "gpu-a",	  "NoDevFiles",
				    "GPU-\033[2J"};

	tap_ok(ddp_gpu_uuid_count(UUID_A "," UUID_B) == 2 &&
		       ddp_gpu_uuid_count(MIG_A "," MIG_B) == 2 &&
		       ddp_gpu_uuid_count("GPU-8932f937") == 1,
	       "uuids: full, MIG and abbreviated UUIDs counted");
	for (k = 0; k < sizeof(bad) / sizeof(bad[0]); k++)
		tap_ok(ddp_gpu_uuid_count(bad[k]) < 0, "uuids refused: '%s'",
		       bad[k]);
	tap_ok(ddp_gpu_uuid_count(NULL) < 0, "uuids: NULL refused");
	memset(big, 'a', DDP_GPU_ID_LEN);
	memcpy(big, "GPU-", 4);
	big[DDP_GPU_ID_LEN - 1] = '\0';
	tap_ok(ddp_gpu_uuid_count(big) == 1, "uuids: %d characters accepted",
	       DDP_GPU_ID_LEN - 1);
	big[DDP_GPU_ID_LEN - 1] = 'a';
	big[DDP_GPU_ID_LEN] = '\0';
	tap_ok(ddp_gpu_uuid_count(big) < 0, "uuids: %d characters refused",
	       DDP_GPU_ID_LEN);

	/* One UUID per step GPU: Slurm's string kept, UUID k is step GPU
	 * k in Slurm's order (not sorted), whatever a device cgroup's
	 * renumbering (the step's GPUs are not 0 and 1). */
	tap_ok(resolved(UUID_A "," UUID_B, "4,5", 2, 0, UUID_A "," UUID_B,
			"4,5"),
	       "resolve: UUIDs kept, UUID k is step GPU k");
	tap_ok(resolved(UUID_B "," UUID_A, "5,4", 2, 0, UUID_B "," UUID_A,
			"5,4"),
	       "resolve: UUIDs mapped in Slurm's order, not sorted");
	tap_ok(resolved(MIG_A "," MIG_B, "6,7", 1, 0, MIG_A "," MIG_B, "6,7"),
	       "resolve: MIG UUIDs kept and mapped");
	tap_ok(resolved(UUID_A "," UUID_B, "7,9", 2, 0, UUID_A "," UUID_B,
			"7,-"),
	       "resolve: a UUID's GPU the topology lacks maps to -1");
	tap_ok(resolved(UUID_A "," UUID_B, NULL, 2, 0, UUID_A "," UUID_B,
			"-,-"),
	       "resolve: UUIDs without SLURM_STEP_GPUS kept, GPUs unknown");

	/* Narrowed (--gpus-per-task): Slurm's list kept, never the step's
	 * numbers; refused with advice when the ranks outnumber it. */
	tap_ok(resolved(UUID_B, "4,5", 1, 0, UUID_B, "-"),
	       "resolve: a narrowed UUID list is kept, its GPU unknown");
	ddp_gpu_resolve(UUID_B, "4,5", 8, 1, &sel, err, sizeof(err));
	tap_ok(strstr(sel.note, "UUIDs 1, SLURM_STEP_GPUS 2") &&
		       strstr(sel.note, "without GPU locality"),
	       "resolve: the note says which GPU is unknown and why");
	tap_ok(resolved(UUID_B, "4,5", 2, -1, UUID_B, "-"),
	       "resolve: a narrowed UUID list with more ranks is refused");
	ddp_gpu_resolve(UUID_B, "4,5", 8, 2, &sel, err, sizeof(err));
	tap_ok(strstr(err, "2 ranks on this node") &&
		       strstr(err, "only 1 of the step's 2 GPUs") &&
		       strstr(err, "Flags=env_uuid") &&
		       strstr(err, "--gpus-per-node") &&
		       strstr(err, "--gpus-per-task"),
	       "resolve: the refusal names the counts, UUIDs and the options");
	tap_ok(resolved(UUID_A "," UUID_B, "4,5", 3, -1, UUID_A "," UUID_B,
			"4,5"),
	       "resolve: more ranks than UUIDs refused");

	/* DDP_GPU_MAX UUIDs of the longest accepted form fit. */
	for (k = 0; k < DDP_GPU_MAX; k++) {
		snprintf(big + len, sizeof(big) - len, "%sGPU-%0*zu",
			 k ? "," : "", DDP_GPU_ID_LEN - 5, k);
		len += strlen(big + len);
		snprintf(step + slen, sizeof(step) - slen, "%s%zu",
			 k ? "," : "", k);
		slen += strlen(step + slen);
	}
	tap_ok(len + 1 == sizeof(big) &&
		       ddp_gpu_resolve(big, step, DDP_GPU_MAX, DDP_GPU_MAX,
				       &sel, err, sizeof(err)) == 0 &&
		       sel.n == DDP_GPU_MAX && !strcmp(sel.visible, big) &&
		       sel.gpu_of[DDP_GPU_MAX - 1] == DDP_GPU_MAX - 1,
	       "resolve: %d UUIDs of %d characters fit", DDP_GPU_MAX,
	       DDP_GPU_ID_LEN - 1);
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
	tap_ok(resolved("GPU-\033[2J,GPU-0a1b", "4,5", 2, 0, "", ""),
	       "resolve: an unusable list never falls back to SLURM_STEP_GPUS");
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
	test_uuids();
	return tap_done();
}
