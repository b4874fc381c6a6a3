/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rendezvous' accept loop that every listener runs: rank 0 on
 * MASTER_PORT, a node leader on its join socket, every rank on its data
 * listener. It fills the pending table and hands each message to its
 * stage's handler (rdv_master.c, rdv_roster.c); the table's bookkeeping
 * is rdv_common.c's (rdv_internal.h draws the states).
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

#include "ddp_tools.h"
#include "ddp_util.h"
#include "rdv_internal.h"

/* ddp_set_join_progress's: set before ddp_comm_init, read by rank 0's
 * wait for the joins. */
static ddp_join_progress_fn *progress_fn;
static void *progress_arg;
static double progress_every;

void
ddp_set_join_progress(ddp_join_progress_fn *fn, void *arg, double interval_s)
{
	progress_fn = interval_s > 0 ? fn : NULL;
	progress_arg = arg;
	progress_every = interval_s;
}

/* Tells the join progress: who joined from where, NULL for the others.
 * Out of memory costs the line, not the wait. */
static void
progress_tell(struct rdv *r)
{
	struct wk_mesh *c = r->mesh;
	const char **host;
	int i;

	host = calloc((size_t)c->size, sizeof(*host));
	if (!host)
		return;
	for (i = 0; i < c->size; i++)
		if (r->joined[i])
			host[i] = i == c->rank ? c->myhost : c->peers[i].host;
	progress_fn(progress_arg, c->size, host);
	free(host);
}

/* The ranks in [from, size) that have not joined (joins) or connected. */
static const char *
missing_ranks(struct rdv *r, int from, int joins, char *buf, size_t size)
{
	int i, n = 0;

	buf[0] = '\0';
	for (i = from; i < r->mesh->size; i++) {
		if (joins ? r->joined[i]
			  : r->mesh->peers[i].fd >= 0 || !rdv_wanted(r, i))
			continue;
		if (n++ == 16) {
			ddp_fmt_cat(buf, size, ", ...");
			break;
		}
		if (ddp_fmt_cat(buf, size, "%s%d", buf[0] ? ", " : "", i) < 0)
			break;
	}
	return buf;
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
		rdv_pend_drop(r, i, why, 1, ver != RDV_VERSION ? ver : 0);
		return -1;
	}
	if (p->kind == PK_PEER)
		want = p->stage == 0   ? RDV_PEER
		       : p->stage == 4 ? RDV_PEER_MAC
				       : RDV_ROSTER;
	else
		want = p->stage == 0   ? RDV_OPEN
		       : p->stage == 1 ? RDV_HELLO
		       : p->stage == 3 ? RDV_RELAY
				       : 0;
	if (type != want &&
	    !(p->kind == PK_PEER && p->stage == 1 && type == RDV_REFUSE)) {
		ddp_fmt(why, sizeof(why),
			"unexpected message type %u (expected %u)", type, want);
		rdv_pend_refuse(r, i, why);
		return -1;
	}
	nb = realloc(p->buf, RDV_HDR_LEN + (size_t)blen);
	if (!nb) {
		rdv_pend_refuse(r, i, "out of memory");
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

	if (p->deferred) {
		/* Its open waits for rank 0's proof: a genuine rank sends
		 * nothing more until then. */
		n = recv(p->fd, why, 1, MSG_PEEK | MSG_DONTWAIT);
		if (n < 0 &&
		    (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			return;
		rdv_pend_drop(r, i,
			      n > 0 ? "sent more before rank 0's proof"
				    : "closed while its open waited for "
				      "rank 0's proof",
			      0, 0);
		return;
	}
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
			rdv_pend_drop(r, i, NULL, 0, 0);
			return;
		}
		if (n == 0 && p->stage == 2) {
			/* A child of rank 0 that joined and asked for the
			 * roster is gone: it died, which no wait mends. */
			r->lost = (int)p->rank;
			rdv_pend_drop(r, i, NULL, 0, 0);
			return;
		}
		if (n == 0) {
			rdv_pend_drop(
				r, i,
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
			rdv_pend_drop(r, i, why, 0, 0);
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
			rdv_pend_peer(r, i, body, blen);
		else if (p->kind == PK_PEER && stage == 4)
			rdv_pend_peer_mac(r, i, body, blen);
		else if (p->kind == PK_PEER)
			rdv_pend_roster(r, i, type, body, blen);
		else if (stage == 0)
			rdv_pend_open(r, i, body, blen);
		else if (stage == 1)
			rdv_pend_hello(r, i, body, blen);
		else
			rdv_pend_relay(r, i, body, blen);
		if (i >= r->npend || r->pend[i].fd != fd ||
		    r->pend[i].stage == stage)
			return;
	}
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
	rdv_pend_drop(r, v,
		      "evicted to make room for newer connections (too many "
		      "pending)",
		      0, 0);
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
			return rdv_resource_error(
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
				rdv_refuse_log(r, from, why);
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
			rdv_refuse_log(
				r, from,
				"not from this host (DDP_AUTH=none with a "
				"loopback MASTER_ADDR accepts only local "
				"ranks)");
			close(fd);
			continue;
		}
		pend_make_room(r, source);
		if (r->npend == r->guard.max) {
			rdv_refuse_log(r, from,
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
					      : ddp_now() + HELLO_GRACE_S;
		ddp_fmt(p->addr, sizeof(p->addr), "%s", addr);
		ddp_fmt(p->from, sizeof(p->from), "%s", from);
		r->npend++;
		if (!p->buf)
			rdv_pend_drop(r, r->npend - 1, "out of memory", 0, 0);
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
			      c->rank, c->timeout_s, rdv_tree_parent(c->rank),
			      r->lport, rdv_tree_parent(c->rank));
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
			rdv_pend_drop(r, i, "no hello in time", 0, 0);
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
	/* Opens held for their budget: answered as it comes back. */
	if (r->ndeferred > 0 && now + 1 / PROOF_GLOBAL_RATE < wake)
		wake = now + 1 / PROOF_GLOBAL_RATE;
	if (r->progress_at > 0 && r->progress_at < wake)
		wake = r->progress_at;
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
	rdv_pend_deferred(r);
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
enum ddp_status
rdv_accept_ranks(struct rdv *r, int from, enum wait_for what, double deadline)
{
	struct wk_mesh *c = r->mesh;
	enum ddp_status st = DDP_OK;
	int i, missing, held;
	double now;

	r->wait_end = deadline;
	r->what = what;
	r->progress_at = what == WAIT_JOINS && progress_fn
				 ? ddp_now() + progress_every
				 : 0;
	for (;;) {
		now = ddp_now();
		held = r->leader ? held_count(r) : 0;
		if (what == WAIT_MEMBERS &&
		    (members_complete(r, held) || now >= deadline))
			break;
		if (what == WAIT_ROSTER && held > 0 && r->roster == 0 &&
		    (now >= r->batch_end || members_complete(r, held))) {
			st = rdv_leader_flush(r, r->deadline_all);
			if (st)
				break;
			continue;
		}
		missing = what == WAIT_MEMBERS;
		for (i = from;
		     i < c->size && what != WAIT_ROSTER && what != WAIT_MEMBERS;
		     i++)
			missing += what == WAIT_PEERS ? c->peers[i].fd < 0 &&
								rdv_wanted(r, i)
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
		if (r->progress_at > 0 && now >= r->progress_at) {
			progress_tell(r);
			r->progress_at = now + progress_every;
		}
		pend_expire(r, now);
		rdv_refuse_flush(r, 0);
		st = accept_poll(r, now, deadline);
		if (st)
			break;
	}
	r->progress_at = 0;
	rdv_refuse_flush(r, 1);
	return st;
}
