/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of tasks-per-node parsing and the rank environment for even,
 * uneven and subset steps. */
#include <string.h>

#include "tap.h"
#include "tasks.h"

int
main(void)
{
	unsigned c[16];
	char buf[64], err[128];
	struct ddp_rank_env e;
	static const char *bad[] = {
		"",   ",",	"2,", "2(x0)", "2(x)",	"2(3)",	  "2(x3",  "-1",
		"+1", "2(x-1)", "a",  "2 ,1",  "65537", "1(x17)", "2(x+3)"};
	size_t i;

	tap_ok(ddp_tasks_parse("4", c, 16) == 1 && c[0] == 4, "single node");
	tap_ok(ddp_tasks_parse("2(x3),1", c, 16) == 4 && c[0] == 2 &&
		       c[2] == 2 && c[3] == 1,
	       "repeat and single");
	tap_ok(ddp_tasks_parse("3,2", c, 16) == 2 && c[0] == 3 && c[1] == 2,
	       "uneven list");
	tap_ok(ddp_tasks_parse("1(x16)", c, 16) == 16, "exactly the limit");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		tap_ok(ddp_tasks_parse(bad[i], c, 16) < 0, "refused: '%s'",
		       bad[i]);
	tap_ok(ddp_tasks_parse(NULL, c, 16) < 0, "NULL refused");

	ddp_tasks_parse("2(x3),1", c, 16);
	tap_ok(ddp_tasks_format(c, 4, buf, sizeof(buf)) == 0 &&
		       strcmp(buf, "2(x3),1") == 0,
	       "format round-trips");
	tap_ok(ddp_tasks_format(c, 4, buf, 4) < 0, "format refuses truncation");
	tap_ok(ddp_tasks_max(c, 4) == 2, "max tasks per node");

	/* -n 5 on 2 nodes: 3 + 2. */
	ddp_tasks_parse("3,2", c, 16);
	tap_ok(ddp_rank_env_compute(c, 2, 1, 1, -1, &e, err, sizeof(err)) ==
			       0 &&
		       e.rank == 4 && e.world_size == 5 && e.local_rank == 1 &&
		       e.local_world_size == 2 && e.node_rank == 1 &&
		       e.nnodes == 2,
	       "uneven: block rank of node 1 task 1");
	tap_ok(ddp_rank_env_compute(c, 2, 0, 2, -1, &e, err, sizeof(err)) ==
			       0 &&
		       e.rank == 2 && e.local_world_size == 3,
	       "uneven: last task of node 0");
	tap_ok(ddp_rank_env_compute(c, 2, 1, 0, 1, &e, err, sizeof(err)) == 0 &&
		       e.rank == 1,
	       "Slurm's task id wins (cyclic distribution)");
	tap_ok(ddp_rank_env_compute(c, 2, 1, 2, -1, &e, err, sizeof(err)) < 0,
	       "local index beyond the node refused");
	tap_ok(ddp_rank_env_compute(c, 2, 2, 0, -1, &e, err, sizeof(err)) < 0,
	       "node index beyond the step refused");
	tap_ok(ddp_rank_env_compute(c, 2, 0, 0, 5, &e, err, sizeof(err)) < 0 &&
		       strstr(err, "task id"),
	       "task id beyond the world refused with a reason");
	tap_ok(ddp_rank_env_compute(c, 0, 0, 0, -1, &e, err, sizeof(err)) < 0,
	       "empty step refused");
	/* A subset step: one node of a larger allocation. */
	ddp_tasks_parse("4", c, 16);
	tap_ok(ddp_rank_env_compute(c, 1, 0, 3, -1, &e, err, sizeof(err)) ==
			       0 &&
		       e.rank == 3 && e.world_size == 4 && e.node_rank == 0,
	       "subset step counts only its own nodes");
	return tap_done();
}
