/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ddp-check --json: the option's checks, the escaping of strings (quotes,
 * backslashes, control characters, bytes that are not UTF-8) and every
 * field of the report, for a healthy step, a judged slow node and a check
 * that ended at the rendezvous. Where python3 is there, each report must
 * also load with its json module.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tap.h"

static int
has(const char *text, const char *want)
{
	return text && strstr(text, want) != NULL;
}

static const char *
escaped(const char *s)
{
	static struct ddp_buf b;

	ddp_buf_free(&b);
	chk_json_string(&b, s);
	return b.s;
}

/* 1 when python3 loads text as JSON, 0 when it does not, -1 when there
 * is no python3 to ask. */
static int
python_loads(const char *text)
{
	FILE *p;
	int st;

	if (!text)
		return 0;
	if (system("command -v python3 >/dev/null 2>&1") != 0)
		return -1;
	p = popen("python3 -c 'import json, sys; json.load(sys.stdin)'", "w");
	if (!p)
		return -1;
	fputs(text, p);
	st = pclose(p);
	return st == 0;
}

static void
valid_json(const char *text, const char *what)
{
	int v = python_loads(text);

	if (v < 0)
		tap_ok(1, "# SKIP no python3 to load %s", what);
	else
		tap_ok(v == 1, "python3 loads %s", what);
}

static void
test_option(void)
{
	char *ok[] = {"ddp-check", "--json", "/tmp/out/check.json", NULL};
	char *bare[] = {"ddp-check", "--json=check.json", NULL};
	char *dir[] = {"ddp-check", "--json", "/tmp/", NULL};
	char *empty[] = {"ddp-check", "--json", "", NULL};
	char *none[] = {"ddp-check", "--json", NULL};
	char err[512], longname[300];
	char *toolong[] = {"ddp-check", "--json", longname, NULL};
	struct chk_opts o;

	tap_ok(chk_parse_opts(3, ok, &o, err, sizeof(err)) == 0 && o.json &&
		       strcmp(o.json, "/tmp/out/check.json") == 0,
	       "--json FILE is taken");
	tap_ok(chk_parse_opts(2, bare, &o, err, sizeof(err)) == 0 &&
		       strcmp(o.json, "check.json") == 0,
	       "--json=FILE, a name in the working directory");
	tap_ok(chk_parse_opts(1, bare, &o, err, sizeof(err)) == 0 && !o.json,
	       "no --json: no file");
	tap_ok(chk_parse_opts(3, dir, &o, err, sizeof(err)) < 0 &&
		       has(err, "--json: invalid value '/tmp/' (use the path "
				"of a file"),
	       "a directory's path is refused: %s", err);
	tap_ok(chk_parse_opts(3, empty, &o, err, sizeof(err)) < 0 &&
		       has(err, "--json: invalid value ''"),
	       "an empty path is refused: %s", err);
	tap_ok(chk_parse_opts(2, none, &o, err, sizeof(err)) < 0 &&
		       has(err, "--json needs a value"),
	       "--json without FILE: %s", err);
	memset(longname, 'a', 192);
	longname[192] = '\0';
	tap_ok(chk_parse_opts(3, toolong, &o, err, sizeof(err)) < 0 &&
		       has(err, "at most 191 bytes"),
	       "a file name of 192 bytes is refused");
}

static void
test_strings(void)
{
	tap_ok(strcmp(escaped("node1"), "\"node1\"") == 0, "a plain string");
	tap_ok(strcmp(escaped(NULL), "\"\"") == 0, "NULL is the empty string");
	tap_ok(strcmp(escaped("a\"b\\c"), "\"a\\\"b\\\\c\"") == 0,
	       "quote and backslash are escaped: %s", escaped("a\"b\\c"));
	tap_ok(strcmp(escaped("l1\nl2\tx\r\x01\x1f\x7f"),
		      "\"l1\\nl2\\tx\\u000d\\u0001\\u001f\\u007f\"") == 0,
	       "control characters are escaped: %s",
	       escaped("l1\nl2\tx\r\x01\x1f\x7f"));
	tap_ok(strcmp(escaped("n\xc3\xa9ud \xe2\x82\xac \xf0\x9f\x98\x80"),
		      "\"n\xc3\xa9ud \xe2\x82\xac \xf0\x9f\x98\x80\"") == 0,
	       "well-formed UTF-8 goes through");
	tap_ok(strcmp(escaped("a\xff"
			      "b\xc3"),
		      "\"a\\ufffdb\\ufffd\"") == 0,
	       "a stray byte and a cut sequence become U+FFFD: %s",
	       escaped("a\xff"
		       "b\xc3"));
	tap_ok(strcmp(escaped("\xc0\xaf\xed\xa0\x80"),
		      "\"\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\"") == 0,
	       "overlong forms and surrogates are not UTF-8: %s",
	       escaped("\xc0\xaf\xed\xa0\x80"));
	valid_json(escaped("x\"\\\n\x01\xff\xc3\xa9"), "an escaped string");
}

/* Three nodes of two ranks; node2 sends and receives slowly. */
static void
three_nodes(struct chk_net *net, struct chk_node nd[3])
{
	static const char *names[] = {"node1", "node2", "node3"};
	int i;

	memset(net, 0, sizeof(*net));
	memset(nd, 0, 3 * sizeof(*nd));
	net->n = 3;
	net->node = nd;
	net->ndir = 2;
	net->measured = 1;
	net->fraction = 0.5;
	net->window_s = 0.2;
	for (i = 0; i < 3; i++) {
		snprintf(nd[i].host, sizeof(nd[i].host), "%s", names[i]);
		nd[i].leader = 2 * i;
		nd[i].nranks = 2;
		snprintf(nd[i].ranks, sizeof(nd[i].ranks), "%d-%d", 2 * i,
			 2 * i + 1);
		snprintf(nd[i].gpus, sizeof(nd[i].gpus), "-");
		nd[i].gbps[0] = nd[i].gbps[1] = 1.5;
		nd[i].conn[0] = nd[i].conn[1] = CHK_CONN_OK;
	}
	nd[1].gbps[0] = nd[1].gbps[1] = 0.006;
	nd[0].gbps[0] = nd[2].gbps[1] = 0.006;
}

static void
test_report(void)
{
	struct chk_net net;
	struct chk_node nd[3];
	struct chk_result r;
	struct ddp_buf out = {0}, problems = {0};
	int n;

	three_nodes(&net, nd);
	memset(&r, 0, sizeof(r));
	r.verdict = "ok";
	r.mode = "fail";
	r.job_id = "15";
	r.step_id = "0";
	r.world = 6;
	r.joined = 6;
	r.net = &net;
	r.gpu = "gpu: skipped: --gpu off";
	r.allreduce_s = 0.00125;
	r.allreduce_bytes = 524288;
	r.join_s = 0.5;
	r.network_s = 0.75;
	r.total_s = 1.25;
	nd[1].gbps[0] = nd[1].gbps[1] = 1.5;
	nd[0].gbps[0] = nd[2].gbps[1] = 1.5;
	n = chk_judge(&net, &problems);
	tap_ok(n == 0 && chk_json_report(&r, &out) == 0, "a healthy report");
	tap_diag("%s", out.s);
	tap_ok(has(out.s, "\"verdict\": \"ok\"") &&
		       has(out.s, "\"mode\": \"fail\"") &&
		       has(out.s, "\"job\": \"15\"") &&
		       has(out.s, "\"step\": \"0\"") &&
		       has(out.s, "\"ranks\": 6,") &&
		       has(out.s, "\"ranks_joined\": 6,"),
	       "verdict, mode, job, step, ranks, ranks joined");
	tap_ok(has(out.s, "{\"node\": \"node2\", \"lowest_rank\": 2, "
			  "\"ranks\": \"2-3\", \"gpus\": \"-\", \"next\": "
			  "\"node3\", \"out_gbps\": 1.5, \"back_gbps\": 1.5, "
			  "\"status\": \"ok\"}"),
	       "one object per node, with its table's columns");
	tap_ok(has(out.s, "\"findings\": [],") &&
		       has(out.s, "\"problems\": [],") &&
		       has(out.s, "\"error\": null,"),
	       "no findings, no problems, no error");
	tap_ok(has(out.s, "\"links\": {\"timed\": 6, \"window_s\": 0.2, "
			  "\"median_gbps\": 1.5, \"min_fraction\": 0.5}") &&
		       has(out.s, "\"allreduce\": {\"bytes\": 524288, \"ms\": "
				  "1.25}") &&
		       has(out.s, "\"gpu\": \"gpu: skipped: --gpu off\"") &&
		       has(out.s, "\"timings\": {\"join_s\": 0.5, "
				  "\"network_s\": 0.75, \"total_s\": 1.25}"),
	       "links, allreduce, gpu and timings");
	valid_json(out.s, "a healthy report");

	ddp_buf_free(&out);
	ddp_buf_free(&problems);
	three_nodes(&net, nd);
	n = chk_judge(&net, &problems);
	ddp_buf_printf(&problems, "rank 3 on node2 (GPU 3b): \"cudaInit\" "
				  "failed\\n\n");
	r.verdict = "fail";
	r.problems = problems.s;
	tap_ok(n >= 1 && chk_json_report(&r, &out) == 0, "a failed report");
	tap_diag("%s", out.s);
	tap_ok(has(out.s, "{\"node\": \"node2\", \"rank\": 2, \"ranks\": "
			  "\"2-3\", \"kind\": \"link-send\", \"value\": "
			  "0.006, \"median\": 1.5, \"unit\": \"GB/s\"}") &&
		       has(out.s, "\"kind\": \"link-recv\""),
	       "the slow node's findings with their figures");
	tap_ok(has(out.s, "\"status\": \"slow-send,slow-recv\""),
	       "the node's status words");
	tap_ok(has(out.s, "\"node2: slow sending") &&
		       has(out.s,
			   "\"rank 3 on node2 (GPU 3b): \\\"cudaInit\\\" "
			   "failed\\\\n\""),
	       "each problem line is a string, escaped");
	valid_json(out.s, "a failed report");

	ddp_buf_free(&out);
	memset(&r, 0, sizeof(r));
	r.verdict = "warn";
	r.mode = "warn";
	r.job_id = "16";
	r.step_id = "0";
	r.world = 4;
	r.error = "rank 0 timed out after 30 s waiting for ranks to join";
	r.allreduce_s = -1;
	r.join_s = r.network_s = -1;
	r.total_s = 30.5;
	tap_ok(chk_json_report(&r, &out) == 0, "a check that ended early");
	tap_diag("%s", out.s);
	tap_ok(has(out.s, "\"ranks_joined\": 0,") &&
		       has(out.s, "\"nodes\": [],") &&
		       has(out.s, "\"error\": \"rank 0 timed out") &&
		       has(out.s, "\"links\": {\"timed\": 0, \"window_s\": "
				  "null, \"median_gbps\": null, "
				  "\"min_fraction\": null}") &&
		       has(out.s, "\"allreduce\": {\"bytes\": null, \"ms\": "
				  "null}") &&
		       has(out.s, "\"gpu\": null") &&
		       has(out.s, "\"join_s\": null, \"network_s\": null, "
				  "\"total_s\": 30.5"),
	       "what was not reached is null, the error is named");
	valid_json(out.s, "a check that ended early");
	ddp_buf_free(&out);
	ddp_buf_free(&problems);
	escaped(NULL);
}

int
main(void)
{
	test_option();
	test_strings();
	test_report();
	return tap_done();
}
