/* SPDX-License-Identifier: MIT */
/*
 * The CPU reference ops: plain C, fp32 arithmetic, deterministic (a fixed
 * order of every sum), readable first. They define the numbers every other
 * backend is checked against (docs/model.md, "Numerics"). The CUDA backend
 * implements the same ops under the same names with haccel__cuda_ in place
 * of haccel__cpu_, on device pointers, with a stream.
 *
 * Conventions:
 *  - Activations are fp32, row-major [T][dim] for T tokens.
 *  - Weights are fp32, row-major [out][in] (a torch Linear's weight).
 *  - No op allocates: where an op needs room it takes a caller's scratch
 *    buffer whose size it states.
 *  - Ops that keep state across calls (conv tails, the KDA state, the KV
 *    cache) take it explicitly: they work on one sequence's state, or on
 *    pool memory addressed through slots and block tables.
 */
#ifndef HACCEL_MODEL_CPU_OPS_H
#define HACCEL_MODEL_CPU_OPS_H

#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------------ */
/* Common                                                                   */

/* y[T][N] = x[T][K] . W[N][K]^T (+ bias[N] when not NULL); fp32 sums in k
 * order. y must not alias x. */
void haccel__cpu_matmul(float *y, const float *x, const float *W,
			const float *bias, uint32_t T, uint32_t N, uint32_t K);

/* y = x / sqrt(mean(x^2) + eps) * w, per row of D (w may be NULL: 1). y may
 * alias x. */
void haccel__cpu_rmsnorm(float *y, const float *x, const float *w, uint32_t T,
			 uint32_t D, float eps);

/* y = (x - mean) / sqrt(var + eps) * w + b, per row of D (biased variance). */
void haccel__cpu_layernorm(float *y, const float *x, const float *w,
			   const float *b, uint32_t T, uint32_t D, float eps);

/* y[T][D] = table[tok[t]][D]. */
void haccel__cpu_embed(float *y, const float *table, const int32_t *tok,
		       uint32_t T, uint32_t D);

/* y[i] = silu(gate[i]) * up[i] for n values; y may alias gate. */
void haccel__cpu_swiglu(float *y, const float *gate, const float *up, size_t n);

/*
 * Attention residual mix (block form): for each token, over the n_src
 * sources src[i][T][D], logits l_i = query . rmsnorm(src_i) * norm_w (eps),
 * a = softmax(l) in fp32, h = sum_i a_i * src_i (raw values). h[T][D] must
 * not alias a source.
 */
void haccel__cpu_attn_res_mix(float *h, const float *const *src, uint32_t n_src,
			      const float *query, const float *norm_w,
			      uint32_t T, uint32_t D, float eps);

/* ------------------------------------------------------------------------ */
/* KDA (kda.c)                                                              */

enum haccel__kda_gate_form {
	HACCEL__KDA_GATE_SOFTPLUS = 0,    /* -exp(A_log) * softplus(g + dt_bias) */
	HACCEL__KDA_GATE_LOWER_BOUND = 1, /* lb * sigmoid(exp(A_log) * (g + dt_bias)) */
};

/*
 * Causal depthwise convolution of width W with SiLU, over T tokens of one
 * sequence: out[t][c] = silu(sum_{j<W} w[c][j] * x[t-(W-1)+j][c]), where
 * inputs before t = 0 come from tail[W-1][C] (the previous raw inputs,
 * oldest first; zeros for a new sequence). tail is updated to the last W-1
 * raw inputs. out must not alias in.
 */
void haccel__cpu_kda_conv(float *out, const float *in, uint32_t T, uint32_t C,
			  const float *w, uint32_t W, float *tail);

/* The decay gate g[T][H*K] (log space, <= 0) from g_raw[T][H*K],
 * A_log[H], dt_bias[H*K]; form (an unknown value is read as softplus; the
 * config parser admits only the two) and lower bound lb as above. g may
 * alias g_raw. softplus(x) = x for x > 20, else log1p(exp(x)). */
void haccel__cpu_kda_gate(float *g, const float *g_raw, uint32_t T, uint32_t H,
			  uint32_t K, const float *A_log, const float *dt_bias,
			  int form, float lb);

/* In place, per token and head: q = l2norm(q) * K^-1/2, k = l2norm(k),
 * l2norm(x) = x / sqrt(sum x^2 + 1e-6); beta[T][H] = sigmoid(beta). */
void haccel__cpu_kda_prep(float *q, float *k, float *beta, uint32_t T,
			  uint32_t H, uint32_t K);

/*
 * The KDA recurrence for T tokens of one sequence, token by token, in this
 * order per head: S = diag(exp(g_t)) S; u = beta_t (v_t - k_t^T S);
 * S = S + k_t u^T; o_t = q_t^T S. S[H][K][V] in and out; q, k, g [T][H][K];
 * v [T][H][V]; beta [T][H]; o [T][H][V], which must not alias an input.
 */
void haccel__cpu_kda_recurrent(float *S, const float *q, const float *k,
			       const float *v, const float *g,
			       const float *beta, float *o, uint32_t T,
			       uint32_t H, uint32_t K, uint32_t V);

/*
 * The same result by the chunked form, chunks of C tokens: within a chunk
 * decays are exp(G_i - G_j) of cumulative log gates (never ratios), the
 * intra-chunk delta rule solved by forward substitution. C >= 1; scratch
 * holds haccel__cpu_kda_chunked_scratch(C, K, V) = C * (K + V + C) floats;
 * o must not alias an input. Chunks restart at each call: one sequence split
 * over calls agrees with one call within tolerance, not bit for bit.
 */
size_t haccel__cpu_kda_chunked_scratch(uint32_t C, uint32_t K, uint32_t V);
void haccel__cpu_kda_chunked(float *S, const float *q, const float *k,
			     const float *v, const float *g, const float *beta,
			     float *o, uint32_t T, uint32_t H, uint32_t K,
			     uint32_t V, uint32_t C, float *scratch);

/* Per token and head: o = o / sqrt(mean(o^2) + eps) * w[V] * sigmoid(gate),
 * o and gate [T][H][V]; in place. */
void haccel__cpu_gated_rmsnorm(float *o, const float *gate, const float *w,
			       uint32_t T, uint32_t H, uint32_t V, float eps);

/* ------------------------------------------------------------------------ */
/* DSA: MLA and the lightning indexer (dsa.c)                               */

enum haccel__rope_layout {
	HACCEL__ROPE_NEOX = 0,        /* pairs (i, i + d/2) */
	HACCEL__ROPE_INTERLEAVED = 1, /* pairs (2i, 2i + 1) */
};

/*
 * Rotary embedding in place on the first `dim` values of n_vec vectors per
 * token, vector v of token t at x + t * tok_stride + v * vec_stride, by
 * angle pos[t] * theta^(-2i/dim) for pair i.
 */
void haccel__cpu_rope(float *x, uint32_t T, uint32_t n_vec, size_t tok_stride,
		      size_t vec_stride, uint32_t dim, const uint32_t *pos,
		      float theta, int layout);

/* In place on n vectors of 128: x = H x / sqrt(128), H the Sylvester
 * Hadamard matrix (H_1 = [1], H_2n = [[H, H], [H, -H]]). */
void haccel__cpu_hadamard128(float *x, uint32_t n);

/*
 * Quantize and store each token's KV entry at slots[t] of a KV region whose
 * records are 528 + 2 * dr bytes: latent[T][512] as FP8 E4M3 in 4 tiles of
 * 128 with one fp32 power-of-two scale per tile, then k_pe[T][dr] as bf16.
 * A negative slot is skipped. (docs/model.md, "Formats".)
 */
void haccel__cpu_mla_kv_write(void *region, const int64_t *slots,
			      const float *latent, const float *k_pe,
			      uint32_t T, uint32_t dr);

/* Quantize (MXFP8) and store each token's index key ik[T][128] at
 * slots[t] of an index-key region of 132-byte records; a negative slot is
 * skipped. */
void haccel__cpu_index_k_write(void *region, const int64_t *slots,
			       const float *ik, uint32_t T);

/*
 * Lightning indexer with top-k, for T query tokens of one sequence at
 * positions pos[t]: q[T][IH][128] (rotated and Hadamard-transformed;
 * quantized to MXFP8 here, as the keys were when written), head weights
 * w[T][IH]. Keys of positions 0..pos[t] are read through the block table
 * from the index-key region (pages of page_tokens). score(t, s) =
 * sum_h w[t][h] * relu(q[t][h] . k[s]) over dequantized values. Writes the
 * min(topk, pos[t] + 1) best positions to sel[t][0..], by score descending,
 * ties to the smaller position, and their count to n_sel[t]; rows of sel
 * are topk long and unused entries are -1. A NaN score ranks below every
 * number. Keys of every position up to pos[t] (this chunk's too) must be
 * written before the call. scratch holds pos_max + 1 floats (pos_max = the
 * largest pos[t]).
 */
void haccel__cpu_indexer_topk(int32_t *sel, uint32_t *n_sel, const float *q,
			      const float *w, uint32_t T, uint32_t IH,
			      const uint32_t *pos, const void *region,
			      const uint32_t *block_table, uint32_t page_tokens,
			      uint32_t topk, float *scratch);

/*
 * Sparse MLA in the absorbed form for T tokens of one sequence and H heads:
 * q_lat[T][H][512], q_pe[T][H][dr]; for token t the positions
 * sel[t][0..n_sel[t]) are read (dequantized) through the block table from
 * the KV region (528 + 2 dr bytes per record). Per head: scores =
 * (q_lat . c_s + q_pe . kpe_s) * scale, softmax in fp32 over the selected
 * positions, o_lat[t][h] = sum_s p_s c_s. scratch holds topk floats.
 */
void haccel__cpu_sparse_mla(float *o_lat, const float *q_lat, const float *q_pe,
			    uint32_t T, uint32_t H, uint32_t dr,
			    const int32_t *sel, const uint32_t *n_sel,
			    uint32_t topk, const void *region,
			    const uint32_t *block_table, uint32_t page_tokens,
			    float scale, float *scratch);

#endif /* HACCEL_MODEL_CPU_OPS_H */
