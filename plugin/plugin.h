/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The state of spank_ddp.so and its two sides, split as SPANK calls them:
 * local.c runs in srun, sbatch and salloc (checks the request, node mode),
 * remote.c in slurmstepd (the node's plan, each task's environment and
 * binding; the topology in remote_topo.c, --ddp-check in remote_check.c).
 * spank_ddp.c holds the slurm_spank_* hooks and dispatches on
 * spank_context(); the state is one struct it owns and passes by pointer.
 *
 * Messages go through ddp_error/ddp_info/ddp_verbose/ddp_debug
 * (common/ddp_log.h), which spank_ddp.c's sink hands to Slurm's log calls;
 * the only other output, the --ddp-verbose report and --ddp-check=requeue's
 * findings on the user's terminal, goes through ddp_user, which the same
 * sink hands to slurm_spank_log. Slurm-version differences live in
 * slurm_compat.h.
 *
 * Thread safety: none needed; SPANK calls the hooks from one thread.
 */
#ifndef DDP_PLUGIN_H
#define DDP_PLUGIN_H

#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <slurm/spank.h>

#include "args.h"
#include "ddp_conf.h"
#include "failure.h"
#include "gpulist.h"
#include "hostlist.h"
#include "kevents.h"
#include "placement.h"
#include "port.h"
#include "sitekey.h"
#include "stop.h"

/* One node of a --ddp step, in slurmstepd: computed in user_init, used by
 * task_init, freed in exit. */
struct ddp_node {
	int active;
	char error[DDP_ERR_LEN]; /* raised from task_init (22.05) */
	uint32_t jobid, stepid, nodeid, nnodes, local_tasks;
	unsigned *counts; /* tasks per node of the step, malloc'ed */
	char host[DDP_HOSTNAME_MAX + 1];
	char master[DDP_HOSTNAME_MAX + 1];
	long port; /* 0: keep the user's MASTER_PORT */
	/* ddp-check's rendezvous port (ddp_port_choose_check), never
	 * MASTER_PORT; 0 when the step runs no check. */
	long check_port;
	char port_note[160];
	/* The site key (sitekey.h, ddp.conf's port_key), read as root in
	 * init_post_opt and wiped once
	 * the port is chosen: 1 loaded, 0 not read (port_key = ""), -1
	 * unusable (port_key_error says why; raised only when needed). */
	int port_key_state;
	struct ddp_site_key port_key;
	char port_key_error[DDP_ERR_LEN];
	/* The step's key file (stepkey.h), made as root in init_post_opt
	 * and removed in exit: its name below
	 * <state_dir>/step-keys and the path exported as DDP_STEP_KEY_FILE;
	 * "" when the step has none. */
	char step_key_name[64];
	char step_key_path[PATH_MAX];
	char user[65];
	/* The kernel's counts when the step started on this node
	 * (failure_user_init), for the word on a task's signal death. */
	struct ddp_kevents kevents;
	enum ddp_bind bind;
	struct ddp_topo *topo;
	char topo_note[1280]; /* where topo came from (remote_post_opt) */
	double topo_ms;	      /* and how long that took */
	struct ddp_plan *plan;
	char cpu_note[256];
	char shared_dir[PATH_MAX];  /* checked DDP_SHARED_DIR, or "" */
	char scratch_dir[PATH_MAX]; /* checked DDP_SCRATCH_DIR, or "" */
	struct ddp_gpu_sel gpus;    /* what every rank sees */
	/* PyTorch's flight recorder (flightrec.h): 1 when every rank gets its
	 * variables, and why not, for the node's first rank, or "". */
	int flightrec;
	char flightrec_note[DDP_ERR_LEN];
	/* ddp-check's findings about this node, from its first task to
	 * slurmstepd (remote_exit records them): a pipe made in user_init,
	 * both ends close-on-exec and non-blocking; -1 when closed. */
	int verdict_rfd, verdict_wfd;
	uid_t uid; /* the job's user */
	/* 1 once a task of this node failed: slurmstepd ends the step and
	 * reports to srun for its first failed task alone (failure.c). */
	int failure_seen;
	/* The tasks that task_init failed, before their program started
	 * (failure.c): they write their local id into a pipe made in
	 * user_init (both ends close-on-exec, non-blocking; -1 when
	 * closed), which slurmstepd reads into prelaunch_failed (one flag
	 * per local task) at task_exit. The plugin said why already, and
	 * --ddp-check=requeue's rank 0 must not be killed mid-requeue. */
	int prelaunch_rfd, prelaunch_wfd;
	unsigned char *prelaunch_failed;
	/* What the tasks' libddp names as the rank at fault (failure.c,
	 * DDP_FAILURE_FD in libddp(3)): a pipe made in user_init, both ends
	 * non-blocking; the write end loses close-on-exec in each task's
	 * task_init alone. -1 when closed. */
	int cause_rfd, cause_wfd;
	/* What failure.c read from that pipe so far: the first naming
	 * (cause_named > 0), the stop notes not yet taken by their task's
	 * exit (one slot per local task), and a line not yet whole. */
	int cause_named;
	struct ddp_failure cause_naming;
	struct ddp_stop_note *stop_notes;
	size_t nstop_notes;
	char cause_buf[DDP_STOP_NOTE_MAX + DDP_FAILURE_NAMING_MAX];
	size_t cause_len;
};

/* srun's side of a --ddp step's first failure (failure.c): the socket the
 * nodes' slurmstepd report to, open from local_user_init to exit, and the
 * nonce that tells their reports from forged ones. */
struct ddp_failure_watch {
	int listen_fd; /* -1 when closed */
	char nonce[DDP_FAILURE_NONCE_HEX + 1];
	uint32_t jobid, stepid;
	int ends_step;	 /* 1: kill_on_bad_exit is on and no -K0 */
	uint32_t ntasks; /* the step's tasks, 0 when Slurm did not say */
};

/* srun's keeper of the job's end time for the ranks (stopping.c): the
 * thread that rewrites path while it changes, from local_user_init to
 * exit, woken to end by closing wake[1]. end and the file are the
 * thread's alone once it runs. */
struct ddp_endtime_watch {
	int running; /* the thread was started and not yet joined */
	pthread_t thread;
	int wake[2]; /* -1 when closed */
	uint32_t jobid;
	long long end; /* what path holds, 0 for nothing yet */
	char path[PATH_MAX];
};

struct ddp_plugin {
	struct ddp_opts opts;
	struct ddp_conf conf;
	char topology_xml[PATH_MAX]; /* plugstack topology=, or "" */
	/* A bad ddp.conf or plugstack argument, kept until --ddp is used:
	 * the plugin is required, so failing slurm_spank_init would break
	 * every srun, sbatch and salloc on the cluster, not only --ddp. */
	char conf_error[DDP_ERR_LEN];
	/* Ranks per node that local_init set (options are not parsed yet
	 * when it runs, so local_post_opt reports it for --ddp-verbose). */
	long preset_per_node;
	/* The allocation's SLURM_GPUS_PER_NODE that local_init kept from
	 * this srun (ddp_srun_alloc_gpus_conflict), or "". */
	char dropped_gpus_per_node[32];
	/* srun: 1 once share_cpus (local.c) decided the step's CPUs, and what
	 * it decided, for --ddp-verbose ("" when it left Slurm's). */
	int cpus_decided;
	char cpus_note[256];
	/* A request share_cpus knows srun would refuse, raised by
	 * local_post_opt, or "". */
	char cpus_error[DDP_ERR_LEN];
	/* srun's -K/--kill-on-bad-exit or SLURM_KILL_BAD_EXIT as
	 * local_post_opt scanned it: 1, 0, or -1 when neither says. */
	int kill_bad_exit;
	struct ddp_failure_watch watch;
	struct ddp_endtime_watch endtime;
	struct ddp_node node;
};

/* Fails a use of --ddp while the site configuration is broken: logs why
 * and returns -1. */
int plugin_refuse_bad_conf(const struct ddp_plugin *p);

/*
 * srun, from slurm_spank_init (before srun reads its options), when --ddp
 * is literally on the command line: unsets the allocation's
 * SLURM_GPUS_PER_NODE when the command line asks for GPUs in total or per
 * task (ddp_srun_alloc_gpus_conflict), and sets up node mode without a
 * second srun by setting SLURM_NTASKS_PER_NODE. Quiet on failure;
 * local_post_opt decides.
 */
void local_init(struct ddp_plugin *p);

/*
 * srun, from slurm_spank_init_post_opt: checks the options and the site
 * configuration, decides node or task mode, and re-executes srun with
 * --ntasks-per-node for node mode, or without the allocation's
 * SLURM_GPUS_PER_NODE, when local_init could not. Returns 0,
 * or -1 (logged) to make srun fail before anything starts.
 */
int local_post_opt(struct ddp_plugin *p);

/*
 * srun, from slurm_spank_init_post_opt before local_post_opt: with
 * --ddp-restart=N (N > 0, within ddp.conf's restart_max) and unless this
 * srun is the one ddp-restart runs, replaces srun by ddp-restart
 * (restart_path) with srun's own argv and the environment srun started
 * with, before any step exists. Returns 0 to go on (nothing to do, or the
 * supervisor's own srun), or -1 (logged) to make srun fail: a restart
 * count above the ceiling, no allocation (SLURM_JOB_ID unset), or the
 * supervisor could not run. Does not return when it ran.
 */
int local_restart(const struct ddp_plugin *p);

/* sbatch and salloc, from slurm_spank_init_post_opt: refuses --ddp
 * before anything is queued when the site configuration is broken. */
int local_alloc_post_opt(struct ddp_plugin *p);

/*
 * slurmstepd, from slurm_spank_init_post_opt (as root, options known):
 * reads the site's port key for a --ddp step, which the job's user
 * cannot read. A key problem is kept for remote_user_init. Cannot fail.
 */
void remote_load_port_key(struct ddp_plugin *p);

/*
 * slurmstepd, from slurm_spank_init_post_opt (as root), after
 * remote_load_port_key: derives the step's key from the site key and
 * writes it to a root-owned file only the job's user (and root) can
 * read (stepkey.h), for task_init to export as DDP_STEP_KEY_FILE. Does
 * nothing without a port key; a failure is kept for remote_task_init,
 * which fails the step.
 */
void remote_step_key(struct ddp_plugin *p, spank_t sp);

/*
 * slurmstepd, from slurm_spank_init_post_opt (root): loads the node's
 * topology for a --ddp step through the site's topology cache, rewriting
 * it when missing or stale (remote_topo.c). Leaves p->node.topo NULL on
 * failure, for remote_user_init to discover and report.
 */
void remote_post_opt(struct ddp_plugin *p, spank_t sp);

/*
 * slurmstepd, from slurm_spank_user_init: reads the step's layout, port,
 * directories and topology and computes the node's plan. Problems are
 * kept in p->node.error and raised from remote_task_init, where 22.05
 * fails the step on them. Returns 0.
 */
int remote_user_init(struct ddp_plugin *p, spank_t sp);

/* slurmstepd, from slurm_spank_task_init: binds the task and sets its
 * rank environment. Returns 0, or -1 (logged) to fail the task. */
int remote_task_init(struct ddp_plugin *p, spank_t sp);

/* srun: sets name=value in srun's environment, which srun merges into the
 * step's after slurm_spank_local_user_init. 0, or -1. */
int local_srun_setenv(spank_t sp, const char *name, const char *value);

/* slurmstepd: copies the job's environment variable name into buf (size
 * bytes); 0 when it is set and fits, else -1 with buf "". */
int remote_jobenv(spank_t sp, const char *name, char *buf, size_t size);

/* slurmstepd, from slurm_spank_exit (as root): records the check's
 * verdicts about this node (<state_dir>/verdicts), removes the step's key
 * file and frees the node's state. */
void remote_exit(struct ddp_plugin *p);

/*
 * srun, from slurm_spank_local_user_init (the step exists, its tasks are
 * not launched): for a --ddp step, listens on an ephemeral TCP port and
 * exports SLURM_DDP_FAILURE_REPORT=host:port and SLURM_DDP_FAILURE_NONCE to the
 * step (empty when it cannot listen), and SLURM_DDP_KILL_ON_BAD_EXIT, 0 when
 * the user opted out with -K0, else 1 (failure.c). A failure is logged and only
 * costs the first-failure line. Returns 0.
 */
int failure_local_user_init(struct ddp_plugin *p, spank_t sp);

/*
 * slurmstepd, from slurm_spank_user_init after remote_user_init: makes
 * the pipe of the tasks that fail before their program starts, for a
 * --ddp step, and the pipe of DDP_FAILURE_FD. Without the first such a
 * task counts as a failed rank; without the second the report carries no
 * naming. Cannot fail.
 */
void failure_user_init(struct ddp_plugin *p);

/* A task, from slurm_spank_task_init when remote_task_init failed: tells
 * slurmstepd that this task ends before its program started. */
void failure_task_init_failed(struct ddp_plugin *p, spank_t sp);

/* A task, from slurm_spank_task_init when remote_task_init succeeded:
 * hands the program the write end of DDP_FAILURE_FD's pipe, across exec,
 * and DDP_RESTART_COUNT from ddp-restart's SLURM_DDP_RESTART_COUNT.
 * Cannot fail: without them the program names nobody, and counts no
 * restart. */
void failure_task_init(struct ddp_plugin *p, spank_t sp);

/* slurmstepd, from slurm_spank_exit: closes the pipes and frees what
 * failure_user_init made. */
void failure_remote_exit(struct ddp_plugin *p);

/*
 * srun, from slurm_spank_exit: takes the reports waiting on the socket
 * (never blocking more than 2 s in all), keeps those with the step's
 * nonce, prints one line naming the cause of the step's failure (the
 * earliest report, or the rank a task named: failure.h) and, when
 * DDP_RESTART_REPORT names a file, writes its record there
 * (failure.h). Closes the socket. Cannot fail.
 */
void failure_local_exit(struct ddp_plugin *p);

/*
 * slurmstepd, from slurm_spank_task_exit (as root): at this node's first
 * task of a --ddp step that exited non-zero or was killed once its
 * program had started (not a task that task_init failed), ends the whole
 * step with SIGKILL through slurmctld (unless kill_on_bad_exit = no or
 * the user's -K0) and reports the failure to srun, with the first naming
 * the node's tasks wrote to DDP_FAILURE_FD and the kernel's word on a
 * signal death (kevents.h); a SIGBUS the kernel's memory errors explain
 * leaves the verdict "memory-error" in state_dir (verdict.h). Bounded: Slurm's
 * MessageTimeout for the kill, 2 s for the report. Errors are logged.
 * Returns 0.
 */
int failure_task_exit(struct ddp_plugin *p, spank_t sp);

/* --ddp-check as given, else the site's check (remote_check.c). */
enum ddp_check remote_check_mode(const struct ddp_plugin *p);

/*
 * slurmstepd, in each task from remote_task_init once its environment is
 * set: unless the check is off, runs ddp-check on the step's check port
 * (remote_check.c), waits for it, hands the node's first task's findings
 * about this node to slurmstepd and, with --ddp-check=requeue, requeues
 * the job from the step's global rank 0 (plugin_requeue). Returns 0 to
 * start the program, or -1 (logged) to end the task.
 */
int remote_check_run(const struct ddp_plugin *p, spank_t sp, uint32_t local,
		     long global);

/*
 * slurmstepd, from remote_exit (as root): closes the verdict pipe and
 * appends the findings the node's first task sent about this node to
 * <state_dir>/verdicts with the job, step, user and time Slurm gave.
 * Logs what it skips; cannot fail.
 */
void remote_check_record(struct ddp_plugin *p);

/*
 * A task of a --ddp-check=requeue step, as the job's user, on the step's
 * global rank 0 after ddp-check failed: text (len bytes) is ddp-check's
 * --verdict-fd output. Prints one line per finding, then requeues a batch
 * job that may be requeued without the nodes named (requeue.c), or says
 * which --exclude= to retry with and why it was not requeued. Logs
 * everything; cannot fail.
 */
void plugin_requeue(const struct ddp_plugin *p, const char *text, size_t len);

/*
 * srun, from slurm_spank_local_user_init for a --ddp step whose
 * DDP_STOP_BEFORE is not 0: hands the tasks the job's end time
 * (SLURM_DDP_END_TIME, DDP_END_TIME in each task) and, where srun can
 * write to the job's shared directory, keeps DDP_END_TIME_FILE_NAME
 * there current from a thread (SLURM_DDP_END_TIME_FILE, else unset and
 * said under --ddp-verbose). Cannot fail: the ranks then stop on signals
 * alone.
 */
void stopping_local_user_init(struct ddp_plugin *p, spank_t sp);
/* srun, from slurm_spank_exit before failure_local_exit: stops and joins
 * the end time's thread. */
void stopping_local_exit(struct ddp_plugin *p);
/* A task, from slurm_spank_task_init when remote_task_init succeeded:
 * DDP_STOP_BEFORE (--ddp-stop-before, else ddp.conf's stop_before),
 * DDP_END_TIME and DDP_END_TIME_FILE from srun's, unset when srun gave
 * none. Cannot fail. */
void stopping_task_init(struct ddp_plugin *p, spank_t sp);
/*
 * srun, from failure_local_exit when every report of step jobid.stepid
 * is a clean stop: prints "ddp: step J.S <what>; <what comes next>" and
 * does it: requeues a batch job that may be requeued (ddp.conf's
 * stop_requeue_max), tells how to continue a job that may not be, and
 * leaves a job that Slurm is ending or requeueing to Slurm.
 */
void stopping_next(struct ddp_plugin *p, uint32_t jobid, uint32_t stepid,
		   const char *what);

#endif
