/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of ddp-nodectl's storage and process core: mount lookup,
 * the timeout child, running programs, symlink-safe removal, per-job
 * shared and scratch directories and the retention sweep.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ddp_util.h"
#include "nodectl.h"
#include "tap.h"

#define NOBODY 65534

static char top[] = "/tmp/test-prolog-fs.XXXXXX";

static const char *
at(const char *rel)
{
	static char bufs[4][1024];
	static int i;
	char *b = bufs[i++ % 4];

	snprintf(b, sizeof(bufs[0]), "%s/%s", top, rel);
	return b;
}

static int
touch(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

static int
exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

static void
link_to(const char *target, const char *path)
{
	if (symlink(target, path) < 0)
		tap_diag("symlink %s: %s", path, strerror(errno));
}

static void
test_mount_lookup(void)
{
	static const char mi[] =
		"21 26 0:20 / /proc rw - proc proc rw\n"
		"26 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
		"30 26 0:50 / /shared rw - nfs4 srv:/export rw\n"
		"31 30 0:51 / /shared/with\\040space rw - lustre x rw\n"
		"32 30 0:52 / /shared/over rw - tmpfs tmpfs rw\n"
		"33 30 0:53 / /shared/over rw - xfs /dev/sdb rw\n";
	char type[64], mnt[256];

	tap_ok(nc_mount_lookup(mi, makedev(0, 50), "/anything", type,
			       sizeof(type), mnt, sizeof(mnt)) == 0 &&
		       strcmp(type, "nfs4") == 0 && strcmp(mnt, "/shared") == 0,
	       "lookup by device");
	tap_ok(nc_mount_lookup(mi, makedev(9, 9), "/shared/ddp/x", type,
			       sizeof(type), mnt, sizeof(mnt)) == 0 &&
		       strcmp(type, "nfs4") == 0,
	       "unknown device: longest mount-point prefix");
	tap_ok(nc_mount_lookup(mi, makedev(9, 9), "/sharedx", type,
			       sizeof(type), mnt, sizeof(mnt)) == 0 &&
		       strcmp(type, "ext4") == 0 && strcmp(mnt, "/") == 0,
	       "prefix matches whole components only");
	tap_ok(nc_mount_lookup(mi, makedev(9, 9), "/shared/with space/a", type,
			       sizeof(type), mnt, sizeof(mnt)) == 0 &&
		       strcmp(type, "lustre") == 0,
	       "escaped mount points");
	tap_ok(nc_mount_lookup(mi, makedev(9, 9), "/shared/over", type,
			       sizeof(type), mnt, sizeof(mnt)) == 0 &&
		       strcmp(type, "xfs") == 0,
	       "the last of stacked mounts wins");
	tap_ok(nc_mount_lookup("", makedev(9, 9), "/x", type, sizeof(type), mnt,
			       sizeof(mnt)) < 0,
	       "empty table: not found");
}

static int
sleeper(void *arg, char *err, size_t errlen)
{
	sleep(30);
	return 0;
}

static int
failer(void *arg, char *err, size_t errlen)
{
	ddp_errf(err, errlen, "child says %s", (const char *)arg);
	return -1;
}

static int
succeeder(void *arg, char *err, size_t errlen)
{
	return 0;
}

static void
test_processes(void)
{
	char err[DDP_ERR_LEN];
	char *cat[] = {"/bin/cat", NULL}, *fls[] = {"/bin/false", NULL};
	char *slp[] = {"/bin/sleep", "30", NULL};
	char *nope[] = {"/nonexistent/prog", NULL};
	struct ddp_buf out = {0};
	time_t t0;

	t0 = time(NULL);
	tap_ok(nc_call_with_timeout(sleeper, NULL, 1, err, sizeof(err)) < 0 &&
		       strstr(err, "timed out after 1 s"),
	       "hung child times out");
	tap_ok(time(NULL) - t0 <= tap_bound(3, 15),
	       "and the caller is not held");
	tap_ok(nc_call_with_timeout(failer, "no", 5, err, sizeof(err)) < 0 &&
		       strcmp(err, "child says no") == 0,
	       "child error text comes back");
	tap_ok(nc_call_with_timeout(succeeder, NULL, 5, err, sizeof(err)) == 0,
	       "child success");

	tap_ok(nc_run(cat, NULL, "hello\n", &out, 5, err, sizeof(err)) == 0 &&
		       out.s && strcmp(out.s, "hello\n") == 0,
	       "run: stdin in, stdout back");
	ddp_buf_free(&out);
	tap_ok(nc_run(fls, NULL, NULL, NULL, 5, err, sizeof(err)) == 1 &&
		       strstr(err, "status 1"),
	       "run: exit status");
	t0 = time(NULL);
	tap_ok(nc_run(slp, NULL, NULL, NULL, 1, err, sizeof(err)) < 0 &&
		       strstr(err, "timed out") &&
		       time(NULL) - t0 <= tap_bound(3, 15),
	       "run: timeout kills");
	tap_ok(nc_run(nope, NULL, NULL, NULL, 5, err, sizeof(err)) == 127,
	       "run: missing program is 127");
}

static void
test_rmtree(void)
{
	char err[DDP_ERR_LEN];
	int fd;

	mkdir(at("outside"), 0755);
	touch(at("outside/keep"));
	mkdir(at("tree"), 0755);
	mkdir(at("tree/a"), 0755);
	mkdir(at("tree/a/b"), 0500);
	touch(at("tree/a/f"));
	link_to(at("outside"), at("tree/link"));
	link_to(at("outside/keep"), at("tree/a/filelink"));
	fd = open(top, O_RDONLY | O_DIRECTORY);
	tap_ok(nc_rmtree_at(fd, "tree", err, sizeof(err)) == 0, "tree removed");
	tap_diag("%s", err);
	tap_ok(!exists(at("tree")), "tree is gone");
	tap_ok(exists(at("outside/keep")), "symlink targets untouched");
	tap_ok(nc_rmtree_at(fd, "tree", err, sizeof(err)) == 0,
	       "missing tree is fine");
	link_to(at("outside"), at("toplink"));
	tap_ok(nc_rmtree_at(fd, "toplink", err, sizeof(err)) == 0 &&
		       !exists(at("toplink")) && exists(at("outside/keep")),
	       "a symlink itself is unlinked, not followed");
	tap_ok(nc_rmtree_at(fd, "..", err, sizeof(err)) < 0 &&
		       nc_rmtree_at(fd, "a/b", err, sizeof(err)) < 0 &&
		       nc_rmtree_at(fd, "", err, sizeof(err)) < 0,
	       "names with '/' or dot names refused");
	close(fd);

	mkdir(at("real"), 0755);
	link_to(at("real"), at("sym"));
	errno = 0;
	fd = ddp_jobdir_open_nofollow(at("sym/x"), 1, 0755);
	tap_ok(fd < 0 && (errno == ELOOP || errno == ENOTDIR) &&
		       !exists(at("real/x")),
	       "open_dir_nofollow does not follow a symlink component");
	fd = ddp_jobdir_open_nofollow(at("real/x/y"), 1, 0755);
	tap_ok(fd >= 0 && exists(at("real/x/y")),
	       "open_dir_nofollow creates missing components");
	if (fd >= 0)
		close(fd);
}

/* Makes levels nested directories "d" below top/name; returns the fd of
 * the deepest, or -1. */
static int
make_deep(const char *name, int levels)
{
	int fd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC), next, i;

	if (fd < 0 || mkdirat(fd, name, 0755) < 0)
		goto fail;
	next = openat(fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	close(fd);
	fd = next;
	for (i = 0; fd >= 0 && i < levels; i++) {
		if (mkdirat(fd, "d", 0755) < 0)
			goto fail;
		next = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		close(fd);
		fd = next;
	}
	return fd;
fail:
	if (fd >= 0)
		close(fd);
	return -1;
}

/* A user's tree of 2000 levels (55 MB of them kept scratch forever when
 * removal stopped at 512), with files, a read-only level and a symlink
 * out on the way, goes entirely; nothing outside does. */
static void
test_rmtree_deep(void)
{
	char err[DDP_ERR_LEN];
	int fd, bottom, i;

	mkdir(at("deep-outside"), 0755);
	touch(at("deep-outside/keep"));
	mkdir(at("own"), 0700);
	(void)!chown(at("own"), NOBODY, NOBODY);
	bottom = make_deep("deep", 2000);
	tap_ok(bottom >= 0, "2000-level tree made");
	if (bottom < 0)
		return;
	fd = openat(bottom, "f", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd >= 0)
		close(fd);
	if (symlinkat(at("deep-outside"), bottom, "out") < 0)
		tap_diag("symlink: %s", strerror(errno));
	fchmod(bottom, 0500);
	close(bottom);
	fd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	tap_ok(nc_rmtree_at(fd, "deep", err, sizeof(err)) == 0,
	       "2000-level tree removed");
	tap_diag("%s", err);
	tap_ok(!exists(at("deep")) && exists(at("deep-outside/keep")),
	       "all of it, and not the symlink's target");

	/* The same depth as its owner, in a directory of theirs (how the
	 * sweeper removes), read-only levels included. */
	if (geteuid() != 0) {
		tap_ok(1, "# SKIP removal as the owner needs root");
	} else if (fork() == 0) {
		if (setresgid(NOBODY, NOBODY, NOBODY) < 0 ||
		    setresuid(NOBODY, NOBODY, NOBODY) < 0)
			_exit(4);
		bottom = make_deep("own/deep", 2000);
		if (bottom < 0)
			_exit(3);
		fchmod(bottom, 0);
		close(bottom);
		bottom = open(at("own"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		for (i = 0; bottom >= 0 && i < 1000; i++) {
			int next = openat(bottom, i ? "d" : "deep",
					  O_RDONLY | O_DIRECTORY | O_CLOEXEC);

			if (i == 999)
				fchmod(next, 0500);
			close(bottom);
			bottom = next;
		}
		if (bottom >= 0)
			close(bottom);
		bottom = open(at("own"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		_exit(nc_rmtree_at(bottom, "deep", err, sizeof(err)) == 0 ? 0
									  : 1);
	} else {
		int status = -1;

		wait(&status);
		tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
			       !exists(at("own/deep")),
		       "2000-level tree with 0500 and 0000 levels removed by "
		       "its owner");
	}
	close(fd);
}

/*
 * A process of the job's user that outlives the job (another job of
 * theirs on the node) keeps writing in the job's scratch through a
 * descriptor it holds: with chain 0 a new directory with a file in it
 * and a new file, round after round; with chain 1 a chain of directories,
 * each one level below the last, that it tries to keep ahead of the
 * removal. It never stops on its own; it writes one byte to ready after
 * its first 200 rounds.
 */
static pid_t
start_writer(int dirfd, int chain, int ready)
{
	char name[32];
	unsigned long i;
	pid_t pid = fork();
	int fd;

	if (pid != 0)
		return pid;
	if (setresgid(NOBODY, NOBODY, NOBODY) < 0 ||
	    setresuid(NOBODY, NOBODY, NOBODY) < 0)
		_exit(4);
	for (i = 0;; i++) {
		snprintf(name, sizeof(name), chain ? "d" : "w%lu", i);
		if (mkdirat(dirfd, name, 0700) == 0 || errno == EEXIST) {
			fd = openat(dirfd, name,
				    O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (fd >= 0 && chain) {
				close(dirfd);
				dirfd = fd;
			} else if (fd >= 0) {
				close(openat(fd, "f", O_WRONLY | O_CREAT,
					     0600));
				close(fd);
			}
		}
		snprintf(name, sizeof(name), "f%lu", i);
		close(openat(dirfd, name, O_WRONLY | O_CREAT, 0600));
		if (i == 200 && write(ready, "x", 1) < 0)
			_exit(5);
	}
}

/* Runs the removal of job jobid's scratch in a child, limit_s seconds the
 * removal's own bound (0: nc_remove_scratch_dir, the Epilog's), and waits
 * up to 30 s for it. Returns its exit status (0 removed, 1 an error in
 * err), or -1 when it was still running after 30 s (then killed). */
static int
timed_removal(const struct ddp_conf *c, unsigned long jobid, unsigned limit_s,
	      char *err, size_t errlen)
{
	char name[32];
	int fds[2], status = 0, i;
	ssize_t n;
	pid_t pid;

	if (pipe(fds) < 0 || (pid = fork()) < 0)
		return -2;
	if (pid == 0) {
		int rootfd, rc;

		close(fds[0]);
		snprintf(name, sizeof(name), "%lu", jobid);
		rootfd = open(c->scratch_root, O_RDONLY | O_DIRECTORY);
		rc = limit_s ? nc_rmtree_within(rootfd, name, limit_s, err,
						errlen)
			     : nc_remove_scratch_dir(c, jobid, err, errlen);
		if (rc < 0 && write(fds[1], err, strlen(err)) < 0)
			_exit(3);
		_exit(rc == 0 ? 0 : 1);
	}
	close(fds[1]);
	for (i = 0; i < 3000 && waitpid(pid, &status, WNOHANG) == 0; i++)
		usleep(10000);
	if (i == 3000) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		close(fds[0]);
		return -1;
	}
	n = read(fds[0], err, errlen - 1);
	err[n > 0 ? n : 0] = '\0';
	close(fds[0]);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -3;
}

#define WRITERS 4

static void
test_rmtree_writer(void)
{
	struct ddp_conf c;
	char err[DDP_ERR_LEN], x;
	struct stat st;
	int ready[2], fd, nf, left, rc, i, alive;
	pid_t writer, writers[WRITERS];

	if (geteuid() != 0) {
		tap_ok(1, "# SKIP removal against a writer needs root");
		return;
	}
	ddp_conf_defaults(&c);
	ddp_fmt(c.scratch_root, sizeof(c.scratch_root), "%s", at("wr"));
	if (nc_make_scratch_dir(&c, NOBODY, NOBODY, 60, &nf, &left, err,
				sizeof(err)) < 0 ||
	    nc_make_scratch_dir(&c, NOBODY, NOBODY, 61, &nf, &left, err,
				sizeof(err)) < 0 ||
	    pipe(ready) < 0) {
		tap_ok(0, "writer test: scratch made: %s", err);
		return;
	}

	/* Several, so that together they outpace a removal that does not
	 * stop them. */
	fd = open(at("wr/60"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (i = 0; i < WRITERS; i++)
		writers[i] = start_writer(fd, 0, ready[1]);
	close(fd);
	for (i = 0; i < WRITERS; i++)
		if (read(ready[0], &x, 1) != 1)
			tap_diag("writer did not start");
	rc = timed_removal(&c, 60, 0, err, sizeof(err));
	tap_ok(rc == 0 && !exists(at("wr/60")),
	       "Epilog removal ends while the user's processes keep writing, "
	       "and the directory is gone");
	if (rc != 0)
		tap_diag("rc %d: %s", rc, err);
	for (i = 0, alive = 0; i < WRITERS; i++)
		alive += kill(writers[i], 0) == 0;
	tap_ok(alive == WRITERS, "the writers were still writing");
	for (i = 0; i < WRITERS; i++) {
		kill(writers[i], SIGKILL);
		waitpid(writers[i], NULL, 0);
	}

	/* A chain the writer keeps ahead of the removal: the bound ends it
	 * (or it catches the writer); nothing the writer made escapes it. */
	fd = open(at("wr/61"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	writer = start_writer(fd, 1, ready[1]);
	close(fd);
	if (read(ready[0], &x, 1) != 1)
		tap_diag("writer did not start");
	rc = timed_removal(&c, 61, 2, err, sizeof(err));
	tap_ok(rc == 0 || (rc == 1 && strstr(err, "not removed within 2 s")),
	       "a chain kept ahead of the removal: it ends at its bound");
	tap_diag("rc %d: %s", rc, err);
	kill(writer, SIGKILL);
	waitpid(writer, NULL, 0);
	tap_ok(rc == 0 || (stat(at("wr/61"), &st) == 0 && st.st_uid == 0 &&
			   (st.st_mode & ALLPERMS) == 0700),
	       "what is left is root's, mode 0700");
	rc = timed_removal(&c, 61, 0, err, sizeof(err));
	tap_ok(rc == 0 && !exists(at("wr/61")),
	       "with the writer gone, the rest is removed");
	if (rc != 0)
		tap_diag("rc %d: %s", rc, err);
	close(ready[0]);
	close(ready[1]);
	rmdir(at("wr"));
}

/*
 * What test_default_scratch_root checks, in a child with its own mount
 * namespace and fresh /var/tmp (nobody's, so nobody may write there as
 * users may in a real one) and /var/lib (root's, 0755) tmpfs, so the
 * host's stay untouched. Returns 0, 77 when it cannot set that up, or the
 * number of the step that failed.
 */
static int
default_scratch_child(char *err, size_t errlen)
{
	struct ddp_conf c;
	int status = -1, nf, left;
	pid_t pid;

	if (unshare(CLONE_NEWNS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("ddp-test", "/var/tmp", "tmpfs", 0,
		  "uid=65534,gid=65534,mode=0755,size=1m") < 0 ||
	    mount("ddp-test", "/var/lib", "tmpfs", 0, "mode=0755,size=1m") < 0)
		return 77;
	ddp_conf_defaults(&c);
	/* A user gets there before any job: the old default is theirs to
	 * make, the new one is not. */
	pid = fork();
	if (pid == 0) {
		if (setresgid(NOBODY, NOBODY, NOBODY) < 0 ||
		    setresuid(NOBODY, NOBODY, NOBODY) < 0 ||
		    mkdir("/var/tmp/ddp", 0755) < 0)
			_exit(1);
		_exit(ddp_jobdir_open_nofollow(c.scratch_root, 1, 0755) < 0 &&
				      errno == EACCES
			      ? 0
			      : 2);
	}
	waitpid(pid, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return 10 + (WIFEXITED(status) ? WEXITSTATUS(status) : 9);
	/* The Prolog of a job of uid 1: scratch made in the default root,
	 * which it creates root's. */
	if (nc_make_scratch_dir(&c, 1, 1, 70, &nf, &left, err, errlen) < 0)
		return 20;
	/* The job's step, as uid 1: the plugin's check passes, so the step
	 * runs with DDP_SCRATCH_DIR. */
	pid = fork();
	if (pid == 0) {
		if (setresgid(1, 1, 1) < 0 || setresuid(1, 1, 1) < 0)
			_exit(1);
		_exit(ddp_jobdir_check(c.scratch_root, "70", 1, err, errlen) ==
				      1
			      ? 0
			      : 2);
	}
	waitpid(pid, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return 30 + (WIFEXITED(status) ? WEXITSTATUS(status) : 9);
	return 0;
}

/* The default scratch root cannot be made first by a user, and a
 * directory a user made at the old default (/var/tmp/ddp) no longer
 * matters: the Prolog makes scratch in the new default and another
 * user's step gets it. */
static void
test_default_scratch_root(void)
{
	char err[DDP_ERR_LEN] = "";
	int status = -1;
	pid_t pid;

	if (geteuid() != 0) {
		tap_ok(1, "# SKIP default scratch root test needs root");
		return;
	}
	pid = fork();
	if (pid == 0)
		_exit(default_scratch_child(err, sizeof(err)));
	waitpid(pid, &status, 0);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
		tap_ok(1, "# SKIP private /var/tmp and /var/lib: %s",
		       strerror(errno));
		return;
	}
	if (!tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		    "a user makes the old default /var/tmp/ddp but cannot "
		    "make the default scratch root; the Prolog makes scratch "
		    "there and the job's step, as its user, passes the check"))
		tap_diag("failed at step %d",
			 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

/* Root only, in a private mount namespace: a file system mounted deep in
 * the tree stops the removal and keeps its files. */
static void
test_rmtree_mount(void)
{
	char err[DDP_ERR_LEN];
	int fd, bottom, i;

	if (geteuid() != 0 || unshare(CLONE_NEWNS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		tap_ok(1, "# SKIP mount test needs root");
		return;
	}
	bottom = make_deep("mnt", 1500);
	if (bottom < 0 || mkdirat(bottom, "m", 0755) < 0) {
		tap_ok(0, "1500-level tree with a mount point made");
		return;
	}
	fd = openat(bottom, "m", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	close(bottom);
	/* The path is too long for mount(2): go through /proc/self/fd. */
	{
		char path[64];

		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		if (mount("ddp-test", path, "tmpfs", 0, "size=1m") < 0) {
			tap_ok(1, "# SKIP tmpfs mount: %s", strerror(errno));
			close(fd);
			return;
		}
	}
	close(fd);
	fd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	tap_ok(nc_rmtree_at(fd, "mnt", err, sizeof(err)) < 0 &&
		       strstr(err, "another file system is mounted"),
	       "a mount point deep in the tree stops the removal");
	tap_diag("%s", err);
	tap_ok(exists(at("mnt")), "and the tree above it stays");
	/* Unmount it (the walk down again ends on the tmpfs root). */
	bottom = open(at("mnt"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (i = 0; bottom >= 0 && i <= 1500; i++) {
		int next = openat(bottom, i < 1500 ? "d" : "m",
				  O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		close(bottom);
		bottom = next;
	}
	if (bottom >= 0) {
		char path[64];

		snprintf(path, sizeof(path), "/proc/self/fd/%d", bottom);
		if (umount2(path, MNT_DETACH) < 0)
			tap_diag("umount: %s", strerror(errno));
		close(bottom);
	}
	tap_ok(nc_rmtree_at(fd, "mnt", err, sizeof(err)) == 0 &&
		       !exists(at("mnt")),
	       "unmounted, the tree goes");
	tap_diag("%s", err);
	close(fd);
}

static void
test_shared_root(void)
{
	struct ddp_conf c;
	char err[DDP_ERR_LEN];
	struct ddp_buf mi = {0};
	char line[64];

	ddp_conf_defaults(&c);
	tap_ok(nc_check_shared_root(&c, err, sizeof(err)) == 0,
	       "no shared_root: nothing to check");
	ddp_fmt(c.shared_root, sizeof(c.shared_root), "%s", at("nothere"));
	tap_ok(nc_check_shared_root(&c, err, sizeof(err)) < 0 &&
		       strstr(err, "missing"),
	       "missing shared root");
	tap_diag("%s", err);
	ddp_fmt(c.shared_root, sizeof(c.shared_root), "%s", top);
	ddp_conf_set(&c, "shared_fstypes", "nfs", err, sizeof(err));
	tap_ok(nc_check_shared_root(&c, err, sizeof(err)) < 0 &&
		       (strstr(err, "not mounted") || strstr(err, ", not nfs")),
	       "shared root of another type refused");
	tap_diag("%s", err);
	/* Accept whatever /tmp really is, read the way the helper reads. */
	{
		FILE *f = popen("findmnt -n -o FSTYPE -T /tmp", "r");

		if (f && fgets(line, sizeof(line), f)) {
			line[strcspn(line, "\n")] = '\0';
			ddp_conf_set(&c, "shared_fstypes", line, err,
				     sizeof(err));
			tap_ok(nc_check_shared_root(&c, err, sizeof(err)) == 0,
			       "shared root of an accepted type (%s)", line);
			tap_diag("%s", err);
		} else {
			tap_ok(1, "# SKIP findmnt not available");
		}
		if (f)
			pclose(f);
	}
	ddp_buf_free(&mi);
}

static void
test_dirs(void)
{
	struct ddp_conf c;
	char err[DDP_ERR_LEN], *path;
	struct stat st;
	int nf = 0, left = 0;

	if (geteuid() != 0) {
		tap_ok(1, "# SKIP directory ownership tests need root");
		return;
	}
	ddp_conf_defaults(&c);
	mkdir(at("shared"), 0755);
	ddp_fmt(c.shared_root, sizeof(c.shared_root), "%s", at("shared"));
	ddp_fmt(c.scratch_root, sizeof(c.scratch_root), "%s",
		at("scratch/root"));
	tap_ok(nc_make_shared_dir(&c, "nobody", NOBODY, NOBODY, 42, err,
				  sizeof(err)) == 0,
	       "shared dir made");
	tap_diag("%s", err);
	path = (char *)at("shared/nobody/42");
	tap_ok(stat(path, &st) == 0 && st.st_uid == NOBODY &&
		       st.st_gid == NOBODY && (st.st_mode & ALLPERMS) == 0700,
	       "shared dir owned by the user, mode 0700");
	tap_ok(stat(at("shared/nobody"), &st) == 0 && st.st_uid == NOBODY &&
		       (st.st_mode & ALLPERMS) == 0700,
	       "user dir owned by the user, mode 0700");
	tap_ok(nc_make_shared_dir(&c, "nobody", NOBODY, NOBODY, 42, err,
				  sizeof(err)) == 0,
	       "shared dir creation is idempotent");
	/* A user plants a symlink where the next job's directory goes. */
	mkdir(at("victim"), 0755);
	link_to(at("victim"), at("shared/nobody/43"));
	tap_ok(nc_make_shared_dir(&c, "nobody", NOBODY, NOBODY, 43, err,
				  sizeof(err)) < 0 &&
		       stat(at("victim"), &st) == 0 && st.st_uid == 0 &&
		       (st.st_mode & ALLPERMS) == 0755,
	       "planted symlink refused, its target untouched");
	tap_diag("%s", err);
	mkdir(at("shared/daemon"), 0755);
	tap_ok(nc_make_shared_dir(&c, "daemon", 1, 1, 44, err, sizeof(err)) <
			       0 &&
		       strstr(err, "owned by uid 0"),
	       "user dir owned by someone else refused");

	tap_ok(nc_make_scratch_dir(&c, NOBODY, NOBODY, 42, &nf, &left, err,
				   sizeof(err)) == 0 &&
		       !left,
	       "scratch made");
	tap_ok(stat(at("scratch/root/42"), &st) == 0 && st.st_uid == NOBODY &&
		       (st.st_mode & ALLPERMS) == 0700,
	       "scratch owned by the user, mode 0700");
	tap_ok(stat(at("scratch/root"), &st) == 0 && st.st_uid == 0 &&
		       (st.st_mode & ALLPERMS) == 0755,
	       "scratch root created root-owned 0755");
	touch(at("scratch/root/42/data"));
	link_to("/etc", at("scratch/root/42/etc"));
	tap_ok(nc_remove_scratch_dir(&c, 42, err, sizeof(err)) == 0 &&
		       !exists(at("scratch/root/42")) && exists("/etc/passwd"),
	       "scratch removed without following symlinks");
	tap_ok(nc_remove_scratch_dir(&c, 42, err, sizeof(err)) == 0,
	       "scratch removal idempotent");
	/* An earlier job's directory under the same id, with its data and
	 * a symlink out, is never handed to the next owner. */
	mkdir(at("scratch/root/44"), 0700);
	touch(at("scratch/root/44/old-data"));
	link_to("/etc", at("scratch/root/44/etc"));
	(void)!chown(at("scratch/root/44"), NOBODY, NOBODY);
	tap_ok(nc_make_scratch_dir(&c, 1, 1, 44, &nf, &left, err,
				   sizeof(err)) == 0 &&
		       left == 1,
	       "leftover job directory: reported");
	tap_diag("%s", err);
	tap_ok(stat(at("scratch/root/44"), &st) == 0 && st.st_uid == 1 &&
		       (st.st_mode & ALLPERMS) == 0700 &&
		       !exists(at("scratch/root/44/old-data")) &&
		       !exists(at("scratch/root/44/etc")) &&
		       exists("/etc/passwd"),
	       "leftover removed as root, a new empty directory made");
	nc_remove_scratch_dir(&c, 44, err, sizeof(err));
	chmod(at("scratch/root"), 0775);
	tap_ok(nc_make_scratch_dir(&c, NOBODY, NOBODY, 45, &nf, &left, err,
				   sizeof(err)) < 0 &&
		       nf == 1 && strstr(err, "has mode 0775") &&
		       !exists(at("scratch/root/45")),
	       "scratch root writable by others: a node fault");
	tap_diag("%s", err);
	chmod(at("scratch/root"), 0755);
	/* A user made the root first (under /var/tmp, say). */
	(void)!chown(at("scratch/root"), NOBODY, NOBODY);
	tap_ok(nc_make_scratch_dir(&c, NOBODY, NOBODY, 43, &nf, &left, err,
				   sizeof(err)) < 0 &&
		       nf == 0 && strstr(err, "owned by uid 65534, not root") &&
		       strstr(err, "ddp-nodectl install") &&
		       !exists(at("scratch/root/43")),
	       "scratch root a user made: refused, not a node fault");
	tap_diag("%s", err);
}

/* The attack: another user (uid 1) owns <shared_root>/<victim>
 * or a job directory in it. Nothing is made in it, nothing chowned. */
static void
test_shared_refusals(void)
{
	struct ddp_conf c;
	char err[DDP_ERR_LEN];
	struct stat st;

	if (geteuid() != 0) {
		tap_ok(1, "# SKIP directory ownership tests need root");
		return;
	}
	ddp_conf_defaults(&c);
	mkdir(at("sq"), 01777);
	chmod(at("sq"), 01777);
	ddp_fmt(c.shared_root, sizeof(c.shared_root), "%s", at("sq"));

	mkdir(at("sq/nobody"), 0755);
	(void)!chown(at("sq/nobody"), 1, 1);
	mkdir(at("sq/nobody/50"), 0755);
	(void)!chown(at("sq/nobody/50"), 1, 1);
	tap_ok(nc_make_shared_dir(&c, "nobody", NOBODY, NOBODY, 50, err,
				  sizeof(err)) < 0 &&
		       strstr(err, "nobody is owned by uid 1, not by nobody") &&
		       strstr(err, "refused"),
	       "user directory another user made: refused, named");
	tap_diag("%s", err);
	tap_ok(stat(at("sq/nobody/50"), &st) == 0 && st.st_uid == 1 &&
		       stat(at("sq/nobody"), &st) == 0 && st.st_uid == 1,
	       "and nothing was chowned to the job's user");
	tap_ok(nc_make_shared_dir(&c, "nobody", NOBODY, NOBODY, 51, err,
				  sizeof(err)) < 0 &&
		       !exists(at("sq/nobody/51")),
	       "nothing is made in it for a later job");

	/* The user's own directory, open to others: a job directory in it
	 * could be swapped. */
	mkdir(at("sq/daemon"), 0700);
	chmod(at("sq/daemon"), 0770);
	(void)!chown(at("sq/daemon"), 1, 1);
	tap_ok(nc_make_shared_dir(&c, "daemon", 1, 1, 52, err, sizeof(err)) <
			       0 &&
		       strstr(err, "has mode 0770, not 0700") &&
		       strstr(err, "chmod 0700") && !exists(at("sq/daemon/52")),
	       "user directory not 0700: refused, nothing made in it");
	tap_diag("%s", err);

	/* A private user directory holding a job directory someone else
	 * owns (root planted it, or a job id came round again). */
	chmod(at("sq/daemon"), 0700);
	mkdir(at("sq/daemon/53"), 0700);
	tap_ok(nc_make_shared_dir(&c, "daemon", 1, 1, 53, err, sizeof(err)) <
			       0 &&
		       strstr(err, "daemon/53 is owned by uid 0"),
	       "job directory owned by someone else: refused");
	tap_diag("%s", err);
	mkdir(at("sq/daemon/54"), 0755);
	(void)!chown(at("sq/daemon/54"), 1, 1);
	tap_ok(nc_make_shared_dir(&c, "daemon", 1, 1, 54, err, sizeof(err)) ==
			       0 &&
		       stat(at("sq/daemon/54"), &st) == 0 &&
		       (st.st_mode & ALLPERMS) == 0700,
	       "the user's own job directory is closed up to 0700");
	tap_diag("%s", err);
}

static void
test_sweep(void)
{
	struct ddp_conf c;
	struct ddp_buf rep = {0};
	char err[DDP_ERR_LEN];
	struct timespec old[2] = {{0, 0}, {0, 0}};
	unsigned long live[] = {101};
	time_t now = time(NULL);
	int rc;

	ddp_conf_defaults(&c);
	mkdir(at("sw"), 0755);
	mkdir(at("sw/u1"), 0700);
	mkdir(at("sw/u1/100"), 0700);
	mkdir(at("sw/u1/100/sub"), 0700);
	mkdir(at("sw/u1/101"), 0700);
	mkdir(at("sw/u1/102"), 0700);
	mkdir(at("sw/u1/notajob"), 0700);
	old[0].tv_sec = old[1].tv_sec = now - 3 * 86400;
	utimensat(AT_FDCWD, at("sw/u1/100"), old, 0);
	utimensat(AT_FDCWD, at("sw/u1/101"), old, 0);
	utimensat(AT_FDCWD, at("sw/u1/notajob"), old, 0);
	ddp_fmt(c.shared_root, sizeof(c.shared_root), "%s", at("sw"));
	c.retention_days = 1;
	rc = nc_sweep_shared(&c, live, 1, now, 1, &rep, err, sizeof(err));
	tap_ok(rc == 0 && rep.s && strstr(rep.s, "would remove") &&
		       strstr(rep.s, "u1/100\n") && exists(at("sw/u1/100")),
	       "dry run reports, removes nothing");
	ddp_buf_free(&rep);
	rc = nc_sweep_shared(&c, live, 1, now, 0, &rep, err, sizeof(err));
	tap_ok(rc == 0 && !exists(at("sw/u1/100")), "old finished job swept");
	tap_ok(exists(at("sw/u1/101")) && exists(at("sw/u1/102")) &&
		       exists(at("sw/u1/notajob")),
	       "live, recent and foreign directories kept");
	ddp_buf_free(&rep);
}

int
main(void)
{
	char err[DDP_ERR_LEN];
	int fd;

	if (!mkdtemp(top)) {
		perror("mkdtemp");
		return 2;
	}
	chmod(top, 0755);
	test_mount_lookup();
	test_processes();
	test_rmtree();
	test_rmtree_deep();
	test_rmtree_writer();
	test_shared_root();
	test_dirs();
	test_default_scratch_root();
	test_shared_refusals();
	test_sweep();
	test_rmtree_mount();
	fd = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || nc_rmtree_at(fd, top + 5, err, sizeof(err)) < 0)
		tap_diag("cleanup of %s failed: %s", top, err);
	if (fd >= 0)
		close(fd);
	return tap_done();
}
