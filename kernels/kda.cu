// SPDX-License-Identifier: MIT
/*
 * KDA kernels: the ops of libhaccel/model/cpu/kda.c on the GPU, over
 * segments (gpu/ops.h). Layouts as the CPU ops (fp32, row-major):
 *   q, k, g [T][H][K]   v, o, gate [T][H][V]   beta [T][H]
 *   state S [H][K][V] at state_base + seg_slot[s] * slot_stride
 *   conv tail [W-1][C] at tail_base + seg_slot[s] * slot_stride
 * seg_off is uint32_t[n_seg + 1] (non-decreasing), seg_slot
 * uint32_t[n_seg]; the slots of one launch are distinct.
 *
 * conv      two launches: every output reads the old tail, so the tails
 *           are rewritten by a second kernel, after all reads (stream order).
 * gate      elementwise. prep, gated_rmsnorm: a warp per (token, head) row.
 * recurrent the decode kernel. A block owns (segment, head, 32 columns of
 *           V); each thread keeps 4 columns (one float4) of K/32 rows of S
 *           in registers across the segment's tokens. Per token k, q and
 *           exp(g) are staged in shared memory; the sums over K are warp
 *           shuffles then 8 partial sums through shared memory.
 * chunked   the prefill kernels, two passes over chunks of KDA_C tokens
 *           (restarting at each segment's first token):
 *           pass 1, every (chunk, head) in parallel: prefix sums G of g,
 *             the matrices A (strict lower, times beta) and Q (lower) with
 *             decays exp(G_i - G_j), and the solutions of (I + A) X = B by
 *             forward substitution for B = beta v (U') and
 *             B = beta e^G k (W); also e^G q (QG), e^(G_last - G) k (KL),
 *             e^G_last (EL). All into scratch, padded with zero rows to a
 *             full chunk. A and Q's blocks below the diagonal (16 x 16)
 *             are products on the tensor cores, the decay factored
 *             through the block's first row; so are the diagonal
 *             blocks, through their middle row, unless a channel decays
 *             by more than KDA_SPAN over half the block: then that block
 *             goes elementwise.
 *           pass 2, per (segment, head, 32 columns of V), chunks in order:
 *               u = U' - W S0           (= the CPU's forward substitution
 *                                        of r = beta (v - S0^T e^G k))
 *               o = QG S0 + Q u
 *               S = EL * S0 + KL^T u
 *             haccel_kda_chunk_state2 (K <= 128) keeps the state tile in
 *             registers, haccel_kda_chunk_state (wider keys) in shared
 *             memory.
 *           The products run on the tensor cores split (each fp32
 *           operand into a tf32 high part and a remainder: hi hi on
 *           .tf32, the two cross terms on one .bf16 instruction; see
 *           kda_split), within 1.2 2^-17 of fp32 products. K = 128
 *           (and V = 128 in pass 1) has its own instances, strides
 *           constant.
 *
 * Every decay is the exponential of a non-positive difference of prefix
 * sums (G_i - G_j, j <= i, G_last - G_j) or of G_i itself, never a ratio.
 */
#include <cuda_pipeline.h>

#include "model/cpu/ops.h"

#define KDA_C 64u      /* chunk length of the chunked form */
#define KDA_MAX_K 256u /* largest K (and V for the chunked form) */
#define KDA_TILE_V 32u /* columns of V per block: recurrent, chunked pass 2 */

__device__ __forceinline__ float4 kda_f4(float x)
{
	return make_float4(x, x, x, x);
}

/* a + s * b, componentwise */
__device__ __forceinline__ float4 kda_fma4(float s, float4 b, float4 a)
{
	return make_float4(fmaf(s, b.x, a.x), fmaf(s, b.y, a.y), fmaf(s, b.z, a.z),
			   fmaf(s, b.w, a.w));
}

__device__ __forceinline__ float4 kda_add4(float4 a, float4 b)
{
	return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

__device__ __forceinline__ float4 kda_sub4(float4 a, float4 b)
{
	return make_float4(a.x - b.x, a.y - b.y, a.z - b.z, a.w - b.w);
}

__device__ __forceinline__ float4 kda_scale4(float s, float4 a)
{
	return make_float4(s * a.x, s * a.y, s * a.z, s * a.w);
}

__device__ __forceinline__ float4 kda_shfl_xor4(float4 a, int o)
{
	a.x += __shfl_xor_sync(0xffffffffu, a.x, o);
	a.y += __shfl_xor_sync(0xffffffffu, a.y, o);
	a.z += __shfl_xor_sync(0xffffffffu, a.z, o);
	a.w += __shfl_xor_sync(0xffffffffu, a.w, o);
	return a;
}

__device__ __forceinline__ float kda_sigmoid(float x)
{
	return 1.0f / (1.0f + expf(-x));
}

/* The segment holding token t: the largest s with seg_off[s] <= t (empty
 * segments share their start with the next one and own no token). The
 * caller has checked seg_off[0] <= t < seg_off[n_seg]. */
__device__ __forceinline__ uint32_t kda_seg_of(const uint32_t *seg_off, uint32_t n_seg,
					       uint32_t t)
{
	uint32_t lo = 0, hi = n_seg;

	while (hi - lo > 1) {
		uint32_t mid = (lo + hi) / 2;

		if (seg_off[mid] <= t)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* ------------------------------------------------------------------------ */
/* Short convolution                                                        */

/* grid (T, ceil(C / 256), convolutions), block 256: one output each.
 * Input rows before the segment's first token come from its tail.
 * Convolution z (q, k, v of a layer in one launch) has its out, in and w
 * z gs_* floats further on, its tails z gs_tail bytes. */
HACCEL_K void haccel_kda_conv(float *out, const float *in, uint32_t C, const float *w,
			      uint32_t W, uint32_t n_seg, const uint32_t *seg_off,
			      const uint32_t *seg_slot, const char *tail_base,
			      uint64_t slot_stride, uint64_t gs_out, uint64_t gs_in,
			      uint64_t gs_w, uint64_t gs_tail)
{
	HAC_PDL();
	uint32_t t = blockIdx.x, c = blockIdx.y * blockDim.x + threadIdx.x;
	uint32_t P = W - 1;

	if (c >= C || t < seg_off[0] || t >= seg_off[n_seg])
		return;
	out += blockIdx.z * gs_out;
	in += blockIdx.z * gs_in;
	w += blockIdx.z * gs_w;
	tail_base += blockIdx.z * gs_tail;
	uint32_t s = kda_seg_of(seg_off, n_seg, t);
	int64_t t0 = seg_off[s];
	const float *tail = (const float *)(tail_base + seg_slot[s] * slot_stride);
	float acc = 0.0f;

	for (uint32_t j = 0; j < W; j++) {
		int64_t x = (int64_t)t - P + j;
		float xv = x < t0 ? tail[(size_t)(P + (x - t0)) * C + c] : in[(size_t)x * C + c];

		acc += w[(size_t)c * W + j] * xv;
	}
	out[(size_t)t * C + c] = acc / (1.0f + expf(-acc));
}

/*
 * Both at once for short segments (decode: a token each): grid (n_seg,
 * ceil(C / 256), convolutions), block 256, a thread one channel of one
 * segment. It keeps the last W - 1 inputs in registers (from the tail),
 * forms the segment's outputs in token order with the same sums as
 * haccel_kda_conv, then writes the new tail: one launch where the pair
 * takes two. (A thread runs its segment's tokens one after another, so
 * long segments take the pair.) The weights and the tail are read before
 * the wait for the kernel before this one (HAC_PDL): they must not be its
 * output (in a decode step it is the projection of the inputs).
 */
HACCEL_K void haccel_kda_conv_seg(float *out, const float *in, uint32_t C, const float *w,
				  uint32_t W, const uint32_t *seg_off, const uint32_t *seg_slot,
				  char *tail_base, uint64_t slot_stride, uint64_t gs_out,
				  uint64_t gs_in, uint64_t gs_w, uint64_t gs_tail)
{
	HAC_PDL_DEFERRED();
	uint32_t s = blockIdx.x, c = blockIdx.y * blockDim.x + threadIdx.x;
	uint32_t t0 = seg_off[s], t1 = seg_off[s + 1];
	int P = (int)W - 1;
	float win[7], wc[8];

	if (c >= C || t1 <= t0) {
		HAC_PDL();
		return;
	}
	out += blockIdx.z * gs_out;
	in += blockIdx.z * gs_in;
	w += blockIdx.z * gs_w;
	tail_base += blockIdx.z * gs_tail;
	float *tail = (float *)(tail_base + seg_slot[s] * slot_stride);
#pragma unroll
	for (int j = 0; j < 8; j++)
		wc[j] = j < (int)W ? w[(size_t)c * W + j] : 0.0f;
#pragma unroll
	for (int r = 0; r < 7; r++)
		win[r] = r < P ? tail[(size_t)r * C + c] : 0.0f;
	HAC_PDL();
	for (uint32_t t = t0; t < t1; t++) {
		float x = in[(size_t)t * C + c], acc = 0.0f;

		/* the window, then x: haccel_kda_conv's order of the sum */
#pragma unroll
		for (int j = 0; j < 8; j++)
			if (j < P)
				acc += wc[j] * win[j];
			else if (j == P)
				acc += wc[j] * x;
		out[(size_t)t * C + c] = acc / (1.0f + expf(-acc));
#pragma unroll
		for (int j = 0; j < 7; j++)
			if (j + 1 < P)
				win[j] = win[j + 1];
			else if (j + 1 == P)
				win[j] = x;
	}
#pragma unroll
	for (int r = 0; r < 7; r++)
		if (r < P)
			tail[(size_t)r * C + c] = win[r];
}

/* grid (n_seg, ceil(C / 256), convolutions), block 256, after
 * haccel_kda_conv: the new tail is the last W - 1 rows of (old tail, the
 * segment's inputs), each thread one channel, read whole before it is
 * written; convolution z as in haccel_kda_conv. */
HACCEL_K void haccel_kda_conv_tail(const float *in, uint32_t C, uint32_t W,
				   const uint32_t *seg_off, const uint32_t *seg_slot,
				   char *tail_base, uint64_t slot_stride, uint64_t gs_in,
				   uint64_t gs_tail)
{
	HAC_PDL();
	uint32_t s = blockIdx.x, c = blockIdx.y * blockDim.x + threadIdx.x;
	uint32_t t0 = seg_off[s], n = seg_off[s + 1] - t0;
	int P = (int)W - 1;
	float nv[7];

	if (c >= C || seg_off[s + 1] <= t0)
		return;
	in += blockIdx.z * gs_in;
	tail_base += blockIdx.z * gs_tail;
	float *tail = (float *)(tail_base + seg_slot[s] * slot_stride);
#pragma unroll
	for (int r = 0; r < 7; r++) {
		int64_t x = (int64_t)n - P + r;

		if (r < P)
			nv[r] = x < 0 ? tail[(size_t)(P + x) * C + c]
				      : in[(size_t)(t0 + x) * C + c];
	}
#pragma unroll
	for (int r = 0; r < 7; r++)
		if (r < P)
			tail[(size_t)r * C + c] = nv[r];
}

/* ------------------------------------------------------------------------ */
/* Gate, prep, gated RMSNorm                                                */

/* The gate of one channel: raw value x + its dt_bias, a = exp(A_log). */
__device__ __forceinline__ float kda_gate1(float x, float a, int form, float lb)
{
	if (form == HACCEL__KDA_GATE_LOWER_BOUND)
		return lb * kda_sigmoid(a * x);
	return -a * (x > 20.0f ? x : log1pf(expf(x)));
}

HACCEL_K void haccel_kda_gate(float *g, const float *g_raw, uint32_t H, uint32_t K,
			      const float *A_log, const float *dt_bias, int form, float lb,
			      uint64_t n)
{
	HAC_PDL();
	uint64_t HK = (uint64_t)H * K;

	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
	     i += (uint64_t)gridDim.x * blockDim.x) {
		uint64_t hk = i % HK;

		g[i] = kda_gate1(g_raw[i] + dt_bias[hk], expf(A_log[hk / K]), form, lb);
	}
}

/* x[0..K) times scale / sqrt(sum x^2 + 1e-6), by one warp (lane l sums
 * elements l, l + 32, ... in order, then a butterfly). */
__device__ __forceinline__ void kda_norm_row(float *x, uint32_t K, float scale)
{
	uint32_t lane = threadIdx.x & 31;
	float ss = 0.0f;

	for (uint32_t c = lane; c < K; c += 32)
		ss += x[c] * x[c];
	float r = 1.0f / sqrtf(warp_sum(ss) + 1e-6f);
	for (uint32_t c = lane; c < K; c += 32)
		x[c] = x[c] * r * scale;
}

/* A warp per (token, head) row, 8 rows a block. */
HACCEL_K void haccel_kda_prep(float *q, float *k, float *beta, uint32_t K, uint64_t rows,
			      float scale)
{
	HAC_PDL();
	uint64_t row = blockIdx.x * 8ull + (threadIdx.x >> 5);
	uint32_t lane = threadIdx.x & 31;

	if (row >= rows)
		return;
	kda_norm_row(q + row * K, K, scale);
	kda_norm_row(k + row * K, K, 1.0f);
	if (lane == 0)
		beta[row] = kda_sigmoid(beta[row]);
}

/* A warp per (token, head) row, 8 rows a block: put(j, value) for each
 * element j of the row of o. */
template <typename F>
__device__ __forceinline__ void kda_gated_rmsnorm_row(const float *o, const float *gate,
						      const float *w, uint32_t V, uint64_t rows,
						      float eps, F put)
{
	uint64_t row = blockIdx.x * 8ull + (threadIdx.x >> 5);
	uint32_t lane = threadIdx.x & 31;

	if (row >= rows)
		return;
	const float *x = o + row * V;
	const float *gr = gate + row * V;
	float ss = 0.0f;

	for (uint32_t j = lane; j < V; j += 32)
		ss += x[j] * x[j];
	float rs = 1.0f / sqrtf(warp_sum(ss) / (float)V + eps);
	for (uint32_t j = lane; j < V; j += 32)
		put(row * V + j, x[j] * rs * w[j] * kda_sigmoid(gr[j]));
}

HACCEL_K void haccel_kda_gated_rmsnorm(float *o, const float *gate, const float *w,
				       uint32_t V, uint64_t rows, float eps)
{
	HAC_PDL();
	kda_gated_rmsnorm_row(o, gate, w, V, rows, eps, [&](uint64_t i, float v) { o[i] = v; });
}

/* The same into y, rounded to bf16 as haccel_to_bf16 rounds (the output
 * projection's input); o is not written. */
HACCEL_K void haccel_kda_gated_rmsnorm_bf16(uint16_t *y, const float *o, const float *gate,
					    const float *w, uint32_t V, uint64_t rows, float eps)
{
	HAC_PDL();
	kda_gated_rmsnorm_row(o, gate, w, V, rows, eps,
			      [&](uint64_t i, float v) { y[i] = hac_bf16_from_float(v); });
}

/* ------------------------------------------------------------------------ */
/* The recurrence (decode)                                                  */

/*
 * grid (n_seg, H, ceil(V / TV)), block 256, TV = 32 or 64 columns of V a
 * block. Thread (warp w, lane l) owns columns c0 = TV blockIdx.z + 4 (l %
 * CG) .. c0 + 3 (CG = TV / 4 column groups) of rows r_i = RW w + l / CG +
 * 8 RW i, i < NR (RW = 32 / CG rows a warp load: 4 or 2; NR = K / (8 RW)
 * rounded up, rows past K are zeros): a warp's load covers RW rows of TV *
 * 4 contiguous bytes. State and v, o go as float4 (16-byte aligned, V % 4
 * == 0: checked by the wrapper). The wide tile (64 columns, the _w
 * kernels; K <= 128) reads each 512-byte row of a 128-column state in two
 * halves rather than four quarters, at 4 blocks an SM against 5: H200,
 * batch 64, 32 or 64 heads, 89-91% of the copy bandwidth against 75-77%
 * (docs/benchmarks.md); with few blocks the narrow tile's larger grid
 * wins.
 */
/*
 * RAW: q, k, gt and beta as the projections left them; each token's gate,
 * q and k norms and sigmoid(beta) are formed here, the bits of
 * haccel_kda_gate and haccel_kda_prep (kr: A_log, dt_bias, form, lb,
 * scale), so a decode step launches neither.
 */
struct kda_raw {
	const float *A_log, *dt_bias;
	int form;
	float lb, scale;
};

template <int NR, int TV, bool RAW>
__device__ __forceinline__ void kda_recurrent(const float *q, const float *k, const float *v,
					      const float *gt, const float *beta, float *o,
					      uint32_t H, uint32_t K, uint32_t V,
					      const uint32_t *seg_off, const uint32_t *seg_slot,
					      char *state_base, uint64_t slot_stride,
					      const kda_raw &kr)
{
	constexpr uint32_t CG = TV / 4, RW = 32 / CG; /* column groups, rows a warp load */
	__shared__ float sk[8 * RW * NR], sq[8 * RW * NR], se[8 * RW * NR];
	__shared__ float4 red[2][8][CG]; /* [k^T S, q^T S][warp][column group] */
	const uint32_t tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, cg = lane % CG;
	const uint32_t rl = warp * RW + lane / CG, h = blockIdx.y;
	const uint32_t col = blockIdx.z * TV + cg * 4;
	const uint32_t t0 = seg_off[blockIdx.x], t1 = seg_off[blockIdx.x + 1];
	const bool act = col < V;
	float4 S[NR];

	if (t1 <= t0) {
		HAC_PDL();
		return;
	}
	float *Sh = (float *)(state_base + seg_slot[blockIdx.x] * slot_stride) +
		    (size_t)h * K * V + col;

	/* The state loads go first, before the wait for the kernel before
	 * this one (HAC_PDL), so they overlap its end and the staging below:
	 * the state, seg_off and seg_slot must not be that kernel's output
	 * (in a decode step it is the convolution). */
#pragma unroll
	for (int i = 0; i < NR; i++) {
		uint32_t r = rl + 8 * RW * i;

		S[i] = act && r < K ? *(const float4 *)(Sh + (size_t)r * V) : kda_f4(0.0f);
	}
	HAC_PDL();

	for (uint32_t t = t0; t < t1; t++) {
		size_t th = (size_t)t * H + h;

		if (tid < K) {
			float gg = gt[th * K + tid];

			if (RAW)
				gg = kda_gate1(gg + kr.dt_bias[(size_t)h * K + tid],
					       expf(kr.A_log[h]), kr.form, kr.lb);
			sk[tid] = k[th * K + tid];
			sq[tid] = q[th * K + tid];
			se[tid] = expf(gg);
		}
		float b = RAW ? kda_sigmoid(beta[th]) : beta[th];
		float4 vv = act ? *(const float4 *)(v + th * V + col) : kda_f4(0.0f);
		__syncthreads();
		if (RAW) {
			/* the norms of k (warp 0) and q (warp 1), in place */
			if (warp < 2)
				kda_norm_row(warp ? sq : sk, K, warp ? kr.scale : 1.0f);
			__syncthreads();
		}

		/* (1) S = diag(exp(g)) S, (2) k^T S */
		float4 p = kda_f4(0.0f);
#pragma unroll
		for (int i = 0; i < NR; i++) {
			uint32_t r = rl + 8 * RW * i;

			if (r < K) {
				S[i] = kda_scale4(se[r], S[i]);
				p = kda_fma4(sk[r], S[i], p);
			}
		}
#pragma unroll
		for (uint32_t sh = CG; sh < 32; sh <<= 1)
			p = kda_shfl_xor4(p, sh);
		if (lane < CG)
			red[0][warp][lane] = p;
		__syncthreads();
		float4 ks = red[0][0][cg];
#pragma unroll
		for (int w = 1; w < 8; w++)
			ks = kda_add4(ks, red[0][w][cg]);
		float4 u = kda_scale4(b, kda_sub4(vv, ks));

		/* (3) S += k u^T, (4) o = q^T S */
		p = kda_f4(0.0f);
#pragma unroll
		for (int i = 0; i < NR; i++) {
			uint32_t r = rl + 8 * RW * i;

			if (r < K) {
				S[i] = kda_fma4(sk[r], u, S[i]);
				p = kda_fma4(sq[r], S[i], p);
			}
		}
#pragma unroll
		for (uint32_t sh = CG; sh < 32; sh <<= 1)
			p = kda_shfl_xor4(p, sh);
		if (lane < CG)
			red[1][warp][lane] = p;
		/* The next token's staging writes sk, sq, se only after this
		 * barrier, when every thread is done with them; red[0] is
		 * rewritten two barriers later, red[1] three. */
		__syncthreads();
		if (warp == 0 && lane < CG && act) {
			float4 os = red[1][0][cg];
#pragma unroll
			for (int w = 1; w < 8; w++)
				os = kda_add4(os, red[1][w][cg]);
			*(float4 *)(o + th * V + col) = os;
		}
	}

#pragma unroll
	for (int i = 0; i < NR; i++) {
		uint32_t r = rl + 8 * RW * i;

		if (act && r < K)
			*(float4 *)(Sh + (size_t)r * V) = S[i];
	}
}

#define KDA_RECURRENT(name, NR, TV, ...)                                                      \
	HACCEL_K void __launch_bounds__(__VA_ARGS__)                                          \
		name(const float *q, const float *k, const float *v, const float *gt,         \
		     const float *beta, float *o, uint32_t H, uint32_t K, uint32_t V,         \
		     const uint32_t *seg_off, const uint32_t *seg_slot, char *state_base,     \
		     uint64_t slot_stride)                                                    \
	{                                                                                     \
		HAC_PDL_DEFERRED();                                                           \
		kda_recurrent<NR, TV, false>(q, k, v, gt, beta, o, H, K, V, seg_off,          \
					     seg_slot, state_base, slot_stride, kda_raw{});   \
	}                                                                                     \
	HACCEL_K void __launch_bounds__(__VA_ARGS__)                                          \
		name##_raw(const float *q, const float *k, const float *v, const float *gt,   \
			   const float *beta, float *o, uint32_t H, uint32_t K, uint32_t V,   \
			   const uint32_t *seg_off, const uint32_t *seg_slot,                 \
			   char *state_base, uint64_t slot_stride, const float *A_log,        \
			   const float *dt_bias, int form, float lb, float scale)             \
	{                                                                                     \
		HAC_PDL_DEFERRED();                                                           \
		kda_recurrent<NR, TV, true>(q, k, v, gt, beta, o, H, K, V, seg_off,           \
					    seg_slot, state_base, slot_stride,                \
					    kda_raw{ A_log, dt_bias, form, lb, scale });      \
	}

/* The wide tile's bounds hold it to 64 registers: 4 blocks an SM. */
KDA_RECURRENT(haccel_kda_recurrent_64, 2, 32, 256)
KDA_RECURRENT(haccel_kda_recurrent_128, 4, 32, 256)
KDA_RECURRENT(haccel_kda_recurrent_256, 8, 32, 256)
KDA_RECURRENT(haccel_kda_recurrent_64w, 4, 64, 256, 4)
KDA_RECURRENT(haccel_kda_recurrent_128w, 8, 64, 256, 4)

/* ------------------------------------------------------------------------ */
/* The chunked form (prefill)                                               */

/*
 * Scratch, per chunk slot p and head h, at scratch + (p * H + h) * per
 * floats: W, QG, KL [KDA_C][K], EL [K], U' [KDA_C][V], Q [KDA_C][KDA_C],
 * rows past the chunk's end zero. A chunk starting at token t0 of segment s
 * has slot p = t0 / KDA_C + s: unique (two chunks of one segment are
 * KDA_C tokens apart, and a later segment has a larger s and t0) and below
 * ceil(T / KDA_C) + n_seg.
 */
__host__ __device__ __forceinline__ size_t kda_chunk_floats(uint32_t K, uint32_t V)
{
	return (size_t)KDA_C * (3 * K + V + KDA_C) + K;
}

#define KDA_OFF_QG(K) ((size_t)KDA_C * (K))
#define KDA_OFF_KL(K) ((size_t)2 * KDA_C * (K))
#define KDA_OFF_EL(K) ((size_t)3 * KDA_C * (K))
#define KDA_OFF_U(K) ((size_t)3 * KDA_C * (K) + (K))
#define KDA_OFF_Q(K, V) (KDA_OFF_U(K) + (size_t)KDA_C * (V))

/*
 * Products on the tensor cores to about fp32 accuracy, in two mma.sync a
 * k-step of 8: each fp32 operand x is split into hi = tf32(x) (cut) and
 * lo = x - hi (exact, |lo| < 2^-10 |x|). big += hi hi on m16n8k8 .tf32;
 * small += x lo' + lo x' on one m16n8k16 .bf16, whose 16 k-slots hold the
 * 8 k's in pairs: A's pair (bf16(x), bf16(lo)), B's (bf16(lo), bf16(x)).
 * The cross terms are 2^-10 of the product, so bf16's 2^-9 on their
 * factors puts them within 2^-18 of it each; lo lo (2^-20) is left out:
 * within 1.2 2^-17 of the product. Two shorter dependency chains, summed
 * at the end; a third fewer tensor-core cycles than 3xTF32 (hi hi, hi
 * lo, lo hi on .tf32).
 *
 * Fragments (PTX ISA, mma m16n8k8 .tf32), lane = 4 g + t: A (16 x 8) a0
 * (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4); B (8 x 8) b0
 * (t, g), b1 (t + 4, g); C (16 x 8) c0, c1 (g, 2t + {0, 1}), c2, c3
 * (g + 8, 2t + {0, 1}). m16n8k16 .bf16 has k-slot pairs (2t, 2t + 1) and
 * (2t + 8, 2t + 9) where .tf32 has k = t and t + 4, in the same registers
 * of A and B: each k's pair sits in the register of its tf32 value.
 */
struct kda_tf32 {
	uint32_t hi, pk; /* tf32 bits; bf16 pair (low half = even slot) */
};

__device__ __forceinline__ uint32_t kda_bf2(float even, float odd)
{
	uint32_t r;

	asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(odd), "f"(even));
	return r;
}

/* hi is x cut to tf32 (its low 13 bits cleared: one instruction, where
 * rounding to nearest takes two and cvt.rna.tf32 five), so |lo| < 2^-10
 * |x|. The A operand's pair is (x, lo), the B operand's (lo, x). */
template <bool B_SIDE = false>
__device__ __forceinline__ kda_tf32 kda_split(float x)
{
	kda_tf32 r;
	float lo;

	r.hi = __float_as_uint(x) & 0xffffe000u;
	lo = x - __uint_as_float(r.hi);
	r.pk = B_SIDE ? kda_bf2(lo, x) : kda_bf2(x, lo);
	return r;
}

__device__ __forceinline__ kda_tf32 kda_split_b(float x)
{
	return kda_split<true>(x);
}

__device__ __forceinline__ void kda_mma(float d[4], uint32_t a0, uint32_t a1, uint32_t a2,
					uint32_t a3, uint32_t b0, uint32_t b1)
{
	asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, "
	    "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
	    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
	    : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* An A fragment: element (r, c) at p[r * rs + c * cs]. */
struct kda_fa {
	kda_tf32 x[4];
};

__device__ __forceinline__ kda_fa kda_load_a(const float *p, uint32_t rs, uint32_t cs)
{
	const uint32_t g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
	kda_fa a;

	a.x[0] = kda_split(p[g * rs + t * cs]);
	a.x[1] = kda_split(p[(g + 8) * rs + t * cs]);
	a.x[2] = kda_split(p[g * rs + (t + 4) * cs]);
	a.x[3] = kda_split(p[(g + 8) * rs + (t + 4) * cs]);
	return a;
}

/* A B fragment of the row-major tile at p (stride ld). */
struct kda_fb {
	kda_tf32 x[2];
};

__device__ __forceinline__ kda_fb kda_load_b(const float *p, uint32_t ld)
{
	const uint32_t g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
	kda_fb b;

	b.x[0] = kda_split_b(p[t * ld + g]);
	b.x[1] = kda_split_b(p[(t + 4) * ld + g]);
	return b;
}

__device__ __forceinline__ void kda_mma3(float big[4], float small[4], const kda_fa &a,
					 const kda_fb &b)
{
	const uint32_t ap[4] = {a.x[0].pk, a.x[1].pk, a.x[2].pk, a.x[3].pk};
	const uint32_t bp[2] = {b.x[0].pk, b.x[1].pk};

	hac_mma_bf16(small, ap, bp);
	kda_mma(big, a.x[0].hi, a.x[1].hi, a.x[2].hi, a.x[3].hi, b.x[0].hi, b.x[1].hi);
}

/* Start copying rows x cols floats (cols % 4 == 0) from global (row
 * stride gs) to shared (stride ss), 16 bytes a copy; columns from lim on
 * and rows from rn on are zeros, stored now. Completes at a later
 * __pipeline_wait_prior. For blocks of NT threads; with constant sizes
 * the loop unrolls and divides by shifts. */
#define KDA_THREADS 256u

template <uint32_t NT = KDA_THREADS>
__device__ __forceinline__ void kda_copy_tile(float *dst, uint32_t ss, const float *src,
					      size_t gs, uint32_t rows, uint32_t cols,
					      uint32_t lim, uint32_t rn, uint32_t me = threadIdx.x)
{
	const uint32_t c4 = cols / 4;

#pragma unroll 8
	for (uint32_t x = me; x < rows * c4; x += NT) {
		const uint32_t r = x / c4, c = 4 * (x % c4);

		if (c < lim && r < rn)
			__pipeline_memcpy_async(dst + r * ss + c, src + r * gs + c, 16);
		else
			*(float4 *)(dst + r * ss + c) = kda_f4(0.0f);
	}
}

/* Pass 1's off-diagonal block pair P = 0..5: (I, J) = (1,0) (2,0) (2,1)
 * (3,0) (3,1) (3,2), as x and y. */
__device__ __forceinline__ uint2 kda_offdiag_block(uint32_t P)
{
	const uint32_t I = P < 1 ? 1 : P < 3 ? 2 : 3;

	return make_uint2(I, P - (I * (I - 1)) / 2);
}

/* Pass 1's unit u = 0..19 of A and Q: the block (I, J) as x and y of
 * *IJ, its 8 columns 8 (u % 2). False for the units of the diagonal
 * blocks that go elementwise (bit I of tens clear) and past 19. */
__device__ __forceinline__ bool kda_unit(uint32_t u, uint32_t tens, uint2 *IJ)
{
	const uint32_t I = (u - 12) >> 1;

	if (u < 12)
		*IJ = kda_offdiag_block(u >> 1);
	else
		*IJ = make_uint2(I, I);
	return u < 12 || (u < 20 && (tens >> I & 1));
}

/* Pass 1 shared memory, in floats, D = max(K, V, KDA_AP): G, kk, qq
 * [KDA_C][LD] and beta [KDA_C], LD = D rounded up to 16, plus 8: 8 times
 * an odd number, so that the 8-byte fragment loads of 16 rows hit 32
 * banks. A^T [KDA_C][KDA_AP] (rows 16-byte aligned) takes G's room once
 * G is dead. */
#define KDA_AP (KDA_C + 4)

/* The largest decay (in e-folds, per channel) over half a diagonal block
 * for which pass 1 factors its decays through the middle row. */
#define KDA_SPAN 60.0f

__host__ __device__ __forceinline__ uint32_t kda_prep_ld(uint32_t K, uint32_t V)
{
	uint32_t D = K > V ? K : V;

	D = D > KDA_AP ? D : KDA_AP;
	return (D + 15) / 16 * 16 + 8;
}

__host__ __device__ __forceinline__ size_t kda_prep_smem(uint32_t K, uint32_t V)
{
	return (size_t)KDA_C * (3 * kda_prep_ld(K, V) + 1);
}

extern __shared__ __align__(128) float4 kda_smem[];

/*
 * Pass 1's forward substitution, the terms of rows 16 I .. 16 I + 15 from
 * the rows above them (solved): X_I = s X_I - A_(I, <I) X_(<I), for W's K
 * columns (kk) with s = 1 and U's V columns (qq) with s = beta_i (their
 * right-hand side's scale), products split on the tensor cores. A comes
 * transposed (At[j][i] = A_ij); warp w takes the 8-column tiles 4 w ..
 * 4 w + 3 of [W | U'] (W's tiles first, each side's last one cut at K or
 * V), then 32 further on.
 */
__device__ __forceinline__ void kda_fs_above(uint32_t I, float *kk, float *qq, const float *At,
					     const float *bet, uint32_t K, uint32_t V,
					     uint32_t LD)
{
	const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	const uint32_t g = lane >> 2, t = lane & 3;
	const uint32_t ntk = (K + 7) / 8, nt = ntk + (V + 7) / 8;

	for (uint32_t q0 = 4 * warp; q0 < nt; q0 += 4 * (KDA_THREADS / 32)) {
		float big[4][4] = {}, small[4][4] = {};
		float *X[4];

#pragma unroll
		for (int c = 0; c < 4; c++) {
			const uint32_t q = q0 + c;

			X[c] = q < ntk ? kk + 8 * q : qq + 8 * (q - ntk);
		}
#pragma unroll
		for (uint32_t k0 = 0; k0 < 16 * I; k0 += 8) {
			const kda_fa a = kda_load_a(At + k0 * KDA_AP + 16 * I, 1, KDA_AP);

#pragma unroll
			for (int c = 0; c < 4; c++)
				if (q0 + c < nt)
					kda_mma3(big[c], small[c], a, kda_load_b(X[c] + k0 * LD, LD));
		}
#pragma unroll
		for (int c = 0; c < 4; c++) {
			const uint32_t q = q0 + c, u = q >= ntk;
			const uint32_t c0 = 8 * (u ? q - ntk : q) + 2 * t, lim = u ? V : K;

			if (q >= nt)
				break;
#pragma unroll
			for (int e = 0; e < 4; e++) {
				const uint32_t i = 16 * I + g + 8 * (e >> 1), cc = 2 * t + (e & 1);
				float *x = X[c] + i * LD + cc;

				if (c0 + (e & 1) < lim)
					*x = (u ? bet[i] * *x : *x) - (big[c][e] + small[c][e]);
			}
		}
	}
}

/* e^x for x <= 0 as ex2(x log2 e): within 2 ulp plus 1.2 |x| ulp, so
 * 1e-6 relative where the factor is above e^-8 and far below any sum's
 * scale where it is not; results under 2^-126 flush to 0. A quarter of
 * expf's instructions in the pass 1 loop, which the exponentials bound. */
__device__ __forceinline__ float kda_exp(float x)
{
	return __expf(x);
}

/*
 * Pass 1: grid (ceil(T / KDA_C) + n_seg, H), block 256; slot blockIdx.x,
 * head blockIdx.y. The slot's segment is the last s with
 * seg_off[s] / KDA_C + s <= p (that start is strictly increasing in s), its
 * chunk index p minus that start; slots past the segment's chunks exit.
 * Needs K % 4 == 0, V % 4 == 0 and 16-byte aligned q, k, v, g.
 */
template <uint32_t KT, uint32_t VT>
__device__ __forceinline__ void kda_chunk_prep(const float *q, const float *k, const float *v,
					       const float *gt, const float *beta, uint32_t H,
					       uint32_t Kr, uint32_t Vr, uint32_t n_seg,
					       const uint32_t *seg_off, float *scratch)
{
	const uint32_t K = KT ? KT : Kr, V = VT ? VT : Vr;
	const uint32_t tid = threadIdx.x, p = blockIdx.x, h = blockIdx.y;
	const uint32_t LD = kda_prep_ld(K, V);
	uint32_t lo = 0, hi = n_seg;

	while (hi - lo > 1) {
		uint32_t mid = (lo + hi) / 2;

		if (seg_off[mid] / KDA_C + mid <= p)
			lo = mid;
		else
			hi = mid;
	}
	if (seg_off[lo] / KDA_C + lo > p)
		return;
	uint32_t m = p - (seg_off[lo] / KDA_C + lo);
	if (m >= (seg_off[lo + 1] - seg_off[lo] + KDA_C - 1) / KDA_C)
		return;
	const uint32_t t0 = seg_off[lo] + m * KDA_C;
	const uint32_t n = min(KDA_C, seg_off[lo + 1] - t0);

	float *G = (float *)kda_smem, *kk = G + KDA_C * LD, *qq = kk + KDA_C * LD;
	float *bet = qq + KDA_C * LD, *At = G;
	float *out = scratch + ((size_t)p * H + h) * kda_chunk_floats(K, V);
	__shared__ uint32_t span[KDA_C / 16]; /* fp32 bits, >= 0 */

	/* Rows past n are zeros: they add nothing and G stays at G_{n-1}. */
	const size_t src = ((size_t)t0 * H + h) * K;

	kda_copy_tile(G, LD, gt + src, (size_t)H * K, KDA_C, K, K, n);
	kda_copy_tile(kk, LD, k + src, (size_t)H * K, KDA_C, K, K, n);
	kda_copy_tile(qq, LD, q + src, (size_t)H * K, KDA_C, K, K, n);
	__pipeline_commit();
	if (tid < KDA_C)
		bet[tid] = tid < n ? beta[((size_t)t0 + tid) * H + h] : 0.0f;
	if (tid < KDA_C / 16)
		span[tid] = 0;
	__pipeline_wait_prior(0);
	__syncthreads();
	for (uint32_t c = tid; c < K; c += blockDim.x) {
		for (uint32_t i = 1; i < KDA_C; i++)
			G[i * LD + c] += G[(i - 1) * LD + c];
#pragma unroll
		for (uint32_t I = 0; I < KDA_C / 16; I++) {
			const float *Gc = G + 16 * I * LD + c;
			const float d = fmaxf(Gc[0] - Gc[8 * LD], Gc[8 * LD] - Gc[15 * LD]);

			atomicMax(&span[I], __float_as_uint(fmaxf(d, 0.0f)));
		}
	}
	__syncthreads();

	/*
	 * A and Q by blocks of 16 rows and columns. For blocks I > J the
	 * decay factors through the block's first row r = 16 I:
	 * e^(G_i - G_j) = e^(G_i - G_r) e^(G_r - G_j), both exponents <= 0,
	 * so A_IJ = (k e^(G - G_r))_I (k e^(G_r - G))_J^T, and Q_IJ the same
	 * with q on the left: products on the tensor cores (split), the
	 * factors formed as the fragments are loaded. Unit u = 0..11 takes
	 * block pair u / 2 (kda_offdiag_block) and its 8 columns 8 (u % 2).
	 * A diagonal block I factors through its middle row r = 16 I + 8 when
	 * no channel decays by more than KDA_SPAN from row 16 I to r or from r
	 * to 16 I + 15 (span[I]): then every factor lies in e^(+-KDA_SPAN),
	 * far from overflow and with its low part a normal float, and units
	 * 12..19 take its two column halves the same way (the entries above
	 * the diagonal, which may overflow, are not kept). Warp u % 8 takes
	 * unit u. A block that decays harder goes elementwise: thread 2 p + hc
	 * (p < 120) takes pair p of its strictly lower 16 x 16 triangle, the
	 * columns 8 x + 4 hc .. + 3 of the sum over K (the halves meet
	 * through one shuffle; interleaved, their loads hit other banks);
	 * threads 240-255 its Q diagonal, sums of q k (e^0 = 1). A stays in
	 * registers until G is dead; Q goes out as it is made, zeros above
	 * the diagonal and past row n.
	 */
	float *Qo = out + KDA_OFF_Q(K, V);

	for (uint32_t x = tid; x < KDA_C * KDA_C; x += blockDim.x)
		if (x % KDA_C > x / KDA_C)
			Qo[x] = 0.0f;
	const uint32_t lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
	uint32_t tens = 0; /* bit I: diagonal block I on the tensor cores */
	float offA[3][4];

#pragma unroll
	for (uint32_t I = 0; I < KDA_C / 16; I++)
		tens |= (__uint_as_float(span[I]) <= KDA_SPAN) << I;
#pragma unroll
	for (int w = 0; w < 3; w++) {
		const uint32_t u = warp + 8 * w;
		const bool diag = u >= 12;
		uint2 IJ;

		if (!kda_unit(u, tens, &IJ))
			continue;
		const uint32_t I = IJ.x, J = IJ.y;
		const uint32_t i0 = 16 * I + g, j0 = 16 * J + 8 * (u & 1) + g;
		const float *Gr = G + (16 * I + (diag ? 8 : 0)) * LD + 2 * t;
		float aA[4] = {}, sA[4] = {}, aQ[4] = {}, sQ[4] = {};

#pragma unroll 4
		for (uint32_t cc = 0; cc < K; cc += 8) {
			const float2 gr = *(const float2 *)(Gr + cc);
			kda_fa fk, fq;
			kda_fb fb;

#pragma unroll
			for (int h = 0; h < 2; h++) {
				const uint32_t o = (i0 + 8 * h) * LD + cc + 2 * t;
				const float2 gi = *(const float2 *)(G + o);
				const float2 ki = *(const float2 *)(kk + o);
				const float2 qi = *(const float2 *)(qq + o);
				const float e0 = kda_exp(gi.x - gr.x), e1 = kda_exp(gi.y - gr.y);

				fk.x[h] = kda_split(ki.x * e0), fk.x[h + 2] = kda_split(ki.y * e1);
				fq.x[h] = kda_split(qi.x * e0), fq.x[h + 2] = kda_split(qi.y * e1);
			}
			{
				const uint32_t o = j0 * LD + cc + 2 * t;
				const float2 gj = *(const float2 *)(G + o);
				const float2 kj = *(const float2 *)(kk + o);

				fb.x[0] = kda_split_b(kj.x * kda_exp(gr.x - gj.x));
				fb.x[1] = kda_split_b(kj.y * kda_exp(gr.y - gj.y));
			}
			kda_mma3(aA, sA, fk, fb);
			kda_mma3(aQ, sQ, fq, fb);
		}
#pragma unroll
		for (int e = 0; e < 4; e++) {
			const uint32_t i = i0 + 8 * (e >> 1), j = j0 - g + 2 * t + (e & 1);

			offA[w][e] = aA[e] + sA[e];
			if (j <= i)
				Qo[i * KDA_C + j] = i < n ? aQ[e] + sQ[e] : 0.0f;
		}
	}

	/* The diagonal blocks */
	float diagA[4] = {}, diagQ[4] = {};
	uint32_t da = 0, db = 0;

	if (tid < 240) {
		const uint32_t p = tid >> 1, hc = tid & 1;

		da = (uint32_t)((1.0f + sqrtf(8.0f * p + 1.0f)) * 0.5f);
		while (da * (da - 1) / 2 > p)
			da--;
		while ((da + 1) * da / 2 <= p)
			da++;
		db = p - da * (da - 1) / 2;
#pragma unroll
		for (int I = 0; I < 4; I++) {
			const uint32_t oi = (16 * I + da) * LD, oj = (16 * I + db) * LD;
			float a = 0.0f, q = 0.0f;

			if (tens >> I & 1)
				continue;

			for (uint32_t c = 4 * hc; c < K; c += 8) {
				const float4 gi = *(const float4 *)(G + oi + c);
				const float4 gj = *(const float4 *)(G + oj + c);
				const float4 ki = *(const float4 *)(kk + oi + c);
				const float4 kj = *(const float4 *)(kk + oj + c);
				const float4 qi = *(const float4 *)(qq + oi + c);
				float x;

				x = kj.x * kda_exp(gi.x - gj.x), a += ki.x * x, q += qi.x * x;
				x = kj.y * kda_exp(gi.y - gj.y), a += ki.y * x, q += qi.y * x;
				x = kj.z * kda_exp(gi.z - gj.z), a += ki.z * x, q += qi.z * x;
				x = kj.w * kda_exp(gi.w - gj.w), a += ki.w * x, q += qi.w * x;
			}
			diagA[I] = a, diagQ[I] = q;
		}
	} else {
#pragma unroll
		for (int I = 0; I < 4; I++) {
			const uint32_t i = 16 * I + tid - 240, o = i * LD;
			float q = 0.0f;

			if (tens >> I & 1)
				continue;

			for (uint32_t c = 0; c < K; c += 4) {
				const float4 ki = *(const float4 *)(kk + o + c);
				const float4 qi = *(const float4 *)(qq + o + c);

				q += qi.x * ki.x + qi.y * ki.y + qi.z * ki.z + qi.w * ki.w;
			}
			Qo[i * KDA_C + i] = i < n ? q : 0.0f;
		}
	}
	/* The halves of the sums meet, every lane of the warp taking part
	 * (threads 240-255 add values they do not use). */
#pragma unroll
	for (int I = 0; I < 4; I++) {
		if (tens >> I & 1)
			continue;
		diagA[I] += __shfl_xor_sync(0xffffffffu, diagA[I], 1);
		diagQ[I] += __shfl_xor_sync(0xffffffffu, diagQ[I], 1);
		if (tid < 240 && !(tid & 1))
			Qo[(16 * I + da) * KDA_C + 16 * I + db] = 16 * I + da < n ? diagQ[I] : 0.0f;
	}
	/* Every thread is done with G, kk and qq before they are rewritten. */
	__syncthreads();

	/* QG, KL, EL out; kk becomes the right-hand side beta e^G k of W. */
	const float *Gl = G + (n - 1) * LD;
#pragma unroll 4
	for (uint32_t x = 4 * tid; x < KDA_C * K; x += 4 * KDA_THREADS) {
		const uint32_t i = x / K, c = x % K;
		const float4 gi = *(const float4 *)(G + i * LD + c), gl = *(const float4 *)(Gl + c);
		const float4 kv = *(const float4 *)(kk + i * LD + c);
		const float4 qv = *(const float4 *)(qq + i * LD + c);
		const float4 e = make_float4(kda_exp(gi.x), kda_exp(gi.y), kda_exp(gi.z),
					     kda_exp(gi.w));
		const float b = bet[i];
		float4 qg = kda_f4(0.0f), kl = qg, w = qg;

		if (i < n) {
			qg = make_float4(e.x * qv.x, e.y * qv.y, e.z * qv.z, e.w * qv.w);
			kl = make_float4(kda_exp(gl.x - gi.x) * kv.x, kda_exp(gl.y - gi.y) * kv.y,
					 kda_exp(gl.z - gi.z) * kv.z, kda_exp(gl.w - gi.w) * kv.w);
			w = make_float4(b * (e.x * kv.x), b * (e.y * kv.y), b * (e.z * kv.z),
					b * (e.w * kv.w));
		}
		*(float4 *)(out + KDA_OFF_QG(K) + x) = qg;
		*(float4 *)(out + KDA_OFF_KL(K) + x) = kl;
		*(float4 *)(kk + i * LD + c) = w;
	}
	for (uint32_t c = tid; c < K; c += blockDim.x)
		out[KDA_OFF_EL(K) + c] = kda_exp(Gl[c]);
	__syncthreads();

	/* qq is free: v comes in (U's right-hand side, beta v, once scaled)
	 * while G, dead too, takes A (times beta_i, strictly lower),
	 * transposed: At[j][i] = A_ij. */
	kda_copy_tile(qq, LD, v + ((size_t)t0 * H + h) * V, (size_t)H * V, KDA_C, V, V, n);
	__pipeline_commit();
#pragma unroll
	for (int w = 0; w < 3; w++) {
		const uint32_t u = warp + 8 * w;
		uint2 IJ;

		if (!kda_unit(u, tens, &IJ))
			continue;
		const uint32_t I = IJ.x, J = IJ.y;

#pragma unroll
		for (int e = 0; e < 4; e++) {
			const uint32_t i = 16 * I + g + 8 * (e >> 1);
			const uint32_t j = 16 * J + 8 * (u & 1) + 2 * t + (e & 1);

			if (j < i)
				At[j * KDA_AP + i] = bet[i] * offA[w][e];
		}
	}
	if (tid < 240 && !(tid & 1))
#pragma unroll
		for (int I = 0; I < 4; I++)
			if (!(tens >> I & 1))
				At[(16 * I + db) * KDA_AP + 16 * I + da] =
					bet[16 * I + da] * diagA[I];
	__pipeline_wait_prior(0);
	__syncthreads();

	/*
	 * Forward substitution of [W | U']: x_i = b_i - sum_{j<i} A_ij x_j.
	 * By blocks of 16 rows: the terms of the rows above the block on the
	 * tensor cores (kda_fs_above, the warps by column tiles), then those
	 * inside it a column per thread, in registers (j ascending, as the
	 * CPU op). Rows past n have b = 0 and A = 0 (beta = 0): they stay
	 * zero. U's right-hand side beta v is scaled here (v came in as it is).
	 */
#pragma unroll
	for (int I = 0; I < (int)KDA_C / 16; I++) {
		if (I) {
			__syncthreads();
			kda_fs_above(I, kk, qq, At, bet, K, V, LD);
			__syncthreads();
		}
		for (uint32_t col = tid; col < K + V; col += blockDim.x) {
			float *X = col < K ? kk + col : qq + (col - K);
			float acc[16];

#pragma unroll
			for (int r = 0; r < 16; r++)
				acc[r] = X[(16 * I + r) * LD] *
					 (I == 0 && col >= K ? bet[r] : 1.0f);
#pragma unroll
			for (int r = 1; r < 16; r++)
#pragma unroll
				for (int q = 0; q < r; q++)
					acc[r] -= At[(16 * I + q) * KDA_AP + 16 * I + r] * acc[q];
#pragma unroll
			for (int r = 0; r < 16; r++)
				X[(16 * I + r) * LD] = acc[r];
		}
	}
	__syncthreads();
	for (uint32_t x = tid * 4; x < KDA_C * K; x += blockDim.x * 4) {
		const float *r = kk + (x / K) * LD + x % K;

		*(float4 *)(out + x) = *(const float4 *)r;
	}
	for (uint32_t x = tid * 4; x < KDA_C * V; x += blockDim.x * 4) {
		const float *r = qq + (x / V) * LD + x % V;

		*(float4 *)(out + KDA_OFF_U(K) + x) = *(const float4 *)r;
	}
}

/* Entry points: any K and V, and K = V = 128 with constant strides. */
#define KDA_CHUNK_PREP(name, KT, VT)                                                        \
	HACCEL_K void __launch_bounds__(256, 2)                                              \
		name(const float *q, const float *k, const float *v, const float *gt,        \
		     const float *beta, uint32_t H, uint32_t K, uint32_t V, uint32_t n_seg,  \
		     const uint32_t *seg_off, float *scratch)                                \
	{                                                                                    \
		HAC_PDL();                                                                   \
		kda_chunk_prep<KT, VT>(q, k, v, gt, beta, H, K, V, n_seg, seg_off, scratch); \
	}

KDA_CHUNK_PREP(haccel_kda_chunk_prep, 0, 0)
KDA_CHUNK_PREP(haccel_kda_chunk_prep_128, 128, 128)

/*
 * Pass 2 for K > 128 (haccel_kda_chunk_state2 below takes K <= 128),
 * shared memory in floats: S [K][KDA_SB]; W [KDA_C][K + 4]; QG, then KL,
 * [KDA_C][K + 8] (one slot in turn); U0, U1 [KDA_C][KDA_SB] (U' then u,
 * by chunk parity); Q [KDA_C][KDA_QP]; EL0, EL1 [K]. Row strides keep
 * the fragment loads on 32 banks: 4 times an odd number of floats for
 * tiles read by rows (W, QG, Q), 8 times an odd number for tiles read by
 * columns (S, U, KL). Every tile starts 16-byte aligned.
 */
#define KDA_SB 40u
#define KDA_QP (KDA_C + 4)

__host__ __device__ __forceinline__ size_t kda_state_smem(uint32_t K)
{
	return (size_t)K * KDA_SB + (size_t)KDA_C * (K + 4) + (size_t)KDA_C * (K + 8) +
	       2 * (size_t)KDA_C * KDA_SB + (size_t)KDA_C * KDA_QP + 2 * (size_t)K;
}

/*
 * Pass 2: grid (n_seg, H, ceil(V / 32)), block 256 (8 warps), after pass
 * 1. The block's state tile S [K][32] stays on chip across the segment's
 * chunks: in registers as C fragments (warp w holds row tiles w, w + 8 of
 * the K / 16) and copied to shared memory once a chunk for the products
 * that read it whole. Per chunk:
 *   U = U' - W S        (a)   a warp: column tile 8 (w % 4), row tiles
 *   o = QG S + Q U      (c)   {0, 3} or {1, 2} (w / 4) of the 4
 *   S = EL * S + KL^T U (d)   a warp: its row tiles, all 4 column tiles
 * (a) and QG S share each fragment of S; the row tiles pair so that both
 * halves do the same share of the triangle of Q. Needs K % 16 == 0.
 *
 * The scratch arrives by asynchronous copies, each overlapping products:
 * the next chunk's W, Q, U', EL during (d) (their slots are free once (c)
 * is done); KL into QG's slot after (a), during (c); the next QG after
 * (d). Copy groups, oldest first, each waited for just before its use.
 */
__device__ __forceinline__ void kda_chunk_state(float *o, uint32_t H, uint32_t K, uint32_t V,
						const uint32_t *seg_off, const uint32_t *seg_slot,
						char *state_base, uint64_t slot_stride,
						const float *scratch)
{
	const uint32_t tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const uint32_t g = lane >> 2, t = lane & 3;
	const uint32_t s = blockIdx.x, h = blockIdx.y, c0 = blockIdx.z * KDA_TILE_V;
	const uint32_t WP = K + 4, LP = K + 8, vl = min(KDA_TILE_V, V - c0); /* vl % 4 == 0 */
	const uint32_t t_beg = seg_off[s], t_end = seg_off[s + 1];
	const uint32_t nt = warp & 3, mt[2] = {warp >> 2, 3 - (warp >> 2)};
	const size_t per = kda_chunk_floats(K, V);

	if (t_end <= t_beg)
		return;
	/* Buffer pairs as base + parity * size: arrays of pointers would
	 * live in local memory. */
	float *S = (float *)kda_smem, *XW = S + K * KDA_SB, *XQ = XW + KDA_C * WP;
	float *U0 = XQ + KDA_C * LP;
	float *Qs = U0 + 2 * KDA_C * KDA_SB, *EL0 = Qs + KDA_C * KDA_QP;
	float *Sg = (float *)(state_base + seg_slot[s] * slot_stride) + (size_t)h * K * V + c0;
	const float *in = scratch + ((size_t)(t_beg / KDA_C + s) * H + h) * per;
	float sr[2][4][4];

	/* Prologue: S and chunk 0's W, QG, U', EL, Q. */
	kda_copy_tile(S, KDA_SB, Sg, V, K, KDA_TILE_V, vl, K);
	kda_copy_tile(XW, WP, in, K, KDA_C, K, K, KDA_C);
	kda_copy_tile(XQ, WP, in + KDA_OFF_QG(K), K, KDA_C, K, K, KDA_C);
	kda_copy_tile(U0, KDA_SB, in + KDA_OFF_U(K) + c0, V, KDA_C, KDA_TILE_V, vl, KDA_C);
	kda_copy_tile(EL0, K, in + KDA_OFF_EL(K), K, 1, K, K, 1);
	kda_copy_tile(Qs, KDA_QP, in + KDA_OFF_Q(K, V), KDA_C, KDA_C, KDA_C, KDA_C, KDA_C);
	__pipeline_commit();

	for (uint32_t t0 = t_beg, ci = 0; t0 < t_end; t0 += KDA_C, ci++) {
		const uint32_t n = min(KDA_C, t_end - t0), b = ci & 1;
		const bool more = t0 + KDA_C < t_end;
		const float *nx = in + (size_t)H * per; /* the next chunk's slot */
		float *U = U0 + b * KDA_C * KDA_SB, *Un = U0 + (b ^ 1) * KDA_C * KDA_SB;
		float *EL = EL0 + b * K, *ELn = EL0 + (b ^ 1) * K;
		float aw[2][4] = {}, aws[2][4] = {}, aq[2][4] = {}, aqs[2][4] = {};

		/* W, QG, U', EL, Q (and S) are in. */
		__pipeline_wait_prior(0);
		__syncthreads();
		if (ci == 0)
#pragma unroll
			for (int j = 0; j < 2; j++)
#pragma unroll
				for (int c = 0; c < 4; c++) {
					const float *p = S + (16 * (warp + 8 * j) + g) * KDA_SB +
							 8 * c + 2 * t;
					bool in_k = warp + 8 * j < K / 16;
					float2 lo = in_k ? *(const float2 *)p : make_float2(0, 0);
					float2 hi = in_k ? *(const float2 *)(p + 8 * KDA_SB)
							 : make_float2(0, 0);

					sr[j][c][0] = lo.x, sr[j][c][1] = lo.y;
					sr[j][c][2] = hi.x, sr[j][c][3] = hi.y;
				}

		/* (a) and QG S, one fragment of S for both. */
#pragma unroll 4
		for (uint32_t kk = 0; kk < K; kk += 8) {
			kda_fb bs = kda_load_b(S + kk * KDA_SB + 8 * nt, KDA_SB);

#pragma unroll
			for (int i = 0; i < 2; i++) {
				kda_fa a = kda_load_a(XW + 16 * mt[i] * WP + kk, WP, 1);

				kda_mma3(aw[i], aws[i], a, bs);
				a = kda_load_a(XQ + 16 * mt[i] * WP + kk, WP, 1);
				kda_mma3(aq[i], aqs[i], a, bs);
			}
		}
		/* U = U' - W S in place: a warp rewrites only the elements it
		 * read. */
#pragma unroll
		for (int i = 0; i < 2; i++) {
			float2 *p = (float2 *)(U + (16 * mt[i] + g) * KDA_SB + 8 * nt + 2 * t);
			float2 x = p[0], y = p[4 * KDA_SB];

			p[0] = make_float2(x.x - (aw[i][0] + aws[i][0]),
					   x.y - (aw[i][1] + aws[i][1]));
			p[4 * KDA_SB] =
				make_float2(y.x - (aw[i][2] + aws[i][2]),
					    y.y - (aw[i][3] + aws[i][3]));
		}
		__syncthreads();

		/* QG is done with: KL takes its room. */
		kda_copy_tile(XQ, LP, in + KDA_OFF_KL(K), K, KDA_C, K, K, KDA_C);
		__pipeline_commit();

		/* (c) o = QG S + Q U. Q is lower triangular: row tile m needs
		 * the rows of U below 16 (m + 1). */
#pragma unroll
		for (int i = 0; i < 2; i++) {
			const uint32_t m = mt[i], r = t0 + 16 * m + g, col = 8 * nt + 2 * t;

#pragma unroll 4
			for (uint32_t kk = 0; kk < 16 * (m + 1); kk += 8) {
				kda_fa a = kda_load_a(Qs + 16 * m * KDA_QP + kk, KDA_QP, 1);
				kda_fb bu = kda_load_b(U + kk * KDA_SB + 8 * nt, KDA_SB);

				kda_mma3(aq[i], aqs[i], a, bu);
			}
			if (col < vl) {
				float *op = o + ((size_t)r * H + h) * V + c0 + col;

				if (r < t0 + n)
					*(float2 *)op = make_float2(aq[i][0] + aqs[i][0],
								    aq[i][1] + aqs[i][1]);
				if (r + 8 < t0 + n)
					*(float2 *)(op + (size_t)8 * H * V) = make_float2(
						aq[i][2] + aqs[i][2], aq[i][3] + aqs[i][3]);
			}
		}
		/* KL is in; W, Q and U' are done with. */
		__pipeline_wait_prior(0);
		__syncthreads();
		if (more) {
			kda_copy_tile(XW, WP, nx, K, KDA_C, K, K, KDA_C);
			kda_copy_tile(Qs, KDA_QP, nx + KDA_OFF_Q(K, V), KDA_C, KDA_C, KDA_C, KDA_C,
				      KDA_C);
			kda_copy_tile(Un, KDA_SB, nx + KDA_OFF_U(K) + c0, V, KDA_C, KDA_TILE_V,
				      vl, KDA_C);
			kda_copy_tile(ELn, K, nx + KDA_OFF_EL(K), K, 1, K, K, 1);
		}
		__pipeline_commit();

		/* (d) S = EL * S + KL^T U on the warp's row tiles; KL^T is KL
		 * read by columns. Then S to shared memory for the next (a). */
#pragma unroll
		for (int j = 0; j < 2; j++) {
			const uint32_t rt = warp + 8 * j;

			if (rt >= K / 16)
				break;
			const float e0 = EL[16 * rt + g], e1 = EL[16 * rt + g + 8];
			float ss[4][4] = {};

#pragma unroll
			for (int c = 0; c < 4; c++)
				sr[j][c][0] *= e0, sr[j][c][1] *= e0, sr[j][c][2] *= e1,
					sr[j][c][3] *= e1;
#pragma unroll 4
			for (uint32_t kk = 0; kk < KDA_C; kk += 8) {
				kda_fa a = kda_load_a(XQ + kk * LP + 16 * rt, 1, LP);

#pragma unroll
				for (int c = 0; c < 4; c++)
					kda_mma3(sr[j][c], ss[c], a,
						 kda_load_b(U + kk * KDA_SB + 8 * c, KDA_SB));
			}
#pragma unroll
			for (int c = 0; c < 4; c++) {
				float *p = S + (16 * rt + g) * KDA_SB + 8 * c + 2 * t;

#pragma unroll
				for (int e = 0; e < 4; e++)
					sr[j][c][e] += ss[c][e];
				*(float2 *)p = make_float2(sr[j][c][0], sr[j][c][1]);
				*(float2 *)(p + 8 * KDA_SB) = make_float2(sr[j][c][2], sr[j][c][3]);
			}
		}
		__syncthreads();

		/* KL is done with: the next chunk's QG takes its slot. */
		if (more)
			kda_copy_tile(XQ, WP, nx + KDA_OFF_QG(K), K, KDA_C, K, K, KDA_C);
		__pipeline_commit();
		in = nx;
	}
	for (uint32_t x = tid; x < K * (vl / 4); x += blockDim.x) {
		uint32_t r = x / (vl / 4), c = (x % (vl / 4)) * 4;

		*(float4 *)(Sg + (size_t)r * V + c) = *(const float4 *)(S + r * KDA_SB + c);
	}
}

/*
 * Pass 2 for K <= 128, in shared memory (floats): S2 [K / 2][KDA_PQ][4];
 * W, QG [KDA_C][K + 8]; KL [KDA_C][K + 4]; U' and QG S [KDA_C][KDA_U1]
 * (fp32); U2 [KDA_C / 2][KDA_PQ][4]; Q [KDA_C][KDA_Q2]; EL0, EL1 [K].
 * S2 and U2 hold the operands every warp reads whole already split, as
 * B fragments: rows 2p and 2p + 1 of column c at (p KDA_PQ + c) * 4, as
 * hi (2p), hi (2p + 1), then the bf16 pairs (kda_split_b) of 2p and
 * 2p + 1.
 *
 * The fragments take k in the order 2t, 2t + 1 where the instruction's
 * is t, t + 4 (the same on both sides of the product, so the sum is
 * unchanged): an A row fragment is two 8-byte loads, a B fragment one
 * 16-byte load straight into the registers the instruction reads. The
 * strides keep those loads on 32 banks: 8 times an odd number of floats
 * for rows read 8 bytes at a time (W, QG, Q), K + 4 for KL read by
 * columns, KDA_PQ = 34 for the 16-byte loads.
 */
#define KDA_PQ 34u
#define KDA_U1 40u
#define KDA_Q2 (KDA_C + 8)

__host__ __device__ __forceinline__ size_t kda_state2_smem(uint32_t K)
{
	return (size_t)K * 2 * KDA_PQ + 2 * (size_t)KDA_C * (K + 8) + (size_t)KDA_C * (K + 4) +
	       2 * (size_t)KDA_C * KDA_U1 + (size_t)KDA_C * 2 * KDA_PQ +
	       (size_t)KDA_C * KDA_Q2 + 2 * (size_t)K;
}

/* A fragment, rows r of p (stride ld), k pairs 2t, 2t + 1 in one load */
__device__ __forceinline__ kda_fa kda_load_a2(const float *p, uint32_t ld)
{
	const uint32_t g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
	const float2 x = *(const float2 *)(p + g * ld + 2 * t);
	const float2 y = *(const float2 *)(p + (g + 8) * ld + 2 * t);
	kda_fa a;

	a.x[0] = kda_split(x.x), a.x[2] = kda_split(x.y);
	a.x[1] = kda_split(y.x), a.x[3] = kda_split(y.y);
	return a;
}

/* A fragment of the transpose of p: element (r, k) at p[k * ld + r] */
__device__ __forceinline__ kda_fa kda_load_at2(const float *p, uint32_t ld)
{
	const uint32_t g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
	kda_fa a;

	a.x[0] = kda_split(p[2 * t * ld + g]);
	a.x[1] = kda_split(p[2 * t * ld + g + 8]);
	a.x[2] = kda_split(p[(2 * t + 1) * ld + g]);
	a.x[3] = kda_split(p[(2 * t + 1) * ld + g + 8]);
	return a;
}

/* B fragment of a split tile: p at pair row kk / 2, column 8 c */
__device__ __forceinline__ kda_fb kda_load_b2(const float *p)
{
	const uint32_t g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
	const float4 x = *(const float4 *)(p + (t * KDA_PQ + g) * 4);
	kda_fb b;

	b.x[0].hi = __float_as_uint(x.x), b.x[1].hi = __float_as_uint(x.y);
	b.x[0].pk = __float_as_uint(x.z), b.x[1].pk = __float_as_uint(x.w);
	return b;
}

/* big, small [c] += a times column tile c (0..3) of the split tile whose
 * pair row kk / 2 starts at b */
__device__ __forceinline__ void kda_mma3_row4(float big[4][4], float small[4][4],
					      const kda_fa &a, const float *b)
{
#pragma unroll
	for (int c = 0; c < 4; c++)
		kda_mma3(big[c], small[c], a, kda_load_b2(b + 8 * c * 4));
}

/* One row of C fragments (v0, v1 at row r = .. + g, columns col = 2t,
 * 2t + 1) into a split tile at p (pair row 0, column 0): rows 2p, 2p + 1
 * meet through one shuffle with lane ^ 4, the even row's thread writing
 * column col and the odd row's column col + 1. The whole warp calls it. */
__device__ __forceinline__ void kda_store_split(float *p, uint32_t r, uint32_t col, float v0,
						float v1)
{
	const bool odd = r & 1;
	const float x = __shfl_xor_sync(0xffffffffu, odd ? v0 : v1, 4);
	const kda_tf32 a = kda_split_b(odd ? x : v0), b = kda_split_b(odd ? v1 : x);

	*(float4 *)(p + ((r >> 1) * KDA_PQ + col + odd) * 4) =
		make_float4(__uint_as_float(a.hi), __uint_as_float(b.hi), __uint_as_float(a.pk),
			    __uint_as_float(b.pk));
}

/*
 * Pass 2, K <= 128: grid and products as haccel_kda_chunk_state, with
 * the work split so that each fragment is loaded and split once a warp:
 *   (a) and QG S    warps 0-3: W S for row tile w, warps 4-7: QG S for row
 *                   tile w - 4, all 4 column tiles; then U = U' - W S
 *                   (split, to U2) and QG S (to shared memory)
 *   (c)             column tile w % 4, row tiles {0, 3} or {1, 2}: QG S
 *                   plus Q U
 *   (d)             row tile w of S (its C fragments stay in the warp's
 *                   registers), all 4 column tiles; then S split to S2
 * (c) and (d) run with no barrier between them, so that their chains
 * interleave. Copies: the next chunk's W, QG, U' during (c) and (d); its
 * Q, EL and KL during its (a).
 */
template <uint32_t KT>
__device__ __forceinline__ void kda_chunk_state2(float *o, uint32_t H, uint32_t Kr, uint32_t V,
						 const uint32_t *seg_off,
						 const uint32_t *seg_slot, char *state_base,
						 uint64_t slot_stride, const float *scratch)
{
	const uint32_t K = KT ? KT : Kr;
	const uint32_t tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const uint32_t g = lane >> 2, t = lane & 3;
	const uint32_t s = blockIdx.x, h = blockIdx.y, c0 = blockIdx.z * KDA_TILE_V;
	const uint32_t WP = K + 8, LP = K + 4, vl = min(KDA_TILE_V, V - c0); /* vl % 4 == 0 */
	const uint32_t t_beg = seg_off[s], t_end = seg_off[s + 1];
	const uint32_t nt = warp & 3, mt[2] = {warp >> 2, 3 - (warp >> 2)};
	const bool own = warp < K / 16; /* the warp holds row tile `warp` of S */
	const size_t per = kda_chunk_floats(K, V);

	if (t_end <= t_beg)
		return;
	float *S2 = (float *)kda_smem, *XW = S2 + K * 2 * KDA_PQ, *XQ = XW + KDA_C * WP;
	float *XK = XQ + KDA_C * WP, *U1 = XK + KDA_C * LP, *OS = U1 + KDA_C * KDA_U1;
	float *U2 = OS + KDA_C * KDA_U1, *Qs = U2 + KDA_C * 2 * KDA_PQ;
	float *EL0 = Qs + KDA_C * KDA_Q2;
	float *Sg = (float *)(state_base + seg_slot[s] * slot_stride) + (size_t)h * K * V + c0;
	const float *in = scratch + ((size_t)(t_beg / KDA_C + s) * H + h) * per;
	float sr[4][4];

	/* Prologue: chunk 0's W, QG, U'; Q, EL; KL. S from global to the
	 * registers of its row tile's warp, and split into S2. */
	kda_copy_tile(XW, WP, in, K, KDA_C, K, K, KDA_C);
	kda_copy_tile(XQ, WP, in + KDA_OFF_QG(K), K, KDA_C, K, K, KDA_C);
	kda_copy_tile(U1, KDA_U1, in + KDA_OFF_U(K) + c0, V, KDA_C, KDA_TILE_V, vl, KDA_C);
	__pipeline_commit();
	kda_copy_tile(Qs, KDA_Q2, in + KDA_OFF_Q(K, V), KDA_C, KDA_C, KDA_C, KDA_C, KDA_C);
	kda_copy_tile(EL0, K, in + KDA_OFF_EL(K), K, 1, K, K, 1);
	__pipeline_commit();
	kda_copy_tile(XK, LP, in + KDA_OFF_KL(K), K, KDA_C, K, K, KDA_C);
	__pipeline_commit();
	if (own)
#pragma unroll
		for (int c = 0; c < 4; c++) {
			const uint32_t r = 16 * warp + g, col = 8 * c + 2 * t;
			const float2 z = make_float2(0.0f, 0.0f);
			float2 x = col < vl ? *(const float2 *)(Sg + (size_t)r * V + col) : z;
			float2 y = col < vl ? *(const float2 *)(Sg + (size_t)(r + 8) * V + col) : z;

			sr[c][0] = x.x, sr[c][1] = x.y, sr[c][2] = y.x, sr[c][3] = y.y;
			kda_store_split(S2, r, col, x.x, x.y);
			kda_store_split(S2, r + 8, col, y.x, y.y);
		}

	for (uint32_t t0 = t_beg, ci = 0; t0 < t_end; t0 += KDA_C, ci++) {
		const uint32_t n = min(KDA_C, t_end - t0), b = ci & 1;
		const bool more = t0 + KDA_C < t_end;
		const float *nx = in + (size_t)H * per; /* the next chunk's slot */
		float *EL = EL0 + b * K, *ELn = EL0 + (b ^ 1) * K;

		/* W, QG, U' (and S2) are in; Q, EL and KL may be on their way. */
		__pipeline_wait_prior(1);
		__syncthreads();

		/* (a) and QG S */
		{
			const uint32_t m = warp & 3;
			const float *X = (warp < 4 ? XW : XQ) + 16 * m * WP;
			float big[4][4] = {}, small[4][4] = {};

#pragma unroll
			for (uint32_t kk = 0; kk < K; kk += 8) {
				kda_mma3_row4(big, small, kda_load_a2(X + kk, WP),
					      S2 + kk / 2 * KDA_PQ * 4);
			}
#pragma unroll
			for (int c = 0; c < 4; c++) {
				const uint32_t r = 16 * m + g, col = 8 * c + 2 * t;
				float v[4];

#pragma unroll
				for (int e = 0; e < 4; e++)
					v[e] = big[c][e] + small[c][e];
				if (warp < 4) {
					float2 x = *(const float2 *)(U1 + r * KDA_U1 + col);
					float2 y = *(const float2 *)(U1 + (r + 8) * KDA_U1 + col);

					kda_store_split(U2, r, col, x.x - v[0], x.y - v[1]);
					kda_store_split(U2, r + 8, col, y.x - v[2], y.y - v[3]);
				} else {
					*(float2 *)(OS + r * KDA_U1 + col) =
						make_float2(v[0], v[1]);
					*(float2 *)(OS + (r + 8) * KDA_U1 + col) =
						make_float2(v[2], v[3]);
				}
			}
		}
		/* This chunk's Q, EL and KL (copied since the last chunk's (d))
		 * are in; W, QG, U' are done with: the next chunk's take their
		 * room. */
		__pipeline_wait_prior(0);
		__syncthreads();
		if (more) {
			kda_copy_tile(XW, WP, nx, K, KDA_C, K, K, KDA_C);
			kda_copy_tile(XQ, WP, nx + KDA_OFF_QG(K), K, KDA_C, K, K, KDA_C);
			kda_copy_tile(U1, KDA_U1, nx + KDA_OFF_U(K) + c0, V, KDA_C, KDA_TILE_V,
				      vl, KDA_C);
		}
		__pipeline_commit();

		/* (c) o = QG S + Q U, and (d), with no barrier between: their
		 * independent chains of products interleave. Q is lower
		 * triangular: row tile m needs the rows of U below 16 (m + 1). */
#pragma unroll
		for (int i = 0; i < 2; i++) {
			const uint32_t m = mt[i], r = 16 * m + g, col = 8 * nt + 2 * t;
			const float2 x = *(const float2 *)(OS + r * KDA_U1 + col);
			const float2 y = *(const float2 *)(OS + (r + 8) * KDA_U1 + col);
			float big[4] = {x.x, x.y, y.x, y.y}, small[4] = {};

#pragma unroll
			for (uint32_t kk = 0; kk < 16 * (m + 1); kk += 8)
				kda_mma3(big, small, kda_load_a2(Qs + 16 * m * KDA_Q2 + kk, KDA_Q2),
					 kda_load_b2(U2 + (kk / 2 * KDA_PQ + 8 * nt) * 4));
			if (col < vl) {
				float *op = o + ((size_t)(t0 + r) * H + h) * V + c0 + col;

				if (r < n)
					*(float2 *)op = make_float2(big[0] + small[0],
								    big[1] + small[1]);
				if (r + 8 < n)
					*(float2 *)(op + (size_t)8 * H * V) =
						make_float2(big[2] + small[2], big[3] + small[3]);
			}
		}
		/* (d) S = EL * S + KL^T U on the warp's row tile, then to S2. */
		if (own) {
			const uint32_t r = 16 * warp + g;
			const float e0 = EL[r], e1 = EL[r + 8];
			float small[4][4] = {};

#pragma unroll
			for (int c = 0; c < 4; c++)
				sr[c][0] *= e0, sr[c][1] *= e0, sr[c][2] *= e1, sr[c][3] *= e1;
#pragma unroll
			for (uint32_t kk = 0; kk < KDA_C; kk += 8) {
				kda_mma3_row4(sr, small, kda_load_at2(XK + kk * LP + 16 * warp, LP),
					      U2 + kk / 2 * KDA_PQ * 4);
			}
#pragma unroll
			for (int c = 0; c < 4; c++) {
				const uint32_t col = 8 * c + 2 * t;

#pragma unroll
				for (int e = 0; e < 4; e++)
					sr[c][e] += small[c][e];
				kda_store_split(S2, r, col, sr[c][0], sr[c][1]);
				kda_store_split(S2, r + 8, col, sr[c][2], sr[c][3]);
			}
		}
		__syncthreads();

		/* Q, EL and KL are done with: the next chunk's take their room. */
		if (more) {
			kda_copy_tile(Qs, KDA_Q2, nx + KDA_OFF_Q(K, V), KDA_C, KDA_C, KDA_C, KDA_C,
				      KDA_C);
			kda_copy_tile(ELn, K, nx + KDA_OFF_EL(K), K, 1, K, K, 1);
			kda_copy_tile(XK, LP, nx + KDA_OFF_KL(K), K, KDA_C, K, K, KDA_C);
		}
		__pipeline_commit();
		in = nx;
	}
	if (own)
#pragma unroll
		for (int c = 0; c < 4; c++) {
			const uint32_t r = 16 * warp + g, col = 8 * c + 2 * t;

			if (col < vl) {
				*(float2 *)(Sg + (size_t)r * V + col) =
					make_float2(sr[c][0], sr[c][1]);
				*(float2 *)(Sg + (size_t)(r + 8) * V + col) =
					make_float2(sr[c][2], sr[c][3]);
			}
		}
}

/* Pass 2's entry points: wide keys, K <= 128, and K = 128 with constant
 * strides. */
#define KDA_CHUNK_STATE(name, fn)                                                            \
	HACCEL_K void __launch_bounds__(256)                                                  \
		name(float *o, uint32_t H, uint32_t K, uint32_t V, const uint32_t *seg_off,   \
		     const uint32_t *seg_slot, char *state_base, uint64_t slot_stride,        \
		     const float *scratch)                                                    \
	{                                                                                     \
		HAC_PDL();                                                                    \
		fn(o, H, K, V, seg_off, seg_slot, state_base, slot_stride, scratch);          \
	}

KDA_CHUNK_STATE(haccel_kda_chunk_state, kda_chunk_state)
KDA_CHUNK_STATE(haccel_kda_chunk_state2, kda_chunk_state2<0>)
KDA_CHUNK_STATE(haccel_kda_chunk_state2_128, kda_chunk_state2<128>)


/*
 * Pass 2 for K = 128 on the warpgroup MMA (haccel_kda_chunk_state_wg32,
 * _wg64: NV = 32 or 64 columns of V a block): the products of
 * kda_chunk_state2, each k-step of a warpgroup's 64 x NV product two
 * instructions (m64nNVk8 .tf32 for hi hi, m64nNVk16 .bf16 for the cross
 * terms) where it is 2 NV / 8 mma.sync and NV / 8 fragment loads a warp
 * there. The A operands are split in registers as there (each element
 * once a block); the B operands, S and U, are split once into shared
 * memory in the layout the MMA reads:
 *   warpgroup 0 (warps 0-3)  u = U' - W S, to UB; then S rows 0-63
 *   warpgroup 1 (warps 4-7)  QG S, kept in its registers; then S rows
 *                            64-127, and o = QG S + Q u
 * S rows 16 w .. 16 w + 15 stay in the registers of warp w across the
 * chunks, as the accumulator of S = EL * S + KL^T u. The 64-column blocks
 * halve the grid for heads that would fill more than one wave.
 *
 * A B operand (k < K_B, n < NV) is K-major in the 128-byte swizzle
 * (hac_wg_desc): kblocks of 32 k, [K_B / 32][NV rows n][128 bytes]; k-step
 * k / 8 at byte 32 (k / 8 % 4) of its row holds its 8 k's in the order of
 * the A fragments' registers (kda_load_a2, kda_load_at2: 2 t in slot t,
 * 2 t + 1 in slot t + 4), as tf32 bits (hi) and as bf16 pairs (lo, x)
 * (pk), a 4-byte word each.
 *
 * Shared memory, 1024-byte aligned: SB hi, pk [4][NV][128 bytes]; UB hi,
 * pk [2][NV][128 bytes]; then (floats) W, QG [KDA_C][K + 8], KL [KDA_C][K
 * + 4], Q [KDA_C][KDA_Q2], EL0, EL1 [K]. U' is read from global memory
 * into registers at the start of each chunk; the next chunk's W and QG
 * are copied during phase B, its KL and EL during phase A, its Q after
 * the o that reads this one.
 */
#define KDA_WG_SMEM(NV) (1024u + 12u * 128u * (NV) + 4u * (2u * KDA_C * 136u + KDA_C * 132u + \
							     KDA_C * KDA_Q2 + 2u * 128u))

template <uint32_t NV>
__device__ __forceinline__ uint32_t kda_wb_off(uint32_t k, uint32_t n)
{
	const uint32_t q = k & 7, byte = 32 * ((k >> 3) & 3) + 4 * ((q >> 1) + 4 * (q & 1));

	return (k >> 5) * (128 * NV) + n * 128 + (((byte >> 4) ^ (n & 7)) << 4) + (byte & 15);
}

template <uint32_t NV>
__device__ __forceinline__ void kda_wb_store(uint8_t *hi, uint8_t *pk, uint32_t k, uint32_t n,
					     float v)
{
	const kda_tf32 x = kda_split_b(v);
	const uint32_t o = kda_wb_off<NV>(k, n);

	*(uint32_t *)(hi + o) = x.hi;
	*(uint32_t *)(pk + o) = x.pk;
}

/* 8 k-steps of A (fragments ah, ap) times the split B at descriptors bh,
 * bp (kblocks of 128 NV bytes), into big (hi hi) and small (the cross
 * terms); issued and committed, not waited for. */
template <uint32_t NV>
__device__ __forceinline__ void kda_wg_issue(float *big, float *small, uint32_t (*ah)[4],
					     uint32_t (*ap)[4], uint64_t bh, uint64_t bp)
{
	hac_wg_hold<NV / 2>(big);
	hac_wg_hold<NV / 2>(small);
	hac_wg_hold_a<8>(ah);
	hac_wg_hold_a<8>(ap);
	hac_wg_fence();
#pragma unroll
	for (int kk = 0; kk < 8; kk++) {
		const uint32_t off = ((kk >> 2) * 128 * NV + 32 * (kk & 3)) / 16;

		hac_wg_tf32r<NV>(big, ah[kk], bh + off);
		hac_wg_bf16r<NV>(small, ap[kk], bp + off);
	}
	hac_wg_commit();
}

/* 8 k-steps of A fragments, from kda_load_a2 (rows) or kda_load_at2
 * (columns) of p with stride ld, k-step kk at p + 8 kk (rows) or p + 8 kk
 * ld (columns). */
template <bool COLS>
__device__ __forceinline__ void kda_wg_frags(uint32_t (*ah)[4], uint32_t (*ap)[4],
					     const float *p, uint32_t ld)
{
#pragma unroll
	for (int kk = 0; kk < 8; kk++) {
		const kda_fa a = COLS ? kda_load_at2(p + 8 * kk * ld, ld) :
					kda_load_a2(p + 8 * kk, ld);

#pragma unroll
		for (int i = 0; i < 4; i++)
			ah[kk][i] = a.x[i].hi, ap[kk][i] = a.x[i].pk;
	}
}

/* v[i] to the split operand (hi, pk) at k = r + 8 ((i >> 1) & 1), n = 8
 * (i >> 2) + 2 t + (i & 1): an accumulator's rows r, r + 8 (its layout). */
template <uint32_t NV>
__device__ __forceinline__ void kda_wg_store_acc(uint8_t *hi, uint8_t *pk, uint32_t r,
						 const float *v)
{
	const uint32_t t = threadIdx.x & 3;

#pragma unroll
	for (int i = 0; i < (int)NV / 2; i++)
		kda_wb_store<NV>(hi, pk, r + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * t + (i & 1),
				 v[i]);
}

/* Warpgroup 1's o = QG S + Q u of the chunk at t0 (n tokens): qo holds
 * QG S; ah, ap and ss are scratch. */
template <uint32_t NV>
__device__ __forceinline__ void kda_wg_out(float *o, uint32_t H, uint32_t V, uint32_t h,
					   uint32_t c0, uint32_t vl, uint32_t t0, uint32_t n,
					   float *qo, float *ss, uint32_t (*ah)[4], uint32_t (*ap)[4],
					   const float *Qs, uint64_t dUh, uint64_t dUp)
{
	const uint32_t warp = threadIdx.x >> 5, g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
	const uint32_t m0 = 16 * (warp & 3) + g;
	float *op = o + ((size_t)t0 * H + h) * V + c0;

#pragma unroll
	for (int i = 0; i < (int)NV / 2; i++)
		ss[i] = 0.0f;
	kda_wg_frags<false>(ah, ap, Qs + 16 * (warp & 3) * KDA_Q2, KDA_Q2);
	kda_wg_issue<NV>(qo, ss, ah, ap, dUh, dUp);
	hac_wg_wait<0>();
	hac_wg_hold<NV / 2>(qo);
	hac_wg_hold<NV / 2>(ss);
#pragma unroll
	for (int j = 0; j < (int)NV / 8; j++)
#pragma unroll
		for (int hh = 0; hh < 2; hh++) {
			const uint32_t r = m0 + 8 * hh, col = 8 * j + 2 * t;
			const int i = 4 * j + 2 * hh;

			if (col < vl && r < n)
				*(float2 *)(op + (size_t)r * H * V + col) =
					make_float2(qo[i] + ss[i], qo[i + 1] + ss[i + 1]);
		}
}

template <uint32_t NV>
__device__ __forceinline__ void kda_chunk_state_wg(float *o, uint32_t H, uint32_t V,
						   const uint32_t *seg_off,
						   const uint32_t *seg_slot, char *state_base,
						   uint64_t slot_stride, const float *scratch)
{
	const uint32_t K = 128, WP = K + 8, LP = K + 4, NA = NV / 2, KB = 128 * NV;
	const uint32_t tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2;
	const uint32_t g = lane >> 2, t = lane & 3, me = tid & 127;
	const uint32_t s = blockIdx.x, h = blockIdx.y, c0 = blockIdx.z * NV;
	const uint32_t vl = min(NV, V - c0); /* vl % 4 == 0 */
	const uint32_t t_beg = seg_off[s], t_end = seg_off[s + 1];
	const uint32_t r0 = 16 * warp + g;       /* the thread's rows of S: r0, r0 + 8 */
	const uint32_t m0 = 16 * (warp & 3) + g; /* and of the chunk's u, o: m0, m0 + 8 */
	const size_t per = kda_chunk_floats(K, V);

	if (t_end <= t_beg)
		return;
	uint8_t *base = (uint8_t *)kda_smem;

	base += (1024 - (hac_saddr(base) & 1023)) & 1023;
	uint8_t *SBh = base, *SBp = SBh + 4 * KB, *UBh = SBp + 4 * KB, *UBp = UBh + 2 * KB;
	float *XW = (float *)(UBp + 2 * KB), *XQ = XW + KDA_C * WP, *XK = XQ + KDA_C * WP;
	float *Qs = XK + KDA_C * LP, *EL0 = Qs + KDA_C * KDA_Q2;
	float *Sg = (float *)(state_base + seg_slot[s] * slot_stride) + (size_t)h * K * V + c0;
	const float *in = scratch + ((size_t)(t_beg / KDA_C + s) * H + h) * per;
	const uint64_t dSh = hac_wg_desc(SBh), dSp = hac_wg_desc(SBp);
	const uint64_t dUh = hac_wg_desc(UBh), dUp = hac_wg_desc(UBp);
	/* S: sr[4 j + q] at row r0 + 8 (q >> 1), column 8 j + 2 t + (q & 1)
	 * (the accumulator's layout); u, QG S and o the same at rows m0. */
	float sr[NA], qo[NA], ss[NA];
	uint32_t ah[8][4], ap[8][4];

	if (wg == 0) {
		kda_copy_tile<128>(XW, WP, in, K, KDA_C, K, K, KDA_C, me);
		__pipeline_commit();
		kda_copy_tile<128>(XK, LP, in + KDA_OFF_KL(K), K, KDA_C, K, K, KDA_C, me);
		kda_copy_tile<128>(EL0, K, in + KDA_OFF_EL(K), K, 1, K, K, 1, me);
	} else {
		kda_copy_tile<128>(XQ, WP, in + KDA_OFF_QG(K), K, KDA_C, K, K, KDA_C, me);
		kda_copy_tile<128>(Qs, KDA_Q2, in + KDA_OFF_Q(K, V), KDA_C, KDA_C, KDA_C, KDA_C,
				   KDA_C, me);
	}
	__pipeline_commit();
#pragma unroll
	for (int j = 0; j < (int)NV / 8; j++)
#pragma unroll
		for (int hh = 0; hh < 2; hh++) {
			const uint32_t col = 8 * j + 2 * t;
			const float *p = Sg + (size_t)(r0 + 8 * hh) * V + col;
			const float2 x = col < vl ? *(const float2 *)p : make_float2(0.0f, 0.0f);

			sr[4 * j + 2 * hh] = x.x, sr[4 * j + 2 * hh + 1] = x.y;
		}
	kda_wg_store_acc<NV>(SBh, SBp, r0, sr);
	hac_fence_async();

	for (uint32_t t0 = t_beg, ci = 0; t0 < t_end; t0 += KDA_C, ci++) {
		const uint32_t n = min(KDA_C, t_end - t0), b = ci & 1;
		const bool more = t0 + KDA_C < t_end;
		const float *nx = in + (size_t)H * per; /* the next chunk's slot */
		float *EL = EL0 + b * K;

		/* This warpgroup's copies for phase A are in (warpgroup 0: W;
		 * KL and EL of chunk 0 may be on their way; warpgroup 1: QG and
		 * the Q of the chunk before); SB is complete; phase B's reads
		 * of KL and EL are done. */
		if (wg == 0 && ci == 0)
			__pipeline_wait_prior(1);
		else
			__pipeline_wait_prior(0);
		__syncthreads();
		if (wg == 0 && ci) {
			kda_copy_tile<128>(XK, LP, in + KDA_OFF_KL(K), K, KDA_C, K, K, KDA_C, me);
			kda_copy_tile<128>(EL, K, in + KDA_OFF_EL(K), K, 1, K, K, 1, me);
			__pipeline_commit();
		}

		/* Phase A: W S (warpgroup 0); the last chunk's o, then QG S
		 * (warpgroup 1); in two halves of K that reuse the fragments'
		 * registers. */
		{
			const float *X = (wg ? XQ : XW) + 16 * (warp & 3) * WP;
			float big[NA], small[NA], up[NA];

			if (wg == 1 && ci) {
				kda_wg_out<NV>(o, H, V, h, c0, vl, t0 - KDA_C, KDA_C, qo, ss, ah, ap,
					       Qs, dUh, dUp);
				/* UB and Q are done with: warpgroup 0 may
				 * rewrite UB; this chunk's Q takes Q's room.
				 * The copy below writes rows of Qs that the
				 * other three warps of this warpgroup read
				 * into their A fragments; no barrier is needed
				 * first: the warpgroup's MMA in kda_wg_out
				 * takes every warp's fragments, so its
				 * completion (the wait there) means every
				 * warp's reads of Qs are done. */
				asm volatile("bar.arrive 1, 256;\n" ::: "memory");
				kda_copy_tile<128>(Qs, KDA_Q2, in + KDA_OFF_Q(K, V), KDA_C, KDA_C,
						   KDA_C, KDA_C, KDA_C, me);
				__pipeline_commit();
			}
			/* U' (zeros past its rows and columns), in flight
			 * through the products */
#pragma unroll
			for (int j = 0; j < (int)NV / 8; j++)
#pragma unroll
				for (int hh = 0; hh < 2; hh++) {
					const uint32_t col = 8 * j + 2 * t;
					const float *p = in + KDA_OFF_U(K) +
							 (size_t)(m0 + 8 * hh) * V + c0 + col;
					const float2 x = wg == 0 && col < vl ?
								 __ldg((const float2 *)p) :
								 make_float2(0.0f, 0.0f);

					up[4 * j + 2 * hh] = x.x, up[4 * j + 2 * hh + 1] = x.y;
				}
#pragma unroll
			for (int i = 0; i < (int)NA; i++)
				big[i] = small[i] = 0.0f;
#pragma unroll
			for (int half = 0; half < 2; half++) {
				kda_wg_frags<false>(ah, ap, X + 64 * half, WP);
				kda_wg_issue<NV>(big, small, ah, ap, dSh + half * 2 * KB / 16,
						 dSp + half * 2 * KB / 16);
				hac_wg_wait<0>();
			}
			hac_wg_hold<NA>(big);
			hac_wg_hold<NA>(small);
#pragma unroll
			for (int i = 0; i < (int)NA; i++)
				qo[i] = wg ? big[i] + small[i] : up[i] - (big[i] + small[i]);
			if (wg == 0) {
				if (ci)
					asm volatile("bar.sync 1, 256;\n" ::: "memory");
				kda_wg_store_acc<NV>(UBh, UBp, m0, qo);
				hac_fence_async();
				/* KL and EL (this warpgroup's copies) are in. */
				__pipeline_wait_prior(0);
			}
		}
		/* UB is complete, W and QG are done with: the next chunk's take
		 * their room. */
		__syncthreads();
		if (more) {
			if (wg == 0)
				kda_copy_tile<128>(XW, WP, nx, K, KDA_C, K, K, KDA_C, me);
			else
				kda_copy_tile<128>(XQ, WP, nx + KDA_OFF_QG(K), K, KDA_C, K, K,
						   KDA_C, me);
			__pipeline_commit();
		}

		/* Phase B: S = EL * S + KL^T u on each warpgroup's rows. */
		{
			const float e0 = EL[r0], e1 = EL[r0 + 8];

#pragma unroll
			for (int i = 0; i < (int)NA; i++)
				sr[i] *= (i & 2) ? e1 : e0, ss[i] = 0.0f;
			kda_wg_frags<true>(ah, ap, XK + 16 * warp, LP);
			kda_wg_issue<NV>(sr, ss, ah, ap, dUh, dUp);
			hac_wg_wait<0>();
			hac_wg_hold<NA>(sr);
			hac_wg_hold<NA>(ss);
#pragma unroll
			for (int i = 0; i < (int)NA; i++)
				sr[i] += ss[i];
			kda_wg_store_acc<NV>(SBh, SBp, r0, sr);
			hac_fence_async();
		}
		if (!more && wg == 1) {
			/* The last chunk's o: its Q (copied by this
			 * warpgroup during its phase A) in first. */
			__pipeline_wait_prior(0);
			asm volatile("bar.sync 2, 128;\n" ::: "memory");
			kda_wg_out<NV>(o, H, V, h, c0, vl, t0, n, qo, ss, ah, ap, Qs, dUh, dUp);
		}
		in = nx;
	}
#pragma unroll
	for (int j = 0; j < (int)NV / 8; j++)
#pragma unroll
		for (int hh = 0; hh < 2; hh++) {
			const uint32_t col = 8 * j + 2 * t;

			if (col < vl)
				*(float2 *)(Sg + (size_t)(r0 + 8 * hh) * V + col) =
					make_float2(sr[4 * j + 2 * hh], sr[4 * j + 2 * hh + 1]);
		}
}

#define KDA_CHUNK_STATE_WG(name, NV)                                                          \
	HACCEL_K void __launch_bounds__(256, 1)                                               \
		name(float *o, uint32_t H, uint32_t K, uint32_t V, const uint32_t *seg_off,   \
		     const uint32_t *seg_slot, char *state_base, uint64_t slot_stride,        \
		     const float *scratch)                                                    \
	{                                                                                     \
		HAC_PDL();                                                                    \
		(void)K;                                                                      \
		kda_chunk_state_wg<NV>(o, H, V, seg_off, seg_slot, state_base, slot_stride,   \
				       scratch);                                              \
	}

KDA_CHUNK_STATE_WG(haccel_kda_chunk_state_wg32, 32)
KDA_CHUNK_STATE_WG(haccel_kda_chunk_state_wg64, 64)

/*
 * The warpgroup products of haccel_kda_chunk_state_wg on their own, for
 * gpu-kda: c [64][NV] = A B, A [64][K] (or, with ta, its transpose stored
 * [K][64]) and B [K][NV] fp32 row-major, K = 64 or 128: B split through
 * kda_wb_store, A's fragments by kda_wg_frags from global memory, the
 * products by kda_wg_issue. part 1 keeps only the tf32 products (hi hi),
 * part 2 only the cross terms, 0 both (to tell a layout fault in one
 * from the other). One block of one warpgroup; shared memory 2 K NV * 4
 * bytes plus 1024 (alignment).
 */
template <uint32_t NV>
__device__ __forceinline__ void kda_wg_matmul(float *c, const float *a, const float *b,
					      uint32_t K, uint32_t ta, uint32_t part)
{
	const uint32_t tid = threadIdx.x, warp = tid >> 5, g = (tid & 31) >> 2, t = tid & 3;
	const uint32_t NA = NV / 2, KB = 128 * NV, m0 = 16 * warp + g;
	uint8_t *base = (uint8_t *)kda_smem;

	base += (1024 - (hac_saddr(base) & 1023)) & 1023;
	uint8_t *Bh = base, *Bp = base + (K / 32) * KB;
	const uint64_t dh = hac_wg_desc(Bh), dp = hac_wg_desc(Bp);
	float big[NA], small[NA];
	uint32_t ah[8][4], ap[8][4];

	for (uint32_t x = tid; x < K * NV; x += 128)
		kda_wb_store<NV>(Bh, Bp, x / NV, x % NV, b[x]);
	hac_fence_async();
	__syncthreads();
#pragma unroll
	for (int i = 0; i < (int)NA; i++)
		big[i] = small[i] = 0.0f;
	for (uint32_t half = 0; half < K / 64; half++) {
		if (ta)
			kda_wg_frags<true>(ah, ap, a + 64 * half * 64 + 16 * warp, 64);
		else
			kda_wg_frags<false>(ah, ap, a + 16 * warp * K + 64 * half, K);
		kda_wg_issue<NV>(big, small, ah, ap, dh + half * 2 * KB / 16,
				 dp + half * 2 * KB / 16);
		hac_wg_wait<0>();
	}
	hac_wg_hold<NA>(big);
	hac_wg_hold<NA>(small);
#pragma unroll
	for (int i = 0; i < (int)NA; i++)
		c[(m0 + 8 * ((i >> 1) & 1)) * NV + 8 * (i >> 2) + 2 * t + (i & 1)] =
			(part == 2 ? 0.0f : big[i]) + (part == 1 ? 0.0f : small[i]);
}

HACCEL_K void __launch_bounds__(128)
	haccel_kda_wg_matmul(float *c, const float *a, const float *b, uint32_t K, uint32_t NV,
			     uint32_t ta, uint32_t part)
{
	HAC_PDL();
	if (NV == 64)
		kda_wg_matmul<64>(c, a, b, K, ta, part);
	else
		kda_wg_matmul<32>(c, a, b, K, ta, part);
}
