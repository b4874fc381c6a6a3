/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the two halves of libddp's TCP mesh share (tcp.h is their public
 * face): tcp.c moves frames and waits on the connections, watching every
 * peer for goodbyes, aborts, deaths and stalls; tcp_coll.c builds the
 * collectives (recursive doubling, the pipelined ring and chain, the tree
 * broadcast, the dissemination agreement) out of those moves.
 *
 * Ownership: a tcp_xop points into the caller's buffer and owns nothing.
 *
 * Errors: as tcp.h: a failing call sets the thread's last error (wk_err)
 * naming the rank, its peer and the call.
 *
 * Thread safety: none; the communicator's lock serialises every call on
 * one mesh.
 */
#ifndef DDP_WK_TCP_INTERNAL_H
#define DDP_WK_TCP_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"
#include "status.h"
#include "tcp.h"

/* One frame to send or receive: header + payload. */
struct tcp_xop {
	int peer;
	struct wk_frame f; /* sent, or expected */
	uint8_t hdr[WK_FRAME_LEN];
	void *buf;
	size_t len;
	size_t done; /* bytes of header + payload moved so far */
};

struct tcp_want {
	int peer;
	short events;
};

/* Sets up x to move len bytes of buf to or from peer, in a DATA frame
 * shaped like tmpl with the given unit. */
void tcp_xop_init(struct tcp_xop *x, int peer, const struct wk_frame *tmpl,
		  uint32_t unit, void *buf, size_t len);

/* Moves bytes of a send or a receive without blocking: 1 done, 0 would
 * block, <0 failed (*st says how). A receive checks the frame's header
 * against x->f. */
int tcp_send_progress(struct wk_mesh *c, struct tcp_xop *x,
		      enum ddp_status *st);
int tcp_recv_progress(struct wk_mesh *c, struct tcp_xop *x,
		      enum ddp_status *st);

/* Waits until one of the nw wanted events may be ready, watching every
 * other linked peer; cur is the call in progress, for the errors. */
enum ddp_status tcp_poll_wait(struct wk_mesh *c, const struct tcp_want *w,
			      int nw, double deadline,
			      const struct wk_frame *cur);

/* Runs nsend sends (x[0..nsend)) and nrecv receives (after them) to
 * completion, or fails at the deadline naming the peer waited for. */
enum ddp_status tcp_run_xops(struct wk_mesh *c, struct tcp_xop *x, int nsend,
			     int nrecv, double deadline);

#endif
