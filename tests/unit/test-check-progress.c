/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ddp-check's line while rank 0 waits for the ranks to join: numbers with
 * thousands separators, the nodes still missing ranks (a handful, then a
 * count), the missing ranks where the step's nodes are not known, and
 * the step's nodes read from Slurm's node list and tasks per node.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tap.h"

static void
test_thousands(void)
{
	static const struct {
		long n;
		const char *want;
	} cases[] = {
		{0, "0"},
		{7, "7"},
		{999, "999"},
		{1000, "1,000"},
		{1024, "1,024"},
		{65536, "65,536"},
		{123456, "123,456"},
		{1234567, "1,234,567"},
		{-1024, "-1,024"},
	};
	char buf[32];
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		chk_thousands(cases[i].n, buf, sizeof(buf));
		tap_ok(strcmp(buf, cases[i].want) == 0, "%ld reads %s (got %s)",
		       cases[i].n, cases[i].want, buf);
	}
	chk_thousands(LONG_MIN, buf, sizeof(buf));
	tap_ok(buf[0] == '-' && strlen(buf) > 20,
	       "LONG_MIN does not overflow: %s", buf);
	chk_thousands(1234567, buf, 4);
	tap_ok(strcmp(buf, "1,2") == 0, "cut to fit a small buffer: %s", buf);
}

static void
test_expect(void)
{
	struct chk_expect e;

	tap_ok(chk_expect_parse("node[1-3]", "2(x3)", 6, &e) == 0 && e.n == 3 &&
		       strcmp(e.host[0], "node1") == 0 &&
		       strcmp(e.host[2], "node3") == 0 && e.ranks[0] == 2 &&
		       e.ranks[2] == 2,
	       "node[1-3] with 2(x3) tasks: three nodes of two ranks");
	chk_expect_free(&e);
	tap_ok(chk_expect_parse("a,b", "3,1", 4, &e) == 0 && e.n == 2 &&
		       e.ranks[0] == 3 && e.ranks[1] == 1,
	       "uneven tasks per node");
	chk_expect_free(&e);
	tap_ok(chk_expect_parse("node[1-3]", "2(x3)", 5, &e) < 0 && e.n == 0,
	       "tasks that do not add up to the world are refused");
	tap_ok(chk_expect_parse("node[1-2]", "2(x3)", 6, &e) < 0 && e.n == 0,
	       "more task counts than nodes are refused");
	tap_ok(chk_expect_parse("node[3-1]", "2", 2, &e) < 0,
	       "a malformed node list is refused");
	tap_ok(chk_expect_parse(NULL, "2", 2, &e) < 0 &&
		       chk_expect_parse("node1", NULL, 2, &e) < 0,
	       "outside Slurm (no variables) there is nothing to expect");
	chk_expect_free(&e);
}

static void
test_line(void)
{
	const char *host[12];
	struct chk_expect e;
	char line[CHK_TEXT_LEN];
	int r;

	/* 3 nodes x 2 ranks; node2's second rank and all of node3's are
	 * missing. */
	chk_expect_parse("node[1-3]", "2(x3)", 6, &e);
	memset(host, 0, sizeof(host));
	host[0] = "node1";
	host[1] = "node1";
	host[2] = "node2";
	chk_progress_line(&e, 6, host, line, sizeof(line));
	tap_ok(strcmp(line, "ddp-check: 3 of 6 ranks joined; waiting for "
			    "node2, node3") == 0,
	       "names the nodes with ranks missing: %s", line);
	host[0] = "node1.cluster.example";
	host[1] = "node1.cluster.example";
	host[2] = "node2.cluster.example";
	chk_progress_line(&e, 6, host, line, sizeof(line));
	tap_ok(strcmp(line, "ddp-check: 3 of 6 ranks joined; waiting for "
			    "node2, node3") == 0,
	       "qualified host names match Slurm's short ones: %s", line);
	chk_expect_free(&e);

	/* 12 nodes of one rank, only the first joined: 5 named, 6 more. */
	chk_expect_parse("n[01-12]", "1(x12)", 12, &e);
	memset(host, 0, sizeof(host));
	host[0] = "n01";
	chk_progress_line(&e, 12, host, line, sizeof(line));
	tap_ok(strcmp(line, "ddp-check: 1 of 12 ranks joined; waiting for "
			    "n02, n03, n04, n05, n06 and 6 more") == 0,
	       "a handful of nodes by name, then a count: %s", line);

	/* Names the ranks joined from that are not Slurm's: the ranks. */
	host[0] = "elsewhere";
	chk_progress_line(&e, 12, host, line, sizeof(line));
	tap_ok(strcmp(line, "ddp-check: 1 of 12 ranks joined; waiting for "
			    "ranks 1, 2, 3, 4, 5 and 6 more") == 0,
	       "unknown node names: the missing ranks instead: %s", line);
	chk_expect_free(&e);

	/* Outside Slurm: the ranks, one or several. */
	for (r = 0; r < 4; r++)
		host[r] = r == 2 ? NULL : "box";
	chk_progress_line(NULL, 4, host, line, sizeof(line));
	tap_ok(strcmp(line, "ddp-check: 3 of 4 ranks joined; waiting for "
			    "rank 2") == 0,
	       "no node list, one rank missing: %s", line);
	host[3] = NULL;
	chk_progress_line(NULL, 4, host, line, sizeof(line));
	tap_ok(strcmp(line, "ddp-check: 2 of 4 ranks joined; waiting for "
			    "ranks 2, 3") == 0,
	       "no node list, two ranks missing: %s", line);
}

/* A big step: the numbers carry their separators. */
static void
test_big(void)
{
	const char **host = calloc(1024, sizeof(*host));
	struct chk_expect e;
	char line[CHK_TEXT_LEN];
	int r;

	if (!host) {
		tap_ok(0, "out of memory");
		return;
	}
	/* 128 nodes x 8 ranks, block placement; nodes 7 and 9 (n007,
	 * n009) lack one rank each, nodes 60 and up are all missing. */
	chk_expect_parse("n[000-127]", "8(x128)", 1024, &e);
	for (r = 0; r < 60 * 8; r++)
		host[r] = e.host[r / 8];
	host[7 * 8 + 3] = NULL;
	host[9 * 8 + 5] = NULL;
	chk_progress_line(&e, 1024, host, line, sizeof(line));
	tap_ok(strcmp(line, "ddp-check: 478 of 1,024 ranks joined; waiting "
			    "for n007, n009, n060, n061, n062 and 65 "
			    "more") == 0,
	       "1,024 ranks: %s", line);
	chk_expect_free(&e);
	free(host);
}

int
main(void)
{
	test_thousands();
	test_expect();
	test_line();
	test_big();
	return tap_done();
}
