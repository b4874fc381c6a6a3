/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * --ddp-check=requeue's Slurm side: in the step's global rank 0, as the
 * job's user, after a failed check. The decisions are common/requeue.c's;
 * here the job's record is read and the job requeued through libslurm.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
#include <slurm/spank.h>

#include "slurm_compat.h"

#include "ddp_log.h"
#include "ddp_util.h"
#include "plugin.h"
#include "requeue.h"

/* Room for a job's excluded nodes, as Slurm's hostlist form. */
#define EXCLUDE_LEN 4096

/* Slurm's reason for a refused call: its return code where it gives one,
 * else errno (the older calls return -1). */
static const char *
slurm_why(int rc)
{
	return slurm_strerror(rc > 0 ? rc : errno);
}

/* Shows each finding on the job's output and collects the nodes (arg). */
static void
print_verdict(void *arg, const struct ddp_verdict *v)
{
	char line[DDP_VERDICT_LINE_MAX + 64];

	if (ddp_requeue_describe(v, line, sizeof(line)) == 0)
		ddp_user("%s", line);
	ddp_requeue_collect(arg, v);
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

/*
 * Requeues the job without nodes. slurmctld changes the excluded nodes of
 * pending jobs only, so: requeue held (the job's own user holds it, so
 * the user may release it), exclude, release. Slurm ends this task as it
 * requeues the job: SIGTERM waits until the three calls are done.
 * Returns 0 with *restart set, or -1 with why.
 */
static int
requeue_job(const struct ddp_plugin *p, const struct ddp_requeue_nodes *nodes,
	    unsigned *restart, char *note, size_t notelen, char *why,
	    size_t whylen)
{
	const struct ddp_node *n = &p->node;
	job_info_msg_t *msg = NULL;
	const slurm_job_info_t *j;
	struct ddp_requeue_job job;
	char exclude[EXCLUDE_LEN], err[DDP_ERR_LEN];
	sigset_t term, old;
	int rc = -1, r;

	note[0] = '\0';
	r = ddp_slurm_load_job(&msg, n->jobid, SHOW_DETAIL);
	if (r != SLURM_SUCCESS || !msg || msg->record_count < 1) {
		ddp_errf(why, whylen, "Slurm did not give the job's record: %s",
			 slurm_why(r));
		goto out;
	}
	j = &msg->job_array[0];
	job.batch = j->batch_flag != 0;
	job.requeue = j->requeue != 0;
	job.restarts = j->restart_cnt;
	if (!ddp_requeue_allowed(&job, p->conf.check_requeue_max, why, whylen))
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
	r = ddp_slurm_requeue(n->jobid, JOB_REQUEUE_HOLD);
	if (r != SLURM_SUCCESS) {
		ddp_errf(why, whylen, "Slurm refused to requeue the job: %s",
			 slurm_why(r));
		goto unblock;
	}
	*restart = job.restarts + 1;
	rc = 0;
	r = update_job(n->jobid, exclude, 0);
	if (r != SLURM_SUCCESS)
		ddp_error("--ddp-check=requeue: Slurm refused to exclude %s: "
			  "%s (the job may land on them again)",
			  exclude, slurm_why(r));
	r = update_job(n->jobid, NULL, INFINITE);
	if (r != SLURM_SUCCESS)
		ddp_error("--ddp-check=requeue: the job is requeued but held: "
			  "Slurm refused to release it: %s (scontrol release "
			  "%u releases it)",
			  slurm_why(r), n->jobid);
unblock:
	sigprocmask(SIG_SETMASK, &old, NULL);
out:
	slurm_free_job_info_msg(msg);
	return rc;
}

void
plugin_requeue(const struct ddp_plugin *p, const char *text, size_t len)
{
	const struct ddp_node *n = &p->node;
	struct ddp_requeue_nodes *nodes = NULL;
	char list[EXCLUDE_LEN], why[DDP_ERR_LEN], note[96], bad_why[128];
	unsigned restart = 0;
	size_t bad = 0;

	nodes = calloc(1, sizeof(*nodes));
	if (!nodes) {
		ddp_error("--ddp-check=requeue: out of memory");
		return;
	}
	ddp_verdict_scan(text, len, print_verdict, nodes, &bad, bad_why,
			 sizeof(bad_why));
	if (bad)
		ddp_info("--ddp-check: %zu verdict line%s skipped: %s", bad,
			 bad == 1 ? "" : "s", bad_why);
	if (!nodes->n) {
		ddp_error("--ddp-check=requeue: the check named no node: the "
			  "job is not requeued");
		goto out;
	}
	if (ddp_requeue_node_list(nodes, list, sizeof(list)) < 0) {
		ddp_error("--ddp-check=requeue: too many nodes named to list");
		goto out;
	}
	if (requeue_job(p, nodes, &restart, note, sizeof(note), why,
			sizeof(why)) == 0) {
		if (ddp_fmt(why, sizeof(why),
			    "job %u requeued (restart %u of at most %u) "
			    "without %s%s",
			    n->jobid, restart, p->conf.check_requeue_max, list,
			    note) == 0)
			ddp_user("%s", why);
		goto out;
	}
	ddp_error("retry with: --exclude=%s (not requeued: %s)", list, why);
out:
	free(nodes);
}
