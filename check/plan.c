/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ddp-check's plan of its collectives after the link test: how much each
 * moves over the slowest measured link, and so how long libddp may wait
 * for a peer in it. Pure functions over the judged numbers.
 */
#include "check.h"

double
chk_slowest_gbps(const struct chk_net *net)
{
	double slowest = -1;
	int i, d;

	for (i = 0; net->measured && i < net->n; i++)
		for (d = 0; d < net->ndir; d++)
			if (net->node[i].gbps[d] >= 0 &&
			    (slowest < 0 || net->node[i].gbps[d] < slowest))
				slowest = net->node[i].gbps[d];
	return slowest;
}

int
chk_most_ranks(const struct chk_net *net)
{
	int i, most = 1;

	for (i = 0; i < net->n; i++)
		if (net->node[i].nranks > most)
			most = net->node[i].nranks;
	return most;
}

int
chk_doublings(int world)
{
	int i, d = 0;

	for (i = 1; i < world; i *= 2)
		d++;
	return d;
}

double
chk_collective_s(const struct chk_net *net, int world, double bytes)
{
	double slowest = chk_slowest_gbps(net);

	if (slowest <= 0 || bytes <= 0)
		return 0;
	return (double)chk_doublings(world) * chk_most_ranks(net) * bytes /
	       (slowest * 1e9);
}

double
chk_wait_s(const struct chk_net *net, int world, double bytes,
	   double time_limit_s, double remaining_s)
{
	double base = time_limit_s / 4, wait, cap;

	if (base < 1)
		base = 1;
	/* Four times the expected time: the ranks of the slow node finish
	 * their steps one after another, and the CPUs they share are busy
	 * with the node's other ranks meanwhile. */
	wait = 4 * chk_collective_s(net, world, bytes);
	if (wait < base)
		return base;
	/* A hung rank must still be named before the time limit ends the
	 * check without naming it. */
	cap = remaining_s - 1;
	if (cap < base)
		cap = base;
	return wait < cap ? wait : cap;
}

int
chk_row_used(const double *row, size_t len)
{
	size_t k;

	for (k = 0; k < len; k++)
		if (row[k] != 0)
			return 1;
	return 0;
}
