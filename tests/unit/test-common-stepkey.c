/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of the per-step key (common/stepkey.h): the derivation (a
 * known answer, and a different key for every other job, step, uid or
 * site key), and the file root hands to the step's user: its owner and
 * modes, that another uid cannot read it, that the user can create
 * nothing next to it, a leftover of an earlier step replaced, its
 * removal and the purge of what killed steps left, and a state_dir that
 * a user made refused; and the reader, which takes what the installer
 * makes and nothing else. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "stepkey.h"
#include "tap.h"

#define NOBODY 65534
#define OTHER_UID 4242

static const struct ddp_site_key site = {{0x6b, 0x1f, 0x93, 0x02, 0xc4, 0x55,
					  0xe0, 0x7a, 0x19, 0x88, 0x3d, 0xb2,
					  0x40, 0xfe, 0x21, 0x9c}};

static const char *
hex(const struct ddp_step_key *k)
{
	static char s[2 * DDP_STEP_KEY_LEN + 1];
	size_t i;

	for (i = 0; i < sizeof(k->k); i++)
		snprintf(s + 2 * i, 3, "%02x", k->k[i]);
	return s;
}

static void
test_derive(void)
{
	struct ddp_step_key a, b;
	struct ddp_site_key other = site;
	int differ = 1;

	ddp_step_key_derive(&site, 4242, 7, 1000, &a);
	/* HMAC-SHA256(site, "slurm-ddp step key 1\0job=4242 step=7
	 * uid=1000"), computed apart from this code (Python's hmac). */
	TAP_STREQ(hex(&a),
		  "f5477598856d1761628bf66df5d1005522a89a0b86ae78262a5a31ef"
		  "f834f117",
		  "the step key is HMAC-SHA256 of the label, job, step and "
		  "uid under the site key");
	ddp_step_key_derive(&site, 4242, 7, 1000, &b);
	tap_ok(memcmp(a.k, b.k, sizeof(a.k)) == 0,
	       "every node derives the same key for the same step");
	ddp_step_key_derive(&site, 4243, 7, 1000, &b);
	differ &= memcmp(a.k, b.k, sizeof(a.k)) != 0;
	ddp_step_key_derive(&site, 4242, 8, 1000, &b);
	differ &= memcmp(a.k, b.k, sizeof(a.k)) != 0;
	ddp_step_key_derive(&site, 4242, 7, 1001, &b);
	differ &= memcmp(a.k, b.k, sizeof(a.k)) != 0;
	/* "job=4242 step=71" and "job=42427 step=1" must not meet. */
	ddp_step_key_derive(&site, 42427, 1, 1000, &a);
	ddp_step_key_derive(&site, 4242, 71, 1000, &b);
	differ &= memcmp(a.k, b.k, sizeof(a.k)) != 0;
	other.k[15] ^= 1;
	ddp_step_key_derive(&site, 4242, 7, 1000, &a);
	ddp_step_key_derive(&other, 4242, 7, 1000, &b);
	differ &= memcmp(a.k, b.k, sizeof(a.k)) != 0;
	tap_ok(differ, "another job, step, uid or site key gives another key");
	ddp_step_key_wipe(&a);
	tap_ok(tap_all_zero(a.k, sizeof(a.k)),
	       "wipe zeroes the key, every byte");
}

/* As uid, in a child: 0 when path opens for reading, else errno. */
static int
open_as(uid_t uid, const char *path)
{
	pid_t pid = fork();
	int status, fd;

	if (pid == 0) {
		if (setgid(uid) < 0 || setuid(uid) < 0)
			_exit(200);
		fd = open(path, O_RDONLY);
		_exit(fd >= 0 ? 0 : errno);
	}
	if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

/* As uid, in a child: 0 when a file or a directory can be made in dir,
 * else errno. */
static int
create_as(uid_t uid, const char *dir)
{
	char path[4200];
	pid_t pid = fork();
	int status, fd;

	if (pid == 0) {
		if (setgid(uid) < 0 || setuid(uid) < 0)
			_exit(200);
		snprintf(path, sizeof(path), "%s/filler", dir);
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
		if (fd >= 0)
			_exit(0);
		snprintf(path, sizeof(path), "%s/filler.d", dir);
		_exit(mkdir(path, 0700) == 0 ? 0 : errno);
	}
	if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

static void
test_install(const char *tmp)
{
	char state[300], path[4096], path2[4096], err[1024], name[64];
	char leftover[4200];
	struct ddp_step_key key, got;
	struct stat st, dst;
	int fd, rc;

	snprintf(state, sizeof(state), "%s/run/slurm-ddp", tmp);
	ddp_step_key_derive(&site, 4242, 7, NOBODY, &key);
	tap_ok(ddp_step_key_name(4242, 7, 99, name, sizeof(name)) == 0 &&
		       strcmp(name, "4242.7.99") == 0,
	       "the key file is named job.step.tag");
	rc = ddp_step_key_install(state, name, &key, NOBODY, NOBODY, path,
				  sizeof(path), err, sizeof(err));
	if (!tap_ok(rc == 0, "root installs the key for uid %d", NOBODY))
		tap_diag("%s", err);
	snprintf(path2, sizeof(path2), "%s/step-keys/4242.7.99", state);
	TAP_STREQ(path, path2, "its path is <state_dir>/step-keys/NAME");
	tap_ok(stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
		       st.st_uid == NOBODY && st.st_gid == NOBODY &&
		       (st.st_mode & 07777) == 0400 && st.st_size == 32,
	       "the key file is 32 bytes, 0400, owned by the job's user");
	*strrchr(path2, '/') = '\0';
	tap_ok(stat(path2, &dst) == 0 && dst.st_uid == 0 &&
		       (dst.st_mode & 07777) == 0711,
	       "step-keys is root's, 0711");
	fd = open(path, O_RDONLY);
	tap_ok(fd >= 0 && read(fd, got.k, sizeof(got.k)) == 32 &&
		       memcmp(got.k, key.k, sizeof(key.k)) == 0,
	       "the file holds the derived key");
	if (fd >= 0)
		close(fd);
	tap_ok(open_as(NOBODY, path) == 0, "the job's user reads it");
	tap_ok(open_as(OTHER_UID, path) == EACCES,
	       "another uid cannot open it (EACCES)");
	/* Nothing of the user's on /run to fill, or to outlive the step. */
	snprintf(path2, sizeof(path2), "%s", path);
	*strrchr(path2, '/') = '\0';
	rc = create_as(NOBODY, path2);
	tap_ok(rc == EACCES,
	       "the job's user can create nothing in the key's directory "
	       "(%s)",
	       rc > 0 ? strerror(rc) : "created");
	*strrchr(path2, '/') = '\0';
	rc = create_as(NOBODY, path2);
	tap_ok(rc == EACCES, "nor in step-keys' directory (%s)",
	       rc > 0 ? strerror(rc) : "created");

	/* A leftover of the same name is replaced by a fresh one: a file
	 * its owner grew, and a key directory of an earlier slurm-ddp with
	 * an extra file the user put in it. */
	if (chmod(path, 0600) < 0)
		tap_diag("chmod %s: %s", path, strerror(errno));
	fd = open(path, O_WRONLY | O_APPEND);
	if (fd < 0 || write(fd, "grown", 5) != 5)
		tap_diag("grow %s: %s", path, strerror(errno));
	if (fd >= 0)
		close(fd);
	rc = ddp_step_key_install(state, name, &key, NOBODY, NOBODY, path,
				  sizeof(path), err, sizeof(err));
	tap_ok(rc == 0 && stat(path, &st) == 0 && st.st_size == 32 &&
		       (st.st_mode & 07777) == 0400,
	       "a leftover key file of the same name is replaced: %s", err);
	if (unlink(path) < 0 || mkdir(path, 0700) < 0)
		tap_diag("mkdir %s: %s", path, strerror(errno));
	snprintf(leftover, sizeof(leftover), "%s/junk", path);
	fd = open(leftover, O_WRONLY | O_CREAT, 0644);
	if (fd >= 0)
		close(fd);
	rc = ddp_step_key_install(state, name, &key, NOBODY, NOBODY, path,
				  sizeof(path), err, sizeof(err));
	tap_ok(rc == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode),
	       "an old key directory of the same name is replaced: %s", err);

	rc = ddp_step_key_remove(state, name, err, sizeof(err));
	tap_ok(rc == 0 && access(path, F_OK) < 0, "remove deletes it");
	tap_ok(ddp_step_key_remove(state, name, err, sizeof(err)) == 0,
	       "removing a missing key directory is not an error");

	/* A state_dir a user made first is refused, and nothing is made. */
	snprintf(state, sizeof(state), "%s/squat", tmp);
	if (mkdir(state, 0755) < 0 || chown(state, NOBODY, NOBODY) < 0)
		tap_diag("mkdir %s: %s", state, strerror(errno));
	snprintf(state, sizeof(state), "%s/squat/step-keys", tmp);
	if (mkdir(state, 0755) < 0 || chown(state, NOBODY, NOBODY) < 0)
		tap_diag("mkdir %s: %s", state, strerror(errno));
	snprintf(state, sizeof(state), "%s/squat", tmp);
	rc = ddp_step_key_install(state, name, &key, NOBODY, NOBODY, path,
				  sizeof(path), err, sizeof(err));
	tap_ok(rc < 0 && strstr(err, "owned by uid 65534") && !path[0],
	       "a step-keys directory a user made is refused: %s", err);
	ddp_step_key_wipe(&key);
	ddp_step_key_wipe(&got);
}

/* Writes len bytes of 0x5a to dir/name with mode; its path into path. */
static void
write_file(const char *dir, const char *name, size_t len, mode_t mode,
	   char *path, size_t pathlen)
{
	unsigned char buf[64];
	int fd;

	memset(buf, 0x5a, sizeof(buf));
	snprintf(path, pathlen, "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, buf, len) != (ssize_t)len ||
	    fchmod(fd, mode) < 0)
		tap_diag("write %s: %s", path, strerror(errno));
	if (fd >= 0)
		close(fd);
}

/* Reading path fails with err naming path and mentioning want; out is
 * left zeroed. */
static void
read_refused(const char *path, const char *want, const char *what)
{
	struct ddp_step_key k;
	char err[1024];
	int rc;

	memset(&k, 0xaa, sizeof(k));
	rc = ddp_step_key_read(path, &k, err, sizeof(err));
	if (!tap_ok(rc < 0 && strstr(err, path) && strstr(err, want) &&
			    k.k[0] == 0 && k.k[31] == 0,
		    "read refuses %s", what))
		tap_diag("rc %d err '%s'", rc, err);
}

static void
test_read(void)
{
	char tmpl[] = "/tmp/ddp-stepkey-read-XXXXXX", path[4096], link[4096];
	char err[1024];
	const char *dir = mkdtemp(tmpl);
	struct ddp_step_key k;

	if (!dir) {
		tap_ok(0, "mkdtemp");
		return;
	}
	write_file(dir, "good", 32, 0400, path, sizeof(path));
	tap_ok(ddp_step_key_read(path, &k, err, sizeof(err)) == 0 &&
		       k.k[0] == 0x5a && k.k[31] == 0x5a,
	       "read takes a 32-byte file of this uid, mode 0400: %s", err);
	snprintf(link, sizeof(link), "%s/link", dir);
	if (symlink(path, link) < 0)
		tap_diag("symlink: %s", strerror(errno));
	read_refused(link, "symlink", "a symlink to a good key");
	write_file(dir, "rw", 32, 0600, path, sizeof(path));
	tap_ok(ddp_step_key_read(path, &k, err, sizeof(err)) == 0,
	       "read takes mode 0600 too: %s", err);
	write_file(dir, "open", 32, 0644, path, sizeof(path));
	read_refused(path, "mode 0644", "a file others can read");
	write_file(dir, "group", 32, 0440, path, sizeof(path));
	read_refused(path, "mode 0440", "a file its group can read");
	write_file(dir, "short", 31, 0400, path, sizeof(path));
	read_refused(path, "too short", "31 bytes");
	write_file(dir, "long", 33, 0400, path, sizeof(path));
	read_refused(path, "too long", "33 bytes");
	read_refused(dir, "not a regular file", "a directory");
	snprintf(path, sizeof(path), "%s/absent", dir);
	read_refused(path, "No such file", "a missing file");
	if (geteuid() == 0) {
		write_file(dir, "theirs", 32, 0400, path, sizeof(path));
		if (chown(path, NOBODY, NOBODY) < 0)
			tap_diag("chown %s: %s", path, strerror(errno));
		read_refused(path, "owned by uid 65534",
			     "another uid's file, even to root");
	} else {
		tap_ok(1, "# skip not root: cannot give a file to another "
			  "uid");
	}
	ddp_step_key_wipe(&k);
	snprintf(path, sizeof(path), "rm -rf '%s'", dir);
	if (system(path) != 0)
		tap_diag("could not remove %s", dir);
}

/* As root: the reader takes what the installer made (for root itself). */
static void
test_install_read(const char *tmp)
{
	char state[300], path[4096], err[1024], name[64];
	struct ddp_step_key key, got;
	int rc;

	snprintf(state, sizeof(state), "%s/run/slurm-ddp", tmp);
	ddp_step_key_derive(&site, 4242, 8, 0, &key);
	ddp_step_key_name(4242, 8, 1, name, sizeof(name));
	rc = ddp_step_key_install(state, name, &key, 0, 0, path, sizeof(path),
				  err, sizeof(err));
	if (rc == 0)
		rc = ddp_step_key_read(path, &got, err, sizeof(err));
	if (!tap_ok(rc == 0 && memcmp(got.k, key.k, sizeof(key.k)) == 0,
		    "read takes the file install made, with its key"))
		tap_diag("%s", err);
	ddp_step_key_remove(state, name, err, sizeof(err));
	ddp_step_key_wipe(&key);
	ddp_step_key_wipe(&got);
}

static int
keep_all_but_42(unsigned long job, void *arg)
{
	(*(int *)arg)++;
	return job != 42;
}

/* As root: the purge removes the keys of the jobs keep rejects, and a
 * key file grown past a key whatever keep says; other names stay. */
static void
test_purge(const char *tmp)
{
	static const char *const names[] = {"42.0.1", "42.1.2",	 "43.0.3",
					    "44.0.4", "notakey", "45.0"};
	char state[300], path[4096], err[1024];
	struct ddp_step_key key;
	unsigned removed = 0;
	size_t i;
	int asked = 0, fd, rc;

	snprintf(state, sizeof(state), "%s/purge", tmp);
	memset(&key, 0x11, sizeof(key));
	tap_ok(ddp_step_key_purge(state, keep_all_but_42, &asked, &removed, err,
				  sizeof(err)) == 0 &&
		       removed == 0,
	       "purging a missing step-keys is not an error");
	for (i = 0; i < 4; i++)
		if (ddp_step_key_install(state, names[i], &key, NOBODY, NOBODY,
					 path, sizeof(path), err,
					 sizeof(err)) < 0)
			tap_diag("install %s: %s", names[i], err);
	for (i = 4; i < 6; i++) {
		snprintf(path, sizeof(path), "%s/step-keys/%s", state,
			 names[i]);
		fd = open(path, O_WRONLY | O_CREAT, 0600);
		if (fd >= 0)
			close(fd);
	}
	/* 44's owner grew its key. */
	snprintf(path, sizeof(path), "%s/step-keys/44.0.4", state);
	if (chmod(path, 0600) < 0 || truncate(path, 1 << 20) < 0)
		tap_diag("grow %s: %s", path, strerror(errno));
	rc = ddp_step_key_purge(state, keep_all_but_42, &asked, &removed, err,
				sizeof(err));
	tap_ok(rc == 0 && removed == 3 && asked >= 3,
	       "purge removes 3 (rc %d, %u removed): %s", rc, removed, err);
	for (i = 0; i < 6; i++) {
		snprintf(path, sizeof(path), "%s/step-keys/%s", state,
			 names[i]);
		tap_ok((access(path, F_OK) == 0) == (i == 2 || i >= 4), "%s %s",
		       names[i], i == 2 || i >= 4 ? "stays" : "is removed");
	}
}

int
main(void)
{
	char tmp[] = "/tmp/ddp-stepkey-XXXXXX", cmd[200];

	test_derive();
	test_read();
	if (geteuid() != 0) {
		tap_ok(1, "# SKIP installing keys needs root");
		return tap_done();
	}
	/* Others may pass through, as through /run. */
	if (!mkdtemp(tmp) || chmod(tmp, 0755) < 0) {
		tap_ok(0, "mkdtemp");
		return tap_done();
	}
	test_install(tmp);
	test_install_read(tmp);
	test_purge(tmp);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	if (system(cmd) != 0)
		tap_diag("could not remove %s", tmp);
	return tap_done();
}
