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
ddp_step_key_dirname(unsigned long job_id, unsigned long step_id,
		     unsigned long tag, char *buf, size_t len)
{
	return ddp_fmt(buf, len, "%lu.%lu.%lu", job_id, step_id, tag);
}

/* Empties and removes the directory name below kfd after taking it from
 * its owner. 0 (also when it does not exist), or -1 with errno set. */
static int
remove_keydir(int kfd, const char *name)
{
	struct dirent *de;
	DIR *d = NULL;
	int dfd, rc = -1, e = 0;

	dfd = openat(kfd, name,
		     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		if (errno == ENOENT)
			return 0;
		/* Only root writes step-keys: not ours to guess at. */
		return -1;
	}
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
		if (unlinkat(dirfd(d), de->d_name, 0) < 0 && !e)
			e = errno;
	}
	if (unlinkat(kfd, name, AT_REMOVEDIR) < 0)
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

/* Opens <state_dir>/step-keys (root's, 0755, made when missing). */
static int
open_keys(const char *state_dir, char *keys, size_t keyslen, char *err,
	  size_t errlen)
{
	int squatted;

	if (ddp_fmt(keys, keyslen, "%s/%s", state_dir, DDP_STEP_KEY_DIR) < 0)
		return ddp_errf(err, errlen, "state_dir %.200s: path too long",
				state_dir);
	return ddp_jobdir_open_root(keys, "step key directory", &squatted, err,
				    errlen);
}

int
ddp_step_key_install(const char *state_dir, const char *name,
		     const struct ddp_step_key *key, uid_t uid, gid_t gid,
		     char *path, size_t pathlen, char *err, size_t errlen)
{
	char keys[PATH_MAX];
	int kfd = -1, dfd = -1, fd = -1, made = 0, rc = -1;

	if (errlen)
		err[0] = '\0';
	if (pathlen)
		path[0] = '\0';
	kfd = open_keys(state_dir, keys, sizeof(keys), err, errlen);
	if (kfd < 0)
		goto out;
	if (ddp_fmt(path, pathlen, "%s/%s/%s", keys, name, DDP_STEP_KEY_NAME) <
	    0) {
		ddp_errf(err, errlen, "%s/%s: path too long", keys, name);
		goto out;
	}
	if (remove_keydir(kfd, name) < 0) {
		ddp_errf(err, errlen,
			 "%s/%s, left by an earlier step, cannot be removed: "
			 "%s (remove it by hand)",
			 keys, name, strerror(errno));
		goto out;
	}
	/* Root's until the key is in it: the user never sees it half made
	 * and cannot put anything in its place. */
	if (mkdirat(kfd, name, 0700) < 0) {
		ddp_errf(err, errlen, "%s/%s: %s", keys, name, strerror(errno));
		goto out;
	}
	made = 1;
	dfd = openat(kfd, name,
		     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd >= 0)
		fd = openat(dfd, DDP_STEP_KEY_NAME,
			    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
				    O_CLOEXEC,
			    0400);
	if (fd < 0 || ddp_write_all(fd, key->k, sizeof(key->k)) < 0 ||
	    fchmod(fd, 0400) < 0 || fchown(fd, uid, gid) < 0 ||
	    fchmod(dfd, 0700) < 0 || fchown(dfd, uid, gid) < 0) {
		ddp_errf(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	ddp_close(&fd);
	ddp_close(&dfd);
	if (rc < 0 && made)
		remove_keydir(kfd, name);
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

int
ddp_step_key_remove(const char *state_dir, const char *name, char *err,
		    size_t errlen)
{
	char keys[PATH_MAX];
	int kfd, rc = 0;

	if (errlen)
		err[0] = '\0';
	if (ddp_fmt(keys, sizeof(keys), "%s/%s", state_dir, DDP_STEP_KEY_DIR) <
	    0)
		return ddp_errf(err, errlen, "state_dir %.200s: path too long",
				state_dir);
	kfd = ddp_jobdir_open_nofollow(keys, 0, 0);
	if (kfd < 0)
		return errno == ENOENT ? 0
				       : ddp_errf(err, errlen, "%s: %s", keys,
						  strerror(errno));
	if (remove_keydir(kfd, name) < 0)
		rc = ddp_errf(err, errlen, "%s/%s: cannot remove: %s", keys,
			      name, strerror(errno));
	close(kfd);
	return rc;
}
