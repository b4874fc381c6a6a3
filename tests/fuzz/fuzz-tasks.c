/* SPDX-License-Identifier: BSD-3-Clause */
/* libFuzzer target: tasks-per-node strings round-trip through format, and
 * the rank environment stays inside the world it describes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tasks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static unsigned c[256], c2[256];
	struct ddp_rank_env e;
	char *s, buf[4096], err[128];
	long n;

	if (size > 1024)
		return 0;
	s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	n = ddp_tasks_parse(s, c, 256);
	if (n > 0) {
		if (ddp_tasks_format(c, (size_t)n, buf, sizeof(buf)) == 0 &&
		    (ddp_tasks_parse(buf, c2, 256) != n ||
		     memcmp(c, c2, (size_t)n * sizeof(*c)) != 0))
			abort();
		if (c[0] > 0 &&
		    ddp_rank_env_compute(c, (size_t)n, 0, c[0] - 1, -1, &e, err,
					 sizeof(err)) == 0 &&
		    (e.rank >= e.world_size ||
		     e.local_rank >= e.local_world_size))
			abort();
	}
	free(s);
	return 0;
}
