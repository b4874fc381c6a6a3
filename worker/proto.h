/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libddp's wire formats (proto.c): the rendezvous messages, the munge
 * credential's payload and the collective frame header. Pure functions
 * over byte buffers, little endian, bounds-checked and fuzzed
 * (tests/fuzz/fuzz-rdv.c): no I/O, no global state, so every function is
 * thread-safe. Failures return -1 (with a reason in err where the
 * function takes one); nothing here sets the thread's last error. Uses
 * only ddp.h.
 */
#ifndef DDP_WK_PROTO_H
#define DDP_WK_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "ddp.h"

#define WK_TOKEN_LEN 32
#define WK_ADDR_LEN 64
/* Largest rendezvous message body: a munge credential is well below. */
#define RDV_MAX_BODY 65536
/* A roster's: every rank's port, address and host at the largest world. */
#define RDV_MAX_ROSTER \
	(WK_MAX_WORLD * (2u + 1u + WK_ADDR_LEN + 1u + 255u) + 36u)
#define RDV_HDR_LEN 12
#define RDV_MAGIC 0x52504444u /* "DDPR" little endian */
/* 5: an ABORT frame carries its cause as fields (struct wk_abort) and a
 * STALL notice may say a rank is present (tcp.c); 4: the data-port hello
 * is a challenge-response under the mesh token
 * both ways, which never crosses the wire in it (3: both sides' nonces in
 * every credential, the mesh token in the welcome, the join connection
 * closed after it, the roster handed down a tree of ranks and the joins
 * of a node's ranks relayed by its leader; 2: one nonce, the roster from
 * rank 0 to every rank; 1: the rank's credential first, unbound). */
#define RDV_VERSION 5
/* Largest world the wire formats carry. */
#define WK_MAX_WORLD 65536
#define WK_MAX_CRED 8192
/* A fresh random nonce per rendezvous connection, from each side. */
#define RDV_NONCE_LEN 16
/* Ranks a rank hands the roster to: rank r's children are
 * RDV_FANOUT * r + 1 .. RDV_FANOUT * r + RDV_FANOUT. */
#define RDV_FANOUT 8
/* An open's flags: the rank is its node's leader (LOCAL_RANK 0), which
 * relays its node's joins and gets the roster down the tree, not on its
 * join connection. */
#define RDV_OPEN_LEADER 1u

/*
 * The rendezvous, one short connection per rank to rank 0:
 *   rank -> 0  OPEN    rank, world, job, step, the rank's nonce (a claim;
 *                      nothing secret)
 *   0 -> rank  PROOF   rank 0's nonce + rank 0's credential for both
 *                      nonces and the rank's socket address as rank 0
 *                      sees it
 *   rank -> 0  HELLO   data port, host + the rank's credential for the
 *                      same nonces and its own socket address
 *   0 -> rank  WELCOME the mesh token
 * REFUSE (reason, then close) may come instead of any reply. The roster
 * (every rank's data address and host, and the token) goes down a tree:
 * rank 0's children (ranks 1 .. RDV_FANOUT) keep their join connection
 * and get it there (ROSTER once every rank has joined, or REFUSE), so
 * that they need no connection coming in; every other rank closes its
 * join connection after the welcome and gets the roster from its parent,
 * which connects to its data listener, proves itself in a data-port hello
 * (below), then sends ROSTER. Then each rank opens the same hello on the
 * data listener of each lower rank its collectives use (peers.h); rank
 * 0's is MASTER_PORT. The data-port hello, before the roster or any
 * frame, never carries the token:
 *   dialer -> listener  PEER       the dialer's rank and a fresh nonce
 *   listener -> dialer  CHALLENGE  the listener's rank and a fresh nonce
 *   dialer -> listener  PEER_MAC   proto_peer_mac(token, dialer, ...)
 *   listener -> dialer  PEER_MAC   proto_peer_mac(token, listener, ...)
 * Each side checks the other's MAC in constant time, so neither learns
 * anything of the token from a side that does not hold it, and a MAC
 * seen on one connection fits no other (both nonces are in it).
 *
 * With LOCAL_RANK and LOCAL_WORLD_SIZE known, a node's other ranks join
 * its leader (LOCAL_RANK 0) instead, over a Unix socket of the node, with
 * the same four messages: the leader's PROOF (credential kind "leader",
 * its rank in the message) first, then the member's HELLO (kind
 * "member"), both bound to the leader's socket, the member's process and
 * both nonces. The leader holds its verified members, joins rank 0 with
 * OPEN (relay: how many) .. HELLO, then RELAY (each member's rank and
 * data port) in the same authenticated connection, and hands rank 0's
 * WELCOME on to its members; members that come later go in another such
 * session of the leader.
 */
enum rdv_type {
	RDV_HELLO = 1,	   /* rank -> rank 0: who I am + munge credential */
	RDV_WELCOME = 2,   /* rank 0 -> rank: joined (empty text) */
	RDV_REFUSE = 3,	   /* rank 0 -> anyone: reason, then close */
	RDV_ROSTER = 4,	   /* rank 0 -> rank: every rank's address + token */
	RDV_PEER = 5,	   /* rank -> lower rank's data listener: rank+token */
	RDV_OPEN = 6,	   /* rank -> rank 0, first: the rank it claims */
	RDV_PROOF = 7,	   /* rank 0 -> rank: nonce + rank 0's credential */
	RDV_RELAY = 8,	   /* leader -> rank 0, after its hello: its members */
	RDV_CHALLENGE = 9, /* data listener -> dialer: rank + nonce */
	RDV_PEER_MAC = 10, /* both ways: the MAC of the data-port hello */
};
#define RDV_TYPE_MAX RDV_PEER_MAC
/* The MAC of the data-port hello: HMAC-SHA256. */
#define RDV_MAC_LEN 32

struct rdv_open {
	uint32_t rank;
	uint32_t world;
	char job[DDP_ID_MAX];
	char step[DDP_ID_MAX];
	uint8_t nonce[RDV_NONCE_LEN]; /* the rank's, fresh per connection */
	uint32_t flags;		      /* RDV_OPEN_LEADER */
	uint32_t
		relay; /* members whose joins a RELAY carries after the hello */
};

struct rdv_proof {
	uint32_t rank; /* the prover's: 0, or the node leader's */
	uint8_t nonce[RDV_NONCE_LEN];
	char cred[WK_MAX_CRED]; /* NUL-terminated munge credential */
};

struct rdv_hello {
	uint32_t rank;
	uint32_t world;
	uint16_t data_port;
	char host[DDP_HOST_MAX];
	char cred[WK_MAX_CRED]; /* NUL-terminated munge credential */
};

struct rdv_roster_entry {
	uint16_t port;
	char addr[WK_ADDR_LEN];
	char host[DDP_HOST_MAX];
};

/* A member a leader verified, in its RELAY. */
struct rdv_relay_entry {
	uint32_t rank;
	uint16_t data_port;
};

/* PEER (the dialer's) and CHALLENGE (the listener's). */
struct rdv_peer_hello {
	uint32_t rank;
	uint8_t nonce[RDV_NONCE_LEN];
};

/* A growable output buffer; on allocation failure bad is set. */
struct wk_buf {
	uint8_t *p;
	size_t len;
	size_t cap;
	int bad;
};

void wk_buf_free(struct wk_buf *b);
/* wk_buf_free after zeroing the whole allocation: for buffers that held
 * the mesh token or a key. */
void wk_buf_wipe(struct wk_buf *b);
/*
 * Each proto_encode_* appends one complete message (header + body) to b.
 * Returns 0 or -1 (too long or out of memory).
 */
int proto_encode_open(struct wk_buf *b, const struct rdv_open *o);
int proto_encode_proof(struct wk_buf *b, const struct rdv_proof *p);
int proto_encode_hello(struct wk_buf *b, const struct rdv_hello *h);
int proto_encode_text(struct wk_buf *b, enum rdv_type type, const char *text);
/* A REFUSE under another protocol version's header, so that a rank of
 * another slurm-ddp release can read why (text messages are unchanged). */
int proto_encode_refuse_as(struct wk_buf *b, uint16_t version,
			   const char *text);
int proto_encode_roster(struct wk_buf *b, uint32_t world,
			const uint8_t token[WK_TOKEN_LEN],
			const struct rdv_roster_entry *ents);
int proto_encode_peer(struct wk_buf *b, const struct rdv_peer_hello *p);
int proto_encode_challenge(struct wk_buf *b, const struct rdv_peer_hello *p);
int proto_encode_peer_mac(struct wk_buf *b, const uint8_t mac[RDV_MAC_LEN]);
int proto_encode_welcome(struct wk_buf *b, const uint8_t token[WK_TOKEN_LEN]);
int proto_encode_relay(struct wk_buf *b, uint32_t n,
		       const struct rdv_relay_entry *ents);

/*
 * Checks a 12-byte message header: returns 0 with *type and *body_len, or
 * -1 with a reason in err for a bad magic, version, type or length.
 */
int proto_parse_header(const uint8_t *buf, size_t len, uint16_t *type,
		       uint32_t *body_len, char *err, size_t errlen);
/* The protocol version of a header with slurm-ddp's magic, else 0. */
uint16_t proto_header_version(const uint8_t *buf, size_t len);
/* Body decoders: 0, or -1 with a reason in err. Never read past len. */
int proto_parse_open(const uint8_t *body, size_t len, struct rdv_open *o,
		     char *err, size_t errlen);
int proto_parse_proof(const uint8_t *body, size_t len, struct rdv_proof *p,
		      char *err, size_t errlen);
int proto_parse_hello(const uint8_t *body, size_t len, struct rdv_hello *h,
		      char *err, size_t errlen);
int proto_parse_text(const uint8_t *body, size_t len, char *text,
		     size_t textlen, char *err, size_t errlen);
/* ents must hold max_world entries; *world receives the count. */
int proto_parse_roster(const uint8_t *body, size_t len, uint32_t max_world,
		       uint32_t *world, uint8_t token[WK_TOKEN_LEN],
		       struct rdv_roster_entry *ents, char *err, size_t errlen);
/* PEER and CHALLENGE. */
int proto_parse_peer(const uint8_t *body, size_t len, struct rdv_peer_hello *p,
		     char *err, size_t errlen);
int proto_parse_peer_mac(const uint8_t *body, size_t len,
			 uint8_t mac[RDV_MAC_LEN], char *err, size_t errlen);

/*
 * The MAC one side of a data-port hello sends: HMAC-SHA256 under the mesh
 * token of a label naming the side (listener: 1 for the listener's, 0
 * for the dialer's), the dialer's and the listener's ranks and nonces.
 */
void proto_peer_mac(const uint8_t token[WK_TOKEN_LEN], int listener,
		    uint32_t dialer_rank, uint32_t listener_rank,
		    const uint8_t dialer_nonce[RDV_NONCE_LEN],
		    const uint8_t listener_nonce[RDV_NONCE_LEN],
		    uint8_t mac[RDV_MAC_LEN]);
int proto_parse_welcome(const uint8_t *body, size_t len,
			uint8_t token[WK_TOKEN_LEN], char *err, size_t errlen);
/* Exactly n entries, into ents (room for n). */
int proto_parse_relay(const uint8_t *body, size_t len, uint32_t n,
		      struct rdv_relay_entry *ents, char *err, size_t errlen);

/*
 * What a credential binds the connection to: the rank's socket address
 * as rank 0 sees it ("ADDR:PORT") and the rank's nonce, as
 * "ADDR:PORT rn=HEX" into buf. 0, or -1 when it does not fit.
 */
int proto_conn_binding(char *buf, size_t size, const char *addr,
		       const uint8_t rank_nonce[RDV_NONCE_LEN]);

/*
 * The payload bound into a munge credential: kind ("rank0" for rank 0's
 * proof to `rank`, "hello" for the rank's own), job, step, rank, world,
 * rank 0's nonce for this connection and the connection's binding
 * (proto_conn_binding: the rank's address and nonce). Both sides build it
 * from what they know and compare it with the decoded payload byte for
 * byte. 0, or -1 when it does not fit in size.
 */
int proto_cred_payload(char *buf, size_t size, const char *kind,
		       const char *job, const char *step, int rank, int world,
		       const uint8_t nonce[RDV_NONCE_LEN], const char *addr);

/* Collective frame header, 32 bytes on the wire. */
#define WK_FRAME_LEN 32
#define WK_FRAME_MAGIC 0x46504444u /* "DDPF" */
enum wk_frame_type {
	WK_F_DATA = 1,
	WK_F_ABORT = 2,
	WK_F_BYE = 3,
	WK_F_STALL = 4, /* "I timed out waiting for rank <aux>" (notice) */
};
/* A STALL notice's flags (its unit): a verdict, "rank aux has not entered
 * call seq", or its correction, "rank aux has entered call seq", rather
 * than "this rank is in call seq, waiting for aux" (tcp.h). */
#define WK_STALL_ABSENT 1u
#define WK_STALL_PRESENT 2u
enum wk_coll {
	WK_C_ALLREDUCE = 1,
	WK_C_BCAST = 2,
	WK_C_BARRIER = 3,
	WK_C_HIER_SETUP = 4, /* a node leader hands out its segment (hier.c) */
};
/* A collective's algorithm, in a frame's aux. */
enum wk_algo {
	WK_ALGO_AUTO = 0,
	WK_ALGO_RD = 1,
	WK_ALGO_RING = 2,
	WK_ALGO_TREE = 3,
	WK_ALGO_CHAIN = 4,
	WK_ALGO_NCCL = 5, /* the call runs on the NCCL data plane */
	WK_ALGO_HIER = 6, /* within nodes in shared memory, then across */
};

struct wk_frame {
	uint8_t type;
	uint8_t coll;
	uint8_t dtype;
	uint8_t op;
	uint32_t seq;
	uint32_t unit;
	uint64_t count;
	uint32_t len;
	uint32_t aux; /* allreduce: algorithm; broadcast: root */
};
void wk_frame_encode(uint8_t out[WK_FRAME_LEN], const struct wk_frame *f);

/*
 * Why a rank's failure is another rank's fault, in the words of the naming
 * line (cause.h): lost (its connection died), hang (it has not entered the
 * call), behind (it is still in an earlier call, waiting itself),
 * unreachable (a wait for it timed out); none: no rank is blamed.
 */
enum wk_why {
	WK_WHY_NONE = 0,
	WK_WHY_LOST = 1,
	WK_WHY_HANG = 2,
	WK_WHY_BEHIND = 3,
	WK_WHY_UNREACHABLE = 4,
};
#define WK_WHY_MAX WK_WHY_UNREACHABLE
/* "lost", "hang", "behind" or "unreachable"; NULL for none or unknown. */
const char *wk_why_name(int why);

/* Longest text an ABORT carries, without the NUL (longer is cut). */
#define WK_ABORT_TEXT_MAX 1000
/* The fixed fields of an ABORT's payload, and the largest payload. */
#define WK_ABORT_FIXED 12
#define WK_ABORT_MAX (WK_ABORT_FIXED + DDP_HOST_MAX + WK_ABORT_TEXT_MAX)

/*
 * The payload of an ABORT frame: why the sender's communicator failed, as
 * fields the receiving rank decides from, and the sender's error for
 * people (never read by a program). Little endian:
 *   u8 why, u8 coll, u16 host length, u32 blamed, u32 seq, host, text
 * the text running to the end of the payload. why WK_WHY_NONE carries
 * blamed UINT32_MAX and no host; any other a rank below WK_MAX_WORLD and
 * a host of 1 to DDP_HOST_MAX - 1 bytes. coll and seq are the call the
 * blame is about (0 and 0: none). Neither host nor text holds a NUL.
 */
struct wk_abort {
	uint8_t why;			  /* enum wk_why */
	uint8_t coll;			  /* enum wk_coll, 0: none */
	uint32_t seq;			  /* the call's sequence number */
	int32_t blamed;			  /* -1 with WK_WHY_NONE */
	char host[DDP_HOST_MAX];	  /* the blamed rank's host */
	char text[WK_ABORT_TEXT_MAX + 1]; /* for people only */
};
/*
 * The payload of a into out (size bytes; WK_ABORT_MAX always do), its
 * text cut to WK_ABORT_TEXT_MAX bytes: the payload's length, or -1 when a
 * field is outside the form above or out is too small.
 */
int wk_abort_encode(uint8_t *out, size_t size, const struct wk_abort *a);
/* Reads a payload of len bytes into a: 0, or -1 with a reason in err. */
int wk_abort_decode(const uint8_t *in, size_t len, struct wk_abort *a,
		    char *err, size_t errlen);
/* 0, or -1 for a bad magic or type. */
int wk_frame_decode(const uint8_t in[WK_FRAME_LEN], struct wk_frame *f);
/* "allreduce #5 (float32 sum, 1000 elements, ring)" into buf. */
void wk_frame_describe(const struct wk_frame *f, char *buf, size_t size);
const char *wk_dtype_name(int dtype);
const char *wk_op_name(int op);

#endif
