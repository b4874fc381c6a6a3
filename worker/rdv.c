/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rendezvous (protocol 4): rank 0 listens on MASTER_PORT and proves it
 * is rank 0 of the job with munge before any rank says more than which
 * rank it claims; every rank then proves its uid, job and step the same
 * way, bound to both sides' nonces and to the connection, gets the mesh
 * token in the welcome and closes the connection. With LOCAL_RANK and
 * LOCAL_WORLD_SIZE known, a node's ranks make that join with their node
 * leader (LOCAL_RANK 0) on the node's abstract Unix socket instead, the
 * leader proving itself first and taking only its own user's processes;
 * the leader relays its verified members to rank 0 inside its own
 * authenticated join, so that rank 0 verifies one credential per node
 * (and its own node's ranks), not one per rank. A member whose leader
 * does not answer, or is not its leader, joins rank 0 directly; one whose
 * leader dies holding its join fails at once, naming it. Once every rank
 * has joined, the roster goes down a tree of ranks (RDV_FANOUT children
 * each), each hop opened with the data-port hello (a challenge-response
 * under the token both ways, the token itself never sent); then each rank
 * connects only the peers its collectives use (peers.h), with the same
 * hello, accepted only from the address their rank joined from. No rank holds
 * more than its pending table, its tree hops and its peers at once.
 *
 * What an outsider on the node can still do is deny service (hold the port,
 * flood it); what it must never do is join, read the roster, learn facts
 * of the job or relay a rank's credential to rank 0. Against floods: a
 * bounded pending table that evicts the busiest source's oldest
 * connection that has not said anything valid yet, refusals that tell the
 * peer nothing and are logged in summaries after the first few, and
 * ranks that connect again while what answers on MASTER_PORT has not
 * proven it is rank 0 (a squatter, or another job whose port collides).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "ddp_util.h"
#include "rdv_internal.h"

/* Words the refusals' lines of rank r (struct rdv) for its log. */
static void
refuse_line(void *arg, const struct ddp_guard_line *l)
{
	const struct rdv *r = arg;

	switch (l->kind) {
	case DDP_GUARD_ONE:
	case DDP_GUARD_LAST:
		wk_log(0,
		       "rank %d refused connection from %s: %s (still "
		       "waiting for the job's ranks)%s",
		       r->mesh->rank, l->from, l->why,
		       l->kind == DDP_GUARD_LAST
			       ? "; further refusals are counted and "
				 "summarised every 10 s"
			       : "");
		break;
	case DDP_GUARD_QUIET:
		wk_log(3, "rank %d refused connection from %s: %s",
		       r->mesh->rank, l->from, l->why);
		break;
	case DDP_GUARD_SUMMARY:
		wk_log(0,
		       "rank %d refused %lu more connection%s in the last "
		       "%.0f s (%lu in all; the latest from %s: %s)",
		       r->mesh->rank, l->count, l->count == 1 ? "" : "s",
		       l->seconds, l->total, l->from, l->why);
		break;
	}
}

/*
 * DDP_AUTH=none: one line on every rank, and a world across hosts only
 * with DDP_AUTH_NONE_NETWORK=1; on loopback, connections from other hosts
 * are refused.
 */
static enum ddp_status
auth_none_policy(struct rdv *r, const struct ddp_config *cfg)
{
	const char *v = getenv("DDP_AUTH_NONE_NETWORK");
	int network = v && strcmp(v, "1") == 0;

	r->local_only = ddp_net_host_is_loopback(cfg->master_addr);
	if (!r->local_only && !network)
		return wk_err(
			DDP_ERR_ENV,
			"rank %d: DDP_AUTH=none, but MASTER_ADDR '%s' is not a "
			"loopback address: without authentication any process "
			"that reaches MASTER_PORT could join as any rank and "
			"read or change the job's data. Use DDP_AUTH=munge "
			"(the default), or set DDP_AUTH_NONE_NETWORK=1 if "
			"every host and user that can reach the job's ports "
			"is trusted",
			cfg->rank, cfg->master_addr);
	wk_log(1,
	       "rank %d: DDP_AUTH=none: the rendezvous is not authenticated; "
	       "any process that reaches port %d %s can join as any rank",
	       cfg->rank, cfg->master_port,
	       r->local_only ? "on this host"
			     : "from any host (DDP_AUTH_NONE_NETWORK=1)");
	return DDP_OK;
}

/* The digest that names a node's join socket (rdv_node_socket). */
static int
node_digest(const struct ddp_config *cfg, int world, const char *host,
	    unsigned char h[DDP_SHA256_LEN])
{
	char id[1024];

	if (ddp_fmt(id, sizeof(id),
		    "slurm-ddp rdv %d uid=%u job=%s step=%s master=%s:%d "
		    "world=%d host=%s",
		    RDV_VERSION, (unsigned)geteuid(), cfg->job_id, cfg->step_id,
		    cfg->master_addr, cfg->master_port, world, host) < 0)
		return -1;
	ddp_sha256(id, strlen(id), h);
	return 0;
}

int
rdv_node_socket(const struct ddp_config *cfg, int world, const char *host,
		char *name, size_t namelen)
{
	unsigned char h[DDP_SHA256_LEN];
	struct sockaddr_un sa;

	if (node_digest(cfg, world, host, h) < 0 ||
	    !ddp_net_abstract_name(&sa, NODE_SOCKET_PREFIX, h))
		return -1;
	return ddp_fmt(name, namelen, "%s", sa.sun_path + 1);
}

/* A whole number in [lo, hi] from the environment, or -1 when unset or
 * not one. */
static long
env_in(const char *name, long lo, long hi)
{
	const char *v = getenv(name);
	long n;

	if (!v || !*v || ddp_parse_long(v, lo, hi, &n) < 0)
		return -1;
	return n;
}

/*
 * The node's join socket, with LOCAL_RANK and LOCAL_WORLD_SIZE set:
 * an abstract Unix socket named for this user, job, step, rendezvous and
 * host, so that only this node's ranks of this job find it (a node's
 * network namespace holds its abstract sockets). Without them (or with
 * one rank per node), every rank joins rank 0 directly.
 */
static void
node_setup(struct rdv *r)
{
	struct wk_mesh *c = r->mesh;
	unsigned char h[DDP_SHA256_LEN];
	long lr = env_in("LOCAL_RANK", 0, c->size - 1);
	long ls = env_in("LOCAL_WORLD_SIZE", 2, c->size);

	if (lr < 0 || ls < 0 || lr >= ls ||
	    node_digest(r->cfg, c->size, c->myhost, h) < 0)
		return;
	r->node_salen =
		ddp_net_abstract_name(&r->node_sa, NODE_SOCKET_PREFIX, h);
	if (!r->node_salen)
		return;
	r->local_rank = (int)lr;
	r->local_size = (int)ls;
	r->leader = lr == 0 && c->rank != 0;
	ddp_fmt(r->node_tag, sizeof(r->node_tag), "%s",
		r->node_sa.sun_path + 1 + strlen(NODE_SOCKET_PREFIX));
}

/* Rank 0's numeric address for MASTER_ADDR, until a rank's connection
 * shows how ranks reach it. */
void
rdv_self_addr_guess(struct rdv *r)
{
	struct addrinfo hints, *ai = NULL;
	struct sockaddr_storage ss;
	char port[16];
	int p;

	ddp_fmt(r->self_addr, sizeof(r->self_addr), "%s", r->cfg->master_addr);
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	ddp_fmt(port, sizeof(port), "%d", r->cfg->master_port);
	if (getaddrinfo(r->cfg->master_addr, port, &hints, &ai) != 0 || !ai)
		return;
	memset(&ss, 0, sizeof(ss));
	if (ai->ai_addrlen <= sizeof(ss)) {
		memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
		ddp_net_sa_format(&ss, r->self_addr, sizeof(r->self_addr), &p);
	}
	freeaddrinfo(ai);
}

/*
 * Once every rank's host is known: the peers this rank's collectives use,
 * and the join connections (to or from rank 0) that are not among them
 * closed, so that no rank holds one descriptor per rank of the job.
 */
enum ddp_status
rdv_keep_wanted(struct rdv *r)
{
	struct wk_mesh *c = r->mesh;
	int i, n;

	r->want = malloc((size_t)c->size);
	if (!r->want)
		return wk_err(DDP_ERR_NOMEM, "rank %d: out of memory", c->rank);
	n = wk_peers_wanted(c, r->want);
	if (n < 0)
		return wk_err(DDP_ERR_NOMEM, "rank %d: out of memory", c->rank);
	for (i = 0; i < c->size; i++)
		if (i != c->rank && !r->want[i])
			ddp_close(&c->peers[i].fd);
	wk_log(3, "rank %d: %d of %d peers connected", c->rank, n, c->size - 1);
	return DDP_OK;
}

/* ddp_net_listen_retry's note that MASTER_PORT is held: one line. */
static void
master_port_busy(int port, void *arg)
{
	struct rdv *r = arg;

	wk_log(0,
	       "rank 0: port %d (MASTER_PORT) is held by another process on "
	       "this host; retrying until the timeout (%g s)",
	       port, r->mesh->timeout_s);
	r->port_waited = 1;
}

/*
 * Binds MASTER_PORT, waiting while another process holds it (a step that
 * has not quite ended, or someone squatting the port): its ranks keep
 * trying to connect until the same timeout.
 */
static enum ddp_status
listen_master(struct rdv *r, double deadline)
{
	int port = r->cfg->master_port;

	r->lfd = ddp_net_listen_retry(port, deadline, &r->lport,
				      master_port_busy, r);
	if (r->lfd >= 0) {
		if (r->port_waited)
			wk_log(0, "rank 0: port %d is free now; listening",
			       port);
		return DDP_OK;
	}
	if (ddp_net_out_of_resources(errno))
		return rdv_resource_error(r, errno, "listening on MASTER_PORT");
	if (errno != EADDRINUSE)
		return wk_err(DDP_ERR_RENDEZVOUS,
			      "rank 0 cannot listen on port %d: %s", port,
			      strerror(errno));
	return wk_err(
		DDP_ERR_RENDEZVOUS,
		"rank 0 cannot listen on port %d: another process held "
		"it for the whole timeout (%g s). srun --ddp picks a "
		"port per step, so this is a leftover program or another "
		"user's; `ss -ltnp 'sport = :%d'` as root names it. "
		"--ddp-port=N picks another port; ExclusiveUser=YES keeps "
		"other users off a job's nodes",
		port, r->mesh->timeout_s, port);
}

/*
 * Tells every rank that joined why the job will not start (best effort,
 * at most 5 s in all): the thread's last error, in a REFUSE after the
 * data-port hello on its data listener, where it waits for the roster.
 */
static void
master_refuse_joined(struct rdv *r)
{
	struct wk_mesh *c = r->mesh;
	struct wk_buf b = {0};
	double budget = ddp_now() + 5.0, until;
	uint8_t told[RDV_FANOUT + 1] = {0};
	char why[1024], said[DDP_ERR_LEN];
	int i, fd;

	ddp_fmt(said, sizeof(said), "%s", wk_errbuf());
	if (proto_encode_text(&b, RDV_REFUSE, said) < 0)
		goto out;
	/* Rank 0's children wait on their join connection: the REFUSE
	 * alone, without the data-port hello. */
	for (i = r->npend - 1; i >= 0; i--) {
		if (r->pend[i].stage == 2) {
			(void)ddp_net_send_all(r->pend[i].fd, b.p, b.len,
					       ddp_now() + 0.5);
			told[r->pend[i].rank] = 1;
		}
	}
	for (i = 1; i < c->size && ddp_now() < budget; i++) {
		if (!r->joined[i] || (i <= RDV_FANOUT && told[i]))
			continue;
		if (!c->peers[i].addr[0]) /* joined on this node's socket */
			ddp_fmt(c->peers[i].addr, WK_ADDR_LEN, "%s",
				r->self_addr);
		until = ddp_now() + 0.5 < budget ? ddp_now() + 0.5 : budget;
		fd = ddp_net_connect_once(c->peers[i].addr, c->peers[i].port,
					  until, why, sizeof(why));
		if (fd >= 0 &&
		    rdv_peer_hello(r, fd, i, until, why, sizeof(why)) == 0)
			(void)ddp_net_send_all(fd, b.p, b.len, until);
		ddp_close(&fd);
	}
	/* The hellos' failures are not the error the rendezvous ends with. */
	(void)wk_err(DDP_OK, "%s", said);
out:
	wk_buf_wipe(&b);
}

/*
 * Rank 0: MASTER_PORT, a fresh mesh token, every rank joined, the roster
 * down the tree, then the mesh connections of the higher ranks its
 * collectives use, on MASTER_PORT.
 */
enum ddp_status
rdv_master_side(struct rdv *r, double deadline)
{
	struct wk_mesh *c = r->mesh;
	enum ddp_status st;
	int i;

	st = listen_master(r, deadline);
	if (!st && r->local_size && r->local_rank == 0)
		st = rdv_node_listen(r);
	if (st)
		return st;
	if (getrandom(r->token, sizeof(r->token), 0) !=
	    (ssize_t)sizeof(r->token))
		return wk_err(DDP_ERR_SYSTEM, "getrandom: %s", strerror(errno));
	r->joined[0] = 1;
	st = rdv_accept_ranks(r, 1, WAIT_JOINS, deadline);
	if (st) {
		master_refuse_joined(r);
		return st;
	}
	ddp_close(&r->ufd);
	r->roster = 1;
	for (i = 0; i < c->size; i++) {
		if (i &&
		    !c->peers[i].addr[0]) /* joined on this node's socket */
			ddp_fmt(c->peers[i].addr, WK_ADDR_LEN, "%s",
				r->self_addr);
		r->ents[i].port = (uint16_t)(i ? c->peers[i].port : r->lport);
		ddp_fmt(r->ents[i].addr, sizeof(r->ents[i].addr), "%s",
			i ? c->peers[i].addr : "");
		ddp_fmt(r->ents[i].host, sizeof(r->ents[i].host), "%s",
			c->peers[i].host);
	}
	/* Rank 0's children get the roster on their join connections; the
	 * other pending connections stay, read from now on as the mesh's
	 * (anything of the joins is refused there). */
	for (i = r->npend - 1; i >= 0; i--) {
		if (r->pend[i].kind == PK_JOIN && r->pend[i].stage == 2 &&
		    rdv_send_roster(r, i) == 0) {
			r->told[r->pend[i].rank] = 1;
			rdv_pend_drop(r, i, NULL, 0, 0);
		}
	}
	deadline = ddp_now() + c->timeout_s;
	st = rdv_keep_wanted(r);
	if (!st)
		st = rdv_push_roster(r, deadline);
	if (st)
		/* A rank died after it joined: tell the others at once,
		 * those below it in the tree included. */
		master_refuse_joined(r);
	if (!st)
		st = rdv_accept_ranks(r, 1, WAIT_PEERS, deadline);
	return st;
}

/*
 * A rank other than 0: a data listener, the join (rdv_join_master), the
 * roster from its parent in the tree, handed on to its children, then
 * connections to the lower ranks its collectives use and from the higher
 * ones: the connects complete in the listeners' backlogs, so no cycle.
 */
enum ddp_status
rdv_worker_side(struct rdv *r, double deadline)
{
	struct wk_mesh *c = r->mesh;
	enum ddp_status st;
	int fd = -1, joined = 0;

	r->lfd = ddp_net_listen(0, &r->lport);
	if (r->lfd < 0 && ddp_net_out_of_resources(errno))
		return rdv_resource_error(r, errno, "data listener");
	if (r->lfd < 0)
		return wk_err(DDP_ERR_SYSTEM, "rank %d: data listener: %s",
			      c->rank, strerror(errno));
	if (r->leader) {
		st = rdv_node_listen(r);
		if (!st && r->ufd >= 0)
			st = rdv_accept_ranks(r, c->rank + 1, WAIT_MEMBERS,
					      ddp_now() + BATCH_WAIT_S);
		if (!st)
			st = rdv_leader_flush(r, deadline);
	} else if (r->local_size) {
		st = rdv_join_leader(r, deadline, &joined);
		if (!st && !joined)
			st = rdv_join_master(r, deadline, NULL, 0, &fd);
	} else {
		st = rdv_join_master(r, deadline, NULL, 0, &fd);
	}
	/* Rank 0 sends the roster once every rank has joined, so this
	 * waits up to rank 0's timeout and a little more. */
	if (!st)
		st = fd >= 0 ? rdv_join_roster(r, fd, deadline + 5)
			     : rdv_accept_ranks(r, c->rank + 1, WAIT_ROSTER,
						deadline + 5);
	ddp_close(&fd);
	if (r->leader && (st || r->roster < 0))
		rdv_refuse_held(r, st ? wk_errbuf() : r->gave_up);
	ddp_close(&r->ufd);
	if (st)
		return st;
	if (!st && r->roster > 0) {
		deadline = ddp_now() + c->timeout_s;
		st = rdv_keep_wanted(r);
		if (!st)
			st = rdv_push_roster(r, deadline);
		if (!st)
			st = rdv_worker_connect_lower(r, deadline);
		if (!st)
			st = rdv_accept_ranks(r, c->rank + 1, WAIT_PEERS,
					      deadline);
	}
	if (!st && r->roster < 0)
		st = wk_err(DDP_ERR_RENDEZVOUS, "rank 0 gave up: %s",
			    r->gave_up);
	return st;
}

enum ddp_status
rdv_connect_all(struct wk_mesh *m, const struct ddp_config *cfg)
{
	struct rdv *r;
	enum ddp_status st;
	double deadline = ddp_now() + cfg->timeout_s;
	long nofile, was;
	int i;

	r = calloc(1, sizeof(*r));
	if (!r)
		return wk_err(DDP_ERR_NOMEM, "rendezvous: out of memory");
	r->mesh = m;
	r->cfg = cfg;
	r->lfd = -1;
	r->ufd = -1;
	r->lost = -1;
	r->deadline_all = deadline;
	r->ents = calloc((size_t)m->size, sizeof(*r->ents));
	if (!r->ents) {
		free(r);
		return wk_err(DDP_ERR_NOMEM, "rendezvous: out of memory");
	}
	nofile = ddp_net_raise_nofile(&was);
	if (was >= 0)
		wk_log(3, "rank %d: open-file limit raised from %ld to %ld",
		       m->rank, was, nofile);
	r->guard.max = nofile < 0 || nofile / 2 >= MAX_PENDING ? MAX_PENDING
		       : nofile / 2 > 8 ? (int)(nofile / 2)
					: 8;
	r->guard.per_source =
		r->guard.max < PER_SOURCE_MAX ? r->guard.max : PER_SOURCE_MAX;
	r->guard.proof = rdv_pend_proof;
	r->guard.arg = r;
	r->budget.burst = PROOF_BURST;
	r->budget.rate = PROOF_RATE;
	r->budget.global_burst = PROOF_GLOBAL_BURST;
	r->budget.global_rate = PROOF_GLOBAL_RATE;
	r->ref.log = refuse_line;
	r->ref.arg = r;
	st = auth_init(&r->auth, cfg);
	if (!st && !cfg->auth)
		st = auth_none_policy(r, cfg);
	if (st)
		goto out;
	node_setup(r);
	if (r->leader || m->rank == 0) {
		r->joined = calloc((size_t)m->size, 1);
		if (!r->joined) {
			st = wk_err(DDP_ERR_NOMEM, "rendezvous: out of memory");
			goto out;
		}
	}
	if (m->rank == 0)
		rdv_self_addr_guess(r);
	st = m->rank == 0 ? rdv_master_side(r, deadline)
			  : rdv_worker_side(r, deadline);
	if (st)
		goto out;
	for (i = 0; i < m->size; i++) {
		if (i == m->rank || m->peers[i].fd < 0)
			continue;
		ddp_net_tune_data(m->peers[i].fd);
	}
out:
	while (r->npend > 0)
		rdv_pend_drop(r, r->npend - 1, NULL, 0, 0);
	ddp_close(&r->lfd);
	ddp_close(&r->ufd);
	auth_fini(&r->auth);
	explicit_bzero(r->token, sizeof(r->token));
	free(r->want);
	free(r->joined);
	free(r->ents);
	free(r);
	return st;
}
