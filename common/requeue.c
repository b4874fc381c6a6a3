/* SPDX-License-Identifier: BSD-3-Clause */
/* --ddp-check=requeue's decisions, apart from Slurm (requeue.h). */
#include "requeue.h"

#include <string.h>

#include "ddp_util.h"
#include "hostlist.h"

/* A job's excluded nodes beyond this are not worth expanding. */
#define EXCLUDE_MAX_HOSTS 65536

void
ddp_requeue_collect(void *nodes, const struct ddp_verdict *v)
{
	struct ddp_requeue_nodes *out = nodes;
	size_t i;

	for (i = 0; i < out->n; i++)
		if (!strcmp(out->name[i], v->node))
			return;
	if (out->n < DDP_REQUEUE_MAX_NODES &&
	    ddp_fmt(out->name[out->n], sizeof(out->name[0]), "%s", v->node) ==
		    0)
		out->n++;
}

int
ddp_requeue_allowed(const struct ddp_requeue_job *job, unsigned max, char *why,
		    size_t whylen)
{
	if (!job->batch)
		ddp_errf(why, whylen,
			 "not a batch job: only sbatch jobs are requeued");
	else if (!job->requeue)
		ddp_errf(why, whylen,
			 "the job may not be requeued (sbatch --requeue "
			 "allows it where the site's JobRequeue does not)");
	else if (job->restarts >= max)
		ddp_errf(why, whylen,
			 "the job was requeued %u time%s already, the "
			 "site's check_requeue_max is %u",
			 job->restarts, job->restarts == 1 ? "" : "s", max);
	else
		return 1;
	return 0;
}

int
ddp_requeue_node_list(const struct ddp_requeue_nodes *nodes, char *out,
		      size_t outlen)
{
	size_t i;

	if (outlen)
		out[0] = '\0';
	for (i = 0; i < nodes->n; i++) {
		if (ddp_fmt_cat(out, outlen, "%s%s", i ? "," : "",
				nodes->name[i]) < 0)
			return -1;
	}
	return 0;
}

int
ddp_requeue_exclude(const char *existing, const struct ddp_requeue_nodes *add,
		    char *out, size_t outlen, char *err, size_t errlen)
{
	struct ddp_hostlist have = {0};
	char herr[256];
	size_t i, j;
	int rc = -1;

	if (!existing || !strcmp(existing, "(null)"))
		existing = "";
	if (existing[0] && ddp_hostlist_parse(existing, EXCLUDE_MAX_HOSTS,
					      &have, herr, sizeof(herr)) < 0) {
		ddp_errf(err, errlen, "the job's excluded nodes '%.80s': %s",
			 existing, herr);
		goto out;
	}
	if (ddp_fmt(out, outlen, "%s", existing) < 0)
		goto too_long;
	for (i = 0; i < add->n; i++) {
		for (j = 0; j < have.n; j++)
			if (!strcmp(have.hosts[j], add->name[i]))
				break;
		if (j < have.n)
			continue;
		if (ddp_fmt_cat(out, outlen, "%s%s", out[0] ? "," : "",
				add->name[i]) < 0)
			goto too_long;
	}
	rc = 0;
	goto out;
too_long:
	ddp_errf(err, errlen,
		 "the job's excluded nodes would exceed %zu "
		 "characters",
		 outlen - 1);
out:
	ddp_hostlist_free(&have);
	return rc;
}

int
ddp_requeue_describe(const struct ddp_verdict *v, char *out, size_t outlen)
{
	const char *unit = !strcmp(v->unit, "gb-per-s") ? " GB/s"
			   : !strcmp(v->unit, "-")	? ""
							: NULL;
	char with_unit[sizeof(v->unit) + 1];

	if (!unit && ddp_fmt(with_unit, sizeof(with_unit), " %s", v->unit) == 0)
		unit = with_unit;
	if (!strcmp(v->value, "-"))
		return ddp_fmt(out, outlen, "%s: %s", v->node, v->check);
	if (!strcmp(v->median, "-"))
		return ddp_fmt(out, outlen, "%s: %s %s%s", v->node, v->check,
			       v->value, unit ? unit : "");
	return ddp_fmt(out, outlen, "%s: %s %s%s, the step's median %s%s",
		       v->node, v->check, v->value, unit ? unit : "", v->median,
		       unit ? unit : "");
}
