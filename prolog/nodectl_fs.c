/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ddp-nodectl core, storage part: the shared-root mount check (in a child
 * with a timeout), per-job shared and scratch directories, and removal
 * that never follows a symlink.
 */
#include "nodectl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "ddp_util.h"

#define RMTREE_MAX_DEPTH 512
/* A sweep removes whole trees on a shared file system: allow it longer
 * than a prolog check. */
#define SWEEP_TIMEOUT_S 3600

int
nc_open_dir_nofollow(const char *path, int create, mode_t mode)
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

/* Undoes mountinfo's octal escapes (\040 for a space) in place. */
static void
unescape(char *s)
{
	char *w = s;

	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' &&
		    s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*w++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 +
				      (s[3] - '0'));
			s += 4;
		} else {
			*w++ = *s++;
		}
	}
	*w = '\0';
}

/* Returns the length of mnt when it is path or a parent of it, else 0. */
static size_t
prefix_len(const char *mnt, const char *path)
{
	size_t len = strlen(mnt);

	if (strcmp(mnt, "/") == 0)
		return 1;
	if (strncmp(mnt, path, len) != 0 ||
	    (path[len] != '/' && path[len] != '\0'))
		return 0;
	return len;
}

int
nc_mount_lookup(const char *mountinfo, dev_t dev, const char *path,
		char *fstype, size_t fslen, char *mnt, size_t mntlen)
{
	const char *line = mountinfo;
	size_t best = 0;
	int by_dev = 0, found = 0;

	while (line && *line) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		char buf[4096], point[4096], type[256];
		unsigned maj, min;
		char *sep;

		if (len < sizeof(buf)) {
			memcpy(buf, line, len);
			buf[len] = '\0';
			sep = strstr(buf, " - ");
			if (sep &&
			    sscanf(buf, "%*s %*s %u:%u %*s %4095s", &maj, &min,
				   point) == 3 &&
			    sscanf(sep + 3, "%255s", type) == 1) {
				size_t pl;

				unescape(point);
				pl = prefix_len(point, path);
				if (makedev(maj, min) == dev) {
					/* The last mount of a device is the
					 * one on top. */
					by_dev = found = 1;
					ddp_fmt(fstype, fslen, "%s", type);
					ddp_fmt(mnt, mntlen, "%s", point);
				} else if (!by_dev && pl && pl >= best) {
					best = pl;
					found = 1;
					ddp_fmt(fstype, fslen, "%s", type);
					ddp_fmt(mnt, mntlen, "%s", point);
				}
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	return found ? 0 : -1;
}

static int
read_file(const char *path, struct nc_buf *out)
{
	char chunk[4096];
	ssize_t r;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rv = -1;

	if (fd < 0)
		return -1;
	while ((r = read(fd, chunk, sizeof(chunk))) > 0)
		if (nc_buf_printf(out, "%.*s", (int)r, chunk) < 0)
			goto out;
	rv = r < 0 ? -1 : 0;
out:
	close(fd);
	return rv;
}

static int
fstype_accepted(const struct ddp_conf *conf, const char *type)
{
	unsigned i;

	for (i = 0; i < conf->n_shared_fstypes; i++)
		if (strcmp(conf->shared_fstypes[i], type) == 0)
			return 1;
	return 0;
}

static void
list_fstypes(const struct ddp_conf *conf, char *out, size_t len)
{
	size_t used = 0;
	unsigned i;

	out[0] = '\0';
	for (i = 0; i < conf->n_shared_fstypes; i++) {
		int w = snprintf(out + used, len - used, "%s%s", i ? "," : "",
				 conf->shared_fstypes[i]);

		if (w < 0 || (size_t)w >= len - used)
			break;
		used += (size_t)w;
	}
}

/* Returns 1 when path (resolved) is a mount point in mountinfo. */
static int
is_mount_point(const char *mountinfo, const char *path)
{
	char real[PATH_MAX];
	const char *line = mountinfo;

	if (!realpath(path, real))
		return 0;
	while (line && *line) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		char buf[4096], point[4096];

		if (len < sizeof(buf)) {
			memcpy(buf, line, len);
			buf[len] = '\0';
			if (sscanf(buf, "%*s %*s %*s %*s %4095s", point) == 1) {
				unescape(point);
				if (strcmp(point, real) == 0)
					return 1;
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	return 0;
}

/* Runs in the child: everything here may block on a dead server. */
static int
check_shared_child(void *arg, char *err, size_t errlen)
{
	const struct ddp_conf *conf = arg;
	char real[PATH_MAX], type[256], mnt[4096], accepted[256];
	struct nc_buf mi = {0};
	struct stat st;
	int rv = -1;

	if (stat(conf->shared_root, &st) < 0) {
		nc_errf(err, errlen, "%s %s", conf->shared_root,
			errno == ENOENT ? "missing" : strerror(errno));
		goto out;
	}
	if (!S_ISDIR(st.st_mode) || !realpath(conf->shared_root, real)) {
		nc_errf(err, errlen, "%s not a directory", conf->shared_root);
		goto out;
	}
	if (read_file("/proc/self/mountinfo", &mi) < 0 || !mi.s ||
	    nc_mount_lookup(mi.s, st.st_dev, real, type, sizeof(type), mnt,
			    sizeof(mnt)) < 0) {
		nc_errf(err, errlen, "%s: mount table unreadable",
			conf->shared_root);
		goto out;
	}
	/* A configured mount point must itself be in the mount table, so an
	 * unmounted share whose directory exists below it is caught even when
	 * the file system beneath has an accepted type. */
	if (conf->shared_mount[0] &&
	    !is_mount_point(mi.s, conf->shared_mount)) {
		nc_errf(err, errlen, "%s not mounted", conf->shared_mount);
		goto out;
	}
	if (!fstype_accepted(conf, type)) {
		list_fstypes(conf, accepted, sizeof(accepted));
		if (strcmp(mnt, "/") == 0)
			nc_errf(err, errlen, "%s not mounted",
				conf->shared_root);
		else
			nc_errf(err, errlen, "%s is %s, not %s",
				conf->shared_root, type, accepted);
		goto out;
	}
	rv = 0;
out:
	nc_buf_free(&mi);
	return rv;
}

int
nc_check_shared_root(const struct ddp_conf *conf, char *err, size_t errlen)
{
	if (conf->shared_root[0] == '\0')
		return 0;
	if (nc_call_with_timeout(check_shared_child, (void *)conf,
				 conf->shared_timeout, err, errlen) < 0) {
		if (strncmp(err, "timed out", 9) == 0) {
			char why[64];

			ddp_fmt(why, sizeof(why), "%s", err);
			nc_errf(err, errlen, "%s %s", conf->shared_root, why);
		}
		return -1;
	}
	return 0;
}

struct shared_job {
	const struct ddp_conf *conf;
	const char *user;
	uid_t uid;
	gid_t gid;
	unsigned long jobid;
};

/* Drops to the job's user for good (this is a child process). */
static int
become_user(const char *user, uid_t uid, gid_t gid, char *err, size_t errlen)
{
	if (getuid() == uid && geteuid() == uid)
		return 0;
	if ((user ? initgroups(user, gid) : setgroups(1, &gid)) < 0 ||
	    setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0) {
		nc_errf(err, errlen, "cannot become uid %lu: %s",
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

static int
shared_child(void *arg, char *err, size_t errlen)
{
	const struct shared_job *j = arg;
	const char *root = j->conf->shared_root;
	char jobname[32];
	struct stat st;
	int rootfd = -1, userfd = -1, jobfd = -1, created, rv = -1;

	ddp_fmt(jobname, sizeof(jobname), "%lu", j->jobid);
	rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0) {
		nc_errf(err, errlen, "open %s: %s", root, strerror(errno));
		goto out;
	}
	/* As root: make the user's directory where root may write. On
	 * root-squashed NFS this fails with EACCES and the user makes it
	 * below, which needs a shared_root the users may write to. */
	userfd = open_or_make(rootfd, j->user, &created);
	if (userfd < 0 && errno != EACCES && errno != EPERM && errno != EROFS) {
		nc_errf(err, errlen, "%s/%s: %s", root, j->user,
			errno == ELOOP || errno == ENOTDIR
				? "not a directory (symlink?)"
				: strerror(errno));
		goto out;
	}
	if (userfd >= 0 && created &&
	    (fchown(userfd, j->uid, j->gid) < 0 || fchmod(userfd, 0700) < 0)) {
		nc_errf(err, errlen, "chown %s/%s: %s", root, j->user,
			strerror(errno));
		goto out;
	}
	if (userfd >= 0) {
		close(userfd);
		userfd = -1;
	}
	/* Everything below the user's directory is the user's: create it
	 * as the user, so no symlink they planted is followed as root. */
	if (become_user(j->user, j->uid, j->gid, err, errlen) < 0)
		goto out;
	userfd = open_or_make(rootfd, j->user, &created);
	if (userfd < 0 || fstat(userfd, &st) < 0) {
		nc_errf(err, errlen, "%s/%s: %s", root, j->user,
			errno == ELOOP || errno == ENOTDIR
				? "not a directory (symlink?)"
				: strerror(errno));
		goto out;
	}
	if (st.st_uid != j->uid) {
		nc_errf(err, errlen, "%s/%s is owned by uid %lu, not %lu", root,
			j->user, (unsigned long)st.st_uid,
			(unsigned long)j->uid);
		goto out;
	}
	jobfd = open_or_make(userfd, jobname, &created);
	if (jobfd < 0 || fstat(jobfd, &st) < 0) {
		nc_errf(err, errlen, "%s/%s/%s: %s", root, j->user, jobname,
			errno == ELOOP || errno == ENOTDIR
				? "not a directory (symlink?)"
				: strerror(errno));
		goto out;
	}
	if (st.st_uid != j->uid || fchmod(jobfd, 0700) < 0) {
		nc_errf(err, errlen, "%s/%s/%s: wrong owner or mode", root,
			j->user, jobname);
		goto out;
	}
	rv = 0;
out:
	if (jobfd >= 0)
		close(jobfd);
	if (userfd >= 0)
		close(userfd);
	if (rootfd >= 0)
		close(rootfd);
	return rv;
}

int
nc_make_shared_dir(const struct ddp_conf *conf, const char *user, uid_t uid,
		   gid_t gid, unsigned long jobid, char *err, size_t errlen)
{
	struct shared_job j = {conf, user, uid, gid, jobid};
	char path[PATH_MAX];

	err[0] = '\0';
	if (ddp_conf_shared_dir(conf, user, jobid, path, sizeof(path)) < 0) {
		nc_errf(err, errlen, "no valid shared directory for user");
		return -1;
	}
	return nc_call_with_timeout(shared_child, &j, conf->shared_timeout, err,
				    errlen);
}

int
nc_make_scratch_dir(const struct ddp_conf *conf, uid_t uid, gid_t gid,
		    unsigned long jobid, int *node_fault, char *err,
		    size_t errlen)
{
	char jobname[32];
	struct stat st;
	int rootfd = -1, fd = -1, created, rv = -1;

	err[0] = '\0';
	*node_fault = 1;
	if (conf->scratch_root[0] == '\0')
		return 0;
	ddp_fmt(jobname, sizeof(jobname), "%lu", jobid);
	rootfd = nc_open_dir_nofollow(conf->scratch_root, 1, 0755);
	if (rootfd < 0 || fstat(rootfd, &st) < 0) {
		nc_errf(err, errlen, "scratch root %s unusable: %s",
			conf->scratch_root, strerror(errno));
		goto out;
	}
	/* A user who made the root first (say under /var/tmp) could swap
	 * its entries: refuse it rather than hand out directories in it. */
	if (st.st_uid != 0 || (st.st_mode & 022)) {
		nc_errf(err, errlen,
			"scratch root %s not owned by root or writable by "
			"others",
			conf->scratch_root);
		goto out;
	}
	fd = open_or_make(rootfd, jobname, &created);
	if (fd < 0 || fchown(fd, uid, gid) < 0 || fchmod(fd, 0700) < 0) {
		nc_errf(err, errlen, "scratch %s/%s: %s", conf->scratch_root,
			jobname, strerror(errno));
		goto out;
	}
	rv = 0;
out:
	if (fd >= 0)
		close(fd);
	if (rootfd >= 0)
		close(rootfd);
	return rv;
}

static int
rmtree(int pfd, const char *name, dev_t dev, int depth, char *err,
       size_t errlen)
{
	struct stat st;
	struct dirent *de;
	DIR *d = NULL;
	int fd = -1, pass, rv = -1;

	if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return 0;
		nc_errf(err, errlen, "stat %s: %s", name, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		if (unlinkat(pfd, name, 0) < 0 && errno != ENOENT) {
			nc_errf(err, errlen, "unlink %s: %s", name,
				strerror(errno));
			return -1;
		}
		return 0;
	}
	if (depth >= RMTREE_MAX_DEPTH) {
		nc_errf(err, errlen, "%s: deeper than %d levels", name,
			RMTREE_MAX_DEPTH);
		return -1;
	}
	fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		nc_errf(err, errlen, "open %s: %s", name, strerror(errno));
		goto out;
	}
	if (st.st_dev != dev) {
		nc_errf(err, errlen, "%s: another file system is mounted",
			name);
		goto out;
	}
	/* An owner removing their own tree may need to open up a 0500
	 * directory first; root does not, and it does no harm. */
	if ((st.st_mode & 0700) != 0700)
		fchmod(fd, st.st_mode | 0700);
	d = fdopendir(fd);
	if (!d) {
		nc_errf(err, errlen, "open %s: %s", name, strerror(errno));
		goto out;
	}
	fd = -1;
	/* Some file systems (NFS) may skip entries when a directory changes
	 * under readdir: go round again while it is not empty. */
	for (pass = 0;; pass++) {
		while ((de = readdir(d))) {
			if (strcmp(de->d_name, ".") == 0 ||
			    strcmp(de->d_name, "..") == 0)
				continue;
			if (rmtree(dirfd(d), de->d_name, dev, depth + 1, err,
				   errlen) < 0)
				goto out;
		}
		if (unlinkat(pfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
			break;
		if (errno != ENOTEMPTY || pass >= 3) {
			nc_errf(err, errlen, "rmdir %s: %s", name,
				strerror(errno));
			goto out;
		}
		rewinddir(d);
	}
	rv = 0;
out:
	if (d)
		closedir(d);
	if (fd >= 0)
		close(fd);
	return rv;
}

int
nc_rmtree_at(int pfd, const char *name, char *err, size_t errlen)
{
	struct stat st;

	err[0] = '\0';
	if (strchr(name, '/') || strcmp(name, ".") == 0 ||
	    strcmp(name, "..") == 0 || name[0] == '\0') {
		nc_errf(err, errlen, "refusing to remove '%s'", name);
		return -1;
	}
	if (fstat(pfd, &st) < 0) {
		nc_errf(err, errlen, "fstat: %s", strerror(errno));
		return -1;
	}
	return rmtree(pfd, name, st.st_dev, 0, err, errlen);
}

int
nc_remove_scratch_dir(const struct ddp_conf *conf, unsigned long jobid,
		      char *err, size_t errlen)
{
	char jobname[32];
	int rootfd, rv;

	err[0] = '\0';
	if (conf->scratch_root[0] == '\0')
		return 0;
	ddp_fmt(jobname, sizeof(jobname), "%lu", jobid);
	rootfd = nc_open_dir_nofollow(conf->scratch_root, 0, 0);
	if (rootfd < 0) {
		if (errno == ENOENT)
			return 0;
		nc_errf(err, errlen, "scratch root %s: %s", conf->scratch_root,
			strerror(errno));
		return -1;
	}
	rv = nc_rmtree_at(rootfd, jobname, err, errlen);
	close(rootfd);
	return rv;
}

struct sweep_job {
	int userfd;
	const char *name;
	uid_t uid;
	gid_t gid;
};

static int
sweep_child(void *arg, char *err, size_t errlen)
{
	const struct sweep_job *s = arg;

	if (become_user(NULL, s->uid, s->gid, err, errlen) < 0)
		return -1;
	return nc_rmtree_at(s->userfd, s->name, err, errlen);
}

static int
is_live(const unsigned long *live, size_t nlive, unsigned long id)
{
	size_t i;

	for (i = 0; i < nlive; i++)
		if (live[i] == id)
			return 1;
	return 0;
}

int
nc_sweep_shared(const struct ddp_conf *conf, const unsigned long *live,
		size_t nlive, time_t now, int dry_run, struct nc_buf *report,
		char *err, size_t errlen)
{
	time_t cutoff = now - (time_t)conf->retention_days * 86400;
	struct dirent *ue;
	DIR *root = NULL;
	int failures = 0;

	err[0] = '\0';
	if (conf->shared_root[0] == '\0')
		return 0;
	root = opendir(conf->shared_root);
	if (!root) {
		nc_errf(err, errlen, "open %s: %s", conf->shared_root,
			strerror(errno));
		return -1;
	}
	while ((ue = readdir(root))) {
		struct dirent *je;
		DIR *user = NULL;
		int ufd;

		if (!ddp_conf_valid_user(ue->d_name))
			continue;
		ufd = openat(dirfd(root), ue->d_name,
			     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (ufd < 0)
			continue;
		user = fdopendir(ufd);
		if (!user) {
			close(ufd);
			continue;
		}
		while ((je = readdir(user))) {
			struct sweep_job s;
			unsigned long id;
			struct stat st;
			char cerr[NC_ERR_LEN];

			if (nc_parse_jobid(je->d_name, &id) < 0 ||
			    is_live(live, nlive, id) ||
			    fstatat(dirfd(user), je->d_name, &st,
				    AT_SYMLINK_NOFOLLOW) < 0 ||
			    !S_ISDIR(st.st_mode) || st.st_mtime > cutoff)
				continue;
			if (dry_run) {
				nc_buf_printf(report, "would remove %s/%s/%s\n",
					      conf->shared_root, ue->d_name,
					      je->d_name);
				continue;
			}
			s = (struct sweep_job){dirfd(user), je->d_name,
					       st.st_uid, st.st_gid};
			if (nc_call_with_timeout(sweep_child, &s,
						 SWEEP_TIMEOUT_S, cerr,
						 sizeof(cerr)) < 0) {
				nc_buf_printf(report, "failed %s/%s/%s: %s\n",
					      conf->shared_root, ue->d_name,
					      je->d_name, cerr);
				failures++;
			} else {
				nc_buf_printf(report, "removed %s/%s/%s\n",
					      conf->shared_root, ue->d_name,
					      je->d_name);
			}
		}
		closedir(user);
	}
	closedir(root);
	return failures;
}
