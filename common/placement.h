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
 * and network interfaces; the nearest of each is reported per rank
 * (DDP_HCA, DDP_NIC) as information only. NCCL finds the NIC nearest each
 * GPU itself and needs NCCL_IB_HCA identical on every rank, so no NCCL_*
 * variable is ever derived from a rank's placement (ddp_plan_rank_env).
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
/* Most ranks one node's plan holds: the one limit on a count Slurm gives,
 * checked before anything is sized or looped by it. */
#define DDP_PLAN_MAX_RANKS 4096

struct ddp_topo;

/*
 * Loads a topology with I/O devices kept (hwloc drops them by default).
 * xml_path NULL loads the running system, or whatever HWLOC_XMLFILE names
 * (hwloc honours that variable itself). Returns 0 and a topology to free
 * with ddp_topo_destroy(), or -1 with err set.
 */
int ddp_topo_load(struct ddp_topo **out, const char *xml_path, char *err,
		  size_t errlen);

/*
 * What ddp_topo_load asks of hwloc, for callers that load a topology some
 * other way (common/topocache.c): I/O devices kept, and for a discovery of
 * the running machine (live != 0) the GPU runtimes' components left out.
 * Call between hwloc_topology_init and hwloc_topology_load. Cannot fail.
 */
void ddp_topo_set_filters(hwloc_topology_t topo, int live);

/*
 * Wraps a loaded hwloc topology (which from then on belongs to *out, or is
 * destroyed when this fails) and finds its GPUs and NICs as ddp_topo_load
 * does. Returns 0, or -1 with err set (out of memory).
 */
int ddp_topo_adopt(struct ddp_topo **out, hwloc_topology_t topo, char *err,
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
	unsigned nranks;	   /* 1..DDP_PLAN_MAX_RANKS local ranks */
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

/*
 * Plans the ranks of one node of a step as the plugin does: rank r gets
 * GPU gpu_of[r] (a topology GPU index, as ddp_gpu_resolve decides it) when
 * r < ngpu and that index is one the topology has, no GPU otherwise.
 * nranks is whatever Slurm reports and is checked against
 * DDP_PLAN_MAX_RANKS before anything is sized by it. cpus NULL means the
 * topology's allowed CPUs. Returns 0 and a plan to free with
 * ddp_plan_free(), or -1 with err naming the count or the problem.
 */
int ddp_plan_node(const struct ddp_topo *t, unsigned long nranks,
		  const long *gpu_of, size_t ngpu, hwloc_const_bitmap_t cpus,
		  enum ddp_bind bind, struct ddp_plan **out, char *err,
		  size_t errlen);

/* Frees a plan. NULL-tolerant. */
void ddp_plan_free(struct ddp_plan *p);

/* One variable the plugin sets for a rank. keep: a value the user already
 * exported wins. */
struct ddp_env_var {
	const char *name;
	const char *value;
	int keep;
};

#define DDP_RANK_ENV_MAX 8

/* The placement and site variables of one rank (see ddp_plan_rank_env).
 * Values may point into the set itself: do not copy it. */
struct ddp_place_env {
	unsigned n;
	struct ddp_env_var var[DDP_RANK_ENV_MAX];
	char ncpus[16];
};

/*
 * Fills out with what the plugin exports for local rank i, in this order:
 * OMP_NUM_THREADS (keep), DDP_CPUS, DDP_GPU_BUSID, DDP_NUMA, DDP_NIC,
 * DDP_HCA ("-" when there is none), then NCCL_IB_HCA and
 * NCCL_SOCKET_IFNAME (keep) only when conf names them. The NCCL values
 * come from conf alone, never from the rank's placement, so every rank of
 * every node gets the same ones. Values point into p, conf and out, valid
 * while those live. Returns 0, or -1 when i is not a rank of p.
 */
int ddp_plan_rank_env(const struct ddp_plan *p, unsigned i,
		      const struct ddp_conf *conf, struct ddp_place_env *out);

/*
 * Binds the calling process (CPUs and memory) as the plan says for rank i.
 * Does nothing and returns 0 with bind none. Returns -1 with err set when
 * the topology is not this system or a binding call failed; memory
 * binding failures alone are reported but return 0.
 */
int ddp_plan_bind(const struct ddp_topo *t, const struct ddp_plan *p,
		  unsigned i, char *err, size_t errlen);

#endif
