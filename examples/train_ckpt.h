/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * examples/train's checkpoint (train_ckpt.c): its reading, writing and
 * agreement, and the model (train.c's) it saves. Built against
 * the installed ddp.h only, like the rest of the example.
 *
 * Ownership: the model's arrays are allocated and freed by train.c (with
 * ddp_mem_alloc where the compute runs); the checkpoint functions only
 * copy through them. Errors: each function returns -1 after saying what
 * went wrong on stderr, 0 on success. Not thread-safe: one thread trains.
 */
#ifndef DDP_EXAMPLE_TRAIN_CKPT_H
#define DDP_EXAMPLE_TRAIN_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include <ddp.h>

struct model {
	int hidden;
	float *w1, *b1, *w2, *b2;     /* parameters, where the compute runs */
	float *gw1, *gb1, *gw2, *gb2; /* gradients, owned by the reducer */
};

/*
 * Where a checkpoint is in the training: epochs done (0: none), and for
 * one an agreed stop wrote in the middle of an epoch, the batches of the
 * next epoch done, the steps since the training began and that epoch's
 * loss, correct and sample sums so far over every rank (0 at an epoch's
 * end). crc: the checkpoint's CRC, for ckpt_agree.
 */
struct ckpt_info {
	long epoch;
	long batch;
	long gstep; /* -1: not in the checkpoint (version 1) */
	double stats[3];
	uint32_t crc;
};

#define CKPT_NAME "train.ckpt"

/* CRC-32 (IEEE) of n more bytes at p; start from 0xffffffff, invert at
 * the end. */
uint32_t crc32_update(uint32_t crc, const void *p, size_t n);

/* The --checkpoint directory exists here; says what is wrong if not. */
int ckpt_dir_ok(const char *dir);

/* Rank 0: the parameters at `at` into dir/train.ckpt (the current
 * format, version 2), atomically. Prints nothing on success. */
int ckpt_write(const char *dir, struct model *m, struct ddp_comm *comm,
	       const struct ckpt_info *at, size_t samples, int world);

/* Every rank: the parameters and where they are from dir/train.ckpt when
 * it is there (info->epoch and info->batch 0 when not), version 2 or 1,
 * refusing one of another run. */
int ckpt_load(const char *dir, struct model *m, struct ddp_comm *comm,
	      size_t samples, int world, struct ckpt_info *info);

/* Whether every rank loaded the same checkpoint (*same); agree is 4
 * doubles where the compute runs. -1 when the allreduce fails. */
int ckpt_agree(struct ddp_comm *comm, double *agree,
	       const struct ckpt_info *info, int *same);

#endif
