/* SPDX-License-Identifier: BSD-3-Clause */
/* Invariants of the placement on every topology fixture: shares disjoint
 * and inside the allowed CPUs, fair to one unit, GPUs in PCI order, and
 * the NCCL variables of every rank the same (the site's, or none). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ddp_util.h"
#include "placement.h"
#include "tap.h"

static const char *topodir = "tests/topologies";

/* "NAME=VALUE ..." of the NCCL_* variables in env, for comparison. */
static void
nccl_of(const struct ddp_place_env *env, char *buf, size_t len)
{
	size_t used = 0;
	unsigned k;

	buf[0] = '\0';
	for (k = 0; k < env->n; k++) {
		if (strncmp(env->var[k].name, "NCCL_", 5) != 0)
			continue;
		if (ddp_fmt(buf + used, len - used, "%s%s=%s%s",
			    used ? " " : "", env->var[k].name,
			    env->var[k].value,
			    env->var[k].keep ? "" : "(forced)") < 0)
			return;
		used += strlen(buf + used);
	}
}

/*
 * One rank per GPU (at least two ranks) of one node: with the site's NCCL
 * keys every rank gets exactly them, unforced (a user's export wins);
 * without, no rank gets any NCCL variable, whatever NICs are nearest.
 */
static void
check_nccl_env(const struct ddp_topo *t, const char *name)
{
	unsigned n = ddp_topo_ngpus(t) > 1 ? ddp_topo_ngpus(t) : 2, r;
	struct ddp_plan *p = NULL;
	struct ddp_conf site, plain;
	struct ddp_place_env env;
	char err[256], got[600];
	long gpu[256];
	int same_site = 1, none_plain = 1, info = 1;

	ddp_conf_defaults(&plain);
	ddp_conf_defaults(&site);
	ddp_conf_set(&site, "nccl_ib_hca", "=mlx5_0,mlx5_1", err, sizeof(err));
	ddp_conf_set(&site, "nccl_socket_ifname", "^docker,lo", err,
		     sizeof(err));
	for (r = 0; r < n; r++)
		gpu[r] = (long)r;
	if (!tap_ok(ddp_plan_node(t, n, gpu, ddp_topo_ngpus(t), NULL,
				  DDP_BIND_CORE, &p, err, sizeof(err)) == 0,
		    "%s: plan for one rank per GPU (%u)", name, n)) {
		tap_diag("%s", err);
		return;
	}
	for (r = 0; r < n; r++) {
		if (ddp_plan_rank_env(p, r, &site, &env) < 0) {
			same_site = 0;
			break;
		}
		nccl_of(&env, got, sizeof(got));
		if (strcmp(got, "NCCL_IB_HCA==mlx5_0,mlx5_1 "
				"NCCL_SOCKET_IFNAME=^docker,lo") != 0) {
			tap_diag("rank %u: %s", r, got);
			same_site = 0;
		}
		/* The nearest NIC and HCA stay, as information. */
		if (strcmp(env.var[4].name, "DDP_NIC") != 0 ||
		    strcmp(env.var[4].value,
			   p->rank[r].nic[0] ? p->rank[r].nic : "-") != 0 ||
		    strcmp(env.var[5].name, "DDP_HCA") != 0 ||
		    strcmp(env.var[5].value,
			   p->rank[r].hca[0] ? p->rank[r].hca : "-") != 0)
			info = 0;
		if (ddp_plan_rank_env(p, r, &plain, &env) < 0) {
			none_plain = 0;
			break;
		}
		nccl_of(&env, got, sizeof(got));
		if (got[0]) {
			tap_diag("rank %u without site keys: %s", r, got);
			none_plain = 0;
		}
	}
	tap_ok(same_site, "%s: all %u ranks get the site's NCCL variables",
	       name, n);
	tap_ok(none_plain, "%s: no NCCL variable without a site setting", name);
	tap_ok(info, "%s: DDP_NIC/DDP_HCA report the nearest NIC and HCA",
	       name);
	tap_ok(ddp_plan_rank_env(p, n, &site, &env) < 0,
	       "%s: no environment for a rank outside the plan", name);
	ddp_plan_free(p);
}

/*
 * More tasks on a node than a plan holds (issue F7: slurmstepd filled a
 * 4096-entry stack array before checking): refused by count before
 * anything is sized by it; the largest count still gets a plan.
 */
static void
check_rank_limit(void)
{
	struct ddp_topo *t = NULL;
	struct ddp_plan *p = NULL;
	char err[256];
	long gpu[1] = {0};

	if (ddp_topo_load(&t, "tests/topologies/24em64t-2n6c2t-pci.xml", err,
			  sizeof(err)) < 0) {
		tap_ok(1, "# skip no fixture for the rank limit");
		return;
	}
	if (!tap_ok(ddp_plan_node(t, 5000, NULL, 0, NULL, DDP_BIND_CORE, &p,
				  err, sizeof(err)) < 0 &&
			    !p && strstr(err, "5000 ranks") &&
			    strstr(err, "4096") &&
			    strstr(err, "--ntasks-per-node"),
		    "5000 ranks on a node refused, naming the count and limit"))
		tap_diag("%s", err);
	tap_ok(ddp_plan_node(t, 1UL << 32, gpu, 1, NULL, DDP_BIND_CORE, &p, err,
			     sizeof(err)) < 0 &&
		       !p,
	       "2^32 ranks refused (no truncation to 0)");
	tap_ok(ddp_plan_node(t, 0, NULL, 0, NULL, DDP_BIND_CORE, &p, err,
			     sizeof(err)) < 0 &&
		       !p,
	       "0 ranks refused");
	if (tap_ok(ddp_plan_node(t, DDP_PLAN_MAX_RANKS, gpu, 1, NULL,
				 DDP_BIND_CORE, &p, err, sizeof(err)) == 0 &&
			   p->n == DDP_PLAN_MAX_RANKS && p->shared &&
			   p->rank[0].gpu == 0 &&
			   p->rank[DDP_PLAN_MAX_RANKS - 1].gpu == -1,
		   "4096 ranks on 24 PUs: a shared plan, GPU 0 for rank 0 "
		   "only"))
		ddp_plan_free(p);
	else
		tap_diag("%s", err);
	gpu[0] = 7;
	p = NULL;
	tap_ok(ddp_plan_node(t, 1, gpu, 1, NULL, DDP_BIND_CORE, &p, err,
			     sizeof(err)) == 0 &&
		       p->rank[0].gpu == -1,
	       "a GPU index the topology lacks means no GPU");
	ddp_plan_free(p);
	ddp_topo_destroy(t);
}

static void
check_topology(const char *path, const char *name)
{
	struct ddp_topo *t = NULL;
	char err[256];
	unsigned n, r, k;
	int ok_load;

	ok_load = ddp_topo_load(&t, path, err, sizeof(err)) == 0;
	if (!tap_ok(ok_load, "%s loads", name)) {
		tap_diag("%s", err);
		return;
	}
	tap_ok(!ddp_topo_is_thissystem(t), "%s is not this system", name);
	for (k = 1; k < ddp_topo_ngpus(t); k++)
		if (strcmp(ddp_topo_gpu_busid(t, k - 1),
			   ddp_topo_gpu_busid(t, k)) >= 0)
			break;
	tap_ok(ddp_topo_ngpus(t) == 0 || k == ddp_topo_ngpus(t),
	       "%s: %u GPUs in PCI bus order", name, ddp_topo_ngpus(t));
	for (n = 1; n <= 9; n += 2) {
		struct ddp_plan_req req = {.nranks = n, .bind = DDP_BIND_CORE};
		struct ddp_plan *p = NULL;
		long gpu[9];
		hwloc_bitmap_t all = hwloc_bitmap_alloc();
		int disjoint = 1, inside = 1;
		unsigned lo = ~0U, hi = 0;

		for (r = 0; r < n; r++)
			gpu[r] = r < ddp_topo_ngpus(t) ? (long)r : -1;
		req.gpu = gpu;
		if (!tap_ok(ddp_plan_compute(t, &req, &p, err, sizeof(err)) ==
				    0,
			    "%s: plan for %u ranks", name, n)) {
			tap_diag("%s", err);
			hwloc_bitmap_free(all);
			continue;
		}
		for (r = 0; r < n; r++) {
			const struct ddp_rank_place *rp = &p->rank[r];

			if (hwloc_bitmap_intersects(all, rp->cpuset))
				disjoint = 0;
			hwloc_bitmap_or(all, all, rp->cpuset);
			if (!hwloc_bitmap_isincluded(
				    rp->cpuset,
				    hwloc_topology_get_allowed_cpuset(
					    ddp_topo_hwloc(t))) ||
			    hwloc_bitmap_iszero(rp->cpuset))
				inside = 0;
			if (rp->ncpus < lo)
				lo = rp->ncpus;
			if (rp->ncpus > hi)
				hi = rp->ncpus;
		}
		tap_ok(disjoint || p->shared, "%s %u ranks: disjoint shares",
		       name, n);
		tap_ok(inside, "%s %u ranks: non-empty and allowed", name, n);
		tap_ok(p->shared || hi <= 2 * lo + 2,
		       "%s %u ranks: fair (%u..%u CPUs)", name, n, lo, hi);
		ddp_plan_free(p);
		hwloc_bitmap_free(all);
	}
	check_nccl_env(t, name);
	ddp_topo_destroy(t);
}

/*
 * Live discovery of this machine loads, is this system, and leaves the GPU
 * runtimes' hwloc components out (hwloc lists the enabled ones on stderr
 * with HWLOC_COMPONENTS_VERBOSE).
 */
static void
check_live_discovery(void)
{
	char err[256], log[16384];
	struct ddp_topo *t = NULL;
	const char *final;
	size_t len = 0;
	ssize_t n;
	int fds[2], status = 0, loaded;
	pid_t pid;

	if (pipe(fds) < 0 || (pid = fork()) < 0) {
		tap_ok(0, "live discovery: pipe/fork");
		return;
	}
	if (pid == 0) {
		dup2(fds[1], 2);
		close(fds[0]);
		setenv("HWLOC_COMPONENTS_VERBOSE", "1", 1);
		loaded = ddp_topo_load(&t, NULL, err, sizeof(err)) == 0 &&
			 ddp_topo_is_thissystem(t);
		ddp_topo_destroy(t);
		_exit(loaded ? 0 : 1);
	}
	close(fds[1]);
	while (len + 1 < sizeof(log) &&
	       (n = read(fds[0], log + len, sizeof(log) - 1 - len)) > 0)
		len += (size_t)n;
	log[len] = '\0';
	close(fds[0]);
	waitpid(pid, &status, 0);
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "live discovery of this machine loads and is this system");
	final = strstr(log, "Final list of enabled discovery components");
	if (!tap_ok(final && strstr(final, "linux") &&
			    !strstr(final, "opencl") && !strstr(final, "gl("),
		    "live discovery enables linux, not opencl or gl")) {
		tap_diag("%.300s", final ? final : log);
	}
}

int
main(void)
{
	DIR *d = opendir(topodir);
	struct dirent *e;
	char path[4096];
	enum ddp_bind b;
	struct ddp_topo *t = NULL;
	char err[256];

	tap_ok(ddp_bind_parse("numa", &b) == 0 && b == DDP_BIND_NUMA,
	       "bind mode parses");
	tap_ok(ddp_bind_parse("sideways", &b) < 0, "bad bind mode refused");
	check_live_discovery();
	check_rank_limit();
	tap_ok(ddp_topo_load(&t, "/nonexistent.xml", err, sizeof(err)) < 0 &&
		       !t && strstr(err, "/nonexistent.xml"),
	       "missing topology file reported by name");
	if (!d) {
		tap_ok(1, "# skip no fixtures at %s", topodir);
		return tap_done();
	}
	while ((e = readdir(d)) != NULL) {
		size_t l = strlen(e->d_name);

		if (l < 4 || strcmp(e->d_name + l - 4, ".xml") != 0)
			continue;
		if (ddp_fmt(path, sizeof(path), "%s/%s", topodir, e->d_name) <
		    0)
			continue;
		check_topology(path, e->d_name);
	}
	closedir(d);
	/* Slurm core ids and CPU lists on a known machine. */
	if (ddp_topo_load(&t, "tests/topologies/24em64t-2n6c2t-pci.xml", err,
			  sizeof(err)) == 0) {
		hwloc_bitmap_t s = hwloc_bitmap_alloc();
		char *str = NULL;

		tap_ok(ddp_topo_cpus_from_slurm_cores(t, "0-1", s, err,
						      sizeof(err)) == 0 &&
			       hwloc_bitmap_list_asprintf(&str, s) >= 0 &&
			       strcmp(str, "0,2,12,14") == 0,
		       "Slurm cores 0-1 map to both hyperthreads");
		free(str);
		tap_ok(ddp_topo_cpus_from_slurm_cores(t, "0-15", s, err,
						      sizeof(err)) < 0 &&
			       strstr(err, "12 cores"),
		       "more Slurm cores than the topology has is reported");
		tap_ok(ddp_topo_cpus_from_list(t, "1,3,x", s, err,
					       sizeof(err)) < 0,
		       "bad CPU list refused");
		tap_ok(ddp_topo_cpus_from_list(t, "100-200", s, err,
					       sizeof(err)) < 0,
		       "CPU list outside the machine refused");
		hwloc_bitmap_free(s);
		ddp_topo_destroy(t);
	}
	return tap_done();
}
