// SPDX-License-Identifier: MIT
/*
 * The hybrid model on the GPU: the CPU reference's step (model.c) with the
 * CUDA ops of gpu/ops.h on device memory.
 *
 *  - Weights: the checkpoint is streamed to the GPU (the loader's GPU
 *    sink: pinned staging, copies overlapped with reads), then each tensor is
 *    put in one device arena at a 256-byte boundary: matrices as bf16 (the
 *    GEMM operands, cuBLASLt with fp32 accumulation), vectors as fp32.
 *  - Pools: the KV and state pools live in GPU memory (HACCEL_MEM_CUDA),
 *    the block tables on the host with a device mirror that each step
 *    patches with the entries it changed.
 *  - Workspace: carved once at open for max_step_tokens rows; a step
 *    writes its small inputs (token ids, positions, slots, segments,
 *    block-table patches) into one pinned host buffer, copies it to a
 *    fixed device buffer and runs the layers.
 *  - Decode steps (every item one token) run from a CUDA graph per batch
 *    bucket (1, 2, 4, ... up to max_step_tokens and 256): rows past the
 *    batch are padding that writes no KV (slot -1), reads a zeroed
 *    block-table row and updates a spare state slot. A bucket is run
 *    directly the first time (which also warms cuBLASLt's shape cache and
 *    its workspaces), captured the second, and replayed after.
 *  - In a DSA layer the indexer's inputs (its query projection; its key
 *    projection, norm, rotation and write; its head weights) run on two
 *    more streams forked from the main one and joined before the fused
 *    indexer, so a captured step keeps them as parallel graph branches.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "core/log.h"
#include "gpu/blas.h"
#include "gpu/cuda.h"
#include "gpu/mem.h"
#include "gpu/module.h"
#include "gpu/ops.h"
#include "model/format.h"
#include "model/model_priv.h"
#include "weights/weights.h"

#define N_BUF 12
#define N_BF 5
#define N_BUCKETS 9  /* 1 .. 256 */
#define ALIGN 256u

struct haccel__gmodel {
	struct haccel__gpu *g;
	struct haccel__cuda *cu;
	void *s2, *s3;                  /* graph branches (the context's streams) */
	void *ev_fork, *ev_join2, *ev_join3;

	uint64_t arena, arena_bytes;    /* weights */
	struct haccel__model_weights w; /* device addresses, as float * */

	uint64_t ws, ws_bytes;          /* workspace */
	uint64_t h, res, buf[N_BUF], bf[N_BF];
	uint64_t sel, n_sel, idx_scratch, mla_scratch, kda_scratch;
	uint64_t rows_x, rows_xb, logits;
	uint64_t in;                    /* the step's inputs (below) */
	uint64_t bt;                    /* block tables: (max_seqs + 1) rows */
	uint32_t pad_slot, pad_row, Rmax, max_upd;

	/* Inputs, at these offsets in `in` and in the pinned host copy. */
	uint8_t *in_host;
	uint64_t in_bytes;
	uint64_t o_tok, o_pos, o_slot, o_bt_row, o_seg_off, o_seg_slot, o_rows, o_upd;
	float *logits_host;             /* pinned, [Rmax][V] */

	struct {
		uint32_t runs;          /* direct runs so far (1: warm) */
		void *exec;
	} graph[N_BUCKETS];
	bool no_graphs;                 /* HACCEL_MODEL_NO_GRAPHS: direct launches */
};

static uint64_t up(uint64_t x)
{
	return (x + ALIGN - 1) / ALIGN * ALIGN;
}

static inline uint64_t F(const float *p)
{
	return (uint64_t)(uintptr_t)p;
}

/* ------------------------------------------------------------------------ */
/* Weights                                                                  */

static int src_type(uint32_t dtype)
{
	return dtype == HACCEL_DTYPE_F32 ? 0 : dtype == HACCEL_DTYPE_BF16 ? 1 : 2;
}

int haccel__gmodel_load(struct haccel_model *m, struct haccel_weights *wts,
			struct haccel__tensor_spec *spec, uint32_t n)
{
	struct haccel_ctx *ctx = m->ctx;
	struct haccel_weights_info info;
	struct haccel_load_params lp;
	struct haccel_gpu_sink_params sp;
	struct haccel_gpu_sink *sink = NULL;
	struct haccel__gmodel *gm;
	uint64_t raw_d = 0, off = 0;
	int ret;

	gm = calloc(1, sizeof(*gm));
	if (!gm)
		return -ENOMEM;
	m->gm = gm;
	ret = haccel__gpu_get(ctx, &gm->g);
	if (ret)
		return ret == -ENODEV || ret == -ENOSYS || (ret == -EIO && ctx->cuda && ctx->cuda->why[0]) ?
			       haccel__fail(ctx, ret, "model: device cuda: %s", ctx->cuda ? ctx->cuda->why : "no GPU") :
			       ret;
	gm->cu = gm->g->cu;
	haccel_weights_info(wts, &info);

	/* The arena: every tensor at a 256-byte boundary, in its GPU form. */
	for (uint32_t i = 0; i < n; i++)
		gm->arena_bytes += up(haccel__spec_elems(&spec[i]) * (spec[i].gemm ? 2 : 4));
	ret = haccel__gpu_mem_alloc(ctx, gm->arena_bytes, &gm->arena);
	if (!ret)
		ret = haccel__gpu_mem_alloc(ctx, info.dest_bytes, &raw_d);
	if (ret)
		goto out;

	/* Straight to the GPU: staging buffers registered with CUDA, copies
	 * overlapped with the next reads (the GPU sink). */
	haccel_gpu_sink_params_init(&sp);
	sp.dptr = raw_d;
	sp.bytes = info.dest_bytes ? info.dest_bytes : 1;
	ret = haccel_gpu_sink_create(ctx, &sp, &sink);
	if (ret)
		goto out;
	haccel_load_params_init(&lp);
	lp.flags = m->p.load_flags;
	lp.hostmem_flags = m->p.load_hostmem_flags;
	ret = haccel_load(wts, &lp, haccel_gpu_sink_sink(sink), &m->load);
	haccel_gpu_sink_destroy(sink);
	if (ret)
		goto out;
	m->weight_bytes = m->load.tensor_bytes;

	haccel__model_tensors(&m->c, &gm->w, spec, n);
	/* The conversions go on the context's stream: under its lock (the
	 * reads above do not hold it, so other models step meanwhile). */
	haccel__gpu_lock(gm->g);
	for (uint32_t i = 0; !ret && i < n; i++) {
		struct haccel_tensor_info t;
		uint32_t idx;
		uint64_t ne = haccel__spec_elems(&spec[i]);
		int dst = spec[i].gemm ? 1 : 0;

		haccel_weights_find(wts, spec[i].name, &idx);
		haccel_weights_tensor(wts, idx, &t);
		ret = haccel__cuda_convert(gm->g, NULL, gm->arena + off, dst, raw_d + t.dest_offset,
					   src_type(t.dtype), ne);
		*spec[i].bind = (float *)(uintptr_t)(gm->arena + off);
		off += up(ne * (dst ? 2 : 4));
	}
	if (m->c.tie_word_embeddings)
		gm->w.lm_head = gm->w.embed;
	if (!ret)
		ret = HACCEL__CU(ctx, gm->cu->StreamSynchronize(gm->g->stream));
	haccel__gpu_unlock(gm->g);
out:
	haccel__gpu_mem_free(ctx, raw_d, info.dest_bytes);
	return ret;
}

/* ------------------------------------------------------------------------ */
/* Setup and close                                                          */

static uint32_t umax(uint32_t a, uint32_t b)
{
	return a > b ? a : b;
}

int haccel__gmodel_setup(struct haccel_model *m)
{
	const struct haccel__model_config *c = &m->c;
	struct haccel__gmodel *gm = m->gm;
	struct haccel__cuda *cu = gm->cu;
	struct haccel_ctx *ctx = m->ctx;
	uint32_t Tm = m->p.max_step_tokens, D = c->hidden_size, w = m->ws.maxw, V = c->vocab_size;
	uint32_t nres = c->attn_res ? haccel__config_n_blocks(c) + 1 : 1;
	uint32_t topk = c->n_dsa ? c->dsa.index_topk : 0;
	uint64_t o = 0, ob = 0;
	int ret;

	gm->no_graphs = m->p.flags & HACCEL_MODEL_NO_GRAPHS;
	/* The device block table (a padding row too) is indexed in 32 bits,
	 * by the kernels and by the step's row updates. */
	/* The kernels number KV token slots (page * page_tokens + offset) in
	 * 32 bits too. */
	if (c->n_dsa && m->kv) {
		struct haccel_kv_pool_info ki;

		haccel_kv_pool_info(m->kv, &ki);
		if ((uint64_t)ki.n_pages * ki.page_tokens > UINT32_MAX)
			return haccel__fail(ctx, -EINVAL,
					    "model: device cuda: %llu KV pages of %u tokens number more token slots than the kernels' 2^32",
					    (unsigned long long)ki.n_pages, ki.page_tokens);
	}
	if (c->n_dsa && (uint64_t)(m->p.max_seqs + 1) * m->bt_stride > UINT32_MAX)
		return haccel__fail(ctx, -EINVAL,
				    "model: device cuda: %u sequences of %u KV pages each exceed the GPU block table's 2^32 entries; lower max_seqs or max_seq_tokens",
				    m->p.max_seqs, m->bt_stride);

	/* Logit rows: one per item; a decode bucket may pad up to a power of 2. */
	gm->Rmax = 1;
	while (gm->Rmax < m->p.max_seqs)
		gm->Rmax <<= 1;
	if (gm->Rmax > Tm)
		gm->Rmax = Tm;
	if (gm->Rmax < m->p.max_seqs)
		gm->Rmax = m->p.max_seqs;

#define CARVE(field, bytes) (gm->field = o, o += up(bytes))
	CARVE(h, (uint64_t)Tm * D * 4);
	CARVE(res, (uint64_t)nres * Tm * D * 4);
	for (int i = 0; i < N_BUF; i++)
		CARVE(buf[i], (uint64_t)Tm * w * 4);
	for (int i = 0; i < N_BF; i++)
		CARVE(bf[i], (uint64_t)Tm * w * 2);
	CARVE(rows_x, (uint64_t)gm->Rmax * D * 4);
	CARVE(rows_xb, (uint64_t)gm->Rmax * D * 2);
	CARVE(logits, (uint64_t)gm->Rmax * V * 4);
	if (c->n_dsa) {
		const struct haccel__dsa_config *d = &c->dsa;

		CARVE(sel, (uint64_t)Tm * topk * 4);
		CARVE(n_sel, (uint64_t)Tm * 4);
		CARVE(idx_scratch, haccel__cuda_indexer_scratch(Tm, m->p.max_seq_tokens, topk));
		CARVE(mla_scratch, haccel__cuda_sparse_mla_scratch_gpu(gm->g, Tm, d->num_heads,
								       topk));
		CARVE(bt, (uint64_t)(m->p.max_seqs + 1) * m->bt_stride * 4);
		gm->pad_row = m->p.max_seqs;
	}
	if (c->n_kda) {
		const struct haccel__kda_config *k = &c->kda;

		CARVE(kda_scratch, haccel__cuda_kda_chunked_scratch(Tm, k->num_heads, k->head_k_dim,
								     k->head_v_dim, Tm));
	}
	/* Inputs: token ids, positions, KV slots, block-table rows; segments;
	 * logit rows; block-table patches (count, then index/value pairs). */
	gm->max_upd = Tm / (m->page_tokens ? m->page_tokens : 1) + 2 * umax(Tm, m->p.max_seqs) + 2;
#define IN(field, bytes) (gm->field = ob, ob += up(bytes))
	IN(o_tok, (uint64_t)Tm * 4);
	IN(o_pos, (uint64_t)Tm * 4);
	IN(o_slot, (uint64_t)Tm * 8);
	IN(o_bt_row, (uint64_t)Tm * 4);
	IN(o_seg_off, (uint64_t)(Tm + 1) * 4);
	IN(o_seg_slot, (uint64_t)Tm * 4);
	IN(o_rows, (uint64_t)gm->Rmax * 4);
	IN(o_upd, (uint64_t)(1 + 2 * gm->max_upd) * 4);
#undef IN
	gm->in_bytes = ob;
	CARVE(in, ob);
#undef CARVE
	gm->ws_bytes = o;
	ret = haccel__gpu_mem_alloc(ctx, gm->ws_bytes, &gm->ws);
	if (ret)
		return ret;
	/* Offsets become addresses. */
	uint64_t *fields[] = { &gm->h, &gm->res, &gm->rows_x, &gm->rows_xb,
			       &gm->logits, &gm->in };
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		*fields[i] += gm->ws;
	for (int i = 0; i < N_BUF; i++)
		gm->buf[i] += gm->ws;
	for (int i = 0; i < N_BF; i++)
		gm->bf[i] += gm->ws;
	if (c->n_dsa) {
		gm->sel += gm->ws;
		gm->n_sel += gm->ws;
		gm->idx_scratch += gm->ws;
		gm->mla_scratch += gm->ws;
		gm->bt += gm->ws;
	}
	if (c->n_kda)
		gm->kda_scratch += gm->ws;

	/* Pinned host memory for the inputs and the logits. */
	if (posix_memalign((void **)&gm->in_host, 4096, gm->in_bytes) ||
	    posix_memalign((void **)&gm->logits_host, 4096, (size_t)gm->Rmax * V * 4))
		return haccel__fail(ctx, -ENOMEM, "model: cannot allocate the step's host buffers");
	memset(gm->in_host, 0, gm->in_bytes);
	ret = HACCEL__CU(ctx, cu->MemHostRegister(gm->in_host, gm->in_bytes, 0));
	if (!ret)
		ret = HACCEL__CU(ctx, cu->MemHostRegister(gm->logits_host, (size_t)gm->Rmax * V * 4, 0));
	/* the context's branch streams, the same for every model */
	if (!ret)
		ret = haccel__gpu_side_streams(gm->g, &gm->s2, &gm->s3);
	if (!ret)
		ret = HACCEL__CU(ctx, cu->EventCreate(&gm->ev_fork, HACCEL__CU_EVENT_DISABLE_TIMING));
	if (!ret)
		ret = HACCEL__CU(ctx, cu->EventCreate(&gm->ev_join2, HACCEL__CU_EVENT_DISABLE_TIMING));
	if (!ret)
		ret = HACCEL__CU(ctx, cu->EventCreate(&gm->ev_join3, HACCEL__CU_EVENT_DISABLE_TIMING));
	if (ret)
		return ret;
	if (m->st) {
		ret = haccel_state_slot_alloc(m->st, 0, &gm->pad_slot);
		if (ret)
			return haccel__fail(ctx, ret, "model: no spare state slot for padded rows");
	}
	haccel__gpu_lock(gm->g);
	ret = HACCEL__CU(ctx, cu->StreamSynchronize(gm->g->stream));
	haccel__gpu_unlock(gm->g);
	if (ret)
		return ret;
	haccel__info(ctx, "model: cuda: weights %.1f MiB, workspace %.1f MiB, graphs %s",
		     gm->arena_bytes / 1048576.0, gm->ws_bytes / 1048576.0,
		     gm->no_graphs ? "off" : "per decode bucket");
	return 0;
}

void haccel__gmodel_close(struct haccel_model *m)
{
	struct haccel__gmodel *gm = m->gm;
	struct haccel__cuda *cu;

	if (!gm)
		return;
	cu = gm->cu;
	haccel__gpu_lock(gm->g);
	if (cu) {
		cu->CtxSynchronize();
		for (int i = 0; i < N_BUCKETS; i++)
			if (gm->graph[i].exec)
				cu->GraphExecDestroy(gm->graph[i].exec);
		if (gm->ev_fork)
			cu->EventDestroy(gm->ev_fork);
		if (gm->ev_join2)
			cu->EventDestroy(gm->ev_join2);
		if (gm->ev_join3)
			cu->EventDestroy(gm->ev_join3);
		/* (s2 and s3 are the context's: haccel__gpu_side_streams) */
		if (gm->in_host)
			cu->MemHostUnregister(gm->in_host);
		if (gm->logits_host)
			cu->MemHostUnregister(gm->logits_host);
	}
	haccel__gpu_unlock(gm->g);
	free(gm->in_host);
	free(gm->logits_host);
	haccel__gpu_mem_free(m->ctx, gm->ws, gm->ws_bytes);
	haccel__gpu_mem_free(m->ctx, gm->arena, gm->arena_bytes);
	free(gm);
	m->gm = NULL;
}

/* ------------------------------------------------------------------------ */
/* Layers                                                                   */

/* The arguments of one forward pass over T rows in n_seg segments. */
struct fwd {
	uint32_t T, n_seg, R;   /* rows, segments, logit rows */
	uint32_t max_pos;       /* the largest position (indexer bound) */
	bool decode;            /* one token per segment: the recurrent kernel */
	/* Where a sublayer's output projection goes: written to out, or
	 * added to it (the residual stream or its current block). */
	uint64_t out;
	bool accum;
};

#define TRY(call)                  \
	do {                       \
		int r_ = (call);   \
		if (r_)            \
			return r_; \
	} while (0)

static uint64_t IN(const struct haccel__gmodel *gm, uint64_t off)
{
	return gm->in + off;
}

static int to_bf(struct haccel__gmodel *gm, void *s, uint64_t dst, uint64_t src, size_t n)
{
	return haccel__cuda_to_bf16(gm->g, s, dst, src, n);
}

/*
 * y_i = x W_i^T for n weights of one shape [N][K] (bf16) read by the same
 * x: one batched GEMM (x shared, stride 0) when the weights lie back to
 * back in the arena (spec order, sizes multiples of its 256-byte
 * alignment) and the outputs are equally spaced; else n GEMMs. At decode
 * sizes the batch fills the GPU better than each GEMM alone.
 */
static int linear_n(struct haccel__gmodel *gm, uint64_t const *y, uint64_t x, int64_t ldx,
		    uint64_t const *W, uint32_t n, uint32_t T, uint32_t N, uint32_t K)
{
	uint64_t wb = (uint64_t)N * K * 2, ys = n > 1 ? y[1] - y[0] : 0;
	bool one = n > 1 && ys % 4 == 0 && y[1] > y[0];

	for (uint32_t i = 1; one && i < n; i++)
		one = W[i] == W[0] + i * wb && y[i] == y[0] + i * ys;
	if (one) {
		struct haccel__gemm op = {
			.M = T, .N = N, .K = K, .A = x, .B = W[0], .C = y[0],
			.lda = ldx, .ldb = K, .ldc = N,
			.stride_a = 0, .stride_b = (int64_t)N * K, .stride_c = (int64_t)(ys / 4),
			.batch = n, .trans_b = 1,
		};
		int ret = haccel__gemm_run(gm->g, NULL, &op);

		if (ret != -ENOTSUP)
			return ret;
	}
	for (uint32_t i = 0; i < n; i++)
		TRY(haccel__cuda_linear(gm->g, NULL, y[i], x, ldx, W[i], 0, T, N, K));
	return 0;
}

/* A sublayer's output projection x[T][K] . W[N][K]^T into f->out (added
 * to it with f->accum), in the GEMM's epilogue. */
static int out_proj(struct haccel__gmodel *gm, const struct fwd *f, uint64_t x, uint32_t K,
		    uint64_t W, uint32_t N)
{
	struct haccel__gemm op = {
		.M = f->T, .N = N, .K = K, .A = x, .B = W, .C = f->out,
		.lda = K, .ldb = K, .ldc = N, .batch = 1, .trans_b = 1, .accumulate = f->accum,
	};

	return haccel__gemm_run(gm->g, NULL, &op);
}

/* Stream s continues from where the main stream stands (the fork of a
 * branch: a parallel branch of the captured graph). */
static int branch_from_main(struct haccel_model *m, void *s)
{
	struct haccel__gmodel *gm = m->gm;
	struct haccel__cuda *cu = gm->cu;

	TRY(HACCEL__CU(m->ctx, cu->EventRecord(gm->ev_fork, gm->g->stream)));
	return HACCEL__CU(m->ctx, cu->StreamWaitEvent(s, gm->ev_fork, 0));
}

/* Stream `to` waits for what `from` has queued (through event ev). */
static int join(struct haccel_model *m, void *to, void *from, void *ev)
{
	struct haccel__cuda *cu = m->gm->cu;

	TRY(HACCEL__CU(m->ctx, cu->EventRecord(ev, from)));
	return HACCEL__CU(m->ctx, cu->StreamWaitEvent(to ? to : m->gm->g->stream, ev, 0));
}

static int kda_layer(struct haccel_model *m, uint32_t li, const struct fwd *f)
{
	const struct haccel__kda_config *k = &m->c.kda;
	struct haccel__gmodel *gm = m->gm;
	const struct haccel__kda_weights *W = &gm->w.layer[li].kda;
	struct haccel__gpu *g = gm->g;
	uint32_t D = m->c.hidden_size, H = k->num_heads, K = k->head_k_dim, V = k->head_v_dim;
	uint32_t HK = H * K, HV = H * V, Wc = k->conv_size, l = m->sub[li], T = f->T;
	uint64_t *b = gm->buf, xb = gm->bf[0], tb = gm->bf[1], ob = gm->bf[2];
	uint64_t q = b[0], kk = b[1], v = b[2], qc = b[3], kc = b[4], vc = b[5], gt = b[6];
	uint64_t tmp = b[7], beta = b[8], o = b[9], og = b[10];
	void *s2 = gm->s2;
	uint64_t base = (uint64_t)(uintptr_t)m->sl.slots_base + (uint64_t)l * m->sl.layer_bytes;
	uint64_t stride = m->sl.slot_bytes;
	uint64_t so = IN(gm, gm->o_seg_off), ss = IN(gm, gm->o_seg_slot);

	/* q, k and v in one GEMM and one convolution launch when v has
	 * their shape (HV = HK), else each on its own. */
	uint32_t nq = HK == HV ? 3 : 1;
	uint64_t ys[3] = { q, kk, v }, ws[3] = { F(W->q), F(W->k), F(W->v) };
	uint64_t co[3] = { qc, kc, vc }, cw[3] = { F(W->q_conv), F(W->k_conv), F(W->v_conv) };
	uint64_t ct[3] = { base + m->sl.conv_q_offset, base + m->sl.conv_k_offset,
			   base + m->sl.conv_v_offset };

	/*
	 * At decode sizes the layer's projections of x (q, k, v, f_a, beta,
	 * and g_a when the output gate is low-rank) are one launch of the
	 * few-row kernel where it takes them (haccel__gemm_group), f_a's and
	 * g_a's outputs side by side in tb, in bf16 for f_b and g_b, which are
	 * one more (up to 64 rows: their K, the ranks, is short).
	 * Else each GEMM on its own, q, k and v batched where they can be.
	 * The gates (what follows q/k/v's GEMMs up to gt, beta and og) run
	 * on branch s2, beside q/k/v's GEMMs and convolution on the main
	 * stream; the recurrence joins the two.
	 */
	uint32_t rf = k->gate_rank, rg = k->output_gate_low_rank ? k->output_gate_rank : 0;
	uint32_t ld = rf + rg <= m->ws.maxw ? rf + rg : rf, ng = ld > rf ? 6 : 5;
	struct haccel__gemm gi[6];
	const uint64_t gw[6] = { ws[0], ws[1], ws[2], F(W->f_a), F(W->b), F(W->g_a) };
	const uint64_t gy[6] = { q, kk, v, tb, beta, tb + (uint64_t)rf * 2 };
	const uint32_t gn[6] = { HK, HK, HV, rf, H, rg }, gl[6] = { HK, HK, HV, ld, H, ld };

	for (uint32_t i = 0; i < ng; i++)
		gi[i] = (struct haccel__gemm){ .M = T, .N = gn[i], .K = D, .A = xb, .B = gw[i],
					       .C = gy[i], .lda = D, .ldb = D, .ldc = gl[i],
					       .batch = 1, .trans_b = 1, .c_bf16 = i == 3 || i == 5 };
	/* All of them, else (weights past the kernel's limit: q, k and v
	 * above 8 rows) the small ones, on the branch. */
	int ret = haccel__gemm_group(g, NULL, gi, ng);
	bool qkv = !ret;

	if (ret && ret != -ENOTSUP)
		return ret;
	TRY(branch_from_main(m, s2));
	ret = qkv ? 0 : haccel__gemm_group(g, s2, gi + 3, ng - 3);
	if (ret && ret != -ENOTSUP)
		return ret;
	bool grouped = !ret, ga = grouped && ng == 6;

	if (!grouped) {
		TRY(haccel__cuda_linear(g, s2, tmp, xb, D, F(W->f_a), 0, T, rf, D));
		TRY(haccel__cuda_linear(g, s2, beta, xb, D, F(W->b), 0, T, H, D));
		TRY(to_bf(gm, s2, tb, tmp, (size_t)T * rf));
	}
	/* f_b, and g_b with it when g_a came in the group. */
	struct haccel__gemm gb[2] = {
		{ .M = T, .N = HK, .K = rf, .A = tb, .B = F(W->f_b), .C = gt, .lda = ga ? ld : rf,
		  .ldb = rf, .ldc = HK, .batch = 1, .trans_b = 1 },
		{ .M = T, .N = HV, .K = rg, .A = tb + (uint64_t)rf * 2, .B = F(W->g_b), .C = og,
		  .bias = F(W->g_b_bias), .lda = ld, .ldb = rg, .ldc = HV, .batch = 1,
		  .trans_b = 1 },
	};

	ret = ga ? haccel__gemm_group(g, s2, gb, 2) : -ENOTSUP;
	if (ret && ret != -ENOTSUP)
		return ret;
	for (uint32_t i = 0; ret && i < (ga ? 2u : 1u); i++)
		TRY(haccel__gemm_run(g, s2, &gb[i]));
	if (rg && !ga) {
		TRY(haccel__cuda_linear(g, s2, tmp, xb, D, F(W->g_a), 0, T, rg, D));
		TRY(to_bf(gm, s2, tb, tmp, (size_t)T * rg));
		TRY(haccel__cuda_linear(g, s2, og, tb, rg, F(W->g_b), F(W->g_b_bias), T, HV, rg));
	} else if (!rg) {
		TRY(haccel__cuda_linear(g, s2, og, xb, D, F(W->g), 0, T, HV, D));
	}

	if (!qkv) {
		TRY(linear_n(gm, ys, xb, D, ws, nq, T, HK, D));
		for (uint32_t i = nq; i < 3; i++)
			TRY(haccel__cuda_linear(g, NULL, ys[i], xb, D, ws[i], 0, T,
						i == 2 ? HV : HK, D));
	}
	TRY(haccel__cuda_kda_conv_n(g, NULL, nq, co, ys, cw, ct, T, HK, Wc, f->n_seg, so, ss,
				    stride));
	for (uint32_t i = nq; i < 3; i++)
		TRY(haccel__cuda_kda_conv(g, NULL, co[i], ys[i], T, i == 2 ? HV : HK, cw[i], Wc,
					  f->n_seg, so, ss, ct[i], stride));
	TRY(join(m, NULL, s2, gm->ev_join2));
	/* Decode: the gate and prep inside the recurrence (the same bits). */
	if (f->decode) {
		TRY(haccel__cuda_kda_recurrent_raw(g, NULL, qc, kc, vc, gt, beta, o, T, H, K, V,
						   f->n_seg, so, ss, base + m->sl.state_offset,
						   stride, F(W->A_log), F(W->dt_bias),
						   (int)k->gate_form, k->gate_lower_bound));
	} else {
		TRY(haccel__cuda_kda_gate(g, NULL, gt, gt, T, H, K, F(W->A_log), F(W->dt_bias),
					  (int)k->gate_form, k->gate_lower_bound));
		TRY(haccel__cuda_kda_prep(g, NULL, qc, kc, beta, T, H, K));
		TRY(haccel__cuda_kda_chunked(g, NULL, qc, kc, vc, gt, beta, o, T, H, K, V, f->n_seg,
					     so, ss, base + m->sl.state_offset, stride,
					     gm->kda_scratch));
	}
	TRY(haccel__cuda_gated_rmsnorm_bf16(g, NULL, ob, o, og, F(W->o_norm), T, H, V,
					    m->c.rms_norm_eps));
	return out_proj(gm, f, ob, HV, F(W->o), D);
}

static int dsa_layer(struct haccel_model *m, uint32_t li, const struct fwd *f)
{
	const struct haccel__dsa_config *d = &m->c.dsa;
	struct haccel__gmodel *gm = m->gm;
	const struct haccel__dsa_weights *W = &gm->w.layer[li].dsa;
	struct haccel__gpu *g = gm->g;
	uint32_t D = m->c.hidden_size, H = d->num_heads, dn = d->qk_nope_head_dim;
	uint32_t dr = d->qk_rope_head_dim, dv = d->v_head_dim, R = d->kv_lora_rank;
	uint32_t IH = d->index_n_heads, ID = d->index_head_dim, l = m->sub[li], T = f->T;
	uint32_t qh = dn + dr, topk = d->index_topk, Rq = d->q_lora_rank;
	uint64_t *b = gm->buf;
	uint64_t cq = b[0], q = b[1], kva = b[2], lat = b[3], kpe = b[4], qlat = b[5];
	uint64_t olat = b[6], qpe = b[7], iq = b[8], t7 = b[9], iw = b[11];
	uint64_t xb = gm->bf[0], cqb = gm->bf[1], qb = gm->bf[2], olb = gm->bf[3], ob = gm->bf[4];
	uint64_t pos = IN(gm, gm->o_pos), slots = IN(gm, gm->o_slot), btr = IN(gm, gm->o_bt_row);
	uint64_t kv_reg = (uint64_t)(uintptr_t)m->kv_reg[l].base;
	uint64_t ik_reg = (uint64_t)(uintptr_t)m->ik_reg[l].base;
	void *s2 = gm->s2, *s3 = gm->s3;

	/* Branch s3 from the layer's input: the indexer's keys and head
	 * weights (they need neither latent). */
	TRY(branch_from_main(m, s3));
	/* The index keys' and the head weights' projections, one launch
	 * where the few-row kernel takes both. */
	struct haccel__gemm kw[2] = {
		{ .M = T, .N = ID, .K = D, .A = xb, .B = F(W->ik), .C = t7, .lda = D, .ldb = D,
		  .ldc = ID, .batch = 1, .trans_b = 1 },
		{ .M = T, .N = IH, .K = D, .A = xb, .B = F(W->iw), .C = iw, .lda = D, .ldb = D,
		  .ldc = IH, .batch = 1, .trans_b = 1 },
	};
	int ret = haccel__gemm_group(g, s3, kw, 2);

	if (ret && ret != -ENOTSUP)
		return ret;
	if (ret) {
		TRY(haccel__gemm_run(g, s3, &kw[0]));
		TRY(haccel__gemm_run(g, s3, &kw[1]));
	}
	/* The keys' norm, rope, transform and cache write, and the head
	 * weights' scale, in one launch. */
	TRY(haccel__cuda_index_k_fused(g, s3, ik_reg, slots, t7, F(W->ik_norm_w), F(W->ik_norm_b),
				       1e-6f, T, d->index_rope_dim, pos, d->rope_theta,
				       (int)d->index_rope_layout, iw, IH,
				       1.0f / sqrtf((float)IH) / sqrtf((float)ID)));
	/* The q latent, shared by attention and the indexer, and this step's
	 * KV latent: one launch where the few-row kernel takes both. */
	struct haccel__gemm qk[2] = {
		{ .M = T, .N = Rq, .K = D, .A = xb, .B = F(W->q_a), .C = cq, .lda = D, .ldb = D,
		  .ldc = Rq, .batch = 1, .trans_b = 1 },
		{ .M = T, .N = R + dr, .K = D, .A = xb, .B = F(W->kv_a), .C = kva, .lda = D,
		  .ldb = D, .ldc = R + dr, .batch = 1, .trans_b = 1 },
	};
	ret = haccel__gemm_group(g, NULL, qk, 2);
	bool kv_done = !ret;

	if (ret && ret != -ENOTSUP)
		return ret;
	if (ret)
		TRY(haccel__gemm_run(g, NULL, &qk[0]));
	TRY(haccel__cuda_rmsnorm_bf16(g, NULL, cqb, cq, F(W->q_a_norm), T, Rq, m->c.rms_norm_eps));

	/* Branch s2: the indexer's queries, then (joining s3) the fused
	 * indexer, beside attention's queries and this step's KV on the main
	 * stream. The queries' rope and Hadamard transform are the
	 * indexer's, as it prepares them (one launch fewer on this path). */
	TRY(branch_from_main(m, s2));
	TRY(haccel__cuda_linear(g, s2, iq, cqb, Rq, F(W->iq_b), 0, T, IH * ID, Rq));

	TRY(join(m, s2, s3, gm->ev_join3));
	const struct haccel__ix_rope ixr = { .dim = d->index_rope_dim, .theta = d->rope_theta,
					     .layout = (int)d->index_rope_layout };
	TRY(haccel__cuda_indexer_topk(g, s2, gm->sel, gm->n_sel, iq, iw, T, IH, pos, btr, ik_reg,
				      gm->bt, m->bt_stride, m->page_tokens, topk, f->max_pos,
				      gm->idx_scratch, &ixr));

	/* Attention's queries and this step's KV, on the main stream. */
	TRY(haccel__cuda_linear(g, NULL, q, cqb, Rq, F(W->q_b), 0, T, H * qh, Rq));
	if (!kv_done)
		TRY(haccel__gemm_run(g, NULL, &qk[1]));
	/* the KV latent normed and the rope key, out of kva in one launch */
	TRY(haccel__cuda_rmsnorm_split(g, NULL, lat, kva, R + dr, F(W->kv_a_norm), T, R,
				       m->c.rms_norm_eps, kpe, dr));
	/* the queries' rope parts and the key's, one launch */
	if (dr)
		TRY(haccel__cuda_rope2(g, NULL, q + (uint64_t)dn * 4, H, (size_t)H * qh, qh, kpe, 1,
				       dr, dr, T, dr, pos, d->rope_theta, (int)d->rope_layout));
	TRY(haccel__cuda_mla_kv_write(g, NULL, kv_reg, slots, lat, kpe, T, dr));
	/* Absorbed queries: q_lat[t][h] = W_UK[h]^T q_nope[t][h], one GEMM per head
	 * (the queries in bf16, and their rope parts to qpe, in one launch). */
	TRY(haccel__cuda_to_bf16_tail(g, NULL, qb, q, (size_t)T * H, qh, dn, qpe));
	struct haccel__gemm uk = {
		.M = T, .N = R, .K = dn, .A = qb, .B = F(W->kv_b), .C = qlat,
		.lda = (int64_t)H * qh, .ldb = R, .ldc = (int64_t)H * R,
		.stride_a = qh, .stride_b = (int64_t)(dn + dv) * R, .stride_c = R,
		.batch = H, .trans_b = 0,
	};
	TRY(haccel__gemm_run(g, NULL, &uk));

	/* Join the indexer's selection, then sparse attention. */
	TRY(join(m, NULL, s2, gm->ev_join2));
	/* o_lat in bf16 (the value GEMM's input), from the kernel that merges
	 * the splits. */
	TRY(haccel__cuda_sparse_mla(g, NULL, olat, olb, qlat, qpe, T, H, dr, gm->sel, gm->n_sel,
				    topk, btr, kv_reg, gm->bt, m->bt_stride, m->page_tokens,
				    1.0f / sqrtf((float)qh), gm->mla_scratch));
	/* Values: o[t][h] = W_UV[h] o_lat[t][h], written in bf16 by the GEMM
	 * (the output projection's input), then the output projection. */
	struct haccel__gemm uv = {
		.M = T, .N = dv, .K = R, .A = olb, .B = F(W->kv_b) + (uint64_t)dn * R * 2,
		.C = ob, .lda = (int64_t)H * R, .ldb = R, .ldc = (int64_t)H * dv,
		.stride_a = R, .stride_b = (int64_t)(dn + dv) * R, .stride_c = dv,
		.batch = H, .trans_b = 1, .c_bf16 = 1,
	};
	TRY(haccel__gemm_run(g, NULL, &uv));
	return out_proj(gm, f, ob, H * dv, F(W->o), D);
}

static int mlp(struct haccel_model *m, uint32_t li, const struct fwd *f)
{
	struct haccel__gmodel *gm = m->gm;
	const struct haccel__layer_weights *L = &gm->w.layer[li];
	struct haccel__gpu *g = gm->g;
	uint32_t D = m->c.hidden_size, I = m->c.intermediate_size, T = f->T;
	uint64_t gg = gm->buf[0], u = gm->buf[1], xb = gm->bf[0], gb = gm->bf[1];

	uint64_t ys[2] = { gg, u }, ws[2] = { F(L->gate), F(L->up) };

	TRY(linear_n(gm, ys, xb, D, ws, 2, T, I, D));
	TRY(haccel__cuda_swiglu_bf16(g, NULL, gb, gg, u, (size_t)T * I));
	return out_proj(gm, f, gb, I, F(L->down), D);
}

/* Every layer, then the logits of the R rows listed in the inputs. */
static int forward(struct haccel_model *m, const struct fwd *f)
{
	const struct haccel__model_config *c = &m->c;
	struct haccel__gmodel *gm = m->gm;
	struct haccel__gpu *g = gm->g;
	uint32_t D = c->hidden_size, T = f->T;
	uint64_t TD = (uint64_t)T * D, blocks = gm->res;
	uint32_t nb = 0;
	bool partial = false;

	if (m->kv)
		TRY(haccel__cuda_scatter_u32(g, NULL, gm->bt, IN(gm, gm->o_upd)));
	TRY(haccel__cuda_embed(g, NULL, gm->res, F(gm->w.embed), IN(gm, gm->o_tok), T, D));
	if (c->attn_res)
		nb = 1;
	for (uint32_t li = 0; li < c->num_layers; li++) {
		const struct haccel__layer_weights *L = &gm->w.layer[li];

		for (uint32_t sub = 0; sub < 2; sub++) {
			uint32_t j = 2 * li + sub;

			/* The layer's input, in bf16 for its GEMMs (bf[0]): the
			 * mix and the norm in one kernel. */
			if (c->attn_res)
				TRY(haccel__cuda_attn_res_mix_norm(
					g, NULL, gm->bf[0], gm->h, blocks, TD, nb + (partial ? 1 : 0),
					F(sub ? L->ar_mlp_q : L->ar_mixer_q),
					F(sub ? L->ar_mlp_norm : L->ar_mixer_norm),
					F(sub ? L->post_norm : L->in_norm), T, D, c->rms_norm_eps));
			else
				TRY(haccel__cuda_rmsnorm_bf16(g, NULL, gm->bf[0], gm->res,
							      F(sub ? L->post_norm : L->in_norm), T,
							      D, c->rms_norm_eps));
			/* The output projection starts block nb or adds to it
			 * (to the residual stream without attention residuals). */
			struct fwd fl = *f;

			fl.out = c->attn_res ? blocks + (uint64_t)nb * TD * 4 : gm->res;
			fl.accum = !c->attn_res || partial;
			if (sub)
				TRY(mlp(m, li, &fl));
			else if (c->layer_type[li] == HACCEL__LAYER_KDA)
				TRY(kda_layer(m, li, &fl));
			else
				TRY(dsa_layer(m, li, &fl));
			if (c->attn_res) {
				partial = true;
				if ((j + 1) % c->attn_res_block_size == 0) {
					nb++;
					partial = false;
				}
			}
		}
	}
	uint64_t hf = gm->res;
	if (c->attn_res) {
		if (partial)
			nb++;
		TRY(haccel__cuda_attn_res_mix(g, NULL, gm->h, blocks, TD, nb, F(gm->w.ar_final_q),
					      F(gm->w.ar_final_norm), T, D, c->rms_norm_eps));
		hf = gm->h;
	}
	if (!f->R)
		return 0;
	TRY(haccel__cuda_gather_rows(g, NULL, gm->rows_x, hf, IN(gm, gm->o_rows), f->R, D));
	TRY(haccel__cuda_rmsnorm_bf16(g, NULL, gm->rows_xb, gm->rows_x, F(gm->w.final_norm), f->R,
				      D, c->rms_norm_eps));
	return haccel__cuda_linear(g, NULL, gm->logits, gm->rows_xb, D, F(gm->w.lm_head), 0, f->R,
				   c->vocab_size, D);
}

/* ------------------------------------------------------------------------ */
/* Step                                                                     */

int haccel__gmodel_sync_row(struct haccel_model *m, uint32_t kv_seq)
{
	struct haccel__gmodel *gm = m->gm;
	uint64_t off = (uint64_t)kv_seq * m->bt_stride * 4;
	/* On the model's stream, then waited for: cuMemcpyHtoD from pageable
	 * memory may return before its DMA lands, unordered with the kernels
	 * of a non-blocking stream. */
	const uint32_t *row = m->block_tables + (size_t)kv_seq * m->bt_stride;
	int ret;

	haccel__gpu_lock(gm->g);
	ret = HACCEL__CU(m->ctx, gm->cu->MemcpyHtoDAsync(gm->bt + off, row, (size_t)m->bt_stride * 4,
							 gm->g->stream));
	if (!ret)
		ret = HACCEL__CU(m->ctx, gm->cu->StreamSynchronize(gm->g->stream));
	haccel__gpu_unlock(gm->g);
	return ret;
}

/*
 * Fill the host inputs for T_run rows in n_seg segments (rows past T and
 * segments past n_items are padding) and the block-table patches.
 */
static uint32_t fill_inputs(struct haccel_model *m, const struct haccel_step_item *items,
			    uint32_t n_items, uint32_t T, const uint32_t *first, uint32_t T_run,
			    uint32_t n_seg, uint32_t R)
{
	struct haccel__gmodel *gm = m->gm;
	uint8_t *in = gm->in_host;
	int32_t *tok = (int32_t *)(in + gm->o_tok);
	uint32_t *pos = (uint32_t *)(in + gm->o_pos), *btr = (uint32_t *)(in + gm->o_bt_row);
	int64_t *slot = (int64_t *)(in + gm->o_slot);
	uint32_t *so = (uint32_t *)(in + gm->o_seg_off), *ss = (uint32_t *)(in + gm->o_seg_slot);
	uint32_t *rows = (uint32_t *)(in + gm->o_rows), *upd = (uint32_t *)(in + gm->o_upd);
	uint32_t max_pos = 0, nu = 0;

	for (uint32_t i = 0; i < n_items; i++) {
		const struct mseq *s = &m->seqs[items[i].seq];
		uint32_t f0 = first[i], n = items[i].n_tokens;

		so[i] = f0;
		ss[i] = m->st ? s->slot : 0;
		rows[i] = f0 + n - 1;
		for (uint32_t t = 0; t < n; t++) {
			tok[f0 + t] = m->ws.tok[f0 + t];
			pos[f0 + t] = m->ws.pos[f0 + t];
			slot[f0 + t] = m->kv ? m->ws.slot[f0 + t] : -1;
			btr[f0 + t] = s->kv_seq;
			if (pos[f0 + t] > max_pos)
				max_pos = pos[f0 + t];
		}
		if (m->kv) {
			/* The pages this step wrote into, the partial one (which a
			 * copy on write may have replaced) included. */
			uint32_t pt = m->page_tokens, p0 = s->n_tokens / pt;
			uint32_t p1 = (s->n_tokens + n + pt - 1) / pt;
			const uint32_t *row = m->block_tables + (size_t)s->kv_seq * m->bt_stride;

			for (uint32_t p = p0; p < p1 && nu < gm->max_upd; p++, nu++) {
				upd[1 + 2 * nu] = s->kv_seq * m->bt_stride + p;
				upd[2 + 2 * nu] = row[p];
			}
		}
	}
	upd[0] = nu;
	so[n_items] = T;
	for (uint32_t t = T; t < T_run; t++) {
		tok[t] = 0;
		pos[t] = 0;
		slot[t] = -1;
		btr[t] = gm->pad_row;
	}
	for (uint32_t i = n_items; i < n_seg; i++) {
		so[i + 1] = i + 1;
		ss[i] = gm->pad_slot;
	}
	for (uint32_t r = n_items; r < R; r++)
		rows[r] = r < T_run ? r : 0;
	return max_pos;
}

static int bucket_of(uint32_t n, uint32_t *size)
{
	int b = 0;

	*size = 1;
	while (*size < n) {
		*size <<= 1;
		b++;
	}
	return b;
}

static int gmodel_step(struct haccel_model *m, const struct haccel_step_item *items,
		       uint32_t n_items, uint32_t T, const uint32_t *first)
{
	struct haccel__gmodel *gm = m->gm;
	struct haccel__cuda *cu = gm->cu;
	struct haccel_ctx *ctx = m->ctx;
	void *st = gm->g->stream;
	bool decode = T == n_items;
	uint32_t B = 0;
	int bi = decode ? bucket_of(n_items, &B) : -1;
	bool graph = decode && !gm->no_graphs && bi < N_BUCKETS && B <= m->p.max_step_tokens &&
		     B <= gm->Rmax;
	struct fwd f = {
		.T = graph ? B : T,
		.n_seg = graph ? B : n_items,
		.R = graph ? B : n_items,
		.decode = decode,
	};
	int ret;

	uint32_t mp = fill_inputs(m, items, n_items, T, first, f.T, f.n_seg, f.R);
	f.max_pos = graph ? m->p.max_seq_tokens - 1 : mp;
	ret = HACCEL__CU(ctx, cu->MemcpyHtoDAsync(gm->in, gm->in_host, gm->in_bytes, st));
	if (ret)
		goto fail;
	if (!graph || gm->graph[bi].runs == 0) {
		ret = forward(m, &f);
		if (graph && !ret)
			gm->graph[bi].runs = 1;
	} else {
		if (!gm->graph[bi].exec) {
			void *gr = NULL;

			/* Thread-local: other threads' calls (a weights load's
			 * registrations, say) stay legal meanwhile; their work
			 * on this context's streams waits for the lock. */
			ret = HACCEL__CU(ctx, cu->StreamBeginCapture(
						      st, HACCEL__CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
			if (ret)
				goto fail;
			int fr = forward(m, &f);
			ret = HACCEL__CU(ctx, cu->StreamEndCapture(st, &gr));
			if (fr)
				ret = fr;
			if (!ret)
				ret = HACCEL__CU(ctx, cu->GraphInstantiateWithFlags(&gm->graph[bi].exec, gr, 0));
			if (gr)
				cu->GraphDestroy(gr);
			if (ret)
				goto fail;
			haccel__dbg(ctx, "model: cuda: captured the decode step for batch %u", B);
		}
		ret = HACCEL__CU(ctx, cu->GraphLaunch(gm->graph[bi].exec, st));
	}
	if (ret)
		goto fail;

	/* Logits of the items that asked, all in one copy when any did. */
	bool want = false;
	for (uint32_t i = 0; i < n_items; i++)
		want |= items[i].logits != NULL;
	if (want)
		ret = HACCEL__CU(ctx, cu->MemcpyDtoHAsync(gm->logits_host, gm->logits,
							  (size_t)n_items * m->c.vocab_size * 4, st));
	if (!ret)
		ret = HACCEL__CU(ctx, cu->StreamSynchronize(st));
	if (ret)
		goto fail;
	for (uint32_t i = 0; i < n_items; i++) {
		m->seqs[items[i].seq].n_tokens += items[i].n_tokens;
		if (items[i].logits)
			memcpy(items[i].logits, gm->logits_host + (size_t)i * m->c.vocab_size,
			       (size_t)m->c.vocab_size * 4);
	}
	return 0;
fail:
	/* The KV pages this step took go back; state updated in place on the
	 * GPU cannot be rolled back: such a failure is a device error. */
	for (uint32_t i = 0; m->kv && i < n_items; i++)
		haccel_kv_seq_truncate(m->kv, m->seqs[items[i].seq].kv_seq,
				       m->seqs[items[i].seq].n_tokens);
	return ret;
}

/*
 * One step, under the GPU runtime's lock: the models of a context share its
 * streams, so another thread's step, pool copy or allocation must neither
 * land in this step's capture nor synchronize the context inside it.
 */
int haccel__gmodel_step(struct haccel_model *m, const struct haccel_step_item *items,
			uint32_t n_items, uint32_t T, const uint32_t *first)
{
	int ret;

	haccel__gpu_lock(m->gm->g);
	ret = gmodel_step(m, items, n_items, T, first);
	haccel__gpu_unlock(m->gm->g);
	return ret;
}
