/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ddp-check's decisions, apart from any socket or communicator: options,
 * which links are slow and which node is to blame, the table, and the
 * one-line form of libddp's rendezvous failures.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ddp_util.h"
#include "port.h"
#include "verdict.h"

/* ---- options ---- */

void
chk_usage(FILE *f)
{
	fprintf(f,
		"usage: srun --ddp ddp-check [--mode fail|warn|off] "
		"[--min-fraction F]\n"
		"                  [--join-limit J] [--time-limit S] "
		"[--gpu auto|on|off]\n"
		"                  [--link-ms MS] [--port N] [--verbose] "
		"[--verdict-fd FD]\n"
		"                  [--json FILE]\n"
		"  --mode MODE        fail (default): a problem ends every "
		"rank with status 1;\n"
		"                     warn: print it, status 0; off: do "
		"nothing\n"
		"  --min-fraction F   a link below F x the median link is "
		"slow (default 0.5)\n"
		"  --join-limit J     seconds the rendezvous waits for every "
		"rank to start\n"
		"                     and join (default 60)\n"
		"  --time-limit S     hard limit of the check's work after "
		"the join, in\n"
		"                     seconds (default 60)\n"
		"  --gpu MODE         auto (default): where the ranks have "
		"GPUs, a CUDA driver\n"
		"                     and libddp's NCCL backend; on: "
		"required; off: skip\n"
		"  --link-ms MS       how long each link is timed (default "
		"200)\n"
		"  --port N           the rendezvous's port (default: "
		"MASTER_PORT; srun\n"
		"                     --ddp-check gives one of the job's "
		"other ports)\n"
		"  --verdict-fd FD    every rank writes the findings there, "
		"one line per\n"
		"                     problem of a node (node=, check=, "
		"value=, median=, unit=)\n"
		"  --json FILE        rank 0 also writes the report to FILE "
		"as JSON, replacing\n"
		"                     it whole\n"
		"Every rank of the step runs it; rank 0 prints the report. "
		"Exit status 0:\n"
		"healthy (or --mode warn), 1: a problem (the report names the "
		"node), 2: bad\n"
		"options or environment. See ddp-check(1).\n");
}

const char *
chk_mode_name(enum chk_mode m)
{
	return m == CHK_MODE_WARN ? "warn" : m == CHK_MODE_OFF ? "off" : "fail";
}

static int
bad_opt(char *err, size_t errlen, const char *name, const char *val,
	const char *want)
{
	ddp_fmt(err, errlen, "--%s: invalid value '%.64s' (%s)", name, val,
		want);
	return -1;
}

/* Parses all of s as a number; strtod accepts what a user would type. */
static int
parse_double(const char *s, double *out)
{
	char *end = NULL;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v))
		return -1;
	*out = v;
	return 0;
}

/* --mode and --gpu: one of their words. 0, or -1 with err. */
static int
set_word_opt(struct chk_opts *o, int c, const char *arg, char *err,
	     size_t errlen)
{
	switch (c) {
	case 'm':
		if (strcmp(arg, "fail") == 0)
			o->mode = CHK_MODE_FAIL;
		else if (strcmp(arg, "warn") == 0)
			o->mode = CHK_MODE_WARN;
		else if (strcmp(arg, "off") == 0)
			o->mode = CHK_MODE_OFF;
		else
			return bad_opt(err, errlen, "mode", arg,
				       "use fail, warn or off");
		return 0;
	case 'g':
		if (strcmp(arg, "auto") == 0)
			o->gpu = CHK_GPU_AUTO;
		else if (strcmp(arg, "on") == 0)
			o->gpu = CHK_GPU_ON;
		else if (strcmp(arg, "off") == 0)
			o->gpu = CHK_GPU_OFF;
		else
			return bad_opt(err, errlen, "gpu", arg,
				       "use auto, on or off");
		return 0;
	}
	return -1;
}

/* The options with a number: checked against their range. 0, or -1
 * with err. */
static int
set_number_opt(struct chk_opts *o, int c, const char *arg, char *err,
	       size_t errlen)
{
	double f;
	long v;

	switch (c) {
	case 'f':
		if (parse_double(arg, &f) < 0 || !(f > 0) || f > 1)
			return bad_opt(err, errlen, "min-fraction", arg,
				       "use a number in (0, 1], e.g. "
				       "0.5");
		o->min_fraction = f;
		return 0;
	case 't':
		if (ddp_parse_long(arg, 1, 3600, &v) < 0)
			return bad_opt(err, errlen, "time-limit", arg,
				       "use whole seconds from 1 to "
				       "3600, e.g. 60");
		o->time_limit_s = v;
		return 0;
	case 'j':
		if (ddp_parse_long(arg, 1, 3600, &v) < 0)
			return bad_opt(err, errlen, "join-limit", arg,
				       "use whole seconds from 1 to "
				       "3600, e.g. 60");
		o->join_limit_s = v;
		return 0;
	case 'l':
		if (ddp_parse_long(arg, 10, 5000, &v) < 0)
			return bad_opt(err, errlen, "link-ms", arg,
				       "use milliseconds from 10 to "
				       "5000, e.g. 200");
		o->link_ms = v;
		return 0;
	case 'p':
		o->port = ddp_port_parse(arg);
		if (o->port < 0)
			return bad_opt(err, errlen, "port", arg,
				       "use a port from 1 to 65535");
		return 0;
	case 'V':
		/* 0-2 are the report's own streams. */
		if (ddp_parse_long(arg, 3, 1048576, &v) < 0)
			return bad_opt(err, errlen, "verdict-fd", arg,
				       "use an open file descriptor "
				       "from 3 up");
		o->verdict_fd = (int)v;
		return 0;
	}
	return -1;
}

/* --json's FILE: a file's path whose name ddp_write_atomic takes. 0, or
 * -1 with err. Whether its directory is there is the caller's to see. */
static int
json_path_check(const char *path, char *err, size_t errlen)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
		return bad_opt(err, errlen, "json", path,
			       "use the path of a file, e.g. "
			       "check.json");
	if (strlen(base) > CHK_JSON_NAME_MAX)
		return bad_opt(err, errlen, "json", path,
			       "use a file name of at most 191 bytes");
	return 0;
}

static void
opts_default(struct chk_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->mode = CHK_MODE_FAIL;
	o->min_fraction = 0.5;
	o->time_limit_s = 60;
	o->join_limit_s = 60;
	o->gpu = CHK_GPU_AUTO;
	o->link_ms = 200;
	o->verdict_fd = -1;
}

int
chk_parse_opts(int argc, char **argv, struct chk_opts *o, char *err,
	       size_t errlen)
{
	static const struct option longs[] = {
		{"mode", required_argument, NULL, 'm'},
		{"min-fraction", required_argument, NULL, 'f'},
		{"time-limit", required_argument, NULL, 't'},
		{"join-limit", required_argument, NULL, 'j'},
		{"gpu", required_argument, NULL, 'g'},
		{"link-ms", required_argument, NULL, 'l'},
		{"port", required_argument, NULL, 'p'},
		{"verbose", no_argument, NULL, 'v'},
		{"verdict-fd", required_argument, NULL, 'V'},
		{"json", required_argument, NULL, 'J'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int c;

	opts_default(o);
	opterr = 0;
	optind = 0; /* glibc: start over (the unit tests parse many times) */
	while ((c = getopt_long(argc, argv, ":hv", longs, NULL)) != -1) {
		switch (c) {
		case 'm':
		case 'g':
			if (set_word_opt(o, c, optarg, err, errlen) < 0)
				return -1;
			break;
		case 'f':
		case 't':
		case 'j':
		case 'l':
		case 'p':
		case 'V':
			if (set_number_opt(o, c, optarg, err, errlen) < 0)
				return -1;
			break;
		case 'v':
			o->verbose = 1;
			break;
		case 'J':
			if (json_path_check(optarg, err, errlen) < 0)
				return -1;
			o->json = optarg;
			break;
		case 'h':
			return 1;
		case ':':
			ddp_fmt(err, errlen, "%s needs a value (see --help)",
				argv[optind - 1]);
			return -1;
		default:
			ddp_fmt(err, errlen,
				"unknown option '%.64s' (see --help)",
				argv[optind - 1]);
			return -1;
		}
	}
	if (optind < argc) {
		ddp_fmt(err, errlen,
			"unexpected argument '%.64s' (ddp-check takes options "
			"only; see --help)",
			argv[optind]);
		return -1;
	}
	return 0;
}

/* ---- judgement ---- */

int
chk_next(int n, int i)
{
	return (i + 1) % n;
}

int
chk_prev(int n, int i)
{
	return (i + n - 1) % n;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Node that link (i, d) goes to. */
static int
target(const struct chk_net *net, int i, int d)
{
	return d == CHK_FWD ? chk_next(net->n, i) : chk_prev(net->n, i);
}

static int
judge_connections(struct chk_net *net, struct ddp_buf *pb)
{
	struct chk_node *nd = net->node;
	int *fails = calloc((size_t)net->n, sizeof(*fails));
	int i, d, t, problems = 0;

	if (!fails) {
		ddp_buf_printf(pb, "out of memory judging the links\n");
		return 1;
	}
	for (i = 0; i < net->n; i++)
		for (d = 0; d < net->ndir; d++)
			if (nd[i].conn[d] != CHK_CONN_OK)
				fails[target(net, i, d)]++;
	for (i = 0; i < net->n; i++) {
		for (d = 0; d < net->ndir; d++) {
			if (nd[i].conn[d] == CHK_CONN_OK)
				continue;
			t = target(net, i, d);
			ddp_buf_printf(
				pb, "rank %d on %s cannot reach %s:%d (%s)\n",
				nd[i].leader, nd[i].host, nd[t].host,
				nd[t].port, chk_conn_name(nd[i].conn[d]));
			problems++;
			/* Every neighbour failed: the target is the one. */
			if (fails[t] == net->ndir) {
				nd[t].flags |= CHK_F_UNREACHABLE;
			} else {
				nd[i].flags |= CHK_F_CONNECT;
				nd[t].flags |= CHK_F_CONNECT;
			}
		}
	}
	for (t = 0; t < net->n; t++)
		if (fails[t] == net->ndir)
			ddp_buf_printf(pb,
				       "%s: unreachable: no link-test "
				       "connection got through to port %d "
				       "(are the job's ports blocked on it?)\n",
				       nd[t].host, nd[t].port);
	free(fails);
	return problems;
}

static int
slow(const struct chk_net *net, double thr, int i, int d)
{
	return net->node[i].gbps[d] >= 0 && net->node[i].gbps[d] < thr;
}

/*
 * The reference speed: the median over the nodes of each node's fastest
 * link, in or out. The median over the links themselves would do with
 * many nodes, but one bad node touches four of the 2N links of the ring:
 * with three or four nodes that is half of them or more, and the median
 * would be its speed.
 */
static double
reference(const struct chk_net *net, double *best)
{
	const struct chk_node *nd = net->node;
	double g;
	int i, d, t, k = 0;

	for (i = 0; i < net->n; i++)
		best[i] = -1;
	for (i = 0; i < net->n; i++) {
		for (d = 0; d < net->ndir; d++) {
			g = nd[i].gbps[d];
			t = target(net, i, d);
			if (g > best[i])
				best[i] = g;
			if (g > best[t])
				best[t] = g;
		}
	}
	for (i = 0; i < net->n; i++)
		if (best[i] >= 0)
			best[k++] = best[i];
	if (!k)
		return 0;
	qsort(best, (size_t)k, sizeof(*best), cmp_double);
	return k % 2 ? best[k / 2] : (best[k / 2 - 1] + best[k / 2]) / 2;
}

/* Names the links that broke during the test, and counts the measured
 * ones (net->nlinks). Returns the number of problems. */
static int
judge_broken(struct chk_net *net, struct ddp_buf *pb)
{
	struct chk_node *nd = net->node;
	int i, d, t, problems = 0;

	for (i = 0; i < net->n; i++) {
		for (d = 0; d < net->ndir; d++) {
			t = target(net, i, d);
			if (nd[i].broke[d]) {
				ddp_buf_printf(pb,
					       "link %s -> %s broke during the "
					       "test: %s\n",
					       nd[i].host, nd[t].host,
					       strerror(nd[i].broke[d]));
				nd[i].flags |= CHK_F_BROKEN;
				nd[t].flags |= CHK_F_BROKEN;
				problems++;
			}
			if (nd[i].gbps[d] >= 0)
				net->nlinks++;
		}
	}
	return problems;
}

static int
judge_speeds(struct chk_net *net, struct ddp_buf *pb)
{
	struct chk_node *nd = net->node;
	double *best = NULL, thr;
	unsigned char *snd = NULL, *rcv = NULL;
	int i, d, t, problems = 0, p, q;

	best = calloc((size_t)net->n, sizeof(*best));
	snd = calloc((size_t)net->n, 1);
	rcv = calloc((size_t)net->n, 1);
	if (!best || !snd || !rcv) {
		ddp_buf_printf(pb, "out of memory judging the links\n");
		problems = 1;
		goto out;
	}
	problems = judge_broken(net, pb);
	net->median = reference(net, best);
	if (!net->nlinks)
		goto out;
	thr = net->fraction * net->median;
	/* With three nodes or more each node sends to two neighbours and
	 * receives from two: when both are slow, it is the node. */
	for (i = 0; net->ndir == 2 && i < net->n; i++) {
		p = chk_prev(net->n, i);
		q = chk_next(net->n, i);
		snd[i] = slow(net, thr, i, CHK_FWD) &&
			 slow(net, thr, i, CHK_REV);
		rcv[i] = slow(net, thr, p, CHK_FWD) &&
			 slow(net, thr, q, CHK_REV);
		if (snd[i]) {
			nd[i].flags |= CHK_F_SLOW_SEND;
			ddp_buf_printf(pb,
				       "%s: slow sending: %.3g GB/s to %s, "
				       "%.3g GB/s to %s (below %.2f x %.3g "
				       "GB/s)\n",
				       nd[i].host, nd[i].gbps[CHK_FWD],
				       nd[q].host, nd[i].gbps[CHK_REV],
				       nd[p].host, net->fraction, net->median);
			problems++;
		}
		if (rcv[i]) {
			nd[i].flags |= CHK_F_SLOW_RECV;
			ddp_buf_printf(pb,
				       "%s: slow receiving: %.3g GB/s from "
				       "%s, %.3g GB/s from %s (below %.2f x "
				       "%.3g GB/s)\n",
				       nd[i].host, nd[p].gbps[CHK_FWD],
				       nd[p].host, nd[q].gbps[CHK_REV],
				       nd[q].host, net->fraction, net->median);
			problems++;
		}
	}
	for (i = 0; i < net->n; i++) {
		for (d = 0; d < net->ndir; d++) {
			t = target(net, i, d);
			if (!slow(net, thr, i, d) || snd[i] || rcv[t])
				continue;
			nd[i].flags |= CHK_F_SLOW_LINK;
			nd[t].flags |= CHK_F_SLOW_LINK;
			ddp_buf_printf(pb,
				       "link %s -> %s: %.3g GB/s, below %.2f x "
				       "%.3g GB/s\n",
				       nd[i].host, nd[t].host, nd[i].gbps[d],
				       net->fraction, net->median);
			problems++;
		}
	}
out:
	free(best);
	free(snd);
	free(rcv);
	return problems;
}

int
chk_judge(struct chk_net *net, struct ddp_buf *problems)
{
	int n;

	net->median = 0;
	net->nlinks = 0;
	if (net->n < 2)
		return 0;
	n = judge_connections(net, problems);
	if (net->measured)
		n += judge_speeds(net, problems);
	return n;
}

/* ---- verdict lines ---- */

/* A host a verdict line may carry: what Slurm names nodes with. */
static int
plain_host(const char *h)
{
	size_t n =
		strspn(h, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
			  "0123456789._-");

	return n > 0 && h[n] == '\0' && n < CHK_HOST_MAX;
}

/* The fastest link of node i in direction out (1) or in (0), or -1. */
static double
best_link(const struct chk_net *net, int i, int out)
{
	double best = -1, g;
	int j, d;

	for (j = 0; j < net->n; j++) {
		for (d = 0; d < net->ndir; d++) {
			if (out ? j != i : target(net, j, d) != i)
				continue;
			g = net->node[j].gbps[d];
			if (g > best)
				best = g;
		}
	}
	return best;
}

/* The slowest slow link that node i sends or receives on, or -1. */
static double
slowest_slow_link(const struct chk_net *net, int i)
{
	double thr = net->fraction * net->median, worst = -1;
	int j, d;

	for (j = 0; j < net->n; j++) {
		for (d = 0; d < net->ndir; d++) {
			if (j != i && target(net, j, d) != i)
				continue;
			if (slow(net, thr, j, d) &&
			    (worst < 0 || net->node[j].gbps[d] < worst))
				worst = net->node[j].gbps[d];
		}
	}
	return worst;
}

static void
verdict_line(struct ddp_buf *out, const char *host, const char *check,
	     double value, double median)
{
	struct ddp_verdict v;
	char line[DDP_VERDICT_LINE_MAX];

	memset(&v, 0, sizeof(v));
	/* plain_host and the fixed check names keep every field within its
	 * room; "%.3g" of a number fits too. */
	ddp_fmt(v.node, sizeof(v.node), "%s", host);
	ddp_fmt(v.check, sizeof(v.check), "%s", check);
	if (value >= 0 && median > 0) {
		ddp_fmt(v.value, sizeof(v.value), "%.3g", value);
		ddp_fmt(v.median, sizeof(v.median), "%.3g", median);
		ddp_fmt(v.unit, sizeof(v.unit), "gb-per-s");
	} else {
		ddp_fmt(v.value, sizeof(v.value), "-");
		ddp_fmt(v.median, sizeof(v.median), "-");
		ddp_fmt(v.unit, sizeof(v.unit), "-");
	}
	if (ddp_verdict_format(&v, line, sizeof(line)) == 0)
		ddp_buf_printf(out, "%s", line);
}

int
chk_findings(const struct chk_net *net, struct chk_finding *out, int max)
{
	static const struct {
		unsigned flag;
		const char *check;
	} kinds[] = {
		{CHK_F_UNREACHABLE, "link-unreachable"},
		{CHK_F_CONNECT, "link-connect"},
		{CHK_F_SLOW_SEND, "link-send"},
		{CHK_F_SLOW_RECV, "link-recv"},
		{CHK_F_SLOW_LINK, "link-slow"},
		{CHK_F_BROKEN, "link-broken"},
		{CHK_F_GPU, "gpu"},
		{CHK_F_COMM, "allreduce"},
	};
	const struct chk_node *nd;
	double value;
	size_t k;
	int i, found = 0;

	for (i = 0; i < net->n; i++) {
		nd = &net->node[i];
		for (k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
			if (!(nd->flags & kinds[k].flag))
				continue;
			value = -1;
			if (kinds[k].flag == CHK_F_SLOW_SEND)
				value = best_link(net, i, 1);
			else if (kinds[k].flag == CHK_F_SLOW_RECV)
				value = best_link(net, i, 0);
			else if (kinds[k].flag == CHK_F_SLOW_LINK)
				value = slowest_slow_link(net, i);
			if (found < max)
				out[found] = (struct chk_finding){
					i, kinds[k].check, value};
			found++;
		}
	}
	return found;
}

int
chk_verdicts(const struct chk_net *net, struct ddp_buf *out)
{
	struct chk_finding *f;
	const char *host;
	int n, k, lines = 0;

	n = chk_findings(net, NULL, 0);
	f = n ? calloc((size_t)n, sizeof(*f)) : NULL;
	if (!f)
		return 0;
	chk_findings(net, f, n);
	for (k = 0; k < n; k++) {
		host = net->node[f[k].node].host;
		if (!plain_host(host))
			continue;
		verdict_line(out, host, f[k].kind, f[k].value, net->median);
		lines++;
	}
	free(f);
	return lines;
}

/* ---- the table ---- */

void
chk_status_words(unsigned flags, char *buf, size_t len)
{
	static const struct {
		unsigned flag;
		const char *word;
	} words[] = {
		{CHK_F_UNREACHABLE, "unreachable"},
		{CHK_F_CONNECT, "connect"},
		{CHK_F_SLOW_SEND, "slow-send"},
		{CHK_F_SLOW_RECV, "slow-recv"},
		{CHK_F_SLOW_LINK, "slow-link"},
		{CHK_F_BROKEN, "broken"},
		{CHK_F_GPU, "gpu"},
		{CHK_F_COMM, "comm"},
	};
	size_t i;

	ddp_fmt(buf, len, "%s", flags ? "" : "ok");
	for (i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
		if (!(flags & words[i].flag))
			continue;
		if (ddp_fmt_cat(buf, len, "%s%s", buf[0] ? "," : "",
				words[i].word) < 0)
			return;
	}
}

static void
fmt_gbps(char *buf, size_t len, double g)
{
	if (g < 0)
		ddp_fmt(buf, len, "-");
	else
		ddp_fmt(buf, len, "%.3g", g);
}

static int
max_int(int a, int b)
{
	return a > b ? a : b;
}

void
chk_print_table(FILE *f, const struct chk_net *net)
{
	const struct chk_node *nd = net->node;
	char out[32], back[32], st[128];
	int wn = 4, wr = 5, wg = 4, i, q;

	for (i = 0; i < net->n; i++) {
		wn = max_int(wn, (int)strlen(nd[i].host));
		wr = max_int(wr, (int)strlen(nd[i].ranks));
		wg = max_int(wg, (int)strlen(nd[i].gpus));
	}
	fprintf(f, "%-*s  %-*s  %-*s  %-*s  %8s  %9s  %s\n", wn, "node", wr,
		"ranks", wg, "gpus", wn, "next", "out GB/s", "back GB/s",
		"status");
	for (i = 0; i < net->n; i++) {
		q = chk_next(net->n, i);
		/* back: next -> this node, which the next node sent to its
		 * previous one (or, with two nodes, in the same stream). */
		fmt_gbps(out, sizeof(out),
			 net->n > 1 ? nd[i].gbps[CHK_FWD] : -1);
		fmt_gbps(back, sizeof(back),
			 net->n < 2	  ? -1
			 : net->ndir == 1 ? nd[q].gbps[CHK_FWD]
					  : nd[q].gbps[CHK_REV]);
		chk_status_words(nd[i].flags, st, sizeof(st));
		fprintf(f, "%-*s  %-*s  %-*s  %-*s  %8s  %9s  %s\n", wn,
			nd[i].host, wr, nd[i].ranks, wg, nd[i].gpus, wn,
			net->n > 1 ? nd[q].host : "-", out, back, st);
	}
}

int
chk_ranges(const int *ranks, int n, char *buf, size_t len)
{
	int i = 0, j, rc;

	buf[0] = '\0';
	while (i < n) {
		for (j = i; j + 1 < n && ranks[j + 1] == ranks[j] + 1; j++)
			;
		if (j == i)
			rc = ddp_fmt_cat(buf, len, "%s%d", buf[0] ? "," : "",
					 ranks[i]);
		else
			rc = ddp_fmt_cat(buf, len, "%s%d-%d", buf[0] ? "," : "",
					 ranks[i], ranks[j]);
		if (rc < 0) {
			if (len >= 4)
				ddp_fmt(buf + len - 4, 4, "...");
			return -1;
		}
		i = j + 1;
	}
	return 0;
}

int
chk_gpus_add(char *list, size_t len, const char *busid)
{
	size_t bl;
	const char *p;

	if (!busid || !*busid || strcmp(busid, "-") == 0)
		return 0;
	bl = strlen(busid);
	for (p = list; (p = strstr(p, busid)); p += bl)
		if ((p == list || p[-1] == ',') &&
		    (p[bl] == '\0' || p[bl] == ','))
			return 0;
	return ddp_fmt_cat(list, len, "%s%s", list[0] ? "," : "", busid);
}

/* 0000:BB:00.0 */
static int
short_form(const char *s, size_t n)
{
	return n == 12 && strncmp(s, "0000:", 5) == 0 &&
	       isxdigit((unsigned char)s[5]) && isxdigit((unsigned char)s[6]) &&
	       strncmp(s + 7, ":00.0", 5) == 0;
}

void
chk_gpus_finish(char *list, size_t len)
{
	char out[160];
	const char *p, *e;

	if (!*list) {
		ddp_fmt(list, len, "-");
		return;
	}
	for (p = list; *p; p = *e ? e + 1 : e) {
		e = strchr(p, ',');
		if (!e)
			e = p + strlen(p);
		if (!short_form(p, (size_t)(e - p)))
			return;
	}
	out[0] = '\0';
	for (p = list; *p; p = *e ? e + 1 : e) {
		e = strchr(p, ',');
		if (!e)
			e = p + strlen(p);
		if (ddp_fmt_cat(out, sizeof(out), "%s%.2s", out[0] ? "," : "",
				p + 5) < 0)
			return;
	}
	ddp_fmt(list, len, "%s", out);
}

/* ---- libddp's rendezvous failures ---- */

/* The rank number in "rank N" just before p, or -1. */
static int
rank_before(const char *msg, const char *p)
{
	const char *s = p;
	char num[16];
	long v;

	while (s > msg && s[-1] >= '0' && s[-1] <= '9')
		s--;
	if (s == p || (size_t)(p - s) >= sizeof(num) || s - msg < 5 ||
	    strncmp(s - 5, "rank ", 5) != 0)
		return -1;
	memcpy(num, s, (size_t)(p - s));
	num[p - s] = '\0';
	return ddp_parse_long(num, 0, 0x7fffffff, &v) < 0 ? -1 : (int)v;
}

/* Copies s up to the first occurrence of stop (all of s if none). */
static int
copy_until(char *out, size_t outlen, const char *s, const char *stop)
{
	const char *e = stop ? strstr(s, stop) : NULL;
	size_t n = e ? (size_t)(e - s) : strlen(s);

	if (n >= outlen)
		return -1;
	memcpy(out, s, n);
	out[n] = '\0';
	return 0;
}

/* The rank of "rank W timed out after ..." that ends at p, or -1. */
static int
waiter(const char *msg, const char *p)
{
	static const char tail[] = " timed out after ";
	const char *t, *last = NULL;

	for (t = strstr(msg, tail); t && t < p; t = strstr(t + 1, tail))
		last = t;
	return last ? rank_before(msg, last) : -1;
}

static const char *
reason_of(const char *s)
{
	if (strstr(s, "refused"))
		return "refused";
	if (strstr(s, "timed out"))
		return "timed out";
	if (strstr(s, "No route to host"))
		return "no route to host";
	if (strstr(s, "cannot resolve"))
		return "name not resolved";
	return "failed";
}

/*
 * The host of rank r: from host_of, else from the message itself, where a
 * rank that passed the failure on wrote "rank R (HOST) aborted: ...".
 * host is a buffer of CHK_HOST_MAX bytes; returns NULL when neither knows.
 */
static const char *
host_of_rank(const char *msg, int r, chk_host_fn *host_of, void *arg,
	     char *host)
{
	const char *h = host_of ? host_of(arg, r) : NULL;
	char tag[32];

	if (h && *h)
		return h;
	if (ddp_fmt(tag, sizeof(tag), "rank %d (", r) < 0 ||
	    !(h = strstr(msg, tag)) ||
	    copy_until(host, CHK_HOST_MAX, h + strlen(tag), ")") < 0 ||
	    !host[0])
		return NULL;
	return host;
}

static void
rank_on(char *out, size_t len, int rank, chk_host_fn *host_of, void *arg)
{
	const char *h = host_of ? host_of(arg, rank) : NULL;

	if (h && *h)
		ddp_fmt(out, len, "rank %d on %s", rank, h);
	else
		ddp_fmt(out, len, "rank %d", rank);
}

int
chk_explain_rdv(const char *msg, chk_host_fn *host_of, void *arg, char *out,
		size_t outlen)
{
	static const char p_master[] = " could not reach rank 0 at ";
	/* libddp's dial to a peer: the mesh's connect, or the roster's
	 * hand-down from a rank's parent in the rendezvous tree. */
	static const char *const p_peer[] = {" could not connect to rank ",
					     " could not hand the roster to "
					     "rank "};
	static const char p_data[] = " waiting for connections from ranks ";
	static const char p_join[] = " waiting for ranks to join at port ";
	char who[CHK_HOST_MAX + 32], addr[CHK_HOST_MAX + 16];
	char host[CHK_HOST_MAX], list[256];
	const char *p, *port, *h;
	long v;
	int r;

	if ((p = strstr(msg, p_master)) && (r = rank_before(msg, p)) >= 0 &&
	    copy_until(addr, sizeof(addr), p + strlen(p_master),
		       " (MASTER_ADDR") == 0) {
		rank_on(who, sizeof(who), r, host_of, arg);
		p = strstr(p, " s: ");
		return ddp_fmt(out, outlen, "%s cannot reach %s (%s)", who,
			       addr, reason_of(p ? p : "")) == 0;
	}
	p = strstr(msg, p_peer[0]);
	if (!p)
		p = strstr(msg, p_peer[1]);
	if (p && (r = rank_before(msg, p)) >= 0 && (p = strstr(p, " at ")) &&
	    copy_until(addr, sizeof(addr), p + 4, " (") == 0 &&
	    (port = strrchr(addr, ':')) && (p = strstr(p, " (")) &&
	    copy_until(host, sizeof(host), p + 2, ")") == 0) {
		rank_on(who, sizeof(who), r, host_of, arg);
		p = strstr(p, "): ");
		return ddp_fmt(out, outlen, "%s cannot reach %s%s (%s)", who,
			       host, port, reason_of(p ? p : "")) == 0;
	}
	if ((p = strstr(msg, p_data)) && (r = waiter(msg, p)) >= 0 &&
	    copy_until(list, sizeof(list), p + strlen(p_data),
		       " on its data port ") == 0 &&
	    (port = strstr(p, " on its data port "))) {
		h = host_of_rank(msg, r, host_of, arg, host);
		port += strlen(" on its data port ");
		if (ddp_parse_long(list, 0, 0x7fffffff, &v) == 0)
			rank_on(who, sizeof(who), (int)v, host_of, arg);
		else
			ddp_fmt(who, sizeof(who), "ranks %s", list);
		if (copy_until(addr, sizeof(addr), port, ";") < 0)
			return 0;
		return ddp_fmt(out, outlen, "%s cannot reach %s:%s (timed out)",
			       who, h && *h ? h : "its peer", addr) == 0;
	}
	if ((p = strstr(msg, p_join)) &&
	    copy_until(addr, sizeof(addr), p + strlen(p_join), ":") == 0 &&
	    (p = strstr(p, "missing ranks ")) &&
	    copy_until(list, sizeof(list), p + strlen("missing ranks "), ";") ==
		    0) {
		h = host_of ? host_of(arg, 0) : NULL;
		return ddp_fmt(out, outlen,
			       "rank%s %s never reached %s:%s (timed out)",
			       strchr(list, ',') ? "s" : "", list,
			       h && *h ? h : "rank 0", addr) == 0;
	}
	return 0;
}
