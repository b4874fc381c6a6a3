/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The host backend's choice of algorithm and the sparse mesh's peer sets
 * at large worlds, without a network: a latency-bound allreduce takes
 * about log2(N) steps at any N, the bandwidth-bound one the ring; every
 * rank's peer set is symmetric, holds every rank each algorithm of tcp_coll.c
 * and hier.c talks to and no other, and is as small as peers.h claims.
 */
#include <stdlib.h>
#include <string.h>

#include "host.h"
#include "peers.h"
#include "tap.h"

/* A mesh of size ranks, per ranks to a host ("node<r/per>"); the last
 * node holds the remainder. */
static int
mesh_of(struct wk_mesh *c, int size, int per)
{
	int r;

	memset(c, 0, sizeof(*c));
	c->size = size;
	c->ring_min = 64 * 1024;
	c->algo = WK_ALGO_AUTO;
	c->peers = calloc((size_t)size, sizeof(*c->peers));
	if (!c->peers)
		return -1;
	for (r = 0; r < size; r++)
		snprintf(c->peers[r].host, sizeof(c->peers[r].host), "node%d",
			 r / per);
	return 0;
}

/* Steps of the algorithm for a world of n: ring 2(n-1); recursive
 * doubling log2 of the largest power of two in n, plus the fold in and
 * out when n is not one. */
static int
steps(int algo, int n)
{
	int lg = 0;

	while ((2 << lg) <= n)
		lg++;
	return algo == WK_ALGO_RING ? 2 * (n - 1) : lg + ((1 << lg) != n) * 2;
}

static void
check_choice(void)
{
	static const struct {
		int n;
		size_t bytes;
		int want;
	} cases[] = {
		{2, 4, WK_ALGO_RD},
		{2, 4096, WK_ALGO_RD},
		{2, 64 * 1024, WK_ALGO_RING},
		{2, 64u << 20, WK_ALGO_RING},
		{64, 4, WK_ALGO_RD},
		{64, 64u << 20, WK_ALGO_RING},
		{4096, 4, WK_ALGO_RD},
		{4096, 1u << 20, WK_ALGO_RD},
		{4096, 1u << 30, WK_ALGO_RING},
	};
	struct wk_host h = {0};
	struct wk_mesh c;
	size_t k;
	int algo;

	for (k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		if (mesh_of(&c, cases[k].n, 8) < 0) {
			tap_ok(0, "out of memory");
			return;
		}
		h.mesh = &c;
		algo = wk_host_algo(&h, cases[k].bytes / 4, cases[k].bytes);
		tap_ok(algo == cases[k].want,
		       "%d ranks, %zu bytes: %s (%d steps)", cases[k].n,
		       cases[k].bytes,
		       algo == WK_ALGO_RING ? "ring" : "recursive doubling",
		       steps(algo, cases[k].n));
		free(c.peers);
	}
}

/*
 * The partners of the collectives, worked out here from tcp_coll.c and hier.c
 * rather than from peers.c: bit ALG_x of used[r * size + s] says that
 * rank r exchanges data with, or watches, rank s in that algorithm.
 */
enum {
	ALG_RING = 1,  /* ring allreduce: left and right */
	ALG_CHAIN = 2, /* chain broadcast from every root */
	ALG_TREE = 4,  /* binomial broadcast from every root */
	ALG_AGREE = 8, /* dissemination: barrier, the NCCL calls' agreement */
	ALG_RD = 16,   /* recursive doubling with its fold */
	ALG_HIER = 32, /* hierarchical: node, leader, stripe ring */
};
static const struct {
	int bit;
	const char *name;
} algs[] = {{ALG_RING, "ring"},	  {ALG_CHAIN, "chain"}, {ALG_TREE, "tree"},
	    {ALG_AGREE, "agree"}, {ALG_RD, "rd"},	{ALG_HIER, "hier"}};
#define NALGS (int)(sizeof(algs) / sizeof(algs[0]))

/* A job's layout: size ranks on nodes of per ranks, by block (rank r on
 * node r / per, as srun's default) or cyclic (rank r on node r % nodes). */
struct shape {
	int size;
	int per;
	int cyclic;
	int figure; /* the most peers a rank has, as peers.h says; 0: none */
};

static int
nodes_of(const struct shape *j)
{
	return (j->size + j->per - 1) / j->per;
}

static int
node_of(const struct shape *j, int r)
{
	return j->cyclic ? r % nodes_of(j) : r / j->per;
}

static void
pair(uint8_t *used, int size, int a, int b, int bit)
{
	used[(size_t)a * (size_t)size + (size_t)b] |= (uint8_t)bit;
	used[(size_t)b * (size_t)size + (size_t)a] |= (uint8_t)bit;
}

static void
use_flat(uint8_t *used, int P)
{
	int r, root, vr, mask, k, pof2 = 1, rem, nr, nd;

	for (r = 0; r < P; r++)
		pair(used, P, r, (r + 1) % P, ALG_RING);
	/* The chain: vr - 1 feeds vr, for vr = (r - root) mod P > 0. */
	for (root = 0; root < P; root++)
		for (vr = 1; vr < P; vr++)
			pair(used, P, (vr + root) % P, (vr - 1 + root) % P,
			     ALG_CHAIN);
	/* The tree: vr's parent is vr less its lowest set bit. */
	for (root = 0; root < P; root++)
		for (vr = 1; vr < P; vr++) {
			mask = vr & -vr;
			pair(used, P, (vr + root) % P, (vr - mask + root) % P,
			     ALG_TREE);
		}
	for (r = 0; r < P; r++)
		for (k = 1; k < P; k <<= 1) {
			pair(used, P, r, (r + k) % P, ALG_AGREE);
			pair(used, P, r, (r - k + P) % P, ALG_AGREE);
		}
	while (pof2 * 2 <= P)
		pof2 *= 2;
	rem = P - pof2;
	for (r = 0; r < P; r++) {
		nr = r - rem;
		if (r < 2 * rem) {
			if (r % 2 == 0)
				pair(used, P, r, r + 1, ALG_RD);
			nr = r % 2 ? r / 2 : -1;
		}
		for (mask = 1; nr >= 0 && mask < pof2; mask <<= 1) {
			nd = nr ^ mask;
			pair(used, P, r, nd < rem ? nd * 2 + 1 : nd + rem,
			     ALG_RD);
		}
	}
}

/*
 * The hierarchical allreduce, where a job may run it (DDP_TCP_ALGO=hier:
 * no node has more than WK_HIER_LOCAL_MAX ranks): the leader hands the
 * segment to every local rank, a rank waiting on shared memory watches
 * every local rank's socket, and the owner of stripe l (local index l,
 * below the fewest ranks of any node) rings with stripe l's owners on the
 * neighbour nodes, nodes ordered by their lowest rank. *largest: the
 * most ranks on a node.
 */
static int
use_hier(uint8_t *used, const struct shape *j, int *largest)
{
	int n = nodes_of(j), P = j->size, r, s, i, most = 0, least = P;
	int *count = calloc((size_t)n, sizeof(int));
	int *member = malloc((size_t)n * (size_t)P * sizeof(int));

	*largest = 0;
	if (!count || !member) {
		free(count);
		free(member);
		return -1;
	}
	/* Node ids are in order of their lowest rank in both layouts. */
	for (r = 0; r < P; r++) {
		i = node_of(j, r);
		member[(size_t)i * (size_t)P + (size_t)count[i]++] = r;
	}
	for (i = 0; i < n; i++) {
		most = count[i] > most ? count[i] : most;
		least = count[i] < least ? count[i] : least;
	}
	*largest = most;
	for (i = 0; i < n && most <= WK_HIER_LOCAL_MAX; i++) {
		const int *m = member + (size_t)i * (size_t)P;
		const int *left =
			member + (size_t)((i - 1 + n) % n) * (size_t)P;
		const int *right = member + (size_t)((i + 1) % n) * (size_t)P;

		for (r = 0; r < count[i]; r++)
			for (s = r + 1; s < count[i]; s++)
				pair(used, P, m[r], m[s], ALG_HIER);
		for (r = 0; r < least && n > 1; r++) {
			pair(used, P, m[r], left[r], ALG_HIER);
			pair(used, P, m[r], right[r], ALG_HIER);
		}
	}
	free(count);
	free(member);
	return 0;
}

/* The mesh of a shape: host "node<id>" for every rank. */
static int
mesh_shape(struct wk_mesh *c, const struct shape *j)
{
	int r;

	if (mesh_of(c, j->size, j->size) < 0)
		return -1;
	for (r = 0; r < j->size; r++)
		snprintf(c->peers[r].host, sizeof(c->peers[r].host), "node%d",
			 node_of(j, r));
	return 0;
}

/*
 * peers.h's bound on a rank's peers: 2 ceil(log2 N) at a distance of a
 * power of two (one fewer when N is a power of two), floor(log2 N) + 1
 * recursive-doubling partners when N is no power of two, and where the
 * node's ranks all connect (2 to WK_HIER_LOCAL_MAX a node) the other
 * L - 1 and the stripe's 2 neighbours.
 */
static int
peers_bound(int N, int largest)
{
	int up = 0, down = 0;

	while ((1 << up) < N)
		up++;
	while ((2 << down) <= N)
		down++;
	return 2 * up - ((1 << up) == N) + ((1 << up) != N ? down + 1 : 0) +
	       (largest >= 2 && largest <= WK_HIER_LOCAL_MAX ? largest - 1 + 2
							     : 0);
}

/*
 * Every rank's peer set (wk_peers_wanted) against the partners above:
 * symmetric; holding every partner of every algorithm (or a collective
 * finds no connection); holding nothing else (or the descriptors grow
 * for nothing); within peers.h's bound, and where peers.h gives the
 * figure, its largest exactly that.
 */
static void
check_peers(const struct shape *j)
{
	size_t P = (size_t)j->size, r, s;
	uint8_t *want = malloc(P * P), *used = calloc(P * P, 1);
	int n, most = 0, sym = 1, extra = 0, largest = 0, k, ok = 1;
	int miss[NALGS] = {0};
	size_t miss_at[NALGS] = {0};
	char label[96];
	struct wk_mesh c;

	snprintf(label, sizeof(label), "%d ranks, %d per node%s", j->size,
		 j->per, j->cyclic ? " (cyclic)" : "");
	if (!want || !used || mesh_shape(&c, j) < 0) {
		tap_ok(0, "%s: out of memory", label);
		free(want);
		free(used);
		return;
	}
	for (r = 0; r < P && ok; r++) {
		c.rank = (int)r;
		n = wk_peers_wanted(&c, want + r * P);
		ok = n >= 0;
		most = n > most ? n : most;
	}
	use_flat(used, j->size);
	ok = ok && use_hier(used, j, &largest) == 0;
	for (r = 0; r < P && ok; r++)
		for (s = 0; s < P; s++) {
			uint8_t w = want[r * P + s], u = used[r * P + s];

			sym &= w == want[s * P + r];
			extra += w && !u;
			for (k = 0; !w && u && r != s && k < NALGS; k++)
				if ((u & algs[k].bit) && !miss[k]++)
					miss_at[k] = r * P + s;
		}
	tap_ok(ok && sym, "%s: peer sets symmetric", label);
	for (k = 0; k < NALGS; k++) {
		if (algs[k].bit == ALG_HIER && largest > WK_HIER_LOCAL_MAX)
			continue;
		tap_ok(ok && !miss[k],
		       "%s: the peer set holds every partner of %s", label,
		       algs[k].name);
		if (miss[k])
			tap_diag("%d pairs missing, first rank %zu -> %zu",
				 miss[k], miss_at[k] / P, miss_at[k] % P);
	}
	tap_ok(ok && !extra,
	       "%s: and no other rank (%d pairs that no algorithm uses)", label,
	       extra);
	tap_ok(ok && most <= peers_bound(j->size, largest),
	       "%s: at most %d peers a rank, within peers.h's bound (%d)",
	       label, most, peers_bound(j->size, largest));
	if (j->figure)
		tap_ok(ok && most == j->figure,
		       "%s: at most %d peers a rank, the figure peers.h gives "
		       "(%d)",
		       label, most, j->figure);
	free(want);
	free(used);
	free(c.peers);
}

int
main(void)
{
	/* 4096 ranks are in more[], in the shapes peers.h names. */
	static const int sizes[] = {2, 3, 5, 7, 8, 64, 1000};
	static const int pers[] = {1, 3, 8};
	/* peers.h's figures; cyclic layouts (a node's ranks far apart);
	 * shapes past WK_HIER_LOCAL_MAX ranks on a node, where a node's ranks
	 * no longer all connect: one node of 256, 1,024 ranks on 3 nodes. */
	static const struct shape more[] = {
		{4096, 8, 0, 27},   {1024, 8, 0, 23},	   {4096, 1, 0, 23},
		{64, 8, 1, 0},	    {37 * 3 + 1, 3, 0, 0}, {1000, 7, 1, 0},
		{128, 128, 0, 127}, {256, 128, 0, 0},	   {256, 256, 0, 0},
		{1024, 342, 0, 0},
	};
	struct shape j = {0, 0, 0, 0};
	size_t a, b;

	check_choice();
	for (a = 0; a < sizeof(sizes) / sizeof(sizes[0]); a++)
		for (b = 0; b < sizeof(pers) / sizeof(pers[0]); b++) {
			j.size = sizes[a];
			j.per = pers[b];
			if (j.per < j.size)
				check_peers(&j);
		}
	for (a = 0; a < sizeof(more) / sizeof(more[0]); a++)
		check_peers(&more[a]);
	return tap_done();
}
