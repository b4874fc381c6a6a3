/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An agreed stop: the contract between the slurm-ddp plugin, libddp and
 * the Python module (python/slurm_ddp) for stopping every rank of a
 * --ddp step at the same step, checkpointed, before the job's time limit,
 * on preemption, or on a signal that reached one node only.
 *
 * The plugin gives every task of a --ddp step:
 *   DDP_END_TIME       the job's end time when srun started the step,
 *                      whole Unix seconds; unset when the job has none;
 *   DDP_END_TIME_FILE  a file on the job's shared directory that holds
 *                      the end time as it is now, in the same form and a
 *                      newline ("scontrol update TimeLimit" and a
 *                      preemption's GraceTime move it): srun re-reads the
 *                      job's record every DDP_END_TIME_POLL_SECONDS and
 *                      rewrites the file (renamed over) when the end time
 *                      changed; unset when srun cannot write there;
 *   DDP_STOP_BEFORE    "auto" (the default): a rank wants to stop when
 *                      the time left is under ddp_stop_margin() of its
 *                      measured step and checkpoint times; "SECS": when
 *                      fewer than SECS seconds are left; "0": no stop for
 *                      the time, and no signal handlers either (the
 *                      feature is off). Unset outside a --ddp step: the
 *                      program asks (ddp_request_stop) or nothing stops.
 * Ranks read DDP_END_TIME_FILE at most every DDP_END_TIME_READ_SECONDS.
 *
 * A rank that wants to stop (the time, SIGTERM, SIGUSR1, SIGUSR2 or SIGHUP
 * whose disposition was the default, or the program's own request) says
 * so in a reduction every rank makes anyway; every rank learns the same
 * answer at the same step. The program then writes its checkpoint and
 * exits with DDP_EXIT_STOPPED, after its task has written its stop note,
 * one line on DDP_FAILURE_FD (the pipe of worker/cause.h):
 *   stop rank=R step=S why=WHY ckpt_ms=M\n
 * R the rank, S the steps synchronised in this run when the stop was
 * agreed, WHY this rank's own reason (ddp_stop_why_name), M the
 * milliseconds from the agreement to the note (the checkpoint). A task
 * that exits DDP_EXIT_STOPPED after writing a stop note stopped cleanly:
 * slurmstepd does not end the step for it, and reports it to srun as a
 * stop (failure.h's cause "stop"), which is never a failure, never
 * blames a node and never restarts the step. An exit status of
 * DDP_EXIT_STOPPED without a note is a failure like any other.
 *
 * Errors: functions return 0 or -1; they never log. Thread safety:
 * reentrant, they touch only their arguments.
 */
#ifndef DDP_STOP_H
#define DDP_STOP_H

#include <stddef.h>

#define DDP_END_TIME_ENV "DDP_END_TIME"
#define DDP_END_TIME_FILE_ENV "DDP_END_TIME_FILE"
#define DDP_STOP_BEFORE_ENV "DDP_STOP_BEFORE"
/* The file's name in the job's shared directory. */
#define DDP_END_TIME_FILE_NAME ".ddp-end-time"
/* How often srun re-reads the job's end time, and ranks the file. */
#define DDP_END_TIME_POLL_SECONDS 10
#define DDP_END_TIME_READ_SECONDS 5
/* The exit status of a rank that stopped cleanly (sysexits' EX_TEMPFAIL:
 * "try again later"); ddp.h exports it as DDP_EXIT_STOPPED too. */
#define DDP_STOP_EXIT_STATUS 75
/* The fixed part of the automatic margin (ddp_stop_margin). */
#define DDP_STOP_EXIT_SECONDS 15
/* Room for one stop note, newline and NUL included (under PIPE_BUF). */
#define DDP_STOP_NOTE_MAX 128

/* Why a rank wanted to stop. */
enum ddp_stop_why {
	DDP_STOP_NONE = 0,
	DDP_STOP_TIME,	  /* the end time is near ("time-limit") */
	DDP_STOP_SIGTERM, /* "sigterm": preemption, the time limit, scancel */
	DDP_STOP_SIGUSR1, /* "sigusr1": --signal, scancel --signal */
	DDP_STOP_SIGUSR2, /* "sigusr2" */
	DDP_STOP_SIGHUP,  /* "sighup" */
	DDP_STOP_REQUEST, /* "request": the program asked (ddp_request_stop) */
	DDP_STOP_AGREED,  /* "agreed": another rank asked, not this one */
};

/* The word for why ("time-limit", ...), "?" for an unknown value. */
const char *ddp_stop_why_name(enum ddp_stop_why why);
/* The value for a word of ddp_stop_why_name; -1 for another word. */
int ddp_stop_why_parse(const char *word, enum ddp_stop_why *why);
/* The reason a signal gives (DDP_STOP_NONE for one that asks no stop). */
enum ddp_stop_why ddp_stop_why_of_signal(int sig);

/* What DDP_STOP_BEFORE says. */
struct ddp_stop_before {
	int off;       /* "0": no stop for the time, no handlers */
	int automatic; /* "auto" */
	double secs;   /* "SECS" (> 0) when neither */
};

/*
 * Reads a DDP_STOP_BEFORE value ("auto", "0" or whole seconds from 1 to
 * 604800) into out. Returns 0, or -1 with err naming the value and what
 * is accepted.
 */
int ddp_stop_before_parse(const char *value, struct ddp_stop_before *out,
			  char *err, size_t errlen);

/* Reads an end time (DDP_END_TIME, or the file's content: whole Unix
 * seconds, a trailing newline allowed) into *end. Returns 0 or -1. */
int ddp_stop_end_parse(const char *text, double *end);

/*
 * The seconds before the end time at which a rank wants to stop under
 * "auto": room for two more steps of step_s, the checkpoint (ckpt_s, the
 * longest one measured, 0 before any) half again, and
 * DDP_STOP_EXIT_SECONDS for the ranks to exit and srun to requeue the
 * job before Slurm's own time limit ends it (a loaded node's Python
 * rank takes seconds to exit): 2 * step_s + 1.5 * ckpt_s + 15.
 */
double ddp_stop_margin(double step_s, double ckpt_s);

/*
 * Whether a rank wants to stop for the time: now + the margin (before's
 * secs, or ddp_stop_margin's under auto) reaches end. end <= 0 (none
 * known) and before->off never do.
 */
int ddp_stop_due(const struct ddp_stop_before *before, double now, double end,
		 double step_s, double ckpt_s);

/* A task's stop note. */
struct ddp_stop_note {
	int rank;
	long long step;
	enum ddp_stop_why why;
	long long ckpt_ms;
};

/* The note's line, newline included, into buf. Returns 0, or -1 when a
 * field is out of range or it does not fit. */
int ddp_stop_note_format(const struct ddp_stop_note *n, char *buf, size_t len);

/* Reads one note line (its newline optional) into n. Returns 0, or -1
 * for anything else (a naming line included). */
int ddp_stop_note_parse(const char *line, struct ddp_stop_note *n);

#endif
