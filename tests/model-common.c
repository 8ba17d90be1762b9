// SPDX-License-Identifier: MIT
/* Common CPU ops (matmul, rmsnorm, layernorm, embed, swiglu, attention-residual mix) against double-precision formulations and the fp32 order docs/model.md states. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ktap.h"
#include "model/cpu/ops.h"

/*
 * Every op is checked three ways (docs/model.md, "Common ops"):
 *  - against the formula evaluated in double, within a stated bound on
 *    fp32 rounding (u = 2^-24), derived per op below and reported as the
 *    worst fraction of the bound used;
 *  - bit for bit against the fp32 order of operations the page states,
 *    written out again here, so the page and the code cannot drift;
 *  - on the edges the page names: zero rows, eps, NaN and infinities.
 * Sizes are odd and inputs random; the seed is printed (replay with
 * --seed or HACCEL_TEST_SEED).
 */

#define U 0x1p-24

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */

static void *bufs[64];
static unsigned int n_bufs;

static void *mem(size_t bytes)
{
	void *p;

	KTAP_ASSERT(n_bufs < sizeof(bufs) / sizeof(bufs[0]));
	p = calloc(1, bytes ? bytes : 1);
	KTAP_ASSERT(p != NULL);
	bufs[n_bufs++] = p;
	return p;
}

static float *fbuf(size_t n)
{
	return mem(n * sizeof(float));
}

static void free_all(void)
{
	while (n_bufs)
		free(bufs[--n_bufs]);
}

/* Uniform in [lo, hi), 24 random bits. */
static float frand(float lo, float hi)
{
	return lo + (hi - lo) * (float)(ktap_rand() >> 40) * 0x1p-24f;
}

static void fill(float *x, size_t n, float lo, float hi)
{
	for (size_t i = 0; i < n; i++)
		x[i] = frand(lo, hi);
}

/* Random values spanning magnitudes 10^-e .. 10^e, both signs. */
static void fill_wide(float *x, size_t n, int e)
{
	for (size_t i = 0; i < n; i++)
		x[i] = frand(-1.0f, 1.0f) * powf(10.0f, frand((float)-e, (float)e));
}

static int same_bits(const float *a, const float *b, size_t n)
{
	return !memcmp(a, b, n * sizeof(float));
}

/* First index where the bits differ, with both values, to the log. */
static int expect_bits(const float *got, const float *want, size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++)
		if (memcmp(&got[i], &want[i], sizeof(float))) {
			ktap_diag("%s[%zu]: %a, the stated fp32 order gives %a", what, i, got[i],
				  want[i]);
			return 0;
		}
	return 1;
}

static int all_nan(const float *x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isnan(x[i]))
			return 0;
	return 1;
}

static int all_finite(const float *x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isfinite(x[i]))
			return 0;
	return 1;
}

/*
 * Track |got - ref| <= tol element by element; keeps the worst ratio.
 * Returns 0 (and logs) on the first violation.
 */
struct bound {
	double worst; /* max |got - ref| / tol */
	int ok;
};

static void bound_check(struct bound *b, float got, double ref, double tol, const char *what,
			size_t i)
{
	double d = fabs((double)got - ref);

	if (!(d <= tol)) {
		if (b->ok)
			ktap_diag("%s[%zu] = %.9g, double %.9g: |diff| %.3g > bound %.3g", what, i,
				  got, ref, d, tol);
		b->ok = 0;
	}
	if (tol > 0 && d / tol > b->worst)
		b->worst = d / tol;
}

/* ------------------------------------------------------------------------ */
/* matmul                                                                   */

/* The page's fp32 order: acc = 0; acc += x[k] * w[k] for k ascending (each
 * product and each sum rounded); y = acc + bias. */
static void matmul_doc(float *y, const float *x, const float *W, const float *bias, uint32_t T,
		       uint32_t N, uint32_t K)
{
	for (uint32_t t = 0; t < T; t++)
		for (uint32_t n = 0; n < N; n++) {
			float acc = 0.0f;

			for (uint32_t k = 0; k < K; k++) {
				float p = x[(size_t)t * K + k] * W[(size_t)n * K + k];

				acc = acc + p;
			}
			y[(size_t)t * N + n] = bias ? acc + bias[n] : acc;
		}
}

/*
 * Bound: a sum of K rounded products and one bias add is within
 * (K + 1) u (sum |x w| + |b|) of the exact value (the usual gamma_{K+1}
 * bound, with (K + 1) u < 0.01 here).
 */
static void t_matmul(void)
{
	static const uint32_t shapes[][3] = {
		{ 1, 1, 1 }, { 3, 7, 5 }, { 5, 13, 129 }, { 2, 33, 1001 }, { 7, 3, 64 }, { 1, 5, 0 },
	};
	struct bound b = { 0, 1 };

	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		uint32_t T = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
		float *x = fbuf((size_t)T * K), *W = fbuf((size_t)N * K), *bias = fbuf(N);
		float *y = fbuf((size_t)T * N), *yd = fbuf((size_t)T * N);

		fill(x, (size_t)T * K, -2, 2);
		fill(W, (size_t)N * K, -1, 1);
		fill(bias, N, -1, 1);
		for (int with_bias = 0; with_bias < 2; with_bias++) {
			const float *bp = with_bias ? bias : NULL;

			haccel__cpu_matmul(y, x, W, bp, T, N, K);
			matmul_doc(yd, x, W, bp, T, N, K);
			KTAP_EXPECT(expect_bits(y, yd, (size_t)T * N, "matmul"));
			for (uint32_t t = 0; t < T; t++)
				for (uint32_t n = 0; n < N; n++) {
					double ref = bp ? bp[n] : 0.0, mag = bp ? fabs(bp[n]) : 0.0;

					for (uint32_t k = 0; k < K; k++) {
						double p = (double)x[(size_t)t * K + k] * W[(size_t)n * K + k];
						ref += p;
						mag += fabs(p);
					}
					bound_check(&b, y[(size_t)t * N + n], ref, (K + 1) * U * mag,
						    "matmul", (size_t)t * N + n);
				}
		}
		/* K = 0: the empty sum, so y is the bias (or 0) exactly. */
		if (K == 0) {
			haccel__cpu_matmul(y, x, W, bias, T, N, K);
			KTAP_EXPECT(same_bits(y, bias, N));
		}
		free_all();
	}
	KTAP_EXPECT(b.ok);
	ktap_diag("matmul: worst %.3g of the bound (K + 1) u sum|x w|", b.worst);

	/* Zero rows: nothing written. */
	{
		float x[4] = { 1, 2, 3, 4 }, W[8] = { 1 }, y[2] = { 42.0f, -7.0f };

		haccel__cpu_matmul(y, x, W, NULL, 0, 2, 4);
		KTAP_EXPECT(y[0] == 42.0f && y[1] == -7.0f);
	}
	/* A NaN in row t of x: every output of row t is NaN, other rows keep
	 * their bits. An infinity times a weight of the other sign gives
	 * -inf or +inf; against a zero weight, NaN (IEEE arithmetic). */
	{
		uint32_t T = 3, N = 5, K = 9;
		float *x = fbuf(T * K), *W = fbuf(N * K), *y = fbuf(T * N), *y0 = fbuf(T * N);

		fill(x, T * K, -1, 1);
		fill(W, N * K, -1, 1);
		haccel__cpu_matmul(y0, x, W, NULL, T, N, K);
		x[1 * K + 4] = NAN;
		haccel__cpu_matmul(y, x, W, NULL, T, N, K);
		KTAP_EXPECT(all_nan(y + N, N));
		KTAP_EXPECT(same_bits(y, y0, N) && same_bits(y + 2 * N, y0 + 2 * N, N));
		x[1 * K + 4] = INFINITY;
		W[0 * K + 4] = 0.5f;
		W[1 * K + 4] = -0.5f;
		W[2 * K + 4] = 0.0f;
		haccel__cpu_matmul(y, x, W, NULL, T, N, K);
		KTAP_EXPECT(y[N + 0] == INFINITY && y[N + 1] == -INFINITY && isnan(y[N + 2]));
		free_all();
	}
}

/* ------------------------------------------------------------------------ */
/* rmsnorm                                                                  */

/* The page's fp32 order: ss = sum x^2 (d ascending); r = 1 / sqrtf(ss / D
 * + eps); y = (x * r) * w. */
static void rmsnorm_doc(float *y, const float *x, const float *w, uint32_t T, uint32_t D,
			float eps)
{
	for (uint32_t t = 0; t < T; t++) {
		const float *xt = x + (size_t)t * D;
		float ss = 0.0f;

		for (uint32_t d = 0; d < D; d++)
			ss = ss + xt[d] * xt[d];
		float m = ss / (float)D;
		float r = 1.0f / sqrtf(m + eps);
		for (uint32_t d = 0; d < D; d++) {
			float z = xt[d] * r;

			y[(size_t)t * D + d] = w ? z * w[d] : z;
		}
	}
}

/* How often the page's old reading x / sqrt(...) * w gives other bits. */
static size_t rms_divide_differs(const float *x, const float *w, uint32_t D, float eps,
				 const float *y)
{
	float ss = 0.0f;
	size_t n = 0;

	for (uint32_t d = 0; d < D; d++)
		ss += x[d] * x[d];
	float s = sqrtf(ss / (float)D + eps);
	for (uint32_t d = 0; d < D; d++) {
		float v = x[d] / s * w[d];

		n += memcmp(&v, &y[d], sizeof(v)) != 0;
	}
	return n;
}

/*
 * Bound, relative to |ref|: the sum of D squares (D - 1) u, the mean,
 * eps and sqrt (which halves the relative error) about (D + 3) u / 2, the
 * reciprocal and the two products 3 u: (D / 2 + 8) u |ref|.
 */
static void t_rmsnorm(void)
{
	static const uint32_t dims[] = { 1, 3, 64, 127, 2049 };
	static const float epss[] = { 1e-6f, 1e-5f, 1e-2f };
	struct bound b = { 0, 1 };
	size_t differs = 0, total = 0;

	for (size_t di = 0; di < sizeof(dims) / sizeof(dims[0]); di++)
		for (size_t ei = 0; ei < sizeof(epss) / sizeof(epss[0]); ei++) {
			uint32_t D = dims[di], T = 5;
			float eps = epss[ei];
			float *x = fbuf((size_t)T * D), *w = fbuf(D), *y = fbuf((size_t)T * D);
			float *yd = fbuf((size_t)T * D), *yi = fbuf((size_t)T * D);

			/* rows of different scales, so eps matters in some */
			for (uint32_t t = 0; t < T; t++)
				fill_wide(x + (size_t)t * D, D, 1);
			for (uint32_t d = 0; d < D; d++)
				x[(size_t)2 * D + d] *= 1e-3f;
			fill(w, D, -2, 2);
			for (int with_w = 0; with_w < 2; with_w++) {
				const float *wp = with_w ? w : NULL;

				haccel__cpu_rmsnorm(y, x, wp, T, D, eps);
				rmsnorm_doc(yd, x, wp, T, D, eps);
				KTAP_EXPECT(expect_bits(y, yd, (size_t)T * D, "rmsnorm"));
				/* in place: the same bits */
				memcpy(yi, x, (size_t)T * D * sizeof(float));
				haccel__cpu_rmsnorm(yi, yi, wp, T, D, eps);
				KTAP_EXPECT(same_bits(yi, y, (size_t)T * D));
				for (uint32_t t = 0; t < T; t++) {
					const float *xt = x + (size_t)t * D;
					double ss = 0;

					for (uint32_t d = 0; d < D; d++)
						ss += (double)xt[d] * xt[d];
					double r = 1.0 / sqrt(ss / D + (double)eps);
					for (uint32_t d = 0; d < D; d++) {
						double ref = xt[d] * r * (wp ? wp[d] : 1.0);

						bound_check(&b, y[(size_t)t * D + d], ref,
							    (D / 2.0 + 8) * U * fabs(ref), "rmsnorm",
							    (size_t)t * D + d);
					}
					if (wp) {
						differs += rms_divide_differs(xt, wp, D, eps, y + (size_t)t * D);
						total += D;
					}
				}
			}
			free_all();
		}
	KTAP_EXPECT(b.ok);
	ktap_diag("rmsnorm: worst %.3g of the bound (D/2 + 8) u |ref|; x / sqrt(...) * w would "
		  "differ in %.1f%% of %zu values", b.worst, 100.0 * differs / (total ? total : 1),
		  total);

	/* Edges. */
	{
		uint32_t D = 7;
		float x[3 * 7], w[7], y[3 * 7], keep[2] = { 3.0f, 4.0f };

		fill(w, D, 0.5f, 2);
		/* zero rows: nothing written */
		haccel__cpu_rmsnorm(keep, x, w, 0, D, 1e-6f);
		KTAP_EXPECT(keep[0] == 3.0f && keep[1] == 4.0f);
		/* an all-zero row: eps keeps it finite, the output is 0 */
		memset(x, 0, sizeof(x));
		haccel__cpu_rmsnorm(y, x, w, 1, D, 1e-6f);
		for (uint32_t d = 0; d < D; d++)
			KTAP_EXPECT(y[d] == 0.0f);
		/* eps is added to the mean of squares: rows of 1e-4 with eps
		 * 1e-6 give 1e-4 / sqrt(1e-8 + 1e-6), about 0.0995 */
		for (uint32_t d = 0; d < D; d++)
			x[d] = 1e-4f;
		haccel__cpu_rmsnorm(y, x, NULL, 1, D, 1e-6f);
		KTAP_EXPECT(fabs(y[0] - 1e-4 / sqrt(1e-8 + 1e-6)) < 1e-6);
		/* NaN: its row all NaN. +inf: the sum is inf, r = 0, so the
		 * infinite element is NaN (inf * 0) and the others 0. A finite
		 * row whose sum of squares overflows fp32 normalizes to 0. */
		fill(x, 3 * D, -1, 1);
		x[2] = NAN;
		x[D + 3] = INFINITY;
		for (uint32_t d = 0; d < D; d++)
			x[2 * D + d] = (d % 2 ? -3e19f : 2e19f);
		haccel__cpu_rmsnorm(y, x, w, 3, D, 1e-6f);
		KTAP_EXPECT(all_nan(y, D));
		for (uint32_t d = 0; d < D; d++) {
			if (d == 3)
				KTAP_EXPECT(isnan(y[D + d]));
			else
				KTAP_EXPECT(y[D + d] == 0.0f);
			KTAP_EXPECT(y[2 * D + d] == 0.0f);
		}
	}
}

/* ------------------------------------------------------------------------ */
/* layernorm                                                                */

/* The page's fp32 order: mean = (sum x) / D; var = (sum (x - mean)^2) / D
 * (each difference rounded, then squared); r = 1 / sqrtf(var + eps);
 * y = ((x - mean) * r) * w + b. */
static void layernorm_doc(float *y, const float *x, const float *w, const float *b, uint32_t T,
			  uint32_t D, float eps)
{
	for (uint32_t t = 0; t < T; t++) {
		const float *xt = x + (size_t)t * D;
		float mean = 0.0f, var = 0.0f;

		for (uint32_t d = 0; d < D; d++)
			mean = mean + xt[d];
		mean = mean / (float)D;
		for (uint32_t d = 0; d < D; d++) {
			float c = xt[d] - mean;

			var = var + c * c;
		}
		var = var / (float)D;
		float r = 1.0f / sqrtf(var + eps);
		for (uint32_t d = 0; d < D; d++) {
			float z = (xt[d] - mean) * r;

			z = w ? z * w[d] : z;
			y[(size_t)t * D + d] = b ? z + b[d] : z + 0.0f;
		}
	}
}

/*
 * Bound: the fp32 mean is off by at most D u max|x|, which enters every
 * centred value; the two-pass variance (first-order insensitive to the
 * mean's error) and r carry about (D / 2 + 6) u relative; the products
 * and the bias add a few u:
 *   (D + 16) u ((|x - m| + max|x|) / sigma |w| + |b|).
 */
static void t_layernorm(void)
{
	static const uint32_t dims[] = { 1, 5, 128, 129, 1023 };
	struct bound bd = { 0, 1 };

	for (size_t di = 0; di < sizeof(dims) / sizeof(dims[0]); di++) {
		uint32_t D = dims[di], T = 4;
		float *x = fbuf((size_t)T * D), *w = fbuf(D), *b = fbuf(D), *y = fbuf((size_t)T * D);
		float *yd = fbuf((size_t)T * D);

		/* an offset row (cancellation in x - mean), a small-spread row
		 * (eps matters), a wide one */
		fill(x, D, -1, 1);
		for (uint32_t d = 0; d < D; d++)
			x[D + d] = 3.0f + frand(-1, 1);
		for (uint32_t d = 0; d < D; d++)
			x[2 * D + d] = frand(-1e-3f, 1e-3f);
		fill_wide(x + 3 * D, D, 2);
		fill(w, D, -2, 2);
		fill(b, D, -1, 1);
		for (int mode = 0; mode < 2; mode++) {
			const float *wp = mode ? w : NULL, *bp = mode ? b : NULL;

			haccel__cpu_layernorm(y, x, wp, bp, T, D, 1e-6f);
			layernorm_doc(yd, x, wp, bp, T, D, 1e-6f);
			KTAP_EXPECT(expect_bits(y, yd, (size_t)T * D, "layernorm"));
			for (uint32_t t = 0; t < T; t++) {
				const float *xt = x + (size_t)t * D;
				double m = 0, v = 0, mx = 0;

				for (uint32_t d = 0; d < D; d++) {
					m += xt[d];
					mx = fmax(mx, fabs(xt[d]));
				}
				m /= D;
				for (uint32_t d = 0; d < D; d++)
					v += (xt[d] - m) * (xt[d] - m);
				v /= D;
				double sig = sqrt(v + 1e-6);
				for (uint32_t d = 0; d < D; d++) {
					double wd = wp ? wp[d] : 1.0, bdd = bp ? bp[d] : 0.0;
					double ref = (xt[d] - m) / sig * wd + bdd;
					double tol = (D + 16) * U *
						     ((fabs(xt[d] - m) + mx) / sig * fabs(wd) + fabs(bdd));

					bound_check(&bd, y[(size_t)t * D + d], ref, tol, "layernorm",
						    (size_t)t * D + d);
				}
			}
		}
		free_all();
	}
	KTAP_EXPECT(bd.ok);
	ktap_diag("layernorm: worst %.3g of the bound", bd.worst);

	/* Edges: a constant row whose mean is exact gives var = 0, and eps
	 * keeps r finite: y = 0 * r * w + b = b exactly. Zero rows write
	 * nothing. A NaN makes its row NaN. */
	{
		float x[2 * 9], w[9], b[9], y[2 * 9], keep = 5.0f;

		for (int d = 0; d < 9; d++)
			x[d] = 2.0f;
		fill(w, 9, -1, 1);
		fill(b, 9, -1, 1);
		fill(x + 9, 9, -1, 1);
		x[9 + 4] = NAN;
		haccel__cpu_layernorm(y, x, w, b, 2, 9, 1e-6f);
		KTAP_EXPECT(same_bits(y, b, 9));
		KTAP_EXPECT(all_nan(y + 9, 9));
		haccel__cpu_layernorm(&keep, x, w, b, 0, 9, 1e-6f);
		KTAP_EXPECT(keep == 5.0f);
	}
}

/* ------------------------------------------------------------------------ */
/* embed                                                                    */

static void t_embed(void)
{
	uint32_t V = 37, D = 19, T = 11;
	float *table = fbuf((size_t)V * D), *y = fbuf((size_t)T * D);
	int32_t tok[11] = { 0, 36, 5, 5, 17, 0, 36, 1, 35, 2, 5 };
	float keep[3] = { 1, 2, 3 };

	fill_wide(table, (size_t)V * D, 3);
	table[3 * D + 1] = NAN; /* copied, not computed with */
	haccel__cpu_embed(y, table, tok, T, D);
	for (uint32_t t = 0; t < T; t++)
		KTAP_EXPECT(!memcmp(y + (size_t)t * D, table + (size_t)tok[t] * D, D * sizeof(float)));
	tok[0] = 3;
	haccel__cpu_embed(y, table, tok, 1, D);
	KTAP_EXPECT(isnan(y[1]) && !memcmp(y, table + 3 * D, D * sizeof(float)));
	haccel__cpu_embed(keep, table, tok, 0, D);
	KTAP_EXPECT(keep[0] == 1 && keep[1] == 2 && keep[2] == 3);
	free_all();
}

/* ------------------------------------------------------------------------ */
/* swiglu                                                                   */

/* The page's fp32 order: y = (g / (1 + expf(-g))) * u. */
static float swiglu_doc(float g, float u)
{
	float e = expf(-g);
	float den = 1.0f + e;
	float s = g / den;

	return s * u;
}

/*
 * Bound, relative: expf within 1 ulp (its error scaled by e / (1 + e) <=
 * 1), then the add, the division and the product: 8 u |ref|, plus 1e-35
 * absolute for results that underflow (g below about -87, where expf(-g)
 * overflows and g / inf is -0).
 */
static void t_swiglu(void)
{
	size_t n = 1001;
	float *g = fbuf(n), *up = fbuf(n), *y = fbuf(n), *ya = fbuf(n);
	struct bound b = { 0, 1 };

	fill(g, n, -30, 30);
	for (size_t i = 0; i < 40; i++)
		g[i] = frand(-120, 120);
	fill(up, n, -3, 3);
	haccel__cpu_swiglu(y, g, up, n);
	for (size_t i = 0; i < n; i++) {
		double gd = g[i], ref = gd / (1.0 + exp(-gd)) * up[i];
		float want = swiglu_doc(g[i], up[i]);

		if (memcmp(&want, &y[i], sizeof(want))) {
			ktap_fail_at(__FILE__, __LINE__, "swiglu[%zu]: %a, the stated fp32 order gives %a",
				     i, y[i], want);
			break;
		}
		bound_check(&b, y[i], ref, 8 * U * fabs(ref) + 1e-35, "swiglu", i);
	}
	KTAP_EXPECT(b.ok);
	ktap_diag("swiglu: worst %.3g of the bound 8 u |ref|", b.worst);
	/* y may alias gate */
	memcpy(ya, g, n * sizeof(float));
	haccel__cpu_swiglu(ya, ya, up, n);
	KTAP_EXPECT(same_bits(ya, y, n));

	/* Edges: silu(+inf) = inf; silu(-inf) = -inf / inf = NaN (not the
	 * limit 0); NaN stays NaN; silu(-100) = -0 (expf(100) overflows);
	 * n = 0 writes nothing. */
	{
		float ge[4] = { INFINITY, -INFINITY, NAN, -100.0f }, ue[4] = { 2, 2, 2, 2 }, ye[4];
		float keep = 9.0f;

		haccel__cpu_swiglu(ye, ge, ue, 4);
		KTAP_EXPECT(ye[0] == INFINITY);
		KTAP_EXPECT(isnan(ye[1]) && isnan(ye[2]));
		KTAP_EXPECT(ye[3] == 0.0f && signbit(ye[3]));
		haccel__cpu_swiglu(&keep, ge, ue, 0);
		KTAP_EXPECT(keep == 9.0f);
	}
	free_all();
}

/* ------------------------------------------------------------------------ */
/* attention-residual mix                                                   */

/* The page's fp32 order, per token: for each source i, ss = sum v^2,
 * r = 1 / sqrtf(ss / D + eps), l_i = sum_d q[d] * ((v[d] * r) * w[d]);
 * m = the largest l_i (by >, from -inf); e_i = expf(l_i - m); Z = sum e_i;
 * h = 0, then for i ascending h[d] += (e_i / Z) * v[d]. */
static void mix_doc(float *h, const float *const *src, uint32_t n, const float *q, const float *w,
		    uint32_t T, uint32_t D, float eps)
{
	float l[64];

	for (uint32_t t = 0; t < T; t++) {
		float m = -INFINITY, Z = 0.0f;
		float *ht = h + (size_t)t * D;

		for (uint32_t i = 0; i < n; i++) {
			const float *v = src[i] + (size_t)t * D;
			float ss = 0.0f, dot = 0.0f;

			for (uint32_t d = 0; d < D; d++)
				ss = ss + v[d] * v[d];
			float r = 1.0f / sqrtf(ss / (float)D + eps);
			for (uint32_t d = 0; d < D; d++) {
				float z = (v[d] * r) * w[d];

				dot = dot + q[d] * z;
			}
			l[i] = dot;
			if (dot > m)
				m = dot;
		}
		for (uint32_t i = 0; i < n; i++) {
			l[i] = expf(l[i] - m);
			Z = Z + l[i];
		}
		for (uint32_t d = 0; d < D; d++)
			ht[d] = 0.0f;
		for (uint32_t i = 0; i < n; i++) {
			float a = l[i] / Z;

			for (uint32_t d = 0; d < D; d++)
				ht[d] = ht[d] + a * src[i][(size_t)t * D + d];
		}
	}
}

/*
 * Bound: each logit is a sum of D products of normalized values, off by
 * at most L_i = (3D/2 + 10) u sum_d |q z_i| (its own sum plus the rmsnorm
 * of the source); the softmax weights then carry a relative error of at
 * most 2 max L + (n + 4) u, and the weighted sum another (n + 1) u:
 *   |h - ref| <= (2 max L + (2n + 8) u) sum_i a_i |v_i|.
 */
static void t_attn_res_mix(void)
{
	static const uint32_t dims[] = { 1, 5, 64, 333 };
	static const uint32_t nsrc[] = { 1, 2, 7, 64 };
	struct bound b = { 0, 1 };
	const float eps = 1e-6f;

	for (size_t di = 0; di < sizeof(dims) / sizeof(dims[0]); di++)
		for (size_t ni = 0; ni < sizeof(nsrc) / sizeof(nsrc[0]); ni++) {
			uint32_t D = dims[di], n = nsrc[ni], T = 3;
			const float *src[64];
			float *q = fbuf(D), *w = fbuf(D), *h = fbuf((size_t)T * D);
			float *hd = fbuf((size_t)T * D), *all = fbuf((size_t)n * T * D);

			for (uint32_t i = 0; i < n; i++) {
				float *v = all + (size_t)i * T * D;

				/* sources of different sizes, as blocks grow */
				fill(v, (size_t)T * D, -1, 1);
				for (size_t e = 0; e < (size_t)T * D; e++)
					v[e] *= powf(10.0f, (float)((int)(i % 5) - 2) * 0.5f);
				src[i] = v;
			}
			/* logits of a few units */
			fill(q, D, -2.0f / sqrtf((float)D), 2.0f / sqrtf((float)D));
			fill(w, D, 0.5f, 1.5f);
			haccel__cpu_attn_res_mix(h, src, n, q, w, T, D, eps);
			mix_doc(hd, src, n, q, w, T, D, eps);
			KTAP_EXPECT(expect_bits(h, hd, (size_t)T * D, "attn_res_mix"));
			for (uint32_t t = 0; t < T; t++) {
				double l[64], a[64], L = 0, mx = -INFINITY, Z = 0;

				for (uint32_t i = 0; i < n; i++) {
					const float *v = src[i] + (size_t)t * D;
					double ss = 0, dot = 0, mag = 0;

					for (uint32_t d = 0; d < D; d++)
						ss += (double)v[d] * v[d];
					double r = 1.0 / sqrt(ss / D + (double)eps);
					for (uint32_t d = 0; d < D; d++) {
						double p = (double)q[d] * (v[d] * r * w[d]);
						dot += p;
						mag += fabs(p);
					}
					l[i] = dot;
					mx = fmax(mx, dot);
					L = fmax(L, (1.5 * D + 10) * U * mag);
				}
				for (uint32_t i = 0; i < n; i++)
					Z += (a[i] = exp(l[i] - mx));
				for (uint32_t i = 0; i < n; i++)
					a[i] /= Z;
				for (uint32_t d = 0; d < D; d++) {
					double ref = 0, mag = 0;

					for (uint32_t i = 0; i < n; i++) {
						double v = src[i][(size_t)t * D + d];
						ref += a[i] * v;
						mag += a[i] * fabs(v);
					}
					bound_check(&b, h[(size_t)t * D + d], ref,
						    (2 * L + (2 * n + 8) * U) * mag + 1e-38,
						    "attn_res_mix", (size_t)t * D + d);
				}
			}
			free_all();
		}
	KTAP_EXPECT(b.ok);
	ktap_diag("attn_res_mix: worst %.3g of the bound", b.worst);
}

static void t_attn_res_mix_edges(void)
{
	uint32_t D = 23, T = 2;
	const float *src[4];
	float *v0 = fbuf((size_t)T * D), *v1 = fbuf((size_t)T * D), *v2 = fbuf((size_t)T * D);
	float *zero = fbuf((size_t)T * D), *q = fbuf(D), *w = fbuf(D), *h = fbuf((size_t)T * D);
	float *h2 = fbuf((size_t)T * D), keep = 8.0f;

	fill(v0, (size_t)T * D, -1, 1);
	fill(v1, (size_t)T * D, -3, 3);
	fill(v2, (size_t)T * D, -0.1f, 0.1f);
	fill(q, D, -0.5f, 0.5f);
	fill(w, D, 0.5f, 1.5f);

	/* One source: its weight is exactly 1, h is the source bit for bit. */
	src[0] = v1;
	haccel__cpu_attn_res_mix(h, src, 1, q, w, T, D, 1e-6f);
	KTAP_EXPECT(same_bits(h, v1, (size_t)T * D));

	/* A zero query mixes uniformly: weights fl(1/n). */
	{
		float *q0 = fbuf(D);

		src[0] = v0;
		src[1] = v1;
		src[2] = v2;
		haccel__cpu_attn_res_mix(h, src, 3, q0, w, T, D, 1e-6f);
		for (size_t e = 0; e < (size_t)T * D; e++) {
			float a = 1.0f / 3.0f, want = 0.0f;

			want += a * v0[e];
			want += a * v1[e];
			want += a * v2[e];
			KTAP_EXPECT(h[e] == want);
		}
	}

	/* A zero source (a block whose outputs cancel): eps keeps its norm
	 * finite, its logit is 0, the mix stays finite. */
	src[0] = v0;
	src[1] = zero;
	haccel__cpu_attn_res_mix(h, src, 2, q, w, T, D, 1e-6f);
	KTAP_EXPECT(all_finite(h, (size_t)T * D));

	/* Logits in the thousands: the maximum is subtracted first, so
	 * nothing overflows; the others' weights underflow to 0 and the best
	 * source comes through exactly. */
	{
		float *qb = fbuf(D);
		float ss = 0.0f;

		for (uint32_t d = 0; d < D; d++)
			ss += v1[d] * v1[d];
		for (uint32_t d = 0; d < D; d++)
			qb[d] = 300.0f * v1[d] / sqrtf(ss / (float)D) / w[d];
		src[0] = v0;
		src[1] = v1;
		src[2] = v2;
		haccel__cpu_attn_res_mix(h, src, 3, qb, w, 1, D, 1e-6f);
		KTAP_EXPECT(same_bits(h, v1, D));
	}

	/* A NaN anywhere in a token's sources: that token's mix is NaN (its
	 * logit is NaN, so is Z); other tokens keep their bits. */
	src[0] = v0;
	src[1] = v1;
	haccel__cpu_attn_res_mix(h2, src, 2, q, w, T, D, 1e-6f);
	v1[D + 7] = NAN;
	haccel__cpu_attn_res_mix(h, src, 2, q, w, T, D, 1e-6f);
	KTAP_EXPECT(same_bits(h, h2, D));
	KTAP_EXPECT(all_nan(h + D, D));

	/* No sources: h = 0. Zero tokens: nothing written. */
	for (size_t e = 0; e < (size_t)T * D; e++)
		h[e] = 1.0f;
	haccel__cpu_attn_res_mix(h, src, 0, q, w, T, D, 1e-6f);
	for (size_t e = 0; e < (size_t)T * D; e++)
		KTAP_EXPECT(h[e] == 0.0f);
	haccel__cpu_attn_res_mix(&keep, src, 2, q, w, 0, D, 1e-6f);
	KTAP_EXPECT(keep == 8.0f);
	free_all();
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_matmul),
	KTAP_CASE(t_rmsnorm),
	KTAP_CASE(t_layernorm),
	KTAP_CASE(t_embed),
	KTAP_CASE(t_swiglu),
	KTAP_CASE(t_attn_res_mix),
	KTAP_CASE(t_attn_res_mix_edges),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
