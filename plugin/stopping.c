/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The plugin's side of an agreed stop (common/stop.h): the job's end time
 * for the ranks, and what srun does once every rank stopped.
 *
 * srun reads the job's end time from its record (slurm_load_job's
 * end_time; slurm_compat.h) when the step starts and hands it to the
 * tasks: SLURM_DDP_END_TIME in the step's environment, which slurmstepd
 * turns into each task's DDP_END_TIME (SLURM_*: srun passes those under
 * --export=NONE too). The end time moves while the job runs (scontrol
 * update TimeLimit, a preemption's GraceTime), so srun also keeps the file
 * DDP_END_TIME_FILE_NAME in the job's shared directory current: a thread
 * of srun re-reads the record every DDP_END_TIME_POLL_SECONDS and renames
 * a new file over it when the end time changed; the ranks read the file
 * (stop.h). A thread, not a helper process: it ends with srun whatever
 * kills srun (a helper would outlive a SIGKILLed srun and go on asking
 * slurmctld), it uses srun's own libslurm, configuration and credentials,
 * and srun joins it at its exit. One RPC per poll period and srun.
 *
 * At srun's exit, when the step's reports are clean stops and no failure
 * (failure.c reads them), stopping_next says what happens next and does
 * it: a batch job that may be requeued is requeued (at most ddp.conf's
 * stop_requeue_max times, the count Slurm keeps as SLURM_RESTART_COUNT);
 * one that may not be ends, with how to continue; one Slurm is ending or
 * requeueing already (preemption, cancellation) is left to Slurm.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "slurm_compat.h"

#include "ddp_log.h"
#include "ddp_util.h"
#include "jobdir.h"
#include "plugin.h"
#include "requeue.h"
#include "slurm_requeue.h"
#include "stop.h"

/* srun to slurmstepd, as failure.c's: SLURM_* reach the step under
 * --export=NONE. Empty: none. */
#define END_TIME_STEP_ENV "SLURM_DDP_END_TIME"
#define END_TIME_FILE_STEP_ENV "SLURM_DDP_END_TIME_FILE"

/* The DDP_STOP_BEFORE of this step: --ddp-stop-before, else ddp.conf's. */
static const char *
stop_before(const struct ddp_plugin *p)
{
	return p->opts.stop_before[0] ? p->opts.stop_before
				      : p->conf.stop_before;
}

/*
 * The job's end time from its record into *end (Unix seconds): 1, or 0
 * when the job has no time limit (its record's end time is then a year
 * away, not an end), or -1 when Slurm gave no record.
 */
static int
job_end_time(uint32_t jobid, long long *end)
{
	job_info_msg_t *msg = NULL;
	const slurm_job_info_t *j;
	int rc = -1;

	if (ddp_slurm_load_job(&msg, jobid, SHOW_ALL) != SLURM_SUCCESS ||
	    !msg || msg->record_count < 1)
		goto out;
	j = &msg->job_array[0];
	rc = 0;
	if (j->time_limit == INFINITE || j->time_limit == NO_VAL ||
	    j->end_time <= 0)
		goto out;
	*end = (long long)j->end_time;
	rc = 1;
out:
	slurm_free_job_info_msg(msg);
	return rc;
}

/* Writes end into the watch's file: 0, or -1 with err. */
static int
write_end(const struct ddp_endtime_watch *e, long long end, char *err,
	  size_t errlen)
{
	char text[32];

	if (ddp_fmt(text, sizeof(text), "%lld\n", end) < 0)
		return ddp_errf(err, errlen, "an end time out of range");
	return ddp_write_replace(e->path, text, strlen(text), err, errlen);
}

/* The watch's thread: re-reads the end time every poll period until
 * stopping_local_exit writes to (or closes) the wake pipe. */
static void *
watch_end_time(void *arg)
{
	struct ddp_endtime_watch *e = arg;
	struct pollfd pfd = {.fd = e->wake[0], .events = POLLIN};
	char err[DDP_ERR_LEN];
	double until;
	long long end;
	int left;

	for (;;) {
		until = ddp_now() + DDP_END_TIME_POLL_SECONDS;
		while ((left = (int)((until - ddp_now()) * 1000)) > 0 &&
		       poll(&pfd, 1, left) <= 0)
			;
		if (left > 0)
			return NULL; /* woken: srun is ending */
		if (job_end_time(e->jobid, &end) != 1 || end == e->end)
			continue;
		if (write_end(e, end, err, sizeof(err)) < 0) {
			ddp_verbose("%s", err);
			continue;
		}
		ddp_verbose("job %u's end time is now %lld (%s rewritten)",
			    e->jobid, end, e->path);
		e->end = end;
	}
}

/*
 * The file's path in the job's shared directory, as slurmstepd names and
 * checks it (remote.c): 0, or -1 with why when srun has no such directory
 * (no shared_root, a host without the shared file system, not the user's
 * own).
 */
static int
end_file_path(const struct ddp_plugin *p, uint32_t jobid, char *path,
	      size_t len, char *why, size_t whylen)
{
	char dir[PATH_MAX], rel[128], err[DDP_ERR_LEN], buf[1024];
	struct passwd pw, *res = NULL;
	int rc;

	if (!p->conf.shared_root[0])
		return ddp_errf(why, whylen, "the site has no shared_root");
	if (getpwuid_r(getuid(), &pw, buf, sizeof(buf), &res) != 0 || !res)
		return ddp_errf(why, whylen, "no name for uid %lu",
				(unsigned long)getuid());
	if (ddp_jobdir_shared(&p->conf, pw.pw_name, jobid, dir, sizeof(dir)) <
		    0 ||
	    ddp_fmt(rel, sizeof(rel), "%s/%u", pw.pw_name, jobid) < 0)
		return ddp_errf(why, whylen, "no shared directory name");
	rc = ddp_jobdir_check(p->conf.shared_root, rel, getuid(), err,
			      sizeof(err));
	if (rc == 0)
		return ddp_errf(why, whylen, "%s is not here", dir);
	if (rc < 0)
		return ddp_errf(why, whylen, "%s", err);
	if (ddp_fmt(path, len, "%s/%s", dir, DDP_END_TIME_FILE_NAME) < 0)
		return ddp_errf(why, whylen, "%s: name too long", dir);
	return 0;
}

/* 0 when the directory of path takes new files from this process, or -1
 * with why. */
static int
writable_dir(const char *path, char *why, size_t whylen)
{
	char dir[PATH_MAX];
	char *slash;

	if (ddp_fmt(dir, sizeof(dir), "%s", path) < 0 ||
	    !(slash = strrchr(dir, '/')))
		return ddp_errf(why, whylen, "%s: no directory", path);
	*slash = '\0';
	if (access(dir, W_OK | X_OK) < 0)
		return ddp_errf(why, whylen, "%s: %s", dir, strerror(errno));
	return 0;
}

/* Starts the watch's thread with every signal blocked (srun's own threads
 * take them): 0, or -1 with errno. */
static int
start_watch(struct ddp_endtime_watch *e)
{
	sigset_t all, old;
	int rc;

	if (pipe2(e->wake, O_CLOEXEC) < 0)
		return -1;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(&e->thread, NULL, watch_end_time, e);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		ddp_close(&e->wake[0]);
		ddp_close(&e->wake[1]);
		errno = rc;
		return -1;
	}
	e->running = 1;
	return 0;
}

void
stopping_local_user_init(struct ddp_plugin *p, spank_t sp)
{
	struct ddp_endtime_watch *e = &p->endtime;
	struct ddp_stop_before before;
	char num[32], why[DDP_ERR_LEN];
	uint32_t jobid = 0;
	long long end = 0;
	int have;

	if (!p->opts.enabled || p->conf_error[0] || e->running)
		return;
	/* Always written: a step started inside a rank must not keep its
	 * parent step's values. */
	if (local_srun_setenv(sp, END_TIME_STEP_ENV, "") < 0 ||
	    local_srun_setenv(sp, END_TIME_FILE_STEP_ENV, "") < 0)
		ddp_error("cannot set %s for the step", END_TIME_STEP_ENV);
	if (ddp_stop_before_parse(stop_before(p), &before, why, sizeof(why)) <
		    0 ||
	    before.off)
		return;
	if (spank_get_item(sp, S_JOB_ID, &jobid) != ESPANK_SUCCESS)
		return;
	have = job_end_time(jobid, &end);
	if (have < 0) {
		ddp_verbose("Slurm gave no record of job %u: the ranks get no "
			    "end time",
			    jobid);
		return;
	}
	if (have && (ddp_fmt(num, sizeof(num), "%lld", end) < 0 ||
		     local_srun_setenv(sp, END_TIME_STEP_ENV, num) < 0))
		ddp_error("cannot set %s for the step", END_TIME_STEP_ENV);
	e->jobid = jobid;
	e->end = have ? end : 0;
	/* Without an end time yet, the file is written once there is one;
	 * the directory must take it. */
	if (end_file_path(p, jobid, e->path, sizeof(e->path), why,
			  sizeof(why)) < 0 ||
	    (have && write_end(e, end, why, sizeof(why)) < 0) ||
	    (!have && writable_dir(e->path, why, sizeof(why)) < 0)) {
		if (p->opts.verbose)
			ddp_user("no %s for the ranks: %s (they keep the end "
				 "time the step started with)",
				 DDP_END_TIME_FILE_ENV, why);
		e->path[0] = '\0';
		return;
	}
	if (start_watch(e) < 0) {
		if (p->opts.verbose)
			ddp_user("no %s for the ranks: no thread to keep it "
				 "current (%s)",
				 DDP_END_TIME_FILE_ENV, strerror(errno));
		return;
	}
	if (local_srun_setenv(sp, END_TIME_FILE_STEP_ENV, e->path) < 0)
		ddp_error("cannot set %s for the step", END_TIME_FILE_STEP_ENV);
	if (p->opts.verbose)
		ddp_user("end time %s, kept current in %s every %d s "
			 "(DDP_STOP_BEFORE=%s)",
			 have ? num : "none", e->path,
			 DDP_END_TIME_POLL_SECONDS, stop_before(p));
}

void
stopping_local_exit(struct ddp_plugin *p)
{
	struct ddp_endtime_watch *e = &p->endtime;

	if (!e->running)
		return;
	/* Its end of file wakes the thread, between two polls or in one:
	 * it then returns without another RPC. */
	ddp_close(&e->wake[1]);
	pthread_join(e->thread, NULL);
	ddp_close(&e->wake[0]);
	e->running = 0;
}

/* Copies the job's variable from into the task's to, or unsets to. */
static int
copy_env(spank_t sp, const char *from, const char *to)
{
	char v[PATH_MAX];

	if (remote_jobenv(sp, from, v, sizeof(v)) == 0 && v[0])
		return spank_setenv(sp, to, v, 1) == ESPANK_SUCCESS ? 0 : -1;
	spank_unsetenv(sp, to);
	return 0;
}

void
stopping_task_init(struct ddp_plugin *p, spank_t sp)
{
	if (!p->node.active)
		return;
	if (spank_setenv(sp, DDP_STOP_BEFORE_ENV, stop_before(p), 1) !=
		    ESPANK_SUCCESS ||
	    copy_env(sp, END_TIME_STEP_ENV, DDP_END_TIME_ENV) < 0 ||
	    copy_env(sp, END_TIME_FILE_STEP_ENV, DDP_END_TIME_FILE_ENV) < 0)
		ddp_debug("--ddp: no %s or end time for this task",
			  DDP_STOP_BEFORE_ENV);
}

/* What a job that stopped is (the requeue's view of its record, and
 * whether Slurm is ending it already): 0, or -1 with why. */
static int
stopped_job(uint32_t jobid, struct ddp_requeue_job *job, int *slurm_ends,
	    char *why, size_t whylen)
{
	job_info_msg_t *msg = NULL;
	const slurm_job_info_t *j;
	int r;

	r = ddp_slurm_load_job(&msg, jobid, SHOW_ALL);
	if (r != SLURM_SUCCESS || !msg || msg->record_count < 1) {
		slurm_free_job_info_msg(msg);
		return ddp_errf(why, whylen,
				"Slurm did not give the job's record: %s",
				slurm_strerror(r > 0 ? r : errno));
	}
	j = &msg->job_array[0];
	job->batch = j->batch_flag != 0;
	job->requeue = j->requeue != 0;
	job->restarts = j->restart_cnt;
	/* Preempted (its GraceTime running), being requeued, cancelled or
	 * past its time limit: Slurm's own decision stands. */
	*slurm_ends = j->preempt_time != 0 ||
		      (j->job_state & (JOB_COMPLETING | JOB_REQUEUE)) ||
		      (j->job_state & JOB_STATE_BASE) != JOB_RUNNING;
	slurm_free_job_info_msg(msg);
	return 0;
}

/* How a job that is not requeued goes on. */
#define RESUME                                                   \
	"submit the job again and the program resumes from its " \
	"checkpoint"

void
stopping_next(struct ddp_plugin *p, uint32_t jobid, uint32_t stepid,
	      const char *what)
{
	struct ddp_requeue_nodes *none = NULL;
	struct ddp_requeue_job job;
	char why[DDP_ERR_LEN], note[96];
	unsigned max = p->conf.stop_requeue_max, restart = 0;
	int slurm_ends = 0;
	sigset_t term, old;

	if (stopped_job(jobid, &job, &slurm_ends, why, sizeof(why)) < 0) {
		ddp_user("step %u.%u %s; not requeued: %s; " RESUME, jobid,
			 stepid, what, why);
		return;
	}
	/* srun's own allocation ends with it: not Slurm's decision. */
	if (!job.batch) {
		ddp_requeue_allowed(&job, max, why, sizeof(why));
		ddp_user("step %u.%u %s; not requeued: %s; " RESUME, jobid,
			 stepid, what, why);
		return;
	}
	if (slurm_ends) {
		ddp_user("step %u.%u %s; Slurm is ending or requeueing the "
			 "job itself (preemption, scancel or the time limit): "
			 "left to Slurm",
			 jobid, stepid, what);
		return;
	}
	/* The bound first, in the words of stop_requeue_max. */
	if (job.batch && job.requeue && job.restarts >= max) {
		ddp_user("step %u.%u %s; not requeued: the job was requeued %u "
			 "time%s already, the site's stop_requeue_max is "
			 "%u; " RESUME,
			 jobid, stepid, what, job.restarts,
			 job.restarts == 1 ? "" : "s", max);
		return;
	}
	if (!ddp_requeue_allowed(&job, max, why, sizeof(why))) {
		ddp_user("step %u.%u %s; not requeued: %s; " RESUME, jobid,
			 stepid, what, why);
		return;
	}
	none = calloc(1, sizeof(*none));
	if (!none) {
		ddp_user("step %u.%u %s; not requeued: out of memory; " RESUME,
			 jobid, stepid, what);
		return;
	}
	/* Said first: the requeue ends this srun with the job's processes.
	 * SIGTERM and SIGINT wait until the line and the requeue are done. */
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	sigaddset(&term, SIGINT);
	sigprocmask(SIG_BLOCK, &term, &old);
	ddp_user("step %u.%u %s; the job is requeued (%u of at most %u)", jobid,
		 stepid, what, job.restarts + 1, max);
	if (ddp_slurm_requeue_without(jobid, max, none, "--ddp stop", &restart,
				      note, sizeof(note), why, sizeof(why)) < 0)
		ddp_error("job %u not requeued: %s; " RESUME, jobid, why);
	sigprocmask(SIG_SETMASK, &old, NULL);
	free(none);
}
