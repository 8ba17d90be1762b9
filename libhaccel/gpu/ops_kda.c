// SPDX-License-Identifier: MIT
/*
 * Host side of kernels/kda.cu: argument checks and launch shapes of the KDA
 * ops. seg_off is uint32_t[n_seg + 1] and seg_slot uint32_t[n_seg] on the
 * device; the slots of one launch must be distinct.
 *
 * Limits (-EINVAL beyond them): conv W <= 8; recurrent K <= 256 and
 * V % 4 == 0; chunked K % 16 == 0, K <= 256, V % 4 == 0, V <= 256; the
 * state (base and slot stride), and for the recurrence v and o, for the
 * chunked form o and the scratch, 16-byte aligned (they move as float4).
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>

#include "gpu/ops.h"

/* Must match kernels/kda.cu. */
#define KDA_C 64
#define KDA_MAX_K 256
#define KDA_TILE_V 32
#define KDA_TILE_VW 64 /* the recurrence's wide tile (kda.cu, the _w kernels) */

#define FN(name)                                              \
	void *fn;                                             \
	int ret = haccel__gpu_fn(g, name, &fn);               \
	if (ret)                                              \
		return ret

/* A grid-stride launch over n values. */
static unsigned int grid_for(size_t n)
{
	size_t b = (n + 255) / 256;

	return b < 1 ? 1 : b > 4096 ? 4096 : (unsigned int)b;
}

static int misaligned(uint64_t x)
{
	return (x & 15) != 0;
}

/* x[0..n) equally spaced, by a multiple of unit bytes (or n == 1): the
 * spacing in units, through *gs. */
static bool spaced(const haccel__dptr *x, uint32_t n, uint64_t unit, uint64_t *gs)
{
	uint64_t d = n > 1 ? x[1] - x[0] : 0;

	if (n > 1 && (x[1] < x[0] || d % unit))
		return false;
	for (uint32_t i = 2; i < n; i++)
		if (x[i] != x[0] + i * d)
			return false;
	*gs = d / unit;
	return true;
}

int haccel__cuda_kda_conv_n(struct haccel__gpu *g, void *stream, uint32_t n,
			    const haccel__dptr *out, const haccel__dptr *in, const haccel__dptr *w,
			    const haccel__dptr *tail_base, uint32_t T, uint32_t C, uint32_t W,
			    uint32_t n_seg, haccel__dptr seg_off, haccel__dptr seg_slot,
			    uint64_t slot_stride)
{
	unsigned int cb = (C + 255) / 256;
	uint64_t go, gi, gw, gt;
	void *tail_fn;

	if (W > 8 || cb > 65535 || n > 65535)
		return -EINVAL;
	/* W = 0 does nothing, as the CPU op. */
	if (!T || !C || !W || !n_seg || !n)
		return 0;
	if (!(spaced(out, n, 4, &go) && spaced(in, n, 4, &gi) && spaced(w, n, 4, &gw) &&
	      spaced(tail_base, n, 1, &gt))) {
		for (uint32_t i = 0; i < n; i++) {
			int r = haccel__cuda_kda_conv_n(g, stream, 1, &out[i], &in[i], &w[i],
							&tail_base[i], T, C, W, n_seg, seg_off,
							seg_slot, slot_stride);
			if (r)
				return r;
		}
		return 0;
	}
	haccel__dptr o0 = out[0], i0 = in[0], w0 = w[0], t0 = tail_base[0];
	/* Short segments (decode, a token each): the outputs and the new tails
	 * in one launch. */
	if (T <= 2 * (uint64_t)n_seg) {
		FN("haccel_kda_conv_seg");
		return HACCEL__LAUNCH(g, fn, n_seg, cb, n, 256, 1, 1, 0, stream, &o0, &i0, &C, &w0,
				      &W, &seg_off, &seg_slot, &t0, &slot_stride, &go, &gi, &gw,
				      &gt);
	}
	FN("haccel_kda_conv");
	ret = haccel__gpu_fn(g, "haccel_kda_conv_tail", &tail_fn);
	if (ret)
		return ret;
	ret = HACCEL__LAUNCH(g, fn, T, cb, n, 256, 1, 1, 0, stream, &o0, &i0, &C, &w0, &W, &n_seg,
			     &seg_off, &seg_slot, &t0, &slot_stride, &go, &gi, &gw, &gt);
	if (ret || W == 1)
		return ret;
	/* Stream order puts every read of the old tails before this. */
	return HACCEL__LAUNCH(g, tail_fn, n_seg, cb, n, 256, 1, 1, 0, stream, &i0, &C, &W,
			      &seg_off, &seg_slot, &t0, &slot_stride, &gi, &gt);
}

int haccel__cuda_kda_conv(struct haccel__gpu *g, void *stream, haccel__dptr out,
			  haccel__dptr in, uint32_t T, uint32_t C, haccel__dptr w, uint32_t W,
			  uint32_t n_seg, haccel__dptr seg_off, haccel__dptr seg_slot,
			  haccel__dptr tail_base, uint64_t slot_stride)
{
	return haccel__cuda_kda_conv_n(g, stream, 1, &out, &in, &w, &tail_base, T, C, W, n_seg,
				       seg_off, seg_slot, slot_stride);
}

int haccel__cuda_kda_gate(struct haccel__gpu *g, void *stream, haccel__dptr gt,
			  haccel__dptr g_raw, uint32_t T, uint32_t H, uint32_t K,
			  haccel__dptr A_log, haccel__dptr dt_bias, int form, float lb)
{
	uint64_t n = (uint64_t)T * H * K;

	if (!n)
		return 0;
	FN("haccel_kda_gate");
	return HACCEL__LAUNCH(g, fn, grid_for(n), 1, 1, 256, 1, 1, 0, stream, &gt, &g_raw, &H,
			      &K, &A_log, &dt_bias, &form, &lb, &n);
}

int haccel__cuda_kda_prep(struct haccel__gpu *g, void *stream, haccel__dptr q,
			  haccel__dptr k, haccel__dptr beta, uint32_t T, uint32_t H, uint32_t K)
{
	uint64_t rows = (uint64_t)T * H;
	/* K^-1/2 rounded once to fp32, as the CPU op. */
	float scale = (float)(1.0 / sqrt((double)K));

	if ((rows + 7) / 8 > 0x7fffffffu)
		return -EINVAL;
	if (!rows || !K)
		return 0;
	FN("haccel_kda_prep");
	return HACCEL__LAUNCH(g, fn, (unsigned int)((rows + 7) / 8), 1, 1, 256, 1, 1, 0, stream,
			      &q, &k, &beta, &K, &rows, &scale);
}

/* The recurrent kernel for K, its raw-input form with raw, the wide tile
 * with wide (kda.cu; K <= 128). */
static const char *recurrent_name(uint32_t K, bool raw, bool wide)
{
	if (wide)
		return K <= 64 ? (raw ? "haccel_kda_recurrent_64w_raw" : "haccel_kda_recurrent_64w") :
				 (raw ? "haccel_kda_recurrent_128w_raw" : "haccel_kda_recurrent_128w");
	if (K <= 64)
		return raw ? "haccel_kda_recurrent_64_raw" : "haccel_kda_recurrent_64";
	if (K <= 128)
		return raw ? "haccel_kda_recurrent_128_raw" : "haccel_kda_recurrent_128";
	return raw ? "haccel_kda_recurrent_256_raw" : "haccel_kda_recurrent_256";
}

/* The wide tile for the recurrence (kda.cu) where it makes at least two
 * waves of 4 blocks an SM; HACCEL_KDA_TILE=32|64 picks one. */
static bool wide_tile(struct haccel__gpu *g, uint32_t K, uint32_t V, uint32_t H,
		      uint32_t n_seg)
{
	uint64_t sms = haccel__gpu_sms(g);

	uint64_t blocks = (uint64_t)n_seg * H * ((V + KDA_TILE_VW - 1) / KDA_TILE_VW);

	return K <= 128 && (g->kda_tile == 64 || (!g->kda_tile && blocks >= 8 * sms));
}

/* The raw-input form's extra arguments (haccel__cuda_kda_recurrent_raw). */
struct rec_raw {
	haccel__dptr A_log, dt_bias;
	int form;
	float lb, scale;
};

static int recurrent(struct haccel__gpu *g, void *stream, haccel__dptr q, haccel__dptr k,
		     haccel__dptr v, haccel__dptr gt, haccel__dptr beta, haccel__dptr o,
		     uint32_t T, uint32_t H, uint32_t K, uint32_t V, uint32_t n_seg,
		     haccel__dptr seg_off, haccel__dptr seg_slot, haccel__dptr state_base,
		     uint64_t slot_stride, struct rec_raw *r)
{
	bool wide = wide_tile(g, K, V, H, n_seg);
	uint32_t tw = wide ? KDA_TILE_VW : KDA_TILE_V, tiles = (V + tw - 1) / tw;

	if (!K || K > KDA_MAX_K || !V || V % 4 || H > 65535 || n_seg > 0x7fffffffu ||
	    misaligned(v) || misaligned(o) || misaligned(state_base) || misaligned(slot_stride))
		return -EINVAL;
	if (!T || !H || !n_seg)
		return 0;
	FN(recurrent_name(K, r != NULL, wide));
	if (!r)
		return HACCEL__LAUNCH(g, fn, n_seg, H, tiles, 256, 1, 1, 0, stream, &q, &k, &v, &gt,
				      &beta, &o, &H, &K, &V, &seg_off, &seg_slot, &state_base,
				      &slot_stride);
	return HACCEL__LAUNCH(g, fn, n_seg, H, tiles, 256, 1, 1, 0, stream, &q, &k, &v, &gt,
			      &beta, &o, &H, &K, &V, &seg_off, &seg_slot, &state_base,
			      &slot_stride, &r->A_log, &r->dt_bias, &r->form, &r->lb, &r->scale);
}

int haccel__cuda_kda_recurrent(struct haccel__gpu *g, void *stream, haccel__dptr q,
			       haccel__dptr k, haccel__dptr v, haccel__dptr gt,
			       haccel__dptr beta, haccel__dptr o, uint32_t T, uint32_t H,
			       uint32_t K, uint32_t V, uint32_t n_seg, haccel__dptr seg_off,
			       haccel__dptr seg_slot, haccel__dptr state_base,
			       uint64_t slot_stride)
{
	return recurrent(g, stream, q, k, v, gt, beta, o, T, H, K, V, n_seg, seg_off, seg_slot,
			 state_base, slot_stride, NULL);
}

int haccel__cuda_kda_recurrent_raw(struct haccel__gpu *g, void *stream, haccel__dptr q,
				   haccel__dptr k, haccel__dptr v, haccel__dptr g_raw,
				   haccel__dptr beta, haccel__dptr o, uint32_t T, uint32_t H,
				   uint32_t K, uint32_t V, uint32_t n_seg, haccel__dptr seg_off,
				   haccel__dptr seg_slot, haccel__dptr state_base,
				   uint64_t slot_stride, haccel__dptr A_log, haccel__dptr dt_bias,
				   int form, float lb)
{
	/* K^-1/2 rounded once to fp32, as haccel__cuda_kda_prep's */
	struct rec_raw r = { A_log, dt_bias, form, lb, (float)(1.0 / sqrt((double)K)) };

	return recurrent(g, stream, q, k, v, g_raw, beta, o, T, H, K, V, n_seg, seg_off,
			 seg_slot, state_base, slot_stride, &r);
}

static size_t chunk_floats(uint32_t K, uint32_t V)
{
	return (size_t)KDA_C * (3 * K + V + KDA_C) + K;
}

/* Dynamic shared memory of the two passes, in bytes: kda_prep_smem(),
 * kda_state2_smem() (K <= 128) and kda_state_smem() of kernels/kda.cu. */
static size_t prep_smem(uint32_t K, uint32_t V)
{
	uint32_t D = K > V ? K : V;

	D = D > KDA_C + 4 ? D : KDA_C + 4;
	return 4 * (size_t)KDA_C * (3 * ((D + 15) / 16 * 16 + 8) + 1);
}

/* kernels/kda.cu's KDA_WG_SMEM(NV): haccel_kda_chunk_state_wg32, _wg64
 * (K = 128, NV columns of V a block) */
static unsigned int state_wg_smem(uint32_t NV)
{
	return 1024u + 12u * 128u * NV +
	       4u * (2u * KDA_C * 136u + KDA_C * 132u + KDA_C * (KDA_C + 8u) + 2u * 128u);
}

static size_t state_smem(uint32_t K)
{
	if (K <= 128) /* kda_state2_smem */
		return 4 * ((size_t)K * 68 + 2 * (size_t)KDA_C * (K + 8) +
			    (size_t)KDA_C * (K + 4) + 2 * (size_t)KDA_C * 40 + (size_t)KDA_C * 68 +
			    (size_t)KDA_C * (KDA_C + 8) + 2 * K);
	return 4 * ((size_t)K * 40 + (size_t)KDA_C * (K + 4) + (size_t)KDA_C * (K + 8) +
		    2 * (size_t)KDA_C * 40 + (size_t)KDA_C * (KDA_C + 4) + 2 * K);
}

size_t haccel__cuda_kda_chunked_scratch(uint32_t T, uint32_t H, uint32_t K, uint32_t V,
					uint32_t n_seg)
{
	return ((size_t)(T + KDA_C - 1) / KDA_C + n_seg) * H * chunk_floats(K, V) * sizeof(float);
}

int haccel__cuda_kda_chunked(struct haccel__gpu *g, void *stream, haccel__dptr q,
			     haccel__dptr k, haccel__dptr v, haccel__dptr gt, haccel__dptr beta,
			     haccel__dptr o, uint32_t T, uint32_t H, uint32_t K, uint32_t V,
			     uint32_t n_seg, haccel__dptr seg_off, haccel__dptr seg_slot,
			     haccel__dptr state_base, uint64_t slot_stride, haccel__dptr scratch)
{
	uint64_t slots = (uint64_t)(T + KDA_C - 1) / KDA_C + n_seg;
	/* The largest needs (K = V = 256), set every time: idempotent, so
	 * concurrent callers never lower each other's limit. */
	int smem_max = (int)prep_smem(KDA_MAX_K, KDA_MAX_K);
	void *state_fn;

	if (!K || K % 16 || K > KDA_MAX_K || !V || V % 4 || V > KDA_MAX_K || H > 65535 ||
	    slots > 0x7fffffffu || misaligned(q) || misaligned(k) || misaligned(v) ||
	    misaligned(gt) || misaligned(o) || misaligned(scratch) ||
	    misaligned(state_base) || misaligned(slot_stride))
		return -EINVAL;
	if (!T || !H || !n_seg)
		return 0;
	if (!scratch)
		return -EINVAL;
	/* Pass 2 has a kernel for K <= 128 and one for wider keys; K = 128
	 * (and V = 128 in pass 1), the model's heads, have their own with
	 * constant strides. K = 128 runs on the warpgroup MMA, in blocks of
	 * 64 columns of V where those of 32 would take more than one wave
	 * (a block an SM); HACCEL_KDA_PASS2 = mma, wg32 or wg64 picks one. */
	FN(K == 128 && V == 128 ? "haccel_kda_chunk_prep_128" : "haccel_kda_chunk_prep");
	uint64_t sms = haccel__gpu_sms(g);
	bool wg = K == 128 && g->kda_pass2 != 1;
	uint32_t tile = KDA_TILE_V;

	if (wg && (g->kda_pass2 == 64 ||
		   (!g->kda_pass2 && (uint64_t)n_seg * H * ((V + 31) / 32) > sms)))
		tile = 64;
	ret = haccel__gpu_fn(g,
			     wg && tile == 64 ? "haccel_kda_chunk_state_wg64" :
			     wg		      ? "haccel_kda_chunk_state_wg32" :
			     K == 128	      ? "haccel_kda_chunk_state2_128" :
			     K < 128	      ? "haccel_kda_chunk_state2" :
						"haccel_kda_chunk_state",
			     &state_fn);
	if (ret)
		return ret;
	if ((int)state_smem(KDA_MAX_K) > smem_max)
		smem_max = (int)state_smem(KDA_MAX_K);
	if ((int)state_wg_smem(64) > smem_max)
		smem_max = (int)state_wg_smem(64);
	ret = HACCEL__CU(g->ctx, g->cu->FuncSetAttribute(fn, HACCEL__CU_FUNC_ATTR_MAX_DYN_SMEM,
							 smem_max));
	if (!ret)
		ret = HACCEL__CU(g->ctx, g->cu->FuncSetAttribute(
						 state_fn, HACCEL__CU_FUNC_ATTR_MAX_DYN_SMEM,
						 smem_max));
	if (ret)
		return ret;
	ret = HACCEL__LAUNCH(g, fn, (unsigned int)slots, H, 1, 256, 1, 1,
			     (unsigned int)prep_smem(K, V), stream, &q, &k, &v, &gt, &beta, &H,
			     &K, &V, &n_seg, &seg_off, &scratch);
	if (ret)
		return ret;
	unsigned int smem = wg ? state_wg_smem(tile) : (unsigned int)state_smem(K);

	return HACCEL__LAUNCH(g, state_fn, n_seg, H, (V + tile - 1) / tile, 256, 1, 1, smem,
			      stream, &o, &H, &K, &V, &seg_off, &seg_slot, &state_base,
			      &slot_stride, &scratch);
}

int haccel__cuda_kda_wg_matmul(struct haccel__gpu *g, void *stream, haccel__dptr c,
			       haccel__dptr a, haccel__dptr b, uint32_t K, uint32_t NV,
			       uint32_t ta, uint32_t part)
{
	unsigned int smem = 1024u + 2u * K * NV * 4u;

	if ((K != 64 && K != 128) || (NV != 32 && NV != 64) || part > 2 || misaligned(a))
		return -EINVAL;
	FN("haccel_kda_wg_matmul");
	ret = HACCEL__CU(g->ctx,
			 g->cu->FuncSetAttribute(fn, HACCEL__CU_FUNC_ATTR_MAX_DYN_SMEM, (int)smem));
	if (ret)
		return ret;
	return HACCEL__LAUNCH(g, fn, 1, 1, 1, 128, 1, 1, smem, stream, &c, &a, &b, &K, &NV, &ta,
			      &part);
}

/* Blocks of 8 rows for the T x H rows: -EINVAL past the grid, 0 when
 * there is nothing to do. */
static int64_t gated_blocks(uint32_t T, uint32_t H, uint32_t V, uint64_t *rows)
{
	*rows = (uint64_t)T * H;
	if ((*rows + 7) / 8 > 0x7fffffffu)
		return -EINVAL;
	return *rows && V ? (int64_t)((*rows + 7) / 8) : 0;
}

int haccel__cuda_gated_rmsnorm(struct haccel__gpu *g, void *stream, haccel__dptr o,
			       haccel__dptr gate, haccel__dptr w, uint32_t T, uint32_t H,
			       uint32_t V, float eps)
{
	uint64_t rows;
	int64_t nb = gated_blocks(T, H, V, &rows);

	if (nb <= 0)
		return (int)nb;
	FN("haccel_kda_gated_rmsnorm");
	return HACCEL__LAUNCH(g, fn, (unsigned int)nb, 1, 1, 256, 1, 1, 0, stream, &o, &gate, &w,
			      &V, &rows, &eps);
}

int haccel__cuda_gated_rmsnorm_bf16(struct haccel__gpu *g, void *stream, haccel__dptr y,
				    haccel__dptr o, haccel__dptr gate, haccel__dptr w, uint32_t T,
				    uint32_t H, uint32_t V, float eps)
{
	uint64_t rows;
	int64_t nb = gated_blocks(T, H, V, &rows);

	if (nb <= 0)
		return (int)nb;
	FN("haccel_kda_gated_rmsnorm_bf16");
	return HACCEL__LAUNCH(g, fn, (unsigned int)nb, 1, 1, 256, 1, 1, 0, stream, &y, &o, &gate,
			      &w, &V, &rows, &eps);
}
