/* SPDX-License-Identifier: BSD-3-Clause */
/* Deterministic rendezvous port choice inside the site's port_range,
 * public or keyed with the site's port key, plus an advisory bind probe
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
#include "trusted_path.h"

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
round_fn(const struct ddp_port_key *key, unsigned long job_id, unsigned min,
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
permute(const struct ddp_port_key *key, unsigned long job_id, unsigned min,
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
ddp_port_choose_keyed(const struct ddp_port_key *key, unsigned long job_id,
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
ddp_port_choose_check(const struct ddp_port_key *key, unsigned long job_id,
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

void
ddp_port_key_wipe(struct ddp_port_key *key)
{
	explicit_bzero(key, sizeof(*key));
}

/* Says what would work, after what was wrong with the key file. */
#define KEY_FIX                                                            \
	"; use a regular file of %d-%d random bytes, owner uid %lu, mode " \
	"0600, in a directory only uid %lu can write, identical on every " \
	"node: (umask 077; head -c 32 /dev/urandom >%.200s), copied like " \
	"munge.key; or port_key = \"\" in ddp.conf (ports anyone can compute)"

/* Opens the key file's directory, named by path up to its last '/',
 * checking every directory from "/" down (trusted_path.h); *base is then
 * the file's name in it. */
static int
open_key_dir(const char *path, uid_t owner, const char **base, char *err,
	     size_t errlen)
{
	char dir[PATH_MAX], why[1024];
	const char *slash = strrchr(path, '/');
	size_t len;
	int dfd;

	if (!slash || path[0] != '/' || !slash[1]) {
		ddp_errf(err, errlen,
			 "port_key %.200s: not an absolute path" KEY_FIX, path,
			 DDP_PORT_KEY_MIN, DDP_PORT_KEY_MAX,
			 (unsigned long)owner, (unsigned long)owner, path);
		return -1;
	}
	len = slash == path ? 1 : (size_t)(slash - path);
	if (len >= sizeof(dir)) {
		ddp_errf(err, errlen, "port_key %.200s: path too long", path);
		return -1;
	}
	memcpy(dir, path, len);
	dir[len] = '\0';
	dfd = ddp_trusted_dir_open(dir, owner, 0, why, sizeof(why));
	if (dfd < 0) {
		ddp_errf(err, errlen, "port_key %.200s: %s", path, why);
		return -1;
	}
	*base = slash + 1;
	return dfd;
}

int
ddp_port_key_load(const char *path, uid_t owner, struct ddp_port_key *key,
		  char *err, size_t errlen)
{
	unsigned char buf[DDP_PORT_KEY_MAX + 1];
	const char *base = NULL;
	struct stat st;
	size_t got = 0, i;
	ssize_t n;
	int dfd = -1, fd = -1, rc = -1;

	if (errlen)
		err[0] = '\0';
	memset(key, 0, sizeof(*key));
	if (!path) {
		ddp_errf(err, errlen, "port_key: no path given");
		goto out;
	}
	dfd = open_key_dir(path, owner, &base, err, errlen);
	if (dfd < 0)
		goto out;
	fd = openat(dfd, base,
		    O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		ddp_errf(err, errlen, "port_key %.200s: %s" KEY_FIX, path,
			 errno == ELOOP ? "is a symlink, refused"
					: strerror(errno),
			 DDP_PORT_KEY_MIN, DDP_PORT_KEY_MAX,
			 (unsigned long)owner, (unsigned long)owner, path);
		goto out;
	}
	if (fstat(fd, &st) < 0) {
		ddp_errf(err, errlen, "port_key %.200s: %s", path,
			 strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode) || st.st_uid != owner || (st.st_mode & 077)) {
		ddp_errf(err, errlen,
			 "port_key %.200s: %s owned by uid %lu with mode "
			 "%04o%s" KEY_FIX,
			 path,
			 S_ISREG(st.st_mode) ? "file" : "not a regular file,",
			 (unsigned long)st.st_uid,
			 (unsigned)(st.st_mode & DDP_MODE_BITS),
			 (st.st_mode & 077) ? ": others can read or change it"
					    : "",
			 DDP_PORT_KEY_MIN, DDP_PORT_KEY_MAX,
			 (unsigned long)owner, (unsigned long)owner, path);
		goto out;
	}
	while (got < sizeof(buf)) {
		n = read(fd, buf + got, sizeof(buf) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ddp_errf(err, errlen, "port_key %.200s: %s", path,
				 strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	if (got < DDP_PORT_KEY_MIN || got > DDP_PORT_KEY_MAX) {
		ddp_errf(err, errlen, "port_key %.200s: %s (%zu bytes)" KEY_FIX,
			 path,
			 got < DDP_PORT_KEY_MIN ? "too short" : "too long", got,
			 DDP_PORT_KEY_MIN, DDP_PORT_KEY_MAX,
			 (unsigned long)owner, (unsigned long)owner, path);
		goto out;
	}
	for (i = 0; i < got; i++)
		key->k[i % sizeof(key->k)] ^= buf[i];
	rc = 0;
out:
	explicit_bzero(buf, sizeof(buf));
	if (rc < 0)
		ddp_port_key_wipe(key);
	if (fd >= 0)
		close(fd);
	if (dfd >= 0)
		close(dfd);
	return rc;
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
