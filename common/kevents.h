/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What a node's kernel counts of the deaths a task cannot choose: the OOM
 * killer's kills and the memory errors the hardware reported. slurmstepd
 * reads the counts when a --ddp step starts on its node and again when a
 * task dies of a signal; a count that rose in between is the kernel's
 * word, which the task's own signal alone is not (a program chooses how
 * it dies: abort(), a NULL dereference, kill(getpid(), SIGBUS)). The
 * failure record (failure.h) carries the verdict.
 *
 * Sources, below root ("/" on a node; a tree of the same shape in tests):
 *   OOM kills: memory.events' oom_kill of the cgroup that holds the
 *     step (the parent of slurmstepd's own cgroup v2 directory, which
 *     counts its tasks' kills too), else /proc/vmstat's oom_kill (the
 *     whole node);
 *   memory errors: the sum of every EDAC memory controller's ue_count
 *     and ce_count (/sys/devices/system/edac/mc/mc*) and every NUMA
 *     node's memory_failure/total (/sys/devices/system/node/node*).
 * A count the kernel does not expose is absent (have_* 0), never zero:
 * absent counts prove nothing.
 *
 * Errors: none; what cannot be read is absent. Thread safety: reentrant,
 * touches only its arguments and the file system.
 */
#ifndef DDP_KEVENTS_H
#define DDP_KEVENTS_H

#include "failure.h"

struct ddp_kevents {
	int have_oom, have_memory_errors;
	unsigned long long oom_kills, memory_errors;
};

/*
 * Reads the counts below root ("/" for the node itself) into k; cgroup is
 * the cgroup v2 path of the reading process ("/system.slice/..."), as
 * /proc/self/cgroup's "0::" line gives it, or NULL to read that line.
 */
void ddp_kevents_read(const char *root, const char *cgroup,
		      struct ddp_kevents *k);

/*
 * The kernel's word on a task killed by signal between the counts before
 * and after: DDP_KERNEL_OOM for SIGKILL while OOM kills rose,
 * DDP_KERNEL_MEMORY_ERROR for SIGBUS while memory errors rose, else
 * DDP_KERNEL_NONE (a count absent from either reading rose never).
 */
enum ddp_failure_kernel ddp_kevents_verdict(const struct ddp_kevents *before,
					    const struct ddp_kevents *after,
					    int signal);

#endif
