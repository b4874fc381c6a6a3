/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libddp's munge credentials (auth.c): made and checked for the
 * rendezvous, each bound to a kind ("rank0" for rank 0's proof, "hello"
 * for a rank's own), the job, the step, the rank, the world size, rank
 * 0's nonce for the connection and the rank's address on it (the payload
 * proto.h's rdv_cred_payload builds). Uses status.h and proto.h; knows
 * nothing of sockets beyond probing munged's.
 *
 * libmunge.so.2 is loaded with dlopen by the first auth_init that needs
 * it, so that programs linked with libddp start on hosts without MUNGE
 * (DDP_AUTH=none works there). Every credential auth_encode makes can be
 * decoded only by this process's effective uid (MUNGE's UID restriction):
 * munged refuses every other uid, root included.
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

struct munge_ctx; /* libmunge's context, opaque */

struct wk_auth {
	int on; /* 0: DDP_AUTH=none, credentials are the word "none" */
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
 * Sets a up for cfg (borrowed: it must outlive a) and, with cfg->auth,
 * checks that munged answers on its socket before the network is touched,
 * so that a missing munged is not mistaken for a missing rank 0. DDP_OK,
 * DDP_ERR_AUTH (libmunge.so.2 cannot be loaded, munged does not answer,
 * bad DDP_MUNGE_SOCKET) or DDP_ERR_NOMEM. Call auth_fini whatever it
 * returned.
 */
enum ddp_status auth_init(struct wk_auth *a, const struct ddp_config *cfg);

/* Frees a's munge contexts; a may be zeroed or half set up. */
void auth_fini(struct wk_auth *a);

/*
 * A credential proving this process's uid, bound to kind, rank, nonce and
 * addr (ADDR:PORT of the rank's end of the connection), into out, that
 * only the same uid can decode. Made
 * anew for every connection, so it is fresh whatever DDP_TIMEOUT is.
 * DDP_OK, or DDP_ERR_AUTH/DDP_ERR_INVALID naming munged's socket or the
 * field that did not fit.
 */
enum ddp_status auth_encode(struct wk_auth *a, const char *kind, int rank,
			    const uint8_t nonce[RDV_NONCE_LEN],
			    const char *addr, char *out, size_t outlen);

/*
 * 0 when cred proves this process's uid and carries exactly the payload
 * for kind, rank, nonce and addr; else -1 and why (the credential's
 * payload printable, for a relayed or foreign credential). munged refuses
 * a credential it decoded before (replay) or one past its time to live.
 */
int auth_verify(struct wk_auth *a, const char *cred, const char *kind, int rank,
		const uint8_t nonce[RDV_NONCE_LEN], const char *addr, char *why,
		size_t whylen);

#endif
