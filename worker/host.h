/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libddp's host backend (host.c): the data plane on host memory. It
 * chooses each allreduce's algorithm and runs it below: a gradient goes
 * strictly downward, grad -> comm -> host -> {tcp | hier -> shm + tcp}.
 * The ops table is the TCP backend of backend.h (state: a struct
 * wk_host).
 *
 * Ownership: the communicator embeds a struct wk_host whose mesh it
 * borrows; wk_host_setup makes the hierarchical allreduce's state, which
 * wk_host_fini frees (before the mesh goes). Errors as the mesh's
 * collectives' (tcp.h). Thread safety: none inside; the communicator's
 * lock serialises every call.
 */
#ifndef DDP_WK_HOST_H
#define DDP_WK_HOST_H

#include "backend.h"
#include "hier.h"
#include "tcp.h"

struct wk_host {
	struct wk_mesh *mesh;
	struct wk_hier *hier; /* NULL: the flat algorithms only */
};

/* Binds h to the connected mesh c and sets up the hierarchical allreduce
 * where it applies (collective: every rank calls it once). */
enum ddp_status wk_host_setup(struct wk_host *h, struct wk_mesh *c);
/* Frees what wk_host_setup made; h may be zeroed. */
void wk_host_fini(struct wk_host *h);

/*
 * The algorithm of an allreduce of count elements, bytes in all, on
 * this mesh (enum wk_algo): DDP_TCP_ALGO when it names one that applies;
 * else the hierarchical allreduce where it is set up and pays across the
 * nodes, else the ring where it pays (tcp_ring_pays), else recursive
 * doubling, whose log2(N) steps keep latency-bound calls fast at any N.
 */
int wk_host_algo(const struct wk_host *h, size_t count, size_t bytes);

/* Allreduce of host buffers (s may equal r); op AVG divides by size. */
enum ddp_status wk_host_allreduce(struct wk_host *h, const void *s, void *r,
				  size_t count, enum ddp_dtype dtype,
				  enum ddp_op op);

/* The TCP backend's ops (host memory; state: a struct wk_host). */
extern const struct wk_backend_ops wk_host_ops;

#endif
