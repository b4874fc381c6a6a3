/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What a program needs to resume from its checkpoint: how many times its
 * job or step was started again, and files written so that no crash
 * leaves a torn one under the final name. Uses status.c only.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ddp_util.h"
#include "resume.h"
#include "status.h"

/* The longest successful ddp_write_atomic, in microseconds. */
static long long write_longest_us;

/* Room a temporary name needs beyond the final one: ".", then
 * ".tmp-PID-SEQ-NSEC" (NAME_MAX - TMP_EXTRA: 191 bytes left for names). */
#define TMP_EXTRA 64

int
ddp_restart_count(void)
{
	static const char *const vars[] = {"DDP_RESTART_COUNT",
					   "SLURM_RESTART_COUNT"};
	const char *v;
	long n;
	size_t i;

	for (i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		v = getenv(vars[i]);
		if (!v)
			continue;
		if (ddp_parse_long(v, 0, INT_MAX, &n) < 0) {
			wk_err(DDP_ERR_ENV,
			       "%s='%s' is not a restart count (a whole number "
			       "from 0 to %d)",
			       vars[i], v, INT_MAX);
			return -1;
		}
		return (int)n;
	}
	return 0;
}

/*
 * The directory a file call works in: dir, or the job's shared directory
 * when dir is NULL. Checks that name is one file name in it.
 */
static enum ddp_status
resolve(const char *fn, const char **dir, const char *name)
{
	if (!*dir) {
		*dir = getenv("DDP_SHARED_DIR");
		if (!*dir || !**dir)
			return wk_err(
				DDP_ERR_ENV,
				"%s: no directory given and DDP_SHARED_DIR "
				"is not set (srun --ddp sets it where the "
				"site has a shared root)",
				fn);
	}
	if (!**dir)
		return wk_err(DDP_ERR_INVALID, "%s: the directory is \"\"", fn);
	if (!name || !*name || strchr(name, '/') || strcmp(name, ".") == 0 ||
	    strcmp(name, "..") == 0)
		return wk_err(DDP_ERR_INVALID,
			      "%s: '%s' is not a file name (no '/', not . or "
			      "..)",
			      fn, name ? name : "(null)");
	if (strlen(name) + TMP_EXTRA > NAME_MAX)
		return wk_err(DDP_ERR_INVALID,
			      "%s: the name '%.40s...' is longer than %d "
			      "characters",
			      fn, name, NAME_MAX - TMP_EXTRA);
	return DDP_OK;
}

/* A system call's failure as DDP_ERR_SYSTEM, errno kept for the caller. */
static enum ddp_status
sys_err(const char *fn, const char *call, const char *dir, const char *name)
{
	int e = errno;

	wk_err(DDP_ERR_SYSTEM, "%s: %s %s/%s: %s", fn, call, dir, name,
	       strerror(e));
	errno = e;
	return DDP_ERR_SYSTEM;
}

/*
 * A directory's fsync makes a rename durable. Some file systems cannot
 * sync a directory (EINVAL): there the rename is as durable as they make
 * it, which is all a program can have.
 */
static int
sync_dir(int dfd)
{
	if (fsync(dfd) == 0 || errno == EINVAL)
		return 0;
	return -1;
}

enum ddp_status
ddp_write_atomic(const char *dir, const char *name, const void *buf, size_t len)
{
	static unsigned long seq;
	const char *fn = "ddp_write_atomic";
	char tmp[NAME_MAX + 1];
	enum ddp_status st;
	int dfd = -1, fd = -1, created = 0, tries, e;
	struct timespec ts;
	double t0 = ddp_now();
	long long us, had;

	st = resolve(fn, &dir, name);
	if (st)
		return st;
	if (!buf && len)
		return wk_err(DDP_ERR_INVALID, "%s: buf is NULL", fn);
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return sys_err(fn, "open", dir, "");
	/* A name no other writer (thread, process, node sharing dir) uses;
	 * O_EXCL refuses one that a killed writer left behind. */
	for (tries = 0; fd < 0 && tries < 16; tries++) {
		clock_gettime(CLOCK_REALTIME, &ts);
		if (ddp_fmt(tmp, sizeof(tmp), ".%s.tmp-%ld-%lu-%ld", name,
			    (long)getpid(),
			    __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED),
			    (long)ts.tv_nsec) < 0) {
			st = wk_err(DDP_ERR_INVALID, "%s: name too long", fn);
			goto out;
		}
		fd = openat(dfd, tmp,
			    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
				    O_CLOEXEC,
			    0600);
		if (fd < 0 && errno != EEXIST)
			break;
	}
	if (fd < 0) {
		st = sys_err(fn, "create", dir, tmp);
		goto out;
	}
	created = 1;
	if (ddp_write_all(fd, buf, len) < 0) {
		st = sys_err(fn, "write", dir, tmp);
		goto out;
	}
	if (fsync(fd) < 0) {
		st = sys_err(fn, "fsync", dir, tmp);
		goto out;
	}
	/* Network file systems report a failed write as late as close. */
	e = close(fd);
	fd = -1;
	if (e < 0) {
		st = sys_err(fn, "close", dir, tmp);
		goto out;
	}
	if (renameat(dfd, tmp, dfd, name) < 0) {
		st = sys_err(fn, "rename over", dir, name);
		goto out;
	}
	created = 0;
	if (sync_dir(dfd) < 0) {
		st = sys_err(fn, "fsync the directory of", dir, name);
		goto out;
	}
	/* An agreed stop leaves room for the checkpoint (wish.h). */
	us = (long long)((ddp_now() - t0) * 1e6);
	had = __atomic_load_n(&write_longest_us, __ATOMIC_RELAXED);
	while (us > had &&
	       !__atomic_compare_exchange_n(&write_longest_us, &had, us, 0,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
out:
	e = errno;
	if (fd >= 0)
		close(fd);
	if (created)
		(void)unlinkat(dfd, tmp, 0);
	close(dfd);
	errno = e;
	return st;
}

enum ddp_status
ddp_read_file(const char *dir, const char *name, void *buf, size_t cap,
	      size_t *len)
{
	const char *fn = "ddp_read_file";
	enum ddp_status st;
	struct stat sb;
	size_t got = 0;
	ssize_t n;
	char probe;
	int fd = -1, dfd = -1, e;

	st = resolve(fn, &dir, name);
	if (st)
		return st;
	if (!len || (!buf && cap))
		return wk_err(DDP_ERR_INVALID, "%s: %s is NULL", fn,
			      len ? "buf" : "len");
	*len = 0;
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return sys_err(fn, "open", dir, "");
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &sb) < 0) {
		st = sys_err(fn, "open", dir, name);
		goto out;
	}
	if (!S_ISREG(sb.st_mode)) {
		st = wk_err(DDP_ERR_INVALID, "%s: %s/%s is not a regular file",
			    fn, dir, name);
		goto out;
	}
	if ((unsigned long long)sb.st_size > cap) {
		*len = (size_t)sb.st_size;
		st = wk_err(DDP_ERR_INVALID,
			    "%s: %s/%s has %lld bytes, more than the %zu "
			    "given",
			    fn, dir, name, (long long)sb.st_size, cap);
		goto out;
	}
	/* Read to the end, not to st_size: a file replaced by rename stays
	 * what was opened, but one written in place may have grown. */
	for (;;) {
		n = read(fd, got < cap ? (char *)buf + got : &probe,
			 got < cap ? cap - got : 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			st = sys_err(fn, "read", dir, name);
			goto out;
		}
		if (n == 0)
			break;
		if (got == cap) {
			*len = cap + 1;
			st = wk_err(DDP_ERR_INVALID,
				    "%s: %s/%s grew past the %zu bytes given "
				    "while it was read",
				    fn, dir, name, cap);
			goto out;
		}
		got += (size_t)n;
	}
	*len = got;
out:
	e = errno;
	if (fd >= 0)
		close(fd);
	close(dfd);
	errno = e;
	return st;
}

double
wk_resume_write_longest(void)
{
	return (double)__atomic_load_n(&write_longest_us, __ATOMIC_RELAXED) /
	       1e6;
}
