/* SPDX-License-Identifier: BSD-3-Clause */
/* The per-step key: derived from the site key, handed to the step's
 * tasks as a file only the job's user can read (stepkey.h). */
#include "stepkey.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ddp_util.h"
#include "jobdir.h"
#include "sha256.h"

/* Versioned: a new derivation gets a new label, never a changed one. */
#define STEP_KEY_LABEL "slurm-ddp step key 1"

void
ddp_step_key_derive(const struct ddp_site_key *site, unsigned long job_id,
		    unsigned long step_id, unsigned long uid,
		    struct ddp_step_key *out)
{
	char msg[128];
	size_t label = sizeof(STEP_KEY_LABEL); /* its NUL included */

	memcpy(msg, STEP_KEY_LABEL, label);
	/* Three unsigned longs always fit in what is left. */
	ddp_fmt(msg + label, sizeof(msg) - label, "job=%lu step=%lu uid=%lu",
		job_id, step_id, uid);
	ddp_hmac_sha256(site->k, sizeof(site->k), msg,
			label + strlen(msg + label), out->k);
}

void
ddp_step_key_wipe(struct ddp_step_key *key)
{
	explicit_bzero(key, sizeof(*key));
}

int
ddp_step_key_name(unsigned long job_id, unsigned long step_id,
		  unsigned long tag, char *buf, size_t len)
{
	return ddp_fmt(buf, len, "%lu.%lu.%lu", job_id, step_id, tag);
}

/* Empties and removes the directory name below kfd after taking it from
 * its owner: a step's key directory of an earlier slurm-ddp (the key file
 * in a directory the user owned). 0, or -1 with errno set. */
static int
remove_keydir(int kfd, const char *name)
{
	struct dirent *de;
	DIR *d = NULL;
	int dfd, rc = -1, e = 0;

	dfd = openat(kfd, name,
		     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return errno == ENOENT ? 0 : -1;
	if (ddp_jobdir_take(dfd) < 0)
		goto out;
	d = fdopendir(dfd);
	if (!d)
		goto out;
	dfd = -1; /* closedir closes it */
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		/* A directory the user made inside stays, named in err. */
		if (unlinkat(dirfd(d), de->d_name, 0) < 0 && !e)
			e = errno;
	}
	if (unlinkat(kfd, name, AT_REMOVEDIR) < 0 && !e)
		e = errno;
	if (!e)
		rc = 0;
out:
	if (rc < 0 && !e)
		e = errno;
	if (d)
		closedir(d);
	ddp_close(&dfd);
	errno = e;
	return rc;
}

/* Removes the entry name below kfd: a key file, emptied first so that a
 * descriptor its owner still holds keeps no blocks of the file system
 * (root's truncation, no symlink followed), or an old key directory.
 * 0 (also when it does not exist), or -1 with errno set. */
static int
remove_key(int kfd, const char *name)
{
	struct stat st;
	int fd;

	if (fstatat(kfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -1;
	if (S_ISDIR(st.st_mode))
		return remove_keydir(kfd, name);
	if (S_ISREG(st.st_mode)) {
		fd = openat(kfd, name,
			    O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		/* Unlinking is what matters: a failed truncation leaves
		 * the blocks until the owner's last close. */
		if (fd >= 0 && ftruncate(fd, 0) < 0)
			errno = 0;
		ddp_close(&fd);
	}
	if (unlinkat(kfd, name, 0) < 0 && errno != ENOENT)
		return -1;
	return 0;
}

/* Opens <state_dir>/step-keys: root's, made when missing, and made 0711
 * (the job's user passes through to their file by name, but no one lists
 * the node's steps). */
static int
open_keys(const char *state_dir, char *keys, size_t keyslen, char *err,
	  size_t errlen)
{
	int squatted, kfd;

	if (ddp_fmt(keys, keyslen, "%s/%s", state_dir, DDP_STEP_KEY_DIR) < 0)
		return ddp_errf(err, errlen, "state_dir %.200s: path too long",
				state_dir);
	kfd = ddp_jobdir_open_root(keys, "step key directory", &squatted, err,
				   errlen);
	if (kfd >= 0 && fchmod(kfd, DDP_STEP_KEY_DIR_MODE) < 0) {
		ddp_errf(err, errlen, "%s: chmod: %s", keys, strerror(errno));
		ddp_close(&kfd);
	}
	return kfd;
}

int
ddp_step_key_install(const char *state_dir, const char *name,
		     const struct ddp_step_key *key, uid_t uid, gid_t gid,
		     char *path, size_t pathlen, char *err, size_t errlen)
{
	char keys[PATH_MAX];
	int kfd = -1, fd = -1, made = 0, rc = -1;

	if (errlen)
		err[0] = '\0';
	if (pathlen)
		path[0] = '\0';
	kfd = open_keys(state_dir, keys, sizeof(keys), err, errlen);
	if (kfd < 0)
		goto out;
	if (ddp_fmt(path, pathlen, "%s/%s", keys, name) < 0) {
		ddp_errf(err, errlen, "%s/%s: path too long", keys, name);
		goto out;
	}
	if (remove_key(kfd, name) < 0) {
		ddp_errf(err, errlen,
			 "%s, left by an earlier step, cannot be removed: %s "
			 "(remove it by hand)",
			 path, strerror(errno));
		goto out;
	}
	/* Root's until the key is in it: the user never sees it half
	 * made, and step-keys stays root's, so the user can put nothing
	 * next to it. */
	fd = openat(kfd, name,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0400);
	if (fd >= 0)
		made = 1;
	if (fd < 0 || ddp_write_all(fd, key->k, sizeof(key->k)) < 0 ||
	    fchmod(fd, 0400) < 0 || fchown(fd, uid, gid) < 0) {
		ddp_errf(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	ddp_close(&fd);
	if (rc < 0 && made)
		unlinkat(kfd, name, 0);
	if (rc < 0 && pathlen)
		path[0] = '\0';
	ddp_close(&kfd);
	return rc;
}

int
ddp_step_key_read(const char *path, struct ddp_step_key *out, char *err,
		  size_t errlen)
{
	unsigned char buf[DDP_STEP_KEY_LEN + 1];
	struct stat sb;
	size_t got = 0;
	ssize_t n;
	int fd, rc = -1;

	if (errlen)
		err[0] = '\0';
	memset(out, 0, sizeof(*out));
	fd = open(path,
		  O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return ddp_errf(err, errlen, "step key %.200s: %s", path,
				errno == ELOOP ? "is a symlink, refused"
					       : strerror(errno));
	if (fstat(fd, &sb) < 0) {
		ddp_errf(err, errlen, "step key %.200s: %s", path,
			 strerror(errno));
		goto out;
	}
	if (!S_ISREG(sb.st_mode) || sb.st_uid != geteuid() ||
	    (sb.st_mode & 077)) {
		ddp_errf(err, errlen,
			 "step key %.200s: %s owned by uid %u with mode %04o: "
			 "it must be a file of this uid (%u) that no one else "
			 "can read",
			 path,
			 S_ISREG(sb.st_mode) ? "file" : "not a regular file,",
			 (unsigned)sb.st_uid, (unsigned)(sb.st_mode & 07777),
			 (unsigned)geteuid());
		goto out;
	}
	while (got < sizeof(buf)) {
		n = read(fd, buf + got, sizeof(buf) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (got != DDP_STEP_KEY_LEN) {
		ddp_errf(err, errlen, "step key %.200s: %s, expected %d bytes",
			 path,
			 got < DDP_STEP_KEY_LEN ? "too short" : "too long",
			 DDP_STEP_KEY_LEN);
		goto out;
	}
	memcpy(out->k, buf, sizeof(out->k));
	rc = 0;
out:
	explicit_bzero(buf, sizeof(buf));
	close(fd);
	return rc;
}

/* Opens <state_dir>/step-keys as it is, or -1 (errno ENOENT when there is
 * none). */
static int
open_keys_existing(const char *state_dir, char *keys, size_t keyslen, char *err,
		   size_t errlen)
{
	int kfd;

	if (ddp_fmt(keys, keyslen, "%s/%s", state_dir, DDP_STEP_KEY_DIR) < 0) {
		ddp_errf(err, errlen, "state_dir %.200s: path too long",
			 state_dir);
		errno = ENAMETOOLONG;
		return -1;
	}
	kfd = ddp_jobdir_open_nofollow(keys, 0, 0);
	if (kfd < 0 && errno != ENOENT)
		ddp_errf(err, errlen, "%s: %s", keys, strerror(errno));
	return kfd;
}

int
ddp_step_key_remove(const char *state_dir, const char *name, char *err,
		    size_t errlen)
{
	char keys[PATH_MAX];
	int kfd, rc = 0;

	if (errlen)
		err[0] = '\0';
	kfd = open_keys_existing(state_dir, keys, sizeof(keys), err, errlen);
	if (kfd < 0)
		return errno == ENOENT ? 0 : -1;
	if (remove_key(kfd, name) < 0)
		rc = ddp_errf(err, errlen, "%s/%s: cannot remove: %s", keys,
			      name, strerror(errno));
	close(kfd);
	return rc;
}

/* The job id of a name "<job>.<step>.<tag>", or 0 when it is none. */
static unsigned long
name_job(const char *name)
{
	const char *end;
	long v[3];
	int i;

	for (i = 0; i < 3; i++) {
		if (*name < '0' || *name > '9' ||
		    ddp_parse_long_prefix(name, 0, LONG_MAX, &v[i], &end) < 0 ||
		    *end != (i < 2 ? '.' : '\0'))
			return 0;
		name = end + (i < 2);
	}
	return (unsigned long)v[0];
}

int
ddp_step_key_purge(const char *state_dir,
		   int (*keep)(unsigned long job_id, void *arg), void *arg,
		   unsigned *removed, char *err, size_t errlen)
{
	char keys[PATH_MAX];
	struct dirent *de;
	struct stat st;
	unsigned long job;
	DIR *d = NULL;
	int kfd, rc = 0;

	if (errlen)
		err[0] = '\0';
	if (removed)
		*removed = 0;
	kfd = open_keys_existing(state_dir, keys, sizeof(keys), err, errlen);
	if (kfd < 0)
		return errno == ENOENT ? 0 : -1;
	d = fdopendir(kfd);
	if (!d) {
		rc = ddp_errf(err, errlen, "%s: %s", keys, strerror(errno));
		ddp_close(&kfd);
		return rc;
	}
	while ((de = readdir(d)) != NULL) {
		job = name_job(de->d_name);
		if (!job ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		/* A key file its owner made larger than a key: removed
		 * whoever runs, before it fills the node's /run. */
		if (keep(job, arg) &&
		    !(S_ISREG(st.st_mode) && st.st_size > DDP_STEP_KEY_LEN))
			continue;
		if (remove_key(dirfd(d), de->d_name) < 0) {
			if (!rc)
				ddp_errf(err, errlen,
					 "%s/%s: cannot remove: %s", keys,
					 de->d_name, strerror(errno));
			rc = -1;
		} else if (removed) {
			(*removed)++;
		}
	}
	closedir(d);
	return rc;
}
