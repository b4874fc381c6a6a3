/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A rank's join to rank 0: open, rank 0's proof, hello, welcome; it
 * connects again while what answers has not proven it is rank 0
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
	st = rdv_recv_msg(fd, wait, what, type, body, blen, &other);
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
	rdv_refuse_text(*body, *blen, text, sizeof(text));
	return wk_err(DDP_ERR_AUTH, "rank 0 at %s:%d refused rank %d: %s",
		      cfg->master_addr, cfg->master_port, r->mesh->rank, text);
}

/* Join, phase 1: the open, naming the rank this process claims to be,
 * with a fresh nonce of its own. */
enum ddp_status
rdv_join_send_open(struct rdv *r, int fd, double wait, uint32_t relay,
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
enum ddp_status
rdv_join_send_hello(struct rdv *r, int fd, double wait,
		    const struct rdv_proof *pr, const char *kind,
		    const char *bind, const struct rdv_relay_entry *relay,
		    uint32_t nrelay, int *retry)
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
enum ddp_status
rdv_join_take_welcome(struct rdv *r, uint16_t type, const uint8_t *body,
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
	wait = ddp_now() + REPLY_WAIT_S < deadline ? ddp_now() + REPLY_WAIT_S
						   : deadline;
	rdv_rank_addr(fd, 1, myaddr, sizeof(myaddr));
	st = rdv_join_send_open(r, fd, wait, nrelay, nonce, retry);
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
		st = rdv_join_send_hello(r, fd, wait, pr, "hello", bind, relay,
					 nrelay, retry);
	free(body);
	body = NULL;
	if (!st)
		st = join_recv(r, fd, wait, "welcome", 1, &type, &body, &blen,
			       retry);
	if (!st)
		st = rdv_join_take_welcome(r, type, body, blen);
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
enum ddp_status
rdv_join_master(struct rdv *r, double deadline,
		const struct rdv_relay_entry *relay, uint32_t nrelay, int *out)
{
	struct wk_mesh *c = r->mesh;
	const struct ddp_config *cfg = r->cfg;
	enum ddp_status st, last = DDP_OK;
	char why[512], lasterr[DDP_ERR_LEN];
	double delay = 0.05;
	int fd = -1, retry, attempts = 0;

	lasterr[0] = '\0';
	for (;;) {
		fd = ddp_net_connect_retry(cfg->master_addr, cfg->master_port,
					   deadline, why, sizeof(why));
		if (fd < 0 && ddp_net_out_of_resources(errno))
			return rdv_resource_error(r, errno,
						  "connecting to rank 0");
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
				ddp_close(&fd);
			*out = fd;
			return DDP_OK;
		}
		ddp_close(&fd);
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
