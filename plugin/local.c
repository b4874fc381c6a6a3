/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The srun, sbatch and salloc side of spank_ddp.so: refuses impossible
 * requests before anything starts and turns a one-line srun into one rank
 * per GPU (node mode).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ddp_log.h"
#include "ddp_util.h"
#include "plugin.h"

/* Set in the environment of the srun that node mode re-executes, so that
 * it does not re-execute again. Removed before any task sees it. */
#define REEXEC_GUARD "SLURM_DDP_REEXEC"

int
plugin_refuse_bad_conf(const struct ddp_plugin *p)
{
	ddp_error("%s: --ddp cannot run until the admin fixes it",
		  p->conf_error);
	return -1;
}

/* Reads srun's own argv from /proc/self/cmdline. Caller frees both. */
static int
read_cmdline(char **bufp, char ***argvp, int *argcp)
{
	char *buf = NULL, **argv = NULL;
	size_t len = 0, cap = 0, i;
	int fd, argc = 0, rc = -1;
	ssize_t n;

	fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
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
	if (fd >= 0)
		close(fd);
	free(buf);
	free(argv);
	return rc;
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

int
local_post_opt(struct ddp_plugin *p)
{
	struct ddp_srun_req req;
	char err[DDP_ERR_LEN], *buf = NULL, **argv = NULL;
	unsigned eph_lo, eph_hi;
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
	ddp_read_ephemeral_range(&eph_lo, &eph_hi);
	if (!p->opts.port && ddp_conf_check_ports(&p->conf, eph_lo, eph_hi, err,
						  sizeof(err)) < 0) {
		ddp_error("site configuration: %s; until the admin fixes it, "
			  "pass --ddp-port=N",
			  err);
		return -1;
	}
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
	free(argv);
	free(buf);
}

int
local_alloc_post_opt(struct ddp_plugin *p)
{
	if (p->opts.enabled && p->conf_error[0])
		return plugin_refuse_bad_conf(p);
	return 0;
}
