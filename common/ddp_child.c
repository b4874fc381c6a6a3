/* SPDX-License-Identifier: BSD-3-Clause */
/* Waiting for a child process with a deadline. */
#include "ddp_child.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ddp_util.h"

/* A descriptor that turns readable when pid ends, or -1 where the kernel
 * or the build lacks pidfd_open. */
static int
pid_fd(pid_t pid)
{
#ifdef SYS_pidfd_open
	return (int)syscall(SYS_pidfd_open, pid, 0);
#else
	(void)pid;
	errno = ENOSYS;
	return -1;
#endif
}

int
ddp_wait_child(pid_t pid, const struct ddp_child_wait *w, int *status)
{
	const struct timespec tick = {0, 20 * 1000 * 1000};
	struct pollfd pfd[2];
	int pidfd = pid_fd(pid), killed = 0, n, ms;
	double now, until = w->deadline;
	pid_t r;

	*status = -1;
	for (;;) {
		if (w->each)
			w->each(w->arg);
		r = waitpid(pid, status, WNOHANG);
		if (r == pid) {
			if (w->each)
				w->each(w->arg);
			break;
		}
		*status = -1;
		if (r < 0 && errno != EINTR)
			break;
		now = ddp_now();
		if (!killed && w->deadline >= 0 && now >= w->deadline) {
			kill(pid, SIGKILL);
			killed = 1;
			until = w->grace < 0 ? -1 : now + w->grace;
		}
		if (killed && until >= 0 && now >= until)
			break;
		if (pidfd < 0) {
			nanosleep(&tick, NULL);
			continue;
		}
		n = 0;
		pfd[n++] = (struct pollfd){.fd = pidfd, .events = POLLIN};
		if (w->fd && *w->fd >= 0)
			pfd[n++] =
				(struct pollfd){.fd = *w->fd, .events = POLLIN};
		ms = until < 0 ? -1 : (int)((until - now) * 1000) + 1;
		poll(pfd, (nfds_t)n, ms);
	}
	ddp_close(&pidfd);
	return killed;
}
