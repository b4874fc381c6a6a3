/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of ddp_wait_child: a child that ends, one killed at the
 * deadline, and the pipe drained while waiting. */
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ddp_child.h"
#include "ddp_util.h"
#include "tap.h"

struct drain {
	int fd;
	char text[64];
	size_t len;
	int calls;
};

static void
drain(void *arg)
{
	struct drain *d = arg;
	ssize_t r;

	d->calls++;
	while (d->fd >= 0) {
		r = read(d->fd, d->text + d->len, sizeof(d->text) - 1 - d->len);
		if (r > 0) {
			d->len += (size_t)r;
			continue;
		}
		if (r == 0)
			ddp_close(&d->fd);
		break;
	}
}

static pid_t
child(int code, unsigned sleep_s, int out)
{
	pid_t pid = fork();

	if (pid == 0) {
		if (out >= 0 && write(out, "found", 5) != 5)
			_exit(3);
		if (sleep_s)
			sleep(sleep_s);
		_exit(code);
	}
	return pid;
}

int
main(void)
{
	struct ddp_child_wait w = {.grace = -1};
	struct drain d = {.fd = -1};
	int status = 0, killed, p[2];
	double t0;

	signal(SIGCHLD, SIG_DFL);
	w.deadline = ddp_now() + 10;
	killed = ddp_wait_child(child(7, 0, -1), &w, &status);
	tap_ok(!killed && WIFEXITED(status) && WEXITSTATUS(status) == 7,
	       "a child that ends in time: its exit status");

	t0 = ddp_now();
	w.deadline = t0 + 0.2;
	killed = ddp_wait_child(child(0, 30, -1), &w, &status);
	tap_ok(killed && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL &&
		       ddp_now() - t0 < 10,
	       "a child past the deadline is killed and reaped");

	t0 = ddp_now();
	w.deadline = -1;
	killed = ddp_wait_child(child(5, 1, -1), &w, &status);
	tap_ok(!killed && WIFEXITED(status) && WEXITSTATUS(status) == 5 &&
		       ddp_now() - t0 >= 0.9,
	       "without a deadline the child runs to its end");

	w.grace = 0;
	w.deadline = ddp_now();
	killed = ddp_wait_child(child(0, 30, -1), &w, &status);
	tap_ok(killed && (status == -1 || WIFSIGNALED(status)),
	       "with no grace the killed child is not waited for");
	while (waitpid(-1, NULL, 0) > 0)
		;

	tap_ok(pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0, "pipe");
	d.fd = p[0];
	w = (struct ddp_child_wait){.deadline = ddp_now() + 10,
				    .grace = -1,
				    .fd = &d.fd,
				    .each = drain,
				    .arg = &d};
	killed = ddp_wait_child(child(0, 0, p[1]), &w, &status);
	ddp_close(&p[1]);
	drain(&d);
	tap_ok(!killed && WIFEXITED(status) && d.len == 5 &&
		       memcmp(d.text, "found", 5) == 0 && d.calls >= 2,
	       "each drains what the child writes while it is waited for");
	ddp_close(&d.fd);
	return tap_done();
}
