/* SPDX-License-Identifier: BSD-3-Clause */
/* Tasks-per-node strings and the per-rank environment of a step, kept free
 * of Slurm so that uneven and subset steps are unit-tested. */
#include "tasks.h"

#include <stdio.h>
#include <string.h>

#include "ddp_util.h"

long
ddp_tasks_parse(const char *s, unsigned *counts, size_t max_nodes)
{
	const char *p = s;
	size_t n = 0;

	if (!s || !*s)
		return -1;
	for (;;) {
		long v, rep = 1;
		const char *end;

		if (ddp_parse_long_prefix(p, 0, DDP_TASKS_MAX_PER_NODE, &v,
					  &end) < 0 ||
		    *p == '+' || *p == '-')
			return -1;
		p = end;
		if (p[0] == '(') {
			if (p[1] != 'x' || p[2] == '+' || p[2] == '-' ||
			    ddp_parse_long_prefix(p + 2, 1, (long)max_nodes,
						  &rep, &end) < 0 ||
			    *end != ')')
				return -1;
			p = end + 1;
		}
		if ((size_t)rep > max_nodes - n)
			return -1;
		while (rep-- > 0)
			counts[n++] = (unsigned)v;
		if (*p == '\0')
			break;
		if (*p != ',' || p[1] == '\0')
			return -1;
		p++;
	}
	return (long)n;
}

int
ddp_tasks_format(const unsigned *counts, size_t n, char *buf, size_t size)
{
	size_t i = 0;

	if (size == 0)
		return -1;
	buf[0] = '\0';
	while (i < n) {
		size_t j = i;

		while (j < n && counts[j] == counts[i])
			j++;
		if (j - i > 1) {
			if (ddp_fmt_cat(buf, size, "%s%u(x%zu)",
					buf[0] ? "," : "", counts[i],
					j - i) < 0)
				return -1;
		} else if (ddp_fmt_cat(buf, size, "%s%u", buf[0] ? "," : "",
				       counts[i]) < 0) {
			return -1;
		}
		i = j;
	}
	return 0;
}

unsigned
ddp_tasks_max(const unsigned *counts, size_t n)
{
	unsigned m = 0;
	size_t i;

	for (i = 0; i < n; i++)
		if (counts[i] > m)
			m = counts[i];
	return m;
}

static int
fail(char *err, size_t errlen, const char *msg)
{
	if (errlen && ddp_fmt(err, errlen, "%s", msg) < 0)
		err[errlen - 1] = '\0';
	return -1;
}

int
ddp_rank_env_compute(const unsigned *counts, size_t nnodes, unsigned node_id,
		     unsigned local_id, long global_id,
		     struct ddp_rank_env *env, char *err, size_t errlen)
{
	unsigned long world = 0, before = 0;
	size_t i;

	if (nnodes == 0)
		return fail(err, errlen, "step has no nodes");
	if (node_id >= nnodes)
		return fail(err, errlen, "node index outside the step");
	for (i = 0; i < nnodes; i++) {
		if (i == node_id)
			before = world;
		world += counts[i];
	}
	if (world == 0 || world > 0xffffffffUL)
		return fail(err, errlen, "step has no tasks");
	if (local_id >= counts[node_id])
		return fail(err, errlen, "task index outside its node");
	if (global_id < 0)
		global_id = (long)(before + local_id);
	if ((unsigned long)global_id >= world)
		return fail(err, errlen, "task id outside the step");
	env->rank = (unsigned)global_id;
	env->world_size = (unsigned)world;
	env->local_rank = local_id;
	env->local_world_size = counts[node_id];
	env->node_rank = node_id;
	env->nnodes = (unsigned)nnodes;
	return 0;
}
