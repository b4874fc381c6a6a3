/* SPDX-License-Identifier: BSD-3-Clause */
/* GPU index lists from Slurm's environment, their mapping to the node's
 * GPUs in PCI bus order, and which GPUs a node's ranks see. */
#include "gpulist.h"

#include <ctype.h>
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

/* Notes which input was ignored: at most 40 printable characters of it,
 * since it comes from the job's environment and ends up in logs. */
static void
note_ignored(struct ddp_gpu_sel *out, const char *name, const char *value)
{
	char shown[44];
	size_t i;

	for (i = 0; value[i] && i < 40; i++)
		shown[i] = isprint((unsigned char)value[i]) ? value[i] : '?';
	shown[i] = '\0';
	if (ddp_fmt(out->note, sizeof(out->note),
		    "%s=%s%s is not a list of GPU indices: ignored", name,
		    shown, value[i] ? "..." : "") < 0)
		out->note[0] = '\0';
}

int
ddp_gpu_resolve(const char *visible, const char *step, unsigned ngpus,
		unsigned long nranks, struct ddp_gpu_sel *out, char *err,
		size_t errlen)
{
	unsigned vis[DDP_GPU_MAX], stp[DDP_GPU_MAX];
	long nv = -1, ns = -1, k;
	size_t len = 0;

	memset(out, 0, sizeof(*out));
	if (visible && visible[0]) {
		nv = ddp_gpulist_parse(visible, vis, DDP_GPU_MAX);
		if (nv < 0)
			note_ignored(out, "CUDA_VISIBLE_DEVICES", visible);
	}
	if (step && step[0]) {
		ns = ddp_gpulist_parse(step, stp, DDP_GPU_MAX);
		if (ns < 0)
			note_ignored(out, "SLURM_STEP_GPUS", step);
	}
	if (nv < 0 && ns < 0)
		return 0;
	if (ns > 0 && nv < ns) {
		/* Narrowed (or unset): widen to the step's list, in
		 * CUDA_VISIBLE_DEVICES' own numbering. */
		int local = nv > 0;

		for (k = 0; k < nv; k++)
			if (contains(stp, (size_t)ns, vis[k]))
				local = 0;
		for (k = 0; k < ns; k++)
			vis[k] = local ? (unsigned)k : stp[k];
		nv = ns;
	}
	ddp_gpu_map(vis, (size_t)nv, stp, ns > 0 ? (size_t)ns : 0, out->gpu_of);
	for (k = 0; k < nv; k++) {
		if (out->gpu_of[k] >= (long)ngpus)
			out->gpu_of[k] = -1;
		/* Cannot fail: DDP_GPU_LIST_LEN holds DDP_GPU_MAX indices. */
		ddp_fmt(out->visible + len, sizeof(out->visible) - len, "%s%u",
			k ? "," : "", vis[k]);
		len += strlen(out->visible + len);
	}
	out->n = (size_t)nv;
	if (nranks > out->n) {
		/* Advice: a cut message still helps. */
		ddp_fmt(err, errlen,
			"%lu ranks on this node but the step has only %zu GPUs "
			"here: use --ntasks-per-node of at most the GPUs per "
			"node, or request more GPUs (--gpus-per-node)",
			nranks, out->n);
		return -1;
	}
	return 0;
}
