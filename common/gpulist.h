/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * GPU index lists as Slurm writes them (CUDA_VISIBLE_DEVICES,
 * SLURM_STEP_GPUS: "0,1,2,3", ranges "0-3" accepted), GPU UUID lists
 * (CUDA_VISIBLE_DEVICES under gres.conf Flags=env_uuid), the mapping from
 * a rank's CUDA ordinal to the node's GPU in PCI bus order, and the one
 * decision the plugin and ddp-plan share: which GPUs the ranks of a node
 * see (ddp_gpu_resolve).
 *
 * Thread safety: reentrant; the functions touch only their arguments.
 */
#ifndef DDP_GPULIST_H
#define DDP_GPULIST_H

#include <stddef.h>

/* Most GPUs one node's step has; every GPU list is checked against it
 * while it is parsed, before anything loops over its entries. */
#define DDP_GPU_MAX 256
/* Room for one GPU UUID and its comma: "GPU-" and 36 characters, or a
 * MIG device's "MIG-GPU-<uuid>/GI/CI"; longer identifiers are refused. */
#define DDP_GPU_ID_LEN 64
/* Longest GPU list read or written back: DDP_GPU_MAX UUIDs, commas and
 * the NUL. */
#define DDP_GPU_LIST_LEN (DDP_GPU_MAX * DDP_GPU_ID_LEN)

/*
 * Parses a comma-separated list of GPU indices (0..DDP_GPU_MAX-1) or
 * "lo-hi" ranges into out (room for max entries), keeping the written
 * order. Duplicates, empty items, signs, spaces, UUIDs ("GPU-...",
 * "MIG-...") and Slurm's "NoDevFiles" are refused. Returns the count (>= 1)
 * or -1.
 */
long ddp_gpulist_parse(const char *s, unsigned *out, size_t max);

/*
 * Counts the GPU UUIDs of a comma-separated list of them, as CUDA reads
 * CUDA_VISIBLE_DEVICES: each "GPU-" or "MIG-" and then letters, digits,
 * '-' or '/', shorter than DDP_GPU_ID_LEN. Duplicates, empty items, other
 * characters, indices and more than DDP_GPU_MAX entries are refused.
 * Returns the count (>= 1) or -1.
 */
long ddp_gpu_uuid_count(const char *s);

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

/* The GPUs of one node of a step, as every rank there sees them. */
struct ddp_gpu_sel {
	size_t n;		  /* CUDA ordinals; 0: the step named no GPU */
	long gpu_of[DDP_GPU_MAX]; /* ordinal k: topology GPU index, or -1 */
	char visible[DDP_GPU_LIST_LEN]; /* CUDA_VISIBLE_DEVICES, "" if n 0 */
	char note[200]; /* why an input was ignored or a GPU is unknown */
};

/*
 * Decides which GPUs the nranks ranks of one node see and which node GPU
 * each CUDA ordinal is, from the two variables Slurm sets in the step:
 * visible (CUDA_VISIBLE_DEVICES) and step (SLURM_STEP_GPUS), each NULL or
 * "" when unset. Every rank gets all the step's GPUs (hiding peers breaks
 * NCCL peer-to-peer) and picks its own by LOCAL_RANK. When Slurm narrowed
 * CUDA_VISIBLE_DEVICES to fewer GPUs than the step has (--gpus-per-task),
 * it is widened back to the step's list in the same numbering: node-level
 * indices when its entries are step GPUs, 0-based otherwise (a device
 * cgroup renumbers them). Ordinals are then mapped with ddp_gpu_map, and
 * one naming a GPU at or beyond ngpus (the topology's count) maps to -1.
 *
 * GPU UUIDs in visible (gres.conf Flags=env_uuid) are kept as Slurm wrote
 * them. With one UUID per step GPU, ordinal k is the k-th GPU of step in
 * Slurm's order (the order Slurm writes both lists in); otherwise which
 * GPU a UUID is stays unknown (-1), and a list narrowed to fewer UUIDs
 * than nranks is refused with advice, since it cannot be widened.
 *
 * A visible that is neither an index nor a UUID list ("NoDevFiles", more
 * than DDP_GPU_MAX entries) is ignored, and out->note says so; step's
 * numbers are then not used either, since Slurm's numbering is unknown.
 * An unusable step is ignored the same way. With no usable list, out->n is
 * 0 and the ranks run without GPUs (CUDA_VISIBLE_DEVICES left as it is).
 *
 * Returns 0, or -1 with err naming the counts and what would work when
 * the step has GPUs here but fewer than nranks. out is always filled.
 * Reentrant.
 */
int ddp_gpu_resolve(const char *visible, const char *step, unsigned ngpus,
		    unsigned long nranks, struct ddp_gpu_sel *out, char *err,
		    size_t errlen);

#endif
