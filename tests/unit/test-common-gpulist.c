/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of GPU list parsing and the mapping of CUDA ordinals to node
 * GPUs, with and without Slurm's device-cgroup renumbering. */
#include <string.h>

#include "gpulist.h"
#include "tap.h"

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
	return tap_done();
}
