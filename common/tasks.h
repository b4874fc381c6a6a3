/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Tasks-per-node strings ("2(x3),1", as in SLURM_STEP_TASKS_PER_NODE) and
 * the rank environment derived from them: RANK, WORLD_SIZE, LOCAL_RANK,
 * LOCAL_WORLD_SIZE, NODE_RANK and GROUP_RANK for one task of a step.
 *
 * Thread safety: reentrant; the functions touch only their arguments.
 */
#ifndef DDP_TASKS_H
#define DDP_TASKS_H

#include <stddef.h>

/* Upper bounds that keep hostile input from exhausting memory. */
#define DDP_TASKS_MAX_NODES 65536
#define DDP_TASKS_MAX_PER_NODE 65536

/*
 * Parses "N", "N(xK)" items separated by commas into counts[], one entry
 * per node. Each N is 0..DDP_TASKS_MAX_PER_NODE, each K is 1..max; at most
 * max_nodes entries. Returns the number of nodes (>= 1), or -1 on any
 * syntax error or overflow (counts then holds garbage). counts must have
 * room for max_nodes entries.
 */
long ddp_tasks_parse(const char *s, unsigned *counts, size_t max_nodes);

/* Formats counts back into the compressed form ("2(x3),1"). Returns 0 or
 * -1 when it does not fit in buf. */
int ddp_tasks_format(const unsigned *counts, size_t n, char *buf, size_t size);

struct ddp_rank_env {
	unsigned rank;		   /* RANK */
	unsigned world_size;	   /* WORLD_SIZE */
	unsigned local_rank;	   /* LOCAL_RANK */
	unsigned local_world_size; /* LOCAL_WORLD_SIZE */
	unsigned node_rank;	   /* NODE_RANK and GROUP_RANK */
	unsigned nnodes;	   /* nodes in the step */
};

/*
 * Computes the rank environment of the task with step-local node index
 * node_id and node-local task index local_id, given the step's tasks per
 * node. global_id is Slurm's task id for that task (SLURM_PROCID), or -1
 * to derive it from a block distribution. RANK is Slurm's task id so that
 * srun's output labels, signals and accounting name the same rank; it must
 * lie in [0, WORLD_SIZE). Returns 0, or -1 with a reason in err when the
 * inputs are inconsistent (node_id or local_id out of range, bad global_id,
 * a node with zero tasks asked about).
 */
int ddp_rank_env_compute(const unsigned *counts, size_t nnodes,
			 unsigned node_id, unsigned local_id, long global_id,
			 struct ddp_rank_env *env, char *err, size_t errlen);

/* Largest entry of counts (0 when n is 0). */
unsigned ddp_tasks_max(const unsigned *counts, size_t n);

#endif
