/* SPDX-License-Identifier: MIT */
/*
 * The model object, shared by the CPU reference backend (model.c) and the
 * CUDA backend (model_cuda.c): config, weights, pools, sequences and the
 * host side of a step.
 */
#ifndef HACCEL_MODEL_PRIV_H
#define HACCEL_MODEL_PRIV_H

#include <stdint.h>

#include "haccel.h"
#include "model/model_config.h"
#include "model/tensors.h"

#define NONE UINT32_MAX

struct mseq {
	uint32_t live;
	uint32_t kv_seq;        /* the KV pool's sequence (DSA layers) */
	uint32_t slot;          /* the state pool's slot (KDA layers) */
	uint32_t n_tokens;
	uint32_t stamp;         /* last step that named it (duplicate check) */
};

struct workspace {
	uint32_t Tm;            /* max_step_tokens */
	uint32_t maxw;          /* widest per-token intermediate */
	int32_t *tok;
	uint32_t *pos;
	int64_t *slot;
	float *h, *x, *y;       /* [Tm][D] */
	float *res;             /* attn_res: (blocks + 1) x [Tm][D]; else [Tm][D] */
	float *buf[8];          /* [Tm][maxw] each */
	int32_t *sel;           /* [Tm][topk] */
	uint32_t *n_sel;        /* [Tm] */
	float *scratch;         /* max(max_seq_tokens, topk) */
	float *kda_scratch;
	uint32_t *first;        /* [max_seqs]: first row of each item */
	uint32_t *order;        /* sampling: [vocab] */
	float *probs;           /* sampling: [vocab] */
};

struct haccel__gmodel;

struct haccel_model {
	struct haccel_ctx *ctx;
	struct haccel__model_config c;
	struct haccel_model_params p;
	struct haccel__model_weights w;
	float *arena;
	uint64_t n_params;
	struct haccel_load_stats load;
	uint64_t weight_bytes;

	struct haccel_kv_pool *kv;
	const uint32_t *block_tables;
	uint32_t bt_stride;
	uint32_t page_tokens;
	struct haccel_kv_region kv_reg[HACCEL__MAX_LAYERS], ik_reg[HACCEL__MAX_LAYERS];
	struct haccel_state_pool *st;
	struct haccel_state_layout sl;
	uint32_t sub[HACCEL__MAX_LAYERS]; /* index among layers of its type */

	struct mseq *seqs;
	uint32_t stamp;
	struct workspace ws;
	struct haccel__gmodel *gm;      /* the CUDA backend, or NULL */
};


/*
 * The CUDA backend (model_cuda.c). load: stream the checkpoint (validated:
 * every tensor of spec is there with its shape) into GPU memory and bind
 * the device weights; setup: after the pools, carve the device workspace;
 * step: one step on the GPU once the rows are placed (ws tok, pos, slot and
 * first[]). close frees all of it (and tolerates a half-open model).
 */
int haccel__gmodel_load(struct haccel_model *m, struct haccel_weights *w,
			struct haccel__tensor_spec *spec, uint32_t n);
int haccel__gmodel_setup(struct haccel_model *m);
int haccel__gmodel_step(struct haccel_model *m, const struct haccel_step_item *items,
			uint32_t n_items, uint32_t T, const uint32_t *first);
void haccel__gmodel_close(struct haccel_model *m);
/* Copy kv_seq's whole block-table row to the device mirror. */
int haccel__gmodel_sync_row(struct haccel_model *m, uint32_t kv_seq);

/* n stored values of dtype (HACCEL_DTYPE_F32, BF16 or F16, little-endian,
 * any alignment) to fp32: f16 and bf16 widen exactly. */
void haccel__weights_to_f32(float *dst, const uint8_t *src, uint64_t n, uint32_t dtype);

/*
 * Benchmarks only: make seq n tokens longer without running the model
 * (KV pages taken and mapped, their bytes whatever the pool holds; state
 * untouched), so a decode step can be timed at a long context without the
 * prefill. tokens (n of them) decide the pages' prefix hashes: give each
 * sequence its own to keep pages unshared. Returns 0 or -errno.
 */
int haccel__model_seq_extend(struct haccel_model *m, uint32_t seq, const int32_t *tokens,
			     uint32_t n);

#endif /* HACCEL_MODEL_PRIV_H */
