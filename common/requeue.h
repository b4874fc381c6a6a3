/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * --ddp-check=requeue without Slurm: which nodes ddp-check's verdict lines
 * name (as ddp_verdict_scan reads them), whether the job may be requeued,
 * the job's new excluded nodes, and the lines the job's output shows.
 * plugin/requeue.c asks Slurm for the job's record and does the requeue;
 * everything it decides is here, so the unit tests drive it.
 *
 * Errors: functions return 0 or -1 with err (NUL-terminated when errlen >
 * 0); they never log. Thread safety: reentrant, they touch only their
 * arguments.
 */
#ifndef DDP_REQUEUE_H
#define DDP_REQUEUE_H

#include <stddef.h>

#include "verdict.h"

/* At most this many distinct nodes are named by one check's verdicts. */
#define DDP_REQUEUE_MAX_NODES 64

/* The nodes named by a check's verdict lines, each once, in order. */
struct ddp_requeue_nodes {
	char name[DDP_REQUEUE_MAX_NODES][256];
	size_t n;
};

/*
 * A ddp_verdict_fn (verdict.h) for ddp_verdict_scan: adds the node v names
 * to nodes, a struct ddp_requeue_nodes zeroed before the first call,
 * unless it is there already; nodes past DDP_REQUEUE_MAX_NODES are
 * dropped. Cannot fail.
 */
void ddp_requeue_collect(void *nodes, const struct ddp_verdict *v);

/* What Slurm says about the job, as far as requeueing goes. */
struct ddp_requeue_job {
	int batch;	   /* a batch job (sbatch), not salloc or srun alone */
	int requeue;	   /* Slurm would requeue it (--requeue, JobRequeue) */
	unsigned restarts; /* times it was requeued already */
};

/*
 * Whether the job may be requeued once more, with at most max restarts in
 * all (ddp.conf's check_requeue_max). Returns 1, or 0 with why saying what
 * stops it ("the job was submitted with --no-requeue ...").
 */
int ddp_requeue_allowed(const struct ddp_requeue_job *job, unsigned max,
			char *why, size_t whylen);

/*
 * The job's new excluded nodes: existing (Slurm's hostlist form, NULL or
 * "" for none, kept as given) followed by each node of add that its
 * expansion lacks, comma-separated. Returns 0, or -1 with err when the
 * result does not fit or existing cannot be parsed.
 */
int ddp_requeue_exclude(const char *existing,
			const struct ddp_requeue_nodes *add, char *out,
			size_t outlen, char *err, size_t errlen);

/* The nodes as one comma-separated list, as --exclude= takes it. Returns
 * 0, or -1 when it does not fit. */
int ddp_requeue_node_list(const struct ddp_requeue_nodes *nodes, char *out,
			  size_t outlen);

/*
 * One line of the job's output for a verdict: "node2: link-send 0.00599
 * GB/s, the step's median 1.31 GB/s", or "node3: link-unreachable" without
 * numbers. Returns 0, or -1 when it does not fit.
 */
int ddp_requeue_describe(const struct ddp_verdict *v, char *out, size_t outlen);

#endif
