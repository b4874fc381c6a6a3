/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libddp's credentials for the rendezvous (auth.c): made and checked for
 * the rendezvous, each bound to a kind ("rank0" for rank 0's proof,
 * "hello" for a rank's own), the job, the step, the rank, the world size,
 * rank 0's nonce for the connection and the binding (the rank's address
 * on it and the rank's own nonce: the payload proto.h's proto_cred_payload
 * builds). Uses status.h and proto.h; knows nothing of sockets beyond
 * probing munged's.
 *
 * Three modes (enum ddp_auth; auth_resolve turns auto into one of them):
 *   - munge: libmunge.so.2 is loaded with dlopen by the first auth_init
 *     that needs it, so that programs linked with libddp start on hosts
 *     without MUNGE. Every credential auth_encode makes can be decoded
 *     only by this process's effective uid (MUNGE's UID restriction):
 *     munged refuses every other uid, root included. munged also refuses
 *     a credential it decoded before (replay) or one past its time to
 *     live.
 *   - key: "DDPK1:" and the hex of HMAC-SHA256(step key, payload), the
 *     step key read from the file DDP_STEP_KEY_FILE names (stepkey.h:
 *     derived by slurmstepd for this job, step and uid, readable by the
 *     job's uid only). It proves knowledge of the key, so only the job's
 *     user (or root) can make one. There is no replay cache: freshness
 *     comes from the payload, which holds rank 0's nonce (fresh for every
 *     connection, made by the verifying rank 0 for a hello) and the
 *     rank's nonce (fresh for every connection, made by the verifying
 *     rank for a proof), so a credential seen on one connection proves
 *     nothing on any other; and the kind keeps a proof from serving as a
 *     hello. Verification compares in constant time. The key never
 *     appears in a message and is wiped by auth_fini.
 *   - none: credentials are the word "none".
 *
 * One struct wk_auth belongs to one rendezvous and one thread at a time
 * (munge contexts are not shared); loading libmunge is thread-safe.
 * Errors: auth_init and auth_encode set the thread's last error (wk_err)
 * and return its status; auth_verify returns -1 with the reason in why,
 * for the caller to log or send.
 */
#ifndef DDP_WK_AUTH_H
#define DDP_WK_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "ddp.h"
#include "proto.h"
#include "sha256.h"
#include "stepkey.h"

struct munge_ctx; /* libmunge's context, opaque */

/* The length of a step-key credential: "DDPK1:" and 64 hex digits. */
#define AUTH_KEY_PREFIX "DDPK1:"
#define AUTH_KEY_CRED_LEN (sizeof(AUTH_KEY_PREFIX) - 1 + 2 * DDP_SHA256_LEN)

struct wk_auth {
	int mode; /* DDP_AUTH_NONE, DDP_AUTH_MUNGE or DDP_AUTH_KEY */
	unsigned char key[DDP_STEP_KEY_LEN]; /* DDP_AUTH_KEY: the step key */
	/* munge_decode leaves the decoded credential's options (or garbage
	 * from a forged one) in its context: encoding uses its own. */
	struct munge_ctx *enc;
	struct munge_ctx *dec;
	const char *job;  /* borrowed from the ddp_config given to init */
	const char *step; /* borrowed as well */
	int world;
	char socket[DDP_HOST_MAX]; /* for messages: the socket in use */
};

/*
 * The mode cfg->auth names, DDP_AUTH_AUTO resolved: DDP_AUTH_KEY when the
 * environment names a step key file (DDP_STEP_KEY_FILE set and not
 * empty), else DDP_AUTH_MUNGE. Reads the environment.
 */
int auth_resolve(int auth);

/* "none", "munge", "key" or "auto" for a value of enum ddp_auth, for
 * messages ("?" for anything else). */
const char *auth_name(int auth);

/*
 * Sets a up for cfg (borrowed: it must outlive a). With munge, checks
 * that munged answers on its socket before the network is touched, so
 * that a missing munged is not mistaken for a missing rank 0; with the
 * step key, reads the key file named by DDP_STEP_KEY_FILE, which must be
 * a regular file of 32 bytes that no one but this euid and root can read
 * (ddp_step_key_read: root's with an ACL for this uid alone, as srun
 * --ddp makes it, or this uid's own with no group or other permission).
 * DDP_OK, DDP_ERR_AUTH (libmunge.so.2 cannot be loaded, munged does not
 * answer, bad DDP_MUNGE_SOCKET; no key file, or one that cannot be read
 * or is not private: named, never shown), DDP_ERR_INVALID (cfg->auth not
 * an enum ddp_auth) or DDP_ERR_NOMEM. Call auth_fini whatever it
 * returned.
 */
enum ddp_status auth_init(struct wk_auth *a, const struct ddp_config *cfg);

/* Frees a's munge contexts and wipes its key; a may be zeroed or half set
 * up. */
void auth_fini(struct wk_auth *a);

/*
 * A credential proving this process's uid (munge) or knowledge of the
 * step's key (key), bound to kind, rank, nonce and addr (the connection's
 * binding, proto_conn_binding), into out; a munge one only the same uid can
 * decode. Made anew for every connection, so it is fresh whatever
 * DDP_TIMEOUT is. DDP_OK, or DDP_ERR_AUTH/DDP_ERR_INVALID naming munged's
 * socket or the field that did not fit.
 */
enum ddp_status auth_encode(struct wk_auth *a, const char *kind, int rank,
			    const uint8_t nonce[RDV_NONCE_LEN],
			    const char *addr, char *out, size_t outlen);

/*
 * 0 when cred proves this process's uid (munge) or the step's key (key)
 * and carries exactly the payload for kind, rank, nonce and addr; else -1
 * and why (with munge the credential's payload printable, for a relayed
 * or foreign credential; with the key the payload expected; a credential
 * of another mode named as such). See above for replays.
 */
int auth_verify(struct wk_auth *a, const char *cred, const char *kind, int rank,
		const uint8_t nonce[RDV_NONCE_LEN], const char *addr, char *why,
		size_t whylen);

#endif
