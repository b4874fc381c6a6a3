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
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ddp_util.h"
#include "failure.h"

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

/* "exit:N" or "signal:N" into buf. */
static int
format_how(const struct ddp_failure *f, char *buf, size_t len)
{
	if (f->signal > 0)
		return ddp_fmt(buf, len, "signal:%d", f->signal);
	return ddp_fmt(buf, len, "exit:%d", f->status);
}

/* The fields both lines share, checked. */
static int
fields_ok(const struct ddp_failure *f)
{
	return f->rank >= 0 && word_ok(f->node, sizeof(f->node), "") &&
	       word_ok(f->step_nodes, sizeof(f->step_nodes), ",[]") &&
	       f->time_ms >= 0 && f->nodes > 0 &&
	       (f->signal > 0 ? f->signal <= SIGNAL_MAX
			      : f->status > 0 && f->status <= 255);
}

int
ddp_failure_format_report(const struct ddp_failure *f, const char *nonce,
			  char *buf, size_t len)
{
	char how[32];

	if (!nonce_ok(nonce) || !fields_ok(f) ||
	    format_how(f, how, sizeof(how)) < 0)
		return -1;
	return ddp_fmt(buf, len, "%s %ld %s %s %lld.%03lld %lu %s\n", nonce,
		       f->rank, f->node, how, f->time_ms / 1000,
		       f->time_ms % 1000, f->nodes, f->step_nodes);
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

/* "exit:N" or "signal:N" into f. */
static int
parse_how(const char *s, struct ddp_failure *f)
{
	long v;

	if (!strncmp(s, "exit:", 5) && ddp_parse_long(s + 5, 1, 255, &v) == 0 &&
	    s[5] != '+') {
		f->signal = 0;
		f->status = (int)v;
		return 0;
	}
	if (!strncmp(s, "signal:", 7) &&
	    ddp_parse_long(s + 7, 1, SIGNAL_MAX, &v) == 0 && s[7] != '+') {
		f->signal = (int)v;
		f->status = 0;
		return 0;
	}
	return -1;
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
	if (next_field(&p, how, sizeof(how)) < 0 || parse_how(how, &out) < 0)
		return ddp_errf(err, errlen, "no exit:N or signal:N");
	if (next_field(&p, when, sizeof(when)) < 0 ||
	    parse_time(when, &out.time_ms) < 0)
		return ddp_errf(err, errlen, "no time");
	if (next_field(&p, nodes, sizeof(nodes)) < 0 ||
	    ddp_parse_long(nodes, 1, 1000000, &v) < 0 || nodes[0] == '+')
		return ddp_errf(err, errlen, "no node count");
	out.nodes = (unsigned long)v;
	if (next_field(&p, out.step_nodes, sizeof(out.step_nodes)) < 0 || *p)
		return ddp_errf(err, errlen, "no step node list, or more");
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

const char *
ddp_failure_blame(const struct ddp_failure *f)
{
	if (f->signal <= 0 || f->signal == SIGTERM || f->signal == SIGINT ||
	    f->signal == SIGHUP)
		return "";
	return f->node;
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

	if (f->signal <= 0)
		return ddp_fmt(buf, len, "rank %ld on %s exited with status %d",
			       f->rank, f->node, f->status);
	if (!name)
		return ddp_fmt(buf, len,
			       "rank %ld on %s was killed by signal %d",
			       f->rank, f->node, f->signal);
	return ddp_fmt(buf, len,
		       "rank %ld on %s was killed by signal %d (SIG%s)",
		       f->rank, f->node, f->signal, name);
}

int
ddp_failure_format_record(const struct ddp_failure *f, char *buf, size_t len)
{
	char how[32];

	if (format_how(f, how, sizeof(how)) < 0)
		return -1;
	return ddp_fmt(buf, len,
		       "rank=%ld node=%s how=%s time=%lld.%03lld blame=%s "
		       "nodes=%lu step_nodes=%s\n",
		       f->rank, f->node, how, f->time_ms / 1000,
		       f->time_ms % 1000, ddp_failure_blame(f), f->nodes,
		       f->step_nodes);
}

int
ddp_failure_write_record(const char *path, const struct ddp_failure *f,
			 char *err, size_t errlen)
{
	char line[DDP_FAILURE_LINE_MAX], tmp[PATH_MAX];
	int fd = -1, rc = -1;

	tmp[0] = '\0';
	if (ddp_failure_format_record(f, line, sizeof(line)) < 0) {
		ddp_errf(err, errlen, "%s: the record does not fit", path);
		goto out;
	}
	if (ddp_fmt(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) < 0) {
		tmp[0] = '\0';
		ddp_errf(err, errlen, "%.200s: name too long", path);
		goto out;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
		  0600);
	if (fd < 0) {
		ddp_errf(err, errlen, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	if (fchmod(fd, 0600) < 0 || ddp_write_all(fd, line, strlen(line)) < 0 ||
	    fsync(fd) < 0) {
		ddp_errf(err, errlen, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	if (close(fd) < 0) {
		fd = -1;
		ddp_errf(err, errlen, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	fd = -1;
	if (rename(tmp, path) < 0) {
		ddp_errf(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	tmp[0] = '\0';
	rc = 0;
out:
	ddp_close(&fd);
	if (tmp[0] && rc < 0)
		unlink(tmp);
	return rc;
}
