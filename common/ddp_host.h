/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Facts about the host a process runs on, read from /proc and /sys: what
 * the kernel grants this process, not what Slurm said it would. Slurm-free,
 * so libddp, ddp-check and the prolog can share it.
 *
 * Errors: -1 for "unknown", nothing logged; the caller picks a fallback.
 * Thread safety: reentrant (no state; each call reads the files again).
 */
#ifndef DDP_HOST_H
#define DDP_HOST_H

/*
 * The CPUs a list such as "0-3,8,10-11" names (the kernel's cpuset list
 * format; a trailing newline ends it). -1 when it does not parse or names
 * none.
 */
long ddp_cpu_list_count(const char *list);

/*
 * The CPUs of this process's cpuset cgroup (v1, else v2): the ranks of a
 * job on one host share them, whatever CPU each is bound to (a binding
 * narrows only that rank's affinity). -1 when unknown.
 */
long ddp_cgroup_cpus(void);

#endif
