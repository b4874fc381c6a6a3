/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libddp's data-plane backend contract: the ops table a backend fills (TCP
 * in tcp.c, NCCL in the separately built libddp-nccl.so) and the host
 * services the NCCL object calls back into. Declarations only, no code:
 * both objects include it, so a change here changes WK_NCCL_ENTRY's
 * version suffix. Uses only ddp.h.
 *
 * Thread safety: the communicator calls every op with its lock held
 * (fence_record and fence_free excepted, as documented below), so a
 * backend needs no lock of its own for its state.
 */
#ifndef DDP_WK_BACKEND_H
#define DDP_WK_BACKEND_H

#include <stddef.h>

#include "ddp.h"

/* One gradient's place in a bucket's flat buffer. */
struct wk_piece {
	void *grad;
	size_t offset; /* bytes into the flat buffer */
	size_t bytes;
};

/*
 * A data-plane backend: TCP (built in, wk_tcp_ops, state = the TCP mesh)
 * or NCCL (libddp-nccl.so). comm.c dispatches every call
 * through it; fence_record/fence_free may be NULL (no device work to wait
 * for).
 */
struct wk_backend_ops {
	/* 1: the backend cannot tell two ranks' calls apart, so every call
	 * is agreed on the control plane first (tcp_agree). */
	int agree_first;
	enum ddp_status (*allreduce)(void *st, const void *s, void *r,
				     size_t count, enum ddp_dtype dtype,
				     enum ddp_op op);
	enum ddp_status (*broadcast)(void *st, void *buf, size_t count,
				     enum ddp_dtype dtype, int root);
	void *(*mem_alloc)(void *st, size_t bytes);
	void (*mem_free)(void *st, void *p);
	enum ddp_status (*mem_copy)(void *st, void *dst, const void *src,
				    size_t bytes, enum ddp_copy_kind kind);
	/*
	 * fence_record (caller's thread, never blocks) marks the point in
	 * the device's work after which a bucket's gradients are final;
	 * *fence is created on first use and freed with fence_free.
	 * bucket_avg orders its work after fence (NULL: none), gathers the
	 * pieces into flat, averages flat over the ranks, scatters it back,
	 * all queued on one stream, and returns once it is queued;
	 * bucket_sync waits for every bucket queued so far.
	 */
	enum ddp_status (*fence_record)(void *st, void **fence);
	void (*fence_free)(void *st, void *fence);
	enum ddp_status (*bucket_avg)(void *st, void *fence, void *flat,
				      size_t count, enum ddp_dtype dtype,
				      const struct wk_piece *pieces, int n);
	enum ddp_status (*bucket_sync)(void *st);
	/*
	 * The stream forms: queue the collective on the caller's stream
	 * (ordered after its earlier work there) and return without waiting;
	 * stream_wait waits for that stream with the same deadline and peer
	 * checks as the blocking calls.
	 */
	enum ddp_status (*allreduce_on)(void *st, const void *s, void *r,
					size_t count, enum ddp_dtype dtype,
					enum ddp_op op, void *stream);
	enum ddp_status (*broadcast_on)(void *st, void *buf, size_t count,
					enum ddp_dtype dtype, int root,
					void *stream);
	enum ddp_status (*stream_wait)(void *st, void *stream);
	/* Stops the backend's work at once after the communicator failed
	 * on the control plane (a hang named there, a peer's abort): NCCL
	 * aborts its communicator. NULL: nothing runs outside the mesh. */
	void (*abort)(void *st);
	void (*destroy)(void *st);
};

/* ---- the NCCL object's entry points (nccl.c, libddp-nccl.so) ---- */

/*
 * Host services the NCCL object uses: the TCP control plane. comm is
 * opaque to it (only passed back to these functions).
 */
struct wk_nccl_host {
	struct ddp_comm *comm;
	const char *rank_host; /* this rank's host name, lives as comm does */
	enum ddp_status (*broadcast)(struct ddp_comm *comm, void *buf,
				     size_t bytes, int root);
	enum ddp_status (*err)(enum ddp_status st, const char *fmt, ...)
		__attribute__((format(printf, 2, 3)));
	/* Non-blocking: a peer's death or abort seen on the TCP mesh. */
	enum ddp_status (*check)(struct ddp_comm *comm);
	/*
	 * Non-blocking, for a wait that ends at deadline: check's watch,
	 * plus the hang survey of the control plane (tcp.h), which names
	 * the ranks that have not entered the call (DDP_ERR_TIMEOUT).
	 */
	enum ddp_status (*watch)(struct ddp_comm *comm, double deadline);
};
/* The version suffix changes with struct wk_backend_ops, so a stale
 * libddp-nccl.so is refused instead of misread. */
#define WK_NCCL_ENTRY "ddp_nccl_backend_open_v5"
/* Step 1: can this process use a GPU? DDP_OK or DDP_ERR_NO_GPU/BACKEND. */
#define WK_NCCL_PROBE "ddp_nccl_backend_probe_v5"
typedef enum ddp_status wk_nccl_probe_fn(const struct wk_nccl_host *host,
					 int local_rank);
typedef enum ddp_status wk_nccl_open_fn(const struct wk_nccl_host *host,
					int rank, int size, int local_rank,
					double timeout_s,
					const struct wk_backend_ops **ops,
					void **state);

#endif
