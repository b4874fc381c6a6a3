/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The line rank 0 prints while it waits for the ranks to join: how many
 * did, and the nodes still missing some, from the step's node list and
 * tasks per node as Slurm gives them to every task.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ddp_util.h"
#include "hostlist.h"
#include "tasks.h"

void
chk_thousands(long n, char *buf, size_t len)
{
	char digits[32];
	size_t nd, i, o = 0;
	int neg = n < 0;

	/* The magnitude of LONG_MIN does not fit a long: go through
	 * unsigned long. */
	ddp_fmt(digits, sizeof(digits), "%lu",
		neg ? 0ul - (unsigned long)n : (unsigned long)n);
	nd = strlen(digits);
	if (!len)
		return;
	if (neg && o + 1 < len)
		buf[o++] = '-';
	for (i = 0; i < nd && o + 1 < len; i++) {
		if (i && (nd - i) % 3 == 0) {
			buf[o++] = ',';
			if (o + 1 >= len)
				break;
		}
		buf[o++] = digits[i];
	}
	buf[o] = '\0';
}

void
chk_expect_free(struct chk_expect *e)
{
	int i;

	for (i = 0; e->host && i < e->n; i++)
		free(e->host[i]);
	free(e->host);
	free(e->ranks);
	memset(e, 0, sizeof(*e));
}

int
chk_expect_parse(const char *nodelist, const char *tasks, int world,
		 struct chk_expect *e)
{
	struct ddp_hostlist hl = {0};
	unsigned *counts = NULL;
	char err[256];
	long n, sum = 0, i;
	int rc = -1;

	memset(e, 0, sizeof(*e));
	if (!nodelist || !tasks || world < 1)
		goto out;
	counts = calloc(DDP_TASKS_MAX_NODES, sizeof(*counts));
	if (!counts || ddp_hostlist_parse(nodelist, DDP_TASKS_MAX_NODES, &hl,
					  err, sizeof(err)) < 0)
		goto out;
	n = ddp_tasks_parse(tasks, counts, DDP_TASKS_MAX_NODES);
	if (n < 1 || (size_t)n != hl.n)
		goto out;
	for (i = 0; i < n; i++)
		sum += counts[i];
	if (sum != world)
		goto out;
	e->host = calloc((size_t)n, sizeof(*e->host));
	e->ranks = calloc((size_t)n, sizeof(*e->ranks));
	if (!e->host || !e->ranks)
		goto out;
	for (i = 0; i < n; i++) {
		e->host[i] = hl.hosts[i];
		hl.hosts[i] = NULL;
		e->ranks[i] = counts[i];
		e->n++;
	}
	rc = 0;
out:
	if (rc < 0)
		chk_expect_free(e);
	ddp_hostlist_free(&hl);
	free(counts);
	return rc;
}

/* a and b name one node: equal, or equal up to the domain of the one
 * that has it (a rank's host name may be qualified where Slurm's node
 * name is not). */
static int
same_node(const char *a, const char *b)
{
	size_t la = strcspn(a, "."), lb = strcspn(b, ".");

	if (strcmp(a, b) == 0)
		return 1;
	if (a[la] && b[lb])
		return 0;
	return la == lb && strncmp(a, b, la) == 0;
}

/* Appends name to the list of those waited for: the first
 * CHK_PROGRESS_NAMES by name, the others only counted in *more. */
static void
name_waiting(char *list, size_t len, int *named, int *more, const char *name)
{
	if (*named < CHK_PROGRESS_NAMES &&
	    ddp_fmt_cat(list, len, "%s%s", *named ? ", " : "", name) == 0) {
		(*named)++;
		return;
	}
	(*more)++;
}

/* The nodes whose ranks have not all joined, into list; 0 when e could
 * not tell any (no node list, or its names are not those the ranks
 * joined from), else how many. */
static int
waiting_nodes(const struct chk_expect *e, int world, const char *const *host,
	      char *list, size_t len, int *more)
{
	int i, r, named = 0, some = 0;
	unsigned got;

	for (i = 0; e && i < e->n; i++) {
		got = 0;
		for (r = 0; r < world; r++)
			if (host[r] && same_node(host[r], e->host[i]))
				got++;
		if (got) /* its names are the ranks' */
			some = 1;
		if (got < e->ranks[i])
			name_waiting(list, len, &named, more, e->host[i]);
	}
	if (!some || (!named && !*more)) {
		list[0] = '\0';
		*more = 0;
		return 0;
	}
	return named + *more;
}

void
chk_progress_line(const struct chk_expect *e, int world,
		  const char *const *host, char *buf, size_t len)
{
	char list[CHK_TEXT_LEN / 2] = "", rank[16], joined_s[32], world_s[32],
				 more_s[32];
	int r, joined = 0, named = 0, more = 0, missing = 0;

	for (r = 0; r < world; r++)
		joined += host[r] != NULL;
	chk_thousands(joined, joined_s, sizeof(joined_s));
	chk_thousands(world, world_s, sizeof(world_s));
	if (!waiting_nodes(e, world, host, list, sizeof(list), &more)) {
		for (r = 0; r < world; r++) {
			if (host[r])
				continue;
			missing++;
			ddp_fmt(rank, sizeof(rank), "%d", r);
			name_waiting(list, sizeof(list), &named, &more, rank);
		}
	}
	chk_thousands(more, more_s, sizeof(more_s));
	ddp_fmt(buf, len,
		"ddp-check: %s of %s ranks joined; waiting for %s%s%s%s",
		joined_s, world_s,
		missing == 1 ? "rank "
		: missing    ? "ranks "
			     : "",
		list, more ? " and " : "", more ? more_s : "");
	if (more)
		ddp_fmt_cat(buf, len, " more");
}
