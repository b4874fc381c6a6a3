/* SPDX-License-Identifier: BSD-3-Clause */
/* libFuzzer target: the failure record's three lines (common/failure.h).
 * Any bytes go through the report parser, the naming parser and the
 * record parser; every report and naming accepted formats back to the
 * same line's meaning (format, parse, equal), every set of accepted reports has
 * a cause whose record parses back to the same fields, and a record whose cause
 * blames a node is the only kind that names one. A set of clean stops alone
 * gives srun's stop line and a record of cause stop that blames nobody; a
 * failure among them always wins. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "failure.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char nonce[] = "00112233445566778899aabbccddeeff";

/* Report a, parsed from its own formatting, must equal a. */
static void
round_trip_report(const struct ddp_failure *a)
{
	char line[DDP_FAILURE_LINE_MAX], err[128];
	struct ddp_failure b;

	if (ddp_failure_format_report(a, nonce, line, sizeof(line)) < 0)
		abort();
	if (ddp_failure_parse_report(line, nonce, &b, err, sizeof(err)) != 0)
		abort();
	if (memcmp(a, &b, sizeof(b)) != 0)
		abort();
}

/* A naming, formatted and parsed back, must equal itself. */
static void
round_trip_naming(const struct ddp_failure *a)
{
	char line[DDP_FAILURE_NAMING_MAX];
	struct ddp_failure b;

	if (!a->named || a->named_rank == a->named_by)
		abort();
	if (ddp_failure_format_naming(a, line, sizeof(line)) < 0)
		abort();
	memset(&b, 0, sizeof(b));
	if (ddp_failure_parse_naming(line, &b) < 0 || memcmp(a, &b, sizeof(b)))
		abort();
}

/* The cause's record, parsed back, must say what the cause says. */
static void
round_trip_record(const struct ddp_failure *c)
{
	char line[DDP_FAILURE_LINE_MAX], err[256];
	struct ddp_failure_record r;

	if (ddp_failure_format_record(c, line, sizeof(line)) < 0)
		return; /* a step node list too long for the record */
	if (ddp_failure_parse_record(line, strlen(line), &r, err, sizeof(err)) <
	    0)
		abort();
	if (r.rank != c->rank || strcmp(r.node, c->node) ||
	    r.signalled != (c->signal > 0) ||
	    r.code != (c->signal > 0 ? c->signal : c->status) ||
	    r.nodes != (long)c->nodes ||
	    strcmp(r.blame, ddp_failure_blame(c)) ||
	    r.cause != ddp_failure_cause_of(c) ||
	    (r.blame[0] != '\0') != (r.cause == DDP_CAUSE_NODE && c->blamed[0]))
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ddp_failure_set set = {0};
	struct ddp_failure f, cause;
	struct ddp_failure_record r;
	char line[DDP_FAILURE_LINE_MAX], what[256], err[256];
	size_t start = 0, i;

	/* Each line a report, a naming or a record. */
	for (i = 0; i <= size; i++) {
		size_t n = i - start;

		if (i < size && data[i] != '\n')
			continue;
		if (n < sizeof(line) && !memchr(data + start, '\0', n)) {
			memcpy(line, data + start, n);
			line[n] = '\0';
			memset(&f, 0, sizeof(f));
			if (ddp_failure_parse_report(line, nonce, &f, err,
						     sizeof(err)) == 0) {
				round_trip_report(&f);
				if (ddp_failure_set_add(&set, &f) < 0)
					abort();
			}
			memset(&f, 0, sizeof(f));
			if (ddp_failure_parse_naming(line, &f) == 0)
				round_trip_naming(&f);
			ddp_failure_parse_record(line, n, &r, err, sizeof(err));
		}
		start = i + 1;
	}
	if (ddp_failure_set_cause(&set, &cause, what, sizeof(what))) {
		if (!cause.blame_decided || !memchr(what, '\0', sizeof(what)) ||
		    cause.stopped ||
		    ddp_failure_set_stopped(&set, 4, &cause, what,
					    sizeof(what)))
			abort();
		round_trip_record(&cause);
	} else if (ddp_failure_set_stopped(&set, 4, &cause, what,
					   sizeof(what))) {
		if (!cause.stopped ||
		    ddp_failure_cause_of(&cause) != DDP_CAUSE_STOP ||
		    ddp_failure_blame(&cause)[0] ||
		    !memchr(what, '\0', sizeof(what)))
			abort();
		round_trip_record(&cause);
	}
	ddp_failure_set_free(&set);
	return 0;
}
