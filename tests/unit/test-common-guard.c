/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of the listeners' flood guard (common/ddp_guard.h): room
 * while under both caps, the victim a full table or a full source gives
 * up (least proved, then busiest source, then oldest), the caller's
 * swap-with-last removal, and refusals told one per line for the first
 * few, then in summaries at most every DDP_GUARD_LOG_EVERY_S; the budget
 * of costly answers that no rotation of source addresses escapes; and
 * the address prefixes and abstract socket names of common/ddp_net.h. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/un.h>

#include "ddp_guard.h"
#include "ddp_net.h"
#include "tap.h"

/* The caller's measure of each pending connection, by index. */
static int proofs[DDP_GUARD_MAX];

static int
proof_of(void *arg, int i)
{
	(void)arg;
	return proofs[i];
}

static void
test_victim(void)
{
	struct ddp_guard g;

	memset(&g, 0, sizeof(g));
	memset(proofs, 0, sizeof(proofs));
	g.max = 4;
	g.per_source = 2;
	tap_ok(ddp_guard_admit(&g, "10.0.0.1") == -1,
	       "an empty table has room");
	ddp_guard_add(&g, "10.0.0.1"); /* 0 */
	ddp_guard_add(&g, "10.0.0.1"); /* 1 */
	tap_ok(ddp_guard_admit(&g, "10.0.0.1") == 0,
	       "a source at its cap gives up its own oldest connection");
	tap_ok(ddp_guard_admit(&g, "10.0.0.2") == -1,
	       "another source still has room");
	ddp_guard_add(&g, "10.0.0.2"); /* 2 */
	ddp_guard_add(&g, "10.0.0.3"); /* 3 */
	tap_ok(ddp_guard_admit(&g, "10.0.0.4") == 0,
	       "a full table gives up the busiest source's oldest connection");
	g.proof = proof_of;
	proofs[0] = 1;
	tap_ok(ddp_guard_admit(&g, "10.0.0.4") == 1,
	       "a connection that proved part of its hello is spared");
	proofs[1] = 1;
	tap_ok(ddp_guard_admit(&g, "10.0.0.4") == 2,
	       "then the least proved go first, the oldest of them");
	g.proof = NULL;
	ddp_guard_remove(&g, 0); /* 3 moves into 0 */
	tap_ok(g.n == 3 && ddp_guard_admit(&g, "10.0.0.1") == -1,
	       "a removal makes room and the source's count drops");
	ddp_guard_add(&g, "10.0.0.4"); /* 3 */
	tap_ok(ddp_guard_admit(&g, "10.0.0.5") == 1,
	       "after a removal, each slot keeps its arrival order: the "
	       "oldest goes (index 1)");
}

static char lines[32][256];
static int nlines, quiet;

static void
log_line(void *arg, const struct ddp_guard_line *l)
{
	(void)arg;
	if (l->kind == DDP_GUARD_QUIET) {
		quiet++;
		return;
	}
	if (nlines < 32)
		snprintf(lines[nlines++], sizeof(lines[0]),
			 "%d %s %s %lu %lu %.0f", (int)l->kind, l->from, l->why,
			 l->count, l->total, l->seconds);
}

static void
test_refusals(void)
{
	struct ddp_guard_refusals f;
	char from[32];
	int i;

	memset(&f, 0, sizeof(f));
	f.log = log_line;
	for (i = 0; i < DDP_GUARD_LOG_FIRST; i++) {
		snprintf(from, sizeof(from), "h%d", i);
		ddp_guard_refused(&f, 100.0, from, "bad");
	}
	tap_ok(nlines == DDP_GUARD_LOG_FIRST && quiet == 0,
	       "the first %d refusals are told one per line",
	       DDP_GUARD_LOG_FIRST);
	tap_ok(lines[0][0] == '0' + DDP_GUARD_ONE &&
		       lines[DDP_GUARD_LOG_FIRST - 1][0] ==
			       '0' + DDP_GUARD_LAST,
	       "the last of them says so");
	ddp_guard_refused(&f, 101.0, "x1", "flood");
	ddp_guard_refused(&f, 102.0, "x2", "flood");
	tap_ok(nlines == DDP_GUARD_LOG_FIRST && quiet == 2,
	       "later ones are only counted while no summary is due");
	ddp_guard_flush(&f, 105.0, 0);
	tap_ok(nlines == DDP_GUARD_LOG_FIRST, "no summary before it is due");
	ddp_guard_refused(&f, 100.0 + DDP_GUARD_LOG_EVERY_S, "x3", "late");
	TAP_STREQ(lines[nlines - 1], "3 x3 late 3 11 10",
		  "a due summary counts the quiet ones and names the latest");
	ddp_guard_flush(&f, 111.0, 1);
	tap_ok(nlines == DDP_GUARD_LOG_FIRST + 1,
	       "a forced flush with nothing counted says nothing");
	ddp_guard_refused(&f, 112.0, "x4", "last");
	ddp_guard_flush(&f, 113.0, 1);
	TAP_STREQ(lines[nlines - 1], "3 x4 last 1 12 3",
		  "a forced flush tells what is counted at once");
}

static void
test_abstract_name(void)
{
	unsigned char d[DDP_SHA256_LEN];
	struct sockaddr_un sa;
	char longp[128];
	socklen_t sl;
	size_t k;

	for (k = 0; k < sizeof(d); k++)
		d[k] = (unsigned char)(0xa0 + k);
	sl = ddp_net_abstract_name(&sa, "slurm-ddp/", d);
	tap_ok(sa.sun_family == AF_UNIX && sa.sun_path[0] == '\0',
	       "an abstract address: a leading NUL");
	TAP_STREQ(sa.sun_path + 1, "slurm-ddp/a0a1a2a3a4a5a6a7a8a9aaabacadaeaf",
		  "the prefix, then the hex of the digest's first 16 bytes");
	tap_ok(sl == offsetof(struct sockaddr_un, sun_path) + 1 + 10 + 32,
	       "its length covers the NUL and the name, no more");
	memset(longp, 'p', sizeof(longp) - 1);
	longp[sizeof(longp) - 1] = '\0';
	tap_ok(ddp_net_abstract_name(&sa, longp, d) == 0,
	       "a prefix too long for sun_path is refused");
}

static void
test_prefix(void)
{
	static const char *const cases[][2] = {
		{"127.0.0.1", "loopback"},
		{"127.200.3.4", "loopback"},
		{"::1", "loopback"},
		{"::ffff:127.9.9.9", "loopback"},
		{"10.1.2.3", "10.1.2.0/24"},
		{"::ffff:10.1.2.3", "10.1.2.0/24"},
		{"2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
		{"fe80::1", "fe80::/64"},
	};
	char out[64];
	size_t k;
	int ok = 1;

	for (k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		if (ddp_net_addr_prefix(cases[k][0], out, sizeof(out)) < 0 ||
		    strcmp(out, cases[k][1]) != 0) {
			tap_diag("%s: got '%s', want '%s'", cases[k][0], out,
				 cases[k][1]);
			ok = 0;
		}
	}
	tap_ok(ok, "prefixes: all of loopback one, IPv4 by /24, IPv6 by /64, "
		   "v4-mapped as IPv4");
	tap_ok(ddp_net_addr_prefix("?", out, sizeof(out)) < 0 &&
		       ddp_net_addr_prefix("node1", out, sizeof(out)) < 0 &&
		       ddp_net_addr_prefix("10.1.2.3", out, 8) < 0,
	       "a name, '?' or a too small buffer is refused");
}

static void
budget_init(struct ddp_budget *b)
{
	memset(b, 0, sizeof(*b));
	b->burst = 32;
	b->rate = 20;
	b->global_burst = 128;
	b->global_rate = 60;
}

static void
test_budget(void)
{
	struct ddp_budget b;
	char addr[64];
	int k, got, t;

	budget_init(&b);
	for (k = got = 0; k < 1000; k++) {
		snprintf(addr, sizeof(addr), "127.%d.%d.%d", k % 250 + 1,
			 k / 250, k % 7 + 1);
		got += ddp_budget_take(&b, addr, 100.0) > 0;
	}
	tap_ok(got == 32,
	       "1000 addresses of 127/8 share one budget: %d "
	       "answers at once (burst 32)",
	       got);
	for (k = got = 0; k < 1000; k++) {
		snprintf(addr, sizeof(addr), "10.0.0.%d", k % 254 + 1);
		got += ddp_budget_take(&b, addr, 100.0) > 0;
	}
	tap_ok(got == 32, "so do those of one /24: %d", got);
	budget_init(&b);
	for (k = got = 0; k < 4000; k++) {
		snprintf(addr, sizeof(addr), "10.0.%d.%d", k % 8,
			 k / 8 % 250 + 1);
		got += ddp_budget_take(&b, addr, 100.0) > 0;
	}
	tap_ok(got == 128,
	       "4000 addresses of 8 prefixes at once: %d answers in all "
	       "(global burst 128, not 8 x 32)",
	       got);
	for (k = got = 0; k < 4000; k++) {
		snprintf(addr, sizeof(addr), "10.0.%d.%d", k % 8,
			 k / 8 % 250 + 1);
		got += ddp_budget_take(&b, addr, 100.0 + k / 4000.0) > 0;
	}
	tap_ok(got >= 59 && got <= 61,
	       "then 4000 more over a second: %d (global rate 60, not 8 x "
	       "20)",
	       got);
	budget_init(&b);
	b.global_burst = 1e6;
	for (k = 0; k < DDP_BUDGET_PREFIXES; k++) {
		snprintf(addr, sizeof(addr), "10.0.%d.1", k);
		ddp_budget_take(&b, addr, 100.0);
	}
	for (k = got = 0; k < 1000; k++) {
		snprintf(addr, sizeof(addr), "10.1.%d.1", k % 250);
		got += ddp_budget_take(&b, addr, 100.0) > 0;
	}
	tap_ok(got == 32,
	       "prefixes past the %d tracked share one more budget: %d",
	       DDP_BUDGET_PREFIXES, got);
	snprintf(addr, sizeof(addr), "10.0.0.1");
	for (k = got = 0; k < 100; k++)
		got += ddp_budget_take(&b, addr, 100.0) > 0;
	tap_ok(got == 31,
	       "a tracked prefix is never forgotten for newcomers: its "
	       "budget did not come back full (%d more)",
	       got);
	budget_init(&b);
	for (k = got = 0; k < 1000; k++) {
		t = ddp_budget_take(&b, "127.0.0.1", 100.0);
		got += t > 0;
		ddp_budget_give(&b, t);
	}
	tap_ok(got == 1000,
	       "answers given back (used) are not spent: %d of "
	       "1000 at once",
	       got);
	ddp_budget_give(&b, 0);
	ddp_budget_give(&b, DDP_BUDGET_PREFIXES + 2);
	tap_ok(b.global.tokens <= 128, "a ticket of 0 or out of range gives "
				       "nothing back");
}

int
main(void)
{
	test_victim();
	test_refusals();
	test_abstract_name();
	test_prefix();
	test_budget();
	return tap_done();
}
