/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ddp-check --json's file: its directory checked on rank 0 before the
 * rendezvous, and the report (json.c's text) written whole or not at
 * all through libddp's ddp_write_atomic.
 */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ddp.h>

#include "check.h"
#include "ddp_util.h"

int
chk_json_path_usable(const char *path)
{
	char *copy = strdup(path);
	const char *dir;
	struct stat st;
	int rc = -1;

	if (!copy) {
		fprintf(stderr, "ddp-check: out of memory\n");
		goto out;
	}
	dir = dirname(copy);
	errno = 0;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		fprintf(stderr,
			"ddp-check: --json %s: is a directory (give the path "
			"of a file)\n",
			path);
		goto out;
	}
	errno = 0;
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr,
			"ddp-check: --json %s: cannot write it: %s is not a "
			"directory%s%s%s\n",
			path, dir, errno ? " (" : "",
			errno ? strerror(errno) : "", errno ? ")" : "");
		goto out;
	}
	if (access(dir, W_OK | X_OK) < 0) {
		fprintf(stderr,
			"ddp-check: --json %s: cannot write it: directory %s: "
			"%s\n",
			path, dir, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	free(copy);
	return rc;
}

int
chk_json_write(const char *path, const struct chk_result *res)
{
	struct ddp_buf text = {0};
	char *dir = strdup(path), *base = strdup(path);
	int rc = -1;

	if (!dir || !base || chk_json_report(res, &text) < 0) {
		fprintf(stderr, "ddp-check: --json %s: out of memory\n", path);
		goto out;
	}
	if (ddp_write_atomic(dirname(dir), basename(base), text.s, text.len) !=
	    DDP_OK) {
		fprintf(stderr, "ddp-check: --json %s: cannot write it: %s\n",
			path, ddp_last_error());
		goto out;
	}
	rc = 0;
out:
	free(dir);
	free(base);
	ddp_buf_free(&text);
	return rc;
}
