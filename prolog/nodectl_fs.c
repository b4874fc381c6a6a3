/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ddp-nodectl core, storage part: the shared-root mount check (in a child
 * with a timeout), per-job shared and scratch directories made by the
 * rules of jobdir.h, and removal that never follows a symlink.
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
#include <time.h>
#include <unistd.h>

#include "ddp_util.h"

/* A sweep removes whole trees on a shared file system: allow it longer
 * than a prolog check. */
#define SWEEP_TIMEOUT_S 3600

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
read_file(const char *path, struct ddp_buf *out)
{
	char chunk[4096];
	ssize_t r;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rv = -1;

	if (fd < 0)
		return -1;
	while ((r = read(fd, chunk, sizeof(chunk))) > 0)
		if (ddp_buf_printf(out, "%.*s", (int)r, chunk) < 0)
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
	unsigned i;

	out[0] = '\0';
	for (i = 0; i < conf->n_shared_fstypes; i++)
		if (ddp_fmt_cat(out, len, "%s%s", i ? "," : "",
				conf->shared_fstypes[i]) < 0)
			break;
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
	struct ddp_buf mi = {0};
	struct stat st;
	int rv = -1;

	if (stat(conf->shared_root, &st) < 0) {
		ddp_errf(err, errlen, "%s %s", conf->shared_root,
			 errno == ENOENT ? "missing" : strerror(errno));
		goto out;
	}
	if (!S_ISDIR(st.st_mode) || !realpath(conf->shared_root, real)) {
		ddp_errf(err, errlen, "%s not a directory", conf->shared_root);
		goto out;
	}
	if (read_file("/proc/self/mountinfo", &mi) < 0 || !mi.s ||
	    nc_mount_lookup(mi.s, st.st_dev, real, type, sizeof(type), mnt,
			    sizeof(mnt)) < 0) {
		ddp_errf(err, errlen, "%s: mount table unreadable",
			 conf->shared_root);
		goto out;
	}
	/* A configured mount point must itself be in the mount table, so an
	 * unmounted share whose directory exists below it is caught even when
	 * the file system beneath has an accepted type. */
	if (conf->shared_mount[0] &&
	    !is_mount_point(mi.s, conf->shared_mount)) {
		ddp_errf(err, errlen, "%s not mounted", conf->shared_mount);
		goto out;
	}
	if (!fstype_accepted(conf, type)) {
		list_fstypes(conf, accepted, sizeof(accepted));
		if (strcmp(mnt, "/") == 0)
			ddp_errf(err, errlen, "%s not mounted",
				 conf->shared_root);
		else
			ddp_errf(err, errlen, "%s is %s, not %s",
				 conf->shared_root, type, accepted);
		goto out;
	}
	rv = 0;
out:
	ddp_buf_free(&mi);
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
			ddp_errf(err, errlen, "%s %s", conf->shared_root, why);
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

/* Runs in the child: it becomes the user and may block on the server. */
static int
shared_child(void *arg, char *err, size_t errlen)
{
	const struct shared_job *j = arg;

	return ddp_jobdir_make_shared(j->conf, j->user, j->uid, j->gid,
				      j->jobid, err, errlen);
}

int
nc_make_shared_dir(const struct ddp_conf *conf, const char *user, uid_t uid,
		   gid_t gid, unsigned long jobid, char *err, size_t errlen)
{
	struct shared_job j = {conf, user, uid, gid, jobid};
	char path[PATH_MAX];

	err[0] = '\0';
	if (ddp_jobdir_shared(conf, user, jobid, path, sizeof(path)) < 0) {
		ddp_errf(err, errlen, "no valid shared directory for user");
		return -1;
	}
	return nc_call_with_timeout(shared_child, &j, conf->shared_timeout, err,
				    errlen);
}

int
nc_make_scratch_dir(const struct ddp_conf *conf, uid_t uid, gid_t gid,
		    unsigned long jobid, int *node_fault, int *leftover,
		    char *err, size_t errlen)
{
	char jobname[32], rerr[DDP_ERR_LEN], path[PATH_MAX];
	struct stat st;
	int rootfd = -1, squatted, rv = -1;

	err[0] = '\0';
	*node_fault = 1;
	*leftover = 0;
	if (conf->scratch_root[0] == '\0')
		return 0;
	ddp_fmt(jobname, sizeof(jobname), "%lu", jobid);
	rootfd = ddp_jobdir_open_root(conf->scratch_root, "scratch root",
				      &squatted, err, errlen);
	if (rootfd < 0) {
		/* A squatted root is a user's doing: the job goes on without
		 * scratch rather than letting users drain nodes. */
		*node_fault = !squatted;
		goto out;
	}
	/* Whatever is there under this job id (an earlier job's leftover)
	 * goes first, as root: it is never handed to the new owner. */
	if (fstatat(rootfd, jobname, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		*leftover = 1;
		if (nc_rmtree_at(rootfd, jobname, rerr, sizeof(rerr)) < 0) {
			ddp_errf(err, errlen,
				 "scratch %s/%s left over from an earlier job "
				 "and cannot be removed: %s",
				 conf->scratch_root, jobname, rerr);
			goto out;
		}
	}
	if (ddp_fmt(path, sizeof(path), "scratch %s/%s", conf->scratch_root,
		    jobname) < 0 ||
	    ddp_jobdir_make_private(rootfd, jobname, path, uid, gid, err,
				    errlen) < 0)
		goto out;
	rv = 0;
out:
	ddp_close(&rootfd);
	return rv;
}

/* One directory on the way down: its name in its parent, its identity, and
 * how often its removal found it refilled. */
struct rm_level {
	char name[NAME_MAX + 1];
	dev_t dev;
	ino_t ino;
	int passes;
};

struct rm_stack {
	struct rm_level *v;
	size_t n, cap;
};

static int
rm_push(struct rm_stack *s, const char *name, const struct stat *st)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		struct rm_level *v = realloc(s->v, cap * sizeof(*v));

		if (!v)
			return -1;
		s->v = v;
		s->cap = cap;
	}
	if (ddp_fmt(s->v[s->n].name, sizeof(s->v[s->n].name), "%s", name) < 0)
		return -1;
	s->v[s->n].dev = st->st_dev;
	s->v[s->n].ino = st->st_ino;
	s->v[s->n].passes = 0;
	s->n++;
	return 0;
}

/*
 * Opens the directory pfd/name that fstatat reported as st, without
 * following a symlink, and checks that it is that directory and on dev;
 * root then takes it from its owner. An owner removing their own tree may
 * need to open up a 0500 or 0000 directory first; root does not, and it
 * does no harm.
 */
static int
rm_open(int pfd, const char *name, const struct stat *st, dev_t dev, char *err,
	size_t errlen)
{
	struct stat now;
	int fd;

	if (st->st_dev != dev) {
		ddp_errf(err, errlen,
			 "%s: another file system is mounted there (not "
			 "removed; unmount it first)",
			 name);
		return -1;
	}
	fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == EACCES && st->st_uid == geteuid() &&
	    fchmodat(pfd, name, (st->st_mode & DDP_MODE_BITS) | 0700,
		     AT_SYMLINK_NOFOLLOW) == 0)
		fd = openat(pfd, name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &now) < 0) {
		ddp_errf(err, errlen, "open %s: %s", name, strerror(errno));
		goto fail;
	}
	if (now.st_dev != st->st_dev || now.st_ino != st->st_ino) {
		ddp_errf(err, errlen, "%s: replaced while being removed", name);
		goto fail;
	}
	/* Root takes the directory before emptying it: a process of its
	 * owner that outlives the job can no longer add entries, so the
	 * emptying has an end. */
	if (geteuid() == 0 && ddp_jobdir_take(fd) < 0) {
		ddp_errf(err, errlen, "%s: cannot take it from its owner: %s",
			 name, strerror(errno));
		goto fail;
	}
	if ((now.st_mode & 0700) != 0700)
		(void)fchmod(fd, (now.st_mode & DDP_MODE_BITS) | 0700);
	return fd;
fail:
	ddp_close(&fd);
	return -1;
}

/*
 * Removes every entry of the directory fd that is not a directory and
 * stops at the first directory, whose name and status it stores. Returns
 * 1 when it found one, 0 when fd holds no directory any more, -2 when end
 * has passed, -1 on error.
 */
static int
rm_scan(int fd, double end, char *sub, size_t sublen, struct stat *subst,
	char *err, size_t errlen)
{
	struct dirent *de;
	DIR *d = NULL;
	int rfd, rv = -1;

	/* A fresh open of ".": its own position, from the start. */
	rfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0 || !(d = fdopendir(rfd))) {
		ddp_errf(err, errlen, "read directory: %s", strerror(errno));
		ddp_close(&rfd);
		return -1;
	}
	errno = 0;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (ddp_now() >= end) {
			rv = -2;
			goto out;
		}
		if (fstatat(fd, de->d_name, subst, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT)
				continue;
			ddp_errf(err, errlen, "stat %s: %s", de->d_name,
				 strerror(errno));
			goto out;
		}
		if (S_ISDIR(subst->st_mode)) {
			if (ddp_fmt(sub, sublen, "%s", de->d_name) < 0) {
				ddp_errf(err, errlen, "name too long");
				goto out;
			}
			rv = 1;
			goto out;
		}
		if (unlinkat(fd, de->d_name, 0) < 0 && errno != ENOENT) {
			ddp_errf(err, errlen, "unlink %s: %s", de->d_name,
				 strerror(errno));
			goto out;
		}
		errno = 0;
	}
	if (errno) {
		ddp_errf(err, errlen, "read directory: %s", strerror(errno));
		goto out;
	}
	rv = 0;
out:
	closedir(d);
	return rv;
}

/* name under pfd when it is no directory: removed (0; absent is fine),
 * or -1. 1 with *st filled when it is a directory. */
static int
rm_leaf(int pfd, const char *name, struct stat *st, char *err, size_t errlen)
{
	if (fstatat(pfd, name, st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return 0;
		ddp_errf(err, errlen, "stat %s: %s", name, strerror(errno));
		return -1;
	}
	if (S_ISDIR(st->st_mode))
		return 1;
	if (unlinkat(pfd, name, 0) < 0 && errno != ENOENT) {
		ddp_errf(err, errlen, "unlink %s: %s", name, strerror(errno));
		return -1;
	}
	return 0;
}

/* Goes down into sub of *cur (st: its stat), one level more on s. */
static int
rm_descend(struct rm_stack *s, int *cur, const char *sub, const struct stat *st,
	   dev_t dev, char *err, size_t errlen)
{
	int next = rm_open(*cur, sub, st, dev, err, errlen);

	if (next < 0)
		return -1;
	close(*cur);
	*cur = next;
	if (rm_push(s, sub, st) < 0) {
		ddp_errf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

/*
 * The parent of cur (the top of s, below the tree's root name), opened
 * through ".." and checked to be the directory the removal came from.
 */
static int
rm_parent(int cur, const struct rm_stack *s, const char *name, char *err,
	  size_t errlen)
{
	struct stat ust;
	int up = openat(cur, "..",
			O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (up < 0 || fstat(up, &ust) < 0 || ust.st_dev != s->v[s->n - 2].dev ||
	    ust.st_ino != s->v[s->n - 2].ino) {
		ddp_errf(err, errlen,
			 "%s: moved while being removed (%zu levels below %s)",
			 s->v[s->n - 1].name, s->n - 1, name);
		ddp_close(&up);
		return -1;
	}
	return up;
}

/*
 * Depth-first removal without recursion and without a depth limit: one
 * directory is open at a time; going up opens ".." and checks that it is
 * the directory we came from, so a subtree moved elsewhere while we are in
 * it stops the removal instead of leading it out of the tree.
 */
static int
rmtree(int pfd, const char *name, dev_t dev, unsigned limit_s, char *err,
       size_t errlen)
{
	struct rm_stack s = {0};
	double end;
	char sub[NAME_MAX + 1];
	struct stat st;
	int cur = -1, up = -1, rv = -1, rc;

	end = ddp_now() + (double)limit_s;

	rc = rm_leaf(pfd, name, &st, err, errlen);
	if (rc <= 0)
		return rc;
	cur = rm_open(pfd, name, &st, dev, err, errlen);
	if (cur < 0)
		goto out;
	if (rm_push(&s, name, &st) < 0) {
		ddp_errf(err, errlen, "out of memory");
		goto out;
	}
	while (s.n > 0) {
		struct rm_level *top = &s.v[s.n - 1];

		rc = rm_scan(cur, end, sub, sizeof(sub), &st, err, errlen);
		if (rc == -2 || (rc >= 0 && ddp_now() >= end)) {
			ddp_errf(err, errlen,
				 "%s: not removed within %u s, entries keep "
				 "appearing %zu levels below it (what is left "
				 "stays)",
				 name, limit_s, s.n - 1);
			goto out;
		}
		if (rc < 0)
			goto out;
		if (rc > 0) {
			if (rm_descend(&s, &cur, sub, &st, dev, err, errlen) <
			    0)
				goto out;
			continue;
		}
		/* cur is empty: remove it from its parent. */
		if (s.n == 1)
			up = pfd;
		else if ((up = rm_parent(cur, &s, name, err, errlen)) < 0)
			goto out;
		if (unlinkat(up, top->name, AT_REMOVEDIR) < 0 &&
		    errno != ENOENT) {
			/* Some file systems (NFS) may skip entries when a
			 * directory changes under readdir: go round again. */
			if (errno == ENOTEMPTY && top->passes++ < 3) {
				if (up != pfd)
					close(up);
				up = -1;
				continue;
			}
			ddp_errf(err, errlen, "rmdir %s: %s", top->name,
				 strerror(errno));
			goto out;
		}
		ddp_close(&cur);
		s.n--;
		if (s.n > 0)
			cur = up;
		up = -1;
	}
	rv = 0;
out:
	if (up >= 0 && up != pfd)
		close(up);
	ddp_close(&cur);
	free(s.v);
	return rv;
}

int
nc_rmtree_within(int pfd, const char *name, unsigned limit_s, char *err,
		 size_t errlen)
{
	struct stat st;

	err[0] = '\0';
	if (strchr(name, '/') || strcmp(name, ".") == 0 ||
	    strcmp(name, "..") == 0 || name[0] == '\0') {
		ddp_errf(err, errlen, "refusing to remove '%s'", name);
		return -1;
	}
	if (fstat(pfd, &st) < 0) {
		ddp_errf(err, errlen, "fstat: %s", strerror(errno));
		return -1;
	}
	return rmtree(pfd, name, st.st_dev, limit_s, err, errlen);
}

int
nc_rmtree_at(int pfd, const char *name, char *err, size_t errlen)
{
	return nc_rmtree_within(pfd, name, NC_RMTREE_LIMIT_S, err, errlen);
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
	rootfd = ddp_jobdir_open_nofollow(conf->scratch_root, 0, 0);
	if (rootfd < 0) {
		if (errno == ENOENT)
			return 0;
		ddp_errf(err, errlen, "scratch root %s: %s", conf->scratch_root,
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

	if (ddp_jobdir_become_user(NULL, s->uid, s->gid, err, errlen) < 0)
		return -1;
	return nc_rmtree_within(s->userfd, s->name, SWEEP_TIMEOUT_S, err,
				errlen);
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
		size_t nlive, time_t now, int dry_run, struct ddp_buf *report,
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
		ddp_errf(err, errlen, "open %s: %s", conf->shared_root,
			 strerror(errno));
		return -1;
	}
	while ((ue = readdir(root))) {
		struct dirent *je;
		DIR *user = NULL;
		int ufd;

		if (!ddp_jobdir_valid_user(ue->d_name))
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
			char cerr[DDP_ERR_LEN];

			if (nc_parse_jobid(je->d_name, &id) < 0 ||
			    is_live(live, nlive, id) ||
			    fstatat(dirfd(user), je->d_name, &st,
				    AT_SYMLINK_NOFOLLOW) < 0 ||
			    !S_ISDIR(st.st_mode) || st.st_mtime > cutoff)
				continue;
			if (dry_run) {
				ddp_buf_printf(report,
					       "would remove %s/%s/%s\n",
					       conf->shared_root, ue->d_name,
					       je->d_name);
				continue;
			}
			s = (struct sweep_job){dirfd(user), je->d_name,
					       st.st_uid, st.st_gid};
			if (nc_call_with_timeout(sweep_child, &s,
						 SWEEP_TIMEOUT_S, cerr,
						 sizeof(cerr)) < 0) {
				ddp_buf_printf(report, "failed %s/%s/%s: %s\n",
					       conf->shared_root, ue->d_name,
					       je->d_name, cerr);
				failures++;
			} else {
				ddp_buf_printf(report, "removed %s/%s/%s\n",
					       conf->shared_root, ue->d_name,
					       je->d_name);
			}
		}
		closedir(user);
	}
	closedir(root);
	return failures;
}
