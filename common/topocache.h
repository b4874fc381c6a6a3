/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The node's topology cache: an hwloc XML export of this machine, written
 * by root once per boot and per hwloc version, so that each --ddp step
 * reads ~10 KB of XML instead of walking sysfs for every PCI device (tens
 * of milliseconds on a GPU node, for every step on every node).
 *
 * The cache is only ever trusted when all of these hold; anything else is
 * a miss, and the caller discovers the machine as before:
 *   - the file is a regular file (not a symlink), owned by root, not
 *     writable by group or others, at most DDP_TOPO_CACHE_MAX bytes;
 *   - its directory is owned by root and not writable by group or others,
 *     and so is every directory above it (a sticky one of root's, /tmp,
 *     is accepted on the way), symlinks on the way only when root's
 *     (ddp_trusted_dir_open, trusted_path.h);
 *   - hwloc parses it, and the key stored in its root object
 *     (info DDPTopologyCache) is the key of this machine now: the boot id
 *     (/proc/sys/kernel/random/boot_id), the hwloc API version this was
 *     built with and the one running, the online CPUs
 *     (/sys/devices/system/cpu/online) and the PCI devices present (count
 *     and hash of /sys/bus/pci/devices).
 * A truncated or corrupt file, a different boot, hwloc upgrade, CPU taken
 * offline or PCI device added or removed is therefore rediscovered, never
 * used and never a crash.
 *
 * The export holds the whole machine (disallowed CPUs included, since the
 * writer may run inside a job's cpuset); the reader takes the allowed CPUs
 * and NUMA nodes from the running process, as a live discovery does, so a
 * topology read from the cache is the one ddp_topo_load(NULL) would give
 * (test-common-topocache compares the two).
 *
 * Thread safety: none of these touch shared state except the file system;
 * concurrent writers each write a temporary file and rename it into place.
 */
#ifndef DDP_TOPOCACHE_H
#define DDP_TOPOCACHE_H

#include <stddef.h>

#include "placement.h"

/* Largest cache file read: exports of big machines with every PCI device
 * are a few MB. */
#define DDP_TOPO_CACHE_MAX (64L * 1024 * 1024)

/* Name of the root object's info attribute that holds the key. */
#define DDP_TOPO_CACHE_INFO "DDPTopologyCache"

/*
 * The key of this machine now, as stored in a cache written now, into
 * buf. Returns 0, or -1 with err set when the boot id cannot be read.
 */
int ddp_topo_cache_key(char *buf, size_t len, char *err, size_t errlen);

/*
 * Reads the cache at path. thissystem: the topology is this machine's
 * (binding applies, allowed CPUs are the calling process's); 0 only for
 * tests and ddp-plan --cache on foreign topologies. Returns 1 and a
 * topology to free with ddp_topo_destroy() on a hit, or 0 on a miss with
 * why saying what was wrong ("absent", "owned by uid 1000", "written for
 * another boot", ...). Never fails otherwise.
 */
int ddp_topo_cache_read(const char *path, int thissystem, struct ddp_topo **out,
			char *why, size_t whylen);

/*
 * Writes the cache at path: discovers this machine (source_xml NULL; whole
 * machine, I/O devices as ddp_topo_load keeps them) or loads source_xml
 * (tests, ddp-plan --cache), drops every info named like an identifier
 * (Serial, UUID, AssetTag: the DMI serials and UUID only root may read in
 * sysfs), stores this machine's key, and replaces path atomically
 * (temporary file in the same directory, then rename) with a 0644 file
 * that every user may read. The directory is created 0755 when missing
 * (not its parents) and must be owned by the caller's euid and not
 * writable by group or others, and every directory above it root's or
 * the caller's and not writable by group or others (unless root's and
 * sticky). Meant for root; the reader trusts only root's files. Returns 0,
 * or -1 with err naming the path and the problem.
 */
int ddp_topo_cache_write(const char *path, const char *source_xml, char *err,
			 size_t errlen);

/*
 * What the plugin does on every node of a --ddp step: path NULL or "" (the
 * site's "none") discovers this machine with ddp_topo_load(NULL); so does
 * HWLOC_XMLFILE in the environment (hwloc would read that file anyway).
 * Otherwise a cache hit is used; on a miss, root rewrites the cache and
 * reads it back, anyone else discovers. note receives one line for the
 * log and --ddp-verbose saying which happened and why ("cache PATH",
 * "discovered, cache PATH written (was: absent)", "discovered, cache PATH
 * ignored: owned by uid 1000", ...). Returns 1 (read from the cache) or 0
 * (discovered) and a topology to free with ddp_topo_destroy(), or -1 with
 * err set when even discovery failed.
 */
int ddp_topo_load_cached(const char *path, struct ddp_topo **out, char *note,
			 size_t notelen, char *err, size_t errlen);

#endif
