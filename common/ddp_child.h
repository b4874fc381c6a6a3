/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Waiting for a child process with a deadline, for the parts that run a
 * program and must not hang on it (the prolog helper's commands, the
 * plugin's ddp-check). Reentrant; the caller must not have SIGCHLD
 * ignored (waitpid would not see the child).
 */
#ifndef DDP_CHILD_H
#define DDP_CHILD_H

#include <sys/types.h>

/* How ddp_wait_child waits. */
struct ddp_child_wait {
	/* ddp_now() seconds: the child is killed then; < 0: never (a
	 * supervisor that waits as long as its child runs). */
	double deadline;
	/* After the kill: how long to wait for the child to be reaped; < 0
	 * until it is. A child stuck in an uninterruptible wait (a dead NFS
	 * server) may not die at once: a short grace does not wait for it. */
	double grace;
	/* Also wakes when *fd (when fd is not NULL and *fd >= 0) turns
	 * readable, and calls each(arg) (when not NULL) on every wake and
	 * once more after the child was reaped: so that the caller can drain
	 * a pipe the child writes to while it waits. */
	const int *fd;
	void (*each)(void *arg);
	void *arg;
};

/*
 * Waits for pid as w says, sleeping on a pidfd where the kernel has them
 * (Linux 5.3 and later), else looking every 20 ms. Returns 1 when it
 * killed the child at the deadline, else 0. *status receives the wait
 * status, or -1 when the child was not reaped: waitpid failed (errno
 * set), or the killed child outlived the grace.
 */
int ddp_wait_child(pid_t pid, const struct ddp_child_wait *w, int *status);

#endif
