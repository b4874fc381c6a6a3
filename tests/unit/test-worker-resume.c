/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Resuming from a checkpoint: ddp_restart_count() from the environment,
 * ddp_write_atomic() and ddp_read_file(), and a writer killed with
 * SIGKILL at random points, which never leaves a torn file under the
 * final name.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ddp.h"
#include "tap.h"

static char dir[64];

static void
test_restart_count(void)
{
	static const char *const bad[] = {"",	 "x",  "-1",
					  "1.5", " 2", "99999999999"};
	size_t i;
	int n;

	unsetenv("DDP_RESTART_COUNT");
	unsetenv("SLURM_RESTART_COUNT");
	tap_ok(ddp_restart_count() == 0, "no restart variable: count 0");
	setenv("SLURM_RESTART_COUNT", "3", 1);
	tap_ok(ddp_restart_count() == 3,
	       "SLURM_RESTART_COUNT=3 (a requeued job): count 3");
	setenv("DDP_RESTART_COUNT", "1", 1);
	tap_ok(ddp_restart_count() == 1,
	       "DDP_RESTART_COUNT=1 wins over SLURM_RESTART_COUNT");
	setenv("DDP_RESTART_COUNT", "0", 1);
	tap_ok(ddp_restart_count() == 0, "DDP_RESTART_COUNT=0: count 0");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv("DDP_RESTART_COUNT", bad[i], 1);
		n = ddp_restart_count();
		if (!tap_ok(n == -1 &&
				    strstr(ddp_last_error(),
					   "DDP_RESTART_COUNT") &&
				    strstr(ddp_last_error(), bad[i]),
			    "DDP_RESTART_COUNT='%s': -1, the error names the "
			    "variable and its value",
			    bad[i]))
			tap_diag("got %d: %s", n, ddp_last_error());
	}
	unsetenv("DDP_RESTART_COUNT");
	setenv("SLURM_RESTART_COUNT", "two", 1);
	n = ddp_restart_count();
	tap_ok(n == -1 && strstr(ddp_last_error(), "SLURM_RESTART_COUNT='two'"),
	       "a malformed SLURM_RESTART_COUNT: -1 naming it");
	unsetenv("SLURM_RESTART_COUNT");
}

/* Names in dir other than "." and "..", counted; *tmp those that are a
 * writer's temporary files. */
static int
count_files(int *tmp)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	*tmp = 0;
	while (d && (e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		n++;
		*tmp += strstr(e->d_name, ".tmp-") != NULL;
	}
	if (d)
		closedir(d);
	return n;
}

static void
unlink_in_dir(const char *name)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY);

	if (dfd >= 0) {
		(void)unlinkat(dfd, name, 0);
		close(dfd);
	}
}

static void
test_write_read(void)
{
	static const char *const bad[] = {"", "a/b", ".", "..", "/x", "x/"};
	char buf[64], path[128], link_target[128], long_name[200];
	enum ddp_status st;
	struct stat sb;
	size_t len = 99, i;
	int tmp, fd;

	st = ddp_write_atomic(dir, "state", "first", 5);
	tap_ok(st == DDP_OK, "ddp_write_atomic writes a new file");
	st = ddp_read_file(dir, "state", buf, sizeof(buf), &len);
	tap_ok(st == DDP_OK && len == 5 && memcmp(buf, "first", 5) == 0,
	       "ddp_read_file reads it back whole");
	snprintf(path, sizeof(path), "%s/state", dir);
	tap_ok(stat(path, &sb) == 0 && (sb.st_mode & 07777) == 0600,
	       "the file is mode 0600");
	st = ddp_write_atomic(dir, "state", "second!", 7);
	st |= ddp_read_file(dir, "state", buf, sizeof(buf), &len);
	tap_ok(st == DDP_OK && len == 7 && memcmp(buf, "second!", 7) == 0,
	       "a second write replaces the content");
	tap_ok(count_files(&tmp) == 1 && tmp == 0,
	       "no temporary file is left beside it");
	st = ddp_write_atomic(dir, "empty", NULL, 0);
	st |= ddp_read_file(dir, "empty", NULL, 0, &len);
	tap_ok(st == DDP_OK && len == 0, "an empty file, NULL buffers");

	len = 0;
	st = ddp_read_file(dir, "state", buf, 3, &len);
	if (!tap_ok(st == DDP_ERR_INVALID && len == 7 &&
			    strstr(ddp_last_error(), "7 bytes"),
		    "a buffer too small: DDP_ERR_INVALID, *len the size"))
		tap_diag("%d %zu: %s", st, len, ddp_last_error());
	errno = 0;
	st = ddp_read_file(dir, "missing", buf, sizeof(buf), &len);
	if (!tap_ok(st == DDP_ERR_SYSTEM && errno == ENOENT &&
			    strstr(ddp_last_error(), "missing"),
		    "no such file: DDP_ERR_SYSTEM, errno ENOENT, named"))
		tap_diag("%d: %s", st, ddp_last_error());

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		st = ddp_write_atomic(dir, bad[i], "x", 1);
		tap_ok(st == DDP_ERR_INVALID &&
			       ddp_read_file(dir, bad[i], buf, sizeof(buf),
					     &len) == DDP_ERR_INVALID,
		       "the name '%s' is refused", bad[i]);
	}
	tap_ok(ddp_write_atomic(dir, NULL, "x", 1) == DDP_ERR_INVALID,
	       "a NULL name is refused");
	memset(long_name, 'n', 192);
	long_name[192] = '\0';
	tap_ok(ddp_write_atomic(dir, long_name, "x", 1) == DDP_ERR_INVALID,
	       "a name of 192 bytes is refused");
	long_name[191] = '\0';
	st = ddp_write_atomic(dir, long_name, "x", 1);
	if (!tap_ok(st == DDP_OK && ddp_read_file(dir, long_name, buf,
						  sizeof(buf), &len) == DDP_OK,
		    "a name of 191 bytes is written and read"))
		tap_diag("%s", ddp_last_error());
	unlink_in_dir(long_name);
	tap_ok(ddp_write_atomic("/nonexistent-dir-ddp", "f", "x", 1) ==
			       DDP_ERR_SYSTEM &&
		       strstr(ddp_last_error(), "/nonexistent-dir-ddp"),
	       "a missing directory: DDP_ERR_SYSTEM naming it");

	unsetenv("DDP_SHARED_DIR");
	st = ddp_write_atomic(NULL, "f", "x", 1);
	tap_ok(st == DDP_ERR_ENV && strstr(ddp_last_error(), "DDP_SHARED_DIR"),
	       "no directory and no DDP_SHARED_DIR: DDP_ERR_ENV naming it");
	setenv("DDP_SHARED_DIR", dir, 1);
	st = ddp_write_atomic(NULL, "shared", "abc", 3);
	st |= ddp_read_file(dir, "shared", buf, sizeof(buf), &len);
	tap_ok(st == DDP_OK && len == 3,
	       "no directory: the file goes to $DDP_SHARED_DIR");
	unsetenv("DDP_SHARED_DIR");

	/* A symbolic link under the name is replaced, its target kept. */
	snprintf(link_target, sizeof(link_target), "%s/target", dir);
	fd = open(link_target, O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd >= 0)
		close(fd);
	snprintf(path, sizeof(path), "%s/link", dir);
	if (symlink(link_target, path) < 0)
		tap_diag("symlink: %s", strerror(errno));
	tap_ok(ddp_read_file(dir, "link", buf, sizeof(buf), &len) ==
		       DDP_ERR_SYSTEM,
	       "ddp_read_file does not follow a symbolic link");
	st = ddp_write_atomic(dir, "link", "new", 3);
	tap_ok(st == DDP_OK && lstat(path, &sb) == 0 && S_ISREG(sb.st_mode) &&
		       stat(link_target, &sb) == 0 && sb.st_size == 0,
	       "ddp_write_atomic replaces a symbolic link, its target "
	       "untouched");
}

/*
 * Generation g's content: its length varies with g, every byte is
 * derived from g and its offset, and it starts with g and the length.
 */
static size_t
make_gen(uint8_t *buf, uint32_t g)
{
	size_t len = 200000 + (size_t)(g % 13) * 7919, i;
	uint32_t l32 = (uint32_t)len;

	memcpy(buf, &g, 4);
	memcpy(buf + 4, &l32, 4);
	for (i = 8; i < len; i++)
		buf[i] = (uint8_t)(g * 31 + i);
	return len;
}

/* The generation the file holds whole, or -1 when it is torn. */
static long
check_gen(const uint8_t *buf, size_t len)
{
	static uint8_t want[400000];
	uint32_t g;

	if (len < 8)
		return -1;
	memcpy(&g, buf, 4);
	if (make_gen(want, g) != len || memcmp(want, buf, len) != 0)
		return -1;
	return g;
}

/*
 * A child rewrites one file with ever newer generations until it is
 * killed at a random moment; the file under the final name must be a
 * whole generation, never older than the one seen before.
 */
static void
test_kill_writer(void)
{
	static uint8_t buf[400000];
	int rounds = 40, r, torn = 0, backwards = 0, tmp = 0, status;
	long seen = 0, g;
	size_t len;
	pid_t pid;
	struct timespec delay;
	unsigned seed = (unsigned)time(NULL);

	tap_diag("kill seed %u", seed);
	srand(seed);
	if (ddp_write_atomic(dir, "ckpt", buf, make_gen(buf, 0)))
		tap_diag("first write: %s", ddp_last_error());
	for (r = 0; r < rounds; r++) {
		fflush(stdout);
		pid = fork();
		if (pid == 0) {
			uint32_t next = (uint32_t)seen + 1;

			for (;; next++)
				if (ddp_write_atomic(dir, "ckpt", buf,
						     make_gen(buf, next)))
					_exit(1);
		}
		delay.tv_sec = 0;
		delay.tv_nsec = (long)(rand() % 20000) * 1000;
		nanosleep(&delay, NULL);
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		if (WIFEXITED(status))
			tap_diag("the writer failed before the kill");
		if (ddp_read_file(dir, "ckpt", buf, sizeof(buf), &len)) {
			torn++;
			tap_diag("read: %s", ddp_last_error());
			continue;
		}
		g = check_gen(buf, len);
		torn += g < 0;
		backwards += g >= 0 && g < seen;
		if (g > seen)
			seen = g;
	}
	tap_ok(!torn && !backwards,
	       "a writer killed %d times at random points: the file is a "
	       "whole generation each time, never an older one (%d torn, "
	       "%d older; reached generation %ld)",
	       rounds, torn, backwards, seen);
	tap_ok(seen > 0, "the writer got past its first generation");
	count_files(&tmp);
	tap_diag("%d temporary files left by killed writers", tmp);
}

/* Removes the test's directory and the files in it. */
static void
remove_dir(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int dfd = d ? dirfd(d) : -1;

	while (d && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			(void)unlinkat(dfd, e->d_name, 0);
	if (d)
		closedir(d);
	if (rmdir(dir) < 0)
		tap_diag("could not remove %s: %s", dir, strerror(errno));
}

int
main(void)
{
	const char *base = getenv("TMPDIR");

	if (snprintf(dir, sizeof(dir), "%s/ddp-resume-XXXXXX",
		     base && *base && strlen(base) < 40 ? base : "/tmp") >=
		    (int)sizeof(dir) ||
	    !mkdtemp(dir)) {
		printf("Bail out! mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	test_restart_count();
	test_write_read();
	test_kill_writer();
	remove_dir();
	return tap_done();
}
