/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the verdict record: ddp-check's line form parsed strictly,
 * written and scanned back, records appended to a real file (mode, symlinks,
 * bound) and read back, malformed lines skipped and counted, and the drain
 * rule.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tap.h"
#include "verdict.h"

static char tmpdir[] = "/tmp/test-verdict.XXXXXX";

static const char good[] = "node=node2 check=link-send value=0.21 "
			   "median=1.9 unit=gb-per-s";

static void
parse_refused(const char *line, const char *want)
{
	struct ddp_verdict v;
	char err[256], name[64];
	int rc = ddp_verdict_parse(line, &v, err, sizeof(err));
	size_t i;

	snprintf(name, sizeof(name), "%s", line);
	for (i = 0; name[i]; i++)
		if (name[i] == '\n' || name[i] == '\t')
			name[i] = '~';
	if (!tap_ok(rc < 0 && strstr(err, want), "refused (%s): %s", want,
		    name))
		tap_diag("rc %d err '%s'", rc, err);
}

static void
test_parse(void)
{
	struct ddp_verdict v;
	char err[256], line[1024], host[300];
	int rc;

	rc = ddp_verdict_parse(good, &v, err, sizeof(err));
	tap_ok(rc == 0 && !strcmp(v.node, "node2") &&
		       !strcmp(v.check, "link-send") &&
		       !strcmp(v.value, "0.21") && !strcmp(v.median, "1.9") &&
		       !strcmp(v.unit, "gb-per-s") && v.time == 0 &&
		       v.uid == 0 && !v.job[0] && !v.step[0],
	       "a line of ddp-check parsed; time, job, step, uid left zero");
	tap_ok(ddp_verdict_parse("unit=- median=- value=- check=gpu "
				 "node=gpu-07.cluster\n",
				 &v, err, sizeof(err)) == 0 &&
		       !strcmp(v.node, "gpu-07.cluster") &&
		       !strcmp(v.value, "-") && !strcmp(v.unit, "-"),
	       "keys in any order, '-' for no number, one newline allowed");
	tap_ok(ddp_verdict_parse("node=n1 check=allreduce value=1.25e+09 "
				 "median=-3E-2 unit=ms",
				 &v, err, sizeof(err)) == 0,
	       "exponents and signs in numbers");
	parse_refused("node=node2 check=link-send value=0.21 median=1.9",
		      "key unit missing");
	parse_refused("node=node2 node=node3 check=gpu value=- median=- "
		      "unit=-",
		      "key node repeated");
	parse_refused("node=node2 check=gpu value=- median=- unit=- "
		      "extra=1",
		      "unknown key 'extra'");
	parse_refused("time=1 node=node2 check=gpu value=- median=- unit=-",
		      "unknown key 'time'");
	parse_refused("node=node2 check=gpu value=- median=- unit=- uid=0",
		      "unknown key 'uid'");
	parse_refused("node=-rf check=gpu value=- median=- unit=-",
		      "invalid node");
	parse_refused("node=../etc check=gpu value=- median=- unit=-",
		      "invalid node");
	parse_refused("node=a/b check=gpu value=- median=- unit=-",
		      "invalid node");
	parse_refused("node=n1 check=Link value=- median=- unit=-",
		      "invalid check");
	parse_refused("node=n1 check=gpu value=nan median=- unit=-",
		      "invalid value");
	parse_refused("node=n1 check=gpu value=inf median=- unit=-",
		      "invalid value");
	parse_refused("node=n1 check=gpu value=0x10 median=- unit=-",
		      "invalid value");
	parse_refused("node=n1 check=gpu value=1e999 median=- unit=-",
		      "invalid value");
	parse_refused("node=n1 check=gpu value=1..2 median=- unit=-",
		      "invalid value");
	parse_refused("node=n1 check=gpu value= median=- unit=-",
		      "invalid value");
	parse_refused("node=n1 check=gpu value=- median=- unit=GB/s",
		      "invalid unit");
	parse_refused("node=n1  check=gpu value=- median=- unit=-",
		      "is not key=value");
	parse_refused("node=n1 check=gpu value=- median=- unit=- ",
		      "trailing space");
	parse_refused("node=n1\tcheck=gpu value=- median=- unit=-",
		      "invalid node");
	parse_refused("node=n1 check=gpu value=- median=- unit=-\n\n",
		      "invalid unit");
	parse_refused("", "empty");
	parse_refused("node=n1 check=abcdefghijabcdefghijabcdefghijabc "
		      "value=- median=- unit=-",
		      "check longer than 31");
	memset(host, 'a', 256);
	host[256] = '\0';
	snprintf(line, sizeof(line),
		 "node=%s check=gpu value=- median=- unit=-", host);
	parse_refused(line, "node longer than 255");
	memset(line, 'x', 600);
	line[600] = '\0';
	parse_refused(line, "longer than 511 bytes");
	v.node[0] = 'Z';
	tap_ok(ddp_verdict_parse("bogus", &v, err, sizeof(err)) < 0 &&
		       v.node[0] == 'Z',
	       "v is untouched on error");
}

static struct ddp_verdict
verdict(long long time, const char *job, unsigned long uid, const char *node,
	const char *check, const char *value)
{
	struct ddp_verdict v;

	memset(&v, 0, sizeof(v));
	v.time = time;
	snprintf(v.job, sizeof(v.job), "%s", job);
	snprintf(v.step, sizeof(v.step), "0");
	v.uid = uid;
	snprintf(v.node, sizeof(v.node), "%s", node);
	snprintf(v.check, sizeof(v.check), "%s", check);
	snprintf(v.value, sizeof(v.value), "%s", value);
	snprintf(v.median, sizeof(v.median), "1.9");
	snprintf(v.unit, sizeof(v.unit), "gb-per-s");
	return v;
}

/* What ddp_verdict_scan handed over. */
struct seen {
	struct ddp_verdict v[4];
	size_t n;
};

static void
keep_line(void *arg, const struct ddp_verdict *v)
{
	struct seen *s = arg;

	if (s->n < sizeof(s->v) / sizeof(s->v[0]))
		s->v[s->n] = *v;
	s->n++;
}

static int
same_verdict(const struct ddp_verdict *a, const struct ddp_verdict *b)
{
	return a->time == b->time && a->uid == b->uid &&
	       !strcmp(a->job, b->job) && !strcmp(a->step, b->step) &&
	       !strcmp(a->node, b->node) && !strcmp(a->check, b->check) &&
	       !strcmp(a->value, b->value) && !strcmp(a->median, b->median) &&
	       !strcmp(a->unit, b->unit);
}

static void
test_line_form(void)
{
	struct ddp_verdict slow =
		verdict(0, "", 0, "node2", "link-send", "0.21");
	struct ddp_verdict gpu =
		verdict(0, "", 0, "gpu-07.cluster", "gpu", "-");
	struct seen seen = {0};
	char text[2 * DDP_VERDICT_LINE_MAX], why[128] = "x";
	size_t bad = 7, off;

	/* Only ddp-check's part: what the scanner hands back. */
	slow.step[0] = gpu.step[0] = '\0';
	snprintf(gpu.median, sizeof(gpu.median), "-");
	snprintf(gpu.unit, sizeof(gpu.unit), "-");
	tap_ok(ddp_verdict_format(&slow, text, sizeof(text)) == 0 &&
		       !strcmp(text, "node=node2 check=link-send value=0.21 "
				     "median=1.9 unit=gb-per-s\n"),
	       "a verdict written in ddp-check's line form, newline included");
	off = strlen(text);
	tap_ok(ddp_verdict_format(&gpu, text + off, sizeof(text) - off) == 0,
	       "a second line appended");
	ddp_verdict_scan(text, strlen(text), keep_line, &seen, &bad, why,
			 sizeof(why));
	if (!tap_ok(seen.n == 2 && bad == 0 && !why[0] &&
			    same_verdict(&seen.v[0], &slow) &&
			    same_verdict(&seen.v[1], &gpu),
		    "format then scan: the same two verdicts, in order, none "
		    "bad"))
		tap_diag("n %zu bad %zu why '%s'", seen.n, bad, why);
	tap_ok(ddp_verdict_format(&slow, text, 20) == -1,
	       "a line that does not fit is an error");
	memset(&seen, 0, sizeof(seen));
	ddp_verdict_scan("garbage\nnode=n1 check=gpu value=- median=- unit=-",
			 strlen("garbage\nnode=n1 check=gpu value=- median=- "
				"unit=-"),
			 keep_line, &seen, &bad, why, sizeof(why));
	tap_ok(seen.n == 1 && bad == 1 && strstr(why, "garbage"),
	       "scan: a bad line counted with its reason, the good one kept");
	ddp_verdict_scan("garbage", 7, NULL, NULL, NULL, NULL, 0);
	tap_ok(1, "scan without a callback or counters");
}

static void
test_record(void)
{
	struct ddp_verdict v = verdict(1700000000, "1234_5", 1001, "node2",
				       "link-send", "0.21"),
			   back;
	char rec[DDP_VERDICT_RECORD_MAX], err[256];

	tap_ok(ddp_verdict_format_record(&v, rec, sizeof(rec), err,
					 sizeof(err)) == 0 &&
		       !strcmp(rec, "v1 time=1700000000 job=1234_5 step=0 "
				    "uid=1001 node=node2 check=link-send "
				    "value=0.21 median=1.9 unit=gb-per-s\n"),
	       "record line as the format says");
	tap_ok(ddp_verdict_parse_record(rec, &back, err, sizeof(err)) == 0 &&
		       !memcmp(&v, &back, sizeof(v)),
	       "record read back equals what was written");
	tap_ok(ddp_verdict_parse_record(rec + 3, &back, err, sizeof(err)) < 0 &&
		       strstr(err, "'v1 '"),
	       "a record without its version is refused");
	tap_ok(ddp_verdict_parse_record("v1 time=1 job=1 step=0 uid=x "
					"node=n check=gpu value=- median=- "
					"unit=-",
					&back, err, sizeof(err)) < 0 &&
		       strstr(err, "invalid uid"),
	       "a record with a bad uid is refused");
	tap_ok(ddp_verdict_parse_record("v1 time=1 job=1 step=0 uid=4294967296 "
					"node=n check=gpu value=- median=- "
					"unit=-",
					&back, err, sizeof(err)) < 0,
	       "a uid past 32 bits is refused");
	snprintf(v.job, sizeof(v.job), "12 34");
	tap_ok(ddp_verdict_format_record(&v, rec, sizeof(rec), err,
					 sizeof(err)) < 0 &&
		       strstr(err, "invalid job"),
	       "a job id with a space is never written");
	v = verdict(1, "1", 0, "n1", "gpu", "1");
	snprintf(v.node, sizeof(v.node), "n1 check=x");
	tap_ok(ddp_verdict_format_record(&v, rec, sizeof(rec), err,
					 sizeof(err)) < 0 &&
		       strstr(err, "invalid node"),
	       "a node that would add a key is never written");
}

static void
path_of(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", tmpdir, name);
}

static void
test_append_read(void)
{
	struct ddp_verdict v =
		verdict(1000, "7", 1001, "node2", "link-send", "0.21");
	struct ddp_verdict_list list;
	char err[512], file[600], sdir[600], link[600];
	struct stat st;
	FILE *f;
	int i, ok;

	path_of(sdir, sizeof(sdir), "state");
	path_of(file, sizeof(file), "state/" DDP_VERDICT_FILE);
	tap_ok(ddp_verdict_read(sdir, "node2", 0, &list, err, sizeof(err)) ==
			       0 &&
		       list.n == 0 && list.skipped == 0,
	       "no state dir yet: no records, no error");
	tap_ok(ddp_verdict_append(sdir, &v, err, sizeof(err)) == 0 &&
		       stat(file, &st) == 0 && S_ISREG(st.st_mode) &&
		       (st.st_mode & 07777) == 0600 && st.st_uid == geteuid(),
	       "append makes the state dir and a 0600 record file");
	v = verdict(2000, "8", 1002, "node3", "gpu", "-");
	ok = ddp_verdict_append(sdir, &v, err, sizeof(err)) == 0;
	v = verdict(3000, "9", 1002, "node2", "link-recv", "0.3");
	ok = ok && ddp_verdict_append(sdir, &v, err, sizeof(err)) == 0;
	f = fopen(file, "a");
	if (f) {
		fputs("v1 time=3500 job=10 uid=5 node=node2 check=gpu\n", f);
		fputs("garbage\n", f);
		fputs("v1 time=3600 job=11 step=0 uid=5 node=node2 check=gpu "
		      "value=- median=- unit=-",
		      f); /* no newline: cut by a crash, still whole */
		fclose(f);
	}
	tap_ok(ok &&
		       ddp_verdict_read(sdir, "node2", 0, &list, err,
					sizeof(err)) == 0 &&
		       list.n == 3 && list.skipped == 2 &&
		       list.v[0].time == 1000 && list.v[1].time == 3000 &&
		       !strcmp(list.v[2].job, "11"),
	       "read keeps node2's records oldest first, skips and counts "
	       "2 malformed lines");
	ddp_verdict_list_free(&list);
	tap_ok(ddp_verdict_read(sdir, "node2", 3000, &list, err, sizeof(err)) ==
			       0 &&
		       list.n == 2,
	       "read from a time on");
	ddp_verdict_list_free(&list);
	tap_ok(ddp_verdict_read(sdir, NULL, 0, &list, err, sizeof(err)) == 0 &&
		       list.n == 4,
	       "read of every node");
	ddp_verdict_list_free(&list);

	chmod(file, 0622);
	tap_ok(ddp_verdict_read(sdir, "node2", 0, &list, err, sizeof(err)) <
			       0 &&
		       strstr(err, "mode 0622") &&
		       ddp_verdict_append(sdir, &v, err, sizeof(err)) < 0,
	       "a record file others may write is refused by read and "
	       "append");
	unlink(file);
	path_of(link, sizeof(link), "elsewhere");
	close(open(link, O_WRONLY | O_CREAT, 0600));
	if (symlink(link, file) < 0)
		tap_diag("symlink: %s", strerror(errno));
	tap_ok(ddp_verdict_append(sdir, &v, err, sizeof(err)) < 0 &&
		       stat(link, &st) == 0 && st.st_size == 0 &&
		       ddp_verdict_read(sdir, "node2", 0, &list, err,
					sizeof(err)) < 0,
	       "a symlink in the record's place is not followed");
	unlink(file);
	unlink(link);

	/* The bound: far more records than fit keep the file under it, the
	 * newest kept, the oldest gone. */
	ok = 1;
	for (i = 0; i < 12000 && ok; i++) {
		char job[16];

		snprintf(job, sizeof(job), "%d", i);
		v = verdict(i, job, 1001, "node2", "link-send", "0.21");
		ok = ddp_verdict_append(sdir, &v, err, sizeof(err)) == 0;
	}
	tap_ok(ok && stat(file, &st) == 0 &&
		       st.st_size <= DDP_VERDICT_FILE_MAX &&
		       ddp_verdict_read(sdir, "node2", 0, &list, err,
					sizeof(err)) == 0 &&
		       list.skipped == 0 && list.n > 1000 &&
		       list.v[list.n - 1].time == 11999 && list.v[0].time > 0,
	       "the file stays bounded, keeps whole newest records");
	tap_diag("%zu records, %lld bytes after %d appends (%s)", list.n,
		 (long long)st.st_size, i, err);
	ddp_verdict_list_free(&list);
	unlink(file);
	rmdir(sdir);
}

/* Builds a list from the records given. */
static void
make_list(struct ddp_verdict_list *l, const struct ddp_verdict *v, size_t n)
{
	l->v = malloc(n * sizeof(*v));
	if (!l->v)
		exit(2);
	memcpy(l->v, v, n * sizeof(*v));
	l->n = n;
	l->skipped = 0;
}

/* Older releases' verdict for a rank a signal killed: read back, never
 * counted, so three users' crashing programs cannot drain a node; the
 * kernel's memory error (plugin/failure.c) is counted as any finding. */
static void
test_rank_killed(void)
{
	const struct ddp_drain_rule rule = {3, 2, 86400};
	const long long now = 10 * 86400;
	struct ddp_verdict_list l;
	struct ddp_drain_tally t;
	struct ddp_verdict v[3], back;
	char reason[256], line[DDP_VERDICT_RECORD_MAX], err[128];
	int i;

	for (i = 0; i < 3; i++) {
		char job[16];

		snprintf(job, sizeof(job), "%d", 200 + i);
		v[i] = verdict(now - 60 + i, job, 2001 + i, "node3",
			       DDP_VERDICT_CHECK_RANK_KILLED, "11");
		snprintf(v[i].median, sizeof(v[i].median), "-");
		snprintf(v[i].unit, sizeof(v[i].unit), "-");
	}
	tap_ok(ddp_verdict_format_record(&v[0], line, sizeof(line), err,
					 sizeof(err)) == 0 &&
		       ddp_verdict_parse_record(line, &back, err,
						sizeof(err)) == 0 &&
		       same_verdict(&back, &v[0]),
	       "a rank-killed record is written and read back: %s", line);
	make_list(&l, v, 3);
	ddp_drain_evaluate(&l, "node3", &rule, now, &t);
	tap_ok(!t.drain && t.records == 0 && t.users == 0,
	       "three users' rank-killed jobs neither drain node3 nor count "
	       "(drain %d, %zu records, %u users)",
	       t.drain, t.records, t.users);
	ddp_verdict_list_free(&l);
	for (i = 0; i < 3; i++)
		snprintf(v[i].check, sizeof(v[i].check), "memory-error");
	make_list(&l, v, 3);
	ddp_drain_evaluate(&l, "node3", &rule, now, &t);
	if (!tap_ok(t.drain &&
			    ddp_drain_reason(&t, rule.window, reason,
					     sizeof(reason)) == 0 &&
			    !strcmp(reason,
				    "ddp-check: memory-error 11, 3 jobs "
				    "of 3 users in 24h"),
		    "three users' jobs that met the kernel's memory errors "
		    "drain node3: %s",
		    reason))
		tap_diag("drain %d credited %u", t.drain, t.credited);
	ddp_verdict_list_free(&l);
}

static void
test_rule(void)
{
	const struct ddp_drain_rule rule = {3, 2, 86400};
	const long long now = 10 * 86400;
	struct ddp_verdict_list l;
	struct ddp_drain_tally t;
	char reason[256];
	struct ddp_verdict v[12];
	int i;

	v[0] = verdict(now - 60, "100", 1001, "node2", "link-send", "0.21");
	make_list(&l, v, 1);
	ddp_drain_evaluate(&l, "node2", &rule, now, &t);
	tap_ok(!t.drain && t.jobs == 1 && t.users == 1 && t.records == 1,
	       "one job naming node2 does not drain it");
	ddp_verdict_list_free(&l);

	/* One user's two jobs (forged) and another user's one transient
	 * failure: the first user counts once. */
	v[1] = verdict(now - 50, "101", 1001, "node2", "link-send", "0.25");
	v[2] = verdict(now - 40, "102", 1002, "node2", "link-send", "0.22");
	make_list(&l, v, 3);
	ddp_drain_evaluate(&l, "node2", &rule, now, &t);
	tap_ok(!t.drain && t.jobs == 3 && t.users == 2 && t.credited == 2,
	       "two jobs of one user and one of another do not drain node2");
	ddp_verdict_list_free(&l);

	v[3] = verdict(now - 30, "103", 1003, "node2", "link-send", "0.23");
	make_list(&l, v, 4);
	ddp_drain_evaluate(&l, "node2", &rule, now, &t);
	tap_ok(t.drain && t.jobs == 4 && t.users == 3 && t.credited == 3,
	       "a third user's job drains node2");
	if (!tap_ok(ddp_drain_reason(&t, rule.window, reason, sizeof(reason)) ==
				    0 &&
			    !strcmp(reason,
				    "ddp-check: link-send 0.23 GB/s vs median "
				    "1.9 GB/s, 4 jobs of 3 users in 24h"),
		    "the reason names the newest measurement and the count"))
		tap_diag("reason '%s'", reason);
	ddp_drain_evaluate(&l, "node3", &rule, now, &t);
	tap_ok(!t.drain && t.records == 0 &&
		       ddp_drain_reason(&t, rule.window, reason,
					sizeof(reason)) < 0,
	       "another node is not drained by node2's records");
	ddp_verdict_list_free(&l);

	/* One user forging from many jobs and steps. */
	for (i = 0; i < 12; i++) {
		char job[16];

		snprintf(job, sizeof(job), "%d", 200 + i);
		v[i] = verdict(now - 100 + i, job, 1003, "node2", "link-send",
			       "0.01");
	}
	make_list(&l, v, 12);
	ddp_drain_evaluate(&l, "node2", &rule, now, &t);
	tap_ok(!t.drain && t.jobs == 12 && t.users == 1,
	       "one user's forged verdicts of 12 jobs do not drain it");
	ddp_verdict_list_free(&l);

	/* Many lines of one job (several steps) count as one job. */
	for (i = 0; i < 6; i++)
		v[i] = verdict(now - 100 + i, i < 5 ? "300" : "301",
			       i < 5 ? 1001u : 1002u, "node2", "gpu", "-");
	make_list(&l, v, 6);
	ddp_drain_evaluate(&l, "node2", &rule, now, &t);
	tap_ok(!t.drain && t.jobs == 2 && t.users == 2 && t.records == 6,
	       "many lines of one job count once");
	tap_ok(ddp_drain_reason(&t, 3600, reason, sizeof(reason)) == 0 &&
		       !strcmp(reason,
			       "ddp-check: gpu, 2 jobs of 2 users in 1h"),
	       "a finding without a value is named by its check");
	ddp_verdict_list_free(&l);

	/* Old records fall outside the window. */
	v[0] = verdict(now - 86401, "400", 1001, "node2", "link-send", "0.2");
	v[1] = verdict(now - 90000, "401", 1002, "node2", "link-send", "0.2");
	v[2] = verdict(now - 30, "402", 1003, "node2", "link-send", "0.2");
	v[3] = verdict(now - 20, "403", 1001, "node2", "link-send", "0.2");
	make_list(&l, v, 4);
	ddp_drain_evaluate(&l, "node2", &rule, now, &t);
	tap_ok(!t.drain && t.jobs == 2 && t.records == 2,
	       "records older than the window do not count");
	ddp_drain_evaluate(&l, "node2", &(struct ddp_drain_rule){3, 2, 100000},
			   now, &t);
	tap_ok(t.drain && t.jobs == 4 && t.users == 3,
	       "a wider window counts them");
	ddp_verdict_list_free(&l);

	/* The check most jobs named is the one named, not the newest. */
	v[0] = verdict(now - 30, "500", 1001, "node2", "link-recv", "0.3");
	v[1] = verdict(now - 20, "501", 1002, "node2", "link-recv", "0.4");
	v[2] = verdict(now - 10, "502", 1003, "node2", "gpu", "-");
	make_list(&l, v, 3);
	ddp_drain_evaluate(&l, "node2", &rule, now, &t);
	tap_ok(t.drain && t.named == &l.v[1],
	       "the reason names the check most jobs named");
	ddp_verdict_list_free(&l);

	/* Two users who each saw it twice. */
	v[0] = verdict(now - 40, "600", 1001, "node2", "link-recv", "0.3");
	v[1] = verdict(now - 30, "601", 1001, "node2", "link-recv", "0.3");
	v[2] = verdict(now - 20, "602", 1002, "node2", "link-recv", "0.4");
	v[3] = verdict(now - 10, "603", 1002, "node2", "link-recv", "0.4");
	make_list(&l, v, 4);
	ddp_drain_evaluate(&l, "node2", &rule, now, &t);
	tap_ok(t.drain && t.credited == 3 && t.named == &l.v[3],
	       "two jobs each of two users drain node2");
	ddp_verdict_list_free(&l);

	/* A check that only one user reports is never the reason, however
	 * many jobs name it. */
	for (i = 0; i < 6; i++) {
		char job[16];

		snprintf(job, sizeof(job), "%d", 700 + i);
		v[i] = verdict(now - 100 + i, job, 1001, "node2", "gpu", "-");
	}
	v[6] = verdict(now - 50, "710", 1002, "node2", "link-send", "0.2");
	v[7] = verdict(now - 40, "711", 1003, "node2", "link-send", "0.3");
	v[8] = verdict(now - 30, "712", 1004, "node2", "gpu-forged", "-");
	make_list(&l, v, 9);
	ddp_drain_evaluate(&l, "node2", &rule, now, &t);
	tap_ok(t.drain && t.named == &l.v[7],
	       "the reason is a check two users reported, not one user's");
	ddp_verdict_list_free(&l);
	v[6] = verdict(now - 50, "710", 1002, "node2", "link-send", "0.2");
	v[7] = verdict(now - 40, "711", 1003, "node2", "link-recv", "0.3");
	make_list(&l, v, 9);
	ddp_drain_evaluate(&l, "node2", &rule, now, &t);
	tap_ok(!t.drain && !t.named && t.credited == 4 &&
		       ddp_drain_reason(&t, rule.window, reason,
					sizeof(reason)) < 0,
	       "no check reported by two users: nothing drains, no reason");
	ddp_verdict_list_free(&l);
}

int
main(void)
{
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 2;
	}
	test_parse();
	test_line_form();
	test_record();
	test_append_read();
	test_rule();
	test_rank_killed();
	rmdir(tmpdir);
	return tap_done();
}
