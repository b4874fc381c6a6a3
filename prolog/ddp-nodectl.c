/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ddp-nodectl: the helper behind slurm-ddp's Prolog and Epilog. The one
 * file that speaks to Slurm (environment, scontrol); decisions are in the
 * Slurm-free core (nodectl.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "ddp_conf.h"
#include "ddp_log.h"
#include "ddp_util.h"
#include "hostlist.h"
#include "nodectl.h"
#include "port.h"
#include "sitekey.h"
#include "verdict.h"

#define NFT_TIMEOUT_S 30
#define SLURM_TIMEOUT_S 30
/* The lock on the firewall state: a holder gives up once it has held it
 * LOCK_HOLD_S seconds (every nft call under the lock shares that budget,
 * and nothing else under it can block), and a waiter waits longer than
 * that, so an Epilog never times out behind a healthy holder. */
#define LOCK_HOLD_S 90
#define LOCK_WAIT_S (LOCK_HOLD_S + 60)
#define MAX_HOSTS 65536
#define MAX_LIVE 100000

/* Exit statuses: 0 fine, 1 the node cannot run the job (drained), 2 usage
 * or configuration error. */
enum { EX_OK = 0, EX_NODE = 1, EX_USAGE = 2 };

static char log_prefix[64];
static int use_syslog;
/* While the state lock is held: when its hold budget runs out. */
static time_t lock_deadline;

static void
sink(enum ddp_log_level level, const char *msg)
{
	if (use_syslog)
		syslog(level == DDP_LOG_ERROR  ? LOG_ERR
		       : level == DDP_LOG_INFO ? LOG_INFO
					       : LOG_DEBUG,
		       "%s%s", log_prefix, msg);
	fprintf(stderr, "ddp-nodectl: %s%s%s\n",
		level == DDP_LOG_ERROR ? "error: " : "", log_prefix, msg);
}

static const char *const slurm_env[] = {"SLURM_CONF", NULL};

static void
usage(FILE *f)
{
	fprintf(f,
		"usage: ddp-nodectl [-c CONF] [-v] COMMAND [ARGS]\n"
		"  prolog                 per-job setup (Slurm Prolog "
		"environment)\n"
		"  epilog                 per-job cleanup (Slurm Epilog "
		"environment)\n"
		"  install                create scratch_root and state_dir, "
		"(re)create the\n"
		"                         nftables table (boot time)\n"
		"  reconcile [--squeue|--listpids] [--node NAME] [--grace S] "
		"[JOBID...]\n"
		"                         drop firewall elements and scratch "
		"of jobs not live\n"
		"  sweep [--dry-run] [--squeue] [JOBID...]\n"
		"                         remove shared dirs of finished jobs "
		"after retention\n"
		"  show                   print the effective configuration\n"
		"  port JOBID STEPID      print the MASTER_PORT srun --ddp "
		"chooses for the step\n"
		"                         (reads port_key: root; the same on "
		"every node)\n"
		"  health [--node NAME] [--drain]\n"
		"                         apply the drain rule to the node's "
		"ddp-check verdicts;\n"
		"                         exit 1 when a drain is due; --drain "
		"drains it (health check)\n"
		"  verdicts [--node NAME|--all] [--since SECONDS]\n"
		"                         show the node's recent ddp-check "
		"verdicts\n"
		"CONF defaults to $DDP_CONF, else %s.\n",
		DDP_CONF_DEFAULT);
}

/* Drains node with reason, through scontrol. Returns 0 or -1 with err. */
static int
scontrol_drain(const struct ddp_conf *conf, const char *node,
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
	return nc_run(argv, slurm_env, NULL, NULL, SLURM_TIMEOUT_S, err,
		      errlen) != 0
		       ? -1
		       : 0;
}

/* Sets the drain reason; a drain is how Slurm learns why, not a bare
 * "Prolog error". */
static void
drain(const struct ddp_conf *conf, const char *node, const char *why)
{
	char reason[160], err[NC_ERR_LEN];
	size_t i;

	ddp_fmt(reason, sizeof(reason), "ddp: %s", why);
	for (i = 0; reason[i]; i++)
		if ((unsigned char)reason[i] < 0x20 || reason[i] == 0x7f)
			reason[i] = '?';
	ddp_error("draining %s: %s", node ? node : "(unknown node)", reason);
	if (node && scontrol_drain(conf, node, reason, err, sizeof(err)) < 0)
		ddp_error("scontrol update: %s", err);
}

static int
nft(const struct ddp_conf *conf, const char *script, struct nc_buf *out,
    char *const *args, char *err, size_t errlen)
{
	char *argv[12];
	size_t n = 0, i;
	unsigned timeout = NFT_TIMEOUT_S;

	if (lock_deadline) {
		time_t left = lock_deadline - time(NULL);

		if (left <= 0) {
			ddp_errf(err, errlen,
				 "nft not run: the state lock was held %d s, "
				 "its limit",
				 LOCK_HOLD_S);
			return -1;
		}
		if (left < (time_t)timeout)
			timeout = (unsigned)left;
	}
	argv[n++] = (char *)conf->nft_path;
	if (script) {
		argv[n++] = "-f";
		argv[n++] = "-";
	}
	for (i = 0; args && args[i] && n < 11; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	return nc_run(argv, NULL, script, out, timeout, err, errlen);
}

static int
table_exists(const struct ddp_conf *conf)
{
	char *args[] = {"list", "tables", "inet", NULL};
	struct nc_buf out = {0};
	char err[NC_ERR_LEN];
	int found;

	/* Listing all inet tables succeeds (and prints nothing on stderr)
	 * whether or not ours is there. */
	found = nft(conf, NULL, &out, args, err, sizeof(err)) == 0 && out.s &&
		strstr(out.s, "table inet " NC_TABLE "\n") != NULL;
	nc_buf_free(&out);
	return found;
}

static int
install_table(const struct ddp_conf *conf, char *err, size_t errlen)
{
	struct nc_buf script = {0};
	unsigned lo, hi;
	int rv = -1;

	ddp_read_ephemeral_range(&lo, &hi);
	if (ddp_conf_check_ports(conf, lo, hi, err, errlen) < 0)
		ddp_error("%s", err);
	if (nc_fw_install_script(conf, lo, hi, &script) < 0) {
		ddp_errf(err, errlen, "out of memory");
		goto out;
	}
	if (nft(conf, script.s, NULL, NULL, err, errlen) != 0)
		goto out;
	ddp_info("installed table inet %s guarding %u-%u and %u-%u", NC_TABLE,
		 conf->port_min, conf->port_max, lo, hi);
	rv = 0;
out:
	nc_buf_free(&script);
	return rv;
}

/* Opens this network namespace's state directory, <state_dir>/net-<inode>
 * (state_dir root-owned, not writable by others, created when missing),
 * without taking the lock. */
static int
open_state(const struct ddp_conf *conf, char *err, size_t errlen)
{
	struct stat st;
	char sub[64];
	int dfd, nfd = -1, squatted;

	dfd = ddp_jobdir_open_root(conf->state_dir, "state dir", &squatted, err,
				   errlen);
	if (dfd < 0)
		return -1;
	/* The firewall state belongs to a network namespace: nodes that
	 * share one (several slurmd on a host) share it, nodes in their own
	 * (containers, the test cluster) must not see each other's. */
	if (stat("/proc/self/ns/net", &st) < 0)
		return dfd;
	ddp_fmt(sub, sizeof(sub), "net-%llu", (unsigned long long)st.st_ino);
	if (mkdirat(dfd, sub, 0700) < 0 && errno != EEXIST) {
		ddp_errf(err, errlen, "state dir %s/%s: %s", conf->state_dir,
			 sub, strerror(errno));
		goto out;
	}
	nfd = openat(dfd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (nfd < 0)
		ddp_errf(err, errlen, "state dir %s/%s: %s", conf->state_dir,
			 sub, strerror(errno));
out:
	close(dfd);
	return nfd;
}

/* Takes the lock in the state directory dfd, waiting at most LOCK_WAIT_S
 * seconds, and starts the hold budget. Returns the lock fd or -1. */
static int
take_lock(const struct ddp_conf *conf, int dfd, char *err, size_t errlen)
{
	time_t deadline = time(NULL) + LOCK_WAIT_S;
	int fd;

	fd = openat(dfd, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
		    0600);
	if (fd < 0) {
		ddp_errf(err, errlen, "lock %s/lock: %s", conf->state_dir,
			 strerror(errno));
		return -1;
	}
	/* Prologs of different jobs run at once; a stuck holder gives up
	 * after LOCK_HOLD_S, so this wait ends. */
	while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno != EWOULDBLOCK || time(NULL) >= deadline) {
			ddp_errf(err, errlen, "lock %s/lock: %s",
				 conf->state_dir,
				 errno == EWOULDBLOCK ? "timed out"
						      : strerror(errno));
			close(fd);
			return -1;
		}
		usleep(20000);
	}
	lock_deadline = time(NULL) + LOCK_HOLD_S;
	return fd;
}

static void
drop_lock(int *lockfd)
{
	if (*lockfd >= 0)
		close(*lockfd);
	*lockfd = -1;
	lock_deadline = 0;
}

/* Opens the state directory and takes its lock; returns the directory fd
 * and stores the lock fd. */
static int
lock_state(const struct ddp_conf *conf, int *lockfd, char *err, size_t errlen)
{
	int dfd = open_state(conf, err, errlen);

	*lockfd = -1;
	if (dfd < 0)
		return -1;
	*lockfd = take_lock(conf, dfd, err, errlen);
	if (*lockfd < 0) {
		close(dfd);
		return -1;
	}
	return dfd;
}

static int
list_set(const struct ddp_conf *conf, const char *set, struct nc_elems *out,
	 char *err, size_t errlen)
{
	char *args[] = {"-n",	  "list",      "set", "inet",
			NC_TABLE, (char *)set, NULL};
	struct nc_buf text = {0};
	int rv = -1;

	if (nft(conf, NULL, &text, args, err, errlen) != 0)
		goto out;
	rv = nc_fw_parse_listing(text.s ? text.s : "", out, err, errlen);
out:
	nc_buf_free(&text);
	return rv;
}

/* ", kept N shared with job A" (or "jobs A,B,C", "and others" past 4)
 * for the N of mine other jobs in desired need; "" when none. Returns N. */
static size_t
describe_shared(const struct nc_elems *mine, const struct nc_elems *desired,
		unsigned long self, char *buf, size_t len)
{
	unsigned long with[5];
	size_t nwith, n, i, used;
	int w;

	buf[0] = '\0';
	n = nc_fw_shared(mine, desired, self, with, 5, &nwith);
	if (n == 0)
		return 0;
	w = snprintf(buf, len, ", kept %zu shared with job%s ", n,
		     nwith > 1 ? "s" : "");
	if (w < 0 || (size_t)w >= len)
		return n;
	used = (size_t)w;
	for (i = 0; i < nwith && i < 4; i++) {
		w = snprintf(buf + used, len - used, "%s%lu", i ? "," : "",
			     with[i]);
		if (w < 0 || (size_t)w >= len - used)
			return n;
		used += (size_t)w;
	}
	if (nwith > 4)
		snprintf(buf + used, len - used, " and others");
	return n;
}

/* Makes the sets match the live jobs' state files. With mine (job
 * self's elements), stores in *kept how many of them other live jobs need
 * and describes them in shared (see describe_shared). */
static int
sync_firewall(const struct ddp_conf *conf, int statefd,
	      const unsigned long *live, size_t nlive,
	      const struct nc_elems *mine, unsigned long self, size_t *kept,
	      char *shared, size_t sharedlen, char *err, size_t errlen)
{
	struct nc_elems actual = {0}, desired = {0};
	struct nc_buf script = {0};
	time_t now = time(NULL);
	int rv = -1, rc;

	if (kept)
		*kept = 0;
	if (shared)
		shared[0] = '\0';
	rc = nc_state_read_all(statefd, now, live, nlive, &desired, err,
			       errlen);
	if (rc < 0)
		goto out;
	if (rc > 0)
		ddp_error("state: %s (removed)", err);
	if (mine && kept && shared)
		*kept = describe_shared(mine, &desired, self, shared,
					sharedlen);
	if (!table_exists(conf)) {
		rv = 0; /* nothing to remove; the prolog installs first */
		goto out;
	}
	if (list_set(conf, NC_SET4, &actual, err, errlen) < 0 ||
	    list_set(conf, NC_SET6, &actual, err, errlen) < 0)
		goto out;
	if (nc_fw_sync_script(&actual, &desired, now, &script) < 0) {
		ddp_errf(err, errlen, "out of memory");
		goto out;
	}
	if (script.len) {
		ddp_debug("nft script:\n%s", script.s);
		if (nft(conf, script.s, NULL, NULL, err, errlen) != 0)
			goto out;
	}
	rv = 0;
out:
	nc_elems_free(&actual);
	nc_elems_free(&desired);
	nc_buf_free(&script);
	return rv;
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
	ddp_fmt(log_prefix, sizeof(log_prefix), "job %lu: ", j->id);
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

static int
cmd_prolog(const struct ddp_conf *conf)
{
	struct ddp_hostlist hl = {0};
	struct nc_elems peers = {0};
	char err[NC_ERR_LEN], shared[128];
	struct job j;
	unsigned lo, hi;
	size_t kept = 0;
	int node_fault = 0, leftover = 0, statefd = -1, lockfd = -1;
	int rv = EX_NODE, rc;

	if (read_job(&j, 1) < 0) {
		drain(conf, j.node, "bad prolog environment");
		goto out;
	}
	if (nc_check_shared_root(conf, err, sizeof(err)) < 0) {
		drain(conf, j.node, err);
		goto out;
	}
	if (conf->shared_root[0] &&
	    nc_make_shared_dir(conf, j.user, j.uid, j.gid, j.id, err,
			       sizeof(err)) < 0) {
		/* A user's own mess (say a file where their directory
		 * goes) must not let them drain nodes; a hang must. */
		if (strncmp(err, "timed out", 9) == 0) {
			drain(conf, j.node, "shared dir creation timed out");
			goto out;
		}
		ddp_error("shared dir of %s: %s", j.user, err);
	}
	rc = nc_make_scratch_dir(conf, j.uid, j.gid, j.id, &node_fault,
				 &leftover, err, sizeof(err));
	if (leftover)
		ddp_info("scratch %s/%lu was left over from an earlier job: "
			 "%s",
			 conf->scratch_root, j.id,
			 rc == 0 ? "removed, made anew" : "not removed");
	if (rc < 0) {
		if (node_fault) {
			ddp_error("%s", err);
			drain(conf, j.node, err);
			goto out;
		}
		ddp_error("%s; no scratch directory for this job", err);
	}
	if (!conf->firewall) {
		rv = EX_OK;
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
	statefd = lock_state(conf, &lockfd, err, sizeof(err));
	if (statefd < 0) {
		drain(conf, j.node, err);
		goto out;
	}
	/* Draining asks slurmctld: not while holding the lock. */
	if (!table_exists(conf) && install_table(conf, err, sizeof(err)) < 0) {
		drop_lock(&lockfd);
		drain(conf, j.node, "nftables table install failed");
		goto out;
	}
	if (nc_state_write(statefd, j.id,
			   time(NULL) + (time_t)conf->firewall_timeout, &peers,
			   err, sizeof(err)) < 0 ||
	    sync_firewall(conf, statefd, NULL, 0, &peers, j.id, &kept, shared,
			  sizeof(shared), err, sizeof(err)) < 0) {
		drop_lock(&lockfd);
		ddp_error("%s", err);
		drain(conf, j.node, "nftables update failed");
		goto out;
	}
	/* A shared element was there already: it now lasts as long as this
	 * job's opening and goes only with the last job needing it. */
	ddp_info("opened %zu firewall elements for %zu peer nodes%s",
		 peers.n - kept, hl.n ? hl.n - 1 : 0, shared);
	rv = EX_OK;
out:
	drop_lock(&lockfd);
	if (statefd >= 0)
		close(statefd);
	nc_elems_free(&peers);
	ddp_hostlist_free(&hl);
	return rv;
}

/* Removes libddp's shared-memory segments of job jobid (the Epilog), or of
 * the jobs not in live and older than grace seconds (reconcile, jobid 0),
 * and logs what went. */
static void
remove_shm(unsigned long jobid, const unsigned long *live, size_t nlive,
	   long grace)
{
	char err[NC_ERR_LEN];
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

/* The epilog never fails the node: what it cannot clean up now is logged,
 * expires (firewall) or is caught by reconcile. The firewall goes first:
 * the job's state is removed before waiting for the lock, so that even an
 * Epilog killed while it waits leaves nothing the next update keeps; a
 * large scratch tree is removed last. */
static int
cmd_epilog(const struct ddp_conf *conf)
{
	struct nc_elems mine = {0};
	char err[NC_ERR_LEN], shared[128];
	struct job j;
	int statefd = -1, lockfd = -1;
	size_t kept = 0;

	if (read_job(&j, 0) < 0)
		return EX_OK;
	if (!conf->firewall)
		goto scratch;
	statefd = open_state(conf, err, sizeof(err));
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
	lockfd = take_lock(conf, statefd, err, sizeof(err));
	if (lockfd < 0) {
		ddp_error("firewall cleanup: %s; the job's state is removed, "
			  "so the next prolog, epilog or reconcile on this "
			  "node removes its elements",
			  err);
		goto scratch;
	}
	if (sync_firewall(conf, statefd, NULL, 0, &mine, j.id, &kept, shared,
			  sizeof(shared), err, sizeof(err)) < 0)
		ddp_error("firewall cleanup: %s", err);
	else if (mine.n)
		ddp_info("removed %zu firewall elements%s", mine.n - kept,
			 shared);
	else
		ddp_verbose("firewall elements removed");
	drop_lock(&lockfd);
scratch:
	remove_shm(j.id, NULL, 0, 0);
	if (nc_remove_scratch_dir(conf, j.id, err, sizeof(err)) < 0)
		ddp_error("scratch: %s", err);
	drop_lock(&lockfd);
	if (statefd >= 0)
		close(statefd);
	nc_elems_free(&mine);
	return EX_OK;
}

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
	struct nc_buf out = {0};
	char err[NC_ERR_LEN], *line, *save = NULL;
	int rc, rv = -1;

	rc = nc_run(argv, slurm_env, NULL, &out, SLURM_TIMEOUT_S, err,
		    sizeof(err));
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
	nc_buf_free(&out);
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
	char err[NC_ERR_LEN];
	char *argv[] = {path,
			"--noheader",
			"--format=%A",
			"--states=PENDING,CONFIGURING,RUNNING,SUSPENDED,"
			"STOPPED,COMPLETING,RESIZING,SIGNALING,STAGE_OUT",
			nodearg,
			NULL};
	struct nc_buf out = {0};
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
	if (nc_run(argv, slurm_env, NULL, &out, SLURM_TIMEOUT_S, err,
		   sizeof(err)) != 0) {
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
	nc_buf_free(&out);
	return rv;
}

/* Removes scratch dirs of jobs not live whose last change is older than
 * grace seconds (a job in its prolog has no step to list yet). */
static void
reconcile_scratch(const struct ddp_conf *conf, const unsigned long *live,
		  size_t nlive, long grace)
{
	char err[NC_ERR_LEN];
	struct dirent *de;
	DIR *d = NULL;
	int fd;

	if (!conf->scratch_root[0])
		return;
	fd = ddp_jobdir_open_nofollow(conf->scratch_root, 0, 0);
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
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

/* The node reconcile asks about: --node, else SLURMD_NODENAME, else this
 * host's name up to the first dot. */
static int
reconcile_node(const char *given, char *node, size_t len)
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

static int
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
	char err[NC_ERR_LEN], node[128];
	const char *given = NULL;
	int c, from_squeue = 0, from_listpids = 0, statefd = -1, lockfd = -1;
	int rv = EX_USAGE;

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
			usage(stderr);
			goto out;
		}
	}
	if (add_live_args(argc, argv, &live, &nlive) < 0)
		goto out;
	rv = EX_NODE;
	if (from_squeue) {
		if (reconcile_node(given, node, sizeof(node)) < 0)
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
	statefd = lock_state(conf, &lockfd, err, sizeof(err));
	if (statefd < 0) {
		ddp_error("%s", err);
		goto out;
	}
	add_young_state(statefd, grace, &live, &nlive);
	if (conf->firewall) {
		/* An empty list means no job is live, not "no filter". */
		if (sync_firewall(conf, statefd, live ? live : &none, nlive,
				  NULL, 0, NULL, NULL, 0, err,
				  sizeof(err)) < 0) {
			ddp_error("%s", err);
			goto out;
		}
		ddp_info("reconciled firewall against %zu live jobs", nlive);
	}
	/* Scratch trees can be large: not under the lock. */
	drop_lock(&lockfd);
	remove_shm(0, live, nlive, grace);
	reconcile_scratch(conf, live, nlive, grace);
	rv = EX_OK;
out:
	drop_lock(&lockfd);
	if (statefd >= 0)
		close(statefd);
	free(live);
	return rv;
}

static int
cmd_sweep(const struct ddp_conf *conf, int argc, char **argv)
{
	static const struct option opts[] = {
		{"dry-run", no_argument, NULL, 'n'},
		{"squeue", no_argument, NULL, 'q'},
		{NULL, 0, NULL, 0},
	};
	unsigned long *live = NULL;
	size_t nlive = 0;
	struct nc_buf report = {0};
	char err[NC_ERR_LEN];
	int c, dry = 0, from_squeue = 0, rc, rv = EX_USAGE;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
		if (c == 'n') {
			dry = 1;
		} else if (c == 'q') {
			from_squeue = 1;
		} else {
			usage(stderr);
			goto out;
		}
	}
	if (add_live_args(argc, argv, &live, &nlive) < 0)
		goto out;
	rv = EX_NODE;
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
	rv = rc == 0 ? EX_OK : EX_NODE;
out:
	nc_buf_free(&report);
	free(live);
	return rv;
}

/* Boot-time setup: the node-local roots, made root-owned before any user
 * can make them, then the nftables table. Does all it can; exit 1 when
 * something failed. */
static int
cmd_install(const struct ddp_conf *conf)
{
	char err[NC_ERR_LEN];
	int fd, squatted, rv = EX_OK;

	if (conf->scratch_root[0]) {
		fd = ddp_jobdir_open_root(conf->scratch_root, "scratch root",
					  &squatted, err, sizeof(err));
		if (fd < 0) {
			ddp_error("install: %s", err);
			rv = EX_NODE;
		} else {
			close(fd);
			ddp_info("scratch root %s ready", conf->scratch_root);
		}
	}
	fd = open_state(conf, err, sizeof(err));
	if (fd < 0) {
		ddp_error("install: %s", err);
		rv = EX_NODE;
	} else {
		close(fd);
		ddp_info("state dir %s ready", conf->state_dir);
	}
	if (conf->firewall && install_table(conf, err, sizeof(err)) < 0) {
		ddp_error("install: %s", err);
		rv = EX_NODE;
	}
	/* Said at boot rather than at the first --ddp step. */
	if (conf->port_key[0]) {
		struct ddp_site_key key;
		char kerr[1024];

		if (ddp_site_key_load(conf->port_key, 0, &key, kerr,
				      sizeof(kerr)) < 0) {
			ddp_error("install: %s", kerr);
			rv = EX_NODE;
		} else {
			ddp_info("port key %s ready", conf->port_key);
		}
		ddp_site_key_wipe(&key);
	}
	return rv;
}

/* Every key of ddp.conf's table, as ddp.conf accepts it back. */
static int
cmd_show(const struct ddp_conf *conf)
{
	char value[PATH_MAX];
	const char *key;
	size_t i;

	for (i = 0; (key = ddp_conf_key_name(i)); i++) {
		if (ddp_conf_format(conf, key, value, sizeof(value)) < 0) {
			ddp_error("show: %s: cannot format its value", key);
			return EX_NODE;
		}
		printf("%s = %s\n", key, value);
	}
	return EX_OK;
}

/*
 * The MASTER_PORT srun --ddp gives step JOBID.STEPID when the user sets
 * none: how an admin checks that every node holds the same port_key (run
 * it on each and compare) and finds the port of a step. Needs what the
 * plugin needs, a key file only root can read.
 */
static int
cmd_port(const struct ddp_conf *conf, int argc, char **argv)
{
	struct ddp_site_key key;
	char err[1024];
	long job, step, port;

	if (argc != 3 || ddp_parse_long(argv[1], 0, 4294967295L, &job) < 0 ||
	    ddp_parse_long(argv[2], 0, 4294967295L, &step) < 0) {
		ddp_error("port: expected JOBID STEPID (whole numbers, e.g. "
			  "port 1234 0)");
		return EX_USAGE;
	}
	if (!conf->port_key[0]) {
		port = ddp_port_choose((unsigned long)job, (unsigned long)step,
				       conf->port_min, conf->port_max);
	} else {
		if (ddp_site_key_load(conf->port_key, 0, &key, err,
				      sizeof(err)) < 0) {
			ddp_error("%s", err);
			return EX_NODE;
		}
		port = ddp_port_choose_keyed(&key, (unsigned long)job,
					     (unsigned long)step,
					     conf->port_min, conf->port_max);
		ddp_site_key_wipe(&key);
	}
	if (port < 0) {
		ddp_error("port: port_range is empty");
		return EX_NODE;
	}
	printf("%ld\n", port);
	return EX_OK;
}

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
	struct nc_buf out = {0};
	char err[NC_ERR_LEN];
	int rv = -1;

	if (nc_run(argv, slurm_env, NULL, &out, SLURM_TIMEOUT_S, err,
		   sizeof(err)) != 0) {
		ddp_error("scontrol show node %s: %s", node, err);
		goto out;
	}
	rv = nc_node_draining(out.s ? out.s : "", state, len);
	if (rv < 0)
		ddp_error("scontrol show node %s: no State field in '%.80s'",
			  node, out.s ? out.s : "");
out:
	nc_buf_free(&out);
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
static int
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
	char node[128], reason[256], state[64], err[NC_ERR_LEN];
	const char *given = NULL;
	long long now = (long long)time(NULL);
	int c, do_drain = 0, draining, rv = EX_USAGE;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
		if (c == 'n') {
			given = optarg;
		} else if (c == 'd') {
			do_drain = 1;
		} else {
			usage(stderr);
			goto out;
		}
	}
	if (optind != argc || reconcile_node(given, node, sizeof(node)) < 0)
		goto out;
	rv = EX_NODE;
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
		printf("%s: ok: %u job%s of %u user%s named it within %llds "
		       "(drained at %u jobs of %u users)\n",
		       node, t.jobs, t.jobs == 1 ? "" : "s", t.users,
		       t.users == 1 ? "" : "s", rule.window, rule.jobs,
		       rule.users);
		rv = EX_OK;
		goto out;
	}
	if (ddp_drain_reason(&t, rule.window, reason, sizeof(reason)) < 0) {
		ddp_error("health: %s: the drain reason does not fit", node);
		goto out;
	}
	if (!do_drain) {
		printf("%s: drain: %s\n", node, reason);
		goto out; /* EX_NODE: the caller (NHC) drains */
	}
	draining = slurm_node_draining(conf, node, state, sizeof(state));
	if (draining < 0)
		goto out;
	if (draining) {
		printf("%s: already drained (%s), not drained again: %s\n",
		       node, state, reason);
		rv = EX_OK;
		goto out;
	}
	if (scontrol_drain(conf, node, reason, err, sizeof(err)) < 0) {
		ddp_error("health: scontrol update: %s", err);
		goto out;
	}
	printf("%s: drained: %s\n", node, reason);
	if (use_syslog)
		syslog(LOG_WARNING, "drained %s: %s", node, reason);
	rv = EX_OK;
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

/* The node's (or every node's) verdicts of the last --since seconds
 * (check_drain_window by default), oldest first, and what the drain rule
 * makes of them. */
static int
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
	char node[128], err[NC_ERR_LEN], when[32], what[DDP_VERDICT_LINE_MAX];
	char user[64];
	const char *given = NULL;
	long long now = (long long)time(NULL);
	long since = (long)rule.window;
	int c, all = 0, rv = EX_USAGE;
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
			usage(stderr);
			goto out;
		}
	}
	if (optind != argc || (all && given) ||
	    (!all && reconcile_node(given, node, sizeof(node)) < 0))
		goto out;
	rv = EX_NODE;
	if (ddp_verdict_read(conf->state_dir, all ? NULL : node, now - since,
			     &list, err, sizeof(err)) < 0) {
		ddp_error("verdicts: %s", err);
		goto out;
	}
	printf("%s: %zu verdict%s in the last %ld s (%s/%s)\n",
	       all ? "all nodes" : node, list.n, list.n == 1 ? "" : "s", since,
	       conf->state_dir, DDP_VERDICT_FILE);
	for (i = 0; i < list.n; i++) {
		const struct ddp_verdict *v = &list.v[i];
		time_t tt = (time_t)v->time;
		struct tm tm;

		if (!localtime_r(&tt, &tm) ||
		    !strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm))
			ddp_fmt(when, sizeof(when), "@%lld", v->time);
		if (ddp_verdict_describe(v, what, sizeof(what)) < 0)
			ddp_fmt(what, sizeof(what), "%s", v->check);
		user_name(v->uid, user, sizeof(user));
		printf("  %s  %s  job %s step %s  user %s  %s\n", when, v->node,
		       v->job, v->step, user, what);
	}
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
	rv = EX_OK;
out:
	ddp_verdict_list_free(&list);
	return rv;
}

int
main(int argc, char **argv)
{
	const char *conf_path = getenv("DDP_CONF"), *cmd;
	struct ddp_conf conf;
	char err[DDP_CONF_ERR_LEN + 64];
	enum ddp_log_level level = DDP_LOG_INFO;
	int c;

	if (!conf_path || !conf_path[0])
		conf_path = DDP_CONF_DEFAULT;
	while ((c = getopt(argc, argv, "+c:vh")) != -1) {
		if (c == 'c') {
			conf_path = optarg;
		} else if (c == 'v') {
			level = DDP_LOG_DEBUG;
		} else {
			usage(c == 'h' ? stdout : stderr);
			return c == 'h' ? EX_OK : EX_USAGE;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return EX_USAGE;
	}
	cmd = argv[optind];
	umask(022);
	use_syslog = strcmp(cmd, "show") != 0 && strcmp(cmd, "port") != 0 &&
		     strcmp(cmd, "verdicts") != 0;
	if (use_syslog)
		openlog(strcmp(cmd, "epilog") == 0   ? "ddp-epilog"
			: strcmp(cmd, "prolog") == 0 ? "ddp-prolog"
						     : "ddp-nodectl",
			LOG_PID, LOG_DAEMON);
	ddp_log_set_sink(sink, level);
	ddp_conf_defaults(&conf);
	if (ddp_conf_load(&conf, conf_path, 1, err, sizeof(err)) < 0) {
		ddp_error("%s", err);
		/* Every node has the same file: draining for it would stop
		 * every job on the cluster, --ddp or not. The job runs
		 * without openings or directories, and the plugin, which
		 * reads the same file, refuses its --ddp steps naming file,
		 * line and key. */
		if (strcmp(cmd, "prolog") == 0 || strcmp(cmd, "epilog") == 0)
			return EX_OK;
		return EX_USAGE;
	}
	argc -= optind;
	argv += optind;
	if (strcmp(cmd, "prolog") == 0)
		return cmd_prolog(&conf);
	if (strcmp(cmd, "epilog") == 0)
		return cmd_epilog(&conf);
	if (strcmp(cmd, "install") == 0)
		return cmd_install(&conf);
	if (strcmp(cmd, "reconcile") == 0)
		return cmd_reconcile(&conf, argc, argv);
	if (strcmp(cmd, "sweep") == 0)
		return cmd_sweep(&conf, argc, argv);
	if (strcmp(cmd, "show") == 0)
		return cmd_show(&conf);
	if (strcmp(cmd, "port") == 0)
		return cmd_port(&conf, argc, argv);
	if (strcmp(cmd, "health") == 0)
		return cmd_health(&conf, argc, argv);
	if (strcmp(cmd, "verdicts") == 0)
		return cmd_verdicts(&conf, argc, argv);
	usage(stderr);
	return EX_USAGE;
}
