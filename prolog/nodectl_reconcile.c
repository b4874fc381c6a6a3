/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ddp-nodectl reconcile and sweep: what jobs that are not live left on the
 * node (state, firewall elements, shared memory, scratch), and the shared
 * directories of finished jobs after retention. The live jobs are those
 * given and those Slurm names (squeue, scontrol listpids); when Slurm
 * cannot be asked, nothing is removed.
 */
#include "nodectl_cmd.h"

#include <dirent.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ddp_util.h"

#define MAX_LIVE 100000

static int
add_live(unsigned long **live, size_t *n, unsigned long id)
{
	unsigned long *v;

	if (*n >= MAX_LIVE)
		return -1;
	v = realloc(*live, (*n + 1) * sizeof(*v));
	if (!v)
		return -1;
	v[(*n)++] = id;
	*live = v;
	return 0;
}

/* The job ids left on the command line after the options, as live jobs. */
static int
add_live_args(int argc, char **argv, unsigned long **live, size_t *n)
{
	unsigned long id;

	for (; optind < argc; optind++) {
		if (nc_parse_jobid(argv[optind], &id) < 0 ||
		    add_live(live, n, id) < 0) {
			ddp_error("not a job id: %s", argv[optind]);
			return -1;
		}
	}
	return 0;
}

/* Job ids from the second column of "scontrol listpids" (local
 * slurmstepds only: slurmctld is not asked). */
static int
listpids(const struct ddp_conf *conf, unsigned long **live, size_t *n)
{
	char *argv[] = {(char *)conf->scontrol_path, "listpids", NULL};
	struct ddp_buf out = {0};
	char err[DDP_ERR_LEN], *line, *save = NULL;
	int rc, rv = -1;

	rc = nc_slurm_run(argv, &out, err, sizeof(err));
	/* With no step on the node scontrol (22.05) prints only its header
	 * line, says so on stderr and exits 1. */
	if (rc == 1 &&
	    (out.len == 0 || (strncmp(out.s, "PID", 3) == 0 &&
			      strchr(out.s, '\n') == out.s + out.len - 1))) {
		ddp_info("scontrol listpids: no job step on this node");
		rv = 0;
		goto out;
	}
	if (rc != 0) {
		ddp_error("scontrol listpids: %s", err);
		goto out;
	}
	for (line = strtok_r(out.s ? out.s : "", "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char pid[32], job[32];
		unsigned long id;

		if (sscanf(line, "%31s %31s", pid, job) == 2 &&
		    nc_parse_jobid(job, &id) == 0 && add_live(live, n, id) < 0)
			goto out;
	}
	rv = 0;
out:
	ddp_buf_free(&out);
	return rv;
}

/*
 * Job ids from squeue, which asks slurmctld: the jobs in any state but a
 * final one, all of them when node is NULL (the sweeper), else those
 * allocated to node, with or without a step there now (reconcile).
 * Any failure (slurmctld down, a line that is not a job id) is -1: then
 * nothing may be removed.
 */
static int
squeue(const struct ddp_conf *conf, const char *node, unsigned long **live,
       size_t *n)
{
	char path[PATH_MAX], nodearg[128], *slash, *line, *save = NULL;
	char err[DDP_ERR_LEN];
	char *argv[] = {path,
			"--noheader",
			"--format=%A",
			"--states=PENDING,CONFIGURING,RUNNING,SUSPENDED,"
			"STOPPED,COMPLETING,RESIZING,SIGNALING,STAGE_OUT",
			nodearg,
			NULL};
	struct ddp_buf out = {0};
	int rv = -1;

	ddp_fmt(path, sizeof(path), "%s", conf->scontrol_path);
	slash = strrchr(path, '/');
	if (!slash ||
	    ddp_fmt(slash + 1, sizeof(path) - (size_t)(slash + 1 - path),
		    "squeue") < 0)
		goto out;
	if (!node)
		argv[4] = NULL;
	else if (ddp_fmt(nodearg, sizeof(nodearg), "--nodelist=%s", node) < 0)
		goto out;
	if (nc_slurm_run(argv, &out, err, sizeof(err)) != 0) {
		ddp_error("%s: %s", path, err);
		goto out;
	}
	for (line = strtok_r(out.s ? out.s : "", "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		unsigned long id;

		if (nc_parse_jobid(line, &id) < 0) {
			ddp_error("%s: unexpected line '%.40s' (not a job id)",
				  path, line);
			goto out;
		}
		if (add_live(live, n, id) < 0)
			goto out;
	}
	rv = 0;
out:
	ddp_buf_free(&out);
	return rv;
}

/* Removes scratch dirs of jobs not live whose last change is older than
 * grace seconds (a job in its prolog has no step to list yet). */
static void
reconcile_scratch(const struct ddp_conf *conf, const unsigned long *live,
		  size_t nlive, long grace)
{
	char err[DDP_ERR_LEN];
	struct dirent *de;
	DIR *d = NULL;
	int fd;

	if (!conf->scratch_root[0])
		return;
	fd = ddp_jobdir_open_nofollow(conf->scratch_root, 0, 0);
	if (fd < 0 || !(d = fdopendir(fd))) {
		ddp_close(&fd);
		return;
	}
	while ((de = readdir(d))) {
		unsigned long id;
		struct stat st;
		size_t i;
		int keep = 0;

		if (nc_parse_jobid(de->d_name, &id) < 0)
			continue;
		for (i = 0; i < nlive; i++)
			if (live[i] == id)
				keep = 1;
		if (keep ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) <
			    0 ||
		    st.st_mtime + grace > time(NULL))
			continue;
		if (nc_rmtree_at(dirfd(d), de->d_name, err, sizeof(err)) < 0)
			ddp_error("scratch %s: %s", de->d_name, err);
		else
			ddp_info("removed scratch of job %lu", id);
	}
	closedir(d);
}

/* Adds the jobs with state younger than grace seconds (a job still in its
 * prolog may not be known to squeue on this node, nor have a step). */
static void
add_young_state(int statefd, long grace, unsigned long **live, size_t *n)
{
	struct dirent *de;
	unsigned long id;
	DIR *d = NULL;
	int fd;

	if (grace <= 0)
		return;
	fd = dup(statefd);
	if (fd < 0)
		return;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	rewinddir(d);
	while ((de = readdir(d))) {
		struct stat st;

		if (strncmp(de->d_name, "job.", 4) == 0 &&
		    nc_parse_jobid(de->d_name + 4, &id) == 0 &&
		    fstatat(statefd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) ==
			    0 &&
		    st.st_mtime + grace > time(NULL) &&
		    add_live(live, n, id) < 0)
			break;
	}
	closedir(d);
}

int
cmd_reconcile(const struct ddp_conf *conf, int argc, char **argv)
{
	static const struct option opts[] = {
		{"squeue", no_argument, NULL, 'q'},
		{"listpids", no_argument, NULL, 'l'},
		{"node", required_argument, NULL, 'n'},
		{"grace", required_argument, NULL, 'g'},
		{NULL, 0, NULL, 0},
	};
	unsigned long *live = NULL, none = 0;
	size_t nlive = 0;
	long grace = 600;
	char err[DDP_ERR_LEN], node[128];
	const char *given = NULL;
	int c, from_squeue = 0, from_listpids = 0, statefd = -1, lockfd = -1;
	int rv = NC_EX_USAGE;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
		if (c == 'q') {
			from_squeue = 1;
		} else if (c == 'l') {
			/* Older configurations say --listpids: it now asks
			 * slurmctld too, since a job with no step here at
			 * this moment (an salloc or batch job between sruns)
			 * is not finished. */
			from_squeue = from_listpids = 1;
		} else if (c == 'n') {
			given = optarg;
		} else if (c == 'g' && ddp_parse_long(optarg, 0, 86400 * 365,
						      &grace) == 0) {
			continue;
		} else {
			rv = NC_EX_SHOW_USAGE;
			goto out;
		}
	}
	if (add_live_args(argc, argv, &live, &nlive) < 0)
		goto out;
	rv = NC_EX_NODE;
	if (from_squeue) {
		if (nc_node_name(given, node, sizeof(node)) < 0)
			goto out;
		if (squeue(conf, node, &live, &nlive) < 0 ||
		    (from_listpids && listpids(conf, &live, &nlive) < 0)) {
			ddp_error("cannot tell which jobs run on %s: nothing "
				  "removed (run reconcile again once "
				  "slurmctld answers)",
				  node);
			goto out;
		}
	}
	statefd = nc_fw_state_lock(conf, &lockfd, err, sizeof(err));
	if (statefd < 0) {
		ddp_error("%s", err);
		goto out;
	}
	add_young_state(statefd, grace, &live, &nlive);
	if (conf->firewall) {
		/* An empty list means no job is live, not "no filter". */
		if (nc_fw_sync(conf, statefd, live ? live : &none, nlive, NULL,
			       0, NULL, NULL, 0, err, sizeof(err)) < 0) {
			ddp_error("%s", err);
			goto out;
		}
		ddp_info("reconciled firewall against %zu live jobs", nlive);
	}
	/* Scratch trees can be large: not under the lock. */
	nc_fw_lock_drop(&lockfd);
	nc_cleanup_shm(0, live, nlive, grace);
	nc_cleanup_step_keys(conf, 0, live ? live : &none, nlive);
	reconcile_scratch(conf, live, nlive, grace);
	rv = NC_EX_OK;
out:
	nc_fw_lock_drop(&lockfd);
	ddp_close(&statefd);
	free(live);
	return rv;
}

int
cmd_sweep(const struct ddp_conf *conf, int argc, char **argv)
{
	static const struct option opts[] = {
		{"dry-run", no_argument, NULL, 'n'},
		{"squeue", no_argument, NULL, 'q'},
		{NULL, 0, NULL, 0},
	};
	unsigned long *live = NULL;
	size_t nlive = 0;
	struct ddp_buf report = {0};
	char err[DDP_ERR_LEN];
	int c, dry = 0, from_squeue = 0, rc, rv = NC_EX_USAGE;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
		if (c == 'n') {
			dry = 1;
		} else if (c == 'q') {
			from_squeue = 1;
		} else {
			rv = NC_EX_SHOW_USAGE;
			goto out;
		}
	}
	if (add_live_args(argc, argv, &live, &nlive) < 0)
		goto out;
	rv = NC_EX_NODE;
	if (from_squeue && squeue(conf, NULL, &live, &nlive) < 0)
		goto out;
	rc = nc_sweep_shared(conf, live, nlive, time(NULL), dry, &report, err,
			     sizeof(err));
	if (report.len)
		fputs(report.s, stdout);
	if (rc < 0) {
		ddp_error("%s", err);
		goto out;
	}
	rv = rc == 0 ? NC_EX_OK : NC_EX_NODE;
out:
	ddp_buf_free(&report);
	free(live);
	return rv;
}
