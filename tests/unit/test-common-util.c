/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of the strict parsing and formatting helpers. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
	test_buf();
	return tap_done();
}
