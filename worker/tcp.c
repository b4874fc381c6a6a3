/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The TCP mesh's engine: frames moved without blocking, and bounded waits
 * that watch all peers, so a dead, aborting or stalled peer is named at
 * once (STALL notices and verdicts when a wait times out). The
 * collectives built on it are in tcp_coll.c (tcp_internal.h). Every frame
 * carries the collective's header.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cause.h"
#include "ddp_host.h"
#include "ddp_util.h"
#include "ddp_net.h"
#include "proto.h"
#include "reduce.h"
#include "status.h"
#include "tcp.h"
#include "tcp_internal.h"

static void
describe(const struct wk_frame *f, char *buf, size_t size)
{
	wk_frame_describe(f, buf, size);
}

/*
 * Blames rank r (on host) for this rank's failure in call, for why: the
 * naming line (cause.h) and the cause the mesh's ABORT frames carry. The
 * mesh's first cause stays; a rank never blames itself.
 */
static void
blame(struct wk_mesh *c, int r, const char *host, int why,
      const struct wk_frame *call)
{
	if (r == c->rank || c->cause.why != WK_WHY_NONE)
		return;
	c->cause.why = (uint8_t)why;
	c->cause.blamed = r;
	c->cause.coll = call->coll;
	c->cause.seq = call->seq;
	(void)ddp_fmt(c->cause.host, sizeof(c->cause.host), "%s", host);
	wk_cause_name(c->rank, r, host, wk_why_name(why));
}

static enum ddp_status
lost_peer(struct wk_mesh *c, int p, const struct wk_frame *f, const char *how)
{
	char d[160];

	describe(f, d, sizeof(d));
	if (c->peers[p].bye)
		return wk_err(DDP_ERR_MISMATCH,
			      "rank %d (%s) has already left (called "
			      "ddp_comm_destroy) while rank %d (%s) is in %s: "
			      "the ranks made different numbers of collective "
			      "calls",
			      p, c->peers[p].host, c->rank, c->myhost, d);
	blame(c, p, c->peers[p].host, WK_WHY_LOST, f);
	return wk_err(DDP_ERR_PEER,
		      "lost rank %d (%s) during %s on rank %d (%s): %s; the "
		      "process died or was killed",
		      p, c->peers[p].host, d, c->rank, c->myhost, how);
}

/* How long a hang survey's steps wait for the other ranks' notices. */
static double
grace(const struct wk_mesh *c)
{
	return c->timeout_s / 4 < 0.5 ? c->timeout_s / 4 : 0.5;
}

/* 1 when this rank knows rank a has entered call seq: a is this rank, or
 * a said so (its notice, its data of the call, a PRESENT notice). */
static int
known_in(const struct wk_mesh *c, int a, uint32_t seq)
{
	return a == c->rank || c->peers[a].in_seq >= seq ||
	       c->peers[a].present_seq >= seq || c->peers[a].data_seq >= seq;
}

int
tcp_hang_verdict(const struct wk_mesh *c, int waiting, int *out, int max)
{
	int i, n = 0;

	if (!c->cur.seq)
		return 0;
	for (i = 0; i < c->size; i++) {
		if (i == c->rank || c->peers[i].fd < 0 || c->peers[i].bye ||
		    (waiting >= 0 && i != waiting) ||
		    known_in(c, i, c->cur.seq))
			continue;
		if (n < max)
			out[n] = i;
		n++;
	}
	return n < max ? n : max;
}

int
tcp_hang_absent(const struct wk_mesh *c, int *out, int max)
{
	int i, n = 0;

	for (i = 0; i < c->size && n < max; i++)
		if (c->cur.seq && c->peers[i].absent_seq == c->cur.seq &&
		    !known_in(c, i, c->cur.seq))
			out[n++] = i;
	return n;
}

/* 1 when rank a said it is in a call before the one in progress. */
static int
in_earlier_call(const struct wk_mesh *c, int a)
{
	return c->peers[a].in_seq && c->peers[a].in_seq < c->cur.seq;
}

/*
 * The hang's error, once a verdict named ranks that have not entered the
 * call in progress: logged here, since every waiting rank must say it,
 * and returned. DDP_OK when no verdict named anyone. first >= 0: the
 * rank a peer's abort blamed, for why, named first and blamed, so that
 * every rank names the first cause; else the lowest rank named silent in
 * this call, or, when none is, the lowest still in an earlier call
 * (behind).
 */
static enum ddp_status
hang_error(struct wk_mesh *c, int first, int why)
{
	char d[160], who[768], still[32];
	int absent[8], n, i, j, a;

	n = tcp_hang_absent(c, absent, 8);
	if (!n)
		return DDP_OK;
	/* A rank silent in this call before one still in an earlier call:
	 * the waiter waits for someone, and may never name it (an abort
	 * can reach it before its own timeout), while the silent one is
	 * the likelier root. Stable, so the lowest comes first in each. */
	for (i = 1; i < n; i++)
		for (j = i; j > 0 && in_earlier_call(c, absent[j - 1]) &&
			    !in_earlier_call(c, absent[j]);
		     j--) {
			a = absent[j];
			absent[j] = absent[j - 1];
			absent[j - 1] = a;
		}
	for (i = 0; first >= 0 && i < n; i++)
		if (absent[i] == first) {
			for (j = i; j > 0; j--)
				absent[j] = absent[j - 1];
			absent[0] = first;
			break;
		}
	describe(&c->cur, d, sizeof(d));
	/* A rank still in an earlier call is itself waiting: "behind" lets
	 * srun follow it to the rank it names (common/failure.h, rule 2). */
	a = absent[0];
	if (a != first)
		why = in_earlier_call(c, a) ? WK_WHY_BEHIND : WK_WHY_HANG;
	blame(c, a, c->peers[a].host, why, &c->cur);
	who[0] = '\0';
	for (i = 0; i < n; i++) {
		a = absent[i];
		still[0] = '\0';
		if (in_earlier_call(c, a))
			(void)ddp_fmt(still, sizeof(still), ", still in #%u",
				      c->peers[a].in_seq);
		/* A cut list still names the first ranks. */
		(void)ddp_fmt_cat(who, sizeof(who), "%srank %d (%s, pid %d%s)",
				  i ? ", " : "", a, c->peers[a].host,
				  c->pids ? (int)c->pids[a] : 0, still);
	}
	/* Silence is all a survey sees of a rank that is stopped, outside
	 * the library or behind a cut link: the hint names each. */
	wk_err(DDP_ERR_TIMEOUT,
	       "hang: rank %d (%s, pid %d) is in %s, which %s %s not entered "
	       "(%s); the communicator is aborted (DDP_TIMEOUT=%g)",
	       c->rank, c->myhost, (int)getpid(), d, who,
	       n > 1 ? "have" : "has",
	       why == WK_WHY_BEHIND
		       ? "waiting in an earlier call: its own error names "
			 "the rank it waits for"
		       : "silent in this call: not calling (a skipped call, "
			 "a stuck data loader), stopped, or cut off by the "
			 "network?",
	       c->timeout_s);
	wk_log(0, "%s", wk_errbuf());
	return DDP_ERR_TIMEOUT;
}

/*
 * 1 when this rank does not take on the cause a: it blames this rank, or
 * says a rank has not entered a call this rank knows it has entered, or
 * it is a timeout's "unreachable", which says only what the sender could
 * not reach: the sender may be the one cut off (a cut link), and the
 * abort that reaches this rank shows the link to it works.
 */
static int
cause_wrong(const struct wk_mesh *c, const struct wk_abort *a)
{
	if (a->blamed == c->rank || a->why == WK_WHY_UNREACHABLE)
		return 1;
	return (a->why == WK_WHY_HANG || a->why == WK_WHY_BEHIND) && a->seq &&
	       known_in(c, a->blamed, a->seq);
}

/*
 * A peer sent ABORT (header in f): read its cause and reason, return the
 * error. The cause travels unchanged, so that every rank of the step
 * names the rank the first one blamed; when this rank knows that cause is
 * wrong, its own hang survey (if it has told) names the rank.
 */
static enum ddp_status
peer_aborted(struct wk_mesh *c, int p, const struct wk_frame *f)
{
	uint8_t body[WK_ABORT_MAX];
	struct wk_abort a;
	struct wk_frame call;
	char why[128];
	enum ddp_status st;

	if (f->len > sizeof(body) ||
	    ddp_net_recv_all(c->peers[p].fd, body, f->len, ddp_now() + 1.0) !=
		    0)
		return wk_err(DDP_ERR_PEER,
			      "rank %d (%s) aborted the job (reason not "
			      "received)",
			      p, c->peers[p].host);
	if (wk_abort_decode(body, f->len, &a, why, sizeof(why)) < 0)
		return wk_err(DDP_ERR_PEER,
			      "rank %d (%s) aborted the job (its abort does "
			      "not parse: %s)",
			      p, c->peers[p].host, why);
	if (a.why != WK_WHY_NONE && a.blamed < c->size && !cause_wrong(c, &a)) {
		/* A hang of the call in progress: this rank says it too,
		 * naming the abort's rank first. */
		if ((a.why == WK_WHY_HANG || a.why == WK_WHY_BEHIND) &&
		    c->cur.seq && a.seq == c->cur.seq) {
			c->peers[a.blamed].absent_seq = a.seq;
			st = hang_error(c, a.blamed, a.why);
			if (st)
				return st;
		}
		memset(&call, 0, sizeof(call));
		call.coll = a.coll;
		call.seq = a.seq;
		blame(c, a.blamed, a.host, a.why, &call);
	} else if (c->told) {
		st = hang_error(c, -1, WK_WHY_NONE);
		if (st)
			return st;
	}
	return wk_err(DDP_ERR_PEER, "rank %d (%s) aborted: %s", p,
		      c->peers[p].host, a.text);
}

/*
 * A send to peer p failed. When p failed first it sent an ABORT before
 * closing, and that frame is still queued on our side of the connection
 * even after the reset: report p's reason, which names the rank that
 * really died, rather than p as lost. Returns DDP_OK when none is queued.
 */
static enum ddp_status
queued_abort(struct wk_mesh *c, int p)
{
	uint8_t hdr[WK_FRAME_LEN];
	struct wk_frame f;

	if (recv(c->peers[p].fd, hdr, sizeof(hdr), MSG_PEEK | MSG_DONTWAIT) !=
		    (ssize_t)sizeof(hdr) ||
	    wk_frame_decode(hdr, &f) < 0 || f.type != WK_F_ABORT ||
	    recv(c->peers[p].fd, hdr, sizeof(hdr), MSG_DONTWAIT) !=
		    (ssize_t)sizeof(hdr))
		return DDP_OK;
	return peer_aborted(c, p, &f);
}

/*
 * The error for a frame header from peer p that does not decode. A
 * rendezvous REFUSE there is p's data listener refusing this rank's mesh
 * connection after the rendezvous (p's log names the reason); anything
 * else is a protocol error.
 */
static enum ddp_status
bad_frame(struct wk_mesh *c, int p, const uint8_t *hdr)
{
	uint16_t type;
	uint32_t blen;
	char why[128];

	if (proto_parse_header(hdr, RDV_HDR_LEN, &type, &blen, why,
			       sizeof(why)) == 0 &&
	    type == RDV_REFUSE)
		return wk_err(DDP_ERR_PEER,
			      "rank %d (%s) refused the mesh connection of "
			      "rank %d: rank %d's log names the reason (the "
			      "address this rank connects from, or another "
			      "job's token)",
			      p, c->peers[p].host, c->rank, p);
	return wk_err(DDP_ERR_PEER,
		      "protocol error: rank %d (%s) sent a malformed frame "
		      "header to rank %d",
		      p, c->peers[p].host, c->rank);
}

/* Compares a received frame header with what this rank expects. */
static enum ddp_status
check_frame(struct wk_mesh *c, int p, const struct wk_frame *want,
	    const uint8_t *hdr, struct wk_frame *got)
{
	char dw[160], dg[160];

	if (wk_frame_decode(hdr, got) < 0)
		return bad_frame(c, p, hdr);
	if (got->type == WK_F_ABORT)
		return peer_aborted(c, p, got);
	if (got->type == WK_F_BYE) {
		c->peers[p].bye = 1;
		return lost_peer(c, p, want, "");
	}
	if (got->seq != want->seq || got->coll != want->coll ||
	    got->dtype != want->dtype || got->op != want->op ||
	    got->count != want->count || got->aux != want->aux) {
		describe(want, dw, sizeof(dw));
		describe(got, dg, sizeof(dg));
		return wk_err(DDP_ERR_MISMATCH,
			      "mismatched collectives: rank %d (%s) called %s "
			      "but rank %d (%s) called %s",
			      c->rank, c->myhost, dw, p, c->peers[p].host, dg);
	}
	if (got->unit != want->unit || got->len != want->len) {
		describe(want, dw, sizeof(dw));
		return wk_err(DDP_ERR_MISMATCH,
			      "protocol error in %s: rank %d (%s) sent unit "
			      "%u of %u bytes, rank %d expected unit %u of %u "
			      "bytes",
			      dw, p, c->peers[p].host, got->unit, got->len,
			      c->rank, want->unit, want->len);
	}
	/* Its data of the call: it has entered it, whatever a verdict
	 * made before its notice came says. */
	c->peers[p].data_seq = got->seq;
	return DDP_OK;
}

/* One notice to every peer that can take one but `skip`. */
static void
send_notice(struct wk_mesh *c, const struct wk_frame *f, int skip)
{
	uint8_t hdr[WK_FRAME_LEN];
	int k, i;

	if (c->aborted)
		return;
	wk_frame_encode(hdr, f);
	for (k = 0; k < c->nlinked; k++) {
		i = c->linked[k];
		if (i != skip && c->peers[i].fd >= 0 && !c->peers[i].bye &&
		    !c->peers[i].send_mid &&
		    send(c->peers[i].fd, hdr, sizeof(hdr),
			 MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof(hdr))
			c->peers[i].send_mid = 1; /* framing lost: no more */
	}
}

/* A STALL notice about the call in progress. */
static void
stall_frame(const struct wk_mesh *c, struct wk_frame *f, int rank,
	    uint32_t flags)
{
	memset(f, 0, sizeof(*f));
	f->type = WK_F_STALL;
	f->coll = c->cur.coll;
	f->seq = c->cur.seq;
	f->unit = flags;
	f->aux = rank >= 0 ? (uint32_t)rank : UINT32_MAX;
}

/*
 * Tells every peer the call this rank is in and whom it waits for
 * (-1: it does not know), which asks the ranks inside a call to say the
 * same; the verdict is due a grace later.
 */
static void
send_stall(struct wk_mesh *c, int waiting)
{
	struct wk_frame f;

	stall_frame(c, &f, waiting, 0);
	send_notice(c, &f, -1);
	wk_log(3, "rank %d: in call #%u, waiting for rank %d: asked", c->rank,
	       c->cur.seq, waiting);
	if (!c->in_grace) {
		c->in_grace = 1;
		c->grace_end = ddp_now() + grace(c);
	}
}

/* Sends this rank's verdict: the ranks it finds have not entered. */
static void
tell(struct wk_mesh *c)
{
	struct wk_frame f;
	int absent[64], n, i;

	c->told = 1;
	n = tcp_hang_verdict(c, c->waiting, absent, 64);
	wk_log(3, "rank %d: call #%u: verdict names %d ranks", c->rank,
	       c->cur.seq, n);
	for (i = 0; i < n; i++) {
		c->peers[absent[i]].absent_seq = c->cur.seq;
		stall_frame(c, &f, absent[i], WK_STALL_ABSENT);
		send_notice(c, &f, -1);
	}
}

/*
 * Says rank a has entered call seq (a PRESENT notice), to every peer but
 * skip, once per rank and call: it overrules a verdict naming a.
 */
static void
send_present(struct wk_mesh *c, int a, uint32_t seq, int skip)
{
	struct wk_frame f;

	if (c->peers[a].present_seq >= seq)
		return;
	c->peers[a].present_seq = seq;
	stall_frame(c, &f, a, WK_STALL_PRESENT);
	f.seq = seq;
	send_notice(c, &f, skip);
}

/* Records a verdict (WK_STALL_ABSENT) or its correction (WK_STALL_PRESENT)
 * about rank a in call f->seq, from peer p. */
static void
note_verdict(struct wk_mesh *c, int p, const struct wk_frame *f, int a)
{
	if (a < 0 || !f->seq)
		return;
	if (f->unit & WK_STALL_PRESENT) {
		/* Passed on once, as the verdict it overrules was. */
		if (a != c->rank && c->peers[a].present_seq < f->seq)
			send_present(c, a, f->seq, p);
		return;
	}
	/* A verdict this rank knows is wrong: the rank is this one, inside
	 * that call, or one whose notice or data of the call came. */
	if ((a == c->rank && c->cur.seq == f->seq) ||
	    (a != c->rank && known_in(c, a, f->seq))) {
		send_present(c, a, f->seq, -1);
		return;
	}
	/* About this rank and a call it has not entered yet (it read the
	 * verdict in the call before): answered once it is in it (survey). */
	if (a == c->rank && f->seq > c->cur.seq)
		c->peers[a].absent_seq = f->seq;
	/* Each verdict is passed on once: it must reach the ranks that are
	 * not connected to the silent rank. */
	if (a != c->rank && c->peers[a].absent_seq != f->seq) {
		c->peers[a].absent_seq = f->seq;
		send_notice(c, f, p);
	}
}

/* Records a STALL notice in hdr; returns 1 when it was one. */
static int
note_stall(struct wk_mesh *c, int p, const uint8_t *hdr)
{
	struct wk_frame f;

	if (wk_frame_decode(hdr, &f) < 0 || f.type != WK_F_STALL)
		return 0;
	wk_log(3, "rank %d in call #%u: rank %d says %s %d in call #%u",
	       c->rank, c->cur.seq, p,
	       f.unit & WK_STALL_PRESENT  ? "present:"
	       : f.unit & WK_STALL_ABSENT ? "absent:"
					  : "waiting for",
	       (int)f.aux, f.seq);
	if (f.unit & (WK_STALL_ABSENT | WK_STALL_PRESENT)) {
		note_verdict(c, p, &f,
			     f.aux < (uint32_t)c->size ? (int)f.aux : -1);
		return 1;
	}
	c->peers[p].in_seq = f.seq;
	if (f.seq == c->cur.seq)
		c->peers[p].waits_for =
			f.aux < (uint32_t)c->size ? (int)f.aux : -1;
	/* Inside a call, answer the first notice of this call or a later
	 * one: its sender learns that this rank has entered. */
	if (c->cur.seq && f.seq >= c->cur.seq && !c->in_grace)
		send_stall(c, c->waiting);
	return 1;
}

/*
 * The hang survey's clock for a wait that ends at deadline (tcp.h): ask
 * 2 graces before it, tell a grace after asking, and a grace later fail
 * if a verdict named anyone; at the deadline, whatever is left at once
 * (a late wake-up must not skip the verdict). DDP_OK with *wake, the
 * next time to look.
 */
static enum ddp_status
survey(struct wk_mesh *c, double deadline, double *wake)
{
	double g = grace(c), now = ddp_now();
	enum ddp_status st;

	if (c->cur.seq && c->peers[c->rank].absent_seq == c->cur.seq)
		send_present(c, c->rank, c->cur.seq, -1);
	if (!c->in_grace && now >= deadline - 2 * g)
		send_stall(c, c->waiting);
	if (c->in_grace && !c->told && (now >= c->grace_end || now >= deadline))
		tell(c);
	if (c->told && (now >= c->grace_end + g || now >= deadline)) {
		st = hang_error(c, -1, WK_WHY_NONE);
		if (st)
			return st;
	}
	*wake = !c->in_grace ? deadline - 2 * g
		: !c->told   ? c->grace_end
			     : c->grace_end + g;
	if (*wake <= now)
		*wake = deadline;
	return DDP_OK;
}

/*
 * The timeout error. Ranks that time out tell the others whom they wait
 * for (STALL notices), so the chain leads to the rank that is really
 * stuck, and every rank names that one rather than its neighbour.
 */
static enum ddp_status
timeout_error(struct wk_mesh *c, int p, short events,
	      const struct wk_frame *cur)
{
	char d[160];
	int q = p, steps = 0;

	describe(cur, d, sizeof(d));
	while (c->peers[q].waits_for >= 0 && c->peers[q].waits_for != c->rank &&
	       steps++ < c->size)
		q = c->peers[q].waits_for;
	blame(c, q, c->peers[q].host, WK_WHY_UNREACHABLE, cur);
	if (q != p)
		return wk_err(DDP_ERR_TIMEOUT,
			      "rank %d (%s) timed out after %g s in %s waiting "
			      "for rank %d (%s), which itself waits for rank "
			      "%d (%s): rank %d may be hung, stopped or far "
			      "behind (DDP_TIMEOUT=%g)",
			      c->rank, c->myhost, c->timeout_s, d, p,
			      c->peers[p].host, q, c->peers[q].host, q,
			      c->timeout_s);
	return wk_err(DDP_ERR_TIMEOUT,
		      "rank %d (%s) timed out after %g s in %s waiting for "
		      "rank %d (%s) to %s; that rank may be hung, stopped or "
		      "far behind (DDP_TIMEOUT=%g)",
		      c->rank, c->myhost, c->timeout_s, d, p, c->peers[p].host,
		      (events & POLLIN) ? "send data" : "accept data",
		      c->timeout_s);
}

void
tcp_xop_init(struct tcp_xop *x, int peer, const struct wk_frame *tmpl,
	     uint32_t unit, void *buf, size_t len)
{
	x->peer = peer;
	x->f = *tmpl;
	x->f.type = WK_F_DATA;
	x->f.unit = unit;
	x->f.len = (uint32_t)len;
	x->buf = buf;
	x->len = len;
	x->done = 0;
	wk_frame_encode(x->hdr, &x->f);
}

/* Moves bytes of a send: 1 done, 0 would block, <0 error (status). */
int
tcp_send_progress(struct wk_mesh *c, struct tcp_xop *x, enum ddp_status *st)
{
	struct wk_peer *p = &c->peers[x->peer];
	size_t total = WK_FRAME_LEN + x->len;
	struct msghdr mh;
	struct iovec iov[2];
	ssize_t n;
	char why[128];

	while (x->done < total) {
		memset(&mh, 0, sizeof(mh));
		if (x->done < WK_FRAME_LEN) {
			iov[0].iov_base = x->hdr + x->done;
			iov[0].iov_len = WK_FRAME_LEN - x->done;
			iov[1].iov_base = x->buf;
			iov[1].iov_len = x->len;
			mh.msg_iovlen = x->len ? 2 : 1;
		} else {
			iov[0].iov_base =
				(uint8_t *)x->buf + (x->done - WK_FRAME_LEN);
			iov[0].iov_len = total - x->done;
			mh.msg_iovlen = 1;
		}
		mh.msg_iov = iov;
		n = sendmsg(p->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			x->done += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			p->send_mid = x->done > 0;
			return 0;
		}
		ddp_fmt(why, sizeof(why), "send failed: %s",
			n < 0 ? strerror(errno) : "no progress");
		*st = queued_abort(c, x->peer);
		if (!*st)
			*st = lost_peer(c, x->peer, &x->f, why);
		return -1;
	}
	p->send_mid = 0;
	return 1;
}

/* Moves bytes of a receive: 1 done, 0 would block, <0 error. */
int
tcp_recv_progress(struct wk_mesh *c, struct tcp_xop *x, enum ddp_status *st)
{
	struct wk_peer *p = &c->peers[x->peer];
	size_t total = WK_FRAME_LEN + x->len;
	struct wk_frame got;
	ssize_t n;
	char why[128];

	while (x->done < total) {
		if (x->done < WK_FRAME_LEN)
			n = recv(p->fd, x->hdr + x->done,
				 WK_FRAME_LEN - x->done, MSG_DONTWAIT);
		else
			n = recv(p->fd,
				 (uint8_t *)x->buf + (x->done - WK_FRAME_LEN),
				 total - x->done, MSG_DONTWAIT);
		if (n > 0) {
			x->done += (size_t)n;
			if (x->done == WK_FRAME_LEN &&
			    note_stall(c, x->peer, x->hdr)) {
				/* A notice, not the frame we wait for. */
				x->done = 0;
				continue;
			}
			if (x->done == WK_FRAME_LEN) {
				*st = check_frame(c, x->peer, &x->f, x->hdr,
						  &got);
				if (*st)
					return -1;
			}
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		ddp_fmt(why, sizeof(why), "%s",
			n == 0 ? "its connection closed without a goodbye"
			       : strerror(errno));
		*st = lost_peer(c, x->peer, &x->f, why);
		return -1;
	}
	return 1;
}

/*
 * Something happened on the connection of a peer this step does not use:
 * a goodbye, an abort, a death, or early data of a later step.
 */
static enum ddp_status
idle_event(struct wk_mesh *c, int p, const struct wk_frame *cur)
{
	char dw[160], dg[160];
	uint8_t hdr[WK_FRAME_LEN];
	struct wk_frame f;
	ssize_t n;

	n = recv(c->peers[p].fd, hdr, sizeof(hdr), MSG_PEEK | MSG_DONTWAIT);
	if (n < 0 &&
	    (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return DDP_OK;
	if (n == 0)
		return lost_peer(c, p, cur,
				 "its connection closed without a goodbye");
	if (n < 0)
		return lost_peer(c, p, cur, strerror(errno));
	if (n < WK_FRAME_LEN) {
		c->peers[p].early = 1;
		return DDP_OK;
	}
	if (wk_frame_decode(hdr, &f) < 0)
		return bad_frame(c, p, hdr);
	if (f.type == WK_F_DATA) {
		/* Same sequence number but another call: a mismatch, even
		 * though this peer is not one we wait for right now. */
		if (cur->coll && f.seq == cur->seq &&
		    (f.coll != cur->coll || f.dtype != cur->dtype ||
		     f.op != cur->op || f.count != cur->count ||
		     f.aux != cur->aux)) {
			describe(cur, dw, sizeof(dw));
			describe(&f, dg, sizeof(dg));
			return wk_err(DDP_ERR_MISMATCH,
				      "mismatched collectives: rank %d (%s) "
				      "called %s but rank %d (%s) called %s",
				      c->rank, c->myhost, dw, p,
				      c->peers[p].host, dg);
		}
		/* Data of a later step: leave it queued, stop peeking. */
		c->peers[p].early = 1;
		return DDP_OK;
	}
	if (recv(c->peers[p].fd, hdr, sizeof(hdr), MSG_DONTWAIT) !=
	    (ssize_t)sizeof(hdr))
		return lost_peer(c, p, cur, "short read");
	if (note_stall(c, p, hdr))
		return DDP_OK;
	if (f.type == WK_F_ABORT)
		return peer_aborted(c, p, &f);
	c->peers[p].bye = 1;
	return DDP_OK;
}

/*
 * Waits until one of the wanted events may be ready, watching every other
 * peer for goodbyes, aborts and deaths. Errors name the peer waited for.
 */
enum ddp_status
tcp_poll_wait(struct wk_mesh *c, const struct tcp_want *w, int nw,
	      double deadline, const struct wk_frame *cur)
{
	struct pollfd *pfd = c->wait_pfd;
	int *who = c->wait_who;
	int i, j, k, n = 0, rc, used;
	enum ddp_status st;
	double left, wake, now;

	for (i = 0; i < nw; i++) {
		pfd[n].fd = c->peers[w[i].peer].fd;
		pfd[n].events = w[i].events;
		who[n++] = w[i].peer;
	}
	for (k = 0; k < c->nlinked; k++) {
		i = c->linked[k];
		if (c->peers[i].fd < 0 || c->peers[i].bye || c->peers[i].early)
			continue;
		/* A peer this rank only sends to is still read for its
		 * notices (idle_event leaves its data queued). */
		used = 0;
		for (j = 0; j < nw; j++)
			used |= w[j].peer == i && (w[j].events & POLLIN);
		if (used)
			continue;
		pfd[n].fd = c->peers[i].fd;
		pfd[n].events = POLLIN | POLLRDHUP;
		who[n++] = -1 - i;
	}
	c->waiting = w[0].peer;
	st = survey(c, deadline, &wake);
	if (st)
		return st;
	now = ddp_now();
	if (now >= deadline) {
		/* Past the deadline the survey concludes at once. */
		st = survey(c, deadline, &wake);
		return st ? st : timeout_error(c, w[0].peer, w[0].events, cur);
	}
	left = (wake < deadline ? wake : deadline) - now;
	rc = poll(pfd, (nfds_t)n, (int)(left * 1000) + 1);
	if (rc < 0 && errno == EINTR)
		return DDP_OK;
	if (rc < 0)
		return wk_err(DDP_ERR_SYSTEM, "poll: %s", strerror(errno));
	for (i = nw; i < n && !st; i++)
		if (pfd[i].revents)
			st = idle_event(c, -1 - who[i], cur);
	return st;
}

/*
 * Polls the wanted sockets without sleeping until one is ready (1) or
 * the spin ends (0). poll, not recv: recv takes the socket's lock, which
 * the peer's send needs when it delivers into this socket (on loopback
 * it does so from the peer's core).
 */
static int
spin_wait(const struct wk_mesh *c, const struct tcp_want *w, int nw, double end)
{
	struct pollfd pfd[WK_WAIT_MAX];
	int i;

	for (i = 0; i < nw; i++) {
		pfd[i].fd = c->peers[w[i].peer].fd;
		pfd[i].events = w[i].events;
		pfd[i].revents = 0;
	}
	for (;;) {
		if (poll(pfd, (nfds_t)nw, 0) != 0)
			return 1;
		if (ddp_now() >= end)
			return 0;
		sched_yield();
	}
}

/* Runs a set of concurrent sends and receives to completion. */
enum ddp_status
tcp_run_xops(struct wk_mesh *c, struct tcp_xop *x, int nsend, int nrecv,
	     double deadline)
{
	struct tcp_want w[WK_WAIT_MAX];
	enum ddp_status st = DDP_OK;
	int i, nw, rc, pending;
	double spin_end = 0;

	/* The rendezvous connects only the peers peers.c names: a
	 * collective that strays from them must fail, not wait. */
	for (i = 0; i < nsend + nrecv; i++)
		if (c->peers[x[i].peer].fd < 0)
			return wk_err(DDP_ERR_SYSTEM,
				      "rank %d has no connection to rank %d "
				      "(%s): a collective uses a peer the "
				      "rendezvous did not connect",
				      c->rank, x[i].peer,
				      c->peers[x[i].peer].host);
	for (;;) {
		pending = 0;
		nw = 0;
		/* Sends first: the peers wait for them, and a receive tried
		 * before them would mostly find nothing yet. The waits list
		 * receives first all the same: a timeout names w[0]. */
		for (i = 0; i < nsend; i++)
			if (tcp_send_progress(c, &x[i], &st) < 0)
				return st;
		for (i = nsend; i < nsend + nrecv; i++) {
			rc = tcp_recv_progress(c, &x[i], &st);
			if (rc < 0)
				return st;
			if (rc == 0 && nw < WK_WAIT_MAX) {
				w[nw].peer = x[i].peer;
				w[nw++].events = POLLIN;
			}
			pending += rc == 0;
		}
		for (i = 0; i < nsend; i++) {
			if (x[i].done == WK_FRAME_LEN + x[i].len)
				continue;
			if (nw < WK_WAIT_MAX) {
				w[nw].peer = x[i].peer;
				w[nw++].events = POLLOUT;
			}
			pending++;
		}
		if (!pending)
			return DDP_OK;
		/* A peer on another core usually answers within microseconds,
		 * while waking from a sleeping poll costs tens of them (the
		 * idle core's wake-up): look again first, for a bounded
		 * time, giving the CPU to any other runnable task between
		 * looks. */
		if (c->spin_s > 0 && nw > 0) {
			if (spin_end == 0)
				spin_end = ddp_now() + c->spin_s;
			if (spin_wait(c, w, nw, spin_end))
				continue;
		}
		st = tcp_poll_wait(c, w, nw, deadline, &x[0].f);
		if (st)
			return st;
	}
}

/* Only linked peers send notices or data: tcp_mesh_link reset the rest. */
static void
op_start(struct wk_mesh *c)
{
	int k;

	c->in_grace = 0;
	c->told = 0;
	c->waiting = -1;
	for (k = 0; k < c->nlinked; k++) {
		c->peers[c->linked[k]].early = 0;
		c->peers[c->linked[k]].waits_for = -1;
	}
}

enum ddp_status
tcp_mesh_link(struct wk_mesh *c)
{
	int i, n = 0;

	free(c->linked);
	free(c->wait_pfd);
	free(c->wait_who);
	c->nlinked = 0;
	for (i = 0; i < c->size; i++)
		n += i != c->rank && c->peers[i].fd >= 0;
	c->linked = calloc((size_t)n + 1, sizeof(*c->linked));
	c->wait_pfd = calloc((size_t)n + WK_WAIT_MAX, sizeof(*c->wait_pfd));
	c->wait_who = calloc((size_t)n + WK_WAIT_MAX, sizeof(*c->wait_who));
	if (!c->linked || !c->wait_pfd || !c->wait_who)
		return wk_err(DDP_ERR_NOMEM,
			      "rank %d: out of memory for the list of its %d "
			      "peers",
			      c->rank, n);
	for (i = 0; i < c->size; i++) {
		/* What op_start resets, once for the peers it never
		 * looks at again. */
		c->peers[i].early = 0;
		c->peers[i].waits_for = -1;
		if (i != c->rank && c->peers[i].fd >= 0)
			c->linked[c->nlinked++] = i;
	}
	return DDP_OK;
}

void
tcp_limit_spin(struct wk_mesh *c)
{
	long cpus = ddp_cgroup_cpus();
	int i, here = 0;

	if (cpus < 1)
		cpus = sysconf(_SC_NPROCESSORS_ONLN);
	for (i = 0; i < c->size; i++)
		here += strcmp(c->peers[i].host, c->myhost) == 0;
	if (cpus >= 1 && here > cpus)
		c->spin_s = 0;
	wk_log(3,
	       "rank %d: waits poll for %g us before sleeping (%d ranks "
	       "on this host, %ld CPUs in its cpuset)",
	       c->rank, c->spin_s * 1e6, here, cpus);
}

void
tcp_op_start(struct wk_mesh *c)
{
	op_start(c);
}

void
tcp_stall(struct wk_mesh *c, int waiting)
{
	send_stall(c, waiting);
}

enum ddp_status
tcp_check_peers(struct wk_mesh *c)
{
	struct wk_frame f;

	memset(&f, 0, sizeof(f));
	return tcp_watch(c, &f);
}

enum ddp_status
tcp_hang_watch(struct wk_mesh *c, const struct wk_frame *cur, int waiting,
	       double deadline)
{
	struct wk_frame none;
	enum ddp_status st;
	double wake;

	memset(&none, 0, sizeof(none));
	c->waiting = waiting;
	st = tcp_watch(c, cur ? cur : &none);
	return st ? st : survey(c, deadline, &wake);
}

enum ddp_status
tcp_watch(struct wk_mesh *c, const struct wk_frame *cur)
{
	struct pollfd *pfd = c->wait_pfd;
	int *who = c->wait_who;
	enum ddp_status st = DDP_OK;
	int i, k, n = 0;

	for (k = 0; k < c->nlinked; k++) {
		i = c->linked[k];
		if (c->peers[i].fd < 0 || c->peers[i].bye || c->peers[i].early)
			continue;
		pfd[n].fd = c->peers[i].fd;
		pfd[n].events = POLLIN | POLLRDHUP;
		pfd[n].revents = 0;
		who[n++] = i;
	}
	if (n == 0 || poll(pfd, (nfds_t)n, 0) <= 0)
		return DDP_OK;
	for (i = 0; i < n && !st; i++)
		if (pfd[i].revents)
			st = idle_event(c, who[i], cur);
	return st;
}

void
tcp_send_abort(struct wk_mesh *c, const char *msg)
{
	uint8_t hdr[WK_FRAME_LEN], body[WK_ABORT_MAX];
	struct wk_frame f;
	struct iovec iov[2];
	struct msghdr mh;
	int i, len;

	if (c->cause.why == WK_WHY_NONE) {
		c->cause.blamed = -1;
		c->cause.host[0] = '\0';
	}
	(void)ddp_fmt(c->cause.text, sizeof(c->cause.text), "%s", msg);
	len = wk_abort_encode(body, sizeof(body), &c->cause);
	if (len < 0) {
		/* Only a host out of form (no name, or too long) gets here:
		 * the text alone, blaming nobody. */
		c->cause.why = WK_WHY_NONE;
		c->cause.blamed = -1;
		c->cause.host[0] = '\0';
		len = wk_abort_encode(body, sizeof(body), &c->cause);
	}
	memset(&f, 0, sizeof(f));
	f.type = WK_F_ABORT;
	f.len = (uint32_t)len;
	wk_frame_encode(hdr, &f);
	for (i = 0; i < c->size; i++) {
		/* A partly sent frame cannot be interrupted; that peer will
		 * see the connection close instead. */
		if (i == c->rank || c->peers[i].fd < 0 || c->peers[i].bye ||
		    c->peers[i].send_mid)
			continue;
		memset(&mh, 0, sizeof(mh));
		iov[0].iov_base = hdr;
		iov[0].iov_len = sizeof(hdr);
		iov[1].iov_base = body;
		iov[1].iov_len = (size_t)len;
		mh.msg_iov = iov;
		mh.msg_iovlen = 2;
		if (sendmsg(c->peers[i].fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) <
		    0)
			wk_log(3, "abort to rank %d not sent: %s", i,
			       strerror(errno));
		/* Never send anything after an abort. */
		c->peers[i].send_mid = 1;
	}
	c->aborted = 1;
}

void
tcp_close_all(struct wk_mesh *c)
{
	uint8_t hdr[WK_FRAME_LEN], junk[4096];
	struct wk_frame f;
	double deadline = ddp_now() + 1.0;
	int i;

	memset(&f, 0, sizeof(f));
	f.type = WK_F_BYE;
	wk_frame_encode(hdr, &f);
	for (i = 0; i < c->size; i++) {
		if (i == c->rank || c->peers[i].fd < 0)
			continue;
		/* Best effort: a peer that takes nothing for a second
		 * sees the connection close instead. */
		if (!c->aborted && !c->peers[i].send_mid)
			(void)ddp_net_send_all(c->peers[i].fd, hdr, sizeof(hdr),
					       deadline);
		shutdown(c->peers[i].fd, SHUT_WR);
		/* Unread bytes at close() would reset the connection and
		 * could discard our goodbye at the peer; drain first. */
		while (recv(c->peers[i].fd, junk, sizeof(junk), MSG_DONTWAIT) >
		       0)
			;
		ddp_close(&c->peers[i].fd);
	}
}

void
tcp_mesh_fini(struct wk_mesh *c)
{
	if (c->peers)
		tcp_close_all(c);
	free(c->peers);
	free(c->scratch);
	free(c->pids);
	free(c->linked);
	free(c->wait_pfd);
	free(c->wait_who);
	c->linked = NULL;
	c->wait_pfd = NULL;
	c->wait_who = NULL;
	c->nlinked = 0;
	c->pids = NULL;
	c->peers = NULL;
	c->scratch = NULL;
	c->scratch_len = 0;
}
