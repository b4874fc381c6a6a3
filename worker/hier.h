/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libddp's hierarchical allreduce (hier.c), for several ranks per node:
 * within a node through shared memory (shm.h), across nodes over the TCP
 * mesh (tcp.h) between one rank per node and stripe. The host backend
 * (host.c) sets it up after the rendezvous and chooses it per call.
 *
 * Thread safety: none inside; the communicator's lock serialises every
 * call on one mesh, as for the mesh itself.
 */
#ifndef DDP_WK_HIER_H
#define DDP_WK_HIER_H

#include "ddp.h"
#include "tcp.h"

struct wk_hier;

/*
 * Builds the per-node shared memory when the host map (peers[].host) has
 * several ranks on a node and several nodes, or the mesh's algo is
 * WK_ALGO_HIER (DDP_TCP_ALGO=hier); every rank must call it once after
 * the rendezvous (collective: a sequence number and one allreduce). A
 * rank that cannot map its node's segment makes every rank keep the flat
 * algorithms (it logs why); errors are only the mesh's (named as the
 * collectives' are). *out: the state (the caller frees it with
 * wk_hier_free), or NULL when the algorithm stays off.
 */
enum ddp_status wk_hier_setup(struct wk_mesh *c, struct wk_hier **out);
/* Unmaps and frees h (NULL: nothing); before tcp_mesh_fini. */
void wk_hier_free(struct wk_hier *h);
/* Nodes the allreduce spans (the members of each stripe's ring). */
int wk_hier_nodes(const struct wk_hier *h);
/*
 * Reduces buf (count elements, at least 1) in place under the call's
 * header t (tcp_call_begin, aux WK_ALGO_HIER) within deadline; AVG divides
 * by the world size. Errors as the mesh's collectives'.
 */
enum ddp_status wk_hier_allreduce(struct wk_mesh *c, struct wk_hier *h,
				  void *buf, size_t count, enum ddp_dtype dtype,
				  enum ddp_op op, const struct wk_frame *t,
				  double deadline);

#endif
