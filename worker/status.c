/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libddp's status room: the per-thread last error, the log sink, the
 * clock, status and type names. Used by every other file of libddp; uses
 * none of them.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ddp_util.h"
#include "status.h"

static __thread char last_error[DDP_ERR_LEN];

static ddp_log_fn *log_fn;
static void *log_arg;
static int log_debug = -1;

char *
wk_errbuf(void)
{
	return last_error;
}

enum ddp_status
wk_err(enum ddp_status st, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ddp_verrf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	return st;
}

const char *
ddp_last_error(void)
{
	return last_error;
}

void
ddp_set_log_fn(ddp_log_fn *fn, void *arg)
{
	log_fn = fn;
	log_arg = arg;
}

void
wk_log(int level, const char *fmt, ...)
{
	char msg[DDP_ERR_LEN + 256];
	va_list ap;

	if (log_debug < 0) {
		const char *e = getenv("DDP_DEBUG");

		log_debug = e && *e && strcmp(e, "0") != 0;
	}
	if (level > 1 && !log_debug)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (log_fn)
		log_fn(level, msg, log_arg);
	else
		fprintf(stderr, "ddp: %s%s\n",
			level == 0   ? "error: "
			: level == 1 ? "warning: "
				     : "",
			msg);
}

const char *
ddp_strerror(enum ddp_status status)
{
	switch (status) {
	case DDP_OK:
		return "success";
	case DDP_ERR_INVALID:
		return "invalid argument or state";
	case DDP_ERR_ENV:
		return "bad or missing environment variable";
	case DDP_ERR_SYSTEM:
		return "system call failed";
	case DDP_ERR_NOMEM:
		return "out of memory";
	case DDP_ERR_TIMEOUT:
		return "timed out";
	case DDP_ERR_AUTH:
		return "authentication failed";
	case DDP_ERR_PEER:
		return "peer died or aborted";
	case DDP_ERR_MISMATCH:
		return "mismatched collective calls across ranks";
	case DDP_ERR_NO_GPU:
		return "no usable GPU";
	case DDP_ERR_BACKEND:
		return "backend failure";
	case DDP_ERR_ABORTED:
		return "communicator failed earlier";
	case DDP_ERR_RENDEZVOUS:
		return "rendezvous failed";
	case DDP_ERR_UNSUPPORTED:
		return "not supported in this configuration";
	case DDP_SHRUNK:
		return "a rank was lost; the survivors went on without it";
	}
	return "unknown status";
}

size_t
ddp_dtype_size(enum ddp_dtype dtype)
{
	switch (dtype) {
	case DDP_UINT8:
		return 1;
	case DDP_FLOAT16:
	case DDP_BFLOAT16:
		return 2;
	case DDP_FLOAT32:
		return 4;
	case DDP_FLOAT64:
		return 8;
	}
	return 0;
}
