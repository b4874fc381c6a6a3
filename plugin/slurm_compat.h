/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * slurm_compat.h: every difference between the Slurm versions slurm-ddp
 * supports (22.05, 24.11, 26.05) that the plugin meets, in one place.
 * Include it after <slurm/slurm.h> and <slurm/spank.h>. The headers of each
 * version were compared for the calls the plugin makes; the rest of the
 * plugin is the same source on every version.
 *
 *   hostlist handle   22.05: hostlist_t is a pointer type;
 *                     23.11 on: hostlist_t is the struct, the functions
 *                     take and return hostlist_t *.
 *   task argv         spank_prepend_task_argv() exists from 23.11.
 *   init failure      26.05 declares slurm_spank_init_failure_mode, a
 *                     plugin's say in what a failing slurm_spank_init
 *                     does; the plugin leaves it to Slurm's default.
 *
 * Unchanged on all three for what the plugin uses: the spank_item values
 * and their argument types, spank_option, spank_context, spank_getenv,
 * spank_setenv, spank_remote, the slurm_info/verbose/debug/error logging
 * calls, slurm_spank_log, and the slurm_hostlist_* symbols exported by
 * the loading programs (srun, sbatch, salloc, slurmstepd).
 */
#ifndef DDP_SLURM_COMPAT_H
#define DDP_SLURM_COMPAT_H

#include <slurm/slurm_version.h>

#ifndef SLURM_VERSION_NUM
#error "slurm_compat.h: <slurm/slurm_version.h> has no SLURM_VERSION_NUM"
#endif

/* The handle slurm_hostlist_create() returns. */
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 11, 0)
typedef hostlist_t *ddp_slurm_hostlist;
#else
typedef hostlist_t ddp_slurm_hostlist;
#endif

/* 1 where spank_prepend_task_argv() can wrap a task's command line. */
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 11, 0)
#define DDP_SLURM_HAVE_PREPEND_TASK_ARGV 1
#else
#define DDP_SLURM_HAVE_PREPEND_TASK_ARGV 0
#endif

#endif
