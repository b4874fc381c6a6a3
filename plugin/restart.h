/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * --ddp-restart=N without Slurm: what ddp-restart (plugin/ddp-restart.c)
 * decides after a failed srun. It reads the report the plugin writes in
 * srun when a --ddp step ended on a failed rank (DDP_RESTART_REPORT, one
 * line), decides whether to run the step again and why, counts the
 * allocation's nodes left without the blamed ones, merges them into the
 * user's own -x/--exclude, and builds the next srun's argv. The program
 * around it only runs srun, forwards signals and waits.
 *
 * The report is the failure record that the plugin writes in srun at
 * slurm_spank_exit (common/failure.h formats and parses it). Its cause=
 * decides: node runs the step again without the blamed node; exit,
 * crash, oom and hang run it again on the same nodes when --ddp-restart-on
 * names them (the program failed: another node would fail the same way,
 * so no node is spent on it); stop never.
 *
 * Errors: functions return 0 or -1 with err (NUL-terminated when errlen >
 * 0); they never log. Thread safety: reentrant, they touch only their
 * arguments.
 */
#ifndef DDP_RESTART_H
#define DDP_RESTART_H

#include <stddef.h>

#include "failure.h"
#include "hostlist.h"
#include "requeue.h"

/* The variables between the plugin in srun and ddp-restart. */
#define DDP_RESTART_ENV_SUPERVISOR "DDP_RESTART_SUPERVISOR" /* its pid */
#define DDP_RESTART_ENV_REPORT "DDP_RESTART_REPORT" /* the report's path */
/* The restarts so far, which the tasks see: libddp's ddp_restart_count()
 * (worker/resume.c) reads the same name. */
#define DDP_RESTART_ENV_COUNT "DDP_RESTART_COUNT"
/* The same count for slurmstepd, which sets DDP_RESTART_COUNT in each task
 * from it: srun passes the step SLURM_* alone under --export=NONE. */
#define DDP_RESTART_ENV_STEP_COUNT "SLURM_DDP_RESTART_COUNT"

/* Room for a host list in a report or an --exclude= value. */
#define DDP_RESTART_LIST_LEN 4096
/* The most nodes an allocation's host list may expand to here. */
#define DDP_RESTART_MAX_HOSTS 65536

/* What one supervised run of srun is up to. Fill it with
 * ddp_restart_init; it holds no memory of its own. */
struct ddp_restart {
	unsigned max;			 /* N of --ddp-restart=N */
	unsigned restart_on;		 /* --ddp-restart-on, a bit a cause */
	unsigned done;			 /* restarts so far */
	const char *user_exclude;	 /* the user's -x/--exclude, or NULL */
	const char *alloc_nodes;	 /* SLURM_JOB_NODELIST, or NULL */
	struct ddp_requeue_nodes blamed; /* every node blamed so far */
	/* The next srun's --exclude= value: the user's and the blamed
	 * nodes; "" before the first restart. */
	char exclude[DDP_RESTART_LIST_LEN];
	/* The next srun's --nodelist= value after a restart on the same
	 * nodes (the failed step's), which then replaces --exclude=; ""
	 * otherwise. */
	char nodelist[DDP_RESTART_LIST_LEN];
	/* Set by a decision not to restart because the allocation has too
	 * few nodes left: the job may be requeued without requeue_nodes
	 * (every node blamed so far), and failure says what failed ("rank
	 * 2 was killed by signal 9"). */
	int short_of_nodes;
	struct ddp_requeue_nodes requeue_nodes;
	char failure[128];
};

/* Starts st for --ddp-restart=max and --ddp-restart-on's restart_on
 * (DDP_RESTART_ON_NODE is added); user_exclude and alloc_nodes are
 * borrowed and must outlive st. Cannot fail. */
void ddp_restart_init(struct ddp_restart *st, unsigned max, unsigned restart_on,
		      const char *user_exclude, const char *alloc_nodes);

/*
 * Decides after srun ended with a failure. r is the report, or NULL when
 * there is none (no_report says why, e.g. "srun wrote no report");
 * stopped is non-zero when ddp-restart forwarded a terminating signal
 * (the user or Slurm ended the step: never restarted). Returns 1 to run
 * the step again, with st->done counted, st->exclude the nodes to leave
 * out, or st->nodelist the nodes to run on again (a restart on the same
 * nodes: the record's step_nodes), and line the one line to print ("step
 * restarted (1 of at most 2) without node3, from the allocation's
 * node[1-2,4-5]: rank 2 is unreachable", "step restarted (1 of at most 2) on
 * the same nodes: rank 2 was killed by signal 11 (crash;
 * --ddp-restart-on=crash)"); 0 not to, with line saying why (with the
 * --exclude= to run again with when too few nodes are left); -1 when line does
 * not fit (it then holds the start of the text). When too few nodes are left,
 * it also sets st->short_of_nodes, st->requeue_nodes and st->failure, for a
 * caller that requeues the job instead.
 */
int ddp_restart_decide(struct ddp_restart *st,
		       const struct ddp_failure_record *r,
		       const char *no_report, int stopped, char *line,
		       size_t linelen);

/*
 * The argv of the next srun: argv (argc words, argv[0] srun) with
 * "--nodelist=<nodelist>" when nodelist is not "", else
 * "--exclude=<exclude>", added where srun's options end (ddp_srun_scan's
 * opts_end), after the user's own -x/--exclude or -w/--nodelist, so that
 * srun's last one wins (an --exclude= holds the user's too). Both ""
 * give argv unchanged. Returns a
 * malloc'ed NULL-terminated array (argc + 2 entries) whose words are
 * argv's, except the added one, which is *added (malloc'ed); the caller
 * frees both. NULL with err when argv cannot be scanned or memory runs
 * out.
 */
char **ddp_restart_argv(int argc, char *const *argv, const char *exclude,
			const char *nodelist, char **added, char *err,
			size_t errlen);

#endif
