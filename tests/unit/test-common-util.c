/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of the strict parsing and formatting helpers. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ddp_net.h"
#include "ddp_util.h"
#include "tap.h"

static void
test_clock_close_hex(void)
{
	const unsigned char bytes[] = {0x00, 0x0f, 0xa5, 0xff};
	char hex[9] = "xxxxxxxx";
	double t0 = ddp_now(), t1;
	int p[2] = {-1, -1};

	ddp_sleep_until(t0 + 0.01);
	t1 = ddp_now();
	tap_ok(t0 > 0 && t1 >= t0 + 0.01 && t1 < t0 + 5,
	       "ddp_now counts seconds and ddp_sleep_until waits for it");

	tap_ok(pipe(p) == 0, "pipe");
	errno = EINTR;
	ddp_close(&p[0]);
	tap_ok(p[0] == -1 && errno == EINTR, "ddp_close resets the fd and "
					     "keeps errno");
	ddp_close(&p[0]);
	tap_ok(p[0] == -1 && errno == EINTR, "ddp_close of -1 does nothing");
	ddp_close(&p[1]);

	tap_ok(ddp_hex(hex, sizeof(hex), bytes, sizeof(bytes)) == 0 &&
		       strcmp(hex, "000fa5ff") == 0,
	       "ddp_hex writes lowercase digits and a NUL");
	memcpy(hex, "xxxxxxxx", 9);
	tap_ok(ddp_hex(hex, 8, bytes, sizeof(bytes)) < 0 &&
		       strcmp(hex, "xxxxxxxx") == 0,
	       "ddp_hex refuses a short buffer and leaves it untouched");
	tap_ok(ddp_hex(hex, 1, bytes, 0) == 0 && hex[0] == '\0',
	       "ddp_hex of nothing is the empty string");
}

static void
test_fmt_cat(void)
{
	char buf[8] = "";

	tap_ok(ddp_fmt_cat(buf, sizeof(buf), "%s%s", buf[0] ? "," : "", "ab") ==
			       0 &&
		       ddp_fmt_cat(buf, sizeof(buf), "%s%s", buf[0] ? "," : "",
				   "cd") == 0 &&
		       strcmp(buf, "ab,cd") == 0,
	       "ddp_fmt_cat appends at the end of the string");
	tap_ok(ddp_fmt_cat(buf, sizeof(buf), ",%s", "efg") < 0 &&
		       strcmp(buf, "ab,cd,e") == 0,
	       "ddp_fmt_cat refuses what does not fit and keeps the NUL");
	tap_ok(ddp_fmt_cat(buf, sizeof(buf), "x") < 0 &&
		       strcmp(buf, "ab,cd,e") == 0,
	       "ddp_fmt_cat on a full buffer fails");
	tap_ok(ddp_fmt_cat(buf, 0, "x") < 0, "ddp_fmt_cat of size 0 fails");
}

static void
test_buf(void)
{
	struct ddp_buf b = {0};
	char *s;
	int i, ok = 1;

	for (i = 0; i < 1000; i++)
		ok &= ddp_buf_printf(&b, "%d,", i % 10) == 0;
	ok &= ddp_buf_append(&b, "end", 3) == 0;
	tap_ok(ok && b.len == 2003 && strlen(b.s) == 2003 &&
		       strncmp(b.s, "0,1,2,", 6) == 0 &&
		       strcmp(b.s + 2000, "end") == 0,
	       "ddp_buf grows as text is appended");
	s = ddp_buf_take(&b);
	tap_ok(s && strlen(s) == 2003 && !b.s && b.len == 0,
	       "ddp_buf_take hands the text over and empties the buffer");
	free(s);
	s = ddp_buf_take(&b);
	tap_ok(s && s[0] == '\0', "ddp_buf_take of nothing is \"\"");
	free(s);

	ddp_buf_printf(&b, "kept");
	b.failed = 1; /* as after running out of memory */
	tap_ok(ddp_buf_printf(&b, "lost") < 0 &&
		       ddp_buf_append(&b, "lost", 4) < 0 &&
		       strcmp(b.s, "kept") == 0,
	       "after a failure later appends do nothing");
	tap_ok(!ddp_buf_take(&b) && !b.s && !b.failed,
	       "ddp_buf_take reports the failure and frees the text");
	ddp_buf_free(&b);
}

/* ddp_wait_output_sent: a pipe with unread bytes holds it until a reader
 * takes them; skipped pipes and write ends never do. */
static void
test_wait_pipes_read(void)
{
	int data[2] = {-1, -1}, go[2] = {-1, -1}, st = -1;
	char c = 'x', buf[4];
	pid_t reader;

	tap_ok(ddp_wait_output_sent(NULL, 0, ddp_now()) == 0,
	       "ddp_wait_output_sent: no unread pipe, no wait");
	if (pipe(data) < 0 || pipe(go) < 0 || write(data[1], "abc", 3) != 3) {
		tap_ok(0, "pipes for ddp_wait_output_sent");
		return;
	}
	tap_ok(ddp_wait_output_sent(NULL, 0, ddp_now() + 0.05) < 0 &&
		       errno == ETIMEDOUT,
	       "a pipe holding 3 unread bytes: ETIMEDOUT at the deadline");
	tap_ok(ddp_wait_output_sent(&data[0], 1, ddp_now() + 0.05) == 0,
	       "the same pipe skipped: no wait");
	reader = fork();
	if (reader == 0) {
		ddp_close(&go[1]);
		/* Reads the bytes once the parent waits (its byte on go). */
		_exit(read(go[0], &c, 1) == 1 && read(data[0], buf, 3) == 3
			      ? 0
			      : 1);
	}
	ddp_close(&go[0]);
	tap_ok(reader > 0 && write(go[1], &c, 1) == 1 &&
		       ddp_wait_output_sent(NULL, 0, ddp_now() + 30) == 0,
	       "another process reads the bytes: the wait ends");
	tap_ok(reader > 0 && waitpid(reader, &st, 0) == reader && st == 0,
	       "the reader read all 3 bytes");
	ddp_close(&data[0]);
	ddp_close(&data[1]);
	/* A byte left in a pipe whose read end is closed: the write end
	 * that remains is not a reader's. */
	tap_ok(pipe(data) == 0 && write(data[1], &c, 1) == 1 &&
		       (ddp_close(&data[0]), 1) &&
		       ddp_wait_output_sent(NULL, 0, ddp_now() + 0.05) == 0,
	       "a write end alone never holds the wait");
	ddp_close(&data[1]);
	ddp_close(&go[1]);
}

/* ddp_wait_output_sent: a TCP socket whose peer has not taken its bytes
 * (its receive window full) holds the wait until the peer reads them. */
static void
test_wait_socket_sent(void)
{
	char buf[65536], why[256];
	int lfd, port = 0, cfd = -1, sfd = -1, st = -1;
	size_t sent = 0;
	ssize_t n;
	pid_t reader;

	memset(buf, 'y', sizeof(buf));
	lfd = ddp_net_listen(0, &port);
	if (lfd >= 0)
		cfd = ddp_net_connect_once("127.0.0.1", port, ddp_now() + 10,
					   why, sizeof(why));
	if (cfd >= 0 && ddp_net_wait(lfd, POLLIN, ddp_now() + 10) > 0)
		sfd = accept(lfd, NULL, NULL);
	if (sfd < 0) {
		tap_ok(0, "a loopback connection for ddp_wait_output_sent");
		goto out;
	}
	/* Until the kernel takes no more: the peer reads nothing. */
	while ((n = write(cfd, buf, sizeof(buf))) > 0)
		sent += (size_t)n;
	tap_ok(sent > 0 &&
		       ddp_wait_output_sent(&sfd, 1, ddp_now() + 0.05) < 0 &&
		       errno == ETIMEDOUT,
	       "a socket with %zu bytes its peer has not read: ETIMEDOUT",
	       sent);
	reader = fork();
	if (reader == 0) {
		size_t got = 0;

		while (got < sent &&
		       ddp_net_wait(sfd, POLLIN, ddp_now() + 30) > 0 &&
		       (n = read(sfd, buf, sizeof(buf))) > 0)
			got += (size_t)n;
		_exit(got == sent ? 0 : 1);
	}
	tap_ok(reader > 0 && ddp_wait_output_sent(&sfd, 1, ddp_now() + 30) == 0,
	       "the peer reads them all: the wait ends");
	tap_ok(reader > 0 && waitpid(reader, &st, 0) == reader && st == 0,
	       "the peer read every byte");
out:
	ddp_close(&sfd);
	ddp_close(&cfd);
	ddp_close(&lfd);
}

/* ddp_write_replace: the whole new content, mode 0600, no temporary
 * file left, and a refusal that names the file. */
static void
test_write_replace(void)
{
	char dir[] = "/tmp/test-util-XXXXXX", path[PATH_MAX],
	     text[PATH_MAX + 32], err[DDP_ERR_LEN];
	struct stat st;
	mode_t old = umask(0);

	if (!mkdtemp(dir)) {
		tap_ok(0, "mkdtemp: %s", strerror(errno));
		umask(old);
		return;
	}
	snprintf(path, sizeof(path), "%s/end", dir);
	tap_ok(ddp_write_replace(path, "100\n", 4, err, sizeof(err)) == 0 &&
		       ddp_write_replace(path, "200\n", 4, err, sizeof(err)) ==
			       0 &&
		       ddp_read_text(path, text, sizeof(text)) == 4 &&
		       !strcmp(text, "200\n") && stat(path, &st) == 0 &&
		       (st.st_mode & 07777) == 0600,
	       "ddp_write_replace: the new content, mode 0600 whatever the "
	       "umask");
	snprintf(text, sizeof(text), "%s.tmp.%ld", path, (long)getpid());
	tap_ok(access(text, F_OK) < 0, "no temporary file left");
	snprintf(path, sizeof(path), "%s/no/such/end", dir);
	tap_ok(ddp_write_replace(path, "1\n", 2, err, sizeof(err)) < 0 &&
		       strstr(err, "no/such/end.tmp.") &&
		       strstr(err, "No such file"),
	       "a directory that is not there: refused, naming the file (%s)",
	       err);
	snprintf(path, sizeof(path), "%s/end", dir);
	unlink(path);
	rmdir(dir);
	umask(old);
}

int
main(void)
{
	long v = 42;
	const char *end = NULL;
	char buf[8];

	tap_ok(ddp_parse_long("123", 0, 1000, &v) == 0 && v == 123,
	       "plain number parses");
	tap_ok(ddp_parse_long("-5", -10, 10, &v) == 0 && v == -5,
	       "negative number parses");
	v = 7;
	tap_ok(ddp_parse_long("12x", 0, 100, &v) < 0 && v == 7,
	       "trailing garbage is refused and the output kept");
	tap_ok(ddp_parse_long("", 0, 100, &v) < 0, "empty string refused");
	tap_ok(ddp_parse_long(NULL, 0, 100, &v) < 0, "NULL refused");
	tap_ok(ddp_parse_long(" 1", 0, 100, &v) < 0, "leading space refused");
	tap_ok(ddp_parse_long("101", 0, 100, &v) < 0, "above range refused");
	tap_ok(ddp_parse_long("99999999999999999999", 0, LONG_MAX, &v) < 0,
	       "overflow refused");
	tap_ok(ddp_parse_long("-", -1, 1, &v) < 0, "lone sign refused");
	tap_ok(ddp_parse_long_prefix("2(x3)", 0, 9, &v, &end) == 0 && v == 2 &&
		       strcmp(end, "(x3)") == 0,
	       "prefix parse stops at the first non-digit");
	tap_ok(ddp_fmt(buf, sizeof(buf), "%s", "1234567") == 0 &&
		       strcmp(buf, "1234567") == 0,
	       "formatting that fits succeeds");
	tap_ok(ddp_fmt(buf, sizeof(buf), "%s", "12345678") < 0,
	       "formatting that would truncate fails");
	test_clock_close_hex();
	test_fmt_cat();
	test_write_replace();
	test_buf();
	test_wait_pipes_read();
	test_wait_socket_sent();
	return tap_done();
}
