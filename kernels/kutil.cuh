/* SPDX-License-Identifier: MIT */
/* Helpers shared by the kernels: warp and block reductions, bf16 and fp8
 * conversions that match libhaccel/model/format.c bit for bit. */
#ifndef HACCEL_KERNELS_KUTIL_CUH
#define HACCEL_KERNELS_KUTIL_CUH

#include <cooperative_groups.h>
#include <cuda_fp16.h>
#include <stdint.h>

#define HACCEL_K extern "C" __global__

/*
 * Every kernel starts with HAC_PDL: it waits for the kernels before it in
 * the stream to complete and their writes to be visible (griddepcontrol
 * .wait: at once when the launch has no programmatic dependency), then
 * lets the next kernel's blocks be scheduled (launch_dependents). The
 * library launches every kernel with programmatic stream serialization
 * (module.c), so a kernel's launch and its blocks' start overlap the one
 * before; the wait keeps stream order for memory. Triggering after the
 * wait keeps it two kernels deep: the next kernel's blocks start once all
 * of this one's have passed their wait, that is once the one before this
 * has completed.
 */
__device__ __forceinline__ void hac_pdl_wait(void)
{
	asm volatile("griddepcontrol.wait;\n" ::: "memory");
}

__device__ __forceinline__ void hac_pdl_launch(void)
{
	asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

#define HAC_PDL()                                                                  \
	do {                                                                       \
		hac_pdl_wait();                                                    \
		hac_pdl_launch();                                                  \
	} while (0)

/*
 * The first statement of a kernel that calls HAC_PDL() later, itself or
 * in a device function: before it, it may read only what the kernel just
 * before it in the stream does not write (its blocks start once the one
 * before that has completed). Expands to nothing; tests/kernels-pdl.c
 * checks that such a kernel waits.
 */
#define HAC_PDL_DEFERRED() \
	do {               \
	} while (0)

__device__ __forceinline__ float warp_sum(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

__device__ __forceinline__ float warp_max(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

/* Sum over a block of up to 1024 threads; every thread gets the result.
 * sh holds 32 floats. */
__device__ __forceinline__ float block_sum(float v, float *sh)
{
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;

	v = warp_sum(v);
	__syncthreads();
	if (lane == 0)
		sh[w] = v;
	__syncthreads();
	v = lane < nw ? sh[lane] : 0.0f;
	return warp_sum(v);
}

/* d += a b for one m16n8k16 tile: a row-major 16x16, b 16x8 (bf16), d
 * fp32. */
__device__ __forceinline__ void hac_mma_bf16(float *d, const uint32_t *a, const uint32_t *b)
{
	asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
	    "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
	    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
	    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* p[i] of each of the R blocks of this cluster (distributed shared
 * memory), added in rank order: the loads first, then the sum. */
template <int R>
__device__ __forceinline__ float cluster_rank_sum(const float *p, uint32_t i)
{
	cooperative_groups::cluster_group cl = cooperative_groups::this_cluster();
	float pr[R], v = 0.0f;

#pragma unroll
	for (int r = 0; r < R; r++)
		pr[r] = cl.map_shared_rank(p, r)[i];
#pragma unroll
	for (int r = 0; r < R; r++)
		v += pr[r];
	return v;
}

/* ------------------------------------------------------------------------ */
/* Shared memory and warpgroup MMA (sm_90a)                                 */

__device__ __forceinline__ uint32_t hac_saddr(const void *p)
{
	return (uint32_t)__cvta_generic_to_shared(p);
}

/*
 * The descriptor of a K-major shared-memory operand
 * in the 128-byte swizzle (16-byte chunk c of row r at c ^ (r & 7); atoms
 * of 8 rows of 128 bytes, 1024-byte aligned, one after another: the
 * stride byte offset 1024, the leading one unused, 16).
 */
__device__ __forceinline__ uint64_t hac_wg_desc(const void *p)
{
	return (uint64_t)((hac_saddr(p) & 0x3ffff) >> 4) | 1ull << 16 | 64ull << 32 | 1ull << 62;
}

__device__ __forceinline__ void hac_wg_fence(void)
{
	asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void hac_wg_commit(void)
{
	asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

template <int N> __device__ __forceinline__ void hac_wg_wait(void)
{
	asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

/* Accumulators d: read only after the wait that completes them, written
 * only before the fence that starts the MMAs. */
template <int N> __device__ __forceinline__ void hac_wg_hold(float *d)
{
#pragma unroll
	for (int i = 0; i < N; i++)
		asm volatile("" : "+f"(d[i])::"memory");
}

/* A fragments a: computed before the fence that starts their MMAs. */
template <int N> __device__ __forceinline__ void hac_wg_hold_a(uint32_t (*a)[4])
{
#pragma unroll
	for (int i = 0; i < N; i++)
		asm volatile("" : "+r"(a[i][0]), "+r"(a[i][1]), "+r"(a[i][2]), "+r"(a[i][3])::"memory");
}

/*
 * Per-warpgroup register counts (sm_90a): a block launched at the even
 * share of the register file moves registers from a warpgroup that needs
 * few (dec) to those that need many (inc, which waits until the registers
 * are free). All warps of a warpgroup execute it; N is a multiple of 8.
 */
template <int N> __device__ __forceinline__ void hac_setmaxnreg_dec(void)
{
	asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N) : "memory");
}

template <int N> __device__ __forceinline__ void hac_setmaxnreg_inc(void)
{
	asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N) : "memory");
}

/* Shared-memory stores of this thread visible to the MMA's reads. */
__device__ __forceinline__ void hac_fence_async(void)
{
	asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/* Operand lists of the wgmma wrappers: 8 accumulators, 4 A registers. */
#define HAC_WG_D8(d)                                                                        \
	"+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), \
		"+f"(d[7])

#define HAC_WG_A4(a) "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3])

/* d (64 x NV, fp32) += A B on .tf32: A 64 x 8 in registers (a warp 16
 * rows, mma.m16n8k8's A fragment), B 8 x NV K-major in shared memory. */
template <uint32_t NV>
__device__ __forceinline__ void hac_wg_tf32r(float *d, const uint32_t *a, uint64_t b);

template <>
__device__ __forceinline__ void hac_wg_tf32r<32>(float *d, const uint32_t *a, uint64_t b)
{
	asm volatile("wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32 "
		     "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, "
		     "{%16,%17,%18,%19}, %20, 1, 1, 1;\n"
		     : HAC_WG_D8(d), HAC_WG_D8((d + 8)) : HAC_WG_A4(a), "l"(b));
}

template <>
__device__ __forceinline__ void hac_wg_tf32r<64>(float *d, const uint32_t *a, uint64_t b)
{
	asm volatile("wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "
		     "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
		     "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, "
		     "{%32,%33,%34,%35}, %36, 1, 1, 1;\n"
		     : HAC_WG_D8(d), HAC_WG_D8((d + 8)), HAC_WG_D8((d + 16)), HAC_WG_D8((d + 24))
		     : HAC_WG_A4(a), "l"(b));
}

/* The same on .bf16, k 16 (mma.m16n8k16's A fragment). */
template <uint32_t NV>
__device__ __forceinline__ void hac_wg_bf16r(float *d, const uint32_t *a, uint64_t b);

template <>
__device__ __forceinline__ void hac_wg_bf16r<32>(float *d, const uint32_t *a, uint64_t b)
{
	asm volatile("wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
		     "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, "
		     "{%16,%17,%18,%19}, %20, 1, 1, 1, 0;\n"
		     : HAC_WG_D8(d), HAC_WG_D8((d + 8)) : HAC_WG_A4(a), "l"(b));
}

template <>
__device__ __forceinline__ void hac_wg_bf16r<64>(float *d, const uint32_t *a, uint64_t b)
{
	asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
		     "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
		     "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, "
		     "{%32,%33,%34,%35}, %36, 1, 1, 1, 0;\n"
		     : HAC_WG_D8(d), HAC_WG_D8((d + 8)), HAC_WG_D8((d + 16)), HAC_WG_D8((d + 24))
		     : HAC_WG_A4(a), "l"(b));
}

#endif /* HACCEL_KERNELS_KUTIL_CUH */
