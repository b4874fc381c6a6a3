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
 *   overlap [-l LAYERS] [-b BYTES_PER_LAYER] [-p PASSES] [-s STEPS]
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
	long v, steps = 10, warm = 2;
	int c, l, m, s, rc = 1, early = 0;

	while ((c = getopt(argc, argv, "l:b:p:s:")) != -1) {
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
	if (check(ddp_grad_sync_create(comm, &go, &gs), "create"))
		goto out;
	for (l = 0; l < n.layers; l++) {
		n.param[l] = calloc(n.count, sizeof(float));
		n.grad[l] = calloc(n.count, sizeof(float));
		if (!n.param[l] || !n.grad[l] ||
		    ddp_grad_sync_add(gs, n.param[l], n.grad[l], n.count,
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
			"[-p PASSES] [-s STEPS]\n");
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
