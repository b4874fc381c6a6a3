/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Admitting the joins: rank 0's on MASTER_PORT (a rank's open and hello,
 * a node leader's relay); a leader admits its members with the same
 * code. Rank 0's course, its listener and the roster's start are rdv.c's
 * (rdv_internal.h).
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
int
rdv_member_binding(const struct rdv *r, int pid, int leader,
		   const uint8_t *nonce, char *out, size_t outlen)
{
	char addr[WK_ADDR_LEN + 48];

	if (ddp_fmt(addr, sizeof(addr), "unix:@%s pid=%d leader=%d",
		    r->node_tag, pid, leader) < 0)
		return -1;
	return proto_conn_binding(out, outlen, addr, nonce);
}

/*
 * An open: the rank it claims. Checked against this job (the cheap
 * checks) before rank 0 spends a credential on it, and held while the
 * budget of proofs of its source's prefix, or of all sources, is spent;
 * then rank 0's proof, bound to a fresh nonce and to the address the
 * connection comes from. A member on the node's join socket has no
 * budget: the leader took only its own user's processes there.
 */
void
rdv_pend_open(struct rdv *r, int i, const uint8_t *body, size_t blen)
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
	if (p->kind == PK_JOIN)
		p->ticket = ddp_budget_take(&r->budget, p->addr, ddp_now());
	if (p->kind == PK_JOIN && !p->ticket) {
		if (!p->deferred)
			r->ndeferred++;
		p->deferred = 1;
		goto out;
	}
	if (p->deferred)
		r->ndeferred--;
	p->deferred = 0;
	pr = calloc(1, sizeof(*pr));
	if (!pr || getrandom(p->nonce, RDV_NONCE_LEN, 0) != RDV_NONCE_LEN) {
		ddp_fmt(why, sizeof(why), "rank 0: %s",
			pr ? "getrandom failed" : "out of memory");
		goto refuse;
	}
	memcpy(pr->nonce, p->nonce, RDV_NONCE_LEN);
	pr->rank = (uint32_t)r->mesh->rank;
	if ((p->kind == PK_MEMBER
		     ? rdv_member_binding(r, p->pid, r->mesh->rank, o.nonce,
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
	if (rdv_pend_send(r, i, &b, "proof") < 0)
		goto out;
	p->stage = 1;
	p->rank = o.rank;
	p->flags = o.flags;
	p->relay = o.relay;
	p->have = 0;
	p->need = RDV_HDR_LEN;
	goto out;
refuse:
	rdv_pend_refuse(r, i, why);
out:
	free(pr);
	wk_buf_free(&b);
}

/*
 * The opens held for their source's budget, in table order, answered
 * while it lasts (rdv_pend_open). Slot i may be dropped meanwhile, and
 * the last one moved into it.
 */
void
rdv_pend_deferred(struct rdv *r)
{
	struct pend *p;
	int i, fd;

	for (i = 0; i < r->npend && r->ndeferred > 0; i++) {
		p = &r->pend[i];
		if (!p->deferred)
			continue;
		fd = p->fd;
		rdv_pend_open(r, i, p->buf + RDV_HDR_LEN,
			      p->need - RDV_HDR_LEN);
		if (i < r->npend && r->pend[i].fd != fd)
			i--;
	}
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
int
rdv_send_welcome(struct rdv *r, int i)
{
	struct wk_buf b = {0};
	int rc;

	if (proto_encode_welcome(&b, r->token) < 0)
		b.bad = 1;
	rc = rdv_pend_send(r, i, &b, "welcome");
	wk_buf_wipe(&b);
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
		rdv_pend_drop(r, i, NULL, 0, 0);
	}
}

/*
 * Rank 0: how the job's ranks reach it, the address its own node's
 * members (joined on the node's socket) get in the roster: the local end
 * of the first verified join from another host. A connection before its
 * credential verifies, or a local one, says nothing about that (another
 * user's connection to MASTER_PORT must not choose the address); until
 * then MASTER_ADDR's own address stands (rdv_self_addr_guess).
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
void
rdv_pend_hello(struct rdv *r, int i, const uint8_t *body, size_t blen)
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
	/* A rank of the job used the proof: the budget gets it back. */
	ddp_budget_give(&r->budget, p->ticket);
	p->ticket = 0;
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
			r->batch_end = ddp_now() + LATE_BATCH_S;
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
	if (rdv_send_welcome(r, i) == 0)
		pend_joined(r, i);
	goto out;
refuse:
	rdv_pend_refuse(r, i, why);
out:
	free(h);
}

/*
 * Rank 0: a leader's relay, in the session its hello just authenticated:
 * each member's rank and data port (the leader verified its credential
 * on the node's socket; the member's host and address are the
 * leader's). All of them or none.
 */
void
rdv_pend_relay(struct rdv *r, int i, const uint8_t *body, size_t blen)
{
	struct wk_mesh *c = r->mesh;
	struct pend *p = &r->pend[i];
	struct rdv_relay_entry *e;
	char why[512];
	uint32_t k, m;

	e = calloc(p->relay, sizeof(*e));
	if (!e) {
		rdv_pend_refuse(r, i, "out of memory");
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
	if (rdv_send_welcome(r, i) == 0)
		rdv_pend_drop(r, i, NULL, 0, 0);
	free(e);
	return;
refuse:
	rdv_pend_refuse(r, i, why);
	free(e);
}
