/* SPDX-License-Identifier: BSD-3-Clause */
/* GPU index lists from Slurm's environment and their mapping to the
 * node's GPUs in PCI bus order. */
#include "gpulist.h"

#include <stdlib.h>
#include <string.h>

#include "ddp_util.h"

long
ddp_gpulist_parse(const char *s, unsigned *out, size_t max)
{
	unsigned char seen[DDP_GPU_MAX];
	const char *p = s;
	size_t n = 0;

	if (!s || !*s)
		return -1;
	memset(seen, 0, sizeof(seen));
	for (;;) {
		long lo, hi, v;
		const char *end;

		if (*p == '+' || *p == '-' ||
		    ddp_parse_long_prefix(p, 0, DDP_GPU_MAX - 1, &lo, &end) < 0)
			return -1;
		hi = lo;
		p = end;
		if (*p == '-') {
			if (p[1] == '+' || p[1] == '-' ||
			    ddp_parse_long_prefix(p + 1, lo, DDP_GPU_MAX - 1,
						  &hi, &end) < 0)
				return -1;
			p = end;
		}
		for (v = lo; v <= hi; v++) {
			if (n == max || seen[v])
				return -1;
			seen[v] = 1;
			out[n++] = (unsigned)v;
		}
		if (*p == '\0')
			break;
		if (*p != ',' || p[1] == '\0')
			return -1;
		p++;
	}
	return (long)n;
}

static int
cmp_unsigned(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;

	return (x > y) - (x < y);
}

static int
contains(const unsigned *v, size_t n, unsigned x)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (v[i] == x)
			return 1;
	return 0;
}

int
ddp_gpu_map(const unsigned *visible, size_t nvis, const unsigned *step,
	    size_t nstep, long *out)
{
	unsigned sorted[DDP_GPU_MAX];
	size_t k;
	int all_in_step = 1, all_below = 1, partial = 0;

	if (nstep > DDP_GPU_MAX)
		nstep = 0;
	for (k = 0; k < nvis; k++) {
		if (!contains(step, nstep, visible[k]))
			all_in_step = 0;
		if (visible[k] >= nstep)
			all_below = 0;
	}
	if (nstep) {
		memcpy(sorted, step, nstep * sizeof(*step));
		qsort(sorted, nstep, sizeof(*sorted), cmp_unsigned);
	}
	for (k = 0; k < nvis; k++) {
		if (nstep == 0 || all_in_step) {
			/* Without SLURM_STEP_GPUS the indices are taken as
			 * node-level: that is what Slurm writes when no
			 * device cgroup renumbers them. */
			out[k] = visible[k];
		} else if (all_below) {
			out[k] = sorted[visible[k]];
		} else {
			out[k] = -1;
			partial = 1;
		}
	}
	return partial;
}
