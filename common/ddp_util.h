/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Small strict helpers shared by every slurm-ddp part: number parsing with
 * range checks, formatting with truncation checks, the clock. All are
 * reentrant.
 */
#ifndef DDP_UTIL_H
#define DDP_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

/*
 * The size of every error buffer an explanation is written into (the err,
 * errlen pairs of common/, the plugin's and the prolog's reasons, libddp's
 * per-thread last error): one size, so that a reason passed from one part
 * to another is never cut on the way.
 */
#define DDP_ERR_LEN 1024

/* Every permission bit of st_mode, for printing and keeping modes. */
#define DDP_MODE_BITS \
	(S_ISUID | S_ISGID | S_ISVTX | S_IRWXU | S_IRWXG | S_IRWXO)

/*
 * Parses all of s (optional leading '+'/'-', decimal digits only, no
 * surrounding space) as a long in [min, max]. Returns 0 and stores the value
 * in *out, or -1 without touching *out when s is NULL, empty, has trailing
 * characters or is out of range.
 */
int ddp_parse_long(const char *s, long min, long max, long *out);

/*
 * Like ddp_parse_long but parses only a prefix: *end receives the first
 * character after the digits. At least one digit is required.
 */
int ddp_parse_long_prefix(const char *s, long min, long max, long *out,
			  const char **end);

/*
 * snprintf into buf that fails instead of truncating: returns 0, or -1 when
 * the result would not fit (buf then holds a truncated string).
 */
int ddp_fmt(char *buf, size_t size, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * Appends to the string in buf (size is the full size of buf, not what is
 * left): formats at strlen(buf), as ddp_fmt does at buf. Returns 0, or -1
 * when the result would not fit; buf then holds the text cut to size - 1
 * characters, still NUL-terminated, so later appends fail too. A list
 * built with `ddp_fmt_cat(buf, size, "%s%s", buf[0] ? "," : "", item)`
 * needs no offset of its own.
 */
int ddp_fmt_cat(char *buf, size_t size, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * The one error formatter: writes an explanation into the caller's error
 * buffer (err, errlen bytes). Unlike ddp_fmt a long explanation is kept
 * cut, not refused, since a cut reason beats none; errlen 0 writes
 * nothing. Returns -1, so that a failing function can end with
 * `return ddp_errf(err, errlen, ...);`. Reentrant.
 */
int ddp_errf(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* ddp_errf with a va_list (for wrappers with their own varargs). */
int ddp_verrf(char *err, size_t errlen, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));

/*
 * The one hex encoder: writes the 2 * n lowercase hex digits of the n
 * bytes at src and a NUL into dst. Returns 0, or -1 when dstlen is under
 * 2 * n + 1 (dst is then left untouched).
 */
int ddp_hex(char *dst, size_t dstlen, const void *src, size_t n);

/*
 * The one growable text: a NUL-terminated string in s (len characters,
 * cap bytes allocated). Zero-initialise it; free it with ddp_buf_free or
 * hand its text over with ddp_buf_take. An append that fails (out of
 * memory, a bad format) leaves the text as it was and sets failed, and
 * every later append does nothing: the builder may append without
 * checking and look once at the end. After a successful append s is never
 * NULL. Not thread-safe; one buffer belongs to one thread.
 */
struct ddp_buf {
	char *s;
	size_t len;
	size_t cap;
	int failed;
};

/* Appends formatted text. Returns 0, or -1 when this append or an earlier
 * one failed. */
int ddp_buf_printf(struct ddp_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Appends the n bytes at data (then a NUL). Returns as ddp_buf_printf. */
int ddp_buf_append(struct ddp_buf *b, const void *data, size_t n);
/* Hands the text over (the caller frees it; "" when nothing was appended)
 * and empties b. Returns NULL, the text freed, when an append failed or
 * memory ran out. */
char *ddp_buf_take(struct ddp_buf *b);
/* Frees the text and empties b (failed included); NULL-text safe. */
void ddp_buf_free(struct ddp_buf *b);

/*
 * The one closer: closes *fd when it is open (>= 0) and sets it to -1, so
 * that a cleanup path may close what may or may not have been opened, and
 * closing twice is harmless. errno is kept, so that a failure's errno
 * survives the cleanup that follows it; close's own error is dropped (the
 * descriptor is gone either way on Linux).
 */
void ddp_close(int *fd);

/*
 * Waits until this process holds no output on its way, or until deadline
 * (ddp_now() seconds): no pipe it reads from (a read-only FIFO descriptor
 * other than the nskip ones at skip) holds unread bytes, and no TCP socket
 * of it holds bytes its peer has not acknowledged, at two looks in a row.
 * slurmstepd forwards a task's output to srun from its own pipes over TCP,
 * and srun drops what is still on its way once a task of the step dies of
 * SIGKILL: waiting here before a step is ended keeps a failed task's last
 * words. Returns 0 when nothing is held, -1 at the deadline (ETIMEDOUT)
 * or when /proc/self/fd cannot be read. Reentrant; it only looks, never
 * reads.
 */
int ddp_wait_output_sent(const int *skip, size_t nskip, double deadline);

/* Writes all len bytes of buf to fd, retrying short writes and EINTR.
 * Returns 0, or -1 with errno set (a write that wrote nothing: EIO). */
int ddp_write_all(int fd, const void *buf, size_t len);

/*
 * Reads the start of the file at path, at most len - 1 bytes, into buf,
 * NUL-terminated (a kernel counter, a /proc or /sys entry, a small
 * state file). Never blocks on a FIFO or a device (O_NONBLOCK) and reads
 * no more than len - 1 bytes of an endless one. Returns the bytes read,
 * or -1 with errno (buf[0] then '\0' when len > 0).
 */
ssize_t ddp_read_text(const char *path, char *buf, size_t len);

/*
 * Replaces the file at path with len bytes of buf at once: a temporary
 * file beside it (path.tmp.PID, O_NOFOLLOW, mode 0600, owned by the
 * caller), written and fsync'ed, renamed over path, so that a reader sees
 * the whole old file or the whole new one. Returns 0, or -1 with err
 * naming the file and the reason (the temporary file removed).
 */
int ddp_write_replace(const char *path, const void *buf, size_t len, char *err,
		      size_t errlen);

/*
 * The one clock of deadlines and durations: CLOCK_MONOTONIC in seconds.
 * Deadlines everywhere (ddp_net, ddp_guard, the rendezvous, the link test,
 * the helpers' child waits) are values of this clock.
 */
double ddp_now(void);

/* Sleeps until ddp_now() reaches t (at once when it has); a signal may
 * end the sleep early, so callers that must not wake early look again. */
void ddp_sleep_until(double t);

#endif
