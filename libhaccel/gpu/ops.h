/* SPDX-License-Identifier: MIT */
/*
 * The CUDA ops: the CPU reference ops of model/cpu/ops.h on the GPU, under
 * the same names with haccel__cuda_ in place of haccel__cpu_, the same
 * formats (docs/model.md) and the same meaning for every argument, with
 * three differences:
 *
 *  - Pointers are device addresses (CUdeviceptr, uint64_t); every op takes
 *    the GPU runtime g and a stream (NULL: g's compute stream), enqueues its
 *    work and returns 0 or -errno (a launch error, logged). Nothing is
 *    synchronised and nothing is allocated: ops can be captured in a graph.
 *  - Ops that keep per-sequence state work on many sequences in one launch.
 *    The T tokens of a step are cut into n_seg segments, segment s holding
 *    tokens [seg_off[s], seg_off[s + 1]) of one sequence (decode: n_seg
 *    segments of one token; prefill: one segment of T tokens). Per segment
 *    seg_slot[s] is its state-pool slot (KDA) and per token bt_row[t] its
 *    block-table row (DSA, the sequence's KV id). All these index arrays
 *    are on the device.
 *  - State addressed through a slot lives at base + slot * slot_stride
 *    (bytes), the state pool's layout.
 *
 * Tolerances against the CPU ops are stated by the tests (tests/gpu-*.c);
 * quantized cache bytes are bit-exact.
 */
#ifndef HACCEL_GPU_OPS_H
#define HACCEL_GPU_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "gpu/module.h"

typedef uint64_t haccel__dptr;

/* ------------------------------------------------------------------------ */
/* Common (gpu/ops_common.c, kernels/common.cu)                             */

int haccel__cuda_rmsnorm(struct haccel__gpu *g, void *stream, haccel__dptr y,
			 haccel__dptr x, haccel__dptr w, uint32_t T, uint32_t D,
			 float eps);
/* A row split in two, one launch: y[t] = rmsnorm(x[t][0..D)) as
 * haccel__cuda_rmsnorm (y [T][D]), y2[t] = x[t][D..D + n2) ([T][n2]); rows
 * of x ldx floats apart. -EINVAL for ldx < D + n2. */
int haccel__cuda_rmsnorm_split(struct haccel__gpu *g, void *stream, haccel__dptr y,
			       haccel__dptr x, uint32_t ldx, haccel__dptr w, uint32_t T, uint32_t D,
			       float eps, haccel__dptr y2, uint32_t n2);
/* rmsnorm's result rounded to bf16 (y bf16 [T][D]): the same bits as
 * haccel__cuda_rmsnorm then haccel__cuda_to_bf16. */
int haccel__cuda_rmsnorm_bf16(struct haccel__gpu *g, void *stream, haccel__dptr y,
			      haccel__dptr x, haccel__dptr w, uint32_t T, uint32_t D,
			      float eps);
int haccel__cuda_layernorm(struct haccel__gpu *g, void *stream, haccel__dptr y,
			   haccel__dptr x, haccel__dptr w, haccel__dptr b,
			   uint32_t T, uint32_t D, float eps);
/* table is bf16 [V][D], the stored embedding (callers check token ids). */
int haccel__cuda_embed(struct haccel__gpu *g, void *stream, haccel__dptr y,
		       haccel__dptr table, haccel__dptr tok, uint32_t T,
		       uint32_t D);
int haccel__cuda_swiglu(struct haccel__gpu *g, void *stream, haccel__dptr y,
			haccel__dptr gate, haccel__dptr up, size_t n);
/* swiglu's result rounded to bf16 (y bf16): the same bits as swiglu then
 * haccel__cuda_to_bf16. */
int haccel__cuda_swiglu_bf16(struct haccel__gpu *g, void *stream, haccel__dptr y,
			     haccel__dptr gate, haccel__dptr up, size_t n);
/* The n_src sources are [T][D] fp32 each, source i at src0 + i *
 * src_stride floats (the model keeps its blocks in one array). */
int haccel__cuda_attn_res_mix(struct haccel__gpu *g, void *stream,
			      haccel__dptr h, haccel__dptr src0,
			      uint64_t src_stride, uint32_t n_src,
			      haccel__dptr query, haccel__dptr norm_w,
			      uint32_t T, uint32_t D, float eps);
/* The mix, then the next layer's input norm of h with weight out_w (0:
 * none) and the same eps, in bf16 into yb [T][D] (h is written too, the
 * bits of haccel__cuda_attn_res_mix): the norm's sum in another order
 * than haccel__cuda_rmsnorm_bf16's, so within one bf16 step of it (the
 * same bits only for more than 8 tokens and shapes the kernels in
 * registers do not take: common.cu, arm_wide). */
int haccel__cuda_attn_res_mix_norm(struct haccel__gpu *g, void *stream,
				   haccel__dptr yb, haccel__dptr h,
				   haccel__dptr src0, uint64_t src_stride,
				   uint32_t n_src, haccel__dptr query,
				   haccel__dptr norm_w, haccel__dptr out_w,
				   uint32_t T, uint32_t D, float eps);
/* y = a + b over n floats (y may alias a or b). */
int haccel__cuda_add(struct haccel__gpu *g, void *stream, haccel__dptr y,
		     haccel__dptr a, haccel__dptr b, size_t n);
/* dst[r][0..D) = src[rows[r]][0..D) for r < R; rows uint32_t on the device. */
int haccel__cuda_gather_rows(struct haccel__gpu *g, void *stream,
			     haccel__dptr dst, haccel__dptr src,
			     haccel__dptr rows, uint32_t R, uint32_t D);
/* y[i] = bf16(x[i]) for n values (the GEMM input), round to nearest even. */
int haccel__cuda_to_bf16(struct haccel__gpu *g, void *stream, haccel__dptr y,
			 haccel__dptr x, size_t n);
/* to_bf16 of rows x w values, and also columns [c0, w) of each row to y2
 * ([rows][w - c0] floats): one launch. -EINVAL for c0 > w. */
int haccel__cuda_to_bf16_tail(struct haccel__gpu *g, void *stream, haccel__dptr y,
			      haccel__dptr x, size_t rows, uint32_t w, uint32_t c0, haccel__dptr y2);
/* y[i] = x[i] * s. */
int haccel__cuda_scale(struct haccel__gpu *g, void *stream, haccel__dptr y,
		       haccel__dptr x, float s, size_t n);
/* Strided row copy: dst[t][0..n) = src[t][0..n), rows of dst_ld and src_ld
 * floats (the split of a fused projection). */
int haccel__cuda_copy_rows(struct haccel__gpu *g, void *stream,
			   haccel__dptr dst, uint32_t dst_ld, haccel__dptr src,
			   uint32_t src_ld, uint32_t T, uint32_t n);
/* Load-time conversion of n values: src_type and dst_type are 0 (f32),
 * 1 (bf16) or 2 (f16, source only); src may have any alignment. */
int haccel__cuda_convert(struct haccel__gpu *g, void *stream, haccel__dptr dst,
			 int dst_type, haccel__dptr src, int src_type, size_t n);
/* dst[upd[1 + 2i]] = upd[2 + 2i] for i < upd[0] (uint32_t, on the device). */
int haccel__cuda_scatter_u32(struct haccel__gpu *g, void *stream, haccel__dptr dst,
			     haccel__dptr upd);
/* Greedy sampling: out[r] = argmax of logits[r][0..V) (ties: the smaller
 * index; NaN ranks below every number), for R rows. */
int haccel__cuda_argmax(struct haccel__gpu *g, void *stream, haccel__dptr out,
			haccel__dptr logits, uint32_t R, uint32_t V);

/* ------------------------------------------------------------------------ */
/* KDA (gpu/ops_kda.c, kernels/kda.cu)                                      */

/*
 * Causal depthwise conv + SiLU over segments; segment s's tail
 * ([W-1][C] fp32, oldest first) at tail_base + seg_slot[s] * slot_stride is
 * read and updated as haccel__cpu_kda_conv does.
 */
int haccel__cuda_kda_conv(struct haccel__gpu *g, void *stream, haccel__dptr out,
			  haccel__dptr in, uint32_t T, uint32_t C,
			  haccel__dptr w, uint32_t W, uint32_t n_seg,
			  haccel__dptr seg_off, haccel__dptr seg_slot,
			  haccel__dptr tail_base, uint64_t slot_stride);
/* n convolutions of one shape over the same segments in one launch
 * (a layer's q, k, v): out[i], in[i], w[i], tail_base[i] as above; when
 * any of the four lists is not equally spaced, one launch each. */
int haccel__cuda_kda_conv_n(struct haccel__gpu *g, void *stream, uint32_t n,
			    const haccel__dptr *out, const haccel__dptr *in,
			    const haccel__dptr *w, const haccel__dptr *tail_base,
			    uint32_t T, uint32_t C, uint32_t W, uint32_t n_seg,
			    haccel__dptr seg_off, haccel__dptr seg_slot,
			    uint64_t slot_stride);
int haccel__cuda_kda_gate(struct haccel__gpu *g, void *stream, haccel__dptr gt,
			  haccel__dptr g_raw, uint32_t T, uint32_t H,
			  uint32_t K, haccel__dptr A_log, haccel__dptr dt_bias,
			  int form, float lb);
int haccel__cuda_kda_prep(struct haccel__gpu *g, void *stream, haccel__dptr q,
			  haccel__dptr k, haccel__dptr beta, uint32_t T,
			  uint32_t H, uint32_t K);
/*
 * The recurrence token by token (the decode kernel: a segment is usually
 * one token), state S[H][K][V] fp32 of segment s at
 * state_base + seg_slot[s] * slot_stride, updated in place.
 */
int haccel__cuda_kda_recurrent(struct haccel__gpu *g, void *stream,
			       haccel__dptr q, haccel__dptr k, haccel__dptr v,
			       haccel__dptr gt, haccel__dptr beta, haccel__dptr o,
			       uint32_t T, uint32_t H, uint32_t K, uint32_t V,
			       uint32_t n_seg, haccel__dptr seg_off,
			       haccel__dptr seg_slot, haccel__dptr state_base,
			       uint64_t slot_stride);
/*
 * The same on the raw inputs: q, k as the convolution left them, g_raw as
 * haccel__cuda_kda_gate takes it, beta before its sigmoid. The gate, the
 * norms of q and k and the sigmoid are formed inside, each the bits of
 * haccel__cuda_kda_gate and haccel__cuda_kda_prep, so o and the state are
 * those of the three calls (tested); q, k, g_raw and beta are not
 * written.
 */
int haccel__cuda_kda_recurrent_raw(struct haccel__gpu *g, void *stream,
				   haccel__dptr q, haccel__dptr k, haccel__dptr v,
				   haccel__dptr g_raw, haccel__dptr beta, haccel__dptr o,
				   uint32_t T, uint32_t H, uint32_t K, uint32_t V,
				   uint32_t n_seg, haccel__dptr seg_off,
				   haccel__dptr seg_slot, haccel__dptr state_base,
				   uint64_t slot_stride, haccel__dptr A_log,
				   haccel__dptr dt_bias, int form, float lb);
/*
 * The chunked form (prefill), chunks of 64 tokens restarting at each
 * segment's first token; same state addressing. scratch: at least
 * haccel__cuda_kda_chunked_scratch(T, H, K, V, n_seg) bytes of device
 * memory (0 when the kernel needs none).
 */
size_t haccel__cuda_kda_chunked_scratch(uint32_t T, uint32_t H, uint32_t K,
					uint32_t V, uint32_t n_seg);
int haccel__cuda_kda_chunked(struct haccel__gpu *g, void *stream,
			     haccel__dptr q, haccel__dptr k, haccel__dptr v,
			     haccel__dptr gt, haccel__dptr beta, haccel__dptr o,
			     uint32_t T, uint32_t H, uint32_t K, uint32_t V,
			     uint32_t n_seg, haccel__dptr seg_off,
			     haccel__dptr seg_slot, haccel__dptr state_base,
			     uint64_t slot_stride, haccel__dptr scratch);
/* For gpu-kda: the warpgroup product of the chunked form's pass 2 on its
 * own, c [64][NV] = A B (fp32, row-major; A [64][K], or stored [K][64]
 * with ta), K 64 or 128, NV 32 or 64; part 1 only its tf32 products of
 * the high parts, 2 only its bf16 cross terms, 0 both. */
int haccel__cuda_kda_wg_matmul(struct haccel__gpu *g, void *stream, haccel__dptr c,
			       haccel__dptr a, haccel__dptr b, uint32_t K, uint32_t NV,
			       uint32_t ta, uint32_t part);
int haccel__cuda_gated_rmsnorm(struct haccel__gpu *g, void *stream,
			       haccel__dptr o, haccel__dptr gate, haccel__dptr w,
			       uint32_t T, uint32_t H, uint32_t V, float eps);
/* The same into y (bf16 [T][H][V]), o left as it is: the bits of
 * gated_rmsnorm then haccel__cuda_to_bf16. */
int haccel__cuda_gated_rmsnorm_bf16(struct haccel__gpu *g, void *stream, haccel__dptr y,
				    haccel__dptr o, haccel__dptr gate, haccel__dptr w,
				    uint32_t T, uint32_t H, uint32_t V, float eps);

/* ------------------------------------------------------------------------ */
/* DSA (gpu/ops_dsa.c, kernels/dsa.cu)                                      */

/* pos: uint32_t[T] on the device. */
int haccel__cuda_rope(struct haccel__gpu *g, void *stream, haccel__dptr x,
		      uint32_t T, uint32_t n_vec, size_t tok_stride,
		      size_t vec_stride, uint32_t dim, haccel__dptr pos,
		      float theta, int layout);
/* haccel__cuda_rope on two sets of vectors at the same positions (x, n_vec
 * and x2, n_vec2 with their strides) in one launch: the same bits. */
int haccel__cuda_rope2(struct haccel__gpu *g, void *stream, haccel__dptr x, uint32_t n_vec,
		       size_t tok_stride, size_t vec_stride, haccel__dptr x2, uint32_t n_vec2,
		       size_t tok_stride2, size_t vec_stride2, uint32_t T, uint32_t dim,
		       haccel__dptr pos, float theta, int layout);
int haccel__cuda_hadamard128(struct haccel__gpu *g, void *stream,
			     haccel__dptr x, uint32_t n);
/* haccel__cuda_rope (dim = 0: none) then haccel__cuda_hadamard128 on the
 * same n_vec vectors of 128 a token, in one launch: the same bits. */
int haccel__cuda_rope_hadamard(struct haccel__gpu *g, void *stream, haccel__dptr x, uint32_t T,
			       uint32_t n_vec, size_t tok_stride, size_t vec_stride, uint32_t dim,
			       haccel__dptr pos, float theta, int layout);
/* Bit-exact with the CPU writers; slots: int64_t[T] (negative: skipped). */
int haccel__cuda_mla_kv_write(struct haccel__gpu *g, void *stream,
			      haccel__dptr region, haccel__dptr slots,
			      haccel__dptr latent, haccel__dptr k_pe,
			      uint32_t T, uint32_t dr);
int haccel__cuda_index_k_write(struct haccel__gpu *g, void *stream,
			       haccel__dptr region, haccel__dptr slots,
			       haccel__dptr ik, uint32_t T);
/*
 * A DSA layer's index keys from their projections x[T][128] in one
 * launch, the bits of haccel__cuda_layernorm (w, b, eps), haccel__cuda_rope
 * (the first dr dims; 0: none), haccel__cuda_hadamard128 and
 * haccel__cuda_index_k_write in turn (no fp32 key is written); and the
 * head weights hw[T][IH] times s, in place (haccel__cuda_scale).
 */
int haccel__cuda_index_k_fused(struct haccel__gpu *g, void *stream, haccel__dptr region,
			       haccel__dptr slots, haccel__dptr x, haccel__dptr w, haccel__dptr b,
			       float eps, uint32_t T, uint32_t dr, haccel__dptr pos, float theta,
			       int layout, haccel__dptr hw, uint32_t IH, float s);
/*
 * The fused indexer: for each token t, keys of positions 0..pos[t] read
 * through block_tables row bt_row[t] (bt_stride entries a row, pages of
 * page_tokens) from the index-key region; scores and selection as
 * haccel__cpu_indexer_topk (same order, ties, NaN rule, -1 padding).
 * scratch: haccel__cuda_indexer_scratch(T, max_pos, topk) bytes.
 * rope: NULL when q holds the queries as the scoring takes them; else q
 * holds them as their projection gives them, and the indexer applies
 * haccel__cuda_rope_hadamard's transform (rope->dim, theta, layout at the
 * tokens' positions; the same bits) as it prepares them, so that the
 * step needs no launch for it.
 */
struct haccel__ix_rope {
	uint32_t dim;
	float theta;
	int layout;
};
size_t haccel__cuda_indexer_scratch(uint32_t T, uint32_t max_pos,
				    uint32_t topk);
int haccel__cuda_indexer_topk(struct haccel__gpu *g, void *stream,
			      haccel__dptr sel, haccel__dptr n_sel,
			      haccel__dptr q, haccel__dptr w, uint32_t T,
			      uint32_t IH, haccel__dptr pos, haccel__dptr bt_row,
			      haccel__dptr region, haccel__dptr block_tables,
			      uint32_t bt_stride, uint32_t page_tokens,
			      uint32_t topk, uint32_t max_pos,
			      haccel__dptr scratch, const struct haccel__ix_rope *rope);
/* Sparse MLA decode/prefill, per token t through block_tables row
 * bt_row[t]; as haccel__cpu_sparse_mla. scratch:
 * haccel__cuda_sparse_mla_scratch_gpu(g, T, H, topk) bytes, enough for any
 * call of T or fewer tokens on g (every scratch size here is: workspace is
 * carved once for the largest step), its first 256 bytes zero before the
 * first call (a call leaves them zero: the flags merge's words, dsa.cu)
 * and used by one call at a time; _scratch(sms, ...) is the same for
 * the default kernels on a device of sms multiprocessors (what g needs
 * unless HACCEL_SPARSE_MLA=h32 picks 32-head groups, whose splits are
 * more). splits: how many pieces each token's selection is cut into (1:
 * no scratch used) by the default kernels; both depend on sms (16-head
 * groups run one wave). */
size_t haccel__cuda_sparse_mla_scratch(uint32_t sms, uint32_t T, uint32_t H, uint32_t topk);
size_t haccel__cuda_sparse_mla_scratch_gpu(const struct haccel__gpu *g, uint32_t T, uint32_t H,
					   uint32_t topk);
uint32_t haccel__cuda_sparse_mla_splits(uint32_t sms, uint32_t T, uint32_t H, uint32_t topk);
/* The splits of a call of these shapes on g, as it will run (with
 * HACCEL_SPARSE_MLA=h32 above 16 heads, its 32-head groups' own). */
uint32_t haccel__cuda_sparse_mla_splits_gpu(const struct haccel__gpu *g, uint32_t T, uint32_t H,
					    uint32_t topk);
/* 1 when a call of these shapes merges its splits within clusters of
 * blocks (h16w, 2-8 splits; no combine kernel), else 0. */
int haccel__cuda_sparse_mla_cluster(struct haccel__gpu *g, uint32_t T, uint32_t H,
				    uint32_t topk);
/* 1 where a call of these shapes merges its splits through memory in its
 * own blocks (dsa.cu, haccel_dsa_mla_h16sf: no combine kernel), else 0. */
int haccel__cuda_sparse_mla_flags(struct haccel__gpu *g, uint32_t T, uint32_t H, uint32_t topk);
/* With o_bf (else 0), the output goes to o_bf [T][H][512] in bf16,
 * rounded as haccel__cuda_to_bf16 rounds: written where the splits merge
 * (the combine kernel, or the cluster), else converted from o_lat (then
 * its fp32 copy, written too). */
int haccel__cuda_sparse_mla(struct haccel__gpu *g, void *stream,
			    haccel__dptr o_lat, haccel__dptr o_bf, haccel__dptr q_lat,
			    haccel__dptr q_pe, uint32_t T, uint32_t H,
			    uint32_t dr, haccel__dptr sel, haccel__dptr n_sel,
			    uint32_t topk, haccel__dptr bt_row,
			    haccel__dptr region, haccel__dptr block_tables,
			    uint32_t bt_stride, uint32_t page_tokens,
			    float scale, haccel__dptr scratch);

#endif /* HACCEL_GPU_OPS_H */
