/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The first failure of a step: the report line both ways, forged and
 * broken reports, the earliest of several, the blame rule, srun's line and
 * the restart record file.
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
	TAP_STREQ(ddp_failure_blame(&a), "node3", "SIGKILL blames its node");
	a.signal = SIGSEGV;
	TAP_STREQ(ddp_failure_blame(&a), "node3", "SIGSEGV blames its node");
	a.signal = SIGTERM;
	TAP_STREQ(ddp_failure_blame(&a), "", "SIGTERM blames nobody");
	a.signal = SIGINT;
	TAP_STREQ(ddp_failure_blame(&a), "", "SIGINT blames nobody");
	a.signal = SIGHUP;
	TAP_STREQ(ddp_failure_blame(&a), "", "SIGHUP blames nobody");
	a.signal = 0;
	a.status = 1;
	TAP_STREQ(ddp_failure_blame(&a), "", "an exit status blames nobody");
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
		  "blame=node3 nodes=4 step_nodes=node[1-4]\n",
		  "the record of a killed rank");
	f.signal = 0;
	f.status = 1;
	ddp_failure_format_record(&f, line, sizeof(line));
	TAP_STREQ(line,
		  "rank=2 node=node3 how=exit:1 time=1764240000.123 blame= "
		  "nodes=4 step_nodes=node[1-4]\n",
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
	return tap_done();
}
