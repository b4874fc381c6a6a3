/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The slurmstepd side of spank_ddp.so: the node's plan, computed once per
 * node from the step's layout, and each task's rank environment, binding
 * and checked job directories.
 */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <poll.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "slurm_compat.h"

#include "ddp_log.h"
#include "ddp_util.h"
#include "flightrec.h"
#include "jobdir.h"
#include "plugin.h"
#include "port.h"
#include "sitekey.h"
#include "stepkey.h"
#include "tasks.h"
#include "verdict.h"

/* The most of ddp-check's verdict lines a task reads, and the most of a
 * node's lines slurmstepd takes from its task. */
#define VERDICT_TEXT_MAX (64u << 10)

/* Marks a MASTER_PORT chosen by this plugin, so that a nested srun --ddp
 * inside a rank chooses its own instead of treating it as preset. */
#define PORT_MARK "DDP_PORT_CHOSEN"

/* Copies a job environment variable into buf; 0 when set and it fits. */
static int
jobenv(spank_t sp, const char *name, char *buf, size_t size)
{
	if (spank_getenv(sp, name, buf, (int)size) != ESPANK_SUCCESS) {
		buf[0] = '\0';
		return -1;
	}
	return 0;
}

/* MASTER_ADDR: first host of the step's node list, as Slurm parses it. */
static int
first_host(const char *list, char *out, size_t size)
{
	ddp_slurm_hostlist hl;
	char *h;
	int rc = -1;

	hl = slurm_hostlist_create(list);
	if (!hl)
		return -1;
	h = slurm_hostlist_shift(hl);
	if (h && ddp_fmt(out, size, "%s", h) == 0)
		rc = 0;
	free(h);
	slurm_hostlist_destroy(hl);
	return rc;
}

/* Keeps the node's first problem; remote_task_init raises it. */
__attribute__((format(printf, 2, 3))) static void
node_error(struct ddp_node *n, const char *fmt, ...)
{
	va_list ap;

	if (n->error[0])
		return;
	va_start(ap, fmt);
	ddp_verrf(n->error, sizeof(n->error), fmt, ap);
	va_end(ap);
	if (!n->error[0])
		ddp_fmt(n->error, sizeof(n->error), "--ddp failed");
}

static int
user_name(uid_t uid, char *out, size_t size)
{
	struct passwd pw, *res = NULL;
	char buf[4096];

	if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) != 0 || !res)
		return -1;
	return ddp_fmt(out, size, "%s", res->pw_name);
}

/* The CPUs Slurm gave the step on this node, as hwloc CPUs. */
static hwloc_bitmap_t
step_cpus(struct ddp_node *n, spank_t sp)
{
	hwloc_bitmap_t set = hwloc_bitmap_alloc();
	char *cores = NULL, err[256];

	if (!set)
		return NULL;
	if (spank_get_item(sp, S_STEP_ALLOC_CORES, &cores) != ESPANK_SUCCESS ||
	    !cores || !cores[0]) {
		ddp_fmt(n->cpu_note, sizeof(n->cpu_note),
			"Slurm gave no core list: using all allowed CPUs");
		hwloc_bitmap_free(set);
		return NULL;
	}
	if (ddp_topo_cpus_from_slurm_cores(n->topo, cores, set, err,
					   sizeof(err)) < 0) {
		if (ddp_fmt(n->cpu_note, sizeof(n->cpu_note),
			    "%s: using all allowed CPUs", err) < 0)
			n->cpu_note[0] = '\0';
		hwloc_bitmap_free(set);
		return NULL;
	}
	return set;
}

/* Computes the node's plan (once the GPU list is known): the GPUs every
 * rank sees, then the placement. */
static int
compute_plan(struct ddp_node *n, spank_t sp)
{
	hwloc_bitmap_t cpus = NULL;
	char cvd[DDP_GPU_LIST_LEN], sgpus[DDP_GPU_LIST_LEN];
	char err[DDP_ERR_LEN];
	int rc = -1;

	jobenv(sp, "CUDA_VISIBLE_DEVICES", cvd, sizeof(cvd));
	jobenv(sp, "SLURM_STEP_GPUS", sgpus, sizeof(sgpus));
	if (ddp_gpu_resolve(cvd, sgpus, ddp_topo_ngpus(n->topo), n->local_tasks,
			    &n->gpus, err, sizeof(err)) < 0) {
		node_error(n, "--ddp: %s", err);
		return -1;
	}
	cpus = step_cpus(n, sp);
	if (ddp_plan_node(n->topo, n->local_tasks, n->gpus.gpu_of, n->gpus.n,
			  cpus, n->bind, &n->plan, err, sizeof(err)) < 0)
		node_error(n, "--ddp: placement failed: %s", err);
	else
		rc = 0;
	hwloc_bitmap_free(cpus);
	return rc;
}

void
remote_load_port_key(struct ddp_plugin *p)
{
	struct ddp_node *n = &p->node;

	if (!p->opts.enabled || p->conf_error[0] || !p->conf.port_key[0])
		return;
	/* Owner 0, not geteuid(): a key the job's user could write would
	 * let them choose other jobs' ports. */
	if (ddp_site_key_load(p->conf.port_key, 0, &n->port_key,
			      n->port_key_error,
			      sizeof(n->port_key_error)) == 0)
		n->port_key_state = 1;
	else
		n->port_key_state = -1;
}

/* --ddp-check as given, else the site's check. */
static enum ddp_check
check_mode(const struct ddp_plugin *p)
{
	return p->opts.check >= 0 ? (enum ddp_check)p->opts.check
				  : p->conf.check;
}

/*
 * ddp-check's own port, keyed like MASTER_PORT and never equal to master
 * (the step's MASTER_PORT, chosen or the user's): a user on the node
 * sees the check's listening socket and could otherwise take the port
 * when the check closes it, before the program's rendezvous. It lies in
 * port_range, which the prolog opens to the job's nodes.
 */
static void
choose_check_port(struct ddp_plugin *p, long master)
{
	struct ddp_node *n = &p->node;
	long port;

	if (check_mode(p) == DDP_CHECK_OFF)
		return;
	if (n->port_key_state < 0) {
		node_error(n,
			   "--ddp-check: %s: %s (ddp-check's port is keyed "
			   "like MASTER_PORT; until the admin fixes it, "
			   "--ddp-check=off runs the step unchecked)",
			   n->host, n->port_key_error);
		return;
	}
	if (p->conf.port_key[0] && n->port_key_state == 0) {
		node_error(n, "--ddp-check: %s: port_key %s was not read",
			   n->host, p->conf.port_key);
		return;
	}
	port = ddp_port_choose_check(
		n->port_key_state > 0 ? &n->port_key : NULL, n->jobid,
		n->stepid, p->conf.port_min, p->conf.port_max, master);
	if (port < 0) {
		node_error(n,
			   "--ddp-check: port_range %u-%u leaves ddp-check no "
			   "port but MASTER_PORT (the admin gives port_range "
			   "in ddp.conf at least 2 ports; --ddp-check=off "
			   "runs the step unchecked)",
			   p->conf.port_min, p->conf.port_max);
		return;
	}
	n->check_port = port;
}

void
remote_step_key(struct ddp_plugin *p, spank_t sp)
{
	struct ddp_node *n = &p->node;
	struct ddp_step_key key;
	char err[DDP_ERR_LEN], host[DDP_HOSTNAME_MAX + 1] = "?";
	uint32_t jobid, stepid;
	uid_t uid;
	gid_t gid;

	/* Without a site key the ranks use munge (DDP_AUTH=auto). */
	if (!p->opts.enabled || p->conf_error[0] || n->port_key_state != 1)
		return;
	/* user_init names a missing layout item. */
	if (spank_get_item(sp, S_JOB_ID, &jobid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_STEPID, &stepid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS)
		return;
	if (stepid == SLURM_BATCH_SCRIPT || stepid == SLURM_EXTERN_CONT ||
	    stepid >= SLURM_INTERACTIVE_STEP)
		return;
	/* slurmstepd's pid tells apart two nodes of one step on a host. */
	if (ddp_step_key_dirname(jobid, stepid, (unsigned long)getpid(),
				 n->step_key_name,
				 sizeof(n->step_key_name)) < 0)
		return;
	ddp_step_key_derive(&n->port_key, jobid, stepid, uid, &key);
	if (ddp_step_key_install(p->conf.state_dir, n->step_key_name, &key, uid,
				 gid, n->step_key_path,
				 sizeof(n->step_key_path), err,
				 sizeof(err)) < 0) {
		gethostname(host, sizeof(host) - 1);
		node_error(n,
			   "--ddp: %s: cannot hand the step its key: %s (the "
			   "admin fixes state_dir in ddp.conf)",
			   host, err);
		n->step_key_name[0] = '\0';
	}
	ddp_step_key_wipe(&key);
}

static void
choose_port(struct ddp_plugin *p, spank_t sp)
{
	struct ddp_node *n = &p->node;
	char preset[32], mark[32];
	long port;

	if (p->opts.port) {
		n->port = p->opts.port;
		choose_check_port(p, n->port);
		goto out;
	}
	jobenv(sp, "MASTER_PORT", preset, sizeof(preset));
	jobenv(sp, PORT_MARK, mark, sizeof(mark));
	if (preset[0] && strcmp(preset, mark) != 0) {
		if (ddp_port_parse(preset) < 0) {
			node_error(n,
				   "--ddp: MASTER_PORT=%.40s is not a port "
				   "(1-65535): unset it or pass --ddp-port=N",
				   preset);
			goto out;
		}
		n->port = 0; /* the user's own wins */
		choose_check_port(p, ddp_port_parse(preset));
		goto out;
	}
	if (n->port_key_state < 0) {
		node_error(n,
			   "--ddp: %s: %s (until the admin fixes it, "
			   "--ddp-port=N or MASTER_PORT choose the port)",
			   n->host, n->port_key_error);
		goto out;
	}
	if (p->conf.port_key[0] && n->port_key_state == 0) {
		/* init_post_opt did not run: never fall back to the public
		 * formula unasked. */
		node_error(n, "--ddp: %s: port_key %s was not read", n->host,
			   p->conf.port_key);
		goto out;
	}
	port = n->port_key_state > 0
		       ? ddp_port_choose_keyed(&n->port_key, n->jobid,
					       n->stepid, p->conf.port_min,
					       p->conf.port_max)
		       : ddp_port_choose(n->jobid, n->stepid, p->conf.port_min,
					 p->conf.port_max);
	if (port < 0) {
		node_error(n, "--ddp: the site's port_range is empty");
		goto out;
	}
	n->port = port;
	choose_check_port(p, port);
	/* Advisory: the master node can at least say the port is busy. */
	if (n->nodeid == 0 && ddp_port_probe((unsigned)port) == 0 &&
	    ddp_fmt(n->port_note, sizeof(n->port_note),
		    " (port %ld already in use on %s: rank 0 waits for it "
		    "until DDP_TIMEOUT; --ddp-port=N picks another)",
		    port, n->host) < 0)
		n->port_note[0] = '\0';
out:
	ddp_site_key_wipe(&n->port_key);
}

/*
 * DDP_SHARED_DIR and DDP_SCRATCH_DIR, named as the prolog names them, are
 * exported only when they exist and are the job user's own: every level
 * below the root opened without following symlinks, owned by uid, mode
 * 0700. Anything else (a directory another user planted for a future job
 * id, a symlink, a plugstack root the prolog never used) fails the step:
 * the program would otherwise write its checkpoints where others read.
 */
static int
check_dirs(struct ddp_plugin *p, uid_t uid)
{
	struct ddp_node *n = &p->node;
	const struct ddp_conf *conf = &p->conf;
	char rel[128], jobid[32], err[DDP_ERR_LEN];
	int shared = 0, scratch = 0;

	if (ddp_fmt(jobid, sizeof(jobid), "%u", n->jobid) < 0)
		return -1;
	if (ddp_jobdir_shared(conf, n->user, n->jobid, n->shared_dir,
			      sizeof(n->shared_dir)) == 0 &&
	    ddp_fmt(rel, sizeof(rel), "%s/%s", n->user, jobid) == 0 &&
	    (shared = ddp_jobdir_check(conf->shared_root, rel, uid, err,
				       sizeof(err))) < 0)
		node_error(n, "--ddp: DDP_SHARED_DIR: %s", err);
	else if (ddp_jobdir_scratch(conf, n->jobid, n->scratch_dir,
				    sizeof(n->scratch_dir)) == 0 &&
		 (scratch = ddp_jobdir_check(conf->scratch_root, jobid, uid,
					     err, sizeof(err))) < 0)
		node_error(n, "--ddp: DDP_SCRATCH_DIR: %s", err);
	/* Only what passed is exported, and nothing when either failed. */
	if (shared != 1 || scratch < 0)
		n->shared_dir[0] = '\0';
	if (scratch != 1 || shared < 0)
		n->scratch_dir[0] = '\0';
	return shared < 0 || scratch < 0 ? -1 : 0;
}

/* 1 when the job's environment has name, an empty value included. */
static int
job_has_env(spank_t sp, const char *name)
{
	char probe[2];
	spank_err_t rc = spank_getenv(sp, name, probe, (int)sizeof(probe));

	return rc == ESPANK_SUCCESS || rc == ESPANK_NOSPACE;
}

/*
 * PyTorch's flight recorder is gathered in the checked shared directory:
 * its dump directory is made here, once per node and with the user's
 * privileges, unless the user names their own dump file. A problem there
 * costs the dumps, not the step: this node then sets none of the
 * variables and its first rank says why.
 */
static void
flightrec_prepare(struct ddp_plugin *p, spank_t sp, uid_t uid)
{
	struct ddp_node *n = &p->node;
	struct ddp_flightrec_env env;
	const struct ddp_flightrec_var *file;
	char err[DDP_ERR_LEN];

	if (ddp_flightrec_env(n->shared_dir, &env) < 0)
		return;
	file = &env.var[DDP_FLIGHTREC_NVARS - 1];
	if (!job_has_env(sp, file->name) && !job_has_env(sp, file->newer) &&
	    ddp_flightrec_make_dir(n->shared_dir, uid, err, sizeof(err)) < 0) {
		ddp_errf(n->flightrec_note, sizeof(n->flightrec_note),
			 "%s: PyTorch's flight recorder dumps are not "
			 "gathered: %s",
			 n->host, err);
		return;
	}
	n->flightrec = 1;
}

/* The step's layout on this node; 0, or -1 with the node's error set. */
static int
read_layout(struct ddp_node *n, spank_t sp, uid_t *uid)
{
	char list[8192], tpn[4096];
	uint32_t total = 0;
	long count;

	if (spank_get_item(sp, S_JOB_ID, &n->jobid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_NODEID, &n->nodeid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_NNODES, &n->nnodes) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &n->local_tasks) !=
		    ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &total) !=
		    ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_UID, uid) != ESPANK_SUCCESS) {
		node_error(n, "--ddp: Slurm did not give the step's layout");
		return -1;
	}
	if (gethostname(n->host, sizeof(n->host) - 1) < 0)
		ddp_fmt(n->host, sizeof(n->host), "?");
	if (user_name(*uid, n->user, sizeof(n->user)) < 0)
		n->user[0] = '\0';
	if (jobenv(sp, "SLURM_STEP_NODELIST", list, sizeof(list)) < 0 ||
	    first_host(list, n->master, sizeof(n->master)) < 0) {
		node_error(n,
			   "--ddp: cannot read the step's node list "
			   "(SLURM_STEP_NODELIST=%.80s)",
			   list);
		return -1;
	}
	if (ddp_hostlist_first(list, tpn, sizeof(tpn)) == 0 &&
	    strcmp(tpn, n->master) != 0)
		ddp_debug("hostlist: Slurm says %s, ours says %s", n->master,
			  tpn);
	n->counts = calloc(DDP_TASKS_MAX_NODES, sizeof(*n->counts));
	if (!n->counts) {
		node_error(n, "--ddp: out of memory");
		return -1;
	}
	if (jobenv(sp, "SLURM_STEP_TASKS_PER_NODE", tpn, sizeof(tpn)) < 0 ||
	    (count = ddp_tasks_parse(tpn, n->counts, DDP_TASKS_MAX_NODES)) <
		    0 ||
	    (uint32_t)count != n->nnodes || n->nodeid >= n->nnodes ||
	    n->counts[n->nodeid] != n->local_tasks) {
		node_error(n,
			   "--ddp: SLURM_STEP_TASKS_PER_NODE=%.80s does not "
			   "match the step's layout",
			   tpn);
		return -1;
	}
	return 0;
}

/* remote_user_init's work; problems go to the node's error. */
static void
user_init(struct ddp_plugin *p, spank_t sp)
{
	struct ddp_node *n = &p->node;
	char err[DDP_ERR_LEN];
	uid_t uid;

	if (!p->opts.enabled)
		return;
	if (spank_get_item(sp, S_JOB_STEPID, &n->stepid) != ESPANK_SUCCESS)
		return;
	/* Nothing to do in the batch script, the extern step or an
	 * interactive step: --ddp given to sbatch/salloc reaches them too. */
	if (n->stepid == SLURM_BATCH_SCRIPT || n->stepid == SLURM_EXTERN_CONT ||
	    n->stepid == SLURM_INTERACTIVE_STEP ||
	    n->stepid >= SLURM_INTERACTIVE_STEP)
		return;
	n->active = 1;
	if (p->conf_error[0]) {
		node_error(n, "%s: --ddp cannot run until the admin fixes it",
			   p->conf_error);
		return;
	}
	n->bind = p->opts.bind >= 0 ? (enum ddp_bind)p->opts.bind
				    : p->conf.default_bind;
	if (read_layout(n, sp, &uid) < 0)
		return;
	n->uid = uid;
	choose_port(p, sp);
	/* Here privileges are dropped to the job's user, who must be able
	 * to open their own directories anyway (root-squashed NFS). */
	if (check_dirs(p, uid) < 0)
		return;
	flightrec_prepare(p, sp, uid);
	/* A site interface filter that selects nothing here would make
	 * NCCL's bootstrap fail or hang on this node: say so instead. */
	if (ddp_conf_check_socket_ifname(&p->conf, err, sizeof(err)) < 0) {
		node_error(n, "--ddp: %s: %s", n->host, err);
		return;
	}
	/* remote_post_opt read it from the site's cache, or left it here. */
	if (!n->topo &&
	    ddp_topo_load(&n->topo, p->topology_xml[0] ? p->topology_xml : NULL,
			  err, sizeof(err)) < 0) {
		node_error(n, "--ddp: %s", err);
		return;
	}
	/* The GPU list may only be in the tasks' environment: then each
	 * task computes the (identical) plan in task_init. */
	compute_plan(n, sp);
}

/*
 * The pipe on which each node's first task hands slurmstepd ddp-check's
 * findings about the node: made before the tasks fork, so they inherit
 * the write end; close-on-exec, so neither ddp-check nor the program
 * keeps an end; non-blocking, so a full pipe never stops a task and an
 * empty one never stops slurmstepd. Without it the findings are not
 * recorded; the check runs all the same.
 */
static void
open_verdict_pipe(struct ddp_plugin *p)
{
	struct ddp_node *n = &p->node;
	int fd[2];

	if (!n->active || n->error[0] || check_mode(p) == DDP_CHECK_OFF)
		return;
	if (pipe2(fd, O_CLOEXEC | O_NONBLOCK) < 0) {
		ddp_info("--ddp-check: %s: no pipe for the findings: %s",
			 n->host, strerror(errno));
		return;
	}
	n->verdict_rfd = fd[0];
	n->verdict_wfd = fd[1];
}

int
remote_user_init(struct ddp_plugin *p, spank_t sp)
{
	user_init(p, sp);
	open_verdict_pipe(p);
	/* Whatever happened, the key leaves slurmstepd's memory before the
	 * tasks fork from it. */
	ddp_site_key_wipe(&p->node.port_key);
	return 0;
}

static int
setenv_u(spank_t sp, const char *name, unsigned long v)
{
	char buf[32];

	if (ddp_fmt(buf, sizeof(buf), "%lu", v) < 0)
		return -1;
	return spank_setenv(sp, name, buf, 1) == ESPANK_SUCCESS ? 0 : -1;
}

/* Sets name unless the user already did (OMP_NUM_THREADS, NCCL_*). */
static int
setenv_default(spank_t sp, const char *name, const char *value)
{
	spank_err_t rc = spank_setenv(sp, name, value, 0);

	return rc == ESPANK_SUCCESS || rc == ESPANK_ENV_EXISTS ? 0 : -1;
}

static int
setenv_s(spank_t sp, const char *name, const char *value)
{
	return spank_setenv(sp, name, value, 1) == ESPANK_SUCCESS ? 0 : -1;
}

/* PyTorch's flight recorder variables (flightrec.h), each unless the
 * user exported it or the name newer PyTorch reads first. */
static int
flightrec_env(const struct ddp_node *n, spank_t sp, uint32_t local)
{
	struct ddp_flightrec_env env;
	const struct ddp_flightrec_var *v;
	int rc = 0;

	if (n->flightrec_note[0] && local == 0)
		ddp_user("%s", n->flightrec_note);
	if (!n->flightrec || ddp_flightrec_env(n->shared_dir, &env) < 0)
		return 0;
	for (v = env.var; v < env.var + DDP_FLIGHTREC_NVARS; v++)
		if (!v->newer || !job_has_env(sp, v->newer))
			rc |= setenv_default(sp, v->name, v->value);
	return rc;
}

static int
task_env(struct ddp_plugin *p, spank_t sp, uint32_t local, long global,
	 const struct ddp_rank_place *rp, const char *bindnote)
{
	const struct ddp_node *n = &p->node;
	const struct ddp_conf *conf = &p->conf;
	struct ddp_rank_env e;
	struct ddp_place_env env;
	char err[DDP_ERR_LEN], check_note[32] = "";
	unsigned k;
	int rc = 0;

	if (ddp_rank_env_compute(n->counts, n->nnodes, n->nodeid, local, global,
				 &e, err, sizeof(err)) < 0) {
		ddp_error("rank environment: %s", err);
		return -1;
	}
	rc |= setenv_u(sp, "RANK", e.rank);
	rc |= setenv_u(sp, "WORLD_SIZE", e.world_size);
	rc |= setenv_u(sp, "LOCAL_RANK", e.local_rank);
	rc |= setenv_u(sp, "LOCAL_WORLD_SIZE", e.local_world_size);
	rc |= setenv_u(sp, "NODE_RANK", e.node_rank);
	rc |= setenv_u(sp, "GROUP_RANK", e.node_rank);
	rc |= setenv_s(sp, "MASTER_ADDR", n->master);
	if (n->port) {
		rc |= setenv_u(sp, "MASTER_PORT", (unsigned long)n->port);
		if (!p->opts.port)
			rc |= setenv_u(sp, PORT_MARK, (unsigned long)n->port);
	}
	rc |= setenv_s(sp, "CUDA_DEVICE_ORDER", "PCI_BUS_ID");
	if (n->gpus.n > 0)
		rc |= setenv_s(sp, "CUDA_VISIBLE_DEVICES", n->gpus.visible);
	rc |= setenv_s(sp, "DDP_BIND", ddp_bind_name(n->bind));
	rc |= setenv_s(sp, "DDP_BOUND", bindnote ? "0" : "1");
	/* The placement as information, and the site's NCCL variables, the
	 * same on every rank (ddp_plan_rank_env never derives them per rank).
	 */
	if (rp && ddp_plan_rank_env(n->plan, local, conf, &env) == 0) {
		for (k = 0; k < env.n; k++)
			rc |= env.var[k].keep
				      ? setenv_default(sp, env.var[k].name,
						       env.var[k].value)
				      : setenv_s(sp, env.var[k].name,
						 env.var[k].value);
	} else {
		if (conf->nccl_ib_hca[0])
			rc |= setenv_default(sp, "NCCL_IB_HCA",
					     conf->nccl_ib_hca);
		if (conf->nccl_socket_ifname[0])
			rc |= setenv_default(sp, "NCCL_SOCKET_IFNAME",
					     conf->nccl_socket_ifname);
	}
	if (n->shared_dir[0])
		rc |= setenv_s(sp, "DDP_SHARED_DIR", n->shared_dir);
	if (n->scratch_dir[0])
		rc |= setenv_s(sp, "DDP_SCRATCH_DIR", n->scratch_dir);
	/* A path, not the key: the environment is copied into every child
	 * process and shown by env and crash reports. Without a key of this
	 * step, one inherited from an enclosing step must not be used. */
	if (n->step_key_path[0])
		rc |= setenv_s(sp, DDP_STEP_KEY_VAR, n->step_key_path);
	else
		spank_unsetenv(sp, DDP_STEP_KEY_VAR);
	rc |= flightrec_env(n, sp, local);
	if (rc)
		ddp_error("could not set the rank's environment");
	if (n->check_port && ddp_fmt(check_note, sizeof(check_note),
				     " check_port=%ld", n->check_port) < 0)
		check_note[0] = '\0';
	if (p->opts.verbose)
		ddp_user("rank=%u local_rank=%u host=%s gpu=%s cpus=%s numa=%s "
			 "nic=%s hca=%s bind=%s%s%s master=%s:%ld%s%s",
			 e.rank, e.local_rank, n->host, rp ? rp->busid : "-",
			 rp ? rp->cpus : "-",
			 rp && rp->numa[0] ? rp->numa : "-",
			 rp && rp->nic[0] ? rp->nic : "-",
			 rp && rp->hca[0] ? rp->hca : "-",
			 ddp_bind_name(n->bind), bindnote ? " " : "",
			 bindnote ? bindnote : "", n->master, n->port,
			 n->port_note, check_note);
	return rc ? -1 : 0;
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* What a task read of ddp-check's verdict lines. */
struct verdict_text {
	int fd; /* the read end, non-blocking; -1 when done */
	char buf[VERDICT_TEXT_MAX];
	size_t len;
};

/* Reads what the pipe holds now; past VERDICT_TEXT_MAX the rest is
 * drained and dropped, so ddp-check never blocks on a full pipe. */
static void
drain_verdicts(struct verdict_text *t)
{
	char sink[4096];
	ssize_t r;

	while (t->fd >= 0) {
		if (t->len < sizeof(t->buf))
			r = read(t->fd, t->buf + t->len,
				 sizeof(t->buf) - t->len);
		else
			r = read(t->fd, sink, sizeof(sink));
		if (r > 0 && t->len < sizeof(t->buf))
			t->len += (size_t)r;
		else if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN))
			break;
		else if (r < 0 && errno == EAGAIN)
			return;
	}
	if (t->fd >= 0)
		close(t->fd);
	t->fd = -1;
}

/* A descriptor that turns readable when pid ends (Linux 5.3 and later),
 * or -1 where the kernel or the build lacks pidfd_open. */
static int
pid_fd(pid_t pid)
{
#ifdef SYS_pidfd_open
	return (int)syscall(SYS_pidfd_open, pid, 0);
#else
	(void)pid;
	errno = ENOSYS;
	return -1;
#endif
}

/*
 * Waits for pid until deadline, then kills it, reading t meanwhile.
 * Every task of a node waits so: each sleeps in poll until its check
 * ends, writes findings or reaches the deadline, where a fixed tick would
 * wake hundreds of tasks 50 times a second beside the link test. Without
 * a pidfd it looks every 20 ms. Returns its wait status, or -1 when
 * waitpid fails.
 */
static int
wait_check(pid_t pid, double deadline, int *killed, struct verdict_text *t)
{
	const struct timespec tick = {0, 20 * 1000 * 1000};
	struct pollfd pfd[2];
	int status = 0, pidfd = pid_fd(pid), n, ms;
	double now;
	pid_t r;

	*killed = 0;
	for (;;) {
		drain_verdicts(t);
		r = waitpid(pid, &status, WNOHANG);
		if (r == pid) {
			drain_verdicts(t);
			break;
		}
		if (r < 0 && errno != EINTR) {
			status = -1;
			break;
		}
		now = now_s();
		if (!*killed && now >= deadline) {
			kill(pid, SIGKILL);
			*killed = 1;
		}
		if (pidfd < 0) {
			nanosleep(&tick, NULL);
			continue;
		}
		n = 0;
		pfd[n++] = (struct pollfd){.fd = pidfd, .events = POLLIN};
		if (t->fd >= 0)
			pfd[n++] =
				(struct pollfd){.fd = t->fd, .events = POLLIN};
		ms = *killed ? -1 : (int)((deadline - now) * 1000) + 1;
		poll(pfd, (nfds_t)n, ms);
	}
	if (pidfd >= 0)
		close(pidfd);
	return status;
}

/* A node's first task: hands slurmstepd the findings about its node. */
struct forward {
	const struct ddp_node *n;
	size_t sent;
};

static void
forward_verdict(void *arg, const struct ddp_verdict *v)
{
	struct forward *f = arg;
	char line[DDP_VERDICT_LINE_MAX];
	ssize_t w;

	if (strcmp(v->node, f->n->host) != 0 ||
	    ddp_verdict_format(v, line, sizeof(line)) < 0 ||
	    f->sent + strlen(line) > VERDICT_TEXT_MAX)
		return;
	/* One write of less than PIPE_BUF is never split. */
	w = write(f->n->verdict_wfd, line, strlen(line));
	if (w > 0)
		f->sent += (size_t)w;
}

/*
 * After ddp-check wrote findings: each node's first task hands those
 * about its node to slurmstepd, and with --ddp-check=requeue the step's
 * global rank 0 requeues the job when the check failed.
 */
static void
use_verdicts(const struct ddp_plugin *p, enum ddp_check mode, uint32_t local,
	     long global, int failed, const struct verdict_text *t)
{
	const struct ddp_node *n = &p->node;
	struct forward f = {n, 0};

	if (local == 0 && n->verdict_wfd >= 0 && t->len)
		ddp_verdict_scan(t->buf, t->len, forward_verdict, &f, NULL,
				 NULL, 0);
	if (failed && mode == DDP_CHECK_REQUEUE && global == 0)
		plugin_requeue(p, t->buf, t->len);
}

/*
 * --ddp-check: runs ddp-check (one rendezvous of every rank, on the
 * step's check port, not MASTER_PORT) from this task, as its user, with
 * the task's environment as set so far (the job environment, not
 * slurmstepd's own), and waits for it. ddp-check ends itself at its join
 * and time limits; the kill 5 s after both is the backstop for one that
 * cannot. The same on every Slurm version: 22.05 has no
 * spank_prepend_task_argv, and a wrapper would outlive nothing anyway.
 * Returns 0 to start the program, or -1 (logged) to end the task.
 */
static int
run_check(const struct ddp_plugin *p, spank_t sp, enum ddp_check mode,
	  uint32_t local, long global)
{
	const struct ddp_conf *conf = &p->conf;
	const struct ddp_node *n = &p->node;
	char frac[32], limit[32], join[32], port[32], vfd[32] = "";
	char **env = NULL;
	char *argv[] = {NULL,  "--mode",
			NULL,  "--min-fraction",
			frac,  "--join-limit",
			join,  "--time-limit",
			limit, "--port",
			port,  "--verdict-fd",
			vfd,   NULL};
	struct sigaction dfl = {.sa_handler = SIG_DFL}, old;
	struct verdict_text *text = NULL;
	sigset_t all;
	int status, killed = 0, pfd[2] = {-1, -1}, rc = -1;
	pid_t pid;

	if (ddp_fmt(frac, sizeof(frac), "%.6f", conf->check_min_fraction) < 0 ||
	    ddp_fmt(limit, sizeof(limit), "%u", conf->check_time_limit) < 0 ||
	    ddp_fmt(join, sizeof(join), "%u", conf->check_join_limit) < 0 ||
	    ddp_fmt(port, sizeof(port), "%ld", n->check_port) < 0)
		return -1;
	if (n->check_port <= 0) {
		ddp_error("--ddp-check: %s: no port was chosen for the check",
			  n->host);
		return -1;
	}
	argv[0] = (char *)conf->check_path;
	/* Requeueing is the plugin's: ddp-check fails as with fail. */
	argv[2] = (char *)ddp_check_name(
		mode == DDP_CHECK_REQUEUE ? DDP_CHECK_FAIL : mode);
	if (spank_get_item(sp, S_JOB_ENV, &env) != ESPANK_SUCCESS || !env) {
		ddp_error("--ddp-check: Slurm did not give the task's "
			  "environment");
		return -1;
	}
	/* Without the findings the check still runs, and fails as fail. */
	text = calloc(1, sizeof(*text));
	if (text && pipe2(pfd, O_CLOEXEC | O_NONBLOCK) == 0 &&
	    ddp_fmt(vfd, sizeof(vfd), "%d", pfd[1]) == 0) {
		text->fd = pfd[0];
	} else {
		ddp_info("--ddp-check: %s: the check's findings are not "
			 "read: %s",
			 n->host, text ? strerror(errno) : "out of memory");
		argv[11] = NULL;
		if (pfd[0] >= 0)
			close(pfd[0]);
		if (pfd[1] >= 0)
			close(pfd[1]);
		pfd[0] = pfd[1] = -1;
		if (text)
			text->fd = -1;
	}
	/* waitpid needs SIGCHLD not ignored; the program gets it back. */
	sigaction(SIGCHLD, &dfl, &old);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		sigemptyset(&all);
		sigprocmask(SIG_SETMASK, &all, NULL);
		/* The write end alone stays open across exec, blocking. */
		if (pfd[1] >= 0 && (fcntl(pfd[1], F_SETFD, 0) < 0 ||
				    fcntl(pfd[1], F_SETFL, 0) < 0))
			_exit(127);
		execve(argv[0], argv, env);
		dprintf(STDERR_FILENO,
			"ddp: %s: --ddp-check: cannot run %s: %s (the admin "
			"sets check_path in ddp.conf)\n",
			n->host, argv[0], strerror(errno));
		_exit(127);
	}
	if (pfd[1] >= 0)
		close(pfd[1]);
	if (pid < 0) {
		ddp_error("--ddp-check: cannot start %s: %s", argv[0],
			  strerror(errno));
		sigaction(SIGCHLD, &old, NULL);
		goto out;
	}
	status = wait_check(pid,
			    now_s() + conf->check_join_limit +
				    conf->check_time_limit + 5,
			    &killed, text);
	sigaction(SIGCHLD, &old, NULL);
	if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		use_verdicts(p, mode, local, global, 0, text);
		rc = 0;
		goto out;
	}
	if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 1) {
		/* The report on rank 0's output names the node(s). */
		if (local == 0)
			ddp_error("%s: --ddp-check found a problem (see the "
				  "report): the program was not started",
				  n->host);
		use_verdicts(p, mode, local, global, 1, text);
		goto out;
	}
	if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 2)
		ddp_error("%s: --ddp-check: %s could not check this step "
			  "(its message says why): the program was not "
			  "started",
			  n->host, argv[0]);
	else if (status != -1 && WIFEXITED(status) &&
		 WEXITSTATUS(status) == 127)
		; /* the child said why */
	else if (killed)
		ddp_error("%s: --ddp-check: %s did not end within its join "
			  "and time limits (%u + %u s): killed, the program "
			  "was not started",
			  n->host, argv[0], conf->check_join_limit,
			  conf->check_time_limit);
	else
		ddp_error("%s: --ddp-check: %s ended abnormally (status %d): "
			  "the program was not started",
			  n->host, argv[0], status);
out:
	if (text && text->fd >= 0)
		close(text->fd);
	free(text);
	return rc;
}

int
remote_task_init(struct ddp_plugin *p, spank_t sp)
{
	struct ddp_node *n = &p->node;
	const struct ddp_rank_place *rp = NULL;
	char err[DDP_ERR_LEN], procid[32], note[512];
	const char *bindnote = NULL;
	uint32_t local = 0, gid = 0;
	long global = -1;
	enum ddp_check mode;

	if (!n->active)
		return 0;
	/* The tasks write, slurmstepd reads. */
	if (n->verdict_rfd >= 0) {
		close(n->verdict_rfd);
		n->verdict_rfd = -1;
	}
	if (!n->error[0] && !n->plan && n->topo)
		compute_plan(n, sp);
	if (n->error[0]) {
		ddp_error("%s", n->error);
		return -1;
	}
	if (spank_get_item(sp, S_TASK_ID, &local) != ESPANK_SUCCESS) {
		ddp_error("Slurm did not give the task's index");
		return -1;
	}
	/* SLURM_PROCID carries the het-job offset S_TASK_GLOBAL_ID lacks. */
	if (jobenv(sp, "SLURM_PROCID", procid, sizeof(procid)) == 0)
		ddp_parse_long(procid, 0, 0x7fffffffL, &global);
	else if (spank_get_item(sp, S_TASK_GLOBAL_ID, &gid) == ESPANK_SUCCESS)
		global = gid;
	if (n->plan && local < n->plan->n)
		rp = &n->plan->rank[local];
	if (n->bind != DDP_BIND_NONE && rp) {
		if (!ddp_topo_is_thissystem(n->topo)) {
			bindnote = "(not applied: the topology is not this "
				   "machine)";
		} else if (ddp_plan_bind(n->topo, n->plan, local, err,
					 sizeof(err)) < 0) {
			if (ddp_fmt(note, sizeof(note), "(not applied: %s)",
				    err) < 0)
				note[0] = '\0';
			bindnote = note;
		}
	} else if (n->bind != DDP_BIND_NONE) {
		bindnote = "(not applied: no placement)";
	}
	if (p->opts.verbose && local == 0) {
		if (n->topo_note[0])
			ddp_user("%s: topology: %s (%.1f ms)", n->host,
				 n->topo_note, n->topo_ms);
		if (n->cpu_note[0])
			ddp_user("%s: %s", n->host, n->cpu_note);
		if (n->gpus.note[0])
			ddp_user("%s: %s", n->host, n->gpus.note);
	}
	if (task_env(p, sp, local, global, rp, bindnote) < 0)
		return -1;
	mode = check_mode(p);
	return mode == DDP_CHECK_OFF ? 0
				     : run_check(p, sp, mode, local, global);
}

/* What remote_exit records from the node's first task. */
struct record {
	const struct ddp_plugin *p;
	size_t written, foreign;
};

static void
record_verdict(void *arg, const struct ddp_verdict *line)
{
	struct record *r = arg;
	const struct ddp_node *n = &r->p->node;
	struct ddp_verdict v = *line;
	char err[DDP_ERR_LEN];

	/* The task was told to send its own node's lines only. */
	if (strcmp(v.node, n->host) != 0) {
		r->foreign++;
		return;
	}
	v.time = (long long)time(NULL);
	v.uid = (unsigned long)n->uid;
	if (ddp_fmt(v.job, sizeof(v.job), "%u", n->jobid) < 0 ||
	    ddp_fmt(v.step, sizeof(v.step), "%u", n->stepid) < 0)
		return;
	if (ddp_verdict_append(r->p->conf.state_dir, &v, err, sizeof(err)) <
	    0) {
		ddp_error("--ddp-check: %s: the verdict is not recorded: %s",
			  n->host, err);
		return;
	}
	r->written++;
}

/*
 * Root: the findings the node's first task sent about this node, each
 * appended to <state_dir>/verdicts with the job, step, user and time that
 * Slurm gave. The lines come from a process of the job's user: they are
 * read bounded, parsed strictly, and bad ones skipped with one log line.
 */
static void
record_verdicts(struct ddp_plugin *p)
{
	struct ddp_node *n = &p->node;
	struct record r = {p, 0, 0};
	char *buf = NULL, bad_why[128];
	size_t len = 0, bad = 0;
	ssize_t got;

	if (n->verdict_wfd >= 0)
		close(n->verdict_wfd);
	n->verdict_wfd = -1;
	if (n->verdict_rfd < 0)
		return;
	buf = malloc(VERDICT_TEXT_MAX);
	if (!buf)
		goto out;
	while (len < VERDICT_TEXT_MAX) {
		got = read(n->verdict_rfd, buf + len, VERDICT_TEXT_MAX - len);
		if (got > 0)
			len += (size_t)got;
		else if (got < 0 && errno == EINTR)
			continue;
		else
			break;
	}
	if (!len)
		goto out;
	ddp_verdict_scan(buf, len, record_verdict, &r, &bad, bad_why,
			 sizeof(bad_why));
	if (bad || r.foreign)
		ddp_info("--ddp-check: %s: %zu verdict line%s skipped (%s)",
			 n->host, bad + r.foreign,
			 bad + r.foreign == 1 ? "" : "s",
			 bad ? bad_why : "another node's");
	if (r.written)
		ddp_verbose("--ddp-check: %s: %zu verdict%s recorded", n->host,
			    r.written, r.written == 1 ? "" : "s");
out:
	close(n->verdict_rfd);
	n->verdict_rfd = -1;
	free(buf);
}

void
remote_exit(struct ddp_plugin *p)
{
	struct ddp_node *n = &p->node;
	char err[DDP_ERR_LEN];

	record_verdicts(p);
	ddp_site_key_wipe(&n->port_key);
	if (n->step_key_name[0] &&
	    ddp_step_key_remove(p->conf.state_dir, n->step_key_name, err,
				sizeof(err)) < 0)
		ddp_error("--ddp: the step's key: %s", err);
	n->step_key_name[0] = n->step_key_path[0] = '\0';
	ddp_plan_free(n->plan);
	n->plan = NULL;
	ddp_topo_destroy(n->topo);
	n->topo = NULL;
	free(n->counts);
	n->counts = NULL;
}
