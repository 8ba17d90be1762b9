// SPDX-License-Identifier: MIT
/*
 * Number formats and cache records (format.h; docs/model.md, "Formats").
 *
 * Every conversion works on the bits with integer arithmetic, so the result
 * does not depend on the floating-point environment (rounding mode, flush to
 * zero) nor on the compiler contracting expressions; the only floating-point
 * operations left are multiplications by powers of two, which are exact for
 * every value they are used on (see the notes at each one).
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "format.h"

static inline uint32_t f2u(float x)
{
	uint32_t u;

	memcpy(&u, &x, sizeof(u));
	return u;
}

static inline float u2f(uint32_t u)
{
	float x;

	memcpy(&x, &u, sizeof(x));
	return x;
}

/* ------------------------------------------------------------------------ */
/* FP8 E4M3FN                                                               */

/*
 * Round to nearest, ties to even, on the bits. A normal fp32 value is
 * sig * 2^(u - 23) with sig = 1.m in 24 bits. The E4M3 result is a whole
 * number q of quanta: 2^(u - 3) in the normal range (u >= -6), 2^-9 below
 * it (subnormals), so q = sig >> s with s = 20, or 14 - u for u < -6, and
 * the s dropped bits decide the rounding. A carry out of the mantissa
 * (q = 16) moves into the exponent field by itself: code = (u + 7) * 8 +
 * (q - 8). Anything that rounds past 448 (code 0x7e) saturates, which also
 * covers 464, the midpoint to the would-be 480: it ties to 448 (even).
 */
uint8_t haccel__fp8_from_float(float x)
{
	uint32_t b = f2u(x), a = b & 0x7fffffffu;
	uint8_t sign = (uint8_t)((b >> 31) << 7);
	uint32_t sig, q, rem, half, s;
	int u;

	if (a > 0x7f800000u)
		return sign | HACCEL__FP8_NAN;
	if (a >= 0x7f800000u)
		return sign | 0x7e; /* +-inf saturate like any overflow */
	if (a < 0x00800000u)
		return sign; /* fp32 subnormals are far below 2^-10 */
	u = (int)(a >> 23) - 127;
	if (u > 8)
		return sign | 0x7e;
	sig = (a & 0x7fffffu) | 0x800000u;
	s = u >= -6 ? 20 : (uint32_t)(14 - u);
	if (s > 24)
		return sign; /* below 2^-10: rounds to zero */
	q = sig >> s;
	rem = sig & ((1u << s) - 1);
	half = 1u << (s - 1);
	if (rem > half || (rem == half && (q & 1)))
		q++;
	if (u >= -6)
		q = (uint32_t)(u + 7) * 8 + q - 8;
	if (q > 0x7e)
		q = 0x7e;
	return sign | (uint8_t)q;
}

float haccel__fp8_to_float(uint8_t code)
{
	uint32_t sign = (uint32_t)(code >> 7) << 31;
	uint32_t e = (code >> 3) & 0xf, m = code & 7;

	if ((code & 0x7f) == HACCEL__FP8_NAN)
		return u2f(sign | 0x7fc00000u);
	if (e == 0) /* m * 2^-9: m and 2^-9 are exact, so is the product */
		return u2f(sign | f2u((float)m * 0x1p-9f));
	/* (1 + m/8) * 2^(e-7): rebias the exponent, widen the mantissa. */
	return u2f(sign | ((e + 120) << 23) | (m << 20));
}

/* ------------------------------------------------------------------------ */
/* bf16                                                                     */

uint16_t haccel__bf16_from_float(float x)
{
	uint32_t b = f2u(x);

	if ((b & 0x7fffffffu) > 0x7f800000u)
		/* Keep sign and the top of the payload; setting the quiet bit
		 * also keeps a payload that lived in the low half a NaN. */
		return (uint16_t)((b >> 16) | 0x0040);
	/* Ties to even: add just under half, plus the kept LSB. A carry into
	 * the exponent is the right answer, up to and including inf. */
	b += 0x7fffu + ((b >> 16) & 1);
	return (uint16_t)(b >> 16);
}

float haccel__bf16_to_float(uint16_t bits)
{
	return u2f((uint32_t)bits << 16);
}

/* ------------------------------------------------------------------------ */
/* Power-of-two scales                                                      */

/*
 * The smallest e with 2^e >= amax / 448, where the quotient is the exact
 * real number (no fp32 division is rounded). With amax = m * 2^x,
 * m in [0.5, 1) (frexpf is exact, subnormals included) and 448 = 0.875 *
 * 2^9: 2^e >= amax / 448 <=> 2^(e + 9 - x) >= m / 0.875, and m / 0.875 lies
 * in (0.5, 8/7), so e = x - 9 when m <= 0.875, else x - 8.
 *
 * Why exact: ceil(log2()) of the rounded fp32 quotient fl(amax / 448)
 * gives the same e for every finite amax but one (docs/model.md;
 * tests/model-format checks it around every power of two): an fp32 amax
 * above 448 * 2^k is at least a relative 2^-23.8 above it, more than the
 * 2^-24 half step of a normal quotient, so rounding cannot land the
 * quotient back on 2^k. The exception is amax = 0x1.c00002p-119, one ulp
 * above 448 * 2^-127: there the quotient is subnormal, its steps are
 * coarser, it rounds down to 2^-127 and would give -127 instead of -126.
 */
int haccel__scale_exp(float amax)
{
	float a = fabsf(amax);
	int x, e;

	if (!(a > 0.0f) || !isfinite(a))
		return 0;
	e = frexpf(a, &x) <= 0.875f ? x - 9 : x - 8;
	if (e < -127)
		e = -127;
	if (e > 127)
		e = 127;
	return e;
}

float haccel__amax(const float *x, uint32_t n)
{
	float m = 0.0f;

	for (uint32_t i = 0; i < n; i++) {
		float a = fabsf(x[i]);

		if (isfinite(a) && a > m)
			m = a;
	}
	return m;
}

/*
 * Quantize n values sharing the scale 2^e. x * 2^-e is exact whenever it is
 * an fp32 normal; when it is not it lies far below 2^-10 and encodes to a
 * signed zero whatever its fp32 rounding was, so every backend agrees.
 */
static void quantize(uint8_t *codes, const float *x, uint32_t n, int e)
{
	for (uint32_t i = 0; i < n; i++)
		codes[i] = haccel__fp8_from_float(ldexpf(x[i], -e));
}

/*
 * Decode n codes with scale s = 2^e (e in [-127, 127]). E4M3 values are
 * whole multiples of 2^-9 with 4 significant bits, so the product is exact
 * down to 2^-136. It overflows only for values of magnitude at least
 * 31/32 * 2^128, the top of fp32: at e = 120 they round to the code 2^8.
 */
static void dequantize(float *x, const uint8_t *codes, uint32_t n, float s)
{
	for (uint32_t i = 0; i < n; i++)
		x[i] = haccel__fp8_to_float(codes[i]) * s;
}

static inline void put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static inline uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

/* ------------------------------------------------------------------------ */
/* KV token record                                                          */

#define KV_LATENT 512
#define KV_TILE 128
#define KV_TILES (KV_LATENT / KV_TILE)

void haccel__kv_token_pack(uint8_t *rec, const float *latent, const float *k_pe,
			   uint32_t dr)
{
	uint8_t *rope = rec + KV_LATENT + 4 * KV_TILES;

	for (uint32_t t = 0; t < KV_TILES; t++) {
		const float *x = latent + t * KV_TILE;
		int e = haccel__scale_exp(haccel__amax(x, KV_TILE));

		quantize(rec + t * KV_TILE, x, KV_TILE, e);
		/* 2^e as fp32: exact, 2^-127 being an fp32 subnormal. */
		put_le32(rec + KV_LATENT + 4 * t, f2u(ldexpf(1.0f, e)));
	}
	for (uint32_t i = 0; i < dr; i++) {
		uint16_t h = haccel__bf16_from_float(k_pe[i]);

		rope[2 * i] = (uint8_t)h;
		rope[2 * i + 1] = (uint8_t)(h >> 8);
	}
}

void haccel__kv_token_unpack(const uint8_t *rec, float *latent, float *k_pe,
			     uint32_t dr)
{
	const uint8_t *rope = rec + KV_LATENT + 4 * KV_TILES;

	for (uint32_t t = 0; t < KV_TILES; t++)
		dequantize(latent + t * KV_TILE, rec + t * KV_TILE, KV_TILE,
			   u2f(get_le32(rec + KV_LATENT + 4 * t)));
	for (uint32_t i = 0; i < dr; i++)
		k_pe[i] = haccel__bf16_to_float((uint16_t)(rope[2 * i] |
							   rope[2 * i + 1] << 8));
}

/* ------------------------------------------------------------------------ */
/* MXFP8 and the index-key record                                           */

#define MX_BLOCK 32

void haccel__mxfp8_pack(uint8_t *codes, uint8_t *scales, const float *x,
			uint32_t n)
{
	for (uint32_t b = 0; b < n / MX_BLOCK; b++) {
		const float *xb = x + b * MX_BLOCK;
		int e = haccel__scale_exp(haccel__amax(xb, MX_BLOCK));

		quantize(codes + b * MX_BLOCK, xb, MX_BLOCK, e);
		scales[b] = (uint8_t)(e + 127); /* 0..254: never the NaN 0xff */
	}
}

void haccel__mxfp8_unpack(float *x, const uint8_t *codes,
			  const uint8_t *scales, uint32_t n)
{
	for (uint32_t b = 0; b < n / MX_BLOCK; b++) {
		/* E8M0 0xff is NaN, and so is every value it scales (OCP MX). */
		float s = scales[b] == 0xff ? u2f(0x7fc00000u) :
					      ldexpf(1.0f, (int)scales[b] - 127);

		dequantize(x + b * MX_BLOCK, codes + b * MX_BLOCK, MX_BLOCK, s);
	}
}

void haccel__index_k_pack(uint8_t *rec, const float *x)
{
	haccel__mxfp8_pack(rec, rec + 128, x, 128);
}

void haccel__index_k_unpack(const uint8_t *rec, float *x)
{
	haccel__mxfp8_unpack(x, rec, rec + 128, 128);
}
