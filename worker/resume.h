/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What resume.c tells the rest of libddp (its public functions are in
 * ddp.h): how long this process's checkpoint writes take, the checkpoint
 * time of an agreed stop's margin (wish.h).
 */
#ifndef DDP_WK_RESUME_H
#define DDP_WK_RESUME_H

/* The longest ddp_write_atomic of this process that succeeded, in
 * seconds; 0 before any. Thread-safe. */
double wk_resume_write_longest(void);

#endif
