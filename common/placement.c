/* SPDX-License-Identifier: BSD-3-Clause */
/* GPU, CPU, NUMA and NIC placement of the local ranks of a step, computed
 * with hwloc from the running machine or an XML topology. */
#include "placement.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp_util.h"

#define MAX_NICS 128

struct gpu {
	hwloc_obj_t pci;
	hwloc_obj_t anc; /* nearest non-I/O ancestor: the GPU's locality */
	char busid[DDP_BUSID_LEN];
};

struct nic {
	hwloc_obj_t os;
	int ib; /* 1: OpenFabrics (NCCL_IB_HCA), 0: network interface */
};

struct ddp_topo {
	hwloc_topology_t topo;
	struct gpu gpus[256];
	unsigned ngpus;
	struct nic nics[MAX_NICS];
	unsigned nnics;
};

static void
set_err(char *err, size_t errlen, const char *msg)
{
	ddp_errf(err, errlen, "%s", msg);
}

/* NVIDIA display or 3D controllers. Vendor 0000 occurs in sysfs dumps that
 * kept only class and locality (nvidiagpunumanodes); a CUDA or NVML OS
 * device below a display function marks a GPU whatever its ids say.
 * Other vendors' VGA functions (BMCs, AMD) are not CUDA devices. */
static int
is_gpu(hwloc_obj_t pci)
{
	unsigned cls = pci->attr->pcidev.class_id;
	unsigned vendor = pci->attr->pcidev.vendor_id;
	hwloc_obj_t c;

	if (cls != 0x0300 && cls != 0x0302)
		return 0;
	if (vendor == 0x10de || vendor == 0x0000)
		return 1;
	for (c = pci->io_first_child; c; c = c->next_sibling)
		if (c->type == HWLOC_OBJ_OS_DEVICE && c->name &&
		    (!strncmp(c->name, "cuda", 4) ||
		     !strncmp(c->name, "nvml", 4)))
			return 1;
	return 0;
}

static int
cmp_gpu(const void *a, const void *b)
{
	const struct hwloc_pcidev_attr_s *x =
		&((const struct gpu *)a)->pci->attr->pcidev;
	const struct hwloc_pcidev_attr_s *y =
		&((const struct gpu *)b)->pci->attr->pcidev;

	if (x->domain != y->domain)
		return x->domain < y->domain ? -1 : 1;
	if (x->bus != y->bus)
		return x->bus < y->bus ? -1 : 1;
	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return (x->func > y->func) - (x->func < y->func);
}

static void
find_devices(struct ddp_topo *t)
{
	hwloc_obj_t o = NULL;

	while ((o = hwloc_get_next_pcidev(t->topo, o)) != NULL) {
		struct gpu *g;

		if (!is_gpu(o) ||
		    t->ngpus == sizeof(t->gpus) / sizeof(t->gpus[0]))
			continue;
		g = &t->gpus[t->ngpus++];
		g->pci = o;
		g->anc = hwloc_get_non_io_ancestor_obj(t->topo, o);
		if (ddp_fmt(g->busid, sizeof(g->busid), "%04x:%02x:%02x.%01x",
			    o->attr->pcidev.domain, o->attr->pcidev.bus,
			    o->attr->pcidev.dev, o->attr->pcidev.func) < 0)
			g->busid[0] = '\0';
	}
	qsort(t->gpus, t->ngpus, sizeof(t->gpus[0]), cmp_gpu);
	o = NULL;
	while ((o = hwloc_get_next_osdev(t->topo, o)) != NULL) {
		hwloc_obj_osdev_type_t ty = o->attr->osdev.type;

		if ((ty != HWLOC_OBJ_OSDEV_OPENFABRICS &&
		     ty != HWLOC_OBJ_OSDEV_NETWORK) ||
		    !o->name || !o->name[0] || !strcmp(o->name, "lo") ||
		    strlen(o->name) >= DDP_NAME_LEN || t->nnics == MAX_NICS)
			continue;
		t->nics[t->nnics].os = o;
		t->nics[t->nnics].ib = ty == HWLOC_OBJ_OSDEV_OPENFABRICS;
		t->nnics++;
	}
}

void
ddp_topo_set_filters(hwloc_topology_t topo, int live)
{
	/* hwloc 2 drops every I/O object unless asked, even from XML. */
	hwloc_topology_set_io_types_filter(topo,
					   HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
#if HWLOC_API_VERSION >= 0x00020100
	/* Placement needs PCI devices and their locality, not the GPU
	 * runtimes' views: the OpenCL, CUDA and NVML components would start
	 * a GPU driver in slurmstepd for every step, and "gl" probes X
	 * displays. */
	if (live) {
		static const char *const skip[] = {
			"opencl", "cuda", "nvml", "rsmi", "levelzero", "gl"};
		size_t i;

		for (i = 0; i < sizeof(skip) / sizeof(skip[0]); i++)
			hwloc_topology_set_components(
				topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST,
				skip[i]);
	}
#else
	(void)live;
#endif
}

int
ddp_topo_adopt(struct ddp_topo **out, hwloc_topology_t topo, char *err,
	       size_t errlen)
{
	struct ddp_topo *t;

	*out = NULL;
	t = calloc(1, sizeof(*t));
	if (!t) {
		hwloc_topology_destroy(topo);
		set_err(err, errlen, "out of memory");
		return -1;
	}
	t->topo = topo;
	find_devices(t);
	*out = t;
	return 0;
}

int
ddp_topo_load(struct ddp_topo **out, const char *xml_path, char *err,
	      size_t errlen)
{
	hwloc_topology_t topo = NULL;
	int rc = -1;

	*out = NULL;
	if (hwloc_topology_init(&topo) < 0) {
		set_err(err, errlen, "hwloc_topology_init failed");
		return -1;
	}
	ddp_topo_set_filters(topo, !xml_path);
	if (xml_path && hwloc_topology_set_xml(topo, xml_path) < 0) {
		if (ddp_fmt(err, errlen, "cannot read topology %s", xml_path) <
		    0)
			set_err(err, errlen, "cannot read topology");
		goto out;
	}
	if (hwloc_topology_load(topo) < 0) {
		set_err(err, errlen, "hwloc cannot load the topology");
		goto out;
	}
	rc = ddp_topo_adopt(out, topo, err, errlen);
	topo = NULL; /* adopted, or destroyed by ddp_topo_adopt */
out:
	if (topo)
		hwloc_topology_destroy(topo);
	return rc;
}

void
ddp_topo_destroy(struct ddp_topo *t)
{
	if (!t)
		return;
	hwloc_topology_destroy(t->topo);
	free(t);
}

hwloc_topology_t
ddp_topo_hwloc(const struct ddp_topo *t)
{
	return t->topo;
}

int
ddp_topo_is_thissystem(const struct ddp_topo *t)
{
	return hwloc_topology_is_thissystem(t->topo) ? 1 : 0;
}

unsigned
ddp_topo_ngpus(const struct ddp_topo *t)
{
	return t->ngpus;
}

const char *
ddp_topo_gpu_busid(const struct ddp_topo *t, unsigned i)
{
	return i < t->ngpus ? t->gpus[i].busid : NULL;
}

/* Parses "0-3,8" (decimal, ascending ranges) into set. */
static int
parse_list(const char *s, long max, hwloc_bitmap_t set)
{
	const char *p = s;

	hwloc_bitmap_zero(set);
	if (!s || !*s)
		return -1;
	for (;;) {
		long lo, hi;
		const char *end;

		if (*p == '+' || *p == '-' ||
		    ddp_parse_long_prefix(p, 0, max, &lo, &end) < 0)
			return -1;
		hi = lo;
		p = end;
		if (*p == '-') {
			if (p[1] == '+' || p[1] == '-' ||
			    ddp_parse_long_prefix(p + 1, lo, max, &hi, &end) <
				    0)
				return -1;
			p = end;
		}
		if (hwloc_bitmap_set_range(set, (unsigned)lo, (int)hi) < 0)
			return -1;
		if (*p == '\0')
			return 0;
		if (*p != ',' || p[1] == '\0')
			return -1;
		p++;
	}
}

int
ddp_topo_cpus_from_list(const struct ddp_topo *t, const char *list,
			hwloc_bitmap_t out, char *err, size_t errlen)
{
	if (parse_list(list, 65535, out) < 0) {
		set_err(err, errlen, "bad CPU list (want e.g. 0-3,8)");
		return -1;
	}
	hwloc_bitmap_and(out, out, hwloc_topology_get_allowed_cpuset(t->topo));
	if (hwloc_bitmap_iszero(out)) {
		set_err(err, errlen, "no listed CPU exists in the topology");
		return -1;
	}
	return 0;
}

int
ddp_topo_cpus_from_slurm_cores(const struct ddp_topo *t, const char *list,
			       hwloc_bitmap_t out, char *err, size_t errlen)
{
	hwloc_bitmap_t ids = hwloc_bitmap_alloc();
	int ncores = hwloc_get_nbobjs_by_type(t->topo, HWLOC_OBJ_CORE);
	int i, last, rc = -1;

	hwloc_bitmap_zero(out);
	if (!ids || parse_list(list, 65535, ids) < 0) {
		set_err(err, errlen, "bad Slurm core list");
		goto out;
	}
	last = hwloc_bitmap_last(ids);
	if (ncores <= 0 || last >= ncores) {
		if (ddp_fmt(err, errlen,
			    "Slurm core ids %s do not fit the %d cores of "
			    "this topology (node declared with other "
			    "hardware?)",
			    list, ncores) < 0)
			set_err(err, errlen, "Slurm core ids do not fit");
		goto out;
	}
	hwloc_bitmap_foreach_begin(i, ids)
	{
		hwloc_obj_t c = hwloc_get_obj_by_type(t->topo, HWLOC_OBJ_CORE,
						      (unsigned)i);

		if (c && c->cpuset)
			hwloc_bitmap_or(out, out, c->cpuset);
	}
	hwloc_bitmap_foreach_end();
	hwloc_bitmap_and(out, out, hwloc_topology_get_allowed_cpuset(t->topo));
	if (hwloc_bitmap_iszero(out)) {
		set_err(err, errlen, "none of Slurm's cores is allowed here");
		goto out;
	}
	rc = 0;
out:
	hwloc_bitmap_free(ids);
	return rc;
}

/* A unit of CPU share: one core's (or one PU's) allowed PUs. */
struct unit {
	hwloc_obj_t obj;
	hwloc_bitmap_t set;
	int owner; /* rank index or -1 */
};

/* Number of parents between o and the root. */
static int
level(hwloc_obj_t o)
{
	int n = 0;

	while (o && o->parent) {
		o = o->parent;
		n++;
	}
	return n;
}

/* How close obj is to anchor: how deep their common ancestor sits. Walks
 * parent pointers by hand because hwloc_get_common_ancestor_obj() compares
 * depths, which are negative for I/O objects. */
static int
closeness(hwloc_topology_t topo, hwloc_obj_t anchor, hwloc_obj_t obj)
{
	hwloc_obj_t a, b;

	(void)topo;
	for (a = anchor; a; a = a->parent)
		for (b = obj; b; b = b->parent)
			if (a == b)
				return level(a);
	return 0;
}

struct work {
	struct unit *units;
	unsigned nunits;
	hwloc_obj_t *anchor;   /* per rank: locality object */
	hwloc_bitmap_t *local; /* per rank: locality cpuset */
	unsigned *want;
	unsigned *got;
};

static void
give(struct work *w, unsigned u, unsigned r, struct ddp_rank_place *rp)
{
	w->units[u].owner = (int)r;
	hwloc_bitmap_or(rp->cpuset, rp->cpuset, w->units[u].set);
	w->got[r]++;
}

/* Phase one: ranks with the same locality split its free units evenly, in
 * contiguous blocks; smaller localities go first so that a GPU attached to
 * the whole machine does not eat a socket's CPUs. */
static void
assign_local(struct work *w, struct ddp_plan *p, hwloc_topology_t topo)
{
	unsigned n = p->n, r, s, u;
	unsigned *order = calloc(n, sizeof(*order));
	unsigned *quota = calloc(n, sizeof(*quota));
	unsigned char *done = calloc(n, 1);

	if (!order || !quota || !done)
		goto out;
	for (;;) {
		unsigned best = n, members = 0, avail = 0, k, given;

		/* Pick the unprocessed locality with the smallest weight. */
		for (r = 0; r < n; r++)
			if (!done[r] &&
			    (best == n ||
			     hwloc_bitmap_weight(w->local[r]) <
				     hwloc_bitmap_weight(w->local[best])))
				best = r;
		if (best == n)
			break;
		for (r = 0; r < n; r++)
			if (!done[r] &&
			    hwloc_bitmap_isequal(w->local[r], w->local[best])) {
				order[members++] = r;
				done[r] = 1;
				quota[r] = 0;
			}
		for (u = 0; u < w->nunits; u++)
			if (w->units[u].owner < 0 &&
			    hwloc_bitmap_isincluded(w->units[u].set,
						    w->local[best]))
				avail++;
		/* Round-robin quotas up to each rank's want. */
		for (given = 1; given && avail;) {
			given = 0;
			for (k = 0; k < members && avail; k++) {
				r = order[k];
				if (quota[r] < w->want[r]) {
					quota[r]++;
					avail--;
					given = 1;
				}
			}
		}
		s = 0;
		for (k = 0; k < members; k++) {
			r = order[k];
			for (u = s; u < w->nunits && quota[r]; u++) {
				if (w->units[u].owner >= 0 ||
				    !hwloc_bitmap_isincluded(w->units[u].set,
							     w->local[best]))
					continue;
				give(w, u, r, &p->rank[r]);
				quota[r]--;
				s = u + 1;
			}
		}
	}
out:
	(void)topo;
	free(order);
	free(quota);
	free(done);
}

/* Phase two: ranks still short take the nearest free units. */
static void
assign_nearest(struct work *w, struct ddp_plan *p, hwloc_topology_t topo)
{
	unsigned r, u;

	for (r = 0; r < p->n; r++) {
		while (w->got[r] < w->want[r]) {
			int best = -1, bestc = -1;

			for (u = 0; u < w->nunits; u++) {
				int c;

				if (w->units[u].owner >= 0)
					continue;
				c = closeness(topo, w->anchor[r],
					      w->units[u].obj);
				if (c > bestc) {
					bestc = c;
					best = (int)u;
				}
			}
			if (best < 0)
				break;
			give(w, (unsigned)best, r, &p->rank[r]);
		}
	}
}

/* Fewer PUs than ranks: rank r shares the least-loaded PU, the one
 * nearest its GPU among those, so that loads differ by at most one. */
static void
share_unit(struct work *w, unsigned r, struct ddp_plan *p,
	   hwloc_topology_t topo)
{
	unsigned k, u, best = 0, bestload = ~0U;
	int bestc = -1;

	for (u = 0; u < w->nunits; u++) {
		unsigned load = 0;
		int c;

		for (k = 0; k < r; k++)
			if (hwloc_bitmap_isincluded(w->units[u].set,
						    p->rank[k].cpuset))
				load++;
		c = closeness(topo, w->anchor[r], w->units[u].obj);
		if (load < bestload || (load == bestload && c > bestc)) {
			best = u;
			bestload = load;
			bestc = c;
		}
	}
	hwloc_bitmap_or(p->rank[r].cpuset, p->rank[r].cpuset,
			w->units[best].set);
}

/* Nearest NIC of each kind to the rank's anchor; ties rotate over ranks so
 * that equally near NICs are shared out. */
static void
choose_nics(const struct ddp_topo *t, hwloc_obj_t anchor, unsigned rank,
	    struct ddp_rank_place *rp)
{
	int kind;

	for (kind = 0; kind <= 1; kind++) {
		unsigned i, nbest = 0, pick;
		int bestc = -1;
		hwloc_obj_t cand[MAX_NICS];

		for (i = 0; i < t->nnics; i++) {
			int c;

			if (t->nics[i].ib != kind)
				continue;
			c = closeness(t->topo, anchor, t->nics[i].os);
			if (c > bestc) {
				bestc = c;
				nbest = 0;
			}
			if (c == bestc)
				cand[nbest++] = t->nics[i].os;
		}
		if (!nbest)
			continue;
		pick = rank % nbest;
		if (ddp_fmt(kind ? rp->hca : rp->nic, DDP_NAME_LEN, "%s",
			    cand[pick]->name) < 0)
			(kind ? rp->hca : rp->nic)[0] = '\0';
	}
}

/* NUMA nodes holding the share's CPUs, leaving out GPU-memory nodes, which
 * hwloc attaches with the CPUs of their package (POWER9 + V100). */
static void
share_nodes(hwloc_topology_t topo, hwloc_const_bitmap_t cpus,
	    hwloc_bitmap_t nodes, hwloc_bitmap_t nodecpus)
{
	hwloc_obj_t n = NULL;

	hwloc_bitmap_zero(nodes);
	hwloc_bitmap_zero(nodecpus);
	while ((n = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, n))) {
		if (n->subtype && !strcmp(n->subtype, "GPUMemory"))
			continue;
		if (!n->cpuset || !hwloc_bitmap_intersects(n->cpuset, cpus))
			continue;
		hwloc_bitmap_set(nodes, n->os_index);
		hwloc_bitmap_or(nodecpus, nodecpus, n->cpuset);
	}
}

static int
alloc_rank(struct ddp_rank_place *rp)
{
	rp->gpu = -1;
	rp->locality = "-";
	rp->cpuset = hwloc_bitmap_alloc();
	rp->bindset = hwloc_bitmap_alloc();
	rp->nodeset = hwloc_bitmap_alloc();
	if (ddp_fmt(rp->busid, sizeof(rp->busid), "-") < 0)
		return -1;
	return rp->cpuset && rp->bindset && rp->nodeset ? 0 : -1;
}

/* Fills units with the allowed cores, or PUs when cores are too few. */
static int
make_units(hwloc_topology_t topo, hwloc_const_bitmap_t allowed, unsigned nranks,
	   struct unit **out, unsigned *n)
{
	hwloc_obj_type_t ty = HWLOC_OBJ_CORE;
	int pass;

	for (pass = 0; pass < 2; pass++) {
		int i, nobj = hwloc_get_nbobjs_by_type(topo, ty);
		unsigned k = 0;

		*out = calloc(nobj > 0 ? (size_t)nobj : 1, sizeof(**out));
		if (!*out)
			return -1;
		for (i = 0; i < nobj; i++) {
			hwloc_obj_t o =
				hwloc_get_obj_by_type(topo, ty, (unsigned)i);

			if (!o->cpuset ||
			    !hwloc_bitmap_intersects(o->cpuset, allowed))
				continue;
			(*out)[k].obj = o;
			(*out)[k].owner = -1;
			(*out)[k].set = hwloc_bitmap_alloc();
			if (!(*out)[k].set) {
				*n = k;
				return -1;
			}
			hwloc_bitmap_and((*out)[k].set, o->cpuset, allowed);
			k++;
		}
		*n = k;
		if (k >= nranks || ty == HWLOC_OBJ_PU)
			return 0;
		for (i = 0; i < (int)k; i++)
			hwloc_bitmap_free((*out)[i].set);
		free(*out);
		*out = NULL;
		ty = HWLOC_OBJ_PU;
	}
	return 0;
}

int
ddp_plan_compute(const struct ddp_topo *t, const struct ddp_plan_req *req,
		 struct ddp_plan **out, char *err, size_t errlen)
{
	hwloc_topology_t topo = t->topo;
	hwloc_bitmap_t allowed = NULL, nodecpus = NULL;
	struct ddp_plan *p = NULL;
	struct work w;
	unsigned r, u, q, rem;
	int rc = -1;

	memset(&w, 0, sizeof(w));
	*out = NULL;
	if (req->nranks == 0 || req->nranks > DDP_PLAN_MAX_RANKS) {
		if (ddp_fmt(err, errlen, "rank count must be 1..%d",
			    DDP_PLAN_MAX_RANKS) < 0)
			set_err(err, errlen, "rank count out of range");
		goto out;
	}
	allowed = hwloc_bitmap_dup(hwloc_topology_get_allowed_cpuset(topo));
	nodecpus = hwloc_bitmap_alloc();
	p = calloc(1, sizeof(*p));
	if (!allowed || !nodecpus || !p)
		goto oom;
	if (req->cpus)
		hwloc_bitmap_and(allowed, allowed, req->cpus);
	if (hwloc_bitmap_iszero(allowed)) {
		set_err(err, errlen, "no allowed CPU to place ranks on");
		goto out;
	}
	p->n = req->nranks;
	p->bind = req->bind;
	p->rank = calloc(p->n, sizeof(*p->rank));
	w.anchor = calloc(p->n, sizeof(*w.anchor));
	w.local = calloc(p->n, sizeof(*w.local));
	w.want = calloc(p->n, sizeof(*w.want));
	w.got = calloc(p->n, sizeof(*w.got));
	if (!p->rank || !w.anchor || !w.local || !w.want || !w.got)
		goto oom;
	for (r = 0; r < p->n; r++) {
		struct ddp_rank_place *rp = &p->rank[r];
		long g = req->gpu ? req->gpu[r] : -1;

		if (alloc_rank(rp) < 0)
			goto oom;
		w.local[r] = hwloc_bitmap_dup(allowed);
		if (!w.local[r])
			goto oom;
		w.anchor[r] = hwloc_get_root_obj(topo);
		if (g >= (long)t->ngpus) {
			if (ddp_fmt(err, errlen,
				    "GPU index %ld but the topology has %u "
				    "GPUs",
				    g, t->ngpus) < 0)
				set_err(err, errlen, "GPU index out of range");
			goto out;
		}
		if (g >= 0) {
			rp->gpu = g;
			memcpy(rp->busid, t->gpus[g].busid, sizeof(rp->busid));
			w.anchor[r] = t->gpus[g].anc;
			hwloc_bitmap_and(w.local[r], allowed,
					 t->gpus[g].anc->cpuset);
		}
	}
	if (make_units(topo, allowed, p->n, &w.units, &w.nunits) < 0)
		goto oom;
	if (w.nunits >= p->n) {
		q = w.nunits / p->n;
		rem = w.nunits % p->n;
		for (r = 0; r < p->n; r++)
			w.want[r] = q + (r < rem ? 1 : 0);
		assign_local(&w, p, topo);
		assign_nearest(&w, p, topo);
	} else {
		p->shared = 1;
		for (r = 0; r < p->n; r++)
			share_unit(&w, r, p, topo);
	}
	for (r = 0; r < p->n; r++) {
		struct ddp_rank_place *rp = &p->rank[r];

		if (rp->gpu >= 0) {
			hwloc_const_bitmap_t loc = t->gpus[rp->gpu].anc->cpuset;

			if (hwloc_bitmap_isincluded(rp->cpuset, loc))
				rp->locality = "local";
			else if (hwloc_bitmap_intersects(rp->cpuset, loc))
				rp->locality = "partial";
			else
				rp->locality = "remote";
		}
		share_nodes(topo, rp->cpuset, rp->nodeset, nodecpus);
		if (p->bind == DDP_BIND_NUMA && !hwloc_bitmap_iszero(nodecpus))
			hwloc_bitmap_and(rp->bindset, nodecpus, allowed);
		else if (p->bind != DDP_BIND_NONE)
			hwloc_bitmap_copy(rp->bindset, rp->cpuset);
		rp->ncpus = (unsigned)hwloc_bitmap_weight(rp->cpuset);
		if (hwloc_bitmap_list_asprintf(&rp->cpus, rp->cpuset) < 0 ||
		    hwloc_bitmap_list_asprintf(&rp->bindcpus, rp->bindset) <
			    0 ||
		    hwloc_bitmap_list_asprintf(&rp->numa, rp->nodeset) < 0)
			goto oom;
		choose_nics(t,
			    rp->gpu >= 0 ? t->gpus[rp->gpu].pci
					 : hwloc_get_obj_covering_cpuset(
						   topo, rp->cpuset),
			    r, rp);
	}
	*out = p;
	p = NULL;
	rc = 0;
	goto out;
oom:
	set_err(err, errlen, "out of memory");
out:
	if (w.units)
		for (u = 0; u < w.nunits; u++)
			hwloc_bitmap_free(w.units[u].set);
	free(w.units);
	if (w.local)
		for (r = 0; r < req->nranks; r++)
			hwloc_bitmap_free(w.local[r]);
	free(w.local);
	free(w.anchor);
	free(w.want);
	free(w.got);
	hwloc_bitmap_free(allowed);
	hwloc_bitmap_free(nodecpus);
	ddp_plan_free(p);
	return rc;
}

int
ddp_plan_node(const struct ddp_topo *t, unsigned long nranks,
	      const long *gpu_of, size_t ngpu, hwloc_const_bitmap_t cpus,
	      enum ddp_bind bind, struct ddp_plan **out, char *err,
	      size_t errlen)
{
	struct ddp_plan_req req;
	long *gpu = NULL;
	unsigned long r;
	int rc = -1;

	*out = NULL;
	/* Checked first: Slurm's task count must never size anything. */
	if (nranks == 0 || nranks > DDP_PLAN_MAX_RANKS) {
		if (ddp_fmt(err, errlen,
			    "%lu ranks on this node, but --ddp places 1 to "
			    "%d ranks per node: start fewer tasks per node "
			    "(--ntasks-per-node)",
			    nranks, DDP_PLAN_MAX_RANKS) < 0)
			set_err(err, errlen, "too many ranks on this node");
		goto out;
	}
	gpu = calloc(nranks, sizeof(*gpu));
	if (!gpu) {
		set_err(err, errlen, "out of memory");
		goto out;
	}
	for (r = 0; r < nranks; r++) {
		gpu[r] = r < ngpu && gpu_of ? gpu_of[r] : -1;
		if (gpu[r] >= (long)t->ngpus)
			gpu[r] = -1;
	}
	memset(&req, 0, sizeof(req));
	req.nranks = (unsigned)nranks;
	req.cpus = cpus;
	req.gpu = gpu;
	req.bind = bind;
	rc = ddp_plan_compute(t, &req, out, err, errlen);
out:
	free(gpu);
	return rc;
}

int
ddp_plan_rank_env(const struct ddp_plan *p, unsigned i,
		  const struct ddp_conf *conf, struct ddp_place_env *out)
{
	const struct ddp_rank_place *rp;
	unsigned n = 0;

	memset(out, 0, sizeof(*out));
	if (!p || i >= p->n)
		return -1;
	rp = &p->rank[i];
	if (ddp_fmt(out->ncpus, sizeof(out->ncpus), "%u",
		    rp->ncpus ? rp->ncpus : 1) < 0)
		return -1;
	out->var[n++] = (struct ddp_env_var){"OMP_NUM_THREADS", out->ncpus, 1};
	out->var[n++] = (struct ddp_env_var){"DDP_CPUS", rp->cpus, 0};
	out->var[n++] = (struct ddp_env_var){"DDP_GPU_BUSID", rp->busid, 0};
	out->var[n++] = (struct ddp_env_var){
		"DDP_NUMA", rp->numa && rp->numa[0] ? rp->numa : "-", 0};
	out->var[n++] =
		(struct ddp_env_var){"DDP_NIC", rp->nic[0] ? rp->nic : "-", 0};
	out->var[n++] =
		(struct ddp_env_var){"DDP_HCA", rp->hca[0] ? rp->hca : "-", 0};
	/* Site-wide or nothing: a per-rank NCCL_IB_HCA breaks NCCL's ring
	 * building (NVIDIA/nccl#1478) and one NIC per rank cuts bandwidth
	 * (NVIDIA/nccl#1591); NCCL pairs GPUs and NICs itself. */
	if (conf && conf->nccl_ib_hca[0])
		out->var[n++] = (struct ddp_env_var){"NCCL_IB_HCA",
						     conf->nccl_ib_hca, 1};
	if (conf && conf->nccl_socket_ifname[0])
		out->var[n++] = (struct ddp_env_var){
			"NCCL_SOCKET_IFNAME", conf->nccl_socket_ifname, 1};
	out->n = n;
	return 0;
}

void
ddp_plan_free(struct ddp_plan *p)
{
	unsigned r;

	if (!p)
		return;
	for (r = 0; p->rank && r < p->n; r++) {
		hwloc_bitmap_free(p->rank[r].cpuset);
		hwloc_bitmap_free(p->rank[r].bindset);
		hwloc_bitmap_free(p->rank[r].nodeset);
		free(p->rank[r].cpus);
		free(p->rank[r].bindcpus);
		free(p->rank[r].numa);
	}
	free(p->rank);
	free(p);
}

int
ddp_plan_bind(const struct ddp_topo *t, const struct ddp_plan *p, unsigned i,
	      char *err, size_t errlen)
{
	const struct ddp_rank_place *rp;

	if (i >= p->n) {
		set_err(err, errlen, "no such rank in the plan");
		return -1;
	}
	rp = &p->rank[i];
	if (p->bind == DDP_BIND_NONE)
		return 0;
	if (!ddp_topo_is_thissystem(t)) {
		set_err(err, errlen,
			"topology is not this machine: not binding");
		return -1;
	}
	if (hwloc_set_cpubind(t->topo, rp->bindset, HWLOC_CPUBIND_PROCESS) <
	    0) {
		set_err(err, errlen, "cannot bind CPUs");
		return -1;
	}
	if (!hwloc_bitmap_iszero(rp->nodeset) &&
	    hwloc_set_membind(t->topo, rp->nodeset, HWLOC_MEMBIND_BIND,
			      HWLOC_MEMBIND_PROCESS | HWLOC_MEMBIND_BYNODESET) <
		    0)
		set_err(err, errlen, "CPUs bound; memory binding refused");
	return 0;
}
