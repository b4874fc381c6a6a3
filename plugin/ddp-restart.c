/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ddp-restart: the supervisor of srun --ddp --ddp-restart=N. The plugin in
 * srun runs it in srun's place, before the step exists, as
 *   ddp-restart N SRUN [SRUN'S ARGUMENTS...]
 *   ddp-restart [--requeue-max=Q] N SRUN [SRUN'S ARGUMENTS...]
 * (Q: ddp.conf's check_requeue_max, 0 when not given). It runs srun as its
 * child with the same arguments, and after a failure that the plugin's
 * report blames on a node runs it again without that node (restart.c
 * decides), at most N times. When the allocation has no spare node left,
 * a batch job that may be requeued is requeued without the blamed nodes
 * (slurm_requeue.c, as --ddp-check=requeue does, at most Q restarts of
 * the job); otherwise the line says which --exclude= to run again with. It
 * forwards the signals a user or Slurm sends it to srun, waits for srun, never
 * restarts after a terminating one, and exits with srun's status (128 + the
 * signal when srun was killed).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "args.h"
#include "ddp_child.h"
#include "ddp_log.h"
#include "ddp_util.h"
#include "restart.h"
#include "slurm_requeue.h"

#include <slurm/slurm.h>

/* The signals passed on to srun; srun itself handles a double Ctrl-C.
 * SIGTSTP is left at its default: a Ctrl-Z from the terminal stops srun
 * and this supervisor alike, as it does a lone srun. */
static const int forwarded[] = {SIGINT,	 SIGTERM, SIGHUP, SIGQUIT,
				SIGUSR1, SIGUSR2, SIGCONT};

/* ddp.conf's check_requeue_max, from the plugin. */
#define REQUEUE_MAX_OPT "--requeue-max="
#define RESTART_ON_OPT "--restart-on="

static volatile sig_atomic_t child_pid;
/* A terminating signal came: the step is not run again. */
static volatile sig_atomic_t stopped;

static void
on_signal(int sig, siginfo_t *info, void *ctx)
{
	pid_t pid = (pid_t)child_pid;

	if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT)
		stopped = 1;
	/* The terminal sends its signals to the whole foreground process
	 * group, srun included: a second copy would turn one Ctrl-C (srun's
	 * status request) into two (srun's abort). */
	if (info && info->si_code == SI_KERNEL)
		return;
	if (pid > 0)
		kill(pid, sig);
}

static int
install_handlers(sigset_t *set)
{
	struct sigaction sa;
	size_t i;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_signal;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	sigemptyset(set);
	for (i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++) {
		sigaddset(set, forwarded[i]);
		sigaddset(&sa.sa_mask, forwarded[i]);
	}
	for (i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
		if (sigaction(forwarded[i], &sa, NULL) < 0)
			return -1;
	return 0;
}

/* The exit status a shell would report for wait status st. */
static int
exit_code(int st)
{
	if (st != -1 && WIFEXITED(st))
		return WEXITSTATUS(st);
	if (st != -1 && WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return 1;
}

/* Runs srun once as argv says and waits for it; returns its wait status,
 * or -1 (logged) when it could not start. */
static int
run_srun(const char *srun, char **argv, const sigset_t *set)
{
	struct ddp_child_wait w = {.deadline = -1, .grace = -1};
	sigset_t old;
	pid_t me = getpid(), pid;
	int status = -1;

	/* No signal may slip between the fork and child_pid. */
	sigprocmask(SIG_BLOCK, set, &old);
	pid = fork();
	if (pid == 0) {
		struct sigaction dfl = {.sa_handler = SIG_DFL};
		size_t i;

		for (i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
			sigaction(forwarded[i], &dfl, NULL);
		sigprocmask(SIG_SETMASK, &old, NULL);
		/* srun must not outlive a supervisor killed outright. */
		if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != me)
			_exit(127);
		execv(srun, argv);
		ddp_error("cannot run %s: %s", srun, strerror(errno));
		_exit(127);
	}
	if (pid < 0) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		ddp_error("cannot start srun: %s", strerror(errno));
		return -1;
	}
	child_pid = pid;
	sigprocmask(SIG_SETMASK, &old, NULL);
	ddp_wait_child(pid, &w, &status);
	child_pid = 0;
	return status;
}

/* Reads the report at path into r. Returns 0, or -1 with why. */
static int
read_report(const char *path, struct ddp_failure_record *r, char *why,
	    size_t whylen)
{
	struct ddp_buf b = {0};
	char chunk[4096];
	ssize_t n;
	int fd, rc = -1;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 && errno == ENOENT) {
		ddp_errf(why, whylen,
			 "srun failed and wrote no report of a failed rank");
		goto out;
	}
	if (fd < 0) {
		ddp_errf(why, whylen, "cannot read srun's report: %s",
			 strerror(errno));
		goto out;
	}
	while ((n = read(fd, chunk, sizeof(chunk))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || b.len > 4 * DDP_RESTART_LIST_LEN) {
			ddp_errf(why, whylen, "cannot read the report");
			goto out;
		}
		ddp_buf_append(&b, chunk, (size_t)n);
	}
	if (b.failed || !b.s) {
		ddp_errf(why, whylen, "srun's report is empty");
		goto out;
	}
	rc = ddp_failure_parse_record(b.s, b.len, r, why, whylen);
out:
	ddp_close(&fd);
	ddp_buf_free(&b);
	return rc;
}

/* Sets the variables srun and its tasks see for run k. */
static int
set_run_env(const char *report, unsigned k)
{
	char pid[32], count[32];

	if (ddp_fmt(pid, sizeof(pid), "%ld", (long)getpid()) < 0 ||
	    ddp_fmt(count, sizeof(count), "%u", k) < 0 ||
	    setenv(DDP_RESTART_ENV_SUPERVISOR, pid, 1) < 0 ||
	    setenv(DDP_RESTART_ENV_REPORT, report, 1) < 0 ||
	    setenv(DDP_RESTART_ENV_COUNT, count, 1) < 0 ||
	    setenv(DDP_RESTART_ENV_STEP_COUNT, count, 1) < 0)
		return -1;
	return 0;
}

/*
 * Requeues the batch job without st's blamed nodes (st->short_of_nodes:
 * the allocation has no spare node left) when Slurm and max allow, and
 * prints the line that says so. Returns 1 when requeued, else 0 with why.
 */
static int
requeue(const struct ddp_restart *st, unsigned max, char *why, size_t whylen)
{
	const char *id = getenv("SLURM_JOB_ID");
	char list[DDP_SLURM_EXCLUDE_LEN], note[96];
	unsigned restart = 0;
	long jobid;

	if (!id || ddp_parse_long(id, 1, UINT32_MAX, &jobid) < 0) {
		ddp_errf(why, whylen, "SLURM_JOB_ID does not name the job");
		return 0;
	}
	if (ddp_requeue_node_list(&st->requeue_nodes, list, sizeof(list)) < 0) {
		ddp_errf(why, whylen, "too many nodes blamed to list");
		return 0;
	}
	slurm_init(NULL);
	if (ddp_slurm_requeue_without((uint32_t)jobid, max, &st->requeue_nodes,
				      "--ddp-restart", &restart, note,
				      sizeof(note), why, whylen) < 0)
		return 0;
	ddp_user("job %ld requeued (restart %u of at most %u) without %s%s: "
		 "%s, and the allocation has no spare node left",
		 jobid, restart, max, list, note, st->failure);
	return 1;
}

/* Runs srun until it succeeds or restart.c says not to run it again.
 * Returns the exit code. */
static int
supervise(unsigned max, unsigned requeue_max, unsigned restart_on, int argc,
	  char **argv, const char *report, const sigset_t *set)
{
	struct ddp_restart st;
	struct ddp_failure_record r;
	struct ddp_srun_req req;
	char err[DDP_ERR_LEN], why[DDP_ERR_LEN], line[2 * DDP_ERR_LEN];
	char **run_argv = argv, *added = NULL;
	int status = -1, have, answer, tried;

	if (ddp_srun_scan(argc, argv, NULL, &req, err, sizeof(err)) < 0) {
		ddp_error("%s", err);
		return 1;
	}
	ddp_restart_init(&st, max, restart_on, req.exclude,
			 getenv("SLURM_JOB_NODELIST"));
	for (;;) {
		if (unlink(report) < 0 && errno != ENOENT) {
			ddp_error("cannot remove %s: %s", report,
				  strerror(errno));
			break;
		}
		if (set_run_env(report, st.done) < 0) {
			ddp_error("cannot set srun's environment: %s",
				  strerror(errno));
			break;
		}
		status = run_srun(argv[0], run_argv, set);
		if (status == -1 || (WIFEXITED(status) && !WEXITSTATUS(status)))
			break;
		have = read_report(report, &r, why, sizeof(why)) == 0;
		answer = ddp_restart_decide(&st, have ? &r : NULL, why, stopped,
					    line, sizeof(line));
		/* check_requeue_max = 0: the site requeues no job. */
		tried = answer == 0 && st.short_of_nodes && requeue_max > 0;
		if (tried && requeue(&st, requeue_max, why, sizeof(why)))
			break;
		if (answer < 0)
			ddp_error("not restarted: the reason does not fit in "
				  "a line");
		else
			ddp_user("%s", line);
		if (tried)
			ddp_user("not requeued: %s", why);
		if (answer != 1)
			break;
		if (run_argv != argv) {
			free(run_argv);
			free(added);
		}
		run_argv = ddp_restart_argv(argc, argv, st.exclude, st.nodelist,
					    &added, err, sizeof(err));
		if (!run_argv) {
			run_argv = argv;
			ddp_error("not restarted: %s", err);
			break;
		}
	}
	if (run_argv != argv) {
		free(run_argv);
		free(added);
	}
	return exit_code(status);
}

int
main(int argc, char **argv)
{
	char dir[4096], report[4096];
	const char *tmp = getenv("TMPDIR");
	sigset_t set, none;
	char on_err[DDP_ERR_LEN] = "";
	long max, requeue_max = 0;
	unsigned restart_on = DDP_RESTART_ON_NODE;
	int code = 1;

	for (; argc > 1 && !strncmp(argv[1], "--", 2); argc--, argv++) {
		if (!strncmp(argv[1], REQUEUE_MAX_OPT,
			     strlen(REQUEUE_MAX_OPT))) {
			if (ddp_parse_long(argv[1] + strlen(REQUEUE_MAX_OPT), 0,
					   DDP_RESTART_LIMIT, &requeue_max) < 0)
				requeue_max = -1;
		} else if (strncmp(argv[1], RESTART_ON_OPT,
				   strlen(RESTART_ON_OPT)) ||
			   ddp_restart_on_parse(
				   argv[1] + strlen(RESTART_ON_OPT),
				   &restart_on, on_err, sizeof(on_err)) < 0) {
			requeue_max = -1;
			break;
		}
	}
	if (argc < 3 || requeue_max < 0 ||
	    ddp_parse_long(argv[1], 1, DDP_RESTART_LIMIT, &max) < 0) {
		fprintf(stderr,
			"%s%susage: ddp-restart [" REQUEUE_MAX_OPT
			"Q] [" RESTART_ON_OPT "LIST] N SRUN [ARGUMENTS...]\n"
			"srun --ddp --ddp-restart=N [--ddp-restart-on=LIST] "
			"runs it in srun's place; N is 1-%d, Q 0-%d, LIST a "
			"comma list of exit, crash, oom, hang, node or all\n",
			on_err, on_err[0] ? "\n" : "", DDP_RESTART_LIMIT,
			DDP_RESTART_LIMIT);
		return 2;
	}
	/* srun may have blocked signals before the plugin ran this. */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGCHLD, SIG_DFL);
	if (install_handlers(&set) < 0) {
		ddp_error("cannot handle signals: %s", strerror(errno));
		return 1;
	}
	if (!tmp || tmp[0] != '/')
		tmp = "/tmp";
	if (ddp_fmt(dir, sizeof(dir), "%s/ddp-restart.XXXXXX", tmp) < 0 ||
	    !mkdtemp(dir) ||
	    ddp_fmt(report, sizeof(report), "%s/report", dir) < 0) {
		ddp_error("cannot make a directory for srun's report in %s: %s",
			  tmp, strerror(errno));
		return 1;
	}
	code = supervise((unsigned)max, (unsigned)requeue_max, restart_on,
			 argc - 2, argv + 2, report, &set);
	unlink(report);
	if (rmdir(dir) < 0)
		ddp_error("cannot remove %s: %s", dir, strerror(errno));
	return code;
}
