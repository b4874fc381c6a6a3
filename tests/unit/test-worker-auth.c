/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The step-key credentials (DDP_AUTH=key): one verifies only with the
 * same key, kind, job, rank, nonces and binding; the key file must be the
 * user's own and private; a job joins with it and a rank holding another
 * step's key is refused, naming the authentication. Then the
 * munge-authenticated rendezvous against a real (private) munged:
 * garbage, forged credentials, another uid (as a rank and as rank 0),
 * another job, a credential made for another connection, another protocol
 * version and a silent connection are refused and logged while the job
 * still starts; a missing munged is a clear error. Every credential
 * libddp makes can be decoded by its own uid only: munged refuses any
 * other, root included.
 */
#include <dlfcn.h>
#include <grp.h>
#include <libgen.h>
#include <limits.h>
#include <link.h>
#include <munge.h>
#include <pwd.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "auth.h"
#include "test-worker-rdv.h"
#include "proto.h"

/* RDV_VERSION as text, for the messages that name it. */
#define STR_(x) #x
#define STR(x) STR_(x)
#define VERSION_S STR(RDV_VERSION)

/* What rank 0 tells a peer it refuses: nothing of the job. */
#define REFUSED "refused by the rendezvous on this port"

/* A uid that is neither root nor nobody, with no account needed. */
#define OTHER_UID 4242

static char munge_sock[200];

static void
auth_cfg(struct ddp_config *cfg, int rank, int port, const char *job)
{
	tr_cfg(cfg, rank, 2, port, 20, job, munge_sock);
}

/* Reads what comes back until the close; prints CLOSED and the text of
 * the last refusal (or "(nothing)"). */
static void
report_close(int fd, FILE *out)
{
	static uint8_t raw[70000];
	char text[1024] = "(nothing)";
	size_t len;
	int type;

	while ((type = tr_read_msg(fd, 5, raw, sizeof(raw), &len)) > 0)
		if (type == TR_REFUSE)
			tr_msg_text(raw, len, text, sizeof(text));
	fprintf(out, "CLOSED %s\n", text);
}

/* Sends bytes, then reports what came back before the close. */
static int
send_and_listen(int port, const void *buf, size_t len, FILE *out)
{
	int fd = tr_dial("127.0.0.1", port, 10);

	if (fd < 0 || write(fd, buf, len) != (ssize_t)len)
		return 1;
	report_close(fd, out);
	close(fd);
	return 0;
}

/* "ADDR:PORT" of this end of fd, as libddp writes it. */
static void
local_addr(int fd, char *buf, size_t size)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	char a[64] = "?";

	if (getsockname(fd, (struct sockaddr *)&sa, &sl) == 0)
		inet_ntop(AF_INET, &sa.sin_addr, a, sizeof(a));
	snprintf(buf, size, "%s:%d", a, ntohs(sa.sin_port));
}

static char *
encode_cred(const char *payload)
{
	munge_ctx_t ctx = munge_ctx_create();
	char *cred = NULL;

	if (!ctx)
		return NULL;
	munge_ctx_set(ctx, MUNGE_OPT_SOCKET, munge_sock);
	if (munge_encode(&cred, ctx, payload, (int)strlen(payload)) !=
	    EMUNGE_SUCCESS)
		cred = NULL;
	munge_ctx_destroy(ctx);
	return cred;
}

/*
 * A hand-made rank 1 of job 777: connects, sends its open and reads rank
 * 0's proof into *pr. Returns the fd, or -1.
 */
static int
open_as_rank1(int port, struct rdv_proof *pr, FILE *out)
{
	static uint8_t raw[70000];
	struct rdv_open o = {.rank = 1, .world = 2};
	struct wk_buf b = {0};
	char err[256];
	size_t len;
	int fd = tr_dial("127.0.0.1", port, 10);

	snprintf(o.job, sizeof(o.job), "777");
	snprintf(o.step, sizeof(o.step), "0");
	if (fd < 0 || proto_encode_open(&b, &o) < 0 ||
	    write(fd, b.p, b.len) != (ssize_t)b.len ||
	    tr_read_msg(fd, 5, raw, sizeof(raw), &len) != RDV_PROOF ||
	    proto_parse_proof(raw + RDV_HDR_LEN, len - RDV_HDR_LEN, pr, err,
			      sizeof(err)) < 0) {
		fprintf(out, "E no proof from rank 0\n");
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	wk_buf_free(&b);
	return fd;
}

/* Sends rank 1's hello with cred over fd. */
static int
send_hello(int fd, const char *cred)
{
	struct rdv_hello *h = calloc(1, sizeof(*h));
	struct wk_buf b = {0};
	int rc = -1;

	if (!h)
		return -1;
	h->rank = 1;
	h->world = 2;
	snprintf(h->host, sizeof(h->host), "crafted");
	snprintf(h->cred, sizeof(h->cred), "%s", cred);
	if (proto_encode_hello(&b, h) == 0 &&
	    write(fd, b.p, b.len) == (ssize_t)b.len)
		rc = 0;
	wk_buf_free(&b);
	free(h);
	return rc;
}

/*
 * The hello credential an attacker would like to use on connection fd:
 * made by this process's uid for the nonce of proof pr and the address
 * `addr` (NULL: fd's own).
 */
static char *
hello_cred(int fd, const struct rdv_proof *pr, const char *addr)
{
	char payload[512], mine[80];

	local_addr(fd, mine, sizeof(mine));
	if (proto_cred_payload(payload, sizeof(payload), "hello", "777", "0", 1,
			       2, pr->nonce, addr ? addr : mine) < 0)
		return NULL;
	return encode_cred(payload);
}

/* Two connections; a credential made for the first is sent on the second
 * (what a relay of another rank's hello amounts to). */
static int
cross_connection(int port, FILE *out)
{
	struct rdv_proof *pa = malloc(sizeof(*pa)), *pb = malloc(sizeof(*pb));
	char *cred = NULL;
	int a = -1, b = -1, rc = 1;

	if (!pa || !pb)
		goto out;
	a = open_as_rank1(port, pa, out);
	b = open_as_rank1(port, pb, out);
	if (a < 0 || b < 0)
		goto out;
	cred = hello_cred(a, pa, NULL);
	if (!cred || send_hello(b, cred) < 0)
		goto out;
	report_close(b, out);
	rc = 0;
out:
	free(cred);
	free(pa);
	free(pb);
	if (a >= 0)
		close(a);
	if (b >= 0)
		close(b);
	return rc;
}

/* nobody answers rank 0's proof with its own valid credential. */
static int
other_uid_hello(int port, FILE *out)
{
	struct rdv_proof *pr = malloc(sizeof(*pr));
	char *cred = NULL;
	int fd = -1, rc = 1;

	if (!pr || tr_become_nobody(out) < 0)
		goto out;
	fd = open_as_rank1(port, pr, out);
	if (fd < 0)
		goto out;
	cred = hello_cred(fd, pr, NULL);
	if (!cred || send_hello(fd, cred) < 0)
		goto out;
	report_close(fd, out);
	rc = 0;
out:
	free(cred);
	free(pr);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* A rank of the previous protocol (version 1): its hello first. */
static int
old_version(int port, FILE *out)
{
	static uint8_t raw[70000];
	uint8_t hello[] = {0x44, 0x44, 0x50, 0x52, 1, 0, 1, 0, 0, 0, 0, 0};
	char text[512] = "";
	size_t len;
	int fd = tr_dial("127.0.0.1", port, 10);

	if (fd < 0 || write(fd, hello, sizeof(hello)) != sizeof(hello))
		return 1;
	if (tr_read_msg(fd, 5, raw, sizeof(raw), &len) == TR_REFUSE)
		tr_msg_text(raw, len, text, sizeof(text));
	fprintf(out, "REFUSE v%d %s\n", len ? raw[4] : -1, text);
	close(fd);
	return 0;
}

/*
 * The intruders of test_intruders (1-8) come once rank 0 (0) listens; the
 * real rank 1 (9) once every intruder is done but the silent one, which
 * holds its connection until rank 0 logged rank 1's join.
 */
static int
role(int i, int size, int port, FILE *out, void *arg)
{
	static struct tr_log_gate lg;
	struct ddp_config cfg;
	struct rdv_proof *pr;
	int fd, k;

	(void)size;
	(void)arg;
	__atomic_store_n(&job_pids[i], getpid(), __ATOMIC_SEQ_CST);
	if (i > 0 && i < 9 && !tr_wait_listening(port, GATE_WAIT_S)) {
		fprintf(out, "E rank 0 never listened\n");
		return 1;
	}
	switch (i) {
	case 0: /* rank 0, logging every refusal */
		setenv("DDP_DEBUG", "1", 1);
		lg.out = out;
		lg.when = "rank 1 joined from";
		lg.gate = &gate_b;
		ddp_set_log_fn(tr_log_then_open, &lg);
		auth_cfg(&cfg, 0, port, "777");
		break;
	case 1: /* garbage bytes */
		return send_and_listen(port,
				       "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
				       "\x01\x02\x03garbage-garbage",
				       44, out);
	case 2: /* an open, then a hello with a forged credential */
		pr = malloc(sizeof(*pr));
		fd = pr ? open_as_rank1(port, pr, out) : -1;
		free(pr);
		if (fd < 0 || send_hello(fd, "MUNGE:AwQFAABforgedforgedforged"
					     "forgedforged=:") < 0)
			return 1;
		report_close(fd, out);
		close(fd);
		return 0;
	case 3: /* another user, as a rank: rank 0's proof is not its uid */
		if (tr_become_nobody(out) < 0)
			return 1;
		ddp_set_log_fn(tr_log_to_file, out);
		auth_cfg(&cfg, 1, port, "777");
		cfg.timeout_s = 2;
		break;
	case 4: /* same user, another job */
		auth_cfg(&cfg, 1, port, "778");
		cfg.timeout_s = 3;
		break;
	case 5: /* connects and says nothing while rank 1 joins */
		fd = tr_dial("127.0.0.1", port, 10);
		tr_gate_open(&gate_a);
		if (!tr_gate_wait(&gate_b, GATE_WAIT_S))
			fprintf(out, "E rank 1 never joined\n");
		if (fd >= 0)
			close(fd);
		return 0;
	case 6: /* another user answering the proof with its own credential */
		return other_uid_hello(port, out);
	case 7: /* a hello credential made for another connection */
		return cross_connection(port, out);
	case 8: /* a rank of slurm-ddp's previous protocol */
		return old_version(port, out);
	default: /* the real rank 1, after the intruders */
		for (k = 1; k < 9; k++)
			if (k == 5 ? !tr_gate_wait(&gate_a, GATE_WAIT_S)
				   : !tr_wait_pid_gone(pid_of(k, GATE_WAIT_S),
						       GATE_WAIT_S)) {
				fprintf(out, "E intruder %d never ended\n", k);
				return 1;
			}
		auth_cfg(&cfg, 1, port, "777");
		break;
	}
	return tr_rank_job(&cfg, out);
}

/*
 * A rank 0 impostor of another uid (nobody) that holds MASTER_PORT and
 * answers the open with a proof made with its own credential.
 */
static int
impostor(int i, int size, int port, FILE *out, void *arg)
{
	static uint8_t raw[70000];
	struct ddp_config cfg;
	struct rdv_proof *pr = NULL;
	struct sockaddr_in sa;
	struct wk_buf b = {0};
	socklen_t sl = sizeof(sa);
	char payload[512], peer[80], a[64] = "?", *cred = NULL;
	size_t len;
	int lfd, fd, n = 0;

	(void)size;
	(void)arg;
	if (i == 1) {
		if (!tr_wait_listening(port, GATE_WAIT_S))
			return 1;
		auth_cfg(&cfg, 1, port, "777");
		cfg.timeout_s = 3;
		return tr_rank_job(&cfg, out);
	}
	if (tr_become_nobody(out) < 0)
		return 1;
	pr = calloc(1, sizeof(*pr));
	lfd = tr_listen(port);
	if (!pr || lfd < 0)
		return 1;
	/* Every attempt of the rank gets a proof of the wrong uid. */
	while (tr_wait_in(lfd, 4) > 0) {
		fd = accept(lfd, (struct sockaddr *)&sa, &sl);
		if (fd < 0 ||
		    tr_read_msg(fd, 2, raw, sizeof(raw), &len) != RDV_OPEN)
			return 1;
		inet_ntop(AF_INET, &sa.sin_addr, a, sizeof(a));
		snprintf(peer, sizeof(peer), "%s:%d", a, ntohs(sa.sin_port));
		proto_cred_payload(payload, sizeof(payload), "rank0", "777",
				   "0", 1, 2, pr->nonce, peer);
		free(cred);
		cred = encode_cred(payload);
		snprintf(pr->cred, sizeof(pr->cred), "%s", cred ? cred : "");
		b.len = 0;
		if (!cred || proto_encode_proof(&b, pr) < 0 ||
		    write(fd, b.p, b.len) != (ssize_t)b.len)
			return 1;
		n++;
		/* Wait for the rank to hang up. */
		while (tr_wait_in(fd, 5) > 0 && read(fd, raw, sizeof(raw)) > 0)
			;
		close(fd);
		sl = sizeof(sa);
	}
	fprintf(out, "PROOFS %d\n", n);
	free(cred);
	free(pr);
	wk_buf_free(&b);
	return 0;
}

/* A rank 0 of the previous protocol: refuses the open in version 1. */
static int
old_master(int i, int size, int port, FILE *out, void *arg)
{
	static uint8_t raw[70000];
	struct ddp_config cfg;
	struct wk_buf b = {0};
	double t0;
	size_t len;
	int lfd, fd, rc;

	(void)size;
	(void)arg;
	if (i == 1) {
		if (!tr_wait_listening(port, GATE_WAIT_S))
			return 1;
		auth_cfg(&cfg, 1, port, "777");
		t0 = tw_now();
		rc = tr_rank_job(&cfg, out);
		fprintf(out, "AFTER %.1f s\n", tw_now() - t0);
		return rc;
	}
	lfd = tr_listen(port);
	if (lfd < 0 || tr_wait_in(lfd, 5) <= 0)
		return 1;
	fd = accept(lfd, NULL, NULL);
	if (fd < 0 || tr_read_msg(fd, 2, raw, sizeof(raw), &len) == 0)
		return 1;
	if (proto_encode_refuse_as(&b, 1, "protocol version 2, expected 1") <
		    0 ||
	    write(fd, b.p, b.len) != (ssize_t)b.len)
		return 1;
	while (tr_wait_in(fd, 5) > 0 && read(fd, raw, sizeof(raw)) > 0)
		;
	wk_buf_free(&b);
	close(fd);
	close(lfd);
	return 0;
}

/* Becomes uid (and the same gid), dropping root's groups; 0 stays. */
static int
become(uid_t uid)
{
	if (uid == 0)
		return 0;
	if (setgroups(0, NULL) == 0 && setgid((gid_t)uid) == 0 &&
	    setuid(uid) == 0)
		return 0;
	return -1;
}

/*
 * As uid, in a child: a "rank0" credential made by libddp's auth_encode
 * (rank 0's proof, as rank 0 sends it to whoever connects), into cred.
 * Returns 0, or -1 with the reason in cred.
 */
static int
encode_as(uid_t uid, char *cred, size_t size)
{
	uint8_t nonce[RDV_NONCE_LEN] = {1, 2, 3};
	struct ddp_config cfg;
	struct wk_auth a;
	size_t got = 0;
	ssize_t n;
	pid_t pid;
	int fd[2], status;

	if (pipe(fd) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		char out[WK_MAX_CRED];

		close(fd[0]);
		auth_cfg(&cfg, 0, 0, "777");
		if (become(uid) < 0)
			snprintf(out, sizeof(out), "E setuid %u",
				 (unsigned)uid);
		else if (auth_init(&a, &cfg) != DDP_OK ||
			 auth_encode(&a, "rank0", 1, nonce, "127.0.0.1:1", out,
				     sizeof(out)) != DDP_OK)
			snprintf(out, sizeof(out), "E %s", ddp_last_error());
		auth_fini(&a);
		_exit(write(fd[1], out, strlen(out)) < 0);
	}
	close(fd[1]);
	while (pid > 0 && (n = read(fd[0], cred + got, size - 1 - got)) > 0)
		got += (size_t)n;
	cred[got] = '\0';
	close(fd[0]);
	if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0 || strncmp(cred, "MUNGE:", 6) != 0)
		return -1;
	return 0;
}

/* As uid, in a child: munged's answer to decoding cred (munge_err_t), or
 * -1 when the child failed. */
static int
decode_as(uid_t uid, const char *cred)
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		munge_ctx_t ctx;
		void *buf = NULL;
		int len = 0;

		if (become(uid) < 0 || !(ctx = munge_ctx_create()))
			_exit(100);
		munge_ctx_set(ctx, MUNGE_OPT_SOCKET, munge_sock);
		_exit(munge_decode(cred, ctx, &buf, &len, NULL, NULL));
	}
	if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) ||
	    WEXITSTATUS(status) == 100)
		return -1;
	return WEXITSTATUS(status);
}

/* 1 when munged gives uid `uid` the answer `want` for cred. */
static int
decoded(uid_t uid, const char *cred, int want)
{
	int got = decode_as(uid, cred);

	if (got == want)
		return 1;
	tap_diag("uid %u decoding: %d (%s), expected %d (%s)", (unsigned)uid,
		 got, got < 0 ? "child failed" : munge_strerror(got), want,
		 munge_strerror(want));
	return 0;
}

/*
 * Rank 0's proof is read by its own uid only (munge's UID restriction),
 * so a stranger who sends an open learns nothing it can decode. The
 * strangers try first: without the restriction munged would give them
 * the credential, and the owner would then find it replayed.
 */
static void
test_uid_restriction(void)
{
	char cred[WK_MAX_CRED];

	if (!tap_ok(encode_as(TR_NOBODY, cred, sizeof(cred)) == 0,
		    "a job of nobody makes rank 0's proof with auth_encode"))
		tap_diag("%s", cred);
	tap_ok(decoded(OTHER_UID, cred, EMUNGE_CRED_UNAUTHORIZED),
	       "munged refuses uid %d the credential: %s", OTHER_UID,
	       munge_strerror(EMUNGE_CRED_UNAUTHORIZED));
	tap_ok(decoded(0, cred, EMUNGE_CRED_UNAUTHORIZED),
	       "munged refuses root too the credential of a job of nobody");
	tap_ok(decoded(TR_NOBODY, cred, EMUNGE_SUCCESS),
	       "the job's own uid (nobody) decodes it after those refusals");

	if (!tap_ok(encode_as(0, cred, sizeof(cred)) == 0,
		    "a job of root makes rank 0's proof with auth_encode"))
		tap_diag("%s", cred);
	tap_ok(decoded(TR_NOBODY, cred, EMUNGE_CRED_UNAUTHORIZED) &&
		       decoded(OTHER_UID, cred, EMUNGE_CRED_UNAUTHORIZED),
	       "munged refuses nobody and uid %d a job of root's credential",
	       OTHER_UID);
	tap_ok(decoded(0, cred, EMUNGE_SUCCESS),
	       "the job's own uid (root) decodes it");
}

/*
 * Runs this build's examples/train (beside this test: ../../examples) with
 * env in a mount namespace where libmunge.so.2 is an empty file, as on a
 * host without the MUNGE library; its output into out. Returns the exit
 * status, or -1.
 */
static int
train_without_munge(char *const env[], char *out, size_t size)
{
	char self[PATH_MAX], train[PATH_MAX + 32];
	struct link_map *lm = NULL;
	void *h = dlopen("libmunge.so.2", RTLD_NOW | RTLD_NOLOAD);
	const char *lib;
	ssize_t n;
	size_t got = 0;
	pid_t pid;
	int fd[2], status;

	out[0] = '\0';
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (!h || dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || !lm || n <= 0)
		return -1;
	lib = lm->l_name;
	self[n] = '\0';
	snprintf(train, sizeof(train), "%s/../../examples/train",
		 dirname(self));
	if (pipe(fd) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		char *const argv[] = {train,	  "--synthetic", "64",
				      "--epochs", "1",		 NULL};

		dup2(fd[1], 1);
		dup2(fd[1], 2);
		close(fd[0]);
		if (unshare(CLONE_NEWNS) < 0 ||
		    mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
		    mount("/dev/null", lib, NULL, MS_BIND, NULL) < 0) {
			printf("E hiding %s: %s\n", lib, strerror(errno));
			_exit(100);
		}
		execve(train, argv, env);
		printf("E exec %s: %s\n", train, strerror(errno));
		_exit(100);
	}
	close(fd[1]);
	while (pid > 0 && (n = read(fd[0], out + got, size - 1 - got)) > 0)
		got += (size_t)n;
	out[got] = '\0';
	close(fd[0]);
	dlclose(h);
	if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

/* libddp's programs start on a host without libmunge: DDP_AUTH=none
 * runs, munge authentication names the library and its package. */
static void
test_without_libmunge(void)
{
	char out[8192], port[32];
	char *const none[] = {"WORLD_SIZE=1", "DDP_AUTH=none", NULL};
	char *const munge[] = {"WORLD_SIZE=2",
			       "RANK=1",
			       "DDP_AUTH=munge",
			       "MASTER_ADDR=127.0.0.1",
			       port,
			       "DDP_TIMEOUT=5",
			       NULL};
	int rc;

	rc = train_without_munge(none, out, sizeof(out));
	if (!tap_ok(rc == 0 && strstr(out, "params_crc="),
		    "without libmunge, examples/train starts and runs with "
		    "DDP_AUTH=none"))
		tap_diag("exit %d: %s", rc, out);
	snprintf(port, sizeof(port), "MASTER_PORT=%d", tw_free_port());
	rc = train_without_munge(munge, out, sizeof(out));
	if (!tap_ok(rc > 0 && rc != 100 && strstr(out, "needs libmunge.so.2") &&
			    strstr(out, "libmunge2"),
		    "without libmunge, DDP_AUTH=munge fails naming the library "
		    "and the package to install"))
		tap_diag("exit %d: %s", rc, out);
}

/* ---- the step key ---- */

static char key_a[300], key_b[300]; /* two steps' key files */

/* Writes a key file of len bytes (fill) with mode; its path into path. */
static int
write_key(const char *dir, const char *name, int fill, size_t len, mode_t mode,
	  char *path, size_t pathlen)
{
	unsigned char k[64];
	int fd;

	memset(k, fill, sizeof(k));
	snprintf(path, pathlen, "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || write(fd, k, len) != (ssize_t)len || fchmod(fd, mode)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return close(fd);
}

/* auth_init of job with the key file path (DDP_AUTH=key). */
static enum ddp_status
key_init(struct wk_auth *a, struct ddp_config *cfg, const char *job,
	 const char *path)
{
	tw_cfg(cfg, 0, 2, 1, 5);
	cfg->auth = DDP_AUTH_KEY;
	snprintf(cfg->job_id, sizeof(cfg->job_id), "%s", job);
	setenv("DDP_STEP_KEY_FILE", path, 1);
	return auth_init(a, cfg);
}

/* The reasons key_ok was given, and how many of them showed the key
 * (test_key_creds' keys are all bytes 0x11 or 0x22: a run of their hex
 * digits or of the bytes themselves). */
static int key_reasons, key_shown;

static int
shows_key(const char *s)
{
	return strstr(s, "11111111") || strstr(s, "22222222") ||
	       strstr(s, "\x11\x11\x11\x11") || strstr(s, "\x22\x22\x22\x22");
}

/* 1 when a verifies cred for hello/rank 1/nonce/bind, else 0 (why). */
static int
key_ok(struct wk_auth *a, const char *cred, const char *kind, int rank,
       const uint8_t *nonce, const char *bind, char *why, size_t whylen)
{
	int ok;

	why[0] = '\0';
	ok = auth_verify(a, cred, kind, rank, nonce, bind, why, whylen) == 0;
	if (!ok) {
		key_reasons++;
		if (shows_key(why) || shows_key(ddp_last_error())) {
			key_shown++;
			tap_diag("a reason shows the key: %s", why);
		}
	}
	return ok;
}

static void
test_key_creds(const char *dir)
{
	static struct ddp_config cfg, cfg2;
	struct wk_auth a, b, c;
	uint8_t n1[RDV_NONCE_LEN] = {1, 2, 3}, n2[RDV_NONCE_LEN] = {1, 2, 4};
	const char *bind = "127.0.0.1:4000 rn=0a0b";
	char cred[WK_MAX_CRED], why[1024], path[300];
	int ok;

	if (!tap_ok(key_init(&a, &cfg, "777", key_a) == DDP_OK,
		    "DDP_AUTH=key reads the step key file"))
		tap_diag("%s", ddp_last_error());
	tap_ok(auth_encode(&a, "hello", 1, n1, bind, cred, sizeof(cred)) ==
			       DDP_OK &&
		       strncmp(cred, "DDPK1:", 6) == 0 && strlen(cred) == 70,
	       "a key credential is DDPK1: and 64 hex digits");
	ok = key_ok(&a, cred, "hello", 1, n1, bind, why, sizeof(why));
	if (!tap_ok(ok, "it verifies with the same key, kind, rank, nonces "
			"and binding"))
		tap_diag("%s", why);
	tap_ok(!key_ok(&a, cred, "rank0", 1, n1, bind, why, sizeof(why)) &&
		       strstr(why,
			      "does not prove 'slurm-ddp/" VERSION_S " rank0"),
	       "not as another kind (a hello is no proof of rank 0): %s", why);
	tap_ok(!key_ok(&a, cred, "hello", 0, n1, bind, why, sizeof(why)),
	       "not for another rank");
	tap_ok(!key_ok(&a, cred, "hello", 1, n2, bind, why, sizeof(why)),
	       "not with another nonce of rank 0 (a replay on another "
	       "connection)");
	tap_ok(!key_ok(&a, cred, "hello", 1, n1, "127.0.0.1:4000 rn=0a0c", why,
		       sizeof(why)),
	       "not with another nonce of the rank");
	tap_ok(!key_ok(&a, cred, "hello", 1, n1, "127.0.0.2:4000 rn=0a0b", why,
		       sizeof(why)),
	       "not with another address (a relay)");
	if (key_init(&b, &cfg2, "777", key_b) != DDP_OK)
		tap_diag("%s", ddp_last_error());
	tap_ok(!key_ok(&b, cred, "hello", 1, n1, bind, why, sizeof(why)) &&
		       strstr(why, "another step's key"),
	       "not with another step's key: %s", why);
	auth_fini(&b);
	if (key_init(&b, &cfg2, "778", key_a) != DDP_OK)
		tap_diag("%s", ddp_last_error());
	tap_ok(!key_ok(&b, cred, "hello", 1, n1, bind, why, sizeof(why)),
	       "not for another job id");
	auth_fini(&b);
	cred[69] = cred[69] == '0' ? '1' : '0';
	tap_ok(!key_ok(&a, cred, "hello", 1, n1, bind, why, sizeof(why)),
	       "not with one hex digit changed");
	cred[40] = '\0';
	tap_ok(!key_ok(&a, cred, "hello", 1, n1, bind, why, sizeof(why)),
	       "not cut short");
	tap_ok(!key_ok(&a, "MUNGE:AwQFAAB=:", "hello", 1, n1, bind, why,
		       sizeof(why)) &&
		       strstr(why, "munge credential, but this rank uses the "
				   "step key") &&
		       strstr(why, "same DDP_AUTH"),
	       "a munge credential is named as such: %s", why);
	tap_ok(!key_ok(&a, "none", "hello", 1, n1, bind, why, sizeof(why)),
	       "the word none is refused");
	/* The key is in no message: no reason above showed it. */
	tap_ok(key_reasons >= 11 && key_shown == 0,
	       "no reason shows the key (%d reasons, %d showed it)",
	       key_reasons, key_shown);
	auth_fini(&a);
	tap_ok(tap_all_zero(a.key, sizeof(a.key)),
	       "auth_fini wipes the key, every byte");

	unsetenv("DDP_STEP_KEY_FILE");
	tw_cfg(&cfg, 0, 2, 1, 5);
	cfg.auth = DDP_AUTH_KEY;
	tap_ok(auth_init(&c, &cfg) == DDP_ERR_AUTH &&
		       strstr(ddp_last_error(), "DDP_STEP_KEY_FILE is not set"),
	       "DDP_AUTH=key without a key fails naming DDP_STEP_KEY_FILE: %s",
	       ddp_last_error());
	auth_fini(&c);
	tap_ok(auth_resolve(DDP_AUTH_AUTO) == DDP_AUTH_MUNGE,
	       "auto without a step key is munge");
	setenv("DDP_STEP_KEY_FILE", key_a, 1);
	tap_ok(auth_resolve(DDP_AUTH_AUTO) == DDP_AUTH_KEY &&
		       auth_resolve(DDP_AUTH_MUNGE) == DDP_AUTH_MUNGE,
	       "auto with a step key is key; munge stays munge");
	unsetenv("DDP_AUTH");
	tap_ok(ddp_config_from_env(&cfg) == DDP_OK && cfg.auth == DDP_AUTH_KEY,
	       "DDP_AUTH unset with DDP_STEP_KEY_FILE: the step key");
	setenv("DDP_AUTH", "munge", 1);
	tap_ok(ddp_config_from_env(&cfg) == DDP_OK &&
		       cfg.auth == DDP_AUTH_MUNGE,
	       "DDP_AUTH=munge keeps munge beside a step key");
	setenv("DDP_AUTH", "kerberos", 1);
	tap_ok(ddp_config_from_env(&cfg) == DDP_ERR_ENV &&
		       strstr(ddp_last_error(), "key, munge or none"),
	       "DDP_AUTH=kerberos names what works: %s", ddp_last_error());
	unsetenv("DDP_AUTH");

	write_key(dir, "open", 0x11, 32, 0644, path, sizeof(path));
	tap_ok(key_init(&c, &cfg, "777", path) == DDP_ERR_AUTH &&
		       strstr(ddp_last_error(), "mode 0644"),
	       "a key file others can read is refused: %s", ddp_last_error());
	auth_fini(&c);
	write_key(dir, "short", 0x11, 31, 0400, path, sizeof(path));
	tap_ok(key_init(&c, &cfg, "777", path) == DDP_ERR_AUTH &&
		       strstr(ddp_last_error(), "too short"),
	       "a key file of 31 bytes is refused: %s", ddp_last_error());
	auth_fini(&c);
	snprintf(path, sizeof(path), "%s/link", dir);
	if (symlink(key_a, path) < 0)
		tap_diag("symlink: %s", strerror(errno));
	tap_ok(key_init(&c, &cfg, "777", path) == DDP_ERR_AUTH &&
		       strstr(ddp_last_error(), "symlink"),
	       "a symlink is refused: %s", ddp_last_error());
	auth_fini(&c);
	unsetenv("DDP_STEP_KEY_FILE");
}

/* Rank i of a job authenticated with the step key; arg: rank 1's key. */
static int
key_rank(int i, int size, int port, FILE *out, void *arg)
{
	struct ddp_config cfg;

	tw_cfg(&cfg, i, size, port, i == 0 ? 20 : 3);
	cfg.auth = DDP_AUTH_KEY;
	setenv("DDP_STEP_KEY_FILE", i == 0 ? key_a : (const char *)arg, 1);
	ddp_set_log_fn(tr_log_to_file, out);
	if (arg != key_a)
		cfg.timeout_s = 3;
	return tr_rank_job(&cfg, out);
}

static void
test_key_rendezvous(void)
{
	struct tw_rank rk[2];
	int failed = tap_failed, i;

	if (tw_run_job(2, key_rank, key_a, 30, rk) < 0) {
		tap_ok(0, "fork");
		return;
	}
	tap_ok(tw_exit(&rk[0]) == 0 && tr_has(&rk[0], "ALLREDUCE 0 2 1 10") &&
		       tw_exit(&rk[1]) == 0 &&
		       tr_has(&rk[1], "ALLREDUCE 0 2 1 10"),
	       "two ranks with the same step key join and allreduce, no "
	       "munged");
	if (tap_failed > failed || getenv("TEST_VERBOSE"))
		for (i = 0; i < 2; i++)
			tw_diag_output(i, &rk[i]);
	tw_free_job(2, rk);

	failed = tap_failed;
	if (tw_run_job(2, key_rank, key_b, 30, rk) < 0) {
		tap_ok(0, "fork");
		return;
	}
	tap_ok(tw_exit(&rk[1]) == 3 && tr_has(&rk[1], "INIT 6") &&
		       tr_has(&rk[1], "did not prove it is rank 0") &&
		       tr_has(&rk[1], "step-key credential does not prove"),
	       "a rank holding another step's key refuses rank 0's proof "
	       "and fails with DDP_ERR_AUTH naming the step key");
	tap_ok(tw_exit(&rk[0]) != 0 && tr_has(&rk[0], "INIT ") &&
		       !tr_has(&rk[0], "ALLREDUCE"),
	       "rank 0 never counts it as joined");
	if (tap_failed > failed || getenv("TEST_VERBOSE"))
		for (i = 0; i < 2; i++)
			tw_diag_output(i, &rk[i]);
	tw_free_job(2, rk);
}

static void
test_intruders(void)
{
	struct tw_rank rk[10];
	int failed = tap_failed;

	/* Intruders while rank 0 waits; the real rank 1 joins last. */
	if (run_gated(10, role, NULL, 60, rk) < 0) {
		tap_ok(0, "fork");
		return;
	}
	tap_ok(tw_exit(&rk[0]) == 0 && tr_has(&rk[0], "ALLREDUCE 0 2 1 10") &&
		       tw_exit(&rk[9]) == 0 &&
		       tr_has(&rk[9], "ALLREDUCE 0 2 1 10"),
	       "rendezvous completes and the job computes despite intruders");
	tap_ok(tr_has(&rk[0], "refused connection from 127.0.0.1") &&
		       tr_has(&rk[0], "bad magic") && tr_has(&rk[1], "CLOSED"),
	       "garbage bytes are refused and logged");
	tap_ok(tr_has(&rk[0], "invalid munge credential") &&
		       tr_has(&rk[2], "CLOSED " REFUSED) &&
		       !tr_has(&rk[2], "munge"),
	       "a forged credential after rank 0's proof is refused and "
	       "logged; the forger is told nothing of why");
	tap_ok(tw_exit(&rk[3]) == 3 && tr_has(&rk[3], "INIT 6") &&
		       tr_has(&rk[3], "did not prove it is rank 0") &&
		       tr_has(&rk[3], "Unauthorized credential for client "
				      "UID=65534"),
	       "a rank of another user (nobody) cannot decode rank 0's proof "
	       "(munged refuses it) and never sends a credential: "
	       "DDP_ERR_AUTH");
	tap_ok(tr_has(&rk[0], "credential of uid 65534, but this job runs as "
			      "uid 0") &&
		       tr_has(&rk[6], "CLOSED " REFUSED) &&
		       !tr_has(&rk[6], "uid 0"),
	       "a hello credential of another user (nobody), bound to rank 0's "
	       "nonce and its connection, is refused; the refusal names no "
	       "fact of the job");
	tap_ok(tw_exit(&rk[4]) == 3 && tr_has(&rk[4], "INIT 6") &&
		       tr_has(&rk[4], "127.0.0.1:") &&
		       tr_has(&rk[4], "refused before proving it is rank 0") &&
		       tr_has(&rk[4], "until the timeout") &&
		       !tr_has(&rk[4], "job=777") &&
		       tr_has(&rk[0], "claims job=778 step=0, this is job=777"),
	       "a rank of another job of the same user is refused before any "
	       "credential: rank 0's log names both jobs, the rank learns no "
	       "fact of job 777, keeps trying until its timeout and names the "
	       "address that refused it");
	tap_ok(tr_has(&rk[0],
		      "credential is for 'slurm-ddp/" VERSION_S " hello "
		      "job=777 step=0 rank=1 world=2 nonce=") &&
		       tr_has(&rk[7], "CLOSED " REFUSED),
	       "a hello credential made for another connection (another nonce "
	       "and address) is refused");
	tap_ok(tr_has(&rk[8], "REFUSE v1 rendezvous protocol version 1, this "
			      "libddp speaks " VERSION_S),
	       "a rank of the previous protocol gets a refusal it can read "
	       "(version 1 header) naming both versions");
	tap_ok(tw_exit(&rk[5]) == 0, "a silent connection does not stall "
				     "the rendezvous");
	if (tap_failed > failed || getenv("TEST_VERBOSE"))
		for (int i = 0; i < 10; i++)
			tw_diag_output(i, &rk[i]);
	tw_free_job(10, rk);
}

int
main(void)
{
	char dir[] = "/tmp/ddp-test-munge-XXXXXX", cmd[600];
	char keydir[] = "/tmp/ddp-test-key-XXXXXX";
	struct tw_rank rk[8];
	struct ddp_config cfg;
	struct ddp_comm *c = NULL;
	enum ddp_status st;
	FILE *p;
	int rc, i, failed;

	signal(SIGPIPE, SIG_IGN);
	if (!mkdtemp(keydir) || !mkdtemp(dir)) {
		tap_ok(0, "mkdtemp");
		return tap_done();
	}
	if (write_key(keydir, "a", 0x11, 32, 0400, key_a, sizeof(key_a)) < 0 ||
	    write_key(keydir, "b", 0x22, 32, 0400, key_b, sizeof(key_b)) < 0)
		tap_ok(0, "key files in %s", keydir);
	test_key_creds(keydir);
	test_key_rendezvous();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", keydir);
	if (system(cmd) != 0)
		tap_diag("could not remove %s", keydir);

	snprintf(cmd, sizeof(cmd), "tests/lib/private-munged start %s", dir);
	p = popen(cmd, "r");
	if (!p || !fgets(munge_sock, sizeof(munge_sock), p)) {
		rc = p ? pclose(p) : -1;
		rmdir(dir);
		if (rc >= 0 && WIFEXITED(rc) && WEXITSTATUS(rc) == 2) {
			tap_ok(1, "# SKIP private munged unavailable (needs "
				  "root and the munge package)");
			return tap_done();
		}
		tap_ok(0, "private munged started");
		return tap_done();
	}
	pclose(p);
	munge_sock[strcspn(munge_sock, "\n")] = '\0';
	tap_ok(1, "private munged at %s", munge_sock);

	test_uid_restriction();
	test_without_libmunge();
	test_intruders();

	/* A rank 0 impostor of another uid is detected by the rank. */
	failed = tap_failed;
	if (tw_run_job(2, impostor, NULL, 30, rk) < 0)
		return tap_ok(0, "fork"), tap_done();
	tap_ok(tw_exit(&rk[1]) == 3 && tr_has(&rk[1], "INIT 6") &&
		       tr_has(&rk[1],
			      "did not prove it is rank 0 of this job") &&
		       tr_has(&rk[1], "credential of uid 65534") &&
		       tr_has(&rk[1], "until the timeout"),
	       "a rank refuses a rank 0 of another uid (port squatter), "
	       "connecting again until the timeout, and never sends its "
	       "credential");
	if (tap_failed > failed || getenv("TEST_VERBOSE"))
		for (i = 0; i < 2; i++)
			tw_diag_output(i, &rk[i]);
	tw_free_job(2, rk);

	/* A rank 0 of the previous protocol: a clear error at once. */
	failed = tap_failed;
	if (tw_run_job(2, old_master, NULL, 30, rk) < 0)
		return tap_ok(0, "fork"), tap_done();
	tap_ok(tw_exit(&rk[1]) == 3 &&
		       tr_has(&rk[1], "rendezvous protocol version 1, this "
				      "libddp speaks " VERSION_S
				      ": every rank of a job "
				      "must run the same slurm-ddp release") &&
		       tr_has(&rk[1], "the process at 127.0.0.1:") &&
		       tr_has(&rk[1], "until the timeout"),
	       "a rank meeting a process of the previous protocol on "
	       "MASTER_PORT takes it for a squatter (it never proved it is "
	       "rank 0): it keeps trying until its timeout, then names its "
	       "address and both versions");
	if (tap_failed > failed || getenv("TEST_VERBOSE"))
		for (i = 0; i < 2; i++)
			tw_diag_output(i, &rk[i]);
	tw_free_job(2, rk);

	/* No munged: a clear error before any network traffic. */
	auth_cfg(&cfg, 1, tw_free_port(), "777");
	snprintf(cfg.munge_socket, sizeof(cfg.munge_socket), "%s/no-such.sock",
		 dir);
	st = ddp_comm_init(&cfg, &c);
	if (!tap_ok(st == DDP_ERR_AUTH &&
			    strstr(ddp_last_error(), "is munged running"),
		    "missing munged: DDP_ERR_AUTH naming munged"))
		tap_diag("status %d: %s", (int)st, ddp_last_error());

	snprintf(cmd, sizeof(cmd), "tests/lib/private-munged stop %s", dir);
	tap_ok(system(cmd) == 0, "private munged stopped");
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		tap_diag("could not remove %s", dir);
	return tap_done();
}
