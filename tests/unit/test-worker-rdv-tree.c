/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rendezvous through node leaders, against a private munged: 12
 * ranks on three simulated nodes of 4 (DDP_HOSTNAME, LOCAL_RANK,
 * LOCAL_WORLD_SIZE). Each node's ranks join their leader (LOCAL_RANK 0)
 * on the node's join socket and the leader relays them to rank 0 in its
 * own authenticated session. Another user (nobody) squatting a node's
 * join socket (listening, or with its backlog full and never accepting),
 * knocking on a leader's or forging a leader's relay to
 * rank 0 gets nothing, and the job completes; a leader that dies holding
 * its members' joins is named by each of them at once. The same
 * leaders serve jobs on the step key (DDP_AUTH=key) and on none. A
 * MASTER_ADDR on a loopback alias (Debian's "127.0.1.1 host" line) still
 * lets rank 0's node's members into the mesh, whose connections come from
 * 127.0.0.1.
 */
#include <sys/un.h>

#include "proto.h"
#include "rdv.h"
#include "test-worker-rdv.h"

#define NODE_RANKS 4
#define JOB_RANKS 12
#define JOB_ID "4242" /* the job id every rank and forged message claims */

static char munge_sock[200];

static const char *
node_of(int rank)
{
	static const char *names[] = {"nA", "nB", "nC"};

	return names[rank / NODE_RANKS];
}

/* The environment of rank i as a launcher with 4 ranks per node sets it. */
static void
node_env(int i)
{
	char v[16];

	setenv("DDP_HOSTNAME", node_of(i), 1);
	snprintf(v, sizeof(v), "%d", i % NODE_RANKS);
	setenv("LOCAL_RANK", v, 1);
	snprintf(v, sizeof(v), "%d", NODE_RANKS);
	setenv("LOCAL_WORLD_SIZE", v, 1);
}

/* The abstract address of node host's join socket for this test's job
 * (computed as the job's user, before any switch to nobody). */
static socklen_t
node_addr(int port, const char *host, struct sockaddr_un *sa)
{
	struct ddp_config cfg;
	char name[64];

	tr_cfg(&cfg, 0, JOB_RANKS, port, 10, JOB_ID, munge_sock);
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (rdv_node_socket(&cfg, JOB_RANKS, host, name, sizeof(name)) < 0)
		return 0;
	memcpy(sa->sun_path + 1, name, strlen(name));
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			   strlen(name));
}

static int
rank_role(int i, int port, double timeout, FILE *out)
{
	struct ddp_config cfg;

	ddp_set_log_fn(tr_log_to_file, out);
	node_env(i);
	tr_cfg(&cfg, i, JOB_RANKS, port, timeout, JOB_ID, munge_sock);
	return tr_rank_job(&cfg, out);
}

static int
completed(const struct tw_rank *r)
{
	return tw_exit(r) == 0 && tr_has(r, "ALLREDUCE 0 12 66 60");
}

static void
diag_job(int n, const struct tw_rank *rk)
{
	int i;

	for (i = 0; i < n; i++)
		tw_diag_output(i, &rk[i]);
}

/* ---- a squatter on node nB's join socket ---- */

static int
squat_role(int i, int size, int port, FILE *out, void *arg)
{
	struct sockaddr_un sa;
	socklen_t sl;
	int fd, held = 0, c;
	double end;

	(void)size;
	(void)arg;
	if (i < JOB_RANKS) {
		/* nB's ranks start once the squatter holds the socket. */
		if (node_of(i)[1] == 'B' &&
		    !tr_gate_wait(&gate_a, GATE_WAIT_S)) {
			fprintf(out, "E the squatter never listened\n");
			return 1;
		}
		return rank_role(i, port, 20, out);
	}
	sl = node_addr(port, "nB", &sa);
	if (tr_become_nobody(out) < 0)
		return 1;
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (!sl || fd < 0 || bind(fd, (struct sockaddr *)&sa, sl) < 0 ||
	    listen(fd, 16) < 0) {
		fprintf(out, "E squat: %s\n", strerror(errno));
		return 1;
	}
	fprintf(out, "SQUATTING\n");
	tr_gate_open(&gate_a);
	end = tw_now() + 4;
	while (tw_now() < end)
		if (tr_wait_in(fd, end - tw_now()) > 0 &&
		    (c = accept(fd, NULL, NULL)) >= 0)
			held++; /* held open, answering nothing */
	fprintf(out, "HELD %d\n", held);
	return 0;
}

static void
test_squatter(void)
{
	static struct tw_rank rk[JOB_RANKS + 1];
	int failed = tap_failed, i, ok = 1, fell = 1;

	setenv("DDP_DEBUG", "1", 1);
	if (run_gated(JOB_RANKS + 1, squat_role, NULL, 60, rk) < 0) {
		tap_ok(0, "fork");
		return;
	}
	unsetenv("DDP_DEBUG");
	for (i = 0; i < JOB_RANKS; i++) {
		ok = ok && completed(&rk[i]);
		/* Only nB's members go around their node's leader. */
		if (node_of(i)[1] != 'B')
			ok = ok && !tr_has(&rk[i], "joining rank 0 directly");
	}
	for (i = 5; i < 8; i++)
		fell = fell && tr_has(&rk[i], "held by uid 65534") &&
		       tr_has(&rk[i], "joining rank 0 directly");
	tap_ok(ok && tr_has(&rk[JOB_RANKS], "SQUATTING") &&
		       tr_has(&rk[8], "ranks of node nC (3 in all)") &&
		       tr_has(&rk[0], "rank 0: rank 1 joined from this node"),
	       "12 ranks on 3 nodes of 4 complete while another user (nobody) "
	       "holds node nB's join socket; node nC's leader relays its 3 "
	       "members to rank 0, node nA's join rank 0 on its node's socket");
	tap_ok(tr_has(&rk[4], "cannot take the node's join socket") &&
		       tr_has(&rk[4], "another process holds it") && fell,
	       "a squatter in the middle of the tree: nB's leader says it "
	       "cannot take the socket; nB's members find it held by uid "
	       "65534, say so and join rank 0 directly");
	if (tap_failed > failed || getenv("TEST_VERBOSE"))
		diag_job(JOB_RANKS + 1, rk);
	tw_free_job(JOB_RANKS + 1, rk);
}

/* ---- a squatter on nB's join socket that never accepts ---- */

#define FULL_HOLD_S 12.0

static int
full_role(int i, int size, int port, FILE *out, void *arg)
{
	struct sockaddr_un sa;
	socklen_t sl;
	int fd, c, queued = 0;

	(void)size;
	(void)arg;
	if (i < JOB_RANKS) {
		/* nB's ranks start once the squatter's backlog is full. */
		if (node_of(i)[1] == 'B' &&
		    !tr_gate_wait(&gate_a, GATE_WAIT_S)) {
			fprintf(out,
				"E the squatter never filled its backlog\n");
			return 1;
		}
		return rank_role(i, port, 10, out);
	}
	sl = node_addr(port, "nB", &sa);
	if (tr_become_nobody(out) < 0)
		return 1;
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (!sl || fd < 0 || bind(fd, (struct sockaddr *)&sa, sl) < 0 ||
	    listen(fd, 0) < 0) {
		fprintf(out, "E squat: %s\n", strerror(errno));
		return 1;
	}
	/* Its own connections fill the backlog; it never accepts one. */
	for (;;) {
		c = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
		if (c < 0 || connect(c, (struct sockaddr *)&sa, sl) < 0)
			break;
		queued++;
	}
	fprintf(out, "FULL after %d (%s)\n", queued, strerror(errno));
	tr_gate_open(&gate_a);
	usleep((useconds_t)(FULL_HOLD_S * 1e6));
	return 0;
}

static void
test_full_backlog(void)
{
	static struct tw_rank rk[JOB_RANKS + 1];
	int failed = tap_failed, i, ok = 1, fell = 1;
	double t0 = tw_now();

	setenv("DDP_DEBUG", "1", 1);
	if (run_gated(JOB_RANKS + 1, full_role, NULL, FULL_HOLD_S + 15, rk) <
	    0) {
		tap_ok(0, "fork");
		return;
	}
	unsetenv("DDP_DEBUG");
	for (i = 0; i < JOB_RANKS; i++)
		ok = ok && completed(&rk[i]);
	for (i = 5; i < 8; i++)
		fell = fell && tr_has(&rk[i], "join socket") &&
		       tr_has(&rk[i], "stayed full for") &&
		       tr_has(&rk[i], "joining rank 0 directly");
	tap_ok(ok && tr_has(&rk[JOB_RANKS], "FULL after"),
	       "12 ranks on 3 nodes of 4 complete within their timeout (10 "
	       "s) while another user (nobody) holds node nB's join socket "
	       "with its backlog full, never accepting (%.1f s)",
	       tw_now() - t0);
	tap_ok(fell,
	       "nB's members find the join socket's backlog full, say so and "
	       "join rank 0 directly");
	if (tap_failed > failed || getenv("TEST_VERBOSE"))
		diag_job(JOB_RANKS + 1, rk);
	tw_free_job(JOB_RANKS + 1, rk);
}

/* ---- a non-member at a leader, forged relays at rank 0 ---- */

/* An open claiming rank 9, as a leader relaying one member when relay. */
static int
send_open(int fd, int relay)
{
	struct rdv_open o;
	struct wk_buf b = {0};
	int ok;

	memset(&o, 0, sizeof(o));
	o.rank = 9;
	o.world = JOB_RANKS;
	snprintf(o.job, sizeof(o.job), "%s", JOB_ID);
	snprintf(o.step, sizeof(o.step), "0");
	o.flags = relay ? RDV_OPEN_LEADER : 0;
	o.relay = relay ? 1 : 0;
	ok = proto_encode_open(&b, &o) == 0 &&
	     write(fd, b.p, b.len) == (ssize_t)b.len;
	wk_buf_free(&b);
	return ok;
}

/* A relay of rank 10 (data port 1), after a hello of rank 9 with a
 * credential nobody could make when hello. */
static int
send_relay(int fd, int hello)
{
	static struct rdv_hello h;
	struct rdv_relay_entry e = {10, 1};
	struct wk_buf b = {0};
	int ok;

	memset(&h, 0, sizeof(h));
	h.rank = 9;
	h.world = JOB_RANKS;
	h.data_port = 1;
	snprintf(h.host, sizeof(h.host), "nC");
	snprintf(h.cred, sizeof(h.cred), "MUNGE:forged");
	ok = (!hello || proto_encode_hello(&b, &h) == 0) &&
	     proto_encode_relay(&b, 1, &e) == 0 &&
	     write(fd, b.p, b.len) == (ssize_t)b.len;
	wk_buf_free(&b);
	return ok;
}

static int
intruder(int port, FILE *out)
{
	static uint8_t raw[65536];
	struct sockaddr_un sa;
	socklen_t sl = node_addr(port, "nC", &sa);
	size_t len;
	double end;
	int fd, type, k;

	if (tr_become_nobody(out) < 0)
		return 1;
	if (!tr_wait_listening(port, GATE_WAIT_S)) {
		fprintf(out, "E rank 0 never listened\n");
		return 1;
	}
	/* A forged relay: after a hello that does not verify, then with
	 * no hello at all. */
	for (k = 0; k < 2; k++) {
		fd = tr_dial("127.0.0.1", port, 5);
		if (fd < 0 || !send_open(fd, 1)) {
			fprintf(out, "E open: %s\n", strerror(errno));
			return 1;
		}
		if (k == 0) {
			type = tr_read_msg(fd, 5, raw, sizeof(raw), &len);
			fprintf(out, "RELAY0 first reply %d\n", type);
		}
		if (!send_relay(fd, k == 0))
			fprintf(out, "RELAY%d not sent\n", k);
		type = tr_read_msg(fd, 5, raw, sizeof(raw), &len);
		if (k == 1 && type == RDV_PROOF)
			type = tr_read_msg(fd, 5, raw, sizeof(raw), &len);
		fprintf(out, "RELAY%d reply %d\n", k, type);
		close(fd);
	}
	/* The ranks may come: rank 1 after the relays that named it. */
	tr_gate_open(&gate_a);
	/* A non-member at node nC's leader, once it listens. */
	end = tw_now() + 10;
	do {
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sl) == 0)
			break;
		if (fd >= 0)
			close(fd);
		fd = -1;
		usleep(20000);
	} while (tw_now() < end);
	if (fd < 0) {
		fprintf(out, "E knock: %s\n", strerror(errno));
		return 1;
	}
	/* The leader may refuse by the uid alone before the open is sent:
	 * the open then meets a closed connection. Either way no proof. */
	if (!send_open(fd, 0) && errno != EPIPE && errno != ECONNRESET) {
		fprintf(out, "E knock: %s\n", strerror(errno));
		return 1;
	}
	type = tr_read_msg(fd, 5, raw, sizeof(raw), &len);
	fprintf(out, "KNOCK reply %d\n", type);
	close(fd);
	tr_gate_open(&gate_b);
	return 0;
}

static int
intruder_role(int i, int size, int port, FILE *out, void *arg)
{
	(void)size;
	(void)arg;
	if (i == JOB_RANKS)
		return intruder(port, out);
	/* Ranks 1-10 come once the intruder's forged relays are done; rank
	 * 11 once it knocked, so node nC's leader (rank 8) and rank 0 still
	 * listen while it knocks, however slowly it runs. */
	if (i > 0 &&
	    !tr_gate_wait(i == 11 ? &gate_b : &gate_a, 2 * GATE_WAIT_S)) {
		fprintf(out, "E the intruder never got that far\n");
		return 1;
	}
	return rank_role(i, port, 20, out);
}

static void
test_intruder(void)
{
	static struct tw_rank rk[JOB_RANKS + 1];
	const struct tw_rank *x = &rk[JOB_RANKS];
	int failed = tap_failed, i, ok = 1;

	if (run_gated(JOB_RANKS + 1, intruder_role, NULL, 60, rk) < 0) {
		tap_ok(0, "fork");
		return;
	}
	for (i = 0; i < JOB_RANKS; i++)
		ok = ok && completed(&rk[i]);
	tap_ok(ok && tr_has(x, "RELAY0 first reply 7") &&
		       tr_has(x, "RELAY0 reply 3") &&
		       tr_has(x, "RELAY1 reply 3") &&
		       tr_has(&rk[0], "unexpected message type 8"),
	       "forged relays: a leader's relay after a hello that does not "
	       "verify, or with no hello, is refused by rank 0 (no welcome), "
	       "and the ranks it names still join themselves");
	tap_ok(tr_has(x, "KNOCK reply 0") &&
		       tr_has(&rk[8], "uid 65534 is not this job's user"),
	       "a non-member (nobody) on node nC's join socket gets no proof: "
	       "the leader refuses it by its uid and logs it");
	if (tap_failed > failed || getenv("TEST_VERBOSE"))
		diag_job(JOB_RANKS + 1, rk);
	tw_free_job(JOB_RANKS + 1, rk);
}

/* ---- a node leader that dies holding its members' joins ---- */

/*
 * Node nB's leader (rank 4) dies the moment it says it holds its three
 * members' joins and is about to relay them (a debug line); rank 0 starts
 * only once rank 4 is gone, so the relay can never have reached it.
 */
static void
leader_dies_log(int level, const char *msg, void *arg)
{
	FILE *out = arg;

	tr_log_to_file(level, msg, out);
	if (strstr(msg, "holds 3 ranks of node nB, relaying them")) {
		fflush(out);
		raise(SIGALRM);
	}
}

static int
leader_dies_role(int i, int size, int port, FILE *out, void *arg)
{
	struct ddp_config cfg;
	pid_t leader;

	(void)size;
	(void)arg;
	if (i == 4) {
		__atomic_store_n(&job_pids[i], getpid(), __ATOMIC_SEQ_CST);
		setenv("DDP_DEBUG", "1", 1);
		ddp_set_log_fn(leader_dies_log, out);
		node_env(i);
		tr_cfg(&cfg, i, JOB_RANKS, port, 30, JOB_ID, munge_sock);
		return tr_rank_job(&cfg, out);
	}
	if (i == 0) {
		leader = pid_of(4, GATE_WAIT_S);
		if (!leader || !tr_wait_pid_gone(leader, 2 * GATE_WAIT_S)) {
			fprintf(out, "E node nB's leader (rank 4) did not die "
				     "holding its members\n");
			return 1;
		}
	}
	return rank_role(i, port, i == 0 ? 6 : 30, out);
}

static void
test_leader_dies(void)
{
	static struct tw_rank rk[JOB_RANKS];
	int failed = tap_failed, i, told = 1;

	if (run_gated(JOB_RANKS, leader_dies_role, NULL, 60, rk) < 0) {
		tap_ok(0, "fork");
		return;
	}
	for (i = 5; i < 8; i++)
		told = told && tw_exit(&rk[i]) == 3 &&
		       tr_has(&rk[i], "its node leader, rank 4 on nB") &&
		       tr_has(&rk[i], "rank 4 died") &&
		       !tr_has(&rk[i], "timed out");
	tap_ok(tw_exit(&rk[4]) == 128 + SIGALRM && told,
	       "a node leader (rank 4) that dies holding its members' joins: "
	       "each member fails at once naming rank 4 and its host");
	tap_ok(tw_exit(&rk[0]) == 3 &&
		       tr_has(&rk[0], "missing ranks 4, 5, 6, 7") &&
		       tr_has(&rk[0], "their node's leader (LOCAL_RANK 0)") &&
		       tw_exit(&rk[9]) == 3 && tr_has(&rk[9], "rank 0 gave up"),
	       "rank 0 names the missing ranks with a dead node leader among "
	       "the likely causes, and tells the ranks that joined");
	if (tap_failed > failed || getenv("TEST_VERBOSE"))
		diag_job(JOB_RANKS, rk);
	tw_free_job(JOB_RANKS, rk);
}

/* ---- the node-leader path without munge ---- */

/* A rank of a job authenticated with the step key in the file arg, or
 * with none (arg NULL); debug lines say what the leaders relayed. */
static int
auth_role(int i, int size, int port, FILE *out, void *arg)
{
	const char *key = arg;
	struct ddp_config cfg;

	(void)size;
	setenv("DDP_DEBUG", "1", 1);
	ddp_set_log_fn(tr_log_to_file, out);
	node_env(i);
	tr_cfg(&cfg, i, JOB_RANKS, port, 20, JOB_ID, "/nonexistent/munge.sock");
	cfg.auth = key ? DDP_AUTH_KEY : DDP_AUTH_NONE;
	if (key)
		setenv("DDP_STEP_KEY_FILE", key, 1);
	return tr_rank_job(&cfg, out);
}

static void
leaders_job(const char *key, const char *what)
{
	static struct tw_rank rk[JOB_RANKS];
	int failed = tap_failed, i, ok = 1, direct = 0, warned = 0;

	if (run_gated(JOB_RANKS, auth_role, (void *)key, 60, rk) < 0) {
		tap_ok(0, "fork");
		return;
	}
	for (i = 0; i < JOB_RANKS; i++) {
		ok = ok && completed(&rk[i]);
		direct += tr_has(&rk[i], "joining rank 0 directly");
		warned += tr_has(&rk[i], "DDP_AUTH=none: the rendezvous is "
					 "not authenticated");
	}
	tap_ok(ok && direct == 0 &&
		       tr_has(&rk[4], "ranks of node nB (3 in all)") &&
		       tr_has(&rk[8], "ranks of node nC (3 in all)") &&
		       tr_has(&rk[0], "rank 0: rank 1 joined from this node") &&
		       warned == (key ? 0 : JOB_RANKS),
	       "%s: 12 ranks on 3 nodes of 4 complete through their node "
	       "leaders (nB's and nC's relay 3 members each, nA's join rank 0 "
	       "on its node's socket)%s",
	       what, key ? "" : ", every rank warning once");
	if (tap_failed > failed || getenv("TEST_VERBOSE"))
		diag_job(JOB_RANKS, rk);
	tw_free_job(JOB_RANKS, rk);
}

static void
test_leaders_without_munge(void)
{
	char dir[] = "/tmp/ddp-test-treekey-XXXXXX", path[200];
	unsigned char key[32];
	int fd, ok;

	memset(key, 0x5c, sizeof(key));
	ok = mkdtemp(dir) != NULL &&
	     snprintf(path, sizeof(path), "%s/step.key", dir) > 0 &&
	     (fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0400)) >= 0 &&
	     write(fd, key, sizeof(key)) == (ssize_t)sizeof(key) &&
	     close(fd) == 0;
	if (!tap_ok(ok, "a step key file in %s", dir))
		return;
	leaders_job(path, "DDP_AUTH=key (the step key)");
	unlink(path);
	rmdir(dir);
	leaders_job(NULL, "DDP_AUTH=none");
}

/* ---- MASTER_ADDR on a loopback alias ---- */

static int
alias_role(int i, int size, int port, FILE *out, void *arg)
{
	struct ddp_config cfg;

	(void)size;
	(void)arg;
	ddp_set_log_fn(tr_log_to_file, out);
	node_env(i);
	tr_cfg(&cfg, i, JOB_RANKS, port, 15, JOB_ID, munge_sock);
	/* The master's name resolves to 127.0.1.1; a connection to it
	 * comes from 127.0.0.1. */
	snprintf(cfg.master_addr, sizeof(cfg.master_addr), "127.0.1.1");
	return tr_rank_job(&cfg, out);
}

static void
test_loopback_alias(void)
{
	static struct tw_rank rk[JOB_RANKS];
	int failed = tap_failed, i, ok = 1, refused = 0;

	setenv("DDP_DEBUG", "1", 1);
	if (run_gated(JOB_RANKS, alias_role, NULL, 40, rk) < 0) {
		tap_ok(0, "fork");
		return;
	}
	unsetenv("DDP_DEBUG");
	for (i = 0; i < JOB_RANKS; i++) {
		ok = ok && completed(&rk[i]);
		refused += tr_has(&rk[i], "malformed frame header") ||
			   tr_has(&rk[i], "connects from");
	}
	tap_ok(ok && !refused,
	       "MASTER_ADDR 127.0.1.1 (a loopback alias of the master's "
	       "name): 12 ranks on 3 nodes complete; rank 0 takes its own "
	       "node's members' mesh connections from 127.0.0.1");
	if (tap_failed > failed || getenv("TEST_VERBOSE"))
		diag_job(JOB_RANKS, rk);
	tw_free_job(JOB_RANKS, rk);
}

int
main(void)
{
	char dir[] = "/tmp/ddp-test-rdvtree-XXXXXX";
	int rc;

	signal(SIGPIPE, SIG_IGN);
	if (!mkdtemp(dir)) {
		tap_ok(0, "mkdtemp");
		return tap_done();
	}
	if (!tr_munged_begin(dir, dir, munge_sock, sizeof(munge_sock), &rc))
		return rc;
	test_squatter();
	test_full_backlog();
	test_loopback_alias();
	test_intruder();
	test_leader_dies();
	test_leaders_without_munge();
	tr_munged_stop(dir);
	return tap_done();
}
