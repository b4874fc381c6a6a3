/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ddp-check: proves the nodes of a step before its program starts, and
 * names the bad one.
 *
 *   srun --ddp ddp-check [--mode fail|warn|off] [--min-fraction F]
 *                        [--time-limit S] [--gpu auto|on|off] [--port N]
 *                        [--verdict-fd FD] [--json FILE]
 *
 * Every rank joins with libddp (munge-authenticated, on --port, else on
 * MASTER_PORT; srun --ddp-check gives a port of the job's that is never
 * MASTER_PORT, so the program's port is not seen listening first): a
 * rank that cannot reach another is named. Then the lowest rank of each
 * node times each link of a ring over the nodes, in both directions, on
 * plain TCP connections whose ports and token go over libddp's control
 * plane; links below a fraction of the median are slow, and the node
 * they share is named. A short allreduce over all ranks follows. Where
 * the ranks have GPUs, each rank's device initialises with libddp's NCCL
 * backend and a device allreduce over all ranks gives its bus bandwidth.
 * Rank 0 prints one table; the exit status is the same on every rank.
 * With --verdict-fd, rank 0's findings go to every rank as verdict lines
 * (chk_verdicts), and each rank writes them to that descriptor, so the
 * plugin on every node learns what was found about its node.
 * While rank 0 waits for the ranks to join, it says every
 * JOIN_PROGRESS_S how many did and which nodes it waits for, on its
 * stderr. With --json, rank 0 also writes its report to a file, whole.
 * The whole check ends within --time-limit, whatever happens.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <ddp.h>
#include <ddp_tools.h>

#include "check.h"
#include "ddp_util.h"
#include "gpu.h"

#define AR_MAX_ELEMS (1u << 20) /* 4 MiB of float32 */
#define AR_MIN_ELEMS 256u
#define AR_ITERS 3
#define BUSID_LEN 16
/* The most verdict text rank 0 hands the others (the plugin reads at
 * most 64 KiB). */
#define VERDICT_MAX (32u << 10)
/* The warm-up stream before the timed ones (see CHK_WARM). */
#define WARM_S 0.05
/* How often rank 0 says who it still waits for while the ranks join:
 * long enough that a step whose ranks all start together says nothing. */
#define JOIN_PROGRESS_S 5.0

/* What each rank tells everyone (float64, so an allreduce gathers it). */
#define REC_BUSID 0		 /* DDP_GPU_BUSID, one character each */
#define REC_GPU BUSID_LEN	 /* enum gpu_state */
#define REC_AR_BAD (REC_GPU + 1) /* its allreduce result was wrong */
#define REC_LEN (REC_GPU + 2)

struct check {
	struct chk_opts o;
	struct ddp_config cfg;
	struct ddp_comm *comm;
	int rank;
	int world;
	char host[CHK_HOST_MAX];
	double t0;
	double t_join;	 /* when this rank joined the rendezvous */
	double deadline; /* of the check's work after the join */
	/* The nodes in the order of their lowest rank, the same everywhere. */
	struct chk_net net;
	int *node_of;
	int me;
	int leader;
	double *rec; /* world x REC_LEN */
	double ar_s; /* one allreduce over all ranks (rank 0's clock) */
	size_t ar_bytes;
	double net_s; /* the network part, rank 0's clock */
	/* Rank 0's findings. */
	struct ddp_buf problems;
	int nproblems;
	char gpu_line[CHK_TEXT_LEN];
	/* Rank 0: the failure that ended the check early, for --json. */
	char error[CHK_TEXT_LEN];
	/* The step's nodes, for the progress line; empty outside Slurm. */
	struct chk_expect expect;
};

/* ---- the hard time limit ---- */

/*
 * Two limits: the rendezvous has the join limit from the rank's start
 * (the launch of every rank is not the nodes' fault, however long srun
 * takes); from the moment the rank joined, the rest of the check has the
 * time limit. So a rank ends within join limit + time limit of its start,
 * whatever happens.
 */
static const char *phase = "starting";
static struct {
	const struct check *ck; /* its fields set before the thread starts */
	int rank;
	char host[CHK_HOST_MAX];
	int code;
	long long at_ns;   /* ddp_now() in ns; moved by watchdog_arm */
	const char *limit; /* "time limit of 20 s" */
} wd;
static char join_limit_text[64], time_limit_text[64];

static void
set_phase(const char *p)
{
	__atomic_store_n(&phase, p, __ATOMIC_RELAXED);
}

/* Moves the limit: the watchdog ends the process at at (ddp_now()'s
 * clock), naming limit_text. */
static void
watchdog_arm(double at, const char *limit_text)
{
	__atomic_store_n(&wd.limit, limit_text, __ATOMIC_RELAXED);
	__atomic_store_n(&wd.at_ns, (long long)(at * 1e9), __ATOMIC_RELEASE);
}

/*
 * Rank 0 at a limit, with --json: the file says so, as the report would
 * have: the verdict, and the limit as the error. Reads only what ck held
 * before the watchdog started.
 */
static void
limit_json(const char *what, int joined)
{
	const struct check *ck = wd.ck;
	struct chk_result res;

	if (!ck || ck->rank != 0 || !ck->o.json)
		return;
	memset(&res, 0, sizeof(res));
	res.verdict = wd.code == 0 ? "warn" : "fail";
	res.mode = chk_mode_name(ck->o.mode);
	res.job_id = ck->cfg.job_id;
	res.step_id = ck->cfg.step_id;
	res.world = ck->world;
	res.joined = joined ? ck->world : 0;
	res.error = what;
	res.allreduce_s = res.join_s = res.network_s = -1;
	res.total_s = ddp_now() - ck->t0;
	(void)chk_json_write(ck->o.json, &res);
}

static void *
watchdog(void *arg)
{
	long long at;
	const char *limit;
	char line[512];
	int n;

	(void)arg;
	/* The limit may move later while it sleeps: look again on waking. */
	while ((at = __atomic_load_n(&wd.at_ns, __ATOMIC_ACQUIRE)) >
	       (long long)(ddp_now() * 1e9))
		ddp_sleep_until((double)at * 1e-9);
	limit = __atomic_load_n(&wd.limit, __ATOMIC_RELAXED);
	n = snprintf(line, sizeof(line),
		     "ddp-check: rank %d on %s: %s reached while %s\n", wd.rank,
		     wd.host, limit, __atomic_load_n(&phase, __ATOMIC_RELAXED));
	if (n > 0)
		(void)!write(STDERR_FILENO, line,
			     (size_t)n < sizeof(line) ? (size_t)n
						      : sizeof(line) - 1);
	/* The time limit runs from the join: every rank had joined. */
	if (n > (int)strlen("ddp-check: ")) {
		line[strcspn(line, "\n")] = '\0';
		limit_json(line + strlen("ddp-check: "),
			   limit == time_limit_text);
	}
	_exit(wd.code);
}

static int
start_watchdog(struct check *ck)
{
	pthread_t t;

	wd.ck = ck;
	wd.rank = ck->rank;
	ddp_fmt(wd.host, sizeof(wd.host), "%s", ck->host);
	wd.code = ck->o.mode == CHK_MODE_WARN ? 0 : 1;
	ddp_fmt(join_limit_text, sizeof(join_limit_text), "join limit of %ld s",
		ck->o.join_limit_s);
	ddp_fmt(time_limit_text, sizeof(time_limit_text), "time limit of %ld s",
		ck->o.time_limit_s);
	watchdog_arm(ck->t0 + (double)ck->o.join_limit_s, join_limit_text);
	if (pthread_create(&t, NULL, watchdog, NULL) != 0) {
		fprintf(stderr, "ddp-check: cannot start the time limit's "
				"thread\n");
		return -1;
	}
	pthread_detach(t);
	return 0;
}

/* After the join, libddp waits at most this long for a peer. */
static double
comm_timeout(const struct check *ck)
{
	double t = (double)ck->o.time_limit_s / 4;

	return t < 1 ? 1 : t;
}

/* The rendezvous's timeout: libddp may take it twice (joining, then the
 * roster), so the join ends within the join limit. */
static double
join_timeout(const struct check *ck)
{
	double t = (double)ck->o.join_limit_s / 2;

	return t < 1 ? 1 : t;
}

/* ---- problems ---- */

static const char *
host_of(void *arg, int rank)
{
	struct check *ck = arg;

	if (ck->comm)
		return ddp_comm_host(ck->comm, rank);
	if (rank == ck->rank)
		return ck->host;
	/* Before the communicator exists, rank 0 is where MASTER_ADDR is. */
	return rank == 0 ? ck->cfg.master_addr : NULL;
}

/*
 * A libddp call failed on this rank: says so on stderr, in the check's
 * form where the failure is one of the rendezvous's, and returns -1.
 */
static int
comm_failed(struct check *ck, const char *what)
{
	const char *msg = ddp_last_error();
	char line[CHK_TEXT_LEN];

	if (!chk_explain_rdv(msg, host_of, ck, line, sizeof(line)))
		ddp_fmt(line, sizeof(line), "rank %d on %s: %s: %s", ck->rank,
			ck->host, what, msg);
	else if (ck->o.verbose)
		fprintf(stderr, "ddp-check: rank %d on %s: %s: %s\n", ck->rank,
			ck->host, what, msg);
	/* Rank 0's line ends its report; the others' go to their stderr. */
	if (ck->rank == 0 && !ck->error[0])
		ddp_fmt(ck->error, sizeof(ck->error), "%s", line);
	if (ck->rank == 0)
		printf("ddp-check: %s: %s\n",
		       ck->o.mode == CHK_MODE_WARN ? "WARN" : "FAIL", line);
	else
		fprintf(stderr, "ddp-check: %s\n", line);
	return -1;
}

__attribute__((format(printf, 2, 3))) static void
problem(struct check *ck, const char *fmt, ...)
{
	char line[CHK_TEXT_LEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	ddp_buf_printf(&ck->problems, "%s\n", line);
	ck->nproblems++;
}

/* ---- the nodes ---- */

static int
find_nodes(struct check *ck)
{
	struct chk_net *net = &ck->net;
	const char *h;
	int r, j;

	net->node = calloc((size_t)ck->world, sizeof(*net->node));
	ck->node_of = calloc((size_t)ck->world, sizeof(*ck->node_of));
	if (!net->node || !ck->node_of) {
		fprintf(stderr, "ddp-check: out of memory for %d ranks\n",
			ck->world);
		return -1;
	}
	for (r = 0; r < ck->world; r++) {
		h = ddp_comm_host(ck->comm, r);
		for (j = 0; j < net->n; j++)
			if (strcmp(net->node[j].host, h) == 0)
				break;
		if (j == net->n) {
			ddp_fmt(net->node[j].host, sizeof(net->node[j].host),
				"%s", h);
			net->node[j].leader = r;
			net->node[j].gbps[0] = net->node[j].gbps[1] = -1;
			net->n++;
		}
		net->node[j].nranks++;
		ck->node_of[r] = j;
	}
	net->ndir = net->n >= 3 ? 2 : 1;
	net->fraction = ck->o.min_fraction;
	net->window_s = (double)ck->o.link_ms / 1000;
	ck->me = ck->node_of[ck->rank];
	ck->leader = net->node[ck->me].leader == ck->rank;
	return 0;
}

/* ---- the links ---- */

static void
refused(void *arg, const char *line)
{
	struct check *ck = arg;

	fprintf(stderr, "ddp-check: rank %d on %s %s\n", ck->rank, ck->host,
		line);
}

static int
sum(struct check *ck, double *v, size_t n, const char *what)
{
	if (ddp_allreduce(ck->comm, v, v, n, DDP_FLOAT64, DDP_SUM) != DDP_OK)
		return comm_failed(ck, what);
	return 0;
}

/* Rank 0's random token, which every rank's hello carries, on every
 * rank. */
static int
share_token(struct check *ck, uint8_t token[CHK_TOKEN_LEN])
{
	memset(token, 0, CHK_TOKEN_LEN);
	if (ck->rank == 0 &&
	    getrandom(token, CHK_TOKEN_LEN, 0) != (ssize_t)CHK_TOKEN_LEN) {
		fprintf(stderr, "ddp-check: getrandom: %s\n", strerror(errno));
		return -1;
	}
	if (ddp_broadcast(ck->comm, token, CHK_TOKEN_LEN, DDP_UINT8, 0) !=
	    DDP_OK)
		return comm_failed(ck, "sending the link-test token");
	return 0;
}

/*
 * A node's leader listens for its ring neighbours (its port into v) and
 * opens the node's hold, which the node's other ranks wait on; returns
 * the hold, or -1.
 */
static int
leader_listen(struct check *ck, struct chk_ring *ring,
	      const uint8_t token[CHK_TOKEN_LEN], double *v)
{
	char err[256];
	int hold;

	if (chk_ring_listen(ring, err, sizeof(err)) < 0)
		fprintf(stderr, "ddp-check: rank %d on %s: %s\n", ck->rank,
			ck->host, err);
	v[ck->me] = ring->lport;
	hold = chk_hold_open(token, ck->me, err, sizeof(err));
	if (hold < 0 && ck->o.verbose)
		fprintf(stderr, "ddp-check: rank %d on %s: %s\n", ck->rank,
			ck->host, err);
	return hold;
}

/*
 * A node's leader connects to its neighbours on the ring and notes in v
 * (n x 2 outcomes, then n x 2 "adopted" flags) how its connections went.
 */
static void
leader_connect(struct check *ck, struct chk_ring *ring,
	       const uint8_t token[CHK_TOKEN_LEN], double *v)
{
	struct chk_node *nd = ck->net.node;
	struct chk_target to[2], from[2];
	int n = ck->net.n, i = ck->me, d;
	double wait;

	to[CHK_FWD] =
		(struct chk_target){nd[chk_next(n, i)].host,
				    nd[chk_next(n, i)].port, chk_next(n, i)};
	to[CHK_REV] =
		(struct chk_target){nd[chk_prev(n, i)].host,
				    nd[chk_prev(n, i)].port, chk_prev(n, i)};
	from[CHK_FWD] = to[CHK_REV];
	from[CHK_REV] = to[CHK_FWD];
	wait = (double)ck->o.time_limit_s / 8;
	wait = wait < 0.5 ? 0.5 : wait > 5 ? 5 : wait;
	chk_ring_connect(ring, i, ck->net.ndir, to, from, token,
			 ddp_now() + wait);
	for (d = 0; d < ck->net.ndir; d++) {
		v[i * 2 + d] = ring->conn[d];
		v[2 * n + i * 2 + d] = ring->in[d] >= 0;
	}
	/* The warm-up pair takes the forward path: its failure is the
	 * forward link's. */
	if (ring->conn[CHK_FWD] == CHK_CONN_OK)
		v[i * 2 + CHK_FWD] = ring->conn[CHK_WARM];
	if (ring->in[CHK_WARM] < 0)
		v[2 * n + i * 2 + CHK_FWD] = 0;
}

/* Every node's connections from the gathered v: 1 when all are up. */
static int
note_connections(struct chk_net *net, const double *v)
{
	struct chk_node *nd = net->node;
	int n = net->n, i, d, s, ok = 1;

	/* A connection its receiver never adopted failed, too. */
	for (i = 0; i < n; i++) {
		for (d = 0; d < net->ndir; d++) {
			nd[i].conn[d] = (int)v[i * 2 + d];
			s = d == CHK_FWD ? chk_next(n, i) : chk_prev(n, i);
			if (nd[i].conn[d] == CHK_CONN_OK &&
			    !v[2 * n + s * 2 + d])
				nd[i].conn[d] = CHK_CONN_ERROR;
			ok &= nd[i].conn[d] == CHK_CONN_OK;
		}
	}
	return ok;
}

/* A node's leader times the streams that arrive at it (after the
 * warm-up), into v: n x 2 speeds, then n x 2 errors. */
static void
leader_streams(struct check *ck, struct chk_ring *ring, double until, double *v)
{
	int n = ck->net.n, d, s, e;
	double g;

	set_phase("warming up the links");
	chk_ring_stream(ring, CHK_WARM, WARM_S, until, &g, &e);
	for (d = 0; d < ck->net.ndir; d++) {
		set_phase(d == CHK_FWD ? "timing the links to the next node"
				       : "timing the links to the previous "
					 "node");
		/* What arrives here was sent by from[d], in direction d. */
		s = d == CHK_FWD ? chk_prev(n, ck->me) : chk_next(n, ck->me);
		chk_ring_stream(ring, d, ck->net.window_s, until, &g, &e);
		v[s * 2 + d] = g;
		v[2 * n + s * 2 + d] = e;
	}
}

/*
 * Connects the ring and times its links. Every rank takes part in the
 * same collectives; only the leaders touch sockets.
 */
static int
links(struct check *ck)
{
	struct chk_net *net = &ck->net;
	struct chk_node *nd = net->node;
	struct chk_ring ring;
	uint8_t token[CHK_TOKEN_LEN];
	double *v = NULL, until;
	int n = net->n, i, d, hold = -1, rc = -1;

	chk_ring_init(&ring);
	ring.refused = refused;
	ring.refused_arg = ck;
	if (n < 2)
		return 0;
	set_phase("exchanging the link-test ports");
	v = calloc((size_t)n * 4, sizeof(*v));
	if (!v) {
		fprintf(stderr, "ddp-check: out of memory\n");
		goto out;
	}
	if (share_token(ck, token) < 0)
		goto out;
	if (ck->leader)
		hold = leader_listen(ck, &ring, token, v);
	if (sum(ck, v, (size_t)n, "exchanging the link-test ports") < 0)
		goto out;
	/* The leader's hold is there once it gave its port. */
	if (!ck->leader)
		hold = chk_hold_join(token, ck->me);
	for (i = 0; i < n; i++)
		nd[i].port = (int)v[i];
	memset(v, 0, (size_t)n * 4 * sizeof(*v));
	set_phase("connecting the link test");
	if (ck->leader)
		leader_connect(ck, &ring, token, v);
	if (sum(ck, v, (size_t)n * 4, "gathering the link-test connections") <
	    0)
		goto out;
	if (!note_connections(net, v)) {
		rc = 0;
		goto out;
	}
	memset(v, 0, (size_t)n * 4 * sizeof(*v));
	/* Each stream starts when both ends of its link are free (the
	 * receiver's go-ahead), so the directions follow one another with no
	 * barrier; every stream is over within its window and 2 s once both
	 * ends are there. The other ranks wait on the node's hold meanwhile,
	 * which the leader closes when its streams are done. */
	until = ddp_now() + (net->ndir + 1) * (net->window_s + 2) + WARM_S;
	if (until > ck->deadline - 1)
		until = ck->deadline - 1;
	if (!ck->leader) {
		set_phase("waiting for the node's link test");
		if (hold >= 0)
			chk_hold_wait(hold, until + 1);
	} else {
		leader_streams(ck, &ring, until, v);
	}
	ddp_close(&hold);
	set_phase("gathering the link speeds");
	if (sum(ck, v, (size_t)n * 4, "gathering the link speeds") < 0)
		goto out;
	for (i = 0; i < n; i++) {
		for (d = 0; d < net->ndir; d++) {
			nd[i].gbps[d] = v[i * 2 + d];
			nd[i].broke[d] = (int)v[2 * n + i * 2 + d];
		}
	}
	net->measured = 1;
	rc = 0;
out:
	ddp_close(&hold);
	chk_ring_close(&ring);
	free(v);
	return rc;
}

/* ---- the allreduce over all ranks ---- */

/*
 * Short enough to take about 50 ms on the slowest measured link, so that
 * a throttled node does not spend the time limit here, and shared out
 * over the most ranks a node has and the doublings of the ranks: they
 * all move their buffer through the node's CPUs and link once per
 * doubling, so the node's work stays that of one rank with the largest
 * buffer (at least 1 KiB). The same size on every rank: all of them know the
 * link speeds and the nodes.
 */
static size_t
allreduce_elems(const struct check *ck)
{
	double slowest = chk_slowest_gbps(&ck->net);
	double bytes = (double)AR_MAX_ELEMS * 4;
	size_t n = AR_MAX_ELEMS;
	int d = chk_doublings(ck->world);

	if (slowest >= 0 && slowest * 1e9 * 0.05 < bytes)
		bytes = slowest * 1e9 * 0.05;
	/* Recursive doubling, libddp's choice for small sizes, sends the
	 * whole buffer once per doubling. */
	bytes /= (double)chk_most_ranks(&ck->net) * (d > 1 ? d : 1);
	while (n > AR_MIN_ELEMS && (double)n * 4 > bytes)
		n /= 2;
	return n;
}

/*
 * Before a collective of bytes per rank: libddp waits for a peer as long
 * as the slowest measured link needs to carry it (chk_wait_s), so a node
 * whose link is slow but working is not taken for a hung rank.
 */
static int
plan_wait(struct check *ck, double bytes, const char *what)
{
	double s = chk_wait_s(&ck->net, ck->world, bytes,
			      (double)ck->o.time_limit_s,
			      ck->deadline - ddp_now());

	if (ck->o.verbose && ck->rank == 0)
		fprintf(stderr,
			"ddp-check: %s: %.0f bytes a rank, waits up "
			"to %.1f s for a peer\n",
			what, bytes, s);
	if (ddp_comm_set_timeout(ck->comm, s) != DDP_OK)
		return comm_failed(ck, "setting the timeout");
	return 0;
}

static int
allreduce_all(struct check *ck, int *wrong)
{
	size_t n = allreduce_elems(ck), i;
	float *buf = NULL, want;
	double t;
	int it, rc = -1;

	set_phase("running an allreduce over all ranks");
	*wrong = 0;
	buf = malloc(n * sizeof(*buf));
	if (!buf) {
		fprintf(stderr, "ddp-check: out of memory\n");
		goto out;
	}
	if (plan_wait(ck, (double)(n * sizeof(*buf)), "the allreduce") < 0)
		goto out;
	t = ddp_now();
	for (it = 0; it <= AR_ITERS; it++) {
		/* The first call warms up and is not timed. */
		if (it == 1)
			t = ddp_now();
		for (i = 0; i < n; i++)
			buf[i] = (float)(ck->rank + 1);
		if (ddp_allreduce(ck->comm, buf, buf, n, DDP_FLOAT32,
				  DDP_SUM) != DDP_OK) {
			comm_failed(ck, "allreduce over all ranks");
			goto out;
		}
	}
	ck->ar_s = (ddp_now() - t) / AR_ITERS;
	ck->ar_bytes = n * sizeof(*buf);
	want = (float)((double)ck->world * (ck->world + 1) / 2);
	for (i = 0; i < n; i++)
		if (buf[i] != want)
			*wrong = 1;
	rc = 0;
out:
	free(buf);
	return rc;
}

/* ---- GPUs ---- */

static void
rank_gpu(const struct check *ck, int r, char *buf, size_t len)
{
	const double *rec = ck->rec + (size_t)r * REC_LEN;
	char id[BUSID_LEN];
	int k;

	for (k = 0; k < BUSID_LEN - 1 && rec[REC_BUSID + k] > 0; k++)
		id[k] = (char)rec[REC_BUSID + k];
	id[k] = '\0';
	ddp_fmt(buf, len, "%s", k ? id : "-");
}

/*
 * Everyone's GPU bus id, GPU state and allreduce verdict, as one row of
 * ck->rec per rank that the others' rows leave zero, so a sum gathers
 * them. That is world x REC_LEN float64 (147 KiB at 1,024 ranks), once
 * per doubling over every node's link: on a slow link longer than the
 * time limit. So the ranks first sum how many rows are not all zero. When
 * none is (no rank has a bus id or a GPU, every allreduce result was
 * right: every node without GPUs that passes), the gathered records would
 * be zero throughout, which is what ck->rec holds already: the report is
 * the same, for 8 bytes a rank. Otherwise the rows are gathered, where
 * libddp waits for a peer as long as the slowest link needs for them.
 */
static int
gather_records(struct check *ck, int ar_wrong)
{
	double *mine, used[1];
	const char *b = getenv("DDP_GPU_BUSID");
	size_t len = (size_t)ck->world * REC_LEN;
	int k;

	set_phase("gathering the ranks' GPUs");
	ck->rec = calloc(len, sizeof(*ck->rec));
	if (!ck->rec) {
		fprintf(stderr, "ddp-check: out of memory\n");
		return -1;
	}
	mine = ck->rec + (size_t)ck->rank * REC_LEN;
	/* The plugin's "-" for a rank without a GPU is no bus id: the row
	 * stays zero, and rank_gpu shows "-" for it all the same. */
	if (b && strcmp(b, "-") == 0)
		b = NULL;
	for (k = 0; b && b[k] && k < BUSID_LEN - 1; k++)
		mine[REC_BUSID + k] = (unsigned char)b[k];
	mine[REC_GPU] = ck->o.gpu == CHK_GPU_OFF ? GPU_NONE : chk_gpu_probe();
	mine[REC_AR_BAD] = ar_wrong;
	used[0] = chk_row_used(mine, REC_LEN);
	if (plan_wait(ck, sizeof(used), "the records' summary") < 0 ||
	    sum(ck, used, 1, "gathering the ranks' GPUs") < 0)
		return -1;
	if (used[0] == 0)
		return 0;
	if (plan_wait(ck, (double)(len * sizeof(*ck->rec)), "the records") < 0)
		return -1;
	return sum(ck, ck->rec, len, "gathering the ranks' GPUs");
}

/* Rank 0 learns the explanation of every rank whose state is bad. */
static int
gather_texts(struct check *ck, const double *state, double bad,
	     const char *mine, const char *what)
{
	char buf[CHK_TEXT_LEN], gpu[64];
	int r;

	for (r = 0; r < ck->world; r++) {
		if (state[r] != bad)
			continue;
		memset(buf, 0, sizeof(buf));
		if (r == ck->rank)
			ddp_fmt(buf, sizeof(buf), "%s", mine);
		if (ddp_broadcast(ck->comm, buf, sizeof(buf) / 2, DDP_FLOAT16,
				  r) != DDP_OK)
			return comm_failed(ck, "gathering the GPU errors");
		buf[sizeof(buf) - 1] = '\0';
		if (ck->rank != 0)
			continue;
		rank_gpu(ck, r, gpu, sizeof(gpu));
		problem(ck, "rank %d on %s (GPU %s): %s: %s", r,
			ck->net.node[ck->node_of[r]].host, gpu, what, buf);
		ck->net.node[ck->node_of[r]].flags |= CHK_F_GPU;
	}
	return 0;
}

static int
all_ok(const double *state, int n)
{
	int r;

	for (r = 0; r < n; r++)
		if (state[r] != GPU_OK)
			return 0;
	return 1;
}

/* Rank 0: a problem for each rank whose GPU is not ready to test. */
static void
name_unready(struct check *ck)
{
	char gpu[64];
	int r, st;

	for (r = 0; r < ck->world; r++) {
		st = (int)ck->rec[(size_t)r * REC_LEN + REC_GPU];
		if (st == GPU_READY)
			continue;
		rank_gpu(ck, r, gpu, sizeof(gpu));
		problem(ck, "rank %d on %s (GPU %s): %s", r,
			ck->net.node[ck->node_of[r]].host, gpu,
			chk_gpu_state_why(st));
		ck->net.node[ck->node_of[r]].flags |= CHK_F_GPU;
	}
}

/* Whether the GPU test is skipped (--gpu off, or no rank is ready; with
 * --gpu on that is a problem): the report's line says why. */
static int
gpu_skipped(struct check *ck)
{
	int count[GPU_FAILED + 1] = {0}, r;

	for (r = 0; r < ck->world; r++)
		count[(int)ck->rec[(size_t)r * REC_LEN + REC_GPU]]++;
	if (ck->o.gpu == CHK_GPU_OFF) {
		ddp_fmt(ck->gpu_line, sizeof(ck->gpu_line),
			"gpu: skipped: --gpu off");
		return 1;
	}
	if (count[GPU_READY])
		return 0;
	if (ck->o.gpu == CHK_GPU_ON && ck->rank == 0)
		problem(ck, "gpu: --gpu on, but %s",
			chk_gpu_skip_reason(count));
	ddp_fmt(ck->gpu_line, sizeof(ck->gpu_line), "gpu: skipped: %s",
		chk_gpu_skip_reason(count));
	return 1;
}

/*
 * Every rank decides the same from the gathered records: skip, or each
 * device on its own, then all together.
 */
static int
gpus(struct check *ck)
{
	char why[CHK_TEXT_LEN] = "";
	double *state = NULL, ms = 0, sec = 0;
	int r, st, rc = -1;

	if (gpu_skipped(ck))
		return 0;
	/* [0, world): each rank's state; [world, 2 world): its init ms. */
	state = calloc((size_t)ck->world * 2, sizeof(*state));
	if (!state) {
		fprintf(stderr, "ddp-check: out of memory\n");
		goto out;
	}
	if (ck->rank == 0)
		name_unready(ck);
	set_phase("initialising the GPU");
	st = (int)ck->rec[(size_t)ck->rank * REC_LEN + REC_GPU];
	if (st == GPU_READY)
		state[ck->rank] = chk_gpu_local(&ck->cfg, comm_timeout(ck), why,
						sizeof(why), &ms) == 0
					  ? GPU_OK
					  : GPU_FAILED;
	state[ck->world + ck->rank] = ms;
	if (plan_wait(ck, (double)ck->world * 2 * sizeof(*state),
		      "the GPU states") < 0 ||
	    sum(ck, state, (size_t)ck->world * 2, "gathering the GPU states") <
		    0)
		goto out;
	for (r = 0; r < ck->world; r++)
		if (state[ck->world + r] > ms)
			ms = state[ck->world + r];
	if (gather_texts(ck, state, GPU_FAILED, why,
			 "device initialisation failed") < 0)
		goto out;
	if (!all_ok(state, ck->world)) {
		ddp_fmt(ck->gpu_line, sizeof(ck->gpu_line),
			"gpu: the device allreduce did not run (not every "
			"rank's GPU initialised)");
		rc = 0;
		goto out;
	}
	set_phase("running an allreduce over all GPUs");
	/* Rank 0 listens on the rendezvous's port again: let it start
	 * first. */
	if (ddp_barrier(ck->comm) != DDP_OK) {
		comm_failed(ck, "starting the device allreduce");
		goto out;
	}
	memset(state, 0, (size_t)ck->world * 2 * sizeof(*state));
	why[0] = '\0';
	state[ck->rank] = chk_gpu_world(&ck->cfg, comm_timeout(ck), ck->world,
					why, sizeof(why), &sec) == 0
				  ? GPU_OK
				  : GPU_FAILED;
	if (plan_wait(ck, (double)ck->world * sizeof(*state),
		      "the GPU results") < 0 ||
	    sum(ck, state, (size_t)ck->world, "gathering the GPU results") < 0)
		goto out;
	if (gather_texts(ck, state, GPU_FAILED, why,
			 "device allreduce failed") < 0)
		goto out;
	chk_gpu_summary(ck->gpu_line, sizeof(ck->gpu_line), ck->world,
			all_ok(state, ck->world), ms, sec);
	rc = 0;
out:
	free(state);
	return rc;
}

/* ---- the report ---- */

static void
fill_rows(struct check *ck)
{
	struct chk_node *nd;
	int *ranks = NULL, j, r, k;
	char gpu[64];

	ranks = calloc((size_t)ck->world, sizeof(*ranks));
	for (j = 0; j < ck->net.n; j++) {
		nd = &ck->net.node[j];
		k = 0;
		nd->gpus[0] = '\0';
		for (r = 0; r < ck->world; r++) {
			if (ck->node_of[r] != j)
				continue;
			if (ranks)
				ranks[k++] = r;
			rank_gpu(ck, r, gpu, sizeof(gpu));
			chk_gpus_add(nd->gpus, sizeof(nd->gpus), gpu);
		}
		chk_gpus_finish(nd->gpus, sizeof(nd->gpus));
		if (!ranks ||
		    chk_ranges(ranks, k, nd->ranks, sizeof(nd->ranks)) < 0)
			ddp_fmt(nd->ranks, sizeof(nd->ranks), "%d ranks",
				nd->nranks);
	}
	free(ranks);
}

static void
report(struct check *ck)
{
	struct chk_net *net = &ck->net;
	struct ddp_buf faulty = {0};
	char words[128];
	const char *sep = "";
	double busbw;
	int r, j, k;

	fill_rows(ck);
	for (r = 0; r < ck->world; r++) {
		if (!ck->rec[(size_t)r * REC_LEN + REC_AR_BAD])
			continue;
		problem(ck,
			"rank %d on %s: the allreduce over all ranks gave "
			"wrong values",
			r, net->node[ck->node_of[r]].host);
		net->node[ck->node_of[r]].flags |= CHK_F_COMM;
	}
	printf("ddp-check: job %s step %s: %d node%s, %d rank%s joined %s:%d "
	       "(%s)\n",
	       ck->cfg.job_id, ck->cfg.step_id, net->n, net->n == 1 ? "" : "s",
	       ck->world, ck->world == 1 ? "" : "s", ck->cfg.master_addr,
	       ck->cfg.master_port,
	       ck->cfg.auth == DDP_AUTH_KEY ? "the step key"
	       : ck->cfg.auth == DDP_AUTH_NONE
		       ? "no authentication: DDP_AUTH=none"
		       : "munge");
	chk_print_table(stdout, net);
	if (net->n < 2)
		printf("links: one node, none to time\n");
	else if (!net->measured)
		printf("links: not timed (the ring did not connect)\n");
	else
		printf("links: %d timed for %.2f s each; typical %.3g GB/s "
		       "(the "
		       "median node's fastest link), slow below %.2f x\n",
		       net->nlinks, net->window_s, net->median, net->fraction);
	busbw = ck->world > 1 && ck->ar_s > 0
			? 2.0 * (ck->world - 1) / ck->world *
				  (double)ck->ar_bytes / ck->ar_s / 1e9
			: 0;
	printf("allreduce: %d rank%s, %zu KiB: %.2f ms", ck->world,
	       ck->world == 1 ? "" : "s", ck->ar_bytes >> 10, ck->ar_s * 1000);
	if (busbw > 0)
		printf(", busbw %.3g GB/s", busbw);
	printf("\n");
	printf("%s\n", ck->gpu_line);
	if (ck->nproblems) {
		printf("problems:\n");
		for (k = 0; ck->problems.s && ck->problems.s[k];) {
			j = k;
			while (ck->problems.s[k] && ck->problems.s[k] != '\n')
				k++;
			printf("  %.*s\n", k - j, ck->problems.s + j);
			if (ck->problems.s[k])
				k++;
		}
	}
	for (j = 0; j < net->n; j++) {
		if (!net->node[j].flags)
			continue;
		chk_status_words(net->node[j].flags, words, sizeof(words));
		ddp_buf_printf(&faulty, "%s%s (%s)", sep, net->node[j].host,
			       words);
		sep = ", ";
	}
	if (!ck->nproblems)
		printf("ddp-check: ok (network %.2f s, total %.2f s)\n",
		       ck->net_s, ddp_now() - ck->t0);
	else
		printf("ddp-check: %s: %s%s\n",
		       ck->o.mode == CHK_MODE_WARN ? "WARN" : "FAIL",
		       faulty.len ? faulty.s : "see the problems above",
		       ck->o.mode == CHK_MODE_WARN ? "; going on (--mode warn)"
						   : "");
	ddp_buf_free(&faulty);
}

/*
 * After a failed verdict: rank 0's findings as verdict lines to every
 * rank, which writes them to --verdict-fd. Every rank takes part whether
 * or not it was given the descriptor, so mixed options cannot split the
 * collectives. A failure here costs the lines, not the verdict.
 */
static void
share_verdicts(struct check *ck)
{
	struct ddp_buf lines = {0};
	char *text = NULL;
	double len[1] = {0};
	size_t n = 0, cut;

	set_phase("sharing the findings");
	if (ck->rank == 0) {
		chk_verdicts(&ck->net, &lines);
		n = lines.failed ? 0 : lines.len;
		if (n > VERDICT_MAX) {
			/* Whole lines only. */
			for (cut = VERDICT_MAX;
			     cut > 0 && lines.s[cut - 1] != '\n'; cut--)
				;
			n = cut;
		}
		len[0] = (double)n;
	}
	if (ddp_broadcast(ck->comm, len, 1, DDP_FLOAT64, 0) != DDP_OK)
		goto fail;
	n = len[0] > 0 && len[0] <= VERDICT_MAX ? (size_t)len[0] : 0;
	if (!n)
		goto out;
	text = calloc(1, VERDICT_MAX + 2);
	if (!text) {
		fprintf(stderr, "ddp-check: out of memory\n");
		goto out;
	}
	if (ck->rank == 0)
		memcpy(text, lines.s, n);
	if (ddp_broadcast(ck->comm, text, n, DDP_UINT8, 0) != DDP_OK)
		goto fail;
	if (ck->o.verdict_fd >= 0)
		/* A reader that went away is not an error of the check's. */
		(void)ddp_write_all(ck->o.verdict_fd, text, n);
	goto out;
fail:
	fprintf(stderr, "ddp-check: rank %d on %s: sharing the findings: %s\n",
		ck->rank, ck->host, ddp_last_error());
out:
	free(text);
	ddp_buf_free(&lines);
}

/* ---- the wait for the ranks, and --json ---- */

/* libddp's word on the joins, on rank 0: one line on its stderr, where
 * srun puts the job's output. */
static void
join_progress(void *arg, int world, const char *const *host)
{
	struct check *ck = arg;
	char line[CHK_TEXT_LEN];

	chk_progress_line(&ck->expect, world, host, line, sizeof(line));
	fprintf(stderr, "%s\n", line);
}

/* Rank 0 after the check: its report as JSON into --json's file, whole
 * or not at all (ddp_write_atomic). 0, or -1 having said why. */
static int
write_json(struct check *ck, int rc)
{
	struct chk_result res;

	memset(&res, 0, sizeof(res));
	res.verdict = rc == 0 && !ck->nproblems && !ck->error[0] ? "ok"
		      : ck->o.mode == CHK_MODE_WARN		 ? "warn"
								 : "fail";
	res.mode = chk_mode_name(ck->o.mode);
	res.job_id = ck->cfg.job_id;
	res.step_id = ck->cfg.step_id;
	res.world = ck->world;
	res.joined = ck->comm ? ck->world : 0;
	res.net = ck->net.node && ck->net.n ? &ck->net : NULL;
	res.problems = ck->problems.s;
	res.error = ck->error[0] ? ck->error : NULL;
	res.gpu = ck->gpu_line;
	res.allreduce_s = ck->ar_s > 0 ? ck->ar_s : -1;
	res.allreduce_bytes = ck->ar_bytes;
	res.join_s = ck->t_join > 0 ? ck->t_join - ck->t0 : -1;
	res.network_s = ck->net_s > 0 ? ck->net_s : -1;
	res.total_s = ddp_now() - ck->t0;
	return chk_json_write(ck->o.json, &res);
}

static int
run(struct check *ck)
{
	struct ddp_config cfg = ck->cfg;
	double verdict[1] = {0};
	int ar_wrong = 0;

	set_phase("joining the rendezvous");
	if (ck->rank == 0) {
		/* Outside Slurm the line names the missing ranks instead. */
		(void)chk_expect_parse(getenv("SLURM_STEP_NODELIST"),
				       getenv("SLURM_STEP_TASKS_PER_NODE"),
				       ck->world, &ck->expect);
		ddp_set_join_progress(join_progress, ck, JOIN_PROGRESS_S);
	}
	cfg.backend = DDP_BACKEND_TCP;
	cfg.timeout_s = join_timeout(ck);
	if (ddp_comm_init(&cfg, &ck->comm) != DDP_OK) {
		ddp_set_join_progress(NULL, NULL, 0);
		return comm_failed(ck, "rendezvous");
	}
	ddp_set_join_progress(NULL, NULL, 0);
	/* Joined: from here the check's own work has the time limit. */
	ck->t_join = ddp_now();
	ck->deadline = ck->t_join + (double)ck->o.time_limit_s;
	watchdog_arm(ck->deadline, time_limit_text);
	if (ddp_comm_set_timeout(ck->comm, comm_timeout(ck)) != DDP_OK)
		return comm_failed(ck, "setting the timeout");
	if (find_nodes(ck) < 0 || links(ck) < 0 ||
	    allreduce_all(ck, &ar_wrong) < 0)
		return -1;
	ck->net_s = ddp_now() - ck->t0;
	if (gather_records(ck, ar_wrong) < 0 || gpus(ck) < 0)
		return -1;
	if (ck->rank == 0) {
		ck->nproblems += chk_judge(&ck->net, &ck->problems);
		report(ck);
		verdict[0] = ck->nproblems > 0;
	}
	set_phase("agreeing on the verdict");
	if (ddp_allreduce(ck->comm, verdict, verdict, 1, DDP_FLOAT64,
			  DDP_MAX) != DDP_OK)
		return comm_failed(ck, "agreeing on the verdict");
	if (verdict[0] > 0)
		share_verdicts(ck);
	return verdict[0] > 0 ? -1 : 0;
}

/* --version among the options (before any "--"): answered before the
 * options are parsed, so that it works whatever else the line holds. */
static int
wants_version(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], "--version") == 0)
			return 1;
	return 0;
}

int
main(int argc, char **argv)
{
	struct check ck;
	char err[512];
	int rc;

	if (wants_version(argc, argv)) {
		printf("ddp-check %s\n", DDP_VERSION);
		return 0;
	}
	memset(&ck, 0, sizeof(ck));
	rc = chk_parse_opts(argc, argv, &ck.o, err, sizeof(err));
	if (rc == 1) {
		chk_usage(stdout);
		return 0;
	}
	if (rc < 0) {
		fprintf(stderr, "ddp-check: %s\n", err);
		return 2;
	}
	if (ck.o.mode == CHK_MODE_OFF)
		return 0;
	if (ck.o.verdict_fd >= 0 && fcntl(ck.o.verdict_fd, F_GETFD) < 0) {
		fprintf(stderr,
			"ddp-check: --verdict-fd %d: not an open descriptor "
			"(give one the caller opened for writing)\n",
			ck.o.verdict_fd);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	ck.t0 = ddp_now();
	ck.deadline = ck.t0 + (double)ck.o.join_limit_s;
	if (gethostname(ck.host, sizeof(ck.host) - 1) < 0)
		ddp_fmt(ck.host, sizeof(ck.host), "unknown-host");
	if (ddp_config_from_env(&ck.cfg) != DDP_OK) {
		fprintf(stderr, "ddp-check: %s\n", ddp_last_error());
		return 2;
	}
	if (ck.o.port)
		ck.cfg.master_port = (int)ck.o.port;
	ck.rank = ck.cfg.rank;
	ck.world = ck.cfg.world_size;
	if (ck.o.json && ck.rank == 0 && chk_json_path_usable(ck.o.json) < 0)
		return 2;
	if (start_watchdog(&ck) < 0)
		return 2;
	rc = run(&ck);
	if (ck.o.json && ck.rank == 0 && write_json(&ck, rc) < 0 && rc == 0)
		rc = -1;
	ddp_comm_destroy(ck.comm);
	free(ck.net.node);
	free(ck.node_of);
	free(ck.rec);
	ddp_buf_free(&ck.problems);
	chk_expect_free(&ck.expect);
	return rc == 0 || ck.o.mode == CHK_MODE_WARN ? 0 : 1;
}
