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

/* Length of the GPU UUID that starts s ("GPU-..." or "MIG-...", the
 * MIG form with its "/GI/CI" suffix), up to the next comma or the end;
 * 0 when s does not start one. */
static size_t
uuid_len(const char *s)
{
	size_t n;

	if (strncmp(s, "GPU-", 4) != 0 && strncmp(s, "MIG-", 4) != 0)
		return 0;
	for (n = 4; s[n] && s[n] != ','; n++)
		if (!isalnum((unsigned char)s[n]) && s[n] != '-' && s[n] != '/')
			return 0;
	return n > 4 && n < DDP_GPU_ID_LEN ? n : 0;
}

long
ddp_gpu_uuid_count(const char *s)
{
	const char *item[DDP_GPU_MAX];
	size_t len[DDP_GPU_MAX], n = 0, i, l;
	const char *p = s;

	if (!s || !*s)
		return -1;
	for (;;) {
		l = uuid_len(p);
		if (l == 0 || n == DDP_GPU_MAX)
			return -1;
		for (i = 0; i < n; i++)
			if (len[i] == l && memcmp(item[i], p, l) == 0)
				return -1;
		item[n] = p;
		len[n++] = l;
		p += l;
		if (*p == '\0')
			break;
		if (p[1] == '\0')
			return -1;
		p++;
	}
	return (long)n;
}

/* Notes which input was ignored: at most 40 printable characters of it,
 * since it comes from the job's environment and ends up in logs. */
static void
note_ignored(struct ddp_gpu_sel *out, const char *name, const char *value,
	     const char *what)
{
	char shown[44];
	size_t i;

	for (i = 0; value[i] && i < 40; i++)
		shown[i] = isprint((unsigned char)value[i]) ? value[i] : '?';
	shown[i] = '\0';
	if (ddp_fmt(out->note, sizeof(out->note),
		    "%s=%s%s is not a list of %s: ignored", name, shown,
		    value[i] ? "..." : "", what) < 0)
		out->note[0] = '\0';
}

/* The refusal when a node has more ranks than GPUs: -1. */
static int
too_few_gpus(unsigned long nranks, size_t ngpus, char *err, size_t errlen)
{
	/* Advice: a cut message still helps. */
	ddp_fmt(err, errlen,
		"%lu ranks on this node but the step has only %zu GPUs here: "
		"use --ntasks-per-node of at most the GPUs per node, or "
		"request more GPUs (--gpus-per-node)",
		nranks, ngpus);
	return -1;
}

/*
 * CUDA_VISIBLE_DEVICES as GPU UUIDs (gres.conf Flags=env_uuid): Slurm's
 * string is kept, since nothing else names the same devices once a device
 * cgroup renumbers them. Slurm writes the UUIDs in the order of
 * SLURM_STEP_GPUS, so with one UUID per step GPU ordinal k is step GPU k.
 * A narrowed list (--gpus-per-task) cannot be widened: the other GPUs'
 * UUIDs are not known here.
 */
static int
resolve_uuids(const char *visible, size_t nu, const unsigned *stp, long ns,
	      unsigned ngpus, unsigned long nranks, struct ddp_gpu_sel *out,
	      char *err, size_t errlen)
{
	char nstep[24];
	size_t k;

	/* Cannot fail: DDP_GPU_LIST_LEN holds DDP_GPU_MAX UUIDs. */
	ddp_fmt(out->visible, sizeof(out->visible), "%s", visible);
	out->n = nu;
	for (k = 0; k < nu; k++)
		out->gpu_of[k] =
			ns == (long)nu && stp[k] < ngpus ? (long)stp[k] : -1;
	if (ns < 0)
		ddp_fmt(nstep, sizeof(nstep), "unset");
	else
		ddp_fmt(nstep, sizeof(nstep), "%ld", ns);
	if (ns != (long)nu && !out->note[0] &&
	    ddp_fmt(out->note, sizeof(out->note),
		    "which GPU each UUID of CUDA_VISIBLE_DEVICES names is "
		    "unknown (UUIDs %zu, SLURM_STEP_GPUS %s): ranks are placed "
		    "without GPU locality",
		    nu, nstep) < 0)
		out->note[0] = '\0';
	if (nranks <= nu)
		return 0;
	if (ns <= (long)nu)
		return too_few_gpus(nranks, nu, err, errlen);
	ddp_fmt(err, errlen,
		"%lu ranks on this node but CUDA_VISIBLE_DEVICES names only "
		"%zu of the step's %ld GPUs here, by UUID (gres.conf "
		"Flags=env_uuid), and a UUID list cannot be widened to the "
		"others: request GPUs per node (--gpus-per-node or "
		"--gres=gpu:N) rather than per task (--gpus-per-task), so "
		"that every rank sees them all",
		nranks, nu, ns);
	return -1;
}

int
ddp_gpu_resolve(const char *visible, const char *step, unsigned ngpus,
		unsigned long nranks, struct ddp_gpu_sel *out, char *err,
		size_t errlen)
{
	unsigned vis[DDP_GPU_MAX] = {0}, stp[DDP_GPU_MAX];
	long nv = -1, ns = -1, nu = -1, k;

	memset(out, 0, sizeof(*out));
	if (step && step[0]) {
		ns = ddp_gpulist_parse(step, stp, DDP_GPU_MAX);
		if (ns < 0)
			note_ignored(out, "SLURM_STEP_GPUS", step,
				     "GPU indices");
	}
	if (visible && visible[0]) {
		nv = ddp_gpulist_parse(visible, vis, DDP_GPU_MAX);
		if (nv < 0)
			nu = ddp_gpu_uuid_count(visible);
		if (nu > 0)
			return resolve_uuids(visible, (size_t)nu, stp, ns,
					     ngpus, nranks, out, err, errlen);
		if (nv < 0) {
			/* Slurm's numbering is unknown: SLURM_STEP_GPUS's
			 * numbers would name other GPUs in a device cgroup. */
			note_ignored(out, "CUDA_VISIBLE_DEVICES", visible,
				     "GPU indices or UUIDs");
			return 0;
		}
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
		ddp_fmt_cat(out->visible, sizeof(out->visible), "%s%u",
			    k ? "," : "", vis[k]);
	}
	out->n = (size_t)nv;
	if (nranks > out->n)
		return too_few_gpus(nranks, out->n, err, errlen);
	return 0;
}
