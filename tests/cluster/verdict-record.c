/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * verdict-record STATE_DIR TIME JOB STEP UID LINE: appends one verdict
 * record through ddp_verdict_append, as the plugin's root side does for
 * a line of ddp-check's --verdict-fd (LINE, "node=... check=... value=...
 * median=... unit=..."), with the time, job, step and uid that slurmstepd
 * knows. The cluster tests use it to give the health check records of real
 * jobs without a throttled link for each. Exit 0, or 1 with the reason.
 */
#include <stdio.h>
#include <string.h>

#include "ddp_util.h"
#include "verdict.h"

int
main(int argc, char **argv)
{
	struct ddp_verdict v;
	char err[512];
	long t, uid;

	if (argc != 7 || ddp_parse_long(argv[2], 0, 1L << 40, &t) < 0 ||
	    ddp_parse_long(argv[5], 0, 4294967294L, &uid) < 0) {
		fprintf(stderr, "usage: verdict-record STATE_DIR TIME JOB STEP "
				"UID 'node=N check=C value=V median=M "
				"unit=U'\n");
		return 2;
	}
	if (ddp_verdict_parse(argv[6], &v, err, sizeof(err)) < 0 ||
	    ddp_fmt(v.job, sizeof(v.job), "%s", argv[3]) < 0 ||
	    ddp_fmt(v.step, sizeof(v.step), "%s", argv[4]) < 0) {
		fprintf(stderr, "verdict-record: %s\n",
			err[0] ? err : "job or step too long");
		return 1;
	}
	v.time = t;
	v.uid = (unsigned long)uid;
	if (ddp_verdict_append(argv[1], &v, err, sizeof(err)) < 0) {
		fprintf(stderr, "verdict-record: %s\n", err);
		return 1;
	}
	return 0;
}
