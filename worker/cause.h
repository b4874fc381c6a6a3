/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rank another rank's failure is blamed on, handed to slurmstepd
 * (cause.c). When a collective or the rendezvous fails because of another
 * rank (its connection lost, a hang survey that names it, an abort whose
 * cause names one: tcp.c), libddp writes one line to the descriptor in
 * DDP_FAILURE_FD, which the slurm-ddp plugin gives each task of a --ddp
 * step:
 *   RANK names NAMED_RANK NAMED_HOST WHY\n
 * (ddp_failure_format_naming, beside the parser slurmstepd uses:
 * common/failure.h). RANK is this rank, WHY "lost", "hang", "unreachable"
 * or "behind": a hang survey named a rank that is still in an earlier
 * call, waiting itself, so that srun follows it to the rank its own
 * naming names.
 * slurmstepd reads it when the task has failed, so that the step's
 * first-failure report names the rank at the root of the failure
 * (common/failure.h).
 *
 * After a stop every rank agreed on (wish.h), the task writes its stop
 * note there instead (wk_cause_stop), which tells slurmstepd that its
 * exit with DDP_EXIT_STOPPED is a clean stop.
 *
 * Only the first naming of a process is written: the first failure is
 * the cause, what follows is its consequence. DDP_FAILURE_FD is "N" or
 * "N:INODE" (the pipe's inode, as the plugin sets it); without it, or
 * when N is no pipe (or another one), nothing is written. The write never
 * blocks (the descriptor is made non-blocking) and a full pipe drops the line.
 * Thread-safe: the first caller wins, atomically.
 */
#ifndef DDP_WK_CAUSE_H
#define DDP_WK_CAUSE_H

#include "stop.h"

/* Names rank (on host) as the cause of self's failure, for why. */
void wk_cause_name(int self, int rank, const char *host, const char *why);

/*
 * Writes this rank's stop note (common/stop.h: ddp_stop_note_format) on
 * the same descriptor, with the same checks, in one write: the task
 * stopped as agreed, not failed. Only the first note of a process is
 * written. Thread-safe like wk_cause_name.
 */
void wk_cause_stop(const struct ddp_stop_note *note);

#endif
