/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), small and Slurm-free:
 * the per-step key is derived with them in slurmstepd (stepkey.h) and
 * libddp proves knowledge of that key with them at the rendezvous
 * (worker/auth.c). Written here rather than taken from a crypto library
 * so that libddp and the plugin need no library beyond libc; the test
 * vectors of FIPS 180 and RFC 4231 keep it honest (test-common-sha256).
 *
 * Every function wipes the state it kept of a key or message before it
 * returns (explicit_bzero), so nothing secret stays on the stack.
 * Reentrant: the functions touch only their arguments.
 */
#ifndef DDP_SHA256_H
#define DDP_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define DDP_SHA256_LEN 32
#define DDP_SHA256_BLOCK 64

/* A running hash; set up with ddp_sha256_init. */
struct ddp_sha256 {
	uint32_t h[8];
	uint64_t bytes; /* message length so far */
	unsigned char buf[DDP_SHA256_BLOCK];
	size_t nbuf;
};

void ddp_sha256_init(struct ddp_sha256 *s);
void ddp_sha256_update(struct ddp_sha256 *s, const void *msg, size_t len);
/* Writes the digest to out and wipes s. */
void ddp_sha256_final(struct ddp_sha256 *s, unsigned char out[DDP_SHA256_LEN]);

/* SHA-256 of msg[0..len) into out. */
void ddp_sha256(const void *msg, size_t len, unsigned char out[DDP_SHA256_LEN]);

/* HMAC-SHA256 of msg[0..len) under key[0..keylen) (any length) into out. */
void ddp_hmac_sha256(const void *key, size_t keylen, const void *msg,
		     size_t len, unsigned char out[DDP_SHA256_LEN]);

/*
 * 1 when a[0..n) equals b[0..n), else 0, in a time that depends on n
 * only: comparing a MAC must not tell an attacker how many of its first
 * bytes were right.
 */
int ddp_ct_equal(const void *a, const void *b, size_t n);

#endif
