/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A listener's guard against floods (ddp_guard.c), for libddp's
 * rendezvous and ddp-check's link test: a bounded table of pending
 * connections with a cap per source address, the choice of the
 * connection to evict for a newcomer, refusals told one per line for
 * the first few, then summarised, and a budget of costly answers (a
 * credential each) that no rotation of source addresses escapes.
 *
 * The caller keeps its own table of pending connections and this one
 * beside it, index for index: ddp_guard_add when it appends one,
 * ddp_guard_remove when it moves its last one into slot i. The guard
 * never closes or reads a connection; the caller does, with the victim
 * ddp_guard_admit names.
 *
 * Clocks: now is ddp_now() seconds (common/ddp_util.h).
 * Thread safety: none; one guard belongs to one thread.
 */
#ifndef DDP_GUARD_H
#define DDP_GUARD_H

#include <stddef.h>
#include <stdint.h>

/* The most pending connections a guard tracks. */
#define DDP_GUARD_MAX 256
/* Refusals told one per line; then one summary line per interval. */
#define DDP_GUARD_LOG_FIRST 8
#define DDP_GUARD_LOG_EVERY_S 10.0

/* What a line about refusals says (struct ddp_guard_line). */
enum ddp_guard_kind {
	DDP_GUARD_ONE,	   /* one refusal, told on its own line */
	DDP_GUARD_LAST,	   /* the last one told on its own line */
	DDP_GUARD_QUIET,   /* one refusal, counted for the summary */
	DDP_GUARD_SUMMARY, /* the refusals counted since the last line */
};

struct ddp_guard_line {
	enum ddp_guard_kind kind;
	/* The refusal; for DDP_GUARD_SUMMARY the latest counted. */
	const char *from;
	const char *why;
	unsigned long count; /* DDP_GUARD_SUMMARY: refusals it counts */
	unsigned long total; /* refusals so far */
	double seconds;	     /* DDP_GUARD_SUMMARY: since the last line */
};

/* Words a line about refusals for the caller's log; borrowed strings. */
typedef void ddp_guard_log_fn(void *arg, const struct ddp_guard_line *line);

/* The refusals so far, and those not told one by one yet. Zero it, then
 * set log and arg. */
struct ddp_guard_refusals {
	ddp_guard_log_fn *log;
	void *arg;
	unsigned long logged;
	unsigned long quiet;
	unsigned long total;
	double since; /* the last line about refusals */
	double next;
	char last_from[256];
	char last_why[256];
};

/* How far pending connection i has proved it belongs (the caller's
 * measure): the lowest are evicted first. */
typedef int ddp_guard_proof_fn(void *arg, int i);

struct ddp_guard_slot {
	uint32_t src; /* hash of the source */
	uint64_t seq; /* arrival order */
};

/* Zero it, then set max (at most DDP_GUARD_MAX), per_source, and proof
 * (NULL: no connection is spared for what it has sent) and arg. */
struct ddp_guard {
	int max;
	int per_source;
	ddp_guard_proof_fn *proof;
	void *arg;
	int n;
	uint64_t seq;
	struct ddp_guard_slot slot[DDP_GUARD_MAX];
};

/*
 * Whether a newcomer from source (an address, or any name the caller
 * counts connections by) fits: -1 when it does, else the index of the
 * pending connection to give up for it: one of the source's own when it
 * holds per_source, else (table full) one of the busiest source's;
 * among them the least proved, then the oldest.
 */
int ddp_guard_admit(const struct ddp_guard *g, const char *source);

/* Appends a connection from source at index g->n (the caller's new
 * last one); the caller has checked that g->n < g->max. */
void ddp_guard_add(struct ddp_guard *g, const char *source);

/* Forgets connection i: the last one moves into its slot, as the
 * caller's does. */
void ddp_guard_remove(struct ddp_guard *g, int i);

/*
 * Counts a refusal of a connection from from (why: the reason): told at
 * once for the first DDP_GUARD_LOG_FIRST, then as DDP_GUARD_QUIET and in
 * a summary at most every DDP_GUARD_LOG_EVERY_S.
 */
void ddp_guard_refused(struct ddp_guard_refusals *f, double now,
		       const char *from, const char *why);

/* Tells the summary of the refusals counted and not told yet, when one
 * is due (force: now, when there are any). */
void ddp_guard_flush(struct ddp_guard_refusals *f, double now, int force);

/* Prefixes a budget tracks on their own; those past them share one. */
#define DDP_BUDGET_PREFIXES 64

struct ddp_budget_bucket {
	char prefix[64]; /* ddp_net_addr_prefix's; "" while unused */
	int used;
	double tokens;
	double at; /* when tokens was last brought up to date */
};

/*
 * A budget of answers that cost the listener (libddp's rank 0: a
 * credential from munged for each proof), for anyone who connects. One
 * party can take any address of a prefix (ddp_net_addr_prefix: all of
 * loopback, an IPv4 /24, an IPv6 /64), so the budget is the prefix's:
 * burst at once, then rate a second; on top, all sources together get
 * global_burst at once, then global_rate a second. The first
 * DDP_BUDGET_PREFIXES prefixes keep a budget of their own for the
 * budget's life (none is ever forgotten, so none comes back full); the
 * rest, and an address that is not numeric, share one more as if they
 * were one prefix. An answer that was put to use (the caller's measure:
 * the rendezvous' verified hello) is given back, so that only the
 * wasted ones are spent.
 *
 * Zero it, then set burst, rate, global_burst and global_rate.
 */
struct ddp_budget {
	double burst, rate;
	double global_burst, global_rate;
	struct ddp_budget_bucket global;
	struct ddp_budget_bucket other;
	struct ddp_budget_bucket prefix[DDP_BUDGET_PREFIXES];
};

/*
 * Takes one answer for a connection from addr (numeric, as
 * ddp_net_sa_format writes it) at now from its prefix's budget and the
 * global one: a ticket (> 0) for ddp_budget_give, or 0 when either has
 * none left now (then nothing is taken; ask again later).
 */
int ddp_budget_take(struct ddp_budget *b, const char *addr, double now);

/* Gives back the answer of ticket (ddp_budget_take's; 0 does nothing):
 * it was put to use. */
void ddp_budget_give(struct ddp_budget *b, int ticket);

#endif
