/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The GPU tier: libddp's NCCL backend with 2, 3 and 4 ranks on one GPU.
 * Every rank gets its own NCCL_HOSTID, so NCCL takes them for ranks on
 * different hosts and connects them through its socket transport, as it
 * connects nodes. Device memory throughout: the allreduce matrix (4 types
 * x 4 ops x odd and even counts, in and out of place) exact against a
 * serial reference and bit-identical across ranks, the stream forms,
 * broadcast from the first and the last rank, barrier, the gradient sync
 * (copied gradients and views, no-sync accumulation, the fence), and the
 * failures: a mismatched call, a rank killed mid-allreduce, a rank that
 * stops calling (a hang: every other rank names it, its host and pid and
 * the call within DDP_TIMEOUT + 5 s, 20 tries of 20, half with the calls
 * agreed on the control plane and half on the NCCL data plane alone,
 * DDP_NCCL_CHECK=0). On a machine without a GPU device it skips with one
 * line ("no GPU ..."); where there is one, a failed one-rank probe is a
 * failure, not a skip.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>

#include "tap.h"
#include "test-worker-util.h"

enum { MAX_CASES = 256 };
static const enum ddp_dtype dtypes[] = {DDP_FLOAT32, DDP_FLOAT64, DDP_FLOAT16,
					DDP_BFLOAT16};
static const char *const dtype_names[] = {"float32", "float64", "float16",
					  "bfloat16"};
static const enum ddp_op ops[] = {DDP_SUM, DDP_AVG, DDP_MIN, DDP_MAX};
static const char *const op_names[] = {"sum", "avg", "min", "max"};
/* Odd counts, a power of two (no remainder over any chunking) and one
 * element past it. */
static const size_t counts[] = {1, 7, 1000, 262144, 262145};
#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* ---- host-side values in the four types ---- */

static uint16_t
f32_to_f16(float f)
{
	/* Exact for the small integers and halves the tests use. */
	union {
		float f;
		uint32_t u;
	} v = {.f = f};
	uint32_t sign = (v.u >> 16) & 0x8000, mant = v.u & 0x7fffff;
	int exp = (int)((v.u >> 23) & 0xff) - 127 + 15;

	if (f == 0.0f)
		return (uint16_t)sign;
	return (uint16_t)(sign | (uint32_t)exp << 10 | mant >> 13);
}

static float
f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f,
		 mant = h & 0x3ff;
	union {
		uint32_t u;
		float f;
	} v;

	if (exp == 0)
		return (sign ? -1.0f : 1.0f) * (float)mant * 0x1p-24f;
	if (exp == 31)
		v.u = sign | 0x7f800000u | mant << 13;
	else
		v.u = sign | (exp - 15 + 127) << 23 | mant << 13;
	return v.f;
}

static void
put(void *buf, enum ddp_dtype t, size_t i, double x)
{
	union {
		float f;
		uint32_t u;
	} v = {.f = (float)x};

	switch (t) {
	case DDP_FLOAT32:
		((float *)buf)[i] = (float)x;
		break;
	case DDP_FLOAT64:
		((double *)buf)[i] = x;
		break;
	case DDP_FLOAT16:
		((uint16_t *)buf)[i] = f32_to_f16((float)x);
		break;
	case DDP_BFLOAT16:
		((uint16_t *)buf)[i] = (uint16_t)(v.u >> 16);
		break;
	case DDP_UINT8:
		((uint8_t *)buf)[i] = (uint8_t)(x + 128);
		break;
	}
}

static double
get(const void *buf, enum ddp_dtype t, size_t i)
{
	union {
		uint32_t u;
		float f;
	} v;

	switch (t) {
	case DDP_FLOAT32:
		return ((const float *)buf)[i];
	case DDP_FLOAT64:
		return ((const double *)buf)[i];
	case DDP_FLOAT16:
		return f16_to_f32(((const uint16_t *)buf)[i]);
	case DDP_BFLOAT16:
		v.u = (uint32_t)((const uint16_t *)buf)[i] << 16;
		return v.f;
	case DDP_UINT8:
		return (double)((const uint8_t *)buf)[i] - 128;
	}
	return NAN;
}

/* Rank r's element i: a small integer, exact in every type and in sums. */
static double
value(int r, size_t i)
{
	return (double)((long)((i * 7 + (size_t)r * 13) % 17) - 8);
}

/* How far an average may be from the exact one: NCCL scales each input
 * by 1/P before summing in the element type, so it rounds P times. */
static double
avg_tolerance(enum ddp_dtype t, double want)
{
	double eps = t == DDP_FLOAT64	? 0x1p-52
		     : t == DDP_FLOAT32 ? 0x1p-23
		     : t == DDP_FLOAT16 ? 0x1p-10
					: 0x1p-7;

	return 8 * eps * (fabs(want) + 8);
}

/* ---- one rank ---- */

/*
 * GPU_TEST_RANK_ENV names a file of `ddp-plan` output: its "env rank=R
 * NAME=VALUE ..." line for this rank is applied (NAME?=VALUE only when
 * NAME is unset), so the ranks run with what srun --ddp would set.
 */
static int
apply_plan_env(int rank, FILE *out)
{
	const char *path = getenv("GPU_TEST_RANK_ENV");
	char line[4096], want[32], *tok, *eq, *save = NULL;
	FILE *f;
	int found = 0, cond;

	if (!path || !*path)
		return 0;
	f = fopen(path, "r");
	if (!f) {
		fprintf(out, "FAIL GPU_TEST_RANK_ENV=%s cannot be read\n",
			path);
		return -1;
	}
	snprintf(want, sizeof(want), "env rank=%d ", rank);
	while (!found && fgets(line, sizeof(line), f)) {
		if (strncmp(line, want, strlen(want)) != 0)
			continue;
		found = 1;
		line[strcspn(line, "\n")] = '\0';
		for (tok = strtok_r(line + strlen(want), " ", &save); tok;
		     tok = strtok_r(NULL, " ", &save)) {
			eq = strchr(tok, '=');
			if (!eq || eq == tok)
				continue;
			cond = eq[-1] == '?';
			*(cond ? eq - 1 : eq) = '\0';
			setenv(tok, eq + 1, !cond);
		}
	}
	fclose(f);
	if (!found)
		fprintf(out, "FAIL no 'env rank=%d' line in %s\n", rank, path);
	return found ? 0 : -1;
}

static int
join(int rank, int size, int port, double timeout, FILE *out,
     struct ddp_comm **c)
{
	struct ddp_config cfg;
	char hostid[32];

	/* Before CUDA or NCCL start in this process. */
	if (apply_plan_env(rank, out) < 0)
		return 1;
	snprintf(hostid, sizeof(hostid), "host%d", rank);
	setenv("NCCL_HOSTID", hostid, 1);
	tw_cfg(&cfg, rank, size, port, timeout);
	cfg.backend = DDP_BACKEND_NCCL;
	cfg.local_rank = 0;
	if (ddp_comm_init(&cfg, c) != DDP_OK) {
		fprintf(out, "FAIL init: %s\n", ddp_last_error());
		return 1;
	}
	return 0;
}

/* RES <name> <0|1> <detail>: one check, judged by this rank. */
__attribute__((format(printf, 4, 5))) static void
res(FILE *out, const char *name, int ok, const char *fmt, ...)
{
	va_list ap;

	fprintf(out, "RES %s %d ", name, ok);
	va_start(ap, fmt);
	vfprintf(out, fmt, ap);
	va_end(ap);
	fputc('\n', out);
}

/* The allreduce matrix; HASH lines let the parent compare ranks. */
static void
matrix(struct ddp_comm *c, int rank, int size, FILE *out)
{
	size_t maxn = counts[N_ELEMS(counts) - 1], bytes = maxn * 8, i;
	void *hs = malloc(bytes), *hr = malloc(bytes);
	void *ds = ddp_mem_alloc(c, bytes), *dr = ddp_mem_alloc(c, bytes);
	unsigned t, o, n, inplace;
	int r, kase = 0;

	if (!hs || !hr || !ds || !dr) {
		res(out, "matrix", 0, "no memory");
		goto out;
	}
	for (t = 0; t < N_ELEMS(dtypes); t++) {
		for (o = 0; o < N_ELEMS(ops); o++) {
			size_t wrong = 0, first_bad = 0;
			double got_bad = 0, want_bad = 0;
			enum ddp_status st = DDP_OK;

			for (n = 0; n < N_ELEMS(counts); n++) {
				for (inplace = 0; inplace < 2; inplace++) {
					size_t cnt = counts[n];
					size_t sz =
						cnt * ddp_dtype_size(dtypes[t]);

					for (i = 0; i < cnt; i++)
						put(hs, dtypes[t], i,
						    value(rank, i));
					ddp_mem_copy(c, ds, hs, sz, 0);
					st = ddp_allreduce(
						c, ds, inplace ? ds : dr, cnt,
						dtypes[t], ops[o]);
					if (st)
						break;
					ddp_mem_copy(c, hr, inplace ? ds : dr,
						     sz, 1);
					for (i = 0; i < cnt; i++) {
						double want = value(0, i), x,
						       got = get(hr, dtypes[t],
								 i);

						for (r = 1; r < size; r++) {
							x = value(r, i);
							want = ops[o] == DDP_MIN
								       ? fmin(want,
									      x)
							       : ops[o] == DDP_MAX
								       ? fmax(want,
									      x)
								       : want + x;
						}
						if (ops[o] == DDP_AVG)
							want /= size;
						if (ops[o] == DDP_AVG
							    ? fabs(got -
								   want) <=
								      avg_tolerance(
									      dtypes[t],
									      want)
							    : got == want)
							continue;
						if (!wrong++) {
							first_bad = i;
							got_bad = got;
							want_bad = want;
						}
					}
					fprintf(out, "HASH %d %016llx\n",
						kase++,
						(unsigned long long)tw_fnv(hr,
									   sz));
				}
				if (st)
					break;
			}
			res(out, "matrix", !st && !wrong,
			    "%s %s: %s%zu wrong (first: element %zu = %g, "
			    "want %g)",
			    dtype_names[t], op_names[o],
			    st ? ddp_last_error() : "", wrong, first_bad,
			    got_bad, want_bad);
		}
	}
out:
	ddp_mem_free(c, ds);
	ddp_mem_free(c, dr);
	free(hs);
	free(hr);
}

/* Stream forms on the default stream, then broadcast and barrier. */
static void
stream_bcast_barrier(struct ddp_comm *c, int rank, int size, FILE *out)
{
	enum { N = 1000003 };
	float *h = malloc(N * sizeof(float)), *d = ddp_mem_alloc(c, N * 4);
	size_t i, wrong = 0;
	enum ddp_status st;
	int root;

	if (!h || !d) {
		res(out, "stream", 0, "no memory");
		goto out;
	}
	for (i = 0; i < N; i++)
		h[i] = (float)value(rank, i);
	ddp_mem_copy(c, d, h, N * 4, 0);
	st = ddp_allreduce_async(c, d, d, N, DDP_FLOAT32, DDP_SUM, NULL);
	if (!st)
		st = ddp_allreduce_async(c, d, d, N, DDP_FLOAT32, DDP_MAX,
					 NULL);
	if (!st)
		st = ddp_stream_wait(c, NULL);
	ddp_mem_copy(c, h, d, N * 4, 1);
	for (i = 0; i < N && !st; i++) {
		double sum = 0;
		int r;

		for (r = 0; r < size; r++)
			sum += value(r, i);
		wrong += h[i] != (float)sum;
	}
	res(out, "stream", !st && !wrong,
	    "two allreduces queued on the default stream, then "
	    "ddp_stream_wait: %zu wrong %s",
	    wrong, st ? ddp_last_error() : "");
	for (root = 0; root < size; root += size - 1) {
		for (i = 0; i < N; i++)
			h[i] = (float)(rank * 1000 + (int)(i % 1000));
		ddp_mem_copy(c, d, h, N * 4, 0);
		st = ddp_broadcast(c, d, N, DDP_FLOAT32, root);
		ddp_mem_copy(c, h, d, N * 4, 1);
		for (i = 0, wrong = 0; i < N && !st; i++)
			wrong += h[i] != (float)(root * 1000 + (int)(i % 1000));
		res(out, root ? "bcast-last" : "bcast-first", !st && !wrong,
		    "broadcast of %d floats from rank %d: %zu wrong %s", N,
		    root, wrong, st ? ddp_last_error() : "");
		if (size == 1)
			break;
	}
	/* N bytes (odd) from the last rank as DDP_UINT8, which NCCL takes
	 * as ncclUint8; an allreduce of bytes is refused before NCCL. */
	root = size - 1;
	for (i = 0; i < N; i++)
		((uint8_t *)h)[i] = (uint8_t)(rank * 31 + i * 7);
	ddp_mem_copy(c, d, h, N, 0);
	st = ddp_broadcast(c, d, N, DDP_UINT8, root);
	ddp_mem_copy(c, h, d, N, 1);
	for (i = 0, wrong = 0; i < N && !st; i++)
		wrong += ((uint8_t *)h)[i] != (uint8_t)(root * 31 + i * 7);
	res(out, "bcast-bytes",
	    !st && !wrong &&
		    ddp_allreduce(c, d, d, N, DDP_UINT8, DDP_SUM) ==
			    DDP_ERR_INVALID,
	    "broadcast of %d bytes from rank %d: %zu wrong %s", N, root, wrong,
	    st ? ddp_last_error() : "");
	st = ddp_barrier(c);
	res(out, "barrier", !st, "%s", st ? ddp_last_error() : "");
out:
	ddp_mem_free(c, d);
	free(h);
}

static int
fill(struct ddp_comm *c, void *dev, size_t n, float x)
{
	float *h = malloc(n * sizeof(float));
	size_t i;
	int rc;

	if (!h)
		return -1;
	for (i = 0; i < n; i++)
		h[i] = x;
	rc = ddp_mem_copy(c, dev, h, n * 4, 0) == DDP_OK ? 0 : -1;
	free(h);
	return rc;
}

/* Elements of dev (n floats) that differ from want. */
static size_t
count_wrong(struct ddp_comm *c, const void *dev, size_t n, float want)
{
	float *h = malloc(n * sizeof(float));
	size_t i, wrong = 0;

	if (!h || ddp_mem_copy(c, h, dev, n * 4, 1) != DDP_OK) {
		free(h);
		return n;
	}
	for (i = 0; i < n; i++)
		wrong += h[i] != want;
	free(h);
	return wrong;
}

/*
 * One step of the gradient sync: every gradient set to value, marked ready
 * in backward order, waited for; *wrong counts elements that differ from
 * want afterwards.
 */
static enum ddp_status
sync_step(struct ddp_comm *c, struct ddp_grad_sync *gs, void *const *g,
	  const size_t *n, int np, float value, float want, size_t *wrong)
{
	enum ddp_status st = DDP_OK;
	int i;

	for (i = 0; i < np && !st; i++)
		if (fill(c, g[i], n[i], value) < 0)
			st = DDP_ERR_BACKEND;
	for (i = np - 1; i >= 0 && !st; i--)
		st = ddp_grad_sync_ready(gs, i);
	if (!st)
		st = ddp_grad_sync_wait(gs);
	for (i = 0; i < np && !st; i++)
		*wrong += count_wrong(c, g[i], n[i], want);
	return st;
}

/*
 * The gradient sync with five parameters over three buckets (small first
 * bucket and cap), each rank's gradient rank + 1: the average is
 * (size + 1) / 2. Then two no-sync steps accumulate before one sync.
 */
static void
grad_sync(struct ddp_comm *c, int rank, int size, int views, FILE *out)
{
	static const size_t n[] = {1000, 300000, 7, 500000, 123457};
	struct ddp_grad_sync_opts o = {.first_bucket_bytes = 1 << 20,
				       .bucket_cap_bytes = 2 << 20};
	struct ddp_grad_sync *gs = NULL;
	void *par[5] = {0}, *own[5] = {0}, *g[5] = {0};
	const char *name = views ? "grad-views" : "grad-copied";
	size_t wrong = 0;
	enum ddp_status st;
	int i, step;

	st = ddp_grad_sync_create(c, &o, &gs);
	for (i = 0; i < 5 && !st; i++) {
		par[i] = ddp_mem_alloc(c, n[i] * 4);
		own[i] = views ? NULL : ddp_mem_alloc(c, n[i] * 4);
		if (!par[i] || (!views && !own[i]) ||
		    fill(c, par[i], n[i], (float)rank) < 0 ||
		    ddp_grad_sync_add(gs, par[i], own[i], n[i], DDP_FLOAT32) !=
			    i)
			st = DDP_ERR_NOMEM;
	}
	if (!st)
		st = ddp_grad_sync_start(gs);
	for (i = 0; i < 5 && !st; i++) {
		g[i] = ddp_grad_sync_grad(gs, i);
		/* start() broadcast the parameters from rank 0. */
		wrong += count_wrong(c, par[i], n[i], 0.0f);
	}
	if (st || wrong) {
		res(out, name, 0, "start: %zu parameters not rank 0's; %s",
		    wrong, st ? ddp_last_error() : "");
		goto out;
	}
	res(out, name, ddp_grad_sync_num_buckets(gs) >= 3,
	    "%d buckets for 5 parameters (first 1 MiB, cap 2 MiB)",
	    ddp_grad_sync_num_buckets(gs));
	for (step = 0; step < 2 && !st; step++)
		st = sync_step(c, gs, g, n, 5, (float)(rank + 1),
			       (float)(size + 1) / 2, &wrong);
	res(out, name, !st && !wrong,
	    "2 steps, every gradient the average over the ranks: %zu wrong "
	    "%s",
	    wrong, st ? ddp_last_error() : "");
	/* No-sync: gradient = rank + 1 twice, accumulated on the host side
	 * of the test, then one synchronised step. */
	ddp_grad_sync_set_no_sync(gs, 1);
	if (!st)
		st = sync_step(c, gs, g, n, 5, (float)(rank + 1),
			       (float)(rank + 1), &wrong);
	ddp_grad_sync_set_no_sync(gs, 0);
	if (!st)
		st = sync_step(c, gs, g, n, 5, (float)(2 * (rank + 1)),
			       (float)(size + 1), &wrong);
	res(out, name, !st && !wrong,
	    "no-sync step leaves local gradients, the next step averages the "
	    "accumulated ones: %zu wrong %s",
	    wrong, st ? ddp_last_error() : "");
out:
	ddp_grad_sync_destroy(gs);
	for (i = 0; i < 5; i++) {
		ddp_mem_free(c, par[i]);
		if (own[i])
			ddp_mem_free(c, own[i]);
	}
}

typedef int memcpy_async_fn(void *dst, const void *src, size_t bytes, int kind,
			    void *stream);
typedef int malloc_host_fn(void **p, size_t bytes);
typedef int free_host_fn(void *p);

/*
 * Gradients still being written on the default stream (a long copy from
 * pinned host memory) when they are marked ready: the sync must order its
 * work after that write without the program synchronising.
 */
static void
fence(struct ddp_comm *c, int rank, int views, FILE *out)
{
	enum { N = 32 << 20, CUDA_H2D = 1 };
	const char *name = views ? "fence-views" : "fence-copied";
	struct ddp_grad_sync *gs = NULL;
	void *rt = dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
	memcpy_async_fn *memcpy_async = NULL;
	malloc_host_fn *malloc_host = NULL;
	free_host_fn *free_host = NULL;
	float *p = ddp_mem_alloc(c, (size_t)N * 4);
	float *own = views ? NULL : ddp_mem_alloc(c, (size_t)N * 4);
	float *g = NULL, *src = NULL;
	size_t i, wrong = 0;
	int step;

	if (!rt)
		rt = dlopen("libcudart.so.12", RTLD_NOW | RTLD_LOCAL);
	if (rt) {
		*(void **)&memcpy_async = dlsym(rt, "cudaMemcpyAsync");
		*(void **)&malloc_host = dlsym(rt, "cudaMallocHost");
		*(void **)&free_host = dlsym(rt, "cudaFreeHost");
	}
	if (memcpy_async && malloc_host && free_host &&
	    malloc_host((void **)&src, (size_t)N * 4) != 0)
		src = NULL;
	if (!src || !p || !(views || own) ||
	    ddp_grad_sync_create(c, NULL, &gs) != DDP_OK ||
	    ddp_grad_sync_add(gs, p, own, N, DDP_FLOAT32) != 0 ||
	    ddp_grad_sync_start(gs) != DDP_OK ||
	    !(g = ddp_grad_sync_grad(gs, 0))) {
		res(out, name, 0, "setup (CUDA runtime, pinned memory): %s",
		    ddp_last_error());
		goto out;
	}
	for (step = 1; step <= 3; step++) {
		for (i = 0; i < N; i++)
			src[i] = (float)(step * (rank + 1));
		if (fill(c, g, N, 0.0f) < 0 ||
		    memcpy_async(g, src, (size_t)N * 4, CUDA_H2D, NULL) != 0 ||
		    ddp_grad_sync_ready(gs, 0) != DDP_OK ||
		    ddp_grad_sync_wait(gs) != DDP_OK) {
			wrong = N;
			break;
		}
		wrong += count_wrong(
			c, g, N, (float)(step * (ddp_comm_size(c) + 1)) / 2);
	}
	res(out, name, !wrong,
	    "gradients written on the default stream until marked ready are "
	    "averaged after the write (3 steps of %d floats): %zu wrong %s",
	    N, wrong, ddp_last_error());
out:
	ddp_grad_sync_destroy(gs);
	ddp_mem_free(c, p);
	if (own)
		ddp_mem_free(c, own);
	if (src)
		free_host(src);
	if (rt)
		dlclose(rt);
}

static int
healthy_rank(int rank, int size, int port, FILE *out, void *arg)
{
	struct ddp_comm *c = NULL;

	(void)arg;
	if (join(rank, size, port, 60, out, &c))
		return 1;
	res(out, "backend", ddp_comm_backend(c) == DDP_BACKEND_NCCL,
	    "NCCL backend in use");
	matrix(c, rank, size, out);
	stream_bcast_barrier(c, rank, size, out);
	grad_sync(c, rank, size, 0, out);
	grad_sync(c, rank, size, 1, out);
	fence(c, rank, 0, out);
	fence(c, rank, 1, out);
	ddp_comm_destroy(c);
	return 0;
}

/* ---- failures ---- */

enum fault { F_COUNT, F_OP, F_KILL, F_STALL, F_STALL_DATA };
static const char *const fault_names[] = {
	"count mismatch", "op mismatch", "rank killed mid-allreduce",
	"rank stops calling", "rank stops calling (DDP_NCCL_CHECK=0)"};
#define STALL_TIMEOUT 4.0
#define FAULT_RANK(size) ((size)-1)

/* ERR <status> <seconds after the fault> <message> */
static int
fault_rank(int rank, int size, int port, FILE *out, void *arg)
{
	enum { N = 16 << 20 };
	enum fault f = *(enum fault *)arg;
	struct ddp_comm *c = NULL;
	enum ddp_status st = DDP_OK;
	double t0;
	float *d;
	int i;

	if (join(rank, size, port, f >= F_STALL ? STALL_TIMEOUT : 30, out, &c))
		return 1;
	d = ddp_mem_alloc(c, (size_t)N * 4);
	if (!d || fill(c, d, N, 1.0f) < 0) {
		fprintf(out, "FAIL setup\n");
		return 1;
	}
	/* A few good calls first: the fault comes mid-run. The barrier
	 * keeps a fast rank's fault from reaching a rank still in its
	 * warm-up (that rank would fail, rightly, but outside the test). */
	for (i = 0; i < 3 && !st; i++)
		st = ddp_allreduce(c, d, d, 1024, DDP_FLOAT32, DDP_SUM);
	if (!st)
		st = ddp_barrier(c);
	if (st) {
		fprintf(out, "FAIL warm-up: %s\n", ddp_last_error());
		return 1;
	}
	t0 = tw_now();
	if (rank == FAULT_RANK(size)) {
		switch (f) {
		case F_COUNT:
			st = ddp_allreduce(c, d, d, 1025, DDP_FLOAT32, DDP_SUM);
			break;
		case F_OP:
			st = ddp_allreduce(c, d, d, 1024, DDP_FLOAT32, DDP_MAX);
			break;
		case F_KILL:
			/* Dies with its part of a large allreduce queued. */
			ddp_allreduce_async(c, d, d, N, DDP_FLOAT32, DDP_SUM,
					    NULL);
			usleep(20000);
			raise(SIGKILL);
			break;
		case F_STALL:
		case F_STALL_DATA:
			/* Alive, not calling; then its next call fails at
			 * once on the aborted communicator. */
			sleep((unsigned)STALL_TIMEOUT + 2);
			st = ddp_allreduce(c, d, d, 1024, DDP_FLOAT32, DDP_SUM);
			fprintf(out, "WOKE %d %s\n", (int)st, ddp_last_error());
			return st ? 0 : 1;
		}
	} else {
		for (i = 0; i < 50 && !st; i++)
			/* Unchecked, the size of the warm-up: NCCL then has
			 * the connections and queues the call, which waits
			 * on the GPU where the survey watches it. */
			st = f == F_OP || f == F_COUNT || f == F_STALL_DATA
				     ? ddp_allreduce(c, d, d, 1024, DDP_FLOAT32,
						     DDP_SUM)
				     : ddp_allreduce(c, d, d, N, DDP_FLOAT32,
						     DDP_SUM);
	}
	fprintf(out, "ERR %d %.3f %s\n", (int)st, tw_now() - t0,
		st ? ddp_last_error() : "");
	/* No destroy: a broken NCCL communicator may block in it. */
	return 0;
}

/* ---- the parent ---- */

static int
probe_rank(int rank, int size, int port, FILE *out, void *arg)
{
	struct ddp_comm *c = NULL;

	(void)arg;
	if (join(rank, size, port, 30, out, &c))
		return 1;
	fprintf(out, "GPU ok\n");
	ddp_comm_destroy(c);
	return 0;
}

/* One TAP line per check name: ok when every rank said ok. */
static void
report_healthy(int size, struct tw_rank *rk)
{
	static const char *const names[] = {
		"backend",    "matrix",	      "stream",	    "bcast-first",
		"bcast-last", "bcast-bytes",  "barrier",    "grad-copied",
		"grad-views", "fence-copied", "fence-views"};
	char key[64], *line, *eol;
	unsigned k;
	int r, ok, seen, same = 1, n_hash = 0;

	for (k = 0; k < N_ELEMS(names); k++) {
		snprintf(key, sizeof(key), "RES %s ", names[k]);
		/* Every RES line of this name on every rank. */
		for (r = 0, ok = 1, seen = 0; r < size; r++) {
			for (line = strstr(rk[r].out, key); line;
			     line = strstr(line + 1, key)) {
				seen++;
				if (line[strlen(key)] != '1') {
					ok = 0;
					eol = strchr(line, '\n');
					printf("#   rank %d: %.*s\n", r,
					       (int)(eol ? eol - line
							 : (long)strlen(line)),
					       line);
				}
			}
		}
		tap_ok(ok && seen >= size, "%d ranks: %s (%d checks)", size,
		       names[k], seen);
	}
	/* Bit-identical results: rank r's HASH lines equal rank 0's. */
	for (r = 1; r < size; r++) {
		const char *a = strstr(rk[0].out, "HASH "),
			   *b = strstr(rk[r].out, "HASH ");

		while (a && b) {
			n_hash++;
			same &= strcspn(a, "\n") == strcspn(b, "\n") &&
				strncmp(a, b, strcspn(a, "\n")) == 0;
			a = strstr(a + 1, "HASH ");
			b = strstr(b + 1, "HASH ");
		}
		same &= !a && !b;
	}
	tap_ok(same && n_hash > 0,
	       "%d ranks: allreduce results bit-identical on every rank "
	       "(%d results compared)",
	       size, n_hash);
	for (r = 0; r < size; r++)
		if (tw_exit(&rk[r]) != 0 || strstr(rk[r].out, "FAIL")) {
			tap_ok(0, "%d ranks: rank %d ended with %d", size, r,
			       tw_exit(&rk[r]));
			tw_diag_output(r, &rk[r]);
		}
}

/* One job with fault f: 1 when every rank failed as it should. */
static int
run_fault(int size, enum fault f, double *worst_out)
{
	struct tw_rank rk[TW_MAX_RANKS];
	int r, bad = FAULT_RANK(size), ok = 1;
	char named[64], pid[32];
	double worst = 0, t;
	const char *e;

	if (f == F_STALL_DATA)
		setenv("DDP_NCCL_CHECK", "0", 1);
	tw_run_job(size, fault_rank, &f, 60, rk);
	unsetenv("DDP_NCCL_CHECK");
	snprintf(named, sizeof(named), "rank %d ", bad);
	snprintf(pid, sizeof(pid), "pid %d)", (int)rk[bad].pid);
	for (r = 0; r < size; r++) {
		if (r == bad && f != F_COUNT && f != F_OP)
			continue;
		e = strstr(rk[r].out, "ERR ");
		if (!e || e[4] == '0' || sscanf(e + 4, "%*d %lf", &t) != 1) {
			ok = 0;
			tw_diag_output(r, &rk[r]);
			continue;
		}
		if (t > worst)
			worst = t;
		/* The error names the faulty rank (and, but for
		 * mismatches, seen by everybody, calls it by its host). */
		if (!strstr(e, named) ||
		    ((f == F_COUNT || f == F_OP) && !strstr(e, "mismatch")) ||
		    (f >= F_STALL &&
		     (!strstr(e, "has not entered") || !strstr(e, pid) ||
		      t > STALL_TIMEOUT + 5)) ||
		    (f != F_COUNT && f != F_OP && !strstr(e, "(")) ||
		    (f == F_KILL && t > 30)) {
			ok = 0;
			tw_diag_output(r, &rk[r]);
		}
	}
	if (f == F_COUNT || f == F_OP) {
		/* Somebody reports both calls. */
		for (r = 0, e = NULL; r < size && !e; r++)
			e = strstr(rk[r].out, "but rank");
		ok &= e != NULL && worst < 5;
	}
	/* No process is left hanging: the stalled one ends by itself. */
	if (f >= F_STALL &&
	    (!WIFEXITED(rk[bad].status) || tw_exit(&rk[bad]) != 0)) {
		ok = 0;
		tw_diag_output(bad, &rk[bad]);
	}
	*worst_out = worst;
	tw_free_job(size, rk);
	return ok;
}

int
main(void)
{
	struct tw_rank rk[TW_MAX_RANKS];
	const char *nl;
	int size;
	enum fault f;

	signal(SIGPIPE, SIG_IGN);
	tw_run_job(1, probe_rank, NULL, 60, rk);
	if (!strstr(rk[0].out, "GPU ok")) {
		nl = strchr(rk[0].out, '\n');
		if (tw_gpu_device_present()) {
			tap_ok(0,
			       "one rank joins with NCCL on this machine's GPU "
			       "(exit %d): %.*s",
			       tw_exit(&rk[0]),
			       (int)(nl ? nl - rk[0].out
					: (long)strlen(rk[0].out)),
			       rk[0].out);
			tw_diag_output(0, &rk[0]);
			tw_free_job(1, rk);
			return tap_done();
		}
		printf("ok 1 # SKIP no GPU device on this machine (no "
		       "/dev/nvidia0, nvidia-smi -L fails): %.*s\n1..1\n",
		       (int)(nl ? nl - rk[0].out : (long)strlen(rk[0].out)),
		       rk[0].out);
		tw_free_job(1, rk);
		return 0;
	}
	tw_free_job(1, rk);
	for (size = 2; size <= 4; size++) {
		tw_run_job(size, healthy_rank, NULL, 300, rk);
		report_healthy(size, rk);
		tw_free_job(size, rk);
	}
	for (f = F_COUNT; f <= F_STALL_DATA; f++) {
		int tries = f >= F_STALL ? 10 : 1, good = 0, k;
		double worst = 0, w;

		for (k = 0; k < tries; k++) {
			good += run_fault(3, f, &w);
			worst = w > worst ? w : worst;
		}
		tap_ok(good == tries,
		       "3 ranks, %s: every other rank fails naming rank %d, "
		       "%d of %d tries (slowest after %.2f s)",
		       fault_names[f], FAULT_RANK(3), good, tries, worst);
	}
	return tap_done();
}
