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

int
rdv_wanted(const struct rdv *r, int rank)
{
	return !r->want || r->want[rank];
}

/*
 * Reads one rendezvous message; *body (malloc'd, caller frees) receives
 * its body. Returns DDP_OK or an error naming what; *other_version is set
 * when the peer speaks another version of the protocol (never retried).
 */
enum ddp_status
rdv_recv_msg(int fd, double deadline, const char *what, uint16_t *type,
	     uint8_t **body, uint32_t *blen, int *other_version)
{
	uint8_t hdr[RDV_HDR_LEN];
	char why[256];
	int rc;

	*body = NULL;
	*other_version = 0;
	rc = ddp_net_recv_all(fd, hdr, sizeof(hdr), deadline);
	if (rc == 0 && proto_parse_header(hdr, sizeof(hdr), type, blen, why,
					  sizeof(why)) < 0) {
		*other_version =
			proto_header_version(hdr, sizeof(hdr)) != 0 &&
			proto_header_version(hdr, sizeof(hdr)) != RDV_VERSION;
		return wk_err(DDP_ERR_RENDEZVOUS, "%s: %s", what, why);
	}
	if (rc == 0) {
		*body = malloc(*blen ? *blen : 1);
		if (!*body)
			return wk_err(DDP_ERR_NOMEM, "%s: out of memory", what);
		rc = ddp_net_recv_all(fd, *body, *blen, deadline);
	}
	if (rc == 1)
		return wk_err(DDP_ERR_RENDEZVOUS, "%s: connection closed",
			      what);
	if (rc < 0)
		return wk_err(errno == ETIMEDOUT ? DDP_ERR_TIMEOUT
						 : DDP_ERR_RENDEZVOUS,
			      "%s: %s", what, strerror(errno));
	return DDP_OK;
}

/*
 * "ADDR:PORT" of the rank's end of a rendezvous connection: the rank's
 * getsockname, rank 0's getpeername. Bound into both credentials.
 */
void
rdv_rank_addr(int fd, int local, char *out, size_t outlen)
{
	char addr[WK_ADDR_LEN];
	int port;

	ddp_net_sock_addr(fd, local, addr, sizeof(addr), &port);
	ddp_fmt(out, outlen, "%s:%d", addr, port);
}

/* ---- refusals: the first few one per line, then summarised ---- */

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

void
rdv_refuse_flush(struct rdv *r, int force)
{
	ddp_guard_flush(&r->ref, ddp_now(), force);
}

void
rdv_refuse_log(struct rdv *r, const char *from, const char *why)
{
	ddp_guard_refused(&r->ref, ddp_now(), from, why);
}

/* The text of a REFUSE body, or why it could not be read. */
void
rdv_refuse_text(const uint8_t *body, uint32_t blen, char *text, size_t textlen)
{
	char why[256];

	if (proto_parse_text(body, blen, text, textlen, why, sizeof(why)) < 0)
		ddp_fmt(text, textlen, "(%s)", why);
}

/* The error for a resource that ran out on this rank: err's advice. */
enum ddp_status
rdv_resource_error(const struct rdv *r, int err, const char *doing)
{
	char advice[512];

	ddp_net_resource_advice(err, advice, sizeof(advice));
	return wk_err(DDP_ERR_SYSTEM, "rank %d on %s: %s: %s; %s",
		      r->mesh->rank, r->mesh->myhost, doing, strerror(err),
		      advice);
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
