/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ddp-nodectl health and verdicts: the drain rule of ddp.conf applied to
 * the node's records of ddp-check verdicts (common/verdict.h), the drain
 * it calls for, and the records themselves.
 */
#include "nodectl_cmd.h"

#include <getopt.h>
#include <pwd.h>
#include <stdio.h>
#include <time.h>

#include "ddp_util.h"
#include "verdict.h"

/* The drain rule of ddp.conf. */
static struct ddp_drain_rule
drain_rule(const struct ddp_conf *conf)
{
	struct ddp_drain_rule rule = {conf->check_drain_jobs,
				      conf->check_drain_users,
				      conf->check_drain_window};

	return rule;
}

/* Slurm's state of node (scontrol show node -o): 1 when it drains
 * already, 0 when not, -1 when unknown; state gets the state's text. */
static int
slurm_node_draining(const struct ddp_conf *conf, const char *node, char *state,
		    size_t len)
{
	char *argv[] = {(char *)conf->scontrol_path,
			"show",
			"node",
			"-o",
			(char *)node,
			NULL};
	struct ddp_buf out = {0};
	char err[DDP_ERR_LEN];
	int rv = -1;

	if (nc_slurm_run(argv, &out, err, sizeof(err)) != 0) {
		ddp_error("scontrol show node %s: %s", node, err);
		goto out;
	}
	rv = nc_node_draining(out.s ? out.s : "", state, len);
	if (rv < 0)
		ddp_error("scontrol show node %s: no State field in '%.80s'",
			  node, out.s ? out.s : "");
out:
	ddp_buf_free(&out);
	return rv;
}

/*
 * The health check: applies the drain rule (check_drain_jobs distinct jobs
 * of check_drain_users distinct users within check_drain_window) to this
 * node's verdict records and prints one line saying what it found and did.
 * Without --drain: exit 1 when a drain is due (NHC drains), else 0. With
 * --drain: drains through scontrol unless Slurm already drains the node,
 * and exits 0 (a HealthCheckProgram that fails blocks slurmd's start);
 * failures are logged and exit 1.
 */
int
cmd_health(const struct ddp_conf *conf, int argc, char **argv)
{
	static const struct option opts[] = {
		{"node", required_argument, NULL, 'n'},
		{"drain", no_argument, NULL, 'd'},
		{NULL, 0, NULL, 0},
	};
	const struct ddp_drain_rule rule = drain_rule(conf);
	struct ddp_verdict_list list = {0};
	struct ddp_drain_tally t;
	char node[128], reason[256], state[64], err[DDP_ERR_LEN];
	const char *given = NULL;
	long long now = (long long)time(NULL);
	int c, do_drain = 0, draining, rv = NC_EX_USAGE;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
		if (c == 'n') {
			given = optarg;
		} else if (c == 'd') {
			do_drain = 1;
		} else {
			rv = NC_EX_SHOW_USAGE;
			goto out;
		}
	}
	if (optind != argc || nc_node_name(given, node, sizeof(node)) < 0)
		goto out;
	rv = NC_EX_NODE;
	if (ddp_verdict_read(conf->state_dir, node, now - rule.window, &list,
			     err, sizeof(err)) < 0) {
		ddp_error("health: %s", err);
		goto out;
	}
	if (list.skipped)
		ddp_error("health: %s/%s: %zu malformed lines skipped",
			  conf->state_dir, DDP_VERDICT_FILE, list.skipped);
	ddp_drain_evaluate(&list, node, &rule, now, &t);
	if (!t.drain) {
		printf("%s: ok: %u job%s of %u user%s named it within %llds%s "
		       "(drained at %u jobs of %u users)\n",
		       node, t.jobs, t.jobs == 1 ? "" : "s", t.users,
		       t.users == 1 ? "" : "s", rule.window,
		       t.credited < t.jobs ? ", one user's jobs counting once"
					   : "",
		       rule.jobs, rule.users);
		rv = NC_EX_OK;
		goto out;
	}
	if (ddp_drain_reason(&t, rule.window, reason, sizeof(reason)) < 0) {
		ddp_error("health: %s: the drain reason does not fit", node);
		goto out;
	}
	if (!do_drain) {
		printf("%s: drain: %s\n", node, reason);
		goto out; /* NC_EX_NODE: the caller (NHC) drains */
	}
	draining = slurm_node_draining(conf, node, state, sizeof(state));
	if (draining < 0)
		goto out;
	if (draining) {
		printf("%s: already drained (%s), not drained again: %s\n",
		       node, state, reason);
		rv = NC_EX_OK;
		goto out;
	}
	if (nc_scontrol_drain(conf, node, reason, err, sizeof(err)) < 0) {
		ddp_error("health: scontrol update: %s", err);
		goto out;
	}
	printf("%s: drained: %s\n", node, reason);
	nc_log_syslog_warning("drained %s: %s", node, reason);
	rv = NC_EX_OK;
out:
	fflush(stdout);
	ddp_verdict_list_free(&list);
	return rv;
}

/* The user name of uid, or its number. */
static void
user_name(unsigned long uid, char *buf, size_t len)
{
	struct passwd pw, *res = NULL;
	char tmp[1024];

	if (getpwuid_r((uid_t)uid, &pw, tmp, sizeof(tmp), &res) == 0 && res &&
	    ddp_fmt(buf, len, "%s", res->pw_name) == 0)
		return;
	ddp_fmt(buf, len, "%lu", uid);
}

/* One verdict as a line: local time, node, job, step, user, finding. */
static void
print_verdict(const struct ddp_verdict *v)
{
	char when[32], what[DDP_VERDICT_LINE_MAX], user[64];
	time_t tt = (time_t)v->time;
	struct tm tm;

	if (!localtime_r(&tt, &tm) ||
	    !strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm))
		ddp_fmt(when, sizeof(when), "@%lld", v->time);
	if (ddp_verdict_describe(v, what, sizeof(what)) < 0)
		ddp_fmt(what, sizeof(what), "%s", v->check);
	user_name(v->uid, user, sizeof(user));
	printf("  %s  %s  job %s step %s  user %s  %s\n", when, v->node, v->job,
	       v->step, user, what);
}

/* The node's (or every node's) verdicts of the last --since seconds
 * (check_drain_window by default), oldest first, and what the drain rule
 * makes of them. */
int
cmd_verdicts(const struct ddp_conf *conf, int argc, char **argv)
{
	static const struct option opts[] = {
		{"node", required_argument, NULL, 'n'},
		{"all", no_argument, NULL, 'a'},
		{"since", required_argument, NULL, 's'},
		{NULL, 0, NULL, 0},
	};
	struct ddp_drain_rule rule = drain_rule(conf);
	struct ddp_verdict_list list = {0};
	struct ddp_drain_tally t;
	char node[128], err[DDP_ERR_LEN];
	const char *given = NULL;
	long long now = (long long)time(NULL);
	long since = (long)rule.window;
	int c, all = 0, rv = NC_EX_USAGE;
	size_t i;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
		if (c == 'n') {
			given = optarg;
		} else if (c == 'a') {
			all = 1;
		} else if (c == 's' &&
			   ddp_parse_long(optarg, 1, 100L * 365 * 86400,
					  &since) == 0) {
			continue;
		} else {
			if (c == 's')
				ddp_error("verdicts: --since %.40s: expected "
					  "whole seconds, 1-3153600000",
					  optarg);
			rv = NC_EX_SHOW_USAGE;
			goto out;
		}
	}
	if (optind != argc || (all && given) ||
	    (!all && nc_node_name(given, node, sizeof(node)) < 0))
		goto out;
	rv = NC_EX_NODE;
	if (ddp_verdict_read(conf->state_dir, all ? NULL : node, now - since,
			     &list, err, sizeof(err)) < 0) {
		ddp_error("verdicts: %s", err);
		goto out;
	}
	printf("%s: %zu verdict%s in the last %ld s (%s/%s)\n",
	       all ? "all nodes" : node, list.n, list.n == 1 ? "" : "s", since,
	       conf->state_dir, DDP_VERDICT_FILE);
	for (i = 0; i < list.n; i++)
		print_verdict(&list.v[i]);
	if (list.skipped)
		printf("%zu malformed line%s skipped\n", list.skipped,
		       list.skipped == 1 ? "" : "s");
	if (!all) {
		rule.window = since;
		ddp_drain_evaluate(&list, node, &rule, now, &t);
		printf("%u job%s of %u user%s: %s (the health check drains at "
		       "%u jobs of %u users within %us)\n",
		       t.jobs, t.jobs == 1 ? "" : "s", t.users,
		       t.users == 1 ? "" : "s",
		       t.drain ? "drain due" : "no drain",
		       conf->check_drain_jobs, conf->check_drain_users,
		       conf->check_drain_window);
	}
	rv = NC_EX_OK;
out:
	ddp_verdict_list_free(&list);
	return rv;
}
