/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A rank's wish to stop (wish.c), what grad.c puts into the step's last
 * bucket so that every rank agrees on the same step (common/stop.h).
 *
 * The wish comes from ddp_request_stop (the program, or its own signal
 * handler), from the handlers for SIGTERM, SIGUSR1, SIGUSR2 and SIGHUP
 * that wk_wish_init installs when DDP_STOP_BEFORE is set and not "0"
 * (only for a signal whose disposition is still SIG_DFL: a program's own
 * handler or SIG_IGN is never replaced; SA_RESTART; they stay for the
 * life of the process, since a stop can be agreed until it exits; until
 * the program first asks ddp_should_stop (wk_wish_asked) a stop signal
 * restores the default and ends the process as it would have without
 * libddp: a program that never asks is not kept alive by them), or
 * from the clock: the job's end time (DDP_END_TIME, DDP_END_TIME_FILE
 * re-read at most every DDP_END_TIME_READ_SECONDS; a missing or bad file
 * keeps the last value) against DDP_STOP_BEFORE and the measured step
 * and checkpoint times (ddp_stop_due).
 *
 * The signal and request part is process-wide and async-signal-safe (one
 * sig_atomic_t); struct wk_wish is one gradient sync's, used by its
 * communication thread (wk_wish_now) and its caller's thread between
 * steps (wk_wish_step), never both at once.
 */
#ifndef DDP_WK_WISH_H
#define DDP_WK_WISH_H

#include "stop.h"

struct wk_wish {
	struct ddp_stop_before before; /* off when DDP_STOP_BEFORE is unset */
	double end;		       /* the end time (Unix s), 0: none */
	char end_file[512];	       /* DDP_END_TIME_FILE, "" when unset */
	double end_read;	       /* when the file was last read (mono) */
	double step_s;		       /* the step time, a decaying maximum */
	double last_wait;	       /* the last wait's return (mono), 0 */
};

/*
 * Reads DDP_STOP_BEFORE, DDP_END_TIME and DDP_END_TIME_FILE into w and,
 * when DDP_STOP_BEFORE is set and not "0", installs the signal handlers
 * (once per process). DDP_OK, or DDP_ERR_ENV naming the variable, its
 * value and what is accepted (nothing installed then).
 */
enum ddp_status wk_wish_init(struct wk_wish *w);

/*
 * Whether this rank wants to stop now, and why (DDP_STOP_NONE when it
 * does not): a signal's or the program's request first, else the time.
 * Reads DDP_END_TIME_FILE when it is due.
 */
enum ddp_stop_why wk_wish_now(struct wk_wish *w);

/* The program asked whether to stop (ddp_should_stop): from now on the
 * handlers ask for a stop instead of ending the process. Any thread. */
void wk_wish_asked(void);

/* The ranks agreed to stop: the requests so far are served, so that a
 * gradient sync the program creates afterwards does not stop at once. */
void wk_wish_served(void);

/* A ddp_grad_sync_wait returned a synchronised step: measures the step. */
void wk_wish_step(struct wk_wish *w);

#endif
