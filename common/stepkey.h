/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The per-step key: a secret that only the job's user and root know,
 * with which libddp's ranks prove to each other that they belong to the
 * same step of the same user (DDP_AUTH=key, worker/auth.h) without munged.
 *
 * Derivation. On every node of the step, slurmstepd (as root, in
 * init_post_opt) computes
 *   key = HMAC-SHA256(site key, "slurm-ddp step key 1" NUL
 *                     "job=J step=S uid=U")
 * where the site key is sitekey.h's (ddp.conf's port_key, a root-only
 * file identical on every node, XOR-folded to 128 bits). The
 * label keeps the two uses apart: the port choice feeds SipHash with
 * 25-byte messages that start "ddpport2", never an HMAC. Every node
 * computes the same key and nothing crosses the network. Knowing the key
 * of one step says nothing of another's (HMAC is a PRF): a user learns
 * only the keys of their own steps.
 *
 * Hand-over. The key goes to the step's tasks as a file, not in the
 * environment (which every child process inherits and `env` or a crash
 * report prints) nor as an inherited descriptor (closed by launchers such
 * as Python's subprocess, whose close_fds is on by default, container
 * runtimes and wrappers):
 *   <state_dir>/step-keys/<job>.<step>.<tag>
 * tag tells apart two slurmstepd of one step on one host (slurmstepd's
 * pid). <state_dir>/step-keys is root's, 0711: the job's user reaches
 * their file by its name, lists nothing and can create nothing there.
 * The file is root's, mode 0400 with the POSIX ACL u:<uid>:r (ls shows
 * 0440: the group bits are the ACL's mask, and the owning group is
 * given nothing): the job's user may read it, and no one else but root.
 * Not owning it, the user cannot write, grow, truncate, chmod or lease
 * (F_SETLEASE) it, so /run (root's tmpfs, where the next job's Prolog
 * writes its firewall state) holds nothing of the user's to fill or to
 * pin, and nothing of theirs outlives the step. Root makes the file with
 * O_EXCL and no symlink followed, writes the key and only then grants
 * the read: the user never sees a half-made one. The file system of
 * state_dir must keep POSIX ACLs (tmpfs, ext4, xfs, btrfs do); where it
 * does not, install fails, naming the fix; it never falls back to a file
 * the user owns. The plugin exports its path as DDP_STEP_KEY_FILE and
 * removes it in slurm_spank_exit; the Epilog removes the job's keys a
 * killed slurmstepd left, reconcile those of jobs no longer running.
 * libddp reads it with ddp_step_key_read, which checks that no one else
 * can read it. The ACL's bytes are written and read here alone (the
 * kernel's system.posix_acl_access format), without libacl.
 *
 * Errors: 0 or -1 with err naming the path, what is wrong and the fix;
 * never the key. Thread safety: touches only its arguments and the file
 * system. Every function wipes its copies of key material.
 */
#ifndef DDP_STEPKEY_H
#define DDP_STEPKEY_H

#include <stddef.h>
#include <sys/types.h>

#include "sitekey.h"

#define DDP_STEP_KEY_LEN 32
/* The variable that names the key file for libddp (and only the path). */
#define DDP_STEP_KEY_VAR "DDP_STEP_KEY_FILE"
/* The directory of the step keys below state_dir, and its mode. */
#define DDP_STEP_KEY_DIR "step-keys"
#define DDP_STEP_KEY_DIR_MODE 0711

struct ddp_step_key {
	unsigned char k[DDP_STEP_KEY_LEN];
};

/* The step key of (job_id, step_id, uid) under the site key (above). */
void ddp_step_key_derive(const struct ddp_site_key *site, unsigned long job_id,
			 unsigned long step_id, unsigned long uid,
			 struct ddp_step_key *out);

/* Zeroes key in a way the compiler keeps. */
void ddp_step_key_wipe(struct ddp_step_key *key);

/*
 * The name of a step's key file below <state_dir>/step-keys,
 * "<job>.<step>.<tag>", into buf. 0, or -1 when it does not fit.
 */
int ddp_step_key_name(unsigned long job_id, unsigned long step_id,
		      unsigned long tag, char *buf, size_t len);

/*
 * As root: writes key to <state_dir>/step-keys/<name> as described
 * above, root's with read access for uid alone (no ACL when uid is 0),
 * and its path into path. A file (or a key directory of an earlier
 * slurm-ddp) of the same name left by an earlier step (a reused job id
 * after a crash) is removed first. <state_dir> is made root's, 0755, and
 * step-keys root's, 0711, when missing, and refused when someone else
 * owns them or may write to them. Returns 0, or -1 with err (nothing is
 * left behind); a file system without ACLs is such an error, naming
 * what would work.
 */
int ddp_step_key_install(const char *state_dir, const char *name,
			 const struct ddp_step_key *key, uid_t uid, char *path,
			 size_t pathlen, char *err, size_t errlen);

/*
 * As root: whether dir (state_dir) keeps the ACL install gives a key
 * file: makes a probe file there, gives it the ACL and removes it, so
 * that `ddp-nodectl doctor` names a file system without ACLs before a
 * step fails on it. Returns 0, or -1 with err (install's words for a
 * file system without ACLs, naming the fix) and errno (EOPNOTSUPP or
 * ENOTSUP for that file system).
 */
int ddp_step_key_check_acl(const char *dir, char *err, size_t errlen);

/*
 * As the job's user: reads the key file at path (DDP_STEP_KEY_FILE) into
 * out, holding it to what ddp_step_key_install promises: a regular file,
 * not a symlink, that no one but the caller's effective uid and root can
 * read (a key others can read proves nothing about who holds it): root's
 * with an ACL that names no other user and gives no group or others
 * read access, or the caller's own (an earlier slurm-ddp's, or a key a
 * program wrote for itself) with no group or other permission; of
 * exactly DDP_STEP_KEY_LEN bytes. Returns 0, or -1 with err naming the
 * path and what is wrong; out is then zeroed. No copy of the key is
 * left behind but out.
 */
int ddp_step_key_read(const char *path, struct ddp_step_key *out, char *err,
		      size_t errlen);

/*
 * As root: removes the key <state_dir>/step-keys/<name> (emptied first;
 * an old key directory after taking it from the user). A missing one is
 * not an error. Returns 0, or -1 with err.
 */
int ddp_step_key_remove(const char *state_dir, const char *name, char *err,
			size_t errlen);

/*
 * As root: removes every key below <state_dir>/step-keys whose job
 * keep(job_id, arg) rejects (returns 0), and every key file larger than
 * a key whatever keep says (one an earlier slurm-ddp gave its user). The
 * Epilog keeps all jobs but its own, the Prolog all jobs, reconcile the
 * jobs that run. Entries whose names are not <job>.<step>.<tag> are left
 * alone. *removed (when not NULL) counts what went. A missing step-keys
 * is not an error. Returns 0, or -1 with err naming the first entry that
 * could not be removed (the others are still tried).
 */
int ddp_step_key_purge(const char *state_dir,
		       int (*keep)(unsigned long job_id, void *arg), void *arg,
		       unsigned *removed, char *err, size_t errlen);

#endif
