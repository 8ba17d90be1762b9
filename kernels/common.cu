// SPDX-License-Identifier: MIT
/*
 * Kernels every layer type uses: norms, embedding, SwiGLU, the
 * attention-residual mix, bf16 conversion of GEMM inputs, greedy sampling.
 * Each mirrors its CPU op in libhaccel/model/cpu/common.c; sums are block
 * reductions (a different order from the CPU's, hence the tolerances of
 * tests/gpu-common.c).
 */
#include "format.cuh"

/* One block per row: the row's y = x r w (w absent: 1) to put(d, y); rows
 * ldx floats apart. */
template <typename F>
__device__ __forceinline__ void rmsnorm_row_ld(const float *x, uint64_t ldx, const float *w,
					       uint32_t D, float eps, F put)
{
	__shared__ float sh[32];
	const float *xr = x + blockIdx.x * ldx;
	float ss = 0.0f;

	for (uint32_t d = threadIdx.x; d < D; d += blockDim.x)
		ss += xr[d] * xr[d];
	ss = block_sum(ss, sh);
	float r = rsqrtf(ss / (float)D + eps);
	for (uint32_t d = threadIdx.x; d < D; d += blockDim.x)
		put(d, xr[d] * r * (w ? w[d] : 1.0f));
}

template <typename F>
__device__ __forceinline__ void rmsnorm_row(const float *x, const float *w, uint32_t D, float eps,
					    F put)
{
	rmsnorm_row_ld(x, D, w, D, eps, put);
}

HACCEL_K void haccel_rmsnorm(float *y, const float *x, const float *w, uint32_t D, float eps)
{
	HAC_PDL();
	float *yr = y + (size_t)blockIdx.x * D;

	rmsnorm_row(x, w, D, eps, [&](uint32_t d, float v) { yr[d] = v; });
}

/*
 * A fused projection's row split in two, the first part normed: y[t] =
 * rmsnorm(x[t][0..D)), y2[t] = x[t][D..D + n2) (rows of x ldx floats):
 * DSA's KV latent and rope key from one kva row, the bits of two row
 * copies and haccel_rmsnorm.
 */
HACCEL_K void haccel_rmsnorm_split(float *y, const float *x, uint64_t ldx, const float *w,
				   uint32_t D, float eps, float *y2, uint32_t n2)
{
	HAC_PDL();
	float *yr = y + (size_t)blockIdx.x * D;
	const float *xr = x + blockIdx.x * ldx + D;
	float *y2r = y2 + (size_t)blockIdx.x * n2;

	for (uint32_t i = threadIdx.x; i < n2; i += blockDim.x)
		y2r[i] = xr[i];
	rmsnorm_row_ld(x, ldx, w, D, eps, [&](uint32_t d, float v) { yr[d] = v; });
}

/* The same norm, rounded to bf16 as haccel_to_bf16 rounds (the input of
 * a layer's GEMMs, with no fp32 copy written). */
HACCEL_K void haccel_rmsnorm_bf16(uint16_t *y, const float *x, const float *w, uint32_t D,
				  float eps)
{
	HAC_PDL();
	uint16_t *yr = y + (size_t)blockIdx.x * D;

	rmsnorm_row(x, w, D, eps, [&](uint32_t d, float v) { yr[d] = hac_bf16_from_float(v); });
}

/* The layer norm of the row xr[0..D) (w absent: 1, b absent: 0) to put(d,
 * y), by the whole block (the sums' order depends on its size). */
template <typename F>
__device__ __forceinline__ void layernorm_row(const float *xr, const float *w, const float *b,
					      uint32_t D, float eps, F put)
{
	__shared__ float sh[32];
	float s = 0.0f;

	for (uint32_t d = threadIdx.x; d < D; d += blockDim.x)
		s += xr[d];
	float mean = block_sum(s, sh) / (float)D;
	float v = 0.0f;
	for (uint32_t d = threadIdx.x; d < D; d += blockDim.x)
		v += (xr[d] - mean) * (xr[d] - mean);
	float r = rsqrtf(block_sum(v, sh) / (float)D + eps);
	for (uint32_t d = threadIdx.x; d < D; d += blockDim.x)
		put(d, (xr[d] - mean) * r * (w ? w[d] : 1.0f) + (b ? b[d] : 0.0f));
}

HACCEL_K void haccel_layernorm(float *y, const float *x, const float *w, const float *b,
			       uint32_t D, float eps)
{
	HAC_PDL();
	float *yr = y + (size_t)blockIdx.x * D;

	layernorm_row(x + (size_t)blockIdx.x * D, w, b, D, eps,
		      [&](uint32_t d, float v) { yr[d] = v; });
}

/* The table is bf16 (the stored embedding, shared with a tied lm_head). */
HACCEL_K void haccel_embed(float *y, const uint16_t *table, const int32_t *tok, uint32_t D,
			   uint32_t V)
{
	HAC_PDL();
	int32_t id = tok[blockIdx.x];
	float *yr = y + (size_t)blockIdx.x * D;

	for (uint32_t d = threadIdx.x; d < D; d += blockDim.x)
		yr[d] = id >= 0 && (uint32_t)id < V ?
				__uint_as_float((uint32_t)table[(size_t)id * D + d] << 16) : 0.0f;
}

__device__ __forceinline__ float swiglu1(float g, float u)
{
	return g / (1.0f + expf(-g)) * u;
}

HACCEL_K void haccel_swiglu(float *y, const float *gate, const float *up, uint64_t n)
{
	HAC_PDL();
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
	     i += (uint64_t)gridDim.x * blockDim.x)
		y[i] = swiglu1(gate[i], up[i]);
}

/* The same, rounded to bf16 as haccel_to_bf16 rounds (the down
 * projection's input). */
HACCEL_K void haccel_swiglu_bf16(uint16_t *y, const float *gate, const float *up, uint64_t n)
{
	HAC_PDL();
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
	     i += (uint64_t)gridDim.x * blockDim.x)
		y[i] = hac_bf16_from_float(swiglu1(gate[i], up[i]));
}

HACCEL_K void haccel_scale(float *y, const float *x, float s, uint64_t n)
{
	HAC_PDL();
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
	     i += (uint64_t)gridDim.x * blockDim.x)
		y[i] = x[i] * s;
}

HACCEL_K void haccel_to_bf16(uint16_t *y, const float *x, uint64_t n)
{
	HAC_PDL();
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
	     i += (uint64_t)gridDim.x * blockDim.x)
		y[i] = hac_bf16_from_float(x[i]);
}

/* haccel_to_bf16 of n values (rows of w), and the columns [c0, w) of each
 * row copied to y2 (rows of w - c0): DSA's queries for the absorbed GEMM
 * and their rope parts, in one launch. */
HACCEL_K void haccel_to_bf16_tail(uint16_t *y, const float *x, uint64_t n, uint32_t w,
				  uint32_t c0, float *y2)
{
	HAC_PDL();
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
	     i += (uint64_t)gridDim.x * blockDim.x) {
		float v = x[i];
		uint64_t r = i / w;
		uint32_t c = (uint32_t)(i - r * w);

		y[i] = hac_bf16_from_float(v);
		if (c >= c0)
			y2[r * (w - c0) + c - c0] = v;
	}
}

/* Grid (rows), block threads over n. */
HACCEL_K void haccel_copy_rows(float *dst, uint32_t dst_ld, const float *src, uint32_t src_ld,
			       uint32_t n)
{
	HAC_PDL();
	const float *s = src + (size_t)blockIdx.x * src_ld;
	float *d = dst + (size_t)blockIdx.x * dst_ld;

	for (uint32_t i = threadIdx.x; i < n; i += blockDim.x)
		d[i] = s[i];
}

/*
 * Attention-residual mix, one block per token, a thread a dim up to 1024
 * (haccel_attn_res_mix8 below: the same mix on a cluster of 8 blocks a
 * token, for a few tokens):
 * logits over the sources
 * (dot of the query with each rmsnormed source), softmax, weighted sum of
 * the raw sources. n_src <= 64. Sources go 4 at a time through the
 * strided partial sums and one round of block reductions (the loads of 4
 * sources in flight together, a quarter of the barriers); each sum keeps
 * the order of a block_sum of its own.
 */
#define ARM_B_G 4

/*
 * The logits of G sources from each thread's partial sums ss (x^2) and dot
 * (q x w): block_sum (kutil.cuh) of each in one round (warp sums, the
 * warps' through sh, 2 G x 32 floats), l = dot rsqrt(ss / D + eps) of the
 * first ng to a[] (thread 0), their max into *mx (every thread).
 */
template <int G>
__device__ __forceinline__ void arm_logits(float *ss, float *dot, float *sh, float *a,
					   uint32_t ng, uint32_t D, float eps, float *mx)
{
	uint32_t lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;

#pragma unroll
	for (int j = 0; j < G; j++) {
		ss[j] = warp_sum(ss[j]);
		dot[j] = warp_sum(dot[j]);
	}
	__syncthreads();
	if (lane == 0)
#pragma unroll
		for (int j = 0; j < G; j++) {
			sh[(2 * j) * 32 + w] = ss[j];
			sh[(2 * j + 1) * 32 + w] = dot[j];
		}
	__syncthreads();
	for (uint32_t j = 0; j < ng; j++) {
		float s2 = warp_sum(lane < nw ? sh[(2 * j) * 32 + lane] : 0.0f);
		float d2 = warp_sum(lane < nw ? sh[(2 * j + 1) * 32 + lane] : 0.0f);
		float l = d2 * rsqrtf(s2 / (float)D + eps);

		if (threadIdx.x == 0)
			a[j] = l;
		*mx = fmaxf(*mx, l);
	}
}

HACCEL_K void haccel_attn_res_mix(float *h, const float *src0, uint64_t src_stride,
				  uint32_t n_src, const float *query, const float *norm_w,
				  uint32_t T, uint32_t D, float eps, uint16_t *yb,
				  const float *out_w)
{
	HAC_PDL();
	__shared__ float sh[32 * 2 * ARM_B_G];
	__shared__ float a[64];
	size_t t = blockIdx.x;
	float mx = -INFINITY, sum = 0.0f;

	(void)T;
	for (uint32_t i0 = 0; i0 < n_src; i0 += ARM_B_G) {
		uint32_t ng = n_src - i0 < ARM_B_G ? n_src - i0 : ARM_B_G;
		float ss[ARM_B_G], dot[ARM_B_G];

#pragma unroll
		for (int j = 0; j < ARM_B_G; j++)
			ss[j] = dot[j] = 0.0f;
		for (uint32_t d = threadIdx.x; d < D; d += blockDim.x) {
			float qd = query[d], nd = norm_w[d];

#pragma unroll
			for (uint32_t j = 0; j < ARM_B_G; j++)
				if (j < ng) {
					float x = src0[(i0 + j) * src_stride + t * D + d];

					ss[j] += x * x;
					dot[j] += qd * x * nd;
				}
		}
		arm_logits<ARM_B_G>(ss, dot, sh, a + i0, ng, D, eps, &mx);
	}
	__syncthreads();
	for (uint32_t i = 0; i < n_src; i++)
		sum += expf(a[i] - mx);
	__syncthreads();
	/* the weights, once: a[i] := exp(a[i] - mx) / sum */
	for (uint32_t i = threadIdx.x; i < n_src; i += blockDim.x)
		a[i] = expf(a[i] - mx) / sum;
	__syncthreads();
	for (uint32_t d = threadIdx.x; d < D; d += blockDim.x) {
		float acc = 0.0f;

		for (uint32_t i = 0; i < n_src; i++)
			acc += a[i] * src0[i * src_stride + t * D + d];
		h[t * D + d] = acc;
	}
	/* Then the layer's input norm in bf16, as haccel_rmsnorm_bf16 with
	 * this block's threads (each reads back its own dims of h). */
	if (yb) {
		uint16_t *yr = yb + t * D;

		rmsnorm_row(h, out_w, D, eps,
			    [&](uint32_t d, float v) { yr[d] = hac_bf16_from_float(v); });
	}
}

/*
 * The same mix for up to ARM_R_SRC sources with each thread on at most
 * ARM_R_DPT dims (D <= ARM_R_DPT blockDim): the sources are read once,
 * into registers, and the weighted sum and the norm come from them (no
 * second read of the sources, no read back of h). The sums run in the
 * order of haccel_attn_res_mix's (per source over the thread's dims in
 * order, then block reductions), so the results are the same bits.
 */
#define ARM_R_SRC 8
#define ARM_R_DPT 2

HACCEL_K void __launch_bounds__(1024)
haccel_attn_res_mix_r(float *h, const float *src0, uint64_t src_stride, uint32_t n_src,
		      const float *query, const float *norm_w, uint32_t T, uint32_t D, float eps,
		      uint16_t *yb, const float *out_w)
{
	HAC_PDL();
	__shared__ float sh[32 * 2 * ARM_R_SRC];
	__shared__ float a[ARM_R_SRC];
	__shared__ float nsh[32];
	size_t t = blockIdx.x;
	float x[ARM_R_DPT][ARM_R_SRC], ss[ARM_R_SRC], dot[ARM_R_SRC], acc[ARM_R_DPT];
	float mx = -INFINITY, sum = 0.0f;

	(void)T;
#pragma unroll
	for (uint32_t k = 0; k < ARM_R_DPT; k++) {
		uint32_t d = threadIdx.x + k * blockDim.x;
		bool ok = d < D;

#pragma unroll
		for (uint32_t j = 0; j < ARM_R_SRC; j++)
			x[k][j] = ok && j < n_src ? src0[j * src_stride + t * D + d] : 0.0f;
	}
#pragma unroll
	for (uint32_t j = 0; j < ARM_R_SRC; j++)
		ss[j] = dot[j] = 0.0f;
#pragma unroll
	for (uint32_t k = 0; k < ARM_R_DPT; k++) {
		uint32_t d = threadIdx.x + k * blockDim.x;

		if (d >= D)
			continue;
		float qd = query[d], nd = norm_w[d];
#pragma unroll
		for (uint32_t j = 0; j < ARM_R_SRC; j++) {
			ss[j] += x[k][j] * x[k][j];
			dot[j] += qd * x[k][j] * nd;
		}
	}
	arm_logits<ARM_R_SRC>(ss, dot, sh, a, n_src, D, eps, &mx);
	__syncthreads();
	for (uint32_t i = 0; i < n_src; i++)
		sum += expf(a[i] - mx);
	__syncthreads();
	if (threadIdx.x < n_src)
		a[threadIdx.x] = expf(a[threadIdx.x] - mx) / sum;
	__syncthreads();
	float sq = 0.0f;
#pragma unroll
	for (uint32_t k = 0; k < ARM_R_DPT; k++) {
		uint32_t d = threadIdx.x + k * blockDim.x;

		acc[k] = 0.0f;
		if (d >= D)
			continue;
		for (uint32_t j = 0; j < n_src; j++)
			acc[k] += a[j] * x[k][j];
		h[t * D + d] = acc[k];
		sq += acc[k] * acc[k];
	}
	if (!yb)
		return;
	/* The norm as rmsnorm_row sums it: the thread's dims in order, then
	 * a block_sum. */
	float r = rsqrtf(block_sum(sq, nsh) / (float)D + eps);
	uint16_t *yr = yb + t * D;
#pragma unroll
	for (uint32_t k = 0; k < ARM_R_DPT; k++) {
		uint32_t d = threadIdx.x + k * blockDim.x;

		if (d < D)
			yr[d] = hac_bf16_from_float(acc[k] * r * (out_w ? out_w[d] : 1.0f));
	}
}

/*
 * Attention-residual mix on a cluster of ARM_S = 8 blocks per token
 * (ops_common.c uses it for a few tokens), block (t, s) on the dims [s
 * dsl, (s + 1) dsl) of D (dsl = ceil(D / ARM_S)), in tiles of ARM_THREADS
 * dims, a dim per thread. (1) Each thread loads its dim of every source
 * at once (n_src <= 64 loads in flight), and the block sums x^2 and q x w
 * per source over its dims (warp sums, 8 sources' interleaved, then the
 * warps in order) into its shared memory. (2) After a cluster barrier
 * every block adds the ARM_S partials in rank order, so all of them get
 * the same logits, and one warp forms the softmax. (3) The weighted sum of
 * the raw sources over the block's dims, from the values still in
 * registers when the slice is one tile (D <= ARM_S * ARM_THREADS), else
 * read again.
 */
#define ARM_S 8
#define ARM_THREADS 256
#define ARM_MAX_SRC 64
#define ARM_G 8

HACCEL_K void __cluster_dims__(1, ARM_S, 1) __launch_bounds__(ARM_THREADS)
haccel_attn_res_mix8(float *h, const float *src0, uint64_t src_stride, uint32_t n_src,
		     const float *query, const float *norm_w, uint32_t T, uint32_t D, float eps,
		     uint16_t *yb, const float *out_w)
{
	HAC_PDL();
	__shared__ float part[2 * ARM_MAX_SRC], tot[2 * ARM_MAX_SRC], a[ARM_MAX_SRC];
	__shared__ float nsq;
	__shared__ float wsh[ARM_THREADS / 32][2 * ARM_MAX_SRC];
	cooperative_groups::cluster_group cl = cooperative_groups::this_cluster();
	uint32_t lane = threadIdx.x & 31, w = threadIdx.x >> 5, tid = threadIdx.x;
	uint32_t dsl = (D + ARM_S - 1) / ARM_S, d0 = blockIdx.y * dsl;
	uint32_t d1 = d0 + dsl < D ? d0 + dsl : D, ntile = (dsl + ARM_THREADS - 1) / ARM_THREADS;
	const float *base = src0 + (size_t)blockIdx.x * D;
	float x[ARM_MAX_SRC];

	(void)T;
	for (uint32_t tile = 0; tile < ntile; tile++) {
		uint32_t d = d0 + tile * ARM_THREADS + tid;
		bool ok = d < d1;
		float qd = ok ? query[d] : 0.0f, nd = ok ? norm_w[d] : 0.0f;

#pragma unroll
		for (uint32_t j = 0; j < ARM_MAX_SRC; j++)
			x[j] = ok && j < n_src ? base[j * src_stride + d] : 0.0f;
		/* Warp sums of 8 sources at a time, their 16 butterflies
		 * interleaved (zeros past n_src). */
#pragma unroll
		for (uint32_t j0 = 0; j0 < ARM_MAX_SRC; j0 += ARM_G)
			if (j0 < n_src) {
				float v[2 * ARM_G];

#pragma unroll
				for (uint32_t j = 0; j < ARM_G; j++) {
					v[2 * j] = x[j0 + j] * x[j0 + j];
					v[2 * j + 1] = qd * x[j0 + j] * nd;
				}
#pragma unroll
				for (int o = 16; o > 0; o >>= 1)
#pragma unroll
					for (uint32_t i = 0; i < 2 * ARM_G; i++)
						v[i] += __shfl_xor_sync(0xffffffffu, v[i], o);
				if (lane < 2 * ARM_G)
#pragma unroll
					for (uint32_t i = 0; i < 2 * ARM_G; i++)
						if (i == lane)
							wsh[w][2 * j0 + i] = v[i];
			}
		__syncthreads();
		if (tid < 2 * n_src) {
			float v = 0.0f;

			for (uint32_t k = 0; k < ARM_THREADS / 32; k++)
				v += wsh[k][tid];
			part[tid] = tile ? part[tid] + v : v;
		}
		__syncthreads();
	}
	cl.sync();
	if (tid < 2 * n_src)
		tot[tid] = cluster_rank_sum<ARM_S>(part, tid);
	/* Every block has read every block's partials (none exits early). */
	cl.sync();
	if (w == 0) {
		float l0 = -INFINITY, l1 = -INFINITY, e0 = 0.0f, e1 = 0.0f;

		if (lane < n_src)
			l0 = tot[2 * lane + 1] * rsqrtf(tot[2 * lane] / (float)D + eps);
		if (lane + 32 < n_src)
			l1 = tot[2 * lane + 65] * rsqrtf(tot[2 * lane + 64] / (float)D + eps);
		float mx = warp_max(fmaxf(l0, l1));
		if (lane < n_src)
			e0 = expf(l0 - mx);
		if (lane + 32 < n_src)
			e1 = expf(l1 - mx);
		float sum = warp_sum(e0 + e1);
		if (lane < n_src)
			a[lane] = e0 / sum;
		if (lane + 32 < n_src)
			a[lane + 32] = e1 / sum;
	}
	__syncthreads();
	for (uint32_t tile = 0; tile < ntile; tile++) {
		uint32_t d = d0 + tile * ARM_THREADS + tid;
		float acc = 0.0f;

		if (d >= d1)
			continue;
		if (ntile > 1)
#pragma unroll
			for (uint32_t j = 0; j < ARM_MAX_SRC; j++)
				x[j] = j < n_src ? base[j * src_stride + d] : 0.0f;
#pragma unroll
		for (uint32_t j = 0; j < ARM_MAX_SRC; j++)
			if (j < n_src)
				acc += a[j] * x[j];
		h[(size_t)blockIdx.x * D + d] = acc;
	}
	if (!yb)
		return;
	/* (4) The layer's input norm in bf16: the sum of squares of the
	 * block's dims (a block_sum), the cluster's 8 in rank order, then
	 * each dim (read back by the thread that wrote it). */
	float ss = 0.0f, *hr = h + (size_t)blockIdx.x * D;

	for (uint32_t tile = 0; tile < ntile; tile++) {
		uint32_t d = d0 + tile * ARM_THREADS + tid;

		if (d < d1)
			ss += hr[d] * hr[d];
	}
	ss = block_sum(ss, wsh[0]);
	if (tid == 0)
		nsq = ss;
	cl.sync();
	float rn = rsqrtf(cluster_rank_sum<ARM_S>(&nsq, 0) / (float)D + eps);
	uint16_t *yr = yb + (size_t)blockIdx.x * D;

	for (uint32_t tile = 0; tile < ntile; tile++) {
		uint32_t d = d0 + tile * ARM_THREADS + tid;

		if (d < d1)
			yr[d] = hac_bf16_from_float(hr[d] * rn * (out_w ? out_w[d] : 1.0f));
	}
	/* Every block has read every block's sum (none exits early). */
	cl.sync();
}


/*
 * The residual mix for at most NS sources (NS = 8 or 16), a block a token,
 * each thread on CH chunks of 4 dims (dims 4 (tid + k blockDim) .. + 3, k
 * < CH) of every source, all loaded at once into registers (16-byte loads;
 * D % 4 == 0 and 16-byte aligned rows, ops_common.c checks and picks w8n
 * (8, 1), w8 (8, 2) or w16 (16, 1)). The sums of
 * x^2 and of (q w) x of all NS sources meet in one transposed butterfly
 * (arm_tsum: 2 NS - 1 shuffles for 2 NS sums, not 5 per sum), then through
 * shared memory in warp order, so the logits take one barrier; every warp
 * forms the softmax itself. The weighted sum of the sources comes from the
 * registers, and the layer's input norm takes a second barrier. Fixed
 * orders throughout: a replay gives the same bits. The sums run in
 * another order than the CPU's (and than rmsnorm_bf16's): within the
 * tolerances of docs/model.md.
 */
#define ARM_W_THREADS 512

/* v[0 .. N) of every lane to warp sums, N a power of two <= 32: lane l
 * ends with the sum of v[(l >> (5 - log2 N))], in v[0]. */
template <int HN, int O>
__device__ __forceinline__ void arm_tsum_step(float *v, uint32_t lane)
{
	bool up = lane & O;

#pragma unroll
	for (int i = 0; i < HN; i++) {
		float lo = v[i], hi = v[i + HN];
		float send = up ? lo : hi, keep = up ? hi : lo;

		v[i] = keep + __shfl_xor_sync(0xffffffffu, send, O);
	}
	if constexpr (HN > 1)
		arm_tsum_step<HN / 2, O / 2>(v, lane);
	else
#pragma unroll
		for (int o = O / 2; o >= 1; o >>= 1)
			v[0] += __shfl_xor_sync(0xffffffffu, v[0], o);
}

template <int N>
__device__ __forceinline__ void arm_tsum(float *v)
{
	arm_tsum_step<N / 2, 16>(v, threadIdx.x & 31);
}

template <int NS, int CH>
__device__ __forceinline__ void arm_wide(float *h, const float *src0, uint64_t src_stride,
					 uint32_t n_src, const float *query, const float *norm_w,
					 uint32_t D, float eps, uint16_t *yb, const float *out_w)
{
	const int N = 2 * NS, SH = NS == 16 ? 0 : 1;
	__shared__ float part[ARM_W_THREADS / 32][N];
	__shared__ float nsq[ARM_W_THREADS / 32];
	uint32_t tid = threadIdx.x, lane = tid & 31, w = tid >> 5, nw = blockDim.x >> 5;
	size_t t = blockIdx.x;
	float4 x[CH][NS];
	float v[N];

#pragma unroll
	for (int k = 0; k < CH; k++) {
		uint32_t d = 4 * (tid + k * blockDim.x);

#pragma unroll
		for (int j = 0; j < NS; j++)
			x[k][j] = d < D && (uint32_t)j < n_src ?
					  *(const float4 *)(src0 + j * src_stride + t * D + d) :
					  make_float4(0.0f, 0.0f, 0.0f, 0.0f);
	}
#pragma unroll
	for (int i = 0; i < N; i++)
		v[i] = 0.0f;
#pragma unroll
	for (int k = 0; k < CH; k++) {
		uint32_t d = 4 * (tid + k * blockDim.x);

		if (d >= D)
			continue;
		float4 q = *(const float4 *)(query + d), nd = *(const float4 *)(norm_w + d);
		float qw[4] = { q.x * nd.x, q.y * nd.y, q.z * nd.z, q.w * nd.w };
#pragma unroll
		for (int j = 0; j < NS; j++) {
			float e[4] = { x[k][j].x, x[k][j].y, x[k][j].z, x[k][j].w };

#pragma unroll
			for (int c = 0; c < 4; c++) {
				v[2 * j] += e[c] * e[c];
				v[2 * j + 1] += qw[c] * e[c];
			}
		}
	}
	/* sums of source j: x^2 at quantity 2 j, (q w) x at 2 j + 1 */
	arm_tsum<N>(v);
	if ((lane & ((1u << SH) - 1)) == 0)
		part[w][lane >> SH] = v[0];
	__syncthreads();
	float tot = 0.0f;

	if (lane < (uint32_t)N)
		for (uint32_t k = 0; k < nw; k++)
			tot += part[k][lane];
	float dj = __shfl_down_sync(0xffffffffu, tot, 1);
	bool valid = !(lane & 1) && lane / 2 < n_src && lane < (uint32_t)N;
	float l = valid ? dj * rsqrtf(tot / (float)D + eps) : -INFINITY;
	/* fmaxf skips a NaN logit, as the CPU's max does; exp spreads it. */
	float mx = warp_max(l);
	float e = valid ? expf(l - mx) : 0.0f;
	float sum = warp_sum(e);
	float aj = e / sum, a[NS];

	/* (every lane: the loop below skips the dims past D) */
#pragma unroll
	for (int j = 0; j < NS; j++)
		a[j] = __shfl_sync(0xffffffffu, aj, 2 * j);
	float sq = 0.0f;
	float4 hv[CH];

#pragma unroll
	for (int k = 0; k < CH; k++) {
		uint32_t d = 4 * (tid + k * blockDim.x);

		hv[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
		if (d >= D)
			continue;
#pragma unroll
		for (int j = 0; j < NS; j++)
			if ((uint32_t)j < n_src) {
				hv[k].x += a[j] * x[k][j].x;
				hv[k].y += a[j] * x[k][j].y;
				hv[k].z += a[j] * x[k][j].z;
				hv[k].w += a[j] * x[k][j].w;
			}
		*(float4 *)(h + t * D + d) = hv[k];
		sq += hv[k].x * hv[k].x + hv[k].y * hv[k].y + hv[k].z * hv[k].z +
		      hv[k].w * hv[k].w;
	}
	if (!yb)
		return;
	sq = warp_sum(sq);
	if (lane == 0)
		nsq[w] = sq;
	__syncthreads();
	float ts = 0.0f;

	for (uint32_t k = 0; k < nw; k++)
		ts += nsq[k];
	float r = rsqrtf(ts / (float)D + eps);
#pragma unroll
	for (int k = 0; k < CH; k++) {
		uint32_t d = 4 * (tid + k * blockDim.x);

		if (d >= D)
			continue;
		float4 ow = out_w ? *(const float4 *)(out_w + d) :
				    make_float4(1.0f, 1.0f, 1.0f, 1.0f);
		uint2 o;

		o.x = (uint32_t)hac_bf16_from_float(hv[k].x * r * ow.x) |
		      (uint32_t)hac_bf16_from_float(hv[k].y * r * ow.y) << 16;
		o.y = (uint32_t)hac_bf16_from_float(hv[k].z * r * ow.z) |
		      (uint32_t)hac_bf16_from_float(hv[k].w * r * ow.w) << 16;
		*(uint2 *)(yb + t * D + d) = o;
	}
}

#define ARM_WIDE(name, NS, CH)                                                                 \
	HACCEL_K void __launch_bounds__(ARM_W_THREADS)                                         \
		name(float *h, const float *src0, uint64_t src_stride, uint32_t n_src,        \
		     const float *query, const float *norm_w, uint32_t T, uint32_t D, float eps, \
		     uint16_t *yb, const float *out_w)                                         \
	{                                                                                      \
		HAC_PDL();                                                                     \
		(void)T;                                                                       \
		arm_wide<NS, CH>(h, src0, src_stride, n_src, query, norm_w, D, eps, yb, out_w); \
	}

ARM_WIDE(haccel_attn_res_mix_w8, 8, 2)
ARM_WIDE(haccel_attn_res_mix_w8n, 8, 1)
ARM_WIDE(haccel_attn_res_mix_w16, 16, 1)

HACCEL_K void haccel_add(float *y, const float *a, const float *b, uint64_t n)
{
	HAC_PDL();
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
	     i += (uint64_t)gridDim.x * blockDim.x)
		y[i] = a[i] + b[i];
}

/* dst[r] = src[rows[r]], rows of D; grid (R). */
HACCEL_K void haccel_gather_rows(float *dst, const float *src, const uint32_t *rows, uint32_t D)
{
	HAC_PDL();
	const float *s = src + (size_t)rows[blockIdx.x] * D;
	float *d = dst + (size_t)blockIdx.x * D;

	for (uint32_t i = threadIdx.x; i < D; i += blockDim.x)
		d[i] = s[i];
}

/* Greedy sampling, one block per row: the largest value, ties to the
 * smaller index, NaN below every number. */
__device__ __forceinline__ bool am_better(float v, uint32_t i, float bv, uint32_t bi)
{
	if (isnan(v))
		return false;
	if (isnan(bv))
		return true;
	return v > bv || (v == bv && i < bi);
}

HACCEL_K void haccel_argmax(int32_t *out, const float *logits, uint32_t V)
{
	HAC_PDL();
	__shared__ float sv[32];
	__shared__ uint32_t si[32];
	const float *r = logits + (size_t)blockIdx.x * V;
	float bv = __int_as_float(0x7fc00000);
	uint32_t bi = 0xffffffffu;

	for (uint32_t i = threadIdx.x; i < V; i += blockDim.x)
		if (bi == 0xffffffffu || am_better(r[i], i, bv, bi)) {
			bv = r[i];
			bi = i;
		}
	for (int o = 16; o > 0; o >>= 1) {
		float v = __shfl_xor_sync(0xffffffffu, bv, o);
		uint32_t i = __shfl_xor_sync(0xffffffffu, bi, o);
		if (i != 0xffffffffu && (bi == 0xffffffffu || am_better(v, i, bv, bi))) {
			bv = v;
			bi = i;
		}
	}
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
	if (lane == 0) {
		sv[w] = bv;
		si[w] = bi;
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		for (int j = 1; j < nw; j++)
			if (si[j] != 0xffffffffu && (si[0] == 0xffffffffu ||
						     am_better(sv[j], si[j], sv[0], si[0]))) {
				sv[0] = sv[j];
				si[0] = si[j];
			}
		out[blockIdx.x] = (int32_t)si[0];
	}
}

/*
 * Weight conversion at load: n values from src (0: f32, 1: bf16, 2: f16,
 * read byte by byte, so any alignment works) to dst (0: f32, 1: bf16).
 * f16 widens exactly; f32 -> bf16 rounds to nearest even (NaN kept).
 */
__device__ float load_any(const uint8_t *p, int type)
{
	if (type == 0)
		return __uint_as_float((uint32_t)p[0] | (uint32_t)p[1] << 8 |
				       (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
	uint16_t h = (uint16_t)(p[0] | p[1] << 8);
	if (type == 1)
		return __uint_as_float((uint32_t)h << 16);
	return __half2float(__ushort_as_half(h));
}

HACCEL_K void haccel_convert(void *dst, int dst_type, const uint8_t *src, int src_type, uint64_t n)
{
	HAC_PDL();
	int sz = src_type == 0 ? 4 : 2;

	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
	     i += (uint64_t)gridDim.x * blockDim.x) {
		float v = load_any(src + i * sz, src_type);

		if (dst_type == 0) {
			((float *)dst)[i] = v;
		} else {
			((uint16_t *)dst)[i] = hac_bf16_from_float(v);
		}
	}
}

/* dst[upd[1 + 2i]] = upd[2 + 2i] for i < upd[0]: the block-table entries a
 * step changed (written by the host into the step's inputs). */
HACCEL_K void haccel_scatter_u32(uint32_t *dst, const uint32_t *upd)
{
	HAC_PDL();
	uint32_t n = upd[0];

	for (uint32_t i = threadIdx.x; i < n; i += blockDim.x)
		dst[upd[1 + 2 * i]] = upd[2 + 2 * i];
}
