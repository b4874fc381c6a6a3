/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stop-note: reads stop notes on stdin, one a line, as slurmstepd reads
 * them (ddp_stop_note_parse), and prints each as ddp_stop_note_format
 * writes it. stop-python.bats pipes the Python module's note through it:
 * the output equals the input only when both sides agree on the line.
 * Exit 0, or 1 for a line the parser refuses (named on stderr).
 */
#include <stdio.h>
#include <string.h>

#include "stop.h"

int
main(void)
{
	char line[256], out[DDP_STOP_NOTE_MAX];
	struct ddp_stop_note n;

	while (fgets(line, sizeof(line), stdin)) {
		if (ddp_stop_note_parse(line, &n) < 0 ||
		    ddp_stop_note_format(&n, out, sizeof(out)) < 0) {
			fprintf(stderr, "stop-note: not a stop note: '%.*s'\n",
				(int)strcspn(line, "\n"), line);
			return 1;
		}
		fputs(out, stdout);
	}
	return 0;
}
