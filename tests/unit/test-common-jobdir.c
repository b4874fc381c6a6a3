/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the per-job directory contract (jobdir.h): names, the
 * user-name rule, and the plugin's check on real directories (owners
 * changed with chown when running as root, and checked as the job's user
 * in a child).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jobdir.h"
#include "tap.h"

static char tmpdir[] = "/tmp/test-jobdir.XXXXXX";

/* Makes dir (mode, owner) or dies: the test needs exactly that tree. */
static void
mkdir_as(const char *path, mode_t mode, uid_t uid)
{
	if ((mkdir(path, mode) < 0 && errno != EEXIST) ||
	    chmod(path, mode) < 0 || chown(path, uid, (gid_t)-1) < 0) {
		perror(path);
		exit(2);
	}
}

/* ddp_jobdir_check(root, rel, uid) returns want and, on a refusal,
 * err names every string in need (NULL-terminated). */
static void
check_dir(const char *name, const char *root, const char *rel, uid_t uid,
	  int want, const char *const *need)
{
	char err[DDP_ERR_LEN];
	int rc, ok;
	size_t i;

	rc = ddp_jobdir_check(root, rel, uid, err, sizeof(err));
	ok = rc == want;
	for (i = 0; ok && need && need[i]; i++)
		ok = strstr(err, need[i]) != NULL;
	if (!tap_ok(ok, "job dir: %s", name))
		tap_diag("rc %d (want %d) err '%s'", rc, want, err);
	else if (rc < 0)
		tap_diag("%s", err);
}

/* As check_dir, but checked by a child running as uid, as the plugin runs
 * in slurmstepd with the job user's privileges. */
static void
check_dir_as(const char *name, const char *root, const char *rel, uid_t uid,
	     int want, const char *const *need)
{
	char err[DDP_ERR_LEN] = "";
	int fds[2], status = 0, rc = -9, ok;
	ssize_t n, len = 0;
	size_t i;
	pid_t pid;

	if (pipe(fds) < 0 || (pid = fork()) < 0) {
		tap_ok(0, "job dir: %s: pipe/fork", name);
		return;
	}
	if (pid == 0) {
		close(fds[0]);
		if (setresgid(uid, uid, uid) < 0 ||
		    setresuid(uid, uid, uid) < 0)
			_exit(99);
		rc = ddp_jobdir_check(root, rel, uid, err, sizeof(err));
		if (write(fds[1], err, strlen(err)) < 0)
			_exit(98);
		_exit(rc + 1);
	}
	close(fds[1]);
	while ((n = read(fds[0], err + len, sizeof(err) - 1 - (size_t)len)) > 0)
		len += n;
	err[len] = '\0';
	close(fds[0]);
	waitpid(pid, &status, 0);
	if (WIFEXITED(status) && WEXITSTATUS(status) <= 2)
		rc = WEXITSTATUS(status) - 1;
	ok = rc == want;
	for (i = 0; ok && need && need[i]; i++)
		ok = strstr(err, need[i]) != NULL;
	if (!tap_ok(ok, "job dir: %s", name))
		tap_diag("rc %d (want %d) status %d err '%s'", rc, want, status,
			 err);
	else if (rc < 0)
		tap_diag("%s", err);
}

static void
test_job_dirs(void)
{
	char root[600], user[700], job[800], other[700], path[900];
	const uid_t me = geteuid(), them = 65534;
	const int as_root = me == 0;

	snprintf(root, sizeof(root), "%s/jobs", tmpdir);
	snprintf(user, sizeof(user), "%s/alice", root);
	snprintf(job, sizeof(job), "%s/42", user);
	snprintf(other, sizeof(other), "%s/elsewhere", tmpdir);

	check_dir("missing root: nothing to export", root, "alice/42", me, 0,
		  NULL);
	mkdir_as(root, 0755, me);
	check_dir("missing user level: nothing to export", root, "alice/42", me,
		  0, NULL);
	mkdir_as(user, 0700, me);
	check_dir("missing job level: nothing to export", root, "alice/42", me,
		  0, NULL);
	mkdir_as(job, 0700, me);
	check_dir("both levels the user's, 0700: exported", root, "alice/42",
		  me, 1, NULL);
	check_dir("one level (scratch) the user's, 0700: exported", user, "42",
		  me, 1, NULL);

	chmod(job, 0750);
	check_dir("job level 0750 refused, naming path and mode", root,
		  "alice/42", me, -1,
		  (const char *const[]){job, "mode 0750", "chmod 0700", NULL});
	chmod(job, 02700);
	check_dir("setgid inherited from the parent grants nothing", root,
		  "alice/42", me, 1, NULL);
	chmod(job, 0700);
	chmod(user, 0711);
	check_dir("user level 0711 refused", root, "alice/42", me, -1,
		  (const char *const[]){user, "mode 0711", NULL});
	chmod(user, 0700);

	chmod(root, 0775);
	check_dir("root writable by group without sticky refused", root,
		  "alice/42", me, -1,
		  (const char *const[]){root, "mode 0775", "chmod +t", NULL});
	chmod(root, 0757);
	check_dir("root writable by others without sticky refused", root,
		  "alice/42", me, -1,
		  (const char *const[]){root, "mode 0757", "chmod +t", NULL});
	chmod(root, 01777);
	check_dir("root 1777 (sticky) accepted", root, "alice/42", me, 1, NULL);
	chmod(root, 0755);

	/* A symlink at each level, to directories that would pass. */
	mkdir_as(other, 0700, me);
	snprintf(path, sizeof(path), "%s/43", other);
	mkdir_as(path, 0700, me);
	snprintf(path, sizeof(path), "%s/bob", root);
	if (symlink(other, path) < 0)
		perror(path);
	check_dir("symlink at the user level refused", root, "bob/43", me, -1,
		  (const char *const[]){path, "symbolic link", NULL});
	snprintf(path, sizeof(path), "%s/44", user);
	if (symlink(other, path) < 0)
		perror(path);
	check_dir("symlink at the job level refused", root, "alice/44", me, -1,
		  (const char *const[]){path, "symbolic link", NULL});
	snprintf(path, sizeof(path), "%s/45", user);
	fclose(fopen(path, "w"));
	check_dir("a file at the job level refused", root, "alice/45", me, -1,
		  (const char *const[]){path, "not a directory", NULL});
	tap_ok(ddp_jobdir_check(root, "alice/../alice/42", me, path,
				sizeof(path)) < 0 &&
		       ddp_jobdir_check(root, "/alice/42", me, path,
					sizeof(path)) < 0,
	       "job dir: '..' and absolute names refused");

	if (!as_root) {
		tap_ok(1, "# skip owner checks need root (chown)");
		return;
	}
	/* The squat of issue F2: another user pre-creates the directories
	 * of a future job id, 0700 so that only the mode looks right. */
	snprintf(path, sizeof(path), "%s/46", user);
	mkdir_as(path, 0700, them);
	check_dir("job level owned by another uid refused", root, "alice/46",
		  me, -1,
		  (const char *const[]){path, "owner uid 65534", "remove it",
					NULL});
	snprintf(path, sizeof(path), "%s/mallory", root);
	mkdir_as(path, 0700, them);
	snprintf(path, sizeof(path), "%s/mallory/47", root);
	mkdir_as(path, 0700, me);
	snprintf(path, sizeof(path), "%s/mallory", root);
	check_dir("user level owned by another uid refused", root, "mallory/47",
		  me, -1, (const char *const[]){path, "owner uid 65534", NULL});
	/* As the job's user (the plugin's case): their own tree passes, and
	 * another user's 0700 directory, which they cannot even open, is
	 * refused with its owner named. */
	chmod(tmpdir, 0711);
	snprintf(path, sizeof(path), "%s/carol", root);
	mkdir_as(path, 0700, 1000);
	snprintf(path, sizeof(path), "%s/carol/48", root);
	mkdir_as(path, 0700, 1000);
	check_dir_as("the user's own tree, checked as uid 1000", root,
		     "carol/48", 1000, 1, NULL);
	snprintf(path, sizeof(path), "%s/mallory", root);
	check_dir_as("another uid's user level, checked as uid 1000", root,
		     "mallory/47", 1000, -1,
		     (const char *const[]){path, "owner uid 65534", NULL});
	chmod(tmpdir, 0700);
	mkdir_as(root, 0755, them);
	check_dir("root owned by a third uid refused", root, "alice/42", me, -1,
		  (const char *const[]){root, "owner uid 65534", NULL});
	mkdir_as(root, 0755, me);
}

/* Removes what test_job_dirs made (it knows every name). */
static void
clean_job_dirs(void)
{
	static const char *const names[] = {
		"jobs/alice/42", "jobs/alice/44", "jobs/alice/45",
		"jobs/alice/46", "jobs/bob",	  "jobs/mallory/47",
		"jobs/carol/48", "jobs/carol",	  "jobs/mallory",
		"jobs/alice",	 "jobs",	  "elsewhere/43",
		"elsewhere",
	};
	char path[600];
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", tmpdir, names[i]);
		if (unlink(path) < 0)
			rmdir(path);
	}
}

static void
test_paths(void)
{
	struct ddp_conf c;
	char buf[PATH_MAX], err[DDP_ERR_LEN], long_user[66];

	memset(long_user, 'u', sizeof(long_user) - 1);
	long_user[sizeof(long_user) - 1] = '\0';
	ddp_conf_defaults(&c);
	tap_ok(ddp_jobdir_valid_user(long_user + 1), "64-character user name");
	tap_ok(ddp_jobdir_shared(&c, "alice", 42, buf, sizeof(buf)) < 0,
	       "no shared dir without shared_root");
	ddp_conf_set(&c, "shared_root", "/shared/ddp", err, sizeof(err));
	tap_ok(ddp_jobdir_shared(&c, "alice", 42, buf, sizeof(buf)) == 0,
	       "shared dir named");
	TAP_STREQ(buf, "/shared/ddp/alice/42", "shared = root/user/jobid");
	tap_ok(ddp_jobdir_shared(&c, "../root", 42, buf, sizeof(buf)) < 0 &&
		       ddp_jobdir_shared(&c, "a/b", 42, buf, sizeof(buf)) < 0 &&
		       ddp_jobdir_shared(&c, "", 42, buf, sizeof(buf)) < 0 &&
		       ddp_jobdir_shared(&c, "alice", 0, buf, sizeof(buf)) < 0,
	       "unsafe user names and job 0 refused");
	tap_ok(ddp_jobdir_shared(&c, "alice", 42, buf, 10) < 0,
	       "shared dir that does not fit refused");
	tap_ok(ddp_jobdir_scratch(&c, 42, buf, sizeof(buf)) == 0,
	       "scratch dir named");
	TAP_STREQ(buf, "/var/lib/slurm-ddp/scratch/42", "scratch = root/jobid");
	tap_ok(ddp_jobdir_valid_user("svc.ddp-1_x@ad") &&
		       !ddp_jobdir_valid_user("-x") &&
		       !ddp_jobdir_valid_user(".x") &&
		       !ddp_jobdir_valid_user("a b") &&
		       !ddp_jobdir_valid_user(long_user),
	       "user-name rule");
}

int
main(void)
{
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 2;
	}
	test_paths();
	test_job_dirs();
	clean_job_dirs();
	rmdir(tmpdir);
	return tap_done();
}
