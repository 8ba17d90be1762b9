// SPDX-License-Identifier: MIT
/*
 * The hybrid model on the CPU reference backend: open (config, weights,
 * pools, workspace), sequences, and the batched step.
 *
 * A step runs every token of every item through every layer together; ops
 * that are per token (matmuls, norms, the MLP, the attention-residual mix)
 * run over the whole batch at once, ops with history (the KDA convolution
 * and recurrence, the indexer and sparse attention) per item over its own
 * rows. Each token's KV is written to the cache before any attention reads
 * it, and attention always reads the cache (quantized), so a token's result
 * does not depend on which step, chunk or batch it came in: prefill in
 * chunks of 1, 7 or 64 and batches of any mix give the same bytes.
 *
 * Everything a step needs is carved at open, sized for max_step_tokens; a
 * step allocates nothing.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "core/log.h"
#include "model/cpu/ops.h"
#include "model/format.h"
#include "model/model_config.h"
#include "model/model_priv.h"
#include "model/tensors.h"
#include "weights/weights.h"

void haccel_model_params_init(struct haccel_model_params *p)
{
	if (!p)
		return;
	memset(p, 0, sizeof(*p));
	p->size = sizeof(*p);
	p->device = HACCEL_DEVICE_CPU;
	p->max_seqs = 16;
	p->max_step_tokens = 256;
	p->load_flags = HACCEL_LOAD_VERIFY;
}

/* ------------------------------------------------------------------------ */
/* Weights                                                                  */

static float half_to_float(uint16_t h)
{
	uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1f, m = h & 0x3ff, u;
	float f;

	if (e == 0) {
		f = ldexpf((float)m, -24);
		return s ? -f : f;
	}
	if (e == 31)
		u = s | 0x7f800000u | (m << 13);
	else
		u = s | ((e + 112) << 23) | (m << 13);
	memcpy(&f, &u, 4);
	return f;
}

/* Convert a tensor's stored bytes to fp32 (the CPU form of the GPU's
 * haccel_convert). */
void haccel__weights_to_f32(float *dst, const uint8_t *src, uint64_t n, uint32_t dtype)
{
	for (uint64_t i = 0; i < n; i++) {
		if (dtype == HACCEL_DTYPE_BF16) {
			dst[i] = haccel__bf16_to_float((uint16_t)(src[2 * i] | src[2 * i + 1] << 8));
		} else if (dtype == HACCEL_DTYPE_F16) {
			dst[i] = half_to_float((uint16_t)(src[2 * i] | src[2 * i + 1] << 8));
		} else {
			uint32_t u = (uint32_t)src[4 * i] | (uint32_t)src[4 * i + 1] << 8 |
				     (uint32_t)src[4 * i + 2] << 16 | (uint32_t)src[4 * i + 3] << 24;
			memcpy(&dst[i], &u, 4);
		}
	}
}

static int load_weights(struct haccel_model *m, const char *dir)
{
	struct haccel_ctx *ctx = m->ctx;
	struct haccel__tensor_spec *spec = NULL;
	struct haccel_weights *w = NULL;
	struct haccel_weights_info info;
	struct haccel_load_params lp;
	struct haccel_host_sink sink;
	uint8_t *raw = NULL;
	uint64_t total = 0, off = 0;
	int n, ret;

	n = haccel__model_tensors(&m->c, NULL, NULL, 0);
	spec = calloc((size_t)n, sizeof(*spec));
	if (!spec)
		return -ENOMEM;
	haccel__model_tensors(&m->c, &m->w, spec, (uint32_t)n);
	ret = haccel_weights_open(ctx, dir, 0, &w);
	if (ret)
		goto out;
	haccel_weights_info(w, &info);

	/* Every tensor the config implies, with its shape; nothing else. */
	for (int i = 0; i < n; i++) {
		struct haccel_tensor_info t;
		uint32_t idx;

		if (haccel_weights_find(w, spec[i].name, &idx)) {
			ret = haccel__fail(ctx, -EBADMSG, "%s: tensor %s is missing (the config needs it)",
					   dir, spec[i].name);
			goto out;
		}
		haccel_weights_tensor(w, idx, &t);
		if (t.n_dims != spec[i].n_dims || t.shape[0] != spec[i].shape[0] ||
		    (t.n_dims == 2 && t.shape[1] != spec[i].shape[1])) {
			ret = haccel__fail(ctx, -EBADMSG, "%s: tensor %s has shape [%llu%s%llu], the config needs [%llu%s%llu]",
					   dir, spec[i].name, (unsigned long long)t.shape[0],
					   t.n_dims == 2 ? ", " : "", t.n_dims == 2 ? (unsigned long long)t.shape[1] : 0ull,
					   (unsigned long long)spec[i].shape[0], spec[i].n_dims == 2 ? ", " : "",
					   spec[i].n_dims == 2 ? (unsigned long long)spec[i].shape[1] : 0ull);
			goto out;
		}
		if (t.dtype != HACCEL_DTYPE_BF16 && t.dtype != HACCEL_DTYPE_F16 &&
		    t.dtype != HACCEL_DTYPE_F32) {
			ret = haccel__fail(ctx, -EBADMSG, "%s: tensor %s is %s; the CPU backend reads BF16, F16 or F32",
					   dir, spec[i].name, haccel_dtype_name(t.dtype));
			goto out;
		}
		total += haccel__spec_elems(&spec[i]);
	}
	if (info.n_tensors != (uint32_t)n) {
		ret = haccel__fail(ctx, -EBADMSG, "%s: %u tensors in the checkpoint, the config names %d (extra tensors are not ignored)",
				   dir, info.n_tensors, n);
		goto out;
	}
	if (m->p.device == HACCEL_DEVICE_CUDA) {
		m->n_params = total;
		ret = haccel__gmodel_load(m, w, spec, (uint32_t)n);
		goto out;
	}

	raw = malloc(info.dest_bytes ? info.dest_bytes : 1);
	m->arena = malloc(total * sizeof(float) + 1);
	if (!raw || !m->arena) {
		ret = haccel__fail(ctx, -ENOMEM, "%s: cannot allocate %llu + %llu bytes for the weights",
				   dir, (unsigned long long)info.dest_bytes,
				   (unsigned long long)(total * sizeof(float)));
		goto out;
	}
	haccel_load_params_init(&lp);
	lp.flags = m->p.load_flags;
	lp.hostmem_flags = m->p.load_hostmem_flags;
	haccel_host_sink_init(&sink, raw, info.dest_bytes);
	ret = haccel_load(w, &lp, &sink.sink, &m->load);
	if (ret)
		goto out;
	m->weight_bytes = m->load.tensor_bytes;
	for (int i = 0; i < n; i++) {
		struct haccel_tensor_info t;
		uint32_t idx;

		haccel_weights_find(w, spec[i].name, &idx);
		haccel_weights_tensor(w, idx, &t);
		haccel__weights_to_f32(m->arena + off, raw + t.dest_offset, haccel__spec_elems(&spec[i]), t.dtype);
		*spec[i].bind = m->arena + off;
		off += haccel__spec_elems(&spec[i]);
	}
	if (m->c.tie_word_embeddings)
		m->w.lm_head = m->w.embed;
	m->n_params = total;
out:
	free(raw);
	haccel_weights_close(w);
	free(spec);
	return ret;
}

/* ------------------------------------------------------------------------ */
/* Open                                                                     */

static uint32_t umax(uint32_t a, uint32_t b)
{
	return a > b ? a : b;
}

static int setup_pools(struct haccel_model *m)
{
	const struct haccel__model_config *c = &m->c;
	uint32_t nk = 0, nd = 0;
	int ret;

	for (uint32_t i = 0; i < c->num_layers; i++)
		m->sub[i] = c->layer_type[i] == HACCEL__LAYER_KDA ? nk++ : nd++;
	if (c->n_dsa) {
		struct haccel_kv_pool_config kc;
		struct haccel_kv_pool_info ki;

		haccel_kv_pool_config_init(&kc);
		kc.n_layers = c->n_dsa;
		kc.streams[0].bytes_per_token = haccel__kv_token_bytes(c->dsa.qk_rope_head_dim);
		kc.streams[1].bytes_per_token = HACCEL__INDEX_K_BYTES;
		kc.max_seqs = m->p.max_seqs;
		kc.max_seq_tokens = m->p.max_seq_tokens;
		uint64_t pages = m->p.kv_pages ? m->p.kv_pages :
				 (uint64_t)m->p.max_seqs *
					 ((m->p.max_seq_tokens + kc.page_tokens - 1) / kc.page_tokens);

		if (pages >= UINT32_MAX)
			return haccel__fail(m->ctx, -EOVERFLOW,
					    "model: %u sequences of %u tokens need %llu KV pages, more than a pool holds (2^32 - 1); set kv_pages or lower max_seqs or max_seq_tokens",
					    m->p.max_seqs, m->p.max_seq_tokens, (unsigned long long)pages);
		kc.n_pages = (uint32_t)pages;
		if (m->p.device == HACCEL_DEVICE_CUDA)
			kc.mem = HACCEL_MEM_CUDA;
		ret = haccel_kv_pool_create(m->ctx, &kc, &m->kv);
		if (ret)
			return ret;
		haccel_kv_pool_info(m->kv, &ki);
		m->block_tables = ki.block_tables;
		m->bt_stride = ki.max_pages_per_seq;
		m->page_tokens = ki.page_tokens;
		for (uint32_t l = 0; l < c->n_dsa; l++) {
			haccel_kv_pool_region(m->kv, l, 0, &m->kv_reg[l]);
			haccel_kv_pool_region(m->kv, l, 1, &m->ik_reg[l]);
		}
	}
	if (c->n_kda) {
		struct haccel_state_pool_config sc;

		haccel_state_pool_config_init(&sc);
		sc.n_layers = c->n_kda;
		sc.n_heads = c->kda.num_heads;
		sc.head_dk = c->kda.head_k_dim;
		sc.head_dv = c->kda.head_v_dim;
		sc.conv_width = c->kda.conv_size;
		sc.conv_elem_bytes = 4;
		sc.n_slots = m->p.max_seqs;
		if (m->p.device == HACCEL_DEVICE_CUDA) {
			/* One more: the slot padded rows of a captured decode
			 * step update (model_cuda.c). */
			sc.mem = HACCEL_MEM_CUDA;
			sc.n_slots++;
		}
		ret = haccel_state_pool_create(m->ctx, &sc, &m->st);
		if (ret)
			return ret;
		haccel_state_pool_layout(m->st, &m->sl);
	}
	m->seqs = calloc(m->p.max_seqs, sizeof(*m->seqs));
	return m->seqs ? 0 : -ENOMEM;
}

static int setup_workspace(struct haccel_model *m)
{
	const struct haccel__model_config *c = &m->c;
	const struct haccel__kda_config *k = &c->kda;
	const struct haccel__dsa_config *d = &c->dsa;
	struct workspace *ws = &m->ws;
	uint32_t Tm = m->p.max_step_tokens, D = c->hidden_size, w = umax(D, c->intermediate_size);
	size_t res_rows;

	if (c->n_kda) {
		w = umax(w, k->num_heads * umax(k->head_k_dim, k->head_v_dim));
		w = umax(w, umax(k->gate_rank, k->output_gate_rank));
	}
	if (c->n_dsa) {
		w = umax(w, d->num_heads * (d->qk_nope_head_dim + d->qk_rope_head_dim));
		w = umax(w, d->kv_lora_rank + d->qk_rope_head_dim);
		w = umax(w, d->num_heads * d->kv_lora_rank);
		w = umax(w, d->index_n_heads * d->index_head_dim);
		w = umax(w, d->num_heads * d->v_head_dim);
		w = umax(w, d->q_lora_rank);
	}
	ws->Tm = Tm;
	ws->maxw = w;
	res_rows = c->attn_res ? haccel__config_n_blocks(c) + 1 : 1;
	ws->tok = calloc(Tm, sizeof(*ws->tok));
	ws->pos = calloc(Tm, sizeof(*ws->pos));
	ws->slot = calloc(Tm, sizeof(*ws->slot));
	ws->first = calloc(m->p.max_seqs, sizeof(*ws->first));
	ws->order = calloc(c->vocab_size, sizeof(*ws->order));
	ws->probs = calloc(c->vocab_size, sizeof(*ws->probs));
	if (m->p.device == HACCEL_DEVICE_CUDA)
		/* The GPU has its own workspace; the host keeps the rows'
		 * placement and what sampling needs. */
		return ws->tok && ws->pos && ws->slot && ws->first && ws->order && ws->probs ?
			       0 : -ENOMEM;
	ws->h = calloc((size_t)Tm * D, sizeof(float));
	ws->x = calloc((size_t)Tm * D, sizeof(float));
	ws->y = calloc((size_t)Tm * D, sizeof(float));
	ws->res = calloc(res_rows * Tm * D, sizeof(float));
	for (int i = 0; i < 8; i++)
		if (!(ws->buf[i] = calloc((size_t)Tm * w, sizeof(float))))
			return -ENOMEM;
	if (c->n_dsa) {
		ws->sel = calloc((size_t)Tm * d->index_topk, sizeof(*ws->sel));
		ws->n_sel = calloc(Tm, sizeof(*ws->n_sel));
		ws->scratch = calloc(umax(m->p.max_seq_tokens, d->index_topk) + 1, sizeof(float));
		if (!ws->sel || !ws->n_sel || !ws->scratch)
			return -ENOMEM;
	}
	if (c->n_kda) {
		/* The chunked form is for other backends; the reference runs the
		 * recurrence, whose order of operations never depends on how a
		 * prompt was cut into steps. */
		ws->kda_scratch = NULL;
	}
	if (!ws->tok || !ws->pos || !ws->slot || !ws->h || !ws->x || !ws->y || !ws->res ||
	    !ws->first || !ws->order || !ws->probs)
		return -ENOMEM;
	return 0;
}

static void free_workspace(struct workspace *ws)
{
	free(ws->tok);
	free(ws->pos);
	free(ws->slot);
	free(ws->h);
	free(ws->x);
	free(ws->y);
	free(ws->res);
	for (int i = 0; i < 8; i++)
		free(ws->buf[i]);
	free(ws->sel);
	free(ws->n_sel);
	free(ws->scratch);
	free(ws->kda_scratch);
	free(ws->first);
	free(ws->order);
	free(ws->probs);
}

void haccel_model_close(struct haccel_model *m)
{
	if (!m)
		return;
	/* The GPU side first: it waits for work still queued on the pools. */
	haccel__gmodel_close(m);
	free_workspace(&m->ws);
	free(m->seqs);
	haccel_state_pool_destroy(m->st);
	haccel_kv_pool_destroy(m->kv);
	free(m->arena);
	free(m);
}

int haccel_model_open(struct haccel_ctx *ctx, const char *dir,
		      const struct haccel_model_params *params,
		      struct haccel_model **out)
{
	struct haccel_model *m;
	int ret;

	if (!ctx || !dir || !out)
		return -EINVAL;
	*out = NULL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->ctx = ctx;
	haccel_model_params_init(&m->p);
	if (params) {
		ret = haccel__config_copy(&m->p, sizeof(m->p), params, sizeof(m->p));
		if (ret || (m->p.flags & ~HACCEL_MODEL_NO_GRAPHS) ||
		    (m->p.device != HACCEL_DEVICE_CPU && m->p.device != HACCEL_DEVICE_CUDA) ||
		    !m->p.max_seqs || m->p.max_seqs > 65536 || !m->p.max_step_tokens ||
		    m->p.max_step_tokens > (1u << 20)) {
			ret = haccel__fail(ctx, -EINVAL, "model: bad params (device cpu or cuda, max_seqs 1..65536, max_step_tokens 1..2^20, flags HACCEL_MODEL_*)");
			goto err;
		}
	}
	ret = haccel__config_load(ctx, dir, &m->c);
	if (ret)
		goto err;
	if (m->c.shape_only) {
		ret = haccel__fail(ctx, -ENOTSUP, "model: %s is a shape-only preset (\"%s\"): it has no weights to run",
				   dir, m->c.preset);
		goto err;
	}
	if (!m->p.max_seq_tokens)
		m->p.max_seq_tokens = m->c.max_position_embeddings < 4096 ?
					      m->c.max_position_embeddings : 4096;
	if (m->p.max_seq_tokens > m->c.max_position_embeddings) {
		ret = haccel__fail(ctx, -EINVAL, "model: max_seq_tokens %u is beyond max_position_embeddings %u",
				   m->p.max_seq_tokens, m->c.max_position_embeddings);
		goto err;
	}
	ret = load_weights(m, dir);
	if (!ret)
		ret = setup_pools(m);
	if (!ret)
		ret = setup_workspace(m);
	if (!ret && m->p.device == HACCEL_DEVICE_CUDA)
		ret = haccel__gmodel_setup(m);
	if (ret)
		goto err;
	haccel__info(ctx, "model %s: %u layers (%u KDA, %u DSA), %llu parameters, %.2f GB read in %.2f s",
		     dir, m->c.num_layers, m->c.n_kda, m->c.n_dsa, (unsigned long long)m->n_params,
		     (double)m->weight_bytes / 1e9, (double)m->load.ns / 1e9);
	*out = m;
	return 0;
err:
	haccel_model_close(m);
	return ret;
}

int haccel_model_info(const struct haccel_model *m, struct haccel_model_info *out)
{
	if (!m || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->vocab_size = m->c.vocab_size;
	out->hidden_size = m->c.hidden_size;
	out->num_layers = m->c.num_layers;
	out->n_kda = m->c.n_kda;
	out->n_dsa = m->c.n_dsa;
	out->max_seqs = m->p.max_seqs;
	out->max_seq_tokens = m->p.max_seq_tokens;
	out->max_step_tokens = m->p.max_step_tokens;
	out->eos_token_id = m->c.eos_token_id;
	out->params = m->n_params;
	out->weight_bytes = m->weight_bytes;
	out->load_ns = m->load.ns;
	out->load_io_path = m->load.io_path;
	out->load_direct = m->load.direct;
	out->kv = m->kv;
	out->state = m->st;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Sequences                                                                */

static int seq_get(const struct haccel_model *m, uint32_t seq)
{
	if (!m || seq >= m->p.max_seqs)
		return -EINVAL;
	return m->seqs[seq].live ? 0 : -ENOENT;
}

int haccel_model_seq_create(struct haccel_model *m, uint32_t *seq)
{
	struct mseq *s = NULL;
	uint32_t id;
	int ret;

	if (!m || !seq)
		return -EINVAL;
	for (id = 0; id < m->p.max_seqs; id++)
		if (!m->seqs[id].live) {
			s = &m->seqs[id];
			break;
		}
	if (!s)
		return -ENOSPC;
	memset(s, 0, sizeof(*s));
	s->kv_seq = s->slot = NONE;
	if (m->kv) {
		ret = haccel_kv_seq_create(m->kv, NULL, 0, &s->kv_seq, NULL);
		if (ret)
			return ret;
	}
	if (m->st) {
		/* A zeroed slot: the zero state and empty convolution tails. */
		ret = haccel_state_slot_alloc(m->st, 0, &s->slot);
		if (ret) {
			if (m->kv)
				haccel_kv_seq_free(m->kv, s->kv_seq);
			return ret;
		}
	}
	s->live = 1;
	*seq = id;
	return 0;
}

int haccel_model_seq_free(struct haccel_model *m, uint32_t seq)
{
	int ret = seq_get(m, seq);

	if (ret)
		return ret;
	if (m->kv)
		haccel_kv_seq_free(m->kv, m->seqs[seq].kv_seq);
	if (m->st)
		haccel_state_slot_free(m->st, m->seqs[seq].slot);
	m->seqs[seq].live = 0;
	return 0;
}

int haccel__model_seq_extend(struct haccel_model *m, uint32_t seq, const int32_t *tokens,
			     uint32_t n)
{
	int ret = seq_get(m, seq);
	struct mseq *s;

	if (ret)
		return ret;
	s = &m->seqs[seq];
	if ((uint64_t)s->n_tokens + n > m->p.max_seq_tokens)
		return -E2BIG;
	if (m->kv) {
		int64_t *slots = malloc((size_t)n * sizeof(*slots) + 1);

		if (!slots)
			return -ENOMEM;
		ret = haccel_kv_seq_append(m->kv, s->kv_seq, tokens, n, slots);
		free(slots);
		if (!ret && m->gm)
			ret = haccel__gmodel_sync_row(m, s->kv_seq);
		if (ret)
			return ret;
	}
	s->n_tokens += n;
	return 0;
}

int haccel_model_seq_length(const struct haccel_model *m, uint32_t seq, uint32_t *n)
{
	int ret = seq_get(m, seq);

	if (ret)
		return ret;
	if (!n)
		return -EINVAL;
	*n = m->seqs[seq].n_tokens;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Layers                                                                   */

static float *kda_state(const struct haccel_model *m, uint32_t slot, uint32_t l,
			uint64_t off)
{
	return (float *)((char *)m->sl.slots_base + (uint64_t)slot * m->sl.slot_bytes +
			 (uint64_t)l * m->sl.layer_bytes + off);
}

static void kda_layer(struct haccel_model *m, uint32_t li, const float *x, float *y,
		      uint32_t T, const struct haccel_step_item *items,
		      const uint32_t *first, uint32_t n_items)
{
	const struct haccel__kda_config *k = &m->c.kda;
	const struct haccel__kda_weights *W = &m->w.layer[li].kda;
	uint32_t D = m->c.hidden_size, H = k->num_heads, K = k->head_k_dim, V = k->head_v_dim;
	uint32_t HK = H * K, HV = H * V, Wc = k->conv_size, l = m->sub[li];
	float **b = m->ws.buf;
	float *q = b[0], *kk = b[1], *v = b[2], *qc = b[3], *kc = b[4], *vc = b[5];
	float *g = b[6], *tmp = b[7];

	haccel__cpu_matmul(q, x, W->q, NULL, T, HK, D);
	haccel__cpu_matmul(kk, x, W->k, NULL, T, HK, D);
	haccel__cpu_matmul(v, x, W->v, NULL, T, HV, D);
	for (uint32_t i = 0; i < n_items; i++) {
		uint32_t f = first[i], n = items[i].n_tokens, s = m->seqs[items[i].seq].slot;

		haccel__cpu_kda_conv(qc + (size_t)f * HK, q + (size_t)f * HK, n, HK, W->q_conv, Wc,
				     kda_state(m, s, l, m->sl.conv_q_offset));
		haccel__cpu_kda_conv(kc + (size_t)f * HK, kk + (size_t)f * HK, n, HK, W->k_conv, Wc,
				     kda_state(m, s, l, m->sl.conv_k_offset));
		haccel__cpu_kda_conv(vc + (size_t)f * HV, v + (size_t)f * HV, n, HV, W->v_conv, Wc,
				     kda_state(m, s, l, m->sl.conv_v_offset));
	}
	/* q, k, v hold the raw projections no more: reuse them. */
	haccel__cpu_matmul(tmp, x, W->f_a, NULL, T, k->gate_rank, D);
	haccel__cpu_matmul(g, tmp, W->f_b, NULL, T, HK, k->gate_rank);
	haccel__cpu_kda_gate(g, g, T, H, K, W->A_log, W->dt_bias, (int)k->gate_form,
			     k->gate_lower_bound);
	float *beta = q;
	haccel__cpu_matmul(beta, x, W->b, NULL, T, H, D);
	haccel__cpu_kda_prep(qc, kc, beta, T, H, K);
	float *o = kk;
	for (uint32_t i = 0; i < n_items; i++) {
		uint32_t f = first[i], n = items[i].n_tokens, s = m->seqs[items[i].seq].slot;

		haccel__cpu_kda_recurrent(kda_state(m, s, l, m->sl.state_offset),
					  qc + (size_t)f * HK, kc + (size_t)f * HK,
					  vc + (size_t)f * HV, g + (size_t)f * HK,
					  beta + (size_t)f * H, o + (size_t)f * HV, n, H, K, V);
	}
	float *og = v;
	if (k->output_gate_low_rank) {
		haccel__cpu_matmul(tmp, x, W->g_a, NULL, T, k->output_gate_rank, D);
		haccel__cpu_matmul(og, tmp, W->g_b, W->g_b_bias, T, HV, k->output_gate_rank);
	} else {
		haccel__cpu_matmul(og, x, W->g, NULL, T, HV, D);
	}
	haccel__cpu_gated_rmsnorm(o, og, W->o_norm, T, H, V, m->c.rms_norm_eps);
	haccel__cpu_matmul(y, o, W->o, NULL, T, D, HV);
}

static void dsa_layer(struct haccel_model *m, uint32_t li, const float *x, float *y,
		      uint32_t T, const struct haccel_step_item *items,
		      const uint32_t *first, uint32_t n_items)
{
	const struct haccel__dsa_config *d = &m->c.dsa;
	const struct haccel__dsa_weights *W = &m->w.layer[li].dsa;
	struct workspace *ws = &m->ws;
	uint32_t D = m->c.hidden_size, H = d->num_heads, dn = d->qk_nope_head_dim;
	uint32_t dr = d->qk_rope_head_dim, dv = d->v_head_dim, R = d->kv_lora_rank;
	uint32_t IH = d->index_n_heads, ID = d->index_head_dim, l = m->sub[li];
	uint32_t qh = dn + dr;
	float **b = ws->buf;
	float *cq = b[0], *q = b[1], *kva = b[2], *lat = b[3], *kpe = b[4];
	float *qlat = b[5], *olat = b[6], *t7 = b[7];

	/* q path: the LoRA latent (shared with the indexer), then heads. */
	haccel__cpu_matmul(cq, x, W->q_a, NULL, T, d->q_lora_rank, D);
	haccel__cpu_rmsnorm(cq, cq, W->q_a_norm, T, d->q_lora_rank, m->c.rms_norm_eps);
	haccel__cpu_matmul(q, cq, W->q_b, NULL, T, H * qh, d->q_lora_rank);
	/* kv path: the compressed latent and the shared rotary key. */
	haccel__cpu_matmul(kva, x, W->kv_a, NULL, T, R + dr, D);
	for (uint32_t t = 0; t < T; t++) {
		memcpy(lat + (size_t)t * R, kva + (size_t)t * (R + dr), R * sizeof(float));
		memcpy(kpe + (size_t)t * dr, kva + (size_t)t * (R + dr) + R, dr * sizeof(float));
	}
	haccel__cpu_rmsnorm(lat, lat, W->kv_a_norm, T, R, m->c.rms_norm_eps);
	if (dr) {
		haccel__cpu_rope(q + dn, T, H, (size_t)H * qh, qh, dr, ws->pos, d->rope_theta,
				 (int)d->rope_layout);
		haccel__cpu_rope(kpe, T, 1, dr, dr, dr, ws->pos, d->rope_theta, (int)d->rope_layout);
	}
	/* Into the cache first: attention reads every token, this step's
	 * too, from the cache. */
	haccel__cpu_mla_kv_write(m->kv_reg[l].base, ws->slot, lat, kpe, T, dr);

	/* The indexer: queries from the q latent, one shared key per token. */
	float *iq = kva, *ik = lat, *iw = kpe;
	haccel__cpu_matmul(iq, cq, W->iq_b, NULL, T, IH * ID, d->q_lora_rank);
	haccel__cpu_matmul(t7, x, W->ik, NULL, T, ID, D);
	haccel__cpu_layernorm(ik, t7, W->ik_norm_w, W->ik_norm_b, T, ID, 1e-6f);
	if (d->index_rope_dim) {
		haccel__cpu_rope(iq, T, IH, (size_t)IH * ID, ID, d->index_rope_dim, ws->pos,
				 d->rope_theta, (int)d->index_rope_layout);
		haccel__cpu_rope(ik, T, 1, ID, ID, d->index_rope_dim, ws->pos, d->rope_theta,
				 (int)d->index_rope_layout);
	}
	haccel__cpu_hadamard128(iq, T * IH);
	haccel__cpu_hadamard128(ik, T);
	haccel__cpu_index_k_write(m->ik_reg[l].base, ws->slot, ik, T);
	haccel__cpu_matmul(iw, x, W->iw, NULL, T, IH, D);
	float wscale = 1.0f / sqrtf((float)IH) / sqrtf((float)ID);
	for (uint32_t i = 0; i < T * IH; i++)
		iw[i] *= wscale;

	/* Absorb the key up-projection into the queries: q_lat = W_UK^T q_nope. */
	for (uint32_t t = 0; t < T; t++)
		for (uint32_t h = 0; h < H; h++) {
			const float *qn = q + (size_t)t * H * qh + (size_t)h * qh;
			float *ql = qlat + ((size_t)t * H + h) * R;

			for (uint32_t c = 0; c < R; c++)
				ql[c] = 0.0f;
			for (uint32_t j = 0; j < dn; j++) {
				const float *wk = W->kv_b + ((size_t)h * (dn + dv) + j) * R;
				for (uint32_t c = 0; c < R; c++)
					ql[c] += qn[j] * wk[c];
			}
		}
	/* The rotary part of the queries, contiguous [T][H][dr]. */
	float *qpe = t7;
	for (uint32_t t = 0; t < T; t++)
		for (uint32_t h = 0; h < H; h++)
			memcpy(qpe + ((size_t)t * H + h) * dr, q + (size_t)t * H * qh + (size_t)h * qh + dn,
			       dr * sizeof(float));
	float scale = 1.0f / sqrtf((float)qh);
	uint32_t topk = d->index_topk;
	for (uint32_t i = 0; i < n_items; i++) {
		uint32_t f = first[i], n = items[i].n_tokens;
		const uint32_t *bt = m->block_tables +
				     (size_t)m->seqs[items[i].seq].kv_seq * m->bt_stride;

		haccel__cpu_indexer_topk(ws->sel + (size_t)f * topk, ws->n_sel + f,
					 iq + (size_t)f * IH * ID, iw + (size_t)f * IH, n, IH,
					 ws->pos + f, m->ik_reg[l].base, bt, m->page_tokens,
					 topk, ws->scratch);
		haccel__cpu_sparse_mla(olat + (size_t)f * H * R, qlat + (size_t)f * H * R,
				       qpe + (size_t)f * H * dr, n, H, dr,
				       ws->sel + (size_t)f * topk, ws->n_sel + f, topk,
				       m->kv_reg[l].base, bt, m->page_tokens, scale,
				       ws->scratch);
	}
	/* Values: o = W_UV o_lat per head, then the output projection. */
	float *o = cq;
	for (uint32_t t = 0; t < T; t++)
		for (uint32_t h = 0; h < H; h++) {
			const float *ol = olat + ((size_t)t * H + h) * R;
			float *oh = o + (size_t)t * H * dv + (size_t)h * dv;

			for (uint32_t j = 0; j < dv; j++) {
				const float *wv = W->kv_b + ((size_t)h * (dn + dv) + dn + j) * R;
				float acc = 0.0f;

				for (uint32_t c = 0; c < R; c++)
					acc += ol[c] * wv[c];
				oh[j] = acc;
			}
		}
	haccel__cpu_matmul(y, o, W->o, NULL, T, D, H * dv);
}

static void mlp(struct haccel_model *m, uint32_t li, const float *x, float *y, uint32_t T)
{
	const struct haccel__layer_weights *L = &m->w.layer[li];
	uint32_t D = m->c.hidden_size, I = m->c.intermediate_size;
	float *g = m->ws.buf[0], *u = m->ws.buf[1];

	haccel__cpu_matmul(g, x, L->gate, NULL, T, I, D);
	haccel__cpu_matmul(u, x, L->up, NULL, T, I, D);
	haccel__cpu_swiglu(g, g, u, (size_t)T * I);
	haccel__cpu_matmul(y, g, L->down, NULL, T, D, I);
}

/* ------------------------------------------------------------------------ */
/* Step                                                                     */

static int check_items(struct haccel_model *m, const struct haccel_step_item *items,
		       uint32_t n, uint32_t *total)
{
	uint64_t T = 0;

	/* A fresh stamp marks the batch's sequences; when it wraps, every old
	 * mark goes, so none can match by chance. */
	if (++m->stamp == 0) {
		for (uint32_t s = 0; s < m->p.max_seqs; s++)
			m->seqs[s].stamp = 0;
		m->stamp = 1;
	}
	for (uint32_t i = 0; i < n; i++) {
		const struct haccel_step_item *it = &items[i];
		int ret = seq_get(m, it->seq);

		if (ret)
			return haccel__fail(m->ctx, ret, "step: item %u: sequence %u %s", i, it->seq,
					    ret == -ENOENT ? "is not in use" : "is out of range");
		if (!it->n_tokens || !it->tokens)
			return haccel__fail(m->ctx, -EINVAL, "step: item %u has no tokens", i);
		if (m->seqs[it->seq].stamp == m->stamp)
			return haccel__fail(m->ctx, -EINVAL, "step: sequence %u appears twice", it->seq);
		m->seqs[it->seq].stamp = m->stamp;
		for (uint32_t t = 0; t < it->n_tokens; t++)
			if (it->tokens[t] < 0 || (uint32_t)it->tokens[t] >= m->c.vocab_size)
				return haccel__fail(m->ctx, -EINVAL, "step: item %u token %u = %d is outside the vocabulary (%u)",
						    i, t, it->tokens[t], m->c.vocab_size);
		if ((uint64_t)m->seqs[it->seq].n_tokens + it->n_tokens > m->p.max_seq_tokens)
			return haccel__fail(m->ctx, -E2BIG, "step: sequence %u would pass max_seq_tokens (%u)",
					    it->seq, m->p.max_seq_tokens);
		T += it->n_tokens;
	}
	if (T > m->p.max_step_tokens)
		return haccel__fail(m->ctx, -E2BIG, "step: %llu tokens, more than max_step_tokens (%u)",
				    (unsigned long long)T, m->p.max_step_tokens);
	*total = (uint32_t)T;
	return 0;
}

/* Positions, slots and token ids of every row; KV pages taken. All or nothing. */
static int place_tokens(struct haccel_model *m, const struct haccel_step_item *items,
			uint32_t n, uint32_t *first)
{
	struct workspace *ws = &m->ws;
	uint32_t row = 0;

	/* Several items: their pages counted first, so that a batch the pool
	 * cannot hold fails before any append (an append may evict cached
	 * prefixes and caches the pages it fills, which no truncate undoes).
	 * The count may be high (two sequences sharing a partial page each
	 * count its copy), never low, so the appends below cannot fail. */
	if (m->kv && n > 1) {
		struct haccel_kv_stats st;
		uint64_t need = 0;

		for (uint32_t i = 0; i < n; i++) {
			uint32_t pg;
			int ret = haccel_kv_seq_pages_needed(m->kv, m->seqs[items[i].seq].kv_seq,
							     items[i].n_tokens, &pg);

			if (ret)
				return haccel__fail(m->ctx, ret, "step: item %u: %s", i,
						    haccel_strerror(ret));
			need += pg;
		}
		haccel_kv_pool_stats(m->kv, &st);
		if (need > st.pages_free + st.pages_evictable)
			return haccel__fail(m->ctx, -ENOMEM,
					    "step: no room in the KV pool: the %u items need %llu new pages, %llu are free or evictable",
					    n, (unsigned long long)need,
					    (unsigned long long)(st.pages_free + st.pages_evictable));
	}
	for (uint32_t i = 0; i < n; i++) {
		const struct haccel_step_item *it = &items[i];
		struct mseq *s = &m->seqs[it->seq];

		first[i] = row;
		if (m->kv) {
			int ret = haccel_kv_seq_append(m->kv, s->kv_seq, it->tokens, it->n_tokens,
						       ws->slot + row);
			if (ret) {
				/* Undo the items already placed. */
				for (uint32_t k = 0; k < i; k++)
					haccel_kv_seq_truncate(m->kv, m->seqs[items[k].seq].kv_seq,
							       m->seqs[items[k].seq].n_tokens);
				return haccel__fail(m->ctx, ret, "step: no room for %u more tokens of sequence %u in the KV pool: %s",
						    it->n_tokens, it->seq, haccel_strerror(ret));
			}
		}
		for (uint32_t t = 0; t < it->n_tokens; t++) {
			ws->tok[row + t] = it->tokens[t];
			ws->pos[row + t] = s->n_tokens + t;
		}
		row += it->n_tokens;
	}
	return 0;
}

int haccel_model_step(struct haccel_model *m, const struct haccel_step_item *items,
		      uint32_t n_items)
{
	const struct haccel__model_config *c;
	struct workspace *ws;
	uint32_t T = 0, D, *first;
	int ret;

	if (!m || !items || !n_items)
		return -EINVAL;
	c = &m->c;
	ws = &m->ws;
	D = c->hidden_size;
	ret = check_items(m, items, n_items, &T);
	if (ret)
		return ret;
	/* Sequences cannot repeat, so there are at most max_seqs items. */
	first = ws->first;
	ret = place_tokens(m, items, n_items, first);
	if (ret)
		return ret;
	if (m->gm)
		return haccel__gmodel_step(m, items, n_items, T, first);

	size_t TD = (size_t)T * D;
	uint32_t nb = 0;         /* completed blocks (attention residuals) */
	bool partial = false;
	const float *srcs[64];
	float *blocks = ws->res;

	haccel__cpu_embed(c->attn_res ? blocks : ws->res, m->w.embed, ws->tok, T, D);
	if (c->attn_res)
		nb = 1;
	for (uint32_t li = 0; li < c->num_layers; li++) {
		const struct haccel__layer_weights *L = &m->w.layer[li];

		for (uint32_t sub = 0; sub < 2; sub++) {
			uint32_t j = 2 * li + sub;
			const float *h;

			if (c->attn_res) {
				uint32_t ns = 0;

				for (uint32_t bi = 0; bi < nb + (partial ? 1 : 0); bi++)
					srcs[ns++] = blocks + bi * TD;
				haccel__cpu_attn_res_mix(ws->h, srcs, ns, sub ? L->ar_mlp_q : L->ar_mixer_q,
							 sub ? L->ar_mlp_norm : L->ar_mixer_norm, T, D,
							 c->rms_norm_eps);
				h = ws->h;
			} else {
				h = ws->res;
			}
			haccel__cpu_rmsnorm(ws->x, h, sub ? L->post_norm : L->in_norm, T, D, c->rms_norm_eps);
			if (sub)
				mlp(m, li, ws->x, ws->y, T);
			else if (c->layer_type[li] == HACCEL__LAYER_KDA)
				kda_layer(m, li, ws->x, ws->y, T, items, first, n_items);
			else
				dsa_layer(m, li, ws->x, ws->y, T, items, first, n_items);

			/* The partial sum of the current block lives in the
			 * next free block row; completing it is a count. */
			float *acc = c->attn_res ? blocks + nb * TD : ws->res;
			if (c->attn_res && !partial)
				memcpy(acc, ws->y, TD * sizeof(float));
			else
				for (size_t e = 0; e < TD; e++)
					acc[e] += ws->y[e];
			if (c->attn_res) {
				partial = true;
				if ((j + 1) % c->attn_res_block_size == 0) {
					nb++;
					partial = false;
				}
			}
		}
	}
	const float *hf = ws->res;
	if (c->attn_res) {
		uint32_t ns = 0;

		if (partial)
			nb++;
		for (uint32_t bi = 0; bi < nb; bi++)
			srcs[ns++] = blocks + bi * TD;
		haccel__cpu_attn_res_mix(ws->h, srcs, ns, m->w.ar_final_q, m->w.ar_final_norm, T, D,
					 c->rms_norm_eps);
		hf = ws->h;
	}
	/* Logits only for the rows asked for: the last token of an item. */
	for (uint32_t i = 0; i < n_items; i++) {
		uint32_t r = first[i] + items[i].n_tokens - 1;

		m->seqs[items[i].seq].n_tokens += items[i].n_tokens;
		if (!items[i].logits)
			continue;
		haccel__cpu_rmsnorm(ws->x, hf + (size_t)r * D, m->w.final_norm, 1, D, c->rms_norm_eps);
		haccel__cpu_matmul(items[i].logits, ws->x, m->w.lm_head, NULL, 1, c->vocab_size, D);
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Sampling                                                                 */

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ull;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

/* Whether id i comes before id j in the nucleus order: higher p first,
 * equal p by the smaller id (a total order: no p is NaN). */
static inline bool before(const float *p, uint32_t i, uint32_t j)
{
	return p[i] > p[j] || (p[i] == p[j] && i < j);
}

/* Sift h[k] down the heap h[0..n) whose root comes first. */
static void sift(const float *p, uint32_t *h, uint32_t n, uint32_t k)
{
	for (;;) {
		uint32_t c = 2 * k + 1;

		if (c >= n)
			return;
		if (c + 1 < n && before(p, h[c + 1], h[c]))
			c++;
		if (!before(p, h[c], h[k]))
			return;
		uint32_t t = h[k];

		h[k] = h[c];
		h[c] = t;
		k = c;
	}
}

int haccel_model_sample(struct haccel_model *m, const float *logits, float temperature,
			float top_p, uint64_t *rng, int32_t *token)
{
	uint32_t V, best = 0;

	if (!m || !logits || !rng || !token || !(temperature >= 0) || !(top_p > 0 && top_p <= 1))
		return -EINVAL;
	V = m->c.vocab_size;
	for (uint32_t i = 0; i < V; i++) {
		if (isnan(logits[i]) || logits[i] == INFINITY)
			return haccel__fail(m->ctx, -EINVAL, "sample: logit %u is %s", i,
					    isnan(logits[i]) ? "NaN" : "+inf");
		if (logits[i] > logits[best])
			best = i;
	}
	if (logits[best] == -INFINITY)
		return haccel__fail(m->ctx, -EINVAL, "sample: every logit is -inf");
	if (temperature == 0) {
		*token = (int32_t)best;
		return 0;
	}
	float *p = m->ws.probs;
	uint32_t *h = m->ws.order;
	double sum = 0, cut = 0, u;
	uint32_t n = 0, left = V;

	for (uint32_t i = 0; i < V; i++) {
		p[i] = expf((logits[i] - logits[best]) / temperature);
		sum += p[i];
		h[i] = i;
	}
	/* The nucleus in order without sorting the vocabulary (nor the
	 * allocation a library sort may make): a heap of every id, popped
	 * until the mass reaches top-p; the k-th popped id lands at h[V-1-k]. */
	for (uint32_t k = V / 2; k-- > 0;)
		sift(p, h, V, k);
	while (n < V && cut < top_p * sum) {
		uint32_t t = h[0];

		h[0] = h[--left];
		h[left] = t;
		sift(p, h, left, 0);
		cut += p[t];
		n++;
	}
	u = (double)(xorshift(rng) >> 11) * (1.0 / 9007199254740992.0) * cut;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t id = h[V - 1 - i];

		u -= p[id];
		if (u < 0 || i == n - 1) {
			*token = (int32_t)id;
			return 0;
		}
	}
	*token = (int32_t)best;
	return 0;
}
