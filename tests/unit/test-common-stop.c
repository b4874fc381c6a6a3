/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An agreed stop's shared words (stop.h): the stop note round trips and
 * its rejects, DDP_STOP_BEFORE and end time values, the why words and
 * signals, and the margin and decision at their edges.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "stop.h"
#include "tap.h"

static void
test_why(void)
{
	static const enum ddp_stop_why all[] = {
		DDP_STOP_TIME,	  DDP_STOP_SIGTERM, DDP_STOP_SIGUSR1,
		DDP_STOP_SIGUSR2, DDP_STOP_SIGHUP,  DDP_STOP_REQUEST,
		DDP_STOP_AGREED,
	};
	enum ddp_stop_why back;
	size_t i;
	int ok = 1;

	for (i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		back = DDP_STOP_NONE;
		if (ddp_stop_why_parse(ddp_stop_why_name(all[i]), &back) < 0 ||
		    back != all[i])
			ok = 0;
	}
	tap_ok(ok, "every why word reads back as its value");
	tap_ok(!strcmp(ddp_stop_why_name(DDP_STOP_TIME), "time-limit") &&
		       !strcmp(ddp_stop_why_name(DDP_STOP_SIGTERM),
			       "sigterm") &&
		       !strcmp(ddp_stop_why_name(DDP_STOP_AGREED), "agreed"),
	       "the words are the documented ones");
	tap_ok(!strcmp(ddp_stop_why_name((enum ddp_stop_why)99), "?") &&
		       !strcmp(ddp_stop_why_name((enum ddp_stop_why) - 1), "?"),
	       "an unknown value is named ?");
	tap_ok(ddp_stop_why_parse("SIGTERM", &back) < 0 &&
		       ddp_stop_why_parse("", &back) < 0 &&
		       ddp_stop_why_parse("sigterm ", &back) < 0 &&
		       ddp_stop_why_parse(NULL, &back) < 0,
	       "other words are refused");
	tap_ok(ddp_stop_why_of_signal(SIGTERM) == DDP_STOP_SIGTERM &&
		       ddp_stop_why_of_signal(SIGUSR1) == DDP_STOP_SIGUSR1 &&
		       ddp_stop_why_of_signal(SIGUSR2) == DDP_STOP_SIGUSR2 &&
		       ddp_stop_why_of_signal(SIGHUP) == DDP_STOP_SIGHUP,
	       "the four stop signals give their reasons");
	tap_ok(ddp_stop_why_of_signal(SIGINT) == DDP_STOP_NONE &&
		       ddp_stop_why_of_signal(SIGKILL) == DDP_STOP_NONE &&
		       ddp_stop_why_of_signal(0) == DDP_STOP_NONE,
	       "other signals ask no stop");
}

static void
test_before(void)
{
	static const char *const bad[] = {
		"",
		"-1",
		"+5",
		"1.5",
		"auto ",
		"AUTO",
		"off",
		"5s",
		"604801",
		" 5",
		"99999999999999999999",
	};
	struct ddp_stop_before b;
	char err[256];
	size_t i;
	int ok = 1;

	tap_ok(ddp_stop_before_parse("auto", &b, err, sizeof(err)) == 0 &&
		       b.automatic && !b.off,
	       "auto is automatic");
	tap_ok(ddp_stop_before_parse("0", &b, err, sizeof(err)) == 0 && b.off &&
		       !b.automatic,
	       "0 turns stopping off");
	tap_ok(ddp_stop_before_parse("120", &b, err, sizeof(err)) == 0 &&
		       !b.off && !b.automatic && b.secs == 120.0,
	       "120 is 120 seconds");
	tap_ok(ddp_stop_before_parse("604800", &b, err, sizeof(err)) == 0 &&
		       b.secs == 604800.0,
	       "a week is the most");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		if (ddp_stop_before_parse(bad[i], &b, err, sizeof(err)) != -1 ||
		    !strstr(err, "auto") || !strstr(err, "604800")) {
			tap_diag("'%s' -> '%s'", bad[i], err);
			ok = 0;
		}
	}
	tap_ok(ok, "bad values are refused, saying what is accepted");
	ddp_stop_before_parse("maybe", &b, err, sizeof(err));
	tap_ok(strstr(err, "'maybe'") != NULL, "the error names the value: %s",
	       err);
	tap_ok(ddp_stop_before_parse(NULL, &b, err, sizeof(err)) == -1,
	       "NULL is refused");
}

static void
test_end(void)
{
	static const char *const bad[] = {
		"",
		"\n",
		"0",
		"-5",
		"+5",
		"1.5",
		"17e8",
		"123\n\n",
		" 123",
		"123 ",
		"abc",
		"123\nx",
		"999999999999",
		"99999999999999999999999",
	};
	double end = -1;
	size_t i;
	int ok = 1;

	tap_ok(ddp_stop_end_parse("1790000000", &end) == 0 &&
		       end == 1790000000.0,
	       "whole seconds are read");
	end = -1;
	tap_ok(ddp_stop_end_parse("1790000000\n", &end) == 0 &&
		       end == 1790000000.0,
	       "a trailing newline is allowed");
	tap_ok(ddp_stop_end_parse("1", &end) == 0 && end == 1.0,
	       "1 is the earliest");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		end = -7;
		if (ddp_stop_end_parse(bad[i], &end) != -1 || end != -7) {
			tap_diag("'%s' was read", bad[i]);
			ok = 0;
		}
	}
	tap_ok(ok, "bad end times are refused and leave the value alone");
	tap_ok(ddp_stop_end_parse(NULL, &end) == -1, "NULL is refused");
}

static void
test_due(void)
{
	struct ddp_stop_before autob = {.automatic = 1};
	struct ddp_stop_before off = {.off = 1};
	struct ddp_stop_before secs = {.secs = 60};

	tap_ok(ddp_stop_margin(0, 0) == 15.0, "the margin with nothing "
					      "measured is 15 s");
	tap_ok(ddp_stop_margin(2, 10) == 2 * 2 + 1.5 * 10 + 15,
	       "the margin is 2 steps + 1.5 checkpoints + 15 s");
	tap_ok(ddp_stop_margin(-1, -1) == 15.0,
	       "a negative measure counts as 0");
	/* auto, step 2 s, checkpoint 10 s: margin 34 s. */
	tap_ok(!ddp_stop_due(&autob, 1000, 1034.5, 2, 10),
	       "auto: not due with 34.5 s left of a 34 s margin");
	tap_ok(ddp_stop_due(&autob, 1000, 1034, 2, 10),
	       "auto: due with exactly the margin left");
	tap_ok(ddp_stop_due(&autob, 1000, 990, 2, 10),
	       "auto: due past the end time");
	tap_ok(!ddp_stop_due(&autob, 1000, 0, 2, 10) &&
		       !ddp_stop_due(&autob, 1000, -1, 2, 10),
	       "no end time known: never due");
	tap_ok(!ddp_stop_due(&off, 1000, 1001, 2, 10),
	       "off: never due, even a second before the end");
	tap_ok(!ddp_stop_due(&secs, 1000, 1060.5, 100, 100),
	       "SECS: not due with more than SECS left, whatever the steps");
	tap_ok(ddp_stop_due(&secs, 1000, 1060, 0, 0),
	       "SECS: due with exactly SECS left");
	tap_ok(!ddp_stop_due(NULL, 1000, 1001, 0, 0), "no setting: never due");
}

static void
test_note(void)
{
	struct ddp_stop_note n = {.rank = 3,
				  .step = 1234,
				  .why = DDP_STOP_SIGUSR1,
				  .ckpt_ms = 87};
	struct ddp_stop_note big = {.rank = 0x7fffffff,
				    .step = 0x7fffffffffffffffLL,
				    .why = DDP_STOP_TIME,
				    .ckpt_ms = 0x7fffffffffffffffLL};
	struct ddp_stop_note back, zero = {.why = DDP_STOP_AGREED};
	static const char *const bad[] = {
		"",
		"stop",
		"stop rank=1 step=2 why=agreed",
		"stop rank=1 step=2 why=agreed ckpt_ms=",
		"stop rank=-1 step=2 why=agreed ckpt_ms=3\n",
		"stop rank=+1 step=2 why=agreed ckpt_ms=3\n",
		"stop rank=1 step=-2 why=agreed ckpt_ms=3\n",
		"stop rank=1 step=2 why=agreed ckpt_ms=-3\n",
		"stop rank=1 step=2 why=none ckpt_ms=3\n",
		"stop rank=1 step=2 why=SIGTERM ckpt_ms=3\n",
		"stop rank=1 step=2 why= ckpt_ms=3\n",
		"stop rank=1 step=2 why=agreed ckpt_ms=3\n\n",
		"stop rank=1 step=2 why=agreed ckpt_ms=3 x\n",
		"stop rank=1  step=2 why=agreed ckpt_ms=3\n",
		"stop step=2 rank=1 why=agreed ckpt_ms=3\n",
		"stop rank=2147483648 step=2 why=agreed ckpt_ms=3\n",
		"stop rank=1 step=99999999999999999999 why=agreed ckpt_ms=3\n",
		" stop rank=1 step=2 why=agreed ckpt_ms=3\n",
		"stopx rank=1 step=2 why=agreed ckpt_ms=3\n",
		"rank=1 step=2 why=agreed ckpt_ms=3\n",
		/* A naming line is not a stop note. */
		"ddp: rank 1 (pid 4, node n2) hangs in allreduce\n",
	};
	char buf[DDP_STOP_NOTE_MAX], small[20];
	size_t i;
	int ok = 1;

	tap_ok(ddp_stop_note_format(&n, buf, sizeof(buf)) == 0 &&
		       !strcmp(buf, "stop rank=3 step=1234 why=sigusr1 "
				    "ckpt_ms=87\n"),
	       "the note's line: %s", buf);
	memset(&back, 0xff, sizeof(back));
	tap_ok(ddp_stop_note_parse(buf, &back) == 0 && back.rank == 3 &&
		       back.step == 1234 && back.why == DDP_STOP_SIGUSR1 &&
		       back.ckpt_ms == 87,
	       "it reads back");
	tap_ok(ddp_stop_note_format(&big, buf, sizeof(buf)) == 0 &&
		       ddp_stop_note_parse(buf, &back) == 0 &&
		       back.rank == big.rank && back.step == big.step &&
		       back.why == big.why && back.ckpt_ms == big.ckpt_ms,
	       "the largest fields round trip and fit: %zu bytes", strlen(buf));
	tap_ok(ddp_stop_note_format(&zero, buf, sizeof(buf)) == 0 &&
		       ddp_stop_note_parse(buf, &back) == 0 && back.rank == 0 &&
		       back.step == 0 && back.ckpt_ms == 0 &&
		       back.why == DDP_STOP_AGREED,
	       "zeros round trip");
	buf[strlen(buf) - 1] = '\0';
	tap_ok(ddp_stop_note_parse(buf, &back) == 0, "the newline is optional");
	tap_ok(ddp_stop_note_format(&n, small, sizeof(small)) == -1,
	       "a buffer too small is refused");
	n.why = DDP_STOP_NONE;
	tap_ok(ddp_stop_note_format(&n, buf, sizeof(buf)) == -1,
	       "no reason is not a note");
	n.why = (enum ddp_stop_why)42;
	tap_ok(ddp_stop_note_format(&n, buf, sizeof(buf)) == -1,
	       "an unknown reason is refused");
	n.why = DDP_STOP_REQUEST;
	n.rank = -1;
	tap_ok(ddp_stop_note_format(&n, buf, sizeof(buf)) == -1,
	       "a negative rank is refused");
	n.rank = 0;
	n.step = -1;
	tap_ok(ddp_stop_note_format(&n, buf, sizeof(buf)) == -1,
	       "a negative step is refused");
	n.step = 0;
	n.ckpt_ms = -1;
	tap_ok(ddp_stop_note_format(&n, buf, sizeof(buf)) == -1,
	       "a negative checkpoint time is refused");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&back, 0, sizeof(back));
		back.rank = 77;
		if (ddp_stop_note_parse(bad[i], &back) != -1 ||
		    back.rank != 77) {
			tap_diag("'%s' was read", bad[i]);
			ok = 0;
		}
	}
	tap_ok(ok, "%zu bad lines are refused and leave the note alone",
	       sizeof(bad) / sizeof(bad[0]));
	tap_ok(ddp_stop_note_parse(NULL, &back) == -1, "NULL is refused");
}

int
main(void)
{
	test_why();
	test_before();
	test_end();
	test_due();
	test_note();
	return tap_done();
}
