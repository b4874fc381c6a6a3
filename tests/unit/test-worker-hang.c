/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A rank that is alive but never enters a collective (a hang, not a
 * death): the verdict of the control plane (tcp.h) as a pure function,
 * for the TCP waits (the rank waited for is known) and the NCCL data
 * plane (it is not), overruled for the ranks known to be in the call;
 * the naming a verdict writes to DDP_FAILURE_FD (a rank still in an
 * earlier call is "behind"), and the one a peer's ABORT makes, from its
 * fields alone; then real jobs over loopback in which one rank skips an
 * allreduce and sleeps: every other rank fails with DDP_ERR_TIMEOUT
 * naming it, its host and its pid and the call it has not entered, 20
 * tries of 20, on 3 to 8 ranks (8: a mesh in which not every rank is
 * connected to the silent one), and every process ends; in the timing
 * tier within DDP_TIMEOUT and one grace (a quarter of the timeout, at
 * most 0.5 s: tcp.h). The rendezvous has a timeout of its own
 * (RDV_TIMEOUT_S): the short one is set after it, with
 * ddp_comm_set_timeout, so that only the hang is timed. Last, on a host
 * kept busy, with another rank entering the call late, every rank names
 * the one that skipped it and none names itself.
 */
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/stat.h>

#include "cause.h"
#include "status.h"
#include "tap.h"
#include "tcp.h"
#include "test-worker-util.h"

/* A mesh of `size` ranks seen from `rank`, every peer connected (fd 0:
 * never read, the functions under test are pure). */
static struct wk_mesh *
mesh_new(int size, int rank, uint32_t seq)
{
	struct wk_mesh *c = calloc(1, sizeof(*c));
	int i;

	c->size = size;
	c->rank = rank;
	c->cur.seq = seq;
	c->cur.coll = WK_C_ALLREDUCE;
	c->peers = calloc((size_t)size, sizeof(*c->peers));
	for (i = 0; i < size; i++) {
		c->peers[i].fd = i == rank ? -1 : 0;
		c->peers[i].waits_for = -1;
	}
	return c;
}

static void
mesh_free(struct wk_mesh *c)
{
	free(c->peers);
	free(c);
}

static void
test_verdict(void)
{
	struct wk_mesh *c = mesh_new(6, 0, 7);
	int out[8], n;

	/* Ranks 1, 2, 4 answered for call 7 (4 from a later call); 3 is in
	 * call 6 still; 5 said nothing; rank 4 is not connected. */
	c->peers[1].in_seq = 7;
	c->peers[2].in_seq = 7;
	c->peers[3].in_seq = 6;
	c->peers[4].in_seq = 9;
	n = tcp_hang_verdict(c, 1, out, 8);
	tap_ok(n == 0, "TCP: the rank waited for answered: no verdict (%d)", n);
	n = tcp_hang_verdict(c, 3, out, 8);
	tap_ok(n == 1 && out[0] == 3,
	       "TCP: the rank waited for is still in an earlier call: named");
	n = tcp_hang_verdict(c, 5, out, 8);
	tap_ok(n == 1 && out[0] == 5,
	       "TCP: the rank waited for said nothing: named");
	/* NCCL: whom the data plane waits for is unknown. */
	n = tcp_hang_verdict(c, -1, out, 8);
	tap_ok(n == 2 && out[0] == 3 && out[1] == 5,
	       "NCCL: every connected rank that has not entered this call is "
	       "named, those in it or past it are not (%d)",
	       n);
	c->peers[5].fd = -1;
	c->peers[3].bye = 1;
	n = tcp_hang_verdict(c, -1, out, 8);
	tap_ok(n == 0,
	       "NCCL: ranks this one has no connection to, or that left, are "
	       "for other ranks' verdicts (%d)",
	       n);
	n = tcp_hang_verdict(c, -1, out, 1);
	tap_ok(n == 0, "the verdict respects its room");
	c->peers[5].fd = 0;
	c->peers[3].bye = 0;
	n = tcp_hang_verdict(c, -1, out, 1);
	tap_ok(n == 1 && out[0] == 3, "a verdict cut to its room keeps the "
				      "first ranks");
	c->cur.seq = 0;
	tap_ok(tcp_hang_verdict(c, -1, out, 8) == 0,
	       "before the first call there is nothing to name");
	c->cur.seq = 7;
	c->peers[5].absent_seq = 7;
	c->peers[2].absent_seq = 6;
	n = tcp_hang_absent(c, out, 8);
	tap_ok(n == 1 && out[0] == 5,
	       "the ranks named are those of this call's verdicts only");
	c->peers[0].absent_seq = 7;
	c->peers[4].absent_seq = 7;
	c->peers[1].absent_seq = 7;
	c->peers[1].in_seq = 0;
	c->peers[1].data_seq = 7;
	c->peers[3].absent_seq = 7;
	c->peers[3].present_seq = 7;
	n = tcp_hang_absent(c, out, 8);
	tap_ok(n == 1 && out[0] == 5,
	       "a verdict is overruled for this rank itself and for the "
	       "ranks it knows have entered the call: their notice of it or "
	       "a later one, their data of it, a PRESENT notice (%d)",
	       n);
	mesh_free(c);
}

/* A live mesh of 3 ranks seen from rank 0 in call seq, its peers at the
 * other ends of socket pairs (side[1], side[2]). */
static struct wk_mesh *
live_mesh(uint32_t seq, int side[3])
{
	struct wk_mesh *c = mesh_new(3, 0, seq);
	int i, sv[2];

	c->timeout_s = 10;
	for (i = 1; i < 3; i++) {
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
			return c;
		c->peers[i].fd = sv[0];
		side[i] = sv[1];
		fcntl(sv[1], F_SETFL, O_NONBLOCK);
	}
	tcp_mesh_link(c);
	return c;
}

/* A STALL notice from peer side about rank `about` in call seq. */
static void
notice(int side, uint32_t flags, int about, uint32_t seq)
{
	uint8_t hdr[WK_FRAME_LEN];
	struct wk_frame f;

	memset(&f, 0, sizeof(f));
	f.type = WK_F_STALL;
	f.coll = WK_C_ALLREDUCE;
	f.seq = seq;
	f.unit = flags;
	f.aux = (uint32_t)about;
	wk_frame_encode(hdr, &f);
	(void)!write(side, hdr, sizeof(hdr));
}

/* How many PRESENT notices about rank `about` in call seq came to side. */
static int
presents(int side, int about, uint32_t seq)
{
	uint8_t hdr[WK_FRAME_LEN];
	struct wk_frame f;
	int n = 0;

	while (read(side, hdr, sizeof(hdr)) == (ssize_t)sizeof(hdr))
		if (wk_frame_decode(hdr, &f) == 0 && f.type == WK_F_STALL &&
		    (f.unit & WK_STALL_PRESENT) && f.aux == (uint32_t)about &&
		    f.seq == seq)
			n++;
	return n;
}

static void
live_free(struct wk_mesh *c, int side[3])
{
	int i;

	for (i = 1; i < 3; i++) {
		close(c->peers[i].fd);
		close(side[i]);
	}
	free(c->linked);
	free(c->wait_pfd);
	free(c->wait_who);
	mesh_free(c);
}

/* The corrections of a wrong verdict (tcp.h), on a live mesh. */
static void
test_present(void)
{
	int side[3] = {-1, -1, -1}, out[4];
	struct wk_mesh *c;

	c = live_mesh(7, side);
	notice(side[1], WK_STALL_ABSENT, 0, 7);
	notice(side[1], WK_STALL_ABSENT, 0, 7);
	tcp_check_peers(c);
	tap_ok(presents(side[1], 0, 7) == 1 && presents(side[2], 0, 7) == 1 &&
		       tcp_hang_absent(c, out, 4) == 0,
	       "a verdict naming this rank in its call is answered once, to "
	       "every peer, with a PRESENT notice; it names nobody here");
	live_free(c, side);

	c = live_mesh(6, side);
	notice(side[1], WK_STALL_ABSENT, 0, 7);
	tcp_check_peers(c);
	tap_ok(presents(side[2], 0, 7) == 0,
	       "one naming this rank for a call it has not entered yet waits");
	c->cur.seq = 7;
	tcp_hang_watch(c, NULL, 1, tw_now() + 10);
	tap_ok(presents(side[1], 0, 7) == 1 && presents(side[2], 0, 7) == 1,
	       "and is answered once the rank is in that call");
	live_free(c, side);

	c = live_mesh(7, side);
	c->peers[2].data_seq = 7;
	notice(side[1], WK_STALL_ABSENT, 2, 7);
	tcp_check_peers(c);
	tap_ok(presents(side[1], 2, 7) == 1 && presents(side[2], 2, 7) == 1 &&
		       tcp_hang_absent(c, out, 4) == 0,
	       "a verdict naming a rank whose data of the call came is "
	       "answered for it, and not taken");
	live_free(c, side);

	c = live_mesh(7, side);
	notice(side[1], WK_STALL_ABSENT, 2, 7);
	tcp_check_peers(c);
	tap_ok(tcp_hang_absent(c, out, 4) == 1 && out[0] == 2,
	       "a verdict about a rank this one knows nothing of is taken");
	notice(side[1], WK_STALL_PRESENT, 2, 7);
	notice(side[1], WK_STALL_PRESENT, 2, 7);
	tcp_check_peers(c);
	tap_ok(tcp_hang_absent(c, out, 4) == 0 &&
		       presents(side[2], 2, 7) == 1 &&
		       presents(side[1], 2, 7) == 0,
	       "a PRESENT notice overrules it and is passed on once, not back "
	       "to its sender");
	live_free(c, side);
}

/*
 * Rank 3 of the mesh c sends rank 0 the ABORT frame of cause ab over the
 * socket pair sv (rank 0's end sv[0]); rank 0 reads it, then aborts
 * itself, and what its own ABORT carries is written to out as "why
 * blamed host seq text". In the child of survey_naming.
 */
static void
abort_from_peer(struct wk_mesh *c, const struct wk_abort *ab, int sv[2],
		int out)
{
	uint8_t frame[WK_FRAME_LEN + WK_ABORT_MAX];
	struct wk_frame f;
	struct wk_abort fwd;
	char line[WK_ABORT_MAX + 64], err[128];
	int n;

	memset(&f, 0, sizeof(f));
	f.type = WK_F_ABORT;
	n = wk_abort_encode(frame + WK_FRAME_LEN, WK_ABORT_MAX, ab);
	if (n < 0)
		_exit(1);
	f.len = (uint32_t)n;
	wk_frame_encode(frame, &f);
	/* A hang of the call in progress is this rank's hang too
	 * (DDP_ERR_TIMEOUT, its own error); anything else the peer's. */
	if (write(sv[1], frame, WK_FRAME_LEN + (size_t)n) < 0 ||
	    tcp_mesh_link(c))
		_exit(1);
	n = tcp_check_peers(c);
	if (n != DDP_ERR_PEER && n != DDP_ERR_TIMEOUT)
		_exit(1);
	tcp_send_abort(c, wk_errbuf());
	if (read(sv[1], frame, WK_FRAME_LEN) != WK_FRAME_LEN ||
	    wk_frame_decode(frame, &f) < 0 || f.type != WK_F_ABORT ||
	    read(sv[1], frame, f.len) != (ssize_t)f.len ||
	    wk_abort_decode(frame, f.len, &fwd, err, sizeof(err)) < 0)
		_exit(1);
	snprintf(line, sizeof(line), "FWD %s %d %s %u %s\n",
		 fwd.why ? wk_why_name(fwd.why) : "none", (int)fwd.blamed,
		 fwd.host, fwd.seq, fwd.text);
	(void)!write(out, line, strlen(line));
}

/*
 * The naming line rank 0 writes to DDP_FAILURE_FD, into buf: for a
 * peer's abort (ab, see abort_from_peer: the line its own abort carries
 * follows), or (ab NULL) when its hang survey's verdict names rank 2,
 * which last said it is in call in_seq while rank 0 is in call 7; then
 * the survey's error follows the line. In a child: a process names once.
 */
static void
survey_naming(const struct wk_abort *ab, uint32_t in_seq, char *buf, size_t len)
{
	char value[48];
	struct stat st;
	ssize_t n;
	pid_t pid;
	int fd[2];

	buf[0] = '\0';
	if (pipe2(fd, O_NONBLOCK) < 0)
		return;
	if (fstat(fd[1], &st) < 0 ||
	    snprintf(value, sizeof(value), "%d:%lu", fd[1],
		     (unsigned long)st.st_ino) >= (int)sizeof(value))
		goto out;
	pid = fork();
	if (pid == 0) {
		struct wk_mesh *c = mesh_new(4, 0, 7);
		int i;

		setenv("DDP_FAILURE_FD", value, 1);
		/* The hang's error is logged: not into the TAP stream. */
		if (!freopen("/dev/null", "w", stderr))
			_exit(1);
		if (ab) {
			int sv[2];

			for (i = 0; i < 4; i++) {
				c->peers[i].fd = -1;
				snprintf(c->peers[i].host,
					 sizeof(c->peers[i].host), "node%d",
					 i + 1);
			}
			if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
				_exit(1);
			c->peers[3].fd = sv[0];
			/* Rank 2's data of call 7 came: it has entered. */
			c->peers[2].in_seq = in_seq;
			abort_from_peer(c, ab, sv, fd[1]);
			_exit(0);
		}
		/* No connection: the survey is past asking and telling, its
		 * verdict named rank 2 (tcp.h); only the failure is left. */
		for (i = 0; i < 4; i++) {
			c->peers[i].fd = -1;
			snprintf(c->peers[i].host, sizeof(c->peers[i].host),
				 "node%d", i + 1);
		}
		c->timeout_s = 1.0;
		c->waiting = 2;
		c->in_grace = 1;
		c->told = 1;
		c->grace_end = tw_now() - 1.0;
		c->peers[2].in_seq = in_seq;
		c->peers[2].absent_seq = 7;
		if (tcp_hang_watch(c, NULL, 2, tw_now() - 1.0) !=
		    DDP_ERR_TIMEOUT)
			(void)!write(fd[1], "NO HANG", 7);
		else
			(void)!write(fd[1], wk_errbuf(), strlen(wk_errbuf()));
		_exit(0);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
	n = read(fd[0], buf, len - 1);
	buf[n > 0 ? n : 0] = '\0';
out:
	close(fd[0]);
	close(fd[1]);
}

/* 1 when out is the naming line want followed by an error with hint. */
static int
named_with_hint(const char *out, const char *want, const char *hint)
{
	size_t n = strlen(want);

	return !strncmp(out, want, n) && strstr(out + n, "hang: rank 0 ") &&
	       strstr(out + n, hint);
}

/* A cause of rank 3's abort: rank `blamed` on `host`, for why, call 7. */
static struct wk_abort
cause_of(int why, int blamed, const char *host, const char *text)
{
	struct wk_abort a;

	memset(&a, 0, sizeof(a));
	a.why = (uint8_t)why;
	a.blamed = blamed;
	a.coll = WK_C_ALLREDUCE;
	a.seq = 7;
	snprintf(a.host, sizeof(a.host), "%s", host);
	snprintf(a.text, sizeof(a.text), "%s", text);
	return a;
}

/* An abort names from its fields; its text is for people only. */
static void
test_abort_naming(void)
{
	char line[2048];
	struct wk_abort a;

	a = cause_of(WK_WHY_BEHIND, 2, "node3", "words");
	survey_naming(&a, 0, line, sizeof(line));
	tap_ok(!strncmp(line, "0 names 2 node3 behind\nFWD behind 2 node3 7 ",
			44),
	       "a peer's abort for a waiter passes it on as behind, and this "
	       "rank's own abort carries that cause unchanged: %.*s",
	       (int)strcspn(line, "\n"), line);
	a = cause_of(WK_WHY_HANG, 1, "node2", "lost rank 2 (node3) during");
	survey_naming(&a, 0, line, sizeof(line));
	tap_ok(!strncmp(line, "0 names 1 node2 hang\n", 21),
	       "the rank named is the abort's field, never one its text "
	       "names: %.*s",
	       (int)strcspn(line, "\n"), line);
	a = cause_of(WK_WHY_NONE, -1, "",
		     "hang: ... which rank 2 (node3, "
		     "pid 8) has not entered");
	survey_naming(&a, 0, line, sizeof(line));
	tap_ok(!strncmp(line, "FWD none -1  0 ", 15),
	       "an abort that blames nobody names nobody, whatever its text "
	       "says: %.*s",
	       (int)strcspn(line, "\n"), line);
	a = cause_of(WK_WHY_HANG, 0, "node1", "words");
	survey_naming(&a, 0, line, sizeof(line));
	tap_ok(!strncmp(line, "FWD none ", 9),
	       "an abort that blames this rank names nobody, and is not "
	       "passed on: %.*s",
	       (int)strcspn(line, "\n"), line);
	a = cause_of(WK_WHY_HANG, 2, "node3", "words");
	survey_naming(&a, 7, line, sizeof(line));
	tap_ok(!strncmp(line, "FWD none ", 9),
	       "an abort that says a rank has not entered a call this rank "
	       "knows it has entered names nobody: %.*s",
	       (int)strcspn(line, "\n"), line);
	a = cause_of(WK_WHY_UNREACHABLE, 2, "node3", "words");
	survey_naming(&a, 0, line, sizeof(line));
	tap_ok(!strncmp(line, "FWD none ", 9),
	       "an unreachable rank, which only the sender could not reach "
	       "(it may be the one cut off), is not taken on: %.*s",
	       (int)strcspn(line, "\n"), line);
	a = cause_of(WK_WHY_LOST, 2, "node3", "words");
	survey_naming(&a, 7, line, sizeof(line));
	tap_ok(!strncmp(line, "0 names 2 node3 lost\nFWD lost 2 node3 7 ", 40),
	       "a lost rank is named whatever its calls: %.*s",
	       (int)strcspn(line, "\n"), line);
}

static void
test_survey_naming(void)
{
	char line[1024];
	static const char silent[] = "(silent in this call: not calling";
	static const char behind[] = "(waiting in an earlier call: its own "
				     "error names the rank it waits for)";

	survey_naming(NULL, 0, line, sizeof(line));
	tap_ok(named_with_hint(line, "0 names 2 node3 hang\n", silent),
	       "a survey that names a rank which said nothing of its calls "
	       "names it as hung, silent in this call: %.*s",
	       (int)strcspn(line, "\n"), line);
	survey_naming(NULL, 7, line, sizeof(line));
	tap_ok(!strcmp(line, "NO HANG"),
	       "a verdict about a rank whose notice says it is in the call "
	       "in progress is overruled: no naming, no hang: %.*s",
	       (int)strcspn(line, "\n"), line);
	survey_naming(NULL, 6, line, sizeof(line));
	tap_ok(named_with_hint(line, "0 names 2 node3 behind\n", behind) &&
		       strstr(line, "rank 2 (node3, pid 0, still in #6)"),
	       "a rank still in an earlier call is named as behind, a "
	       "waiter that srun follows, and said to wait there: %.*s",
	       (int)strcspn(line, "\n"), line);
	test_abort_naming();
}

/* The rendezvous' timeout, ample on a loaded host. */
#define RDV_TIMEOUT_S 30.0

/* The grace of tcp.h: a quarter of the timeout, at most 0.5 s. */
static double
grace_of(double timeout)
{
	return timeout / 4 < 0.5 ? timeout / 4 : 0.5;
}

/* How long a waiting rank may take to name the hang: DDP_TIMEOUT and a
 * grace (tcp.h) in the timing tier; elsewhere (a package build's busy
 * host) well under the rendezvous' timeout, which a rank stuck past its
 * survey would run into. tap.h. */
static double
hang_bound(double timeout)
{
	return tap_bound(timeout + grace_of(timeout), RDV_TIMEOUT_S / 2);
}

/*
 * A pipe of this process as its DDP_FAILURE_FD, as the plugin gives each
 * task one: what libddp names is read back from it (naming_read).
 */
static void
naming_pipe(int fd[2])
{
	char value[48];
	struct stat st;

	if (pipe2(fd, O_NONBLOCK) < 0) {
		fd[0] = fd[1] = -1;
		return;
	}
	if (fstat(fd[1], &st) == 0 &&
	    snprintf(value, sizeof(value), "%d:%lu", fd[1],
		     (unsigned long)st.st_ino) < (int)sizeof(value))
		setenv("DDP_FAILURE_FD", value, 1);
}

/* The naming line this process wrote ("" for none), without newline. */
static void
naming_read(int fd[2], char *buf, size_t len)
{
	ssize_t n = fd[0] >= 0 ? read(fd[0], buf, len - 1) : -1;

	buf[n > 0 ? n : 0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	if (fd[0] >= 0) {
		close(fd[0]);
		close(fd[1]);
	}
}

struct hang_try {
	int victim;
	int skip_at; /* the allreduce the victim skips */
	double timeout;
	int per_node; /* ranks per simulated node (DDP_HOSTNAME), 0: one host */
	size_t count; /* elements per allreduce, 0: a few */
	int late;     /* a rank that enters the call late (-1: none) */
	double late_s; /* by how much: after the others' verdicts */
};

static int
hang_rank(int rank, int size, int port, FILE *out, void *arg)
{
	const struct hang_try *t = arg;
	struct ddp_config cfg;
	struct ddp_comm *c = NULL;
	enum ddp_status st = DDP_OK;
	static float buf[1 << 20];
	char node[32], naming[128];
	double t0 = tw_now(), after;
	int i, fd[2] = {-1, -1};

	if (t->per_node) {
		snprintf(node, sizeof(node), "node%d", rank / t->per_node);
		setenv("DDP_HOSTNAME", node, 1);
	}
	naming_pipe(fd);
	tw_cfg(&cfg, rank, size, port, RDV_TIMEOUT_S);
	if (ddp_comm_init(&cfg, &c)) {
		fprintf(out, "INIT %s\n", ddp_last_error());
		return 1;
	}
	if (ddp_comm_set_timeout(c, t->timeout)) {
		fprintf(out, "SET_TIMEOUT %s\n", ddp_last_error());
		ddp_comm_destroy(c);
		return 1;
	}
	for (i = 0; i < 256; i++)
		buf[i] = (float)rank;
	for (i = 0; i < t->skip_at + 3 && !st; i++) {
		if (rank == t->victim && i == t->skip_at) {
			/* Alive, but not calling: a stuck data loader. */
			usleep((useconds_t)((t->timeout + 1.0) * 1e6));
			continue;
		}
		if (rank == t->late && i == t->skip_at)
			usleep((useconds_t)(t->late_s * 1e6));
		t0 = tw_now();
		st = ddp_allreduce(c, buf, buf,
				   t->count ? t->count : 1 + (size_t)i % 200,
				   DDP_FLOAT32, DDP_SUM);
	}
	after = tw_now() - t0;
	naming_read(fd, naming, sizeof(naming));
	/* The naming first: the message may span lines. */
	fprintf(out, "NAMING %s\nSTATUS %d AFTER %.3f MSG %s\n", naming,
		(int)st, after, st ? ddp_last_error() : "");
	ddp_comm_destroy(c);
	return st ? 3 : 0;
}

/* One job: 1 when every waiting rank named the victim as it should. */
static int
hang_job(int size, const struct hang_try *t, char *line, size_t linelen,
	 double *worst)
{
	struct tw_rank rk[8];
	char want[96];
	int i, ok = 1;
	const char *m, *w, *p;

	if (tw_run_job(size, hang_rank, (void *)t, RDV_TIMEOUT_S + 15, rk) < 0)
		return 0;
	*worst = 0;
	for (i = 0; i < size; i++) {
		/* Every process ends by itself, the victim too: its next
		 * call fails at once on the aborted communicator. */
		ok &= WIFEXITED(rk[i].status) && tw_exit(&rk[i]) == 3;
		if (i == t->victim)
			continue;
		/* The victim alone, with its pid; silent in this call, or
		 * still in the one before when a loaded host made that one
		 * take so long that a survey asked in it. */
		snprintf(want, sizeof(want), ", which rank %d (", t->victim);
		m = strstr(rk[i].out, "MSG ");
		w = m ? strstr(m, ", which rank ") : NULL;
		ok &= tw_status_of(&rk[i]) == DDP_ERR_TIMEOUT && m &&
		      !strncmp(m, "MSG hang: ", 10) && w &&
		      !strncmp(w, want, strlen(want)) &&
		      (strstr(m, "has not entered (silent in this call") ||
		       strstr(m, "has not entered (waiting in an earlier")) &&
		      strstr(m, "allreduce #") &&
		      tw_after_of(&rk[i]) <= hang_bound(t->timeout);
		snprintf(want, sizeof(want), "pid %d", (int)rk[t->victim].pid);
		p = w ? strstr(w, want) : NULL;
		ok &= p && (p[strlen(want)] == ')' || p[strlen(want)] == ',');
		if (tw_after_of(&rk[i]) > *worst)
			*worst = tw_after_of(&rk[i]);
		if (m && !line[0])
			snprintf(line, linelen, "%.*s",
				 (int)strcspn(m + 4, "\n"), m + 4);
	}
	if (!ok)
		tw_diag_all(size, rk);
	tw_free_job(size, rk);
	return ok;
}

static void
test_skipped_allreduce(void)
{
	static const int sizes[] = {3, 4, 5, 8};
	struct hang_try t;
	char line[1024] = "";
	double worst = 0, w = 0;
	int k, good = 0, size;

	memset(&t, 0, sizeof(t));
	t.late = -1;
	for (k = 0; k < 20; k++) {
		size = sizes[k % 4];
		t.victim = (k * 3 + 1) % size;
		t.skip_at = 2 + k % 5;
		t.timeout = 1.0;
		if (hang_job(size, &t, line, sizeof(line), &w))
			good++;
		else
			tap_diag(
				"try %d: %d ranks, rank %d skips allreduce %d: "
				"not named as it should be",
				k + 1, size, t.victim, t.skip_at + 1);
		worst = w > worst ? w : worst;
	}
	tap_ok(good == 20,
	       "a rank that skips one allreduce is named by every other rank "
	       "(call, host, pid), and every process ends: %d of 20 tries (3 "
	       "to 8 ranks, timeout 1 s set after the rendezvous, bound %.2f "
	       "s, slowest %.2f s)",
	       good, hang_bound(1.0), worst);
	tap_diag("%s", line);
}

/* The hierarchical allreduce: ranks of a node wait in shared memory. */
static void
test_skipped_hier(void)
{
	struct hang_try t;
	char line[1024] = "";
	double worst = 0, w = 0;
	int k, good = 0;

	memset(&t, 0, sizeof(t));
	t.late = -1;
	t.per_node = 2;
	t.count = 1 << 20;
	t.timeout = 1.0;
	t.skip_at = 2;
	for (k = 0; k < 4; k++) {
		t.victim = k;
		good += hang_job(4, &t, line, sizeof(line), &w);
		worst = w > worst ? w : worst;
	}
	tap_ok(good == 4,
	       "the same in the hierarchical allreduce (2 nodes of 2 ranks, "
	       "shared memory within them), each rank skipping in turn: %d "
	       "of 4 (bound %.2f s, slowest %.2f s)",
	       good, hang_bound(1.0), worst);
	tap_diag("%s", line);
}

static volatile double sink;

/* A busy process on any CPU, as a package build's compilers are; it dies
 * with the test. */
static pid_t
hog(void)
{
	pid_t pid = fork();
	double x = 1.0;

	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		for (;;) {
			x = x * 1.0000001 + 1e-9;
			sink = x;
		}
	}
	return pid;
}

/* 1 when rank i's own hang error ("hang: rank I ...", not a peer's that
 * it passes on) names itself among the ranks that have not entered the
 * call ("which rank I (" ... " not entered"). */
static int
names_itself(const struct tw_rank *r, int i)
{
	const char *m = strstr(r->out, "MSG "), *w, *end;
	char self[32];

	if (!m || strncmp(m, "MSG hang: ", 10) ||
	    !(w = strstr(m, ", which rank ")) ||
	    !(end = strstr(w, " not entered")))
		return 0;
	snprintf(self, sizeof(self), "rank %d (", i);
	m = strstr(w, self);
	return m && m < end;
}

/*
 * One job of the loaded test: 1 when every rank but the victim names it
 * (its naming line, and first in its error), none names itself, and
 * every process ends; what they named into named[] for the diagnostics.
 */
static int
loaded_job(const struct hang_try *t, char named[4][128], double *worst,
	   int *self)
{
	struct tw_rank rk[4];
	char want[64];
	const char *m;
	int i, ok = 1;

	if (tw_run_job(4, hang_rank, (void *)t, RDV_TIMEOUT_S + 30, rk) < 0)
		return 0;
	for (i = 0; i < 4; i++) {
		m = strstr(rk[i].out, "NAMING ");
		snprintf(named[i], 128, "%.*s",
			 m ? (int)strcspn(m + 7, "\n") : 0, m ? m + 7 : "");
		ok &= WIFEXITED(rk[i].status) && tw_exit(&rk[i]) == 3;
		snprintf(want, sizeof(want), "%d names %d ", i, i);
		if (!strncmp(named[i], want, strlen(want)) ||
		    names_itself(&rk[i], i))
			++*self;
		if (i == t->victim)
			continue;
		snprintf(want, sizeof(want), "%d names %d node%d ", i,
			 t->victim, t->victim / t->per_node);
		ok &= !strncmp(named[i], want, strlen(want));
		m = strstr(rk[i].out, ", which rank ");
		snprintf(want, sizeof(want), ", which rank %d (", t->victim);
		ok &= m && !strncmp(m, want, strlen(want));
		if (tw_after_of(&rk[i]) > *worst)
			*worst = tw_after_of(&rk[i]);
	}
	if (!ok || *self)
		tw_diag_all(4, rk);
	tw_free_job(4, rk);
	return ok;
}

/*
 * H8: the hierarchical allreduce of 2 nodes x 2 ranks on a host whose
 * CPUs are all busy, as in a package build (two busy processes per CPU,
 * at most 16), one rank skipping a call and another entering it late, as
 * a loaded host makes a rank: after the others' verdicts named it,
 * before they fail; the late rank is what reproduces the race on any
 * host. Every rank but the one that skipped names that one, in its
 * naming line and first in its error, and no rank names itself. The
 * longer timeout leaves the late rank's notice a grace of 0.5 s to
 * overrule the verdicts; what is asserted is who is named, never how
 * fast.
 */
static void
test_hier_loaded(void)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	pid_t hogs[16];
	struct hang_try t;
	char named[4][128];
	double worst = 0;
	int nh, k, i, good = 0, self = 0;

	memset(&t, 0, sizeof(t));
	t.per_node = 2;
	t.count = 1 << 20;
	t.timeout = 4.0;
	t.skip_at = 2;
	/* The verdicts come a grace before the deadline, the failure at
	 * it: the late rank enters between them. */
	t.late_s = t.timeout - 0.8 * grace_of(t.timeout);
	for (nh = 0; nh < 2 * ncpu && nh < 16; nh++)
		hogs[nh] = hog();
	for (k = 0; k < 4; k++) {
		t.victim = k;
		t.late = (k + 1 + k / 2) % 4;
		if (loaded_job(&t, named, &worst, &self))
			good++;
		else
			tap_diag("rank %d skips, rank %d is late: named %s | "
				 "%s | %s | %s",
				 t.victim, t.late, named[0], named[1], named[2],
				 named[3]);
	}
	for (i = 0; i < nh; i++)
		if (hogs[i] > 0 && kill(hogs[i], SIGKILL) == 0)
			waitpid(hogs[i], NULL, 0);
	tap_ok(good == 4 && self == 0,
	       "on a loaded host (%d busy processes, %ld CPUs), the ranks of "
	       "the hierarchical allreduce all name the rank that skipped "
	       "the call, not one that entered it late, and none names "
	       "itself: %d of 4 (%d namings of a rank by itself; slowest "
	       "%.2f s, timeout %.0f s)",
	       nh, ncpu, good, self, worst, t.timeout);
}

int
main(void)
{
	signal(SIGPIPE, SIG_IGN);
	test_verdict();
	test_present();
	test_survey_naming();
	test_skipped_allreduce();
	test_skipped_hier();
	test_hier_loaded();
	return tap_done();
}
