/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rendezvous on a node leader: its join socket, the members it
 * holds, and their relay to rank 0 inside its own join (rdv_internal.h).
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
 * A node leader's join socket, where its node's other ranks join. Taken
 * by another process: logged, and they join rank 0 directly (they find
 * the process there is not their leader).
 */
enum ddp_status
rdv_node_listen(struct rdv *r)
{
	struct wk_mesh *c = r->mesh;
	int fd;

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 && ddp_net_out_of_resources(errno))
		return rdv_resource_error(r, errno, "the node's join socket");
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
	ddp_close(&fd);
	return DDP_OK;
}

/*
 * A leader: its held members relayed to rank 0 in one session (its own
 * join the first time), then welcomed with the token rank 0 gave it.
 */
enum ddp_status
rdv_leader_flush(struct rdv *r, double deadline)
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
	/* Said before the relay, while the members are held: the moment a
	 * test of a leader that dies holding its members waits for. */
	wk_log(3, "rank %d: holds %d ranks of node %s, relaying them to rank 0",
	       r->mesh->rank, n, r->mesh->myhost);
	st = rdv_join_master(r, deadline, e, (uint32_t)n, &fd);
	ddp_close(&fd);
	r->batch_end = 0;
	if (!st) {
		r->joined_once = 1;
		for (i = r->npend - 1; i >= 0; i--) {
			if (r->pend[i].kind != PK_MEMBER ||
			    r->pend[i].stage != 2)
				continue;
			r->joined[r->pend[i].rank] = 1;
			r->relayed++;
			if (rdv_send_welcome(r, i) == 0)
				rdv_pend_drop(r, i, NULL, 0, 0);
		}
		wk_log(3, "rank %d: relayed %d ranks of node %s (%d in all)",
		       r->mesh->rank, n, r->mesh->myhost, r->relayed);
	}
	free(e);
	return st;
}

/* A leader that fails tells the members it holds why (they are the
 * job's: their credentials verified). */
void
rdv_refuse_held(struct rdv *r, const char *why)
{
	struct wk_buf b = {0};
	int i;

	if (proto_encode_text(&b, RDV_REFUSE, why) == 0)
		for (i = 0; i < r->npend; i++)
			if (r->pend[i].kind == PK_MEMBER &&
			    r->pend[i].stage == 2)
				(void)ddp_net_send_all(r->pend[i].fd, b.p,
						       b.len, ddp_now() + 0.5);
	wk_buf_free(&b);
}

/* Connects to the node's join socket until until; fd, or -1 (nobody
 * listens there, its backlog stayed full: errno EAGAIN, or too many open
 * files: then errno). Never blocks past until: a process that binds the
 * name first and never accepts fills its backlog, and a blocking
 * connect() then sleeps for good. */
static int
dial_node(struct rdv *r, double until)
{
	double delay = 0.02;
	int fd, e;

	for (;;) {
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
			    0);
		if (fd < 0)
			return -1;
		/* A Unix socket connects at once or fails: EAGAIN when the
		 * listener's backlog is full, never EINPROGRESS. */
		if (connect(fd, (struct sockaddr *)&r->node_sa,
			    r->node_salen) == 0)
			return fd;
		e = errno;
		close(fd);
		if ((e != ECONNREFUSED && e != ENOENT && e != EAGAIN) ||
		    ddp_net_back_off(&delay, until) < 0) {
			errno = e;
			return -1;
		}
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
enum ddp_status
rdv_join_leader(struct rdv *r, double deadline, int *joined)
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
	wait = ddp_now() + LEADER_WAIT_S < deadline ? ddp_now() + LEADER_WAIT_S
						    : deadline;
	fd = dial_node(r, wait);
	if (fd < 0 && ddp_net_out_of_resources(errno))
		return rdv_resource_error(r, errno,
					  "connecting to its node leader");
	if (fd < 0 && errno == EAGAIN) {
		wk_log(0,
		       "rank %d: the backlog of %s's join socket (@%s) stayed "
		       "full for %g s: a process that never accepts holds it "
		       "(another user's, or a stuck node leader); joining "
		       "rank 0 directly",
		       c->rank, c->myhost, r->node_sa.sun_path + 1,
		       LEADER_WAIT_S);
		return DDP_OK;
	}
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
	st = rdv_join_send_open(r, fd, wait, 0, nonce, &retry);
	if (!st)
		st = rdv_recv_msg(fd, wait,
				  "waiting for the node leader's proof", &type,
				  &body, &blen, &other);
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
	if (rdv_member_binding(r, (int)getpid(), leader, nonce, bind,
			       sizeof(bind)) < 0 ||
	    auth_verify(&r->auth, pr->cred, "leader", c->rank, pr->nonce, bind,
			why, sizeof(why)) < 0)
		goto fallback;
	free(body);
	body = NULL;
	st = rdv_join_send_hello(r, fd, wait, pr, "member", bind, NULL, 0,
				 &retry);
	if (!st)
		st = rdv_recv_msg(fd, deadline, "waiting for the welcome",
				  &type, &body, &blen, &other);
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
		rdv_refuse_text(body, blen, text, sizeof(text));
		st = wk_err(DDP_ERR_RENDEZVOUS,
			    "rank %d: its node leader, rank %d on %s, did "
			    "not relay its join: %s",
			    c->rank, leader, c->myhost, text);
	} else {
		st = rdv_join_take_welcome(r, type, body, blen);
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
	ddp_close(&fd);
	return st;
}
