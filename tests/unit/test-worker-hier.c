/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libddp's hierarchical allreduce (shared memory within a host, TCP
 * across hosts) against a serial reference. Forked ranks name their host
 * with DDP_HOSTNAME, so several "nodes" share this machine: 2x2 (block
 * and round-robin), 3+1, 2x3, 2+1+2 and 1x4, every type and op, odd
 * counts, in and out of place, many chunks; then failures: a local rank
 * killed, a local rank that stops calling, a different count.
 */
#include <math.h>
#include <stdint.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "shm.h"
#include "tap.h"
#include "test-worker-ref.h"
#include "test-worker-util.h"

static const enum ddp_dtype dtypes[] = {DDP_FLOAT32, DDP_FLOAT64, DDP_FLOAT16,
					DDP_BFLOAT16};
static const enum ddp_op ops[] = {DDP_SUM, DDP_AVG, DDP_MAX, DDP_MIN};
static const size_t sizes[] = {1, 2, 7, 100, 1023, 4099, 65537, 200003};

enum mode {
	M_MATRIX = 0, /* the full matrix, small chunks */
	M_BIG = 1,    /* 48 MiB fp32 + random floats, default chunks */
	M_KILL = 2,   /* rank `victim` dies before the 2nd allreduce */
	M_HANG = 3,   /* rank `victim` stops calling */
	M_COUNT = 4,  /* rank `victim` passes another count */
};

struct layout {
	const char *name;
	int size;
	const char *hosts; /* one letter per rank */
	const char *algo;  /* DDP_TCP_ALGO */
	int hier;	   /* expected: the hierarchical allreduce is on */
	enum mode mode;
	int victim;
};

/* How many ranks of the running job have finished their first
 * allreduce: shared by its processes, zeroed before each job. */
static int *first_done;

/* Waits up to secs until all size ranks finished their first allreduce:
 * 1, or 0. */
static int
wait_first_done(int size, double secs)
{
	double end = tw_now() + secs;

	while (__atomic_load_n(first_done, __ATOMIC_SEQ_CST) < size) {
		if (tw_now() >= end)
			return 0;
		usleep(1000);
	}
	return 1;
}

static int
check_allreduce(struct ddp_comm *c, FILE *out, enum ddp_dtype t, enum ddp_op op,
		size_t n, int inplace)
{
	size_t es = ddp_dtype_size(t), i, bad = 0;
	int rank = ddp_comm_rank(c), size = ddp_comm_size(c), salt = (int)n;
	void *s = malloc(n * es), *r = inplace ? s : malloc(n * es);
	enum ddp_status st;

	if (!s || !r)
		return -1;
	for (i = 0; i < n; i++)
		store(s, i, t, input(rank, i, salt));
	st = ddp_allreduce(c, s, r, n, t, op);
	if (st) {
		fprintf(out, "E %s: %s\n", ddp_strerror(st), ddp_last_error());
		return -1;
	}
	/* Out of place leaves the input alone. */
	for (i = 0; !inplace && i < n; i++)
		if (load(s, i, t) != input(rank, i, salt))
			bad++;
	for (i = 0; i < n; i++)
		if (load(r, i, t) != reference(size, i, salt, t, op))
			bad++;
	fprintf(out, "R %s/%s/n=%zu%s %d %016llx\n",
		t == DDP_FLOAT32   ? "f32"
		: t == DDP_FLOAT64 ? "f64"
		: t == DDP_FLOAT16 ? "f16"
				   : "bf16",
		op == DDP_SUM	? "sum"
		: op == DDP_AVG ? "avg"
		: op == DDP_MAX ? "max"
				: "min",
		n, inplace ? "" : "/oop", bad == 0,
		(unsigned long long)tw_fnv(r, n * es));
	if (r != s)
		free(r);
	free(s);
	return 0;
}

/* Random floats: bitwise equal on all ranks, close to the exact sum. */
static int
check_random(struct ddp_comm *c, FILE *out, size_t n)
{
	int rank = ddp_comm_rank(c), size = ddp_comm_size(c), r;
	float *b = malloc(n * sizeof(float));
	size_t i, bad = 0;
	double ref;

	if (!b)
		return -1;
	for (i = 0; i < n; i++)
		b[i] = random_input(i, rank);
	if (ddp_allreduce(c, b, b, n, DDP_FLOAT32, DDP_SUM)) {
		fprintf(out, "E %s\n", ddp_last_error());
		return -1;
	}
	for (i = 0; i < n; i++) {
		ref = 0;
		for (r = 0; r < size; r++)
			ref += (double)random_input(i, r);
		if (fabs(b[i] - ref) > 1e-4 * (fabs(ref) + 50.0 * size))
			bad++;
	}
	fprintf(out, "R random-f32/n=%zu %d %016llx\n", n, bad == 0,
		(unsigned long long)tw_fnv(b, n * sizeof(float)));
	free(b);
	return 0;
}

static void
log_to(int level, const char *msg, void *arg)
{
	FILE *out = arg;

	if (strstr(msg, "hierarchical allreduce:"))
		fprintf(out, "H %d %s\n", level, msg);
	else if (level <= 1)
		fprintf(out, "W %s\n", msg);
}

/* "M 1" when this process maps a node segment whose name is gone. */
static void
report_mapping(FILE *out)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int mapped = 0, deleted = 0;

	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "/dev/shm/ddp-")) {
			mapped = 1;
			deleted |= strstr(line, "(deleted)") != NULL;
		}
	if (f)
		fclose(f);
	fprintf(out, "M %d %d\n", mapped, deleted);
}

static int
rank_main(int rank, int size, int port, FILE *out, void *arg)
{
	const struct layout *l = arg;
	char host[32];
	struct ddp_config cfg;
	struct ddp_comm *c = NULL;
	size_t si, di, oi;
	enum ddp_status st;
	float *b;
	int rc = 0;

	snprintf(host, sizeof(host), "node-%c", l->hosts[rank]);
	setenv("DDP_HOSTNAME", host, 1);
	setenv("DDP_DEBUG", "1", 1);
	if (l->algo)
		setenv("DDP_TCP_ALGO", l->algo, 1);
	if (l->mode == M_MATRIX)
		setenv("DDP_HIER_CHUNK", "65536", 1);
	ddp_set_log_fn(log_to, out);
	tw_cfg(&cfg, rank, size, port, l->mode >= M_KILL ? 3 : 60);
	if (ddp_comm_init(&cfg, &c)) {
		fprintf(out, "E init: %s\n", ddp_last_error());
		return 1;
	}
	report_mapping(out);
	switch (l->mode) {
	case M_MATRIX:
		for (di = 0; di < 4 && !rc; di++)
			for (oi = 0; oi < 4 && !rc; oi++)
				for (si = 0; si < 8 && !rc; si++)
					rc = check_allreduce(c, out, dtypes[di],
							     ops[oi], sizes[si],
							     (si + oi) % 2);
		break;
	case M_BIG:
		rc = check_allreduce(c, out, DDP_FLOAT32, DDP_SUM,
				     (48u << 20) / 4 + 3, 1);
		if (!rc)
			rc = check_random(c, out, (1 << 20) + 5);
		break;
	default:
		b = calloc(1 << 20, sizeof(float));
		if (!b)
			return 1;
		st = ddp_allreduce(c, b, b, 1 << 20, DDP_FLOAT32, DDP_SUM);
		if (st) {
			fprintf(out, "E first: %s\n", ddp_last_error());
			return 1;
		}
		__atomic_add_fetch(first_done, 1, __ATOMIC_SEQ_CST);
		/* Dying at once could end the others' first call: the
		 * victim has done its part, but a peer still finishing
		 * sees its sockets close. It dies once every rank is
		 * done with it. */
		if (rank == l->victim && l->mode == M_KILL) {
			if (!wait_first_done(size, 20))
				fprintf(out, "E not every rank finished its "
					     "first allreduce\n");
			fflush(out);
			raise(SIGKILL);
		}
		if (rank == l->victim && l->mode == M_HANG) {
			sleep(6);
			return 0;
		}
		st = ddp_allreduce(
			c, b, b,
			(1 << 20) + (rank == l->victim && l->mode == M_COUNT),
			DDP_FLOAT32, DDP_SUM);
		fprintf(out, "F %s: %s\n", ddp_strerror(st),
			st ? ddp_last_error() : "");
		free(b);
		ddp_comm_destroy(c);
		return st ? 3 : 0;
	}
	if (!rc && ddp_barrier(c)) {
		fprintf(out, "E barrier: %s\n", ddp_last_error());
		rc = -1;
	}
	ddp_comm_destroy(c);
	return rc ? 1 : 0;
}

/* Every rank passes each case with equal results, and says whether it
 * used the hierarchical allreduce as expected. */
static void
judge(const struct layout *l, struct tw_rank *rk, double secs)
{
	char name[128], key[132], crc0[32], crc[32], *line, *save;
	int i, ok, rok, all = 1, cases = 0, exits = 1, hier = 1;
	const char *p;

	for (i = 0; i < l->size; i++) {
		exits &= tw_exit(&rk[i]) == 0;
		hier &= (strstr(rk[i].out, "H 2 ") != NULL) == l->hier;
		/* Ranks sharing a host map the segment, already unlinked. */
		if (l->hier && strchr(l->hosts, l->hosts[i]) !=
				       strrchr(l->hosts, l->hosts[i]))
			hier &= strstr(rk[i].out, "M 1 1") != NULL;
		else
			hier &= strstr(rk[i].out, "M 0 0") != NULL;
	}
	line = rk[0].out;
	while (line && *line) {
		save = strchr(line, '\n');
		if (save)
			*save = '\0';
		if (sscanf(line, "R %127s %d %31s", name, &ok, crc0) == 3) {
			cases++;
			rok = ok;
			snprintf(key, sizeof(key), "R %s ", name);
			for (i = 1; i < l->size; i++) {
				p = strstr(rk[i].out, key);
				if (!p ||
				    sscanf(p + strlen(key), "%d %31s", &ok,
					   crc) != 2 ||
				    !ok || strcmp(crc, crc0) != 0)
					rok = 0;
			}
			if (!rok) {
				all = 0;
				tap_diag("case %s failed or differs across "
					 "ranks",
					 name);
			}
		}
		if (save)
			*save = '\n';
		line = save ? save + 1 : NULL;
	}
	if (!tap_ok(all && exits && hier && cases > 0,
		    "%s (%s): %d cases correct and bit-identical on all ranks, "
		    "hierarchical %s (%.2f s)",
		    l->name, l->hosts, cases, l->hier ? "on" : "off", secs))
		for (i = 0; i < l->size; i++)
			tw_diag_output(i, &rk[i]);
}

/* The survivors fail within the timeout (3 s) + 2 s (the timing tier;
 * elsewhere 15 s, well before the job's 60 s limit ends a rank that
 * never fails: tap.h), naming what. */
static void
judge_fail(const struct layout *l, struct tw_rank *rk, double t0,
	   const char *want)
{
	char needle[32];
	int i, good = 1;
	double worst = 0;

	snprintf(needle, sizeof(needle), "rank %d (", l->victim);
	for (i = 0; i < l->size; i++) {
		if (i == l->victim)
			continue;
		if (rk[i].end - t0 > worst)
			worst = rk[i].end - t0;
		/* A rank that has done its part of the first call may see
		 * the abort of those already in the second: either call
		 * fails. */
		if ((tw_exit(&rk[i]) != 3 && tw_exit(&rk[i]) != 1) ||
		    !strstr(rk[i].out, needle) ||
		    (want && i == 0 && !strstr(rk[i].out, want)))
			good = 0;
	}
	if (getenv("TEST_VERBOSE"))
		for (i = 0; i < l->size; i++)
			tw_diag_output(i, &rk[i]);
	if (!tap_ok(good && worst < tap_bound(3 + 2.0, 15.0),
		    "%s (%s): every other rank fails naming rank %d%s%s "
		    "within %.2f s",
		    l->name, l->hosts, l->victim, want ? ", rank 0 with " : "",
		    want ? want : "", worst))
		for (i = 0; i < l->size; i++)
			tw_diag_output(i, &rk[i]);
}

/* The segment's creation and the checks before mapping one. */
static void
check_segments(void)
{
	struct wk_shm a, b;
	struct stat sb;
	char path[256];
	int fd, ok;

	ok = wk_shm_create(&a, 1 << 16, "12.3", "0") == DDP_OK;
	snprintf(path, sizeof(path), "/dev/shm%s", a.name);
	tap_ok(ok && stat(path, &sb) == 0 && (sb.st_mode & 07777) == 0600 &&
		       sb.st_uid == geteuid() && sb.st_size == 1 << 16 &&
		       strncmp(a.name, "/ddp-123.0-", 11) == 0 &&
		       strlen(a.name) == 11 + 32,
	       "a new segment is %s: mode 0600, this user's, its size", a.name);
	tap_ok(wk_shm_open(&b, a.name, 1 << 15) == DDP_ERR_SYSTEM &&
		       strstr(ddp_last_error(), "size") != NULL,
	       "a segment of another size is refused: %s", ddp_last_error());
	ok = wk_shm_open(&b, a.name, 1 << 16) == DDP_OK;
	if (ok) {
		((char *)a.base)[7] = 42;
		ok = ((char *)b.base)[7] == 42;
		wk_shm_close(&b);
	}
	tap_ok(ok, "the same segment opened by name shares its memory");
	wk_shm_unlink(&a);
	tap_ok(stat(path, &sb) < 0 && wk_shm_open(&b, a.name, 1 << 16) &&
		       ((char *)a.base)[7] == 42,
	       "unlinked, it stays mapped and cannot be opened again: %s",
	       ddp_last_error());
	wk_shm_close(&a);
	/* Someone else's making: mode 0644 is not what a leader makes. */
	fd = shm_open("/ddp-test-foreign", O_RDWR | O_CREAT | O_EXCL, 0600);
	ok = fd >= 0 && fchmod(fd, 0644) == 0 && ftruncate(fd, 1 << 16) == 0;
	tap_ok(ok &&
		       wk_shm_open(&b, "/ddp-test-foreign", 1 << 16) ==
			       DDP_ERR_SYSTEM &&
		       strstr(ddp_last_error(), "mode 0644") != NULL,
	       "a segment with another mode is refused: %s", ddp_last_error());
	if (fd >= 0)
		close(fd);
	shm_unlink("/ddp-test-foreign");
}

static void
check_bad_algo(void)
{
	struct ddp_config cfg;
	struct ddp_comm *c = NULL;
	enum ddp_status st;

	setenv("DDP_TCP_ALGO", "tree", 1);
	tw_cfg(&cfg, 0, 1, tw_free_port(), 5);
	st = ddp_comm_init(&cfg, &c);
	tap_ok(st == DDP_ERR_ENV && !c &&
		       strstr(ddp_last_error(), "DDP_TCP_ALGO='tree'") &&
		       strstr(ddp_last_error(), "hier"),
	       "DDP_TCP_ALGO=tree is refused naming the variable: %s",
	       ddp_last_error());
	unsetenv("DDP_TCP_ALGO");
	ddp_comm_destroy(c);
}

int
main(void)
{
	static const struct layout ok_layouts[] = {
		{"2 nodes x 2", 4, "aabb", NULL, 1, M_MATRIX, -1},
		{"2 nodes x 2, round robin", 4, "abab", NULL, 1, M_MATRIX, -1},
		{"2 nodes x 2, DDP_TCP_ALGO=hier", 4, "aabb", "hier", 1,
		 M_MATRIX, -1},
		{"3 + 1, DDP_TCP_ALGO=hier", 4, "aaab", "hier", 1, M_MATRIX,
		 -1},
		{"2 nodes x 3, DDP_TCP_ALGO=hier", 6, "ababab", "hier", 1,
		 M_MATRIX, -1},
		{"3 + 1", 4, "aaab", NULL, 1, M_MATRIX, -1},
		{"2 nodes x 3", 6, "aaabbb", NULL, 1, M_MATRIX, -1},
		{"2 + 1 + 2", 5, "abacc", NULL, 1, M_MATRIX, -1},
		{"1 node x 4, DDP_TCP_ALGO=hier", 4, "aaaa", "hier", 1,
		 M_MATRIX, -1},
		{"1 node x 4, auto stays flat", 4, "aaaa", NULL, 0, M_MATRIX,
		 -1},
		{"2 nodes x 2, DDP_TCP_ALGO=ring stays flat", 4, "aabb", "ring",
		 0, M_MATRIX, -1},
		{"4 nodes x 1, DDP_TCP_ALGO=hier", 4, "abcd", "hier", 1,
		 M_MATRIX, -1},
		{"2 nodes x 2, 48 MiB", 4, "aabb", NULL, 1, M_BIG, -1},
		{"3 + 1, 48 MiB", 4, "aaab", NULL, 1, M_BIG, -1},
	};
	static const struct layout fail_layouts[] = {
		{"local rank killed", 4, "aabb", NULL, 1, M_KILL, 1},
		{"local non-owner killed", 4, "aaab", NULL, 1, M_KILL, 2},
		{"node leader killed", 4, "aabb", NULL, 1, M_KILL, 0},
		{"other node's rank killed", 6, "aaabbb", NULL, 1, M_KILL, 4},
		{"local rank stops calling", 4, "aabb", NULL, 1, M_HANG, 1},
		{"local rank passes another count", 4, "aabb", NULL, 1, M_COUNT,
		 1},
	};
	struct tw_rank rk[TW_MAX_RANKS];
	double t0;
	size_t k;

	signal(SIGPIPE, SIG_IGN);
	first_done = mmap(NULL, sizeof(*first_done), PROT_READ | PROT_WRITE,
			  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (first_done == MAP_FAILED)
		return tap_ok(0, "mmap"), tap_done();
	for (k = 0; k < sizeof(ok_layouts) / sizeof(ok_layouts[0]); k++) {
		t0 = tw_now();
		if (tw_run_job(ok_layouts[k].size, rank_main,
			       (void *)&ok_layouts[k], 300, rk) < 0)
			return tap_ok(0, "fork"), tap_done();
		judge(&ok_layouts[k], rk, tw_now() - t0);
		tw_free_job(ok_layouts[k].size, rk);
	}
	for (k = 0; k < sizeof(fail_layouts) / sizeof(fail_layouts[0]); k++) {
		t0 = tw_now();
		*first_done = 0;
		if (tw_run_job(fail_layouts[k].size, rank_main,
			       (void *)&fail_layouts[k], 60, rk) < 0)
			return tap_ok(0, "fork"), tap_done();
		judge_fail(&fail_layouts[k], rk, t0,
			   fail_layouts[k].mode == M_COUNT ? "mismatched"
							   : NULL);
		tw_free_job(fail_layouts[k].size, rk);
	}
	check_segments();
	check_bad_algo();
	return tap_done();
}
