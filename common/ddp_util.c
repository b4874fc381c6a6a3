/* SPDX-License-Identifier: BSD-3-Clause */
/* Strict number parsing, checked formatting and the clock. */
#include "ddp_util.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int
ddp_parse_long_prefix(const char *s, long min, long max, long *out,
		      const char **end)
{
	char *stop = NULL;
	long v;
	const char *digits;

	if (!s)
		return -1;
	digits = (*s == '+' || *s == '-') ? s + 1 : s;
	if (!isdigit((unsigned char)*digits))
		return -1;
	errno = 0;
	v = strtol(s, &stop, 10);
	if (errno == ERANGE || v < min || v > max)
		return -1;
	*out = v;
	*end = stop;
	return 0;
}

int
ddp_parse_long(const char *s, long min, long max, long *out)
{
	const char *end = NULL;
	long v;

	if (ddp_parse_long_prefix(s, min, max, &v, &end) < 0 || *end != '\0')
		return -1;
	*out = v;
	return 0;
}

int
ddp_fmt(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= size)
		return -1;
	return 0;
}

int
ddp_verrf(char *err, size_t errlen, const char *fmt, va_list ap)
{
	if (!errlen)
		return -1;
	if (vsnprintf(err, errlen, fmt, ap) < 0)
		err[0] = '\0';
	return -1;
}

int
ddp_fmt_cat(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	size_t len;
	int n;

	if (size == 0)
		return -1;
	len = strnlen(buf, size);
	if (len == size) {
		buf[size - 1] = '\0';
		return -1;
	}
	va_start(ap, fmt);
	n = vsnprintf(buf + len, size - len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= size - len)
		return -1;
	return 0;
}

int
ddp_errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ddp_verrf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

int
ddp_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	ssize_t n;

	while (len > 0) {
		n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = EIO;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int
ddp_write_replace(const char *path, const void *buf, size_t len, char *err,
		  size_t errlen)
{
	char tmp[PATH_MAX];
	int fd = -1, rc = -1;

	tmp[0] = '\0';
	if (ddp_fmt(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) < 0) {
		tmp[0] = '\0';
		ddp_errf(err, errlen, "%.200s: name too long", path);
		goto out;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
		  0600);
	if (fd < 0) {
		ddp_errf(err, errlen, "%s: %s", tmp, strerror(errno));
		tmp[0] = '\0';
		goto out;
	}
	/* The umask may have taken bits; a file left by a crash, others. */
	if (fchmod(fd, 0600) < 0 || ddp_write_all(fd, buf, len) < 0 ||
	    fsync(fd) < 0) {
		ddp_errf(err, errlen, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	if (close(fd) < 0) {
		fd = -1;
		ddp_errf(err, errlen, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	fd = -1;
	if (rename(tmp, path) < 0) {
		ddp_errf(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	tmp[0] = '\0';
	rc = 0;
out:
	ddp_close(&fd);
	if (tmp[0])
		unlink(tmp);
	return rc;
}

ssize_t
ddp_read_text(const char *path, char *buf, size_t len)
{
	int fd;
	size_t got = 0;
	ssize_t n, rc = -1;

	if (len == 0) {
		errno = EINVAL;
		return -1;
	}
	buf[0] = '\0';
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -1;
	while (got < len - 1) {
		n = read(fd, buf + got, len - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			goto out;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	buf[got] = '\0';
	rc = (ssize_t)got;
out:
	ddp_close(&fd);
	return rc;
}

double
ddp_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void
ddp_sleep_until(double t)
{
	struct timespec ts;

	if (t <= 0)
		return;
	ts.tv_sec = (time_t)t;
	ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
	if (ts.tv_nsec > 999999999L)
		ts.tv_nsec = 999999999L;
	clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

void
ddp_close(int *fd)
{
	int saved = errno;

	if (*fd >= 0)
		close(*fd);
	*fd = -1;
	errno = saved;
}

int
ddp_hex(char *dst, size_t dstlen, const void *src, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	const unsigned char *in = src;
	size_t i;

	if (n > (SIZE_MAX - 1) / 2 || dstlen < 2 * n + 1)
		return -1;
	for (i = 0; i < n; i++) {
		dst[2 * i] = digits[in[i] >> 4];
		dst[2 * i + 1] = digits[in[i] & 15];
	}
	dst[2 * n] = '\0';
	return 0;
}

/* Makes room for need bytes in all; 0, or -1 (b->failed set). */
static int
buf_room(struct ddp_buf *b, size_t need)
{
	size_t cap = b->cap ? b->cap : 256;
	char *s;

	if (need <= b->cap)
		return 0;
	while (cap < need) {
		if (cap > SIZE_MAX / 2) {
			b->failed = 1;
			return -1;
		}
		cap *= 2;
	}
	s = realloc(b->s, cap);
	if (!s) {
		b->failed = 1;
		return -1;
	}
	b->s = s;
	b->cap = cap;
	return 0;
}

int
ddp_buf_printf(struct ddp_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->failed)
		return -1;
	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n > SIZE_MAX - b->len - 1) {
		b->failed = 1;
		return -1;
	}
	if (buf_room(b, b->len + (size_t)n + 1) < 0)
		return -1;
	va_start(ap, fmt);
	vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

int
ddp_buf_append(struct ddp_buf *b, const void *data, size_t n)
{
	if (b->failed)
		return -1;
	if (n > SIZE_MAX - b->len - 1) {
		b->failed = 1;
		return -1;
	}
	if (buf_room(b, b->len + n + 1) < 0)
		return -1;
	memcpy(b->s + b->len, data, n);
	b->len += n;
	b->s[b->len] = '\0';
	return 0;
}

char *
ddp_buf_take(struct ddp_buf *b)
{
	char *s;

	if (!b->failed && !b->s)
		ddp_buf_append(b, "", 0);
	if (b->failed) {
		ddp_buf_free(b);
		errno = ENOMEM;
		return NULL;
	}
	s = b->s;
	b->s = NULL;
	b->len = b->cap = 0;
	return s;
}

void
ddp_buf_free(struct ddp_buf *b)
{
	free(b->s);
	b->s = NULL;
	b->len = b->cap = 0;
	b->failed = 0;
}

/* 1 when fd holds output on its way: a pipe's read end with unread
 * bytes, or a TCP socket with bytes its peer has not yet acknowledged. */
static int
holds_output(int fd)
{
	struct stat st;
	int fl, domain = 0, type = 0, bytes = 0;
	socklen_t len = sizeof(domain);

	if (fstat(fd, &st) < 0)
		return 0;
	if (S_ISFIFO(st.st_mode)) {
		fl = fcntl(fd, F_GETFL);
		return fl >= 0 && (fl & O_ACCMODE) == O_RDONLY &&
		       ioctl(fd, FIONREAD, &bytes) == 0 && bytes > 0;
	}
	if (!S_ISSOCK(st.st_mode) ||
	    getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) < 0 ||
	    (domain != AF_INET && domain != AF_INET6))
		return 0;
	len = sizeof(type);
	return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 &&
	       type == SOCK_STREAM && ioctl(fd, SIOCOUTQ, &bytes) == 0 &&
	       bytes > 0;
}

/* 1 when some descriptor of this process, but skip's, holds output; 0
 * when none; -1 when /proc/self/fd cannot be read. */
static int
some_output_held(const int *skip, size_t nskip)
{
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *e;
	long fd;
	size_t i;
	int found = 0;

	if (!dir)
		return -1;
	while (!found && (e = readdir(dir))) {
		if (ddp_parse_long(e->d_name, 0, INT32_MAX, &fd) < 0 ||
		    fd == dirfd(dir))
			continue;
		for (i = 0; i < nskip && skip[i] != fd; i++)
			;
		found = i == nskip && holds_output((int)fd);
	}
	closedir(dir);
	return found;
}

int
ddp_wait_output_sent(const int *skip, size_t nskip, double deadline)
{
	int held, clear = 0;

	/* Nothing signals bytes read or acknowledged: look every 2 ms (the
	 * readers are poll loops that act at once) until two looks in a row
	 * find nothing, so that a reader that has just taken bytes from a
	 * pipe has had the time to send them on. */
	for (;;) {
		held = some_output_held(skip, nskip);
		if (held < 0)
			return -1;
		clear = held ? 0 : clear + 1;
		if (clear == 2)
			return 0;
		if (held && ddp_now() >= deadline) {
			errno = ETIMEDOUT;
			return -1;
		}
		ddp_sleep_until(ddp_now() + 0.002);
	}
}
