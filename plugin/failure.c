/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A failed rank ends its --ddp step at once, and srun names the first one.
 * Slurm leaves the other ranks running when one dies (KillOnBadExit is off
 * by default, and srun reads its -K before any plugin option is known),
 * and a training program only notices at its own timeout: libddp's, or
 * Gloo's and NCCL's watchdogs, minutes later. So slurmstepd, as root, ends
 * the step itself at its node's first failed task, and tells srun which
 * task that was; srun keeps the earliest report of all nodes.
 *
 * The report travels over TCP, not a file: srun may run on a host that
 * shares no file system with the nodes. srun listens before the tasks
 * start and reads only when the step is over, so no thread is needed: the
 * nodes' connections wait in the listen backlog (SOMAXCONN), one per node
 * at most. The nonce, in the job's environment (readable by the job's user
 * and root alone), tells the nodes' reports from anyone else's. Anyone
 * may connect, so srun reads all connections at once, each on its own
 * clock (ddp_net_read_lines): one that sends nothing hides no report.
 * slurmstepd dials srun's address as slurmd saw it, from a child that is
 * the job's user (report): the port is the user's to choose, so the
 * connection must be one the user could make.
 * The line formats and the blame rule are in common/failure.h.
 *
 * A task that exits DDP_STOP_EXIT_STATUS after writing its stop note
 * (common/stop.h) stopped cleanly: its slurmstepd leaves the step running
 * for the other ranks, which stop at the same step, and reports the stop
 * to srun as a report of its own (failure.h's HOW "stop"), one per task;
 * srun, when every report is a stop, prints one line for them all and
 * says what comes next (stopping.c). The status without a note is a
 * failure like any other.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netdb.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "slurm_compat.h"

#include "ddp_child.h"
#include "ddp_log.h"
#include "ddp_net.h"
#include "ddp_util.h"
#include "failure.h"
#include "hostlist.h"
#include "kevents.h"
#include "plugin.h"
#include "restart.h"
#include "stop.h"
#include "verdict.h"

/* srun to slurmstepd. Named SLURM_*, as SLURM_DDP_REEXEC is: under
 * --export=NONE (or sbatch --export=NONE, which srun inherits) srun passes
 * the step SLURM_* alone. */
#define REPORT_ENV "SLURM_DDP_FAILURE_REPORT"
#define NONCE_ENV "SLURM_DDP_FAILURE_NONCE"
/* -K0 as srun's command line said it: srun itself never exports it. */
#define NO_KILL_ENV "SLURM_DDP_KILL_ON_BAD_EXIT"
#define RECORD_ENV "DDP_RESTART_REPORT"
/* The task's end of the pipe libddp names the rank at fault on. */
#define CAUSE_ENV "DDP_FAILURE_FD"
/* The verdict a memory error on this node leaves (verdict.h). */
#define MEMORY_ERROR_CHECK "memory-error"
/* How long a node's report may take, and srun's reading of all of them. */
#define REPORT_SECONDS 2.0
/* How long a failed task's output may take to leave slurmstepd. */
#define OUTPUT_SECONDS 0.5
/* Reports srun reads at most: one per node of the largest step. */
#define REPORTS_MAX 65536

int
failure_local_user_init(struct ddp_plugin *p, spank_t sp)
{
	struct ddp_failure_watch *w = &p->watch;
	char host[DDP_HOSTNAME_MAX + 1] = "", addr[DDP_HOSTNAME_MAX + 16];
	const char *shrink;
	int port = 0;

	if (!p->opts.enabled || p->conf_error[0] || w->listen_fd >= 0)
		return 0;
	shrink = getenv("DDP_ON_FAILURE");
	w->ends_step = p->conf.kill_on_bad_exit && p->kill_bad_exit != 0 &&
		       !(shrink && !strcmp(shrink, "shrink"));
	/* Always written: a step started from inside a rank must not keep
	 * its parent step's values. An empty address means no report. */
	if (local_srun_setenv(sp, NO_KILL_ENV,
			      p->kill_bad_exit == 0 ? "0" : "1") < 0 ||
	    local_srun_setenv(sp, REPORT_ENV, "") < 0 ||
	    local_srun_setenv(sp, NONCE_ENV, "") < 0)
		ddp_error("cannot set %s and %s for the step", NO_KILL_ENV,
			  REPORT_ENV);
	if (spank_get_item(sp, S_JOB_ID, &w->jobid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_STEPID, &w->stepid) != ESPANK_SUCCESS) {
		ddp_verbose("no step id: no first-failure report");
		return 0;
	}
	/* For "every rank" in the stop line; 0 when not said. */
	if (spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &w->ntasks) !=
	    ESPANK_SUCCESS)
		w->ntasks = 0;
	if (gethostname(host, sizeof(host) - 1) < 0 || !host[0]) {
		ddp_verbose("no host name: no first-failure report");
		return 0;
	}
	if (ddp_failure_nonce(w->nonce, sizeof(w->nonce)) < 0) {
		ddp_verbose("no random nonce (%s): no first-failure report",
			    strerror(errno));
		return 0;
	}
	w->listen_fd = ddp_net_listen(0, &port);
	if (w->listen_fd < 0) {
		ddp_verbose("cannot listen for failure reports (%s): no "
			    "first-failure report",
			    strerror(errno));
		return 0;
	}
	if (ddp_fmt(addr, sizeof(addr), "%s:%d", host, port) < 0 ||
	    local_srun_setenv(sp, NONCE_ENV, w->nonce) < 0 ||
	    local_srun_setenv(sp, REPORT_ENV, addr) < 0) {
		ddp_verbose("cannot export %s: no first-failure report",
			    REPORT_ENV);
		local_srun_setenv(sp, REPORT_ENV, "");
		ddp_close(&w->listen_fd);
	}
	return 0;
}

/* What srun's reading of the reports gathers. */
struct reports {
	const char *nonce;
	struct ddp_failure_set set;
	int forged;
};

/* One report line as ddp_net_read_lines hands it over. */
static void
take_report(void *arg, const char *line)
{
	struct reports *r = arg;
	struct ddp_failure f;
	char why[160];
	int rc;

	rc = ddp_failure_parse_report(line, r->nonce, &f, why, sizeof(why));
	if (rc == -2)
		r->forged++;
	else if (rc < 0)
		ddp_verbose("a malformed failure report: %s", why);
	else if (ddp_failure_set_add(&r->set, &f) < 0)
		ddp_verbose("a failure report dropped: out of memory");
}

/* The record of cause for a restart supervisor, when DDP_RESTART_REPORT
 * names a file (ddp-restart). */
static void
write_record(const struct ddp_failure *cause)
{
	const char *record = getenv(RECORD_ENV);
	char err[DDP_ERR_LEN];

	if (record && record[0] &&
	    ddp_failure_write_record(record, cause, err, sizeof(err)) < 0)
		ddp_error("%s: %s", RECORD_ENV, err);
}

void
failure_local_exit(struct ddp_plugin *p)
{
	struct ddp_failure_watch *w = &p->watch;
	struct reports r = {.nonce = w->nonce};
	struct ddp_failure cause;
	char line[DDP_FAILURE_LINE_MAX], what[512];

	if (w->listen_fd < 0)
		return;
	/* All at once, each connection on its own clock: anyone can connect
	 * to this port, and one who sends nothing must not use up the time
	 * of the nodes' reports queued behind it. */
	if (ddp_net_read_lines(w->listen_fd, ddp_now() + REPORT_SECONDS,
			       REPORT_SECONDS, sizeof(line), REPORTS_MAX,
			       take_report, &r) < 0)
		ddp_verbose("reading the failure reports: %s", strerror(errno));
	ddp_close(&w->listen_fd);
	if (r.forged)
		ddp_verbose("%d failure report(s) with a wrong nonce ignored",
			    r.forged);
	if (!ddp_failure_set_cause(&r.set, &cause, what, sizeof(what))) {
		/* No failure: the step's stops, if any, and what follows. */
		if (ddp_failure_set_stopped(&r.set, w->ntasks, &cause, what,
					    sizeof(what))) {
			ddp_failure_set_free(&r.set);
			write_record(&cause);
			stopping_next(p, w->jobid, w->stepid, what);
			return;
		}
		ddp_failure_set_free(&r.set);
		return;
	}
	ddp_failure_set_free(&r.set);
	ddp_user("%s; the step was %s (first failure of step %u.%u)", what,
		 w->ends_step ? "ended" : "not ended (kill-on-bad-exit off)",
		 w->jobid, w->stepid);
	write_record(&cause);
}

/* The Slurm name of this node (what --exclude takes): its entry in the
 * step's node list, else the host name. */
static void
node_name(const struct ddp_node *n, const char *list, char *out, size_t len)
{
	struct ddp_hostlist hl = {0};
	char err[128];

	if (ddp_hostlist_parse(list, (size_t)n->nnodes + 1, &hl, err,
			       sizeof(err)) == 0 &&
	    n->nodeid < hl.n &&
	    ddp_fmt(out, len, "%s", hl.hosts[n->nodeid]) == 0) {
		ddp_hostlist_free(&hl);
		return;
	}
	ddp_hostlist_free(&hl);
	ddp_fmt(out, len, "%s", n->host);
}

/* What the child that reports (dial_as_user) went through, with errno. */
enum dial_step { DIAL_DROP, DIAL_CONNECT, DIAL_SEND, DIAL_SENT };

/*
 * The child's part of dial_as_user: becomes uid:gid (no other group), then
 * connects to sa and sends line before deadline. Only system calls, no
 * allocation and no lock: slurmstepd has other threads, whose locks a
 * forked child inherits held. Writes {step, errno} to out and ends.
 */
static void __attribute__((noreturn))
dial_child(uid_t uid, gid_t gid, const struct sockaddr *sa, socklen_t salen,
	   const char *line, double deadline, int out)
{
	int res[2] = {DIAL_DROP, 0}, fd = -1;

	if (setgroups(1, &gid) < 0 || setresgid(gid, gid, gid) < 0 ||
	    setresuid(uid, uid, uid) < 0 || getuid() != uid ||
	    geteuid() != uid) {
		res[1] = errno;
		goto out;
	}
	/* A copy of slurmstepd's memory: the user may signal this process,
	 * never read it, whatever fs.suid_dumpable says. */
	prctl(PR_SET_DUMPABLE, 0);
	res[0] = DIAL_CONNECT;
	fd = ddp_net_connect_addr(sa, salen, deadline);
	if (fd < 0) {
		res[1] = errno;
		goto out;
	}
	res[0] = DIAL_SEND;
	if (ddp_net_send_all(fd, line, strlen(line), deadline) < 0) {
		res[1] = errno;
		goto out;
	}
	res[0] = DIAL_SENT;
out:
	if (write(out, res, sizeof(res)) < 0)
		res[1] = errno;
	_exit(res[0] == DIAL_SENT ? 0 : 1);
}

/*
 * Sends line to sa from a child that is the job's user (uid:gid) before it
 * makes its socket, bounded by deadline: the connection is one the user
 * could make, owned by the user for the firewall (nftables' meta skuid),
 * whatever port it goes to. Returns 0, or -1 with the reason in why.
 */
static int
dial_as_user(uid_t uid, gid_t gid, const struct sockaddr *sa, socklen_t salen,
	     const char *line, double deadline, char *why, size_t whylen)
{
	/* The child ends itself at deadline; the kill is the backstop. */
	const struct ddp_child_wait w = {.deadline = deadline + 0.5,
					 .grace = -1};
	int pfd[2] = {-1, -1}, res[2] = {DIAL_DROP, 0}, status, killed, rc = -1;
	ssize_t got;
	pid_t pid;

	/* Not blocking: the answer is read once the child is gone, and
	 * one that never wrote (killed, or reaped by another) says so. */
	if (pipe2(pfd, O_CLOEXEC | O_NONBLOCK) < 0) {
		ddp_fmt(why, whylen, "pipe: %s", strerror(errno));
		goto out;
	}
	pid = fork();
	if (pid == 0) {
		close(pfd[0]);
		dial_child(uid, gid, sa, salen, line, deadline, pfd[1]);
	}
	ddp_close(&pfd[1]);
	if (pid < 0) {
		ddp_fmt(why, whylen, "fork: %s", strerror(errno));
		goto out;
	}
	killed = ddp_wait_child(pid, &w, &status);
	got = read(pfd[0], res, sizeof(res));
	if (got != (ssize_t)sizeof(res)) {
		ddp_fmt(why, whylen, "%s",
			killed ? "timed out" : "the reporting process failed");
		goto out;
	}
	if (res[0] == DIAL_SENT) {
		rc = 0;
		goto out;
	}
	ddp_fmt(why, whylen, "%s: %s",
		res[0] == DIAL_DROP	 ? "cannot become the job's user"
		: res[0] == DIAL_CONNECT ? "connect"
					 : "send",
		res[1] == ETIMEDOUT ? "timed out" : strerror(res[1]));
out:
	ddp_close(&pfd[0]);
	return rc;
}

/*
 * Sends f to the step's srun, bounded by REPORT_SECONDS. Where to is what
 * the user cannot set:
 * - the host is SLURM_SRUN_COMM_HOST as slurmd writes it into the launch
 *   request's environment (env_array_overwrite in slurmd's launch RPC,
 *   22.05 to 26.05), whatever srun or --export put there: the numeric
 *   address srun's launch request came from, where Slurm itself sends
 *   srun the step's I/O. No SPANK item gives it (slurm/spank.h of 22.05,
 *   24.11 and 26.05 have none). It is the message header's origin, which
 *   a launch client of the user's own making could set.
 * - the port is srun's (SLURM_DDP_FAILURE_REPORT, whose host part is not
 *   used): no Slurm-given source says which port srun's plugin listens
 *   on, so the user can choose it (by _SLURM_SPANK_OPTION_ddp_ddp without
 *   --ddp on srun's command line, or a modified srun).
 * Neither is proof against the user, so the connection is made by a
 * child that is the job's user first (dial_as_user): whatever it
 * reaches, the user could reach it anyway; root never dials.
 */
static void
report(const struct ddp_plugin *p, spank_t sp, const struct ddp_failure *f)
{
	struct addrinfo hints, *ai = NULL;
	char addr[DDP_HOSTNAME_MAX + 16], nonce[DDP_FAILURE_NONCE_HEX + 2];
	char host[DDP_HOSTNAME_MAX + 1], line[DDP_FAILURE_LINE_MAX], why[160];
	char *colon;
	double deadline = ddp_now() + REPORT_SECONDS;
	gid_t gid;
	long port;
	int rc;

	/* Unset or empty: an srun that could not listen, or without the
	 * plugin. */
	if (remote_jobenv(sp, REPORT_ENV, addr, sizeof(addr)) < 0 || !addr[0] ||
	    remote_jobenv(sp, NONCE_ENV, nonce, sizeof(nonce)) < 0)
		return;
	colon = strrchr(addr, ':');
	if (!colon || ddp_parse_long(colon + 1, 1, 65535, &port) < 0) {
		ddp_info("--ddp: %s=%.80s is not host:port", REPORT_ENV, addr);
		return;
	}
	if (remote_jobenv(sp, "SLURM_SRUN_COMM_HOST", host, sizeof(host)) < 0 ||
	    !host[0]) {
		ddp_info("--ddp: rank %ld's failure is not reported: slurmd "
			 "gave the step no SLURM_SRUN_COMM_HOST (srun's "
			 "address)",
			 f->rank);
		return;
	}
	if (spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS) {
		ddp_info("--ddp: rank %ld's failure is not reported: Slurm did "
			 "not give the job's group",
			 f->rank);
		return;
	}
	if (ddp_failure_format_report(f, nonce, line, sizeof(line)) < 0) {
		ddp_info("--ddp: the failure of rank %ld cannot be reported "
			 "(%s, or the step's node list, out of form)",
			 f->rank, NONCE_ENV);
		return;
	}
	/* Numeric alone, as slurmd writes it: no name service as root. */
	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
	hints.ai_socktype = SOCK_STREAM;
	rc = getaddrinfo(host, colon + 1, &hints, &ai);
	if (rc != 0 || !ai) {
		ddp_info("--ddp: rank %ld's failure is not reported: "
			 "SLURM_SRUN_COMM_HOST=%.80s is not a numeric address "
			 "(%s)",
			 f->rank, host, gai_strerror(rc));
		return;
	}
	if (dial_as_user(p->node.uid, gid, ai->ai_addr, ai->ai_addrlen, line,
			 deadline, why, sizeof(why)) < 0)
		ddp_info("--ddp: cannot report rank %ld's failure to srun at "
			 "%s port %ld: %s",
			 f->rank, host, port, why);
	freeaddrinfo(ai);
}

void
failure_user_init(struct ddp_plugin *p)
{
	struct ddp_node *n = &p->node;
	int fd[2];

	if (!n->active || n->prelaunch_rfd >= 0 || !n->local_tasks)
		return;
	/* Before any task runs: what rises from here on is the step's. */
	ddp_kevents_read("/", NULL, &n->kevents);
	n->prelaunch_failed = calloc(n->local_tasks, 1);
	if (!n->prelaunch_failed)
		return;
	if (pipe2(fd, O_CLOEXEC | O_NONBLOCK) < 0) {
		ddp_info("--ddp: %s: no pipe for tasks that fail to start: %s",
			 n->host, strerror(errno));
		free(n->prelaunch_failed);
		n->prelaunch_failed = NULL;
		return;
	}
	n->prelaunch_rfd = fd[0];
	n->prelaunch_wfd = fd[1];
	/* One note per local task at most is kept (take_stop_note). */
	n->stop_notes = calloc(n->local_tasks, sizeof(*n->stop_notes));
	if (pipe2(fd, O_CLOEXEC | O_NONBLOCK) < 0) {
		ddp_info("--ddp: %s: no pipe for %s: %s", n->host, CAUSE_ENV,
			 strerror(errno));
		return;
	}
	n->cause_rfd = fd[0];
	n->cause_wfd = fd[1];
}

void
failure_task_init(struct ddp_plugin *p, spank_t sp)
{
	struct ddp_node *n = &p->node;
	struct stat st;
	char num[48], count[16];

	/* ddp-restart's count reaches the program whatever srun's --export. */
	if (remote_jobenv(sp, DDP_RESTART_ENV_STEP_COUNT, count,
			  sizeof(count)) == 0 &&
	    spank_setenv(sp, DDP_RESTART_ENV_COUNT, count, 1) != ESPANK_SUCCESS)
		ddp_debug("--ddp: no %s for this task", DDP_RESTART_ENV_COUNT);

	/* This task's copy alone goes across exec: slurmstepd's keeps
	 * close-on-exec. The inode tells libddp this pipe from whatever a
	 * process that inherits the variable alone has open as the number. */
	if (n->cause_wfd < 0 || fstat(n->cause_wfd, &st) < 0 ||
	    ddp_fmt(num, sizeof(num), "%d:%lu", n->cause_wfd,
		    (unsigned long)st.st_ino) < 0 ||
	    fcntl(n->cause_wfd, F_SETFD, 0) < 0 ||
	    spank_setenv(sp, CAUSE_ENV, num, 1) != ESPANK_SUCCESS)
		ddp_debug("--ddp: no %s for this task", CAUSE_ENV);
}

void
failure_task_init_failed(struct ddp_plugin *p, spank_t sp)
{
	struct ddp_node *n = &p->node;
	uint32_t local = 0;

	/* One write of 4 bytes, under PIPE_BUF: whole or not at all. */
	if (n->prelaunch_wfd >= 0 &&
	    spank_get_item(sp, S_TASK_ID, &local) == ESPANK_SUCCESS &&
	    write(n->prelaunch_wfd, &local, sizeof(local)) < 0)
		ddp_debug("--ddp: task %u: the pipe to slurmstepd: %s", local,
			  strerror(errno));
}

/* 1 when the task of local id failed in task_init, before its program. */
static int
failed_before_exec(struct ddp_node *n, uint32_t local)
{
	uint32_t id;

	if (n->prelaunch_rfd < 0)
		return 0;
	while (read(n->prelaunch_rfd, &id, sizeof(id)) == (ssize_t)sizeof(id))
		if (id < n->local_tasks)
			n->prelaunch_failed[id] = 1;
	return local < n->local_tasks && n->prelaunch_failed[local];
}

void
failure_remote_exit(struct ddp_plugin *p)
{
	struct ddp_node *n = &p->node;

	ddp_close(&n->prelaunch_rfd);
	ddp_close(&n->prelaunch_wfd);
	ddp_close(&n->cause_rfd);
	ddp_close(&n->cause_wfd);
	free(n->prelaunch_failed);
	n->prelaunch_failed = NULL;
	free(n->stop_notes);
	n->stop_notes = NULL;
	n->nstop_notes = 0;
}

/* One whole line a task wrote: the first naming is kept, and each stop
 * note until its task's exit takes it. Anything else is the program's. */
static void
take_cause_line(struct ddp_node *n, const char *line)
{
	struct ddp_stop_note note;

	if (ddp_stop_note_parse(line, &note) == 0) {
		if (n->stop_notes && n->nstop_notes < n->local_tasks)
			n->stop_notes[n->nstop_notes++] = note;
		return;
	}
	if (!n->cause_named &&
	    ddp_failure_parse_naming(line, &n->cause_naming) == 0)
		n->cause_named = 1;
}

/*
 * Reads what the node's tasks wrote to DDP_FAILURE_FD so far. Each task
 * writes each line with one write() (libddp, under PIPE_BUF), so lines
 * arrive whole; a read may still end inside one, which waits in cause_buf
 * for the rest. A line longer than any the tasks write is dropped.
 */
static void
read_cause_pipe(struct ddp_node *n)
{
	char *nl;
	ssize_t got;

	if (n->cause_rfd < 0)
		return;
	for (;;) {
		if (n->cause_len == sizeof(n->cause_buf) - 1)
			n->cause_len = 0;
		got = read(n->cause_rfd, n->cause_buf + n->cause_len,
			   sizeof(n->cause_buf) - 1 - n->cause_len);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return;
		n->cause_len += (size_t)got;
		n->cause_buf[n->cause_len] = '\0';
		while ((nl = strchr(n->cause_buf, '\n'))) {
			*nl = '\0';
			take_cause_line(n, n->cause_buf);
			n->cause_len -= (size_t)(nl + 1 - n->cause_buf);
			memmove(n->cause_buf, nl + 1, n->cause_len + 1);
		}
	}
}

/* The first well-formed naming the node's tasks wrote, into f. */
static void
read_naming(struct ddp_node *n, struct ddp_failure *f)
{
	read_cause_pipe(n);
	if (!n->cause_named)
		return;
	f->named = 1;
	f->named_by = n->cause_naming.named_by;
	f->named_rank = n->cause_naming.named_rank;
	ddp_fmt(f->named_node, sizeof(f->named_node), "%s",
		n->cause_naming.named_node);
	ddp_fmt(f->named_why, sizeof(f->named_why), "%s",
		n->cause_naming.named_why);
	ddp_info("--ddp: rank %ld names rank %ld (%s) as the cause: %s",
		 f->named_by, f->named_rank, f->named_node, f->named_why);
}

/*
 * Takes rank's stop note into f (a clean stop: f->stopped and the note's
 * fields): 1, or 0 when the task wrote none (its exit status is then a
 * failure like any other).
 */
static int
take_stop_note(struct ddp_node *n, long rank, struct ddp_failure *f)
{
	size_t i;

	read_cause_pipe(n);
	for (i = 0; i < n->nstop_notes; i++) {
		const struct ddp_stop_note *note = &n->stop_notes[i];

		if (note->rank != rank)
			continue;
		f->stopped = 1;
		f->stop_step = note->step;
		f->stop_ckpt_ms = note->ckpt_ms;
		ddp_fmt(f->stop_why, sizeof(f->stop_why), "%s",
			ddp_stop_why_name(note->why));
		n->stop_notes[i] = n->stop_notes[--n->nstop_notes];
		return 1;
	}
	return 0;
}

/*
 * Records this node's memory error (verdict.h) when the kernel counted one
 * while the task died of SIGBUS: the node's own word, which the drain rule
 * counts like a ddp-check finding. How a task died is never recorded by
 * itself: the program chooses it (failure.h, the cause's class), and
 * three users' crashing programs must not drain a node.
 */
static void
record_memory_error(const struct ddp_plugin *p, const struct ddp_failure *f)
{
	const struct ddp_node *n = &p->node;
	struct ddp_verdict v = {0};
	char err[DDP_ERR_LEN];

	if (f->kernel != DDP_KERNEL_MEMORY_ERROR || !p->conf.state_dir[0])
		return;
	v.time = (long long)time(NULL);
	v.uid = (unsigned long)n->uid;
	if (ddp_fmt(v.job, sizeof(v.job), "%u", n->jobid) < 0 ||
	    ddp_fmt(v.step, sizeof(v.step), "%u", n->stepid) < 0 ||
	    ddp_fmt(v.node, sizeof(v.node), "%s", n->host) < 0 ||
	    ddp_fmt(v.check, sizeof(v.check), "%s", MEMORY_ERROR_CHECK) < 0 ||
	    ddp_fmt(v.value, sizeof(v.value), "%d", f->signal) < 0 ||
	    ddp_fmt(v.median, sizeof(v.median), "-") < 0 ||
	    ddp_fmt(v.unit, sizeof(v.unit), "-") < 0)
		return;
	if (ddp_verdict_append(p->conf.state_dir, &v, err, sizeof(err)) < 0)
		ddp_error("--ddp: %s: the verdict %s is not recorded: %s",
			  n->host, MEMORY_ERROR_CHECK, err);
}

/* Whether this step is to be ended: the site's kill_on_bad_exit, and no
 * -K0 (as srun passed it on), SLURM_KILL_BAD_EXIT=0 or
 * DDP_ON_FAILURE=shrink from the user. */
static int
ends_step(const struct ddp_plugin *p, spank_t sp)
{
	char v[16];

	if (!p->conf.kill_on_bad_exit)
		return 0;
	/* libddp's survivors go on without the lost rank (libddp(3)). */
	if (remote_jobenv(sp, "DDP_ON_FAILURE", v, sizeof(v)) == 0 &&
	    !strcmp(v, "shrink"))
		return 0;
	if (remote_jobenv(sp, NO_KILL_ENV, v, sizeof(v)) == 0 &&
	    !strcmp(v, "0"))
		return 0;
	if (remote_jobenv(sp, "SLURM_KILL_BAD_EXIT", v, sizeof(v)) == 0 &&
	    !strcmp(v, "0"))
		return 0;
	return 1;
}

/* 1 when the step's program is ddp-check (srun --ddp ddp-check): its exit
 * status is its verdict, which every rank returns, not a failed rank. */
static int
step_runs_check(const struct ddp_plugin *p, spank_t sp)
{
	const char *base;
	char **argv = NULL;
	int argc = 0;

	if (spank_get_item(sp, S_JOB_ARGV, &argc, &argv) != ESPANK_SUCCESS ||
	    argc < 1 || !argv || !argv[0])
		return 0;
	base = strrchr(argv[0], '/');
	base = base ? base + 1 : argv[0];
	return !strcmp(argv[0], p->conf.check_path) ||
	       !strcmp(base, "ddp-check");
}

int
failure_task_exit(struct ddp_plugin *p, spank_t sp)
{
	struct ddp_node *n = &p->node;
	struct ddp_failure f = {0};
	char list[DDP_FAILURE_NODES_LEN], what[256];
	struct timespec ts;
	uint32_t gid = 0, local = 0;
	int status = 0;

	if (!n->active || n->failure_seen ||
	    spank_get_item(sp, S_TASK_EXIT_STATUS, &status) != ESPANK_SUCCESS ||
	    !ddp_failure_from_wait_status(status, &f))
		return 0;
	if (spank_get_item(sp, S_TASK_ID, &local) == ESPANK_SUCCESS &&
	    failed_before_exec(n, local))
		return 0;
	if (step_runs_check(p, sp))
		return 0;
	clock_gettime(CLOCK_REALTIME, &ts);
	f.time_ms = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	f.rank = spank_get_item(sp, S_TASK_GLOBAL_ID, &gid) == ESPANK_SUCCESS
			 ? (long)gid
			 : -1;
	f.nodes = n->nnodes;
	if (remote_jobenv(sp, "SLURM_STEP_NODELIST", list, sizeof(list)) < 0)
		list[0] = '\0';
	ddp_fmt(f.step_nodes, sizeof(f.step_nodes), "%s", list);
	node_name(n, list, f.node, sizeof(f.node));
	/* A clean stop: the step goes on for the ranks still stopping, and
	 * srun hears of it (a failure of another task wins there). */
	if (f.signal == 0 && f.status == DDP_STOP_EXIT_STATUS && f.rank >= 0 &&
	    take_stop_note(n, f.rank, &f)) {
		if (ddp_failure_describe(&f, what, sizeof(what)) == 0)
			ddp_info("--ddp: %s, checkpointed in %lld ms: step "
				 "%u.%u left running",
				 what, f.stop_ckpt_ms, n->jobid, n->stepid);
		report(p, sp, &f);
		return 0;
	}
	n->failure_seen = 1;
	if (f.signal > 0) {
		struct ddp_kevents now;

		ddp_kevents_read("/", NULL, &now);
		f.kernel = ddp_kevents_verdict(&n->kevents, &now, f.signal);
	}
	read_naming(n, &f);
	if (ddp_failure_describe(&f, what, sizeof(what)) < 0)
		ddp_fmt(what, sizeof(what), "rank %ld failed", f.rank);
	/* End the step first: every second counts for the other ranks'
	 * GPUs, and srun cannot end before this task's exit reaches it,
	 * which comes after the report. */
	if (ends_step(p, sp)) {
		const int own[] = {n->prelaunch_rfd, n->cause_rfd};

		ddp_info("--ddp: %s: ending step %u.%u", what, n->jobid,
			 n->stepid);
		/* The task's last output first: srun drops what is still on
		 * its way once the step's other tasks die of SIGKILL. */
		if (ddp_wait_output_sent(own, 2, ddp_now() + OUTPUT_SECONDS) <
		    0)
			ddp_debug("--ddp: %s: output still on its way after %g "
				  "s: %s",
				  what, OUTPUT_SECONDS, strerror(errno));
		/* Another node's failure may have ended it already: every
		 * node's first failed task asks. */
		if (ddp_slurm_kill_job_step(n->jobid, n->stepid, SIGKILL) !=
			    SLURM_SUCCESS &&
		    errno != ESLURM_ALREADY_DONE)
			ddp_error("--ddp: %s: cannot end step %u.%u: %s", what,
				  n->jobid, n->stepid, slurm_strerror(errno));
	} else {
		ddp_info(
			"--ddp: %s: step %u.%u left running "
			"(kill_on_bad_exit = no, -K0 or DDP_ON_FAILURE=shrink)",
			what, n->jobid, n->stepid);
	}
	if (f.rank >= 0)
		report(p, sp, &f);
	record_memory_error(p, &f);
	return 0;
}
