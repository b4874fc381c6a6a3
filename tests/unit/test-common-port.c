/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of the MASTER_PORT choice: range and determinism; for the
 * public scheme no collision between concurrent steps and nearby jobs,
 * for the keyed one none between a job's steps and nothing a user learns
 * from their own jobs' ports; ddp-check's port, never MASTER_PORT;
 * SipHash's test vectors; the key file and every directory above it. */
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "port.h"
#include "tap.h"

static const struct ddp_site_key key_a = {{0x6b, 0x1f, 0x93, 0x02, 0xc4, 0x55,
					   0xe0, 0x7a, 0x19, 0x88, 0x3d, 0xb2,
					   0x40, 0xfe, 0x21, 0x9c}};
static const struct ddp_site_key key_b = {
	{0x6b, 0x1f, 0x93, 0x02, 0xc4, 0x55, 0xe0, 0x7a, 0x19, 0x88, 0x3d, 0xb2,
	 0x40, 0xfe, 0x21, 0x9d}}; /* one bit off key_a */

static void
test_siphash(void)
{
	unsigned char k[16], m[64];
	unsigned i;

	for (i = 0; i < sizeof(k); i++)
		k[i] = (unsigned char)i;
	for (i = 0; i < sizeof(m); i++)
		m[i] = (unsigned char)i;
	/* Vectors of the SipHash paper (appendix A) and its reference
	 * implementation's table (vectors.h, entries 0, 8 and 63). */
	tap_ok(ddp_siphash24(k, m, 15) == 0xa129ca6149be45e5ULL,
	       "SipHash-2-4 paper vector (15 bytes)");
	tap_ok(ddp_siphash24(k, m, 0) == 0x726fdb47dd0e0e31ULL,
	       "SipHash-2-4 vector, empty message");
	tap_ok(ddp_siphash24(k, m, 8) == 0x93f5f5799a932462ULL,
	       "SipHash-2-4 vector, 8 bytes");
	tap_ok(ddp_siphash24(k, m, 63) == 0x958a324ceb064572ULL,
	       "SipHash-2-4 vector, 63 bytes");
}

/*
 * A user sees the ports of their own jobs' steps (MASTER_PORT) and wants
 * another user's. With job ids cut into blocks of 37 that shared one
 * permutation, one job's 600 steps gave the whole block's mapping; and a
 * user who owned 36 jobs of a block knew that the 37th used none of their
 * ports. Neither may help now.
 */
static void
test_own_ports_tell_nothing(void)
{
	static long own[600];
	static unsigned char seen[65536];
	const unsigned long mine = 1000, first = 999; /* 999-1035: a block */
	unsigned long job, step, hits = 0, tries = 0, inside = 0;
	long slot;

	/* Attack 1: all of job 1000's steps, mapped as the block's slots. */
	for (step = 0; step < 600; step++)
		own[step] =
			ddp_port_choose_keyed(&key_a, mine, step, 29400, 29999);
	for (job = first; job < first + 37; job++) {
		if (job == mine)
			continue;
		for (step = 0; step < DDP_PORT_STRIDE; step++) {
			slot = ((long)(job - mine) * DDP_PORT_STRIDE +
				(long)step) %
			       600;
			if (slot < 0)
				slot += 600;
			hits += ddp_port_choose_keyed(&key_a, job, step, 29400,
						      29999) == own[slot];
			tries++;
		}
	}
	/* Chance: 1 in 600 each, about 1 of 576. */
	tap_ok(hits <= 8,
	       "keyed: a job's 600 steps do not predict the other jobs of "
	       "its id block (%lu of %lu right, 1 expected by chance)",
	       hits, tries);
	/* Attack 2: a user who owns 36 of 37 neighbouring jobs and saw 16
	 * steps of each excludes nothing: the 37th job's ports fall among
	 * theirs as often as chance says (about 370 of 600 ports seen). */
	memset(seen, 0, sizeof(seen));
	for (job = first; job < first + 36; job++)
		for (step = 0; step < DDP_PORT_STRIDE; step++)
			seen[ddp_port_choose_keyed(&key_a, job, step, 29400,
						   29999)] = 1;
	for (step = 0; step < DDP_PORT_STRIDE; step++)
		inside += seen[ddp_port_choose_keyed(&key_a, first + 36, step,
						     29400, 29999)];
	tap_ok(inside >= 4,
	       "keyed: another job's ports are not kept off the ports of "
	       "its neighbours (%lu of 16 among them, about 10 expected)",
	       inside);
}

static void
test_keyed(void)
{
	static unsigned char used[65536];
	unsigned long job, step, same = 0, same_public = 0, n = 0, hit = 0;
	unsigned long sizes[] = {2, 3, 17, 31, 32, 33, 600, 1000, 64512};
	unsigned i;
	int ok = 1, collide = 0;
	long p, q;

	tap_ok(ddp_port_choose_keyed(&key_a, 1234, 0, 29400, 29999) ==
		       ddp_port_choose_keyed(&key_a, 1234, 0, 29400, 29999),
	       "keyed: same inputs, same port");
	for (job = 0; job < 20000 && ok; job += 13)
		for (step = 0; step < 40; step++) {
			p = ddp_port_choose_keyed(&key_a, job, step, 29400,
						  29999);
			if (p < 29400 || p > 29999)
				ok = 0;
		}
	tap_ok(ok, "keyed: always inside the range");
	p = ddp_port_choose_keyed(&key_a, 0xffffffffUL, 0xfffffffbUL, 29400,
				  29999);
	tap_ok(p >= 29400 && p <= 29999, "keyed: huge ids do not overflow");
	/* Every job's own permutation: its steps 0..599 fill the range. */
	for (job = 999; job < 1036 && !collide; job++) {
		memset(used, 0, sizeof(used));
		for (step = 0; step < 600; step++) {
			p = ddp_port_choose_keyed(&key_a, job, step, 29400,
						  29999);
			if (used[p])
				collide = 1;
			used[p] = 1;
		}
	}
	tap_ok(!collide, "keyed: steps of one job whose ids differ by less "
			 "than the range's size get distinct ports");
	/* The permutation: steps 0..size-1 of job 0 fill the range. */
	ok = 1;
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		unsigned min = 1024, max = (unsigned)(min + sizes[i] - 1);

		memset(used, 0, sizeof(used));
		for (step = 0; step < sizes[i]; step++) {
			p = ddp_port_choose_keyed(&key_a, 0, step, min, max);
			if (p < min || p > max || used[p])
				ok = 0;
			else
				used[p] = 1;
		}
		if (!ok)
			tap_diag("not a permutation for size %lu", sizes[i]);
	}
	tap_ok(ok, "keyed: a permutation of the range for sizes 2 to 64512");
	for (job = 5000; job < 7000; job++) {
		p = ddp_port_choose_keyed(&key_a, job, job % 3, 29400, 29999);
		q = ddp_port_choose_keyed(&key_b, job, job % 3, 29400, 29999);
		same += p == q;
		same_public += p == ddp_port_choose(job, job % 3, 29400, 29999);
		n++;
	}
	/* Independent uniform choices agree 1 time in 600: about 3 of 2000. */
	if (!tap_ok(same < 20,
		    "keyed: a key one bit off gives other ports "
		    "(%lu of %lu equal)",
		    same, n))
		tap_diag("%lu equal", same);
	tap_ok(same_public < 20,
	       "keyed: the public formula does not give the port "
	       "(%lu of %lu equal)",
	       same_public, n);
	/* Jobs with nearby ids are independent: job and job + 1 share step
	 * 0's port about 1 time in 600, 10 times in 6000. */
	for (job = 20000; job < 26000; job++)
		hit += ddp_port_choose_keyed(&key_a, job, 0, 29400, 29999) ==
		       ddp_port_choose_keyed(&key_a, job + 1, 0, 29400, 29999);
	tap_ok(hit >= 2 && hit <= 25,
	       "keyed: neighbouring jobs share a port by chance only, about "
	       "1 in 600 (%lu of 6000, 10 expected)",
	       hit);
	test_own_ports_tell_nothing();
	/* Roughly uniform: 60000 jobs' step 0 over 600 ports, 100 expected
	 * each; a fixed key, so the counts are deterministic. */
	{
		static unsigned count[600];
		unsigned lo = ~0u, hi = 0;

		memset(count, 0, sizeof(count));
		for (job = 100000; job < 160000; job++)
			count[ddp_port_choose_keyed(&key_a, job, 0, 29400,
						    29999) -
			      29400]++;
		for (i = 0; i < 600; i++) {
			lo = count[i] < lo ? count[i] : lo;
			hi = count[i] > hi ? count[i] : hi;
		}
		tap_ok(lo >= 50 && hi <= 160,
		       "keyed: ports spread over the range (per port %u-%u, "
		       "100 expected)",
		       lo, hi);
	}
	tap_ok(ddp_port_choose_keyed(&key_a, 5, 0, 29400, 29400) == 29400,
	       "keyed: one-port range works");
	tap_ok(ddp_port_choose_keyed(&key_a, 5, 1, 100, 110) !=
		       ddp_port_choose_keyed(&key_a, 5, 0, 100, 110),
	       "keyed: small range still separates steps");
	tap_ok(ddp_port_choose_keyed(&key_a, 1, 0, 0, 10) < 0 &&
		       ddp_port_choose_keyed(&key_a, 1, 0, 10, 9) < 0 &&
		       ddp_port_choose_keyed(&key_a, 1, 0, 65000, 65536) < 0 &&
		       ddp_port_choose_keyed(NULL, 1, 0, 100, 200) < 0,
	       "keyed: bad ranges and no key refused");
}

/* The keyed or the public scheme's MASTER_PORT, as the plugin picks it. */
static long
master(const struct ddp_site_key *key, unsigned long job, unsigned long step,
       unsigned min, unsigned max)
{
	return key ? ddp_port_choose_keyed(key, job, step, min, max)
		   : ddp_port_choose(job, step, min, max);
}

/*
 * ddp-check's port (--ddp-check): a user on the node sees it listening
 * while the check runs, so it must never be the port the program's
 * rendezvous takes next, nor tell them which one that is.
 */
static void
test_check_port(void)
{
	static const unsigned long sizes[] = {2, 3, 17, 600, 1000, 64512};
	static unsigned diff[600], count[600];
	const struct ddp_site_key *keys[] = {&key_a, NULL};
	unsigned long job, step, other, n = 0, bad = 0, near = 0;
	unsigned lo = ~0u, hi = 0, top = 0, i, k;
	long c, m, u;

	for (k = 0; k < 2; k++) {
		for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			unsigned min = 1024,
				 max = (unsigned)(min + sizes[i] - 1);

			for (job = 0; job < 400000; job += 97) {
				step = (job * 7) % 5000;
				m = master(keys[k], job, step, min, max);
				c = ddp_port_choose_check(keys[k], job, step,
							  min, max, m);
				/* A MASTER_PORT of the user's own that is
				 * the check's first choice. */
				u = ddp_port_choose_check(keys[k], job, step,
							  min, max, c);
				bad += c == m || c < min || c > max || u == c ||
				       u < min || u > max;
				n++;
			}
		}
	}
	tap_ok(n > 20000 && bad == 0,
	       "check port: never MASTER_PORT, nor a MASTER_PORT the user "
	       "chose, and inside the range (%lu of %lu jobs wrong, keyed "
	       "and public, ranges of 2 to 64512 ports)",
	       bad, n);
	/* Nor the port of a step nearby, which may run at the same time. */
	for (job = 700; job < 720; job++)
		for (step = 0; step < 300; step++) {
			c = ddp_port_choose_check(&key_a, job, step, 29400,
						  29999, -1);
			for (other = step > 290 ? step - 290 : 0;
			     other < step + 290; other++)
				near += c == ddp_port_choose_keyed(&key_a, job,
								   other, 29400,
								   29999);
		}
	tap_ok(near == 0,
	       "check port: none of the job's steps less than half the "
	       "range away has it as MASTER_PORT (%lu found)",
	       near);
	/* What a user sees while the check runs: the check port, spread
	 * over the range like MASTER_PORT, and no fixed distance to
	 * MASTER_PORT that would let them take it next. 60000 jobs, 100
	 * expected per port and per distance; a fixed key, so the counts
	 * are deterministic. */
	for (job = 100000; job < 160000; job++) {
		m = ddp_port_choose_keyed(&key_a, job, 0, 29400, 29999);
		c = ddp_port_choose_check(&key_a, job, 0, 29400, 29999, m);
		count[c - 29400]++;
		diff[(unsigned long)(m - c + 600) % 600]++;
	}
	for (i = 0; i < 600; i++) {
		lo = count[i] < lo ? count[i] : lo;
		hi = count[i] > hi ? count[i] : hi;
		top = diff[i] > top ? diff[i] : top;
	}
	tap_ok(lo >= 50 && hi <= 160,
	       "check port: spread over the range (per port %u-%u, 100 "
	       "expected)",
	       lo, hi);
	tap_ok(top <= 160,
	       "check port: the best guess of MASTER_PORT from it is right "
	       "%u times in 60000 (chance: about 100)",
	       top);
	tap_ok(ddp_port_choose_check(&key_a, 9, 2, 29400, 29999, -1) ==
		       ddp_port_choose_check(&key_a, 9, 2, 29400, 29999, -1),
	       "check port: same inputs, same port");
	tap_ok(ddp_port_choose_check(&key_a, 5, 0, 29400, 29400, -1) < 0 &&
		       ddp_port_choose_check(NULL, 5, 0, 29400, 29400, -1) <
			       0 &&
		       ddp_port_choose_check(&key_a, 1, 0, 0, 10, -1) < 0 &&
		       ddp_port_choose_check(NULL, 1, 0, 65000, 65536, -1) < 0,
	       "check port: a one-port range (no port left for the check) "
	       "and bad ranges refused");
}

/* Writes len bytes (a pattern from seed) to dir/name with mode. */
static int
write_key(const char *dir, const char *name, size_t len, unsigned seed,
	  mode_t mode, char *path, size_t pathlen)
{
	unsigned char buf[8192];
	size_t i;
	int fd, rc = -1;

	snprintf(path, pathlen, "%s/%s", dir, name);
	uint32_t x = seed * 2654435761u + 1;

	/* The first 16 bytes are those a 16-byte key test expects; the
	 * rest from a xorshift, so that no length folds to a repeat. */
	for (i = 0; i < len && i < sizeof(buf); i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		buf[i] = i < 16 ? (unsigned char)(seed * 131 + i * 7 + (i >> 3))
				: (unsigned char)(x >> 24);
	}
	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	if (write(fd, buf, len) == (ssize_t)len && fchmod(fd, mode) == 0)
		rc = 0;
	close(fd);
	return rc;
}

/* Checks that loading path as owner fails with err naming path and
 * mentioning want. */
static void
key_refused(const char *path, uid_t owner, const char *want, const char *what)
{
	struct ddp_site_key k;
	char err[1024];
	int rc;

	memset(&k, 0xaa, sizeof(k));
	rc = ddp_site_key_load(path, owner, &k, err, sizeof(err));
	if (!tap_ok(rc < 0 && strstr(err, path) && strstr(err, want) &&
			    strstr(err, "head -c 32 /dev/urandom") &&
			    tap_all_zero(k.k, sizeof(k.k)),
		    "key file refused: %s", what))
		tap_diag("rc %d err '%s'", rc, err);
}

static void
test_key_file(void)
{
	char tmpl[] = "/tmp/test-port-XXXXXX", path[PATH_MAX], link[PATH_MAX];
	char sub[PATH_MAX], err[1024];
	struct ddp_site_key k1, k2, k3;
	uid_t me = geteuid();
	const char *dir = mkdtemp(tmpl);
	unsigned i;
	int eq;

	if (!dir) {
		tap_ok(0, "mkdtemp");
		return;
	}
	write_key(dir, "good", 32, 1, 0600, path, sizeof(path));
	tap_ok(ddp_site_key_load(path, me, &k1, err, sizeof(err)) == 0,
	       "a 32-byte key file of mode 0600 loads");
	tap_ok(ddp_site_key_load(path, me, &k2, err, sizeof(err)) == 0 &&
		       !memcmp(&k1, &k2, sizeof(k1)) &&
		       ddp_port_choose_keyed(&k1, 77, 3, 29400, 29999) ==
			       ddp_port_choose_keyed(&k2, 77, 3, 29400, 29999),
	       "the same file gives the same key and the same port");
	write_key(dir, "other", 32, 2, 0400, path, sizeof(path));
	tap_ok(ddp_site_key_load(path, me, &k3, err, sizeof(err)) == 0 &&
		       memcmp(&k1, &k3, sizeof(k1)) != 0,
	       "another file (mode 0400) gives another key");
	for (i = 0, eq = 0; i < 100; i++)
		eq += ddp_port_choose_keyed(&k1, 900 + i, 0, 29400, 29999) ==
		      ddp_port_choose_keyed(&k3, 900 + i, 0, 29400, 29999);
	tap_ok(eq < 5, "another key, other ports (%d of 100 equal)", eq);
	write_key(dir, "sixteen", 16, 3, 0600, path, sizeof(path));
	tap_ok(ddp_site_key_load(path, me, &k1, err, sizeof(err)) == 0,
	       "a 16-byte key loads");
	{
		unsigned char want[16];

		for (i = 0; i < 16; i++)
			want[i] = (unsigned char)(3 * 131 + i * 7 + (i >> 3));
		tap_ok(!memcmp(k1.k, want, 16), "a 16-byte key is used as is");
	}
	write_key(dir, "max", DDP_SITE_KEY_MAX, 4, 0600, path, sizeof(path));
	tap_ok(ddp_site_key_load(path, me, &k1, err, sizeof(err)) == 0,
	       "a 4096-byte key loads");
	/* The wipe of a key with no zero byte (this 4096-byte one folds to
	 * zeros). */
	memset(k1.k, 0xa5, sizeof(k1.k));
	ddp_site_key_wipe(&k1);
	tap_ok(tap_all_zero(k1.k, sizeof(k1.k)),
	       "wipe zeroes the key, every byte");

	/* Keys made by hand: a repeated pattern, or the same 16 bytes
	 * twice (they fold to zeros). */
	{
		unsigned char twice[32];
		int fd;

		for (i = 0; i < 32; i++)
			twice[i] = i % 2 ? '\n' : 'y';
		snprintf(path, sizeof(path), "%s/yes", dir);
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		tap_ok(fd >= 0 && write(fd, twice, 32) == 32 && close(fd) == 0,
		       "wrote a key of yes(1)'s output");
		key_refused(path, me, "not random", "a key of yes(1)'s output");
		write_key(dir, "half", 16, 9, 0600, path, sizeof(path));
		fd = open(path, O_RDONLY | O_CLOEXEC);
		tap_ok(fd >= 0 && read(fd, twice, 16) == 16 && close(fd) == 0,
		       "read a 16-byte key");
		memcpy(twice + 16, twice, 16);
		fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
		tap_ok(fd >= 0 && write(fd, twice, 32) == 32 && close(fd) == 0,
		       "wrote the same 16 bytes twice");
		key_refused(path, me, "not random",
			    "the same 16 bytes twice, which fold to zeros");
	}

	write_key(dir, "short", 15, 5, 0600, path, sizeof(path));
	key_refused(path, me, "too short (15 bytes)", "15 bytes");
	write_key(dir, "long", DDP_SITE_KEY_MAX + 1, 6, 0600, path,
		  sizeof(path));
	key_refused(path, me, "too long", "4097 bytes");
	write_key(dir, "readable", 32, 7, 0644, path, sizeof(path));
	key_refused(path, me, "mode 0644: others can read", "mode 0644");
	write_key(dir, "group", 32, 8, 0640, path, sizeof(path));
	key_refused(path, me, "mode 0640", "mode 0640");
	write_key(dir, "owner", 32, 9, 0600, path, sizeof(path));
	/* Only root can give a file away; root's key file is what the
	 * plugin loads, so the check is for another owner than root. */
	if (me == 0 && chown(path, 65534, 65534) == 0)
		key_refused(path, 0, "owned by uid 65534",
			    "a file of mode 0600 owned by another user");
	else
		tap_ok(1,
		       "# skip not root: cannot give a file to another user");
	snprintf(path, sizeof(path), "%s/absent", dir);
	key_refused(path, me, "No such file", "missing");
	write_key(dir, "good", 32, 1, 0600, path, sizeof(path));
	snprintf(link, sizeof(link), "%s/link", dir);
	tap_ok(symlink(path, link) == 0, "symlink made");
	key_refused(link, me, "symlink", "a symlink to a good key");
	snprintf(sub, sizeof(sub), "%s/sub", dir);
	mkdir(sub, 0700);
	key_refused(sub, me, "not a regular file", "a directory");
	/* The directory: others could swap the key in a writable one. */
	write_key(sub, "key", 32, 10, 0600, path, sizeof(path));
	tap_ok(ddp_site_key_load(path, me, &k1, err, sizeof(err)) == 0,
	       "a key in a 0700 directory loads");
	chmod(sub, 0770);
	if (!tap_ok(ddp_site_key_load(path, me, &k1, err, sizeof(err)) < 0 &&
			    strstr(err, "mode 0770") && strstr(err, sub) &&
			    strstr(err, "chmod go-w"),
		    "a key in a group-writable directory refused"))
		tap_diag("err '%s'", err);
	tap_ok(ddp_site_key_load("relative/key", me, &k1, err, sizeof(err)) <
			       0 &&
		       strstr(err, "not an absolute path"),
	       "a relative key path refused");
	unlink(path);
	rmdir(sub);
	{
		static const char *const names[] = {
			"good", "other",    "sixteen", "max",	"short",
			"long", "readable", "group",   "owner", "link"};

		for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
			snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
			unlink(path);
		}
	}
	rmdir(dir);
}

/* Loads path as root and expects a refusal whose message holds every one
 * of want (NULL-terminated). */
static void
path_refused(const char *path, const char *const *want, const char *what)
{
	struct ddp_site_key k;
	char err[1024];
	int rc, ok;

	memset(&k, 0xaa, sizeof(k));
	rc = ddp_site_key_load(path, 0, &k, err, sizeof(err));
	ok = rc < 0 && tap_all_zero(k.k, sizeof(k.k));
	for (; ok && *want; want++)
		ok = strstr(err, *want) != NULL;
	if (!tap_ok(ok, "key path refused: %s", what))
		tap_diag("rc %d err '%s'", rc, err);
}

/* Every directory from "/" to the key is checked, not only the last:
 * whoever may rename an entry of a directory above can swap the key's. */
static void
test_key_path(void)
{
	char tmpl[] = "/tmp/test-port-path-XXXXXX", gp[PATH_MAX];
	char parent[PATH_MAX], key[PATH_MAX], link[PATH_MAX], via[PATH_MAX];
	char err[1024];
	struct ddp_site_key k;
	const char *dir;

	if (geteuid() != 0) {
		tap_ok(1, "# skip not root: directories of other owners");
		return;
	}
	dir = mkdtemp(tmpl);
	if (!dir || snprintf(gp, sizeof(gp), "%s/gp", dir) < 0 ||
	    mkdir(gp, 0755) < 0 ||
	    snprintf(parent, sizeof(parent), "%s/parent", gp) < 0 ||
	    mkdir(parent, 0755) < 0 ||
	    write_key(parent, "key", 32, 11, 0600, key, sizeof(key)) < 0) {
		tap_ok(0, "setup: %s/gp/parent/key", dir ? dir : "mkdtemp");
		return;
	}
	tap_ok(ddp_site_key_load(key, 0, &k, err, sizeof(err)) == 0,
	       "a key two root directories below /tmp loads (/tmp is "
	       "root's and sticky)");
	chmod(gp, 0757);
	path_refused(key,
		     (const char *const[]){gp, "mode 0757", "chmod go-w", NULL},
		     "a world-writable grandparent, named");
	chmod(gp, 0775);
	path_refused(key, (const char *const[]){gp, "mode 0775", NULL},
		     "a group-writable grandparent, named");
	chmod(gp, 0755);
	if (chown(gp, 1, 1) == 0)
		path_refused(key,
			     (const char *const[]){gp, "owned by uid 1",
						   "chown 0", NULL},
			     "a grandparent owned by another user, named");
	else
		tap_ok(0, "setup: chown %s", gp);
	tap_ok(chown(gp, 0, 0) == 0 && chmod(gp, 01755) == 0 &&
		       chown(gp, 1, 1) == 0,
	       "setup: a sticky grandparent of uid 1");
	path_refused(key, (const char *const[]){gp, "owned by uid 1", NULL},
		     "a sticky grandparent owned by another user");
	tap_ok(chown(gp, 0, 0) == 0 && chmod(gp, 0755) == 0,
	       "setup: the grandparent back to root, 0755");
	/* Symbolic links on the way: root's are followed, others' are not
	 * (their owner could point them anywhere). */
	snprintf(link, sizeof(link), "%s/link", dir);
	snprintf(via, sizeof(via), "%s/link/parent/key", dir);
	tap_ok(symlink("gp", link) == 0 &&
		       ddp_site_key_load(via, 0, &k, err, sizeof(err)) == 0,
	       "a root-owned symlink on the way is followed: %s", err);
	if (lchown(link, 1, 1) == 0)
		path_refused(via,
			     (const char *const[]){link, "symbolic link",
						   "uid 1", NULL},
			     "a symlink on the way owned by another user");
	else
		tap_ok(0, "setup: lchown %s", link);
	unlink(link);
	snprintf(via, sizeof(via), "%s/gp/../gp/./parent/key", dir);
	tap_ok(ddp_site_key_load(via, 0, &k, err, sizeof(err)) == 0,
	       "'.' and '..' on the way resolve: %s", err);
	snprintf(via, sizeof(via), "%s/absent/parent/key", dir);
	path_refused(via,
		     (const char *const[]){"absent/parent/key", "absent", NULL},
		     "a missing directory on the way");
	unlink(key);
	rmdir(parent);
	rmdir(gp);
	rmdir(dir);
}

int
main(void)
{
	static unsigned char used[65536];
	unsigned long job, step;
	int ok = 1, collide = 0;
	long p;

	tap_ok(ddp_port_choose(1234, 0, 29400, 29999) ==
		       ddp_port_choose(1234, 0, 29400, 29999),
	       "deterministic");
	for (job = 0; job < 5000 && ok; job += 7)
		for (step = 0; step < 40; step++) {
			p = ddp_port_choose(job, step, 29400, 29999);
			if (p < 29400 || p > 29999)
				ok = 0;
		}
	tap_ok(ok, "always inside the range");
	p = ddp_port_choose(0xffffffffUL, 0xfffffffbUL, 29400, 29999);
	tap_ok(p >= 29400 && p <= 29999, "huge ids do not overflow");
	/* 37 consecutive jobs with 16 concurrent steps each: all distinct. */
	memset(used, 0, sizeof(used));
	for (job = 1000; job < 1037; job++)
		for (step = 0; step < DDP_PORT_STRIDE; step++) {
			p = ddp_port_choose(job, step, 29400, 29999);
			if (used[p])
				collide = 1;
			used[p] = 1;
		}
	tap_ok(!collide, "nearby jobs and concurrent steps get distinct ports");
	tap_ok(ddp_port_choose(5, 0, 29400, 29400) == 29400,
	       "one-port range works");
	tap_ok(ddp_port_choose(5, 1, 100, 110) !=
		       ddp_port_choose(5, 0, 100, 110),
	       "small range still separates steps");
	tap_ok(ddp_port_choose(1, 0, 0, 10) < 0, "port 0 refused");
	tap_ok(ddp_port_choose(1, 0, 10, 9) < 0, "empty range refused");
	tap_ok(ddp_port_choose(1, 0, 65000, 65536) < 0, "beyond 65535 refused");
	tap_ok(ddp_port_parse("29500") == 29500, "port parses");
	tap_ok(ddp_port_parse("99999") < 0, "99999 refused");
	tap_ok(ddp_port_parse("0") < 0, "0 refused");
	tap_ok(ddp_port_parse("+80") < 0 && ddp_port_parse("-1") < 0,
	       "signs refused");
	tap_ok(ddp_port_parse("80x") < 0 && ddp_port_parse("") < 0 &&
		       ddp_port_parse(NULL) < 0,
	       "garbage refused");
	tap_ok(ddp_port_overlaps(29400, 29999, 32768, 60999) == 0,
	       "default range is outside Linux's ephemeral range");
	tap_ok(ddp_port_overlaps(40000, 40100, 32768, 60999) == 1,
	       "range inside the ephemeral range detected");
	tap_ok(ddp_port_overlaps(30000, 32768, 32768, 60999) == 1,
	       "touching the ephemeral range detected");
	{
		struct sockaddr_in sa = {.sin_family = AF_INET};
		socklen_t len = sizeof(sa);
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		if (fd >= 0 &&
		    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
		    listen(fd, 1) == 0 &&
		    getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
			tap_ok(ddp_port_probe(ntohs(sa.sin_port)) == 0,
			       "probe sees a listening port as in use");
		else
			tap_ok(1, "# skip no socket to probe against");
		if (fd >= 0)
			close(fd);
	}
	test_siphash();
	test_keyed();
	test_check_port();
	test_key_file();
	test_key_path();
	return tap_done();
}
