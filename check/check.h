/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ddp-check's internals: the options, the link test's sockets (links.c)
 * and the judgement and report (report.c), which are pure functions over
 * the numbers the ranks gathered, so the unit tests can drive them.
 * Nothing here is thread-safe unless it says so.
 */
#ifndef DDP_CHECK_H
#define DDP_CHECK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ddp_guard.h"
#include "ddp_util.h"

#define CHK_TOKEN_LEN 32
#define CHK_HOST_MAX 256
#define CHK_TEXT_LEN 1024
/* The longest file name --json takes: ddp_write_atomic's. */
#define CHK_JSON_NAME_MAX 191

/* ---- options (report.c) ---- */

enum chk_mode {
	CHK_MODE_FAIL = 0, /* problems: exit 1 on every rank */
	CHK_MODE_WARN = 1, /* problems are printed, exit 0 */
	CHK_MODE_OFF = 2,  /* do nothing, exit 0 */
};

enum chk_gpu_mode {
	CHK_GPU_AUTO = 0, /* when a rank has a GPU, a driver and the backend */
	CHK_GPU_ON = 1,	  /* required: its absence is a problem */
	CHK_GPU_OFF = 2,
};

struct chk_opts {
	enum chk_mode mode;
	double min_fraction; /* links below this x the reference are slow */
	long join_limit_s;   /* the rendezvous's limit: launch skew */
	long time_limit_s;   /* hard limit of the check after the join */
	enum chk_gpu_mode gpu;
	long link_ms; /* each direction's stream */
	int verbose;
	long port;	  /* --port: the rendezvous's port; 0: MASTER_PORT's */
	int verdict_fd;	  /* --verdict-fd: where every rank writes the
			     findings (chk_verdicts); -1: nowhere */
	const char *json; /* --json: rank 0 writes the report there as JSON
			     (chk_json_report); NULL: nowhere. Borrowed
			     from argv. */
};

/*
 * Parses argv (getopt_long; long options also as --name=value) into o,
 * starting from the defaults. Returns 0 to run, 1 for --help, or -1 with
 * err naming the option, the value and what is accepted.
 */
int chk_parse_opts(int argc, char **argv, struct chk_opts *o, char *err,
		   size_t errlen);
void chk_usage(FILE *f);
const char *chk_mode_name(enum chk_mode m);

/* ---- the link test (links.c) ---- */

/* Outcome of one link-test connection; also sent between ranks. */
enum chk_conn {
	CHK_CONN_NONE = 0, /* not attempted */
	CHK_CONN_OK = 1,
	CHK_CONN_REFUSED = 2,
	CHK_CONN_TIMEOUT = 3,
	CHK_CONN_UNRESOLVED = 4,
	CHK_CONN_ERROR = 5,
};

/* "refused", "timed out", ... */
const char *chk_conn_name(int code);

/*
 * Directions of the ring: [0] to the next node, [1] to the previous, and
 * a warm-up connection to the next node whose stream is not counted: on
 * the minicluster the first stream of a process runs at about two thirds
 * of the speed of later ones, whichever direction it takes.
 */
#define CHK_FWD 0
#define CHK_REV 1
#define CHK_WARM 2
#define CHK_NDIRS 3

struct chk_target {
	const char *host; /* borrowed */
	int port;
	int node; /* its index in the ring */
};

/* Told a line about connections the listener refused (another token, a
 * flood): one line per refusal for the first few, then a summary line at
 * most every 10 s and one when chk_ring_connect ends. */
typedef void chk_refuse_fn(void *arg, const char *line);

struct chk_ring {
	int lfd;
	int lport;
	int out[CHK_NDIRS];  /* connected to the targets, this node sends */
	int in[CHK_NDIRS];   /* accepted from the sources, this node receives */
	int conn[CHK_NDIRS]; /* enum chk_conn of out[d] */
	int conn_errno[CHK_NDIRS];
	chk_refuse_fn *refused;
	void *refused_arg;
	struct ddp_guard_refusals ref; /* chk_ring_connect sets its log */
};

/* Sets every descriptor to -1. */
void chk_ring_init(struct chk_ring *r);

/*
 * Opens the listener on an ephemeral port (IPv6 dual-stack where it can,
 * else IPv4). Returns 0, or -1 with err.
 */
int chk_ring_listen(struct chk_ring *r, char *err, size_t errlen);

/*
 * Connects out[d] to to[d] and accepts in[d] from from[d], d < ndir, and
 * the warm-up pair (CHK_WARM, to and from as CHK_FWD), until every one is
 * there or deadline (ddp_now() seconds) passes. Each connection
 * opens with token and this node's index and direction; an accepted one
 * that does not is refused (r->refused is told) and waiting goes on.
 * Returns 0 when all are up, else -1 (the outcome of each connect in
 * r->conn).
 */
int chk_ring_connect(struct chk_ring *r, int me, int ndir,
		     const struct chk_target to[2],
		     const struct chk_target from[2],
		     const uint8_t token[CHK_TOKEN_LEN], double deadline);

/*
 * Streams on out[d] until the far receiver ends it, and receives on in[d]:
 * from the first byte for window_s seconds, then ends that stream. So
 * both directions are timed where the bytes arrive, whenever each sender
 * starts. The receiver first sends one byte back on in[d], and the sender
 * starts on it: a link's stream starts when both of its ends are done
 * with their earlier streams, so calling it for each direction in turn
 * times every node's links one direction at a time with no barrier over
 * the ranks. *gbps: bytes received / the time from the first byte. A
 * stream that broke, or that brought nothing before deadline, leaves its
 * errno in *recv_err (ETIMEDOUT for the latter). Returns 0, or -1 then.
 * Closes both connections of d.
 */
int chk_ring_stream(struct chk_ring *r, int d, double window_s, double deadline,
		    double *gbps, int *recv_err);

/* Closes everything; safe to call twice. */
void chk_ring_close(struct chk_ring *r);

/*
 * The node's hold: while its leader times the links, a node's other ranks
 * wait blocked on a Unix socket rather than in libddp, whose waits wake
 * to poll their peers, so the timings do not depend on how many ranks a
 * node has. The leader opens it (an abstract name in the node's network
 * namespace, derived from token and the node's index, so it can be
 * neither guessed before nor read back into the token), the others join
 * it, and closing it releases them all at once: the leader never accepts.
 * chk_hold_open returns the listener, or -1 with err; chk_hold_join the
 * joined socket, or -1 (then the rank waits in libddp as before);
 * chk_hold_wait returns 0 once fd is released (or its leader died), -1 at
 * deadline.
 */
int chk_hold_open(const uint8_t token[CHK_TOKEN_LEN], int node, char *err,
		  size_t errlen);
int chk_hold_join(const uint8_t token[CHK_TOKEN_LEN], int node);
int chk_hold_wait(int fd, double deadline);

/* ---- judgement and report (report.c) ---- */

/* Problem flags of a node. */
#define CHK_F_SLOW_SEND 0x01u
#define CHK_F_SLOW_RECV 0x02u
#define CHK_F_SLOW_LINK 0x04u
#define CHK_F_UNREACHABLE 0x08u
#define CHK_F_CONNECT 0x10u /* one link-test connection failed */
#define CHK_F_BROKEN 0x20u  /* a stream broke during the test */
#define CHK_F_GPU 0x40u
#define CHK_F_COMM 0x80u /* a collective over the ranks failed */

/* What rank 0 knows about one node. */
struct chk_node {
	char host[CHK_HOST_MAX];
	int leader; /* its lowest rank: the one that tests its links */
	int nranks;
	char ranks[96]; /* "0-3" */
	char gpus[160]; /* the ranks' GPU PCI bus ids, compact */
	int port;	/* the leader's link-test listener */
	int conn[2];	/* enum chk_conn of its connection to next, prev */
	double gbps[2]; /* this node -> next, -> prev; < 0: not measured */
	int broke[2];	/* errno of a stream that broke (send side) */
	unsigned flags;
};

struct chk_net {
	int n; /* nodes, in ring order */
	struct chk_node *node;
	int ndir;	 /* 1 for two nodes (both ways at once), else 2 */
	int measured;	 /* the streams ran */
	double fraction; /* of the reference, below which a link is slow */
	/* The reference (chk_judge): the median over the nodes of each
	 * node's fastest link, GB/s. */
	double median;
	int nlinks;	 /* measured links */
	double window_s; /* each stream's length */
};

/* The ring's neighbours of node i. */
int chk_next(int n, int i);
int chk_prev(int n, int i);

/*
 * Judges the links: sets each node's flags and appends one line per
 * problem to problems ("rank R on NODE cannot reach NODE2:PORT (timed
 * out)", "node2: slow sending: 0.006 GB/s to node3, 0.006 GB/s to node1
 * (below 0.50 x 1.55 GB/s)", ...). A link is slow below fraction x the
 * median over the nodes of each node's fastest link; a node whose two
 * outgoing (or incoming) links are both slow is the one to blame, other
 * slow links name both ends. Returns the number of problems found.
 */
int chk_judge(struct chk_net *net, struct ddp_buf *problems);

/*
 * The findings of a judged net as verdict lines, one per problem of a
 * node, appended to out:
 *   node=<host> check=<token> value=<number|-> median=<number|-> unit=<token|->
 * check is link-send, link-recv, link-slow (the node's value is its
 * slowest slow link), link-unreachable, link-connect, link-broken, gpu or
 * allreduce; link speeds are in unit gb-per-s (GB/s) against net->median,
 * the others carry no number. A host that is not a plain node name
 * ([A-Za-z0-9._-], at most CHK_HOST_MAX - 1) is left out. Appends nothing
 * when no node has a flag. Returns the number of lines.
 */
int chk_verdicts(const struct chk_net *net, struct ddp_buf *out);

/* One finding of a judged net: a problem flag of a node. */
struct chk_finding {
	int node;	  /* its index in net->node */
	const char *kind; /* chk_verdicts' check name, static */
	double value;	  /* GB/s of the link speeds, else -1 */
};

/*
 * The findings of a judged net, in chk_verdicts' order (whatever their
 * host names): the first max into out (NULL when max is 0). Returns how
 * many there are, which may be more than max.
 */
int chk_findings(const struct chk_net *net, struct chk_finding *out, int max);

/* The table (one row per node), with a header line. */
void chk_print_table(FILE *f, const struct chk_net *net);

/* "ok", or the node's problems as short words ("slow-send,gpu"). */
void chk_status_words(unsigned flags, char *buf, size_t len);

/*
 * Ranks as ranges ("0-3,8"); ranks must be ascending. Returns 0, or -1
 * when buf is too small (it then ends with "...").
 */
int chk_ranges(const int *ranks, int n, char *buf, size_t len);

/*
 * Appends busid to a node's GPU list unless it is there already; "-" and
 * "" are skipped. Ids of the form 0000:BB:00.0 are shown as BB when every
 * id of the list has that form (chk_gpus_finish). Returns 0 or -1 (full).
 */
int chk_gpus_add(char *list, size_t len, const char *busid);
void chk_gpus_finish(char *list, size_t len);

/*
 * Recognises libddp's rendezvous failures in msg (also when another rank
 * reported them: "rank 2 (node3) aborted: ...") and writes the check's
 * form into out: "rank R on NODE cannot reach NODE2:PORT (timed out)".
 * host_of maps a rank to its node name or NULL. Returns 1 when msg was
 * recognised, else 0 with out unchanged.
 */
typedef const char *chk_host_fn(void *arg, int rank);
int chk_explain_rdv(const char *msg, chk_host_fn *host_of, void *arg, char *out,
		    size_t outlen);

/* ---- the collectives after the link test (plan.c) ---- */

/* The slowest measured link of net in GB/s, -1 when none was measured. */
double chk_slowest_gbps(const struct chk_net *net);

/* The most ranks a node of net has, at least 1. */
int chk_most_ranks(const struct chk_net *net);

/* The steps of a recursive doubling over world ranks: ceil(log2 world). */
int chk_doublings(int world);

/*
 * The expected seconds of an allreduce of bytes per rank over world
 * ranks on the slowest measured link: recursive doubling sends the whole
 * buffer once per doubling, and every rank of the fullest node sends
 * through the node's one link. 0 when no link was measured.
 */
double chk_collective_s(const struct chk_net *net, int world, double bytes);

/*
 * How long libddp may wait for a peer in that allreduce: a quarter of the
 * time limit (at least 1 s), or four times the expected seconds where
 * that is longer, but then at most remaining_s - 1 (the time limit left),
 * so a rank that never enters is still named before the time limit ends
 * the check.
 */
double chk_wait_s(const struct chk_net *net, int world, double bytes,
		  double time_limit_s, double remaining_s);

/* 1 when any of the len values of row is not zero. */
int chk_row_used(const double *row, size_t len);

/* ---- the report as JSON (json.c) ---- */

/* What ddp-check --json writes; every pointer is borrowed. */
struct chk_result {
	const char *verdict; /* "ok", "warn" or "fail" */
	const char *mode;    /* chk_mode_name's */
	const char *job_id;
	const char *step_id;
	int world;  /* ranks in the step */
	int joined; /* ranks that joined the rendezvous: world, or 0 */
	/* The nodes, judged, or NULL when the check ended before it knew
	 * them. */
	const struct chk_net *net;
	const char *problems; /* the report's lines, '\n' after each */
	const char *error;    /* what ended the check early, or NULL */
	const char *gpu;      /* the report's gpu line, or NULL */
	double allreduce_s;   /* < 0: it did not run */
	size_t allreduce_bytes;
	/* Rank 0's seconds from its start: joined, the network part done,
	 * the report; < 0 where the check did not get there. */
	double join_s;
	double network_s;
	double total_s;
};

/*
 * Appends s to out as a JSON string, quoted: '"', '\\' and the control
 * characters escaped, a byte that is not part of well-formed UTF-8 as
 * U+FFFD. s NULL is "".
 */
void chk_json_string(struct ddp_buf *out, const char *s);

/*
 * Appends r as one JSON object to out: verdict, mode, job, step, ranks,
 * ranks_joined, nodes (node, lowest_rank, ranks, gpus, next, out_gbps,
 * back_gbps, status), findings (chk_findings: node, rank (the node's
 * lowest), ranks, kind, value, median, unit), problems (strings), error,
 * links, allreduce, gpu and timings; what was not measured is null.
 * Returns 0, or -1 when out ran out of memory.
 */
int chk_json_report(const struct chk_result *r, struct ddp_buf *out);

/* ---- --json's file (json_file.c) ---- */

/*
 * Rank 0, before the rendezvous: whether --json's path can be written (not
 * a directory; its directory exists and is writable), so a typo costs
 * seconds, not the whole check. 0, or -1 having said why on stderr,
 * naming path.
 */
int chk_json_path_usable(const char *path);

/* res as JSON (chk_json_report) into path, whole or not at all. 0, or -1
 * having said why on stderr, naming path. */
int chk_json_write(const char *path, const struct chk_result *res);

/* ---- the wait for the ranks to join (progress.c) ---- */

/* The most nodes (or ranks) the progress line names; the rest it
 * counts. */
#define CHK_PROGRESS_NAMES 5

/* n in decimal with a comma between each group of three digits
 * ("1,024"), cut to fit len. */
void chk_thousands(long n, char *buf, size_t len);

/* The step's nodes and how many of its ranks each one runs. */
struct chk_expect {
	int n;
	char **host;	 /* n names, owned */
	unsigned *ranks; /* n counts, owned */
};

/*
 * Reads the step's node list (SLURM_STEP_NODELIST's syntax) and tasks
 * per node ("2(x3),1") into e, which the caller frees with
 * chk_expect_free. Returns 0, or -1 with e empty when either is NULL or
 * malformed, or they disagree with each other or with world.
 */
int chk_expect_parse(const char *nodelist, const char *tasks, int world,
		     struct chk_expect *e);
void chk_expect_free(struct chk_expect *e);

/*
 * The progress line (no newline) into buf: "ddp-check: 412 of 1,024
 * ranks joined; waiting for node7, node9", naming at most
 * CHK_PROGRESS_NAMES nodes of e that have fewer ranks joined than they
 * run, then "and N more". host[r] is the node rank r joined from, NULL
 * for one that has not (world of them, as libddp tells them). Where e is
 * NULL or empty, or none of its names is one the ranks joined from, the
 * missing ranks are named instead ("waiting for ranks 3, 5").
 */
void chk_progress_line(const struct chk_expect *e, int world,
		       const char *const *host, char *buf, size_t len);

#endif
