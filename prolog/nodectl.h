/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The Slurm-free core of ddp-nodectl, the prolog/epilog helper: input
 * validation, the per-job firewall elements (nft script generation, set
 * listing parser, per-job state files and the sync that reconciles them),
 * running nft under the state lock, shared-root checks, per-job
 * directories (by the contract of jobdir.h) and symlink-safe removal.
 * The commands that use it are declared in nodectl_cmd.h.
 *
 * Errors: functions return 0 or -1 and fill a caller-provided err buffer
 * (always NUL-terminated when errlen > 0); they never exit, and never log
 * but in the section "the firewall under the state lock", which runs nft.
 * Thread safety: none needed (a short-lived single-threaded tool); the
 * functions touch only their arguments and the file system.
 */
#ifndef DDP_NODECTL_H
#define DDP_NODECTL_H

#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#include "ddp_conf.h"
#include "ddp_util.h"
#include "jobdir.h"

/* The nftables objects owned by slurm-ddp. */
#define NC_TABLE "ddp"
#define NC_SET4 "peers4"
#define NC_SET6 "peers6"

/* ---- small helpers ---------------------------------------------------- */

/*
 * Parses a Slurm job id: 1-10 decimal digits, no sign, no space, value in
 * 1..4294967294. Returns 0 and stores it, or -1.
 */
int nc_parse_jobid(const char *s, unsigned long *out);

/* Parses a uid or gid (decimal, 0..4294967294). Returns 0 or -1. */
int nc_parse_id(const char *s, unsigned long *out);

/* Returns 1 when s is a plausible node name ([A-Za-z0-9._-], 1-64, no
 * leading '-' or '.'), else 0. */
int nc_valid_nodename(const char *s);

/*
 * Reads the node's state from one line of `scontrol show node -o NAME`
 * (the first " State=" field, before the free-text Reason) into state.
 * Returns 1 when Slurm already drains the node (a DRAIN flag: DRAINING,
 * DRAINED, IDLE+DRAIN, ...), 0 when not, -1 when the line has no State
 * field or state is too small.
 */
int nc_node_draining(const char *show_node, char *state, size_t len);

/*
 * Runs argv[0] (an absolute path) with argv, without a shell, in a clean
 * environment (PATH only, plus the variables in keep_env, a NULL-ended
 * list of names copied from ours). stdin_text (may be NULL) is written to
 * its stdin; when out is not NULL its stdout is collected there (at most
 * 4 MiB). stderr is inherited. The child is killed after timeout_s
 * seconds. Returns the exit status (0-255), or -1 with err set when it
 * could not be run, was killed or timed out.
 */
int nc_run(char *const argv[], const char *const keep_env[],
	   const char *stdin_text, struct ddp_buf *out, unsigned timeout_s,
	   char *err, size_t errlen);

/*
 * Runs fn(arg, err, errlen) in a forked child that has timeout_s seconds
 * (an alarm in the child, and the parent stops waiting and kills it), so
 * a hung file system cannot hang the caller. The child's err text comes
 * back through a pipe. Returns fn's result (0 or -1), or -1 with
 * "timed out after N s" in err.
 */
typedef int nc_child_fn(void *arg, char *err, size_t errlen);
int nc_call_with_timeout(nc_child_fn *fn, void *arg, unsigned timeout_s,
			 char *err, size_t errlen);

/* ---- firewall -------------------------------------------------------- */

/* One set element: the peer address may reach ports lo..hi. */
struct nc_elem {
	int family; /* AF_INET or AF_INET6 */
	char addr[48];
	unsigned lo, hi;
	unsigned long jobid; /* the job tag (comment "job=N"); 0 = untagged */
	time_t expires;	     /* from a state file: the job's backstop; else 0 */
};

struct nc_elems {
	struct nc_elem *v;
	size_t n, cap;
};

/* Writes the canonical text of IPv4 or IPv6 address in (as nft prints
 * it) into out and its family into *family. Returns 0, or -1 when in is
 * no address or out is too small. */
int nc_canon_addr(const char *in, int *family, char *out, size_t len);

/* The element list's growth and release (nodectl_state.c, beside the
 * files that hold it, as nc_canon_addr). */
int nc_elems_add(struct nc_elems *e, const struct nc_elem *el);
void nc_elems_free(struct nc_elems *e);

/* Orders elements by family, address, ports, job; for stable output. */
void nc_elems_sort(struct nc_elems *e);

/*
 * The nft script that (re)creates table inet ddp: sets peers4/peers6
 * (addr . port ranges, with timeouts and comments), the guarded ports
 * (conf's port_range and the ephemeral range eph_lo..eph_hi) and an input
 * chain that accepts established traffic, loopback and peers, and rejects
 * (tcp reset) other connections to the guarded ports. Replaces any
 * existing table atomically, so its elements are dropped: run it at boot
 * or install time, or when the table is missing.
 */
int nc_fw_install_script(const struct ddp_conf *conf, unsigned eph_lo,
			 unsigned eph_hi, struct ddp_buf *out);

/*
 * Resolves each host of hosts (except self) with getaddrinfo and appends
 * one element per address and port range (conf's port_range, eph_lo..
 * eph_hi), tagged jobid. Hosts that do not resolve are named in err
 * (comma list) and skipped; returns 0 when all resolved, 1 when some did
 * not, -1 on out of memory.
 */
int nc_fw_peer_elems(const struct ddp_conf *conf, char *const *hosts,
		     size_t nhosts, const char *self, unsigned eph_lo,
		     unsigned eph_hi, unsigned long jobid, struct nc_elems *out,
		     char *err, size_t errlen);

/*
 * Parses the output of "nft list set inet ddp peers4|peers6" and appends
 * its elements (family taken from the set type) to out. Elements whose
 * comment is not "job=N" get jobid 0. Returns 0 or -1 on text it does not
 * understand.
 */
int nc_fw_parse_listing(const char *text, struct nc_elems *out, char *err,
			size_t errlen);

/*
 * The nft script that turns actual (the sets' current elements) into desired
 * (the elements every live job needs; one entry per job and element, with
 * the job's expiry). nft holds one element per (address, ports) whatever its
 * comment, and refuses one that overlaps another of the same address; so
 * jobs that share a peer share its element (widened to the union of their
 * ranges when those overlap or touch, as after a change of port ranges while
 * a job runs): it is owned by the job among them whose opening expires last
 * (the highest job id on a tie), carries that job's comment and times out
 * when that job's does (owner's expires - now, at least 1 s). Tagged
 * elements no live job needs are deleted (the "add then delete" idiom, so an
 * element that vanished meanwhile is no error), missing ones are added, and
 * elements tagged with another job than their owner are re-added with the
 * owner's comment and timeout in the same transaction: a new job sharing an
 * element extends it, and the end of one job never removes what another
 * still needs. Untagged elements are left alone. out stays empty when
 * nothing is to be done.
 */
int nc_fw_sync_script(const struct nc_elems *actual,
		      const struct nc_elems *desired, time_t now,
		      struct ddp_buf *out);

/*
 * How many of mine (one job's elements) some job other than self also
 * needs according to desired (the same address, ports that overlap or
 * touch); the first of those jobs' ids (ascending,
 * distinct) are stored in with[0..*nwith), at most maxwith.
 */
size_t nc_fw_shared(const struct nc_elems *mine, const struct nc_elems *desired,
		    unsigned long self, unsigned long *with, size_t maxwith,
		    size_t *nwith);

/*
 * Per-job state files (nodectl_state.c), <dirfd>/job.<jobid>: the elements
 * the job needs and the time after which they stop counting (the
 * firewall_timeout backstop). nc_state_write replaces the file atomically.
 * Where the file system is full (ENOSPC, EDQUOT: anything may have filled
 * it, state_dir being on /run), it removes the reserve (below) and tries
 * once more, so that the Prolog's own write does not fail. Returns 0, 1
 * when it took the reserve to write (the file system is full: say so), or
 * -1 with err.
 */
int nc_state_write(int dirfd, unsigned long jobid, time_t expires,
		   const struct nc_elems *elems, char *err, size_t errlen);

/* The reserve: a root-only file of NC_STATE_RESERVE_BYTES allocated
 * blocks in the state directory, which the next nc_state_write on a full
 * file system gives back; enough for the state of a job with about ten
 * thousand peers. */
#define NC_STATE_RESERVE "reserve"
#define NC_STATE_RESERVE_BYTES (1024 * 1024)

/* Makes the reserve in dirfd when it is missing (the first Prolog, or
 * the one after the reserve was taken). 0, or -1 with err (the file
 * system has not the room: nothing is left behind). */
int nc_state_reserve(int dirfd, char *err, size_t errlen);

/* Appends the elements of the job's state file (expired or not) to out;
 * -1 when it is missing or malformed (out unchanged). */
int nc_state_read(int dirfd, unsigned long jobid, struct nc_elems *out);

/* Removes the job's state file; a missing file is not an error. */
int nc_state_remove(int dirfd, unsigned long jobid, char *err, size_t errlen);

/*
 * Reads every state file in dirfd. Files that expired before now are
 * removed; so are those of jobs not in live (when live is not NULL; live
 * holds nlive job ids). The elements of the others are appended to out.
 * Unreadable or malformed files are removed too (named in err, return 1).
 * Returns 0, 1, or -1 when the directory cannot be read.
 */
int nc_state_read_all(int dirfd, time_t now, const unsigned long *live,
		      size_t nlive, struct nc_elems *out, char *err,
		      size_t errlen);

/* ---- the firewall under the state lock ------------------------------- */

/*
 * These run nft (conf->nft_path, without a shell, within the lock's hold
 * budget while the lock is held) and log through ddp_log what they do.
 * The state lock serialises the firewall updates of concurrent prologs,
 * epilogs and reconciles: one holder at a time, which gives up after 90 s
 * (every nft call under the lock shares that budget); a waiter waits
 * 150 s, so it never times out behind a healthy holder. The hold budget is
 * process-wide: one lock at a time.
 */

/* 1 when table inet ddp exists, else 0 (also when nft fails). */
int nc_fw_table_exists(const struct ddp_conf *conf);

/*
 * (Re)creates table inet ddp by nc_fw_install_script, guarding port_range
 * and the kernel's ephemeral range (an overlap of the two is logged), and
 * logs what it guards. Returns 0, or -1 with err.
 */
int nc_fw_install(const struct ddp_conf *conf, char *err, size_t errlen);

/*
 * Opens this network namespace's state directory, <state_dir>/net-<inode>
 * (state_dir root-owned, not writable by others, created when missing),
 * without taking the lock. Returns the directory fd (the caller closes
 * it), or -1 with err.
 */
int nc_fw_state_open(const struct ddp_conf *conf, char *err, size_t errlen);

/* Takes the lock in the state directory dfd, waiting at most 150 s, and
 * starts the hold budget. Returns the lock fd, or -1 with err. */
int nc_fw_lock_take(const struct ddp_conf *conf, int dfd, char *err,
		    size_t errlen);

/* Releases the lock *lockfd (nothing when -1), sets it to -1 and ends
 * the hold budget. */
void nc_fw_lock_drop(int *lockfd);

/* nc_fw_state_open, then nc_fw_lock_take: returns the directory fd and
 * stores the lock fd in *lockfd (-1 on failure), or -1 with err. */
int nc_fw_state_lock(const struct ddp_conf *conf, int *lockfd, char *err,
		     size_t errlen);

/*
 * Makes the sets match the state files in statefd (by nc_state_read_all
 * with live, nlive: the files of other jobs go), under the lock; nothing
 * is done when the table is missing (the prolog installs it first).
 * Malformed state files are logged and removed. With mine (job self's
 * elements), stores in *kept how many of them other live jobs need and
 * describes them in shared: ", kept N shared with job A" (or "jobs
 * A,B,C", "and others" past 4), "" when none. kept and shared may be NULL.
 * Returns 0, or -1 with err.
 */
int nc_fw_sync(const struct ddp_conf *conf, int statefd,
	       const unsigned long *live, size_t nlive,
	       const struct nc_elems *mine, unsigned long self, size_t *kept,
	       char *shared, size_t sharedlen, char *err, size_t errlen);

/* ---- storage --------------------------------------------------------- */

/*
 * Finds the file-system type of the mount holding dev (st_dev) in
 * mountinfo text (/proc/self/mountinfo), taking the last such mount; if no
 * mount has that device, the mount whose point is the longest prefix of
 * path. Returns 0 with the type in fstype and the mount point in mnt, or
 * -1.
 */
int nc_mount_lookup(const char *mountinfo, dev_t dev, const char *path,
		    char *fstype, size_t fslen, char *mnt, size_t mntlen);

/*
 * Checks that conf->shared_root is reachable, is not just a directory on
 * the root file system, and is of an accepted type, within
 * conf->shared_timeout seconds. Returns 0, or -1 with a short reason in
 * err suitable for a drain reason ("/shared not mounted", "/shared is
 * ext4, not nfs,lustre", "/shared timed out after 10 s").
 */
int nc_check_shared_root(const struct ddp_conf *conf, char *err, size_t errlen);

/*
 * Creates <shared_root>/<user>/<jobid> by ddp_jobdir_make_shared, in a
 * child process bounded by conf->shared_timeout. Returns 0, or -1 with
 * err (a refusal names the path, its owner or mode and the fix; a hang
 * says "timed out after N s").
 */
int nc_make_shared_dir(const struct ddp_conf *conf, const char *user, uid_t uid,
		       gid_t gid, unsigned long jobid, char *err,
		       size_t errlen);

/*
 * Creates the node-local <scratch_root>/<jobid> mode 0700 owned by
 * uid:gid, always as a new directory: an entry of that name left over
 * from an earlier job is first removed as root (nc_rmtree_at) and
 * *leftover set to 1, so it is never handed to the new owner.
 * scratch_root is opened with ddp_jobdir_open_root. Returns 0, or -1 with
 * err; *node_fault is 1 when the failure is the node's (a scratch root
 * writable by others, a leftover that cannot be removed, I/O errors) and
 * 0 when a user caused it (a scratch root a user made: the job runs
 * without scratch, users cannot drain nodes).
 */
int nc_make_scratch_dir(const struct ddp_conf *conf, uid_t uid, gid_t gid,
			unsigned long jobid, int *node_fault, int *leftover,
			char *err, size_t errlen);

/*
 * Removes the job's scratch directory and everything in it without
 * following any symlink or crossing into another file system. A missing
 * directory is not an error. Returns 0 or -1 with err.
 */
int nc_remove_scratch_dir(const struct ddp_conf *conf, unsigned long jobid,
			  char *err, size_t errlen);

/* How long nc_rmtree_at may take before it gives up. */
#define NC_RMTREE_LIMIT_S 300

/*
 * Removes name (relative to dirfd) and, when it is a directory,
 * everything below it, never following symlinks and never leaving the
 * file system of dirfd. Iterative, with no depth limit and one directory
 * open at a time; a directory moved out of the tree while it is being
 * emptied, or a mount point inside it, stops the removal with an error
 * (what is left stays). Run as root, it takes each directory from its
 * owner before emptying it (ddp_jobdir_take), so a process of the user
 * that outlives the job cannot refill it; whatever such a process still
 * adds below (a chain of directories it keeps ahead of the removal) ends
 * the removal after limit_s seconds with an error, and what is left
 * stays, root's where it was taken. nc_rmtree_at allows
 * NC_RMTREE_LIMIT_S. Returns 0 (also when name does not exist) or -1
 * with err.
 */
int nc_rmtree_within(int dirfd, const char *name, unsigned limit_s, char *err,
		     size_t errlen);
int nc_rmtree_at(int dirfd, const char *name, char *err, size_t errlen);

/*
 * Retention sweep of the shared root: removes <shared_root>/<user>/<jobid>
 * directories whose job id is not in live (nlive ids) and whose mtime is
 * older than retention_days before now, each as the directory's owner.
 * With dry_run, only reports. Each removed or would-be-removed path is
 * appended to report, one per line. Returns the number of failures (0 on
 * success) or -1 when the shared root cannot be read.
 */
int nc_sweep_shared(const struct ddp_conf *conf, const unsigned long *live,
		    size_t nlive, time_t now, int dry_run,
		    struct ddp_buf *report, char *err, size_t errlen);

/* Where libddp's POSIX shared memory lives (glibc's shm_open). */
#define NC_SHM_DIR "/dev/shm"
/* Random hex digits that end a libddp segment's name (worker/shm.h). */
#define NC_SHM_RANDOM_HEX 32

/*
 * Removes the shared-memory segments libddp made and left in dir
 * (NC_SHM_DIR): regular files named ddp-<job>.<step>-<32 hex digits>, as
 * worker/shm.c names them. A segment's name goes once every rank of the
 * node mapped it, so only a step killed while setting it up leaves one.
 * jobid != 0 (the Epilog): that job's segments, whoever owns them.
 * jobid == 0 (reconcile): those of every job not in live (nlive ids)
 * whose last change is older than grace seconds. Other files, and
 * segments of other jobs, stay. Stores how many went in *removed.
 * Returns 0, or -1 with err naming the first that could not be removed
 * (or dir when it cannot be read); the others are still tried.
 */
int nc_remove_shm(const char *dir, unsigned long jobid,
		  const unsigned long *live, size_t nlive, long grace,
		  size_t *removed, char *err, size_t errlen);

#endif
