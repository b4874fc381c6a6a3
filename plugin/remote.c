/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The slurmstepd side of spank_ddp.so: the node's plan, computed once per
 * node from the step's layout, and each task's rank environment, binding
 * and checked job directories. The topology is read in remote_topo.c;
 * ddp-check's run and its findings are remote_check.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
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

/* Marks a MASTER_PORT chosen by this plugin, so that a nested srun --ddp
 * inside a rank chooses its own instead of treating it as preset. */
#define PORT_MARK "DDP_PORT_CHOSEN"

int
remote_jobenv(spank_t sp, const char *name, char *buf, size_t size)
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

	remote_jobenv(sp, "CUDA_VISIBLE_DEVICES", cvd, sizeof(cvd));
	remote_jobenv(sp, "SLURM_STEP_GPUS", sgpus, sizeof(sgpus));
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

	if (remote_check_mode(p) == DDP_CHECK_OFF)
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

	/* Without a site key the ranks use munge (DDP_AUTH=auto). */
	if (!p->opts.enabled || p->conf_error[0] || n->port_key_state != 1)
		return;
	/* user_init names a missing layout item. */
	if (spank_get_item(sp, S_JOB_ID, &jobid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_STEPID, &stepid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS)
		return;
	if (stepid == SLURM_BATCH_SCRIPT || stepid == SLURM_EXTERN_CONT ||
	    stepid >= SLURM_INTERACTIVE_STEP)
		return;
	/* slurmstepd's pid tells apart two nodes of one step on a host. */
	if (ddp_step_key_name(jobid, stepid, (unsigned long)getpid(),
			      n->step_key_name, sizeof(n->step_key_name)) < 0)
		return;
	ddp_step_key_derive(&n->port_key, jobid, stepid, uid, &key);
	if (ddp_step_key_install(p->conf.state_dir, n->step_key_name, &key, uid,
				 n->step_key_path, sizeof(n->step_key_path),
				 err, sizeof(err)) < 0) {
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
	remote_jobenv(sp, "MASTER_PORT", preset, sizeof(preset));
	remote_jobenv(sp, PORT_MARK, mark, sizeof(mark));
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
	if (remote_jobenv(sp, "SLURM_STEP_NODELIST", list, sizeof(list)) < 0 ||
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
	if (remote_jobenv(sp, "SLURM_STEP_TASKS_PER_NODE", tpn, sizeof(tpn)) <
		    0 ||
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

	if (!n->active || n->error[0] || remote_check_mode(p) == DDP_CHECK_OFF)
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

int
remote_task_init(struct ddp_plugin *p, spank_t sp)
{
	struct ddp_node *n = &p->node;
	const struct ddp_rank_place *rp = NULL;
	char err[DDP_ERR_LEN], procid[32], note[512];
	const char *bindnote = NULL;
	uint32_t local = 0, gid = 0;
	long global = -1;

	if (!n->active)
		return 0;
	/* The tasks write, slurmstepd reads. */
	if (n->verdict_rfd >= 0) {
		ddp_close(&n->verdict_rfd);
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
	if (remote_jobenv(sp, "SLURM_PROCID", procid, sizeof(procid)) == 0)
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
	return remote_check_run(p, sp, local, global);
}

void
remote_exit(struct ddp_plugin *p)
{
	struct ddp_node *n = &p->node;
	char err[DDP_ERR_LEN];

	remote_check_record(p);
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
