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

#define WK_ERR_LEN 1024
#define WK_TOKEN_LEN 32
#define WK_ADDR_LEN 64
/* Largest rendezvous message body: a munge credential is well below. */
#define RDV_MAX_BODY 65536
#define RDV_HDR_LEN 12
#define RDV_MAGIC 0x52504444u /* "DDPR" little endian */
#define RDV_VERSION 1
#define WK_MAX_WORLD 65536
#define WK_MAX_CRED 8192

/* ---- errors and logging (comm.c) ---- */

/* Formats msg into the calling thread's last-error buffer; returns st. */
enum ddp_status wk_err(enum ddp_status st, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* The calling thread's last-error buffer (WK_ERR_LEN bytes). */
char *wk_errbuf(void);
void wk_log(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
double wk_now(void);

/* ---- wire formats (proto.c): pure functions, fuzzed ---- */

enum rdv_type {
	RDV_HELLO = 1,	 /* rank -> rank 0: who I am + munge credential */
	RDV_WELCOME = 2, /* rank 0 -> rank: rank 0's credential */
	RDV_REFUSE = 3,	 /* rank 0 -> anyone: reason, then close */
	RDV_ROSTER = 4,	 /* rank 0 -> rank: every rank's address + token */
	RDV_PEER = 5,	 /* rank -> lower rank's data listener: rank+token */
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
int rdv_encode_hello(struct wk_buf *b, const struct rdv_hello *h);
int rdv_encode_text(struct wk_buf *b, enum rdv_type type, const char *text);
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
/* Body decoders: 0, or -1 with a reason in err. Never read past len. */
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

/* The payloads bound into munge credentials. 0 or -1 (too long). */
int rdv_cred_payload(char *buf, size_t size, const char *kind, const char *job,
		     const char *step, int rank, int world);

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

/* A loadable data-plane backend (NCCL); TCP is built in. */
struct wk_backend_ops {
	enum ddp_status (*allreduce)(void *st, const void *s, void *r,
				     size_t count, enum ddp_dtype dtype,
				     enum ddp_op op);
	enum ddp_status (*broadcast)(void *st, void *buf, size_t count,
				     enum ddp_dtype dtype, int root);
	void *(*mem_alloc)(void *st, size_t bytes);
	void (*mem_free)(void *st, void *p);
	enum ddp_status (*mem_copy)(void *st, void *dst, const void *src,
				    size_t bytes, int kind);
	/*
	 * fence_record (caller's thread, never blocks) marks the point in
	 * the device's work after which a bucket's gradients are final;
	 * *fence is created on first use and freed with fence_free.
	 * bucket_avg orders its work after fence (NULL: none), gathers the
	 * pieces into flat, averages flat over the ranks, scatters it back,
	 * all queued on one stream, and returns when that is done.
	 */
	enum ddp_status (*fence_record)(void *st, void **fence);
	void (*fence_free)(void *st, void *fence);
	enum ddp_status (*bucket_avg)(void *st, void *fence, void *flat,
				      size_t count, enum ddp_dtype dtype,
				      const struct wk_piece *pieces, int n);
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
	int in_grace; /* timed out; collecting STALL notices */
	double grace_end;
};

enum wk_algo {
	WK_ALGO_AUTO = 0,
	WK_ALGO_RD = 1,
	WK_ALGO_RING = 2,
	WK_ALGO_TREE = 3,
	WK_ALGO_CHAIN = 4,
};

/* Puts comm in the failed state with the thread's last error, tells the
 * peers (ABORT frames) and returns st. */
enum ddp_status wk_comm_fail(struct ddp_comm *comm, enum ddp_status st);

/*
 * Whole-bucket reduction for the gradient sync, when the backend has it
 * (wk_has_bucket_avg; NCCL). wk_fence_record is called on the thread that
 * completes a bucket and does not block; wk_bucket_avg takes the
 * communicator's lock like a collective. See struct wk_backend_ops.
 */
int wk_has_bucket_avg(const struct ddp_comm *comm);
enum ddp_status wk_fence_record(struct ddp_comm *comm, void **fence);
void wk_fence_free(struct ddp_comm *comm, void *fence);
enum ddp_status wk_bucket_avg(struct ddp_comm *comm, void *fence, void *flat,
			      size_t count, enum ddp_dtype dtype,
			      const struct wk_piece *pieces, int n);

/* ---- rendezvous (rdv.c) ---- */

/* Fills comm->peers (fds connected, hosts known). */
enum ddp_status rdv_connect_all(struct ddp_comm *comm,
				const struct ddp_config *cfg);

/* ---- TCP engine (tcp.c) ---- */

enum ddp_status tcp_allreduce(struct ddp_comm *comm, const void *s, void *r,
			      size_t count, enum ddp_dtype dtype,
			      enum ddp_op op);
enum ddp_status tcp_broadcast(struct ddp_comm *comm, void *buf, size_t count,
			      enum ddp_dtype dtype, int root);
enum ddp_status tcp_barrier(struct ddp_comm *comm);
/* Non-blocking look at every connection for deaths and aborts. */
enum ddp_status tcp_check_peers(struct ddp_comm *comm);
/* Best-effort ABORT frame with msg to every peer that can take one. */
void tcp_send_abort(struct ddp_comm *comm, const char *msg);
/* Goodbye to every peer, then close (for ddp_comm_destroy). */
void tcp_close_all(struct ddp_comm *comm);

/* ---- NCCL backend entry point (nccl.c, in libddp-nccl.so) ---- */

/* Host services the NCCL object uses: the TCP control plane. */
struct wk_nccl_host {
	struct ddp_comm *comm;
	enum ddp_status (*broadcast)(struct ddp_comm *comm, void *buf,
				     size_t bytes, int root);
	enum ddp_status (*err)(enum ddp_status st, const char *fmt, ...)
		__attribute__((format(printf, 2, 3)));
	/* Non-blocking: a peer's death or abort seen on the TCP mesh. */
	enum ddp_status (*check)(struct ddp_comm *comm);
};
/* The version suffix changes with struct wk_backend_ops, so a stale
 * libddp-nccl.so is refused instead of misread. */
#define WK_NCCL_ENTRY "ddp_nccl_backend_open_v2"
/* Step 1: can this process use a GPU? DDP_OK or DDP_ERR_NO_GPU/BACKEND. */
#define WK_NCCL_PROBE "ddp_nccl_backend_probe_v2"
typedef enum ddp_status wk_nccl_probe_fn(const struct wk_nccl_host *host,
					 int local_rank);
typedef enum ddp_status wk_nccl_open_fn(const struct wk_nccl_host *host,
					int rank, int size, int local_rank,
					double timeout_s,
					const struct wk_backend_ops **ops,
					void **state);

#endif
