/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libddp failure handling: mismatched collectives name both sides, a
 * killed or hung rank is named within the timeout, rendezvous errors say
 * what to check, the environment is parsed strictly, and a rank that ends
 * normally is told apart from one that dies; a peer's data listener that
 * refused this rank's mesh connection is named as a refusal; the rank
 * at fault reaches DDP_FAILURE_FD's pipe.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "cause.h"
#include "proto.h"
#include "tap.h"
#include "tcp.h"
#include "test-worker-util.h"

/* "At once": a mismatch or a goodbye fails the call without waiting,
 * against a timeout of 20 s or more; tap.h. */
#define AT_ONCE tap_bound(2.0, 10.0)

struct scen {
	int kind;
	double timeout;
	int victim; /* the rank that dies or hangs */
};

enum {
	MISMATCH_COUNT,
	MISMATCH_KIND,
	KILLED,
	HUNG,
	CLEAN_EXIT,
	EXTRA_CALL,
};

static int
report(FILE *out, enum ddp_status st, double t0)
{
	fprintf(out, "STATUS %d AFTER %.3f MSG %s\n", (int)st, tw_now() - t0,
		st ? ddp_last_error() : "");
	return st ? 3 : 0;
}

static int
rank_main(int rank, int size, int port, FILE *out, void *arg)
{
	const struct scen *s = arg;
	struct ddp_config cfg;
	struct ddp_comm *c = NULL;
	enum ddp_status st = DDP_OK;
	static float buf[200000];
	double t0;
	int i;

	tw_cfg(&cfg, rank, size, port, s->timeout);
	if (ddp_comm_init(&cfg, &c)) {
		fprintf(out, "INIT %s\n", ddp_last_error());
		return 1;
	}
	t0 = tw_now();
	switch (s->kind) {
	case MISMATCH_COUNT:
		st = ddp_allreduce(c, buf, buf, rank == 1 ? 11 : 10,
				   DDP_FLOAT32, DDP_SUM);
		break;
	case MISMATCH_KIND:
		if (rank == 2)
			st = ddp_broadcast(c, buf, 10, DDP_FLOAT32, 0);
		else
			st = ddp_allreduce(c, buf, buf, 10, DDP_FLOAT32,
					   DDP_SUM);
		break;
	case KILLED:
	case HUNG:
		for (i = 0; i < 1000000 && !st; i++) {
			if (rank == s->victim && i == 20) {
				fprintf(out, "DYING at %.3f\n", tw_now());
				if (s->kind == KILLED)
					raise(SIGKILL);
				sleep(60);
			}
			t0 = tw_now();
			st = ddp_allreduce(c, buf, buf, i % 2 ? 196672 : 1000,
					   DDP_FLOAT32, DDP_SUM);
		}
		break;
	case CLEAN_EXIT:
		/* Ranks finish at different times; the ring's last
		 * segments are still moving when the first rank leaves. */
		for (i = 0; i < 5 && !st; i++) {
			if (rank == 2 && i == 4)
				usleep(300000);
			st = ddp_allreduce(c, buf, buf, 200000, DDP_FLOAT32,
					   DDP_MAX);
		}
		break;
	case EXTRA_CALL:
		/* Rank 0 makes one call fewer than the others. */
		for (i = 0; i < (rank == 0 ? 2 : 3) && !st; i++) {
			t0 = tw_now();
			st = ddp_allreduce(c, buf, buf, 1000, DDP_FLOAT32,
					   DDP_SUM);
		}
		break;
	}
	ddp_comm_destroy(c);
	return report(out, st, t0);
}

static int
has(const struct tw_rank *r, const char *s)
{
	return strstr(r->out, s) != NULL;
}

static void
test_mismatch(void)
{
	struct scen s = {MISMATCH_COUNT, 30, -1};
	struct tw_rank rk[3];
	int i, ok = 1;

	tw_run_job(2, rank_main, &s, 60, rk);
	for (i = 0; i < 2; i++)
		ok &= (tw_status_of(&rk[i]) == DDP_ERR_MISMATCH ||
		       tw_status_of(&rk[i]) == DDP_ERR_PEER) &&
		      tw_after_of(&rk[i]) < AT_ONCE && has(&rk[i], "rank 0") &&
		      has(&rk[i], "rank 1") && has(&rk[i], "10 elements") &&
		      has(&rk[i], "11 elements");
	if (!tap_ok(ok,
		    "count mismatch fails at once on both ranks, naming "
		    "both calls (%.2f s, %.2f s)",
		    tw_after_of(&rk[0]), tw_after_of(&rk[1])))
		tw_diag_all(2, rk);
	tw_free_job(2, rk);

	/* Call #1 is ddp_comm_init's own (every rank's pid and GPU). */
	s.kind = MISMATCH_KIND;
	tw_run_job(3, rank_main, &s, 60, rk);
	ok = 1;
	for (i = 0; i < 3; i++)
		ok &= (tw_status_of(&rk[i]) == DDP_ERR_MISMATCH ||
		       tw_status_of(&rk[i]) == DDP_ERR_PEER) &&
		      tw_after_of(&rk[i]) < AT_ONCE &&
		      has(&rk[i], "broadcast #2") &&
		      has(&rk[i], "allreduce #2");
	if (!tap_ok(ok, "broadcast vs allreduce fails at once on all 3 "
			"ranks, naming both calls"))
		tw_diag_all(3, rk);
	tw_free_job(3, rk);
}

/*
 * Reads what the ranks wrote to the pipe of DDP_FAILURE_FD (fd) and closes
 * it: one "RANK names DEAD HOST WHY" line from each survivor that failed
 * on its own account; at least one line, each naming dead for why.
 */
static void
check_named(int fd[2], int size, int dead, const char *why)
{
	char buf[4096], host[80], w[16], *line, *save = NULL;
	ssize_t n;
	int lines = 0, ok = fd[0] >= 0, self, named;

	if (fd[0] < 0) {
		tap_ok(0, "a pipe for DDP_FAILURE_FD");
		return;
	}
	close(fd[1]);
	n = read(fd[0], buf, sizeof(buf) - 1);
	close(fd[0]);
	buf[n > 0 ? n : 0] = '\0';
	for (line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		lines++;
		ok &= sscanf(line, "%d names %d %79s %15s", &self, &named, host,
			     w) == 4 &&
		      self != dead && self >= 0 && self < size &&
		      named == dead && !strcmp(w, why);
	}
	tap_ok(ok && lines >= 1 && lines < size,
	       "DDP_FAILURE_FD: %d survivor(s) name rank %d (%s): %.200s",
	       lines, dead, why, buf);
}

static void
test_dead(int kind, int size, double timeout, int dead)
{
	struct scen s = {kind, timeout, dead};
	struct tw_rank rk[8];
	char want[32], fdnum[48];
	struct stat st;
	double worst = 0, t;
	int i, ok = 1, cause[2];

	/* The survivors name the dead rank to DDP_FAILURE_FD's pipe, as
	 * slurmstepd hands it to a --ddp step's tasks. */
	if (pipe2(cause, O_NONBLOCK) < 0 || fstat(cause[1], &st) < 0 ||
	    snprintf(fdnum, sizeof(fdnum), "%d:%lu", cause[1],
		     (unsigned long)st.st_ino) >= (int)sizeof(fdnum))
		cause[0] = cause[1] = -1;
	else
		setenv("DDP_FAILURE_FD", fdnum, 1);
	tw_run_job(size, rank_main, &s, timeout + 3, rk);
	unsetenv("DDP_FAILURE_FD");
	check_named(cause, size, dead, kind == KILLED ? "lost" : "hang");
	/* "lost rank N": a survivor that fails on a neighbour which failed
	 * first still names the rank that died, not the neighbour. */
	snprintf(want, sizeof(want),
		 kind == KILLED ? "lost rank %d (" : "rank %d (", dead);
	for (i = 0; i < size; i++) {
		if (i == dead)
			continue;
		t = tw_after_of(&rk[i]);
		worst = t > worst ? t : worst;
		ok &= tw_exit(&rk[i]) == 3 && has(&rk[i], want) &&
		      (kind == KILLED
			       ? tw_status_of(&rk[i]) == DDP_ERR_PEER
			       : tw_status_of(&rk[i]) == DDP_ERR_TIMEOUT ||
					 tw_status_of(&rk[i]) ==
						 DDP_ERR_PEER) &&
		      t < tap_bound(timeout + 1.0, timeout + 10.0);
	}
	/* A death is seen at once, well before the timeout (10 s). */
	if (kind == KILLED)
		ok &= worst < tap_bound(1.0, timeout / 2);
	if (!tap_ok(ok,
		    "%s rank of %d: every other rank fails naming rank %d "
		    "and its host, slowest after %.3f s (timeout %g s)",
		    kind == KILLED ? "SIGKILLed" : "hung", size, dead, worst,
		    timeout))
		tw_diag_all(size, rk);
	else
		tap_diag("rank 0 said: %.300s", strstr(rk[0].out, "MSG ") + 4);
	tw_free_job(size, rk);
}

/* What a child that names rank 1 with DDP_FAILURE_FD=value writes to the
 * pipe fd[1] (read from fd[0]), into buf. */
static void
named_with(const char *value, int fd[2], char *buf, size_t len)
{
	pid_t pid = fork();
	ssize_t n;

	if (pid == 0) {
		setenv("DDP_FAILURE_FD", value, 1);
		wk_cause_name(0, 1, "node2", "lost");
		wk_cause_name(0, 3, "node4", "hang");
		_exit(0);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
	n = read(fd[0], buf, len - 1);
	buf[n > 0 ? n : 0] = '\0';
}

static void
test_cause_fd(void)
{
	char value[64], buf[256];
	struct stat st;
	int fd[2];

	if (pipe2(fd, O_NONBLOCK) < 0 || fstat(fd[1], &st) < 0) {
		tap_ok(0, "a pipe");
		return;
	}
	snprintf(value, sizeof(value), "%d:%lu", fd[1],
		 (unsigned long)st.st_ino);
	named_with(value, fd, buf, sizeof(buf));
	tap_ok(!strcmp(buf, "0 names 1 node2 lost\n"),
	       "DDP_FAILURE_FD=N:INODE: the first naming alone: %s", buf);
	snprintf(value, sizeof(value), "%d:%lu", fd[1],
		 (unsigned long)st.st_ino + 1);
	named_with(value, fd, buf, sizeof(buf));
	tap_ok(!buf[0], "another pipe's inode: nothing written");
	snprintf(value, sizeof(value), "%d", fd[0]);
	named_with(value, fd, buf, sizeof(buf));
	tap_ok(!buf[0], "the read end: nothing written");
	named_with("1x", fd, buf, sizeof(buf));
	tap_ok(!buf[0], "a malformed DDP_FAILURE_FD: nothing written");
	close(fd[0]);
	close(fd[1]);
}

static void
test_clean_exit(void)
{
	struct scen s = {CLEAN_EXIT, 20, -1};
	struct tw_rank rk[3];
	int i, ok = 1;

	tw_run_job(3, rank_main, &s, 60, rk);
	for (i = 0; i < 3; i++)
		ok &= tw_exit(&rk[i]) == 0;
	if (!tap_ok(ok, "ranks leaving at different times after the last "
			"collective are not reported as dead"))
		tw_diag_all(3, rk);
	tw_free_job(3, rk);

	s.kind = EXTRA_CALL;
	tw_run_job(3, rank_main, &s, 60, rk);
	ok = tw_exit(&rk[0]) == 0;
	for (i = 1; i < 3; i++)
		ok &= (tw_status_of(&rk[i]) == DDP_ERR_MISMATCH ||
		       tw_status_of(&rk[i]) == DDP_ERR_PEER) &&
		      has(&rk[i], "has already left") &&
		      tw_after_of(&rk[i]) < AT_ONCE;
	if (!tap_ok(ok, "a call made after another rank left fails at once: "
			"'has already left'"))
		tw_diag_all(3, rk);
	tw_free_job(3, rk);
}

static void
test_rendezvous(void)
{
	struct ddp_config cfg;
	struct ddp_comm *c = NULL;
	enum ddp_status st;
	char want[64];
	double t0;
	int port = tw_free_port();

	tw_cfg(&cfg, 1, 2, port, 1.5);
	t0 = tw_now();
	st = ddp_comm_init(&cfg, &c);
	snprintf(want, sizeof(want), "127.0.0.1:%d", port);
	if (!tap_ok(st == DDP_ERR_RENDEZVOUS &&
			    tw_now() - t0 < tap_bound(2.5, 15.0) &&
			    strstr(ddp_last_error(), want) &&
			    strstr(ddp_last_error(), "firewall"),
		    "unreachable rank 0: error within the timeout names "
		    "host:port and the firewall (%.2f s)",
		    tw_now() - t0))
		tap_diag("status %d: %s", (int)st, ddp_last_error());
	else
		tap_diag("%s", ddp_last_error());

	tw_cfg(&cfg, 0, 3, port, 1.0);
	t0 = tw_now();
	st = ddp_comm_init(&cfg, &c);
	if (!tap_ok(st == DDP_ERR_TIMEOUT &&
			    tw_now() - t0 < tap_bound(2.0, 15.0) &&
			    strstr(ddp_last_error(), "1/3 joined") &&
			    strstr(ddp_last_error(), "missing ranks 1, 2"),
		    "rank 0 alone: timeout names the missing ranks (%.2f s)",
		    tw_now() - t0))
		tap_diag("status %d: %s", (int)st, ddp_last_error());
}

static void
env_case(const char *name, const char *const *kv, enum ddp_status want,
	 const char *needle)
{
	static const char *const vars[] = {
		"RANK",		 "WORLD_SIZE",	    "LOCAL_RANK",
		"MASTER_ADDR",	 "MASTER_PORT",	    "DDP_TIMEOUT",
		"DDP_BACKEND",	 "DDP_AUTH",	    "SLURM_JOB_ID",
		"SLURM_STEP_ID", "DDP_MUNGE_SOCKET"};
	struct ddp_config cfg;
	enum ddp_status st;
	size_t i;

	for (i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
	for (i = 0; kv[i]; i += 2)
		setenv(kv[i], kv[i + 1], 1);
	st = ddp_config_from_env(&cfg);
	if (!tap_ok(st == want && (!needle || strstr(ddp_last_error(), needle)),
		    "environment: %s", name))
		tap_diag("status %d: %s", (int)st, ddp_last_error());
}

static void
test_env(void)
{
	static const char *const single[] = {NULL};
	static const char *const bad_rank[] = {
		"WORLD_SIZE", "2",	     "RANK",  "abc", "MASTER_ADDR",
		"h",	      "MASTER_PORT", "29500", NULL};
	static const char *const big_rank[] = {
		"WORLD_SIZE", "2",	     "RANK",  "2", "MASTER_ADDR",
		"h",	      "MASTER_PORT", "29500", NULL};
	static const char *const no_addr[] = {
		"WORLD_SIZE", "2", "RANK", "1", "MASTER_PORT", "29500", NULL};
	static const char *const bad_port[] = {
		"WORLD_SIZE", "2",	     "RANK",  "1", "MASTER_ADDR",
		"h",	      "MASTER_PORT", "70000", NULL};
	static const char *const bad_timeout[] = {"DDP_TIMEOUT", "-3", NULL};
	static const char *const bad_backend[] = {"DDP_BACKEND", "mpi", NULL};
	struct ddp_comm *c = NULL;
	float v = 3;

	env_case("no variables: a single rank", single, DDP_OK, NULL);
	if (!tap_ok(ddp_comm_init_env(&c) == DDP_OK && ddp_comm_size(c) == 1 &&
			    ddp_allreduce(c, &v, &v, 1, DDP_FLOAT32, DDP_AVG) ==
				    DDP_OK &&
			    v == 3,
		    "a single rank needs no rendezvous and reduces to itself"))
		tap_diag("%s", ddp_last_error());
	ddp_comm_destroy(c);
	env_case("RANK=abc refused, naming RANK", bad_rank, DDP_ERR_ENV,
		 "RANK='abc'");
	env_case("RANK=2 of WORLD_SIZE=2 refused", big_rank, DDP_ERR_ENV,
		 "[0, 1]");
	env_case("missing MASTER_ADDR refused, naming it", no_addr, DDP_ERR_ENV,
		 "MASTER_ADDR");
	env_case("MASTER_PORT=70000 refused", bad_port, DDP_ERR_ENV,
		 "MASTER_PORT");
	env_case("DDP_TIMEOUT=-3 refused", bad_timeout, DDP_ERR_ENV,
		 "DDP_TIMEOUT");
	env_case("DDP_BACKEND=mpi refused", bad_backend, DDP_ERR_ENV,
		 "auto, tcp or nccl");
}

/* Rank 0 of 2 whose connection to rank 1 carries what rank 1's data
 * listener sends when it refuses it: a rendezvous REFUSE, not a frame. */
static void
test_refused_mesh(void)
{
	struct wk_peer *peers = calloc(2, sizeof(*peers));
	struct wk_mesh c;
	struct wk_buf b = {0};
	enum ddp_status st;
	int sv[2];

	memset(&c, 0, sizeof(c));
	if (!peers ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 ||
	    proto_encode_text(&b, RDV_REFUSE,
			      "refused by the rendezvous on this port; the "
			      "job's rank 0 log names the reason") < 0 ||
	    write(sv[1], b.p, b.len) != (ssize_t)b.len) {
		tap_ok(0, "socketpair");
		return;
	}
	c.size = 2;
	c.timeout_s = 5;
	c.peers = peers; /* tcp_mesh_fini frees it, closing sv[0] */
	c.waiting = -1;
	peers[0].fd = -1;
	peers[1].fd = sv[0];
	peers[0].waits_for = peers[1].waits_for = -1;
	snprintf(peers[1].host, sizeof(peers[1].host), "nB");
	st = tcp_mesh_link(&c);
	if (!st)
		st = tcp_barrier(&c);
	tap_ok(st == DDP_ERR_PEER &&
		       strstr(ddp_last_error(),
			      "rank 1 (nB) refused the mesh connection of "
			      "rank 0") &&
		       !strstr(ddp_last_error(), "malformed"),
	       "a refusal on a mesh connection is told as rank 1's refusal, "
	       "not a malformed frame: %s",
	       ddp_last_error());
	tcp_mesh_fini(&c);
	wk_buf_free(&b);
	close(sv[1]);
}

int
main(void)
{
	signal(SIGPIPE, SIG_IGN);
	test_env();
	test_rendezvous();
	test_mismatch();
	test_dead(KILLED, 4, 10, 3);
	/* A rank in the middle of the ring: its neighbours fail first and
	 * the others still name it, not the neighbour that left. */
	test_dead(KILLED, 4, 10, 2);
	test_dead(KILLED, 3, 10, 2);
	test_dead(HUNG, 3, 2, 2);
	test_clean_exit();
	test_refused_mesh();
	test_cause_fd();
	tap_ok(strcmp(ddp_strerror(DDP_ERR_PEER), "peer died or aborted") == 0,
	       "ddp_strerror describes statuses");
	return tap_done();
}
