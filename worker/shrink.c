/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ddp_comm_shrink (ddp.h has the contract; shrink.h its in-place form for
 * the gradient sync), above the communicator: the survivors of a lost
 * rank agree on who is gone over the connections they already have, then
 * carry on in a communicator of their own on the same connections.
 *
 * A failed collective leaves each connection at an unknown point of a
 * frame (partly sent, partly read, an ABORT behind it), and a peer that
 * has not noticed the loss yet may still read the bytes sent to it as
 * the rest of a frame. So each survivor sends a first marker on every
 * connection and reads every connection up to a marker of the other
 * side, dropping what came before it. A marker read proves that its
 * sender reads nothing but markers any more, so the reader answers with
 * a second marker, which cannot be lost in an old frame; a connection is
 * resynchronised once the other side's second marker is read (its first
 * may have been eaten, the answer to ours never is). Then rounds of
 * views: each survivor sends the ranks it counts as gone to every rank
 * it can still reach and reads theirs; the union is its next view; a
 * round in which every view it read equals its own, unchanged, ends the
 * agreement. A connection that closes, fails or says nothing before the
 * deadline adds its rank to the view.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "comm.h"
#include "ddp_util.h"
#include "peers.h"
#include "shrink.h"

/*
 * The markers that end the old communicator's bytes on a connection: a
 * common prefix and a last byte, FIRST_MARK or SECOND_MARK. The prefix's
 * first byte occurs nowhere else in it, so no proper prefix of it is
 * also a suffix: a scan that restarts at a mismatch finds the first whole
 * occurrence, whatever ends the bytes dropped before it.
 */
#define MARK_LEN 32
static const uint8_t mark_prefix[MARK_LEN - 1] = {
	0xa7, 'D', 'D',	 'P',  ' ',  's',  'h',	 'r',  'i', 'n', 'k',
	':',  ' ', 'r',	 'e',  's',  'y',  'n',	 'c',  ' ', 'h', 'e',
	'r',  'e', 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06};
#define FIRST_MARK 0x5a
#define SECOND_MARK 0x5b

/* A view: this magic, the round, the sender's rank, then a bit per rank. */
#define VIEW_MAGIC 0x44535657u /* "DSVW" */
#define VIEW_HDR 12

enum sk_state {
	SK_SYNCING, /* marker not read yet */
	SK_LIVE,    /* past the marker: views follow */
	SK_GONE,    /* closed, failed or silent past the deadline */
};

struct sk_peer {
	enum sk_state state;
	size_t matched; /* bytes of a marker's prefix read so far */
	int answered;	/* the second marker is queued for it */
	uint8_t *out;	/* bytes queued for the peer, from sent on */
	size_t out_len;
	size_t out_cap;
	size_t sent;
	uint8_t *in; /* bytes of the peer's next views, read ahead */
	size_t in_len;
	int got; /* its view of the current round is in */
	char why[160];
};

struct sk {
	struct wk_mesh *c;
	struct sk_peer *p; /* size entries; p[rank] unused */
	size_t view_len;
	uint8_t *gone;	/* size bytes: 1 for a rank counted as gone */
	uint8_t *next;	/* the union of this round's views */
	uint8_t *view;	/* one view being encoded or decoded */
	int dropped_by; /* a peer whose view counted this rank as gone */
	int left_early; /* a peer that sent no view: it left the agreement */
	int rounds;
};

static void
gone(struct sk *s, int i, const char *why)
{
	struct sk_peer *p = &s->p[i];

	if (p->state == SK_GONE)
		return;
	p->state = SK_GONE;
	ddp_fmt(p->why, sizeof(p->why), "%s", why);
	wk_log(3, "rank %d: shrink: rank %d gone: %s", s->c->rank, i, why);
}

static int
queue(struct sk_peer *p, const uint8_t *b, size_t n)
{
	uint8_t *grown;
	size_t cap;

	if (p->sent == p->out_len)
		p->sent = p->out_len = 0;
	if (p->out_len + n > p->out_cap) {
		cap = (p->out_len + n) * 2;
		grown = realloc(p->out, cap);
		if (!grown)
			return -1;
		p->out = grown;
		p->out_cap = cap;
	}
	memcpy(p->out + p->out_len, b, n);
	p->out_len += n;
	return 0;
}

/* Sends what is queued for peer i without blocking. */
static void
flush(struct sk *s, int i)
{
	struct sk_peer *p = &s->p[i];
	ssize_t n;

	while (p->state != SK_GONE && p->sent < p->out_len) {
		n = send(s->c->peers[i].fd, p->out + p->sent,
			 p->out_len - p->sent, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			p->sent += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		gone(s, i, n < 0 ? strerror(errno) : "send made no progress");
	}
}

/* Queues marker `last` (FIRST_MARK or SECOND_MARK) for peer i. */
static int
queue_mark(struct sk_peer *p, uint8_t last)
{
	uint8_t m[MARK_LEN];

	memcpy(m, mark_prefix, MARK_LEN - 1);
	m[MARK_LEN - 1] = last;
	return queue(p, m, MARK_LEN);
}

/*
 * Reads peer i's bytes up to the end of its second marker, dropping those
 * before it and answering its first marker (or its second, when its first
 * was lost) with this rank's second; what follows the second marker in
 * the same read is kept as the start of its views.
 */
static void
scan(struct sk *s, int i)
{
	struct sk_peer *p = &s->p[i];
	uint8_t chunk[16384];
	size_t k, rest;
	ssize_t n;
	int second = 0;

	while (p->state == SK_SYNCING) {
		n = recv(s->c->peers[i].fd, chunk, sizeof(chunk), MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			gone(s, i,
			     n == 0 ? "its connection closed"
				    : strerror(errno));
			return;
		}
		for (k = 0; k < (size_t)n && !second; k++) {
			if (p->matched == MARK_LEN - 1) {
				p->matched = 0;
				if (chunk[k] == SECOND_MARK)
					second = 1;
				if ((chunk[k] == FIRST_MARK || second) &&
				    !p->answered) {
					if (queue_mark(p, SECOND_MARK) < 0) {
						gone(s, i, "out of memory");
						return;
					}
					p->answered = 1;
				}
				if (chunk[k] == FIRST_MARK || second)
					continue;
			}
			if (chunk[k] == mark_prefix[p->matched])
				p->matched++;
			else
				p->matched = chunk[k] == mark_prefix[0];
		}
		if (!second)
			continue;
		/* The peer sends no second view before it has this rank's
		 * first, which goes after this scan: at most one follows. */
		rest = (size_t)n - k;
		if (rest > s->view_len) {
			gone(s, i, "sent more than one view after its marker");
			return;
		}
		memcpy(p->in, chunk + k, rest);
		p->in_len = rest;
		p->state = SK_LIVE;
		wk_log(3, "rank %d: shrink: marker of rank %d, %zu bytes after",
		       s->c->rank, i, rest);
	}
}

/* Polls the connections that have something to do until one may. */
static enum ddp_status
wait_io(struct sk *s, double deadline, int reading_state)
{
	struct wk_mesh *c = s->c;
	struct pollfd *pfd = c->wait_pfd;
	int k, i, n = 0, rc;
	double left = deadline - ddp_now();

	for (k = 0; k < c->nlinked; k++) {
		i = c->linked[k];
		if (s->p[i].state == SK_GONE)
			continue;
		pfd[n].fd = c->peers[i].fd;
		pfd[n].events = 0;
		if (s->p[i].sent < s->p[i].out_len)
			pfd[n].events |= POLLOUT;
		if (reading_state >= 0 && !s->gone[i] &&
		    (int)s->p[i].state == reading_state && !s->p[i].got)
			pfd[n].events |= POLLIN;
		if (pfd[n].events)
			n++;
	}
	if (n == 0 || left <= 0)
		return DDP_OK;
	rc = poll(pfd, (nfds_t)n, (int)(left * 1000) + 1);
	if (rc < 0 && errno != EINTR)
		return wk_err(DDP_ERR_SYSTEM, "ddp_comm_shrink: poll: %s",
			      strerror(errno));
	return DDP_OK;
}

/* A first marker out on every connection, every connection read up to
 * its peer's second marker (or gone). */
static enum ddp_status
resynchronise(struct sk *s)
{
	struct wk_mesh *c = s->c;
	double deadline = ddp_now() + c->timeout_s;
	enum ddp_status st;
	int k, i, syncing;

	for (k = 0; k < c->nlinked; k++) {
		i = c->linked[k];
		if (c->peers[i].bye) {
			gone(s, i, "it left (ddp_comm_destroy)");
			continue;
		}
		if (queue_mark(&s->p[i], FIRST_MARK) < 0)
			return wk_err(DDP_ERR_NOMEM,
				      "ddp_comm_shrink: out of memory");
	}
	for (;;) {
		syncing = 0;
		for (k = 0; k < c->nlinked; k++) {
			i = c->linked[k];
			flush(s, i);
			scan(s, i);
			syncing += s->p[i].state == SK_SYNCING;
		}
		if (!syncing)
			return DDP_OK;
		if (ddp_now() >= deadline)
			break;
		st = wait_io(s, deadline, SK_SYNCING);
		if (st)
			return st;
	}
	for (k = 0; k < c->nlinked; k++)
		if (s->p[c->linked[k]].state == SK_SYNCING)
			gone(s, c->linked[k],
			     "it did not enter ddp_comm_shrink within the "
			     "timeout");
	return DDP_OK;
}

static void
put32(uint8_t *b, uint32_t v)
{
	b[0] = (uint8_t)(v >> 24);
	b[1] = (uint8_t)(v >> 16);
	b[2] = (uint8_t)(v >> 8);
	b[3] = (uint8_t)v;
}

static uint32_t
get32(const uint8_t *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 |
	       (uint32_t)b[2] << 8 | b[3];
}

static void
encode_view(struct sk *s, uint32_t round)
{
	int i;

	memset(s->view, 0, s->view_len);
	put32(s->view, VIEW_MAGIC);
	put32(s->view + 4, round);
	put32(s->view + 8, (uint32_t)s->c->rank);
	for (i = 0; i < s->c->size; i++)
		if (s->gone[i])
			s->view[VIEW_HDR + i / 8] |= (uint8_t)(1u << (i % 8));
}

/*
 * Takes peer i's view of this round from its read-ahead bytes into
 * s->next (union); returns 1 when it differed from this rank's. A frame
 * that is no view of this round means i has left the agreement with
 * another outcome.
 */
static int
take_view(struct sk *s, int i, uint32_t round)
{
	struct sk_peer *p = &s->p[i];
	const uint8_t *v = p->in;
	int r, bit, differs = 0;

	if (get32(v) != VIEW_MAGIC || get32(v + 4) != round ||
	    get32(v + 8) != (uint32_t)i) {
		s->left_early = i;
		gone(s, i, "it sent something else than its view");
		return 1;
	}
	for (r = 0; r < s->c->size; r++) {
		bit = (v[VIEW_HDR + r / 8] >> (r % 8)) & 1;
		differs |= bit != s->gone[r];
		if (bit) {
			s->next[r] = 1;
			if (r == s->c->rank)
				s->dropped_by = i;
		}
	}
	wk_log(3, "rank %d: shrink: view %u of rank %d", s->c->rank, round, i);
	p->in_len -= s->view_len;
	memmove(p->in, p->in + s->view_len, p->in_len);
	p->got = 1;
	return differs;
}

/* Reads what peer i has of its next view, without blocking. */
static void
read_view(struct sk *s, int i)
{
	struct sk_peer *p = &s->p[i];
	ssize_t n;

	while (p->state == SK_LIVE && p->in_len < s->view_len) {
		n = recv(s->c->peers[i].fd, p->in + p->in_len,
			 s->view_len - p->in_len, MSG_DONTWAIT);
		if (n > 0) {
			p->in_len += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		gone(s, i, n == 0 ? "its connection closed" : strerror(errno));
	}
}

/* One round: this rank's view to every peer it can reach, theirs read.
 * *stable: every view equalled this rank's and none was lost. */
static enum ddp_status
round_trip(struct sk *s, uint32_t round, int *stable)
{
	struct wk_mesh *c = s->c;
	double deadline = ddp_now() + c->timeout_s;
	enum ddp_status st;
	int k, i, waiting, differs = 0;

	encode_view(s, round);
	memcpy(s->next, s->gone, (size_t)c->size);
	for (k = 0; k < c->nlinked; k++) {
		i = c->linked[k];
		s->p[i].got = 0;
		/* A rank the others count as gone but this one still
		 * reaches hears it too, so that it stops. */
		if (s->p[i].state == SK_LIVE &&
		    queue(&s->p[i], s->view, s->view_len) < 0)
			return wk_err(DDP_ERR_NOMEM,
				      "ddp_comm_shrink: out of memory");
	}
	for (;;) {
		waiting = 0;
		for (k = 0; k < c->nlinked; k++) {
			i = c->linked[k];
			flush(s, i);
			if (s->gone[i] || s->p[i].got)
				continue;
			read_view(s, i);
			if (s->p[i].state == SK_LIVE &&
			    s->p[i].in_len >= s->view_len)
				differs |= take_view(s, i, round);
			if (s->p[i].state == SK_GONE) {
				s->next[i] = 1;
				differs = 1;
				continue;
			}
			waiting += !s->p[i].got;
		}
		if (!waiting)
			break;
		if (ddp_now() >= deadline) {
			for (k = 0; k < c->nlinked; k++) {
				i = c->linked[k];
				if (!s->gone[i] && !s->p[i].got) {
					gone(s, i,
					     "its view did not come within the "
					     "timeout");
					s->next[i] = 1;
					differs = 1;
				}
			}
			break;
		}
		st = wait_io(s, deadline, SK_LIVE);
		if (st)
			return st;
	}
	*stable = !differs && memcmp(s->next, s->gone, (size_t)c->size) == 0;
	memcpy(s->gone, s->next, (size_t)c->size);
	return DDP_OK;
}

/* Sends what is still queued for the survivors: their next bytes must be
 * the new communicator's. */
static enum ddp_status
drain_out(struct sk *s)
{
	struct wk_mesh *c = s->c;
	double deadline = ddp_now() + c->timeout_s;
	enum ddp_status st;
	int k, i, left;

	for (;;) {
		left = 0;
		for (k = 0; k < c->nlinked; k++) {
			i = c->linked[k];
			if (s->gone[i])
				continue;
			flush(s, i);
			if (s->p[i].state == SK_GONE)
				return wk_err(DDP_ERR_PEER,
					      "ddp_comm_shrink: rank %d (%s) "
					      "was lost after the survivors "
					      "agreed: %s",
					      i, c->peers[i].host, s->p[i].why);
			left += s->p[i].sent < s->p[i].out_len;
		}
		if (!left)
			return DDP_OK;
		if (ddp_now() >= deadline)
			return wk_err(DDP_ERR_TIMEOUT,
				      "ddp_comm_shrink: a survivor did not "
				      "take the last view within %g s",
				      c->timeout_s);
		st = wait_io(s, deadline, -1);
		if (st)
			return st;
	}
}

/*
 * Whether every pair of ranks has a connection: the rendezvous connects
 * only the peers the collectives use (peers.h), and the renumbered
 * survivors' collectives pair ranks differently. 0 when complete, else
 * -1 with a and b an unconnected pair (a = -1: out of memory).
 */
static int
mesh_complete(const struct wk_mesh *c, int *a, int *b)
{
	struct wk_mesh other = *c;
	uint8_t *want = malloc((size_t)c->size);
	int r, j, rc = -1;

	*a = -1;
	*b = -1;
	if (!want)
		goto out;
	for (r = 0; r < c->size; r++) {
		other.rank = r;
		if (wk_peers_wanted(&other, want) < 0)
			goto out;
		for (j = 0; j < c->size; j++) {
			if (j != r && !want[j]) {
				*a = r;
				*b = j;
				goto out;
			}
		}
	}
	rc = 0;
out:
	free(want);
	return rc;
}

/* The survivors' communicator on old's connections, which move to it. */
static enum ddp_status
build(struct ddp_comm *old, const uint8_t *gone, struct ddp_comm **out)
{
	struct wk_mesh *o = &old->mesh, *m;
	struct ddp_comm *comm = calloc(1, sizeof(*comm));
	enum ddp_status st = DDP_OK;
	int i, j = 0, n = 0;

	for (i = 0; i < o->size; i++)
		n += !gone[i];
	if (!comm)
		return wk_err(DDP_ERR_NOMEM, "ddp_comm_shrink: out of memory");
	pthread_mutex_init(&comm->lock, NULL);
	m = &comm->mesh;
	m->size = n;
	m->timeout_s = o->timeout_s;
	m->waiting = -1;
	m->algo = o->algo == WK_ALGO_HIER ? WK_ALGO_AUTO : o->algo;
	m->ring_min = o->ring_min;
	m->seg_bytes = o->seg_bytes;
	m->spin_s = o->spin_s;
	memcpy(m->myhost, o->myhost, sizeof(m->myhost));
	m->peers = calloc((size_t)n, sizeof(*m->peers));
	m->pids = calloc((size_t)n, sizeof(*m->pids));
	comm->gpus = calloc((size_t)n, sizeof(*comm->gpus));
	if (!m->peers || !m->pids || !comm->gpus) {
		st = wk_err(DDP_ERR_NOMEM, "ddp_comm_shrink: out of memory");
		goto out;
	}
	for (i = 0; i < o->size; i++) {
		if (gone[i])
			continue;
		if (i == o->rank)
			m->rank = j;
		m->peers[j] = o->peers[i];
		m->peers[j].bye = 0;
		m->peers[j].early = 0;
		m->peers[j].send_mid = 0;
		m->peers[j].waits_for = -1;
		m->peers[j].in_seq = 0;
		m->peers[j].absent_seq = 0;
		m->pids[j] = o->pids ? o->pids[i] : 0;
		comm->gpus[j] = old->gpus ? old->gpus[i] : -1;
		o->peers[i].fd = -1;
		j++;
	}
	comm->local_rank = old->local_rank;
	comm->check_calls = old->check_calls;
	comm->backend = DDP_BACKEND_TCP;
	comm->bops = &wk_host_ops;
	comm->bstate = &comm->host;
	/* The flat algorithms only: the hierarchical allreduce's node
	 * segment belongs to the old communicator. */
	comm->host.mesh = m;
	comm->host.hier = NULL;
	if (n > 1) {
		st = tcp_mesh_link(m);
		if (st)
			goto out;
		tcp_limit_spin(m);
	}
	*out = comm;
	comm = NULL;
out:
	if (comm)
		comm->mesh.aborted = 1; /* no goodbye into the survivors */
	ddp_comm_destroy(comm);
	return st;
}

/* Names the dropped ranks in the log: a warning from the new rank 0. */
static void
log_dropped(const struct wk_mesh *o, const uint8_t *gone, int new_rank,
	    int new_size, int rounds)
{
	char who[512] = "";
	int i;

	for (i = 0; i < o->size; i++)
		if (gone[i])
			(void)ddp_fmt_cat(who, sizeof(who), "%s%d (%s)",
					  who[0] ? ", " : "", i,
					  o->peers[i].host);
	wk_log(new_rank == 0 ? 1 : 3,
	       "rank %d (%s) continues as rank %d of %d without rank%s %s "
	       "(ddp_comm_shrink, %d round%s of views)",
	       o->rank, o->myhost, new_rank, new_size,
	       new_size + 1 < o->size ? "s" : "", who, rounds,
	       rounds == 1 ? "" : "s");
}

static enum ddp_status
agree_and_build(struct ddp_comm *comm, struct ddp_comm **out)
{
	struct wk_mesh *c = &comm->mesh;
	struct sk s;
	enum ddp_status st;
	int i, left, stable = 0;
	uint32_t round;

	memset(&s, 0, sizeof(s));
	s.c = c;
	s.dropped_by = -1;
	s.left_early = -1;
	s.view_len = VIEW_HDR + ((size_t)c->size + 7) / 8;
	s.p = calloc((size_t)c->size, sizeof(*s.p));
	s.gone = calloc((size_t)c->size, 1);
	s.next = calloc((size_t)c->size, 1);
	s.view = calloc(1, s.view_len);
	st = wk_err(DDP_ERR_NOMEM, "ddp_comm_shrink: out of memory");
	if (!s.p || !s.gone || !s.next || !s.view)
		goto out;
	for (i = 0; i < c->size; i++) {
		s.p[i].state = i == c->rank ? SK_LIVE : SK_GONE;
		s.p[i].in = calloc(1, s.view_len);
		if (!s.p[i].in)
			goto out;
	}
	for (i = 0; i < c->nlinked; i++)
		s.p[c->linked[i]].state = SK_SYNCING;
	st = resynchronise(&s);
	if (st)
		goto out;
	for (i = 0; i < c->size; i++)
		s.gone[i] = s.p[i].state == SK_GONE;
	/* Each unstable round adds a rank or spreads a view; past
	 * 2 * size + 2 rounds something is wrong. */
	for (round = 0; !stable && round < 2u * (uint32_t)c->size + 2;
	     round++) {
		st = round_trip(&s, round, &stable);
		if (st)
			goto out;
		if (s.dropped_by >= 0) {
			st = wk_err(DDP_ERR_PEER,
				    "ddp_comm_shrink: rank %d (%s) was dropped "
				    "by the survivors: rank %d (%s) counts it "
				    "as gone (it could not reach it, or it "
				    "entered ddp_comm_shrink after the "
				    "timeout, DDP_TIMEOUT=%g)",
				    c->rank, c->myhost, s.dropped_by,
				    c->peers[s.dropped_by].host, c->timeout_s);
			goto out;
		}
		if (s.left_early >= 0) {
			st = wk_err(DDP_ERR_PEER,
				    "ddp_comm_shrink: rank %d (%s) left the "
				    "agreement with another set of survivors "
				    "than rank %d (a rank died between their "
				    "last views); destroy both communicators "
				    "and end the program",
				    s.left_early, c->peers[s.left_early].host,
				    c->rank);
			goto out;
		}
	}
	s.rounds = (int)round;
	if (!stable) {
		st = wk_err(DDP_ERR_PEER,
			    "ddp_comm_shrink: the survivors did not agree "
			    "within %d rounds",
			    s.rounds);
		goto out;
	}
	for (i = 0, left = 0; i < c->size; i++)
		left += !s.gone[i];
	/* A rank that came after the others' timeout finds them all gone
	 * and must not go on alone: only a half or more goes on. */
	if (2 * left < c->size) {
		st = wk_err(DDP_ERR_PEER,
			    "ddp_comm_shrink: rank %d (%s) reaches only %d of "
			    "the %d ranks: it was dropped by the others (it "
			    "entered ddp_comm_shrink after their timeout, "
			    "DDP_TIMEOUT=%g) or more than half of the world "
			    "is lost; end the program",
			    c->rank, c->myhost, left, c->size, c->timeout_s);
		goto out;
	}
	st = drain_out(&s);
	if (st)
		goto out;
	st = build(comm, s.gone, out);
	if (!st)
		log_dropped(c, s.gone, (*out)->mesh.rank, (*out)->mesh.size,
			    s.rounds);
out:
	for (i = 0; s.p && i < c->size; i++) {
		free(s.p[i].in);
		free(s.p[i].out);
	}
	free(s.p);
	free(s.gone);
	free(s.next);
	free(s.view);
	return st;
}

/* wk_comm_shrink_check with the lock held. */
static enum ddp_status
can_shrink(struct ddp_comm *comm)
{
	int a, b;

	if (comm->backend != DDP_BACKEND_TCP)
		return wk_err(DDP_ERR_UNSUPPORTED,
			      "ddp_comm_shrink: the NCCL backend cannot shrink "
			      "(its communicator holds the lost rank); use "
			      "DDP_BACKEND=tcp, or end the step and relaunch "
			      "it without the lost node");
	if (mesh_complete(&comm->mesh, &a, &b) == 0)
		return DDP_OK;
	if (a < 0)
		return wk_err(DDP_ERR_NOMEM, "ddp_comm_shrink: out of memory");
	return wk_err(DDP_ERR_UNSUPPORTED,
		      "ddp_comm_shrink: ranks %d and %d of this %d-rank world "
		      "have no connection of their own (the mesh connects "
		      "only the peers the collectives use), and the "
		      "survivors' collectives would need it; it works where "
		      "every rank reaches every other (all ranks on one "
		      "node, up to %d); else end the step and relaunch it "
		      "without the lost node",
		      a, b, comm->mesh.size, WK_HIER_LOCAL_MAX);
}

enum ddp_status
wk_comm_shrink_check(struct ddp_comm *comm)
{
	enum ddp_status st;

	pthread_mutex_lock(&comm->lock);
	st = can_shrink(comm);
	pthread_mutex_unlock(&comm->lock);
	return st;
}

enum ddp_status
ddp_comm_shrink(struct ddp_comm *comm, struct ddp_comm **out)
{
	enum ddp_status st;

	if (out)
		*out = NULL;
	if (!comm || !out)
		return wk_err(DDP_ERR_INVALID,
			      "ddp_comm_shrink: NULL argument");
	pthread_mutex_lock(&comm->lock);
	st = can_shrink(comm);
	if (st)
		goto out;
	/* A rank that shrinks before it saw the loss tells the others,
	 * so that they stop their collective and shrink too. */
	if (!comm->failed) {
		wk_err(DDP_ERR_PEER,
		       "rank %d (%s) left this communicator for "
		       "ddp_comm_shrink",
		       comm->mesh.rank, comm->mesh.myhost);
		wk_comm_fail(comm, DDP_ERR_PEER);
	}
	st = agree_and_build(comm, out);
out:
	pthread_mutex_unlock(&comm->lock);
	return st;
}

/*
 * Exchanges everything of a and b but their locks, and points each one's
 * host backend back at its own mesh. Both are TCP communicators (the only
 * ones that shrink); a field added to struct ddp_comm must be added here.
 */
static void
swap_state(struct ddp_comm *a, struct ddp_comm *b)
{
	struct ddp_comm t;

	memcpy(&t, a, sizeof(t));
	a->mesh = b->mesh;
	a->local_rank = b->local_rank;
	a->failed = b->failed;
	a->fail_status = b->fail_status;
	memcpy(a->fail_msg, b->fail_msg, sizeof(a->fail_msg));
	a->backend = b->backend;
	a->bops = b->bops;
	a->host = b->host;
	a->bdl = b->bdl;
	a->check_calls = b->check_calls;
	a->gpus = b->gpus;
	b->mesh = t.mesh;
	b->local_rank = t.local_rank;
	b->failed = t.failed;
	b->fail_status = t.fail_status;
	memcpy(b->fail_msg, t.fail_msg, sizeof(b->fail_msg));
	b->backend = t.backend;
	b->bops = t.bops;
	b->host = t.host;
	b->bdl = t.bdl;
	b->check_calls = t.check_calls;
	b->gpus = t.gpus;
	a->bstate = &a->host;
	a->host.mesh = &a->mesh;
	b->bstate = &b->host;
	b->host.mesh = &b->mesh;
}

enum ddp_status
wk_comm_shrink_in_place(struct ddp_comm *comm)
{
	struct ddp_comm *n = NULL;
	enum ddp_status st = ddp_comm_shrink(comm, &n);

	if (st)
		return st;
	pthread_mutex_lock(&comm->lock);
	swap_state(comm, n);
	pthread_mutex_unlock(&comm->lock);
	/* n now holds the old world: the lost ranks' connections. */
	ddp_comm_destroy(n);
	return DDP_OK;
}
