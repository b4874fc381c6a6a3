/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * GPU index lists as Slurm writes them (CUDA_VISIBLE_DEVICES,
 * SLURM_STEP_GPUS: "0,1,2,3", ranges "0-3" accepted) and the mapping from
 * a rank's CUDA ordinal to the node's GPU in PCI bus order.
 *
 * Thread safety: reentrant; the functions touch only their arguments.
 */
#ifndef DDP_GPULIST_H
#define DDP_GPULIST_H

#include <stddef.h>

#define DDP_GPU_MAX 256

/*
 * Parses a comma-separated list of GPU indices (0..DDP_GPU_MAX-1) or
 * "lo-hi" ranges into out (room for max entries), keeping the written
 * order. Duplicates, empty items, signs, spaces, UUIDs ("GPU-...",
 * "MIG-...") and Slurm's "NoDevFiles" are refused. Returns the count (>= 1)
 * or -1.
 */
long ddp_gpulist_parse(const char *s, unsigned *out, size_t max);

/*
 * Maps each CUDA ordinal to a node-level GPU index (Slurm's gres index,
 * which for NVIDIA GPUs is PCI bus order under AutoDetect=nvml and the
 * usual gres.conf File= order).
 *
 * visible: CUDA_VISIBLE_DEVICES entries (nvis of them); step: the step's
 * SLURM_STEP_GPUS entries (nstep, may be 0 when unknown). Slurm writes
 * CUDA_VISIBLE_DEVICES either with the node-level indices (no device
 * cgroup) or 0-based within the step's GPUs (ConstrainDevices). Both are
 * recognised: when every visible entry is a step GPU, the entries are
 * node-level; when instead every entry is below nstep, entry k names the
 * k-th step GPU in ascending order. out[k] receives the node-level index
 * of CUDA ordinal k, or -1 when it cannot be known. Returns 0 when every
 * ordinal was mapped, 1 when some are -1.
 */
int ddp_gpu_map(const unsigned *visible, size_t nvis, const unsigned *step,
		size_t nstep, long *out);

#endif
