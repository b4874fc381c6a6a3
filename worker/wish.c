/* SPDX-License-Identifier: BSD-3-Clause */
/* A rank's wish to stop: signals, the program's request, the clock
 * (wish.h). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ddp_util.h"
#include "resume.h"
#include "status.h"
#include "wish.h"

/* Why this process was asked to stop (enum ddp_stop_why), 0 while not:
 * the first request is the reason. */
static volatile sig_atomic_t requested;
/* 1 once the program asked ddp_should_stop: before, it may not know of
 * stops at all, and a stop signal does what it did without libddp. */
static volatile sig_atomic_t asked;
static pthread_once_t handlers_once = PTHREAD_ONCE_INIT;

/* How fast the measured step time forgets a slow step, per step: a
 * decaying maximum, so one slow step (an evaluation) stops early rather
 * than late for a while, and a step that grew counts at once. */
#define STEP_DECAY 0.95

void
ddp_request_stop(void)
{
	if (!requested)
		requested = DDP_STOP_REQUEST;
}

static void
on_signal(int sig)
{
	struct sigaction dfl;

	if (!asked) {
		/* Blocked while this handler runs: the default action
		 * (the end of the process) follows its return. */
		memset(&dfl, 0, sizeof(dfl));
		dfl.sa_handler = SIG_DFL;
		sigaction(sig, &dfl, NULL);
		raise(sig);
		return;
	}
	if (!requested)
		requested = (sig_atomic_t)ddp_stop_why_of_signal(sig);
}

/* Installs on_signal for each stop signal whose disposition is still the
 * default: a program that handles or ignores one keeps it so. */
static void
install_handlers(void)
{
	static const int sigs[] = {SIGTERM, SIGUSR1, SIGUSR2, SIGHUP};
	struct sigaction sa, old;
	size_t i;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		if (sigaction(sigs[i], NULL, &old) < 0 ||
		    (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL)
			continue;
		if (sigaction(sigs[i], &sa, NULL) < 0)
			wk_log(1, "%s: cannot handle signal %d: %s",
			       DDP_STOP_BEFORE_ENV, sigs[i], strerror(errno));
	}
}

/* The wall clock, against which the end time is set. */
static double
wall_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

enum ddp_status
wk_wish_init(struct wk_wish *w)
{
	const char *before = getenv(DDP_STOP_BEFORE_ENV);
	const char *end = getenv(DDP_END_TIME_ENV);
	const char *file = getenv(DDP_END_TIME_FILE_ENV);
	char err[256];

	memset(w, 0, sizeof(*w));
	w->before.off = 1;
	if (before &&
	    ddp_stop_before_parse(before, &w->before, err, sizeof(err)) < 0)
		return wk_err(DDP_ERR_ENV, "%s: %s", DDP_STOP_BEFORE_ENV, err);
	if (end && *end && ddp_stop_end_parse(end, &w->end) < 0)
		return wk_err(DDP_ERR_ENV,
			      "%s='%.64s': use the job's end time in whole "
			      "Unix seconds (as srun --ddp sets it), or unset "
			      "it",
			      DDP_END_TIME_ENV, end);
	if (file && *file &&
	    ddp_fmt(w->end_file, sizeof(w->end_file), "%s", file) < 0)
		return wk_err(DDP_ERR_ENV,
			      "%s: a path of %zu bytes, more than %zu",
			      DDP_END_TIME_FILE_ENV, strlen(file),
			      sizeof(w->end_file) - 1);
	w->end_read = -1e9;
	if (before && !w->before.off)
		pthread_once(&handlers_once, install_handlers);
	return DDP_OK;
}

/* The end time as the file says now; a missing or bad file keeps the
 * last value (srun rewrites it by renaming, never torn). */
static void
read_end_file(struct wk_wish *w, double now)
{
	char text[32];
	double end;

	if (!w->end_file[0] || now - w->end_read < DDP_END_TIME_READ_SECONDS)
		return;
	w->end_read = now;
	if (ddp_read_text(w->end_file, text, sizeof(text)) > 0 &&
	    ddp_stop_end_parse(text, &end) == 0)
		w->end = end;
}

enum ddp_stop_why
wk_wish_now(struct wk_wish *w)
{
	sig_atomic_t why = requested;

	if (why)
		return (enum ddp_stop_why)why;
	if (w->before.off)
		return DDP_STOP_NONE;
	read_end_file(w, ddp_now());
	if (ddp_stop_due(&w->before, wall_now(), w->end, w->step_s,
			 wk_resume_write_longest()))
		return DDP_STOP_TIME;
	return DDP_STOP_NONE;
}

void
wk_wish_asked(void)
{
	asked = 1;
}

void
wk_wish_served(void)
{
	requested = 0;
}

void
wk_wish_step(struct wk_wish *w)
{
	double now = ddp_now(), step;

	if (w->last_wait > 0) {
		step = now - w->last_wait;
		w->step_s = step > w->step_s * STEP_DECAY
				    ? step
				    : w->step_s * STEP_DECAY;
	}
	w->last_wait = now;
}
