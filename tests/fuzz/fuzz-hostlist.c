/* SPDX-License-Identifier: BSD-3-Clause */
/* libFuzzer target: the strict hostlist parser must never crash, leak or
 * produce more hosts than allowed, and first() must agree with parse(). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hostlist.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ddp_hostlist hl = {0};
	char *s, err[256], first[DDP_HOSTNAME_MAX + 1];
	int rc;

	if (size > 4096)
		return 0;
	s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	rc = ddp_hostlist_parse(s, 1000, &hl, err, sizeof(err));
	if (rc == 0) {
		if (hl.n == 0 || hl.n > 1000)
			abort();
		if (ddp_hostlist_first(s, first, sizeof(first)) != 0 ||
		    strcmp(first, hl.hosts[0]) != 0)
			abort();
	}
	ddp_hostlist_free(&hl);
	free(s);
	return 0;
}
