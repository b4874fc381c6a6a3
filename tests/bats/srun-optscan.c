/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * srun-optscan: for each srun option on stdin, one a line as written on
 * srun's command line without a value ("-n", "--ntasks"), prints the option
 * and "value" when the plugin's scan of srun's command line (ddp_srun_scan)
 * takes the next word as the option's value, "none" when it does not. It
 * scans "srun OPTION --ddp prog": --ddp is seen only when OPTION left it
 * alone, as srun-options.bats asks srun itself with "srun OPTION --help".
 * Exit 0, or 2 for a line that is not an option.
 */
#include <stdio.h>
#include <string.h>

#include "args.h"

static const char *
no_env(const char *name)
{
	(void)name;
	return NULL;
}

int
main(void)
{
	char line[256], ddp[] = "--ddp", prog[] = "prog", srun[] = "srun";

	while (fgets(line, sizeof(line), stdin)) {
		char *argv[] = {srun, line, ddp, prog, NULL};
		struct ddp_srun_req req;
		char err[DDP_ERR_LEN];
		size_t len = strcspn(line, "\n");
		int rc;

		line[len] = '\0';
		if (line[0] != '-' || len < 2 || strchr(line, '=') ||
		    strchr(line, ' ')) {
			fprintf(stderr, "srun-optscan: not an option: '%s'\n",
				line);
			return 2;
		}
		rc = ddp_srun_scan(4, argv, no_env, &req, err, sizeof(err));
		/* A refused value ("-n --ddp") was taken all the same. */
		printf("%s %s\n", line, rc == 0 && req.ddp ? "none" : "value");
	}
	return 0;
}
