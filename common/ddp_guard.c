/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A listener's guard against floods: the pending table's accounting, the
 * victim for a newcomer, the refusals' lines and the budget of costly
 * answers (ddp_guard.h).
 */
#include <string.h>

#include "ddp_guard.h"
#include "ddp_net.h"
#include "ddp_util.h"

#define SRC_SLOTS (2 * DDP_GUARD_MAX) /* a power of two */

static uint32_t
src_hash(const char *source)
{
	uint32_t h = 2166136261u;

	while (*source)
		h = (h ^ (uint8_t)*source++) * 16777619u;
	return h;
}

/* cnt[i]: how many pending connections share pending connection i's
 * source (one pass, a small open-addressing table). */
static void
src_counts(const struct ddp_guard *g, int *cnt)
{
	uint32_t key[SRC_SLOTS];
	int n[SRC_SLOTS], slot[DDP_GUARD_MAX], i, h;
	uint8_t used[SRC_SLOTS];

	memset(used, 0, sizeof(used));
	for (i = 0; i < g->n; i++) {
		h = (int)(g->slot[i].src & (SRC_SLOTS - 1));
		while (used[h] && key[h] != g->slot[i].src)
			h = (h + 1) & (SRC_SLOTS - 1);
		if (!used[h]) {
			used[h] = 1;
			key[h] = g->slot[i].src;
			n[h] = 0;
		}
		n[h]++;
		slot[i] = h;
	}
	for (i = 0; i < g->n; i++)
		cnt[i] = n[slot[i]];
}

int
ddp_guard_admit(const struct ddp_guard *g, const char *source)
{
	int cnt[DDP_GUARD_MAX], proof[DDP_GUARD_MAX], i, v = -1, own = 0;
	uint32_t src = src_hash(source);

	for (i = 0; i < g->n; i++)
		own += g->slot[i].src == src;
	if (own < g->per_source && g->n < g->max)
		return -1;
	src_counts(g, cnt);
	for (i = 0; i < g->n; i++) {
		if (own >= g->per_source && g->slot[i].src != src)
			continue;
		proof[i] = g->proof ? g->proof(g->arg, i) : 0;
		if (v < 0 || proof[i] < proof[v] ||
		    (proof[i] == proof[v] &&
		     (cnt[i] > cnt[v] ||
		      (cnt[i] == cnt[v] && g->slot[i].seq < g->slot[v].seq))))
			v = i;
	}
	return v;
}

void
ddp_guard_add(struct ddp_guard *g, const char *source)
{
	g->slot[g->n].src = src_hash(source);
	g->slot[g->n].seq = ++g->seq;
	g->n++;
}

void
ddp_guard_remove(struct ddp_guard *g, int i)
{
	g->slot[i] = g->slot[--g->n];
}

static void
tell(struct ddp_guard_refusals *f, enum ddp_guard_kind kind, const char *from,
     const char *why, double seconds)
{
	struct ddp_guard_line line = {
		.kind = kind,
		.from = from,
		.why = why,
		.count = f->quiet,
		.total = f->total,
		.seconds = seconds,
	};

	if (f->log)
		f->log(f->arg, &line);
}

void
ddp_guard_flush(struct ddp_guard_refusals *f, double now, int force)
{
	if (!f->quiet || (!force && now < f->next))
		return;
	tell(f, DDP_GUARD_SUMMARY, f->last_from, f->last_why, now - f->since);
	f->quiet = 0;
	f->since = now;
	f->next = now + DDP_GUARD_LOG_EVERY_S;
}

void
ddp_guard_refused(struct ddp_guard_refusals *f, double now, const char *from,
		  const char *why)
{
	f->total++;
	if (f->logged < DDP_GUARD_LOG_FIRST) {
		f->logged++;
		tell(f,
		     f->logged == DDP_GUARD_LOG_FIRST ? DDP_GUARD_LAST
						      : DDP_GUARD_ONE,
		     from, why, 0);
		f->since = now;
		f->next = f->since + DDP_GUARD_LOG_EVERY_S;
		return;
	}
	f->quiet++;
	tell(f, DDP_GUARD_QUIET, from, why, 0);
	ddp_fmt(f->last_from, sizeof(f->last_from), "%s", from);
	ddp_fmt(f->last_why, sizeof(f->last_why), "%s", why);
	ddp_guard_flush(f, now, 0);
}

/* Brings bucket k up to now: full when first used, then rate a second
 * up to burst. */
static void
refill(struct ddp_budget_bucket *k, double burst, double rate, double now)
{
	if (!k->used) {
		k->used = 1;
		k->tokens = burst;
		k->at = now;
	}
	if (now > k->at) {
		k->tokens += (now - k->at) * rate;
		k->at = now;
	}
	if (k->tokens > burst)
		k->tokens = burst;
}

/* The bucket of addr's prefix, as a ticket: 1 + its index, or
 * DDP_BUDGET_PREFIXES + 1 for the shared one. */
static int
bucket_of(struct ddp_budget *b, const char *addr)
{
	char prefix[sizeof(b->prefix[0].prefix)];
	int k;

	if (ddp_net_addr_prefix(addr, prefix, sizeof(prefix)) < 0)
		return DDP_BUDGET_PREFIXES + 1;
	for (k = 0; k < DDP_BUDGET_PREFIXES; k++) {
		if (!b->prefix[k].prefix[0]) {
			ddp_fmt(b->prefix[k].prefix,
				sizeof(b->prefix[k].prefix), "%s", prefix);
			return k + 1;
		}
		if (strcmp(b->prefix[k].prefix, prefix) == 0)
			return k + 1;
	}
	return DDP_BUDGET_PREFIXES + 1;
}

static struct ddp_budget_bucket *
bucket(struct ddp_budget *b, int ticket)
{
	return ticket > DDP_BUDGET_PREFIXES ? &b->other
					    : &b->prefix[ticket - 1];
}

int
ddp_budget_take(struct ddp_budget *b, const char *addr, double now)
{
	int ticket = bucket_of(b, addr);
	struct ddp_budget_bucket *k = bucket(b, ticket);

	refill(k, b->burst, b->rate, now);
	refill(&b->global, b->global_burst, b->global_rate, now);
	if (k->tokens < 1 || b->global.tokens < 1)
		return 0;
	k->tokens -= 1;
	b->global.tokens -= 1;
	return ticket;
}

void
ddp_budget_give(struct ddp_budget *b, int ticket)
{
	struct ddp_budget_bucket *k;

	if (ticket <= 0 || ticket > DDP_BUDGET_PREFIXES + 1)
		return;
	k = bucket(b, ticket);
	k->tokens = k->tokens + 1 < b->burst ? k->tokens + 1 : b->burst;
	b->global.tokens = b->global.tokens + 1 < b->global_burst
				   ? b->global.tokens + 1
				   : b->global_burst;
}
