/* SPDX-License-Identifier: MIT */
/*
 * The number formats of libhaccel/model/format.c for the kernels, bit for
 * bit: FP8 E4M3 (round to nearest even, saturating, NaN kept), bf16 (round
 * to nearest even), the power-of-two scale exponent and E8M0 (docs/model.md,
 * "Formats"). Everything is integer work on the bits, as in format.c, so
 * the result depends neither on the compiler contracting expressions nor on
 * flush-to-zero. The functions are __host__ __device__ so that a host
 * program can compare them with format.c over every input.
 */
#ifndef HACCEL_KERNELS_FORMAT_CUH
#define HACCEL_KERNELS_FORMAT_CUH

#include <stdint.h>
#include <string.h>

#define HAC_FP8_NAN 0x7f
#define HAC_FP8_MAXCODE 0x7e /* 448 */

__host__ __device__ __forceinline__ uint32_t hac_f2u(float x)
{
	uint32_t u;

	memcpy(&u, &x, sizeof(u));
	return u;
}

__host__ __device__ __forceinline__ float hac_u2f(uint32_t u)
{
	float x;

	memcpy(&x, &u, sizeof(x));
	return x;
}

__host__ __device__ __forceinline__ int hac_clz32(uint32_t v)
{
#ifdef __CUDA_ARCH__
	return __clz(v);
#else
	return __builtin_clz(v);
#endif
}

/*
 * fp8(x * 2^-e), what format.c computes as
 * haccel__fp8_from_float(ldexpf(x, -e)), without forming the product: the
 * exponent of x (normalised first when x is an fp32 subnormal, which the
 * scaling can bring into range) is lowered by e, then E4M3 rounding as in
 * format.c. Where ldexpf would give a normal number it is exact, so both
 * see the same significand and exponent; where it would overflow both
 * saturate; where it would underflow the value is below 2^-126 and both
 * give a signed zero. e = 0 is haccel__fp8_from_float itself.
 */
__host__ __device__ __forceinline__ uint8_t hac_fp8_scaled(float x, int e)
{
	uint32_t b = hac_f2u(x), a = b & 0x7fffffffu;
	uint8_t sign = (uint8_t)((b >> 31) << 7);
	uint32_t sig, q, rem, half, s;
	int u;

	if (a > 0x7f800000u)
		return sign | HAC_FP8_NAN;
	if (a == 0x7f800000u)
		return sign | HAC_FP8_MAXCODE;
	if (a == 0)
		return sign;
	if (a < 0x00800000u) {
		int p = 31 - hac_clz32(a);

		sig = a << (23 - p);
		u = p - 149;
	} else {
		sig = (a & 0x7fffffu) | 0x800000u;
		u = (int)(a >> 23) - 127;
	}
	u -= e;
	if (u > 8)
		return sign | HAC_FP8_MAXCODE;
	if (u < -10)
		return sign; /* below 2^-10: rounds to zero */
	s = u >= -6 ? 20 : (uint32_t)(14 - u);
	q = sig >> s;
	rem = sig & ((1u << s) - 1);
	half = 1u << (s - 1);
	if (rem > half || (rem == half && (q & 1)))
		q++;
	if (u >= -6)
		q = (uint32_t)(u + 7) * 8 + q - 8;
	if (q > HAC_FP8_MAXCODE)
		q = HAC_FP8_MAXCODE;
	return sign | (uint8_t)q;
}

__host__ __device__ __forceinline__ uint8_t hac_fp8_from_float(float x)
{
	return hac_fp8_scaled(x, 0);
}

__host__ __device__ __forceinline__ float hac_fp8_to_float(uint8_t code)
{
	uint32_t sign = (uint32_t)(code >> 7) << 31;
	uint32_t e = (code >> 3) & 0xf, m = code & 7;

	if ((code & 0x7f) == HAC_FP8_NAN)
		return hac_u2f(sign | 0x7fc00000u);
	if (e == 0) /* m * 2^-9, exact */
		return hac_u2f(sign | hac_f2u((float)m * 0x1p-9f));
	return hac_u2f(sign | ((e + 120) << 23) | (m << 20));
}

__host__ __device__ __forceinline__ uint16_t hac_bf16_from_float(float x)
{
	uint32_t b = hac_f2u(x);

	if ((b & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((b >> 16) | 0x0040);
	b += 0x7fffu + ((b >> 16) & 1);
	return (uint16_t)(b >> 16);
}

__host__ __device__ __forceinline__ float hac_bf16_to_float(uint16_t bits)
{
	return hac_u2f((uint32_t)bits << 16);
}

/*
 * The scale exponent of haccel__scale_exp from the bits: for a normal
 * amax = 1.f * 2^(E-127), frexpf gives m = 1.f / 2 and x = E - 126, and
 * m <= 0.875 is f <= 0x600000. A subnormal amax is below 2^-126, so e is
 * at most -134 and clamps to -127.
 */
__host__ __device__ __forceinline__ int hac_scale_exp(float amax)
{
	uint32_t a = hac_f2u(amax) & 0x7fffffffu;
	int x, e;

	if (a == 0 || a >= 0x7f800000u)
		return 0;
	if (a < 0x00800000u)
		return -127;
	x = (int)(a >> 23) - 126;
	e = (a & 0x7fffffu) <= 0x600000u ? x - 9 : x - 8;
	if (e < -127)
		e = -127;
	if (e > 127)
		e = 127;
	return e;
}

/* 2^e for e in [-149, 127], exact (subnormal below -126). */
__host__ __device__ __forceinline__ float hac_pow2f(int e)
{
	if (e >= -126)
		return hac_u2f((uint32_t)(e + 127) << 23);
	return hac_u2f(1u << (e + 149));
}

/* |x| when finite, else 0: what haccel__amax takes the largest of. */
__host__ __device__ __forceinline__ float hac_abs_finite(float x)
{
	uint32_t a = hac_f2u(x) & 0x7fffffffu;

	return a < 0x7f800000u ? hac_u2f(a) : 0.0f;
}

/* E8M0: e + 127; 0xff (never written) reads as NaN. */
__host__ __device__ __forceinline__ float hac_e8m0_to_float(uint8_t s)
{
	return s == 0xff ? hac_u2f(0x7fc00000u) : hac_pow2f((int)s - 127);
}

#endif /* HACCEL_KERNELS_FORMAT_CUH */
