/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libddp's bottom layer (status.c): the calling thread's last error, the
 * log sink, the clock. Every other file of libddp may use it; it uses
 * none of them.
 */
#ifndef DDP_WK_STATUS_H
#define DDP_WK_STATUS_H

#include "ddp.h"
#include "ddp_util.h"

/*
 * Formats the explanation into the calling thread's last-error buffer
 * (what ddp_last_error() returns; cut at DDP_ERR_LEN - 1 characters) and
 * returns st unchanged, so that `return wk_err(DDP_ERR_X, ...)` reads as
 * one statement. Thread-safe: the buffer is per thread.
 */
enum ddp_status wk_err(enum ddp_status st, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/*
 * The calling thread's last-error buffer (DDP_ERR_LEN bytes), borrowed:
 * valid for the thread's life, overwritten by its next wk_err.
 */
char *wk_errbuf(void);
/*
 * One log line: level 0 error, 1 warning, 2 and above debug (only with
 * DDP_DEBUG set). Goes to the ddp_set_log_fn() sink, else stderr.
 * Thread-safe as long as the program's sink is.
 */
void wk_log(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
