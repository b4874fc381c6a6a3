/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * spank_ddp.so: the only slurm-ddp file that speaks to Slurm. Adds --ddp to
 * srun/sbatch/salloc, turns a one-line srun into one rank per GPU, and gives
 * every rank its data-parallel environment and placement.
 */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "args.h"
#include "ddp_conf.h"
#include "ddp_log.h"
#include "ddp_util.h"
#include "gpulist.h"
#include "hostlist.h"
#include "placement.h"
#include "port.h"
#include "tasks.h"

#define EXPORT __attribute__((visibility("default")))

/* SPANK_PLUGIN() defines these; export them despite -fvisibility=hidden. */
EXPORT extern const char plugin_name[];
EXPORT extern const char plugin_type[];
EXPORT extern const unsigned int plugin_version;
SPANK_PLUGIN(ddp, 1)

/* Set in the environment of the srun that node mode re-executes, so that
 * it does not re-execute again. Removed before any task sees it. */
#define REEXEC_GUARD "SLURM_DDP_REEXEC"
/* Marks a MASTER_PORT chosen by this plugin, so that a nested srun --ddp
 * inside a rank chooses its own instead of treating it as preset. */
#define PORT_MARK "DDP_PORT_CHOSEN"

static struct ddp_opts opts = {0, 0, -1, 0};
static struct ddp_conf conf;
static char topology_xml[PATH_MAX]; /* plugstack topology=, or "" */

/* Per node, in slurmstepd: computed in user_init, used by task_init. */
static struct {
	int active;
	char error[DDP_ERR_LEN]; /* raised from task_init (22.05) */
	uint32_t jobid, stepid, nodeid, nnodes, local_tasks;
	unsigned *counts;
	char host[DDP_HOST_MAX + 1];
	char master[DDP_HOST_MAX + 1];
	long port; /* 0: keep the user's MASTER_PORT */
	char port_note[128];
	char user[65];
	enum ddp_bind bind;
	struct ddp_topo *topo;
	struct ddp_plan *plan;
	char cpu_note[256];
	char visible[512]; /* CUDA_VISIBLE_DEVICES for every rank */
	long gpu_of[DDP_GPU_MAX];
	long nvisible;
} node;

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
	{"ddp-bind", "none|numa|core",
	 "[ddp] bind each rank's CPUs and memory: none, its NUMA node(s), or "
	 "its own cores (default: the site's default_bind)",
	 1, 2, opt_cb},
	{"ddp-verbose", NULL,
	 "[ddp] print one line per rank: rank, host, GPU, CPUs, NUMA node, NIC",
	 0, 3, opt_cb},
	SPANK_OPTIONS_TABLE_END,
};

static void
slurm_sink(enum ddp_log_level level, const char *msg)
{
	switch (level) {
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

	if (val < 0 || val > 3)
		return -1;
	if (ddp_opts_apply(&opts, options[val].name, optarg, err, sizeof(err)) <
	    0) {
		slurm_error("ddp: %s", err);
		return -1;
	}
	return 0;
}

static void preset_node_mode(void);
/* Ranks per node that preset_node_mode set (options are not parsed yet
 * when it runs, so local_post_opt reports it for --ddp-verbose). */
static long preset_per_node;

EXPORT int
slurm_spank_init(spank_t sp, int ac, char **av)
{
	spank_context_t ctx = spank_context();
	char err[DDP_ERR_LEN];
	size_t i;

	if (ctx != S_CTX_LOCAL && ctx != S_CTX_REMOTE && ctx != S_CTX_ALLOCATOR)
		return 0;
	ddp_log_set_sink(slurm_sink, DDP_LOG_DEBUG);
	if (ddp_plugstack_parse(&conf, topology_xml, sizeof(topology_xml), ac,
				av, err, sizeof(err)) < 0) {
		slurm_error("ddp: plugstack.conf: %s", err);
		return -1;
	}
	for (i = 0; options[i].name; i++) {
		spank_err_t rc = spank_option_register(sp, &options[i]);

		if (rc != ESPANK_SUCCESS) {
			slurm_error("ddp: cannot register --%s: %s",
				    options[i].name, spank_strerror(rc));
			return -1;
		}
	}
	if (ctx == S_CTX_LOCAL)
		preset_node_mode();
	return 0;
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

/* Node mode when preset_node_mode could not set it up: run srun again
 * with --ntasks-per-node=G added, so that every rank is a real Slurm task
 * (labels, signals, accounting, TaskProlog). Setting SLURM_NTASKS_PER_NODE
 * here is too late: srun has already read its environment. Only returns
 * on failure. */
static int
reexec_srun(int argc, char **argv, long per_node)
{
	char opt[64];
	char **nargv = NULL;
	int i;

	if (ddp_fmt(opt, sizeof(opt), "--ntasks-per-node=%ld", per_node) < 0)
		return -1;
	nargv = calloc((size_t)argc + 2, sizeof(*nargv));
	if (!nargv)
		return -1;
	nargv[0] = argv[0];
	nargv[1] = opt;
	for (i = 1; i < argc; i++)
		nargv[i + 1] = argv[i];
	if (setenv(REEXEC_GUARD, "1", 1) < 0) {
		free(nargv);
		return -1;
	}
	if (opts.verbose)
		slurm_info("ddp: node mode: running srun again with %s", opt);
	fflush(NULL);
	execv("/proc/self/exe", nargv);
	slurm_error("ddp: cannot re-run srun for node mode: %s",
		    strerror(errno));
	unsetenv(REEXEC_GUARD);
	free(nargv);
	return -1;
}

static int
local_post_opt(void)
{
	struct ddp_srun_req req;
	char err[DDP_ERR_LEN], *buf = NULL, **argv = NULL;
	unsigned eph_lo, eph_hi;
	int argc = 0, rc = -1, mode, reexeced;
	long per_node = 0;

	reexeced = getenv(REEXEC_GUARD) != NULL;
	if (reexeced)
		unsetenv(REEXEC_GUARD);
	if (!opts.enabled) {
		if (opts.port || opts.bind >= 0 || opts.verbose)
			slurm_error("ddp: --ddp-port, --ddp-bind and "
				    "--ddp-verbose have no effect without "
				    "--ddp");
		return 0;
	}
	ddp_read_ephemeral_range(&eph_lo, &eph_hi);
	if (!opts.port &&
	    ddp_conf_check_ports(&conf, eph_lo, eph_hi, err, sizeof(err)) < 0) {
		slurm_error("ddp: site configuration: %s; until the admin "
			    "fixes it, pass --ddp-port=N",
			    err);
		return -1;
	}
	if (read_cmdline(&buf, &argv, &argc) < 0) {
		slurm_error("ddp: cannot read srun's command line");
		goto out;
	}
	if (ddp_srun_scan(argc, argv, env_get, &req, err, sizeof(err)) < 0) {
		slurm_error("ddp: %s", err);
		goto out;
	}
	if (req.help) {
		rc = 0;
		goto out;
	}
	mode = ddp_srun_decide(&req, &per_node, err, sizeof(err));
	if (mode < 0) {
		slurm_error("ddp: %s", err);
		goto out;
	}
	if (preset_per_node && opts.verbose)
		slurm_info("ddp: node mode: %ld ranks per node "
			   "(SLURM_NTASKS_PER_NODE)",
			   preset_per_node);
	if (mode == 1 && !reexeced) {
		reexec_srun(argc, argv, per_node);
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
 * counts as given, and local_post_opt then sees task mode. Only a literal
 * --ddp before the program is visible this early; anything else is left
 * to local_post_opt, which re-executes srun. Errors are reported there.
 */
static void
preset_node_mode(void)
{
	struct ddp_srun_req req;
	char err[DDP_ERR_LEN], val[32], *buf = NULL, **argv = NULL;
	long per_node = 0;
	int argc = 0;

	if (getenv(REEXEC_GUARD) || read_cmdline(&buf, &argv, &argc) < 0)
		return;
	if (ddp_srun_scan(argc, argv, env_get, &req, err, sizeof(err)) == 0 &&
	    req.ddp && !req.help &&
	    ddp_srun_decide(&req, &per_node, err, sizeof(err)) == 1 &&
	    ddp_fmt(val, sizeof(val), "%ld", per_node) == 0) {
		if (setenv("SLURM_NTASKS_PER_NODE", val, 1) == 0)
			preset_per_node = per_node;
		else
			slurm_error("ddp: cannot set SLURM_NTASKS_PER_NODE: "
				    "%s",
				    strerror(errno));
	}
	free(argv);
	free(buf);
}

EXPORT int
slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	if (spank_context() == S_CTX_LOCAL)
		return local_post_opt();
	return 0;
}

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

/* MASTER_ADDR: first host of the step's node list, as Slurm parses it.
 * hostlist_t became the struct itself in 23.11. */
static int
first_host(const char *list, char *out, size_t size)
{
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 11, 0)
	hostlist_t *hl;
#else
	hostlist_t hl;
#endif
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

__attribute__((format(printf, 1, 2))) static void
set_error(const char *fmt, ...)
{
	va_list ap;
	int n;

	if (node.error[0])
		return;
	va_start(ap, fmt);
	n = vsnprintf(node.error, sizeof(node.error), fmt, ap);
	va_end(ap);
	if (n < 0)
		ddp_fmt(node.error, sizeof(node.error), "--ddp failed");
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

/* The step's GPUs and the CUDA_VISIBLE_DEVICES every rank gets: all of
 * them (hiding peers breaks NCCL peer-to-peer), LOCAL_RANK naming its own.
 * When Slurm narrowed a task's list (--gpus-per-task), it is widened back
 * to the step's list in the same numbering. */
static void
find_gpus(spank_t sp)
{
	char cvd[512], sgpus[512];
	unsigned vis[DDP_GPU_MAX], step[DDP_GPU_MAX];
	long nv = -1, ns = -1, k;
	size_t len = 0;

	node.nvisible = 0;
	node.visible[0] = '\0';
	jobenv(sp, "CUDA_VISIBLE_DEVICES", cvd, sizeof(cvd));
	jobenv(sp, "SLURM_STEP_GPUS", sgpus, sizeof(sgpus));
	if (cvd[0])
		nv = ddp_gpulist_parse(cvd, vis, DDP_GPU_MAX);
	if (sgpus[0])
		ns = ddp_gpulist_parse(sgpus, step, DDP_GPU_MAX);
	if (nv < 0 && ns < 0)
		return;
	if (ns > 0 && (nv < 0 || nv < ns)) {
		/* Widen to the step's list, in CUDA_VISIBLE_DEVICES' own
		 * numbering (node-level or 0-based). */
		int local = nv > 0;

		for (k = 0; k < nv; k++) {
			long j;

			for (j = 0; j < ns; j++)
				if (vis[k] == step[j])
					local = 0;
		}
		for (k = 0; k < ns; k++)
			vis[k] = local ? (unsigned)k : step[k];
		nv = ns;
	}
	if (nv < 0)
		return;
	ddp_gpu_map(vis, (size_t)nv, step, ns > 0 ? (size_t)ns : 0,
		    node.gpu_of);
	for (k = 0; k < nv; k++) {
		if (node.gpu_of[k] >= (long)ddp_topo_ngpus(node.topo))
			node.gpu_of[k] = -1;
		if (ddp_fmt(node.visible + len, sizeof(node.visible) - len,
			    "%s%u", k ? "," : "", vis[k]) < 0)
			break;
		len += strlen(node.visible + len);
	}
	node.nvisible = nv;
}

/* The CPUs Slurm gave the step on this node, as hwloc CPUs. */
static hwloc_bitmap_t
step_cpus(spank_t sp)
{
	hwloc_bitmap_t set = hwloc_bitmap_alloc();
	char *cores = NULL, err[256];

	if (!set)
		return NULL;
	if (spank_get_item(sp, S_STEP_ALLOC_CORES, &cores) != ESPANK_SUCCESS ||
	    !cores || !cores[0]) {
		ddp_fmt(node.cpu_note, sizeof(node.cpu_note),
			"Slurm gave no core list: using all allowed CPUs");
		hwloc_bitmap_free(set);
		return NULL;
	}
	if (ddp_topo_cpus_from_slurm_cores(node.topo, cores, set, err,
					   sizeof(err)) < 0) {
		if (ddp_fmt(node.cpu_note, sizeof(node.cpu_note),
			    "%s: using all allowed CPUs", err) < 0)
			node.cpu_note[0] = '\0';
		hwloc_bitmap_free(set);
		return NULL;
	}
	return set;
}

/* Computes the node's plan (once the GPU list is known). */
static int
compute_plan(spank_t sp)
{
	struct ddp_plan_req req;
	hwloc_bitmap_t cpus = NULL;
	long gpu[4096];
	char err[DDP_ERR_LEN], a[32], b[32];
	uint32_t r;
	int rc = -1;

	find_gpus(sp);
	if (node.nvisible > 0 && node.local_tasks > node.nvisible) {
		ddp_fmt(a, sizeof(a), "%u", node.local_tasks);
		ddp_fmt(b, sizeof(b), "%ld", node.nvisible);
		set_error("--ddp: %s ranks on this node but the step has only "
			  "%s GPUs here: use --ntasks-per-node of at most the "
			  "GPUs per node, or request more GPUs "
			  "(--gpus-per-node)",
			  a, b);
		return -1;
	}
	for (r = 0; r < node.local_tasks; r++)
		gpu[r] = (long)r < node.nvisible ? node.gpu_of[r] : -1;
	cpus = step_cpus(sp);
	memset(&req, 0, sizeof(req));
	req.nranks = node.local_tasks;
	req.cpus = cpus;
	req.gpu = gpu;
	req.bind = node.bind;
	if (ddp_plan_compute(node.topo, &req, &node.plan, err, sizeof(err)) < 0)
		set_error("--ddp: placement failed: %s", err);
	else
		rc = 0;
	hwloc_bitmap_free(cpus);
	return rc;
}

static void
choose_port(spank_t sp)
{
	char preset[32], mark[32];
	long p;

	if (opts.port) {
		node.port = opts.port;
		return;
	}
	jobenv(sp, "MASTER_PORT", preset, sizeof(preset));
	jobenv(sp, PORT_MARK, mark, sizeof(mark));
	if (preset[0] && strcmp(preset, mark) != 0) {
		if (ddp_port_parse(preset) < 0) {
			set_error("--ddp: MASTER_PORT=%.40s is not a port "
				  "(1-65535): unset it or pass --ddp-port=N",
				  preset);
			return;
		}
		node.port = 0; /* the user's own wins */
		return;
	}
	p = ddp_port_choose(node.jobid, node.stepid, conf.port_min,
			    conf.port_max);
	if (p < 0) {
		set_error("--ddp: the site's port_range is empty");
		return;
	}
	node.port = p;
	/* Advisory: the master node can at least say the port is busy. */
	if (node.nodeid == 0 && ddp_port_probe((unsigned)p) == 0 &&
	    ddp_fmt(node.port_note, sizeof(node.port_note),
		    " (port %ld already in use on %s: pass --ddp-port)", p,
		    node.host) < 0)
		node.port_note[0] = '\0';
}

EXPORT int
slurm_spank_user_init(spank_t sp, int ac, char **av)
{
	char list[8192], tpn[4096], err[DDP_ERR_LEN];
	uint32_t total = 0;
	uid_t uid;
	long n;

	if (!opts.enabled || !spank_remote(sp))
		return 0;
	if (spank_get_item(sp, S_JOB_STEPID, &node.stepid) != ESPANK_SUCCESS)
		return 0;
	/* Nothing to do in the batch script, the extern step or an
	 * interactive step: --ddp given to sbatch/salloc reaches them too. */
	if (node.stepid == SLURM_BATCH_SCRIPT ||
	    node.stepid == SLURM_EXTERN_CONT ||
	    node.stepid == SLURM_INTERACTIVE_STEP ||
	    node.stepid >= SLURM_INTERACTIVE_STEP)
		return 0;
	node.active = 1;
	node.bind =
		opts.bind >= 0 ? (enum ddp_bind)opts.bind : conf.default_bind;
	if (spank_get_item(sp, S_JOB_ID, &node.jobid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_NODEID, &node.nodeid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_NNODES, &node.nnodes) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &node.local_tasks) !=
		    ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &total) !=
		    ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS) {
		set_error("--ddp: Slurm did not give the step's layout");
		return 0;
	}
	if (gethostname(node.host, sizeof(node.host) - 1) < 0)
		ddp_fmt(node.host, sizeof(node.host), "?");
	if (user_name(uid, node.user, sizeof(node.user)) < 0)
		node.user[0] = '\0';
	if (jobenv(sp, "SLURM_STEP_NODELIST", list, sizeof(list)) < 0 ||
	    first_host(list, node.master, sizeof(node.master)) < 0) {
		set_error("--ddp: cannot read the step's node list "
			  "(SLURM_STEP_NODELIST=%.80s)",
			  list);
		return 0;
	}
	if (ddp_hostlist_first(list, tpn, sizeof(tpn)) == 0 &&
	    strcmp(tpn, node.master) != 0)
		ddp_debug("hostlist: Slurm says %s, ours says %s", node.master,
			  tpn);
	node.counts = calloc(DDP_TASKS_MAX_NODES, sizeof(*node.counts));
	if (!node.counts) {
		set_error("--ddp: out of memory");
		return 0;
	}
	if (jobenv(sp, "SLURM_STEP_TASKS_PER_NODE", tpn, sizeof(tpn)) < 0 ||
	    (n = ddp_tasks_parse(tpn, node.counts, DDP_TASKS_MAX_NODES)) < 0 ||
	    (uint32_t)n != node.nnodes || node.nodeid >= node.nnodes ||
	    node.counts[node.nodeid] != node.local_tasks) {
		set_error("--ddp: SLURM_STEP_TASKS_PER_NODE=%.80s does not "
			  "match the step's layout",
			  tpn);
		return 0;
	}
	choose_port(sp);
	if (ddp_topo_load(&node.topo, topology_xml[0] ? topology_xml : NULL,
			  err, sizeof(err)) < 0) {
		set_error("--ddp: %s", err);
		return 0;
	}
	/* The GPU list may only be in the tasks' environment: then each
	 * task computes the (identical) plan in task_init. */
	compute_plan(sp);
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

/* DDP_SHARED_DIR and DDP_SCRATCH_DIR, named as the prolog names them, and
 * only when the prolog actually made them. */
static int
export_dirs(spank_t sp)
{
	char dir[PATH_MAX];
	struct stat st;
	int rc = 0;

	if (ddp_conf_shared_dir(&conf, node.user, node.jobid, dir,
				sizeof(dir)) == 0 &&
	    stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
		rc |= setenv_s(sp, "DDP_SHARED_DIR", dir);
	if (ddp_conf_scratch_dir(&conf, node.jobid, dir, sizeof(dir)) == 0 &&
	    stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
		rc |= setenv_s(sp, "DDP_SCRATCH_DIR", dir);
	return rc;
}

static int
task_env(spank_t sp, uint32_t local, long global,
	 const struct ddp_rank_place *rp, const char *bindnote)
{
	struct ddp_rank_env e;
	char err[DDP_ERR_LEN], buf[DDP_NAME_LEN + 1];
	int rc = 0;

	if (ddp_rank_env_compute(node.counts, node.nnodes, node.nodeid, local,
				 global, &e, err, sizeof(err)) < 0) {
		slurm_error("ddp: rank environment: %s", err);
		return -1;
	}
	rc |= setenv_u(sp, "RANK", e.rank);
	rc |= setenv_u(sp, "WORLD_SIZE", e.world_size);
	rc |= setenv_u(sp, "LOCAL_RANK", e.local_rank);
	rc |= setenv_u(sp, "LOCAL_WORLD_SIZE", e.local_world_size);
	rc |= setenv_u(sp, "NODE_RANK", e.node_rank);
	rc |= setenv_u(sp, "GROUP_RANK", e.node_rank);
	rc |= setenv_s(sp, "MASTER_ADDR", node.master);
	if (node.port) {
		rc |= setenv_u(sp, "MASTER_PORT", (unsigned long)node.port);
		if (!opts.port)
			rc |= setenv_u(sp, PORT_MARK, (unsigned long)node.port);
	}
	rc |= setenv_s(sp, "CUDA_DEVICE_ORDER", "PCI_BUS_ID");
	if (node.nvisible > 0)
		rc |= setenv_s(sp, "CUDA_VISIBLE_DEVICES", node.visible);
	rc |= setenv_s(sp, "DDP_BIND", ddp_bind_name(node.bind));
	rc |= setenv_s(sp, "DDP_BOUND", bindnote ? "0" : "1");
	if (rp) {
		rc |= setenv_default(
			sp, "OMP_NUM_THREADS",
			ddp_fmt(buf, sizeof(buf), "%u", rp->ncpus) == 0 ? buf
									: "1");
		rc |= setenv_s(sp, "DDP_CPUS", rp->cpus);
		rc |= setenv_s(sp, "DDP_GPU_BUSID", rp->busid);
		rc |= setenv_s(sp, "DDP_NUMA", rp->numa[0] ? rp->numa : "-");
		rc |= setenv_s(sp, "DDP_NIC", rp->nic[0] ? rp->nic : "-");
		rc |= setenv_s(sp, "DDP_HCA", rp->hca[0] ? rp->hca : "-");
		/* "=" asks NCCL for an exact name, not a prefix. */
		if (rp->nic[0] &&
		    ddp_fmt(buf, sizeof(buf), "=%s", rp->nic) == 0)
			rc |= setenv_default(sp, "NCCL_SOCKET_IFNAME", buf);
		if (rp->hca[0] &&
		    ddp_fmt(buf, sizeof(buf), "=%s", rp->hca) == 0)
			rc |= setenv_default(sp, "NCCL_IB_HCA", buf);
	}
	rc |= export_dirs(sp);
	if (rc)
		slurm_error("ddp: could not set the rank's environment");
	if (opts.verbose)
		slurm_spank_log(
			"ddp: rank=%u local_rank=%u host=%s gpu=%s cpus=%s "
			"numa=%s nic=%s hca=%s bind=%s%s%s master=%s:%ld%s",
			e.rank, e.local_rank, node.host, rp ? rp->busid : "-",
			rp ? rp->cpus : "-", rp && rp->numa[0] ? rp->numa : "-",
			rp && rp->nic[0] ? rp->nic : "-",
			rp && rp->hca[0] ? rp->hca : "-",
			ddp_bind_name(node.bind), bindnote ? " " : "",
			bindnote ? bindnote : "", node.master, node.port,
			node.port_note);
	return rc ? -1 : 0;
}

EXPORT int
slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	const struct ddp_rank_place *rp = NULL;
	char err[DDP_ERR_LEN], procid[32], note[512];
	const char *bindnote = NULL;
	uint32_t local = 0, gid = 0;
	long global = -1;

	if (!node.active)
		return 0;
	if (!node.error[0] && !node.plan && node.topo)
		compute_plan(sp);
	if (node.error[0]) {
		slurm_error("ddp: %s", node.error);
		return -1;
	}
	if (spank_get_item(sp, S_TASK_ID, &local) != ESPANK_SUCCESS) {
		slurm_error("ddp: Slurm did not give the task's index");
		return -1;
	}
	/* SLURM_PROCID carries the het-job offset S_TASK_GLOBAL_ID lacks. */
	if (jobenv(sp, "SLURM_PROCID", procid, sizeof(procid)) == 0)
		ddp_parse_long(procid, 0, 0x7fffffffL, &global);
	else if (spank_get_item(sp, S_TASK_GLOBAL_ID, &gid) == ESPANK_SUCCESS)
		global = gid;
	if (node.plan && local < node.plan->n)
		rp = &node.plan->rank[local];
	if (node.bind != DDP_BIND_NONE && rp) {
		if (!ddp_topo_is_thissystem(node.topo)) {
			bindnote = "(not applied: the topology is not this "
				   "machine)";
		} else if (ddp_plan_bind(node.topo, node.plan, local, err,
					 sizeof(err)) < 0) {
			if (ddp_fmt(note, sizeof(note), "(not applied: %s)",
				    err) < 0)
				note[0] = '\0';
			bindnote = note;
		}
	} else if (node.bind != DDP_BIND_NONE) {
		bindnote = "(not applied: no placement)";
	}
	if (opts.verbose && node.cpu_note[0] && local == 0)
		slurm_spank_log("ddp: %s: %s", node.host, node.cpu_note);
	return task_env(sp, local, global, rp, bindnote);
}

EXPORT int
slurm_spank_exit(spank_t sp, int ac, char **av)
{
	ddp_plan_free(node.plan);
	node.plan = NULL;
	ddp_topo_destroy(node.topo);
	node.topo = NULL;
	free(node.counts);
	node.counts = NULL;
	return 0;
}
