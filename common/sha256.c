/* SPDX-License-Identifier: BSD-3-Clause */
/* SHA-256, HMAC-SHA256 and a constant-time comparison (sha256.h). */
#include "sha256.h"

#include <string.h>

static const uint32_t K[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
	0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
	0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
	0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
	0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
	0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
	0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
	0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
	0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define ROTR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static uint32_t
be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static void
compress(uint32_t h[8], const unsigned char block[DDP_SHA256_BLOCK])
{
	uint32_t w[64], v[8], t1, t2;
	int i;

	for (i = 0; i < 16; i++)
		w[i] = be32(block + 4 * i);
	for (i = 16; i < 64; i++)
		w[i] = (ROTR(w[i - 2], 17) ^ ROTR(w[i - 2], 19) ^
			(w[i - 2] >> 10)) +
		       w[i - 7] +
		       (ROTR(w[i - 15], 7) ^ ROTR(w[i - 15], 18) ^
			(w[i - 15] >> 3)) +
		       w[i - 16];
	memcpy(v, h, sizeof(v));
	for (i = 0; i < 64; i++) {
		t1 = v[7] + (ROTR(v[4], 6) ^ ROTR(v[4], 11) ^ ROTR(v[4], 25)) +
		     ((v[4] & v[5]) ^ (~v[4] & v[6])) + K[i] + w[i];
		t2 = (ROTR(v[0], 2) ^ ROTR(v[0], 13) ^ ROTR(v[0], 22)) +
		     ((v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]));
		v[7] = v[6];
		v[6] = v[5];
		v[5] = v[4];
		v[4] = v[3] + t1;
		v[3] = v[2];
		v[2] = v[1];
		v[1] = v[0];
		v[0] = t1 + t2;
	}
	for (i = 0; i < 8; i++)
		h[i] += v[i];
	/* The schedule and working state are the key's image in HMAC. */
	explicit_bzero(w, sizeof(w));
	explicit_bzero(v, sizeof(v));
	explicit_bzero(&t1, sizeof(t1));
	explicit_bzero(&t2, sizeof(t2));
}

#undef ROTR

void
ddp_sha256_init(struct ddp_sha256 *s)
{
	static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372,
				       0xa54ff53a, 0x510e527f, 0x9b05688c,
				       0x1f83d9ab, 0x5be0cd19};

	memcpy(s->h, iv, sizeof(iv));
	s->bytes = 0;
	s->nbuf = 0;
}

void
ddp_sha256_update(struct ddp_sha256 *s, const void *msg, size_t len)
{
	const unsigned char *p = msg;
	size_t take;

	s->bytes += len;
	while (len > 0) {
		take = DDP_SHA256_BLOCK - s->nbuf;
		if (take > len)
			take = len;
		memcpy(s->buf + s->nbuf, p, take);
		s->nbuf += take;
		p += take;
		len -= take;
		if (s->nbuf == DDP_SHA256_BLOCK) {
			compress(s->h, s->buf);
			s->nbuf = 0;
		}
	}
}

void
ddp_sha256_final(struct ddp_sha256 *s, unsigned char out[DDP_SHA256_LEN])
{
	uint64_t bits = s->bytes * 8;
	int i;

	s->buf[s->nbuf++] = 0x80;
	if (s->nbuf > DDP_SHA256_BLOCK - 8) {
		memset(s->buf + s->nbuf, 0, DDP_SHA256_BLOCK - s->nbuf);
		compress(s->h, s->buf);
		s->nbuf = 0;
	}
	memset(s->buf + s->nbuf, 0, DDP_SHA256_BLOCK - 8 - s->nbuf);
	for (i = 0; i < 8; i++)
		s->buf[DDP_SHA256_BLOCK - 1 - i] =
			(unsigned char)(bits >> (8 * i));
	compress(s->h, s->buf);
	for (i = 0; i < 8; i++) {
		out[4 * i] = (unsigned char)(s->h[i] >> 24);
		out[4 * i + 1] = (unsigned char)(s->h[i] >> 16);
		out[4 * i + 2] = (unsigned char)(s->h[i] >> 8);
		out[4 * i + 3] = (unsigned char)s->h[i];
	}
	explicit_bzero(s, sizeof(*s));
}

void
ddp_sha256(const void *msg, size_t len, unsigned char out[DDP_SHA256_LEN])
{
	struct ddp_sha256 s;

	ddp_sha256_init(&s);
	ddp_sha256_update(&s, msg, len);
	ddp_sha256_final(&s, out);
}

void
ddp_hmac_sha256(const void *key, size_t keylen, const void *msg, size_t len,
		unsigned char out[DDP_SHA256_LEN])
{
	unsigned char k[DDP_SHA256_BLOCK], pad[DDP_SHA256_BLOCK];
	unsigned char inner[DDP_SHA256_LEN];
	struct ddp_sha256 s;
	size_t i;

	memset(k, 0, sizeof(k));
	if (keylen > DDP_SHA256_BLOCK)
		ddp_sha256(key, keylen, k);
	else if (keylen > 0)
		memcpy(k, key, keylen);
	for (i = 0; i < sizeof(pad); i++)
		pad[i] = k[i] ^ 0x36;
	ddp_sha256_init(&s);
	ddp_sha256_update(&s, pad, sizeof(pad));
	ddp_sha256_update(&s, msg, len);
	ddp_sha256_final(&s, inner);
	for (i = 0; i < sizeof(pad); i++)
		pad[i] = k[i] ^ 0x5c;
	ddp_sha256_init(&s);
	ddp_sha256_update(&s, pad, sizeof(pad));
	ddp_sha256_update(&s, inner, sizeof(inner));
	ddp_sha256_final(&s, out);
	explicit_bzero(k, sizeof(k));
	explicit_bzero(pad, sizeof(pad));
	explicit_bzero(inner, sizeof(inner));
}

int
ddp_ct_equal(const void *a, const void *b, size_t n)
{
	const volatile unsigned char *x = a, *y = b;
	unsigned char diff = 0;
	size_t i;

	for (i = 0; i < n; i++)
		diff |= (unsigned char)(x[i] ^ y[i]);
	return diff == 0;
}
