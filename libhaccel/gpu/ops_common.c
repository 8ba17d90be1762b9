// SPDX-License-Identifier: MIT
/* Host side of kernels/common.cu: launch shapes for the common ops. */
#include "config.h"

#include <errno.h>

#include "gpu/ops.h"

/* A grid-stride launch over n values. */
static unsigned int grid_for(size_t n)
{
	size_t b = (n + 255) / 256;

	return b < 1 ? 1 : b > 4096 ? 4096 : (unsigned int)b;
}

/* Threads per block for a row of D values. */
static unsigned int row_threads(uint32_t D)
{
	unsigned int t = 32;

	while (t < 1024 && t < D)
		t <<= 1;
	return t;
}

#define FN(name)                                              \
	void *fn;                                             \
	int ret = haccel__gpu_fn(g, name, &fn);               \
	if (ret)                                              \
		return ret

int haccel__cuda_rmsnorm(struct haccel__gpu *g, void *stream, haccel__dptr y, haccel__dptr x,
			 haccel__dptr w, uint32_t T, uint32_t D, float eps)
{
	FN("haccel_rmsnorm");
	if (!T)
		return 0;
	return HACCEL__LAUNCH(g, fn, T, 1, 1, row_threads(D), 1, 1, 0, stream, &y, &x, &w, &D,
			      &eps);
}

int haccel__cuda_rmsnorm_split(struct haccel__gpu *g, void *stream, haccel__dptr y,
			       haccel__dptr x, uint32_t ldx, haccel__dptr w, uint32_t T, uint32_t D,
			       float eps, haccel__dptr y2, uint32_t n2)
{
	uint64_t ld = ldx;

	if (ldx < (uint64_t)D + n2)
		return -EINVAL;
	FN("haccel_rmsnorm_split");
	if (!T)
		return 0;
	return HACCEL__LAUNCH(g, fn, T, 1, 1, row_threads(D), 1, 1, 0, stream, &y, &x, &ld, &w,
			      &D, &eps, &y2, &n2);
}

int haccel__cuda_rmsnorm_bf16(struct haccel__gpu *g, void *stream, haccel__dptr y,
			      haccel__dptr x, haccel__dptr w, uint32_t T, uint32_t D, float eps)
{
	FN("haccel_rmsnorm_bf16");
	if (!T)
		return 0;
	return HACCEL__LAUNCH(g, fn, T, 1, 1, row_threads(D), 1, 1, 0, stream, &y, &x, &w, &D,
			      &eps);
}

int haccel__cuda_layernorm(struct haccel__gpu *g, void *stream, haccel__dptr y, haccel__dptr x,
			   haccel__dptr w, haccel__dptr b, uint32_t T, uint32_t D, float eps)
{
	FN("haccel_layernorm");
	if (!T)
		return 0;
	return HACCEL__LAUNCH(g, fn, T, 1, 1, row_threads(D), 1, 1, 0, stream, &y, &x, &w, &b,
			      &D, &eps);
}

int haccel__cuda_embed(struct haccel__gpu *g, void *stream, haccel__dptr y, haccel__dptr table,
		       haccel__dptr tok, uint32_t T, uint32_t D)
{
	/* The vocabulary bound is not known here: callers check token ids
	 * before they reach the device (haccel_model_step does). */
	uint32_t V = UINT32_MAX;

	FN("haccel_embed");
	if (!T)
		return 0;
	return HACCEL__LAUNCH(g, fn, T, 1, 1, row_threads(D), 1, 1, 0, stream, &y, &table, &tok,
			      &D, &V);
}

int haccel__cuda_swiglu(struct haccel__gpu *g, void *stream, haccel__dptr y, haccel__dptr gate,
			haccel__dptr up, size_t n)
{
	uint64_t n64 = n;

	FN("haccel_swiglu");
	if (!n)
		return 0;
	return HACCEL__LAUNCH(g, fn, grid_for(n), 1, 1, 256, 1, 1, 0, stream, &y, &gate, &up,
			      &n64);
}

int haccel__cuda_swiglu_bf16(struct haccel__gpu *g, void *stream, haccel__dptr y,
			     haccel__dptr gate, haccel__dptr up, size_t n)
{
	uint64_t n64 = n;

	FN("haccel_swiglu_bf16");
	if (!n)
		return 0;
	return HACCEL__LAUNCH(g, fn, grid_for(n), 1, 1, 256, 1, 1, 0, stream, &y, &gate, &up,
			      &n64);
}

int haccel__cuda_to_bf16_tail(struct haccel__gpu *g, void *stream, haccel__dptr y,
			      haccel__dptr x, size_t rows, uint32_t w, uint32_t c0, haccel__dptr y2)
{
	uint64_t n = (uint64_t)rows * w;

	if (c0 > w)
		return -EINVAL;
	FN("haccel_to_bf16_tail");
	if (!n)
		return 0;
	return HACCEL__LAUNCH(g, fn, grid_for(n), 1, 1, 256, 1, 1, 0, stream, &y, &x, &n, &w, &c0,
			      &y2);
}

int haccel__cuda_scale(struct haccel__gpu *g, void *stream, haccel__dptr y, haccel__dptr x,
		       float s, size_t n)
{
	uint64_t n64 = n;

	FN("haccel_scale");
	if (!n)
		return 0;
	return HACCEL__LAUNCH(g, fn, grid_for(n), 1, 1, 256, 1, 1, 0, stream, &y, &x, &s, &n64);
}

int haccel__cuda_to_bf16(struct haccel__gpu *g, void *stream, haccel__dptr y, haccel__dptr x,
			 size_t n)
{
	uint64_t n64 = n;

	FN("haccel_to_bf16");
	if (!n)
		return 0;
	return HACCEL__LAUNCH(g, fn, grid_for(n), 1, 1, 256, 1, 1, 0, stream, &y, &x, &n64);
}

int haccel__cuda_copy_rows(struct haccel__gpu *g, void *stream, haccel__dptr dst,
			   uint32_t dst_ld, haccel__dptr src, uint32_t src_ld, uint32_t T,
			   uint32_t n)
{
	FN("haccel_copy_rows");
	if (!T || !n)
		return 0;
	return HACCEL__LAUNCH(g, fn, T, 1, 1, row_threads(n) > 256 ? 256 : row_threads(n), 1, 1,
			      0, stream, &dst, &dst_ld, &src, &src_ld, &n);
}

#define ARM_CLUSTER_TOKENS 8
#define ARM_W_THREADS 512 /* common.cu */

/*
 * The kernels for at most 16 sources with every value in registers
 * (common.cu, arm_wide), a block of at most ARM_W_THREADS a token, rows of
 * whole 16-byte chunks: 4 dims a thread (w8n for up to 8 sources, w16 for
 * up to 16) where D allows, else 8 (w8, up to 8 sources). NULL when the
 * shape is none of theirs. Measured on an H200, small (2048 dims, at most
 * 8 sources, 33 mixes a step), the mixes of a step at batch 1 / 64: the
 * cluster and block kernels below 0.245-0.249 / 0.249-0.251 ms, w8 0.157
 * / 0.155, w8n 0.132 / 0.133 (docs/benchmarks.md).
 */
static const char *arm_wide_fn(haccel__dptr yb, haccel__dptr h, haccel__dptr src0,
			       uint64_t src_stride, uint32_t n_src, haccel__dptr query,
			       haccel__dptr norm_w, haccel__dptr out_w, uint32_t D,
			       unsigned int *threads)
{
	unsigned int dpt = n_src <= 8 && D > 4 * ARM_W_THREADS ? 8 : 4;

	if (n_src > 16 || D % 4 || src_stride % 4 || (src0 | h | query | norm_w | out_w) % 16 ||
	    yb % 8 || D > dpt * ARM_W_THREADS)
		return NULL;
	*threads = (D + dpt * 32 - 1) / (dpt * 32) * 32;
	if (dpt == 8)
		return "haccel_attn_res_mix_w8";
	return n_src <= 8 ? "haccel_attn_res_mix_w8n" : "haccel_attn_res_mix_w16";
}

int haccel__cuda_attn_res_mix_norm(struct haccel__gpu *g, void *stream, haccel__dptr yb,
				   haccel__dptr h, haccel__dptr src0, uint64_t src_stride,
				   uint32_t n_src, haccel__dptr query, haccel__dptr norm_w,
				   haccel__dptr out_w, uint32_t T, uint32_t D, float eps)
{
	const char *wide;
	unsigned int wt = 0;

	FN("haccel_attn_res_mix");
	if (n_src > 64 || !n_src)
		return -EINVAL;
	if (!T)
		return 0;
	wide = arm_wide_fn(yb, h, src0, src_stride, n_src, query, norm_w, out_w, D, &wt);
	if (wide) {
		void *fw;

		ret = haccel__gpu_fn(g, wide, &fw);
		if (ret)
			return ret;
		return HACCEL__LAUNCH(g, fw, T, 1, 1, wt, 1, 1, 0, stream, &h, &src0, &src_stride,
				      &n_src, &query, &norm_w, &T, &D, &eps, &yb, &out_w);
	}
	/*
	 * Otherwise (more sources, rows not of 16-byte chunks, longer rows):
	 * up to ARM_CLUSTER_TOKENS tokens: a cluster of 8 blocks of 256
	 * threads a token (common.cu: haccel_attn_res_mix8), where one block
	 * a token leaves most SMs idle and each block's chain of loads and
	 * reductions is the whole time. More: a block a token. Measured on an
	 * H200, small: batch 1 0.303 ms a step as blocks, 0.171 as clusters;
	 * batch 64 0.336 as blocks, 0.533 as clusters of 8 (two waves) and
	 * 0.786 as clusters of 4 (two tiles a block). The blocks get a thread
	 * a dim up to 1024 (more loads in flight in each block's chain):
	 * batch 64 0.332 ms a step with 256 threads, 0.233 with 512, 0.214
	 * with 1024.
	 */
	if (T <= ARM_CLUSTER_TOKENS) {
		void *f8;

		ret = haccel__gpu_fn(g, "haccel_attn_res_mix8", &f8);
		if (ret)
			return ret;
		return HACCEL__LAUNCH(g, f8, T, 8, 1, 256, 1, 1, 0, stream, &h, &src0, &src_stride,
				      &n_src, &query, &norm_w, &T, &D, &eps, &yb, &out_w);
	}
	/* Few sources, two dims a thread at most (common.cu, ARM_R_*): the
	 * sources held in registers. */
	if (n_src <= 8 && D <= 2 * row_threads(D)) {
		void *fr;

		ret = haccel__gpu_fn(g, "haccel_attn_res_mix_r", &fr);
		if (ret)
			return ret;
		return HACCEL__LAUNCH(g, fr, T, 1, 1, row_threads(D), 1, 1, 0, stream, &h, &src0,
				      &src_stride, &n_src, &query, &norm_w, &T, &D, &eps, &yb,
				      &out_w);
	}
	return HACCEL__LAUNCH(g, fn, T, 1, 1, row_threads(D), 1, 1, 0, stream, &h, &src0,
			      &src_stride, &n_src, &query, &norm_w, &T, &D, &eps, &yb, &out_w);
}

int haccel__cuda_attn_res_mix(struct haccel__gpu *g, void *stream, haccel__dptr h,
			      haccel__dptr src0, uint64_t src_stride, uint32_t n_src,
			      haccel__dptr query, haccel__dptr norm_w, uint32_t T, uint32_t D,
			      float eps)
{
	return haccel__cuda_attn_res_mix_norm(g, stream, 0, h, src0, src_stride, n_src, query,
					      norm_w, 0, T, D, eps);
}

int haccel__cuda_add(struct haccel__gpu *g, void *stream, haccel__dptr y, haccel__dptr a,
		     haccel__dptr b, size_t n)
{
	uint64_t n64 = n;

	FN("haccel_add");
	if (!n)
		return 0;
	return HACCEL__LAUNCH(g, fn, grid_for(n), 1, 1, 256, 1, 1, 0, stream, &y, &a, &b, &n64);
}

int haccel__cuda_gather_rows(struct haccel__gpu *g, void *stream, haccel__dptr dst,
			     haccel__dptr src, haccel__dptr rows, uint32_t R, uint32_t D)
{
	FN("haccel_gather_rows");
	if (!R)
		return 0;
	return HACCEL__LAUNCH(g, fn, R, 1, 1, row_threads(D) > 256 ? 256 : row_threads(D), 1, 1,
			      0, stream, &dst, &src, &rows, &D);
}

int haccel__cuda_argmax(struct haccel__gpu *g, void *stream, haccel__dptr out,
			haccel__dptr logits, uint32_t R, uint32_t V)
{
	FN("haccel_argmax");
	if (!R)
		return 0;
	return HACCEL__LAUNCH(g, fn, R, 1, 1, 1024, 1, 1, 0, stream, &out, &logits, &V);
}

int haccel__cuda_convert(struct haccel__gpu *g, void *stream, haccel__dptr dst, int dst_type,
			 haccel__dptr src, int src_type, size_t n)
{
	uint64_t n64 = n;

	FN("haccel_convert");
	if (src_type < 0 || src_type > 2 || dst_type < 0 || dst_type > 1)
		return -EINVAL;
	if (!n)
		return 0;
	return HACCEL__LAUNCH(g, fn, grid_for(n), 1, 1, 256, 1, 1, 0, stream, &dst, &dst_type, &src,
			      &src_type, &n64);
}

int haccel__cuda_scatter_u32(struct haccel__gpu *g, void *stream, haccel__dptr dst,
			     haccel__dptr upd)
{
	FN("haccel_scatter_u32");
	return HACCEL__LAUNCH(g, fn, 1, 1, 1, 256, 1, 1, 0, stream, &dst, &upd);
}
