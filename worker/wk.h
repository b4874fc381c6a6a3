/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internals of libddp shared between its files: the communicator, the wire
 * formats (proto.c), the rendezvous (rdv.c), the TCP engine (tcp.c).
 */
#ifndef DDP_WK_H
#define DDP_WK_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "ddp.h"
#include "status.h"

#define WK_TOKEN_LEN 32
#define WK_ADDR_LEN 64
/* Largest rendezvous message body: a munge credential is well below. */
#define RDV_MAX_BODY 65536
#define RDV_HDR_LEN 12
#define RDV_MAGIC 0x52504444u /* "DDPR" little endian */
/* 2: rank 0 proves itself first, credentials bind a nonce and the
 * connection (1 sent the rank's credential first, unbound). */
#define RDV_VERSION 2
#define WK_MAX_WORLD 65536
#define WK_MAX_CRED 8192
/* Rank 0's fresh random nonce per rendezvous connection. */
#define RDV_NONCE_LEN 16

/* ---- wire formats (proto.c): pure functions, fuzzed ---- */

/*
 * The rendezvous, one connection per rank to rank 0:
 *   rank -> 0  OPEN    rank, world, job, step (a claim; nothing secret)
 *   0 -> rank  PROOF   nonce + rank 0's credential for that nonce and the
 *                      rank's socket address as rank 0 sees it
 *   rank -> 0  HELLO   data port, host + the rank's credential for the
 *                      same nonce and its own socket address
 *   0 -> rank  WELCOME (empty), later ROSTER (addresses + mesh token)
 * REFUSE (reason, then close) may come instead of any reply. Then every
 * rank sends PEER (rank + token) to each lower rank's data listener.
 */
enum rdv_type {
	RDV_HELLO = 1,	 /* rank -> rank 0: who I am + munge credential */
	RDV_WELCOME = 2, /* rank 0 -> rank: joined (empty text) */
	RDV_REFUSE = 3,	 /* rank 0 -> anyone: reason, then close */
	RDV_ROSTER = 4,	 /* rank 0 -> rank: every rank's address + token */
	RDV_PEER = 5,	 /* rank -> lower rank's data listener: rank+token */
	RDV_OPEN = 6,	 /* rank -> rank 0, first: the rank it claims */
	RDV_PROOF = 7,	 /* rank 0 -> rank: nonce + rank 0's credential */
};
#define RDV_TYPE_MAX RDV_PROOF

struct rdv_open {
	uint32_t rank;
	uint32_t world;
	char job[DDP_ID_MAX];
	char step[DDP_ID_MAX];
};

struct rdv_proof {
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

struct rdv_peer_hello {
	uint32_t rank;
	uint8_t token[WK_TOKEN_LEN];
};

/* A growable output buffer; on allocation failure bad is set. */
struct wk_buf {
	uint8_t *p;
	size_t len;
	size_t cap;
	int bad;
};

void wk_buf_free(struct wk_buf *b);
/*
 * Each rdv_encode_* appends one complete message (header + body) to b.
 * Returns 0 or -1 (too long or out of memory).
 */
int rdv_encode_open(struct wk_buf *b, const struct rdv_open *o);
int rdv_encode_proof(struct wk_buf *b, const struct rdv_proof *p);
int rdv_encode_hello(struct wk_buf *b, const struct rdv_hello *h);
int rdv_encode_text(struct wk_buf *b, enum rdv_type type, const char *text);
/* A REFUSE under another protocol version's header, so that a rank of
 * another slurm-ddp release can read why (text messages are unchanged). */
int rdv_encode_refuse_as(struct wk_buf *b, uint16_t version, const char *text);
int rdv_encode_roster(struct wk_buf *b, uint32_t world,
		      const uint8_t token[WK_TOKEN_LEN],
		      const struct rdv_roster_entry *ents);
int rdv_encode_peer(struct wk_buf *b, const struct rdv_peer_hello *p);

/*
 * Checks a 12-byte message header: returns 0 with *type and *body_len, or
 * -1 with a reason in err for a bad magic, version, type or length.
 */
int rdv_parse_header(const uint8_t *buf, size_t len, uint16_t *type,
		     uint32_t *body_len, char *err, size_t errlen);
/* The protocol version of a header with slurm-ddp's magic, else 0. */
uint16_t rdv_header_version(const uint8_t *buf, size_t len);
/* Body decoders: 0, or -1 with a reason in err. Never read past len. */
int rdv_parse_open(const uint8_t *body, size_t len, struct rdv_open *o,
		   char *err, size_t errlen);
int rdv_parse_proof(const uint8_t *body, size_t len, struct rdv_proof *p,
		    char *err, size_t errlen);
int rdv_parse_hello(const uint8_t *body, size_t len, struct rdv_hello *h,
		    char *err, size_t errlen);
int rdv_parse_text(const uint8_t *body, size_t len, char *text, size_t textlen,
		   char *err, size_t errlen);
/* ents must hold max_world entries; *world receives the count. */
int rdv_parse_roster(const uint8_t *body, size_t len, uint32_t max_world,
		     uint32_t *world, uint8_t token[WK_TOKEN_LEN],
		     struct rdv_roster_entry *ents, char *err, size_t errlen);
int rdv_parse_peer(const uint8_t *body, size_t len, struct rdv_peer_hello *p,
		   char *err, size_t errlen);

/*
 * The payload bound into a munge credential: kind ("rank0" for rank 0's
 * proof to `rank`, "hello" for the rank's own), job, step, rank, world,
 * rank 0's nonce for this connection and the rank's socket address
 * ("ADDR:PORT", as rank_addr() in rdv.c writes it). Both sides build it
 * from what they know and compare it with the decoded payload byte for
 * byte. 0, or -1 when it does not fit in size.
 */
int rdv_cred_payload(char *buf, size_t size, const char *kind, const char *job,
		     const char *step, int rank, int world,
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
enum wk_coll {
	WK_C_ALLREDUCE = 1,
	WK_C_BCAST = 2,
	WK_C_BARRIER = 3,
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
/* 0, or -1 for a bad magic or type. */
int wk_frame_decode(const uint8_t in[WK_FRAME_LEN], struct wk_frame *f);
/* "allreduce #5 (float32 sum, 1000 elements, ring)" into buf. */
void wk_frame_describe(const struct wk_frame *f, char *buf, size_t size);
const char *wk_dtype_name(int dtype);
const char *wk_op_name(int op);

/* ---- reductions (reduce.c) ---- */

/* dst[i] = dst[i] OP src[i] for n elements (op SUM for AVG). */
void wk_reduce(void *dst, const void *src, size_t n, enum ddp_dtype dtype,
	       enum ddp_op op);
/* buf[i] /= div (AVG's final step). */
void wk_scale_div(void *buf, size_t n, enum ddp_dtype dtype, int div);
float wk_half_to_float(uint16_t h);
uint16_t wk_float_to_half(float f);
float wk_bf16_to_float(uint16_t h);
uint16_t wk_float_to_bf16(float f);
int wk_dtype_ok(int dtype);
int wk_op_ok(int op);

/* ---- communicator ---- */

struct wk_peer {
	int fd;
	int port;
	char addr[WK_ADDR_LEN];
	char host[DDP_HOST_MAX];
	int bye;       /* peer said goodbye (ddp_comm_destroy) */
	int early;     /* peer has unread data of a later step: stop peeking */
	int send_mid;  /* a frame to this peer is partly sent */
	int waits_for; /* from its STALL notice this operation, or -1 */
};

/* One gradient's place in a bucket's flat buffer. */
struct wk_piece {
	void *grad;
	size_t offset; /* bytes into the flat buffer */
	size_t bytes;
};

/*
 * A data-plane backend: TCP (built in, wk_tcp_ops, state = the
 * communicator) or NCCL (libddp-nccl.so). comm.c dispatches every call
 * through it; fence_record/fence_free may be NULL (no device work to wait
 * for).
 */
struct wk_backend_ops {
	/* 1: the backend cannot tell two ranks' calls apart, so every call
	 * is agreed on the control plane first (tcp_agree). */
	int agree_first;
	enum ddp_status (*allreduce)(void *st, const void *s, void *r,
				     size_t count, enum ddp_dtype dtype,
				     enum ddp_op op);
	enum ddp_status (*broadcast)(void *st, void *buf, size_t count,
				     enum ddp_dtype dtype, int root);
	void *(*mem_alloc)(void *st, size_t bytes);
	void (*mem_free)(void *st, void *p);
	enum ddp_status (*mem_copy)(void *st, void *dst, const void *src,
				    size_t bytes, enum ddp_copy_kind kind);
	/*
	 * fence_record (caller's thread, never blocks) marks the point in
	 * the device's work after which a bucket's gradients are final;
	 * *fence is created on first use and freed with fence_free.
	 * bucket_avg orders its work after fence (NULL: none), gathers the
	 * pieces into flat, averages flat over the ranks, scatters it back,
	 * all queued on one stream, and returns once it is queued;
	 * bucket_sync waits for every bucket queued so far.
	 */
	enum ddp_status (*fence_record)(void *st, void **fence);
	void (*fence_free)(void *st, void *fence);
	enum ddp_status (*bucket_avg)(void *st, void *fence, void *flat,
				      size_t count, enum ddp_dtype dtype,
				      const struct wk_piece *pieces, int n);
	enum ddp_status (*bucket_sync)(void *st);
	/*
	 * The stream forms: queue the collective on the caller's stream
	 * (ordered after its earlier work there) and return without waiting;
	 * stream_wait waits for that stream with the same deadline and peer
	 * checks as the blocking calls.
	 */
	enum ddp_status (*allreduce_on)(void *st, const void *s, void *r,
					size_t count, enum ddp_dtype dtype,
					enum ddp_op op, void *stream);
	enum ddp_status (*broadcast_on)(void *st, void *buf, size_t count,
					enum ddp_dtype dtype, int root,
					void *stream);
	enum ddp_status (*stream_wait)(void *st, void *stream);
	void (*destroy)(void *st);
};

struct ddp_comm {
	int rank;
	int size;
	int local_rank;
	double timeout_s;
	struct wk_peer *peers;
	uint32_t seq;
	pthread_mutex_t lock;
	int failed;
	enum ddp_status fail_status;
	char fail_msg[WK_ERR_LEN];
	enum ddp_backend backend;
	const struct wk_backend_ops *bops;
	void *bstate;
	void *bdl;
	uint8_t *scratch;
	size_t scratch_len;
	int algo;	  /* 0 auto, 1 recursive doubling, 2 ring */
	size_t ring_min;  /* bytes from which auto picks the ring */
	size_t seg_bytes; /* ring/chain segment */
	char myhost[DDP_HOST_MAX];
	int check_calls; /* agree on every data-plane call (DDP_NCCL_CHECK) */
	int in_grace;	 /* timed out; collecting STALL notices */
	double grace_end;
};

enum wk_algo {
	WK_ALGO_AUTO = 0,
	WK_ALGO_RD = 1,
	WK_ALGO_RING = 2,
	WK_ALGO_TREE = 3,
	WK_ALGO_CHAIN = 4,
	WK_ALGO_NCCL = 5, /* the call runs on the NCCL data plane */
};

/*
 * In-place allreduce of host memory on the TCP control plane, whatever the
 * data plane: for the library's own bookkeeping (layout checks), which
 * must never hand host memory to NCCL. Takes the communicator's lock.
 */
enum ddp_status wk_ctl_allreduce(struct ddp_comm *comm, void *buf, size_t count,
				 enum ddp_dtype dtype, enum ddp_op op);

/* Puts comm in the failed state with the thread's last error, tells the
 * peers (ABORT frames) and returns st. */
enum ddp_status wk_comm_fail(struct ddp_comm *comm, enum ddp_status st);

/*
 * Whole-bucket reduction for the gradient sync. wk_fence_record is called on
 * the thread that completes a bucket and does not block; wk_bucket_avg takes
 * the communicator's lock like a collective. See struct wk_backend_ops.
 */
enum ddp_status wk_fence_record(struct ddp_comm *comm, void **fence);
void wk_fence_free(struct ddp_comm *comm, void *fence);
enum ddp_status wk_bucket_avg(struct ddp_comm *comm, void *fence, void *flat,
			      size_t count, enum ddp_dtype dtype,
			      const struct wk_piece *pieces, int n);
/* Waits for every bucket wk_bucket_avg queued. */
enum ddp_status wk_bucket_sync(struct ddp_comm *comm);

/* ---- rendezvous (rdv.c) ---- */

/*
 * Fills comm->peers (fds connected, hosts known) within cfg->timeout_s:
 * rank 0 waits for MASTER_PORT while another process holds it, the others
 * connect again while what answers is not rank 0. Refusals are logged
 * (the first few, then a summary per 10 s). With cfg->auth 0, logs one
 * warning and refuses (DDP_ERR_ENV) a non-loopback MASTER_ADDR unless
 * DDP_AUTH_NONE_NETWORK=1. Not thread-safe for one comm.
 */
enum ddp_status rdv_connect_all(struct ddp_comm *comm,
				const struct ddp_config *cfg);

/* ---- TCP engine (tcp.c) ---- */

enum ddp_status tcp_allreduce(struct ddp_comm *comm, const void *s, void *r,
			      size_t count, enum ddp_dtype dtype,
			      enum ddp_op op);
enum ddp_status tcp_broadcast(struct ddp_comm *comm, void *buf, size_t count,
			      enum ddp_dtype dtype, int root);
enum ddp_status tcp_barrier(struct ddp_comm *comm);
/*
 * The control plane's agreement on one call of the data plane: every rank
 * exchanges call's header (coll, dtype, op, count, aux) like a barrier;
 * a rank whose neighbour called something else fails with
 * DDP_ERR_MISMATCH naming both calls, a rank that does not come within
 * the timeout is named. Carries no data.
 */
enum ddp_status tcp_agree(struct ddp_comm *comm, const struct wk_frame *call);
/* Non-blocking look at every connection for deaths and aborts. */
enum ddp_status tcp_check_peers(struct ddp_comm *comm);
/* Best-effort ABORT frame with msg to every peer that can take one. */
void tcp_send_abort(struct ddp_comm *comm, const char *msg);
/* Goodbye to every peer, then close (for ddp_comm_destroy). */
void tcp_close_all(struct ddp_comm *comm);
/* The TCP backend's ops (host memory; state: the communicator). */
extern const struct wk_backend_ops wk_tcp_ops;

/* ---- NCCL backend entry point (nccl.c, in libddp-nccl.so) ---- */

/*
 * Host services the NCCL object uses: the TCP control plane. comm is
 * opaque to it (only passed back to these functions).
 */
struct wk_nccl_host {
	struct ddp_comm *comm;
	const char *rank_host; /* this rank's host name, lives as comm does */
	enum ddp_status (*broadcast)(struct ddp_comm *comm, void *buf,
				     size_t bytes, int root);
	enum ddp_status (*err)(enum ddp_status st, const char *fmt, ...)
		__attribute__((format(printf, 2, 3)));
	/* Non-blocking: a peer's death or abort seen on the TCP mesh. */
	enum ddp_status (*check)(struct ddp_comm *comm);
};
/* The version suffix changes with struct wk_backend_ops, so a stale
 * libddp-nccl.so is refused instead of misread. */
#define WK_NCCL_ENTRY "ddp_nccl_backend_open_v4"
/* Step 1: can this process use a GPU? DDP_OK or DDP_ERR_NO_GPU/BACKEND. */
#define WK_NCCL_PROBE "ddp_nccl_backend_probe_v4"
typedef enum ddp_status wk_nccl_probe_fn(const struct wk_nccl_host *host,
					 int local_rank);
typedef enum ddp_status wk_nccl_open_fn(const struct wk_nccl_host *host,
					int rank, int size, int local_rank,
					double timeout_s,
					const struct wk_backend_ops **ops,
					void **state);

#endif
