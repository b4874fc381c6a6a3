/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A rank that is alive but never enters a collective (a hang, not a
 * death): the verdict of the control plane (tcp.h) as a pure function,
 * for the TCP waits (the rank waited for is known) and the NCCL data
 * plane (it is not); the naming a verdict writes to DDP_FAILURE_FD (a
 * rank still in an earlier call is "behind"); then real jobs over loopback in
 * which one rank skips an allreduce and sleeps: within DDP_TIMEOUT and one
 * grace (a quarter of the timeout, at most 0.5 s: tcp.h) every other rank fails
 * with DDP_ERR_TIMEOUT naming it, its host and its pid and the call it
 * has not entered, 20 tries of 20, on 3 to 8 ranks (8: a mesh in which
 * not every rank is connected to the silent one), and every process
 * ends. The rendezvous has a timeout of its own (RDV_TIMEOUT_S): the
 * short one is set after it, with ddp_comm_set_timeout, so that only the
 * hang is timed.
 */
#include <fcntl.h>
#include <sys/stat.h>

#include "cause.h"
#include "status.h"
#include "tap.h"
#include "tcp.h"
#include "test-worker-util.h"

/* A mesh of `size` ranks seen from `rank`, every peer connected (fd 0:
 * never read, the functions under test are pure). */
static struct wk_mesh *
mesh_new(int size, int rank, uint32_t seq)
{
	struct wk_mesh *c = calloc(1, sizeof(*c));
	int i;

	c->size = size;
	c->rank = rank;
	c->cur.seq = seq;
	c->cur.coll = WK_C_ALLREDUCE;
	c->peers = calloc((size_t)size, sizeof(*c->peers));
	for (i = 0; i < size; i++) {
		c->peers[i].fd = i == rank ? -1 : 0;
		c->peers[i].waits_for = -1;
	}
	return c;
}

static void
mesh_free(struct wk_mesh *c)
{
	free(c->peers);
	free(c);
}

static void
test_verdict(void)
{
	struct wk_mesh *c = mesh_new(6, 0, 7);
	int out[8], n;

	/* Ranks 1, 2, 4 answered for call 7 (4 from a later call); 3 is in
	 * call 6 still; 5 said nothing; rank 4 is not connected. */
	c->peers[1].in_seq = 7;
	c->peers[2].in_seq = 7;
	c->peers[3].in_seq = 6;
	c->peers[4].in_seq = 9;
	n = tcp_hang_verdict(c, 1, out, 8);
	tap_ok(n == 0, "TCP: the rank waited for answered: no verdict (%d)", n);
	n = tcp_hang_verdict(c, 3, out, 8);
	tap_ok(n == 1 && out[0] == 3,
	       "TCP: the rank waited for is still in an earlier call: named");
	n = tcp_hang_verdict(c, 5, out, 8);
	tap_ok(n == 1 && out[0] == 5,
	       "TCP: the rank waited for said nothing: named");
	/* NCCL: whom the data plane waits for is unknown. */
	n = tcp_hang_verdict(c, -1, out, 8);
	tap_ok(n == 2 && out[0] == 3 && out[1] == 5,
	       "NCCL: every connected rank that has not entered this call is "
	       "named, those in it or past it are not (%d)",
	       n);
	c->peers[5].fd = -1;
	c->peers[3].bye = 1;
	n = tcp_hang_verdict(c, -1, out, 8);
	tap_ok(n == 0,
	       "NCCL: ranks this one has no connection to, or that left, are "
	       "for other ranks' verdicts (%d)",
	       n);
	n = tcp_hang_verdict(c, -1, out, 1);
	tap_ok(n == 0, "the verdict respects its room");
	c->peers[5].fd = 0;
	c->peers[3].bye = 0;
	n = tcp_hang_verdict(c, -1, out, 1);
	tap_ok(n == 1 && out[0] == 3, "a verdict cut to its room keeps the "
				      "first ranks");
	c->cur.seq = 0;
	tap_ok(tcp_hang_verdict(c, -1, out, 8) == 0,
	       "before the first call there is nothing to name");
	c->cur.seq = 7;
	c->peers[4].absent_seq = 7;
	c->peers[2].absent_seq = 6;
	n = tcp_hang_absent(c, out, 8);
	tap_ok(n == 1 && out[0] == 4,
	       "the ranks named are those of this call's verdicts only");
	mesh_free(c);
}

/*
 * The naming line rank 0 writes to DDP_FAILURE_FD, into buf: for a
 * peer's abort reason, or (reason NULL) when its hang survey's verdict
 * names rank 2, which last said it is in call in_seq while rank 0 is in
 * call 7; then the survey's error follows the line. In a child: a
 * process names once.
 */
static void
survey_naming(const char *reason, uint32_t in_seq, char *buf, size_t len)
{
	char value[48];
	struct stat st;
	ssize_t n;
	pid_t pid;
	int fd[2];

	buf[0] = '\0';
	if (pipe2(fd, O_NONBLOCK) < 0)
		return;
	if (fstat(fd[1], &st) < 0 ||
	    snprintf(value, sizeof(value), "%d:%lu", fd[1],
		     (unsigned long)st.st_ino) >= (int)sizeof(value))
		goto out;
	pid = fork();
	if (pid == 0) {
		struct wk_mesh *c = mesh_new(4, 0, 7);
		int i;

		setenv("DDP_FAILURE_FD", value, 1);
		/* The hang's error is logged: not into the TAP stream. */
		if (!freopen("/dev/null", "w", stderr))
			_exit(1);
		if (reason) {
			wk_cause_from_reason(0, reason);
			_exit(0);
		}
		/* No connection: the survey is past asking and telling, its
		 * verdict named rank 2 (tcp.h); only the failure is left. */
		for (i = 0; i < 4; i++) {
			c->peers[i].fd = -1;
			snprintf(c->peers[i].host, sizeof(c->peers[i].host),
				 "node%d", i + 1);
		}
		c->timeout_s = 1.0;
		c->waiting = 2;
		c->in_grace = 1;
		c->told = 1;
		c->grace_end = tw_now() - 1.0;
		c->peers[2].in_seq = in_seq;
		c->peers[2].absent_seq = 7;
		if (tcp_hang_watch(c, NULL, 2, tw_now() - 1.0) !=
		    DDP_ERR_TIMEOUT)
			_exit(1);
		(void)!write(fd[1], wk_errbuf(), strlen(wk_errbuf()));
		_exit(0);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
	n = read(fd[0], buf, len - 1);
	buf[n > 0 ? n : 0] = '\0';
out:
	close(fd[0]);
	close(fd[1]);
}

/* 1 when out is the naming line want followed by an error with hint. */
static int
named_with_hint(const char *out, const char *want, const char *hint)
{
	size_t n = strlen(want);

	return !strncmp(out, want, n) && strstr(out + n, "hang: rank 0 ") &&
	       strstr(out + n, hint);
}

static void
test_survey_naming(void)
{
	char line[1024];
	static const char silent[] = "(silent in this call: not calling";
	static const char behind[] = "(waiting in an earlier call: its own "
				     "error names the rank it waits for)";

	survey_naming(NULL, 0, line, sizeof(line));
	tap_ok(named_with_hint(line, "0 names 2 node3 hang\n", silent),
	       "a survey that names a rank which said nothing of its calls "
	       "names it as hung, silent in this call: %.*s",
	       (int)strcspn(line, "\n"), line);
	survey_naming(NULL, 7, line, sizeof(line));
	tap_ok(named_with_hint(line, "0 names 2 node3 hang\n", silent),
	       "the same for a rank whose last word was the call in "
	       "progress: %.*s",
	       (int)strcspn(line, "\n"), line);
	survey_naming(NULL, 6, line, sizeof(line));
	tap_ok(named_with_hint(line, "0 names 2 node3 behind\n", behind) &&
		       strstr(line, "rank 2 (node3, pid 0, still in #6)"),
	       "a rank still in an earlier call is named as behind, a "
	       "waiter that srun follows, and said to wait there: %.*s",
	       (int)strcspn(line, "\n"), line);
	survey_naming("rank 3 (node4) aborted: hang: rank 3 (node4, pid 9) "
		      "is in allreduce #7 (...), which rank 2 (node3, pid 8, "
		      "still in #6) has not entered (...)",
		      0, line, sizeof(line));
	tap_ok(!strcmp(line, "0 names 2 node3 behind\n"),
	       "a peer's abort for a hang passes the waiter on as behind: %s",
	       line);
	survey_naming("rank 3 (node4) aborted: hang: rank 3 (node4, pid 9) "
		      "is in allreduce #7 (...), which rank 2 (node3, pid 8), "
		      "rank 1 (node2, pid 7, still in #6) have not entered",
		      0, line, sizeof(line));
	tap_ok(!strcmp(line, "0 names 2 node3 hang\n"),
	       "and the first rank it names as hung when that one is not "
	       "behind: %s",
	       line);
}

/* The rendezvous' timeout, ample on a loaded host. */
#define RDV_TIMEOUT_S 30.0

/* The grace of tcp.h: a quarter of the timeout, at most 0.5 s. */
static double
grace_of(double timeout)
{
	return timeout / 4 < 0.5 ? timeout / 4 : 0.5;
}

struct hang_try {
	int victim;
	int skip_at; /* the allreduce the victim skips */
	double timeout;
	int per_node; /* ranks per simulated node (DDP_HOSTNAME), 0: one host */
	size_t count; /* elements per allreduce, 0: a few */
};

static int
hang_rank(int rank, int size, int port, FILE *out, void *arg)
{
	const struct hang_try *t = arg;
	struct ddp_config cfg;
	struct ddp_comm *c = NULL;
	enum ddp_status st = DDP_OK;
	static float buf[1 << 20];
	char node[32];
	double t0 = tw_now();
	int i;

	if (t->per_node) {
		snprintf(node, sizeof(node), "node%d", rank / t->per_node);
		setenv("DDP_HOSTNAME", node, 1);
	}
	tw_cfg(&cfg, rank, size, port, RDV_TIMEOUT_S);
	if (ddp_comm_init(&cfg, &c)) {
		fprintf(out, "INIT %s\n", ddp_last_error());
		return 1;
	}
	if (ddp_comm_set_timeout(c, t->timeout)) {
		fprintf(out, "SET_TIMEOUT %s\n", ddp_last_error());
		ddp_comm_destroy(c);
		return 1;
	}
	for (i = 0; i < 256; i++)
		buf[i] = (float)rank;
	for (i = 0; i < t->skip_at + 3 && !st; i++) {
		if (rank == t->victim && i == t->skip_at) {
			/* Alive, but not calling: a stuck data loader. */
			usleep((useconds_t)((t->timeout + 1.0) * 1e6));
			continue;
		}
		t0 = tw_now();
		st = ddp_allreduce(c, buf, buf,
				   t->count ? t->count : 1 + (size_t)i % 200,
				   DDP_FLOAT32, DDP_SUM);
	}
	fprintf(out, "STATUS %d AFTER %.3f MSG %s\n", (int)st, tw_now() - t0,
		st ? ddp_last_error() : "");
	ddp_comm_destroy(c);
	return st ? 3 : 0;
}

/* One job: 1 when every waiting rank named the victim as it should. */
static int
hang_job(int size, const struct hang_try *t, char *line, size_t linelen,
	 double *worst)
{
	struct tw_rank rk[8];
	char want[96];
	int i, ok = 1;
	const char *m;

	if (tw_run_job(size, hang_rank, (void *)t, RDV_TIMEOUT_S + 15, rk) < 0)
		return 0;
	*worst = 0;
	for (i = 0; i < size; i++) {
		/* Every process ends by itself, the victim too: its next
		 * call fails at once on the aborted communicator. */
		ok &= WIFEXITED(rk[i].status) && tw_exit(&rk[i]) == 3;
		if (i == t->victim)
			continue;
		snprintf(want, sizeof(want), "rank %d (", t->victim);
		m = strstr(rk[i].out, "MSG ");
		ok &= tw_status_of(&rk[i]) == DDP_ERR_TIMEOUT && m &&
		      strstr(m, "hang: ") && strstr(m, want) &&
		      strstr(m, "has not entered (silent in this call") &&
		      strstr(m, "allreduce #") &&
		      tw_after_of(&rk[i]) <= t->timeout + grace_of(t->timeout);
		snprintf(want, sizeof(want), "pid %d)", (int)rk[t->victim].pid);
		ok &= m && strstr(m, want) != NULL;
		if (tw_after_of(&rk[i]) > *worst)
			*worst = tw_after_of(&rk[i]);
		if (m && !line[0])
			snprintf(line, linelen, "%.*s",
				 (int)strcspn(m + 4, "\n"), m + 4);
	}
	if (!ok)
		tw_diag_all(size, rk);
	tw_free_job(size, rk);
	return ok;
}

static void
test_skipped_allreduce(void)
{
	static const int sizes[] = {3, 4, 5, 8};
	struct hang_try t;
	char line[1024] = "";
	double worst = 0, w = 0;
	int k, good = 0, size;

	memset(&t, 0, sizeof(t));
	for (k = 0; k < 20; k++) {
		size = sizes[k % 4];
		t.victim = (k * 3 + 1) % size;
		t.skip_at = 2 + k % 5;
		t.timeout = 1.0;
		if (hang_job(size, &t, line, sizeof(line), &w))
			good++;
		else
			tap_diag(
				"try %d: %d ranks, rank %d skips allreduce %d: "
				"not named as it should be",
				k + 1, size, t.victim, t.skip_at + 1);
		worst = w > worst ? w : worst;
	}
	tap_ok(good == 20,
	       "a rank that skips one allreduce is named by every other rank "
	       "(call, host, pid) within DDP_TIMEOUT and a grace, and every "
	       "process ends: %d of 20 tries (3 to 8 ranks, timeout 1 s set "
	       "after the rendezvous, bound %.2f s, slowest %.2f s)",
	       good, 1.0 + grace_of(1.0), worst);
	tap_diag("%s", line);
}

/* The hierarchical allreduce: ranks of a node wait in shared memory. */
static void
test_skipped_hier(void)
{
	struct hang_try t;
	char line[1024] = "";
	double worst = 0, w = 0;
	int k, good = 0;

	memset(&t, 0, sizeof(t));
	t.per_node = 2;
	t.count = 1 << 20;
	t.timeout = 1.0;
	t.skip_at = 2;
	for (k = 0; k < 4; k++) {
		t.victim = k;
		good += hang_job(4, &t, line, sizeof(line), &w);
		worst = w > worst ? w : worst;
	}
	tap_ok(good == 4,
	       "the same in the hierarchical allreduce (2 nodes of 2 ranks, "
	       "shared memory within them), each rank skipping in turn: %d "
	       "of 4 (bound %.2f s, slowest %.2f s)",
	       good, 1.0 + grace_of(1.0), worst);
	tap_diag("%s", line);
}

int
main(void)
{
	signal(SIGPIPE, SIG_IGN);
	test_verdict();
	test_survey_naming();
	test_skipped_allreduce();
	test_skipped_hier();
	return tap_done();
}
