/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of PyTorch's flight recorder setup (flightrec.h): the three
 * variables and their dump prefix, and the dump directory made, kept or
 * refused on real directories.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "flightrec.h"
#include "tap.h"

static char tmpdir[] = "/tmp/test-flightrec.XXXXXX";

static void
test_env(void)
{
	struct ddp_flightrec_env e;
	char longdir[PATH_MAX];
	char want[PATH_MAX + 64];

	tap_ok(ddp_flightrec_env("/shared/alice/42", &e) == 0,
	       "env: a shared directory gives the variables");
	TAP_STREQ(e.var[0].name, "TORCH_NCCL_DUMP_ON_TIMEOUT", "env: name 0");
	TAP_STREQ(e.var[0].value, "1", "env: dump on timeout");
	tap_ok(e.var[0].newer == NULL, "env: dump on timeout has one name");
	TAP_STREQ(e.var[1].name, "TORCH_NCCL_TRACE_BUFFER_SIZE", "env: name 1");
	TAP_STREQ(e.var[1].newer, "TORCH_FR_BUFFER_SIZE",
		  "env: newer PyTorch's buffer size name");
	TAP_STREQ(e.var[1].value, "2000", "env: ring buffer entries");
	TAP_STREQ(e.var[2].name, "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
		  "env: name 2");
	TAP_STREQ(e.var[2].newer, "TORCH_FR_DUMP_TEMP_FILE",
		  "env: newer PyTorch's dump file name");
	TAP_STREQ(e.var[2].value,
		  "/shared/alice/42/flight-recorder/nccl_trace_rank_",
		  "env: the prefix lies in the shared directory's "
		  "flight-recorder/");
	tap_ok(e.var[2].value == e.prefix, "env: the value is out's prefix");

	tap_ok(ddp_flightrec_env("", &e) < 0, "env: no shared directory");
	tap_ok(ddp_flightrec_env(NULL, &e) < 0, "env: NULL shared directory");
	/* The longest directory that still fits, and one byte more. */
	memset(longdir, 'd', sizeof(longdir));
	longdir[0] = '/';
	longdir[PATH_MAX - 1 - strlen("/flight-recorder/nccl_trace_rank_")] =
		'\0';
	tap_ok(ddp_flightrec_env(longdir, &e) == 0 &&
		       strlen(e.prefix) == PATH_MAX - 1,
	       "env: a prefix of PATH_MAX - 1 bytes fits");
	snprintf(want, sizeof(want), "%sd", longdir);
	tap_ok(ddp_flightrec_env(want, &e) < 0,
	       "env: a prefix that does not fit is refused, not cut");
}

/* ddp_flightrec_make_dir(dir, uid) returns want; a refusal's err holds
 * need (when not NULL); a success leaves a 0700 directory of uid. */
static void
check_make(const char *name, const char *dir, uid_t uid, int want,
	   const char *need)
{
	char err[512] = "", sub[PATH_MAX];
	struct stat st;
	int rc, ok;

	rc = ddp_flightrec_make_dir(dir, uid, err, sizeof(err));
	ok = rc == want;
	if (ok && rc == 0) {
		snprintf(sub, sizeof(sub), "%s/flight-recorder", dir);
		ok = lstat(sub, &st) == 0 && S_ISDIR(st.st_mode) &&
		     st.st_uid == uid && (st.st_mode & 07777) == 0700;
	}
	if (ok && rc < 0 && need)
		ok = strstr(err, need) != NULL;
	if (!tap_ok(ok, "dir: %s", name))
		tap_diag("rc %d (want %d) err '%s'", rc, want, err);
	else if (rc < 0)
		tap_diag("%s", err);
}

/* A fresh job directory below tmpdir, mode 0700. */
static void
job_dir(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", tmpdir, name);
	if (mkdir(buf, 0700) < 0) {
		perror(buf);
		exit(2);
	}
}

static void
test_dir(void)
{
	uid_t me = geteuid();
	char job[PATH_MAX], sub[PATH_MAX + 32], link[PATH_MAX + 32];
	mode_t old;
	FILE *f;

	job_dir(job, sizeof(job), "fresh");
	/* A umask that would open it up is overruled. */
	old = umask(0);
	check_make("made 0700 in a job directory", job, me, 0, NULL);
	umask(old);
	check_make("made already (another node): kept", job, me, 0, NULL);

	job_dir(job, sizeof(job), "open");
	snprintf(sub, sizeof(sub), "%s/flight-recorder", job);
	if (mkdir(sub, 0755) < 0 || chmod(sub, 0755) < 0) {
		perror(sub);
		exit(2);
	}
	check_make("the user's own 0755 one is closed to 0700", job, me, 0,
		   NULL);

	job_dir(job, sizeof(job), "link");
	snprintf(sub, sizeof(sub), "%s/flight-recorder", job);
	snprintf(link, sizeof(link), "%s/elsewhere", tmpdir);
	if (mkdir(link, 0700) < 0 || symlink(link, sub) < 0) {
		perror(sub);
		exit(2);
	}
	check_make("a symbolic link is refused", job, me, -1,
		   ": a symbolic link");
	tap_ok(rmdir(link) == 0, "dir: nothing was made where the link points");

	job_dir(job, sizeof(job), "file");
	snprintf(sub, sizeof(sub), "%s/flight-recorder", job);
	f = fopen(sub, "w");
	if (!f) {
		perror(sub);
		exit(2);
	}
	fclose(f);
	check_make("a file in its place is refused", job, me, -1,
		   ": not a directory");

	/* Owned by someone else: the one already made above, seen as
	 * another uid's. */
	snprintf(job, sizeof(job), "%s/fresh", tmpdir);
	check_make("another uid's directory is refused", job, me + 1, -1,
		   "not by the job's user");

	snprintf(job, sizeof(job), "%s/missing", tmpdir);
	check_make("a missing job directory fails", job, me, -1, "missing");
	snprintf(sub, sizeof(sub), "%s/link/flight-recorder", tmpdir);
	check_make("a symbolic link as the job directory is refused", sub, me,
		   -1, NULL);
}

/* Removes what test_dir made, and tmpdir. */
static void
clean(void)
{
	static const char *const jobs[] = {"fresh", "open", "link", "file"};
	char path[PATH_MAX];
	size_t i;

	for (i = 0; i < sizeof(jobs) / sizeof(jobs[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s/flight-recorder", tmpdir,
			 jobs[i]);
		if (rmdir(path) < 0)
			unlink(path);
		snprintf(path, sizeof(path), "%s/%s", tmpdir, jobs[i]);
		rmdir(path);
	}
	if (rmdir(tmpdir) < 0)
		tap_diag("could not remove %s: %s", tmpdir, strerror(errno));
}

int
main(void)
{
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 2;
	}
	test_env();
	test_dir();
	clean();
	return tap_done();
}
