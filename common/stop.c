/* SPDX-License-Identifier: BSD-3-Clause */
/* An agreed stop's words, values, decision and note (stop.h). */
#include "stop.h"

#include <limits.h>
#include <signal.h>
#include <string.h>

#include "ddp_util.h"

/* DDP_STOP_BEFORE's largest number of seconds: a week. */
#define STOP_BEFORE_MAX 604800L
/* The latest end time read (year 5138): beyond it a value is a typo. */
#define END_TIME_MAX 99999999999L
/* A stop note's fields, in their order. */
#define NOTE_PREFIX "stop "

static const char *const why_names[] = {
	[DDP_STOP_NONE] = "none",	[DDP_STOP_TIME] = "time-limit",
	[DDP_STOP_SIGTERM] = "sigterm", [DDP_STOP_SIGUSR1] = "sigusr1",
	[DDP_STOP_SIGUSR2] = "sigusr2", [DDP_STOP_SIGHUP] = "sighup",
	[DDP_STOP_REQUEST] = "request", [DDP_STOP_AGREED] = "agreed",
};
#define WHY_COUNT (sizeof(why_names) / sizeof(why_names[0]))

const char *
ddp_stop_why_name(enum ddp_stop_why why)
{
	if ((unsigned)why >= WHY_COUNT)
		return "?";
	return why_names[why];
}

int
ddp_stop_why_parse(const char *word, enum ddp_stop_why *why)
{
	size_t i;

	if (!word)
		return -1;
	for (i = 0; i < WHY_COUNT; i++) {
		if (!strcmp(word, why_names[i])) {
			*why = (enum ddp_stop_why)i;
			return 0;
		}
	}
	return -1;
}

enum ddp_stop_why
ddp_stop_why_of_signal(int sig)
{
	switch (sig) {
	case SIGTERM:
		return DDP_STOP_SIGTERM;
	case SIGUSR1:
		return DDP_STOP_SIGUSR1;
	case SIGUSR2:
		return DDP_STOP_SIGUSR2;
	case SIGHUP:
		return DDP_STOP_SIGHUP;
	default:
		return DDP_STOP_NONE;
	}
}

int
ddp_stop_before_parse(const char *value, struct ddp_stop_before *out, char *err,
		      size_t errlen)
{
	long secs;

	if (value && !strcmp(value, "auto")) {
		*out = (struct ddp_stop_before){.automatic = 1};
		return 0;
	}
	/* A leading sign is not a number of seconds a person writes. */
	if (!value || value[0] == '+' || value[0] == '-' ||
	    ddp_parse_long(value, 0, STOP_BEFORE_MAX, &secs) < 0)
		return ddp_errf(err, errlen,
				"invalid value '%.64s' (use auto, 0 to turn "
				"stopping off, or whole seconds from 1 to %ld)",
				value ? value : "", STOP_BEFORE_MAX);
	if (secs == 0)
		*out = (struct ddp_stop_before){.off = 1};
	else
		*out = (struct ddp_stop_before){.secs = (double)secs};
	return 0;
}

int
ddp_stop_end_parse(const char *text, double *end)
{
	char digits[24];
	size_t n;
	long v;

	if (!text)
		return -1;
	n = strlen(text);
	if (n && text[n - 1] == '\n')
		n--;
	if (n == 0 || n >= sizeof(digits) || text[0] == '+' || text[0] == '-')
		return -1;
	memcpy(digits, text, n);
	digits[n] = '\0';
	if (ddp_parse_long(digits, 1, END_TIME_MAX, &v) < 0)
		return -1;
	*end = (double)v;
	return 0;
}

double
ddp_stop_margin(double step_s, double ckpt_s)
{
	if (step_s < 0)
		step_s = 0;
	if (ckpt_s < 0)
		ckpt_s = 0;
	return 2 * step_s + 1.5 * ckpt_s + DDP_STOP_EXIT_SECONDS;
}

int
ddp_stop_due(const struct ddp_stop_before *before, double now, double end,
	     double step_s, double ckpt_s)
{
	double margin;

	if (!before || before->off || end <= 0)
		return 0;
	margin = before->automatic ? ddp_stop_margin(step_s, ckpt_s)
				   : before->secs;
	if (margin <= 0)
		return 0;
	return now + margin >= end;
}

int
ddp_stop_note_format(const struct ddp_stop_note *n, char *buf, size_t len)
{
	if (len)
		buf[0] = '\0';
	if (n->rank < 0 || n->step < 0 || n->ckpt_ms < 0 ||
	    n->why <= DDP_STOP_NONE || (unsigned)n->why >= WHY_COUNT)
		return -1;
	return ddp_fmt(buf, len,
		       NOTE_PREFIX "rank=%d step=%lld why=%s "
				   "ckpt_ms=%lld\n",
		       n->rank, n->step, why_names[n->why], n->ckpt_ms);
}

/* Reads "KEY=" then a non-negative decimal up to max from *p, leaving *p
 * after the digits. */
static int
note_number(const char **p, const char *key, long max, long *v)
{
	size_t klen = strlen(key);

	if (strncmp(*p, key, klen) || (*p)[klen] == '+' || (*p)[klen] == '-')
		return -1;
	return ddp_parse_long_prefix(*p + klen, 0, max, v, p);
}

int
ddp_stop_note_parse(const char *line, struct ddp_stop_note *n)
{
	struct ddp_stop_note out = {0};
	const char *p = line, *end;
	char word[16];
	long v;
	size_t wlen;

	if (!line || strncmp(p, NOTE_PREFIX, strlen(NOTE_PREFIX)))
		return -1;
	p += strlen(NOTE_PREFIX);
	if (note_number(&p, "rank=", INT_MAX, &v) < 0 || *p++ != ' ')
		return -1;
	out.rank = (int)v;
	if (note_number(&p, "step=", LONG_MAX, &v) < 0 || *p++ != ' ')
		return -1;
	out.step = v;
	if (strncmp(p, "why=", 4))
		return -1;
	p += 4;
	end = strchr(p, ' ');
	if (!end)
		return -1;
	wlen = (size_t)(end - p);
	if (wlen == 0 || wlen >= sizeof(word))
		return -1;
	memcpy(word, p, wlen);
	word[wlen] = '\0';
	if (ddp_stop_why_parse(word, &out.why) < 0 || out.why == DDP_STOP_NONE)
		return -1;
	p = end + 1;
	if (note_number(&p, "ckpt_ms=", LONG_MAX, &v) < 0)
		return -1;
	out.ckpt_ms = v;
	if (*p == '\n')
		p++;
	if (*p != '\0')
		return -1;
	*n = out;
	return 0;
}
