/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Requeueing a batch job without nodes through libslurm: what
 * --ddp-check=requeue (requeue.c, in the step's rank 0) and --ddp-restart
 * (ddp-restart.c, when the allocation has no spare node left) share. The
 * decisions (may it be requeued, the new excluded nodes) are
 * common/requeue.c's; here the job's record is read and the job requeued.
 *
 * Linking: the slurm_* calls resolve in the loading program for
 * spank_ddp.so (srun and slurmstepd carry libslurmfull) and in libslurm
 * for ddp-restart, which calls slurm_init first.
 *
 * Errors: returns 0 or -1 with why (NUL-terminated); a refused exclusion
 * or release after the requeue is logged (ddp_error, prefixed with who)
 * and still counts as requeued. Thread safety: not thread-safe (it blocks
 * SIGTERM and SIGINT in the calling thread while it works).
 */
#ifndef DDP_SLURM_REQUEUE_H
#define DDP_SLURM_REQUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "requeue.h"

/* Room for a job's excluded nodes, as Slurm's hostlist form. */
#define DDP_SLURM_EXCLUDE_LEN 4096

/*
 * Requeues batch job jobid without nodes, unless ddp_requeue_allowed
 * (at most max restarts in all) says no. slurmctld changes the excluded
 * nodes of pending jobs only, so: requeue held (the job's own user holds
 * it, so the user may release it), exclude, release. Slurm ends the job's
 * processes, the caller's included, as it requeues the job: SIGTERM and
 * SIGINT wait until the three calls are done. who names the option in
 * the logged lines ("--ddp-check=requeue"). Returns 0 with *restart the
 * job's restart count from now on and note a remark for the user's line
 * ("" or " (--requeue=expedite: Slurm restarts it first)"), or -1 with
 * why.
 */
int ddp_slurm_requeue_without(uint32_t jobid, unsigned max,
			      const struct ddp_requeue_nodes *nodes,
			      const char *who, unsigned *restart, char *note,
			      size_t notelen, char *why, size_t whylen);

#endif
