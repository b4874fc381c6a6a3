/* SPDX-License-Identifier: BSD-3-Clause */
/* The per-step key: derived from the site key, handed to the step's
 * tasks as a root-owned file only the job's user can read (stepkey.h). */
#include "stepkey.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "ddp_util.h"
#include "jobdir.h"
#include "sha256.h"

/* Versioned: a new derivation gets a new label, never a changed one. */
#define STEP_KEY_LABEL "slurm-ddp step key 1"

/*
 * The access ACL as Linux keeps it in an extended attribute
 * (linux/posix_acl_xattr.h, the format getfacl and libacl read): a
 * little-endian u32 version, then entries of u16 tag, u16 permissions and
 * u32 id, sorted by tag and then id. Written and read here only, so that
 * libddp and the plugin need no libacl.
 */
#define KEY_ACL_XATTR "system.posix_acl_access"
#define KEY_ACL_VERSION 2
#define KEY_ACL_USER_OBJ 0x01
#define KEY_ACL_USER 0x02
#define KEY_ACL_GROUP_OBJ 0x04
#define KEY_ACL_GROUP 0x08
#define KEY_ACL_MASK 0x10
#define KEY_ACL_OTHER 0x20
#define KEY_ACL_READ 4
#define KEY_ACL_NO_ID 0xffffffffu
#define KEY_ACL_ENTRY 8
/* The five entries install writes; the reader takes up to 32. */
#define KEY_ACL_MAX (4 + 32 * KEY_ACL_ENTRY)

void
ddp_step_key_derive(const struct ddp_site_key *site, unsigned long job_id,
		    unsigned long step_id, unsigned long uid,
		    struct ddp_step_key *out)
{
	char msg[128];
	size_t label = sizeof(STEP_KEY_LABEL); /* its NUL included */

	memcpy(msg, STEP_KEY_LABEL, label);
	/* Three unsigned longs always fit in what is left. */
	ddp_fmt(msg + label, sizeof(msg) - label, "job=%lu step=%lu uid=%lu",
		job_id, step_id, uid);
	ddp_hmac_sha256(site->k, sizeof(site->k), msg,
			label + strlen(msg + label), out->k);
}

void
ddp_step_key_wipe(struct ddp_step_key *key)
{
	explicit_bzero(key, sizeof(*key));
}

int
ddp_step_key_name(unsigned long job_id, unsigned long step_id,
		  unsigned long tag, char *buf, size_t len)
{
	return ddp_fmt(buf, len, "%lu.%lu.%lu", job_id, step_id, tag);
}

/* Empties and removes the directory name below kfd after taking it from
 * its owner: a step's key directory of an earlier slurm-ddp (the key file
 * in a directory the user owned). 0, or -1 with errno set. */
static int
remove_keydir(int kfd, const char *name)
{
	struct dirent *de;
	DIR *d = NULL;
	int dfd, rc = -1, e = 0;

	dfd = openat(kfd, name,
		     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return errno == ENOENT ? 0 : -1;
	if (ddp_jobdir_take(dfd) < 0)
		goto out;
	d = fdopendir(dfd);
	if (!d)
		goto out;
	dfd = -1; /* closedir closes it */
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		/* A directory the user made inside stays, named in err. */
		if (unlinkat(dirfd(d), de->d_name, 0) < 0 && !e)
			e = errno;
	}
	if (unlinkat(kfd, name, AT_REMOVEDIR) < 0 && !e)
		e = errno;
	if (!e)
		rc = 0;
out:
	if (rc < 0 && !e)
		e = errno;
	if (d)
		closedir(d);
	ddp_close(&dfd);
	errno = e;
	return rc;
}

/* Removes the entry name below kfd: a key file, emptied first so that a
 * descriptor someone still holds keeps no blocks of the file system
 * (root's truncation, no symlink followed), or an old key directory.
 * A key install made is root's and cannot be leased by its reader, so
 * the truncation never waits; one an earlier slurm-ddp gave its user
 * may be under the user's lease (EWOULDBLOCK), and then only the name
 * goes. 0 (also when it does not exist), or -1 with errno set. */
static int
remove_key(int kfd, const char *name)
{
	struct stat st;
	int fd;

	if (fstatat(kfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -1;
	if (S_ISDIR(st.st_mode))
		return remove_keydir(kfd, name);
	if (S_ISREG(st.st_mode)) {
		fd = openat(kfd, name,
			    O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		/* Unlinking is what matters: a failed truncation leaves
		 * the blocks until the owner's last close. */
		if (fd >= 0 && ftruncate(fd, 0) < 0)
			errno = 0;
		ddp_close(&fd);
	}
	if (unlinkat(kfd, name, 0) < 0 && errno != ENOENT)
		return -1;
	return 0;
}

/* Opens <state_dir>/step-keys: root's, made when missing, and made 0711
 * (the job's user passes through to their file by name, but no one lists
 * the node's steps). */
static int
open_keys(const char *state_dir, char *keys, size_t keyslen, char *err,
	  size_t errlen)
{
	int squatted, kfd;

	if (ddp_fmt(keys, keyslen, "%s/%s", state_dir, DDP_STEP_KEY_DIR) < 0)
		return ddp_errf(err, errlen, "state_dir %.200s: path too long",
				state_dir);
	kfd = ddp_jobdir_open_root(keys, "step key directory", &squatted, err,
				   errlen);
	if (kfd >= 0 && fchmod(kfd, DDP_STEP_KEY_DIR_MODE) < 0) {
		ddp_errf(err, errlen, "%s: chmod: %s", keys, strerror(errno));
		ddp_close(&kfd);
	}
	return kfd;
}

/* Appends one ACL entry at p; returns the next free byte. */
static unsigned char *
acl_put(unsigned char *p, unsigned tag, unsigned perm, uint32_t id)
{
	p[0] = tag & 0xff;
	p[1] = tag >> 8;
	p[2] = perm & 0xff;
	p[3] = perm >> 8;
	p[4] = id & 0xff;
	p[5] = (id >> 8) & 0xff;
	p[6] = (id >> 16) & 0xff;
	p[7] = id >> 24;
	return p + KEY_ACL_ENTRY;
}

/* Gives uid read access to the root-owned file fd, and no one else:
 * u::r, u:uid:r, g::-, m::r, o::-. 0, or -1 with errno set (EOPNOTSUPP
 * where the file system keeps no ACLs). */
static int
grant_read(int fd, uid_t uid)
{
	unsigned char acl[4 + 5 * KEY_ACL_ENTRY], *p = acl + 4;

	acl[0] = KEY_ACL_VERSION;
	acl[1] = acl[2] = acl[3] = 0;
	p = acl_put(p, KEY_ACL_USER_OBJ, KEY_ACL_READ, KEY_ACL_NO_ID);
	p = acl_put(p, KEY_ACL_USER, KEY_ACL_READ, (uint32_t)uid);
	p = acl_put(p, KEY_ACL_GROUP_OBJ, 0, KEY_ACL_NO_ID);
	p = acl_put(p, KEY_ACL_MASK, KEY_ACL_READ, KEY_ACL_NO_ID);
	acl_put(p, KEY_ACL_OTHER, 0, KEY_ACL_NO_ID);
	return fsetxattr(fd, KEY_ACL_XATTR, acl, sizeof(acl), 0);
}

/* Why grant_read failed on path (errno set), into err; -1. */
static int
acl_errf(char *err, size_t errlen, const char *path)
{
	if (errno == EOPNOTSUPP || errno == ENOTSUP)
		return ddp_errf(err, errlen,
				"%s: the file system of state_dir keeps no "
				"POSIX ACLs, with which root's step key files "
				"are given to the job's user alone (put "
				"state_dir on tmpfs, ext4, xfs or btrfs with "
				"ACLs on, as the default /run/slurm-ddp is, or "
				"set port_key = \"\" for munge)",
				path);
	return ddp_errf(err, errlen, "%s: setting its ACL: %s", path,
			strerror(errno));
}

int
ddp_step_key_check_acl(const char *dir, char *err, size_t errlen)
{
	char name[64], path[PATH_MAX];
	int dfd, fd = -1, rc = -1, e = 0;

	if (errlen)
		err[0] = '\0';
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return ddp_errf(err, errlen, "%s: %s", dir, strerror(errno));
	ddp_fmt(name, sizeof(name), ".acl-probe.%ld", (long)getpid());
	ddp_fmt(path, sizeof(path), "%s/%s", dir, name);
	unlinkat(dfd, name, 0);
	fd = openat(dfd, name,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0400);
	if (fd < 0) {
		e = errno;
		ddp_errf(err, errlen, "%s: %s", path, strerror(e));
		goto out;
	}
	/* Any uid but root's: root's gets no ACL. */
	if (grant_read(fd, 65534) < 0) {
		e = errno;
		acl_errf(err, errlen, path);
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0) {
		close(fd);
		unlinkat(dfd, name, 0);
	}
	close(dfd);
	errno = e;
	return rc;
}

int
ddp_step_key_install(const char *state_dir, const char *name,
		     const struct ddp_step_key *key, uid_t uid, char *path,
		     size_t pathlen, char *err, size_t errlen)
{
	char keys[PATH_MAX];
	int kfd = -1, fd = -1, made = 0, rc = -1;

	if (errlen)
		err[0] = '\0';
	if (pathlen)
		path[0] = '\0';
	kfd = open_keys(state_dir, keys, sizeof(keys), err, errlen);
	if (kfd < 0)
		goto out;
	if (ddp_fmt(path, pathlen, "%s/%s", keys, name) < 0) {
		ddp_errf(err, errlen, "%s/%s: path too long", keys, name);
		goto out;
	}
	if (remove_key(kfd, name) < 0) {
		ddp_errf(err, errlen,
			 "%s, left by an earlier step, cannot be removed: %s "
			 "(remove it by hand)",
			 path, strerror(errno));
		goto out;
	}
	/* Root's for good: the user reads it through the ACL, but may not
	 * write, grow, chmod or lease it (F_SETLEASE wants the owner), so
	 * nothing the user holds on /run can take the space the next
	 * job's Prolog writes in. The ACL comes after the key: the user
	 * never sees a half-made file. */
	fd = openat(kfd, name,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0400);
	if (fd >= 0)
		made = 1;
	if (fd < 0 || ddp_write_all(fd, key->k, sizeof(key->k)) < 0 ||
	    fchmod(fd, 0400) < 0) {
		ddp_errf(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (uid != 0 && grant_read(fd, uid) < 0) {
		acl_errf(err, errlen, path);
		goto out;
	}
	rc = 0;
out:
	ddp_close(&fd);
	if (rc < 0 && made)
		unlinkat(kfd, name, 0);
	if (rc < 0 && pathlen)
		path[0] = '\0';
	ddp_close(&kfd);
	return rc;
}

/* Little-endian u16 and u32 at p. */
static unsigned
acl_u16(const unsigned char *p)
{
	return (unsigned)p[0] | (unsigned)p[1] << 8;
}

static uint32_t
acl_u32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

/*
 * Whether anyone but root and me can read the open file fd (sb its
 * stat): 0 when no one can, else -1 with why. The owner must be root
 * (what install makes, read through an ACL) or me (a key of an earlier
 * slurm-ddp, or one a user made); the ACL, where there is one, may give
 * read access to no other user, no group and not others.
 */
static int
key_private(int fd, const struct stat *sb, uid_t me, char *why, size_t len)
{
	unsigned char acl[KEY_ACL_MAX];
	unsigned mask = KEY_ACL_READ, tag, perm, grp = 0, oth;
	uint32_t id, stranger = KEY_ACL_NO_ID;
	ssize_t n;
	size_t i;

	if (sb->st_uid != 0 && sb->st_uid != me)
		return ddp_errf(why, len, "it is owned by uid %u",
				(unsigned)sb->st_uid);
	n = fgetxattr(fd, KEY_ACL_XATTR, acl, sizeof(acl));
	if (n < 0 &&
	    (errno == ENODATA || errno == EOPNOTSUPP || errno == ENOTSUP)) {
		/* No ACL: the mode says it all. */
		if (sb->st_mode & 077)
			return ddp_errf(why, len, "it has mode %04o",
					(unsigned)(sb->st_mode & 07777));
		return 0;
	}
	if (n < 4 || (n - 4) % KEY_ACL_ENTRY || acl_u32(acl) != KEY_ACL_VERSION)
		return ddp_errf(why, len, "its ACL cannot be read (%s)",
				n < 0 ? strerror(errno) : "unknown format");
	oth = sb->st_mode & 07;
	for (i = 4; i < (size_t)n; i += KEY_ACL_ENTRY) {
		tag = acl_u16(acl + i);
		perm = acl_u16(acl + i + 2) & KEY_ACL_READ;
		id = acl_u32(acl + i + 4);
		if (tag == KEY_ACL_MASK)
			mask = perm;
		else if (tag == KEY_ACL_USER && perm && id != 0 && id != me)
			stranger = id;
		else if ((tag == KEY_ACL_GROUP_OBJ || tag == KEY_ACL_GROUP) &&
			 perm)
			grp = 1;
		else if (tag == KEY_ACL_OTHER)
			oth |= perm;
	}
	/* The mask bounds named users and groups, never others. */
	if (mask && stranger != KEY_ACL_NO_ID)
		return ddp_errf(why, len, "its ACL lets uid %lu read it",
				(unsigned long)stranger);
	if (mask && grp)
		return ddp_errf(why, len, "its ACL lets a group read it");
	if (oth)
		return ddp_errf(why, len, "it has mode %04o",
				(unsigned)(sb->st_mode & 07777));
	return 0;
}

int
ddp_step_key_read(const char *path, struct ddp_step_key *out, char *err,
		  size_t errlen)
{
	unsigned char buf[DDP_STEP_KEY_LEN + 1];
	char why[128];
	struct stat sb;
	size_t got = 0;
	ssize_t n;
	int fd, rc = -1;

	if (errlen)
		err[0] = '\0';
	memset(out, 0, sizeof(*out));
	fd = open(path,
		  O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return ddp_errf(err, errlen, "step key %.200s: %s", path,
				errno == ELOOP ? "is a symlink, refused"
					       : strerror(errno));
	if (fstat(fd, &sb) < 0) {
		ddp_errf(err, errlen, "step key %.200s: %s", path,
			 strerror(errno));
		goto out;
	}
	if (!S_ISREG(sb.st_mode)) {
		ddp_errf(err, errlen, "step key %.200s: not a regular file",
			 path);
		goto out;
	}
	if (key_private(fd, &sb, geteuid(), why, sizeof(why)) < 0) {
		ddp_errf(err, errlen,
			 "step key %.200s: %s: it must be root's (or this "
			 "uid's, %u) and readable by no one but this uid and "
			 "root",
			 path, why, (unsigned)geteuid());
		goto out;
	}
	while (got < sizeof(buf)) {
		n = read(fd, buf + got, sizeof(buf) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (got != DDP_STEP_KEY_LEN) {
		ddp_errf(err, errlen, "step key %.200s: %s, expected %d bytes",
			 path,
			 got < DDP_STEP_KEY_LEN ? "too short" : "too long",
			 DDP_STEP_KEY_LEN);
		goto out;
	}
	memcpy(out->k, buf, sizeof(out->k));
	rc = 0;
out:
	explicit_bzero(buf, sizeof(buf));
	close(fd);
	return rc;
}

/* Opens <state_dir>/step-keys as it is, or -1 (errno ENOENT when there is
 * none). */
static int
open_keys_existing(const char *state_dir, char *keys, size_t keyslen, char *err,
		   size_t errlen)
{
	int kfd;

	if (ddp_fmt(keys, keyslen, "%s/%s", state_dir, DDP_STEP_KEY_DIR) < 0) {
		ddp_errf(err, errlen, "state_dir %.200s: path too long",
			 state_dir);
		errno = ENAMETOOLONG;
		return -1;
	}
	kfd = ddp_jobdir_open_nofollow(keys, 0, 0);
	if (kfd < 0 && errno != ENOENT)
		ddp_errf(err, errlen, "%s: %s", keys, strerror(errno));
	return kfd;
}

int
ddp_step_key_remove(const char *state_dir, const char *name, char *err,
		    size_t errlen)
{
	char keys[PATH_MAX];
	int kfd, rc = 0;

	if (errlen)
		err[0] = '\0';
	kfd = open_keys_existing(state_dir, keys, sizeof(keys), err, errlen);
	if (kfd < 0)
		return errno == ENOENT ? 0 : -1;
	if (remove_key(kfd, name) < 0)
		rc = ddp_errf(err, errlen, "%s/%s: cannot remove: %s", keys,
			      name, strerror(errno));
	close(kfd);
	return rc;
}

/* The job id of a name "<job>.<step>.<tag>", or 0 when it is none. */
static unsigned long
name_job(const char *name)
{
	const char *end;
	long v[3];
	int i;

	for (i = 0; i < 3; i++) {
		if (*name < '0' || *name > '9' ||
		    ddp_parse_long_prefix(name, 0, LONG_MAX, &v[i], &end) < 0 ||
		    *end != (i < 2 ? '.' : '\0'))
			return 0;
		name = end + (i < 2);
	}
	return (unsigned long)v[0];
}

int
ddp_step_key_purge(const char *state_dir,
		   int (*keep)(unsigned long job_id, void *arg), void *arg,
		   unsigned *removed, char *err, size_t errlen)
{
	char keys[PATH_MAX];
	struct dirent *de;
	struct stat st;
	unsigned long job;
	DIR *d = NULL;
	int kfd, rc = 0;

	if (errlen)
		err[0] = '\0';
	if (removed)
		*removed = 0;
	kfd = open_keys_existing(state_dir, keys, sizeof(keys), err, errlen);
	if (kfd < 0)
		return errno == ENOENT ? 0 : -1;
	d = fdopendir(kfd);
	if (!d) {
		rc = ddp_errf(err, errlen, "%s: %s", keys, strerror(errno));
		ddp_close(&kfd);
		return rc;
	}
	while ((de = readdir(d)) != NULL) {
		job = name_job(de->d_name);
		if (!job ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		/* A key file larger than a key (only one an earlier
		 * slurm-ddp gave its user can grow): removed whoever runs,
		 * before it fills the node's /run. */
		if (keep(job, arg) &&
		    !(S_ISREG(st.st_mode) && st.st_size > DDP_STEP_KEY_LEN))
			continue;
		if (remove_key(dirfd(d), de->d_name) < 0) {
			if (!rc)
				ddp_errf(err, errlen,
					 "%s/%s: cannot remove: %s", keys,
					 de->d_name, strerror(errno));
			rc = -1;
		} else if (removed) {
			(*removed)++;
		}
	}
	closedir(d);
	return rc;
}
