/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Naming a late rank while training runs (straggler.c), for the gradient
 * sync (grad.c): each step, every rank records how long it waited in the
 * step's first gradient bucket; every DDP_STRAGGLER_EVERY steps the ranks
 * compare those waits on the control plane and rank 0 logs one line per
 * rank that was late by more than DDP_STRAGGLER_MS in more than half of
 * the steps, and appends the same as JSON lines to
 * $DDP_SHARED_DIR/stragglers.jsonl when the job has a shared directory.
 *
 * Why waits and not arrival times: a bucket's allreduce ends on every
 * rank at about the same moment (within a few network latencies), so a
 * rank's wait there is that end minus its own arrival, measured on its
 * own monotonic clock. The longest wait of the step minus a rank's wait
 * is how much later than the first rank it arrived: durations only, so
 * no two clocks are ever compared and clock offsets between nodes do not
 * matter. The error is the spread of the bucket's end across ranks.
 *
 * Cost: a clock read around the first bucket per step and one entry in
 * an array; per report two allreduces of the control plane (the window's
 * waits, then 3 numbers per rank).
 *
 * Ownership: the state is embedded in the gradient sync, which borrows
 * the communicator. Thread safety: none inside; wk_late_step and
 * wk_late_report are called by the thread that calls
 * ddp_grad_sync_wait, between steps.
 */
#ifndef DDP_WK_STRAGGLER_H
#define DDP_WK_STRAGGLER_H

#include "ddp.h"

#define WK_LATE_EVERY_DEFAULT 100
#define WK_LATE_EVERY_MAX 1000000
/* See doc/libddp.3 for why 50 ms. */
#define WK_LATE_MS_DEFAULT 50
#define WK_LATE_MS_MAX 3600000

struct wk_late {
	int every;	/* steps per report; 0: off */
	double late_s;	/* lateness that counts (DDP_STRAGGLER_MS) */
	double *waits;	/* `every` entries: this rank's waits, this window */
	int n;		/* entries filled */
	long steps;	/* steps recorded since start */
	double ewma_s;	/* moving average of this rank's lateness */
	int file_error; /* the JSON file failed once: said, not again */
};

/*
 * Reads DDP_STRAGGLER_EVERY and DDP_STRAGGLER_MS into l (zeroed first).
 * DDP_OK, DDP_ERR_ENV naming the variable, its value and the range, or
 * DDP_ERR_NOMEM. Every rank must see the same DDP_STRAGGLER_EVERY.
 */
enum ddp_status wk_late_init(struct wk_late *l);
void wk_late_free(struct wk_late *l);

/* Records this step's wait (seconds); 1 when the window is full. */
int wk_late_step(struct wk_late *l, double wait_s);

/*
 * Collective (the control plane of comm): compares the window's waits
 * across ranks, logs and writes rank 0's lines, and starts a new window.
 */
enum ddp_status wk_late_report(struct wk_late *l, struct ddp_comm *comm);

/*
 * Pure: of n steps, in how many (*late) this rank's lateness, the step's
 * longest wait (longest[s]) minus its own (mine[s]), exceeded late_s, and
 * the mean lateness over those steps (*mean_s, 0 when none).
 */
void wk_late_tally(const double *mine, const double *longest, int n,
		   double late_s, int *late, double *mean_s);

/*
 * Pure: rank 0's line for one rank, as "rank 13 (node07, GPU 3) late
 * 180 ms in 92 of 100 steps" (gpu < 0: no GPU part). 0, or -1 when it
 * does not fit in size.
 */
int wk_late_line(char *buf, size_t size, int rank, const char *host, int gpu,
		 double mean_s, int late, int n);

#endif
