/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Per-node shared memory for libddp (shm.c): a segment the node's ranks
 * map, and a doorbell to wait on it without spinning.
 */
#ifndef DDP_SHM_H
#define DDP_SHM_H

#include <stddef.h>
#include <stdint.h>

#include "ddp.h"

/* "/ddp-" + job + "." + step + "-" + 32 hex digits, NUL. */
#define WK_SHM_NAME_MAX 180

struct wk_shm {
	void *base; /* the mapping, or NULL */
	size_t bytes;
	char name[WK_SHM_NAME_MAX];
	int linked; /* created here and not unlinked yet */
};

/*
 * Creates and maps a new segment of `bytes` (zeroed, its pages reserved,
 * so a full /dev/shm is an error here and never a SIGBUS later) under a
 * fresh name: job and step (their letters and digits) and 128 random
 * bits, so no other process can guess it before the caller hands it out;
 * O_EXCL, mode 0600, owned by the caller. DDP_OK or DDP_ERR_SYSTEM with
 * the reason in the thread's last error. Not thread-safe for one s.
 */
enum ddp_status wk_shm_create(struct wk_shm *s, size_t bytes, const char *job,
			      const char *step);
/*
 * Maps the segment `name` another rank created, after checking that it is
 * a regular file of exactly `bytes` owned by this user with mode 0600.
 * DDP_OK or DDP_ERR_SYSTEM (last error names the segment and the reason).
 */
enum ddp_status wk_shm_open(struct wk_shm *s, const char *name, size_t bytes);
/* Removes the name (creator, once every rank mapped it); idempotent. */
void wk_shm_unlink(struct wk_shm *s);
/* Unmaps (and unlinks if still linked); s may be zeroed. */
void wk_shm_close(struct wk_shm *s);

/*
 * A doorbell in shared memory (zeroed by wk_shm_create): whoever changes
 * state that others wait for rings it after the change; waiters spin
 * briefly, then sleep on a futex and look again.
 */
struct wk_bell {
	uint32_t seq;
	uint32_t waiters;
} __attribute__((aligned(64)));

/* Wakes every waiter, if any (one atomic load when none). */
void wk_bell_ring(struct wk_bell *b);

/* 1 when what the caller waits for has happened (reads shared state with
 * sequentially consistent atomics). */
typedef int wk_ready_fn(void *arg);
/* Non-blocking look at something else that may end the wait (a peer's
 * death): DDP_OK to go on waiting. */
typedef enum ddp_status wk_watch_fn(void *arg);

/*
 * Waits until ready(arg), calling watch(warg) about every 20 ms while
 * asleep. Returns DDP_OK when ready, DDP_ERR_TIMEOUT at deadline (no
 * message set: the caller knows whom it waited for), or watch's error.
 * Never busy-waits for more than a few microseconds at a time.
 */
enum ddp_status wk_bell_wait(struct wk_bell *b, wk_ready_fn *ready, void *arg,
			     double deadline, wk_watch_fn *watch, void *warg);

#endif
