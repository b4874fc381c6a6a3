/* SPDX-License-Identifier: BSD-3-Clause */
/* The site key: ddp.conf's port_key file, read by root and folded into
 * 128 bits (sitekey.h). */
#include "sitekey.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ddp_util.h"
#include "trusted_path.h"

void
ddp_site_key_wipe(struct ddp_site_key *key)
{
	explicit_bzero(key, sizeof(*key));
}

/* Says what would work, after what was wrong with the key file. */
#define KEY_FIX                                                            \
	"; use a regular file of %d-%d random bytes, owner uid %lu, mode " \
	"0600, in a directory only uid %lu can write, identical on every " \
	"node: (umask 077; head -c 32 /dev/urandom >%.200s), copied like " \
	"munge.key; or port_key = \"\" in ddp.conf (ports anyone can compute)"

/*
 * A key made by hand rather than from /dev/urandom: fewer than 8 distinct
 * byte values ("yes | head -c 32"), or a file whose blocks cancel out when
 * folded (the same 16 bytes twice). 16 random bytes show fewer than 8
 * distinct values with a probability below 1e-9.
 */
static int
weak_key(const unsigned char *buf, size_t len, const struct ddp_site_key *key)
{
	unsigned char seen[256] = {0};
	size_t i, distinct = 0, zero = 0;

	for (i = 0; i < len; i++) {
		distinct += !seen[buf[i]];
		seen[buf[i]] = 1;
	}
	for (i = 0; i < sizeof(key->k); i++)
		zero += key->k[i] == 0;
	return distinct < 8 || zero == sizeof(key->k);
}

/* Opens the key file's directory, named by path up to its last '/',
 * checking every directory from "/" down (trusted_path.h); *base is then
 * the file's name in it. */
static int
open_key_dir(const char *path, uid_t owner, const char **base, char *err,
	     size_t errlen)
{
	char dir[PATH_MAX], why[1024];
	const char *slash = strrchr(path, '/');
	size_t len;
	int dfd;

	if (!slash || path[0] != '/' || !slash[1]) {
		ddp_errf(err, errlen,
			 "port_key %.200s: not an absolute path" KEY_FIX, path,
			 DDP_SITE_KEY_MIN, DDP_SITE_KEY_MAX,
			 (unsigned long)owner, (unsigned long)owner, path);
		return -1;
	}
	len = slash == path ? 1 : (size_t)(slash - path);
	if (len >= sizeof(dir)) {
		ddp_errf(err, errlen, "port_key %.200s: path too long", path);
		return -1;
	}
	memcpy(dir, path, len);
	dir[len] = '\0';
	dfd = ddp_trusted_dir_open(dir, owner, 0, why, sizeof(why));
	if (dfd < 0) {
		ddp_errf(err, errlen, "port_key %.200s: %s", path, why);
		return -1;
	}
	*base = slash + 1;
	return dfd;
}

/* Reads fd to its end or until size bytes are in buf (*got); -1 with
 * errno on a read error. */
static int
read_upto(int fd, unsigned char *buf, size_t size, size_t *got)
{
	ssize_t n;

	while (*got < size) {
		n = read(fd, buf + *got, size - *got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		*got += (size_t)n;
	}
	return 0;
}

int
ddp_site_key_load(const char *path, uid_t owner, struct ddp_site_key *key,
		  char *err, size_t errlen)
{
	unsigned char buf[DDP_SITE_KEY_MAX + 1];
	const char *base = NULL;
	struct stat st;
	size_t got = 0, i;
	int dfd = -1, fd = -1, rc = -1;

	if (errlen)
		err[0] = '\0';
	memset(key, 0, sizeof(*key));
	if (!path) {
		ddp_errf(err, errlen, "port_key: no path given");
		goto out;
	}
	dfd = open_key_dir(path, owner, &base, err, errlen);
	if (dfd < 0)
		goto out;
	fd = openat(dfd, base,
		    O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		ddp_errf(err, errlen, "port_key %.200s: %s" KEY_FIX, path,
			 errno == ELOOP ? "is a symlink, refused"
					: strerror(errno),
			 DDP_SITE_KEY_MIN, DDP_SITE_KEY_MAX,
			 (unsigned long)owner, (unsigned long)owner, path);
		goto out;
	}
	if (fstat(fd, &st) < 0) {
		ddp_errf(err, errlen, "port_key %.200s: %s", path,
			 strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode) || st.st_uid != owner || (st.st_mode & 077)) {
		ddp_errf(err, errlen,
			 "port_key %.200s: %s owned by uid %lu with mode "
			 "%04o%s" KEY_FIX,
			 path,
			 S_ISREG(st.st_mode) ? "file" : "not a regular file,",
			 (unsigned long)st.st_uid,
			 (unsigned)(st.st_mode & DDP_MODE_BITS),
			 (st.st_mode & 077) ? ": others can read or change it"
					    : "",
			 DDP_SITE_KEY_MIN, DDP_SITE_KEY_MAX,
			 (unsigned long)owner, (unsigned long)owner, path);
		goto out;
	}
	if (read_upto(fd, buf, sizeof(buf), &got) < 0) {
		ddp_errf(err, errlen, "port_key %.200s: %s", path,
			 strerror(errno));
		goto out;
	}
	if (got < DDP_SITE_KEY_MIN || got > DDP_SITE_KEY_MAX) {
		ddp_errf(err, errlen, "port_key %.200s: %s (%zu bytes)" KEY_FIX,
			 path,
			 got < DDP_SITE_KEY_MIN ? "too short" : "too long", got,
			 DDP_SITE_KEY_MIN, DDP_SITE_KEY_MAX,
			 (unsigned long)owner, (unsigned long)owner, path);
		goto out;
	}
	for (i = 0; i < got; i++)
		key->k[i % sizeof(key->k)] ^= buf[i];
	if (weak_key(buf, got, key)) {
		ddp_errf(err, errlen,
			 "port_key %.200s: not random: its bytes repeat, and "
			 "the %zu bytes fold to a guessable key" KEY_FIX,
			 path, got, DDP_SITE_KEY_MIN, DDP_SITE_KEY_MAX,
			 (unsigned long)owner, (unsigned long)owner, path);
		goto out;
	}
	rc = 0;
out:
	explicit_bzero(buf, sizeof(buf));
	if (rc < 0)
		ddp_site_key_wipe(key);
	ddp_close(&fd);
	ddp_close(&dfd);
	return rc;
}
