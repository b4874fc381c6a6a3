/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The GPU part of the benchmark, for one GPU (world size 1): libddp's NCCL
 * backend against NCCL called directly, and the gradient sync's bucket
 * copies against the device's own copy bandwidth.
 *
 *   allreduce: fp32 sum on device buffers, sizes 8 B to 256 MiB (every
 *     4x): ddp_allreduce, ddp_allreduce_async on the benchmark's stream
 *     + ddp_stream_wait ("libddp stream"), and ncclAllReduce + stream sync on a
 *     communicator of its own. Out of place, because with one rank an
 *     in-place allreduce moves nothing; so this measures each call's
 *     overhead and the one copy NCCL makes. Warm-up, then at least 20
 *     iterations and at least 1 s per size (at most 2000); the result is
 *     checked after the timed loop (with one rank it equals the input).
 *   copy: one cudaMemcpyAsync device to device of 256 MiB, the ceiling.
 *   bucket: one gradient sync step (every gradient marked ready, then the
 *     wait) for P gradients of B bytes each. Each byte is copied twice
 *     (into the bucket and back), so GBps = 2 * P * B / step time, the
 *     figure to hold against the copy ceiling. "views": the gradients
 *     live in the buckets (registered with grad NULL) and nothing is
 *     copied; GBps is then the same formula, for comparison. Gradients
 *     hold known values and are checked after the timed steps.
 *
 * Prints CSV on stdout: test,impl,bytes,iters,median_us,p95_us,GBps,ok
 * (GBps: algbw for allreduce, bytes copied per second for copy/bucket).
 * Environment as for any libddp program (DDP_AUTH=none when no munged
 * runs); the backend is always NCCL. Exit 0 when everything ran and
 * verified, 1 otherwise.
 */
#include <cuda_runtime.h>
#include <ddp.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_ITERS 2000
#define MAX_BYTES ((size_t)256 << 20)

static double
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* One timed call; returns 0 or -1 (message on stderr). */
typedef int timed_fn(void *ctx, size_t bytes);

/* Median and p95 of the timed calls into *med and *p95; returns the
 * number of timed calls, or -1 when one failed. */
static int
time_calls(timed_fn *fn, void *ctx, size_t bytes, double *med, double *p95)
{
	static double t[MAX_ITERS];
	double start, t0;
	int i, n = 0;

	for (i = 0; i < 5; i++)
		if (fn(ctx, bytes))
			return -1;
	start = now_us();
	while (n < MAX_ITERS && (n < 20 || now_us() - start < 1e6)) {
		t0 = now_us();
		if (fn(ctx, bytes))
			return -1;
		t[n++] = now_us() - t0;
	}
	qsort(t, (size_t)n, sizeof(t[0]), cmp_double);
	*med = t[n / 2];
	*p95 = t[(n * 95) / 100 < n ? (n * 95) / 100 : n - 1];
	return n;
}

struct gpu {
	struct ddp_comm *ddp;
	ncclComm_t nccl;
	cudaStream_t stream;
	float *buf;
	float *host;
	float *out; /* allreduce result, copy destination */
};

static int
cuda_ok(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return 1;
	fprintf(stderr, "gpu: %s: %s\n", what, cudaGetErrorString(e));
	return 0;
}

static int
ddp_sum(void *ctx, size_t bytes)
{
	struct gpu *g = ctx;
	enum ddp_status st = ddp_allreduce(g->ddp, g->buf, g->out, bytes / 4,
					   DDP_FLOAT32, DDP_SUM);

	if (st)
		fprintf(stderr, "gpu: ddp_allreduce: %s\n", ddp_last_error());
	return st ? -1 : 0;
}

/* The stream form: queued on the benchmark's stream, then waited for. */
static int
ddp_stream_sum(void *ctx, size_t bytes)
{
	struct gpu *g = ctx;
	enum ddp_status st =
		ddp_allreduce_async(g->ddp, g->buf, g->out, bytes / 4,
				    DDP_FLOAT32, DDP_SUM, g->stream);

	if (!st)
		st = ddp_stream_wait(g->ddp, g->stream);
	if (st)
		fprintf(stderr, "gpu: ddp_allreduce_async: %s\n",
			ddp_last_error());
	return st ? -1 : 0;
}

static int
nccl_sum(void *ctx, size_t bytes)
{
	struct gpu *g = ctx;
	ncclResult_t r = ncclAllReduce(g->buf, g->out, bytes / 4, ncclFloat32,
				       ncclSum, g->nccl, g->stream);

	if (r != ncclSuccess) {
		fprintf(stderr, "gpu: ncclAllReduce: %s\n",
			ncclGetErrorString(r));
		return -1;
	}
	return cuda_ok(cudaStreamSynchronize(g->stream), "stream sync") ? 0
									: -1;
}

static int
raw_copy(void *ctx, size_t bytes)
{
	struct gpu *g = ctx;

	return cuda_ok(cudaMemcpyAsync(g->out, g->buf, bytes,
				       cudaMemcpyDeviceToDevice, g->stream),
		       "cudaMemcpyAsync") &&
			       cuda_ok(cudaStreamSynchronize(g->stream),
				       "stream sync")
		       ? 0
		       : -1;
}

/* Fills the first count floats of dev with i % 251 and returns 1, or
 * checks that they hold that and returns 1 when they do. */
static int
pattern(struct gpu *g, float *dev, size_t count, int check)
{
	size_t i, bad = 0;

	if (!check) {
		for (i = 0; i < count; i++)
			g->host[i] = (float)(i % 251);
		return cuda_ok(cudaMemcpy(dev, g->host, count * 4,
					  cudaMemcpyHostToDevice),
			       "fill");
	}
	if (!cuda_ok(
		    cudaMemcpy(g->host, dev, count * 4, cudaMemcpyDeviceToHost),
		    "read back"))
		return 0;
	for (i = 0; i < count; i++)
		bad += g->host[i] != (float)(i % 251);
	if (bad)
		fprintf(stderr, "gpu: %zu of %zu elements wrong\n", bad, count);
	return bad == 0;
}

static int
row(const char *test, const char *impl, size_t bytes, int n, double med,
    double p95, double moved, int ok)
{
	printf("%s,%s,%zu,%d,%.2f,%.2f,%.3f,%d\n", test, impl, bytes, n, med,
	       p95, moved / (med * 1e3), ok);
	fflush(stdout);
	return ok ? 0 : 1;
}

static int
bench_allreduce(struct gpu *g)
{
	static const struct {
		const char *name;
		timed_fn *fn;
	} impls[] = {{"libddp", ddp_sum},
		     {"libddp stream", ddp_stream_sum},
		     {"nccl", nccl_sum}};
	double med, p95;
	size_t bytes, k;
	int n, ok, bad = 0;

	/* Every 4x from 8 B, then the largest size. */
	for (bytes = 8;;
	     bytes = bytes * 4 < MAX_BYTES ? bytes * 4 : MAX_BYTES) {
		for (k = 0; k < sizeof(impls) / sizeof(impls[0]); k++) {
			if (!pattern(g, g->buf, bytes / 4, 0) ||
			    !cuda_ok(cudaMemset(g->out, 0, bytes), "clear"))
				return 1;
			n = time_calls(impls[k].fn, g, bytes, &med, &p95);
			ok = n > 0 && pattern(g, g->out, bytes / 4, 1);
			bad |= row("allreduce", impls[k].name, bytes, n, med,
				   p95, (double)bytes, ok);
		}
		if (bytes == MAX_BYTES)
			break;
	}
	return bad;
}

struct bucket_case {
	struct gpu *g;
	struct ddp_grad_sync *gs;
	int nparams;
	size_t param_bytes;
	float **param;
	float **grad;
};

static int
sync_step(void *ctx, size_t bytes)
{
	struct bucket_case *b = ctx;
	enum ddp_status st = DDP_OK;
	int i;

	(void)bytes;
	for (i = b->nparams - 1; i >= 0 && !st; i--)
		st = ddp_grad_sync_ready(b->gs, i);
	if (!st)
		st = ddp_grad_sync_wait(b->gs);
	if (st)
		fprintf(stderr, "gpu: gradient sync: %s\n", ddp_last_error());
	return st ? -1 : 0;
}

/* One bucket case: nparams gradients of param_bytes each, the program's
 * own buffers or (views) places in the buckets. */
static int
bench_bucket(struct gpu *g, int nparams, size_t param_bytes, int views)
{
	struct bucket_case b = {g, NULL, nparams, param_bytes, NULL, NULL};
	size_t count = param_bytes / 4, total = (size_t)nparams * param_bytes;
	char impl[64];
	double med = 0, p95 = 0;
	int i, n = -1, ok = 0;

	b.param = calloc((size_t)nparams, sizeof(*b.param));
	b.grad = calloc((size_t)nparams, sizeof(*b.grad));
	if (!b.param || !b.grad ||
	    ddp_grad_sync_create(g->ddp, NULL, &b.gs) != DDP_OK)
		goto out;
	for (i = 0; i < nparams; i++) {
		b.param[i] = ddp_mem_alloc(g->ddp, param_bytes);
		b.grad[i] = views ? NULL : ddp_mem_alloc(g->ddp, param_bytes);
		if (!b.param[i] || (!views && !b.grad[i]) ||
		    ddp_grad_sync_add(b.gs, b.param[i], b.grad[i], count,
				      DDP_FLOAT32) != i)
			goto out;
	}
	if (ddp_grad_sync_start(b.gs) != DDP_OK) {
		fprintf(stderr, "gpu: ddp_grad_sync_start: %s\n",
			ddp_last_error());
		goto out;
	}
	if (!pattern(g, g->buf, count, 0))
		goto out;
	for (i = 0; i < nparams; i++)
		if (!cuda_ok(cudaMemcpy(ddp_grad_sync_grad(b.gs, i), g->buf,
					param_bytes, cudaMemcpyDeviceToDevice),
			     "gradient fill"))
			goto out;
	n = time_calls(sync_step, &b, total, &med, &p95);
	/* An average over one rank leaves every gradient as it was. */
	ok = n > 0;
	for (i = 0; ok && i < nparams; i++)
		ok = pattern(g, ddp_grad_sync_grad(b.gs, i), count, 1);
out:
	if (n < 0 && !ok)
		fprintf(stderr, "gpu: bucket case %d x %zu bytes failed: %s\n",
			nparams, param_bytes, ddp_last_error());
	ddp_grad_sync_destroy(b.gs);
	for (i = 0; i < nparams && b.param; i++) {
		ddp_mem_free(g->ddp, b.param[i]);
		if (b.grad[i])
			ddp_mem_free(g->ddp, b.grad[i]);
	}
	free(b.param);
	free(b.grad);
	if (snprintf(impl, sizeof(impl), "grad sync %dx%zuKiB%s", nparams,
		     param_bytes >> 10,
		     views ? " views" : "") >= (int)sizeof(impl))
		return 1;
	return row("bucket", impl, total, n, med, p95, 2.0 * (double)total, ok);
}

int
main(void)
{
	struct gpu g;
	struct ddp_config cfg;
	double med, p95;
	int dev = 0, n, bad = 0;
	enum ddp_status st;

	memset(&g, 0, sizeof(g));
	st = ddp_config_from_env(&cfg);
	if (st) {
		fprintf(stderr, "gpu: %s\n", ddp_last_error());
		return 1;
	}
	if (cfg.world_size != 1) {
		fprintf(stderr, "gpu: runs as one rank (WORLD_SIZE=1)\n");
		return 1;
	}
	cfg.backend = DDP_BACKEND_NCCL;
	st = ddp_comm_init(&cfg, &g.ddp);
	if (st) {
		fprintf(stderr, "gpu: ddp_comm_init: %s\n", ddp_last_error());
		return 1;
	}
	dev = cfg.local_rank;
	g.host = malloc(MAX_BYTES);
	if (!g.host || !cuda_ok(cudaSetDevice(dev), "cudaSetDevice") ||
	    !cuda_ok(cudaStreamCreate(&g.stream), "cudaStreamCreate") ||
	    !cuda_ok(cudaMalloc((void **)&g.buf, MAX_BYTES), "cudaMalloc") ||
	    !cuda_ok(cudaMalloc((void **)&g.out, MAX_BYTES), "cudaMalloc")) {
		bad = 1;
		goto out;
	}
	if (ncclCommInitAll(&g.nccl, 1, &dev) != ncclSuccess) {
		fprintf(stderr, "gpu: ncclCommInitAll failed\n");
		bad = 1;
		goto out;
	}
	printf("test,impl,bytes,iters,median_us,p95_us,GBps,ok\n");
	bad |= bench_allreduce(&g);
	n = time_calls(raw_copy, &g, MAX_BYTES, &med, &p95);
	bad |= row("copy", "cudaMemcpy D2D", MAX_BYTES, n, med, p95,
		   (double)MAX_BYTES, n > 0);
	bad |= bench_bucket(&g, 256, (size_t)1 << 20, 0);
	bad |= bench_bucket(&g, 4096, (size_t)16 << 10, 0);
	bad |= bench_bucket(&g, 256, (size_t)1 << 20, 1);
	bad |= bench_bucket(&g, 4096, (size_t)16 << 10, 1);
out:
	if (g.nccl)
		ncclCommDestroy(g.nccl);
	cudaFree(g.buf);
	cudaFree(g.out);
	if (g.stream)
		cudaStreamDestroy(g.stream);
	free(g.host);
	ddp_comm_destroy(g.ddp);
	return bad ? 1 : 0;
}
