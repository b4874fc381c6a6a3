/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What libddp exports for slurm-ddp's own tools (ddp-check), beyond the
 * API of ddp.h: so that a tool asks libddp rather than copying it. Not
 * installed and not part of the API; it may change with any release.
 */
#ifndef DDP_TOOLS_H
#define DDP_TOOLS_H

#include <stddef.h>

#include "ddp.h"

/*
 * Loads libddp's NCCL backend, libddp-nccl.so, where ddp_comm_init()
 * looks for it: the file DDP_NCCL_PLUGIN names when set (nothing else
 * then), else beside libddp (beside the program when libddp is linked
 * in statically), else in the installation's plugin directory, else on
 * the library path. Returns the dlopen() handle (the caller dlclose()s
 * it), or NULL with the reason in why (whylen bytes, cut to fit).
 * Thread-safe as dlopen() is.
 */
DDP_EXPORT void *ddp_nccl_plugin_open(char *why, size_t whylen);

/*
 * Told, on rank 0, how the joins go while ddp_comm_init() waits for the
 * ranks: world, and host[r] the node rank r joined from, NULL for a rank
 * that has not joined yet (rank 0 has; borrowed for the call). Called on
 * the thread of ddp_comm_init(), every interval_s seconds of that wait
 * for as long as a rank is missing: never when every rank joined within
 * the first interval_s. fn NULL turns it off, as does an interval_s not
 * above 0. Set it before ddp_comm_init(); not thread-safe.
 */
typedef void ddp_join_progress_fn(void *arg, int world,
				  const char *const *host);
DDP_EXPORT void ddp_set_join_progress(ddp_join_progress_fn *fn, void *arg,
				      double interval_s);

#endif
