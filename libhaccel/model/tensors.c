// SPDX-License-Identifier: MIT
/* The table of the model's tensors: names, shapes, dtypes, initial values. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "model/tensors.h"

struct builder {
	struct haccel__tensor_spec *out;
	uint32_t max, n;
	int err;
};

static void add(struct builder *b, float **bind, uint32_t dtype, uint32_t init,
		float std, uint64_t rows, uint64_t cols, const char *fmt, ...)
	__attribute__((format(printf, 8, 9)));

static void add(struct builder *b, float **bind, uint32_t dtype, uint32_t init,
		float std, uint64_t rows, uint64_t cols, const char *fmt, ...)
{
	struct haccel__tensor_spec *s;
	va_list ap;

	if (b->n++ >= b->max) {
		b->err = -ENOMEM;
		return;
	}
	s = &b->out[b->n - 1];
	memset(s, 0, sizeof(*s));
	va_start(ap, fmt);
	vsnprintf(s->name, sizeof(s->name), fmt, ap);
	va_end(ap);
	s->n_dims = cols ? 2 : 1;
	s->shape[0] = rows;
	s->shape[1] = cols;
	s->dtype = dtype;
	s->init = init;
	s->std = std;
	s->bind = bind;
	s->gemm = cols != 0;
}

/* The tensor just added is a 2-D table a kernel reads element by element. */
static void not_gemm(struct builder *b)
{
	if (b->n <= b->max)
		b->out[b->n - 1].gemm = 0;
}

/* A linear layer's weight [out][in]: N(0, 1/in), times gain. */
#define LINEAR(b, bind, out_, in_, gain, ...)                                   \
	add(b, bind, HACCEL_DTYPE_BF16, HACCEL__INIT_NORMAL,                     \
	    (float)((gain) / sqrt((double)(in_))), out_, in_, __VA_ARGS__)
/* A depthwise convolution's weight [channels][width]: stored as a linear
 * layer's, read by the conv kernel. */
#define CONV(b, bind, rows, width, ...)                           \
	do {                                                      \
		LINEAR(b, bind, rows, width, 1.0, __VA_ARGS__);   \
		not_gemm(b);                                      \
	} while (0)
#define VECTOR(b, bind, n, init, ...) \
	add(b, bind, HACCEL_DTYPE_F32, init, 0.0f, n, 0, __VA_ARGS__)

#define BIND(w, field) ((w) ? &(w)->field : NULL)

int haccel__model_tensors(const struct haccel__model_config *c,
			  struct haccel__model_weights *w,
			  struct haccel__tensor_spec *out, uint32_t max)
{
	struct builder b = { out, max, 0, 0 };
	const struct haccel__kda_config *k = &c->kda;
	const struct haccel__dsa_config *d = &c->dsa;
	uint64_t D = c->hidden_size, I = c->intermediate_size;
	/* Outputs that feed the residual stream are scaled down with depth so
	 * random weights keep activations in range. */
	double res_gain = 1.0 / sqrt(2.0 * c->num_layers);

	add(&b, BIND(w, embed), HACCEL_DTYPE_BF16, HACCEL__INIT_NORMAL, 1.0f,
	    c->vocab_size, D, "model.embed_tokens.weight");
	for (uint32_t i = 0; i < c->num_layers; i++) {
		struct haccel__layer_weights *L = w ? &w->layer[i] : NULL;
		const char *p = "model.layers";

		VECTOR(&b, BIND(L, in_norm), D, HACCEL__INIT_ONES, "%s.%u.input_layernorm.weight", p, i);
		if (c->layer_type[i] == HACCEL__LAYER_KDA) {
			uint64_t HK = (uint64_t)k->num_heads * k->head_k_dim;
			uint64_t HV = (uint64_t)k->num_heads * k->head_v_dim;
			struct haccel__kda_weights *K = L ? &L->kda : NULL;

			LINEAR(&b, BIND(K, q), HK, D, 1.0, "%s.%u.self_attn.q_proj.weight", p, i);
			LINEAR(&b, BIND(K, k), HK, D, 1.0, "%s.%u.self_attn.k_proj.weight", p, i);
			LINEAR(&b, BIND(K, v), HV, D, 1.0, "%s.%u.self_attn.v_proj.weight", p, i);
			CONV(&b, BIND(K, q_conv), HK, k->conv_size, "%s.%u.self_attn.q_conv1d.weight", p, i);
			CONV(&b, BIND(K, k_conv), HK, k->conv_size, "%s.%u.self_attn.k_conv1d.weight", p, i);
			CONV(&b, BIND(K, v_conv), HV, k->conv_size, "%s.%u.self_attn.v_conv1d.weight", p, i);
			LINEAR(&b, BIND(K, f_a), k->gate_rank, D, 1.0, "%s.%u.self_attn.f_a_proj.weight", p, i);
			LINEAR(&b, BIND(K, f_b), HK, k->gate_rank, 1.0, "%s.%u.self_attn.f_b_proj.weight", p, i);
			LINEAR(&b, BIND(K, b), k->num_heads, D, 1.0, "%s.%u.self_attn.b_proj.weight", p, i);
			VECTOR(&b, BIND(K, A_log), k->num_heads, HACCEL__INIT_A_LOG, "%s.%u.self_attn.A_log", p, i);
			VECTOR(&b, BIND(K, dt_bias), HK, HACCEL__INIT_DT_BIAS, "%s.%u.self_attn.dt_bias", p, i);
			if (k->output_gate_low_rank) {
				LINEAR(&b, BIND(K, g_a), k->output_gate_rank, D, 1.0, "%s.%u.self_attn.g_a_proj.weight", p, i);
				LINEAR(&b, BIND(K, g_b), HV, k->output_gate_rank, 1.0, "%s.%u.self_attn.g_b_proj.weight", p, i);
				VECTOR(&b, BIND(K, g_b_bias), HV, HACCEL__INIT_ZEROS, "%s.%u.self_attn.g_b_proj.bias", p, i);
			} else {
				LINEAR(&b, BIND(K, g), HV, D, 1.0, "%s.%u.self_attn.g_proj.weight", p, i);
			}
			VECTOR(&b, BIND(K, o_norm), k->head_v_dim, HACCEL__INIT_ONES, "%s.%u.self_attn.o_norm.weight", p, i);
			LINEAR(&b, BIND(K, o), D, HV, res_gain, "%s.%u.self_attn.o_proj.weight", p, i);
		} else {
			uint64_t qh = (uint64_t)d->qk_nope_head_dim + d->qk_rope_head_dim;
			struct haccel__dsa_weights *S = L ? &L->dsa : NULL;

			LINEAR(&b, BIND(S, q_a), d->q_lora_rank, D, 1.0, "%s.%u.self_attn.q_a_proj.weight", p, i);
			VECTOR(&b, BIND(S, q_a_norm), d->q_lora_rank, HACCEL__INIT_ONES, "%s.%u.self_attn.q_a_layernorm.weight", p, i);
			LINEAR(&b, BIND(S, q_b), d->num_heads * qh, d->q_lora_rank, 1.0, "%s.%u.self_attn.q_b_proj.weight", p, i);
			LINEAR(&b, BIND(S, kv_a), d->kv_lora_rank + d->qk_rope_head_dim, D, 1.0,
			       "%s.%u.self_attn.kv_a_proj_with_mqa.weight", p, i);
			VECTOR(&b, BIND(S, kv_a_norm), d->kv_lora_rank, HACCEL__INIT_ONES, "%s.%u.self_attn.kv_a_layernorm.weight", p, i);
			LINEAR(&b, BIND(S, kv_b), (uint64_t)d->num_heads * (d->qk_nope_head_dim + d->v_head_dim),
			       d->kv_lora_rank, 1.0, "%s.%u.self_attn.kv_b_proj.weight", p, i);
			LINEAR(&b, BIND(S, o), D, (uint64_t)d->num_heads * d->v_head_dim, res_gain,
			       "%s.%u.self_attn.o_proj.weight", p, i);
			LINEAR(&b, BIND(S, iq_b), (uint64_t)d->index_n_heads * d->index_head_dim, d->q_lora_rank, 1.0,
			       "%s.%u.self_attn.indexer.wq_b.weight", p, i);
			LINEAR(&b, BIND(S, ik), d->index_head_dim, D, 1.0, "%s.%u.self_attn.indexer.wk.weight", p, i);
			VECTOR(&b, BIND(S, ik_norm_w), d->index_head_dim, HACCEL__INIT_ONES, "%s.%u.self_attn.indexer.k_norm.weight", p, i);
			VECTOR(&b, BIND(S, ik_norm_b), d->index_head_dim, HACCEL__INIT_ZEROS, "%s.%u.self_attn.indexer.k_norm.bias", p, i);
			LINEAR(&b, BIND(S, iw), d->index_n_heads, D, 1.0, "%s.%u.self_attn.indexer.weights_proj.weight", p, i);
		}
		VECTOR(&b, BIND(L, post_norm), D, HACCEL__INIT_ONES, "%s.%u.post_attention_layernorm.weight", p, i);
		LINEAR(&b, BIND(L, gate), I, D, 1.0, "%s.%u.mlp.gate_proj.weight", p, i);
		LINEAR(&b, BIND(L, up), I, D, 1.0, "%s.%u.mlp.up_proj.weight", p, i);
		LINEAR(&b, BIND(L, down), D, I, res_gain, "%s.%u.mlp.down_proj.weight", p, i);
		if (c->attn_res) {
			/* Trained queries start at zero (uniform mixing); random
			 * ones make the mix matter in tests. */
			add(&b, BIND(L, ar_mixer_q), HACCEL_DTYPE_F32, HACCEL__INIT_NORMAL,
			    (float)(1.0 / sqrt((double)D)), D, 0, "%s.%u.attn_res_mixer.query", p, i);
			VECTOR(&b, BIND(L, ar_mixer_norm), D, HACCEL__INIT_ONES, "%s.%u.attn_res_mixer.norm.weight", p, i);
			add(&b, BIND(L, ar_mlp_q), HACCEL_DTYPE_F32, HACCEL__INIT_NORMAL,
			    (float)(1.0 / sqrt((double)D)), D, 0, "%s.%u.attn_res_mlp.query", p, i);
			VECTOR(&b, BIND(L, ar_mlp_norm), D, HACCEL__INIT_ONES, "%s.%u.attn_res_mlp.norm.weight", p, i);
		}
	}
	if (c->attn_res) {
		add(&b, BIND(w, ar_final_q), HACCEL_DTYPE_F32, HACCEL__INIT_NORMAL,
		    (float)(1.0 / sqrt((double)D)), D, 0, "model.attn_res_final.query");
		VECTOR(&b, BIND(w, ar_final_norm), D, HACCEL__INIT_ONES, "model.attn_res_final.norm.weight");
	}
	VECTOR(&b, BIND(w, final_norm), D, HACCEL__INIT_ONES, "model.norm.weight");
	if (!c->tie_word_embeddings)
		LINEAR(&b, BIND(w, lm_head), c->vocab_size, D, 1.0, "lm_head.weight");
	if (b.err && max)
		return b.err;
	return (int)b.n;
}
