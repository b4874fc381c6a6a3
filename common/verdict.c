/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The record of ddp-check verdicts a node keeps, and the drain rule (see
 * verdict.h).
 */
#include "verdict.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ddp_util.h"
#include "jobdir.h"

/* What a field's text may be. */
enum field_kind {
	FIELD_HOST,   /* [A-Za-z0-9._-], not starting with '-' or '.' */
	FIELD_TOKEN,  /* [a-z0-9-] */
	FIELD_UNIT,   /* a token, or "-" */
	FIELD_NUMBER, /* a finite decimal number, or "-" */
	FIELD_ID,     /* [A-Za-z0-9_.+-]: a job or step id */
	FIELD_UINT,   /* decimal digits: uid, time */
};

struct field {
	const char *key;
	enum field_kind kind;
	size_t offset, size; /* into struct ddp_verdict; size 0: a number */
	int user_part;	     /* in ddp-check's line form */
};

#define STR(f) \
	offsetof(struct ddp_verdict, f), sizeof(((struct ddp_verdict *)0)->f)
#define NUM(f) offsetof(struct ddp_verdict, f), 0

/* In record order: the order ddp_verdict_format_record writes. */
static const struct field fields[] = {
	{"time", FIELD_UINT, NUM(time), 0},
	{"job", FIELD_ID, STR(job), 0},
	{"step", FIELD_ID, STR(step), 0},
	{"uid", FIELD_UINT, NUM(uid), 0},
	{"node", FIELD_HOST, STR(node), 1},
	{"check", FIELD_TOKEN, STR(check), 1},
	{"value", FIELD_NUMBER, STR(value), 1},
	{"median", FIELD_NUMBER, STR(median), 1},
	{"unit", FIELD_UNIT, STR(unit), 1},
};

#undef STR
#undef NUM

#define NFIELDS (sizeof(fields) / sizeof(fields[0]))
#define RECORD_PREFIX "v1 "

/* Which characters a field's text may hold, besides its extra ones. */
#define CH_LOWER 1u
#define CH_UPPER 2u
#define CH_DIGIT 4u

static int
all_chars(const char *s, size_t len, unsigned classes, const char *extra)
{
	size_t i;

	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (!((classes & CH_LOWER && islower(c)) ||
		      (classes & CH_UPPER && isupper(c)) ||
		      (classes & CH_DIGIT && isdigit(c)) ||
		      (c && strchr(extra, c))))
			return 0;
	}
	return 1;
}

/* 1 when the len bytes at s are valid text for kind. */
static int
valid_text(enum field_kind kind, const char *s, size_t len)
{
	const unsigned alnum = CH_LOWER | CH_UPPER | CH_DIGIT;
	char num[32], *end = NULL;
	double d;

	if (len == 0)
		return 0;
	switch (kind) {
	case FIELD_HOST:
		return s[0] != '-' && s[0] != '.' &&
		       all_chars(s, len, alnum, "._-");
	case FIELD_TOKEN:
		return all_chars(s, len, CH_LOWER | CH_DIGIT, "-");
	case FIELD_UNIT:
		return all_chars(s, len, CH_LOWER | CH_DIGIT, "-");
	case FIELD_NUMBER:
		if (len == 1 && s[0] == '-')
			return 1;
		/* Decimal only: no hex floats, inf or nan. */
		if (len >= sizeof(num) || !all_chars(s, len, CH_DIGIT, ".eE+-"))
			return 0;
		memcpy(num, s, len);
		num[len] = '\0';
		errno = 0;
		d = strtod(num, &end);
		return end == num + len && errno == 0 && isfinite(d);
	case FIELD_ID:
		return all_chars(s, len, alnum, "_.+-");
	case FIELD_UINT:
		return len < 20 && all_chars(s, len, CH_DIGIT, "");
	}
	return 0;
}

/* Stores the len bytes at s, valid text for f, into v. */
static int
store(const struct field *f, const char *s, size_t len, struct ddp_verdict *v)
{
	char num[24];
	long n;

	if (f->size) {
		if (len >= f->size)
			return -1;
		memcpy((char *)v + f->offset, s, len);
		((char *)v + f->offset)[len] = '\0';
		return 0;
	}
	memcpy(num, s, len); /* valid_text: len < 20 digits */
	num[len] = '\0';
	if (f->offset == offsetof(struct ddp_verdict, uid)) {
		if (ddp_parse_long(num, 0, 0xffffffffL, &n) < 0)
			return -1;
		v->uid = (unsigned long)n;
	} else {
		if (ddp_parse_long(num, 0, LONG_MAX, &n) < 0)
			return -1;
		v->time = n;
	}
	return 0;
}

static const struct field *
find_field(const char *key, size_t len)
{
	size_t i;

	for (i = 0; i < NFIELDS; i++)
		if (strlen(fields[i].key) == len &&
		    !memcmp(fields[i].key, key, len))
			return &fields[i];
	return NULL;
}

/* Shows up to 32 bytes of s, unprintable ones as '?', for a message. */
static void
shown(const char *s, size_t len, char *out, size_t outlen)
{
	size_t i, n = 0;

	for (i = 0; i < len && i < 32 && n + 4 < outlen; i++)
		out[n++] = isprint((unsigned char)s[i]) ? s[i] : '?';
	if (i < len && n + 4 < outlen) {
		memcpy(out + n, "...", 3);
		n += 3;
	}
	out[n] = '\0';
}

/*
 * Parses "key=value key=value ..." at line: every field with
 * user_part == want_user (all of them when want_user is -1) exactly once.
 */
static int
parse_fields(const char *line, int want_user, size_t max, const char *what,
	     struct ddp_verdict *v, char *err, size_t errlen)
{
	size_t len = strlen(line), i, need = 0, seen = 0;
	unsigned long long have = 0;
	const char *p = line, *end;
	char show[48];

	memset(v, 0, sizeof(*v));
	if (len && line[len - 1] == '\n')
		len--;
	if (len + 1 > max)
		return ddp_errf(err, errlen, "%s longer than %zu bytes", what,
				max - 1);
	end = line + len;
	if (len == 0)
		return ddp_errf(err, errlen, "empty %s", what);
	for (i = 0; i < NFIELDS; i++)
		if (want_user < 0 || fields[i].user_part == want_user)
			need++;
	while (p < end) {
		const char *sp = memchr(p, ' ', (size_t)(end - p));
		const char *tok_end = sp ? sp : end;
		const char *eq = memchr(p, '=', (size_t)(tok_end - p));
		const struct field *f;
		size_t bit, vlen;

		if (!eq) {
			shown(p, (size_t)(tok_end - p), show, sizeof(show));
			return ddp_errf(err, errlen,
					"%s: '%s' is not key=value", what,
					show);
		}
		f = find_field(p, (size_t)(eq - p));
		if (!f || (want_user >= 0 && f->user_part != want_user)) {
			shown(p, (size_t)(eq - p), show, sizeof(show));
			return ddp_errf(err, errlen, "%s: unknown key '%s'",
					what, show);
		}
		bit = (size_t)(f - fields);
		if (have & (1ULL << bit))
			return ddp_errf(err, errlen, "%s: key %s repeated",
					what, f->key);
		have |= 1ULL << bit;
		vlen = (size_t)(tok_end - eq - 1);
		if (f->size && vlen >= f->size)
			return ddp_errf(err, errlen,
					"%s: %s longer than %zu characters",
					what, f->key, f->size - 1);
		if (!valid_text(f->kind, eq + 1, vlen) ||
		    store(f, eq + 1, vlen, v) < 0) {
			shown(eq + 1, vlen, show, sizeof(show));
			return ddp_errf(err, errlen, "%s: invalid %s '%s'",
					what, f->key, show);
		}
		seen++;
		if (!sp)
			break;
		p = sp + 1;
		if (p == end)
			return ddp_errf(err, errlen, "%s: trailing space",
					what);
	}
	if (seen != need) {
		for (i = 0; i < NFIELDS; i++)
			if ((want_user < 0 ||
			     fields[i].user_part == want_user) &&
			    !(have & (1ULL << i)))
				break;
		return ddp_errf(err, errlen, "%s: key %s missing", what,
				i < NFIELDS ? fields[i].key : "?");
	}
	return 0;
}

int
ddp_verdict_parse(const char *line, struct ddp_verdict *v, char *err,
		  size_t errlen)
{
	struct ddp_verdict tmp;

	if (errlen)
		err[0] = '\0';
	if (parse_fields(line, 1, DDP_VERDICT_LINE_MAX, "verdict line", &tmp,
			 err, errlen) < 0)
		return -1;
	*v = tmp;
	return 0;
}

int
ddp_verdict_format(const struct ddp_verdict *v, char *buf, size_t len)
{
	return ddp_fmt(buf, len,
		       "node=%s check=%s value=%s median=%s unit=%s\n", v->node,
		       v->check, v->value, v->median, v->unit);
}

/* Counts a line ddp_verdict_scan skips; the first one's reason is kept. */
static void
refuse_line(size_t *bad, char *bad_why, size_t why_len, const char *why)
{
	if (!(*bad)++ && why_len)
		ddp_fmt(bad_why, why_len, "%s", why);
}

void
ddp_verdict_scan(const char *text, size_t len, ddp_verdict_fn *each, void *arg,
		 size_t *bad, char *bad_why, size_t why_len)
{
	struct ddp_verdict v;
	char line[DDP_VERDICT_LINE_MAX + 1], err[128];
	const char *p = text, *end = text + len, *nl;
	size_t n, nbad = 0;

	if (why_len)
		bad_why[0] = '\0';
	while (p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		n = (size_t)((nl ? nl : end) - p);
		if (n >= sizeof(line)) {
			refuse_line(&nbad, bad_why, why_len,
				    "a line longer than DDP_VERDICT_LINE_MAX");
		} else if (n > 0) {
			memcpy(line, p, n);
			line[n] = '\0';
			if (strlen(line) != n)
				refuse_line(&nbad, bad_why, why_len,
					    "a NUL byte in a line");
			else if (ddp_verdict_parse(line, &v, err, sizeof(err)) <
				 0)
				refuse_line(&nbad, bad_why, why_len, err);
			else if (each)
				each(arg, &v);
		}
		p += n + (nl ? 1 : 0);
	}
	if (bad)
		*bad = nbad;
}

int
ddp_verdict_parse_record(const char *line, struct ddp_verdict *v, char *err,
			 size_t errlen)
{
	struct ddp_verdict tmp;

	if (errlen)
		err[0] = '\0';
	if (strncmp(line, RECORD_PREFIX, strlen(RECORD_PREFIX)) != 0)
		return ddp_errf(err, errlen,
				"verdict record: does not start with '%s'",
				RECORD_PREFIX);
	if (parse_fields(line + strlen(RECORD_PREFIX), -1,
			 DDP_VERDICT_RECORD_MAX - strlen(RECORD_PREFIX),
			 "verdict record", &tmp, err, errlen) < 0)
		return -1;
	*v = tmp;
	return 0;
}

int
ddp_verdict_format_record(const struct ddp_verdict *v, char *buf, size_t len,
			  char *err, size_t errlen)
{
	size_t i;

	if (errlen)
		err[0] = '\0';
	for (i = 0; i < NFIELDS; i++) {
		const struct field *f = &fields[i];
		const char *s = (const char *)v + f->offset;
		size_t n;

		if (!f->size)
			continue;
		n = strnlen(s, f->size);
		if (n >= f->size || !valid_text(f->kind, s, n)) {
			char show[48];

			shown(s, n, show, sizeof(show));
			return ddp_errf(err, errlen, "verdict: invalid %s '%s'",
					f->key, show);
		}
	}
	if (v->time < 0 || v->uid > 0xffffffffUL)
		return ddp_errf(err, errlen, "verdict: invalid time or uid");
	if (ddp_fmt(buf, len,
		    RECORD_PREFIX "time=%lld job=%s step=%s uid=%lu node=%s "
				  "check=%s value=%s median=%s unit=%s\n",
		    v->time, v->job, v->step, v->uid, v->node, v->check,
		    v->value, v->median, v->unit) < 0)
		return ddp_errf(err, errlen, "verdict: record does not fit");
	return 0;
}

/*
 * Keeps only the newer half of the records of fd (locked, size bytes):
 * the bytes after the first newline past the middle. In place, so that
 * every appender, which locks the same inode, sees the result.
 */
static int
keep_newer_half(int fd, off_t size)
{
	off_t from = size / 2;
	char *buf = NULL, *nl;
	ssize_t n;
	size_t have = 0, want = (size_t)(size - from);
	int rv = -1;

	buf = malloc(want);
	if (!buf)
		goto out;
	while (have < want) {
		n = pread(fd, buf + have, want - have, from + (off_t)have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			goto out;
		have += (size_t)n;
	}
	nl = memchr(buf, '\n', have);
	nl = nl ? nl + 1 : buf + have;
	if (ftruncate(fd, 0) < 0 ||
	    ddp_write_all(fd, nl, (size_t)(buf + have - nl)) < 0)
		goto out;
	rv = 0;
out:
	free(buf);
	return rv;
}

/* The file must be root's own (the caller's euid), regular, and writable
 * by nobody else: a record others can write proves nothing. */
static int
check_file(int fd, const char *path, char *err, size_t errlen)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return ddp_errf(err, errlen, "%s: %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & (S_IWGRP | S_IWOTH)))
		return ddp_errf(err, errlen,
				"%s: not a regular file of uid %lu writable "
				"by its owner only (uid %lu, mode %04o): "
				"remove it; the next verdict recreates it",
				path, (unsigned long)geteuid(),
				(unsigned long)st.st_uid,
				(unsigned)(st.st_mode & DDP_MODE_BITS));
	return 0;
}

int
ddp_verdict_append(const char *state_dir, const struct ddp_verdict *v,
		   char *err, size_t errlen)
{
	char record[DDP_VERDICT_RECORD_MAX], path[4096];
	struct stat st;
	int dfd = -1, fd = -1, squatted, rv = -1;

	if (errlen)
		err[0] = '\0';
	if (ddp_verdict_format_record(v, record, sizeof(record), err, errlen) <
	    0)
		goto out;
	if (ddp_fmt(path, sizeof(path), "%s/%s", state_dir, DDP_VERDICT_FILE) <
	    0) {
		ddp_errf(err, errlen, "state_dir %.200s: path too long",
			 state_dir);
		goto out;
	}
	dfd = ddp_jobdir_open_root(state_dir, "state dir", &squatted, err,
				   errlen);
	if (dfd < 0)
		goto out;
	fd = openat(dfd, DDP_VERDICT_FILE,
		    O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC |
			    O_NOCTTY,
		    0600);
	if (fd < 0) {
		ddp_errf(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (check_file(fd, path, err, errlen) < 0)
		goto out;
	if (flock(fd, LOCK_EX) < 0 || fstat(fd, &st) < 0) {
		ddp_errf(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (st.st_size + (off_t)strlen(record) > DDP_VERDICT_FILE_MAX &&
	    keep_newer_half(fd, st.st_size) < 0) {
		ddp_errf(err, errlen, "%s: cannot drop its older records: %s",
			 path, strerror(errno));
		goto out;
	}
	if (ddp_write_all(fd, record, strlen(record)) < 0) {
		ddp_errf(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	rv = 0;
out:
	ddp_close(&fd); /* drops the lock */
	ddp_close(&dfd);
	return rv;
}

void
ddp_verdict_list_free(struct ddp_verdict_list *list)
{
	free(list->v);
	memset(list, 0, sizeof(*list));
}

static int
list_add(struct ddp_verdict_list *list, size_t *cap,
	 const struct ddp_verdict *v)
{
	struct ddp_verdict *grown;

	if (list->n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 64;

		grown = realloc(list->v, ncap * sizeof(*grown));
		if (!grown)
			return -1;
		list->v = grown;
		*cap = ncap;
	}
	list->v[list->n++] = *v;
	return 0;
}

int
ddp_verdict_read_stream(FILE *f, const char *node, long long since,
			struct ddp_verdict_list *out, char *err, size_t errlen)
{
	struct ddp_verdict v;
	char *line = NULL, why[DDP_VERDICT_LINE_MAX];
	size_t cap = 0, vcap = 0;
	ssize_t len;
	int rv = -1;

	if (errlen)
		err[0] = '\0';
	memset(out, 0, sizeof(*out));
	while ((len = getline(&line, &cap, f)) >= 0) {
		/* A NUL inside would cut the line: such a line is damage. */
		if (strlen(line) != (size_t)len ||
		    ddp_verdict_parse_record(line, &v, why, sizeof(why)) < 0) {
			out->skipped++;
			continue;
		}
		if ((node && strcmp(v.node, node) != 0) || v.time < since)
			continue;
		if (list_add(out, &vcap, &v) < 0) {
			ddp_errf(err, errlen, "verdicts: out of memory");
			goto out;
		}
	}
	if (ferror(f)) {
		ddp_errf(err, errlen, "verdicts: read error: %s",
			 strerror(errno));
		goto out;
	}
	rv = 0;
out:
	free(line);
	if (rv < 0)
		ddp_verdict_list_free(out);
	return rv;
}

int
ddp_verdict_read(const char *state_dir, const char *node, long long since,
		 struct ddp_verdict_list *out, char *err, size_t errlen)
{
	char path[4096];
	FILE *f = NULL;
	int fd = -1, rv = -1;

	if (errlen)
		err[0] = '\0';
	memset(out, 0, sizeof(*out));
	if (ddp_fmt(path, sizeof(path), "%s/%s", state_dir, DDP_VERDICT_FILE) <
	    0) {
		ddp_errf(err, errlen, "state_dir %.200s: path too long",
			 state_dir);
		goto out;
	}
	fd = open(path,
		  O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		if (errno == ENOENT) {
			rv = 0;
			goto out;
		}
		ddp_errf(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (check_file(fd, path, err, errlen) < 0)
		goto out;
	if (flock(fd, LOCK_SH) < 0) {
		ddp_errf(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	f = fdopen(fd, "r");
	if (!f) {
		ddp_errf(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	fd = -1;
	rv = ddp_verdict_read_stream(f, node, since, out, err, errlen);
out:
	if (f)
		fclose(f);
	ddp_close(&fd);
	return rv;
}

/*
 * The counts of the records of a node in the window, each indexed by the
 * record's position among them (in[]): the first record with its check and
 * with its uid, and per such first record the distinct jobs of the check,
 * users of the check and jobs of the uid. One allocation of 6 x n.
 */
struct drain_counts {
	size_t *in, *check_of, *user_of, *check_jobs, *check_users, *user_jobs;
};

/* One pass over the pairs: the file holds a few thousand records at most,
 * so quadratic is the bound. */
static void
count_pairs(const struct ddp_verdict_list *list, size_t n,
	    struct drain_counts *c, struct ddp_drain_tally *out)
{
	size_t a, b;

	for (a = 0; a < n; a++) {
		const struct ddp_verdict *r = &list->v[c->in[a]];
		int new_job = 1, new_check_job = 1, new_check_user = 1;

		c->check_of[a] = c->user_of[a] = a;
		for (b = 0; b < a; b++) {
			const struct ddp_verdict *o = &list->v[c->in[b]];
			int same_check = !strcmp(o->check, r->check);
			int same_job = !strcmp(o->job, r->job);

			if (same_check && c->check_of[a] == a)
				c->check_of[a] = c->check_of[b];
			if (o->uid == r->uid && c->user_of[a] == a)
				c->user_of[a] = c->user_of[b];
			new_job &= !same_job;
			new_check_job &= !(same_job && same_check);
			new_check_user &= !(o->uid == r->uid && same_check);
		}
		out->jobs += new_job;
		out->users += c->user_of[a] == a;
		c->user_jobs[c->user_of[a]] += new_job;
		c->check_jobs[c->check_of[a]] += new_check_job;
		c->check_users[c->check_of[a]] += new_check_user;
	}
}

void
ddp_drain_evaluate(const struct ddp_verdict_list *list, const char *node,
		   const struct ddp_drain_rule *rule, long long now,
		   struct ddp_drain_tally *out)
{
	long long since = now - rule->window;
	/* A finding is named only when this many users reported it: one
	 * user can forge any value from their own jobs. */
	size_t witnesses = rule->users < 2 ? 1 : 2;
	size_t cap = list->n ? list->n : 1, n = 0, a, best = 0, most = 0;
	struct drain_counts c;
	size_t *mem = calloc(6 * cap, sizeof(*mem));

	memset(out, 0, sizeof(*out));
	if (!mem)
		return;
	c = (struct drain_counts){mem,		 mem + cap,	mem + 2 * cap,
				  mem + 3 * cap, mem + 4 * cap, mem + 5 * cap};
	for (a = 0; a < list->n; a++)
		if (list->v[a].time >= since &&
		    !strcmp(list->v[a].node, node) &&
		    strcmp(list->v[a].check, DDP_VERDICT_CHECK_RANK_KILLED))
			c.in[n++] = a;
	out->records = n;
	count_pairs(list, n, &c, out);
	for (a = 0; a < n; a++) {
		size_t k = c.check_of[a];

		if (c.user_jobs[a] > most)
			most = c.user_jobs[a];
		/* The newest record of the check most jobs named: ties go
		 * to the newer record. */
		if (c.check_users[k] >= witnesses && c.check_jobs[k] >= best) {
			best = c.check_jobs[k];
			out->named = &list->v[c.in[a]];
		}
	}
	if (n) {
		/* The user with the most jobs counts once: one user's
		 * forged jobs and any other user's one transient failure
		 * are not enough. */
		out->credited = out->jobs - (unsigned)most + 1;
		out->drain = out->credited >= rule->jobs &&
			     out->users >= rule->users && out->named;
	}
	free(mem);
}

/* A unit token as people write it. */
static const char *
unit_text(const char *unit)
{
	static const struct {
		const char *token, *text;
	} units[] = {
		{"gb-per-s", "GB/s"},
		{"mb-per-s", "MB/s"},
		{"gbit-per-s", "Gbit/s"},
		{"percent", "%"},
	};
	size_t i;

	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(unit, units[i].token))
			return units[i].text;
	return unit;
}

int
ddp_verdict_describe(const struct ddp_verdict *v, char *buf, size_t len)
{
	const char *unit = strcmp(v->unit, "-") ? unit_text(v->unit) : "";
	const char *sep = *unit && strcmp(unit, "%") ? " " : "";

	if (!strcmp(v->value, "-"))
		return ddp_fmt(buf, len, "%s", v->check);
	if (!strcmp(v->median, "-"))
		return ddp_fmt(buf, len, "%s %s%s%s", v->check, v->value, sep,
			       unit);
	return ddp_fmt(buf, len, "%s %s%s%s vs median %s%s%s", v->check,
		       v->value, sep, unit, v->median, sep, unit);
}

/* A window as people say it: 24h, 90m, 45s, 7d past a week. */
static int
window_text(long long s, char *buf, size_t len)
{
	if (s >= 7 * 86400 && s % 86400 == 0)
		return ddp_fmt(buf, len, "%lldd", s / 86400);
	if (s % 3600 == 0)
		return ddp_fmt(buf, len, "%lldh", s / 3600);
	if (s % 60 == 0)
		return ddp_fmt(buf, len, "%lldm", s / 60);
	return ddp_fmt(buf, len, "%llds", s);
}

int
ddp_drain_reason(const struct ddp_drain_tally *t, long long window, char *buf,
		 size_t len)
{
	char what[DDP_VERDICT_LINE_MAX], span[32];

	if (len)
		buf[0] = '\0';
	if (!t->named ||
	    ddp_verdict_describe(t->named, what, sizeof(what)) < 0 ||
	    window_text(window, span, sizeof(span)) < 0)
		return -1;
	return ddp_fmt(buf, len, "ddp-check: %s, %u job%s of %u user%s in %s",
		       what, t->jobs, t->jobs == 1 ? "" : "s", t->users,
		       t->users == 1 ? "" : "s", span);
}
