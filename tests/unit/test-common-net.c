/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of ddp_net's waiting past a deadline, its connection to a
 * resolved address and its reading of many connections at once, on real
 * loopback sockets.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ddp_net.h"
#include "ddp_util.h"
#include "tap.h"

/* The lines ddp_net_read_lines handed over, one after the other. */
struct lines {
	char text[4096];
	int n;
};

static void
keep_line(void *arg, const char *line)
{
	struct lines *l = arg;

	l->n++;
	ddp_fmt_cat(l->text, sizeof(l->text), "[%s]", line);
}

/* A loopback connection to port, or -1. */
static int
dial(int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port)};

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return ddp_net_connect_addr((struct sockaddr *)&sa, sizeof(sa),
				    ddp_now() + 10);
}

static int
send_text(int fd, const char *text)
{
	return ddp_net_send_all(fd, text, strlen(text), ddp_now() + 10);
}

static void
test_wait_past_deadline(void)
{
	int p[2] = {-1, -1};
	double t0;

	if (pipe(p) < 0) {
		tap_ok(0, "pipe");
		return;
	}
	t0 = ddp_now();
	tap_ok(ddp_net_wait(p[0], POLLIN, t0 - 1) == 0 &&
		       ddp_now() - t0 < tap_bound(0.5, 10.0),
	       "nothing to read and the deadline passed: timed out at once");
	tap_ok(write(p[1], "x", 1) == 1 &&
		       ddp_net_wait(p[0], POLLIN, ddp_now() - 1) == 1,
	       "a byte there already and the deadline passed: ready, not "
	       "timed out");
	ddp_close(&p[0]);
	ddp_close(&p[1]);
}

static void
test_connect_addr(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	int lfd, port = 0, fd, closed_port;

	lfd = ddp_net_listen(0, &port);
	fd = lfd >= 0 ? dial(port) : -1;
	tap_ok(fd >= 0, "ddp_net_connect_addr connects to a listener");
	ddp_close(&fd);
	ddp_close(&lfd);
	/* The port just freed: nobody listens there now. */
	closed_port = port;
	sa.sin_port = htons((uint16_t)closed_port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	errno = 0;
	fd = ddp_net_connect_addr((struct sockaddr *)&sa, sizeof(sa),
				  ddp_now() + 10);
	tap_ok(fd < 0 && errno == ECONNREFUSED,
	       "ddp_net_connect_addr to a closed port: ECONNREFUSED (%s)",
	       strerror(errno));
	ddp_close(&fd);
}

static void
test_read_lines(void)
{
	struct lines got = {0};
	int lfd, port = 0, idle = -1, late_idle = -1, real = -1, part = -1,
		 eof = -1, st = -1, n;
	double t0, took;
	pid_t late;

	lfd = ddp_net_listen(0, &port);
	if (lfd < 0) {
		tap_ok(0, "a listener for ddp_net_read_lines");
		return;
	}
	t0 = ddp_now();
	n = ddp_net_read_lines(lfd, t0 + 5, 5, 64, 100, keep_line, &got);
	/* Not the 5 s deadline: tap.h. */
	tap_ok(n == 0 && got.n == 0 && ddp_now() - t0 < tap_bound(1.0, 4.0),
	       "nobody connected: returns at once with 0 connections");

	/* First in the backlog, one that never speaks; behind it the
	 * reports. */
	idle = dial(port);
	real = dial(port);
	part = dial(port);
	eof = dial(port);
	if (idle < 0 || real < 0 || part < 0 || eof < 0 ||
	    send_text(real, "a report\nand more") < 0 ||
	    send_text(part, "half a line") < 0 ||
	    send_text(eof, "no newline") < 0 || shutdown(eof, SHUT_WR) < 0) {
		tap_ok(0, "four loopback connections");
		goto out;
	}
	/* One more that connects while the others are read, after 0.2 s. */
	late = fork();
	if (late == 0) {
		int fd;

		ddp_sleep_until(ddp_now() + 0.2);
		fd = dial(port);
		_exit(fd >= 0 && send_text(fd, "late\n") == 0 ? 0 : 1);
	}
	t0 = ddp_now();
	n = ddp_net_read_lines(lfd, t0 + 1.0, 1.0, 64, 100, keep_line, &got);
	took = ddp_now() - t0;
	tap_ok(late > 0 && waitpid(late, &st, 0) == late && st == 0,
	       "the late connection was made");
	tap_ok(n == 5, "5 connections accepted (got %d)", n);
	tap_ok(strstr(got.text, "[a report\n]") != NULL,
	       "the report behind an idle connection is read, up to its "
	       "newline (%s)",
	       got.text);
	tap_ok(strstr(got.text, "[no newline]") != NULL,
	       "a line ended by the end of the stream counts");
	tap_ok(strstr(got.text, "[late\n]") != NULL,
	       "a connection made while the others are read is read too");
	tap_ok(strstr(got.text, "half") == NULL && got.n == 3,
	       "half a line at the deadline is dropped: 3 lines in all");
	/* The idle one is held until its own deadline, 1 s after its
	 * accept; the upper bound only catches a wait without end, not a
	 * slow (loaded) machine. */
	tap_ok(took >= 0.9 && took < 30,
	       "the idle connection is held for its own 1 s (%.2f s)", took);

	/* An idle connection that holds all the time there is: a report
	 * behind it still counts. */
	ddp_close(&idle);
	late_idle = dial(port);
	ddp_close(&real);
	real = dial(port);
	memset(&got, 0, sizeof(got));
	if (late_idle < 0 || real < 0 ||
	    send_text(real, "0123456789012345678901234567890123456789"
			    "0123456789012345678901234567890123456789\n") < 0) {
		tap_ok(0, "two more loopback connections");
		goto out;
	}
	n = ddp_net_read_lines(lfd, ddp_now() + 0.3, 0.3, 16, 100, keep_line,
			       &got);
	tap_ok(n == 2 && got.n == 1 && !strcmp(got.text, "[012345678901234]"),
	       "a line longer than max_line is cut at max_line - 1 bytes "
	       "(%s)",
	       got.text);
	memset(&got, 0, sizeof(got));
	ddp_close(&late_idle);
	late_idle = dial(port);
	real = dial(port);
	n = ddp_net_read_lines(lfd, ddp_now() + 0.3, 0.3, 64, 1, keep_line,
			       &got);
	tap_ok(n == 1 && got.n == 0,
	       "max_conns 1: the first connection alone is accepted (%d)", n);
out:
	ddp_close(&idle);
	ddp_close(&late_idle);
	ddp_close(&real);
	ddp_close(&part);
	ddp_close(&eof);
	ddp_close(&lfd);
}

int
main(void)
{
	signal(SIGPIPE, SIG_IGN);
	test_wait_past_deadline();
	test_connect_addr();
	test_read_lines();
	return tap_done();
}
