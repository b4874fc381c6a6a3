/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libddp's TCP mesh (tcp.c) and its collectives (tcp_coll.c): one connection
 * per pair of ranks whose collectives exchange data (peers.h), made by the
 * rendezvous (rdv.h), carrying the control plane of every communicator
 * and the flat algorithms of the host backend (host.h, which chooses
 * between them and the hierarchical allreduce). Uses status.h, ddp_net.h,
 * proto.h and reduce.h; knows nothing of the layers above it.
 *
 * Ownership: the mesh is embedded in its communicator, which allocates
 * peers (size entries, fd -1) before the rendezvous fills them and frees
 * everything with tcp_mesh_fini. tcp_coll.c grows scratch as it needs;
 * tcp.c makes the list of linked peers (tcp_mesh_link).
 *
 * Errors: the collectives set the thread's last error (wk_err) naming the
 * rank, its host and the call, and return DDP_ERR_PEER (a peer died or
 * aborted), DDP_ERR_MISMATCH (ranks called different collectives),
 * DDP_ERR_TIMEOUT (naming the rank really stuck when STALL notices lead
 * to it), DDP_ERR_NOMEM or DDP_ERR_SYSTEM. The mesh stays usable only for
 * tcp_send_abort and tcp_mesh_fini after a failure; the communicator
 * marks itself failed.
 *
 * Thread safety: none inside; the communicator's lock serialises every
 * call on one mesh.
 */
#ifndef DDP_WK_TCP_H
#define DDP_WK_TCP_H

#include <stddef.h>
#include <stdint.h>

#include "ddp.h"
#include "proto.h"

struct wk_peer {
	int fd;
	int port;
	char addr[WK_ADDR_LEN];
	char host[DDP_HOST_MAX];
	int bye;       /* peer said goodbye (ddp_comm_destroy) */
	int early;     /* peer has unread data of a later step: stop peeking */
	int send_mid;  /* a frame to this peer is partly sent */
	int waits_for; /* from its STALL notice this operation, or -1 */
	/* The call its last STALL notice said it is in (0: none): it has
	 * entered every call up to that one. */
	uint32_t in_seq;
	/* A verdict said it has not entered this call (0: none). */
	uint32_t absent_seq;
	/* It has entered this call, as a PRESENT notice said (0: none),
	 * and the call of its last data frame: with in_seq, what makes a
	 * verdict about it wrong. */
	uint32_t present_seq;
	uint32_t data_seq;
};

struct wk_mesh {
	int rank;
	int size;
	double timeout_s;
	struct wk_peer *peers; /* size entries; peers[rank] is this rank */
	uint32_t seq;	       /* collectives so far, in every frame */
	struct wk_frame cur;   /* the call in progress: its seq and kind */
	int waiting;	       /* the rank the wait in progress is for, or -1 */
	int told;	       /* this call's verdict is sent */
	int32_t *pids;	       /* size entries: each rank's process id, or 0 */
	uint8_t *scratch;
	size_t scratch_len;
	int algo;	  /* enum wk_algo: auto, rd, ring or hier */
	size_t ring_min;  /* bytes from which auto picks the ring */
	size_t seg_bytes; /* ring/chain segment */
	char myhost[DDP_HOST_MAX];
	int aborted; /* tcp_send_abort ran: nothing is sent any more */
	/* The rank this mesh's failure blames (why WK_WHY_NONE: none yet):
	 * the first it named, or the cause an ABORT it took on carried,
	 * unchanged. Its ABORT frames carry it (text unused here). */
	struct wk_abort cause;
	int in_grace; /* timed out; collecting STALL notices */
	double grace_end;
	double spin_s; /* how long a wait polls its sockets before sleeping */
	/* The ranks this one has a connection to, ascending, and the poll
	 * set of a wait (nlinked + WK_WAIT_MAX entries): made once by
	 * tcp_mesh_link, so that a call's cost follows the peers (peers.h
	 * bounds them), not the world, and no call allocates. */
	int *linked;
	int nlinked;
	struct pollfd *wait_pfd;
	int *wait_who;
};

/* The most sockets one wait of a collective waits for. */
#define WK_WAIT_MAX 16

/*
 * Lists the peers the rendezvous connected (peers[].fd >= 0) and makes
 * the poll set of the waits: call once the rendezvous is over and before
 * the first collective; no connection is made after it. DDP_OK, or
 * DDP_ERR_NOMEM (the mesh then still takes tcp_send_abort and
 * tcp_mesh_fini).
 */
enum ddp_status tcp_mesh_link(struct wk_mesh *c);

/*
 * Allreduce of host buffers (s may equal r) with a flat algorithm: algo
 * WK_ALGO_RD or WK_ALGO_RING, anything else chooses (recursive doubling
 * unless the ring pays, tcp_ring_pays). op AVG divides by size.
 */
enum ddp_status tcp_allreduce_with(struct wk_mesh *c, const void *s, void *r,
				   size_t count, enum ddp_dtype dtype,
				   enum ddp_op op, int algo);
/* tcp_allreduce_with the mesh's algo (DDP_TCP_ALGO; hier means choose). */
enum ddp_status tcp_allreduce(struct wk_mesh *c, const void *s, void *r,
			      size_t count, enum ddp_dtype dtype,
			      enum ddp_op op);
/*
 * 1 when a ring of `members` ranks (2(members - 1) steps) moves `bytes`
 * faster than recursive doubling (log2 steps of the whole buffer): from
 * ring_min bytes on, and only while each step's share stays at ring_min
 * or more, so that the step count never dominates at large worlds.
 */
int tcp_ring_pays(const struct wk_mesh *c, size_t bytes, int members);
/* The flat algorithm of an allreduce of count elements (bytes in all):
 * want when it is WK_ALGO_RD or WK_ALGO_RING, else the ring where it
 * pays and every rank gets an element, else recursive doubling. */
int tcp_flat_algo(const struct wk_mesh *c, size_t count, size_t bytes,
		  int want);
/*
 * Starts one collective call: its sequence number, the frame header all
 * its frames carry (into t) and the per-operation peer state. For
 * algorithms above the mesh (hier.c) that run on its primitives.
 */
void tcp_call_begin(struct wk_mesh *c, struct wk_frame *t, int coll,
		    enum ddp_dtype dtype, enum ddp_op op, size_t count,
		    uint32_t aux);
/* Broadcast of a host buffer from root. */
enum ddp_status tcp_broadcast(struct wk_mesh *c, void *buf, size_t count,
			      enum ddp_dtype dtype, int root);
enum ddp_status tcp_barrier(struct wk_mesh *c);
/*
 * The control plane's agreement on one call of the data plane: every rank
 * exchanges call's header (coll, dtype, op, count, aux) like a barrier;
 * a rank whose neighbour called something else fails with
 * DDP_ERR_MISMATCH naming both calls, a rank that does not come within
 * the timeout is named. Carries no data.
 */
enum ddp_status tcp_agree(struct wk_mesh *c, const struct wk_frame *call);
/* Non-blocking look at every connection for deaths and aborts. */
enum ddp_status tcp_check_peers(struct wk_mesh *c);
/* The same with the call in progress: a peer's data of that call under
 * another header is a mismatch. */
enum ddp_status tcp_watch(struct wk_mesh *c, const struct wk_frame *cur);
/*
 * A wait keeps trying its sockets for spin_s (yielding the CPU between
 * tries) before it sleeps in poll. This turns that off when this host has
 * more ranks (peers' host names) than CPUs (of this process's cpuset
 * cgroup, else online), where a spinning rank would take the CPU its
 * peers need. Call after the rendezvous filled the peers' hosts.
 */
void tcp_limit_spin(struct wk_mesh *c);
/* Resets the per-operation peer state (stall notices, early data). */
void tcp_op_start(struct wk_mesh *c);
/* Tells every peer this rank timed out waiting for rank `waiting`, so
 * their timeout errors name that rank (STALL notice). */
void tcp_stall(struct wk_mesh *c, int waiting);
/*
 * Naming a rank that is alive but never enters a call (a skipped call, a
 * stuck data loader): a hang, not a death. A wait asks 2 graces before
 * its deadline (grace: a quarter of the timeout, at most 0.5 s): a STALL
 * notice with the call it is in and the rank it waits for, to every
 * peer. A rank that reads one while inside a call answers once with its
 * own, so every rank inside a call soon says so to its peers; a rank
 * outside libddp says nothing. A grace after asking, each rank gives its
 * verdict (tcp_hang_verdict) and sends it to every peer, which passes
 * each new one on once, so it reaches the ranks not connected to the
 * silent one. A verdict can be wrong: a rank that entered the call
 * late (a loaded host) said nothing before it. A rank that reads a
 * verdict naming itself, or a rank it knows has entered the call (its
 * notice or its data of the call), answers with a PRESENT notice, passed
 * on once like a verdict, which overrules the verdict on every rank
 * (tcp_hang_absent). A grace later a rank that holds a verdict not
 * overruled fails with DDP_ERR_TIMEOUT and logs which ranks have not
 * entered which call, with host and pid (the pids come from pids[]),
 * never itself; one that holds none waits on to its deadline.
 */
/*
 * The ranks this rank's verdict names (at most max, into out): the rank
 * it waits for, or every peer when it does not know whom (waiting < 0:
 * the NCCL data plane), that it does not know to have entered the call
 * in progress (tcp_hang_absent). Pure: reads the peers' notices only.
 */
int tcp_hang_verdict(const struct wk_mesh *c, int waiting, int *out, int max);
/* Every rank a verdict named for the call in progress (at most max),
 * but this rank and the ranks it knows have entered the call (their
 * notices, their data, a PRESENT notice): a verdict made before a late
 * rank's notice came is overruled by it, on every rank. */
int tcp_hang_absent(const struct wk_mesh *c, int *out, int max);
/*
 * The same for a wait outside the mesh that ends at deadline (shared
 * memory, the NCCL data plane): tcp_watch(c, cur) (cur NULL: no call to
 * compare with), then asks, tells and fails as above for the rank
 * waited for (-1: unknown). DDP_OK to wait on; else the hang's
 * DDP_ERR_TIMEOUT or tcp_watch's errors.
 */
enum ddp_status tcp_hang_watch(struct wk_mesh *c, const struct wk_frame *cur,
			       int waiting, double deadline);
/*
 * Ring allreduce of buf (count elements, op not AVG) among the n ranks
 * grp[] (this rank is grp[me]) with frames under t's header, within
 * deadline. Borrows buf and grp. Errors as the collectives'.
 */
enum ddp_status tcp_ring_group(struct wk_mesh *c, const int *grp, int n, int me,
			       void *buf, size_t count, enum ddp_dtype dtype,
			       enum ddp_op op, const struct wk_frame *t,
			       double deadline);
/* One frame under t's header (unit t->unit) to rank `to` and/or one from
 * rank `from` (-1: none), concurrently; borrows the buffers. */
enum ddp_status tcp_xfer(struct wk_mesh *c, const struct wk_frame *t, int to,
			 const void *sbuf, size_t slen, int from, void *rbuf,
			 size_t rlen, double deadline);
/*
 * Best-effort ABORT frame to every peer that can take one, without
 * blocking: the mesh's cause as fields and msg (borrowed) as its text
 * for people; from then on nothing more is sent (aborted). A rank that
 * receives it names the cause's rank (cause.h) unless it knows better:
 * the cause blames the rank itself, or a rank it knows has entered the
 * call the cause says it has not, or is a timeout's "unreachable" (the
 * sender's view only: it may be the rank cut off).
 */
void tcp_send_abort(struct wk_mesh *c, const char *msg);
/* Goodbye to every peer (unless aborted), then close: within 1 s. */
void tcp_close_all(struct wk_mesh *c);
/* tcp_close_all, then frees peers and scratch; c may be half set up. */
void tcp_mesh_fini(struct wk_mesh *c);

#endif
