/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * examples/train: the model's arithmetic, behind one table of functions so
 * that the training loop is the same on the CPU (train.c) and on the GPU
 * (train_gpu.cu, built into train-gpu.so when CUDA is there and loaded at
 * run time, so the program itself never needs CUDA).
 *
 * The model: a 3072-H-10 MLP (ReLU, softmax cross-entropy). Buffers named
 * w1, b1, w2, b2 (parameters) and gw1, gb1, gw2, gb2 (gradients) live
 * where the compute runs: host memory for the CPU, device memory for the
 * GPU (allocated with ddp_mem_alloc, so libddp's NCCL backend reduces
 * them in place). Row-major: w1 is H x 3072, w2 is 10 x H.
 *
 * Every function returns 0, or -1 with the reason in error(). Work is
 * queued in program order (on the GPU on the default stream), so a
 * gradient is final, as libddp's ddp_grad_sync_ready requires, once the
 * function that writes it has returned.
 */
#ifndef TRAIN_COMPUTE_H
#define TRAIN_COMPUTE_H

#include <stddef.h>
#include <stdint.h>

#define TRAIN_IMG 3072
#define TRAIN_REC (TRAIN_IMG + 1) /* CIFAR-10 binary: label, then pixels */
#define TRAIN_CLASSES 10

struct train_ctx;

struct train_compute {
	const char *name; /* "cpu" or "gpu" */
	/* Holds n records (copied) and room for batches of max_batch. */
	struct train_ctx *(*create)(int hidden, size_t max_batch,
				    const uint8_t *records, size_t n, char *err,
				    size_t errlen);
	void (*destroy)(struct train_ctx *t);
	const char *(*error)(const struct train_ctx *t);
	/* This epoch's samples for this rank: indices into the records. */
	int (*set_order)(struct train_ctx *t, const size_t *idx, size_t n);
	/* Forward on samples [first, first + bs) of the order; adds the
	 * summed loss, the correct count and bs to stats[0..2] (3 doubles
	 * where the compute runs); keeps what backward needs. */
	int (*forward)(struct train_ctx *t, size_t first, size_t bs,
		       const float *w1, const float *b1, const float *w2,
		       const float *b2, double *stats);
	/* Layer 2's gradients (overwritten). */
	int (*backward2)(struct train_ctx *t, float *gw2, float *gb2);
	/* Layer 1's gradients (overwritten), from w2 before its update. */
	int (*backward1)(struct train_ctx *t, const float *w2, float *gw1,
			 float *gb1);
	/* p -= lr * g over n elements. */
	int (*sgd)(struct train_ctx *t, float *p, const float *g, size_t n,
		   float lr);
};

/*
 * train-gpu.so's one entry point: the GPU compute for CUDA device
 * `device`, or NULL with the reason in err (no driver, no device, cuBLAS
 * missing). desc receives the device's name and PCI bus id.
 */
#define TRAIN_GPU_ENTRY "train_gpu_compute_v1"
typedef const struct train_compute *train_gpu_entry_fn(int device, char *desc,
						       size_t desclen,
						       char *err,
						       size_t errlen);

#endif
