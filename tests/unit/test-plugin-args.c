/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of the plugin's Slurm-free parsing: option values, plugstack
 * arguments, the srun command-line scan and the node/task mode choice. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "ddp_util.h"
#include "tap.h"

static const char *fake_env[16][2];

static const char *
fake_getenv(const char *name)
{
	size_t i;

	for (i = 0; i < 16 && fake_env[i][0]; i++)
		if (!strcmp(fake_env[i][0], name))
			return fake_env[i][1];
	return NULL;
}

/*
 * The site file through plugstack's config=: its NCCL keys reach conf
 * unchanged, and a typo is reported with file, line and key (the plugin
 * keeps that message and raises it only when --ddp is used).
 */
static void
check_conf_file(void)
{
	char dir[] = "/tmp/test-plugin-args.XXXXXX", path[64], arg[80];
	char err[DDP_ERR_LEN], topo[256], want[96];
	char *av[2] = {arg, "nccl_socket_ifname==ib0"};
	struct ddp_conf conf;
	FILE *f;

	if (!mkdtemp(dir) ||
	    ddp_fmt(path, sizeof(path), "%s/ddp.conf", dir) < 0 ||
	    ddp_fmt(arg, sizeof(arg), "config=%s", path) < 0 ||
	    !(f = fopen(path, "w"))) {
		tap_ok(0, "config file: temporary file");
		return;
	}
	fputs("# site\nnccl_ib_hca = =mlx5_0,mlx5_1\n", f);
	fclose(f);
	tap_ok(ddp_plugstack_parse(&conf, topo, sizeof(topo), 2, av, err,
				   sizeof(err)) == 0 &&
		       !strcmp(conf.nccl_ib_hca, "=mlx5_0,mlx5_1") &&
		       !strcmp(conf.nccl_socket_ifname, "=ib0"),
	       "config=: the site's NCCL keys, a plugstack key on top");
	f = fopen(path, "w");
	if (f) {
		fputs("# site\n\nport_range = 29400-29999x\n", f);
		fclose(f);
	}
	ddp_fmt(want, sizeof(want), "%s:3: port_range: invalid value", path);
	if (!tap_ok(ddp_plugstack_parse(&conf, topo, sizeof(topo), 1, av, err,
					sizeof(err)) < 0 &&
			    strstr(err, want) && strstr(err, "29400-29999x"),
		    "config=: a typo is named by file, line, key and value"))
		tap_diag("%s", err);
	unlink(path);
	rmdir(dir);
}

/*
 * The keys ddp-nodectl reads too (the Prolog, Epilog, health check,
 * reconcile) are refused as plugstack arguments, naming the key and
 * ddp.conf; those of the plugin alone are taken.
 */
static void
check_node_side_keys(void)
{
	static const char *const node[] = {
		"port_range=30000-30100",
		"port_key=/etc/slurm/other.key",
		"shared_root=/shared/ddp",
		"shared_fstypes=nfs",
		"shared_timeout=5",
		"shared_mount=/shared",
		"scratch_root=/scratch",
		"retention_days=1",
		"firewall=off",
		"firewall_timeout=1d",
		"state_dir=/run/other",
		"nft_path=/sbin/nft",
		"scontrol_path=/bin/scontrol",
		"check_drain_jobs=1",
		"check_drain_users=1",
		"check_drain_window=1h",
	};
	static const char *const plugin_only[] = {
		"default_bind=numa",
		"nccl_ib_hca==mlx5_0",
		"nccl_socket_ifname==ib0",
		"check=warn",
		"check_min_fraction=0.3",
		"check_join_limit=30",
		"check_time_limit=30",
		"check_path=/opt/ddp-check",
		"check_requeue_max=1",
		"topology_cache=none",
		"cpus_per_gpu=off",
		"restart_max=1",
		"restart_path=/opt/ddp-restart",
		"kill_on_bad_exit=no",
		"stop_before=120",
		"stop_requeue_max=1",
	};
	char err[DDP_ERR_LEN], topo[256], want[160];
	char *av[1];
	struct ddp_conf conf;
	size_t i, refused = 0, taken = 0, nkeys = 0;
	const char *name;

	for (i = 0; i < sizeof(node) / sizeof(node[0]); i++) {
		size_t klen = strcspn(node[i], "=");

		av[0] = (char *)node[i];
		snprintf(want, sizeof(want),
			 "plugstack argument '%s': %.*s is read by the Prolog",
			 node[i], (int)klen, node[i]);
		if (ddp_plugstack_parse(&conf, topo, sizeof(topo), 1, av, err,
					sizeof(err)) < 0 &&
		    strstr(err, want) &&
		    strstr(err, "set it in " DDP_CONF_DEFAULT
				", not in plugstack.conf"))
			refused++;
		else
			tap_diag("%s: %s", node[i], err);
	}
	tap_ok(refused == sizeof(node) / sizeof(node[0]),
	       "plugstack: every key ddp-nodectl reads is refused, naming the "
	       "key and ddp.conf");
	for (i = 0; i < sizeof(plugin_only) / sizeof(plugin_only[0]); i++) {
		av[0] = (char *)plugin_only[i];
		if (ddp_plugstack_parse(&conf, topo, sizeof(topo), 1, av, err,
					sizeof(err)) == 0)
			taken++;
		else
			tap_diag("%s: %s", plugin_only[i], err);
	}
	tap_ok(taken == sizeof(plugin_only) / sizeof(plugin_only[0]),
	       "plugstack: the plugin's own keys are taken");
	for (i = 0; (name = ddp_conf_key_name(i)); i++)
		nkeys++;
	tap_ok(nkeys == sizeof(node) / sizeof(node[0]) +
				sizeof(plugin_only) / sizeof(plugin_only[0]),
	       "plugstack: every key of ddp.conf is either refused or taken "
	       "above (%zu keys)",
	       nkeys);
	tap_ok(ddp_conf_key_node_side("colour") == -1 &&
		       ddp_conf_key_node_side(NULL) == -1,
	       "node side: unknown keys are neither");
}

static int scan(struct ddp_srun_req *req, const char *line);

/* srun's -K/--kill-on-bad-exit and SLURM_KILL_BAD_EXIT, which the plugin
 * honours for --ddp steps: the command line wins, no value means on. */
static void
check_kill_bad_exit(void)
{
	static const struct {
		const char *line;
		int want;
	} cases[] = {
		{"srun --ddp ./t", -1},
		{"srun -K0 --ddp ./t", 0},
		{"srun -K --ddp ./t", 1},
		{"srun -K1 --ddp ./t", 1},
		{"srun -lK0 --ddp ./t", 0},
		{"srun --kill-on-bad-exit=0 --ddp ./t", 0},
		{"srun --kill-on-bad-exit --ddp ./t", 1},
		{"srun --ddp ./t -K0", -1},
	};
	struct ddp_srun_req r;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		tap_ok(scan(&r, cases[i].line) == 0 &&
			       r.kill_bad_exit == cases[i].want,
		       "kill-on-bad-exit: '%s' is %d", cases[i].line,
		       cases[i].want);
	fake_env[0][0] = "SLURM_KILL_BAD_EXIT";
	fake_env[0][1] = "0";
	tap_ok(scan(&r, "srun --ddp ./t") == 0 && r.kill_bad_exit == 0,
	       "kill-on-bad-exit: SLURM_KILL_BAD_EXIT=0 is off");
	tap_ok(scan(&r, "srun -K --ddp ./t") == 0 && r.kill_bad_exit == 1,
	       "kill-on-bad-exit: -K wins over SLURM_KILL_BAD_EXIT");
	memset(fake_env, 0, sizeof(fake_env));
}

/* What states a step's CPUs, the partition, and the share arithmetic. */
static void
check_cpus(void)
{
	struct ddp_srun_req r;
	static const struct {
		const char *line, *by;
	} stated[] = {
		{"srun -N2 --gpus-per-node=4 --ddp ./t", NULL},
		{"srun -N2 -c 8 --gpus-per-node=4 --ddp ./t",
		 "-c/--cpus-per-task"},
		{"srun -N2 -lc8 --gpus-per-node=4 --ddp ./t",
		 "-c/--cpus-per-task"},
		{"srun --cpus-per-task 3 --ddp ./t", "-c/--cpus-per-task"},
		{"srun --cpus-per-gpu=2 --ddp ./t", "--cpus-per-gpu"},
		{"srun --tres-per-task=cpu:4 --ddp ./t", "--tres-per-task"},
		{"srun --tres-per-task=gres/gpu:1 --ddp ./t", NULL},
		{"srun --exclusive --ddp ./t", "--exclusive"},
		{"srun --ddp ./t -c 8", NULL},
	};
	size_t i;

	memset(fake_env, 0, sizeof(fake_env));
	for (i = 0; i < sizeof(stated) / sizeof(stated[0]); i++) {
		int ok = scan(&r, stated[i].line) == 0 &&
			 (stated[i].by ? r.cpus_by && !strcmp(r.cpus_by,
							      stated[i].by)
				       : !r.cpus_by);

		if (!tap_ok(ok, "cpus: '%s' states them by %s", stated[i].line,
			    stated[i].by ? stated[i].by : "nothing"))
			tap_diag("cpus_by %s", r.cpus_by ? r.cpus_by : "NULL");
	}
	fake_env[0][0] = "SLURM_CPUS_PER_TASK";
	fake_env[0][1] = "8";
	tap_ok(scan(&r, "srun --ddp ./t") == 0 && r.cpus_by &&
		       !strcmp(r.cpus_by, "SLURM_CPUS_PER_TASK"),
	       "cpus: sbatch's SLURM_CPUS_PER_TASK is named");
	tap_ok(scan(&r, "srun --cpus-per-gpu=2 --ddp ./t") == 0 && r.cpus_by &&
		       !strcmp(r.cpus_by, "--cpus-per-gpu"),
	       "cpus: the command line is named before the environment");
	fake_env[0][0] = "SLURM_CPUS_PER_GPU";
	fake_env[0][1] = "3";
	tap_ok(scan(&r, "srun --ddp ./t") == 0 && r.cpus_by &&
		       !strcmp(r.cpus_by, "SLURM_CPUS_PER_GPU"),
	       "cpus: SLURM_CPUS_PER_GPU is named");
	fake_env[0][0] = "SLURM_PARTITION";
	fake_env[0][1] = "gpu";
	tap_ok(scan(&r, "srun --ddp ./t") == 0 && !r.cpus_by &&
		       !strcmp(r.partition, "gpu") && !r.jobid,
	       "cpus: SLURM_PARTITION is the partition");
	tap_ok(scan(&r, "srun -p a100,h100 --jobid 7 --ddp ./t") == 0 &&
		       !strcmp(r.partition, "a100,h100") && r.jobid,
	       "cpus: -p wins over SLURM_PARTITION; --jobid is seen");
	memset(fake_env, 0, sizeof(fake_env));

	/* 16 cores x 2 threads, 8 GPUs: 2 cores each. */
	tap_ok(ddp_gpu_cpu_share(32, 16, 2, 8) == 4, "share: 2 cores per GPU");
	/* 3 GPUs: 5 whole cores each, one core left over. */
	tap_ok(ddp_gpu_cpu_share(32, 16, 2, 3) == 10,
	       "share: whole cores, so every GPU's share fits");
	tap_ok(ddp_gpu_cpu_share(8, 4, 2, 8) == 1,
	       "share: fewer cores than GPUs: CPUs per GPU");
	tap_ok(ddp_gpu_cpu_share(4, 4, 1, 8) == 0 &&
		       ddp_gpu_cpu_share(32, 16, 2, 0) == 0,
	       "share: fewer CPUs than GPUs, or no GPU: none");
	tap_ok(ddp_gpu_cpu_share(12, 16, 2, 2) == 6,
	       "share: never more than the usable CPUs");

	tap_ok(ddp_gres_gpu_count("gpu:8") == 8 &&
		       ddp_gres_gpu_count("gpu:h100:8(S:0-1)") == 8 &&
		       ddp_gres_gpu_count(
			       "gpu:a100:2(S:0,1),gpu:v100:1,nic:2") == 3 &&
		       ddp_gres_gpu_count("nic:1") == 0 &&
		       ddp_gres_gpu_count("(null)") == 0 &&
		       ddp_gres_gpu_count(NULL) == 0 &&
		       ddp_gres_gpu_count("gpu") == 1 &&
		       ddp_gres_gpu_count("gpu:x") < 0,
	       "gres: the GPUs of a node's gres, every type, "
	       "socket lists ignored");
	tap_ok(ddp_def_cpu_per_gpu("DefCpuPerGPU=4") == 4 &&
		       ddp_def_cpu_per_gpu(
			       "DefMemPerGPU=1024,DefCpuPerGPU=6") == 6 &&
		       ddp_def_cpu_per_gpu("XDefCpuPerGPU=4") == 0 &&
		       ddp_def_cpu_per_gpu("DefCpuPerGPU=x") == 0 &&
		       ddp_def_cpu_per_gpu("(null)") == 0 &&
		       ddp_def_cpu_per_gpu(NULL) == 0,
	       "partition: DefCpuPerGPU read from the job defaults");
}

/* The error of the last scan(). */
static char scan_err[DDP_ERR_LEN];

static int
scan(struct ddp_srun_req *req, const char *line)
{
	char buf[512], *argv[64], *p;
	int argc = 0;

	snprintf(buf, sizeof(buf), "%s", line);
	for (p = buf; *p && argc < 63;) {
		argv[argc++] = p;
		p = strchr(p, ' ');
		if (!p)
			break;
		*p++ = '\0';
	}
	argv[argc] = NULL;
	scan_err[0] = '\0';
	return ddp_srun_scan(argc, argv, fake_getenv, req, scan_err,
			     sizeof(scan_err));
}

int
main(void)
{
	struct ddp_opts o = {0, 0, -1, 0, -1, 0, 0, ""};
	struct ddp_conf conf;
	struct ddp_srun_req r;
	char err[DDP_ERR_LEN], topo[256];
	char *av_ok[] = {"check_time_limit=30", "default_bind=numa",
			 "topology=/x/y.xml"};
	char *av_bad[] = {"check_time_limit=30", "colour=blue"};
	char *av_noeq[] = {"verbose"};
	char *av_rel[] = {"config=etc/ddp.conf"};
	long per = 0;

	tap_ok(ddp_opts_apply(&o, "ddp", NULL, err, sizeof(err)) == 0 &&
		       o.enabled,
	       "--ddp enables");
	tap_ok(ddp_opts_apply(&o, "ddp", NULL, err, sizeof(err)) == 0,
	       "--ddp twice is harmless");
	tap_ok(ddp_opts_apply(&o, "ddp-port", "29500", err, sizeof(err)) == 0 &&
		       o.port == 29500,
	       "--ddp-port sets the port");
	tap_ok(ddp_opts_apply(&o, "ddp-port", "29501", err, sizeof(err)) == 0 &&
		       o.port == 29501,
	       "a later --ddp-port wins (command line after environment)");
	tap_ok(ddp_opts_apply(&o, "ddp-port", "99999", err, sizeof(err)) < 0 &&
		       strstr(err, "--ddp-port=99999") &&
		       strstr(err, "1 to 65535") && o.port == 29501,
	       "--ddp-port=99999 refused, naming the option and the range");
	tap_ok(ddp_opts_apply(&o, "ddp-port", NULL, err, sizeof(err)) < 0,
	       "--ddp-port without value refused");
	tap_ok(ddp_opts_apply(&o, "ddp-bind", "sideways", err, sizeof(err)) <
			       0 &&
		       strstr(err, "none, numa or core"),
	       "--ddp-bind=sideways refused with the accepted values");
	tap_ok(ddp_opts_apply(&o, "ddp-bind", "numa", err, sizeof(err)) == 0 &&
		       o.bind == DDP_BIND_NUMA,
	       "--ddp-bind=numa");
	tap_ok(ddp_opts_apply(&o, "ddp-verbose", NULL, err, sizeof(err)) == 0 &&
		       o.verbose,
	       "--ddp-verbose");
	tap_ok(ddp_opts_apply(&o, "ddp-colour", "x", err, sizeof(err)) < 0,
	       "unknown option refused");
	{
		struct ddp_opts c = {0, 0, -1, 0, -1, 0, 0, ""};

		tap_ok(ddp_opts_apply(&c, "ddp-check", "off", err,
				      sizeof(err)) == 0 &&
			       c.check == DDP_CHECK_OFF && !c.enabled,
		       "--ddp-check=off overrides the site's check and does "
		       "not imply --ddp");
		tap_ok(ddp_opts_apply(&c, "ddp-check", "maybe", err,
				      sizeof(err)) < 0 &&
			       strstr(err, "--ddp-check=maybe") &&
			       strstr(err, "--ddp-check=warn") &&
			       strstr(err, "--ddp-check=requeue") &&
			       strstr(err, "--ddp-check=off") &&
			       c.check == DDP_CHECK_OFF && !c.enabled,
		       "--ddp-check=maybe refused, naming what works");
		tap_ok(ddp_opts_apply(&c, "ddp-check", NULL, err,
				      sizeof(err)) == 0 &&
			       c.check == DDP_CHECK_FAIL && c.enabled,
		       "--ddp-check alone: fail, and implies --ddp");
		c.enabled = 0;
		tap_ok(ddp_opts_apply(&c, "ddp-check", "warn", err,
				      sizeof(err)) == 0 &&
			       c.check == DDP_CHECK_WARN && c.enabled,
		       "--ddp-check=warn implies --ddp");
		c.enabled = 0;
		tap_ok(ddp_opts_apply(&c, "ddp-check", "requeue", err,
				      sizeof(err)) == 0 &&
			       c.check == DDP_CHECK_REQUEUE && c.enabled,
		       "--ddp-check=requeue implies --ddp");
		tap_ok(ddp_opts_apply(&c, "ddp-check", "Requeue", err,
				      sizeof(err)) < 0 &&
			       c.check == DDP_CHECK_REQUEUE,
		       "--ddp-check=Requeue refused: modes are lower case");
	}
	{
		struct ddp_opts c = {0, 0, -1, 0, -1, 0, 0, ""};

		tap_ok(ddp_opts_apply(&c, "ddp-restart", "2", err,
				      sizeof(err)) == 0 &&
			       c.restart == 2 && !c.enabled &&
			       ddp_opts_restart_allowed(&c, 3, err,
							sizeof(err)) == 0,
		       "--ddp-restart=2 within the site's restart_max of 3");
		tap_ok(ddp_opts_apply(&c, "ddp-restart-on", "crash,oom", err,
				      sizeof(err)) == 0 &&
			       c.restart_on == (DDP_RESTART_ON_NODE |
						(1u << DDP_CAUSE_CRASH) |
						(1u << DDP_CAUSE_OOM)),
		       "--ddp-restart-on=crash,oom: node, crash and oom");
		tap_ok(ddp_opts_apply(&c, "ddp-restart-on", "segfault", err,
				      sizeof(err)) < 0 &&
			       strstr(err, "--ddp-restart-on=segfault") &&
			       strstr(err, "exit, crash, oom, hang"),
		       "--ddp-restart-on with an unknown word refused, naming "
		       "the words that work (%s)",
		       err);
		tap_ok(ddp_opts_apply(&c, "ddp-restart-on", NULL, err,
				      sizeof(err)) < 0,
		       "--ddp-restart-on without a value refused");
		tap_ok(ddp_opts_restart_allowed(&c, 1, err, sizeof(err)) < 0 &&
			       strstr(err, "--ddp-restart=2") &&
			       strstr(err, "from 0 to 1") &&
			       strstr(err, "restart_max"),
		       "--ddp-restart above restart_max refused, naming the "
		       "ceiling");
		tap_ok(ddp_opts_restart_allowed(&c, 0, err, sizeof(err)) < 0 &&
			       strstr(err, "allows no restart"),
		       "restart_max = 0: every restart refused");
		tap_ok(ddp_opts_apply(&c, "ddp-restart", "0", err,
				      sizeof(err)) == 0 &&
			       c.restart == 0 &&
			       ddp_opts_restart_allowed(&c, 0, err,
							sizeof(err)) == 0,
		       "--ddp-restart=0: no restart, always allowed");
		tap_ok(ddp_opts_apply(&c, "ddp-restart", "two", err,
				      sizeof(err)) < 0 &&
			       strstr(err, "--ddp-restart=two") &&
			       strstr(err, "whole number") && c.restart == 0,
		       "--ddp-restart=two refused, naming the input");
		tap_ok(ddp_opts_apply(&c, "ddp-restart", "-1", err,
				      sizeof(err)) < 0 &&
			       ddp_opts_apply(&c, "ddp-restart", "101", err,
					      sizeof(err)) < 0 &&
			       ddp_opts_apply(&c, "ddp-restart", "2 ", err,
					      sizeof(err)) < 0 &&
			       ddp_opts_apply(&c, "ddp-restart", NULL, err,
					      sizeof(err)) < 0,
		       "--ddp-restart: negative, above 100, trailing space "
		       "and missing values refused");
	}
	{
		struct ddp_opts c = {0, 0, -1, 0, -1, 0, 0, ""};
		const char *bad[] = {"soon", "-5", "+30", "604801",
				     "1.5",  "",   NULL};
		size_t i;

		tap_ok(!c.stop_before[0],
		       "no --ddp-stop-before: ddp.conf's stop_before");
		tap_ok(ddp_opts_apply(&c, "ddp-stop-before", "120", err,
				      sizeof(err)) == 0 &&
			       !strcmp(c.stop_before, "120") && !c.enabled,
		       "--ddp-stop-before=120 kept as given");
		tap_ok(ddp_opts_apply(&c, "ddp-stop-before", "auto", err,
				      sizeof(err)) == 0 &&
			       !strcmp(c.stop_before, "auto"),
		       "--ddp-stop-before=auto, a later value replaces it");
		tap_ok(ddp_opts_apply(&c, "ddp-stop-before", "0", err,
				      sizeof(err)) == 0 &&
			       !strcmp(c.stop_before, "0"),
		       "--ddp-stop-before=0 (off)");
		for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
			tap_ok(ddp_opts_apply(&c, "ddp-stop-before", bad[i],
					      err, sizeof(err)) < 0 &&
				       strstr(err, "--ddp-stop-before=") &&
				       strstr(err,
					      bad[i] ? bad[i] : "(none)") &&
				       strstr(err, "auto") &&
				       strstr(err, "1 to 604800") &&
				       !strcmp(c.stop_before, "0"),
			       "--ddp-stop-before=%s refused, naming the input "
			       "and what works (%s)",
			       bad[i] ? bad[i] : "(none)", err);
	}
	tap_ok(scan(&r, "srun -N4 -x node9 --ddp prog -x a") == 0 &&
		       r.exclude && !strcmp(r.exclude, "node9") &&
		       r.opts_end == 5,
	       "scan: -x before the program, where the options end");
	tap_ok(scan(&r, "srun -xnode9 --exclude=node[1-2] -- prog") == 0 &&
		       r.exclude && !strcmp(r.exclude, "node[1-2]") &&
		       r.opts_end == 3,
	       "scan: the last --exclude wins, options end at --");
	tap_ok(scan(&r, "srun --exclude node3 --ddp-restart 2") == 0 &&
		       r.exclude && !strcmp(r.exclude, "node3") &&
		       r.opts_end == 5,
	       "scan: --exclude and --ddp-restart take the next word");
	tap_ok(scan(&r, "srun -N2 prog") == 0 && !r.exclude && r.opts_end == 2,
	       "scan: no exclusion");

	tap_ok(ddp_plugstack_parse(&conf, topo, sizeof(topo), 3, av_ok, err,
				   sizeof(err)) == 0 &&
		       conf.check_time_limit == 30 &&
		       conf.default_bind == DDP_BIND_NUMA &&
		       !strcmp(topo, "/x/y.xml"),
	       "plugstack arguments applied");
	tap_ok(ddp_plugstack_parse(&conf, topo, sizeof(topo), 2, av_bad, err,
				   sizeof(err)) < 0 &&
		       strstr(err, "colour"),
	       "unknown plugstack key named in the error");
	tap_ok(ddp_plugstack_parse(&conf, topo, sizeof(topo), 1, av_noeq, err,
				   sizeof(err)) < 0 &&
		       strstr(err, "key=value") &&
		       strstr(err, "config, topology, default_bind") &&
		       strstr(err, "stop_requeue_max)") &&
		       !strstr(err, "port_range") && !strstr(err, "state_dir"),
	       "plugstack argument without '=' refused, naming the plugin's "
	       "keys");
	check_node_side_keys();
	tap_ok(ddp_plugstack_parse(&conf, topo, sizeof(topo), 1, av_rel, err,
				   sizeof(err)) < 0 &&
		       strstr(err, "absolute"),
	       "relative config= refused");
	tap_ok(ddp_plugstack_parse(&conf, topo, sizeof(topo), 0, NULL, err,
				   sizeof(err)) == 0 &&
		       conf.port_min == 29400 && topo[0] == '\0',
	       "no arguments: defaults");
	check_conf_file();

	tap_ok(scan(&r, "srun --nodes=2 --gpus-per-node=4 --ddp ./train") ==
			       0 &&
		       r.nodes == 2 && r.gpus_per_node == 4 &&
		       r.ntasks_per_node < 0,
	       "scan: the issue's one-liner");
	tap_ok(ddp_srun_decide(&r, &per, err, sizeof(err)) == 1 && per == 4,
	       "decide: node mode with 4 ranks per node");
	tap_ok(r.ddp, "scan: --ddp before the program noticed");
	tap_ok(scan(&r, "srun -N2 --gpus-per-node=2 --ddp-check ./t") == 0 &&
		       r.ddp &&
		       scan(&r, "srun -N2 --ddp-check=warn ./t") == 0 && r.ddp,
	       "scan: --ddp-check and --ddp-check=warn count as --ddp");
	tap_ok(scan(&r, "srun -N2 --ddp-check=off ./t") == 0 && !r.ddp &&
		       scan(&r, "srun -N2 --ddp-check=maybe ./t") == 0 &&
		       !r.ddp,
	       "scan: --ddp-check=off (or a bad mode) is not --ddp");
	tap_ok(scan(&r, "srun --ddp-port=5 -N2 ./t --ddp") == 0 && !r.ddp,
	       "scan: --ddp-port and a --ddp after the program are not --ddp");
	tap_ok(scan(&r,
		    "srun --ddp-port 5 --ddp-bind core -N2 --gpus-per-node=2 "
		    "--ddp ./t") == 0 &&
		       r.gpus_per_node == 2 && r.ddp,
	       "scan: --ddp-port and --ddp-bind take a separate argument");
	tap_ok(scan(&r, "srun --tres-bind gres/gpu:closest --ddp prog") == 0 &&
		       r.ddp,
	       "scan: --tres-bind takes a separate argument (24.11)");
	tap_ok(scan(&r, "srun --container-id c1 --container-type oci "
			"--segment 2 --tasks-per-node 2 -N2 --ddp prog") == 0 &&
		       r.ddp && r.nodes == 2,
	       "scan: --container-id, --container-type, --segment and "
	       "--tasks-per-node take a separate argument (26.05)");
	tap_ok(scan(&r, "srun -F hosts.txt --cpu_bind cores -N2 --ddp ./t") ==
			       0 &&
		       r.ddp && r.nodes == 2,
	       "scan: -F and the alias --cpu_bind take a separate argument");
	tap_ok(scan(&r, "srun --exclusive --bcast --compress --resv-ports "
			"--ddp ./t") == 0 &&
		       r.ddp && r.cpus_by && !strcmp(r.cpus_by, "--exclusive"),
	       "scan: options whose value is optional leave the next word "
	       "alone");
	tap_ok(scan(&r, "srun -N3 -IN2 -K --ddp ./t") == 0 && r.nodes == 3 &&
		       r.ddp,
	       "scan: an optional short value is the rest of its word "
	       "(-IN2 is -I N2), never the next word");
	tap_ok(scan(&r,
		    "srun -N 2 --gres gpu:a100:2 ./t --ntasks-per-node=9") ==
			       0 &&
		       r.gpus_per_node == 2 && r.ntasks_per_node < 0,
	       "scan: stops at the program; --gres with a type");
	tap_ok(scan(&r, "srun -lN2 -G 8 ./t") == 0 && r.gpus_per_node == 4,
	       "scan: bundled short options and -G over -N");
	tap_ok(scan(&r, "srun -N2 --ntasks-per-node 2 --ddp python3 t.py") ==
			       0 &&
		       r.ntasks_per_node == 2,
	       "scan: separate argument of a long option");
	tap_ok(ddp_srun_decide(&r, &per, err, sizeof(err)) == 0,
	       "decide: task mode without GPUs is fine");
	tap_ok(scan(&r, "srun -N2 --ddp ./t") == 0 &&
		       ddp_srun_decide(&r, &per, err, sizeof(err)) < 0 &&
		       strstr(err, "--gpus-per-node"),
	       "decide: node mode without GPUs says what to add");
	tap_ok(scan(&r, "srun -N2 -n5 --gpus-per-node=2 ./t") == 0 &&
		       ddp_srun_decide(&r, &per, err, sizeof(err)) < 0 &&
		       strstr(err, "3 ranks on a node"),
	       "decide: -n 5 on 2 nodes with 2 GPUs each is impossible");
	tap_ok(scan(&r, "srun --ntasks-per-node=abc ./t") < 0,
	       "scan: malformed count refused");
	tap_ok(scan(&r, "srun --help") == 0 && r.help, "scan: --help noticed");
	/* -G is a total over the nodes: only its share per node is bound
	 * by DDP_GPU_MAX. */
	tap_ok(scan(&r, "srun -N64 -G 512 --ddp ./t") == 0 && r.gpus == 512 &&
		       r.gpus_per_node == 8 &&
		       ddp_srun_decide(&r, &per, err, sizeof(err)) == 1 &&
		       per == 8,
	       "scan: -G 512 over 64 nodes is 8 GPUs per node");
	tap_ok(scan(&r, "srun --nodes=2 --gpus=512 ./t") == 0 &&
		       r.gpus_per_node == 256,
	       "scan: --gpus=512 over 2 nodes is 256 per node, the most");
	if (!tap_ok(scan(&r, "srun -N2 -G 514 ./t") < 0 &&
			    strstr(scan_err, "-G/--gpus=514 over 2 nodes") &&
			    strstr(scan_err, "257 GPUs on one node") &&
			    strstr(scan_err, "256 per node"),
		    "scan: -G whose share of the nodes passes 256 is refused, "
		    "naming -G, the nodes and the limit"))
		tap_diag("%s", scan_err);
	tap_ok(scan(&r, "srun -N3 -G 769 ./t") < 0 &&
		       strstr(scan_err, "257 GPUs on one node"),
	       "scan: an uneven -G is judged by its rounded-up share");
	tap_ok(scan(&r, "srun -G 4096 ./t") == 0 && r.gpus == 4096 &&
		       r.gpus_per_node < 0,
	       "scan: -G without a node count leaves GPUs per node unknown");
	tap_ok(scan(&r, "srun -N2 -G 99999999 ./t") < 0 &&
		       strstr(scan_err, "-G=99999999") &&
		       !strstr(scan_err, "--G") &&
		       strstr(scan_err, "not a count"),
	       "scan: -G beyond any cluster is not a count");
	if (!tap_ok(scan(&r, "srun --gpus-per-node=300 ./t") < 0 &&
			    strstr(scan_err, "--gpus-per-node=300") &&
			    strstr(scan_err, "more than the 256 per node"),
		    "scan: --gpus-per-node=300 is refused naming the limit"))
		tap_diag("%s", scan_err);
	/* The command line alone (no getenv) decides whether srun must not
	 * add the allocation's SLURM_GPUS_PER_NODE. */
	{
		static const struct {
			const char *line;
			int conflict;
		} c[] = {
			{"srun -N1 --gpus=2 --ddp ./t", 1},
			{"srun -G 2 --ddp ./t", 1},
			{"srun -n2 --gpus-per-task=1 --ddp ./t", 1},
			{"srun -n4 --ntasks-per-gpu=2 --ddp ./t", 1},
			{"srun -G 2 --gpus-per-node=2 --ddp ./t", 0},
			{"srun --gres=gpu:2 -n2 --gpus-per-task=1 ./t", 0},
			{"srun --gpus-per-node=2 --ddp ./t", 0},
			{"srun -N2 --ntasks-per-node=2 --ddp ./t", 0},
			{"srun -N1 ./t -G 2", 0},
		};
		size_t i;
		int ok = 1;

		/* fake_env is still empty here: the command line alone. */
		for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
			if (scan(&r, c[i].line) < 0 ||
			    ddp_srun_alloc_gpus_conflict(&r) != c[i].conflict) {
				tap_diag("%s: want %d", c[i].line,
					 c[i].conflict);
				ok = 0;
			}
		}
		tap_ok(ok,
		       "alloc GPUs: -G and per-task GPUs without a per-node "
		       "count must not get SLURM_GPUS_PER_NODE");
	}
	tap_ok(scan(&r, "srun --gres=gpu:a100:200,gpu:v100:100 ./t") < 0 &&
		       strstr(scan_err, "--gres=gpu:a100:200,gpu:v100:100") &&
		       strstr(scan_err, "300 GPUs on one node"),
	       "scan: --gres adds its GPU types up against the limit");
	fake_env[0][0] = "SLURM_GPUS_PER_NODE";
	fake_env[0][1] = "gpu:4";
	fake_env[1][0] = "SLURM_NNODES";
	fake_env[1][1] = "2";
	tap_ok(scan(&r, "srun --ddp ./t") == 0 && r.gpus_per_node == 4 &&
		       r.nodes == 2,
	       "scan: sbatch's SLURM_GPUS_PER_NODE is used");
	fake_env[2][0] = "SLURM_NTASKS_PER_NODE";
	fake_env[2][1] = "2";
	tap_ok(scan(&r, "srun --ddp ./t") == 0 && r.ntasks_per_node == 2 &&
		       ddp_srun_decide(&r, &per, err, sizeof(err)) == 0,
	       "scan: SLURM_NTASKS_PER_NODE means task mode");
	tap_ok(scan(&r, "srun --ntasks-per-node=1 --ddp ./t") == 0 &&
		       r.ntasks_per_node == 1,
	       "scan: the command line wins over the environment");
	fake_env[0][1] = "512";
	if (!tap_ok(scan(&r, "srun --ddp ./t") < 0 &&
			    strstr(scan_err, "SLURM_GPUS_PER_NODE=512: ") &&
			    strstr(scan_err, "256 per node"),
		    "scan: a variable's error names the variable and the "
		    "reason"))
		tap_diag("%s", scan_err);
	check_cpus();
	check_kill_bad_exit();
	return tap_done();
}
