/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rendezvous (protocol 3): rank 0 listens on MASTER_PORT and proves it
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
 * each), each hop opened with the token; then each rank connects only the
 * peers its collectives use (peers.h), authenticated with the token and
 * accepted only from the address their rank joined from. No rank holds
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

#include "auth.h"
#include "ddp_guard.h"
#include "ddp_net.h"
#include "ddp_util.h"
#include "proto.h"
#include "peers.h"
#include "rdv.h"
#include "sha256.h"
#include "status.h"

/* The pending table's size (at most DDP_GUARD_MAX). */
#define MAX_PENDING 256
_Static_assert(MAX_PENDING <= DDP_GUARD_MAX,
	       "the guard tracks every pending connection");
/* One address may hold at most this many pending connections: the ranks
 * of one node connect from one address, so it is generous. */
#define PER_SOURCE_MAX 64
/* Connections accepted per wake-up, so that a flood of connects does not
 * starve the reads of those already pending. */
#define ACCEPT_BATCH 32
/* A genuine rank sends its open right after connecting and its hello one
 * munge round trip after rank 0's proof. */
#define HELLO_GRACE_S 10.0
/* How long a rank waits for each reply of rank 0 before it connects
 * again (rank 0 answers an open or a hello at once). */
#define REPLY_WAIT_S 10.0
/* How long a rank other than its node's leader tries the node's join
 * socket before it joins rank 0 directly (a leader not started yet, one
 * that could not take the socket, or ranks of one node in separate
 * network namespaces). */
#define LEADER_WAIT_S 5.0
/* How long a node leader waits for its members before it joins rank 0
 * with those it holds; members that come later go in another session,
 * LATE_BATCH_S after the first of them. */
#define BATCH_WAIT_S 1.0
#define LATE_BATCH_S 0.2
/* The name of a node's join socket: this, then a digest's hex. */
#define NODE_SOCKET_PREFIX "slurm-ddp/"

/* What a pending connection is (accept_new). */
enum pend_kind {
	PK_JOIN,   /* rank 0's MASTER_PORT while ranks join */
	PK_MEMBER, /* a node's join socket: a member joins its leader */
	PK_PEER,   /* a data listener (rank 0's MASTER_PORT after joins) */
};

/* What a listener waits for (accept_ranks). */
enum wait_for {
	WAIT_JOINS,   /* rank 0: every rank joined */
	WAIT_ROSTER,  /* a data listener: the roster from the parent */
	WAIT_PEERS,   /* a data listener: the wanted higher ranks connected */
	WAIT_MEMBERS, /* a node leader: its members, until the batch ends */
};

struct pend {
	int fd;
	enum pend_kind kind;
	/* PK_JOIN and PK_MEMBER: 0 open expected, 1 proof sent, hello
	 * expected, 2 joined (a child of rank 0 waiting for the roster, or a
	 * member its leader holds), 3 a leader's relay expected */
	int stage;
	uint32_t rank;	    /* claimed in the open */
	uint32_t flags;	    /* the open's */
	uint32_t relay;	    /* the open's: members the leader relays */
	uint16_t data_port; /* a held member's */
	int pid;	    /* a member's process, as the kernel names it */
	uint8_t nonce[RDV_NONCE_LEN];
	char bind[WK_ADDR_LEN + 48]; /* proto_conn_binding of the connection */
	uint8_t *buf;
	size_t have;
	size_t need;
	double deadline;
	char from[WK_ADDR_LEN + 48]; /* ADDR:PORT, or the member's process */
	char addr[WK_ADDR_LEN];
};

/* State of one rank's rendezvous. */
struct rdv {
	struct wk_mesh *mesh;
	struct wk_auth auth;
	int lfd; /* master listener (rank 0) or data listener (others) */
	int lport;
	/* The node's join socket (a leader's), or -1. */
	int ufd;
	/* LOCAL_RANK and LOCAL_WORLD_SIZE, local_size 0 when unknown:
	 * then every rank joins rank 0 directly. */
	int local_rank;
	int local_size;
	int leader;		    /* this rank relays its node's joins */
	struct sockaddr_un node_sa; /* the node's join socket (abstract) */
	socklen_t node_salen;
	char node_tag[2 * 16 + 1]; /* its name, in the members' binding */
	/* Rank 0: its address as its ranks reach it, for the members that
	 * joined it over the node's socket. */
	char self_addr[WK_ADDR_LEN];
	int self_addr_seen;
	/* A leader: members relayed so far, and when to relay those held. */
	int relayed;
	int joined_once; /* this rank joined rank 0 (a leader's later
			  * sessions must bring the same token) */
	double batch_end;
	double deadline_all;	      /* the rendezvous' */
	enum wait_for what;	      /* of the current accept_ranks */
	uint8_t told[RDV_FANOUT + 1]; /* rank 0: children given the roster */
	int local_only;	 /* DDP_AUTH=none on loopback: refuse other hosts */
	int port_waited; /* rank 0 found MASTER_PORT held at first */
	uint8_t token[WK_TOKEN_LEN];
	struct pend pend[MAX_PENDING];
	int npend;
	/* pend's accounting, index for index. Its size and one address's
	 * share of it: MAX_PENDING and PER_SOURCE_MAX, less under a low
	 * limit of open files, so that pending connections never take the
	 * descriptors the rank needs. */
	struct ddp_guard guard;
	double wait_end; /* the deadline of the current accept_ranks */
	int lost;	 /* rank 0: a rank that died after it joined, or -1 */
	struct ddp_guard_refusals ref;
	const struct ddp_config *cfg;
	/* After the roster: the peers this rank's collectives use
	 * (peers.h), the only ones it connects; NULL before, when rank 0
	 * waits for every rank. */
	uint8_t *want;
	/* Rank 0, while ranks join: who has; a leader: its members that it
	 * holds or relayed. */
	uint8_t *joined;
	/* A rank other than 0 while it waits for the roster: 0 waiting, 1
	 * received, -1 rank 0 gave up (why in gave_up). */
	int roster;
	struct rdv_roster_entry *ents; /* the roster, to hand down */
	char gave_up[1024];
};

static int
wanted(const struct rdv *r, int rank)
{
	return !r->want || r->want[rank];
}

/*
 * Reads one rendezvous message; *body (malloc'd, caller frees) receives
 * its body. Returns DDP_OK or an error naming what; *other_version is set
 * when the peer speaks another version of the protocol (never retried).
 */
static enum ddp_status
recv_msg(int fd, double deadline, const char *what, uint16_t *type,
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
static void
rank_addr(int fd, int local, char *out, size_t outlen)
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

static void
refuse_flush(struct rdv *r, int force)
{
	ddp_guard_flush(&r->ref, wk_now(), force);
}

static void
refuse_log(struct rdv *r, const char *from, const char *why)
{
	ddp_guard_refused(&r->ref, wk_now(), from, why);
}

/* The text of a REFUSE body, or why it could not be read. */
static void
refuse_text(const uint8_t *body, uint32_t blen, char *text, size_t textlen)
{
	char why[256];

	if (proto_parse_text(body, blen, text, textlen, why, sizeof(why)) < 0)
		ddp_fmt(text, textlen, "(%s)", why);
}

/* ---- rank 0's and the data listeners' pending connections ---- */

/* What a refused peer is told: it has not proven it belongs to the job,
 * so nothing of the job (ids, world size, who joined) goes with it. */
#define REFUSAL_TEXT                                                          \
	"refused by the rendezvous on this port; the job's rank 0 log names " \
	"the reason"

/*
 * Closes pending connection i. reason (NULL: none) is logged; tell also
 * sends a REFUSE: REFUSAL_TEXT, or in another protocol version (version
 * not 0) the reason itself, which names only the two versions, so that a
 * rank of another release can read why. Evictions tell nothing: a
 * genuine rank connects again.
 */
static void
pend_drop(struct rdv *r, int i, const char *reason, int tell, uint16_t version)
{
	struct wk_buf b = {0};

	if (reason) {
		refuse_log(r, r->pend[i].from, reason);
		/* Best effort, never block. */
		if (tell &&
		    proto_encode_refuse_as(&b, version ? version : RDV_VERSION,
					   version ? reason : REFUSAL_TEXT) ==
			    0 &&
		    send(r->pend[i].fd, b.p, b.len,
			 MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
			wk_log(3, "refusal not delivered: %s", strerror(errno));
		wk_buf_free(&b);
	}
	ddp_net_close(&r->pend[i].fd);
	free(r->pend[i].buf);
	r->pend[i] = r->pend[--r->npend];
	ddp_guard_remove(&r->guard, i);
}

static void
pend_refuse(struct rdv *r, int i, const char *reason)
{
	pend_drop(r, i, reason, 1, 0);
}

/* Moves a verified connection to the mesh's peers[rank]. */
static void
pend_adopt(struct rdv *r, int i, int rank)
{
	struct wk_peer *p = &r->mesh->peers[rank];

	p->fd = r->pend[i].fd;
	r->pend[i].fd = -1;
	ddp_fmt(p->addr, sizeof(p->addr), "%s", r->pend[i].addr);
	pend_drop(r, i, NULL, 0, 0);
}

/* The ranks in [from, size) that have not joined (joins) or connected. */
static const char *
missing_ranks(struct rdv *r, int from, int joins, char *buf, size_t size)
{
	size_t off = 0;
	int i, n = 0;

	buf[0] = '\0';
	for (i = from; i < r->mesh->size; i++) {
		if (joins ? r->joined[i]
			  : r->mesh->peers[i].fd >= 0 || !wanted(r, i))
			continue;
		if (n++ == 16) {
			ddp_fmt(buf + off, size - off, ", ...");
			break;
		}
		if (ddp_fmt(buf + off, size - off, "%s%d", off ? ", " : "", i) <
		    0)
			break;
		off = strlen(buf);
	}
	return buf;
}

/* Sends one message to pending connection i; 0 or -1 (dropped). */
static int
pend_send(struct rdv *r, int i, struct wk_buf *b, const char *what)
{
	char why[256];

	if (!b->bad &&
	    ddp_net_send_all(r->pend[i].fd, b->p, b->len, wk_now() + 2) == 0)
		return 0;
	ddp_fmt(why, sizeof(why), "sending the %s failed: %s", what,
		b->bad ? "out of memory" : strerror(errno));
	pend_drop(r, i, why, 0, 0);
	return -1;
}

/* A member p of this leader's node holds (stage 2) for rank, or -1. */
static int
held_slot(const struct rdv *r, uint32_t rank)
{
	int i;

	for (i = 0; i < r->npend; i++)
		if (r->pend[i].kind == PK_MEMBER && r->pend[i].stage == 2 &&
		    r->pend[i].rank == rank)
			return i;
	return -1;
}

/*
 * 0 when an open's claim fits this job and a rank still missing (at rank
 * 0: a rank that has not joined, or a leader relaying more of its node;
 * at a leader: a member it has not held or relayed); else -1 and why.
 */
static int
open_claim_ok(const struct rdv *r, enum pend_kind kind,
	      const struct rdv_open *o, char *why, size_t whylen)
{
	const struct wk_mesh *c = r->mesh;

	if (strcmp(o->job, r->auth.job) != 0 ||
	    strcmp(o->step, r->auth.step) != 0) {
		ddp_fmt(why, whylen,
			"rank %u claims job=%s step=%s, this is job=%s "
			"step=%s (another job or step of the same user, or a "
			"stale MASTER_PORT?)",
			o->rank, o->job, o->step, r->auth.job, r->auth.step);
		return -1;
	}
	if ((int)o->world != c->size) {
		ddp_fmt(why, whylen,
			"rank %u claims world size %u, this job has %d",
			o->rank, o->world, c->size);
		return -1;
	}
	if (o->rank == 0 || (int)o->rank == c->rank) {
		ddp_fmt(why, whylen, "rank %u is %s", o->rank,
			(int)o->rank == c->rank ? "this process" : "rank 0");
		return -1;
	}
	if (kind == PK_MEMBER && (o->flags || o->relay)) {
		ddp_fmt(why, whylen,
			"rank %u opens as a node leader on a member's socket",
			o->rank);
		return -1;
	}
	if (kind == PK_JOIN && r->joined[o->rank] &&
	    (o->relay && (o->flags & RDV_OPEN_LEADER)))
		return 0; /* a leader's next session */
	if (r->joined[o->rank] || held_slot(r, o->rank) >= 0) {
		ddp_fmt(why, whylen, "rank %u already joined", o->rank);
		return -1;
	}
	return 0;
}

/* A member's address in its credential's binding: the node's join
 * socket, the member's process (as the kernel names it to the leader)
 * and the leader's rank. */
static int
member_binding(const struct rdv *r, int pid, int leader, const uint8_t *nonce,
	       char *out, size_t outlen)
{
	char addr[WK_ADDR_LEN + 48];

	if (ddp_fmt(addr, sizeof(addr), "unix:@%s pid=%d leader=%d",
		    r->node_tag, pid, leader) < 0)
		return -1;
	return proto_conn_binding(out, outlen, addr, nonce);
}

/*
 * An open: the rank it claims. Checked against this job before rank 0
 * spends a munge credential on it; then rank 0's proof, bound to a fresh
 * nonce and to the address the connection comes from.
 */
static void
pend_open(struct rdv *r, int i, const uint8_t *body, size_t blen)
{
	struct pend *p = &r->pend[i];
	struct rdv_proof *pr = NULL;
	struct rdv_open o;
	struct wk_buf b = {0};
	char why[512];

	if (proto_parse_open(body, blen, &o, why, sizeof(why)) < 0)
		goto refuse;
	if (open_claim_ok(r, p->kind, &o, why, sizeof(why)) < 0)
		goto refuse;
	pr = calloc(1, sizeof(*pr));
	if (!pr || getrandom(p->nonce, RDV_NONCE_LEN, 0) != RDV_NONCE_LEN) {
		ddp_fmt(why, sizeof(why), "rank 0: %s",
			pr ? "getrandom failed" : "out of memory");
		goto refuse;
	}
	memcpy(pr->nonce, p->nonce, RDV_NONCE_LEN);
	pr->rank = (uint32_t)r->mesh->rank;
	if ((p->kind == PK_MEMBER
		     ? member_binding(r, p->pid, r->mesh->rank, o.nonce,
				      p->bind, sizeof(p->bind))
		     : proto_conn_binding(p->bind, sizeof(p->bind), p->from,
					  o.nonce)) < 0) {
		ddp_fmt(why, sizeof(why), "address %s too long", p->from);
		goto refuse;
	}
	if (auth_encode(&r->auth, p->kind == PK_MEMBER ? "leader" : "rank0",
			(int)o.rank, p->nonce, p->bind, pr->cred,
			sizeof(pr->cred)) != DDP_OK) {
		/* Our own munge failed: not the peer's fault. */
		ddp_fmt(why, sizeof(why), "rank %d cannot authenticate: %s",
			r->mesh->rank, wk_errbuf());
		wk_log(0, "%s", why);
		goto refuse;
	}
	if (proto_encode_proof(&b, pr) < 0)
		b.bad = 1;
	if (pend_send(r, i, &b, "proof") < 0)
		goto out;
	p->stage = 1;
	p->rank = o.rank;
	p->flags = o.flags;
	p->relay = o.relay;
	p->have = 0;
	p->need = RDV_HDR_LEN;
	goto out;
refuse:
	pend_refuse(r, i, why);
out:
	free(pr);
	wk_buf_free(&b);
}

/* Records a rank that joined: its host, address and data port. */
static void
note_joined(struct rdv *r, uint32_t rank, const char *host, const char *addr,
	    uint16_t port)
{
	struct wk_peer *peer = &r->mesh->peers[rank];

	ddp_fmt(peer->host, DDP_HOST_MAX, "%s", host);
	ddp_fmt(peer->addr, WK_ADDR_LEN, "%s", addr);
	peer->port = port;
	r->joined[rank] = 1;
	wk_log(3, "rank %d: rank %u joined from %s (%s)", r->mesh->rank, rank,
	       addr[0] ? addr : "this node", host);
}

/* The welcome (the mesh token) to pending connection i; 0 or -1
 * (dropped). */
static int
send_welcome(struct rdv *r, int i)
{
	struct wk_buf b = {0};
	int rc;

	if (proto_encode_welcome(&b, r->token) < 0)
		b.bad = 1;
	rc = pend_send(r, i, &b, "welcome");
	if (b.p)
		explicit_bzero(b.p, b.cap);
	wk_buf_free(&b);
	return rc;
}

/*
 * Connection i joined (rank 0: its welcome sent): a child of rank 0 that
 * is not a node leader keeps it for the roster (stage 2: never evicted
 * first, its close means the rank died); the others get the roster down
 * the tree.
 */
static void
pend_joined(struct rdv *r, int i)
{
	struct pend *p = &r->pend[i];

	if (p->kind == PK_JOIN && p->rank <= RDV_FANOUT &&
	    !(p->flags & RDV_OPEN_LEADER)) {
		p->stage = 2;
		p->have = 0;
		p->need = RDV_HDR_LEN;
		p->deadline = r->deadline_all + 5;
	} else {
		pend_drop(r, i, NULL, 0, 0);
	}
}

/*
 * Rank 0: how the job's ranks reach it, the address its own node's
 * members (joined on the node's socket) get in the roster: the local end
 * of the first verified join from another host. A connection before its
 * credential verifies, or a local one, says nothing about that (another
 * user's connection to MASTER_PORT must not choose the address); until
 * then MASTER_ADDR's own address stands (self_addr_guess).
 */
static void
learn_self_addr(struct rdv *r, int fd)
{
	struct sockaddr_storage peer;
	socklen_t len = sizeof(peer);
	int port;

	if (r->self_addr_seen ||
	    getpeername(fd, (struct sockaddr *)&peer, &len) < 0 ||
	    ddp_net_sa_loopback((struct sockaddr *)&peer))
		return;
	ddp_net_sock_addr(fd, 1, r->self_addr, sizeof(r->self_addr), &port);
	r->self_addr_seen = 1;
}

/*
 * A hello after this rank's proof: the rank's credential for that proof
 * ("hello" at rank 0's port, "member" on the node's socket). At rank 0 a
 * rank joins; a leader's hello announcing members is followed by its
 * relay; a member at another leader is held until rank 0 welcomes it.
 */
static void
pend_hello(struct rdv *r, int i, const uint8_t *body, size_t blen)
{
	struct wk_mesh *c = r->mesh;
	struct pend *p = &r->pend[i];
	struct rdv_hello *h = NULL;
	char why[1200];
	int member = p->kind == PK_MEMBER;

	h = malloc(sizeof(*h));
	if (!h) {
		ddp_fmt(why, sizeof(why), "out of memory");
		goto refuse;
	}
	if (proto_parse_hello(body, blen, h, why, sizeof(why)) < 0)
		goto refuse;
	if (h->rank != p->rank || (int)h->world != c->size) {
		ddp_fmt(why, sizeof(why),
			"hello of rank %u of %u after an open for rank %u of "
			"%d",
			h->rank, h->world, p->rank, c->size);
		goto refuse;
	}
	if (auth_verify(&r->auth, h->cred, member ? "member" : "hello",
			(int)h->rank, p->nonce, p->bind, why, sizeof(why)) < 0)
		goto refuse;
	if (member && strcmp(h->host, c->myhost) != 0) {
		ddp_fmt(why, sizeof(why),
			"rank %u on the join socket of node %s says its host "
			"is %s",
			h->rank, c->myhost, h->host);
		goto refuse;
	}
	if (member && c->rank != 0) {
		/* Held until rank 0 welcomes the leader's relay. */
		p->stage = 2;
		p->data_port = h->data_port;
		p->have = 0;
		p->need = RDV_HDR_LEN;
		p->deadline = r->deadline_all + 5;
		if (r->batch_end == 0)
			r->batch_end = wk_now() + LATE_BATCH_S;
		goto out;
	}
	if (!member && c->rank == 0)
		learn_self_addr(r, p->fd);
	if (!r->joined[h->rank])
		note_joined(r, h->rank, h->host, member ? "" : p->addr,
			    h->data_port);
	if (p->relay) {
		/* The leader's members come next, in this session. */
		p->stage = 3;
		p->have = 0;
		p->need = RDV_HDR_LEN;
		goto out;
	}
	if (send_welcome(r, i) == 0)
		pend_joined(r, i);
	goto out;
refuse:
	pend_refuse(r, i, why);
out:
	free(h);
}

/*
 * Rank 0: a leader's relay, in the session its hello just authenticated:
 * each member's rank and data port (the leader verified its credential
 * on the node's socket; the member's host and address are the
 * leader's). All of them or none.
 */
static void
pend_relay(struct rdv *r, int i, const uint8_t *body, size_t blen)
{
	struct wk_mesh *c = r->mesh;
	struct pend *p = &r->pend[i];
	struct rdv_relay_entry *e;
	char why[512];
	uint32_t k, m;

	e = calloc(p->relay, sizeof(*e));
	if (!e) {
		pend_refuse(r, i, "out of memory");
		return;
	}
	if (proto_parse_relay(body, blen, p->relay, e, why, sizeof(why)) < 0)
		goto refuse;
	for (k = 0; k < p->relay; k++) {
		for (m = 0; m < k && e[m].rank != e[k].rank; m++)
			;
		if (e[k].rank == 0 || e[k].rank == p->rank ||
		    (int)e[k].rank >= c->size || r->joined[e[k].rank] ||
		    m < k) {
			ddp_fmt(why, sizeof(why),
				"node leader rank %u (%s) relays rank %u, "
				"which %s",
				p->rank, c->peers[p->rank].host, e[k].rank,
				(int)e[k].rank >= c->size ? "is not in the job"
				: e[k].rank == p->rank	  ? "is the leader"
							  : "already joined");
			goto refuse;
		}
	}
	for (k = 0; k < p->relay; k++)
		note_joined(r, e[k].rank, c->peers[p->rank].host, p->addr,
			    e[k].data_port);
	if (send_welcome(r, i) == 0)
		pend_drop(r, i, NULL, 0, 0);
	free(e);
	return;
refuse:
	pend_refuse(r, i, why);
	free(e);
}

/* Rank r's parent in the tree the roster goes down. */
static int
tree_parent(int r)
{
	return (r - 1) / RDV_FANOUT;
}

/*
 * A data listener's peer hello: the job token, then either the rank's
 * parent (or rank 0) with the roster (or rank 0's word that it gave up)
 * to come on this connection, or a higher rank this rank's collectives
 * use, from the address it joined from.
 */
static void
pend_peer(struct rdv *r, int i, const uint8_t *body, size_t blen)
{
	struct wk_mesh *c = r->mesh;
	struct pend *p = &r->pend[i];
	struct rdv_peer_hello ph;
	char why[256];
	uint8_t diff = 0;
	int k, from;

	if (proto_parse_peer(body, blen, &ph, why, sizeof(why)) < 0)
		goto refuse;
	for (k = 0; k < WK_TOKEN_LEN; k++)
		diff |= (uint8_t)(ph.token[k] ^ r->token[k]);
	if (diff) {
		ddp_fmt(why, sizeof(why), "wrong job token");
		goto refuse;
	}
	from = (int)ph.rank;
	/* Rank 0 connects to a data listener only to hand down the roster
	 * or to say it gave up; the parent only with the roster. */
	if (c->rank != 0 &&
	    (from == 0 || (r->roster == 0 && from == tree_parent(c->rank)))) {
		p->stage = 1;
		p->rank = ph.rank;
		p->have = 0;
		p->need = RDV_HDR_LEN;
		return;
	}
	if (from <= c->rank || from >= c->size || !wanted(r, from) ||
	    c->peers[from].fd >= 0) {
		ddp_fmt(why, sizeof(why), "unexpected rank %u", ph.rank);
		goto refuse;
	}
	if (r->roster == 1 && strcmp(p->addr, c->peers[from].addr) != 0) {
		ddp_fmt(why, sizeof(why),
			"rank %d connects from %s, but joined from %s", from,
			p->addr, c->peers[from].addr);
		goto refuse;
	}
	pend_adopt(r, i, from);
	return;
refuse:
	pend_refuse(r, i, why);
}

/*
 * Takes the roster in (every rank's data address and host) from a
 * parent whose token checked; a mesh connection adopted before it came
 * must come from the address its rank joined from.
 */
static int
take_roster(struct rdv *r, const uint8_t *body, size_t blen, char *why,
	    size_t whylen)
{
	struct wk_mesh *c = r->mesh;
	uint8_t token[WK_TOKEN_LEN];
	uint32_t world;
	int s, rc = -1;

	if (proto_parse_roster(body, blen, (uint32_t)c->size, &world, token,
			       r->ents, why, whylen) < 0)
		goto out;
	if ((int)world != c->size ||
	    memcmp(token, r->token, WK_TOKEN_LEN) != 0) {
		ddp_fmt(why, whylen, "a roster of %u ranks or another token",
			world);
		goto out;
	}
	for (s = 0; s < c->size; s++) {
		if (s == c->rank)
			continue;
		if (c->peers[s].fd >= 0 &&
		    strcmp(c->peers[s].addr, r->ents[s].addr) != 0) {
			char said[160];

			ddp_fmt(said, sizeof(said),
				"rank %d connects from %s, but joined from %s",
				s, c->peers[s].addr, r->ents[s].addr);
			refuse_log(r, c->peers[s].addr, said);
			ddp_net_close(&c->peers[s].fd);
		}
		ddp_fmt(c->peers[s].host, DDP_HOST_MAX, "%s", r->ents[s].host);
		ddp_fmt(c->peers[s].addr, WK_ADDR_LEN, "%s", r->ents[s].addr);
		c->peers[s].port = r->ents[s].port;
	}
	r->roster = 1;
	rc = 0;
out:
	explicit_bzero(token, sizeof(token));
	return rc;
}

/* The message after a parent's (or rank 0's) peer hello: the roster, or
 * rank 0's REFUSE when the job will not start. */
static void
pend_roster(struct rdv *r, int i, uint16_t type, const uint8_t *body,
	    size_t blen)
{
	char why[512];

	if (type == RDV_REFUSE) {
		refuse_text(body, (uint32_t)blen, r->gave_up,
			    sizeof(r->gave_up));
		r->roster = -1;
	} else if (r->roster != 0) {
		pend_refuse(r, i, "a second roster");
		return;
	} else if (take_roster(r, body, blen, why, sizeof(why)) < 0) {
		pend_refuse(r, i, why);
		return;
	}
	pend_drop(r, i, NULL, 0, 0);
}

/* The roster, as rank 0 hands it to a child on its join connection. */
static int
send_roster(struct rdv *r, int i)
{
	struct wk_buf b = {0};
	int rc;

	if (proto_encode_roster(&b, (uint32_t)r->mesh->size, r->token,
				r->ents) < 0)
		b.bad = 1;
	rc = pend_send(r, i, &b, "roster");
	if (b.p)
		explicit_bzero(b.p, b.cap);
	wk_buf_free(&b);
	return rc;
}

/*
 * A complete header in pending connection i: it must be the message this
 * stage expects (a REFUSE goes back in the sender's protocol version when
 * it speaks another); then room for the body. 0, or -1 when slot i was
 * dropped.
 */
static int
pend_header(struct rdv *r, int i)
{
	struct pend *p = &r->pend[i];
	uint16_t type, want, ver;
	uint32_t blen;
	char why[512];
	uint8_t *nb;

	if (proto_parse_header(p->buf, p->have, &type, &blen, why,
			       sizeof(why)) < 0) {
		ver = proto_header_version(p->buf, p->have);
		pend_drop(r, i, why, 1, ver != RDV_VERSION ? ver : 0);
		return -1;
	}
	if (p->kind == PK_PEER)
		want = p->stage ? RDV_ROSTER : RDV_PEER;
	else
		want = p->stage == 0   ? RDV_OPEN
		       : p->stage == 1 ? RDV_HELLO
		       : p->stage == 3 ? RDV_RELAY
				       : 0;
	if (type != want &&
	    !(p->kind == PK_PEER && p->stage && type == RDV_REFUSE)) {
		ddp_fmt(why, sizeof(why),
			"unexpected message type %u (expected %u)", type, want);
		pend_refuse(r, i, why);
		return -1;
	}
	nb = realloc(p->buf, RDV_HDR_LEN + (size_t)blen);
	if (!nb) {
		pend_refuse(r, i, "out of memory");
		return -1;
	}
	p->buf = nb;
	p->need = RDV_HDR_LEN + (size_t)blen;
	return 0;
}

/*
 * Reads what pending connection i has, handling complete messages, until
 * it would block or slot i is dropped or adopted (the last slot moves
 * into it then).
 */
static void
pend_read(struct rdv *r, int i)
{
	struct pend *p = &r->pend[i];
	const uint8_t *body;
	size_t blen;
	char why[512];
	ssize_t n;
	uint16_t type;
	int fd = p->fd, stage;

	for (;;) {
		n = recv(p->fd, p->buf + p->have, p->need - p->have,
			 MSG_DONTWAIT);
		if (n == 0 && p->stage == 2 && p->kind == PK_MEMBER) {
			/* A member held for the relay is gone: rank 0 names
			 * it missing if it does not come back. */
			wk_log(0,
			       "rank %d: rank %u closed its join connection "
			       "before rank 0's welcome (it died or was "
			       "killed)",
			       r->mesh->rank, p->rank);
			pend_drop(r, i, NULL, 0, 0);
			return;
		}
		if (n == 0 && p->stage == 2) {
			/* A child of rank 0 that joined and asked for the
			 * roster is gone: it died, which no wait mends. */
			r->lost = (int)p->rank;
			pend_drop(r, i, NULL, 0, 0);
			return;
		}
		if (n == 0) {
			pend_drop(r, i,
				  p->stage ? "closed after rank 0's proof, "
					     "without a hello"
					   : "closed before saying which rank "
					     "it is",
				  0, 0);
			return;
		}
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK ||
			    errno == EINTR)
				return;
			ddp_fmt(why, sizeof(why), "read failed: %s",
				strerror(errno));
			pend_drop(r, i, why, 0, 0);
			return;
		}
		p->have += (size_t)n;
		if (p->have < p->need)
			continue;
		if (p->need == RDV_HDR_LEN) {
			if (pend_header(r, i) < 0)
				return;
			if (p->need > RDV_HDR_LEN)
				continue;
		}
		stage = p->stage;
		body = p->buf + RDV_HDR_LEN;
		blen = p->need - RDV_HDR_LEN;
		type = (uint16_t)(p->buf[6] | p->buf[7] << 8);
		if (p->kind == PK_PEER && stage == 0)
			pend_peer(r, i, body, blen);
		else if (p->kind == PK_PEER)
			pend_roster(r, i, type, body, blen);
		else if (stage == 0)
			pend_open(r, i, body, blen);
		else if (stage == 1)
			pend_hello(r, i, body, blen);
		else
			pend_relay(r, i, body, blen);
		if (i >= r->npend || r->pend[i].fd != fd ||
		    r->pend[i].stage == stage)
			return;
	}
}

/* The guard's measure of pending connection i (struct rdv): its stage,
 * so that one that has proved part of its hello is spared. */
static int
pend_proof(void *arg, int i)
{
	const struct rdv *r = arg;

	return r->pend[i].stage;
}

/*
 * Makes room for a newcomer from source: reads a would-be victim first
 * (its open may be waiting, which saves it), then evicts one.
 */
static void
pend_make_room(struct rdv *r, const char *source)
{
	int tries, v, n;

	for (tries = 0;; tries++) {
		v = ddp_guard_admit(&r->guard, source);
		if (v < 0)
			return;
		if (r->pend[v].stage > 0 || tries == 3)
			break;
		n = r->npend;
		pend_read(r, v);
		if (r->npend < n)
			continue; /* dropped or joined: maybe room now */
		if (r->pend[v].stage == 0)
			break;
	}
	pend_drop(r, v,
		  "evicted to make room for newer connections (too many "
		  "pending)",
		  0, 0);
}

/* The error for a resource that ran out on this rank: err's advice. */
static enum ddp_status
resource_error(const struct rdv *r, int err, const char *doing)
{
	char advice[512];

	ddp_net_resource_advice(err, advice, sizeof(advice));
	return wk_err(DDP_ERR_SYSTEM, "rank %d on %s: %s: %s; %s",
		      r->mesh->rank, r->mesh->myhost, doing, strerror(err),
		      advice);
}

/*
 * Who is at the other end of connection fd from a node's join socket:
 * the kernel's word for its process and user. 0, or -1 and why (another
 * user: this job's ranks are all its user's).
 */
static int
member_peer(int fd, int *pid, char *from, size_t fromlen, char *why,
	    size_t whylen)
{
	struct ucred uc;
	socklen_t ul = sizeof(uc);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &ul) < 0) {
		ddp_fmt(from, fromlen, "the node's join socket");
		ddp_fmt(why, whylen, "SO_PEERCRED: %s", strerror(errno));
		return -1;
	}
	*pid = (int)uc.pid;
	ddp_fmt(from, fromlen, "pid %d (uid %u) on the node's join socket",
		(int)uc.pid, (unsigned)uc.uid);
	if (uc.uid != geteuid()) {
		ddp_fmt(why, whylen, "uid %u is not this job's user (uid %u)",
			(unsigned)uc.uid, (unsigned)geteuid());
		return -1;
	}
	return 0;
}

/*
 * Accepts up to ACCEPT_BATCH waiting connections of listener lfd into
 * the pending table as kind. DDP_OK, or an error at once when this
 * process is out of descriptors or memory: the kernel keeps the
 * connection queued, so waiting would spin until the timeout and blame
 * the ranks it never read.
 */
static enum ddp_status
accept_new(struct rdv *r, int lfd, enum pend_kind kind)
{
	struct sockaddr_storage ss;
	struct pend *p;
	socklen_t sl;
	char addr[WK_ADDR_LEN], from[WK_ADDR_LEN + 48], why[128];
	const char *source;
	int fd, port, k, pid = 0;

	for (k = 0; k < ACCEPT_BATCH; k++) {
		sl = sizeof(ss);
		fd = accept4(lfd, (struct sockaddr *)&ss, &sl,
			     SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0 && ddp_net_out_of_resources(errno))
			return resource_error(
				r, errno,
				kind == PK_PEER	    ? "accepting a peer"
				: kind == PK_MEMBER ? "accepting a rank of "
						      "this node"
						    : "accepting a rank");
		if (fd < 0)
			return DDP_OK;
		if (kind == PK_MEMBER) {
			addr[0] = '\0';
			if (member_peer(fd, &pid, from, sizeof(from), why,
					sizeof(why)) < 0) {
				refuse_log(r, from, why);
				close(fd);
				continue;
			}
			source = from;
		} else {
			ddp_net_sa_format(&ss, addr, sizeof(addr), &port);
			ddp_fmt(from, sizeof(from), "%s:%d", addr, port);
			source = addr;
		}
		if (kind != PK_MEMBER && r->local_only &&
		    !ddp_net_sa_loopback((struct sockaddr *)&ss)) {
			refuse_log(r, from,
				   "not from this host (DDP_AUTH=none with a "
				   "loopback MASTER_ADDR accepts only local "
				   "ranks)");
			close(fd);
			continue;
		}
		pend_make_room(r, source);
		if (r->npend == r->guard.max) {
			refuse_log(r, from,
				   "too many pending connections from this "
				   "address");
			close(fd);
			continue;
		}
		if (kind != PK_MEMBER)
			ddp_net_no_delay(fd);
		p = &r->pend[r->npend];
		memset(p, 0, sizeof(*p));
		p->fd = fd;
		p->kind = kind;
		p->pid = pid;
		ddp_guard_add(&r->guard, source);
		p->need = RDV_HDR_LEN;
		p->buf = malloc(RDV_HDR_LEN);
		/* A rank's peer hello may be late on a busy host, and the
		 * rank does not connect again: it has until the wait ends. */
		p->deadline = kind == PK_PEER ? r->wait_end
					      : wk_now() + HELLO_GRACE_S;
		ddp_fmt(p->addr, sizeof(p->addr), "%s", addr);
		ddp_fmt(p->from, sizeof(p->from), "%s", from);
		r->npend++;
		if (!p->buf)
			pend_drop(r, r->npend - 1, "out of memory", 0, 0);
	}
	return DDP_OK;
}

/* The error of a wait for ranks [from, size) that reached its deadline. */
static enum ddp_status
accept_timeout(struct rdv *r, int from, enum wait_for what, int missing)
{
	struct wk_mesh *c = r->mesh;
	char miss[256];

	if (what == WAIT_ROSTER)
		return wk_err(DDP_ERR_TIMEOUT,
			      "rank %d timed out after %g s waiting for the "
			      "roster from rank %d (its parent in the "
			      "rendezvous tree) on its data port %d: rank 0 "
			      "may still wait for other ranks (its output "
			      "names them), rank %d may have failed, or the "
			      "firewall between the job's nodes drops TCP "
			      "(the slurm-ddp prolog opens it per job)",
			      c->rank, c->timeout_s, tree_parent(c->rank),
			      r->lport, tree_parent(c->rank));
	missing_ranks(r, from, what == WAIT_JOINS, miss, sizeof(miss));
	if (what == WAIT_PEERS)
		return wk_err(DDP_ERR_TIMEOUT,
			      "rank %d timed out after %g s waiting for "
			      "connections from ranks %s on its data port %d; "
			      "check that the firewall between the job's nodes "
			      "allows TCP between them (the slurm-ddp prolog "
			      "opens it per job)",
			      c->rank, c->timeout_s, miss, r->lport);
	return wk_err(
		DDP_ERR_TIMEOUT,
		"rank 0 timed out after %g s waiting for ranks to join "
		"at port %d: %d/%d joined, missing ranks %s. Likely causes: "
		"those ranks failed or were not started (their own error "
		"output says why: a limit of open files, a missing library, "
		"munge); they were started with another "
		"MASTER_ADDR/MASTER_PORT (srun --ddp: every node needs the "
		"same port_key; `ddp-nodectl port JOB STEP` on each "
		"compares them); %sor the firewall drops TCP port %d",
		c->timeout_s, r->lport, c->size - from - missing + 1, c->size,
		miss,
		r->local_size ? "their node's leader (LOCAL_RANK 0), which "
				"relays the joins of its node, failed or "
				"cannot reach rank 0 (its output says why); "
			      : "",
		r->lport);
}

/* Drops the pending connections past their deadline, silently: a slow
 * genuine rank connects again. */
static void
pend_expire(struct rdv *r, double now)
{
	int i;

	for (i = 0; i < r->npend; i++) {
		if (r->pend[i].deadline <= now) {
			pend_drop(r, i, "no hello in time", 0, 0);
			i--;
		}
	}
}

/* The members this leader holds for its next relay. */
static int
held_count(const struct rdv *r)
{
	int i, n = 0;

	for (i = 0; i < r->npend; i++)
		n += r->pend[i].kind == PK_MEMBER && r->pend[i].stage == 2;
	return n;
}

/* A leader's members are all held or relayed, or as many are held as
 * its pending table should keep. */
static int
members_complete(const struct rdv *r, int held)
{
	return held + r->relayed >= r->local_size - 1 ||
	       held >= r->guard.max / 2;
}

static enum ddp_status leader_flush(struct rdv *r, double deadline);

/*
 * One wait on the listeners and every pending connection until deadline,
 * the next pending deadline, a leader's next relay or the next refusal
 * summary, then handles what came: reads first, then new connections.
 */
static enum ddp_status
accept_poll(struct rdv *r, double now, double deadline)
{
	struct pollfd pfd[MAX_PENDING + 2];
	enum ddp_status st = DDP_OK;
	double wake = deadline;
	int i, n;

	if (r->ref.quiet && r->ref.next < wake)
		wake = r->ref.next;
	if (r->leader && r->batch_end > 0 && r->batch_end < wake)
		wake = r->batch_end;
	pfd[0].fd = r->lfd;
	pfd[1].fd = r->ufd; /* ignored by poll when -1 */
	pfd[0].events = pfd[1].events = POLLIN;
	pfd[0].revents = pfd[1].revents = 0;
	n = 2;
	for (i = 0; i < r->npend; i++) {
		pfd[n].fd = r->pend[i].fd;
		pfd[n].events = POLLIN;
		n++;
		if (r->pend[i].deadline < wake)
			wake = r->pend[i].deadline;
	}
	if (poll(pfd, (nfds_t)n,
		 wake > now ? (int)((wake - now) * 1000) + 1 : 0) < 0 &&
	    errno != EINTR)
		return wk_err(DDP_ERR_SYSTEM, "poll: %s", strerror(errno));
	/* Walk pending slots backwards: handling one may move the last slot
	 * into its place. */
	for (i = n - 1; i >= 2; i--) {
		if (i - 2 < r->npend && pfd[i].revents &&
		    r->pend[i - 2].fd == pfd[i].fd)
			pend_read(r, i - 2);
	}
	if (pfd[0].revents & POLLIN)
		st = accept_new(r, r->lfd,
				r->what == WAIT_JOINS ? PK_JOIN : PK_PEER);
	if (!st && r->ufd >= 0 && (pfd[1].revents & POLLIN))
		st = accept_new(r, r->ufd, PK_MEMBER);
	return st;
}

/*
 * Accepts connections until every rank in [from, size) has joined (rank
 * 0: opens and hellos with credentials, directly, relayed by node
 * leaders or on its node's join socket), until the roster came (a data
 * listener before it; a leader relays its late members meanwhile), until
 * every wanted rank in [from, size) is connected (data listeners: peer
 * hellos with the job token) or, for a leader, until its members are
 * held or deadline (not an error then). Bad ones are refused and logged;
 * waiting goes on.
 */
static enum ddp_status
accept_ranks(struct rdv *r, int from, enum wait_for what, double deadline)
{
	struct wk_mesh *c = r->mesh;
	enum ddp_status st = DDP_OK;
	int i, missing, held;
	double now;

	r->wait_end = deadline;
	r->what = what;
	for (;;) {
		now = wk_now();
		held = r->leader ? held_count(r) : 0;
		if (what == WAIT_MEMBERS &&
		    (members_complete(r, held) || now >= deadline))
			break;
		if (what == WAIT_ROSTER && held > 0 && r->roster == 0 &&
		    (now >= r->batch_end || members_complete(r, held))) {
			st = leader_flush(r, r->deadline_all);
			if (st)
				break;
			continue;
		}
		missing = what == WAIT_MEMBERS;
		for (i = from;
		     i < c->size && what != WAIT_ROSTER && what != WAIT_MEMBERS;
		     i++)
			missing += what == WAIT_PEERS
					   ? c->peers[i].fd < 0 && wanted(r, i)
					   : !r->joined[i];
		if (what == WAIT_ROSTER)
			missing = r->roster == 0;
		if (!missing || r->roster < 0)
			break;
		if (r->lost >= 0) {
			st = wk_err(
				DDP_ERR_PEER,
				"rank %d (%s) closed its connection to rank "
				"0 after it joined, before the roster: the "
				"process died or was killed",
				r->lost, c->peers[r->lost].host);
			break;
		}
		if (now >= deadline) {
			st = accept_timeout(r, from, what, missing);
			break;
		}
		pend_expire(r, now);
		refuse_flush(r, 0);
		st = accept_poll(r, now, deadline);
		if (st)
			break;
	}
	refuse_flush(r, 1);
	return st;
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
		return resource_error(r, errno, "listening on MASTER_PORT");
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
 * A node leader's join socket, where its node's other ranks join. Taken
 * by another process: logged, and they join rank 0 directly (they find
 * the process there is not their leader).
 */
static enum ddp_status
node_listen(struct rdv *r)
{
	struct wk_mesh *c = r->mesh;
	int fd;

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 && ddp_net_out_of_resources(errno))
		return resource_error(r, errno, "the node's join socket");
	if (fd >= 0 &&
	    bind(fd, (struct sockaddr *)&r->node_sa, r->node_salen) == 0 &&
	    listen(fd, SOMAXCONN) == 0) {
		r->ufd = fd;
		return DDP_OK;
	}
	wk_log(0,
	       "rank %d (node leader on %s): cannot take the node's join "
	       "socket (@%s): %s%s; this node's ranks join rank 0 directly",
	       c->rank, c->myhost, r->node_sa.sun_path + 1, strerror(errno),
	       errno == EADDRINUSE ? " (another process holds it)" : "");
	if (fd >= 0)
		close(fd);
	return DDP_OK;
}

/*
 * A connection to rank `to`'s data listener at addr:port carrying b (a
 * peer hello and what follows it); the fd goes to *out. DDP_OK, or an
 * error naming the rank, its host, what this rank was doing (`doing`
 * rank `to`) and what failed.
 */
static enum ddp_status
dial_peer(struct rdv *r, int to, const char *addr, int port,
	  const struct wk_buf *b, double deadline, const char *doing, int *out)
{
	struct wk_mesh *c = r->mesh;
	char why[512];
	int fd;

	fd = ddp_net_connect_retry(addr, port, deadline, why, sizeof(why));
	if (fd < 0 && ddp_net_out_of_resources(errno))
		return resource_error(r, errno, "connecting to a peer");
	if (fd >= 0 && ddp_net_send_all(fd, b->p, b->len, deadline) == 0) {
		*out = fd;
		return DDP_OK;
	}
	if (fd >= 0)
		ddp_fmt(why, sizeof(why), "%s", strerror(errno));
	ddp_net_close(&fd);
	return wk_err(DDP_ERR_RENDEZVOUS,
		      "rank %d could not %s rank %d at %s:%d (%s): %s; the "
		      "firewall between the job's nodes must allow TCP between "
		      "them (the slurm-ddp prolog opens it per job)",
		      c->rank, doing, to, addr, port, c->peers[to].host, why);
}

/* A peer hello from this rank followed by msg, into b. */
static int
encode_push(struct rdv *r, struct wk_buf *b)
{
	struct rdv_peer_hello ph;
	int rc;

	ph.rank = (uint32_t)r->mesh->rank;
	memcpy(ph.token, r->token, WK_TOKEN_LEN);
	rc = proto_encode_peer(b, &ph);
	explicit_bzero(ph.token, sizeof(ph.token));
	return rc;
}

/*
 * Hands the roster down: to this rank's children in the tree (ranks
 * RDV_FANOUT * rank + 1 ..), each of which hands it to its own, so that
 * no rank sends it more than RDV_FANOUT times.
 */
static enum ddp_status
push_roster(struct rdv *r, double deadline)
{
	struct wk_mesh *c = r->mesh;
	struct wk_buf b = {0};
	enum ddp_status st = DDP_OK;
	long child;
	int k, fd = -1;

	if (encode_push(r, &b) < 0 ||
	    proto_encode_roster(&b, (uint32_t)c->size, r->token, r->ents) < 0) {
		st = wk_err(DDP_ERR_NOMEM, "rank %d: roster too large",
			    c->rank);
		goto out;
	}
	/* Rank 0's children that joined it directly, leaders aside, got
	 * the roster on their join connection. */
	for (k = 1; k <= RDV_FANOUT && !st; k++) {
		child = (long)RDV_FANOUT * c->rank + k;
		if (child >= c->size)
			break;
		if (c->rank == 0 && r->told[child])
			continue;
		st = dial_peer(r, (int)child, r->ents[child].addr,
			       r->ents[child].port, &b, deadline,
			       "hand the roster to", &fd);
		ddp_net_close(&fd);
	}
out:
	if (b.p)
		explicit_bzero(b.p, b.cap);
	wk_buf_free(&b);
	return st;
}

/*
 * Tells every rank that joined why the job will not start (best effort,
 * at most 5 s in all): the thread's last error, in a REFUSE after a peer
 * hello on its data listener, where it waits for the roster.
 */
static void
master_refuse_joined(struct rdv *r)
{
	struct wk_mesh *c = r->mesh;
	struct wk_buf b = {0};
	double budget = wk_now() + 5.0, until;
	uint8_t told[RDV_FANOUT + 1] = {0};
	size_t head;
	char why[256];
	int i, fd;

	if (encode_push(r, &b) < 0 ||
	    proto_encode_text(&b, RDV_REFUSE, wk_errbuf()) < 0)
		goto out;
	/* Rank 0's children wait on their join connection: the REFUSE
	 * alone, without the peer hello. */
	head = b.len - (size_t)RDV_HDR_LEN - WK_TOKEN_LEN - 4;
	for (i = r->npend - 1; i >= 0; i--) {
		if (r->pend[i].stage == 2) {
			(void)ddp_net_send_all(r->pend[i].fd,
					       b.p + b.len - head, head,
					       wk_now() + 0.5);
			told[r->pend[i].rank] = 1;
		}
	}
	for (i = 1; i < c->size && wk_now() < budget; i++) {
		if (!r->joined[i] || (i <= RDV_FANOUT && told[i]))
			continue;
		if (!c->peers[i].addr[0]) /* joined on this node's socket */
			ddp_fmt(c->peers[i].addr, WK_ADDR_LEN, "%s",
				r->self_addr);
		until = wk_now() + 0.5 < budget ? wk_now() + 0.5 : budget;
		fd = ddp_net_connect_once(c->peers[i].addr, c->peers[i].port,
					  until, why, sizeof(why));
		if (fd >= 0)
			(void)ddp_net_send_all(fd, b.p, b.len, until);
		ddp_net_close(&fd);
	}
out:
	if (b.p)
		explicit_bzero(b.p, b.cap);
	wk_buf_free(&b);
}

/*
 * Once every rank's host is known: the peers this rank's collectives use,
 * and the join connections (to or from rank 0) that are not among them
 * closed, so that no rank holds one descriptor per rank of the job.
 */
static enum ddp_status
keep_wanted(struct rdv *r)
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
			ddp_net_close(&c->peers[i].fd);
	wk_log(3, "rank %d: %d of %d peers connected", c->rank, n, c->size - 1);
	return DDP_OK;
}

/*
 * Rank 0: MASTER_PORT, a fresh mesh token, every rank joined, the roster
 * down the tree, then the mesh connections of the higher ranks its
 * collectives use, on MASTER_PORT.
 */
static enum ddp_status
master_side(struct rdv *r, double deadline)
{
	struct wk_mesh *c = r->mesh;
	enum ddp_status st;
	int i;

	st = listen_master(r, deadline);
	if (!st && r->local_size && r->local_rank == 0)
		st = node_listen(r);
	if (st)
		return st;
	if (getrandom(r->token, sizeof(r->token), 0) !=
	    (ssize_t)sizeof(r->token))
		return wk_err(DDP_ERR_SYSTEM, "getrandom: %s", strerror(errno));
	r->joined[0] = 1;
	st = accept_ranks(r, 1, WAIT_JOINS, deadline);
	if (st) {
		master_refuse_joined(r);
		return st;
	}
	ddp_net_close(&r->ufd);
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
		    send_roster(r, i) == 0) {
			r->told[r->pend[i].rank] = 1;
			pend_drop(r, i, NULL, 0, 0);
		}
	}
	deadline = wk_now() + c->timeout_s;
	st = keep_wanted(r);
	if (!st)
		st = push_roster(r, deadline);
	if (st)
		/* A rank died after it joined: tell the others at once,
		 * those below it in the tree included. */
		master_refuse_joined(r);
	if (!st)
		st = accept_ranks(r, 1, WAIT_PEERS, deadline);
	return st;
}

/*
 * Reads rank 0's next message of a join into *body (malloc'd, the caller
 * frees it). Until rank 0's proof verified (proven 0), whatever answers
 * may be a squatter on MASTER_PORT or another job whose port collides:
 * its REFUSE or another protocol version only means "not rank 0 of this
 * job", and the rank connects again (its text is never shown, its
 * address is). After the proof, rank 0's REFUSE ends the join, quoting
 * its reason.
 */
static enum ddp_status
join_recv(struct rdv *r, int fd, double wait, const char *waiting_for,
	  int proven, uint16_t *type, uint8_t **body, uint32_t *blen,
	  int *retry)
{
	const struct ddp_config *cfg = r->cfg;
	char what[64], text[1024], peer[WK_ADDR_LEN];
	enum ddp_status st;
	int other, port;

	ddp_fmt(what, sizeof(what), "rank %d: waiting for rank 0's %s",
		r->mesh->rank, waiting_for);
	st = recv_msg(fd, wait, what, type, body, blen, &other);
	if (st && other && !proven) {
		ddp_net_sock_addr(fd, 0, peer, sizeof(peer), &port);
		ddp_fmt(text, sizeof(text), "%s", wk_errbuf());
		return wk_err(DDP_ERR_RENDEZVOUS,
			      "%s; the process at %s:%d has not proven it is "
			      "rank 0 of this job",
			      text, peer, port);
	}
	if (st || *type != RDV_REFUSE) {
		if (st && other)
			*retry = 0;
		return st;
	}
	if (!proven) {
		ddp_net_sock_addr(fd, 0, peer, sizeof(peer), &port);
		return wk_err(DDP_ERR_AUTH,
			      "rank %d: the process at %s:%d (MASTER_ADDR %s) "
			      "refused before proving it is rank 0 of this "
			      "job: another program or job may hold "
			      "MASTER_PORT",
			      r->mesh->rank, peer, port, cfg->master_addr);
	}
	*retry = 0;
	refuse_text(*body, *blen, text, sizeof(text));
	return wk_err(DDP_ERR_AUTH, "rank 0 at %s:%d refused rank %d: %s",
		      cfg->master_addr, cfg->master_port, r->mesh->rank, text);
}

/* Join, phase 1: the open, naming the rank this process claims to be,
 * with a fresh nonce of its own. */
static enum ddp_status
join_send_open(struct rdv *r, int fd, double wait, uint32_t relay,
	       uint8_t *nonce, int *retry)
{
	struct wk_mesh *c = r->mesh;
	struct wk_buf b = {0};
	struct rdv_open o;
	enum ddp_status st = DDP_OK;

	memset(&o, 0, sizeof(o));
	o.rank = (uint32_t)c->rank;
	o.world = (uint32_t)c->size;
	ddp_fmt(o.job, sizeof(o.job), "%s", r->cfg->job_id);
	ddp_fmt(o.step, sizeof(o.step), "%s", r->cfg->step_id);
	o.flags = r->leader ? RDV_OPEN_LEADER : 0;
	o.relay = relay;
	if (getrandom(o.nonce, RDV_NONCE_LEN, 0) != RDV_NONCE_LEN) {
		*retry = 0;
		st = wk_err(DDP_ERR_SYSTEM, "rank %d: getrandom: %s", c->rank,
			    strerror(errno));
	} else if (proto_encode_open(&b, &o) < 0) {
		*retry = 0;
		st = wk_err(DDP_ERR_INVALID, "rank %d: job or step id too long",
			    c->rank);
	} else if (ddp_net_send_all(fd, b.p, b.len, wait) < 0) {
		st = wk_err(DDP_ERR_RENDEZVOUS,
			    "rank %d: sending the open failed: %s", c->rank,
			    strerror(errno));
	}
	memcpy(nonce, o.nonce, RDV_NONCE_LEN);
	wk_buf_free(&b);
	return st;
}

/*
 * Join, phase 2: rank 0's proof (message type, body) checked: this uid,
 * job, step, our rank, our nonce and our own address as rank 0 sees it
 * (bind), so that a proof relayed from another connection or replayed
 * fails. The parsed proof goes to *out (malloc'd, the caller frees it).
 */
static enum ddp_status
join_check_proof(struct rdv *r, uint16_t type, const uint8_t *body,
		 uint32_t blen, const char *bind, struct rdv_proof **out,
		 int *retry)
{
	struct wk_mesh *c = r->mesh;
	struct rdv_proof *pr;
	char why[1200];

	pr = malloc(sizeof(*pr));
	*out = pr;
	if (!pr) {
		*retry = 0;
		return wk_err(DDP_ERR_NOMEM, "rank %d: out of memory", c->rank);
	}
	if (type != RDV_PROOF)
		ddp_fmt(why, sizeof(why), "it sent message type %u first",
			type);
	if (type != RDV_PROOF ||
	    proto_parse_proof(body, blen, pr, why, sizeof(why)) < 0 ||
	    auth_verify(&r->auth, pr->cred, "rank0", c->rank, pr->nonce, bind,
			why, sizeof(why)) < 0)
		return wk_err(DDP_ERR_AUTH,
			      "rank %d: the process at %s:%d did not prove it "
			      "is rank 0 of this job (%s); another program may "
			      "be using MASTER_PORT",
			      c->rank, r->cfg->master_addr, r->cfg->master_port,
			      why);
	return DDP_OK;
}

/*
 * Join, phase 3: our hello, with the data port, the host and a credential
 * made now for rank 0's nonce and this connection's binding.
 */
static enum ddp_status
join_send_hello(struct rdv *r, int fd, double wait, const struct rdv_proof *pr,
		const char *kind, const char *bind,
		const struct rdv_relay_entry *relay, uint32_t nrelay,
		int *retry)
{
	struct wk_mesh *c = r->mesh;
	struct rdv_hello *h;
	struct wk_buf b = {0};
	enum ddp_status st;

	h = calloc(1, sizeof(*h));
	if (!h) {
		*retry = 0;
		return wk_err(DDP_ERR_NOMEM, "rank %d: out of memory", c->rank);
	}
	h->rank = (uint32_t)c->rank;
	h->world = (uint32_t)c->size;
	h->data_port = (uint16_t)r->lport;
	ddp_fmt(h->host, sizeof(h->host), "%s", c->myhost);
	st = auth_encode(&r->auth, kind, c->rank, pr->nonce, bind, h->cred,
			 sizeof(h->cred));
	if (st) {
		*retry = 0;
	} else if (proto_encode_hello(&b, h) < 0 ||
		   (nrelay && proto_encode_relay(&b, nrelay, relay) < 0)) {
		*retry = 0;
		st = wk_err(DDP_ERR_NOMEM, "rank %d: hello too large", c->rank);
	} else if (ddp_net_send_all(fd, b.p, b.len, wait) < 0) {
		st = wk_err(DDP_ERR_RENDEZVOUS,
			    "rank %d: sending hello to %s:%d failed: %s",
			    c->rank, r->cfg->master_addr, r->cfg->master_port,
			    strerror(errno));
	}
	free(h);
	wk_buf_free(&b);
	return st;
}

/* Join, phase 4: the welcome, carrying the mesh token. */
static enum ddp_status
join_take_welcome(struct rdv *r, uint16_t type, const uint8_t *body,
		  uint32_t blen)
{
	uint8_t token[WK_TOKEN_LEN];
	char why[256];
	int again = r->relayed > 0 || r->joined_once;

	if (type == RDV_WELCOME &&
	    proto_parse_welcome(body, blen, token, why, sizeof(why)) == 0) {
		if (again && memcmp(token, r->token, WK_TOKEN_LEN) != 0) {
			explicit_bzero(token, sizeof(token));
			return wk_err(DDP_ERR_RENDEZVOUS,
				      "rank %d: rank 0 welcomed this node's "
				      "ranks with another job token",
				      r->mesh->rank);
		}
		memcpy(r->token, token, WK_TOKEN_LEN);
		explicit_bzero(token, sizeof(token));
		return DDP_OK;
	}
	if (type != RDV_WELCOME)
		ddp_fmt(why, sizeof(why), "message type %u", type);
	return wk_err(DDP_ERR_RENDEZVOUS,
		      "rank %d: rank 0 sent %s instead of a welcome",
		      r->mesh->rank, why);
}

/*
 * One attempt to join rank 0 over the connected fd: open, rank 0's proof,
 * our hello, the welcome (each phase waits at most REPLY_WAIT_S). Returns
 * DDP_OK, or an error with *retry set when another connection may succeed
 * (closed, silent, not rank 0) and clear when not (refused by rank 0
 * after its proof, no munge). Every error names this rank: it ends in
 * ddp_last_error().
 */
static enum ddp_status
join_once(struct rdv *r, int fd, double deadline,
	  const struct rdv_relay_entry *relay, uint32_t nrelay, int *retry)
{
	struct rdv_proof *pr = NULL;
	char myaddr[WK_ADDR_LEN + 8], bind[WK_ADDR_LEN + 48];
	uint8_t *body = NULL, nonce[RDV_NONCE_LEN];
	enum ddp_status st;
	uint16_t type = 0;
	uint32_t blen = 0;
	double wait;

	*retry = 1;
	wait = wk_now() + REPLY_WAIT_S < deadline ? wk_now() + REPLY_WAIT_S
						  : deadline;
	rank_addr(fd, 1, myaddr, sizeof(myaddr));
	st = join_send_open(r, fd, wait, nrelay, nonce, retry);
	if (!st && proto_conn_binding(bind, sizeof(bind), myaddr, nonce) < 0) {
		*retry = 0;
		st = wk_err(DDP_ERR_INVALID, "rank %d: address %s too long",
			    r->mesh->rank, myaddr);
	}
	if (!st)
		st = join_recv(r, fd, wait, "proof", 0, &type, &body, &blen,
			       retry);
	if (!st)
		st = join_check_proof(r, type, body, blen, bind, &pr, retry);
	if (!st)
		st = join_send_hello(r, fd, wait, pr, "hello", bind, relay,
				     nrelay, retry);
	free(body);
	body = NULL;
	if (!st)
		st = join_recv(r, fd, wait, "welcome", 1, &type, &body, &blen,
			       retry);
	if (!st)
		st = join_take_welcome(r, type, body, blen);
	if (!st)
		*retry = 0;
	free(body);
	free(pr);
	return st;
}

/*
 * Connects to rank 0 and joins, connecting again (with back-off) while
 * what answers is not rank 0 or drops the connection, until deadline; a
 * leader relays its held members (relay, nrelay) in the same session.
 * *out: the joined connection for a child of rank 0 that is no leader
 * (the roster comes on it), else -1 (closed: the roster comes down the
 * tree).
 */
static enum ddp_status
join_master(struct rdv *r, double deadline, const struct rdv_relay_entry *relay,
	    uint32_t nrelay, int *out)
{
	struct wk_mesh *c = r->mesh;
	const struct ddp_config *cfg = r->cfg;
	enum ddp_status st, last = DDP_OK;
	char why[512], lasterr[WK_ERR_LEN];
	double delay = 0.05;
	int fd = -1, retry, attempts = 0;

	lasterr[0] = '\0';
	for (;;) {
		fd = ddp_net_connect_retry(cfg->master_addr, cfg->master_port,
					   deadline, why, sizeof(why));
		if (fd < 0 && ddp_net_out_of_resources(errno))
			return resource_error(r, errno, "connecting to rank 0");
		if (fd < 0 && last)
			return wk_err(last, "%s (until the timeout, %g s)",
				      lasterr, c->timeout_s);
		if (fd < 0)
			return wk_err(
				DDP_ERR_RENDEZVOUS,
				"rank %d could not reach rank 0 at %s:%d "
				"(MASTER_ADDR:MASTER_PORT) within %g s: %s. "
				"Check that rank 0 of this job step is "
				"running, that all ranks got the same "
				"MASTER_ADDR and MASTER_PORT (srun --ddp: "
				"the same port_key on every node), and that "
				"the firewall between the job's nodes lets TCP "
				"port %d through (the slurm-ddp prolog opens "
				"it per job)",
				c->rank, cfg->master_addr, cfg->master_port,
				c->timeout_s, why, cfg->master_port);
		attempts++;
		st = join_once(r, fd, deadline, relay, nrelay, &retry);
		if (!st) {
			if (attempts > 1)
				wk_log(0, "rank %d joined rank 0 at attempt %d",
				       c->rank, attempts);
			if (c->rank > RDV_FANOUT || r->leader)
				ddp_net_close(&fd);
			*out = fd;
			return DDP_OK;
		}
		ddp_net_close(&fd);
		if (!retry)
			return st;
		/* The first failure is worth a line: a squatter, or a
		 * rank 0 that dropped us under a flood. */
		wk_log(attempts == 1 ? 0 : 3, "%s; connecting again",
		       wk_errbuf());
		last = st;
		ddp_fmt(lasterr, sizeof(lasterr), "%s", wk_errbuf());
		if (ddp_net_back_off(&delay, deadline) < 0)
			return wk_err(last, "%s (until the timeout, %g s)",
				      lasterr, c->timeout_s);
	}
}

/*
 * A leader: its held members relayed to rank 0 in one session (its own
 * join the first time), then welcomed with the token rank 0 gave it.
 */
static enum ddp_status
leader_flush(struct rdv *r, double deadline)
{
	struct rdv_relay_entry *e;
	enum ddp_status st;
	int i, n = 0, fd = -1;

	e = calloc((size_t)r->npend + 1, sizeof(*e));
	if (!e)
		return wk_err(DDP_ERR_NOMEM, "rank %d: out of memory",
			      r->mesh->rank);
	for (i = 0; i < r->npend; i++) {
		if (r->pend[i].kind != PK_MEMBER || r->pend[i].stage != 2)
			continue;
		e[n].rank = r->pend[i].rank;
		e[n].data_port = r->pend[i].data_port;
		n++;
	}
	st = join_master(r, deadline, e, (uint32_t)n, &fd);
	ddp_net_close(&fd);
	r->batch_end = 0;
	if (!st) {
		r->joined_once = 1;
		for (i = r->npend - 1; i >= 0; i--) {
			if (r->pend[i].kind != PK_MEMBER ||
			    r->pend[i].stage != 2)
				continue;
			r->joined[r->pend[i].rank] = 1;
			r->relayed++;
			if (send_welcome(r, i) == 0)
				pend_drop(r, i, NULL, 0, 0);
		}
		wk_log(3, "rank %d: relayed %d ranks of node %s (%d in all)",
		       r->mesh->rank, n, r->mesh->myhost, r->relayed);
	}
	free(e);
	return st;
}

/* A leader that fails tells the members it holds why (they are the
 * job's: their credentials verified). */
static void
refuse_held(struct rdv *r, const char *why)
{
	struct wk_buf b = {0};
	int i;

	if (proto_encode_text(&b, RDV_REFUSE, why) == 0)
		for (i = 0; i < r->npend; i++)
			if (r->pend[i].kind == PK_MEMBER &&
			    r->pend[i].stage == 2)
				(void)ddp_net_send_all(r->pend[i].fd, b.p,
						       b.len, wk_now() + 0.5);
	wk_buf_free(&b);
}

/* Connects to the node's join socket until until; fd, or -1 (nobody
 * listens there, or too many open files: then errno). */
static int
dial_node(struct rdv *r, double until)
{
	double delay = 0.02;
	int fd;

	for (;;) {
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -1;
		if (connect(fd, (struct sockaddr *)&r->node_sa,
			    r->node_salen) == 0)
			return fd;
		close(fd);
		if ((errno != ECONNREFUSED && errno != ENOENT &&
		     errno != EAGAIN) ||
		    ddp_net_back_off(&delay, until) < 0)
			return -1;
	}
}

/*
 * A member's join through its node's leader, on the node's join socket:
 * the same open, proof, hello and welcome as with rank 0, the leader's
 * proof first. *joined is set when the welcome came. DDP_OK with
 * *joined clear means "join rank 0 directly" (no leader answered within
 * LEADER_WAIT_S, or what answers is another user's or did not prove it
 * is this node's leader: logged); an error means the leader took this
 * rank's join and then failed (died, refused, timed out): it names the
 * leader.
 */
static enum ddp_status
join_leader(struct rdv *r, double deadline, int *joined)
{
	struct wk_mesh *c = r->mesh;
	struct rdv_proof *pr = NULL;
	struct ucred uc;
	socklen_t ul = sizeof(uc);
	uint8_t *body = NULL, nonce[RDV_NONCE_LEN];
	char bind[WK_ADDR_LEN + 48], why[1200], text[1024];
	enum ddp_status st = DDP_OK;
	uint16_t type = 0;
	uint32_t blen = 0;
	int fd, other, retry, leader = -1;
	double wait;

	*joined = 0;
	wait = wk_now() + LEADER_WAIT_S < deadline ? wk_now() + LEADER_WAIT_S
						   : deadline;
	fd = dial_node(r, wait);
	if (fd < 0 && ddp_net_out_of_resources(errno))
		return resource_error(r, errno,
				      "connecting to its node leader");
	if (fd < 0) {
		wk_log(0,
		       "rank %d: no node leader (LOCAL_RANK 0) answered on "
		       "%s's join socket within %g s; joining rank 0 directly",
		       c->rank, c->myhost, LEADER_WAIT_S);
		return DDP_OK;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &ul) < 0 ||
	    uc.uid != geteuid()) {
		ddp_fmt(why, sizeof(why),
			"it is held by uid %d, not this job's",
			ul == sizeof(uc) ? (int)uc.uid : -1);
		goto fallback;
	}
	st = join_send_open(r, fd, wait, 0, nonce, &retry);
	if (!st)
		st = recv_msg(fd, wait, "waiting for the node leader's proof",
			      &type, &body, &blen, &other);
	if (st) {
		ddp_fmt(why, sizeof(why), "%s", wk_errbuf());
		st = DDP_OK;
		goto fallback;
	}
	pr = malloc(sizeof(*pr));
	if (!pr) {
		st = wk_err(DDP_ERR_NOMEM, "rank %d: out of memory", c->rank);
		goto out;
	}
	ddp_fmt(why, sizeof(why), "message type %u first", type);
	if (type != RDV_PROOF ||
	    proto_parse_proof(body, blen, pr, why, sizeof(why)) < 0)
		goto fallback;
	leader = (int)pr->rank;
	if (leader < 0 || leader >= c->size || leader == c->rank) {
		ddp_fmt(why, sizeof(why), "it claims to be rank %d", leader);
		goto fallback;
	}
	if (member_binding(r, (int)getpid(), leader, nonce, bind,
			   sizeof(bind)) < 0 ||
	    auth_verify(&r->auth, pr->cred, "leader", c->rank, pr->nonce, bind,
			why, sizeof(why)) < 0)
		goto fallback;
	free(body);
	body = NULL;
	st = join_send_hello(r, fd, wait, pr, "member", bind, NULL, 0, &retry);
	if (!st)
		st = recv_msg(fd, deadline, "waiting for the welcome", &type,
			      &body, &blen, &other);
	if (st == DDP_ERR_TIMEOUT)
		st = wk_err(DDP_ERR_TIMEOUT,
			    "rank %d timed out after %g s waiting for its node "
			    "leader, rank %d on %s, to relay its join to rank "
			    "0: rank %d may be stuck, or cannot reach rank 0 "
			    "(its output says why)",
			    c->rank, c->timeout_s, leader, c->myhost, leader);
	else if (st)
		st = wk_err(DDP_ERR_PEER,
			    "rank %d: its node leader, rank %d on %s, closed "
			    "the join connection before rank 0 welcomed this "
			    "rank: rank %d died or was killed",
			    c->rank, leader, c->myhost, leader);
	else if (type == RDV_REFUSE) {
		refuse_text(body, blen, text, sizeof(text));
		st = wk_err(DDP_ERR_RENDEZVOUS,
			    "rank %d: its node leader, rank %d on %s, did "
			    "not relay its join: %s",
			    c->rank, leader, c->myhost, text);
	} else {
		st = join_take_welcome(r, type, body, blen);
		*joined = !st;
	}
	goto out;
fallback:
	wk_log(0,
	       "rank %d: the process on %s's join socket did not prove it is "
	       "this node's leader (%s); joining rank 0 directly",
	       c->rank, c->myhost, why);
out:
	free(body);
	free(pr);
	ddp_net_close(&fd);
	return st;
}

/*
 * Worker, phase 3: a connection to each lower rank this rank's
 * collectives use, on its data listener (rank 0's: MASTER_PORT), opened
 * with a peer hello carrying the token.
 */
static enum ddp_status
worker_connect_lower(struct rdv *r, double deadline)
{
	struct wk_mesh *c = r->mesh;
	const char *addr;
	struct wk_buf b = {0};
	enum ddp_status st = DDP_OK;
	int s, port;

	if (encode_push(r, &b) < 0) {
		st = wk_err(DDP_ERR_NOMEM, "out of memory");
		goto out;
	}
	for (s = 0; s < c->rank; s++) {
		if (!wanted(r, s))
			continue;
		addr = s ? r->ents[s].addr : r->cfg->master_addr;
		port = s ? r->ents[s].port : r->cfg->master_port;
		st = dial_peer(r, s, addr, port, &b, deadline, "connect to",
			       &c->peers[s].fd);
		if (st)
			goto out;
	}
out:
	if (b.p)
		explicit_bzero(b.p, b.cap);
	wk_buf_free(&b);
	return st;
}

/*
 * A child of rank 0 in the tree: the roster on its join connection fd,
 * which rank 0 sends once every rank has joined (so this waits until
 * deadline), or rank 0's REFUSE when the job will not start.
 */
static enum ddp_status
join_roster(struct rdv *r, int fd, double deadline)
{
	struct wk_mesh *c = r->mesh;
	enum ddp_status st;
	uint8_t *body = NULL;
	uint16_t type;
	uint32_t blen = 0;
	char why[512];
	int other;

	st = recv_msg(fd, deadline,
		      "waiting for rank 0's roster (rank 0 waits for every "
		      "rank to join)",
		      &type, &body, &blen, &other);
	if (st)
		goto out;
	if (type == RDV_REFUSE) {
		refuse_text(body, blen, r->gave_up, sizeof(r->gave_up));
		r->roster = -1;
	} else if (type != RDV_ROSTER ||
		   take_roster(r, body, blen, why, sizeof(why)) < 0) {
		st = wk_err(DDP_ERR_RENDEZVOUS,
			    "rank %d: bad roster from rank 0 (%s)", c->rank,
			    type == RDV_ROSTER ? why : "unexpected message");
	}
out:
	if (body)
		explicit_bzero(body, blen);
	free(body);
	return st;
}

/*
 * A rank other than 0: a data listener, the join (join_master), the
 * roster from its parent in the tree, handed on to its children, then
 * connections to the lower ranks its collectives use and from the higher
 * ones: the connects complete in the listeners' backlogs, so no cycle.
 */
static enum ddp_status
worker_side(struct rdv *r, double deadline)
{
	struct wk_mesh *c = r->mesh;
	enum ddp_status st;
	int fd = -1, joined = 0;

	r->lfd = ddp_net_listen(0, &r->lport);
	if (r->lfd < 0 && ddp_net_out_of_resources(errno))
		return resource_error(r, errno, "data listener");
	if (r->lfd < 0)
		return wk_err(DDP_ERR_SYSTEM, "rank %d: data listener: %s",
			      c->rank, strerror(errno));
	if (r->leader) {
		st = node_listen(r);
		if (!st && r->ufd >= 0)
			st = accept_ranks(r, c->rank + 1, WAIT_MEMBERS,
					  wk_now() + BATCH_WAIT_S);
		if (!st)
			st = leader_flush(r, deadline);
	} else if (r->local_size) {
		st = join_leader(r, deadline, &joined);
		if (!st && !joined)
			st = join_master(r, deadline, NULL, 0, &fd);
	} else {
		st = join_master(r, deadline, NULL, 0, &fd);
	}
	/* Rank 0 sends the roster once every rank has joined, so this
	 * waits up to rank 0's timeout and a little more. */
	if (!st)
		st = fd >= 0 ? join_roster(r, fd, deadline + 5)
			     : accept_ranks(r, c->rank + 1, WAIT_ROSTER,
					    deadline + 5);
	ddp_net_close(&fd);
	if (r->leader && (st || r->roster < 0))
		refuse_held(r, st ? wk_errbuf() : r->gave_up);
	ddp_net_close(&r->ufd);
	if (st)
		return st;
	if (!st && r->roster > 0) {
		deadline = wk_now() + c->timeout_s;
		st = keep_wanted(r);
		if (!st)
			st = push_roster(r, deadline);
		if (!st)
			st = worker_connect_lower(r, deadline);
		if (!st)
			st = accept_ranks(r, c->rank + 1, WAIT_PEERS, deadline);
	}
	if (!st && r->roster < 0)
		st = wk_err(DDP_ERR_RENDEZVOUS, "rank 0 gave up: %s",
			    r->gave_up);
	return st;
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
static void
self_addr_guess(struct rdv *r)
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
	double deadline = wk_now() + cfg->timeout_s;
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
	r->guard.proof = pend_proof;
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
		self_addr_guess(r);
	st = m->rank == 0 ? master_side(r, deadline) : worker_side(r, deadline);
	if (st)
		goto out;
	for (i = 0; i < m->size; i++) {
		if (i == m->rank || m->peers[i].fd < 0)
			continue;
		ddp_net_tune_data(m->peers[i].fd);
	}
out:
	while (r->npend > 0)
		pend_drop(r, r->npend - 1, NULL, 0, 0);
	ddp_net_close(&r->lfd);
	ddp_net_close(&r->ufd);
	auth_fini(&r->auth);
	explicit_bzero(r->token, sizeof(r->token));
	free(r->want);
	free(r->joined);
	free(r->ents);
	free(r);
	return st;
}
