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
#include <sys/mman.h>
#include <stdint.h>

#include "tap.h"
#include "test-worker-util.h"

#define TR_NOBODY 65534
#define TR_HDR 12
#define TR_MAGIC 0x52504444u
#define TR_VERSION 5 /* the protocol of the libddp under test */
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

	/* The folder goes once munged has: it may still write its log and
	 * seed file on its way out. */
	snprintf(cmd, sizeof(cmd),
		 "d='%s'; p=$(cat \"$d/munged.pid\" 2>/dev/null); "
		 "if [ -n \"$p\" ] && kill \"$p\" 2>/dev/null; then "
		 "for i in $(seq 100); do kill -0 \"$p\" 2>/dev/null || "
		 "break; sleep 0.05; done; fi; rm -rf \"$d\"",
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

/*
 * A gate between the processes of one job, so that a rank waits for what
 * it must come after (a socket that listens, an attacker that is done)
 * instead of for a time a loaded machine may overrun. Made before
 * tw_run_job, so that every rank inherits it; opening it lets through
 * every waiter (up to TW_MAX_RANKS), each waiting once.
 */
struct tr_gate {
	int fd[2];
};

/* 0, or -1 (errno) when the pipe cannot be made. */
__attribute__((unused)) static int
tr_gate_make(struct tr_gate *g)
{
	return pipe(g->fd);
}

__attribute__((unused)) static void
tr_gate_open(struct tr_gate *g)
{
	char b[TW_MAX_RANKS];

	memset(b, 1, sizeof(b));
	if (write(g->fd[1], b, sizeof(b)) != (ssize_t)sizeof(b))
		perror("tr_gate_open");
}

/* Waits up to secs for the gate to open: 1, or 0 on timeout. */
__attribute__((unused)) static int
tr_gate_wait(struct tr_gate *g, double secs)
{
	struct pollfd p = {.fd = g->fd[0], .events = POLLIN};
	char b;

	return poll(&p, 1, (int)(secs * 1000)) > 0 &&
	       read(g->fd[0], &b, 1) == 1;
}

__attribute__((unused)) static void
tr_gate_close(struct tr_gate *g)
{
	close(g->fd[0]);
	close(g->fd[1]);
}

/*
 * A ddp_log_fn that writes "LOG" lines to out as tr_log_to_file does and
 * opens gate the first time a message contains when: a rank that waits
 * for another's progress (a join rank 0 logged) waits for the line.
 */
struct tr_log_gate {
	FILE *out;
	const char *when;
	struct tr_gate *gate;
	int opened;
};

__attribute__((unused)) static void
tr_log_then_open(int level, const char *msg, void *arg)
{
	struct tr_log_gate *lg = arg;

	tr_log_to_file(level, msg, lg->out);
	if (strstr(msg, lg->when) &&
	    !__atomic_exchange_n(&lg->opened, 1, __ATOMIC_SEQ_CST))
		tr_gate_open(lg->gate);
}

/* Whether a TCP socket (IPv4 or IPv6) listens on port on this host. */
__attribute__((unused)) static int
tr_port_listens(int port)
{
	static const char *const tables[] = {"/proc/net/tcp", "/proc/net/tcp6"};
	char line[512];
	unsigned lport, st;
	FILE *f;
	int k, found = 0;

	for (k = 0; k < 2 && !found; k++) {
		f = fopen(tables[k], "r");
		if (!f)
			continue;
		while (!found && fgets(line, sizeof(line), f))
			found = sscanf(line,
				       " %*d: %*[0-9A-Fa-f]:%x "
				       "%*[0-9A-Fa-f]:%*x %x",
				       &lport, &st) == 2 &&
				lport == (unsigned)port && st == 0x0a;
		fclose(f);
	}
	return found;
}

/* Waits up to secs for a socket listening on port: 1, or 0. */
__attribute__((unused)) static int
tr_wait_listening(int port, double secs)
{
	double end = tw_now() + secs;

	while (!tr_port_listens(port)) {
		if (tw_now() >= end)
			return 0;
		usleep(5000);
	}
	return 1;
}

/* Waits up to secs for process pid to end (dead, or a zombie its parent
 * has not reaped yet): 1, or 0. */
__attribute__((unused)) static int
tr_wait_pid_gone(pid_t pid, double secs)
{
	double end = tw_now() + secs;
	char path[64], stat[256], *paren;
	FILE *f;
	int gone;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	for (;;) {
		f = fopen(path, "r");
		gone = !f || !fgets(stat, sizeof(stat), f) ||
		       ((paren = strrchr(stat, ')')) &&
			(paren[2] == 'Z' || paren[2] == 'X'));
		if (f)
			fclose(f);
		if (gone)
			return 1;
		if (tw_now() >= end)
			return 0;
		usleep(5000);
	}
}

/* What the processes of a job wait for (made by run_gated, before its
 * job starts). */
__attribute__((unused)) static struct tr_gate gate_a, gate_b;
#define GATE_WAIT_S 20
/* Each rank's pid, shared by the processes of a job (0 until it starts):
 * a rank that must come after another has ended watches its pid. */
__attribute__((unused)) static pid_t *job_pids;

/* tw_run_job with the gates and pid table made for the job. */
__attribute__((unused)) static int
run_gated(int size, tw_rank_fn *fn, void *arg, double limit_s,
	  struct tw_rank *rk)
{
	int rc;

	if (!job_pids) {
		job_pids = mmap(NULL, TW_MAX_RANKS * sizeof(*job_pids),
				PROT_READ | PROT_WRITE,
				MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (job_pids == MAP_FAILED) {
			job_pids = NULL;
			return -1;
		}
	}
	memset(job_pids, 0, TW_MAX_RANKS * sizeof(*job_pids));
	if (tr_gate_make(&gate_a) < 0)
		return -1;
	if (tr_gate_make(&gate_b) < 0) {
		tr_gate_close(&gate_a);
		return -1;
	}
	rc = tw_run_job(size, fn, arg, limit_s, rk);
	tr_gate_close(&gate_a);
	tr_gate_close(&gate_b);
	return rc;
}

/* The pid of rank i of the running job, waiting up to secs for it to
 * start; 0 when it did not. */
__attribute__((unused)) static pid_t
pid_of(int i, double secs)
{
	double end = tw_now() + secs;
	pid_t pid;

	while (!(pid = __atomic_load_n(&job_pids[i], __ATOMIC_SEQ_CST)) &&
	       tw_now() < end)
		usleep(5000);
	return pid;
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
