/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libddp's communicator (comm.c), the top layer: configuration from the
 * environment, init (rendezvous, then the backend all ranks agree on),
 * the public entry points' checks and dispatch to the backend's ops. The
 * gradient sync (grad.c) sits on it, with its naming of late ranks
 * (straggler.h), and so does ddp_comm_shrink (shrink.c), which builds a
 * communicator of the survivors from a failed one. Uses every layer
 * below:
 *
 *   status.h       last error, log, clock
 *   proto.h        wire formats (pure)       reduce.h  reductions (pure)
 *   cause.h        the rank at fault, to slurmstepd (DDP_FAILURE_FD)
 *   ddp_net.h      sockets (common/)         shm.h     node shared memory
 *   auth.h         munge credentials
 *   backend.h      the data-plane backend contract
 *   tcp.h          the TCP mesh and its collectives
 *   peers.h        the nodes, and the peers the collectives use
 *   rdv.h          the rendezvous that connects the mesh
 *   hier.h         the hierarchical allreduce (shared memory + the mesh)
 *   host.h         the host backend: each allreduce's algorithm
 *   comm.h         this header
 *
 * Every include points down this list; a lower layer that must reach up
 * does so through a function pointer in its own struct (struct
 * wk_nccl_host in backend.h), never by a call.
 *
 * Thread safety: every public entry point and the functions below take
 * the communicator's lock (wk_fence_record and wk_fence_free excepted);
 * a communicator that failed stays failed and every later call returns
 * DDP_ERR_ABORTED with the first failure's explanation.
 */
#ifndef DDP_WK_COMM_H
#define DDP_WK_COMM_H

#include <pthread.h>
#include <stddef.h>

#include "backend.h"
#include "ddp.h"
#include "host.h"
#include "status.h"
#include "tcp.h"

struct ddp_comm {
	struct wk_mesh mesh; /* rank, size, peers: the control plane */
	int local_rank;
	pthread_mutex_t lock;
	int failed;
	enum ddp_status fail_status;
	char fail_msg[DDP_ERR_LEN];
	enum ddp_backend backend;
	const struct wk_backend_ops *bops;
	void *bstate;	     /* the backend's state: &host for TCP */
	struct wk_host host; /* the host backend, over mesh */
	void *bdl;	     /* dlopen handle of libddp-nccl.so, or NULL */
	int check_calls; /* agree on every data-plane call (DDP_NCCL_CHECK) */
	int *gpus;	 /* size entries: each rank's GPU number, or -1 */
};

/*
 * In-place allreduce of host memory on the TCP control plane, whatever the
 * data plane: for the library's own bookkeeping (layout checks), which
 * must never hand host memory to NCCL. Takes the communicator's lock.
 */
enum ddp_status wk_ctl_allreduce(struct ddp_comm *comm, void *buf, size_t count,
				 enum ddp_dtype dtype, enum ddp_op op);

/* Puts comm in the failed state with the thread's last error, tells the
 * peers (ABORT frames) and returns st. Call with the lock held. */
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

#endif
