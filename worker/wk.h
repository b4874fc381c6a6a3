/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internals of libddp shared between its files: the communicator, the wire
 * formats (proto.c), the rendezvous (rdv.c), the TCP engine (tcp.c).
 */
#ifndef DDP_WK_H
#define DDP_WK_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "ddp.h"
#include "proto.h"
#include "reduce.h"
#include "status.h"

/* ---- communicator ---- */

struct wk_peer {
	int fd;
	int port;
	char addr[WK_ADDR_LEN];
	char host[DDP_HOST_MAX];
	int bye;       /* peer said goodbye (ddp_comm_destroy) */
	int early;     /* peer has unread data of a later step: stop peeking */
	int send_mid;  /* a frame to this peer is partly sent */
	int waits_for; /* from its STALL notice this operation, or -1 */
};

/* One gradient's place in a bucket's flat buffer. */
struct wk_piece {
	void *grad;
	size_t offset; /* bytes into the flat buffer */
	size_t bytes;
};

/*
 * A data-plane backend: TCP (built in, wk_tcp_ops, state = the
 * communicator) or NCCL (libddp-nccl.so). comm.c dispatches every call
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
	void (*destroy)(void *st);
};

struct ddp_comm {
	int rank;
	int size;
	int local_rank;
	double timeout_s;
	struct wk_peer *peers;
	uint32_t seq;
	pthread_mutex_t lock;
	int failed;
	enum ddp_status fail_status;
	char fail_msg[WK_ERR_LEN];
	enum ddp_backend backend;
	const struct wk_backend_ops *bops;
	void *bstate;
	void *bdl;
	uint8_t *scratch;
	size_t scratch_len;
	int algo;	  /* 0 auto, 1 recursive doubling, 2 ring */
	size_t ring_min;  /* bytes from which auto picks the ring */
	size_t seg_bytes; /* ring/chain segment */
	char myhost[DDP_HOST_MAX];
	int check_calls; /* agree on every data-plane call (DDP_NCCL_CHECK) */
	int in_grace;	 /* timed out; collecting STALL notices */
	double grace_end;
};

/*
 * In-place allreduce of host memory on the TCP control plane, whatever the
 * data plane: for the library's own bookkeeping (layout checks), which
 * must never hand host memory to NCCL. Takes the communicator's lock.
 */
enum ddp_status wk_ctl_allreduce(struct ddp_comm *comm, void *buf, size_t count,
				 enum ddp_dtype dtype, enum ddp_op op);

/* Puts comm in the failed state with the thread's last error, tells the
 * peers (ABORT frames) and returns st. */
enum ddp_status wk_comm_fail(struct ddp_comm *comm, enum ddp_status st);

/*
 * Whole-bucket reduction for the gradient sync. wk_fence_record is called on
 * the thread that completes a bucket and does not block; wk_bucket_avg takes
 * the communicator's lock like a collective. See struct wk_backend_ops.
 */
enum ddp_status wk_fence_record(struct ddp_comm *comm, void **fence);
void wk_fence_free(struct ddp_comm *comm, void *fence);
enum ddp_status wk_bucket_avg(struct ddp_comm *comm, void *fence, void *flat,
			      size_t count, enum ddp_dtype dtype,
			      const struct wk_piece *pieces, int n);
/* Waits for every bucket wk_bucket_avg queued. */
enum ddp_status wk_bucket_sync(struct ddp_comm *comm);

/* ---- rendezvous (rdv.c) ---- */

/*
 * Fills comm->peers (fds connected, hosts known) within cfg->timeout_s:
 * rank 0 waits for MASTER_PORT while another process holds it, the others
 * connect again while what answers is not rank 0. Refusals are logged
 * (the first few, then a summary per 10 s). With cfg->auth 0, logs one
 * warning and refuses (DDP_ERR_ENV) a non-loopback MASTER_ADDR unless
 * DDP_AUTH_NONE_NETWORK=1. Not thread-safe for one comm.
 */
enum ddp_status rdv_connect_all(struct ddp_comm *comm,
				const struct ddp_config *cfg);

/* ---- TCP engine (tcp.c) ---- */

enum ddp_status tcp_allreduce(struct ddp_comm *comm, const void *s, void *r,
			      size_t count, enum ddp_dtype dtype,
			      enum ddp_op op);
enum ddp_status tcp_broadcast(struct ddp_comm *comm, void *buf, size_t count,
			      enum ddp_dtype dtype, int root);
enum ddp_status tcp_barrier(struct ddp_comm *comm);
/*
 * The control plane's agreement on one call of the data plane: every rank
 * exchanges call's header (coll, dtype, op, count, aux) like a barrier;
 * a rank whose neighbour called something else fails with
 * DDP_ERR_MISMATCH naming both calls, a rank that does not come within
 * the timeout is named. Carries no data.
 */
enum ddp_status tcp_agree(struct ddp_comm *comm, const struct wk_frame *call);
/* Non-blocking look at every connection for deaths and aborts. */
enum ddp_status tcp_check_peers(struct ddp_comm *comm);
/* Best-effort ABORT frame with msg to every peer that can take one. */
void tcp_send_abort(struct ddp_comm *comm, const char *msg);
/* Goodbye to every peer, then close (for ddp_comm_destroy). */
void tcp_close_all(struct ddp_comm *comm);
/* The TCP backend's ops (host memory; state: the communicator). */
extern const struct wk_backend_ops wk_tcp_ops;

/* ---- NCCL backend entry point (nccl.c, in libddp-nccl.so) ---- */

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
};
/* The version suffix changes with struct wk_backend_ops, so a stale
 * libddp-nccl.so is refused instead of misread. */
#define WK_NCCL_ENTRY "ddp_nccl_backend_open_v4"
/* Step 1: can this process use a GPU? DDP_OK or DDP_ERR_NO_GPU/BACKEND. */
#define WK_NCCL_PROBE "ddp_nccl_backend_probe_v4"
typedef enum ddp_status wk_nccl_probe_fn(const struct wk_nccl_host *host,
					 int local_rank);
typedef enum ddp_status wk_nccl_open_fn(const struct wk_nccl_host *host,
					int rank, int size, int local_rank,
					double timeout_s,
					const struct wk_backend_ops **ops,
					void **state);

#endif
