/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * PyTorch's flight recorder variables and its dump directory in the job's
 * shared directory (see flightrec.h for the contract).
 */
#include "flightrec.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ddp_util.h"
#include "jobdir.h"

int
ddp_flightrec_env(const char *shared_dir, struct ddp_flightrec_env *out)
{
	if (!shared_dir || !shared_dir[0] ||
	    ddp_fmt(out->prefix, sizeof(out->prefix), "%s/%s/%s", shared_dir,
		    DDP_FLIGHTREC_DIR, DDP_FLIGHTREC_FILE_PREFIX) < 0)
		return -1;
	out->var[0] = (struct ddp_flightrec_var){"TORCH_NCCL_DUMP_ON_TIMEOUT",
						 NULL, "1"};
	out->var[1] = (struct ddp_flightrec_var){"TORCH_NCCL_TRACE_BUFFER_SIZE",
						 "TORCH_FR_BUFFER_SIZE",
						 DDP_FLIGHTREC_ENTRIES};
	out->var[2] = (struct ddp_flightrec_var){
		"TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "TORCH_FR_DUMP_TEMP_FILE",
		out->prefix};
	return 0;
}

int
ddp_flightrec_make_dir(const char *shared_dir, uid_t uid, char *err,
		       size_t errlen)
{
	const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	char path[PATH_MAX];
	struct stat st;
	int dirfd = -1, fd = -1, rv = -1;

	if (ddp_fmt(path, sizeof(path), "%s/%s", shared_dir,
		    DDP_FLIGHTREC_DIR) < 0) {
		ddp_errf(err, errlen, "%s/%s: path too long", shared_dir,
			 DDP_FLIGHTREC_DIR);
		goto out;
	}
	dirfd = open(shared_dir, flags);
	if (dirfd < 0) {
		ddp_errf(err, errlen, "%s: %s", shared_dir, strerror(errno));
		goto out;
	}
	/* Another node of the step may have made it a moment ago. */
	if (mkdirat(dirfd, DDP_FLIGHTREC_DIR, 0700) < 0 && errno != EEXIST) {
		ddp_errf(err, errlen, "cannot create %s: %s", path,
			 strerror(errno));
		goto out;
	}
	fd = openat(dirfd, DDP_FLIGHTREC_DIR, flags);
	if (fd < 0) {
		const char *why = strerror(errno);

		if (fstatat(dirfd, DDP_FLIGHTREC_DIR, &st,
			    AT_SYMLINK_NOFOLLOW) == 0)
			why = S_ISLNK(st.st_mode)    ? "a symbolic link"
			      : !S_ISDIR(st.st_mode) ? "not a directory"
						     : why;
		ddp_errf(err, errlen,
			 "%s: %s; the dumps need a directory there: remove "
			 "it and start the step again",
			 path, why);
		goto out;
	}
	if (fstat(fd, &st) < 0) {
		ddp_errf(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (st.st_uid != uid) {
		ddp_errf(err, errlen,
			 "%s is owned by uid %lu, not by the job's user (uid "
			 "%lu): an admin should remove it",
			 path, (unsigned long)st.st_uid, (unsigned long)uid);
		goto out;
	}
	/* The umask, or the user, may have opened it up. */
	if (!ddp_jobdir_private(&st, uid) && fchmod(fd, 0700) < 0) {
		ddp_errf(err, errlen, "chmod 0700 %s: %s", path,
			 strerror(errno));
		goto out;
	}
	rv = 0;
out:
	ddp_close(&fd);
	ddp_close(&dirfd);
	return rv;
}
