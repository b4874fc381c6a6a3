/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Requeueing a batch job without nodes through libslurm, for
 * --ddp-check=requeue and --ddp-restart (slurm_requeue.h).
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "slurm_compat.h"

#include "ddp_log.h"
#include "ddp_util.h"
#include "slurm_requeue.h"

/* Slurm's reason for a refused call: its return code where it gives one,
 * else errno (the older calls return -1). */
static const char *
slurm_why(int rc)
{
	return slurm_strerror(rc > 0 ? rc : errno);
}

static int
update_job(uint32_t jobid, char *exclude, uint32_t priority)
{
	job_desc_msg_t desc;

	slurm_init_job_desc_msg(&desc);
	DDP_SLURM_JOB_DESC_SET_ID(&desc, jobid);
	if (exclude)
		desc.exc_nodes = exclude;
	else
		desc.priority = priority;
	return slurm_update_job(&desc);
}

int
ddp_slurm_requeue_without(uint32_t jobid, unsigned max,
			  const struct ddp_requeue_nodes *nodes,
			  const char *who, unsigned *restart, char *note,
			  size_t notelen, char *why, size_t whylen)
{
	job_info_msg_t *msg = NULL;
	const slurm_job_info_t *j;
	struct ddp_requeue_job job;
	char exclude[DDP_SLURM_EXCLUDE_LEN], err[DDP_ERR_LEN];
	sigset_t term, old;
	int rc = -1, r;

	note[0] = '\0';
	r = ddp_slurm_load_job(&msg, jobid, SHOW_DETAIL);
	if (r != SLURM_SUCCESS || !msg || msg->record_count < 1) {
		ddp_errf(why, whylen, "Slurm did not give the job's record: %s",
			 slurm_why(r));
		goto out;
	}
	j = &msg->job_array[0];
	job.batch = j->batch_flag != 0;
	job.requeue = j->requeue != 0;
	job.restarts = j->restart_cnt;
	if (!ddp_requeue_allowed(&job, max, why, whylen))
		goto out;
	if (ddp_requeue_exclude(j->exc_nodes, nodes, exclude, sizeof(exclude),
				err, sizeof(err)) < 0) {
		ddp_errf(why, whylen, "%s", err);
		goto out;
	}
#if DDP_SLURM_HAVE_EXPEDITED_REQUEUE
	if (j->bitflags & EXPEDITED_REQUEUE)
		ddp_fmt(note, notelen,
			" (--requeue=expedite: Slurm restarts it first)");
#endif
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	sigaddset(&term, SIGINT);
	sigprocmask(SIG_BLOCK, &term, &old);
	r = ddp_slurm_requeue(jobid, JOB_REQUEUE_HOLD);
	if (r != SLURM_SUCCESS) {
		ddp_errf(why, whylen, "Slurm refused to requeue the job: %s",
			 slurm_why(r));
		goto unblock;
	}
	*restart = job.restarts + 1;
	rc = 0;
	r = update_job(jobid, exclude, 0);
	if (r != SLURM_SUCCESS)
		ddp_error("%s: Slurm refused to exclude %s: %s (the job may "
			  "land on them again)",
			  who, exclude, slurm_why(r));
	r = update_job(jobid, NULL, INFINITE);
	if (r != SLURM_SUCCESS)
		ddp_error("%s: the job is requeued but held: Slurm refused to "
			  "release it: %s (scontrol release %u releases it)",
			  who, slurm_why(r), jobid);
unblock:
	sigprocmask(SIG_SETMASK, &old, NULL);
out:
	slurm_free_job_info_msg(msg);
	return rc;
}
