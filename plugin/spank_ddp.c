/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * spank_ddp.so: adds --ddp to srun/sbatch/salloc, turns a one-line srun
 * into one rank per GPU, and gives every rank its data-parallel environment
 * and placement. This file holds the SPANK hooks, the option table and the
 * log sink; each hook dispatches on spank_context() to local.c (srun,
 * sbatch, salloc) or remote.c (slurmstepd).
 */
#include <stddef.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "slurm_compat.h"

#include "ddp_log.h"
#include "ddp_util.h"
#include "plugin.h"

#define EXPORT __attribute__((visibility("default")))

/* SPANK_PLUGIN() defines these; export them despite -fvisibility=hidden. */
EXPORT extern const char plugin_name[];
EXPORT extern const char plugin_type[];
EXPORT extern const unsigned int plugin_version;
SPANK_PLUGIN(ddp, 1)

/* The one instance: SPANK loads the plugin once per process. */
static struct ddp_plugin plugin = {
	.opts = {.bind = -1, .check = -1},
	.kill_bad_exit = -1,
	.watch = {.listen_fd = -1},
	.endtime = {.wake = {-1, -1}},
	.node = {.verdict_rfd = -1,
		 .verdict_wfd = -1,
		 .prelaunch_rfd = -1,
		 .prelaunch_wfd = -1,
		 .cause_rfd = -1,
		 .cause_wfd = -1},
};

static int opt_cb(int val, const char *optarg, int remote);

static struct spank_option options[] = {
	{"ddp", NULL,
	 "[ddp] data-parallel launch: one rank per GPU unless "
	 "--ntasks-per-node is given; sets RANK, WORLD_SIZE, LOCAL_RANK, "
	 "MASTER_ADDR, MASTER_PORT, ... and places each rank near its GPU",
	 0, 0, opt_cb},
	{"ddp-port", "N",
	 "[ddp] rendezvous port (MASTER_PORT), 1-65535; default: chosen per "
	 "step inside the site's port_range",
	 1, 1, opt_cb},
	{"ddp-bind", DDP_BIND_USAGE,
	 "[ddp] bind each rank's CPUs and memory: none, its NUMA node(s), or "
	 "its own cores (default: the site's default_bind)",
	 1, 2, opt_cb},
	{"ddp-verbose", NULL,
	 "[ddp] print one line per rank: rank, host, GPU, CPUs, NUMA node, NIC",
	 0, 3, opt_cb},
	{"ddp-check", DDP_CHECK_USAGE,
	 "[ddp] implies --ddp; every rank runs ddp-check before the program: "
	 "links, ports and GPUs of the step's nodes, one table, the bad node "
	 "named; fail (the default) ends the step, requeue also requeues a "
	 "batch job without the bad node, warn starts the program anyway, "
	 "off skips it (default: the site's check)",
	 2, 4, opt_cb},
	{"ddp-restart", "N",
	 "[ddp] with --ddp inside an allocation: when a rank fails and a "
	 "node is to blame, run the step again without that node on the "
	 "allocation's other nodes, at most N times (0 to the site's "
	 "restart_max)",
	 1, 5, opt_cb},
	{"ddp-restart-on", "LIST",
	 "[ddp] with --ddp-restart: also run the step again, on the same "
	 "nodes, when the program failed by itself: a comma list of exit "
	 "(a non-zero exit), crash (killed by a signal: SIGSEGV, SIGABRT, "
	 "...), oom (killed by the kernel's OOM killer), hang (a rank named "
	 "hung) or all (default: node alone, a node to blame)",
	 1, 6, opt_cb},
	{"ddp-stop-before", "SECS|auto|0",
	 "[ddp] stop every rank at the same step, checkpointed, this many "
	 "seconds before the job's end time: auto (the default: from the "
	 "measured step and checkpoint times), SECS, or 0 (off: no stop for "
	 "the time, nor on SIGTERM/SIGUSR1; default: the site's stop_before)",
	 1, 7, opt_cb},
	SPANK_OPTIONS_TABLE_END,
};

/* Every message of the plugin reaches Slurm here, with the "ddp: " prefix
 * (ddp_error and friends in common/ddp_log.h); ddp_user's lines go to the
 * user's terminal, not to a log. */
static void
slurm_sink(enum ddp_log_level level, const char *msg)
{
	switch (level) {
	case DDP_LOG_USER:
		slurm_spank_log("ddp: %s", msg);
		break;
	case DDP_LOG_ERROR:
		slurm_error("ddp: %s", msg);
		break;
	case DDP_LOG_INFO:
		slurm_info("ddp: %s", msg);
		break;
	case DDP_LOG_VERBOSE:
		slurm_verbose("ddp: %s", msg);
		break;
	case DDP_LOG_DEBUG:
		slurm_debug("ddp: %s", msg);
		break;
	}
}

static int
opt_cb(int val, const char *optarg, int remote)
{
	char err[DDP_ERR_LEN];

	if (val < 0 || (size_t)val >= sizeof(options) / sizeof(options[0]) - 1)
		return -1;
	if (ddp_opts_apply(&plugin.opts, options[val].name, optarg, err,
			   sizeof(err)) < 0) {
		ddp_error("%s", err);
		return -1;
	}
	return 0;
}

/* Reads the site configuration; a broken one is kept in conf_error and
 * fails only --ddp (see struct ddp_plugin). */
static void
load_conf(struct ddp_plugin *p, spank_context_t ctx, int ac, char **av)
{
	char err[DDP_ERR_LEN];

	if (ddp_plugstack_parse(&p->conf, p->topology_xml,
				sizeof(p->topology_xml), ac, av, err,
				sizeof(err)) == 0)
		return;
	if (ddp_fmt(p->conf_error, sizeof(p->conf_error),
		    "site configuration: %s", err) < 0)
		ddp_fmt(p->conf_error, sizeof(p->conf_error),
			"site configuration: %.400s...", err);
	/* Said where admins look (slurmd's log, srun -v); users without
	 * --ddp are not concerned. */
	if (ctx == S_CTX_REMOTE)
		ddp_info("%s (only --ddp steps fail)", p->conf_error);
	else
		ddp_verbose("%s (only --ddp fails)", p->conf_error);
}

/* Called in srun, sbatch, salloc and slurmstepd, before options are
 * parsed. */
EXPORT int
slurm_spank_init(spank_t sp, int ac, char **av)
{
	spank_context_t ctx = spank_context();
	size_t i;

	if (ctx != S_CTX_LOCAL && ctx != S_CTX_REMOTE && ctx != S_CTX_ALLOCATOR)
		return 0;
	ddp_log_set_sink(slurm_sink, DDP_LOG_DEBUG);
	load_conf(&plugin, ctx, ac, av);
	for (i = 0; options[i].name; i++) {
		spank_err_t rc = spank_option_register(sp, &options[i]);

		if (rc != ESPANK_SUCCESS) {
			ddp_error("cannot register --%s: %s", options[i].name,
				  spank_strerror(rc));
			return -1;
		}
	}
	if (ctx == S_CTX_LOCAL && !plugin.conf_error[0])
		local_init(&plugin);
	return 0;
}

/* Called in srun, sbatch, salloc and slurmstepd (as root) once the
 * options are parsed. */
EXPORT int
slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	switch (spank_context()) {
	case S_CTX_LOCAL:
		if (local_restart(&plugin) < 0)
			return -1;
		return local_post_opt(&plugin);
	case S_CTX_ALLOCATOR:
		return local_alloc_post_opt(&plugin);
	case S_CTX_REMOTE:
		if (plugin.opts.enabled)
			ddp_info("slurm-ddp %s, --ddp step", DDP_VERSION);
		remote_load_port_key(&plugin);
		remote_step_key(&plugin, sp);
		remote_post_opt(&plugin, sp);
		return 0;
	default:
		return 0;
	}
}

/* Called in slurmstepd as the job's user, before the tasks fork. */
EXPORT int
slurm_spank_user_init(spank_t sp, int ac, char **av)
{
	int rc;

	if (!spank_remote(sp))
		return 0;
	rc = remote_user_init(&plugin, sp);
	failure_user_init(&plugin);
	return rc;
}

/* Called in srun once the step exists, before its tasks launch. */
EXPORT int
slurm_spank_local_user_init(spank_t sp, int ac, char **av)
{
	if (spank_context() != S_CTX_LOCAL)
		return 0;
	stopping_local_user_init(&plugin, sp);
	return failure_local_user_init(&plugin, sp);
}

/* Called in slurmstepd (as root) as each task's exit is collected. */
EXPORT int
slurm_spank_task_exit(spank_t sp, int ac, char **av)
{
	if (!spank_remote(sp))
		return 0;
	return failure_task_exit(&plugin, sp);
}

/* Called in slurmstepd in each task, just before it execs. */
EXPORT int
slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	if (!spank_remote(sp))
		return 0;
	if (remote_task_init(&plugin, sp) == 0) {
		failure_task_init(&plugin, sp);
		stopping_task_init(&plugin, sp);
		return 0;
	}
	failure_task_init_failed(&plugin, sp);
	return -1;
}

/* Called in every context as the plugin is unloaded. */
EXPORT int
slurm_spank_exit(spank_t sp, int ac, char **av)
{
	if (spank_remote(sp)) {
		remote_exit(&plugin);
		failure_remote_exit(&plugin);
	} else if (spank_context() == S_CTX_LOCAL) {
		stopping_local_exit(&plugin);
		failure_local_exit(&plugin);
	}
	return 0;
}
