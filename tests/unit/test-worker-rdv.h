/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Helpers for the rendezvous tests: a private munged (with extra options,
 * such as a short credential lifetime), a log sink, and raw rendezvous
 * messages on the wire as an attacker sees them. Only the public API and
 * the message header (magic, version, type, length) are used, so that the
 * attacks run unchanged against any libddp.
 */
#ifndef DDP_TEST_WORKER_RDV_H
#define DDP_TEST_WORKER_RDV_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>

#include "tap.h"
#include "test-worker-util.h"

#define TR_NOBODY 65534
#define TR_HDR 12
#define TR_MAGIC 0x52504444u
#define TR_VERSION 4 /* the protocol of the libddp under test */
/* Message types an attacker watches for. */
#define TR_WELCOME 2
#define TR_REFUSE 3
#define TR_ROSTER 4

/* The ddp_log_fn of the tests: "LOG <level> <msg>" lines into a FILE. */
__attribute__((unused)) static void
tr_log_to_file(int level, const char *msg, void *arg)
{
	fprintf((FILE *)arg, "LOG %d %s\n", level, msg);
}

/*
 * Starts a private munged in the existing empty-or-new folder dir, with
 * extra munged options ("" for none), and writes its socket path to sock.
 * Returns 0, 1 on failure, 2 when this machine cannot run one (skip).
 */
__attribute__((unused)) static int
tr_munged_start(const char *dir, const char *extra, char *sock, size_t socklen)
{
	char cmd[1200];
	int rc;

	if (geteuid() != 0 || system("id munge >/dev/null 2>&1") != 0 ||
	    system("command -v munged >/dev/null 2>&1 || "
		   "test -x /usr/sbin/munged") != 0)
		return 2;
	snprintf(cmd, sizeof(cmd),
		 "set -e; PATH=$PATH:/usr/sbin; d='%s'; mkdir -p \"$d\"; "
		 "chown munge:munge \"$d\"; chmod 0755 \"$d\"; "
		 "dd if=/dev/urandom of=\"$d/munge.key\" bs=1024 count=1 "
		 "status=none; chown munge:munge \"$d/munge.key\"; "
		 "chmod 0600 \"$d/munge.key\"; "
		 "runuser -u munge -- munged --socket=\"$d/munge.sock\" "
		 "--key-file=\"$d/munge.key\" --pid-file=\"$d/munged.pid\" "
		 "--log-file=\"$d/munged.log\" --seed-file=\"$d/munged.seed\" "
		 "%s; for i in $(seq 50); do test -S \"$d/munge.sock\" && "
		 "test -s \"$d/munged.pid\" && exit 0; sleep 0.1; done; "
		 "exit 1",
		 dir, extra);
	rc = system(cmd);
	if (rc != 0)
		return 1;
	snprintf(sock, socklen, "%s/munge.sock", dir);
	return 0;
}

/*
 * A test file's start: its private munged in munged_dir (the socket's
 * path into sock). Returns 1 to run the tests, or 0 when main must return
 * *status at once: a host without munged skips the file with the reason
 * (tmpdir, the file's empty temporary folder, removed), a failed start
 * is a failed test.
 */
__attribute__((unused)) static int
tr_munged_begin(const char *munged_dir, const char *tmpdir, char *sock,
		size_t socklen, int *status)
{
	int rc = tr_munged_start(munged_dir, "", sock, socklen);

	if (rc == 2) {
		rmdir(tmpdir);
		printf("ok 1 # SKIP private munged unavailable (needs root and "
		       "the munge package)\n1..1\n");
		*status = 0;
		return 0;
	}
	if (!tap_ok(rc == 0, "private munged at %s", sock)) {
		*status = tap_done();
		return 0;
	}
	return 1;
}

__attribute__((unused)) static void
tr_munged_stop(const char *dir)
{
	char cmd[600];

	snprintf(cmd, sizeof(cmd),
		 "d='%s'; test -s \"$d/munged.pid\" && kill \"$(cat "
		 "\"$d/munged.pid\")\" 2>/dev/null; sleep 0.2; rm -rf \"$d\"",
		 dir);
	if (system(cmd) != 0)
		tap_diag("could not stop the munged in %s", dir);
}

/* A munge-authenticated configuration of rank `rank` of `size`. */
__attribute__((unused)) static void
tr_cfg(struct ddp_config *cfg, int rank, int size, int port, double timeout,
       const char *job, const char *sock)
{
	tw_cfg(cfg, rank, size, port, timeout);
	cfg->auth = 1;
	snprintf(cfg->job_id, sizeof(cfg->job_id), "%s", job);
	snprintf(cfg->munge_socket, sizeof(cfg->munge_socket), "%s", sock);
}

/* Connects to addr:port (IPv4), retrying for secs; fd or -1. */
__attribute__((unused)) static int
tr_dial(const char *addr, int port, double secs)
{
	struct sockaddr_in sa;
	double end = tw_now() + secs;
	int fd;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
		return -1;
	do {
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -1;
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return fd;
		close(fd);
		usleep(20000);
	} while (tw_now() < end);
	return -1;
}

/* A listening socket on 127.0.0.1:port, or -1. */
__attribute__((unused)) static int
tr_listen(int port)
{
	struct sockaddr_in sa;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((uint16_t)port);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(fd, 16) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Waits up to secs for fd to be readable: 1, 0 (timeout), -1. */
__attribute__((unused)) static int
tr_wait_in(int fd, double secs)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, (int)(secs * 1000));
}

/* A message header: magic, version, type and body length, little endian. */
__attribute__((unused)) static void
tr_put_hdr(uint8_t *p, uint16_t type, uint32_t len)
{
	uint32_t w[2] = {TR_MAGIC, len};
	int k;

	for (k = 0; k < 4; k++) {
		p[k] = (uint8_t)(w[0] >> (8 * k));
		p[8 + k] = (uint8_t)(w[1] >> (8 * k));
	}
	p[4] = TR_VERSION & 0xff;
	p[5] = TR_VERSION >> 8;
	p[6] = (uint8_t)type;
	p[7] = (uint8_t)(type >> 8);
}

__attribute__((unused)) static uint32_t
tr_get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

/*
 * Reads one whole rendezvous message within secs into raw (at most
 * rawmax bytes; *rawlen its length). Returns its type, 0 on EOF, timeout,
 * a foreign or oversized message.
 */
__attribute__((unused)) static int
tr_read_msg(int fd, double secs, uint8_t *raw, size_t rawmax, size_t *rawlen)
{
	double end = tw_now() + secs;
	size_t need = TR_HDR, have = 0;
	ssize_t n;

	*rawlen = 0;
	while (have < need) {
		if (tr_wait_in(fd, end - tw_now()) <= 0)
			return 0;
		n = read(fd, raw + have, need - have);
		if (n <= 0)
			return 0;
		have += (size_t)n;
		if (have == TR_HDR) {
			if (tr_get32(raw) != TR_MAGIC ||
			    TR_HDR + (size_t)tr_get32(raw + 8) > rawmax)
				return 0;
			need = TR_HDR + tr_get32(raw + 8);
		}
	}
	*rawlen = have;
	return raw[6] | raw[7] << 8;
}

/* The text of a WELCOME/REFUSE message read by tr_read_msg, or "". */
__attribute__((unused)) static void
tr_msg_text(const uint8_t *raw, size_t rawlen, char *out, size_t outlen)
{
	size_t n;

	out[0] = '\0';
	if (rawlen < TR_HDR + 4)
		return;
	n = tr_get32(raw + TR_HDR);
	if (n > rawlen - TR_HDR - 4 || n >= outlen)
		return;
	memcpy(out, raw + TR_HDR + 4, n);
	out[n] = '\0';
}

/* setgid/setuid to nobody; 0 or -1 (reported to out). */
__attribute__((unused)) static int
tr_become_nobody(FILE *out)
{
	if (setgid(TR_NOBODY) == 0 && setuid(TR_NOBODY) == 0)
		return 0;
	fprintf(out, "E setuid nobody: %s\n", strerror(errno));
	return -1;
}

__attribute__((unused)) static int
tr_has(const struct tw_rank *r, const char *s)
{
	return strstr(r->out, s) != NULL;
}

/* Joins a job and allreduces {1, rank, 5}; prints INIT or ALLREDUCE. */
__attribute__((unused)) static int
tr_rank_job(const struct ddp_config *cfg, FILE *out)
{
	struct ddp_comm *c = NULL;
	enum ddp_status st;
	float v[3];

	st = ddp_comm_init(cfg, &c);
	if (st) {
		fprintf(out, "INIT %d %s\n", (int)st, ddp_last_error());
		return 3;
	}
	v[0] = 1;
	v[1] = (float)ddp_comm_rank(c);
	v[2] = 5;
	st = ddp_allreduce(c, v, v, 3, DDP_FLOAT32, DDP_SUM);
	fprintf(out, "ALLREDUCE %d %g %g %g\n", (int)st, v[0], v[1], v[2]);
	ddp_comm_destroy(c);
	return st ? 4 : 0;
}

#endif
