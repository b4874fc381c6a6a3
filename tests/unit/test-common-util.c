/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of the strict parsing and formatting helpers. */
#include <limits.h>
#include <string.h>

#include "ddp_util.h"
#include "tap.h"

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
	return tap_done();
}
