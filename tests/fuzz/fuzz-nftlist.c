/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for ddp-nodectl's parser of "nft list set" output (run
 * as root on every prolog, epilog and reconcile). What it accepts must be
 * sane elements that survive a listing round trip and a sync script.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "nodectl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The listing nft would print for elems (all of one family). */
static int
relist(const struct nc_elems *e, int family, struct ddp_buf *b)
{
	size_t i;

	if (ddp_buf_printf(b,
			   "table inet ddp {\n\tset x {\n\t\ttype %s . "
			   "inet_service\n\t\telements = { ",
			   family == AF_INET ? "ipv4_addr" : "ipv6_addr") < 0)
		return -1;
	for (i = 0; i < e->n; i++) {
		const struct nc_elem *el = &e->v[i];

		if (ddp_buf_printf(b, "%s%s . %u-%u timeout 60s", i ? ", " : "",
				   el->addr, el->lo, el->hi) < 0 ||
		    (el->jobid &&
		     ddp_buf_printf(b, " comment \"job=%lu\"", el->jobid) < 0))
			return -1;
	}
	return ddp_buf_printf(b, " }\n\t}\n}\n");
}

/* Checks the elements a sync script adds for desired (none there yet):
 * per address, ranges that neither overlap nor touch (nft would refuse
 * them), covering every desired element's ports. */
static void
check_adds(const struct nc_elems *desired, const char *script)
{
	struct nc_elems added = {0};
	const char *p = script;
	size_t i, j;

	while (p && (p = strstr(p, "add element inet ddp ")) != NULL) {
		struct nc_elem el;
		char set[16], addr[64];
		unsigned lo, hi;
		int n;

		memset(&el, 0, sizeof(el));
		n = sscanf(p, "add element inet ddp %15s { %63s . %u-%u", set,
			   addr, &lo, &hi);
		if (n == 3)
			hi = lo;
		else if (n != 4)
			__builtin_trap();
		if (strlen(addr) >= sizeof(el.addr))
			__builtin_trap();
		memcpy(el.addr, addr, strlen(addr) + 1);
		el.lo = lo;
		el.hi = hi;
		if (nc_elems_add(&added, &el) < 0)
			goto out;
		p++;
	}
	for (i = 0; i < added.n; i++)
		for (j = i + 1; j < added.n; j++)
			if (strcmp(added.v[i].addr, added.v[j].addr) == 0 &&
			    added.v[i].lo <= added.v[j].hi + 1 &&
			    added.v[j].lo <= added.v[i].hi + 1)
				__builtin_trap();
	for (i = 0; i < desired->n; i++) {
		for (j = 0; j < added.n; j++)
			if (strcmp(added.v[j].addr, desired->v[i].addr) == 0 &&
			    added.v[j].lo <= desired->v[i].lo &&
			    desired->v[i].hi <= added.v[j].hi)
				break;
		if (j == added.n)
			__builtin_trap();
	}
out:
	nc_elems_free(&added);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nc_elems got = {0}, again = {0}, none = {0};
	struct ddp_buf list = {0}, script = {0};
	char err[DDP_ERR_LEN], *text;
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
	/* Every listed element needed by its job, none there: overlapping
	 * ranges of one address merge, all ports stay covered. */
	ddp_buf_free(&script);
	if (nc_fw_sync_script(&none, &got, 0, &script) == 0)
		check_adds(&got, script.s);
out:
	nc_elems_free(&got);
	nc_elems_free(&again);
	ddp_buf_free(&list);
	ddp_buf_free(&script);
	free(text);
	return 0;
}
