/* SPDX-License-Identifier: BSD-3-Clause */
/* Option values, plugstack arguments and srun's command line, parsed
 * strictly and without Slurm so they can be unit-tested and fuzzed. */
#include "args.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ddp_util.h"
#include "gpulist.h"
#include "placement.h"
#include "port.h"
#include "stop.h"

/* Shows at most 40 characters of a user value, so messages stay short. */
#define SHOW(v) ((v) ? (v) : "(none)")

int
ddp_opts_apply(struct ddp_opts *o, const char *name, const char *arg, char *err,
	       size_t errlen)
{
	if (!strcmp(name, "ddp")) {
		o->enabled = 1;
	} else if (!strcmp(name, "ddp-verbose")) {
		o->verbose = 1;
	} else if (!strcmp(name, "ddp-port")) {
		long p = ddp_port_parse(arg);

		if (p < 0)
			return ddp_errf(
				err, errlen,
				"--ddp-port=%.40s: not a port; give a "
				"number from 1 to 65535 that no other job "
				"uses (or leave it out to let --ddp choose)",
				SHOW(arg));
		o->port = p;
	} else if (!strcmp(name, "ddp-bind")) {
		enum ddp_bind b;

		if (ddp_bind_parse(arg, &b) < 0)
			return ddp_errf(err, errlen,
					"--ddp-bind=%.40s: unknown binding; "
					"use " DDP_BIND_ACCEPTED,
					SHOW(arg));
		o->bind = (int)b;
	} else if (!strcmp(name, "ddp-check")) {
		enum ddp_check m;

		if (ddp_check_parse(arg ? arg : "fail", &m) < 0)
			return ddp_errf(
				err, errlen,
				"--ddp-check=%.40s: unknown mode; use "
				"--ddp-check (fail: end the step on a "
				"problem), --ddp-check=requeue (as fail, "
				"and a batch job that may be requeued "
				"starts again without the bad node), "
				"--ddp-check=warn (report it and start the "
				"program) or --ddp-check=off",
				SHOW(arg));
		o->check = (int)m;
		if (m != DDP_CHECK_OFF)
			o->enabled = 1;
	} else if (!strcmp(name, "ddp-restart")) {
		long n;

		if (ddp_parse_long(arg, 0, DDP_RESTART_LIMIT, &n) < 0)
			return ddp_errf(
				err, errlen,
				"--ddp-restart=%.40s: not a number of "
				"restarts; give a whole number from 0 (no "
				"restart) to the site's restart_max (at most "
				"%d)",
				SHOW(arg), DDP_RESTART_LIMIT);
		o->restart = n;
	} else if (!strcmp(name, "ddp-restart-on")) {
		if (ddp_restart_on_parse(arg ? arg : "", &o->restart_on, err,
					 errlen) < 0)
			return -1;
	} else if (!strcmp(name, "ddp-stop-before")) {
		struct ddp_stop_before b;
		char why[DDP_ERR_LEN];

		if (ddp_stop_before_parse(arg, &b, why, sizeof(why)) < 0 ||
		    ddp_fmt(o->stop_before, sizeof(o->stop_before), "%s", arg) <
			    0)
			return ddp_errf(
				err, errlen,
				"--ddp-stop-before=%.40s: not a time to stop "
				"before the job's end; use auto (from the "
				"measured step and checkpoint times), 0 (no "
				"stop for the time, nor on a signal) or whole "
				"seconds from 1 to 604800",
				SHOW(arg));
	} else {
		return ddp_errf(err, errlen, "unknown option --%.40s", name);
	}
	return 0;
}

int
ddp_restart_on_parse(const char *value, unsigned *mask, char *err,
		     size_t errlen)
{
	enum ddp_failure_cause cause;
	const char *p = value, *end;
	char word[16];
	size_t n;

	*mask = DDP_RESTART_ON_NODE;
	do {
		end = strchr(p, ',');
		n = end ? (size_t)(end - p) : strlen(p);
		if (n < sizeof(word)) {
			memcpy(word, p, n);
			word[n] = '\0';
		}
		if (n < sizeof(word) && !strcmp(word, "all"))
			*mask |= DDP_RESTART_ON_ALL;
		else if (n >= sizeof(word) ||
			 ddp_failure_cause_parse(word, &cause) < 0 ||
			 cause == DDP_CAUSE_STOP)
			return ddp_errf(err, errlen,
					"--ddp-restart-on=%.80s: '%.*s' is no "
					"cause to restart on; give a comma "
					"list of exit, crash, oom, hang, node "
					"or all",
					value, (int)(n < 40 ? n : 40), p);
		else
			*mask |= 1u << cause;
		p = end ? end + 1 : NULL;
	} while (p);
	return 0;
}

int
ddp_restart_on_format(unsigned mask, char *buf, size_t len)
{
	static const enum ddp_failure_cause order[] = {
		DDP_CAUSE_EXIT, DDP_CAUSE_CRASH, DDP_CAUSE_OOM, DDP_CAUSE_HANG};
	size_t i;

	buf[0] = '\0';
	for (i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		if ((mask & (1u << order[i])) &&
		    ddp_fmt_cat(buf, len, "%s%s", buf[0] ? "," : "",
				ddp_failure_cause_name(order[i])) < 0)
			return -1;
	return buf[0] ? 0 : ddp_fmt(buf, len, "node");
}

int
ddp_opts_restart_allowed(const struct ddp_opts *o, unsigned restart_max,
			 char *err, size_t errlen)
{
	if (o->restart <= (long)restart_max)
		return 0;
	if (restart_max == 0)
		return ddp_errf(err, errlen,
				"--ddp-restart=%ld: this site allows no "
				"restart (ddp.conf's restart_max is 0); leave "
				"--ddp-restart out",
				o->restart);
	return ddp_errf(err, errlen,
			"--ddp-restart=%ld: more restarts than this site "
			"allows; give a whole number from 0 to %u (ddp.conf's "
			"restart_max)",
			o->restart, restart_max);
}

int
ddp_plugstack_parse(struct ddp_conf *conf, char *topology, size_t toplen,
		    int ac, char **av, char *err, size_t errlen)
{
	const char *config = NULL;
	char cerr[DDP_ERR_LEN], names[512];
	int i;

	ddp_conf_defaults(conf);
	if (toplen)
		topology[0] = '\0';
	for (i = 0; i < ac; i++) {
		if (!strncmp(av[i], "config=", 7)) {
			config = av[i] + 7;
			if (config[0] != '/')
				return ddp_errf(
					err, errlen,
					"plugstack argument '%.200s': "
					"config= needs an absolute path",
					av[i]);
		}
	}
	if (ddp_conf_load(conf, config ? config : DDP_CONF_DEFAULT, !config,
			  cerr, sizeof(cerr)) < 0)
		return ddp_errf(err, errlen, "%s", cerr);
	for (i = 0; i < ac; i++) {
		char key[64];
		const char *eq = strchr(av[i], '=');
		size_t klen = eq ? (size_t)(eq - av[i]) : 0;

		if (!eq || klen == 0 || klen >= sizeof(key)) {
			/* The plugin's keys from ddp.conf's table; a cut
			 * list still helps. */
			ddp_conf_plugin_key_names(names, sizeof(names), ", ");
			return ddp_errf(
				err, errlen,
				"plugstack argument '%.80s': expected "
				"key=value (keys: config, topology, %s)",
				av[i], names);
		}
		memcpy(key, av[i], klen);
		key[klen] = '\0';
		if (!strcmp(key, "config"))
			continue;
		if (!strcmp(key, "topology")) {
			if (eq[1] != '/' || strstr(eq + 1, "/../") ||
			    ddp_fmt(topology, toplen, "%s", eq + 1) < 0)
				return ddp_errf(
					err, errlen,
					"plugstack argument '%.200s': "
					"topology= needs an absolute path "
					"of an hwloc XML file",
					av[i]);
			continue;
		}
		/* The Prolog, Epilog, health check and reconcile read
		 * ddp.conf alone: an override here would make the plugin use
		 * ports or directories they never prepared. */
		if (ddp_conf_key_node_side(key) == 1)
			return ddp_errf(
				err, errlen,
				"plugstack argument '%.200s': %s is read by "
				"the Prolog, Epilog and health check too, from "
				"ddp.conf alone: set it in %s, not in "
				"plugstack.conf",
				av[i], key, config ? config : DDP_CONF_DEFAULT);
		if (ddp_conf_set(conf, key, eq + 1, cerr, sizeof(cerr)) < 0)
			return ddp_errf(err, errlen, "plugstack argument: %s",
					cerr);
	}
	return 0;
}

/*
 * srun's options whose value is required, so that srun takes the next word
 * as the value ("-n 4", "--nodes 2"): the union of the option tables of
 * Slurm 22.05, 24.11 and 26.05 (src/common/slurm_opt.c, the entries srun
 * accepts), hidden aliases included (cpu_bind, pack-group, cluster), and
 * this plugin's own --ddp-port, --ddp-bind, --ddp-restart,
 * --ddp-restart-on and --ddp-stop-before. An option
 * only some versions know is harmless here: srun refuses it where it does
 * not exist.
 * tests/bats/srun-options.bats checks the table against each version's
 * srun.
 *
 * Options whose value is optional (--exclusive, --bcast, --compress,
 * --resv-ports, --ddp-check, ...) are not here: srun's getopt_long takes
 * their value only when attached (--exclusive=user), never the next word,
 * which is then the program or the next option.
 */
static const char short_with_arg[] = "ABCDFGJLMNSTWbcdeimnopqrtwx";
/* Short options whose value is optional: the rest of their word, if any
 * ("-I5"), never the next word. */
static const char short_optional_arg[] = "IKk";
static const char *const long_with_arg[] = {
	"accel-bind",
	"account",
	"acctg-freq",
	"autocomplete",
	"bb",
	"bbf",
	"bcast-exclude",
	"begin",
	"chdir",
	"cluster",
	"cluster-constraint",
	"clusters",
	"comment",
	"constraint",
	"container",
	"container-id",
	"container-type",
	"context",
	"core-spec",
	"cores-per-socket",
	"cpu-bind",
	"cpu-freq",
	"cpu_bind",
	"cpus-per-gpu",
	"cpus-per-task",
	"ddp-bind",
	"ddp-port",
	"ddp-restart",
	"ddp-restart-on",
	"ddp-stop-before",
	"deadline",
	"delay-boot",
	"dependency",
	"distribution",
	"epilog",
	"error",
	"exclude",
	"export",
	"extra",
	"extra-node-info",
	"gid",
	"gpu-bind",
	"gpu-freq",
	"gpus",
	"gpus-per-node",
	"gpus-per-socket",
	"gpus-per-task",
	"gres",
	"gres-flags",
	"het-group",
	"hint",
	"ignore-signals",
	"input",
	"job-name",
	"jobid",
	"licenses",
	"mail-type",
	"mail-user",
	"mcs-label",
	"mem",
	"mem-bind",
	"mem-per-cpu",
	"mem-per-gpu",
	"mem-update",
	"mincpus",
	"mpi",
	"msg-timeout",
	"network",
	"nodefile",
	"nodelist",
	"nodes",
	"ntasks",
	"ntasks-per-core",
	"ntasks-per-gpu",
	"ntasks-per-node",
	"ntasks-per-socket",
	"ntasks-per-tres",
	"open-mode",
	"output",
	"pack-group",
	"partition",
	"power",
	"prefer",
	"priority",
	"profile",
	"prolog",
	"qos",
	"relative",
	"reservation",
	"resources",
	"segment",
	"signal",
	"slurmd-debug",
	"sockets-per-node",
	"switches",
	"task-epilog",
	"task-prolog",
	"tasks-per-node",
	"thread-spec",
	"threads",
	"threads-per-core",
	"time",
	"time-min",
	"tmp",
	"treewidth",
	"tres-bind",
	"tres-per-task",
	"uid",
	"wait",
	"wckey",
	NULL,
};

static int
takes_arg(const char *name, size_t len)
{
	size_t i;

	for (i = 0; long_with_arg[i]; i++)
		if (strlen(long_with_arg[i]) == len &&
		    !strncmp(long_with_arg[i], name, len))
			return 1;
	return 0;
}

/* Most GPUs -G/--gpus may ask for in all: DDP_GPU_MAX on each of the most
 * nodes srun takes. The per-node bound is checked once the node count is
 * known (ddp_srun_scan). */
#define GPUS_TOTAL_MAX (65535L * DDP_GPU_MAX)

/* "[type:]N" as in --gpus-per-node and -G, N at most max. */
static int
parse_gpu_count(const char *v, long max, long *out)
{
	const char *c = strrchr(v, ':');

	return ddp_parse_long(c ? c + 1 : v, 0, max, out);
}

/* A per-node GPU count above what one node's GPU lists can hold. */
static int
too_many_per_node(const char *what, long n, char *err, size_t errlen)
{
	char v[32];

	if (ddp_fmt(v, sizeof(v), "%ld", n) < 0)
		return -1;
	return ddp_errf(err, errlen,
			"%.80s: %s GPUs on one node, more than the %d per node "
			"--ddp handles",
			what, v, DDP_GPU_MAX);
}

/* The GPUs in a --gres list ("gpu:4", "gpu:a100:2,nic:1", "gpu"). */
static int
parse_gres(const char *v, long *out)
{
	char buf[256];
	const char *p = v;
	long total = -1;

	while (*p) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);

		if (len >= sizeof(buf))
			return -1;
		memcpy(buf, p, len);
		buf[len] = '\0';
		if (!strncmp(buf, "gres/", 5))
			memmove(buf, buf + 5, strlen(buf + 5) + 1);
		if (!strcmp(buf, "gpu") || !strncmp(buf, "gpu:", 4)) {
			const char *c = strrchr(buf, ':');
			long n = 1;

			if (c && c[1] >= '0' && c[1] <= '9' &&
			    ddp_parse_long(c + 1, 0, GPUS_TOTAL_MAX, &n) < 0)
				return -1;
			total = (total < 0 ? 0 : total) + n;
		}
		if (!end)
			break;
		p = end + 1;
	}
	if (total >= 0)
		*out = total;
	return 0;
}

/* The options that need no count: 1 when opt is one of them (noted). */
static int
note_flag(const char *opt, const char *val, struct ddp_srun_req *req)
{
	if (!strcmp(opt, "help") || !strcmp(opt, "usage") ||
	    !strcmp(opt, "version") || !strcmp(opt, "test-only") ||
	    !strcmp(opt, "h") || !strcmp(opt, "V")) {
		req->help = 1;
		return 1;
	}
	if (!strcmp(opt, "exclusive")) {
		/* Whole nodes: the step gets every CPU of them. */
		req->cpus_by = "--exclusive";
		return 1;
	}
	if (!strcmp(opt, "ddp") && !val) {
		req->ddp = 1;
		return 1;
	}
	if (!strcmp(opt, "K") || !strcmp(opt, "kill-on-bad-exit")) {
		long v;

		/* srun reads the value as a number: 0 is off, anything
		 * else (or none) on. */
		req->kill_bad_exit =
			!val || ddp_parse_long(val, 0, 0x7fffffffL, &v) < 0 ||
			v != 0;
		return 1;
	}
	if (!strcmp(opt, "ddp-check")) {
		enum ddp_check m;

		if (ddp_check_parse(val ? val : "fail", &m) == 0 &&
		    m != DDP_CHECK_OFF)
			req->ddp = 1;
		return 1;
	}
	return 0;
}

/* Applies one recognised option; unknown ones are ignored. */
static int
note_option(const char *name, size_t len, const char *val,
	    struct ddp_srun_req *req, char *err, size_t errlen)
{
	char opt[32];
	long v;
	int rc = 0;

	if (len >= sizeof(opt))
		return 0;
	memcpy(opt, name, len);
	opt[len] = '\0';
	if (note_flag(opt, val, req) || !val)
		return 0;
	if (!strcmp(opt, "ntasks-per-node")) {
		rc = ddp_parse_long(val, 1, 65535, &v);
		req->ntasks_per_node = v;
	} else if (!strcmp(opt, "ntasks") || !strcmp(opt, "n")) {
		rc = ddp_parse_long(val, 1, 1L << 24, &v);
		req->ntasks = v;
	} else if (!strcmp(opt, "nodes") || !strcmp(opt, "N")) {
		const char *end;

		rc = ddp_parse_long_prefix(val, 1, 65535, &v, &end);
		req->nodes = v;
	} else if (!strcmp(opt, "gpus-per-node") || !strcmp(opt, "gres")) {
		char what[96];

		v = -1;
		rc = opt[1] == 'r' ? parse_gres(val, &v)
				   : parse_gpu_count(val, GPUS_TOTAL_MAX, &v);
		if (rc == 0 && v > DDP_GPU_MAX) {
			if (ddp_fmt(what, sizeof(what), "--%s=%.40s", opt,
				    val) < 0)
				return -1;
			return too_many_per_node(what, v, err, errlen);
		}
		if (rc == 0 && v >= 0) {
			req->gpus_per_node = v;
			req->per_node_gpus = 1;
		}
	} else if (!strcmp(opt, "gpus") || !strcmp(opt, "G")) {
		rc = parse_gpu_count(val, GPUS_TOTAL_MAX, &v);
		req->gpus = v;
	} else if (!strcmp(opt, "gpus-per-task") ||
		   !strcmp(opt, "ntasks-per-gpu")) {
		req->per_task_gpus = 1;
	} else if (!strcmp(opt, "c") || !strcmp(opt, "cpus-per-task")) {
		req->cpus_by = "-c/--cpus-per-task";
	} else if (!strcmp(opt, "cpus-per-gpu")) {
		req->cpus_by = "--cpus-per-gpu";
	} else if (!strcmp(opt, "tres-per-task")) {
		if (strstr(val, "cpu"))
			req->cpus_by = "--tres-per-task";
	} else if (!strcmp(opt, "jobid")) {
		req->jobid = 1;
	} else if (!strcmp(opt, "x") || !strcmp(opt, "exclude")) {
		req->exclude = val;
	} else if (!strcmp(opt, "p") || !strcmp(opt, "partition")) {
		/* Longer than any partition name: Slurm refuses it. */
		if (ddp_fmt(req->partition, sizeof(req->partition), "%s", val) <
		    0)
			req->partition[0] = '\0';
	} else {
		return 0;
	}
	if (rc < 0)
		return ddp_errf(err, errlen,
				"%s%.40s=%.40s: not a count this plugin "
				"understands",
				opt[1] ? "--" : "-", opt, val);
	return 0;
}

int
ddp_srun_scan(int argc, char *const *argv,
	      const char *(*getenv_fn)(const char *), struct ddp_srun_req *req,
	      char *err, size_t errlen)
{
	static const struct {
		const char *env, *opt;
	} envs[] = {
		{"SLURM_NTASKS_PER_NODE", "ntasks-per-node"},
		{"SLURM_NTASKS", "ntasks"},
		{"SLURM_NPROCS", "ntasks"},
		{"SLURM_NNODES", "nodes"},
		{"SLURM_GPUS_PER_NODE", "gpus-per-node"},
		{"SLURM_GPUS", "gpus"},
		{"SLURM_GPUS_PER_TASK", "gpus-per-task"},
		{"SLURM_NTASKS_PER_GPU", "ntasks-per-gpu"},
		/* What srun reads for its CPUs: SLURM_CPUS_PER_TASK from
		 * 23.11, SRUN_CPUS_PER_TASK on 22.05 and 23.02. */
		{"SLURM_CPUS_PER_TASK", "cpus-per-task"},
		{"SRUN_CPUS_PER_TASK", "cpus-per-task"},
		{"SLURM_CPUS_PER_GPU", "cpus-per-gpu"},
		{"SLURM_TRES_PER_TASK", "tres-per-task"},
		{"SLURM_EXCLUSIVE", "exclusive"},
		{"SLURM_PARTITION", "partition"},
		{"SLURM_KILL_BAD_EXIT", "kill-on-bad-exit"},
	};
	struct ddp_srun_req cmd = {.ntasks_per_node = -1,
				   .ntasks = -1,
				   .nodes = -1,
				   .gpus_per_node = -1,
				   .gpus = -1,
				   .kill_bad_exit = -1};
	struct ddp_srun_req env = cmd;
	const char *env_cpus_by = NULL;
	size_t k;
	int i;

	for (i = 1; i < argc && argv[i]; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--"))
			break;
		if (a[0] != '-' || a[1] == '\0')
			break; /* the program to run */
		if (a[1] == '-') {
			const char *name = a + 2, *eq = strchr(name, '=');
			size_t len = eq ? (size_t)(eq - name) : strlen(name);
			const char *val = eq ? eq + 1 : NULL;

			if (!eq && takes_arg(name, len) && i + 1 < argc)
				val = argv[++i];
			if (note_option(name, len, val, &cmd, err, errlen) < 0)
				return -1;
			continue;
		}
		/* Bundled short options: flags until one takes a value. */
		for (const char *c = a + 1; *c; c++) {
			const char *val = NULL;

			if (strchr(short_with_arg, *c)) {
				val = c[1] ? c + 1
					   : (i + 1 < argc ? argv[++i] : NULL);
				if (note_option(c, 1, val, &cmd, err, errlen) <
				    0)
					return -1;
				break;
			}
			if (strchr(short_optional_arg, *c)) {
				/* "-I5": the rest of the word is the value. */
				if (note_option(c, 1, c[1] ? c + 1 : NULL, &cmd,
						err, errlen) < 0)
					return -1;
				break;
			}
			if (note_option(c, 1, NULL, &cmd, err, errlen) < 0)
				return -1;
		}
	}
	cmd.opts_end = i;
	for (k = 0; getenv_fn && k < sizeof(envs) / sizeof(envs[0]); k++) {
		const char *v = getenv_fn(envs[k].env);

		if (v && *v &&
		    note_option(envs[k].opt, strlen(envs[k].opt), v, &env, err,
				errlen) < 0) {
			char why[DDP_ERR_LEN];

			/* Name the variable, keep the reason. */
			ddp_fmt(why, sizeof(why), "%s", err);
			return ddp_errf(err, errlen, "%s=%.40s: %s",
					envs[k].env, v, why);
		}
		if (env.cpus_by && !env_cpus_by)
			env_cpus_by = envs[k].env;
	}
	*req = cmd;
	if (req->ntasks_per_node < 0)
		req->ntasks_per_node = env.ntasks_per_node;
	if (req->ntasks < 0)
		req->ntasks = env.ntasks;
	if (req->nodes < 0)
		req->nodes = env.nodes;
	if (req->gpus_per_node < 0 && req->gpus < 0) {
		req->gpus_per_node = env.gpus_per_node;
		req->per_node_gpus = env.per_node_gpus;
		req->gpus = env.gpus;
	}
	req->per_task_gpus |= env.per_task_gpus;
	if (!req->cpus_by)
		req->cpus_by = env_cpus_by;
	if (!req->partition[0])
		memcpy(req->partition, env.partition, sizeof(req->partition));
	if (req->kill_bad_exit < 0)
		req->kill_bad_exit = env.kill_bad_exit;
	if (req->gpus_per_node < 0 && req->gpus >= 0 && req->nodes > 0) {
		/* -G is a total over the nodes: Slurm puts at least the
		 * rounded-up share on some node. */
		long most = (req->gpus + req->nodes - 1) / req->nodes;

		if (most > DDP_GPU_MAX) {
			char what[96];

			if (ddp_fmt(what, sizeof(what),
				    "-G/--gpus=%ld over %ld nodes", req->gpus,
				    req->nodes) < 0)
				return -1;
			return too_many_per_node(what, most, err, errlen);
		}
		if (req->gpus % req->nodes == 0)
			req->gpus_per_node = most;
	}
	return 0;
}

int
ddp_srun_alloc_gpus_conflict(const struct ddp_srun_req *cmd)
{
	return !cmd->per_node_gpus && (cmd->gpus >= 0 || cmd->per_task_gpus);
}

int
ddp_srun_decide(const struct ddp_srun_req *req, long *per_node, char *err,
		size_t errlen)
{
	char a[32], b[32];
	long tasks = -1;

	*per_node = 0;
	if (req->ntasks_per_node > 0)
		tasks = req->ntasks_per_node;
	else if (req->ntasks > 0 && req->nodes > 0)
		tasks = (req->ntasks + req->nodes - 1) / req->nodes;
	if (req->ntasks_per_node < 0 && req->ntasks < 0 &&
	    !req->per_task_gpus) {
		if (req->gpus_per_node <= 0)
			return ddp_errf(
				err, errlen,
				"--ddp without --ntasks-per-node starts one "
				"rank per GPU, but no GPUs per node were "
				"requested: add --gpus-per-node=G (or "
				"--gres=gpu:G), or give --ntasks-per-node=N "
				"for N ranks per node");
		*per_node = req->gpus_per_node;
		return 1;
	}
	if (tasks > 0 && req->gpus_per_node > 0 && tasks > req->gpus_per_node) {
		if (ddp_fmt(a, sizeof(a), "%ld", tasks) < 0 ||
		    ddp_fmt(b, sizeof(b), "%ld", req->gpus_per_node) < 0)
			return -1;
		return ddp_errf(
			err, errlen,
			"--ddp: %s ranks on a node but only %s GPUs per "
			"node: use --ntasks-per-node of at most the GPUs "
			"per node, or request more GPUs (--gpus-per-node)",
			a, b);
	}
	return 0;
}

long
ddp_gpu_cpu_share(long cpus, long cores, long threads, long gpus)
{
	if (gpus <= 0 || cpus < gpus)
		return 0;
	if (cores >= gpus && threads > 0 && (cores / gpus) * threads <= cpus)
		return (cores / gpus) * threads;
	return cpus / gpus;
}

long
ddp_gres_gpu_count(const char *gres)
{
	char item[256];
	const char *p = gres;
	long total = 0, n;

	if (!p || !strcmp(p, "(null)"))
		return 0;
	while (*p) {
		size_t len = 0;
		int depth = 0;
		char *paren, *c;

		/* Commas inside "(S:0,2)" belong to the item. */
		while (p[len] && (depth || p[len] != ',')) {
			depth += p[len] == '(' ? 1 : p[len] == ')' ? -1 : 0;
			len++;
		}
		if (len >= sizeof(item))
			return -1;
		memcpy(item, p, len);
		item[len] = '\0';
		if ((paren = strchr(item, '(')))
			*paren = '\0';
		if (!strcmp(item, "gpu") || !strncmp(item, "gpu:", 4)) {
			c = strrchr(item, ':');
			n = 1;
			if (c &&
			    ddp_parse_long(c + 1, 0, GPUS_TOTAL_MAX, &n) < 0)
				return -1;
			total += n;
			if (total > GPUS_TOTAL_MAX)
				return -1;
		}
		p += len;
		if (*p == ',')
			p++;
	}
	return total;
}

long
ddp_def_cpu_per_gpu(const char *defaults)
{
	static const char key[] = "DefCpuPerGPU=";
	const char *p = defaults;
	const char *end;
	long v;

	while (p && (p = strstr(p, key))) {
		if (p == defaults || p[-1] == ',') {
			if (ddp_parse_long_prefix(p + sizeof(key) - 1, 1,
						  0x7fffffffL, &v, &end) == 0 &&
			    (*end == '\0' || *end == ','))
				return v;
			return 0;
		}
		p += sizeof(key) - 1;
	}
	return 0;
}
