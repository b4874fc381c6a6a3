/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Element-wise reductions for the TCP backend. Half types are widened to
 * fp32, combined, and rounded back (round to nearest even) once per step.
 */
#include <math.h>
#include <string.h>

#include "reduce.h"

float
wk_half_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f;
	uint32_t man = h & 0x3ff;
	uint32_t bits;
	float f;

	if (exp == 0x1f) {
		bits = sign | 0x7f800000u | (man << 13);
	} else if (exp != 0) {
		bits = sign | ((exp + 112) << 23) | (man << 13);
	} else if (man == 0) {
		bits = sign;
	} else {
		/* Subnormal half: value is man * 2^-24, exact in fp32. */
		f = (float)man * 0x1p-24f;
		return sign ? -f : f;
	}
	memcpy(&f, &bits, sizeof(f));
	return f;
}

uint16_t
wk_float_to_half(float f)
{
	uint32_t x, sign, man, rest;
	int32_t exp;
	uint16_t h;

	memcpy(&x, &f, sizeof(x));
	sign = (x >> 16) & 0x8000;
	exp = (int32_t)((x >> 23) & 0xff);
	man = x & 0x7fffff;
	if (exp == 0xff)
		return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
	exp = exp - 127 + 15;
	if (exp >= 0x1f)
		return (uint16_t)(sign | 0x7c00);
	if (exp <= 0) {
		/* Result is subnormal or zero: shift in the implicit bit. */
		if (exp < -10)
			return (uint16_t)sign;
		man |= 0x800000;
		rest = man & ((1u << (14 - exp)) - 1);
		h = (uint16_t)(man >> (14 - exp));
		if (rest > (1u << (13 - exp)) ||
		    (rest == (1u << (13 - exp)) && (h & 1)))
			h++;
		return (uint16_t)(sign | h);
	}
	h = (uint16_t)(sign | ((uint32_t)exp << 10) | (man >> 13));
	rest = man & 0x1fff;
	/* Carry into the exponent is the correct rounding to the next
	 * binade or to infinity. */
	if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
		h++;
	return h;
}

float
wk_bf16_to_float(uint16_t h)
{
	uint32_t bits = (uint32_t)h << 16;
	float f;

	memcpy(&f, &bits, sizeof(f));
	return f;
}

uint16_t
wk_float_to_bf16(float f)
{
	uint32_t x;

	memcpy(&x, &f, sizeof(x));
	if ((x & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((x >> 16) | 0x40);
	x += 0x7fff + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}

/* The types a reduction takes: not DDP_UINT8, which only broadcasts. */
int
wk_dtype_ok(int dtype)
{
	return dtype == DDP_FLOAT16 || dtype == DDP_FLOAT32 ||
	       dtype == DDP_FLOAT64 || dtype == DDP_BFLOAT16;
}

int
wk_op_ok(int op)
{
	return op == DDP_SUM || op == DDP_MAX || op == DDP_MIN || op == DDP_AVG;
}

/*
 * One loop per type and operation over restrict-qualified buffers, so the
 * compiler vectorises them (reduce.o is built with -O3, see module.mk):
 * the reduction runs once per received segment on the critical path of
 * the ring. Element-wise, so the result is the same as a scalar loop.
 */
#define DEFINE_REDUCE(T, name)                                         \
	static void name(T *restrict d, const T *restrict s, size_t n, \
			 enum ddp_op op)                               \
	{                                                              \
		size_t i;                                              \
		switch (op) {                                          \
		case DDP_MAX:                                          \
			for (i = 0; i < n; i++)                        \
				d[i] = s[i] > d[i] ? s[i] : d[i];      \
			break;                                         \
		case DDP_MIN:                                          \
			for (i = 0; i < n; i++)                        \
				d[i] = s[i] < d[i] ? s[i] : d[i];      \
			break;                                         \
		default:                                               \
			for (i = 0; i < n; i++)                        \
				d[i] = d[i] + s[i];                    \
			break;                                         \
		}                                                      \
	}

DEFINE_REDUCE(float, reduce_f32)
DEFINE_REDUCE(double, reduce_f64)

static void
reduce_half(uint16_t *d, const uint16_t *s, size_t n, enum ddp_op op,
	    float (*to)(uint16_t), uint16_t (*from)(float))
{
	size_t i;
	float a, b;

	for (i = 0; i < n; i++) {
		a = to(d[i]);
		b = to(s[i]);
		switch (op) {
		case DDP_MAX:
			d[i] = b > a ? s[i] : d[i];
			break;
		case DDP_MIN:
			d[i] = b < a ? s[i] : d[i];
			break;
		default:
			d[i] = from(a + b);
			break;
		}
	}
}

void
wk_reduce(void *dst, const void *src, size_t n, enum ddp_dtype dtype,
	  enum ddp_op op)
{
	switch (dtype) {
	case DDP_FLOAT32:
		reduce_f32(dst, src, n, op);
		break;
	case DDP_FLOAT64:
		reduce_f64(dst, src, n, op);
		break;
	case DDP_FLOAT16:
		reduce_half(dst, src, n, op, wk_half_to_float,
			    wk_float_to_half);
		break;
	case DDP_BFLOAT16:
		reduce_half(dst, src, n, op, wk_bf16_to_float,
			    wk_float_to_bf16);
		break;
	case DDP_UINT8: /* bytes are not reduced: wk_dtype_ok refuses them */
		break;
	}
}

void
wk_scale_div(void *buf, size_t n, enum ddp_dtype dtype, int div)
{
	uint16_t *h = buf;
	float *f = buf;
	double *d = buf;
	size_t i;

	switch (dtype) {
	case DDP_FLOAT32:
		for (i = 0; i < n; i++)
			f[i] /= (float)div;
		break;
	case DDP_FLOAT64:
		for (i = 0; i < n; i++)
			d[i] /= (double)div;
		break;
	case DDP_FLOAT16:
		for (i = 0; i < n; i++)
			h[i] = wk_float_to_half(wk_half_to_float(h[i]) /
						(float)div);
		break;
	case DDP_BFLOAT16:
		for (i = 0; i < n; i++)
			h[i] = wk_float_to_bf16(wk_bf16_to_float(h[i]) /
						(float)div);
		break;
	case DDP_UINT8:
		break;
	}
}
