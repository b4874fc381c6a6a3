/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One logging shim for every slurm-ddp program: messages carry the "ddp: "
 * prefix and go to the sink the program installed (the SPANK plugin maps
 * levels to slurm_error/slurm_info/...; tools and tests use stderr).
 */
#ifndef DDP_LOG_H
#define DDP_LOG_H

#include <stdarg.h>

enum ddp_log_level {
	/* A line for the user's terminal, not a log (--ddp-verbose): the
	 * plugin's sink shows it where srun's user sees it; every other sink
	 * prints it as it prints DDP_LOG_INFO. Never dropped by max_level. */
	DDP_LOG_USER = -1,
	DDP_LOG_ERROR = 0,
	DDP_LOG_INFO = 1,
	DDP_LOG_VERBOSE = 2,
	DDP_LOG_DEBUG = 3,
};

/*
 * A sink receives the level and the fully formatted message without the
 * prefix and without a trailing newline. It must not call ddp_log().
 */
typedef void ddp_log_sink_fn(enum ddp_log_level level, const char *msg);

/*
 * Installs the sink and the highest level that reaches it. NULL restores
 * the default sink (stderr). Not thread-safe: call once at program or
 * plugin start, before other threads exist.
 */
void ddp_log_set_sink(ddp_log_sink_fn *sink, enum ddp_log_level max_level);

/* Formats and emits one message; messages above max_level are dropped. */
void ddp_log(enum ddp_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define ddp_user(...) ddp_log(DDP_LOG_USER, __VA_ARGS__)
#define ddp_error(...) ddp_log(DDP_LOG_ERROR, __VA_ARGS__)
#define ddp_info(...) ddp_log(DDP_LOG_INFO, __VA_ARGS__)
#define ddp_verbose(...) ddp_log(DDP_LOG_VERBOSE, __VA_ARGS__)
#define ddp_debug(...) ddp_log(DDP_LOG_DEBUG, __VA_ARGS__)

#endif
