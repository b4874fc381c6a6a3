/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What several of ddp-nodectl's commands share (nodectl_cmd.h): the log
 * sink, running Slurm's commands, draining a node, the node's name and the
 * report of libddp's leftover shared memory and of the step keys a killed
 * slurmstepd left.
 */
#include "nodectl_cmd.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "ddp_util.h"
#include "stepkey.h"

#define SLURM_TIMEOUT_S 30

static char log_prefix[64];
static int use_syslog;

/* Set by main (ddp-nodectl.c) before the command runs (nodectl_cmd.h). */
const char *nc_conf_path = DDP_CONF_DEFAULT;
const char *nc_conf_error = "";

static void
sink(enum ddp_log_level level, const char *msg)
{
	if (use_syslog)
		syslog(level == DDP_LOG_ERROR ? LOG_ERR
		       : level == DDP_LOG_INFO || level == DDP_LOG_USER
			       ? LOG_INFO
			       : LOG_DEBUG,
		       "%s%s", log_prefix, msg);
	fprintf(stderr, "ddp-nodectl: %s%s%s\n",
		level == DDP_LOG_ERROR ? "error: " : "", log_prefix, msg);
}

void
nc_log_start(const char *ident, enum ddp_log_level max_level)
{
	use_syslog = ident != NULL;
	if (use_syslog)
		openlog(ident, LOG_PID, LOG_DAEMON);
	ddp_log_set_sink(sink, max_level);
}

void
nc_log_job(unsigned long jobid)
{
	ddp_fmt(log_prefix, sizeof(log_prefix), "job %lu: ", jobid);
}

void
nc_log_syslog_warning(const char *fmt, ...)
{
	va_list ap;

	if (!use_syslog)
		return;
	va_start(ap, fmt);
	vsyslog(LOG_WARNING, fmt, ap);
	va_end(ap);
}

int
nc_slurm_run(char *const argv[], struct ddp_buf *out, char *err, size_t errlen)
{
	static const char *const slurm_env[] = {"SLURM_CONF", NULL};

	return nc_run(argv, slurm_env, NULL, out, SLURM_TIMEOUT_S, err, errlen);
}

int
nc_scontrol_drain(const struct ddp_conf *conf, const char *node,
		  const char *reason, char *err, size_t errlen)
{
	char nodearg[128], reasonarg[300];
	char *argv[6];

	if (!nc_valid_nodename(node) ||
	    ddp_fmt(nodearg, sizeof(nodearg), "NodeName=%s", node) < 0 ||
	    ddp_fmt(reasonarg, sizeof(reasonarg), "Reason=%s", reason) < 0)
		return ddp_errf(err, errlen,
				"cannot drain '%.64s': bad node "
				"name or reason",
				node);
	argv[0] = (char *)conf->scontrol_path;
	argv[1] = "update";
	argv[2] = nodearg;
	argv[3] = "State=DRAIN";
	argv[4] = reasonarg;
	argv[5] = NULL;
	return nc_slurm_run(argv, NULL, err, errlen) != 0 ? -1 : 0;
}

int
nc_node_name(const char *given, char *node, size_t len)
{
	const char *env = getenv("SLURMD_NODENAME");
	char host[256];

	if (!given && env && env[0])
		given = env;
	if (!given) {
		if (gethostname(host, sizeof(host)) < 0)
			return -1;
		host[sizeof(host) - 1] = '\0';
		host[strcspn(host, ".")] = '\0';
		given = host;
	}
	if (!nc_valid_nodename(given) || ddp_fmt(node, len, "%s", given) < 0) {
		ddp_error("node name '%.64s' is not a valid Slurm node name "
			  "(give --node NAME as in slurm.conf)",
			  given);
		return -1;
	}
	return 0;
}

void
nc_cleanup_shm(unsigned long jobid, const unsigned long *live, size_t nlive,
	       long grace)
{
	char err[DDP_ERR_LEN];
	size_t removed = 0;

	if (nc_remove_shm(NC_SHM_DIR, jobid, live, nlive, grace, &removed, err,
			  sizeof(err)) < 0)
		ddp_error("shared memory: %s", err);
	if (removed)
		ddp_info("removed %zu shared-memory segment%s left by a step "
			 "killed while setting them up%s",
			 removed, removed == 1 ? "" : "s",
			 jobid ? "" : " (jobs not running)");
}

struct key_filter {
	unsigned long jobid;
	const unsigned long *live;
	size_t nlive;
};

static int
keep_key(unsigned long job, void *arg)
{
	const struct key_filter *f = arg;
	size_t i;

	if (f->jobid)
		return job != f->jobid;
	if (!f->live)
		return 1;
	for (i = 0; i < f->nlive; i++)
		if (f->live[i] == job)
			return 1;
	return 0;
}

void
nc_cleanup_step_keys(const struct ddp_conf *conf, unsigned long jobid,
		     const unsigned long *live, size_t nlive)
{
	struct key_filter f = {jobid, live, nlive};
	char err[DDP_ERR_LEN];
	unsigned removed = 0;

	if (!conf->state_dir[0])
		return;
	if (ddp_step_key_purge(conf->state_dir, keep_key, &f, &removed, err,
			       sizeof(err)) < 0)
		ddp_error("step keys: %s", err);
	if (removed)
		ddp_info("removed %u step key%s %s", removed,
			 removed == 1 ? "" : "s",
			 jobid	? "left by a killed slurmstepd"
			 : live ? "of jobs not running, or grown past a key"
				: "grown past a key by their owner");
}
