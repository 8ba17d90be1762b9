// SPDX-License-Identifier: MIT
/* GPU common ops (norms, embedding, SwiGLU, residual mix, bf16, argmax,
 * the load-time conversion, the block-table scatter) against the CPU ops
 * on the same inputs. Skips with no GPU. */
#include "config.h"

#include <pthread.h>
#include <stdio.h>

#include "gpu-util.h"
#include "gpu/blas.h"
#include "model/cpu/ops.h"
#include "model/format.h"
#include "model/model_priv.h"

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

/* Norms over odd widths, with and without weights: rmsnorm within 1e-6
 * absolute plus 1e-5 relative, layernorm (two fp32 passes over the row,
 * mean then variance, and a bias added after) within 1e-5 absolute plus
 * 1e-4 relative. */
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
		/* Fused with the bf16 rounding: the bits of rmsnorm then
		 * to_bf16 on the GPU, and within (1e-5 + 2^-8) |want| of the
		 * CPU's norm: 1e-5 for the fp32 norm, 2^-8 for the rounding to
		 * nearest (half a bf16 step is at most 2^-8 of the value); a NaN
		 * counts as off. */
		{
			size_t n = (size_t)T * D;
			uint16_t *gb = malloc(n * 2), *fb = malloc(n * 2);
			haccel__dptr dyb = gpu_alloc(n * 2), dref = gpu_alloc(n * 2);
			uint32_t bad = 0;

			KTAP_ASSERT(gb && fb);
			haccel__cpu_rmsnorm(want, x, w, T, D, 1e-6f);
			KTAP_ASSERT_EQ(haccel__cuda_rmsnorm(g, NULL, dy, dx, dw, T, D, 1e-6f), 0);
			KTAP_ASSERT_EQ(haccel__cuda_to_bf16(g, NULL, dref, dy, n), 0);
			KTAP_ASSERT_EQ(haccel__cuda_rmsnorm_bf16(g, NULL, dyb, dx, dw, T, D, 1e-6f), 0);
			gpu_down(gb, dref, n * 2);
			gpu_down(fb, dyb, n * 2);
			KTAP_EXPECT(memcmp(gb, fb, n * 2) == 0);
			for (size_t k = 0; k < n; k++) {
				float v = haccel__bf16_to_float(fb[k]);

				if (!(fabsf(v - want[k]) <=
				      1e-5f * fabsf(want[k]) + 0x1p-8f * fabsf(want[k])))
					bad++;
			}
			if (bad)
				ktap_diag("rmsnorm_bf16 D %u: %u values off the CPU's", D, bad);
			KTAP_EXPECT(bad == 0);
			free(gb), free(fb);
		}
		/* Split out of wider rows (DSA's kva): the norm's bits, and the
		 * rest of each row copied. */
		{
			uint32_t n2 = D % 3 + 5, ld = D + n2 + 3;
			float *xs = rnd((size_t)T * ld, -3, 3), *g2 = malloc((size_t)T * n2 * 4);
			float *ref = malloc((size_t)T * D * 4);
			haccel__dptr dxs = gpu_up(xs, (size_t)T * ld * 4);
			haccel__dptr dy2 = gpu_alloc((size_t)T * n2 * 4);
			haccel__dptr dxr = gpu_alloc((size_t)T * D * 4);
			int same = 1;

			KTAP_ASSERT(g2 && ref);
			KTAP_ASSERT_EQ(haccel__cuda_rmsnorm_split(g, NULL, dy, dxs, ld, dw, T, D,
								  1e-6f, dy2, n2),
				       0);
			gpu_down(got, dy, (size_t)T * D * 4);
			gpu_down(g2, dy2, (size_t)T * n2 * 4);
			KTAP_ASSERT_EQ(haccel__cuda_copy_rows(g, NULL, dxr, D, dxs, ld, T, D), 0);
			KTAP_ASSERT_EQ(haccel__cuda_rmsnorm(g, NULL, dxr, dxr, dw, T, D, 1e-6f), 0);
			gpu_down(ref, dxr, (size_t)T * D * 4);
			KTAP_EXPECT(memcmp(got, ref, (size_t)T * D * 4) == 0);
			/* and within the norm's tolerance of the CPU's norm of
			 * the first D columns */
			for (uint32_t t = 0; t < T; t++)
				memcpy(ref + (size_t)t * D, xs + (size_t)t * ld, D * 4);
			haccel__cpu_rmsnorm(ref, ref, w, T, D, 1e-6f);
			KTAP_EXPECT(gpu_close_enough("rmsnorm_split", got, ref, (size_t)T * D, 1e-6,
						     1e-5));
			for (uint32_t t = 0; t < T; t++)
				same &= !memcmp(g2 + (size_t)t * n2, xs + (size_t)t * ld + D,
						n2 * 4);
			KTAP_EXPECT(same);
			KTAP_EXPECT_EQ(haccel__cuda_rmsnorm_split(g, NULL, dy, dxs, D + n2 - 1, dw,
								  T, D, 1e-6f, dy2, n2),
				       -EINVAL);
			free(xs), free(g2), free(ref);
		}
		haccel__cpu_layernorm(want, x, w, b, T, D, 1e-6f);
		KTAP_ASSERT_EQ(haccel__cuda_layernorm(g, NULL, dy, dx, dw, db, T, D, 1e-6f), 0);
		gpu_down(got, dy, (size_t)T * D * 4);
		/* D = 1: x - mean is exactly 0 on both sides. */
		KTAP_EXPECT(gpu_close_enough("layernorm", got, want, (size_t)T * D, 1e-5, 1e-4));
		free(x), free(w), free(b), free(want), free(got);
	}
	gpu_close();
}

/* Embedding rows (bf16 table) are exact; SwiGLU, add and scale within 1e-6. */
static void test_embed_swiglu(void)
{
	struct haccel__gpu *g = gpu_open();
	uint32_t V = 300, D = 96, T = 40;
	float *table = rnd((size_t)V * D, -1, 1), *want = malloc((size_t)T * D * 4);
	float *got = malloc((size_t)T * D * 4);
	uint16_t *tb = malloc((size_t)V * D * 2);
	int32_t tok[40];

	for (size_t i = 0; i < (size_t)V * D; i++) {
		tb[i] = haccel__bf16_from_float(table[i]);
		table[i] = haccel__bf16_to_float(tb[i]);
	}
	for (uint32_t t = 0; t < T; t++)
		tok[t] = (int32_t)ktap_rand_below(V);
	haccel__dptr dtb = gpu_up(tb, (size_t)V * D * 2), dtok = gpu_up(tok, sizeof(tok));
	haccel__dptr dt = gpu_up(table, (size_t)V * D * 4);
	haccel__dptr dy = gpu_alloc((size_t)T * D * 4);
	haccel__cpu_embed(want, table, tok, T, D);
	KTAP_ASSERT_EQ(haccel__cuda_embed(g, NULL, dy, dtb, dtok, T, D), 0);
	gpu_down(got, dy, (size_t)T * D * 4);
	KTAP_EXPECT(memcmp(got, want, (size_t)T * D * 4) == 0);

	/* gather_rows: rows in the order of tok. */
	KTAP_ASSERT_EQ(haccel__cuda_gather_rows(g, NULL, dy, dt, dtok, T, D), 0);
	gpu_down(got, dy, (size_t)T * D * 4);
	KTAP_EXPECT(memcmp(got, want, (size_t)T * D * 4) == 0);
	free(tb);

	size_t n = 100003;
	float *a = rnd(n, -12, 12), *b = rnd(n, -2, 2), *w2 = malloc(n * 4), *g2 = malloc(n * 4);
	haccel__dptr da = gpu_up(a, n * 4), dbb = gpu_up(b, n * 4), dz = gpu_alloc(n * 4);
	haccel__cpu_swiglu(w2, a, b, n);
	KTAP_ASSERT_EQ(haccel__cuda_swiglu(g, NULL, dz, da, dbb, n), 0);
	gpu_down(g2, dz, n * 4);
	KTAP_EXPECT(gpu_close_enough("swiglu", g2, w2, n, 1e-6, 1e-5));
	/* Fused with the bf16 rounding: the bits of swiglu then to_bf16, and
	 * within 1e-6 + (1e-5 + 2^-8) |want| of the CPU's: swiglu's own
	 * tolerance, and half a bf16 step (at most 2^-8 of the value); a NaN
	 * counts as off. */
	{
		haccel__dptr dzb = gpu_alloc(n * 2), dref = gpu_alloc(n * 2);
		uint16_t *zb = malloc(n * 2);
		size_t bad = 0;

		KTAP_ASSERT(zb);
		KTAP_ASSERT_EQ(haccel__cuda_swiglu_bf16(g, NULL, dzb, da, dbb, n), 0);
		KTAP_ASSERT_EQ(haccel__cuda_to_bf16(g, NULL, dref, dz, n), 0);
		KTAP_EXPECT(gpu_same(dzb, dref, n * 2));
		gpu_down(zb, dzb, n * 2);
		for (size_t i = 0; i < n; i++) {
			float v = haccel__bf16_to_float(zb[i]);

			if (!(fabsf(v - w2[i]) <= 1e-6f + (1e-5f + 0x1p-8f) * fabsf(w2[i])))
				bad++;
		}
		if (bad)
			ktap_diag("swiglu_bf16: %zu of %zu values off the CPU's", bad, n);
		KTAP_EXPECT(bad == 0);
		free(zb);
	}
	KTAP_ASSERT_EQ(haccel__cuda_scale(g, NULL, dz, da, 0.25f, n), 0);
	gpu_down(g2, dz, n * 4);
	for (size_t i = 0; i < n; i++)
		w2[i] = a[i] * 0.25f;
	KTAP_EXPECT(memcmp(g2, w2, n * 4) == 0);
	KTAP_ASSERT_EQ(haccel__cuda_add(g, NULL, dz, da, dbb, n), 0);
	gpu_down(g2, dz, n * 4);
	for (size_t i = 0; i < n; i++)
		w2[i] = a[i] + b[i];
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

	/* With the tail of each row copied (DSA's queries: rows of 192, the
	 * last 64 out): the same bf16 bits, the tails exact. */
	{
		const uint32_t w = 192, c0 = 128;
		size_t rows = n / w, nt = rows * (w - c0);
		uint16_t *got2 = malloc(rows * w * 2);
		uint32_t *tail = malloc(nt * 4);
		haccel__dptr dy2 = gpu_alloc(rows * w * 2), dt = gpu_alloc(nt * 4);
		int same = 1;

		KTAP_ASSERT(got2 && tail);
		KTAP_ASSERT_EQ(haccel__cuda_to_bf16_tail(g, NULL, dy2, dx, rows, w, c0, dt), 0);
		gpu_down(got2, dy2, rows * w * 2);
		gpu_down(tail, dt, nt * 4);
		KTAP_EXPECT(memcmp(got2, got, rows * w * 2) == 0);
		for (size_t r = 0; r < rows; r++)
			same &= !memcmp(tail + r * (w - c0), x + r * w + c0, (w - c0) * 4);
		KTAP_EXPECT(same);
		KTAP_EXPECT_EQ(haccel__cuda_to_bf16_tail(g, NULL, dy2, dx, rows, w, w + 1, dt),
			       -EINVAL);
		free(got2), free(tail);
	}
	free(x), free(got);
	gpu_close();
}

/*
 * The load-time conversion (haccel_convert) against the CPU loader's
 * haccel__weights_to_f32: every stored type (f32, bf16, f16 from random
 * bits, so subnormals, infinities and NaNs included) to fp32, bit for bit,
 * and to bf16, the bits of haccel__bf16_from_float of that fp32 (a NaN
 * as any NaN: its sign and payload are the hardware's), from
 * sources at every byte offset mod 4; n = 0 writes nothing, and a bad
 * type is -EINVAL.
 */
static void test_convert(void)
{
	struct haccel__gpu *g = gpu_open();
	static const uint32_t dtypes[3] = { HACCEL_DTYPE_F32, HACCEL_DTYPE_BF16, HACCEL_DTYPE_F16 };
	const size_t n = 100003;
	uint8_t *src = malloc(n * 4 + 4);
	float *want = malloc(n * 4), *got = malloc(n * 4);
	uint16_t *gotb = malloc(n * 2);
	haccel__dptr ds = gpu_alloc(n * 4 + 4), dd = gpu_alloc(n * 4);

	KTAP_ASSERT(src && want && got && gotb);
	for (int st = 0; st < 3; st++) {
		size_t sz = st ? 2 : 4, bad32 = 0, bad16 = 0;

		for (size_t i = 0; i < n * sz + 4; i++)
			src[i] = (uint8_t)ktap_rand();
		for (uint32_t off = 0; off < 4; off++) {
			haccel__weights_to_f32(want, src + off, n, dtypes[st]);
			KTAP_ASSERT_EQ(g->cu->MemcpyHtoDAsync(ds, src, n * sz + 4, g->stream), 0);
			KTAP_ASSERT_EQ(haccel__cuda_convert(g, NULL, dd, 0, ds + off, st, n), 0);
			gpu_down(got, dd, n * 4);
			for (size_t i = 0; i < n; i++)
				if (memcmp(&got[i], &want[i], 4) && !(isnan(got[i]) && isnan(want[i])) &&
				    bad32++ < 3)
					ktap_diag("type %d offset %u value %zu: got %a want %a", st, off, i,
						  (double)got[i], (double)want[i]);
			KTAP_ASSERT_EQ(haccel__cuda_convert(g, NULL, dd, 1, ds + off, st, n), 0);
			gpu_down(gotb, dd, n * 2);
			for (size_t i = 0; i < n; i++) {
				uint16_t w = haccel__bf16_from_float(want[i]);
				bool nan_ok = isnan(want[i]) && (gotb[i] & 0x7f80) == 0x7f80 &&
					      (gotb[i] & 0x7f);

				if (gotb[i] != w && !nan_ok && bad16++ < 3)
					ktap_diag("type %d offset %u value %zu: bf16 0x%04x want 0x%04x",
						  st, off, i, gotb[i], w);
			}
		}
		ktap_diag("from type %d: %zu fp32 and %zu bf16 values off", st, bad32, bad16);
		KTAP_EXPECT_EQ(bad32, 0);
		KTAP_EXPECT_EQ(bad16, 0);
	}
	/* Nothing to convert: the destination keeps its bytes. */
	KTAP_ASSERT_EQ(g->cu->MemsetD8Async(dd, 0x5a, n * 4, g->stream), 0);
	KTAP_EXPECT_EQ(haccel__cuda_convert(g, NULL, dd, 0, ds, 0, 0), 0);
	gpu_down(got, dd, n * 4);
	size_t kept = 0;

	for (size_t i = 0; i < n * 4; i++)
		kept += ((uint8_t *)got)[i] == 0x5a;
	KTAP_EXPECT_EQ(kept, n * 4);
	KTAP_EXPECT_EQ(haccel__cuda_convert(g, NULL, dd, 2, ds, 0, n), -EINVAL);
	KTAP_EXPECT_EQ(haccel__cuda_convert(g, NULL, dd, 0, ds, 3, n), -EINVAL);
	KTAP_EXPECT_EQ(haccel__cuda_convert(g, NULL, dd, -1, ds, 0, n), -EINVAL);
	free(src), free(want), free(got), free(gotb);
	gpu_close();
}

/*
 * The block-table scatter (haccel_scatter_u32, one block of 256 threads):
 * dst[upd[1 + 2i]] = upd[2 + 2i] for i < upd[0], against the same on the
 * CPU, with 0, 1, 255, 256, 257 and 3,000 updates at distinct random
 * indices of a table of 50,000 entries; every other entry keeps its value.
 */
static void test_scatter_u32(void)
{
	struct haccel__gpu *g = gpu_open();
	static const uint32_t counts[] = { 0, 1, 255, 256, 257, 3000 };
	const uint32_t nt = 50000;
	uint32_t *table = malloc(nt * 4), *want = malloc(nt * 4), *got = malloc(nt * 4);
	uint32_t *upd = malloc((1 + 2 * 3000) * 4);
	uint8_t *used = calloc(nt, 1);
	haccel__dptr dt = gpu_alloc(nt * 4), du = gpu_alloc((1 + 2 * 3000) * 4);

	KTAP_ASSERT(table && want && got && upd && used);
	for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
		uint32_t n = counts[c];

		for (uint32_t i = 0; i < nt; i++)
			table[i] = (uint32_t)ktap_rand();
		memcpy(want, table, nt * 4);
		memset(used, 0, nt);
		upd[0] = n;
		for (uint32_t i = 0; i < n; i++) {
			uint32_t at;

			do
				at = (uint32_t)ktap_rand_below(nt);
			while (used[at]);
			used[at] = 1;
			upd[1 + 2 * i] = at;
			upd[2 + 2 * i] = (uint32_t)ktap_rand();
			want[at] = upd[2 + 2 * i];
		}
		KTAP_ASSERT_EQ(g->cu->MemcpyHtoDAsync(dt, table, nt * 4, g->stream), 0);
		KTAP_ASSERT_EQ(g->cu->MemcpyHtoDAsync(du, upd, (1 + 2 * (size_t)n) * 4, g->stream), 0);
		KTAP_ASSERT_EQ(haccel__cuda_scatter_u32(g, NULL, dt, du), 0);
		gpu_down(got, dt, nt * 4);
		size_t bad = 0;

		for (uint32_t i = 0; i < nt; i++)
			bad += got[i] != want[i];
		if (bad)
			ktap_diag("%u updates: %zu of %u entries differ", n, bad, nt);
		KTAP_EXPECT_EQ(bad, 0);
	}
	free(table), free(want), free(got), free(upd), free(used);
	gpu_close();
}

/*
 * The residual mix, 2e-5 relative, on each of its kernels: at most 8 or
 * 16 sources of whole 16-byte chunks (arm_wide: a block a token, all in
 * registers; 1 token, 6, 40, 140; 32 to 512 threads, ragged last warps);
 * more sources for up to 8 tokens (a cluster of 8 blocks a token; D split
 * over a cluster's blocks evenly (1024), raggedly (2088, 100: slices
 * shorter than a warp) and in several tiles of 256 a block (5000)); more
 * tokens (a block a token: with at most 8 sources and 2048 dims, or rows
 * of 1002 dims, the sources held in registers, else read twice).
 * The query is scaled to 0.05 sqrt(1024 / D), so
 * the logits spread by about one unit: with logits of tens the weights
 * move by the fp32 rounding of the logit sums themselves (a few 1e-5 of
 * them, on the CPU as on the GPU), beyond any fixed tolerance.
 */
static void test_attn_res_mix(void)
{
	struct haccel__gpu *g = gpu_open();
	static const uint32_t cfg[][3] = {
		{ 6, 1024, 1 },   { 6, 1024, 5 },   { 6, 1024, 9 },   { 6, 2088, 33 },
		{ 6, 100, 3 },    { 6, 5000, 64 },  { 40, 1024, 9 },  { 40, 2088, 33 },
		{ 140, 2088, 33 }, { 40, 2048, 5 }, { 140, 1000, 8 }, { 40, 100, 1 },
		{ 1, 2048, 8 },   { 64, 2048, 16 }, { 3, 4096, 7 },   { 40, 4100, 8 },
		{ 6, 1002, 5 },   { 40, 1002, 5 },  { 1, 2044, 16 },  { 140, 8, 2 },
		{ 6, 1024, 17 },  { 6, 100, 20 },
	};

	for (unsigned int c = 0; c < sizeof(cfg) / sizeof(cfg[0]); c++) {
		uint32_t T = cfg[c][0], D = cfg[c][1], ns = cfg[c][2];
		float qs = 0.05f * sqrtf(1024.0f / (float)D);
		float *all = rnd((size_t)ns * T * D, -2, 2), *q = rnd(D, -qs, qs);
		float *nw = rnd(D, 0.5f, 1.5f), *src[64];
		float *want = malloc((size_t)T * D * 4), *got = malloc((size_t)T * D * 4);
		unsigned int mark = gpu_n_bufs;

		for (uint32_t i = 0; i < ns; i++)
			src[i] = all + (size_t)i * T * D;
		haccel__dptr dall = gpu_up(all, (size_t)ns * T * D * 4);
		haccel__dptr dq = gpu_up(q, D * 4), dn = gpu_up(nw, D * 4);
		haccel__dptr dh = gpu_alloc((size_t)T * D * 4);
		haccel__cpu_attn_res_mix(want, (const float *const *)src, ns, q, nw, T, D, 1e-6f);
		KTAP_ASSERT_EQ(haccel__cuda_attn_res_mix(g, NULL, dh, dall, (uint64_t)T * D, ns, dq, dn,
							 T, D, 1e-6f), 0);
		gpu_down(got, dh, (size_t)T * D * 4);
		ktap_diag("attn_res_mix: T %u D %u sources %u", T, D, ns);
		KTAP_EXPECT(gpu_close_enough("attn_res_mix", got, want, (size_t)T * D, 1e-5, 2e-5));

		/* Fused with the next layer's input norm in bf16: h the same
		 * bits; the bf16 rows within 2^-7 |b| of rmsnorm_bf16's b on h
		 * (the sum of squares in another order): one bf16 step of b at
		 * the bottom of its binade, nearly two at the top; a NaN counts
		 * as far. */
		size_t n = (size_t)T * D;
		float *ow = rnd(D, 0.5f, 1.5f), *got2 = malloc(n * 4);
		uint16_t *fb = malloc(n * 2), *rb = malloc(n * 2);
		haccel__dptr dow = gpu_up(ow, D * 4), dh2 = gpu_alloc(n * 4);
		haccel__dptr dyb = gpu_alloc(n * 2), dref = gpu_alloc(n * 2);
		uint32_t far = 0;

		KTAP_ASSERT(got2 && fb && rb);
		KTAP_ASSERT_EQ(haccel__cuda_attn_res_mix_norm(g, NULL, dyb, dh2, dall, (uint64_t)T * D,
							      ns, dq, dn, dow, T, D, 1e-6f), 0);
		KTAP_ASSERT_EQ(haccel__cuda_rmsnorm_bf16(g, NULL, dref, dh, dow, T, D, 1e-6f), 0);
		gpu_down(got2, dh2, n * 4);
		gpu_down(fb, dyb, n * 2);
		gpu_down(rb, dref, n * 2);
		KTAP_EXPECT(memcmp(got2, got, n * 4) == 0);
		for (size_t k = 0; k < n; k++) {
			float a = haccel__bf16_to_float(fb[k]), b = haccel__bf16_to_float(rb[k]);

			if (!(fabsf(a - b) <= 0x1p-7f * fabsf(b)))
				far++;
		}
		KTAP_EXPECT_EQ(far, 0);
		free(ow), free(got2), free(fb), free(rb);
		free(all), free(q), free(nw), free(want), free(got);
		gpu_free_to(mark);
	}
	KTAP_EXPECT_EQ(haccel__cuda_attn_res_mix(g, NULL, 0, 0, 0, 65, 0, 0, 6, 1024, 1e-6f),
		       -EINVAL);
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

/* Round to bf16 in place; return the bf16 codes. */
static uint16_t *to_bf16(float *x, size_t n)
{
	uint16_t *h = malloc(n * 2 + 2);

	KTAP_ASSERT(h != NULL);
	for (size_t i = 0; i < n; i++) {
		h[i] = haccel__bf16_from_float(x[i]);
		x[i] = haccel__bf16_to_float(h[i]);
	}
	return h;
}

/*
 * Linear layers (through haccel__gemm_run: the few-row kernel up to 16 rows,
 * cuBLASLt beyond) against the CPU matmul on bf16-exact inputs (only the
 * order of the fp32 sums differs): |err| <= 4e-5 sqrt(K) + 1e-4 |want|
 * (twice the absolute part where C is accumulated into). The outputs are
 * sums of K products of values uniform in [-1, 1], of RMS sqrt(K) / 3, so
 * the absolute part is 1.2e-4 of that RMS at any K, over ten times what
 * two fp32 summation orders differ by (a random walk of K roundings; in
 * a simulation, RMS about 3e-9 K and at most 2e-4 over 2000 sums of K =
 * 5632, where the bound is 3e-3). Decode-sized (1 to 64 rows) and
 * prefill-sized shapes, N and K of no particular alignment, x rows
 * strided (the pad column) as well as packed; each shape without and with
 * bias.
 */
static void test_linear(void)
{
	struct haccel__gpu *g = gpu_open();
	const uint32_t shapes[][4] = { { 1, 256, 128, 0 },   { 7, 1000, 96, 0 },
				       { 64, 4096, 4096, 0 }, { 300, 160, 2048, 0 },
				       { 64, 5632, 2048, 8 }, { 3, 2050, 5632, 0 },
				       { 17, 200, 40, 0 },    { 33, 300, 2080, 24 } };

	for (unsigned int i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		uint32_t T = shapes[i][0], N = shapes[i][1], K = shapes[i][2], ld = K + shapes[i][3];
		float *x = rnd((size_t)T * K, -1, 1), *w = rnd((size_t)N * K, -1, 1);
		float *bias = rnd(N, -1, 1);
		float *want = malloc((size_t)T * N * 4), *got = malloc((size_t)T * N * 4);
		uint16_t *xb = to_bf16(x, (size_t)T * K), *wb = to_bf16(w, (size_t)N * K);
		uint16_t *xs = calloc((size_t)T * ld, 2);

		KTAP_ASSERT(xs != NULL);
		for (uint32_t t = 0; t < T; t++)
			memcpy(xs + (size_t)t * ld, xb + (size_t)t * K, (size_t)K * 2);
		haccel__dptr dx = gpu_up(xs, (size_t)T * ld * 2), dw = gpu_up(wb, (size_t)N * K * 2);
		haccel__dptr dbias = gpu_up(bias, N * 4), dy = gpu_alloc((size_t)T * N * 4);
		double atol = 1e-5 * sqrt((double)K) * 4;

		ktap_diag("linear: %u x %u x %u, x rows of %u", T, N, K, ld);
		haccel__cpu_matmul(want, x, w, NULL, T, N, K);
		KTAP_ASSERT_EQ(haccel__cuda_linear(g, NULL, dy, dx, ld, dw, 0, T, N, K), 0);
		gpu_down(got, dy, (size_t)T * N * 4);
		KTAP_EXPECT(gpu_close_enough("linear", got, want, (size_t)T * N, atol, 1e-4));
		haccel__cpu_matmul(want, x, w, bias, T, N, K);
		KTAP_ASSERT_EQ(haccel__cuda_linear(g, NULL, dy, dx, ld, dw, dbias, T, N, K), 0);
		gpu_down(got, dy, (size_t)T * N * 4);
		KTAP_EXPECT(gpu_close_enough("linear+bias", got, want, (size_t)T * N, atol, 1e-4));
		/* Accumulating into what is there (beta = 1, in place): the
		 * last result plus x W^T. */
		struct haccel__gemm acc = {
			.M = T, .N = N, .K = K, .A = dx, .B = dw, .C = dy, .lda = ld, .ldb = K,
			.ldc = N, .batch = 1, .trans_b = 1, .accumulate = 1,
		};
		haccel__cpu_matmul(want, x, w, NULL, T, N, K);
		for (size_t k = 0; k < (size_t)T * N; k++)
			want[k] += got[k];
		KTAP_ASSERT_EQ(haccel__gemm_run(g, NULL, &acc), 0);
		gpu_down(got, dy, (size_t)T * N * 4);
		KTAP_EXPECT(gpu_close_enough("linear accumulate", got, want, (size_t)T * N, 2 * atol,
					     1e-4));
		free(x), free(w), free(bias), free(want), free(got), free(xb), free(wb), free(xs);
	}
	gpu_close();
}

/*
 * The strided batched form the absorbed attention uses: per head h,
 * C[t][h][:] = A[t][h][0..K) . B_h[K][N] with A rows strided by H * lda.
 */
static void test_gemm_batched(void)
{
	struct haccel__gpu *g = gpu_open();
	uint32_t T = 5, H = 4, K = 48, N = 512, ah = 64; /* a head's row in A is ah wide */
	float *a = rnd((size_t)T * H * ah, -1, 1), *b = rnd((size_t)H * K * N, -1, 1);
	float *want = calloc((size_t)T * H * N, 4), *got = malloc((size_t)T * H * N * 4);
	uint16_t *ab = to_bf16(a, (size_t)T * H * ah), *bb = to_bf16(b, (size_t)H * K * N);

	for (uint32_t t = 0; t < T; t++)
		for (uint32_t h = 0; h < H; h++)
			for (uint32_t n = 0; n < N; n++) {
				float acc = 0.0f;
				for (uint32_t k = 0; k < K; k++)
					acc += a[((size_t)t * H + h) * ah + k] * b[((size_t)h * K + k) * N + n];
				want[((size_t)t * H + h) * N + n] = acc;
			}
	haccel__dptr da = gpu_up(ab, (size_t)T * H * ah * 2), db = gpu_up(bb, (size_t)H * K * N * 2);
	haccel__dptr dc = gpu_alloc((size_t)T * H * N * 4);
	struct haccel__gemm op = {
		.M = T, .N = N, .K = K, .A = da, .B = db, .C = dc,
		.lda = (int64_t)H * ah, .ldb = N, .ldc = (int64_t)H * N,
		.stride_a = ah, .stride_b = (int64_t)K * N, .stride_c = N,
		.batch = H, .trans_b = 0,
	};
	KTAP_ASSERT_EQ(haccel__gemm_run(g, NULL, &op), 0);
	gpu_down(got, dc, (size_t)T * H * N * 4);
	KTAP_EXPECT(gpu_close_enough("batched gemm", got, want, (size_t)T * H * N, 1e-4, 1e-4));

	/* C in bf16 (c_bf16): the sums rounded, so within half a bf16 step
	 * of the fp32 ones (at most 2^-8 of the value), plus their
	 * tolerance; C past the window keeps its bytes. Refused with
	 * accumulate, by cuBLASLt and by the few-row kernel. */
	size_t nb = (size_t)T * H * N + 8;
	uint16_t *cb = malloc(nb * 2), *c0 = malloc(nb * 2);
	float *gf = malloc((size_t)T * H * N * 4);

	KTAP_ASSERT(cb && c0 && gf);
	for (size_t i = 0; i < nb; i++)
		c0[i] = (uint16_t)(0x3f80 + i % 7);
	haccel__dptr dcb = gpu_up(c0, nb * 2);
	struct haccel__gemm ob = op;

	ob.C = dcb;
	ob.c_bf16 = 1;
	KTAP_ASSERT_EQ(haccel__gemm_run(g, NULL, &ob), 0);
	gpu_down(cb, dcb, nb * 2);
	for (size_t i = 0; i < (size_t)T * H * N; i++)
		gf[i] = haccel__bf16_to_float(cb[i]);
	KTAP_EXPECT(gpu_close_enough("batched gemm, bf16 C", gf, want, (size_t)T * H * N, 1e-4,
				     1.0 / 256 + 1e-4));
	KTAP_EXPECT(!memcmp(cb + (size_t)T * H * N, c0 + (size_t)T * H * N, 16));
	ob.accumulate = 1;
	KTAP_EXPECT_EQ(haccel__gemm_run(g, NULL, &ob), -EINVAL);
	ob.trans_b = 1;
	ob.ldb = K;
	ob.N = 64;
	KTAP_EXPECT_EQ(haccel__gemm_few(g, NULL, &ob), -ENOTSUP);
	free(cb), free(c0), free(gf);
	free(a), free(b), free(want), free(got), free(ab), free(bb);
	gpu_close();
}

/*
 * The few-row GEMM kernel (haccel__gemm_few, M <= 16) against the CPU
 * matmul and against cuBLASLt, on bf16-exact inputs, with test_linear's
 * tolerance (4e-5 sqrt(K) + 1e-4 relative, the absolute part doubled where
 * it accumulates into C of [-4, 4]). The shapes reach every edge of its
 * tiling: one token, 8 and 9 (one and two token tiles), 13 and 16; N not
 * a multiple of 16, and N below 16; more 16-row tiles than two an SM, so
 * blocks take several in turn; K not a multiple of 32 or of the 8 warps'
 * runs, K in several steps of a warp, and K too short for every warp to
 * have a run; rows of A and C padded; bias; accumulate; the batched
 * shared-input form linear_n uses. C outside the
 * M x N window keeps its bytes, a second run gives the same bits, and
 * the shapes it does not take are refused (-ENOTSUP) and still run
 * through haccel__gemm_run.
 */
static void test_gemm_few(void)
{
	struct haccel__gpu *g = gpu_open();
	/* M, N, K, pad of A's rows, pad of C's rows, batch */
	const uint32_t shapes[][6] = {
		{ 1, 2048, 2048, 0, 0, 1 }, { 8, 1000, 96, 8, 3, 1 },  { 9, 16, 5632, 0, 0, 1 },
		{ 16, 4097, 2056, 16, 1, 1 }, { 3, 5, 8, 0, 0, 1 },   { 2, 333, 264, 0, 0, 3 },
		{ 16, 48, 128, 8, 0, 2 },   { 13, 2048, 768, 0, 7, 1 }, { 5, 9000, 520, 0, 2, 2 },
		{ 12, 4500, 4104, 0, 0, 1 }, { 1, 32000, 64, 0, 0, 1 },
	};

	for (unsigned int i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		uint32_t T = shapes[i][0], N = shapes[i][1], K = shapes[i][2], nb = shapes[i][5];
		uint32_t lda = K + shapes[i][3], ldc = N + shapes[i][4];
		bool with_bias = i % 2, acc = i % 3 == 2;
		size_t nc = (size_t)nb * T * ldc;
		float *x = rnd((size_t)T * K, -1, 1), *w = rnd((size_t)nb * N * K, -1, 1);
		float *bias = rnd(N, -1, 1), *c0 = rnd(nc, -4, 4);
		float *want = malloc(nc * 4), *got = malloc(nc * 4), *lt = malloc(nc * 4);
		float *y = malloc((size_t)T * N * 4);
		uint16_t *xb = to_bf16(x, (size_t)T * K), *wb = to_bf16(w, (size_t)nb * N * K);
		uint16_t *xs = calloc((size_t)T * lda, 2);
		double atol = 1e-5 * sqrt((double)K) * 4 * (acc ? 2 : 1);
		bool outside_kept = true;

		KTAP_ASSERT(want && got && lt && y && xs);
		for (uint32_t t = 0; t < T; t++)
			memcpy(xs + (size_t)t * lda, xb + (size_t)t * K, (size_t)K * 2);
		memcpy(want, c0, nc * 4);
		for (uint32_t b = 0; b < nb; b++) {
			haccel__cpu_matmul(y, x, w + (size_t)b * N * K, with_bias ? bias : NULL, T,
					   N, K);
			for (uint32_t t = 0; t < T; t++)
				for (uint32_t n = 0; n < N; n++) {
					float *o = want + ((size_t)b * T + t) * ldc + n;
					*o = (acc ? *o : 0.0f) + y[(size_t)t * N + n];
				}
		}
		haccel__dptr dx = gpu_up(xs, (size_t)T * lda * 2);
		haccel__dptr dw = gpu_up(wb, (size_t)nb * N * K * 2), db = gpu_up(bias, N * 4);
		haccel__dptr dc = gpu_up(c0, nc * 4), dl = gpu_up(c0, nc * 4);
		haccel__dptr dr = gpu_up(c0, nc * 4);
		struct haccel__gemm op = {
			.M = T, .N = N, .K = K, .A = dx, .B = dw, .C = dc,
			.bias = with_bias ? db : 0,
			.lda = lda, .ldb = K, .ldc = ldc, .stride_a = 0,
			.stride_b = (int64_t)N * K, .stride_c = (int64_t)T * ldc,
			.batch = nb, .trans_b = 1, .accumulate = acc,
		};

		ktap_diag("few-row gemm: %u x %u x %u, batch %u, A rows of %u, C rows of %u%s%s", T,
			  N, K, nb, lda, ldc, with_bias ? ", bias" : "", acc ? ", accumulate" : "");
		KTAP_ASSERT_EQ(haccel__gemm_few(g, NULL, &op), 0);
		gpu_down(got, dc, nc * 4);
		KTAP_EXPECT(gpu_close_enough("few-row gemm", got, want, nc, atol, 1e-4));
		for (size_t k = 0; k < nc; k++)
			if (k % ldc >= N && memcmp(&got[k], &c0[k], 4))
				outside_kept = false;
		KTAP_EXPECT(outside_kept);
		op.C = dl;
		KTAP_ASSERT_EQ(haccel__gemm_lt(g, NULL, &op), 0);
		gpu_down(lt, dl, nc * 4);
		KTAP_EXPECT(gpu_close_enough("few-row gemm vs cuBLASLt", got, lt, nc, atol, 1e-4));
		op.C = dr;
		KTAP_ASSERT_EQ(haccel__gemm_few(g, NULL, &op), 0);
		KTAP_EXPECT(gpu_same(dc, dr, nc * 4));
		/* C in bf16 (c_bf16, shapes that do not accumulate): the fp32
		 * sums just checked, rounded to nearest even, bit for bit; C
		 * past the window keeps its bytes. With accumulate: refused. */
		uint16_t *cb0 = malloc(nc * 2), *cb = malloc(nc * 2);
		struct haccel__gemm ob = op;
		bool rounded = true, kept = true;

		KTAP_ASSERT(cb0 && cb);
		for (size_t k = 0; k < nc; k++)
			cb0[k] = (uint16_t)(0x3f80 + k % 5);
		ob.C = gpu_up(cb0, nc * 2);
		ob.c_bf16 = 1;
		if (acc) {
			KTAP_EXPECT_EQ(haccel__gemm_few(g, NULL, &ob), -ENOTSUP);
		} else {
			KTAP_ASSERT_EQ(haccel__gemm_few(g, NULL, &ob), 0);
			gpu_down(cb, ob.C, nc * 2);
			for (size_t k = 0; k < nc; k++) {
				if (k % ldc < N)
					rounded &= cb[k] == haccel__bf16_from_float(got[k]);
				else
					kept &= cb[k] == cb0[k];
			}
			KTAP_EXPECT(rounded);
			KTAP_EXPECT(kept);
		}
		free(cb0), free(cb);
		free(x), free(w), free(bias), free(c0), free(want), free(got), free(lt), free(y);
		free(xb), free(wb), free(xs);
	}

	/* Refused: 17 rows, B stored [K][N], K or ldb not a multiple of 8, A
	 * not 16-byte aligned; haccel__gemm_run still runs them (cuBLASLt). */
	uint32_t T = 5, N = 40, K = 36;
	float *x = rnd((size_t)17 * 40, -1, 1), *w = rnd((size_t)N * 40, -1, 1);
	float *want = malloc((size_t)T * N * 4), *got = malloc((size_t)T * N * 4);
	uint16_t *xb = to_bf16(x, (size_t)17 * 40), *wb = to_bf16(w, (size_t)N * 40);
	haccel__dptr dx = gpu_up(xb, (size_t)17 * 40 * 2), dw = gpu_up(wb, (size_t)N * 40 * 2);
	haccel__dptr dc = gpu_alloc((size_t)17 * N * 4);
	struct haccel__gemm base = {
		.M = 8, .N = N, .K = 40, .A = dx, .B = dw, .C = dc, .lda = 40, .ldb = 40,
		.ldc = N, .batch = 1, .trans_b = 1,
	}, op;

	KTAP_ASSERT(want && got);
	op = base;
	op.M = 17;
	KTAP_EXPECT_EQ(haccel__gemm_few(g, NULL, &op), -ENOTSUP);
	op = base;
	op.trans_b = 0;
	op.ldb = N;
	KTAP_EXPECT_EQ(haccel__gemm_few(g, NULL, &op), -ENOTSUP);
	op = base;
	op.K = K;
	KTAP_EXPECT_EQ(haccel__gemm_few(g, NULL, &op), -ENOTSUP);
	op = base;
	op.ldb = 44;
	op.N = N - 4;
	KTAP_EXPECT_EQ(haccel__gemm_few(g, NULL, &op), -ENOTSUP);
	op = base;
	op.A = dx + 2;
	op.K = 32;
	KTAP_EXPECT_EQ(haccel__gemm_few(g, NULL, &op), -ENOTSUP);
	KTAP_EXPECT_EQ(haccel__gemm_few(g, NULL, &base), 0);
	/* K = 36 over rows of 40: the first 36 of each row. */
	for (uint32_t t = 0; t < T; t++)
		for (uint32_t n = 0; n < N; n++) {
			float s = 0.0f;

			for (uint32_t k = 0; k < K; k++)
				s += x[(size_t)t * 40 + k] * w[(size_t)n * 40 + k];
			want[(size_t)t * N + n] = s;
		}
	op = base;
	op.M = T;
	op.K = K;
	KTAP_ASSERT_EQ(haccel__gemm_run(g, NULL, &op), 0);
	gpu_down(got, dc, (size_t)T * N * 4);
	KTAP_EXPECT(gpu_close_enough("refused shape through haccel__gemm_run", got, want,
				     (size_t)T * N, 1e-5 * 6 * 4, 1e-4));
	free(x), free(w), free(want), free(got), free(xb), free(wb);
	gpu_close();
}

/*
 * haccel__gemm_group: GEMMs of one M with their own N, K, strides, bias,
 * C in fp32 or bf16, as one launch. Up to 16 rows each member's C is the
 * bits haccel__gemm_few gives it on its own; at any M it is within
 * test_gemm_few's tolerance of the CPU (4e-5 sqrt(K) + 1e-4 relative, the
 * absolute part doubled with accumulate; a bf16 C also within half a bf16
 * step, 2^-8 of the value), C outside each member's window keeps its
 * bytes, and a second run gives the same bits. A group it does not take
 * is refused with -ENOTSUP and launches nothing.
 */
/* N, K, pad of A's rows, pad of C's rows, bias, C in bf16 (not with
 * accumulate: the case then keeps fp32) */
static const uint32_t grp_mem[][6] = {
	{ 2048, 2048, 0, 0, 0, 0 }, { 128, 2048, 0, 128, 0, 1 }, { 16, 2048, 8, 0, 1, 0 },
	{ 333, 96, 0, 3, 1, 1 },    { 5, 8, 8, 0, 0, 0 },        { 4097, 264, 0, 1, 1, 0 },
	{ 40, 5632, 0, 0, 0, 1 },   { 1000, 768, 16, 7, 1, 0 },
};
/* for 17-64 rows: small projections, K >= 1024 (clusters split K) */
static const uint32_t grp_small[][6] = {
	{ 128, 2048, 0, 128, 0, 1 }, { 16, 2048, 8, 0, 1, 0 }, { 40, 5632, 0, 0, 0, 0 },
	{ 333, 1024, 0, 3, 1, 1 },  { 128, 2048, 0, 0, 1, 0 },
};
/* and K < 1024 (a block a tile): a KDA layer's f_b and g_b (K = the rank) */
static const uint32_t grp_short[][6] = {
	{ 2048, 128, 0, 0, 0, 0 }, { 2048, 128, 128, 0, 1, 1 }, { 333, 96, 0, 3, 1, 1 },
	{ 40, 1016, 8, 0, 0, 0 },   { 17, 8, 0, 5, 1, 1 },
};

static void gemm_group_case(struct haccel__gpu *g, uint32_t T, const uint32_t (*mem)[6],
			    uint32_t n, bool acc)
{
	struct haccel__gemm ops[8], solo[8];
	haccel__dptr again[8];
	float *c0[8], *x[8], *w[8], *bias[8];
	uint16_t *c0b[8];
	unsigned int mark = gpu_n_bufs, nbf = 0;

	for (uint32_t i = 0; i < n; i++) {
		uint32_t N = mem[i][0], K = mem[i][1], lda = K + mem[i][2], ldc = N + mem[i][3];
		size_t nc = (size_t)T * ldc;
		bool bf = mem[i][5] && !acc;
		uint16_t *xb, *wb, *xs = calloc((size_t)T * lda, 2);

		KTAP_ASSERT(xs != NULL);
		x[i] = rnd((size_t)T * K, -1, 1), w[i] = rnd((size_t)N * K, -1, 1);
		bias[i] = rnd(N, -1, 1), c0[i] = rnd(nc, -4, 4);
		/* a bf16 C starts as c0 rounded (its codes in c0b) */
		c0b[i] = to_bf16(c0[i], nc);
		xb = to_bf16(x[i], (size_t)T * K), wb = to_bf16(w[i], (size_t)N * K);
		for (uint32_t t = 0; t < T; t++)
			memcpy(xs + (size_t)t * lda, xb + (size_t)t * K, (size_t)K * 2);
		const void *cs = bf ? (const void *)c0b[i] : (const void *)c0[i];
		size_t cbytes = nc * (bf ? 2 : 4);

		ops[i] = (struct haccel__gemm){
			.M = T, .N = N, .K = K, .A = gpu_up(xs, (size_t)T * lda * 2),
			.B = gpu_up(wb, (size_t)N * K * 2), .C = gpu_up(cs, cbytes),
			.bias = mem[i][4] ? gpu_up(bias[i], N * 4) : 0, .lda = lda, .ldb = K,
			.ldc = ldc, .batch = 1, .trans_b = 1, .accumulate = acc, .c_bf16 = bf,
		};
		solo[i] = ops[i];
		solo[i].C = gpu_up(cs, cbytes);
		again[i] = gpu_up(cs, cbytes);
		nbf += bf;
		free(xb), free(wb), free(xs);
	}
	ktap_diag("gemm group: %u rows, %u GEMMs (%u with a bf16 C)%s", T, n, nbf,
		  acc ? ", accumulate" : "");
	KTAP_ASSERT_EQ(haccel__gemm_group(g, NULL, ops, n), 0);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t N = ops[i].N, K = ops[i].K, ldc = (uint32_t)ops[i].ldc;
		size_t nc = (size_t)T * ldc, es = ops[i].c_bf16 ? 2 : 4;
		float *got = malloc(nc * 4), *want = malloc(nc * 4), *y = malloc((size_t)T * N * 4);
		uint16_t *gb = malloc(nc * 2);
		double atol = 1e-5 * sqrt((double)K) * 4 * (acc ? 2 : 1);
		bool kept = true;

		KTAP_ASSERT(got && want && y && gb);
		if (T <= 16) {
			KTAP_ASSERT_EQ(haccel__gemm_few(g, NULL, &solo[i]), 0);
			KTAP_EXPECT(gpu_same(ops[i].C, solo[i].C, nc * es));
		}
		haccel__cpu_matmul(y, x[i], w[i], mem[i][4] ? bias[i] : NULL, T, N, K);
		memcpy(want, c0[i], nc * 4);
		for (uint32_t t = 0; t < T; t++)
			for (uint32_t c = 0; c < N; c++) {
				float *o = want + (size_t)t * ldc + c;
				*o = (acc ? *o : 0.0f) + y[(size_t)t * N + c];
			}
		if (ops[i].c_bf16) {
			gpu_down(gb, ops[i].C, nc * 2);
			for (size_t k = 0; k < nc; k++) {
				got[k] = haccel__bf16_to_float(gb[k]);
				if (k % ldc >= N && gb[k] != c0b[i][k])
					kept = false;
			}
			KTAP_EXPECT(gpu_close_enough("gemm group member, bf16 C", got, want, nc,
						     atol, 1.0 / 256 + 1e-4));
		} else {
			gpu_down(got, ops[i].C, nc * 4);
			KTAP_EXPECT(gpu_close_enough("gemm group member", got, want, nc, atol, 1e-4));
			for (size_t k = 0; k < nc; k++)
				if (k % ldc >= N && memcmp(&got[k], &c0[i][k], 4))
					kept = false;
		}
		KTAP_EXPECT(kept);
		free(got), free(want), free(y), free(gb);
	}
	/* A second run, into copies of the starting C: the same bits. */
	struct haccel__gemm rerun[8];

	for (uint32_t i = 0; i < n; i++) {
		rerun[i] = ops[i];
		rerun[i].C = again[i];
	}
	KTAP_ASSERT_EQ(haccel__gemm_group(g, NULL, rerun, n), 0);
	for (uint32_t i = 0; i < n; i++)
		KTAP_EXPECT(gpu_same(again[i], ops[i].C,
				     (size_t)T * ops[i].ldc * (ops[i].c_bf16 ? 2 : 4)));
	for (uint32_t i = 0; i < n; i++)
		free(x[i]), free(w[i]), free(bias[i]), free(c0[i]), free(c0b[i]);
	gpu_free_to(mark);
}

static void test_gemm_group(void)
{
	struct haccel__gpu *g = gpu_open();
	const uint32_t Ms[] = { 1, 8, 9, 16 }, Mb[] = { 17, 32, 33, 64 };

	for (unsigned int mi = 0; mi < 4; mi++)
		for (uint32_t n = 1; n <= 8; n += mi == 1 ? 7 : 1)
			gemm_group_case(g, Ms[mi], grp_mem, n, (n + mi) % 3 == 0);
	for (unsigned int mi = 0; mi < 4; mi++)
		for (uint32_t n = 1; n <= 5; n += 2) {
			gemm_group_case(g, Mb[mi], grp_small, n, (n + mi) % 3 == 0);
			gemm_group_case(g, Mb[mi], grp_short, n, (n + mi) % 3 == 1);
		}

	/* Refused: none or too many, a batched member, another M, another
	 * accumulate, a bf16 C accumulating, 65 rows, a shape the kernel does
	 * not take (K not a multiple of 8; above 16 rows, K both under and
	 * over 1024, in either order), weights past the limit (two 4096 x
	 * 4096: 64 MiB; above 16 rows 4 MiB). */
	uint32_t N = 4096, K = 4096;
	haccel__dptr dx = gpu_alloc((size_t)65 * K * 2), dw = gpu_alloc((size_t)N * K * 2);
	haccel__dptr dc = gpu_alloc((size_t)65 * N * 4), ref = gpu_alloc((size_t)65 * N * 4);
	struct haccel__gemm base = {
		.M = 4, .N = 64, .K = 64, .A = dx, .B = dw, .C = dc, .lda = 64, .ldb = 64,
		.ldc = 64, .batch = 1, .trans_b = 1,
	}, ops[9];

	for (int i = 0; i < 9; i++)
		ops[i] = base;
	KTAP_EXPECT_EQ(haccel__gemm_group(g, NULL, ops, 0), -ENOTSUP);
	KTAP_EXPECT_EQ(haccel__gemm_group(g, NULL, ops, 9), -ENOTSUP);
	ops[1].batch = 2;
	ops[1].stride_b = 64 * 64;
	KTAP_EXPECT_EQ(haccel__gemm_group(g, NULL, ops, 2), -ENOTSUP);
	ops[1] = base;
	ops[1].M = 5;
	KTAP_EXPECT_EQ(haccel__gemm_group(g, NULL, ops, 2), -ENOTSUP);
	ops[1] = base;
	ops[1].accumulate = 1;
	KTAP_EXPECT_EQ(haccel__gemm_group(g, NULL, ops, 2), -ENOTSUP);
	ops[1] = base;
	ops[0].accumulate = ops[1].accumulate = 1;
	ops[1].c_bf16 = 1;
	KTAP_EXPECT_EQ(haccel__gemm_group(g, NULL, ops, 2), -ENOTSUP);
	ops[0] = ops[1] = base;
	ops[1].K = 60;
	KTAP_EXPECT_EQ(haccel__gemm_group(g, NULL, ops, 2), -ENOTSUP);
	ops[1] = base;
	ops[0].M = ops[1].M = 17;
	ops[1].K = ops[1].lda = ops[1].ldb = 1024;
	KTAP_EXPECT_EQ(haccel__gemm_group(g, NULL, ops, 2), -ENOTSUP);
	ops[0] = ops[1];
	ops[1] = base;
	ops[1].M = 17;
	KTAP_EXPECT_EQ(haccel__gemm_group(g, NULL, ops, 2), -ENOTSUP);
	for (int i = 0; i < 2; i++) {
		ops[i].M = 65, ops[i].K = 1024, ops[i].lda = 1024, ops[i].ldb = 1024;
	}
	KTAP_EXPECT_EQ(haccel__gemm_group(g, NULL, ops, 2), -ENOTSUP);
	for (int i = 0; i < 2; i++) {
		ops[i].M = 33, ops[i].N = 1024, ops[i].ldc = 1024;
	}
	KTAP_EXPECT_EQ(haccel__gemm_group(g, NULL, ops, 2), -ENOTSUP);
	for (int i = 0; i < 2; i++) {
		ops[i] = base;
		ops[i].N = N, ops[i].K = K, ops[i].lda = K, ops[i].ldb = K, ops[i].ldc = N;
	}
	KTAP_EXPECT_EQ(haccel__gemm_group(g, NULL, ops, 2), -ENOTSUP);
	/* nothing was launched: C is as gpu_alloc left it (zeros) */
	KTAP_EXPECT(gpu_same(dc, ref, (size_t)65 * N * 4));
	gpu_close();
}

/*
 * The cuBLASLt shape cache past its size: HACCEL__GEMM_MAX_SHAPES + 40
 * shapes (M = 1 .. that, N = K = 16), every 64th checked against the CPU
 * as it runs, then the first (long evicted) and the last again: the
 * results exact (the inputs small integers, every sum exact in fp32).
 */
static float *int_vals(size_t n, int lo, int hi)
{
	float *v = malloc(n * sizeof(*v));

	KTAP_ASSERT(v != NULL);
	for (size_t i = 0; i < n; i++)
		v[i] = (float)(lo + (int)ktap_rand_below((uint64_t)(hi - lo + 1)));
	return v;
}

static void gemm_lt_check(struct haccel__gpu *g, void *stream, const struct haccel__gemm *op,
			  const float *x, const float *w, const float *bias, float *got,
			  float *want, const char *what)
{
	KTAP_ASSERT_EQ(haccel__gemm_lt(g, stream, op), 0);
	gpu_down(got, op->C, (size_t)op->M * op->N * 4);
	haccel__cpu_matmul(want, x, w, bias, op->M, op->N, op->K);
	KTAP_EXPECT(gpu_close_enough(what, got, want, (size_t)op->M * op->N, 0.0, 0.0));
}

/*
 * More shapes than the table holds (one a width N; 17 rows, on shapes of
 * 20): the least recently used make room, and an evicted shape made
 * again gives the same results.
 */
static void test_gemm_shape_cache(void)
{
	struct haccel__gpu *g = gpu_open();
	const uint32_t n = HACCEL__GEMM_MAX_SHAPES + 40, M = 17, K = 16;
	float *x = int_vals((size_t)M * K, -2, 2), *w = int_vals((size_t)n * K, -2, 2);
	float *got = malloc((size_t)M * n * 4), *want = malloc((size_t)M * n * 4);
	uint16_t *xb = to_bf16(x, (size_t)M * K), *wb = to_bf16(w, (size_t)n * K);
	haccel__dptr dx = gpu_up(xb, (size_t)M * K * 2), dw = gpu_up(wb, (size_t)n * K * 2);
	haccel__dptr dy = gpu_alloc((size_t)M * n * 4);
	struct haccel__gemm op = {
		.M = M, .K = K, .A = dx, .B = dw, .C = dy, .lda = K, .ldb = K, .batch = 1,
		.trans_b = 1,
	};
	struct haccel__blas_counts bc;

	KTAP_ASSERT(got && want);
	for (uint32_t N = 1; N <= n; N++) {
		op.N = N;
		op.ldc = N;
		if (N % 64 == 1 || N == n) {
			char what[64];

			snprintf(what, sizeof(what), "cuBLASLt shape %u of %u", N, n);
			gemm_lt_check(g, NULL, &op, x, w, NULL, got, want, what);
		} else {
			KTAP_ASSERT_EQ(haccel__gemm_lt(g, NULL, &op), 0);
		}
	}
	haccel__blas_counts(g, &bc);
	KTAP_EXPECT_EQ(bc.shapes, HACCEL__GEMM_MAX_SHAPES);
	KTAP_EXPECT_EQ(bc.evicted, 40);
	op.N = op.ldc = 1;
	gemm_lt_check(g, NULL, &op, x, w, NULL, got, want, "cuBLASLt shape 1 again (evicted)");
	op.N = op.ldc = n;
	gemm_lt_check(g, NULL, &op, x, w, NULL, got, want, "cuBLASLt last shape again");
	free(x), free(w), free(got), free(want), free(xb), free(wb);
	gpu_close();
}

/* haccel__gemm_rows (no GPU): every decode bucket and M <= 16 exact; else
 * the next of four sizes an octave, M itself where that passes 2^31 - 1. */
static void test_gemm_rows(void)
{
	static const uint32_t pairs[][2] = {
		{ 1, 1 }, { 16, 16 }, { 17, 20 }, { 20, 20 }, { 21, 24 }, { 33, 40 },
		{ 256, 256 }, { 257, 320 }, { 1100, 1280 }, { 2000, 2048 }, { 2048, 2048 },
		{ 2049, 2560 }, { 0x60000001u, 0x70000000u }, { 0x70000001u, 0x70000001u },
		{ 0x80000000u, 0x80000000u }, { 0x80000001u, 0x80000001u },
		{ 0xffffffffu, 0xffffffffu },
	};
	uint32_t last = 0, sizes = 0;

	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++)
		KTAP_EXPECT_EQ(haccel__gemm_rows(pairs[i][0]), pairs[i][1]);
	for (uint32_t M = 1; M <= 1u << 20; M++) {
		uint32_t r = haccel__gemm_rows(M), p = 1u << (31 - __builtin_clz(M));
		bool ok = r >= M && r <= 2 * p && r >= last && (r - p) % (p >= 16 ? p / 4 : 1) == 0;

		if (!ok) {
			ktap_diag("M %u: %u after %u", M, r, last);
			KTAP_EXPECT(ok);
			break;
		}
		if (M <= 16 || M == p)
			KTAP_EXPECT_EQ(r, M);
		sizes += r != last;
		last = r;
	}
	/* 16 sizes up to 16, then 4 an octave to 2^20 */
	KTAP_EXPECT_EQ(sizes, 16 + 4 * 16);
}

/*
 * One cuBLASLt GEMM of M rows into C (n rows, NaN bytes before the call):
 * whether its rows equal want's (small integers: exact) and C past them
 * still holds the NaN bytes.
 */
static bool rows_run(struct haccel__gpu *g, struct haccel__gemm *op, uint32_t M, uint32_t n,
		     float *got, const float *want, const uint8_t *nan, const char *what)
{
	size_t cb = (size_t)n * op->N * 4, i;

	KTAP_ASSERT(g->cu->MemcpyHtoDAsync(op->C, nan, cb, g->stream) == 0);
	op->M = M;
	KTAP_ASSERT_EQ(haccel__gemm_lt(g, NULL, op), 0);
	gpu_down(got, op->C, cb);
	for (i = 0; i < (size_t)M * op->N && got[i] == want[i]; i++)
		;
	if (i < (size_t)M * op->N) {
		ktap_diag("%s, %u rows (shape of %u): element %zu is %g, not %g", what, M,
			  haccel__gemm_rows(M), i, (double)got[i], (double)want[i]);
		return false;
	}
	if (memcmp(got + (size_t)M * op->N, nan, cb - (size_t)M * op->N * 4)) {
		ktap_diag("%s, %u rows: C written past its rows", what, M);
		return false;
	}
	return true;
}

/*
 * Every row count 1..1064 through the rounded shapes, B stored [N][K]:
 * each result exact (small integers) in its own M rows, C past them
 * untouched, one shape for each rounded size, more only for row counts a
 * shape's algorithm did not serve (each then has a shape of its own).
 * Then: HACCEL_GEMM_ROWS=exact (a shape a row count, the same results);
 * refusals forced (g->gemm_rows_refuse: each row count off the rounded
 * sizes gets a shape of its own, found first when it comes again); a bias
 * and accumulation on a shared shape; B stored [K][N] (trans_b 0).
 */
static void test_gemm_rows_shared(void)
{
	struct haccel__gpu *g = gpu_open();
	const uint32_t n = 1064, N = 48, K = 64;
	float *x = int_vals((size_t)n * K, -2, 2), *w = int_vals((size_t)N * K, -2, 2);
	float *bias = int_vals(N, -3, 3), *got = malloc((size_t)n * N * 4);
	float *want = malloc((size_t)n * N * 4), *want2 = malloc((size_t)n * N * 4);
	float *wt = malloc((size_t)N * K * 4);
	uint8_t *nan = malloc((size_t)n * N * 4);
	uint16_t *xb = to_bf16(x, (size_t)n * K), *wb = to_bf16(w, (size_t)N * K), *wtb;
	haccel__dptr dx = gpu_up(xb, (size_t)n * K * 2), dw = gpu_up(wb, (size_t)N * K * 2);
	haccel__dptr db = gpu_up(bias, N * 4), dy = gpu_alloc((size_t)n * N * 4), dwt;
	struct haccel__gemm op = {
		.N = N, .K = K, .A = dx, .B = dw, .C = dy, .lda = K, .ldb = K, .ldc = N,
		.batch = 1, .trans_b = 1,
	};
	struct haccel__blas_counts bc, bc0;
	uint32_t sizes = 0, last = 0, runs = 0;
	bool ok = true;

	KTAP_ASSERT(got && want && want2 && wt && nan);
	memset(nan, 0xff, (size_t)n * N * 4);
	haccel__cpu_matmul(want, x, w, NULL, n, N, K);
	for (uint32_t M = 1; M <= n && ok; M++) {
		uint32_t r = haccel__gemm_rows(M);

		ok = rows_run(g, &op, M, n, got, want, nan, "rounded");
		sizes += r != last;
		last = r;
	}
	KTAP_EXPECT(ok);
	haccel__blas_counts(g, &bc);
	ktap_diag("rows 1..%u: %u cuBLASLt shapes, %u for one row count, %llu refused", n,
		  bc.shapes, bc.exact, (unsigned long long)bc.refused);
	KTAP_EXPECT_EQ(sizes, 41);
	KTAP_EXPECT_EQ(bc.shapes, sizes + bc.exact);
	KTAP_EXPECT_EQ(bc.exact, bc.refused);

	/* HACCEL_GEMM_ROWS=exact: a few row counts of each kind */
	g->gemm_rows_exact = true;
	for (uint32_t M = 1; M <= n && ok; M++)
		if (M <= 20 || M % 97 == 0 || M == n) {
			ok = rows_run(g, &op, M, n, got, want, nan, "exact");
			runs++;
		}
	g->gemm_rows_exact = false;
	KTAP_EXPECT(ok);
	bc0 = bc;
	haccel__blas_counts(g, &bc);
	KTAP_EXPECT_EQ(bc.exact, bc0.exact + runs);
	KTAP_EXPECT_EQ(bc.shapes, bc0.shapes + runs);

	/* refusals forced: rows off the rounded sizes with no shape of their
	 * own yet (the last one again: found first) */
	static const uint32_t refuse[] = { 21, 333, 1037, 21 };

	g->gemm_rows_refuse = true;
	bc0 = bc;
	for (size_t i = 0; i < sizeof(refuse) / sizeof(refuse[0]) && ok; i++)
		ok = rows_run(g, &op, refuse[i], n, got, want, nan, "refused");
	g->gemm_rows_refuse = false;
	KTAP_EXPECT(ok);
	haccel__blas_counts(g, &bc);
	KTAP_EXPECT_EQ(bc.refused, bc0.refused + 3);
	KTAP_EXPECT_EQ(bc.exact, bc0.exact + 3);
	/* and found first after: no check, no new shape */
	KTAP_EXPECT(rows_run(g, &op, 333, n, got, want, nan, "refused before"));
	bc0 = bc;
	haccel__blas_counts(g, &bc);
	KTAP_EXPECT_EQ(bc.shapes, bc0.shapes);

	/* the bias epilogue, then accumulation, on a shared shape (1000 ->
	 * 1024: not refused above) */
	op.bias = db;
	for (size_t i = 0; i < (size_t)n * N; i++)
		want2[i] = want[i] + bias[i % N];
	KTAP_EXPECT(rows_run(g, &op, 1000, n, got, want2, nan, "bias"));
	op.bias = 0;
	op.accumulate = 1;
	for (size_t i = 0; i < (size_t)n * N; i++)
		want2[i] = 2 * want[i] + bias[i % N];
	KTAP_ASSERT_EQ(g->cu->MemcpyHtoDAsync(dy, got, (size_t)n * N * 4, g->stream), 0);
	op.M = 1000;
	KTAP_ASSERT_EQ(haccel__gemm_lt(g, NULL, &op), 0);
	gpu_down(got, dy, (size_t)n * N * 4);
	for (size_t i = 0; i < (size_t)1000 * N && ok; i++)
		ok = got[i] == want2[i];
	KTAP_EXPECT(ok);
	KTAP_EXPECT(!memcmp(got + (size_t)1000 * N, nan, (size_t)(n - 1000) * N * 4));
	op.accumulate = 0;

	/* B stored [K][N] */
	for (uint32_t i = 0; i < N; i++)
		for (uint32_t k = 0; k < K; k++)
			wt[(size_t)k * N + i] = w[(size_t)i * K + k];
	wtb = to_bf16(wt, (size_t)N * K);
	dwt = gpu_up(wtb, (size_t)N * K * 2);
	op.B = dwt;
	op.ldb = N;
	op.trans_b = 0;
	for (uint32_t M = 1; M <= 300 && ok; M++)
		ok = rows_run(g, &op, M, n, got, want, nan, "B stored [K][N]");
	KTAP_EXPECT(ok);
	free(x), free(w), free(bias), free(got), free(want), free(want2), free(wt), free(nan);
	free(xb), free(wb), free(wtb);
	gpu_close();
}

/*
 * Two threads, each on its own stream, running the same cuBLASLt shape
 * with its own bias and output, accumulating 200 times: each output must
 * be 200 (x W^T + its bias), exactly (small integers), so not one call may
 * have taken the other thread's bias pointer.
 */
struct bias_job {
	struct haccel__gpu *g;
	void *stream;
	struct haccel__gemm op;
	int ret;
};

#define BIAS_ROUNDS 200

static void *bias_worker(void *arg)
{
	struct bias_job *j = arg;

	for (int i = 0; i < BIAS_ROUNDS && !j->ret; i++)
		j->ret = haccel__gemm_lt(j->g, j->stream, &j->op);
	return NULL;
}

static void test_gemm_bias_threads(void)
{
	struct haccel__gpu *g = gpu_open();
	const uint32_t M = 32, N = 64, K = 64;
	float *x = int_vals((size_t)M * K, -1, 1), *w = int_vals((size_t)N * K, -1, 1);
	float *got = malloc((size_t)M * N * 4), *want = malloc((size_t)M * N * 4);
	uint16_t *xb = to_bf16(x, (size_t)M * K), *wb = to_bf16(w, (size_t)N * K);
	haccel__dptr dx = gpu_up(xb, (size_t)M * K * 2), dw = gpu_up(wb, (size_t)N * K * 2);
	float bias[2][64];
	struct bias_job job[2];
	pthread_t th[2];

	KTAP_ASSERT(got && want);
	for (int t = 0; t < 2; t++) {
		for (uint32_t i = 0; i < N; i++)
			bias[t][i] = t ? -1000.0f - (float)i : 1000.0f + (float)i;
		job[t] = (struct bias_job){ .g = g };
		KTAP_ASSERT_EQ(g->cu->StreamCreate(&job[t].stream, HACCEL__CU_STREAM_NON_BLOCKING), 0);
		job[t].op = (struct haccel__gemm){
			.M = M, .N = N, .K = K, .A = dx, .B = dw, .C = gpu_alloc((size_t)M * N * 4),
			.bias = gpu_up(bias[t], N * 4), .lda = K, .ldb = K, .ldc = N, .batch = 1,
			.trans_b = 1, .accumulate = 1,
		};
		KTAP_ASSERT_EQ(g->cu->MemsetD8Async(job[t].op.C, 0, (size_t)M * N * 4,
						    job[t].stream), 0);
		KTAP_ASSERT_EQ(g->cu->StreamSynchronize(job[t].stream), 0);
	}
	for (int t = 0; t < 2; t++)
		KTAP_ASSERT_EQ(pthread_create(&th[t], NULL, bias_worker, &job[t]), 0);
	for (int t = 0; t < 2; t++)
		pthread_join(th[t], NULL);
	for (int t = 0; t < 2; t++) {
		KTAP_ASSERT_EQ(job[t].ret, 0);
		KTAP_ASSERT_EQ(g->cu->StreamSynchronize(job[t].stream), 0);
		gpu_down(got, job[t].op.C, (size_t)M * N * 4);
		haccel__cpu_matmul(want, x, w, bias[t], M, N, K);
		for (size_t i = 0; i < (size_t)M * N; i++)
			want[i] *= BIAS_ROUNDS;
		KTAP_EXPECT(gpu_close_enough(t ? "thread 1 (bias -1000 - n)" :
						 "thread 0 (bias 1000 + n)",
					     got, want, (size_t)M * N, 0.0, 0.0));
		g->cu->StreamDestroy(job[t].stream);
	}
	free(x), free(w), free(got), free(want), free(xb), free(wb);
	gpu_close();
}

static const struct ktap_case cases[] = {
	KTAP_CASE(test_linear),
	KTAP_CASE(test_gemm_batched),
	KTAP_CASE(test_gemm_few),
	KTAP_CASE(test_gemm_group),
	KTAP_CASE(test_gemm_shape_cache),
	KTAP_CASE(test_gemm_rows),
	KTAP_CASE(test_gemm_rows_shared),
	KTAP_CASE(test_gemm_bias_threads),
	KTAP_CASE(test_norms),
	KTAP_CASE(test_embed_swiglu),
	KTAP_CASE(test_bf16),
	KTAP_CASE(test_convert),
	KTAP_CASE(test_scatter_u32),
	KTAP_CASE(test_attn_res_mix),
	KTAP_CASE(test_argmax),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
