/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Data-parallel training with libddp: an MLP classifier on CIFAR-10 binary
 * data (or generated data in that format), SGD, bucketed gradient sync.
 *
 *   srun --nodes=2 --gpus-per-node=4 --ddp train --synthetic 2048
 *   train --data DIR [--epochs N] [--batch B] [--lr X] [--hidden H]
 *
 * Rank 0 logs the loss per epoch; every rank prints "rank R
 * params_crc=<hex>" at the end, equal on every rank. A communication
 * error ends the program with status 1, so srun ends the step.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ddp.h"
#include "ddp_util.h"

#define IMG 3072
#define REC (IMG + 1)
#define CLASSES 10
#define MAX_FILES 5

struct data {
	uint8_t *rec; /* n records of REC bytes */
	size_t n;
};

struct model {
	int hidden;
	float *w1, *b1, *w2, *b2;     /* parameters */
	float *gw1, *gb1, *gw2, *gb2; /* gradients, owned by the reducer */
};

struct opts {
	const char *data;
	long synthetic;
	long epochs;
	long batch;
	long hidden;
	double lr;
	int no_overlap;
};

static void
usage(FILE *f)
{
	fprintf(f, "usage: train (--data DIR | --synthetic N [--data DIR]) "
		   "[--epochs N] [--batch B] [--lr X] [--hidden H] "
		   "[--no-overlap]\n");
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
 * Writes n learnable records: each class has a smooth prototype image;
 * samples add noise. Written to a temporary name and renamed, so ranks
 * sharing a directory never see a partial file.
 */
static int
write_synthetic(const char *dir, long n)
{
	char path[4096], tmp[4200];
	uint8_t rec[REC];
	uint64_t s = 12345;
	FILE *f;
	long i;
	int p, c;
	double v;

	if (ddp_fmt(path, sizeof(path), "%s/data_batch_1.bin", dir) < 0 ||
	    ddp_fmt(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) < 0)
		return -1;
	f = fopen(tmp, "wb");
	if (!f) {
		fprintf(stderr, "train: cannot write %s: %s\n", tmp,
			strerror(errno));
		return -1;
	}
	for (i = 0; i < n; i++) {
		c = (int)(rnd(&s) % CLASSES);
		rec[0] = (uint8_t)c;
		for (p = 0; p < IMG; p++) {
			v = 128 + 70 * sin(c * 0.9 + p * 0.011 * (c + 1)) +
			    (urand(&s) - 0.5) * 90;
			rec[1 + p] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
		}
		if (fwrite(rec, REC, 1, f) != 1)
			break;
	}
	if (fclose(f) != 0 || i < n || rename(tmp, path) < 0) {
		fprintf(stderr, "train: writing %s failed: %s\n", path,
			strerror(errno));
		unlink(tmp);
		return -1;
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
		if (ddp_fmt(path, sizeof(path), "%s/data_batch_%d.bin", dir,
			    k) < 0 ||
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

static int
model_init(struct model *m, int hidden, uint64_t seed)
{
	size_t n1 = (size_t)IMG * hidden, n2 = (size_t)hidden * CLASSES, i;
	double sc1 = sqrt(2.0 / IMG), sc2 = sqrt(2.0 / hidden);

	m->hidden = hidden;
	m->w1 = calloc(n1, sizeof(float));
	m->b1 = calloc((size_t)hidden, sizeof(float));
	m->w2 = calloc(n2, sizeof(float));
	m->b2 = calloc(CLASSES, sizeof(float));
	if (!m->w1 || !m->b1 || !m->w2 || !m->b2)
		return -1;
	/* Each rank starts differently on purpose: ddp_grad_sync_start
	 * broadcasts rank 0's parameters. */
	for (i = 0; i < n1; i++)
		m->w1[i] = (float)((urand(&seed) * 2 - 1) * sc1);
	for (i = 0; i < n2; i++)
		m->w2[i] = (float)((urand(&seed) * 2 - 1) * sc2);
	return 0;
}

static void
model_free(struct model *m)
{
	free(m->w1);
	free(m->b1);
	free(m->w2);
	free(m->b2);
}

static uint32_t
crc32_update(uint32_t crc, const void *p, size_t n)
{
	const uint8_t *b = p;
	size_t i;
	int k;

	for (i = 0; i < n; i++) {
		crc ^= b[i];
		for (k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1)));
	}
	return crc;
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * One step on a batch: forward for all samples, then backward layer 2
 * (its gradients are marked ready and their bucket starts reducing while
 * layer 1's backward runs), then layer 1. With overlap off, every gradient
 * is marked ready only after the whole backward pass, as a program without
 * bucketed overlap would synchronise. Returns the summed loss.
 */
static int
step(struct model *m, struct ddp_grad_sync *gs, const struct data *d,
     const size_t *idx, size_t bs, double lr, int overlap, double *loss_sum,
     long *correct)
{
	int H = m->hidden, c, j, best;
	size_t b, p, n1 = (size_t)IMG * H, n2 = (size_t)H * CLASSES;
	float *x = malloc(bs * IMG * sizeof(float));
	float *h = malloc(bs * (size_t)H * sizeof(float));
	float *dl = malloc(bs * CLASSES * sizeof(float));
	float *dh = malloc((size_t)H * sizeof(float));
	const uint8_t *r;
	double z[CLASSES], mx, sum;
	int rc = -1;

	if (!x || !h || !dl || !dh)
		goto out;
	memset(m->gw1, 0, n1 * sizeof(float));
	memset(m->gb1, 0, (size_t)H * sizeof(float));
	memset(m->gw2, 0, n2 * sizeof(float));
	memset(m->gb2, 0, CLASSES * sizeof(float));
	for (b = 0; b < bs; b++) {
		r = d->rec + idx[b] * REC;
		for (p = 0; p < IMG; p++)
			x[b * IMG + p] = r[1 + p] / 255.0f - 0.5f;
		for (j = 0; j < H; j++) {
			float a = m->b1[j];

			for (p = 0; p < IMG; p++)
				a += m->w1[(size_t)j * IMG + p] *
				     x[b * IMG + p];
			h[b * H + j] = a > 0 ? a : 0;
		}
		mx = -1e30;
		for (c = 0; c < CLASSES; c++) {
			z[c] = m->b2[c];
			for (j = 0; j < H; j++)
				z[c] += m->w2[c * H + j] * h[b * H + j];
			mx = z[c] > mx ? z[c] : mx;
		}
		sum = 0;
		best = 0;
		for (c = 0; c < CLASSES; c++) {
			sum += exp(z[c] - mx);
			best = z[c] > z[best] ? c : best;
		}
		*correct += best == r[0];
		*loss_sum += -(z[r[0]] - mx - log(sum));
		for (c = 0; c < CLASSES; c++)
			dl[b * CLASSES + c] =
				(float)((exp(z[c] - mx) / sum -
					 (c == r[0] ? 1.0 : 0.0)) /
					(double)bs);
	}
	/* Layer 2 backward. */
	for (b = 0; b < bs; b++)
		for (c = 0; c < CLASSES; c++) {
			m->gb2[c] += dl[b * CLASSES + c];
			for (j = 0; j < H; j++)
				m->gw2[c * H + j] +=
					dl[b * CLASSES + c] * h[b * H + j];
		}
	if (overlap &&
	    (ddp_grad_sync_ready(gs, 3) || ddp_grad_sync_ready(gs, 2)))
		goto out;
	/* Layer 1 backward, overlapping layer 2's allreduce. */
	for (b = 0; b < bs; b++) {
		for (j = 0; j < H; j++) {
			dh[j] = 0;
			if (h[b * H + j] <= 0)
				continue;
			for (c = 0; c < CLASSES; c++)
				dh[j] += m->w2[c * H + j] * dl[b * CLASSES + c];
		}
		for (j = 0; j < H; j++) {
			if (dh[j] == 0)
				continue;
			m->gb1[j] += dh[j];
			for (p = 0; p < IMG; p++)
				m->gw1[(size_t)j * IMG + p] +=
					dh[j] * x[b * IMG + p];
		}
	}
	if (!overlap &&
	    (ddp_grad_sync_ready(gs, 3) || ddp_grad_sync_ready(gs, 2)))
		goto out;
	if (ddp_grad_sync_ready(gs, 1) || ddp_grad_sync_ready(gs, 0) ||
	    ddp_grad_sync_wait(gs))
		goto out;
	for (p = 0; p < n1; p++)
		m->w1[p] -= (float)lr * m->gw1[p];
	for (j = 0; j < H; j++)
		m->b1[j] -= (float)lr * m->gb1[j];
	for (p = 0; p < n2; p++)
		m->w2[p] -= (float)lr * m->gw2[p];
	for (c = 0; c < CLASSES; c++)
		m->b2[c] -= (float)lr * m->gb2[c];
	rc = 0;
out:
	free(x);
	free(h);
	free(dl);
	free(dh);
	return rc;
}

static int
parse_args(int argc, char **argv, struct opts *o)
{
	char *end = NULL;
	int i;

	o->data = NULL;
	o->synthetic = 0;
	o->epochs = 3;
	o->batch = 32;
	o->hidden = 64;
	o->lr = 0.05;
	o->no_overlap = 0;
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
		if (!v) {
			fprintf(stderr, "train: %s needs a value\n", a);
			return -1;
		}
		i++;
		if (strcmp(a, "--data") == 0) {
			o->data = v;
		} else if (strcmp(a, "--synthetic") == 0) {
			if (ddp_parse_long(v, 1, 10000000, &o->synthetic) < 0)
				goto bad;
		} else if (strcmp(a, "--epochs") == 0) {
			if (ddp_parse_long(v, 1, 100000, &o->epochs) < 0)
				goto bad;
		} else if (strcmp(a, "--batch") == 0) {
			if (ddp_parse_long(v, 1, 65536, &o->batch) < 0)
				goto bad;
		} else if (strcmp(a, "--hidden") == 0) {
			if (ddp_parse_long(v, 1, 4096, &o->hidden) < 0)
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
	if (!o->data && !o->synthetic) {
		usage(stderr);
		return -1;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	struct ddp_grad_sync_opts go = {.first_bucket_bytes = 16 << 10};
	struct ddp_grad_sync *gs = NULL;
	struct ddp_comm *comm = NULL;
	struct ddp_config cfg;
	struct model m;
	struct data d = {0};
	struct opts o;
	char tmpdir[] = "/tmp/ddp-train-XXXXXX", path[4200];
	const char *dir;
	size_t *order = NULL, *mine = NULL, n_mine, k, t, bs;
	uint64_t s;
	double loss[3], t0, step_s = 0;
	long steps = 0;
	long correct, e;
	uint32_t crc;
	int rc = 1, rank, world, made_tmp = 0;
	enum ddp_status st;

	memset(&m, 0, sizeof(m));
	if (parse_args(argc, argv, &o) < 0)
		return 2;
	/* This example computes on the CPU, so its buffers are host memory:
	 * always the TCP backend, even on GPU nodes where auto would pick
	 * NCCL (which needs device buffers). */
	st = ddp_config_from_env(&cfg);
	if (!st) {
		cfg.backend = DDP_BACKEND_TCP;
		st = ddp_comm_init(&cfg, &comm);
	}
	if (st) {
		fprintf(stderr, "train: ddp init failed (%s): %s\n",
			ddp_strerror(st), ddp_last_error());
		return 1;
	}
	rank = ddp_comm_rank(comm);
	world = ddp_comm_size(comm);
	dir = o.data;
	if (o.synthetic) {
		if (!dir) {
			if (!mkdtemp(tmpdir)) {
				fprintf(stderr, "train: mkdtemp: %s\n",
					strerror(errno));
				goto out;
			}
			made_tmp = 1;
			dir = tmpdir;
		}
		if (write_synthetic(dir, o.synthetic) < 0)
			goto out;
	}
	if (load_data(dir, &d) < 0 ||
	    model_init(&m, (int)o.hidden, 1000 + (uint64_t)rank) < 0)
		goto out;
	/* Gradients are views into the reducer's buckets (grad NULL): the
	 * backward pass writes them where they are reduced, with no copy. */
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
	/* DistributedSampler: one shuffle per epoch (same on every rank),
	 * padded to a multiple of the world size, every world-th index. */
	n_mine = (d.n + (size_t)world - 1) / (size_t)world;
	order = malloc(n_mine * (size_t)world * sizeof(*order));
	mine = malloc(n_mine * sizeof(*mine));
	if (!order || !mine)
		goto out;
	if (rank == 0)
		printf("train: %zu samples, world size %d, %zu per rank, "
		       "batch %ld, lr %g, %d buckets\n",
		       d.n, world, n_mine, o.batch, o.lr,
		       ddp_grad_sync_num_buckets(gs));
	for (e = 0; e < o.epochs; e++) {
		s = 777 + (uint64_t)e;
		for (k = 0; k < d.n; k++)
			order[k] = k;
		for (k = d.n - 1; k > 0; k--) {
			t = (size_t)(rnd(&s) % (k + 1));
			bs = order[k];
			order[k] = order[t];
			order[t] = bs;
		}
		for (k = d.n; k < n_mine * (size_t)world; k++)
			order[k] = order[k - d.n];
		for (k = 0; k < n_mine; k++)
			mine[k] = order[k * (size_t)world + (size_t)rank];
		loss[0] = 0;
		correct = 0;
		for (k = 0; k < n_mine; k += (size_t)o.batch) {
			bs = n_mine - k < (size_t)o.batch ? n_mine - k
							  : (size_t)o.batch;
			t0 = now_s();
			if (step(&m, gs, &d, mine + k, bs, o.lr, !o.no_overlap,
				 &loss[0], &correct) < 0)
				goto comm_error;
			step_s += now_s() - t0;
			steps++;
		}
		loss[1] = (double)correct;
		loss[2] = (double)n_mine;
		if (ddp_allreduce(comm, loss, loss, 3, DDP_FLOAT64, DDP_SUM))
			goto comm_error;
		if (rank == 0)
			printf("epoch %ld loss %.4f accuracy %.3f step_ms "
			       "%.2f\n",
			       e + 1, loss[0] / loss[2], loss[1] / loss[2],
			       steps ? step_s * 1e3 / (double)steps : 0.0);
		step_s = 0;
		steps = 0;
		fflush(stdout);
	}
	crc = crc32_update(0xffffffffu, m.w1,
			   (size_t)IMG * m.hidden * sizeof(float));
	crc = crc32_update(crc, m.b1, (size_t)m.hidden * sizeof(float));
	crc = crc32_update(crc, m.w2,
			   (size_t)m.hidden * CLASSES * sizeof(float));
	crc = crc32_update(crc, m.b2, CLASSES * sizeof(float));
	printf("rank %d params_crc=%08x\n", rank, crc ^ 0xffffffffu);
	fflush(stdout);
	rc = 0;
	goto out;
comm_error:
	fprintf(stderr, "train: rank %d: communication failed: %s\n", rank,
		ddp_last_error());
out:
	ddp_grad_sync_destroy(gs);
	ddp_comm_destroy(comm);
	if (made_tmp) {
		if (ddp_fmt(path, sizeof(path), "%s/data_batch_1.bin",
			    tmpdir) == 0)
			unlink(path);
		rmdir(tmpdir);
	}
	model_free(&m);
	free(d.rec);
	free(order);
	free(mine);
	return rc;
}
