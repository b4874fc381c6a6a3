/* SPDX-License-Identifier: BSD-3-Clause */
/* Strict Slurm hostlist expansion without Slurm: validate the whole list,
 * count it against a limit, then expand each item by mixed-radix index. */
#include "hostlist.h"

#include <ctype.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp_util.h"

#define MAX_SEGS 16
#define MAX_RANGES 256
#define MAX_NUM 999999999L

struct range {
	long lo, hi;
	int width;
};

/* One item: literal text and bracket groups, alternating as written. */
struct seg {
	const char *lit; /* literal text, or NULL for a bracket group */
	size_t litlen;
	struct range *ranges;
	size_t nranges;
	size_t count; /* names this group expands to */
};

struct item {
	struct seg segs[MAX_SEGS];
	size_t nsegs;
	size_t count;
};

static int
is_name_char(char c)
{
	return isalnum((unsigned char)c) || c == '-' || c == '.' || c == '_';
}

static void
item_free(struct item *it)
{
	size_t i;

	for (i = 0; i < it->nsegs; i++)
		free(it->segs[i].ranges);
	memset(it, 0, sizeof(*it));
}

static int
parse_num(const char *s, const char *end, long *v, int *width)
{
	char buf[16];
	size_t len = (size_t)(end - s);

	if (len == 0 || len >= sizeof(buf))
		return -1;
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (buf[0] == '+' || buf[0] == '-')
		return -1;
	if (ddp_parse_long(buf, 0, MAX_NUM, v) < 0)
		return -1;
	*width = (int)len;
	return 0;
}

/* Parses "lo[-hi](,lo[-hi])*" between s and end into seg. */
static int
parse_group(const char *s, const char *end, struct seg *seg, size_t max_hosts,
	    const char **why)
{
	const char *p = s;

	seg->ranges = calloc(MAX_RANGES, sizeof(*seg->ranges));
	if (!seg->ranges) {
		*why = "out of memory";
		return -1;
	}
	seg->count = 0;
	while (p < end) {
		const char *comma = memchr(p, ',', (size_t)(end - p));
		const char *stop = comma ? comma : end;
		const char *dash = memchr(p, '-', (size_t)(stop - p));
		struct range r;
		int wlo, whi;

		if (seg->nranges == MAX_RANGES) {
			*why = "too many ranges in one bracket";
			return -1;
		}
		if (dash) {
			if (parse_num(p, dash, &r.lo, &wlo) < 0 ||
			    parse_num(dash + 1, stop, &r.hi, &whi) < 0) {
				*why = "bad range in brackets";
				return -1;
			}
		} else {
			if (parse_num(p, stop, &r.lo, &wlo) < 0) {
				*why = "bad number in brackets";
				return -1;
			}
			r.hi = r.lo;
		}
		if (r.hi < r.lo) {
			*why = "reversed range in brackets";
			return -1;
		}
		r.width = wlo;
		if ((size_t)(r.hi - r.lo) >= max_hosts ||
		    seg->count + (size_t)(r.hi - r.lo) + 1 > max_hosts) {
			*why = "too many hosts";
			return -1;
		}
		seg->count += (size_t)(r.hi - r.lo) + 1;
		seg->ranges[seg->nranges++] = r;
		if (!comma)
			break;
		p = comma + 1;
		if (p == end) {
			*why = "empty range in brackets";
			return -1;
		}
	}
	if (seg->nranges == 0) {
		*why = "empty brackets";
		return -1;
	}
	return 0;
}

static int
parse_item(const char *s, const char *end, struct item *it, size_t max_hosts,
	   const char **why)
{
	const char *p = s;
	int has_name = 0;

	memset(it, 0, sizeof(*it));
	it->count = 1;
	if (p == end) {
		*why = "empty host name";
		return -1;
	}
	while (p < end) {
		struct seg *seg;

		if (it->nsegs == MAX_SEGS) {
			*why = "too many parts in one host name";
			return -1;
		}
		seg = &it->segs[it->nsegs];
		if (*p == '[') {
			const char *close = memchr(p, ']', (size_t)(end - p));
			const char *open2;

			if (!close) {
				*why = "unbalanced '['";
				return -1;
			}
			open2 = memchr(p + 1, '[', (size_t)(close - p - 1));
			if (open2) {
				*why = "nested '['";
				return -1;
			}
			it->nsegs++;
			if (parse_group(p + 1, close, seg, max_hosts, why) < 0)
				return -1;
			if (it->count > max_hosts / seg->count) {
				*why = "too many hosts";
				return -1;
			}
			it->count *= seg->count;
			p = close + 1;
			continue;
		}
		if (!is_name_char(*p)) {
			*why = *p == ']' ? "unbalanced ']'"
					 : "invalid character in host name";
			return -1;
		}
		seg->lit = p;
		while (p < end && is_name_char(*p))
			p++;
		seg->litlen = (size_t)(p - seg->lit);
		seg->count = 1;
		has_name = 1;
		it->nsegs++;
	}
	if (!has_name) {
		*why = "host name without a prefix";
		return -1;
	}
	return 0;
}

/* Writes name number idx (0 <= idx < it->count) of the item into buf. */
static int
item_name(const struct item *it, size_t idx, char *buf, size_t size)
{
	size_t i, len = 0, div = it->count;

	for (i = 0; i < it->nsegs; i++) {
		const struct seg *seg = &it->segs[i];
		char num[32];
		size_t k, pos, nl;

		if (seg->lit) {
			if (len + seg->litlen >= size)
				return -1;
			memcpy(buf + len, seg->lit, seg->litlen);
			len += seg->litlen;
			continue;
		}
		div /= seg->count;
		pos = (idx / div) % seg->count;
		for (k = 0; k < seg->nranges; k++) {
			size_t n = (size_t)(seg->ranges[k].hi -
					    seg->ranges[k].lo) +
				   1;

			if (pos < n)
				break;
			pos -= n;
		}
		if (ddp_fmt(num, sizeof(num), "%0*ld", seg->ranges[k].width,
			    seg->ranges[k].lo + (long)pos) < 0)
			return -1;
		nl = strlen(num);
		if (len + nl >= size)
			return -1;
		memcpy(buf + len, num, nl);
		len += nl;
	}
	buf[len] = '\0';
	return 0;
}

/* Finds the end of the item starting at s: the next top-level comma. */
static const char *
item_end(const char *s)
{
	int depth = 0;

	for (; *s; s++) {
		if (*s == '[')
			depth++;
		else if (*s == ']')
			depth--;
		else if (*s == ',' && depth == 0)
			break;
	}
	return s;
}

void
ddp_hostlist_free(struct ddp_hostlist *hl)
{
	size_t i;

	if (!hl)
		return;
	for (i = 0; i < hl->n; i++)
		free(hl->hosts[i]);
	free(hl->hosts);
	hl->hosts = NULL;
	hl->n = 0;
}

static void
set_err(char *err, size_t errlen, const char *s, const char *why)
{
	ddp_errf(err, errlen, "invalid hostlist '%.80s': %s", s, why);
}

/* Validates every item and returns the total count (or -1). */
static int
count_all(const char *s, size_t max_hosts, size_t *total, const char **why)
{
	const char *p = s;
	struct item it;

	*total = 0;
	if (!*s) {
		*why = "empty";
		return -1;
	}
	for (;;) {
		const char *end = item_end(p);
		int rc = parse_item(p, end, &it, max_hosts, why);

		if (rc == 0 && it.count > max_hosts - *total) {
			*why = "too many hosts";
			rc = -1;
		}
		if (rc == 0)
			*total += it.count;
		item_free(&it);
		if (rc < 0)
			return -1;
		if (!*end)
			return 0;
		p = end + 1;
	}
}

int
ddp_hostlist_parse(const char *s, size_t max_hosts, struct ddp_hostlist *out,
		   char *err, size_t errlen)
{
	const char *why = "invalid";
	const char *p;
	size_t total = 0, n = 0, k;
	struct item it;
	char name[DDP_HOSTNAME_MAX + 1];
	int rc = -1;

	memset(&it, 0, sizeof(it));
	out->hosts = NULL;
	out->n = 0;
	if (!s) {
		why = "missing";
		goto out;
	}
	if (count_all(s, max_hosts, &total, &why) < 0)
		goto out;
	out->hosts = calloc(total, sizeof(*out->hosts));
	if (!out->hosts) {
		why = "out of memory";
		goto out;
	}
	p = s;
	while (n < total) {
		const char *end = item_end(p);

		if (parse_item(p, end, &it, max_hosts, &why) < 0)
			goto out;
		for (k = 0; k < it.count; k++) {
			if (item_name(&it, k, name, sizeof(name)) < 0) {
				why = "host name too long";
				goto out;
			}
			out->hosts[n] = strdup(name);
			if (!out->hosts[n]) {
				why = "out of memory";
				goto out;
			}
			out->n = ++n;
		}
		item_free(&it);
		p = end + 1;
	}
	rc = 0;
out:
	item_free(&it);
	if (rc < 0) {
		ddp_hostlist_free(out);
		set_err(err, errlen, s ? s : "(null)", why);
	}
	return rc;
}

int
ddp_hostlist_first(const char *s, char *buf, size_t size)
{
	const char *why = "invalid";
	size_t total;
	struct item it;
	int rc;

	if (!s || count_all(s, SIZE_MAX / 2, &total, &why) < 0)
		return -1;
	if (parse_item(s, item_end(s), &it, SIZE_MAX / 2, &why) < 0) {
		item_free(&it);
		return -1;
	}
	rc = item_name(&it, 0, buf, size);
	item_free(&it);
	return rc;
}

/* The length of name's prefix before its final digits: strlen(name) when
 * it does not end in a digit, or when nothing but digits precedes them
 * (a bracket group needs a name character in front). */
static size_t
number_at(const char *name)
{
	size_t len = strlen(name), i = len;

	while (i > 0 && isdigit((unsigned char)name[i - 1]))
		i--;
	return i == 0 || i == len ? len : i;
}

/* Whether text is number n as a range starting at lo (lo_width digits)
 * writes it: the parser pads every number to the low bound's width. */
static int
same_number_text(const char *text, long n, int lo_width)
{
	char want[32];

	if (ddp_fmt(want, sizeof(want), "%0*ld", lo_width, n) < 0)
		return 0;
	return !strcmp(text, want);
}

int
ddp_hostlist_format(const struct ddp_hostlist *hl, char *buf, size_t size)
{
	size_t i = 0;
	int rc = 0;

	if (size)
		buf[0] = '\0';
	while (i < hl->n) {
		const char *name = hl->hosts[i];
		size_t plen = number_at(name), j = i + 1, k;

		if (plen == strlen(name) || strlen(name) - plen > 18) {
			rc |= ddp_fmt_cat(buf, size, "%s%s", i ? "," : "",
					  name);
			i++;
			continue;
		}
		/* The names that follow with the same prefix and a number. */
		while (j < hl->n && number_at(hl->hosts[j]) == plen &&
		       !strncmp(hl->hosts[j], name, plen) &&
		       strlen(hl->hosts[j]) - plen <= 18)
			j++;
		if (j == i + 1) {
			rc |= ddp_fmt_cat(buf, size, "%s%s", i ? "," : "",
					  name);
			i++;
			continue;
		}
		rc |= ddp_fmt_cat(buf, size, "%s%.*s[", i ? "," : "", (int)plen,
				  name);
		for (k = i; k < j;) {
			const char *lo = hl->hosts[k] + plen;
			long n = 0;
			int width = (int)strlen(lo);
			size_t end = k + 1;

			/* At most 18 digits: always a long. */
			ddp_parse_long(lo, 0, LONG_MAX, &n);
			while (end < j &&
			       same_number_text(hl->hosts[end] + plen,
						n + (long)(end - k), width))
				end++;
			if (end - k > 1)
				rc |= ddp_fmt_cat(buf, size, "%s%s-%s",
						  k > i ? "," : "", lo,
						  hl->hosts[end - 1] + plen);
			else
				rc |= ddp_fmt_cat(buf, size, "%s%s",
						  k > i ? "," : "", lo);
			k = end;
		}
		rc |= ddp_fmt_cat(buf, size, "]");
		i = j;
	}
	return rc ? -1 : 0;
}
