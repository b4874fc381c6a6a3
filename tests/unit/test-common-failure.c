/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The first failure of a step: the report line both ways, forged and
 * broken reports, the earliest of several, the blame rule, srun's line and
 * the restart record file; a task's naming of the rank at fault, in the
 * report and in the cause of a step's failure, following the chain of
 * waiters a hang survey names; a clean stop's report, srun's stop line
 * and the rule that a failure wins over every stop.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "failure.h"
#include "tap.h"

static const char nonce[] = "00112233445566778899aabbccddeeff";

static struct ddp_failure
killed(long rank, const char *node, int sig, long long ms)
{
	struct ddp_failure f = {
		.rank = rank, .signal = sig, .time_ms = ms, .nodes = 4};

	snprintf(f.node, sizeof(f.node), "%s", node);
	snprintf(f.step_nodes, sizeof(f.step_nodes), "node[1-4]");
	return f;
}

static void
test_wait_status(void)
{
	struct ddp_failure f = {0};

	tap_ok(ddp_failure_from_wait_status(0, &f) == 0,
	       "exit 0 is no failure");
	tap_ok(ddp_failure_from_wait_status(1 << 8, &f) == 1 && f.status == 1 &&
		       f.signal == 0,
	       "exit 1 is a failure with its status");
	tap_ok(ddp_failure_from_wait_status(SIGKILL, &f) == 1 &&
		       f.signal == SIGKILL && f.status == 0,
	       "SIGKILL is a failure with its signal");
}

static void
test_nonce(void)
{
	char a[DDP_FAILURE_NONCE_HEX + 1], b[DDP_FAILURE_NONCE_HEX + 1];

	tap_ok(ddp_failure_nonce(a, sizeof(a)) == 0 &&
		       ddp_failure_nonce(b, sizeof(b)) == 0 &&
		       strlen(a) == DDP_FAILURE_NONCE_HEX && strcmp(a, b) != 0,
	       "two nonces of 32 hex digits differ");
	tap_ok(ddp_failure_nonce(a, DDP_FAILURE_NONCE_HEX) == -1,
	       "a nonce needs room for its NUL");
}

static void
test_report(void)
{
	struct ddp_failure f = killed(2, "node3", SIGKILL, 1764240000123LL), g;
	char line[DDP_FAILURE_LINE_MAX], err[128];

	tap_ok(ddp_failure_format_report(&f, nonce, line, sizeof(line)) == 0,
	       "a report is written");
	TAP_STREQ(line,
		  "00112233445566778899aabbccddeeff 2 node3 signal:9 "
		  "1764240000.123 4 node[1-4]\n",
		  "the report line");
	memset(&g, 0, sizeof(g));
	tap_ok(ddp_failure_parse_report(line, nonce, &g, err, sizeof(err)) ==
			       0 &&
		       g.rank == 2 && !strcmp(g.node, "node3") &&
		       g.signal == 9 && g.time_ms == 1764240000123LL &&
		       g.nodes == 4 && !strcmp(g.step_nodes, "node[1-4]"),
	       "and read back");
	tap_ok(ddp_failure_parse_report(line,
					"ffffffffffffffffffffffffffffffff", &g,
					err, sizeof(err)) == -2,
	       "another nonce is a forgery (-2)");
	tap_ok(ddp_failure_parse_report("00112233445566778899aabbccddeeff 5 "
					"node2 exit:1 1764240000.010 4 "
					"node[1-4]",
					nonce, &g, err, sizeof(err)) == 0 &&
		       g.status == 1 && g.signal == 0 &&
		       g.time_ms == 1764240000010LL,
	       "an exit status, no newline");
	f.kernel = DDP_KERNEL_OOM;
	tap_ok(ddp_failure_format_report(&f, nonce, line, sizeof(line)) == 0 &&
		       strstr(line, " node3 signal:9:oom 1764240000.123 ") &&
		       ddp_failure_parse_report(line, nonce, &g, err,
						sizeof(err)) == 0 &&
		       g.signal == SIGKILL && g.kernel == DDP_KERNEL_OOM,
	       "the kernel's OOM kill rides on HOW: %s", line);
	f.signal = SIGBUS;
	f.kernel = DDP_KERNEL_MEMORY_ERROR;
	tap_ok(ddp_failure_format_report(&f, nonce, line, sizeof(line)) == 0 &&
		       strstr(line, " signal:7:memory-error ") &&
		       ddp_failure_parse_report(line, nonce, &g, err,
						sizeof(err)) == 0 &&
		       g.kernel == DDP_KERNEL_MEMORY_ERROR,
	       "and a memory error under SIGBUS: %s", line);
	f.signal = SIGSEGV;
	tap_ok(ddp_failure_format_report(&f, nonce, line, sizeof(line)) < 0,
	       "a memory error under another signal is not written");
	tap_ok(ddp_failure_parse_report("00112233445566778899aabbccddeeff 2 "
					"node3 signal:11:memory-error 1.000 "
					"4 node[1-4]",
					nonce, &g, err, sizeof(err)) == -1 &&
		       ddp_failure_parse_report(
			       "00112233445566778899aabbccddeeff 2 node3 "
			       "signal:9:oops 1.000 4 node[1-4]",
			       nonce, &g, err, sizeof(err)) == -1 &&
		       ddp_failure_parse_report(
			       "00112233445566778899aabbccddeeff 2 node3 "
			       "exit:1:oom 1.000 4 node[1-4]",
			       nonce, &g, err, sizeof(err)) == -1,
	       "a kernel word the signal does not explain, an unknown one, or "
	       "one on an exit is refused");
	f.signal = SIGKILL;
	f.kernel = DDP_KERNEL_NONE;
	f.node[0] = '\0';
	snprintf(f.node, sizeof(f.node), "node 3");
	tap_ok(ddp_failure_format_report(&f, nonce, line, sizeof(line)) == -1,
	       "a node name with a space is refused");
	f = killed(2, "node3", SIGKILL, 1);
	tap_ok(ddp_failure_format_report(&f, "short", line, sizeof(line)) == -1,
	       "a nonce of the wrong form is refused");
}

static void
test_bad_reports(void)
{
	static const char *const bad[] = {
		"",
		"garbage",
		"00112233445566778899aabbccddeeff",
		"00112233445566778899aabbccddeeff 2 node3 signal:9 1.000 4",
		"00112233445566778899aabbccddeeff -2 node3 signal:9 1.000 4 n1",
		"00112233445566778899aabbccddeeff 2 node;3 signal:9 1.000 4 n1",
		"00112233445566778899aabbccddeeff 2 node3 signal:99 1.000 4 n1",
		"00112233445566778899aabbccddeeff 2 node3 exit:0 1.000 4 n1",
		"00112233445566778899aabbccddeeff 2 node3 exit:+1 1.000 4 n1",
		"00112233445566778899aabbccddeeff 2 node3 kill:9 1.000 4 n1",
		"00112233445566778899aabbccddeeff 2 node3 exit:1 1.00 4 n1",
		"00112233445566778899aabbccddeeff 2 node3 exit:1 -1.000 4 n1",
		"00112233445566778899aabbccddeeff 2 node3 exit:1 1.000 0 n1",
		"00112233445566778899aabbccddeeff 2 node3 exit:1 1.000 4 n1 x",
		"00112233445566778899aabbccddeeff  2 node3 exit:1 1.000 4 n1",
		"00112233445566778899AABBCCDDEEFF 2 node3 exit:1 1.000 4 n1",
		"00112233445566778899aabbccddeeff 2 node3 exit:1 1.000 4 n1 0 "
		"2",
		"00112233445566778899aabbccddeeff 2 node3 exit:1 1.000 4 n1 0 "
		"2 "
		"node3",
		"00112233445566778899aabbccddeeff 2 node3 exit:1 1.000 4 n1 0 "
		"2 "
		"node3 dead",
		"00112233445566778899aabbccddeeff 2 node3 exit:1 1.000 4 n1 0 "
		"2 "
		"node3 lost x",
		"00112233445566778899aabbccddeeff 2 node3 exit:1 1.000 4 n1 0 "
		"0 "
		"node3 lost",
		"00112233445566778899aabbccddeeff 2 node3 exit:1 1.000 4 n1 0 "
		"-2 "
		"node3 lost",
		"00112233445566778899aabbccddeeff 2 node3 exit:1 1.000 4 n1 0 "
		"2 "
		"no/de lost",
	};
	struct ddp_failure g;
	char err[128];
	size_t i, refused = 0;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (ddp_failure_parse_report(bad[i], nonce, &g, err,
					     sizeof(err)) == -1)
			refused++;
		else
			tap_diag("accepted: %s", bad[i]);
	}
	tap_ok(refused == sizeof(bad) / sizeof(bad[0]),
	       "every malformed report is refused as malformed (-1)");
}

static void
test_earliest_and_blame(void)
{
	struct ddp_failure a = killed(2, "node3", SIGKILL, 1000),
			   b = killed(0, "node1", SIGKILL, 1005),
			   c = killed(1, "node1", SIGKILL, 1000);

	tap_ok(ddp_failure_earlier(&a, &b) && !ddp_failure_earlier(&b, &a),
	       "the earlier time first");
	tap_ok(ddp_failure_earlier(&c, &a) && !ddp_failure_earlier(&a, &c),
	       "at the same time, the lower rank");
	/* The program chooses how it dies: no signal alone blames its
	 * node. */
	{
		static const int crashes[] = {SIGKILL, SIGSEGV, SIGABRT, SIGFPE,
					      SIGILL,  SIGBUS,	SIGTRAP, SIGSYS,
					      SIGUSR1, SIGPIPE, 40};
		size_t i, blamed = 0, not_crash = 0;

		for (i = 0; i < sizeof(crashes) / sizeof(crashes[0]); i++) {
			a.signal = crashes[i];
			blamed += ddp_failure_blame(&a)[0] != '\0';
			not_crash +=
				ddp_failure_cause_of(&a) != DDP_CAUSE_CRASH;
		}
		tap_ok(!blamed && !not_crash,
		       "SIGKILL, SIGSEGV, SIGABRT, SIGFPE, SIGILL, SIGBUS, "
		       "SIGTRAP, SIGSYS, SIGUSR1, SIGPIPE, signal 40: a crash, "
		       "no node blamed (%zu blamed, %zu not crash)",
		       blamed, not_crash);
	}
	a.signal = SIGKILL;
	a.kernel = DDP_KERNEL_OOM;
	tap_ok(ddp_failure_cause_of(&a) == DDP_CAUSE_OOM &&
		       !ddp_failure_blame(&a)[0],
	       "SIGKILL with the kernel's OOM kill: oom, no node blamed");
	a.signal = SIGBUS;
	a.kernel = DDP_KERNEL_MEMORY_ERROR;
	tap_ok(ddp_failure_cause_of(&a) == DDP_CAUSE_NODE,
	       "SIGBUS with the kernel's memory error: node");
	TAP_STREQ(ddp_failure_blame(&a), "node3",
		  "SIGBUS with the kernel's memory error blames its node");
	a.kernel = DDP_KERNEL_NONE;
	a.signal = SIGTERM;
	tap_ok(ddp_failure_cause_of(&a) == DDP_CAUSE_STOP, "SIGTERM: stop");
	a.signal = SIGTERM;
	TAP_STREQ(ddp_failure_blame(&a), "", "SIGTERM blames nobody");
	a.signal = SIGINT;
	TAP_STREQ(ddp_failure_blame(&a), "", "SIGINT blames nobody");
	a.signal = SIGHUP;
	TAP_STREQ(ddp_failure_blame(&a), "", "SIGHUP blames nobody");
	a.signal = 0;
	a.status = 1;
	TAP_STREQ(ddp_failure_blame(&a), "", "an exit status blames nobody");
	tap_ok(ddp_failure_cause_of(&a) == DDP_CAUSE_EXIT, "an exit: exit");
}

static void
test_describe(void)
{
	struct ddp_failure f = killed(2, "node3", SIGKILL, 1000);
	char out[256];

	tap_ok(ddp_failure_describe(&f, out, sizeof(out)) == 0, "described");
	TAP_STREQ(out, "rank 2 on node3 was killed by signal 9 (SIGKILL)",
		  "a signal, with its name");
	f.signal = 40;
	ddp_failure_describe(&f, out, sizeof(out));
	TAP_STREQ(out, "rank 2 on node3 was killed by signal 40",
		  "a signal without a name");
	f.signal = 0;
	f.status = 1;
	f.rank = 5;
	snprintf(f.node, sizeof(f.node), "node2");
	ddp_failure_describe(&f, out, sizeof(out));
	TAP_STREQ(out, "rank 5 on node2 exited with status 1",
		  "an exit status");
	tap_ok(ddp_failure_describe(&f, out, 10) == -1, "too small a buffer");
}

static void
test_record(void)
{
	struct ddp_failure f = killed(2, "node3", SIGKILL, 1764240000123LL);
	char dir[] = "/tmp/test-failure.XXXXXX", path[256], line[512], err[256];
	struct stat st;
	ssize_t n;
	int fd;

	ddp_failure_format_record(&f, line, sizeof(line));
	TAP_STREQ(line,
		  "rank=2 node=node3 how=signal:9 time=1764240000.123 "
		  "blame= nodes=4 step_nodes=node[1-4] why= cause=crash\n",
		  "the record of a killed rank: a crash, no node blamed");
	f.signal = SIGBUS;
	f.kernel = DDP_KERNEL_MEMORY_ERROR;
	ddp_failure_format_record(&f, line, sizeof(line));
	TAP_STREQ(line,
		  "rank=2 node=node3 how=signal:7 time=1764240000.123 "
		  "blame=node3 nodes=4 step_nodes=node[1-4] why= cause=node\n",
		  "the record of a SIGBUS with a memory error: its node");
	f.kernel = DDP_KERNEL_NONE;
	f.signal = 0;
	f.status = 1;
	ddp_failure_format_record(&f, line, sizeof(line));
	TAP_STREQ(line,
		  "rank=2 node=node3 how=exit:1 time=1764240000.123 blame= "
		  "nodes=4 step_nodes=node[1-4] why= cause=exit\n",
		  "an exit blames nobody: blame= empty");
	if (!mkdtemp(dir)) {
		tap_ok(0, "mkdtemp");
		return;
	}
	snprintf(path, sizeof(path), "%s/report", dir);
	fd = open(path, O_WRONLY | O_CREAT, 0644);
	if (fd >= 0)
		close(fd);
	tap_ok(ddp_failure_write_record(path, &f, err, sizeof(err)) == 0,
	       "the record is written over an old file");
	fd = open(path, O_RDONLY);
	n = fd >= 0 ? read(fd, line, sizeof(line) - 1) : -1;
	if (fd >= 0)
		close(fd);
	line[n > 0 ? n : 0] = '\0';
	tap_ok(strstr(line, "how=exit:1 ") != NULL && strchr(line, '\n') &&
		       stat(path, &st) == 0 &&
		       (st.st_mode & (S_IRWXU | S_IRWXG | S_IRWXO)) ==
			       S_IRUSR + S_IWUSR,
	       "one line, mode 0600");
	snprintf(path, sizeof(path), "%s/missing/report", dir);
	tap_ok(ddp_failure_write_record(path, &f, err, sizeof(err)) == -1 &&
		       strstr(err, "missing") != NULL,
	       "a missing directory is an error naming the file");
	snprintf(path, sizeof(path), "%s/report", dir);
	unlink(path);
	rmdir(dir);
}

/* A report of rank on node that exited 1 at ms, naming rank named. */
static struct ddp_failure
naming(long rank, const char *node, long long ms, long named,
       const char *named_node, const char *why)
{
	struct ddp_failure f = killed(rank, node, 0, ms);

	f.status = 1;
	f.named = 1;
	f.named_by = rank;
	f.named_rank = named;
	snprintf(f.named_node, sizeof(f.named_node), "%s", named_node);
	snprintf(f.named_why, sizeof(f.named_why), "%s", why);
	return f;
}

static void
test_naming(void)
{
	struct ddp_failure f = naming(0, "node1", 1000, 2, "node3", "hang"), g;
	char line[DDP_FAILURE_LINE_MAX], err[128];

	tap_ok(ddp_failure_format_report(&f, nonce, line, sizeof(line)) == 0 &&
		       strstr(line, " node[1-4] 0 2 node3 hang\n") &&
		       ddp_failure_parse_report(line, nonce, &g, err,
						sizeof(err)) == 0 &&
		       g.named && g.named_by == 0 && g.named_rank == 2 &&
		       !strcmp(g.named_node, "node3") &&
		       !strcmp(g.named_why, "hang"),
	       "a report with a naming reads back: %s", line);
	g = killed(1, "node2", 9, 5);
	tap_ok(ddp_failure_format_naming(&f, line, sizeof(line)) == 0 &&
		       !strcmp(line, "0 names 2 node3 hang\n") &&
		       ddp_failure_parse_naming(line, &g) == 0 && g.named &&
		       g.named_by == 0 && g.named_rank == 2 &&
		       !strcmp(g.named_node, "node3") &&
		       !strcmp(g.named_why, "hang"),
	       "a naming line formatted reads back");
	g = f;
	g.named_rank = g.named_by;
	f.named_why[0] = '\0';
	tap_ok(ddp_failure_format_naming(&g, line, sizeof(line)) < 0 &&
		       ddp_failure_format_naming(&f, line, sizeof(line)) < 0,
	       "no naming line names its own rank or lacks a why");
	g = killed(1, "node2", 9, 5);
	tap_ok(ddp_failure_parse_naming("1 names 3 node4 lost\n", &g) == 0 &&
		       g.named && g.named_by == 1 && g.named_rank == 3 &&
		       !strcmp(g.named_node, "node4") &&
		       !strcmp(g.named_why, "lost"),
	       "a task's naming line is read");
	g = killed(1, "node2", 9, 5);
	tap_ok(ddp_failure_parse_naming("1 names 3 node4 behind", &g) == 0 &&
		       g.named_rank == 3 && !strcmp(g.named_why, "behind"),
	       "a naming of a rank still in an earlier call is read");
	g = killed(1, "node2", 9, 5);
	tap_ok(ddp_failure_parse_naming("1 names 3 node4 bored", &g) < 0 &&
		       ddp_failure_parse_naming("1 blames 3 node4 lost", &g) <
			       0 &&
		       ddp_failure_parse_naming("1 names 1 node4 lost", &g) <
			       0 &&
		       ddp_failure_parse_naming("1 names 3 no de4 lost", &g) <
			       0 &&
		       ddp_failure_parse_naming("1 names 3 node4 lost\nx", &g) <
			       0 &&
		       ddp_failure_parse_naming("-1 names 3 node4 hang", &g) <
			       0 &&
		       !g.named,
	       "a malformed naming line is refused, f untouched");
}

/* The cause of reports r[0..n), its line in what. */
static struct ddp_failure
cause_of(const struct ddp_failure *r, size_t n, char *what, size_t len)
{
	struct ddp_failure_set set = {0};
	struct ddp_failure c = {0};
	size_t i;

	for (i = 0; i < n; i++)
		ddp_failure_set_add(&set, &r[i]);
	what[0] = '\0';
	if (!ddp_failure_set_cause(&set, &c, what, len))
		c.rank = -1;
	ddp_failure_set_free(&set);
	return c;
}

static void
test_cause(void)
{
	struct ddp_failure r[4], c;
	char what[256], rec[DDP_FAILURE_LINE_MAX];

	/* A survivor's exit 1 that names the SIGKILLed rank comes first. */
	r[0] = naming(0, "node1", 1000, 2, "node3", "lost");
	r[1] = killed(2, "node3", SIGKILL, 1200);
	r[2] = killed(1, "node2", SIGKILL, 1300);
	c = cause_of(r, 3, what, sizeof(what));
	ddp_failure_format_record(&c, rec, sizeof(rec));
	tap_ok(c.rank == 2 && !strcmp(ddp_failure_blame(&c), "") &&
		       !strcmp(what, "rank 2 on node3 was killed by signal 9 "
				     "(SIGKILL)") &&
		       !strncmp(rec,
				"rank=2 node=node3 how=signal:9 time=1.200 "
				"blame= ",
				41) &&
		       strstr(rec, " why= cause=crash\n"),
	       "a lost rank killed by a signal is the cause, though a "
	       "survivor failed first: a crash, no node blamed: %s; %s",
	       what, rec);
	r[1].kernel = DDP_KERNEL_OOM;
	c = cause_of(r, 3, what, sizeof(what));
	tap_ok(c.rank == 2 && ddp_failure_cause_of(&c) == DDP_CAUSE_OOM &&
		       !ddp_failure_blame(&c)[0] &&
		       strstr(what, "by the kernel's OOM killer"),
	       "the same, killed by the OOM killer: oom: %s", what);
	r[1].signal = SIGBUS;
	r[1].kernel = DDP_KERNEL_MEMORY_ERROR;
	c = cause_of(r, 3, what, sizeof(what));
	tap_ok(c.rank == 2 && ddp_failure_cause_of(&c) == DDP_CAUSE_NODE &&
		       !strcmp(ddp_failure_blame(&c), "node3") &&
		       strstr(what, "after a memory error on its node"),
	       "the same, a SIGBUS with the kernel's memory error: its node: "
	       "%s",
	       what);
	r[1].kernel = DDP_KERNEL_NONE;

	/* A hang: the hung rank's own report is the step's SIGKILL. */
	r[0] = naming(0, "node1", 1000, 2, "h3", "hang");
	r[1] = killed(2, "node3", SIGKILL, 1200);
	c = cause_of(r, 2, what, sizeof(what));
	ddp_failure_format_record(&c, rec, sizeof(rec));
	tap_ok(c.rank == 2 && !strcmp(ddp_failure_blame(&c), "") &&
		       !strcmp(what,
			       "rank 2 on node3 hangs (named by rank 0)") &&
		       strstr(rec, " blame= ") &&
		       strstr(rec, " why=hang cause=hang\n"),
	       "a hung rank is the cause, no node blamed, and the record says "
	       "it hangs: %s; %s",
	       what, rec);
	/* Unreachable, but its node's slurmstepd reported: the node was
	 * up, the rank stopped or hung. */
	r[0] = naming(0, "node1", 1000, 2, "node3", "unreachable");
	c = cause_of(r, 2, what, sizeof(what));
	tap_ok(c.rank == 2 && ddp_failure_cause_of(&c) == DDP_CAUSE_HANG &&
		       !ddp_failure_blame(&c)[0],
	       "an unreachable rank whose node reported: hang, no node: %s",
	       what);
	/* Its node could not report: how= is the naming rank's exit. */
	r[0] = naming(0, "node1", 1000, 2, "node3", "behind");
	c = cause_of(r, 1, what, sizeof(what));
	ddp_failure_format_record(&c, rec, sizeof(rec));
	tap_ok(c.rank == 2 &&
		       !strcmp(what, "rank 2 on node3 hangs in an earlier call "
				     "(named by rank 0)") &&
		       !strncmp(rec, "rank=2 node=node3 how=exit:1 ", 29) &&
		       strstr(rec, " blame= ") &&
		       strstr(rec, " why=behind cause=hang\n"),
	       "a rank without a report of its own: the record carries why= "
	       "beside the naming rank's exit: %s; %s",
	       what, rec);

	/* A cut link: rank 2 behind it names rank 3 first, the three
	 * others name rank 2; the side with more ranks decides. */
	r[0] = naming(2, "node3", 990, 3, "node4", "unreachable");
	r[1] = naming(0, "node1", 1000, 2, "node3", "unreachable");
	r[2] = naming(1, "node2", 1001, 2, "node3", "unreachable");
	r[3] = naming(3, "node4", 1002, 2, "node3", "unreachable");
	c = cause_of(r, 4, what, sizeof(what));
	tap_ok(c.rank == 2 && !strcmp(ddp_failure_blame(&c), "node3") &&
		       ddp_failure_cause_of(&c) == DDP_CAUSE_NODE &&
		       !strcmp(what, "rank 2 on node3 is unreachable (named by "
				     "rank 0)"),
	       "ranks that name each other unreachable: the rank named most "
	       "is the cause, its node blamed: %s",
	       what);
	/* Named as often: the earliest naming stands. */
	c = cause_of(r, 2, what, sizeof(what));
	tap_ok(c.rank == 3 && !strcmp(ddp_failure_blame(&c), "node4"),
	       "named as often: the earliest naming decides: %s", what);
	/* The same with hangs: the ranks were silent, their nodes up. */
	r[0] = naming(2, "node3", 990, 3, "node4", "hang");
	r[1] = naming(0, "node1", 1000, 2, "node3", "hang");
	r[2] = naming(1, "node2", 1001, 2, "node3", "hang");
	r[3] = naming(3, "node4", 1002, 2, "node3", "hang");
	c = cause_of(r, 4, what, sizeof(what));
	tap_ok(c.rank == 2 && !strcmp(ddp_failure_blame(&c), "node3") &&
		       ddp_failure_cause_of(&c) == DDP_CAUSE_NODE,
	       "ranks of other nodes that name each other hung (a cut link: "
	       "each side sees the other silent): its node: %s",
	       what);
	r[0] = killed(2, "node3", SIGKILL, 1200);
	c = cause_of(r, 4, what, sizeof(what));
	tap_ok(c.rank == 2 && !strcmp(ddp_failure_blame(&c), "") &&
		       ddp_failure_cause_of(&c) == DDP_CAUSE_HANG,
	       "named hung by all, its node reporting its end and naming "
	       "no one (stopped): a hang, no node: %s",
	       what);

	/* A cut link on a ring: rank 1, beside the cut rank 2, waits in
	 * call N for it; ranks 0 and 3 wait in N+1 for rank 1 and name it
	 * behind. The blame follows rank 1's own naming to rank 2. */
	r[0] = naming(0, "node1", 1000, 1, "node2", "behind");
	r[1] = naming(3, "node4", 1001, 1, "node2", "behind");
	r[2] = naming(1, "node2", 1005, 2, "node3", "unreachable");
	r[3] = naming(2, "node3", 990, 1, "node2", "unreachable");
	c = cause_of(r, 4, what, sizeof(what));
	tap_ok(c.rank == 2 && !strcmp(ddp_failure_blame(&c), "node3") &&
		       c.time_ms == 990 &&
		       !strcmp(what, "rank 2 on node3 is unreachable (named by "
				     "rank 1)"),
	       "a chain: the ranks that name a waiter behind count as naming "
	       "what the waiter names, so the cut rank is blamed, not its "
	       "neighbour: %s",
	       what);
	r[3] = naming(2, "node3", 990, 1, "node2", "behind");
	c = cause_of(r, 4, what, sizeof(what));
	tap_ok(c.rank == 2 && !strcmp(ddp_failure_blame(&c), ""),
	       "the same when rank 2 names its neighbour behind: its node "
	       "reported and lost no link, no node blamed: %s",
	       what);
	c = cause_of(r, 3, what, sizeof(what));
	tap_ok(c.rank == 2 && !strcmp(ddp_failure_blame(&c), "node3") &&
		       !strcmp(what, "rank 2 on node3 is unreachable (named by "
				     "rank 1)"),
	       "the same without the cut rank's report (its node cannot "
	       "send it): %s",
	       what);

	/* A cycle of waiters: 0 -> 1 -> 2 -> 1. */
	r[0] = naming(0, "node1", 1000, 1, "node2", "behind");
	r[1] = naming(1, "node2", 1001, 2, "node3", "behind");
	r[2] = naming(2, "node3", 1002, 1, "node2", "behind");
	c = cause_of(r, 3, what, sizeof(what));
	tap_ok(c.rank == 2 && !strcmp(ddp_failure_blame(&c), "") &&
		       !strcmp(what, "rank 2 on node3 hangs in an earlier "
				     "call (named by rank 1)"),
	       "a cycle of waiters ends: each chain stops before a rank it "
	       "has passed or its own, the rank they end at most is "
	       "blamed: %s",
	       what);
	r[0] = naming(0, "node1", 1000, 1, "node2", "behind");
	r[1] = naming(1, "node2", 1001, 0, "node1", "behind");
	c = cause_of(r, 2, what, sizeof(what));
	tap_ok(c.rank == 1 && !strcmp(ddp_failure_blame(&c), ""),
	       "two waiters that name each other: the earliest naming "
	       "stands: %s",
	       what);

	/* A waiter without a naming of its own: it is the end. */
	r[0] = naming(0, "node1", 1000, 1, "node2", "behind");
	r[1] = naming(3, "node4", 1001, 1, "node2", "behind");
	c = cause_of(r, 2, what, sizeof(what));
	tap_ok(c.rank == 1 && !strcmp(ddp_failure_blame(&c), "") &&
		       !strcmp(what, "rank 1 on node2 hangs in an earlier "
				     "call (named by rank 0)"),
	       "a waiter without a report is the cause as the best known: %s",
	       what);
	r[2] = killed(1, "node2", SIGKILL, 1200);
	c = cause_of(r, 3, what, sizeof(what));
	tap_ok(c.rank == 1 && !strcmp(ddp_failure_blame(&c), "") &&
		       ddp_failure_cause_of(&c) == DDP_CAUSE_HANG &&
		       c.signal == SIGKILL &&
		       !strcmp(what, "rank 1 on node2 hangs in an earlier "
				     "call (named by rank 0)"),
	       "so is one whose report names nobody (the end of the step "
	       "killed it): %s",
	       what);

	/* A waiter that an abort reached before its own timeout names no
	 * one: rank 1 names it behind first, but rank 3's survey saw rank 2
	 * silent, and that stronger lead decides (rank 2 was stopped). */
	r[0] = naming(1, "node2", 1000, 0, "node1", "behind");
	r[1] = naming(3, "node4", 1001, 2, "node3", "hang");
	r[2] = killed(0, "node1", 0, 1002);
	r[2].status = 1;
	r[3] = killed(2, "node3", SIGKILL, 1200);
	c = cause_of(r, 4, what, sizeof(what));
	tap_ok(c.rank == 2 && ddp_failure_cause_of(&c) == DDP_CAUSE_HANG &&
		       !strcmp(ddp_failure_blame(&c), "") &&
		       !strcmp(what, "rank 2 on node3 hangs (named by rank 3)"),
	       "a waiter that named no one and a rank another survey saw "
	       "silent: the silent one is the cause: %s",
	       what);

	/* No report of the hung rank: its named host, if a step node. */
	r[0] = naming(0, "node1", 1000, 2, "node3", "hang");
	c = cause_of(r, 1, what, sizeof(what));
	tap_ok(c.rank == 2 && !strcmp(ddp_failure_blame(&c), "node3") &&
		       c.status == 1 &&
		       !strcmp(what, "rank 2 on node3 hangs (named by rank 0)"),
	       "named hung by another node and no report from its node (a "
	       "node that is up reports its tasks' end): its node: %s",
	       what);
	r[0] = naming(0, "node1", 1000, 2, "node3", "unreachable");
	c = cause_of(r, 1, what, sizeof(what));
	tap_ok(c.rank == 2 && !strcmp(ddp_failure_blame(&c), "node3") &&
		       ddp_failure_cause_of(&c) == DDP_CAUSE_NODE,
	       "unreachable from another node and no report from its node: "
	       "the named step node is blamed: %s",
	       what);
	r[0] = naming(0, "node1", 1000, 2, "node3", "lost");
	c = cause_of(r, 1, what, sizeof(what));
	tap_ok(c.rank == 2 && !strcmp(ddp_failure_blame(&c), "node3") &&
		       !strcmp(what, "rank 2 on node3 was lost (named by rank "
				     "0)"),
	       "lost from another node and no report from its node: its "
	       "node: %s",
	       what);
	r[0] = naming(0, "node3", 1000, 2, "node3", "unreachable");
	c = cause_of(r, 1, what, sizeof(what));
	tap_ok(c.rank == 2 && !strcmp(ddp_failure_blame(&c), "") &&
		       ddp_failure_cause_of(&c) == DDP_CAUSE_HANG,
	       "unreachable from its own node alone: no other node agrees, "
	       "no node blamed: %s",
	       what);
	r[0] = naming(0, "node1", 1000, 2, "elsewhere", "unreachable");
	c = cause_of(r, 1, what, sizeof(what));
	tap_ok(c.rank == 2 && !strcmp(ddp_failure_blame(&c), "") &&
		       !strcmp(what, "rank 2 on elsewhere is unreachable "
				     "(named by rank 0)"),
	       "a named host outside the step is blamed on nobody: %s", what);

	/* The named rank exited by itself: the program's failure. */
	r[0] = naming(0, "node1", 1000, 2, "node3", "lost");
	r[1] = killed(2, "node3", 0, 900);
	r[1].status = 3;
	c = cause_of(r, 2, what, sizeof(what));
	tap_ok(c.rank == 2 && !strcmp(ddp_failure_blame(&c), "") &&
		       ddp_failure_cause_of(&c) == DDP_CAUSE_EXIT &&
		       !strcmp(what, "rank 2 on node3 exited with status 3"),
	       "a named rank that exited by itself blames nobody: %s", what);

	/* The earliest report is a signal death: the rule as before. */
	r[0] = killed(3, "node4", SIGSEGV, 900);
	r[1] = naming(0, "node1", 1000, 2, "node3", "lost");
	c = cause_of(r, 2, what, sizeof(what));
	tap_ok(c.rank == 3 && !strcmp(ddp_failure_blame(&c), "") &&
		       ddp_failure_cause_of(&c) == DDP_CAUSE_CRASH,
	       "an earliest signal death stays the cause, a crash: %s", what);

	/* SIGTERM first (scancel), no naming: nobody. */
	r[0] = killed(3, "node4", SIGTERM, 900);
	c = cause_of(r, 1, what, sizeof(what));
	tap_ok(c.rank == 3 && !strcmp(ddp_failure_blame(&c), "") &&
		       ddp_failure_cause_of(&c) == DDP_CAUSE_STOP,
	       "no naming, SIGTERM: stop, nobody blamed");
	tap_ok(cause_of(r, 0, what, sizeof(what)).rank == -1,
	       "no report, no cause");
}

/* A clean stop of rank on node after step, for why, its checkpoint
 * ckpt_ms long. */
static struct ddp_failure
stopped(long rank, const char *node, long long step, const char *why,
	long long ckpt_ms, long long ms)
{
	struct ddp_failure f = killed(rank, node, 0, ms);

	f.status = 75;
	f.stopped = 1;
	f.stop_step = step;
	f.stop_ckpt_ms = ckpt_ms;
	snprintf(f.stop_why, sizeof(f.stop_why), "%s", why);
	return f;
}

static void
test_stop(void)
{
	struct ddp_failure f = stopped(2, "node3", 41, "sigusr1", 210,
				       1764240000123LL),
			   g, c;
	struct ddp_failure_set set = {0};
	struct ddp_failure_record r;
	char line[DDP_FAILURE_LINE_MAX], err[160], what[256];
	const char *bad[] = {
		/* no note's fields, a short one, one too many */
		"00112233445566778899aabbccddeeff 2 node3 stop 1.000 4 "
		"node[1-4]",
		"00112233445566778899aabbccddeeff 2 node3 stop 1.000 4 "
		"node[1-4] 41 sigusr1",
		"00112233445566778899aabbccddeeff 2 node3 stop 1.000 4 "
		"node[1-4] 41 sigusr1 210 x",
		/* a signed step, a why out of form, a naming instead */
		"00112233445566778899aabbccddeeff 2 node3 stop 1.000 4 "
		"node[1-4] -1 sigusr1 210",
		"00112233445566778899aabbccddeeff 2 node3 stop 1.000 4 "
		"node[1-4] 41 sig/usr1 210",
		"00112233445566778899aabbccddeeff 2 node3 stop 1.000 4 "
		"node[1-4] 0 names 3 node4",
	};
	size_t i;

	tap_ok(ddp_failure_format_report(&f, nonce, line, sizeof(line)) == 0,
	       "a stop's report is written");
	TAP_STREQ(line,
		  "00112233445566778899aabbccddeeff 2 node3 stop "
		  "1764240000.123 4 node[1-4] 41 sigusr1 210\n",
		  "the stop's report line carries the note's fields");
	memset(&g, 0, sizeof(g));
	tap_ok(ddp_failure_parse_report(line, nonce, &g, err, sizeof(err)) ==
			       0 &&
		       !memcmp(&f, &g, sizeof(f)),
	       "and reads back as the same stop");
	tap_ok(ddp_failure_cause_of(&g) == DDP_CAUSE_STOP &&
		       !strcmp(ddp_failure_blame(&g), ""),
	       "a stop's class is stop, and it blames no node");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		tap_ok(ddp_failure_parse_report(bad[i], nonce, &g, err,
						sizeof(err)) == -1,
		       "refused: %s", bad[i] + 33);
	f.named = 1;
	tap_ok(ddp_failure_format_report(&f, nonce, line, sizeof(line)) < 0,
	       "a stop with a naming is not written");
	f.named = 0;
	f.status = 1;
	tap_ok(ddp_failure_format_report(&f, nonce, line, sizeof(line)) < 0,
	       "nor one whose status is not 75");

	/* Three ranks stop at step 41, one of them for the time. */
	f = stopped(2, "node3", 41, "sigusr1", 180, 1764240000300LL);
	ddp_failure_set_add(&set, &f);
	f = stopped(0, "node1", 41, "time-limit", 210, 1764240000200LL);
	ddp_failure_set_add(&set, &f);
	f = stopped(1, "node2", 41, "agreed", 5, 1764240000250LL);
	ddp_failure_set_add(&set, &f);
	tap_ok(!ddp_failure_set_cause(&set, &c, what, sizeof(what)),
	       "stops alone are no failure: no cause");
	tap_ok(ddp_failure_set_stopped(&set, 3, &c, what, sizeof(what)) == 3,
	       "three stops");
	TAP_STREQ(what,
		  "stopped on every rank after step 41 (time-limit on rank 0; "
		  "sigusr1 on rank 2): checkpoint written in 0.21 s",
		  "srun's stop line: why on which rank, the step, the "
		  "longest checkpoint");
	tap_ok(c.rank == 0 && ddp_failure_cause_of(&c) == DDP_CAUSE_STOP &&
		       !strcmp(ddp_failure_blame(&c), ""),
	       "the earliest stop, class stop, nobody blamed");
	tap_ok(ddp_failure_format_record(&c, line, sizeof(line)) == 0 &&
		       strstr(line, " how=exit:75 ") &&
		       strstr(line, " blame= ") &&
		       strstr(line, " cause=stop\n") &&
		       ddp_failure_parse_record(line, strlen(line), &r, err,
						sizeof(err)) == 0 &&
		       r.cause == DDP_CAUSE_STOP && !r.blame[0] &&
		       r.code == 75 && !r.signalled,
	       "its record says cause=stop, how=exit:75, and reads back");
	tap_ok(ddp_failure_set_stopped(&set, 4, &c, what, sizeof(what)) == 3 &&
		       strstr(what, "stopped on 3 of 4 ranks after step 41"),
	       "fewer stops than tasks: said so (%s)", what);
	f = stopped(3, "node4", 42, "agreed", 0, 1764240000400LL);
	ddp_failure_set_add(&set, &f);
	tap_ok(ddp_failure_set_stopped(&set, 4, &c, what, sizeof(what)) == 4 &&
		       strstr(what, "on every rank after steps 41 to 42 ("),
	       "notes of different steps: the range (%s)", what);

	/* A real failure among them wins, whatever came first. */
	f = killed(3, "node4", SIGSEGV, 1764240009000LL);
	ddp_failure_set_add(&set, &f);
	tap_ok(ddp_failure_set_stopped(&set, 4, &c, what, sizeof(what)) == 0,
	       "a failure among the stops: no stop line");
	tap_ok(ddp_failure_set_cause(&set, &c, what, sizeof(what)) &&
		       c.rank == 3 && c.signal == SIGSEGV && !c.stopped &&
		       ddp_failure_cause_of(&c) == DDP_CAUSE_CRASH,
	       "the failure is the cause, though every stop came first (%s)",
	       what);
	ddp_failure_set_free(&set);
	tap_ok(set.stops == NULL && set.nstops == 0, "the set is freed");
}

int
main(void)
{
	test_wait_status();
	test_nonce();
	test_report();
	test_bad_reports();
	test_earliest_and_blame();
	test_describe();
	test_record();
	test_naming();
	test_cause();
	test_stop();
	return tap_done();
}
