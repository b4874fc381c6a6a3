/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ddp-check's plan of its collectives after the link test: the steps of
 * a recursive doubling, the slowest link and fullest node, the expected
 * time of an allreduce on them, and how long libddp may wait for a peer:
 * a quarter of the time limit on healthy links, longer on a slow one,
 * never past the time limit left.
 */
#include <math.h>
#include <string.h>

#include "check.h"
#include "tap.h"

/* Three nodes of a ring, each link measured at gbps except node 1's,
 * which sends at slow_gbps; ranks per node as given. */
static void
three_nodes(struct chk_net *net, struct chk_node nd[3], double gbps,
	    double slow_gbps, int r0, int r1, int r2)
{
	int i;

	memset(net, 0, sizeof(*net));
	memset(nd, 0, 3 * sizeof(*nd));
	net->n = 3;
	net->node = nd;
	net->ndir = 2;
	net->measured = 1;
	for (i = 0; i < 3; i++)
		nd[i].gbps[0] = nd[i].gbps[1] = gbps;
	nd[1].gbps[0] = nd[1].gbps[1] = slow_gbps;
	nd[0].nranks = r0;
	nd[1].nranks = r1;
	nd[2].nranks = r2;
}

static int
near(double a, double b)
{
	return fabs(a - b) <= 1e-9 * (fabs(a) + fabs(b) + 1);
}

int
main(void)
{
	struct chk_net net;
	struct chk_node nd[3];
	double row[4] = {0}, t1, t2, w;

	tap_ok(chk_doublings(1) == 0 && chk_doublings(2) == 1 &&
		       chk_doublings(3) == 2 && chk_doublings(1024) == 10 &&
		       chk_doublings(1025) == 11,
	       "doublings: ceil(log2 N) for 1, 2, 3, 1024, 1025 ranks");

	three_nodes(&net, nd, 0.5, 0.006, 341, 341, 342);
	tap_ok(chk_slowest_gbps(&net) == 0.006, "the slowest link is found");
	tap_ok(chk_most_ranks(&net) == 342, "the fullest node is found");
	nd[1].gbps[1] = -1;
	tap_ok(chk_slowest_gbps(&net) == 0.006,
	       "a link not measured (-1) is not the slowest");
	net.ndir = 1;
	nd[1].gbps[0] = 0.5;
	nd[1].gbps[1] = 0.001;
	tap_ok(chk_slowest_gbps(&net) == 0.5,
	       "with one direction only the forward links count");
	net.measured = 0;
	tap_ok(chk_slowest_gbps(&net) < 0 &&
		       chk_collective_s(&net, 1024, 147456) == 0,
	       "no link measured: no slowest link, no expected time");

	three_nodes(&net, nd, 0.5, 0.006, 341, 341, 342);
	t1 = chk_collective_s(&net, 1024, 1024);
	t2 = chk_collective_s(&net, 1024, 2048);
	tap_ok(t1 > 0 && near(t2, 2 * t1),
	       "the expected time grows with the bytes");
	tap_ok(near(chk_collective_s(&net, 2048, 1024), t1 * 11 / 10),
	       "and with the doublings");
	nd[2].nranks = 684;
	tap_ok(near(chk_collective_s(&net, 1024, 1024), 2 * t1),
	       "and with the ranks of the fullest node");
	nd[2].nranks = 342;
	nd[1].gbps[0] = nd[1].gbps[1] = 0.003;
	tap_ok(near(chk_collective_s(&net, 1024, 1024), 2 * t1),
	       "and inversely with the slowest link");

	three_nodes(&net, nd, 0.5, 0.5, 341, 341, 342);
	tap_ok(chk_wait_s(&net, 1024, 8, 20, 19) == 5,
	       "healthy links, 8 bytes: a quarter of the time limit");
	tap_ok(chk_wait_s(&net, 1024, 8, 2, 1.5) == 1,
	       "at least 1 s however short the time limit");
	net.measured = 0;
	tap_ok(chk_wait_s(&net, 1024, 147456, 20, 19) == 5,
	       "no link measured: a quarter of the time limit");

	three_nodes(&net, nd, 0.5, 0.006, 341, 341, 342);
	w = chk_wait_s(&net, 1024, 147456, 20, 15);
	tap_ok(w == 14,
	       "a slow link and 147 KiB a rank: up to the time "
	       "limit left less 1 s (%.2f)",
	       w);
	w = chk_wait_s(&net, 1024, 147456, 20, 3);
	tap_ok(w == 5, "never less than a quarter of the time limit (%.2f)", w);
	t1 = chk_collective_s(&net, 1024, 8192);
	w = chk_wait_s(&net, 1024, 8192, 60, 55);
	tap_ok(t1 * 4 > 15 && t1 * 4 < 54 && near(w, 4 * t1),
	       "between the two: four times the expected time (%.2f s)", w);

	tap_ok(!chk_row_used(row, 4), "a row of zeros is not used");
	row[3] = 1;
	tap_ok(chk_row_used(row, 4), "a row with a value is used");
	row[3] = 0;
	row[0] = -1;
	tap_ok(chk_row_used(row, 4), "a negative value counts too");
	return tap_done();
}
