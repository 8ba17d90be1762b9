// SPDX-License-Identifier: MIT
/*
 * Host side of kernels/dsa.cu: argument checks, launch shapes, the shared
 * memory each kernel carves (the same sums as the kernels' layouts) and the
 * scratch layouts. Nothing here allocates or synchronises.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>

#include "gpu/ops.h"
#include "model/cpu/ops.h"

#define FN(name)                                              \
	void *fn;                                             \
	int ret = haccel__gpu_fn(g, name, &fn);               \
	if (ret)                                              \
		return ret

/* The largest dynamic shared memory a block may have (sm_90). */
#define MAX_SMEM (227 * 1024)

/* Kernels above the default 48 KiB must say so before their launch; the
 * call is cheap and allowed while a stream is being captured. */
static int smem_attr(struct haccel__gpu *g, void *fn, uint32_t bytes)
{
	if (bytes <= 48 * 1024)
		return 0;
	return HACCEL__CU(g->ctx, g->cu->FuncSetAttribute(fn, HACCEL__CU_FUNC_ATTR_MAX_DYN_SMEM,
							  (int)bytes));
}

int haccel__cuda_rope(struct haccel__gpu *g, void *stream, haccel__dptr x, uint32_t T,
		      uint32_t n_vec, size_t tok_stride, size_t vec_stride, uint32_t dim,
		      haccel__dptr pos, float theta, int layout)
{
	return haccel__cuda_rope2(g, stream, x, n_vec, tok_stride, vec_stride, x, 0, 0, 0, T, dim,
				  pos, theta, layout);
}

static bool rope_layout_ok(int layout)
{
	return layout == HACCEL__ROPE_NEOX || layout == HACCEL__ROPE_INTERLEAVED;
}

/* A rope inside a vector of 128 (the fused kernels): a known layout and an
 * even count of rotated dims, at most 128. */
static bool rope128_ok(int layout, uint32_t dim)
{
	return rope_layout_ok(layout) && dim <= 128 && dim % 2 == 0;
}

int haccel__cuda_rope2(struct haccel__gpu *g, void *stream, haccel__dptr x, uint32_t n_vec,
		       size_t tok_stride, size_t vec_stride, haccel__dptr x2, uint32_t n_vec2,
		       size_t tok_stride2, size_t vec_stride2, uint32_t T, uint32_t dim,
		       haccel__dptr pos, float theta, int layout)
{
	uint64_t ts = tok_stride, vs = vec_stride, ts2 = tok_stride2, vs2 = vec_stride2;
	uint32_t half = dim / 2;

	if (!rope_layout_ok(layout))
		return -EINVAL;
	/* The angles of one token: dim / 2 (cos, sin) pairs. */
	if ((size_t)half * 8 > 48 * 1024)
		return -EINVAL;
	FN("haccel_rope2");
	if (!T || !(n_vec + n_vec2) || !half)
		return 0;
	return HACCEL__LAUNCH(g, fn, T, 1, 1, 256, 1, 1, half * 8, stream, &x, &n_vec, &ts, &vs,
			      &x2, &n_vec2, &ts2, &vs2, &dim, &pos, &theta, &layout);
}

int haccel__cuda_hadamard128(struct haccel__gpu *g, void *stream, haccel__dptr x, uint32_t n)
{
	FN("haccel_hadamard128");
	if (!n)
		return 0;
	/* A warp per vector, 8 a block. */
	return HACCEL__LAUNCH(g, fn, (n + 7) / 8, 1, 1, 256, 1, 1, 0, stream, &x, &n);
}

int haccel__cuda_rope_hadamard(struct haccel__gpu *g, void *stream, haccel__dptr x, uint32_t T,
			       uint32_t n_vec, size_t tok_stride, size_t vec_stride, uint32_t dim,
			       haccel__dptr pos, float theta, int layout)
{
	uint64_t ts = tok_stride, vs = vec_stride;

	if (!rope128_ok(layout, dim))
		return -EINVAL;
	FN("haccel_rope_hadamard");
	if (!T || !n_vec)
		return 0;
	return HACCEL__LAUNCH(g, fn, T, 1, 1, 256, 1, 1, dim / 2 * 8, stream, &x, &n_vec, &ts, &vs,
			      &dim, &pos, &theta, &layout);
}

int haccel__cuda_mla_kv_write(struct haccel__gpu *g, void *stream, haccel__dptr region,
			      haccel__dptr slots, haccel__dptr latent, haccel__dptr k_pe,
			      uint32_t T, uint32_t dr)
{
	FN("haccel_dsa_kv_write");
	if (!T)
		return 0;
	return HACCEL__LAUNCH(g, fn, T, 1, 1, 128, 1, 1, 0, stream, &region, &slots, &latent,
			      &k_pe, &dr);
}

int haccel__cuda_index_k_write(struct haccel__gpu *g, void *stream, haccel__dptr region,
			       haccel__dptr slots, haccel__dptr ik, uint32_t T)
{
	FN("haccel_dsa_index_k_write");
	if (!T)
		return 0;
	/* A warp per token, 4 a block. */
	return HACCEL__LAUNCH(g, fn, (T + 3) / 4, 1, 1, 128, 1, 1, 0, stream, &region, &slots,
			      &ik, &T);
}

int haccel__cuda_index_k_fused(struct haccel__gpu *g, void *stream, haccel__dptr region,
			       haccel__dptr slots, haccel__dptr x, haccel__dptr w, haccel__dptr b,
			       float eps, uint32_t T, uint32_t dr, haccel__dptr pos, float theta,
			       int layout, haccel__dptr hw, uint32_t IH, float s)
{
	if (!rope128_ok(layout, dr))
		return -EINVAL;
	FN("haccel_dsa_index_k_fused");
	if (!T)
		return 0;
	/* 128 threads: haccel__cuda_layernorm's block for 128 values, so the
	 * norm's sums run in its order. */
	return HACCEL__LAUNCH(g, fn, T, 1, 1, 128, 1, 1, 0, stream, &region, &slots, &x, &w, &b,
			      &eps, &dr, &pos, &theta, &layout, &hw, &IH, &s);
}

/* ------------------------------------------------------------------------ */
/* Indexer                                                                  */

#define IX_SCORE_BLOCKS_SM 4 /* haccel_dsa_ix_score blocks an SM (its launch bounds) */
#define IX_STAGES 2          /* its slab buffers a warp (dsa.cu: DSA_IX_STAGES) */
#define IX_MAX_HEADS 128
#define IX_MAX_POS 0x7fffff00u /* max_pos below this: positions < 2^31 */
#define IX_MAX_TOPK 4096    /* the gather buffers hold at least this */
#define IX_SORT_CAP 16384   /* entries of the top-k kernel's gather buffers */
#define IX_FCAP 8192        /* its gathered keys of a staged row (DSA_IX_FCAP) */
/* The top-k kernel's rows staged in shared memory: at most this many keys,
 * so that the row, its gathered keys and positions and the rest fit in
 * MAX_SMEM (and P = n / 1024 <= 64 in its bit masks). */
#define IX_ROWCAP 36864
#define IX_KEYS (1u << 24)  /* key words of scratch before tokens are grouped */
#define IX_GROUP 256        /* tokens a group at most */
/* A token's prepared queries at IH = 128 (dsa.cu: dsa_ix_qbytes) */
#define IX_QBYTES(NT) ((uint64_t)(NT) * 2048 + (NT) * 32 + 16)

static uint64_t align256(uint64_t v)
{
	return (v + 255) & ~(uint64_t)255;
}

/* Key words a token's row takes: positions 0..max_pos, padded to 4. */
static uint64_t ix_stride(uint32_t max_pos)
{
	return ((uint64_t)max_pos + 4) & ~(uint64_t)3;
}

/* Key words scratch holds for T tokens: all their rows, or when that is
 * more than IX_KEYS, as many rows as fit in it (one at least). Monotonic
 * in T and max_pos, as scratch sizes must be. */
static uint64_t ix_keys(uint32_t T, uint64_t stride)
{
	uint64_t all = (uint64_t)T * stride, cap = stride > IX_KEYS ? stride : IX_KEYS;

	return all < cap ? all : cap;
}

/* Tokens a group: the rows that fit, at most IX_GROUP. */
static uint32_t ix_group(uint32_t T, uint64_t stride)
{
	uint64_t g = ix_keys(T, stride) / stride;

	return (uint32_t)(g < IX_GROUP ? g : IX_GROUP);
}

/*
 * Positions a scoring block takes: a multiple of 128 (a slab for each of
 * its four warps) chosen so that the T * ceil(N / chunk) blocks fill whole
 * waves of IX_SCORE_BLOCKS_SM blocks an SM. It minimizes waves * (chunk +
 * 128), a block's start costing about one more round of slabs, over chunk
 * = 128 .. 16384 (or up to the first that keeps a token's chunks <=
 * 65535). At 64K positions on an H200 (4 blocks on each of 132 SMs: 528
 * slots): 128 for one token, 4096 for 32 (512 blocks, one wave). With
 * three blocks an SM it gave 5504 (384 blocks) where a fixed 1024 made
 * 2048 blocks, 5.17 waves: the scoring kernel 92.6 against 101.3 µs.
 */
static uint32_t ix_chunk(uint32_t T, uint64_t N, int sms)
{
	uint64_t slots = (uint64_t)IX_SCORE_BLOCKS_SM * (uint64_t)(sms > 0 ? sms : 1);
	uint64_t best = 0, best_cost = UINT64_MAX;

	for (uint64_t c = 128; c <= 16384 || !best; c += 128) {
		uint64_t per = (N + c - 1) / c, waves = ((uint64_t)T * per + slots - 1) / slots;

		if (per <= 65535 && waves * (c + 128) < best_cost) {
			best_cost = waves * (c + 128);
			best = c;
		}
	}
	return (uint32_t)best;
}

/*
 * Scoring blocks a token for haccel_dsa_ix_score_dyn (its warps take
 * the token's slabs of 32 positions dynamically): as many as one wave of
 * IX_SCORE_BLOCKS_SM blocks an SM gives each of the T tokens, and no more
 * than give each warp a slab of N positions; one at least. On an H200 (132
 * SMs: 528 slots) at 32K positions: 256 for one token, 16 for 32, 8 for
 * 64 (512 blocks: the other 16 slots are left to the kernels beside it).
 */
static uint32_t ix_blocks(uint32_t T, uint64_t N, int sms)
{
	uint64_t slots = (uint64_t)IX_SCORE_BLOCKS_SM * (uint64_t)(sms > 0 ? sms : 1);
	uint64_t b = slots / (T ? T : 1), most = (N + 127) / 128;

	if (b > most)
		b = most;
	return b ? (uint32_t)b : 1;
}

/* The scoring takes slabs dynamically up to this many index heads (dsa.cu,
 * haccel_dsa_ix_score_dyn), in chunks above. */
#define IX_DYN_HEADS 16

/* Scratch: the prepared queries of a group's tokens (room for 128 heads),
 * then its rows of keys. */
size_t haccel__cuda_indexer_scratch(uint32_t T, uint32_t max_pos, uint32_t topk)
{
	uint64_t tg = T < IX_GROUP ? T : IX_GROUP;

	(void)topk;
	return align256(tg * IX_QBYTES(IX_MAX_HEADS / 8)) + ix_keys(T, ix_stride(max_pos)) * 4;
}

int haccel__cuda_indexer_topk(struct haccel__gpu *g, void *stream, haccel__dptr sel,
			      haccel__dptr n_sel, haccel__dptr q, haccel__dptr w, uint32_t T,
			      uint32_t IH, haccel__dptr pos, haccel__dptr bt_row,
			      haccel__dptr region, haccel__dptr block_tables, uint32_t bt_stride,
			      uint32_t page_tokens, uint32_t topk, uint32_t max_pos,
			      haccel__dptr scratch, const struct haccel__ix_rope *rope)
{
	uint64_t stride64 = ix_stride(max_pos);
	uint32_t NT = (IH + 7) / 8, stride = (uint32_t)stride64;
	uint32_t tg = T ? ix_group(T, stride64) : 1;
	uint64_t qbytes = IX_QBYTES(NT), cap = 1;
	/* queries, then per warp 32 key words, IX_STAGES slabs of 32 records
	 * and as many mbarriers (dsa.cu, haccel_dsa_ix_score) */
	uint32_t smem_s = (uint32_t)qbytes + 4 * (128 + IX_STAGES * (32 * 132 + 8));
	/* How slabs are copied (dsa.cu: DSA_IX_CP4, _CP16, _BULK): one bulk
	 * copy when a slab of 32 records lies in one page, else 16-byte
	 * copies of 4 records, else 4-byte copies. */
	uint32_t mode = region % 16 ? 0 : page_tokens % 32 == 0 ? 2 : page_tokens % 4 == 0 ? 1 : 0;
	haccel__dptr qp = scratch, keys = scratch + align256((uint64_t)tg * qbytes);
	void *fprep, *fscore, *ftopk;
	bool dyn = IH <= IX_DYN_HEADS;

	/* the prep kernel's rope and Hadamard transform (haccel_dsa_ix_prep) */
	uint32_t had = rope ? 1 : 0, rdim = rope ? rope->dim : 0;
	float theta = rope ? rope->theta : 0.0f;
	int layout = rope ? rope->layout : 0;

	if (!IH || IH > IX_MAX_HEADS || !topk || topk > IX_MAX_TOPK || !page_tokens ||
	    max_pos >= IX_MAX_POS || !scratch || scratch % 16 || region % 4 ||
	    (rope && !rope128_ok(layout, rdim)))
		return -EINVAL;
	/* The gather buffers (keys and positions): a power of two, no
	 * smaller than topk, no larger than a row needs (or IX_SORT_CAP). */
	while (cap < topk || (cap < IX_SORT_CAP && cap < (uint64_t)max_pos + 1))
		cap <<= 1;
	/* Rows of up to rowcap keys are staged in shared memory (dsa.cu,
	 * haccel_dsa_ix_topk): its buffers, or the gather buffers where
	 * larger, then two histograms, 32 + 2 x 32 + 8 words and 272 bytes
	 * (dsa_sel_shared). */
	uint32_t cap32 = (uint32_t)cap, rowcap = (uint32_t)ix_stride(max_pos);

	if (rowcap > IX_ROWCAP || g->ix_topk)
		rowcap = 0;
	uint64_t words = rowcap ? rowcap + 2 * IX_FCAP : 0;

	if (words < 2 * cap)
		words = 2 * cap;
	uint32_t smem_t = (uint32_t)(words * 4 + (2 * 2048 + 32 + 64 + 8) * 4 + 272);
	int ret = haccel__gpu_fn(g, "haccel_dsa_ix_prep", &fprep);
	if (!ret)
		ret = haccel__gpu_fn(g, dyn ? "haccel_dsa_ix_score_dyn" : "haccel_dsa_ix_score",
				     &fscore);
	if (!ret)
		ret = haccel__gpu_fn(g, "haccel_dsa_ix_topk", &ftopk);
	if (!ret)
		ret = smem_attr(g, fscore, smem_s);
	if (!ret)
		ret = smem_attr(g, ftopk, smem_t);
	if (ret || !T)
		return ret;
	for (uint32_t t0 = 0; !ret && t0 < T; t0 += tg) {
		uint32_t n = T - t0 < tg ? T - t0 : tg;
		haccel__dptr qt = q + (uint64_t)t0 * IH * 128 * 4, wt = w + (uint64_t)t0 * IH * 4;
		haccel__dptr pt = pos + (uint64_t)t0 * 4, rt = bt_row + (uint64_t)t0 * 4;
		haccel__dptr st = sel + (uint64_t)t0 * topk * 4, nt = n_sel + (uint64_t)t0 * 4;
		uint32_t chunk = dyn ? 0 : ix_chunk(n, (uint64_t)max_pos + 1, g->cu->sm_count);
		uint32_t nb = dyn ? ix_blocks(n, (uint64_t)max_pos + 1, g->cu->sm_count)
				  : (uint32_t)(((uint64_t)max_pos + chunk) / chunk);

		ret = HACCEL__LAUNCH(g, fprep, n, NT, 1, 256, 1, 1, 0, stream, &qp, &qt, &wt, &IH,
				     &NT, &had, &rdim, &pt, &theta, &layout);
		/* (the dynamic form takes a chunk too, and does not read it) */
		if (!ret)
			ret = HACCEL__LAUNCH(g, fscore, n, nb, 1, 128, 1, 1, smem_s, stream, &keys,
					     &stride, &qp, &NT, &pt, &rt, &region, &block_tables,
					     &bt_stride, &page_tokens, &max_pos, &mode, &chunk);
		if (!ret)
			ret = HACCEL__LAUNCH(g, ftopk, n, 1, 1, 1024, 1, 1, smem_t, stream, &st, &nt,
					     &keys, &stride, &pt, &max_pos, &topk, &cap32, &rowcap);
	}
	return ret;
}

/* ------------------------------------------------------------------------ */
/* Sparse MLA                                                               */

#define MLA_L 64            /* records a tile (DSA_MLA_L) */
#define MLA_MAX_TILES 32    /* tiles a split: its slot list in shared memory */
#define MLA_WS_NST 4        /* haccel_dsa_mla_h16w: record buffers (DSA_WS_NST) */
#define MLA_WS_MISC 1376    /* and the bytes between them and the slots (DSA_WS_MISC) */
#define MLA_SYNC 256        /* the flags merge's words at the scratch's start (DSA_FL_WORDS) */
#define MLA_FL_TOKENS 63    /* tokens those words count (DSA_FL_TOK) */
/*
 * Blocks worth filling the GPU with. 16-head groups (haccel_dsa_mla_h16
 * and h16w/h16s, one block an SM, tiles pipelined within a block; every
 * head count by default, ceil(H / 16) groups a token, each reading the
 * token's records, the groups of a split in adjacent blocks so that the
 * copies after the first come from the L2 cache): one wave of at most as
 * many blocks as the device has SMs (sms), so each block runs as many
 * tiles as it can; a second wave would double the call on a device with
 * fewer SMs than the H200's 132. 32-head groups (haccel_dsa_mla_h32, 256
 * threads, a few tiles a block; HACCEL_SPARSE_MLA=h32 only, the default
 * for more than 16 heads before 2026-12-06): about MLA_BLOCKS, measured
 * on an H200 (132 SMs), top-k 2048, 2026-12-01: 512 blocks 0.091 ms at
 * batch 32 and 0.134 ms at 64; 264 blocks 0.075 and 0.154; 132 blocks
 * 0.103 at batch 32.
 */
#define MLA_BLOCKS 512

/* Heads a block: 16, or with HACCEL_SPARSE_MLA=h32 and more than 16
 * heads 32 (two m-tiles). */
static uint32_t mla_hg(const struct haccel__gpu *g, uint32_t H)
{
	return H > 16 && g && g->sparse_mla == 4 ? 32 : 16;
}

/*
 * Splits of each token's selection, for head groups of hgs heads: enough
 * blocks to fill the GPU (one wave on its sms SMs for 16-head groups,
 * about MLA_BLOCKS over tokens and head groups for 32), no more than
 * there are tiles, no more than MLA_MAX_TILES tiles a split. tps: tiles a
 * split.
 */
static uint32_t mla_splits(uint32_t sms, uint32_t T, uint32_t H, uint32_t hgs, uint32_t topk,
			   uint32_t *tps)
{
	uint64_t tiles = (topk + MLA_L - 1) / MLA_L, hg = (H + hgs - 1) / hgs;
	uint64_t per = (uint64_t)T * hg;
	uint64_t n = hgs == 16 ? (sms ? sms : 1) / per : (MLA_BLOCKS + per - 1) / per;

	if (n > tiles)
		n = tiles;
	if (n < (tiles + MLA_MAX_TILES - 1) / MLA_MAX_TILES)
		n = (tiles + MLA_MAX_TILES - 1) / MLA_MAX_TILES;
	if (n < 1)
		n = 1;
	*tps = (uint32_t)((tiles + n - 1) / n);
	return (uint32_t)n;
}

uint32_t haccel__cuda_sparse_mla_splits(uint32_t sms, uint32_t T, uint32_t H, uint32_t topk)
{
	uint32_t tps;

	return mla_splits(sms, T, H, 16, topk, &tps);
}

/*
 * Partial results of every split, for the combine step: O [T][splits][H]
 * [512], then (m, l) [T][splits][H]; one split writes o_lat directly. The
 * split count falls as T grows, so T * splits is not monotonic in T (T = 96
 * takes 6 splits, 576 rows; T = 256 takes 2, 512 rows): the scratch is the
 * largest need of any call of 1..T tokens, so that workspace carved for a
 * step's largest T serves every smaller one. Past MLA_BLOCKS tokens the
 * split count stops changing and the need only grows with T.
 */
static size_t mla_scratch(uint32_t sms, uint32_t T, uint32_t H, uint32_t hgs, uint32_t topk)
{
	uint64_t rows = 0;
	uint32_t tps, settle = MLA_BLOCKS > sms ? MLA_BLOCKS : sms;
	uint32_t last = T < settle ? T : settle;
	/* (past max(MLA_BLOCKS, sms) tokens both rules give their fewest
	 * splits) */

	for (uint32_t t = 1; t <= last; t++) {
		uint64_t n = mla_splits(sms, t, H, hgs, topk, &tps);

		if (n > 1 && t * n > rows)
			rows = t * n;
	}
	if (T > last) {
		uint64_t n = mla_splits(sms, T, H, hgs, topk, &tps);

		if (n > 1 && (uint64_t)T * n > rows)
			rows = (uint64_t)T * n;
	}
	/* the partials after the flags merge's words (haccel__cuda_sparse_mla) */
	return rows ? MLA_SYNC + (size_t)rows * H * (512 + 2) * 4 : 0;
}

uint32_t haccel__cuda_sparse_mla_splits_gpu(const struct haccel__gpu *g, uint32_t T, uint32_t H,
					    uint32_t topk)
{
	uint32_t tps;

	return mla_splits(haccel__gpu_sms(g), T, H, mla_hg(g, H), topk, &tps);
}

size_t haccel__cuda_sparse_mla_scratch(uint32_t sms, uint32_t T, uint32_t H, uint32_t topk)
{
	return mla_scratch(sms, T, H, 16, topk);
}

size_t haccel__cuda_sparse_mla_scratch_gpu(const struct haccel__gpu *g, uint32_t T, uint32_t H,
					   uint32_t topk)
{
	return mla_scratch(haccel__gpu_sms(g), T, H, mla_hg(g, H), topk);
}

/* The warp-specialized kernel for 16-head groups where a split has tiles
 * to pipeline (measured on an H200, 2026-12-01: batch 32 / 64 0.031 /
 * 0.050 ms against 0.035 / 0.060; with one tile a split, decode at batch 1
 * took 0.03 ms a step longer), HACCEL_SPARSE_MLA=mma|ws forcing one. */
static bool mla_ws(const struct haccel__gpu *g, uint32_t H, uint32_t tps)
{
	return mla_hg(g, H) == 16 && g->sparse_mla != 1 && (tps >= 2 || g->sparse_mla == 2);
}

/* (dsa.cu) haccel_dsa_mla_h16w: 1024 bytes of alignment, the queries, q_pe,
 * two P buffers, the record buffers, DSA_WS_MISC, the split's slots;
 * h16s (sm) the logits' buffer (128 threads' 8 floats), six more
 * mbarriers, the copier's maxima ([2][4][4] ints) and Enew a buffer ([4]
 * [4] ints) too. */
static uint32_t mla_ws_smem(uint32_t tps, bool sm)
{
	return 1024 + 32 * 1024 + 32 * 128 + 2 * 4 * 16 * 128 +
	       MLA_WS_NST * MLA_L * (512 + 128 + 16) + MLA_WS_MISC + tps * MLA_L * 4 +
	       (sm ? 128 * 8 * 4 + (2 + MLA_WS_NST) * 8 + 32 * 4 + MLA_WS_NST * 4 * 4 : 0);
}

/* The split's softmax on a fourth warpgroup (h16s, 512 threads) where its
 * shared memory fits (a split of 16 tiles or fewer: batch 32 or more at
 * top-k 2048 up to 66 tokens); HACCEL_SPARSE_MLA=ws3 keeps h16w. */
static bool mla_sm(const struct haccel__gpu *g, uint32_t tps)
{
	return g->sparse_mla != 3 && mla_ws_smem(tps, true) <= MAX_SMEM;
}

/*
 * h16w's splits of a token (2-8 of them) merge in their cluster (its
 * h16wc form), in place of the combine kernel and with its bits, where a
 * cluster a token can all be resident at once (H200, 2026-12-03:
 * docs/benchmarks.md) and the token has one head group (the clusters
 * are n_split adjacent blocks, and a split's head groups are adjacent);
 * HACCEL_MLA_MERGE=kernel keeps the combine kernel.
 * 1 and the h16wc kernel in *fn (its shared memory set), else 0.
 */
static int mla_cmerge(struct haccel__gpu *g, uint32_t T, uint32_t H, uint32_t n_split,
		      uint32_t smem, bool sm, void **fn)
{
	if (n_split < 2 || n_split > 8 || H > 16 || g->mla_merge ||
	    haccel__gpu_fn(g, sm ? "haccel_dsa_mla_h16sc" : "haccel_dsa_mla_h16wc", fn) ||
	    smem_attr(g, *fn, smem))
		return 0;
	return haccel__gpu_max_clusters(g, *fn, n_split, sm ? 512 : 384, smem) >= T;
}

/*
 * The flags merge (dsa.cu, haccel_dsa_mla_h16sf): where h16s's splits of
 * a token (2-4 of them, one head group) would merge in their cluster but
 * not every token's cluster fits at once (batch 31 and 32 at top-k 2048
 * on 132 SMs, where 30 clusters of 4 fit), they merge through memory in
 * their own blocks instead of through the combine kernel (H100,
 * 2026-12-07: batch 32 from memory 52.3-52.6% → 54.6-55.1% of copy,
 * docs/benchmarks.md). A split waits for its token's others, so it needs
 * every block resident at once: no more blocks than SMs, one an SM, and
 * the context's first such launch is cooperative, so that the driver
 * refuses it where they would not be (a GPU shared through MPS with fewer
 * SMs); then, and from then on, the combine kernel merges (g->mla_coop
 * -1), else the later launches are plain ones (1: a cooperative launch
 * costs a direct call about 3 µs, H100, 2026-12-07, docs/benchmarks.md;
 * what it checks holds for the context's life).
 * HACCEL_MLA_MERGE=kernel keeps the combine kernel. 1 where it runs (*fn
 * the kernel).
 */
static int mla_flags(struct haccel__gpu *g, uint32_t T, uint32_t H, uint32_t n_split,
		     uint32_t smem, void **fn)
{
	return !g->mla_merge && __atomic_load_n(&g->mla_coop, __ATOMIC_RELAXED) >= 0 &&
	       n_split >= 2 && n_split <= 4 && H <= 16 && T <= MLA_FL_TOKENS &&
	       (uint64_t)T * n_split <= haccel__gpu_sms(g) &&
	       !haccel__gpu_fn(g, "haccel_dsa_mla_h16sf", fn) && !smem_attr(g, *fn, smem);
}

int haccel__cuda_sparse_mla_cluster(struct haccel__gpu *g, uint32_t T, uint32_t H,
				    uint32_t topk)
{
	uint32_t tps, n_split = mla_splits(haccel__gpu_sms(g), T, H, mla_hg(g, H), topk, &tps);
	bool sm = mla_sm(g, tps);
	void *fn;

	return mla_ws(g, H, tps) && mla_cmerge(g, T, H, n_split, mla_ws_smem(tps, sm), sm, &fn);
}

int haccel__cuda_sparse_mla_flags(struct haccel__gpu *g, uint32_t T, uint32_t H, uint32_t topk)
{
	uint32_t tps, n_split = mla_splits(haccel__gpu_sms(g), T, H, mla_hg(g, H), topk, &tps);
	bool sm = mla_sm(g, tps);
	uint32_t smem = mla_ws_smem(tps, sm);
	void *fn;

	return mla_ws(g, H, tps) && sm && !mla_cmerge(g, T, H, n_split, smem, sm, &fn) &&
	       mla_flags(g, T, H, n_split, smem, &fn);
}

int haccel__cuda_sparse_mla(struct haccel__gpu *g, void *stream, haccel__dptr o_lat,
			    haccel__dptr o_bf, haccel__dptr q_lat, haccel__dptr q_pe, uint32_t T,
			    uint32_t H, uint32_t dr, haccel__dptr sel, haccel__dptr n_sel,
			    uint32_t topk, haccel__dptr bt_row, haccel__dptr region,
			    haccel__dptr block_tables, uint32_t bt_stride, uint32_t page_tokens,
			    float scale, haccel__dptr scratch)
{
	uint32_t hgs = mla_hg(g, H), tps;
	uint32_t n_split = mla_splits(haccel__gpu_sms(g), T, H, hgs, topk, &tps);
	uint32_t n_hg = (H + hgs - 1) / hgs;
	/* (dsa.cu) haccel_dsa_mla_h16: 1024 bytes of alignment, the queries
	 * (fp16 hi/lo, bf16 hi/lo), P times each latent tile's factors,
	 * three buffers of rope, codes and scales, S (2 partial rows of 68
	 * a head), per head m/l/alpha/kq, 8 warp maxima, the split's slots;
	 * dsa_mla (haccel_dsa_mla_h32): the latent codes, two buffers of
	 * scales and rope, the latent in fp16, queries (fp16 hi/lo, bf16
	 * hi/lo), S, P, the split's slots, per head m/l/alpha/kq, 8 warp
	 * maxima; h16w: mla_ws_smem */
	bool ws = mla_ws(g, H, tps), sm = ws && mla_sm(g, tps);
	uint32_t smem = ws	   ? mla_ws_smem(tps, sm) :
			hgs == 16 ? 1024 + 32 * 1024 + 32 * 128 + 4 * 16 * 128 +
					    3 * MLA_L * (128 + 512 + 16) + 16 * (2 * 68 * 4 + 16) +
					    32 + tps * MLA_L * 4 :
				    MLA_L * 512 + 2 * MLA_L * (16 + 2 * dr) + MLA_L * 1024 +
					    32 * (2048 + 256 + 72 * 4 + 128 + 16) +
					    tps * MLA_L * 4 + 32;
	uint64_t blocks = (uint64_t)T * n_split * n_hg;

	/* The rope part is k-steps of 16 in the MMA; records are copied in
	 * 16-byte pieces. */
	/* (the partials are read as float4, o_lat written as float2) */
	if (!H || dr % 16 || dr > 64 || !topk || !page_tokens || region % 16 || scratch % 16 ||
	    o_lat % 8 || blocks > 0x7fffffff || (uint64_t)T * H > 0x7fffffff ||
	    (n_split > 1 && !scratch) ||
	    n_split > 12288 /* the combine's weights, 48 KiB */ ||
	    smem > MAX_SMEM)
		return -EINVAL;
	void *fn, *comb = NULL;
	int ret = haccel__gpu_fn(g, sm ? "haccel_dsa_mla_h16s" :
				 ws ? "haccel_dsa_mla_h16w" :
				 hgs == 16 ? "haccel_dsa_mla_h16" : "haccel_dsa_mla_h32",
				 &fn);
	if (!ret && n_split > 1)
		ret = haccel__gpu_fn(g, "haccel_dsa_mla_combine", &comb);
	if (ret)
		return ret;
	if (!T)
		return 0;
	ret = smem_attr(g, fn, smem);
	if (ret)
		return ret;
	/* the partials after the flags merge's words (mla_scratch) */
	haccel__dptr part = scratch ? scratch + MLA_SYNC : 0, sync = scratch;
	/* (the last two: h16wc's and h16sc's o_bf, h16sf's o_bf and sync;
	 * the others take the first 18) */
	void *args[] = { &o_lat, &part, &q_lat, &q_pe, &H, &dr, &sel, &n_sel, &topk,
			 &bt_row, &region, &block_tables, &bt_stride, &page_tokens, &scale,
			 &n_split, &tps, &n_hg, &o_bf, &sync };
	void *fcm;

	/* h16w: two warpgroups compute, a third copies (DSA_WS_THREADS); h16s:
	 * a fourth forms the softmax (DSA_WS_THREADS_S) */
	unsigned int nth = sm ? 512 : ws ? 384 : 256;

	if (ws && mla_cmerge(g, T, H, n_split, smem, sm, &fcm))
		return haccel__gpu_launch_cl(g, fcm, (uint32_t)blocks, n_split, nth, smem, stream,
					     args, __FILE__, __LINE__);
	if (sm && n_hg == 1 && mla_flags(g, T, H, n_split, smem, &fcm)) {
		if (__atomic_load_n(&g->mla_coop, __ATOMIC_RELAXED) > 0)
			return haccel__gpu_launch(g, fcm, (uint32_t)blocks, 1, 1, nth, 1, 1, smem,
						  stream, args, __FILE__, __LINE__);
		ret = haccel__gpu_launch_coop(g, fcm, (uint32_t)blocks, nth, smem, stream, args,
					      __FILE__, __LINE__);
		if (ret != -EBUSY) {
			if (!ret)
				__atomic_store_n(&g->mla_coop, 1, __ATOMIC_RELAXED);
			return ret;
		}
		/* refused: not every block can be resident at once here */
		__atomic_store_n(&g->mla_coop, -1, __ATOMIC_RELAXED);
	}
	ret = haccel__gpu_launch(g, fn, (uint32_t)blocks, 1, 1, nth, 1, 1, smem, stream, args,
				 __FILE__, __LINE__);
	if (!ret && n_split == 1 && o_bf)
		ret = haccel__cuda_to_bf16(g, stream, o_bf, o_lat, (size_t)T * H * 512);
	if (ret || n_split == 1)
		return ret;
	/* the splits' weights in shared memory (dsa.cu, haccel_dsa_mla_combine) */
	return HACCEL__LAUNCH(g, comb, T * H, 1, 1, 128, 1, 1, n_split * 4, stream, &o_lat,
			      &part, &T, &H, &n_split, &o_bf);
}

