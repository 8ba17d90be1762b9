/* SPDX-License-Identifier: MIT */
/*
 * Every tensor of the hybrid model: its name (Hugging Face style), shape,
 * stored dtype and initial distribution, in one table that both the writer
 * of synthetic checkpoints and the runtime's binder walk, so the two never
 * disagree. docs/model.md, "Weights", lists the same table.
 */
#ifndef HACCEL_MODEL_TENSORS_H
#define HACCEL_MODEL_TENSORS_H

#include <stdint.h>

#include "model/model_config.h"

struct haccel__kda_weights {
	float *q, *k, *v;                 /* [H*K][D], [H*K][D], [H*V][D] */
	float *q_conv, *k_conv, *v_conv;  /* [C][W] */
	float *f_a, *f_b;                 /* [R][D], [H*K][R] */
	float *b;                         /* [H][D] */
	float *A_log, *dt_bias;           /* [H], [H*K] */
	float *g_a, *g_b, *g_b_bias;      /* [Rg][D], [H*V][Rg], [H*V] (low rank) */
	float *g;                         /* [H*V][D] (full rank) */
	float *o_norm;                    /* [V] */
	float *o;                         /* [D][H*V] */
};

struct haccel__dsa_weights {
	float *q_a, *q_a_norm, *q_b;      /* [Rq][D], [Rq], [H*(dn+dr)][Rq] */
	float *kv_a, *kv_a_norm, *kv_b;   /* [512+dr][D], [512], [H*(dn+dv)][512] */
	float *o;                         /* [D][H*dv] */
	float *iq_b;                      /* [IH*128][Rq] */
	float *ik, *ik_norm_w, *ik_norm_b; /* [128][D], [128], [128] */
	float *iw;                        /* [IH][D] */
};

struct haccel__layer_weights {
	float *in_norm, *post_norm;       /* [D] */
	float *gate, *up, *down;          /* [I][D], [I][D], [D][I] */
	float *ar_mixer_q, *ar_mixer_norm; /* [D] (attention residuals) */
	float *ar_mlp_q, *ar_mlp_norm;
	struct haccel__kda_weights kda;
	struct haccel__dsa_weights dsa;
};

struct haccel__model_weights {
	float *embed;                     /* [V][D] */
	float *final_norm;                /* [D] */
	float *lm_head;                   /* [V][D], or embed when tied */
	float *ar_final_q, *ar_final_norm;
	struct haccel__layer_weights layer[HACCEL__MAX_LAYERS];
};

enum haccel__init {
	HACCEL__INIT_NORMAL = 0,  /* N(0, std^2) */
	HACCEL__INIT_ONES,
	HACCEL__INIT_ZEROS,
	HACCEL__INIT_A_LOG,       /* log(U(1, 16)) */
	HACCEL__INIT_DT_BIAS,     /* softplus^-1(exp(U(log 1e-3, log 1e-1))) */
};

struct haccel__tensor_spec {
	char name[96];
	uint32_t n_dims;
	uint64_t shape[2];
	uint32_t dtype;           /* stored: HACCEL_DTYPE_BF16 or _F32 */
	uint32_t init;            /* enum haccel__init */
	float std;
	float **bind;             /* where the runtime keeps the fp32 copy */
	uint32_t gemm;            /* 1: a GEMM operand (the embedding too),
				   * bf16 on the GPU; 0: read element by element
				   * by a kernel (norms, gates, conv weights),
				   * fp32 on the GPU */
};

/*
 * The model's tensors in file order, pointing their bind fields into w
 * (which may be NULL when only names and shapes are wanted). Returns the
 * count, or -ENOMEM when more than max (call with max 0 to count).
 */
int haccel__model_tensors(const struct haccel__model_config *c,
			  struct haccel__model_weights *w,
			  struct haccel__tensor_spec *out, uint32_t max);

static inline uint64_t haccel__spec_elems(const struct haccel__tensor_spec *s)
{
	return s->n_dims == 1 ? s->shape[0] : s->shape[0] * s->shape[1];
}

#endif /* HACCEL_MODEL_TENSORS_H */
