/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The link test's sockets: plain TCP between one rank per node, outside
 * libddp, so that every node's inbound ports are tried from both of its
 * ring neighbours and each direction of each link is timed on its own
 * connection. The ports and the token travel over libddp's authenticated
 * control plane; a connection that does not open with the token is
 * refused.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "ddp_guard.h"
#include "ddp_net.h"
#include "ddp_util.h"
#include "sha256.h"

/* token, node index (4 bytes, big endian), direction (1 byte) */
#define HELLO_LEN (CHK_TOKEN_LEN + 5)
/* Against a flood, the guard of libddp's rendezvous (ddp_guard.h): a
 * bounded pending table, a cap per source address, eviction of the
 * busiest source's oldest connection, refusals logged one per line for
 * the first few, then summarised. */
#define MAX_PENDING 32
/* A node's neighbours connect at most CHK_NDIRS times each, from one
 * address: the cap leaves them room. */
#define PER_SOURCE_MAX 8
/* Connections accepted per wake-up, so that a flood of connects does not
 * starve the reads of those already pending. */
#define ACCEPT_BATCH 32
#define CHUNK (1u << 20)

const char *
chk_conn_name(int code)
{
	switch (code) {
	case CHK_CONN_OK:
		return "ok";
	case CHK_CONN_REFUSED:
		return "refused";
	case CHK_CONN_TIMEOUT:
		return "timed out";
	case CHK_CONN_UNRESOLVED:
		return "name not resolved";
	case CHK_CONN_ERROR:
		return "failed";
	default:
		return "not tried";
	}
}

/* Closes without lingering: unread data or a busy sender is no reason to
 * wait, and the reset tells the far end at once. */
static void
abort_close(int *fd)
{
	struct linger lg = {.l_onoff = 1, .l_linger = 0};

	if (*fd >= 0)
		setsockopt(*fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	ddp_close(fd);
}

void
chk_ring_init(struct chk_ring *r)
{
	int d;

	memset(r, 0, sizeof(*r));
	r->lfd = -1;
	for (d = 0; d < CHK_NDIRS; d++)
		r->out[d] = r->in[d] = -1;
}

void
chk_ring_close(struct chk_ring *r)
{
	int d;

	ddp_close(&r->lfd);
	for (d = 0; d < CHK_NDIRS; d++) {
		abort_close(&r->out[d]);
		abort_close(&r->in[d]);
	}
}

int
chk_ring_listen(struct chk_ring *r, char *err, size_t errlen)
{
	struct sockaddr_in6 s6;
	struct sockaddr_in s4;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int fd, zero = 0, rc = -1;

	fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd >= 0) {
		memset(&s6, 0, sizeof(s6));
		s6.sin6_family = AF_INET6;
		s6.sin6_addr = in6addr_any;
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		if (bind(fd, (struct sockaddr *)&s6, sizeof(s6)) < 0)
			ddp_close(&fd);
	}
	if (fd < 0) {
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
			    0);
		memset(&s4, 0, sizeof(s4));
		s4.sin_family = AF_INET;
		s4.sin_addr.s_addr = htonl(INADDR_ANY);
		if (fd < 0 ||
		    bind(fd, (struct sockaddr *)&s4, sizeof(s4)) < 0) {
			ddp_fmt(err, errlen,
				"link test: cannot open a listening socket: "
				"%s",
				strerror(errno));
			goto out;
		}
	}
	if (listen(fd, MAX_PENDING) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
		ddp_fmt(err, errlen, "link test: listen: %s", strerror(errno));
		goto out;
	}
	r->lport = ss.ss_family == AF_INET6
			   ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
			   : ntohs(((struct sockaddr_in *)&ss)->sin_port);
	r->lfd = fd;
	fd = -1;
	rc = 0;
out:
	ddp_close(&fd);
	return rc;
}

/* One outgoing connection being made. */
struct dial {
	struct addrinfo *res;
	struct addrinfo *ai; /* the address being tried */
	int fd;
	int done;
};

/* One accepted connection whose hello is still being read. */
struct pend {
	int fd;
	size_t have;
	uint8_t buf[HELLO_LEN];
	char from[INET6_ADDRSTRLEN + 8];
};

/* The listener's side of one chk_ring_connect. */
struct listener {
	struct chk_ring *r;
	struct pend p[MAX_PENDING];
	int np;
	struct ddp_guard guard; /* p's accounting, index for index */
	int ndir;
	const struct chk_target *from;
	const uint8_t *token;
};

static int
conn_code(int err)
{
	if (err == ECONNREFUSED)
		return CHK_CONN_REFUSED;
	if (err == ETIMEDOUT)
		return CHK_CONN_TIMEOUT;
	return CHK_CONN_ERROR;
}

static void
hello_encode(uint8_t out[HELLO_LEN], const uint8_t token[CHK_TOKEN_LEN], int me,
	     int d)
{
	memcpy(out, token, CHK_TOKEN_LEN);
	out[CHK_TOKEN_LEN] = (uint8_t)((unsigned)me >> 24);
	out[CHK_TOKEN_LEN + 1] = (uint8_t)((unsigned)me >> 16);
	out[CHK_TOKEN_LEN + 2] = (uint8_t)((unsigned)me >> 8);
	out[CHK_TOKEN_LEN + 3] = (uint8_t)me;
	out[CHK_TOKEN_LEN + 4] = (uint8_t)d;
}

/* Tries the addresses from dl->ai on until one connects or is in
 * progress; records the last failure. */
static void dial_step(struct chk_ring *r, struct dial *dl, int d, int err,
		      const uint8_t hello[HELLO_LEN]);

static void
dial_next(struct chk_ring *r, struct dial *dl, int d,
	  const uint8_t hello[HELLO_LEN])
{
	for (; dl->ai; dl->ai = dl->ai->ai_next) {
		dl->fd = socket(dl->ai->ai_family,
				SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (dl->fd < 0) {
			r->conn[d] = CHK_CONN_ERROR;
			r->conn_errno[d] = errno;
			continue;
		}
		if (connect(dl->fd, dl->ai->ai_addr, dl->ai->ai_addrlen) == 0) {
			dial_step(r, dl, d, 0, hello);
			return;
		}
		if (errno == EINPROGRESS)
			return;
		r->conn[d] = conn_code(errno);
		r->conn_errno[d] = errno;
		ddp_close(&dl->fd);
	}
	dl->done = 1;
}

/* The connection attempt on dl->fd ended with err (0: connected): sends
 * the hello, or moves on to the next address. */
static void
dial_step(struct chk_ring *r, struct dial *dl, int d, int err,
	  const uint8_t hello[HELLO_LEN])
{
	ssize_t n;

	if (!err) {
		n = send(dl->fd, hello, HELLO_LEN, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n == HELLO_LEN) {
			r->out[d] = dl->fd;
			dl->fd = -1;
			r->conn[d] = CHK_CONN_OK;
			r->conn_errno[d] = 0;
			dl->done = 1;
			return;
		}
		err = n < 0 ? errno : EPROTO;
	}
	ddp_close(&dl->fd);
	r->conn[d] = conn_code(err);
	r->conn_errno[d] = err;
	dl->ai = dl->ai->ai_next;
	dial_next(r, dl, d, hello);
}

static void
dial_start(struct chk_ring *r, struct dial *dl, int d,
	   const struct chk_target *to, const uint8_t hello[HELLO_LEN])
{
	struct addrinfo hints;
	char service[16];

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	ddp_fmt(service, sizeof(service), "%d", to->port);
	if (getaddrinfo(to->host, service, &hints, &dl->res) != 0) {
		dl->res = NULL;
		r->conn[d] = CHK_CONN_UNRESOLVED;
		dl->done = 1;
		return;
	}
	dl->ai = dl->res;
	dial_next(r, dl, d, hello);
}

/* The directions in use: ndir of the ring's, and the warm-up. */
static int
active(int ndir, int d)
{
	return d < ndir || d == CHK_WARM;
}

/* ---- refusals: the first few one per line, then summarised ---- */

/* Words the refusals' lines of ring r (struct chk_ring) for r->refused. */
static void
refuse_line(void *arg, const struct ddp_guard_line *l)
{
	struct chk_ring *r = arg;
	char line[512];

	if (!r->refused)
		return;
	/* A cut line is still worth showing. */
	switch (l->kind) {
	case DDP_GUARD_ONE:
	case DDP_GUARD_LAST:
		ddp_fmt(line, sizeof(line),
			"refused a link-test connection from %s: %s%s", l->from,
			l->why,
			l->kind == DDP_GUARD_LAST
				? " (further refusals are counted and "
				  "summarised every 10 s)"
				: "");
		break;
	case DDP_GUARD_SUMMARY:
		ddp_fmt(line, sizeof(line),
			"refused %lu more link-test connection%s in the last "
			"%.0f s (%lu in all; the latest from %s: %s)",
			l->count, l->count == 1 ? "" : "s", l->seconds,
			l->total, l->from, l->why);
		break;
	default:
		return;
	}
	r->refused(r->refused_arg, line);
}

/* The summary of the refusals not logged yet, when it is due (force:
 * now). */
static void
refuse_flush(struct chk_ring *r, int force)
{
	ddp_guard_flush(&r->ref, ddp_now(), force);
}

static void
refuse_log(struct chk_ring *r, const char *from, const char *why)
{
	ddp_guard_refused(&r->ref, ddp_now(), from, why);
}

/* ---- the pending connections ---- */

static void
pend_drop(struct listener *l, int i, const char *why)
{
	if (why)
		refuse_log(l->r, l->p[i].from, why);
	ddp_close(&l->p[i].fd);
	l->p[i] = l->p[--l->np];
	ddp_guard_remove(&l->guard, i);
}

/* Reads a pending connection's hello; adopts it as in[d] when it is the
 * expected source's, with the token. */
static void
pend_read(struct listener *l, int i)
{
	struct chk_ring *r = l->r;
	struct pend *p = &l->p[i];
	uint8_t diff = 0;
	unsigned node;
	ssize_t n;
	int k, d;

	n = recv(p->fd, p->buf + p->have, HELLO_LEN - p->have, MSG_DONTWAIT);
	if (n == 0)
		return pend_drop(l, i, "closed before its hello");
	if (n < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			pend_drop(l, i, strerror(errno));
		return;
	}
	p->have += (size_t)n;
	if (p->have < HELLO_LEN)
		return;
	for (k = 0; k < CHK_TOKEN_LEN; k++)
		diff |= (uint8_t)(p->buf[k] ^ l->token[k]);
	if (diff)
		return pend_drop(l, i,
				 "wrong token (not a rank of this check)");
	node = (unsigned)p->buf[CHK_TOKEN_LEN] << 24 |
	       (unsigned)p->buf[CHK_TOKEN_LEN + 1] << 16 |
	       (unsigned)p->buf[CHK_TOKEN_LEN + 2] << 8 |
	       (unsigned)p->buf[CHK_TOKEN_LEN + 3];
	d = p->buf[CHK_TOKEN_LEN + 4];
	if (!active(l->ndir, d) || r->in[d] >= 0 ||
	    node != (unsigned)l->from[d == CHK_WARM ? CHK_FWD : d].node)
		return pend_drop(l, i, "unexpected node or direction");
	r->in[d] = p->fd;
	p->fd = -1;
	pend_drop(l, i, NULL);
}

/* Makes room for a newcomer from addr: reads a would-be victim first (its
 * hello may be waiting, which saves it), then evicts one. */
static void
pend_make_room(struct listener *l, const char *addr)
{
	int tries, v = -1, n;

	for (tries = 0; tries < 3; tries++) {
		v = ddp_guard_admit(&l->guard, addr);
		if (v < 0)
			return;
		n = l->np;
		pend_read(l, v);
		if (l->np == n)
			break; /* still waiting for its hello */
		v = -1;
	}
	if (v < 0)
		v = ddp_guard_admit(&l->guard, addr);
	if (v >= 0)
		pend_drop(l, v,
			  "evicted to make room for newer connections (too "
			  "many pending)");
}

static void
accept_new(struct listener *l)
{
	struct sockaddr_storage ss;
	struct pend *p;
	socklen_t sl;
	char addr[INET6_ADDRSTRLEN], from[INET6_ADDRSTRLEN + 8];
	int fd, k, port;

	for (k = 0; k < ACCEPT_BATCH; k++) {
		sl = sizeof(ss);
		fd = accept4(l->r->lfd, (struct sockaddr *)&ss, &sl,
			     SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		ddp_net_sa_format(&ss, addr, sizeof(addr), &port);
		ddp_fmt(from, sizeof(from), "%s:%d", addr, port);
		pend_make_room(l, addr);
		if (l->np == MAX_PENDING) {
			refuse_log(l->r, from, "too many pending connections");
			close(fd);
			continue;
		}
		p = &l->p[l->np++];
		memset(p, 0, sizeof(*p));
		p->fd = fd;
		ddp_guard_add(&l->guard, addr);
		ddp_fmt(p->from, sizeof(p->from), "%s", from);
	}
}

/* The poll set of a connect round: the listener (who -1), the dials
 * under way (100 + direction), the pending hellos (their index). */
static int
connect_pollset(const struct listener *l, const struct dial *dl,
		struct pollfd *pfd, int *who)
{
	int n = 0, d, i;

	pfd[n].fd = l->r->lfd;
	pfd[n].events = POLLIN;
	who[n++] = -1;
	for (d = 0; d < CHK_NDIRS; d++) {
		if (dl[d].done || dl[d].fd < 0)
			continue;
		pfd[n].fd = dl[d].fd;
		pfd[n].events = POLLOUT;
		who[n++] = 100 + d;
	}
	for (i = 0; i < l->np; i++) {
		pfd[n].fd = l->p[i].fd;
		pfd[n].events = POLLIN;
		who[n++] = i;
	}
	return n;
}

/* The dials' outcome (an unfinished one timed out), their resources
 * released: 0 when every active direction connected both ways. */
static int
connect_finish(struct chk_ring *r, int ndir, struct dial *dl)
{
	int d, rc = 0;

	for (d = 0; d < CHK_NDIRS; d++) {
		if (!active(ndir, d))
			continue;
		if (!dl[d].done) {
			r->conn[d] = CHK_CONN_TIMEOUT;
			r->conn_errno[d] = ETIMEDOUT;
		}
		if (r->conn[d] != CHK_CONN_OK || r->in[d] < 0)
			rc = -1;
		ddp_close(&dl[d].fd);
		if (dl[d].res)
			freeaddrinfo(dl[d].res);
	}
	return rc;
}

int
chk_ring_connect(struct chk_ring *r, int me, int ndir,
		 const struct chk_target to[2], const struct chk_target from[2],
		 const uint8_t token[CHK_TOKEN_LEN], double deadline)
{
	struct pollfd pfd[1 + CHK_NDIRS + MAX_PENDING];
	int who[1 + CHK_NDIRS + MAX_PENDING];
	struct dial dl[CHK_NDIRS];
	/* Unlike the rendezvous, the guard spares no connection for what
	 * it sent before its whole hello: a token prefix that saved a
	 * connection would let a stranger guess the token byte by byte
	 * from what survives. */
	struct listener l = {
		.r = r,
		.guard = {.max = MAX_PENDING, .per_source = PER_SOURCE_MAX},
		.ndir = ndir,
		.from = from,
		.token = token};
	uint8_t hello[CHK_NDIRS][HELLO_LEN];
	int n, i, d, err, left, rc;
	socklen_t sl;
	double now;

	r->ref.log = refuse_line;
	r->ref.arg = r;
	memset(dl, 0, sizeof(dl));
	for (d = 0; d < CHK_NDIRS; d++) {
		dl[d].fd = -1;
		dl[d].done = !active(ndir, d);
		r->conn[d] = CHK_CONN_NONE;
	}
	for (d = 0; d < CHK_NDIRS; d++) {
		if (!active(ndir, d))
			continue;
		hello_encode(hello[d], token, me, d);
		dial_start(r, &dl[d], d, &to[d == CHK_WARM ? CHK_FWD : d],
			   hello[d]);
	}
	for (;;) {
		left = 0;
		for (d = 0; d < CHK_NDIRS; d++)
			if (active(ndir, d))
				left += !dl[d].done + (r->in[d] < 0);
		now = ddp_now();
		if (!left || now >= deadline)
			break;
		n = connect_pollset(&l, dl, pfd, who);
		if (poll(pfd, (nfds_t)n, (int)((deadline - now) * 1000) + 1) <
			    0 &&
		    errno != EINTR)
			break;
		/* Pending slots backwards: dropping one moves the last. */
		for (i = n - 1; i >= 1; i--) {
			if (!pfd[i].revents)
				continue;
			if (who[i] >= 100) {
				d = who[i] - 100;
				err = 0;
				sl = sizeof(err);
				if (getsockopt(dl[d].fd, SOL_SOCKET, SO_ERROR,
					       &err, &sl) < 0)
					err = errno;
				dial_step(r, &dl[d], d, err, hello[d]);
			} else if (who[i] < l.np &&
				   l.p[who[i]].fd == pfd[i].fd) {
				pend_read(&l, who[i]);
			}
		}
		if (pfd[0].revents & POLLIN)
			accept_new(&l);
		refuse_flush(r, 0);
	}
	rc = connect_finish(r, ndir, dl);
	while (l.np > 0)
		pend_drop(&l, l.np - 1, NULL);
	refuse_flush(r, 1);
	return rc;
}

/* The receiver's go-ahead, one byte back on the stream's connection. */
#define GO_BYTE 'g'

/* The sending side of a stream, its socket ready: first the receiver's
 * go-ahead (*told), then data. 0 when the stream has ended. */
static int
sender_step(int fd, uint8_t *buf, int *told)
{
	uint8_t go;
	ssize_t k;

	if (!*told) {
		k = recv(fd, &go, 1, MSG_DONTWAIT);
		if (k == 1)
			*told = 1;
		else if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK &&
				    errno != EINTR))
			return 0;
		return 1;
	}
	k = send(fd, buf, CHUNK, MSG_NOSIGNAL | MSG_DONTWAIT);
	return !(k < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
		 errno != EINTR);
}

int
chk_ring_stream(struct chk_ring *r, int d, double window_s, double deadline,
		double *gbps, int *recv_err)
{
	struct pollfd pfd[2];
	double t_first = 0, now;
	uint64_t bytes = 0;
	uint8_t *buf = NULL, go = GO_BYTE;
	int sending = 1, receiving = 1, told = 0, n, is, ir, rc = -1;
	ssize_t k;

	*gbps = 0;
	*recv_err = 0;
	buf = calloc(1, CHUNK);
	if (!buf) {
		*recv_err = ENOMEM;
		goto out;
	}
	/* This node is free to receive: its source may start. */
	if (send(r->in[d], &go, 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1) {
		*recv_err = errno ? errno : EPROTO;
		receiving = 0;
	}
	while ((sending || receiving) && (now = ddp_now()) < deadline) {
		n = 0;
		is = ir = -1;
		if (sending) {
			pfd[n].fd = r->out[d];
			pfd[n].events = told ? POLLOUT : POLLIN;
			is = n++;
		}
		if (receiving) {
			pfd[n].fd = r->in[d];
			pfd[n].events = POLLIN;
			ir = n++;
		}
		if (poll(pfd, (nfds_t)n, (int)((deadline - now) * 1000) + 1) <
			    0 &&
		    errno != EINTR)
			break;
		now = ddp_now();
		/* The sender waits for its receiver's go-ahead; the receiver
		 * ends the stream (a reset), which is how the sender learns
		 * that the far window is over. */
		if (is >= 0 && pfd[is].revents)
			sending = sender_step(r->out[d], buf, &told);
		if (ir < 0 || !pfd[ir].revents)
			continue;
		k = recv(r->in[d], buf, CHUNK, MSG_DONTWAIT);
		if (k > 0) {
			if (!t_first)
				t_first = now;
			bytes += (uint64_t)k;
		} else if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK &&
				      errno != EINTR)) {
			*recv_err = k == 0 ? ECONNRESET : errno;
			receiving = 0;
		}
		if (receiving && t_first && now - t_first >= window_s) {
			*gbps = (double)bytes / (now - t_first) / 1e9;
			receiving = 0;
			abort_close(&r->in[d]);
		}
	}
	/* Out of time: a stream that started is measured as far as it got. */
	if (receiving && !*recv_err && t_first && ddp_now() > t_first)
		*gbps = (double)bytes / (ddp_now() - t_first) / 1e9;
	else if (receiving && !*recv_err)
		*recv_err = ETIMEDOUT;
	rc = *recv_err ? -1 : 0;
out:
	abort_close(&r->out[d]);
	abort_close(&r->in[d]);
	free(buf);
	return rc;
}

/* ---- the node's hold ---- */

/* An abstract name no one can guess before the leader binds it, and that
 * tells nothing of the token once /proc/net/unix shows it. */
static socklen_t
hold_addr(struct sockaddr_un *sa, const uint8_t token[CHK_TOKEN_LEN], int node)
{
	static const char tag[] = "ddp-check hold";
	unsigned char h[DDP_SHA256_LEN];
	uint8_t be[4] = {(uint8_t)((unsigned)node >> 24),
			 (uint8_t)((unsigned)node >> 16),
			 (uint8_t)((unsigned)node >> 8), (uint8_t)node};
	struct ddp_sha256 st;

	ddp_sha256_init(&st);
	ddp_sha256_update(&st, tag, sizeof(tag));
	ddp_sha256_update(&st, token, CHK_TOKEN_LEN);
	ddp_sha256_update(&st, be, sizeof(be));
	ddp_sha256_final(&st, h);
	return ddp_net_abstract_name(sa, "ddp-check-", h);
}

int
chk_hold_open(const uint8_t token[CHK_TOKEN_LEN], int node, char *err,
	      size_t errlen)
{
	struct sockaddr_un sa;
	socklen_t sl = hold_addr(&sa, token, node);
	int fd;

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sl) < 0 ||
	    listen(fd, SOMAXCONN) < 0) {
		ddp_fmt(err, errlen,
			"cannot open the node's hold socket: %s (the node's "
			"other ranks wait in libddp instead)",
			strerror(errno));
		ddp_close(&fd);
		return -1;
	}
	return fd;
}

int
chk_hold_join(const uint8_t token[CHK_TOKEN_LEN], int node)
{
	struct sockaddr_un sa;
	socklen_t sl = hold_addr(&sa, token, node);
	int fd;

	/* Non-blocking: a full backlog is a refusal, not a wait. */
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sl) < 0)
		ddp_close(&fd);
	return fd;
}

int
chk_hold_wait(int fd, double deadline)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	double now;
	int n;

	while ((now = ddp_now()) < deadline) {
		n = poll(&pfd, 1, (int)((deadline - now) * 1000) + 1);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -1;
	}
	return -1;
}
