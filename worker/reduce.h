/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Element-wise reductions (reduce.c) for the TCP backend: pure functions
 * over caller-owned buffers, thread-safe, no failure modes (arguments are
 * checked by the caller with wk_dtype_ok/wk_op_ok). Uses only ddp.h.
 */
#ifndef DDP_WK_REDUCE_H
#define DDP_WK_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "ddp.h"

/* dst[i] = dst[i] OP src[i] for n elements (op SUM for AVG). */
void wk_reduce(void *dst, const void *src, size_t n, enum ddp_dtype dtype,
	       enum ddp_op op);
/* buf[i] /= div (AVG's final step). */
void wk_scale_div(void *buf, size_t n, enum ddp_dtype dtype, int div);
float wk_half_to_float(uint16_t h);
uint16_t wk_float_to_half(float f);
float wk_bf16_to_float(uint16_t h);
uint16_t wk_float_to_bf16(float f);
int wk_dtype_ok(int dtype);
int wk_op_ok(int op);

#endif
