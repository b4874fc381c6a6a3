/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * PyTorch's flight recorder, gathered in the job's shared directory: the
 * variables the plugin gives every rank of a step that has one, so that a
 * NCCL watchdog timeout leaves one dump per rank side by side in
 * <shared>/flight-recorder/, ready for PyTorch's analyser (torchfrtrace).
 *
 * PyTorch (ProcessGroupNCCL) keeps the last TORCH_NCCL_TRACE_BUFFER_SIZE
 * collectives in a ring buffer and, with TORCH_NCCL_DUMP_ON_TIMEOUT, writes
 * it to TORCH_NCCL_DEBUG_INFO_TEMP_FILE followed by the rank's global rank
 * (DebugInfoWriter: prefix + rank). It does not create directories, so the
 * plugin makes flight-recorder/ before the tasks start. PyTorch 2.8 and
 * later read TORCH_FR_BUFFER_SIZE and TORCH_FR_DUMP_TEMP_FILE before the
 * older names: a user who set one of those keeps it (the plugin then sets
 * nothing for that variable).
 *
 * Errors: functions return 0 or -1; ddp_flightrec_make_dir fills err
 * (NUL-terminated when errlen > 0) naming the path, what is wrong and the
 * fix. They never exit and never log. Thread safety: they touch only their
 * arguments and the file system.
 */
#ifndef DDP_FLIGHTREC_H
#define DDP_FLIGHTREC_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

/* The dump directory below the job's shared directory, and the dump
 * files' prefix in it (PyTorch's own default name). */
#define DDP_FLIGHTREC_DIR "flight-recorder"
#define DDP_FLIGHTREC_FILE_PREFIX "nccl_trace_rank_"
/* Entries in each rank's ring buffer: the value PyTorch's flight recorder
 * tutorial recommends (and newer PyTorch's default). */
#define DDP_FLIGHTREC_ENTRIES "2000"

#define DDP_FLIGHTREC_NVARS 3

/* One variable: set unless the user exported name, or newer (the name
 * newer PyTorch reads first; NULL when there is none). */
struct ddp_flightrec_var {
	const char *name;
	const char *newer;
	const char *value;
};

struct ddp_flightrec_env {
	struct ddp_flightrec_var var[DDP_FLIGHTREC_NVARS];
	char prefix[PATH_MAX]; /* the dump file prefix, var[2].value */
};

/*
 * Fills out, for a step whose job shared directory is shared_dir, with
 * TORCH_NCCL_DUMP_ON_TIMEOUT=1, TORCH_NCCL_TRACE_BUFFER_SIZE=2000 and
 * TORCH_NCCL_DEBUG_INFO_TEMP_FILE=<shared_dir>/flight-recorder/
 * nccl_trace_rank_, in that order. Values point into out and string
 * constants. Returns 0, or -1 when shared_dir is empty or the prefix does
 * not fit.
 */
int ddp_flightrec_env(const char *shared_dir, struct ddp_flightrec_env *out);

/*
 * Makes <shared_dir>/flight-recorder mode 0700 as the calling user (the
 * plugin calls it with the job user's privileges), or accepts the one that
 * is there when it is a real directory owned by uid; a mode that lets
 * others in is set to 0700, as it lies in the user's own job directory.
 * Neither level is followed when it is a symbolic link. Several nodes may
 * call it at once on a shared file system. Returns 0, or -1 with err.
 */
int ddp_flightrec_make_dir(const char *shared_dir, uid_t uid, char *err,
			   size_t errlen);

#endif
