/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ddp-check's decisions without a cluster: its options, which node a set
 * of link speeds and connection failures blames, the table, and the
 * check's one-line form of libddp's rendezvous failures (messages as
 * libddp wrote them on the minicluster).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tap.h"

static int
parse(const char *line, struct chk_opts *o, char *err, size_t errlen)
{
	char buf[512], *argv[16], *save = NULL, *tok;
	int argc = 0;

	snprintf(buf, sizeof(buf), "ddp-check %s", line);
	for (tok = strtok_r(buf, " ", &save); tok && argc < 15;
	     tok = strtok_r(NULL, " ", &save))
		argv[argc++] = tok;
	argv[argc] = NULL;
	err[0] = '\0';
	return chk_parse_opts(argc, argv, o, err, errlen);
}

static void
test_options(void)
{
	static const struct {
		const char *line;
		const char *want; /* in the message */
	} bad[] = {
		{"--mode maybe", "--mode: invalid value 'maybe' (use fail, "
				 "warn or off)"},
		{"--min-fraction 0", "--min-fraction: invalid value '0'"},
		{"--min-fraction 1.5", "use a number in (0, 1]"},
		{"--min-fraction half", "invalid value 'half'"},
		{"--time-limit 0", "--time-limit: invalid value '0' (use whole "
				   "seconds from 1 to 3600"},
		{"--time-limit 2.5", "invalid value '2.5'"},
		{"--join-limit 0", "--join-limit: invalid value '0' (use whole "
				   "seconds from 1 to 3600"},
		{"--join-limit 3601", "--join-limit: invalid value '3601'"},
		{"--gpu yes", "--gpu: invalid value 'yes' (use auto, on or "
			      "off)"},
		{"--link-ms 5", "--link-ms: invalid value '5'"},
		{"--port 0", "--port: invalid value '0' (use a port from 1 "
			     "to 65535)"},
		{"--port 65536", "--port: invalid value '65536'"},
		{"--verdict-fd 2", "--verdict-fd: invalid value '2' (use an "
				   "open file descriptor from 3 up)"},
		{"--verdict-fd x", "--verdict-fd: invalid value 'x'"},
		{"--time-limit", "--time-limit needs a value"},
		{"--bogus", "unknown option '--bogus'"},
		{"now", "unexpected argument 'now'"},
	};
	struct chk_opts o;
	char err[256];
	size_t i;

	tap_ok(parse("", &o, err, sizeof(err)) == 0 &&
		       o.mode == CHK_MODE_FAIL && o.min_fraction == 0.5 &&
		       o.time_limit_s == 60 && o.join_limit_s == 60 &&
		       o.gpu == CHK_GPU_AUTO && o.link_ms == 200 &&
		       o.port == 0 && o.verdict_fd == -1,
	       "defaults: fail, 0.5, 60 s, join 60 s, gpu auto, 200 ms, "
	       "MASTER_PORT, "
	       "no verdict descriptor");
	tap_ok(parse("--verdict-fd 7", &o, err, sizeof(err)) == 0 &&
		       o.verdict_fd == 7,
	       "--verdict-fd 7");
	tap_ok(parse("--mode=warn --min-fraction 0.25 --time-limit=9 --gpu "
		     "off --link-ms 50 --verbose --port=29517 --join-limit 300",
		     &o, err, sizeof(err)) == 0 &&
		       o.mode == CHK_MODE_WARN && o.min_fraction == 0.25 &&
		       o.time_limit_s == 9 && o.gpu == CHK_GPU_OFF &&
		       o.link_ms == 50 && o.verbose && o.port == 29517 &&
		       o.join_limit_s == 300,
	       "every option, with = and with a space");
	tap_ok(parse("--mode off", &o, err, sizeof(err)) == 0 &&
		       o.mode == CHK_MODE_OFF,
	       "--mode off");
	tap_ok(parse("--help", &o, err, sizeof(err)) == 1, "--help");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = parse(bad[i].line, &o, err, sizeof(err));

		if (!tap_ok(rc == -1 && strstr(err, bad[i].want),
			    "'%s' is refused naming it", bad[i].line))
			tap_diag("rc %d, message '%s'", rc, err);
	}
}

static void
test_text(void)
{
	int r1[] = {0, 1, 2, 3}, r2[] = {0, 2, 4}, r3[] = {0, 1, 5, 6, 7, 9};
	char buf[64], tiny[8], gpus[160] = "";

	chk_ranges(r1, 4, buf, sizeof(buf));
	TAP_STREQ(buf, "0-3", "ranks 0 1 2 3 -> 0-3");
	chk_ranges(r2, 3, buf, sizeof(buf));
	TAP_STREQ(buf, "0,2,4", "ranks 0 2 4 -> 0,2,4");
	chk_ranges(r3, 6, buf, sizeof(buf));
	TAP_STREQ(buf, "0-1,5-7,9", "ranks 0 1 5 6 7 9 -> 0-1,5-7,9");
	tap_ok(chk_ranges(r3, 6, tiny, sizeof(tiny)) == -1 &&
		       strstr(tiny, "..."),
	       "ranges that do not fit end with ...");

	chk_gpus_add(gpus, sizeof(gpus), "0000:1b:00.0");
	chk_gpus_add(gpus, sizeof(gpus), "0000:1b:00.0");
	chk_gpus_add(gpus, sizeof(gpus), "-");
	chk_gpus_add(gpus, sizeof(gpus), "0000:43:00.0");
	chk_gpus_finish(gpus, sizeof(gpus));
	TAP_STREQ(gpus, "1b,43", "bus ids: each once, 0000:BB:00.0 as BB");
	gpus[0] = '\0';
	chk_gpus_add(gpus, sizeof(gpus), "0002:01:00.0");
	chk_gpus_add(gpus, sizeof(gpus), "0000:43:00.0");
	chk_gpus_finish(gpus, sizeof(gpus));
	TAP_STREQ(gpus, "0002:01:00.0,0000:43:00.0",
		  "bus ids in full when one is not 0000:BB:00.0");
	gpus[0] = '\0';
	chk_gpus_add(gpus, sizeof(gpus), "-");
	chk_gpus_finish(gpus, sizeof(gpus));
	TAP_STREQ(gpus, "-", "no GPU: -");
	chk_status_words(0, buf, sizeof(buf));
	TAP_STREQ(buf, "ok", "no flag: ok");
	chk_status_words(CHK_F_SLOW_SEND | CHK_F_GPU, buf, sizeof(buf));
	TAP_STREQ(buf, "slow-send,gpu", "flags as words");
}

/* A ring of n nodes named node1..; every connection up, no speed. */
static void
ring(struct chk_net *net, struct chk_node *nd, int n)
{
	int i;

	memset(net, 0, sizeof(*net));
	memset(nd, 0, sizeof(*nd) * (size_t)n);
	net->n = n;
	net->node = nd;
	net->ndir = n >= 3 ? 2 : 1;
	net->fraction = 0.5;
	net->window_s = 0.2;
	for (i = 0; i < n; i++) {
		snprintf(nd[i].host, sizeof(nd[i].host), "node%d", i + 1);
		nd[i].leader = 2 * i;
		nd[i].port = 40000 + i;
		nd[i].conn[0] = nd[i].conn[1] = CHK_CONN_OK;
		nd[i].gbps[0] = nd[i].gbps[1] = -1;
	}
}

static void
speeds(struct chk_net *net, const double (*g)[2])
{
	int i;

	net->measured = 1;
	for (i = 0; i < net->n; i++) {
		net->node[i].gbps[0] = g[i][0];
		net->node[i].gbps[1] = net->ndir == 2 ? g[i][1] : -1;
	}
}

static int
has(const struct ddp_buf *b, const char *s)
{
	return b->s && strstr(b->s, s);
}

static void
test_judge(void)
{
	/* Measured on the minicluster: node2 behind a 50 Mbit/s tbf. */
	static const double throttled[3][2] = {
		{0.0416, 0.839}, {0.00579, 0.00599}, {1.31, 0.0209}};
	static const double healthy[3][2] = {
		{0.343, 0.448}, {0.396, 0.441}, {0.271, 0.376}};
	static const double one_link[4][2] = {
		{1.5, 1.4}, {1.6, 0.05}, {1.5, 1.45}, {1.55, 1.5}};
	static const double two[2][2] = {{0.00597, 0}, {0.0311, 0}};
	struct chk_node nd[4];
	struct chk_net net;
	struct ddp_buf pb = {0};
	int n;

	ring(&net, nd, 3);
	speeds(&net, healthy);
	n = chk_judge(&net, &pb);
	tap_ok(n == 0 && !nd[0].flags && !nd[1].flags && !nd[2].flags,
	       "3 healthy nodes, links within 2x of each other: no problem");
	ddp_buf_free(&pb);

	ring(&net, nd, 3);
	speeds(&net, throttled);
	n = chk_judge(&net, &pb);
	tap_ok(n == 2 && nd[1].flags == (CHK_F_SLOW_SEND | CHK_F_SLOW_RECV) &&
		       !nd[0].flags && !nd[2].flags,
	       "3 nodes, node2 throttled: node2 alone, slow both ways");
	tap_ok(net.median > 0.8 && net.median < 1.4,
	       "the reference is a healthy link (%.3g GB/s), not the "
	       "throttled node's",
	       net.median);
	if (!tap_ok(has(&pb, "node2: slow sending: 0.00579 GB/s to node3, "
			     "0.00599 GB/s to node1"),
		    "the problem names node2 and its speeds"))
		tap_diag("%s", pb.s ? pb.s : "");
	ddp_buf_free(&pb);

	ring(&net, nd, 4);
	speeds(&net, one_link);
	n = chk_judge(&net, &pb);
	tap_ok(n == 1 && nd[1].flags == CHK_F_SLOW_LINK &&
		       nd[0].flags == CHK_F_SLOW_LINK && !nd[2].flags &&
		       !nd[3].flags,
	       "4 nodes, one slow link node2 -> node1: both ends, no one else");
	tap_ok(has(&pb, "link node2 -> node1: 0.05 GB/s"),
	       "the slow link is named with its speed");
	ddp_buf_free(&pb);

	ring(&net, nd, 2);
	speeds(&net, two);
	n = chk_judge(&net, &pb);
	tap_ok(n == 1 && nd[0].flags == CHK_F_SLOW_LINK &&
		       nd[1].flags == CHK_F_SLOW_LINK &&
		       has(&pb, "link node1 -> node2"),
	       "2 nodes, one slow direction: the link, both ends");
	ddp_buf_free(&pb);

	ring(&net, nd, 3);
	nd[1].conn[CHK_FWD] = CHK_CONN_TIMEOUT; /* node2 -> node3 */
	nd[0].conn[CHK_REV] = CHK_CONN_TIMEOUT; /* node1 -> node3 */
	n = chk_judge(&net, &pb);
	tap_ok(nd[2].flags == CHK_F_UNREACHABLE && !nd[0].flags && !nd[1].flags,
	       "no connection into node3: node3 unreachable, no one else");
	if (!tap_ok(n == 2 &&
			    has(&pb, "rank 2 on node2 cannot reach "
				     "node3:40002 (timed out)\n") &&
			    has(&pb, "rank 0 on node1 cannot reach "
				     "node3:40002 (timed out)\n") &&
			    has(&pb, "node3: unreachable"),
		    "each failed connection is named, in the issue's form"))
		tap_diag("%s", pb.s ? pb.s : "");
	ddp_buf_free(&pb);

	ring(&net, nd, 3);
	nd[0].conn[CHK_FWD] = CHK_CONN_REFUSED; /* node1 -> node2 only */
	n = chk_judge(&net, &pb);
	tap_ok(n == 1 && nd[0].flags == CHK_F_CONNECT &&
		       nd[1].flags == CHK_F_CONNECT && !nd[2].flags &&
		       has(&pb, "rank 0 on node1 cannot reach node2:40001 "
				"(refused)"),
	       "one refused connection: both ends, refused");
	ddp_buf_free(&pb);

	ring(&net, nd, 3);
	speeds(&net, healthy);
	nd[2].broke[CHK_FWD] = 104;
	n = chk_judge(&net, &pb);
	tap_ok(n == 1 && nd[2].flags == CHK_F_BROKEN &&
		       nd[0].flags == CHK_F_BROKEN &&
		       has(&pb, "link node3 -> node1 broke during the test"),
	       "a stream that broke names its link");
	ddp_buf_free(&pb);
}

static void
test_verdicts(void)
{
	/* As in test_judge: node2 behind a 50 Mbit/s tbf. */
	static const double throttled[3][2] = {
		{0.0416, 0.839}, {0.00579, 0.00599}, {1.31, 0.0209}};
	static const double healthy[3][2] = {
		{0.343, 0.448}, {0.396, 0.441}, {0.271, 0.376}};
	struct chk_node nd[3];
	struct chk_net net;
	struct ddp_buf pb = {0}, vb = {0};
	int n;

	ring(&net, nd, 3);
	speeds(&net, throttled);
	chk_judge(&net, &pb);
	n = chk_verdicts(&net, &vb);
	if (!tap_ok(n == 2 && vb.s &&
			    !strcmp(vb.s, "node=node2 check=link-send "
					  "value=0.00599 median=1.31 "
					  "unit=gb-per-s\n"
					  "node=node2 check=link-recv "
					  "value=0.0416 median=1.31 "
					  "unit=gb-per-s\n"),
		    "node2 throttled: its best sending and receiving link "
		    "against the reference, nobody else"))
		tap_diag("%d lines: %s", n, vb.s ? vb.s : "");
	ddp_buf_free(&pb);
	ddp_buf_free(&vb);

	ring(&net, nd, 3);
	speeds(&net, healthy);
	chk_judge(&net, &pb);
	tap_ok(chk_verdicts(&net, &vb) == 0 && !vb.len,
	       "healthy nodes: no verdict line");
	ddp_buf_free(&pb);

	ring(&net, nd, 3);
	nd[1].conn[CHK_FWD] = CHK_CONN_TIMEOUT;
	nd[0].conn[CHK_REV] = CHK_CONN_TIMEOUT;
	chk_judge(&net, &pb);
	nd[0].flags |= CHK_F_GPU;
	n = chk_verdicts(&net, &vb);
	if (!tap_ok(n == 2 && vb.s &&
			    !strcmp(vb.s, "node=node1 check=gpu value=- "
					  "median=- unit=-\n"
					  "node=node3 check=link-unreachable "
					  "value=- median=- unit=-\n"),
		    "an unreachable node and a GPU problem: no numbers"))
		tap_diag("%d lines: %s", n, vb.s ? vb.s : "");
	ddp_buf_free(&pb);
	ddp_buf_free(&vb);

	ring(&net, nd, 3);
	snprintf(nd[2].host, sizeof(nd[2].host), "node3 check=gpu");
	nd[2].flags = CHK_F_COMM;
	nd[1].flags = CHK_F_COMM;
	n = chk_verdicts(&net, &vb);
	tap_ok(n == 1 && vb.s &&
		       !strcmp(vb.s, "node=node2 check=allreduce value=- "
				     "median=- unit=-\n"),
	       "a host name with a space is left out, not passed on");
	ddp_buf_free(&vb);
}

static void
test_table(void)
{
	static const double throttled[3][2] = {
		{0.0416, 0.839}, {0.00579, 0.00599}, {1.31, 0.0209}};
	struct chk_node nd[3];
	struct chk_net net;
	struct ddp_buf pb = {0};
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	ring(&net, nd, 3);
	speeds(&net, throttled);
	snprintf(nd[1].ranks, sizeof(nd[1].ranks), "2-3");
	snprintf(nd[1].gpus, sizeof(nd[1].gpus), "1b,43");
	chk_judge(&net, &pb);
	f = open_memstream(&text, &len);
	if (!f) {
		tap_ok(0, "open_memstream");
		return;
	}
	chk_print_table(f, &net);
	fclose(f);
	tap_ok(strstr(text, "node   ranks  gpus   next   out GB/s  back GB/s  "
			    "status\n") != NULL,
	       "table header");
	/* node2's row: out = node2 -> node3, back = node3 -> node2. */
	if (!tap_ok(strstr(text, "node2  2-3    1b,43  node3   0.00579     "
				 "0.0209  slow-send,slow-recv\n") != NULL,
		    "node2's row: next, both directions, status"))
		tap_diag("%s", text);
	free(text);
	ddp_buf_free(&pb);
}

static const char *
hosts(void *arg, int rank)
{
	static const char *const h[] = {"node1", "node1", "node2",
					"node2", "node3", "node3"};

	(void)arg;
	return rank >= 0 && rank < 6 ? h[rank] : NULL;
}

/* What rank 0 knows before its communicator exists: itself. */
static const char *
rank0_only(void *arg, int rank)
{
	(void)arg;
	return rank == 0 ? "node1" : NULL;
}

static void
test_explain(void)
{
	static const struct {
		const char *msg;
		const char *want;
	} cases[] = {
		{"rank 4 could not connect to rank 2 at 172.30.77.12:44819 "
		 "(node2): connection timed out (packets dropped?); the "
		 "firewall between the job's nodes must allow TCP between "
		 "them (the slurm-ddp prolog opens it per job)",
		 "rank 4 on node3 cannot reach node2:44819 (timed out)"},
		{"rank 1 (node1) aborted: rank 0 (node1) aborted: rank 4 "
		 "(node3) aborted: rank 4 could not connect to rank 2 at "
		 "172.30.77.12:44819 (node2): Connection refused; the firewall "
		 "...",
		 "rank 4 on node3 cannot reach node2:44819 (refused)"},
		{"rank 0 could not hand the roster to rank 4 at "
		 "172.30.77.13:39611 (node3): connection timed out (packets "
		 "dropped?); the firewall between the job's nodes must allow "
		 "TCP between them (the slurm-ddp prolog opens it per job)",
		 "rank 0 on node1 cannot reach node3:39611 (timed out)"},
		{"rank 3 could not reach rank 0 at node1:29576 "
		 "(MASTER_ADDR:MASTER_PORT) within 2.5 s: connection timed "
		 "out (packets dropped?). Check that rank 0 ...",
		 "rank 3 on node2 cannot reach node1:29576 (timed out)"},
		{"rank 2 could not reach rank 0 at node1:29576 "
		 "(MASTER_ADDR:MASTER_PORT) within 2.5 s: Connection refused. "
		 "Check ...",
		 "rank 2 on node2 cannot reach node1:29576 (refused)"},
		{"rank 2 timed out after 2.5 s waiting for connections from "
		 "ranks 4, 5 on its data port 44819; check that the firewall "
		 "...",
		 "ranks 4, 5 cannot reach node2:44819 (timed out)"},
		{"rank 2 timed out after 2.5 s waiting for connections from "
		 "ranks 5 on its data port 44819; check ...",
		 "rank 5 on node3 cannot reach node2:44819 (timed out)"},
		{"rank 0 gave up: rank 0 timed out after 2.5 s waiting for "
		 "ranks to join at port 29576: 2/6 joined, missing ranks 2, 3, "
		 "4, 5; check that every rank ...",
		 "ranks 2, 3, 4, 5 never reached node1:29576 (timed out)"},
	};
	char out[256];
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		out[0] = '\0';
		if (!tap_ok(chk_explain_rdv(cases[i].msg, hosts, NULL, out,
					    sizeof(out)) == 1 &&
				    strcmp(out, cases[i].want) == 0,
			    "libddp failure %zu: %s", i, cases[i].want))
			tap_diag("got '%s'", out);
	}
	tap_ok(chk_explain_rdv("rank 2 (node2) aborted: rank 2 timed out after "
			       "2.5 s waiting for connections from ranks 4, 5 "
			       "on its data port 44819; check ...",
			       rank0_only, NULL, out, sizeof(out)) == 1 &&
		       strcmp(out, "ranks 4, 5 cannot reach node2:44819 (timed "
				   "out)") == 0,
	       "a failure passed on names the waiting rank's host from the "
	       "message when the roster is unknown");
	snprintf(out, sizeof(out), "untouched");
	tap_ok(chk_explain_rdv("rank 1 (node1) died during allreduce #3", hosts,
			       NULL, out, sizeof(out)) == 0 &&
		       strcmp(out, "untouched") == 0,
	       "another failure is not rewritten");
	tap_ok(chk_explain_rdv("rank 7 could not connect to rank 2 at "
			       "10.0.0.2:41000 (node2): No route to host; ...",
			       hosts, NULL, out, sizeof(out)) == 1 &&
		       strcmp(out, "rank 7 cannot reach node2:41000 (no route "
				   "to host)") == 0,
	       "a rank without a known host is named by its number");
}

int
main(void)
{
	test_options();
	test_text();
	test_judge();
	test_verdicts();
	test_table();
	test_explain();
	return tap_done();
}
