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

#endif
