/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The srun, sbatch and salloc side of spank_ddp.so: refuses impossible
 * requests before anything starts, turns a one-line srun into one rank
 * per GPU (node mode) and gives the ranks a fair share of their nodes'
 * CPUs.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "slurm_compat.h"

#include "ddp_log.h"
#include "ddp_util.h"
#include "plugin.h"
#include "restart.h"
#include "tasks.h"

/* Set in the environment of the srun that node mode re-executes, so that
 * it does not re-execute again. Removed before any task sees it. */
#define REEXEC_GUARD "SLURM_DDP_REEXEC"

int
local_srun_setenv(spank_t sp, const char *name, const char *value)
{
	spank_err_t rc = spank_setenv(sp, name, value, 1);

	if (rc == ESPANK_SUCCESS)
		return 0;
	/* Slurm versions whose spank_setenv is remote-only. */
	if (rc == ESPANK_NOT_REMOTE)
		return setenv(name, value, 1);
	return -1;
}

int
plugin_refuse_bad_conf(const struct ddp_plugin *p)
{
	ddp_error("%s: --ddp cannot run until the admin fixes it",
		  p->conf_error);
	return -1;
}

/* Reads the NUL-separated words of path (/proc/self/cmdline: srun's own
 * argv; /proc/self/environ: the environment srun started with) into a
 * NULL-terminated array. Caller frees both. */
static int
read_proc_words(const char *path, char **bufp, char ***argvp, int *argcp)
{
	char *buf = NULL, **argv = NULL;
	size_t len = 0, cap = 0, i;
	int fd, argc = 0, rc = -1;
	ssize_t n;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		goto out;
	for (;;) {
		if (len + 4096 + 1 > cap) {
			char *nb;

			if (cap > (1U << 22))
				goto out;
			cap = cap ? 2 * cap : 8192;
			nb = realloc(buf, cap);
			if (!nb)
				goto out;
			buf = nb;
		}
		n = read(fd, buf + len, 4096);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			goto out;
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (len == 0)
		goto out;
	buf[len] = '\0';
	for (i = 0; i < len; i++)
		if (buf[i] == '\0')
			argc++;
	argv = calloc((size_t)argc + 3, sizeof(*argv));
	if (!argv)
		goto out;
	argc = 0;
	for (i = 0; i < len; i += strlen(buf + i) + 1)
		argv[argc++] = buf + i;
	*bufp = buf;
	*argvp = argv;
	*argcp = argc;
	buf = NULL;
	argv = NULL;
	rc = 0;
out:
	ddp_close(&fd);
	free(buf);
	free(argv);
	return rc;
}

static int
read_cmdline(char **bufp, char ***argvp, int *argcp)
{
	return read_proc_words("/proc/self/cmdline", bufp, argvp, argcp);
}

static const char *
env_get(const char *name)
{
	return getenv(name);
}

/* Node mode when local_init could not set it up: run srun again with
 * --ntasks-per-node=G added (per_node > 0), so that every rank is a real
 * Slurm task (labels, signals, accounting, TaskProlog); per_node 0 runs it
 * again unchanged, for an environment local_post_opt changed. Setting
 * SLURM_NTASKS_PER_NODE here is too late: srun has already read its
 * environment. Only returns on failure. */
static int
reexec_srun(const struct ddp_plugin *p, int argc, char **argv, long per_node)
{
	char opt[64];
	char **nargv = NULL;
	int i, n = 0;

	if (per_node > 0 &&
	    ddp_fmt(opt, sizeof(opt), "--ntasks-per-node=%ld", per_node) < 0)
		return -1;
	nargv = calloc((size_t)argc + 2, sizeof(*nargv));
	if (!nargv)
		return -1;
	nargv[n++] = argv[0];
	if (per_node > 0)
		nargv[n++] = opt;
	for (i = 1; i < argc; i++)
		nargv[n++] = argv[i];
	if (setenv(REEXEC_GUARD, "1", 1) < 0) {
		free(nargv);
		return -1;
	}
	if (p->opts.verbose && per_node > 0)
		ddp_info("node mode: running srun again with %s", opt);
	else if (p->opts.verbose)
		ddp_info("running srun again without SLURM_GPUS_PER_NODE");
	fflush(NULL);
	execv("/proc/self/exe", nargv);
	ddp_error("cannot re-run srun for node mode: %s", strerror(errno));
	unsetenv(REEXEC_GUARD);
	free(nargv);
	return -1;
}

/* Unsets SLURM_GPUS_PER_NODE, keeping its value in p, when srun's command
 * line alone (with --ddp given anywhere) asks for GPUs in total or per
 * task (ddp_srun_alloc_gpus_conflict). Returns 1 when it did. */
static int
drop_alloc_gpus(struct ddp_plugin *p, int argc, char **argv)
{
	struct ddp_srun_req cmd;
	char err[DDP_ERR_LEN];
	const char *gpn = getenv("SLURM_GPUS_PER_NODE");

	if (!gpn || !gpn[0] ||
	    ddp_srun_scan(argc, argv, NULL, &cmd, err, sizeof(err)) < 0 ||
	    cmd.help || !ddp_srun_alloc_gpus_conflict(&cmd))
		return 0;
	/* Truncation only shortens what --ddp-verbose shows. */
	ddp_fmt(p->dropped_gpus_per_node, sizeof(p->dropped_gpus_per_node),
		"%s", gpn);
	if (unsetenv("SLURM_GPUS_PER_NODE") < 0) {
		p->dropped_gpus_per_node[0] = '\0';
		return 0;
	}
	return 1;
}

/* Whether name is an item of the comma list list. */
static int
in_list(const char *list, const char *name)
{
	size_t len = strlen(name);
	const char *p = list;

	while (p && *p) {
		const char *end = strchr(p, ',');
		size_t n = end ? (size_t)(end - p) : strlen(p);

		if (n == len && !strncmp(p, name, n))
			return 1;
		p = end ? end + 1 : NULL;
	}
	return 0;
}

/* Whether partition part is one the step may run in: one of those asked
 * for, or the default partition. */
static int
wanted_partition(const partition_info_t *part, const char *asked)
{
	if (!part->name)
		return 0;
	return asked[0] ? in_list(asked, part->name)
			: (part->flags & PART_FLAG_DEFAULT) != 0;
}

/* Whether node is in one of the partitions the step may run in. */
static int
wanted_node(const node_info_t *node, const partition_info_msg_t *parts,
	    const char *asked)
{
	uint32_t i;

	if (!node->name || !node->partitions)
		return 0;
	for (i = 0; i < parts->record_count; i++)
		if (wanted_partition(&parts->partition_array[i], asked) &&
		    in_list(node->partitions, parts->partition_array[i].name))
			return 1;
	return 0;
}

/* The smallest equal share per GPU (ddp_gpu_cpu_share) over the nodes of
 * the step's partitions that have at least gpus GPUs, with the node that
 * sets it described in p->cpus_note. Returns it, 0 when some such node has
 * none to give, or -1 (said in p->cpus_note) when slurmctld does not
 * answer or no node fits. */
static long
node_share(struct ddp_plugin *p, partition_info_msg_t *parts, const char *asked,
	   long gpus)
{
	node_info_msg_t *nodes = NULL;
	long best = -1;
	uint32_t i;

	if (slurm_load_node((time_t)0, &nodes, SHOW_ALL) != SLURM_SUCCESS ||
	    !nodes) {
		ddp_fmt(p->cpus_note, sizeof(p->cpus_note),
			"Slurm's default (cannot read the nodes from "
			"slurmctld: %s)",
			slurm_strerror(errno));
		return -1;
	}
	/* slurmctld leaves each node's partition list to the client. */
	slurm_populate_node_partitions(nodes, parts);
	for (i = 0; i < nodes->record_count; i++) {
		const node_info_t *n = &nodes->node_array[i];
		long ngpus = ddp_gres_gpu_count(n->gres), share;
		long cpus = n->cpus_efctv ? n->cpus_efctv : n->cpus;
		long cores = (long)n->sockets * n->cores - n->core_spec_cnt;

		if (!wanted_node(n, parts, asked) || ngpus < gpus || ngpus <= 0)
			continue;
		share = ddp_gpu_cpu_share(cpus, cores, n->threads, ngpus);
		if (best >= 0 && share >= best)
			continue;
		best = share;
		/* Only what --ddp-verbose shows. */
		ddp_fmt(p->cpus_note, sizeof(p->cpus_note),
			"%ld CPUs per GPU, each GPU's equal share of its "
			"node (%s: %ld CPUs, %ld cores, %ld GPUs)",
			share, n->name, cpus, cores, ngpus);
	}
	slurm_free_node_info_msg(nodes);
	if (best < 0)
		ddp_fmt(p->cpus_note, sizeof(p->cpus_note),
			"Slurm's default (no node of partition %s has %ld "
			"GPUs)",
			asked[0] ? asked : "(default)", gpus);
	return best;
}

/* Sets name=v in srun's environment; 1, or 0 (logged) when it cannot. */
static int
set_count(const char *name, long v)
{
	char val[32];

	if (ddp_fmt(val, sizeof(val), "%ld", v) < 0 ||
	    setenv(name, val, 1) < 0) {
		ddp_error("cannot set %s: %s", name, strerror(errno));
		return 0;
	}
	return 1;
}

/* A job's SLURM_CPUS_PER_TASK of n reaches srun: the Slurm before 23.11,
 * which reads only SRUN_CPUS_PER_TASK, gets it as that, so that a job's
 * --cpus-per-task reaches its --ddp steps on every version. Returns 1 when
 * it set the variable. */
static int
pass_on_cpus_per_task(struct ddp_plugin *p, long n)
{
	if (!strcmp(DDP_SLURM_SRUN_CPUS_PER_TASK_ENV, "SLURM_CPUS_PER_TASK") ||
	    !set_count(DDP_SLURM_SRUN_CPUS_PER_TASK_ENV, n))
		return 0;
	ddp_fmt(p->cpus_note, sizeof(p->cpus_note),
		"%ld CPUs per rank as SLURM_CPUS_PER_TASK states, passed on as "
		"%s",
		n, DDP_SLURM_SRUN_CPUS_PER_TASK_ENV);
	return 1;
}

/*
 * Inside an allocation, the job's SLURM_CPUS_PER_TASK given to each of
 * ranks ranks of a node must fit the job's CPUs on some node
 * (SLURM_JOB_CPUS_PER_NODE), or srun refuses the step with "More
 * processors requested than permitted": a job of one task per node with
 * --cpus-per-task=N, whose --ddp step runs one rank per GPU. Returns 0, or
 * -1 with p->cpus_error saying what would work.
 */
static int
check_job_cpus(struct ddp_plugin *p, long per_task, long ranks)
{
	const char *v = getenv("SLURM_JOB_CPUS_PER_NODE");
	unsigned *counts;
	long n, i, most = 0;

	if (!v || ranks <= 0 || per_task <= 0)
		return 0;
	counts = calloc(DDP_TASKS_MAX_NODES, sizeof(*counts));
	if (!counts)
		return 0;
	n = ddp_tasks_parse(v, counts, DDP_TASKS_MAX_NODES);
	for (i = 0; i < n; i++)
		if ((long)counts[i] > most)
			most = counts[i];
	free(counts);
	if (n <= 0 || per_task * ranks <= most)
		return 0;
	ddp_fmt(p->cpus_error, sizeof(p->cpus_error),
		"--ddp: %ld ranks per node with %ld CPUs each "
		"(SLURM_CPUS_PER_TASK, the job's --cpus-per-task) need %ld "
		"CPUs on a node, but the job has at most %ld on one "
		"(SLURM_JOB_CPUS_PER_NODE=%.40s): give the job "
		"--ntasks-per-node=%ld as well (one task per rank), or srun "
		"-c %ld",
		ranks, per_task, ranks * per_task, most, v, ranks,
		most / ranks > 0 ? most / ranks : 1);
	return -1;
}

/*
 * Gives every rank of a --ddp step a fair share of its node's CPUs before
 * srun reads its environment (spank-ddp(8), "CPUS OF A RANK"). What the
 * user states wins (-c, --cpus-per-gpu, --tres-per-task=cpu, --exclusive,
 * or their input variables). Inside an allocation the step keeps Slurm's
 * default, all of the job's CPUs on each node, which the placement shares
 * out evenly. Outside one, the partition's DefCpuPerGPU wins, then
 * ddp.conf's cpus_per_gpu; with share (the default) the step asks for
 * each GPU's equal share of the cores of the partition's nodes with
 * enough GPUs (the smallest such share), as SLURM_CPUS_PER_GPU. req is
 * srun's request scanned with its environment. Returns 1 when it changed
 * srun's environment, else 0; a failed query of slurmctld leaves Slurm's
 * default. p->cpus_note says what it did for --ddp-verbose: it runs before
 * srun reads -v, when the plugin's own log messages are not shown.
 */
static int
share_cpus(struct ddp_plugin *p, const struct ddp_srun_req *req,
	   long ranks_per_node)
{
	partition_info_msg_t *parts = NULL;
	long per_gpu = p->conf.cpus_per_gpu, def = 0;
	uint32_t i;
	int changed = 0;

	p->cpus_decided = 1;
	p->cpus_note[0] = '\0';
	if (req->cpus_by) {
		const char *v = getenv("SLURM_CPUS_PER_TASK");
		const char *srun_reads =
			getenv(DDP_SLURM_SRUN_CPUS_PER_TASK_ENV);
		long n;

		ddp_fmt(p->cpus_note, sizeof(p->cpus_note), "as %s states",
			req->cpus_by);
		/* Only a job's value that srun takes: 22.05 reads a set
		 * SRUN_CPUS_PER_TASK instead. */
		if (strcmp(req->cpus_by, "SLURM_CPUS_PER_TASK") != 0 || !v ||
		    (srun_reads && srun_reads != v) ||
		    ddp_parse_long(v, 1, 65535, &n) < 0 ||
		    check_job_cpus(p, n, ranks_per_node) < 0)
			return 0;
		return pass_on_cpus_per_task(p, n);
	}
	if (req->jobid || getenv("SLURM_JOB_ID") || getenv("SLURM_JOBID") ||
	    req->gpus_per_node <= 0 || per_gpu == DDP_CPUS_PER_GPU_OFF)
		return 0;
	if (slurm_load_partitions((time_t)0, &parts, SHOW_ALL) !=
		    SLURM_SUCCESS ||
	    !parts) {
		ddp_fmt(p->cpus_note, sizeof(p->cpus_note),
			"Slurm's default (cannot read the partitions from "
			"slurmctld: %s)",
			slurm_strerror(errno));
		return 0;
	}
	for (i = 0; i < parts->record_count && !def; i++)
		if (wanted_partition(&parts->partition_array[i],
				     req->partition))
			def = ddp_def_cpu_per_gpu(
				parts->partition_array[i].job_defaults_str);
	if (def) {
		/* Slurm applies it itself. */
		ddp_fmt(p->cpus_note, sizeof(p->cpus_note),
			"%ld CPUs per GPU, the partition's DefCpuPerGPU", def);
	} else if (per_gpu > 0) {
		ddp_fmt(p->cpus_note, sizeof(p->cpus_note),
			"%ld CPUs per GPU, ddp.conf's cpus_per_gpu", per_gpu);
		changed = set_count("SLURM_CPUS_PER_GPU", per_gpu);
	} else {
		per_gpu = node_share(p, parts, req->partition,
				     req->gpus_per_node);
		/* One CPU is what Slurm gives anyway. */
		if (per_gpu > 1)
			changed = set_count("SLURM_CPUS_PER_GPU", per_gpu);
	}
	slurm_free_partition_info_msg(parts);
	return changed;
}

/* Without --ddp-port, the site's port range must suit this host's
 * ephemeral ports (ddp_conf_check_ports); says what is wrong if not. */
static int
site_ports_ok(const struct ddp_plugin *p)
{
	char err[DDP_ERR_LEN];
	unsigned eph_lo, eph_hi;

	if (p->opts.port)
		return 0;
	ddp_read_ephemeral_range(&eph_lo, &eph_hi);
	if (ddp_conf_check_ports(&p->conf, eph_lo, eph_hi, err, sizeof(err)) <
	    0) {
		ddp_error("site configuration: %s; until the admin fixes it, "
			  "pass --ddp-port=N",
			  err);
		return -1;
	}
	return 0;
}

int
local_post_opt(struct ddp_plugin *p)
{
	struct ddp_srun_req req;
	char err[DDP_ERR_LEN], *buf = NULL, **argv = NULL;
	int argc = 0, rc = -1, mode, reexeced, drop = 0;
	long per_node = 0;

	reexeced = getenv(REEXEC_GUARD) != NULL;
	if (reexeced)
		unsetenv(REEXEC_GUARD);
	if (!p->opts.enabled) {
		if (p->opts.port || p->opts.bind >= 0 || p->opts.verbose)
			ddp_error("--ddp-port, --ddp-bind and --ddp-verbose "
				  "have no effect without --ddp");
		return 0;
	}
	if (p->conf_error[0])
		return plugin_refuse_bad_conf(p);
	if (p->opts.verbose && !reexeced)
		ddp_info("slurm-ddp %s", DDP_VERSION);
	if (site_ports_ok(p) < 0)
		return -1;
	if (read_cmdline(&buf, &argv, &argc) < 0) {
		ddp_error("cannot read srun's command line");
		goto out;
	}
	/* --ddp from sbatch: local_init did not see it, and srun has added
	 * the allocation's GPUs per node already; run it again without. */
	if (!reexeced && drop_alloc_gpus(p, argc, argv))
		drop = 1;
	if (p->dropped_gpus_per_node[0] && p->opts.verbose)
		ddp_info("not giving this step the allocation's "
			 "SLURM_GPUS_PER_NODE=%s: it asks for its GPUs in "
			 "total (-G) or per task, and would hold all of them",
			 p->dropped_gpus_per_node);
	if (ddp_srun_scan(argc, argv, env_get, &req, err, sizeof(err)) < 0) {
		ddp_error("%s", err);
		goto out;
	}
	p->kill_bad_exit = req.kill_bad_exit;
	if (req.help) {
		rc = 0;
		goto out;
	}
	mode = ddp_srun_decide(&req, &per_node, err, sizeof(err));
	if (mode < 0) {
		ddp_error("%s", err);
		goto out;
	}
	if (p->preset_per_node && p->opts.verbose)
		ddp_info(
			"node mode: %ld ranks per node (SLURM_NTASKS_PER_NODE)",
			p->preset_per_node);
	/* --ddp not on the command line: srun reads what share_cpus sets
	 * only when it runs again. */
	if (!reexeced && !p->cpus_decided &&
	    share_cpus(p, &req, mode == 1 ? per_node : req.ntasks_per_node))
		drop = 1;
	if (p->cpus_error[0]) {
		ddp_error("%s", p->cpus_error);
		goto out;
	}
	if (p->cpus_note[0] && p->opts.verbose)
		ddp_info("CPUs: %s", p->cpus_note);
	if ((mode == 1 || drop) && !reexeced) {
		reexec_srun(p, argc, argv, mode == 1 ? per_node : 0);
		goto out; /* exec failed */
	}
	rc = 0;
out:
	free(argv);
	free(buf);
	return rc;
}

/*
 * Node mode without running srun twice: srun calls slurm_spank_init before
 * it reads its options and environment, so SLURM_NTASKS_PER_NODE set here
 * counts as given, and local_post_opt then sees task mode; likewise an
 * unset SLURM_GPUS_PER_NODE is never added to the step. Only a literal
 * --ddp before the program is visible this early; anything else is left
 * to local_post_opt, which re-executes srun. Errors are reported there.
 */
void
local_init(struct ddp_plugin *p)
{
	struct ddp_srun_req req;
	char err[DDP_ERR_LEN], val[32], *buf = NULL, **argv = NULL;
	long per_node = 0;
	int argc = 0;

	if (getenv(REEXEC_GUARD) || read_cmdline(&buf, &argv, &argc) < 0)
		return;
	if (ddp_srun_scan(argc, argv, NULL, &req, err, sizeof(err)) == 0 &&
	    req.ddp)
		drop_alloc_gpus(p, argc, argv);
	if (ddp_srun_scan(argc, argv, env_get, &req, err, sizeof(err)) == 0 &&
	    req.ddp && !req.help &&
	    ddp_srun_decide(&req, &per_node, err, sizeof(err)) == 1 &&
	    ddp_fmt(val, sizeof(val), "%ld", per_node) == 0) {
		if (setenv("SLURM_NTASKS_PER_NODE", val, 1) == 0)
			p->preset_per_node = per_node;
		else
			ddp_error("cannot set SLURM_NTASKS_PER_NODE: %s",
				  strerror(errno));
	}
	if (ddp_srun_scan(argc, argv, env_get, &req, err, sizeof(err)) == 0 &&
	    req.ddp && !req.help)
		share_cpus(p, &req, req.ntasks_per_node);
	free(argv);
	free(buf);
}

/* Whether this srun is the one ddp-restart runs: its parent is the
 * supervisor the variable names. A variable inherited from further up
 * (an srun inside a task of a supervised step) does not count. */
static int
supervised(void)
{
	const char *v = getenv(DDP_RESTART_ENV_SUPERVISOR);
	long pid;

	return v && ddp_parse_long(v, 1, 0x7fffffffL, &pid) == 0 &&
	       (pid_t)pid == getppid();
}

int
local_restart(const struct ddp_plugin *p)
{
	char err[DDP_ERR_LEN], max[32], requeue_max[48], exe[PATH_MAX];
	char restart_on[64], on[48];
	char *abuf = NULL, **argv = NULL, *ebuf = NULL, **envp = NULL;
	char **nargv = NULL;
	int argc = 0, envc = 0, i, rc = -1;
	ssize_t n;

	if (p->opts.restart <= 0)
		return 0;
	if (!p->opts.enabled) {
		ddp_error("--ddp-restart has no effect without --ddp");
		return 0;
	}
	if (p->conf_error[0])
		return 0; /* local_post_opt refuses --ddp */
	if (ddp_opts_restart_allowed(&p->opts, p->conf.restart_max, err,
				     sizeof(err)) < 0) {
		ddp_error("%s", err);
		return -1;
	}
	if (supervised())
		return 0;
	if (!getenv("SLURM_JOB_ID")) {
		ddp_error("--ddp-restart needs an allocation: run srun inside "
			  "sbatch or salloc");
		return -1;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0 || (size_t)n >= sizeof(exe) - 1 ||
	    ddp_fmt(max, sizeof(max), "%ld", p->opts.restart) < 0 ||
	    ddp_fmt(requeue_max, sizeof(requeue_max), "--requeue-max=%u",
		    p->conf.check_requeue_max) < 0 ||
	    ddp_restart_on_format(p->opts.restart_on, on, sizeof(on)) < 0 ||
	    ddp_fmt(restart_on, sizeof(restart_on), "--restart-on=%s", on) <
		    0 ||
	    read_cmdline(&abuf, &argv, &argc) < 0 ||
	    read_proc_words("/proc/self/environ", &ebuf, &envp, &envc) < 0) {
		ddp_error("--ddp-restart: cannot read srun's command line and "
			  "environment");
		goto out;
	}
	exe[n] = '\0';
	nargv = calloc((size_t)argc + 5, sizeof(*nargv));
	if (!nargv)
		goto out;
	nargv[0] = (char *)p->conf.restart_path;
	nargv[1] = requeue_max;
	nargv[2] = restart_on;
	nargv[3] = max;
	nargv[4] = exe;
	for (i = 1; i < argc; i++)
		nargv[i + 4] = argv[i];
	/* The environment srun started with: what local_init or srun
	 * changed since is done again by the srun the supervisor runs. */
	fflush(NULL);
	execve(p->conf.restart_path, nargv, envp);
	ddp_error("--ddp-restart: cannot run %s: %s (ddp.conf's restart_path)",
		  p->conf.restart_path, strerror(errno));
out:
	free(nargv);
	free(argv);
	free(abuf);
	free(envp);
	free(ebuf);
	return rc;
}

int
local_alloc_post_opt(struct ddp_plugin *p)
{
	if (p->opts.enabled && p->conf_error[0])
		return plugin_refuse_bad_conf(p);
	return 0;
}
