/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libddp's hierarchical allreduce (hier.c), for several ranks per node:
 * within a node through shared memory (shm.h), across nodes over the TCP
 * mesh (tcp.h) between one rank per node and stripe. The communicator
 * (comm.c) sets it up after the rendezvous; tcp_allreduce reaches it
 * through the mesh's hier_allreduce pointer (WK_ALGO_HIER), since it lies
 * above the mesh.
 *
 * Thread safety: none inside; the communicator's lock serialises every
 * call on one mesh, as for the mesh itself.
 */
#ifndef DDP_WK_HIER_H
#define DDP_WK_HIER_H

#include "ddp.h"
#include "tcp.h"

/*
 * Builds the per-node shared memory when the host map (peers[].host) has
 * several ranks on a node and several nodes, or the mesh's algo is
 * WK_ALGO_HIER (DDP_TCP_ALGO=hier); every rank must call it once after
 * the rendezvous (collective: a sequence number and one allreduce). A
 * rank that cannot map its node's segment makes every rank keep the flat
 * algorithms (it logs why); errors are only the mesh's (named as the
 * collectives' are). On success with the algorithm on, sets c->hier and
 * c->hier_allreduce; the mesh owns them until wk_hier_free.
 */
enum ddp_status wk_hier_setup(struct wk_mesh *c);
/* Unmaps and frees c->hier (NULL: nothing); before tcp_mesh_fini. */
void wk_hier_free(struct wk_mesh *c);

#endif
