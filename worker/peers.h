/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Which ranks a rank talks to (peers.c): the job's nodes, grouped from
 * every rank's host the same way on every rank, and the peers the
 * collectives of tcp_coll.c and hier.c use, so that the rendezvous connects
 * only those and a rank's descriptors grow with log2 of the world size
 * and the ranks of its node, not with the world size.
 *
 * Pure functions of the mesh's size, rank and peers[].host: no I/O, no
 * shared state, thread-safe. Errors: -1 (out of memory), nothing logged.
 */
#ifndef DDP_WK_PEERS_H
#define DDP_WK_PEERS_H

#include <stdint.h>

#include "tcp.h"

/* One node: its ranks are idx[start .. start + len), ascending. */
struct wk_node {
	int first; /* lowest rank on the node */
	int start;
	int len;
};

/* The job's nodes, ordered by their lowest rank. */
struct wk_nodes {
	int n;
	struct wk_node *node; /* n entries */
	int *idx;	      /* every rank, grouped by node */
	int me;		      /* the node of the mesh's own rank */
	int lidx;	      /* the own rank's place on its node */
	int minlen;	      /* ranks on the smallest node */
	int maxlen;	      /* ranks on the largest node */
};

/* Groups c's ranks by host into *out (free with wk_nodes_free): 0, -1. */
int wk_nodes_build(const struct wk_mesh *c, struct wk_nodes *out);
void wk_nodes_free(struct wk_nodes *n);

/*
 * want[s] = 1 for every rank s (size entries) that c's rank exchanges data
 * with in some collective, else 0 (want[rank] is 0): ring neighbours
 * (ring allreduce, chain broadcast), rank +/- 2^k (dissemination agree and
 * barrier, binomial broadcast from any root), recursive-doubling partners
 * with the fold of a world that is not a power of two, every rank of the
 * own node, and the neighbours in the ring of the own stripe across nodes
 * (hierarchical allreduce, only where wk_nodes_hier allows it). The
 * relation is symmetric: s wants rank exactly when rank wants s. Returns
 * how many are wanted, or -1.
 *
 * How many, at most: 2 ceil(log2 N) ranks at a distance of a power of
 * two (one fewer when N is a power of two); floor(log2 N) + 1
 * recursive-doubling partners when N is no power of two (when it is, they
 * are among the former); and where a
 * node's ranks all connect (wk_nodes_hier) the other L - 1 of its L and
 * the stripe's 2 neighbours. The sets overlap: in blocks of 8 ranks per
 * node a rank has at most 23 peers at 1,024 ranks and 27 at 4,096, one
 * rank per node 23 at 4,096, and a node of WK_HIER_LOCAL_MAX ranks alone
 * 127. test-worker-host holds these figures and checks the set against
 * every algorithm's partners.
 */
int wk_peers_wanted(const struct wk_mesh *c, uint8_t *want);

/*
 * The most ranks one node may have for the hierarchical allreduce. Its
 * ranks all connect to each other (a local rank's death is seen on its
 * sockets while the others wait on shared memory), which costs a node
 * L * (L - 1) / 2 connections and each rank L - 1 descriptors: fine for
 * one rank per GPU or per core, not for hundreds of ranks sharing a node,
 * which use the flat algorithms instead.
 */
#define WK_HIER_LOCAL_MAX 128

/* Whether nodes allow the hierarchical allreduce (and so connect every
 * node's ranks to each other): a node with several ranks, none with more
 * than WK_HIER_LOCAL_MAX. */
int wk_nodes_hier(const struct wk_nodes *nodes);

#endif
