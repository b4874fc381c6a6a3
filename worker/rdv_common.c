/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rendezvous' floor: what every one of its files uses and nothing of
 * theirs it calls. The messages, the refusals' log, the errors, and the
 * pending table's bookkeeping (closing, refusing, adopting a connection,
 * sending to one); the accept loop that fills the table is
 * rdv_accept.c's.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ddp_util.h"
#include "rdv_internal.h"

/* 1 when this rank connects rank: every rank until the roster names the
 * peers its collectives use. */
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
 * Closes pending connection i. reason (NULL: none) is logged; tell also
 * sends a REFUSE: REFUSAL_TEXT, or in another protocol version (version
 * not 0) the reason itself, which names only the two versions, so that a
 * rank of another release can read why. Evictions tell nothing: a
 * genuine rank connects again.
 */
void
rdv_pend_drop(struct rdv *r, int i, const char *reason, int tell,
	      uint16_t version)
{
	struct wk_buf b = {0};

	if (reason) {
		rdv_refuse_log(r, r->pend[i].from, reason);
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
	if (r->pend[i].deferred)
		r->ndeferred--;
	ddp_close(&r->pend[i].fd);
	free(r->pend[i].buf);
	r->pend[i] = r->pend[--r->npend];
	ddp_guard_remove(&r->guard, i);
}

void
rdv_pend_refuse(struct rdv *r, int i, const char *reason)
{
	rdv_pend_drop(r, i, reason, 1, 0);
}

/* Moves a verified connection to the mesh's peers[rank]. */
void
rdv_pend_adopt(struct rdv *r, int i, int rank)
{
	struct wk_peer *p = &r->mesh->peers[rank];

	p->fd = r->pend[i].fd;
	r->pend[i].fd = -1;
	ddp_fmt(p->addr, sizeof(p->addr), "%s", r->pend[i].addr);
	rdv_pend_drop(r, i, NULL, 0, 0);
}

/* Sends one message to pending connection i; 0 or -1 (dropped). */
int
rdv_pend_send(struct rdv *r, int i, struct wk_buf *b, const char *what)
{
	char why[256];

	if (!b->bad &&
	    ddp_net_send_all(r->pend[i].fd, b->p, b->len, ddp_now() + 2) == 0)
		return 0;
	ddp_fmt(why, sizeof(why), "sending the %s failed: %s", what,
		b->bad ? "out of memory" : strerror(errno));
	rdv_pend_drop(r, i, why, 0, 0);
	return -1;
}

/* The guard's measure of pending connection i (struct rdv): its stage,
 * so that one that has proved part of its hello is spared. */
int
rdv_pend_proof(void *arg, int i)
{
	const struct rdv *r = arg;

	return r->pend[i].stage;
}
