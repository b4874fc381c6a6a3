/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The first failure of a --ddp step without Slurm: what a failed task's
 * slurmstepd tells srun, how srun checks and orders those reports, whom
 * a failure blames, the line srun prints and the record a restart
 * supervisor reads (DDP_RESTART_REPORT). plugin/failure.c asks Slurm for
 * the task's exit and moves the reports; everything it decides is here.
 *
 * The report, one line from a node's slurmstepd to srun over TCP:
 *   NONCE RANK NODE HOW TIME NODES STEP_NODES[ BY NAMED NAMED_HOST WHY]\n
 * NONCE is the step's SLURM_DDP_FAILURE_NONCE (DDP_FAILURE_NONCE_HEX lowercase
 * hex digits), HOW "exit:N" (N 1-255) or "signal:N" (N 1-64), followed by
 * ":oom" for a SIGKILL while the kernel's OOM-kill count rose, or by
 * ":memory-error" for a SIGBUS while the node's memory-error counts rose
 * (kevents.h: what slurmstepd read of its own kernel, never what the task
 * says), TIME CLOCK_REALTIME seconds with milliseconds ("1764240000.123"),
 * NODES and STEP_NODES the step's node count and Slurm host list (of at
 * most 65536 hosts), which srun alone does not know when the step ends.
 * A task that stopped cleanly (stop.h: it exited DDP_STOP_EXIT_STATUS
 * after writing its stop note) is reported with HOW "stop" and, in place
 * of a naming, its note's three fields:
 *   NONCE RANK NODE stop TIME NODES STEP_NODES STEP STOP_WHY CKPT_MS\n
 * STEP the steps synchronised when the stop was agreed, STOP_WHY the
 * rank's own reason (ddp_stop_why_name's word: "time-limit", "sigusr1",
 * "agreed", ...), CKPT_MS the milliseconds its checkpoint took. A stop
 * is no failure: it never ends the step, never has a cause, never
 * blames a node, and its record's cause= is "stop" (how=exit:75).
 * The four optional fields, all or none, are the naming: a task of the
 * node (rank BY) wrote to its DDP_FAILURE_FD that it failed because of
 * rank NAMED on NAMED_HOST (as libddp knows the host), WHY "lost", "hang",
 * "unreachable" or "behind" (a hang survey found NAMED still in an
 * earlier call, itself waiting: libddp(3)); the naming line is "BY names
 * NAMED NAMED_HOST WHY".
 *
 * The record, one line in the file DDP_RESTART_REPORT names:
 *   rank=2 node=node3 how=signal:9 time=1764240000.123 blame=node3 nodes=4
 *   step_nodes=node[1-4] why= cause=node
 * (one line, the fields in this order, blame= empty when no node is to
 * blame). why= is empty when HOW is what happened to the rank, else the
 * WHY of the naming that made it the cause ("hang": the rank hangs, and
 * HOW is how the rank that named it, or the rank itself, ended). cause=
 * is the cause's class (below); blame= is set for cause=node alone.
 *
 * The cause's class: what the evidence says failed, from what srun and
 * slurmstepd can verify, never from what the program could choose (it
 * chooses how it dies: abort(), a NULL dereference, kill(getpid(), ...)):
 *   exit   a rank exited with a non-zero status by itself;
 *   crash  a rank was killed by a signal, not proven otherwise (SIGSEGV,
 *          SIGABRT, SIGKILL that no OOM kill explains, SIGBUS that no
 *          memory error explains, ...);
 *   oom    SIGKILL while the kernel's OOM-kill count rose: the job's
 *          memory;
 *   hang   a rank a hang survey names or one named unreachable, while its
 *          node still reported and it named no rank of another node (the
 *          node was up: the rank was stopped, hung or far behind);
 *   stop   SIGTERM, SIGINT or SIGHUP: Slurm (scancel, time limits) or a
 *          person ended it;
 *   node   the node: a SIGBUS while its kernel's memory-error counts rose,
 *          or a rank named lost, unreachable or hung by ranks of other
 *          nodes while no report came from its node (the node or its
 *          link was gone), or that itself named a rank of another node
 *          so (a cut link, the side with more ranks deciding).
 *   stop   also a task that stopped cleanly (the report's HOW "stop"),
 *          which is never the cause of a failure: a failure among the
 *          step's reports wins over every stop (ddp_failure_set_cause
 *          sees only failures; ddp_failure_set_stopped only answers when
 *          there is none).
 * Only node blames a node (restart.h: --ddp-restart leaves it out); the
 * others blame the program, and --ddp-restart-on chooses which of them
 * are run again on the same nodes.
 *
 * The cause of a step's failure, from all its reports (ddp_failure_set):
 * 1. The earliest report, when it is a signal death other than SIGTERM,
 *    SIGINT and SIGHUP: it is the cause, its class from its HOW.
 * 2. Else the earliest report that carries a naming names rank R, unless
 *    the reports name another rank more often: then R is that rank and
 *    the naming the earliest that names it. (A cut link: the ranks on
 *    the other side of it name R, and R, which timed out as they did,
 *    names one of them; the side with more ranks decides.) A naming
 *    that names a waiter (WHY "behind") counts as the naming of the
 *    waiter's own report, when it has one with a naming, and so on
 *    along the chain, which stops before a rank it has passed or the
 *    naming rank itself: a ring's rank beside a cut one waits for it in
 *    an earlier call, and the ranks waiting for that one blame the cut
 *    rank through it. A chain that ends at a waiter without a naming of
 *    its own blames that waiter, the best known, unless another
 *    report's chain ends at a rank named silent or gone: the earliest of
 *    those is then the naming (an abort may reach a waiter before its
 *    own timeout, and it names no one). (Out of memory, no chain is
 *    followed.) R's own report (the earliest of R's, if any)
 *    is looked up:
 *    - R exited with a status by itself, naming nobody, or WHY is "lost"
 *      and R was killed by a signal: R's report is the cause, its class
 *      from its HOW ("rank 2 on node3 was killed by signal 11
 *      (SIGSEGV)");
 *    - else R is the cause, said as "rank 2 on node3 hangs (named by rank
 *      0)", "hangs in an earlier call", "is unreachable" or "was lost",
 *      named by the last naming of the chain; its class is node when
 *      WHY is not "behind", R's node is one of STEP_NODES, a rank of
 *      another node named it (lost, unreachable or hung), and either no
 *      report came from R's node (a node that is up reports its tasks'
 *      end, the step's SIGKILL included, before srun ends) or R's own
 *      report names a rank of another node so (each side of a cut link
 *      sees the other silent; a stopped or hung rank names no one);
 *      else hang. The node blamed is then R's node (its report's, else
 *      NAMED_HOST).
 *    The cause's how and time are R's report's, else the naming one's.
 * 3. Else the earliest report is the cause, its class from its HOW.
 * A naming comes from the job's own program and is trusted as such: the
 * node it blames only leaves that job's own restarted step
 * (--ddp-restart); slurmstepd records verdicts (verdict.h) only for what
 * its kernel recorded (a memory error), never for how a task died.
 *
 * Errors: functions return 0 or -1 (with err, NUL-terminated when errlen
 * > 0, where they take one); they never log. Thread safety: reentrant,
 * they touch only their arguments (and, for the record, the file system).
 */
#ifndef DDP_FAILURE_H
#define DDP_FAILURE_H

#include <stddef.h>

#include "hostlist.h"

/* Hex digits of a nonce (16 random bytes), without the NUL. */
#define DDP_FAILURE_NONCE_HEX 32
/* Longest step node list a report carries, NUL included. */
#define DDP_FAILURE_NODES_LEN 4096
/* Room for one report or record line, newline and NUL included. */
#define DDP_FAILURE_LINE_MAX (DDP_FAILURE_NODES_LEN + 384)
/* Longest WHY of a naming, NUL included. */
#define DDP_FAILURE_WHY_MAX 16

/* What the node's kernel recorded of a task's death (kevents.h). */
enum ddp_failure_kernel {
	DDP_KERNEL_NONE = 0,
	DDP_KERNEL_OOM,		 /* SIGKILL, and the OOM-kill count rose */
	DDP_KERNEL_MEMORY_ERROR, /* SIGBUS, and memory errors rose */
};

/* The cause's class (see above); the record's cause= word. */
enum ddp_failure_cause {
	DDP_CAUSE_EXIT = 0,
	DDP_CAUSE_CRASH,
	DDP_CAUSE_OOM,
	DDP_CAUSE_HANG,
	DDP_CAUSE_STOP,
	DDP_CAUSE_NODE,
};
#define DDP_CAUSE_COUNT 6

/* One failed task, as its node's slurmstepd saw it end. */
struct ddp_failure {
	long rank;			 /* global rank, 0-2^31 */
	char node[DDP_HOSTNAME_MAX + 1]; /* its Slurm node name */
	int signal;			 /* > 0: killed by this signal */
	int status;			 /* else its exit status, 1-255 */
	enum ddp_failure_kernel kernel;	 /* with signal, its node's word */
	long long time_ms;		 /* CLOCK_REALTIME, milliseconds */
	unsigned long nodes;		 /* the step's node count */
	char step_nodes[DDP_FAILURE_NODES_LEN]; /* the step's host list */
	/* The naming (named > 0): rank named_by failed because of rank
	 * named_rank on named_node, for named_why. */
	int named;
	long named_by, named_rank;
	char named_node[DDP_HOSTNAME_MAX + 1];
	char named_why[DDP_FAILURE_WHY_MAX];
	/* A clean stop (stopped > 0, status DDP_STOP_EXIT_STATUS, no
	 * naming): the stop note's step, why word and checkpoint time. */
	int stopped;
	long long stop_step, stop_ckpt_ms;
	char stop_why[DDP_FAILURE_WHY_MAX];
	/* Set by ddp_failure_set_cause: the class and the node blamed are
	 * these, whatever the rule for f alone says. */
	int blame_decided;
	enum ddp_failure_cause cause;
	char blamed[DDP_HOSTNAME_MAX + 1];
};

/* One report, as much of it as the cause needs (ddp_failure_set). */
struct ddp_failure_seen {
	long rank;
	char node[DDP_HOSTNAME_MAX + 1];
	int signal, status;
	enum ddp_failure_kernel kernel;
	long long time_ms;
	/* Its naming: the rank it names, -1 for none, with host and why. */
	long named_rank;
	char named_node[DDP_HOSTNAME_MAX + 1];
	char named_why[DDP_FAILURE_WHY_MAX];
};

/* One clean stop, as much of it as srun's stop line needs. */
struct ddp_failure_stop {
	long rank;
	long long step, ckpt_ms;
	char why[DDP_FAILURE_WHY_MAX];
};

/*
 * All reports of a step, for its cause (see above). Zero it to start;
 * ddp_failure_set_free releases it. Not thread-safe: one owner.
 */
struct ddp_failure_set {
	struct ddp_failure first;  /* the earliest report */
	struct ddp_failure naming; /* the earliest one with a naming */
	int have_first, have_naming;
	struct ddp_failure_seen *seen; /* every failure's report, owned */
	size_t nseen, cap;
	/* The clean stops, apart: they are never a failure's cause. */
	struct ddp_failure stop_first;	/* the earliest stop */
	struct ddp_failure_stop *stops; /* every stop, owned */
	size_t nstops, stopcap;
};

/*
 * Fills the how of f from a wait status (as waitpid gives it): returns 1
 * for a failure (a non-zero exit status, or a signal), with f->signal or
 * f->status set; 0 for an exit with status 0, or a status that is
 * neither (f untouched).
 */
int ddp_failure_from_wait_status(int wstatus, struct ddp_failure *f);

/*
 * A fresh nonce: DDP_FAILURE_NONCE_HEX hex digits of the kernel's random
 * bytes into out (len > DDP_FAILURE_NONCE_HEX). Returns 0, or -1 with
 * errno when the kernel gives none.
 */
int ddp_failure_nonce(char *out, size_t len);

/*
 * The report line of f for nonce into buf, newline included. Returns 0,
 * or -1 when a field is not what the report allows (a node name or host
 * list with characters outside Slurm's host list syntax, a nonce of the
 * wrong form) or buf is too small.
 */
int ddp_failure_format_report(const struct ddp_failure *f, const char *nonce,
			      char *buf, size_t len);

/*
 * Reads one report line (a trailing newline allowed) into f. Returns 0;
 * -1 with err for a malformed line; -2 when it is well formed but carries
 * another nonce than nonce (compared in constant time), so a forged
 * report is told apart from a broken one.
 */
int ddp_failure_parse_report(const char *line, const char *nonce,
			     struct ddp_failure *f, char *err, size_t errlen);

/*
 * A task's naming line, "BY names NAMED NAMED_HOST WHY\n": libddp writes it
 * to DDP_FAILURE_FD (ddp_failure_format_naming), slurmstepd reads it
 * (ddp_failure_parse_naming); the two are each other's inverse on f's
 * naming fields (named_by, named_rank, named_node, named_why).
 */
/* Room for one naming line, newline and NUL included (under PIPE_BUF, so
 * that one write carries it whole). */
#define DDP_FAILURE_NAMING_MAX (DDP_HOSTNAME_MAX + 96)

/*
 * The naming line of f's naming fields into buf, newline included; f->named
 * is not looked at. Returns 0, or -1 (buf unspecified) when a field is not
 * what the line allows (a rank outside 0-2^31-1, a rank naming itself, a
 * host outside Slurm's host name syntax, a WHY other than "lost", "hang",
 * "unreachable" or "behind") or buf is too small. Reentrant.
 */
int ddp_failure_format_naming(const struct ddp_failure *f, char *buf,
			      size_t len);

/*
 * Reads a task's naming line (a trailing newline allowed) into f's naming
 * fields, f->named set. Returns 0, or -1 (f untouched) for anything else:
 * the line comes from the job's program.
 */
int ddp_failure_parse_naming(const char *line, struct ddp_failure *f);

/* 1 when a failed before b: the earlier time, then the lower rank. */
int ddp_failure_earlier(const struct ddp_failure *a,
			const struct ddp_failure *b);

/* The class of f: cause when blame_decided, else what its HOW alone says
 * (rule 1 above). */
enum ddp_failure_cause ddp_failure_cause_of(const struct ddp_failure *f);

/* The node f blames (blamed when blame_decided, else its node when its
 * class is node), or "" for none. */
const char *ddp_failure_blame(const struct ddp_failure *f);

/* The record's word for a class ("crash"), and the class of a word:
 * 0, or -1 for a word that is none. */
const char *ddp_failure_cause_name(enum ddp_failure_cause cause);
int ddp_failure_cause_parse(const char *word, enum ddp_failure_cause *cause);

/* A naming's WHY in srun's words ("hang": "hangs", "behind": "hangs in an
 * earlier call", "lost": "was lost", "unreachable": "is unreachable"), or
 * NULL when why is none of these. */
const char *ddp_failure_why_words(const char *why);

/* The name of signal sig without "SIG" ("KILL"), or NULL when unknown. */
const char *ddp_failure_signal_name(int sig);

/*
 * What happened, for srun's line: "rank 2 on node3 was killed by signal 9
 * (SIGKILL)" or "rank 5 on node2 exited with status 1". Returns 0, or -1
 * when buf is too small.
 */
int ddp_failure_describe(const struct ddp_failure *f, char *buf, size_t len);

/*
 * Adds report f to set. Returns 0, or -1 with errno when out of memory
 * (the set stays as it was).
 */
int ddp_failure_set_add(struct ddp_failure_set *set,
			const struct ddp_failure *f);

/*
 * The cause of the step whose reports set holds (see above) into cause,
 * its blame decided (cause->blame_decided), and srun's words for it into
 * what (whatlen > 0). Returns 1, or 0 when set holds no report.
 */
int ddp_failure_set_cause(const struct ddp_failure_set *set,
			  struct ddp_failure *cause, char *what,
			  size_t whatlen);

/*
 * The step's clean stops, when set holds stops and no failure (a failure
 * wins: ddp_failure_set_cause): the earliest stop into stop, its class
 * decided as stop with no node blamed (its record says cause=stop), and
 * srun's words into what: "stopped on every rank after step 41
 * (time-limit on rank 0; sigusr1 on rank 2): checkpoint written in
 * 0.21 s" ("on 3 of 4 ranks" when fewer than ntasks stopped, ntasks 0
 * for not known; "after steps 40 to 41" when the notes differ; the
 * reasons of the ranks whose own reason is not "agreed", by rank, the
 * first four of them; the longest checkpoint). Returns the number of
 * stops, or 0 (stop and what untouched) when there is none or a failure
 * is among the reports.
 */
size_t ddp_failure_set_stopped(const struct ddp_failure_set *set,
			       unsigned long ntasks, struct ddp_failure *stop,
			       char *what, size_t whatlen);

/* Releases what set owns and zeroes it. */
void ddp_failure_set_free(struct ddp_failure_set *set);

/* One record, as ddp_failure_parse_record reads it (restart.h decides
 * from it). */
struct ddp_failure_record {
	long rank;				/* -1: not said */
	char node[DDP_HOSTNAME_MAX + 1];	/* where the rank ran, or "" */
	int signalled;				/* how: 1 signal:N, 0 exit:N */
	long code;				/* N of how */
	char blame[DDP_FAILURE_NODES_LEN];	/* host list, "" = none */
	long nodes;				/* the failed step's nodes */
	char step_nodes[DDP_FAILURE_NODES_LEN]; /* their list, or "" */
	char why[DDP_FAILURE_WHY_MAX];		/* "" or a naming's WHY */
	enum ddp_failure_cause cause;		/* node when cause= is absent */
};

/*
 * Parses the first line of text (len bytes, no NUL needed) into r.
 * how, blame and nodes must be there (blame may be empty); rank, node,
 * why and cause are optional (a record without cause= is an older
 * plugin's: cause node when it blames a node, crash for a signal, exit
 * else); other keys are skipped. Returns 0, or -1 with err naming the key
 * and its value.
 */
int ddp_failure_parse_record(const char *text, size_t len,
			     struct ddp_failure_record *r, char *err,
			     size_t errlen);

/* The record line of f (see above) into buf, newline included. Returns 0,
 * or -1 when buf is too small. */
int ddp_failure_format_record(const struct ddp_failure *f, char *buf,
			      size_t len);

/*
 * Writes f's record to path at once: a temporary file beside it, mode
 * 0600, renamed over path, so that a reader sees the whole old file or
 * the whole new one. Returns 0, or -1 with err naming the file.
 */
int ddp_failure_write_record(const char *path, const struct ddp_failure *f,
			     char *err, size_t errlen);

#endif
