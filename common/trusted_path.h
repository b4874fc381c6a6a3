/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Opening a directory named by the admin that root then trusts (the port
 * key's, the topology cache's). Checking only that directory is not
 * enough: whoever may rename an entry of any directory above it can put
 * a tree of their own in its place. So every directory on the way is
 * opened from "/" one component at a time, relative to the one before
 * (O_NOFOLLOW | O_DIRECTORY), and checked on the descriptor: what was
 * checked is what the returned descriptor names.
 *
 *   - Every directory from "/" down must be owned by root or by owner and
 *     not writable by group or others. A sticky directory owned by root
 *     (/tmp) is accepted on the way, not as the last one: only an entry's
 *     owner may rename or remove it there, and the next directory is
 *     checked in turn.
 *   - The last directory must be owned by owner.
 *   - A symbolic link on the way is followed only when root or owner owns
 *     it (its directory passed the check, so nobody else can change it),
 *     and at most DDP_TRUSTED_MAX_LINKS of them; "." and ".." are
 *     resolved like the kernel does, on already checked directories.
 *
 * Thread safety: touches only its arguments and the file system.
 */
#ifndef DDP_TRUSTED_PATH_H
#define DDP_TRUSTED_PATH_H

#include <stddef.h>
#include <sys/types.h>

#define DDP_TRUSTED_MAX_LINKS 40

/*
 * Opens the directory dir (an absolute path) for reading after the checks
 * above and returns its descriptor (O_CLOEXEC; the caller closes it).
 * create_mode: 0, or the mode with which to make the last directory when
 * it is missing (its parent must exist; the umask applies). Returns -1
 * with err naming the directory at fault, its owner and mode, and what
 * would work (chown/chmod), or the system's reason (absent, not a
 * directory, ...).
 */
int ddp_trusted_dir_open(const char *dir, uid_t owner, mode_t create_mode,
			 char *err, size_t errlen);

#endif
