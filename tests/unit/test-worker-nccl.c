/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The NCCL backend: on a machine without a GPU, DDP_BACKEND=nccl fails
 * with "no usable GPU" (never a crash or hang) and auto picks TCP; with a
 * GPU, allreduce, broadcast and the bucketed gradient sync run on device
 * buffers (world size 1: one GPU).
 */
#include <dlfcn.h>
#include <math.h>

#include "tap.h"
#include "test-worker-util.h"

#ifndef HAVE_NCCL_BUILD
#define HAVE_NCCL_BUILD 0
#endif

static int
nccl_rank(int rank, int size, int port, FILE *out, void *arg)
{
	struct ddp_config cfg;
	struct ddp_comm *c = NULL;
	enum ddp_status st;

	(void)arg;
	tw_cfg(&cfg, rank, size, port, 20);
	cfg.backend = DDP_BACKEND_NCCL;
	st = ddp_comm_init(&cfg, &c);
	fprintf(out, "STATUS %d %s\n", (int)st, st ? ddp_last_error() : "");
	ddp_comm_destroy(c);
	return 0;
}

/* Device-buffer tests on one GPU; returns the number of failures. */
static void
gpu_tests(struct ddp_comm *c)
{
	enum { N = 1 << 20 };
	struct ddp_grad_sync *gs = NULL;
	float *h = malloc(N * sizeof(float)), *d = ddp_mem_alloc(c, N * 4);
	float *p = ddp_mem_alloc(c, N * 4), *g = ddp_mem_alloc(c, N * 4);
	size_t i, bad = 0;

	if (!tap_ok(h && d && p && g, "device buffers allocated"))
		goto out;
	for (i = 0; i < N; i++)
		h[i] = (float)(i % 100);
	ddp_mem_copy(c, d, h, N * 4, 0);
	tap_ok(ddp_allreduce(c, d, d, N, DDP_FLOAT32, DDP_SUM) == DDP_OK &&
		       ddp_allreduce(c, d, d, N, DDP_FLOAT32, DDP_AVG) ==
			       DDP_OK &&
		       ddp_broadcast(c, d, N, DDP_FLOAT32, 0) == DDP_OK,
	       "allreduce (sum, avg) and broadcast on device buffers: %s",
	       ddp_last_error());
	ddp_mem_copy(c, h, d, N * 4, 1);
	for (i = 0; i < N; i++)
		bad += h[i] != (float)(i % 100);
	tap_ok(bad == 0, "device results correct (%zu wrong)", bad);
	for (i = 0; i < N; i++)
		h[i] = 0.5f;
	ddp_mem_copy(c, g, h, N * 4, 0);
	tap_ok(ddp_grad_sync_create(c, NULL, &gs) == DDP_OK &&
		       ddp_grad_sync_add(gs, p, g, N / 2, DDP_FLOAT32) == 0 &&
		       ddp_grad_sync_add(gs, p + N / 2, g + N / 2, N / 2,
					 DDP_FLOAT32) == 1 &&
		       ddp_grad_sync_start(gs) == DDP_OK &&
		       ddp_grad_sync_ready(gs, 1) == DDP_OK &&
		       ddp_grad_sync_ready(gs, 0) == DDP_OK &&
		       ddp_grad_sync_wait(gs) == DDP_OK,
	       "bucketed gradient sync on device buffers: %s",
	       ddp_last_error());
	ddp_mem_copy(c, h, g, N * 4, 1);
	for (i = 0, bad = 0; i < N; i++)
		bad += h[i] != 0.5f;
	tap_ok(bad == 0, "device gradients averaged (%zu wrong)", bad);
out:
	ddp_grad_sync_destroy(gs);
	ddp_mem_free(c, d);
	ddp_mem_free(c, p);
	ddp_mem_free(c, g);
	free(h);
}

typedef int memcpy_async_fn(void *dst, const void *src, size_t bytes, int kind,
			    void *stream);
typedef int malloc_host_fn(void **p, size_t bytes);
typedef int free_host_fn(void *p);

/*
 * Gradients still being written on the default stream when they are
 * marked ready: the sync must order its copies after that work, without
 * the program synchronising. The writes are 256 MiB copies from pinned
 * host memory (milliseconds on the copy engine, while the sync's own
 * copies run on the GPU's cores), so a sync that does not wait for them
 * reads stale data. views: the gradient lives in the bucket instead.
 */
static void
fence_test(struct ddp_comm *c, int views)
{
	enum { N = 64 << 20, CUDA_H2D = 1 };
	struct ddp_grad_sync *gs = NULL;
	void *rt = dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
	memcpy_async_fn *memcpy_async = NULL;
	malloc_host_fn *malloc_host = NULL;
	free_host_fn *free_host = NULL;
	float *h = malloc((size_t)N * 4), *p = ddp_mem_alloc(c, (size_t)N * 4);
	float *own = views ? NULL : ddp_mem_alloc(c, (size_t)N * 4);
	float *g = NULL, *src = NULL;
	size_t i, bad = 0;
	int step;

	if (!rt)
		rt = dlopen("libcudart.so.12", RTLD_NOW | RTLD_LOCAL);
	if (rt) {
		*(void **)&memcpy_async = dlsym(rt, "cudaMemcpyAsync");
		*(void **)&malloc_host = dlsym(rt, "cudaMallocHost");
		*(void **)&free_host = dlsym(rt, "cudaFreeHost");
	}
	if (memcpy_async && malloc_host && free_host &&
	    malloc_host((void **)&src, (size_t)N * 4) != 0)
		src = NULL;
	if (!tap_ok(src && h && p && (views || own),
		    "fence test%s: CUDA runtime, 256 MiB of pinned host memory "
		    "and device buffers",
		    views ? " (views)" : ""))
		goto out;
	if (!tap_ok(ddp_grad_sync_create(c, NULL, &gs) == DDP_OK &&
			    ddp_grad_sync_add(gs, p, own, N, DDP_FLOAT32) ==
				    0 &&
			    ddp_grad_sync_start(gs) == DDP_OK &&
			    (g = ddp_grad_sync_grad(gs, 0)) != NULL,
		    "fence test%s: gradient sync started: %s",
		    views ? " (views)" : "", ddp_last_error()))
		goto out;
	for (step = 1; step <= 3; step++) {
		for (i = 0; i < N; i++)
			src[i] = (float)step;
		memset(h, 0, (size_t)N * 4);
		ddp_mem_copy(c, g, h, (size_t)N * 4, 0);
		/* Stream 0: the legacy default stream, as a kernel launch
		 * without a stream would use. */
		if (memcpy_async(g, src, (size_t)N * 4, CUDA_H2D, NULL) != 0 ||
		    ddp_grad_sync_ready(gs, 0) != DDP_OK ||
		    ddp_grad_sync_wait(gs) != DDP_OK) {
			bad = N;
			break;
		}
		ddp_mem_copy(c, h, g, (size_t)N * 4, 1);
		for (i = 0; i < N; i++)
			bad += h[i] != (float)step;
	}
	tap_ok(bad == 0,
	       "gradients%s written on the default stream up to the moment "
	       "they are marked ready are averaged after the write (3 steps, "
	       "%zu wrong): %s",
	       views ? " (views into the bucket)" : "", bad, ddp_last_error());
out:
	ddp_grad_sync_destroy(gs);
	ddp_mem_free(c, p);
	if (own)
		ddp_mem_free(c, own);
	if (src)
		free_host(src);
	free(h);
	if (rt)
		dlclose(rt);
}

int
main(void)
{
	struct ddp_config cfg;
	struct ddp_comm *c = NULL;
	struct tw_rank rk[2];
	enum ddp_status st;
	char reason[1024];
	int i, ok;

	signal(SIGPIPE, SIG_IGN);
	tap_diag("libddp-nccl.so %s", HAVE_NCCL_BUILD ? "built" : "not built");
	tw_cfg(&cfg, 0, 1, 0, 30);
	cfg.backend = DDP_BACKEND_NCCL;
	st = ddp_comm_init(&cfg, &c);
	snprintf(reason, sizeof(reason), "%s", ddp_last_error());
	if (st == DDP_OK) {
		tap_ok(ddp_comm_backend(c) == DDP_BACKEND_NCCL,
		       "DDP_BACKEND=nccl: NCCL backend in use");
		gpu_tests(c);
		fence_test(c, 0);
		fence_test(c, 1);
		ddp_comm_destroy(c);
		return tap_done();
	}
	if (!tap_ok(HAVE_NCCL_BUILD ? st == DDP_ERR_NO_GPU &&
					      strstr(reason, "no usable GPU")
				    : st == DDP_ERR_BACKEND,
		    "DDP_BACKEND=nccl without a GPU fails cleanly: %s", reason))
		tap_diag("status %d", (int)st);

	tw_cfg(&cfg, 0, 1, 0, 30);
	cfg.backend = DDP_BACKEND_AUTO;
	st = ddp_comm_init(&cfg, &c);
	tap_ok(st == DDP_OK && ddp_comm_backend(c) == DDP_BACKEND_TCP,
	       "DDP_BACKEND=auto picks TCP without a GPU");
	ddp_comm_destroy(c);

	/* Two ranks: both fail the same way, neither waits for the other. */
	tw_run_job(2, nccl_rank, NULL, 30, rk);
	ok = 1;
	for (i = 0; i < 2; i++)
		ok &= strstr(rk[i].out, "STATUS 0") == NULL &&
		      tw_exit(&rk[i]) == 0;
	if (!tap_ok(ok, "2 ranks with DDP_BACKEND=nccl and no GPU both fail "
			"cleanly"))
		for (i = 0; i < 2; i++)
			tw_diag_output(i, &rk[i]);
	tw_free_job(2, rk);
	printf("ok %d # SKIP device-buffer allreduce, broadcast and gradient "
	       "sync: no usable GPU on this machine (%s)\n",
	       ++tap_count, reason);
	return tap_done();
}
