/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * slurm-ddp's sockets (ddp_net.c), for libddp and ddp-check: exact reads
 * and writes against a deadline, connecting and listening with retries,
 * address formatting, abstract Unix socket names and the tuning of data
 * connections. Knows nothing of the rendezvous, the collectives or Slurm.
 *
 * Errors: functions return -1 with errno set (ETIMEDOUT when a deadline
 * passed), or -1 with a reason written into the caller's why buffer where
 * they take one; they never touch the thread's last error (wk_err), so the
 * caller words the error for its own context. Deadlines are
 * ddp_now() seconds (common/ddp_util.h). Every
 * function is thread-safe; a file descriptor is never shared by the library
 * between threads.
 */
#ifndef DDP_NET_H
#define DDP_NET_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "sha256.h"

/*
 * Waits until fd is ready for ev (POLLIN/POLLOUT) or deadline passes:
 * 1 ready, 0 timed out, -1 poll failed (errno). EINTR is retried. fd is
 * polled at least once, even when deadline has passed already: what is
 * ready then is ready, not timed out.
 */
int ddp_net_wait(int fd, short ev, double deadline);

/* Writes all of buf to a socket before deadline, never raising SIGPIPE:
 * 0, or -1 with errno (ETIMEDOUT). The fd may be blocking or not. */
int ddp_net_send_all(int fd, const void *buf, size_t len, double deadline);

/* Reads exactly len bytes before deadline: 0, 1 when the peer closed
 * first, -1 with errno (ETIMEDOUT). The fd may be blocking or not. */
int ddp_net_recv_all(int fd, void *buf, size_t len, double deadline);

/*
 * TCP_NODELAY from the first byte: the rendezvous sends small messages
 * back to back, and with Nagle's algorithm the second would wait for the
 * peer's delayed ack (20 ms on average). Best effort.
 */
void ddp_net_no_delay(int fd);

/*
 * Prepares a connection of the data mesh: non-blocking, TCP_NODELAY, and
 * 4 MiB send and receive buffers when net.core.wmem_max grants them
 * (setting them disables the kernel's autotuning, so only then). Best
 * effort: a setting the kernel refuses is skipped.
 */
void ddp_net_tune_data(int fd);

/* 1 when sa is a loopback address (127/8, ::1, v4-mapped 127/8). */
int ddp_net_sa_loopback(const struct sockaddr *sa);

/*
 * The prefix of the numeric address addr that one party can be taken to
 * hold whole, as text into out (len bytes, INET6_ADDRSTRLEN + 8 holds
 * any): "loopback" for 127/8, ::1 and v4-mapped 127/8 (any local user
 * may bind any of them), a.b.c.0/24 for other IPv4 (v4-mapped too), the
 * first 64 bits and /64 for other IPv6. Returns 0, or -1 when addr is
 * not a numeric address or out is too small.
 */
int ddp_net_addr_prefix(const char *addr, char *out, size_t len);

/* 1 when every address host resolves to is a loopback address; 0 when
 * one is not or host does not resolve. */
int ddp_net_host_is_loopback(const char *host);

/*
 * The text of bin, a binary address of family (AF_INET: 4 bytes,
 * AF_INET6: 16), into out (len bytes; INET6_ADDRSTRLEN holds any).
 * Returns 0, or -1 for another family or a too small out.
 */
int ddp_net_addr_format(int family, const void *bin, char *out, size_t len);

/*
 * Numeric address (into addr, "?" when unknown) and port of ss, a
 * v4-mapped IPv6 address written as IPv4, so that both ends of a
 * connection write it the same way.
 */
void ddp_net_sa_format(const struct sockaddr_storage *ss, char *addr,
		       size_t addrlen, int *port);

/* Address and port of this end (local 1) or the far end of fd, written
 * as ddp_net_sa_format does ("?" and 0 when the socket has none). */
void ddp_net_sock_addr(int fd, int local, char *addr, size_t addrlen,
		       int *port);

/*
 * Listens on port (0: an ephemeral one) on every address, IPv6
 * dual-stack when available, non-blocking and close-on-exec. Returns the
 * fd (the caller closes it) and the bound port in *bound, or -1 with
 * errno (EADDRINUSE when another socket holds the port).
 */
int ddp_net_listen(int port, int *bound);

/*
 * ddp_net_listen, waiting with back-off while another process holds port,
 * until deadline. busy (may be NULL) is called once, the first time the
 * port is found held, with port and arg. Returns the fd, or -1 with errno
 * (EADDRINUSE when the port stayed held until deadline).
 */
int ddp_net_listen_retry(int port, double deadline, int *bound,
			 void (*busy)(int port, void *arg), void *arg);

/*
 * One non-blocking connection attempt to host:port (any address family
 * getaddrinfo gives), bounded by deadline. Returns the connected fd
 * (non-blocking, TCP_NODELAY, close-on-exec; the caller closes it), or -1
 * with a reason in why.
 */
int ddp_net_connect_once(const char *host, int port, double deadline, char *why,
			 size_t whylen);

/*
 * One non-blocking connection attempt to sa (salen bytes), bounded by
 * deadline. Returns the connected fd (non-blocking, TCP_NODELAY,
 * close-on-exec; the caller closes it), or -1 with errno (ETIMEDOUT when
 * the deadline passed, ECONNREFUSED for a connection to itself). Makes no
 * allocation and takes no lock, only system calls: it may run in a child
 * forked from a multi-threaded process (the plugin's report to srun,
 * made as the job's user).
 */
int ddp_net_connect_addr(const struct sockaddr *sa, socklen_t salen,
			 double deadline);

/*
 * Reads one line from each connection listen_fd (non-blocking) accepts,
 * serving them all at once: a connection has conn_seconds from its
 * accept to send its line, so one that sends nothing holds up no other,
 * and the whole takes at most (accept_until - now) + conn_seconds. New
 * connections are accepted until accept_until, max_conns at most; it
 * returns as soon as no connection is open and none waits to be
 * accepted. A line ends at a newline (kept), the end of the stream or
 * max_line - 1 bytes; got(arg, line) is called with each non-empty line
 * (NUL-terminated, borrowed for the call), in the order they are whole.
 * What a connection sent before its deadline without ending its line is
 * dropped. Holds at most max_line bytes per open connection. Returns the
 * number of connections accepted, or -1 with errno (out of memory, or
 * poll failed) after closing them. Leaves listen_fd open.
 */
int ddp_net_read_lines(int listen_fd, double accept_until, double conn_seconds,
		       size_t max_line, size_t max_conns,
		       void (*got)(void *arg, const char *line), void *arg);

/*
 * ddp_net_connect_once again and again with back-off until deadline, each
 * attempt bounded to 5 s. Ranks start at once and their listener a little
 * after some, so the first retry comes soon (10 ms). Returns the fd, or
 * -1 with the last attempt's reason in why; at once, with errno set, when
 * a socket cannot be made for want of a resource (ddp_net_out_of_resources).
 */
int ddp_net_connect_retry(const char *host, int port, double deadline,
			  char *why, size_t whylen);

/*
 * 1 when err says the process or the host ran out of a resource (EMFILE,
 * ENFILE, ENOMEM, ENOBUFS): waiting does not help, so callers fail at
 * once with ddp_net_resource_advice's words instead of retrying.
 */
int ddp_net_out_of_resources(int err);

/*
 * Into buf: what err exhausted, this process's file-descriptor limits
 * and how to raise them (`ulimit -n`, slurmd's LimitNOFILE), for an error
 * that the caller prefixes with the rank and host.
 */
void ddp_net_resource_advice(int err, char *buf, size_t len);

/*
 * Raises the soft RLIMIT_NOFILE to the hard limit, since every peer of the
 * mesh holds a descriptor. Returns the soft limit now in effect (-1 when
 * it cannot be read); *raised_from is the old soft limit, or -1 when it
 * was already at the hard limit or could not be changed.
 */
long ddp_net_raise_nofile(long *raised_from);

/*
 * An abstract Unix socket address (Linux; a leading NUL, no file) named
 * prefix followed by the hex of the first 16 bytes of digest, into sa:
 * a name no one can guess without what the digest was made of, and that
 * tells nothing of it once /proc/net/unix shows it. The name, without
 * its NUL, is sa->sun_path + 1. Returns the address's length for bind
 * and connect, or 0 when prefix is too long to leave room for the hex.
 */
socklen_t ddp_net_abstract_name(struct sockaddr_un *sa, const char *prefix,
				const unsigned char digest[DDP_SHA256_LEN]);

/*
 * Sleeps *delay (never past deadline) and doubles it up to 1 s: 0, or -1
 * without sleeping when the deadline would pass first.
 */
int ddp_net_back_off(double *delay, double deadline);

#endif
