/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ddp_comm_shrink's other face (shrink.c), for the gradient sync
 * (grad.c), whose DDP_ON_FAILURE=shrink shrinks the communicator it
 * borrows where the program holds it, so that the program's own pointer
 * sees the smaller world (ddp_comm_size). Above the communicator
 * (comm.h), beside straggler.h.
 *
 * Errors: as ddp_comm_shrink's (ddp.h), in the thread's last error.
 * Thread safety: both take the communicator's lock; the caller makes
 * sure that nothing else runs on comm (the gradient sync's thread idle).
 */
#ifndef DDP_WK_SHRINK_H
#define DDP_WK_SHRINK_H

#include "ddp.h"

/*
 * Whether comm could shrink (TCP backend, every pair of ranks connected):
 * DDP_OK, else DDP_ERR_UNSUPPORTED (or DDP_ERR_NOMEM) naming why and what
 * would work. Communicates nothing.
 */
enum ddp_status wk_comm_shrink_check(struct ddp_comm *comm);

/*
 * ddp_comm_shrink, with the survivors' communicator taking comm's place:
 * on DDP_OK comm is healthy again, of the survivors, renumbered; the
 * old state (the lost ranks' connections, the old world's node segment)
 * is freed. On failure comm stays failed. Collective over the survivors.
 */
enum ddp_status wk_comm_shrink_in_place(struct ddp_comm *comm);

#endif
