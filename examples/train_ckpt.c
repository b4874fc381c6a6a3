/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * examples/train's checkpoint (train_ckpt.h): written by rank 0 every E epochs,
 * read by every rank at the start, so that a run killed at any moment
 * and started again ends with the parameters of an uninterrupted one.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <ddp.h>

#include "train_ckpt.h"
#include "train_compute.h"

/*
 * DIR/train.ckpt: what a resumed run needs to go on as if it had never
 * stopped. The parameters and the position in the data are all of it:
 * plain SGD keeps no state, and an epoch's data order is a function of
 * the epoch alone (the shuffle's seed is 777 + epoch). Every field and
 * every float is little-endian, so any host reads it:
 *
 *   0  "DDPTRAIN"            8 bytes
 *   8  version (2)           u32
 *  12  world size            u32
 *  16  inputs (3072)         u32
 *  20  hidden units          u32
 *  24  classes (10)          u32
 *  28  zero                  u32
 *  32  epochs done           u64
 *  40  samples               u64
 *  48  batches of the next epoch done (an agreed stop's; else 0)  u64
 *  56  steps since the training began                             u64
 *  64  that epoch's loss, correct and samples summed so far       3 x f64
 *  88  w1, b1, w2, b2        fp32 each
 * end  CRC-32 of all before  u32
 *
 * Version 1, written before the agreed stop, has no fields 48 to 87 (its
 * parameters start at 48): whole epochs only. It is still read.
 *
 * The world size is kept because each rank's share of an epoch, and so
 * the order in which gradients are summed, depends on it: a checkpoint
 * of another world size is refused rather than resumed into a run that
 * is no longer the same.
 */
#define CKPT_MAGIC "DDPTRAIN"
#define CKPT_VERSION 2
#define CKPT_HEADER 88
#define CKPT_V1_HEADER 48

uint32_t
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

static void
put_le(uint8_t *p, uint64_t v, int bytes)
{
	int i;

	for (i = 0; i < bytes; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t
get_le(const uint8_t *p, int bytes)
{
	uint64_t v = 0;
	int i;

	for (i = bytes - 1; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

/* The parameter arrays in the checkpoint's order, and their lengths. */
static size_t
ckpt_params(struct model *m, float *p[4], size_t n[4])
{
	p[0] = m->w1;
	p[1] = m->b1;
	p[2] = m->w2;
	p[3] = m->b2;
	n[0] = (size_t)TRAIN_IMG * m->hidden;
	n[1] = (size_t)m->hidden;
	n[2] = (size_t)m->hidden * TRAIN_CLASSES;
	n[3] = TRAIN_CLASSES;
	return n[0] + n[1] + n[2] + n[3];
}

/* The --checkpoint directory exists here; says what is wrong if not. */
int
ckpt_dir_ok(const char *dir)
{
	struct stat sb;
	const char *why = NULL;

	if (stat(dir, &sb) < 0)
		why = strerror(errno);
	else if (!S_ISDIR(sb.st_mode))
		why = "not a directory";
	if (!why)
		return 0;
	fprintf(stderr,
		"train: --checkpoint %s: %s (give a directory that exists on "
		"every node, such as $DDP_SHARED_DIR)\n",
		dir, why);
	return -1;
}

/* A double's bits, little-endian, at p. */
static void
put_f64(uint8_t *p, double v)
{
	uint64_t bits;

	memcpy(&bits, &v, 8);
	put_le(p, bits, 8);
}

static double
get_f64(const uint8_t *p)
{
	uint64_t bits = get_le(p, 8);
	double v;

	memcpy(&v, &bits, 8);
	return v;
}

/*
 * Rank 0: the parameters at `at` into DIR/train.ckpt, replacing the last
 * one only once the new one is whole.
 */
int
ckpt_write(const char *dir, struct model *m, struct ddp_comm *comm,
	   const struct ckpt_info *at, size_t samples, int world)
{
	float *p[4], *h = NULL;
	size_t n[4], total = ckpt_params(m, p, n), len, off, i;
	uint8_t *buf;
	uint32_t bits;
	int k, rc = -1;

	len = CKPT_HEADER + total * 4 + 4;
	buf = malloc(len);
	h = malloc(n[0] * sizeof(float));
	if (!buf || !h) {
		fprintf(stderr, "train: no memory for the checkpoint\n");
		goto out;
	}
	memset(buf, 0, CKPT_HEADER);
	memcpy(buf, CKPT_MAGIC, 8);
	put_le(buf + 8, CKPT_VERSION, 4);
	put_le(buf + 12, (uint64_t)world, 4);
	put_le(buf + 16, TRAIN_IMG, 4);
	put_le(buf + 20, (uint64_t)m->hidden, 4);
	put_le(buf + 24, TRAIN_CLASSES, 4);
	put_le(buf + 32, (uint64_t)at->epoch, 8);
	put_le(buf + 40, samples, 8);
	put_le(buf + 48, (uint64_t)at->batch, 8);
	put_le(buf + 56, (uint64_t)at->gstep, 8);
	for (k = 0; k < 3; k++)
		put_f64(buf + 64 + 8 * k, at->stats[k]);
	off = CKPT_HEADER;
	for (k = 0; k < 4; k++) {
		if (ddp_mem_copy(comm, h, p[k], n[k] * sizeof(float),
				 DDP_COPY_TO_HOST)) {
			fprintf(stderr, "train: checkpoint: %s\n",
				ddp_last_error());
			goto out;
		}
		for (i = 0; i < n[k]; i++, off += 4) {
			memcpy(&bits, &h[i], 4);
			put_le(buf + off, bits, 4);
		}
	}
	put_le(buf + off, crc32_update(0xffffffffu, buf, off) ^ 0xffffffffu, 4);
	if (ddp_write_atomic(dir, CKPT_NAME, buf, len)) {
		fprintf(stderr, "train: checkpoint not written: %s\n",
			ddp_last_error());
		goto out;
	}
	rc = 0;
out:
	free(buf);
	free(h);
	return rc;
}

/*
 * Checks a checkpoint's header and CRC against this run; says what does
 * not match. want_len: the length of a version 2 checkpoint of this
 * model; *header: where the parameters start in this one.
 */
static int
ckpt_check(const char *dir, const uint8_t *buf, size_t len, size_t want_len,
	   const struct model *m, size_t samples, int world, size_t *header)
{
	uint64_t v;

	if (len < CKPT_HEADER + 4 || memcmp(buf, CKPT_MAGIC, 8) != 0) {
		fprintf(stderr,
			"train: %s/%s is not a checkpoint of examples/train\n",
			dir, CKPT_NAME);
		return -1;
	}
	v = get_le(buf + 8, 4);
	if (v != CKPT_VERSION && v != 1) {
		fprintf(stderr,
			"train: %s/%s has format version %llu; this train "
			"reads versions 1 and %d\n",
			dir, CKPT_NAME, (unsigned long long)v, CKPT_VERSION);
		return -1;
	}
	*header = v == 1 ? CKPT_V1_HEADER : CKPT_HEADER;
	want_len -= CKPT_HEADER - *header;
	if ((crc32_update(0xffffffffu, buf, len - 4) ^ 0xffffffffu) !=
	    get_le(buf + len - 4, 4)) {
		fprintf(stderr,
			"train: %s/%s is damaged (its CRC does not match); "
			"remove it to train from the start\n",
			dir, CKPT_NAME);
		return -1;
	}
	v = get_le(buf + 12, 4);
	if (v != (uint64_t)world) {
		fprintf(stderr,
			"train: %s/%s was written by a world of %llu ranks, "
			"this run has %d: each rank's share of the data, and "
			"so the training, depends on the world size; run "
			"with %llu ranks, or give another --checkpoint "
			"directory to train from the start\n",
			dir, CKPT_NAME, (unsigned long long)v, world,
			(unsigned long long)v);
		return -1;
	}
	if (get_le(buf + 16, 4) != TRAIN_IMG ||
	    get_le(buf + 20, 4) != (uint64_t)m->hidden ||
	    get_le(buf + 24, 4) != TRAIN_CLASSES || len != want_len) {
		fprintf(stderr,
			"train: %s/%s holds a %llu-%llu-%llu model, this run "
			"trains %d-%d-%d (--hidden)\n",
			dir, CKPT_NAME, (unsigned long long)get_le(buf + 16, 4),
			(unsigned long long)get_le(buf + 20, 4),
			(unsigned long long)get_le(buf + 24, 4), TRAIN_IMG,
			m->hidden, TRAIN_CLASSES);
		return -1;
	}
	v = get_le(buf + 40, 8);
	if (v != samples) {
		fprintf(stderr,
			"train: %s/%s was trained on %llu samples, this run "
			"has %zu (--data, --synthetic)\n",
			dir, CKPT_NAME, (unsigned long long)v, samples);
		return -1;
	}
	return 0;
}

/*
 * Every rank: the parameters and the epochs done from DIR/train.ckpt
 * when it is there (info->epoch 0 when not), into the model.
 */
int
ckpt_load(const char *dir, struct model *m, struct ddp_comm *comm,
	  size_t samples, int world, struct ckpt_info *info)
{
	float *p[4], *h = NULL;
	size_t n[4], total = ckpt_params(m, p, n), want, len = 0, off, i;
	size_t header = CKPT_HEADER;
	uint8_t *buf, *bigger;
	enum ddp_status st;
	uint32_t bits;
	int k, rc = -1;

	memset(info, 0, sizeof(*info));
	info->gstep = -1;
	want = CKPT_HEADER + total * 4 + 4;
	buf = malloc(want);
	h = malloc(n[0] * sizeof(float));
	if (!buf || !h) {
		fprintf(stderr, "train: no memory for the checkpoint\n");
		goto out;
	}
	st = ddp_read_file(dir, CKPT_NAME, buf, want, &len);
	if (st == DDP_ERR_SYSTEM && errno == ENOENT) {
		rc = 0;
		goto out;
	}
	/* Larger than this model's: read it all to say what it holds. */
	if (st == DDP_ERR_INVALID && len > want) {
		bigger = realloc(buf, len);
		if (bigger)
			buf = bigger;
		st = bigger ? ddp_read_file(dir, CKPT_NAME, buf, len, &len)
			    : DDP_ERR_NOMEM;
	}
	if (st) {
		fprintf(stderr, "train: cannot read the checkpoint: %s\n",
			st == DDP_ERR_NOMEM ? "out of memory"
					    : ddp_last_error());
		goto out;
	}
	if (ckpt_check(dir, buf, len, want, m, samples, world, &header) < 0)
		goto out;
	off = header;
	for (k = 0; k < 4; k++) {
		for (i = 0; i < n[k]; i++, off += 4) {
			bits = (uint32_t)get_le(buf + off, 4);
			memcpy(&h[i], &bits, 4);
		}
		if (ddp_mem_copy(comm, p[k], h, n[k] * sizeof(float),
				 DDP_COPY_TO_BUFFER)) {
			fprintf(stderr, "train: checkpoint: %s\n",
				ddp_last_error());
			goto out;
		}
	}
	info->epoch = (long)get_le(buf + 32, 8);
	if (header == CKPT_HEADER) {
		info->batch = (long)get_le(buf + 48, 8);
		info->gstep = (long)get_le(buf + 56, 8);
		for (k = 0; k < 3; k++)
			info->stats[k] = get_f64(buf + 64 + 8 * k);
	}
	info->crc = (uint32_t)get_le(buf + len - 4, 4);
	rc = 0;
out:
	free(buf);
	free(h);
	return rc;
}

/*
 * Every rank must go on from the same checkpoint: a directory that is
 * not shared, or a checkpoint replaced between two ranks' reads, would
 * otherwise train ranks on different epochs. agree is 4 doubles where
 * the compute runs.
 */
int
ckpt_agree(struct ddp_comm *comm, double *agree, const struct ckpt_info *info,
	   int *same)
{
	double v[4] = {(double)info->epoch, -(double)info->epoch,
		       (double)info->crc, -(double)info->crc};

	if (ddp_mem_copy(comm, agree, v, sizeof(v), DDP_COPY_TO_BUFFER) ||
	    ddp_allreduce(comm, agree, agree, 4, DDP_FLOAT64, DDP_MAX) ||
	    ddp_mem_copy(comm, v, agree, sizeof(v), DDP_COPY_TO_HOST))
		return -1;
	*same = v[0] == -v[1] && v[2] == -v[3];
	return 0;
}