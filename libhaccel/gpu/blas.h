/* SPDX-License-Identifier: MIT */
/*
 * bf16 GEMMs with fp32 accumulation and fp32 output through cuBLASLt,
 * loaded at run time (dlopen, no CUDA headers: the few types and values
 * used are declared in blas.c with cuBLASLt's ABI). One workspace is
 * allocated when the library is first used; the heuristic's choice is
 * cached per shape in a table carved at the same time, so a step never
 * allocates and a graph capture issues only the matmul itself.
 */
#ifndef HACCEL_GPU_BLAS_H
#define HACCEL_GPU_BLAS_H

#include <stdint.h>

#include "gpu/module.h"

/*
 * One (batched) GEMM in row-major terms: for each b < batch,
 *   C_b[M][N] = A_b[M][K] . op(B_b)   (+ bias[N] when bias is not 0)
 * where A is bf16 with rows of lda elements, op(B) = B^T for B stored
 * [N][K] (trans_b = 1, a torch Linear's weight) or B for B stored [K][N]
 * (trans_b = 0), rows of ldb elements; C is fp32 with rows of ldc. Batch
 * b's matrices start stride_* elements after batch b - 1's. With
 * accumulate set, C_b += that instead (cuBLASLt's beta = 1, in place).
 * With c_bf16 set, C is bf16 instead (ldc and stride_c in its elements):
 * the fp32 sums (and bias) rounded to nearest even; not with accumulate
 * (cuBLASLt fails it with -EINVAL, the few-row kernels refuse it).
 */
struct haccel__gemm {
	uint32_t M, N, K;
	uint64_t A, B, C, bias;
	int64_t lda, ldb, ldc;
	int64_t stride_a, stride_b, stride_c;
	uint32_t batch;        /* 0 or 1: one GEMM */
	uint32_t trans_b;
	uint32_t accumulate;
	uint32_t c_bf16;
};

/* Run it on stream (NULL: g's stream): by haccel__gemm_few where it
 * takes the shape and the weights are under 64 MiB (16 MiB above 8 rows;
 * blas.c's FEW_MAX_BYTES; unless HACCEL_GEMM=cublaslt), else by cuBLASLt.
 * Returns 0, -ENODEV (no cuBLASLt: the message says where it was looked
 * for), -ENOTSUP (no algorithm for the shape), -EIO. */
int haccel__gemm_run(struct haccel__gpu *g, void *stream, const struct haccel__gemm *op);

/* The same GEMM by cuBLASLt, whatever the shape. Callable from several
 * threads on their own streams. Its algorithm for each shape (sizes,
 * strides, batch, bias or not, accumulating or not; an unbatched GEMM's
 * rows rounded by haccel__gemm_rows, unless HACCEL_GEMM_ROWS=exact) is
 * chosen once and cached, HACCEL__GEMM_MAX_SHAPES of them, the least
 * recently used making room for a new one. */
int haccel__gemm_lt(struct haccel__gpu *g, void *stream, const struct haccel__gemm *op);

#define HACCEL__GEMM_MAX_SHAPES 1024

/*
 * The rows of the shape an unbatched cuBLASLt GEMM of M rows shares
 * (haccel__gemm_lt): M up to 16 and at powers of two (every decode
 * bucket), else M rounded up to a quarter of the power of two below it
 * (17 -> 20, 1100 -> 1280, 2000 -> 2048): four sizes an octave, so a
 * server's prompts of every length make a bounded set of shapes. The call
 * still reads and writes its own M rows only.
 */
uint32_t haccel__gemm_rows(uint32_t M);

/* The shape table's state (tests): shapes cached, of which made for one
 * row count alone, shapes evicted, row counts a rounded shape's algorithm
 * did not serve. All zero before the first cuBLASLt GEMM. */
struct haccel__blas_counts {
	uint32_t shapes, exact;
	uint64_t evicted, refused;
};

void haccel__blas_counts(struct haccel__gpu *g, struct haccel__blas_counts *c);

/*
 * The same GEMM by haccel's kernel for few rows (kernels/gemm.cu), which
 * reads the weights once at close to the copy bandwidth: M <= 16, trans_b,
 * K, lda, ldb (and stride_a, stride_b when batched) multiples of 8, A and
 * B 16-byte aligned, C fp32 (4-byte aligned) or bf16 (c_bf16, 2-byte
 * aligned, not accumulating). Returns -ENOTSUP (nothing launched, no
 * message) for any other shape.
 */
int haccel__gemm_few(struct haccel__gpu *g, void *stream, const struct haccel__gemm *op);

/* The most rows haccel__gemm_few (and haccel__gemm_run's use of it) takes. */
#define HACCEL__GEMM_FEW_ROWS 16

/* At most this many GEMMs in one haccel__gemm_group launch. */
#define HACCEL__GEMM_GROUP_MAX 8

/*
 * n GEMMs of the same rows as one launch of the few-row kernel (each its
 * own A, B, C, bias, N, K and strides: a layer's projections of one
 * input, say), where each is one haccel__gemm_few takes (batch 0 or 1)
 * but for M, all have the same M and accumulate, n <=
 * HACCEL__GEMM_GROUP_MAX, and their weights together are under the size
 * haccel__gemm_run sends to that kernel (unless HACCEL_GEMM=cublaslt).
 * Members may differ in c_bf16. Up to 16 rows each result is the bits the
 * GEMM gets on its own; 17-64 rows are for small projections (the weights
 * together under 4 MiB), either every K >= 1024 (K split over clusters of
 * blocks) or every K < 1024 (a block a tile), the sums in a fixed order
 * too. Returns -ENOTSUP (nothing launched, no message) otherwise: the
 * caller runs them one by one.
 */
int haccel__gemm_group(struct haccel__gpu *g, void *stream, const struct haccel__gemm *ops,
		       uint32_t n);

/* y[T][N] = x[T][K] . W[N][K]^T (+ bias): x bf16 (rows of ldx), W bf16, y
 * fp32 (rows of N). */
int haccel__cuda_linear(struct haccel__gpu *g, void *stream, uint64_t y, uint64_t x,
			int64_t ldx, uint64_t W, uint64_t bias, uint32_t T,
			uint32_t N, uint32_t K);

/* Release cuBLASLt (at context close). */
void haccel__blas_fini(struct haccel__gpu *g);

#endif /* HACCEL_GPU_BLAS_H */
