/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The munge-authenticated rendezvous against a real (private) munged:
 * garbage, forged credentials, another uid, another job and a silent
 * connection are refused and logged while the job still starts; a rank
 * refuses a rank 0 of another uid; a missing munged is a clear error.
 */
#include <errno.h>
#include <munge.h>
#include <pwd.h>
#include <sys/stat.h>

#include "tap.h"
#include "test-worker-util.h"
#include "wk.h"

#define NOBODY_UID 65534

static char munge_sock[200];

static void
log_to_file(int level, const char *msg, void *arg)
{
	fprintf((FILE *)arg, "LOG %d %s\n", level, msg);
}

static void
auth_cfg(struct ddp_config *cfg, int rank, int port, const char *job)
{
	tw_cfg(cfg, rank, 2, port, 20);
	cfg->auth = 1;
	snprintf(cfg->job_id, sizeof(cfg->job_id), "%s", job);
	snprintf(cfg->munge_socket, sizeof(cfg->munge_socket), "%s",
		 munge_sock);
}

/* Connects to the loopback port, retrying while rank 0 starts. */
static int
dial(int port)
{
	struct sockaddr_in sa;
	double end = tw_now() + 10;
	int fd;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((uint16_t)port);
	while (tw_now() < end) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0)
			return -1;
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return fd;
		close(fd);
		usleep(50000);
	}
	return -1;
}

/* Sends bytes, then reports what came back before the close. */
static int
send_and_listen(int port, const void *buf, size_t len, FILE *out)
{
	char reply[2048];
	ssize_t n, total = 0;
	int fd = dial(port);

	if (fd < 0)
		return 1;
	if (write(fd, buf, len) != (ssize_t)len)
		return 1;
	while ((n = read(fd, reply + total,
			 sizeof(reply) - 1 - (size_t)total)) > 0)
		total += n;
	reply[total > 0 ? total : 0] = '\0';
	/* The refusal message follows a 12-byte header + 4-byte length. */
	fprintf(out, "CLOSED %s\n", total > 16 ? reply + 16 : "(nothing)");
	close(fd);
	return 0;
}

static int
role(int i, int size, int port, FILE *out, void *arg)
{
	struct ddp_config cfg;
	struct ddp_comm *c = NULL;
	struct rdv_hello *h;
	struct wk_buf b = {0};
	enum ddp_status st;
	float v[3];
	int fd;

	(void)size;
	(void)arg;
	switch (i) {
	case 0: /* rank 0 */
		ddp_set_log_fn(log_to_file, out);
		auth_cfg(&cfg, 0, port, "777");
		break;
	case 1: /* garbage bytes */
		usleep(200000);
		return send_and_listen(port,
				       "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
				       "\x01\x02\x03garbage-garbage",
				       44, out);
	case 2: /* a well-formed hello with a forged credential */
		usleep(300000);
		h = calloc(1, sizeof(*h));
		if (!h)
			return 1;
		h->rank = 1;
		h->world = 2;
		snprintf(h->host, sizeof(h->host), "forger");
		snprintf(h->cred, sizeof(h->cred),
			 "MUNGE:AwQFAABforgedforgedforgedforgedforged=:");
		if (rdv_encode_hello(&b, h) < 0)
			return 1;
		return send_and_listen(port, b.p, b.len, out);
	case 3: /* another user */
		usleep(400000);
		if (setgid(65534) < 0 || setuid(NOBODY_UID) < 0) {
			fprintf(out, "E setuid: %s\n", strerror(errno));
			return 1;
		}
		auth_cfg(&cfg, 1, port, "777");
		break;
	case 4: /* same user, another job */
		usleep(500000);
		auth_cfg(&cfg, 1, port, "778");
		break;
	case 5: /* connects and says nothing */
		usleep(100000);
		fd = dial(port);
		sleep(3);
		if (fd >= 0)
			close(fd);
		return 0;
	default: /* the real rank 1, after the intruders */
		usleep(1500000);
		auth_cfg(&cfg, 1, port, "777");
		break;
	}
	st = ddp_comm_init(&cfg, &c);
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

static int
has(const struct tw_rank *r, const char *s)
{
	return strstr(r->out, s) != NULL;
}

/* A rank 0 impostor of another uid answering with its own credential. */
static int
impostor(int i, int size, int port, FILE *out, void *arg)
{
	struct ddp_config cfg;
	struct ddp_comm *c = NULL;
	struct sockaddr_in sa;
	struct wk_buf b = {0};
	munge_ctx_t ctx;
	char payload[256], junk[4096], *cred = NULL;
	enum ddp_status st;
	int lfd, fd, one = 1;

	(void)size;
	(void)arg;
	if (i == 1) {
		usleep(300000);
		auth_cfg(&cfg, 1, port, "777");
		st = ddp_comm_init(&cfg, &c);
		fprintf(out, "INIT %d %s\n", (int)st, ddp_last_error());
		ddp_comm_destroy(c);
		return st ? 3 : 0;
	}
	if (setgid(65534) < 0 || setuid(NOBODY_UID) < 0)
		return 1;
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((uint16_t)port);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(lfd, 4) < 0)
		return 1;
	fd = accept(lfd, NULL, NULL);
	if (fd < 0 || read(fd, junk, sizeof(junk)) <= 0)
		return 1;
	ctx = munge_ctx_create();
	munge_ctx_set(ctx, MUNGE_OPT_SOCKET, munge_sock);
	rdv_cred_payload(payload, sizeof(payload), "welcome", "777", "0", 1, 2);
	if (munge_encode(&cred, ctx, payload, (int)strlen(payload)) !=
		    EMUNGE_SUCCESS ||
	    rdv_encode_text(&b, RDV_WELCOME, cred) < 0 ||
	    write(fd, b.p, b.len) != (ssize_t)b.len)
		return 1;
	/* Wait for the rank to hang up. */
	while (read(fd, junk, sizeof(junk)) > 0)
		;
	free(cred);
	munge_ctx_destroy(ctx);
	return 0;
}

int
main(void)
{
	char dir[] = "/tmp/ddp-test-munge-XXXXXX", cmd[600];
	struct tw_rank rk[8];
	struct ddp_config cfg;
	struct ddp_comm *c = NULL;
	enum ddp_status st;
	FILE *p;
	int rc, i;

	signal(SIGPIPE, SIG_IGN);
	if (!mkdtemp(dir)) {
		tap_ok(0, "mkdtemp");
		return tap_done();
	}
	snprintf(cmd, sizeof(cmd), "tests/lib/private-munged start %s", dir);
	p = popen(cmd, "r");
	if (!p || !fgets(munge_sock, sizeof(munge_sock), p)) {
		rc = p ? pclose(p) : -1;
		rmdir(dir);
		if (rc >= 0 && WIFEXITED(rc) && WEXITSTATUS(rc) == 2) {
			printf("ok 1 # SKIP private munged unavailable "
			       "(needs root and the munge package)\n1..1\n");
			return 0;
		}
		tap_ok(0, "private munged started");
		return tap_done();
	}
	pclose(p);
	munge_sock[strcspn(munge_sock, "\n")] = '\0';
	tap_ok(1, "private munged at %s", munge_sock);

	/* Intruders while rank 0 waits; the real rank 1 joins last. */
	if (tw_run_job(7, role, NULL, 60, rk) < 0)
		return tap_ok(0, "fork"), tap_done();
	tap_ok(tw_exit(&rk[0]) == 0 && has(&rk[0], "ALLREDUCE 0 2 1 10") &&
		       tw_exit(&rk[6]) == 0 &&
		       has(&rk[6], "ALLREDUCE 0 2 1 10"),
	       "rendezvous completes and the job computes despite intruders");
	tap_ok(has(&rk[0], "refused connection from 127.0.0.1") &&
		       has(&rk[0], "bad magic") && has(&rk[1], "CLOSED"),
	       "garbage bytes are refused and logged");
	tap_ok(has(&rk[0], "invalid munge credential") &&
		       has(&rk[2], "CLOSED invalid munge credential"),
	       "a forged credential is refused and logged");
	tap_ok(tw_exit(&rk[3]) == 3 && has(&rk[3], "INIT 6") &&
		       has(&rk[3], "refused") && has(&rk[0], "uid 65534"),
	       "a process of another user (nobody) is refused: DDP_ERR_AUTH");
	tap_ok(tw_exit(&rk[4]) == 3 && has(&rk[4], "INIT 6") &&
		       has(&rk[0], "job=778"),
	       "a process of another job of the same user is refused");
	tap_ok(tw_exit(&rk[5]) == 0, "a silent connection does not stall "
				     "the rendezvous");
	if (tap_failed)
		for (i = 0; i < 7; i++)
			tw_diag_output(i, &rk[i]);
	tw_free_job(7, rk);

	/* A rank 0 impostor of another uid is detected by the rank. */
	if (tw_run_job(2, impostor, NULL, 30, rk) < 0)
		return tap_ok(0, "fork"), tap_done();
	if (!tap_ok(tw_exit(&rk[1]) == 3 && has(&rk[1], "INIT 6") &&
			    has(&rk[1], "is not rank 0 of this job"),
		    "a rank refuses a rank 0 of another uid (port squatter)"))
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
