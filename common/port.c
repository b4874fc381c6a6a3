/* SPDX-License-Identifier: BSD-3-Clause */
/* Deterministic rendezvous port choice inside the site's port_range,
 * public or keyed with the site key (sitekey.h), plus an advisory bind probe
 * for the master node. */
#include "port.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ddp_util.h"

long
ddp_port_choose(unsigned long job_id, unsigned long step_id, unsigned min,
		unsigned max)
{
	unsigned long size, stride, slot;

	if (min == 0 || max > 65535 || min > max)
		return -1;
	size = (unsigned long)max - min + 1;
	stride = size >= 2 * DDP_PORT_STRIDE ? DDP_PORT_STRIDE : 1;
	/* Reduce first: job_id * stride must not wrap around. */
	slot = ((job_id % size) * stride + step_id % size) % size;
	return (long)(min + slot);
}

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                   \
	do {                       \
		v0 += v1;          \
		v1 = ROTL(v1, 13); \
		v1 ^= v0;          \
		v0 = ROTL(v0, 32); \
		v2 += v3;          \
		v3 = ROTL(v3, 16); \
		v3 ^= v2;          \
		v0 += v3;          \
		v3 = ROTL(v3, 21); \
		v3 ^= v0;          \
		v2 += v1;          \
		v1 = ROTL(v1, 17); \
		v1 ^= v2;          \
		v2 = ROTL(v2, 32); \
	} while (0)

static uint64_t
le64(const unsigned char *p)
{
	uint64_t v = 0;
	int i;

	for (i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

uint64_t
ddp_siphash24(const unsigned char key[16], const void *msg, size_t len)
{
	const unsigned char *in = msg;
	uint64_t k0 = le64(key), k1 = le64(key + 8), m, b;
	uint64_t v0 = 0x736f6d6570736575ULL ^ k0;
	uint64_t v1 = 0x646f72616e646f6dULL ^ k1;
	uint64_t v2 = 0x6c7967656e657261ULL ^ k0;
	uint64_t v3 = 0x7465646279746573ULL ^ k1;
	size_t i, left = len & 7;

	for (i = 0; i + 8 <= len; i += 8) {
		m = le64(in + i);
		v3 ^= m;
		SIPROUND;
		SIPROUND;
		v0 ^= m;
	}
	b = (uint64_t)len << 56;
	while (left--)
		b |= (uint64_t)in[i + left] << (8 * left);
	v3 ^= b;
	SIPROUND;
	SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	b = v0 ^ v1 ^ v2 ^ v3;
	/* The rounds can be run backwards: the state gives the key. */
	explicit_bzero(&k0, sizeof(k0));
	explicit_bzero(&k1, sizeof(k1));
	explicit_bzero(&v0, sizeof(v0));
	explicit_bzero(&v1, sizeof(v1));
	explicit_bzero(&v2, sizeof(v2));
	explicit_bzero(&v3, sizeof(v3));
	return b;
}

#undef SIPROUND
#undef ROTL

#define FEISTEL_ROUNDS 8

/* One Feistel round's function: SipHash of a fixed, domain-separated
 * encoding of (job, range, round, half), little-endian. */
static uint64_t
round_fn(const struct ddp_site_key *key, unsigned long job_id, unsigned min,
	 unsigned max, unsigned round, uint64_t half)
{
	unsigned char m[8 + 8 + 2 + 2 + 1 + 4];
	uint64_t job = job_id;
	size_t i;

	memcpy(m, "ddpport2", 8);
	for (i = 0; i < 8; i++)
		m[8 + i] = (unsigned char)(job >> (8 * i));
	m[16] = (unsigned char)min;
	m[17] = (unsigned char)(min >> 8);
	m[18] = (unsigned char)max;
	m[19] = (unsigned char)(max >> 8);
	m[20] = (unsigned char)round;
	for (i = 0; i < 4; i++)
		m[21 + i] = (unsigned char)(half >> (8 * i));
	return ddp_siphash24(key->k, m, sizeof(m));
}

/* The job's permutation of [0, size), size >= 2: a balanced Feistel
 * network on 2 * h bits (2^(2h) >= size), cycle-walked into the range.
 * The walk ends: x's cycle under the bijection comes back to x < size. */
static unsigned long
permute(const struct ddp_site_key *key, unsigned long job_id, unsigned min,
	unsigned max, unsigned long size, unsigned long x)
{
	unsigned h = 1, r;
	uint64_t mask, left, right, t;

	while ((1UL << (2 * h)) < size)
		h++;
	mask = ((uint64_t)1 << h) - 1;
	do {
		left = x >> h;
		right = x & mask;
		for (r = 0; r < FEISTEL_ROUNDS; r++) {
			t = left ^
			    (round_fn(key, job_id, min, max, r, right) & mask);
			left = right;
			right = t;
		}
		x = (unsigned long)((left << h) | right);
	} while (x >= size);
	return x;
}

long
ddp_port_choose_keyed(const struct ddp_site_key *key, unsigned long job_id,
		      unsigned long step_id, unsigned min, unsigned max)
{
	unsigned long size;

	if (!key || min == 0 || max > 65535 || min > max)
		return -1;
	size = (unsigned long)max - min + 1;
	if (size == 1)
		return (long)min;
	/* A permutation of the job's own: what a user sees of their jobs'
	 * ports says nothing about another job's. */
	return (long)(min +
		      permute(key, job_id, min, max, size, step_id % size));
}

long
ddp_port_choose_check(const struct ddp_site_key *key, unsigned long job_id,
		      unsigned long step_id, unsigned min, unsigned max,
		      long master_port)
{
	unsigned long size, own, away;
	long port;

	if (min == 0 || max > 65535 || min >= max)
		return -1;
	size = (unsigned long)max - min + 1;
	own = step_id % size;
	/* Another input of the same job's mapping, so never the step's own
	 * port; half the range away, so not a nearby step's either. */
	away = (own + size / 2) % size;
	port = key ? ddp_port_choose_keyed(key, job_id, away, min, max)
		   : ddp_port_choose(job_id, away, min, max);
	if (port == master_port)
		port = key ? ddp_port_choose_keyed(key, job_id, own, min, max)
			   : ddp_port_choose(job_id, own, min, max);
	return port;
}

long
ddp_port_parse(const char *s)
{
	long v;

	if (!s || *s == '+' || *s == '-' || ddp_parse_long(s, 1, 65535, &v) < 0)
		return -1;
	return v;
}

int
ddp_port_overlaps(unsigned min, unsigned max, unsigned eph_lo, unsigned eph_hi)
{
	return min <= eph_hi && eph_lo <= max;
}

int
ddp_port_probe(unsigned port)
{
	struct sockaddr_in sa;
	int fd, one = 1, rc = -1;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((unsigned short)port);
	sa.sin_addr.s_addr = htonl(INADDR_ANY);
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
		goto out;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		rc = 1;
	else if (errno == EADDRINUSE)
		rc = 0;
out:
	close(fd);
	return rc;
}
