/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of --ddp-restart's decisions (plugin/restart.c): the report
 * the plugin writes in srun, whether and why a step runs again, the nodes
 * left, the merged exclusion and the next srun's argv. */
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "ddp_util.h"
#include "restart.h"
#include "tap.h"

static const char killed3[] =
	"rank=2 node=node3 how=signal:9 time=1764240000.123 blame=node3 "
	"nodes=4 step_nodes=node[1-4]\n";

static int
parse(const char *text, struct ddp_failure_record *r, char *err, size_t errlen)
{
	return ddp_failure_parse_record(text, strlen(text), r, err, errlen);
}

static void
test_report(void)
{
	struct ddp_failure_record r;
	char err[DDP_ERR_LEN];
	static const char *const bad[] = {
		"rank=2 how=signal:9 nodes=4",		   /* no blame= */
		"rank=2 blame=node3 nodes=4",		   /* no how= */
		"rank=2 how=exit:1 blame=",		   /* no nodes= */
		"rank=x how=signal:9 blame=node3 nodes=4", /* rank */
		"how=signal:0 blame=node3 nodes=4",	   /* signal 0 */
		"how=exit:256 blame=node3 nodes=4",	   /* exit 256 */
		"how=killed blame=node3 nodes=4",	   /* how */
		"how=exit:1 blame=node[3 nodes=4",	   /* blame list */
		"how=exit:1 blame=node3 nodes=0",	   /* nodes */
		"how=exit:1 blame=node3 nodes=4 junk",	   /* not key=value */
		"how=exit:1 blame=node3 nodes=4 why=slow", /* why */
		"how=exit:1 blame= nodes=4 cause=maybe",   /* cause */
		"how=signal:11 blame=node3 nodes=4 cause=crash", /* blame */
		"how=signal:9:oom blame= nodes=4 cause=oom",	 /* how */
	};
	size_t i;

	tap_ok(parse(killed3, &r, err, sizeof(err)) == 0 && r.rank == 2 &&
		       !strcmp(r.node, "node3") && r.signalled && r.code == 9 &&
		       !strcmp(r.blame, "node3") && r.nodes == 4,
	       "report: the plugin's line, every field");
	tap_ok(parse("how=exit:1 blame= nodes=2 colour=blue\nrank=9", &r, err,
		     sizeof(err)) == 0 &&
		       r.rank == -1 && !r.signalled && r.code == 1 &&
		       !r.blame[0] && r.nodes == 2,
	       "report: empty blame, unknown keys and later lines skipped");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		tap_ok(parse(bad[i], &r, err, sizeof(err)) < 0 &&
			       strstr(err, "restart report"),
		       "report refused: %s (%s)", bad[i], err);
	tap_ok(parse("how=exit:1 nodes=2", &r, err, sizeof(err)) < 0 &&
		       strstr(err, "lacks blame="),
	       "report: the missing key is named");
}

static void
test_decide(void)
{
	struct ddp_restart st;
	struct ddp_failure_record r, r5, exit1, hung;
	char err[DDP_ERR_LEN], line[2 * DDP_ERR_LEN];

	parse(killed3, &r, err, sizeof(err));
	parse("rank=0 how=exit:1 blame= nodes=4", &exit1, err, sizeof(err));
	parse("rank=3 node=node5 how=signal:6 blame=node5 nodes=4", &r5, err,
	      sizeof(err));

	ddp_restart_init(&st, 2, 0, NULL, "node[1-5]");
	tap_ok(ddp_restart_decide(&st, &r, NULL, 0, line, sizeof(line)) == 1 &&
		       !strcmp(line, "step restarted (1 of at most 2) without "
				     "node3, from the allocation's "
				     "node[1-2,4-5]: rank 2 was killed by "
				     "signal 9") &&
		       !strcmp(st.exclude, "node3") && st.done == 1,
	       "decide: a blamed node and a spare: restart (%s)", line);
	tap_ok(ddp_restart_decide(&st, &r5, NULL, 0, line, sizeof(line)) == 0 &&
		       strstr(line, "not restarted: rank 3 was killed by "
				    "signal 6") &&
		       strstr(line, "3 nodes left without node5") &&
		       strstr(line, "the 4 the step needs") &&
		       strstr(line, "--exclude=node3,node5") &&
		       !strcmp(st.exclude, "node3") && st.done == 1,
	       "decide: too few nodes left: the --exclude= to use (%s)", line);
	tap_ok(st.short_of_nodes && st.requeue_nodes.n == 2 &&
		       !strcmp(st.requeue_nodes.name[0], "node3") &&
		       !strcmp(st.requeue_nodes.name[1], "node5") &&
		       !strcmp(st.failure, "rank 3 was killed by signal 6"),
	       "decide: too few nodes left: the job may be requeued without "
	       "every blamed node (%s)",
	       st.failure);

	ddp_restart_init(&st, 1, 0, NULL, "node[1-6]");
	tap_ok(ddp_restart_decide(&st, &r, NULL, 0, line, sizeof(line)) == 1,
	       "decide: first restart of one");
	tap_ok(ddp_restart_decide(&st, &r5, NULL, 0, line, sizeof(line)) == 0 &&
		       strstr(line, "no restart is left (1 of at most 1 "
				    "used)"),
	       "decide: no restart left (%s)", line);

	ddp_restart_init(&st, 3, 0, "node1,node6", "node[1-8]");
	tap_ok(ddp_restart_decide(&st, &r, NULL, 0, line, sizeof(line)) == 1 &&
		       !strcmp(st.exclude, "node1,node6,node3") &&
		       strstr(line, "from the allocation's node[2,4-5,7-8]"),
	       "decide: the user's own exclusion kept (%s)", st.exclude);
	tap_ok(ddp_restart_decide(&st, &r5, NULL, 0, line, sizeof(line)) == 1 &&
		       !strcmp(st.exclude, "node1,node6,node3,node5") &&
		       strstr(line, "(2 of at most 3) without node5") &&
		       strstr(line, "node[2,4,7-8]"),
	       "decide: blamed nodes add up over restarts (%s)", line);

	/* A hang: how= is the step's end; why= says what the rank did. */
	ddp_restart_init(&st, 2, 0, NULL, "node[1-5]");
	parse("rank=2 node=node3 how=signal:9 blame=node3 nodes=4 "
	      "step_nodes=node[1-4] why=hang",
	      &hung, err, sizeof(err));
	tap_ok(ddp_restart_decide(&st, &hung, NULL, 0, line, sizeof(line)) ==
			       1 &&
		       !strcmp(line, "step restarted (1 of at most 2) without "
				     "node3, from the allocation's "
				     "node[1-2,4-5]: rank 2 hangs"),
	       "decide: a hung rank is said to hang, not to have been "
	       "killed (%s)",
	       line);
	parse("rank=2 node=node3 how=exit:1 blame=node3 nodes=4 why=behind",
	      &hung, err, sizeof(err));
	ddp_restart_decide(&st, &hung, NULL, 0, line, sizeof(line));
	tap_ok(strstr(line, ": rank 2 hangs in an earlier call") != NULL,
	       "decide: a rank behind: said so (%s)", line);

	ddp_restart_init(&st, 2, 0, NULL, "node[1-5]");
	tap_ok(ddp_restart_decide(&st, &exit1, NULL, 0, line, sizeof(line)) ==
			       0 &&
		       !strcmp(line, "not restarted: rank 0 exited with "
				     "status 1, the program's own exit, which "
				     "blames no node (--ddp-restart-on=exit "
				     "restarts it)") &&
		       st.done == 0,
	       "decide: no node to blame: not restarted (%s)", line);
	tap_ok(ddp_restart_decide(&st, NULL, "srun wrote no report", 0, line,
				  sizeof(line)) == 0 &&
		       !strcmp(line, "not restarted: srun wrote no report"),
	       "decide: no report: not restarted, saying why");
	tap_ok(ddp_restart_decide(&st, &r, NULL, 1, line, sizeof(line)) == 0 &&
		       strstr(line, "stopped by a signal") && st.done == 0,
	       "decide: after a forwarded terminating signal: never");
	ddp_restart_init(&st, 2, 0, NULL, NULL);
	tap_ok(ddp_restart_decide(&st, &r, NULL, 0, line, sizeof(line)) == 0 &&
		       strstr(line, "SLURM_JOB_NODELIST"),
	       "decide: no allocation node list: not restarted");
	ddp_restart_init(&st, 2, 0, NULL, "node[1-5]");
	tap_ok(ddp_restart_decide(&st, &r, NULL, 0, line, 20) < 0,
	       "decide: a line that does not fit fails");
}

/* The cause= of the record decides, and --ddp-restart-on chooses which
 * program failures run again on the same nodes. */
static void
test_causes(void)
{
	static const struct {
		const char *record, *cause, *words;
	} rows[] = {
		{"rank=2 node=node3 how=signal:11 blame= nodes=4 "
		 "step_nodes=node[1-4] cause=crash",
		 "crash",
		 "rank 2 was killed by signal 11, a crash of the "
		 "program"},
		{"rank=2 node=node3 how=signal:6 blame= nodes=4 cause=crash",
		 "crash",
		 "rank 2 was killed by signal 6, a crash of the "
		 "program"},
		{"rank=2 node=node3 how=exit:1 blame= nodes=4 cause=exit",
		 "exit", "rank 2 exited with status 1, the program's own exit"},
		{"rank=2 node=node3 how=signal:9 blame= nodes=4 cause=oom",
		 "oom",
		 "rank 2 was killed by the kernel's OOM killer, the job's "
		 "memory"},
		{"rank=2 node=node3 how=exit:1 blame= nodes=4 why=hang "
		 "cause=hang",
		 "hang", "rank 2 hangs, a hang of the program"},
	};
	struct ddp_restart st;
	struct ddp_failure_record r;
	char err[DDP_ERR_LEN], line[2 * DDP_ERR_LEN], want[512], on[64];
	unsigned mask;
	size_t i;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		tap_ok(parse(rows[i].record, &r, err, sizeof(err)) == 0,
		       "cause: '%s' parses (%s)", rows[i].record, err);
		ddp_restart_init(&st, 2, 0, NULL, "node[1-5]");
		ddp_fmt(want, sizeof(want),
			"not restarted: %s, which blames no node "
			"(--ddp-restart-on=%s restarts it)",
			rows[i].words, rows[i].cause);
		tap_ok(ddp_restart_decide(&st, &r, NULL, 0, line,
					  sizeof(line)) == 0 &&
			       !strcmp(line, want) && !st.exclude[0],
		       "cause %s: not restarted by default, saying what "
		       "would (%s)",
		       rows[i].cause, line);
		tap_ok(ddp_restart_on_parse(rows[i].cause, &mask, err,
					    sizeof(err)) == 0,
		       "restart-on: '%s' accepted", rows[i].cause);
		ddp_restart_init(&st, 2, mask, NULL, "node[1-5]");
		tap_ok(ddp_restart_decide(&st, &r, NULL, 0, line,
					  sizeof(line)) == 1 &&
			       !strncmp(line,
					"step restarted (1 of at most 2) on "
					"the same nodes: ",
					48) &&
			       strstr(line, "--ddp-restart-on=") &&
			       !st.exclude[0] && st.done == 1 &&
			       (i > 0 || !strcmp(st.nodelist, "node[1-4]")),
		       "cause %s: with --ddp-restart-on=%s, restarted on the "
		       "same nodes, the step's own (%s; --nodelist=%s)",
		       rows[i].cause, rows[i].cause, line, st.nodelist);
		tap_ok(ddp_restart_decide(&st, &r, NULL, 0, line,
					  sizeof(line)) == 1 &&
			       ddp_restart_decide(&st, &r, NULL, 0, line,
						  sizeof(line)) == 0 &&
			       strstr(line, "no restart is left (2 of at most "
					    "2 used)"),
		       "cause %s: restarts counted against N (%s)",
		       rows[i].cause, line);
	}
	parse("rank=2 node=node3 how=signal:15 blame= nodes=4 cause=stop", &r,
	      err, sizeof(err));
	ddp_restart_init(&st, 2, DDP_RESTART_ON_ALL, NULL, "node[1-5]");
	tap_ok(ddp_restart_decide(&st, &r, NULL, 0, line, sizeof(line)) == 0 &&
		       strstr(line, "ends a step on purpose"),
	       "cause stop: never restarted, even with all (%s)", line);
	parse("rank=0 node=node1 how=exit:75 time=1764240000.200 blame= "
	      "nodes=4 step_nodes=node[1-4] why= cause=stop",
	      &r, err, sizeof(err));
	ddp_restart_init(&st, 2, DDP_RESTART_ON_ALL, NULL, "node[1-5]");
	tap_ok(ddp_restart_decide(&st, &r, NULL, 0, line, sizeof(line)) == 0 &&
		       strstr(line, "stopped on every rank, checkpointed") &&
		       st.done == 0 && !st.exclude[0],
	       "an agreed stop (exit 75, cause stop): never restarted, even "
	       "with all, no node left out (%s)",
	       line);
	parse("rank=0 node=node1 how=exit:75 blame= nodes=4 cause=exit", &r,
	      err, sizeof(err));
	ddp_restart_init(&st, 2, DDP_RESTART_ON_ALL, NULL, "node[1-5]");
	tap_ok(ddp_restart_decide(&st, &r, NULL, 0, line, sizeof(line)) == 1,
	       "exit 75 without a stop note (cause exit) is a failure: "
	       "restarted under all (%s)",
	       line);
	parse("rank=2 node=node3 how=exit:1 blame=node3 nodes=4 "
	      "why=unreachable cause=node",
	      &r, err, sizeof(err));
	ddp_restart_init(&st, 2, 0, NULL, "node[1-5]");
	tap_ok(ddp_restart_decide(&st, &r, NULL, 0, line, sizeof(line)) == 1 &&
		       !strcmp(st.exclude, "node3") && !st.nodelist[0] &&
		       strstr(line, "without node3") &&
		       strstr(line, "rank 2 is unreachable"),
	       "cause node: restarted without the node by default (%s)", line);
	tap_ok(ddp_restart_on_parse("crash,hang", &mask, err, sizeof(err)) ==
			       0 &&
		       ddp_restart_on_format(mask, on, sizeof(on)) == 0 &&
		       !strcmp(on, "crash,hang"),
	       "restart-on: a list round-trips (%s)", on);
	tap_ok(ddp_restart_on_parse("all", &mask, err, sizeof(err)) == 0 &&
		       mask == DDP_RESTART_ON_ALL,
	       "restart-on: all");
	tap_ok(ddp_restart_on_parse("node", &mask, err, sizeof(err)) == 0 &&
		       ddp_restart_on_format(mask, on, sizeof(on)) == 0 &&
		       !strcmp(on, "node"),
	       "restart-on: node alone is the default (%s)", on);
	tap_ok(ddp_restart_on_parse("crash,segv", &mask, err, sizeof(err)) <
			       0 &&
		       strstr(err, "'segv'") && strstr(err, "exit, crash"),
	       "restart-on: an unknown word is named with the words that "
	       "work (%s)",
	       err);
	tap_ok(ddp_restart_on_parse("stop", &mask, err, sizeof(err)) < 0 &&
		       ddp_restart_on_parse("", &mask, err, sizeof(err)) < 0 &&
		       ddp_restart_on_parse("crash,", &mask, err, sizeof(err)) <
			       0,
	       "restart-on: stop, an empty list and an empty word refused");
}

static void
test_argv(void)
{
	char *argv1[] = {"/usr/bin/srun",
			 "-N4",
			 "--ddp",
			 "--ddp-restart",
			 "2",
			 "prog",
			 "-x",
			 "a",
			 NULL};
	char *argv2[] = {"/usr/bin/srun", "-x", "node9", "--ddp", "--",
			 "prog",	  NULL};
	char *argv3[] = {"/usr/bin/srun", "--ddp", NULL};
	char *added = NULL, err[DDP_ERR_LEN];
	char **out;

	out = ddp_restart_argv(8, argv1, "node3", "", &added, err, sizeof(err));
	tap_ok(out && added && !strcmp(out[0], "/usr/bin/srun") &&
		       !strcmp(out[4], "2") &&
		       !strcmp(out[5], "--exclude=node3") &&
		       !strcmp(out[6], "prog") && !strcmp(out[7], "-x") &&
		       !strcmp(out[8], "a") && !out[9],
	       "argv: --exclude= where srun's options end, the program's "
	       "own -x untouched");
	free(out);
	free(added);
	out = ddp_restart_argv(6, argv2, "node9,node3", "", &added, err,
			       sizeof(err));
	tap_ok(out && !strcmp(out[2], "node9") &&
		       !strcmp(out[4], "--exclude=node9,node3") &&
		       !strcmp(out[5], "--") && !out[7],
	       "argv: after the user's own -x, before --");
	free(out);
	free(added);
	out = ddp_restart_argv(2, argv3, "node3", "", &added, err, sizeof(err));
	tap_ok(out && !strcmp(out[2], "--exclude=node3") && !out[3],
	       "argv: no program: at the end");
	free(out);
	free(added);
	out = ddp_restart_argv(2, argv3, "", "", &added, err, sizeof(err));
	tap_ok(out && !added && !strcmp(out[1], "--ddp") && !out[2],
	       "argv: nothing to exclude: unchanged");
	free(out);
	out = ddp_restart_argv(8, argv1, "node3", "node[1-2,4-5]", &added, err,
			       sizeof(err));
	tap_ok(out && !strcmp(out[5], "--nodelist=node[1-2,4-5]") &&
		       !strcmp(out[6], "prog") && !out[9],
	       "argv: a restart on the same nodes pins them with --nodelist= "
	       "where srun's options end");
	free(out);
	free(added);
}

int
main(void)
{
	test_report();
	test_decide();
	test_causes();
	test_argv();
	return tap_done();
}
