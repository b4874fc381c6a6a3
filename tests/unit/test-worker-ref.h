/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The serial reference of the allreduce tests (flat and hierarchical):
 * each rank's input, element access in every dtype, and the expected
 * result of element i rounded as the library rounds.
 */
#ifndef TEST_WORKER_REF_H
#define TEST_WORKER_REF_H

#include <stddef.h>
#include <stdint.h>

#include "ddp.h"
#include "reduce.h"

/* Small integers: every partial sum is exact in every type. */
static inline double
input(int rank, size_t i, int salt)
{
	return (double)((rank * 131 + (int)(i % 1000003) * 7 + salt) % 17) - 8;
}

static inline void
store(void *buf, size_t i, enum ddp_dtype t, double v)
{
	switch (t) {
	case DDP_FLOAT32:
		((float *)buf)[i] = (float)v;
		break;
	case DDP_FLOAT64:
		((double *)buf)[i] = v;
		break;
	case DDP_FLOAT16:
		((uint16_t *)buf)[i] = wk_float_to_half((float)v);
		break;
	case DDP_BFLOAT16:
		((uint16_t *)buf)[i] = wk_float_to_bf16((float)v);
		break;
	case DDP_UINT8:
		((uint8_t *)buf)[i] = (uint8_t)(v + 128);
		break;
	}
}

static inline double
load(const void *buf, size_t i, enum ddp_dtype t)
{
	switch (t) {
	case DDP_FLOAT32:
		return ((const float *)buf)[i];
	case DDP_FLOAT64:
		return ((const double *)buf)[i];
	case DDP_FLOAT16:
		return wk_half_to_float(((const uint16_t *)buf)[i]);
	case DDP_BFLOAT16:
		return wk_bf16_to_float(((const uint16_t *)buf)[i]);
	case DDP_UINT8:
		return (double)((const uint8_t *)buf)[i] - 128;
	}
	return 0;
}

/* The serial reference of element i, rounded as the library rounds. */
static inline double
reference(int size, size_t i, int salt, enum ddp_dtype t, enum ddp_op op)
{
	double acc = input(0, i, salt), v;
	uint8_t tmp[8];
	int r;

	for (r = 1; r < size; r++) {
		v = input(r, i, salt);
		if (op == DDP_MAX)
			acc = v > acc ? v : acc;
		else if (op == DDP_MIN)
			acc = v < acc ? v : acc;
		else
			acc += v;
	}
	if (op == DDP_AVG) {
		if (t == DDP_FLOAT64)
			acc = acc / size;
		else
			acc = (float)acc / (float)size;
	}
	store(tmp, 0, t, acc);
	return load(tmp, 0, t);
}

/* Rank r's random-looking float input of element i (for the bitwise
 * agreement checks): the same on every call, about -50 to 50. */
static inline float
random_input(size_t i, int r)
{
	uint32_t x = (uint32_t)(i * 2654435761u + (uint32_t)r * 40503u);

	return (float)(x % 100000) / 1000.0f - 50.0f;
}

#endif
