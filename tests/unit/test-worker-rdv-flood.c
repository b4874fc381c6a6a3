/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A flood of connections to MASTER_PORT by another local user (nobody)
 * while the job's ranks join (issue 10, F4): thousands of connections that
 * say nothing, say garbage or hang up, from one source address, held up
 * to a few hundred at a time. The genuine ranks join during the flood,
 * the job completes, and rank 0's stderr stays a few lines long. Then a
 * flood of well-formed opens: rank 0 makes no credential for one that
 * claims another job, and at most a bounded rate of them for one source
 * whose claims fit (each proof it sends is one credential made).
 */
#include <sys/random.h>
#include <sys/stat.h>

#include "proto.h"
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

/* ---- a flood of opens ---- */

#define OPEN_FLOOD_S 3.0
#define OPEN_CONNS 32
/* The most proofs rank 0 may make for one source prefix (all of 127/8
 * is one) in OPEN_FLOOD_S: its burst and rate (rdv_internal.h,
 * PROOF_BURST and PROOF_RATE), with a second of slack. */
#define OPEN_PROOF_BOUND (32 + 20 * (OPEN_FLOOD_S + 1))
/* Sources a flooder rotates through, all in 127/8. */
#define ROTATE_SOURCES 256
/* The most proofs rank 0 may make for all sources together in
 * OPEN_FLOOD_S: the global burst and rate (rdv_internal.h,
 * PROOF_GLOBAL_BURST and PROOF_GLOBAL_RATE), with a second of slack. */
#define GLOBAL_PROOF_BOUND (128 + 60 * (OPEN_FLOOD_S + 1))

/* An open claiming the job's missing last rank (job 777) or another job
 * (778), with a fresh nonce, on a new connection from src; fd or -1. */
static int
open_send(int port, const char *src, int right)
{
	struct sockaddr_in from, to;
	struct linger lg = {1, 0};
	struct rdv_open o;
	struct wk_buf b = {0};
	int fd, ok;

	memset(&from, 0, sizeof(from));
	from.sin_family = AF_INET;
	inet_pton(AF_INET, src, &from.sin_addr);
	memset(&to, 0, sizeof(to));
	to.sin_family = AF_INET;
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	to.sin_port = htons((uint16_t)port);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	memset(&o, 0, sizeof(o));
	o.rank = RANKS - 1;
	o.world = RANKS;
	snprintf(o.job, sizeof(o.job), "%s", right ? "777" : "778");
	snprintf(o.step, sizeof(o.step), "0");
	ok = bind(fd, (struct sockaddr *)&from, sizeof(from)) == 0 &&
	     connect(fd, (struct sockaddr *)&to, sizeof(to)) == 0 &&
	     getrandom(o.nonce, sizeof(o.nonce), 0) == sizeof(o.nonce) &&
	     proto_encode_open(&b, &o) == 0 &&
	     write(fd, b.p, b.len) == (ssize_t)b.len;
	wk_buf_free(&b);
	if (!ok) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The k-th of ROTATE_SOURCES source addresses spread over 127/8, each
 * a local user may bind (the whole of 127/8 is the loopback's). */
static const char *
rotate_src(long k, char *buf, size_t len)
{
	k %= ROTATE_SOURCES;
	snprintf(buf, len, "127.%ld.%ld.%ld", 1 + k % 254, k / 254 % 256,
		 2 + k % 250);
	return buf;
}

/*
 * As nobody, from src (NULL: a new one of ROTATE_SOURCES for every
 * connection): OPEN_CONNS connections at a time, each one open then its
 * reply (a connection with none after 0.3 s is dropped for a new one),
 * for OPEN_FLOOD_S; counts the proofs and refusals.
 */
static int
open_flooder(int port, const char *src, int right, FILE *out)
{
	struct pollfd pfd[OPEN_CONNS];
	double since[OPEN_CONNS], end;
	long opens = 0, proofs = 0, refused = 0, k = 0;
	uint8_t hdr[TR_HDR];
	char rot[32];
	int i;

	if (tr_become_nobody(out) < 0)
		return 1;
	for (i = 0; i < OPEN_CONNS; i++)
		pfd[i].fd = -1;
	if (!tr_wait_listening(port, GATE_WAIT_S)) {
		fprintf(out, "E rank 0 never listened\n");
		tr_gate_open(&gate_a);
		return 1;
	}
	end = tw_now() + OPEN_FLOOD_S;
	while (tw_now() < end) {
		for (i = 0; i < OPEN_CONNS; i++) {
			if (pfd[i].fd >= 0 && tw_now() - since[i] > 0.3) {
				close(pfd[i].fd);
				pfd[i].fd = -1;
			}
			if (pfd[i].fd < 0) {
				pfd[i].fd = open_send(
					port,
					src ? src
					    : rotate_src(k++, rot, sizeof(rot)),
					right);
				pfd[i].events = POLLIN;
				since[i] = tw_now();
				opens += pfd[i].fd >= 0;
			}
		}
		if (poll(pfd, OPEN_CONNS, 50) < 0)
			break;
		for (i = 0; i < OPEN_CONNS; i++) {
			if (pfd[i].fd < 0 || !pfd[i].revents)
				continue;
			if (recv(pfd[i].fd, hdr, sizeof(hdr), MSG_WAITALL) ==
			    (ssize_t)sizeof(hdr)) {
				proofs += hdr[6] == RDV_PROOF;
				refused += hdr[6] == RDV_REFUSE;
			}
			close(pfd[i].fd);
			pfd[i].fd = -1;
		}
	}
	for (i = 0; i < OPEN_CONNS; i++)
		if (pfd[i].fd >= 0)
			close(pfd[i].fd);
	fprintf(out, "OPENS %ld PROOFS %ld REFUSED %ld\n", opens, proofs,
		refused);
	/* The rank the flood claimed may come now. */
	tr_gate_open(&gate_a);
	return 0;
}

struct open_arg {
	const char *src;
	int right;
};

static int
open_role(int i, int size, int port, FILE *out, void *arg)
{
	const struct open_arg *a = arg;
	struct ddp_config cfg;

	(void)size;
	if (i >= RANKS)
		return open_flooder(port, a->src, a->right, out);
	/* The last rank is missing while the flood claims it: it comes
	 * once the flood has ended. */
	if (i == RANKS - 1 &&
	    !tr_gate_wait(&gate_a, OPEN_FLOOD_S + GATE_WAIT_S)) {
		fprintf(out, "E the flood never ended\n");
		return 1;
	}
	ddp_set_log_fn(tr_log_to_file, out);
	tr_cfg(&cfg, i, RANKS, port, 30, "777", munge_sock);
	return tr_rank_job(&cfg, out);
}

static void
open_flood_case(const char *src, int right)
{
	struct open_arg a = {src, right};
	struct tw_rank rk[RANKS + 1];
	long opens, proofs;
	int i, failed = tap_failed, done = 1;

	if (run_gated(RANKS + 1, open_role, &a, 60, rk) < 0) {
		tap_ok(0, "fork");
		return;
	}
	opens = (long)value_after(&rk[RANKS], "OPENS ");
	proofs = (long)value_after(&rk[RANKS], "PROOFS ");
	for (i = 0; i < RANKS; i++)
		done &= completed(&rk[i]);
	if (!src)
		tap_ok(done && opens >= 200 && proofs >= 1 &&
			       proofs <= (long)GLOBAL_PROOF_BOUND,
		       "%ld opens in %g s from %d rotating 127/8 addresses "
		       "whose claims fit: rank 0 makes %ld credentials, at "
		       "most %ld (its bound for all sources), and the job "
		       "completes",
		       opens, OPEN_FLOOD_S, ROTATE_SOURCES, proofs,
		       (long)GLOBAL_PROOF_BOUND);
	else if (right)
		tap_ok(done && opens >= 200 && proofs >= 1 &&
			       proofs <= (long)OPEN_PROOF_BOUND,
		       "%ld opens from %s in %g s whose claims fit (job, "
		       "step, world, a missing rank): rank 0 makes %ld "
		       "credentials, at most %ld, and the job completes",
		       opens, src, OPEN_FLOOD_S, proofs,
		       (long)OPEN_PROOF_BOUND);
	else
		tap_ok(done && opens >= 200 && proofs == 0,
		       "%ld opens from %s in %g s claiming another job: rank "
		       "0 makes no credential for them (%ld proofs), and the "
		       "job completes",
		       opens, src, OPEN_FLOOD_S, proofs);
	if (tap_failed > failed || getenv("TEST_VERBOSE"))
		for (i = 0; i < RANKS + 1; i++)
			tw_diag_output(i, &rk[i]);
	tw_free_job(RANKS + 1, rk);
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
	open_flood_case("127.0.0.2", 0);
	open_flood_case("127.0.0.2", 1);
	open_flood_case(NULL, 1);
	tr_munged_stop(cmd);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		tap_diag("could not remove %s", dir);
	return tap_done();
}
