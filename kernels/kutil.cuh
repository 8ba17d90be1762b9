/* SPDX-License-Identifier: MIT */
/* Helpers shared by the kernels: warp and block reductions, bf16 and fp8
 * conversions that match libhaccel/model/format.c bit for bit. */
#ifndef HACCEL_KERNELS_KUTIL_CUH
#define HACCEL_KERNELS_KUTIL_CUH

#include <cuda_fp16.h>
#include <stdint.h>

#define HACCEL_K extern "C" __global__

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

#endif /* HACCEL_KERNELS_KUTIL_CUH */
