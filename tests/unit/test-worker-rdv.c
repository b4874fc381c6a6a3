/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Attacks on the rendezvous by another local user (nobody), against a
 * private munged: a squatter that captures what a rank sends to MASTER_PORT
 * and replays and relays it to the real rank 0 gets nothing (issue 10, F1);
 * a squatted MASTER_PORT only delays rank 0 (F4); credentials are made per
 * connection, so a rank that waits longer than munge's time to live still
 * joins (F10); DDP_AUTH=none says so on every rank and keeps to one host
 * unless told otherwise (F12). Every job still completes. A process on
 * the data port of a rank that died learns neither the job's token nor
 * the roster.
 */
#include <dirent.h>
#include <ifaddrs.h>
#include <sys/resource.h>

#include "test-worker-rdv.h"

static char munge_sock[200];
static char test_dir[64]; /* this file's temporary folder */

/* Adds one line per rendezvous message type in stream (what rank 0 sent
 * the attacker), stopping at the first byte that is not one. */
static int
note_types(const uint8_t *p, size_t len, FILE *out)
{
	size_t off = 0, n;
	int secret = 0, type;

	while (len - off >= TR_HDR && tr_get32(p + off) == TR_MAGIC) {
		type = p[off + 6] | p[off + 7] << 8;
		n = TR_HDR + tr_get32(p + off + 8);
		fprintf(out, "FROM_RANK0 type %d (%zu bytes)\n", type, n);
		secret |= type == TR_WELCOME || type == TR_ROSTER;
		if (n > len - off)
			break;
		off += n;
	}
	return secret;
}

/*
 * The attacker, as nobody: binds MASTER_PORT before rank 0, captures what
 * rank 1 sends, lets the port go (keeping rank 1's connection), replays
 * the capture to the real rank 0 and relays both ways, as the audit did.
 */
static int
squatter(int port, FILE *out)
{
	static uint8_t cap[65536], seen[262144], chunk[65536];
	struct pollfd p[2];
	size_t caplen = 0, seenlen = 0;
	double end;
	ssize_t n;
	int lfd, wfd, rfd, i, secret;

	if (tr_become_nobody(out) < 0)
		return 1;
	lfd = tr_listen(port);
	if (lfd < 0) {
		fprintf(out, "E squat: %s\n", strerror(errno));
		return 1;
	}
	tr_gate_open(&gate_a);
	if (tr_wait_in(lfd, GATE_WAIT_S) <= 0) {
		fprintf(out, "E squat: nobody came\n");
		return 1;
	}
	wfd = accept(lfd, NULL, NULL);
	while (wfd >= 0 && caplen < sizeof(cap) && tr_wait_in(wfd, 1.0) > 0 &&
	       (n = read(wfd, cap + caplen, sizeof(cap) - caplen)) > 0)
		caplen += (size_t)n;
	fprintf(out, "CAPTURED %zu bytes\n", caplen);
	close(lfd);
	tr_gate_open(&gate_b);
	rfd = tr_dial("127.0.0.1", port, 5);
	if (wfd < 0 || rfd < 0 || caplen == 0 ||
	    write(rfd, cap, caplen) != (ssize_t)caplen) {
		fprintf(out, "E replay failed\n");
		return 1;
	}
	fprintf(out, "REPLAYED\n");
	/* Relay until either side hangs up. */
	end = tw_now() + 10;
	while (tw_now() < end) {
		p[0].fd = rfd;
		p[1].fd = wfd;
		p[0].events = p[1].events = POLLIN;
		if (poll(p, 2, 200) <= 0)
			continue;
		for (i = 0; i < 2; i++) {
			if (!p[i].revents)
				continue;
			n = read(p[i].fd, chunk, sizeof(chunk));
			if (n <= 0)
				goto done;
			if (i == 0 && seenlen + (size_t)n <= sizeof(seen)) {
				memcpy(seen + seenlen, chunk, (size_t)n);
				seenlen += (size_t)n;
			}
			if (write(p[1 - i].fd, chunk, (size_t)n) != n)
				goto done;
		}
	}
done:
	secret = note_types(seen, seenlen, out);
	fprintf(out, "SECRET %d\n", secret);
	close(rfd);
	close(wfd);
	return 0;
}

static int
squat_role(int i, int size, int port, FILE *out, void *arg)
{
	struct ddp_config cfg;

	(void)size;
	(void)arg;
	if (i == 0)
		return squatter(port, out);
	/* Rank 1 meets the squatter; rank 0 starts once the squatter has
	 * its capture and let the port go. */
	if (!tr_gate_wait(i == 1 ? &gate_b : &gate_a, GATE_WAIT_S)) {
		fprintf(out, "E the squatter never got that far\n");
		return 1;
	}
	ddp_set_log_fn(tr_log_to_file, out);
	tr_cfg(&cfg, i == 1 ? 0 : 1, 2, port, 15, "777", munge_sock);
	return tr_rank_job(&cfg, out);
}

/* F10: rank 1 waits longer than the credentials' time to live. */
static int
ttl_role(int i, int size, int port, FILE *out, void *arg)
{
	struct ddp_config cfg;

	(void)size;
	ddp_set_log_fn(tr_log_to_file, out);
	if (i == 0)
		usleep(4000000);
	tr_cfg(&cfg, i, 2, port, 20, "777", (const char *)arg);
	return tr_rank_job(&cfg, out);
}

/* F4: nobody holds MASTER_PORT for 2.5 s, answering nothing. */
static int
held_role(int i, int size, int port, FILE *out, void *arg)
{
	struct ddp_config cfg;
	int lfd, fds[16], n = 0;
	double end;

	(void)size;
	(void)arg;
	if (i == 2) {
		if (tr_become_nobody(out) < 0)
			return 1;
		lfd = tr_listen(port);
		if (lfd < 0)
			return 1;
		tr_gate_open(&gate_a);
		end = tw_now() + 2.5;
		while (tw_now() < end)
			if (tr_wait_in(lfd, end - tw_now()) > 0 && n < 16)
				fds[n++] = accept(lfd, NULL, NULL);
		fprintf(out, "HELD %d connections\n", n);
		close(lfd);
		while (n > 0)
			close(fds[--n]);
		return 0;
	}
	/* Both ranks start once nobody holds the port. */
	if (!tr_gate_wait(&gate_a, GATE_WAIT_S)) {
		fprintf(out, "E nobody never held the port\n");
		return 1;
	}
	ddp_set_log_fn(tr_log_to_file, out);
	tr_cfg(&cfg, i, 2, port, 15, "777", munge_sock);
	return tr_rank_job(&cfg, out);
}

/* A non-loopback IPv4 address of this host, or "" when it has none. */
static void
host_ipv4(char *buf, size_t size)
{
	struct ifaddrs *ifa, *a;
	struct sockaddr_in *s4;

	buf[0] = '\0';
	if (getifaddrs(&ifa) < 0)
		return;
	for (a = ifa; a && !buf[0]; a = a->ifa_next) {
		if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET)
			continue;
		s4 = (struct sockaddr_in *)a->ifa_addr;
		if ((ntohl(s4->sin_addr.s_addr) >> 24) == 127)
			continue;
		inet_ntop(AF_INET, &s4->sin_addr, buf, (socklen_t)size);
	}
	freeifaddrs(ifa);
}

struct none_arg {
	const char *master; /* MASTER_ADDR */
	int network;	    /* DDP_AUTH_NONE_NETWORK=1 */
	const char *knock;  /* connect to rank 0 at this address first */
};

/* F12: DDP_AUTH=none jobs. */
static int
none_role(int i, int size, int port, FILE *out, void *arg)
{
	const struct none_arg *a = arg;
	struct ddp_config cfg;
	char b;
	int fd;

	(void)size;
	if (i == 2) { /* someone on another host (here: this host's IP) */
		fd = tr_wait_listening(port, GATE_WAIT_S)
			     ? tr_dial(a->knock, port, 3)
			     : -1;
		fprintf(out, "KNOCK %s\n", fd < 0 ? "unanswered" : "connected");
		/* Rank 0 has dealt with the knock when it hangs up. */
		if (fd >= 0 && tr_wait_in(fd, GATE_WAIT_S) > 0 &&
		    read(fd, &b, 1) <= 0)
			fprintf(out, "KNOCK closed\n");
		if (fd >= 0)
			close(fd);
		tr_gate_open(&gate_a);
		return 0;
	}
	if (a->network)
		setenv("DDP_AUTH_NONE_NETWORK", "1", 1);
	if (i == 1 && a->knock && !tr_gate_wait(&gate_a, GATE_WAIT_S)) {
		fprintf(out, "E the knock never ended\n");
		return 1;
	}
	ddp_set_log_fn(tr_log_to_file, out);
	tw_cfg(&cfg, i, 2, port, 10);
	snprintf(cfg.master_addr, sizeof(cfg.master_addr), "%s", a->master);
	return tr_rank_job(&cfg, out);
}

static int
count(const struct tw_rank *r, const char *s)
{
	const char *p = r->out;
	int n = 0;

	while ((p = strstr(p, s)) != NULL) {
		n++;
		p += strlen(s);
	}
	return n;
}

static int
completed(const struct tw_rank *r)
{
	return tw_exit(r) == 0 && tr_has(r, "ALLREDUCE 0 2 1 10");
}

static void
diag_job(int n, const struct tw_rank *rk)
{
	int i;

	for (i = 0; i < n; i++)
		tw_diag_output(i, &rk[i]);
}

#define FD_RANKS 48

/* Rank 0 with an open-file limit of soft (hard: hard), the others with
 * a short timeout of their own. */
static int
fd_role(int i, int size, int port, FILE *out, void *arg)
{
	const rlim_t *lim = arg;
	struct rlimit rl = {lim[0], lim[1]};
	struct ddp_config cfg;

	ddp_set_log_fn(tr_log_to_file, out);
	if (i == 0 && setrlimit(RLIMIT_NOFILE, &rl) < 0) {
		fprintf(out, "SETRLIMIT %s\n", strerror(errno));
		return 5;
	}
	tw_cfg(&cfg, i, size, port, i == 0 ? 60 : 8);
	return tr_rank_job(&cfg, out);
}

/*
 * Rank 0 out of file descriptors fails at once, naming the limit and
 * the fix, instead of waiting out its timeout and blaming the ranks it
 * could not accept; with room under the hard limit, libddp raises the
 * soft limit itself and the job runs.
 */
static void
test_fd_limit(void)
{
	static struct tw_rank rk[FD_RANKS];
	rlim_t tight[2] = {32, 32}, soft[2] = {32, 4096};
	int failed = tap_failed, i, ok = 1;

	setenv("DDP_DEBUG", "1", 1);
	if (run_gated(FD_RANKS, fd_role, tight, 50, rk) < 0) {
		tap_ok(0, "fork");
		return;
	}
	tap_ok(tw_exit(&rk[0]) == 3 &&
		       tr_has(&rk[0], "reached its limit of open files "
				      "(soft limit 32, hard 32)") &&
		       tr_has(&rk[0], "ulimit -n") &&
		       !tr_has(&rk[0], "timed out"),
	       "%d ranks, rank 0 limited to 32 open files: it fails before "
	       "its timeout, naming the limit and `ulimit -n`",
	       FD_RANKS);
	if (tap_failed > failed || getenv("TEST_VERBOSE"))
		diag_job(1, rk);
	tw_free_job(FD_RANKS, rk);

	failed = tap_failed;
	if (run_gated(FD_RANKS, fd_role, soft, 50, rk) < 0) {
		tap_ok(0, "fork");
		return;
	}
	for (i = 0; i < FD_RANKS; i++)
		ok = ok && tw_exit(&rk[i]) == 0;
	tap_ok(ok && tr_has(&rk[0], "open-file limit raised from 32 to 4096"),
	       "%d ranks, rank 0's soft limit 32 under a hard limit of 4096: "
	       "libddp raises it (a debug line says so) and the job runs",
	       FD_RANKS);
	if (tap_failed > failed || getenv("TEST_VERBOSE"))
		diag_job(1, rk);
	tw_free_job(FD_RANKS, rk);
	unsetenv("DDP_DEBUG");
}

static void
test_squat_replay(void)
{
	struct tw_rank rk[3];
	int failed = tap_failed;

	if (run_gated(3, squat_role, NULL, 60, rk) < 0) {
		tap_ok(0, "fork");
		return;
	}
	tap_ok(tr_has(&rk[0], "REPLAYED") && tr_has(&rk[0], "SECRET 0"),
	       "F1: a squatter (nobody) that captured rank 1's first message "
	       "and replayed and relayed it to rank 0 got no welcome and no "
	       "roster");
	tap_ok(tr_has(&rk[2], "did not prove it is rank 0 of this job") &&
		       tr_has(&rk[2], "relayed"),
	       "F1: rank 1 refuses rank 0's proof relayed through the squatter "
	       "and logs it");
	tap_ok(tr_has(&rk[1], "refused connection from 127.0.0.1"),
	       "F1: rank 0 logs the squatter's replayed connection as refused");
	tap_ok(completed(&rk[1]) && completed(&rk[2]) &&
		       tr_has(&rk[2], "rank 1 joined rank 0 at attempt 2"),
	       "F1: the job still completes, rank 1 connecting again straight "
	       "to rank 0");
	if (tap_failed > failed || getenv("TEST_VERBOSE"))
		diag_job(3, rk);
	tw_free_job(3, rk);
}

static void
test_ttl(void)
{
	char dir[] = "/tmp/ddp-test-ttl-XXXXXX", sock[200];
	struct tw_rank rk[2];
	int rc, failed = tap_failed;

	if (!mkdtemp(dir)) {
		tap_ok(0, "mkdtemp");
		return;
	}
	rc = tr_munged_start(dir, "--max-ttl=2", sock, sizeof(sock));
	if (rc != 0) {
		tap_ok(0, "munged with a 2 s credential lifetime started");
		rmdir(dir);
		return;
	}
	if (run_gated(2, ttl_role, sock, 60, rk) < 0) {
		tap_ok(0, "fork");
		tr_munged_stop(dir);
		return;
	}
	tap_ok(completed(&rk[0]) && completed(&rk[1]),
	       "F10: with credentials that live 2 s, a rank that waits 4 s for "
	       "rank 0 still joins (a fresh credential per connection)");
	if (tap_failed > failed || getenv("TEST_VERBOSE"))
		diag_job(2, rk);
	tw_free_job(2, rk);
	tr_munged_stop(dir);
}

static void
test_held_port(void)
{
	struct tw_rank rk[3];
	int failed = tap_failed;

	if (run_gated(3, held_role, NULL, 60, rk) < 0) {
		tap_ok(0, "fork");
		return;
	}
	tap_ok(completed(&rk[0]) && completed(&rk[1]) &&
		       tr_has(&rk[0], "port ") &&
		       tr_has(&rk[0], "is held by another process"),
	       "F4: rank 0 waits while another user holds MASTER_PORT, says "
	       "so, and the job completes once it is free");
	if (tap_failed > failed || getenv("TEST_VERBOSE"))
		diag_job(3, rk);
	tw_free_job(3, rk);
}

static void
test_auth_none(void)
{
	struct none_arg a = {"127.0.0.1", 0, NULL};
	struct tw_rank rk[3];
	char ip[64];
	int failed = tap_failed;

	if (run_gated(2, none_role, &a, 30, rk) < 0) {
		tap_ok(0, "fork");
		return;
	}
	tap_ok(completed(&rk[0]) && completed(&rk[1]) &&
		       count(&rk[0], "DDP_AUTH=none: the rendezvous is not "
				     "authenticated") == 1 &&
		       count(&rk[1], "DDP_AUTH=none: the rendezvous is not "
				     "authenticated") == 1,
	       "F12: DDP_AUTH=none on loopback: one warning line on every "
	       "rank, the job runs");
	if (tap_failed > failed || getenv("TEST_VERBOSE"))
		diag_job(2, rk);
	tw_free_job(2, rk);

	host_ipv4(ip, sizeof(ip));
	if (!ip[0]) {
		printf("ok %d # SKIP no non-loopback IPv4 address here\n",
		       ++tap_count);
		return;
	}
	failed = tap_failed;
	a.master = ip;
	if (run_gated(2, none_role, &a, 30, rk) < 0) {
		tap_ok(0, "fork");
		return;
	}
	tap_ok(tw_exit(&rk[0]) == 3 && tw_exit(&rk[1]) == 3 &&
		       tr_has(&rk[0], "INIT 2 ") && tr_has(&rk[1], "INIT 2 ") &&
		       tr_has(&rk[0], "is not a loopback address") &&
		       tr_has(&rk[0], "DDP_AUTH_NONE_NETWORK=1"),
	       "F12: DDP_AUTH=none with MASTER_ADDR %s (not loopback) is "
	       "refused on every rank: DDP_ERR_ENV naming the opt-in",
	       ip);
	if (tap_failed > failed || getenv("TEST_VERBOSE"))
		diag_job(2, rk);
	tw_free_job(2, rk);

	failed = tap_failed;
	a.network = 1;
	if (run_gated(2, none_role, &a, 30, rk) < 0) {
		tap_ok(0, "fork");
		return;
	}
	tap_ok(completed(&rk[0]) && completed(&rk[1]) &&
		       tr_has(&rk[1],
			      "from any host (DDP_AUTH_NONE_NETWORK=1)"),
	       "F12: ... and runs, warning, with DDP_AUTH_NONE_NETWORK=1");
	if (tap_failed > failed || getenv("TEST_VERBOSE"))
		diag_job(2, rk);
	tw_free_job(2, rk);

	failed = tap_failed;
	a.master = "127.0.0.1";
	a.network = 0;
	a.knock = ip;
	if (run_gated(3, none_role, &a, 30, rk) < 0) {
		tap_ok(0, "fork");
		return;
	}
	tap_ok(completed(&rk[0]) && completed(&rk[1]) &&
		       tr_has(&rk[0], "refused connection from ") &&
		       tr_has(&rk[0], "not from this host"),
	       "F12: DDP_AUTH=none on loopback refuses a connection from a "
	       "non-loopback address (%s)",
	       ip);
	if (tap_failed > failed || getenv("TEST_VERBOSE"))
		diag_job(3, rk);
	tw_free_job(3, rk);
}

/* ---- the roster down the tree ---- */

#define TREE_RANKS 12 /* rank 1's children in the tree: 9, 10, 11 */

/*
 * Rank 0's log (with debug lines): once it logged rank 1's join, the
 * other ranks may start; once it logged theirs (all but rank 11), it
 * kills rank 1 (SIGALRM), which by then has had its welcome since nine
 * joins: it dies waiting for the roster, not with the welcome unread.
 */
static void
kill_rank1_once_joined(int level, const char *msg, void *arg)
{
	static int joined;
	int n;

	tr_log_to_file(level, msg, arg);
	if (!strstr(msg, " joined from "))
		return;
	n = __atomic_add_fetch(&joined, 1, __ATOMIC_SEQ_CST);
	if (n == 1 && strstr(msg, ": rank 1 joined from "))
		tr_gate_open(&gate_a);
	if (n == TREE_RANKS - 2)
		kill(pid_of(1, GATE_WAIT_S), SIGALRM);
}

/* Rank 1 joins, then dies (SIGALRM) before the roster, once ranks 2-10
 * joined too; rank 11 comes after rank 0 has ended, so rank 0 is still
 * waiting for it when rank 1 dies. */
static int
parent_dies_role(int i, int size, int port, FILE *out, void *arg)
{
	struct ddp_config cfg;

	(void)arg;
	__atomic_store_n(&job_pids[i], getpid(), __ATOMIC_SEQ_CST);
	ddp_set_log_fn(tr_log_to_file, out);
	if (i == 0) {
		setenv("DDP_DEBUG", "1", 1);
		ddp_set_log_fn(kill_rank1_once_joined, out);
	}
	if (i >= 2 && i < size - 1 && !tr_gate_wait(&gate_a, GATE_WAIT_S)) {
		fprintf(out, "E rank 1 never joined\n");
		return 1;
	}
	if (i == size - 1 && !tr_wait_pid_gone(pid_of(0, GATE_WAIT_S), 40)) {
		fprintf(out, "E rank 0 did not end\n");
		return 1;
	}
	tr_cfg(&cfg, i, size, port, i == size - 1 ? 4 : 30, "777", munge_sock);
	return tr_rank_job(&cfg, out);
}

static void
test_tree_parent_dies(void)
{
	static struct tw_rank rk[TREE_RANKS];
	int failed = tap_failed, i, told = 1;

	if (run_gated(TREE_RANKS, parent_dies_role, NULL, 50, rk) < 0) {
		tap_ok(0, "fork");
		return;
	}
	for (i = 2; i < TREE_RANKS - 1; i++)
		told = told && tw_exit(&rk[i]) == 3 &&
		       tr_has(&rk[i], "rank 0 gave up") &&
		       tr_has(&rk[i], "rank 1 (") &&
		       !tr_has(&rk[i], "timed out");
	tap_ok(tw_exit(&rk[1]) == 128 + SIGALRM && tw_exit(&rk[0]) == 3 &&
		       tr_has(&rk[0], "rank 1 (") &&
		       tr_has(&rk[0], "after it joined") && told,
	       "a rank that dies after joining (rank 1, parent of 9-11 in the "
	       "roster's tree) is named by rank 0 while it still waits for "
	       "rank 11, and every rank that joined, 9 and 10 included, is "
	       "told at once, not at the timeout");
	if (tap_failed > failed || getenv("TEST_VERBOSE"))
		diag_job(TREE_RANKS, rk);
	tw_free_job(TREE_RANKS, rk);
}

/* Opens a data-port hello claiming rank `rank` on 127.0.0.1:port, then
 * sends a MAC made without the job's token and a roster, without waiting
 * for the challenge; 1 when it was delivered. */
static int
fake_push(int port, uint32_t rank)
{
	uint8_t msg[TR_HDR + 20 + TR_HDR + 32 + TR_HDR + 36];
	uint8_t *mac = msg + TR_HDR + 20, *roster = mac + TR_HDR + 32;
	int fd = tr_dial("127.0.0.1", port, 1), ok;

	memset(msg, 0x5a, sizeof(msg));
	tr_put_hdr(msg, 5, 20); /* PEER: rank, nonce */
	memcpy(msg + TR_HDR, &rank, 4);
	tr_put_hdr(mac, 10, 32);	   /* PEER_MAC */
	tr_put_hdr(roster, TR_ROSTER, 36); /* world 0, token */
	memset(roster + TR_HDR, 0, 4);
	if (fd < 0)
		return 0;
	ok = write(fd, msg, sizeof(msg)) == (ssize_t)sizeof(msg);
	close(fd);
	return ok;
}

/* The TCP ports the sibling processes (the job's ranks) listen on; only
 * process only's when it is not 0. */
static int
sibling_ports(int *ports, int max, int only)
{
	char path[300], link[64], line[512];
	unsigned long inodes[512], ino;
	int nino = 0, n = 0, k;
	struct dirent *d, *e;
	DIR *proc = opendir("/proc"), *fds;
	FILE *f;
	unsigned lport, st;

	while (proc && (d = readdir(proc)) && nino < 512) {
		int pid = (int)strtol(d->d_name, NULL, 10), ppid = 0;

		if (pid <= 0 || pid == getpid() || (only && pid != only))
			continue;
		snprintf(path, sizeof(path), "/proc/%d/stat", pid);
		f = fopen(path, "r");
		if (!f || fscanf(f, "%*d (%*[^)]) %*c %d", &ppid) != 1)
			ppid = 0;
		if (f)
			fclose(f);
		if (ppid != getppid())
			continue;
		snprintf(path, sizeof(path), "/proc/%d/fd", pid);
		fds = opendir(path);
		while (fds && (e = readdir(fds)) && nino < 512) {
			ssize_t len;

			snprintf(path, sizeof(path), "/proc/%d/fd/%s", pid,
				 e->d_name);
			len = readlink(path, link, sizeof(link) - 1);
			if (len <= 0)
				continue;
			link[len] = '\0';
			if (sscanf(link, "socket:[%lu]", &ino) == 1)
				inodes[nino++] = ino;
		}
		if (fds)
			closedir(fds);
	}
	if (proc)
		closedir(proc);
	for (k = 0; k < 2; k++) {
		f = fopen(k ? "/proc/net/tcp6" : "/proc/net/tcp", "r");
		while (f && fgets(line, sizeof(line), f) && n < max) {
			int j;

			if (sscanf(line,
				   " %*d: %*x:%x %*x:%*x %x %*x:%*x %*x:%*x "
				   "%*x %*u %*u %lu",
				   &lport, &st, &ino) != 3 ||
			    st != 0x0a)
				continue;
			for (j = 0; j < nino; j++)
				if (inodes[j] == ino && n < max)
					ports[n++] = (int)lport;
		}
		if (f)
			fclose(f);
	}
	return n;
}

/* Ranks 0-11 of a job, rank 11 late; index 12 pushes fake rosters with
 * a wrong token to every port the ranks listen on, for 3 s. */
static int
tree_intruder_role(int i, int size, int port, FILE *out, void *arg)
{
	struct ddp_config cfg;
	int ports[64], n, k, sent = 0;
	double end;

	(void)size;
	(void)arg;
	if (i == TREE_RANKS) {
		end = tw_now() + 3;
		while (tw_now() < end) {
			n = sibling_ports(ports, 64, 0);
			for (k = 0; k < n; k++)
				sent += fake_push(ports[k], k % 2 ? 0 : 1);
			usleep(100000);
		}
		fprintf(out, "PUSHED %d\n", sent);
		tr_gate_open(&gate_a);
		return 0;
	}
	ddp_set_log_fn(tr_log_to_file, out);
	/* Rank 11 comes once the intruder is done: the ranks listen, and
	 * wait for the roster, all the while it pushes. */
	if (i == TREE_RANKS - 1 && !tr_gate_wait(&gate_a, GATE_WAIT_S)) {
		fprintf(out, "E the intruder did not end\n");
		return 1;
	}
	tr_cfg(&cfg, i, TREE_RANKS, port, 30, "777", munge_sock);
	return tr_rank_job(&cfg, out);
}

static void
test_tree_intruder(void)
{
	static struct tw_rank rk[TREE_RANKS + 1];
	int failed = tap_failed, i, ok = 1, refused = 0;

	if (run_gated(TREE_RANKS + 1, tree_intruder_role, NULL, 50, rk) < 0) {
		tap_ok(0, "fork");
		return;
	}
	for (i = 0; i < TREE_RANKS; i++) {
		ok = ok && tw_exit(&rk[i]) == 0 &&
		     tr_has(&rk[i], "ALLREDUCE 0 12 ");
		refused += tr_has(&rk[i], "proof of the job's token does not "
					  "verify");
	}
	tap_ok(ok && refused > 0 && !tr_has(&rk[TREE_RANKS], "PUSHED 0"),
	       "fake rosters (rank 0's or a parent's data-port hello without "
	       "the token) pushed to every listening port of the job are "
	       "refused "
	       "(%d ranks logged it) and the job completes",
	       refused);
	if (tap_failed > failed || getenv("TEST_VERBOSE"))
		diag_job(TREE_RANKS + 1, rk);
	tw_free_job(TREE_RANKS + 1, rk);
}

/* Two jobs of one user whose ports collide: job 777 (indices 0, 1) holds
 * the port until its rank 1 comes, which is once job 778 (2, 3), started
 * when 777's rank 0 listens, has met it: 778's rank 0 found the port held
 * and 778's rank 1 was refused by 777's rank 0. */
static int
collide_role(int i, int size, int port, FILE *out, void *arg)
{
	static struct tr_log_gate lg;
	struct ddp_config cfg;

	(void)size;
	(void)arg;
	ddp_set_log_fn(tr_log_to_file, out);
	if (i >= 2 && !tr_wait_listening(port, GATE_WAIT_S)) {
		fprintf(out, "E job 777's rank 0 never listened\n");
		return 1;
	}
	if (i >= 2) {
		lg.out = out;
		lg.gate = i == 2 ? &gate_a : &gate_b;
		lg.when = i == 2 ? "is held by another process"
				 : "refused before proving it is rank 0";
		ddp_set_log_fn(tr_log_then_open, &lg);
	}
	if (i == 1 && (!tr_gate_wait(&gate_a, GATE_WAIT_S) ||
		       !tr_gate_wait(&gate_b, GATE_WAIT_S))) {
		fprintf(out, "E job 778 never met job 777\n");
		return 1;
	}
	tr_cfg(&cfg, i % 2, 2, port, 20, i < 2 ? "777" : "778", munge_sock);
	return tr_rank_job(&cfg, out);
}

static void
test_port_collision(void)
{
	struct tw_rank rk[4];
	int failed = tap_failed, i, ok = 1;

	if (run_gated(4, collide_role, NULL, 40, rk) < 0) {
		tap_ok(0, "fork");
		return;
	}
	for (i = 0; i < 4; i++)
		ok = ok && completed(&rk[i]);
	tap_ok(ok && tr_has(&rk[3], "refused before proving it is rank 0") &&
		       tr_has(&rk[3], "connecting again") &&
		       tr_has(&rk[2], "is held by another process"),
	       "T3-3: two jobs whose MASTER_PORTs collide both complete: the "
	       "later job's rank 1, refused by the other job's rank 0 (which "
	       "never proved itself to it), connects again, and its rank 0 "
	       "waits for the port");
	if (tap_failed > failed || getenv("TEST_VERBOSE"))
		diag_job(4, rk);
	tw_free_job(4, rk);
}

/* ---- a process on the data port of a rank that died ---- */

#define VICTIM 9 /* a child of rank 1 in the roster's tree */

/*
 * Finds the data port of rank VICTIM, ends it (SIGALRM) once rank 0 has
 * logged its join, takes the port (as nobody: found as root, bound as
 * nobody), lets the last rank come (gate b) and answers what connects
 * there as a listener would, without the token: a challenge as rank
 * VICTIM, then a MAC of zeros. Notes the types of what comes in.
 */
static int
impostor(FILE *out)
{
	static uint8_t raw[70000];
	uint8_t challenge[TR_HDR + 20], mac[TR_HDR + 32];
	uint32_t victim = VICTIM;
	char path[128];
	struct sockaddr_in sa;
	int pid = 0, port = 0, lfd = -1, fd, one = 1, type;
	size_t len;
	double end = tw_now() + 5;
	FILE *f;

	snprintf(path, sizeof(path), "%s/victim.pid", test_dir);
	while (!port && tw_now() < end) {
		usleep(50000);
		f = fopen(path, "r");
		if (f && fscanf(f, "%d", &pid) != 1)
			pid = 0;
		if (f)
			fclose(f);
		if (pid > 0)
			sibling_ports(&port, 1, pid);
	}
	if (!port) {
		fprintf(out, "E no port of rank %d\n", VICTIM);
		return 1;
	}
	if (!tr_gate_wait(&gate_a, GATE_WAIT_S) || kill(pid, SIGALRM) < 0 ||
	    !tr_wait_pid_gone(pid, GATE_WAIT_S)) {
		fprintf(out, "E rank %d did not join, or did not die\n",
			VICTIM);
		return 1;
	}
	if (tr_become_nobody(out) < 0)
		return 1;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	end = tw_now() + 10;
	while (lfd < 0 && tw_now() < end) {
		lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
		    listen(lfd, 16) < 0) {
			close(lfd);
			lfd = -1;
			usleep(20000);
		}
	}
	if (lfd < 0) {
		fprintf(out, "E bind %d: %s\n", port, strerror(errno));
		return 1;
	}
	fprintf(out, "HOLDING %d\n", port);
	fflush(out);
	tr_gate_open(&gate_b);
	memset(challenge, 0x11, sizeof(challenge));
	tr_put_hdr(challenge, 9, 20); /* CHALLENGE: rank, nonce */
	memcpy(challenge + TR_HDR, &victim, 4);
	memset(mac, 0, sizeof(mac));
	tr_put_hdr(mac, 10, 32); /* PEER_MAC */
	end = tw_now() + 8;
	while (tw_now() < end) {
		if (tr_wait_in(lfd, end - tw_now()) <= 0 ||
		    (fd = accept(lfd, NULL, NULL)) < 0)
			continue;
		/* Answer as a listener would, then note all that comes. */
		while ((type = tr_read_msg(fd, 2, raw, sizeof(raw), &len)) >
		       0) {
			fprintf(out, "GOT type %d (%zu bytes)\n", type, len);
			if (type == 5 &&
			    write(fd, challenge, sizeof(challenge)) < 0)
				break;
			if (type == 10 && write(fd, mac, sizeof(mac)) < 0)
				break;
		}
		close(fd);
	}
	return 0;
}

/* Rank VICTIM joins (rank 0 logs it: gate a), then dies before the
 * roster, which comes with rank 11 once the impostor holds the victim's
 * data port (gate b); index 12 is the impostor. */
static int
impostor_role(int i, int size, int port, FILE *out, void *arg)
{
	static struct tr_log_gate lg;
	static char joined[32];
	struct ddp_config cfg;
	char path[128];
	FILE *f;

	(void)size;
	(void)arg;
	if (i == TREE_RANKS)
		return impostor(out);
	ddp_set_log_fn(tr_log_to_file, out);
	if (i == 0) {
		setenv("DDP_DEBUG", "1", 1);
		lg.out = out;
		lg.gate = &gate_a;
		snprintf(joined, sizeof(joined), ": rank %d joined", VICTIM);
		lg.when = joined;
		ddp_set_log_fn(tr_log_then_open, &lg);
	}
	if (i == VICTIM) {
		snprintf(path, sizeof(path), "%s/victim.pid", test_dir);
		f = fopen(path, "w");
		if (f) {
			fprintf(f, "%d\n", (int)getpid());
			fclose(f);
		}
	}
	if (i == TREE_RANKS - 1 && !tr_gate_wait(&gate_b, 2 * GATE_WAIT_S)) {
		fprintf(out, "E the impostor never held rank %d's port\n",
			VICTIM);
		return 1;
	}
	tr_cfg(&cfg, i, TREE_RANKS, port, 20, "777", munge_sock);
	return tr_rank_job(&cfg, out);
}

static void
test_impostor_listener(void)
{
	static struct tw_rank rk[TREE_RANKS + 1];
	int failed = tap_failed;

	if (run_gated(TREE_RANKS + 1, impostor_role, NULL, 50, rk) < 0) {
		tap_ok(0, "fork");
		return;
	}
	tap_ok(tr_has(&rk[TREE_RANKS], "HOLDING") &&
		       tr_has(&rk[TREE_RANKS], "GOT type 5 (32 bytes)") &&
		       !tr_has(&rk[TREE_RANKS], "GOT type 4") &&
		       !tr_has(&rk[TREE_RANKS], "GOT type 5 (48 bytes)"),
	       "another user (nobody) on the data port of a rank that died "
	       "(rank %d) gets a hello with a nonce, never the job's token "
	       "nor the roster",
	       VICTIM);
	tap_ok(tw_exit(&rk[1]) == 3 &&
		       tr_has(&rk[1], "did not prove it is rank 9") &&
		       tr_has(&rk[1], "rank 9 died") &&
		       !tr_has(&rk[1], "timed out"),
	       "its parent in the tree (rank 1) names rank %d as gone at "
	       "once, not at the timeout",
	       VICTIM);
	if (tap_failed > failed || getenv("TEST_VERBOSE"))
		diag_job(TREE_RANKS + 1, rk);
	tw_free_job(TREE_RANKS + 1, rk);
}

/* Rank 2 joins rank 0 over IPv6 (::1); its mesh connection to rank 1
 * comes from 127.0.0.1, the address rank 1 joined from. */
static int
other_addr_role(int i, int size, int port, FILE *out, void *arg)
{
	struct ddp_config cfg;

	(void)arg;
	ddp_set_log_fn(tr_log_to_file, out);
	tr_cfg(&cfg, i, size, port, 4, "777", munge_sock);
	if (i == 2)
		snprintf(cfg.master_addr, sizeof(cfg.master_addr), "::1");
	return tr_rank_job(&cfg, out);
}

static void
test_mesh_from_join_addr(void)
{
	struct tw_rank rk[3];
	struct sockaddr_in6 lo6 = {.sin6_family = AF_INET6};
	int failed = tap_failed, fd = socket(AF_INET6, SOCK_STREAM, 0), v6;

	lo6.sin6_addr = in6addr_loopback;
	v6 = fd >= 0 && bind(fd, (struct sockaddr *)&lo6, sizeof(lo6)) == 0;
	if (fd >= 0)
		close(fd);
	if (!v6) {
		printf("ok %d # SKIP T3-9 needs a second address: no IPv6 "
		       "loopback (::1) here\n",
		       ++tap_count);
		return;
	}
	if (run_gated(3, other_addr_role, NULL, 30, rk) < 0) {
		tap_ok(0, "fork");
		return;
	}
	tap_ok(tr_has(&rk[1], "rank 2 connects from 127.0.0.1, but joined "
			      "from ::1") &&
		       tw_exit(&rk[1]) == 3,
	       "T3-9: a mesh connection is accepted only from the address its "
	       "rank joined from (rank 2 joined through ::1, connects "
	       "to rank 1 from 127.0.0.1: refused and logged)");
	if (tap_failed > failed || getenv("TEST_VERBOSE"))
		diag_job(3, rk);
	tw_free_job(3, rk);
}

/* ---- the address rank 0's own node's members get in the roster ---- */

/*
 * Ranks 0-1 on node nA (rank 0's), 2-3 on nB, MASTER_ADDR arg (this
 * host's non-loopback address); index 4, another user (nobody), connects
 * to MASTER_PORT from loopback first and says garbage. nB's ranks come
 * once rank 0 refused it.
 */
static int
roster_addr_role(int i, int size, int port, FILE *out, void *arg)
{
	static struct tr_log_gate lg;
	struct ddp_config cfg;
	char v[16];
	int fd;

	(void)size;
	if (i == 4) {
		if (tr_become_nobody(out) < 0)
			return 1;
		fd = tr_wait_listening(port, GATE_WAIT_S)
			     ? tr_dial("127.0.0.1", port, 5)
			     : -1;
		if (fd < 0 || write(fd, "GARBAGEgarbage!!", 16) != 16) {
			fprintf(out, "E knock: %s\n", strerror(errno));
			return 1;
		}
		fprintf(out, "KNOCKED\n");
		tr_wait_in(fd, GATE_WAIT_S); /* until rank 0 hangs up */
		close(fd);
		return 0;
	}
	ddp_set_log_fn(tr_log_to_file, out);
	setenv("DDP_HOSTNAME", i < 2 ? "nA" : "nB", 1);
	snprintf(v, sizeof(v), "%d", i % 2);
	setenv("LOCAL_RANK", v, 1);
	setenv("LOCAL_WORLD_SIZE", "2", 1);
	if (i == 0) {
		lg.out = out;
		lg.when = "refused connection from 127.0.0.1";
		lg.gate = &gate_a;
		ddp_set_log_fn(tr_log_then_open, &lg);
	}
	if (i >= 2 && !tr_gate_wait(&gate_a, GATE_WAIT_S)) {
		fprintf(out, "E rank 0 never refused the knock\n");
		return 1;
	}
	tr_cfg(&cfg, i, 4, port, 20, "777", munge_sock);
	snprintf(cfg.master_addr, sizeof(cfg.master_addr), "%s",
		 (const char *)arg);
	return tr_rank_job(&cfg, out);
}

/*
 * Rank 0 hands its node's members (joined on the node's socket) the
 * address the job's ranks reach it at: learnt from the first verified
 * join from another host, never from a connection that did not verify
 * or came from loopback. Were it taken from the loopback knock, nB's
 * ranks would be sent to 127.0.0.1 for rank 1, connect from there, and
 * be refused: rank 2 joined from the host's address.
 */
static void
test_roster_addr(void)
{
	struct tw_rank rk[5];
	char ip[64];
	int failed = tap_failed, i, ok = 1;

	host_ipv4(ip, sizeof(ip));
	if (!ip[0]) {
		printf("ok %d # SKIP no non-loopback IPv4 address here\n",
		       ++tap_count);
		return;
	}
	if (run_gated(5, roster_addr_role, ip, 40, rk) < 0) {
		tap_ok(0, "fork");
		return;
	}
	for (i = 0; i < 4; i++)
		ok = ok && tw_exit(&rk[i]) == 0 &&
		     tr_has(&rk[i], "ALLREDUCE 0 4 6 20") &&
		     !tr_has(&rk[i], "connects from 127.0.0.1");
	tap_ok(ok && tr_has(&rk[4], "KNOCKED") &&
		       tr_has(&rk[0], "refused connection from 127.0.0.1"),
	       "another user's connection to MASTER_PORT from loopback, "
	       "refused, does not choose the address rank 0's node's "
	       "members get in the roster: node nB's ranks reach rank 1 at "
	       "%s and the job of 2 nodes completes",
	       ip);
	if (tap_failed > failed || getenv("TEST_VERBOSE"))
		diag_job(5, rk);
	tw_free_job(5, rk);
}

int
main(void)
{
	char dir[] = "/tmp/ddp-test-rdv-XXXXXX";
	int rc;

	signal(SIGPIPE, SIG_IGN);
	if (!mkdtemp(dir)) {
		tap_ok(0, "mkdtemp");
		return tap_done();
	}
	snprintf(test_dir, sizeof(test_dir), "%s", dir);
	if (!tr_munged_begin(dir, dir, munge_sock, sizeof(munge_sock), &rc))
		return rc;
	test_squat_replay();
	test_held_port();
	test_ttl();
	test_auth_none();
	test_fd_limit();
	test_port_collision();
	test_tree_parent_dies();
	test_tree_intruder();
	test_impostor_listener();
	test_mesh_from_join_addr();
	test_roster_addr();
	tr_munged_stop(dir);
	return tap_done();
}
