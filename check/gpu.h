/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ddp-check's GPU probes and device tests (gpu.c), which ddp-check.c
 * gathers and judges across the ranks.
 *
 * Ownership: the tests make and destroy their own communicators and
 * device memory; base is copied, never kept.
 *
 * Errors: a test returns -1 with why (len bytes) saying what failed,
 * ddp_last_error's text where libddp's call failed.
 *
 * Thread safety: one thread (ddp-check's main) calls them.
 */
#ifndef DDP_CHECK_GPU_H
#define DDP_CHECK_GPU_H

#include <stddef.h>

#include <ddp.h>

/* The device allreduce's size. */
#define GPU_ELEMS (8u << 20) /* 32 MiB of float32 */

/* A rank's GPU, as each rank tells the others (a float64 in its record). */
enum gpu_state {
	GPU_NONE = 0,	   /* no GPU visible to the rank */
	GPU_NODRIVER = 1,  /* libcuda.so.1 does not load */
	GPU_NOBACKEND = 2, /* libddp-nccl.so does not load */
	GPU_READY = 3,
	GPU_OK = 4,
	GPU_FAILED = 5,
};

/* Whether this rank has a GPU, a CUDA driver and libddp's NCCL backend
 * (looked for where libddp looks, so the probe finds what
 * ddp_comm_init loads): GPU_NONE to GPU_READY. */
enum gpu_state chk_gpu_probe(void);

/* This rank's device alone: a one-rank NCCL communicator (base's
 * settings, timeout_s), memory, a reduction; *ms is how long it took. */
int chk_gpu_local(const struct ddp_config *base, double timeout_s, char *why,
		  size_t len, double *ms);

/* All world ranks' devices together on base's rendezvous: *sec is one
 * GPU_ELEMS allreduce, checked. */
int chk_gpu_world(const struct ddp_config *base, double timeout_s, int world,
		  char *why, size_t len, double *sec);

/* Why no rank tests its GPU, from the count of ranks in each state. */
const char *chk_gpu_skip_reason(const int *count);

/* Why a rank in state st (not GPU_READY) cannot test its GPU. */
const char *chk_gpu_state_why(int st);

/* The report's gpu line into line (len bytes): the slowest device
 * initialisation (ms) and the allreduce of GPU_ELEMS over world ranks'
 * devices (sec), or that it failed (!ok). */
void chk_gpu_summary(char *line, size_t len, int world, int ok, double ms,
		     double sec);

#endif
