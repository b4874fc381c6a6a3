/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rendezvous' private header: the state of one rank's rendezvous and
 * the functions its files share (rdv.h is the rest of libddp's view).
 *
 * Its files, in layers from the top: each calls only the layers below
 * its own. rdv_master.c, rdv_join.c and rdv_roster.c make one layer, the
 * handlers, and call none of one another.
 *
 *   rdv.c          top: the entry point (rdv_connect_all), the state's
 *                  setup, and each rank's course start to end below:
 *                  rank 0's (rdv_master_side, MASTER_PORT) and the
 *                  others' (rdv_worker_side)
 *   rdv_accept.c   the accept loop every listener runs
 *                  (rdv_accept_ranks): hands each message to its stage's
 *                  handler below, and a leader's batch to rdv_leader.c
 *   rdv_leader.c   a node leader: its join socket, members, relay (it
 *                  joins with rdv_join.c, welcomes with rdv_master.c)
 *   rdv_master.c   admitting joins: rank 0's on MASTER_PORT, a node
 *                  leader's members with the same code
 *   rdv_join.c     a rank's join to rank 0
 *   rdv_roster.c   the roster down the tree, then the peer hellos
 *   rdv_common.c   the floor: messages, refusals, errors, and the pending
 *                  table's bookkeeping (drop, refuse, adopt, send)
 *
 * One pending connection of a listener (struct pend, stage), as rank 0
 * (PK_JOIN) or a node leader (PK_MEMBER) sees it; any bad message,
 * deadline or eviction drops it from any stage, refused:
 *
 *   accepted --OPEN--> [0] --PROOF sent--> [1] --HELLO verified-->
 *       relay announced: [3] --RELAY--> welcome sent, dropped
 *       a child of rank 0, a leader's member: [2] held, WELCOME sent (by
 *           a leader once it relayed them), then the roster or dropped
 *       anyone else: WELCOME sent, dropped
 *   (a data listener's PK_PEER: [0] --PEER--> CHALLENGE sent [4]
 *    --the dialer's PEER_MAC verified--> PEER_MAC sent, adopted into
 *    the mesh; or, from the parent or rank 0, [1] --ROSTER-->)
 *
 * One rank, start to end (each step fails the rendezvous with wk_err):
 *
 *   rank 0:   listen MASTER_PORT (+ its node's join socket)
 *             -> accept until every rank joined      (WAIT_JOINS)
 *             -> ROSTER to its tree children, PEER to lower ranks
 *             -> accept the peers it wants            (WAIT_PEERS)
 *   leader:   data listener + node's join socket
 *             -> accept members for a batch           (WAIT_MEMBERS)
 *             -> join rank 0, relaying them (rdv_leader_flush)
 *             -> wait for the roster, relaying late members in sessions
 *                of their own                          (WAIT_ROSTER)
 *   others:   data listener -> join the node's leader, or rank 0 when
 *             it does not answer within LEADER_WAIT_S
 *             -> the roster: on the join connection (a child of rank 0)
 *                or from the tree parent               (WAIT_ROSTER)
 *   then all: ROSTER to tree children -> dial the wanted lower ranks
 *             -> accept the wanted higher ones         (WAIT_PEERS)
 *
 * Thread safety: a struct rdv belongs to the thread in rdv_connect_all.
 */
#ifndef DDP_WK_RDV_INTERNAL_H
#define DDP_WK_RDV_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "auth.h"
#include "ddp_guard.h"
#include "ddp_net.h"
#include "ddp_util.h"
#include "peers.h"
#include "proto.h"
#include "rdv.h"
#include "sha256.h"
#include "status.h"

/* The pending table's size (at most DDP_GUARD_MAX). */
#define MAX_PENDING 256
_Static_assert(MAX_PENDING <= DDP_GUARD_MAX,
	       "the guard tracks every pending connection");
/* One address may hold at most this many pending connections. The ranks
 * of one node connect from one address: a rank of a node's full local
 * mesh (up to WK_HIER_LOCAL_MAX ranks) is dialled by every other rank of
 * the node at once, and each of them stays pending for the mesh hello's
 * round trip, so the cap holds the whole node and its stripe's peers. */
#define PER_SOURCE_MAX (WK_HIER_LOCAL_MAX + 32)
_Static_assert(PER_SOURCE_MAX < MAX_PENDING,
	       "one address never holds the whole pending table");
/* Connections accepted per wake-up, so that a flood of connects does not
 * starve the reads of those already pending. */
#define ACCEPT_BATCH 32
/* A genuine rank sends its open right after connecting and its hello one
 * munge round trip after rank 0's proof. */
#define HELLO_GRACE_S 10.0
/* How long a rank waits for each reply of rank 0 before it connects
 * again (rank 0 answers an open or a hello at once). */
#define REPLY_WAIT_S 10.0
/* How long a rank other than its node's leader tries the node's join
 * socket before it joins rank 0 directly (a leader not started yet, one
 * that could not take the socket, or ranks of one node in separate
 * network namespaces). */
#define LEADER_WAIT_S 5.0
/* How long a node leader waits for its members before it joins rank 0
 * with those it holds; members that come later go in another session,
 * LATE_BATCH_S after the first of them. */
#define BATCH_WAIT_S 1.0
#define LATE_BATCH_S 0.2
/* Rank 0's proofs (ddp_budget, ddp_guard.h). Each is a credential (with
 * munge, a round trip to the munged that slurmd shares), made for anyone
 * who reaches MASTER_PORT with the job's ids, which squeue shows; an open
 * over the budget waits for it. A local user can take any address of
 * 127/8, a host any of its /24 or /64, so the budget is a prefix's:
 * PROOF_BURST at once, then PROOF_RATE a second; all sources together
 * get PROOF_GLOBAL_BURST and PROOF_GLOBAL_RATE, so that no rotation of
 * sources gets more. A proof whose hello verifies (a rank of the job
 * joined) is given back: only proofs no rank used are spent, and a job's
 * own joins, however many from one prefix (a whole job's node leaders in
 * one /24, bench/scale's in 127/8), wait only when more than PROOF_BURST
 * of them are between proof and hello at once. */
#define PROOF_BURST 32
#define PROOF_RATE 20.0
#define PROOF_GLOBAL_BURST 128
#define PROOF_GLOBAL_RATE 60.0
/* The name of a node's join socket: this, then a digest's hex. */
#define NODE_SOCKET_PREFIX "slurm-ddp/"

/* What a pending connection is (rdv_accept.c, accept_new). */
enum pend_kind {
	PK_JOIN,   /* rank 0's MASTER_PORT while ranks join */
	PK_MEMBER, /* a node's join socket: a member joins its leader */
	PK_PEER,   /* a data listener (rank 0's MASTER_PORT after joins) */
};

/* What a listener waits for (rdv_accept_ranks). */
enum wait_for {
	WAIT_JOINS,   /* rank 0: every rank joined */
	WAIT_ROSTER,  /* a data listener: the roster from the parent */
	WAIT_PEERS,   /* a data listener: the wanted higher ranks connected */
	WAIT_MEMBERS, /* a node leader: its members, until the batch ends */
};

struct pend {
	int fd;
	enum pend_kind kind;
	/* PK_JOIN and PK_MEMBER: 0 open expected, 1 proof sent, hello
	 * expected, 2 joined (a child of rank 0 waiting for the roster, or a
	 * member its leader holds), 3 a leader's relay expected */
	int stage;
	uint32_t rank;	    /* claimed in the open */
	uint32_t flags;	    /* the open's */
	uint32_t relay;	    /* the open's: members the leader relays */
	uint16_t data_port; /* a held member's */
	int pid;	    /* a member's process, as the kernel names it */
	/* Stage 0: its open, whole in buf, waits for its source's budget
	 * of proofs (rdv_pend_deferred). */
	int deferred;
	/* Stage 1 at rank 0: the budget's ticket of its proof, given back
	 * when its hello verifies (0: none). */
	int ticket;
	uint8_t nonce[RDV_NONCE_LEN];	   /* this side's, of the connection */
	uint8_t peer_nonce[RDV_NONCE_LEN]; /* PK_PEER: the dialer's */
	char bind[WK_ADDR_LEN + 48]; /* proto_conn_binding of the connection */
	uint8_t *buf;
	size_t have;
	size_t need;
	double deadline;
	char from[WK_ADDR_LEN + 48]; /* ADDR:PORT, or the member's process */
	char addr[WK_ADDR_LEN];
};

/* State of one rank's rendezvous. */
struct rdv {
	struct wk_mesh *mesh;
	struct wk_auth auth;
	int lfd; /* master listener (rank 0) or data listener (others) */
	int lport;
	/* The node's join socket (a leader's), or -1. */
	int ufd;
	/* LOCAL_RANK and LOCAL_WORLD_SIZE, local_size 0 when unknown:
	 * then every rank joins rank 0 directly. */
	int local_rank;
	int local_size;
	int leader;		    /* this rank relays its node's joins */
	struct sockaddr_un node_sa; /* the node's join socket (abstract) */
	socklen_t node_salen;
	char node_tag[2 * 16 + 1]; /* its name, in the members' binding */
	/* Rank 0: its address as its ranks reach it, for the members that
	 * joined it over the node's socket. */
	char self_addr[WK_ADDR_LEN];
	int self_addr_seen;
	/* A leader: members relayed so far, and when to relay those held. */
	int relayed;
	int joined_once; /* this rank joined rank 0 (a leader's later
			  * sessions must bring the same token) */
	double batch_end;
	double deadline_all;	      /* the rendezvous' */
	enum wait_for what;	      /* of the current rdv_accept_ranks */
	uint8_t told[RDV_FANOUT + 1]; /* rank 0: children given the roster */
	int local_only;	 /* DDP_AUTH=none on loopback: refuse other hosts */
	int port_waited; /* rank 0 found MASTER_PORT held at first */
	uint8_t token[WK_TOKEN_LEN];
	struct pend pend[MAX_PENDING];
	int npend;
	/* pend's accounting, index for index. Its size and one address's
	 * share of it: MAX_PENDING and PER_SOURCE_MAX, less under a low
	 * limit of open files, so that pending connections never take the
	 * descriptors the rank needs. */
	struct ddp_guard guard;
	double wait_end; /* the deadline of the current rdv_accept_ranks */
	/* Rank 0 while ranks join: when the join progress is told next
	 * (ddp_set_join_progress), 0 when it is not told. */
	double progress_at;
	int lost; /* rank 0: a rank that died after it joined, or -1 */
	struct ddp_guard_refusals ref;
	struct ddp_budget budget; /* rank 0's proofs */
	int ndeferred;		  /* pending opens waiting for their budget */
	const struct ddp_config *cfg;
	/* After the roster: the peers this rank's collectives use
	 * (peers.h), the only ones it connects; NULL before, when rank 0
	 * waits for every rank. */
	uint8_t *want;
	/* Rank 0, while ranks join: who has; a leader: its members that it
	 * holds or relayed. */
	uint8_t *joined;
	/* A rank other than 0 while it waits for the roster: 0 waiting, 1
	 * received, -1 rank 0 gave up (why in gave_up). */
	int roster;
	struct rdv_roster_entry *ents; /* the roster, to hand down */
	char gave_up[1024];
};

/* What a refused peer is told: it has not proven it belongs to the job,
 * so nothing of the job (ids, world size, who joined) goes with it. */
#define REFUSAL_TEXT                                                          \
	"refused by the rendezvous on this port; the job's rank 0 log names " \
	"the reason"

/*
 * The functions the rendezvous' files share, by file. Each one's contract
 * is written at its definition; those returning enum ddp_status set the
 * thread's last error (wk_err) when they fail, and all of them run on the
 * thread in rdv_connect_all only.
 */

/* rdv.c: the entry point and each rank's course */
void rdv_self_addr_guess(struct rdv *r);
enum ddp_status rdv_keep_wanted(struct rdv *r);
enum ddp_status rdv_master_side(struct rdv *r, double deadline);
enum ddp_status rdv_worker_side(struct rdv *r, double deadline);

/* rdv_accept.c: the accept loop */
enum ddp_status rdv_accept_ranks(struct rdv *r, int from, enum wait_for what,
				 double deadline);

/* rdv_leader.c: a node leader */
enum ddp_status rdv_node_listen(struct rdv *r);
enum ddp_status rdv_leader_flush(struct rdv *r, double deadline);
void rdv_refuse_held(struct rdv *r, const char *why);
enum ddp_status rdv_join_leader(struct rdv *r, double deadline, int *joined);

/* rdv_master.c: admitting joins */
int rdv_member_binding(const struct rdv *r, int pid, int leader,
		       const uint8_t *nonce, char *out, size_t outlen);
void rdv_pend_open(struct rdv *r, int i, const uint8_t *body, size_t blen);
void rdv_pend_deferred(struct rdv *r);
int rdv_send_welcome(struct rdv *r, int i);
void rdv_pend_hello(struct rdv *r, int i, const uint8_t *body, size_t blen);
void rdv_pend_relay(struct rdv *r, int i, const uint8_t *body, size_t blen);

/* rdv_join.c: a rank's join */
enum ddp_status rdv_join_send_open(struct rdv *r, int fd, double wait,
				   uint32_t relay, uint8_t *nonce, int *retry);
enum ddp_status rdv_join_send_hello(struct rdv *r, int fd, double wait,
				    const struct rdv_proof *pr,
				    const char *kind, const char *bind,
				    const struct rdv_relay_entry *relay,
				    uint32_t nrelay, int *retry);
enum ddp_status rdv_join_take_welcome(struct rdv *r, uint16_t type,
				      const uint8_t *body, uint32_t blen);
enum ddp_status rdv_join_master(struct rdv *r, double deadline,
				const struct rdv_relay_entry *relay,
				uint32_t nrelay, int *out);

/* rdv_roster.c: the roster and the peer hellos */
int rdv_tree_parent(int r);
void rdv_pend_peer(struct rdv *r, int i, const uint8_t *body, size_t blen);
void rdv_pend_peer_mac(struct rdv *r, int i, const uint8_t *body, size_t blen);
int rdv_peer_hello(struct rdv *r, int fd, int to, double deadline, char *why,
		   size_t whylen);
void rdv_pend_roster(struct rdv *r, int i, uint16_t type, const uint8_t *body,
		     size_t blen);
int rdv_send_roster(struct rdv *r, int i);
enum ddp_status rdv_push_roster(struct rdv *r, double deadline);
enum ddp_status rdv_worker_connect_lower(struct rdv *r, double deadline);
enum ddp_status rdv_join_roster(struct rdv *r, int fd, double deadline);

/* rdv_common.c: the floor */
int rdv_wanted(const struct rdv *r, int rank);
enum ddp_status rdv_recv_msg(int fd, double deadline, const char *what,
			     uint16_t *type, uint8_t **body, uint32_t *blen,
			     int *other_version);
void rdv_rank_addr(int fd, int local, char *out, size_t outlen);
void rdv_refuse_flush(struct rdv *r, int force);
void rdv_refuse_log(struct rdv *r, const char *from, const char *why);
void rdv_refuse_text(const uint8_t *body, uint32_t blen, char *text,
		     size_t textlen);
enum ddp_status rdv_resource_error(const struct rdv *r, int err,
				   const char *doing);
void rdv_pend_drop(struct rdv *r, int i, const char *reason, int tell,
		   uint16_t version);
void rdv_pend_refuse(struct rdv *r, int i, const char *reason);
void rdv_pend_adopt(struct rdv *r, int i, int rank);
int rdv_pend_send(struct rdv *r, int i, struct wk_buf *b, const char *what);
int rdv_pend_proof(void *arg, int i);

#endif
