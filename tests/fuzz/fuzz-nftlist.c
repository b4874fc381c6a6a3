/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for ddp-nodectl's parser of "nft list set" output (run
 * as root on every prolog, epilog and reconcile). What it accepts must be
 * sane elements that survive a listing round trip and a sync script.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "nodectl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The listing nft would print for elems (all of one family). */
static int
relist(const struct nc_elems *e, int family, struct nc_buf *b)
{
	size_t i;

	if (nc_buf_printf(b,
			  "table inet ddp {\n\tset x {\n\t\ttype %s . "
			  "inet_service\n\t\telements = { ",
			  family == AF_INET ? "ipv4_addr" : "ipv6_addr") < 0)
		return -1;
	for (i = 0; i < e->n; i++) {
		const struct nc_elem *el = &e->v[i];

		if (nc_buf_printf(b, "%s%s . %u-%u timeout 60s", i ? ", " : "",
				  el->addr, el->lo, el->hi) < 0 ||
		    (el->jobid &&
		     nc_buf_printf(b, " comment \"job=%lu\"", el->jobid) < 0))
			return -1;
	}
	return nc_buf_printf(b, " }\n\t}\n}\n");
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nc_elems got = {0}, again = {0}, none = {0};
	struct nc_buf list = {0}, script = {0};
	char err[NC_ERR_LEN], *text;
	size_t i;

	text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	err[0] = 'x';
	if (nc_fw_parse_listing(text, &got, err, sizeof(err)) < 0) {
		if (!memchr(err, '\0', sizeof(err)) || got.n > size)
			__builtin_trap();
		goto out;
	}
	for (i = 0; i < got.n; i++) {
		const struct nc_elem *el = &got.v[i];

		if ((el->family != AF_INET && el->family != AF_INET6) ||
		    el->family != got.v[0].family || el->lo > el->hi ||
		    el->hi > 65535 ||
		    !memchr(el->addr, '\0', sizeof(el->addr)) ||
		    el->jobid > 4294967294UL)
			__builtin_trap();
	}
	if (got.n) {
		if (relist(&got, got.v[0].family, &list) < 0)
			goto out;
		if (nc_fw_parse_listing(list.s, &again, err, sizeof(err)) < 0 ||
		    again.n != got.n)
			__builtin_trap();
		for (i = 0; i < got.n; i++)
			if (strcmp(again.v[i].addr, got.v[i].addr) != 0 ||
			    again.v[i].lo != got.v[i].lo ||
			    again.v[i].hi != got.v[i].hi ||
			    again.v[i].jobid != got.v[i].jobid)
				__builtin_trap();
	}
	/* No live job: every tagged element is deleted, nothing added. */
	if (nc_fw_sync_script(&got, &none, 0, &script) == 0 && script.s &&
	    strstr(script.s, "timeout"))
		__builtin_trap();
out:
	nc_elems_free(&got);
	nc_elems_free(&again);
	nc_buf_free(&list);
	nc_buf_free(&script);
	free(text);
	return 0;
}
