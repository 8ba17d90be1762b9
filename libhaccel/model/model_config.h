/* SPDX-License-Identifier: MIT */
/*
 * The model configuration (config.json; docs/model.md, "Configuration"):
 * parsed strictly, validated, and the presets that haccel-ctl model init
 * writes.
 */
#ifndef HACCEL_MODEL_MODEL_CONFIG_H
#define HACCEL_MODEL_MODEL_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "haccel.h"

#define HACCEL__MAX_LAYERS 256

enum haccel__layer_type { HACCEL__LAYER_KDA = 0, HACCEL__LAYER_DSA = 1 };

struct haccel__kda_config {
	uint32_t num_heads;
	uint32_t head_k_dim;
	uint32_t head_v_dim;
	uint32_t conv_size;
	uint32_t gate_form;        /* enum haccel__kda_gate_form */
	float gate_lower_bound;    /* lower-bound form: required, < 0; else
				    * optional and unused (0 when absent) */
	uint32_t gate_rank;        /* f_a_proj rows */
	bool output_gate_low_rank;
	uint32_t output_gate_rank; /* g_a_proj rows: required (>= 1) when low
				    * rank; else optional and unused */
};

struct haccel__dsa_config {
	uint32_t num_heads;
	uint32_t q_lora_rank;
	uint32_t kv_lora_rank;     /* 512: the KV cache format */
	uint32_t qk_nope_head_dim;
	uint32_t qk_rope_head_dim; /* 64, or 0 for no rotary part */
	uint32_t v_head_dim;
	float rope_theta;
	uint32_t rope_layout;      /* enum haccel__rope_layout */
	uint32_t index_n_heads;
	uint32_t index_head_dim;   /* 128: the index-key format */
	uint32_t index_rope_dim;   /* <= index_head_dim, even */
	uint32_t index_rope_layout;
	uint32_t index_topk;
};

struct haccel__model_config {
	char preset[32];           /* "" when not written by a preset */
	uint32_t vocab_size;
	uint32_t hidden_size;
	uint32_t intermediate_size;
	uint32_t num_layers;
	uint8_t layer_type[HACCEL__MAX_LAYERS];
	uint32_t n_kda, n_dsa;
	float rms_norm_eps;
	bool tie_word_embeddings;
	uint32_t max_position_embeddings;
	int32_t eos_token_id;      /* -1: none */
	bool attn_res;
	uint32_t attn_res_block_size; /* sublayers per block */
	bool shape_only;           /* a preset for benchmarks: no weights */
	struct haccel__kda_config kda;
	struct haccel__dsa_config dsa;
};

/*
 * Parse and validate config.json text (label names it in messages). Every
 * field is checked; unknown fields are rejected. Returns 0, -EBADMSG (with
 * haccel_last_error() naming the field and the rule), -ENOMEM.
 */
int haccel__config_parse(struct haccel_ctx *ctx, const char *label,
			 const char *text, struct haccel__model_config *out);

/* Read and parse dir/config.json. */
int haccel__config_load(struct haccel_ctx *ctx, const char *dir,
			struct haccel__model_config *out);

/* The config as config.json text (malloc'd, NUL-terminated), or NULL. */
char *haccel__config_dump(const struct haccel__model_config *c);

/* The preset called name; -ENOENT when there is none. */
int haccel__config_preset(const char *name, struct haccel__model_config *out);

/*
 * Write config.json and (unless shape-only) model.safetensors for config c
 * into dir with weights drawn from seed; haccel_model_init() does this for
 * presets, tests for configurations of their own. flags: HACCEL_MODEL_INIT_*.
 */
int haccel__model_write(struct haccel_ctx *ctx, const struct haccel__model_config *c,
			const char *dir, uint64_t seed, uint32_t flags);

/* Number of parameters the config implies (all tensors). */
uint64_t haccel__config_params(const struct haccel__model_config *c);

/* Sublayers (2 per layer) and AttnRes blocks. */
static inline uint32_t haccel__config_n_blocks(const struct haccel__model_config *c)
{
	uint32_t s = 2 * c->num_layers;

	return (s + c->attn_res_block_size - 1) / c->attn_res_block_size;
}

#endif /* HACCEL_MODEL_MODEL_CONFIG_H */
