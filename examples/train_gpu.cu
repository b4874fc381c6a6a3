// SPDX-License-Identifier: BSD-3-Clause
// examples/train on the GPU (train-gpu.so): cuBLAS for the matrix
// products, small kernels for the rest, everything queued on the legacy
// default stream, in program order. libddp's gradient sync orders its
// bucket reductions after that stream's work, so backward never waits.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "train_compute.h"
}

struct train_ctx {
	int hidden;
	size_t max_batch;
	size_t bs; // the batch of the last forward
	cublasHandle_t blas;
	uint8_t *records; // every record, on the device
	size_t *order;	  // this epoch's indices
	size_t n_order;
	size_t first; // the batch: order[first .. first + bs)
	float *x;     // bs x 3072 inputs
	float *h;     // bs x H activations (post-ReLU)
	float *dl;    // bs x 10 d(loss)/d(logits)
	float *dh;    // bs x H
	float *z;     // bs x 10 logits
	float *ones;  // max_batch ones, for bias gradients
	char err[512];
};

static int
fail(struct train_ctx *t, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	// A truncated explanation is still an explanation.
	(void)vsnprintf(t->err, sizeof(t->err), fmt, ap);
	va_end(ap);
	return -1;
}

static int
cuda_ok(struct train_ctx *t, cudaError_t e, const char *what)
{
	return e == cudaSuccess
		       ? 0
		       : fail(t, "%s: %s", what, cudaGetErrorString(e));
}

static int
blas_ok(struct train_ctx *t, cublasStatus_t s, const char *what)
{
	return s == CUBLAS_STATUS_SUCCESS
		       ? 0
		       : fail(t, "%s: cuBLAS status %d", what, (int)s);
}

static unsigned
blocks(size_t n, unsigned per)
{
	return (unsigned)((n + per - 1) / per);
}

__global__ void
gather_kernel(const uint8_t *rec, const size_t *idx, size_t bs, float *x)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= bs * TRAIN_IMG)
		return;
	size_t b = i / TRAIN_IMG, p = i % TRAIN_IMG;
	x[i] = rec[idx[b] * TRAIN_REC + 1 + p] / 255.0f - 0.5f;
}

__global__ void
bias_relu_kernel(float *h, const float *b1, size_t bs, int H)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= bs * (size_t)H)
		return;
	float a = h[i] + b1[i % H];
	h[i] = a > 0 ? a : 0;
}

// One thread per sample: softmax, loss, accuracy and d(loss)/d(logits),
// in double like the CPU path.
__global__ void
softmax_kernel(const float *z, const float *b2, const uint8_t *rec,
	       const size_t *idx, size_t bs, float *dl, double *stats)
{
	size_t b = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	double v[TRAIN_CLASSES], mx = -1e30, sum = 0;
	int c, best = 0, label;

	if (b >= bs)
		return;
	label = rec[idx[b] * TRAIN_REC];
	for (c = 0; c < TRAIN_CLASSES; c++) {
		v[c] = (double)z[b * TRAIN_CLASSES + c] + b2[c];
		mx = v[c] > mx ? v[c] : mx;
	}
	for (c = 0; c < TRAIN_CLASSES; c++) {
		sum += exp(v[c] - mx);
		best = v[c] > v[best] ? c : best;
	}
	for (c = 0; c < TRAIN_CLASSES; c++)
		dl[b * TRAIN_CLASSES + c] = (float)((exp(v[c] - mx) / sum -
						     (c == label ? 1.0 : 0.0)) /
						    (double)bs);
	atomicAdd(&stats[0], -(v[label] - mx - log(sum)));
	atomicAdd(&stats[1], best == label ? 1.0 : 0.0);
	atomicAdd(&stats[2], 1.0);
}

__global__ void
relu_mask_kernel(float *dh, const float *h, size_t n)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n && h[i] <= 0)
		dh[i] = 0;
}

__global__ void
fill_kernel(float *p, size_t n, float v)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		p[i] = v;
}

static void
g_destroy(struct train_ctx *t)
{
	if (!t)
		return;
	if (t->blas)
		cublasDestroy(t->blas);
	cudaFree(t->records);
	cudaFree(t->order);
	cudaFree(t->x);
	cudaFree(t->h);
	cudaFree(t->dl);
	cudaFree(t->dh);
	cudaFree(t->z);
	cudaFree(t->ones);
	free(t);
}

static const char *
g_error(const struct train_ctx *t)
{
	return t->err;
}

static struct train_ctx *
g_create(int hidden, size_t max_batch, const uint8_t *records, size_t n,
	 char *err, size_t errlen)
{
	struct train_ctx *t = (struct train_ctx *)calloc(1, sizeof(*t));
	size_t H = (size_t)hidden;
	int bad;

	if (!t) {
		(void)snprintf(err, errlen, "out of memory");
		return NULL;
	}
	t->hidden = hidden;
	t->max_batch = max_batch;
	bad = blas_ok(t, cublasCreate(&t->blas), "cublasCreate") ||
	      // Plain fp32 like the CPU path (no TF32), on the default
	      // stream (handle default: stream 0).
	      blas_ok(t, cublasSetMathMode(t->blas, CUBLAS_DEFAULT_MATH),
		      "cublasSetMathMode") ||
	      cuda_ok(t, cudaMalloc(&t->records, n * TRAIN_REC), "records") ||
	      cuda_ok(t,
		      cudaMemcpy(t->records, records, n * TRAIN_REC,
				 cudaMemcpyHostToDevice),
		      "records upload") ||
	      cuda_ok(t, cudaMalloc(&t->order, n * sizeof(size_t)), "order") ||
	      cuda_ok(t, cudaMalloc(&t->x, max_batch * TRAIN_IMG * 4), "x") ||
	      cuda_ok(t, cudaMalloc(&t->h, max_batch * H * 4), "h") ||
	      cuda_ok(t, cudaMalloc(&t->dh, max_batch * H * 4), "dh") ||
	      cuda_ok(t, cudaMalloc(&t->dl, max_batch * TRAIN_CLASSES * 4),
		      "dl") ||
	      cuda_ok(t, cudaMalloc(&t->z, max_batch * TRAIN_CLASSES * 4),
		      "z") ||
	      cuda_ok(t, cudaMalloc(&t->ones, max_batch * 4), "ones");
	if (!bad) {
		fill_kernel<<<blocks(max_batch, 256), 256>>>(t->ones, max_batch,
							     1.0f);
		bad = cuda_ok(t, cudaGetLastError(), "fill");
	}
	if (bad) {
		(void)snprintf(err, errlen, "%s", t->err);
		g_destroy(t);
		return NULL;
	}
	return t;
}

static int
g_set_order(struct train_ctx *t, const size_t *idx, size_t n)
{
	t->n_order = n;
	return cuda_ok(t,
		       cudaMemcpy(t->order, idx, n * sizeof(size_t),
				  cudaMemcpyHostToDevice),
		       "order upload");
}

static int
g_forward(struct train_ctx *t, size_t first, size_t bs, const float *w1,
	  const float *b1, const float *w2, const float *b2, double *stats)
{
	const float one = 1.0f, zero = 0.0f;
	const int H = t->hidden, B = (int)bs;
	const size_t *idx = t->order + first;

	if (bs > t->max_batch || first + bs > t->n_order)
		return fail(t, "batch [%zu, %zu) is outside the order (%zu)",
			    first, first + bs, t->n_order);
	t->bs = bs;
	t->first = first;
	gather_kernel<<<blocks(bs * TRAIN_IMG, 256), 256>>>(t->records, idx, bs,
							    t->x);
	// Column-major view: h^T (H x B) = w1 (3072 x H)^T x^T (3072 x B).
	if (blas_ok(t,
		    cublasSgemm(t->blas, CUBLAS_OP_T, CUBLAS_OP_N, H, B,
				TRAIN_IMG, &one, w1, TRAIN_IMG, t->x, TRAIN_IMG,
				&zero, t->h, H),
		    "layer 1 forward"))
		return -1;
	bias_relu_kernel<<<blocks(bs * (size_t)H, 256), 256>>>(t->h, b1, bs, H);
	// z^T (10 x B) = w2 (H x 10)^T h^T (H x B).
	if (blas_ok(t,
		    cublasSgemm(t->blas, CUBLAS_OP_T, CUBLAS_OP_N,
				TRAIN_CLASSES, B, H, &one, w2, H, t->h, H,
				&zero, t->z, TRAIN_CLASSES),
		    "layer 2 forward"))
		return -1;
	softmax_kernel<<<blocks(bs, 128), 128>>>(t->z, b2, t->records, idx, bs,
						 t->dl, stats);
	return cuda_ok(t, cudaGetLastError(), "forward kernels");
}

static int
g_backward2(struct train_ctx *t, float *gw2, float *gb2)
{
	const float one = 1.0f, zero = 0.0f;
	const int H = t->hidden, B = (int)t->bs;

	// gw2^T (H x 10) = h^T (H x B) dl (B x 10); gb2 = dl^T ones.
	return blas_ok(t,
		       cublasSgemm(t->blas, CUBLAS_OP_N, CUBLAS_OP_T, H,
				   TRAIN_CLASSES, B, &one, t->h, H, t->dl,
				   TRAIN_CLASSES, &zero, gw2, H),
		       "layer 2 weight gradient") ||
			       blas_ok(t,
				       cublasSgemv(t->blas, CUBLAS_OP_N,
						   TRAIN_CLASSES, B, &one,
						   t->dl, TRAIN_CLASSES,
						   t->ones, 1, &zero, gb2, 1),
				       "layer 2 bias gradient")
		       ? -1
		       : 0;
}

static int
g_backward1(struct train_ctx *t, const float *w2, float *gw1, float *gb1)
{
	const float one = 1.0f, zero = 0.0f;
	const int H = t->hidden, B = (int)t->bs;

	// dh^T (H x B) = w2^T (H x 10) dl^T (10 x B), masked by ReLU.
	if (blas_ok(t,
		    cublasSgemm(t->blas, CUBLAS_OP_N, CUBLAS_OP_N, H, B,
				TRAIN_CLASSES, &one, w2, H, t->dl,
				TRAIN_CLASSES, &zero, t->dh, H),
		    "layer 1 backward"))
		return -1;
	relu_mask_kernel<<<blocks(t->bs * (size_t)H, 256), 256>>>(
		t->dh, t->h, t->bs * (size_t)H);
	// gw1^T (3072 x H) = x^T (3072 x B) dh (B x H); gb1 = dh^T ones.
	return blas_ok(t,
		       cublasSgemm(t->blas, CUBLAS_OP_N, CUBLAS_OP_T, TRAIN_IMG,
				   H, B, &one, t->x, TRAIN_IMG, t->dh, H, &zero,
				   gw1, TRAIN_IMG),
		       "layer 1 weight gradient") ||
			       blas_ok(t,
				       cublasSgemv(t->blas, CUBLAS_OP_N, H, B,
						   &one, t->dh, H, t->ones, 1,
						   &zero, gb1, 1),
				       "layer 1 bias gradient") ||
			       cuda_ok(t, cudaGetLastError(),
				       "backward kernels")
		       ? -1
		       : 0;
}

static int
g_sgd(struct train_ctx *t, float *p, const float *g, size_t n, float lr)
{
	const float alpha = -lr;

	return blas_ok(t, cublasSaxpy(t->blas, (int)n, &alpha, g, 1, p, 1),
		       "SGD update");
}

static const struct train_compute gpu_compute = {
	"gpu",	   g_create,	g_destroy,   g_error, g_set_order,
	g_forward, g_backward2, g_backward1, g_sgd,
};

extern "C" __attribute__((visibility("default"))) const struct train_compute *
train_gpu_compute_v1(int device, char *desc, size_t desclen, char *err,
		     size_t errlen)
{
	struct cudaDeviceProp prop;
	char bus[32] = "";
	cudaError_t e;
	int n = 0;

	e = cudaGetDeviceCount(&n);
	if (e == cudaSuccess && device >= n)
		e = cudaErrorInvalidDevice;
	if (e == cudaSuccess)
		e = cudaSetDevice(device);
	if (e == cudaSuccess)
		e = cudaGetDeviceProperties(&prop, device);
	if (e == cudaSuccess)
		e = cudaDeviceGetPCIBusId(bus, sizeof(bus), device);
	if (e != cudaSuccess) {
		(void)snprintf(err, errlen, "GPU %d (of %d): %s", device, n,
			       cudaGetErrorString(e));
		return NULL;
	}
	(void)snprintf(desc, desclen, "GPU %d %s (%s)", device, prop.name, bus);
	return &gpu_compute;
}
