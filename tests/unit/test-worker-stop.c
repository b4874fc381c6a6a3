/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An agreed stop (ddp.h: ddp_should_stop) over TCP with forked ranks:
 * SIGUSR1 sent to one rank's process at a random moment makes every rank
 * stop after the same ddp_grad_sync_wait (20 tries of 20), each writes
 * its stop note on the pipe given as DDP_FAILURE_FD, which reads back;
 * the job's end time a few seconds ahead (DDP_END_TIME, or a newer one in
 * DDP_END_TIME_FILE) stops every rank before it, and not long before;
 * DDP_STOP_BEFORE=0 or unset installs no handler, a program's own handler
 * and SIG_IGN stay, and its handler's ddp_request_stop stops every rank;
 * a program that never asks ddp_should_stop is still ended by SIGTERM;
 * bad DDP_STOP_BEFORE and DDP_END_TIME are refused naming the variable;
 * the gradients with the flag in the last bucket are bitwise the serial
 * reference in every dtype, views included, with and without a stop.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>

#include "stop.h"
#include "tap.h"
#include "test-worker-ref.h"
#include "test-worker-util.h"

#define RANKS 3
#define TRIES 20
#define NGRAD 40000

/* A rank's training loop: one gradient, synchronised each step, until the
 * ranks agree to stop; then its step count and why on out, the note
 * written by ddp_grad_sync_destroy, exit DDP_EXIT_STOPPED. */
static int
train_until_stop(int rank, int size, int port, FILE *out, int max_steps)
{
	struct ddp_grad_sync *gs = NULL;
	struct ddp_comm *c = NULL;
	struct ddp_config cfg;
	static float param[NGRAD], grad[NGRAD];
	enum ddp_status st;
	struct timespec ts;
	int step, i, stopped = 0;

	tw_cfg(&cfg, rank, size, port, 30);
	if (ddp_comm_init(&cfg, &c) || ddp_grad_sync_create(c, NULL, &gs) ||
	    ddp_grad_sync_add(gs, param, grad, NGRAD, DDP_FLOAT32) != 0 ||
	    ddp_grad_sync_start(gs)) {
		fprintf(out, "E %s\n", ddp_last_error());
		return 1;
	}
	fprintf(out, "PID %ld\n", (long)getpid());
	for (step = 1; step <= max_steps; step++) {
		for (i = 0; i < NGRAD; i++)
			grad[i] = (float)((rank + step + i) % 5);
		st = ddp_grad_sync_ready(gs, 0);
		if (!st)
			st = ddp_grad_sync_wait(gs);
		if (st) {
			fprintf(out, "E step %d: %s\n", step, ddp_last_error());
			return 1;
		}
		/* Asked before the step is reported: a signal sent once it
		 * is asks for a stop (before, it would end the process). */
		stopped = ddp_should_stop(gs);
		/* The first steps, for test_one_signal to wait on; not
		 * every step: the report would outgrow struct job's. */
		if (step <= 64)
			fprintf(out, "STEP %d\n", step);
		if (stopped)
			break;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	fprintf(out, "STOP %d %s %.3f\n", step,
		ddp_should_stop_why(gs) ? ddp_should_stop_why(gs) : "-",
		(double)ts.tv_sec + (double)ts.tv_nsec / 1e9);
	ddp_grad_sync_destroy(gs);
	ddp_comm_destroy(c);
	return stopped ? DDP_EXIT_STOPPED : 2;
}

/* A job whose ranks the test watches as they run. */
struct job {
	pid_t pid[RANKS];
	int out[RANKS];	 /* each rank's report */
	int note[RANKS]; /* each rank's DDP_FAILURE_FD pipe */
	char text[RANKS][1 << 16];
	size_t len[RANKS];
	char notes[RANKS][512];
	int status[RANKS];
};

typedef int job_fn(int rank, int size, int port, FILE *out, void *arg);

/* Forks the ranks, each with its own DDP_FAILURE_FD pipe. */
static int
job_start(struct job *j, job_fn *fn, void *arg)
{
	int port = tw_free_port(), r, po[2], pn[2], fl;
	char fdv[32];
	FILE *f;

	memset(j, 0, sizeof(*j));
	fflush(stdout);
	for (r = 0; r < RANKS; r++) {
		if (pipe(po) < 0 || pipe(pn) < 0)
			return -1;
		j->pid[r] = fork();
		if (j->pid[r] < 0)
			return -1;
		if (j->pid[r] == 0) {
			close(po[0]);
			close(pn[0]);
			snprintf(fdv, sizeof(fdv), "%d", pn[1]);
			setenv("DDP_FAILURE_FD", fdv, 1);
			f = fdopen(po[1], "w");
			if (!f)
				_exit(99);
			setvbuf(f, NULL, _IOLBF, 0);
			r = fn(r, RANKS, port, f, arg);
			fflush(f);
			_exit(r);
		}
		close(po[1]);
		close(pn[1]);
		j->out[r] = po[0];
		j->note[r] = pn[0];
		fl = fcntl(pn[0], F_GETFL);
		fcntl(pn[0], F_SETFL, fl | O_NONBLOCK);
	}
	return 0;
}

/* Reads what the ranks wrote until rank `who` has printed `what` (NULL:
 * until every rank's output closed) or the deadline. 1 when seen. */
static int
job_watch(struct job *j, int who, const char *what, double deadline)
{
	struct pollfd pfd[RANKS];
	ssize_t got;
	int r, open_n;

	for (;;) {
		if (what && strstr(j->text[who], what))
			return 1;
		open_n = 0;
		for (r = 0; r < RANKS; r++) {
			pfd[r].fd = j->out[r];
			pfd[r].events = POLLIN;
			pfd[r].revents = 0;
			open_n += j->out[r] >= 0;
		}
		if (!open_n)
			return what == NULL;
		if (tw_now() >= deadline)
			return 0;
		if (poll(pfd, RANKS, 100) <= 0)
			continue;
		for (r = 0; r < RANKS; r++) {
			if (j->out[r] < 0 || !pfd[r].revents)
				continue;
			got = read(j->out[r], j->text[r] + j->len[r],
				   sizeof(j->text[r]) - 1 - j->len[r]);
			if (got > 0) {
				j->len[r] += (size_t)got;
				continue;
			}
			close(j->out[r]);
			j->out[r] = -1;
		}
	}
}

/* Waits for every rank's end (killing those past the deadline) and reads
 * the notes they left. */
static void
job_end(struct job *j, double deadline)
{
	ssize_t got;
	int r;

	job_watch(j, 0, NULL, deadline);
	for (r = 0; r < RANKS; r++) {
		if (j->out[r] >= 0) {
			kill(j->pid[r], SIGKILL);
			close(j->out[r]);
		}
		waitpid(j->pid[r], &j->status[r], 0);
		got = read(j->note[r], j->notes[r], sizeof(j->notes[r]) - 1);
		j->notes[r][got > 0 ? got : 0] = '\0';
		close(j->note[r]);
	}
}

/* "STOP step why wall" of a rank: its step, why and when; -1 without. */
static int
stop_of(const struct job *j, int r, char *why, size_t whylen, double *wall)
{
	const char *p = strstr(j->text[r], "STOP ");
	char w[32];
	int step;

	if (!p || sscanf(p, "STOP %d %31s %lf", &step, w, wall) != 3)
		return -1;
	snprintf(why, whylen, "%s", w);
	return step;
}

static void
diag_job(const struct job *j)
{
	int r;

	for (r = 0; r < RANKS; r++) {
		tap_diag("rank %d (status %#x): %s", r, j->status[r],
			 j->text[r]);
		tap_diag("rank %d note: %s", r, j->notes[r]);
	}
}

/*
 * Whether every rank stopped cleanly after the same step: exit
 * DDP_EXIT_STOPPED, "STOP" with one step, and a note that parses back
 * with its rank, that step and its why (`signalled`'s own, the others
 * "agreed" unless own_why is NULL: then any). The step in *step.
 */
static int
agreed(const struct job *j, int signalled, const char *own_why, int *step)
{
	struct ddp_stop_note n;
	char why[32];
	double wall;
	int r, s, first = -1;

	for (r = 0; r < RANKS; r++) {
		s = stop_of(j, r, why, sizeof(why), &wall);
		if (s < 0 || !WIFEXITED(j->status[r]) ||
		    WEXITSTATUS(j->status[r]) != DDP_EXIT_STOPPED)
			return 0;
		if (first < 0)
			first = s;
		if (s != first)
			return 0;
		if (own_why &&
		    strcmp(why, r == signalled ? own_why : "agreed") != 0)
			return 0;
		if (ddp_stop_note_parse(j->notes[r], &n) < 0 || n.rank != r ||
		    n.step != s || strcmp(ddp_stop_why_name(n.why), why) != 0 ||
		    n.ckpt_ms < 0 || n.ckpt_ms > 60000)
			return 0;
	}
	*step = first;
	return 1;
}

static int
signal_rank(int rank, int size, int port, FILE *out, void *arg)
{
	setenv(DDP_STOP_BEFORE_ENV, "auto", 1);
	return train_until_stop(rank, size, port, out, 100000);
}

/* SIGUSR1 to one rank, after a random number of its steps and a random
 * part of a step more: every rank stops after the same step. */
static void
test_one_signal(void)
{
	struct job j;
	char seen[32];
	int t, ok = 0, step, target, who, stops[TRIES];
	unsigned seed = (unsigned)getpid();

	for (t = 0; t < TRIES; t++) {
		stops[t] = -1;
		who = rand_r(&seed) % RANKS;
		target = 1 + rand_r(&seed) % 30;
		if (job_start(&j, signal_rank, NULL) < 0) {
			tap_ok(0, "fork");
			return;
		}
		snprintf(seen, sizeof(seen), "STEP %d\n", target);
		if (job_watch(&j, who, seen, tw_now() + 60)) {
			/* Anywhere in the step that follows. */
			usleep((useconds_t)(rand_r(&seed) % 400));
			kill(j.pid[who], SIGUSR1);
		}
		job_end(&j, tw_now() + 60);
		if (agreed(&j, who, "sigusr1", &step) && step >= target) {
			ok++;
			stops[t] = step;
		} else {
			tap_diag("try %d: SIGUSR1 to rank %d after its step %d",
				 t, who, target);
			diag_job(&j);
		}
	}
	tap_ok(ok == TRIES,
	       "SIGUSR1 to one rank of %d: every rank stopped after the same "
	       "step, exit %d, each note read back: %d of %d",
	       RANKS, DDP_EXIT_STOPPED, ok, TRIES);
	for (t = 0; t < TRIES; t += 5)
		tap_diag("stopped after steps %d %d %d %d %d", stops[t],
			 stops[t + 1], stops[t + 2], stops[t + 3],
			 stops[t + 4]);
}

struct end_case {
	const char *env_end;  /* DDP_END_TIME, or NULL */
	const char *file;     /* DDP_END_TIME_FILE, or NULL */
	const char *file_end; /* what the file holds, or NULL: no file */
	double end;	      /* the end time that counts */
};

static int
end_rank(int rank, int size, int port, FILE *out, void *arg)
{
	const struct end_case *e = arg;

	setenv(DDP_STOP_BEFORE_ENV, "auto", 1);
	if (e->env_end)
		setenv(DDP_END_TIME_ENV, e->env_end, 1);
	if (e->file)
		setenv(DDP_END_TIME_FILE_ENV, e->file, 1);
	return train_until_stop(rank, size, port, out, 10000000);
}

/* The end time 19 s ahead: the margin is 15 s and two steps (and no
 * checkpoint yet), so the ranks stop about 4 s in, before the end; not
 * much earlier either (steps up to 1.25 s on a loaded host). */
static void
test_end_time(const char *what, int use_file)
{
	char env_end[32], file_end[32], path[] = "/tmp/ddp-stop-end.XXXXXX";
	struct end_case e = {0};
	struct job j;
	char why[32];
	double wall, first = 0, last = 0;
	int step, r, fd, ok = 1;

	e.end = (double)time(NULL) + 19;
	snprintf(env_end, sizeof(env_end), "%.0f", e.end);
	e.env_end = env_end;
	fd = mkstemp(path);
	if (fd < 0) {
		tap_ok(0, "mkstemp: %s", strerror(errno));
		return;
	}
	if (use_file) {
		/* The file's newer end time counts, not the variable's. */
		snprintf(env_end, sizeof(env_end), "%.0f", e.end + 3600);
		snprintf(file_end, sizeof(file_end), "%.0f\n", e.end);
		if (write(fd, file_end, strlen(file_end)) < 0)
			ok = 0;
	} else {
		/* A file that is missing keeps the variable's value. */
		unlink(path);
	}
	close(fd);
	e.file = path;
	if (job_start(&j, end_rank, &e) < 0) {
		tap_ok(0, "fork");
		return;
	}
	job_end(&j, tw_now() + 60);
	unlink(path);
	if (!agreed(&j, -1, NULL, &step))
		ok = 0;
	for (r = 0; r < RANKS && ok; r++) {
		stop_of(&j, r, why, sizeof(why), &wall);
		if (strcmp(why, "time-limit") && strcmp(why, "agreed"))
			ok = 0;
		if (!r || wall < first)
			first = wall;
		if (!r || wall > last)
			last = wall;
	}
	if (!ok)
		diag_job(&j);
	tap_ok(ok && last < e.end && first >= e.end - 17.5,
	       "%s: every rank stopped for the time after the same step, "
	       "%.2f to %.2f s before the end time",
	       what, e.end - last, e.end - first);
}

/* The dispositions of the four stop signals after ddp_grad_sync_create
 * with DDP_STOP_BEFORE as given ("-": unset), and its errors. */
static int
handler_rank(int rank, int size, int port, FILE *out, void *arg)
{
	static const int sigs[] = {SIGTERM, SIGUSR1, SIGUSR2, SIGHUP};
	const char *before = arg;
	struct ddp_grad_sync *gs = NULL;
	struct ddp_comm *c = NULL;
	struct ddp_config cfg;
	struct sigaction sa;
	enum ddp_status st;
	size_t i;

	if (strcmp(before, "-"))
		setenv(DDP_STOP_BEFORE_ENV, before, 1);
	tw_cfg(&cfg, rank, size, port, 30);
	if (ddp_comm_init(&cfg, &c)) {
		fprintf(out, "E %s\n", ddp_last_error());
		return 1;
	}
	st = ddp_grad_sync_create(c, NULL, &gs);
	if (st) {
		fprintf(out, "CREATE %d %s\n", (int)st, ddp_last_error());
	} else {
		fprintf(out, "CREATE 0 -\n");
		for (i = 0; i < 4; i++) {
			sigaction(sigs[i], NULL, &sa);
			fprintf(out, "SIG %d %s\n", sigs[i],
				sa.sa_handler == SIG_DFL ? "default" : "set");
		}
	}
	ddp_grad_sync_destroy(gs);
	ddp_comm_destroy(c);
	return 0;
}

static int
run_handlers(const char *before, struct tw_rank *rk)
{
	return tw_run_job(2, handler_rank, (void *)before, 60, rk);
}

static void
test_handlers(void)
{
	struct tw_rank rk[2];
	int r, ok;

	ok = run_handlers("0", rk) == 0;
	for (r = 0; r < 2 && ok; r++)
		ok = strstr(rk[r].out, "CREATE 0") && !strstr(rk[r].out, "set");
	tap_ok(ok, "DDP_STOP_BEFORE=0: no handler installed");
	if (!ok)
		tw_diag_all(2, rk);
	tw_free_job(2, rk);
	ok = run_handlers("-", rk) == 0;
	for (r = 0; r < 2 && ok; r++)
		ok = strstr(rk[r].out, "CREATE 0") && !strstr(rk[r].out, "set");
	tap_ok(ok, "DDP_STOP_BEFORE unset: no handler installed");
	tw_free_job(2, rk);
	ok = run_handlers("auto", rk) == 0;
	for (r = 0; r < 2 && ok; r++)
		ok = strstr(rk[r].out, "CREATE 0") &&
		     !strstr(rk[r].out, "default");
	tap_ok(ok, "DDP_STOP_BEFORE=auto: SIGTERM, SIGUSR1, SIGUSR2 and SIGHUP "
		   "handled");
	tw_free_job(2, rk);
	ok = run_handlers("soon", rk) == 0;
	for (r = 0; r < 2 && ok; r++)
		ok = strstr(rk[r].out,
			    "CREATE 2 DDP_STOP_BEFORE: invalid value "
			    "'soon' (use auto") != NULL;
	tap_ok(ok,
	       "DDP_STOP_BEFORE=soon: DDP_ERR_ENV naming it and what works");
	if (!ok)
		tw_diag_all(2, rk);
	tw_free_job(2, rk);
}

static int
bad_end_rank(int rank, int size, int port, FILE *out, void *arg)
{
	setenv(DDP_END_TIME_ENV, "tomorrow", 1);
	return handler_rank(rank, size, port, out, (void *)"auto");
}

static void
test_bad_end(void)
{
	struct tw_rank rk[2];
	int r, ok;

	ok = tw_run_job(2, bad_end_rank, NULL, 60, rk) == 0;
	for (r = 0; r < 2 && ok; r++)
		ok = strstr(rk[r].out, "CREATE 2 DDP_END_TIME='tomorrow': use "
				       "the job's end time in whole Unix "
				       "seconds") != NULL;
	tap_ok(ok, "DDP_END_TIME=tomorrow: DDP_ERR_ENV naming it and what "
		   "works");
	if (!ok)
		tw_diag_all(2, rk);
	tw_free_job(2, rk);
}

/* The program's own SIGTERM handler, which asks for the stop itself. */
static volatile sig_atomic_t own_handled;

static void
own_handler(int sig)
{
	(void)sig;
	own_handled = 1;
	ddp_request_stop();
}

static int
own_handler_rank(int rank, int size, int port, FILE *out, void *arg)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = own_handler;
	sigaction(SIGTERM, &sa, NULL);
	setenv(DDP_STOP_BEFORE_ENV, "auto", 1);
	return train_until_stop(rank, size, port, out, 100000);
}

static void
test_own_handler(void)
{
	struct job j;
	int step, ok;

	if (job_start(&j, own_handler_rank, NULL) < 0) {
		tap_ok(0, "fork");
		return;
	}
	ok = job_watch(&j, 1, "STEP 3\n", tw_now() + 60);
	kill(j.pid[1], SIGTERM);
	job_end(&j, tw_now() + 60);
	ok = ok && agreed(&j, 1, "request", &step);
	if (!ok)
		diag_job(&j);
	tap_ok(ok,
	       "a program's own SIGTERM handler stays; its ddp_request_stop "
	       "stops every rank after the same step (rank 1 'request', the "
	       "others 'agreed')");
}

static int
ignored_rank(int rank, int size, int port, FILE *out, void *arg)
{
	struct sigaction sa;
	int st;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = own_handler;
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGHUP, SIG_IGN);
	st = handler_rank(rank, size, port, out, (void *)"auto");
	sigaction(SIGTERM, NULL, &sa);
	fprintf(out, "TERM %s\n", sa.sa_handler == own_handler ? "own" : "?");
	sigaction(SIGHUP, NULL, &sa);
	fprintf(out, "HUP %s\n", sa.sa_handler == SIG_IGN ? "ignored" : "?");
	return st;
}

static void
test_kept_dispositions(void)
{
	struct tw_rank rk[2];
	char want[32];
	int r, ok;

	ok = tw_run_job(2, ignored_rank, NULL, 60, rk) == 0;
	snprintf(want, sizeof(want), "SIG %d set", SIGUSR1);
	for (r = 0; r < 2 && ok; r++)
		ok = strstr(rk[r].out, "TERM own") &&
		     strstr(rk[r].out, "HUP ignored") &&
		     strstr(rk[r].out, want);
	tap_ok(ok, "a program's own SIGTERM handler and an ignored SIGHUP "
		   "stay; SIGUSR1 is handled");
	if (!ok)
		tw_diag_all(2, rk);
	tw_free_job(2, rk);
}

/* A program that never asks ddp_should_stop: its steps, then SIGTERM. */
static int
never_asks_rank(int rank, int size, int port, FILE *out, void *arg)
{
	struct ddp_grad_sync *gs = NULL;
	struct ddp_comm *c = NULL;
	struct ddp_config cfg;
	static float param[16], grad[16];
	int step;

	setenv(DDP_STOP_BEFORE_ENV, "auto", 1);
	tw_cfg(&cfg, rank, size, port, 30);
	if (ddp_comm_init(&cfg, &c) || ddp_grad_sync_create(c, NULL, &gs) ||
	    ddp_grad_sync_add(gs, param, grad, 16, DDP_FLOAT32) != 0 ||
	    ddp_grad_sync_start(gs))
		return 1;
	for (step = 1; step <= 1000000; step++) {
		if (ddp_grad_sync_ready(gs, 0) || ddp_grad_sync_wait(gs))
			return 1;
		if (step == 3)
			fprintf(out, "STEP 3\n");
	}
	return 0;
}

static void
test_never_asks(void)
{
	struct job j;
	int ok;

	if (job_start(&j, never_asks_rank, NULL) < 0) {
		tap_ok(0, "fork");
		return;
	}
	ok = job_watch(&j, 0, "STEP 3\n", tw_now() + 60);
	kill(j.pid[0], SIGTERM);
	job_end(&j, tw_now() + 60);
	ok = ok && WIFSIGNALED(j.status[0]) && WTERMSIG(j.status[0]) == SIGTERM;
	if (!ok)
		diag_job(&j);
	tap_ok(ok, "a program that never asks ddp_should_stop is ended by "
		   "SIGTERM as without libddp's handler");
}

/* Gradients with the flag: each dtype in its own sync (the flag then in
 * that dtype), a copied gradient and a view, three steps, the second
 * with a stop asked by rank 1: bitwise the serial reference; the stop
 * stays agreed, and the next sync starts without it (served). */
#define GCOUNT 3
static const size_t gcounts[GCOUNT] = {7, 1000, 4097};

static int
grad_rank(int rank, int size, int port, FILE *out, void *arg)
{
	static const enum ddp_dtype types[] = {DDP_FLOAT32, DDP_FLOAT64,
					       DDP_FLOAT16, DDP_BFLOAT16};
	struct ddp_grad_sync_opts o = {.first_bucket_bytes = 2048};
	struct ddp_config cfg;
	struct ddp_comm *c = NULL;
	size_t t, i, k;
	int step, bad, salt;

	tw_cfg(&cfg, rank, size, port, 30);
	if (ddp_comm_init(&cfg, &c)) {
		fprintf(out, "E %s\n", ddp_last_error());
		return 1;
	}
	for (t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
		struct ddp_grad_sync *gs = NULL;
		void *param[GCOUNT], *own[GCOUNT], *g[GCOUNT];

		if (ddp_grad_sync_create(c, &o, &gs)) {
			fprintf(out, "E %s\n", ddp_last_error());
			return 1;
		}
		for (k = 0; k < GCOUNT; k++) {
			param[k] = calloc(gcounts[k], 8);
			/* The last bucket's gradient is a view: the flag
			 * sits right after it. */
			own[k] = k == 0 ? NULL : calloc(gcounts[k], 8);
			ddp_grad_sync_add(gs, param[k], own[k], gcounts[k],
					  types[t]);
		}
		if (ddp_grad_sync_start(gs)) {
			fprintf(out, "E start %s\n", ddp_last_error());
			return 1;
		}
		for (step = 1; step <= 3; step++) {
			salt = step * 3 + (int)t;
			for (k = 0; k < GCOUNT; k++) {
				g[k] = ddp_grad_sync_grad(gs, (int)k);
				for (i = 0; i < gcounts[k]; i++)
					store(g[k], i, types[t],
					      input(rank, i + k, salt));
			}
			if (step == 2 && rank == 1)
				ddp_request_stop();
			for (k = GCOUNT; k-- > 0;)
				ddp_grad_sync_ready(gs, (int)k);
			if (ddp_grad_sync_wait(gs)) {
				fprintf(out, "E wait %s\n", ddp_last_error());
				return 1;
			}
			bad = 0;
			for (k = 0; k < GCOUNT; k++)
				for (i = 0; i < gcounts[k]; i++)
					bad += load(g[k], i, types[t]) !=
					       reference(size, i + k, salt,
							 types[t], DDP_AVG);
			fprintf(out, "T%zu S%d bad=%d stop=%d\n", t, step, bad,
				ddp_should_stop(gs));
		}
		ddp_grad_sync_destroy(gs);
		for (k = 0; k < GCOUNT; k++) {
			free(param[k]);
			free(own[k]);
		}
	}
	ddp_comm_destroy(c);
	return 0;
}

static void
test_gradients(void)
{
	static const char *const names[] = {"float32", "float64", "float16",
					    "bfloat16"};
	struct tw_rank rk[RANKS];
	char want[64];
	int r, t, ok;

	if (tw_run_job(RANKS, grad_rank, NULL, 120, rk) < 0) {
		tap_ok(0, "fork");
		return;
	}
	for (t = 0; t < 4; t++) {
		ok = 1;
		for (r = 0; r < RANKS; r++) {
			snprintf(want, sizeof(want), "T%d S1 bad=0 stop=0\n",
				 t);
			ok = ok && strstr(rk[r].out, want);
			snprintf(want, sizeof(want), "T%d S2 bad=0 stop=1\n",
				 t);
			ok = ok && strstr(rk[r].out, want);
			snprintf(want, sizeof(want), "T%d S3 bad=0 stop=1\n",
				 t);
			ok = ok && strstr(rk[r].out, want);
		}
		tap_ok(ok,
		       "%s: the averaged gradients (a view beside the flag) "
		       "are bitwise the reference, with and without a stop; "
		       "every rank stops after step 2, and still after step 3",
		       names[t]);
		if (!ok)
			tw_diag_all(RANKS, rk);
	}
	tw_free_job(RANKS, rk);
}

int
main(void)
{
	/* The test's own children must not be stopped by its handlers:
	 * the parent never sets DDP_STOP_BEFORE. */
	unsetenv(DDP_STOP_BEFORE_ENV);
	unsetenv(DDP_END_TIME_ENV);
	unsetenv(DDP_END_TIME_FILE_ENV);
	unsetenv("DDP_FAILURE_FD");
	test_gradients();
	test_handlers();
	test_bad_end();
	test_kept_dispositions();
	test_own_handler();
	test_never_asks();
	test_one_signal();
	test_end_time("DDP_END_TIME 19 s ahead, its file missing", 0);
	test_end_time("DDP_END_TIME_FILE 19 s ahead, DDP_END_TIME an hour", 1);
	return tap_done();
}
