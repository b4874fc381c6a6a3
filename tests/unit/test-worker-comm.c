/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Two settings of a communicator. The spin rule (DDP_TCP_SPIN, tcp.h): a
 * wait polls its sockets for 50 us by default before it sleeps, 0 turns
 * that off, a value that is not a number of microseconds in [0, 1000000]
 * fails ddp_comm_init with DDP_ERR_ENV, and no rank spins where its host
 * has more ranks than CPUs in its cpuset (tcp_limit_spin, on meshes made
 * here, and as jobs report it). ddp_comm_set_timeout: a wait after it
 * ends at the new timeout (and one grace, tcp.h), not at the rendezvous'
 * timeout; the latest setting is the one used; seconds must be > 0.
 */
#include <math.h>

#include "tcp.h"
#include "test-worker-rdv.h"

/* The debug line of tcp_limit_spin, as the log callback last saw it. */
static char spin_line[512];

static void
keep_spin_line(int level, const char *msg, void *arg)
{
	(void)level;
	(void)arg;
	if (strstr(msg, "waits poll for "))
		snprintf(spin_line, sizeof(spin_line), "%s", msg);
}

/* Microseconds equal but for rounding (a spin is kept in seconds). */
static int
same_us(double a, double b)
{
	return fabs(a - b) < 1e-3;
}

/* A mesh of size ranks seen from rank 0, on_host of them (rank 0 among
 * them) on host "here", the others on "there". */
static struct wk_mesh *
mesh_on_host(int size, int on_host, double spin_s)
{
	struct wk_mesh *c = calloc(1, sizeof(*c));
	int i;

	if (!c)
		return NULL;
	c->size = size;
	c->rank = 0;
	c->spin_s = spin_s;
	snprintf(c->myhost, sizeof(c->myhost), "here");
	c->peers = calloc((size_t)size, sizeof(*c->peers));
	if (!c->peers) {
		free(c);
		return NULL;
	}
	for (i = 0; i < size; i++)
		snprintf(c->peers[i].host, sizeof(c->peers[i].host), "%s",
			 i < on_host ? "here" : "there");
	return c;
}

/* tcp_limit_spin on such a mesh: the spin it leaves, in microseconds;
 * the CPUs it counted into *cpus (from its debug line). */
static double
limited_spin(int size, int on_host, double spin_us, long *cpus)
{
	struct wk_mesh *c = mesh_on_host(size, on_host, spin_us * 1e-6);
	const char *p;
	double left;

	if (!c)
		return -1;
	spin_line[0] = '\0';
	tcp_limit_spin(c);
	p = strstr(spin_line, "ranks on this host, ");
	*cpus = p ? strtol(p + strlen("ranks on this host, "), NULL, 10) : -1;
	left = c->spin_s * 1e6;
	free(c->peers);
	free(c);
	return left;
}

static void
test_spin_rule(void)
{
	long cpus, n;
	double us;

	/* One rank here: this host's CPUs, as the rule counts them. */
	us = limited_spin(1, 1, 50, &cpus);
	if (!tap_ok(cpus >= 1 && same_us(us, 50),
		    "one rank on a host of %ld CPUs keeps its spin (%g us)",
		    cpus, us))
		tap_diag("debug line: %s", spin_line);
	if (cpus < 1)
		return;
	us = limited_spin((int)cpus, (int)cpus, 50, &n);
	tap_ok(same_us(us, 50) && n == cpus,
	       "as many ranks on the host as CPUs (%ld): the spin stays "
	       "(%g us)",
	       cpus, us);
	us = limited_spin((int)cpus + 1, (int)cpus + 1, 50, &n);
	tap_ok(us == 0,
	       "one rank more than CPUs on the host (%ld ranks): no "
	       "spin (%g us)",
	       cpus + 1, us);
	us = limited_spin((int)cpus + 3, (int)cpus, 50, &n);
	tap_ok(same_us(us, 50),
	       "ranks of other hosts do not count: %ld here and 3 there keep "
	       "the spin (%g us)",
	       cpus, us);
	us = limited_spin(1, 1, 0, &n);
	tap_ok(same_us(us, 0), "a spin turned off stays off");
}

/* DDP_TCP_SPIN=value refused by ddp_comm_init with DDP_ERR_ENV. */
static void
spin_refused(const char *value)
{
	struct ddp_config cfg;
	struct ddp_comm *c = NULL;
	enum ddp_status st;

	tw_cfg(&cfg, 0, 1, tw_free_port(), 5);
	setenv("DDP_TCP_SPIN", value, 1);
	st = ddp_comm_init(&cfg, &c);
	if (!tap_ok(st == DDP_ERR_ENV &&
			    strstr(ddp_last_error(), "DDP_TCP_SPIN") &&
			    strstr(ddp_last_error(), "[0, 1000000]"),
		    "DDP_TCP_SPIN='%s' fails ddp_comm_init with DDP_ERR_ENV, "
		    "naming it and the range",
		    value))
		tap_diag("status %d: %s", (int)st, ddp_last_error());
	ddp_comm_destroy(c);
	unsetenv("DDP_TCP_SPIN");
}

/* A rank of a 2-rank job that reports tcp_limit_spin's line and its
 * allreduce; DDP_TCP_SPIN is arg (NULL: unset). */
static int
spin_rank(int rank, int size, int port, FILE *out, void *arg)
{
	struct ddp_config cfg;
	struct ddp_comm *c = NULL;
	enum ddp_status st;
	float v = 1;

	if (arg)
		setenv("DDP_TCP_SPIN", (const char *)arg, 1);
	else
		unsetenv("DDP_TCP_SPIN");
	setenv("DDP_DEBUG", "1", 1);
	ddp_set_log_fn(keep_spin_line, NULL);
	tw_cfg(&cfg, rank, size, port, 20);
	st = ddp_comm_init(&cfg, &c);
	if (!st)
		st = ddp_allreduce(c, &v, &v, 1, DDP_FLOAT32, DDP_SUM);
	fprintf(out, "STATUS %d SUM %g\nLINE %s\n", (int)st, v, spin_line);
	ddp_comm_destroy(c);
	return st ? 3 : 0;
}

/* The spin a job's rank 0 reports with DDP_TCP_SPIN=value (NULL:
 * unset), in microseconds, or -1. */
static double
job_spin(const char *value, long cpus)
{
	struct tw_rank rk[2];
	const char *p;
	double us = -1;
	int ok;

	if (tw_run_job(2, spin_rank, (void *)value, 30, rk) < 0)
		return -1;
	ok = tw_exit(&rk[0]) == 0 && tw_exit(&rk[1]) == 0 &&
	     strstr(rk[0].out, "SUM 2");
	p = strstr(rk[0].out, "waits poll for ");
	if (ok && p && strstr(p, "(2 ranks on this host, "))
		us = strtod(p + strlen("waits poll for "), NULL);
	if (us < 0 || cpus < 2)
		tw_diag_all(2, rk);
	tw_free_job(2, rk);
	return us;
}

static void
test_spin_env(void)
{
	long cpus;
	double us, want;

	(void)limited_spin(1, 1, 50, &cpus);
	/* Two ranks on this host spin unless it has one CPU. */
	want = cpus >= 2 ? 50 : 0;
	us = job_spin(NULL, cpus);
	tap_ok(same_us(us, want),
	       "DDP_TCP_SPIN unset: a job of 2 ranks on a host of %ld CPUs "
	       "spins %g us (%g)",
	       cpus, want, us);
	us = job_spin("0", cpus);
	tap_ok(same_us(us, 0), "DDP_TCP_SPIN=0: no spin (%g)", us);
	us = job_spin("7", cpus);
	tap_ok(same_us(us, cpus >= 2 ? 7 : 0), "DDP_TCP_SPIN=7: 7 us (%g)", us);
	spin_refused("fast");
	spin_refused("-1");
	spin_refused("1000001");
	spin_refused("2.5");
}

/* ---- ddp_comm_set_timeout ---- */

/* The timeouts rank 0 sets after the rendezvous, in order (0 ends). */
struct timeouts {
	double set[3];
};

/* Rank 0 joins with a 30 s timeout, sets the later ones and allreduces
 * alone: rank 1 never calls, and ends once rank 0's call has. */
static int
timeout_rank(int rank, int size, int port, FILE *out, void *arg)
{
	const struct timeouts *t = arg;
	struct ddp_config cfg;
	struct ddp_comm *c = NULL;
	enum ddp_status st;
	double t0;
	float v = 1;
	int k;

	tw_cfg(&cfg, rank, size, port, 30);
	st = ddp_comm_init(&cfg, &c);
	if (st) {
		fprintf(out, "INIT %s\n", ddp_last_error());
		return 1;
	}
	if (rank == 1) {
		if (!tr_gate_wait(&gate_a, 40))
			fprintf(out, "E rank 0 never ended its call\n");
		ddp_comm_destroy(c);
		return 0;
	}
	for (k = 0; k < 3 && t->set[k] > 0 && !st; k++)
		st = ddp_comm_set_timeout(c, t->set[k]);
	t0 = tw_now();
	if (!st)
		st = ddp_allreduce(c, &v, &v, 1, DDP_FLOAT32, DDP_SUM);
	fprintf(out, "STATUS %d AFTER %.3f MSG %s\n", (int)st, tw_now() - t0,
		st ? ddp_last_error() : "");
	tr_gate_open(&gate_a);
	ddp_comm_destroy(c);
	return 0;
}

/* The grace of tcp.h: a quarter of the timeout, at most 0.5 s. */
static double
grace_of(double timeout)
{
	return timeout / 4 < 0.5 ? timeout / 4 : 0.5;
}

static void
timeout_job(const struct timeouts *t, double want, const char *what)
{
	struct tw_rank rk[2];
	double after;

	if (run_gated(2, timeout_rank, (void *)t, 60, rk) < 0) {
		tap_ok(0, "fork");
		return;
	}
	after = tw_after_of(&rk[0]);
	if (!tap_ok(tw_status_of(&rk[0]) == DDP_ERR_TIMEOUT &&
			    strstr(rk[0].out, "rank 1 (") &&
			    after >= want - grace_of(want) - 0.05 &&
			    after <= tap_bound(want + grace_of(want), 15.0),
		    "%s: rank 0's allreduce, which rank 1 never enters, fails "
		    "with DDP_ERR_TIMEOUT naming rank 1 after %.2f s (the "
		    "timeout %g s and a grace; the rendezvous had 30 s)",
		    what, after, want))
		tw_diag_all(2, rk);
	tw_free_job(2, rk);
}

static void
test_set_timeout(void)
{
	const struct timeouts one = {{1.0, 0, 0}}, later = {{1.0, 2.0, 0}};
	struct ddp_config cfg;
	struct ddp_comm *c = NULL;
	int ok;

	tw_cfg(&cfg, 0, 1, tw_free_port(), 5);
	ok = ddp_comm_init(&cfg, &c) == DDP_OK &&
	     ddp_comm_set_timeout(c, 0) == DDP_ERR_INVALID &&
	     ddp_comm_set_timeout(c, -1) == DDP_ERR_INVALID &&
	     ddp_comm_set_timeout(c, NAN) == DDP_ERR_INVALID &&
	     ddp_comm_set_timeout(NULL, 1) == DDP_ERR_INVALID &&
	     strstr(ddp_last_error(), "ddp_comm_set_timeout") &&
	     ddp_comm_set_timeout(c, 0.5) == DDP_OK;
	tap_ok(ok, "ddp_comm_set_timeout refuses 0, a negative, NaN and no "
		   "communicator with DDP_ERR_INVALID, takes 0.5 s");
	ddp_comm_destroy(c);
	timeout_job(&one, 1.0, "a timeout of 1 s set after the rendezvous");
	timeout_job(&later, 2.0, "1 s, then 2 s: the later one");
}

int
main(void)
{
	signal(SIGPIPE, SIG_IGN);
	setenv("DDP_DEBUG", "1", 1);
	ddp_set_log_fn(keep_spin_line, NULL);
	test_spin_rule();
	test_spin_env();
	test_set_timeout();
	return tap_done();
}
