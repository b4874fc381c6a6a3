/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The topology cache (common/topocache.c) on this machine: a cache written
 * by root gives the same topology and the same plans as a live discovery;
 * every file the reader must not trust (not root's, writable by others, in
 * a directory others may write, a symlink, another boot, another hwloc,
 * truncated, garbage, empty, a FIFO) is a miss that says why, never a
 * crash or a hang, and ddp_topo_load_cached then discovers (and as root
 * rewrites the cache). Needs root for the ownership cases (skips them
 * with one line otherwise).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ddp_util.h"
#include "placement.h"
#include "tap.h"
#include "topocache.h"

static char dir[64], path[128];
static struct ddp_topo *keep;

static char *
slurp(const char *p, size_t *len)
{
	FILE *f = fopen(p, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
	    fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) &&
	    fread(buf, 1, (size_t)n, f) == (size_t)n) {
		buf[n] = '\0';
		*len = (size_t)n;
	} else {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

static int
spit(const char *p, const char *buf, size_t len, mode_t mode)
{
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, mode);
	int rc = -1;

	if (fd < 0)
		return -1;
	if (write(fd, buf, len) == (ssize_t)len && fchmod(fd, mode) == 0)
		rc = 0;
	close(fd);
	return rc;
}

/* A fresh cache written as the plugin writes it. */
static int
fresh(void)
{
	char err[512];

	unlink(path);
	return ddp_topo_cache_write(path, NULL, err, sizeof(err));
}

/* Expects a miss whose reason contains want. */
static void
miss(const char *want, const char *name)
{
	struct ddp_topo *t = NULL;
	char why[1024];
	int r = ddp_topo_cache_read(path, 1, &t, why, sizeof(why));

	if (!tap_ok(r == 0 && !t && strstr(why, want), "%s: refused (%s)", name,
		    want))
		tap_diag("read %d, why '%s'", r, why);
	ddp_topo_destroy(t);
}

/* What placement and the cache contract use, one line per object in
 * hwloc's tree order: type, subtype, OS index, name, CPU and NUMA sets,
 * and for devices their class and PCI address. hwloc's gp_index is left
 * out: it numbers objects in discovery order, which a restricted
 * discovery changes on some machines (one L3 per core) and which no
 * caller of the cache reads. */
static int
summarize(FILE *out, hwloc_topology_t topo, hwloc_obj_t obj)
{
	char type[64], cpus[256] = "-", mems[256] = "-";
	hwloc_obj_t child = NULL;

	hwloc_obj_type_snprintf(type, sizeof(type), obj, 1);
	if (obj->cpuset)
		hwloc_bitmap_list_snprintf(cpus, sizeof(cpus), obj->cpuset);
	if (obj->nodeset)
		hwloc_bitmap_list_snprintf(mems, sizeof(mems), obj->nodeset);
	fprintf(out, "%d %s %s os=%u name=%s cpus=%s mems=%s", obj->depth, type,
		obj->subtype ? obj->subtype : "-", obj->os_index,
		obj->name ? obj->name : "-", cpus, mems);
	if (obj->type == HWLOC_OBJ_PCI_DEVICE)
		fprintf(out, " pci=%04x:%02x:%02x.%01x class=%04x",
			obj->attr->pcidev.domain, obj->attr->pcidev.bus,
			obj->attr->pcidev.dev, obj->attr->pcidev.func,
			obj->attr->pcidev.class_id);
	else if (obj->type == HWLOC_OBJ_OS_DEVICE)
		fprintf(out, " osdev=%d", (int)obj->attr->osdev.type);
	if (fputc('\n', out) == EOF)
		return -1;
	while ((child = hwloc_get_next_child(topo, obj, child)))
		if (summarize(out, topo, child) < 0)
			return -1;
	return 0;
}

/* The summary of a whole topology as one string, NULL on failure. */
static char *
topo_summary(struct ddp_topo *t)
{
	hwloc_topology_t topo = ddp_topo_hwloc(t);
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	int rc;

	if (!out)
		return NULL;
	rc = summarize(out, topo, hwloc_get_root_obj(topo));
	if (fclose(out) != 0 || rc < 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

static int
same_plans(struct ddp_topo *a, struct ddp_topo *b, unsigned ranks)
{
	struct ddp_plan *pa = NULL, *pb = NULL;
	char err[256];
	unsigned i;
	int same = 0;

	if (ddp_plan_node(a, ranks, NULL, 0, NULL, DDP_BIND_CORE, &pa, err,
			  sizeof(err)) < 0 ||
	    ddp_plan_node(b, ranks, NULL, 0, NULL, DDP_BIND_CORE, &pb, err,
			  sizeof(err)) < 0)
		goto out;
	same = pa->shared == pb->shared;
	for (i = 0; i < ranks && same; i++)
		same = !strcmp(pa->rank[i].cpus, pb->rank[i].cpus) &&
		       !strcmp(pa->rank[i].bindcpus, pb->rank[i].bindcpus) &&
		       !strcmp(pa->rank[i].numa, pb->rank[i].numa) &&
		       !strcmp(pa->rank[i].nic, pb->rank[i].nic) &&
		       !strcmp(pa->rank[i].hca, pb->rank[i].hca) &&
		       !strcmp(pa->rank[i].busid, pb->rank[i].busid);
out:
	ddp_plan_free(pa);
	ddp_plan_free(pb);
	return same;
}

static void
check_same_as_live(void)
{
	struct ddp_topo *live = NULL, *cached = NULL;
	char err[256], why[1024], *x1 = NULL, *x2 = NULL;
	unsigned r;

	tap_ok(ddp_topo_load(&live, NULL, err, sizeof(err)) == 0,
	       "live discovery");
	tap_ok(fresh() == 0, "cache written");
	if (!tap_ok(ddp_topo_cache_read(path, 1, &cached, why, sizeof(why)) ==
			    1,
		    "cache read back"))
		tap_diag("why: %s", why);
	if (!live || !cached)
		goto out;
	tap_ok(ddp_topo_is_thissystem(cached),
	       "a cached topology is this system: binding applies");
	tap_ok(ddp_topo_ngpus(live) == ddp_topo_ngpus(cached), "same GPUs (%u)",
	       ddp_topo_ngpus(live));
	x1 = topo_summary(live);
	x2 = topo_summary(cached);
	if (!tap_ok(x1 && x2 && !strcmp(x1, x2),
		    "the cached topology has the live one's objects, CPU sets "
		    "and devices"))
		tap_diag("live %zu bytes, cached %zu bytes",
			 x1 ? strlen(x1) : 0, x2 ? strlen(x2) : 0);
	for (r = 1; r <= 5; r += 2)
		tap_ok(same_plans(live, cached, r),
		       "%u ranks: the same placement live and cached", r);
out:
	free(x1);
	free(x2);
	ddp_topo_destroy(live);
	ddp_topo_destroy(cached);
}

/* Runs in a child confined by the cpuset cgroup cg: with write_inside
 * the child writes the cache and the parent compares it with its own live
 * discovery (CPUs and plans), else the parent writes it and the child
 * compares (every object, as topo_summary gives it). 1 when the
 * two are the same, 0 when not, -1 when it could not run. */
static int
confined_same(const char *cg, int write_inside)
{
	struct ddp_topo *live = NULL, *cached = NULL;
	char why[1024], err[256], *x1 = NULL, *x2 = NULL;
	int status = 0, same;
	pid_t pid;

	unlink(path);
	if (!write_inside && fresh() < 0)
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		char tasks[256];
		FILE *f;

		if (ddp_fmt(tasks, sizeof(tasks), "%s/cgroup.procs", cg) < 0 ||
		    !(f = fopen(tasks, "w")) ||
		    fprintf(f, "%d\n", getpid()) < 0 || fclose(f) != 0)
			_exit(3);
		if (write_inside)
			_exit(fresh() < 0 ? 3 : 0);
		if (ddp_topo_load(&live, NULL, err, sizeof(err)) < 0 ||
		    ddp_topo_cache_read(path, 1, &cached, why, sizeof(why)) !=
			    1)
			_exit(3);
		x1 = topo_summary(live);
		x2 = topo_summary(cached);
		_exit(x1 && x2 && !strcmp(x1, x2) &&
				      hwloc_get_nbobjs_by_type(
					      ddp_topo_hwloc(cached),
					      HWLOC_OBJ_PU) == 1
			      ? 0
			      : 1);
	}
	waitpid(pid, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) == 3)
		return -1;
	if (!write_inside)
		return WEXITSTATUS(status) == 0;
	/* The writer could not run cpuid on the CPUs outside its cpuset, so
	 * some cache attributes (Inclusive) may be missing: compare what
	 * placement uses, every CPU and the plans. */
	if (ddp_topo_load(&live, NULL, err, sizeof(err)) < 0 ||
	    ddp_topo_cache_read(path, 1, &cached, why, sizeof(why)) != 1)
		same = -1;
	else
		same = hwloc_get_nbobjs_by_type(ddp_topo_hwloc(cached),
						HWLOC_OBJ_PU) ==
			       hwloc_get_nbobjs_by_type(ddp_topo_hwloc(live),
							HWLOC_OBJ_PU) &&
		       same_plans(live, cached, 1) &&
		       same_plans(live, cached, 2) &&
		       same_plans(live, cached, 3);
	free(x1);
	free(x2);
	ddp_topo_destroy(live);
	ddp_topo_destroy(cached);
	return same;
}

/* Writes text to the file folder/name; 0 on success. */
static int
put(const char *folder, const char *name, const char *text)
{
	char file[256];
	FILE *f;
	int ok;

	if (ddp_fmt(file, sizeof(file), "%s/%s", folder, name) < 0 ||
	    !(f = fopen(file, "w")))
		return -1;
	ok = fputs(text, f) >= 0;
	return fclose(f) == 0 && ok ? 0 : -1;
}

/* The folder under which a cpuset cgroup can be made: the cgroup v1
 * cpuset hierarchy, else the cgroup v2 root with the cpuset controller
 * enabled for its children; NULL when neither is there. */
static const char *
cpuset_parent(void)
{
	static const char v1[] = "/sys/fs/cgroup/cpuset",
			  v2[] = "/sys/fs/cgroup";
	char ctl[256] = "";
	struct stat st;
	FILE *f;

	if (stat("/sys/fs/cgroup/cpuset/cpuset.cpus", &st) == 0)
		return v1;
	f = fopen("/sys/fs/cgroup/cgroup.controllers", "r");
	if (!f)
		return NULL;
	if (!fgets(ctl, sizeof(ctl), f))
		ctl[0] = '\0';
	fclose(f);
	if (!strstr(ctl, "cpuset") ||
	    put(v2, "cgroup.subtree_control", "+cpuset\n") < 0)
		return NULL;
	return v2;
}

/* A step confined to some CPUs (a job's cpuset) sees the same topology
 * from the cache as from a live discovery, whoever wrote the cache: the
 * file holds the whole machine, the reader applies its own cpuset. The
 * reader gets the last CPU this test may use, whatever the machine's CPU
 * numbering and cgroup layout. */
static void
check_confined(void)
{
	const char *parent = cpuset_parent();
	char cg[256], cpu[32], mems[256] = "";
	cpu_set_t allowed;
	FILE *f;
	int i, last = -1;

	if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0)
		for (i = 0; i < CPU_SETSIZE; i++)
			if (CPU_ISSET(i, &allowed))
				last = i;
	if (!parent || CPU_COUNT(&allowed) < 2) {
		tap_ok(1, "# skip confined readers: no cpuset cgroup to make "
			  "(cgroup v1 cpuset or v2 with the cpuset controller) "
			  "or fewer than 2 CPUs to use");
		return;
	}
	if (ddp_fmt(cg, sizeof(cg), "%s/ddp-topocache-test", parent) < 0 ||
	    ddp_fmt(cpu, sizeof(cpu), "%d\n", last) < 0)
		return;
	rmdir(cg);
	if (mkdir(cg, 0755) < 0) {
		tap_ok(1, "# skip confined readers: cannot make %s", cg);
		return;
	}
	/* cgroup v1 needs the memory nodes set, as its parent has them. */
	if (ddp_fmt(mems, sizeof(mems), "%s/cpuset.mems", parent) == 0 &&
	    (f = fopen(mems, "r")) != NULL) {
		if (!fgets(mems, sizeof(mems), f))
			mems[0] = '\0';
		fclose(f);
	} else {
		mems[0] = '\0';
	}
	if (put(cg, "cpuset.cpus", cpu) < 0 ||
	    (mems[0] && mems[0] != '\n' && put(cg, "cpuset.mems", mems) < 0)) {
		tap_ok(1, "# skip confined readers: cannot set up %s", cg);
		rmdir(cg);
		return;
	}
	tap_ok(confined_same(cg, 0) == 1,
	       "a reader confined to one CPU gets its live topology from a "
	       "cache written outside");
	tap_ok(confined_same(cg, 1) == 1,
	       "a cache written inside that cpuset still holds every CPU: an "
	       "unconfined reader gets its live topology");
	rmdir(cg);
}

/* Rewrites the cache with the first occurrence of from replaced. */
static int
edit(const char *from, const char *to)
{
	size_t len = 0;
	char *buf = slurp(path, &len), *at, *out = NULL;
	int rc = -1;

	if (!buf || !(at = strstr(buf, from)))
		goto out;
	out = malloc(len + strlen(to) + 1);
	if (!out)
		goto out;
	memcpy(out, buf, (size_t)(at - buf));
	memcpy(out + (at - buf), to, strlen(to));
	memcpy(out + (at - buf) + strlen(to), at + strlen(from),
	       len - (size_t)(at - buf) - strlen(from) + 1);
	rc = spit(path, out, strlen(out), 0644);
out:
	free(buf);
	free(out);
	return rc;
}

static void
check_refusals(void)
{
	char key[1400], err[256], boot[128], *k, *buf = NULL;
	size_t len = 0;

	tap_ok(ddp_topo_cache_key(key, sizeof(key), err, sizeof(err)) == 0 &&
		       strstr(key, "boot ") && strstr(key, "hwloc 0x") &&
		       strstr(key, "pci "),
	       "this machine's key: %s", key);

	unlink(path);
	miss("absent", "no file");

	tap_ok(fresh() == 0 && chown(path, 1, 1) == 0, "setup: owner uid 1");
	miss("owned by uid 1", "a file another user owns");
	tap_ok(fresh() == 0 && chmod(path, 0664) == 0, "setup: mode 0664");
	miss("mode 0664", "a group-writable file");
	tap_ok(fresh() == 0 && chmod(path, 0646) == 0, "setup: mode 0646");
	miss("mode 0646", "a world-writable file");

	tap_ok(fresh() == 0 && chmod(dir, 0775) == 0, "setup: dir mode 0775");
	miss("mode 0775", "a group-writable directory");
	chmod(dir, 0700);
	tap_ok(chown(dir, 1, 1) == 0, "setup: dir owned by uid 1");
	miss("owned by uid 1", "a directory another user owns");
	tap_ok(chown(dir, 0, 0) == 0, "setup: dir back to root");

	tap_ok(fresh() == 0 && rename(path, "/tmp/ddp-topocache-target") == 0 &&
		       symlink("/tmp/ddp-topocache-target", path) == 0,
	       "setup: symlink to a good cache");
	miss("symlink", "a symlink");
	unlink(path);
	unlink("/tmp/ddp-topocache-target");
	tap_ok(mkdir(path, 0755) == 0, "setup: a directory");
	miss("regular file", "a directory in its place");
	rmdir(path);
	tap_ok(mkfifo(path, 0644) == 0, "setup: a FIFO");
	miss("regular file", "a FIFO (no hang)");
	unlink(path);

	/* The key's parts, one at a time. */
	if (sscanf(key, "format %*d; boot %127[^;]", boot) == 1) {
		tap_ok(fresh() == 0 &&
			       edit(boot,
				    "00000000-0000-0000-0000-000000000000") ==
				       0,
		       "setup: another boot id");
		miss("stale", "a cache of another boot");
	}
	tap_ok(fresh() == 0 && edit("hwloc 0x", "hwloc 0x9") == 0,
	       "setup: another hwloc version");
	miss("stale", "a cache of another hwloc");
	tap_ok(fresh() == 0 && edit("; pci ", "; pci 1") == 0,
	       "setup: another PCI device count");
	miss("stale", "a cache of other PCI devices");
	tap_ok(fresh() == 0 && edit("; cpus ", "; cpus 0-4095,") == 0,
	       "setup: other online CPUs");
	miss("stale", "a cache of other online CPUs");

	tap_ok(fresh() == 0 && (buf = slurp(path, &len)) != NULL &&
		       spit(path, buf, len / 2, 0644) == 0,
	       "setup: truncated to half");
	free(buf);
	buf = NULL;
	miss("not a topology", "a truncated cache");
	tap_ok(spit(path,
		    "\x7f"
		    "ELF garbage <topology> <<<",
		    27, 0644) == 0,
	       "setup: garbage");
	miss("not a topology", "a corrupt cache");
	tap_ok(spit(path, "", 0, 0644) == 0, "setup: empty");
	miss("size 0", "an empty cache");
	tap_ok(fresh() == 0 && (buf = slurp(path, &len)) != NULL &&
		       (k = strstr(buf, DDP_TOPO_CACHE_INFO)) != NULL &&
		       (k[0] = 'X') && spit(path, buf, len, 0644) == 0,
	       "setup: an hwloc export without the key");
	free(buf);
	buf = NULL;
	miss("no cache key", "a plain hwloc export");
}

/* The infos hwloc's Linux backend reads from root-only files of
 * /sys/class/dmi/id (serials, UUID) and the asset tags, with a value each
 * that appears nowhere else. */
static const char *const private_infos[][2] = {
	{"DMIProductSerial", "ddp-test-product-serial"},
	{"DMIProductUUID", "ddp-test-0123-4567-89ab-cdef"},
	{"DMIBoardSerial", "ddp-test-board-serial"},
	{"DMIBoardAssetTag", "ddp-test-board-asset"},
	{"DMIChassisSerial", "ddp-test-chassis-serial"},
	{"DMIChassisAssetTag", "ddp-test-chassis-asset"},
};
#define N_PRIVATE (sizeof(private_infos) / sizeof(private_infos[0]))

/* Counts the private infos' names and values found in the file at p. */
static int
private_in(const char *p)
{
	size_t len = 0, i;
	char *buf = slurp(p, &len);
	int found = 0;

	if (!buf)
		return -1;
	for (i = 0; i < N_PRIVATE; i++)
		found += (strstr(buf, private_infos[i][0]) != NULL) +
			 (strstr(buf, private_infos[i][1]) != NULL);
	free(buf);
	return found;
}

/* The cache is world-readable: a topology whose root carries the DMI
 * serials, UUID and asset tags (as hwloc reports them to root) is written
 * without them, and keeps the public DMI infos and the key. */
static void
check_no_private_infos(void)
{
	static const char src_name[] =
		"tests/topologies/32em64t-2n8c2t-pci-normalio.xml";
	char src[128], err[512], why[1024], line[160], *xml = NULL, *at;
	char *out = NULL;
	struct ddp_topo *t = NULL;
	size_t len = 0, olen = 0, i;
	FILE *f = NULL;
	int ok = 0;

	if (ddp_fmt(src, sizeof(src), "%s/source.xml", dir) < 0 ||
	    !(xml = slurp(src_name, &len)) ||
	    !(at = strstr(xml, "<info name=\"DMIProductName\"")) ||
	    !(f = open_memstream(&out, &olen)))
		goto out;
	fwrite(xml, 1, (size_t)(at - xml), f);
	for (i = 0; i < N_PRIVATE; i++) {
		ddp_fmt(line, sizeof(line),
			"<info name=\"%s\" value=\"%s\"/>\n",
			private_infos[i][0], private_infos[i][1]);
		fputs(line, f);
	}
	fputs(at, f);
	ok = fclose(f) == 0 && spit(src, out, olen, 0644) == 0;
	f = NULL;
out:
	if (f)
		fclose(f);
	free(xml);
	free(out);
	if (!tap_ok(ok && private_in(src) == 2 * (int)N_PRIVATE,
		    "setup: a topology with DMI serials, UUID and asset tags"))
		return;
	unlink(path);
	if (!tap_ok(ddp_topo_cache_write(path, src, err, sizeof(err)) == 0,
		    "cache written from it"))
		tap_diag("%s", err);
	if (!tap_ok(private_in(path) == 0,
		    "the cache holds none of the DMI serials, UUID or asset "
		    "tags, names or values"))
		tap_diag("%d found", private_in(path));
	xml = slurp(path, &len);
	tap_ok(xml && strstr(xml, "DMIProductName") &&
		       strstr(xml, "DMIBoardVendor") &&
		       strstr(xml, DDP_TOPO_CACHE_INFO),
	       "the public DMI infos and the cache key stay");
	free(xml);
	if (!tap_ok(ddp_topo_cache_read(path, 0, &t, why, sizeof(why)) == 1 &&
			    t &&
			    hwloc_get_nbobjs_by_type(ddp_topo_hwloc(t),
						     HWLOC_OBJ_PU) == 32,
		    "and it reads back, all 32 PUs"))
		tap_diag("why: %s", why);
	ddp_topo_destroy(t);
	unlink(src);
	/* This machine as root discovers it: whatever its firmware says,
	 * none of it reaches the cache. */
	tap_ok(fresh() == 0 && private_in(path) == 0,
	       "a cache of this machine holds no DMI serial, UUID or asset "
	       "tag");
	xml = slurp(path, &len);
	tap_ok(xml && !strstr(xml, "Serial") && !strstr(xml, "UUID") &&
		       !strstr(xml, "AssetTag"),
	       "nor any info named like a serial number, UUID or asset tag");
	free(xml);
}

/* Every directory above the cache is checked too: one that others may
 * write to (or own) lets them swap the whole tree below it. */
static void
check_grandparent(void)
{
	char sub[160], deep[192], why[1024], err[1024];
	struct ddp_topo *t = NULL;
	int r;

	if (ddp_fmt(sub, sizeof(sub), "%s/sub", dir) < 0 ||
	    ddp_fmt(deep, sizeof(deep), "%s/topology.xml", sub) < 0)
		return;
	tap_ok(chmod(dir, 0755) == 0 &&
		       ddp_topo_cache_write(deep, NULL, err, sizeof(err)) == 0,
	       "setup: a cache two directories below /tmp");
	tap_ok(ddp_topo_cache_read(deep, 1, &t, why, sizeof(why)) == 1,
	       "it is used");
	ddp_topo_destroy(t);
	t = NULL;
	tap_ok(chmod(dir, 0757) == 0, "setup: its grandparent mode 0757");
	r = ddp_topo_cache_read(deep, 1, &t, why, sizeof(why));
	if (!tap_ok(r == 0 && !t && strstr(why, dir) && strstr(why, "0757"),
		    "a world-writable grandparent: refused, naming it"))
		tap_diag("read %d why '%s'", r, why);
	ddp_topo_destroy(t);
	t = NULL;
	if (!tap_ok(ddp_topo_cache_write(deep, NULL, err, sizeof(err)) < 0 &&
			    strstr(err, dir) && strstr(err, "0757"),
		    "and nothing is written below it"))
		tap_diag("err '%s'", err);
	tap_ok(chmod(dir, 0755) == 0 && chown(dir, 1, 1) == 0,
	       "setup: its grandparent owned by uid 1");
	r = ddp_topo_cache_read(deep, 1, &t, why, sizeof(why));
	if (!tap_ok(r == 0 && !t && strstr(why, dir) &&
			    strstr(why, "owned by uid 1"),
		    "a grandparent another user owns: refused, naming it"))
		tap_diag("read %d why '%s'", r, why);
	ddp_topo_destroy(t);
	tap_ok(chown(dir, 0, 0) == 0, "setup: back to root");
	unlink(deep);
	rmdir(sub);
}

static void
check_policy(void)
{
	struct ddp_topo *t = NULL;
	char note[1200], err[256];
	struct stat st;

	tap_ok(chmod(dir, 0700) == 0 && fresh() == 0 && chmod(path, 0666) == 0,
	       "setup: a world-writable cache");
	tap_ok(ddp_topo_load_cached(path, &t, note, sizeof(note), err,
				    sizeof(err)) == 0 &&
		       t && strstr(note, "discovered, cache") &&
		       strstr(note, "written (was: owned by uid 0 with mode "
				    "0666"),
	       "root ignores it, discovers and rewrites it: %s", note);
	ddp_topo_destroy(t);
	t = NULL;
	tap_ok(stat(path, &st) == 0 && st.st_uid == 0 &&
		       (st.st_mode & 07777) == 0644,
	       "the rewritten cache is root's, 0644");
	tap_ok(ddp_topo_load_cached(path, &t, note, sizeof(note), err,
				    sizeof(err)) == 1 &&
		       t && !strncmp(note, "cache ", 6),
	       "the next load uses it: %s", note);
	ddp_topo_destroy(t);
	t = NULL;
	tap_ok(ddp_topo_load_cached("", &t, note, sizeof(note), err,
				    sizeof(err)) == 0 &&
		       t && strstr(note, "none"),
	       "topology_cache none: discovered (%s)", note);
	ddp_topo_destroy(t);
	t = NULL;
	setenv("HWLOC_XMLFILE", "tests/topologies/nvidiaDGX2.xml", 1);
	tap_ok(ddp_topo_load_cached(path, &t, note, sizeof(note), err,
				    sizeof(err)) == 0 &&
		       t && strstr(note, "HWLOC_XMLFILE") &&
		       ddp_topo_ngpus(t) == 16,
	       "HWLOC_XMLFILE wins over the cache (%s)", note);
	unsetenv("HWLOC_XMLFILE");
	ddp_topo_destroy(t);
	t = NULL;
	unlink(path);
	rmdir(dir);
	tap_ok(ddp_topo_load_cached(path, &t, note, sizeof(note), err,
				    sizeof(err)) == 0 &&
		       t && strstr(note, "written (was: directory") &&
		       stat(dir, &st) == 0 && (st.st_mode & 07777) == 0755,
	       "a missing directory is made 0755 (%s)", note);
	ddp_topo_destroy(t);
	t = NULL;
	tap_ok(chmod(dir, 0775) == 0 &&
		       ddp_topo_cache_write(path, NULL, err, sizeof(err)) < 0 &&
		       strstr(err, dir) && strstr(err, "0775"),
	       "no cache written into a group-writable directory: %s", err);
	chmod(dir, 0700);
}

/* Not root: a bad cache is ignored and never rewritten. */
static void
check_not_root(void)
{
	int pfd[2], status = 0;
	char note[1200] = "";
	struct stat before, after;
	pid_t pid;
	ssize_t n;

	tap_ok(chmod(dir, 0755) == 0 && fresh() == 0 &&
		       chmod(path, 0664) == 0 && stat(path, &before) == 0,
	       "setup: a group-writable cache");
	if (pipe(pfd) < 0)
		return;
	pid = fork();
	if (pid == 0) {
		struct ddp_topo *t = NULL;
		char err[256];

		close(pfd[0]);
		if (setegid(65534) < 0 || seteuid(65534) < 0)
			_exit(2);
		if (ddp_topo_load_cached(path, &t, note, sizeof(note), err,
					 sizeof(err)) < 0 ||
		    !t)
			_exit(3);
		if (write(pfd[1], note, strlen(note)) < 0)
			_exit(4);
		_exit(0);
	}
	close(pfd[1]);
	n = read(pfd[0], note, sizeof(note) - 1);
	note[n > 0 ? n : 0] = '\0';
	close(pfd[0]);
	waitpid(pid, &status, 0);
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
		       strstr(note, "discovered, cache") &&
		       strstr(note, "ignored: owned by uid 0 with mode 0664"),
	       "another user discovers and says why: %s", note);
	tap_ok(stat(path, &after) == 0 && after.st_ino == before.st_ino &&
		       (after.st_mode & 07777) == 0664,
	       "and leaves the file alone");
}

int
main(void)
{
	char err[256];

	if (geteuid() != 0) {
		tap_ok(1, "# skip the cache is trusted only from root; run as "
			  "root");
		return tap_done();
	}
	if (ddp_fmt(dir, sizeof(dir), "/tmp/ddp-topocache.XXXXXX") < 0 ||
	    !mkdtemp(dir) ||
	    ddp_fmt(path, sizeof(path), "%s/topology.xml", dir) < 0) {
		tap_ok(0, "temporary directory: %s", strerror(errno));
		return tap_done();
	}
	/* hwloc loads its plugins while any topology lives and unloads
	 * them after the last; libpciaccess's allocations are then referenced
	 * only from the unloaded library, which LeakSanitizer reports as
	 * leaks. One topology kept to the end keeps the plugins loaded. */
	tap_ok(ddp_topo_load(&keep, NULL, err, sizeof(err)) == 0,
	       "a topology held for the whole test");
	check_same_as_live();
	check_confined();
	check_refusals();
	check_no_private_infos();
	check_grandparent();
	check_policy();
	check_not_root();
	unlink(path);
	rmdir(dir);
	return tap_done();
}
