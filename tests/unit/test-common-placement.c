/* SPDX-License-Identifier: BSD-3-Clause */
/* Invariants of the placement on every topology fixture: shares disjoint
 * and inside the allowed CPUs, fair to one unit, GPUs in PCI order. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ddp_util.h"
#include "placement.h"
#include "tap.h"

static const char *topodir = "../shared/topologies";

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
	if (ddp_topo_load(&t, "../shared/topologies/24em64t-2n6c2t-pci.xml",
			  err, sizeof(err)) == 0) {
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
