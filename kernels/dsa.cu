// SPDX-License-Identifier: MIT
/*
 * DSA kernels (DeepSeek sparse attention): rotary embedding, the Hadamard
 * rotation, the KV and index-key cache writers, the fused lightning indexer
 * with its top-k, and sparse MLA decode. Each mirrors its CPU op in
 * libhaccel/model/cpu/dsa.c; docs/model.md, "CUDA kernels: DSA", states the
 * decomposition and the tolerances, tests/gpu-dsa.c checks them.
 *
 * Cache records (kernels/haccel_format.h, docs/model.md "Formats"):
 *  - index key, 132 bytes: 128 E4M3 codes, then 4 E8M0 exponents, one per
 *    block of 32 codes;
 *  - KV, 528 + 2 dr bytes: 512 E4M3 codes in 4 tiles of 128, 4 fp32 tile
 *    scales (powers of two), dr bf16 rope values.
 * Position p of a sequence lives in slot bt[p / page_tokens] * page_tokens
 * + p % page_tokens of a region, bt the sequence's block-table row.
 *
 * The writers and the conversions (format.cuh) are bit-exact; the indexer
 * and sparse MLA use fp16 tensor-core MMAs (m16n8k16, fp32 accumulators)
 * on operands that hold the quantized values exactly, so they differ from
 * the CPU by the order of the sums (and, for sparse MLA, by the fp16
 * rounding of the queries and the probabilities).
 */
#include "format.cuh"
#include "haccel_format.h"

extern __shared__ __align__(16) uint8_t dsa_smem[];

__device__ __forceinline__ uint32_t dsa_minu(uint32_t a, uint32_t b)
{
	return a < b ? a : b;
}

__device__ __forceinline__ int dsa_maxi(int a, int b)
{
	return a > b ? a : b;
}

__device__ __forceinline__ int dsa_mini(int a, int b)
{
	return a < b ? a : b;
}

__device__ __forceinline__ uint32_t dsa_maxu(uint32_t a, uint32_t b)
{
	return a > b ? a : b;
}

__device__ __forceinline__ uint32_t dsa_ld32(const uint8_t *p)
{
	return *(const uint32_t *)p;
}

/* 2^e as fp32, saturating to 0 and inf outside the fp32 range. */
__device__ __forceinline__ float dsa_pow2c(int e)
{
	if (e > 127)
		return hac_u2f(0x7f800000u);
	if (e < -149)
		return 0.0f;
	return hac_pow2f(e);
}

/* fp16 2^e (e <= 15) in both halves of a word: 0 below 2^-24. */
__device__ __forceinline__ uint32_t dsa_h2pow2(int e)
{
	uint32_t h = e >= -14 ? (uint32_t)(e + 15) << 10 : e >= -24 ? 1u << (e + 24) : 0;

	return h | h << 16;
}

/* a[i] for a runtime i without indexing a register array (that would put
 * the array in local memory). */
__device__ __forceinline__ int dsa_pick4(const int *a, uint32_t i)
{
	return i == 0 ? a[0] : i == 1 ? a[1] : i == 2 ? a[2] : a[3];
}

__device__ __forceinline__ int dsa_warp_max_i(int v)
{
	for (int o = 16; o > 0; o >>= 1)
		v = dsa_maxi(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

/* ------------------------------------------------------------------------ */
/* PTX wrappers (sm_90)                                                     */

/* 16 bytes global -> shared past L1; n < 16 zero-fills the rest, and n = 0
 * reads nothing. */
__device__ __forceinline__ void dsa_cp16(void *dst, const void *src, uint32_t n)
{
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
		     ::"r"(hac_saddr(dst)), "l"(src), "r"(n) : "memory");
}

__device__ __forceinline__ void dsa_cp4(void *dst, const void *src, uint32_t n)
{
	asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
		     ::"r"(hac_saddr(dst)), "l"(src), "r"(n) : "memory");
}

__device__ __forceinline__ void dsa_cp_commit(void)
{
	asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* Wait until at most N of this thread's groups are in flight. */
template <int N> __device__ __forceinline__ void dsa_cp_wait(void)
{
	asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* An mbarrier of count arrivals (then fence it for the copy engine). */
__device__ __forceinline__ void dsa_mbar_init(uint64_t *bar, uint32_t count)
{
	asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n"
		     "fence.mbarrier_init.release.cluster;\n" ::"r"(hac_saddr(bar)), "r"(count)
		     : "memory");
}

/* Arrive on bar expecting bytes, and copy bytes (a multiple of 16, both
 * addresses 16-byte aligned) from global src to shared dst by the copy
 * engine, completing on bar. */
__device__ __forceinline__ void dsa_bulk_copy(void *dst, const void *src, uint32_t bytes,
					      uint64_t *bar)
{
	asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
		     "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
		     " [%2], [%3], %1, [%0];\n" ::"r"(hac_saddr(bar)), "r"(bytes),
		     "r"(hac_saddr(dst)), "l"(src) : "memory");
}

/* Wait for the phase of bar with this parity to complete. */
__device__ __forceinline__ void dsa_mbar_wait(uint64_t *bar, uint32_t parity)
{
	uint32_t done = 0;

	while (!done)
		asm volatile("{\n.reg .pred p;\n"
			     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
			     "selp.u32 %0, 1, 0, p;\n}\n"
			     : "=r"(done) : "r"(hac_saddr(bar)), "r"(parity) : "memory");
}

/* Two E4M3 codes, the low byte first, to two fp16 (exact: every E4M3
 * value is an fp16 normal). */
__device__ __forceinline__ uint32_t dsa_e4m3x2(uint32_t v)
{
	uint32_t r;

	asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(r) : "h"((uint16_t)v));
	return r;
}

/* The same for the high two bytes of v (the half taken in place, with no
 * shift). */
__device__ __forceinline__ uint32_t dsa_e4m3x2_hi(uint32_t v)
{
	uint32_t r;

	asm("{\n.reg .b16 lo, hi;\nmov.b32 {lo, hi}, %1;\ncvt.rn.f16x2.e4m3x2 %0, hi;\n}\n"
	    : "=r"(r) : "r"(v));
	return r;
}

__device__ __forceinline__ uint32_t dsa_hmul2(uint32_t a, uint32_t b)
{
	uint32_t r;

	asm("mul.rn.f16x2 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(b));
	return r;
}

__device__ __forceinline__ uint16_t dsa_f2h(float x)
{
	uint16_t r;

	asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(r) : "f"(x));
	return r;
}

__device__ __forceinline__ float dsa_h2f(uint16_t h)
{
	float r;

	asm("cvt.f32.f16 %0, %1;\n" : "=f"(r) : "h"(h));
	return r;
}

/* d += a b for one m16n8k16 tile: a row-major 16x16, b 16x8, d fp32. */
__device__ __forceinline__ void dsa_mma_f16(float *d, const uint32_t *a, const uint32_t *b)
{
	asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
	    "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
	    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
	    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void dsa_ldsm4(uint32_t *r, const void *p)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(hac_saddr(p)));
}

__device__ __forceinline__ void dsa_ldsm2(uint32_t *r, const void *p)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
		     : "=r"(r[0]), "=r"(r[1]) : "r"(hac_saddr(p)));
}

__device__ __forceinline__ void dsa_ldsm4t(uint32_t *r, const void *p)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(hac_saddr(p)));
}

/* d (64 x 32, fp32) += A B, fp16: A 64 x 16 in registers (the fragment
 * of mma.m16n8k16's A, a warp 16 rows), B 16 x 32 K-major in shared
 * memory. */
__device__ __forceinline__ void dsa_wg_n32r(float *d, const uint32_t *a, uint64_t b)
{
	asm volatile("wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 "
		     "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, "
		     "{%16,%17,%18,%19}, %20, 1, 1, 1, 0;\n"
		     : HAC_WG_D8(d), HAC_WG_D8((d + 8)) : HAC_WG_A4(a), "l"(b));
}

/* The same, 64 x 16 (N = 16). */
__device__ __forceinline__ void dsa_wg_n16r(float *d, const uint32_t *a, uint64_t b)
{
	asm volatile("wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 "
		     "{%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9,%10,%11}, %12, 1, 1, 1, 0;\n"
		     : HAC_WG_D8(d) : HAC_WG_A4(a), "l"(b));
}

/* d (64 x 32, fp32) += A B, bf16: A 64 x 16 and B 16 x 32, both K-major
 * in shared memory. */
__device__ __forceinline__ void dsa_wg_n32_bf16(float *d, uint64_t a, uint64_t b)
{
	asm volatile("wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
		     "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, "
		     "%16, %17, 1, 1, 1, 0, 0;\n"
		     : HAC_WG_D8(d), HAC_WG_D8((d + 8)) : "l"(a), "l"(b));
}

/* 2^x (ex2.approx: relative error about 2^-22; 2^-inf = 0, NaN stays). */
__device__ __forceinline__ float dsa_ex2(float x)
{
	float r;

	asm("ex2.approx.f32 %0, %1;\n" : "=f"(r) : "f"(x));
	return r;
}

/* Bytes (b0, b1, b2, b3) of v to (b0, b2, b1, b3). */
__device__ __forceinline__ uint32_t dsa_prmt3120(uint32_t v)
{
	uint32_t r;

	asm("prmt.b32 %0, %1, 0, 0x3120;\n" : "=r"(r) : "r"(v));
	return r;
}

/* The larger of each 16-bit half of a and b, unsigned (sm_90). */
__device__ __forceinline__ uint32_t dsa_max_u16x2(uint32_t a, uint32_t b)
{
	uint32_t r;

	asm("max.u16x2 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(b));
	return r;
}

/* end of PTX wrappers */

/* ------------------------------------------------------------------------ */
/* Rotary embedding                                                         */

/*
 * One block per token. The angles follow the CPU's fp32 steps (2i/dim one
 * division, the power, the reciprocal, the product with the position): a
 * one-ulp difference in inv_freq would turn into pos ulps of angle, so the
 * power is taken in double and rounded once, which gives the correctly
 * rounded powf that glibc returns. cos and sin are taken in double too;
 * the rotation is not contracted into FMAs, as on the CPU.
 */
__device__ __forceinline__ void dsa_rope_angles(float *cs, uint32_t dim, uint32_t pos,
						float theta)
{
	for (uint32_t i = threadIdx.x; i < dim / 2; i += blockDim.x) {
		float ex = __fdiv_rn((float)(2 * i), (float)dim);
		float inv = __fdiv_rn(1.0f, (float)pow((double)theta, (double)ex));
		float ang = __fmul_rn((float)pos, inv);
		double s, c;

		sincos((double)ang, &s, &c);
		cs[2 * i] = (float)c;
		cs[2 * i + 1] = (float)s;
	}
}

/* The entries (ia, ib) of rotated pair i of a vector (layout 1:
 * interleaved, else halves of dim). */
__device__ __forceinline__ void dsa_rope_pair(uint32_t i, uint32_t dim, int layout, uint32_t *ia,
					      uint32_t *ib)
{
	*ia = layout ? 2 * i : i;
	*ib = layout ? 2 * i + 1 : i + dim / 2;
}

/* Entry ia (first) or ib of a rotated pair (a, b) = (x[ia], x[ib]). */
__device__ __forceinline__ float dsa_rope_one(float a, float b, float c, float s, bool first)
{
	return first ? __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s)) :
		       __fadd_rn(__fmul_rn(a, s), __fmul_rn(b, c));
}

/* n_vec vectors of one token from xt, vec_stride floats apart. */
__device__ __forceinline__ void dsa_rope_rotate(float *xt, uint32_t n_vec, uint64_t vec_stride,
						uint32_t dim, int layout, const float *cs)
{
	uint32_t half = dim / 2;

	for (uint32_t k = threadIdx.x; k < n_vec * half; k += blockDim.x) {
		uint32_t v = k / half, i = k - v * half, ia, ib;

		dsa_rope_pair(i, dim, layout, &ia, &ib);
		float *xv = xt + v * vec_stride;
		float a = xv[ia], b = xv[ib], c = cs[2 * i], s = cs[2 * i + 1];

		xv[ia] = dsa_rope_one(a, b, c, s, true);
		xv[ib] = dsa_rope_one(a, b, c, s, false);
	}
}

/* Two sets of vectors at the same positions (attention's queries and its
 * key: one launch, the angles once; n_vec2 = 0 for one set). */
HACCEL_K void haccel_rope2(float *x, uint32_t n_vec, uint64_t tok_stride, uint64_t vec_stride,
			   float *x2, uint32_t n_vec2, uint64_t tok_stride2, uint64_t vec_stride2,
			   uint32_t dim, const uint32_t *pos, float theta, int layout)
{
	HAC_PDL();
	float *cs = (float *)dsa_smem;
	uint32_t t = blockIdx.x;

	dsa_rope_angles(cs, dim, pos[t], theta);
	__syncthreads();
	dsa_rope_rotate(x + t * tok_stride, n_vec, vec_stride, dim, layout, cs);
	dsa_rope_rotate(x2 + t * tok_stride2, n_vec2, vec_stride2, dim, layout, cs);
}

/* ------------------------------------------------------------------------ */
/* Hadamard                                                                 */

/*
 * One warp per vector, lane l holding x[l], x[32 + l], x[64 + l], x[96 +
 * l] (dsa_hadamard_reg: r[k] = x[32 k + l] in registers): stages 1..16
 * pair lanes (shuffles), stages 32 and 64 pair registers.
 * Each stage computes a + b and a - b from the same a and b as the CPU's
 * butterfly, so the result is the same bits.
 */
__device__ __forceinline__ void dsa_hadamard_reg(float *r)
{
	uint32_t lane = threadIdx.x & 31;
	float a, b;

	for (uint32_t h = 1; h < 32; h <<= 1)
		for (int k = 0; k < 4; k++) {
			float p = __shfl_xor_sync(0xffffffffu, r[k], h);

			r[k] = lane & h ? __fsub_rn(p, r[k]) : __fadd_rn(r[k], p);
		}
	for (int k = 0; k < 4; k += 2) {
		a = r[k], b = r[k + 1];
		r[k] = __fadd_rn(a, b);
		r[k + 1] = __fsub_rn(a, b);
	}
	for (int k = 0; k < 2; k++) {
		a = r[k], b = r[k + 2];
		r[k] = __fadd_rn(a, b);
		r[k + 2] = __fsub_rn(a, b);
	}
	for (int k = 0; k < 4; k++)
		r[k] = __fmul_rn(r[k], 0x1.6a09e6p-4f);
}

__device__ __forceinline__ void dsa_hadamard_warp(float *xv)
{
	uint32_t lane = threadIdx.x & 31;
	float r[4];

	for (int k = 0; k < 4; k++)
		r[k] = xv[32 * k + lane];
	dsa_hadamard_reg(r);
	for (int k = 0; k < 4; k++)
		xv[32 * k + lane] = r[k];
}

HACCEL_K void haccel_hadamard128(float *x, uint32_t n)
{
	HAC_PDL();
	uint32_t v = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);

	if (v < n)
		dsa_hadamard_warp(x + (size_t)v * 128);
}

/*
 * Token t's n_vec vectors of 128 (vec_stride floats apart from x + t
 * tok_stride), a block of 256 threads a token: the rope of their first dim
 * entries (dim = 0: none), then the Hadamard transform of each, a warp a
 * vector: the bits of haccel_rope2 (one set) and haccel_hadamard128 in
 * one launch (the indexer's queries).
 */
HACCEL_K void haccel_rope_hadamard(float *x, uint32_t n_vec, uint64_t tok_stride,
				   uint64_t vec_stride, uint32_t dim, const uint32_t *pos,
				   float theta, int layout)
{
	HAC_PDL();
	float *cs = (float *)dsa_smem, *xt = x + blockIdx.x * tok_stride;

	if (dim) {
		dsa_rope_angles(cs, dim, pos[blockIdx.x], theta);
		__syncthreads();
		dsa_rope_rotate(xt, n_vec, vec_stride, dim, layout, cs);
		/* the rotated values, written by other threads, are visible
		 * to the block after the barrier */
		__syncthreads();
	}
	for (uint32_t v = threadIdx.x >> 5; v < n_vec; v += blockDim.x >> 5)
		dsa_hadamard_warp(xt + v * vec_stride);
}

/* ------------------------------------------------------------------------ */
/* Cache writers                                                            */

/*
 * One block of 128 threads per token, warp w quantizing latent tile w (4
 * values a lane): the tile's largest finite magnitude (a max, exact in any
 * order), its exponent, the codes. Bytes are stored one at a time: a
 * record of 528 + 2 dr bytes need not be 4-byte aligned.
 */
HACCEL_K void haccel_dsa_kv_write(uint8_t *region, const int64_t *slots, const float *latent,
				  const float *k_pe, uint32_t dr)
{
	HAC_PDL();
	uint32_t t = blockIdx.x, lane = threadIdx.x & 31, w = threadIdx.x >> 5;
	int64_t slot = slots[t];
	float v[4], m = 0.0f;

	if (slot < 0)
		return;
	uint8_t *rec = region + (size_t)slot * (528 + 2 * dr);
	const float *x = latent + (size_t)t * HACCEL_KV_LATENT_DIM + w * 128 + 4 * lane;
	for (int i = 0; i < 4; i++) {
		v[i] = x[i];
		m = fmaxf(m, hac_abs_finite(v[i]));
	}
	int e = hac_scale_exp(warp_max(m));
	for (int i = 0; i < 4; i++)
		rec[w * 128 + 4 * lane + i] = hac_fp8_scaled(v[i], e);
	if (lane < 4)
		rec[512 + 4 * w + lane] = (uint8_t)(hac_f2u(hac_pow2f(e)) >> (8 * lane));
	for (uint32_t i = threadIdx.x; i < dr; i += blockDim.x) {
		uint16_t h = hac_bf16_from_float(k_pe[(size_t)t * dr + i]);

		rec[528 + 2 * i] = (uint8_t)h;
		rec[528 + 2 * i + 1] = (uint8_t)(h >> 8);
	}
}

/* The index key x[0..128) into its record rec, by a warp: 4 values a
 * lane; an MX block is 8 lanes. */
__device__ __forceinline__ void dsa_index_k_store(uint8_t *rec, const float *xk)
{
	uint32_t lane = threadIdx.x & 31;
	float v[4], m = 0.0f;
	const float *x = xk + 4 * lane;

	for (int i = 0; i < 4; i++) {
		v[i] = x[i];
		m = fmaxf(m, hac_abs_finite(v[i]));
	}
	for (int o = 1; o < 8; o <<= 1)
		m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
	int e = hac_scale_exp(m);
	for (int i = 0; i < 4; i++)
		rec[4 * lane + i] = hac_fp8_scaled(v[i], e);
	if ((lane & 7) == 0)
		rec[128 + lane / 8] = (uint8_t)(e + 127);
}

/* One warp per token. */
HACCEL_K void haccel_dsa_index_k_write(uint8_t *region, const int64_t *slots, const float *ik,
				       uint32_t T)
{
	HAC_PDL();
	uint32_t t = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);

	if (t < T && slots[t] >= 0)
		dsa_index_k_store(region + (size_t)slots[t] * HACCEL_INDEX_K_TOKEN_BYTES,
				  ik + (size_t)t * HACCEL_INDEX_K_DIM);
}

/*
 * The index keys of T tokens from their projections x[T][128], a block of
 * 128 threads a token: the layer norm (w, b), the rope of the first dr
 * dims (dr = 0: none), the Hadamard transform, and the MXFP8 record at
 * slots[t] (none where negative): the bits of haccel_layernorm (its
 * launch for 128 values has 128 threads), haccel_rope2 (one set),
 * haccel_hadamard128 and haccel_dsa_index_k_write in turn, in one launch
 * and with no fp32 key written. Also the head weights hw[t][0..IH) times
 * s, in place (haccel_scale's bits).
 */
HACCEL_K void __launch_bounds__(128)
haccel_dsa_index_k_fused(uint8_t *region, const int64_t *slots, const float *x, const float *w,
			 const float *b, float eps, uint32_t dr, const uint32_t *pos,
			 float theta, int layout, float *hw, uint32_t IH, float s)
{
	HAC_PDL();
	__shared__ float row[HACCEL_INDEX_K_DIM], cs[HACCEL_INDEX_K_DIM];
	uint32_t t = blockIdx.x;

	for (uint32_t i = threadIdx.x; i < IH; i += blockDim.x)
		hw[(size_t)t * IH + i] = hw[(size_t)t * IH + i] * s;
	layernorm_row(x + (size_t)t * HACCEL_INDEX_K_DIM, w, b, HACCEL_INDEX_K_DIM, eps,
		      [&](uint32_t d, float v) { row[d] = v; });
	if (dr)
		dsa_rope_angles(cs, dr, pos[t], theta);
	__syncthreads();
	if (dr) {
		dsa_rope_rotate(row, 1, 0, dr, layout, cs);
		__syncthreads();
	}
	if (threadIdx.x >= 32)
		return;
	dsa_hadamard_warp(row);
	__syncwarp();
	if (slots[t] >= 0)
		dsa_index_k_store(region + (size_t)slots[t] * HACCEL_INDEX_K_TOKEN_BYTES, row);
}

/* ------------------------------------------------------------------------ */
/* Top-k selection (block-wide)                                             */

/*
 * Scores become keys whose unsigned order is the selection order: NaN 0,
 * below every number; -0 as +0 (they tie); negative numbers inverted so
 * that larger is greater. Ties on the key go to the smaller position.
 */
__device__ __forceinline__ uint32_t dsa_score_key(float s)
{
	uint32_t u = hac_f2u(s);

	if (s != s)
		return 0;
	if (s == 0.0f)
		u = 0;
	return u & 0x80000000u ? ~u : u | 0x80000000u;
}

struct dsa_sel_shared {
	uint32_t digit, remain, done, pad;
	uint32_t cnt_gt[32], cnt_eq[32];
};

/*
 * The k best of keys[0..N) as dsa_kth found them (every key with (key &
 * mask) > prefix, and the first need with (key & mask) == prefix), in
 * input order: emit(o, i) for the o-th of them, input index i. Each warp
 * takes a contiguous range and counts with ballots. Every thread of the
 * block (at most 32 warps) calls it; sh's counts may be reused after
 * the next __syncthreads.
 */
template <typename F>
__device__ __forceinline__ void dsa_emit(const uint32_t *keys, uint32_t N, uint32_t prefix,
					 uint32_t mask, uint32_t need, struct dsa_sel_shared *sh,
					 F emit)
{
	uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarp = blockDim.x >> 5;
	uint32_t R = ((N + nwarp - 1) / nwarp + 31) & ~31u;
	uint32_t r0 = warp * R, r1 = dsa_minu(N, r0 + R), gt = 0, eq = 0;
	uint32_t lt = (1u << lane) - 1;

	for (uint32_t base = r0; base < r1; base += 32) {
		uint32_t i = base + lane, key = i < r1 ? keys[i] & mask : 0;

		gt += __popc(__ballot_sync(0xffffffffu, i < r1 && key > prefix));
		eq += __popc(__ballot_sync(0xffffffffu, i < r1 && key == prefix));
	}
	if (lane == 0) {
		sh->cnt_gt[warp] = gt;
		sh->cnt_eq[warp] = eq;
	}
	__syncthreads();
	/* The warps before this one: their keys above the k-th's bin, and
	 * of the tied ones the first need (so min(their ties, need)). */
	uint32_t eq_before = lane < warp ? sh->cnt_eq[lane] : 0;
	uint32_t out = lane < warp ? sh->cnt_gt[lane] : 0;

	for (int o = 16; o > 0; o >>= 1) {
		eq_before += __shfl_xor_sync(0xffffffffu, eq_before, o);
		out += __shfl_xor_sync(0xffffffffu, out, o);
	}
	out += dsa_minu(eq_before, need);
	for (uint32_t base = r0; base < r1; base += 32) {
		uint32_t i = base + lane, key = i < r1 ? keys[i] & mask : 0;
		bool g = i < r1 && key > prefix, e = i < r1 && key == prefix;
		uint32_t be = __ballot_sync(0xffffffffu, e);
		bool s = g || (e && eq_before + __popc(be & lt) < need);
		uint32_t bs = __ballot_sync(0xffffffffu, s);

		if (s)
			emit(out + __popc(bs & lt), i);
		eq_before += __popc(be);
		out += __popc(bs);
	}
}

/* ------------------------------------------------------------------------ */
/* Lightning indexer                                                        */

/*
 * Three kernels per group of tokens (ops_dsa.c, haccel__cuda_indexer_topk):
 *  1. haccel_dsa_ix_prep, grid (token, 8 heads): the queries in MMA form,
 *     once;
 *  2. haccel_dsa_ix_score, grid (token, chunk of positions): streams the
 *     chunk's key records and writes one order-preserving uint32 key per
 *     position to a row of scratch;
 *  3. haccel_dsa_ix_topk, a block of 1024 threads per token: the top-k of
 *     the row (a sampled threshold, the keys above it gathered in row
 *     order, a select of the k-th among them; no sort) into sel and n_sel,
 *     in ascending position; rows that fit are read once from L2 into
 *     shared memory.
 * Scoring is a pure stream over the keys (blocks sized to fill whole
 * waves, no selection state), and selection reads 4 bytes a position from
 * L2.
 */
#define DSA_IX_THREADS 128
#define DSA_IX_WARPS 4
#define DSA_IX_SLAB 32      /* positions a warp loads and scores at a time */
#define DSA_IX_STAGES 2
#define DSA_IX_REC HACCEL_INDEX_K_TOKEN_BYTES
#define DSA_IX_SLAB_BYTES (DSA_IX_SLAB * DSA_IX_REC)
#define DSA_IX_TK_THREADS 1024
#define DSA_IX_BINS 2048    /* 11 bits a radix pass */

/* Bytes of a token's prepared queries: the fragments (NT * 2048), the head
 * weights (8 NT floats), the score of an all-NaN key, then the scoring's
 * counter (haccel_dsa_ix_score_dyn) and padding: 16 bytes. */
__device__ __forceinline__ uint32_t dsa_ix_qbytes(uint32_t NT)
{
	return NT * 2048 + NT * 32 + 16;
}

/*
 * The queries of token t, quantized as the CPU does (MXFP8: exponent per
 * block of 32, codes) and laid out for the MMA's B operand. The k order of
 * the MMA is permuted (the sum does not care, the same permutation applies
 * to the keys): lane (g, c) of n-tile nt holds head 8 nt + g, dims [32 c,
 * 32 c + 32), 8 fp16 per 16-byte chunk i, stored at qf[nt][i][lane] so a
 * warp reads 512 contiguous bytes. Each value is its code times 2^(e_b -
 * emax) (exact in fp16 unless that underflows); 2^emax goes into the head
 * weight wq. Padding heads are zeros with weight 0. Then the score of a
 * key whose dots are all NaN (an E8M0 NaN scale): sum_h w_h * 0, NaN when
 * a weight is not finite.
 *
 * Grid (T, NT), 256 threads: block (t, nt) quantizes heads 8 nt .. 8 nt +
 * 7 of token t, a warp each (block (t, 0) also the all-NaN score and a
 * zero counter); out: T rows of dsa_ix_qbytes(NT) bytes.
 *
 * With had, each head's query is first transformed as haccel_rope_hadamard
 * transforms it (the same bits): the rope of its first dim entries at
 * position pos[t] (dim = 0: none), then the Hadamard transform, so that
 * the queries come straight from their projection.
 */
HACCEL_K void __launch_bounds__(256)
haccel_dsa_ix_prep(uint8_t *out, const float *q, const float *w, uint32_t IH, uint32_t NT,
		   uint32_t had, uint32_t dim, const uint32_t *pos, float theta, int layout)
{
	HAC_PDL();
	__shared__ float cs[128], xs[8][128];
	uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5, t = blockIdx.x;
	uint8_t *base = out + (size_t)t * dsa_ix_qbytes(NT);
	uint16_t *qh = (uint16_t *)base;
	float *wq = (float *)(base + NT * 2048);

	if (had && dim) {
		dsa_rope_angles(cs, dim, pos[t], theta);
		__syncthreads();
	}
	{
		uint32_t h = blockIdx.y * 8 + warp;
		const float *qr = q + ((size_t)t * IH + h) * 128;
		float x[4];
		int e[4], emax = -127;

#pragma unroll
		for (int b = 0; b < 4; b++)
			x[b] = h < IH ? qr[32 * b + lane] : 0.0f;
		if (had && dim) {
			/* dsa_rope_rotate's pairs (ia, ib), each entry from
			 * the warp's copy of the vector */
			uint32_t half = dim / 2;

#pragma unroll
			for (int b = 0; b < 4; b++)
				xs[warp][32 * b + lane] = x[b];
			__syncwarp();
#pragma unroll
			for (int b = 0; b < 4; b++) {
				uint32_t d = 32 * b + lane;
				uint32_t i = layout ? d >> 1 : d < half ? d : d - half, ia, ib;

				if (d >= dim)
					continue;
				dsa_rope_pair(i, dim, layout, &ia, &ib);
				x[b] = dsa_rope_one(xs[warp][ia], xs[warp][ib], cs[2 * i],
						    cs[2 * i + 1], d == ia);
			}
		}
		if (had)
			dsa_hadamard_reg(x);
#pragma unroll
		for (int b = 0; b < 4; b++) {
			e[b] = hac_scale_exp(warp_max(hac_abs_finite(x[b])));
			emax = dsa_maxi(emax, e[b]);
		}
#pragma unroll
		for (int b = 0; b < 4; b++) {
			int rel = e[b] - emax;
			float v = hac_fp8_to_float(hac_fp8_scaled(x[b], e[b])) *
				  (rel >= -149 ? hac_pow2f(rel) : 0.0f);

			qh[(((h >> 3) * 4 + (lane >> 3)) * 32 + (h & 7) * 4 + b) * 8 + (lane & 7)] =
				dsa_f2h(v);
		}
		if (lane == 0)
			wq[h] = h < IH ? w[(size_t)t * IH + h] * hac_pow2f(emax) : 0.0f;
	}
	if (warp == 0 && blockIdx.y == 0) {
		bool bad = false;

		for (uint32_t h = lane; h < IH; h += 32)
			bad |= hac_abs_finite(w[(size_t)t * IH + h]) == 0.0f &&
			       w[(size_t)t * IH + h] != 0.0f;
		bad = __any_sync(0xffffffffu, bad);
		if (lane < 4)
			wq[NT * 8 + lane] = lane == 0 && bad ? hac_u2f(0x7fc00000u) : 0.0f;
	}
}

/* How dsa_ix_issue copies (ops_dsa.c picks by page size and alignment). */
#define DSA_IX_CP4 0  /* 4-byte cp.async, a lane per record */
#define DSA_IX_CP16 1 /* page_tokens % 4 == 0: 16-byte cp.async */
#define DSA_IX_BULK 2 /* page_tokens % 32 == 0: a slab is one bulk copy */

/*
 * The slot of the first position lane loads in the slab of positions p0 ..
 * p0 + count - 1 (zero when count is 0 or past it): with 16-byte or bulk
 * copies, lanes 0..7 each that of a group of 4 records (bulk copies use
 * lane 0's). (A region's slots number below 2^32: 132 bytes each.)
 */
__device__ __forceinline__ uint32_t dsa_ix_slot(const uint32_t *bt, uint32_t pt, uint32_t pt_inv,
						uint32_t p0, uint32_t count, uint32_t mode)
{
	uint32_t lane = threadIdx.x & 31;
	uint32_t vec = mode != DSA_IX_CP4, r = vec ? 4 * lane : lane, p = p0 + r;
	/* p / pt: pt_inv = (2^32 - 1) / pt gives the quotient or one less
	 * (p < 2^31), the remainder corrects it. */
	uint32_t pi = __umulhi(p, pt_inv), rem = p - pi * pt;

	if (rem >= pt) {
		pi++;
		rem -= pt;
	}
	if (r >= count || (vec && lane >= 8))
		return 0;
	return __ldg(&bt[pi]) * pt + rem;
}

/*
 * Start copying the slab of count (0..32) records from position p0 of this
 * warp into buf; sl is what dsa_ix_slot gave. Bulk: with page_tokens % 32
 * == 0 and p0 % 32 == 0 the slab is 4224 contiguous, 16-byte aligned bytes
 * in one page, copied by the copy engine (lane 0 issues it, completing on
 * bar; records past count are whatever the page holds, and are not
 * scored). 16-byte: with page_tokens % 4 == 0 four consecutive records
 * from a multiple of 4 are 528 contiguous, 16-byte aligned bytes in one
 * page: lane (group lane / 4, part lane % 4) copies pieces part, part + 4,
 * ... of its group's 33, so each lane takes its group's slot once.
 * Otherwise 4-byte copies, a lane per record. The cp.async copies leave
 * zeros past count.
 */
__device__ __forceinline__ void dsa_ix_issue(uint8_t *buf, uint32_t sl, const uint8_t *region,
					     uint32_t count, uint32_t mode, uint64_t *bar)
{
	uint32_t lane = threadIdx.x & 31;

	if (!count)
		return;
	if (mode == DSA_IX_BULK) {
		if (lane == 0)
			dsa_bulk_copy(buf, region + (size_t)sl * DSA_IX_REC, DSA_IX_SLAB_BYTES, bar);
	} else if (mode == DSA_IX_CP16) {
		uint32_t gi = lane >> 2, part = lane & 3;
		uint32_t gs = __shfl_sync(0xffffffffu, sl, gi);
		bool ok = gi * 4 < count;
		const uint8_t *src = ok ? region + (size_t)gs * DSA_IX_REC : region;
		uint8_t *dst = buf + gi * 528;

#pragma unroll
		for (uint32_t i = 0; i < 9; i++) {
			uint32_t ch = part + 4 * i;

			if (ch < 33)
				dsa_cp16(dst + ch * 16, ok ? src + ch * 16 : region, ok ? 16 : 0);
		}
	} else {
		bool ok = lane < count;
		const uint8_t *src = ok ? region + (size_t)sl * DSA_IX_REC : region;

		for (uint32_t i = 0; i < DSA_IX_REC / 4; i++)
			dsa_cp4(buf + lane * DSA_IX_REC + 4 * i, ok ? src + 4 * i : region,
				ok ? 4 : 0);
	}
}

/*
 * Score the 32 records of a slab: two m-tiles of 16 positions against
 * every n-tile of 8 heads, k = 128 in 8 steps of 16. Lane (g, c) builds its
 * A fragments from bytes [32 c, 32 c + 32) of rows g and g + 8 (one MX
 * block, so one scale: its codes times 2^(e_c - emax_row), exact in fp16
 * unless that underflows; 2^emax_row is applied to the head sum). Word kt
 * of the lane's bytes feeds k-step kt: its low two codes are the A
 * elements (k = 2c, 2c + 1), its high two (k = 2c + 8, 2c + 9), the order
 * haccel_dsa_ix_prep gave the queries. relu commutes with the positive
 * power-of-two factors, so score = 2^emax_row * sum_h wq_h relu(acc_h).
 * The 32 keys go through the warp's slot of kst (32 words) so that the
 * row is written with one 128-byte store.
 */
__device__ __forceinline__ void dsa_ix_slab(const uint8_t *buf, const uint4 *qf, const float *wq,
					    uint32_t NT, uint32_t *kst, uint32_t *keys,
					    uint32_t count, float zero_score)
{
	uint32_t lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
	uint32_t a[2][8][4];
	float fk[2][2], sc[2][2] = { { 0.0f, 0.0f }, { 0.0f, 0.0f } };
	bool nanrow[2][2];

#pragma unroll
	for (int mt = 0; mt < 2; mt++)
#pragma unroll
		for (int hh = 0; hh < 2; hh++) {
			uint32_t r = mt * 16 + g + 8 * hh;
			const uint32_t *row = (const uint32_t *)(buf + r * DSA_IX_REC);
			uint32_t sw = row[32];
			int emax = dsa_maxi(dsa_maxi(sw & 255, (sw >> 8) & 255),
					    dsa_maxi((sw >> 16) & 255, sw >> 24));
			uint32_t f = dsa_h2pow2((int)((sw >> (8 * c)) & 255) - emax);

			nanrow[mt][hh] = emax == 255;
			fk[mt][hh] = hac_pow2f((emax == 255 ? 254 : emax) - 127);
#pragma unroll
			for (int kt = 0; kt < 8; kt++) {
				uint32_t v = row[8 * c + kt];

				a[mt][kt][hh] = dsa_hmul2(dsa_e4m3x2(v & 0xffff), f);
				a[mt][kt][2 + hh] = dsa_hmul2(dsa_e4m3x2_hi(v), f);
			}
		}
	for (uint32_t nt = 0; nt < NT; nt++) {
		const uint4 *qv = qf + nt * 128 + lane;
		uint32_t b[8][2];
		float w0 = wq[nt * 8 + 2 * c], w1 = wq[nt * 8 + 2 * c + 1];

#pragma unroll
		for (int i = 0; i < 4; i++) {
			uint4 u = qv[32 * i];

			b[2 * i][0] = u.x;
			b[2 * i][1] = u.y;
			b[2 * i + 1][0] = u.z;
			b[2 * i + 1][1] = u.w;
		}
#pragma unroll
		for (int mt = 0; mt < 2; mt++) {
			/* Two accumulators: two dependency chains. */
			float ev[4] = { 0.0f, 0.0f, 0.0f, 0.0f };
			float od[4] = { 0.0f, 0.0f, 0.0f, 0.0f };

#pragma unroll
			for (int kt = 0; kt < 8; kt += 2) {
				dsa_mma_f16(ev, a[mt][kt], b[kt]);
				dsa_mma_f16(od, a[mt][kt + 1], b[kt + 1]);
			}
			sc[mt][0] = fmaf(w0, fmaxf(ev[0] + od[0], 0.0f), sc[mt][0]);
			sc[mt][0] = fmaf(w1, fmaxf(ev[1] + od[1], 0.0f), sc[mt][0]);
			sc[mt][1] = fmaf(w0, fmaxf(ev[2] + od[2], 0.0f), sc[mt][1]);
			sc[mt][1] = fmaf(w1, fmaxf(ev[3] + od[3], 0.0f), sc[mt][1]);
		}
	}
	/* The four lanes of a group reduce their 4 row sums so that lane c
	 * ends with row r = c (m-tile r / 2, half r % 2): three shuffles. */
	bool b0 = c & 1, b1 = c & 2;
	float k0 = (b0 ? sc[0][1] : sc[0][0]) +
		   __shfl_xor_sync(0xffffffffu, b0 ? sc[0][0] : sc[0][1], 1);
	float k1 = (b0 ? sc[1][1] : sc[1][0]) +
		   __shfl_xor_sync(0xffffffffu, b0 ? sc[1][0] : sc[1][1], 1);
	float sum = (b1 ? k1 : k0) + __shfl_xor_sync(0xffffffffu, b1 ? k0 : k1, 2);
	bool nr = b1 ? (b0 ? nanrow[1][1] : nanrow[1][0]) : (b0 ? nanrow[0][1] : nanrow[0][0]);
	float f = b1 ? (b0 ? fk[1][1] : fk[1][0]) : (b0 ? fk[0][1] : fk[0][0]);

	kst[(c >> 1) * 16 + g + 8 * (c & 1)] = dsa_score_key(nr ? zero_score : sum * f);
	__syncwarp();
	if (lane < count)
		keys[lane] = kst[lane];
	__syncwarp();
}

/* The first position of slab k of a token's nu (n, its positions' count,
 * past the last). */
__device__ __forceinline__ uint32_t dsa_ix_unit_p(uint32_t k, uint32_t nu, uint32_t n)
{
	return k < nu ? 32 * k : n;
}

/* Records of the slab from position p among n (0: none, p past them). */
__device__ __forceinline__ uint32_t dsa_ix_unit_n(uint32_t p, uint32_t n)
{
	return p < n ? dsa_minu(32, n - p) : 0;
}

/* A scoring warp's shared memory (the layout below), its mbarriers
 * initialized when the slabs come by bulk copies. */
struct dsa_ix_smem {
	const uint4 *qf;
	const float *wq;
	uint32_t *kst;
	uint8_t *ring;
	uint64_t *bar;
};

__device__ __forceinline__ dsa_ix_smem dsa_ix_carve(uint32_t NT, uint32_t qb, bool bulk)
{
	uint32_t warp = threadIdx.x >> 5;
	uint8_t *rings = dsa_smem + qb + DSA_IX_WARPS * 128;
	dsa_ix_smem m;

	m.qf = (const uint4 *)dsa_smem;
	m.wq = (const float *)(dsa_smem + NT * 2048);
	m.kst = (uint32_t *)(dsa_smem + qb) + warp * 32;
	m.ring = rings + warp * DSA_IX_STAGES * DSA_IX_SLAB_BYTES;
	m.bar = (uint64_t *)(rings + DSA_IX_WARPS * DSA_IX_STAGES * DSA_IX_SLAB_BYTES) +
		warp * DSA_IX_STAGES;
	if (bulk && (threadIdx.x & 31) == 0)
		for (uint32_t i = 0; i < DSA_IX_STAGES; i++)
			dsa_mbar_init(m.bar + i, 1);
	__syncwarp();
	return m;
}

/* Start copying the token's prepared queries (qb bytes at src) into
 * shared memory, as one cp.async group. */
__device__ __forceinline__ void dsa_ix_queries(const uint8_t *src, uint32_t qb)
{
	for (uint32_t i = threadIdx.x; i < qb / 16; i += DSA_IX_THREADS)
		dsa_cp16(dsa_smem + 16 * i, src + 16 * i, 16);
	dsa_cp_commit();
}

/* Records of slab s of this warp in a chunk of nc positions (0 past it):
 * haccel_dsa_ix_score's warp w scores positions 128 s + 32 w ... */
__device__ __forceinline__ uint32_t dsa_ix_chunk_n(uint32_t nc, uint32_t s)
{
	uint32_t off = s * 128 + (threadIdx.x >> 5) * 32;

	return off < nc ? dsa_minu(32, nc - off) : 0;
}

/*
 * The indexer's scoring: one uint32 key a position, written to
 * keys[t * stride + position] for the positions 0 .. min(pos[t], max_pos)
 * of token t. qp: the token rows of haccel_dsa_ix_prep. Two forms, 128
 * threads a block, both streaming each warp's slabs of 32 records through
 * a ring of DSA_IX_STAGES buffers (the next slab in flight while one is
 * scored: bulk copies completing on one mbarrier a buffer, or cp.async
 * groups; mode is DSA_IX_*), so after the queries only warp barriers are
 * needed; the slots of the next slab to issue are looked up one slab
 * ahead. Two buffers and 128 registers let four blocks share an SM (16
 * warps): 2-3% faster on an H200 than three buffers with three blocks (12
 * warps). A slab's keys do not depend on which warp scores it.
 *
 * haccel_dsa_ix_score, grid (T, chunks): block (t, i) scores positions
 * [chunk i, chunk (i + 1)) (chunk a multiple of 128, ops_dsa.c picks it so
 * that the blocks fill whole waves); its warp w walks slabs 128 positions
 * apart from 32 w.
 *
 * haccel_dsa_ix_score_dyn, grid (T, B), for up to 16 heads (ops_dsa.c;
 * it takes the chunked form's arguments and does not read chunk): the
 * slabs (from multiples of 32) are taken dynamically so that the warps of
 * a token end together however the memory system serves them: warp w of
 * block (t, b) (gw = 4 b + w of W = 4 B) takes slabs k = gw, gw + W and
 * gw + 2 W, then 3 W + the value of the token's counter, which it
 * increments (the word after the all-NaN score in the token's prepared
 * queries: haccel_dsa_ix_prep zeroes it), until k reaches the slab count
 * (slab k: positions from 32 k). The counter is read two slabs before the
 * slab's slots are looked up (its atomics take long under the streams'
 * load). On an H200 (2026-12-03) it read 0.6-2.0 points of copy more than
 * the chunked form with 16 heads and 2.6-5.1 fewer with 32
 * (docs/benchmarks.md, twenty-fifth entry).
 *
 * Shared memory (ops_dsa.c computes the same size): the prepared queries
 * (dsa_ix_qbytes(NT)), then per warp 32 key words, then per warp a ring
 * of DSA_IX_STAGES slabs of 32 records, then per warp DSA_IX_STAGES
 * mbarriers.
 */
HACCEL_K void __launch_bounds__(DSA_IX_THREADS, 4)
haccel_dsa_ix_score(uint32_t *keys, uint32_t stride, const uint8_t *qp, uint32_t NT,
		    const uint32_t *pos, const uint32_t *bt_row, const uint8_t *region,
		    const uint32_t *block_tables, uint32_t bt_stride, uint32_t pt,
		    uint32_t max_pos, uint32_t mode, uint32_t chunk)
{
	HAC_PDL_DEFERRED();
	uint32_t t = blockIdx.x, c0 = blockIdx.y * chunk, warp = threadIdx.x >> 5;
	uint32_t n = dsa_minu(pos[t], max_pos) + 1, qb = dsa_ix_qbytes(NT);

	if (c0 >= n) {
		HAC_PDL();
		return;
	}
	uint32_t nc = dsa_minu(chunk, n - c0), nslab = (nc + 127) / 128, w0 = c0 + warp * 32;
	bool bulk = mode == DSA_IX_BULK;
	dsa_ix_smem m = dsa_ix_carve(NT, qb, bulk);
	const uint32_t *bt = block_tables + (size_t)bt_row[t] * bt_stride;
	uint32_t *krow = keys + (size_t)t * stride + w0;
	uint32_t sl, pt_inv = 0xffffffffu / pt;

	/* The first slabs are issued before the wait for the kernel before
	 * this one (HAC_PDL: the queries' preparation): the keys, positions
	 * and block tables are not its output. */
	for (uint32_t s = 0; s < DSA_IX_STAGES - 1; s++) {
		uint32_t cnt = dsa_ix_chunk_n(nc, s);

		sl = dsa_ix_slot(bt, pt, pt_inv, w0 + 128 * s, cnt, mode);
		dsa_ix_issue(m.ring + s * DSA_IX_SLAB_BYTES, sl, region, cnt, mode, m.bar + s);
		dsa_cp_commit();
	}
	sl = dsa_ix_slot(bt, pt, pt_inv, w0 + 128 * (DSA_IX_STAGES - 1),
			 dsa_ix_chunk_n(nc, DSA_IX_STAGES - 1), mode);
	HAC_PDL();
	dsa_ix_queries(qp + (size_t)t * qb, qb);
	/* The queries are in (bulk slabs may still be on their way; cp.async
	 * ones, committed before the queries, are in too). */
	dsa_cp_wait<0>();
	__syncthreads();
	float zero_score = m.wq[NT * 8];

	for (uint32_t s = 0; s < nslab; s++) {
		uint32_t nx = s + DSA_IX_STAGES - 1, st = s % DSA_IX_STAGES;
		uint32_t cnt = dsa_ix_chunk_n(nc, s);

		/* Everyone is done with the buffer slab nx overwrites. */
		__syncwarp();
		dsa_ix_issue(m.ring + (nx % DSA_IX_STAGES) * DSA_IX_SLAB_BYTES, sl, region,
			     dsa_ix_chunk_n(nc, nx), mode, m.bar + nx % DSA_IX_STAGES);
		dsa_cp_commit();
		sl = dsa_ix_slot(bt, pt, pt_inv, w0 + 128 * (nx + 1), dsa_ix_chunk_n(nc, nx + 1),
				 mode);
		if (bulk) {
			if (cnt)
				dsa_mbar_wait(m.bar + st, (s / DSA_IX_STAGES) & 1);
		} else {
			dsa_cp_wait<DSA_IX_STAGES - 1>();
		}
		__syncwarp();
		if (cnt)
			dsa_ix_slab(m.ring + st * DSA_IX_SLAB_BYTES, m.qf, m.wq, NT, m.kst,
				    krow + 128 * s, cnt, zero_score);
	}
	dsa_cp_wait<0>();
}

HACCEL_K void __launch_bounds__(DSA_IX_THREADS, 4)
haccel_dsa_ix_score_dyn(uint32_t *keys, uint32_t stride, uint8_t *qp, uint32_t NT,
			const uint32_t *pos, const uint32_t *bt_row, const uint8_t *region,
			const uint32_t *block_tables, uint32_t bt_stride, uint32_t pt,
			uint32_t max_pos, uint32_t mode, uint32_t)
{
	HAC_PDL_DEFERRED();
	static_assert(DSA_IX_STAGES == 2, "the unit queue below holds three slabs");
	uint32_t t = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	uint32_t n = dsa_minu(pos[t], max_pos) + 1, nu = (n + 31) / 32, qb = dsa_ix_qbytes(NT);
	uint32_t W = gridDim.y * DSA_IX_WARPS, gw = blockIdx.y * DSA_IX_WARPS + warp;
	/* the first positions (n past the last) of the warp's slab scored now
	 * (k = gw first), the one in flight and the next to issue */
	uint32_t p0 = dsa_ix_unit_p(gw, nu, n), p1 = dsa_ix_unit_p(gw + W, nu, n);
	uint32_t p2 = dsa_ix_unit_p(gw + 2 * W, nu, n);

	if (blockIdx.y * DSA_IX_WARPS >= nu) {
		HAC_PDL();
		return;
	}
	dsa_ix_smem m = dsa_ix_carve(NT, qb, mode == DSA_IX_BULK);
	const uint32_t *bt = block_tables + (size_t)bt_row[t] * bt_stride;
	uint32_t *ctr = (uint32_t *)(qp + (size_t)t * qb + NT * 2048 + NT * 32) + 1;
	uint32_t *krow = keys + (size_t)t * stride;
	uint32_t sl, pt_inv = 0xffffffffu / pt;

	/* The first slab is issued before the wait for the kernel before
	 * this one (HAC_PDL: the queries' preparation): the keys, positions
	 * and block tables are not its output; the counter is. */
	sl = dsa_ix_slot(bt, pt, pt_inv, p0, dsa_ix_unit_n(p0, n), mode);
	dsa_ix_issue(m.ring, sl, region, dsa_ix_unit_n(p0, n), mode, m.bar);
	dsa_cp_commit();
	sl = dsa_ix_slot(bt, pt, pt_inv, p1, dsa_ix_unit_n(p1, n), mode);
	HAC_PDL();
	dsa_ix_queries(qp + (size_t)t * qb, qb);
	/* The slab after p2's (a counter of 0 gives k = 3 W), asked for now. */
	bool asked3 = p2 < n;
	uint32_t got3 = asked3 && lane == 0 ? atomicAdd(ctr, 1u) : 0;

	/* The queries are in (bulk slabs may still be on their way; cp.async
	 * ones, committed before the queries, are in too). */
	dsa_cp_wait<0>();
	__syncthreads();
	float zero_score = m.wq[NT * 8];

	for (uint32_t s = 0; p0 < n; s++) {
		uint32_t st = s % DSA_IX_STAGES, c1 = dsa_ix_unit_n(p1, n), got = 0;
		bool asked = p2 < n;

		/* Everyone is done with the buffer slab s + 1 overwrites. */
		__syncwarp();
		dsa_ix_issue(m.ring + (st ^ 1) * DSA_IX_SLAB_BYTES, sl, region, c1, mode,
			     m.bar + (st ^ 1));
		dsa_cp_commit();
		/* The slab two after p2's (the one after it is on its way). */
		if (asked && lane == 0)
			got = atomicAdd(ctr, 1u);
		sl = dsa_ix_slot(bt, pt, pt_inv, p2, dsa_ix_unit_n(p2, n), mode);
		if (mode == DSA_IX_BULK)
			dsa_mbar_wait(m.bar + st, (s / DSA_IX_STAGES) & 1);
		else
			dsa_cp_wait<DSA_IX_STAGES - 1>();
		__syncwarp();
		dsa_ix_slab(m.ring + st * DSA_IX_SLAB_BYTES, m.qf, m.wq, NT, m.kst, krow + p0,
			    dsa_ix_unit_n(p0, n), zero_score);
		got3 = __shfl_sync(0xffffffffu, got3, 0);
		p0 = p1;
		p1 = p2;
		p2 = dsa_ix_unit_p(asked3 ? 3 * W + got3 : nu, nu, n);
		got3 = got;
		asked3 = asked;
	}
	dsa_cp_wait<0>();
}

/* hist[digit] += 1 for the lanes with ok, one atomic per group of lanes
 * with equal digits (scores crowd into few bins). */
__device__ __forceinline__ void dsa_ix_count(uint32_t *hist, bool ok, uint32_t digit)
{
	uint32_t peers = __match_any_sync(0xffffffffu, ok ? digit : 0xffffffffu);

	if (ok && (threadIdx.x & 31) == (uint32_t)__ffs(peers) - 1)
		atomicAdd(&hist[digit], (uint32_t)__popc(peers));
}

/*
 * The digit d of a 2048-bin histogram (1024 threads, two bins each) with
 * sum_{b > d} hist[b] < need <= sum_{b >= d} hist[b]: sh->digit, in
 * sh->remain the count strictly above it, sh->done whether the bin holds
 * exactly the need - remain keys still wanted. need <= the histogram's
 * total.
 */
__device__ void dsa_ix_thresh(const uint32_t *hist, uint32_t need, uint32_t *wsum,
			      struct dsa_sel_shared *sh)
{
	uint32_t tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	uint32_t h0 = hist[2 * tid], h1 = hist[2 * tid + 1], v = h0 + h1, incl = v, above;

	/* inclusive suffix sums: this thread's bins and every higher one */
	for (int o = 1; o < 32; o <<= 1) {
		uint32_t x = __shfl_down_sync(0xffffffffu, incl, o);

		if (lane + o < 32)
			incl += x;
	}
	/* Every caller has synchronized since wsum was last read (after
	 * filling hist). */
	if (lane == 0)
		wsum[warp] = incl;
	__syncthreads();
	/* the bins of the warps above this one */
	above = lane > warp ? wsum[lane] : 0;
	for (int o = 16; o > 0; o >>= 1)
		above += __shfl_xor_sync(0xffffffffu, above, o);
	above += incl - v;
	if (above < need && need <= above + v) {
		bool hi = need <= above + h1;

		sh->digit = hi ? 2 * tid + 1 : 2 * tid;
		sh->remain = hi ? above : above + h1;
		sh->done = (hi ? h1 : h0) == need - sh->remain;
	}
	__syncthreads();
}

/*
 * The k-th largest of the N keys of keys (shared or global memory), 1 <= k
 * <= N, by a radix select of 11, 11 and 10 bits a pass (a block of 1024
 * threads, a histogram of DSA_IX_BINS words, 32 words of wsum) that stops
 * once a bin holds exactly the entries still wanted: *prefix and *mask get
 * the bits found, *need how many of the keys with (key & mask) == prefix
 * belong to the k best (the first ones: ties go to the smaller index).
 * k == N gives mask 0 and need N. Every thread of the block calls it and
 * gets the same values.
 */
__device__ void dsa_kth(const uint32_t *keys, uint32_t N, uint32_t k, uint32_t *hist,
			uint32_t *wsum, struct dsa_sel_shared *sh, uint32_t *prefix_out,
			uint32_t *mask_out, uint32_t *need_out)
{
	uint32_t tid = threadIdx.x, prefix = 0, mask = 0, need = k;

	if (k < N) {
		for (int shift = 21; shift >= 0; shift -= shift > 10 ? 11 : 10) {
			uint32_t bits = shift ? 2047u : 1023u;

			for (uint32_t i = tid; i < DSA_IX_BINS; i += DSA_IX_TK_THREADS)
				hist[i] = 0;
			__syncthreads();
			for (uint32_t base = 0; base < N; base += DSA_IX_TK_THREADS) {
				uint32_t i = base + tid, key = i < N ? keys[i] : 0;
				bool ok = i < N && (key & mask) == prefix;

				dsa_ix_count(hist, ok, (key >> shift) & bits);
			}
			__syncthreads();
			dsa_ix_thresh(hist, need, wsum, sh);
			prefix |= sh->digit << shift;
			mask |= bits << shift;
			need -= sh->remain;
			if (sh->done)
				break;
		}
	}
	*prefix_out = prefix;
	*mask_out = mask;
	*need_out = need;
}

/*
 * One pass over the n keys of a row. Warp w takes the contiguous positions
 * [w R, (w + 1) R) (R: n / 32 rounded up to a multiple of 128), in steps
 * of eight 16-byte loads issued together (the row is padded to a multiple
 * of 4 and 16-byte aligned; a pass is latency-bound, so the loads must be
 * in flight at once), load j of a step holding positions b + 128 j + 4
 * lane .. + 3: f(keys, p, m) for each load, the 4 keys of positions p ..
 * p + 3, bit e of m set when p + e is the warp's (and below n). The lanes
 * of a warp take the same steps, so f may use warp-wide intrinsics.
 */
#define DSA_IX_ROW_LOADS 8

template <typename F>
__device__ __forceinline__ void dsa_ix_rowpass(const uint32_t *row, uint32_t n, F f)
{
	uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	uint32_t R = ((n + 31) / 32 + 127) & ~127u, w0 = warp * R;
	uint32_t w1 = w0 < n ? dsa_minu(n, w0 + R) : w0;

	for (uint32_t b = w0; b < w1; b += 128 * DSA_IX_ROW_LOADS) {
		uint4 u[DSA_IX_ROW_LOADS];

#pragma unroll
		for (int j = 0; j < DSA_IX_ROW_LOADS; j++) {
			uint32_t i = b + 128 * j + 4 * lane;

			u[j] = i < w1 ? __ldcg((const uint4 *)(row + i)) : make_uint4(0, 0, 0, 0);
		}
#pragma unroll
		for (int j = 0; j < DSA_IX_ROW_LOADS; j++) {
			uint32_t i = b + 128 * j + 4 * lane;
			uint32_t m = i < w1 ? (w1 - i >= 4 ? 15u : (1u << (w1 - i)) - 1) : 0;

			f(u[j], i, m);
		}
	}
}

/* f(key, position, ok) for each key of a dsa_ix_rowpass. */
template <typename F>
__device__ __forceinline__ void dsa_ix_rowkeys(const uint32_t *row, uint32_t n, F f)
{
	dsa_ix_rowpass(row, n, [&](uint4 u, uint32_t p, uint32_t m) {
		f(u.x, p, (m & 1) != 0);
		f(u.y, p + 1, (m & 2) != 0);
		f(u.z, p + 2, (m & 4) != 0);
		f(u.w, p + 3, (m & 8) != 0);
	});
}

/* The exclusive prefix sum of v over the threads of the block (1024), in
 * thread order; *total gets the sum. */
__device__ uint32_t dsa_ix_block_scan(uint32_t v, uint32_t *wsum, uint32_t *total)
{
	uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5, incl = v;

	for (int o = 1; o < 32; o <<= 1) {
		uint32_t y = __shfl_up_sync(0xffffffffu, incl, o);

		if (lane >= (uint32_t)o)
			incl += y;
	}
	__syncthreads(); /* wsum may still be read by an earlier caller */
	if (lane == 31)
		wsum[warp] = incl;
	__syncthreads();
	/* the warps' sums, one a lane */
	uint32_t x = wsum[lane];

	*total = __reduce_add_sync(0xffffffffu, x);
	return __reduce_add_sync(0xffffffffu, lane < warp ? x : 0) + incl - v;
}

/* The keys >= lo a thread meets in dsa_ix_rowpass. */
__device__ __forceinline__ uint32_t dsa_ix_count_ge(const uint32_t *row, uint32_t n, uint32_t lo)
{
	uint32_t c = 0;

	dsa_ix_rowkeys(row, n, [&](uint32_t key, uint32_t, bool ok) { c += ok && key >= lo; });
	return c;
}

/*
 * Where the keys >= lo of this thread's warp go in the gather, the warps'
 * ranges in row order: the warp's exclusive offset (every lane gets it),
 * *total the count of the whole row.
 */
__device__ __forceinline__ uint32_t dsa_ix_warp_offset(const uint32_t *row, uint32_t n,
							uint32_t lo, uint32_t *wsum,
							uint32_t *total)
{
	uint32_t off = dsa_ix_block_scan(dsa_ix_count_ge(row, n, lo), wsum, total);

	return __shfl_sync(0xffffffffu, off, 0);
}

/* The sample's rank for lo: of 1024 keys sampled across n, the k-th of the
 * row is expected at rank r = k 1024 / n; lo is taken 3 sqrt(r) + 4 ranks
 * lower (1-based, at most 1024). */
__device__ __forceinline__ uint32_t dsa_ix_sample_rank(uint32_t k, uint32_t n)
{
	uint32_t r = (uint32_t)((uint64_t)k * 1024 / n);

	return dsa_minu(1023, r + 3 * (uint32_t)sqrtf((float)r) + 4) + 1;
}

/*
 * The k = min(topk, n) best of the n keys of row (k < n), by key and then
 * the smaller position, into srow in ascending position, the row read from
 * global memory (L2) in each pass: every thread of the block calls it.
 *
 * Every key >= a threshold lo is gathered, with its position, into gk and
 * gp (cap entries each; a counting pass and a block scan give each thread
 * its place, so the entries land in row order, without atomics), and the
 * k best of those are the answer: exact whenever at least k keys are >=
 * lo and they fit. A radix select over the gathered keys (dsa_kth) finds
 * the k-th, and dsa_emit writes the positions of the k best in row order.
 * lo is 0 when the row fits. Otherwise it comes from 1024 keys sampled
 * across the row (lo, by the same radix select, a few ranks below where
 * the k-th should fall, so that about 1.5 k keys pass), checked by that
 * count. If the check fails (an unlucky sample or crowded scores), radix
 * histograms of the top 11 bits, then of the next 11 of the keys in the
 * k-th's bin, give lo = the bin's lower edge; and if even that leaves too
 * many (mass ties: identical keys, NaN scores), the radix select runs on
 * the whole row.
 */
__device__ void dsa_ix_topk_l2(int32_t *srow, const uint32_t *row, uint32_t n, uint32_t k,
			       uint32_t cap, uint32_t *gk, uint32_t *gp, uint32_t *hist,
			       uint32_t *wsum, struct dsa_sel_shared *sh)
{
	uint32_t tid = threadIdx.x, lo = 0, total, off, prefix, mask, need;

	if (n > cap) {
		/* The sample: key tid * n / 1024 (dsa_ix_sample_rank). */
		gk[tid] = __ldcg(&row[(uint64_t)tid * n / 1024]);
		__syncthreads();
		dsa_kth(gk, 1024, dsa_ix_sample_rank(k, n), hist, wsum, sh, &lo, &mask, &need);
	}
	/* Where this warp's keys >= lo go: in row order, so the gather
	 * needs no atomics. */
	off = dsa_ix_warp_offset(row, n, lo, wsum, &total);
	if (total < k || total > cap) {
		uint32_t shift = 21, above = 0;

		prefix = 0;
		__syncthreads(); /* the sample's histogram is dead */
		for (int pass = 0; pass < 2; pass++) {
			for (uint32_t i = tid; i < DSA_IX_BINS; i += DSA_IX_TK_THREADS)
				hist[i] = 0;
			__syncthreads();
			uint32_t pm = pass ? 0xffe00000u : 0, s = shift;
			dsa_ix_rowkeys(row, n, [&](uint32_t key, uint32_t, bool ok) {
				dsa_ix_count(hist, ok && (key & pm) == prefix, (key >> s) & 2047);
			});
			__syncthreads();
			dsa_ix_thresh(hist, k - above, wsum, sh);
			prefix |= sh->digit << shift;
			total = above + sh->remain + hist[sh->digit];
			above += sh->remain;
			if (total <= cap)
				break;
			shift -= 11;
			__syncthreads();
		}
		if (total <= cap) {
			lo = prefix;
			off = dsa_ix_warp_offset(row, n, lo, wsum, &total);
		}
	}
	__syncthreads(); /* the sample in gk is dead */
	if (total <= cap) {
		/* A warp's keys in row order: by load, lane, then key. */
		uint32_t lt = (1u << (tid & 31)) - 1;

		dsa_ix_rowpass(row, n, [&](uint4 u, uint32_t p, uint32_t m) {
			uint32_t v[4] = { u.x, u.y, u.z, u.w }, hit[4], o = off;

#pragma unroll
			for (int e = 0; e < 4; e++) {
				hit[e] = __ballot_sync(0xffffffffu, (m >> e & 1) && v[e] >= lo);
				o += __popc(hit[e] & lt);
			}
#pragma unroll
			for (int e = 0; e < 4; e++) {
				if (hit[e] >> (tid & 31) & 1) {
					gk[o] = v[e];
					gp[o++] = p + e;
				}
				off += __popc(hit[e]);
			}
		});
		__syncthreads();
		dsa_kth(gk, total, k, hist, wsum, sh, &prefix, &mask, &need);
		dsa_emit(gk, total, prefix, mask, need, sh,
			 [&](uint32_t o, uint32_t i) { srow[o] = (int32_t)gp[i]; });
	} else {
		dsa_kth(row, n, k, hist, wsum, sh, &prefix, &mask, &need);
		dsa_emit(row, n, prefix, mask, need, sh,
			 [&](uint32_t o, uint32_t i) { srow[o] = (int32_t)i; });
	}
}

/* The smallest s with span >> s < DSA_IX_BINS: the shift of a window
 * histogram over [base, base + span]. */
__device__ __forceinline__ uint32_t dsa_ix_wshift(uint32_t span)
{
	uint32_t x = span >> 11;

	return x ? 32 - __clz(x) : 0;
}

/* hist[d] += 1 for the lanes with ok (every lane of the warp calls it):
 * one atomic when the lanes that count share a digit, as crowded keys
 * do, else one a lane (the window's digits rarely collide). */
__device__ __forceinline__ void dsa_ix_count_w(uint32_t *hist, bool ok, uint32_t d)
{
	uint32_t act = __ballot_sync(0xffffffffu, ok);

	if (!act)
		return;
	uint32_t first = __ffs(act) - 1, d0 = __shfl_sync(0xffffffffu, d, first);

	if (__all_sync(0xffffffffu, !ok || d == d0)) {
		if ((threadIdx.x & 31) == first)
			atomicAdd(&hist[d0], (uint32_t)__popc(act));
	} else if (ok) {
		atomicAdd(&hist[d], 1u);
	}
}

/*
 * The same answer as dsa_ix_topk_l2 with the row staged in shared memory
 * (srow, n <= its rowcap words), read once from L2. Returns 0, having
 * written nothing to orow, when the row needs dsa_ix_topk_l2 instead: more
 * than DSA_IX_FCAP keys >= lo, or fewer than k (the same answer for every
 * thread). Every thread of the block calls it, k < n.
 *
 *  1. The row into srow (16-byte loads, eight in flight a thread), its
 *     smallest and largest key.
 *  2. lo: where n > 4 k, 1024 keys sampled across the row go into a
 *     histogram over the window [min, max] of 2048 bins, (key - min) >>
 *     shift; lo is the lower edge of the bin of the sample's (r + 3 sqrt r
 *     + 4)-th largest key (r = k 1024 / n, where the k-th should fall), so
 *     that about 1.5 k keys pass; else lo = 0.
 *  3. Each thread takes P consecutive positions of the row (P = n / 1024
 *     rounded up to a multiple of 4; its chunks of four from a start
 *     rotated by lane, for fewer bank conflicts), marks its keys >= lo in
 *     a 64-bit mask, and a block scan of the counts places them: keys and
 *     positions go into fk and fp in row order, each key also counted in
 *     a window histogram over [lo, max].
 *  4. The k-th among them: the histogram's bin that holds it; when that
 *     bin holds 32 keys or fewer, one warp ranks them (by key, then
 *     position), else the window narrows to the bin and the histogram is
 *     made again over fk (down to single keys).
 *  5. dsa_emit writes the positions of the keys above the k-th and the
 *     first of those equal to it, in row order.
 *
 * Shared memory: srow (rowcap words), fk and fp (DSA_IX_FCAP words each),
 * two histograms, 32 warp sums, 32 + 32 words, 8 words, dsa_sel_shared.
 */
#define DSA_IX_FCAP 8192

__device__ int dsa_ix_topk_smem(int32_t *orow, const uint32_t *row, uint32_t n, uint32_t k,
				uint32_t *srow, uint32_t rowcap, uint32_t *hist,
				uint32_t *wsum, uint32_t *wa, uint32_t *wb, uint32_t *misc,
				struct dsa_sel_shared *sh)
{
	uint32_t tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	uint32_t *fk = srow + rowcap, *fp = fk + DSA_IX_FCAP, *hist2 = hist + DSA_IX_BINS;
	uint32_t n4 = (n + 3) & ~3u, lo = 0, mn = 0xffffffffu, mx = 0;

	/* 1. */
	for (uint32_t b = 4 * tid; b < n4; b += 4 * DSA_IX_TK_THREADS * DSA_IX_ROW_LOADS) {
		uint4 u[DSA_IX_ROW_LOADS];

#pragma unroll
		for (int j = 0; j < DSA_IX_ROW_LOADS; j++) {
			uint32_t i = b + 4 * DSA_IX_TK_THREADS * j;

			if (i < n4)
				u[j] = __ldcg((const uint4 *)(row + i));
		}
#pragma unroll
		for (int j = 0; j < DSA_IX_ROW_LOADS; j++) {
			uint32_t i = b + 4 * DSA_IX_TK_THREADS * j;

			if (i >= n4)
				continue;
			uint32_t v[4] = { u[j].x, u[j].y, u[j].z, u[j].w };

			*(uint4 *)(srow + i) = u[j];
#pragma unroll
			for (int e = 0; e < 4; e++)
				if (i + e < n) {
					mn = min(mn, v[e]);
					mx = max(mx, v[e]);
				}
		}
	}
	for (uint32_t i = tid; i < 2 * DSA_IX_BINS; i += DSA_IX_TK_THREADS)
		hist[i] = 0;
	mn = __reduce_min_sync(0xffffffffu, mn);
	mx = __reduce_max_sync(0xffffffffu, mx);
	if (lane == 0) {
		wa[warp] = mn;
		wb[warp] = mx;
	}
	__syncthreads();
	mn = __reduce_min_sync(0xffffffffu, wa[lane]);
	mx = __reduce_max_sync(0xffffffffu, wb[lane]);

	/* 2. */
	if (n > 4 * k) {
		uint32_t s = srow[(uint64_t)tid * n / 1024], sft = dsa_ix_wshift(mx - mn);

		dsa_ix_count_w(hist2, true, (s - mn) >> sft);
		__syncthreads();
		dsa_ix_thresh(hist2, dsa_ix_sample_rank(k, n), wsum, sh);
		lo = mn + (sh->digit << sft);
	}

	/* 3. */
	uint32_t P = ((n + DSA_IX_TK_THREADS - 1) / DSA_IX_TK_THREADS + 3) & ~3u, NC = P / 4;
	uint32_t p0 = tid * P, rot = lane % NC, total, off;
	uint64_t mask = 0;

	for (uint32_t j = 0; j < NC; j++) {
		uint32_t q = j + rot < NC ? j + rot : j + rot - NC, i = p0 + 4 * q;

		if (i >= n)
			continue;
		uint4 x = *(const uint4 *)(srow + i);
		uint32_t valid = n - i >= 4 ? 15u : (1u << (n - i)) - 1;
		uint32_t nib = (uint32_t)(x.x >= lo) | (uint32_t)(x.y >= lo) << 1 |
			       (uint32_t)(x.z >= lo) << 2 | (uint32_t)(x.w >= lo) << 3;

		mask |= (uint64_t)(nib & valid) << (4 * q);
	}
	off = dsa_ix_block_scan((uint32_t)__popcll(mask), wsum, &total);
	if (total < k || total > DSA_IX_FCAP)
		return 0;

	uint32_t base = lo, span = mx - lo, sft = dsa_ix_wshift(span), need = k, kv;

	for (uint32_t j = 0; j < NC; j++) {
		uint32_t q = j + rot < NC ? j + rot : j + rot - NC, i = p0 + 4 * q;
		uint32_t m4 = (uint32_t)(mask >> (4 * q)) & 15;

		if (!m4)
			continue;
		uint4 x = *(const uint4 *)(srow + i);
		uint32_t v[4] = { x.x, x.y, x.z, x.w };
		uint32_t o = off + (uint32_t)__popcll(mask & ((1ull << (4 * q)) - 1));

#pragma unroll
		for (int e = 0; e < 4; e++)
			if (m4 >> e & 1) {
				fk[o] = v[e];
				fp[o++] = i + e;
				atomicAdd(&hist[(v[e] - base) >> sft], 1u);
			}
	}
	__syncthreads();

	/* 4. */
	for (;;) {
		dsa_ix_thresh(hist, need, wsum, sh);
		uint32_t dg = sh->digit, done = sh->done, inbin = hist[dg];

		need -= sh->remain;
		base += dg << sft;
		if (done) {
			/* the whole bin: every key >= base */
			kv = base - 1;
			need = 0;
			break;
		}
		if (!sft) {
			kv = base;
			break;
		}
		span = dsa_minu(span - (dg << sft), (1u << sft) - 1);
		__syncthreads(); /* sh and hist read */
		if (inbin <= 32) {
			if (tid == 0)
				misc[0] = 0;
			__syncthreads();
			for (uint32_t i = tid; i < total; i += DSA_IX_TK_THREADS)
				if (fk[i] - base <= span) {
					uint32_t o = atomicAdd(&misc[0], 1u);

					wa[o] = fk[i];
					wb[o] = i;
				}
			__syncthreads();
			if (warp == 0) {
				/* rank by key, then position: the need-th */
				uint32_t m = misc[0], key = lane < m ? wa[lane] : 0;
				uint32_t ix = lane < m ? wb[lane] : 0xffffffffu, rk = 0;

				for (uint32_t j = 0; j < m; j++) {
					uint32_t kj = __shfl_sync(0xffffffffu, key, j);
					uint32_t ij = __shfl_sync(0xffffffffu, ix, j);

					rk += kj > key || (kj == key && ij < ix);
				}
				uint32_t hit = __ballot_sync(0xffffffffu, lane < m && rk == need - 1);
				uint32_t kk = __shfl_sync(0xffffffffu, key, __ffs(hit) - 1);
				uint32_t gt = __popc(__ballot_sync(0xffffffffu, lane < m && key > kk));

				if (lane == 0) {
					misc[1] = kk;
					misc[2] = need - gt;
				}
			}
			__syncthreads();
			kv = misc[1];
			need = misc[2];
			break;
		}
		sft = sft > 11 ? sft - 11 : 0;
		for (uint32_t i = tid; i < DSA_IX_BINS; i += DSA_IX_TK_THREADS)
			hist[i] = 0;
		__syncthreads();
		for (uint32_t i = tid; i < ((total + 31) & ~31u); i += DSA_IX_TK_THREADS) {
			uint32_t d = i < total ? fk[i] - base : 0xffffffffu;

			dsa_ix_count_w(hist, d <= span, d >> sft);
		}
		__syncthreads();
	}

	/* 5. */
	dsa_emit(fk, total, kv, 0xffffffffu, need, sh,
		 [&](uint32_t o, uint32_t i) { orow[o] = (int32_t)fp[i]; });
	return 1;
}

/*
 * Grid T, 1024 threads: the k = min(topk, n) best of the n keys of row t
 * (n = min(pos[t], max_pos) + 1), by key and then the smaller position,
 * into sel row t in ascending position, -1 after them, n_sel[t] = k.
 * k = n takes every position. A row of at most rowcap keys (0: none) with
 * n > 4 k or n <= DSA_IX_FCAP goes through shared memory
 * (dsa_ix_topk_smem), any other or one that path gives back through L2
 * (dsa_ix_topk_l2).
 *
 * Shared memory: max(rowcap + 2 DSA_IX_FCAP words (none where rowcap is
 * 0), the gather buffers of dsa_ix_topk_l2: cap keys and cap positions, cap
 * a power of two >= topk), then two histograms of DSA_IX_BINS words, 32
 * warp sums, 2 x 32 + 8 words, dsa_sel_shared.
 */
HACCEL_K void __launch_bounds__(DSA_IX_TK_THREADS, 1)
haccel_dsa_ix_topk(int32_t *sel, uint32_t *n_sel, const uint32_t *keys, uint32_t stride,
		   const uint32_t *pos, uint32_t max_pos, uint32_t topk, uint32_t cap,
		   uint32_t rowcap)
{
	HAC_PDL();
	uint32_t t = blockIdx.x, tid = threadIdx.x;
	uint32_t n = dsa_minu(pos[t], max_pos) + 1, k = dsa_minu(topk, n);
	const uint32_t *row = keys + (size_t)t * stride;
	uint32_t words = rowcap ? rowcap + 2 * DSA_IX_FCAP : 0;
	uint32_t *buf = (uint32_t *)dsa_smem, *hist = buf + (words > 2 * cap ? words : 2 * cap);
	uint32_t *wsum = hist + 2 * DSA_IX_BINS, *wa = wsum + 32, *wb = wa + 32, *misc = wb + 32;
	struct dsa_sel_shared *sh = (struct dsa_sel_shared *)(misc + 8);
	int32_t *srow = sel + (size_t)t * topk;

	if (k == n) {
		for (uint32_t j = tid; j < n; j += DSA_IX_TK_THREADS)
			srow[j] = (int32_t)j;
	} else if (n > rowcap || (n <= 4 * k && n > DSA_IX_FCAP) ||
		   !dsa_ix_topk_smem(srow, row, n, k, buf, rowcap, hist, wsum, wa, wb, misc,
				     sh)) {
		__syncthreads(); /* the staged path's buffers */
		dsa_ix_topk_l2(srow, row, n, k, cap, buf, buf + cap, hist, wsum, sh);
	}
	for (uint32_t j = k + tid; j < topk; j += DSA_IX_TK_THREADS)
		srow[j] = -1;
	if (tid == 0)
		n_sel[t] = k;
}

/* ------------------------------------------------------------------------ */
/* Sparse MLA                                                               */

#define DSA_MLA_L 64            /* records a tile */
#define DSA_MLA_THREADS 256
#define DSA_MLA_SROW 72         /* floats a row of S (padded: fewer bank conflicts) */

/* The exponent of a tile scale as the writers store it (2^e, e in
 * [-127, 127]; 2^-127 is the subnormal 0x00400000, whose exponent field
 * is 0 as that of a zero, -127 both). */
__device__ __forceinline__ int dsa_scale_bits_exp(uint32_t bits)
{
	return (int)((bits >> 23) & 0xff) - 127;
}

/* fp16 2^e0 (low half) and 2^e1 (high half), e <= 15: exact, 0 below
 * 2^-24 (the fp32 powers of two round to fp16 exactly or to 0). */
__device__ __forceinline__ uint32_t dsa_h2pow2x2(int e0, int e1)
{
	float f0 = hac_u2f((uint32_t)(dsa_maxi(e0, -126) + 127) << 23);
	float f1 = hac_u2f((uint32_t)(dsa_maxi(e1, -126) + 127) << 23);
	uint32_t r;

	asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(f1), "f"(f0));
	return r;
}

/*
 * Where block blockIdx.x of a sparse MLA grid (head group, split, token:
 * ops_dsa.c) works: token t, heads [h0, h0 + HG), and its split's records
 * [j0, j0 + nrec) of the token's selection, ntile tiles of them.
 */
struct dsa_split {
	uint32_t t, h0, split, j0, nrec, ntile;
};

/* The block's token, head group, split and first record (no memory
 * read: before the programmatic wait too). */
__device__ __forceinline__ dsa_split dsa_split_at(uint32_t HG, uint32_t n_split, uint32_t tps,
						  uint32_t n_hg)
{
	dsa_split r;
	uint32_t hg = blockIdx.x % n_hg;

	r.split = blockIdx.x / n_hg % n_split;
	r.t = blockIdx.x / n_hg / n_split;
	r.h0 = hg * HG;
	r.j0 = r.split * tps * DSA_MLA_L;
	r.nrec = r.ntile = 0;
	return r;
}

/* Its records and tiles from the token's selection count n (n_sel). */
__device__ __forceinline__ void dsa_split_n(dsa_split *r, uint32_t n, uint32_t topk, uint32_t tps)
{
	n = dsa_minu(n, topk);
	r->nrec = r->j0 < n ? dsa_minu(n - r->j0, tps * DSA_MLA_L) : 0;
	r->ntile = (r->nrec + DSA_MLA_L - 1) / DSA_MLA_L;
}

__device__ __forceinline__ dsa_split dsa_split_of(const uint32_t *n_sel, uint32_t topk,
						  uint32_t HG, uint32_t n_split, uint32_t tps,
						  uint32_t n_hg)
{
	dsa_split r = dsa_split_at(HG, n_split, tps, n_hg);

	dsa_split_n(&r, n_sel[r.t], topk, tps);
	return r;
}

/* Swizzled 16-byte chunk of a row: rows of a tile 8 apart no longer share
 * banks, so ldmatrix reads 8 rows without conflicts. */
__device__ __forceinline__ uint32_t dsa_swz(uint32_t row, uint32_t chunk)
{
	return (chunk ^ (row & 7)) * 16;
}

/*
 * Start copying bytes [b0, b0 + nb) of tile records [j0, j0 + 64) of the
 * split into dst, nb bytes a record (records >= nrec zero-filled).
 */
__device__ __forceinline__ void dsa_mla_issue(uint8_t *dst, const uint32_t *slots, uint32_t j0,
					      uint32_t nrec, const uint8_t *region, uint32_t rec,
					      uint32_t b0, uint32_t nb)
{
	uint32_t nch = nb / 16;

	for (uint32_t u = threadIdx.x; u < DSA_MLA_L * nch; u += blockDim.x) {
		uint32_t j = u / nch, ch = u - j * nch;
		bool ok = j0 + j < nrec;

		dsa_cp16(dst + j * nb + ch * 16,
			 ok ? region + (size_t)slots[j0 + j] * rec + b0 + ch * 16 : region,
			 ok ? 16 : 0);
	}
}

/*
 * The queries of head group h0 of token t, R head rows a warp (rows warp +
 * 8 i, 8 warps): dsa_mla_qload reads them into registers (issued before
 * the first records' copies, so they do not queue behind them),
 * dsa_mla_qstore writes them to shared memory: q_lat times 2^kq (largest
 * magnitude just below 2^15) as fp16 hi + lo rows of 1024 bytes
 * (swizzled), q_pe as bf16 hi + lo rows of 128 bytes; kq, and m = -inf,
 * l = 0 per head. Heads past H are zeros.
 */
template <int R>
__device__ __forceinline__ void dsa_mla_qload(float (*v)[18], const float *q_lat,
					      const float *q_pe, uint32_t t, uint32_t H,
					      uint32_t h0, uint32_t dr)
{
	uint32_t lane = threadIdx.x & 31;

#pragma unroll
	for (int i = 0; i < R; i++) {
		uint32_t h = h0 + (threadIdx.x >> 5) + 8 * i;
		const float *ql = q_lat + ((size_t)t * H + h) * 512;
		const float *qp = q_pe + ((size_t)t * H + h) * dr;

#pragma unroll
		for (int k = 0; k < 16; k++)
			v[i][k] = h < H ? ql[32 * k + lane] : 0.0f;
		v[i][16] = h < H && lane < dr ? qp[lane] : 0.0f;
		v[i][17] = h < H && lane + 32 < dr ? qp[lane + 32] : 0.0f;
	}
}

/*
 * The k-slot of latent dim d in haccel_dsa_mla_h16's products: dims
 * [64 b + 16 c + 4 s, +4) (one 4-byte word of a lane's 16-byte load of a
 * record's codes) are k-slots 2 c, 2 c + 1, 2 c + 8, 2 c + 9 of k-step s of
 * block b, where mma's A fragment wants them; the queries are stored in
 * the same order.
 */
__device__ __forceinline__ uint32_t dsa_m16_kslot(uint32_t d)
{
	uint32_t c = (d >> 4) & 3, s = (d >> 2) & 3, x = d & 3;

	return (d & ~63u) + 16 * s + 2 * c + (x & 1) + 8 * (x >> 1);
}

template <int R, bool WG = false>
__device__ __forceinline__ void dsa_mla_qstore(uint8_t *qh, uint8_t *qpe, int *kq, float *m_run,
					       float *l_run, const float (*v)[18], uint32_t HG)
{
	uint32_t lane = threadIdx.x & 31;

#pragma unroll
	for (int i = 0; i < R; i++) {
		uint32_t r = (threadIdx.x >> 5) + 8 * i;
		float mx = 0.0f;

#pragma unroll
		for (int k = 0; k < 16; k++)
			mx = fmaxf(mx, hac_abs_finite(v[i][k]));
		uint32_t ab = hac_f2u(warp_max(mx));
		/* frexp exponent x of the largest magnitude: scale by
		 * 2^(15 - x), kept in the normal range. */
		int e = ab ? 15 - ((int)(ab >> 23) - 126) : 0;
		e = e > 126 ? 126 : e < -126 ? -126 : e;
		float f = hac_pow2f(e);
		/* row n, dim d at n rb + (d / 64) bb + element kv % 64 of the
		 * row of 64 (swizzled 16-byte chunks), kv = d, or with WG (the
		 * wgmma operand, [8][2 HG][128 bytes]) kv = dsa_m16_kslot(d) */
		uint32_t rb = WG ? 128 : 1024, bb = WG ? 2 * HG * 128 : 128;
		uint16_t *qhi = (uint16_t *)(qh + r * rb);
		uint16_t *qlo = (uint16_t *)(qh + (HG + r) * rb);
#pragma unroll
		for (int k = 0; k < 16; k++) {
			uint32_t d = 32 * k + lane, kv = WG ? dsa_m16_kslot(d) : d;
			uint32_t o = ((d >> 6) * bb + dsa_swz(r, (kv >> 3) & 7)) / 2 + (kv & 7);
			float x = v[i][k] * f;
			uint16_t hi = dsa_f2h(x);

			qhi[o] = hi;
			qlo[o] = dsa_f2h(x - dsa_h2f(hi));
		}
#pragma unroll
		for (int k = 0; k < 2; k++) {
			uint32_t d = lane + 32 * k, o = (dsa_swz(r, d >> 3) >> 1) + (d & 7);
			float x = v[i][16 + k];
			uint16_t hi = hac_bf16_from_float(x);
			uint16_t lo = hac_bf16_from_float(x - hac_bf16_to_float(hi));

			((uint16_t *)(qpe + r * 128))[o] = hi;
			((uint16_t *)(qpe + (HG + r) * 128))[o] = lo;
		}
		if (lane == 0) {
			kq[r] = e;
			m_run[r] = -INFINITY;
			l_run[r] = 0.0f;
		}
	}
}

/*
 * Step (2) of a tile: the latent codes of its nh records (codes at lat +
 * j lstride, the 4 tile scales at sc + j sstride) to fp16 in vh, times
 * 2^(e - enew[tau]), 16 codes a thread step (record u / 32, 16-byte chunk
 * u % 32); records past nh become zeros.
 */
__device__ __forceinline__ void dsa_mla_convert(uint8_t *vh, const uint8_t *lat, uint32_t lstride,
						const uint8_t *sc, uint32_t sstride, uint32_t nh,
						const int *enew)
{
	for (uint32_t u = threadIdx.x; u < DSA_MLA_L * 32; u += blockDim.x) {
		uint32_t j = u >> 5, ch = u & 31, tau = ch >> 3;
		uint32_t hv[8] = { 0, 0, 0, 0, 0, 0, 0, 0 };

		if (j < nh) {
			uint4 cv = *(const uint4 *)(lat + j * lstride + ch * 16);
			int e = dsa_scale_bits_exp(dsa_ld32(sc + j * sstride + 4 * tau));
			uint32_t f = dsa_h2pow2(e - dsa_pick4(enew, tau));
			uint32_t w4[4] = { cv.x, cv.y, cv.z, cv.w };

#pragma unroll
			for (int i = 0; i < 4; i++) {
				hv[2 * i] = dsa_hmul2(dsa_e4m3x2(w4[i] & 0xffff), f);
				hv[2 * i + 1] = dsa_hmul2(dsa_e4m3x2_hi(w4[i]), f);
			}
		}
		*(uint4 *)(vh + j * 1024 + dsa_swz(j, 2 * ch)) =
			make_uint4(hv[0], hv[1], hv[2], hv[3]);
		*(uint4 *)(vh + j * 1024 + dsa_swz(j, 2 * ch + 1)) =
			make_uint4(hv[4], hv[5], hv[6], hv[7]);
	}
}

/*
 * Step (4) of a tile, R head rows a warp (rows warp + 8 i, 8 warps), two
 * records a lane: the row's logits (the sum of np partial rows of S, HG
 * rows of DSA_MLA_SROW floats apart), the running max m and sum l, the
 * factor alpha for O, P in fp16 (l sums the rounded values). The R rows'
 * reductions are interleaved.
 */
template <int R>
__device__ __forceinline__ void dsa_mla_softmax(uint8_t *P, float *m_run, float *l_run,
						float *alpha, const float *S, uint32_t np,
						uint32_t HG, uint32_t nh)
{
	uint32_t lane = threadIdx.x & 31, w = threadIdx.x >> 5;
	bool v0 = lane < nh, v1 = lane + 32 < nh;
	float s0[R], s1[R], mx[R], mo[R], ps[R];
	uint16_t p0[R], p1[R];

#pragma unroll
	for (int i = 0; i < R; i++) {
		uint32_t r = w + 8 * i;

		s0[i] = s1[i] = 0.0f;
		for (uint32_t k = 0; k < np; k++) {
			s0[i] += S[(k * HG + r) * DSA_MLA_SROW + lane];
			s1[i] += S[(k * HG + r) * DSA_MLA_SROW + lane + 32];
		}
		s0[i] = v0 ? s0[i] : -INFINITY;
		s1[i] = v1 ? s1[i] : -INFINITY;
		/* fmaxf skips NaN scores, as the CPU's max does; the NaN
		 * still reaches l and O through exp. */
		mx[i] = fmaxf(s0[i], s1[i]);
		mo[i] = m_run[r];
	}
#pragma unroll
	for (int o = 16; o; o >>= 1)
#pragma unroll
		for (int i = 0; i < R; i++)
			mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], o));
#pragma unroll
	for (int i = 0; i < R; i++) {
		mx[i] = fmaxf(mo[i], mx[i]);
		p0[i] = dsa_f2h(v0 ? expf(s0[i] - mx[i]) : 0.0f);
		p1[i] = dsa_f2h(v1 ? expf(s1[i] - mx[i]) : 0.0f);
		ps[i] = dsa_h2f(p0[i]) + dsa_h2f(p1[i]);
	}
#pragma unroll
	for (int o = 16; o; o >>= 1)
#pragma unroll
		for (int i = 0; i < R; i++)
			ps[i] += __shfl_xor_sync(0xffffffffu, ps[i], o);
#pragma unroll
	for (int i = 0; i < R; i++) {
		uint32_t r = w + 8 * i;
		uint16_t *prow = (uint16_t *)(P + r * 128);

		prow[(dsa_swz(r, lane >> 3) >> 1) + (lane & 7)] = p0[i];
		prow[(dsa_swz(r, (lane + 32) >> 3) >> 1) + (lane & 7)] = p1[i];
		if (lane == 0) {
			float a = expf(mo[i] - mx[i]);

			alpha[r] = a;
			l_run[r] = l_run[r] * a + ps[i];
			m_run[r] = mx[i];
		}
	}
}

/*
 * The largest scale exponent of each latent tile of a tile's records:
 * thread tid holds e, that of record tid % 64 in latent tile tid / 64
 * (-1000 for none); enew[tau] = max(eref[tau], the tile's largest), the
 * same in every thread. emax_w: a word a warp. Every thread calls it (a
 * barrier).
 */
__device__ __forceinline__ void dsa_mla_tile_emax(int e, int *emax_w, const int *eref, int *enew)
{
	e = dsa_warp_max_i(e);
	if ((threadIdx.x & 31) == 0)
		emax_w[threadIdx.x >> 5] = e;
	__syncthreads();
#pragma unroll
	for (int tau = 0; tau < 4; tau++)
		enew[tau] = dsa_maxi(eref[tau], dsa_maxi(emax_w[2 * tau], emax_w[2 * tau + 1]));
}

/*
 * The split's slots: record j (j < nrec) of its selection st, through the
 * block table bt (a -1 position, past n_sel, is never read).
 */
__device__ __forceinline__ void dsa_mla_slots(uint32_t *slots, const int32_t *st,
					      const uint32_t *bt, uint32_t nrec, uint32_t pt)
{
	for (uint32_t j = threadIdx.x; j < nrec; j += DSA_MLA_THREADS) {
		int32_t p = st[j];
		uint32_t up = p < 0 ? 0 : (uint32_t)p;

		slots[j] = __ldg(&bt[up / pt]) * pt + up % pt;
	}
}

/* O (a warp's ND n-tiles, rows g and g + 8) times r0 and r1. */
template <int ND>
__device__ __forceinline__ void dsa_mla_rescale(float (*o)[4], float r0, float r1)
{
#pragma unroll
	for (uint32_t n2 = 0; n2 < ND; n2++) {
		o[n2][0] *= r0;
		o[n2][1] *= r0;
		o[n2][2] *= r1;
		o[n2][3] *= r1;
	}
}

/* O += A V for k-step kt (records [16 kt, +16)): A the warp's fragment of
 * P, V from vh by ldmatrix.trans, dims [d0w, d0w + 8 ND). */
template <int ND>
__device__ __forceinline__ void dsa_mla_pv(float (*o)[4], const uint32_t *a, const uint8_t *vh,
					   uint32_t kt, uint32_t d0w)
{
	uint32_t lane = threadIdx.x & 31, j = kt * 16 + ((lane >> 3) & 1) * 8 + (lane & 7);

#pragma unroll
	for (uint32_t n2 = 0; n2 < ND; n2 += 2) {
		uint32_t b[4];

		dsa_ldsm4t(b, vh + j * 1024 + dsa_swz(j, (d0w >> 3) + n2 + (lane >> 4)));
		dsa_mma_f16(o[n2], a, b);
		dsa_mma_f16(o[n2 + 1], a, b + 2);
	}
}

/*
 * The end of a split: a warp's accumulators o[ND][4] (head rows hw + g and
 * hw + g + 8, dims d0w + 8 n2 + 2 c, + 1) times fo (2^Eref of their latent
 * tile) go to o_lat divided by l with one split, else to the partials with
 * the heads' (m, l) (n_rows = tokens x splits rows of partials). Waits for
 * the block's copies, and takes a barrier first.
 */
template <int ND>
__device__ __forceinline__ void dsa_mla_out(float *o_lat, float *part, const float (*o)[4],
					    float fo, const float *m_run, const float *l_run,
					    uint32_t t, uint32_t H, uint32_t hw, uint32_t d0w,
					    uint32_t h0, uint32_t HG, uint32_t n_split,
					    uint32_t split, uint32_t nrec, uint32_t n_rows)
{
	uint32_t lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;

	dsa_cp_wait<0>();
	/* With no tile, the queries' m and l were never behind a barrier. */
	__syncthreads();
#pragma unroll
	for (int hh = 0; hh < 2; hh++) {
		uint32_t r = hw - h0 + g + 8 * hh, h = hw + g + 8 * hh;
		float inv = n_split == 1 ? (nrec ? 1.0f / l_run[r] : 0.0f) : 1.0f;
		float *out = n_split == 1 ? o_lat + ((size_t)t * H + h) * 512 :
					    part + (((size_t)t * n_split + split) * H + h) * 512;

		if (h >= H)
			continue;
#pragma unroll
		for (uint32_t n2 = 0; n2 < ND; n2++) {
			uint32_t d = d0w + n2 * 8 + 2 * c;

			/* With no record o is 0 and fo 0: zeros, not NaN. */
			if (n_split == 1 && !nrec)
				*(float2 *)(out + d) = make_float2(0.0f, 0.0f);
			else
				*(float2 *)(out + d) = make_float2(o[n2][2 * hh] * fo * inv,
								   o[n2][2 * hh + 1] * fo * inv);
		}
	}
	if (n_split > 1)
		for (uint32_t r = threadIdx.x; r < HG; r += blockDim.x) {
			float *ml = part + (size_t)n_rows * H * 512 +
				    (((size_t)t * n_split + split) * H + h0 + r) * 2;

			if (h0 + r < H) {
				ml[0] = m_run[r];
				ml[1] = l_run[r];
			}
		}
}

/*
 * Block (head group, split, token), 8 warps, HG = 16 NMT heads. The split's
 * selected records go through shared memory 64 at a time, with an online
 * softmax across tiles (flash decoding). A record is copied in two parts:
 * its latent codes into lat (one buffer: dead once converted, so the next
 * tile's codes load while this one's scores and values are computed), its
 * scales and rope into aux (two buffers: read until the scores are done).
 *
 * Operands, exact or rounded once: the latent codes to fp16 times
 * 2^(e - Eref_tau), Eref_tau the largest scale exponent of latent tile tau
 * seen so far (the accumulators are rescaled when it grows); q_lat per
 * head times 2^kq (largest magnitude just below 2^15) as fp16 hi + lo, so
 * the logits keep about 22 bits; q_pe as bf16 hi + lo against the bf16
 * rope bytes; probabilities to fp16 (l sums the rounded values, so O / l
 * weights are consistent).
 *
 * Per tile: (1) largest scale exponent per latent tile, (2) latent to fp16
 * vh[64][512] (swizzled), (3) S = q . c: warp (mt = w % NMT, n-tiles
 * NMT (w / NMT) ...), A = queries by ldmatrix, B = vh by ldmatrix, one
 * accumulator per latent tile (their factors differ), rope in bf16 from
 * aux; (4) softmax, a warp per head row: running max m, sum l, factor
 * alpha, P in fp16; (5) O += P vh: warp (mt = w % NMT, dims [64 NMT (w /
 * NMT), +64 NMT)), B by ldmatrix.trans, accumulators rescaled by alpha and
 * the Eref step. Partial (m, l, O) go to scratch for haccel_dsa_mla_combine,
 * or with one split O / l straight to o_lat.
 *
 * Shared memory (ops_dsa.c computes the same size): lat[64][512],
 * aux[2][64][16 + 2 dr], vh[64][1024 bytes], q hi/lo [2][HG][1024 bytes],
 * q_pe hi/lo [2][HG][128 bytes], S[HG][72], P[HG][128 bytes], the split's
 * slots, m/l/alpha/kq per head, 8 warp maxima.
 */
template <int NMT>
__device__ __forceinline__ void dsa_mla(float *o_lat, float *part, const float *q_lat,
					const float *q_pe, uint32_t H, uint32_t dr,
					const int32_t *sel, const uint32_t *n_sel, uint32_t topk,
					const uint32_t *bt_row, const uint8_t *region,
					const uint32_t *block_tables, uint32_t bt_stride,
					uint32_t pt, float scale, uint32_t n_split, uint32_t tps,
					uint32_t n_hg)
{
	const uint32_t HG = 16 * NMT, ND = 8 * NMT;
	uint32_t tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, c = lane & 3;
	const dsa_split sp = dsa_split_of(n_sel, topk, HG, n_split, tps, n_hg);
	uint32_t t = sp.t, h0 = sp.h0, split = sp.split, j0 = sp.j0, nrec = sp.nrec;
	uint32_t ntile = sp.ntile;
	uint32_t rec = 528 + 2 * dr, ax = 16 + 2 * dr;
	const uint32_t *bt = block_tables + (size_t)bt_row[t] * bt_stride;

	uint8_t *lat = dsa_smem;
	uint8_t *aux = lat + DSA_MLA_L * 512;
	uint8_t *vh = aux + 2 * DSA_MLA_L * ax;
	uint8_t *qh = vh + DSA_MLA_L * 1024;            /* [hi, lo][HG][1024 bytes] */
	uint8_t *qpe = qh + 2 * HG * 1024;              /* [hi, lo][HG][128 bytes] */
	float *S = (float *)(qpe + 2 * HG * 128);
	uint8_t *P = (uint8_t *)(S + HG * DSA_MLA_SROW);
	uint32_t *slots = (uint32_t *)(P + HG * 128);
	float *m_run = (float *)(slots + tps * DSA_MLA_L);
	float *l_run = m_run + HG, *alpha = l_run + HG;
	int *kq = (int *)(alpha + HG);
	int *emax_w = kq + HG;

	float qv[2 * NMT][18];

	dsa_mla_qload<2 * NMT>(qv, q_lat, q_pe, t, H, h0, dr);
	dsa_mla_slots(slots, sel + (size_t)t * topk + j0, bt, nrec, pt);
	__syncthreads();
	if (ntile) {
		dsa_mla_issue(aux, slots, 0, nrec, region, rec, 512, ax);
		dsa_mla_issue(lat, slots, 0, nrec, region, rec, 0, 512);
	}
	dsa_cp_commit();

	/* Queries, while the first tile loads. */
	dsa_mla_qstore<2 * NMT>(qh, qpe, kq, m_run, l_run, qv, HG);

	uint32_t mt_o = warp % NMT, d0w = warp / NMT * 64 * NMT, tau_w = d0w / 128;
	float o[ND][4];
	int eref[4] = { -1000, -1000, -1000, -1000 };

#pragma unroll
	for (uint32_t n2 = 0; n2 < ND; n2++)
		o[n2][0] = o[n2][1] = o[n2][2] = o[n2][3] = 0.0f;
	for (uint32_t it = 0; it < ntile; it++) {
		const uint8_t *at = aux + (it & 1) * DSA_MLA_L * ax;
		uint32_t nh = dsa_minu(DSA_MLA_L, nrec - it * DSA_MLA_L);
		int enew[4];

		/* This tile's copies are in (and, the first time, the
		 * queries written); the other aux buffer was last read
		 * before the previous iteration's barriers. */
		dsa_cp_wait<0>();
		__syncthreads();
		if (it + 1 < ntile)
			dsa_mla_issue(aux + ((it + 1) & 1) * DSA_MLA_L * ax, slots,
				      (it + 1) * DSA_MLA_L, nrec, region, rec, 512, ax);
		dsa_cp_commit();

		/* (1) thread (tau = tid / 64, record tid % 64) */
		{
			uint32_t j = tid & 63, tau = tid >> 6;
			int e = dsa_scale_bits_exp(dsa_ld32(at + j * ax + 4 * tau));

			dsa_mla_tile_emax(j < nh ? e : -1000, emax_w, eref, enew);
		}

		/* (2) the latent codes to fp16 */
		dsa_mla_convert(vh, lat, 512, at, ax, nh, enew);
		__syncthreads();
		/* lat is converted: the next tile's codes may come in. */
		if (it + 1 < ntile)
			dsa_mla_issue(lat, slots, (it + 1) * DSA_MLA_L, nrec, region, rec, 0, 512);
		dsa_cp_commit();

		/* (3) S = (q_lat . c + q_pe . kpe) * scale */
		{
			uint32_t mt = warp % NMT, nt0 = warp / NMT * NMT;
			uint32_t row = mt * 16 + (lane & 15);
			float al[NMT][4][4], ar[NMT][4];

#pragma unroll
			for (int u = 0; u < NMT; u++)
#pragma unroll
				for (int i = 0; i < 4; i++) {
					ar[u][i] = 0.0f;
#pragma unroll
					for (int tau = 0; tau < 4; tau++)
						al[u][tau][i] = 0.0f;
				}
#pragma unroll
			for (int tau = 0; tau < 4; tau++)
#pragma unroll
				for (uint32_t kt = 8 * tau; kt < 8 * tau + 8; kt++) {
					uint32_t ahi[4], alo[4];
					uint32_t ch = dsa_swz(row, 2 * kt + (lane >> 4));

					dsa_ldsm4(ahi, qh + row * 1024 + ch);
					dsa_ldsm4(alo, qh + (HG + row) * 1024 + ch);
#pragma unroll
					for (int u = 0; u < NMT; u++) {
						uint32_t b[2], j = (nt0 + u) * 8 + (lane & 7);
						uint32_t cb = 2 * kt + ((lane >> 3) & 1);

						dsa_ldsm2(b, vh + j * 1024 + dsa_swz(j, cb));
						dsa_mma_f16(al[u][tau], ahi, b);
						dsa_mma_f16(al[u][tau], alo, b);
					}
				}
			for (uint32_t kt = 0; kt < dr / 16; kt++) {
				uint32_t ahi[4], alo[4], ch = dsa_swz(row, 2 * kt + (lane >> 4));

				dsa_ldsm4(ahi, qpe + row * 128 + ch);
				dsa_ldsm4(alo, qpe + (HG + row) * 128 + ch);
#pragma unroll
				for (int u = 0; u < NMT; u++) {
					const uint8_t *rp = at + ((nt0 + u) * 8 + g) * ax + 16 +
							    (kt * 16 + 2 * c) * 2;
					uint32_t b[2] = { dsa_ld32(rp), dsa_ld32(rp + 16) };

					hac_mma_bf16(ar[u], ahi, b);
					hac_mma_bf16(ar[u], alo, b);
				}
			}
#pragma unroll
			for (int hh = 0; hh < 2; hh++) {
				uint32_t r = mt * 16 + g + 8 * hh;
				float f[4];

#pragma unroll
				for (int tau = 0; tau < 4; tau++)
					f[tau] = dsa_pow2c(enew[tau] - kq[r]);
#pragma unroll
				for (int u = 0; u < NMT; u++)
#pragma unroll
					for (int e = 0; e < 2; e++) {
						int i = 2 * hh + e;
						float sl = al[u][0][i] * f[0] + al[u][1][i] * f[1] +
							   al[u][2][i] * f[2] + al[u][3][i] * f[3];

						S[r * DSA_MLA_SROW + (nt0 + u) * 8 + 2 * c + e] =
							(sl + ar[u][i]) * scale;
					}
			}
		}
		__syncthreads();

		/* (4) softmax, a warp per head row */
		dsa_mla_softmax<2 * NMT>(P, m_run, l_run, alpha, S, 1, HG, nh);
		__syncthreads();

		/* (5) O = O * alpha * 2^(Eref - Enew) + P vh */
		{
			float rs = dsa_pow2c(dsa_pick4(eref, tau_w) - dsa_pick4(enew, tau_w));
			float r0 = alpha[mt_o * 16 + g] * rs, r1 = alpha[mt_o * 16 + g + 8] * rs;
			uint32_t row = mt_o * 16 + (lane & 15);

			dsa_mla_rescale<ND>(o, r0, r1);
#pragma unroll
			for (uint32_t kt = 0; kt < 4; kt++) {
				uint32_t a[4];

				dsa_ldsm4(a, P + row * 128 + dsa_swz(row, 2 * kt + (lane >> 4)));
				dsa_mla_pv<ND>(o, a, vh, kt, d0w);
			}
		}
#pragma unroll
		for (int tau = 0; tau < 4; tau++)
			eref[tau] = enew[tau];
	}
	dsa_mla_out<ND>(o_lat, part, o, dsa_pow2c(dsa_pick4(eref, tau_w)), m_run, l_run, t, H,
			h0 + mt_o * 16, d0w, h0, HG, n_split, split, nrec, gridDim.x / n_hg);
}

#define DSA_M16_WARPS (DSA_MLA_THREADS / 32)
#define DSA_M16_NST 3           /* tile buffers */
#define DSA_M16_SROW 68         /* floats a row of S (no bank conflicts in its stores) */

/* The position of 16-byte chunk ch in record j's row of codes: both 8
 * consecutive records' chunk ch (ldmatrix) and records j, j + 1 (j even)
 * chunks 4 a .. 4 a + 3 (16-byte loads) meet 8 distinct bank groups. */
__device__ __forceinline__ uint32_t dsa_m16_cpos(uint32_t j, uint32_t ch)
{
	return ch ^ ((j & 1) << 2 | (j >> 1 & 3));
}

/*
 * Start copying records [j0, j0 + 64) of the split (records >= nrec
 * zero-filled), rec bytes a record, into one tile's buffers: the latent
 * codes to codes[64][512] (chunks at dsa_m16_cpos), the 4 tile scales to
 * scl[64][16 bytes], the rope to rope[64][128 bytes] as a wgmma operand
 * (128-byte swizzle). A warp a record (8 warps, 8 records each), a lane
 * its 16-byte pieces lane and lane + 32 (a record has 33 to 41). (Bulk
 * copies by the copy engine, a record each, measured slower on an H200:
 * 0.048 vs 0.040 ms at batch 32.)
 */
__device__ __forceinline__ void dsa_m16_issue(uint8_t *codes, uint8_t *scl, uint8_t *rope,
					      const uint32_t *slots, uint32_t j0, uint32_t nrec,
					      const uint8_t *region, uint32_t rec)
{
	const uint32_t NR = DSA_MLA_L / DSA_M16_WARPS;
	uint32_t lane = threadIdx.x & 31, w = threadIdx.x >> 5, nch = rec / 16, sl[NR];
	/* Records w + 8 i: j % 8 = w, so the swizzles are the same for all. */
	uint8_t *d0 = codes + 16 * dsa_m16_cpos(w, lane);
	uint8_t *d1 = lane ? rope + dsa_swz(w, lane - 1) : scl;
	uint32_t st1 = lane ? 128 : 16;

	/* The slots first: the copies' "memory" clobbers would otherwise
	 * keep each slot's load behind the previous record's copies. */
#pragma unroll
	for (uint32_t i = 0; i < NR; i++) {
		uint32_t j = w + DSA_M16_WARPS * i;

		sl[i] = j0 + j < nrec ? slots[j0 + j] : 0;
	}
#pragma unroll
	for (uint32_t i = 0; i < NR; i++) {
		uint32_t j = w + DSA_M16_WARPS * i;
		bool ok = j0 + j < nrec;
		const uint8_t *src = region + (ok ? (size_t)sl[i] * rec + 16 * lane : 0);
		uint32_t n = ok ? 16 : 0;

		dsa_cp16(d0 + j * 512, src, n);
		if (lane + 32 < nch)
			dsa_cp16(d1 + j * st1, src + (ok ? 512 : 0), n);
	}
}

/*
 * Two k-steps of V^T's A fragments (O^T's rows: dims 2 g and 2 g + 1 of a
 * 16-dim chunk; k: 32 records) from the codes: ldmatrix.trans of the
 * lane's row at p gives a lane 4 codes, two records by two dims, which
 * one byte permute makes the fragments of the two rows.
 */
__device__ __forceinline__ void dsa_m16_vfrag(uint32_t (*a)[4], const uint8_t *p)
{
	uint32_t r[4];

	dsa_ldsm4t(r, p);
#pragma unroll
	for (uint32_t h2 = 0; h2 < 2; h2++) {
		uint32_t t0 = dsa_prmt3120(r[2 * h2]);
		uint32_t t1 = dsa_prmt3120(r[2 * h2 + 1]);

		a[h2][0] = dsa_e4m3x2(t0 & 0xffff);
		a[h2][1] = dsa_e4m3x2_hi(t0);
		a[h2][2] = dsa_e4m3x2(t1 & 0xffff);
		a[h2][3] = dsa_e4m3x2_hi(t1);
	}
}

/*
 * Step (3) of a tile (haccel_dsa_mla_h16), two head rows a warp (rows warp
 * and warp + 8), records 2 lane and 2 lane + 1: the logits (the sum of the
 * two warpgroups' partial rows of S), the running max m and sum l, alpha,
 * and P in fp16 (l sums the rounded values) times fac_tau = 2^(15 + e_j,tau
 * - Enew_tau) for each latent tile tau, the MMA's B for O: P[tau][row]
 * [128 bytes], swizzled. fac_tau is a power of two, 2^15 at most (P <= 1),
 * so the products are exact unless they fall below the fp16 normals.
 */
__device__ __forceinline__ void dsa_m16_softmax(uint8_t *P, float *m_run, float *l_run,
						float *alpha, const float *S, const uint8_t *scl,
						const int *enew, uint32_t nh)
{
	const uint32_t HG = 16;
	uint32_t lane = threadIdx.x & 31, w = threadIdx.x >> 5, j = 2 * lane;
	bool v0 = j < nh, v1 = j + 1 < nh;
	float s0[2], s1[2], mx[2], mo[2], ps[2];
	uint32_t p01[2], f[4];

#pragma unroll
	for (int i = 0; i < 2; i++) {
		uint32_t r = w + 8 * i;
		float2 a = *(const float2 *)(S + r * DSA_M16_SROW + j);
		float2 b = *(const float2 *)(S + (HG + r) * DSA_M16_SROW + j);

		s0[i] = v0 ? a.x + b.x : -INFINITY;
		s1[i] = v1 ? a.y + b.y : -INFINITY;
		/* fmaxf skips NaN scores, as the CPU's max does; the NaN
		 * still reaches l and O through exp. */
		mx[i] = fmaxf(s0[i], s1[i]);
		mo[i] = m_run[r];
	}
	{
		uint4 e0 = *(const uint4 *)(scl + j * 16), e1 = *(const uint4 *)(scl + j * 16 + 16);
		uint32_t a0[4] = { e0.x, e0.y, e0.z, e0.w }, a1[4] = { e1.x, e1.y, e1.z, e1.w };

#pragma unroll
		for (int tau = 0; tau < 4; tau++) {
			int x0 = v0 ? dsa_scale_bits_exp(a0[tau]) : -1000;
			int x1 = v1 ? dsa_scale_bits_exp(a1[tau]) : -1000;

			f[tau] = dsa_h2pow2x2(15 + x0 - enew[tau], 15 + x1 - enew[tau]);
		}
	}
#pragma unroll
	for (int o = 16; o; o >>= 1)
#pragma unroll
		for (int i = 0; i < 2; i++)
			mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], o));
#pragma unroll
	for (int i = 0; i < 2; i++) {
		mx[i] = fmaxf(mo[i], mx[i]);
		uint16_t p0 = dsa_f2h(v0 ? dsa_ex2(s0[i] - mx[i]) : 0.0f);
		uint16_t p1 = dsa_f2h(v1 ? dsa_ex2(s1[i] - mx[i]) : 0.0f);

		ps[i] = dsa_h2f(p0) + dsa_h2f(p1);
		p01[i] = p0 | (uint32_t)p1 << 16;
	}
#pragma unroll
	for (int o = 16; o; o >>= 1)
#pragma unroll
		for (int i = 0; i < 2; i++)
			ps[i] += __shfl_xor_sync(0xffffffffu, ps[i], o);
#pragma unroll
	for (int i = 0; i < 2; i++) {
		uint32_t r = w + 8 * i, o = r * 128 + dsa_swz(r, lane >> 2) + 4 * (lane & 3);

#pragma unroll
		for (int tau = 0; tau < 4; tau++)
			*(uint32_t *)(P + tau * HG * 128 + o) = dsa_hmul2(p01[i], f[tau]);
		if (lane == 0) {
			float a = dsa_ex2(mo[i] - mx[i]);

			alpha[r] = a;
			l_run[r] = l_run[r] * a + ps[i];
			m_run[r] = mx[i];
		}
	}
}

/*
 * The end of a 16-head split: O^T (NB dim blocks of 64 from db0, this
 * thread's rows 16 wq + 2 g and + 1, heads 8 (i >> 1) + 2 c + (i & 1))
 * times fo[latent tile] to the partials, or also over l to o_lat with one
 * split.
 */
template <int NB>
__device__ __forceinline__ void dsa_m16_store(float *o_lat, float *part, const float (*o)[8],
					      const float *fo, const float *l_run, uint32_t t,
					      uint32_t H, uint32_t h0, uint32_t n_split,
					      uint32_t split, uint32_t nrec, uint32_t db0)
{
	uint32_t lane = threadIdx.x & 31, wq = (threadIdx.x >> 5) & 3, g = lane >> 2, c = lane & 3;

#pragma unroll
	for (int i = 0; i < 4; i++) {
		uint32_t h = h0 + 8 * (i >> 1) + 2 * c + (i & 1);
		float inv = n_split == 1 ? (nrec ? 1.0f / l_run[h - h0] : 0.0f) : 1.0f;
		float *out = n_split == 1 ? o_lat + ((size_t)t * H + h) * 512 :
					    part + (((size_t)t * n_split + split) * H + h) * 512;

		if (h >= H)
			continue;
#pragma unroll
		for (int k = 0; k < NB; k++) {
			uint32_t d = (db0 + k) * 64 + 16 * wq + 2 * g;
			float x0 = o[k][4 * (i >> 1) + (i & 1)], x1 = o[k][4 * (i >> 1) + 2 + (i & 1)];
			float f = fo[k >> 1] * inv;

			/* With no record o is 0 and fo 0: zeros, not NaN. */
			*(float2 *)(out + d) = n_split == 1 && !nrec ? make_float2(0.0f, 0.0f) :
								      make_float2(x0 * f, x1 * f);
		}
	}
}

/* The sparse MLA kernels' parameters (haccel__cuda_sparse_mla passes them
 * in this order) and their names as arguments. */
#define DSA_MLA_PARAMS                                                                     \
	float *o_lat, float *part, const float *q_lat, const float *q_pe, uint32_t H,       \
		uint32_t dr, const int32_t *sel, const uint32_t *n_sel, uint32_t topk,      \
		const uint32_t *bt_row, const uint8_t *region, const uint32_t *block_tables, \
		uint32_t bt_stride, uint32_t pt, float scale, uint32_t n_split, uint32_t tps, \
		uint32_t n_hg
#define DSA_MLA_ARGS                                                                       \
	o_lat, part, q_lat, q_pe, H, dr, sel, n_sel, topk, bt_row, region, block_tables,    \
		bt_stride, pt, scale, n_split, tps, n_hg

/*
 * Sparse MLA for a group of 16 heads on the warpgroup MMA: block (split,
 * token), two warpgroups, one block an SM, many tiles a split (ops_dsa.c,
 * mla_splits). The products are transposed so that a tile's 64 records
 * are the MMA's M: S^T = K Q^T (N = 32: the 16 heads' fp16 hi and lo query
 * rows, K = 512 latent dims) and O^T += V^T P^T (M = 64 dims, N = 16
 * heads, K = 64 records). Both take the latent straight from the copied
 * E4M3 codes into registers as fp16 A fragments (exact), so the latent is
 * read from shared memory once for each product and never stored in
 * fp16: for S a lane's 16-byte load of a record's codes gives the
 * fragments of 4 k-steps, its dims in the order of dsa_m16_kslot (the
 * queries are stored in the same order); for O ldmatrix.trans of 8 records'
 * 16 dims gives a lane 4 codes, two records by two dims, which one byte
 * permute makes the fragments of two rows (dims 2 g, 2 g + 1 of the
 * 16-dim block: O^T's rows are in that order). Records are copied two
 * tiles ahead into three buffers. A record's tile scales are applied where
 * they are constant: to its scores, and to its probabilities for O.
 *
 * Per tile:
 *  - (1) S: warpgroup w takes latent tiles 2 w and 2 w + 1 (one
 *    accumulator each: their scales differ) and the rope's k-steps w and w
 *    + 2 (bf16 hi + lo queries against the bf16 rope bytes, both from
 *    shared memory); each sum times (scale_j,tau 2^-kq), hi + lo, into a
 *    partial row of S[w], in base 2 (times log2 e: the softmax takes 2^x,
 *    and m goes to the combine in base e); and the largest scale exponent
 *    of each latent tile (Enew_tau, thread (tau = tid / 64, record tid %
 *    64));
 *  - (2) softmax (dsa_m16_softmax): P times fac_tau for each latent tile;
 *  - (3) O = O alpha 2^(Eref - Enew) + V^T (P fac_tau)^T: warpgroup w
 *    takes dims [256 w, +256) (latent tiles 2 w, 2 w + 1); O carries
 *    2^(Eref - 15), taken out at the end.
 *
 * Shared memory (1024-byte aligned; ops_dsa.c computes the same size):
 * queries [8][32][128 bytes] (hi rows 0-15, lo 16-31, 2^kq times q_lat),
 * q_pe [32][128 bytes] (bf16 hi, lo), P [4][16][128 bytes], rope [3][64]
 * [128 bytes], codes [3][64][512], scales [3][64][16 bytes], S[2][16][68],
 * m/l/alpha/kq per head, 8 warp maxima, the split's slots.
 */
HACCEL_K void __launch_bounds__(DSA_MLA_THREADS, 1)
haccel_dsa_mla_h16(DSA_MLA_PARAMS)
{
	HAC_PDL();
	const uint32_t HG = 16, NST = DSA_M16_NST;
	uint32_t tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, c = lane & 3;
	uint32_t wg = warp >> 2, wq = warp & 3;
	const dsa_split sp = dsa_split_of(n_sel, topk, HG, n_split, tps, n_hg);
	uint32_t t = sp.t, h0 = sp.h0, split = sp.split, j0 = sp.j0, nrec = sp.nrec;
	uint32_t ntile = sp.ntile;
	uint32_t rec = 528 + 2 * dr, nrope = dr / 16;
	const uint32_t *bt = block_tables + (size_t)bt_row[t] * bt_stride;

	uint8_t *qb = dsa_smem + ((1024 - (hac_saddr(dsa_smem) & 1023)) & 1023);
	uint8_t *qpb = qb + 32768, *pb = qpb + 4096;
	uint8_t *rope = pb + 8192;                      /* [3][64][128 bytes] */
	uint8_t *codes = rope + NST * 8192;             /* [3][64][512] */
	uint8_t *scl = codes + NST * 32768;             /* [3][64][16 bytes] */
	float *Sw = (float *)(scl + NST * 1024);        /* [2][16][68] */
	float *m_run = Sw + 2 * HG * DSA_M16_SROW;
	float *l_run = m_run + HG, *alpha = l_run + HG;
	int *kq = (int *)(alpha + HG);
	int *emax_w = kq + HG;
	uint32_t *slots = (uint32_t *)(emax_w + 8);

	float qv[2][18];

	dsa_mla_qload<2>(qv, q_lat, q_pe, t, H, h0, dr);
	dsa_mla_slots(slots, sel + (size_t)t * topk + j0, bt, nrec, pt);
	/* The rope buffers' dims past dr are never copied: zeros, once. */
	if (dr < 64)
		for (uint32_t i = tid; i < NST * 8192 / 16; i += DSA_MLA_THREADS)
			*(uint4 *)(rope + 16 * i) = make_uint4(0, 0, 0, 0);
	__syncthreads();
	/* NST - 1 groups in flight from here on: tiles it .. it + NST - 2 */
	for (uint32_t i = 0; i < NST - 1; i++) {
		if (i < ntile)
			dsa_m16_issue(codes + i * 32768, scl + i * 1024, rope + i * 8192, slots,
				      i * DSA_MLA_L, nrec, region, rec);
		dsa_cp_commit();
	}
	/* The queries, while the first tiles load. */
	dsa_mla_qstore<2, true>(qb, qpb, kq, m_run, l_run, qv, HG);
	hac_fence_async();
	__syncthreads();

	/* The MMAs' shared-memory operands: a descriptor each, plus the
	 * offset / 16 (the address field's unit) of a k-step or buffer */
	uint64_t dq = hac_wg_desc(qb), dqp = hac_wg_desc(qpb);
	uint64_t dp = hac_wg_desc(pb), dr0 = hac_wg_desc(rope);
	uint32_t r0 = 16 * wq + g;
	/* S in base 2 (the softmax takes 2^x): the latent sums times
	 * scale_j,tau qs[column], the rope's times rsc */
	float qs[4], rsc = scale * 1.44269504088896341f;

#pragma unroll
	for (int i = 0; i < 4; i++)
		qs[i] = hac_pow2f(-kq[8 * (i >> 1) + 2 * c + (i & 1)]) * rsc;
	float o[4][8];
	int eref[4] = { -1000, -1000, -1000, -1000 };

#pragma unroll
	for (uint32_t k = 0; k < 4; k++)
#pragma unroll
		for (uint32_t i = 0; i < 8; i++)
			o[k][i] = 0.0f;
	for (uint32_t it = 0, b = 0; it < ntile; it++, b = b == NST - 1 ? 0 : b + 1) {
		uint32_t nh = dsa_minu(DSA_MLA_L, nrec - it * DSA_MLA_L);
		uint8_t *cb = codes + b * 32768, *sb = scl + b * 1024;
		int enew[4];

		/* This tile's copies are in (the rope to the MMA too); the
		 * last tile's reads are done. */
		dsa_cp_wait<NST - 2>();
		hac_fence_async();
		__syncthreads();
		/* Tile it + NST - 1 into the buffers of tile it - 1. */
		{
			uint32_t bp = b == 0 ? NST - 1 : b - 1;

			if (it + NST - 1 < ntile)
				dsa_m16_issue(codes + bp * 32768, scl + bp * 1024, rope + bp * 8192,
					      slots, (it + NST - 1) * DSA_MLA_L, nrec, region, rec);
			dsa_cp_commit();
		}

		/* (1) this warpgroup's partial of S: rows (records) r0, r0 +
		 * 8, columns h (hi) and 16 + h (lo), h = 8 n + 2 c + e */
		{
			float sa[2][16], sr[16];

#pragma unroll
			for (int i = 0; i < 16; i++)
				sa[0][i] = sa[1][i] = sr[i] = 0.0f;
			hac_wg_hold<16>(sa[0]);
			hac_wg_hold<16>(sa[1]);
			hac_wg_hold<16>(sr);
			/* all 16 k-steps' A fragments first, then one fence
			 * for all the MMAs */
			uint32_t a[16][4];

#pragma unroll
			for (uint32_t kk = 0; kk < 4; kk++) {
				uint32_t ch = 4 * (4 * wg + kk) + c;
				uint4 u0 = *(const uint4 *)(cb + r0 * 512 + 16 * dsa_m16_cpos(r0, ch));
				uint4 u1 = *(const uint4 *)(cb + (r0 + 8) * 512 +
							    16 * dsa_m16_cpos(r0 + 8, ch));
				uint32_t w0[4] = { u0.x, u0.y, u0.z, u0.w };
				uint32_t w1[4] = { u1.x, u1.y, u1.z, u1.w };

#pragma unroll
				for (uint32_t s = 0; s < 4; s++) {
					a[4 * kk + s][0] = dsa_e4m3x2(w0[s] & 0xffff);
					a[4 * kk + s][1] = dsa_e4m3x2(w1[s] & 0xffff);
					a[4 * kk + s][2] = dsa_e4m3x2_hi(w0[s]);
					a[4 * kk + s][3] = dsa_e4m3x2_hi(w1[s]);
				}
			}
			hac_wg_hold_a<16>(a);
			hac_wg_fence();
#pragma unroll
			for (uint32_t k = 0; k < 16; k++)
				dsa_wg_n32r(sa[k >> 3], a[k],
					    dq + ((4 * wg + (k >> 2)) * 4096 + 32 * (k & 3)) / 16);
			/* k-step 2 i + wg (a trip count the same in both
			 * warpgroups: past dr, both operands are zeros) */
			for (uint32_t i = 0; i < (nrope + 1) / 2; i++)
				dsa_wg_n32_bf16(sr, dr0 + (b * 8192 + (2 * i + wg) * 32) / 16,
						dqp + (2 * i + wg) * 2);
			hac_wg_commit();

			/* the largest scale exponents, while the MMAs run */
			{
				uint32_t j = tid & 63;
				int e = j < nh ? dsa_scale_bits_exp(dsa_ld32(sb + j * 16 + 4 * (tid >> 6))) :
						 -1000;

				e = dsa_warp_max_i(e);
				if (lane == 0)
					emax_w[warp] = e;
			}
			float sc[2][2];

#pragma unroll
			for (int hh = 0; hh < 2; hh++)
#pragma unroll
				for (int u = 0; u < 2; u++)
					sc[hh][u] = hac_u2f(dsa_ld32(sb + (r0 + 8 * hh) * 16 +
								     4 * (2 * wg + u)));
			hac_wg_wait<0>();
			hac_wg_hold<16>(sa[0]);
			hac_wg_hold<16>(sa[1]);
			hac_wg_hold<16>(sr);
#pragma unroll
			for (int nn = 0; nn < 2; nn++)
#pragma unroll
				for (int q = 0; q < 4; q++) {
					int hh = q >> 1, e = q & 1, i = 4 * nn + q, il = i + 8;
					uint32_t h = 8 * nn + 2 * c + e;
					float v = ((sa[0][i] + sa[0][il]) * sc[hh][0] +
						   (sa[1][i] + sa[1][il]) * sc[hh][1]) * qs[2 * nn + e] +
						  (sr[i] + sr[il]) * rsc;

					Sw[(wg * HG + h) * DSA_M16_SROW + r0 + 8 * hh] = v;
				}
		}
		__syncthreads();
#pragma unroll
		for (int tau = 0; tau < 4; tau++)
			enew[tau] = dsa_maxi(eref[tau],
					     dsa_maxi(emax_w[2 * tau], emax_w[2 * tau + 1]));

		/* (2) softmax, P fac_tau for the MMA */
		dsa_m16_softmax(pb, m_run, l_run, alpha, Sw, sb, enew, nh);
		hac_fence_async();
		__syncthreads();

		/* (3) O = O alpha 2^(Eref - Enew) + V^T (P fac_tau)^T: dim
		 * block 4 wg + k; rows (dims) 16 wq + 2 g and + 1 of the
		 * block, columns (heads) 8 n + 2 c + e */
		{
			float al[4], rs[2];

#pragma unroll
			for (int i = 0; i < 4; i++)
				al[i] = alpha[8 * (i >> 1) + 2 * c + (i & 1)];
#pragma unroll
			for (int u = 0; u < 2; u++)
				rs[u] = dsa_pow2c(dsa_pick4(eref, 2 * wg + u) -
						  dsa_pick4(enew, 2 * wg + u));
#pragma unroll
			for (int k = 0; k < 4; k++)
#pragma unroll
				for (int i = 0; i < 8; i++)
					o[k][i] *= al[2 * (i >> 2) + (i & 1)] * rs[k >> 1];
#pragma unroll
			for (int k = 0; k < 4; k++)
				hac_wg_hold<8>(o[k]);
			/* A fragments a[4 k + ks]: dim block 4 wg + k, k-step
			 * ks; then one fence for all the MMAs */
			uint32_t a[16][4];

#pragma unroll
			for (uint32_t k = 0; k < 4; k++) {
				uint32_t ch = 4 * (4 * wg + k) + wq;

#pragma unroll
				for (uint32_t kp = 0; kp < 2; kp++) {
					uint32_t j = 16 * (2 * kp + (lane >> 4)) + 8 * ((lane >> 3) & 1) +
						     (lane & 7);

					dsa_m16_vfrag(a + 4 * k + 2 * kp,
						      cb + j * 512 + 16 * dsa_m16_cpos(j, ch));
				}
			}
			hac_wg_hold_a<16>(a);
			hac_wg_fence();
#pragma unroll
			for (uint32_t k = 0; k < 16; k++)
				dsa_wg_n16r(o[k >> 2], a[k],
					    dp + (((4 * wg + (k >> 2)) >> 1) * 2048 + (k & 3) * 32) / 16);
			hac_wg_commit();
			hac_wg_wait<0>();
#pragma unroll
			for (int k = 0; k < 4; k++)
				hac_wg_hold<8>(o[k]);
		}
#pragma unroll
		for (int tau = 0; tau < 4; tau++)
			eref[tau] = enew[tau];
	}

	/* O / l to o_lat with one split, else O and (m, l) to the partials */
	dsa_cp_wait<0>();
	/* With no tile, the queries' m and l were never behind a barrier. */
	__syncthreads();
	float fo[2];

#pragma unroll
	for (int u = 0; u < 2; u++)
		fo[u] = dsa_pow2c(dsa_pick4(eref, 2 * wg + u) - 15);
	dsa_m16_store<4>(o_lat, part, o, fo, l_run, t, H, h0, n_split, split, nrec, 4 * wg);
	if (n_split > 1 && tid < HG && h0 + tid < H) {
		float *ml = part + (size_t)(gridDim.x / n_hg) * H * 512 +
			    (((size_t)t * n_split + split) * H + h0 + tid) * 2;

		/* m in base e, as the combine takes it */
		ml[0] = m_run[tid] * 0.693147180559945309f;
		ml[1] = l_run[tid];
	}
}

/* ------------------------------------------------------------------------ */
/* Sparse MLA for 16 heads, warp-specialized                                */

#define DSA_WS_THREADS 384      /* three warpgroups */
#define DSA_WS_REGS 224         /* registers a thread of the two that compute */
#define DSA_WS_REGS_COPY 56     /* and of the one that copies: 64512 in all */
#define DSA_WS_THREADS_S 512    /* h16s: four warpgroups */
#define DSA_WS_REGS_S 184       /* h16s: warpgroup 0 (S) */
#define DSA_WS_REGS_SM 56       /* h16s: the softmax's */
#define DSA_WS_REGS_COPY_S 72   /* h16s: the copier's (with the factors) */
#define DSA_WS_REGS_O 200       /* h16s: warpgroup 1 (O): 65536 in all */
#define DSA_WS_NST 4            /* record buffers */
#define DSA_WS_STAGE 41984      /* a buffer: codes 32768, rope 8192, scales 1024 */
#define DSA_WS_MISC 1376        /* shared bytes between the buffers and the slots */
#define DSA_WS_PBATCH 8         /* positions a copying thread asks for at once */
#define DSA_WS_BTS 4096         /* block-table entries staged in the P buffers */
static_assert(DSA_WS_BTS * 4 <= 2 * 8192, "the staged row fits the two P buffers");

__device__ __forceinline__ void dsa_bar(uint32_t id, uint32_t n)
{
	asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}

__device__ __forceinline__ void dsa_mbar_arrive(uint64_t *bar)
{
	asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(hac_saddr(bar))
		     : "memory");
}

/* An arrival on bar once every cp.async this thread issued has landed
 * (counted in the barrier's init count). */
__device__ __forceinline__ void dsa_cp_arrive(uint64_t *bar)
{
	asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n"
		     ::"r"(hac_saddr(bar)) : "memory");
}

/*
 * S's A fragments for latent tile tau (k-steps 8 tau .. 8 tau + 7) of
 * records r0 and r0 + 8 from the codes: a lane's 16-byte load of a record
 * is the fragments of 4 k-steps (dsa_m16_kslot). pe, po: the buffer plus
 * the offset of record r0's chunk c of the even and odd blocks of 64 dims
 * less the block's own 64 bytes (dsa_ws_offs): block b is at pe + 64 b
 * (b even) or po + 64 b.
 */
__device__ __forceinline__ void dsa_ws_sfrag(uint32_t (*a)[4], const uint8_t *pe,
					     const uint8_t *po, uint32_t tau)
{
#pragma unroll
	for (uint32_t kk = 0; kk < 2; kk++) {
		const uint8_t *p = (kk ? po : pe) + 64 * (2 * tau + kk);
		uint4 u0 = *(const uint4 *)p, u1 = *(const uint4 *)(p + 8 * 512);
		uint32_t w0[4] = { u0.x, u0.y, u0.z, u0.w }, w1[4] = { u1.x, u1.y, u1.z, u1.w };

#pragma unroll
		for (uint32_t s = 0; s < 4; s++) {
			a[4 * kk + s][0] = dsa_e4m3x2(w0[s] & 0xffff);
			a[4 * kk + s][1] = dsa_e4m3x2(w1[s] & 0xffff);
			a[4 * kk + s][2] = dsa_e4m3x2_hi(w0[s]);
			a[4 * kk + s][3] = dsa_e4m3x2_hi(w1[s]);
		}
	}
}

/* The copying warpgroup's positions j = jb + 128 k (k < DSA_WS_PBATCH) of
 * the split's selection st, -1 past nmax. */
__device__ __forceinline__ void dsa_ws_pos(int32_t *p, const int32_t *st, uint32_t jb,
					   uint32_t nmax)
{
#pragma unroll
	for (uint32_t k = 0; k < DSA_WS_PBATCH; k++)
		p[k] = jb + 128 * k < nmax ? st[jb + 128 * k] : -1;
}

/*
 * The slots of the split's records j < nrec (those of this thread: jb +
 * 128 k, DSA_WS_PBATCH a round, the first round's positions in p): each
 * position's page in the staged block-table row bts (its first nbs
 * entries) or else in bt, times pt, plus the position's offset in it (P2:
 * pt a power of two, so a shift and a mask, not a division). Only k in
 * [kmin, kend) of the first round; later rounds (kend = DSA_WS_PBATCH)
 * whole.
 */
template <bool P2>
__device__ __forceinline__ void dsa_ws_slots(uint32_t *slots, int32_t *p, const int32_t *st,
					     uint32_t jb, uint32_t nmax, uint32_t nrec,
					     uint32_t pt, const uint32_t *bts, const uint32_t *bt,
					     uint32_t nbs, uint32_t kmin, uint32_t kend)
{
	uint32_t lg = __ffs(pt) - 1;

	for (;;) {
		uint32_t pg[DSA_WS_PBATCH], rm[DSA_WS_PBATCH];
		bool on[DSA_WS_PBATCH];

#pragma unroll
		for (uint32_t k = 0; k < DSA_WS_PBATCH; k++) {
			uint32_t up = p[k] < 0 ? 0 : (uint32_t)p[k];
			uint32_t pi = P2 ? up >> lg : up / pt;

			on[k] = jb + 128 * k < nrec && k >= kmin && k < kend;
			rm[k] = P2 ? up & (pt - 1) : up - pi * pt;
			pg[k] = !on[k] ? 0 : pi < nbs ? bts[pi] : __ldg(&bt[pi]);
		}
#pragma unroll
		for (uint32_t k = 0; k < DSA_WS_PBATCH; k++)
			if (on[k])
				slots[jb + 128 * k] = pg[k] * pt + rm[k];
		jb += 128 * DSA_WS_PBATCH;
		if (jb >= nrec || kend < DSA_WS_PBATCH)
			break;
		kmin = 0;
		dsa_ws_pos(p, st, jb, nmax);
	}
}

/*
 * The offsets of dsa_m16_cpos(j, 4 b + q) for row j, even and odd blocks
 * b: 4 b + q ^ x = 4 (b ^ x2) + (q ^ x01) with x = dsa_m16_cpos's mask of j,
 * and b ^ x2 = b + x2 (b even) or b - x2 (b odd).
 */
__device__ __forceinline__ void dsa_ws_offs(uint32_t j, uint32_t q, int *oe, int *oo)
{
	int x2 = (int)(j & 1), x01 = (int)(j >> 1 & 3);
	int base = (int)(j * 512) + 16 * ((int)q ^ x01);

	*oe = base + 64 * x2;
	*oo = base - 64 * x2;
}

/* S^T += latent tile tau's codes times the queries: 8 MMAs (N = 32: the
 * hi and the lo query rows; one MMA of N = 32 is shorter in the chain
 * than two of 16 into the same sums, measured). */
__device__ __forceinline__ void dsa_ws_smma(float *d, const uint32_t (*a)[4], uint64_t dq,
					    uint32_t tau)
{
#pragma unroll
	for (uint32_t k = 0; k < 8; k++)
		dsa_wg_n32r(d, a[k], dq + ((2 * tau + (k >> 2)) * 4096 + 32 * (k & 3)) / 16);
}

/* L += (hi + lo columns of tile tau's sums) times the records' scales
 * (d[i], i < 8: record r0 + 8 ((i >> 1) & 1), head 8 (i >> 2) + 2 c + (i
 * & 1); d[i + 8] its lo column). */
__device__ __forceinline__ void dsa_ws_fold(float *L, const float *d, const float (*sc)[4],
					    uint32_t tau)
{
#pragma unroll
	for (int i = 0; i < 8; i++)
		L[i] += (d[i] + d[i + 8]) * sc[(i >> 1) & 1][tau];
}

/*
 * After the wait for latent tile tau's MMAs: fold its sums d into L, then
 * start tile tau + 2's into the same accumulators with the register set
 * a (one commit group).
 */
__device__ __forceinline__ void dsa_ws_srefill(float *L, float *d, uint32_t (*a)[4],
					       const uint8_t *pe, const uint8_t *po, uint64_t dq,
					       const float (*sc)[4], uint32_t tau)
{
	hac_wg_hold<16>(d);
	dsa_ws_fold(L, d, sc, tau);
#pragma unroll
	for (int i = 0; i < 16; i++)
		d[i] = 0.0f;
	dsa_ws_sfrag(a, pe, po, tau + 2);
	hac_wg_hold<16>(d);
	hac_wg_hold_a<8>(a);
	hac_wg_fence();
	dsa_ws_smma(d, a, dq, tau + 2);
	hac_wg_commit();
}

/*
 * O's A fragments for dim blocks db0, db0 + 1 (rows: dims 16 wq + 2 g and
 * + 1 of a block of 64; k: the tile's 64 records) by ldmatrix.trans of
 * the codes, one byte permute and the conversions. pe, po as for
 * dsa_ws_sfrag, for the lane's ldmatrix row (record (lane & 7) + 8 ((lane
 * >> 3) & 1) + 16 (lane >> 4)) and chunk wq; k-step pair kp is 32 records
 * further.
 */
__device__ __forceinline__ void dsa_ws_ofrag(uint32_t (*a)[4], const uint8_t *pe,
					     const uint8_t *po, uint32_t db0)
{
#pragma unroll
	for (uint32_t k = 0; k < 2; k++) {
		const uint8_t *p = (((db0 + k) & 1) ? po : pe) + 64 * (db0 + k);

#pragma unroll
		for (uint32_t kp = 0; kp < 2; kp++)
			dsa_m16_vfrag(a + 4 * k + 2 * kp, p + kp * 32 * 512);
	}
}

/* O^T += V^T P^T for dim blocks db0, db0 + 1: 8 MMAs (B: the tile's P
 * times the factors of latent tile db / 2). */
__device__ __forceinline__ void dsa_ws_omma(float (*o)[8], const uint32_t (*a)[4], uint64_t dp,
					    uint32_t db0)
{
#pragma unroll
	for (uint32_t k = 0; k < 8; k++) {
		uint32_t db = db0 + (k >> 2);

		dsa_wg_n16r(o[db], a[k], dp + ((db >> 1) * 2048 + (k & 3) * 32) / 16);
	}
}

/* O's fragments of dim blocks db0, db0 + 1 into the register set a, then
 * their MMAs (one commit group). */
__device__ __forceinline__ void dsa_ws_ostep(float (*o)[8], uint32_t (*a)[4], const uint8_t *pe,
					     const uint8_t *po, uint64_t dp, uint32_t db0)
{
	dsa_ws_ofrag(a, pe, po, db0);
	hac_wg_hold_a<8>(a);
	hac_wg_fence();
	dsa_ws_omma(o, a, dp, db0);
	hac_wg_commit();
}

/*
 * Start copying records [j0, j0 + 64) of the split (records >= nrec
 * zero-filled) into one buffer, in dsa_m16_issue's layout, by the 4 warps
 * of one warpgroup (warp wq: records 16 wq + i, so a record's swizzles
 * are constants of i), then count their arrival on bar (an arrival a
 * thread, when its copies have landed). src0: region + 16 lane; d0: the
 * buffer's codes + 8192 wq; d1: lane 0 the scales, else the rope chunk
 * lane - 1, of record 16 wq, unswizzled; st1: 16 or 128 (lane 0 or not).
 */
template <bool FULL>
__device__ __forceinline__ void dsa_ws_issue_t(uint8_t *d0, uint8_t *d1, uint32_t st1,
					       const uint32_t *sl4, const uint8_t *src0,
					       uint32_t rec, uint32_t lane, bool two, uint32_t nv)
{
	uint32_t sl[16];

#pragma unroll
	for (uint32_t q = 0; q < 4; q++) {
		uint4 v = *(const uint4 *)(sl4 + 4 * q);

		sl[4 * q] = v.x;
		sl[4 * q + 1] = v.y;
		sl[4 * q + 2] = v.z;
		sl[4 * q + 3] = v.w;
	}
#pragma unroll
	for (uint32_t i = 0; i < 16; i++) {
		/* dsa_m16_cpos of record i's chunk lane; dsa_swz of its rope */
		uint32_t k = (i & 1) << 2 | (i >> 1 & 3), n = FULL || i < nv ? 16 : 0;
		const uint8_t *src = src0 + (size_t)(FULL || i < nv ? sl[i] : 0) * rec;

		dsa_cp16(d0 + i * 512 + 16 * (lane ^ k), src, n);
		if (two)
			dsa_cp16(d1 + i * st1 + (lane ? 16 * ((lane - 1) ^ (i & 7)) - 16 *
								      (lane - 1) : 0),
				 src + 512, n);
	}
}

__device__ __forceinline__ void dsa_ws_issue(uint8_t *codes, const uint32_t *slots, uint32_t j0,
					     uint32_t nrec, const uint8_t *region, uint32_t rec,
					     uint32_t wq, uint32_t lane, uint64_t *bar)
{
	uint8_t *rope = codes + 32768, *scl = rope + 8192;
	uint32_t jw = j0 + 16 * wq;
	uint8_t *d0 = codes + 8192 * wq;
	uint8_t *d1 = lane ? rope + 2048 * wq + 16 * (lane - 1) : scl + 256 * wq;
	const uint8_t *src0 = region + 16 * lane;
	bool two = lane + 32 < rec / 16;

	if (jw + 16 <= nrec)
		dsa_ws_issue_t<true>(d0, d1, lane ? 128 : 16, slots + jw, src0, rec, lane, two, 16);
	else
		dsa_ws_issue_t<false>(d0, d1, lane ? 128 : 16, slots + jw, src0, rec, lane, two,
				      jw < nrec ? nrec - jw : 0);
	dsa_cp_arrive(bar);
}

#define DSA_WS_OROW 516         /* floats a head's row of O in the cluster merge */

/* A merged (token, head)'s 4 dims from at: acc / L (0 where L is 0), to
 * o_bf rounded as haccel_to_bf16 rounds, else to o_lat. */
__device__ __forceinline__ void dsa_mla_put4(float *o_lat, uint16_t *o_bf, size_t at,
					     const float *acc, float L)
{
#pragma unroll
	for (int k = 0; k < 4; k++) {
		float v = L != 0.0f ? acc[k] / L : 0.0f;

		if (o_bf)
			o_bf[at + k] = hac_bf16_from_float(v);
		else
			o_lat[at + k] = v;
	}
}

/*
 * The splits of one token merged within their cluster (n = n_split <= 8
 * blocks, rank = split), in place of haccel_dsa_mla_combine and with the
 * same arithmetic in the same order, so the same bits: each block's O (fp32,
 * scaled by its factors, not by 1/l) is in ob, its m (base 2) and l in m_fin
 * and l_fin; after a cluster barrier, every block reads the splits' (m, l)
 * of the 16 heads and merges its share of the (head, 4 dims) units from the
 * splits' ob, in split order, to o_bf (bf16) or else o_lat. A second barrier
 * keeps each block's shared memory until the others have read it. Threads
 * 0-255 (the two warpgroups that compute); the third only meets the two
 * barriers (dsa_ws_cbar).
 */
__device__ __forceinline__ void dsa_ws_cbar(void)
{
	cooperative_groups::this_cluster().sync();
}

__device__ __forceinline__ void dsa_ws_cmerge(const float *ob, const float *m_fin,
					      const float *l_fin, float *wsm, uint32_t n,
					      float *o_lat, uint16_t *o_bf, uint32_t t, uint32_t H,
					      uint32_t h0)
{
	cooperative_groups::cluster_group cl = cooperative_groups::this_cluster();
	uint32_t tid = threadIdx.x, rank = cl.block_rank();
	float *wgt = wsm, *lsp = wsm + 128, *lt = wsm + 256;

	cl.sync();
	if (tid < 16) {
		float ms[8], ls[8], M = -INFINITY, L = 0.0f;

#pragma unroll
		for (uint32_t s = 0; s < 8; s++)
			if (s < n) {
				ms[s] = cl.map_shared_rank(m_fin, s)[tid] * 0.693147180559945309f;
				ls[s] = cl.map_shared_rank(l_fin, s)[tid];
			}
#pragma unroll
		for (uint32_t s = 0; s < 8; s++)
			if (s < n && ls[s] != 0.0f)
				M = fmaxf(M, ms[s]);
#pragma unroll
		for (uint32_t s = 0; s < 8; s++)
			if (s < n) {
				float w = ls[s] != 0.0f ? expf(ms[s] - M) : 0.0f;

				wgt[tid * 8 + s] = w;
				lsp[tid * 8 + s] = ls[s];
				if (ls[s] != 0.0f)
					L += w * ls[s];
			}
		lt[tid] = L;
	}
	dsa_bar(1, 256);
	for (uint32_t u = rank * 2048 / n + tid; u < (rank + 1) * 2048 / n; u += 256) {
		uint32_t h = u >> 7, d = (u & 127) * 4;
		float acc[4] = { 0.0f, 0.0f, 0.0f, 0.0f }, L = lt[h];

		for (uint32_t s = 0; s < n; s++) {
			float w = wgt[h * 8 + s];

			if (lsp[h * 8 + s] == 0.0f)
				continue;
			const float4 p =
				*(const float4 *)(cl.map_shared_rank(ob, s) + h * DSA_WS_OROW + d);

			acc[0] += w * p.x;
			acc[1] += w * p.y;
			acc[2] += w * p.z;
			acc[3] += w * p.w;
		}
		if (h0 + h >= H)
			continue;
		size_t at = ((size_t)t * H + h0 + h) * 512 + d;

		dsa_mla_put4(o_lat, o_bf, at, acc, L);
	}
	cl.sync();
}

/* L and acc += a split's l and partial, weighted by w. */
__device__ __forceinline__ void dsa_comb_add(float *L, float *acc, float w, float l, float4 p)
{
	*L += w * l;
	acc[0] += w * p.x;
	acc[1] += w * p.y;
	acc[2] += w * p.z;
	acc[3] += w * p.w;
}

/* The merge of a (token, head)'s n <= N splits, each split's (m, l) e and
 * its 4 dims p loaded: weights exp(m_s - M) over the splits that saw
 * records (l_s != 0), acc the weighted sum of the partials; returns L. */
template <uint32_t N>
__device__ __forceinline__ float dsa_comb_fold(const float2 *e, const float4 *p, uint32_t n,
					       float *acc)
{
	float M = -INFINITY, L = 0.0f;

#pragma unroll
	for (uint32_t s = 0; s < N; s++)
		if (s < n && e[s].y != 0.0f)
			M = fmaxf(M, e[s].x);
#pragma unroll
	for (uint32_t s = 0; s < N; s++)
		if (s < n && e[s].y != 0.0f)
			dsa_comb_add(&L, acc, expf(e[s].x - M), e[s].y, p[s]);
	return L;
}

/*
 * The flags merge (haccel_dsa_mla_h16sf; ops_dsa.c, mla_flags): where a
 * token's 2-4 splits would merge in a cluster but not every token's
 * cluster fits at once (batch 31 and 32 at top-k 2048 on 132 SMs: 30
 * clusters of 4), each split stores its partial and (m, l) as for the
 * combine kernel, counts itself in on its token's word (a release), waits
 * for the token's other splits (an acquire), and then its four
 * warpgroups, 512 threads, merge its quarter (third, half) of the token's
 * 2048 (head, 4 dims) units from every split's partial in one round of
 * loads, with the combine kernel's arithmetic in its order (so its bits).
 * A split waits for its token's others, so every block must be resident
 * at once: one block an SM and no more blocks than SMs (ops_dsa.c).
 * Words at the scratch's start (DSA_FL_WORDS of them, zero before a call
 * and zero after it): DSA_FL_EXIT, which each block adds 1 to once it has
 * seen its token's count, and DSA_FL_TOK + t, token t's count; block 0,
 * past its merge, waits for EXIT to reach the grid, then sets the words
 * back to zero (no block reads them any more).
 */
#define DSA_FL_EXIT 0
#define DSA_FL_TOK 1
#define DSA_FL_WORDS 64 /* 256 bytes: MLA_SYNC in ops_dsa.c */

__device__ __forceinline__ uint32_t dsa_ld_acquire(const uint32_t *p)
{
	uint32_t v;

	asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
	return v;
}

__device__ __forceinline__ void dsa_red_release(uint32_t *p, uint32_t v)
{
	asm volatile("red.release.gpu.global.add.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

/* Warpgroup 1's thread 0 once the split's partial and (m, l) are stored
 * (a block barrier before): count the split in on its token's word, wait
 * for the token's n splits, then say so on DSA_FL_EXIT. */
__device__ __forceinline__ void dsa_fl_count(uint32_t *sync, uint32_t t, uint32_t n)
{
	uint32_t *tok = sync + DSA_FL_TOK + t;

	dsa_red_release(tok, 1);
	while (dsa_ld_acquire(tok) < n)
		;
	atomicAdd(sync + DSA_FL_EXIT, 1u);
}

/*
 * Thread i of the block's 512 (past named barrier 6, which follows the
 * count): the units split * 2048 / n .. (split + 1) * 2048 / n of token t,
 * one a round, each from the n <= 4 splits' (m, l) and 4 dims of their
 * partials, loaded at once (bypassing L1: other SMs wrote them), merged
 * as haccel_dsa_mla_combine merges; to o_bf (bf16) or else o_lat.
 */
__device__ __forceinline__ void dsa_fl_merge(float *o_lat, uint16_t *o_bf, const float *part,
					     uint32_t t, uint32_t H, uint32_t n, uint32_t split,
					     uint32_t i)
{
	const float *ml = part + (size_t)gridDim.x * H * 512;
	uint32_t u1 = (split + 1) * 2048 / n;

	for (uint32_t v = split * 2048 / n + i; v < u1; v += 512) {
		uint32_t h = v >> 7, d = (v & 127) * 4;
		float acc[4] = { 0.0f, 0.0f, 0.0f, 0.0f };
		float2 e[4];
		float4 p[4];

		if (h >= H)
			break;
#pragma unroll
		for (uint32_t s = 0; s < 4; s++)
			if (s < n) {
				size_t k = ((size_t)t * n + s) * H + h;

				e[s] = __ldcg((const float2 *)(ml + 2 * k));
				p[s] = __ldcg((const float4 *)(part + k * 512 + d));
			}
		float L = dsa_comb_fold<4>(e, p, n, acc);

		dsa_mla_put4(o_lat, o_bf, ((size_t)t * H + h) * 512 + d, acc, L);
	}
}

/* Warpgroup 0's (a call too): named barrier 6, its share of the merge. */
__device__ __noinline__ void dsa_fl_wg0(float *o_lat, uint16_t *o_bf, const float *part,
					 uint32_t t, uint32_t H, uint32_t n, uint32_t split)
{
	dsa_bar(6, 512);
	dsa_fl_merge(o_lat, o_bf, part, t, H, n, split, threadIdx.x);
}

/* Warpgroup 1's part (a call, so that its registers are not the
 * kernel's): the count, named barrier 6, its share of the merge; then
 * block 0's thread 128 waits for every block past its count and sets the
 * words back to zero. */
__device__ __noinline__ void dsa_fl_wg1(float *o_lat, uint16_t *o_bf, const float *part,
					 uint32_t *sync, uint32_t t, uint32_t H, uint32_t n,
					 uint32_t split)
{
	uint32_t i = threadIdx.x;

	if (i == 128)
		dsa_fl_count(sync, t, n);
	dsa_bar(6, 512);
	dsa_fl_merge(o_lat, o_bf, part, t, H, n, split, i);
	if (blockIdx.x == 0 && i == 128) {
		while (dsa_ld_acquire(sync + DSA_FL_EXIT) < gridDim.x)
			;
		for (uint32_t k = 0; k < gridDim.x / n; k++)
			sync[DSA_FL_TOK + k] = 0;
		sync[DSA_FL_EXIT] = 0;
	}
}

/* A softmax's running state, a thread of the warpgroup that forms P. */
struct dsa_ws_smx {
	float m_run[4], lt[4];
	int eref[4];
};

/*
 * The softmax of tile it (P buffer b) from its logits sv (base 2, -inf
 * for a record past the tile's nh; sv[i]: head index 2 (i >> 2) + (i &
 * 1), record r0 + 8 ((i >> 1) & 1), the S accumulators' order) and its
 * records' scales sc, by one thread of the warpgroup that forms P (warp
 * wq of it, lane (g, c)): the tile's max of each head over the warpgroup
 * and of each latent tile's scale exponents (named barrier 2), alpha and
 * the new m, P in fp16 times each latent tile's factor into P buffer b
 * once warpgroup 1 is done with tile it - 2, alpha and Enew beside it,
 * then an arrival on pfull[b].
 */
template <bool FB>
__device__ __forceinline__ void dsa_ws_softmax(dsa_ws_smx &x, const float *sv,
					       const float (*sc)[4], const bool *vr, uint32_t it,
					       float *side, float *wmax, uint32_t *wexp,
					       uint8_t *pb, uint64_t *pfull, uint64_t *pempty,
					       const uint32_t *fw = NULL, const int *fe = NULL)
{
	uint32_t wtid = threadIdx.x & 127, lane = wtid & 31, wq = wtid >> 5;
	uint32_t g = lane >> 2, c = lane & 3, b = it & 1;
	uint32_t pbase = 256 * c + 32 * (wq ^ c) + 2 * g;

	/* The scales' exponent fields of records r0, r0 + 8, latent tiles
	 * (0, 1) and (2, 3) as 16-bit pairs (0 past nh: the tile has a
	 * record, and no exponent is below -127, so the max is unchanged);
	 * FB: the copying warpgroup has formed Enew and each record's factor
	 * exponents (dsa_ws_factors: fw, the thread's two records' words, fe,
	 * Enew). */
	uint32_t ex[2][2];

	if (!FB)
#pragma unroll
		for (int hh = 0; hh < 2; hh++)
#pragma unroll
			for (int u = 0; u < 2; u++) {
				uint32_t v = hac_f2u(sc[hh][2 * u]) >> 23 |
					     hac_f2u(sc[hh][2 * u + 1]) >> 23 << 16;

				ex[hh][u] = vr[hh] ? v & 0x00ff00ffu : 0;
			}
	/* the tile's max of each head over the warpgroup, and of each latent
	 * tile's exponents */
	float mx[4];

#pragma unroll
	for (int hi = 0; hi < 4; hi++) {
		int i0 = 4 * (hi >> 1) + (hi & 1);

		/* fmaxf skips NaN scores, as the CPU's max does */
		mx[hi] = fmaxf(sv[i0], sv[i0 + 2]);
	}
	uint32_t xm[2];

	if (!FB) {
		xm[0] = dsa_max_u16x2(ex[0][0], ex[1][0]);
		xm[1] = dsa_max_u16x2(ex[0][1], ex[1][1]);
	}
#pragma unroll
	for (int o = 4; o < 32; o <<= 1) {
#pragma unroll
		for (int hi = 0; hi < 4; hi++)
			mx[hi] = fmaxf(mx[hi], __shfl_xor_sync(0xffffffffu, mx[hi], o));
		if (!FB)
#pragma unroll
			for (int u = 0; u < 2; u++)
				xm[u] = dsa_max_u16x2(xm[u], __shfl_xor_sync(0xffffffffu, xm[u], o));
	}
	float *wm = wmax + b * 64;

	if (g == 0)
#pragma unroll
		for (int hi = 0; hi < 4; hi++)
			wm[(8 * (hi >> 1) + 2 * c + (hi & 1)) * 4 + wq] = mx[hi];
	if (!FB && lane == 0)
		*(uint2 *)(wexp + 8 * b + 2 * wq) = make_uint2(xm[0], xm[1]);
	dsa_bar(2, 128);
	int enew[4];

	if (!FB) {
		uint4 x0 = *(const uint4 *)(wexp + 8 * b);
		uint4 x1 = *(const uint4 *)(wexp + 8 * b + 4);
		uint32_t xa[2] = {
			dsa_max_u16x2(dsa_max_u16x2(x0.x, x0.z), dsa_max_u16x2(x1.x, x1.z)),
			dsa_max_u16x2(dsa_max_u16x2(x0.y, x0.w), dsa_max_u16x2(x1.y, x1.w))
		};

#pragma unroll
		for (int tau = 0; tau < 4; tau++)
			enew[tau] = dsa_maxi(x.eref[tau],
					     (int)(xa[tau >> 1] >> (16 * (tau & 1)) & 0xff) - 127);
	}
	float al[4];

#pragma unroll
	for (int hi = 0; hi < 4; hi++) {
		float4 v = *(const float4 *)(wm + (8 * (hi >> 1) + 2 * c + (hi & 1)) * 4);
		float M = fmaxf(x.m_run[hi], fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));

		al[hi] = dsa_ex2(x.m_run[hi] - M);
		x.m_run[hi] = M;
		x.lt[hi] *= al[hi];
	}
	/* P in fp16 (l sums the rounded values), records r0 and r0 + 8 of one
	 * head (index 2 nn + e) a word */
	uint32_t pp[2][2];

#pragma unroll
	for (int nn = 0; nn < 2; nn++)
#pragma unroll
		for (int e = 0; e < 2; e++) {
			int hi = 2 * nn + e;
			uint16_t p0 = dsa_f2h(vr[0] ? dsa_ex2(sv[4 * nn + e] - x.m_run[hi]) : 0.0f);
			uint16_t p1 = dsa_f2h(vr[1] ? dsa_ex2(sv[4 * nn + 2 + e] - x.m_run[hi]) :
						      0.0f);

			x.lt[hi] += dsa_h2f(p0) + dsa_h2f(p1);
			pp[nn][e] = p0 | (uint32_t)p1 << 16;
		}
	/* fac_tau of records r0 (low half) and r0 + 8 */
	uint32_t f[4];

#pragma unroll
	for (int tau = 0; tau < 4; tau++)
		if (FB)
			f[tau] = dsa_h2pow2x2((int)(int8_t)(fw[0] >> (8 * tau)),
					      (int)(int8_t)(fw[1] >> (8 * tau)));
		else
			f[tau] = dsa_h2pow2x2(
				15 + dsa_scale_bits_exp(hac_f2u(sc[0][tau])) - enew[tau],
				15 + dsa_scale_bits_exp(hac_f2u(sc[1][tau])) - enew[tau]);
	if (it >= 2)
		dsa_mbar_wait(&pempty[b], (it / 2 - 1) & 1);

	/* (head h = 8 nn + 2 c + e, record j = r0 + 8 hh) at h 128 +
	 * dsa_swz(h, j >> 3) + 2 (j & 7) = pbase + 1024 nn + 128 e + 16 (hh ^
	 * e): j >> 3 = 2 wq + hh, h & 7 = 2 c + e */
	uint8_t *P = pb + b * 8192 + pbase;

#pragma unroll
	for (int nn = 0; nn < 2; nn++)
#pragma unroll
		for (int e = 0; e < 2; e++)
#pragma unroll
			for (int tau = 0; tau < 4; tau++) {
				uint32_t v = dsa_hmul2(pp[nn][e], f[tau]);
				uint8_t *q = P + tau * 2048 + 1024 * nn + 128 * e;

				*(uint16_t *)(q + 16 * e) = (uint16_t)v;
				*(uint16_t *)(q + 16 * (1 ^ e)) = (uint16_t)(v >> 16);
			}
	float *sd = side + 32 * b;

	if (wq == 0 && g == 0)
#pragma unroll
		for (int hi = 0; hi < 4; hi++)
			sd[8 * (hi >> 1) + 2 * c + (hi & 1)] = al[hi];
	if (wtid == 0) {
		if (FB)
			*(int4 *)(sd + 16) = *(const int4 *)fe;
		else
#pragma unroll
			for (int tau = 0; tau < 4; tau++)
				((int *)sd)[16 + tau] = enew[tau];
	}
	hac_fence_async();
	dsa_mbar_arrive(&pfull[b]);
	if (!FB)
#pragma unroll
		for (int tau = 0; tau < 4; tau++)
			x.eref[tau] = enew[tau];
}

/*
 * The copying warpgroup's share of tile k's softmax (h16s), once the tile
 * has landed in buffer s: each latent tile's Enew (the running max of
 * eref, e, over the tiles so far, of its records' largest scale exponent,
 * a record past nh counting as -127), and each record's factor exponent
 * 15 + e_r - Enew, as dsa_ws_softmax forms them from the scales, kept in
 * a byte ([64 records][4 latent tiles], fb: the tile's slots, copied
 * from already) clamped to [-25, 15] (dsa_h2pow2x2 gives 0 below -24 and
 * no record's exceeds 15); Enew to fe. Thread j of the warpgroup: records
 * 16 (j >> 5) + (j >> 2 & 7) and 8 after it, latent tile tau = j & 3;
 * the max over the warpgroup through wmx (named barrier 3), then an
 * arrival on ffull.
 */
__device__ __forceinline__ void dsa_ws_factors(const uint8_t *stage, uint32_t k, uint32_t nh,
					       int *eref, uint8_t *fb, int *fe, int *wmx,
					       uint64_t *full, uint64_t *ffull)
{
	uint32_t j = threadIdx.x & 127, lane = j & 31, wq = j >> 5, tau = j & 3;
	uint32_t ra = 16 * wq + (lane >> 2), rb = ra + 8;
	const uint32_t *scl = (const uint32_t *)(stage + 32768 + 8192);

	dsa_mbar_wait(full, (k / DSA_WS_NST) & 1);
	uint32_t ba = scl[4 * ra + tau], bb = scl[4 * rb + tau];
	uint32_t m = dsa_maxu(ra < nh ? ba >> 23 & 0xff : 0, rb < nh ? bb >> 23 & 0xff : 0);

#pragma unroll
	for (int o = 4; o < 32; o <<= 1)
		m = dsa_maxu(m, __shfl_xor_sync(0xffffffffu, m, o));
	int *w = wmx + 16 * (k & 1);

	if (lane < 4)
		w[4 * wq + lane] = (int)m;
	dsa_bar(3, 128);
	int e = dsa_maxi(dsa_maxi(w[tau], w[4 + tau]), dsa_maxi(w[8 + tau], w[12 + tau])) - 127;

	e = dsa_maxi(*eref, e);
	*eref = e;
	fb[4 * ra + tau] = (uint8_t)(int8_t)dsa_maxi(
		dsa_mini(15 + dsa_scale_bits_exp(ba) - e, 15), -25);
	fb[4 * rb + tau] = (uint8_t)(int8_t)dsa_maxi(
		dsa_mini(15 + dsa_scale_bits_exp(bb) - e, 15), -25);
	if (j < 4)
		fe[tau] = e;
	dsa_mbar_arrive(ffull);
}

/* After the last tile: l over the warpgroup that formed P, then m and l
 * of the block's 16 heads into m_fin and l_fin (named barrier 2). */
__device__ __forceinline__ void dsa_ws_softmax_end(dsa_ws_smx &x, float *lsum, float *m_fin,
						   float *l_fin)
{
	uint32_t wtid = threadIdx.x & 127, lane = wtid & 31, wq = wtid >> 5;
	uint32_t g = lane >> 2, c = lane & 3;

#pragma unroll
	for (int o = 4; o < 32; o <<= 1)
#pragma unroll
		for (int hi = 0; hi < 4; hi++)
			x.lt[hi] += __shfl_xor_sync(0xffffffffu, x.lt[hi], o);
	if (g == 0)
#pragma unroll
		for (int hi = 0; hi < 4; hi++)
			lsum[(8 * (hi >> 1) + 2 * c + (hi & 1)) * 4 + wq] = x.lt[hi];
	dsa_bar(2, 128);
	if (wq == 0 && g == 0)
#pragma unroll
		for (int hi = 0; hi < 4; hi++) {
			uint32_t h = 8 * (hi >> 1) + 2 * c + (hi & 1);
			float4 v = *(const float4 *)(lsum + h * 4);

			m_fin[h] = x.m_run[hi];
			l_fin[h] = v.x + v.y + v.z + v.w;
		}
}

/*
 * The same sparse MLA as haccel_dsa_mla_h16 (the same products, the same
 * roundings, in another order of the sums), with its work split by role
 * instead of by halves of each product, so that no barrier spans the
 * block once the tiles start:
 *  - warpgroup 0 forms a tile's S^T = K Q^T (all 4 latent tiles and the
 *    rope; the codes to fp16 A fragments in registers as in
 *    haccel_dsa_mla_h16, the rope's bf16 by ldmatrix) and its logits;
 *  - the softmax (dsa_ws_softmax: the tile's max over 4 warps through
 *    shared memory, l kept a thread and summed at the end), P times each
 *    latent tile's factor into one of two P buffers, with alpha and Enew
 *    beside it, by warpgroup 0 in its registers (SM false: h16w, 384
 *    threads) or by a fourth warpgroup (SM true: h16s, 512 threads), to
 *    which warpgroup 0 hands each tile's logits through one shared buffer
 *    (an mbarrier pair), so that warpgroup 0's instruction stream, which
 *    bounds a tile (docs/benchmarks.md, thirty-first entry), is the S
 *    MMAs and their conversions alone; in h16s the copying warpgroup
 *    forms each tile's Enew and its records' factor exponents once the
 *    tile has landed (dsa_ws_factors), so the softmax's warpgroup reads
 *    neither the scales nor their maxima;
 *  - warpgroup 1 rescales O and adds V^T P^T for all 512 dims (8 blocks
 *    of 64, O^T in its registers), one or two tiles behind warpgroup 0;
 *  - warpgroup 2 finds the split's slots (h16s: those of tiles 0 and 1,
 *    then, once it has asked for those two, the rest), then copies
 *    tile it into a buffer once the others are done with tile it - 4
 *    (cp.async; 4 buffers, each one's arrival counted by an mbarrier,
 *    its release by the others' warps by another), and (h16s) forms the
 *    factors of each tile k <= it - 2 (once it has landed) before it
 *    copies tile it >= 2, so that two tiles, not four, are in flight
 *    at the start and the first lands sooner, and before it waits for
 *    a buffer (an mbarrier a buffer counts their arrival; they live in
 *    tile k's slots, already copied from, and Enew beside the
 *    mbarriers).
 * Each MMA warpgroup issues its MMAs in pairs of register sets, so one
 * set's conversions run while the other's MMAs do. The block starts at
 * 168 (h16w) or 128 (h16s) registers a thread (one block an SM); the
 * copying and softmax warpgroups give registers back (DSA_WS_REGS_COPY or
 * DSA_WS_REGS_COPY_S, DSA_WS_REGS_SM) and the two MMA warpgroups take
 * them (DSA_WS_REGS; h16s:
 * DSA_WS_REGS_S and DSA_WS_REGS_O: with fewer for warpgroup 0, 160, ptxas
 * serializes every warpgroup MMA of the kernel, its C7512 advisory). With
 * the copies on warpgroup 1 their issue held up its O: a tile took about
 * 4,270 cycles at batch 64 against 3,620 with a warpgroup of their own
 * (clock probes, an H200).
 *
 * Shared memory (1024-byte aligned; ops_dsa.c computes the same size):
 * queries [8][32][128 bytes], q_pe [32][128 bytes], P [2][4][16][128
 * bytes], buffers [4] of codes [64][512], rope [64][128 bytes], scales
 * [64][16 bytes], (h16s: the logits [2][128 threads][4]), then DSA_WS_MISC
 * bytes (alpha and Enew a P buffer, the warps' maxima, l, m, kq, 12
 * mbarriers; h16s: 6 more, the copier's maxima [2][4 warps][4] and Enew
 * [4 buffers][4]), the split's slots.
 */
template <bool CM, bool SM, bool FL = false>
__device__ __forceinline__ void dsa_mla_h16w(DSA_MLA_PARAMS, uint16_t *o_bf, uint32_t *sync)
{
	const uint32_t HG = 16, NST = DSA_WS_NST;
	uint32_t tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, c = lane & 3;
	uint32_t wq = warp & 3;
	dsa_split sp = dsa_split_at(HG, n_split, tps, n_hg);
	uint32_t t = sp.t, h0 = sp.h0, split = sp.split, j0 = sp.j0, nrec, ntile;
	uint32_t rec = 528 + 2 * dr, nrope = dr / 16;

	uint8_t *qb = dsa_smem + ((1024 - (hac_saddr(dsa_smem) & 1023)) & 1023);
	uint8_t *qpb = qb + 32768, *pb = qpb + 4096;    /* P [2][4][16][128 bytes] */
	uint8_t *stg = pb + 2 * 8192;                   /* [4] codes, rope, scales */
	float *sbuf = (float *)(stg + NST * DSA_WS_STAGE); /* h16s: [2][128][4] logits */
	uint8_t *misc = (uint8_t *)sbuf + (SM ? 4096 : 0);
	float *side = (float *)misc;                    /* [2][32]: alpha, Enew */
	float *wmax = side + 64;                        /* [2][16 heads][4 warps] */
	uint32_t *wexp = (uint32_t *)(wmax + 128);      /* [2][4 warps][2] */
	float *lsum = (float *)(wexp + 16);             /* [16 heads][4 warps] */
	float *m_fin = lsum + 64, *l_fin = m_fin + HG;
	int *kq = (int *)(l_fin + HG);
	uint64_t *full = (uint64_t *)(kq + HG), *empty = full + NST;
	uint64_t *pfull = empty + NST, *pempty = pfull + 2;
	uint64_t *sfull = pempty + 2, *sempty = sfull + 1; /* h16s */
	/* h16s: the factors' arrivals, the copier's maxima [2][4 warps][4],
	 * Enew a buffer [4][4] */
	uint64_t *ffull = sempty + 1;
	int *wmx = (int *)(ffull + NST), *fe = wmx + 32;
	uint32_t *slots = SM ? (uint32_t *)(fe + 4 * NST) : (uint32_t *)(pempty + 2);

	if (tid == 0) {
		for (uint32_t i = 0; i < NST; i++) {
			dsa_mbar_init(&full[i], 128);
			dsa_mbar_init(&empty[i], SM ? 12 : 8);
		}
		for (uint32_t i = 0; i < 2; i++) {
			dsa_mbar_init(&pfull[i], 128);
			dsa_mbar_init(&pempty[i], 4);
		}
		if (SM) {
			dsa_mbar_init(sfull, 128);
			dsa_mbar_init(sempty, 4);
			for (uint32_t i = 0; i < NST; i++)
				dsa_mbar_init(&ffull[i], 128);
		}
	}
	__syncthreads();
	if (warp >= 8 && warp < 12) {
		/* Warpgroup 2: the split's slots, then the copies of each tile
		 * into its buffer once the others are done with the tile NST
		 * before it. */
		hac_setmaxnreg_dec<SM ? DSA_WS_REGS_COPY_S : DSA_WS_REGS_COPY>();
		/* The token's block-table row: a step input, not the output
		 * of the kernel before, so asked for before the wait, and its
		 * first DSA_WS_BTS pages copied into the P buffers (unused
		 * until the first tile's P, which comes after every page
		 * below is read), so that the pages of the selection are
		 * found in shared memory, not by a load from L2 or memory
		 * that waits for the selection's. */
		const uint32_t *bt = block_tables + (size_t)bt_row[t] * bt_stride;
		const uint32_t *bts = (const uint32_t *)pb;
		uint32_t nbs = dsa_minu(bt_stride, DSA_WS_BTS);

		for (uint32_t i = tid - 256; i < nbs; i += 128)
			dsa_cp4(pb + 4 * i, bt + i, 4);
		dsa_cp_commit();
		HAC_PDL();
		/* The split's positions (all it may hold, -1 past the
		 * selection) asked for with the selection's count, so the
		 * count's load is not on the way to the pages; then, past the
		 * barrier that makes the row's copy visible, each thread's
		 * own positions' slots from their registers. */
		const int32_t *st = sel + (size_t)t * topk + j0;
		uint32_t nmax = j0 < topk ? dsa_minu(tps * DSA_MLA_L, topk - j0) : 0;
		uint32_t nsel = n_sel[t], jb = tid - 256;
		int32_t p[DSA_WS_PBATCH];

		dsa_ws_pos(p, st, jb, nmax);
		dsa_split_n(&sp, nsel, topk, tps);
		nrec = sp.nrec;
		ntile = sp.ntile;
		dsa_cp_wait<0>();
		dsa_bar(3, 128);
		/* h16s: the slots of tiles 0 and 1 (each thread's first
		 * position, j < 128) before those tiles are asked for, the
		 * rest after (the staged row is read until then: the P
		 * buffers it lives in are first written by tile 0's softmax,
		 * which waits for tile 0's factors, formed later still);
		 * h16w's warpgroup 0 writes P once tile 0 lands, so there
		 * every slot comes first, and in h16sc too (the positions
		 * kept across the first two tiles' copies spill there). */
		const bool defer = SM && !CM;
		auto slots_of = [&](uint32_t kmin, uint32_t kend) {
			if (pt & (pt - 1))
				dsa_ws_slots<false>(slots, p, st, jb, nmax, nrec, pt, bts, bt,
						    nbs, kmin, kend);
			else
				dsa_ws_slots<true>(slots, p, st, jb, nmax, nrec, pt, bts, bt,
						   nbs, kmin, kend);
		};
		slots_of(0, defer ? 1 : DSA_WS_PBATCH);
		dsa_bar(3, 128);
		/* h16s: tile k's factors (dsa_ws_factors) once it has
		 * landed, before the wait for a buffer that the softmax of
		 * tile k (k + 2 <= it) may hold up, and the rest at the end */
		uint32_t k = 0;
		int eref = -1000;
		auto factors = [&](uint32_t upto) {
			for (; SM && k < upto; k++)
				dsa_ws_factors(stg + k % NST * DSA_WS_STAGE, k,
					       dsa_minu(DSA_MLA_L, nrec - k * DSA_MLA_L), &eref,
					       (uint8_t *)(slots + k * DSA_MLA_L), fe + 4 * (k % NST),
					       wmx, &full[k % NST], &ffull[k % NST]);
		};

		for (uint32_t it = 0; it < ntile; it++) {
			uint32_t s = it % NST;

			/* h16s: tile it - 2 landed (its factors) before tile
			 * it is asked for, so the first tile, with one other
			 * in flight, not three, lands sooner */
			if (it >= 2)
				factors(it - 1);
			if (it >= NST)
				dsa_mbar_wait(&empty[s], (it / NST - 1) & 1);
			dsa_ws_issue(stg + s * DSA_WS_STAGE, slots, it * DSA_MLA_L, nrec, region,
				     rec, wq, lane, &full[s]);
			if (defer && it == 1) {
				slots_of(1, DSA_WS_PBATCH);
				dsa_bar(3, 128);
			}
		}
		factors(ntile);
		dsa_cp_wait<0>();
		if (CM) {
			dsa_ws_cbar();
			dsa_ws_cbar();
		}
		/* h16sf: its share of the token's merge (dsa_fl_merge) */
		if (FL) {
			dsa_bar(6, 512);
			dsa_fl_merge(o_lat, o_bf, part, t, H, n_split, split, tid);
		}
		return;
	}
	if (SM && warp >= 12) {
		/* Warpgroup 3 (h16s): the softmax of each tile, from the
		 * logits warpgroup 0 leaves in sbuf (this thread: its own
		 * thread's there) and the factors warpgroup 2 forms. */
		hac_setmaxnreg_dec<DSA_WS_REGS_SM>();
		HAC_PDL();
		dsa_split_n(&sp, n_sel[t], topk, tps);
		nrec = sp.nrec;
		ntile = sp.ntile;
		dsa_ws_smx x;
		uint32_t r0 = 16 * wq + g;

#pragma unroll
		for (int i = 0; i < 4; i++) {
			x.m_run[i] = -INFINITY;
			x.lt[i] = 0.0f;
			x.eref[i] = -1000;
		}
		for (uint32_t it = 0; it < ntile; it++) {
			uint32_t s = it % NST;
			uint32_t nh = dsa_minu(DSA_MLA_L, nrec - it * DSA_MLA_L);
			const uint32_t *fw = slots + it * DSA_MLA_L;
			float sv[8];
			bool vr[2] = { r0 < nh, r0 + 8 < nh };
			uint32_t f2[2];
			int4 e4;

			/* the tile's factors (dsa_ws_factors; they follow its
			 * landing) and logits */
			dsa_mbar_wait(&ffull[s], (it / NST) & 1);
			f2[0] = fw[r0];
			f2[1] = fw[r0 + 8];
			e4 = *(const int4 *)(fe + 4 * s);
			dsa_mbar_wait(sfull, it & 1);
			{
				const float4 *sp4 = (const float4 *)sbuf + (tid & 127);
				float4 v0 = sp4[0], v1 = sp4[128];

				sv[0] = v0.x;
				sv[1] = v0.y;
				sv[2] = v0.z;
				sv[3] = v0.w;
				sv[4] = v1.x;
				sv[5] = v1.y;
				sv[6] = v1.z;
				sv[7] = v1.w;
			}
			/* The logits, factors and Enew are in registers. */
			__syncwarp();
			if (lane == 0) {
				dsa_mbar_arrive(sempty);
				dsa_mbar_arrive(&empty[s]);
			}
			dsa_ws_softmax<true>(x, sv, NULL, vr, it, side, wmax, wexp, pb, pfull, pempty,
					     f2, (const int *)&e4);
		}
		/* m and l for warpgroup 1's store (and below); with no tile,
		 * those dsa_mla_qstore set (ordered before this warpgroup's
		 * writes only by a tile's logits) */
		if (ntile)
			dsa_ws_softmax_end(x, lsum, m_fin, l_fin);
		dsa_bar(4, 256);
		if (CM) {
			dsa_ws_cbar();
			dsa_ws_cbar();
			return;
		}
		uint32_t h = tid & 127;

		if (n_split > 1 && h < HG && h0 + h < H) {
			float *ml = part + (size_t)(gridDim.x / n_hg) * H * 512 +
				    (((size_t)t * n_split + split) * H + h0 + h) * 2;

			/* m in base e, as the combine takes it */
			ml[0] = m_fin[h] * 0.693147180559945309f;
			ml[1] = l_fin[h];
		}
		/* h16sf: (m, l) stored before warpgroup 1 counts the split
		 * in, then this warpgroup's share of the merge */
		if (FL) {
			dsa_bar(5, 256);
			dsa_bar(6, 512);
			dsa_fl_merge(o_lat, o_bf, part, t, H, n_split, split, tid);
		}
		return;
	}
	float qv[2][18];

	if (!SM)
		hac_setmaxnreg_inc<DSA_WS_REGS>();
	HAC_PDL();
	dsa_split_n(&sp, n_sel[t], topk, tps);
	nrec = sp.nrec;
	ntile = sp.ntile;
	dsa_mla_qload<2>(qv, q_lat, q_pe, t, H, h0, dr);
	dsa_mla_qstore<2, true>(qb, qpb, kq, m_fin, l_fin, qv, HG);
	hac_fence_async();
	dsa_bar(1, 256);
	uint64_t dq = hac_wg_desc(qb), dqp = hac_wg_desc(qpb);
	uint32_t r0 = 16 * wq + g;

	if (warp < 4) {
		/* Warpgroup 0: S and the logits, then (h16w) the softmax and
		 * P. Heads 8 nn + 2 c + e (index 2 nn + e), records r0 + 8 hh. */
		if (SM)
			hac_setmaxnreg_inc<DSA_WS_REGS_S>();
		float qs[4], rsc = scale * 1.44269504088896341f;
		dsa_ws_smx x;

#pragma unroll
		for (int i = 0; i < 4; i++) {
			qs[i] = hac_pow2f(-kq[8 * (i >> 1) + 2 * c + (i & 1)]) * rsc;
			x.m_run[i] = -INFINITY;
			x.lt[i] = 0.0f;
			x.eref[i] = -1000;
		}
		int oe, oo;

		dsa_ws_offs(r0, c, &oe, &oo);
		for (uint32_t it = 0; it < ntile; it++) {
			uint32_t s = it % NST;
			uint32_t nh = dsa_minu(DSA_MLA_L, nrec - it * DSA_MLA_L);
			const uint8_t *cb = stg + s * DSA_WS_STAGE, *rb = cb + 32768;
			const uint8_t *sb = rb + 8192, *pe = cb + oe, *po = cb + oo;
			float sa[2][16], sr[16], L[8], sc[2][4];
			uint32_t a0[8][4], a1[8][4], ar[4][4];

			dsa_mbar_wait(&full[s], (it / NST) & 1);
#pragma unroll
			for (int hh = 0; hh < 2; hh++) {
				float4 v = *(const float4 *)(sb + (r0 + 8 * hh) * 16);

				sc[hh][0] = v.x;
				sc[hh][1] = v.y;
				sc[hh][2] = v.z;
				sc[hh][3] = v.w;
			}
#pragma unroll
			for (int i = 0; i < 16; i++)
				sa[0][i] = sa[1][i] = sr[i] = 0.0f;
#pragma unroll
			for (int i = 0; i < 8; i++)
				L[i] = 0.0f;
			dsa_ws_sfrag(a0, pe, po, 0);
#pragma unroll
			for (uint32_t ks = 0; ks < 4; ks++) {
				uint32_t j = 16 * wq + (lane & 7) + 8 * ((lane >> 3) & 1);

				/* zeros past dr (the queries' q_pe rows are zeros
				 * there too), so that the 4 MMAs below need no
				 * branch: ptxas puts a warpgroup.arrive before
				 * each conditional one */
				if (ks < nrope)
					dsa_ldsm4(ar[ks], rb + j * 128 + dsa_swz(j, 2 * ks + (lane >> 4)));
				else
					ar[ks][0] = ar[ks][1] = ar[ks][2] = ar[ks][3] = 0;
			}
			hac_wg_hold<16>(sa[0]);
			hac_wg_hold<16>(sa[1]);
			hac_wg_hold<16>(sr);
			hac_wg_hold_a<8>(a0);
			hac_wg_hold_a<4>(ar);
			hac_wg_fence();
			dsa_ws_smma(sa[0], a0, dq, 0);
#pragma unroll
			for (uint32_t ks = 0; ks < 4; ks++)
				hac_wg_bf16r<32>(sr, ar[ks], dqp + ks * 2);
			hac_wg_commit();
			dsa_ws_sfrag(a1, pe, po, 1);
			hac_wg_hold_a<8>(a1);
			hac_wg_fence();
			dsa_ws_smma(sa[1], a1, dq, 1);
			hac_wg_commit();
			hac_wg_wait<1>();
			hac_wg_hold<16>(sr);
			dsa_ws_srefill(L, sa[0], a0, pe, po, dq, sc, 0);
			hac_wg_wait<1>();
			dsa_ws_srefill(L, sa[1], a1, pe, po, dq, sc, 1);
			hac_wg_wait<1>();
			hac_wg_hold<16>(sa[0]);
			dsa_ws_fold(L, sa[0], sc, 2);
			hac_wg_wait<0>();
			hac_wg_hold<16>(sa[1]);
			dsa_ws_fold(L, sa[1], sc, 3);
			/* The stage's reads are done (its MMAs waited for). */
			__syncwarp();
			if (lane == 0)
				dsa_mbar_arrive(&empty[s]);

			/* Logits in base 2 */
			float sv[8];
			bool vr[2] = { r0 < nh, r0 + 8 < nh };

#pragma unroll
			for (int i = 0; i < 8; i++) {
				int hh = (i >> 1) & 1, hi = 2 * (i >> 2) + (i & 1);

				sv[i] = vr[hh] ? L[i] * qs[hi] + (sr[i] + sr[i + 8]) * rsc : -INFINITY;
			}
			if (SM) {
				/* to warpgroup 3, once it has taken tile it - 1's */
				float4 *sp4 = (float4 *)sbuf + tid;

				if (it >= 1)
					dsa_mbar_wait(sempty, (it - 1) & 1);
				sp4[0] = make_float4(sv[0], sv[1], sv[2], sv[3]);
				sp4[128] = make_float4(sv[4], sv[5], sv[6], sv[7]);
				dsa_mbar_arrive(sfull);
			} else {
				dsa_ws_softmax<false>(x, sv, sc, vr, it, side, wmax, wexp, pb, pfull,
					       pempty);
			}
		}
		if (!SM) {
			dsa_ws_softmax_end(x, lsum, m_fin, l_fin);
			dsa_bar(1, 256);
		}
		/* h16sf: this warpgroup's share of the merge */
		if (FL) {
			dsa_fl_wg0(o_lat, o_bf, part, t, H, n_split, split);
			return;
		}
		if (CM) {
			dsa_ws_cmerge((const float *)stg, m_fin, l_fin,
				      (float *)(stg + HG * DSA_WS_OROW * 4), n_split, o_lat, o_bf, t,
				      H, h0);
			return;
		}
		if (!SM && n_split > 1 && tid < HG && h0 + tid < H) {
			float *ml = part + (size_t)(gridDim.x / n_hg) * H * 512 +
				    (((size_t)t * n_split + split) * H + h0 + tid) * 2;

			/* m in base e, as the combine takes it */
			ml[0] = m_fin[tid] * 0.693147180559945309f;
			ml[1] = l_fin[tid];
		}
		return;
	}

	/* Warpgroup 1: O^T (dims 16 wq + 2 g and + 1 of each block of 64,
	 * heads 8 nn + 2 c + e) += V^T P^T, a tile behind warpgroup 0. */
	if (SM)
		hac_setmaxnreg_inc<DSA_WS_REGS_O>();
	float o[8][8];
	int eref[4] = { -1000, -1000, -1000, -1000 };
	uint64_t dp0 = hac_wg_desc(pb);

#pragma unroll
	for (int k = 0; k < 8; k++)
#pragma unroll
		for (int i = 0; i < 8; i++)
			o[k][i] = 0.0f;
	int oe, oo;

	dsa_ws_offs((lane & 7) + 8 * ((lane >> 3) & 1) + 16 * (lane >> 4), wq, &oe, &oo);
	for (uint32_t it = 0; it < ntile; it++) {
		uint32_t s = it % NST, b = it & 1;
		const uint8_t *cb = stg + s * DSA_WS_STAGE, *pe = cb + oe, *po = cb + oo;
		const float *sd = side + 32 * b;
		uint64_t dp = dp0 + b * 8192 / 16;
		uint32_t a0[8][4], a1[8][4];
		int enew[4];
		float fr[4][4];

		dsa_mbar_wait(&full[s], (it / NST) & 1);
		dsa_mbar_wait(&pfull[b], (it / 2) & 1);
#pragma unroll
		for (int tau = 0; tau < 4; tau++)
			enew[tau] = ((const int *)sd)[16 + tau];
#pragma unroll
		for (int tau = 0; tau < 4; tau++) {
			float rs = dsa_pow2c(eref[tau] - enew[tau]);

#pragma unroll
			for (int hi = 0; hi < 4; hi++)
				fr[tau][hi] = sd[8 * (hi >> 1) + 2 * c + (hi & 1)] * rs;
		}
#pragma unroll
		for (int k = 0; k < 8; k++)
#pragma unroll
			for (int i = 0; i < 8; i++)
				o[k][i] *= fr[k >> 1][2 * (i >> 2) + (i & 1)];
#pragma unroll
		for (int k = 0; k < 8; k++)
			hac_wg_hold<8>(o[k]);
		/* two register sets in turn: one converts while the
		 * other's MMAs run */
		dsa_ws_ostep(o, a0, pe, po, dp, 0);
		dsa_ws_ostep(o, a1, pe, po, dp, 2);
		hac_wg_wait<1>();
		dsa_ws_ostep(o, a0, pe, po, dp, 4);
		hac_wg_wait<1>();
		dsa_ws_ostep(o, a1, pe, po, dp, 6);
		hac_wg_wait<0>();
#pragma unroll
		for (int k = 0; k < 8; k++)
			hac_wg_hold<8>(o[k]);
		__syncwarp();
		if (lane == 0) {
			dsa_mbar_arrive(&pempty[b]);
			dsa_mbar_arrive(&empty[s]);
		}
#pragma unroll
		for (int tau = 0; tau < 4; tau++)
			eref[tau] = enew[tau];
	}
	if (SM)
		dsa_bar(4, 256);
	else
		dsa_bar(1, 256);
	/* O / l to o_lat with one split, else O to the partials */
	float fo[4];

#pragma unroll
	for (int tau = 0; tau < 4; tau++)
		fo[tau] = dsa_pow2c(eref[tau] - 15);
	if (CM) {
		/* O as dsa_m16_store writes a split's partial (heads in rows of
		 * DSA_WS_OROW: a half-warp's float2 stores meet no bank twice) */
		float *ob = (float *)stg;

#pragma unroll
		for (int i = 0; i < 4; i++) {
			uint32_t h = 8 * (i >> 1) + 2 * c + (i & 1);

#pragma unroll
			for (int k = 0; k < 8; k++) {
				uint32_t d = k * 64 + 16 * wq + 2 * g;
				float f = fo[k >> 1];

				*(float2 *)(ob + h * DSA_WS_OROW + d) =
					make_float2(o[k][4 * (i >> 1) + (i & 1)] * f,
						    o[k][4 * (i >> 1) + 2 + (i & 1)] * f);
			}
		}
		dsa_ws_cmerge(ob, m_fin, l_fin, (float *)(stg + HG * DSA_WS_OROW * 4), n_split,
			      o_lat, o_bf, t, H, h0);
		return;
	}
	dsa_m16_store<8>(o_lat, part, o, fo, l_fin, t, H, h0, n_split, split, nrec, 0);
	/* h16sf: with the softmax's (m, l) stored too, count the split in,
	 * wait for the token's others, merge this warpgroup's share */
	if (FL) {
		dsa_bar(5, 256);
		dsa_fl_wg1(o_lat, o_bf, part, sync, t, H, n_split, split);
	}
}

/* The kernels: h16wc and h16sc merge the splits of a token within its
 * cluster (launched in clusters of n_split blocks; o_bf as for the
 * combine), so that h16w and h16s keep none of that code and its
 * registers; h16s and h16sc form the softmax on a fourth warpgroup. Their
 * mbarriers, block barrier and register moves come before the programmatic
 * wait, which each warpgroup makes itself (dsa_mla_h16w). */
HACCEL_K void __launch_bounds__(DSA_WS_THREADS, 1)
haccel_dsa_mla_h16w(DSA_MLA_PARAMS)
{
	HAC_PDL_DEFERRED();
	dsa_mla_h16w<false, false>(DSA_MLA_ARGS, NULL, NULL);
}

HACCEL_K void __launch_bounds__(DSA_WS_THREADS, 1)
haccel_dsa_mla_h16wc(DSA_MLA_PARAMS, uint16_t *o_bf)
{
	HAC_PDL_DEFERRED();
	dsa_mla_h16w<true, false>(DSA_MLA_ARGS, o_bf, NULL);
}

HACCEL_K void __launch_bounds__(DSA_WS_THREADS_S, 1)
haccel_dsa_mla_h16s(DSA_MLA_PARAMS)
{
	HAC_PDL_DEFERRED();
	dsa_mla_h16w<false, true>(DSA_MLA_ARGS, NULL, NULL);
}

HACCEL_K void __launch_bounds__(DSA_WS_THREADS_S, 1)
haccel_dsa_mla_h16sc(DSA_MLA_PARAMS, uint16_t *o_bf)
{
	HAC_PDL_DEFERRED();
	dsa_mla_h16w<true, true>(DSA_MLA_ARGS, o_bf, NULL);
}

/* h16s whose splits (2-4 a token, one head group) merge through memory in
 * their own blocks (dsa_fl_merge; sync: the scratch's words, the
 * partials after them), to o_bf as for the combine, else o_lat. */
HACCEL_K void __launch_bounds__(DSA_WS_THREADS_S, 1)
haccel_dsa_mla_h16sf(DSA_MLA_PARAMS, uint16_t *o_bf, uint32_t *sync)
{
	HAC_PDL_DEFERRED();
	dsa_mla_h16w<false, true, true>(DSA_MLA_ARGS, o_bf, sync);
}

HACCEL_K void __launch_bounds__(DSA_MLA_THREADS, 1)
haccel_dsa_mla_h32(DSA_MLA_PARAMS)
{
	HAC_PDL();
	dsa_mla<2>(DSA_MLA_ARGS);
}

#define DSA_COMB_ONE 8 /* splits the combine merges from one round of loads */

/* The combine's round of splits s0 .. s0 + DSA_COMB_ONE - 1 (those below
 * n_split): each one's (m, l) and this thread's 4 dims of its partial. */
__device__ __forceinline__ void dsa_comb_load(float2 *e, float4 *p, const float *ml,
					      const float *part, uint32_t t, uint32_t n_split,
					      uint32_t H, uint32_t h, uint32_t d, uint32_t s0)
{
#pragma unroll
	for (uint32_t k = 0; k < DSA_COMB_ONE; k++)
		if (s0 + k < n_split) {
			size_t i = ((size_t)t * n_split + s0 + k) * H + h;

			e[k] = *(const float2 *)(ml + 2 * i);
			p[k] = *(const float4 *)(part + i * 512 + d);
		}
}

/*
 * Merge the splits of one (token, head), a block of 128 threads, 4 dims a
 * thread: weights exp(m_s - M) over the splits that saw records (l_s > 0;
 * a split that did has l_s >= 1, or NaN, which then spreads as on the CPU).
 * No split with records (n_sel = 0): zeros. Up to DSA_COMB_ONE splits
 * (batch 16 and more at top-k 2048 on 132 SMs) a thread loads every
 * split's (m, l) and its 4 dims of every partial at once and merges in
 * registers; past it the (m, l) of every split are read at once and the
 * weights kept in shared memory (n_split floats), and the partials (with
 * their l) are loaded DSA_COMB_ONE splits a round, the first round's
 * while the weights are formed. The same sums in the same order either
 * way. With
 * o_bf, the output goes there rounded to bf16 as haccel_to_bf16 rounds
 * (the value projection's input), and o_lat is not written.
 */
HACCEL_K void haccel_dsa_mla_combine(float *o_lat, const float *part, uint32_t T, uint32_t H,
				     uint32_t n_split, uint16_t *o_bf)
{
	HAC_PDL();
	float *wgt = (float *)dsa_smem;
	__shared__ float red[4];
	uint32_t t = blockIdx.x / H, h = blockIdx.x % H, d = 4 * threadIdx.x;
	uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	const float *ml = part + (size_t)T * n_split * H * 512;
	float M = -INFINITY, L = 0.0f, acc[4] = { 0.0f, 0.0f, 0.0f, 0.0f };
	size_t at = ((size_t)t * H + h) * 512 + d;
	float2 e[DSA_COMB_ONE];
	float4 p[DSA_COMB_ONE];

	dsa_comb_load(e, p, ml, part, t, n_split, H, h, d, 0);
	if (n_split <= DSA_COMB_ONE) {
		/* every split's (m, l) and partial asked for at once: one
		 * round of loads, no barrier (a split without records: its
		 * partial loaded, never used) */
		L = dsa_comb_fold<DSA_COMB_ONE>(e, p, n_split, acc);
		dsa_mla_put4(o_lat, o_bf, at, acc, L);
		return;
	}
	/* past it, rounds of DSA_COMB_ONE splits, each round's loads at
	 * once (the first round's, above, before the weights) */
	for (uint32_t s = threadIdx.x; s < n_split; s += blockDim.x) {
		const float *em = ml + (((size_t)t * n_split + s) * H + h) * 2;

		if (em[1] != 0.0f)
			M = fmaxf(M, em[0]);
	}
	M = warp_max(M);
	if (lane == 0)
		red[warp] = M;
	__syncthreads();
	M = fmaxf(fmaxf(red[0], red[1]), fmaxf(red[2], red[3]));
	for (uint32_t s = threadIdx.x; s < n_split; s += blockDim.x) {
		const float *em = ml + (((size_t)t * n_split + s) * H + h) * 2;

		wgt[s] = em[1] != 0.0f ? expf(em[0] - M) : 0.0f;
	}
	__syncthreads();
	for (uint32_t s0 = 0; s0 < n_split; s0 += DSA_COMB_ONE) {
		if (s0)
			dsa_comb_load(e, p, ml, part, t, n_split, H, h, d, s0);
#pragma unroll
		for (uint32_t k = 0; k < DSA_COMB_ONE; k++)
			if (s0 + k < n_split && e[k].y != 0.0f)
				dsa_comb_add(&L, acc, wgt[s0 + k], e[k].y, p[k]);
	}
	dsa_mla_put4(o_lat, o_bf, at, acc, L);
}
