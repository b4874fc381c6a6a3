/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ddp-check --json: the report as one JSON object, for a site's tools
 * to read instead of the table. Built as text here; ddp-check.c writes
 * it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ddp_util.h"

/* The length of the UTF-8 sequence that starts s, or 0 when s does not
 * start a well-formed one (RFC 3629: no overlong forms, no surrogates,
 * nothing past U+10FFFF). */
static size_t
utf8_len(const unsigned char *s)
{
	size_t n, i;

	if (s[0] < 0xc2 || s[0] > 0xf4)
		return 0;
	n = s[0] < 0xe0 ? 2 : s[0] < 0xf0 ? 3 : 4;
	for (i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] > 0x9f) ||
	    (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] > 0x8f))
		return 0;
	return n;
}

void
chk_json_string(struct ddp_buf *out, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	size_t n;

	ddp_buf_printf(out, "\"");
	while (*p) {
		if (*p == '"' || *p == '\\') {
			ddp_buf_printf(out, "\\%c", *p++);
		} else if (*p == '\n') {
			ddp_buf_printf(out, "\\n");
			p++;
		} else if (*p == '\t') {
			ddp_buf_printf(out, "\\t");
			p++;
		} else if (*p < 0x20 || *p == 0x7f) {
			ddp_buf_printf(out, "\\u%04x", *p++);
		} else if (*p < 0x80) {
			ddp_buf_append(out, p++, 1);
		} else if ((n = utf8_len(p)) > 0) {
			ddp_buf_append(out, p, n);
			p += n;
		} else {
			/* Not UTF-8: JSON text must be, so the byte becomes
			 * the replacement character. */
			ddp_buf_printf(out, "\\ufffd");
			p++;
		}
	}
	ddp_buf_printf(out, "\"");
}

/* A number, or null for what was not measured (v < 0) or not finite. */
static void
json_number(struct ddp_buf *out, double v)
{
	if (v < 0 || !isfinite(v))
		ddp_buf_printf(out, "null");
	else
		ddp_buf_printf(out, "%.6g", v);
}

static void
json_key_string(struct ddp_buf *out, const char *key, const char *v)
{
	ddp_buf_printf(out, "\"%s\": ", key);
	if (v)
		chk_json_string(out, v);
	else
		ddp_buf_printf(out, "null");
}

static void
json_nodes(struct ddp_buf *out, const struct chk_net *net)
{
	const struct chk_node *nd;
	char words[128];
	int i;

	ddp_buf_printf(out, "  \"nodes\": [");
	for (i = 0; net && i < net->n; i++) {
		nd = &net->node[i];
		chk_status_words(nd->flags, words, sizeof(words));
		ddp_buf_printf(out, "%s\n    {", i ? "," : "");
		json_key_string(out, "node", nd->host);
		ddp_buf_printf(out, ", \"lowest_rank\": %d, ", nd->leader);
		json_key_string(out, "ranks", nd->ranks);
		ddp_buf_printf(out, ", ");
		json_key_string(out, "gpus", nd->gpus);
		ddp_buf_printf(out, ", ");
		json_key_string(out, "next",
				net->n > 1 ? net->node[chk_next(net->n, i)].host
					   : NULL);
		ddp_buf_printf(out, ", \"out_gbps\": ");
		json_number(out, net->measured ? nd->gbps[CHK_FWD] : -1);
		ddp_buf_printf(out, ", \"back_gbps\": ");
		json_number(out, net->measured && net->ndir > 1
					 ? nd->gbps[CHK_REV]
					 : -1);
		ddp_buf_printf(out, ", ");
		json_key_string(out, "status", words);
		ddp_buf_printf(out, "}");
	}
	ddp_buf_printf(out, "%s],\n", net && net->n ? "\n  " : "");
}

static void
json_findings(struct ddp_buf *out, const struct chk_net *net)
{
	struct chk_finding *f = NULL;
	const struct chk_node *nd;
	int n = net ? chk_findings(net, NULL, 0) : 0, k;

	if (n)
		f = calloc((size_t)n, sizeof(*f));
	if (f)
		chk_findings(net, f, n);
	else
		n = 0;
	ddp_buf_printf(out, "  \"findings\": [");
	for (k = 0; k < n; k++) {
		nd = &net->node[f[k].node];
		ddp_buf_printf(out, "%s\n    {", k ? "," : "");
		json_key_string(out, "node", nd->host);
		ddp_buf_printf(out, ", \"rank\": %d, ", nd->leader);
		json_key_string(out, "ranks", nd->ranks);
		ddp_buf_printf(out, ", ");
		json_key_string(out, "kind", f[k].kind);
		ddp_buf_printf(out, ", \"value\": ");
		json_number(out, f[k].value >= 0 && net->median > 0 ? f[k].value
								    : -1);
		ddp_buf_printf(out, ", \"median\": ");
		json_number(out, f[k].value >= 0 && net->median > 0
					 ? net->median
					 : -1);
		ddp_buf_printf(out, ", ");
		json_key_string(out, "unit",
				f[k].value >= 0 && net->median > 0 ? "GB/s"
								   : NULL);
		ddp_buf_printf(out, "}");
	}
	ddp_buf_printf(out, "%s],\n", n ? "\n  " : "");
	free(f);
}

/* The problems' lines, one string each. */
static void
json_problems(struct ddp_buf *out, const char *text)
{
	char *line;
	size_t k = 0, j;
	int n = 0;

	ddp_buf_printf(out, "  \"problems\": [");
	while (text && text[k]) {
		j = strcspn(text + k, "\n");
		line = strndup(text + k, j);
		ddp_buf_printf(out, "%s\n    ", n++ ? "," : "");
		if (line)
			chk_json_string(out, line);
		else
			out->failed = 1;
		free(line);
		k += j + (text[k + j] == '\n');
	}
	ddp_buf_printf(out, "%s],\n", n ? "\n  " : "");
}

int
chk_json_report(const struct chk_result *r, struct ddp_buf *out)
{
	const struct chk_net *net = r->net;

	ddp_buf_printf(out, "{\n  ");
	json_key_string(out, "verdict", r->verdict);
	ddp_buf_printf(out, ",\n  ");
	json_key_string(out, "mode", r->mode);
	ddp_buf_printf(out, ",\n  ");
	json_key_string(out, "job", r->job_id);
	ddp_buf_printf(out, ",\n  ");
	json_key_string(out, "step", r->step_id);
	ddp_buf_printf(out, ",\n  \"ranks\": %d,\n  \"ranks_joined\": %d,\n",
		       r->world, r->joined);
	json_nodes(out, net);
	json_findings(out, net);
	json_problems(out, r->problems);
	ddp_buf_printf(out, "  ");
	json_key_string(out, "error", r->error);
	ddp_buf_printf(out, ",\n  \"links\": {\"timed\": %d, \"window_s\": ",
		       net && net->measured ? net->nlinks : 0);
	json_number(out, net && net->measured ? net->window_s : -1);
	ddp_buf_printf(out, ", \"median_gbps\": ");
	json_number(out, net && net->measured ? net->median : -1);
	ddp_buf_printf(out, ", \"min_fraction\": ");
	json_number(out, net ? net->fraction : -1);
	ddp_buf_printf(out, "},\n  \"allreduce\": {\"bytes\": ");
	if (r->allreduce_s >= 0)
		ddp_buf_printf(out, "%zu", r->allreduce_bytes);
	else
		ddp_buf_printf(out, "null");
	ddp_buf_printf(out, ", \"ms\": ");
	json_number(out, r->allreduce_s >= 0 ? r->allreduce_s * 1000 : -1);
	ddp_buf_printf(out, "},\n  ");
	json_key_string(out, "gpu", r->gpu && r->gpu[0] ? r->gpu : NULL);
	ddp_buf_printf(out, ",\n  \"timings\": {\"join_s\": ");
	json_number(out, r->join_s);
	ddp_buf_printf(out, ", \"network_s\": ");
	json_number(out, r->network_s);
	ddp_buf_printf(out, ", \"total_s\": ");
	json_number(out, r->total_s);
	ddp_buf_printf(out, "}\n}\n");
	return out->failed ? -1 : 0;
}
