/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ddp-nodectl core, the firewall's per-job state files: the elements each
 * job needs and its backstop, written by its prolog and read back by every
 * update, so the sets heal themselves; and the element list (nc_elems)
 * they hold, which the firewall's sets are made of.
 */
#include "nodectl.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ddp_net.h"
#include "ddp_util.h"

#define STATE_MAGIC "ddp-nodectl state 1"
#define STATE_MAX_ELEMS 65536

/* Writes the len bytes at text to <dirfd>/tmp and renames it to name.
 * 0, or -1 with err and errno set (nothing left behind). */
static int
put_state(int dirfd, const char *tmp, const char *name, const char *text,
	  size_t len, char *err, size_t errlen)
{
	int fd, e;

	unlinkat(dirfd, tmp, 0);
	fd = openat(dirfd, tmp,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		e = errno;
		ddp_errf(err, errlen, "create %s: %s", tmp, strerror(e));
		errno = e;
		return -1;
	}
	if (ddp_write_all(fd, text, len) < 0) {
		e = errno;
		ddp_errf(err, errlen, "write %s: %s", tmp, strerror(e));
		goto fail;
	}
	if (close(fd) < 0) {
		e = errno;
		fd = -1;
		ddp_errf(err, errlen, "close %s: %s", tmp, strerror(e));
		goto fail;
	}
	fd = -1;
	if (renameat(dirfd, tmp, dirfd, name) < 0) {
		e = errno;
		ddp_errf(err, errlen, "rename %s: %s", name, strerror(e));
		goto fail;
	}
	return 0;
fail:
	ddp_close(&fd);
	unlinkat(dirfd, tmp, 0);
	errno = e;
	return -1;
}

int
nc_state_write(int dirfd, unsigned long jobid, time_t expires,
	       const struct nc_elems *elems, char *err, size_t errlen)
{
	char name[64], tmp[80];
	struct ddp_buf b = {0};
	size_t i;
	int rv = -1;

	err[0] = '\0';
	if (ddp_fmt(name, sizeof(name), "job.%lu", jobid) < 0 ||
	    ddp_fmt(tmp, sizeof(tmp), ".job.%lu.%ld", jobid, (long)getpid()) <
		    0)
		goto out;
	if (ddp_buf_printf(&b, STATE_MAGIC "\nexpires %lld\n",
			   (long long)expires) < 0)
		goto oom;
	for (i = 0; i < elems->n; i++)
		if (ddp_buf_printf(&b, "elem %d %s %u %u\n",
				   elems->v[i].family == AF_INET ? 4 : 6,
				   elems->v[i].addr, elems->v[i].lo,
				   elems->v[i].hi) < 0)
			goto oom;
	rv = put_state(dirfd, tmp, name, b.s, b.len, err, errlen);
	/* A full file system (whoever filled it) must not fail the
	 * Prolog: the reserve gives back its blocks, once. */
	if (rv < 0 && (errno == ENOSPC || errno == EDQUOT) &&
	    unlinkat(dirfd, NC_STATE_RESERVE, 0) == 0) {
		err[0] = '\0';
		rv = put_state(dirfd, tmp, name, b.s, b.len, err, errlen);
		if (rv == 0)
			rv = 1;
	}
	goto out;
oom:
	ddp_errf(err, errlen, "out of memory");
out:
	ddp_buf_free(&b);
	return rv;
}

int
nc_state_reserve(int dirfd, char *err, size_t errlen)
{
	char tmp[64];
	struct stat st;
	int fd = -1, rc = -1, e;

	err[0] = '\0';
	if (fstatat(dirfd, NC_STATE_RESERVE, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISREG(st.st_mode) && st.st_size == NC_STATE_RESERVE_BYTES)
		return 0;
	ddp_fmt(tmp, sizeof(tmp), "." NC_STATE_RESERVE ".%ld", (long)getpid());
	unlinkat(dirfd, tmp, 0);
	fd = openat(dirfd, tmp,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		ddp_errf(err, errlen, "create %s: %s", tmp, strerror(errno));
		return -1;
	}
	/* Blocks really taken (tmpfs, ext4, xfs allocate; glibc writes
	 * where a file system cannot), not a hole. */
	e = posix_fallocate(fd, 0, NC_STATE_RESERVE_BYTES);
	if (e) {
		ddp_errf(err, errlen, "reserve %d bytes in %s: %s",
			 NC_STATE_RESERVE_BYTES, tmp, strerror(e));
		goto out;
	}
	if (renameat(dirfd, tmp, dirfd, NC_STATE_RESERVE) < 0) {
		ddp_errf(err, errlen, "rename %s: %s", tmp, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	ddp_close(&fd);
	if (rc < 0)
		unlinkat(dirfd, tmp, 0);
	return rc;
}

int
nc_state_remove(int dirfd, unsigned long jobid, char *err, size_t errlen)
{
	char name[64];

	err[0] = '\0';
	if (ddp_fmt(name, sizeof(name), "job.%lu", jobid) < 0)
		return -1;
	if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT) {
		ddp_errf(err, errlen, "remove %s: %s", name, strerror(errno));
		return -1;
	}
	return 0;
}

/* Reads one state file; returns 0 (with *expires and elems appended),
 * or -1 when it is malformed. */
static int
read_state(int dirfd, const char *name, unsigned long jobid, time_t *expires,
	   struct nc_elems *out)
{
	char line[256];
	FILE *f = NULL;
	int fd, rv = -1, n = 0;
	size_t first = out->n;

	fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		goto out;
	f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		goto out;
	}
	while (fgets(line, sizeof(line), f)) {
		char fam[4], addr[64], lo[8], hi[8];
		struct nc_elem el;
		long long e;
		char extra;

		n++;
		if (n == 1) {
			if (strcmp(line, STATE_MAGIC "\n") != 0)
				goto out;
		} else if (n == 2) {
			if (sscanf(line, "expires %lld %c", &e, &extra) != 1)
				goto out;
			*expires = (time_t)e;
		} else {
			memset(&el, 0, sizeof(el));
			if (sscanf(line, "elem %3s %63s %7s %7s %c", fam, addr,
				   lo, hi, &extra) != 4 ||
			    nc_canon_addr(addr, &el.family, el.addr,
					  sizeof(el.addr)) < 0 ||
			    el.family != (strcmp(fam, "4") == 0 ? AF_INET
								: AF_INET6) ||
			    (strcmp(fam, "4") != 0 && strcmp(fam, "6") != 0))
				goto out;
			{
				long a, b;

				if (ddp_parse_long(lo, 0, 65535, &a) < 0 ||
				    ddp_parse_long(hi, a, 65535, &b) < 0)
					goto out;
				el.lo = (unsigned)a;
				el.hi = (unsigned)b;
			}
			el.jobid = jobid;
			el.expires = *expires;
			if (out->n - first >= STATE_MAX_ELEMS ||
			    nc_elems_add(out, &el) < 0)
				goto out;
		}
	}
	rv = n >= 2 ? 0 : -1;
out:
	if (rv < 0)
		out->n = first;
	if (f)
		fclose(f);
	return rv;
}

int
nc_state_read(int dirfd, unsigned long jobid, struct nc_elems *out)
{
	char name[64];
	time_t expires = 0;

	if (ddp_fmt(name, sizeof(name), "job.%lu", jobid) < 0)
		return -1;
	return read_state(dirfd, name, jobid, &expires, out);
}

int
nc_state_read_all(int dirfd, time_t now, const unsigned long *live,
		  size_t nlive, struct nc_elems *out, char *err, size_t errlen)
{
	DIR *d = NULL;
	struct dirent *de;
	int fd, rv = -1;

	err[0] = '\0';
	fd = dup(dirfd);
	if (fd < 0 || !(d = fdopendir(fd))) {
		ddp_close(&fd);
		ddp_errf(err, errlen, "read state dir: %s", strerror(errno));
		goto out;
	}
	/* A dup shares the offset a previous reader left at the end. */
	rewinddir(d);
	rv = 0;
	while ((de = readdir(d))) {
		unsigned long id;
		time_t expires = 0;
		size_t i;
		int keep;

		if (strncmp(de->d_name, "job.", 4) != 0 ||
		    nc_parse_jobid(de->d_name + 4, &id) < 0)
			continue;
		keep = live == NULL;
		for (i = 0; live && i < nlive; i++)
			if (live[i] == id)
				keep = 1;
		if (keep &&
		    read_state(dirfd, de->d_name, id, &expires, out) < 0) {
			(void)ddp_fmt_cat(err, errlen, "%smalformed %s",
					  err[0] ? ", " : "", de->d_name);
			rv = 1;
			keep = 0;
		} else if (keep && expires < now) {
			/* The backstop: a job whose epilog never ran must
			 * not keep its peers open for ever. */
			size_t k = out->n;

			while (k > 0 && out->v[k - 1].jobid == id)
				k--;
			out->n = k;
			keep = 0;
		}
		if (!keep)
			unlinkat(dirfd, de->d_name, 0);
	}
out:
	if (d)
		closedir(d);
	return rv;
}

/* ---- the element list the state files hold ---- */

int
nc_elems_add(struct nc_elems *e, const struct nc_elem *el)
{
	if (e->n == e->cap) {
		size_t cap = e->cap ? e->cap * 2 : 16;
		struct nc_elem *v = realloc(e->v, cap * sizeof(*v));

		if (!v)
			return -1;
		e->v = v;
		e->cap = cap;
	}
	e->v[e->n++] = *el;
	return 0;
}

void
nc_elems_free(struct nc_elems *e)
{
	free(e->v);
	e->v = NULL;
	e->n = e->cap = 0;
}

int
nc_canon_addr(const char *in, int *family, char *out, size_t len)
{
	unsigned char bin[16];

	if (inet_pton(AF_INET, in, bin) == 1)
		*family = AF_INET;
	else if (inet_pton(AF_INET6, in, bin) == 1)
		*family = AF_INET6;
	else
		return -1;
	return ddp_net_addr_format(*family, bin, out, len);
}
