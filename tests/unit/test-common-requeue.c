/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * --ddp-check=requeue's decisions: the nodes named by ddp-check's verdict
 * lines (bad lines skipped, not trusted), whether a job may be requeued,
 * its merged excluded nodes and the lines the job's output shows.
 */
#include <stdio.h>
#include <string.h>

#include "requeue.h"
#include "tap.h"

static const char throttled[] =
	"node=node2 check=link-send value=0.00599 median=1.31 unit=gb-per-s\n"
	"node=node2 check=link-recv value=0.0416 median=1.31 unit=gb-per-s\n"
	"node=node4 check=gpu value=- median=- unit=-\n";

/* What ddp_verdict_scan with ddp_requeue_collect found in a text. */
struct scan {
	struct ddp_requeue_nodes nodes;
	int seen; /* lines handed over */
	size_t bad;
	char bad_why[128];
};

static void
collect_line(void *arg, const struct ddp_verdict *v)
{
	struct scan *s = arg;

	s->seen++;
	ddp_requeue_collect(&s->nodes, v);
}

static void
scan(struct scan *s, const char *text, size_t len)
{
	memset(s, 0, sizeof(*s));
	ddp_verdict_scan(text, len, collect_line, s, &s->bad, s->bad_why,
			 sizeof(s->bad_why));
}

static void
test_scan(void)
{
	static struct scan s;
	static const char with_nul[] =
		"node=n1 check=gpu value=- median=- unit=-\0node=n2";
	static const char mixed[] =
		"node=n1;rm check=gpu value=- median=- unit=-\n"
		"garbage\n\n"
		"node=n2 check=gpu value=- median=- unit=- x=1\n"
		"node=n3 check=gpu value=- median=- unit=-\n";
	char list[64], evil[1200];

	scan(&s, throttled, strlen(throttled));
	tap_ok(s.nodes.n == 2 && !strcmp(s.nodes.name[0], "node2") &&
		       !strcmp(s.nodes.name[1], "node4") && !s.bad &&
		       s.seen == 3,
	       "three lines, two nodes, each once and in order");
	tap_ok(ddp_requeue_node_list(&s.nodes, list, sizeof(list)) == 0 &&
		       !strcmp(list, "node2,node4"),
	       "the nodes as --exclude= takes them");
	tap_ok(ddp_requeue_node_list(&s.nodes, list, 8) == -1,
	       "a list that does not fit is an error");

	scan(&s, "node=node2 check=gpu value=- median=- unit=-", 44);
	tap_ok(s.nodes.n == 1 && !s.bad,
	       "the last line needs no newline; len bounds the text");

	scan(&s, mixed, strlen(mixed));
	if (!tap_ok(s.nodes.n == 1 && !strcmp(s.nodes.name[0], "n3") &&
			    s.bad == 3 && s.bad_why[0] && s.seen == 1,
		    "a bad host, garbage and an unknown key are skipped and "
		    "counted; the good line is kept"))
		tap_diag("n %zu bad %zu why '%s'", s.nodes.n, s.bad, s.bad_why);

	memset(evil, 'a', sizeof(evil));
	scan(&s, evil, sizeof(evil));
	tap_ok(s.nodes.n == 0 && s.bad == 1,
	       "a 1200-byte line without a newline is one bad line");
	scan(&s, with_nul, sizeof(with_nul) - 1);
	tap_ok(s.nodes.n == 0 && s.bad == 1,
	       "a NUL inside a line makes it bad");
}

static void
test_allowed(void)
{
	struct ddp_requeue_job job = {1, 1, 0};
	char why[256];

	tap_ok(ddp_requeue_allowed(&job, 2, why, sizeof(why)) == 1,
	       "a requeueable batch job, never restarted, max 2: requeued");
	job.restarts = 1;
	tap_ok(ddp_requeue_allowed(&job, 2, why, sizeof(why)) == 1,
	       "restart 1 of 2: requeued again");
	job.restarts = 2;
	tap_ok(ddp_requeue_allowed(&job, 2, why, sizeof(why)) == 0 &&
		       strstr(why, "requeued 2 times already") &&
		       strstr(why, "check_requeue_max is 2"),
	       "restart 2 of 2: not, naming the limit");
	job.restarts = 0;
	tap_ok(ddp_requeue_allowed(&job, 0, why, sizeof(why)) == 0,
	       "check_requeue_max 0: never");
	job.requeue = 0;
	tap_ok(ddp_requeue_allowed(&job, 2, why, sizeof(why)) == 0 &&
		       strstr(why, "may not be requeued") &&
		       strstr(why, "--requeue"),
	       "--no-requeue: not, naming --requeue");
	job.batch = 0;
	job.requeue = 1;
	tap_ok(ddp_requeue_allowed(&job, 2, why, sizeof(why)) == 0 &&
		       strstr(why, "not a batch job"),
	       "salloc or srun alone: not a batch job");
}

static void
test_exclude(void)
{
	static struct scan s;
	const struct ddp_requeue_nodes *nodes = &s.nodes;
	char out[64], err[256];

	scan(&s, throttled, strlen(throttled));
	tap_ok(ddp_requeue_exclude(NULL, nodes, out, sizeof(out), err,
				   sizeof(err)) == 0 &&
		       !strcmp(out, "node2,node4"),
	       "no excluded nodes yet: the named ones");
	tap_ok(ddp_requeue_exclude("(null)", nodes, out, sizeof(out), err,
				   sizeof(err)) == 0 &&
		       !strcmp(out, "node2,node4"),
	       "Slurm's (null) is none");
	tap_ok(ddp_requeue_exclude("node[1-2]", nodes, out, sizeof(out), err,
				   sizeof(err)) == 0 &&
		       !strcmp(out, "node[1-2],node4"),
	       "node2 already excluded by node[1-2]: only node4 is added");
	tap_ok(ddp_requeue_exclude("node[2,4]", nodes, out, sizeof(out), err,
				   sizeof(err)) == 0 &&
		       !strcmp(out, "node[2,4]"),
	       "both already excluded: unchanged");
	tap_ok(ddp_requeue_exclude("node[", nodes, out, sizeof(out), err,
				   sizeof(err)) == -1 &&
		       strstr(err, "'node['"),
	       "an unparsable list is an error naming it");
	tap_ok(ddp_requeue_exclude("gpu[100-120]", nodes, out, 16, err,
				   sizeof(err)) == -1 &&
		       strstr(err, "exceed 15 characters"),
	       "a result that does not fit is an error");
}

static void
test_describe(void)
{
	struct ddp_verdict v;
	char out[256], err[128];

	tap_ok(ddp_verdict_parse("node=node2 check=link-send value=0.00599 "
				 "median=1.31 unit=gb-per-s",
				 &v, err, sizeof(err)) == 0 &&
		       ddp_requeue_describe(&v, out, sizeof(out)) == 0 &&
		       !strcmp(out, "node2: link-send 0.00599 GB/s, the "
				    "step's median 1.31 GB/s"),
	       "a slow link: its value against the median, in GB/s");
	tap_ok(ddp_verdict_parse("node=node3 check=link-unreachable value=- "
				 "median=- unit=-",
				 &v, err, sizeof(err)) == 0 &&
		       ddp_requeue_describe(&v, out, sizeof(out)) == 0 &&
		       !strcmp(out, "node3: link-unreachable"),
	       "no number: the node and what failed");
	tap_ok(ddp_verdict_parse("node=node3 check=gpu value=12 median=- "
				 "unit=ms",
				 &v, err, sizeof(err)) == 0 &&
		       ddp_requeue_describe(&v, out, sizeof(out)) == 0 &&
		       !strcmp(out, "node3: gpu 12 ms"),
	       "a value without a median, in its own unit");
	tap_ok(ddp_requeue_describe(&v, out, 8) == -1,
	       "a line that does not fit is an error");
}

int
main(void)
{
	test_scan();
	test_allowed();
	test_exclude();
	test_describe();
	return tap_done();
}
