/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Rank placement with hwloc: which GPU, which CPUs, which NUMA node and
 * which NIC each local rank of a step gets. Computed once per node from a
 * topology (the running machine, HWLOC_XMLFILE, or an XML file) and applied
 * per task. Slurm-free, so the golden tests and ddp-plan run the same code
 * as the plugin.
 *
 * GPUs are NVIDIA PCI functions of class 0300/0302 (or of an unknown
 * vendor id 0000, as in trimmed sysfs dumps, or carrying a CUDA/NVML OS
 * device), sorted by PCI bus id so that index k is what CUDA calls device
 * k under CUDA_DEVICE_ORDER=PCI_BUS_ID. NICs are OpenFabrics OS devices
 * (NCCL_IB_HCA) and network interfaces (NCCL_SOCKET_IFNAME).
 *
 * CPU shares: the allowed CPUs are cut into units (cores, or PUs when there
 * are fewer cores than ranks), every rank gets floor(units/ranks) units and
 * the first (units mod ranks) ranks one more, disjoint. Each rank takes
 * units inside its GPU's locality first (ranks sharing a locality split it
 * evenly, in contiguous blocks), then the nearest remaining units in the
 * topology tree. With fewer PUs than ranks, PUs are shared and the plan
 * says so. Nothing outside the allowed set is ever chosen.
 *
 * Thread safety: a ddp_topo and its plans must be used by one thread.
 */
#ifndef DDP_PLACEMENT_H
#define DDP_PLACEMENT_H

#include <hwloc.h>
#include <stddef.h>

#include "ddp_conf.h"

#define DDP_BUSID_LEN 16
#define DDP_NAME_LEN 64

struct ddp_topo;

/*
 * Loads a topology with I/O devices kept (hwloc drops them by default).
 * xml_path NULL loads the running system, or whatever HWLOC_XMLFILE names
 * (hwloc honours that variable itself). Returns 0 and a topology to free
 * with ddp_topo_destroy(), or -1 with err set.
 */
int ddp_topo_load(struct ddp_topo **out, const char *xml_path, char *err,
		  size_t errlen);

/* Frees the topology. NULL-tolerant. */
void ddp_topo_destroy(struct ddp_topo *t);

/* The hwloc topology, borrowed (valid until ddp_topo_destroy). */
hwloc_topology_t ddp_topo_hwloc(const struct ddp_topo *t);

/* 1 when the topology describes the running machine, so binding applies. */
int ddp_topo_is_thissystem(const struct ddp_topo *t);

/* Number of GPUs found and the PCI bus id ("0000:34:00.0") of GPU i. */
unsigned ddp_topo_ngpus(const struct ddp_topo *t);
const char *ddp_topo_gpu_busid(const struct ddp_topo *t, unsigned i);

/*
 * Turns a list of OS CPU numbers ("0-3,8") into a cpuset restricted to the
 * topology's allowed CPUs. Returns 0, or -1 on a syntax error or when no
 * listed CPU is allowed. out must be allocated by the caller.
 */
int ddp_topo_cpus_from_list(const struct ddp_topo *t, const char *list,
			    hwloc_bitmap_t out, char *err, size_t errlen);

/*
 * Maps Slurm's core list for the step on this node (S_STEP_ALLOC_CORES:
 * abstract core ids "0-3,6", which Slurm numbers in hwloc's logical core
 * order when the node's declared layout matches the hardware) to the PUs
 * of those cores that are allowed. Returns 0, or -1 with err explaining
 * why the ids do not fit this topology (for instance a node declared with
 * more cores than the topology has); the caller then falls back to all
 * allowed CPUs and reports it.
 */
int ddp_topo_cpus_from_slurm_cores(const struct ddp_topo *t, const char *list,
				   hwloc_bitmap_t out, char *err,
				   size_t errlen);

struct ddp_plan_req {
	unsigned nranks;	   /* local ranks on this node, >= 1 */
	hwloc_const_bitmap_t cpus; /* allowed CPUs; NULL = topology's */
	const long *gpu;	   /* per rank: topology GPU index, or -1 */
	enum ddp_bind bind;
};

struct ddp_rank_place {
	long gpu;		   /* topology GPU index or -1 */
	char busid[DDP_BUSID_LEN]; /* "-" without GPU */
	hwloc_bitmap_t cpuset;	   /* the rank's disjoint share */
	hwloc_bitmap_t bindset;	   /* what binding applies (mode) */
	hwloc_bitmap_t nodeset;	   /* NUMA nodes of the share */
	char *cpus;		   /* cpuset as a list, malloc'ed */
	char *bindcpus;		   /* bindset as a list, malloc'ed */
	char *numa;		   /* NUMA node OS indexes, malloc'ed */
	unsigned ncpus;		   /* PUs in cpuset: OMP_NUM_THREADS */
	char nic[DDP_NAME_LEN];	   /* network interface, "" if none */
	char hca[DDP_NAME_LEN];	   /* OpenFabrics device, "" if none */
	const char *locality;	   /* "local", "partial", "remote", "-" */
};

struct ddp_plan {
	unsigned n;
	enum ddp_bind bind;
	int shared; /* 1 when PUs had to be shared between ranks */
	struct ddp_rank_place *rank;
};

/*
 * Computes the placement of req->nranks ranks. Returns 0 and a plan to
 * free with ddp_plan_free(), or -1 with err set (no allowed CPU, bad GPU
 * index, out of memory).
 */
int ddp_plan_compute(const struct ddp_topo *t, const struct ddp_plan_req *req,
		     struct ddp_plan **out, char *err, size_t errlen);

/* Frees a plan. NULL-tolerant. */
void ddp_plan_free(struct ddp_plan *p);

/*
 * Binds the calling process (CPUs and memory) as the plan says for rank i.
 * Does nothing and returns 0 with bind none. Returns -1 with err set when
 * the topology is not this system or a binding call failed; memory
 * binding failures alone are reported but return 0.
 */
int ddp_plan_bind(const struct ddp_topo *t, const struct ddp_plan *p,
		  unsigned i, char *err, size_t errlen);

/* "none", "numa" or "core"; parse returns -1 on anything else. */
const char *ddp_bind_name(enum ddp_bind b);
int ddp_bind_parse(const char *s, enum ddp_bind *out);

#endif
