/* SPDX-License-Identifier: BSD-3-Clause */
/* Opening a directory root trusts, checking every directory on the way:
 * see trusted_path.h for the rules and why. */
#include "trusted_path.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ddp_util.h"

#define DIR_FLAGS (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)

/* Checks one directory on the way (last: the one asked for). */
static int
check_dir(int fd, const char *shown, uid_t owner, int last, char *err,
	  size_t errlen)
{
	struct stat st;
	int owner_ok, sticky_ok;

	if (fstat(fd, &st) < 0)
		return ddp_errf(err, errlen, "directory %s: %s", shown,
				strerror(errno));
	owner_ok = last ? st.st_uid == owner
			: st.st_uid == 0 || st.st_uid == owner;
	sticky_ok = !last && st.st_uid == 0 && (st.st_mode & S_ISVTX);
	if (owner_ok && (!(st.st_mode & 022) || sticky_ok))
		return 0;
	return ddp_errf(
		err, errlen,
		"directory %s is owned by uid %lu with mode %04o: others could "
		"replace what lies below it; %s (chown %lu %s; chmod go-w %s)",
		shown, (unsigned long)st.st_uid,
		(unsigned)(st.st_mode & DDP_MODE_BITS),
		last ? "the last directory must be owned by the reader's uid "
		       "and not writable by group or others"
		     : "every directory above must be owned by root (or the "
		       "reader's uid) and not writable by group or others, "
		       "unless root's and sticky like /tmp",
		(unsigned long)(last ? owner : 0), shown, shown);
}

/* 1 when s holds another component after its slashes. */
static int
more_after(const char *s)
{
	return s[strspn(s, "/")] != '\0';
}

/* Appends comp to the shown path, or takes its last component off for
 * "..". Only for messages: a cut one still names where it went wrong. */
static void
shown_step(char *shown, size_t len, const char *comp)
{
	char joined[PATH_MAX], *slash;

	if (strcmp(comp, "..") == 0) {
		slash = strrchr(shown, '/');
		if (slash)
			slash[slash == shown ? 1 : 0] = '\0';
		return;
	}
	if (ddp_fmt(joined, sizeof(joined), "%s/%s",
		    strcmp(shown, "/") ? shown : "", comp) == 0)
		ddp_fmt(shown, len, "%s", joined);
}

/* Replaces todo (what is left to walk, starting with the link's name)
 * with the target of the symlink comp in fd followed by rest. */
static int
follow(int fd, const char *comp, const struct stat *st, uid_t owner,
       const char *shown, char *todo, size_t todolen, const char *rest,
       char *err, size_t errlen)
{
	char target[PATH_MAX], joined[PATH_MAX];
	ssize_t n;

	if (st->st_uid != 0 && st->st_uid != owner)
		return ddp_errf(err, errlen,
				"%s/%s is a symbolic link owned by uid %lu: "
				"they could point it elsewhere; use a path "
				"without it, or one owned by root",
				strcmp(shown, "/") ? shown : "", comp,
				(unsigned long)st->st_uid);
	n = readlinkat(fd, comp, target, sizeof(target) - 1);
	if (n <= 0)
		return ddp_errf(err, errlen, "%s/%s: %s",
				strcmp(shown, "/") ? shown : "", comp,
				n < 0 ? strerror(errno) : "empty link");
	target[n] = '\0';
	if (ddp_fmt(joined, sizeof(joined), "%s%s", target, rest) < 0 ||
	    ddp_fmt(todo, todolen, "%s", joined) < 0)
		return ddp_errf(err, errlen, "%s/%s: path too long",
				strcmp(shown, "/") ? shown : "", comp);
	return 0;
}

/* The first component of p into comp; returns what follows it, or NULL
 * when it is longer than NAME_MAX. */
static const char *
take_comp(const char *p, char comp[NAME_MAX + 1])
{
	size_t len = strcspn(p, "/");

	if (len > NAME_MAX)
		return NULL;
	memcpy(comp, p, len);
	comp[len] = '\0';
	return p + len;
}

/*
 * Opens the directory comp under fd, first making it (mode) when it is
 * absent and create says so. -1 with errno when it cannot be opened; -2
 * when it cannot be made (err says why, naming it after shown).
 */
static int
open_or_create(int fd, const char *comp, int create, mode_t mode, char *shown,
	       size_t shownlen, char *err, size_t errlen)
{
	int next = openat(fd, comp, DIR_FLAGS), e;

	if (next >= 0 || errno != ENOENT || !create)
		return next;
	if (mkdirat(fd, comp, mode) < 0 && errno != EEXIST) {
		e = errno;
		shown_step(shown, shownlen, comp);
		ddp_errf(err, errlen, "cannot create directory %s: %s", shown,
			 strerror(e));
		return -2;
	}
	return openat(fd, comp, DIR_FLAGS);
}

/*
 * comp under *fd is a symbolic link: its target goes in front of the
 * rest of todo (follow), and an absolute one starts again at / (*fd
 * reopened, shown reset).
 */
static int
take_link(int *fd, const char *comp, const struct stat *st, uid_t owner,
	  char *shown, size_t shownlen, char *todo, size_t todolen,
	  const char *rest, char *err, size_t errlen)
{
	if (follow(*fd, comp, st, owner, shown, todo, todolen, rest, err,
		   errlen) < 0)
		return -1;
	if (todo[0] != '/')
		return 0;
	close(*fd);
	*fd = open("/", DIR_FLAGS);
	ddp_fmt(shown, shownlen, "/");
	if (*fd < 0) {
		ddp_errf(err, errlen, "/: %s", strerror(errno));
		return -1;
	}
	return 0;
}

int
ddp_trusted_dir_open(const char *dir, uid_t owner, mode_t create_mode,
		     char *err, size_t errlen)
{
	char todo[PATH_MAX], comp[NAME_MAX + 1], shown[PATH_MAX] = "/";
	const char *p, *rest;
	struct stat st;
	int fd = -1, next = -1, links = 0, e;

	if (errlen)
		err[0] = '\0';
	if (!dir || dir[0] != '/') {
		ddp_errf(err, errlen, "%s: not an absolute path",
			 dir ? dir : "(none)");
		goto fail;
	}
	if (ddp_fmt(todo, sizeof(todo), "%s", dir) < 0) {
		ddp_errf(err, errlen, "%.200s...: path too long", dir);
		goto fail;
	}
	fd = open("/", DIR_FLAGS);
	if (fd < 0)
		ddp_errf(err, errlen, "/: %s", strerror(errno));
	if (fd < 0 ||
	    check_dir(fd, "/", owner, !more_after(todo), err, errlen) < 0)
		goto fail;
	for (;;) {
		p = todo + strspn(todo, "/");
		if (*p == '\0')
			return fd;
		rest = take_comp(p, comp);
		if (!rest) {
			ddp_errf(err, errlen, "%s: a component is too long",
				 dir);
			goto fail;
		}
		if (strcmp(comp, ".") == 0) {
			memmove(todo, rest, strlen(rest) + 1);
			continue;
		}
		next = open_or_create(
			fd, comp, create_mode && !more_after(rest), create_mode,
			shown, sizeof(shown), err, errlen);
		if (next == -2)
			goto fail;
		if (next < 0) {
			e = errno;
			if (fstatat(fd, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			    S_ISLNK(st.st_mode)) {
				if (++links > DDP_TRUSTED_MAX_LINKS) {
					ddp_errf(err, errlen,
						 "%s: too many symbolic links",
						 dir);
					goto fail;
				}
				if (take_link(&fd, comp, &st, owner, shown,
					      sizeof(shown), todo, sizeof(todo),
					      rest, err, errlen) < 0)
					goto fail;
				continue;
			}
			shown_step(shown, sizeof(shown), comp);
			ddp_errf(err, errlen, "directory %s: %s", shown,
				 e == ENOENT ? "absent" : strerror(e));
			goto fail;
		}
		shown_step(shown, sizeof(shown), comp);
		close(fd);
		fd = next;
		next = -1;
		memmove(todo, rest, strlen(rest) + 1);
		if (check_dir(fd, shown, owner, !more_after(todo), err,
			      errlen) < 0)
			goto fail;
	}
fail:
	ddp_close(&next);
	ddp_close(&fd);
	return -1;
}
