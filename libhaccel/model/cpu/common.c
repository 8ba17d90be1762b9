// SPDX-License-Identifier: MIT
/* CPU reference ops shared by every layer type: matmul, norms, embedding,
 * SwiGLU, the attention-residual mix. Sums run in index order, in fp32. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "ops.h"

void haccel__cpu_matmul(float *y, const float *x, const float *W,
			const float *bias, uint32_t T, uint32_t N, uint32_t K)
{
	for (uint32_t t = 0; t < T; t++) {
		const float *xt = x + (size_t)t * K;
		float *yt = y + (size_t)t * N;

		for (uint32_t n = 0; n < N; n++) {
			const float *w = W + (size_t)n * K;
			float acc = 0.0f;

			for (uint32_t k = 0; k < K; k++)
				acc += xt[k] * w[k];
			yt[n] = bias ? acc + bias[n] : acc;
		}
	}
}

void haccel__cpu_rmsnorm(float *y, const float *x, const float *w, uint32_t T,
			 uint32_t D, float eps)
{
	for (uint32_t t = 0; t < T; t++) {
		const float *xt = x + (size_t)t * D;
		float *yt = y + (size_t)t * D;
		float ss = 0.0f;

		for (uint32_t d = 0; d < D; d++)
			ss += xt[d] * xt[d];
		float r = 1.0f / sqrtf(ss / (float)D + eps);
		for (uint32_t d = 0; d < D; d++)
			yt[d] = xt[d] * r * (w ? w[d] : 1.0f);
	}
}

void haccel__cpu_layernorm(float *y, const float *x, const float *w,
			   const float *b, uint32_t T, uint32_t D, float eps)
{
	for (uint32_t t = 0; t < T; t++) {
		const float *xt = x + (size_t)t * D;
		float *yt = y + (size_t)t * D;
		float mean = 0.0f, var = 0.0f;

		for (uint32_t d = 0; d < D; d++)
			mean += xt[d];
		mean /= (float)D;
		for (uint32_t d = 0; d < D; d++)
			var += (xt[d] - mean) * (xt[d] - mean);
		var /= (float)D;
		float r = 1.0f / sqrtf(var + eps);
		for (uint32_t d = 0; d < D; d++)
			yt[d] = (xt[d] - mean) * r * (w ? w[d] : 1.0f) + (b ? b[d] : 0.0f);
	}
}

void haccel__cpu_embed(float *y, const float *table, const int32_t *tok,
		       uint32_t T, uint32_t D)
{
	for (uint32_t t = 0; t < T; t++)
		memcpy(y + (size_t)t * D, table + (size_t)tok[t] * D,
		       (size_t)D * sizeof(float));
}

static inline float silu(float x)
{
	return x / (1.0f + expf(-x));
}

void haccel__cpu_swiglu(float *y, const float *gate, const float *up, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] = silu(gate[i]) * up[i];
}

void haccel__cpu_attn_res_mix(float *h, const float *const *src, uint32_t n_src,
			      const float *query, const float *norm_w,
			      uint32_t T, uint32_t D, float eps)
{
	/* Depth is small (blocks + 1): logits live on the stack. */
	float logit[64];

	for (uint32_t t = 0; t < T; t++) {
		float mx = -INFINITY, sum = 0.0f;
		float *ht = h + (size_t)t * D;

		for (uint32_t i = 0; i < n_src && i < 64; i++) {
			const float *v = src[i] + (size_t)t * D;
			float ss = 0.0f, dot = 0.0f;

			for (uint32_t d = 0; d < D; d++)
				ss += v[d] * v[d];
			float r = 1.0f / sqrtf(ss / (float)D + eps);
			for (uint32_t d = 0; d < D; d++)
				dot += query[d] * (v[d] * r * norm_w[d]);
			logit[i] = dot;
			if (dot > mx)
				mx = dot;
		}
		for (uint32_t i = 0; i < n_src && i < 64; i++) {
			logit[i] = expf(logit[i] - mx);
			sum += logit[i];
		}
		memset(ht, 0, (size_t)D * sizeof(float));
		for (uint32_t i = 0; i < n_src && i < 64; i++) {
			const float *v = src[i] + (size_t)t * D;
			float a = logit[i] / sum;

			for (uint32_t d = 0; d < D; d++)
				ht[d] += a * v[d];
		}
	}
}
