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

#endif /* HACCEL_KERNELS_KUTIL_CUH */
