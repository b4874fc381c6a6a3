/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A late rank named while training runs (straggler.h): the tally and
 * the line as pure functions, the environment's checks, then real jobs
 * of 3 ranks over loopback running the gradient sync. A rank slowed by a
 * real cause (a competing busy process pinned on its CPU, which it gets
 * a smaller share of) is named by rank 0 within 200 steps, on stderr
 * and in $DDP_SHARED_DIR/stragglers.jsonl (0600); a run whose ranks all
 * do the same compute each step (2 ms of it here), on one CPU they share
 * alike, names nobody over 1,000 steps. What is asserted is
 * who is named, never how late: the host's speed is not the test's.
 */
#include <errno.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "straggler.h"
#include "tap.h"
#include "test-worker-util.h"

#define NPARAM 4
#define PCOUNT 1024

struct job {
	int steps;
	int slow;     /* the slowed rank, or -1 */
	long work;    /* loop iterations of one step's compute */
	int cpu_slow; /* the CPU of the slowed rank and its rival */
	int cpu_rest; /* the others' CPU, or -1 */
};

static volatile double sink;

static void
compute(long n)
{
	double x = 1.0;
	long i;

	for (i = 0; i < n; i++)
		x = x * 1.0000001 + 1e-9;
	sink = x;
}

/* CPU seconds this thread has run: what a loaded host does not change. */
static double
cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Iterations of compute() that take about ms milliseconds of CPU here. */
static long
calibrate(double ms)
{
	long n = 100000;
	double t;

	for (;;) {
		t = cpu_now();
		compute(n);
		t = cpu_now() - t;
		if (t > 0.02)
			return (long)((double)n * ms / (t * 1000.0)) + 1;
		n *= 4;
	}
}

static void
pin(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	(void)sched_setaffinity(0, sizeof(set), &set);
}

/* A busy process on this rank's CPU, killed when the rank ends. */
static pid_t
rival(int cpu)
{
	pid_t pid = fork();

	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		pin(cpu);
		for (;;)
			compute(1000000);
	}
	return pid;
}

static FILE *log_out;

static void
to_out(int level, const char *msg, void *arg)
{
	(void)arg;
	if (level <= 1)
		fprintf(log_out, "LOG %s\n", msg);
	else if (strstr(msg, "straggler report"))
		fprintf(log_out, "REPORT %s\n", msg);
}

static int
train_rank(int rank, int size, int port, FILE *out, void *arg)
{
	const struct job *j = arg;
	struct ddp_grad_sync_opts o = {.first_bucket_bytes = 4096,
				       .bucket_cap_bytes = 8192};
	static float param[NPARAM][PCOUNT], grad[NPARAM][PCOUNT];
	struct ddp_grad_sync *gs = NULL;
	struct ddp_comm *c = NULL;
	struct ddp_config cfg;
	enum ddp_status st;
	pid_t hog = -1, hog2 = -1;
	int s, k;

	log_out = out;
	ddp_set_log_fn(to_out, NULL);
	if (rank == j->slow) {
		pin(j->cpu_slow);
		hog = rival(j->cpu_slow);
		hog2 = rival(j->cpu_slow);
		/* The rivals outrank it on their CPU, as noisy neighbours
		 * or a lower cgroup weight would. */
		(void)setpriority(PRIO_PROCESS, 0, 10);
	} else {
		pin(j->cpu_rest);
	}
	tw_cfg(&cfg, rank, size, port, 30);
	st = ddp_comm_init(&cfg, &c);
	if (!st)
		st = ddp_grad_sync_create(c, &o, &gs);
	for (k = 0; k < NPARAM && !st; k++)
		if (ddp_grad_sync_add(gs, param[k], grad[k], PCOUNT,
				      DDP_FLOAT32) < 0)
			st = DDP_ERR_INVALID;
	if (!st)
		st = ddp_grad_sync_start(gs);
	for (s = 0; s < j->steps && !st; s++) {
		compute(j->work);
		for (k = NPARAM - 1; k >= 0 && !st; k--)
			st = ddp_grad_sync_ready(gs, k);
		if (!st)
			st = ddp_grad_sync_wait(gs);
	}
	fprintf(out, "STATUS %d %s\n", (int)st, st ? ddp_last_error() : "");
	ddp_grad_sync_destroy(gs);
	ddp_comm_destroy(c);
	if (hog > 0 && kill(hog, SIGKILL) == 0)
		waitpid(hog, NULL, 0);
	if (hog2 > 0 && kill(hog2, SIGKILL) == 0)
		waitpid(hog2, NULL, 0);
	return st ? 3 : 0;
}

static void
test_pure(void)
{
	const double longest[5] = {0.100, 0.100, 0.050, 0.200, 0.010};
	const double mine[5] = {0.000, 0.090, 0.000, 0.000, 0.010};
	char line[256];
	double mean;
	int late;

	wk_late_tally(mine, longest, 5, 0.020, &late, &mean);
	tap_ok(late == 3 && mean > 0.1166 && mean < 0.1167,
	       "tally: late in 3 of 5 steps by more than 20 ms, 117 ms on "
	       "average (%d, %.4f)",
	       late, mean);
	wk_late_line(line, sizeof(line), 13, "node07", 3, 0.180, 92, 100);
	TAP_STREQ(line,
		  "rank 13 (node07, GPU 3) late 180 ms in 92 of 100 steps",
		  "the line names rank, host and GPU");
	wk_late_line(line, sizeof(line), 2, "node01", -1, 0.0514, 51, 100);
	TAP_STREQ(line, "rank 2 (node01) late 51 ms in 51 of 100 steps",
		  "without a GPU number the line leaves it out");
}

static void
env_refused(const char *name, const char *value, const char *needle)
{
	struct ddp_config cfg;
	struct ddp_comm *c = NULL;
	struct ddp_grad_sync *gs = NULL;
	enum ddp_status st;

	tw_cfg(&cfg, 0, 1, tw_free_port(), 5);
	setenv(name, value, 1);
	st = ddp_comm_init(&cfg, &c);
	if (!st)
		st = ddp_grad_sync_create(c, NULL, &gs);
	if (!tap_ok(st == DDP_ERR_ENV && strstr(ddp_last_error(), needle),
		    "%s=%s refused, naming it and the range", name, value))
		tap_diag("status %d: %s", (int)st, ddp_last_error());
	ddp_grad_sync_destroy(gs);
	ddp_comm_destroy(c);
	unsetenv(name);
}

/* The straggler lines in a rank's output naming rank r (-1: any). */
static int
named(const struct tw_rank *rk, int r)
{
	const char *p = rk->out, *nl;
	int n = 0, who;

	for (; p && *p; p = nl ? nl + 1 : NULL) {
		nl = strchr(p, '\n');
		if (sscanf(p, "LOG rank %d (", &who) == 1 &&
		    strstr(p, " late ") && strstr(p, " steps") &&
		    (!nl || strstr(p, " steps") < nl) && (r < 0 || who == r))
			n++;
	}
	return n;
}

/* Two CPUs this process may use: the slowed rank's and the others'. */
static void
choose_cpus(struct job *j)
{
	cpu_set_t set;
	int i, first = -1, last = -1;

	j->cpu_slow = j->cpu_rest = -1;
	if (sched_getaffinity(0, sizeof(set), &set) < 0)
		return;
	for (i = 0; i < CPU_SETSIZE; i++) {
		if (!CPU_ISSET(i, &set))
			continue;
		if (first < 0)
			first = i;
		last = i;
	}
	j->cpu_slow = last;
	j->cpu_rest = first != last ? first : -1;
}

static void
test_slowed(const char *dir)
{
	struct tw_rank rk[3];
	struct job j = {.steps = 200, .slow = 1};
	char path[4096], buf[8192] = "", *nl;
	struct stat sb;
	FILE *f;
	int ok;

	choose_cpus(&j);
	j.work = calibrate(2.0);
	setenv("DDP_SHARED_DIR", dir, 1);
	unsetenv("DDP_STRAGGLER_EVERY");
	/* On this host's scale: 2.5 steps' compute unloaded. Two ranks
	 * sharing a CPU are less than one apart; the slowed rank gets a
	 * twentieth of its CPU. */
	setenv("DDP_STRAGGLER_MS", "5", 1);
	tw_run_job(3, train_rank, &j, 240, rk);
	ok = tw_exit(&rk[0]) == 0 && tw_exit(&rk[1]) == 0 &&
	     tw_exit(&rk[2]) == 0 && named(&rk[0], 1) >= 1 &&
	     named(&rk[0], 0) == 0 && named(&rk[0], 2) == 0 &&
	     named(&rk[1], -1) == 0 && named(&rk[2], -1) == 0;
	if (!tap_ok(ok,
		    "a rank sharing its CPU with a busy process is named by "
		    "rank 0 within 200 steps (%d of 2 reports), the others "
		    "never",
		    named(&rk[0], 1)))
		tw_diag_all(3, rk);
	else
		tap_diag(
			"%.*s",
			(int)strcspn(strstr(rk[0].out, "LOG rank 1") + 4, "\n"),
			strstr(rk[0].out, "LOG rank 1") + 4);
	snprintf(path, sizeof(path), "%s/stragglers.jsonl", dir);
	f = fopen(path, "r");
	if (f) {
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);

		buf[n] = '\0';
		fclose(f);
	}
	ok = stat(path, &sb) == 0 && (sb.st_mode & 07777) == 0600 &&
	     sb.st_uid == getuid() && strstr(buf, "\"rank\":1,") &&
	     strstr(buf, "\"late_steps\":") && strstr(buf, "\"pid\":") &&
	     !strstr(buf, "\"rank\":0,") && !strstr(buf, "\"rank\":2,");
	nl = strchr(buf, '\n');
	if (!tap_ok(ok, "the same as JSON lines in the shared directory, 0600, "
			"the user's"))
		tap_diag("%s: %s", path, buf);
	else
		tap_diag("%.*s", nl ? (int)(nl - buf) : 0, buf);
	unlink(path);
	unsetenv("DDP_STRAGGLER_MS");
	tw_free_job(3, rk);
}

static void
test_quiet(const char *dir)
{
	struct tw_rank rk[3];
	struct job j = {.steps = 1000, .slow = -1};
	char path[4096];
	int ok;

	const char *p;
	int reports = 0;

	/* The same arithmetic every step on every rank, the ranks on one
	 * CPU (the slowed test's others'), so that each step's waits are
	 * real ones, of ranks taking turns at a CPU. */
	choose_cpus(&j);
	j.work = calibrate(2.0);
	setenv("DDP_SHARED_DIR", dir, 1);
	/* Rank 0 says each report at debug level: all 10 must happen. */
	setenv("DDP_DEBUG", "1", 1);
	tw_run_job(3, train_rank, &j, 240, rk);
	unsetenv("DDP_DEBUG");
	for (p = rk[0].out; (p = strstr(p, "REPORT ")) != NULL; p++)
		reports++;
	snprintf(path, sizeof(path), "%s/stragglers.jsonl", dir);
	ok = tw_exit(&rk[0]) == 0 && tw_exit(&rk[1]) == 0 &&
	     tw_exit(&rk[2]) == 0 && named(&rk[0], -1) == 0 && reports == 10 &&
	     access(path, F_OK) != 0;
	if (!tap_ok(ok, "1,000 steps of the same compute on every rank (2 ms "
			"a step, one CPU) name nobody (default "
			"DDP_STRAGGLER_MS, 10 reports)"))
		tw_diag_all(3, rk);
	tw_free_job(3, rk);
}

int
main(void)
{
	char dir[] = "/tmp/ddp-straggler-XXXXXX";

	signal(SIGPIPE, SIG_IGN);
	test_pure();
	env_refused("DDP_STRAGGLER_EVERY", "often", "DDP_STRAGGLER_EVERY");
	env_refused("DDP_STRAGGLER_EVERY", "-1", "[0, 1000000]");
	env_refused("DDP_STRAGGLER_MS", "0", "DDP_STRAGGLER_MS='0'");
	if (!mkdtemp(dir))
		return tap_ok(0, "mkdtemp: %s", strerror(errno)), tap_done();
	test_slowed(dir);
	test_quiet(dir);
	rmdir(dir);
	return tap_done();
}
