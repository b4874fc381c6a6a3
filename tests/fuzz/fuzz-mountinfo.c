/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for ddp-nodectl's reader of /proc/self/mountinfo (the
 * shared-root mount check). The input is a path, a NUL, then the table;
 * the device looked up comes from the path's first bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "nodectl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[256] = "/shared/ddp", fstype[64], mnt[512], *table;
	const uint8_t *nul = memchr(data, '\0', size);
	size_t plen = nul ? (size_t)(nul - data) : 0;
	unsigned maj = 0, min = 0;

	if (nul && plen > 0 && plen < sizeof(path)) {
		memcpy(path, data, plen);
		path[plen] = '\0';
		maj = data[0] & 0x0f;
		min = plen > 1 ? data[1] : 0;
	}
	table = malloc(size + 1);
	if (!table)
		return 0;
	memcpy(table, nul ? nul + 1 : data, size - (nul ? plen + 1 : 0));
	table[size - (nul ? plen + 1 : 0)] = '\0';
	memset(fstype, 'x', sizeof(fstype));
	memset(mnt, 'x', sizeof(mnt));
	if (nc_mount_lookup(table, makedev(maj, min), path, fstype,
			    sizeof(fstype), mnt, sizeof(mnt)) == 0) {
		/* Found: both answers are strings that fit, and the mount
		 * point is no longer than any line of the table. */
		if (!memchr(fstype, '\0', sizeof(fstype)) ||
		    !memchr(mnt, '\0', sizeof(mnt)) || strlen(mnt) > size)
			__builtin_trap();
	}
	free(table);
	return 0;
}
