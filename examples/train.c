/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Data-parallel training with libddp: an MLP classifier on CIFAR-10 binary
 * data (or generated data in that format), SGD, bucketed gradient sync.
 *
 *   srun --nodes=2 --gpus-per-node=4 --ddp train --synthetic 2048
 *   train --data DIR [--epochs N] [--batch B] [--lr X] [--hidden H]
 *         [--checkpoint DIR [--checkpoint-every E]]
 *
 * On a node with GPUs (the NCCL backend on every rank, and train-gpu.so
 * beside this program), the model lives on the rank's GPU: cuBLAS and a
 * few kernels compute, the gradients are views into libddp's device
 * buckets, and each layer's bucket is reduced while the next layer's
 * backward runs. Elsewhere the same loop runs on the CPU over TCP.
 * DDP_BACKEND=tcp forces the CPU.
 *
 * On GPUs every rank first names its backend and device; on the CPU rank
 * 0 says once that every rank trains there, and why (DDP_DEBUG=1 adds each
 * rank's reason on stderr). Rank 0 logs the loss per epoch; every rank prints
 * "rank R params_crc=<hex>" at the end, equal on every rank. A communication
 * error ends the program with status 1, so srun ends the step. Built against
 * the installed ddp.h only.
 *
 * With --checkpoint DIR, rank 0 writes DIR/train.ckpt every E epochs
 * (default 1) and after the last, atomically (ddp_write_atomic), and every
 * rank resumes from it when it is there: a run killed at any moment and
 * started again with the same options ends with the parameters of an
 * uninterrupted run, bit for bit. DIR is a directory every node sees, such
 * as the job's $DDP_SHARED_DIR.
 *
 * An agreed stop (libddp(3), STOPPING: the time limit near, preemption, a
 * signal to any rank): every rank stops after the same step and prints
 * "train: rank R stopped after step G (WHY)", G the steps trained since
 * the training began, WHY its reason (ddp_should_stop_why); with
 * --checkpoint rank 0 saves that step ("train: checkpoint at step G in
 * DIR/train.ckpt"), and the run started again goes on with the next
 * batch of that epoch ("resuming from ...: S of M epochs done, step G"),
 * ending bit-identical to an uninterrupted run. The ranks exit with
 * DDP_EXIT_STOPPED (75).
 *
 * With --times (or DDP_TRAIN_TIMES=1) every rank also prints one line per
 * phase of its start, "train: time rank R PHASE SECONDS", SECONDS being
 * CLOCK_REALTIME so that lines of several nodes and a fault injector's
 * clock compare: start (main entered), rendezvous (ddp_comm_init
 * returned), checkpoint (loaded, with --checkpoint) and first-allreduce
 * (the first training step's gradients reduced). bench/recovery reads them.
 *
 * With DDP_ON_FAILURE=shrink (libddp(3)) a lost rank does not end the
 * training: the survivors finish the step among themselves, each says
 * "train: rank R goes on in a world of N ranks", trains on the rest of its
 * shard and shards the next epochs for the new world.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <ddp.h>

#include "train_ckpt.h"
#include "train_compute.h"

#define IMG TRAIN_IMG
#define REC TRAIN_REC
#define CLASSES TRAIN_CLASSES
#define MAX_FILES 5

struct data {
	uint8_t *rec; /* n records of REC bytes */
	size_t n;
};

struct opts {
	const char *data;
	long synthetic;
	long epochs;
	long batch;
	long hidden;
	double lr;
	int no_overlap;
	const char *ckpt_dir; /* NULL: no checkpoint */
	long ckpt_every;
	int times; /* print the phase lines */
};

static void
usage(FILE *f)
{
	fprintf(f, "usage: train (--data DIR | --synthetic N) [--epochs N] "
		   "[--batch B] [--lr X] [--hidden H] [--no-overlap]\n"
		   "             [--checkpoint DIR [--checkpoint-every E]] "
		   "[--times]\n"
		   "  --times  each rank prints \"train: time rank R PHASE "
		   "SECONDS\" (CLOCK_REALTIME)\n"
		   "           for start, rendezvous, checkpoint and "
		   "first-allreduce (also DDP_TRAIN_TIMES=1)\n");
}

/* snprintf's result: 1 when the whole text fitted. */
static int
fmt_ok(int n, size_t size)
{
	return n >= 0 && (size_t)n < size;
}

static int
parse_long(const char *s, long min, long max, long *out)
{
	char *end = NULL;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

/* A small deterministic generator (splitmix64). */
static uint64_t
rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double
urand(uint64_t *s)
{
	return (double)(rnd(s) >> 11) * 0x1p-53;
}

/*
 * n learnable records, made in memory (nothing is left behind on the
 * node): each class has a smooth prototype image; samples add noise. The
 * same on every rank.
 */
static int
make_synthetic(long n, struct data *d)
{
	uint64_t s = 12345;
	uint8_t *rec;
	long i;
	int p, c;
	double v;

	d->rec = malloc((size_t)n * REC);
	if (!d->rec) {
		fprintf(stderr, "train: no memory for %ld samples\n", n);
		return -1;
	}
	d->n = (size_t)n;
	for (i = 0; i < n; i++) {
		rec = d->rec + (size_t)i * REC;
		c = (int)(rnd(&s) % CLASSES);
		rec[0] = (uint8_t)c;
		for (p = 0; p < IMG; p++) {
			v = 128 + 70 * sin(c * 0.9 + p * 0.011 * (c + 1)) +
			    (urand(&s) - 0.5) * 90;
			rec[1 + p] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
		}
	}
	return 0;
}

/* Reads DIR/data_batch_{1..5}.bin (CIFAR-10 binary: label + 3072 bytes). */
static int
load_data(const char *dir, struct data *d)
{
	char path[4096];
	struct stat sb;
	uint8_t *nr;
	FILE *f;
	size_t add;
	int k;

	memset(d, 0, sizeof(*d));
	for (k = 1; k <= MAX_FILES; k++) {
		if (!fmt_ok(snprintf(path, sizeof(path), "%s/data_batch_%d.bin",
				     dir, k),
			    sizeof(path)) ||
		    stat(path, &sb) < 0)
			continue;
		if (sb.st_size % REC != 0) {
			fprintf(stderr,
				"train: %s: %lld bytes is not a multiple of "
				"%d (not CIFAR-10 binary)\n",
				path, (long long)sb.st_size, REC);
			return -1;
		}
		add = (size_t)sb.st_size / REC;
		nr = realloc(d->rec, (d->n + add) * REC);
		f = fopen(path, "rb");
		if (!nr || !f || fread(nr + d->n * REC, REC, add, f) != add) {
			fprintf(stderr, "train: cannot read %s\n", path);
			if (f)
				fclose(f);
			d->rec = nr ? nr : d->rec;
			return -1;
		}
		fclose(f);
		d->rec = nr;
		d->n += add;
	}
	if (!d->n) {
		fprintf(stderr, "train: no data_batch_N.bin in %s\n", dir);
		return -1;
	}
	for (add = 0; add < d->n; add++) {
		if (d->rec[add * REC] >= CLASSES) {
			fprintf(stderr, "train: record %zu has label %u\n", add,
				d->rec[add * REC]);
			return -1;
		}
	}
	return 0;
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- the CPU compute ---- */

struct train_ctx {
	int hidden;
	size_t max_batch, bs;
	const uint8_t *rec;
	size_t *order;
	size_t n_order, first;
	float *x, *h, *dl; /* the batch: inputs, activations, dloss */
	char err[256];
};

static void
c_destroy(struct train_ctx *t)
{
	if (!t)
		return;
	free(t->order);
	free(t->x);
	free(t->h);
	free(t->dl);
	free(t);
}

static const char *
c_error(const struct train_ctx *t)
{
	return t->err;
}

static struct train_ctx *
c_create(int hidden, size_t max_batch, const uint8_t *records, size_t n,
	 char *err, size_t errlen)
{
	struct train_ctx *t = calloc(1, sizeof(*t));

	if (t) {
		t->hidden = hidden;
		t->max_batch = max_batch;
		t->rec = records; /* the caller keeps them */
		t->order = malloc(n * sizeof(*t->order));
		t->x = malloc(max_batch * IMG * sizeof(float));
		t->h = malloc(max_batch * (size_t)hidden * sizeof(float));
		t->dl = malloc(max_batch * CLASSES * sizeof(float));
	}
	if (!t || !t->order || !t->x || !t->h || !t->dl) {
		(void)fmt_ok(snprintf(err, errlen, "out of memory"), errlen);
		c_destroy(t);
		return NULL;
	}
	return t;
}

static int
c_set_order(struct train_ctx *t, const size_t *idx, size_t n)
{
	memcpy(t->order, idx, n * sizeof(*idx));
	t->n_order = n;
	return 0;
}

static int
c_forward(struct train_ctx *t, size_t first, size_t bs, const float *w1,
	  const float *b1, const float *w2, const float *b2, double *stats)
{
	int H = t->hidden, c, j, best;
	double z[CLASSES], mx, sum;
	const uint8_t *r;
	size_t b, p;

	if (bs > t->max_batch || first + bs > t->n_order) {
		(void)fmt_ok(snprintf(t->err, sizeof(t->err),
				      "batch outside the order"),
			     sizeof(t->err));
		return -1;
	}
	t->bs = bs;
	t->first = first;
	for (b = 0; b < bs; b++) {
		float *x = t->x + b * IMG, *h = t->h + b * (size_t)H;

		r = t->rec + t->order[first + b] * REC;
		for (p = 0; p < IMG; p++)
			x[p] = r[1 + p] / 255.0f - 0.5f;
		for (j = 0; j < H; j++) {
			float a = b1[j];

			for (p = 0; p < IMG; p++)
				a += w1[(size_t)j * IMG + p] * x[p];
			h[j] = a > 0 ? a : 0;
		}
		mx = -1e30;
		for (c = 0; c < CLASSES; c++) {
			z[c] = b2[c];
			for (j = 0; j < H; j++)
				z[c] += w2[c * H + j] * h[j];
			mx = z[c] > mx ? z[c] : mx;
		}
		sum = 0;
		best = 0;
		for (c = 0; c < CLASSES; c++) {
			sum += exp(z[c] - mx);
			best = z[c] > z[best] ? c : best;
		}
		stats[0] += -(z[r[0]] - mx - log(sum));
		stats[1] += best == r[0];
		stats[2] += 1;
		for (c = 0; c < CLASSES; c++)
			t->dl[b * CLASSES + c] =
				(float)((exp(z[c] - mx) / sum -
					 (c == r[0] ? 1.0 : 0.0)) /
					(double)bs);
	}
	return 0;
}

static int
c_backward2(struct train_ctx *t, float *gw2, float *gb2)
{
	int H = t->hidden, c, j;
	size_t b;

	memset(gw2, 0, (size_t)H * CLASSES * sizeof(float));
	memset(gb2, 0, CLASSES * sizeof(float));
	for (b = 0; b < t->bs; b++)
		for (c = 0; c < CLASSES; c++) {
			float d = t->dl[b * CLASSES + c];

			gb2[c] += d;
			for (j = 0; j < H; j++)
				gw2[c * H + j] += d * t->h[b * H + j];
		}
	return 0;
}

static int
c_backward1(struct train_ctx *t, const float *w2, float *gw1, float *gb1)
{
	int H = t->hidden, c, j;
	float *dh = malloc((size_t)H * sizeof(float));
	size_t b, p;

	if (!dh) {
		(void)fmt_ok(snprintf(t->err, sizeof(t->err), "out of memory"),
			     sizeof(t->err));
		return -1;
	}
	memset(gw1, 0, (size_t)H * IMG * sizeof(float));
	memset(gb1, 0, (size_t)H * sizeof(float));
	for (b = 0; b < t->bs; b++) {
		const float *x = t->x + b * IMG, *h = t->h + b * (size_t)H;

		for (j = 0; j < H; j++) {
			dh[j] = 0;
			if (h[j] <= 0)
				continue;
			for (c = 0; c < CLASSES; c++)
				dh[j] += w2[c * H + j] * t->dl[b * CLASSES + c];
		}
		for (j = 0; j < H; j++) {
			if (dh[j] == 0)
				continue;
			gb1[j] += dh[j];
			for (p = 0; p < IMG; p++)
				gw1[(size_t)j * IMG + p] += dh[j] * x[p];
		}
	}
	free(dh);
	return 0;
}

static int
c_sgd(struct train_ctx *t, float *p, const float *g, size_t n, float lr)
{
	size_t i;

	(void)t;
	for (i = 0; i < n; i++)
		p[i] -= lr * g[i];
	return 0;
}

static const struct train_compute cpu_compute = {
	"cpu",	   c_create,	c_destroy,   c_error, c_set_order,
	c_forward, c_backward2, c_backward1, c_sgd,
};

/*
 * The GPU compute from train-gpu.so beside this program, or NULL with the
 * reason in why (no such file, no driver, no GPU); *built is 0 when there
 * is no such module at all (a build without CUDA).
 */
static const struct train_compute *
load_gpu(int device, char *desc, size_t desclen, char *why, size_t whylen,
	 int *built)
{
	char path[PATH_MAX], *slash;
	train_gpu_entry_fn *entry = NULL;
	const struct train_compute *gpu;
	const char *env = getenv("TRAIN_GPU_MODULE");
	ssize_t n;
	void *h;

	n = readlink("/proc/self/exe", path, sizeof(path) - 1);
	path[n > 0 ? n : 0] = '\0';
	slash = strrchr(path, '/');
	if (env && *env) {
		if (!fmt_ok(snprintf(path, sizeof(path), "%s", env),
			    sizeof(path)))
			path[0] = '\0';
	} else if (!slash ||
		   !fmt_ok(snprintf(slash + 1,
				    sizeof(path) - (size_t)(slash + 1 - path),
				    "train-gpu.so"),
			   sizeof(path) - (size_t)(slash + 1 - path))) {
		path[0] = '\0';
	}
	*built = path[0] && access(path, F_OK) == 0;
	h = *built ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
	if (!h) {
		(void)fmt_ok(snprintf(why, whylen, "%s: %s",
				      path[0] ? path : "train-gpu.so",
				      *built ? dlerror() : strerror(ENOENT)),
			     whylen);
		return NULL;
	}
	*(void **)&entry = dlsym(h, TRAIN_GPU_ENTRY);
	gpu = entry ? entry(device, desc, desclen, why, whylen) : NULL;
	if (!entry)
		(void)fmt_ok(snprintf(why, whylen, "%s lacks %s", path,
				      TRAIN_GPU_ENTRY),
			     whylen);
	/* Kept loaded while in use: the program ends with it. */
	if (!gpu)
		dlclose(h);
	return gpu;
}

/* Parameters where the compute runs, initialised on the host. */
static int
model_init(struct model *m, struct ddp_comm *comm, int hidden, uint64_t seed)
{
	size_t n1 = (size_t)IMG * hidden, n2 = (size_t)hidden * CLASSES, i;
	double sc1 = sqrt(2.0 / IMG), sc2 = sqrt(2.0 / hidden);
	float *h1 = calloc(n1, sizeof(float)), *h2 = calloc(n2, sizeof(float));
	float *zero = calloc((size_t)hidden + CLASSES, sizeof(float));
	int rc = -1;

	m->hidden = hidden;
	m->w1 = ddp_mem_alloc(comm, n1 * sizeof(float));
	m->b1 = ddp_mem_alloc(comm, (size_t)hidden * sizeof(float));
	m->w2 = ddp_mem_alloc(comm, n2 * sizeof(float));
	m->b2 = ddp_mem_alloc(comm, CLASSES * sizeof(float));
	if (!h1 || !h2 || !zero || !m->w1 || !m->b1 || !m->w2 || !m->b2)
		goto out;
	/* Each rank starts differently on purpose: ddp_grad_sync_start
	 * broadcasts rank 0's parameters. */
	for (i = 0; i < n1; i++)
		h1[i] = (float)((urand(&seed) * 2 - 1) * sc1);
	for (i = 0; i < n2; i++)
		h2[i] = (float)((urand(&seed) * 2 - 1) * sc2);
	if (ddp_mem_copy(comm, m->w1, h1, n1 * sizeof(float),
			 DDP_COPY_TO_BUFFER) ||
	    ddp_mem_copy(comm, m->w2, h2, n2 * sizeof(float),
			 DDP_COPY_TO_BUFFER) ||
	    ddp_mem_copy(comm, m->b1, zero, (size_t)hidden * sizeof(float),
			 DDP_COPY_TO_BUFFER) ||
	    ddp_mem_copy(comm, m->b2, zero, CLASSES * sizeof(float),
			 DDP_COPY_TO_BUFFER))
		goto out;
	rc = 0;
out:
	free(h1);
	free(h2);
	free(zero);
	return rc;
}

static void
model_free(struct model *m, struct ddp_comm *comm)
{
	ddp_mem_free(comm, m->w1);
	ddp_mem_free(comm, m->b1);
	ddp_mem_free(comm, m->w2);
	ddp_mem_free(comm, m->b2);
}

/*
 * One step on a batch (returns 0, 1 when the world shrank during it, -1
 * for a communication error, -2 for a compute error): forward, backward
 * of layer 2 (its gradients are marked ready and their bucket starts
 * reducing while layer 1's backward runs), then layer 1. With overlap
 * off, every gradient is marked ready only after the whole backward pass,
 * as a program without bucketed overlap would synchronise.
 */
static int
step(const struct train_compute *cp, struct train_ctx *t, struct model *m,
     struct ddp_grad_sync *gs, size_t first, size_t bs, double lr, int overlap,
     double *stats)
{
	size_t n1 = (size_t)IMG * m->hidden, n2 = (size_t)m->hidden * CLASSES;
	enum ddp_status st;

	if (cp->forward(t, first, bs, m->w1, m->b1, m->w2, m->b2, stats) ||
	    cp->backward2(t, m->gw2, m->gb2))
		goto compute_error;
	if (overlap &&
	    (ddp_grad_sync_ready(gs, 3) || ddp_grad_sync_ready(gs, 2)))
		return -1;
	if (cp->backward1(t, m->w2, m->gw1, m->gb1))
		goto compute_error;
	if (!overlap &&
	    (ddp_grad_sync_ready(gs, 3) || ddp_grad_sync_ready(gs, 2)))
		return -1;
	if (ddp_grad_sync_ready(gs, 1) || ddp_grad_sync_ready(gs, 0))
		return -1;
	/* DDP_SHRUNK (DDP_ON_FAILURE=shrink): the survivors reduced the
	 * step again among themselves; the step goes on. */
	st = ddp_grad_sync_wait(gs);
	if (st != DDP_OK && st != DDP_SHRUNK)
		return -1;
	if (cp->sgd(t, m->w1, m->gw1, n1, (float)lr) ||
	    cp->sgd(t, m->b1, m->gb1, (size_t)m->hidden, (float)lr) ||
	    cp->sgd(t, m->w2, m->gw2, n2, (float)lr) ||
	    cp->sgd(t, m->b2, m->gb2, CLASSES, (float)lr))
		goto compute_error;
	return st == DDP_SHRUNK;
compute_error:
	fprintf(stderr, "train: %s compute failed: %s\n", cp->name,
		cp->error(t));
	return -2;
}

/*
 * DistributedSampler: epoch e's shuffle (the same on every rank), padded
 * to a multiple of the world size, every world-th index from rank's on,
 * into mine; order has room for n + world - 1 indexes. Returns how many.
 */
static size_t
shard_epoch(long e, size_t n, int world, int rank, size_t *order, size_t *mine)
{
	size_t n_mine = (n + (size_t)world - 1) / (size_t)world, k, j, tmp;
	uint64_t s = 777 + (uint64_t)e;

	for (k = 0; k < n; k++)
		order[k] = k;
	for (k = n - 1; k > 0; k--) {
		j = (size_t)(rnd(&s) % (k + 1));
		tmp = order[k];
		order[k] = order[j];
		order[j] = tmp;
	}
	for (k = n; k < n_mine * (size_t)world; k++)
		order[k] = order[k - n];
	for (k = 0; k < n_mine; k++)
		mine[k] = order[k * (size_t)world + (size_t)rank];
	return n_mine;
}

/* CRC-32 of the parameters, read back to the host. */
static int
params_crc(struct model *m, struct ddp_comm *comm, uint32_t *out)
{
	size_t n[4] = {(size_t)IMG * m->hidden, (size_t)m->hidden,
		       (size_t)m->hidden * CLASSES, CLASSES};
	const float *p[4] = {m->w1, m->b1, m->w2, m->b2};
	float *h = malloc(n[0] * sizeof(float));
	uint32_t crc = 0xffffffffu;
	int i, rc = -1;

	for (i = 0; h && i < 4; i++) {
		if (ddp_mem_copy(comm, h, p[i], n[i] * sizeof(float),
				 DDP_COPY_TO_HOST))
			goto out;
		crc = crc32_update(crc, h, n[i] * sizeof(float));
	}
	*out = crc ^ 0xffffffffu;
	rc = h ? 0 : -1;
out:
	free(h);
	return rc;
}

static void
opts_default(struct opts *o)
{
	o->data = NULL;
	o->synthetic = 0;
	o->epochs = 3;
	o->batch = 32;
	o->hidden = 64;
	o->lr = 0.05;
	o->no_overlap = 0;
	o->ckpt_dir = NULL;
	o->ckpt_every = 0;
	o->times = 0;
}

static int
parse_args(int argc, char **argv, struct opts *o)
{
	char *end = NULL;
	int i;

	opts_default(o);
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			exit(0);
		}
		if (strcmp(a, "--no-overlap") == 0) {
			o->no_overlap = 1;
			continue;
		}
		if (strcmp(a, "--times") == 0) {
			o->times = 1;
			continue;
		}
		if (!v) {
			fprintf(stderr, "train: %s needs a value\n", a);
			return -1;
		}
		i++;
		if (strcmp(a, "--data") == 0) {
			o->data = v;
		} else if (strcmp(a, "--synthetic") == 0) {
			if (parse_long(v, 1, 10000000, &o->synthetic) < 0)
				goto bad;
		} else if (strcmp(a, "--epochs") == 0) {
			if (parse_long(v, 1, 100000, &o->epochs) < 0)
				goto bad;
		} else if (strcmp(a, "--batch") == 0) {
			if (parse_long(v, 1, 65536, &o->batch) < 0)
				goto bad;
		} else if (strcmp(a, "--hidden") == 0) {
			if (parse_long(v, 1, 4096, &o->hidden) < 0)
				goto bad;
		} else if (strcmp(a, "--checkpoint") == 0) {
			if (!*v)
				goto bad;
			o->ckpt_dir = v;
		} else if (strcmp(a, "--checkpoint-every") == 0) {
			if (parse_long(v, 1, 100000, &o->ckpt_every) < 0)
				goto bad;
		} else if (strcmp(a, "--lr") == 0) {
			errno = 0;
			o->lr = strtod(v, &end);
			if (errno || end == v || *end || !(o->lr > 0) ||
			    o->lr > 100)
				goto bad;
		} else {
			fprintf(stderr, "train: unknown option %s\n", a);
			usage(stderr);
			return -1;
		}
		continue;
	bad:
		fprintf(stderr, "train: %s: invalid value '%s'\n", a, v);
		return -1;
	}
	if (!o->data == !o->synthetic) {
		fprintf(stderr, "train: give either --data DIR or --synthetic "
				"N (made in memory)\n");
		usage(stderr);
		return -1;
	}
	if (o->ckpt_every && !o->ckpt_dir) {
		fprintf(stderr, "train: --checkpoint-every needs --checkpoint "
				"DIR\n");
		return -1;
	}
	if (!o->ckpt_every)
		o->ckpt_every = 1;
	if (getenv("DDP_TRAIN_TIMES") &&
	    strcmp(getenv("DDP_TRAIN_TIMES"), "1") == 0)
		o->times = 1;
	return 0;
}

/* The wall clock, not now_s's: phase lines are compared across nodes. */
static double
wall_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One phase line of --times; flushed, since a rank may be killed next. */
static void
say_time(const struct opts *o, int rank, const char *phase, double t)
{
	if (!o->times)
		return;
	printf("train: time rank %d %s %.6f\n", rank, phase, t);
	fflush(stdout);
}

static int
debug_on(void)
{
	const char *e = getenv("DDP_DEBUG");

	return e && *e && strcmp(e, "0") != 0;
}

/*
 * Says what the ranks train on. On GPUs every rank names its own device.
 * On the CPU, which is normal on a node without GPUs, rank 0 says so once
 * in plain words; each rank's reason (the CUDA error, a module that did
 * not load) goes to stderr with DDP_DEBUG=1.
 */
static void
say_device(struct ddp_comm *comm, const struct train_compute *cp,
	   const struct train_compute *gpu, int gpu_built, const char *desc,
	   const char *why)
{
	int rank = ddp_comm_rank(comm), world = ddp_comm_size(comm);
	const char *host = ddp_comm_host(comm, rank), *reason, *detail = why;
	char no_gpu[128];
	int reasons_differ = 1;

	if (cp == gpu) {
		printf("train: rank %d on %s: backend nccl, %s\n", rank, host,
		       desc);
		return;
	}
	if (gpu) {
		reason = "not every rank can use its GPU";
		detail = "the NCCL backend is not usable on every rank";
	} else if (!why[0]) {
		reason = detail = "DDP_BACKEND=tcp";
		reasons_differ = 0;
	} else if (!gpu_built) {
		reason = "this train was built without GPU support";
	} else {
		reason = fmt_ok(snprintf(no_gpu, sizeof(no_gpu),
					 "no usable GPU on %s", host),
				sizeof(no_gpu))
				 ? no_gpu
				 : "no usable GPU";
	}
	if (debug_on())
		fprintf(stderr, "train: rank %d on %s: backend tcp, CPU (%s)\n",
			rank, host, detail);
	if (rank == 0)
		printf("train: %d rank%s on the CPU over TCP: %s%s\n", world,
		       world == 1 ? "" : "s", reason,
		       reasons_differ && !debug_on()
			       ? " (DDP_DEBUG=1 gives each rank's reason)"
			       : "");
}

/*
 * The ranks agreed to stop after this step (at: where it is): the
 * epoch's sums so far over every rank, rank 0's checkpoint of the step,
 * the lines that say so. Returns the exit status: DDP_EXIT_STOPPED, or 1
 * when the checkpoint or the sums failed (a stop that saved nothing is
 * no clean stop).
 */
static int
stop(const struct opts *o, struct ddp_comm *comm, struct ddp_grad_sync *gs,
     struct model *m, struct ckpt_info *at, double *dstats, size_t samples)
{
	int rank = ddp_comm_rank(comm);
	const char *why = ddp_should_stop_why(gs);

	printf("train: rank %d stopped after step %ld (%s)\n", rank, at->gstep,
	       why ? why : "?");
	fflush(stdout);
	if (!o->ckpt_dir)
		return DDP_EXIT_STOPPED;
	if (ddp_allreduce(comm, dstats, dstats, 3, DDP_FLOAT64, DDP_SUM) ||
	    ddp_mem_copy(comm, at->stats, dstats, sizeof(at->stats),
			 DDP_COPY_TO_HOST)) {
		fprintf(stderr, "train: rank %d: communication failed: %s\n",
			rank, ddp_last_error());
		return 1;
	}
	if (rank != 0)
		return DDP_EXIT_STOPPED;
	if (ckpt_write(o->ckpt_dir, m, comm, at, samples, ddp_comm_size(comm)) <
	    0)
		return 1;
	printf("train: checkpoint at step %ld in %s/%s\n", at->gstep,
	       o->ckpt_dir, CKPT_NAME);
	fflush(stdout);
	return DDP_EXIT_STOPPED;
}

int
main(int argc, char **argv)
{
	struct ddp_grad_sync_opts go = {0};
	const struct train_compute *cp = &cpu_compute, *gpu = NULL;
	struct ddp_grad_sync *gs = NULL;
	struct ddp_comm *comm = NULL;
	struct train_ctx *t = NULL;
	struct ddp_config cfg;
	struct model m;
	struct data d = {0};
	struct opts o;
	char desc[256] = "", why[512] = "";
	size_t *order = NULL, *mine = NULL, n_mine, k, bs;
	double stats[3], *dstats = NULL, *agree = NULL, t0, step_s = 0;
	double started = wall_s();
	long steps = 0, e, start = 0, skip = 0, gstep = 0, per_epoch;
	struct ckpt_info ck, at;
	uint32_t crc;
	int rc = 1, sr, rank = 0, world, gpu_built = 0, restarts = 0, same;
	enum ddp_status st;

	memset(&m, 0, sizeof(m));
	memset(&ck, 0, sizeof(ck));
	if (parse_args(argc, argv, &o) < 0)
		return 2;
	if (o.ckpt_dir && (restarts = ddp_restart_count()) < 0) {
		fprintf(stderr, "train: %s\n", ddp_last_error());
		return 1;
	}
	/* Said now, not when the first checkpoint fails an epoch later. */
	if (o.ckpt_dir && ckpt_dir_ok(o.ckpt_dir) < 0)
		return 1;
	st = ddp_config_from_env(&cfg);
	if (st) {
		fprintf(stderr, "train: %s\n", ddp_last_error());
		return 1;
	}
	/* The GPU compute needs the NCCL backend (device buffers) and the
	 * NCCL backend needs the GPU compute: a rank without it asks for TCP,
	 * and libddp's backend agreement then puts every rank on TCP. */
	if (cfg.backend != DDP_BACKEND_TCP)
		gpu = load_gpu(cfg.local_rank, desc, sizeof(desc), why,
			       sizeof(why), &gpu_built);
	if (!gpu && cfg.backend == DDP_BACKEND_NCCL) {
		fprintf(stderr,
			"train: DDP_BACKEND=nccl, but the GPU compute is not "
			"available: %s (unset DDP_BACKEND to train on the "
			"CPU)\n",
			why);
		return 1;
	}
	if (!gpu)
		cfg.backend = DDP_BACKEND_TCP;
	st = ddp_comm_init(&cfg, &comm);
	if (st) {
		fprintf(stderr, "train: ddp init failed (%s): %s\n",
			ddp_strerror(st), ddp_last_error());
		return 1;
	}
	rank = ddp_comm_rank(comm);
	world = ddp_comm_size(comm);
	say_time(&o, rank, "start", started);
	say_time(&o, rank, "rendezvous", wall_s());
	if (ddp_comm_backend(comm) == DDP_BACKEND_NCCL)
		cp = gpu;
	say_device(comm, cp, gpu, gpu_built, desc, why);
	fflush(stdout);
	if (o.synthetic ? make_synthetic(o.synthetic, &d) < 0
			: load_data(o.data, &d) < 0)
		goto out;
	if (model_init(&m, comm, (int)o.hidden, 1000 + (uint64_t)rank) < 0) {
		fprintf(stderr, "train: cannot allocate the model\n");
		goto out;
	}
	t = cp->create((int)o.hidden, (size_t)o.batch, d.rec, d.n, why,
		       sizeof(why));
	dstats = ddp_mem_alloc(comm, sizeof(stats));
	if (!t || !dstats) {
		fprintf(stderr, "train: %s compute: %s\n", cp->name,
			t ? "no memory for the statistics" : why);
		goto out;
	}
	/* Before the gradient sync starts: it broadcasts rank 0's
	 * parameters, which are then the checkpoint's. */
	if (o.ckpt_dir) {
		agree = ddp_mem_alloc(comm, 4 * sizeof(double));
		if (!agree ||
		    ckpt_load(o.ckpt_dir, &m, comm, d.n, world, &ck) < 0)
			goto out;
		if (ckpt_agree(comm, agree, &ck, &same) < 0)
			goto comm_error;
		if (!same) {
			if (rank == 0)
				fprintf(stderr,
					"train: the ranks did not all find "
					"the same checkpoint in %s: it must "
					"be a directory that every node "
					"shares\n",
					o.ckpt_dir);
			goto out;
		}
		start = ck.epoch;
		skip = ck.batch;
		say_time(&o, rank, "checkpoint", wall_s());
		if (rank == 0 && restarts && !start && !skip)
			printf("train: restart %d, but no checkpoint in %s: "
			       "training from the start\n",
			       restarts, o.ckpt_dir);
	}
	/* Gradients are views into the reducer's buckets (grad NULL): the
	 * backward pass writes them where they are reduced, with no copy.
	 * On the CPU, one bucket per layer: layer 2's is reduced while layer
	 * 1's backward runs. On the GPU that backward takes microseconds
	 * while every NCCL collective costs its latency (milliseconds
	 * between ranks that share a host through NCCL's socket transport),
	 * so the whole model is one bucket, as PyTorch's DDP makes it. */
	go.first_bucket_bytes =
		((size_t)o.hidden + 1) * CLASSES * sizeof(float);
	if (cp == gpu)
		go.first_bucket_bytes = go.bucket_cap_bytes =
			((size_t)IMG + 1 + CLASSES) * (size_t)o.hidden *
				sizeof(float) +
			CLASSES * sizeof(float);
	if (ddp_grad_sync_create(comm, &go, &gs) ||
	    ddp_grad_sync_add(gs, m.w1, NULL, (size_t)IMG * m.hidden,
			      DDP_FLOAT32) < 0 ||
	    ddp_grad_sync_add(gs, m.b1, NULL, (size_t)m.hidden, DDP_FLOAT32) <
		    0 ||
	    ddp_grad_sync_add(gs, m.w2, NULL, (size_t)m.hidden * CLASSES,
			      DDP_FLOAT32) < 0 ||
	    ddp_grad_sync_add(gs, m.b2, NULL, CLASSES, DDP_FLOAT32) < 0 ||
	    ddp_grad_sync_start(gs))
		goto comm_error;
	m.gw1 = ddp_grad_sync_grad(gs, 0);
	m.gb1 = ddp_grad_sync_grad(gs, 1);
	m.gw2 = ddp_grad_sync_grad(gs, 2);
	m.gb2 = ddp_grad_sync_grad(gs, 3);
	/* Room for any world up to this one: a shrunk world shards anew. */
	n_mine = (d.n + (size_t)world - 1) / (size_t)world;
	order = malloc((d.n + (size_t)world) * sizeof(*order));
	mine = malloc(d.n * sizeof(*mine));
	if (!order || !mine)
		goto out;
	/* The steps since the training began: a version 1 checkpoint, of
	 * whole epochs, does not hold them. */
	per_epoch = (long)((n_mine + (size_t)o.batch - 1) / (size_t)o.batch);
	gstep = ck.gstep >= 0 ? ck.gstep : start * per_epoch + skip;
	if (skip > per_epoch || (start >= o.epochs && skip)) {
		fprintf(stderr,
			"train: %s/%s stopped after batch %ld of epoch %ld, "
			"which has %ld batches of %ld here (--batch, "
			"--epochs): "
			"resume with the options of the run that wrote it\n",
			o.ckpt_dir, CKPT_NAME, skip, start + 1, per_epoch,
			o.batch);
		goto out;
	}
	if (rank == 0 && (start || skip))
		printf("train: resuming from %s/%s (restart %d): %ld of %ld "
		       "epochs done%s",
		       o.ckpt_dir, CKPT_NAME, restarts, start, o.epochs,
		       skip ? "" : "\n");
	if (rank == 0 && skip)
		printf(", step %ld\n", gstep);
	if (rank == 0)
		printf("train: %zu samples, world size %d, %zu per rank, "
		       "batch %ld, lr %g, %d buckets\n",
		       d.n, world, n_mine, o.batch, o.lr,
		       ddp_grad_sync_num_buckets(gs));
	for (e = start; e < o.epochs; e++) {
		n_mine = shard_epoch(e, d.n, world, rank, order, mine);
		memset(stats, 0, sizeof(stats));
		/* The epoch an agreed stop cut: its sums so far, once. */
		if (e == start && skip && rank == 0)
			memcpy(stats, ck.stats, sizeof(stats));
		if (cp->set_order(t, mine, n_mine) ||
		    ddp_mem_copy(comm, dstats, stats, sizeof(stats),
				 DDP_COPY_TO_BUFFER)) {
			fprintf(stderr, "train: epoch setup: %s\n",
				cp->error(t));
			goto out;
		}
		k = e == start ? (size_t)skip * (size_t)o.batch : 0;
		for (; k < n_mine; k += (size_t)o.batch) {
			bs = n_mine - k < (size_t)o.batch ? n_mine - k
							  : (size_t)o.batch;
			t0 = now_s();
			sr = step(cp, t, &m, gs, k, bs, o.lr, !o.no_overlap,
				  dstats);
			if (sr == -1)
				goto comm_error;
			if (sr < 0)
				goto out;
			if (sr == 1) {
				/* The rest of this epoch's shard, then the
				 * next epochs' shards of the new world. */
				rank = ddp_comm_rank(comm);
				world = ddp_comm_size(comm);
				printf("train: rank %d goes on in a world of "
				       "%d ranks (DDP_ON_FAILURE=shrink)\n",
				       rank, world);
				fflush(stdout);
			}
			step_s += now_s() - t0;
			if (!steps && e == start)
				say_time(&o, rank, "first-allreduce", wall_s());
			steps++;
			gstep++;
			if (ddp_should_stop(gs)) {
				at = (struct ckpt_info){
					.epoch = e,
					.batch =
						(long)(k / (size_t)o.batch) + 1,
					.gstep = gstep,
				};
				rc = stop(&o, comm, gs, &m, &at, dstats, d.n);
				goto out;
			}
		}
		/* Loss, correct and samples summed over the ranks, where the
		 * compute keeps them (device memory on the GPU). */
		if (ddp_allreduce(comm, dstats, dstats, 3, DDP_FLOAT64,
				  DDP_SUM) ||
		    ddp_mem_copy(comm, stats, dstats, sizeof(stats),
				 DDP_COPY_TO_HOST))
			goto comm_error;
		if (rank == 0)
			printf("epoch %ld loss %.4f accuracy %.3f step_ms "
			       "%.3f\n",
			       e + 1, stats[0] / stats[2], stats[1] / stats[2],
			       steps ? step_s * 1e3 / (double)steps : 0.0);
		step_s = 0;
		steps = 0;
		if (o.ckpt_dir && rank == 0 &&
		    ((e + 1) % o.ckpt_every == 0 || e + 1 == o.epochs)) {
			at = (struct ckpt_info){.epoch = e + 1, .gstep = gstep};
			if (ckpt_write(o.ckpt_dir, &m, comm, &at, d.n, world) <
			    0)
				goto out;
			printf("train: checkpoint of epoch %ld in %s/%s\n",
			       e + 1, o.ckpt_dir, CKPT_NAME);
		}
		fflush(stdout);
	}
	if (params_crc(&m, comm, &crc) < 0)
		goto comm_error;
	printf("rank %d params_crc=%08x\n", rank, crc);
	fflush(stdout);
	rc = 0;
	goto out;
comm_error:
	fprintf(stderr, "train: rank %d: communication failed: %s\n", rank,
		ddp_last_error());
out:
	ddp_grad_sync_destroy(gs);
	if (t)
		cp->destroy(t);
	ddp_mem_free(comm, dstats);
	ddp_mem_free(comm, agree);
	model_free(&m, comm);
	ddp_comm_destroy(comm);
	free(d.rec);
	free(order);
	free(mine);
	return rc;
}
