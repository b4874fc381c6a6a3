/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A strict parser of Slurm's hostlist syntax ("gpu[01-03,7],login1") for
 * the Slurm-free core, the prolog helper, the tests and the fuzzers. The
 * SPANK plugin still asks Slurm's own slurm_hostlist_* for MASTER_ADDR.
 *
 * Grammar accepted (a subset of Slurm's, refusing what Slurm would guess):
 *   list   := item ("," item)*
 *   item   := part+            with at least one name character
 *   part   := name-chars | "[" range ("," range)* "]"
 *   range  := NUM | NUM "-" NUM          (NUM decimal, low <= high)
 * Name characters are [A-Za-z0-9._-]. Several bracket groups in one item
 * expand as a cartesian product (leftmost group varies slowest). Zero
 * padding follows the width of the low bound ("[08-10]" gives 08 09 10).
 * Empty items, empty brackets, nesting, spaces and reversed ranges are
 * errors.
 *
 * Thread safety: reentrant; the functions touch only their arguments.
 */
#ifndef DDP_HOSTLIST_H
#define DDP_HOSTLIST_H

#include <stddef.h>

/* Longest host name in a Slurm host list (Slurm's MAX_SLURM_NAME is 64).
 * Not libddp's DDP_HOST_MAX (ddp.h), the room for MASTER_ADDR, which may
 * also be an address or a fully qualified name. */
#define DDP_HOSTNAME_MAX 64

struct ddp_hostlist {
	char **hosts; /* n names, each malloc'ed, in list order */
	size_t n;
};

/*
 * Expands s into out (which the caller zero-initialises or has freed).
 * At most max_hosts names are produced; a longer expansion is an error, so
 * a hostile "n[0-999999999]" cannot exhaust memory. Returns 0, or -1 with a
 * message in err (always NUL-terminated when errlen > 0) and out empty.
 * The caller frees out with ddp_hostlist_free().
 */
int ddp_hostlist_parse(const char *s, size_t max_hosts,
		       struct ddp_hostlist *out, char *err, size_t errlen);

/* Frees the names and resets out to empty. NULL-tolerant. */
void ddp_hostlist_free(struct ddp_hostlist *hl);

/*
 * Writes the first host of s into buf without expanding the rest.
 * Returns 0, or -1 when s is not a valid hostlist or the name does not fit.
 */
int ddp_hostlist_first(const char *s, char *buf, size_t size);

/*
 * Writes the names of hl back in Slurm's short form, keeping their order:
 * runs of names that share a prefix and end in numbers become one
 * bracket group ("node1 node2 node4 node5" gives "node[1-2,4-5]", "n08 n09
 * n10" gives "n[08-10]"), any other name stays as it is; a name of
 * ddp_hostlist_parse's grammar comes back the same through
 * ddp_hostlist_parse. An empty list gives "". Returns 0, or -1 when the
 * text does not fit in size bytes (buf then holds it cut).
 */
int ddp_hostlist_format(const struct ddp_hostlist *hl, char *buf, size_t size);

#endif
