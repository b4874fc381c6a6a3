/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The site key: a secret of root's, the file ddp.conf's port_key names,
 * identical on every node (copied like munge.key), read into 128 bits.
 * It has two users: the keyed MASTER_PORT choice (port.h) and the
 * derivation of each step's key (stepkey.h), which keep their uses apart
 * by what they feed it.
 *
 * Errors: 0 or -1 with err naming the file, what is wrong and what would
 * work; never the key. Thread safety: reentrant, touches only its
 * arguments and the file system.
 */
#ifndef DDP_SITEKEY_H
#define DDP_SITEKEY_H

#include <stddef.h>
#include <sys/types.h>

/* Accepted key file sizes in bytes: 16 (128 bits) up to 4096. */
#define DDP_SITE_KEY_MIN 16
#define DDP_SITE_KEY_MAX 4096

/* The key: the file's bytes XOR-folded into 128 bits (a file of random
 * bytes gives a uniform key). */
struct ddp_site_key {
	unsigned char k[16];
};

/*
 * Reads the key file path into key. The file must be a regular file
 * (not a symlink) owned by uid owner (root, 0, in slurmstepd) with no
 * group or other permission bits (0600 or 0400), in a directory owned by
 * owner and not writable by group or others, every directory above it
 * root's (or owner's) and not writable by group or others unless sticky
 * (ddp_trusted_dir_open, trusted_path.h), and hold DDP_SITE_KEY_MIN to
 * DDP_SITE_KEY_MAX bytes. Returns 0, or -1 with err naming the file, its
 * owner and mode and what would work; key is zeroed on error. Nothing of
 * the file stays in memory but key (see ddp_site_key_wipe), on every path
 * out.
 */
int ddp_site_key_load(const char *path, uid_t owner, struct ddp_site_key *key,
		      char *err, size_t errlen);

/* Zeroes key in a way the compiler keeps. */
void ddp_site_key_wipe(struct ddp_site_key *key);

#endif
