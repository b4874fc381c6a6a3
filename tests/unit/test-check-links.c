/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ddp-check's link-test sockets on this machine's loopback: two "nodes"
 * (threads) connect with the check's token while a stranger with another
 * token is refused, both streams are timed at once, a flood from one
 * address neither evicts a neighbour's connection nor floods the log,
 * and connections to a closed port or an unknown name fail with their
 * reason.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "ddp_util.h"
#include "tap.h"

struct node {
	struct chk_ring ring;
	int me;
	int peer_port;
	int connect_rc;
	int stream_rc;
	int recv_err;
	double gbps;
	int refusals;
	char why[256];
};

static const uint8_t token[CHK_TOKEN_LEN] = {1, 2, 3, 4, 5, 6, 7, 8};
static pthread_barrier_t start;

static void
refused(void *arg, const char *line)
{
	struct node *n = arg;

	n->refusals++;
	snprintf(n->why, sizeof(n->why), "%s", line);
}

/* Connects the ring of two nodes (n and 1 - n->me, one direction and
 * the warm-up) on loopback, for at most seconds. */
static int
ring_connect(struct node *n, double seconds)
{
	struct chk_target to[2], from[2];

	memset(to, 0, sizeof(to));
	memset(from, 0, sizeof(from));
	to[CHK_FWD] = (struct chk_target){"127.0.0.1", n->peer_port, 1 - n->me};
	from[CHK_FWD] = to[CHK_FWD];
	return chk_ring_connect(&n->ring, n->me, 1, to, from, token,
				ddp_now() + seconds);
}

static void *
node_main(void *arg)
{
	struct node *n = arg;

	n->connect_rc = ring_connect(n, 5);
	pthread_barrier_wait(&start);
	if (n->connect_rc == 0)
		n->stream_rc =
			chk_ring_stream(&n->ring, CHK_FWD, 0.1, ddp_now() + 3,
					&n->gbps, &n->recv_err);
	return NULL;
}

/* Node 0 of test_flood: connects for 2 s (node 1's warm-up connection
 * never comes) and streams nothing. */
static void *
connect_only(void *arg)
{
	struct node *n = arg;

	n->connect_rc = ring_connect(n, 2);
	return NULL;
}

/* A stranger: connects to port and sends a hello with another token. */
static int
stranger(int port)
{
	struct sockaddr_in a;
	uint8_t hello[CHK_TOKEN_LEN + 5];
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	memset(hello, 0x5a, sizeof(hello));
	hello[CHK_TOKEN_LEN + 4] = 0;
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    send(fd, hello, sizeof(hello), 0) != (ssize_t)sizeof(hello)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static void
test_pair(void)
{
	struct node n[2];
	pthread_t t[2];
	char err[256];
	int i, sfd;

	memset(n, 0, sizeof(n));
	for (i = 0; i < 2; i++) {
		chk_ring_init(&n[i].ring);
		n[i].me = i;
		n[i].ring.refused = refused;
		n[i].ring.refused_arg = &n[i];
		if (!tap_ok(chk_ring_listen(&n[i].ring, err, sizeof(err)) ==
					    0 &&
				    n[i].ring.lport > 0,
			    "node %d listens on an ephemeral port", i))
			tap_diag("%s", err);
	}
	n[0].peer_port = n[1].ring.lport;
	n[1].peer_port = n[0].ring.lport;
	/* Knocks before the ranks: it must not take node 0's place. */
	sfd = stranger(n[0].ring.lport);
	pthread_barrier_init(&start, NULL, 2);
	for (i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, node_main, &n[i]);
	for (i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&start);
	if (sfd >= 0)
		close(sfd);
	tap_ok(n[0].connect_rc == 0 && n[1].connect_rc == 0 &&
		       n[0].ring.conn[CHK_FWD] == CHK_CONN_OK &&
		       n[1].ring.conn[CHK_FWD] == CHK_CONN_OK,
	       "both nodes connect with the token");
	if (!tap_ok(sfd >= 0 && n[0].refusals == 1 &&
			    strstr(n[0].why, "wrong token"),
		    "a stranger's connection is refused (wrong token)"))
		tap_diag("stranger fd %d, %d refusals, last '%s'", sfd,
			 n[0].refusals, n[0].why);
	if (!tap_ok(n[0].stream_rc == 0 && n[1].stream_rc == 0 &&
			    n[0].gbps > 0.01 && n[1].gbps > 0.01,
		    "both directions timed at once: %.3g and %.3g GB/s",
		    n[0].gbps, n[1].gbps))
		tap_diag("rc %d %d, errors %d %d", n[0].stream_rc,
			 n[1].stream_rc, n[0].recv_err, n[1].recv_err);
	tap_ok(n[0].ring.out[0] < 0 && n[0].ring.in[0] < 0,
	       "the stream closes its connections");
	for (i = 0; i < 2; i++)
		chk_ring_close(&n[i].ring);
}

static void
test_failures(void)
{
	struct chk_ring r, closed;
	struct chk_target to[2], from[2];
	char err[256];
	double t;
	int port, rc;

	chk_ring_init(&r);
	chk_ring_init(&closed);
	if (chk_ring_listen(&r, err, sizeof(err)) < 0 ||
	    chk_ring_listen(&closed, err, sizeof(err)) < 0) {
		tap_ok(0, "listen: %s", err);
		return;
	}
	/* A port nobody listens on any more. */
	port = closed.lport;
	chk_ring_close(&closed);
	memset(to, 0, sizeof(to));
	to[CHK_FWD] = (struct chk_target){"127.0.0.1", port, 1};
	from[CHK_FWD] = to[CHK_FWD];
	t = ddp_now();
	rc = chk_ring_connect(&r, 0, 1, to, from, token, ddp_now() + 0.5);
	tap_ok(rc == -1 && r.conn[CHK_FWD] == CHK_CONN_REFUSED,
	       "a closed port: refused");
	tap_ok(ddp_now() - t < tap_bound(1.0, 10.0),
	       "waiting for the missing peer ends at the deadline (%.2f s)",
	       ddp_now() - t);
	chk_ring_close(&r);

	chk_ring_init(&r);
	chk_ring_listen(&r, err, sizeof(err));
	to[CHK_FWD] = (struct chk_target){"no-such-node.invalid", 4000, 1};
	rc = chk_ring_connect(&r, 0, 1, to, from, token, ddp_now() + 0.3);
	tap_ok(rc == -1 && r.conn[CHK_FWD] == CHK_CONN_UNRESOLVED &&
		       strcmp(chk_conn_name(r.conn[CHK_FWD]),
			      "name not resolved") == 0,
	       "an unknown name: not resolved");
	chk_ring_close(&r);
	TAP_STREQ(chk_conn_name(CHK_CONN_TIMEOUT), "timed out",
		  "a timeout reads 'timed out'");
}

/* A socket from source address src (a loopback address of its own, so
 * that the listener sees another source), connecting to port without
 * waiting. */
static int
dial_from(const char *src, int port)
{
	struct sockaddr_in a, b;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	inet_pton(AF_INET, src, &a.sin_addr);
	b = a;
	b.sin_port = htons((uint16_t)port);
	inet_pton(AF_INET, "127.0.0.1", &b.sin_addr);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    (connect(fd, (struct sockaddr *)&b, sizeof(b)) < 0 &&
	     errno != EINPROGRESS)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* Waits until fd's connection is up (or failed). */
static void
wait_connected(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLOUT};

	poll(&p, 1, 3000);
}

#define FLOOD 150

/* The connections waiting in the accept queue of the socket that
 * listens on port (a listener's rx_queue in /proc/net/tcp or tcp6), or
 * -1. */
static int
accept_backlog(int port)
{
	static const char *const tables[] = {"/proc/net/tcp", "/proc/net/tcp6"};
	char line[512];
	unsigned lport, st, rxq;
	FILE *f;
	int k, n = -1;

	for (k = 0; k < 2 && n < 0; k++) {
		f = fopen(tables[k], "r");
		if (!f)
			continue;
		while (n < 0 && fgets(line, sizeof(line), f))
			if (sscanf(line,
				   " %*d: %*[0-9A-Fa-f]:%x %*[0-9A-Fa-f]:%*x "
				   "%x "
				   "%*x:%x",
				   &lport, &st, &rxq) == 3 &&
			    lport == (unsigned)port && st == 0x0a)
				n = (int)rxq;
		fclose(f);
	}
	return n;
}

/*
 * A stranger floods the link-test port from one address with connections
 * that say nothing, while the neighbour's connection (from another
 * address) is up but its hello not all there yet. The neighbour's is
 * adopted once its hello is complete, and the log holds a few lines
 * however many were refused.
 */
static void
test_flood(void)
{
	struct node n;
	uint8_t hello[CHK_TOKEN_LEN + 5];
	struct sockaddr_in a;
	socklen_t al = sizeof(a);
	pthread_t t;
	char err[256];
	int sink, genuine, flood[FLOOD], i, up = 0;

	memset(&n, 0, sizeof(n));
	chk_ring_init(&n.ring);
	n.ring.refused = refused;
	n.ring.refused_arg = &n;
	/* Where node 0's own connections go: a listener nobody reads. */
	sink = socket(AF_INET, SOCK_STREAM, 0);
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (chk_ring_listen(&n.ring, err, sizeof(err)) < 0 || sink < 0 ||
	    bind(sink, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(sink, 8) < 0 ||
	    getsockname(sink, (struct sockaddr *)&a, &al) < 0) {
		tap_ok(0, "flood: setup: %s", err);
		return;
	}
	n.me = 0;
	n.peer_port = ntohs(a.sin_port);
	/* Node 1's connection, its hello cut in two. */
	genuine = dial_from("127.0.0.1", n.ring.lport);
	memcpy(hello, token, CHK_TOKEN_LEN);
	memset(hello + CHK_TOKEN_LEN, 0, 5);
	hello[CHK_TOKEN_LEN + 3] = 1; /* node 1 */
	hello[CHK_TOKEN_LEN + 4] = CHK_FWD;
	if (genuine >= 0)
		wait_connected(genuine);
	if (genuine < 0 || send(genuine, hello, 10, 0) != 10) {
		tap_ok(0, "flood: the neighbour's connection");
		return;
	}
	pthread_create(&t, NULL, connect_only, &n);
	for (i = 0; i < FLOOD; i++)
		flood[i] = dial_from("127.0.0.2", n.ring.lport);
	for (i = 0; i < FLOOD; i++) {
		if (flood[i] < 0)
			continue;
		wait_connected(flood[i]);
		up++;
	}
	/* The listener takes them all in before the hello completes. */
	for (i = 0; i < 2000 && accept_backlog(n.ring.lport) != 0; i++)
		usleep(5000);
	if (!tap_ok(accept_backlog(n.ring.lport) == 0,
		    "flood: the listener took the %d connections in", up))
		tap_diag("accept queue: %d", accept_backlog(n.ring.lport));
	send(genuine, hello + 10, sizeof(hello) - 10, 0);
	pthread_join(t, NULL);
	if (!tap_ok(n.ring.in[CHK_FWD] >= 0,
		    "flood: %d silent connections from another address do "
		    "not evict the neighbour's, adopted when its hello "
		    "arrives",
		    up))
		tap_diag("last line: %s", n.why);
	if (!tap_ok(n.refusals <= 10 &&
			    n.ring.ref.total > (unsigned long)n.refusals,
		    "flood: %lu refusals in %d log lines (the first 8, then "
		    "summaries)",
		    n.ring.ref.total, n.refusals))
		tap_diag("last line: %s", n.why);
	if (!tap_ok(strstr(n.why, "more link-test connections") &&
			    strstr(n.why, "127.0.0.2"),
		    "flood: the last line sums up the rest, naming the "
		    "source"))
		tap_diag("last line: %s", n.why);
	for (i = 0; i < FLOOD; i++)
		if (flood[i] >= 0)
			close(flood[i]);
	close(genuine);
	close(sink);
	chk_ring_close(&n.ring);
}

int
main(void)
{
	test_pair();
	test_failures();
	test_flood();
	return tap_done();
}
