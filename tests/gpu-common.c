// SPDX-License-Identifier: MIT
/* GPU common ops (norms, embedding, SwiGLU, residual mix, bf16, argmax)
 * against the CPU ops on the same inputs. Skips with no GPU. */
#include "config.h"

#include "gpu-util.h"
#include "model/cpu/ops.h"
#include "model/format.h"

static float frand(float lo, float hi)
{
	return lo + (hi - lo) * (float)(ktap_rand() >> 40) * 0x1p-24f;
}

static float *rnd(size_t n, float lo, float hi)
{
	float *x = malloc(n * sizeof(float) + 1);

	KTAP_ASSERT(x != NULL);
	for (size_t i = 0; i < n; i++)
		x[i] = frand(lo, hi);
	return x;
}

/* Norms over odd widths, with and without weights; 1e-5 relative. */
static void test_norms(void)
{
	struct haccel__gpu *g = gpu_open();
	const uint32_t Ds[] = { 1, 7, 128, 1000, 4096, 7168 };

	for (unsigned int i = 0; i < sizeof(Ds) / sizeof(Ds[0]); i++) {
		uint32_t T = 5, D = Ds[i];
		float *x = rnd((size_t)T * D, -3, 3), *w = rnd(D, -1, 2), *b = rnd(D, -1, 1);
		float *want = malloc((size_t)T * D * 4), *got = malloc((size_t)T * D * 4);
		haccel__dptr dx = gpu_up(x, (size_t)T * D * 4), dw = gpu_up(w, D * 4);
		haccel__dptr db = gpu_up(b, D * 4), dy = gpu_alloc((size_t)T * D * 4);

		haccel__cpu_rmsnorm(want, x, w, T, D, 1e-6f);
		KTAP_ASSERT_EQ(haccel__cuda_rmsnorm(g, NULL, dy, dx, dw, T, D, 1e-6f), 0);
		gpu_down(got, dy, (size_t)T * D * 4);
		KTAP_EXPECT(gpu_close_enough("rmsnorm", got, want, (size_t)T * D, 1e-6, 1e-5));
		haccel__cpu_rmsnorm(want, x, NULL, T, D, 1e-6f);
		KTAP_ASSERT_EQ(haccel__cuda_rmsnorm(g, NULL, dy, dx, 0, T, D, 1e-6f), 0);
		gpu_down(got, dy, (size_t)T * D * 4);
		KTAP_EXPECT(gpu_close_enough("rmsnorm w=1", got, want, (size_t)T * D, 1e-6, 1e-5));
		haccel__cpu_layernorm(want, x, w, b, T, D, 1e-6f);
		KTAP_ASSERT_EQ(haccel__cuda_layernorm(g, NULL, dy, dx, dw, db, T, D, 1e-6f), 0);
		gpu_down(got, dy, (size_t)T * D * 4);
		/* D = 1: x - mean is exactly 0 on both sides. */
		KTAP_EXPECT(gpu_close_enough("layernorm", got, want, (size_t)T * D, 1e-5, 1e-4));
		free(x), free(w), free(b), free(want), free(got);
	}
	gpu_close();
}

/* Embedding rows are copied exactly; SwiGLU and scale within 1e-6. */
static void test_embed_swiglu(void)
{
	struct haccel__gpu *g = gpu_open();
	uint32_t V = 300, D = 96, T = 40;
	float *table = rnd((size_t)V * D, -1, 1), *want = malloc((size_t)T * D * 4);
	float *got = malloc((size_t)T * D * 4);
	int32_t tok[40];

	for (uint32_t t = 0; t < T; t++)
		tok[t] = (int32_t)ktap_rand_below(V);
	haccel__dptr dt = gpu_up(table, (size_t)V * D * 4), dtok = gpu_up(tok, sizeof(tok));
	haccel__dptr dy = gpu_alloc((size_t)T * D * 4);
	haccel__cpu_embed(want, table, tok, T, D);
	KTAP_ASSERT_EQ(haccel__cuda_embed(g, NULL, dy, dt, dtok, T, D), 0);
	gpu_down(got, dy, (size_t)T * D * 4);
	KTAP_EXPECT(memcmp(got, want, (size_t)T * D * 4) == 0);

	size_t n = 100003;
	float *a = rnd(n, -12, 12), *b = rnd(n, -2, 2), *w2 = malloc(n * 4), *g2 = malloc(n * 4);
	haccel__dptr da = gpu_up(a, n * 4), dbb = gpu_up(b, n * 4), dz = gpu_alloc(n * 4);
	haccel__cpu_swiglu(w2, a, b, n);
	KTAP_ASSERT_EQ(haccel__cuda_swiglu(g, NULL, dz, da, dbb, n), 0);
	gpu_down(g2, dz, n * 4);
	KTAP_EXPECT(gpu_close_enough("swiglu", g2, w2, n, 1e-6, 1e-5));
	KTAP_ASSERT_EQ(haccel__cuda_scale(g, NULL, dz, da, 0.25f, n), 0);
	gpu_down(g2, dz, n * 4);
	for (size_t i = 0; i < n; i++)
		w2[i] = a[i] * 0.25f;
	KTAP_EXPECT(memcmp(g2, w2, n * 4) == 0);

	/* copy_rows: the second half of each row. */
	KTAP_ASSERT_EQ(haccel__cuda_copy_rows(g, NULL, dy, D / 2, dt + D / 2 * 4, D, T, D / 2), 0);
	gpu_down(got, dy, (size_t)T * D / 2 * 4);
	for (uint32_t t = 0; t < T; t++)
		KTAP_EXPECT(memcmp(got + (size_t)t * (D / 2), table + (size_t)t * D + D / 2,
				   D / 2 * 4) == 0);
	free(table), free(want), free(got), free(a), free(b), free(w2), free(g2);
	gpu_close();
}

/* bf16 conversion matches the format's converter bit for bit, NaN and
 * infinities and every rounding tie included. */
static void test_bf16(void)
{
	struct haccel__gpu *g = gpu_open();
	size_t n = 1 << 20;
	uint32_t *x = malloc(n * 4);
	uint16_t *got = malloc(n * 2);

	for (size_t i = 0; i < n; i++)
		x[i] = (uint32_t)ktap_rand();
	/* Ties, halfway+1, NaNs, infinities, zeros. */
	x[0] = 0x3f808000u, x[1] = 0x3f818000u, x[2] = 0x7f800000u, x[3] = 0xff800000u;
	x[4] = 0x7fc00001u, x[5] = 0xff800001u, x[6] = 0, x[7] = 0x80000000u;
	x[8] = 0x7f7fffffu, x[9] = 0x00008000u, x[10] = 0x3f808001u;
	haccel__dptr dx = gpu_up(x, n * 4), dy = gpu_alloc(n * 2);
	KTAP_ASSERT_EQ(haccel__cuda_to_bf16(g, NULL, dy, dx, n), 0);
	gpu_down(got, dy, n * 2);
	size_t bad = 0;
	for (size_t i = 0; i < n; i++) {
		float f;
		memcpy(&f, &x[i], 4);
		uint16_t want = haccel__bf16_from_float(f);
		int both_nan = isnan(f) && (got[i] & 0x7f80) == 0x7f80 && (got[i] & 0x7f);
		if (got[i] != want && !(both_nan && (got[i] & 0x8000) == (want & 0x8000)))
			if (bad++ < 5)
				ktap_diag("bf16(0x%08x): got 0x%04x want 0x%04x", x[i], got[i], want);
	}
	KTAP_EXPECT_EQ(bad, 0);
	free(x), free(got);
	gpu_close();
}

/* The residual mix over 1..9 sources, 2e-5 relative. */
static void test_attn_res_mix(void)
{
	struct haccel__gpu *g = gpu_open();
	uint32_t T = 6, D = 1024;

	for (uint32_t ns = 1; ns <= 9; ns += 4) {
		float *src[9], *q = rnd(D, -1, 1), *nw = rnd(D, 0.5f, 1.5f);
		float *want = malloc((size_t)T * D * 4), *got = malloc((size_t)T * D * 4);
		haccel__dptr dsrc[9];

		for (uint32_t i = 0; i < ns; i++) {
			src[i] = rnd((size_t)T * D, -2, 2);
			dsrc[i] = gpu_up(src[i], (size_t)T * D * 4);
		}
		haccel__dptr dlist = gpu_up(dsrc, ns * sizeof(haccel__dptr));
		haccel__dptr dq = gpu_up(q, D * 4), dn = gpu_up(nw, D * 4);
		haccel__dptr dh = gpu_alloc((size_t)T * D * 4);
		haccel__cpu_attn_res_mix(want, (const float *const *)src, ns, q, nw, T, D, 1e-6f);
		KTAP_ASSERT_EQ(haccel__cuda_attn_res_mix(g, NULL, dh, dlist, ns, dq, dn, T, D, 1e-6f),
			       0);
		gpu_down(got, dh, (size_t)T * D * 4);
		KTAP_EXPECT(gpu_close_enough("attn_res_mix", got, want, (size_t)T * D, 1e-5, 2e-5));
		for (uint32_t i = 0; i < ns; i++)
			free(src[i]);
		free(q), free(nw), free(want), free(got);
	}
	gpu_close();
}

/* argmax: random rows, planted ties (smaller index wins) and NaNs. */
static void test_argmax(void)
{
	struct haccel__gpu *g = gpu_open();
	uint32_t R = 8, V = 151936;
	float *x = rnd((size_t)R * V, -10, 10);
	int32_t got[8], want[8];

	x[3 * (size_t)V + 777] = 50.0f, x[3 * (size_t)V + 70000] = 50.0f;
	for (uint32_t i = 0; i < V; i += 3)
		x[5 * (size_t)V + i] = NAN;
	for (uint32_t i = 0; i < V; i++)
		x[6 * (size_t)V + i] = 1.0f;
	for (uint32_t r = 0; r < R; r++) {
		want[r] = -1;
		for (uint32_t i = 0; i < V; i++) {
			float v = x[(size_t)r * V + i];
			if (!isnan(v) && (want[r] < 0 || v > x[(size_t)r * V + (uint32_t)want[r]]))
				want[r] = (int32_t)i;
		}
	}
	haccel__dptr dx = gpu_up(x, (size_t)R * V * 4), dout = gpu_alloc(sizeof(got));
	KTAP_ASSERT_EQ(haccel__cuda_argmax(g, NULL, dout, dx, R, V), 0);
	gpu_down(got, dout, sizeof(got));
	for (uint32_t r = 0; r < R; r++)
		KTAP_EXPECT_EQ(got[r], want[r]);
	KTAP_EXPECT_EQ(got[3], 777);
	KTAP_EXPECT_EQ(got[6], 0);
	free(x);
	gpu_close();
}

static const struct ktap_case cases[] = {
	KTAP_CASE(test_norms),
	KTAP_CASE(test_embed_swiglu),
	KTAP_CASE(test_bf16),
	KTAP_CASE(test_attn_res_mix),
	KTAP_CASE(test_argmax),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
