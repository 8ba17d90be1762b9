// SPDX-License-Identifier: MIT
/* The roofline of haccel-bench decode (bench_roof.h). */
#include "config.h"

#include "bench_roof.h"
#include "model/format.h"
#include "model/model_config.h"

void roof_decode_bytes(const struct haccel__model_config *c, uint64_t n_params, uint32_t B,
		       uint32_t ctx, struct roof_bytes *out)
{
	const struct haccel__kda_config *k = &c->kda;
	double D = c->hidden_size, n = (double)ctx + 1;
	uint32_t topk = c->n_dsa ? c->dsa.index_topk : 0;
	/* one sequence's state and tails in one KDA layer: the state pool's
	 * slot (pool/state.c) */
	double state = (double)k->num_heads * k->head_k_dim * k->head_v_dim * 4;
	double tails = (double)(k->conv_size ? k->conv_size - 1 : 0) *
		       ((double)k->num_heads * (2.0 * k->head_k_dim + k->head_v_dim)) * 4;

	/* A tied table is the logits' weight, read whole; an untied one is
	 * read only at the B tokens' rows. */
	out->weights = (double)n_params * 2;
	if (!c->tie_word_embeddings)
		out->weights -= (double)c->vocab_size * D * 2 - (double)B * D * 2;
	out->kda_state = 2.0 * B * c->n_kda * state;
	out->conv_tails = 2.0 * B * c->n_kda * tails;
	out->index_keys = (double)B * c->n_dsa * n * HACCEL__INDEX_K_BYTES;
	out->kv_records = (double)B * c->n_dsa * (n < topk ? n : topk) *
			  haccel__kv_token_bytes(c->dsa.qk_rope_head_dim);
	out->total = out->weights + out->kda_state + out->conv_tails + out->index_keys +
		     out->kv_records;
}
