/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The NCCL backend (libddp-nccl.so, loaded by libddp at run time). It opens
 * the CUDA runtime and NCCL with dlopen too, so it loads on any node and
 * reports "no usable GPU" instead of failing to link.
 */
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "ddp_util.h"

#define EXPORT __attribute__((visibility("default")))

/* libddp's types and ops go to NCCL as they are, cast (n_allreduce,
 * n_broadcast, n_bucket_avg): ddp.h promises the values are NCCL's. */
_Static_assert(DDP_UINT8 == (int)ncclUint8, "DDP_UINT8 is ncclUint8");
_Static_assert(DDP_FLOAT16 == (int)ncclFloat16, "DDP_FLOAT16 is ncclFloat16");
_Static_assert(DDP_FLOAT32 == (int)ncclFloat32, "DDP_FLOAT32 is ncclFloat32");
_Static_assert(DDP_FLOAT64 == (int)ncclFloat64, "DDP_FLOAT64 is ncclFloat64");
_Static_assert(DDP_BFLOAT16 == (int)ncclBfloat16,
	       "DDP_BFLOAT16 is ncclBfloat16");
_Static_assert(DDP_SUM == (int)ncclSum, "DDP_SUM is ncclSum");
_Static_assert(DDP_MAX == (int)ncclMax, "DDP_MAX is ncclMax");
_Static_assert(DDP_MIN == (int)ncclMin, "DDP_MIN is ncclMin");
_Static_assert(DDP_AVG == (int)ncclAvg, "DDP_AVG is ncclAvg");

struct cuda_fns {
	cudaError_t (*GetDeviceCount)(int *);
	cudaError_t (*SetDevice)(int);
	cudaError_t (*StreamCreateWithFlags)(cudaStream_t *, unsigned);
	cudaError_t (*StreamDestroy)(cudaStream_t);
	cudaError_t (*StreamQuery)(cudaStream_t);
	cudaError_t (*DeviceSynchronize)(void);
	cudaError_t (*Malloc)(void **, size_t);
	cudaError_t (*Free)(void *);
	cudaError_t (*MemcpyAsync)(void *, const void *, size_t,
				   enum cudaMemcpyKind, cudaStream_t);
	cudaError_t (*RuntimeGetVersion)(int *);
	cudaError_t (*EventCreateWithFlags)(cudaEvent_t *, unsigned);
	cudaError_t (*EventRecord)(cudaEvent_t, cudaStream_t);
	cudaError_t (*EventDestroy)(cudaEvent_t);
	cudaError_t (*StreamWaitEvent)(cudaStream_t, cudaEvent_t, unsigned);
	const char *(*GetErrorString)(cudaError_t);
	/* Optional: CUDA 13's signature (12.8 and 12.9 differ), else NULL. */
	cudaError_t (*MemcpyBatchAsync)(void *const *, const void *const *,
					const size_t *, size_t,
					struct cudaMemcpyAttributes *, size_t *,
					size_t, cudaStream_t);
};

struct nccl_fns {
	ncclResult_t (*GetVersion)(int *);
	ncclResult_t (*GetUniqueId)(ncclUniqueId *);
	ncclResult_t (*CommInitRankConfig)(ncclComm_t *, int, ncclUniqueId, int,
					   ncclConfig_t *);
	ncclResult_t (*AllReduce)(const void *, void *, size_t, ncclDataType_t,
				  ncclRedOp_t, ncclComm_t, cudaStream_t);
	ncclResult_t (*Broadcast)(const void *, void *, size_t, ncclDataType_t,
				  int, ncclComm_t, cudaStream_t);
	ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t *);
	ncclResult_t (*CommAbort)(ncclComm_t);
	ncclResult_t (*CommDestroy)(ncclComm_t);
	const char *(*GetErrorString)(ncclResult_t);
};

static struct cuda_fns cu;
static struct nccl_fns nc;
static void *cu_dl;
static void *nc_dl;

struct nstate {
	struct wk_nccl_host host;
	int rank;
	int size;
	int device;   /* current device is per thread: set on every entry */
	int no_batch; /* batched copies were refused once: do not retry */
	double timeout_s;
	ncclComm_t comm;
	cudaStream_t stream;
	int failed;
	char hostname[DDP_HOST_MAX];
};

#define SYM(dl, tab, prefix, name)                                 \
	do {                                                       \
		*(void **)&(tab).name = dlsym((dl), prefix #name); \
		if (!(tab).name) {                                 \
			missing = prefix #name;                    \
			goto out;                                  \
		}                                                  \
	} while (0)

static enum ddp_status
load_cuda(const struct wk_nccl_host *h)
{
	static const char *const names[] = {
		"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0",
		"libcudart.so"};
	const char *env = getenv("DDP_CUDART_PATH"), *missing = NULL;
	int version = 0;
	size_t i;

	if (cu.GetDeviceCount)
		return DDP_OK;
	if (env && *env)
		cu_dl = dlopen(env, RTLD_NOW | RTLD_LOCAL);
	for (i = 0; !cu_dl && i < sizeof(names) / sizeof(names[0]); i++)
		cu_dl = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	if (!cu_dl)
		return h->err(DDP_ERR_NO_GPU,
			      "no usable GPU: the CUDA runtime (libcudart.so."
			      "13/12/11) cannot be loaded: %s; set "
			      "DDP_CUDART_PATH, or use DDP_BACKEND=tcp",
			      dlerror());
	SYM(cu_dl, cu, "cuda", GetDeviceCount);
	SYM(cu_dl, cu, "cuda", SetDevice);
	SYM(cu_dl, cu, "cuda", StreamCreateWithFlags);
	SYM(cu_dl, cu, "cuda", StreamDestroy);
	SYM(cu_dl, cu, "cuda", StreamQuery);
	SYM(cu_dl, cu, "cuda", DeviceSynchronize);
	SYM(cu_dl, cu, "cuda", Malloc);
	SYM(cu_dl, cu, "cuda", Free);
	SYM(cu_dl, cu, "cuda", MemcpyAsync);
	SYM(cu_dl, cu, "cuda", EventCreateWithFlags);
	SYM(cu_dl, cu, "cuda", EventRecord);
	SYM(cu_dl, cu, "cuda", EventDestroy);
	SYM(cu_dl, cu, "cuda", StreamWaitEvent);
	SYM(cu_dl, cu, "cuda", RuntimeGetVersion);
	if (cu.RuntimeGetVersion(&version) == cudaSuccess && version >= 13000)
		*(void **)&cu.MemcpyBatchAsync =
			dlsym(cu_dl, "cudaMemcpyBatchAsync");
	SYM(cu_dl, cu, "cuda", GetErrorString);
out:
	if (missing) {
		memset(&cu, 0, sizeof(cu));
		return h->err(DDP_ERR_BACKEND,
			      "the CUDA runtime lacks %s (too old?)", missing);
	}
	return DDP_OK;
}

static enum ddp_status
load_nccl(const struct wk_nccl_host *h)
{
	const char *env = getenv("DDP_NCCL_PATH"), *missing = NULL;
	int version = 0;

	if (nc.GetVersion)
		return DDP_OK;
	nc_dl = dlopen(env && *env ? env : "libnccl.so.2",
		       RTLD_NOW | RTLD_LOCAL);
	if (!nc_dl)
		return h->err(DDP_ERR_BACKEND,
			      "NCCL (libnccl.so.2) cannot be loaded: %s; set "
			      "DDP_NCCL_PATH, or use DDP_BACKEND=tcp",
			      dlerror());
	SYM(nc_dl, nc, "nccl", GetVersion);
	SYM(nc_dl, nc, "nccl", GetUniqueId);
	SYM(nc_dl, nc, "nccl", CommInitRankConfig);
	SYM(nc_dl, nc, "nccl", AllReduce);
	SYM(nc_dl, nc, "nccl", Broadcast);
	SYM(nc_dl, nc, "nccl", CommGetAsyncError);
	SYM(nc_dl, nc, "nccl", CommAbort);
	SYM(nc_dl, nc, "nccl", CommDestroy);
	SYM(nc_dl, nc, "nccl", GetErrorString);
out:
	if (missing) {
		memset(&nc, 0, sizeof(nc));
		return h->err(DDP_ERR_BACKEND,
			      "NCCL lacks %s (older than 2.18?)", missing);
	}
	/* The config struct and error semantics used here need 2.18. */
	if (nc.GetVersion(&version) != ncclSuccess || version < 21800) {
		memset(&nc, 0, sizeof(nc));
		return h->err(DDP_ERR_BACKEND,
			      "NCCL version %d is older than 2.18", version);
	}
	return DDP_OK;
}

EXPORT enum ddp_status ddp_nccl_backend_probe_v5(const struct wk_nccl_host *h,
						 int local_rank);

EXPORT enum ddp_status
ddp_nccl_backend_probe_v5(const struct wk_nccl_host *h, int local_rank)
{
	const char *vis = getenv("CUDA_VISIBLE_DEVICES");
	enum ddp_status st;
	cudaError_t e;
	int n = 0;

	st = load_cuda(h);
	if (st)
		return st;
	e = cu.GetDeviceCount(&n);
	if (e != cudaSuccess)
		return h->err(DDP_ERR_NO_GPU,
			      "no usable GPU: cudaGetDeviceCount failed: %s "
			      "(no NVIDIA driver or device on this node)",
			      cu.GetErrorString(e));
	if (n == 0 || local_rank >= n)
		return h->err(DDP_ERR_NO_GPU,
			      "no usable GPU: LOCAL_RANK %d, but %d GPUs are "
			      "visible (CUDA_VISIBLE_DEVICES=%s)",
			      local_rank, n, vis ? vis : "(unset)");
	return load_nccl(h);
}

/*
 * NCCL only says that a connection failed. The control plane knows which
 * rank died (its connections close at once): look there for up to
 * PEER_WAIT_S so the error names the rank and host.
 */
#define PEER_WAIT_S 2.0
static enum ddp_status
peer_error(struct nstate *s, const char *what, ncclResult_t ae, double deadline)
{
	double until = ddp_now() + PEER_WAIT_S;
	enum ddp_status st;

	if (until > deadline)
		until = deadline;
	do {
		st = s->host.check(s->host.comm);
		if (st)
			return st;
		usleep(1000);
	} while (ddp_now() < until);
	return s->host.err(DDP_ERR_PEER,
			   "%s on rank %d (%s): NCCL error: %s; no rank "
			   "left the control connections, so the network "
			   "between the ranks may have failed",
			   what, s->rank, s->hostname, nc.GetErrorString(ae));
}

/*
 * Waits for stream while polling NCCL's async error, the deadline and the
 * TCP control plane (which learns of dead peers first). On any failure
 * the NCCL communicator is aborted, so nothing hangs. Small collectives
 * end within microseconds, so the first WAIT_SPIN_S are polled without
 * sleeping; after that a sleep between polls leaves the core to the
 * training program.
 */
#define WAIT_SPIN_S 200e-6
static enum ddp_status
wait_stream(struct nstate *s, cudaStream_t stream, const char *what)
{
	double start = ddp_now(), deadline = start + s->timeout_s;
	ncclResult_t ae = ncclSuccess;
	enum ddp_status st;
	cudaError_t e;
	double now;

	for (;;) {
		e = cu.StreamQuery(stream);
		if (e == cudaSuccess)
			return DDP_OK;
		if (e != cudaErrorNotReady) {
			st = s->host.err(DDP_ERR_BACKEND,
					 "%s on rank %d (%s): CUDA error: %s",
					 what, s->rank, s->hostname,
					 cu.GetErrorString(e));
			goto fail;
		}
		if (nc.CommGetAsyncError(s->comm, &ae) != ncclSuccess ||
		    (ae != ncclSuccess && ae != ncclInProgress)) {
			st = peer_error(s, what, ae, deadline);
			goto fail;
		}
		/* Also names a rank that never entered the call (a hang). */
		st = s->host.watch(s->host.comm, deadline);
		if (st)
			goto fail;
		now = ddp_now();
		/* Past the deadline the hang survey concludes at once:
		 * a hang named is the better error. */
		if (now >= deadline) {
			st = s->host.watch(s->host.comm, deadline);
			if (!st)
				st = s->host.err(
					DDP_ERR_TIMEOUT,
					"%s on rank %d (%s) timed out "
					"after %g s; NCCL communicator "
					"aborted",
					what, s->rank, s->hostname,
					s->timeout_s);
			goto fail;
		}
		if (now - start > WAIT_SPIN_S)
			usleep(50);
	}
fail:
	s->failed = 1;
	nc.CommAbort(s->comm);
	s->comm = NULL;
	return st;
}

/*
 * A non-blocking communicator may answer ncclInProgress while it still
 * enqueues; nothing else may be queued on it until that settles.
 */
static enum ddp_status
enqueued(struct nstate *s, ncclResult_t r, const char *what)
{
	double deadline = ddp_now() + s->timeout_s;

	while (r == ncclInProgress && ddp_now() < deadline)
		if (nc.CommGetAsyncError(s->comm, &r) != ncclSuccess)
			r = ncclInternalError;
	if (r == ncclSuccess)
		return DDP_OK;
	s->failed = 1;
	nc.CommAbort(s->comm);
	s->comm = NULL;
	if (r == ncclInProgress)
		return s->host.err(DDP_ERR_TIMEOUT,
				   "%s on rank %d (%s): not enqueued after %g "
				   "s; NCCL communicator aborted",
				   what, s->rank, s->hostname, s->timeout_s);
	return s->host.err(DDP_ERR_BACKEND, "%s on rank %d (%s): %s", what,
			   s->rank, s->hostname, nc.GetErrorString(r));
}

static enum ddp_status
launched(struct nstate *s, ncclResult_t r, const char *what)
{
	enum ddp_status st = enqueued(s, r, what);

	return st ? st : wait_stream(s, s->stream, what);
}

/*
 * Start of every entry point: the communicator must be alive, and the
 * current CUDA device is per thread (libddp is called from the gradient
 * sync's thread and the program's threads alike).
 */
static enum ddp_status
enter(struct nstate *s, const char *what)
{
	cudaError_t e;

	if (s->failed || !s->comm)
		return s->host.err(DDP_ERR_ABORTED,
				   "%s on rank %d (%s): NCCL communicator "
				   "aborted earlier",
				   what, s->rank, s->hostname);
	e = cu.SetDevice(s->device);
	if (e != cudaSuccess)
		return s->host.err(DDP_ERR_BACKEND,
				   "%s on rank %d (%s): cudaSetDevice(%d): %s",
				   what, s->rank, s->hostname, s->device,
				   cu.GetErrorString(e));
	return DDP_OK;
}

static enum ddp_status
n_allreduce(void *stp, const void *sb, void *rb, size_t count,
	    enum ddp_dtype dtype, enum ddp_op op)
{
	struct nstate *s = stp;
	enum ddp_status st = enter(s, "ncclAllReduce");

	if (st)
		return st;
	/* Order after the caller's earlier GPU work on any stream. */
	cu.DeviceSynchronize();
	return launched(s,
			nc.AllReduce(sb, rb, count, (ncclDataType_t)dtype,
				     (ncclRedOp_t)op, s->comm, s->stream),
			"ncclAllReduce");
}

static enum ddp_status
n_broadcast(void *stp, void *buf, size_t count, enum ddp_dtype dtype, int root)
{
	struct nstate *s = stp;
	enum ddp_status st = enter(s, "ncclBroadcast");

	if (st)
		return st;
	cu.DeviceSynchronize();
	return launched(s,
			nc.Broadcast(buf, buf, count, (ncclDataType_t)dtype,
				     root, s->comm, s->stream),
			"ncclBroadcast");
}

/*
 * Recorded on the legacy default stream, the fence follows all work issued
 * before it on every blocking stream (any stream not created with
 * cudaStreamNonBlocking), on any thread: what produced the gradients.
 */
static enum ddp_status
n_fence_record(void *stp, void **fence)
{
	struct nstate *s = stp;
	enum ddp_status st = enter(s, "gradient fence");
	cudaEvent_t ev = *fence;
	cudaError_t e = cudaSuccess;

	if (st)
		return st;
	if (!ev) {
		e = cu.EventCreateWithFlags(&ev, cudaEventDisableTiming);
		if (e == cudaSuccess)
			*fence = ev;
	}
	if (e == cudaSuccess)
		e = cu.EventRecord(ev, cudaStreamLegacy);
	if (e != cudaSuccess)
		return s->host.err(DDP_ERR_BACKEND, "gradient fence: %s",
				   cu.GetErrorString(e));
	return DDP_OK;
}

static void
n_fence_free(void *stp, void *fence)
{
	(void)stp;
	cu.EventDestroy(fence);
}

/*
 * Queues the copies of n pieces between the gradients and flat (to_flat:
 * into flat) on the stream. A gradient copy is a few microseconds of
 * launch cost for little data, so where the runtime has batched copies
 * one call queues them all; otherwise, or if the batch is refused, one
 * call per piece.
 */
static cudaError_t
copy_pieces(struct nstate *s, uint8_t *flat, const struct wk_piece *p, int n,
	    int to_flat)
{
	struct cudaMemcpyAttributes attr = {
		.srcAccessOrder = cudaMemcpySrcAccessOrderStream};
	cudaError_t e = cudaErrorNotSupported;
	size_t first = 0, *len;
	void **dst, **src;
	int k;

	if (cu.MemcpyBatchAsync && !s->no_batch && n > 1) {
		dst = malloc((size_t)n * (2 * sizeof(void *) + sizeof(size_t)));
		if (dst) {
			src = dst + n;
			len = (size_t *)(src + n);
			for (k = 0; k < n; k++) {
				dst[k] = to_flat ? flat + p[k].offset
						 : p[k].grad;
				src[k] = to_flat ? p[k].grad
						 : flat + p[k].offset;
				len[k] = p[k].bytes;
			}
			e = cu.MemcpyBatchAsync(dst, (const void *const *)src,
						len, (size_t)n, &attr, &first,
						1, s->stream);
			free(dst);
		}
		if (e == cudaSuccess)
			return e;
		s->no_batch = 1;
	}
	for (k = 0, e = cudaSuccess; k < n && e == cudaSuccess; k++)
		e = cu.MemcpyAsync(to_flat ? flat + p[k].offset : p[k].grad,
				   to_flat ? p[k].grad : flat + p[k].offset,
				   p[k].bytes, cudaMemcpyDeviceToDevice,
				   s->stream);
	return e;
}

/*
 * The bucket's whole round trip is queued on the stream and not waited
 * for: the next bucket queues right behind it, so NCCL's proxy works
 * through them back to back (a host wait between buckets cost each one
 * NCCL's full small-message latency). n_bucket_sync waits for them all.
 */
static enum ddp_status
n_bucket_avg(void *stp, void *fence, void *flat, size_t count,
	     enum ddp_dtype dtype, const struct wk_piece *p, int n)
{
	struct nstate *s = stp;
	enum ddp_status st = enter(s, "gradient bucket");
	cudaError_t e = cudaSuccess;

	if (st)
		return st;
	if (fence)
		e = cu.StreamWaitEvent(s->stream, fence, 0);
	if (e == cudaSuccess)
		e = copy_pieces(s, flat, p, n, 1);
	if (e != cudaSuccess)
		return s->host.err(DDP_ERR_BACKEND,
				   "gradient bucket: copy in: %s",
				   cu.GetErrorString(e));
	st = enqueued(s,
		      nc.AllReduce(flat, flat, count, (ncclDataType_t)dtype,
				   (ncclRedOp_t)DDP_AVG, s->comm, s->stream),
		      "ncclAllReduce (gradient bucket)");
	if (st)
		return st;
	e = copy_pieces(s, flat, p, n, 0);
	if (e != cudaSuccess)
		return s->host.err(DDP_ERR_BACKEND,
				   "gradient bucket: copy out: %s",
				   cu.GetErrorString(e));
	return DDP_OK;
}

static enum ddp_status
n_bucket_sync(void *stp)
{
	struct nstate *s = stp;
	enum ddp_status st = enter(s, "gradient sync");

	return st ? st : wait_stream(s, s->stream, "gradient sync");
}

/*
 * The stream forms: queued on the caller's stream, in the order of its
 * work there, with no device-wide synchronisation and no wait.
 */
static enum ddp_status
n_allreduce_on(void *stp, const void *sb, void *rb, size_t count,
	       enum ddp_dtype dtype, enum ddp_op op, void *stream)
{
	struct nstate *s = stp;
	enum ddp_status st = enter(s, "ncclAllReduce");

	if (st)
		return st;
	return enqueued(s,
			nc.AllReduce(sb, rb, count, (ncclDataType_t)dtype,
				     (ncclRedOp_t)op, s->comm, stream),
			"ncclAllReduce");
}

static enum ddp_status
n_broadcast_on(void *stp, void *buf, size_t count, enum ddp_dtype dtype,
	       int root, void *stream)
{
	struct nstate *s = stp;
	enum ddp_status st = enter(s, "ncclBroadcast");

	if (st)
		return st;
	return enqueued(s,
			nc.Broadcast(buf, buf, count, (ncclDataType_t)dtype,
				     root, s->comm, stream),
			"ncclBroadcast");
}

static enum ddp_status
n_stream_wait(void *stp, void *stream)
{
	struct nstate *s = stp;
	enum ddp_status st = enter(s, "stream wait");

	return st ? st : wait_stream(s, stream, "stream wait");
}

static void *
n_alloc(void *stp, size_t bytes)
{
	struct nstate *s = stp;
	void *p = NULL;

	if (cu.SetDevice(s->device) != cudaSuccess ||
	    cu.Malloc(&p, bytes ? bytes : 1) != cudaSuccess)
		return NULL;
	return p;
}

static void
n_free(void *stp, void *p)
{
	(void)stp;
	if (p)
		cu.Free(p);
}

static enum ddp_status
n_copy(void *stp, void *dst, const void *src, size_t bytes,
       enum ddp_copy_kind kind)
{
	struct nstate *s = stp;
	enum ddp_status st = enter(s, "cudaMemcpyAsync");
	cudaError_t e;

	if (st)
		return st;
	(void)kind; /* unified addressing: cudaMemcpyDefault infers it */
	e = cu.MemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s->stream);
	if (e != cudaSuccess)
		return s->host.err(DDP_ERR_BACKEND, "cudaMemcpyAsync: %s",
				   cu.GetErrorString(e));
	return wait_stream(s, s->stream, "cudaMemcpyAsync");
}

/* The control plane failed the communicator: stop NCCL's work too. */
static void
n_abort(void *stp)
{
	struct nstate *s = stp;

	if (s->comm)
		nc.CommAbort(s->comm);
	s->comm = NULL;
	s->failed = 1;
}

static void
n_destroy(void *stp)
{
	struct nstate *s = stp;

	if (!s)
		return;
	if (s->comm)
		nc.CommDestroy(s->comm);
	if (s->stream)
		cu.StreamDestroy(s->stream);
	free(s);
}

static const struct wk_backend_ops nccl_ops = {
	.agree_first = 1,
	.allreduce = n_allreduce,
	.broadcast = n_broadcast,
	.mem_alloc = n_alloc,
	.mem_free = n_free,
	.mem_copy = n_copy,
	.fence_record = n_fence_record,
	.fence_free = n_fence_free,
	.bucket_avg = n_bucket_avg,
	.bucket_sync = n_bucket_sync,
	.allreduce_on = n_allreduce_on,
	.broadcast_on = n_broadcast_on,
	.stream_wait = n_stream_wait,
	.abort = n_abort,
	.destroy = n_destroy,
};

EXPORT enum ddp_status
ddp_nccl_backend_open_v5(const struct wk_nccl_host *h, int rank, int size,
			 int local_rank, double timeout_s,
			 const struct wk_backend_ops **ops, void **state);

/* A non-blocking communicator's init, to its end or the timeout. */
static enum ddp_status
wait_init(struct nstate *s, double timeout_s)
{
	double deadline = ddp_now() + timeout_s;
	ncclResult_t ae = ncclInProgress;

	while (ae == ncclInProgress) {
		if (nc.CommGetAsyncError(s->comm, &ae) != ncclSuccess)
			ae = ncclInternalError;
		if (ae == ncclInProgress && ddp_now() >= deadline)
			return s->host.err(DDP_ERR_TIMEOUT,
					   "NCCL init timed out after %g s",
					   timeout_s);
		if (ae == ncclInProgress)
			usleep(1000);
	}
	if (ae != ncclSuccess)
		return s->host.err(DDP_ERR_BACKEND, "NCCL init failed: %s",
				   nc.GetErrorString(ae));
	return DDP_OK;
}

EXPORT enum ddp_status
ddp_nccl_backend_open_v5(const struct wk_nccl_host *h, int rank, int size,
			 int local_rank, double timeout_s,
			 const struct wk_backend_ops **ops, void **state)
{
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	struct nstate *s = NULL;
	/* Byte 0: rank 0 got an id; then the id itself. */
	uint8_t idmsg[1 + sizeof(ncclUniqueId) + 1];
	const char *v;
	ncclUniqueId id;
	enum ddp_status st;
	cudaError_t e;
	ncclResult_t r;

	s = calloc(1, sizeof(*s));
	if (!s)
		return h->err(DDP_ERR_NOMEM, "NCCL backend: out of memory");
	s->host = *h;
	/* For messages; the control plane knows this rank's host name. */
	(void)snprintf(s->hostname, sizeof(s->hostname), "%s", h->rank_host);
	s->rank = rank;
	s->size = size;
	s->device = local_rank;
	s->timeout_s = timeout_s;
	memset(idmsg, 0, sizeof(idmsg));
	e = cu.SetDevice(local_rank);
	if (e == cudaSuccess)
		e = cu.StreamCreateWithFlags(&s->stream, cudaStreamNonBlocking);
	if (rank == 0)
		idmsg[0] = e == cudaSuccess &&
			   nc.GetUniqueId((ncclUniqueId *)(idmsg + 1)) ==
				   ncclSuccess;
	/* Everyone takes part in the broadcast even after a local error,
	 * so no rank waits for a message that never comes. */
	st = h->broadcast(h->comm, idmsg, sizeof(idmsg), 0);
	if (st)
		goto fail;
	if (e != cudaSuccess) {
		st = h->err(DDP_ERR_NO_GPU, "cannot use GPU %d: %s", local_rank,
			    cu.GetErrorString(e));
		goto fail;
	}
	if (!idmsg[0]) {
		st = h->err(DDP_ERR_BACKEND,
			    "rank 0 could not create an NCCL unique id");
		goto fail;
	}
	memcpy(&id, idmsg + 1, sizeof(id));
	/*
	 * A blocking communicator by default: with ranks that share hosts,
	 * a non-blocking one made every step a third slower (4 ranks over
	 * NCCL's socket transport: 47 against 61 ms per step of
	 * examples/train). DDP_NCCL_NONBLOCKING=1 bounds NCCL's init by
	 * DDP_TIMEOUT as well; collectives are bounded either way.
	 */
	v = getenv("DDP_NCCL_NONBLOCKING");
	cfg.blocking = !(v && strcmp(v, "1") == 0);
	r = nc.CommInitRankConfig(&s->comm, size, id, rank, &cfg);
	if (r != ncclSuccess && r != ncclInProgress) {
		st = h->err(DDP_ERR_BACKEND, "ncclCommInitRankConfig: %s",
			    nc.GetErrorString(r));
		goto fail;
	}
	st = wait_init(s, timeout_s);
	if (st)
		goto fail;
	*ops = &nccl_ops;
	*state = s;
	return DDP_OK;
fail:
	if (s->comm)
		nc.CommAbort(s->comm);
	s->comm = NULL;
	n_destroy(s);
	return st;
}
