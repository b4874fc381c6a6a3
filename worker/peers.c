/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The job's nodes and the peers a rank's collectives use (peers.h). Any
 * change to a collective's communication pattern in tcp_coll.c or hier.c
 * must be mirrored in wk_peers_wanted, or that collective finds no
 * connection; test-worker-host checks the two against each other.
 */
#include <stdlib.h>
#include <string.h>

#include "peers.h"

static int
by_host(const void *a, const void *b, void *arg)
{
	const struct wk_mesh *c = arg;
	int x = *(const int *)a, y = *(const int *)b;
	int d = strcmp(c->peers[x].host, c->peers[y].host);

	return d ? d : (x > y) - (x < y);
}

static int
by_first(const void *a, const void *b)
{
	const struct wk_node *x = a, *y = b;

	return (x->first > y->first) - (x->first < y->first);
}

int
wk_nodes_build(const struct wk_mesh *c, struct wk_nodes *out)
{
	int i, n = 0;

	memset(out, 0, sizeof(*out));
	out->idx = calloc((size_t)c->size, sizeof(*out->idx));
	out->node = calloc((size_t)c->size, sizeof(*out->node));
	if (!out->idx || !out->node) {
		wk_nodes_free(out);
		return -1;
	}
	for (i = 0; i < c->size; i++)
		out->idx[i] = i;
	qsort_r(out->idx, (size_t)c->size, sizeof(*out->idx), by_host,
		(void *)c);
	for (i = 0; i < c->size; i++) {
		if (i == 0 || strcmp(c->peers[out->idx[i]].host,
				     c->peers[out->idx[i - 1]].host) != 0) {
			out->node[n].first = out->idx[i];
			out->node[n].start = i;
			n++;
		}
		out->node[n - 1].len++;
	}
	qsort(out->node, (size_t)n, sizeof(*out->node), by_first);
	out->n = n;
	out->minlen = c->size;
	for (i = 0; i < n; i++) {
		const struct wk_node *g = &out->node[i];
		int k;

		if (g->len < out->minlen)
			out->minlen = g->len;
		if (g->len > out->maxlen)
			out->maxlen = g->len;
		for (k = 0; k < g->len; k++) {
			if (out->idx[g->start + k] == c->rank) {
				out->me = i;
				out->lidx = k;
			}
		}
	}
	return 0;
}

void
wk_nodes_free(struct wk_nodes *n)
{
	free(n->idx);
	free(n->node);
	n->idx = NULL;
	n->node = NULL;
}

int
wk_nodes_hier(const struct wk_nodes *nodes)
{
	return nodes->maxlen > 1 && nodes->maxlen <= WK_HIER_LOCAL_MAX;
}

/* The partners of rank r in tcp_coll.c's recursive doubling, folds included. */
static void
want_rd(int r, int size, uint8_t *want)
{
	int pof2 = 1, rem, nr, mask, nd;

	while (pof2 * 2 <= size)
		pof2 *= 2;
	rem = size - pof2;
	nr = r - rem;
	if (r < 2 * rem) {
		want[r % 2 ? r - 1 : r + 1] = 1;
		nr = r % 2 ? r / 2 : -1;
	}
	for (mask = 1; nr >= 0 && mask < pof2; mask <<= 1) {
		nd = nr ^ mask;
		want[nd < rem ? nd * 2 + 1 : nd + rem] = 1;
	}
}

int
wk_peers_wanted(const struct wk_mesh *c, uint8_t *want)
{
	struct wk_nodes nodes;
	const struct wk_node *g;
	int r = c->rank, size = c->size, k, n = 0, s;

	memset(want, 0, (size_t)size);
	if (size < 2)
		return 0;
	for (k = 1; k < size; k <<= 1) {
		want[(r + k) % size] = 1;
		want[(r - k + size) % size] = 1;
	}
	want_rd(r, size, want);
	if (wk_nodes_build(c, &nodes) < 0)
		return -1;
	g = &nodes.node[nodes.me];
	for (k = 0; k < g->len && wk_nodes_hier(&nodes); k++)
		want[nodes.idx[g->start + k]] = 1;
	if (nodes.n > 1 && wk_nodes_hier(&nodes) && nodes.lidx < nodes.minlen) {
		int left = (nodes.me - 1 + nodes.n) % nodes.n;
		int right = (nodes.me + 1) % nodes.n;

		want[nodes.idx[nodes.node[left].start + nodes.lidx]] = 1;
		want[nodes.idx[nodes.node[right].start + nodes.lidx]] = 1;
	}
	wk_nodes_free(&nodes);
	want[r] = 0;
	for (s = 0; s < size; s++)
		n += want[s];
	return n;
}
