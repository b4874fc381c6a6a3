/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The first failure of a --ddp step: reports, their order, the blame rule,
 * srun's line and the restart record (failure.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ddp_util.h"
#include "failure.h"
#include "stop.h"

/* The signals a report may name: Linux's 1-31 and the real-time ones. */
#define SIGNAL_MAX 64

int
ddp_failure_from_wait_status(int wstatus, struct ddp_failure *f)
{
	if (WIFSIGNALED(wstatus)) {
		f->signal = WTERMSIG(wstatus);
		f->status = 0;
		return 1;
	}
	if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) != 0) {
		f->signal = 0;
		f->status = WEXITSTATUS(wstatus);
		return 1;
	}
	return 0;
}

int
ddp_failure_nonce(char *out, size_t len)
{
	unsigned char raw[DDP_FAILURE_NONCE_HEX / 2];

	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
		if (errno == 0)
			errno = EIO;
		return -1;
	}
	if (ddp_hex(out, len, raw, sizeof(raw)) < 0) {
		errno = ENOSPC;
		return -1;
	}
	return 0;
}

/* 1 when s is n characters (1 <= n < max) of [A-Za-z0-9._-] and extra. */
static int
word_ok(const char *s, size_t max, const char *extra)
{
	size_t n = strlen(s), i;

	if (n == 0 || n >= max)
		return 0;
	for (i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		      c == '-' || (c && strchr(extra, c))))
			return 0;
	}
	return 1;
}

static int
nonce_ok(const char *s)
{
	size_t i;

	for (i = 0; i < DDP_FAILURE_NONCE_HEX; i++)
		if (!((s[i] >= '0' && s[i] <= '9') ||
		      (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return s[i] == '\0';
}

/* The HOW suffix of what the kernel recorded, "" for none. */
static const char *
kernel_word(enum ddp_failure_kernel k)
{
	switch (k) {
	case DDP_KERNEL_OOM:
		return "oom";
	case DDP_KERNEL_MEMORY_ERROR:
		return "memory-error";
	default:
		return "";
	}
}

/* The signal a kernel record explains: SIGKILL for an OOM kill, SIGBUS
 * for a memory error; 0 for none. */
static int
kernel_signal(enum ddp_failure_kernel k)
{
	return k == DDP_KERNEL_OOM	      ? SIGKILL
	       : k == DDP_KERNEL_MEMORY_ERROR ? SIGBUS
					      : 0;
}

/* "exit:N" or "signal:N" into buf, and for a report (with_kernel) the
 * kernel's word after a colon. */
static int
format_how(const struct ddp_failure *f, int with_kernel, char *buf, size_t len)
{
	/* A stop's record keeps how=exit:75, which every reader knows. */
	if (with_kernel && f->stopped)
		return ddp_fmt(buf, len, "stop");
	if (f->signal <= 0)
		return ddp_fmt(buf, len, "exit:%d", f->status);
	if (with_kernel && f->kernel != DDP_KERNEL_NONE)
		return ddp_fmt(buf, len, "signal:%d:%s", f->signal,
			       kernel_word(f->kernel));
	return ddp_fmt(buf, len, "signal:%d", f->signal);
}

/* The most nodes a step's host list (a report's STEP_NODES, a record's
 * blame= and step_nodes=) may expand to. */
#define LIST_HOSTS_MAX 65536

/* 1 when list is a Slurm host list of at most LIST_HOSTS_MAX hosts. */
static int
host_list_ok(const char *list)
{
	struct ddp_hostlist hl = {0};
	char why[128];

	if (ddp_hostlist_parse(list, LIST_HOSTS_MAX, &hl, why, sizeof(why)) < 0)
		return 0;
	ddp_hostlist_free(&hl);
	return 1;
}

/* A stop's fields, checked: a stop is an exit with DDP_STOP_EXIT_STATUS
 * and no naming. */
static int
stop_ok(const struct ddp_failure *f)
{
	return !f->stopped ||
	       (f->signal <= 0 && f->status == DDP_STOP_EXIT_STATUS &&
		!f->named && f->stop_step >= 0 && f->stop_ckpt_ms >= 0 &&
		word_ok(f->stop_why, sizeof(f->stop_why), ""));
}

/* The fields both lines share, checked. */
static int
fields_ok(const struct ddp_failure *f)
{
	return f->rank >= 0 && stop_ok(f) &&
	       word_ok(f->node, sizeof(f->node), "") &&
	       word_ok(f->step_nodes, sizeof(f->step_nodes), ",[]") &&
	       host_list_ok(f->step_nodes) && f->time_ms >= 0 && f->nodes > 0 &&
	       (f->signal > 0 ? f->signal <= SIGNAL_MAX
			      : f->status > 0 && f->status <= 255) &&
	       (f->kernel == DDP_KERNEL_NONE ||
		kernel_signal(f->kernel) == f->signal);
}

const char *
ddp_failure_why_words(const char *why)
{
	if (!strcmp(why, "hang"))
		return "hangs";
	if (!strcmp(why, "behind"))
		return "hangs in an earlier call";
	if (!strcmp(why, "lost"))
		return "was lost";
	if (!strcmp(why, "unreachable"))
		return "is unreachable";
	return NULL;
}

/* 1 when WHY is one a naming may carry. */
static int
why_ok(const char *why)
{
	return ddp_failure_why_words(why) != NULL;
}

/* The naming's fields, checked. */
static int
naming_ok(const struct ddp_failure *f)
{
	return f->named_by >= 0 && f->named_by <= 0x7fffffffL &&
	       f->named_rank >= 0 && f->named_rank <= 0x7fffffffL &&
	       f->named_rank != f->named_by &&
	       word_ok(f->named_node, sizeof(f->named_node), "") &&
	       why_ok(f->named_why);
}

int
ddp_failure_format_report(const struct ddp_failure *f, const char *nonce,
			  char *buf, size_t len)
{
	char how[32];

	if (!nonce_ok(nonce) || !fields_ok(f) ||
	    format_how(f, 1, how, sizeof(how)) < 0)
		return -1;
	if (f->stopped)
		return ddp_fmt(buf, len,
			       "%s %ld %s %s %lld.%03lld %lu %s %lld %s %lld\n",
			       nonce, f->rank, f->node, how, f->time_ms / 1000,
			       f->time_ms % 1000, f->nodes, f->step_nodes,
			       f->stop_step, f->stop_why, f->stop_ckpt_ms);
	if (!f->named)
		return ddp_fmt(buf, len, "%s %ld %s %s %lld.%03lld %lu %s\n",
			       nonce, f->rank, f->node, how, f->time_ms / 1000,
			       f->time_ms % 1000, f->nodes, f->step_nodes);
	if (!naming_ok(f))
		return -1;
	return ddp_fmt(buf, len,
		       "%s %ld %s %s %lld.%03lld %lu %s %ld %ld %s %s\n", nonce,
		       f->rank, f->node, how, f->time_ms / 1000,
		       f->time_ms % 1000, f->nodes, f->step_nodes, f->named_by,
		       f->named_rank, f->named_node, f->named_why);
}

/* Copies the next space-separated field of *p into buf and moves *p past
 * it and its one separating space: 0, or -1 when empty or too long. */
static int
next_field(const char **p, char *buf, size_t len)
{
	const char *s = *p, *end = strchr(s, ' ');
	size_t n = end ? (size_t)(end - s) : strlen(s);

	if (n == 0 || n >= len)
		return -1;
	memcpy(buf, s, n);
	buf[n] = '\0';
	*p = end ? end + 1 : s + n;
	return 0;
}

/* "exit:N", "signal:N" or "signal:N:KERNEL" into f; "stop" too when
 * stop (a report's HOW). */
static int
parse_how(const char *s, int stop, struct ddp_failure *f)
{
	char num[16];
	const char *colon;
	long v;
	size_t n;

	if (stop && !strcmp(s, "stop")) {
		f->signal = 0;
		f->status = DDP_STOP_EXIT_STATUS;
		f->kernel = DDP_KERNEL_NONE;
		f->stopped = 1;
		return 0;
	}
	if (!strncmp(s, "exit:", 5) && ddp_parse_long(s + 5, 1, 255, &v) == 0 &&
	    s[5] != '+') {
		f->signal = 0;
		f->status = (int)v;
		f->kernel = DDP_KERNEL_NONE;
		return 0;
	}
	if (strncmp(s, "signal:", 7))
		return -1;
	s += 7;
	colon = strchr(s, ':');
	n = colon ? (size_t)(colon - s) : strlen(s);
	if (n == 0 || n >= sizeof(num) || s[0] == '+')
		return -1;
	memcpy(num, s, n);
	num[n] = '\0';
	if (ddp_parse_long(num, 1, SIGNAL_MAX, &v) < 0)
		return -1;
	f->signal = (int)v;
	f->status = 0;
	f->kernel = DDP_KERNEL_NONE;
	if (!colon)
		return 0;
	if (!strcmp(colon + 1, "oom"))
		f->kernel = DDP_KERNEL_OOM;
	else if (!strcmp(colon + 1, "memory-error"))
		f->kernel = DDP_KERNEL_MEMORY_ERROR;
	return kernel_signal(f->kernel) == f->signal ? 0 : -1;
}

/* "SECONDS.mmm" into milliseconds. */
static int
parse_time(const char *s, long long *ms)
{
	const char *dot = strchr(s, '.');
	char secs[24];
	long sec, milli;

	if (!dot || (size_t)(dot - s) >= sizeof(secs) || strlen(dot + 1) != 3 ||
	    dot[1] < '0' || dot[1] > '9' || s[0] < '0' || s[0] > '9')
		return -1;
	memcpy(secs, s, (size_t)(dot - s));
	secs[dot - s] = '\0';
	if (ddp_parse_long(secs, 0, LONG_MAX / 1000 - 1, &sec) < 0 ||
	    ddp_parse_long(dot + 1, 0, 999, &milli) < 0)
		return -1;
	*ms = (long long)sec * 1000 + milli;
	return 0;
}

/* A rank of a naming ("0"-"2147483647", no sign) into *v. */
static int
parse_rank(const char *s, long *v)
{
	return s[0] >= '0' && s[0] <= '9' &&
			       ddp_parse_long(s, 0, 0x7fffffffL, v) == 0
		       ? 0
		       : -1;
}

/* A whole number of a stop ("0"-LONG_MAX, no sign) into *v. */
static int
parse_count(const char *s, long long *v)
{
	long n;

	if (s[0] < '0' || s[0] > '9' || ddp_parse_long(s, 0, LONG_MAX, &n) < 0)
		return -1;
	*v = n;
	return 0;
}

/* "STEP STOP_WHY CKPT_MS" at *p, the end of the line, into f. */
static int
parse_stop_fields(const char **p, struct ddp_failure *f)
{
	char step[24], ckpt[24];
	struct ddp_failure g = *f;

	if (next_field(p, step, sizeof(step)) < 0 ||
	    parse_count(step, &g.stop_step) < 0 ||
	    next_field(p, g.stop_why, sizeof(g.stop_why)) < 0 ||
	    next_field(p, ckpt, sizeof(ckpt)) < 0 ||
	    parse_count(ckpt, &g.stop_ckpt_ms) < 0 || **p)
		return -1;
	*f = g;
	return 0;
}

/* "BY NAMED NAMED_HOST WHY" at *p, the end of the line, into f. */
static int
parse_naming_fields(const char **p, struct ddp_failure *f)
{
	char by[16], named[16];
	struct ddp_failure g = *f;

	if (next_field(p, by, sizeof(by)) < 0 || parse_rank(by, &g.named_by) ||
	    next_field(p, named, sizeof(named)) < 0 ||
	    parse_rank(named, &g.named_rank) ||
	    next_field(p, g.named_node, sizeof(g.named_node)) < 0 ||
	    next_field(p, g.named_why, sizeof(g.named_why)) < 0 || **p ||
	    !naming_ok(&g))
		return -1;
	g.named = 1;
	*f = g;
	return 0;
}

int
ddp_failure_format_naming(const struct ddp_failure *f, char *buf, size_t len)
{
	if (!naming_ok(f))
		return -1;
	return ddp_fmt(buf, len, "%ld names %ld %s %s\n", f->named_by,
		       f->named_rank, f->named_node, f->named_why);
}

int
ddp_failure_parse_naming(const char *line, struct ddp_failure *f)
{
	char copy[DDP_FAILURE_NAMING_MAX], fields[sizeof(copy)], by[16];
	const char *p = copy;
	size_t n = strlen(line);
	long v;

	if (n && line[n - 1] == '\n')
		n--;
	if (n >= sizeof(copy) || memchr(line, '\n', n))
		return -1;
	memcpy(copy, line, n);
	copy[n] = '\0';
	if (next_field(&p, by, sizeof(by)) < 0 || parse_rank(by, &v) ||
	    strncmp(p, "names ", 6) ||
	    ddp_fmt(fields, sizeof(fields), "%s %s", by, p + 6) < 0)
		return -1;
	p = fields;
	return parse_naming_fields(&p, f);
}

int
ddp_failure_parse_report(const char *line, const char *nonce,
			 struct ddp_failure *f, char *err, size_t errlen)
{
	char copy[DDP_FAILURE_LINE_MAX], nonce_in[DDP_FAILURE_NONCE_HEX + 1];
	char rank[16], how[24], when[32], nodes[16];
	struct ddp_failure out = {0};
	const char *p = copy;
	size_t n = strlen(line);
	unsigned char diff = 0;
	long v;
	size_t i;

	if (n && line[n - 1] == '\n')
		n--;
	if (n >= sizeof(copy))
		return ddp_errf(err, errlen, "a report of %zu bytes", n);
	memcpy(copy, line, n);
	copy[n] = '\0';
	if (next_field(&p, nonce_in, sizeof(nonce_in)) < 0 ||
	    !nonce_ok(nonce_in))
		return ddp_errf(err, errlen, "no nonce");
	if (next_field(&p, rank, sizeof(rank)) < 0 ||
	    ddp_parse_long(rank, 0, 0x7fffffffL, &v) < 0 || rank[0] == '+')
		return ddp_errf(err, errlen, "no rank");
	out.rank = v;
	if (next_field(&p, out.node, sizeof(out.node)) < 0)
		return ddp_errf(err, errlen, "no node");
	if (next_field(&p, how, sizeof(how)) < 0 || parse_how(how, 1, &out) < 0)
		return ddp_errf(err, errlen,
				"no exit:N, signal:N, signal:N:KERNEL or stop");
	if (next_field(&p, when, sizeof(when)) < 0 ||
	    parse_time(when, &out.time_ms) < 0)
		return ddp_errf(err, errlen, "no time");
	if (next_field(&p, nodes, sizeof(nodes)) < 0 ||
	    ddp_parse_long(nodes, 1, 1000000, &v) < 0 || nodes[0] == '+')
		return ddp_errf(err, errlen, "no node count");
	out.nodes = (unsigned long)v;
	if (next_field(&p, out.step_nodes, sizeof(out.step_nodes)) < 0)
		return ddp_errf(err, errlen, "no step node list");
	if (out.stopped && parse_stop_fields(&p, &out) < 0)
		return ddp_errf(err, errlen,
				"a stop without STEP STOP_WHY CKPT_MS, or "
				"more");
	if (!out.stopped && *p && parse_naming_fields(&p, &out) < 0)
		return ddp_errf(err, errlen,
				"a naming that is not BY NAMED "
				"NAMED_HOST WHY, or more");
	if (!fields_ok(&out))
		return ddp_errf(err, errlen, "a name outside Slurm's syntax");
	/* Constant time: the nonce is what makes a report genuine. */
	for (i = 0; i < DDP_FAILURE_NONCE_HEX; i++)
		diff |= (unsigned char)(nonce_in[i] ^ nonce[i]);
	if (diff || !nonce_ok(nonce))
		return -2;
	*f = out;
	return 0;
}

int
ddp_failure_earlier(const struct ddp_failure *a, const struct ddp_failure *b)
{
	if (a->time_ms != b->time_ms)
		return a->time_ms < b->time_ms;
	return a->rank < b->rank;
}

/* 1 for the signals Slurm (scancel, time limits) and people end steps
 * with. */
static int
stop_signal(int sig)
{
	return sig == SIGTERM || sig == SIGINT || sig == SIGHUP;
}

/* The class of a death alone, from its how and its kernel's word. */
static enum ddp_failure_cause
how_cause(int signal, enum ddp_failure_kernel kernel)
{
	if (signal <= 0)
		return DDP_CAUSE_EXIT;
	if (stop_signal(signal))
		return DDP_CAUSE_STOP;
	if (kernel == DDP_KERNEL_OOM && signal == SIGKILL)
		return DDP_CAUSE_OOM;
	if (kernel == DDP_KERNEL_MEMORY_ERROR && signal == SIGBUS)
		return DDP_CAUSE_NODE;
	return DDP_CAUSE_CRASH;
}

enum ddp_failure_cause
ddp_failure_cause_of(const struct ddp_failure *f)
{
	if (f->blame_decided)
		return f->cause;
	if (f->stopped)
		return DDP_CAUSE_STOP;
	return how_cause(f->signal, f->kernel);
}

const char *
ddp_failure_blame(const struct ddp_failure *f)
{
	if (f->blame_decided)
		return f->blamed;
	return ddp_failure_cause_of(f) == DDP_CAUSE_NODE ? f->node : "";
}

static const char *const cause_names[DDP_CAUSE_COUNT] = {
	[DDP_CAUSE_EXIT] = "exit", [DDP_CAUSE_CRASH] = "crash",
	[DDP_CAUSE_OOM] = "oom",   [DDP_CAUSE_HANG] = "hang",
	[DDP_CAUSE_STOP] = "stop", [DDP_CAUSE_NODE] = "node",
};

const char *
ddp_failure_cause_name(enum ddp_failure_cause cause)
{
	return (unsigned)cause < DDP_CAUSE_COUNT ? cause_names[cause] : "";
}

int
ddp_failure_cause_parse(const char *word, enum ddp_failure_cause *cause)
{
	int i;

	for (i = 0; i < DDP_CAUSE_COUNT; i++)
		if (!strcmp(word, cause_names[i])) {
			*cause = (enum ddp_failure_cause)i;
			return 0;
		}
	return -1;
}

const char *
ddp_failure_signal_name(int sig)
{
	static const char *const names[] = {
		[SIGHUP] = "HUP",	[SIGINT] = "INT",
		[SIGQUIT] = "QUIT",	[SIGILL] = "ILL",
		[SIGTRAP] = "TRAP",	[SIGABRT] = "ABRT",
		[SIGBUS] = "BUS",	[SIGFPE] = "FPE",
		[SIGKILL] = "KILL",	[SIGUSR1] = "USR1",
		[SIGSEGV] = "SEGV",	[SIGUSR2] = "USR2",
		[SIGPIPE] = "PIPE",	[SIGALRM] = "ALRM",
		[SIGTERM] = "TERM",	[SIGCHLD] = "CHLD",
		[SIGCONT] = "CONT",	[SIGSTOP] = "STOP",
		[SIGTSTP] = "TSTP",	[SIGTTIN] = "TTIN",
		[SIGTTOU] = "TTOU",	[SIGURG] = "URG",
		[SIGXCPU] = "XCPU",	[SIGXFSZ] = "XFSZ",
		[SIGVTALRM] = "VTALRM", [SIGPROF] = "PROF",
		[SIGWINCH] = "WINCH",	[SIGIO] = "IO",
		[SIGPWR] = "PWR",	[SIGSYS] = "SYS",
	};

	if (sig <= 0 || (size_t)sig >= sizeof(names) / sizeof(names[0]))
		return NULL;
	return names[sig];
}

int
ddp_failure_describe(const struct ddp_failure *f, char *buf, size_t len)
{
	const char *name = ddp_failure_signal_name(f->signal);
	const char *by = f->kernel == DDP_KERNEL_OOM
				 ? " by the kernel's OOM killer"
			 : f->kernel == DDP_KERNEL_MEMORY_ERROR
				 ? " after a memory error on its node"
				 : "";

	if (f->stopped)
		return ddp_fmt(buf, len,
			       "rank %ld on %s stopped after step %lld (%s)",
			       f->rank, f->node, f->stop_step, f->stop_why);
	if (f->signal <= 0)
		return ddp_fmt(buf, len, "rank %ld on %s exited with status %d",
			       f->rank, f->node, f->status);
	if (!name)
		return ddp_fmt(buf, len,
			       "rank %ld on %s was killed by signal %d%s",
			       f->rank, f->node, f->signal, by);
	return ddp_fmt(buf, len,
		       "rank %ld on %s was killed by signal %d (SIG%s)%s",
		       f->rank, f->node, f->signal, name, by);
}

int
ddp_failure_format_record(const struct ddp_failure *f, char *buf, size_t len)
{
	char how[32];

	if (format_how(f, 0, how, sizeof(how)) < 0)
		return -1;
	return ddp_fmt(buf, len,
		       "rank=%ld node=%s how=%s time=%lld.%03lld blame=%s "
		       "nodes=%lu step_nodes=%s why=%s cause=%s\n",
		       f->rank, f->node, how, f->time_ms / 1000,
		       f->time_ms % 1000, ddp_failure_blame(f), f->nodes,
		       f->step_nodes, f->named ? "" : f->named_why,
		       ddp_failure_cause_name(ddp_failure_cause_of(f)));
}

/* Longest record line read; the plugin's are far shorter. */
#define RECORD_LINE_MAX (2 * DDP_FAILURE_NODES_LEN + 512)

/* One key=value of a record; unknown keys are skipped. seen gathers the
 * keys a record must have (1 how, 2 nodes, 4 blame) and 8 for cause. */
static int
record_field(const char *key, const char *v, struct ddp_failure_record *r,
	     unsigned *seen)
{
	struct ddp_failure f = {0};

	if (!strcmp(key, "rank"))
		return ddp_parse_long(v, 0, 0x7fffffffL, &r->rank);
	if (!strcmp(key, "node"))
		return ddp_fmt(r->node, sizeof(r->node), "%s", v);
	if (!strcmp(key, "how")) {
		*seen |= 1;
		if ((strncmp(v, "exit:", 5) && strncmp(v, "signal:", 7)) ||
		    strchr(strchr(v, ':') + 1, ':') || parse_how(v, 0, &f) < 0)
			return -1;
		r->signalled = f.signal > 0;
		r->code = f.signal > 0 ? f.signal : f.status;
		return 0;
	}
	if (!strcmp(key, "why")) {
		if (v[0] && !why_ok(v))
			return -1;
		return ddp_fmt(r->why, sizeof(r->why), "%s", v);
	}
	if (!strcmp(key, "cause")) {
		*seen |= 8;
		return ddp_failure_cause_parse(v, &r->cause);
	}
	if (!strcmp(key, "nodes")) {
		*seen |= 2;
		return ddp_parse_long(v, 1, 1000000, &r->nodes);
	}
	if (!strcmp(key, "blame") || !strcmp(key, "step_nodes")) {
		char *to = key[0] == 'b' ? r->blame : r->step_nodes;

		*seen |= key[0] == 'b' ? 4 : 0;
		if (!v[0]) {
			to[0] = '\0';
			return 0;
		}
		/* Checked now, so that deciding cannot meet a bad list. */
		if (!host_list_ok(v))
			return -1;
		return ddp_fmt(to, DDP_FAILURE_NODES_LEN, "%s", v);
	}
	return 0;
}

int
ddp_failure_parse_record(const char *text, size_t len,
			 struct ddp_failure_record *r, char *err, size_t errlen)
{
	char line[RECORD_LINE_MAX];
	const char *nl = memchr(text, '\n', len);
	char *p, *next;
	unsigned seen = 0;

	memset(r, 0, sizeof(*r));
	r->rank = -1;
	r->nodes = -1;
	if (nl)
		len = (size_t)(nl - text);
	if (len >= sizeof(line))
		return ddp_errf(err, errlen,
				"restart report: a line of %zu bytes, longer "
				"than the %d a report may have",
				len, RECORD_LINE_MAX - 1);
	memcpy(line, text, len);
	line[len] = '\0';
	for (p = line; p && *p; p = next) {
		char *eq;

		next = strchr(p, ' ');
		if (next)
			*next++ = '\0';
		if (!*p)
			continue;
		eq = strchr(p, '=');
		if (!eq)
			return ddp_errf(err, errlen,
					"restart report: '%.60s' is not "
					"key=value",
					p);
		*eq = '\0';
		if (record_field(p, eq + 1, r, &seen) < 0)
			return ddp_errf(err, errlen,
					"restart report: %.40s='%.80s' is not "
					"what the plugin writes",
					p, eq + 1);
	}
	if ((seen & 7) != 7)
		return ddp_errf(err, errlen,
				"restart report: '%.120s' lacks %s", line,
				!(seen & 1)   ? "how="
				: !(seen & 2) ? "nodes="
					      : "blame=");
	/* An older plugin's record: only a node blamed restarted it. */
	if (!(seen & 8))
		r->cause = r->blame[0]	  ? DDP_CAUSE_NODE
			   : r->signalled ? DDP_CAUSE_CRASH
					  : DDP_CAUSE_EXIT;
	if (r->blame[0] && r->cause != DDP_CAUSE_NODE)
		return ddp_errf(err, errlen,
				"restart report: blame=%.80s with cause=%s: "
				"only cause=node blames a node",
				r->blame, ddp_failure_cause_name(r->cause));
	return 0;
}

int
ddp_failure_write_record(const char *path, const struct ddp_failure *f,
			 char *err, size_t errlen)
{
	char line[DDP_FAILURE_LINE_MAX];

	if (ddp_failure_format_record(f, line, sizeof(line)) < 0)
		return ddp_errf(err, errlen, "%s: the record does not fit",
				path);
	return ddp_write_replace(path, line, strlen(line), err, errlen);
}

/* Adds the stop f to set's stops: 0, or -1 when out of memory. */
static int
add_stop(struct ddp_failure_set *set, const struct ddp_failure *f)
{
	struct ddp_failure_stop *e;

	if (set->nstops == set->stopcap) {
		size_t cap = set->stopcap ? set->stopcap * 2 : 16;
		struct ddp_failure_stop *grown =
			realloc(set->stops, cap * sizeof(*grown));

		if (!grown)
			return -1;
		set->stops = grown;
		set->stopcap = cap;
	}
	e = &set->stops[set->nstops++];
	e->rank = f->rank;
	e->step = f->stop_step;
	e->ckpt_ms = f->stop_ckpt_ms;
	ddp_fmt(e->why, sizeof(e->why), "%s", f->stop_why);
	if (set->nstops == 1 || ddp_failure_earlier(f, &set->stop_first))
		set->stop_first = *f;
	return 0;
}

int
ddp_failure_set_add(struct ddp_failure_set *set, const struct ddp_failure *f)
{
	struct ddp_failure_seen *e;

	if (f->stopped)
		return add_stop(set, f);
	if (set->nseen == set->cap) {
		size_t cap = set->cap ? set->cap * 2 : 16;
		struct ddp_failure_seen *grown =
			realloc(set->seen, cap * sizeof(*grown));

		if (!grown)
			return -1;
		set->seen = grown;
		set->cap = cap;
	}
	e = &set->seen[set->nseen++];
	e->rank = f->rank;
	ddp_fmt(e->node, sizeof(e->node), "%s", f->node);
	e->signal = f->signal;
	e->status = f->status;
	e->kernel = f->kernel;
	e->time_ms = f->time_ms;
	e->named_rank = f->named ? f->named_rank : -1;
	ddp_fmt(e->named_node, sizeof(e->named_node), "%s",
		f->named ? f->named_node : "");
	ddp_fmt(e->named_why, sizeof(e->named_why), "%s",
		f->named ? f->named_why : "");
	if (!set->have_first || ddp_failure_earlier(f, &set->first)) {
		set->first = *f;
		set->have_first = 1;
	}
	if (f->named &&
	    (!set->have_naming || ddp_failure_earlier(f, &set->naming))) {
		set->naming = *f;
		set->have_naming = 1;
	}
	return 0;
}

/* The earliest report of rank, or NULL. */
static const struct ddp_failure_seen *
seen_rank(const struct ddp_failure_set *set, long rank)
{
	const struct ddp_failure_seen *best = NULL;
	size_t i;

	for (i = 0; i < set->nseen; i++) {
		const struct ddp_failure_seen *e = &set->seen[i];

		if (e->rank == rank && (!best || e->time_ms < best->time_ms))
			best = e;
	}
	return best;
}

/* 1 when node is one of the host list nodes (count nodes). */
static int
step_has(const char *nodes, unsigned long count, const char *node)
{
	struct ddp_hostlist hl = {0};
	char err[128];
	size_t i;
	int found = 0;

	if (ddp_hostlist_parse(nodes, count + 1, &hl, err, sizeof(err)) < 0)
		return 0;
	for (i = 0; i < hl.n && !found; i++)
		found = !strcmp(hl.hosts[i], node);
	ddp_hostlist_free(&hl);
	return found;
}

/* Decides the class of *c, and the node it blames (node, for class
 * node alone). */
static void
decide_blame(struct ddp_failure *c, enum ddp_failure_cause cause,
	     const char *node)
{
	c->blame_decided = 1;
	c->cause = cause;
	ddp_fmt(c->blamed, sizeof(c->blamed), "%s",
		cause == DDP_CAUSE_NODE && node ? node : "");
}

/* 1 for a WHY that says a rank was silent or gone ("lost",
 * "unreachable", "hang"), which its node's loss or a cut link would also
 * make it; not "behind", a rank seen waiting itself. */
static int
why_may_be_node(const char *why)
{
	return strcmp(why, "behind") != 0;
}

/* Node evidence about rank (on node) in set (failure.h, rule 2): a rank of
 * another node named it silent or gone, and either no report came from
 * its node (a node that is up reports its tasks' end before srun ends),
 * or its own report (own) names a rank of another node so: each side of
 * a cut link sees the other silent, a stopped or hung rank names no one. */
static int
node_evidence(const struct ddp_failure_set *set, long rank, const char *node,
	      const struct ddp_failure_seen *own)
{
	int other = 0, from_node = 0;
	size_t i;

	for (i = 0; i < set->nseen; i++) {
		const struct ddp_failure_seen *e = &set->seen[i];

		from_node |= !strcmp(e->node, node);
		other |= e->named_rank == rank && strcmp(e->node, node) &&
			 why_may_be_node(e->named_why);
	}
	if (!other)
		return 0;
	if (!from_node)
		return 1;
	return own && own->named_rank >= 0 && why_may_be_node(own->named_why) &&
	       strcmp(own->named_node, own->node);
}

/* Rule 2 (failure.h): the cause the naming n names, into c. */
static void
named_cause(const struct ddp_failure_set *set, const struct ddp_failure *n,
	    struct ddp_failure *c, char *what, size_t whatlen)
{
	const struct ddp_failure_seen *own = seen_rank(set, n->named_rank);
	const char *node, *words;

	*c = *n;
	c->named = 0;
	c->rank = n->named_rank;
	if (own) {
		ddp_fmt(c->node, sizeof(c->node), "%s", own->node);
		c->signal = own->signal;
		c->status = own->status;
		c->time_ms = own->time_ms;
	}
	c->kernel = own ? own->kernel : DDP_KERNEL_NONE;
	if (own && ((own->signal <= 0 && own->named_rank < 0) ||
		    (own->signal > 0 && !strcmp(n->named_why, "lost")))) {
		c->named_why[0] = '\0';
		decide_blame(c, how_cause(own->signal, own->kernel), c->node);
		ddp_failure_describe(c, what, whatlen);
		return;
	}
	node = own ? own->node
	       : step_has(n->step_nodes, n->nodes, n->named_node)
		       ? n->named_node
		       : NULL;
	if (!own)
		ddp_fmt(c->node, sizeof(c->node), "%s",
			node ? node : n->named_node);
	decide_blame(c,
		     node && why_may_be_node(n->named_why) &&
				     node_evidence(set, c->rank, node, own)
			     ? DDP_CAUSE_NODE
			     : DDP_CAUSE_HANG,
		     node);
	words = ddp_failure_why_words(n->named_why);
	ddp_fmt(what, whatlen, "rank %ld on %s %s (named by rank %ld)", c->rank,
		c->node, words ? words : "is unreachable", n->named_by);
}

/* Rule 2's chain (failure.h): the report whose naming report i's counts
 * as; link NULL (no chain followed) counts each as its own. */
static size_t
linked(const size_t *link, size_t i)
{
	return link ? link[i] : i;
}

/* The index of the earliest report of rank, or set->nseen for none. */
static size_t
report_of(const struct ddp_failure_set *set, long rank)
{
	const struct ddp_failure_seen *e = seen_rank(set, rank);

	return e ? (size_t)(e - set->seen) : set->nseen;
}

/*
 * Rule 2's chain (failure.h), for each report i: link[i] is i, or, while
 * the naming in hand names a waiter ("behind") whose own report names a
 * rank that is not yet on the chain (nor i's own rank), that report.
 * Returns the links (nseen, the caller frees them), or NULL when out of
 * memory: then no chain is followed.
 */
static size_t *
chain_links(const struct ddp_failure_set *set)
{
	size_t n = set->nseen, i, cur, next, after;
	size_t *link, *own, *mark;

	link = calloc(n ? 3 * n : 1, sizeof(*link));
	if (!link)
		return NULL;
	own = link + n;
	mark = own + n;
	for (i = 0; i < n; i++)
		own[i] = set->seen[i].named_rank < 0
				 ? n
				 : report_of(set, set->seen[i].named_rank);
	for (i = 0; i < n; i++) {
		/* mark[k] == i + 1: report k's rank is on i's chain. */
		for (cur = i;; cur = next) {
			next = own[cur];
			if (set->seen[cur].named_rank < 0 ||
			    strcmp(set->seen[cur].named_why, "behind") ||
			    next == n || set->seen[next].named_rank < 0)
				break;
			mark[next] = i + 1;
			after = own[next];
			if (set->seen[next].named_rank == set->seen[i].rank ||
			    (after < n && mark[after] == i + 1))
				break;
		}
		link[i] = cur;
	}
	return link;
}

/* How many reports name rank, at the end of their chains. */
static size_t
times_named(const struct ddp_failure_set *set, const size_t *link, long rank)
{
	size_t i, n = 0;

	for (i = 0; i < set->nseen; i++)
		n += set->seen[i].named_rank >= 0 &&
		     set->seen[linked(link, i)].named_rank == rank;
	return n;
}

/* 1 when report i's chain ends at a naming of a rank silent or gone, not
 * at a waiter ("behind") that named no one itself. */
static int
ends_direct(const struct ddp_failure_set *set, const size_t *link, size_t i)
{
	return strcmp(set->seen[linked(link, i)].named_why, "behind") != 0;
}

/* The index of the earliest report with a naming (set->naming's); by_end,
 * among those whose chain ends at a rank named silent or gone
 * when there is one: a waiter that named no one (an abort reached it
 * before its own timeout) is a weaker lead than a rank another survey
 * saw silent. */
static size_t
earliest_naming(const struct ddp_failure_set *set, const size_t *link,
		int by_end)
{
	size_t i, first = set->nseen;
	int direct, first_direct = 0;

	for (i = 0; i < set->nseen; i++) {
		const struct ddp_failure_seen *e = &set->seen[i], *f;

		if (e->named_rank < 0)
			continue;
		direct = by_end && ends_direct(set, link, i);
		f = first < set->nseen ? &set->seen[first] : NULL;
		if (!f || direct > first_direct ||
		    (direct == first_direct &&
		     (e->time_ms < f->time_ms ||
		      (e->time_ms == f->time_ms && e->rank < f->rank)))) {
			first = i;
			first_direct = direct;
		}
	}
	return first;
}

/* Rule 2's naming (failure.h): the earliest one, or the earliest of the
 * rank the reports name most often when that is another, each at the end
 * of its chain, into n. */
static void
deciding_naming(const struct ddp_failure_set *set, const size_t *link,
		struct ddp_failure *n)
{
	const struct ddp_failure_seen *best = NULL, *to;
	size_t first = earliest_naming(set, link, 1), i, top, k;

	*n = set->naming;
	if (first == set->nseen)
		return;
	top = times_named(set, link, set->seen[linked(link, first)].named_rank);
	/* Named more often than the earliest naming's rank; among ranks
	 * named as often, the earliest naming. */
	for (i = 0; i < set->nseen; i++) {
		const struct ddp_failure_seen *e = &set->seen[i];

		if (e->named_rank < 0)
			continue;
		k = times_named(set, link,
				set->seen[linked(link, i)].named_rank);
		if (k > top ||
		    (best && k == top && e->time_ms < best->time_ms)) {
			best = e;
			top = k;
		}
	}
	if (!best && first != earliest_naming(set, link, 0))
		best = &set->seen[first];
	if (best) {
		/* Not the earliest naming's report: the chosen one's. */
		n->rank = best->rank;
		ddp_fmt(n->node, sizeof(n->node), "%s", best->node);
		n->signal = best->signal;
		n->status = best->status;
		n->kernel = best->kernel;
		n->time_ms = best->time_ms;
	} else if (linked(link, first) == first) {
		return;
	}
	to = &set->seen[linked(link,
			       best ? (size_t)(best - set->seen) : first)];
	n->named_by = to->rank;
	n->named_rank = to->named_rank;
	ddp_fmt(n->named_node, sizeof(n->named_node), "%s", to->named_node);
	ddp_fmt(n->named_why, sizeof(n->named_why), "%s", to->named_why);
}

int
ddp_failure_set_cause(const struct ddp_failure_set *set,
		      struct ddp_failure *cause, char *what, size_t whatlen)
{
	struct ddp_failure naming;
	size_t *link;

	if (!set->have_first)
		return 0;
	if ((set->first.signal > 0 && !stop_signal(set->first.signal)) ||
	    !set->have_naming) {
		*cause = set->first;
		cause->named = 0;
		cause->named_why[0] = '\0';
		decide_blame(cause, ddp_failure_cause_of(&set->first),
			     set->first.node);
		if (ddp_failure_describe(cause, what, whatlen) < 0)
			ddp_fmt(what, whatlen, "rank %ld failed", cause->rank);
		return 1;
	}
	link = chain_links(set);
	deciding_naming(set, link, &naming);
	free(link);
	named_cause(set, &naming, cause, what, whatlen);
	return 1;
}

/* qsort's order of stops: by rank. */
static int
stop_by_rank(const void *a, const void *b)
{
	const struct ddp_failure_stop *x = a, *y = b;

	return (x->rank > y->rank) - (x->rank < y->rank);
}

/* The most reasons srun's stop line lists. */
#define STOP_REASONS_SHOWN 4

size_t
ddp_failure_set_stopped(const struct ddp_failure_set *set, unsigned long ntasks,
			struct ddp_failure *stop, char *what, size_t whatlen)
{
	struct ddp_failure_stop *by_rank;
	char ranks[48], steps[64], reasons[256];
	long long lo, hi, ckpt = 0;
	size_t i, shown = 0, more = 0;

	if (set->have_first || !set->nstops)
		return 0;
	/* A copy, so the set stays untouched: sorted by rank for the line. */
	by_rank = malloc(set->nstops * sizeof(*by_rank));
	if (by_rank) {
		memcpy(by_rank, set->stops, set->nstops * sizeof(*by_rank));
		qsort(by_rank, set->nstops, sizeof(*by_rank), stop_by_rank);
	}
	lo = hi = set->stops[0].step;
	reasons[0] = '\0';
	for (i = 0; i < set->nstops; i++) {
		const struct ddp_failure_stop *e =
			by_rank ? &by_rank[i] : &set->stops[i];

		lo = e->step < lo ? e->step : lo;
		hi = e->step > hi ? e->step : hi;
		ckpt = e->ckpt_ms > ckpt ? e->ckpt_ms : ckpt;
		if (!strcmp(e->why, "agreed"))
			continue;
		if (shown == STOP_REASONS_SHOWN) {
			more++;
			continue;
		}
		ddp_fmt_cat(reasons, sizeof(reasons), "%s%s on rank %ld",
			    shown ? "; " : " (", e->why, e->rank);
		shown++;
	}
	free(by_rank);
	if (more)
		ddp_fmt_cat(reasons, sizeof(reasons), "; %zu more", more);
	if (shown)
		ddp_fmt_cat(reasons, sizeof(reasons), ")");
	if (ntasks && set->nstops >= ntasks)
		ddp_fmt(ranks, sizeof(ranks), "every rank");
	else if (ntasks)
		ddp_fmt(ranks, sizeof(ranks), "%zu of %lu ranks", set->nstops,
			ntasks);
	else
		ddp_fmt(ranks, sizeof(ranks), "%zu rank%s", set->nstops,
			set->nstops == 1 ? "" : "s");
	if (lo == hi)
		ddp_fmt(steps, sizeof(steps), "step %lld", lo);
	else
		ddp_fmt(steps, sizeof(steps), "steps %lld to %lld", lo, hi);
	if (ddp_fmt(what, whatlen,
		    "stopped on %s after %s%s: checkpoint written in "
		    "%lld.%02lld "
		    "s",
		    ranks, steps, reasons, ckpt / 1000, ckpt % 1000 / 10) < 0)
		ddp_fmt(what, whatlen, "stopped on %s after %s", ranks, steps);
	*stop = set->stop_first;
	stop->blame_decided = 1;
	stop->cause = DDP_CAUSE_STOP;
	stop->blamed[0] = '\0';
	return set->nstops;
}

void
ddp_failure_set_free(struct ddp_failure_set *set)
{
	free(set->stops);
	free(set->seen);
	memset(set, 0, sizeof(*set));
}
