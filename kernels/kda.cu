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
 *             full chunk.
 *           pass 2, per (segment, head, 32 columns of V), chunks in order,
 *             the state tile in shared memory:
 *               u = U' - W S0           (= the CPU's forward substitution
 *                                        of r = beta (v - S0^T e^G k))
 *               o = QG S0 + Q u
 *               S = EL * S0 + KL^T u
 *           The pass 2 products run on the tensor cores in 3xTF32 (each
 *           fp32 operand split into a tf32 high part and a tf32 remainder,
 *           three products summed in fp32), which keeps fp32 accuracy.
 *
 * Every decay is the exponential of a non-positive difference of prefix
 * sums (G_i - G_j, j <= i, G_last - G_j) or of G_i itself, never a ratio.
 */
#include <cuda_pipeline.h>
#include <mma.h>

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

/* grid (n_seg, ceil(C / 256), convolutions), block 256, after
 * haccel_kda_conv: the new tail is the last W - 1 rows of (old tail, the
 * segment's inputs), each thread one channel, read whole before it is
 * written; convolution z as in haccel_kda_conv. */
HACCEL_K void haccel_kda_conv_tail(const float *in, uint32_t C, uint32_t W,
				   const uint32_t *seg_off, const uint32_t *seg_slot,
				   char *tail_base, uint64_t slot_stride, uint64_t gs_in,
				   uint64_t gs_tail)
{
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

HACCEL_K void haccel_kda_gate(float *g, const float *g_raw, uint32_t H, uint32_t K,
			      const float *A_log, const float *dt_bias, int form, float lb,
			      uint64_t n)
{
	uint64_t HK = (uint64_t)H * K;

	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
	     i += (uint64_t)gridDim.x * blockDim.x) {
		uint64_t hk = i % HK;
		float a = expf(A_log[hk / K]);
		float x = g_raw[i] + dt_bias[hk];

		if (form == HACCEL__KDA_GATE_LOWER_BOUND)
			g[i] = lb * kda_sigmoid(a * x);
		else
			g[i] = -a * (x > 20.0f ? x : log1pf(expf(x)));
	}
}

/* A warp per (token, head) row, 8 rows a block. */
HACCEL_K void haccel_kda_prep(float *q, float *k, float *beta, uint32_t K, uint64_t rows,
			      float scale)
{
	uint64_t row = blockIdx.x * 8ull + (threadIdx.x >> 5);
	uint32_t lane = threadIdx.x & 31;

	if (row >= rows)
		return;
	float *qr = q + row * K, *kr = k + row * K;
	float sq = 0.0f, sk = 0.0f;

	for (uint32_t c = lane; c < K; c += 32) {
		sq += qr[c] * qr[c];
		sk += kr[c] * kr[c];
	}
	float rq = 1.0f / sqrtf(warp_sum(sq) + 1e-6f);
	float rk = 1.0f / sqrtf(warp_sum(sk) + 1e-6f);
	for (uint32_t c = lane; c < K; c += 32) {
		qr[c] = qr[c] * rq * scale;
		kr[c] = kr[c] * rk;
	}
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
	kda_gated_rmsnorm_row(o, gate, w, V, rows, eps, [&](uint64_t i, float v) { o[i] = v; });
}

/* The same into y, rounded to bf16 as haccel_to_bf16 rounds (the output
 * projection's input); o is not written. */
HACCEL_K void haccel_kda_gated_rmsnorm_bf16(uint16_t *y, const float *o, const float *gate,
					    const float *w, uint32_t V, uint64_t rows, float eps)
{
	kda_gated_rmsnorm_row(o, gate, w, V, rows, eps,
			      [&](uint64_t i, float v) { y[i] = hac_bf16_from_float(v); });
}

/* ------------------------------------------------------------------------ */
/* The recurrence (decode)                                                  */

/*
 * grid (n_seg, H, ceil(V / 32)), block 256. Thread (warp w, lane l) owns
 * columns c0 = 32 blockIdx.z + 4 (l & 7) .. c0 + 3 of rows
 * r_i = 4 w + (l >> 3) + 32 i, i < NR (NR = K / 32 rounded up, rows past
 * K are zeros): a warp's load covers 4 rows of 128 contiguous bytes. State
 * and v, o go as float4 (16-byte aligned, V % 4 == 0: checked by the
 * wrapper).
 */
template <int NR>
__device__ __forceinline__ void kda_recurrent(const float *q, const float *k, const float *v,
					      const float *gt, const float *beta, float *o,
					      uint32_t H, uint32_t K, uint32_t V,
					      const uint32_t *seg_off, const uint32_t *seg_slot,
					      char *state_base, uint64_t slot_stride)
{
	__shared__ float sk[32 * NR], sq[32 * NR], se[32 * NR];
	__shared__ float4 red[2][8][8]; /* [k^T S, q^T S][warp][column group] */
	const uint32_t tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, cg = lane & 7;
	const uint32_t rl = warp * 4 + (lane >> 3), h = blockIdx.y;
	const uint32_t col = blockIdx.z * KDA_TILE_V + cg * 4;
	const uint32_t t0 = seg_off[blockIdx.x], t1 = seg_off[blockIdx.x + 1];
	const bool act = col < V;
	float4 S[NR];

	if (t1 <= t0)
		return;
	float *Sh = (float *)(state_base + seg_slot[blockIdx.x] * slot_stride) +
		    (size_t)h * K * V + col;

	/* The state loads go first: they overlap the staging below. */
#pragma unroll
	for (int i = 0; i < NR; i++) {
		uint32_t r = rl + 32 * i;

		S[i] = act && r < K ? *(const float4 *)(Sh + (size_t)r * V) : kda_f4(0.0f);
	}

	for (uint32_t t = t0; t < t1; t++) {
		size_t th = (size_t)t * H + h;

		if (tid < K) {
			sk[tid] = k[th * K + tid];
			sq[tid] = q[th * K + tid];
			se[tid] = expf(gt[th * K + tid]);
		}
		float b = beta[th];
		float4 vv = act ? *(const float4 *)(v + th * V + col) : kda_f4(0.0f);
		__syncthreads();

		/* (1) S = diag(exp(g)) S, (2) k^T S */
		float4 p = kda_f4(0.0f);
#pragma unroll
		for (int i = 0; i < NR; i++) {
			uint32_t r = rl + 32 * i;

			if (r < K) {
				S[i] = kda_scale4(se[r], S[i]);
				p = kda_fma4(sk[r], S[i], p);
			}
		}
		p = kda_shfl_xor4(kda_shfl_xor4(p, 8), 16);
		if (lane < 8)
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
			uint32_t r = rl + 32 * i;

			if (r < K) {
				S[i] = kda_fma4(sk[r], u, S[i]);
				p = kda_fma4(sq[r], S[i], p);
			}
		}
		p = kda_shfl_xor4(kda_shfl_xor4(p, 8), 16);
		if (lane < 8)
			red[1][warp][lane] = p;
		/* The next token's staging writes sk, sq, se only after this
		 * barrier, when every thread is done with them; red[0] is
		 * rewritten two barriers later, red[1] three. */
		__syncthreads();
		if (warp == 0 && lane < 8 && act) {
			float4 os = red[1][0][cg];
#pragma unroll
			for (int w = 1; w < 8; w++)
				os = kda_add4(os, red[1][w][cg]);
			*(float4 *)(o + th * V + col) = os;
		}
	}

#pragma unroll
	for (int i = 0; i < NR; i++) {
		uint32_t r = rl + 32 * i;

		if (act && r < K)
			*(float4 *)(Sh + (size_t)r * V) = S[i];
	}
}

#define KDA_RECURRENT(name, NR)                                                               \
	HACCEL_K void __launch_bounds__(256)                                                  \
		name(const float *q, const float *k, const float *v, const float *gt,         \
		     const float *beta, float *o, uint32_t H, uint32_t K, uint32_t V,          \
		     const uint32_t *seg_off, const uint32_t *seg_slot, char *state_base,     \
		     uint64_t slot_stride)                                                    \
	{                                                                                     \
		kda_recurrent<NR>(q, k, v, gt, beta, o, H, K, V, seg_off, seg_slot,           \
				  state_base, slot_stride);                                   \
	}

KDA_RECURRENT(haccel_kda_recurrent_64, 2)
KDA_RECURRENT(haccel_kda_recurrent_128, 4)
KDA_RECURRENT(haccel_kda_recurrent_256, 8)

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

/* Pass 1 shared memory, in floats, D = max(K, V, KDA_AP): G, kk, qq
 * [KDA_C][D + 1] (the + 1 spreads rows over banks) and beta [KDA_C].
 * A^T [KDA_C][KDA_AP] (rows 16-byte aligned) takes G's room once G is
 * dead. */
#define KDA_AP (KDA_C + 4)

__host__ __device__ __forceinline__ uint32_t kda_prep_ld(uint32_t K, uint32_t V)
{
	uint32_t D = K > V ? K : V;

	return (D > KDA_AP ? D : KDA_AP) + 1;
}

__host__ __device__ __forceinline__ size_t kda_prep_smem(uint32_t K, uint32_t V)
{
	return (size_t)KDA_C * (3 * kda_prep_ld(K, V) + 1);
}

extern __shared__ __align__(128) float4 kda_smem[];

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
HACCEL_K void __launch_bounds__(256, 2)
	haccel_kda_chunk_prep(const float *q, const float *k, const float *v, const float *gt,
			      const float *beta, uint32_t H, uint32_t K, uint32_t V,
			      uint32_t n_seg, const uint32_t *seg_off, float *scratch)
{
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

	/* Rows past n are zeros: they add nothing and G stays at G_{n-1}. */
	for (uint32_t x = tid * 4; x < KDA_C * K; x += blockDim.x * 4) {
		uint32_t i = x / K, c = x % K;
		size_t src = (((size_t)t0 + i) * H + h) * K + c;
		float4 g4 = kda_f4(0.0f), k4 = g4, q4 = g4;

		if (i < n) {
			g4 = *(const float4 *)(gt + src);
			k4 = *(const float4 *)(k + src);
			q4 = *(const float4 *)(q + src);
		}
		float *Gr = G + i * LD + c, *kr = kk + i * LD + c, *qr = qq + i * LD + c;
		Gr[0] = g4.x, Gr[1] = g4.y, Gr[2] = g4.z, Gr[3] = g4.w;
		kr[0] = k4.x, kr[1] = k4.y, kr[2] = k4.z, kr[3] = k4.w;
		qr[0] = q4.x, qr[1] = q4.y, qr[2] = q4.z, qr[3] = q4.w;
	}
	if (tid < KDA_C)
		bet[tid] = tid < n ? beta[((size_t)t0 + tid) * H + h] : 0.0f;
	__syncthreads();
	for (uint32_t c = tid; c < K; c += blockDim.x)
		for (uint32_t i = 1; i < KDA_C; i++)
			G[i * LD + c] += G[(i - 1) * LD + c];
	__syncthreads();

	/*
	 * A and Q. Thread (ti, tj) = (tid % 16, tid / 16) takes rows
	 * i = ti + 16 a and columns j = tj + 16 b, b <= a (b > a is above the
	 * diagonal); for b == a only tj <= ti (Q) or tj < ti (A) are kept.
	 * Those it does not keep may have G_i - G_j > 0: their values are
	 * dropped, never stored. A stays in registers until G is dead.
	 */
	const uint32_t ti = tid & 15, tj = tid >> 4;
	float accA[10], accQ[10];

#pragma unroll
	for (int x = 0; x < 10; x++)
		accA[x] = accQ[x] = 0.0f;
	for (uint32_t c = 0; c < K; c++) {
		float Gi[4], ki[4], qi[4], Gj[4], kj[4];

#pragma unroll
		for (int a = 0; a < 4; a++) {
			Gi[a] = G[(ti + 16 * a) * LD + c];
			ki[a] = kk[(ti + 16 * a) * LD + c];
			qi[a] = qq[(ti + 16 * a) * LD + c];
			Gj[a] = G[(tj + 16 * a) * LD + c];
			kj[a] = kk[(tj + 16 * a) * LD + c];
		}
#pragma unroll
		for (int a = 0; a < 4; a++)
#pragma unroll
			for (int b = 0; b <= a; b++) {
				float e = kda_exp(Gi[a] - Gj[b]);

				accA[a * (a + 1) / 2 + b] += ki[a] * kj[b] * e;
				accQ[a * (a + 1) / 2 + b] += qi[a] * kj[b] * e;
			}
	}
	float *Qo = out + KDA_OFF_Q(K, V);
#pragma unroll
	for (int a = 0; a < 4; a++)
#pragma unroll
		for (int b = 0; b < 4; b++) {
			uint32_t i = ti + 16 * a, j = tj + 16 * b;
			bool keep = b <= a && j <= i && i < n;

			Qo[i * KDA_C + j] = keep ? accQ[b <= a ? a * (a + 1) / 2 + b : 0] : 0.0f;
		}
	/* Every thread is done with G, kk and qq before they are rewritten. */
	__syncthreads();

	/* QG, KL, EL out; kk becomes the right-hand side beta e^G k of W. */
	const float *Gl = G + (n - 1) * LD;
	for (uint32_t x = tid; x < KDA_C * K; x += blockDim.x) {
		uint32_t i = x / K, c = x % K;
		float gi = G[i * LD + c], kv = kk[i * LD + c];
		bool in = i < n;

		out[KDA_OFF_QG(K) + x] = in ? kda_exp(gi) * qq[i * LD + c] : 0.0f;
		out[KDA_OFF_KL(K) + x] = in ? kda_exp(Gl[c] - gi) * kv : 0.0f;
		kk[i * LD + c] = in ? bet[i] * (kda_exp(gi) * kv) : 0.0f;
	}
	for (uint32_t c = tid; c < K; c += blockDim.x)
		out[KDA_OFF_EL(K) + c] = kda_exp(Gl[c]);
	__syncthreads();

	/* G is dead: A (times beta_i, strictly lower) takes its room,
	 * transposed: At[j][i] = A_ij. qq is free: the right-hand side beta v
	 * of U'. */
#pragma unroll
	for (int a = 0; a < 4; a++)
#pragma unroll
		for (int b = 0; b <= a; b++) {
			uint32_t i = ti + 16 * a, j = tj + 16 * b;

			if (j < i)
				At[j * KDA_AP + i] = bet[i] * accA[a * (a + 1) / 2 + b];
		}
	for (uint32_t x = tid * 4; x < KDA_C * V; x += blockDim.x * 4) {
		uint32_t i = x / V, j = x % V;
		float4 v4 = kda_f4(0.0f);
		float *Xr = qq + i * LD + j;

		if (i < n)
			v4 = kda_scale4(bet[i], *(const float4 *)(v + (((size_t)t0 + i) * H + h) * V + j));
		Xr[0] = v4.x, Xr[1] = v4.y, Xr[2] = v4.z, Xr[3] = v4.w;
	}
	__syncthreads();

	/*
	 * Forward substitution, a column of [W | U'] per thread:
	 * x_i = b_i - sum_{j<i} A_ij x_j, j ascending, as the CPU op. By
	 * blocks of 16 rows in registers: first the terms of the rows above
	 * the block (each x_j read once for the 16 rows, their A_ij four at a
	 * time from A^T), then those inside it. Rows past n have b = 0 and
	 * A = 0 (beta = 0): they stay zero.
	 */
	for (uint32_t col = tid; col < K + V; col += blockDim.x) {
		float *X = col < K ? kk + col : qq + (col - K);

#pragma unroll
		for (int I = 0; I < (int)KDA_C / 16; I++) {
			float acc[16];

#pragma unroll
			for (int r = 0; r < 16; r++)
				acc[r] = X[(16 * I + r) * LD];
			for (int j = 0; j < 16 * I; j++) {
				const float4 *a4 = (const float4 *)(At + j * KDA_AP + 16 * I);
				float xj = X[j * LD];

#pragma unroll
				for (int r4 = 0; r4 < 4; r4++) {
					float4 a = a4[r4];

					acc[4 * r4] -= a.x * xj;
					acc[4 * r4 + 1] -= a.y * xj;
					acc[4 * r4 + 2] -= a.z * xj;
					acc[4 * r4 + 3] -= a.w * xj;
				}
			}
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

		*(float4 *)(out + x) = make_float4(r[0], r[1], r[2], r[3]);
	}
	for (uint32_t x = tid * 4; x < KDA_C * V; x += blockDim.x * 4) {
		const float *r = qq + (x / V) * LD + x % V;

		*(float4 *)(out + KDA_OFF_U(K) + x) = make_float4(r[0], r[1], r[2], r[3]);
	}
}

/*
 * Pass 2 shared memory, in floats: S [K][KDA_SP]; X0, X1 [KDA_C][K + 4]
 * (W, QG, KL of a chunk, in turns); U0, U1 [KDA_C][KDA_SP] (U' then u, by
 * chunk parity); Q [KDA_C][KDA_C + 4]; EL0, EL1 [K]. Row strides are 4
 * floats past a multiple of 32 (the tensor cores' fragment loads hit 32
 * banks) and every tile starts 32-byte aligned.
 */
#define KDA_SP (KDA_TILE_V + 4)
#define KDA_QP (KDA_C + 4)

__host__ __device__ __forceinline__ size_t kda_state_smem(uint32_t K)
{
	return (size_t)K * KDA_SP + 2 * (size_t)KDA_C * (K + 4) + 2 * (size_t)KDA_C * KDA_SP +
	       (size_t)KDA_C * KDA_QP + 2 * (size_t)K;
}

/* Start copying rows x cols floats (cols % 4 == 0) from global (row
 * stride gs) to shared (stride ss), 16 bytes a copy; columns from lim on
 * are zeros, stored now. Completes at a later __pipeline_wait_prior. */
__device__ __forceinline__ void kda_copy_tile(float *dst, uint32_t ss, const float *src,
					      size_t gs, uint32_t rows, uint32_t cols,
					      uint32_t lim)
{
	uint32_t c4 = cols / 4;

	for (uint32_t x = threadIdx.x; x < rows * c4; x += blockDim.x) {
		uint32_t r = x / c4, c = (x % c4) * 4;

		if (c < lim)
			__pipeline_memcpy_async(dst + r * ss + c, src + r * gs + c, 16);
		else
			*(float4 *)(dst + r * ss + c) = kda_f4(0.0f);
	}
}

/*
 * 3xTF32 on a warp's 16x16 tile: acc += A B over kn steps of 8. A is read
 * with layout AL from a (leading dimension lda; astep floats from one step
 * of 8 to the next), B row major from b (ldb). Each operand x is split
 * into hi = tf32(x) and lo = tf32(x - hi), and acc += lo hi + hi lo + hi hi
 * (small products first; lo lo is below fp32 rounding). Only elementwise
 * fragment operations: no fragment layout is assumed.
 */
namespace kda_wmma = nvcuda::wmma;
typedef kda_wmma::fragment<kda_wmma::accumulator, 16, 16, 8, float> kda_acc_t;

template <typename AL>
__device__ __forceinline__ void kda_mma3(kda_acc_t &acc, const float *a, uint32_t lda,
					 uint32_t astep, const float *b, uint32_t ldb,
					 uint32_t kn)
{
	kda_wmma::fragment<kda_wmma::matrix_a, 16, 16, 8, kda_wmma::precision::tf32, AL> ah, al;
	kda_wmma::fragment<kda_wmma::matrix_b, 16, 16, 8, kda_wmma::precision::tf32,
			   kda_wmma::row_major>
		bh, bl;

	for (uint32_t s = 0; s < kn; s++) {
		kda_wmma::load_matrix_sync(ah, a + s * astep, lda);
		kda_wmma::load_matrix_sync(bh, b + 8 * s * ldb, ldb);
#pragma unroll
		for (int e = 0; e < ah.num_elements; e++) {
			float x = ah.x[e], hi = kda_wmma::__float_to_tf32(x);

			ah.x[e] = hi;
			al.x[e] = kda_wmma::__float_to_tf32(x - hi);
		}
#pragma unroll
		for (int e = 0; e < bh.num_elements; e++) {
			float x = bh.x[e], hi = kda_wmma::__float_to_tf32(x);

			bh.x[e] = hi;
			bl.x[e] = kda_wmma::__float_to_tf32(x - hi);
		}
		kda_wmma::mma_sync(acc, al, bh, acc);
		kda_wmma::mma_sync(acc, ah, bl, acc);
		kda_wmma::mma_sync(acc, ah, bh, acc);
	}
}

/*
 * Pass 2: grid (n_seg, H, ceil(V / 32)), block 256 (8 warps), after pass
 * 1. The block's state tile S [K][32] stays in shared memory across the
 * segment's chunks. Per chunk:
 *   U = U' - W S        (a)
 *   o = QG S + Q U      (c)
 *   S = EL * S + KL^T U (d)
 * The 64 x 32 products are 8 tiles of 16 x 16, warp w taking rows
 * 16 (w / 2) and columns 16 (w % 2); the K x 32 state is K / 16 x 2
 * tiles, warp w taking row tiles w, w + 8, ... Needs K % 16 == 0.
 *
 * The scratch arrives by asynchronous copies, each overlapping a product:
 * with chunk n's W in X[n & 1] and QG in the other buffer, KL replaces W
 * during (c); the next chunk's W, Q, U', EL land during (d) (W where QG
 * was); its QG lands during its (a), where KL was. Copy groups, oldest
 * first, each waited for (all but the newest one) just before its use.
 */
HACCEL_K void __launch_bounds__(256)
	haccel_kda_chunk_state(float *o, uint32_t H, uint32_t K, uint32_t V,
			       const uint32_t *seg_off, const uint32_t *seg_slot,
			       char *state_base, uint64_t slot_stride, const float *scratch)
{
	const uint32_t tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const uint32_t s = blockIdx.x, h = blockIdx.y, c0 = blockIdx.z * KDA_TILE_V;
	const uint32_t KP = K + 4, vl = min(KDA_TILE_V, V - c0); /* vl % 4 == 0 */
	const uint32_t t_beg = seg_off[s], t_end = seg_off[s + 1];
	const uint32_t mr = 16 * (warp >> 1), mc = 16 * (warp & 1);
	const size_t per = kda_chunk_floats(K, V);

	if (t_end <= t_beg)
		return;
	/* Buffer pairs as base + parity * size: arrays of pointers would
	 * live in local memory. */
	float *S = (float *)kda_smem, *X0 = S + K * KDA_SP, *U0 = X0 + 2 * KDA_C * KP;
	float *Qs = U0 + 2 * KDA_C * KDA_SP, *EL0 = Qs + KDA_C * KDA_QP;
	float *Sg = (float *)(state_base + seg_slot[s] * slot_stride) + (size_t)h * K * V + c0;
	const float *in = scratch + ((size_t)(t_beg / KDA_C + s) * H + h) * per;

	/* Prologue: S and chunk 0's W, U', EL, Q; then its QG. */
	kda_copy_tile(S, KDA_SP, Sg, V, K, KDA_TILE_V, vl);
	kda_copy_tile(X0, KP, in, K, KDA_C, K, K);
	kda_copy_tile(U0, KDA_SP, in + KDA_OFF_U(K) + c0, V, KDA_C, KDA_TILE_V, vl);
	kda_copy_tile(EL0, K, in + KDA_OFF_EL(K), K, 1, K, K);
	kda_copy_tile(Qs, KDA_QP, in + KDA_OFF_Q(K, V), KDA_C, KDA_C, KDA_C, KDA_C);
	__pipeline_commit();
	kda_copy_tile(X0 + KDA_C * KP, KP, in + KDA_OFF_QG(K), K, KDA_C, K, K);
	__pipeline_commit();

	for (uint32_t t0 = t_beg, ci = 0; t0 < t_end; t0 += KDA_C, ci++) {
		const uint32_t n = min(KDA_C, t_end - t0), b = ci & 1;
		const bool more = t0 + KDA_C < t_end;
		const float *nx = in + (size_t)H * per; /* the next chunk's slot */
		float *Xa = X0 + b * KDA_C * KP, *Xb = X0 + (b ^ 1) * KDA_C * KP;
		float *U = U0 + b * KDA_C * KDA_SP, *Un = U0 + (b ^ 1) * KDA_C * KDA_SP;
		float *EL = EL0 + b * K, *ELn = EL0 + (b ^ 1) * K;
		kda_acc_t acc;

		/* W, U', EL, Q (and S) are in; QG may still be on its way. */
		__pipeline_wait_prior(1);
		__syncthreads();

		/* (a) U = U' - W S: the accumulator starts at -U' and is
		 * negated back. A warp rewrites only its own tile of U, which
		 * no other warp reads before the barrier. */
		kda_wmma::load_matrix_sync(acc, U + mr * KDA_SP + mc, KDA_SP,
					   kda_wmma::mem_row_major);
#pragma unroll
		for (int e = 0; e < acc.num_elements; e++)
			acc.x[e] = -acc.x[e];
		kda_mma3<kda_wmma::row_major>(acc, Xa + mr * KP, KP, 8, S + mc, KDA_SP, K / 8);
#pragma unroll
		for (int e = 0; e < acc.num_elements; e++)
			acc.x[e] = -acc.x[e];
		kda_wmma::store_matrix_sync(U + mr * KDA_SP + mc, acc, KDA_SP,
					    kda_wmma::mem_row_major);
		__syncthreads();

		/* W is done with: KL takes its buffer while (c) runs. */
		kda_copy_tile(Xa, KP, in + KDA_OFF_KL(K), K, KDA_C, K, K);
		__pipeline_commit();
		__pipeline_wait_prior(1);
		__syncthreads();

		/* (c) o = QG S + Q U. Q is lower triangular, so the row tile
		 * at mr needs only the rows of U below mr + 16. */
		kda_wmma::fill_fragment(acc, 0.0f);
		kda_mma3<kda_wmma::row_major>(acc, Xb + mr * KP, KP, 8, S + mc, KDA_SP, K / 8);
		kda_mma3<kda_wmma::row_major>(acc, Qs + mr * KDA_QP, KDA_QP, 8, U + mc, KDA_SP,
					      (mr + 16) / 8);
		__syncthreads();

		/* o leaves through Q's room, a 16 x 20 tile per warp, so that
		 * only the chunk's n rows are written. Every read of S0 is
		 * done: S = EL * S. */
		float *ot = Qs + warp * 16 * 20;
		kda_wmma::store_matrix_sync(ot, acc, 20, kda_wmma::mem_row_major);
		__syncwarp();
		for (uint32_t x = lane; x < 16 * 4; x += 32) {
			uint32_t r = x / 4, c = mc + (x % 4) * 4;

			if (mr + r < n && c < vl)
				*(float4 *)(o + (((size_t)t0 + mr + r) * H + h) * V + c0 + c) =
					*(const float4 *)(ot + r * 20 + (x % 4) * 4);
		}
		for (uint32_t x = tid; x < K * KDA_TILE_V; x += blockDim.x)
			S[(x / KDA_TILE_V) * KDA_SP + x % KDA_TILE_V] *= EL[x / KDA_TILE_V];
		__pipeline_wait_prior(0);
		__syncthreads();

		/* The next chunk's W, Q, U', EL land during (d). */
		if (more) {
			kda_copy_tile(Xb, KP, nx, K, KDA_C, K, K);
			kda_copy_tile(Qs, KDA_QP, nx + KDA_OFF_Q(K, V), KDA_C, KDA_C, KDA_C, KDA_C);
			kda_copy_tile(Un, KDA_SP, nx + KDA_OFF_U(K) + c0, V, KDA_C, KDA_TILE_V,
				      vl);
			kda_copy_tile(ELn, K, nx + KDA_OFF_EL(K), K, 1, K, K);
		}
		__pipeline_commit();

		/* (d) S += KL^T U, by tiles; KL^T is KL read column major. */
		for (uint32_t rt = warp; rt < K / 16; rt += 8)
			for (uint32_t ct = 0; ct < 2; ct++) {
				float *St = S + rt * 16 * KDA_SP + ct * 16;

				kda_wmma::load_matrix_sync(acc, St, KDA_SP, kda_wmma::mem_row_major);
				kda_mma3<kda_wmma::col_major>(acc, Xa + rt * 16, KP, 8 * KP,
							      U + ct * 16, KDA_SP, KDA_C / 8);
				kda_wmma::store_matrix_sync(St, acc, KDA_SP, kda_wmma::mem_row_major);
			}
		__syncthreads();

		/* KL is done with: the next chunk's QG takes its buffer. */
		if (more)
			kda_copy_tile(Xa, KP, nx + KDA_OFF_QG(K), K, KDA_C, K, K);
		__pipeline_commit();
		in = nx;
	}
	for (uint32_t x = tid; x < K * (vl / 4); x += blockDim.x) {
		uint32_t r = x / (vl / 4), c = (x % (vl / 4)) * 4;

		*(float4 *)(Sg + (size_t)r * V + c) = *(const float4 *)(S + r * KDA_SP + c);
	}
}
