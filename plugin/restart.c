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

/* Longest report line read; the plugin's are far shorter. */
#define REPORT_LINE_MAX (2 * DDP_RESTART_LIST_LEN + 512)

/* how=exit:N or how=signal:N. */
static int
parse_how(const char *v, struct ddp_restart_report *r)
{
	if (!strncmp(v, "exit:", 5) &&
	    ddp_parse_long(v + 5, 0, 255, &r->code) == 0) {
		r->signalled = 0;
		return 0;
	}
	if (!strncmp(v, "signal:", 7) &&
	    ddp_parse_long(v + 7, 1, 64, &r->code) == 0) {
		r->signalled = 1;
		return 0;
	}
	return -1;
}

/* One key=value of a report; unknown keys are skipped. */
static int
report_field(const char *key, const char *v, struct ddp_restart_report *r,
	     unsigned *seen)
{
	struct ddp_hostlist hl = {0};
	char why[256];

	if (!strcmp(key, "rank"))
		return ddp_parse_long(v, 0, 1L << 24, &r->rank);
	if (!strcmp(key, "node"))
		return ddp_fmt(r->node, sizeof(r->node), "%s", v);
	if (!strcmp(key, "how")) {
		*seen |= 1;
		return parse_how(v, r);
	}
	if (!strcmp(key, "why")) {
		if (v[0] && !ddp_failure_why_words(v))
			return -1;
		return ddp_fmt(r->why, sizeof(r->why), "%s", v);
	}
	if (!strcmp(key, "nodes")) {
		*seen |= 2;
		return ddp_parse_long(v, 1, 65535, &r->nodes);
	}
	if (!strcmp(key, "blame")) {
		*seen |= 4;
		if (!v[0]) {
			r->blame[0] = '\0';
			return 0;
		}
		/* Checked now, so that deciding cannot meet a bad list. */
		if (ddp_hostlist_parse(v, DDP_REQUEUE_MAX_NODES, &hl, why,
				       sizeof(why)) < 0)
			return -1;
		ddp_hostlist_free(&hl);
		return ddp_fmt(r->blame, sizeof(r->blame), "%s", v);
	}
	return 0;
}

int
ddp_restart_report_parse(const char *text, size_t len,
			 struct ddp_restart_report *r, char *err, size_t errlen)
{
	char line[REPORT_LINE_MAX];
	const char *nl = memchr(text, '\n', len);
	char *p, *next;
	unsigned seen = 0;

	memset(r, 0, sizeof(*r));
	r->rank = -1;
	r->nodes = -1;
	if (nl)
		len = (size_t)(nl - text);
	if (len >= sizeof(line))
		return ddp_errf(err, errlen,
				"restart report: a line of %zu bytes, longer "
				"than the %d a report may have",
				len, REPORT_LINE_MAX - 1);
	memcpy(line, text, len);
	line[len] = '\0';
	for (p = line; p && *p; p = next) {
		char *eq;

		next = strchr(p, ' ');
		if (next)
			*next++ = '\0';
		if (!*p)
			continue;
		eq = strchr(p, '=');
		if (!eq)
			return ddp_errf(err, errlen,
					"restart report: '%.60s' is not "
					"key=value",
					p);
		*eq = '\0';
		if (report_field(p, eq + 1, r, &seen) < 0)
			return ddp_errf(err, errlen,
					"restart report: %.40s='%.80s' is not "
					"what the plugin writes",
					p, eq + 1);
	}
	if (seen != 7)
		return ddp_errf(err, errlen,
				"restart report: '%.120s' lacks %s", line,
				!(seen & 1)   ? "how="
				: !(seen & 2) ? "nodes="
					      : "blame=");
	return 0;
}

void
ddp_restart_init(struct ddp_restart *st, unsigned max, const char *user_exclude,
		 const char *alloc_nodes)
{
	memset(st, 0, sizeof(*st));
	st->max = max;
	st->user_exclude =
		user_exclude && user_exclude[0] ? user_exclude : NULL;
	st->alloc_nodes = alloc_nodes;
}

/* "rank 2 was killed by signal 9", "rank 2 exited with status 1", "rank 2
 * hangs". */
static int
describe(const struct ddp_restart_report *r, char *buf, size_t len)
{
	char who[32] = "a rank";

	if (r->rank >= 0 && ddp_fmt(who, sizeof(who), "rank %ld", r->rank) < 0)
		return -1;
	/* A hang's how is the step's end or the naming rank's exit. */
	if (r->why[0])
		return ddp_fmt(buf, len, "%s %s", who,
			       ddp_failure_why_words(r->why));
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

int
ddp_restart_decide(struct ddp_restart *st, const struct ddp_restart_report *r,
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
	st->done++;
	return answer(1, line, linelen,
		      "step restarted (%u of at most %u) without %s, from the "
		      "allocation's %s: %s",
		      st->done, st->max, r->blame, left, what);
}

char **
ddp_restart_argv(int argc, char *const *argv, const char *exclude, char **added,
		 char *err, size_t errlen)
{
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
	if (exclude && exclude[0]) {
		size = strlen(exclude) + sizeof("--exclude=");
		*added = malloc(size);
		if (!*added || ddp_fmt(*added, size, "--exclude=%s", exclude)) {
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
