/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Helpers for the libddp unit tests: a free loopback port, a job of P
 * ranks as forked processes, and collecting what each rank reports.
 */
#ifndef DDP_TEST_WORKER_UTIL_H
#define DDP_TEST_WORKER_UTIL_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ddp.h"

#define TW_MAX_RANKS 64
#define TW_OUT_MAX (1 << 20)

/* A loopback port nobody listens on right now. */
__attribute__((unused)) static int
tw_free_port(void)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = 0;

	if (fd < 0)
		return 0;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sa, &sl) == 0)
		port = ntohs(sa.sin_port);
	close(fd);
	return port;
}

__attribute__((unused)) static void
tw_cfg(struct ddp_config *cfg, int rank, int size, int port, double timeout)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->rank = rank;
	cfg->world_size = size;
	snprintf(cfg->master_addr, sizeof(cfg->master_addr), "127.0.0.1");
	cfg->master_port = port;
	cfg->timeout_s = timeout;
	cfg->backend = DDP_BACKEND_TCP;
	snprintf(cfg->job_id, sizeof(cfg->job_id), "4242");
	snprintf(cfg->step_id, sizeof(cfg->step_id), "0");
	cfg->auth = 0;
}

__attribute__((unused)) static double
tw_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/*
 * Whether this machine has an NVIDIA GPU device, usable or not: the one
 * condition under which a GPU test may skip ("no GPU ..." reasons, which
 * tests/run accepts); with a device, a GPU that does not work is a
 * failure.
 */
__attribute__((unused)) static int
tw_gpu_device_present(void)
{
	return access("/dev/nvidia0", F_OK) == 0 ||
	       system("nvidia-smi -L >/dev/null 2>&1") == 0;
}

/* FNV-1a of n bytes: compares results across ranks. */
__attribute__((unused)) static uint64_t
tw_fnv(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t h = 1469598103934665603ull;
	size_t i;

	for (i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

/* What one rank of a job printed (to its pipe) and how it ended. */
struct tw_rank {
	pid_t pid;
	int fd;
	char *out;
	size_t len;
	int status;
	double end; /* tw_now() when its output closed */
};

/* A child rank: writes its report to out, returns its exit status. */
typedef int tw_rank_fn(int rank, int size, int port, FILE *out, void *arg);

/*
 * Runs fn as `size` forked ranks and collects their output (up to
 * TW_OUT_MAX each) and exit statuses. Ranks still running after limit_s
 * are killed. Returns 0, or -1 when fork or pipe failed.
 */
__attribute__((unused)) static int
tw_run_job(int size, tw_rank_fn *fn, void *arg, double limit_s,
	   struct tw_rank *rk)
{
	struct pollfd pfd[TW_MAX_RANKS];
	int port = tw_free_port(), i, p[2], open_n, n;
	double deadline = tw_now() + limit_s;
	ssize_t got;
	FILE *f;

	if (size > TW_MAX_RANKS)
		return -1;
	fflush(stdout);
	for (i = 0; i < size; i++) {
		memset(&rk[i], 0, sizeof(rk[i]));
		rk[i].out = calloc(1, TW_OUT_MAX + 1);
		if (!rk[i].out || pipe(p) < 0)
			return -1;
		rk[i].pid = fork();
		if (rk[i].pid < 0)
			return -1;
		if (rk[i].pid == 0) {
			close(p[0]);
			f = fdopen(p[1], "w");
			if (!f)
				_exit(99);
			setvbuf(f, NULL, _IOLBF, 0);
			n = fn(i, size, port, f, arg);
			fflush(f);
			_exit(n);
		}
		close(p[1]);
		rk[i].fd = p[0];
	}
	open_n = size;
	while (open_n > 0 && tw_now() < deadline) {
		for (i = 0; i < size; i++) {
			pfd[i].fd = rk[i].fd;
			pfd[i].events = POLLIN;
			pfd[i].revents = 0;
		}
		if (poll(pfd, (nfds_t)size, 200) <= 0)
			continue;
		for (i = 0; i < size; i++) {
			if (rk[i].fd < 0 || !pfd[i].revents)
				continue;
			got = read(rk[i].fd, rk[i].out + rk[i].len,
				   TW_OUT_MAX - rk[i].len);
			if (got > 0) {
				rk[i].len += (size_t)got;
				continue;
			}
			close(rk[i].fd);
			rk[i].fd = -1;
			rk[i].end = tw_now();
			open_n--;
		}
	}
	for (i = 0; i < size; i++) {
		if (rk[i].fd >= 0) {
			kill(rk[i].pid, SIGKILL);
			close(rk[i].fd);
			rk[i].fd = -1;
			rk[i].end = tw_now();
		}
		waitpid(rk[i].pid, &rk[i].status, 0);
	}
	return 0;
}

__attribute__((unused)) static void
tw_free_job(int size, struct tw_rank *rk)
{
	int i;

	for (i = 0; i < size; i++)
		free(rk[i].out);
}

/* Exit code of a rank, or 128+signal. */
__attribute__((unused)) static int
tw_exit(const struct tw_rank *r)
{
	if (WIFEXITED(r->status))
		return WEXITSTATUS(r->status);
	if (WIFSIGNALED(r->status))
		return 128 + WTERMSIG(r->status);
	return 255;
}

/* The number after "STATUS " in a rank's output (its ddp_status), or -1. */
__attribute__((unused)) static int
tw_status_of(const struct tw_rank *r)
{
	const char *p = strstr(r->out, "STATUS ");

	return p ? (int)strtol(p + 7, NULL, 10) : -1;
}

/* The seconds after "AFTER " in a rank's output, or 1e9. */
__attribute__((unused)) static double
tw_after_of(const struct tw_rank *r)
{
	const char *p = strstr(r->out, "AFTER ");

	return p ? strtod(p + 6, NULL) : 1e9;
}

/* Prints a rank's output as TAP diagnostics. */
__attribute__((unused)) static void
tw_diag_output(int rank, const struct tw_rank *r)
{
	const char *s = r->out, *nl;

	while (s && *s) {
		nl = strchr(s, '\n');
		printf("#   rank %d: %.*s\n", rank,
		       (int)(nl ? nl - s : (long)strlen(s)), s);
		s = nl ? nl + 1 : NULL;
	}
}

/* Every rank's output as TAP diagnostics. */
__attribute__((unused)) static void
tw_diag_all(int n, const struct tw_rank *rk)
{
	int i;

	for (i = 0; i < n; i++)
		tw_diag_output(i, &rk[i]);
}

#endif
