/* SPDX-License-Identifier: BSD-3-Clause */
/* libFuzzer target: GPU index lists (CUDA_VISIBLE_DEVICES, SLURM_STEP_GPUS)
 * and their mapping never crash and never map outside the inputs. The
 * input is two lists separated by '|'. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpulist.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned vis[DDP_GPU_MAX], step[DDP_GPU_MAX];
	long out[DDP_GPU_MAX], nv, ns = 0, k;
	char *s, *bar;

	if (size > 4096)
		return 0;
	s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	bar = strchr(s, '|');
	if (bar) {
		*bar = '\0';
		ns = ddp_gpulist_parse(bar + 1, step, DDP_GPU_MAX);
		if (ns < 0)
			ns = 0;
	}
	nv = ddp_gpulist_parse(s, vis, DDP_GPU_MAX);
	if (nv > 0) {
		ddp_gpu_map(vis, (size_t)nv, step, (size_t)ns, out);
		for (k = 0; k < nv; k++)
			if (out[k] < -1 || out[k] >= DDP_GPU_MAX)
				abort();
	}
	free(s);
	return 0;
}
