/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Per-node shared memory: a POSIX segment under an unguessable name that
 * the node's leader creates and hands out over the authenticated mesh,
 * and a futex doorbell. The name lives only until every local rank has
 * mapped the segment; after that nobody can open it again.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ddp_util.h"
#include "shm.h"
#include "status.h"

/* Brief spin before sleeping: short enough not to starve the rank that
 * has to make progress when the cores are oversubscribed. */
#define SPIN_TRIES 200
#define YIELD_TRIES 4
#define SLEEP_MS 20

/* Letters and digits of s, at most max of them. */
static void
name_part(char *out, size_t outlen, const char *s, size_t max)
{
	size_t n = 0;

	for (; s && *s && n + 1 < outlen && n < max; s++)
		if ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		    (*s >= '0' && *s <= '9'))
			out[n++] = *s;
	out[n] = '\0';
}

static enum ddp_status
map_fd(struct wk_shm *s, int fd, size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (p == MAP_FAILED)
		return wk_err(DDP_ERR_SYSTEM,
			      "shared memory %s: mmap of %zu bytes: %s",
			      s->name, bytes, strerror(errno));
	s->base = p;
	s->bytes = bytes;
	return DDP_OK;
}

enum ddp_status
wk_shm_create(struct wk_shm *s, size_t bytes, const char *job, const char *step)
{
	char j[41], t[41], hex[33];
	uint8_t rnd[16];
	enum ddp_status st = DDP_ERR_SYSTEM;
	int fd = -1, e;

	memset(s, 0, sizeof(*s));
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		st = wk_err(DDP_ERR_SYSTEM, "getrandom: %s", strerror(errno));
		goto out;
	}
	ddp_hex(hex, sizeof(hex), rnd, sizeof(rnd));
	name_part(j, sizeof(j), job, 40);
	name_part(t, sizeof(t), step, 40);
	if (ddp_fmt(s->name, sizeof(s->name), "/ddp-%s.%s-%s", j, t, hex) < 0) {
		st = wk_err(DDP_ERR_SYSTEM, "shared memory name too long");
		goto out;
	}
	fd = shm_open(s->name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
	if (fd < 0) {
		st = wk_err(DDP_ERR_SYSTEM, "shared memory %s: create: %s",
			    s->name, strerror(errno));
		goto out;
	}
	s->linked = 1;
	/* umask may only have narrowed it; make it exactly what openers
	 * check. */
	if (fchmod(fd, 0600) < 0) {
		st = wk_err(DDP_ERR_SYSTEM, "shared memory %s: chmod: %s",
			    s->name, strerror(errno));
		goto out;
	}
	/* Reserve the pages now: a full /dev/shm must be an error, not a
	 * SIGBUS in the middle of an allreduce. */
	e = posix_fallocate(fd, 0, (off_t)bytes);
	if (e) {
		st = wk_err(DDP_ERR_SYSTEM,
			    "shared memory %s: reserving %zu bytes: %s (is "
			    "/dev/shm large enough?)",
			    s->name, bytes, strerror(e));
		goto out;
	}
	st = map_fd(s, fd, bytes);
out:
	ddp_close(&fd);
	if (st) {
		wk_shm_close(s);
		return st;
	}
	return DDP_OK;
}

enum ddp_status
wk_shm_open(struct wk_shm *s, const char *name, size_t bytes)
{
	enum ddp_status st = DDP_ERR_SYSTEM;
	struct stat sb;
	int fd;

	memset(s, 0, sizeof(*s));
	if (ddp_fmt(s->name, sizeof(s->name), "%s", name) < 0 ||
	    name[0] != '/' || strchr(name + 1, '/'))
		return wk_err(DDP_ERR_SYSTEM, "bad shared memory name");
	fd = shm_open(s->name, O_RDWR | O_NOFOLLOW, 0);
	if (fd < 0)
		return wk_err(DDP_ERR_SYSTEM,
			      "shared memory %s: open: %s (the node leader's "
			      "segment is not visible here: another host or "
			      "another /dev/shm)",
			      s->name, strerror(errno));
	if (fstat(fd, &sb) < 0) {
		st = wk_err(DDP_ERR_SYSTEM, "shared memory %s: fstat: %s",
			    s->name, strerror(errno));
		goto out;
	}
	if (!S_ISREG(sb.st_mode) || sb.st_uid != geteuid() ||
	    (sb.st_mode & 07777) != 0600 || (size_t)sb.st_size != bytes) {
		st = wk_err(DDP_ERR_SYSTEM,
			    "shared memory %s: owner %u mode %04o size %lld; "
			    "expected owner %u mode 0600 size %zu: not the "
			    "segment this job's leader made",
			    s->name, (unsigned)sb.st_uid,
			    (unsigned)(sb.st_mode & 07777),
			    (long long)sb.st_size, (unsigned)geteuid(), bytes);
		goto out;
	}
	st = map_fd(s, fd, bytes);
out:
	close(fd);
	return st;
}

void
wk_shm_unlink(struct wk_shm *s)
{
	if (s->linked) {
		shm_unlink(s->name);
		s->linked = 0;
	}
}

void
wk_shm_close(struct wk_shm *s)
{
	wk_shm_unlink(s);
	if (s->base)
		munmap(s->base, s->bytes);
	s->base = NULL;
	s->bytes = 0;
}

void
wk_bell_ring(struct wk_bell *b)
{
	if (__atomic_load_n(&b->waiters, __ATOMIC_SEQ_CST) == 0)
		return;
	__atomic_add_fetch(&b->seq, 1, __ATOMIC_SEQ_CST);
	syscall(SYS_futex, &b->seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static inline void
cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ volatile("yield");
#endif
}

enum ddp_status
wk_bell_wait(struct wk_bell *b, wk_ready_fn *ready, void *arg, double deadline,
	     wk_watch_fn *watch, void *warg)
{
	struct timespec ts;
	enum ddp_status st;
	double now, last_watch = 0, left;
	uint32_t v;
	int i;

	for (i = 0; i < SPIN_TRIES; i++) {
		if (ready(arg))
			return DDP_OK;
		cpu_relax();
	}
	for (i = 0; i < YIELD_TRIES; i++) {
		if (ready(arg))
			return DDP_OK;
		sched_yield();
	}
	for (;;) {
		/* Announce the sleep before the last look: a ringer either
		 * sees us waiting or we see its change (both seq_cst). */
		__atomic_add_fetch(&b->waiters, 1, __ATOMIC_SEQ_CST);
		v = __atomic_load_n(&b->seq, __ATOMIC_SEQ_CST);
		if (ready(arg)) {
			__atomic_sub_fetch(&b->waiters, 1, __ATOMIC_SEQ_CST);
			return DDP_OK;
		}
		now = ddp_now();
		left = deadline - now;
		if (left > SLEEP_MS / 1000.0)
			left = SLEEP_MS / 1000.0;
		if (left > 0) {
			ts.tv_sec = 0;
			ts.tv_nsec = (long)(left * 1e9);
			syscall(SYS_futex, &b->seq, FUTEX_WAIT, v, &ts, NULL,
				0);
		}
		__atomic_sub_fetch(&b->waiters, 1, __ATOMIC_SEQ_CST);
		if (ready(arg))
			return DDP_OK;
		now = ddp_now();
		if (watch && now - last_watch >= SLEEP_MS / 1000.0) {
			last_watch = now;
			st = watch(warg);
			if (st)
				return st;
		}
		if (now >= deadline)
			return DDP_ERR_TIMEOUT;
	}
}
