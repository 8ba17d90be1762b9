// SPDX-License-Identifier: MIT
/*
 * GEMMs of few rows (decode): C[M][N] (+)= A[M][K] . B[N][K]^T (+ bias), M
 * at most 16, A and B bf16, C fp32 (or bf16: the fp32 sum rounded to
 * nearest even, not accumulating), with fp32 accumulation. The weight
 * matrix B is the whole cost: it is read once, straight from global memory
 * into mma fragments (no shared-memory staging), with every load of a
 * warp's part of K issued before the first product, so a block has all of
 * its weight bytes in flight at once. The host side is blas.c (the
 * dispatch from haccel__gemm_run), the CPU reference haccel__cpu_matmul.
 *
 * A block takes tiles of 16 rows of B (the mma's M side) with all of K,
 * split over its 8 warps in runs of 32; the rows of A (tokens, at most 8 MT8) are
 * the mma's N side, 8 a tile. The k order inside a run of 32 is permuted
 * (the same for both operands, so the sum is the same): lane (g, c) of
 * an mma holds logical k {2c, 2c + 1, 2c + 8, 2c + 9} of step s at
 * physical k 8c + 4s + {0, 1, 2, 3}, so each operand row is one 16-byte
 * load per lane and run. Partial sums of the 8 warps meet in shared
 * memory and are added in warp order: one order, so replays give the
 * same bits. A group (haccel__gemm_group) is several such GEMMs of the
 * same rows in one launch, their tiles numbered one after another; a tile
 * is computed the same way in a group as alone.
 */

#define GEMM_FEW_WARPS 8
#define GEMM_FEW_ROWS 16

/* 16 bytes at p where ok, else zeros, without a branch: weight rows (read
 * once: not kept in L1, hint ".L1::no_allocate") and rows of A (read by
 * every block, hint ""). */
#define GEMM_LD(hint, p, ok, v)                                                                  \
	asm volatile("{\n.reg .pred q;\nsetp.ne.b32 q, %5, 0;\n"                               \
		     "mov.b32 %0, 0;\nmov.b32 %1, 0;\nmov.b32 %2, 0;\nmov.b32 %3, 0;\n"            \
		     "@q ld.global.nc" hint ".v4.u32 {%0,%1,%2,%3}, [%4];\n}\n"                    \
		     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p), "r"((int)(ok)))

__device__ __forceinline__ uint4 gemm_ld_stream(const uint16_t *p, bool ok)
{
	uint4 v;

	GEMM_LD(".L1::no_allocate", p, ok, v);
	return v;
}

__device__ __forceinline__ uint4 gemm_ld(const uint16_t *p, bool ok)
{
	uint4 v;

	GEMM_LD("", p, ok, v);
	return v;
}

/*
 * One GEMM of a launch: C[M][N] (+)= A[M][K] . B[N][K]^T (+ bias), its
 * 16-row tiles numbered from t0 in the launch (a group: blas.c mirrors
 * this layout in struct few_member).
 */
struct gemm_m {
	const uint16_t *A, *B;
	void *C;                /* fp32, or bf16 with c_bf16 */
	const float *bias;
	int64_t lda, ldb, ldc;
	uint32_t N, K, t0, c_bf16;
};

#define GEMM_GROUP_MAX 8

struct gemm_grp {
	gemm_m m[GEMM_GROUP_MAX];
	uint32_t n, ntile, M, accumulate;
};

/* A warp's runs of 32 k of K: [*r0, *r1), warp w of nw working on K. */
__device__ __forceinline__ void gemm_runs(uint32_t K, uint32_t w, uint32_t nw, uint32_t *r0,
					  uint32_t *r1)
{
	uint32_t nrun = (K + 31) / 32, per = (nrun + nw - 1) / nw;

	*r0 = w * per < nrun ? w * per : nrun;
	*r1 = *r0 + per < nrun ? *r0 + per : nrun;
}

/* Element (n, m) of a tile: the 8 warps' partial sums (red) in warp order. */
template <int MT8>
__device__ __forceinline__ float gemm_warp_sum(float (*red)[GEMM_FEW_ROWS][8 * MT8 + 1],
					       uint32_t n, uint32_t m)
{
	float v = 0.0f;

#pragma unroll
	for (int ww = 0; ww < GEMM_FEW_WARPS; ww++)
		v += red[ww][n][m];
	return v;
}

/* C[m][n0 + n] of p (+)= v + bias (bf16 C: = v + bias, rounded). */
__device__ __forceinline__ void gemm_put(const gemm_m &p, uint32_t m, uint32_t n0, uint32_t n,
					 float v, uint32_t accumulate)
{
	int64_t at = (int64_t)m * p.ldc + n0 + n;

	if (p.bias)
		v += p.bias[n0 + n];
	if (p.c_bf16) {
		((uint16_t *)p.C)[at] = hac_bf16_from_float(v);
		return;
	}
	float *y = (float *)p.C + at;
	*y = accumulate ? *y + v : v;
}

/* C of a tile from red; then the barrier before red is written again. */
template <int MT8>
__device__ __forceinline__ void gemm_out(float (*red)[GEMM_FEW_ROWS][8 * MT8 + 1],
					 const gemm_m &p, uint32_t n0, uint32_t M,
					 uint32_t accumulate)
{
	for (uint32_t o = threadIdx.x; o < GEMM_FEW_ROWS * 8 * MT8; o += blockDim.x) {
		uint32_t n = o % GEMM_FEW_ROWS, m = o / GEMM_FEW_ROWS;

		if (m < M && n0 + n < p.N)
			gemm_put(p, m, n0, n, gemm_warp_sum<MT8>(red, n, m), accumulate);
	}
	__syncthreads();
}

/* The same with K split over a cluster of KS blocks: each block's sum
 * into bp, then rank r adds the KS blocks' bp in rank order for the
 * outputs r, r + KS, ... (distributed shared memory), and a cluster
 * barrier before bp and red are written again. */
template <int MT8, int KS>
__device__ __forceinline__ void gemm_out_cluster(float (*red)[GEMM_FEW_ROWS][8 * MT8 + 1],
						 float *bp, const gemm_m &p, uint32_t n0,
						 uint32_t M, uint32_t accumulate, uint32_t rank)
{
	cooperative_groups::cluster_group cl = cooperative_groups::this_cluster();

	for (uint32_t o = threadIdx.x; o < GEMM_FEW_ROWS * 8 * MT8; o += blockDim.x)
		bp[o] = gemm_warp_sum<MT8>(red, o % GEMM_FEW_ROWS, o / GEMM_FEW_ROWS);
	cl.sync();
	for (uint32_t o = rank + KS * threadIdx.x; o < GEMM_FEW_ROWS * 8 * MT8;
	     o += KS * blockDim.x) {
		uint32_t n = o % GEMM_FEW_ROWS, m = o / GEMM_FEW_ROWS;

		if (m < M && n0 + n < p.N)
			gemm_put(p, m, n0, n, cluster_rank_sum<KS>(bp, o), accumulate);
	}
	cl.sync();
}

/* Which loads an issue of gemm_few makes (a type: known at compile time). */
template <bool B>
struct gemm_part {
	static constexpr bool value = B;
};

/*
 * Block, 8 warps, through the launch's tiles of 16 rows of B blockIdx.x,
 * + gridDim.x, ... (mem(tile, &lt): the tile's GEMM, lt its tile there).
 * A warp's work on a tile is a run of steps, each U runs of 32 k (its part
 * of K, (K / 32) / 8 runs, takes ceil(part / U) steps); the loads of step
 * s + 1 are issued as soon as the products of step s have consumed its
 * registers, before the partial sums of a finished tile go through shared
 * memory, so the weight stream does not stop between tiles.
 */
template <int MT8, int U, int KS, typename MEM>
__device__ __forceinline__ void gemm_few(MEM mem, uint32_t ntile, uint32_t M, uint32_t accumulate)
{
	__shared__ float red[GEMM_FEW_WARPS][GEMM_FEW_ROWS][8 * MT8 + 1];
	__shared__ float bp[KS > 1 ? GEMM_FEW_ROWS * 8 * MT8 : 1];
	uint32_t lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, c = lane & 3;
	/* KS > 1: K split over the KS blocks of a cluster, rank-major warps */
	uint32_t rank = KS > 1 ? blockIdx.x % KS : 0, wk = rank * GEMM_FEW_WARPS + w;
	uint32_t first = blockIdx.x / KS, stride = gridDim.x / KS;
	uint4 wa[U], wb[U], xv[U][MT8];
	float acc[MT8][4];

	/* The loads of step st of tile tile (none past the warp's runs): of
	 * the weights with W, of A with X. */
	auto issue = [&](uint32_t tile, uint32_t st, auto W, auto X) {
		uint32_t lt, r0, r1;
		const gemm_m p = mem(tile, &lt);

		gemm_runs(p.K, wk, KS * GEMM_FEW_WARPS, &r0, &r1);
		uint32_t n0 = lt * GEMM_FEW_ROWS, r = r0 + st * U;
		bool ok0 = n0 + g < p.N, ok8 = n0 + g + 8 < p.N;
		const uint16_t *b0 = p.B + (int64_t)(ok0 ? n0 + g : 0) * p.ldb + 8 * c;
		const uint16_t *b8 = p.B + (int64_t)(ok8 ? n0 + g + 8 : 0) * p.ldb + 8 * c;

#pragma unroll
		for (int u = 0; u < U; u++) {
			bool in = r + u < r1 && (r + u) * 32 + 8 * c < p.K;

			if constexpr (decltype(W)::value) {
				wa[u] = gemm_ld_stream(b0 + (r + u) * 32, in && ok0);
				wb[u] = gemm_ld_stream(b8 + (r + u) * 32, in && ok8);
			}
#pragma unroll
			for (int i = 0; decltype(X)::value && i < MT8; i++) {
				uint32_t m = 8 * i + g;
				const uint16_t *ar = p.A + (int64_t)(m < M ? m : 0) * p.lda + 8 * c;

				xv[u][i] = gemm_ld(ar + (r + u) * 32, in && m < M);
			}
		}
	};
	const gemm_part<true> yes;
	const gemm_part<false> no;

	/* The first weights are issued before the wait for the kernel before
	 * this one (HAC_PDL): nothing in the step writes them, so they stream
	 * while that kernel finishes. A, C and the rest come after it. */
	if (first < ntile)
		issue(first, 0, yes, no);
	HAC_PDL();
	if (first < ntile)
		issue(first, 0, no, yes);
	for (uint32_t tile = first; tile < ntile; tile += stride) {
		uint32_t lt, r0, r1;
		const gemm_m p = mem(tile, &lt);

		gemm_runs(p.K, wk, KS * GEMM_FEW_WARPS, &r0, &r1);
		uint32_t nstep = r1 > r0 ? (r1 - r0 + U - 1) / U : 0;

#pragma unroll
		for (int i = 0; i < MT8; i++)
			acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
		for (uint32_t st = 0; st < nstep; st++) {
#pragma unroll
			for (int u = 0; u < U; u++)
#pragma unroll
				for (int i = 0; i < MT8; i++) {
					const uint32_t a0[4] = { wa[u].x, wb[u].x, wa[u].y, wb[u].y };
					const uint32_t a1[4] = { wa[u].z, wb[u].z, wa[u].w, wb[u].w };
					const uint32_t b0[2] = { xv[u][i].x, xv[u][i].y };
					const uint32_t b1[2] = { xv[u][i].z, xv[u][i].w };

					hac_mma_bf16(acc[i], a0, b0);
					hac_mma_bf16(acc[i], a1, b1);
				}
			if (st + 1 < nstep)
				issue(tile, st + 1, yes, yes);
			else if (tile + stride < ntile)
				issue(tile + stride, 0, yes, yes);
		}
		/* With no step of its own (K too short for every warp), the
		 * warp still issues the next tile's first loads. */
		if (!nstep && tile + stride < ntile)
			issue(tile + stride, 0, yes, yes);
		/* acc[i]: rows n0 + g (0, 1) and n0 + g + 8 (2, 3) of C^T,
		 * tokens 8 i + 2 c and + 1. */
#pragma unroll
		for (int i = 0; i < MT8; i++) {
			red[w][g][8 * i + 2 * c] = acc[i][0];
			red[w][g][8 * i + 2 * c + 1] = acc[i][1];
			red[w][g + 8][8 * i + 2 * c] = acc[i][2];
			red[w][g + 8][8 * i + 2 * c + 1] = acc[i][3];
		}
		__syncthreads();
		uint32_t n0 = lt * GEMM_FEW_ROWS;

		if constexpr (KS > 1)
			gemm_out_cluster<MT8, KS>(red, bp, p, n0, M, accumulate, rank);
		else
			gemm_out<MT8>(red, p, n0, M, accumulate);
	}
}

/* One (strided-batched) GEMM: batch blockIdx.y, its tiles in x. */
#define GEMM_FEW(name, MT8, U)                                                               \
	HACCEL_K void __launch_bounds__(GEMM_FEW_WARPS * 32, 2)                                  \
	name(uint8_t *C, const uint16_t *A, const uint16_t *B, const float *bias, uint32_t M,   \
	     uint32_t N, uint32_t K, int64_t lda, int64_t ldb, int64_t ldc, int64_t sa,         \
	     int64_t sb, int64_t sc, uint32_t accumulate, uint32_t c_bf16)                      \
	{                                                                                       \
		HAC_PDL_DEFERRED();                                                             \
		int64_t y = blockIdx.y;                                                         \
		const gemm_m p = { A + y * sa, B + y * sb, C + y * sc * (c_bf16 ? 2 : 4), bias, \
				   lda, ldb, ldc, N, K, 0, c_bf16 };                            \
                                                                                                \
		gemm_few<MT8, U, 1>(                                                            \
			[&](uint32_t tile, uint32_t *lt) -> gemm_m {                            \
				*lt = tile;                                                     \
				return p;                                                       \
			},                                                                      \
			(N + GEMM_FEW_ROWS - 1) / GEMM_FEW_ROWS, M, accumulate);                \
	}

/* A group of GEMMs of the same rows: tiles t0 .. of member i in x (KS > 1:
 * clusters of KS blocks along x, a tile a cluster). */
#define GEMM_FEW_GROUP(name, MT8, U, KS, attr)                                               \
	HACCEL_K void attr __launch_bounds__(GEMM_FEW_WARPS * 32, 2)                             \
	name(const __grid_constant__ gemm_grp grp)                                              \
	{                                                                                       \
		HAC_PDL_DEFERRED();                                                             \
		gemm_few<MT8, U, KS>(                                                           \
			[&](uint32_t tile, uint32_t *lt) -> gemm_m {                            \
				uint32_t i = grp.n - 1;                                         \
                                                                                                \
				while (i && grp.m[i].t0 > tile)                                 \
					i--;                                                    \
				*lt = tile - grp.m[i].t0;                                       \
				return grp.m[i];                                                \
			},                                                                      \
			grp.ntile, grp.M, grp.accumulate);                                      \
	}

/* Token tiles and runs a step: the most loads in flight that fit 128
 * registers (two blocks an SM) without spills. Groups of 17-64 rows are
 * for small projections (blas.c) that run on a graph branch beside a
 * large GEMM: with K of 1024 or more they split K over a cluster of
 * GEMM_FEW_KS blocks (few32g, few64g), whose few row tiles would
 * otherwise leave SMs idle while each block reads all of A; with short K
 * (every member under 1024) a block takes whole tiles (few32g1, few64g1).
 * Four blocks a cluster rather than eight leave the SMs beside them to
 * the other branch's GEMM (docs/benchmarks.md, twenty-ninth entry). */
#define GEMM_FEW_KS 4
GEMM_FEW(haccel_gemm_few8, 1, 8)
GEMM_FEW(haccel_gemm_few16, 2, 4)
GEMM_FEW_GROUP(haccel_gemm_few8g, 1, 8, 1, )
GEMM_FEW_GROUP(haccel_gemm_few16g, 2, 4, 1, )
GEMM_FEW_GROUP(haccel_gemm_few32g, 4, 4, GEMM_FEW_KS, __cluster_dims__(GEMM_FEW_KS, 1, 1))
GEMM_FEW_GROUP(haccel_gemm_few64g, 8, 2, GEMM_FEW_KS, __cluster_dims__(GEMM_FEW_KS, 1, 1))
GEMM_FEW_GROUP(haccel_gemm_few32g1, 4, 4, 1, )
GEMM_FEW_GROUP(haccel_gemm_few64g1, 8, 2, 1, )
