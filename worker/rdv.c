/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rendezvous: rank 0 listens on MASTER_PORT and proves it is rank 0 of
 * the job with munge before any rank says more than which rank it claims;
 * every rank then proves its uid, job and step the same way, bound to rank
 * 0's nonce and to the connection; then every pair of ranks gets one
 * connection, authenticated with a token rank 0 handed out.
 *
 * What an outsider on the node can still do is deny service (hold the port,
 * flood it); what it must never do is join, read the roster or relay a
 * rank's credential to rank 0. Against floods: a bounded pending table
 * that evicts the busiest source's oldest connection that has not said
 * anything valid yet, refusal logs summarised after the first few, and
 * ranks that connect again when rank 0 drops them or a squatter answers.
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
#include <sys/un.h>
#include <unistd.h>

#include "ddp_util.h"
#include "wk.h"

#define MAX_PENDING 256
/* One address may hold at most this many pending connections: the ranks
 * of one node connect from one address, so it is generous. */
#define PER_SOURCE_MAX 64
#define SRC_SLOTS (2 * MAX_PENDING) /* a power of two */
/* Connections accepted per wake-up, so that a flood of connects does not
 * starve the reads of those already pending. */
#define ACCEPT_BATCH 32
/* A genuine rank sends its open right after connecting and its hello one
 * munge round trip after rank 0's proof. */
#define HELLO_GRACE_S 10.0
/* Refusals logged one per line; then one summary line per interval. */
#define REFUSE_LOG_FIRST 8
#define REFUSE_LOG_EVERY_S 10.0
/* How long a rank waits for each reply of rank 0 before it connects
 * again (rank 0 answers an open or a hello at once). */
#define REPLY_WAIT_S 10.0

struct auth {
	int on;
	/* munge_decode leaves the decoded credential's options (or garbage
	 * from a forged one) in its context: encoding uses its own. */
	munge_ctx_t enc;
	munge_ctx_t dec;
	const char *job;
	const char *step;
	int world;
	char socket[DDP_HOST_MAX];
};

struct pend {
	int fd;
	int stage; /* rank 0: 0 open expected, 1 proof sent, hello expected */
	uint32_t rank; /* claimed in the open */
	uint32_t src;  /* hash of addr, to count connections per source */
	uint64_t seq;  /* arrival order */
	uint8_t nonce[RDV_NONCE_LEN];
	uint8_t *buf;
	size_t have;
	size_t need;
	double deadline;
	char from[WK_ADDR_LEN + 8]; /* ADDR:PORT */
	char addr[WK_ADDR_LEN];
};

/* Refusals so far, and those not logged one by one yet. */
struct refusals {
	unsigned long logged;
	unsigned long quiet;
	unsigned long total;
	double since; /* the last line about refusals */
	double next;
	char last_from[WK_ADDR_LEN + 8];
	char last_why[256];
};

/* State of one rank's rendezvous. */
struct rdv {
	struct ddp_comm *comm;
	struct auth auth;
	int lfd; /* master listener (rank 0) or data listener (others) */
	int lport;
	int local_only; /* DDP_AUTH=none on loopback: refuse other hosts */
	uint8_t token[WK_TOKEN_LEN];
	struct pend pend[MAX_PENDING];
	int npend;
	uint64_t seq;
	struct refusals ref;
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
 * its body. Returns DDP_OK or an error naming what; *other_version is set
 * when the peer speaks another version of the protocol (never retried).
 */
static enum ddp_status
recv_msg(int fd, double deadline, const char *what, uint16_t *type,
	 uint8_t **body, uint32_t *blen, int *other_version)
{
	uint8_t hdr[RDV_HDR_LEN];
	char why[256];
	int rc;

	*body = NULL;
	*other_version = 0;
	rc = recv_all(fd, hdr, sizeof(hdr), deadline);
	if (rc == 0 && rdv_parse_header(hdr, sizeof(hdr), type, blen, why,
					sizeof(why)) < 0) {
		*other_version =
			rdv_header_version(hdr, sizeof(hdr)) != 0 &&
			rdv_header_version(hdr, sizeof(hdr)) != RDV_VERSION;
		return wk_err(DDP_ERR_RENDEZVOUS, "%s: %s", what, why);
	}
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

/*
 * The rendezvous sends small messages back to back (welcome, roster):
 * with Nagle's algorithm the second waits for the peer's delayed ack,
 * 20 ms on average. So from the first byte, not only after.
 */
static void
no_delay(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* 1 when sa is a loopback address (127/8, ::1, v4-mapped 127/8). */
static int
sa_loopback(const struct sockaddr *sa)
{
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
	const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;

	if (sa->sa_family == AF_INET)
		return (ntohl(s4->sin_addr.s_addr) >> 24) == 127;
	if (sa->sa_family != AF_INET6)
		return 0;
	if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr))
		return s6->sin6_addr.s6_addr[12] == 127;
	return IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr);
}

/*
 * Numeric address and port of a socket address, v4-mapped IPv6 shown as
 * IPv4, so that both ends of a connection write it the same way.
 */
static void
sa_format(const struct sockaddr_storage *ss, char *addr, size_t addrlen,
	  int *port)
{
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;
	const struct sockaddr_in *s4 = (const struct sockaddr_in *)ss;

	ddp_fmt(addr, addrlen, "?");
	*port = 0;
	if (ss->ss_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
		inet_ntop(AF_INET, &s6->sin6_addr.s6_addr[12], addr,
			  (socklen_t)addrlen);
		*port = ntohs(s6->sin6_port);
	} else if (ss->ss_family == AF_INET6) {
		inet_ntop(AF_INET6, &s6->sin6_addr, addr, (socklen_t)addrlen);
		*port = ntohs(s6->sin6_port);
	} else if (ss->ss_family == AF_INET) {
		inet_ntop(AF_INET, &s4->sin_addr, addr, (socklen_t)addrlen);
		*port = ntohs(s4->sin_port);
	}
}

/* Address and port of this end (local) or the far end of fd. */
static void
sock_addr(int fd, int local, char *addr, size_t addrlen, int *port)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int rc;

	memset(&ss, 0, sizeof(ss));
	rc = local ? getsockname(fd, (struct sockaddr *)&ss, &sl)
		   : getpeername(fd, (struct sockaddr *)&ss, &sl);
	if (rc < 0)
		ss.ss_family = AF_UNSPEC;
	sa_format(&ss, addr, addrlen, port);
}

/*
 * "ADDR:PORT" of the rank's end of a rendezvous connection: the rank's
 * getsockname, rank 0's getpeername. Bound into both credentials.
 */
static void
rank_addr(int fd, int local, char *out, size_t outlen)
{
	char addr[WK_ADDR_LEN];
	int port;

	sock_addr(fd, local, addr, sizeof(addr), &port);
	ddp_fmt(out, outlen, "%s:%d", addr, port);
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
		no_delay(fd);
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

/* Sleeps *delay (never past deadline) and doubles it up to 1 s; 0, or -1
 * when the deadline would pass first. */
static int
back_off(double *delay, double deadline)
{
	if (wk_now() + *delay >= deadline)
		return -1;
	usleep((useconds_t)(*delay * 1e6));
	*delay = *delay * 2 < 1.0 ? *delay * 2 : 1.0;
	return 0;
}

/*
 * Retries connect_once with back-off until deadline. Ranks start at once,
 * rank 0 a little after some: the first retry comes soon.
 */
static int
connect_retry(const char *host, int port, double deadline, char *why,
	      size_t whylen)
{
	double delay = 0.01, now, attempt;
	int fd;

	for (;;) {
		now = wk_now();
		attempt = now + 5.0 < deadline ? now + 5.0 : deadline;
		fd = connect_once(host, port, attempt, why, whylen);
		if (fd >= 0)
			return fd;
		if (back_off(&delay, deadline) < 0)
			return -1;
	}
}

/* 1 when every address host resolves to is a loopback address. */
static int
host_is_loopback(const char *host)
{
	struct addrinfo hints, *res = NULL, *ai;
	int all = 1;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, NULL, &hints, &res) != 0)
		return 0;
	for (ai = res; ai; ai = ai->ai_next)
		if (!sa_loopback(ai->ai_addr))
			all = 0;
	freeaddrinfo(res);
	return all;
}

/*
 * Whether munged answers on its socket, checked before the network is
 * touched: credentials are made only once rank 0 has answered, and a
 * missing munged should not look like a missing rank 0.
 */
static enum ddp_status
auth_probe(struct auth *a)
{
	struct sockaddr_un sun;
	char *path = NULL;
	int fd, rc;

	if (munge_ctx_get(a->enc, MUNGE_OPT_SOCKET, &path) != EMUNGE_SUCCESS ||
	    !path)
		return DDP_OK;
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (ddp_fmt(sun.sun_path, sizeof(sun.sun_path), "%s", path) < 0)
		return DDP_OK;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return DDP_OK;
	rc = connect(fd, (struct sockaddr *)&sun, sizeof(sun));
	close(fd);
	if (rc == 0)
		return DDP_OK;
	return wk_err(DDP_ERR_AUTH,
		      "munged does not answer on %s: %s (is munged running on "
		      "this node? set DDP_MUNGE_SOCKET to use another socket)",
		      path, strerror(errno));
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
	a->enc = munge_ctx_create();
	a->dec = munge_ctx_create();
	if (!a->enc || !a->dec)
		return wk_err(DDP_ERR_NOMEM, "munge_ctx_create failed");
	if (cfg->munge_socket[0]) {
		e = munge_ctx_set(a->enc, MUNGE_OPT_SOCKET, cfg->munge_socket);
		if (e == EMUNGE_SUCCESS)
			e = munge_ctx_set(a->dec, MUNGE_OPT_SOCKET,
					  cfg->munge_socket);
		if (e != EMUNGE_SUCCESS)
			return wk_err(DDP_ERR_AUTH,
				      "munge: cannot use socket %s: %s",
				      cfg->munge_socket, munge_strerror(e));
	}
	return auth_probe(a);
}

static void
auth_fini(struct auth *a)
{
	if (a->enc)
		munge_ctx_destroy(a->enc);
	if (a->dec)
		munge_ctx_destroy(a->dec);
	a->enc = a->dec = NULL;
}

/*
 * A credential proving this process's uid, bound to kind, job, step, rank,
 * rank 0's nonce and the rank's address on this connection. Made anew for
 * every connection, so it is fresh whatever DDP_TIMEOUT is.
 */
static enum ddp_status
auth_encode(struct auth *a, const char *kind, int rank,
	    const uint8_t nonce[RDV_NONCE_LEN], const char *addr, char *out,
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
			     rank, a->world, nonce, addr) < 0)
		return wk_err(DDP_ERR_INVALID, "job or step id too long");
	e = munge_encode(&cred, a->enc, payload, (int)strlen(payload));
	if (e != EMUNGE_SUCCESS) {
		st = wk_err(DDP_ERR_AUTH,
			    "munge cannot encode a credential: %s (is munged "
			    "running on this node? socket: %s; set "
			    "DDP_MUNGE_SOCKET to use another)",
			    munge_ctx_strerror(a->enc), a->socket);
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

/*
 * 0 when cred proves this uid and carries exactly the payload for kind,
 * job, step, rank, nonce and addr; else -1 and why. munged refuses a
 * credential it decoded before (replay) or one past its time to live.
 */
static int
auth_verify(struct auth *a, const char *cred, const char *kind, int rank,
	    const uint8_t nonce[RDV_NONCE_LEN], const char *addr, char *why,
	    size_t whylen)
{
	char want[512], got[512];
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
			     a->world, nonce, addr) < 0) {
		ddp_fmt(why, whylen, "job or step id too long");
		return -1;
	}
	e = munge_decode(cred, a->dec, &buf, &len, &uid, &gid);
	if (e != EMUNGE_SUCCESS) {
		ddp_fmt(why, whylen, "invalid munge credential: %s",
			munge_ctx_strerror(a->dec));
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
			"or step of the same user, or a connection relayed "
			"through another process?)",
			got, want);
		goto out;
	}
	rv = 0;
out:
	free(buf);
	return rv;
}

/* ---- refusals: the first few one per line, then summarised ---- */

static void
refuse_flush(struct rdv *r, int force)
{
	struct refusals *f = &r->ref;
	double now = wk_now();

	if (!f->quiet || (!force && now < f->next))
		return;
	wk_log(0,
	       "rank %d refused %lu more connection%s in the last %.0f s "
	       "(%lu in all; the latest from %s: %s)",
	       r->comm->rank, f->quiet, f->quiet == 1 ? "" : "s",
	       now - f->since, f->total, f->last_from, f->last_why);
	f->quiet = 0;
	f->since = now;
	f->next = now + REFUSE_LOG_EVERY_S;
}

static void
refuse_log(struct rdv *r, const char *from, const char *why)
{
	struct refusals *f = &r->ref;

	f->total++;
	if (f->logged < REFUSE_LOG_FIRST) {
		f->logged++;
		wk_log(0,
		       "rank %d refused connection from %s: %s (still "
		       "waiting for the job's ranks)%s",
		       r->comm->rank, from, why,
		       f->logged == REFUSE_LOG_FIRST
			       ? "; further refusals are counted and "
				 "summarised every 10 s"
			       : "");
		f->since = wk_now();
		f->next = f->since + REFUSE_LOG_EVERY_S;
		return;
	}
	f->quiet++;
	ddp_fmt(f->last_from, sizeof(f->last_from), "%s", from);
	ddp_fmt(f->last_why, sizeof(f->last_why), "%s", why);
	refuse_flush(r, 0);
}

/* ---- rank 0's and the data listeners' pending connections ---- */

/*
 * Closes pending connection i. reason (NULL: none) is logged; tell also
 * sends it to the other side as a REFUSE, in the protocol version it
 * spoke (0: ours). Evictions tell nothing: a genuine rank connects again.
 */
static void
pend_drop(struct rdv *r, int i, const char *reason, int tell, uint16_t version)
{
	struct wk_buf b = {0};

	if (reason) {
		refuse_log(r, r->pend[i].from, reason);
		/* Best effort, never block. */
		if (tell &&
		    rdv_encode_refuse_as(&b, version ? version : RDV_VERSION,
					 reason) == 0 &&
		    send(r->pend[i].fd, b.p, b.len,
			 MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
			wk_log(3, "refusal not delivered: %s", strerror(errno));
		wk_buf_free(&b);
	}
	xclose(&r->pend[i].fd);
	free(r->pend[i].buf);
	r->pend[i] = r->pend[--r->npend];
}

static void
pend_refuse(struct rdv *r, int i, const char *reason)
{
	pend_drop(r, i, reason, 1, 0);
}

/* Moves a verified connection to comm->peers[rank]. */
static void
pend_adopt(struct rdv *r, int i, int rank)
{
	struct wk_peer *p = &r->comm->peers[rank];

	p->fd = r->pend[i].fd;
	r->pend[i].fd = -1;
	ddp_fmt(p->addr, sizeof(p->addr), "%s", r->pend[i].addr);
	pend_drop(r, i, NULL, 0, 0);
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

/* Sends one message to pending connection i; 0 or -1 (dropped). */
static int
pend_send(struct rdv *r, int i, struct wk_buf *b, const char *what)
{
	char why[256];

	if (!b->bad && send_all(r->pend[i].fd, b->p, b->len, wk_now() + 2) == 0)
		return 0;
	ddp_fmt(why, sizeof(why), "sending the %s failed: %s", what,
		b->bad ? "out of memory" : strerror(errno));
	pend_drop(r, i, why, 0, 0);
	return -1;
}

/*
 * An open: the rank it claims. Checked against this job before rank 0
 * spends a munge credential on it; then rank 0's proof, bound to a fresh
 * nonce and to the address the connection comes from.
 */
static void
pend_open(struct rdv *r, int i, const uint8_t *body, size_t blen)
{
	struct ddp_comm *c = r->comm;
	struct pend *p = &r->pend[i];
	struct rdv_proof *pr = NULL;
	struct rdv_open o;
	struct wk_buf b = {0};
	char why[512];

	if (rdv_parse_open(body, blen, &o, why, sizeof(why)) < 0)
		goto refuse;
	if (strcmp(o.job, r->auth.job) != 0 ||
	    strcmp(o.step, r->auth.step) != 0) {
		ddp_fmt(why, sizeof(why),
			"rank %u claims job=%s step=%s, this is job=%s "
			"step=%s (another job or step of the same user, or a "
			"stale MASTER_PORT?)",
			o.rank, o.job, o.step, r->auth.job, r->auth.step);
		goto refuse;
	}
	if ((int)o.world != c->size) {
		ddp_fmt(why, sizeof(why),
			"rank %u claims world size %u, this job has %d", o.rank,
			o.world, c->size);
		goto refuse;
	}
	if (o.rank == 0 || c->peers[o.rank].fd >= 0) {
		ddp_fmt(why, sizeof(why), "rank %u %s", o.rank,
			o.rank ? "already joined" : "is this process");
		goto refuse;
	}
	pr = calloc(1, sizeof(*pr));
	if (!pr || getrandom(p->nonce, RDV_NONCE_LEN, 0) != RDV_NONCE_LEN) {
		ddp_fmt(why, sizeof(why), "rank 0: %s",
			pr ? "getrandom failed" : "out of memory");
		goto refuse;
	}
	memcpy(pr->nonce, p->nonce, RDV_NONCE_LEN);
	if (auth_encode(&r->auth, "rank0", (int)o.rank, p->nonce, p->from,
			pr->cred, sizeof(pr->cred)) != DDP_OK) {
		/* Our own munge failed: not the peer's fault. */
		ddp_fmt(why, sizeof(why), "rank 0 cannot authenticate: %s",
			wk_errbuf());
		wk_log(0, "%s", why);
		goto refuse;
	}
	if (rdv_encode_proof(&b, pr) < 0)
		b.bad = 1;
	if (pend_send(r, i, &b, "proof") < 0)
		goto out;
	p->stage = 1;
	p->rank = o.rank;
	p->have = 0;
	p->need = RDV_HDR_LEN;
	goto out;
refuse:
	pend_refuse(r, i, why);
out:
	free(pr);
	wk_buf_free(&b);
}

/* A hello after rank 0's proof: the rank's credential for that proof. */
static void
pend_hello(struct rdv *r, int i, const uint8_t *body, size_t blen)
{
	struct ddp_comm *c = r->comm;
	struct pend *p = &r->pend[i];
	struct rdv_hello *h = NULL;
	struct wk_buf b = {0};
	char why[1200];
	uint32_t rank;

	h = malloc(sizeof(*h));
	if (!h) {
		ddp_fmt(why, sizeof(why), "out of memory");
		goto refuse;
	}
	if (rdv_parse_hello(body, blen, h, why, sizeof(why)) < 0)
		goto refuse;
	if (h->rank != p->rank || (int)h->world != c->size) {
		ddp_fmt(why, sizeof(why),
			"hello of rank %u of %u after an open for rank %u of "
			"%d",
			h->rank, h->world, p->rank, c->size);
		goto refuse;
	}
	if (c->peers[h->rank].fd >= 0) {
		ddp_fmt(why, sizeof(why), "rank %u already joined", h->rank);
		goto refuse;
	}
	if (auth_verify(&r->auth, h->cred, "hello", (int)h->rank, p->nonce,
			p->from, why, sizeof(why)) < 0)
		goto refuse;
	if (rdv_encode_text(&b, RDV_WELCOME, "") < 0)
		b.bad = 1;
	if (pend_send(r, i, &b, "welcome") < 0)
		goto out;
	rank = h->rank;
	ddp_fmt(c->peers[rank].host, DDP_HOST_MAX, "%s", h->host);
	c->peers[rank].port = h->data_port;
	pend_adopt(r, i, (int)rank);
	wk_log(3, "rank 0: rank %u joined from %s (%s)", rank,
	       c->peers[rank].addr, c->peers[rank].host);
	goto out;
refuse:
	pend_refuse(r, i, why);
out:
	wk_buf_free(&b);
	free(h);
}

/* A data listener's peer hello: the job token and a higher rank. */
static void
pend_peer(struct rdv *r, int i, const uint8_t *body, size_t blen)
{
	struct ddp_comm *c = r->comm;
	struct rdv_peer_hello ph;
	char why[256];
	uint8_t diff = 0;
	int k;

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
		ddp_fmt(why, sizeof(why), "unexpected rank %u", ph.rank);
		goto refuse;
	}
	pend_adopt(r, i, (int)ph.rank);
	return;
refuse:
	pend_refuse(r, i, why);
}

/*
 * Reads what pending connection i has, handling complete messages, until
 * it would block or slot i is dropped or adopted (the last slot moves
 * into it then).
 */
static void
pend_read(struct rdv *r, int i, int peer_mode)
{
	struct pend *p = &r->pend[i];
	uint16_t type, want, ver;
	uint32_t blen;
	char why[512];
	uint8_t *nb;
	ssize_t n;
	int fd = p->fd, stage;

	for (;;) {
		n = recv(p->fd, p->buf + p->have, p->need - p->have,
			 MSG_DONTWAIT);
		if (n == 0) {
			pend_drop(r, i,
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
			pend_drop(r, i, why, 0, 0);
			return;
		}
		p->have += (size_t)n;
		if (p->have < p->need)
			continue;
		if (p->need == RDV_HDR_LEN) {
			if (rdv_parse_header(p->buf, p->have, &type, &blen, why,
					     sizeof(why)) < 0) {
				ver = rdv_header_version(p->buf, p->have);
				pend_drop(r, i, why, 1,
					  ver != RDV_VERSION ? ver : 0);
				return;
			}
			want = peer_mode  ? RDV_PEER
			       : p->stage ? RDV_HELLO
					  : RDV_OPEN;
			if (type != want) {
				ddp_fmt(why, sizeof(why),
					"unexpected message type %u "
					"(expected %u)",
					type, want);
				pend_refuse(r, i, why);
				return;
			}
			nb = realloc(p->buf, RDV_HDR_LEN + (size_t)blen);
			if (!nb) {
				pend_refuse(r, i, "out of memory");
				return;
			}
			p->buf = nb;
			p->need = RDV_HDR_LEN + (size_t)blen;
			if (blen)
				continue;
		}
		stage = p->stage;
		if (peer_mode)
			pend_peer(r, i, p->buf + RDV_HDR_LEN,
				  p->need - RDV_HDR_LEN);
		else if (stage == 0)
			pend_open(r, i, p->buf + RDV_HDR_LEN,
				  p->need - RDV_HDR_LEN);
		else
			pend_hello(r, i, p->buf + RDV_HDR_LEN,
				   p->need - RDV_HDR_LEN);
		if (i >= r->npend || r->pend[i].fd != fd ||
		    r->pend[i].stage == stage)
			return;
	}
}

static uint32_t
src_hash(const char *addr)
{
	uint32_t h = 2166136261u;

	while (*addr)
		h = (h ^ (uint8_t)*addr++) * 16777619u;
	return h;
}

/* cnt[i]: how many pending connections share pending connection i's
 * source (one pass, a small open-addressing table). */
static void
src_counts(const struct rdv *r, int *cnt)
{
	uint32_t key[SRC_SLOTS];
	int n[SRC_SLOTS], slot[MAX_PENDING], i, h;
	uint8_t used[SRC_SLOTS];

	memset(used, 0, sizeof(used));
	for (i = 0; i < r->npend; i++) {
		h = (int)(r->pend[i].src & (SRC_SLOTS - 1));
		while (used[h] && key[h] != r->pend[i].src)
			h = (h + 1) & (SRC_SLOTS - 1);
		if (!used[h]) {
			used[h] = 1;
			key[h] = r->pend[i].src;
			n[h] = 0;
		}
		n[h]++;
		slot[i] = h;
	}
	for (i = 0; i < r->npend; i++)
		cnt[i] = n[slot[i]];
}

/*
 * The pending connection to give up for a newcomer from source src: one
 * of src's own when src holds PER_SOURCE_MAX, else (table full) one of the
 * busiest source's. Prefers connections that have not said anything
 * valid yet, then the oldest. -1: no need.
 */
static int
pend_victim(const struct rdv *r, uint32_t src)
{
	int cnt[MAX_PENDING], i, v = -1, own = 0;

	for (i = 0; i < r->npend; i++)
		own += r->pend[i].src == src;
	if (own < PER_SOURCE_MAX && r->npend < MAX_PENDING)
		return -1;
	src_counts(r, cnt);
	for (i = 0; i < r->npend; i++) {
		if (own >= PER_SOURCE_MAX && r->pend[i].src != src)
			continue;
		if (v < 0 || r->pend[i].stage < r->pend[v].stage ||
		    (r->pend[i].stage == r->pend[v].stage &&
		     (cnt[i] > cnt[v] ||
		      (cnt[i] == cnt[v] && r->pend[i].seq < r->pend[v].seq))))
			v = i;
	}
	return v;
}

/*
 * Makes room for a newcomer from src: reads a would-be victim first (its
 * open may be waiting, which saves it), then evicts one.
 */
static void
pend_make_room(struct rdv *r, uint32_t src, int peer_mode)
{
	int tries, v, n;

	for (tries = 0;; tries++) {
		v = pend_victim(r, src);
		if (v < 0)
			return;
		if (r->pend[v].stage > 0 || tries == 3)
			break;
		n = r->npend;
		pend_read(r, v, peer_mode);
		if (r->npend < n)
			continue; /* dropped or joined: maybe room now */
		if (r->pend[v].stage == 0)
			break;
	}
	pend_drop(r, v,
		  "evicted to make room for newer connections (too many "
		  "pending)",
		  0, 0);
}

static void
accept_new(struct rdv *r, int peer_mode)
{
	struct sockaddr_storage ss;
	struct pend *p;
	socklen_t sl;
	char addr[WK_ADDR_LEN], from[WK_ADDR_LEN + 8];
	int fd, port, k;
	uint32_t src;

	for (k = 0; k < ACCEPT_BATCH; k++) {
		sl = sizeof(ss);
		fd = accept4(r->lfd, (struct sockaddr *)&ss, &sl,
			     SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		sa_format(&ss, addr, sizeof(addr), &port);
		ddp_fmt(from, sizeof(from), "%s:%d", addr, port);
		if (r->local_only && !sa_loopback((struct sockaddr *)&ss)) {
			refuse_log(r, from,
				   "not from this host (DDP_AUTH=none with a "
				   "loopback MASTER_ADDR accepts only local "
				   "ranks)");
			close(fd);
			continue;
		}
		src = src_hash(addr);
		pend_make_room(r, src, peer_mode);
		if (r->npend == MAX_PENDING) {
			refuse_log(r, from,
				   "too many pending connections from this "
				   "address");
			close(fd);
			continue;
		}
		no_delay(fd);
		p = &r->pend[r->npend];
		memset(p, 0, sizeof(*p));
		p->fd = fd;
		p->src = src;
		p->seq = ++r->seq;
		p->need = RDV_HDR_LEN;
		p->buf = malloc(RDV_HDR_LEN);
		p->deadline = wk_now() + HELLO_GRACE_S;
		ddp_fmt(p->addr, sizeof(p->addr), "%s", addr);
		ddp_fmt(p->from, sizeof(p->from), "%s", from);
		r->npend++;
		if (!p->buf)
			pend_drop(r, r->npend - 1, "out of memory", 0, 0);
	}
}

/*
 * Accepts connections until every rank in [from, size) is connected:
 * opens and hellos with munge credentials (rank 0) or peer hellos with the
 * job token (data listeners). Bad ones are refused and logged; waiting
 * goes on.
 */
static enum ddp_status
accept_ranks(struct rdv *r, int from, int peer_mode, double deadline)
{
	struct pollfd pfd[MAX_PENDING + 1];
	struct ddp_comm *c = r->comm;
	enum ddp_status st = DDP_OK;
	char miss[256];
	double now, wake;
	int i, n, missing, joined;

	for (;;) {
		missing = 0;
		for (i = from; i < c->size; i++)
			missing += c->peers[i].fd < 0;
		if (!missing)
			goto out;
		now = wk_now();
		if (now >= deadline) {
			joined = c->size - from - missing;
			if (peer_mode)
				st = wk_err(
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
			else
				st = wk_err(
					DDP_ERR_TIMEOUT,
					"rank 0 timed out after %g s waiting "
					"for ranks to join at port %d: %d/%d "
					"joined, missing ranks %s; check that "
					"every rank was started with the same "
					"MASTER_ADDR/MASTER_PORT (srun --ddp: "
					"every node needs the same port_key; "
					"`ddp-nodectl port JOB STEP` on each "
					"compares them), and that the firewall "
					"lets TCP port %d through",
					c->timeout_s, r->lport, joined + 1,
					c->size,
					missing_ranks(r, from, miss,
						      sizeof(miss)),
					r->lport);
			goto out;
		}
		for (i = 0; i < r->npend; i++) {
			if (r->pend[i].deadline <= now) {
				/* Silently: a slow genuine rank connects
				 * again. */
				pend_drop(r, i, "no hello within 10 s", 0, 0);
				i--;
			}
		}
		refuse_flush(r, 0);
		wake = deadline;
		if (r->ref.quiet && r->ref.next < wake)
			wake = r->ref.next;
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
		if (poll(pfd, (nfds_t)n,
			 wake > now ? (int)((wake - now) * 1000) + 1 : 0) < 0 &&
		    errno != EINTR) {
			st = wk_err(DDP_ERR_SYSTEM, "poll: %s",
				    strerror(errno));
			goto out;
		}
		/* Walk pending slots backwards: handling one may move the
		 * last slot into its place. */
		for (i = n - 1; i >= 1; i--) {
			if (i - 1 < r->npend && pfd[i].revents &&
			    r->pend[i - 1].fd == pfd[i].fd)
				pend_read(r, i - 1, peer_mode);
		}
		if (pfd[0].revents & POLLIN)
			accept_new(r, peer_mode);
	}
out:
	refuse_flush(r, 1);
	return st;
}

/*
 * Binds MASTER_PORT, waiting while another process holds it (a step that
 * has not quite ended, or someone squatting the port): its ranks keep
 * trying to connect until the same timeout.
 */
static enum ddp_status
listen_master(struct rdv *r, double deadline)
{
	double delay = 0.05;
	int port = r->cfg->master_port, logged = 0;

	for (;;) {
		r->lfd = listen_any(port, &r->lport);
		if (r->lfd >= 0) {
			if (logged)
				wk_log(0,
				       "rank 0: port %d is free now; "
				       "listening",
				       port);
			return DDP_OK;
		}
		if (errno != EADDRINUSE)
			return wk_err(DDP_ERR_RENDEZVOUS,
				      "rank 0 cannot listen on port %d: %s",
				      port, strerror(errno));
		if (!logged) {
			wk_log(0,
			       "rank 0: port %d (MASTER_PORT) is held by "
			       "another process on this host; retrying until "
			       "the timeout (%g s)",
			       port, r->comm->timeout_s);
			logged = 1;
		}
		if (back_off(&delay, deadline) < 0)
			return wk_err(
				DDP_ERR_RENDEZVOUS,
				"rank 0 cannot listen on port %d: another "
				"process held it for the whole timeout (%g s). "
				"srun --ddp picks a port per step, so this is "
				"a leftover program or another user's; `ss "
				"-ltnp 'sport = :%d'` as root names it. "
				"--ddp-port=N picks another port; "
				"ExclusiveUser=YES keeps other users off a "
				"job's nodes",
				port, r->comm->timeout_s, port);
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

	st = listen_master(r, deadline);
	if (st)
		return st;
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

/* The text of a REFUSE body, or why it could not be read. */
static void
refuse_text(const uint8_t *body, uint32_t blen, char *text, size_t textlen)
{
	char why[256];

	if (rdv_parse_text(body, blen, text, textlen, why, sizeof(why)) < 0)
		ddp_fmt(text, textlen, "(%s)", why);
}

/*
 * One attempt to join rank 0 over the connected fd: open, rank 0's proof
 * (checked: this uid, job, step, our rank, and our own address as rank 0
 * sees it, so a proof relayed from another connection fails), then our
 * hello with a credential made now for this nonce and this address, then
 * the welcome. Returns DDP_OK, or an error with *retry set when another
 * connection may succeed (closed, silent, not rank 0) and clear when not
 * (refused by rank 0, another protocol version, no munge).
 */
static enum ddp_status
join_once(struct rdv *r, int fd, double deadline, int *retry)
{
	struct ddp_comm *c = r->comm;
	const struct ddp_config *cfg = r->cfg;
	struct rdv_proof *pr = NULL;
	struct rdv_hello *h = NULL;
	struct rdv_open o;
	struct wk_buf b = {0};
	char myaddr[WK_ADDR_LEN + 8], why[1200], text[1024], what[64];
	uint8_t *body = NULL;
	enum ddp_status st;
	uint16_t type;
	uint32_t blen;
	double wait;
	int other;

	/* Every error names this rank: it ends in ddp_last_error(). */
	*retry = 0;
	wait = wk_now() + REPLY_WAIT_S < deadline ? wk_now() + REPLY_WAIT_S
						  : deadline;
	rank_addr(fd, 1, myaddr, sizeof(myaddr));
	memset(&o, 0, sizeof(o));
	o.rank = (uint32_t)c->rank;
	o.world = (uint32_t)c->size;
	ddp_fmt(o.job, sizeof(o.job), "%s", cfg->job_id);
	ddp_fmt(o.step, sizeof(o.step), "%s", cfg->step_id);
	if (rdv_encode_open(&b, &o) < 0) {
		st = wk_err(DDP_ERR_INVALID, "rank %d: job or step id too long",
			    c->rank);
		goto out;
	}
	*retry = 1;
	if (send_all(fd, b.p, b.len, wait) < 0) {
		st = wk_err(DDP_ERR_RENDEZVOUS,
			    "rank %d: sending the open failed: %s", c->rank,
			    strerror(errno));
		goto out;
	}
	ddp_fmt(what, sizeof(what), "rank %d: waiting for rank 0's proof",
		c->rank);
	st = recv_msg(fd, wait, what, &type, &body, &blen, &other);
	if (st) {
		*retry = !other;
		goto out;
	}
	if (type == RDV_REFUSE) {
		*retry = 0;
		refuse_text(body, blen, text, sizeof(text));
		st = wk_err(DDP_ERR_AUTH, "rank 0 at %s:%d refused rank %d: %s",
			    cfg->master_addr, cfg->master_port, c->rank, text);
		goto out;
	}
	pr = malloc(sizeof(*pr));
	h = calloc(1, sizeof(*h));
	if (!pr || !h) {
		*retry = 0;
		st = wk_err(DDP_ERR_NOMEM, "rank %d: out of memory", c->rank);
		goto out;
	}
	if (type != RDV_PROOF)
		ddp_fmt(why, sizeof(why), "it sent message type %u first",
			type);
	if (type != RDV_PROOF ||
	    rdv_parse_proof(body, blen, pr, why, sizeof(why)) < 0 ||
	    auth_verify(&r->auth, pr->cred, "rank0", c->rank, pr->nonce, myaddr,
			why, sizeof(why)) < 0) {
		st = wk_err(DDP_ERR_AUTH,
			    "rank %d: the process at %s:%d did not prove it is "
			    "rank 0 of this job (%s); another program may be "
			    "using MASTER_PORT",
			    c->rank, cfg->master_addr, cfg->master_port, why);
		goto out;
	}
	h->rank = (uint32_t)c->rank;
	h->world = (uint32_t)c->size;
	h->data_port = (uint16_t)r->lport;
	ddp_fmt(h->host, sizeof(h->host), "%s", c->myhost);
	st = auth_encode(&r->auth, "hello", c->rank, pr->nonce, myaddr, h->cred,
			 sizeof(h->cred));
	if (st) {
		*retry = 0;
		goto out;
	}
	b.len = 0;
	if (rdv_encode_hello(&b, h) < 0) {
		*retry = 0;
		st = wk_err(DDP_ERR_NOMEM, "rank %d: hello too large", c->rank);
		goto out;
	}
	if (send_all(fd, b.p, b.len, wait) < 0) {
		st = wk_err(DDP_ERR_RENDEZVOUS,
			    "rank %d: sending hello to %s:%d failed: %s",
			    c->rank, cfg->master_addr, cfg->master_port,
			    strerror(errno));
		goto out;
	}
	free(body);
	ddp_fmt(what, sizeof(what), "rank %d: waiting for rank 0's welcome",
		c->rank);
	st = recv_msg(fd, wait, what, &type, &body, &blen, &other);
	if (st)
		goto out;
	if (type == RDV_REFUSE) {
		*retry = 0;
		refuse_text(body, blen, text, sizeof(text));
		st = wk_err(DDP_ERR_AUTH, "rank 0 at %s:%d refused rank %d: %s",
			    cfg->master_addr, cfg->master_port, c->rank, text);
		goto out;
	}
	if (type != RDV_WELCOME) {
		st = wk_err(DDP_ERR_RENDEZVOUS,
			    "rank %d: rank 0 sent message type %u instead of "
			    "a welcome",
			    c->rank, type);
		goto out;
	}
	*retry = 0;
	st = DDP_OK;
out:
	free(body);
	free(pr);
	free(h);
	wk_buf_free(&b);
	return st;
}

/*
 * Connects to rank 0 and joins, connecting again (with back-off) while
 * what answers is not rank 0 or drops the connection, until deadline.
 * Returns the joined fd in *out.
 */
static enum ddp_status
join_master(struct rdv *r, double deadline, int *out)
{
	struct ddp_comm *c = r->comm;
	const struct ddp_config *cfg = r->cfg;
	enum ddp_status st, last = DDP_OK;
	char why[512], lasterr[WK_ERR_LEN];
	double delay = 0.05;
	int fd = -1, retry, attempts = 0;

	lasterr[0] = '\0';
	for (;;) {
		fd = connect_retry(cfg->master_addr, cfg->master_port, deadline,
				   why, sizeof(why));
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
				"the "
				"firewall between the job's nodes lets TCP "
				"port %d through (the slurm-ddp prolog opens "
				"it per job)",
				c->rank, cfg->master_addr, cfg->master_port,
				c->timeout_s, why, cfg->master_port);
		attempts++;
		st = join_once(r, fd, deadline, &retry);
		if (!st) {
			if (attempts > 1)
				wk_log(0, "rank %d joined rank 0 at attempt %d",
				       c->rank, attempts);
			*out = fd;
			return DDP_OK;
		}
		xclose(&fd);
		if (!retry)
			return st;
		/* The first failure is worth a line: a squatter, or a
		 * rank 0 that dropped us under a flood. */
		wk_log(attempts == 1 ? 0 : 3, "%s; connecting again",
		       wk_errbuf());
		last = st;
		ddp_fmt(lasterr, sizeof(lasterr), "%s", wk_errbuf());
		if (back_off(&delay, deadline) < 0)
			return wk_err(last, "%s (until the timeout, %g s)",
				      lasterr, c->timeout_s);
	}
}

static enum ddp_status
worker_side(struct rdv *r, double deadline)
{
	struct ddp_comm *c = r->comm;
	struct rdv_roster_entry *ents = NULL;
	struct rdv_peer_hello ph;
	struct wk_buf b = {0};
	char why[512], text[1024];
	uint8_t *body = NULL;
	enum ddp_status st;
	uint16_t type;
	uint32_t blen, world;
	int fd = -1, s, other;

	r->lfd = listen_any(0, &r->lport);
	if (r->lfd < 0)
		return wk_err(DDP_ERR_SYSTEM, "rank %d: data listener: %s",
			      c->rank, strerror(errno));
	ents = calloc((size_t)c->size, sizeof(*ents));
	if (!ents) {
		st = wk_err(DDP_ERR_NOMEM, "rank %d: out of memory", c->rank);
		goto out;
	}
	st = join_master(r, deadline, &fd);
	if (st)
		goto out;
	c->peers[0].fd = fd;
	ddp_fmt(c->peers[0].host, DDP_HOST_MAX, "%s", r->cfg->master_addr);
	/* Rank 0 waits up to its timeout for the slowest rank. */
	st = recv_msg(fd, wk_now() + c->timeout_s + 5,
		      "waiting for the other ranks to join", &type, &body,
		      &blen, &other);
	if (st)
		goto out;
	if (type == RDV_REFUSE) {
		refuse_text(body, blen, text, sizeof(text));
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
	/*
	 * Connect to every lower rank, then accept the higher ones: the
	 * connects complete in the listeners' backlogs, so no cycle. The
	 * token goes only to the address an authenticated rank joined from
	 * and the data port it announced, which it holds until every higher
	 * rank has connected to it.
	 */
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
	explicit_bzero(ph.token, sizeof(ph.token));
	if (b.p)
		explicit_bzero(b.p, b.cap);
	free(body);
	free(ents);
	wk_buf_free(&b);
	return st;
}

/*
 * DDP_AUTH=none: one line on every rank, and a world across hosts only
 * with DDP_AUTH_NONE_NETWORK=1; on loopback, connections from other hosts
 * are refused.
 */
static enum ddp_status
auth_none_policy(struct rdv *r, const struct ddp_config *cfg)
{
	const char *v = getenv("DDP_AUTH_NONE_NETWORK");
	int network = v && strcmp(v, "1") == 0;

	r->local_only = host_is_loopback(cfg->master_addr);
	if (!r->local_only && !network)
		return wk_err(
			DDP_ERR_ENV,
			"rank %d: DDP_AUTH=none, but MASTER_ADDR '%s' is not a "
			"loopback address: without authentication any process "
			"that reaches MASTER_PORT could join as any rank and "
			"read or change the job's data. Use DDP_AUTH=munge "
			"(the default), or set DDP_AUTH_NONE_NETWORK=1 if "
			"every host and user that can reach the job's ports "
			"is trusted",
			cfg->rank, cfg->master_addr);
	wk_log(1,
	       "rank %d: DDP_AUTH=none: the rendezvous is not authenticated; "
	       "any process that reaches port %d %s can join as any rank",
	       cfg->rank, cfg->master_port,
	       r->local_only ? "on this host"
			     : "from any host (DDP_AUTH_NONE_NETWORK=1)");
	return DDP_OK;
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
	if (!st && !cfg->auth)
		st = auth_none_policy(r, cfg);
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
		pend_drop(r, r->npend - 1, NULL, 0, 0);
	xclose(&r->lfd);
	auth_fini(&r->auth);
	explicit_bzero(r->token, sizeof(r->token));
	free(r);
	return st;
}
