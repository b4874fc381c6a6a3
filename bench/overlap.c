/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * How much of the gradient allreduce libddp's bucketed sync hides behind
 * the backward pass. A synthetic backward of L layers (real arithmetic on
 * each layer's gradient) marks each gradient ready as soon as it is final
 * ("on"), or all of them only after the whole backward ("off": no overlap,
 * what a runtime without buckets does). Also timed: the backward alone
 * (no-sync mode) and the allreduces alone. Prints on rank 0:
 *   layers,bytes_per_layer,world,compute_ms,comm_ms,off_ms,on_ms,hidden,
 *   early_buckets
 * with early_buckets the buckets whose allreduce had started before the
 * last "on" step reached ddp_grad_sync_wait, and hidden = (off - on) / (off -
 * compute), the share of the exposed communication that overlap removes. Each
 * figure is the median step time (maximum over ranks) of the steps after the
 * warm-up.
 *
 * -S BLOCKS measures instead what naming late ranks costs (libddp(3),
 * "Late ranks"): two reducers on the same layers, one with the
 * bookkeeping off (DDP_STRAGGLER_EVERY=0), one on (every 100 steps, the
 * default), take turns for blocks of 100 overlapped steps, so that the
 * host's drift hits both alike; each pair of blocks gives the ratio of
 * their mean step times (on / off). Prints on rank 0:
 *   layers,bytes_per_layer,world,pairs,off_ms,on_ms,ratio_median,
 *   ratio_p95,ratio_min,ratio_max,last_off_ms,last_on_ms
 * with off_ms and on_ms the medians of the blocks' mean step times, and
 * last_*_ms the median of how much longer a block's last step (the one
 * that reports, when on) took than the block's median step: the report
 * measured directly, much less noisy than the ratio on a busy host.
 *
 *   overlap [-l LAYERS] [-b BYTES_PER_LAYER] [-p PASSES] [-s STEPS]
 *           [-S BLOCKS]
 */
#include <ddp.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define MAX_LAYERS 64
#define MAX_STEPS 200

enum mode { M_COMPUTE, M_COMM, M_OFF, M_ON };

struct net {
	int layers;
	size_t count; /* floats per layer */
	long passes;  /* arithmetic passes per layer's backward */
	float *param[MAX_LAYERS];
	float *grad[MAX_LAYERS];
};

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void
backward_layer(struct net *n, int l)
{
	float *g = n->grad[l];
	const float *p = n->param[l];
	size_t i;
	long k;

	for (i = 0; i < n->count; i++)
		g[i] = 0;
	for (k = 0; k < n->passes; k++)
		for (i = 0; i < n->count; i++)
			g[i] = g[i] * 0.5f + p[i] * 0.25f + (float)k;
}

static int
check(enum ddp_status st, const char *what)
{
	if (st)
		fprintf(stderr, "overlap: %s: %s: %s\n", what, ddp_strerror(st),
			ddp_last_error());
	return st ? -1 : 0;
}

/* One training step's backward and gradient sync in the given mode. */
static int
step(struct net *n, struct ddp_grad_sync *gs, enum mode m)
{
	int l;

	ddp_grad_sync_set_no_sync(gs, m == M_COMPUTE);
	if (m == M_COMM) {
		for (l = n->layers - 1; l >= 0; l--)
			if (check(ddp_grad_sync_ready(gs, l), "ready"))
				return -1;
		return check(ddp_grad_sync_wait(gs), "wait");
	}
	for (l = n->layers - 1; l >= 0; l--) {
		backward_layer(n, l);
		if (m != M_OFF && check(ddp_grad_sync_ready(gs, l), "ready"))
			return -1;
	}
	if (m == M_OFF)
		for (l = n->layers - 1; l >= 0; l--)
			if (check(ddp_grad_sync_ready(gs, l), "ready"))
				return -1;
	return check(ddp_grad_sync_wait(gs), "wait");
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double
median_of(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(v[0]), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/*
 * Mean step time (maximum over ranks) of `steps` (at most MAX_STEPS)
 * overlapped steps, and how much longer than the block's median step its
 * last step took: the step whose ddp_grad_sync_wait makes the report.
 */
static int
block(struct net *n, struct ddp_grad_sync *gs, struct ddp_comm *comm, int steps,
      double *mean, double *last_extra)
{
	double total = 0, t0, dt[MAX_STEPS], last;
	int s;

	for (s = 0; s < steps; s++) {
		t0 = now_s();
		if (step(n, gs, M_ON))
			return -1;
		dt[s] = now_s() - t0;
		if (check(ddp_allreduce(comm, &dt[s], &dt[s], 1, DDP_FLOAT64,
					DDP_MAX),
			  "allreduce"))
			return -1;
		total += dt[s];
	}
	last = dt[steps - 1];
	*mean = total / steps;
	*last_extra = last - median_of(dt, steps);
	return 0;
}

/* -S: the straggler bookkeeping's cost, off and on in turns. */
static int
straggler_cost(struct net *n, struct ddp_comm *comm,
	       const struct ddp_grad_sync_opts *go, int pairs)
{
	enum { BLOCK = 100 };
	struct ddp_grad_sync *gs[2] = {NULL, NULL};
	double *ratio = calloc((size_t)pairs, sizeof(double));
	double *ms[2] = {calloc((size_t)pairs, sizeof(double)),
			 calloc((size_t)pairs, sizeof(double))};
	double *extra[2] = {calloc((size_t)pairs, sizeof(double)),
			    calloc((size_t)pairs, sizeof(double))};
	double warm, junk;
	int k, l, b, which, rc = -1;

	if (!ratio || !ms[0] || !ms[1] || !extra[0] || !extra[1])
		goto out;
	for (k = 0; k < 2; k++) {
		/* Read by ddp_grad_sync_create: 0 is off, 100 the default. */
		if (setenv("DDP_STRAGGLER_EVERY", k ? "100" : "0", 1) < 0 ||
		    check(ddp_grad_sync_create(comm, go, &gs[k]), "create"))
			goto out;
		for (l = 0; l < n->layers; l++)
			if (ddp_grad_sync_add(gs[k], n->param[l], n->grad[l],
					      n->count, DDP_FLOAT32) < 0) {
				fprintf(stderr, "overlap: %s\n",
					ddp_last_error());
				goto out;
			}
		if (check(ddp_grad_sync_start(gs[k]), "start"))
			goto out;
	}
	for (k = 0; k < 2; k++)
		if (block(n, gs[k], comm, BLOCK, &warm, &junk))
			goto out;
	for (b = 0; b < pairs; b++) {
		for (k = 0; k < 2; k++) {
			which = b % 2 ? 1 - k : k;
			if (block(n, gs[which], comm, BLOCK, &ms[which][b],
				  &extra[which][b]))
				goto out;
		}
		ratio[b] = ms[1][b] / ms[0][b];
	}
	if (ddp_comm_rank(comm) == 0) {
		double off = median_of(ms[0], pairs),
		       on = median_of(ms[1], pairs);
		double med = median_of(ratio, pairs);
		int p95 = (int)(0.95 * (pairs - 1) + 0.5);

		printf("layers,bytes_per_layer,world,pairs,off_ms,on_ms,"
		       "ratio_median,ratio_p95,ratio_min,ratio_max,"
		       "last_off_ms,last_on_ms\n");
		printf("%d,%zu,%d,%d,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f\n",
		       n->layers, n->count * 4, ddp_comm_size(comm), pairs,
		       off * 1e3, on * 1e3, med, ratio[p95], ratio[0],
		       ratio[pairs - 1], median_of(extra[0], pairs) * 1e3,
		       median_of(extra[1], pairs) * 1e3);
	}
	rc = 0;
out:
	ddp_grad_sync_destroy(gs[0]);
	ddp_grad_sync_destroy(gs[1]);
	free(ratio);
	free(ms[0]);
	free(ms[1]);
	free(extra[0]);
	free(extra[1]);
	return rc;
}

static int
parse_long(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

int
main(int argc, char **argv)
{
	struct net n = {.layers = 8, .count = 1u << 20, .passes = 4};
	struct ddp_grad_sync_opts go;
	struct ddp_grad_sync *gs = NULL;
	struct ddp_comm *comm = NULL;
	double med[4], t[MAX_STEPS];
	long v, steps = 10, warm = 2, pairs = 0;
	int c, l, m, s, rc = 1, early = 0;

	while ((c = getopt(argc, argv, "l:b:p:s:S:")) != -1) {
		if (!optarg || parse_long(optarg, 1, 1L << 30, &v))
			goto usage;
		if (c == 'l' && v <= MAX_LAYERS)
			n.layers = (int)v;
		else if (c == 'b' && v >= 4)
			n.count = (size_t)v / 4;
		else if (c == 'p')
			n.passes = v;
		else if (c == 's' && v <= MAX_STEPS)
			steps = v;
		else if (c == 'S' && v <= 10000)
			pairs = v;
		else
			goto usage;
	}
	if (optind != argc)
		goto usage;
	if (check(ddp_comm_init_env(&comm), "init"))
		return 1;
	/* One bucket per layer, so a layer's allreduce can start as soon
	 * as that layer's backward ends. */
	go.first_bucket_bytes = n.count * 4;
	go.bucket_cap_bytes = n.count * 4;
	for (l = 0; l < n.layers; l++) {
		n.param[l] = calloc(n.count, sizeof(float));
		n.grad[l] = calloc(n.count, sizeof(float));
		if (!n.param[l] || !n.grad[l]) {
			fprintf(stderr, "overlap: no memory for layer %d\n", l);
			goto out;
		}
	}
	if (pairs) {
		rc = straggler_cost(&n, comm, &go, (int)pairs) ? 1 : 0;
		goto out;
	}
	if (check(ddp_grad_sync_create(comm, &go, &gs), "create"))
		goto out;
	for (l = 0; l < n.layers; l++) {
		if (ddp_grad_sync_add(gs, n.param[l], n.grad[l], n.count,
				      DDP_FLOAT32) < 0) {
			fprintf(stderr, "overlap: cannot add layer %d: %s\n", l,
				ddp_last_error());
			goto out;
		}
	}
	if (check(ddp_grad_sync_start(gs), "start"))
		goto out;
	for (m = M_COMPUTE; m <= M_ON; m++) {
		for (s = 0; s < warm + steps; s++) {
			double t0 = now_s(), dt;

			if (step(&n, gs, (enum mode)m))
				goto out;
			dt = now_s() - t0;
			if (check(ddp_allreduce(comm, &dt, &dt, 1, DDP_FLOAT64,
						DDP_MAX),
				  "allreduce"))
				goto out;
			if (s >= warm)
				t[s - warm] = dt;
		}
		if (m == M_ON)
			early = ddp_grad_sync_overlapped(gs);
		qsort(t, (size_t)steps, sizeof(t[0]), cmp_double);
		med[m] = steps % 2 ? t[steps / 2]
				   : (t[steps / 2 - 1] + t[steps / 2]) / 2;
	}
	if (ddp_comm_rank(comm) == 0) {
		printf("layers,bytes_per_layer,world,compute_ms,comm_ms,off_ms,"
		       "on_ms,hidden,early_buckets\n");
		printf("%d,%zu,%d,%.3f,%.3f,%.3f,%.3f,%.4f,%d\n", n.layers,
		       n.count * 4, ddp_comm_size(comm), med[M_COMPUTE] * 1e3,
		       med[M_COMM] * 1e3, med[M_OFF] * 1e3, med[M_ON] * 1e3,
		       med[M_OFF] > med[M_COMPUTE]
			       ? (med[M_OFF] - med[M_ON]) /
					 (med[M_OFF] - med[M_COMPUTE])
			       : 0.0,
		       early);
	}
	rc = 0;
	goto out;
usage:
	fprintf(stderr, "usage: overlap [-l LAYERS] [-b BYTES_PER_LAYER] "
			"[-p PASSES] [-s STEPS] [-S BLOCKS]\n");
	return 2;
out:
	ddp_grad_sync_destroy(gs);
	ddp_comm_destroy(comm);
	for (l = 0; l < n.layers; l++) {
		free(n.param[l]);
		free(n.grad[l]);
	}
	return rc;
}
