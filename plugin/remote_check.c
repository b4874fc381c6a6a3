/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * --ddp-check in slurmstepd: each task of the step runs ddp-check before
 * the program, as the job's user with the task's environment, waits for
 * it on a pidfd while it reads ddp-check's findings, and the node's first
 * task hands those about its node to slurmstepd through the verdict pipe
 * (remote.c opens it in user_init); slurmstepd, as root, records them in
 * <state_dir>/verdicts when the step ends (common/verdict.h). With
 * --ddp-check=requeue the step's global rank 0 requeues the job
 * (requeue.c). The port the check uses is remote.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "slurm_compat.h"

#include "ddp_child.h"
#include "ddp_log.h"
#include "ddp_util.h"
#include "plugin.h"
#include "verdict.h"

/* The most of ddp-check's verdict lines a task reads, and the most of a
 * node's lines slurmstepd takes from its task. */
#define VERDICT_TEXT_MAX (64u << 10)

enum ddp_check
remote_check_mode(const struct ddp_plugin *p)
{
	return p->opts.check >= 0 ? (enum ddp_check)p->opts.check
				  : p->conf.check;
}

/* What a task read of ddp-check's verdict lines. */
struct verdict_text {
	int fd; /* the read end, non-blocking; -1 when done */
	char buf[VERDICT_TEXT_MAX];
	size_t len;
};

/* Reads what the pipe holds now; past VERDICT_TEXT_MAX the rest is
 * drained and dropped, so ddp-check never blocks on a full pipe. */
static void
drain_verdicts(struct verdict_text *t)
{
	char sink[4096];
	ssize_t r;

	while (t->fd >= 0) {
		if (t->len < sizeof(t->buf))
			r = read(t->fd, t->buf + t->len,
				 sizeof(t->buf) - t->len);
		else
			r = read(t->fd, sink, sizeof(sink));
		if (r > 0 && t->len < sizeof(t->buf))
			t->len += (size_t)r;
		else if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN))
			break;
		else if (r < 0 && errno == EAGAIN)
			return;
	}
	ddp_close(&t->fd);
}

/* drain_verdicts as a ddp_child_wait's each. */
static void
drain_each(void *arg)
{
	if (arg)
		drain_verdicts(arg);
}

/*
 * Waits for pid until deadline, then kills it, reading t meanwhile.
 * Every task of a node waits so: each sleeps until its check ends,
 * writes findings or reaches the deadline, where a fixed tick would wake
 * hundreds of tasks 50 times a second beside the link test. Returns its
 * wait status, or -1 when waitpid fails.
 */
static int
wait_check(pid_t pid, double deadline, int *killed, struct verdict_text *t)
{
	const struct ddp_child_wait w = {
		.deadline = deadline,
		.grace = -1,
		.fd = t ? &t->fd : NULL,
		.each = drain_each,
		.arg = t,
	};
	int status;

	*killed = ddp_wait_child(pid, &w, &status);
	return status;
}

/* A node's first task: hands slurmstepd the findings about its node. */
struct forward {
	const struct ddp_node *n;
	size_t sent;
};

static void
forward_verdict(void *arg, const struct ddp_verdict *v)
{
	struct forward *f = arg;
	char line[DDP_VERDICT_LINE_MAX];
	ssize_t w;

	if (strcmp(v->node, f->n->host) != 0 ||
	    ddp_verdict_format(v, line, sizeof(line)) < 0 ||
	    f->sent + strlen(line) > VERDICT_TEXT_MAX)
		return;
	/* One write of less than PIPE_BUF is never split. */
	w = write(f->n->verdict_wfd, line, strlen(line));
	if (w > 0)
		f->sent += (size_t)w;
}

/*
 * After ddp-check wrote findings: each node's first task hands those
 * about its node to slurmstepd, and with --ddp-check=requeue the step's
 * global rank 0 requeues the job when the check failed.
 */
static void
use_verdicts(const struct ddp_plugin *p, enum ddp_check mode, uint32_t local,
	     long global, int failed, const struct verdict_text *t)
{
	const struct ddp_node *n = &p->node;
	struct forward f = {n, 0};

	if (local == 0 && n->verdict_wfd >= 0 && t->len)
		ddp_verdict_scan(t->buf, t->len, forward_verdict, &f, NULL,
				 NULL, 0);
	if (failed && mode == DDP_CHECK_REQUEUE && global == 0)
		plugin_requeue(p, t->buf, t->len);
}

/*
 * --ddp-check: runs ddp-check (one rendezvous of every rank, on the
 * step's check port, not MASTER_PORT) from this task, as its user, with
 * the task's environment as set so far (the job environment, not
 * slurmstepd's own), and waits for it. ddp-check ends itself at its join
 * and time limits; the kill 5 s after both is the backstop for one that
 * cannot. The same on every Slurm version: 22.05 has no
 * spank_prepend_task_argv, and a wrapper would outlive nothing anyway.
 * Returns 0 to start the program, or -1 (logged) to end the task.
 */
static int
run_check(const struct ddp_plugin *p, spank_t sp, enum ddp_check mode,
	  uint32_t local, long global)
{
	const struct ddp_conf *conf = &p->conf;
	const struct ddp_node *n = &p->node;
	char frac[32], limit[32], join[32], port[32], vfd[32] = "";
	char **env = NULL;
	char *argv[] = {NULL,  "--mode",
			NULL,  "--min-fraction",
			frac,  "--join-limit",
			join,  "--time-limit",
			limit, "--port",
			port,  "--verdict-fd",
			vfd,   NULL};
	struct sigaction dfl = {.sa_handler = SIG_DFL}, old;
	struct verdict_text *text = NULL;
	sigset_t all;
	int status, killed = 0, pfd[2] = {-1, -1}, rc = -1;
	pid_t pid;

	if (ddp_fmt(frac, sizeof(frac), "%.6f", conf->check_min_fraction) < 0 ||
	    ddp_fmt(limit, sizeof(limit), "%u", conf->check_time_limit) < 0 ||
	    ddp_fmt(join, sizeof(join), "%u", conf->check_join_limit) < 0 ||
	    ddp_fmt(port, sizeof(port), "%ld", n->check_port) < 0)
		return -1;
	if (n->check_port <= 0) {
		ddp_error("--ddp-check: %s: no port was chosen for the check",
			  n->host);
		return -1;
	}
	argv[0] = (char *)conf->check_path;
	/* Requeueing is the plugin's: ddp-check fails as with fail. */
	argv[2] = (char *)ddp_check_name(
		mode == DDP_CHECK_REQUEUE ? DDP_CHECK_FAIL : mode);
	if (spank_get_item(sp, S_JOB_ENV, &env) != ESPANK_SUCCESS || !env) {
		ddp_error("--ddp-check: Slurm did not give the task's "
			  "environment");
		return -1;
	}
	/* Without the findings the check still runs, and fails as fail. */
	text = calloc(1, sizeof(*text));
	if (text && pipe2(pfd, O_CLOEXEC | O_NONBLOCK) == 0 &&
	    ddp_fmt(vfd, sizeof(vfd), "%d", pfd[1]) == 0) {
		text->fd = pfd[0];
	} else {
		ddp_info("--ddp-check: %s: the check's findings are not "
			 "read: %s",
			 n->host, text ? strerror(errno) : "out of memory");
		argv[11] = NULL;
		ddp_close(&pfd[0]);
		ddp_close(&pfd[1]);
		if (text)
			text->fd = -1;
	}
	/* waitpid needs SIGCHLD not ignored; the program gets it back. */
	sigaction(SIGCHLD, &dfl, &old);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		sigemptyset(&all);
		sigprocmask(SIG_SETMASK, &all, NULL);
		/* The write end alone stays open across exec, blocking. */
		if (pfd[1] >= 0 && (fcntl(pfd[1], F_SETFD, 0) < 0 ||
				    fcntl(pfd[1], F_SETFL, 0) < 0))
			_exit(127);
		execve(argv[0], argv, env);
		dprintf(STDERR_FILENO,
			"ddp: %s: --ddp-check: cannot run %s: %s (the admin "
			"sets check_path in ddp.conf)\n",
			n->host, argv[0], strerror(errno));
		_exit(127);
	}
	ddp_close(&pfd[1]);
	if (pid < 0) {
		ddp_error("--ddp-check: cannot start %s: %s", argv[0],
			  strerror(errno));
		sigaction(SIGCHLD, &old, NULL);
		goto out;
	}
	status = wait_check(pid,
			    ddp_now() + conf->check_join_limit +
				    conf->check_time_limit + 5,
			    &killed, text);
	sigaction(SIGCHLD, &old, NULL);
	if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		use_verdicts(p, mode, local, global, 0, text);
		rc = 0;
		goto out;
	}
	if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 1) {
		/* The report on rank 0's output names the node(s). */
		if (local == 0)
			ddp_error("%s: --ddp-check found a problem (see the "
				  "report): the program was not started",
				  n->host);
		use_verdicts(p, mode, local, global, 1, text);
		goto out;
	}
	if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 2)
		ddp_error("%s: --ddp-check: %s could not check this step "
			  "(its message says why): the program was not "
			  "started",
			  n->host, argv[0]);
	else if (status != -1 && WIFEXITED(status) &&
		 WEXITSTATUS(status) == 127)
		; /* the child said why */
	else if (killed)
		ddp_error("%s: --ddp-check: %s did not end within its join "
			  "and time limits (%u + %u s): killed, the program "
			  "was not started",
			  n->host, argv[0], conf->check_join_limit,
			  conf->check_time_limit);
	else
		ddp_error("%s: --ddp-check: %s ended abnormally (status %d): "
			  "the program was not started",
			  n->host, argv[0], status);
out:
	if (text)
		ddp_close(&text->fd);
	free(text);
	return rc;
}

int
remote_check_run(const struct ddp_plugin *p, spank_t sp, uint32_t local,
		 long global)
{
	enum ddp_check mode = remote_check_mode(p);

	return mode == DDP_CHECK_OFF ? 0
				     : run_check(p, sp, mode, local, global);
}

/* What remote_exit records from the node's first task. */
struct record {
	const struct ddp_plugin *p;
	size_t written, foreign;
};

static void
record_verdict(void *arg, const struct ddp_verdict *line)
{
	struct record *r = arg;
	const struct ddp_node *n = &r->p->node;
	struct ddp_verdict v = *line;
	char err[DDP_ERR_LEN];

	/* The task was told to send its own node's lines only. */
	if (strcmp(v.node, n->host) != 0) {
		r->foreign++;
		return;
	}
	v.time = (long long)time(NULL);
	v.uid = (unsigned long)n->uid;
	if (ddp_fmt(v.job, sizeof(v.job), "%u", n->jobid) < 0 ||
	    ddp_fmt(v.step, sizeof(v.step), "%u", n->stepid) < 0)
		return;
	if (ddp_verdict_append(r->p->conf.state_dir, &v, err, sizeof(err)) <
	    0) {
		ddp_error("--ddp-check: %s: the verdict is not recorded: %s",
			  n->host, err);
		return;
	}
	r->written++;
}

/*
 * Root: the findings the node's first task sent about this node, each
 * appended to <state_dir>/verdicts with the job, step, user and time that
 * Slurm gave. The lines come from a process of the job's user: they are
 * read bounded, parsed strictly, and bad ones skipped with one log line.
 */
void
remote_check_record(struct ddp_plugin *p)
{
	struct ddp_node *n = &p->node;
	struct record r = {p, 0, 0};
	char *buf = NULL, bad_why[128];
	size_t len = 0, bad = 0;
	ssize_t got;

	ddp_close(&n->verdict_wfd);
	if (n->verdict_rfd < 0)
		return;
	buf = malloc(VERDICT_TEXT_MAX);
	if (!buf)
		goto out;
	while (len < VERDICT_TEXT_MAX) {
		got = read(n->verdict_rfd, buf + len, VERDICT_TEXT_MAX - len);
		if (got > 0)
			len += (size_t)got;
		else if (got < 0 && errno == EINTR)
			continue;
		else
			break;
	}
	if (!len)
		goto out;
	ddp_verdict_scan(buf, len, record_verdict, &r, &bad, bad_why,
			 sizeof(bad_why));
	if (bad || r.foreign)
		ddp_info("--ddp-check: %s: %zu verdict line%s skipped (%s)",
			 n->host, bad + r.foreign,
			 bad + r.foreign == 1 ? "" : "s",
			 bad ? bad_why : "another node's");
	if (r.written)
		ddp_verbose("--ddp-check: %s: %zu verdict%s recorded", n->host,
			    r.written, r.written == 1 ? "" : "s");
out:
	ddp_close(&n->verdict_rfd);
	free(buf);
}
