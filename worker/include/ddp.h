/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libddp: the worker runtime of slurm-ddp. An authenticated rendezvous from
 * the environment srun --ddp sets, TCP (CPU) and NCCL (GPU) collectives,
 * and bucketed gradient synchronisation that overlaps the backward pass.
 *
 * Conventions for every function below:
 *  - Status: functions return enum ddp_status; DDP_OK (0) is success. On
 *    failure a human-readable explanation is available from
 *    ddp_last_error() in the thread that made the call.
 *  - Ownership: pointer arguments are borrowed for the duration of the call
 *    unless stated otherwise; the library never frees what it did not
 *    allocate. Objects created by ddp_*_create / ddp_comm_init* are freed
 *    by the matching NULL-tolerant destroy function.
 *  - Failure is sticky: after a communication error (dead peer, timeout,
 *    mismatched collective) a communicator is broken and every further
 *    collective returns DDP_ERR_ABORTED with the original explanation.
 *    Destroy it and end the program (exit non-zero so srun ends the step),
 *    or, after a lost rank, go on without it (ddp_comm_shrink).
 *  - The library never calls exit() or abort() and never raises signals
 *    (sockets use MSG_NOSIGNAL).
 *  - Logging: silent except for refused rendezvous connections, which are
 *    logged as errors ("ddp: error: refused ...") to stderr or to the
 *    callback installed with ddp_set_log_fn(). DDP_DEBUG=1 adds debug
 *    messages.
 */
#ifndef DDP_H
#define DDP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* libddp is built with hidden visibility; these are its only exports. */
#define DDP_EXPORT __attribute__((visibility("default")))

#define DDP_VERSION_MAJOR 1
#define DDP_VERSION_MINOR 0

enum ddp_status {
	DDP_OK = 0,
	/* An argument is invalid (NULL, out of range, wrong state). */
	DDP_ERR_INVALID = 1,
	/* A required environment variable is missing or malformed. */
	DDP_ERR_ENV = 2,
	/* A system call failed (socket, thread, ...). */
	DDP_ERR_SYSTEM = 3,
	/* Out of memory. */
	DDP_ERR_NOMEM = 4,
	/* A wait ran past the communicator's timeout. */
	DDP_ERR_TIMEOUT = 5,
	/* Authentication failed (munge or the step key unavailable, credential
	 * refused). */
	DDP_ERR_AUTH = 6,
	/* A peer died, closed its connection or aborted. */
	DDP_ERR_PEER = 7,
	/* Ranks called different collectives (sequence, op, type, count). */
	DDP_ERR_MISMATCH = 8,
	/* The NCCL backend was requested but no usable GPU exists. */
	DDP_ERR_NO_GPU = 9,
	/* The backend (NCCL, CUDA) failed or could not be loaded. */
	DDP_ERR_BACKEND = 10,
	/* The communicator failed earlier; see ddp_last_error(). */
	DDP_ERR_ABORTED = 11,
	/* The rendezvous could not be completed (unreachable, refused). */
	DDP_ERR_RENDEZVOUS = 12,
	/* Not possible with this backend or layout; the message names what
	 * would work (ddp_comm_shrink). */
	DDP_ERR_UNSUPPORTED = 13,
	/* Not a failure: ddp_grad_sync_wait under DDP_ON_FAILURE=shrink lost
	 * a rank and went on with the survivors (the world is smaller). */
	DDP_SHRUNK = 14,
};

/*
 * Element types; the values equal NCCL's ncclDataType_t (worker/nccl.c
 * asserts it). DDP_UINT8 is bytes, for ddp_broadcast() of opaque data
 * (tokens, text): the reductions refuse it with DDP_ERR_INVALID.
 */
enum ddp_dtype {
	DDP_UINT8 = 1,
	DDP_FLOAT16 = 6,
	DDP_FLOAT32 = 7,
	DDP_FLOAT64 = 8,
	DDP_BFLOAT16 = 9,
};

/*
 * Reduction operations; the values equal NCCL's ncclRedOp_t (asserted in
 * worker/nccl.c). Half types
 * (FLOAT16, BFLOAT16) are accumulated in fp32 and rounded once per
 * reduction step. DDP_AVG divides the sum by the world size.
 */
enum ddp_op {
	DDP_SUM = 0,
	DDP_MAX = 2,
	DDP_MIN = 3,
	DDP_AVG = 4,
};

enum ddp_backend {
	/* NCCL when every rank has a usable GPU and NCCL loads, else TCP. */
	DDP_BACKEND_AUTO = 0,
	/* CPU buffers over TCP. */
	DDP_BACKEND_TCP = 1,
	/* CUDA device buffers through NCCL (libddp-nccl.so, loaded at run
	 * time). */
	DDP_BACKEND_NCCL = 2,
};

/* The values of ddp_config.auth (DDP_AUTH=none|munge|key|auto). Every
 * rank of a job must use the same. */
enum ddp_auth {
	/* No authentication, only for single-machine experiments: every
	 * rank warns, and a world whose MASTER_ADDR is not a loopback
	 * address is refused unless DDP_AUTH_NONE_NETWORK=1. */
	DDP_AUTH_NONE = 0,
	/* munge credentials: munged on every node. */
	DDP_AUTH_MUNGE = 1,
	/* The per-step key srun --ddp hands to the tasks in the file named
	 * by DDP_STEP_KEY_FILE (read by ddp_comm_init): no munged needed. */
	DDP_AUTH_KEY = 2,
	/* DDP_AUTH_KEY when DDP_STEP_KEY_FILE is set, else DDP_AUTH_MUNGE
	 * (the default). */
	DDP_AUTH_AUTO = 3,
};

#define DDP_HOST_MAX 256
#define DDP_ID_MAX 64

/*
 * Everything ddp_comm_init() needs. ddp_config_from_env() fills it from
 * the environment; programs and tests may also fill it by hand.
 */
struct ddp_config {
	int rank;	/* RANK, 0 <= rank < world_size */
	int world_size; /* WORLD_SIZE, >= 1 */
	int local_rank; /* LOCAL_RANK, selects the GPU; default 0 */
	char master_addr[DDP_HOST_MAX]; /* MASTER_ADDR, host name or IP */
	int master_port;		/* MASTER_PORT, 1..65535 */
	double timeout_s;		/* DDP_TIMEOUT seconds, default 300 */
	enum ddp_backend backend;	/* DDP_BACKEND=auto|tcp|nccl */
	/* SLURM_JOB_ID and SLURM_STEP_ID (or "none" outside Slurm): bound
	 * into every rank's credential. */
	char job_id[DDP_ID_MAX];
	char step_id[DDP_ID_MAX];
	/* How ranks prove they belong to the step, one of enum ddp_auth
	 * (DDP_AUTH). ddp_config_from_env() resolves DDP_AUTH_AUTO. */
	int auth;
	/* DDP_MUNGE_SOCKET: munged socket path, "" for munge's default. */
	char munge_socket[DDP_HOST_MAX];
};

/*
 * Fills cfg from the environment:
 *   RANK, WORLD_SIZE (required when WORLD_SIZE > 1), LOCAL_RANK,
 *   MASTER_ADDR, MASTER_PORT (required when WORLD_SIZE > 1),
 *   DDP_TIMEOUT (seconds, default 300), DDP_BACKEND (auto|tcp|nccl),
 *   DDP_AUTH (auto|key|munge|none, default auto), DDP_STEP_KEY_FILE (for
 *   auto), DDP_MUNGE_SOCKET, SLURM_JOB_ID, SLURM_STEP_ID.
 * Without WORLD_SIZE and RANK the configuration describes a single rank.
 * Returns DDP_OK or DDP_ERR_ENV naming the variable, its value and what is
 * accepted. Reads the environment: not safe against concurrent setenv().
 */
DDP_EXPORT enum ddp_status ddp_config_from_env(struct ddp_config *cfg);

/* Opaque communicator. */
struct ddp_comm;

/*
 * Joins the job: rank 0 listens on master_port, the other ranks connect to
 * master_addr:master_port with back-off until cfg->timeout_s elapses. Each
 * rank proves its uid, job and step with a credential (cfg->auth: munge,
 * or an HMAC under the step's key); rank 0 proves the same back first.
 * Connections from other users or jobs, or garbage, are refused and logged
 * while rank 0 keeps waiting for the real ranks. Then every pair of ranks gets
 * one persistent TCP connection, and the backend is chosen (all ranks agree).
 *
 * On success *comm receives a new communicator (free with
 * ddp_comm_destroy). Collective: every rank of the job must call it.
 * Errors: DDP_ERR_RENDEZVOUS (unreachable master, names host:port and what
 * to check), DDP_ERR_TIMEOUT (ranks missing, named), DDP_ERR_AUTH,
 * DDP_ERR_NO_GPU / DDP_ERR_BACKEND (DDP_BACKEND=nccl not usable),
 * DDP_ERR_SYSTEM, DDP_ERR_NOMEM, DDP_ERR_INVALID.
 */
DDP_EXPORT enum ddp_status ddp_comm_init(const struct ddp_config *cfg,
					 struct ddp_comm **comm);

/* ddp_config_from_env() followed by ddp_comm_init(). */
DDP_EXPORT enum ddp_status ddp_comm_init_env(struct ddp_comm **comm);

/*
 * Says goodbye to every peer and frees the communicator; NULL is ignored.
 * Peers that are still inside a collective are not disturbed: a peer that
 * ends with ddp_comm_destroy is told apart from one that dies. Call it from
 * one thread, after every other use of comm has returned.
 */
DDP_EXPORT void ddp_comm_destroy(struct ddp_comm *comm);

/*
 * Continues without lost ranks: after a collective on comm failed with
 * DDP_ERR_PEER (a rank died, or aborted because one did), every survivor
 * calls ddp_comm_shrink(comm, &out). The survivors agree on who is gone,
 * and *out receives a new communicator of the survivors; comm stays
 * failed (DDP_ERR_ABORTED) and is still freed with ddp_comm_destroy,
 * before or after out. The caller then goes on with out: gradients
 * and model state are its own to repair (a step that failed half way
 * is redone, or skipped, on out).
 *
 * Who is dropped: every rank whose connection closed or failed, seen by
 * any survivor, and any rank that has not entered ddp_comm_shrink (or
 * sent its view) within comm's timeout (DDP_TIMEOUT,
 * ddp_comm_set_timeout), so a rank that dies during the shrink is
 * dropped as well. Only a half of the world or more goes on: a rank that
 * reaches fewer fails (DDP_ERR_PEER), so that a rank the others dropped
 * (it came after their timeout) never trains on alone, and no one goes
 * on when more than half the ranks are lost at once. Survivors keep
 * their order: the new ranks are 0 to
 * M - 1 in the order of the old ones (old rank 0 stays 0 unless it was
 * lost), M = ddp_comm_size(out); ddp_comm_host(out, r) names each. With
 * the TCP backend on one node, the shrink takes a few round trips once
 * every survivor has entered it (milliseconds), bounded by comm's timeout
 * for the survivors to enter and for each exchange of views.
 *
 * In-flight collectives: the collective that failed is not completed; a
 * survivor's buffers hold undefined data (some survivors may have
 * finished a collective that others did not). out starts with no call
 * made; its first collective must be the same on every survivor. A rank
 * that has not noticed the loss yet when another one shrinks is told by
 * an ABORT and fails its collective with DDP_ERR_PEER: it then calls
 * ddp_comm_shrink too. A rank that calls it on a healthy comm makes
 * every other rank do so.
 *
 * Connections: out uses the survivors' connections of comm (no new
 * rendezvous), which therefore must connect every pair of ranks: so it
 * is when all ranks are on one node (up to 128 ranks). out runs the flat
 * algorithms (recursive doubling, the ring), never the node's
 * shared-memory allreduce (DDP_TCP_ALGO=hier is read as auto).
 *
 * Thread safety: call it from one thread, when no other call on comm
 * runs (a gradient reducer on comm must have returned from
 * ddp_grad_sync_wait; destroy it and create one on out).
 *
 * Errors (comm stays failed, *out NULL): DDP_ERR_INVALID (NULL),
 * DDP_ERR_UNSUPPORTED (the NCCL backend, whose communicator holds the
 * lost rank, or a mesh that does not connect every pair of ranks, as
 * across nodes: the message names the pair; end the step and relaunch),
 * DDP_ERR_PEER (this rank was dropped by the others, it reaches fewer
 * than half of the ranks, or a rank died between two survivors' last
 * views so that they disagree: end the program), DDP_ERR_TIMEOUT,
 * DDP_ERR_NOMEM, DDP_ERR_SYSTEM.
 */
DDP_EXPORT enum ddp_status ddp_comm_shrink(struct ddp_comm *comm,
					   struct ddp_comm **out);

/* This rank, the world size and the local rank of comm. Thread-safe. */
DDP_EXPORT int ddp_comm_rank(const struct ddp_comm *comm);
DDP_EXPORT int ddp_comm_size(const struct ddp_comm *comm);
DDP_EXPORT int ddp_comm_local_rank(const struct ddp_comm *comm);

/* The backend in use (DDP_BACKEND_TCP or DDP_BACKEND_NCCL). */
DDP_EXPORT enum ddp_backend ddp_comm_backend(const struct ddp_comm *comm);

/*
 * Sets how long each later wait of comm's control plane and host backend
 * may take before it fails naming the rank waited for (what
 * cfg->timeout_s set for the rendezvous). A caller whose rendezvous must
 * outwait the launch of all ranks can then bound its own work more
 * tightly. A device backend keeps the timeout it was created with. Not
 * while another call on comm runs. Returns DDP_ERR_INVALID unless
 * seconds > 0.
 */
DDP_EXPORT enum ddp_status ddp_comm_set_timeout(struct ddp_comm *comm,
						double seconds);

/*
 * Host name of rank r as it reported itself at the rendezvous (for
 * messages). The string belongs to comm and lives as long as it does.
 * Returns NULL for an out-of-range rank.
 */
DDP_EXPORT const char *ddp_comm_host(const struct ddp_comm *comm, int r);

/*
 * Reduces count elements of sendbuf across all ranks into recvbuf on every
 * rank. sendbuf == recvbuf is an in-place reduction; otherwise the two must
 * not overlap. Buffers are host memory with the TCP backend and CUDA device
 * memory with the NCCL backend. Every rank gets bitwise identical results.
 * A dtype that is no floating-point type (DDP_UINT8) is DDP_ERR_INVALID.
 *
 * Collective and blocking: every rank must make the same sequence of calls
 * with the same count, dtype and op. A mismatch fails at once with
 * DDP_ERR_MISMATCH and a message naming both sides. Each call is bounded
 * by the communicator's timeout (DDP_ERR_TIMEOUT naming the rank waited
 * for); a dead peer yields DDP_ERR_PEER naming its rank and host.
 *
 * Thread safety: calls on one communicator are serialised by an internal
 * lock, but the order of calls must be the same on every rank, so issue
 * them from one thread at a time (see ddp_grad_sync for the exception).
 */
DDP_EXPORT enum ddp_status ddp_allreduce(struct ddp_comm *comm,
					 const void *sendbuf, void *recvbuf,
					 size_t count, enum ddp_dtype dtype,
					 enum ddp_op op);

/*
 * Copies count elements of buf on rank root into buf on every other rank.
 * Takes every dtype, DDP_UINT8 included (count is then in bytes). Same
 * collective rules as ddp_allreduce().
 */
DDP_EXPORT enum ddp_status ddp_broadcast(struct ddp_comm *comm, void *buf,
					 size_t count, enum ddp_dtype dtype,
					 int root);

/*
 * Stream forms of ddp_allreduce() and ddp_broadcast() for CUDA programs
 * (NCCL backend): the collective is queued on the caller's CUDA stream
 * (stream is a cudaStream_t; NULL is the default stream), ordered after
 * the work queued there before it, and the call returns as soon as it is
 * queued: no device-wide synchronisation, no wait. Later work on the
 * stream sees the result; ddp_stream_wait() (or the program's own
 * cudaStreamSynchronize) waits for it. The buffers must stay valid and
 * untouched until then.
 *
 * Same collective rules as the blocking calls: the call is checked against
 * the other ranks' calls on the control plane before it is queued (a
 * mismatch or a missing rank is an error naming the rank, as for
 * ddp_allreduce; DDP_NCCL_CHECK=0 turns the check off). A failure of the
 * queued work itself (a peer dying in the middle) is reported by
 * ddp_stream_wait() or by the next call on comm.
 *
 * With the TCP backend the buffers are host memory, stream must be NULL,
 * and the call completes before it returns.
 */
DDP_EXPORT enum ddp_status ddp_allreduce_async(struct ddp_comm *comm,
					       const void *sendbuf,
					       void *recvbuf, size_t count,
					       enum ddp_dtype dtype,
					       enum ddp_op op, void *stream);
DDP_EXPORT enum ddp_status ddp_broadcast_async(struct ddp_comm *comm, void *buf,
					       size_t count,
					       enum ddp_dtype dtype, int root,
					       void *stream);

/*
 * Waits until everything queued on stream is done, bounded by the
 * communicator's timeout and watching the peers: a dead peer or a timeout
 * is an error naming the rank and host, and the communicator fails (a
 * plain cudaStreamSynchronize would wait forever for a dead peer). DDP_OK
 * at once with the TCP backend.
 */
DDP_EXPORT enum ddp_status ddp_stream_wait(struct ddp_comm *comm, void *stream);

/* Returns when every rank has entered it. Same rules as ddp_allreduce(). */
DDP_EXPORT enum ddp_status ddp_barrier(struct ddp_comm *comm);

/*
 * Explanation of the last failure in the calling thread (thread-local):
 * names the peer rank and host, the collective, and what to check. Never
 * NULL; "" when nothing failed yet. Valid until the thread's next libddp
 * call.
 */
DDP_EXPORT const char *ddp_last_error(void);

/* Short static description of a status ("peer died or aborted"). */
DDP_EXPORT const char *ddp_strerror(enum ddp_status status);

/*
 * The slurm-ddp release this libddp was built from ("1.0", the VERSION of
 * its source): what a program that loads libddp dynamically names in its
 * --version and bug reports. Static, never NULL; safe from any thread.
 */
DDP_EXPORT const char *ddp_version(void);

/* Size in bytes of one element of dtype, 0 for an unknown type. */
DDP_EXPORT size_t ddp_dtype_size(enum ddp_dtype dtype);

/*
 * Log sink for the library's few messages (level 0 error, 1 warning, 3
 * debug; msg has no prefix and no newline). NULL restores the stderr
 * default (debug only with DDP_DEBUG=1). Set it
 * before creating communicators; the callback may be called from the
 * library's threads and must be thread-safe.
 */
typedef void ddp_log_fn(int level, const char *msg, void *arg);
DDP_EXPORT void ddp_set_log_fn(ddp_log_fn *fn, void *arg);

/*
 * Resuming from a checkpoint. None of these is collective or needs a
 * communicator: call them before ddp_comm_init as well.
 */

/*
 * How many times this program's step or job was started again before
 * this run: DDP_RESTART_COUNT when set (a step restarted inside its
 * allocation), else SLURM_RESTART_COUNT (a requeued batch job), else 0.
 * A program whose count is above 0 should find its checkpoint. Returns
 * -1 with ddp_last_error() naming the variable and its value when the
 * first one set is not a whole number from 0 to INT_MAX (an empty value
 * included). Reads the environment: not safe against concurrent setenv().
 */
DDP_EXPORT int ddp_restart_count(void);

/*
 * Writes len bytes of buf to dir/name so that no reader and no crash
 * ever finds a part of it under name: the old content or the new, whole.
 * The bytes go to a new file beside name (created 0600 with O_EXCL and
 * O_NOFOLLOW), which is synced, renamed over name, and the directory
 * synced; name ends up mode 0600, and a symbolic link by that name is
 * replaced, not followed. dir NULL means the job's shared directory,
 * $DDP_SHARED_DIR (set by srun --ddp; every node of the job sees it).
 * name is one file name: not empty, no '/', not "." or "..", at most
 * 191 bytes (room for the temporary name).
 *
 * Errors: DDP_ERR_INVALID (bad name or arguments), DDP_ERR_ENV (dir NULL
 * and DDP_SHARED_DIR unset), DDP_ERR_SYSTEM (names the call and path;
 * errno is the call's). A writer killed before the rename leaves a file
 * ".NAME.tmp-..." beside name, never a torn name; a failure the writer
 * sees removes it. Thread-safe; of concurrent writers of one name the
 * last rename wins, each file whole.
 */
DDP_EXPORT enum ddp_status ddp_write_atomic(const char *dir, const char *name,
					    const void *buf, size_t len);

/*
 * Reads the whole file dir/name (dir and name as for ddp_write_atomic;
 * a symbolic link is refused) into buf, which holds cap bytes; *len
 * receives its size. A file of more than cap bytes is DDP_ERR_INVALID
 * with *len its size (allocate that much and call again); buf's content
 * is then undefined. No such file (a first run): DDP_ERR_SYSTEM with
 * errno ENOENT. Other errors as for ddp_write_atomic. Thread-safe.
 */
DDP_EXPORT enum ddp_status ddp_read_file(const char *dir, const char *name,
					 void *buf, size_t cap, size_t *len);

/*
 * Gradient synchronisation (a DDP reducer).
 *
 * Usage per training run:
 *   ddp_grad_sync_create(comm, NULL, &gs);
 *   for each parameter p (in model order): ddp_grad_sync_add(gs, ...);
 *   ddp_grad_sync_start(gs);      // broadcasts parameters from rank 0
 *   each step: forward; backward calls ddp_grad_sync_ready(gs, i) as soon
 *   as gradient i is final; ddp_grad_sync_wait(gs); optimizer step.
 *
 * Parameters are grouped into buckets in reverse registration order (the
 * order backward produces them): a small first bucket, then buckets up to
 * a cap. The layout depends only on the registered sizes and the options,
 * so it is identical on every rank (ddp_grad_sync_start checks this). When
 * a bucket's last gradient is marked ready its allreduce (DDP_AVG) starts
 * at once on a background thread, overlapping the rest of backward.
 * Buckets are reduced in bucket order on every rank.
 *
 * Thread safety: ddp_grad_sync_ready may be called from any thread (e.g.
 * several backward threads); the other functions from one thread. Between
 * the first ddp_grad_sync_ready of a step and ddp_grad_sync_wait the
 * background thread owns comm: do not call other collectives on it then.
 * Gradient buffers must not be written after being marked ready until
 * ddp_grad_sync_wait returns.
 */
struct ddp_grad_sync;

struct ddp_grad_sync_opts {
	size_t first_bucket_bytes; /* default 1 MiB */
	size_t bucket_cap_bytes;   /* default 25 MiB */
};

/*
 * Creates a reducer on comm (borrowed: comm must outlive it). opts may be
 * NULL for the defaults. *gs receives the reducer; free with
 * ddp_grad_sync_destroy. Reads DDP_ON_FAILURE (ddp_grad_sync_wait):
 * DDP_ERR_ENV for a value other than abort or shrink, and
 * DDP_ERR_UNSUPPORTED for shrink where comm could not shrink (the
 * message of ddp_comm_shrink). With shrink the reducer keeps a host copy
 * of each bucket's own gradients: twice the buckets' memory.
 */
DDP_EXPORT enum ddp_status
ddp_grad_sync_create(struct ddp_comm *comm,
		     const struct ddp_grad_sync_opts *opts,
		     struct ddp_grad_sync **gs);

/*
 * Registers one parameter buffer and its gradient buffer (both count
 * elements of dtype; host memory for TCP, device memory for NCCL). The
 * buffers are borrowed and must stay valid until ddp_grad_sync_destroy.
 * grad may be NULL: the gradient then lives inside the reducer's bucket (a
 * "gradient view", zero-filled at start; ddp_grad_sync_grad() says where)
 * and is reduced in place, with no copy into and out of the bucket.
 * Returns the parameter's index (0, 1, ...) or -1 with ddp_last_error()
 * set (after start, or on a bad argument).
 */
DDP_EXPORT int ddp_grad_sync_add(struct ddp_grad_sync *gs, void *param,
				 void *grad, size_t count,
				 enum ddp_dtype dtype);

/*
 * Builds the buckets, checks that every rank registered the same
 * parameters (DDP_ERR_MISMATCH otherwise), broadcasts every parameter from
 * rank 0, and starts the background thread. Collective.
 */
DDP_EXPORT enum ddp_status ddp_grad_sync_start(struct ddp_grad_sync *gs);

/*
 * Marks gradient index final for this step. When it completes a bucket,
 * the bucket's allreduce is queued at once. In no-sync mode this does
 * nothing. Returns DDP_ERR_INVALID for an unknown or twice-marked index,
 * or the background thread's error after a failure.
 *
 * Device gradients (NCCL) may still be being computed: the sync waits, on
 * the GPU and without blocking the caller, for all work issued before
 * this call on the default stream and on every stream that synchronises
 * with it (any stream not created with cudaStreamNonBlocking). Work on a
 * non-blocking stream must be complete before the call.
 */
DDP_EXPORT enum ddp_status ddp_grad_sync_ready(struct ddp_grad_sync *gs,
					       int index);

/*
 * Waits until every bucket of this step is reduced; then every registered
 * gradient holds the average over all ranks. Fails with DDP_ERR_INVALID at
 * once (naming the index) if a gradient was not marked ready, instead of
 * waiting forever. Returns DDP_OK immediately in no-sync mode.
 *
 * DDP_ON_FAILURE=shrink (the default is abort: a lost rank fails the
 * sync, DDP_ERR_PEER, as any collective): when the step's reduction
 * lost a rank, the survivors shrink comm in place (ddp_comm_shrink: the
 * program's comm pointer is then the survivors' world, ddp_comm_size
 * and ddp_comm_rank change), reduce the whole step again from their own
 * gradients, and this call returns DDP_SHRUNK, once: every gradient
 * then holds the average over the survivors, and the steps after go on
 * as before. A rank that dies just after a step's last bucket may leave
 * some survivors past that step and others not: they all fail with
 * DDP_ERR_PEER naming the steps (the model copies differ; restore a
 * checkpoint). Other failures (a hang, a mismatch) fail as with abort.
 *
 * Every DDP_STRAGGLER_EVERY synchronised steps (default 100, 0: never) it
 * also compares how late each rank reached the step's first bucket, on
 * the control plane, and rank 0 logs a warning for each rank late by more
 * than DDP_STRAGGLER_MS in more than half of those steps (libddp(3)):
 * every rank must see the same DDP_STRAGGLER_EVERY. ddp_grad_sync_create
 * refuses malformed values with DDP_ERR_ENV.
 */
DDP_EXPORT enum ddp_status ddp_grad_sync_wait(struct ddp_grad_sync *gs);

/*
 * No-sync mode for gradient accumulation: while on, ready/wait do not
 * communicate and gradients accumulate locally; the first step after it is
 * turned off synchronises the accumulated gradients. Must not be switched
 * in the middle of a step.
 */
DDP_EXPORT void ddp_grad_sync_set_no_sync(struct ddp_grad_sync *gs, int on);

/*
 * Where gradient index lives (after ddp_grad_sync_start): the buffer
 * given to ddp_grad_sync_add, or its place in the reducer's bucket when
 * NULL was given. Owned by the reducer in that case, valid until
 * ddp_grad_sync_destroy. NULL with ddp_last_error() set for a bad index or
 * before start.
 */
DDP_EXPORT void *ddp_grad_sync_grad(const struct ddp_grad_sync *gs, int index);

/* Number of buckets (after start) and bucket b's size in bytes. */
DDP_EXPORT int ddp_grad_sync_num_buckets(const struct ddp_grad_sync *gs);
DDP_EXPORT size_t ddp_grad_sync_bucket_bytes(const struct ddp_grad_sync *gs,
					     int b);

/*
 * Number of bucket allreduces that had started before the last
 * ddp_grad_sync_wait was called (overlap evidence for tests and tuning).
 */
DDP_EXPORT int ddp_grad_sync_overlapped(const struct ddp_grad_sync *gs);

/* Stops the background thread and frees the reducer; NULL is ignored. */
DDP_EXPORT void ddp_grad_sync_destroy(struct ddp_grad_sync *gs);

/*
 * Stopping every rank at the same step (libddp(3), STOPPING): before the
 * job's time limit, on preemption, or on a signal that reached one node.
 *
 * A rank wants to stop when it gets SIGTERM, SIGUSR1, SIGUSR2 or SIGHUP
 * (in a --ddp step, which sets DDP_STOP_BEFORE, ddp_grad_sync_create
 * installs handlers for those whose disposition is still the default;
 * a program's own handler is never replaced: it calls ddp_request_stop;
 * until the program first calls ddp_should_stop, such a signal ends the
 * process as it did without libddp),
 * when ddp_request_stop was called, or when the job's end time
 * (DDP_END_TIME, DDP_END_TIME_FILE) leaves less than room for two more
 * steps and the checkpoint (measured: the steps between
 * ddp_grad_sync_wait calls, the longest ddp_write_atomic) plus 15 s, or
 * than DDP_STOP_BEFORE seconds when it names a number. The wish rides in
 * the step's last bucket (one element more; no extra message), so every
 * rank learns the same answer from the same ddp_grad_sync_wait.
 */

/* The exit status of a rank that stopped as agreed: srun --ddp then
 * neither ends the step nor counts it as a failure. */
#define DDP_EXIT_STOPPED 75

/*
 * After ddp_grad_sync_wait returned DDP_OK or DDP_SHRUNK: 1 when the
 * ranks agreed that this step is the last one (the same on every rank,
 * and from then on), else 0. The program then finishes the step
 * (optimizer), writes its checkpoint (rank 0, ddp_write_atomic), calls
 * ddp_grad_sync_destroy (which tells srun the step stopped, at which
 * step and how long the checkpoint took) and ddp_comm_destroy, and exits
 * with DDP_EXIT_STOPPED. 0 for NULL. Thread-safe against
 * ddp_grad_sync_ready.
 */
DDP_EXPORT int ddp_should_stop(const struct ddp_grad_sync *gs);

/*
 * After ddp_should_stop returned 1: this rank's reason, one word for a
 * program's log ("time-limit", "sigterm", "sigusr1", "sigusr2",
 * "sighup", "request", or "agreed" when another rank asked and this one
 * did not). NULL before the ranks agreed and for NULL. The string is
 * static. Thread-safe like ddp_should_stop.
 */
DDP_EXPORT const char *ddp_should_stop_why(const struct ddp_grad_sync *gs);

/*
 * Asks for a stop at the next step every rank agrees on (the request is
 * served then: a gradient sync created later does not stop for it).
 * Async-signal-safe: a program's own signal handler may call it. Any
 * thread.
 */
DDP_EXPORT void ddp_request_stop(void);

/*
 * Device memory helpers for the NCCL backend (so programs need not link
 * CUDA themselves); with the TCP backend they are malloc/free/memmove.
 * ddp_mem_alloc returns NULL on failure. ddp_mem_copy waits until the copy
 * is done.
 */
enum ddp_copy_kind {
	DDP_COPY_TO_BUFFER = 0, /* host memory to a libddp buffer */
	DDP_COPY_TO_HOST = 1,	/* a libddp buffer to host memory */
	DDP_COPY_BUFFER = 2,	/* between libddp buffers */
};
DDP_EXPORT void *ddp_mem_alloc(struct ddp_comm *comm, size_t bytes);
DDP_EXPORT void ddp_mem_free(struct ddp_comm *comm, void *ptr);
DDP_EXPORT enum ddp_status ddp_mem_copy(struct ddp_comm *comm, void *dst,
					const void *src, size_t bytes,
					enum ddp_copy_kind kind);

#ifdef __cplusplus
}
#endif

#endif
