/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of the listeners' flood guard (common/ddp_guard.h): room
 * while under both caps, the victim a full table or a full source gives
 * up (least proved, then busiest source, then oldest), the caller's
 * swap-with-last removal, and refusals told one per line for the first
 * few, then in summaries at most every DDP_GUARD_LOG_EVERY_S; and the
 * abstract socket names of common/ddp_net.h. */
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

int
main(void)
{
	test_victim();
	test_refusals();
	test_abstract_name();
	return tap_done();
}
