/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ddp-nodectl prolog and epilog: a job's shared and scratch directories
 * and its firewall opening, set up from the Slurm Prolog environment and
 * removed from the Epilog's. The prolog drains the node, with the reason,
 * when the node cannot run the job; the epilog never fails it.
 */
#include "nodectl_cmd.h"

#include <errno.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ddp_util.h"
#include "hostlist.h"

#define MAX_HOSTS 65536

/* Sets the drain reason; a drain is how Slurm learns why, not a bare
 * "Prolog error". */
static void
drain(const struct ddp_conf *conf, const char *node, const char *why)
{
	char reason[160], err[DDP_ERR_LEN];
	size_t i;

	ddp_fmt(reason, sizeof(reason), "ddp: %s", why);
	for (i = 0; reason[i]; i++)
		if ((unsigned char)reason[i] < 0x20 || reason[i] == 0x7f)
			reason[i] = '?';
	ddp_error("draining %s: %s", node ? node : "(unknown node)", reason);
	if (node && nc_scontrol_drain(conf, node, reason, err, sizeof(err)) < 0)
		ddp_error("scontrol update: %s", err);
}

struct job {
	unsigned long id;
	uid_t uid;
	gid_t gid;
	char user[65];
	const char *node;
	const char *nodelist;
};

/* Reads and checks the job from the Slurm Prolog/Epilog environment. */
static int
read_job(struct job *j, int need_user)
{
	const char *id = getenv("SLURM_JOB_ID"), *uid = getenv("SLURM_JOB_UID");
	const char *gid = getenv("SLURM_JOB_GID");
	struct passwd *pw;
	unsigned long v;

	memset(j, 0, sizeof(*j));
	/* The node first: it is needed to drain on any later error. */
	j->node = getenv("SLURMD_NODENAME");
	if (j->node && !nc_valid_nodename(j->node)) {
		ddp_error("SLURMD_NODENAME is not a node name");
		j->node = NULL;
		return -1;
	}
	if (nc_parse_jobid(id, &j->id) < 0) {
		ddp_error("SLURM_JOB_ID is not a job id");
		return -1;
	}
	nc_log_job(j->id);
	j->nodelist = getenv("SLURM_NODELIST");
	if (!need_user)
		return 0;
	if (nc_parse_id(uid, &v) < 0) {
		ddp_error("SLURM_JOB_UID is not a uid");
		return -1;
	}
	j->uid = (uid_t)v;
	/* The name comes from the password database, never from the
	 * (user-influenced) environment. */
	errno = 0;
	pw = getpwuid(j->uid);
	if (!pw || !ddp_jobdir_valid_user(pw->pw_name)) {
		ddp_error("uid %lu: %s", v,
			  pw ? "user name unusable as a directory name"
			     : "not in the password database");
		return -1;
	}
	ddp_fmt(j->user, sizeof(j->user), "%s", pw->pw_name);
	j->gid = pw->pw_gid;
	if (gid && nc_parse_id(gid, &v) == 0)
		j->gid = (gid_t)v;
	return 0;
}

/*
 * The job's shared and scratch directories. A fault of the node drains
 * it (-1); the user's own mess is only reported (0).
 */
static int
make_job_dirs(const struct ddp_conf *conf, const struct job *j)
{
	char err[DDP_ERR_LEN];
	int node_fault = 0, leftover = 0, rc;

	if (conf->shared_root[0] &&
	    nc_make_shared_dir(conf, j->user, j->uid, j->gid, j->id, err,
			       sizeof(err)) < 0) {
		/* A user's own mess (say a file where their directory
		 * goes) must not let them drain nodes; a hang must. */
		if (strncmp(err, "timed out", 9) == 0) {
			drain(conf, j->node, "shared dir creation timed out");
			return -1;
		}
		ddp_error("shared dir of %s: %s", j->user, err);
	}
	rc = nc_make_scratch_dir(conf, j->uid, j->gid, j->id, &node_fault,
				 &leftover, err, sizeof(err));
	if (leftover)
		ddp_info("scratch %s/%lu was left over from an earlier job: "
			 "%s",
			 conf->scratch_root, j->id,
			 rc == 0 ? "removed, made anew" : "not removed");
	if (rc < 0) {
		if (node_fault) {
			ddp_error("%s", err);
			drain(conf, j->node, err);
			return -1;
		}
		ddp_error("%s; no scratch directory for this job", err);
	}
	return 0;
}

int
cmd_prolog(const struct ddp_conf *conf, int argc, char **argv)
{
	struct ddp_hostlist hl = {0};
	struct nc_elems peers = {0};
	char err[DDP_ERR_LEN], shared[128];
	struct job j;
	unsigned lo, hi;
	size_t kept = 0;
	int statefd = -1, lockfd = -1;
	int rv = NC_EX_NODE, rc, wrote;

	if (read_job(&j, 1) < 0) {
		drain(conf, j.node, "bad prolog environment");
		goto out;
	}
	/* Before anything is made on /run: a key file a running step's
	 * user grew must not fail this job's Prolog. */
	nc_cleanup_step_keys(conf, 0, NULL, 0);
	if (nc_check_shared_root(conf, err, sizeof(err)) < 0) {
		drain(conf, j.node, err);
		goto out;
	}
	if (make_job_dirs(conf, &j) < 0)
		goto out;
	if (!conf->firewall) {
		rv = NC_EX_OK;
		goto out;
	}
	if (!j.nodelist || ddp_hostlist_parse(j.nodelist, MAX_HOSTS, &hl, err,
					      sizeof(err)) < 0) {
		ddp_error("SLURM_NODELIST: %s", j.nodelist ? err : "not set");
		drain(conf, j.node, "bad SLURM_NODELIST");
		goto out;
	}
	ddp_read_ephemeral_range(&lo, &hi);
	rc = nc_fw_peer_elems(conf, hl.hosts, hl.n, j.node, lo, hi, j.id,
			      &peers, err, sizeof(err));
	if (rc < 0) {
		ddp_error("out of memory");
		goto out;
	}
	if (rc > 0)
		ddp_error("peers that do not resolve (not opened): %s", err);
	statefd = nc_fw_state_lock(conf, &lockfd, err, sizeof(err));
	if (statefd < 0) {
		drain(conf, j.node, err);
		goto out;
	}
	/* Draining asks slurmctld: not while holding the lock. */
	if (!nc_fw_table_exists(conf) &&
	    nc_fw_install(conf, err, sizeof(err)) < 0) {
		nc_fw_lock_drop(&lockfd);
		drain(conf, j.node, "nftables table install failed");
		goto out;
	}
	wrote = nc_state_write(statefd, j.id,
			       time(NULL) + (time_t)conf->firewall_timeout,
			       &peers, err, sizeof(err));
	if (wrote == 1)
		ddp_error("%s is full: this job's firewall state took the "
			  "reserve the Prolog keeps there; free space on it "
			  "before another job's Prolog needs it",
			  conf->state_dir);
	else if (wrote == 0 && nc_state_reserve(statefd, err, sizeof(err)) < 0)
		ddp_error("%s: no reserve for the next Prolog: %s",
			  conf->state_dir, err);
	if (wrote < 0) {
		nc_fw_lock_drop(&lockfd);
		ddp_error("firewall state in %s: %s", conf->state_dir, err);
		drain(conf, j.node, "firewall state not written (state_dir)");
		goto out;
	}
	if (nc_fw_sync(conf, statefd, NULL, 0, &peers, j.id, &kept, shared,
		       sizeof(shared), err, sizeof(err)) < 0) {
		nc_fw_lock_drop(&lockfd);
		ddp_error("%s", err);
		drain(conf, j.node, "nftables update failed");
		goto out;
	}
	/* A shared element was there already: it now lasts as long as this
	 * job's opening and goes only with the last job needing it. */
	ddp_info("opened %zu firewall elements for %zu peer nodes%s",
		 peers.n - kept, hl.n ? hl.n - 1 : 0, shared);
	rv = NC_EX_OK;
out:
	nc_fw_lock_drop(&lockfd);
	ddp_close(&statefd);
	nc_elems_free(&peers);
	ddp_hostlist_free(&hl);
	return rv;
}

/* The epilog never fails the node: what it cannot clean up now is logged,
 * expires (firewall) or is caught by reconcile. The firewall goes first:
 * the job's state is removed before waiting for the lock, so that even an
 * Epilog killed while it waits leaves nothing the next update keeps; a
 * large scratch tree is removed last. */
int
cmd_epilog(const struct ddp_conf *conf, int argc, char **argv)
{
	struct nc_elems mine = {0};
	char err[DDP_ERR_LEN], shared[128];
	struct job j;
	int statefd = -1, lockfd = -1;
	size_t kept = 0;

	if (read_job(&j, 0) < 0)
		return NC_EX_OK;
	if (!conf->firewall)
		goto scratch;
	statefd = nc_fw_state_open(conf, err, sizeof(err));
	if (statefd < 0) {
		ddp_error("firewall cleanup: %s", err);
		goto scratch;
	}
	/* What the job opened, to say what stays for other jobs. */
	if (nc_state_read(statefd, j.id, &mine) < 0)
		ddp_debug("no firewall state for this job");
	if (nc_state_remove(statefd, j.id, err, sizeof(err)) < 0) {
		ddp_error("firewall cleanup: %s", err);
		goto scratch;
	}
	lockfd = nc_fw_lock_take(conf, statefd, err, sizeof(err));
	if (lockfd < 0) {
		ddp_error("firewall cleanup: %s; the job's state is removed, "
			  "so the next prolog, epilog or reconcile on this "
			  "node removes its elements",
			  err);
		goto scratch;
	}
	if (nc_fw_sync(conf, statefd, NULL, 0, &mine, j.id, &kept, shared,
		       sizeof(shared), err, sizeof(err)) < 0)
		ddp_error("firewall cleanup: %s", err);
	else if (mine.n)
		ddp_info("removed %zu firewall elements%s", mine.n - kept,
			 shared);
	else
		ddp_verbose("firewall elements removed");
	nc_fw_lock_drop(&lockfd);
scratch:
	nc_cleanup_shm(j.id, NULL, 0, 0);
	nc_cleanup_step_keys(conf, j.id, NULL, 0);
	if (nc_remove_scratch_dir(conf, j.id, err, sizeof(err)) < 0)
		ddp_error("scratch: %s", err);
	nc_fw_lock_drop(&lockfd);
	ddp_close(&statefd);
	nc_elems_free(&mine);
	return NC_EX_OK;
}
