/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The per-job directories: their names, the rules that keep them private
 * to the job's user, the plugin's check and root's creation (see
 * jobdir.h for the contract).
 */
#include "jobdir.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "ddp_util.h"

int
ddp_jobdir_valid_user(const char *name)
{
	size_t i;

	if (!name || name[0] == '\0' || name[0] == '-' || name[0] == '.')
		return 0;
	for (i = 0; name[i]; i++) {
		unsigned char c = (unsigned char)name[i];

		if (i >= 64)
			return 0;
		if (!isalnum(c) && c != '.' && c != '_' && c != '-' && c != '@')
			return 0;
	}
	return 1;
}

int
ddp_jobdir_shared(const struct ddp_conf *conf, const char *user,
		  unsigned long jobid, char *buf, size_t len)
{
	if (conf->shared_root[0] == '\0' || !ddp_jobdir_valid_user(user) ||
	    jobid == 0)
		return -1;
	return ddp_fmt(buf, len, "%s/%s/%lu", conf->shared_root, user, jobid);
}

int
ddp_jobdir_private(const struct stat *st, uid_t uid)
{
	/* Group or other bits would let others read (or plant files in) what
	 * the job writes; setgid inherited from the parent grants nothing. */
	return st->st_uid == uid &&
	       (st->st_mode & (S_IRWXU | S_IRWXG | S_IRWXO)) == S_IRWXU;
}

/* "(uid 1000, mode 0755)" for a message. */
static void
describe(const struct stat *st, char *buf, size_t len)
{
	if (ddp_fmt(buf, len, "owner uid %lu, mode %04o",
		    (unsigned long)st->st_uid,
		    (unsigned)(st->st_mode & DDP_MODE_BITS)) < 0)
		buf[0] = '\0';
}

/* Opens name below pfd as one level of a job directory and checks it.
 * Returns the descriptor, -2 when it does not exist, or -1 with err. */
static int
open_job_level(int pfd, const char *name, const char *path, uid_t uid,
	       char *err, size_t errlen)
{
	struct stat st;
	char what[64];
	int fd;

	fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		const char *kind = NULL;

		if (e == ENOENT)
			return -2;
		ddp_fmt(what, sizeof(what), "owner and mode unknown");
		if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
			describe(&st, what, sizeof(what));
			if (S_ISLNK(st.st_mode))
				kind = "a symbolic link";
			else if (!S_ISDIR(st.st_mode))
				kind = "not a directory";
		}
		if (kind)
			ddp_errf(err, errlen,
				 "%s is %s (%s), not a job directory: %s "
				 "remove it; the next job's prolog then makes "
				 "a directory owned by uid %lu, mode 0700",
				 path, kind, what,
				 st.st_uid == uid ? "its owner may"
						  : "the admin should",
				 (unsigned long)uid);
		else
			ddp_errf(err, errlen,
				 "%s (%s) cannot be opened as uid %lu: %s; a "
				 "job directory must be owned by the job's "
				 "user with mode 0700: the admin should "
				 "remove it",
				 path, what, (unsigned long)uid, strerror(e));
		return -1;
	}
	if (fstat(fd, &st) < 0) {
		ddp_errf(err, errlen, "%s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	if (!ddp_jobdir_private(&st, uid)) {
		describe(&st, what, sizeof(what));
		ddp_errf(err, errlen,
			 "%s has %s, but a job directory must be owned by "
			 "the job's user (uid %lu) with mode 0700: %s",
			 path, what, (unsigned long)uid,
			 st.st_uid != uid
				 ? "another user made it, so it is not safe "
				   "to use; the admin should remove it (and "
				   "create <root>/<user> as root, owned by "
				   "the user, mode 0700)"
				 : "run 'chmod 0700' on it (your umask or a "
				   "chmod opened it up) and start the step "
				   "again");
		close(fd);
		return -1;
	}
	return fd;
}

int
ddp_jobdir_check(const char *root, const char *rel, uid_t uid, char *err,
		 size_t errlen)
{
	char path[PATH_MAX], name[PATH_MAX];
	struct stat st;
	const char *p = rel;
	int fd = -1, rv = -1;

	if (errlen)
		err[0] = '\0';
	if (ddp_fmt(path, sizeof(path), "%s", root) < 0 || !rel || !*rel ||
	    rel[0] == '/') {
		return ddp_errf(err, errlen,
				"job directory %.200s/%.100s: bad name", root,
				rel ? rel : "");
	}
	fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT) {
			rv = 0;
			goto out;
		}
		ddp_errf(err, errlen, "%s: cannot open: %s", root,
			 strerror(errno));
		goto out;
	}
	if (fstat(fd, &st) < 0) {
		ddp_errf(err, errlen, "%s: %s", root, strerror(errno));
		goto out;
	}
	/* Whoever may rename entries of root can swap the job's directory
	 * for their own after this check. */
	if ((st.st_uid != 0 && st.st_uid != uid) ||
	    ((st.st_mode & 022) && !(st.st_mode & S_ISVTX))) {
		char what[64];

		describe(&st, what, sizeof(what));
		ddp_errf(err, errlen,
			 "%s has %s: another user could replace the job "
			 "directories in it; the admin should make it owned "
			 "by root and not writable by group or others, or "
			 "sticky (chmod +t)",
			 root, what);
		goto out;
	}
	while (*p) {
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);
		int next;

		if (len == 0 || len >= sizeof(name) ||
		    ddp_fmt_cat(path, sizeof(path), "/%.*s", (int)len, p) < 0 ||
		    (len == 1 && p[0] == '.') ||
		    (len == 2 && p[0] == '.' && p[1] == '.')) {
			ddp_errf(err, errlen,
				 "job directory %.200s/%.100s: bad name", root,
				 rel);
			goto out;
		}
		memcpy(name, p, len);
		name[len] = '\0';
		next = open_job_level(fd, name, path, uid, err, errlen);
		if (next == -2) {
			rv = 0;
			goto out;
		}
		if (next < 0)
			goto out;
		close(fd);
		fd = next;
		p += len;
		if (*p == '/')
			p++;
	}
	rv = 1;
out:
	ddp_close(&fd);
	return rv;
}

int
ddp_jobdir_scratch(const struct ddp_conf *conf, unsigned long jobid, char *buf,
		   size_t len)
{
	if (conf->scratch_root[0] == '\0' || jobid == 0)
		return -1;
	return ddp_fmt(buf, len, "%s/%lu", conf->scratch_root, jobid);
}

int
ddp_jobdir_open_nofollow(const char *path, int create, mode_t mode)
{
	char comp[NAME_MAX + 1];
	const char *p = path, *slash;
	int fd, next, saved;

	if (!path || path[0] != '/') {
		errno = EINVAL;
		return -1;
	}
	fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	for (;;) {
		size_t len;

		while (*p == '/')
			p++;
		if (*p == '\0')
			return fd;
		slash = strchr(p, '/');
		len = slash ? (size_t)(slash - p) : strlen(p);
		if (len > NAME_MAX) {
			close(fd);
			errno = ENAMETOOLONG;
			return -1;
		}
		memcpy(comp, p, len);
		comp[len] = '\0';
		p += len;
		next = openat(fd, comp,
			      O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0 && errno == ENOENT && create) {
			if (mkdirat(fd, comp, mode) < 0 && errno != EEXIST)
				goto fail;
			next = openat(fd, comp,
				      O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
					      O_CLOEXEC);
		}
		if (next < 0)
			goto fail;
		close(fd);
		fd = next;
	}
fail:
	saved = errno;
	close(fd);
	errno = saved;
	return -1;
}

int
ddp_jobdir_open_root(const char *path, const char *what, int *squatted,
		     char *err, size_t errlen)
{
	struct stat st;
	int fd;

	*squatted = 0;
	fd = ddp_jobdir_open_nofollow(path, 1, 0755);
	if (fd < 0 || fstat(fd, &st) < 0) {
		ddp_errf(err, errlen, "%s %s unusable: %s%s", what, path,
			 strerror(errno),
			 errno == ELOOP || errno == ENOTDIR
				 ? " (a component is a symlink or a file; "
				   "give a path of real directories)"
				 : "");
		ddp_close(&fd);
		return -1;
	}
	/* A user who made the directory first (say under the world-writable
	 * /var/tmp) could swap its entries: refuse it rather than hand out
	 * directories in it. */
	if (st.st_uid != geteuid()) {
		*squatted = 1;
		ddp_errf(err, errlen,
			 "%s %s is owned by uid %lu, not root (a user made it "
			 "first): remove it and run 'ddp-nodectl install', "
			 "which creates it root-owned",
			 what, path, (unsigned long)st.st_uid);
		close(fd);
		return -1;
	}
	if (st.st_mode & 022) {
		ddp_errf(err, errlen,
			 "%s %s has mode %04o, writable by others: make it "
			 "0755 (chmod 0755 %s) or choose a root-only path",
			 what, path, (unsigned)(st.st_mode & DDP_MODE_BITS),
			 path);
		close(fd);
		return -1;
	}
	return fd;
}

int
ddp_jobdir_take(int fd)
{
	/* Owner first: once root owns it the user can no longer chmod it
	 * back; then the mode shuts everyone else out. */
	if (fchown(fd, 0, 0) < 0 || fchmod(fd, 0700) < 0)
		return -1;
	return 0;
}

int
ddp_jobdir_become_user(const char *user, uid_t uid, gid_t gid, char *err,
		       size_t errlen)
{
	if (getuid() == uid && geteuid() == uid)
		return 0;
	if ((user ? initgroups(user, gid) : setgroups(1, &gid)) < 0 ||
	    setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0) {
		ddp_errf(err, errlen, "cannot become uid %lu: %s",
			 (unsigned long)uid, strerror(errno));
		return -1;
	}
	return 0;
}

/* Opens dirfd/name as a directory without following a symlink, creating
 * it 0700 when missing; reports whether it was created. */
static int
open_or_make(int pfd, const char *name, int *created)
{
	int fd;

	*created = 0;
	fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 || errno != ENOENT)
		return fd;
	if (mkdirat(pfd, name, 0700) < 0) {
		if (errno != EEXIST)
			return -1;
	} else {
		*created = 1;
	}
	return openat(pfd, name,
		      O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/*
 * Refuses a directory of the job's shared path that is not private to the
 * job's user: owned by someone else (planted by another user where the
 * shared root lets users create entries), or open to others. fd is the
 * opened directory, or -1 when it could not be opened (then it is looked
 * up by name in pfd, so that a foreign 0700 directory is named as such).
 */
static int
check_private(int pfd, const char *name, int fd, const char *path,
	      const char *user, uid_t uid, int fix_mode, char *err,
	      size_t errlen)
{
	struct stat st;
	int saved = errno;

	if ((fd >= 0 ? fstat(fd, &st)
		     : fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW)) < 0) {
		ddp_errf(err, errlen, "%s: %s", path, strerror(saved));
		return -1;
	}
	if (fd < 0 && st.st_uid == uid) {
		ddp_errf(err, errlen, "%s: %s", path,
			 saved == ELOOP || saved == ENOTDIR
				 ? "not a directory (symlink?)"
				 : strerror(saved));
		return -1;
	}
	if (st.st_uid != uid) {
		ddp_errf(
			err, errlen,
			"%s is owned by uid %lu, not by %s (uid %lu): refused, "
			"no shared directory for this job; an admin should "
			"remove it%s",
			path, (unsigned long)st.st_uid, user,
			(unsigned long)uid,
			fix_mode ? ""
				 : " and make the user directory as root "
				   "(mkdir -m 0700, chown to the user)");
		return -1;
	}
	if (ddp_jobdir_private(&st, uid))
		return 0;
	/* The job's own directory is the user's and made for this job:
	 * close it up. The user's directory is theirs to set. */
	if (fix_mode && fchmod(fd, 0700) == 0)
		return 0;
	ddp_errf(err, errlen,
		 "%s has mode %04o, not 0700: refused, no shared directory for "
		 "this job (run: chmod 0700 %s)",
		 path, (unsigned)(st.st_mode & ACCESSPERMS), path);
	return -1;
}

int
ddp_jobdir_make_shared(const struct ddp_conf *conf, const char *user, uid_t uid,
		       gid_t gid, unsigned long jobid, char *err, size_t errlen)
{
	const char *root = conf->shared_root;
	char jobname[32], upath[PATH_MAX], jpath[PATH_MAX];
	int rootfd = -1, userfd = -1, jobfd = -1, created, rv = -1;

	ddp_fmt(jobname, sizeof(jobname), "%lu", jobid);
	if (ddp_fmt(upath, sizeof(upath), "%s/%s", root, user) < 0 ||
	    ddp_fmt(jpath, sizeof(jpath), "%s/%s", upath, jobname) < 0) {
		ddp_errf(err, errlen, "%s/%s: path too long", root, user);
		goto out;
	}
	rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0) {
		ddp_errf(err, errlen, "open %s: %s", root, strerror(errno));
		goto out;
	}
	/* As root: make the user's directory where root may write. On
	 * root-squashed NFS this fails with EACCES and the user makes it
	 * below, which needs a shared_root the users may write to. An
	 * existing directory is never chowned: whoever made it keeps it,
	 * and the check below refuses it if that is not the user. */
	userfd = open_or_make(rootfd, user, &created);
	if (userfd < 0 && errno != EACCES && errno != EPERM && errno != EROFS) {
		ddp_errf(err, errlen, "%s: %s", upath,
			 errno == ELOOP || errno == ENOTDIR
				 ? "not a directory (symlink?)"
				 : strerror(errno));
		goto out;
	}
	if (userfd >= 0 && created &&
	    (fchown(userfd, uid, gid) < 0 || fchmod(userfd, 0700) < 0)) {
		ddp_errf(err, errlen, "chown %s: %s", upath, strerror(errno));
		goto out;
	}
	if (userfd >= 0) {
		ddp_close(&userfd);
	}
	/* Everything below the user's directory is the user's: create it
	 * as the user, so no symlink they planted is followed as root. */
	if (ddp_jobdir_become_user(user, uid, gid, err, errlen) < 0)
		goto out;
	userfd = open_or_make(rootfd, user, &created);
	if (check_private(rootfd, user, userfd, upath, user, uid, 0, err,
			  errlen) < 0)
		goto out;
	jobfd = open_or_make(userfd, jobname, &created);
	if (check_private(userfd, jobname, jobfd, jpath, user, uid, 1, err,
			  errlen) < 0)
		goto out;
	rv = 0;
out:
	ddp_close(&jobfd);
	ddp_close(&userfd);
	ddp_close(&rootfd);
	return rv;
}

int
ddp_jobdir_make_private(int rootfd, const char *name, const char *path,
			uid_t uid, gid_t gid, char *err, size_t errlen)
{
	int fd = -1, rv = -1;

	if (mkdirat(rootfd, name, 0700) < 0) {
		ddp_errf(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	fd = openat(rootfd, name,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fchown(fd, uid, gid) < 0 || fchmod(fd, 0700) < 0) {
		ddp_errf(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	rv = 0;
out:
	ddp_close(&fd);
	return rv;
}
