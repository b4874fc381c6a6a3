/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The Epilog's and reconcile's removal of libddp's shared memory
 * (nc_remove_shm): segments named as worker/shm.c names them, owned by
 * the job's user, go for their job only; other jobs' segments, names that
 * merely look alike and anything that is not a regular file stay. The
 * segments are made by libddp's own wk_shm_create where it can (the real
 * names, in the real /dev/shm), and in a private directory for the cases
 * around them.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <utime.h>

#include "nodectl.h"
#include "shm.h"
#include "tap.h"

#define HEX "0123456789abcdef0123456789abcdef"

static char dir[64];

/* Makes dir/name, mode 0600, owned by uid (when root). */
static int
make(const char *name, uid_t uid)
{
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	if (write(fd, "x", 1) != 1 ||
	    (geteuid() == 0 && fchown(fd, uid, uid) < 0)) {
		close(fd);
		return -1;
	}
	return close(fd);
}

static int
exists(const char *name)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return lstat(path, &st) == 0;
}

/* Sets name's modification time to seconds ago. */
static int
age(const char *name, long seconds)
{
	char path[PATH_MAX];
	struct utimbuf t;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	t.actime = t.modtime = time(NULL) - seconds;
	return utime(path, &t);
}

static const char *const job12[] = {
	"ddp-12.0-" HEX, "ddp-12.4294967294-" HEX, /* the batch step */
	"ddp-12.-" HEX,				   /* no SLURM_STEP_ID */
};
static const char *const others[] = {
	"ddp-123.0-" HEX,	    /* job 123 */
	"ddp-1.0-" HEX,		    /* job 1 */
	"ddp-012.0-" HEX,	    /* not how job 12 is spelled */
	"ddp-12.0-" HEX "0",	    /* 33 hex digits */
	"ddp-12.0-0123456789ABCDEF" /* upper case */
	"0123456789abcdef",
	"ddp-12.0-short",
	"ddp-12",
	"ddp-12.0",
	"ddp-12.0-" HEX ".tmp",
	"other-12.0-" HEX,
	"ddp-test-foreign",
};
#define N(a) (sizeof(a) / sizeof((a)[0]))

static void
test_epilog(void)
{
	size_t i, removed = 99;
	char err[512], path[PATH_MAX];
	int ok = 1, rc;

	for (i = 0; i < N(job12); i++)
		ok &= make(job12[i], 65534) == 0;
	for (i = 0; i < N(others); i++)
		ok &= make(others[i], 65534) == 0;
	snprintf(path, sizeof(path), "%s/ddp-12.1-" HEX, dir);
	ok &= mkdir(path, 0700) == 0;
	snprintf(path, sizeof(path), "%s/ddp-12.2-" HEX, dir);
	ok &= symlink("ddp-123.0-" HEX, path) == 0;
	tap_ok(ok,
	       "setup: job 12's segments (the user's), others, look-alikes");

	rc = nc_remove_shm(dir, 12, NULL, 0, 0, &removed, err, sizeof(err));
	if (!tap_ok(rc == 0 && removed == N(job12),
		    "the epilog of job 12 removes its %zu segments", N(job12)))
		tap_diag("rc %d, %zu removed: %s", rc, removed, err);
	for (i = 0, ok = 1; i < N(job12); i++)
		if (exists(job12[i])) {
			tap_diag("left: %s", job12[i]);
			ok = 0;
		}
	tap_ok(ok, "none of job 12's segments is left");
	for (i = 0, ok = 1; i < N(others); i++)
		if (!exists(others[i])) {
			tap_diag("removed: %s", others[i]);
			ok = 0;
		}
	tap_ok(ok, "other jobs' segments and names that only look alike "
		   "stay");
	tap_ok(exists("ddp-12.1-" HEX) && exists("ddp-12.2-" HEX),
	       "a directory or a symlink under a segment's name stays");
	tap_ok(nc_remove_shm(dir, 12, NULL, 0, 0, &removed, err, sizeof(err)) ==
			       0 &&
		       removed == 0,
	       "a second epilog finds nothing to do");
	tap_ok(nc_remove_shm("/nonexistent-ddp-shm", 12, NULL, 0, 0, &removed,
			     err, sizeof(err)) < 0 &&
		       strstr(err, "/nonexistent-ddp-shm"),
	       "an unreadable directory is an error naming it: %s", err);
}

static void
test_reconcile(void)
{
	static const unsigned long live[] = {123};
	size_t removed = 99;
	char err[512];
	int rc;

	tap_ok(make("ddp-77.0-" HEX, 65534) == 0 &&
		       make("ddp-78.0-" HEX, 65534) == 0 &&
		       age("ddp-1.0-" HEX, 3600) == 0 &&
		       age("ddp-123.0-" HEX, 3600) == 0 &&
		       age("ddp-77.0-" HEX, 3600) == 0,
	       "setup: jobs 1 and 77 (old), 78 (new), 123 (live, old)");
	rc = nc_remove_shm(dir, 0, live, N(live), 600, &removed, err,
			   sizeof(err));
	if (!tap_ok(rc == 0 && removed == 2,
		    "reconcile removes the old segments of jobs not live"))
		tap_diag("rc %d, %zu removed: %s", rc, removed, err);
	tap_ok(!exists("ddp-1.0-" HEX) && !exists("ddp-77.0-" HEX),
	       "jobs 1 and 77: gone");
	tap_ok(exists("ddp-123.0-" HEX), "job 123, live: kept");
	tap_ok(exists("ddp-78.0-" HEX),
	       "job 78, younger than the grace time: kept");
	tap_ok(exists("ddp-012.0-" HEX) && exists("ddp-12.0-short"),
	       "look-alikes: kept");
}

/* libddp's own segment, in the real /dev/shm: the name the Epilog
 * matches is the one libddp makes. A child with SLURM_JOB_ID and
 * SLURM_STEP_ID set makes it as the job's user and exits without
 * unlinking it, as a step killed during setup does. */
static void
test_real_segment(void)
{
	static const char *const id = "4000000123";
	char path[PATH_MAX], name[NAME_MAX + 1], err[512];
	size_t removed = 0;
	int pfd[2], status = 0;
	ssize_t n;
	pid_t pid;

	if (pipe(pfd) < 0)
		return;
	pid = fork();
	if (pid == 0) {
		struct wk_shm seg;

		close(pfd[0]);
		if (geteuid() == 0 && (setgid(65534) < 0 || setuid(65534) < 0))
			_exit(2);
		if (wk_shm_create(&seg, 1 << 16, id, "3") != DDP_OK)
			_exit(3);
		/* Gone before every rank mapped it: the name stays. */
		_exit(write(pfd[1], seg.name + 1, strlen(seg.name + 1)) > 0
			      ? 0
			      : 4);
	}
	close(pfd[1]);
	n = read(pfd[0], name, sizeof(name) - 1);
	name[n > 0 ? n : 0] = '\0';
	close(pfd[0]);
	waitpid(pid, &status, 0);
	snprintf(path, sizeof(path), NC_SHM_DIR "/%s", name);
	if (!tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
			    access(path, F_OK) == 0,
		    "setup: a segment of job %s left in %s", id, NC_SHM_DIR)) {
		tap_diag("status %d name '%s'", status, name);
		return;
	}
	tap_ok(nc_remove_shm(NC_SHM_DIR, 4000000124UL, NULL, 0, 0, &removed,
			     err, sizeof(err)) == 0 &&
		       access(path, F_OK) == 0,
	       "another job's epilog leaves it");
	tap_ok(nc_remove_shm(NC_SHM_DIR, 4000000123UL, NULL, 0, 0, &removed,
			     err, sizeof(err)) == 0 &&
		       removed == 1 && access(path, F_OK) < 0 &&
		       errno == ENOENT,
	       "its job's epilog removes it (%s)", name);
}

int
main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/test-prolog-shm.XXXXXX");
	if (!mkdtemp(dir)) {
		tap_ok(0, "mkdtemp: %s", strerror(errno));
		return tap_done();
	}
	test_epilog();
	test_reconcile();
	test_real_segment();
	{
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			tap_diag("cannot remove %s", dir);
	}
	return tap_done();
}
