/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for the cause an ABORT frame carries (proto.h,
 * wk_abort_decode/wk_abort_encode) and the naming line it becomes
 * (common/failure.h, ddp_failure_format_naming/ddp_failure_parse_naming).
 * Every payload that decodes encodes back to the same bytes; a cause
 * built from the input's bytes that encodes decodes back equal; and the
 * naming line of a decoded cause, where it has one, parses back to the
 * same rank, host and why.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "failure.h"
#include "proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
same(const struct wk_abort *a, const struct wk_abort *b)
{
	return a->why == b->why && a->coll == b->coll && a->seq == b->seq &&
	       a->blamed == b->blamed && !strcmp(a->host, b->host) &&
	       !strcmp(a->text, b->text);
}

/* A decoded cause's naming line (by rank 0, or 1 when it blames 0)
 * reads back the same; a line refused is one whose fields the line
 * does not allow (a host outside Slurm's syntax), never one it does. */
static void
naming_roundtrip(const struct wk_abort *a)
{
	struct ddp_failure f, g;
	char line[DDP_FAILURE_NAMING_MAX];

	if (a->why == WK_WHY_NONE)
		return;
	memset(&f, 0, sizeof(f));
	f.named_by = a->blamed == 0 ? 1 : 0;
	f.named_rank = a->blamed;
	if (strlen(a->host) >= sizeof(f.named_node))
		return;
	memcpy(f.named_node, a->host, strlen(a->host) + 1);
	memcpy(f.named_why, wk_why_name(a->why),
	       strlen(wk_why_name(a->why)) + 1);
	if (ddp_failure_format_naming(&f, line, sizeof(line)) < 0)
		return;
	memset(&g, 0, sizeof(g));
	if (ddp_failure_parse_naming(line, &g) < 0 || !g.named ||
	    g.named_by != f.named_by || g.named_rank != f.named_rank ||
	    strcmp(g.named_node, f.named_node) ||
	    strcmp(g.named_why, f.named_why))
		abort();
}

/* A cause made of the input's bytes: encodes (when its fields are in
 * form) and decodes back equal. */
static void
built_roundtrip(const uint8_t *data, size_t size)
{
	static uint8_t out[WK_ABORT_MAX];
	struct wk_abort a, b;
	size_t hlen, tlen, i;
	char err[128];
	int n;

	if (size < 8)
		return;
	memset(&a, 0, sizeof(a));
	a.why = data[0] % (WK_WHY_MAX + 2); /* one past: refused */
	a.coll = data[1];
	a.seq = (uint32_t)data[2] << 8 | data[3];
	a.blamed = a.why == WK_WHY_NONE
			   ? -1
			   : (int32_t)((uint32_t)data[4] << 8 | data[5]);
	hlen = a.why == WK_WHY_NONE ? 0 : data[6] % 80;
	data += 8;
	size -= 8;
	if (hlen > size)
		hlen = size;
	for (i = 0; i < hlen; i++)
		a.host[i] = (char)(data[i] ? data[i] : 'x');
	tlen = size - hlen;
	if (tlen > WK_ABORT_TEXT_MAX)
		tlen = WK_ABORT_TEXT_MAX;
	for (i = 0; i < tlen; i++)
		a.text[i] = (char)(data[hlen + i] ? data[hlen + i] : ' ');
	n = wk_abort_encode(out, sizeof(out), &a);
	if (n < 0) {
		if (a.why <= WK_WHY_MAX && (a.why == WK_WHY_NONE || hlen > 0))
			abort(); /* in form, yet refused */
		return;
	}
	if (wk_abort_decode(out, (size_t)n, &b, err, sizeof(err)) < 0 ||
	    !same(&a, &b))
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t out[WK_ABORT_MAX];
	struct wk_abort a, b;
	char err[128];
	int n;

	built_roundtrip(data, size);
	if (wk_abort_decode(data, size, &a, err, sizeof(err)) < 0)
		return 0;
	n = wk_abort_encode(out, sizeof(out), &a);
	if (n < 0 || (size_t)n != size || memcmp(out, data, size) != 0)
		abort();
	if (wk_abort_decode(out, (size_t)n, &b, err, sizeof(err)) < 0 ||
	    !same(&a, &b))
		abort();
	naming_roundtrip(&a);
	return 0;
}
