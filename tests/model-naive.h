/* SPDX-License-Identifier: MIT */
/*
 * A second, naive implementation of the whole hybrid model for tests: one
 * sequence, token by token, plain loops written from docs/model.md, reading
 * the checkpoint itself. It shares nothing with the runtime but the number
 * formats (tested exhaustively on their own), so agreement with the runtime
 * checks the runtime's glue: weight binding, conv tails and state in pool
 * slots, the KV cache through slots and block tables, the indexer, the
 * attention residuals.
 */
#ifndef HACCEL_TESTS_MODEL_NAIVE_H
#define HACCEL_TESTS_MODEL_NAIVE_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "haccel.h"
#include "ktap.h"
#include "model/format.h"
#include "model/model_config.h"

struct naive {
	const struct haccel__model_config *c;
	struct haccel_weights *w;
	uint8_t *raw;
	float **f;         /* fp32 copy of each tensor, by checkpoint index */
	uint32_t n;
	/* per layer state */
	float **S;         /* KDA: [H][K][V] per layer */
	float **hist_q, **hist_k, **hist_v; /* KDA raw conv inputs [T][C] */
	float **cache_lat, **cache_pe, **cache_ik; /* DSA: dequantized [T][...] */
	uint32_t t;        /* tokens processed */
	uint32_t Tmax;
};

static inline float *nv_w(struct naive *nv, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static inline float *nv_w(struct naive *nv, const char *fmt, ...)
{
	char name[128];
	uint32_t idx;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	if (haccel_weights_find(nv->w, name, &idx)) {
		ktap_fail_at(__FILE__, __LINE__, "naive: no tensor %s", name);
		ktap_end();
	}
	return nv->f[idx];
}

static inline void nv_open(struct naive *nv, struct haccel_ctx *ctx, const char *dir,
			   const struct haccel__model_config *c, uint32_t Tmax)
{
	struct haccel_weights_info info;
	struct haccel_host_sink sink;

	memset(nv, 0, sizeof(*nv));
	nv->c = c;
	nv->Tmax = Tmax;
	KTAP_ASSERT_EQ(haccel_weights_open(ctx, dir, 0, &nv->w), 0);
	haccel_weights_info(nv->w, &info);
	nv->raw = malloc(info.dest_bytes + 1);
	haccel_host_sink_init(&sink, nv->raw, info.dest_bytes);
	KTAP_ASSERT_EQ(haccel_load(nv->w, NULL, &sink.sink, NULL), 0);
	nv->n = info.n_tensors;
	nv->f = calloc(nv->n, sizeof(*nv->f));
	for (uint32_t i = 0; i < nv->n; i++) {
		struct haccel_tensor_info t;
		uint64_t e;

		haccel_weights_tensor(nv->w, i, &t);
		e = t.bytes / (t.dtype == HACCEL_DTYPE_F32 ? 4 : 2);
		nv->f[i] = malloc((e + 1) * sizeof(float));
		for (uint64_t k = 0; k < e; k++) {
			const uint8_t *p = nv->raw + t.dest_offset;
			if (t.dtype == HACCEL_DTYPE_F32)
				memcpy(&nv->f[i][k], p + 4 * k, 4);
			else
				nv->f[i][k] = haccel__bf16_to_float((uint16_t)(p[2 * k] | p[2 * k + 1] << 8));
		}
	}
	nv->S = calloc(c->num_layers, sizeof(float *));
	nv->hist_q = calloc(c->num_layers, sizeof(float *));
	nv->hist_k = calloc(c->num_layers, sizeof(float *));
	nv->hist_v = calloc(c->num_layers, sizeof(float *));
	nv->cache_lat = calloc(c->num_layers, sizeof(float *));
	nv->cache_pe = calloc(c->num_layers, sizeof(float *));
	nv->cache_ik = calloc(c->num_layers, sizeof(float *));
	for (uint32_t l = 0; l < c->num_layers; l++) {
		const struct haccel__kda_config *k = &c->kda;
		if (c->layer_type[l] == HACCEL__LAYER_KDA) {
			nv->S[l] = calloc((size_t)k->num_heads * k->head_k_dim * k->head_v_dim, sizeof(float));
			nv->hist_q[l] = calloc((size_t)Tmax * k->num_heads * k->head_k_dim, sizeof(float));
			nv->hist_k[l] = calloc((size_t)Tmax * k->num_heads * k->head_k_dim, sizeof(float));
			nv->hist_v[l] = calloc((size_t)Tmax * k->num_heads * k->head_v_dim, sizeof(float));
		} else {
			nv->cache_lat[l] = calloc((size_t)Tmax * 512, sizeof(float));
			nv->cache_pe[l] = calloc((size_t)Tmax * 64 + 1, sizeof(float));
			nv->cache_ik[l] = calloc((size_t)Tmax * 128, sizeof(float));
		}
	}
}

static inline void nv_close(struct naive *nv)
{
	for (uint32_t l = 0; l < nv->c->num_layers; l++) {
		free(nv->S[l]);
		free(nv->hist_q[l]);
		free(nv->hist_k[l]);
		free(nv->hist_v[l]);
		free(nv->cache_lat[l]);
		free(nv->cache_pe[l]);
		free(nv->cache_ik[l]);
	}
	free(nv->S);
	free(nv->hist_q);
	free(nv->hist_k);
	free(nv->hist_v);
	free(nv->cache_lat);
	free(nv->cache_pe);
	free(nv->cache_ik);
	for (uint32_t i = 0; i < nv->n; i++)
		free(nv->f[i]);
	free(nv->f);
	free(nv->raw);
	haccel_weights_close(nv->w);
}

/* y[N] = W[N][K] x[K] (+ b) */
static inline void nv_lin(float *y, const float *W, const float *x, uint32_t N, uint32_t K,
			  const float *b)
{
	for (uint32_t n = 0; n < N; n++) {
		double a = 0;
		for (uint32_t k = 0; k < K; k++)
			a += (double)W[(size_t)n * K + k] * x[k];
		y[n] = (float)a + (b ? b[n] : 0.0f);
	}
}

static inline void nv_rms(float *y, const float *x, const float *w, uint32_t D, float eps)
{
	double ss = 0;
	for (uint32_t d = 0; d < D; d++)
		ss += (double)x[d] * x[d];
	double r = 1.0 / sqrt(ss / D + eps);
	for (uint32_t d = 0; d < D; d++)
		y[d] = (float)(x[d] * r) * (w ? w[d] : 1.0f);
}

static inline float nv_silu(float x)
{
	return x / (1.0f + expf(-x));
}

static inline float nv_sigmoid(float x)
{
	return 1.0f / (1.0f + expf(-x));
}

/* Rotate the first dim values of x for position pos. */
static inline void nv_rope(float *x, uint32_t dim, uint32_t pos, float theta, uint32_t layout)
{
	float tmp[1024];

	memcpy(tmp, x, dim * sizeof(float));
	for (uint32_t i = 0; i < dim / 2; i++) {
		double ang = (double)pos * pow(theta, -2.0 * i / dim);
		uint32_t a = layout == 1 ? 2 * i : i, b = layout == 1 ? 2 * i + 1 : i + dim / 2;
		x[a] = (float)(tmp[a] * cos(ang) - tmp[b] * sin(ang));
		x[b] = (float)(tmp[b] * cos(ang) + tmp[a] * sin(ang));
	}
}

/* 128-point Hadamard by its matrix, normalised. */
static inline void nv_hadamard(float *x)
{
	float y[128];

	for (int i = 0; i < 128; i++) {
		double a = 0;
		for (int j = 0; j < 128; j++)
			a += (__builtin_popcount(i & j) & 1 ? -1.0 : 1.0) * x[j];
		y[i] = (float)(a / sqrt(128.0));
	}
	memcpy(x, y, sizeof(y));
}

/* Quantize then dequantize 128 values as an index key is stored. */
static inline void nv_mx(float *x)
{
	uint8_t rec[HACCEL__INDEX_K_BYTES];

	haccel__index_k_pack(rec, x);
	haccel__index_k_unpack(rec, x);
}

static void nv_kda(struct naive *nv, uint32_t l, const float *x, float *y)
{
	const struct haccel__kda_config *k = &nv->c->kda;
	uint32_t D = nv->c->hidden_size, H = k->num_heads, K = k->head_k_dim, V = k->head_v_dim;
	uint32_t HK = H * K, HV = H * V, W = k->conv_size, t = nv->t;
	float q[HK], kk[HK], v[HV], g[HK], r[256], beta[H], o[HV], og[HV];
	const char *p = "model.layers";

	nv_lin(nv->hist_q[l] + (size_t)t * HK, nv_w(nv, "%s.%u.self_attn.q_proj.weight", p, l), x, HK, D, NULL);
	nv_lin(nv->hist_k[l] + (size_t)t * HK, nv_w(nv, "%s.%u.self_attn.k_proj.weight", p, l), x, HK, D, NULL);
	nv_lin(nv->hist_v[l] + (size_t)t * HV, nv_w(nv, "%s.%u.self_attn.v_proj.weight", p, l), x, HV, D, NULL);
	/* causal conv over the whole history, zeros before the start */
	struct { float *hist, *out, *w; uint32_t C; } cv[3] = {
		{ nv->hist_q[l], q, nv_w(nv, "%s.%u.self_attn.q_conv1d.weight", p, l), HK },
		{ nv->hist_k[l], kk, nv_w(nv, "%s.%u.self_attn.k_conv1d.weight", p, l), HK },
		{ nv->hist_v[l], v, nv_w(nv, "%s.%u.self_attn.v_conv1d.weight", p, l), HV },
	};
	for (int i = 0; i < 3; i++)
		for (uint32_t c = 0; c < cv[i].C; c++) {
			float a = 0;
			for (uint32_t j = 0; j < W; j++) {
				int64_t s = (int64_t)t - (W - 1) + j;
				if (s >= 0)
					a += cv[i].w[c * W + j] * cv[i].hist[(size_t)s * cv[i].C + c];
			}
			cv[i].out[c] = nv_silu(a);
		}
	for (uint32_t h = 0; h < H; h++) {
		double sq = 0, sk = 0;
		for (uint32_t c = 0; c < K; c++) {
			sq += (double)q[h * K + c] * q[h * K + c];
			sk += (double)kk[h * K + c] * kk[h * K + c];
		}
		for (uint32_t c = 0; c < K; c++) {
			q[h * K + c] = (float)(q[h * K + c] / sqrt(sq + 1e-6) / sqrt((double)K));
			kk[h * K + c] = (float)(kk[h * K + c] / sqrt(sk + 1e-6));
		}
	}
	nv_lin(r, nv_w(nv, "%s.%u.self_attn.f_a_proj.weight", p, l), x, k->gate_rank, D, NULL);
	nv_lin(g, nv_w(nv, "%s.%u.self_attn.f_b_proj.weight", p, l), r, HK, k->gate_rank, NULL);
	const float *A = nv_w(nv, "%s.%u.self_attn.A_log", p, l);
	const float *dtb = nv_w(nv, "%s.%u.self_attn.dt_bias", p, l);
	for (uint32_t i = 0; i < HK; i++) {
		double z = (double)g[i] + dtb[i], a = exp(A[i / K]);
		g[i] = k->gate_form == 0 ? (float)(-a * (z > 20 ? z : log1p(exp(z)))) :
					   (float)(k->gate_lower_bound / (1 + exp(-a * z)));
	}
	nv_lin(beta, nv_w(nv, "%s.%u.self_attn.b_proj.weight", p, l), x, H, D, NULL);
	for (uint32_t h = 0; h < H; h++) {
		float *S = nv->S[l] + (size_t)h * K * V;
		double kS[1024];

		for (uint32_t c = 0; c < K; c++)
			for (uint32_t e = 0; e < V; e++)
				S[c * V + e] *= expf(g[h * K + c]);
		for (uint32_t e = 0; e < V; e++) {
			kS[e] = 0;
			for (uint32_t c = 0; c < K; c++)
				kS[e] += (double)kk[h * K + c] * S[c * V + e];
		}
		for (uint32_t c = 0; c < K; c++)
			for (uint32_t e = 0; e < V; e++)
				S[c * V + e] += kk[h * K + c] * nv_sigmoid(beta[h]) *
						(float)(v[h * V + e] - kS[e]);
		for (uint32_t e = 0; e < V; e++) {
			double a = 0;
			for (uint32_t c = 0; c < K; c++)
				a += (double)q[h * K + c] * S[c * V + e];
			o[h * V + e] = (float)a;
		}
	}
	if (k->output_gate_low_rank) {
		nv_lin(r, nv_w(nv, "%s.%u.self_attn.g_a_proj.weight", p, l), x, k->output_gate_rank, D, NULL);
		nv_lin(og, nv_w(nv, "%s.%u.self_attn.g_b_proj.weight", p, l), r, HV, k->output_gate_rank,
		       nv_w(nv, "%s.%u.self_attn.g_b_proj.bias", p, l));
	} else {
		nv_lin(og, nv_w(nv, "%s.%u.self_attn.g_proj.weight", p, l), x, HV, D, NULL);
	}
	const float *onw = nv_w(nv, "%s.%u.self_attn.o_norm.weight", p, l);
	for (uint32_t h = 0; h < H; h++) {
		nv_rms(o + h * V, o + h * V, onw, V, nv->c->rms_norm_eps);
		for (uint32_t e = 0; e < V; e++)
			o[h * V + e] *= nv_sigmoid(og[h * V + e]);
	}
	nv_lin(y, nv_w(nv, "%s.%u.self_attn.o_proj.weight", p, l), o, D, HV, NULL);
}

static int nv_cmp_score(const void *a, const void *b)
{
	const float *x = a, *y = b;

	if (x[0] != y[0])
		return x[0] > y[0] ? -1 : 1;
	return (x[1] > y[1]) - (x[1] < y[1]);
}

static void nv_dsa(struct naive *nv, uint32_t l, const float *x, float *y)
{
	const struct haccel__dsa_config *d = &nv->c->dsa;
	uint32_t D = nv->c->hidden_size, H = d->num_heads, dn = d->qk_nope_head_dim;
	uint32_t dr = d->qk_rope_head_dim, dv = d->v_head_dim, IH = d->index_n_heads, t = nv->t;
	uint32_t qh = dn + dr;
	float cq[4096], q[8192], kva[576], iq[8192], ik[128], iw[256], o[8192];
	const char *p = "model.layers";
	float eps = nv->c->rms_norm_eps;

	nv_lin(cq, nv_w(nv, "%s.%u.self_attn.q_a_proj.weight", p, l), x, d->q_lora_rank, D, NULL);
	nv_rms(cq, cq, nv_w(nv, "%s.%u.self_attn.q_a_layernorm.weight", p, l), d->q_lora_rank, eps);
	nv_lin(q, nv_w(nv, "%s.%u.self_attn.q_b_proj.weight", p, l), cq, H * qh, d->q_lora_rank, NULL);
	nv_lin(kva, nv_w(nv, "%s.%u.self_attn.kv_a_proj_with_mqa.weight", p, l), x, 512 + dr, D, NULL);
	nv_rms(kva, kva, nv_w(nv, "%s.%u.self_attn.kv_a_layernorm.weight", p, l), 512, eps);
	if (dr) {
		for (uint32_t h = 0; h < H; h++)
			nv_rope(q + h * qh + dn, dr, t, d->rope_theta, d->rope_layout);
		nv_rope(kva + 512, dr, t, d->rope_theta, d->rope_layout);
	}
	/* The cache holds what was stored: quantized, dequantized. */
	uint8_t rec[656];
	haccel__kv_token_pack(rec, kva, kva + 512, dr);
	haccel__kv_token_unpack(rec, nv->cache_lat[l] + (size_t)t * 512,
				nv->cache_pe[l] + (size_t)t * 64, dr);
	/* indexer */
	nv_lin(iq, nv_w(nv, "%s.%u.self_attn.indexer.wq_b.weight", p, l), cq, IH * 128, d->q_lora_rank, NULL);
	nv_lin(ik, nv_w(nv, "%s.%u.self_attn.indexer.wk.weight", p, l), x, 128, D, NULL);
	{
		const float *lw = nv_w(nv, "%s.%u.self_attn.indexer.k_norm.weight", p, l);
		const float *lb = nv_w(nv, "%s.%u.self_attn.indexer.k_norm.bias", p, l);
		double mean = 0, var = 0;
		for (int i = 0; i < 128; i++)
			mean += ik[i];
		mean /= 128;
		for (int i = 0; i < 128; i++)
			var += (ik[i] - mean) * (ik[i] - mean);
		var /= 128;
		for (int i = 0; i < 128; i++)
			ik[i] = (float)((ik[i] - mean) / sqrt(var + 1e-6)) * lw[i] + lb[i];
	}
	for (uint32_t h = 0; h < IH; h++) {
		nv_rope(iq + h * 128, d->index_rope_dim, t, d->rope_theta, d->index_rope_layout);
		nv_hadamard(iq + h * 128);
		nv_mx(iq + h * 128);
	}
	nv_rope(ik, d->index_rope_dim, t, d->rope_theta, d->index_rope_layout);
	nv_hadamard(ik);
	nv_mx(ik);
	memcpy(nv->cache_ik[l] + (size_t)t * 128, ik, sizeof(ik));
	nv_lin(iw, nv_w(nv, "%s.%u.self_attn.indexer.weights_proj.weight", p, l), x, IH, D, NULL);
	float (*sc)[2] = malloc(sizeof(*sc) * (t + 1));
	for (uint32_t s = 0; s <= t; s++) {
		double a = 0;
		for (uint32_t h = 0; h < IH; h++) {
			double dot = 0;
			for (int i = 0; i < 128; i++)
				dot += (double)iq[h * 128 + i] * nv->cache_ik[l][(size_t)s * 128 + i];
			a += iw[h] / sqrt((double)IH) / sqrt(128.0) * (dot > 0 ? dot : 0);
		}
		sc[s][0] = (float)a;
		sc[s][1] = (float)s;
	}
	qsort(sc, t + 1, sizeof(*sc), nv_cmp_score);
	uint32_t nsel = t + 1 < d->index_topk ? t + 1 : d->index_topk;
	/* attention over the selected positions, absorbed form */
	const float *kvb = nv_w(nv, "%s.%u.self_attn.kv_b_proj.weight", p, l);
	for (uint32_t h = 0; h < H; h++) {
		double ql[512] = { 0 }, ol[512] = { 0 }, mx = -1e300, sum = 0;
		double *s = malloc(sizeof(double) * nsel);

		for (uint32_t j = 0; j < dn; j++)
			for (int c = 0; c < 512; c++)
				ql[c] += (double)q[h * qh + j] * kvb[((size_t)h * (dn + dv) + j) * 512 + c];
		for (uint32_t i = 0; i < nsel; i++) {
			uint32_t pos = (uint32_t)sc[i][1];
			double a = 0;
			for (int c = 0; c < 512; c++)
				a += ql[c] * nv->cache_lat[l][(size_t)pos * 512 + c];
			for (uint32_t c = 0; c < dr; c++)
				a += (double)q[h * qh + dn + c] * nv->cache_pe[l][(size_t)pos * 64 + c];
			s[i] = a / sqrt((double)qh);
			if (s[i] > mx)
				mx = s[i];
		}
		for (uint32_t i = 0; i < nsel; i++)
			sum += (s[i] = exp(s[i] - mx));
		for (uint32_t i = 0; i < nsel; i++) {
			uint32_t pos = (uint32_t)sc[i][1];
			for (int c = 0; c < 512; c++)
				ol[c] += s[i] / sum * nv->cache_lat[l][(size_t)pos * 512 + c];
		}
		for (uint32_t j = 0; j < dv; j++) {
			double a = 0;
			for (int c = 0; c < 512; c++)
				a += kvb[((size_t)h * (dn + dv) + dn + j) * 512 + c] * ol[c];
			o[h * dv + j] = (float)a;
		}
		free(s);
	}
	free(sc);
	nv_lin(y, nv_w(nv, "%s.%u.self_attn.o_proj.weight", p, l), o, D, H * dv, NULL);
}

static void nv_mix(float *h, float *const *src, uint32_t n, const float *q, const float *nw,
		   uint32_t D, float eps)
{
	double lg[64], mx = -1e300, sum = 0;
	float tmp[8192];

	for (uint32_t i = 0; i < n; i++) {
		double a = 0;
		nv_rms(tmp, src[i], nw, D, eps);
		for (uint32_t d = 0; d < D; d++)
			a += (double)q[d] * tmp[d];
		lg[i] = a;
		if (a > mx)
			mx = a;
	}
	for (uint32_t i = 0; i < n; i++)
		sum += (lg[i] = exp(lg[i] - mx));
	for (uint32_t d = 0; d < D; d++) {
		double a = 0;
		for (uint32_t i = 0; i < n; i++)
			a += lg[i] / sum * src[i][d];
		h[d] = (float)a;
	}
}

/* Run one token; write the logits (vocab floats). */
static void nv_step(struct naive *nv, int32_t tok, float *logits)
{
	const struct haccel__model_config *c = nv->c;
	uint32_t D = c->hidden_size, I = c->intermediate_size, B = c->attn_res_block_size;
	float *blocks[65], partial[8192], res[8192], hbuf[8192], x[8192], y[8192];
	float gt[16384], up[16384];
	uint32_t nb = 0;
	int has_partial = 0;
	const char *p = "model.layers";

	for (uint32_t i = 0; i < 65; i++)
		blocks[i] = NULL;
	memcpy(res, nv_w(nv, "model.embed_tokens.weight") + (size_t)tok * D, D * sizeof(float));
	if (c->attn_res) {
		blocks[nb] = malloc(D * sizeof(float));
		memcpy(blocks[nb++], res, D * sizeof(float));
	}
	for (uint32_t l = 0; l < c->num_layers; l++) {
		for (uint32_t sub = 0; sub < 2; sub++) {
			uint32_t j = 2 * l + sub;
			const float *h = res;

			if (c->attn_res) {
				float *src[66];
				uint32_t ns = 0;
				for (uint32_t b = 0; b < nb; b++)
					src[ns++] = blocks[b];
				if (has_partial)
					src[ns++] = partial;
				nv_mix(hbuf, src, ns, nv_w(nv, "%s.%u.attn_res_%s.query", p, l, sub ? "mlp" : "mixer"),
				       nv_w(nv, "%s.%u.attn_res_%s.norm.weight", p, l, sub ? "mlp" : "mixer"), D,
				       c->rms_norm_eps);
				h = hbuf;
			}
			nv_rms(x, h, nv_w(nv, "%s.%u.%s.weight", p, l, sub ? "post_attention_layernorm" : "input_layernorm"),
			       D, c->rms_norm_eps);
			if (sub) {
				nv_lin(gt, nv_w(nv, "%s.%u.mlp.gate_proj.weight", p, l), x, I, D, NULL);
				nv_lin(up, nv_w(nv, "%s.%u.mlp.up_proj.weight", p, l), x, I, D, NULL);
				for (uint32_t i = 0; i < I; i++)
					gt[i] = nv_silu(gt[i]) * up[i];
				nv_lin(y, nv_w(nv, "%s.%u.mlp.down_proj.weight", p, l), gt, D, I, NULL);
			} else if (c->layer_type[l] == HACCEL__LAYER_KDA) {
				nv_kda(nv, l, x, y);
			} else {
				nv_dsa(nv, l, x, y);
			}
			if (c->attn_res) {
				for (uint32_t d = 0; d < D; d++)
					partial[d] = has_partial ? partial[d] + y[d] : y[d];
				has_partial = 1;
				if ((j + 1) % B == 0) {
					blocks[nb] = malloc(D * sizeof(float));
					memcpy(blocks[nb++], partial, D * sizeof(float));
					has_partial = 0;
				}
			} else {
				for (uint32_t d = 0; d < D; d++)
					res[d] += y[d];
			}
		}
	}
	const float *hf = res;
	if (c->attn_res) {
		if (has_partial) {
			blocks[nb] = malloc(D * sizeof(float));
			memcpy(blocks[nb++], partial, D * sizeof(float));
		}
		nv_mix(hbuf, blocks, nb, nv_w(nv, "model.attn_res_final.query"),
		       nv_w(nv, "model.attn_res_final.norm.weight"), D, c->rms_norm_eps);
		hf = hbuf;
	}
	nv_rms(x, hf, nv_w(nv, "model.norm.weight"), D, c->rms_norm_eps);
	nv_lin(logits, c->tie_word_embeddings ? nv_w(nv, "model.embed_tokens.weight") :
						   nv_w(nv, "lm_head.weight"),
	       x, c->vocab_size, D, NULL);
	for (uint32_t b = 0; b < nb; b++)
		free(blocks[b]);
	nv->t++;
}

#endif /* HACCEL_TESTS_MODEL_NAIVE_H */
