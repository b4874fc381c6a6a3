/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libddp TCP collectives against a serial reference: every type and op,
 * 1 element to 64 MiB, world sizes 1-8, both algorithms, over loopback;
 * broadcasts of bytes, which the reductions refuse.
 */
#include <dirent.h>
#include <math.h>
#include <stdint.h>

#include "tap.h"
#include "test-worker-ref.h"
#include "test-worker-util.h"

static const enum ddp_dtype dtypes[] = {DDP_FLOAT32, DDP_FLOAT64, DDP_FLOAT16,
					DDP_BFLOAT16};
static const enum ddp_op ops[] = {DDP_SUM, DDP_AVG, DDP_MAX, DDP_MIN};
static const size_t sizes[] = {1, 2, 7, 100, 1023, 4099, 65537};

struct round {
	const char *algo;    /* DDP_TCP_ALGO */
	const char *segment; /* DDP_TCP_SEGMENT */
	int matrix;	     /* full type x op x size matrix */
	int big;	     /* 64 MiB fp32 sum */
};

static int
check_allreduce(struct ddp_comm *c, FILE *out, const char *tag,
		enum ddp_dtype t, enum ddp_op op, size_t n, int inplace)
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
	for (i = 0; i < n; i++)
		if (load(r, i, t) != reference(size, i, salt, t, op))
			bad++;
	fprintf(out, "R %s/%s/%s/n=%zu%s %d %016llx\n", tag,
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

/* Random floats: results must be bitwise equal on all ranks and close to
 * the double-precision sum. */
static int
check_random(struct ddp_comm *c, FILE *out, const char *tag, size_t n)
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
	fprintf(out, "R %s/random-f32/n=%zu %d %016llx\n", tag, n, bad == 0,
		(unsigned long long)tw_fnv(b, n * sizeof(float)));
	free(b);
	return 0;
}

static int
check_bcast(struct ddp_comm *c, FILE *out, const char *tag, enum ddp_dtype t,
	    size_t n, int root)
{
	size_t es = ddp_dtype_size(t), i, bad = 0;
	int rank = ddp_comm_rank(c);
	void *b = malloc(n * es);

	if (!b)
		return -1;
	for (i = 0; i < n; i++)
		store(b, i, t, input(rank, i, 3));
	if (ddp_broadcast(c, b, n, t, root)) {
		fprintf(out, "E %s\n", ddp_last_error());
		return -1;
	}
	for (i = 0; i < n; i++)
		if (load(b, i, t) != input(root, i, 3))
			bad++;
	fprintf(out, "R %s/bcast-%s/n=%zu/root=%d %d %016llx\n", tag,
		t == DDP_FLOAT32 ? "f32" : "f16", n, root, bad == 0,
		(unsigned long long)tw_fnv(b, n * es));
	free(b);
	return 0;
}

/*
 * Bytes (DDP_UINT8) of an odd length broadcast from root, as ddp-check
 * sends its token and verdict text; a reduction of bytes is refused
 * (DDP_ERR_INVALID) and leaves the communicator usable.
 */
static int
check_bytes(struct ddp_comm *c, FILE *out, const char *tag, size_t n, int root)
{
	int rank = ddp_comm_rank(c);
	uint8_t *b = malloc(n + 1), *r = malloc(n + 1);
	enum ddp_status st;
	size_t i, bad = 0;

	if (!b || !r) {
		free(b);
		free(r);
		return -1;
	}
	for (i = 0; i <= n; i++)
		b[i] = (uint8_t)(rank * 31 + i * 7);
	if (ddp_broadcast(c, b, n, DDP_UINT8, root)) {
		fprintf(out, "E %s\n", ddp_last_error());
		free(b);
		free(r);
		return -1;
	}
	for (i = 0; i < n; i++)
		bad += b[i] != (uint8_t)(root * 31 + i * 7);
	/* The byte past count is not touched. */
	bad += b[n] != (uint8_t)(rank * 31 + n * 7);
	st = ddp_allreduce(c, b, r, n, DDP_UINT8, DDP_SUM);
	fprintf(out, "R %s/bcast-u8/n=%zu/root=%d %d %016llx\n", tag, n, root,
		bad == 0 && st == DDP_ERR_INVALID,
		(unsigned long long)tw_fnv(b, n));
	free(b);
	free(r);
	return 0;
}

static int
rank_main(int rank, int size, int port, FILE *out, void *arg)
{
	const struct round *rd = arg;
	struct ddp_config cfg;
	struct ddp_comm *c = NULL;
	size_t si, di, oi;
	char tag[64];
	int rc = 0;

	if (rd->algo)
		setenv("DDP_TCP_ALGO", rd->algo, 1);
	if (rd->segment)
		setenv("DDP_TCP_SEGMENT", rd->segment, 1);
	tw_cfg(&cfg, rank, size, port, 60);
	if (ddp_comm_init(&cfg, &c)) {
		fprintf(out, "E init: %s\n", ddp_last_error());
		return 1;
	}
	snprintf(tag, sizeof(tag), "P=%d/%s", size,
		 rd->algo ? rd->algo : "auto");
	if (rd->matrix) {
		for (di = 0; di < 4 && !rc; di++)
			for (oi = 0; oi < 4 && !rc; oi++)
				for (si = 0; si < 7 && !rc; si++)
					rc = check_allreduce(
						c, out, tag, dtypes[di],
						ops[oi], sizes[si], si % 2);
		if (!rc)
			rc = check_random(c, out, tag, 10007);
		for (si = 0; si < 3 && !rc; si++)
			rc = check_bcast(c, out, tag,
					 si == 1 ? DDP_FLOAT16 : DDP_FLOAT32,
					 si == 2   ? 300001
					 : si == 1 ? 1000
						   : 1,
					 si == 0 ? 0 : size - 1);
		for (si = 0; si < 3 && !rc; si++)
			rc = check_bytes(c, out, tag,
					 si == 2   ? 300001
					 : si == 1 ? 33
						   : 1,
					 si == 1 ? size - 1 : 0);
	}
	if (rd->big && !rc) {
		rc = check_allreduce(c, out, tag, DDP_FLOAT32, DDP_SUM,
				     (64u << 20) / 4, 1);
		if (!rc)
			rc = check_random(c, out, tag, 1 << 20);
	}
	if (!rc && ddp_barrier(c)) {
		fprintf(out, "E barrier: %s\n", ddp_last_error());
		rc = -1;
	}
	ddp_comm_destroy(c);
	return rc ? 1 : 0;
}

/* Verdict of one job: every rank passes each case with equal results. */
static void
judge(int size, const struct round *rd, struct tw_rank *rk, double secs)
{
	char name[128], key[132], crc0[32], crc[32], *line, *save;
	int i, ok, rok, all = 1, cases = 0, exits = 1;
	const char *p;
	char label[160];

	for (i = 0; i < size; i++)
		exits &= tw_exit(&rk[i]) == 0;
	/* Walk rank 0's cases; find each in the other ranks' output. */
	line = rk[0].out;
	while (line && *line) {
		save = strchr(line, '\n');
		if (save)
			*save = '\0';
		if (sscanf(line, "R %127s %d %31s", name, &ok, crc0) == 3) {
			cases++;
			rok = ok;
			snprintf(key, sizeof(key), "R %s ", name);
			for (i = 1; i < size; i++) {
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
	snprintf(label, sizeof(label),
		 "world %d, %s%s%s: %d cases correct and equal on all ranks "
		 "(%.2f s)",
		 size, rd->algo ? rd->algo : "auto",
		 rd->segment ? " with small segments" : "",
		 rd->big ? ", 64 MiB fp32 sum + 4 MiB random" : "", cases,
		 secs);
	if (!tap_ok(all && exits && cases > 0, "%s", label))
		for (i = 0; i < size; i++)
			tw_diag_output(i, &rk[i]);
}

/* Uneven nodes: UNEVEN_NODES nodes of 3 ranks, then one node of 1. */
#define UNEVEN_NODES 12
#define UNEVEN_SIZE (UNEVEN_NODES * 3 + 1)

/* Sockets this process holds (its peers, once the rendezvous is over). */
static int
count_sockets(void)
{
	char path[300], link[64];
	struct dirent *e;
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	ssize_t len;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		len = readlink(path, link, sizeof(link) - 1);
		if (len > 0) {
			link[len] = '\0';
			n += strncmp(link, "socket:", 7) == 0;
		}
	}
	closedir(d);
	return n;
}

/*
 * A world of UNEVEN_SIZE ranks on uneven "nodes" (DDP_HOSTNAME): every
 * algorithm, broadcasts from every root and a barrier over the sparse
 * mesh, and how many peers this rank holds connections to.
 */
static int
uneven_main(int rank, int size, int port, FILE *out, void *arg)
{
	const char *algo = arg;
	struct ddp_config cfg;
	struct ddp_comm *c = NULL;
	char host[32], tag[64];
	int rc = 0, root, k;

	snprintf(host, sizeof(host), "node%d", rank / 3);
	setenv("DDP_HOSTNAME", host, 1);
	setenv("DDP_TCP_ALGO", algo, 1);
	tw_cfg(&cfg, rank, size, port, 60);
	if (ddp_comm_init(&cfg, &c)) {
		fprintf(out, "E init: %s\n", ddp_last_error());
		return 1;
	}
	fprintf(out, "SOCKETS %d\n", count_sockets());
	snprintf(tag, sizeof(tag), "P=%d/uneven/%s", size, algo);
	for (k = 0; k < 4 && !rc; k++)
		rc = check_allreduce(c, out, tag, DDP_FLOAT32,
				     k % 2 ? DDP_AVG : DDP_SUM,
				     k < 2 ? sizes[k * 3] : sizes[k + 3], 1);
	for (root = 0; root < size && !rc; root++)
		rc = check_bcast(c, out, tag, DDP_FLOAT32,
				 root % 5 ? 1 : 300001, root);
	if (!rc && ddp_barrier(c)) {
		fprintf(out, "E barrier: %s\n", ddp_last_error());
		rc = -1;
	}
	ddp_comm_destroy(c);
	return rc ? 1 : 0;
}

/*
 * The most sockets a rank of the uneven world may hold: rank +/- 2^k, its
 * recursive-doubling partners, the other ranks of its node and its
 * stripe's two neighbours; never one per rank of the world.
 */
static int
uneven_bound(void)
{
	int lg = 0;

	while ((1 << lg) < UNEVEN_SIZE)
		lg++;
	return 3 * lg + 2 + 2;
}

static void
judge_uneven(const char *algo, struct tw_rank *rk, double secs)
{
	const struct round tag = {algo, NULL, 0, 0};
	int i, most = 0;
	long n;
	const char *p;

	for (i = 0; i < UNEVEN_SIZE; i++) {
		p = strstr(rk[i].out, "SOCKETS ");
		n = p ? strtol(p + 8, NULL, 10) : 1L << 30;
		if (n > most)
			most = (int)(n < INT32_MAX ? n : INT32_MAX);
	}
	judge(UNEVEN_SIZE, &tag, rk, secs);
	tap_ok(most <= uneven_bound() && most < UNEVEN_SIZE - 1,
	       "world %d on uneven nodes, %s: each rank holds at most %d "
	       "sockets (bound %d, full mesh %d)",
	       UNEVEN_SIZE, algo, most, uneven_bound(), UNEVEN_SIZE - 1);
}

int
main(void)
{
	static const struct round matrix_rounds[] = {
		{"rd", NULL, 1, 0},
		{"ring", "1024", 1, 0},
	};
	static const struct round big = {NULL, NULL, 0, 1};
	static const int big_sizes[] = {2, 3, 8};
	struct tw_rank rk[TW_MAX_RANKS];
	double t0;
	int size, k;

	signal(SIGPIPE, SIG_IGN);
	for (size = 1; size <= 8; size++) {
		for (k = 0; k < 2; k++) {
			t0 = tw_now();
			if (tw_run_job(size, rank_main,
				       (void *)&matrix_rounds[k], 120, rk) < 0)
				return tap_ok(0, "fork"), tap_done();
			judge(size, &matrix_rounds[k], rk, tw_now() - t0);
			tw_free_job(size, rk);
		}
	}
	for (k = 0; k < 3; k++) {
		t0 = tw_now();
		if (tw_run_job(big_sizes[k], rank_main, (void *)&big, 300, rk) <
		    0)
			return tap_ok(0, "fork"), tap_done();
		judge(big_sizes[k], &big, rk, tw_now() - t0);
		tw_free_job(big_sizes[k], rk);
	}
	for (k = 0; k < 3; k++) {
		static const char *const algos[] = {"rd", "ring", "hier"};

		t0 = tw_now();
		if (tw_run_job(UNEVEN_SIZE, uneven_main, (void *)algos[k], 300,
			       rk) < 0)
			return tap_ok(0, "fork"), tap_done();
		judge_uneven(algos[k], rk, tw_now() - t0);
		tw_free_job(UNEVEN_SIZE, rk);
	}
	return tap_done();
}
