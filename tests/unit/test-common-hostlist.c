/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of the strict hostlist parser: expansion, padding, products,
 * limits and the inputs it must refuse. */
#include <string.h>

#include "hostlist.h"
#include "tap.h"

static char joined[4096];

/* Expands s and joins the names with spaces into joined ("ERR" on error). */
static const char *
expand(const char *s, size_t max)
{
	struct ddp_hostlist hl = {0};
	char err[256];
	size_t i, len = 0;

	if (ddp_hostlist_parse(s, max, &hl, err, sizeof(err)) < 0)
		return "ERR";
	joined[0] = '\0';
	for (i = 0; i < hl.n; i++) {
		size_t l = strlen(hl.hosts[i]);

		if (len + l + 2 >= sizeof(joined))
			break;
		if (i)
			joined[len++] = ' ';
		memcpy(joined + len, hl.hosts[i], l + 1);
		len += l;
	}
	ddp_hostlist_free(&hl);
	return joined;
}

/* Formats the expansion of s back into the short form ("ERR" on error). */
static const char *
reformat(const char *s, size_t size)
{
	struct ddp_hostlist hl = {0};
	char err[256];
	int rc;

	if (ddp_hostlist_parse(s, 1000, &hl, err, sizeof(err)) < 0)
		return "ERR";
	if (size > sizeof(joined))
		size = sizeof(joined);
	rc = ddp_hostlist_format(&hl, joined, size);
	ddp_hostlist_free(&hl);
	return rc < 0 ? "ERR" : joined;
}

int
main(void)
{
	char buf[DDP_HOSTNAME_MAX + 1], err[256];
	struct ddp_hostlist hl = {0};
	static const char *bad[] = {
		"",	  ",",	     "a,",    ",a",	 "a,,b",
		"a[",	  "a]",	     "a[]",   "a[1-]",	 "a[-1]",
		"a[3-1]", "a[1,]",   "a[,1]", "a[[1]]",	 "a b",
		"[1-2]",  "a[1-2",   "a[x]",  "a[+1]",	 "a[1--2]",
		"a;b",	  "a[1-2]]", "a/b",   "a[1-2][", "\xff",
	};
	size_t i;

	TAP_STREQ(expand("node1", 100), "node1", "single host");
	TAP_STREQ(expand("a,b,c", 100), "a b c", "plain list");
	TAP_STREQ(expand("gpu[1-3]", 100), "gpu1 gpu2 gpu3", "simple range");
	TAP_STREQ(expand("n[08-11]", 100), "n08 n09 n10 n11",
		  "zero padding follows the low bound");
	TAP_STREQ(expand("n[1-2,5],login", 100), "n1 n2 n5 login",
		  "ranges and a plain host");
	TAP_STREQ(expand("linux[1,2]", 100), "linux1 linux2",
		  "comma inside brackets is not a host separator");
	TAP_STREQ(expand("r[1-2]n[3-4]", 100), "r1n3 r1n4 r2n3 r2n4",
		  "two bracket groups expand as a product");
	TAP_STREQ(expand("a-b.c_d[9-10]-ib", 100), "a-b.c_d9-ib a-b.c_d10-ib",
		  "dashes, dots and suffixes");
	TAP_STREQ(expand("n[0-4]", 4), "ERR", "expansion beyond the limit");
	TAP_STREQ(expand("n[0-999999999]", 100000), "ERR",
		  "huge range refused without allocating");
	TAP_STREQ(expand("n[0-3],m[0-3]", 6), "ERR",
		  "limit counts across items");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		TAP_STREQ(expand(bad[i], 100), "ERR", bad[i]);
	TAP_STREQ(reformat("node1,node2,node4,node5", 100), "node[1-2,4-5]",
		  "format: runs become ranges");
	TAP_STREQ(reformat("n[08-11],n13", 100), "n[08-11,13]",
		  "format: padding kept");
	TAP_STREQ(reformat("n9,n10,n11", 100), "n[9-11]",
		  "format: a range across a digit count");
	TAP_STREQ(reformat("n08,n9,n010", 100), "n[08,9,010]",
		  "format: numbers a range would pad otherwise stay apart");
	TAP_STREQ(reformat("login,gpu3,gpu4,a-b.c_d9-ib", 100),
		  "login,gpu[3-4],a-b.c_d9-ib",
		  "format: names without a final number stay as they are");
	TAP_STREQ(reformat("r[1-2]n[3-4]", 100), "r1n[3-4],r2n[3-4]",
		  "format: a product comes back one prefix at a time");
	TAP_STREQ(reformat("gpu3", 100), "gpu3", "format: one name");
	TAP_STREQ(reformat("n[1-3]", 6), "ERR", "format: cut text refused");
	tap_ok(ddp_hostlist_format(&hl, buf, sizeof(buf)) == 0 && !buf[0],
	       "format: an empty list is empty text");
	tap_ok(ddp_hostlist_parse("a[3-1]", 10, &hl, err, sizeof(err)) < 0 &&
		       strstr(err, "reversed") && hl.n == 0 && !hl.hosts,
	       "error names the problem and leaves the list empty");
	tap_ok(ddp_hostlist_parse(NULL, 10, &hl, err, sizeof(err)) < 0,
	       "NULL refused");
	tap_ok(ddp_hostlist_first("gpu[07-12],x", buf, sizeof(buf)) == 0 &&
		       strcmp(buf, "gpu07") == 0,
	       "first host without full expansion");
	tap_ok(ddp_hostlist_first("n[0-999999999]", buf, sizeof(buf)) == 0 &&
		       strcmp(buf, "n0") == 0,
	       "first host of a huge list");
	tap_ok(ddp_hostlist_first("n[1-2", buf, sizeof(buf)) < 0,
	       "first host of a bad list fails");
	tap_ok(ddp_hostlist_first("abcdef", buf, 4) < 0,
	       "first host that does not fit fails");
	ddp_hostlist_free(NULL);
	tap_ok(1, "free tolerates NULL");
	return tap_done();
}
