/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ddp_version(): the release of the VERSION file the build read, the same
 * string on every call, in the form the packages and pkg-config use.
 */
#include <ctype.h>
#include <string.h>

#include "ddp.h"
#include "tap.h"

/* 1 when s is N(.N)*: what VERSION, debian/changelog and the spec hold. */
static int
is_release(const char *s)
{
	int digits = 0;

	for (; *s; s++) {
		if (isdigit((unsigned char)*s))
			digits++;
		else if (*s == '.' && digits)
			digits = 0;
		else
			return 0;
	}
	return digits > 0;
}

int
main(void)
{
	const char *v = ddp_version();

	tap_ok(v != NULL, "ddp_version is never NULL");
	TAP_STREQ(v, DDP_VERSION, "ddp_version is the release of VERSION");
	tap_ok(v && is_release(v), "'%s' is a release number N.N", v ? v : "");
	tap_ok(ddp_version() == v, "the same static string on every call");
	return tap_done();
}
