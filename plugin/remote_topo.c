/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The node's topology for a --ddp step, read in slurmstepd while it is
 * still root (init_post_opt), from the site's topology cache
 * (common/topocache.h): a valid cache costs a fraction of a millisecond
 * where discovering PCI devices costs tens, on every node of every step.
 * Root rewrites a missing or stale cache here; user_init discovers as
 * before when this left no topology.
 */
#include <stdint.h>
#include <time.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "slurm_compat.h"

#include "ddp_log.h"
#include "ddp_util.h"
#include "plugin.h"
#include "topocache.h"

void
remote_post_opt(struct ddp_plugin *p, spank_t sp)
{
	struct ddp_node *n = &p->node;
	char err[DDP_ERR_LEN];
	uint32_t stepid;
	double t0;
	int hit;

	/* A plugstack topology= file is read in user_init, as before. */
	if (!p->opts.enabled || p->conf_error[0] || p->topology_xml[0] ||
	    n->topo)
		return;
	if (spank_get_item(sp, S_JOB_STEPID, &stepid) != ESPANK_SUCCESS ||
	    stepid == SLURM_BATCH_SCRIPT || stepid == SLURM_EXTERN_CONT ||
	    stepid >= SLURM_INTERACTIVE_STEP)
		return;
	t0 = ddp_now();
	hit = ddp_topo_load_cached(p->conf.topology_cache, &n->topo,
				   n->topo_note, sizeof(n->topo_note), err,
				   sizeof(err));
	if (hit < 0) {
		n->topo = NULL;
		n->topo_note[0] = '\0';
		return; /* user_init tries again and reports it */
	}
	n->topo_ms = (ddp_now() - t0) * 1e3;
	/* Admins look in slurmd's log for a cache that is not used. */
	if (!hit)
		ddp_info("topology: %s (%.1f ms)", n->topo_note, n->topo_ms);
	else
		ddp_debug("topology: %s (%.1f ms)", n->topo_note, n->topo_ms);
}
