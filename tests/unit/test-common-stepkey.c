/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of the per-step key (common/stepkey.h): the derivation (a
 * known answer, and a different key for every other job, step, uid or
 * site key), and the file root hands to the step's user: root's, read
 * through an ACL by the job's user alone, who can neither write, grow,
 * chmod nor lease it, nor create anything next to it; a file system
 * without ACLs refused; a leftover of an earlier step replaced, its
 * removal and the purge of what killed steps left, and a state_dir that
 * a user made refused; and the reader, which takes what the installer
 * makes and nothing another user could read. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
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

/* Runs fn(path, out) as uid in a child; what it wrote to out (a line)
 * comes back in buf. 0, or -1 when the child did not finish. */
static int
as_user(uid_t uid, const char *path, void (*fn)(const char *, FILE *),
	char *buf, size_t len)
{
	int fds[2], status;
	ssize_t n;
	size_t got = 0;
	pid_t pid;
	FILE *out;

	buf[0] = '\0';
	if (pipe(fds) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		if (setgid(uid) < 0 || setuid(uid) < 0)
			_exit(200);
		out = fdopen(fds[1], "w");
		if (!out)
			_exit(201);
		fn(path, out);
		fclose(out);
		_exit(0);
	}
	close(fds[1]);
	while (pid > 0 && got + 1 < len &&
	       (n = read(fds[0], buf + got, len - 1 - got)) > 0)
		got += (size_t)n;
	buf[got] = '\0';
	close(fds[0]);
	if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0)
		return -1;
	return 0;
}

/* "ok" or the errno's name for the attempts below. */
static const char *
outcome(int rc)
{
	if (rc >= 0)
		return "ok";
	return errno == EACCES ? "EACCES" : errno == EPERM ? "EPERM" : "other";
}

/* What the job's user tries on their key file to keep blocks of /run:
 * write, append, truncate, chmod to make it writable, set an ACL of
 * their own, and take a read lease, which makes root's truncation fail
 * (EWOULDBLOCK). */
static void
attack(const char *path, FILE *out)
{
	/* u::rw g::- o::-, a valid ACL: refused for its setter only. */
	static const unsigned char acl[28] = {
		2,    0,    0, 0, 1,	0,    6,    0,	  0xff, 0xff,
		0xff, 0xff, 4, 0, 0,	0,    0xff, 0xff, 0xff, 0xff,
		0x20, 0,    0, 0, 0xff, 0xff, 0xff, 0xff};
	int fd, rc;

	fd = open(path, O_WRONLY);
	fprintf(out, "write=%s", outcome(fd));
	if (fd >= 0)
		close(fd);
	fd = open(path, O_WRONLY | O_APPEND);
	fprintf(out, " append=%s", outcome(fd));
	if (fd >= 0)
		close(fd);
	fprintf(out, " truncate=%s", outcome(truncate(path, 1 << 20)));
	fprintf(out, " chmod=%s", outcome(chmod(path, 0600)));
	fprintf(out, " setacl=%s",
		outcome(setxattr(path, "system.posix_acl_access", acl,
				 sizeof(acl), 0)));
	fd = open(path, O_RDONLY);
	rc = fd >= 0 ? fcntl(fd, F_SETLEASE, F_RDLCK) : -1;
	fprintf(out, " lease=%s", outcome(rc));
	if (fd >= 0)
		close(fd);
}

/* ddp_step_key_read as the caller: "ok <first byte>" or "refused <err>". */
static void
read_key(const char *path, FILE *out)
{
	struct ddp_step_key k;
	char err[1024];

	if (ddp_step_key_read(path, &k, err, sizeof(err)) == 0)
		fprintf(out, "ok %02x", k.k[0]);
	else
		fprintf(out, "refused %s", err);
	ddp_step_key_wipe(&k);
}

/* The ACL of path as the kernel keeps it, in hex, or "none". */
static const char *
acl_hex(const char *path)
{
	static char s[2 * 64 + 1];
	unsigned char acl[64];
	ssize_t n = getxattr(path, "system.posix_acl_access", acl, sizeof(acl));
	ssize_t i;

	if (n < 0)
		return "none";
	for (i = 0; i < n; i++)
		snprintf(s + 2 * i, 3, "%02x", acl[i]);
	return s;
}

static void
test_install(const char *tmp)
{
	char state[300], path[4096], path2[4096], err[1024], name[64];
	char leftover[4200], out[512], want[16];
	struct ddp_step_key key, got;
	struct stat st, dst;
	int fd, rc;

	snprintf(state, sizeof(state), "%s/run/slurm-ddp", tmp);
	ddp_step_key_derive(&site, 4242, 7, NOBODY, &key);
	tap_ok(ddp_step_key_name(4242, 7, 99, name, sizeof(name)) == 0 &&
		       strcmp(name, "4242.7.99") == 0,
	       "the key file is named job.step.tag");
	rc = ddp_step_key_install(state, name, &key, NOBODY, path, sizeof(path),
				  err, sizeof(err));
	if (!tap_ok(rc == 0, "root installs the key for uid %d", NOBODY))
		tap_diag("%s", err);
	snprintf(path2, sizeof(path2), "%s/step-keys/4242.7.99", state);
	TAP_STREQ(path, path2, "its path is <state_dir>/step-keys/NAME");
	/* 0440: the group bits show the ACL's mask (r), the group entry
	 * itself gives nothing. */
	tap_ok(stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0 &&
		       st.st_gid == 0 && (st.st_mode & 07777) == 0440 &&
		       st.st_size == 32,
	       "the key file is 32 bytes, root's, mode 0440 (0400 and the "
	       "ACL's mask)");
	/* u::r u:65534:r g::- m::r o::-, little-endian, as getfacl reads
	 * it. */
	TAP_STREQ(acl_hex(path),
		  "02000000"
		  "01000400ffffffff"
		  "02000400feff0000"
		  "04000000ffffffff"
		  "10000400ffffffff"
		  "20000000ffffffff",
		  "its ACL gives read to the job's user alone");
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
	snprintf(want, sizeof(want), "ok %02x", key.k[0]);
	rc = as_user(NOBODY, path, read_key, out, sizeof(out));
	TAP_STREQ(out, want, "ddp_step_key_read as the job's user takes it");
	rc = as_user(NOBODY, path, attack, out, sizeof(out));
	TAP_STREQ(out,
		  "write=EACCES append=EACCES truncate=EACCES chmod=EPERM "
		  "setacl=EPERM lease=EACCES",
		  "the job's user can neither write, grow, truncate, chmod, "
		  "re-ACL nor lease the key");
	tap_ok(stat(path, &st) == 0 && st.st_size == 32 && st.st_uid == 0 &&
		       (st.st_mode & 07777) == 0440,
	       "and it is as root made it");
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

	/* A leftover of the same name is replaced by a fresh one: a key
	 * file an earlier slurm-ddp gave its user, who grew it, and a key
	 * directory of a still earlier one with an extra file the user put
	 * in it. */
	if (chown(path, NOBODY, NOBODY) < 0 || chmod(path, 0600) < 0)
		tap_diag("chmod %s: %s", path, strerror(errno));
	fd = open(path, O_WRONLY | O_APPEND);
	if (fd < 0 || write(fd, "grown", 5) != 5)
		tap_diag("grow %s: %s", path, strerror(errno));
	if (fd >= 0)
		close(fd);
	rc = ddp_step_key_install(state, name, &key, NOBODY, path, sizeof(path),
				  err, sizeof(err));
	tap_ok(rc == 0 && stat(path, &st) == 0 && st.st_size == 32 &&
		       st.st_uid == 0 && (st.st_mode & 07777) == 0440,
	       "a leftover key file of the same name is replaced: %s", err);
	if (unlink(path) < 0 || mkdir(path, 0700) < 0)
		tap_diag("mkdir %s: %s", path, strerror(errno));
	snprintf(leftover, sizeof(leftover), "%s/junk", path);
	fd = open(leftover, O_WRONLY | O_CREAT, 0644);
	if (fd >= 0)
		close(fd);
	rc = ddp_step_key_install(state, name, &key, NOBODY, path, sizeof(path),
				  err, sizeof(err));
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
	rc = ddp_step_key_install(state, name, &key, NOBODY, path, sizeof(path),
				  err, sizeof(err));
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
	rc = ddp_step_key_install(state, name, &key, 0, path, sizeof(path), err,
				  sizeof(err));
	if (rc == 0)
		rc = ddp_step_key_read(path, &got, err, sizeof(err));
	if (!tap_ok(rc == 0 && memcmp(got.k, key.k, sizeof(key.k)) == 0,
		    "read takes the file install made, with its key"))
		tap_diag("%s", err);
	ddp_step_key_remove(state, name, err, sizeof(err));
	ddp_step_key_wipe(&key);
	ddp_step_key_wipe(&got);
}

/* Sets path's ACL from hex (the kernel's format); -1 when it cannot. */
static int
set_acl(const char *path, const char *hex)
{
	unsigned char acl[64];
	size_t n = 0;
	unsigned v;

	while (hex[2 * n] && n < sizeof(acl) && sscanf(hex + 2 * n, "%2x", &v))
		acl[n++] = (unsigned char)v;
	return setxattr(path, "system.posix_acl_access", acl, n, 0);
}

/* As root: a root-owned key the reader takes only when its ACL gives no
 * one but the caller read access. */
static void
test_read_acl(const char *tmp)
{
	/* u::r u:65534:r, then what differs, then o::-. */
	static const char *const head = "02000000"
					"01000400ffffffff"
					"02000400feff0000";
	char dir[300], path[4096], acl[200], out[1200];
	unsigned char buf[32];
	int fd;

	snprintf(dir, sizeof(dir), "%s/readacl", tmp);
	if (mkdir(dir, 0755) < 0)
		tap_diag("mkdir %s: %s", dir, strerror(errno));
	memset(buf, 0x5a, sizeof(buf));
	snprintf(path, sizeof(path), "%s/k", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0400);
	if (fd < 0 || write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
		tap_diag("write %s: %s", path, strerror(errno));
	if (fd >= 0)
		close(fd);
	snprintf(acl, sizeof(acl), "%s%s", head,
		 "04000000ffffffff10000400ffffffff20000000ffffffff");
	if (set_acl(path, acl) < 0)
		tap_diag("setxattr %s: %s", path, strerror(errno));
	as_user(NOBODY, path, read_key, out, sizeof(out));
	TAP_STREQ(
		out, "ok 5a",
		"read takes a root-owned key whose ACL names only the caller");
	/* Another user named beside the caller. */
	snprintf(acl, sizeof(acl), "%s%s", head,
		 "0200040092100000"
		 "04000000ffffffff10000400ffffffff20000000ffffffff");
	if (set_acl(path, acl) < 0)
		tap_diag("setxattr %s: %s", path, strerror(errno));
	as_user(NOBODY, path, read_key, out, sizeof(out));
	tap_ok(strstr(out, "refused") && strstr(out, "lets uid 4242 read it"),
	       "read refuses a key whose ACL names another user too: %s", out);
	/* The owning group given read. */
	snprintf(acl, sizeof(acl), "%s%s", head,
		 "04000400ffffffff10000400ffffffff20000000ffffffff");
	if (set_acl(path, acl) < 0)
		tap_diag("setxattr %s: %s", path, strerror(errno));
	as_user(NOBODY, path, read_key, out, sizeof(out));
	tap_ok(strstr(out, "refused") && strstr(out, "lets a group read it"),
	       "read refuses a key whose ACL lets its group read it: %s", out);
	/* A mask of nothing makes the named user's read void: nothing to
	 * refuse, and the caller cannot open it at all. */
	snprintf(acl, sizeof(acl), "%s%s", head,
		 "0200040092100000"
		 "04000000ffffffff10000000ffffffff20000000ffffffff");
	if (set_acl(path, acl) < 0)
		tap_diag("setxattr %s: %s", path, strerror(errno));
	as_user(NOBODY, path, read_key, out, sizeof(out));
	tap_ok(strstr(out, "refused") && strstr(out, "Permission denied"),
	       "a mask of nothing leaves the caller no read: %s", out);
	/* Others given read. */
	if (removexattr(path, "system.posix_acl_access") < 0 ||
	    chmod(path, 0444) < 0)
		tap_diag("chmod %s: %s", path, strerror(errno));
	as_user(NOBODY, path, read_key, out, sizeof(out));
	tap_ok(strstr(out, "refused") && strstr(out, "mode 0444"),
	       "read refuses a root-owned key everyone can read: %s", out);
}

/* In a mount namespace of its own, installs a key on a ramfs, which
 * keeps no ACLs: "refused <err> left=<entries>", "installed", or
 * "skip <why>" where the namespace or the mount cannot be made. */
static void
install_on_ramfs(const char *tmp, FILE *out)
{
	char state[300], path[4096], err[1024];
	struct ddp_step_key key;
	struct stat st;
	int rc;

	memset(&key, 0x22, sizeof(key));
	snprintf(state, sizeof(state), "%s/ramfs", tmp);
	if (mkdir(state, 0755) < 0 || unshare(CLONE_NEWNS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("ddp-test", state, "ramfs", 0, "mode=0755") < 0) {
		fprintf(out, "skip %s", strerror(errno));
		return;
	}
	rc = ddp_step_key_check_acl(state, err, sizeof(err));
	fprintf(out, "check=%s ",
		rc == 0		      ? "ok"
		: errno == EOPNOTSUPP ? "EOPNOTSUPP"
				      : "other");
	rc = ddp_step_key_install(state, "9.0.1", &key, NOBODY, path,
				  sizeof(path), err, sizeof(err));
	snprintf(path, sizeof(path), "%s/step-keys/9.0.1", state);
	if (rc == 0)
		fprintf(out, "installed");
	else
		fprintf(out, "refused %s left=%s", err,
			stat(path, &st) == 0 ? "yes" : "no");
}

static void
test_no_acl(const char *tmp)
{
	char out[1200];
	int status, fds[2];
	ssize_t n;
	size_t got = 0;
	pid_t pid;
	FILE *f;

	if (pipe(fds) < 0)
		return;
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		f = fdopen(fds[1], "w");
		if (f)
			install_on_ramfs(tmp, f);
		_exit(f && fclose(f) == 0 ? 0 : 1);
	}
	close(fds[1]);
	while (pid > 0 && got + 1 < sizeof(out) &&
	       (n = read(fds[0], out + got, sizeof(out) - 1 - got)) > 0)
		got += (size_t)n;
	out[got] = '\0';
	close(fds[0]);
	if (pid > 0)
		waitpid(pid, &status, 0);
	if (strncmp(out, "skip ", 5) == 0) {
		tap_ok(1,
		       "# SKIP a file system without ACLs cannot be mounted "
		       "here (%s)",
		       out + 5);
		return;
	}
	tap_ok(strncmp(out, "check=EOPNOTSUPP ", 17) == 0,
	       "the probe doctor runs says EOPNOTSUPP there: %.40s", out);
	tap_ok(strstr(out, "refused") && strstr(out, "keeps no POSIX ACLs") &&
		       strstr(out, "port_key") && strstr(out, "left=no"),
	       "on a file system without ACLs install fails, naming the fix, "
	       "and leaves no key file: %s",
	       out);
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
		if (ddp_step_key_install(state, names[i], &key, NOBODY, path,
					 sizeof(path), err, sizeof(err)) < 0)
			tap_diag("install %s: %s", names[i], err);
	for (i = 4; i < 6; i++) {
		snprintf(path, sizeof(path), "%s/step-keys/%s", state,
			 names[i]);
		fd = open(path, O_WRONLY | O_CREAT, 0600);
		if (fd >= 0)
			close(fd);
	}
	/* 44's owner grew its key (one an earlier slurm-ddp gave them). */
	snprintf(path, sizeof(path), "%s/step-keys/44.0.4", state);
	if (chown(path, NOBODY, NOBODY) < 0 || chmod(path, 0600) < 0 ||
	    truncate(path, 1 << 20) < 0)
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
	tap_ok(ddp_step_key_check_acl(tmp, cmd, sizeof(cmd)) == 0,
	       "the probe finds ACLs where they are kept: %s", cmd);
	test_install(tmp);
	test_install_read(tmp);
	test_read_acl(tmp);
	test_no_acl(tmp);
	test_purge(tmp);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	if (system(cmd) != 0)
		tap_diag("could not remove %s", tmp);
	return tap_done();
}
