/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The communicator: configuration from the environment, init, backend
 * choice (TCP built in, NCCL loaded at run time) and dispatch to the
 * backend's ops table.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "comm.h"
#include "ddp_tools.h"
#include "ddp_util.h"
#include "rdv.h"
#include "reduce.h"

static enum ddp_status
env_long(const char *name, long min, long max, long dflt, int required,
	 long *out)
{
	const char *v = getenv(name);

	if (!v || !*v) {
		if (required)
			return wk_err(DDP_ERR_ENV,
				      "%s is not set; launch with srun --ddp "
				      "(or export RANK, WORLD_SIZE, "
				      "MASTER_ADDR, MASTER_PORT)",
				      name);
		*out = dflt;
		return DDP_OK;
	}
	if (ddp_parse_long(v, min, max, out) < 0)
		return wk_err(DDP_ERR_ENV,
			      "%s='%.64s' is not an integer in [%ld, %ld]",
			      name, v, min, max);
	return DDP_OK;
}

static enum ddp_status
env_str(const char *name, const char *dflt, char *out, size_t size)
{
	const char *v = getenv(name);

	if (!v || !*v)
		v = dflt;
	if (ddp_fmt(out, size, "%s", v) < 0)
		return wk_err(DDP_ERR_ENV, "%s is longer than %zu characters",
			      name, size - 1);
	return DDP_OK;
}

/* DDP_TIMEOUT, in seconds (300 when unset). */
static enum ddp_status
env_timeout(double *out)
{
	const char *v = getenv("DDP_TIMEOUT");
	char *end = NULL;
	double t;

	*out = 300;
	if (!v || !*v)
		return DDP_OK;
	/* Accept fractions (tests use sub-second timeouts). */
	errno = 0;
	t = strtod(v, &end);
	if (errno || end == v || *end || !(t > 0) || t > 86400.0 * 7)
		return wk_err(DDP_ERR_ENV,
			      "DDP_TIMEOUT='%.64s' is not a number of "
			      "seconds in (0, 604800]",
			      v);
	*out = t;
	return DDP_OK;
}

/* DDP_AUTH, as given (auto when unset). */
static enum ddp_status
env_auth(int *out)
{
	const char *v = getenv("DDP_AUTH");

	if (!v || !*v || strcmp(v, "auto") == 0)
		*out = DDP_AUTH_AUTO;
	else if (strcmp(v, "key") == 0)
		*out = DDP_AUTH_KEY;
	else if (strcmp(v, "munge") == 0)
		*out = DDP_AUTH_MUNGE;
	else if (strcmp(v, "none") == 0)
		*out = DDP_AUTH_NONE;
	else
		return wk_err(
			DDP_ERR_ENV,
			"DDP_AUTH='%.64s': use auto (the step key of srun "
			"--ddp when there is one, else munge), key, munge "
			"or none",
			v);
	return DDP_OK;
}

enum ddp_status
ddp_config_from_env(struct ddp_config *cfg)
{
	enum ddp_status st;
	const char *v;
	long world, rank, lr, port;

	if (!cfg)
		return wk_err(DDP_ERR_INVALID, "ddp_config_from_env: NULL");
	memset(cfg, 0, sizeof(*cfg));
	st = env_long("WORLD_SIZE", 1, WK_MAX_WORLD, 1, 0, &world);
	if (st)
		return st;
	st = env_long("RANK", 0, world - 1, 0, world > 1, &rank);
	if (st)
		return st;
	st = env_long("LOCAL_RANK", 0, 4096, 0, 0, &lr);
	if (st)
		return st;
	st = env_long("MASTER_PORT", 1, 65535, 29500, world > 1, &port);
	if (st)
		return st;
	st = env_str("MASTER_ADDR", world > 1 ? "" : "127.0.0.1",
		     cfg->master_addr, sizeof(cfg->master_addr));
	if (st)
		return st;
	if (!cfg->master_addr[0])
		return wk_err(DDP_ERR_ENV, "MASTER_ADDR is not set; launch "
					   "with srun --ddp");
	st = env_timeout(&cfg->timeout_s);
	if (st)
		return st;
	v = getenv("DDP_BACKEND");
	if (!v || !*v || strcmp(v, "auto") == 0)
		cfg->backend = DDP_BACKEND_AUTO;
	else if (strcmp(v, "tcp") == 0)
		cfg->backend = DDP_BACKEND_TCP;
	else if (strcmp(v, "nccl") == 0)
		cfg->backend = DDP_BACKEND_NCCL;
	else
		return wk_err(DDP_ERR_ENV,
			      "DDP_BACKEND='%.64s': use auto, tcp or nccl", v);
	st = env_auth(&cfg->auth);
	if (st)
		return st;
	/* The configuration says what will be used (ddp-check reports it). */
	cfg->auth = auth_resolve(cfg->auth);
	st = env_str("DDP_MUNGE_SOCKET", "", cfg->munge_socket,
		     sizeof(cfg->munge_socket));
	if (st)
		return st;
	st = env_str("SLURM_JOB_ID", "none", cfg->job_id, sizeof(cfg->job_id));
	if (st)
		return st;
	st = env_str("SLURM_STEP_ID", "none", cfg->step_id,
		     sizeof(cfg->step_id));
	if (st)
		return st;
	cfg->rank = (int)rank;
	cfg->world_size = (int)world;
	cfg->local_rank = (int)lr;
	cfg->master_port = (int)port;
	return DDP_OK;
}

static enum ddp_status
tune_from_env(struct ddp_comm *comm)
{
	const char *v = getenv("DDP_TCP_ALGO");
	long n;

	if (!v || !*v || strcmp(v, "auto") == 0)
		comm->mesh.algo = WK_ALGO_AUTO;
	else if (strcmp(v, "rd") == 0)
		comm->mesh.algo = WK_ALGO_RD;
	else if (strcmp(v, "ring") == 0)
		comm->mesh.algo = WK_ALGO_RING;
	else if (strcmp(v, "hier") == 0)
		comm->mesh.algo = WK_ALGO_HIER;
	else
		return wk_err(
			DDP_ERR_ENV,
			"DDP_TCP_ALGO='%.64s': use auto, rd, ring or hier", v);
	comm->mesh.ring_min = 64 * 1024;
	comm->mesh.seg_bytes = 512 * 1024;
	v = getenv("DDP_TCP_SEGMENT");
	if (v && ddp_parse_long(v, 64, 64L << 20, &n) == 0)
		comm->mesh.seg_bytes = (size_t)n;
	v = getenv("DDP_TCP_SPIN");
	n = 50;
	if (v && *v && ddp_parse_long(v, 0, 1000000, &n) < 0)
		return wk_err(DDP_ERR_ENV,
			      "DDP_TCP_SPIN='%.64s' is not a number of "
			      "microseconds in [0, 1000000]",
			      v);
	comm->mesh.spin_s = (double)n * 1e-6;
	v = getenv("DDP_NCCL_CHECK");
	comm->check_calls = !(v && strcmp(v, "0") == 0);
	/* DDP_HOSTNAME: ranks naming the same host share memory. */
	return env_str("DDP_HOSTNAME", "", comm->mesh.myhost,
		       sizeof(comm->mesh.myhost));
}

void *
ddp_nccl_plugin_open(char *why, size_t whylen)
{
	char path[PATH_MAX];
	const char *env = getenv("DDP_NCCL_PLUGIN");
	Dl_info info;
	char *slash;
	void *h;

	if (env && *env) {
		h = dlopen(env, RTLD_NOW | RTLD_LOCAL);
		if (!h)
			ddp_fmt(why, whylen, "%s", dlerror());
		return h;
	}
	path[0] = '\0';
	if (dladdr((void *)ddp_comm_init, &info) && info.dli_fname &&
	    ddp_fmt(path, sizeof(path), "%s", info.dli_fname) == 0) {
		slash = strrchr(path, '/');
		if (slash) {
			slash[1] = '\0';
			if (ddp_fmt(slash + 1,
				    sizeof(path) - (size_t)(slash + 1 - path),
				    "libddp-nccl.so") < 0)
				path[0] = '\0';
		} else {
			path[0] = '\0';
		}
	}
	h = path[0] ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
#ifdef DDP_PLUGIN_DIR
	if (!h)
		h = dlopen(DDP_PLUGIN_DIR "/libddp-nccl.so",
			   RTLD_NOW | RTLD_LOCAL);
#endif
	if (!h)
		h = dlopen("libddp-nccl.so", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		ddp_fmt(why, whylen,
			"libddp-nccl.so not found beside libddp or on the "
			"library path (%s); libddp was built without NCCL or "
			"DDP_NCCL_PLUGIN is unset",
			dlerror());
	return h;
}

static enum ddp_status
host_bcast(struct ddp_comm *comm, void *buf, size_t bytes, int root)
{
	/* Control-plane broadcast of opaque bytes (the NCCL unique id). */
	return tcp_broadcast(&comm->mesh, buf, (bytes + 1) / 2, DDP_FLOAT16,
			     root);
}

/* Non-blocking: a peer's death or abort seen on the TCP mesh. */
static enum ddp_status
host_check(struct ddp_comm *comm)
{
	return tcp_check_peers(&comm->mesh);
}

/* host_check, plus the hang survey of a wait that ends at deadline. */
static enum ddp_status
host_watch(struct ddp_comm *comm, double deadline)
{
	return tcp_hang_watch(&comm->mesh, NULL, -1, deadline);
}

static const struct wk_nccl_host nccl_host_proto = {
	.broadcast = host_bcast,
	.err = wk_err,
	.check = host_check,
	.watch = host_watch,
};

/*
 * This rank's GPU as the node numbers it, for messages: the LOCAL_RANK-th
 * entry of CUDA_VISIBLE_DEVICES (the one entry when there is one), or -1
 * when that is not a GPU number (unset, a UUID).
 */
static int
own_gpu(int local_rank)
{
	const char *v = getenv("CUDA_VISIBLE_DEVICES"), *p;
	char entry[32];
	size_t len;
	long gpu;
	int i, n = 1;

	if (!v || !*v)
		return -1;
	for (p = v; *p; p++)
		n += *p == ',';
	if (n == 1)
		local_rank = 0;
	for (p = v, i = 0; i < local_rank && p; i++) {
		p = strchr(p, ',');
		if (p)
			p++;
	}
	if (!p)
		return -1;
	len = strcspn(p, ",");
	if (ddp_fmt(entry, sizeof(entry), "%.*s", (int)len, p) < 0 ||
	    ddp_parse_long(entry, 0, 65535, &gpu) < 0)
		return -1;
	return (int)gpu;
}

/*
 * Every rank's process id (hang messages, tcp.h) and GPU (straggler
 * lines, grad.c), in one allreduce (max) of the control plane in which
 * each rank fills its own slots.
 */
static enum ddp_status
exchange_ids(struct ddp_comm *comm)
{
	size_t n = (size_t)comm->mesh.size, r = (size_t)comm->mesh.rank, i;
	enum ddp_status st = DDP_OK;
	double *ids = calloc(2 * n, sizeof(*ids));

	comm->mesh.pids = calloc(n, sizeof(*comm->mesh.pids));
	comm->gpus = calloc(n, sizeof(*comm->gpus));
	if (!ids || !comm->mesh.pids || !comm->gpus) {
		st = wk_err(DDP_ERR_NOMEM, "ddp_comm_init: out of memory");
		goto out;
	}
	ids[2 * r] = (double)getpid();
	ids[2 * r + 1] = (double)own_gpu(comm->local_rank) + 1;
	if (n > 1)
		st = tcp_allreduce(&comm->mesh, ids, ids, 2 * n, DDP_FLOAT64,
				   DDP_MAX);
	for (i = 0; i < n && !st; i++) {
		comm->mesh.pids[i] = (int32_t)ids[2 * i];
		comm->gpus[i] = (int)ids[2 * i + 1] - 1;
	}
out:
	free(ids);
	return st;
}

/*
 * Picks the data-plane backend. All ranks agree: each probes its own GPU,
 * then a TCP allreduce (min) of the verdicts decides.
 */
static enum ddp_status
choose_backend(struct ddp_comm *comm, enum ddp_backend want)
{
	struct wk_nccl_host host = nccl_host_proto;
	char why[DDP_ERR_LEN] = "";
	wk_nccl_probe_fn *probe = NULL;
	wk_nccl_open_fn *open_fn = NULL;
	enum ddp_status st = DDP_OK, pst;
	float ok;
	void *h = NULL;

	st = exchange_ids(comm);
	if (st)
		return st;
	comm->backend = DDP_BACKEND_TCP;
	comm->bops = &wk_host_ops;
	comm->bstate = &comm->host;
	comm->host.mesh = &comm->mesh;
	if (want == DDP_BACKEND_TCP)
		return DDP_OK;
	host.comm = comm;
	host.rank_host = comm->mesh.myhost;
	h = ddp_nccl_plugin_open(why, sizeof(why));
	if (h) {
		*(void **)&probe = dlsym(h, WK_NCCL_PROBE);
		*(void **)&open_fn = dlsym(h, WK_NCCL_ENTRY);
		if (!probe || !open_fn)
			ddp_fmt(why, sizeof(why), "%s",
				"libddp-nccl.so lacks its entry points "
				"(" WK_NCCL_ENTRY "): it belongs to another "
				"libddp version");
	}
	if (probe && open_fn) {
		pst = probe(&host, comm->local_rank);
		if (pst)
			ddp_fmt(why, sizeof(why), "%s", wk_errbuf());
	} else {
		pst = DDP_ERR_BACKEND;
	}
	ok = pst == DDP_OK ? 1.0f : 0.0f;
	if (comm->mesh.size > 1) {
		st = tcp_allreduce(&comm->mesh, &ok, &ok, 1, DDP_FLOAT32,
				   DDP_MIN);
		if (st)
			goto out;
	}
	if (ok < 0.5f) {
		if (want == DDP_BACKEND_NCCL) {
			if (pst == DDP_OK)
				st = wk_err(DDP_ERR_NO_GPU,
					    "DDP_BACKEND=nccl: another rank "
					    "has no usable GPU");
			else
				st = wk_err(pst ? pst : DDP_ERR_NO_GPU,
					    "DDP_BACKEND=nccl on rank %d "
					    "(%s): %s",
					    comm->mesh.rank, comm->mesh.myhost,
					    why);
			goto out;
		}
		wk_log(3, "rank %d: using TCP backend (%s)", comm->mesh.rank,
		       why[0] ? why : "a rank has no usable GPU");
		goto out;
	}
	st = open_fn(&host, comm->mesh.rank, comm->mesh.size, comm->local_rank,
		     comm->mesh.timeout_s, &comm->bops, &comm->bstate);
	if (st)
		goto out;
	comm->backend = DDP_BACKEND_NCCL;
	comm->bdl = h;
	h = NULL;
out:
	if (h)
		dlclose(h);
	return st;
}

enum ddp_status
ddp_comm_init(const struct ddp_config *cfg, struct ddp_comm **out)
{
	struct ddp_comm *comm = NULL;
	enum ddp_status st;
	int i;

	if (!cfg || !out)
		return wk_err(DDP_ERR_INVALID, "ddp_comm_init: NULL argument");
	*out = NULL;
	if (cfg->world_size < 1 || cfg->world_size > WK_MAX_WORLD ||
	    cfg->rank < 0 || cfg->rank >= cfg->world_size ||
	    !(cfg->timeout_s > 0))
		return wk_err(DDP_ERR_INVALID,
			      "ddp_comm_init: rank %d, world size %d, "
			      "timeout %g s are not valid",
			      cfg->rank, cfg->world_size, cfg->timeout_s);
	comm = calloc(1, sizeof(*comm));
	if (!comm)
		return wk_err(DDP_ERR_NOMEM, "ddp_comm_init: out of memory");
	comm->mesh.rank = cfg->rank;
	comm->mesh.size = cfg->world_size;
	comm->local_rank = cfg->local_rank;
	comm->mesh.timeout_s = cfg->timeout_s;
	pthread_mutex_init(&comm->lock, NULL);
	st = tune_from_env(comm);
	if (st)
		goto out;
	if (!comm->mesh.myhost[0] &&
	    gethostname(comm->mesh.myhost, sizeof(comm->mesh.myhost) - 1) < 0)
		ddp_fmt(comm->mesh.myhost, sizeof(comm->mesh.myhost),
			"unknown-host");
	comm->mesh.peers =
		calloc((size_t)comm->mesh.size, sizeof(*comm->mesh.peers));
	if (!comm->mesh.peers) {
		st = wk_err(DDP_ERR_NOMEM, "ddp_comm_init: out of memory");
		goto out;
	}
	for (i = 0; i < comm->mesh.size; i++)
		comm->mesh.peers[i].fd = -1;
	ddp_fmt(comm->mesh.peers[comm->mesh.rank].host, DDP_HOST_MAX, "%s",
		comm->mesh.myhost);
	if (comm->mesh.size > 1) {
		st = rdv_connect_all(&comm->mesh, cfg);
		if (!st)
			st = tcp_mesh_link(&comm->mesh);
		if (st)
			goto out;
		tcp_limit_spin(&comm->mesh);
	}
	st = choose_backend(comm, cfg->backend);
	if (!st && comm->backend == DDP_BACKEND_TCP)
		st = wk_host_setup(&comm->host, &comm->mesh);
	if (st)
		goto out;
	*out = comm;
	comm = NULL;
out:
	if (comm) {
		/* Tell the peers why, so they fail with this reason. */
		if (comm->mesh.size > 1)
			tcp_send_abort(&comm->mesh, wk_errbuf());
		ddp_comm_destroy(comm);
	}
	return st;
}

enum ddp_status
ddp_comm_init_env(struct ddp_comm **comm)
{
	struct ddp_config cfg;
	enum ddp_status st;

	if (!comm)
		return wk_err(DDP_ERR_INVALID, "ddp_comm_init_env: NULL");
	*comm = NULL;
	st = ddp_config_from_env(&cfg);
	if (st)
		return st;
	return ddp_comm_init(&cfg, comm);
}

void
ddp_comm_destroy(struct ddp_comm *comm)
{
	if (!comm)
		return;
	if (comm->bops)
		comm->bops->destroy(comm->bstate);
	free(comm->gpus);
	if (comm->bdl)
		dlclose(comm->bdl);
	wk_host_fini(&comm->host);
	tcp_mesh_fini(&comm->mesh);
	pthread_mutex_destroy(&comm->lock);
	free(comm);
}

int
ddp_comm_rank(const struct ddp_comm *comm)
{
	return comm ? comm->mesh.rank : -1;
}

int
ddp_comm_size(const struct ddp_comm *comm)
{
	return comm ? comm->mesh.size : -1;
}

int
ddp_comm_local_rank(const struct ddp_comm *comm)
{
	return comm ? comm->local_rank : -1;
}

enum ddp_backend
ddp_comm_backend(const struct ddp_comm *comm)
{
	return comm ? comm->backend : DDP_BACKEND_TCP;
}

enum ddp_status
ddp_comm_set_timeout(struct ddp_comm *comm, double seconds)
{
	if (!comm || !(seconds > 0))
		return wk_err(DDP_ERR_INVALID,
			      "ddp_comm_set_timeout: %g s is not a timeout "
			      "(use a number of seconds > 0)",
			      seconds);
	comm->mesh.timeout_s = seconds;
	return DDP_OK;
}

const char *
ddp_comm_host(const struct ddp_comm *comm, int r)
{
	if (!comm || r < 0 || r >= comm->mesh.size)
		return NULL;
	return comm->mesh.peers[r].host;
}

enum ddp_status
wk_comm_fail(struct ddp_comm *comm, enum ddp_status st)
{
	if (!comm->failed) {
		comm->failed = 1;
		comm->fail_status = st;
		ddp_fmt(comm->fail_msg, sizeof(comm->fail_msg), "%s",
			wk_errbuf());
		tcp_send_abort(&comm->mesh, comm->fail_msg);
		if (comm->bops && comm->bops->abort)
			comm->bops->abort(comm->bstate);
	}
	return st;
}

/* Common checks; returns with comm->lock held on DDP_OK. */
static enum ddp_status
enter(struct ddp_comm *comm, const char *what)
{
	if (!comm)
		return wk_err(DDP_ERR_INVALID, "%s: NULL communicator", what);
	pthread_mutex_lock(&comm->lock);
	if (comm->failed) {
		pthread_mutex_unlock(&comm->lock);
		return wk_err(DDP_ERR_ABORTED,
			      "%s: the communicator failed earlier: %s", what,
			      comm->fail_msg);
	}
	return DDP_OK;
}

static enum ddp_status
leave(struct ddp_comm *comm, enum ddp_status st)
{
	if (st != DDP_OK && st != DDP_ERR_INVALID)
		wk_comm_fail(comm, st);
	pthread_mutex_unlock(&comm->lock);
	return st;
}

/*
 * NCCL cannot tell two ranks' calls apart: a different count or op
 * corrupts data or hangs until the timeout. Every data-plane call is
 * agreed on the control plane first (one empty exchange, log2(P) rounds).
 */
static enum ddp_status
agree(struct ddp_comm *comm, enum wk_coll coll, enum ddp_dtype dtype, int op,
      size_t count, int root)
{
	struct wk_frame call;

	/* The TCP backend's frames carry the header already. */
	if (!comm->bops->agree_first)
		return DDP_OK;
	/* Unchecked calls are numbered all the same, so that a hang on
	 * the data plane names the call (tcp_hang_watch). */
	if (!comm->check_calls) {
		tcp_call_begin(&comm->mesh, &call, coll, dtype, (enum ddp_op)op,
			       count, (uint32_t)root << 8 | WK_ALGO_NCCL);
		return DDP_OK;
	}
	memset(&call, 0, sizeof(call));
	call.coll = (uint8_t)coll;
	call.dtype = (uint8_t)dtype;
	call.op = (uint8_t)op;
	call.count = count;
	call.aux = (uint32_t)root << 8 | WK_ALGO_NCCL;
	return tcp_agree(&comm->mesh, &call);
}

static enum ddp_status
check_allreduce(const char *what, const void *sendbuf, const void *recvbuf,
		size_t count, enum ddp_dtype dtype, enum ddp_op op)
{
	if (!wk_dtype_ok(dtype) || !wk_op_ok(op) ||
	    (count && (!sendbuf || !recvbuf)))
		return wk_err(DDP_ERR_INVALID,
			      "%s: bad arguments (type %d, op %d, count %zu, "
			      "buffers %p %p)",
			      what, (int)dtype, (int)op, count, sendbuf,
			      recvbuf);
	return DDP_OK;
}

static enum ddp_status
check_broadcast(const struct ddp_comm *comm, const char *what, const void *buf,
		size_t count, enum ddp_dtype dtype, int root)
{
	/* Any type, bytes included: a broadcast only copies. */
	if (!ddp_dtype_size(dtype) || root < 0 || root >= comm->mesh.size ||
	    (count && !buf))
		return wk_err(DDP_ERR_INVALID,
			      "%s: bad arguments (type %d, root %d of %d, "
			      "count %zu, buffer %p)",
			      what, (int)dtype, root, comm->mesh.size, count,
			      buf);
	return DDP_OK;
}

enum ddp_status
ddp_allreduce(struct ddp_comm *comm, const void *sendbuf, void *recvbuf,
	      size_t count, enum ddp_dtype dtype, enum ddp_op op)
{
	enum ddp_status st = enter(comm, "ddp_allreduce");

	if (st)
		return st;
	st = check_allreduce("ddp_allreduce", sendbuf, recvbuf, count, dtype,
			     op);
	if (!st)
		st = agree(comm, WK_C_ALLREDUCE, dtype, op, count, 0);
	if (!st)
		st = comm->bops->allreduce(comm->bstate, sendbuf, recvbuf,
					   count, dtype, op);
	return leave(comm, st);
}

enum ddp_status
ddp_broadcast(struct ddp_comm *comm, void *buf, size_t count,
	      enum ddp_dtype dtype, int root)
{
	enum ddp_status st = enter(comm, "ddp_broadcast");

	if (st)
		return st;
	st = check_broadcast(comm, "ddp_broadcast", buf, count, dtype, root);
	if (!st)
		st = agree(comm, WK_C_BCAST, dtype, 0, count, root);
	if (!st)
		st = comm->bops->broadcast(comm->bstate, buf, count, dtype,
					   root);
	return leave(comm, st);
}

enum ddp_status
ddp_allreduce_async(struct ddp_comm *comm, const void *sendbuf, void *recvbuf,
		    size_t count, enum ddp_dtype dtype, enum ddp_op op,
		    void *stream)
{
	enum ddp_status st = enter(comm, "ddp_allreduce_async");

	if (st)
		return st;
	st = check_allreduce("ddp_allreduce_async", sendbuf, recvbuf, count,
			     dtype, op);
	if (!st)
		st = agree(comm, WK_C_ALLREDUCE, dtype, op, count, 0);
	if (!st)
		st = comm->bops->allreduce_on(comm->bstate, sendbuf, recvbuf,
					      count, dtype, op, stream);
	return leave(comm, st);
}

enum ddp_status
ddp_broadcast_async(struct ddp_comm *comm, void *buf, size_t count,
		    enum ddp_dtype dtype, int root, void *stream)
{
	enum ddp_status st = enter(comm, "ddp_broadcast_async");

	if (st)
		return st;
	st = check_broadcast(comm, "ddp_broadcast_async", buf, count, dtype,
			     root);
	if (!st)
		st = agree(comm, WK_C_BCAST, dtype, 0, count, root);
	if (!st)
		st = comm->bops->broadcast_on(comm->bstate, buf, count, dtype,
					      root, stream);
	return leave(comm, st);
}

enum ddp_status
ddp_stream_wait(struct ddp_comm *comm, void *stream)
{
	enum ddp_status st = enter(comm, "ddp_stream_wait");

	if (st)
		return st;
	return leave(comm, comm->bops->stream_wait(comm->bstate, stream));
}

enum ddp_status
ddp_barrier(struct ddp_comm *comm)
{
	enum ddp_status st = enter(comm, "ddp_barrier");

	if (st)
		return st;
	return leave(comm, tcp_barrier(&comm->mesh));
}

enum ddp_status
wk_ctl_allreduce(struct ddp_comm *comm, void *buf, size_t count,
		 enum ddp_dtype dtype, enum ddp_op op)
{
	enum ddp_status st = enter(comm, "control allreduce");

	if (st)
		return st;
	return leave(comm,
		     tcp_allreduce(&comm->mesh, buf, buf, count, dtype, op));
}

/* Without a communicator (or before init) buffers are host memory. */
void *
ddp_mem_alloc(struct ddp_comm *comm, size_t bytes)
{
	if (comm && comm->bops)
		return comm->bops->mem_alloc(comm->bstate, bytes);
	return malloc(bytes ? bytes : 1);
}

void
ddp_mem_free(struct ddp_comm *comm, void *ptr)
{
	if (comm && comm->bops)
		comm->bops->mem_free(comm->bstate, ptr);
	else
		free(ptr);
}

enum ddp_status
ddp_mem_copy(struct ddp_comm *comm, void *dst, const void *src, size_t bytes,
	     enum ddp_copy_kind kind)
{
	if ((kind != DDP_COPY_TO_BUFFER && kind != DDP_COPY_TO_HOST &&
	     kind != DDP_COPY_BUFFER) ||
	    (bytes && (!dst || !src)))
		return wk_err(DDP_ERR_INVALID, "ddp_mem_copy: bad arguments");
	if (comm && comm->bops)
		return comm->bops->mem_copy(comm->bstate, dst, src, bytes,
					    kind);
	if (bytes)
		memmove(dst, src, bytes);
	return DDP_OK;
}

enum ddp_status
wk_fence_record(struct ddp_comm *comm, void **fence)
{
	if (!comm->bops->fence_record)
		return DDP_OK;
	return comm->bops->fence_record(comm->bstate, fence);
}

void
wk_fence_free(struct ddp_comm *comm, void *fence)
{
	if (fence && comm->bops->fence_free)
		comm->bops->fence_free(comm->bstate, fence);
}

enum ddp_status
wk_bucket_avg(struct ddp_comm *comm, void *fence, void *flat, size_t count,
	      enum ddp_dtype dtype, const struct wk_piece *pieces, int n)
{
	enum ddp_status st = enter(comm, "gradient bucket");

	if (st)
		return st;
	st = agree(comm, WK_C_ALLREDUCE, dtype, DDP_AVG, count, 0);
	if (!st)
		st = comm->bops->bucket_avg(comm->bstate, fence, flat, count,
					    dtype, pieces, n);
	return leave(comm, st);
}

enum ddp_status
wk_bucket_sync(struct ddp_comm *comm)
{
	enum ddp_status st = enter(comm, "gradient sync");

	if (st)
		return st;
	return leave(comm, comm->bops->bucket_sync(comm->bstate));
}

const char *
ddp_version(void)
{
	return DDP_VERSION;
}
