/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * slurm-ddp's sockets: the one place that loops over partial reads and
 * writes, retries connects and binds, and tunes connections (ddp_net.h).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ddp_util.h"
#include "ddp_net.h"

int
ddp_net_wait(int fd, short ev, double deadline)
{
	struct pollfd p = {.fd = fd, .events = ev};
	double left;
	int rc;

	/* Polled at least once, even past the deadline: what is there
	 * already is ready, however late the caller comes to look. */
	for (;;) {
		left = deadline - ddp_now();
		rc = poll(&p, 1, left > 0 ? (int)(left * 1000) + 1 : 0);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0)
			return -1;
		if (rc > 0)
			return 1;
		if (left <= 0)
			return 0;
	}
}

int
ddp_net_send_all(int fd, const void *buf, size_t len, double deadline)
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
		rc = ddp_net_wait(fd, POLLOUT, deadline);
		if (rc <= 0) {
			if (rc == 0)
				errno = ETIMEDOUT;
			return -1;
		}
	}
	return 0;
}

int
ddp_net_recv_all(int fd, void *buf, size_t len, double deadline)
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
		rc = ddp_net_wait(fd, POLLIN, deadline);
		if (rc <= 0) {
			if (rc == 0)
				errno = ETIMEDOUT;
			return -1;
		}
	}
	return 0;
}

/* net.core.wmem_max, read once per process (-1: unknown). */
static long wmem_max = -1;
static pthread_once_t wmem_max_once = PTHREAD_ONCE_INIT;

static void
read_wmem_max(void)
{
	FILE *f = fopen("/proc/sys/net/core/wmem_max", "r");

	if (!f)
		return;
	if (fscanf(f, "%ld", &wmem_max) != 1)
		wmem_max = -1;
	fclose(f);
}

void
ddp_net_tune_data(int fd)
{
	int one = 1, size = 4 << 20, fl;

	fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* Setting SO_SNDBUF disables autotuning; only do it when the
	 * kernel would grant the full size. */
	pthread_once(&wmem_max_once, read_wmem_max);
	if (wmem_max >= size) {
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
	}
}

void
ddp_net_no_delay(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int
ddp_net_sa_loopback(const struct sockaddr *sa)
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

int
ddp_net_addr_prefix(const char *addr, char *out, size_t len)
{
	struct in6_addr a6;
	struct in_addr a4;
	uint8_t *b;

	if (inet_pton(AF_INET6, addr, &a6) == 1 && IN6_IS_ADDR_V4MAPPED(&a6)) {
		memcpy(&a4, &a6.s6_addr[12], sizeof(a4));
	} else if (inet_pton(AF_INET6, addr, &a6) == 1) {
		if (IN6_IS_ADDR_LOOPBACK(&a6))
			return ddp_fmt(out, len, "loopback");
		memset(&a6.s6_addr[8], 0, 8);
		if (len < INET6_ADDRSTRLEN + 4 ||
		    ddp_net_addr_format(AF_INET6, &a6, out, len) < 0)
			return -1;
		return ddp_fmt_cat(out, len, "/64");
	} else if (inet_pton(AF_INET, addr, &a4) != 1) {
		return -1;
	}
	b = (uint8_t *)&a4.s_addr;
	if (b[0] == 127)
		return ddp_fmt(out, len, "loopback");
	return ddp_fmt(out, len, "%u.%u.%u.0/24", b[0], b[1], b[2]);
}

int
ddp_net_addr_format(int family, const void *bin, char *out, size_t len)
{
	return inet_ntop(family, bin, out, (socklen_t)len) ? 0 : -1;
}

void
ddp_net_sa_format(const struct sockaddr_storage *ss, char *addr, size_t addrlen,
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

void
ddp_net_sock_addr(int fd, int local, char *addr, size_t addrlen, int *port)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int rc;

	memset(&ss, 0, sizeof(ss));
	rc = local ? getsockname(fd, (struct sockaddr *)&ss, &sl)
		   : getpeername(fd, (struct sockaddr *)&ss, &sl);
	if (rc < 0)
		ss.ss_family = AF_UNSPEC;
	ddp_net_sa_format(&ss, addr, addrlen, port);
}

int
ddp_net_listen(int port, int *bound)
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

int
ddp_net_listen_retry(int port, double deadline, int *bound,
		     void (*busy)(int port, void *arg), void *arg)
{
	double delay = 0.05;
	int fd, told = 0;

	for (;;) {
		fd = ddp_net_listen(port, bound);
		if (fd >= 0 || errno != EADDRINUSE)
			return fd;
		if (!told && busy)
			busy(port, arg);
		told = 1;
		if (ddp_net_back_off(&delay, deadline) < 0) {
			errno = EADDRINUSE;
			return -1;
		}
	}
}

/* 1 when fd is connected to itself (same address and port both ends). */
static int
net_self_connected(int fd)
{
	struct sockaddr_storage a, b;
	socklen_t la = sizeof(a), lb = sizeof(b);

	return getsockname(fd, (struct sockaddr *)&a, &la) == 0 &&
	       getpeername(fd, (struct sockaddr *)&b, &lb) == 0 && la == lb &&
	       memcmp(&a, &b, la) == 0;
}

int
ddp_net_connect_addr(const struct sockaddr *sa, socklen_t salen,
		     double deadline)
{
	socklen_t sl;
	int fd, rc, soerr = 0, err;

	fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
		    0);
	if (fd < 0)
		return -1;
	ddp_net_no_delay(fd);
	rc = connect(fd, sa, salen);
	if (rc < 0 && errno == EINPROGRESS) {
		rc = ddp_net_wait(fd, POLLOUT, deadline);
		if (rc == 0) {
			errno = ETIMEDOUT;
			goto fail;
		}
		sl = sizeof(soerr);
		if (rc < 0 ||
		    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
			soerr = errno;
		rc = soerr ? -1 : 0;
		errno = soerr;
	}
	/* A connect to a port nobody listens on yet can land on its own
	 * ephemeral port (a TCP self-connect): it "succeeds" and then holds
	 * the port its listener needs. */
	if (rc == 0 && net_self_connected(fd)) {
		rc = -1;
		errno = ECONNREFUSED;
	}
	if (rc == 0)
		return fd;
fail:
	err = errno;
	close(fd);
	errno = err;
	return -1;
}

int
ddp_net_connect_once(const char *host, int port, double deadline, char *why,
		     size_t whylen)
{
	struct addrinfo hints, *res = NULL, *ai;
	char service[16];
	int fd = -1, rc, err;

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
		fd = ddp_net_connect_addr(ai->ai_addr, ai->ai_addrlen,
					  deadline);
		if (fd >= 0)
			break;
		err = errno;
		/* Out of descriptors or memory: the next address would fail
		 * the same way, and waiting does not help. */
		if (ddp_net_out_of_resources(err)) {
			ddp_fmt(why, whylen, "socket: %s", strerror(err));
			freeaddrinfo(res);
			errno = err;
			return -1;
		}
		if (err == ETIMEDOUT)
			ddp_fmt(why, whylen,
				"connection timed out (packets dropped?)");
		else
			ddp_fmt(why, whylen, "%s", strerror(err));
	}
	freeaddrinfo(res);
	return fd;
}

int
ddp_net_out_of_resources(int err)
{
	return err == EMFILE || err == ENFILE || err == ENOMEM ||
	       err == ENOBUFS;
}

void
ddp_net_resource_advice(int err, char *buf, size_t len)
{
	struct rlimit rl;
	char lim[96] = "";

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		ddp_fmt(lim, sizeof(lim), " (soft limit %lld, hard %lld)",
			rl.rlim_cur == RLIM_INFINITY ? -1LL
						     : (long long)rl.rlim_cur,
			rl.rlim_max == RLIM_INFINITY ? -1LL
						     : (long long)rl.rlim_max);
	if (err == EMFILE)
		ddp_fmt(buf, len,
			"this process reached its limit of open files%s: "
			"raise it before launching (`ulimit -n`, or "
			"LimitNOFILE= in slurmd's systemd unit, which srun "
			"tasks inherit; PropagateResourceLimits in "
			"slurm.conf)",
			lim);
	else if (err == ENFILE)
		ddp_fmt(buf, len,
			"the host reached its limit of open files "
			"(fs.file-max, /proc/sys/fs/file-nr)");
	else
		ddp_fmt(buf, len,
			"the host is out of memory for sockets (%s): fewer "
			"ranks per host, or more memory",
			strerror(err));
}

long
ddp_net_raise_nofile(long *raised_from)
{
	struct rlimit rl;
	rlim_t old;

	*raised_from = -1;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return -1;
	old = rl.rlim_cur;
	if (rl.rlim_cur != rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
			*raised_from = old == RLIM_INFINITY ? -1 : (long)old;
		else
			rl.rlim_cur = old;
	}
	return rl.rlim_cur == RLIM_INFINITY ? -1 : (long)rl.rlim_cur;
}

int
ddp_net_back_off(double *delay, double deadline)
{
	if (ddp_now() + *delay >= deadline)
		return -1;
	usleep((useconds_t)(*delay * 1e6));
	*delay = *delay * 2 < 1.0 ? *delay * 2 : 1.0;
	return 0;
}

int
ddp_net_connect_retry(const char *host, int port, double deadline, char *why,
		      size_t whylen)
{
	double delay = 0.01, now, attempt;
	int fd;

	for (;;) {
		now = ddp_now();
		attempt = now + 5.0 < deadline ? now + 5.0 : deadline;
		errno = 0;
		fd = ddp_net_connect_once(host, port, attempt, why, whylen);
		if (fd >= 0)
			return fd;
		if (ddp_net_out_of_resources(errno))
			return -1;
		if (ddp_net_back_off(&delay, deadline) < 0)
			return -1;
	}
}

int
ddp_net_host_is_loopback(const char *host)
{
	struct addrinfo hints, *res = NULL, *ai;
	int all = 1;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, NULL, &hints, &res) != 0)
		return 0;
	for (ai = res; ai; ai = ai->ai_next)
		if (!ddp_net_sa_loopback(ai->ai_addr))
			all = 0;
	freeaddrinfo(res);
	return all;
}

socklen_t
ddp_net_abstract_name(struct sockaddr_un *sa, const char *prefix,
		      const unsigned char digest[DDP_SHA256_LEN])
{
	size_t len = strlen(prefix);

	/* The NUL, the prefix, 32 hex digits and a terminator for
	 * callers that print the name. */
	if (1 + len + 32 + 1 > sizeof(sa->sun_path))
		return 0;
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	memcpy(sa->sun_path + 1, prefix, len);
	len++;
	ddp_hex(sa->sun_path + len, sizeof(sa->sun_path) - len, digest, 16);
	len += 32;
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
}

/* One connection ddp_net_read_lines reads. */
struct line_conn {
	int fd;
	double deadline;
	char *buf; /* max_line bytes, made at the first byte */
	size_t len;
};

/* Reads what conn has; 1 when its line is whole (newline, end of stream
 * or max_line - 1 bytes) or it failed, 0 while more may come. */
static int
line_conn_read(struct line_conn *c, size_t max_line)
{
	ssize_t n;
	char *nl;

	if (!c->buf) {
		c->buf = malloc(max_line);
		if (!c->buf)
			return 1;
	}
	for (;;) {
		if (c->len + 1 >= max_line)
			return 1;
		n = recv(c->fd, c->buf + c->len, max_line - 1 - c->len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n <= 0)
			return 1;
		nl = memchr(c->buf + c->len, '\n', (size_t)n);
		c->len += (size_t)n;
		if (nl) {
			c->len = (size_t)(nl - c->buf) + 1;
			return 1;
		}
	}
}

static void
line_conn_end(struct line_conn *c, int whole,
	      void (*got)(void *arg, const char *line), void *arg)
{
	if (whole && c->buf && c->len) {
		c->buf[c->len] = '\0';
		got(arg, c->buf);
	}
	free(c->buf);
	c->buf = NULL;
	ddp_close(&c->fd);
}

int
ddp_net_read_lines(int listen_fd, double accept_until, double conn_seconds,
		   size_t max_line, size_t max_conns,
		   void (*got)(void *arg, const char *line), void *arg)
{
	struct line_conn *conns = NULL, *grown;
	struct pollfd *pfd = NULL;
	size_t n = 0, cap = 0, accepted = 0, i, k;
	double now, next;
	int accepting = 1, rc = -1, fd, ms;

	if (max_line < 2) {
		errno = EINVAL;
		return -1;
	}
	for (;;) {
		now = ddp_now();
		if (now >= accept_until)
			accepting = 0;
		while (accepting && accepted < max_conns) {
			fd = accept4(listen_fd, NULL, NULL,
				     SOCK_NONBLOCK | SOCK_CLOEXEC);
			if (fd < 0 && (errno == EINTR || errno == ECONNABORTED))
				continue;
			/* EAGAIN: none waiting now. Anything else (out of
			 * descriptors) would not change by looking again. */
			if (fd < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
				accepting = 0;
			if (fd < 0)
				break;
			if (n == cap) {
				cap = cap ? cap * 2 : 16;
				grown = realloc(conns, cap * sizeof(*conns));
				if (!grown) {
					close(fd);
					goto out;
				}
				conns = grown;
				free(pfd);
				/* One more: the listener. */
				pfd = malloc((cap + 1) * sizeof(*pfd));
				if (!pfd) {
					close(fd);
					goto out;
				}
			}
			conns[n++] = (struct line_conn){
				.fd = fd, .deadline = now + conn_seconds};
			accepted++;
		}
		if (accepted >= max_conns)
			accepting = 0;
		/* Nothing open and nobody waiting: every line there was is
		 * read. */
		if (!n)
			break;
		next = accepting ? accept_until : conns[0].deadline;
		k = 0;
		if (accepting)
			pfd[k++] = (struct pollfd){.fd = listen_fd,
						   .events = POLLIN};
		for (i = 0; i < n; i++) {
			pfd[k++] = (struct pollfd){.fd = conns[i].fd,
						   .events = POLLIN};
			if (conns[i].deadline < next)
				next = conns[i].deadline;
		}
		ms = next > now ? (int)((next - now) * 1000) + 1 : 0;
		if (poll(pfd, (nfds_t)k, ms) < 0 && errno != EINTR)
			goto out;
		now = ddp_now();
		/* Every connection that spoke is read before any deadline is
		 * looked at: a line that is there counts, however late. */
		for (i = 0, k = accepting; i < n; i++, k++)
			if (pfd[k].revents &&
			    line_conn_read(&conns[i], max_line))
				line_conn_end(&conns[i], 1, got, arg);
		for (i = 0; i < n; i++)
			if (conns[i].fd >= 0 && now >= conns[i].deadline)
				line_conn_end(&conns[i], 0, got, arg);
		for (i = 0, k = 0; i < n; i++)
			if (conns[i].fd >= 0)
				conns[k++] = conns[i];
		n = k;
	}
	rc = (int)(accepted < INT_MAX ? accepted : INT_MAX);
out:
	for (i = 0; i < n; i++)
		line_conn_end(&conns[i], 0, got, arg);
	free(conns);
	free(pfd);
	return rc;
}
