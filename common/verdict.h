/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The node's record of ddp-check verdicts, and the rule that turns it into
 * a drain.
 *
 * ddp-check (run by the job's user before a --ddp step) writes one line per
 * finding, "node=<host> check=<token> value=<v> median=<m> unit=<u>". The
 * plugin's root side (slurmstepd) reads the lines that name its own node
 * and appends each, with the time, job, step and uid that it knows from
 * Slurm, to <state_dir>/verdicts:
 *
 *   v1 time=<epoch> job=<id> step=<id> uid=<n> node=<host> check=<token>
 *      value=<v> median=<m> unit=<u>
 *
 * (one line). slurmstepd also appends a verdict of its own, check
 * "memory-error" with the signal as value (median and unit "-"), when a
 * task of a --ddp step died of SIGBUS while its node's kernel counted
 * memory errors (plugin/failure.c, kevents.h): the kernel's word, counted
 * as any other finding. How a task died is never a verdict by itself (a
 * program chooses it: failure.h); the "rank-killed" records of older
 * releases stay in the file, shown but never counted. The health check
 * (ddp-nodectl health) and `ddp-nodectl verdicts` read it.
 *
 * Trust: node, check, value, median and unit come from user processes and
 * can be forged by the job's user; time, job, step and uid cannot (root
 * writes them). So the drain rule counts distinct jobs and distinct users,
 * never lines or values: a node is drained only when at least
 * check_drain_jobs jobs of at least check_drain_users users named it within
 * check_drain_window, the jobs of the user with the most of them counting
 * once, and the finding it is drained for was reported by two users (see
 * doc/admin-guide.md, "Draining nodes the check names", for the threat and its
 * bounds).
 *
 * Errors: functions return 0 or -1 and fill err (NUL-terminated when
 * errlen > 0); they never exit and never log. Thread safety: they touch
 * only their arguments and the file system; appends and reads of one file
 * are serialised by flock(2), also across processes.
 */
#ifndef DDP_VERDICT_H
#define DDP_VERDICT_H

#include <stddef.h>
#include <stdio.h>

/* The check of the records older releases wrote for a task's signal
 * death: never counted toward a drain. */
#define DDP_VERDICT_CHECK_RANK_KILLED "rank-killed"

/* Longest line of ddp-check's form, newline included. */
#define DDP_VERDICT_LINE_MAX 512
/* Longest record line of <state_dir>/verdicts, newline included. */
#define DDP_VERDICT_RECORD_MAX 768
/* The record file's name below state_dir, and the size past which an
 * append first drops the older half of the records. */
#define DDP_VERDICT_FILE "verdicts"
#define DDP_VERDICT_FILE_MAX (1024 * 1024)

struct ddp_verdict {
	long long time; /* epoch seconds */
	char job[32], step[32];
	unsigned long uid;
	char node[256], check[32], value[32], median[32], unit[32];
};

/*
 * Parses one line of ddp-check's form (no time/job/step/uid; one trailing
 * newline allowed). Strict: all five keys once each, in any order,
 * separated by single spaces; unknown or repeated keys, bad tokens, and
 * over-long fields are -1 with err naming the key. node is a host name of
 * [A-Za-z0-9._-], not starting with '-' or '.'; check and unit tokens of
 * [a-z0-9-]{1,31} (unit may be "-"); value and median finite decimal
 * numbers such as 1.25e+09 or 0.033, or "-" for none. On success v is
 * filled and time, job, step and uid are zero/empty for the caller to set.
 */
int ddp_verdict_parse(const char *line, struct ddp_verdict *v, char *err,
		      size_t errlen);

/*
 * Writes v's part of ddp-check's form as one line, newline included, into
 * buf: "node=<host> check=<token> value=<v> median=<m> unit=<u>\n" (time,
 * job, step and uid are not part of it). The one writer of the form that
 * ddp_verdict_parse and ddp_verdict_scan read; the fields are written as
 * they are, so a line of fields ddp_verdict_parse would refuse is refused
 * where it is read. Returns 0, or -1 when it does not fit (buf then holds
 * a cut line). Reentrant.
 */
int ddp_verdict_format(const struct ddp_verdict *v, char *buf, size_t len);

/* Receives each line ddp_verdict_scan accepts, parsed; v is borrowed for
 * the call only. */
typedef void ddp_verdict_fn(void *arg, const struct ddp_verdict *v);

/*
 * Reads text (ddp-check's --verdict-fd output: lines of ddp-check's form,
 * len bytes, not necessarily NUL-terminated, the last newline optional)
 * and hands each valid line, parsed by ddp_verdict_parse, to each (may be
 * NULL) with arg, in order. A line longer than DDP_VERDICT_LINE_MAX, one
 * holding a NUL byte and one ddp_verdict_parse refuses are skipped and
 * counted in *bad (bad may be NULL), the first one's reason written to
 * bad_why (why_len bytes; "" when no line is bad); empty lines are
 * skipped uncounted. Cannot fail. Reentrant when each is.
 */
void ddp_verdict_scan(const char *text, size_t len, ddp_verdict_fn *each,
		      void *arg, size_t *bad, char *bad_why, size_t why_len);

/*
 * Root: appends v as one record line to <state_dir>/verdicts (state_dir
 * root's and not writable by others, made 0755 when missing; the file
 * root-owned 0600, opened O_APPEND|O_NOFOLLOW, under an exclusive flock).
 * A file past DDP_VERDICT_FILE_MAX first keeps only its newer half, so it
 * stays bounded. v's fields are checked as ddp_verdict_parse and
 * ddp_verdict_parse_record would; job and step are tokens of
 * [A-Za-z0-9_.+-]. Returns 0 or -1 with err.
 */
int ddp_verdict_append(const char *state_dir, const struct ddp_verdict *v,
		       char *err, size_t errlen);

/*
 * Parses one record line (the "v1 ..." form above, all nine keys once, a
 * trailing newline allowed) into v. Returns 0, or -1 with err.
 */
int ddp_verdict_parse_record(const char *line, struct ddp_verdict *v, char *err,
			     size_t errlen);

/*
 * Writes v as a record line, newline included, into buf. Returns 0, or -1
 * when a field is not valid (err says which) or buf is too small.
 */
int ddp_verdict_format_record(const struct ddp_verdict *v, char *buf,
			      size_t len, char *err, size_t errlen);

/* The records of one node read back from the file. */
struct ddp_verdict_list {
	struct ddp_verdict *v; /* oldest first; owned, ddp_verdict_list_free */
	size_t n;
	size_t skipped; /* malformed lines, not in v */
};

/*
 * Reads <state_dir>/verdicts (under a shared flock) and keeps the records
 * naming node (every node when node is NULL) with time >= since, oldest
 * first. Malformed lines are skipped and counted in out->skipped, never
 * fatal. A missing file or state_dir is an empty list. The file must be a
 * regular file owned by the caller's euid and not writable by others;
 * anything else is -1 with err (a record others can write proves
 * nothing). On -1, out is empty. Free out with ddp_verdict_list_free.
 */
int ddp_verdict_read(const char *state_dir, const char *node, long long since,
		     struct ddp_verdict_list *out, char *err, size_t errlen);

/* Same, from an open file (for tests and tools); no locking. */
int ddp_verdict_read_stream(FILE *f, const char *node, long long since,
			    struct ddp_verdict_list *out, char *err,
			    size_t errlen);

void ddp_verdict_list_free(struct ddp_verdict_list *list);

/* The drain rule's thresholds (ddp.conf check_drain_*). */
struct ddp_drain_rule {
	unsigned jobs;	  /* distinct jobs needed, >= 1 */
	unsigned users;	  /* distinct users needed, >= 1 */
	long long window; /* seconds back from now that count */
};

/* What the rule found for one node. */
struct ddp_drain_tally {
	size_t records;	   /* records of the node within the window */
	unsigned jobs;	   /* distinct jobs among them */
	unsigned users;	   /* distinct uids among them */
	unsigned credited; /* jobs, with the user of the most jobs as one */
	/* 1 when credited >= rule.jobs, users >= rule.users and a finding
	 * is named. */
	int drain;
	/* The finding to name: the newest record of the check named by the
	 * most jobs among the checks that two users reported (one when
	 * rule.users is 1); NULL when none; points into the list. */
	const struct ddp_verdict *named;
};

/*
 * Applies rule to the records of list naming node with time >= now -
 * rule->window. Distinct jobs are distinct job ids; a job's records of
 * several steps or lines count once. The jobs of the user with the most
 * of them count as one toward rule.jobs: no user's forged records can
 * make up for the other users' missing ones. Records of check
 * DDP_VERDICT_CHECK_RANK_KILLED are not counted at all. Cannot fail; when
 * memory runs out it counts nothing and drains nothing.
 */
void ddp_drain_evaluate(const struct ddp_verdict_list *list, const char *node,
			const struct ddp_drain_rule *rule, long long now,
			struct ddp_drain_tally *out);

/*
 * Writes the drain reason for t into buf, e.g. "ddp-check: link-send 0.21
 * GB/s vs median 1.9 GB/s, 3 jobs of 2 users in 24h" (at most len - 1
 * bytes; it fits Slurm's reason field at len 256). Only characters of the
 * records' validated forms and the fixed text appear, so it is safe as one
 * argument of scontrol. Returns 0, or -1 when t names nothing or it does
 * not fit.
 */
int ddp_drain_reason(const struct ddp_drain_tally *t, long long window,
		     char *buf, size_t len);

/*
 * Writes v's measurement for people: "link-send 0.21 GB/s vs median 1.9
 * GB/s", or just the check when there is no value. Returns 0 or -1 when it
 * does not fit.
 */
int ddp_verdict_describe(const struct ddp_verdict *v, char *buf, size_t len);

#endif
