/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * --ddp-check=requeue's Slurm side: in the step's global rank 0, as the
 * job's user, after a failed check. The decisions are common/requeue.c's;
 * here the job's record is read and the job requeued through libslurm.
 */
#include <stdlib.h>

#include "ddp_log.h"
#include "ddp_util.h"
#include "plugin.h"
#include "requeue.h"
#include "slurm_requeue.h"

/* Shows each finding on the job's output and collects the nodes (arg). */
static void
print_verdict(void *arg, const struct ddp_verdict *v)
{
	char line[DDP_VERDICT_LINE_MAX + 64];

	if (ddp_requeue_describe(v, line, sizeof(line)) == 0)
		ddp_user("%s", line);
	ddp_requeue_collect(arg, v);
}

void
plugin_requeue(const struct ddp_plugin *p, const char *text, size_t len)
{
	const struct ddp_node *n = &p->node;
	struct ddp_requeue_nodes *nodes = NULL;
	char list[DDP_SLURM_EXCLUDE_LEN], why[DDP_ERR_LEN], note[96],
		bad_why[128];
	unsigned restart = 0;
	size_t bad = 0;

	nodes = calloc(1, sizeof(*nodes));
	if (!nodes) {
		ddp_error("--ddp-check=requeue: out of memory");
		return;
	}
	ddp_verdict_scan(text, len, print_verdict, nodes, &bad, bad_why,
			 sizeof(bad_why));
	if (bad)
		ddp_info("--ddp-check: %zu verdict line%s skipped: %s", bad,
			 bad == 1 ? "" : "s", bad_why);
	if (!nodes->n) {
		ddp_error("--ddp-check=requeue: the check named no node: the "
			  "job is not requeued");
		goto out;
	}
	if (ddp_requeue_node_list(nodes, list, sizeof(list)) < 0) {
		ddp_error("--ddp-check=requeue: too many nodes named to list");
		goto out;
	}
	if (ddp_slurm_requeue_without(n->jobid, p->conf.check_requeue_max,
				      nodes, "--ddp-check=requeue", &restart,
				      note, sizeof(note), why,
				      sizeof(why)) == 0) {
		if (ddp_fmt(why, sizeof(why),
			    "job %u requeued (restart %u of at most %u) "
			    "without %s%s",
			    n->jobid, restart, p->conf.check_requeue_max, list,
			    note) == 0)
			ddp_user("%s", why);
		goto out;
	}
	ddp_error("retry with: --exclude=%s (not requeued: %s)", list, why);
out:
	free(nodes);
}
