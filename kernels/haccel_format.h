/* SPDX-License-Identifier: MIT */
/*
 * Memory formats shared by host code and CUDA kernels. Plain C, no includes,
 * so nvcc and the C compiler read the same definitions.
 *
 * KV page: HACCEL_KV_PAGE_TOKENS tokens. Per token of a DSA layer:
 *   - the compressed latent, 512 values, FP8 E4M3 in 4 tiles of 128 values,
 *     each tile with one fp32 scale: 512 + 4 * 4 = 528 bytes,
 *   - the rotary key part, 64 values in bf16: 128 bytes,
 *   656 bytes in all (the exact byte order is fixed in docs/model.md).
 * Indexer key page: per token 128 values MXFP8 (E4M3) with one E8M0 scale
 * per 32 values: 128 + 4 = 132 bytes.
 */
#ifndef HACCEL_FORMAT_H
#define HACCEL_FORMAT_H

#define HACCEL_KV_PAGE_TOKENS 64

#define HACCEL_KV_LATENT_DIM 512
#define HACCEL_KV_LATENT_TILE 128
#define HACCEL_KV_ROPE_DIM 64
#define HACCEL_KV_TOKEN_BYTES                                                 \
	(HACCEL_KV_LATENT_DIM + (HACCEL_KV_LATENT_DIM / HACCEL_KV_LATENT_TILE) * 4 + \
	 HACCEL_KV_ROPE_DIM * 2)

#define HACCEL_INDEX_K_DIM 128
#define HACCEL_MX_BLOCK 32
#define HACCEL_INDEX_K_TOKEN_BYTES                                            \
	(HACCEL_INDEX_K_DIM + HACCEL_INDEX_K_DIM / HACCEL_MX_BLOCK)

#endif /* HACCEL_FORMAT_H */
