/* SPDX-License-Identifier: BSD-3-Clause */
/* libFuzzer target: what a task writes into slurmstepd's verdict pipe (any
 * bytes, not NUL-terminated) goes through ddp_verdict_scan and
 * ddp_requeue_collect; every line it accepts names a node, formats back
 * into a line it accepts again, describes and excludes within its
 * buffers. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "requeue.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_line(void *arg, const struct ddp_verdict *v)
{
	char line[DDP_VERDICT_LINE_MAX + 64], err[128];
	struct ddp_verdict back;

	if (!v->node[0] || !memchr(v->check, '\0', sizeof(v->check)) ||
	    !memchr(v->unit, '\0', sizeof(v->unit)))
		abort();
	if (ddp_requeue_describe(v, line, sizeof(line)) == 0 &&
	    strncmp(line, v->node, strlen(v->node)) != 0)
		abort();
	if (ddp_verdict_format(v, line, sizeof(line)) < 0 ||
	    ddp_verdict_parse(line, &back, err, sizeof(err)) < 0 ||
	    memcmp(&back, v, sizeof(back)) != 0)
		abort();
	ddp_requeue_collect(arg, v);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ddp_requeue_nodes nodes;
	char list[4096], err[256];
	size_t i;

	memset(&nodes, 0, sizeof(nodes));
	ddp_verdict_scan((const char *)data, size, check_line, &nodes, NULL,
			 NULL, 0);
	if (nodes.n > DDP_REQUEUE_MAX_NODES)
		abort();
	for (i = 0; i < nodes.n; i++)
		if (!nodes.name[i][0])
			abort();
	ddp_requeue_node_list(&nodes, list, sizeof(list));
	ddp_requeue_exclude("node[1-3]", &nodes, list, sizeof(list), err,
			    sizeof(err));
	return 0;
}
