// SPDX-License-Identifier: MIT
/* GPU DSA ops (rope, Hadamard, cache writers, the fused indexer, sparse MLA) against the CPU ops on the same inputs. Skips with no GPU. */
#include "config.h"

#include <float.h>
#include <stdio.h>

#include "gpu-util.h"
#include "model/cpu/ops.h"
#include "model/format.h"

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

#define IK_BYTES 132

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	KTAP_ASSERT(p != NULL);
	return p;
}

static float frand(float lo, float hi)
{
	return lo + (hi - lo) * (float)(ktap_rand() >> 40) * 0x1p-24f;
}

static float *rnd(size_t n, float lo, float hi)
{
	float *x = xmalloc(n * sizeof(float));

	for (size_t i = 0; i < n; i++)
		x[i] = frand(lo, hi);
	return x;
}

/* ------------------------------------------------------------------------ */
/* Two sequences on shuffled pages                                          */

struct paged {
	uint32_t P, stride, n_pages, len[2];
	uint32_t *bt;   /* [2][stride]; entries past a sequence's pages are
			 * 0xdeadbeef, so reading one faults */
};

static void paged_init(struct paged *pg, uint32_t P, uint32_t len0, uint32_t len1)
{
	uint32_t np0 = (len0 + P - 1) / P, np1 = (len1 + P - 1) / P, *perm;

	pg->P = P;
	pg->len[0] = len0;
	pg->len[1] = len1;
	pg->n_pages = np0 + np1 + 3;
	pg->stride = (np0 > np1 ? np0 : np1) + 5;
	pg->bt = xmalloc(2 * pg->stride * sizeof(uint32_t));
	perm = xmalloc(pg->n_pages * sizeof(uint32_t));
	for (uint32_t i = 0; i < pg->n_pages; i++)
		perm[i] = i;
	for (uint32_t i = pg->n_pages - 1; i > 0; i--) {
		uint32_t j = (uint32_t)ktap_rand_below(i + 1), tmp = perm[i];

		perm[i] = perm[j];
		perm[j] = tmp;
	}
	for (uint32_t i = 0; i < 2 * pg->stride; i++)
		pg->bt[i] = 0xdeadbeefu;
	for (uint32_t i = 0; i < np0; i++)
		pg->bt[i] = perm[i];
	for (uint32_t i = 0; i < np1; i++)
		pg->bt[pg->stride + i] = perm[np0 + i];
	free(perm);
}

static int64_t paged_slot(const struct paged *pg, uint32_t s, uint32_t p)
{
	return (int64_t)pg->bt[s * pg->stride + p / pg->P] * pg->P + p % pg->P;
}

static const uint32_t *paged_row(const struct paged *pg, uint32_t s)
{
	return pg->bt + s * pg->stride;
}

/* ------------------------------------------------------------------------ */
/* Rope and Hadamard                                                        */

/* Both layouts, two bases, 64 and 128 rotated dims of 136-wide vectors
 * with gaps; positions up to 2^17. The CPU rounds the same fp32 angle (the
 * kernel takes the power and the trigonometry in double, which agrees
 * with libm's correctly rounded powf), so 1e-5 has a wide margin. */
static void test_rope(void)
{
	struct haccel__gpu *g = gpu_open();
	static const uint32_t pos[] = { 0, 1, 2, 7, 100, 4095, 65537, 131071 };
	enum { T = 8, NV = 3, VS = 136, TS = NV * VS + 7 };
	haccel__dptr dpos = gpu_up(pos, sizeof(pos));
	float *got = xmalloc(T * TS * sizeof(float));

	for (int c = 0; c < 8; c++) {
		int layout = c & 1;
		uint32_t dim = c & 2 ? 128 : 64;
		float theta = c & 4 ? 50000.0f : 10000.0f;
		float *x = rnd(T * TS, -2, 2), *want = xmalloc(T * TS * sizeof(float));
		haccel__dptr dx = gpu_up(x, T * TS * sizeof(float));

		memcpy(want, x, T * TS * sizeof(float));
		haccel__cpu_rope(want, T, NV, TS, VS, dim, pos, theta, layout);
		KTAP_ASSERT_EQ(haccel__cuda_rope(g, NULL, dx, T, NV, TS, VS, dim, dpos, theta,
						 layout), 0);
		gpu_down(got, dx, T * TS * sizeof(float));
		ktap_diag("layout %d dim %u theta %g", layout, dim, (double)theta);
		KTAP_EXPECT(gpu_close_enough("rope", got, want, T * TS, 1e-5, 1e-5));

		/* rope2: the same vectors as two sets (the first NV - 1 of each
		 * token, then the last, as attention's queries and key), the
		 * same bits as rope */
		haccel__dptr dx2 = gpu_up(x, T * TS * sizeof(float));
		float *got2 = xmalloc(T * TS * sizeof(float));

		KTAP_ASSERT_EQ(haccel__cuda_rope2(g, NULL, dx2, NV - 1, TS, VS,
						  dx2 + (NV - 1) * VS * sizeof(float), 1, TS, VS, T,
						  dim, dpos, theta, layout),
			       0);
		gpu_down(got2, dx2, T * TS * sizeof(float));
		KTAP_EXPECT(memcmp(got2, got, T * TS * sizeof(float)) == 0);
		/* and against the CPU directly, as rope is */
		KTAP_EXPECT(gpu_close_enough("rope2", got2, want, T * TS, 1e-5, 1e-5));
		free(got2);
		free(x);
		free(want);
	}
	KTAP_EXPECT_EQ(haccel__cuda_rope(g, NULL, 0, 1, 1, 1, 1, 64, 0, 1e4f, 2), -EINVAL);
	KTAP_EXPECT_EQ(haccel__cuda_rope2(g, NULL, 0, 1, 1, 1, 0, 1, 1, 1, 1, 64, 0, 1e4f, 2),
		       -EINVAL);
	free(got);
	gpu_close();
}

/* The same butterfly order as the CPU, so the bits should match; checked
 * as |got - want| <= 1e-6 + 1e-6 |want| (values up to 3 in, up to 34 out:
 * at most about 3.5e-5), and the count of bit-identical values only
 * reported. */
static void test_hadamard(void)
{
	struct haccel__gpu *g = gpu_open();
	uint32_t n = 1001, same = 0;
	float *x = rnd((size_t)n * 128, -3, 3), *got = xmalloc((size_t)n * 128 * sizeof(float));
	haccel__dptr dx = gpu_up(x, (size_t)n * 128 * sizeof(float));

	haccel__cpu_hadamard128(x, n);
	KTAP_ASSERT_EQ(haccel__cuda_hadamard128(g, NULL, dx, n), 0);
	gpu_down(got, dx, (size_t)n * 128 * sizeof(float));
	KTAP_EXPECT(gpu_close_enough("hadamard", got, x, (size_t)n * 128, 1e-6, 1e-6));
	for (size_t i = 0; i < (size_t)n * 128; i++)
		same += memcmp(&got[i], &x[i], 4) == 0;
	ktap_diag("hadamard: %u of %u values bit-identical", same, n * 128);
	free(x);
	free(got);
	gpu_close();
}

/* ------------------------------------------------------------------------ */
/* Cache writers                                                            */

/*
 * Token t's values by kind: zeros (signed), saturating (1e30, FLT_MAX,
 * +-inf, 464, the tie to 448), fp32 subnormals and the smallest normals,
 * NaNs among numbers, blocks of wildly different magnitude, plain random.
 */
static void fill_special(float *x, uint32_t n, uint32_t t)
{
	static const float big[] = { 1e30f, -FLT_MAX, INFINITY, -INFINITY, 464.0f, -448.0f,
				     500.0f, 3e38f };
	static const float tiny[] = { 1e-40f, -1e-42f, 1e-39f, 1.2e-38f, 0x1p-149f, -0x1p-126f,
				      0.0f, 0x1p-140f };

	for (uint32_t i = 0; i < n; i++) {
		switch (t % 7) {
		case 0:
			x[i] = i & 1 ? -0.0f : 0.0f;
			break;
		case 1:
			x[i] = i % 3 ? big[i % 8] : frand(-1, 1);
			break;
		case 2:
			x[i] = tiny[i % 8] * (i % 5 ? 1.0f : frand(0, 1));
			break;
		case 3:
			x[i] = i % 9 == 4 ? (i & 1 ? -NAN : NAN) : frand(-5, 5);
			break;
		case 4:
			x[i] = frand(-1, 1) * ldexpf(1.0f, (int)((i / 32) * 29 % 61) - 30);
			break;
		default:
			x[i] = frand(-1, 1) * (float)(t % 5 + 1);
			break;
		}
	}
}

/* Shuffled slots of a region of n_slots records, every 7th token padding
 * (slot -1). */
static int64_t *shuffled_slots(uint32_t T, uint32_t n_slots)
{
	int64_t *s = xmalloc(T * sizeof(int64_t));
	uint32_t *perm = xmalloc(n_slots * sizeof(uint32_t));

	for (uint32_t i = 0; i < n_slots; i++)
		perm[i] = i;
	for (uint32_t i = n_slots - 1; i > 0; i--) {
		uint32_t j = (uint32_t)ktap_rand_below(i + 1), tmp = perm[i];

		perm[i] = perm[j];
		perm[j] = tmp;
	}
	for (uint32_t t = 0; t < T; t++)
		s[t] = t % 7 == 6 ? -1 : (int64_t)perm[t];
	free(perm);
	return s;
}

/* Whole regions compared byte for byte after both writers, including the
 * records nobody writes (0x5a). */
static void test_writers(void)
{
	struct haccel__gpu *g = gpu_open();
	static const uint32_t drs[] = { 64, 0, 32, 48, 7 };
	enum { T = 45, SLOTS = 61 };

	for (unsigned int c = 0; c < sizeof(drs) / sizeof(drs[0]); c++) {
		uint32_t dr = drs[c], bytes = 528 + 2 * dr;
		size_t rb = (size_t)SLOTS * bytes;
		float *lat = xmalloc(T * 512 * sizeof(float));
		float *pe = xmalloc((T * dr + 1) * sizeof(float));
		int64_t *slots = shuffled_slots(T, SLOTS);
		uint8_t *want = xmalloc(rb), *got = xmalloc(rb);

		for (uint32_t t = 0; t < T; t++) {
			fill_special(lat + t * 512, 512, t);
			fill_special(pe + t * dr, dr, t + 3);
		}
		memset(want, 0x5a, rb);
		haccel__dptr dreg = gpu_up(want, rb), dsl = gpu_up(slots, T * sizeof(int64_t));
		haccel__dptr dlat = gpu_up(lat, T * 512 * sizeof(float));
		haccel__dptr dpe = dr ? gpu_up(pe, T * dr * sizeof(float)) : 0;

		haccel__cpu_mla_kv_write(want, slots, lat, pe, T, dr);
		KTAP_ASSERT_EQ(haccel__cuda_mla_kv_write(g, NULL, dreg, dsl, dlat, dpe, T, dr), 0);
		gpu_down(got, dreg, rb);
		for (uint32_t s = 0; s < SLOTS; s++)
			CHECK(memcmp(got + (size_t)s * bytes, want + (size_t)s * bytes, bytes) == 0,
			      "dr %u: KV record at slot %u differs", dr, s);
		free(lat);
		free(pe);
		free(slots);
		free(want);
		free(got);
	}

	/* Index keys: 132-byte records. */
	{
		size_t rb = (size_t)SLOTS * IK_BYTES;
		float *ik = xmalloc(T * 128 * sizeof(float));
		int64_t *slots = shuffled_slots(T, SLOTS);
		uint8_t *want = xmalloc(rb), *got = xmalloc(rb);

		for (uint32_t t = 0; t < T; t++)
			fill_special(ik + t * 128, 128, t);
		memset(want, 0x5a, rb);
		haccel__dptr dreg = gpu_up(want, rb), dsl = gpu_up(slots, T * sizeof(int64_t));
		haccel__dptr dik = gpu_up(ik, T * 128 * sizeof(float));

		haccel__cpu_index_k_write(want, slots, ik, T);
		KTAP_ASSERT_EQ(haccel__cuda_index_k_write(g, NULL, dreg, dsl, dik, T), 0);
		gpu_down(got, dreg, rb);
		for (uint32_t s = 0; s < SLOTS; s++)
			CHECK(memcmp(got + (size_t)s * IK_BYTES, want + (size_t)s * IK_BYTES,
				     IK_BYTES) == 0, "index-key record at slot %u differs", s);
		free(ik);
		free(slots);
		free(want);
		free(got);
	}
	gpu_close();
}

/* A non-NaN E4M3 code as a signed count of code steps from zero: adjacent
 * values differ by one (the codes are sign and magnitude, the magnitudes
 * in order), +0 and -0 are both 0. */
static int fp8_ord(uint8_t c)
{
	return c & 0x80 ? -(int)(c & 0x7f) : (int)(c & 0x7f);
}

static bool fp8_nan(uint8_t c)
{
	return (c & 0x7f) == HACCEL__FP8_NAN;
}

/* The E4M3 spacing at code c's magnitude, in units of its scale: 2^-9 up
 * to 2^-5 (subnormals and the lowest binade), 2^(E - 10) in binade E. */
static double fp8_spacing(uint8_t c)
{
	int e = (c >> 3) & 0xf;

	return ldexp(1.0, (e ? e : 1) - 10);
}

/*
 * Index-key record got, written by a GPU kernel from its own fp32 key,
 * against the CPU's record want of the fp32 key `key`, the two keys equal
 * up to rounding. Within one code step, which is stricter than within one
 * quantization step of the value (that would let two codes below a
 * power of two pass): where a block's scales agree, each code is equal or
 * adjacent; a scale may differ only by one, where the CPU's block amax is
 * within 2^-16 of the edge 448 * 2^e between them (rounding moved it
 * across), and then each value is within one step of the coarser
 * scale's code (each side within half a step of its key, the finer
 * side's step half the coarser's). NaN matches NaN of either sign: after
 * arithmetic the sign of a NaN is not defined (x86 makes the default NaN
 * negative, CUDA's is positive). Counts the values that differ into
 * *n_diff; false at the first that is out.
 */
static bool ik_record_close(const uint8_t *got, const uint8_t *want, const float *key,
			    const char *what, uint32_t slot, uint32_t *n_diff)
{
	float gv[128], wv[128];

	haccel__index_k_unpack(got, gv);
	haccel__index_k_unpack(want, wv);
	for (uint32_t blk = 0; blk < 4; blk++) {
		int eg = got[128 + blk] - 127, ew = want[128 + blk] - 127;
		int lo = eg < ew ? eg : ew, hi = eg < ew ? ew : eg;
		double edge = ldexp(448.0, lo), amax = haccel__amax(key + 32 * blk, 32);

		if (eg != ew) {
			bool tipped = hi - lo == 1 && fabs(amax - edge) <= edge * 0x1p-16;

			CHECK(tipped, "%s: slot %u block %u: scale 2^%d, want 2^%d (amax %a)", what,
			      slot, blk, eg, ew, amax);
			if (!tipped)
				return false;
		}
		for (uint32_t i = 32 * blk; i < 32 * blk + 32; i++) {
			uint8_t cg = got[i], cw = want[i];
			bool ok;

			if (fp8_nan(cg) || fp8_nan(cw))
				ok = fp8_nan(cg) && fp8_nan(cw);
			else if (eg == ew)
				ok = abs(fp8_ord(cg) - fp8_ord(cw)) <= 1;
			else
				ok = fabs((double)gv[i] - wv[i]) <=
				     ldexp(fp8_spacing(eg > ew ? cg : cw), hi);
			CHECK(ok, "%s: slot %u value %u: code 0x%02x scale 2^%d (%a), want 0x%02x "
			      "scale 2^%d (%a)", what, slot, i, cg, eg, (double)gv[i], cw, ew,
			      (double)wv[i]);
			if (!ok)
				return false;
			*n_diff += !isnan(wv[i]) && gv[i] != wv[i];
		}
	}
	return true;
}

/*
 * The fused launches of a DSA layer's indexer inputs against the kernels
 * they replace, run in turn on the same inputs: the same bits; and
 * against the CPU ops on the same inputs, within stated tolerances.
 * rope_hadamard: 16 vectors of 128 a token, rotated over 64, 128 or no
 * dims, both layouts. index_k_fused: the layer norm, rope, transform and
 * record write of the keys (some tokens with special values, some slots
 * negative), and the head weights' scale; whole regions compared,
 * records nobody writes included.
 */
static void test_indexer_inputs(void)
{
	struct haccel__gpu *g = gpu_open();
	static const uint32_t pos[] = { 0, 1, 2, 7, 100, 4095, 65537, 131071 };
	enum { T = 8, NV = 16, TS = NV * 128, TK = 45, SLOTS = 61, IH = 16 };
	haccel__dptr dpos = gpu_up(pos, sizeof(pos));
	uint32_t kpos[TK];

	for (int c = 0; c < 6; c++) {
		int layout = c & 1;
		uint32_t dim = c < 2 ? 64 : c < 4 ? 128 : 0;
		float *x = rnd(T * TS, -2, 2);
		haccel__dptr da = gpu_up(x, T * TS * sizeof(float));
		haccel__dptr db = gpu_up(x, T * TS * sizeof(float));

		if (dim)
			KTAP_ASSERT_EQ(haccel__cuda_rope(g, NULL, da, T, NV, TS, 128, dim, dpos,
							 1e4f, layout), 0);
		KTAP_ASSERT_EQ(haccel__cuda_hadamard128(g, NULL, da, T * NV), 0);
		KTAP_ASSERT_EQ(haccel__cuda_rope_hadamard(g, NULL, db, T, NV, TS, 128, dim, dpos,
							  1e4f, layout), 0);
		CHECK(gpu_same(da, db, T * TS * sizeof(float)),
		      "rope_hadamard: layout %d dim %u differs from rope + hadamard", layout, dim);

		/*
		 * Against the CPU's rope then transform. Without rope, test_hadamard's
		 * 1e-6 + 1e-6 |want|. With it, test_rope's bound on each rotated value v,
		 * 1e-5 (1 + |v|), through the transform: an output sums 128 such errors,
		 * scaled by 2^-3.5, so it is off by at most (128e-5 + 1e-5 sum |v|) /
		 * sqrt(128) <= 3.4e-4, sum |v| <= sqrt(128) |v|_2 = sqrt(128) |x|_2 <=
		 * 256 (the rotation keeps the norm, inputs within 2); plus each
		 * butterfly's own rounding of its slightly different inputs (an output
		 * goes through 2^(7-k) sums of at most 2^k * 2.83 at stage k, each
		 * rounded within 2^-24 of it: under 1.5e-5 after the scaling): atol
		 * 4e-4, and test_hadamard's rtol.
		 */
		float *want = xmalloc(T * TS * sizeof(float));
		float *got = xmalloc(T * TS * sizeof(float));
		char what[64];

		memcpy(want, x, T * TS * sizeof(float));
		if (dim)
			haccel__cpu_rope(want, T, NV, TS, 128, dim, pos, 1e4f, layout);
		haccel__cpu_hadamard128(want, T * NV);
		gpu_down(got, db, T * TS * sizeof(float));
		snprintf(what, sizeof(what), "rope_hadamard layout %d dim %u", layout, dim);
		KTAP_EXPECT(gpu_close_enough(what, got, want, T * TS, dim ? 4e-4 : 1e-6, 1e-6));
		free(want);
		free(got);
		free(x);
	}
	KTAP_EXPECT_EQ(haccel__cuda_rope_hadamard(g, NULL, 0, 1, 1, 128, 128, 64, 0, 1e4f, 2),
		       -EINVAL);
	KTAP_EXPECT_EQ(haccel__cuda_rope_hadamard(g, NULL, 0, 1, 1, 128, 128, 130, 0, 1e4f, 0),
		       -EINVAL);

	for (uint32_t t = 0; t < TK; t++)
		kpos[t] = (uint32_t)ktap_rand_below(131072);
	haccel__dptr dkpos = gpu_up(kpos, sizeof(kpos));
	for (int c = 0; c < 4; c++) {
		int layout = c & 1;
		uint32_t dr = c < 2 ? 64 : c == 2 ? 0 : 32;
		size_t rb = (size_t)SLOTS * IK_BYTES;
		float *x = rnd(TK * 128, -3, 3), *w = rnd(128, 0.5f, 1.5f), *b = rnd(128, -1, 1);
		float *hw = rnd(TK * IH, -2, 2), s = 1.0f / sqrtf((float)IH) / sqrtf(128.0f);
		int64_t *slots = shuffled_slots(TK, SLOTS);
		uint8_t *fill = xmalloc(rb);

		for (uint32_t t = 0; t < TK; t += 5)
			fill_special(x + t * 128, 128, t);
		memset(fill, 0x5a, rb);
		haccel__dptr rega = gpu_up(fill, rb), regb = gpu_up(fill, rb);
		haccel__dptr dsl = gpu_up(slots, TK * sizeof(int64_t));
		haccel__dptr dx = gpu_up(x, TK * 128 * sizeof(float)), dk = gpu_alloc(TK * 512);
		haccel__dptr dw = gpu_up(w, 128 * sizeof(float)), dbias = gpu_up(b, 128 * 4);
		haccel__dptr hwa = gpu_up(hw, TK * IH * 4), hwb = gpu_up(hw, TK * IH * 4);

		KTAP_ASSERT_EQ(haccel__cuda_layernorm(g, NULL, dk, dx, dw, dbias, TK, 128, 1e-6f),
			       0);
		if (dr)
			KTAP_ASSERT_EQ(haccel__cuda_rope(g, NULL, dk, TK, 1, 128, 128, dr, dkpos,
							 5e4f, layout), 0);
		KTAP_ASSERT_EQ(haccel__cuda_hadamard128(g, NULL, dk, TK), 0);
		KTAP_ASSERT_EQ(haccel__cuda_index_k_write(g, NULL, rega, dsl, dk, TK), 0);
		KTAP_ASSERT_EQ(haccel__cuda_scale(g, NULL, hwa, hwa, s, TK * IH), 0);
		KTAP_ASSERT_EQ(haccel__cuda_index_k_fused(g, NULL, regb, dsl, dx, dw, dbias, 1e-6f,
							  TK, dr, dkpos, 5e4f, layout, hwb, IH, s),
			       0);
		CHECK(gpu_same(rega, regb, rb), "index_k_fused: layout %d dr %u: the region differs",
		      layout, dr);
		CHECK(gpu_same(hwa, hwb, TK * IH * 4),
		      "index_k_fused: layout %d dr %u: the head weights differ", layout, dr);

		/*
		 * Against the CPU ops in turn on the same inputs. The fp32 keys
		 * differ by rounding (the layer norm's sums in another order and
		 * rsqrtf, the GPU's sincos), so a code at a rounding boundary may
		 * go the other way: records as ik_record_close says, and at most
		 * one value in 256 of those written (19 of 39 records' 4992)
		 * differing, where rounding errors near 1e-7 of values whose code
		 * steps are 1/16 to 1/8 of them flip about one in 10^5 (a
		 * conversion that rounds otherwise, truncating say, flips half).
		 * Records nobody writes keep their 0x5a bytes. fill_special's NaN
		 * and infinity tokens have NaN layer norms, so NaN rows: they
		 * match as NaN, of either sign.
		 */
		float *key = xmalloc(TK * 128 * sizeof(float));
		uint8_t *want = xmalloc(rb), *got = xmalloc(rb), written[SLOTS] = { 0 };
		uint32_t n_written = 0, n_diff = 0;
		char what[64];

		haccel__cpu_layernorm(key, x, w, b, TK, 128, 1e-6f);
		if (dr)
			haccel__cpu_rope(key, TK, 1, 128, 128, dr, kpos, 5e4f, layout);
		haccel__cpu_hadamard128(key, TK);
		memset(want, 0x5a, rb);
		haccel__cpu_index_k_write(want, slots, key, TK);
		gpu_down(got, regb, rb);
		snprintf(what, sizeof(what), "index_k_fused layout %d dr %u", layout, dr);
		for (uint32_t t = 0; t < TK; t++) {
			if (slots[t] < 0)
				continue;
			written[slots[t]] = 1;
			n_written++;
			ik_record_close(got + slots[t] * IK_BYTES, want + slots[t] * IK_BYTES,
					key + t * 128, what, (uint32_t)slots[t], &n_diff);
		}
		for (uint32_t sl = 0; sl < SLOTS; sl++)
			CHECK(written[sl] || !memcmp(got + (size_t)sl * IK_BYTES,
						     want + (size_t)sl * IK_BYTES, IK_BYTES),
			      "%s: record at slot %u, written by no token, changed", what, sl);
		ktap_diag("%s: %u of %u written values differ from the CPU's by a code step",
			  what, n_diff, n_written * 128);
		CHECK(n_diff <= n_written * 128 / 256, "%s: %u values differ from the CPU's", what,
		      n_diff);

		/* One correctly rounded fp32 multiply on each side (|hw| <= 2, s
		 * about 0.022: no subnormal): the same bits, 0 ulp; atol 0 and
		 * rtol 2^-23 would let one ulp pass, no more. */
		float *hw_want = xmalloc(TK * IH * 4), *hw_got = xmalloc(TK * IH * 4);

		for (uint32_t i = 0; i < TK * IH; i++)
			hw_want[i] = hw[i] * s;
		gpu_down(hw_got, hwb, TK * IH * 4);
		snprintf(what, sizeof(what), "index_k_fused head weights layout %d dr %u", layout,
			 dr);
		KTAP_EXPECT(gpu_close_enough(what, hw_got, hw_want, TK * IH, 0, 0x1p-23));
		free(key);
		free(want);
		free(got);
		free(hw_want);
		free(hw_got);
		free(x);
		free(w);
		free(b);
		free(hw);
		free(slots);
		free(fill);
	}
	KTAP_EXPECT_EQ(haccel__cuda_index_k_fused(g, NULL, 0, 0, 0, 0, 0, 1e-6f, 1, 64, 0, 1e4f, 2,
						  0, 1, 1.0f), -EINVAL);
	KTAP_EXPECT_EQ(haccel__cuda_index_k_fused(g, NULL, 0, 0, 0, 0, 0, 1e-6f, 1, 63, 0, 1e4f, 0,
						  0, 1, 1.0f), -EINVAL);
	gpu_close();
}

/* ------------------------------------------------------------------------ */
/* Indexer                                                                  */

/*
 * Scores of token t as the CPU defines them (q and keys through MXFP8,
 * sums in index order), and for each a rounding bound: 2^-15 of the sum of
 * the magnitudes of every product that went into it, well above what fp32
 * sums in any order (and fp32 tensor-core accumulation) can lose.
 */
static void naive_scores(float *score, double *tol, const uint8_t *region, const uint32_t *bt,
			 uint32_t P, const float *q, const float *w, uint32_t IH, uint32_t n)
{
	float *qd = xmalloc((size_t)IH * 128 * sizeof(float)), kd[128];

	for (uint32_t h = 0; h < IH; h++) {
		uint8_t codes[128], scales[4];

		haccel__mxfp8_pack(codes, scales, q + h * 128, 128);
		haccel__mxfp8_unpack(qd + h * 128, codes, scales, 128);
	}
	for (uint32_t s = 0; s < n; s++) {
		const uint8_t *rec = region + ((size_t)bt[s / P] * P + s % P) * IK_BYTES;
		float acc = 0.0f;
		double mag = 0.0;

		haccel__index_k_unpack(rec, kd);
		for (uint32_t h = 0; h < IH; h++) {
			float dot = 0.0f;
			double ad = 0.0;

			for (uint32_t i = 0; i < 128; i++) {
				dot += qd[h * 128 + i] * kd[i];
				ad += fabs((double)qd[h * 128 + i] * kd[i]);
			}
			acc += w[h] * (dot > 0.0f ? dot : 0.0f);
			mag += fabs((double)w[h]) * (isfinite(ad) ? ad : 0.0);
		}
		score[s] = acc;
		tol[s] = mag * 0x1p-15 + 1e-30;
	}
	free(qd);
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return (x > y) - (x < y);
}

/* The order-preserving bits the GPU keeps of a score (not NaN). */
static uint32_t score_bits(float s)
{
	uint32_t u;

	if (s == 0.0f)
		s = 0.0f;
	memcpy(&u, &s, 4);
	return u & 0x80000000u ? ~u : u | 0x80000000u;
}

/* a clearly ranks before b: beyond both rounding bounds; a number ranks
 * before NaN. */
static int clearly_before(const float *sc, const double *tol, int32_t a, int32_t b)
{
	if (isnan(sc[a]))
		return 0;
	if (isnan(sc[b]))
		return 1;
	return (double)sc[a] - (double)sc[b] > tol[a] + tol[b];
}

struct ix_run {
	uint32_t T, IH, topk, max_pos;
	const uint32_t *pos, *row;   /* per token: position, sequence */
	const float *q, *w;
	int exact;                   /* selections must equal the CPU's */
	int twice;                   /* run twice on the same scratch */
	/* q as its projection gives it: the indexer's rope and Hadamard
	 * transform (NULL: q is given transformed) */
	const struct haccel__ix_rope *rope;
};

/*
 * The GPU indexer on all tokens in one call, the CPU op token by token
 * through each token's own block-table row. Exact runs compare the lists;
 * the others check that the GPU list is a top-k of the CPU scores up to
 * their rounding bound, in ascending position, and count the identical
 * ones. With r->rope the GPU indexer takes q untransformed; the CPU gets
 * q through haccel__cuda_rope_hadamard (checked against rope and the
 * Hadamard transform in test_indexer_inputs), and the GPU indexer given
 * those queries must select exactly what it selected from q itself.
 */
static void check_indexer(struct haccel__gpu *g, const struct paged *pg, const uint8_t *region,
			  haccel__dptr dreg, haccel__dptr dbt, const struct ix_run *r)
{
	uint32_t T = r->T, topk = r->topk, IH = r->IH, n_got[64], n_want, identical = 0;
	int32_t *got = xmalloc((size_t)T * topk * sizeof(int32_t));
	int32_t *got2 = xmalloc((size_t)T * topk * sizeof(int32_t));
	int32_t *want = xmalloc(topk * sizeof(int32_t));
	size_t sbytes = haccel__cuda_indexer_scratch(T, r->max_pos, topk);
	haccel__dptr dq = gpu_up(r->q, (size_t)T * IH * 128 * sizeof(float));
	haccel__dptr dw = gpu_up(r->w, (size_t)T * IH * sizeof(float));
	haccel__dptr dpos = gpu_up(r->pos, T * sizeof(uint32_t));
	haccel__dptr drow = gpu_up(r->row, T * sizeof(uint32_t));
	haccel__dptr dsel = gpu_alloc((size_t)T * topk * sizeof(int32_t));
	haccel__dptr dn = gpu_alloc(T * sizeof(uint32_t));
	haccel__dptr dscr = gpu_alloc(sbytes);

	const float *qc = r->q;
	float *qt = NULL;

	KTAP_ASSERT(T <= 64);
	ktap_diag("indexer: T %u IH %u topk %u page_tokens %u max_pos %u%s", T, IH, topk, pg->P,
		  r->max_pos, r->rope ? " (rope and Hadamard in the indexer)" : "");
	KTAP_ASSERT_EQ(haccel__cuda_indexer_topk(g, NULL, dsel, dn, dq, dw, T, IH, dpos, drow, dreg,
						 dbt, pg->stride, pg->P, topk, r->max_pos, dscr,
						 r->rope),
		       0);
	gpu_down(got, dsel, (size_t)T * topk * sizeof(int32_t));
	gpu_down(n_got, dn, T * sizeof(uint32_t));
	if (r->rope) {
		size_t qb = (size_t)T * IH * 128 * sizeof(float);
		haccel__dptr dqt = gpu_up(r->q, qb);

		qt = xmalloc(qb);
		KTAP_ASSERT_EQ(haccel__cuda_rope_hadamard(g, NULL, dqt, T, IH, (size_t)IH * 128, 128,
							  r->rope->dim, dpos, r->rope->theta,
							  r->rope->layout),
			       0);
		gpu_down(qt, dqt, qb);
		qc = qt;
		KTAP_ASSERT_EQ(haccel__cuda_indexer_topk(g, NULL, dsel, dn, dqt, dw, T, IH, dpos,
							 drow, dreg, dbt, pg->stride, pg->P, topk,
							 r->max_pos, dscr, NULL),
			       0);
		gpu_down(got2, dsel, (size_t)T * topk * sizeof(int32_t));
		CHECK(memcmp(got, got2, (size_t)T * topk * sizeof(int32_t)) == 0,
		      "indexer: rope dim %u layout %d in the indexer selects otherwise than "
		      "haccel__cuda_rope_hadamard before it", r->rope->dim, r->rope->layout);
	}
	{
		/* The top-k kernel's other path (rows through L2 in every pass,
		 * not staged in shared memory): the same lists, bit for bit. */
		int was = g->ix_topk;

		g->ix_topk = was ? 0 : 1;
		KTAP_ASSERT(gpu_g->cu->MemsetD8Async(dsel, 0x77, (size_t)T * topk * 4,
						     gpu_g->stream) == 0);
		KTAP_ASSERT_EQ(haccel__cuda_indexer_topk(g, NULL, dsel, dn, dq, dw, T, IH, dpos,
							 drow, dreg, dbt, pg->stride, pg->P,
							 topk, r->max_pos, dscr, r->rope), 0);
		g->ix_topk = was;
		gpu_down(got2, dsel, (size_t)T * topk * sizeof(int32_t));
		CHECK(memcmp(got, got2, (size_t)T * topk * sizeof(int32_t)) == 0,
		      "indexer: the top-k through %s selects otherwise than through %s",
		      was ? "shared memory" : "L2", was ? "L2" : "shared memory");
	}
	if (r->twice) {
		/* Poison the outputs: the second call must write all of them. */
		KTAP_ASSERT(gpu_g->cu->MemsetD8Async(dsel, 0x77, (size_t)T * topk * 4,
						     gpu_g->stream) == 0);
		KTAP_ASSERT_EQ(haccel__cuda_indexer_topk(g, NULL, dsel, dn, dq, dw, T, IH, dpos,
							 drow, dreg, dbt, pg->stride, pg->P,
							 topk, r->max_pos, dscr, r->rope), 0);
		gpu_down(got2, dsel, (size_t)T * topk * sizeof(int32_t));
		KTAP_EXPECT(memcmp(got, got2, (size_t)T * topk * sizeof(int32_t)) == 0);
	}
	for (uint32_t t = 0; t < T; t++) {
		uint32_t n = r->pos[t] + 1, k = n < topk ? n : topk;
		const uint32_t *bt = paged_row(pg, r->row[t]);
		const int32_t *gt = got + (size_t)t * topk;
		float *cscr = xmalloc(n * sizeof(float)), *sc = xmalloc(n * sizeof(float));
		double *tol = xmalloc(n * sizeof(double));
		uint8_t *seen = calloc(n, 1);

		KTAP_ASSERT(seen != NULL);
		haccel__cpu_indexer_topk(want, &n_want, qc + (size_t)t * IH * 128,
					 r->w + (size_t)t * IH, 1, IH, &r->pos[t], region, bt,
					 pg->P, topk, cscr);
		CHECK(n_got[t] == n_want, "token %u: n_sel %u, want %u", t, n_got[t], n_want);
		for (uint32_t j = k; j < topk; j++)
			CHECK(gt[j] == -1, "token %u: entry %u is %d past n_sel", t, j, gt[j]);
		identical += memcmp(gt, want, topk * sizeof(int32_t)) == 0;
		if (r->exact) {
			for (uint32_t j = 0; j < k; j++)
				CHECK(gt[j] == want[j], "token %u (pos %u) rank %u: %d, want %d", t,
				      r->pos[t], j, gt[j], want[j]);
		} else {
			naive_scores(sc, tol, region, bt, pg->P, qc + (size_t)t * IH * 128,
				     r->w + (size_t)t * IH, IH, n);
			for (uint32_t j = 0; j < k; j++) {
				CHECK(gt[j] >= 0 && (uint32_t)gt[j] < n && !seen[gt[j]],
				      "token %u rank %u: %d is no new position <= %u", t, j, gt[j],
				      r->pos[t]);
				if (gt[j] < 0 || (uint32_t)gt[j] >= n)
					break; /* no order to check against a bad position */
				seen[gt[j]] = 1;
				if (j)
					CHECK(gt[j] > gt[j - 1],
					      "token %u: entry %u (%d) not after %d (ascending positions)",
					      t, j, gt[j], gt[j - 1]);
			}
			/* Against the CPU's k-th (its list is in position
			 * order: the lowest of it by these scores, NaN lowest,
			 * then the larger position): nothing kept clearly below
			 * it, nothing left clearly above it. */
			int32_t kth = want[0];

			for (uint32_t j = 1; j < k; j++) {
				float a = sc[want[j]], b = sc[kth];

				if (isnan(a) || (!isnan(b) && a <= b))
					kth = want[j];
			}
			for (uint32_t s = 0; s < n; s++)
				CHECK(seen[s] ? !clearly_before(sc, tol, kth, (int32_t)s) :
						!clearly_before(sc, tol, (int32_t)s, kth),
				      "token %u: position %u (%.9g, %s) vs the k-th %d (%.9g)", t,
				      s, (double)sc[s], seen[s] ? "kept" : "left", kth,
				      (double)sc[kth]);
		}
		free(cscr);
		free(sc);
		free(tol);
		free(seen);
	}
	ktap_diag("indexer: %u of %u lists identical to the CPU's", identical, T);
	free(qt);
	free(got);
	free(got2);
	free(want);
}

/* Keys of both sequences written by the CPU writer through the block
 * tables; `period` > 0 repeats the first `period` keys of each sequence. */
static uint8_t *write_keys(const struct paged *pg, uint32_t period)
{
	size_t rb = (size_t)pg->n_pages * pg->P * IK_BYTES;
	uint8_t *region = xmalloc(rb);

	memset(region, 0x5a, rb);
	for (uint32_t s = 0; s < 2; s++) {
		uint32_t n = pg->len[s];
		float *ik = xmalloc((size_t)n * 128 * sizeof(float));
		int64_t *slots = xmalloc(n * sizeof(int64_t));

		for (uint32_t p = 0; p < n; p++) {
			/* MX blocks of different magnitudes */
			for (uint32_t i = 0; i < 128; i++)
				ik[p * 128 + i] = frand(-1, 1) * (i < 32 ? 4 : i < 64 ? 0.25f : 1);
			if (period && p >= period)
				memcpy(ik + p * 128, ik + (p % period) * 128, 128 * sizeof(float));
			slots[p] = paged_slot(pg, s, p);
		}
		haccel__cpu_index_k_write(region, slots, ik, n);
		free(ik);
		free(slots);
	}
	return region;
}

static void fill_qw(float *q, float *w, uint32_t T, uint32_t IH)
{
	for (size_t i = 0; i < (size_t)T * IH * 128; i++)
		q[i] = frand(-1, 1);
	for (size_t i = 0; i < (size_t)T * IH; i++)
		w[i] = frand(-1, 1) * 0.5f + 0.25f; /* mostly positive, some negative */
}

/* check_indexer with fresh queries and weights (fill_qw) for r's tokens
 * and heads. */
static void check_indexer_qw(struct haccel__gpu *g, const struct paged *pg,
			     const uint8_t *region, haccel__dptr dreg, haccel__dptr dbt,
			     struct ix_run r)
{
	float *q = xmalloc((size_t)r.T * r.IH * 128 * sizeof(float));
	float *w = xmalloc((size_t)r.T * r.IH * sizeof(float));

	fill_qw(q, w, r.T, r.IH);
	r.q = q;
	r.w = w;
	check_indexer(g, pg, region, dreg, dbt, &r);
	free(q);
	free(w);
}

/*
 * Small prefixes of two sequences: positions 0, below and above topk, both
 * copy paths (page_tokens 16: 16-byte copies; 5: 4-byte), head counts that
 * are and are not multiples of 8, topk 1, exactly n, above every n. A few
 * keys of sequence 0 carry an E8M0 NaN scale or a NaN code: their dots
 * are NaN and count 0, as on the CPU.
 */
static void test_indexer(void)
{
	struct haccel__gpu *g = gpu_open();
	static const uint32_t pos[10] = { 299, 298, 150, 63, 0, 7, 172, 64, 1, 100 };
	static const uint32_t row[10] = { 0, 0, 0, 0, 0, 0, 1, 1, 1, 1 };
	static const uint32_t cfg[][2] = { { 4, 64 }, { 20, 1 }, { 64, 300 }, { 16, 2048 } };
	static const struct haccel__ix_rope ropes[] = {
		{ 64, 1e4f, 0 }, { 64, 1e4f, 1 }, { 128, 5e5f, 0 }, { 0, 1e4f, 0 } };

	for (int pi = 0; pi < 2; pi++) {
		uint32_t P = pi ? 5 : 16;
		struct paged pg;

		paged_init(&pg, P, 300, 173);
		uint8_t *region = write_keys(&pg, 0);
		for (uint32_t p = 10; p <= 12; p++)
			region[paged_slot(&pg, 0, p) * IK_BYTES + 128 + p % 4] = 0xff;
		region[paged_slot(&pg, 0, 20) * IK_BYTES + 77] = 0x7f;
		haccel__dptr dreg = gpu_up(region, (size_t)pg.n_pages * P * IK_BYTES);
		haccel__dptr dbt = gpu_up(pg.bt, 2 * pg.stride * sizeof(uint32_t));

		for (unsigned int c = 0; c < sizeof(cfg) / sizeof(cfg[0]); c++) {
			struct ix_run r = { 10, cfg[c][0], cfg[c][1], 299, pos, row, NULL, NULL,
					    0, 0, NULL };

			check_indexer_qw(g, &pg, region, dreg, dbt, r);
		}
		/* the queries' rope (both layouts, half or all of the dims,
		 * none) and Hadamard transform in the indexer's preparation;
		 * 20 heads: a group with padding heads */
		for (unsigned int c = 0; c < sizeof(ropes) / sizeof(ropes[0]); c++) {
			struct ix_run r = { 10, c & 1 ? 20 : 16, 64, 299, pos, row, NULL, NULL,
					    0, 0, &ropes[c] };

			check_indexer_qw(g, &pg, region, dreg, dbt, r);
		}
		if (pi == 0) {
			/* a rope the indexer cannot apply: refused */
			static const struct haccel__ix_rope bad[] = {
				{ 64, 1e4f, 2 }, { 130, 1e4f, 0 }, { 63, 1e4f, 1 } };
			haccel__dptr dsc = gpu_alloc(haccel__cuda_indexer_scratch(1, 299, 64));

			for (unsigned int c = 0; c < sizeof(bad) / sizeof(bad[0]); c++)
				KTAP_EXPECT_EQ(haccel__cuda_indexer_topk(g, NULL, dsc, dsc, dsc, dsc, 1,
									 16, dsc, dsc, dreg, dbt,
									 pg.stride, P, 64, 299, dsc,
									 &bad[c]),
					       -EINVAL);
		}
		free(region);
		free(pg.bt);
	}
	gpu_close();
}

/*
 * Equal scores on purpose, so tie-breaking is checked exactly: keys repeat
 * with period 5 (identical bytes give identical scores on either side),
 * the groups' scores are far apart, topk cuts through a group; sequence 0
 * is 20000 long, so the cut crosses scoring chunks and the selection must
 * keep the smaller positions. The last token's queries point along key 3, and
 * key 4 is minus key 3: score exactly 0 for that group.
 */
static void test_indexer_ties(void)
{
	struct haccel__gpu *g = gpu_open();
	static const uint32_t pos[6] = { 19999, 8191, 8192, 4000, 60, 12 };
	static const uint32_t row[6] = { 0, 0, 0, 0, 1, 1 };
	static const uint32_t topks[] = { 1, 26, 2048 };
	enum { IH = 8 };
	struct paged pg;
	float *q = xmalloc(6 * IH * 128 * sizeof(float)), w[6 * IH];

	paged_init(&pg, 16, 20000, 61);
	uint8_t *region = write_keys(&pg, 5);
	/* Key 4 of sequence 1 := minus key 3 (E4M3 is sign-magnitude). */
	for (uint32_t p = 4; p < 61; p += 5) {
		uint8_t *k3 = region + paged_slot(&pg, 1, 3) * IK_BYTES;
		uint8_t *k4 = region + paged_slot(&pg, 1, p) * IK_BYTES;

		for (int i = 0; i < 128; i++)
			k4[i] = k3[i] ^ 0x80;
		memcpy(k4 + 128, k3 + 128, 4);
	}
	haccel__dptr dreg = gpu_up(region, (size_t)pg.n_pages * pg.P * IK_BYTES);
	haccel__dptr dbt = gpu_up(pg.bt, 2 * pg.stride * sizeof(uint32_t));

	fill_qw(q, w, 6, IH);
	{
		float k3[128];

		haccel__index_k_unpack(region + paged_slot(&pg, 1, 3) * IK_BYTES, k3);
		for (uint32_t h = 0; h < IH; h++)
			memcpy(q + (5 * IH + h) * 128, k3, sizeof(k3));
	}
	for (unsigned int i = 0; i < sizeof(topks) / sizeof(topks[0]); i++) {
		struct ix_run r = { 6, IH, topks[i], 19999, pos, row, q, w, 1, 0, NULL };

		check_indexer(g, &pg, region, dreg, dbt, &r);
	}
	free(q);
	free(region);
	free(pg.bt);
	gpu_close();
}

/* A NaN weight makes every score NaN: the first k positions in order,
 * within one chunk and across several. */
static void test_indexer_nan(void)
{
	struct haccel__gpu *g = gpu_open();
	static const uint32_t pos[3] = { 19999, 50, 9000 };
	static const uint32_t row[3] = { 0, 1, 0 };
	enum { IH = 8 };
	struct paged pg;
	float *q = xmalloc(3 * IH * 128 * sizeof(float)), w[3 * IH];

	paged_init(&pg, 64, 20000, 64);
	uint8_t *region = write_keys(&pg, 0);
	haccel__dptr dreg = gpu_up(region, (size_t)pg.n_pages * pg.P * IK_BYTES);
	haccel__dptr dbt = gpu_up(pg.bt, 2 * pg.stride * sizeof(uint32_t));

	fill_qw(q, w, 3, IH);
	w[0 * IH + 3] = NAN;
	w[1 * IH + 0] = NAN;
	w[2 * IH + IH - 1] = -NAN;
	{
		struct ix_run r = { 3, IH, 100, 20000, pos, row, q, w, 1, 0, NULL };

		check_indexer(g, &pg, region, dreg, dbt, &r);
	}
	free(q);
	free(region);
	free(pg.bt);
	gpu_close();
}

/*
 * Long prefixes, topk 2048, several chunks a token (8191 and 8192 straddle
 * the first chunk boundary; max_pos beyond every position leaves blocks
 * with nothing to do), run twice on the same scratch: the same answer.
 */
static void test_indexer_large(void)
{
	struct haccel__gpu *g = gpu_open();
	static const uint32_t pos[4] = { 19999, 8999, 8191, 8192 };
	static const uint32_t row[4] = { 0, 1, 0, 0 };
	enum { IH = 32 };
	struct paged pg;
	float *q = xmalloc(4 * IH * 128 * sizeof(float)), w[4 * IH];

	paged_init(&pg, 64, 20000, 9000);
	uint8_t *region = write_keys(&pg, 0);
	haccel__dptr dreg = gpu_up(region, (size_t)pg.n_pages * pg.P * IK_BYTES);
	haccel__dptr dbt = gpu_up(pg.bt, 2 * pg.stride * sizeof(uint32_t));
	/* (the queries' rope and Hadamard transform in the indexer) */
	static const struct haccel__ix_rope rope = { 64, 1e4f, 1 };
	struct ix_run r = { 4, IH, 2048, 30000, pos, row, q, w, 0, 1, &rope };

	fill_qw(q, w, 4, IH);
	check_indexer(g, &pg, region, dreg, dbt, &r);
	free(q);
	free(region);
	free(pg.bt);
	gpu_close();
}

/*
 * Crowded scores that defeat the top-k kernel's sample: every key but a few
 * thousand is the same vector, the queries all point along it, and the
 * weights are scaled so that this common score sits in the middle of a
 * bin of the top 11 bits of the key (sign, exponent, 2 mantissa bits).
 * About 2500 positions, none of those the kernel samples (1024 keys at
 * i * n / 1024), get keys moved a little towards the queries: scores a few
 * percent higher, many distinct, all in the same bin. The sample then
 * sees only the common score, the threshold it gives admits more than the
 * 16384-entry sort buffer, and so does the first radix histogram: the
 * selection needs its second pass (the next 11 bits). The test checks
 * those preconditions on the CPU's scores first. The second token's row
 * is shorter, so its sample differs.
 */
static void test_indexer_crowded(void)
{
	struct haccel__gpu *g = gpu_open();
	static const uint32_t pos[2] = { 19999, 18500 };
	static const uint32_t row[2] = { 0, 0 };
	enum { IH = 8, N = 20000 };
	struct paged pg;
	float *q = xmalloc(2 * IH * 128 * sizeof(float)), w[2 * IH], base[128];
	float *sc = xmalloc(N * sizeof(float));
	double *tol = xmalloc(N * sizeof(double));
	uint8_t *sampled = calloc(N, 1);

	KTAP_ASSERT(sampled != NULL);
	for (uint32_t i = 0; i < 1024; i++)
		sampled[(uint64_t)i * N / 1024] = 1;
	paged_init(&pg, 64, N, 64);
	size_t rb = (size_t)pg.n_pages * pg.P * IK_BYTES;
	uint8_t *region = xmalloc(rb);
	float *ik = xmalloc((size_t)N * 128 * sizeof(float));
	int64_t *slots = xmalloc(N * sizeof(int64_t));
	uint32_t n_high = 0;

	memset(region, 0x5a, rb);
	for (uint32_t i = 0; i < 128; i++)
		base[i] = frand(0.5f, 1) * (i % 2 ? -1 : 1);
	for (uint32_t p = 0; p < N; p++) {
		memcpy(ik + (size_t)p * 128, base, sizeof(base));
		if (p % 8 == 3 && !sampled[p]) {
			for (uint32_t i = 0; i < 8; i++)
				ik[(size_t)p * 128 + i] += 0.0625f * (float)((p * (i + 3) + p / 7) % 9) *
							   (base[i] < 0 ? -1 : 1);
			n_high++;
		}
		slots[p] = paged_slot(&pg, 0, p);
	}
	haccel__cpu_index_k_write(region, slots, ik, N);
	for (uint32_t t = 0; t < 2; t++)
		for (uint32_t h = 0; h < IH; h++) {
			for (uint32_t i = 0; i < 128; i++)
				q[(t * IH + h) * 128 + i] = base[i] + frand(-0.01f, 0.01f);
			w[t * IH + h] = frand(0.5f, 1);
		}
	/* The common score (position 0's) to 1.125 * 2^e. */
	naive_scores(sc, tol, region, paged_row(&pg, 0), pg.P, q, w, IH, 1);
	{
		int e;
		float f = 0.5625f / frexpf(sc[0], &e);

		for (uint32_t i = 0; i < 2 * IH; i++)
			w[i] *= f;
	}
	naive_scores(sc, tol, region, paged_row(&pg, 0), pg.P, q, w, IH, N);
	{
		float *srt = xmalloc(N * sizeof(float));
		uint32_t bin, crowd = 0, above_common = 0;

		memcpy(srt, sc, N * sizeof(float));
		qsort(srt, N, sizeof(float), cmp_float);
		bin = score_bits(srt[N - 2048]) >> 21;
		for (uint32_t s = 0; s < N; s++) {
			crowd += (score_bits(sc[s]) >> 21) >= bin;
			above_common += sc[s] > sc[0];
			KTAP_ASSERT(!sampled[s] || sc[s] == sc[0]);
		}
		ktap_diag("crowded: %u moved keys, %u scores above the common one, %u in or above the 2048th's bin",
			  n_high, above_common, crowd);
		KTAP_ASSERT(crowd > 16384 && above_common >= 2048);
		free(srt);
	}
	haccel__dptr dreg = gpu_up(region, rb);
	haccel__dptr dbt = gpu_up(pg.bt, 2 * pg.stride * sizeof(uint32_t));
	static const uint32_t topks[] = { 2048, 100 };

	for (unsigned int i = 0; i < 2; i++) {
		struct ix_run r = { 2, IH, topks[i], N - 1, pos, row, q, w, 0, 1, NULL };

		check_indexer(g, &pg, region, dreg, dbt, &r);
	}
	free(q);
	free(sc);
	free(tol);
	free(sampled);
	free(ik);
	free(slots);
	free(region);
	free(pg.bt);
	gpu_close();
}

/*
 * A max_pos so large that the scratch holds the rows of 9 tokens at a time
 * (the 2^24 key words of haccel__cuda_indexer_scratch): 10 tokens run as
 * groups of 9 and 1, through the same scratch.
 */
static void test_indexer_groups(void)
{
	struct haccel__gpu *g = gpu_open();
	static const uint32_t pos[10] = { 299, 298, 150, 63, 0, 7, 172, 64, 1, 100 };
	static const uint32_t row[10] = { 0, 0, 0, 0, 0, 0, 1, 1, 1, 1 };
	enum { IH = 20 };
	struct paged pg;
	float *q = xmalloc(10 * IH * 128 * sizeof(float)), w[10 * IH];

	paged_init(&pg, 16, 300, 173);
	uint8_t *region = write_keys(&pg, 0);
	haccel__dptr dreg = gpu_up(region, (size_t)pg.n_pages * pg.P * IK_BYTES);
	haccel__dptr dbt = gpu_up(pg.bt, 2 * pg.stride * sizeof(uint32_t));
	struct ix_run r = { 10, IH, 64, 1700000, pos, row, q, w, 0, 1, NULL };

	KTAP_EXPECT(haccel__cuda_indexer_scratch(10, 1700000, 64) <
		    (size_t)10 * 1700000 * 4);
	fill_qw(q, w, 10, IH);
	check_indexer(g, &pg, region, dreg, dbt, &r);
	free(q);
	free(region);
	free(pg.bt);
	gpu_close();
}

/*
 * A full batch of 64 tokens with long, ragged prefixes (blocks of the
 * scoring at every stage of their chunks, some with nothing past a short
 * prefix), whole-slab bulk copies (64-token pages) and topk 2048: the
 * scoring's work spread over many blocks a token, as in decode; with 16
 * heads (slabs taken dynamically) and 32 (in chunks).
 */
static void test_indexer_batch(void)
{
	struct haccel__gpu *g = gpu_open();
	enum { T = 64, L0 = 9000, L1 = 5000 };
	uint32_t pos[T], row[T];
	struct paged pg;

	for (uint32_t t = 0; t < T; t++) {
		row[t] = t % 3 == 2;
		pos[t] = (uint32_t)ktap_rand_below(row[t] ? L1 : L0);
	}
	pos[0] = L0 - 1;
	pos[1] = 0;
	pos[2] = L1 - 1;
	paged_init(&pg, 64, L0, L1);
	uint8_t *region = write_keys(&pg, 0);
	haccel__dptr dreg = gpu_up(region, (size_t)pg.n_pages * pg.P * IK_BYTES);
	haccel__dptr dbt = gpu_up(pg.bt, 2 * pg.stride * sizeof(uint32_t));

	for (uint32_t IH = 16; IH <= 32; IH += 16) {
		struct ix_run r = { T, IH, 2048, L0 - 1, pos, row, NULL, NULL, 0, 1, NULL };

		check_indexer_qw(g, &pg, region, dreg, dbt, r);
	}
	free(region);
	free(pg.bt);
	gpu_close();
}

/* ------------------------------------------------------------------------ */
/* Sparse MLA                                                               */

struct mla_cfg {
	uint32_t H, dr, T, topk, P;
	float scale;
	uint32_t len0, len1; /* the two sequences' tokens */
};

/*
 * Sparse MLA against the CPU op, token by token: per token and head,
 * max |o - o_cpu| <= 2e-3 max |o_cpu|. The kernels round the
 * probabilities to fp16 (relative 2^-12) and keep about 22 bits of the
 * queries (fp16 hi + lo; the latent codes are exact), which moves a weight
 * by about 2^-12: errors of a few 1e-4 at most on these inputs, so 2e-3
 * leaves a margin of several times. n_sel = 0 must give exact zeros.
 * Where the splits merge in clusters, the combine kernel's merge
 * (HACCEL_MLA_MERGE=kernel) must give the same bits. The
 * configurations cover every kernel (16-head groups, one or several a
 * token, the last one padded; 32-head groups above 16 heads), one split
 * and many, and partial last tiles.
 *
 * The inputs and the CPU's outputs are made once a configuration and
 * every kernel of its head count (modes, HACCEL_SPARSE_MLA's values) is
 * checked against them: the CPU op is the test's cost (about 10^7 record
 * and head pairs in all), so it runs once, not once a kernel.
 */
struct mla_ref {
	float *want;   /* [T][H][512] the CPU op's outputs */
	double *bound; /* [T][H][512] the h16s-h16w bound (NULL: not needed) */
	double *big;   /* [T][H] max |want| */
};

/*
 * Per (token, head) the CPU op, one head a call, so that its scratch
 * holds that head's probabilities p_j, normalized. h16s and h16w run the
 * same arithmetic compiled into other kernels, whose fp32 contractions
 * may differ, so a logit's last bits may, and then a probability's fp16
 * rounding: each kernel's P_j is within half a unit of the value both
 * round (P <= 1 relative to the running max), so the two differ by at
 * most 2^-10 P_j, or 2^-24 below the fp16 normals. l sums the rounded
 * values and is at least 1, so o_i moves by dP_j (V_ji - o_i) / l. So per
 * element
 *   |o_s - o_w| <= 2^-10 b_i + 2^-24 c_i + 2^-16 a_i + 2^-20 vmax,
 * b_i = sum_j p_j |V_ji - o_i|, c_i = sum_j |V_ji - o_i|,
 * a_i = sum_j p_j |V_ji| (the fp32 contractions in l, alpha and the
 * splits' merge: a unit of 2^-24 a tile, 32 tiles a split at most),
 * vmax the largest |V| selected (products P fac below the fp16 normals:
 * 2^-38 vmax a record at most). A token's records are unpacked once for
 * all its heads.
 */
static void mla_reference(struct mla_ref *r, const struct mla_cfg *c, const struct paged *pg,
			  const uint8_t *region, const float *ql, const float *qp,
			  const int32_t *sel, const uint32_t *n_sel, const uint32_t *row,
			  bool bound)
{
	uint32_t H = c->H, dr = c->dr, T = c->T, topk = c->topk, rec = 528 + 2 * dr;
	float *cscr = xmalloc(topk * sizeof(float));
	float *v = bound ? xmalloc((size_t)topk * 512 * sizeof(float)) : NULL;

	r->want = xmalloc((size_t)T * H * 512 * sizeof(float));
	r->bound = bound ? xmalloc((size_t)T * H * 512 * sizeof(double)) : NULL;
	r->big = xmalloc((size_t)T * H * sizeof(double));
	for (uint32_t t = 0; t < T; t++) {
		double vmax = 0;

		for (uint32_t j = 0; bound && j < n_sel[t]; j++) {
			int64_t slot = paged_slot(pg, row[t], (uint32_t)sel[(size_t)t * topk + j]);

			haccel__kv_token_unpack(region + (size_t)slot * rec, v + (size_t)j * 512,
						NULL, 0);
			for (int i = 0; i < 512; i++)
				vmax = fmax(vmax, fabs((double)v[(size_t)j * 512 + i]));
		}
		for (uint32_t h = 0; h < H; h++) {
			size_t th = (size_t)t * H + h;
			float *want = r->want + th * 512;
			double big = 0;

			haccel__cpu_sparse_mla(want, ql + th * 512, qp + th * dr, 1, 1, dr,
					       sel + (size_t)t * topk, &n_sel[t], topk, region,
					       paged_row(pg, row[t]), pg->P, c->scale, cscr);
			for (int i = 0; i < 512; i++)
				big = fmax(big, fabs((double)want[i]));
			r->big[th] = big;
			if (!bound)
				continue;
			double a[512] = { 0 }, b[512] = { 0 }, cs[512] = { 0 };

			for (uint32_t j = 0; j < n_sel[t]; j++) {
				const float *lat = v + (size_t)j * 512;
				double p = cscr[j];

				for (int i = 0; i < 512; i++) {
					double d = fabs((double)lat[i] - want[i]);

					a[i] += p * fabs((double)lat[i]);
					b[i] += p * d;
					cs[i] += d;
				}
			}
			for (int i = 0; i < 512; i++)
				r->bound[th * 512 + i] = 0x1p-10 * b[i] + 0x1p-24 * cs[i] +
							 0x1p-16 * a[i] + 0x1p-20 * vmax;
		}
	}
	free(v);
	free(cscr);
}

static void mla_ref_free(struct mla_ref *r)
{
	free(r->want);
	free(r->bound);
	free(r->big);
}

/* One kernel (g->sparse_mla, and g->mla_merge 0) against the reference. */
static void check_mla_kernel(struct haccel__gpu *g, const struct mla_cfg *c,
			     const struct mla_ref *r, const uint32_t *n_sel, haccel__dptr dql,
			     haccel__dptr dqp, haccel__dptr dsel, haccel__dptr dn,
			     haccel__dptr drow, haccel__dptr dreg, haccel__dptr dbt,
			     const struct paged *pg)
{
	uint32_t H = c->H, dr = c->dr, T = c->T, topk = c->topk;
	size_t n = (size_t)T * H * 512;
	unsigned int mark = gpu_n_bufs;
	float *got = xmalloc(n * sizeof(float));
	haccel__dptr dout = gpu_alloc(n * 4);
	size_t sb = haccel__cuda_sparse_mla_scratch_gpu(g, T, H, topk);
	haccel__dptr dscr = gpu_alloc(sb);
	int cm = haccel__cuda_sparse_mla_cluster(g, T, H, topk);
	int fl = haccel__cuda_sparse_mla_flags(g, T, H, topk);
	double worst = 0;

	ktap_diag("sparse MLA%s: H %u dr %u T %u topk %u page_tokens %u scale %g scratch %zu, "
		  "%u splits%s%s",
		  g->sparse_mla == 4 && H > 16 ? " (32-head kernel)" :
		  g->sparse_mla == 1	       ? " (16-head mma kernel)" :
						 " (16-head ws kernel)",
		  H, dr, T, topk, c->P, (double)c->scale, sb,
		  haccel__cuda_sparse_mla_splits_gpu(g, T, H, topk),
		  cm ? " merged in clusters" : "", fl ? " merged by flags" : "");
	KTAP_ASSERT_EQ(haccel__cuda_sparse_mla(g, NULL, dout, 0, dql, dqp, T, H, dr, dsel, dn, topk,
					       drow, dreg, dbt, pg->stride, pg->P, c->scale, dscr),
		       0);
	gpu_down(got, dout, n * 4);
	/* Merged by flags (dsa.cu, h16sf): the words at the scratch's start
	 * zero after the call, and a second call (which counts on them) with
	 * the same bits. */
	if (fl) {
		float *again = xmalloc(n * sizeof(float));
		uint32_t words[64];
		size_t off = 0;

		for (int rep = 0; rep < 2; rep++) {
			gpu_down(words, dscr, sizeof(words));
			for (unsigned int k = 0; k < 64; k++)
				CHECK(words[k] == 0, "the flags' word %u is %u after call %d", k,
				      words[k], rep);
			if (rep)
				break;
			KTAP_ASSERT_EQ(haccel__cuda_sparse_mla(g, NULL, dout, 0, dql, dqp, T, H, dr,
							       dsel, dn, topk, drow, dreg, dbt,
							       pg->stride, pg->P, c->scale, dscr),
				       0);
		}
		gpu_down(again, dout, n * 4);
		while (off < n && !memcmp(&again[off], &got[off], 4))
			off++;
		CHECK(off == n, "the flags merge's second call differs at %zu", off);
		free(again);
	}
	/* Merged in the cluster or by flags, the bits of the combine
	 * kernel's merge. */
	if (cm || fl) {
		float *alt = xmalloc(n * sizeof(float));
		size_t off = 0;

		g->mla_merge = 1;
		CHECK(!haccel__cuda_sparse_mla_cluster(g, T, H, topk), "%s",
		      "HACCEL_MLA_MERGE=kernel");
		CHECK(!haccel__cuda_sparse_mla_flags(g, T, H, topk), "%s",
		      "HACCEL_MLA_MERGE=kernel, flags");
		KTAP_ASSERT_EQ(haccel__cuda_sparse_mla(g, NULL, dout, 0, dql, dqp, T, H, dr, dsel,
						       dn, topk, drow, dreg, dbt, pg->stride, pg->P,
						       c->scale, dscr),
			       0);
		g->mla_merge = 0;
		gpu_down(alt, dout, n * 4);
		while (off < n && !memcmp(&alt[off], &got[off], 4))
			off++;
		CHECK(off == n, "the %s merge differs from the combine kernel's at %zu: "
		      "%a against %a", cm ? "cluster's" : "flags'", off,
		      off < n ? (double)got[off] : 0.0,
		      off < n ? (double)alt[off] : 0.0);
		/* The calls above made the context's first flags launch
		 * (cooperative) and a plain one after it. That first launch
		 * refused (as on a GPU shared through MPS with fewer SMs):
		 * the call still succeeds, through the combine kernel (its
		 * bits), and the flags merge stays off for the context. */
		if (fl) {
			uint32_t words[64];

			CHECK(g->mla_coop == 1, "the flags merge's first launch: %d", g->mla_coop);
			g->mla_coop = 0;
			g->coop_refuse = true;
			/* NaNs in the output until the call writes it */
			KTAP_ASSERT(g->cu->MemsetD8Async(dout, 0xff, n * 4, g->stream) == 0);
			KTAP_ASSERT_EQ(haccel__cuda_sparse_mla(g, NULL, dout, 0, dql, dqp, T, H,
							       dr, dsel, dn, topk, drow, dreg, dbt,
							       pg->stride, pg->P, c->scale, dscr),
				       0);
			g->coop_refuse = false;
			CHECK(!haccel__cuda_sparse_mla_flags(g, T, H, topk), "%s",
			      "the flags merge still on after a refused launch");
			gpu_down(got, dout, n * 4);
			CHECK(!memcmp(got, alt, n * 4), "%s",
			      "a refused flags launch: not the combine kernel's bits");
			gpu_down(words, dscr, sizeof(words));
			for (unsigned int k = 0; k < 64; k++)
				CHECK(words[k] == 0, "the flags' word %u is %u after a refusal", k,
				      words[k]);
			CHECK(g->mla_coop == -1, "a refused flags launch: %d", g->mla_coop);
			g->mla_coop = 0;
			CHECK(haccel__cuda_sparse_mla_flags(g, T, H, topk), "%s",
			      "the flags merge not back on");
		}
		free(alt);
	}
	/* The 16-head ws kernel with its softmax on a fourth warpgroup
	 * (h16s, where its shared memory fits) against the one with three
	 * (h16w, HACCEL_SPARSE_MLA=ws3), within r->bound (mla_reference). */
	float *ws3 = NULL;

	if (g->sparse_mla == 2) {
		ws3 = xmalloc(n * sizeof(float));
		g->sparse_mla = 3;
		KTAP_ASSERT_EQ(haccel__cuda_sparse_mla(g, NULL, dout, 0, dql, dqp, T, H, dr, dsel,
						       dn, topk, drow, dreg, dbt, pg->stride, pg->P,
						       c->scale, dscr),
			       0);
		g->sparse_mla = 2;
		gpu_down(ws3, dout, n * 4);
	}
	double wd = 0;

	for (uint32_t t = 0; t < T; t++)
		for (uint32_t h = 0; h < H; h++) {
			size_t th = (size_t)t * H + h;
			const float *o = got + th * 512, *want = r->want + th * 512;
			double err = 0, big = r->big[th], wr = 0;

			for (int i = 0; i < 512; i++) {
				err = fmax(err, fabs((double)o[i] - want[i]));
				if (isnan(o[i]))
					err = INFINITY;
			}
			if (n_sel[t] == 0)
				CHECK(err == 0 && big == 0, "token %u head %u: no selection, %g", t,
				      h, err);
			else
				CHECK(err <= 2e-3 * big, "token %u head %u (n_sel %u): %g of %g", t,
				      h, n_sel[t], err, big);
			if (big > 0)
				worst = fmax(worst, err / big);
			if (!ws3)
				continue;
			KTAP_ASSERT(r->bound != NULL);
			for (int i = 0; i < 512; i++) {
				double d = fabs((double)o[i] - ws3[th * 512 + i]);
				double bound = r->bound[th * 512 + i];

				if (isnan(o[i]) && isnan(ws3[th * 512 + i]))
					continue;
				if (!(d <= bound)) {
					CHECK(0, "token %u head %u dim %d: the ws kernel %a, its "
					      "three-warpgroup form %a (bound %g)", t, h, i,
					      (double)o[i], (double)ws3[th * 512 + i], bound);
					break;
				}
				if (bound > 0)
					wr = fmax(wr, d / bound);
			}
			wd = fmax(wd, wr);
		}
	if (ws3)
		ktap_diag("sparse MLA: ws kernel against its three-warpgroup form: %.3g of "
			  "its bound", wd);
	free(ws3);
	ktap_diag("sparse MLA: worst error %.3g of the largest output (bound 2e-3)", worst);
	/* The bf16 form: the same outputs, rounded as the CPU rounds. */
	{
		haccel__dptr dbf = gpu_alloc(n * 2), dlat = gpu_alloc(n * 4);
		uint16_t *bf = xmalloc(n * 2);
		size_t off = 0;

		KTAP_ASSERT_EQ(haccel__cuda_sparse_mla(g, NULL, dlat, dbf, dql, dqp, T, H, dr, dsel,
						       dn, topk, drow, dreg, dbt, pg->stride, pg->P,
						       c->scale, dscr),
			       0);
		gpu_down(bf, dbf, n * 2);
		while (off < n && bf[off] == haccel__bf16_from_float(got[off]))
			off++;
		CHECK(off == n, "bf16 output %zu of %zu differs: 0x%04x against 0x%04x", off, n,
		      off < n ? bf[off] : 0, off < n ? haccel__bf16_from_float(got[off]) : 0);
		free(bf);
	}
	gpu_free_to(mark);
	free(got);
}

/*
 * One configuration: its pages, queries and selections, the CPU's
 * outputs, then each kernel in modes (HACCEL_SPARSE_MLA's values: 0 the
 * default, 1 the 16-head mma kernel, 2 the ws kernel, checked against its
 * three-warpgroup form too, 4 the 32-head kernel above 16 heads).
 */
static void check_mla(struct haccel__gpu *g, const struct mla_cfg *c, const int *modes,
		      unsigned int n_modes)
{
	uint32_t H = c->H, dr = c->dr, T = c->T, topk = c->topk, rec = 528 + 2 * dr;
	struct paged pg;
	struct mla_ref ref;
	bool bound = false;

	paged_init(&pg, c->P, c->len0, c->len1);
	size_t rb = (size_t)pg.n_pages * pg.P * rec;
	uint8_t *region = xmalloc(rb);
	memset(region, 0x5a, rb);
	/* Latent records whose tiles have different scales, per record and
	 * per tile (1/2 to 8, and every 11th record 2^-20: the kernel's
	 * exponent bookkeeping), logits of a few units like a trained model's. */
	for (uint32_t s = 0; s < 2; s++)
		for (uint32_t p = 0; p < pg.len[s]; p++) {
			float lat[512], pe[64];
			int64_t slot = paged_slot(&pg, s, p);
			int e = p % 11 == 5 ? -20 : (int)(p % 4) - 1;

			for (int i = 0; i < 512; i++)
				lat[i] = frand(-1, 1) * ldexpf(1.0f, e + (i / 128) % 2);
			for (uint32_t i = 0; i < dr; i++)
				pe[i] = frand(-1, 1);
			haccel__cpu_mla_kv_write(region, &slot, lat, pe, 1, dr);
		}
	float *ql = rnd((size_t)T * H * 512, -1, 1), *qp = rnd((size_t)T * H * dr + 1, -2, 2);
	int32_t *sel = xmalloc((size_t)T * topk * sizeof(int32_t));
	unsigned int mark = gpu_n_bufs;
	uint32_t *n_sel = xmalloc(T * sizeof(uint32_t)), *row = xmalloc(T * sizeof(uint32_t));

	for (uint32_t t = 0; t < T; t++) {
		uint32_t len, *perm;

		row[t] = t % 2;
		len = pg.len[row[t]];
		n_sel[t] = t == 0 ? topk : t == 1 ? topk / 2 + 3 : t == 2 ? 0 :
			   1 + (uint32_t)ktap_rand_below(topk);
		if (n_sel[t] > topk)
			n_sel[t] = topk;
		perm = xmalloc(len * sizeof(uint32_t));
		for (uint32_t i = 0; i < len; i++)
			perm[i] = i;
		for (uint32_t i = 0; i < topk && i < len; i++) {
			uint32_t j = i + (uint32_t)ktap_rand_below(len - i), tmp = perm[i];

			perm[i] = perm[j];
			perm[j] = tmp;
		}
		for (uint32_t j = 0; j < topk; j++)
			sel[(size_t)t * topk + j] = j < n_sel[t] ? (int32_t)perm[j] : -1;
		free(perm);
	}
	haccel__dptr dreg = gpu_up(region, rb), dbt = gpu_up(pg.bt, 2 * pg.stride * 4);
	haccel__dptr dql = gpu_up(ql, (size_t)T * H * 512 * 4);
	haccel__dptr dqp = gpu_up(qp, ((size_t)T * H * dr + 1) * 4);
	haccel__dptr dsel = gpu_up(sel, (size_t)T * topk * 4), dn = gpu_up(n_sel, T * 4);
	haccel__dptr drow = gpu_up(row, T * 4);

	for (unsigned int m = 0; m < n_modes; m++)
		bound |= modes[m] == 2;
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	mla_reference(&ref, c, &pg, region, ql, qp, sel, n_sel, row, bound);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ktap_diag("sparse MLA: H %u T %u topk %u: the CPU's outputs in %.2f s", H, T, topk,
		  (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
	for (unsigned int m = 0; m < n_modes; m++) {
		g->sparse_mla = modes[m];
		check_mla_kernel(g, c, &ref, n_sel, dql, dqp, dsel, dn, drow, dreg, dbt, &pg);
	}
	mla_ref_free(&ref);
	gpu_free_to(mark);
	free(region);
	free(pg.bt);
	free(ql);
	free(qp);
	free(sel);
	free(n_sel);
	free(row);
}

/*
 * H = 1, 4, 8, 16, 64 (and 40, 128: padded and several head groups), dr =
 * 64, 48, 32, 16 and 0, topk from 64 to 2048, n_sel below topk and 0, one
 * split (written directly) and many (combined), one tile a split and many.
 * Each configuration runs through both 16-head kernels (ceil(H / 16)
 * head groups a token), each forced as HACCEL_SPARSE_MLA=ws and mma do:
 * the warp-specialized one (the default where a split has 2 tiles or
 * more; its four-warpgroup form checked against its three-warpgroup one
 * within the fp16 rounding of the probabilities) and the one on 8 warps;
 * above 16 heads the 32-head kernel too (HACCEL_SPARSE_MLA=h32).
 */
static void test_sparse_mla(void)
{
	struct haccel__gpu *g = gpu_open();
	static const struct mla_cfg cfg[] = {
		{ 1, 64, 3, 64, 16, 0.0416667f, 3000, 2100 },
		{ 16, 64, 4, 256, 64, 0.0721688f, 3000, 2100 },
		{ 64, 64, 3, 2048, 64, 0.0416667f, 3000, 2100 },
		{ 40, 0, 3, 128, 5, 0.25f, 3000, 2100 },
		{ 16, 64, 40, 64, 16, 0.0721688f, 3000, 2100 },
		{ 128, 64, 3, 512, 64, 0.0416667f, 3000, 2100 },
		{ 20, 32, 5, 1000, 7, 0.1f, 3000, 2100 },
		/* 16-head kernels, many tiles a split (3 splits of 10-11
		 * tiles; 2 of 12 with dr = 0): their record buffers (three,
		 * four) rotate several times */
		{ 16, 64, 40, 2048, 64, 0.0721688f, 3000, 2100 },
		{ 8, 0, 66, 1500, 16, 0.25f, 3000, 2100 },
		/* 16-head kernels with rope parts of 3 and 1 k-steps (the
		 * mma kernel's two warpgroups take the rope's k-steps in
		 * turn, zeros past dr), odd page sizes */
		{ 16, 48, 6, 700, 7, 0.1f, 3000, 2100 },
		{ 4, 16, 5, 300, 3, 0.2f, 3000, 2100 },
		/* 16-head kernels, one split of 32 tiles (the largest slot
		 * list and shared memory) and splits of one tile */
		{ 16, 64, 140, 2048, 64, 0.0721688f, 3000, 2100 },
		{ 16, 64, 2, 2048, 64, 0.0721688f, 3000, 2100 },
		/* the ws kernel at 8, 4 and 2 splits (T = 16, 32, 64 on 132
		 * SMs): merged in clusters where they all fit at once (on an
		 * H200 only the 2), else by the combine kernel; fewer than
		 * 16 heads */
		{ 16, 64, 16, 2048, 64, 0.0721688f, 3000, 2100 },
		{ 8, 64, 32, 2048, 64, 0.0721688f, 3000, 2100 },
		{ 16, 64, 64, 2048, 64, 0.0721688f, 3000, 2100 },
		/* 4 splits a token where 30 clusters of 4 fit (132 SMs): the
		 * flags merge (8 heads at T = 32 above too) */
		{ 16, 64, 32, 2048, 64, 0.0721688f, 3000, 2100 },
		{ 16, 64, 31, 2048, 64, 0.0721688f, 3000, 2100 },
		/* block-table rows longer than the ws kernel stages in shared
		 * memory (DSA_WS_BTS, 4096 pages), a token a page: the
		 * selection's pages found there and past it in global memory */
		{ 16, 64, 20, 1024, 1, 0.0721688f, 6000, 5000 },
	};
	int keep = g->sparse_mla;

	static const int modes[] = { 2, 1, 4 };

	for (unsigned int i = 0; i < sizeof(cfg) / sizeof(cfg[0]); i++)
		check_mla(g, &cfg[i], modes, cfg[i].H > 16 ? 3 : 2);
	g->sparse_mla = keep;
	for (uint32_t i = 0; i < g->n_clusters; i++)
		ktap_diag("clusters of %u resident at once: %d (-1: none)", g->clusters[i].cx,
			  g->clusters[i].n);
	gpu_close();
}

/*
 * No GPU needed: every scratch size serves every smaller call. The model
 * carves scratch once for its largest step (max_step_tokens rows), then
 * runs steps of any T below it; sparse MLA's split count falls as T grows,
 * so a size taken at the largest T alone was too small for some smaller
 * ones (T = 96 needs 576 rows of partials, T = 256 took 512). Both follow
 * the device's SM count: 16-head groups fill one wave of blocks, which a
 * fixed 132 overfilled on devices with fewer SMs.
 */
static void test_scratch_sizes(void)
{
	static const uint32_t Hs[] = { 1, 16, 20, 40, 64, 128 };
	static const uint32_t ks[] = { 1, 64, 100, 512, 2048, 4096 };
	/* SM counts: a few, an H100 PCIe's, an H100 SXM's and an H200's, a
	 * B200's, more than MLA_BLOCKS */
	static const uint32_t sms[] = { 1, 20, 114, 132, 148, 600 };
	uint32_t bad = 0, waves = 0;

	for (unsigned int m = 0; m < sizeof(sms) / sizeof(sms[0]); m++)
		for (unsigned int h = 0; h < sizeof(Hs) / sizeof(Hs[0]); h++)
			for (unsigned int k = 0; k < sizeof(ks) / sizeof(ks[0]); k++) {
				size_t need_max = 0;
				uint32_t least = (ks[k] + 64 * 32 - 1) / (64 * 32);

				for (uint32_t T = 1; T <= 1100; T++) {
					uint32_t n = haccel__cuda_sparse_mla_splits(sms[m], T, Hs[h],
										    ks[k]);
					size_t need = n > 1 ? (size_t)T * n * Hs[h] * 514 * 4 : 0;
					size_t have = haccel__cuda_sparse_mla_scratch(sms[m], T, Hs[h],
										      ks[k]);

					if (need > need_max)
						need_max = need;
					if (have < need_max && bad++ < 5)
						ktap_diag("sparse MLA %u SMs, H %u topk %u: scratch(%u) = %zu < %zu needed by a smaller call",
							  sms[m], Hs[h], ks[k], T, have, need_max);
					/* 16-head groups: one wave of blocks, unless a
					 * split would pass 32 tiles or the token has
					 * only one */
					uint64_t blocks = (uint64_t)T * n * ((Hs[h] + 15) / 16);

					if (blocks > sms[m] && n > (least > 1 ? least : 1) &&
					    waves++ < 5)
						ktap_diag("sparse MLA %u SMs, H %u topk %u, T %u: %u splits, %llu blocks",
							  sms[m], Hs[h], ks[k], T, n,
							  (unsigned long long)blocks);
				}
			}
	KTAP_EXPECT_EQ(bad, 0);
	KTAP_EXPECT_EQ(waves, 0);
	/* For a device's handle: the default kernels' size, and with
	 * HACCEL_SPARSE_MLA=h32 (its own splits above 16 heads) one that
	 * still serves every smaller call. */
	uint32_t off = 0;

	for (unsigned int m = 0; m < sizeof(sms) / sizeof(sms[0]); m++)
		for (unsigned int h = 0; h < sizeof(Hs) / sizeof(Hs[0]); h++) {
			struct haccel__cuda cu = { .sm_count = (int)sms[m] };
			struct haccel__gpu dg = { .cu = &cu }, hg = { .cu = &cu, .sparse_mla = 4 };
			size_t prev = 0;

			for (uint32_t T = 1; T <= 600; T += 3) {
				size_t d = haccel__cuda_sparse_mla_scratch_gpu(&dg, T, Hs[h], 2048);
				size_t x = haccel__cuda_sparse_mla_scratch_gpu(&hg, T, Hs[h], 2048);
				/* the splits each handle runs: the default ones, and
				 * h32's that its scratch holds (more than the
				 * default's above 16 heads, where fewer blocks
				 * fill the GPU) */
				uint32_t nd = haccel__cuda_sparse_mla_splits_gpu(&dg, T, Hs[h], 2048);
				uint32_t nx = haccel__cuda_sparse_mla_splits_gpu(&hg, T, Hs[h], 2048);
				size_t xneed = nx > 1 ? (size_t)T * nx * Hs[h] * 514 * 4 : 0;

				if ((d != haccel__cuda_sparse_mla_scratch(sms[m], T, Hs[h], 2048) ||
				     x < prev || (Hs[h] <= 16 && x != d) ||
				     nd != haccel__cuda_sparse_mla_splits(sms[m], T, Hs[h], 2048) ||
				     (Hs[h] <= 16 && nx != nd) || x < xneed) &&
				    off++ < 5)
					ktap_diag("sparse MLA %u SMs, H %u, T %u: scratch %zu, h32 %zu (%zu before), splits %u, h32 %u",
						  sms[m], Hs[h], T, d, x, prev, nd, nx);
				prev = x;
			}
		}
	KTAP_EXPECT_EQ(off, 0);
	/* The others grow with every argument. */
	for (uint32_t T = 1; T < 600; T += 7)
		for (uint32_t p = 1; p < 70000; p += 4099) {
			KTAP_EXPECT(haccel__cuda_indexer_scratch(T + 1, p, 2048) >=
				    haccel__cuda_indexer_scratch(T, p, 2048));
			KTAP_EXPECT(haccel__cuda_indexer_scratch(T, p + 4099, 2048) >=
				    haccel__cuda_indexer_scratch(T, p, 2048));
			KTAP_EXPECT(haccel__cuda_kda_chunked_scratch(T + 1, 4, 128, 128, p % 50 + 1) >=
				    haccel__cuda_kda_chunked_scratch(T, 4, 128, 128, p % 50 + 1));
		}
}

static const struct ktap_case cases[] = {
	KTAP_CASE(test_scratch_sizes),
	KTAP_CASE(test_rope),
	KTAP_CASE(test_hadamard),
	KTAP_CASE(test_writers),
	KTAP_CASE(test_indexer_inputs),
	KTAP_CASE(test_indexer),
	KTAP_CASE(test_indexer_ties),
	KTAP_CASE(test_indexer_nan),
	KTAP_CASE(test_indexer_large),
	KTAP_CASE(test_indexer_crowded),
	KTAP_CASE(test_indexer_groups),
	KTAP_CASE(test_indexer_batch),
	/* the CPU op over about 10^7 record and head pairs */
	KTAP_CASE_TIMEOUT(test_sparse_mla, 120),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
