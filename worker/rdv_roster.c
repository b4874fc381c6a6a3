/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rendezvous' roster, down the tree of ranks (RDV_FANOUT children
 * each), then the peer hellos that connect the mesh (rdv_internal.h).
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

/* Rank r's parent in the tree the roster goes down. */
int
rdv_tree_parent(int r)
{
	return (r - 1) / RDV_FANOUT;
}

/* 1 when addr is an IPv4 loopback address (127/8). */
static int
loopback4(const char *addr)
{
	struct in_addr a;

	return inet_pton(AF_INET, addr, &a) == 1 &&
	       (ntohl(a.s_addr) >> 24) == 127;
}

/* 1 when addr is a loopback address (127/8 or ::1). */
static int
loopback(const char *addr)
{
	struct in6_addr a;

	return loopback4(addr) ||
	       (inet_pton(AF_INET6, addr, &a) == 1 && IN6_IS_ADDR_LOOPBACK(&a));
}

/*
 * 1 when a mesh connection from from fits a rank recorded at joined. A
 * rank of this host that dials an address of this host in 127/8 (such as
 * the loopback alias Debian gives the host's name, "127.0.1.1 host" in
 * /etc/hosts) connects from 127.0.0.1; and rank 0's own node's members,
 * which joined on the node's socket and are recorded at rank 0's own
 * address (r->self_addr, perhaps learned from another node's join), dial
 * MASTER_ADDR and so connect from loopback when it is such an alias.
 * Only this host's processes connect from loopback. A rank that joined
 * through another family (::1) must still come from that address.
 */
static int
joined_from(const struct rdv *r, const char *from, const char *joined)
{
	if (strcmp(from, joined) == 0)
		return 1;
	if (loopback4(from) && loopback4(joined))
		return 1;
	return r->mesh->rank == 0 && loopback(from) &&
	       strcmp(joined, r->self_addr) == 0;
}

/* 0 when rank from may open a data-port hello here now (a wanted higher
 * rank not connected yet, from the address it joined from), or -1 and
 * why. */
static int
mesh_claim_ok(struct rdv *r, const struct pend *p, int from, char *why,
	      size_t whylen)
{
	struct wk_mesh *c = r->mesh;

	if (from <= c->rank || from >= c->size || !rdv_wanted(r, from) ||
	    c->peers[from].fd >= 0) {
		ddp_fmt(why, whylen, "unexpected rank %d", from);
		return -1;
	}
	if (r->roster == 1 && !joined_from(r, p->addr, c->peers[from].addr)) {
		ddp_fmt(why, whylen,
			"rank %d connects from %s, but joined from %s", from,
			p->addr, c->peers[from].addr);
		return -1;
	}
	return 0;
}

/* 1 when rank from's data-port hello brings the roster (or rank 0's
 * word that it gave up): rank 0 connects to a data listener only for
 * that, the parent only with the roster. */
static int
brings_roster(const struct rdv *r, int from)
{
	const struct wk_mesh *c = r->mesh;

	return c->rank != 0 &&
	       (from == 0 ||
		(r->roster == 0 && from == rdv_tree_parent(c->rank)));
}

/*
 * A data listener's PEER: the rank the dialer claims and its nonce. A
 * claim that fits (the rank's parent or rank 0 with the roster to come,
 * or a higher rank this rank's collectives use, from the address it
 * joined from) gets this rank's CHALLENGE; nothing is admitted before
 * the dialer's MAC (rdv_pend_peer_mac).
 */
void
rdv_pend_peer(struct rdv *r, int i, const uint8_t *body, size_t blen)
{
	struct pend *p = &r->pend[i];
	struct rdv_peer_hello ph;
	struct wk_buf b = {0};
	char why[256];
	int from;

	if (proto_parse_peer(body, blen, &ph, why, sizeof(why)) < 0)
		goto refuse;
	from = (int)ph.rank;
	if (!brings_roster(r, from) &&
	    mesh_claim_ok(r, p, from, why, sizeof(why)) < 0)
		goto refuse;
	if (getrandom(p->nonce, RDV_NONCE_LEN, 0) != RDV_NONCE_LEN) {
		ddp_fmt(why, sizeof(why), "getrandom failed");
		goto refuse;
	}
	memcpy(p->peer_nonce, ph.nonce, RDV_NONCE_LEN);
	ph.rank = (uint32_t)r->mesh->rank;
	memcpy(ph.nonce, p->nonce, RDV_NONCE_LEN);
	if (proto_encode_challenge(&b, &ph) < 0)
		b.bad = 1;
	if (rdv_pend_send(r, i, &b, "challenge") < 0)
		goto out;
	p->stage = 4;
	p->rank = (uint32_t)from;
	p->have = 0;
	p->need = RDV_HDR_LEN;
	goto out;
refuse:
	rdv_pend_refuse(r, i, why);
out:
	wk_buf_free(&b);
}

/*
 * The dialer's PEER_MAC after this rank's challenge: it proves the
 * dialer holds the job's token. This rank proves it back; then the
 * roster comes on this connection, or it joins the mesh.
 */
void
rdv_pend_peer_mac(struct rdv *r, int i, const uint8_t *body, size_t blen)
{
	struct pend *p = &r->pend[i];
	uint8_t got[RDV_MAC_LEN], want[RDV_MAC_LEN], diff = 0;
	struct wk_buf b = {0};
	char why[256];
	int k, from = (int)p->rank;

	if (proto_parse_peer_mac(body, blen, got, why, sizeof(why)) < 0)
		goto refuse;
	proto_peer_mac(r->token, 0, p->rank, (uint32_t)r->mesh->rank,
		       p->peer_nonce, p->nonce, want);
	for (k = 0; k < RDV_MAC_LEN; k++)
		diff |= (uint8_t)(got[k] ^ want[k]);
	if (diff) {
		ddp_fmt(why, sizeof(why),
			"rank %d's proof of the job's token does not verify "
			"(another job, or not a rank of this one)",
			from);
		goto refuse;
	}
	if (!brings_roster(r, from) &&
	    mesh_claim_ok(r, p, from, why, sizeof(why)) < 0)
		goto refuse;
	proto_peer_mac(r->token, 1, p->rank, (uint32_t)r->mesh->rank,
		       p->peer_nonce, p->nonce, want);
	if (proto_encode_peer_mac(&b, want) < 0)
		b.bad = 1;
	if (rdv_pend_send(r, i, &b, "proof of the token") < 0)
		goto out;
	if (brings_roster(r, from)) {
		p->stage = 1;
		p->have = 0;
		p->need = RDV_HDR_LEN;
	} else {
		rdv_pend_adopt(r, i, from);
	}
	goto out;
refuse:
	rdv_pend_refuse(r, i, why);
out:
	explicit_bzero(want, sizeof(want));
	wk_buf_free(&b);
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
		    !joined_from(r, c->peers[s].addr, r->ents[s].addr)) {
			char said[160];

			ddp_fmt(said, sizeof(said),
				"rank %d connects from %s, but joined from %s",
				s, c->peers[s].addr, r->ents[s].addr);
			rdv_refuse_log(r, c->peers[s].addr, said);
			ddp_close(&c->peers[s].fd);
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
void
rdv_pend_roster(struct rdv *r, int i, uint16_t type, const uint8_t *body,
		size_t blen)
{
	char why[512];

	if (type == RDV_REFUSE) {
		rdv_refuse_text(body, (uint32_t)blen, r->gave_up,
				sizeof(r->gave_up));
		r->roster = -1;
	} else if (r->roster != 0) {
		rdv_pend_refuse(r, i, "a second roster");
		return;
	} else if (take_roster(r, body, blen, why, sizeof(why)) < 0) {
		rdv_pend_refuse(r, i, why);
		return;
	}
	rdv_pend_drop(r, i, NULL, 0, 0);
}

/* The roster, as rank 0 hands it to a child on its join connection. */
int
rdv_send_roster(struct rdv *r, int i)
{
	struct wk_buf b = {0};
	int rc;

	if (proto_encode_roster(&b, (uint32_t)r->mesh->size, r->token,
				r->ents) < 0)
		b.bad = 1;
	rc = rdv_pend_send(r, i, &b, "roster");
	wk_buf_wipe(&b);
	return rc;
}

/*
 * The dialer's side of the data-port hello on fd, to rank `to`: this
 * rank's PEER, `to`'s CHALLENGE, this rank's MAC, then `to`'s MAC,
 * checked. Until that MAC verified, whatever listens there may be anyone
 * (a process that took the port of a rank that died): it learns nothing
 * of the token. 0, or -1 with why (a REFUSE's text quoted).
 */
int
rdv_peer_hello(struct rdv *r, int fd, int to, double deadline, char *why,
	       size_t whylen)
{
	struct rdv_peer_hello mine, theirs;
	uint8_t mac[RDV_MAC_LEN], got[RDV_MAC_LEN], diff = 0, *body = NULL;
	struct wk_buf b = {0};
	uint16_t type;
	uint32_t blen = 0;
	char text[512];
	int k, other, rc = -1;

	mine.rank = (uint32_t)r->mesh->rank;
	if (getrandom(mine.nonce, RDV_NONCE_LEN, 0) != RDV_NONCE_LEN) {
		ddp_fmt(why, whylen, "getrandom failed");
		goto out;
	}
	if (proto_encode_peer(&b, &mine) < 0 ||
	    ddp_net_send_all(fd, b.p, b.len, deadline) < 0) {
		ddp_fmt(why, whylen, "sending the hello: %s",
			b.bad ? "out of memory" : strerror(errno));
		goto out;
	}
	if (rdv_recv_msg(fd, deadline, "waiting for the challenge", &type,
			 &body, &blen, &other) != DDP_OK)
		goto recv_failed;
	if (type != RDV_CHALLENGE ||
	    proto_parse_peer(body, blen, &theirs, text, sizeof(text)) < 0 ||
	    (int)theirs.rank != to)
		goto unexpected;
	proto_peer_mac(r->token, 0, mine.rank, theirs.rank, mine.nonce,
		       theirs.nonce, mac);
	b.len = 0;
	if (proto_encode_peer_mac(&b, mac) < 0 ||
	    ddp_net_send_all(fd, b.p, b.len, deadline) < 0) {
		ddp_fmt(why, whylen, "sending the proof: %s",
			b.bad ? "out of memory" : strerror(errno));
		goto out;
	}
	free(body);
	body = NULL;
	if (rdv_recv_msg(fd, deadline, "waiting for the proof", &type, &body,
			 &blen, &other) != DDP_OK)
		goto recv_failed;
	if (type != RDV_PEER_MAC ||
	    proto_parse_peer_mac(body, blen, got, text, sizeof(text)) < 0)
		goto unexpected;
	proto_peer_mac(r->token, 1, mine.rank, theirs.rank, mine.nonce,
		       theirs.nonce, mac);
	for (k = 0; k < RDV_MAC_LEN; k++)
		diff |= (uint8_t)(got[k] ^ mac[k]);
	if (diff) {
		ddp_fmt(why, whylen,
			"what listens there does not hold the job's token: "
			"not rank %d of this job",
			to);
		goto out;
	}
	rc = 0;
	goto out;
recv_failed:
	ddp_fmt(why, whylen, "%s", wk_errbuf());
	goto out;
unexpected:
	if (type == RDV_REFUSE) {
		rdv_refuse_text(body, blen, text, sizeof(text));
		ddp_fmt(why, whylen, "refused: %s", text);
	} else {
		ddp_fmt(why, whylen,
			"what listens there did not answer as rank %d of "
			"this job (message type %u)",
			to, type);
	}
out:
	explicit_bzero(mac, sizeof(mac));
	wk_buf_wipe(&b);
	free(body);
	return rc;
}

/*
 * A connection to rank `to`'s data listener at addr:port: the data-port
 * hello, then b (what follows it: the roster, or nothing); the fd goes
 * to *out. DDP_OK, or an error naming the rank, its host, what this rank
 * was doing (`doing` rank `to`) and what failed; a rank whose listener
 * answers but does not prove itself is named as gone.
 */
static enum ddp_status
dial_peer(struct rdv *r, int to, const char *addr, int port,
	  const struct wk_buf *b, double deadline, const char *doing, int *out)
{
	struct wk_mesh *c = r->mesh;
	char why[1024];
	int fd;

	fd = ddp_net_connect_retry(addr, port, deadline, why, sizeof(why));
	if (fd < 0 && ddp_net_out_of_resources(errno))
		return rdv_resource_error(r, errno, "connecting to a peer");
	if (fd < 0)
		return wk_err(DDP_ERR_RENDEZVOUS,
			      "rank %d could not %s rank %d at %s:%d (%s): "
			      "%s; the firewall between the job's nodes must "
			      "allow TCP between them (the slurm-ddp prolog "
			      "opens it per job)",
			      c->rank, doing, to, addr, port, c->peers[to].host,
			      why);
	if (rdv_peer_hello(r, fd, to, deadline, why, sizeof(why)) < 0) {
		ddp_close(&fd);
		return wk_err(DDP_ERR_PEER,
			      "rank %d could not %s rank %d at %s:%d (%s): "
			      "the process on rank %d's data port did not "
			      "prove it is rank %d (%s): rank %d died, or "
			      "another process took its port",
			      c->rank, doing, to, addr, port, c->peers[to].host,
			      to, to, why, to);
	}
	if (b->len && ddp_net_send_all(fd, b->p, b->len, deadline) < 0) {
		snprintf(why, sizeof(why), "%s", strerror(errno));
		ddp_close(&fd);
		return wk_err(DDP_ERR_PEER,
			      "rank %d could not %s rank %d at %s:%d (%s): "
			      "%s",
			      c->rank, doing, to, addr, port, c->peers[to].host,
			      why);
	}
	*out = fd;
	return DDP_OK;
}

/*
 * Hands the roster down: to this rank's children in the tree (ranks
 * RDV_FANOUT * rank + 1 ..), each of which hands it to its own, so that
 * no rank sends it more than RDV_FANOUT times.
 */
enum ddp_status
rdv_push_roster(struct rdv *r, double deadline)
{
	struct wk_mesh *c = r->mesh;
	struct wk_buf b = {0};
	enum ddp_status st = DDP_OK;
	long child;
	int k, fd = -1;

	if (proto_encode_roster(&b, (uint32_t)c->size, r->token, r->ents) < 0) {
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
		ddp_close(&fd);
	}
out:
	wk_buf_wipe(&b);
	return st;
}

/*
 * Worker, phase 3: a connection to each lower rank this rank's
 * collectives use, on its data listener (rank 0's: MASTER_PORT), opened
 * with the data-port hello.
 */
enum ddp_status
rdv_worker_connect_lower(struct rdv *r, double deadline)
{
	struct wk_mesh *c = r->mesh;
	const char *addr;
	struct wk_buf b = {0};
	enum ddp_status st = DDP_OK;
	int s, port;

	for (s = 0; s < c->rank; s++) {
		if (!rdv_wanted(r, s))
			continue;
		addr = s ? r->ents[s].addr : r->cfg->master_addr;
		port = s ? r->ents[s].port : r->cfg->master_port;
		st = dial_peer(r, s, addr, port, &b, deadline, "connect to",
			       &c->peers[s].fd);
		if (st)
			goto out;
	}
out:
	wk_buf_wipe(&b);
	return st;
}

/*
 * A child of rank 0 in the tree: the roster on its join connection fd,
 * which rank 0 sends once every rank has joined (so this waits until
 * deadline), or rank 0's REFUSE when the job will not start.
 */
enum ddp_status
rdv_join_roster(struct rdv *r, int fd, double deadline)
{
	struct wk_mesh *c = r->mesh;
	enum ddp_status st;
	uint8_t *body = NULL;
	uint16_t type;
	uint32_t blen = 0;
	char why[512];
	int other;

	st = rdv_recv_msg(fd, deadline,
			  "waiting for rank 0's roster (rank 0 waits for every "
			  "rank to join)",
			  &type, &body, &blen, &other);
	if (st)
		goto out;
	if (type == RDV_REFUSE) {
		rdv_refuse_text(body, blen, r->gave_up, sizeof(r->gave_up));
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
