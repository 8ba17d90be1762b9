// SPDX-License-Identifier: MIT
/*
 * CPU reference of the DeepSeek sparse attention (DSA) ops: rotary
 * embedding, the Hadamard rotation, the KV and index-key cache writes, the
 * lightning indexer with its top-k, and sparse MLA in the absorbed form
 * (docs/model.md, "DSA"). fp32 throughout, every sum in index order.
 *
 * Cache addressing: logical position p of a sequence lives in slot
 * block_table[p / page_tokens] * page_tokens + p % page_tokens of a region,
 * the record at region + slot * record_bytes (haccel.h, the KV pool).
 *
 * What is bit-exact and what is not: the records (format.c) and the
 * indexer's scores and selection are exact functions of their inputs, the
 * same bits on every backend that follows the stated order; rope (libm
 * cosf/sinf), the Hadamard scaling and sparse MLA (expf, and any backend's
 * reordered sums) are checked with tolerances.
 */
#include "config.h"

#include <math.h>

#include "model/format.h"
#include "ops.h"

#define LATENT 512
#define IDX_DIM 128

/* ------------------------------------------------------------------------ */
/* Rotary embedding                                                         */

/*
 * Pair i of dim/2 is (x[i], x[i + dim/2]) (NEOX) or (x[2i], x[2i+1])
 * (INTERLEAVED); it turns by angle = (float)pos * inv_freq_i with
 * inv_freq_i = 1 / theta^(2i / dim), all in fp32 in that order (the
 * exponent 2i/dim one fp32 division, then powf, then the reciprocal) as
 * DeepSeek's precompute_freqs_cis does; then (a, b) <- (a cos - b sin,
 * a sin + b cos), the complex product (a + ib) e^(i angle). The position is
 * converted to fp32 first, exact up to 2^24.
 */
void haccel__cpu_rope(float *x, uint32_t T, uint32_t n_vec, size_t tok_stride,
		      size_t vec_stride, uint32_t dim, const uint32_t *pos,
		      float theta, int layout)
{
	uint32_t half = dim / 2;

	for (uint32_t t = 0; t < T; t++) {
		float *xt = x + t * tok_stride;

		for (uint32_t i = 0; i < half; i++) {
			float inv = 1.0f / powf(theta, (float)(2 * i) / (float)dim);
			float ang = (float)pos[t] * inv;
			float c = cosf(ang), s = sinf(ang);
			uint32_t ia = layout == HACCEL__ROPE_INTERLEAVED ? 2 * i : i;
			uint32_t ib = layout == HACCEL__ROPE_INTERLEAVED ? 2 * i + 1 : i + half;

			for (uint32_t v = 0; v < n_vec; v++) {
				float *xv = xt + v * vec_stride;
				float a = xv[ia], b = xv[ib];

				xv[ia] = a * c - b * s;
				xv[ib] = a * s + b * c;
			}
		}
	}
}

/* ------------------------------------------------------------------------ */
/* Hadamard                                                                 */

/*
 * The fast Walsh-Hadamard butterfly, which is the order of every sum:
 * stages h = 1, 2, 4, ..., 64; in stage h each pair (j, j + h) with
 * j & h == 0, in increasing j, becomes (x_j + x_{j+h}, x_j - x_{j+h}). That
 * gives H x for the Sylvester H (entry (-1)^popcount(i & j)); each result is
 * then multiplied by fp32(2^-3.5) = 0x1.6a09e6p-4.
 */
void haccel__cpu_hadamard128(float *x, uint32_t n)
{
	const float norm = 0x1.6a09e6p-4f; /* 1 / sqrt(128) */

	for (uint32_t v = 0; v < n; v++) {
		float *xv = x + (size_t)v * 128;

		for (uint32_t h = 1; h < 128; h <<= 1)
			for (uint32_t j = 0; j < 128; j++) {
				if (j & h)
					continue;
				float a = xv[j], b = xv[j + h];

				xv[j] = a + b;
				xv[j + h] = a - b;
			}
		for (uint32_t j = 0; j < 128; j++)
			xv[j] *= norm;
	}
}

/* ------------------------------------------------------------------------ */
/* Cache writes                                                             */

/* A negative slot (a padding token, as in vLLM's slot mappings) is skipped. */
void haccel__cpu_mla_kv_write(void *region, const int64_t *slots,
			      const float *latent, const float *k_pe,
			      uint32_t T, uint32_t dr)
{
	uint32_t bytes = haccel__kv_token_bytes(dr);

	for (uint32_t t = 0; t < T; t++) {
		if (slots[t] < 0)
			continue;
		haccel__kv_token_pack((uint8_t *)region + (size_t)slots[t] * bytes,
				      latent + (size_t)t * LATENT,
				      k_pe + (size_t)t * dr, dr);
	}
}

void haccel__cpu_index_k_write(void *region, const int64_t *slots,
			       const float *ik, uint32_t T)
{
	for (uint32_t t = 0; t < T; t++) {
		if (slots[t] < 0)
			continue;
		haccel__index_k_pack((uint8_t *)region +
					     (size_t)slots[t] * HACCEL__INDEX_K_BYTES,
				     ik + (size_t)t * IDX_DIM);
	}
}

static inline const uint8_t *record(const void *region, const uint32_t *bt,
				    uint32_t page_tokens, uint32_t p,
				    uint32_t bytes)
{
	size_t slot = (size_t)bt[p / page_tokens] * page_tokens + p % page_tokens;

	return (const uint8_t *)region + slot * bytes;
}

/* ------------------------------------------------------------------------ */
/* Lightning indexer                                                        */

/*
 * The selection order, a strict total order on positions: a before b when
 * a's score is greater, or the scores are equal and a < b. A NaN score is
 * below every number (-inf included) and NaNs tie with each other; -0 and
 * +0 tie. The best min(topk, n) positions in this order are unique, so any
 * selection algorithm gives the same list.
 */
static inline int better(const float *score, int32_t a, int32_t b)
{
	float sa = score[a], sb = score[b];
	int na = isnan(sa), nb = isnan(sb);

	if (na != nb)
		return nb;
	if (!na && sa != sb)
		return sa > sb;
	return a < b;
}

/* Sift down in a heap whose root is the worst kept position. */
static void sift_down(int32_t *h, uint32_t n, uint32_t i, const float *score)
{
	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, w = i;

		if (l < n && better(score, h[w], h[l]))
			w = l;
		if (r < n && better(score, h[w], h[r]))
			w = r;
		if (w == i)
			return;
		int32_t tmp = h[i];
		h[i] = h[w];
		h[w] = tmp;
		i = w;
	}
}

/*
 * Keep the k best of positions 0..n-1 in sel[0..k), in ascending position:
 * a heap of the k best so far rooted at the worst of them, in sel itself
 * (no other memory), then the kept positions flagged in score (whose
 * values are no longer needed) and collected in order.
 */
static void select_topk(int32_t *sel, uint32_t k, uint32_t n, float *score)
{
	for (uint32_t s = 0; s < n; s++) {
		if (s < k) {
			uint32_t i = s;

			sel[i] = (int32_t)s;
			while (i > 0 && better(score, sel[(i - 1) / 2], sel[i])) {
				int32_t tmp = sel[i];
				sel[i] = sel[(i - 1) / 2];
				sel[(i - 1) / 2] = tmp;
				i = (i - 1) / 2;
			}
		} else if (better(score, (int32_t)s, sel[0])) {
			sel[0] = (int32_t)s;
			sift_down(sel, k, 0, score);
		}
	}
	for (uint32_t s = 0; s < n; s++)
		score[s] = 0.0f;
	for (uint32_t j = 0; j < k; j++)
		score[sel[j]] = 1.0f;
	for (uint32_t s = 0, j = 0; s < n; s++)
		if (score[s] != 0.0f)
			sel[j++] = (int32_t)s;
}

/*
 * score(t, s) = sum over h = 0..IH-1 of w[t][h] * relu(q'[t][h] . k'[s]),
 * with q' = the query vector through MXFP8 and back (haccel__mxfp8_pack /
 * _unpack, exactly as the keys were stored), k' the dequantized key record,
 * the dot product summed over i = 0..127 in fp32 from 0, relu(d) = d > 0 ?
 * d : 0 (so a NaN dot counts 0), and the head sum accumulated in fp32 from
 * 0 in h order. Each product of dequantized values is exact barring
 * underflow (4-bit significands times powers of two), so a backend may
 * multiply codes and apply the scales later, but must keep these orders
 * to get the same bits. Positions 0..pos[t] are the causal mask. Row t of
 * sel has topk entries; those past n_sel[t] are set to -1.
 */
void haccel__cpu_indexer_topk(int32_t *sel, uint32_t *n_sel, const float *q,
			      const float *w, uint32_t T, uint32_t IH,
			      const uint32_t *pos, const void *region,
			      const uint32_t *block_table, uint32_t page_tokens,
			      uint32_t topk, float *scratch)
{
	for (uint32_t t = 0; t < T; t++) {
		uint32_t n = pos[t] + 1, k = n < topk ? n : topk;
		int32_t *st = sel + (size_t)t * topk;

		for (uint32_t s = 0; s < n; s++)
			scratch[s] = 0.0f;
		for (uint32_t h = 0; h < IH; h++) {
			const float *qh = q + ((size_t)t * IH + h) * IDX_DIM;
			float wh = w[(size_t)t * IH + h];
			uint8_t codes[IDX_DIM], scales[IDX_DIM / 32];
			float qd[IDX_DIM], kd[IDX_DIM];

			haccel__mxfp8_pack(codes, scales, qh, IDX_DIM);
			haccel__mxfp8_unpack(qd, codes, scales, IDX_DIM);
			for (uint32_t s = 0; s < n; s++) {
				float dot = 0.0f;

				haccel__index_k_unpack(record(region, block_table,
							      page_tokens, s,
							      HACCEL__INDEX_K_BYTES),
						       kd);
				for (uint32_t i = 0; i < IDX_DIM; i++)
					dot += qd[i] * kd[i];
				scratch[s] += wh * (dot > 0.0f ? dot : 0.0f);
			}
		}
		select_topk(st, k, n, scratch);
		for (uint32_t j = k; j < topk; j++)
			st[j] = -1;
		n_sel[t] = k;
	}
}

/* ------------------------------------------------------------------------ */
/* Sparse MLA                                                               */

/* Rope value i of a KV record (the latent comes from kv_token_unpack with
 * dr = 0, which leaves the rope part alone, so no dr-sized buffer). */
static inline float kv_rope(const uint8_t *rec, uint32_t i)
{
	const uint8_t *p = rec + LATENT + 16 + 2 * i;

	return haccel__bf16_to_float((uint16_t)(p[0] | p[1] << 8));
}

/*
 * Per token t and head h, over j = 0..n_sel[t]-1 with s = sel[t][j]:
 *   l_j = (sum_i q_lat[i] c_s[i] + sum_r q_pe[r] kpe_s[r]) * scale
 * (each dot in fp32 from 0 in index order, the two added, then scaled);
 *   m = max_j l_j, p_j = expf(l_j - m), Z = sum_j p_j (j order),
 *   a_j = p_j / Z, o_lat[i] = sum_j a_j c_s[i] (j order, from 0).
 * c and kpe are the dequantized record (format.c). n_sel[t] = 0 gives
 * zeros. Nothing is masked here: sel[t][0..n_sel[t]) must hold valid
 * positions. A NaN or +inf score makes the head's output NaN.
 */
void haccel__cpu_sparse_mla(float *o_lat, const float *q_lat, const float *q_pe,
			    uint32_t T, uint32_t H, uint32_t dr,
			    const int32_t *sel, const uint32_t *n_sel,
			    uint32_t topk, const void *region,
			    const uint32_t *block_table, uint32_t page_tokens,
			    float scale, float *scratch)
{
	uint32_t bytes = haccel__kv_token_bytes(dr);

	for (uint32_t t = 0; t < T; t++) {
		const int32_t *st = sel + (size_t)t * topk;
		uint32_t n = n_sel[t];

		for (uint32_t h = 0; h < H; h++) {
			const float *ql = q_lat + ((size_t)t * H + h) * LATENT;
			const float *qp = q_pe + ((size_t)t * H + h) * dr;
			float *o = o_lat + ((size_t)t * H + h) * LATENT;
			float m = -INFINITY, z = 0.0f, c[LATENT];

			for (uint32_t j = 0; j < n; j++) {
				const uint8_t *rec = record(region, block_table, page_tokens,
							    (uint32_t)st[j], bytes);
				float dl = 0.0f, dp = 0.0f;

				haccel__kv_token_unpack(rec, c, NULL, 0);
				for (uint32_t i = 0; i < LATENT; i++)
					dl += ql[i] * c[i];
				for (uint32_t r = 0; r < dr; r++)
					dp += qp[r] * kv_rope(rec, r);
				scratch[j] = (dl + dp) * scale;
				/* fmaxf ignores a NaN score; the NaN still
				 * reaches Z and so every output. */
				m = fmaxf(m, scratch[j]);
			}
			for (uint32_t j = 0; j < n; j++) {
				scratch[j] = expf(scratch[j] - m);
				z += scratch[j];
			}
			for (uint32_t j = 0; j < n; j++)
				scratch[j] /= z;
			for (uint32_t i = 0; i < LATENT; i++)
				o[i] = 0.0f;
			for (uint32_t j = 0; j < n; j++) {
				haccel__kv_token_unpack(record(region, block_table,
							       page_tokens,
							       (uint32_t)st[j], bytes),
							c, NULL, 0);
				for (uint32_t i = 0; i < LATENT; i++)
					o[i] += scratch[j] * c[i];
			}
		}
	}
}
