// SPDX-License-Identifier: MIT
/*
 * CPU reference of the Kimi Delta Attention (KDA) ops: the short causal
 * convolution, the decay gate, q/k/beta preparation, the gated delta rule
 * with per-channel decay (token by token, and chunked), and the gated
 * RMSNorm of the output. They follow fla's naive_recurrent_kda /
 * fused_recurrent_kda (use_qk_l2norm_in_kernel), ShortConvolution with
 * SiLU, fused_kda_gate and FusedRMSNormGated with a sigmoid gate; the full
 * spec is docs/model.md, "KDA ops".
 *
 * Layouts, one sequence of T tokens, H heads, head widths K (keys) and V
 * (values), all fp32 row-major:
 *   q, k, g   [T][H][K]      v, o, gate [T][H][V]      beta [T][H]
 *   S         [H][K][V]      (row c of head h at S + (h*K + c)*V)
 *
 * The recurrence, per head, with D_t = diag(exp(g_t)) (g_t <= 0, log space):
 *
 *   S'  = D_t S_{t-1}
 *   u_t = beta_t (v_t - S'^T k_t)
 *   S_t = S' + k_t u_t^T
 *   o_t = S_t^T q_t
 *
 * The chunked form. Split the tokens into chunks of n <= C; inside a chunk
 * index tokens 0..n-1, let S0 be the state before it and G_i the prefix sum
 * g_0 + ... + g_i (per channel, log space). Unrolling the recurrence,
 *
 *   S_i = diag(e^{G_i}) S0 + sum_{j<=i} diag(e^{G_i - G_j}) k_j u_j^T
 *
 * and substituting into u_i gives a unit lower-triangular system for the
 * n rows u_i:
 *
 *   u_i + sum_{j<i} A_ij u_j = beta_i (v_i - S0^T (e^{G_i} * k_i))
 *   A_ij = beta_i sum_c k_i[c] k_j[c] e^{G_i[c] - G_j[c]}        (j < i)
 *
 * solved by forward substitution (this is the UT/WY transform of fla's
 * chunk_kda: with P = (I + A)^-1 diag(beta), its u - w S0 with u = P V
 * and w = P (e^G * K) is the same solution, without forming P). Then
 *
 *   o_i = S0^T (e^{G_i} * q_i) + sum_{j<=i} Q_ij u_j
 *   Q_ij = sum_c q_i[c] k_j[c] e^{G_i[c] - G_j[c]}              (j <= i)
 *   S_n = diag(e^{G_{n-1}}) S0 + sum_j diag(e^{G_{n-1} - G_j}) k_j u_j^T
 *
 * Every decay is the exponential of a difference G_i - G_j with i >= j, or
 * of G_i itself, so every exponent is <= 0 and nothing overflows; a decay
 * that is really below 2^-149 underflows to 0 as it should. The factored
 * form e^{G_i} / e^{G_j} would give 0/0 once a chunk's decay passes
 * about e^-104 (64 tokens at g = -5 reach e^-320).
 *
 * Every sum runs in index order in fp32; no op allocates.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "ops.h"

static inline float sigmoid(float x)
{
	return 1.0f / (1.0f + expf(-x));
}

static inline float silu(float x)
{
	return x / (1.0f + expf(-x));
}

/* torch's softplus with its default threshold: linear above 20, where
 * log1p(exp(x)) equals x in fp32 anyway and exp would only lose range. */
static inline float softplus(float x)
{
	return x > 20.0f ? x : log1pf(expf(x));
}

void haccel__cpu_kda_conv(float *out, const float *in, uint32_t T, uint32_t C,
			  const float *w, uint32_t W, float *tail)
{
	const uint32_t P = W - 1; /* rows of history */

	if (W == 0)
		return;
	for (uint32_t t = 0; t < T; t++) {
		for (uint32_t c = 0; c < C; c++) {
			const float *wc = w + (size_t)c * W;
			float acc = 0.0f;

			/* Input x[t - P + j]: from the tail while that is
			 * before this call's first token. */
			for (uint32_t j = 0; j < W; j++) {
				int64_t s = (int64_t)t - P + j;
				float x = s < 0 ? tail[(size_t)(P + s) * C + c]
						: in[(size_t)s * C + c];
				acc += wc[j] * x;
			}
			out[(size_t)t * C + c] = silu(acc);
		}
	}

	/*
	 * The new tail is the last P rows of (old tail, in). The tail is read
	 * above, so it is only rewritten now; when T < P its newest P - T rows
	 * move to the front before the inputs are appended.
	 */
	if (T >= P) {
		memcpy(tail, in + (size_t)(T - P) * C, (size_t)P * C * sizeof(float));
	} else {
		memmove(tail, tail + (size_t)T * C,
			(size_t)(P - T) * C * sizeof(float));
		memcpy(tail + (size_t)(P - T) * C, in, (size_t)T * C * sizeof(float));
	}
}

void haccel__cpu_kda_gate(float *g, const float *g_raw, uint32_t T, uint32_t H,
			  uint32_t K, const float *A_log, const float *dt_bias,
			  int form, float lb)
{
	for (uint32_t t = 0; t < T; t++) {
		for (uint32_t h = 0; h < H; h++) {
			size_t row = ((size_t)t * H + h) * K;
			const float *b = dt_bias + (size_t)h * K;
			float a = expf(A_log[h]);

			for (uint32_t c = 0; c < K; c++) {
				float x = g_raw[row + c] + b[c];

				if (form == HACCEL__KDA_GATE_LOWER_BOUND)
					g[row + c] = lb * sigmoid(a * x);
				else
					g[row + c] = -a * softplus(x);
			}
		}
	}
}

/* x = x / sqrt(sum x^2 + 1e-6) * scale over n values. */
static void l2norm_scale(float *x, uint32_t n, float scale)
{
	float ss = 0.0f;

	for (uint32_t c = 0; c < n; c++)
		ss += x[c] * x[c];
	float r = 1.0f / sqrtf(ss + 1e-6f);
	for (uint32_t c = 0; c < n; c++)
		x[c] = x[c] * r * scale;
}

void haccel__cpu_kda_prep(float *q, float *k, float *beta, uint32_t T,
			  uint32_t H, uint32_t K)
{
	/* K^-1/2 rounded once to fp32, as fla's scale = K ** -0.5. */
	const float scale = (float)(1.0 / sqrt((double)K));

	for (size_t r = 0; r < (size_t)T * H; r++) {
		l2norm_scale(q + r * K, K, scale);
		l2norm_scale(k + r * K, K, 1.0f);
		beta[r] = sigmoid(beta[r]);
	}
}

/*
 * Token by token. The output row o_t (V floats) doubles as the buffer for
 * k^T S and u before it receives q^T S, so the op needs no scratch; o must
 * therefore not alias any input.
 */
void haccel__cpu_kda_recurrent(float *S, const float *q, const float *k,
			       const float *v, const float *g,
			       const float *beta, float *o, uint32_t T,
			       uint32_t H, uint32_t K, uint32_t V)
{
	for (uint32_t t = 0; t < T; t++) {
		for (uint32_t h = 0; h < H; h++) {
			size_t th = (size_t)t * H + h;
			const float *qt = q + th * K, *kt = k + th * K;
			const float *gt = g + th * K, *vt = v + th * V;
			float *Sh = S + (size_t)h * K * V;
			float *ot = o + th * V;
			float b = beta[th];

			/* (1) S = diag(exp(g)) S */
			for (uint32_t c = 0; c < K; c++) {
				float e = expf(gt[c]);
				float *Sc = Sh + (size_t)c * V;

				for (uint32_t j = 0; j < V; j++)
					Sc[j] *= e;
			}
			/* (2) u = beta (v - k^T S), in ot */
			memset(ot, 0, (size_t)V * sizeof(float));
			for (uint32_t c = 0; c < K; c++) {
				const float *Sc = Sh + (size_t)c * V;

				for (uint32_t j = 0; j < V; j++)
					ot[j] += kt[c] * Sc[j];
			}
			for (uint32_t j = 0; j < V; j++)
				ot[j] = b * (vt[j] - ot[j]);
			/* (3) S += k u^T */
			for (uint32_t c = 0; c < K; c++) {
				float *Sc = Sh + (size_t)c * V;

				for (uint32_t j = 0; j < V; j++)
					Sc[j] += kt[c] * ot[j];
			}
			/* (4) o = q^T S */
			memset(ot, 0, (size_t)V * sizeof(float));
			for (uint32_t c = 0; c < K; c++) {
				const float *Sc = Sh + (size_t)c * V;

				for (uint32_t j = 0; j < V; j++)
					ot[j] += qt[c] * Sc[j];
			}
		}
	}
}

/*
 * Scratch of the chunked op, for one head and one chunk at a time:
 *   G [C][K]  prefix sums of g over the chunk (log space)
 *   U [C][V]  right-hand sides, then the solved u_i
 *   A [C][C]  first A_ij (j < i) for the solve, then Q_ij (j <= i)
 */
size_t haccel__cpu_kda_chunked_scratch(uint32_t C, uint32_t K, uint32_t V)
{
	return (size_t)C * ((size_t)K + V + C);
}

/* One chunk of n tokens of head h, tokens t0..t0+n-1; S is the head's
 * [K][V] state, updated. */
static void kda_chunk(float *S, const float *q, const float *k, const float *v,
		      const float *g, const float *beta, float *o, uint32_t t0,
		      uint32_t n, uint32_t h, uint32_t H, uint32_t K,
		      uint32_t V, uint32_t C, float *scratch)
{
	float *G = scratch;
	float *U = G + (size_t)C * K;
	float *A = U + (size_t)C * V;
#define ROW(p, i, w) ((p) + ((size_t)(t0 + (i)) * H + h) * (w))

	/* G_i = g_0 + ... + g_i, per channel. */
	memcpy(G, ROW(g, 0, K), (size_t)K * sizeof(float));
	for (uint32_t i = 1; i < n; i++) {
		const float *gi = ROW(g, i, K);
		float *Gi = G + (size_t)i * K;
		const float *Gp = Gi - K;

		for (uint32_t c = 0; c < K; c++)
			Gi[c] = Gp[c] + gi[c];
	}

	/* U_i = beta_i (v_i - S0^T (e^{G_i} * k_i)) */
	for (uint32_t i = 0; i < n; i++) {
		const float *ki = ROW(k, i, K), *vi = ROW(v, i, V);
		const float *Gi = G + (size_t)i * K;
		float *Ui = U + (size_t)i * V;
		float b = beta[(size_t)(t0 + i) * H + h];

		memset(Ui, 0, (size_t)V * sizeof(float));
		for (uint32_t c = 0; c < K; c++) {
			const float *Sc = S + (size_t)c * V;
			float kg = expf(Gi[c]) * ki[c];

			for (uint32_t j = 0; j < V; j++)
				Ui[j] += kg * Sc[j];
		}
		for (uint32_t j = 0; j < V; j++)
			Ui[j] = b * (vi[j] - Ui[j]);
	}

	/* A_ij = beta_i sum_c k_i[c] k_j[c] e^{G_i[c] - G_j[c]}, j < i */
	for (uint32_t i = 1; i < n; i++) {
		const float *ki = ROW(k, i, K), *Gi = G + (size_t)i * K;
		float b = beta[(size_t)(t0 + i) * H + h];

		for (uint32_t j = 0; j < i; j++) {
			const float *kj = ROW(k, j, K), *Gj = G + (size_t)j * K;
			float acc = 0.0f;

			for (uint32_t c = 0; c < K; c++)
				acc += ki[c] * kj[c] * expf(Gi[c] - Gj[c]);
			A[(size_t)i * C + j] = b * acc;
		}
	}

	/* Forward substitution: u_i = U_i - sum_{j<i} A_ij u_j, j ascending;
	 * rows j < i are final when row i is reached. */
	for (uint32_t i = 1; i < n; i++) {
		float *Ui = U + (size_t)i * V;

		for (uint32_t j = 0; j < i; j++) {
			const float *Uj = U + (size_t)j * V;
			float a = A[(size_t)i * C + j];

			for (uint32_t x = 0; x < V; x++)
				Ui[x] -= a * Uj[x];
		}
	}

	/* Q_ij = sum_c q_i[c] k_j[c] e^{G_i[c] - G_j[c]}, j <= i (A is free
	 * again: the solve is done). */
	for (uint32_t i = 0; i < n; i++) {
		const float *qi = ROW(q, i, K), *Gi = G + (size_t)i * K;

		for (uint32_t j = 0; j <= i; j++) {
			const float *kj = ROW(k, j, K), *Gj = G + (size_t)j * K;
			float acc = 0.0f;

			for (uint32_t c = 0; c < K; c++)
				acc += qi[c] * kj[c] * expf(Gi[c] - Gj[c]);
			A[(size_t)i * C + j] = acc;
		}
	}

	/* o_i = S0^T (e^{G_i} * q_i) + sum_{j<=i} Q_ij u_j; S still holds S0. */
	for (uint32_t i = 0; i < n; i++) {
		const float *qi = ROW(q, i, K), *Gi = G + (size_t)i * K;
		float *oi = ROW(o, i, V);

		memset(oi, 0, (size_t)V * sizeof(float));
		for (uint32_t c = 0; c < K; c++) {
			const float *Sc = S + (size_t)c * V;
			float qg = expf(Gi[c]) * qi[c];

			for (uint32_t x = 0; x < V; x++)
				oi[x] += qg * Sc[x];
		}
		for (uint32_t j = 0; j <= i; j++) {
			const float *Uj = U + (size_t)j * V;
			float a = A[(size_t)i * C + j];

			for (uint32_t x = 0; x < V; x++)
				oi[x] += a * Uj[x];
		}
	}

	/* S = diag(e^{G_last}) S0 + sum_j diag(e^{G_last - G_j}) k_j u_j^T;
	 * row c of the new state needs only row c of S0, so in place. */
	const float *Gl = G + (size_t)(n - 1) * K;
	for (uint32_t c = 0; c < K; c++) {
		float *Sc = S + (size_t)c * V;
		float e = expf(Gl[c]);

		for (uint32_t x = 0; x < V; x++)
			Sc[x] *= e;
		for (uint32_t j = 0; j < n; j++) {
			const float *Uj = U + (size_t)j * V;
			float f = expf(Gl[c] - G[(size_t)j * K + c]) * ROW(k, j, K)[c];

			for (uint32_t x = 0; x < V; x++)
				Sc[x] += f * Uj[x];
		}
	}
#undef ROW
}

void haccel__cpu_kda_chunked(float *S, const float *q, const float *k,
			     const float *v, const float *g, const float *beta,
			     float *o, uint32_t T, uint32_t H, uint32_t K,
			     uint32_t V, uint32_t C, float *scratch)
{
	/* C = 0 has no meaning; the scratch was sized for it, so do nothing
	 * rather than read past it. */
	if (C == 0)
		return;
	for (uint32_t h = 0; h < H; h++) {
		float *Sh = S + (size_t)h * K * V;

		for (uint32_t t0 = 0; t0 < T; t0 += C) {
			uint32_t n = T - t0 < C ? T - t0 : C;

			kda_chunk(Sh, q, k, v, g, beta, o, t0, n, h, H, K, V,
				  C, scratch);
		}
	}
}

void haccel__cpu_gated_rmsnorm(float *o, const float *gate, const float *w,
			       uint32_t T, uint32_t H, uint32_t V, float eps)
{
	for (size_t r = 0; r < (size_t)T * H; r++) {
		float *x = o + r * V;
		const float *gr = gate + r * V;
		float ss = 0.0f;

		for (uint32_t j = 0; j < V; j++)
			ss += x[j] * x[j];
		float rs = 1.0f / sqrtf(ss / (float)V + eps);
		for (uint32_t j = 0; j < V; j++)
			x[j] = x[j] * rs * w[j] * sigmoid(gr[j]);
	}
}
