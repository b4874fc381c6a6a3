/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A flood of connections to MASTER_PORT by another local user (nobody)
 * while the job's ranks join (issue 10, F4): thousands of connections that
 * say nothing, say garbage or hang up, from one source address, held up
 * to a few hundred at a time. The genuine ranks join during the flood,
 * the job completes, and rank 0's stderr stays a few lines long.
 */
#include <sys/stat.h>

#include "test-worker-rdv.h"

#define FLOOD_S 6.0
#define RANKS 4
#define FLOODERS 2
/* What rank 0 may write to stderr for the whole flood. */
#define STDERR_BOUND 16384

static char munge_sock[200];

struct flood_arg {
	const char *src;    /* the flooder's source address */
	const char *stderr; /* rank 0's stderr goes here */
};

/*
 * Connects from src to 127.0.0.1:port as fast as it can for FLOOD_S,
 * keeping the latest 256 connections open; every fourth sends garbage.
 * Closes with a reset, so that no TIME_WAIT runs the ports out.
 */
static int
flooder(int port, const char *src, FILE *out)
{
	struct sockaddr_in from, to;
	struct linger lg = {1, 0};
	int ring[256], n = 0, head = 0, fd, rc;
	long made = 0, garbage = 0;
	double end;

	if (tr_become_nobody(out) < 0)
		return 1;
	memset(&from, 0, sizeof(from));
	from.sin_family = AF_INET;
	inet_pton(AF_INET, src, &from.sin_addr);
	memset(&to, 0, sizeof(to));
	to.sin_family = AF_INET;
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	to.sin_port = htons((uint16_t)port);
	if (!tr_wait_listening(port, GATE_WAIT_S)) {
		fprintf(out, "E rank 0 never listened\n");
		return 1;
	}
	fprintf(out, "FLOOD_START %.3f\n", tw_now());
	tr_gate_open(&gate_a);
	end = tw_now() + FLOOD_S;
	while (tw_now() < end) {
		fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
			    0);
		if (fd < 0)
			break;
		setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		if (bind(fd, (struct sockaddr *)&from, sizeof(from)) < 0) {
			close(fd);
			continue;
		}
		rc = connect(fd, (struct sockaddr *)&to, sizeof(to));
		if (rc < 0 && errno != EINPROGRESS) {
			close(fd);
			usleep(1000);
			continue;
		}
		made++;
		if (made % 4 == 0 && send(fd, "GARBAGEgarbage!!", 16,
					  MSG_NOSIGNAL | MSG_DONTWAIT) == 16)
			garbage++;
		if (n == 256) {
			close(ring[head]);
			ring[head] = fd;
			head = (head + 1) % 256;
		} else {
			ring[n++] = fd;
		}
	}
	fprintf(out,
		"FLOOD_END %.3f\nFLOOD %ld connections, %ld with garbage\n",
		tw_now(), made, garbage);
	while (n > 0)
		close(ring[--n]);
	return 0;
}

static int
flood_role(int i, int size, int port, FILE *out, void *arg)
{
	const struct flood_arg *a = arg;
	struct ddp_config cfg;
	int fd, rc;

	(void)size;
	if (i >= RANKS)
		return flooder(port, a->src, out);
	if (i == 0) {
		/* rank 0 logs to its real stderr, which the test measures */
		fd = open(a->stderr, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
			  0600);
		if (fd < 0 || dup2(fd, 2) < 0)
			return 1;
		close(fd);
	} else {
		/* once the flood runs, one rank joins every second of it */
		if (!tr_gate_wait(&gate_a, GATE_WAIT_S)) {
			fprintf(out, "E the flood never started\n");
			return 1;
		}
		usleep((useconds_t)(1000000 * i));
		ddp_set_log_fn(tr_log_to_file, out);
	}
	tr_cfg(&cfg, i, RANKS, port, 30, "777", munge_sock);
	rc = tr_rank_job(&cfg, out);
	fprintf(out, "DONE_AT %.3f\n", tw_now());
	return rc;
}

static double
value_after(const struct tw_rank *r, const char *key)
{
	const char *p = strstr(r->out, key);

	return p ? strtod(p + strlen(key), NULL) : -1;
}

static int
completed(const struct tw_rank *r)
{
	return tw_exit(r) == 0 && tr_has(r, "ALLREDUCE 0 4 6 20");
}

static void
flood_case(const char *src, const char *dir)
{
	char path[300];
	struct flood_arg a = {src, path};
	struct tw_rank rk[RANKS + FLOODERS];
	struct stat st;
	FILE *f;
	char line[2048];
	double flood_end = 0;
	long made = 0;
	int i, failed = tap_failed, summary = 0, done = 1;

	snprintf(path, sizeof(path), "%s/rank0-%s.stderr", dir, src);
	if (run_gated(RANKS + FLOODERS, flood_role, &a, 90, rk) < 0) {
		tap_ok(0, "fork");
		return;
	}
	for (i = RANKS; i < RANKS + FLOODERS; i++) {
		made += (long)value_after(&rk[i], "FLOOD ");
		if (value_after(&rk[i], "FLOOD_END ") > flood_end)
			flood_end = value_after(&rk[i], "FLOOD_END ");
	}
	for (i = 0; i < RANKS; i++)
		done &= completed(&rk[i]) &&
			value_after(&rk[i], "DONE_AT ") < flood_end;
	tap_ok(made >= 1000 && done,
	       "the job's %d ranks join during a flood of %ld connections in "
	       "%g s from %s, and the job completes before it ends",
	       RANKS, made, FLOOD_S, src);
	if (stat(path, &st) < 0)
		st.st_size = -1;
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f)) {
		summary += strstr(line, "more connections in the last") != NULL;
		line[strcspn(line, "\n")] = '\0';
		if (getenv("TEST_VERBOSE"))
			tap_diag("rank 0 stderr: %.300s", line);
	}
	if (f)
		fclose(f);
	tap_ok(st.st_size >= 0 && st.st_size < STDERR_BOUND && summary >= 1,
	       "rank 0's stderr stays bounded: %lld bytes (< %d), refusals "
	       "summarised (%d summary lines)",
	       (long long)st.st_size, STDERR_BOUND, summary);
	if (tap_failed > failed || getenv("TEST_VERBOSE"))
		for (i = 0; i < RANKS + FLOODERS; i++)
			tw_diag_output(i, &rk[i]);
	tw_free_job(RANKS + FLOODERS, rk);
}

int
main(void)
{
	char dir[] = "/tmp/ddp-test-flood-XXXXXX", cmd[120];
	int rc;

	signal(SIGPIPE, SIG_IGN);
	if (!mkdtemp(dir) || chmod(dir, 0755) < 0) {
		tap_ok(0, "mkdtemp");
		return tap_done();
	}
	snprintf(cmd, sizeof(cmd), "%s/munged", dir);
	if (!tr_munged_begin(cmd, dir, munge_sock, sizeof(munge_sock), &rc))
		return rc;
	/* Another address than the ranks', then the ranks' own. */
	flood_case("127.0.0.2", dir);
	flood_case("127.0.0.1", dir);
	tr_munged_stop(cmd);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		tap_diag("could not remove %s", dir);
	return tap_done();
}
