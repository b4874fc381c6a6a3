/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The gradient sync (DDP reducer) over TCP with 3 ranks: parameter
 * broadcast, bucket layout, overlap with a simulated backward pass,
 * averaged gradients, no-sync accumulation, and misuse errors; then the
 * same training steps with every other gradient a view into its bucket
 * (registered with grad NULL), one bucket mixing views and copies.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>

#include "tap.h"
#include "test-worker-util.h"

float wk_half_to_float(uint16_t h);
uint16_t wk_float_to_half(float f);

#define NP 5
static const size_t counts[NP] = {100, 300000, 5, 70000, 2000};
static const enum ddp_dtype types[NP] = {DDP_FLOAT32, DDP_FLOAT32, DDP_FLOAT64,
					 DDP_FLOAT16, DDP_FLOAT32};

struct net {
	void *param[NP];
	void *grad[NP];
	int rank;
};

static double
get(void *b, int k, size_t i)
{
	switch (types[k]) {
	case DDP_FLOAT64:
		return ((double *)b)[i];
	case DDP_FLOAT16:
		return wk_half_to_float(((uint16_t *)b)[i]);
	default:
		return ((float *)b)[i];
	}
}

static void
put(void *b, int k, size_t i, double v)
{
	switch (types[k]) {
	case DDP_FLOAT64:
		((double *)b)[i] = v;
		break;
	case DDP_FLOAT16:
		((uint16_t *)b)[i] = wk_float_to_half((float)v);
		break;
	default:
		((float *)b)[i] = (float)v;
		break;
	}
}

static double
gradval(int rank, int k, size_t i)
{
	return (rank + 1) * 0.5 + (double)(i % 7) * 0.25 + k;
}

struct bw {
	struct ddp_grad_sync *gs;
	struct net *n;
	int accumulate;
	int skip; /* index not to mark ready, or -1 */
	enum ddp_status st;
};

/* A backward pass: gradients appear last layer first, with compute
 * between them, and are marked ready as they appear. */
static void *
backward(void *arg)
{
	struct bw *b = arg;
	size_t i;
	int k;

	b->st = DDP_OK;
	for (k = NP - 1; k >= 0 && !b->st; k--) {
		for (i = 0; i < counts[k]; i++)
			put(b->n->grad[k], k, i,
			    (b->accumulate ? get(b->n->grad[k], k, i) : 0) +
				    gradval(b->n->rank, k, i));
		usleep(20000);
		if (k != b->skip)
			b->st = ddp_grad_sync_ready(b->gs, k);
	}
	return NULL;
}

static int
check_avg(struct net *n, int size, double mult, FILE *out, const char *what)
{
	double want, tol;
	size_t i;
	int k, r, bad = 0;

	for (k = 0; k < NP; k++)
		for (i = 0; i < counts[k]; i++) {
			want = 0;
			for (r = 0; r < size; r++)
				want += mult * gradval(r, k, i);
			want /= size;
			tol = types[k] == DDP_FLOAT16 ? 1e-2 * fabs(want)
						      : 1e-6 * fabs(want);
			if (fabs(get(n->grad[k], k, i) - want) > tol)
				bad++;
		}
	fprintf(out, "%s %d\n", what, bad == 0);
	return bad;
}

static int
rank_main(int rank, int size, int port, FILE *out, void *arg)
{
	const int views = arg != NULL;
	struct ddp_grad_sync_opts o = {.first_bucket_bytes = 4096,
				       .bucket_cap_bytes =
					       views ? 4 << 20 : 1 << 20};
	struct ddp_grad_sync *gs = NULL;
	void *own[NP];
	struct ddp_config cfg;
	struct ddp_comm *c = NULL;
	struct net n;
	struct bw b;
	pthread_t th;
	enum ddp_status st;
	size_t i;
	int k, bad = 0;

	n.rank = rank;
	tw_cfg(&cfg, rank, size, port, 30);
	if (ddp_comm_init(&cfg, &c) || ddp_grad_sync_create(c, &o, &gs)) {
		fprintf(out, "E %s\n", ddp_last_error());
		return 1;
	}
	for (k = 0; k < NP; k++) {
		n.param[k] = calloc(counts[k], 8);
		own[k] = views && k % 2 ? NULL : calloc(counts[k], 8);
		for (i = 0; i < counts[k]; i++)
			put(n.param[k], k, i, rank * 100 + (double)(i % 13));
		if (ddp_grad_sync_add(gs, n.param[k], own[k], counts[k],
				      types[k]) != k)
			return 1;
	}
	if (ddp_grad_sync_start(gs)) {
		fprintf(out, "E start %s\n", ddp_last_error());
		return 1;
	}
	for (k = 0; k < NP; k++) {
		n.grad[k] = ddp_grad_sync_grad(gs, k);
		if (!n.grad[k] || (own[k] && n.grad[k] != own[k]))
			bad++;
		for (i = 0; !own[k] && n.grad[k] && i < counts[k]; i++)
			bad += get(n.grad[k], k, i) != 0;
	}
	fprintf(out, "GRADS %d\n", bad == 0);
	bad = 0;
	for (k = 0; k < NP; k++)
		for (i = 0; i < counts[k]; i++)
			bad += get(n.param[k], k, i) != (double)(i % 13);
	fprintf(out, "PARAMS %d\n", bad == 0);
	fprintf(out, "BUCKETS %d:", ddp_grad_sync_num_buckets(gs));
	for (k = 0; k < ddp_grad_sync_num_buckets(gs); k++)
		fprintf(out, " %zu", ddp_grad_sync_bucket_bytes(gs, k));
	fprintf(out, "\n");

	/* Step 1: synchronised. */
	b.gs = gs;
	b.n = &n;
	b.accumulate = 0;
	b.skip = -1;
	pthread_create(&th, NULL, backward, &b);
	pthread_join(th, NULL);
	st = b.st ? b.st : ddp_grad_sync_wait(gs);
	if (st) {
		fprintf(out, "E step1 %s\n", ddp_last_error());
		return 1;
	}
	check_avg(&n, size, 1, out, "STEP1");
	fprintf(out, "OVERLAP %d\n", ddp_grad_sync_overlapped(gs));

	/* Steps 2-3: accumulate locally, then synchronise the sum. */
	ddp_grad_sync_set_no_sync(gs, 1);
	b.accumulate = 0;
	backward(&b);
	st = b.st ? b.st : ddp_grad_sync_wait(gs);
	ddp_grad_sync_set_no_sync(gs, 0);
	b.accumulate = 1;
	backward(&b);
	if (!st)
		st = b.st ? b.st : ddp_grad_sync_wait(gs);
	if (st) {
		fprintf(out, "E nosync %s\n", ddp_last_error());
		return 1;
	}
	check_avg(&n, size, 2, out, "NOSYNC");

	/* Misuse: marking twice fails; the step still completes. */
	st = ddp_grad_sync_ready(gs, 4);
	if (!st)
		st = ddp_grad_sync_ready(gs, 4);
	fprintf(out, "TWICE %d\n", st == DDP_ERR_INVALID);
	for (k = 3, st = DDP_OK; k >= 0 && !st; k--)
		st = ddp_grad_sync_ready(gs, k);
	if (!st)
		st = ddp_grad_sync_wait(gs);
	fprintf(out, "AFTER %d\n", st == DDP_OK);
	/* A gradient never marked ready fails the wait at once. */
	b.accumulate = 0;
	b.skip = 2;
	backward(&b);
	st = ddp_grad_sync_wait(gs);
	fprintf(out, "MISSING %d %s\n", st == DDP_ERR_INVALID,
		ddp_last_error());
	ddp_grad_sync_destroy(gs);
	ddp_comm_destroy(c);
	for (k = 0; k < NP; k++) {
		free(n.param[k]);
		free(own[k]);
	}
	return 0;
}

static int
all_have(struct tw_rank *rk, int n, const char *s)
{
	int i;

	for (i = 0; i < n; i++)
		if (!strstr(rk[i].out, s))
			return 0;
	return 1;
}

int
main(void)
{
	struct tw_rank rk[3];
	char b0[256];
	const char *p;
	int i, same = 1, nb = 0, ov, views = 1, failed_before;

	signal(SIGPIPE, SIG_IGN);
	if (tw_run_job(3, rank_main, NULL, 120, rk) < 0)
		return tap_ok(0, "fork"), tap_done();
	tap_ok(all_have(rk, 3, "PARAMS 1"),
	       "parameters are broadcast from rank 0 at start");
	p = strstr(rk[0].out, "BUCKETS ");
	snprintf(b0, sizeof(b0), "%.*s", p ? (int)strcspn(p, "\n") : 0,
		 p ? p : "");
	for (i = 1; i < 3; i++)
		same &= strstr(rk[i].out, b0) != NULL;
	if (p)
		nb = (int)strtol(p + 8, NULL, 10);
	/* Reverse order with a 4 KiB first bucket and a 1 MiB cap:
	 * [p4 8000] [p3 fp16 140000] [p2 fp64 40] [p1 1200000] [p0 400]. */
	tap_ok(same && nb == 5 && strstr(b0, "5: 8000 140000 40 1200000 400"),
	       "bucket layout identical on all ranks, reverse order, split "
	       "by type and cap (%s)",
	       b0);
	tap_ok(all_have(rk, 3, "STEP1 1"),
	       "one wait returns gradients averaged over all ranks (fp32, "
	       "fp64, fp16)");
	p = strstr(rk[0].out, "OVERLAP ");
	ov = p ? (int)strtol(p + 8, NULL, 10) : 0;
	tap_ok(ov >= 4,
	       "%d of 5 bucket allreduces started during backward, "
	       "before the wait",
	       ov);
	tap_ok(all_have(rk, 3, "NOSYNC 1"),
	       "no-sync accumulates locally; the next step averages the sum");
	tap_ok(all_have(rk, 3, "TWICE 1") && all_have(rk, 3, "AFTER 1"),
	       "marking a gradient twice fails; the step still completes");
	tap_ok(all_have(rk, 3, "MISSING 1 ddp_grad_sync_wait: gradient 2"),
	       "a gradient never marked ready fails the wait at once, "
	       "naming it");
	for (i = 0; i < 3; i++)
		tap_ok(tw_exit(&rk[i]) == 0, "rank %d exits cleanly", i);
	if (tap_failed)
		for (i = 0; i < 3; i++)
			tw_diag_output(i, &rk[i]);
	tw_free_job(3, rk);

	/* Gradient views: p1 and p3 live in their buckets; [p1 p0] is one
	 * bucket with a view and a copied gradient. */
	failed_before = tap_failed;
	if (tw_run_job(3, rank_main, &views, 120, rk) < 0)
		return tap_ok(0, "fork"), tap_done();
	tap_ok(all_have(rk, 3, "GRADS 1"),
	       "gradient views are zero at start; ddp_grad_sync_grad returns "
	       "the program's own buffers unchanged");
	tap_ok(all_have(rk, 3, "BUCKETS 4: 8000 140000 40 1200400"),
	       "views and copied gradients share a bucket");
	tap_ok(all_have(rk, 3, "STEP1 1") && all_have(rk, 3, "NOSYNC 1") &&
		       all_have(rk, 3, "AFTER 1"),
	       "with gradient views: averaged, no-sync accumulation, and "
	       "later steps");
	for (i = 0; i < 3; i++)
		tap_ok(tw_exit(&rk[i]) == 0, "rank %d exits cleanly (views)",
		       i);
	if (tap_failed > failed_before)
		for (i = 0; i < 3; i++)
			tw_diag_output(i, &rk[i]);
	tw_free_job(3, rk);
	return tap_done();
}
