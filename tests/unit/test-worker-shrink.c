/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ddp_comm_shrink: a rank SIGKILLed in the middle of training among 4 and
 * 8 ranks (rank 0, the rendezvous' master, included); the survivors
 * shrink, get ranks 0..M-1 in their old order, and the next allreduces
 * give the exact sum over the survivors, on the small (recursive
 * doubling) and the large (ring) path. A second rank that dies while the
 * others shrink is dropped too, and one that comes after the others'
 * timeout fails rather than go on alone; a rank that shrinks a healthy
 * world makes the others follow. A mesh that does not connect every pair
 * of ranks (one rank per node) is refused, naming a pair. The gradient
 * sync under DDP_ON_FAILURE=shrink returns DDP_SHRUNK once, with the
 * step's average over the survivors, and goes on; DDP_ON_FAILURE is
 * checked.
 */
#include <errno.h>
#include <pthread.h>

#include "tap.h"
#include "test-worker-util.h"

/* The communicator's timeout: the documented bound of each wait of the
 * shrink, and so the sanity bound of the time it takes here. */
#define TIMEOUT_S 10.0
#define BIG 65536      /* doubles: 512 KiB, the ring's path */
#define HUGE (4 << 20) /* doubles: 32 MiB, long enough to die inside */

struct scen {
	int victim;	  /* SIGKILLed before step 20 */
	int second;	  /* dies once the others are shrinking, or -1 */
	int one_per_node; /* every rank names a host of its own */
	int mid;	  /* victim dies inside a 32 MiB ring allreduce */
	int late;	  /* shrinks once the others are done, or -1 */
	int quit;	  /* victim shrinks a healthy comm instead of dying */
	int pipe_r;	  /* the others' bytes: "shrinking" (second), */
	int pipe_w;	  /* "in the 32 MiB allreduce" (mid), "shrunk" */
};

struct huge_call {
	struct ddp_comm *c;
	double *buf;
};

static void *
huge_allreduce(void *arg)
{
	struct huge_call *h = arg;

	(void)ddp_allreduce(h->c, h->buf, h->buf, HUGE, DDP_FLOAT64, DDP_SUM);
	return NULL;
}

static int
read_byte(int fd)
{
	char b;
	ssize_t n;

	do
		n = read(fd, &b, 1);
	while (n < 0 && errno == EINTR);
	return n == 1 ? 0 : -1;
}

static void
fill(double *b, size_t n, double v)
{
	size_t i;

	for (i = 0; i < n; i++)
		b[i] = v;
}

/* After the shrink: exact sums on the new communicator, then a few
 * more steps, as training goes on. */
static int
after_shrink(struct ddp_comm *n, int rank, double t_seen, FILE *out)
{
	static double big[BIG];
	double v = rank + 1, t_first;
	enum ddp_status st;
	int i, ok = 1;

	st = ddp_allreduce(n, &v, &v, 1, DDP_FLOAT64, DDP_SUM);
	t_first = tw_now();
	for (i = 0; i < 3 && !st; i++) {
		fill(big, BIG, rank + 1);
		st = ddp_allreduce(n, big, big, BIG, DDP_FLOAT64, DDP_SUM);
		ok &= !st && big[0] == v && big[BIG - 1] == v &&
		      big[BIG / 2] == v;
	}
	if (st) {
		fprintf(out, "STATUS %d AFTER %s\n", (int)st, ddp_last_error());
		return 3;
	}
	fprintf(out, "NEW old %d new %d size %d sum %.0f big %d ms %.3f\n",
		rank, ddp_comm_rank(n), ddp_comm_size(n), v, ok,
		(t_first - t_seen) * 1e3);
	return 0;
}

static double huge[HUGE];

/* The victim's end: at once, or (mid) once its 32 MiB allreduce runs and
 * every other rank has said it enters its own. */
static void
die(struct ddp_comm *c, const struct scen *s, int size)
{
	struct huge_call h = {c, huge};
	pthread_t t;
	int k;

	if (s->mid && pthread_create(&t, NULL, huge_allreduce, &h) == 0)
		for (k = 0; k < size - 1; k++)
			if (read_byte(s->pipe_r) < 0)
				break;
	raise(SIGKILL);
}

static int
rank_main(int rank, int size, int port, FILE *out, void *arg)
{
	static double buf[BIG];
	const struct scen *s = arg;
	struct ddp_config cfg;
	struct ddp_comm *c = NULL, *n = NULL;
	enum ddp_status st = DDP_OK;
	char host[32];
	double t_seen;
	int i, k, rc = 3;

	if (s->one_per_node) {
		snprintf(host, sizeof(host), "node%d", rank);
		setenv("DDP_HOSTNAME", host, 1);
	}
	/* The others drop a late rank after their timeout. */
	tw_cfg(&cfg, rank, size, port, s->late >= 0 ? 1.0 : TIMEOUT_S);
	if (ddp_comm_init(&cfg, &c)) {
		fprintf(out, "INIT %s\n", ddp_last_error());
		return 1;
	}
	for (i = 0; i < 1000 && !st; i++) {
		if (rank == s->victim && i == 20 && s->quit)
			break;
		if (rank == s->victim && i == 20)
			die(c, s, size);
		if (s->mid && i == 20) {
			if (write(s->pipe_w, "x", 1) != 1)
				fprintf(out, "pipe: %s\n", strerror(errno));
			st = ddp_allreduce(c, huge, huge, HUGE, DDP_FLOAT64,
					   DDP_SUM);
			continue;
		}
		fill(buf, BIG, rank + 1);
		st = ddp_allreduce(c, buf, buf, i % 2 ? BIG : 100, DDP_FLOAT64,
				   DDP_SUM);
	}
	t_seen = tw_now();
	fprintf(out, "LOST at step %d: status %d: %s\n", i - 1, (int)st,
		ddp_last_error());
	if (rank == s->second) {
		/* Alive and connected until every other survivor has
		 * started to shrink, then gone. */
		for (k = 0; k < size - 2; k++)
			if (read_byte(s->pipe_r) < 0)
				break;
		raise(SIGKILL);
	}
	if (s->second >= 0 && write(s->pipe_w, "x", 1) != 1)
		fprintf(out, "pipe: %s\n", strerror(errno));
	for (k = 0; rank == s->late && k < size - 2; k++)
		if (read_byte(s->pipe_r) < 0)
			break;
	if (st == DDP_ERR_PEER || (rank == s->victim && s->quit))
		st = ddp_comm_shrink(c, &n);
	if (!st && s->late >= 0 && write(s->pipe_w, "x", 1) != 1)
		fprintf(out, "pipe: %s\n", strerror(errno));
	if (st)
		fprintf(out, "STATUS %d SHRINK %s\n", (int)st,
			ddp_last_error());
	else
		rc = after_shrink(n, rank, t_seen, out);
	ddp_comm_destroy(n);
	ddp_comm_destroy(c);
	return rc;
}

/* Runs one loss among size ranks and checks every survivor's report. */
static void
test_loss(int size, int victim, int second, int mid, int late, int quit)
{
	struct scen s = {victim, second, 0, mid, late, quit, -1, -1};
	struct tw_rank rk[8];
	int p[2], i, m = 0, newr = 0, ok = 1, nr, ns, big;
	double sum = 0, ms, worst = 0, got;
	const char *line;

	if ((second >= 0 || mid || late >= 0) && pipe(p) == 0) {
		s.pipe_r = p[0];
		s.pipe_w = p[1];
	}
	for (i = 0; i < size; i++) {
		if ((i != victim || quit) && i != second && i != late) {
			m++;
			sum += i + 1;
		}
	}
	tw_run_job(size, rank_main, &s, 3 * TIMEOUT_S, rk);
	if (late >= 0)
		ok &= tw_exit(&rk[late]) == 3 &&
		      tw_status_of(&rk[late]) == DDP_ERR_PEER &&
		      strstr(rk[late].out, "reaches only") != NULL;
	for (i = 0; i < size; i++) {
		if ((i == victim && !quit) || i == second || i == late)
			continue;
		line = strstr(rk[i].out, "NEW ");
		if (tw_exit(&rk[i]) != 0 || !line ||
		    sscanf(line,
			   "NEW old %*d new %d size %d sum %lf big %d ms %lf",
			   &nr, &ns, &got, &big, &ms) != 5) {
			ok = 0;
			continue;
		}
		ok &= nr == newr && ns == m && got == sum && big == 1 &&
		      ms < TIMEOUT_S * 1e3;
		worst = ms > worst ? ms : worst;
		newr++;
	}
	if (!tap_ok(ok,
		    "%d ranks, rank %d %s%s%s%s: %d survivors renumbered "
		    "0..%d in order, exact sums (%.0f) after the shrink",
		    size, victim,
		    quit ? "shrinks a healthy world (the others follow)"
			 : "killed",
		    mid ? " inside a 32 MiB ring allreduce" : "",
		    second >= 0 ? ", another while the others shrink" : "",
		    late >= 0 ? ", another too late (dropped: it fails "
				"rather than go on alone)"
			      : "",
		    m, m - 1, sum))
		tw_diag_all(size, rk);
	else
		tap_diag("loss seen to the shrunk world's first allreduce: "
			 "%.1f ms at most (bound: DDP_TIMEOUT %g s%s)",
			 worst, late >= 0 ? 1.0 : TIMEOUT_S,
			 late >= 0 ? ", waited out for the late rank" : "");
	tw_free_job(size, rk);
	if (second >= 0 || mid || late >= 0) {
		close(p[0]);
		close(p[1]);
	}
}

/* One rank per node: the sparse mesh lacks pairs the survivors need. */
static void
test_sparse(void)
{
	struct scen s = {3, -1, 1, 0, -1, 0, -1, -1};
	struct tw_rank rk[8];
	int i, ok = 1;

	tw_run_job(8, rank_main, &s, 3 * TIMEOUT_S, rk);
	for (i = 0; i < 8; i++)
		if (i != 3)
			ok &= tw_exit(&rk[i]) == 3 &&
			      tw_status_of(&rk[i]) == DDP_ERR_UNSUPPORTED &&
			      strstr(rk[i].out, "have no connection") &&
			      strstr(rk[i].out, "relaunch");
	if (!tap_ok(ok, "one rank per node: the shrink is refused with "
			"DDP_ERR_UNSUPPORTED naming an unconnected pair"))
		tw_diag_all(8, rk);
	else
		tap_diag("rank 0 said: %.300s", strstr(rk[0].out, "SHRINK"));
	tw_free_job(8, rk);
}

static void
test_args(void)
{
	struct ddp_comm *n = (struct ddp_comm *)1;

	tap_ok(ddp_comm_shrink(NULL, &n) == DDP_ERR_INVALID && n == NULL,
	       "a NULL communicator is DDP_ERR_INVALID");
	tap_ok(strcmp(ddp_strerror(DDP_ERR_UNSUPPORTED), "unknown status") != 0,
	       "DDP_ERR_UNSUPPORTED has a description");
}

/* ---- the gradient sync under DDP_ON_FAILURE=shrink ---- */

#define NPARAM 6
static const size_t pcount[NPARAM] = {1000, 20000, 300, 70000, 5, 40000};

/* Gradient value of rank r at step k (exact in float64, sums too). */
static double
gval(int r, int k)
{
	return (double)((r + 1) * (k + 3));
}

static int
grad_main(int rank, int size, int port, FILE *out, void *arg)
{
	const struct scen *s = arg;
	struct ddp_grad_sync_opts o = {4096, 160000};
	static double param[NPARAM][70000], own[NPARAM][70000];
	struct ddp_grad_sync *gs = NULL;
	struct ddp_config cfg;
	struct ddp_comm *c = NULL;
	enum ddp_status st = DDP_OK;
	double *g[NPARAM], t0 = 0, sum, want;
	int i, k, step, shrunk = -1, ok = 1, rc = 3, alive[64], m = 0;
	size_t e;

	setenv("DDP_ON_FAILURE", "shrink", 1);
	tw_cfg(&cfg, rank, size, port, TIMEOUT_S);
	if (ddp_comm_init(&cfg, &c) || ddp_grad_sync_create(c, &o, &gs)) {
		fprintf(out, "INIT %s\n", ddp_last_error());
		return 1;
	}
	/* Odd parameters' gradients live in the reducer (views). */
	for (i = 0; i < NPARAM; i++)
		ddp_grad_sync_add(gs, param[i], i % 2 ? NULL : own[i],
				  pcount[i], DDP_FLOAT64);
	st = ddp_grad_sync_start(gs);
	for (i = 0; i < NPARAM && !st; i++)
		g[i] = ddp_grad_sync_grad(gs, i);
	for (i = 0; i < size; i++)
		if (i != s->victim)
			alive[m++] = i;
	for (step = 0; step < 12 && (!st || st == DDP_SHRUNK); step++) {
		/* Every rank has finished step 4 when the victim dies in
		 * step 5's backward: a death right after a step can leave
		 * the survivors at different steps (refused, ddp.h). */
		if (step == 5 && rank != s->victim &&
		    write(s->pipe_w, "x", 1) != 1)
			fprintf(out, "pipe: %s\n", strerror(errno));
		for (k = 0; step == 5 && rank == s->victim && k < size - 1; k++)
			if (read_byte(s->pipe_r) < 0)
				break;
		for (i = 0; i < NPARAM; i++)
			fill(g[i], pcount[i], gval(rank, step));
		/* Backward: the last parameters first. */
		for (i = NPARAM - 1; i >= 0; i--) {
			if (rank == s->victim && step == 5 && i == 2)
				raise(SIGKILL);
			ddp_grad_sync_ready(gs, i);
		}
		st = ddp_grad_sync_wait(gs);
		if (st == DDP_SHRUNK) {
			shrunk = step;
			fprintf(out, "SHRUNK at step %d: %s\n", step,
				ddp_last_error());
			t0 = tw_now();
		}
		if (st && st != DDP_SHRUNK)
			break;
		sum = 0;
		for (k = 0; k < (shrunk >= 0 ? m : size); k++)
			sum += gval(shrunk >= 0 ? alive[k] : k, step);
		want = sum / (shrunk >= 0 ? m : size);
		for (i = 0; i < NPARAM; i++)
			for (e = 0; e < pcount[i]; e += pcount[i] / 4 + 1)
				ok &= g[i][e] == want &&
				      g[i][pcount[i] - 1] == want;
	}
	if (st && st != DDP_SHRUNK) {
		fprintf(out, "STATUS %d AT step %d: %s\n", (int)st, step,
			ddp_last_error());
	} else {
		fprintf(out,
			"DONE shrunk %d size %d rank %d exact %d after %.3f "
			"ms\n",
			shrunk, ddp_comm_size(c), ddp_comm_rank(c), ok,
			(tw_now() - t0) * 1e3);
		rc = 0;
	}
	ddp_grad_sync_destroy(gs);
	ddp_comm_destroy(c);
	return rc;
}

static void
test_grad(int size, int victim)
{
	struct scen s = {victim, -1, 0, 0, -1, 0, -1, -1};
	struct tw_rank rk[8];
	int i, ok = 1, newr = 0, sh, sz, r, ex, p[2];
	const char *line;

	if (pipe(p) < 0) {
		tap_ok(0, "pipe: %s", strerror(errno));
		return;
	}
	s.pipe_r = p[0];
	s.pipe_w = p[1];
	tw_run_job(size, grad_main, &s, 3 * TIMEOUT_S, rk);
	close(p[0]);
	close(p[1]);
	for (i = 0; i < size; i++) {
		if (i == victim)
			continue;
		line = strstr(rk[i].out, "DONE ");
		ok &= tw_exit(&rk[i]) == 0 && line &&
		      sscanf(line, "DONE shrunk %d size %d rank %d exact %d",
			     &sh, &sz, &r, &ex) == 4 &&
		      sh == 5 && sz == size - 1 && r == newr && ex == 1;
		newr++;
	}
	if (!tap_ok(ok,
		    "gradient sync, DDP_ON_FAILURE=shrink, %d ranks, rank %d "
		    "killed in backward: DDP_SHRUNK once, the step's average "
		    "over the %d survivors, then on with ranks renumbered",
		    size, victim, size - 1))
		tw_diag_all(size, rk);
	tw_free_job(size, rk);
}

/* DDP_ON_FAILURE is checked by ddp_grad_sync_create (one rank). */
static void
test_on_failure_env(void)
{
	struct ddp_config cfg;
	struct ddp_comm *c = NULL;
	struct ddp_grad_sync *gs = NULL;
	enum ddp_status st;
	int ok;

	tw_cfg(&cfg, 0, 1, tw_free_port(), TIMEOUT_S);
	if (ddp_comm_init(&cfg, &c)) {
		tap_ok(0, "one-rank communicator: %s", ddp_last_error());
		return;
	}
	setenv("DDP_ON_FAILURE", "retry", 1);
	st = ddp_grad_sync_create(c, NULL, &gs);
	tap_ok(st == DDP_ERR_ENV && !gs &&
		       strstr(ddp_last_error(), "DDP_ON_FAILURE='retry'") &&
		       strstr(ddp_last_error(), "abort") &&
		       strstr(ddp_last_error(), "shrink"),
	       "DDP_ON_FAILURE=retry is refused naming the value and the "
	       "accepted ones: %s",
	       ddp_last_error());
	ok = 1;
	setenv("DDP_ON_FAILURE", "abort", 1);
	ok &= ddp_grad_sync_create(c, NULL, &gs) == DDP_OK;
	ddp_grad_sync_destroy(gs);
	gs = NULL;
	setenv("DDP_ON_FAILURE", "shrink", 1);
	ok &= ddp_grad_sync_create(c, NULL, &gs) == DDP_OK;
	ddp_grad_sync_destroy(gs);
	gs = NULL;
	setenv("DDP_ON_FAILURE", "", 1);
	ok &= ddp_grad_sync_create(c, NULL, &gs) == DDP_OK;
	ddp_grad_sync_destroy(gs);
	unsetenv("DDP_ON_FAILURE");
	tap_ok(ok, "DDP_ON_FAILURE abort, shrink and empty are accepted");
	ddp_comm_destroy(c);
}

int
main(void)
{
	signal(SIGPIPE, SIG_IGN);
	test_args();
	test_loss(4, 2, -1, 0, -1, 0);
	test_loss(8, 5, -1, 0, -1, 0);
	test_loss(8, 0, -1, 0, -1, 0);
	test_loss(4, 0, -1, 0, -1, 0);
	test_loss(8, 3, 6, 0, -1, 0);
	test_loss(8, 5, -1, 1, -1, 0);
	test_loss(4, 0, -1, 1, -1, 0);
	test_loss(6, 1, -1, 0, 4, 0);
	test_loss(4, 2, -1, 0, -1, 1);
	test_sparse();
	test_on_failure_env();
	test_grad(4, 2);
	test_grad(8, 0);
	return tap_done();
}
