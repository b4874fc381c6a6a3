/* SPDX-License-Identifier: BSD-3-Clause */
/* --ddp-restart's decisions, without Slurm: the report, the nodes left,
 * the merged exclusion and the next srun's argv (restart.h). */
#include "restart.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "ddp_util.h"
#include "stop.h"

void
ddp_restart_init(struct ddp_restart *st, unsigned max, unsigned restart_on,
		 const char *user_exclude, const char *alloc_nodes)
{
	memset(st, 0, sizeof(*st));
	st->max = max;
	st->restart_on = restart_on | DDP_RESTART_ON_NODE;
	st->user_exclude =
		user_exclude && user_exclude[0] ? user_exclude : NULL;
	st->alloc_nodes = alloc_nodes;
}

/* "rank 2 was killed by signal 9", "rank 2 exited with status 1", "rank 2
 * hangs", "rank 2 was killed by the kernel's OOM killer". */
static int
describe(const struct ddp_failure_record *r, char *buf, size_t len)
{
	char who[32] = "a rank";

	if (r->rank >= 0 && ddp_fmt(who, sizeof(who), "rank %ld", r->rank) < 0)
		return -1;
	/* A hang's how is the step's end or the naming rank's exit. */
	if (r->why[0])
		return ddp_fmt(buf, len, "%s %s", who,
			       ddp_failure_why_words(r->why));
	if (r->cause == DDP_CAUSE_OOM)
		return ddp_fmt(buf, len,
			       "%s was killed by the kernel's OOM killer", who);
	if (r->signalled)
		return ddp_fmt(buf, len, "%s was killed by signal %ld", who,
			       r->code);
	return ddp_fmt(buf, len, "%s exited with status %ld", who, r->code);
}

/* Adds the nodes of list (checked by the report's parse) to nodes, each
 * once. */
static void
add_blamed(struct ddp_requeue_nodes *nodes, const char *list)
{
	struct ddp_hostlist hl = {0};
	char why[256];
	size_t i, k;

	if (ddp_hostlist_parse(list, DDP_REQUEUE_MAX_NODES, &hl, why,
			       sizeof(why)) < 0)
		return;
	for (i = 0; i < hl.n && nodes->n < DDP_REQUEUE_MAX_NODES; i++) {
		for (k = 0; k < nodes->n; k++)
			if (!strcmp(nodes->name[k], hl.hosts[i]))
				break;
		if (k == nodes->n &&
		    ddp_fmt(nodes->name[k], sizeof(nodes->name[k]), "%s",
			    hl.hosts[i]) == 0)
			nodes->n++;
	}
	ddp_hostlist_free(&hl);
}

/* The nodes of alloc not in exclude, in Slurm's short form into left;
 * *count receives how many. Returns 0, or -1 with why. */
static int
nodes_left(const char *alloc, const char *exclude, char *left, size_t len,
	   size_t *count, char *why, size_t whylen)
{
	struct ddp_hostlist all = {0}, out = {0}, keep = {0};
	size_t i, k;
	int rc = -1;

	if (ddp_hostlist_parse(alloc, DDP_RESTART_MAX_HOSTS, &all, why,
			       whylen) < 0 ||
	    ddp_hostlist_parse(exclude, DDP_RESTART_MAX_HOSTS, &out, why,
			       whylen) < 0)
		goto out;
	keep.hosts = calloc(all.n ? all.n : 1, sizeof(*keep.hosts));
	if (!keep.hosts) {
		ddp_errf(why, whylen, "out of memory");
		goto out;
	}
	for (i = 0; i < all.n; i++) {
		for (k = 0; k < out.n; k++)
			if (!strcmp(all.hosts[i], out.hosts[k]))
				break;
		if (k == out.n)
			keep.hosts[keep.n++] = all.hosts[i];
	}
	*count = keep.n;
	if (ddp_hostlist_format(&keep, left, len) < 0) {
		ddp_errf(why, whylen, "the nodes left do not fit in a line");
		goto out;
	}
	rc = 0;
out:
	/* keep borrows all's names. */
	free(keep.hosts);
	ddp_hostlist_free(&all);
	ddp_hostlist_free(&out);
	return rc;
}

/* Writes the line of a decision and returns verdict, or -1 when the line
 * does not fit. */
static int __attribute__((format(printf, 4, 5)))
answer(int verdict, char *line, size_t linelen, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, linelen, fmt, ap);
	va_end(ap);
	return n < 0 || (size_t)n >= linelen ? -1 : verdict;
}

/* The program's words for a cause other than node: what ddp-restart says
 * of it when it is not run again. */
static const char *
program_words(enum ddp_failure_cause cause)
{
	switch (cause) {
	case DDP_CAUSE_EXIT:
		return "the program's own exit";
	case DDP_CAUSE_CRASH:
		return "a crash of the program";
	case DDP_CAUSE_OOM:
		return "the job's memory";
	case DDP_CAUSE_HANG:
		return "a hang of the program";
	default:
		return "the step's end by a signal";
	}
}

/* ddp_restart_decide for a cause that blames the program (exit, crash,
 * oom, hang) or nobody (stop): the same nodes again, when the user asked
 * for it. */
static int
same_nodes(struct ddp_restart *st, const struct ddp_failure_record *r,
	   const char *what, char *line, size_t linelen)
{
	const char *name = ddp_failure_cause_name(r->cause);

	/* An agreed stop (stop.h): srun said what comes next. */
	if (r->cause == DDP_CAUSE_STOP && !r->signalled &&
	    r->code == DDP_STOP_EXIT_STATUS)
		return answer(0, line, linelen,
			      "not restarted: the step stopped on every rank, "
			      "checkpointed (a stop is never restarted)");
	if (r->cause == DDP_CAUSE_STOP)
		return answer(0, line, linelen,
			      "not restarted: %s, which ends a step on purpose "
			      "(scancel, a time limit)",
			      what);
	if (!(st->restart_on & (1u << r->cause)))
		return answer(0, line, linelen,
			      "not restarted: %s, %s, which blames no node "
			      "(--ddp-restart-on=%s restarts it)",
			      what, program_words(r->cause), name);
	if (st->done >= st->max)
		return answer(0, line, linelen,
			      "not restarted: %s (%s), and no restart is left "
			      "(%u of at most %u used)",
			      what, name, st->done, st->max);
	/* Slurm would otherwise pick any of the allocation's nodes. */
	memcpy(st->nodelist, r->step_nodes, sizeof(st->nodelist));
	st->done++;
	return answer(1, line, linelen,
		      "step restarted (%u of at most %u) on the same nodes: "
		      "%s (%s; --ddp-restart-on=%s)",
		      st->done, st->max, what, name, name);
}

int
ddp_restart_decide(struct ddp_restart *st, const struct ddp_failure_record *r,
		   const char *no_report, int stopped, char *line,
		   size_t linelen)
{
	struct ddp_requeue_nodes blamed;
	char what[128], why[DDP_ERR_LEN];
	char exclude[DDP_RESTART_LIST_LEN], left[DDP_RESTART_LIST_LEN];
	size_t count = 0;

	if (stopped)
		return answer(0, line, linelen,
			      "not restarted: the step was stopped by a "
			      "signal that ddp-restart passed on to srun");
	if (!r)
		return answer(0, line, linelen, "not restarted: %s",
			      no_report ? no_report : "no report");
	if (describe(r, what, sizeof(what)) < 0)
		return -1;
	if (r->cause != DDP_CAUSE_NODE)
		return same_nodes(st, r, what, line, linelen);
	if (!r->blame[0])
		return answer(0, line, linelen,
			      "not restarted: %s, and no node is to blame",
			      what);
	if (st->done >= st->max)
		return answer(0, line, linelen,
			      "not restarted: %s on %s, and no restart is left "
			      "(%u of at most %u used)",
			      what, r->blame, st->done, st->max);
	blamed = st->blamed;
	add_blamed(&blamed, r->blame);
	if (ddp_requeue_exclude(st->user_exclude, &blamed, exclude,
				sizeof(exclude), why, sizeof(why)) < 0)
		return answer(0, line, linelen, "not restarted: %s; %s", what,
			      why);
	if (!st->alloc_nodes || !st->alloc_nodes[0])
		return answer(0, line, linelen,
			      "not restarted: %s, and SLURM_JOB_NODELIST does "
			      "not say which nodes the allocation has",
			      what);
	if (nodes_left(st->alloc_nodes, exclude, left, sizeof(left), &count,
		       why, sizeof(why)) < 0)
		return answer(0, line, linelen, "not restarted: %s; %s", what,
			      why);
	if ((long)count < r->nodes) {
		st->short_of_nodes = 1;
		st->requeue_nodes = blamed;
		memcpy(st->failure, what, sizeof(st->failure));
		return answer(0, line, linelen,
			      "not restarted: %s, and the allocation has %zu "
			      "nodes left without %s, fewer than the %ld the "
			      "step needs; run it again in a new allocation "
			      "with --exclude=%s",
			      what, count, r->blame, r->nodes, exclude);
	}
	st->blamed = blamed;
	memcpy(st->exclude, exclude, sizeof(st->exclude));
	st->nodelist[0] = '\0';
	st->done++;
	return answer(1, line, linelen,
		      "step restarted (%u of at most %u) without %s, from the "
		      "allocation's %s: %s",
		      st->done, st->max, r->blame, left, what);
}

char **
ddp_restart_argv(int argc, char *const *argv, const char *exclude,
		 const char *nodelist, char **added, char *err, size_t errlen)
{
	const char *opt =
		nodelist && nodelist[0] ? "--nodelist=" : "--exclude=";
	const char *value = nodelist && nodelist[0] ? nodelist : exclude;
	struct ddp_srun_req req;
	char **out;
	size_t size;
	int i, n = 0;

	*added = NULL;
	if (ddp_srun_scan(argc, argv, NULL, &req, err, errlen) < 0)
		return NULL;
	out = calloc((size_t)argc + 2, sizeof(*out));
	if (!out) {
		ddp_errf(err, errlen, "out of memory");
		return NULL;
	}
	if (value && value[0]) {
		size = strlen(opt) + strlen(value) + 1;
		*added = malloc(size);
		if (!*added || ddp_fmt(*added, size, "%s%s", opt, value)) {
			free(*added);
			*added = NULL;
			free(out);
			ddp_errf(err, errlen, "out of memory");
			return NULL;
		}
	}
	for (i = 0; i < argc; i++) {
		if (i == req.opts_end && *added)
			out[n++] = *added;
		out[n++] = argv[i];
	}
	if (req.opts_end >= argc && *added)
		out[n++] = *added;
	out[n] = NULL;
	return out;
}
