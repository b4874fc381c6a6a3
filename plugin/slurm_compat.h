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
 *   srun's -c input   22.05 and 23.02 read SRUN_CPUS_PER_TASK and ignore
 *                     the SLURM_CPUS_PER_TASK that sbatch and salloc
 *                     export; 23.11 on read SLURM_CPUS_PER_TASK again.
 *                     -c implies --exact on all three.
 *   init failure      26.05 declares slurm_spank_init_failure_mode, a
 *                     plugin's say in what a failing slurm_spank_init
 *                     does; the plugin leaves it to Slurm's default.
 *   job ids in calls  26.05 names a job by slurm_step_id_t in
 *                     slurm_load_job and slurm_requeue (its plain-id
 *                     wrappers only under SLURM_BACKWARD_COMPAT) and in
 *                     job_desc_msg_t (step_id, no job_id field):
 *                     ddp_slurm_load_job, ddp_slurm_requeue,
 *                     DDP_SLURM_JOB_DESC_SET_ID.
 *   ending a step     slurm_kill_job_step signals every task of a step
 *                     through slurmctld: 22.05 (job, step, signal);
 *                     24.11 (job, step, signal, flags); 26.05
 *                     (slurm_step_id_t *, signal, flags):
 *                     ddp_slurm_kill_job_step.
 *   expedited requeue 25.11 added sbatch --requeue=expedite, the job flag
 *                     EXPEDITED_REQUEUE in job_info_t.bitflags:
 *                     DDP_SLURM_HAVE_EXPEDITED_REQUEUE.
 *   remaining time    slurm_get_rem_time takes the job id up to 25.11
 *                     and a slurm_step_id_t in 26.05 (its plain-id
 *                     wrapper, slurm_get_rem_time_jid, only under
 *                     SLURM_BACKWARD_COMPAT); it also rounds to what is
 *                     left now. The plugin does not call it: the job's end
 *                     time (stopping.c) is slurm_load_job's end_time,
 *                     through ddp_slurm_load_job, the same on all three.
 *
 * Unchanged on all three for what the plugin uses: the spank_item values
 * and their argument types, spank_option, spank_context, spank_getenv,
 * spank_setenv, spank_remote, the slurm_info/verbose/debug/error logging
 * calls, slurm_spank_log, and the slurm_hostlist_* symbols exported by
 * the loading programs (srun, sbatch, salloc, slurmstepd); in a task,
 * before exec (--ddp-check=requeue), slurm_load_job, slurm_requeue with
 * JOB_REQUEUE_HOLD, slurm_init_job_desc_msg, slurm_update_job (exc_nodes,
 * priority), slurm_free_job_info_msg and slurm_strerror, with the
 * job_info_t fields batch_flag, requeue, restart_cnt and exc_nodes; in srun
 * (stopping.c), the same calls and the job_info_t fields end_time,
 * time_limit (INFINITE, NO_VAL), preempt_time and job_state
 * (JOB_STATE_BASE, JOB_RUNNING, JOB_COMPLETING, JOB_REQUEUE); in srun,
 * slurm_load_partitions, slurm_load_node and
 * slurm_populate_node_partitions, with the partition_info_t
 * fields name, flags (PART_FLAG_DEFAULT) and job_defaults_str and the
 * node_info_t fields name, partitions, gres, cpus, cpus_efctv, sockets
 * (per node), cores (per socket), threads and core_spec_cnt.
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

/* The variable srun reads as -c/--cpus-per-task. */
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 11, 0)
#define DDP_SLURM_SRUN_CPUS_PER_TASK_ENV "SLURM_CPUS_PER_TASK"
#else
#define DDP_SLURM_SRUN_CPUS_PER_TASK_ENV "SRUN_CPUS_PER_TASK"
#endif

/* slurm_load_job and slurm_requeue of one job by its id; and the job a
 * job_desc_msg_t updates. */
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(26, 5, 0)
static inline slurm_step_id_t
ddp_slurm_job(uint32_t job_id)
{
	slurm_step_id_t id = SLURM_STEP_ID_INITIALIZER;

	id.job_id = job_id;
	return id;
}
#define ddp_slurm_load_job(resp, id, flags) \
	slurm_load_job((resp), ddp_slurm_job(id), (flags))
#define ddp_slurm_requeue(id, flags) slurm_requeue(ddp_slurm_job(id), (flags))
#define DDP_SLURM_JOB_DESC_SET_ID(desc, id)                  \
	do {                                                 \
		(desc)->step_id = SLURM_STEP_ID_INITIALIZER; \
		(desc)->step_id.job_id = (id);               \
	} while (0)
#else
#define ddp_slurm_load_job(resp, id, flags) \
	slurm_load_job((resp), (id), (flags))
#define ddp_slurm_requeue(id, flags) slurm_requeue((id), (flags))
#define DDP_SLURM_JOB_DESC_SET_ID(desc, id) ((desc)->job_id = (id))
#endif

/* slurm_kill_job_step of step of job with sig and no flags: Slurm's error
 * code (SLURM_SUCCESS, or SLURM_ERROR with errno). */
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(26, 5, 0)
static inline int
ddp_slurm_kill_job_step(uint32_t job, uint32_t step, uint16_t sig)
{
	slurm_step_id_t id = SLURM_STEP_ID_INITIALIZER;

	id.job_id = job;
	id.step_id = step;
	return slurm_kill_job_step(&id, sig, 0);
}
#elif SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(24, 11, 0)
#define ddp_slurm_kill_job_step(job, step, sig) \
	slurm_kill_job_step((job), (step), (sig), 0)
#else
#define ddp_slurm_kill_job_step(job, step, sig) \
	slurm_kill_job_step((job), (step), (sig))
#endif

/* 1 where a job can carry sbatch --requeue=expedite (EXPEDITED_REQUEUE). */
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 11, 0)
#define DDP_SLURM_HAVE_EXPEDITED_REQUEUE 1
#else
#define DDP_SLURM_HAVE_EXPEDITED_REQUEUE 0
#endif

#endif
