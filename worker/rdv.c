/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rendezvous: rank 0 listens on MASTER_PORT, every rank proves its uid,
 * job and step with munge, then every pair of ranks gets one connection.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <munge.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ddp_util.h"
#include "wk.h"

#define MAX_PENDING 64
/* A genuine rank sends its hello right after connecting. */
#define HELLO_GRACE_S 10.0

struct auth {
	int on;
	munge_ctx_t ctx;
	const char *job;
	const char *step;
	int world;
	char socket[DDP_HOST_MAX];
};

struct pend {
	int fd;
	uint8_t *buf;
	size_t have;
	size_t need;
	double deadline;
	char from[WK_ADDR_LEN + 8];
	char addr[WK_ADDR_LEN];
};

/* State of one rank's rendezvous. */
struct rdv {
	struct ddp_comm *comm;
	struct auth auth;
	int lfd; /* master listener (rank 0) or data listener (others) */
	int lport;
	uint8_t token[WK_TOKEN_LEN];
	struct pend pend[MAX_PENDING];
	int npend;
	const struct ddp_config *cfg;
};

static void
xclose(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static int
io_wait(int fd, short ev, double deadline)
{
	struct pollfd p = {.fd = fd, .events = ev};
	double left;
	int rc;

	for (;;) {
		left = deadline - wk_now();
		if (left <= 0)
			return 0;
		rc = poll(&p, 1, (int)(left * 1000) + 1);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0)
			return -1;
		if (rc > 0)
			return 1;
	}
}

/* Writes all of buf before deadline: 0, or -1 with errno (ETIMEDOUT). */
static int
send_all(int fd, const void *buf, size_t len, double deadline)
{
	const uint8_t *p = buf;
	ssize_t n;
	int rc;

	while (len) {
		n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return -1;
		rc = io_wait(fd, POLLOUT, deadline);
		if (rc <= 0) {
			if (rc == 0)
				errno = ETIMEDOUT;
			return -1;
		}
	}
	return 0;
}

/* Reads exactly len bytes: 0, 1 on EOF, -1 with errno (ETIMEDOUT). */
static int
recv_all(int fd, void *buf, size_t len, double deadline)
{
	uint8_t *p = buf;
	ssize_t n;
	int rc;

	while (len) {
		n = recv(fd, p, len, MSG_DONTWAIT);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == 0)
			return 1;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -1;
		rc = io_wait(fd, POLLIN, deadline);
		if (rc <= 0) {
			if (rc == 0)
				errno = ETIMEDOUT;
			return -1;
		}
	}
	return 0;
}

/*
 * Reads one rendezvous message; *body (malloc'd, caller frees) receives
 * its body. Returns DDP_OK or an error naming what.
 */
static enum ddp_status
recv_msg(int fd, double deadline, const char *what, uint16_t *type,
	 uint8_t **body, uint32_t *blen)
{
	uint8_t hdr[RDV_HDR_LEN];
	char why[256];
	int rc;

	*body = NULL;
	rc = recv_all(fd, hdr, sizeof(hdr), deadline);
	if (rc == 0 && rdv_parse_header(hdr, sizeof(hdr), type, blen, why,
					sizeof(why)) < 0)
		return wk_err(DDP_ERR_RENDEZVOUS, "%s: %s", what, why);
	if (rc == 0) {
		*body = malloc(*blen ? *blen : 1);
		if (!*body)
			return wk_err(DDP_ERR_NOMEM, "%s: out of memory", what);
		rc = recv_all(fd, *body, *blen, deadline);
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

static void
tune_socket(int fd)
{
	static long wmax = -2;
	int one = 1, size = 4 << 20;
	FILE *f;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* Setting SO_SNDBUF disables autotuning; only do it when the
	 * kernel would grant the full size. */
	if (wmax == -2) {
		wmax = -1;
		f = fopen("/proc/sys/net/core/wmem_max", "r");
		if (f) {
			if (fscanf(f, "%ld", &wmax) != 1)
				wmax = -1;
			fclose(f);
		}
	}
	if (wmax >= size) {
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
	}
}

/* Numeric address of the far end; v4-mapped IPv6 shown as IPv4. */
static void
peer_addr(int fd, char *addr, size_t addrlen, int *port)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

	ddp_fmt(addr, addrlen, "?");
	*port = 0;
	if (getpeername(fd, (struct sockaddr *)&ss, &sl) < 0)
		return;
	if (ss.ss_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
		inet_ntop(AF_INET, &s6->sin6_addr.s6_addr[12], addr,
			  (socklen_t)addrlen);
		*port = ntohs(s6->sin6_port);
	} else if (ss.ss_family == AF_INET6) {
		inet_ntop(AF_INET6, &s6->sin6_addr, addr, (socklen_t)addrlen);
		*port = ntohs(s6->sin6_port);
	} else if (ss.ss_family == AF_INET) {
		inet_ntop(AF_INET, &s4->sin_addr, addr, (socklen_t)addrlen);
		*port = ntohs(s4->sin_port);
	}
}

/* Listens on port (0: ephemeral) on every address, IPv6 dual-stack when
 * available. Returns the fd and the bound port, or -1 with errno. */
static int
listen_any(int port, int *bound)
{
	struct sockaddr_in6 s6;
	struct sockaddr_in s4;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int fd, one = 1, zero = 0, err;

	fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd >= 0) {
		memset(&s6, 0, sizeof(s6));
		s6.sin6_family = AF_INET6;
		s6.sin6_addr = in6addr_any;
		s6.sin6_port = htons((uint16_t)port);
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		if (bind(fd, (struct sockaddr *)&s6, sizeof(s6)) == 0)
			goto bound;
		err = errno;
		close(fd);
		if (err == EADDRINUSE) {
			errno = err;
			return -1;
		}
	}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	memset(&s4, 0, sizeof(s4));
	s4.sin_family = AF_INET;
	s4.sin_addr.s_addr = htonl(INADDR_ANY);
	s4.sin_port = htons((uint16_t)port);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&s4, sizeof(s4)) < 0)
		goto fail;
bound:
	if (listen(fd, SOMAXCONN) < 0)
		goto fail;
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
		goto fail;
	*bound = ss.ss_family == AF_INET6
			 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
			 : ntohs(((struct sockaddr_in *)&ss)->sin_port);
	return fd;
fail:
	err = errno;
	close(fd);
	errno = err;
	return -1;
}

/*
 * One non-blocking connection attempt to host:port, bounded by deadline.
 * Returns the connected fd, or -1 with a reason in why.
 */
static int
connect_once(const char *host, int port, double deadline, char *why,
	     size_t whylen)
{
	struct addrinfo hints, *res = NULL, *ai;
	char service[16];
	socklen_t sl;
	int fd = -1, rc, soerr = 0;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	ddp_fmt(service, sizeof(service), "%d", port);
	rc = getaddrinfo(host, service, &hints, &res);
	if (rc != 0) {
		ddp_fmt(why, whylen, "cannot resolve '%s': %s", host,
			gai_strerror(rc));
		return -1;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family,
			    ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0) {
			ddp_fmt(why, whylen, "socket: %s", strerror(errno));
			continue;
		}
		rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
		if (rc < 0 && errno == EINPROGRESS) {
			rc = io_wait(fd, POLLOUT, deadline);
			if (rc == 0) {
				ddp_fmt(why, whylen,
					"connection timed out (packets "
					"dropped?)");
				xclose(&fd);
				continue;
			}
			sl = sizeof(soerr);
			if (rc < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR,
						 &soerr, &sl) < 0)
				soerr = errno;
			rc = soerr ? -1 : 0;
			errno = soerr;
		}
		if (rc == 0)
			break;
		ddp_fmt(why, whylen, "%s", strerror(errno));
		xclose(&fd);
	}
	freeaddrinfo(res);
	return fd;
}

/* Retries connect_once with back-off until deadline. */
static int
connect_retry(const char *host, int port, double deadline, char *why,
	      size_t whylen)
{
	double delay = 0.05, now, attempt;
	int fd;

	for (;;) {
		now = wk_now();
		attempt = now + 5.0 < deadline ? now + 5.0 : deadline;
		fd = connect_once(host, port, attempt, why, whylen);
		if (fd >= 0)
			return fd;
		now = wk_now();
		if (now + delay >= deadline)
			return -1;
		usleep((useconds_t)(delay * 1e6));
		delay = delay * 2 < 1.0 ? delay * 2 : 1.0;
	}
}

static enum ddp_status
auth_init(struct auth *a, const struct ddp_config *cfg)
{
	munge_err_t e;

	memset(a, 0, sizeof(*a));
	a->on = cfg->auth;
	a->job = cfg->job_id;
	a->step = cfg->step_id;
	a->world = cfg->world_size;
	ddp_fmt(a->socket, sizeof(a->socket), "%s",
		cfg->munge_socket[0] ? cfg->munge_socket
				     : "munge's default socket");
	if (!a->on)
		return DDP_OK;
	a->ctx = munge_ctx_create();
	if (!a->ctx)
		return wk_err(DDP_ERR_NOMEM, "munge_ctx_create failed");
	if (cfg->munge_socket[0]) {
		e = munge_ctx_set(a->ctx, MUNGE_OPT_SOCKET, cfg->munge_socket);
		if (e != EMUNGE_SUCCESS)
			return wk_err(DDP_ERR_AUTH,
				      "munge: cannot use socket %s: %s",
				      cfg->munge_socket, munge_strerror(e));
	}
	return DDP_OK;
}

static void
auth_fini(struct auth *a)
{
	if (a->ctx)
		munge_ctx_destroy(a->ctx);
	a->ctx = NULL;
}

/* A credential proving this process's uid, bound to kind/job/step/rank. */
static enum ddp_status
auth_encode(struct auth *a, const char *kind, int rank, char *out,
	    size_t outlen)
{
	char payload[512];
	char *cred = NULL;
	munge_err_t e;
	enum ddp_status st = DDP_OK;

	if (!a->on) {
		ddp_fmt(out, outlen, "none");
		return DDP_OK;
	}
	if (rdv_cred_payload(payload, sizeof(payload), kind, a->job, a->step,
			     rank, a->world) < 0)
		return wk_err(DDP_ERR_INVALID, "job or step id too long");
	e = munge_encode(&cred, a->ctx, payload, (int)strlen(payload));
	if (e != EMUNGE_SUCCESS) {
		st = wk_err(DDP_ERR_AUTH,
			    "munge cannot encode a credential: %s (is munged "
			    "running on this node? socket: %s; set "
			    "DDP_MUNGE_SOCKET to use another)",
			    munge_ctx_strerror(a->ctx), a->socket);
	} else if (ddp_fmt(out, outlen, "%s", cred) < 0) {
		st = wk_err(DDP_ERR_AUTH, "munge credential too long");
	}
	free(cred);
	return st;
}

/* Makes a peer-supplied string printable in a log line. */
static void
sanitize(char *dst, size_t dlen, const void *src, size_t slen)
{
	const unsigned char *s = src;
	size_t i, o = 0;

	for (i = 0; i < slen && o + 1 < dlen; i++)
		dst[o++] = (s[i] >= 0x20 && s[i] < 0x7f) ? (char)s[i] : '?';
	dst[o] = '\0';
}

/* 0 when cred proves this uid, job, step, kind and rank; else -1 + why. */
static int
auth_verify(struct auth *a, const char *cred, const char *kind, int rank,
	    char *why, size_t whylen)
{
	char want[512], got[256];
	void *buf = NULL;
	int len = 0, rv = -1;
	uid_t uid = (uid_t)-1;
	gid_t gid = (gid_t)-1;
	munge_err_t e;

	if (!a->on) {
		if (strcmp(cred, "none") == 0)
			return 0;
		ddp_fmt(why, whylen,
			"DDP_AUTH=none here, but the peer sent "
			"a credential");
		return -1;
	}
	if (rdv_cred_payload(want, sizeof(want), kind, a->job, a->step, rank,
			     a->world) < 0) {
		ddp_fmt(why, whylen, "job or step id too long");
		return -1;
	}
	e = munge_decode(cred, a->ctx, &buf, &len, &uid, &gid);
	if (e != EMUNGE_SUCCESS) {
		ddp_fmt(why, whylen, "invalid munge credential: %s",
			munge_ctx_strerror(a->ctx));
		goto out;
	}
	if (uid != geteuid()) {
		ddp_fmt(why, whylen,
			"credential of uid %u, but this job runs as uid %u",
			(unsigned)uid, (unsigned)geteuid());
		goto out;
	}
	if (len < 0 || (size_t)len != strlen(want) || !buf ||
	    memcmp(buf, want, (size_t)len) != 0) {
		sanitize(got, sizeof(got), buf ? buf : "",
			 buf ? (size_t)len : 0);
		ddp_fmt(why, whylen,
			"credential is for '%s', expected '%s' (another job "
			"or step of the same user?)",
			got, want);
		goto out;
	}
	rv = 0;
out:
	free(buf);
	return rv;
}

static void
pend_drop(struct rdv *r, int i, const char *reason)
{
	struct wk_buf b = {0};

	if (reason) {
		wk_log(0,
		       "rank %d refused connection from %s: %s (still "
		       "waiting for the job's ranks)",
		       r->comm->rank, r->pend[i].from, reason);
		/* Tell the other side why; best effort, never block. */
		if (rdv_encode_text(&b, RDV_REFUSE, reason) == 0 &&
		    send(r->pend[i].fd, b.p, b.len,
			 MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
			wk_log(3, "refusal not delivered: %s", strerror(errno));
		wk_buf_free(&b);
	}
	xclose(&r->pend[i].fd);
	free(r->pend[i].buf);
	r->pend[i] = r->pend[--r->npend];
}

/* Moves a verified connection to comm->peers[rank]. */
static void
pend_adopt(struct rdv *r, int i, int rank)
{
	struct wk_peer *p = &r->comm->peers[rank];

	p->fd = r->pend[i].fd;
	r->pend[i].fd = -1;
	ddp_fmt(p->addr, sizeof(p->addr), "%s", r->pend[i].addr);
	pend_drop(r, i, NULL);
}

static const char *
missing_ranks(struct rdv *r, int from, char *buf, size_t size)
{
	size_t off = 0;
	int i, n = 0;

	buf[0] = '\0';
	for (i = from; i < r->comm->size; i++) {
		if (r->comm->peers[i].fd >= 0)
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

/* Handles one complete message of pending connection i. */
static void
pend_message(struct rdv *r, int i, int peer_mode)
{
	struct ddp_comm *c = r->comm;
	struct pend *p = &r->pend[i];
	const uint8_t *body = p->buf + RDV_HDR_LEN;
	size_t blen = p->need - RDV_HDR_LEN;
	struct rdv_hello *h = NULL;
	struct rdv_peer_hello ph;
	struct wk_buf b = {0};
	char why[512], cred[WK_MAX_CRED];
	uint8_t diff = 0;
	int k, port;

	if (peer_mode) {
		if (rdv_parse_peer(body, blen, &ph, why, sizeof(why)) < 0)
			goto refuse;
		for (k = 0; k < WK_TOKEN_LEN; k++)
			diff |= (uint8_t)(ph.token[k] ^ r->token[k]);
		if (diff) {
			ddp_fmt(why, sizeof(why), "wrong job token");
			goto refuse;
		}
		if ((int)ph.rank <= c->rank || (int)ph.rank >= c->size ||
		    c->peers[ph.rank].fd >= 0) {
			ddp_fmt(why, sizeof(why), "unexpected rank %u",
				ph.rank);
			goto refuse;
		}
		pend_adopt(r, i, (int)ph.rank);
		return;
	}
	h = malloc(sizeof(*h));
	if (!h) {
		ddp_fmt(why, sizeof(why), "out of memory");
		goto refuse;
	}
	if (rdv_parse_hello(body, blen, h, why, sizeof(why)) < 0)
		goto refuse;
	if ((int)h->world != c->size) {
		ddp_fmt(why, sizeof(why),
			"rank %u claims world size %u, this "
			"job has %d",
			h->rank, h->world, c->size);
		goto refuse;
	}
	if (h->rank == 0 || c->peers[h->rank].fd >= 0) {
		ddp_fmt(why, sizeof(why), "rank %u %s", h->rank,
			h->rank ? "already joined" : "is this process");
		goto refuse;
	}
	if (auth_verify(&r->auth, h->cred, "hello", (int)h->rank, why,
			sizeof(why)) < 0)
		goto refuse;
	if (auth_encode(&r->auth, "welcome", (int)h->rank, cred,
			sizeof(cred)) != DDP_OK) {
		/* Our own munge failed: not the peer's fault. */
		ddp_fmt(why, sizeof(why), "rank 0 cannot authenticate: %s",
			wk_errbuf());
		wk_log(0, "%s", why);
		goto refuse;
	}
	if (rdv_encode_text(&b, RDV_WELCOME, cred) < 0 ||
	    send_all(p->fd, b.p, b.len, wk_now() + HELLO_GRACE_S) < 0) {
		wk_log(0, "rank %d: welcome to rank %u at %s failed: %s",
		       c->rank, h->rank, p->from, strerror(errno));
		pend_drop(r, i, NULL);
		goto out;
	}
	peer_addr(p->fd, c->peers[h->rank].addr, WK_ADDR_LEN, &port);
	ddp_fmt(c->peers[h->rank].host, DDP_HOST_MAX, "%s", h->host);
	c->peers[h->rank].port = h->data_port;
	pend_adopt(r, i, (int)h->rank);
	wk_log(3, "rank 0: rank %u joined from %s (%s)", h->rank,
	       c->peers[h->rank].addr, h->host);
	goto out;
refuse:
	pend_drop(r, i, why);
out:
	wk_buf_free(&b);
	free(h);
}

/* Reads what pending connection i has; handles a complete message. */
static void
pend_read(struct rdv *r, int i, int peer_mode)
{
	struct pend *p = &r->pend[i];
	uint16_t type;
	uint32_t blen;
	char why[256];
	uint8_t *nb;
	ssize_t n;

	n = recv(p->fd, p->buf + p->have, p->need - p->have, MSG_DONTWAIT);
	if (n == 0) {
		pend_drop(r, i, "closed before completing its hello");
		return;
	}
	if (n < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			return;
		ddp_fmt(why, sizeof(why), "read failed: %s", strerror(errno));
		pend_drop(r, i, why);
		return;
	}
	p->have += (size_t)n;
	if (p->have < p->need)
		return;
	if (p->need == RDV_HDR_LEN) {
		if (rdv_parse_header(p->buf, p->have, &type, &blen, why,
				     sizeof(why)) < 0) {
			pend_drop(r, i, why);
			return;
		}
		if (type != (peer_mode ? RDV_PEER : RDV_HELLO)) {
			ddp_fmt(why, sizeof(why), "unexpected message type %u",
				type);
			pend_drop(r, i, why);
			return;
		}
		nb = realloc(p->buf, RDV_HDR_LEN + (size_t)blen);
		if (!nb) {
			pend_drop(r, i, "out of memory");
			return;
		}
		p->buf = nb;
		p->need = RDV_HDR_LEN + (size_t)blen;
		if (blen)
			return;
	}
	pend_message(r, i, peer_mode);
}

static void
accept_new(struct rdv *r)
{
	struct pend *p;
	int fd, port;

	for (;;) {
		fd = accept4(r->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		if (r->npend == MAX_PENDING) {
			/* Flooded: drop the oldest, which had its chance. */
			pend_drop(r, 0, "too many pending connections");
		}
		p = &r->pend[r->npend];
		memset(p, 0, sizeof(*p));
		p->fd = fd;
		p->need = RDV_HDR_LEN;
		p->buf = malloc(RDV_HDR_LEN);
		p->deadline = wk_now() + HELLO_GRACE_S;
		peer_addr(fd, p->addr, sizeof(p->addr), &port);
		ddp_fmt(p->from, sizeof(p->from), "%s:%d", p->addr, port);
		r->npend++;
		if (!p->buf)
			pend_drop(r, r->npend - 1, "out of memory");
	}
}

/*
 * Accepts connections until every rank in [from, size) is connected:
 * hellos with munge credentials (rank 0) or peer hellos with the job token
 * (data listeners). Bad ones are refused and logged; waiting goes on.
 */
static enum ddp_status
accept_ranks(struct rdv *r, int from, int peer_mode, double deadline)
{
	struct pollfd pfd[MAX_PENDING + 1];
	struct ddp_comm *c = r->comm;
	char miss[256];
	double now, wake;
	int i, n, missing, joined;

	for (;;) {
		missing = 0;
		for (i = from; i < c->size; i++)
			missing += c->peers[i].fd < 0;
		if (!missing)
			return DDP_OK;
		now = wk_now();
		if (now >= deadline) {
			joined = c->size - from - missing;
			if (peer_mode)
				return wk_err(
					DDP_ERR_TIMEOUT,
					"rank %d timed out after %g s waiting "
					"for connections from ranks %s on its "
					"data port %d; check that the firewall "
					"between the job's nodes allows TCP "
					"between them (the slurm-ddp prolog "
					"opens it per job)",
					c->rank, c->timeout_s,
					missing_ranks(r, from, miss,
						      sizeof(miss)),
					r->lport);
			return wk_err(
				DDP_ERR_TIMEOUT,
				"rank 0 timed out after %g s waiting for "
				"ranks to join at port %d: %d/%d joined, "
				"missing ranks %s; check that every "
				"rank was started with the same "
				"MASTER_ADDR/MASTER_PORT, and that the "
				"firewall lets TCP port %d through",
				c->timeout_s, r->lport, joined + 1, c->size,
				missing_ranks(r, from, miss, sizeof(miss)),
				r->lport);
		}
		for (i = 0; i < r->npend; i++) {
			if (r->pend[i].deadline <= now) {
				pend_drop(r, i, "no hello within 10 s");
				i--;
			}
		}
		wake = deadline;
		pfd[0].fd = r->lfd;
		pfd[0].events = POLLIN;
		n = 1;
		for (i = 0; i < r->npend; i++) {
			pfd[n].fd = r->pend[i].fd;
			pfd[n].events = POLLIN;
			n++;
			if (r->pend[i].deadline < wake)
				wake = r->pend[i].deadline;
		}
		if (poll(pfd, (nfds_t)n, (int)((wake - now) * 1000) + 1) < 0 &&
		    errno != EINTR)
			return wk_err(DDP_ERR_SYSTEM, "poll: %s",
				      strerror(errno));
		/* Walk pending slots backwards: handling one may move the
		 * last slot into its place. */
		for (i = n - 1; i >= 1; i--) {
			if (i - 1 < r->npend && pfd[i].revents &&
			    r->pend[i - 1].fd == pfd[i].fd)
				pend_read(r, i - 1, peer_mode);
		}
		if (pfd[0].revents & POLLIN)
			accept_new(r);
	}
}

static enum ddp_status
master_side(struct rdv *r, double deadline)
{
	struct ddp_comm *c = r->comm;
	struct rdv_roster_entry *ents = NULL;
	struct wk_buf b = {0};
	enum ddp_status st;
	int i;

	r->lfd = listen_any(r->cfg->master_port, &r->lport);
	if (r->lfd < 0)
		return wk_err(DDP_ERR_RENDEZVOUS,
			      "rank 0 cannot listen on port %d: %s%s",
			      r->cfg->master_port, strerror(errno),
			      errno == EADDRINUSE
				      ? " (another job step or program uses "
					"MASTER_PORT; srun --ddp picks a free "
					"port per step)"
				      : "");
	if (getrandom(r->token, sizeof(r->token), 0) !=
	    (ssize_t)sizeof(r->token))
		return wk_err(DDP_ERR_SYSTEM, "getrandom: %s", strerror(errno));
	st = accept_ranks(r, 1, 0, deadline);
	if (st) {
		/* Tell those who joined why the job will not start. */
		if (rdv_encode_text(&b, RDV_REFUSE, wk_errbuf()) == 0)
			for (i = 1; i < c->size; i++)
				if (c->peers[i].fd >= 0)
					(void)send(c->peers[i].fd, b.p, b.len,
						   MSG_NOSIGNAL | MSG_DONTWAIT);
		goto out;
	}
	ents = calloc((size_t)c->size, sizeof(*ents));
	if (!ents) {
		st = wk_err(DDP_ERR_NOMEM, "rank 0: out of memory");
		goto out;
	}
	for (i = 0; i < c->size; i++) {
		ents[i].port = (uint16_t)c->peers[i].port;
		ddp_fmt(ents[i].addr, sizeof(ents[i].addr), "%s",
			c->peers[i].addr);
		ddp_fmt(ents[i].host, sizeof(ents[i].host), "%s",
			c->peers[i].host);
	}
	if (rdv_encode_roster(&b, (uint32_t)c->size, r->token, ents) < 0) {
		st = wk_err(DDP_ERR_NOMEM, "rank 0: roster too large");
		goto out;
	}
	for (i = 1; i < c->size; i++) {
		if (send_all(c->peers[i].fd, b.p, b.len,
			     wk_now() + c->timeout_s) < 0) {
			st = wk_err(DDP_ERR_PEER,
				    "rank 0: sending the roster to rank %d "
				    "(%s) failed: %s",
				    i, c->peers[i].host, strerror(errno));
			goto out;
		}
	}
	st = DDP_OK;
out:
	free(ents);
	wk_buf_free(&b);
	return st;
}

static enum ddp_status
worker_side(struct rdv *r, double deadline)
{
	struct ddp_comm *c = r->comm;
	const struct ddp_config *cfg = r->cfg;
	struct rdv_roster_entry *ents = NULL;
	struct rdv_hello *h = NULL;
	struct rdv_peer_hello ph;
	struct wk_buf b = {0};
	char why[512], text[1024];
	uint8_t *body = NULL;
	enum ddp_status st;
	uint16_t type;
	uint32_t blen, world;
	int fd = -1, s;

	r->lfd = listen_any(0, &r->lport);
	if (r->lfd < 0)
		return wk_err(DDP_ERR_SYSTEM, "rank %d: data listener: %s",
			      c->rank, strerror(errno));
	h = calloc(1, sizeof(*h));
	ents = calloc((size_t)c->size, sizeof(*ents));
	if (!h || !ents) {
		st = wk_err(DDP_ERR_NOMEM, "rank %d: out of memory", c->rank);
		goto out;
	}
	h->rank = (uint32_t)c->rank;
	h->world = (uint32_t)c->size;
	h->data_port = (uint16_t)r->lport;
	ddp_fmt(h->host, sizeof(h->host), "%s", c->myhost);
	st = auth_encode(&r->auth, "hello", c->rank, h->cred, sizeof(h->cred));
	if (st)
		goto out;
	if (rdv_encode_hello(&b, h) < 0) {
		st = wk_err(DDP_ERR_NOMEM, "rank %d: hello too large", c->rank);
		goto out;
	}
	fd = connect_retry(cfg->master_addr, cfg->master_port, deadline, why,
			   sizeof(why));
	if (fd < 0) {
		st = wk_err(DDP_ERR_RENDEZVOUS,
			    "rank %d could not reach rank 0 at %s:%d "
			    "(MASTER_ADDR:MASTER_PORT) within %g s: %s. Check "
			    "that rank 0 of this job step is running, that "
			    "all ranks got the same MASTER_ADDR and "
			    "MASTER_PORT, and that the firewall between the "
			    "job's nodes lets TCP port %d through (the "
			    "slurm-ddp prolog opens it per job)",
			    c->rank, cfg->master_addr, cfg->master_port,
			    c->timeout_s, why, cfg->master_port);
		goto out;
	}
	c->peers[0].fd = fd;
	ddp_fmt(c->peers[0].host, DDP_HOST_MAX, "%s", cfg->master_addr);
	if (send_all(fd, b.p, b.len, deadline + 5) < 0) {
		st = wk_err(DDP_ERR_RENDEZVOUS,
			    "rank %d: sending hello to %s:%d failed: %s",
			    c->rank, cfg->master_addr, cfg->master_port,
			    strerror(errno));
		goto out;
	}
	st = recv_msg(fd, wk_now() + c->timeout_s, "waiting for rank 0's reply",
		      &type, &body, &blen);
	if (st)
		goto out;
	if (type == RDV_REFUSE) {
		if (rdv_parse_text(body, blen, text, sizeof(text), why,
				   sizeof(why)) < 0)
			ddp_fmt(text, sizeof(text), "(%s)", why);
		st = wk_err(DDP_ERR_AUTH, "rank 0 at %s:%d refused rank %d: %s",
			    cfg->master_addr, cfg->master_port, c->rank, text);
		goto out;
	}
	if (type != RDV_WELCOME ||
	    rdv_parse_text(body, blen, text, sizeof(text), why, sizeof(why)) <
		    0 ||
	    auth_verify(&r->auth, text, "welcome", c->rank, why, sizeof(why)) <
		    0) {
		if (type != RDV_WELCOME)
			ddp_fmt(why, sizeof(why), "unexpected reply type %u",
				type);
		st = wk_err(DDP_ERR_AUTH,
			    "rank %d: the process at %s:%d is not rank 0 of "
			    "this job (%s); another program may be using "
			    "MASTER_PORT",
			    c->rank, cfg->master_addr, cfg->master_port, why);
		goto out;
	}
	free(body);
	body = NULL;
	/* Rank 0 waits up to its timeout for the slowest rank. */
	st = recv_msg(fd, wk_now() + c->timeout_s + 5,
		      "waiting for the other ranks to join", &type, &body,
		      &blen);
	if (st)
		goto out;
	if (type == RDV_REFUSE) {
		if (rdv_parse_text(body, blen, text, sizeof(text), why,
				   sizeof(why)) < 0)
			ddp_fmt(text, sizeof(text), "(%s)", why);
		st = wk_err(DDP_ERR_RENDEZVOUS, "rank 0 gave up: %s", text);
		goto out;
	}
	if (type != RDV_ROSTER ||
	    rdv_parse_roster(body, blen, (uint32_t)c->size, &world, r->token,
			     ents, why, sizeof(why)) < 0 ||
	    (int)world != c->size) {
		st = wk_err(DDP_ERR_RENDEZVOUS,
			    "rank %d: bad roster from rank 0 (%s)", c->rank,
			    type == RDV_ROSTER ? why : "unexpected message");
		goto out;
	}
	for (s = 0; s < c->size; s++) {
		if (s == c->rank)
			continue;
		ddp_fmt(c->peers[s].host, DDP_HOST_MAX, "%s", ents[s].host);
		ddp_fmt(c->peers[s].addr, WK_ADDR_LEN, "%s", ents[s].addr);
		c->peers[s].port = ents[s].port;
	}
	/* Connect to every lower rank, then accept the higher ones: the
	 * connects complete in the listeners' backlogs, so no cycle. */
	ph.rank = (uint32_t)c->rank;
	memcpy(ph.token, r->token, WK_TOKEN_LEN);
	b.len = 0;
	if (rdv_encode_peer(&b, &ph) < 0) {
		st = wk_err(DDP_ERR_NOMEM, "out of memory");
		goto out;
	}
	deadline = wk_now() + c->timeout_s;
	for (s = 1; s < c->rank; s++) {
		fd = connect_retry(ents[s].addr, ents[s].port, deadline, why,
				   sizeof(why));
		if (fd < 0) {
			st = wk_err(DDP_ERR_RENDEZVOUS,
				    "rank %d could not connect to rank %d at "
				    "%s:%u (%s): %s; the firewall between the "
				    "job's nodes must allow TCP between them "
				    "(the slurm-ddp prolog opens it per job)",
				    c->rank, s, ents[s].addr, ents[s].port,
				    ents[s].host, why);
			goto out;
		}
		c->peers[s].fd = fd;
		if (send_all(fd, b.p, b.len, deadline) < 0) {
			st = wk_err(DDP_ERR_RENDEZVOUS,
				    "rank %d: hello to rank %d (%s) failed: %s",
				    c->rank, s, ents[s].host, strerror(errno));
			goto out;
		}
	}
	st = accept_ranks(r, c->rank + 1, 1, deadline);
out:
	free(body);
	free(h);
	free(ents);
	wk_buf_free(&b);
	return st;
}

enum ddp_status
rdv_connect_all(struct ddp_comm *comm, const struct ddp_config *cfg)
{
	struct rdv *r;
	enum ddp_status st;
	double deadline = wk_now() + cfg->timeout_s;
	int i;

	r = calloc(1, sizeof(*r));
	if (!r)
		return wk_err(DDP_ERR_NOMEM, "rendezvous: out of memory");
	r->comm = comm;
	r->cfg = cfg;
	r->lfd = -1;
	st = auth_init(&r->auth, cfg);
	if (st)
		goto out;
	st = comm->rank == 0 ? master_side(r, deadline)
			     : worker_side(r, deadline);
	if (st)
		goto out;
	for (i = 0; i < comm->size; i++) {
		if (i == comm->rank)
			continue;
		fcntl(comm->peers[i].fd, F_SETFL,
		      fcntl(comm->peers[i].fd, F_GETFL) | O_NONBLOCK);
		tune_socket(comm->peers[i].fd);
	}
out:
	while (r->npend > 0)
		pend_drop(r, r->npend - 1, NULL);
	xclose(&r->lfd);
	auth_fini(&r->auth);
	explicit_bzero(r->token, sizeof(r->token));
	free(r);
	return st;
}
