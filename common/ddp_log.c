/* SPDX-License-Identifier: BSD-3-Clause */
/* The logging shim: formatting, level filter and the default stderr sink. */
#include "ddp_log.h"

#include <stdio.h>

static void
stderr_sink(enum ddp_log_level level, const char *msg)
{
	fprintf(stderr, "ddp: %s%s\n", level == DDP_LOG_ERROR ? "error: " : "",
		msg);
}

static ddp_log_sink_fn *log_sink = stderr_sink;
static enum ddp_log_level log_max_level = DDP_LOG_INFO;

void
ddp_log_set_sink(ddp_log_sink_fn *sink, enum ddp_log_level max_level)
{
	log_sink = sink ? sink : stderr_sink;
	log_max_level = max_level;
}

void
ddp_log(enum ddp_log_level level, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (level > log_max_level)
		return;
	va_start(ap, fmt);
	/* A truncated message is still worth emitting. */
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_sink(level, msg);
}
