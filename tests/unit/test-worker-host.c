/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The host backend's choice of algorithm and the sparse mesh's peer sets
 * at large worlds, without a network: a latency-bound allreduce takes
 * about log2(N) steps at any N, the bandwidth-bound one the ring; every
 * rank's peer set is symmetric and stays small (peers.h).
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

/* Every rank's peer set: symmetric, and at most `bound` peers. */
static void
check_peers(int size, int per, int bound)
{
	struct wk_mesh c;
	uint8_t *want;
	int r, s, n, most = 0, sym = 1, ok = 1;

	want = malloc((size_t)size * (size_t)size);
	if (!want || mesh_of(&c, size, per) < 0) {
		tap_ok(0, "out of memory");
		free(want);
		return;
	}
	for (r = 0; r < size && ok; r++) {
		c.rank = r;
		n = wk_peers_wanted(&c, want + (size_t)r * (size_t)size);
		ok = n >= 0;
		if (n > most)
			most = n;
	}
	for (r = 0; r < size && ok; r++)
		for (s = 0; s < size && sym; s++)
			sym = want[(size_t)r * (size_t)size + (size_t)s] ==
			      want[(size_t)s * (size_t)size + (size_t)r];
	tap_ok(ok && sym && most <= bound,
	       "%d ranks, %d per node: peer sets symmetric, at most %d peers "
	       "(bound %d)",
	       size, per, most, bound);
	free(want);
	free(c.peers);
}

int
main(void)
{
	check_choice();
	check_peers(4096, 8, 48);
	check_peers(37 * 3 + 1, 3, 24);
	check_peers(1000, 7, 40);
	check_peers(2, 1, 1);
	/* Past WK_HIER_LOCAL_MAX ranks on a node, a node's ranks no longer
	 * all connect: one node of 256, and 1,024 ranks on 3 nodes. */
	check_peers(256, 256, 24);
	check_peers(1024, 342, 32);
	return tap_done();
}
