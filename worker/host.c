/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The host backend (host.h): the algorithm chosen per allreduce, the
 * TCP backend's ops and the gradient bucket round trip on host memory.
 */
#include <stdlib.h>
#include <string.h>

#include "ddp_util.h"
#include "host.h"
#include "status.h"

enum ddp_status
wk_host_setup(struct wk_host *h, struct wk_mesh *c)
{
	h->mesh = c;
	h->hier = NULL;
	return c->size > 1 ? wk_hier_setup(c, &h->hier) : DDP_OK;
}

void
wk_host_fini(struct wk_host *h)
{
	wk_hier_free(h->hier);
	h->hier = NULL;
}

int
wk_host_algo(const struct wk_host *h, size_t count, size_t bytes)
{
	const struct wk_mesh *c = h->mesh;

	if (h->hier && count > 0 &&
	    (c->algo == WK_ALGO_HIER ||
	     (c->algo == WK_ALGO_AUTO &&
	      tcp_ring_pays(c, bytes, wk_hier_nodes(h->hier)))))
		return WK_ALGO_HIER;
	return tcp_flat_algo(c, count, bytes, c->algo);
}

enum ddp_status
wk_host_allreduce(struct wk_host *h, const void *s, void *r, size_t count,
		  enum ddp_dtype dtype, enum ddp_op op)
{
	struct wk_mesh *c = h->mesh;
	size_t bytes = count * ddp_dtype_size(dtype);
	struct wk_frame t;
	int algo = c->size > 1 ? wk_host_algo(h, count, bytes) : WK_ALGO_RD;

	if (algo != WK_ALGO_HIER)
		return tcp_allreduce_with(c, s, r, count, dtype, op, algo);
	if (s != r)
		memmove(r, s, bytes);
	tcp_call_begin(c, &t, WK_C_ALLREDUCE, dtype, op, count, WK_ALGO_HIER);
	/* Divides by the world size itself, per stripe. */
	return wk_hier_allreduce(c, h->hier, r, count, dtype, op, &t,
				 ddp_now() + c->timeout_s);
}

/* ---- the ops: host buffers, state = a struct wk_host ---- */

static enum ddp_status
h_allreduce(void *st, const void *s, void *r, size_t count,
	    enum ddp_dtype dtype, enum ddp_op op)
{
	return wk_host_allreduce(st, s, r, count, dtype, op);
}

static enum ddp_status
h_broadcast(void *st, void *buf, size_t count, enum ddp_dtype dtype, int root)
{
	struct wk_host *h = st;

	return tcp_broadcast(h->mesh, buf, count, dtype, root);
}

static enum ddp_status
no_stream(void *stream, const char *what)
{
	if (!stream)
		return DDP_OK;
	return wk_err(DDP_ERR_INVALID,
		      "%s: a CUDA stream was given, but the backend is TCP "
		      "(host buffers, stream NULL)",
		      what);
}

static enum ddp_status
h_allreduce_on(void *st, const void *s, void *r, size_t count,
	       enum ddp_dtype dtype, enum ddp_op op, void *stream)
{
	enum ddp_status rc = no_stream(stream, "ddp_allreduce_async");

	return rc ? rc : wk_host_allreduce(st, s, r, count, dtype, op);
}

static enum ddp_status
h_broadcast_on(void *st, void *buf, size_t count, enum ddp_dtype dtype,
	       int root, void *stream)
{
	enum ddp_status rc = no_stream(stream, "ddp_broadcast_async");

	return rc ? rc : h_broadcast(st, buf, count, dtype, root);
}

static enum ddp_status
h_stream_wait(void *st, void *stream)
{
	(void)st;
	return no_stream(stream, "ddp_stream_wait");
}

static void *
h_alloc(void *st, size_t bytes)
{
	(void)st;
	return malloc(bytes ? bytes : 1);
}

static void
h_free(void *st, void *p)
{
	(void)st;
	free(p);
}

static enum ddp_status
h_copy(void *st, void *dst, const void *src, size_t bytes,
       enum ddp_copy_kind kind)
{
	(void)st;
	(void)kind;
	if (bytes)
		memmove(dst, src, bytes);
	return DDP_OK;
}

/* The bucket round trip on the host: gather, average, scatter. */
static enum ddp_status
h_bucket_avg(void *st, void *fence, void *flat, size_t count,
	     enum ddp_dtype dtype, const struct wk_piece *p, int n)
{
	enum ddp_status rc;
	int k;

	(void)fence;
	for (k = 0; k < n; k++)
		memcpy((uint8_t *)flat + p[k].offset, p[k].grad, p[k].bytes);
	rc = wk_host_allreduce(st, flat, flat, count, dtype, DDP_AVG);
	for (k = 0; k < n && !rc; k++)
		memcpy(p[k].grad, (uint8_t *)flat + p[k].offset, p[k].bytes);
	return rc;
}

static enum ddp_status
h_done(void *st)
{
	(void)st;
	return DDP_OK;
}

static void
h_destroy(void *st)
{
	(void)st;
}

const struct wk_backend_ops wk_host_ops = {
	.agree_first = 0,
	.allreduce = h_allreduce,
	.broadcast = h_broadcast,
	.mem_alloc = h_alloc,
	.mem_free = h_free,
	.mem_copy = h_copy,
	.fence_record = NULL,
	.fence_free = NULL,
	.bucket_avg = h_bucket_avg,
	.bucket_sync = h_done,
	.allreduce_on = h_allreduce_on,
	.broadcast_on = h_broadcast_on,
	.stream_wait = h_stream_wait,
	.abort = NULL,
	.destroy = h_destroy,
};
