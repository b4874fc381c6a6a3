/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ddp-check's GPU probes and device tests (gpu.h): whether a rank can use
 * its GPU (driver, libddp's NCCL backend), its device alone, and all the
 * ranks' devices in one allreduce.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include <ddp.h>
#include <ddp_tools.h>

#include "ddp_util.h"
#include "gpu.h"

#define GPU_ITERS 5

static int
gpu_visible(void)
{
	const char *v = getenv("CUDA_VISIBLE_DEVICES");
	const char *b = getenv("DDP_GPU_BUSID");

	return (v && *v && strcmp(v, "NoDevFiles") != 0) ||
	       (b && *b && strcmp(b, "-") != 0);
}

/* The backend is looked for where libddp looks for it (ddp_tools.h), so
 * that what the probe finds is what ddp_comm_init loads. */
enum gpu_state
chk_gpu_probe(void)
{
	char why[256];
	void *h;

	if (!gpu_visible())
		return GPU_NONE;
	h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return GPU_NODRIVER;
	dlclose(h);
	h = ddp_nccl_plugin_open(why, sizeof(why));
	if (!h)
		return GPU_NOBACKEND;
	dlclose(h);
	return GPU_READY;
}

/* This rank's device alone: a one-rank NCCL communicator, memory, a
 * reduction. */
int
chk_gpu_local(const struct ddp_config *base, double timeout_s, char *why,
	      size_t len, double *ms)
{
	struct ddp_config cfg = *base;
	struct ddp_comm *g = NULL;
	const char *msg, *p;
	float h[256];
	void *buf = NULL;
	double t = ddp_now();
	int i, rc = -1;

	cfg.rank = 0;
	cfg.world_size = 1;
	cfg.backend = DDP_BACKEND_NCCL;
	cfg.timeout_s = timeout_s;
	if (ddp_comm_init(&cfg, &g) != DDP_OK) {
		/* "rank 0" there is the one-rank communicator's: drop it. */
		msg = ddp_last_error();
		p = strstr(msg, "DDP_BACKEND=nccl on rank 0 (");
		p = p ? strstr(p, "): ") : NULL;
		ddp_fmt(why, len, "%s", p ? p + 3 : msg);
		goto out;
	}
	for (i = 0; i < 256; i++)
		h[i] = (float)i;
	buf = ddp_mem_alloc(g, sizeof(h));
	if (!buf ||
	    ddp_mem_copy(g, buf, h, sizeof(h), DDP_COPY_TO_BUFFER) != DDP_OK ||
	    ddp_allreduce(g, buf, buf, 256, DDP_FLOAT32, DDP_SUM) != DDP_OK ||
	    ddp_mem_copy(g, h, buf, sizeof(h), DDP_COPY_TO_HOST) != DDP_OK) {
		ddp_fmt(why, len, "%s",
			buf ? ddp_last_error()
			    : "cannot allocate device memory");
		goto out;
	}
	for (i = 0; i < 256; i++) {
		if (h[i] != (float)i) {
			ddp_fmt(why, len,
				"a one-rank allreduce changed element %d: %g, "
				"want %d",
				i, (double)h[i], i);
			goto out;
		}
	}
	*ms = (ddp_now() - t) * 1000;
	rc = 0;
out:
	ddp_mem_free(g, buf);
	ddp_comm_destroy(g);
	return rc;
}

/* All ranks' devices together, on the rendezvous's port again. */
int
chk_gpu_world(const struct ddp_config *base, double timeout_s, int world,
	      char *why, size_t len, double *sec)
{
	struct ddp_config cfg = *base;
	struct ddp_comm *g = NULL;
	void *s = NULL, *r = NULL;
	float *h = NULL, want = (float)world;
	size_t i, bytes = GPU_ELEMS * sizeof(*h);
	double t = 0;
	int it, rc = -1;

	cfg.backend = DDP_BACKEND_NCCL;
	cfg.timeout_s = timeout_s;
	if (ddp_comm_init(&cfg, &g) != DDP_OK) {
		ddp_fmt(why, len, "%s", ddp_last_error());
		goto out;
	}
	h = malloc(bytes);
	s = ddp_mem_alloc(g, bytes);
	r = ddp_mem_alloc(g, bytes);
	if (!h || !s || !r) {
		ddp_fmt(why, len,
			"cannot allocate 2 x %zu MiB of device memory",
			bytes >> 20);
		goto out;
	}
	for (i = 0; i < GPU_ELEMS; i++)
		h[i] = 1;
	/* The first allreduce warms up and is not timed. */
	if (ddp_mem_copy(g, s, h, bytes, DDP_COPY_TO_BUFFER) != DDP_OK ||
	    ddp_allreduce(g, s, r, GPU_ELEMS, DDP_FLOAT32, DDP_SUM) != DDP_OK) {
		ddp_fmt(why, len, "%s", ddp_last_error());
		goto out;
	}
	t = ddp_now();
	for (it = 0; it < GPU_ITERS; it++) {
		if (ddp_allreduce(g, s, r, GPU_ELEMS, DDP_FLOAT32, DDP_SUM) !=
		    DDP_OK) {
			ddp_fmt(why, len, "%s", ddp_last_error());
			goto out;
		}
	}
	*sec = (ddp_now() - t) / GPU_ITERS;
	if (ddp_mem_copy(g, h, r, bytes, DDP_COPY_TO_HOST) != DDP_OK) {
		ddp_fmt(why, len, "%s", ddp_last_error());
		goto out;
	}
	for (i = 0; i < GPU_ELEMS; i++) {
		if (h[i] != want) {
			ddp_fmt(why, len,
				"the device allreduce gave %g at element %zu, "
				"want %g",
				(double)h[i], i, (double)want);
			goto out;
		}
	}
	rc = 0;
out:
	ddp_mem_free(g, s);
	ddp_mem_free(g, r);
	ddp_comm_destroy(g);
	free(h);
	return rc;
}

const char *
chk_gpu_skip_reason(const int *count)
{
	if (count[GPU_NOBACKEND])
		return "libddp's NCCL backend (libddp-nccl.so) is not "
		       "installed";
	if (count[GPU_NODRIVER])
		return "no CUDA driver (libcuda.so.1) on the step's nodes";
	return "no rank has a GPU (CUDA_VISIBLE_DEVICES and DDP_GPU_BUSID "
	       "unset)";
}

const char *
chk_gpu_state_why(int st)
{
	switch (st) {
	case GPU_NONE:
		return "no GPU visible (CUDA_VISIBLE_DEVICES unset) while "
		       "other ranks have one";
	case GPU_NODRIVER:
		return "the CUDA driver (libcuda.so.1) does not load";
	default:
		return "libddp's NCCL backend (libddp-nccl.so) does not load";
	}
}

void
chk_gpu_summary(char *line, size_t len, int world, int ok, double ms,
		double sec)
{
	double busbw = world > 1 && sec > 0 ? 2.0 * (world - 1) / world *
						      GPU_ELEMS * 4 / sec / 1e9
					    : 0;

	if (!ok)
		ddp_fmt(line, len, "gpu: the device allreduce failed");
	else if (world > 1)
		ddp_fmt(line, len,
			"gpu: %d ranks' devices initialised (slowest %.0f "
			"ms); allreduce %u MiB: %.2f ms, busbw %.3g GB/s",
			world, ms, (unsigned)(GPU_ELEMS * 4 >> 20), sec * 1000,
			busbw);
	else
		ddp_fmt(line, len,
			"gpu: the device initialised (%.0f ms); allreduce %u "
			"MiB: %.2f ms",
			ms, (unsigned)(GPU_ELEMS * 4 >> 20), sec * 1000);
}
