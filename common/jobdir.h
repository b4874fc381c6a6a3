/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The per-job directories and the one security contract they keep, shared
 * by the SPANK plugin (which checks them as the job's user before it
 * exports DDP_SHARED_DIR and DDP_SCRATCH_DIR) and the prolog helper (which
 * creates and removes them as root):
 *
 *   shared  = <shared_root>/<user>/<jobid>
 *   scratch = <scratch_root>/<jobid>
 *
 * - Every level below a root is a real directory (no symlink is ever
 *   followed), owned by the job's user with no group or other permission
 *   bits (mode 0700): ddp_jobdir_private().
 * - A node-local root (scratch_root, state_dir) is made by root, 0755,
 *   before any user can make it, and is refused when someone else owns it
 *   or group or others may write to it: ddp_jobdir_open_root(). The
 *   default scratch_root lies below /var/lib, where users cannot create
 *   it first.
 * - A root the plugin accepts is owned by root or the job's user and not
 *   writable by group or others unless sticky: whoever may rename its
 *   entries could swap the job's directory after the check.
 * - A scratch directory is always made anew by root; one left over under
 *   the same job id is removed first, never handed to the next owner.
 * - Root takes a directory from the user (owner root, mode 0700) before
 *   emptying it, so no process of the user, one that outlives the job
 *   included, can add entries while it is being removed:
 *   ddp_jobdir_take().
 *
 * Errors: functions return 0 or -1 (or say otherwise) and fill a
 * caller-provided err buffer (NUL-terminated when errlen > 0) that names
 * the path, what is wrong and the fix; they never exit and never log.
 * Thread safety: ddp_jobdir_make_shared and ddp_jobdir_become_user change
 * the process's credentials for good (call them in a child process); the
 * others touch only their arguments and the file system.
 */
#ifndef DDP_JOBDIR_H
#define DDP_JOBDIR_H

#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "ddp_conf.h"

/* ---- naming ---------------------------------------------------------- */

/*
 * Returns 1 when name may be used as one path component for a user: 1-64
 * characters of [A-Za-z0-9._@-], not starting with '-' or '.', else 0.
 */
int ddp_jobdir_valid_user(const char *name);

/*
 * Names the job's shared directory, <shared_root>/<user>/<jobid>, in buf.
 * Returns 0, or -1 when shared_root is empty, user is not a safe path
 * component (ddp_jobdir_valid_user), jobid is 0 or the result does not fit.
 */
int ddp_jobdir_shared(const struct ddp_conf *conf, const char *user,
		      unsigned long jobid, char *buf, size_t len);

/*
 * Names the job's node-local scratch directory, <scratch_root>/<jobid>.
 * Returns 0, or -1 when scratch_root is empty, jobid is 0 or the result
 * does not fit.
 */
int ddp_jobdir_scratch(const struct ddp_conf *conf, unsigned long jobid,
		       char *buf, size_t len);

/* ---- the rules ------------------------------------------------------- */

/*
 * 1 when st (of a directory below a root) is private to uid: owned by
 * uid, owner rwx and no group or other bits (setgid, inherited from a
 * parent, grants nothing and is allowed); else 0.
 */
int ddp_jobdir_private(const struct stat *st, uid_t uid);

/* ---- the user's side: what the plugin exports ------------------------ */

/*
 * Checks a per-job directory before its path is handed to a job of uid:
 * <root>/<rel>, where rel is "<user>/<jobid>" (shared) or "<jobid>"
 * (scratch). Every level below root is opened relative to its parent's
 * descriptor with O_NOFOLLOW|O_DIRECTORY and must pass
 * ddp_jobdir_private. root itself is the admin's path (it may be reached
 * through symlinks) but must be owned by root or uid and not writable by
 * group or others unless sticky.
 *
 * Returns 1 when the directory exists and passes; 0 when root or a level
 * does not exist (the prolog made nothing: export nothing, not an error);
 * -1 with err naming the path, its owner and mode, and the fix.
 * Reads only; runs as whoever calls it (the job's user in the plugin).
 */
int ddp_jobdir_check(const char *root, const char *rel, uid_t uid, char *err,
		     size_t errlen);

/* ---- root's side: what the prolog helper makes and removes ----------- */

/*
 * Opens an absolute directory path from "/" one component at a time with
 * O_NOFOLLOW, so no symlink is followed. When create is non-zero, missing
 * components are created with mode. Returns the O_DIRECTORY fd or -1 with
 * errno set.
 */
int ddp_jobdir_open_nofollow(const char *path, int create, mode_t mode);

/*
 * Opens a directory that only root may change (scratch_root, state_dir),
 * creating it and missing parents mode 0755 without following a symlink
 * in any component. It must be owned by the caller's euid (root) and not
 * writable by group or others. Returns the O_DIRECTORY fd, or -1 with err
 * naming what (e.g. "scratch root"), the path, what is wrong and the fix;
 * *squatted is set to 1 when the directory is owned by someone else (a
 * user made it first), else 0.
 */
int ddp_jobdir_open_root(const char *path, const char *what, int *squatted,
			 char *err, size_t errlen);

/*
 * Makes name below rootfd a new directory (an existing entry is an error,
 * EEXIST) owned by uid:gid, mode 0700, without following a symlink.
 * path names it for err. Returns 0 or -1 with err.
 */
int ddp_jobdir_make_private(int rootfd, const char *name, const char *path,
			    uid_t uid, gid_t gid, char *err, size_t errlen);

/*
 * Takes the open directory fd from its owner before root empties it:
 * owner and group root, mode 0700, so no one but root can add entries to
 * it any more (a process of the user that holds it open or has it as its
 * working directory included). Returns 0 or -1 with errno set.
 */
int ddp_jobdir_take(int fd);

/*
 * Drops the process to uid:gid for good, with user's supplementary
 * groups (only gid when user is NULL). A no-op when already uid. Returns 0
 * or -1 with err.
 */
int ddp_jobdir_become_user(const char *user, uid_t uid, gid_t gid, char *err,
			   size_t errlen);

/*
 * Creates <shared_root>/<user>/<jobid> mode 0700 owned by uid:gid. The
 * user directory is created by root when root may write to shared_root
 * (never following a symlink), and everything below it as the user
 * (which also covers root-squashed NFS): the process drops to the user
 * for good, so call it in a child. An existing user directory is never
 * chowned: one owned by someone else or not mode 0700 is refused, and so
 * is an existing job directory owned by someone else (the user's own is
 * set to 0700); nothing is created in a refused directory. May block on
 * a dead file server: the caller bounds it. Returns 0 or -1 with err.
 */
int ddp_jobdir_make_shared(const struct ddp_conf *conf, const char *user,
			   uid_t uid, gid_t gid, unsigned long jobid, char *err,
			   size_t errlen);

#endif
