/* SPDX-License-Identifier: BSD-3-Clause */
/* The node's topology cache: see topocache.h for what is trusted and why. */
#include "topocache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "ddp_util.h"
#include "trusted_path.h"

/* Bumped whenever what is exported or how it is read changes. */
#define CACHE_FORMAT 1

#define BOOT_ID_PATH "/proc/sys/kernel/random/boot_id"
#define CPU_ONLINE_PATH "/sys/devices/system/cpu/online"
#define PCI_DEVICES_PATH "/sys/bus/pci/devices"

/* Messages into the caller's buffer; a cut message still says enough. */
__attribute__((format(printf, 3, 4))) static void
say(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!len)
		return;
	va_start(ap, fmt);
	if (vsnprintf(buf, len, fmt, ap) < 0)
		buf[0] = '\0';
	va_end(ap);
}

/* The first line of a small file, without its newline; 0 or -1. */
static int
read_line(const char *path, char *buf, size_t len)
{
	if (ddp_read_text(path, buf, len) <= 0)
		return -1;
	buf[strcspn(buf, "\n")] = '\0';
	return buf[0] ? 0 : -1;
}

/* FNV-1a of one name. */
static uint64_t
fnv1a(const char *s)
{
	uint64_t h = 14695981039346656037ULL;

	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ULL;
	}
	return h;
}

/* The PCI devices present: how many, and a hash of their addresses that
 * does not depend on the order readdir gives them in. */
static void
pci_summary(unsigned long *count, uint64_t *hash)
{
	struct dirent *e;
	DIR *d;

	*count = 0;
	*hash = 0;
	d = opendir(PCI_DEVICES_PATH);
	if (!d)
		return; /* no PCI bus: "0 0" is its key */
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		(*count)++;
		*hash += fnv1a(e->d_name) * 0x9e3779b97f4a7c15ULL;
	}
	closedir(d);
}

int
ddp_topo_cache_key(char *buf, size_t len, char *err, size_t errlen)
{
	char boot[64], cpus[1024];
	unsigned long npci;
	uint64_t hpci;

	if (read_line(BOOT_ID_PATH, boot, sizeof(boot)) < 0) {
		say(err, errlen, "cannot read the boot id (%s)", BOOT_ID_PATH);
		return -1;
	}
	/* A machine whose online list cannot be read keys on "?"; the PCI
	 * part still changes with the hardware. */
	if (read_line(CPU_ONLINE_PATH, cpus, sizeof(cpus)) < 0)
		ddp_fmt(cpus, sizeof(cpus), "?");
	pci_summary(&npci, &hpci);
	if (ddp_fmt(buf, len,
		    "format %d; boot %s; hwloc 0x%x/0x%x; cpus %s; pci %lu "
		    "%016llx",
		    CACHE_FORMAT, boot, (unsigned)HWLOC_API_VERSION,
		    hwloc_get_api_version(), cpus, npci,
		    (unsigned long long)hpci) < 0) {
		say(err, errlen, "cache key too long");
		return -1;
	}
	return 0;
}

/* Splits path into its directory and its last component; 0 or -1. */
static int
split_path(const char *path, char *dir, size_t dirlen, const char **base)
{
	const char *slash = strrchr(path, '/');

	if (path[0] != '/' || !slash || !slash[1])
		return -1;
	*base = slash + 1;
	if (slash == path)
		return ddp_fmt(dir, dirlen, "/");
	if ((size_t)(slash - path) >= dirlen)
		return -1;
	memcpy(dir, path, (size_t)(slash - path));
	dir[slash - path] = '\0';
	return 0;
}

/* Reads the whole trusted file into a malloc'ed, NUL-terminated buffer. */
static char *
read_trusted(const char *path, size_t *lenp, char *why, size_t whylen)
{
	char dir[PATH_MAX], *buf = NULL;
	const char *base;
	struct stat st;
	size_t got = 0;
	int dfd = -1, fd = -1;

	if (split_path(path, dir, sizeof(dir), &base) < 0) {
		say(why, whylen, "not an absolute file path");
		goto fail;
	}
	dfd = ddp_trusted_dir_open(dir, 0, 0, why, whylen);
	if (dfd < 0)
		goto fail;
	fd = openat(dfd, base,
		    O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		say(why, whylen, "%s",
		    errno == ENOENT  ? "absent"
		    : errno == ELOOP ? "a symlink"
				     : strerror(errno));
		goto fail;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		say(why, whylen, "not a regular file");
		goto fail;
	}
	if (st.st_uid != 0 || (st.st_mode & 022)) {
		say(why, whylen,
		    "owned by uid %lu with mode %04o (want root, not writable "
		    "by group or others)",
		    (unsigned long)st.st_uid,
		    (unsigned)(st.st_mode & DDP_MODE_BITS));
		goto fail;
	}
	if (st.st_size <= 0 || st.st_size > DDP_TOPO_CACHE_MAX) {
		say(why, whylen, "size %lld out of range 1-%ld",
		    (long long)st.st_size, DDP_TOPO_CACHE_MAX);
		goto fail;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		say(why, whylen, "out of memory");
		goto fail;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			say(why, whylen, "short read");
			goto fail;
		}
		got += (size_t)n;
	}
	buf[got] = '\0';
	*lenp = got;
	close(fd);
	close(dfd);
	return buf;
fail:
	free(buf);
	ddp_close(&fd);
	ddp_close(&dfd);
	return NULL;
}

int
ddp_topo_cache_read(const char *path, int thissystem, struct ddp_topo **out,
		    char *why, size_t whylen)
{
	char key[1400], err[256];
	hwloc_topology_t topo = NULL;
	const char *stored;
	char *buf = NULL;
	size_t len = 0;
	int rc = 0;

	*out = NULL;
	if (whylen)
		why[0] = '\0';
#if HWLOC_API_VERSION < 0x00020100
	(void)thissystem;
	say(why, whylen, "hwloc older than 2.1");
	goto out;
#else
	if (ddp_topo_cache_key(key, sizeof(key), err, sizeof(err)) < 0) {
		say(why, whylen, "%s", err);
		goto out;
	}
	buf = read_trusted(path, &len, why, whylen);
	if (!buf)
		goto out;
	if (hwloc_topology_init(&topo) < 0) {
		say(why, whylen, "hwloc_topology_init failed");
		goto out;
	}
	ddp_topo_set_filters(topo, 0);
	if (thissystem &&
	    hwloc_topology_set_flags(
		    topo,
		    HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM |
			    HWLOC_TOPOLOGY_FLAG_THISSYSTEM_ALLOWED_RESOURCES) <
		    0) {
		say(why, whylen, "hwloc refuses this-system flags");
		goto out;
	}
	if (len > 0x7fffffff ||
	    hwloc_topology_set_xmlbuffer(topo, buf, (int)len + 1) < 0 ||
	    hwloc_topology_load(topo) < 0) {
		say(why, whylen, "not a topology hwloc can read");
		goto out;
	}
	stored = hwloc_obj_get_info_by_name(hwloc_get_root_obj(topo),
					    DDP_TOPO_CACHE_INFO);
	if (!stored) {
		say(why, whylen, "no cache key in it");
		goto out;
	}
	if (strcmp(stored, key) != 0) {
		say(why, whylen, "stale (written for '%s', this is '%s')",
		    stored, key);
		goto out;
	}
	rc = ddp_topo_adopt(out, topo, why, whylen) == 0 ? 1 : 0;
	topo = NULL;
#endif
out:
	if (topo)
		hwloc_topology_destroy(topo);
	free(buf);
	return rc;
}

/* hwloc's Linux backend copies /sys/class/dmi/id into the root object's
 * infos as root sees it: serial numbers and the UUID, which sysfs shows to
 * root only, and asset tags. The cache is readable by every user (ranks
 * read it) and placement needs no identifier of a machine or device, so
 * every info named like one (DMIProductSerial, DMIProductUUID,
 * DMIBoardSerial, DMIChassisAssetTag, a disk's SerialNumber, ...) stays
 * out of it. */
static int
private_info(const char *name)
{
	return strstr(name, "Serial") || strstr(name, "UUID") ||
	       strstr(name, "AssetTag");
}

/* Removes the private infos from obj and everything below it. hwloc 2
 * has no call to remove an info: its array is edited in place, freed as
 * hwloc frees it. */
static void
drop_private_infos(hwloc_topology_t topo, hwloc_obj_t obj)
{
	hwloc_obj_t child = NULL;
	unsigned i, kept = 0;

	for (i = 0; i < obj->infos_count; i++) {
		if (private_info(obj->infos[i].name)) {
			free(obj->infos[i].name);
			free(obj->infos[i].value);
		} else {
			obj->infos[kept++] = obj->infos[i];
		}
	}
	obj->infos_count = kept;
	while ((child = hwloc_get_next_child(topo, obj, child)))
		drop_private_infos(topo, child);
}

#if HWLOC_API_VERSION >= 0x00020100
/* Loads the topology to cache: this machine's, or source_xml's. */
static int
load_whole_machine(hwloc_topology_t topo, const char *source_xml,
		   const char *path, char *err, size_t errlen)
{
	ddp_topo_set_filters(topo, !source_xml);
	/* The writer may run inside a job's cpuset: export the whole
	 * machine, the reader applies its own allowed set. */
	if ((!source_xml &&
	     hwloc_topology_set_flags(
		     topo, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED) < 0) ||
	    (source_xml && hwloc_topology_set_xml(topo, source_xml) < 0) ||
	    hwloc_topology_load(topo) < 0) {
		say(err, errlen, "%s: hwloc cannot load the topology%s%s", path,
		    source_xml ? " " : "", source_xml ? source_xml : "");
		return -1;
	}
	return 0;
}
#endif

int
ddp_topo_cache_write(const char *path, const char *source_xml, char *err,
		     size_t errlen)
{
	char dir[PATH_MAX], tmp[NAME_MAX + 1], key[1400], why[512];
	hwloc_topology_t topo = NULL;
	char *xml = NULL;
	const char *base;
	int len = 0, dfd = -1, fd = -1, rc = -1, made = 0;

#if HWLOC_API_VERSION < 0x00020100
	(void)source_xml;
	say(err, errlen, "%s: hwloc older than 2.1 has no cache", path);
	goto out;
#else
	if (split_path(path, dir, sizeof(dir), &base) < 0 ||
	    ddp_fmt(tmp, sizeof(tmp), ".%.200s.%ld.tmp", base, (long)getpid()) <
		    0) {
		say(err, errlen, "%s: not an absolute file path", path);
		goto out;
	}
	if (ddp_topo_cache_key(key, sizeof(key), why, sizeof(why)) < 0) {
		say(err, errlen, "%s: %s", path, why);
		goto out;
	}
	if (hwloc_topology_init(&topo) < 0) {
		say(err, errlen, "%s: hwloc_topology_init failed", path);
		goto out;
	}
	if (load_whole_machine(topo, source_xml, path, err, errlen) < 0)
		goto out;
	drop_private_infos(topo, hwloc_get_root_obj(topo));
	if (hwloc_obj_add_info(hwloc_get_root_obj(topo), DDP_TOPO_CACHE_INFO,
			       key) < 0 ||
	    hwloc_topology_export_xmlbuffer(topo, &xml, &len, 0) < 0 ||
	    len <= 1) {
		say(err, errlen, "%s: hwloc cannot export the topology", path);
		goto out;
	}
	dfd = ddp_trusted_dir_open(dir, geteuid(), 0755, why, sizeof(why));
	if (dfd < 0) {
		say(err, errlen, "%s: %s", path, why);
		goto out;
	}
	fd = openat(dfd, tmp,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		say(err, errlen, "%s/%s: %s", dir, tmp, strerror(errno));
		goto out;
	}
	made = 1;
	/* No fsync: the key holds the boot id, so a file torn by a crash is
	 * never read in the next boot; readers see the rename or nothing. */
	if (fchmod(fd, 0644) < 0 ||
	    ddp_write_all(fd, xml, (size_t)len - 1) < 0 || close(fd) < 0) {
		fd = -1;
		say(err, errlen, "%s/%s: %s", dir, tmp, strerror(errno));
		goto out;
	}
	fd = -1;
	if (renameat(dfd, tmp, dfd, base) < 0) {
		say(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	made = 0;
	rc = 0;
#endif
out:
	ddp_close(&fd);
	if (made)
		unlinkat(dfd, tmp, 0);
	ddp_close(&dfd);
	if (xml)
		hwloc_free_xmlbuffer(topo, xml);
	if (topo)
		hwloc_topology_destroy(topo);
	return rc;
}

int
ddp_topo_load_cached(const char *path, struct ddp_topo **out, char *note,
		     size_t notelen, char *err, size_t errlen)
{
	char why[1024], werr[512];

	*out = NULL;
	if (notelen)
		note[0] = '\0';
	if (!path || !path[0]) {
		say(note, notelen, "discovered (topology_cache none)");
		return ddp_topo_load(out, NULL, err, errlen);
	}
	if (getenv("HWLOC_XMLFILE")) {
		say(note, notelen, "HWLOC_XMLFILE (cache %s not used)", path);
		return ddp_topo_load(out, NULL, err, errlen);
	}
	if (ddp_topo_cache_read(path, 1, out, why, sizeof(why)) == 1) {
		say(note, notelen, "cache %s", path);
		return 1;
	}
	if (geteuid() == 0) {
		if (ddp_topo_cache_write(path, NULL, werr, sizeof(werr)) == 0 &&
		    ddp_topo_cache_read(path, 1, out, werr, sizeof(werr)) ==
			    1) {
			say(note, notelen,
			    "discovered, cache %s written (was: %s)", path,
			    why);
			return 0;
		}
		say(note, notelen, "discovered, cache %s not written: %s", path,
		    werr);
	} else {
		say(note, notelen, "discovered, cache %s ignored: %s", path,
		    why);
	}
	return ddp_topo_load(out, NULL, err, errlen);
}
