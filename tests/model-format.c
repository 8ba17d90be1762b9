// SPDX-License-Identifier: MIT
/* Formats: every FP8 E4M3 code and rounding boundary, bf16 RNE, exact power-of-two scales, the KV and index-key records, MXFP8 error bounds. */
#include "config.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ktap.h"
#include "model/format.h"

/* Stop a failing case after this many reports: one broken rule would
 * otherwise print thousands of lines. */
#define MAX_REPORTS 20

#define CHECK(cond, fmt, ...)                                                 \
	do {                                                                  \
		if (!(cond)) {                                                \
			ktap_fail_at(__FILE__, __LINE__, "%s: " fmt, #cond,   \
				     __VA_ARGS__);                            \
			if (ktap_failures() >= MAX_REPORTS)                   \
				ktap_end();                                   \
		}                                                             \
	} while (0)

static uint32_t f2u(float x)
{
	uint32_t u;

	memcpy(&u, &x, sizeof(u));
	return u;
}

static float u2f(uint32_t u)
{
	float x;

	memcpy(&x, &u, sizeof(x));
	return x;
}

/* ------------------------------------------------------------------------ */
/* References written from the format definitions, not from format.c        */

/* The documented value of an E4M3 code, NaN for S.1111.111. */
static double fp8_formula(unsigned int code)
{
	unsigned int e = (code >> 3) & 15, m = code & 7;
	double v;

	if ((code & 0x7f) == 0x7f)
		return NAN;
	v = e ? (1.0 + m / 8.0) * pow(2.0, (double)e - 7.0) : m * pow(2.0, -9.0);
	return code & 0x80 ? -v : v;
}

static double fp8_table[256];

static double fp8_value(unsigned int code)
{
	if (fp8_table[0x38] != 1.0)
		for (unsigned int c = 0; c < 256; c++)
			fp8_table[c] = fp8_formula(c);
	return fp8_table[code & 0xff];
}

/* Nearest of the 127 non-negative finite values by exhaustive search, ties
 * to the even code; past 448 saturate; NaN keeps its sign. */
static uint8_t fp8_ref(float x)
{
	uint8_t sign = signbit(x) ? 0x80 : 0;
	double a = fabs((double)x), best = INFINITY;
	unsigned int code = 0;

	if (isnan(x))
		return sign | 0x7f;
	if (a >= 448.0)
		return sign | 0x7e;
	for (unsigned int c = 0; c < 0x7f; c++) {
		double d = fabs(fp8_value(c) - a);

		if (d < best || (d == best && !(c & 1))) {
			best = d;
			code = c;
		}
	}
	return sign | (uint8_t)code;
}

/* bf16 by comparing the distances to the two neighbours in double (exact
 * for fp32 inputs); the step past the largest bf16 is 2^128, so values from
 * the midpoint up round to inf as IEEE 754 says. */
static uint16_t bf16_ref(float x)
{
	uint32_t b = f2u(x), t = b >> 16;
	double a = fabs((double)x), lo, hi;

	if (isnan(x))
		return (uint16_t)(t | 0x40);
	if (isinf(x))
		return (uint16_t)t;
	lo = fabs((double)u2f(t << 16));
	hi = (t & 0x7fff) == 0x7f7f ? ldexp(1.0, 128) :
				      fabs((double)u2f((t + 1) << 16));
	if (a - lo > hi - a || (a - lo == hi - a && (t & 1)))
		t++;
	return (uint16_t)t;
}

/* A random float with an exponent in [lo, hi], a random mantissa and sign. */
static float rand_float(int lo, int hi)
{
	float m = 1.0f + (float)ktap_rand_below(1u << 23) * 0x1p-23f;
	float x = ldexpf(m, lo + (int)ktap_rand_below((uint64_t)(hi - lo + 1)));

	return ktap_rand_below(2) ? -x : x;
}

/* ------------------------------------------------------------------------ */
/* FP8 E4M3                                                                 */

static void t_fp8_decode_all(void)
{
	for (unsigned int c = 0; c < 256; c++) {
		float v = haccel__fp8_to_float((uint8_t)c);
		double want = fp8_value(c);

		if (isnan(want)) {
			CHECK(isnan(v), "code 0x%02x gives %g", c, v);
		} else {
			CHECK((double)v == want, "code 0x%02x gives %a, want %a",
			      c, v, want);
		}
		CHECK(!!signbit(v) == !!(c & 0x80), "code 0x%02x sign", c);
	}
	/* The landmarks of the format, spelled out. */
	KTAP_EXPECT(haccel__fp8_to_float(0x7e) == 448.0f);
	KTAP_EXPECT(haccel__fp8_to_float(0xfe) == -448.0f);
	KTAP_EXPECT(haccel__fp8_to_float(0x08) == 0x1p-6f);
	KTAP_EXPECT(haccel__fp8_to_float(0x07) == 7 * 0x1p-9f);
	KTAP_EXPECT(haccel__fp8_to_float(0x01) == 0x1p-9f);
	KTAP_EXPECT(haccel__fp8_to_float(0x38) == 1.0f);
	KTAP_EXPECT(f2u(haccel__fp8_to_float(0x80)) == 0x80000000u);
	KTAP_EXPECT(f2u(haccel__fp8_to_float(0x00)) == 0);
	KTAP_EXPECT(haccel__fp8_to_float(0x78) == 256.0f);
}

static void t_fp8_reencode_all(void)
{
	/* Every code comes back: NaN keeps its sign (0x7f, 0xff) and -0
	 * stays 0x80. */
	for (unsigned int c = 0; c < 256; c++) {
		uint8_t back = haccel__fp8_from_float(haccel__fp8_to_float((uint8_t)c));

		CHECK(back == c, "code 0x%02x -> 0x%02x", c, back);
	}
}

/* Each pair of adjacent representable values a < b, both signs: a, b, the
 * midpoint (ties to the even code) and the floats either side of it. */
static void t_fp8_rounding_boundaries(void)
{
	unsigned int pairs = 0;

	for (unsigned int c = 0; c < 0x7e; c++) {
		float a = haccel__fp8_to_float((uint8_t)c);
		float b = haccel__fp8_to_float((uint8_t)(c + 1));
		float mid = (a + b) / 2; /* exact: few significant bits */
		uint8_t even = (c & 1) ? (uint8_t)(c + 1) : (uint8_t)c;

		KTAP_ASSERT(a < b);
		KTAP_ASSERT((double)mid == ((double)a + (double)b) / 2);
		for (int neg = 0; neg < 2; neg++) {
			float s = neg ? -1.0f : 1.0f;
			uint8_t sb = neg ? 0x80 : 0;

			CHECK(haccel__fp8_from_float(s * a) == (sb | c), "a=%a", s * a);
			CHECK(haccel__fp8_from_float(s * b) == (sb | (c + 1)), "b=%a", s * b);
			CHECK(haccel__fp8_from_float(s * mid) == (sb | even), "mid=%a",
			      s * mid);
			CHECK(haccel__fp8_from_float(s * nextafterf(mid, -INFINITY)) ==
				      (sb | c),
			      "below mid %a", mid);
			CHECK(haccel__fp8_from_float(s * nextafterf(mid, INFINITY)) ==
				      (sb | (c + 1)),
			      "above mid %a", mid);
			/* A little further off the midpoint still rounds to
			 * the nearer side. */
			CHECK(haccel__fp8_from_float(s * (a + (b - a) * 0.25f)) ==
				      (sb | c),
			      "quarter %a", a);
			CHECK(haccel__fp8_from_float(s * (a + (b - a) * 0.75f)) ==
				      (sb | (c + 1)),
			      "three quarters %a", a);
		}
		pairs++;
	}
	KTAP_EXPECT_EQ(pairs, 126);
}

static void t_fp8_saturation(void)
{
	static const float big[] = {
		448.0f, 449.0f, 456.0f, 463.99997f, 464.0f, 480.0f, 500.0f,
		512.0f, 1e6f, FLT_MAX, INFINITY,
	};

	for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++) {
		CHECK(haccel__fp8_from_float(big[i]) == 0x7e, "%a", big[i]);
		CHECK(haccel__fp8_from_float(-big[i]) == 0xfe, "%a", -big[i]);
	}
	/* 464 is the midpoint to the would-be 480: it ties to 448 (even), and
	 * the next float above it rounds to 480, which saturates. */
	KTAP_EXPECT_EQ(haccel__fp8_from_float(nextafterf(464.0f, INFINITY)), 0x7e);
	KTAP_EXPECT_EQ(haccel__fp8_from_float(nextafterf(448.0f, 0.0f)), 0x7e);
	/* 432 is the midpoint of 416 (odd) and 448 (even). */
	KTAP_EXPECT_EQ(haccel__fp8_from_float(432.0f), 0x7e);
	KTAP_EXPECT_EQ(haccel__fp8_from_float(nextafterf(432.0f, 0.0f)), 0x7d);
	/* NaN: 0x7f with its sign, whatever the payload. */
	KTAP_EXPECT_EQ(haccel__fp8_from_float(NAN), 0x7f);
	KTAP_EXPECT_EQ(haccel__fp8_from_float(-NAN), 0xff);
	KTAP_EXPECT_EQ(haccel__fp8_from_float(u2f(0x7f800001u)), 0x7f);
	KTAP_EXPECT_EQ(haccel__fp8_from_float(u2f(0xffbfffffu)), 0xff);
}

static void t_fp8_subnormals(void)
{
	/* 2^-10 is half the smallest subnormal: a tie, to 0 (even). */
	KTAP_EXPECT_EQ(haccel__fp8_from_float(0x1p-10f), 0x00);
	KTAP_EXPECT_EQ(haccel__fp8_from_float(-0x1p-10f), 0x80);
	KTAP_EXPECT_EQ(haccel__fp8_from_float(nextafterf(0x1p-10f, INFINITY)), 0x01);
	KTAP_EXPECT_EQ(haccel__fp8_from_float(nextafterf(0x1p-10f, 0.0f)), 0x00);
	KTAP_EXPECT_EQ(haccel__fp8_from_float(-nextafterf(0x1p-10f, INFINITY)), 0x81);
	/* 3 * 2^-10 ties 1 and 2 quanta: to 2 (even). 5 * 2^-10: to 2. */
	KTAP_EXPECT_EQ(haccel__fp8_from_float(3 * 0x1p-10f), 0x02);
	KTAP_EXPECT_EQ(haccel__fp8_from_float(5 * 0x1p-10f), 0x02);
	KTAP_EXPECT_EQ(haccel__fp8_from_float(7 * 0x1p-10f), 0x04);
	/* The top subnormal 7 * 2^-9 and the midpoint to 2^-6 (ties to 2^-6,
	 * code 8, even). */
	KTAP_EXPECT_EQ(haccel__fp8_from_float(7 * 0x1p-9f), 0x07);
	KTAP_EXPECT_EQ(haccel__fp8_from_float(15 * 0x1p-10f), 0x08);
	KTAP_EXPECT_EQ(haccel__fp8_from_float(0x1p-6f), 0x08);
	/* Far below: 2^-11, fp32's smallest normal and subnormals, zeros. */
	KTAP_EXPECT_EQ(haccel__fp8_from_float(0x1p-11f), 0x00);
	KTAP_EXPECT_EQ(haccel__fp8_from_float(FLT_MIN), 0x00);
	KTAP_EXPECT_EQ(haccel__fp8_from_float(-FLT_MIN), 0x80);
	KTAP_EXPECT_EQ(haccel__fp8_from_float(u2f(1)), 0x00);
	KTAP_EXPECT_EQ(haccel__fp8_from_float(u2f(0x80000001u)), 0x80);
	KTAP_EXPECT_EQ(haccel__fp8_from_float(0.0f), 0x00);
	KTAP_EXPECT_EQ(haccel__fp8_from_float(-0.0f), 0x80);
}

/* Random inputs against the exhaustive-search reference: half in the FP8
 * range (exponents -12..9), half random bit patterns. */
static void t_fp8_random_vs_reference(void)
{
	for (unsigned int i = 0; i < 40000; i++) {
		float x = (i & 1) ? u2f((uint32_t)ktap_rand()) : rand_float(-12, 9);
		uint8_t got = haccel__fp8_from_float(x), want = fp8_ref(x);

		CHECK(got == want, "%a: 0x%02x, want 0x%02x", x, got, want);
	}
}

/* ------------------------------------------------------------------------ */
/* bf16                                                                     */

static void check_bf16(float x)
{
	uint16_t got = haccel__bf16_from_float(x), want = bf16_ref(x);

	CHECK(got == want, "%a (0x%08x): 0x%04x, want 0x%04x", x, f2u(x), got, want);
}

/* Every exponent (subnormals, inf and NaN included), both signs: the
 * truncation point, the midpoint and its neighbours, for kept mantissas
 * of either parity, including the all-ones carry into the exponent. */
static void t_bf16_every_exponent(void)
{
	static const uint32_t keep[] = { 0x00, 0x01, 0x02, 0x3f, 0x40, 0x7e, 0x7f };
	static const uint32_t low[] = { 0x0000, 0x0001, 0x7fff, 0x8000, 0x8001,
					0xfffe, 0xffff };

	for (uint32_t e = 0; e < 256; e++)
		for (size_t k = 0; k < sizeof(keep) / sizeof(keep[0]); k++)
			for (size_t l = 0; l < sizeof(low) / sizeof(low[0]); l++)
				for (uint32_t s = 0; s < 2; s++)
					check_bf16(u2f(s << 31 | e << 23 |
						       keep[k] << 16 | low[l]));
	/* Spelled out: ties to even both ways, overflow to inf, quiet NaN. */
	KTAP_EXPECT_EQ(haccel__bf16_from_float(u2f(0x3f808000u)), 0x3f80);
	KTAP_EXPECT_EQ(haccel__bf16_from_float(u2f(0x3f818000u)), 0x3f82);
	KTAP_EXPECT_EQ(haccel__bf16_from_float(u2f(0x3f808001u)), 0x3f81);
	KTAP_EXPECT_EQ(haccel__bf16_from_float(FLT_MAX), 0x7f80);
	KTAP_EXPECT_EQ(haccel__bf16_from_float(u2f(0x7f7f7fffu)), 0x7f7f);
	KTAP_EXPECT_EQ(haccel__bf16_from_float(-INFINITY), 0xff80);
	KTAP_EXPECT_EQ(haccel__bf16_from_float(u2f(0x7f800001u)), 0x7fc0);
	KTAP_EXPECT_EQ(haccel__bf16_from_float(u2f(0xff800001u)), 0xffc0);
	KTAP_EXPECT_EQ(haccel__bf16_from_float(u2f(0x7fa12345u)), 0x7fe1);
	KTAP_EXPECT_EQ(haccel__bf16_from_float(-0.0f), 0x8000);
}

static void t_bf16_random(void)
{
	for (unsigned int i = 0; i < (1u << 18); i++) {
		float x = u2f((uint32_t)ktap_rand());
		uint16_t h = haccel__bf16_from_float(x);

		check_bf16(x);
		/* Widening is exact: the bits shifted up. */
		CHECK(f2u(haccel__bf16_to_float(h)) == (uint32_t)h << 16, "0x%04x", h);
		/* Rounding moves at most half a bf16 ulp. */
		if (isfinite(x) && isfinite(haccel__bf16_to_float(h))) {
			double err = fabs((double)haccel__bf16_to_float(h) - x);
			int ex;

			frexp(x, &ex);
			CHECK(err <= ldexp(1.0, (ex < -125 ? -125 : ex) - 9), "%a", x);
		}
	}
}

/* ------------------------------------------------------------------------ */
/* Power-of-two scales                                                      */

/*
 * The definition, checked exactly: 448 * 2^e is exact in double, so these
 * comparisons have no rounding. Holds for every finite amax > 0, except
 * that below 448 * 2^-128 e is clamped to -127 and only the upper bound is
 * required.
 */
static void check_scale_bound(float amax)
{
	int e = haccel__scale_exp(amax);
	double a = (double)amax;

	if (amax == 0.0f)
		return;
	CHECK(e >= -127 && e <= 127, "amax %a: e %d", amax, e);
	CHECK(ldexp(448.0, e) >= a, "amax %a: 2^%d < amax/448", amax, e);
	if (e > -127)
		CHECK(ldexp(448.0, e - 1) < a, "amax %a: 2^%d >= amax/448", amax, e - 1);
	else
		CHECK(a <= ldexp(448.0, -127), "amax %a clamped", amax);
	CHECK(haccel__scale_exp(-amax) == e, "amax %a: sign", amax);
}

/* ceil(log2(q)) of a positive fp32 q, exactly, from its bits. */
static int ceil_log2_bits(float q)
{
	int ex;
	float m = frexpf(q, &ex);

	return m == 0.5f ? ex - 1 : ex;
}

/* ceil(log2(q)) clamped like e; an underflowed quotient is clamped too. */
static int clamped_ceil_log2(float q)
{
	int e = q > 0.0f ? ceil_log2_bits(q) : -127;

	return e < -127 ? -127 : e;
}

/* The one amax where the fp32 quotient disagrees (see format.c). */
#define SCALE_EXP_FP32_EXCEPTION 0x1.c00002p-119f

/*
 * What a kernel computes in fp32: the quotient amax / 448 rounded to
 * nearest (the fp32 division) and, as DeepSeek's act_quant does, amax
 * times fp32(1/448). Both give our e for every finite amax > 0 but one:
 * one ulp above 448 * 2^-127 the exact quotient is 2^-127 (1 + 2^-23.8),
 * and fp32 has only subnormal steps of 2^-149 there, so it rounds down to
 * 2^-127 and ceil(log2) says -127 where e is -126.
 */
static void check_scale_fp32(float amax)
{
	volatile float d = 448.0f, r = 1.0f / 448.0f;
	float q1 = amax / d, q2 = amax * r;
	int e = haccel__scale_exp(amax);

	if (amax == 0.0f || fabsf(amax) == SCALE_EXP_FP32_EXCEPTION)
		return;
	CHECK(clamped_ceil_log2(q1) == e, "amax %a: division gives %d, e %d", amax,
	      clamped_ceil_log2(q1), e);
	CHECK(clamped_ceil_log2(q2) == e, "amax %a: reciprocal gives %d, e %d", amax,
	      clamped_ceil_log2(q2), e);
}

static void t_scale_exp_powers(void)
{
	/* amax = 448 * 2^k: exactly e = k; one ulp above: k + 1. */
	for (int k = -155; k <= 119; k++) {
		float a = ldexpf(448.0f, k);
		int want = k < -127 ? -127 : k;

		KTAP_ASSERT((double)a == ldexp(448.0, k));
		CHECK(haccel__scale_exp(a) == want, "448*2^%d: %d", k,
		      haccel__scale_exp(a));
		if (k >= -127 && k < 119)
			CHECK(haccel__scale_exp(nextafterf(a, INFINITY)) == k + 1,
			      "448*2^%d+: %d", k, haccel__scale_exp(nextafterf(a, INFINITY)));
		CHECK(haccel__scale_exp(nextafterf(a, 0.0f)) == want, "448*2^%d-", k);
		check_scale_bound(a);
		check_scale_bound(nextafterf(a, INFINITY));
		check_scale_bound(nextafterf(a, 0.0f));
		check_scale_fp32(a);
		check_scale_fp32(nextafterf(a, INFINITY));
		check_scale_fp32(nextafterf(a, 0.0f));
	}
	/* amax = 2^j, and its neighbours, over the whole fp32 range. */
	for (int j = -149; j <= 127; j++) {
		float a = ldexpf(1.0f, j);

		check_scale_bound(a);
		check_scale_bound(nextafterf(a, INFINITY));
		check_scale_bound(nextafterf(a, 0.0f));
		check_scale_fp32(a);
		check_scale_fp32(nextafterf(a, INFINITY));
		check_scale_fp32(nextafterf(a, 0.0f));
	}
	/* The exception above: exact e is -126, the fp32 quotient says -127. */
	{
		volatile float a = SCALE_EXP_FP32_EXCEPTION, d = 448.0f;

		KTAP_EXPECT(a == nextafterf(ldexpf(448.0f, -127), INFINITY));
		KTAP_EXPECT_EQ(haccel__scale_exp(a), -126);
		KTAP_EXPECT(a / d == 0x1p-127f);
		KTAP_EXPECT_EQ(clamped_ceil_log2(a / d), -127);
	}
	/* Landmarks. */
	KTAP_EXPECT_EQ(haccel__scale_exp(448.0f), 0);
	KTAP_EXPECT_EQ(haccel__scale_exp(449.0f), 1);
	KTAP_EXPECT_EQ(haccel__scale_exp(1.0f), -8);  /* 1/448 in (2^-9, 2^-8] */
	KTAP_EXPECT_EQ(haccel__scale_exp(3.5f), -7);  /* exactly 2^-7 */
	KTAP_EXPECT_EQ(haccel__scale_exp(FLT_MAX), 120);
	KTAP_EXPECT_EQ(haccel__scale_exp(u2f(1)), -127);
	KTAP_EXPECT_EQ(haccel__scale_exp(0.0f), 0);
	KTAP_EXPECT_EQ(haccel__scale_exp(-0.0f), 0);
	KTAP_EXPECT_EQ(haccel__scale_exp(INFINITY), 0);
	KTAP_EXPECT_EQ(haccel__scale_exp(-INFINITY), 0);
	KTAP_EXPECT_EQ(haccel__scale_exp(NAN), 0);
}

/* In every binade (subnormals included) the mantissas nearest the step at
 * 0.875 and at the binade's ends, then random finite values. */
static void t_scale_exp_exhaustive_steps(void)
{
	for (uint32_t e = 0; e < 255; e++) {
		for (uint32_t d = 0; d < 128; d++) {
			uint32_t step = 0x600000u; /* mantissa of 1.75 */

			check_scale_bound(u2f(e << 23 | (step + d)));
			check_scale_bound(u2f(e << 23 | (step - 1 - d)));
			check_scale_bound(u2f(e << 23 | d));
			check_scale_bound(u2f(e << 23 | (0x7fffffu - d)));
			check_scale_fp32(u2f(e << 23 | (step + d)));
			check_scale_fp32(u2f(e << 23 | (step - 1 - d)));
		}
	}
	for (unsigned int i = 0; i < 200000; i++) {
		float a = u2f((uint32_t)ktap_rand() & 0x7fffffffu);

		if (!isfinite(a) || a == 0.0f)
			continue;
		check_scale_bound(a);
		check_scale_fp32(a);
	}
}

static void t_amax(void)
{
	float x[8] = { 1.0f, -3.0f, NAN, 2.0f, -INFINITY, INFINITY, -0.0f, 2.5f };
	float z[3] = { NAN, INFINITY, -NAN };

	KTAP_EXPECT(haccel__amax(x, 8) == 3.0f);
	KTAP_EXPECT(haccel__amax(x, 1) == 1.0f);
	KTAP_EXPECT(haccel__amax(x, 0) == 0.0f);
	KTAP_EXPECT(haccel__amax(z, 3) == 0.0f);
	KTAP_EXPECT(f2u(haccel__amax(x + 6, 1)) == 0); /* |-0| is +0 */
}

/* ------------------------------------------------------------------------ */
/* Records                                                                  */

/* The latent of a test record: each tile its own magnitude, so the four
 * scales differ (one tile is tiny enough to clamp at 2^-127, one is 0). */
static void fill_latent(float *lat, int variant)
{
	static const int tile_exp[2][4] = { { -3, 5, 12, -30 }, { 0, -140, 100, -1000 } };

	for (int t = 0; t < 4; t++)
		for (int i = 0; i < 128; i++) {
			int ex = tile_exp[variant][t];

			lat[t * 128 + i] = ex == -1000 ? 0.0f :
						       rand_float(ex - 6, ex);
		}
}

static void check_kv_record(uint32_t dr, int variant)
{
	uint32_t bytes = haccel__kv_token_bytes(dr);
	uint8_t rec[1024];
	float lat[512], pe[64], lat2[512], pe2[64];

	KTAP_ASSERT(dr <= 64);
	fill_latent(lat, variant);
	for (uint32_t i = 0; i < dr; i++)
		pe[i] = rand_float(-8, 8);
	memset(rec, 0xa5, sizeof(rec));
	haccel__kv_token_pack(rec, lat, pe, dr);
	/* Nothing past the record is written. */
	for (uint32_t i = bytes; i < sizeof(rec); i++)
		CHECK(rec[i] == 0xa5, "byte %u written", i);

	for (int t = 0; t < 4; t++) {
		int e = haccel__scale_exp(haccel__amax(lat + t * 128, 128));
		uint32_t sb = (uint32_t)rec[512 + 4 * t] | (uint32_t)rec[513 + 4 * t] << 8 |
			      (uint32_t)rec[514 + 4 * t] << 16 |
			      (uint32_t)rec[515 + 4 * t] << 24;

		/* [512, 528): the tile scale 2^e, fp32 little-endian. */
		CHECK((double)u2f(sb) == ldexp(1.0, e), "tile %d scale %a, e %d", t,
		      u2f(sb), e);
		for (int i = 0; i < 128; i++) {
			int k = t * 128 + i;
			uint8_t want = fp8_ref((float)ldexp(lat[k], -e));

			/* [0, 512): E4M3 of the value divided by its tile's
			 * scale; unpacking gives that code's value times 2^e,
			 * exactly. */
			CHECK(rec[k] == want, "latent %d: 0x%02x, want 0x%02x", k,
			      rec[k], want);
		}
	}
	/* [528, 528 + 2 dr): bf16 little-endian. */
	for (uint32_t i = 0; i < dr; i++) {
		uint16_t h = haccel__bf16_from_float(pe[i]);

		CHECK(rec[528 + 2 * i] == (h & 0xff) && rec[529 + 2 * i] == (h >> 8),
		      "rope %u", i);
	}

	haccel__kv_token_unpack(rec, lat2, pe2, dr);
	for (int k = 0; k < 512; k++) {
		int e = haccel__scale_exp(haccel__amax(lat + (k / 128) * 128, 128));
		double want = fp8_value(rec[k]) * ldexp(1.0, e);

		CHECK((double)lat2[k] == want, "latent %d: %a, want %a", k, lat2[k], want);
		/* And it is close to the input (see t_mxfp8_error_bound). */
		CHECK(fabs((double)lat2[k] - lat[k]) <=
			      fmax(ldexp(haccel__amax(lat + (k / 128) * 128, 128), -4),
				   ldexp(1.0, e - 10)),
		      "latent %d error", k);
	}
	for (uint32_t i = 0; i < dr; i++)
		CHECK(f2u(pe2[i]) == (uint32_t)haccel__bf16_from_float(pe[i]) << 16,
		      "rope %u", i);
}

static void t_kv_record(void)
{
	KTAP_EXPECT_EQ(haccel__kv_token_bytes(64), 656);
	KTAP_EXPECT_EQ(haccel__kv_token_bytes(0), 528);
	KTAP_EXPECT_EQ(haccel__kv_token_bytes(32), 592);
	for (int v = 0; v < 2; v++) {
		check_kv_record(64, v);
		check_kv_record(0, v);
		check_kv_record(7, v);
	}
}

/* Special values in a KV record: NaN and inf do not set the scale; they
 * become NaN and +-448 * 2^e; an all-zero tile has scale 1. */
static void t_kv_record_specials(void)
{
	float lat[512], back[512], pe[2] = { NAN, -INFINITY }, pe2[2];
	uint8_t rec[532];

	for (int i = 0; i < 512; i++)
		lat[i] = (float)(i % 7) - 3.0f;
	for (int i = 256; i < 384; i++)
		lat[i] = 0.0f;
	lat[5] = NAN;
	lat[6] = INFINITY;
	lat[130] = -NAN;
	haccel__kv_token_pack(rec, lat, pe, 2);
	/* Tile 0: amax 3 (NaN and inf ignored): e = -7. */
	KTAP_EXPECT(rec[515] == 0x3c && rec[514] == 0x00); /* 2^-7 = 0x3c000000 */
	KTAP_EXPECT_EQ(rec[5], 0x7f);
	KTAP_EXPECT_EQ(rec[6], 0x7e);
	KTAP_EXPECT_EQ(rec[130], 0xff);
	/* Tile 2, all zero: scale 1.0f = 0x3f800000, codes 0. */
	KTAP_EXPECT(rec[520] == 0 && rec[521] == 0 && rec[522] == 0x80 && rec[523] == 0x3f);
	for (int i = 256; i < 384; i++)
		CHECK(rec[i] == 0, "zero tile %d", i);
	haccel__kv_token_unpack(rec, back, pe2, 2);
	KTAP_EXPECT(isnan(back[5]) && isnan(back[130]));
	KTAP_EXPECT(back[6] == 448.0f * 0x1p-7f);
	KTAP_EXPECT(isnan(pe2[0]));
	KTAP_EXPECT(pe2[1] == -INFINITY);
	for (int i = 0; i < 512; i++)
		if (!isnan(lat[i]) && !isinf(lat[i]))
			CHECK(back[i] == lat[i], "%d: small integers are exact", i);
}

static void t_index_k_record(void)
{
	uint8_t rec[HACCEL__INDEX_K_BYTES + 16];
	float x[128], back[128];

	KTAP_EXPECT_EQ(HACCEL__INDEX_K_BYTES, 132);
	for (int round = 0; round < 200; round++) {
		for (int b = 0; b < 4; b++) {
			int ex = (int)ktap_rand_below(60) - 30;

			for (int i = 0; i < 32; i++)
				x[b * 32 + i] = rand_float(ex - 10, ex);
		}
		memset(rec, 0xa5, sizeof(rec));
		haccel__index_k_pack(rec, x);
		for (size_t i = HACCEL__INDEX_K_BYTES; i < sizeof(rec); i++)
			CHECK(rec[i] == 0xa5, "byte %zu written", i);
		haccel__index_k_unpack(rec, back);
		for (int b = 0; b < 4; b++) {
			int e = haccel__scale_exp(haccel__amax(x + b * 32, 32));

			/* [128, 132): one E8M0 byte e + 127 per block of 32. */
			CHECK(rec[128 + b] == e + 127, "block %d: 0x%02x, e %d", b,
			      rec[128 + b], e);
			for (int i = b * 32; i < b * 32 + 32; i++) {
				CHECK(rec[i] == fp8_ref((float)ldexp(x[i], -e)),
				      "value %d", i);
				CHECK((double)back[i] == fp8_value(rec[i]) * ldexp(1.0, e),
				      "value %d: %a", i, back[i]);
			}
		}
	}
}

/*
 * MXFP8 error bound. With y = x / 2^e, |y| <= 448 (the definition of e)
 * and E4M3 spacing in the binade [2^k, 2^(k+1)) is 2^(k-3) for k >= -6, so
 * RNE is off by at most 2^(k-4) <= |y| / 16; below 2^-6 the spacing is 2^-9
 * and the error at most 2^-10. Scaled back:
 *   |x - deq| <= max(|x| / 16, 2^(e-10)) <= amax / 16
 * where the last step needs amax > 448 * 2^(e-1) (then 2^(e-10) < amax /
 * 16): it holds unless e is clamped at -127, for blocks with amax below
 * 448 * 2^-128, where the bound is max(amax / 16, 2^-137).
 */
static void t_mxfp8_error_bound(void)
{
	enum { N = 256 };
	float x[N], back[N];
	uint8_t codes[N], scales[N / 32];
	double worst = 0;

	for (int round = 0; round < 400; round++) {
		for (int b = 0; b < N / 32; b++) {
			int ex = (int)ktap_rand_below(250) - 140;
			int spread = (int)ktap_rand_below(30);

			for (int i = 0; i < 32; i++)
				x[b * 32 + i] = rand_float(ex - spread, ex);
		}
		haccel__mxfp8_pack(codes, scales, x, N);
		haccel__mxfp8_unpack(back, codes, scales, N);
		for (int b = 0; b < N / 32; b++) {
			double amax = haccel__amax(x + b * 32, 32);
			int e = scales[b] - 127;

			KTAP_ASSERT(e == haccel__scale_exp((float)amax));
			for (int i = b * 32; i < b * 32 + 32; i++) {
				double err = fabs((double)back[i] - x[i]);
				double tight = fmax(fabs(x[i]) / 16, ldexp(1.0, e - 10));

				CHECK(err <= fmax(amax / 16, ldexp(1.0, e - 10)),
				      "x %a: error %g, amax %g", x[i], err, amax);
				if (e > -127)
					CHECK(err <= amax / 16, "x %a: error %g, amax %g",
					      x[i], err, amax);
				CHECK(err <= tight, "x %a: error %g > %g", x[i], err, tight);
				if (fabs(x[i]) >= ldexp(1.0, e - 6))
					worst = fmax(worst, err / fabs(x[i]));
			}
		}
	}
	/* The bound is reached, not just respected, in a sample this size. */
	ktap_diag("worst relative error %.6f (bound 0.0625)", worst);
	KTAP_EXPECT(worst > 0.05 && worst <= 0.0625);
}

static void t_mxfp8_zero_nan_inf_blocks(void)
{
	float x[128], back[128];
	uint8_t codes[128], scales[4];

	for (int i = 0; i < 128; i++)
		x[i] = 0.0f;
	x[3] = -0.0f;
	/* Block 1: a NaN among ordinary values; block 2: inf among them;
	 * block 3: only NaN and inf. */
	for (int i = 32; i < 96; i++)
		x[i] = (float)(i - 64) * 0.25f;
	x[40] = NAN;
	x[70] = -INFINITY;
	for (int i = 96; i < 128; i++)
		x[i] = (i & 1) ? NAN : INFINITY;
	haccel__mxfp8_pack(codes, scales, x, 128);
	haccel__mxfp8_unpack(back, codes, scales, 128);

	/* Zero block: e = 0 (byte 127), codes +-0, values +-0. */
	KTAP_EXPECT_EQ(scales[0], 127);
	for (int i = 0; i < 32; i++) {
		CHECK(codes[i] == (i == 3 ? 0x80 : 0x00), "zero block %d", i);
		CHECK(f2u(back[i]) == (i == 3 ? 0x80000000u : 0), "zero block %d", i);
	}
	/* NaN and inf do not move the scale: amax 8 in block 1 and 7.75 in
	 * block 2, both e = -5. */
	KTAP_EXPECT_EQ(scales[1], 127 - 5);
	KTAP_EXPECT_EQ(scales[2], 127 - 5);
	KTAP_EXPECT_EQ(codes[40], 0x7f);
	KTAP_EXPECT(isnan(back[40]));
	KTAP_EXPECT_EQ(codes[70], 0xfe);
	KTAP_EXPECT(back[70] == -448.0f * 0x1p-5f);
	for (int i = 32; i < 96; i++)
		if (i != 40 && i != 70 && fabsf(x[i]) <= 4.0f)
			CHECK(back[i] == x[i], "%d: quarter steps up to 4 are exact", i);
	/* All non-finite: amax 0, e = 0. */
	KTAP_EXPECT_EQ(scales[3], 127);
	for (int i = 96; i < 128; i++) {
		CHECK(codes[i] == ((i & 1) ? 0x7f : 0x7e), "%d", i);
		CHECK((i & 1) ? isnan(back[i]) : back[i] == 448.0f, "%d", i);
	}
	/* E8M0 0xff (never written) decodes as NaN for its whole block;
	 * 0x00 is 2^-127 and 0xfe 2^127. */
	scales[0] = 0xff;
	scales[1] = 0x00;
	scales[2] = 0xfe;
	for (int i = 0; i < 96; i++)
		codes[i] = 0x38; /* 1.0 */
	haccel__mxfp8_unpack(back, codes, scales, 96);
	for (int i = 0; i < 32; i++)
		CHECK(isnan(back[i]), "%d", i);
	KTAP_EXPECT(back[32] == 0x1p-127f);
	KTAP_EXPECT(back[64] == 0x1p127f);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_fp8_decode_all),
	KTAP_CASE(t_fp8_reencode_all),
	KTAP_CASE(t_fp8_rounding_boundaries),
	KTAP_CASE(t_fp8_saturation),
	KTAP_CASE(t_fp8_subnormals),
	KTAP_CASE(t_fp8_random_vs_reference),
	KTAP_CASE(t_bf16_every_exponent),
	KTAP_CASE(t_bf16_random),
	KTAP_CASE(t_scale_exp_powers),
	KTAP_CASE(t_scale_exp_exhaustive_steps),
	KTAP_CASE(t_amax),
	KTAP_CASE(t_kv_record),
	KTAP_CASE(t_kv_record_specials),
	KTAP_CASE(t_index_k_record),
	KTAP_CASE(t_mxfp8_error_bound),
	KTAP_CASE(t_mxfp8_zero_nan_inf_blocks),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
