// SPDX-License-Identifier: MIT
/*
 * haccel-bench kernels | decode | prefill: the CUDA backend against the
 * ceilings of the GPU it runs on, measured in the same run: the
 * device-to-device copy bandwidth (bytes read + written per second) and
 * cuBLASLt's bf16 GEMM rate. Each figure is printed with its fraction of
 * the ceiling that bounds it. Kernel times come from CUDA events around
 * many back-to-back launches; step times from the host clock around
 * haccel_model_step (inputs copied, graph launched, stream synchronised);
 * with decode --trace, the kernels of more steps from CUPTI (bench_trace.c)
 * and the GPU idle time between them.
 *
 * haccel-bench links the library's internals (libhaccel-core) to reach
 * the kernels; nothing here is public API.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_roof.h"
#include "bench_trace.h"
#include "common.h"
#include "core/ctx.h"
#include "gpu/blas.h"
#include "gpu/cuda.h"
#include "gpu/mem.h"
#include "gpu/module.h"
#include "gpu/ops.h"
#include "haccel.h"
#include "model/format.h"
#include "model/model_priv.h"

struct gb {
	struct haccel_ctx *ctx;
	struct haccel__gpu *g;
	struct haccel__cuda *cu;
	void *e0, *e1;
	uint64_t bufs[64];
	uint64_t sizes[64];
	unsigned int n;
	double copy_bw;      /* bytes read + written per second */
	double gemm_flops;   /* bf16 GEMM, flop/s */
	json_t *out;
};

static uint64_t rng = 0x9e3779b97f4a7c15ull;

/* Where the human-readable table goes: stdout, or stderr under --json. */
static FILE *tbl;

static uint64_t xs(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static int gpu_start(struct gb *b)
{
	struct haccel_gpu_info gi;
	int ret;

	/* Each failure is reported once, with haccel_last_error(). */
	if (tool_ctx_open(-1, &b->ctx))
		return -ENOMEM;
	ret = haccel_gpu_info(b->ctx, &gi);
	if (ret) {
		tool_err("%s%s", haccel__cuda_why_prefix(gi.reason), gi.reason);
		return ret;
	}
	if (!gi.kernels) {
		tool_err("this build has no GPU kernels (configured without nvcc)");
		return -ENOEXEC;
	}
	ret = haccel__gpu_get(b->ctx, &b->g);
	if (ret) {
		char err[512];
		haccel_last_error(b->ctx, err, sizeof(err));
		tool_err("%s", err);
		return ret;
	}
	b->cu = b->g->cu;
	b->cu->EventCreate(&b->e0, 0);
	b->cu->EventCreate(&b->e1, 0);
	fprintf(stderr, "GPU: %s, %u SMs, %.1f GiB, driver %u\n", gi.name, gi.sm_count,
		gi.mem_total / 1073741824.0, gi.driver_version);
	return 0;
}

static void gpu_stop(struct gb *b)
{
	if (b->g) {
		b->cu->StreamSynchronize(b->g->stream);
		while (b->n) {
			b->n--;
			haccel__gpu_mem_free(b->ctx, b->bufs[b->n], b->sizes[b->n]);
		}
		b->cu->EventDestroy(b->e0);
		b->cu->EventDestroy(b->e1);
	}
	haccel_close(b->ctx);
}

static uint64_t dalloc(struct gb *b, uint64_t bytes)
{
	uint64_t p = 0;

	if (b->n == 64 || haccel__gpu_mem_alloc(b->ctx, bytes, &p))
		return 0;
	b->bufs[b->n] = p;
	b->sizes[b->n++] = bytes;
	return p;
}

/* Free the buffers allocated after mark. */
static void dfree_to(struct gb *b, unsigned int mark)
{
	b->cu->StreamSynchronize(b->g->stream);
	while (b->n > mark) {
		b->n--;
		haccel__gpu_mem_free(b->ctx, b->bufs[b->n], b->sizes[b->n]);
	}
}

/* bytes at h to d on the runtime's stream, waited for (cuMemcpyHtoD from
 * pageable memory may return before its DMA lands, unordered with the
 * kernels of a non-blocking stream). 0 or the driver's error. */
static int hput(struct gb *b, uint64_t d, const void *h, size_t bytes)
{
	int r = b->cu->MemcpyHtoDAsync(d, h, bytes, b->g->stream);

	return r ? r : b->cu->StreamSynchronize(b->g->stream);
}

/* A device buffer of n floats, uniform in [lo, hi). */
static uint64_t drand(struct gb *b, size_t n, float lo, float hi)
{
	float *h = malloc(n * 4 + 4);
	uint64_t d;

	if (!h)
		return 0;
	for (size_t i = 0; i < n; i++)
		h[i] = lo + (hi - lo) * (float)(xs() >> 40) * 0x1p-24f;
	d = dalloc(b, n * 4);
	if (d && hput(b, d, h, n * 4))
		d = 0;
	free(h);
	return d;
}

static uint64_t dput(struct gb *b, const void *h, size_t bytes)
{
	uint64_t d = dalloc(b, bytes);

	if (d && hput(b, d, h, bytes))
		d = 0;
	return d;
}

/* Seconds per call of fn, from events around iters back-to-back calls
 * after warm-up calls. */
typedef int (*launch_fn)(struct gb *b, void *arg);

static double time_it(struct gb *b, launch_fn fn, void *arg, int warm, int iters)
{
	void *st = b->g->stream;
	float ms = 0;

	for (int i = 0; i < warm; i++)
		if (fn(b, arg))
			return -1;
	b->cu->EventRecord(b->e0, st);
	for (int i = 0; i < iters; i++)
		if (fn(b, arg))
			return -1;
	b->cu->EventRecord(b->e1, st);
	if (b->cu->EventSynchronize(b->e1) || b->cu->EventElapsedTime(&ms, b->e0, b->e1))
		return -1;
	return ms / 1e3 / iters;
}

/* The same, with the iters calls captured in one CUDA graph and launched
 * as one (as a decode step runs them): no launch overheads in the time. */
static double time_graph(struct gb *b, launch_fn fn, void *arg, int iters)
{
	void *st = b->g->stream, *gr = NULL, *ex = NULL;
	float ms = 0;
	int ret = 0;

	if (fn(b, arg) || b->cu->StreamSynchronize(st))
		return -1;
	if (b->cu->StreamBeginCapture(st, HACCEL__CU_STREAM_CAPTURE_MODE_GLOBAL))
		return -1;
	for (int i = 0; i < iters && !ret; i++)
		ret = fn(b, arg);
	if (b->cu->StreamEndCapture(st, &gr) || ret || !gr ||
	    b->cu->GraphInstantiateWithFlags(&ex, gr, 0))
		ret = -1;
	if (!ret && (b->cu->GraphLaunch(ex, st) || b->cu->EventRecord(b->e0, st) ||
		     b->cu->GraphLaunch(ex, st) || b->cu->EventRecord(b->e1, st) ||
		     b->cu->EventSynchronize(b->e1) || b->cu->EventElapsedTime(&ms, b->e0, b->e1)))
		ret = -1;
	if (ex)
		b->cu->GraphExecDestroy(ex);
	if (gr)
		b->cu->GraphDestroy(gr);
	return ret ? -1 : ms / 1e3 / iters;
}

static void row(struct gb *b, const char *what, const char *shape, double sec, double bytes,
		double flops)
{
	double bw = bytes / sec, fl = flops / sec;
	json_t *r = json_object();

	if (bytes > 0)
		fprintf(tbl, "  %-22s %-34s %9.3f ms %8.1f GB/s = %5.1f%% of copy\n", what, shape, sec * 1e3,
		       bw / 1e9, 100 * bw / b->copy_bw);
	else
		fprintf(tbl, "  %-22s %-34s %9.3f ms %8.1f TFLOP/s = %5.1f%% of GEMM\n", what, shape,
		       sec * 1e3, fl / 1e12, 100 * fl / b->gemm_flops);
	json_object_set_new(r, "kernel", json_string(what));
	json_object_set_new(r, "shape", json_string(shape));
	json_object_set_new(r, "seconds", json_real(sec));
	if (bytes > 0) {
		json_object_set_new(r, "bytes", json_real(bytes));
		json_object_set_new(r, "bytes_per_s", json_real(bw));
		json_object_set_new(r, "fraction_of_copy", json_real(bw / b->copy_bw));
	}
	if (flops > 0) {
		json_object_set_new(r, "flops", json_real(flops));
		json_object_set_new(r, "flops_per_s", json_real(fl));
		json_object_set_new(r, "fraction_of_gemm", json_real(fl / b->gemm_flops));
	}
	json_array_append_new(json_object_get(b->out, "kernels"), r);
}

/* ------------------------------------------------------------------------ */
/* Ceilings                                                                 */

struct copy_arg {
	uint64_t a, c, bytes;
};

static int copy_once(struct gb *b, void *arg)
{
	struct copy_arg *a = arg;

	return b->cu->MemcpyDtoDAsync(a->c, a->a, a->bytes, b->g->stream);
}

struct gemm_arg {
	uint64_t x, w, y;
	uint32_t M, N, K;
};

static int gemm_once(struct gb *b, void *arg)
{
	struct gemm_arg *a = arg;

	return haccel__cuda_linear(b->g, NULL, a->y, a->x, a->K, a->w, 0, a->M, a->N, a->K);
}

static int ceilings(struct gb *b)
{
	unsigned int mark = b->n;
	struct copy_arg ca = { .bytes = 1ull << 30 };
	struct gemm_arg ga = { .M = 8192, .N = 8192, .K = 8192 };
	double t;

	ca.a = dalloc(b, ca.bytes);
	ca.c = dalloc(b, ca.bytes);
	if (!ca.a || !ca.c)
		return -ENOMEM;
	t = time_it(b, copy_once, &ca, 3, 20);
	if (t <= 0)
		return -EIO;
	b->copy_bw = 2.0 * ca.bytes / t;
	dfree_to(b, mark);
	ga.x = dalloc(b, (uint64_t)ga.M * ga.K * 2);
	ga.w = dalloc(b, (uint64_t)ga.N * ga.K * 2);
	ga.y = dalloc(b, (uint64_t)ga.M * ga.N * 4);
	if (!ga.x || !ga.w || !ga.y)
		return -ENOMEM;
	t = time_it(b, gemm_once, &ga, 3, 10);
	if (t <= 0)
		return -EIO;
	b->gemm_flops = 2.0 * ga.M * ga.N * ga.K / t;
	dfree_to(b, mark);
	fprintf(tbl, "ceilings: device copy %.1f GB/s (1 GiB, read + write); cuBLASLt bf16 GEMM %.1f TFLOP/s (8192^3)\n",
	       b->copy_bw / 1e9, b->gemm_flops / 1e12);
	json_object_set_new(b->out, "copy_bytes_per_s", json_real(b->copy_bw));
	json_object_set_new(b->out, "gemm_flops_per_s", json_real(b->gemm_flops));
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Kernels                                                                  */

struct kda_arg {
	uint64_t q, k, v, g, beta, o, so, ss, S, scratch;
	uint32_t T, H, n_seg;
	bool chunked;
};

static int kda_once(struct gb *b, void *arg)
{
	struct kda_arg *a = arg;
	uint64_t stride = (uint64_t)a->H * 128 * 128 * 4;

	if (a->chunked)
		return haccel__cuda_kda_chunked(b->g, NULL, a->q, a->k, a->v, a->g, a->beta, a->o, a->T,
						a->H, 128, 128, a->n_seg, a->so, a->ss, a->S, stride,
						a->scratch);
	return haccel__cuda_kda_recurrent(b->g, NULL, a->q, a->k, a->v, a->g, a->beta, a->o, a->T,
					  a->H, 128, 128, a->n_seg, a->so, a->ss, a->S, stride);
}

/* Decode: B sequences, one token each; prefill: one sequence of T tokens. */
static int bench_kda(struct gb *b, uint32_t H, uint32_t B, uint32_t T, bool chunked)
{
	unsigned int mark = b->n;
	struct kda_arg a = { .T = chunked ? T : B, .H = H, .n_seg = chunked ? 1 : B,
			     .chunked = chunked };
	uint32_t n_seg = a.n_seg, rows = a.T, *so = malloc((n_seg + 1) * 4), *ss = malloc(n_seg * 4);
	uint64_t hk = (size_t)rows * H * 128;
	char shape[64];

	for (uint32_t i = 0; i <= n_seg; i++)
		so[i] = chunked ? (i ? T : 0) : i;
	for (uint32_t i = 0; i < n_seg; i++)
		ss[i] = i;
	/* Normalised q, k as the prep op leaves them; small decays. */
	a.q = drand(b, hk, -0.088f, 0.088f);
	a.k = drand(b, hk, -0.088f, 0.088f);
	a.v = drand(b, hk, -1, 1);
	a.g = drand(b, hk, -0.05f, -0.001f);
	a.beta = drand(b, (size_t)rows * H, 0.1f, 0.9f);
	a.o = dalloc(b, hk * 4);
	a.so = dput(b, so, (n_seg + 1) * 4);
	a.ss = dput(b, ss, n_seg * 4);
	a.S = dalloc(b, (uint64_t)n_seg * H * 128 * 128 * 4);
	if (chunked) {
		size_t sb = haccel__cuda_kda_chunked_scratch(T, H, 128, 128, 1);
		a.scratch = sb ? dalloc(b, sb) : 0;
	}
	free(so);
	free(ss);
	if (!a.q || !a.k || !a.v || !a.g || !a.beta || !a.o || !a.so || !a.ss || !a.S)
		return -ENOMEM;
	double t = time_it(b, kda_once, &a, 2, chunked ? 5 : 50);
	if (t <= 0)
		return -EIO;
	if (chunked) {
		/* Chunked delta rule, chunks of C = 64: per chunk and head about
		 * 2 C^2 K (attention-like terms) + 6 C K V (state in/out, the
		 * WY products) flops; a rough count to place it against GEMM. */
		double C = 64, flops = (double)T / C * H * (2 * C * C * 128 + 6 * C * 128 * 128);
		snprintf(shape, sizeof(shape), "T=%u H=%u K=V=128", T, H);
		row(b, "kda_chunked", shape, t, 0, flops);
		json_object_set_new(json_array_get(json_object_get(b->out, "kernels"),
						   json_array_size(json_object_get(b->out, "kernels")) - 1),
				    "tokens_per_s", json_real(T / t));
		fprintf(tbl, "  %-22s %-34s %9s    %8.0f tokens/s\n", "", "", "", T / t);
	} else {
		/* State read and written, plus each token's q, k, v, g, o. */
		double bytes = 2.0 * B * H * 128 * 128 * 4 + (double)B * H * 128 * 4 * 5;
		snprintf(shape, sizeof(shape), "batch=%u H=%u K=V=128", B, H);
		row(b, "kda_decode", shape, t, bytes, 0);
	}
	dfree_to(b, mark);
	return 0;
}

struct idx_arg {
	uint64_t sel, n_sel, q, w, pos, btr, region, bt, scratch;
	uint32_t T, IH, bt_stride, topk, max_pos;
};

static int idx_once(struct gb *b, void *arg)
{
	struct idx_arg *a = arg;

	return haccel__cuda_indexer_topk(b->g, NULL, a->sel, a->n_sel, a->q, a->w, a->T, a->IH,
					 a->pos, a->btr, a->region, a->bt, a->bt_stride, 64,
					 a->topk, a->max_pos, a->scratch, NULL);
}

struct mla_arg {
	uint64_t o, ql, qp, sel, n_sel, btr, region, bt, scratch;
	uint32_t T, H, topk, bt_stride;
};

static int mla_once(struct gb *b, void *arg)
{
	struct mla_arg *a = arg;

	return haccel__cuda_sparse_mla(b->g, NULL, a->o, 0, a->ql, a->qp, a->T, a->H, 64, a->sel,
				       a->n_sel, a->topk, a->btr, a->region, a->bt, a->bt_stride, 64,
				       1.0f / sqrtf(192.0f), a->scratch);
}

/* Fill n records of rec bytes: FP8 codes without NaN, unit scales. */
static uint8_t *records(size_t n, uint32_t rec, uint32_t codes, bool e8m0)
{
	uint8_t *h = malloc(n * rec);

	if (!h)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		uint8_t *r = h + i * rec;
		for (uint32_t j = 0; j < codes; j++)
			r[j] = (uint8_t)(xs() & 0x77);
		if (e8m0) {
			memset(r + codes, 127, rec - codes);
		} else {
			float one = 1.0f;
			for (uint32_t j = 0; j < 4; j++)
				memcpy(r + codes + 4 * j, &one, 4);
			for (uint32_t j = codes + 16; j + 1 < rec; j += 2) {
				uint16_t bf = haccel__bf16_from_float((float)((int)(xs() & 255) - 128) / 256);
				memcpy(r + j, &bf, 2);
			}
		}
	}
	return h;
}

/* The indexer's and sparse MLA's shapes (kernels --index-heads, --context,
 * --pages), and the default context. */
#define DSA_CTX 65536

enum { PAGES_SCATTERED, PAGES_CONTIGUOUS, PAGES_SHARED };

struct dsa_opts {
	uint32_t IH, ctx;
	int pages;
};

static const char *const pages_tag[] = { "", " pages=contiguous", " pages=shared" };

/* B query tokens, each at position ctx - 1 of its own sequence; the
 * indexer's row only with ix (its selections are made either way: sparse
 * MLA reads them). */
static int bench_dsa(struct gb *b, uint32_t B, const struct dsa_opts *o, uint32_t H,
		     uint32_t topk, bool ix)
{
	uint32_t ctx = o->ctx, IH = o->IH;
	unsigned int mark = b->n;
	uint32_t pages = ctx / 64, *bt = malloc((size_t)B * pages * 4), *pos = malloc(B * 4);
	uint32_t *btr = malloc(B * 4);
	size_t n_rec = (size_t)B * ctx;
	char shape[80];
	int ret = -ENOMEM;

	if (!bt || !pos || !btr)
		goto out;
	/* Pages of a sequence scattered over the region, as a pool leaves
	 * sequences that grew together (page p of sequence s at p B + s), or
	 * with --pages contiguous each sequence's pages in a run of its own;
	 * with --pages shared every query reads sequence 0's (its block-table
	 * row), ctx records of index keys and of KV, which stay in the L2
	 * cache across calls where they fit: the kernels' own rate, not the
	 * memory's. */
	for (uint32_t s = 0; s < B; s++) {
		pos[s] = ctx - 1;
		btr[s] = o->pages == PAGES_SHARED ? 0 : s;
		for (uint32_t p = 0; p < pages; p++)
			bt[(size_t)s * pages + p] =
				o->pages == PAGES_CONTIGUOUS ? s * pages + p : p * B + s;
	}
	struct idx_arg ia = { .T = B, .IH = IH, .bt_stride = pages, .topk = topk,
			      .max_pos = ctx - 1 };
	uint8_t *keys = records(n_rec, 132, 128, true);
	if (!keys)
		goto out;
	ia.region = dput(b, keys, n_rec * 132);
	free(keys);
	ia.q = drand(b, (size_t)B * IH * 128, -1, 1);
	ia.w = drand(b, (size_t)B * IH, -0.1f, 0.1f);
	ia.pos = dput(b, pos, B * 4);
	ia.btr = dput(b, btr, B * 4);
	ia.bt = dput(b, bt, (size_t)B * pages * 4);
	ia.sel = dalloc(b, (size_t)B * topk * 4);
	ia.n_sel = dalloc(b, B * 4);
	size_t isb = haccel__cuda_indexer_scratch(B, ctx, topk);
	ia.scratch = isb ? dalloc(b, isb) : 0;
	if (!ia.region || !ia.q || !ia.w || !ia.pos || !ia.btr || !ia.bt || !ia.sel || !ia.n_sel ||
	    (isb && !ia.scratch))
		goto out;
	/* timed only for its row; else one call makes the selections */
	double t = ix ? time_it(b, idx_once, &ia, 2, 10) : idx_once(b, &ia) ? -1 : 1;
	if (t <= 0) {
		ret = -EIO;
		goto out;
	}
	snprintf(shape, sizeof(shape), "batch=%u ctx=%u IH=%u topk=%u%s", B, ctx, IH, topk,
		 pages_tag[o->pages]);
	if (ix)
		row(b, "indexer_topk", shape, t, (double)n_rec * 132, 0);

	/* Sparse MLA over the selection just made, in its own KV region. */
	struct mla_arg ma = { .T = B, .H = H, .topk = topk, .bt_stride = pages,
			      .sel = ia.sel, .n_sel = ia.n_sel, .btr = ia.btr, .bt = ia.bt };
	uint8_t *kv = records(n_rec, 656, 512, false);
	if (!kv)
		goto out;
	ma.region = dput(b, kv, n_rec * 656);
	free(kv);
	ma.ql = drand(b, (size_t)B * H * 512, -0.1f, 0.1f);
	ma.qp = drand(b, (size_t)B * H * 64, -0.1f, 0.1f);
	ma.o = dalloc(b, (size_t)B * H * 512 * 4);
	size_t msb = haccel__cuda_sparse_mla_scratch_gpu(b->g, B, H, topk);
	ma.scratch = msb ? dalloc(b, msb) : 0;
	if (!ma.region || !ma.ql || !ma.qp || !ma.o || (msb && !ma.scratch))
		goto out;
	t = time_it(b, mla_once, &ma, 2, 20);
	if (t <= 0) {
		ret = -EIO;
		goto out;
	}
	/* (the context only where it is not the default: the rows of earlier
	 * entries of docs/benchmarks.md read the same) */
	char cs[24] = "";

	if (ctx != DSA_CTX)
		snprintf(cs, sizeof(cs), " ctx=%u", ctx);
	snprintf(shape, sizeof(shape), "batch=%u H=%u topk=%u dr=64%s%s", B, H, topk, cs,
		 pages_tag[o->pages]);
	double mb = (double)B * topk * 656 + (double)B * H * (512 + 64 + 512) * 4;

	row(b, "sparse_mla", shape, t, mb, 0);
	/* The same 20 calls replayed from one CUDA graph, as a decode step
	 * runs them: no gap between launches, and each call's work before
	 * its wait on the call before (HAC_PDL) overlapping that call. */
	t = time_graph(b, mla_once, &ma, 20);
	if (t <= 0) {
		ret = -EIO;
		goto out;
	}
	row(b, "sparse_mla graph", shape, t, mb, 0);
	ret = 0;
out:
	free(bt);
	free(pos);
	free(btr);
	dfree_to(b, mark);
	return ret;
}

/*
 * Decode GEMMs: every weight shape of the `small` preset's step, by the
 * few-row kernel (up to 16 rows) and by cuBLASLt, at M rows, timed in a
 * CUDA graph as the step runs them. Each call reads another copy of the
 * weights (at least 256 MB of copies in turn), so no call finds them in
 * the L2 cache; bytes are the weights, the input and the output.
 */
struct gemm_shape {
	const char *what;
	uint32_t N, K, batch, per_step;
	int64_t lda, stride_a;     /* 0: K, 0 */
};

struct few_arg {
	struct haccel__gemm op;
	uint64_t w0, wstride;
	uint32_t copies, i;
	bool lt;
};

static int few_once(struct gb *b, void *arg)
{
	struct few_arg *a = arg;

	a->op.B = a->w0 + (uint64_t)(a->i++ % a->copies) * a->wstride;
	return a->lt ? haccel__gemm_lt(b->g, NULL, &a->op) : haccel__gemm_few(b->g, NULL, &a->op);
}

/*
 * A KDA layer's projections of its input at M rows (q, k, v 2048 x 2048,
 * f_a and g_a 128 x 2048, beta 16 x 2048), all six and the three small
 * ones: one haccel__gemm_group launch, or one by one through
 * haccel__gemm_run (q, k, v batched), each call on its own copy of the
 * weights in turn.
 */
struct group_arg {
	struct haccel__gemm op[6];
	uint64_t w0, wstride;
	uint32_t copies, i, first; /* first: 0 all six, 3 the three small ones */
	bool group;
};

static int group_once(struct gb *b, void *arg)
{
	struct group_arg *a = arg;
	uint64_t w = a->w0 + (uint64_t)(a->i++ % a->copies) * a->wstride, off = 0;
	struct haccel__gemm op[6], qkv;
	int ret;

	for (int i = 0; i < 6; i++) {
		op[i] = a->op[i];
		op[i].B = w + off;
		off += (uint64_t)op[i].N * op[i].K * 2;
	}
	if (a->group) {
		ret = haccel__gemm_group(b->g, NULL, op + a->first, 6 - a->first);
		return ret == -ENOTSUP ? 1 : ret;
	}
	/* one by one: q, k, v batched (all six), then the small ones */
	ret = 0;
	if (!a->first) {
		qkv = op[0];
		qkv.batch = 3;
		qkv.stride_b = (int64_t)qkv.N * qkv.K;
		qkv.stride_c = (int64_t)qkv.M * qkv.N;
		ret = haccel__gemm_run(b->g, NULL, &qkv);
	}
	for (int i = 3; i < 6 && !ret; i++)
		ret = haccel__gemm_run(b->g, NULL, &op[i]);
	return ret;
}

static int bench_group(struct gb *b, uint32_t M)
{
	const uint32_t N[6] = { 2048, 2048, 2048, 128, 16, 128 }, K = 2048;
	uint64_t wb = 0;
	unsigned int mark = b->n;
	struct group_arg a = { 0 };
	double t[2], bytes;
	char shape[64];

	for (int i = 0; i < 6; i++)
		wb += (uint64_t)N[i] * K * 2;
	a.wstride = (wb + 255) & ~255ull;
	a.copies = (uint32_t)((256ull << 20) / a.wstride + 1);
	a.w0 = dalloc(b, a.wstride * a.copies);
	uint64_t x = dalloc(b, (uint64_t)M * K * 2), y = dalloc(b, (uint64_t)M * 2048 * 3 * 4);
	uint64_t z = dalloc(b, (uint64_t)M * 272 * 4);
	if (!a.w0 || !x || !y || !z)
		return -ENOMEM;
	if (b->cu->MemsetD8Async(a.w0, 0x3c, a.wstride * a.copies, b->g->stream) ||
	    b->cu->MemsetD8Async(x, 0x3c, (uint64_t)M * K * 2, b->g->stream))
		return -EIO;
	for (int i = 0; i < 6; i++)
		a.op[i] = (struct haccel__gemm){
			.M = M, .N = N[i], .K = K, .A = x,
			.C = i < 3 ? y + (uint64_t)i * M * 2048 * 4 :
				     z + (uint64_t)(i - 3) * M * 128 * 4,
			.lda = K, .ldb = K, .ldc = N[i], .batch = 1, .trans_b = 1,
		};
	for (uint32_t first = 0; first <= 3; first += 3) {
		double wsel = 0;

		for (int i = (int)first; i < 6; i++)
			wsel += (double)N[i] * K * 2;
		a.first = first;
		for (int gr = 0; gr < 2; gr++) {
			a.group = !gr;
			t[gr] = time_graph(b, group_once, &a, a.copies < 40 ? 40 : (int)a.copies);
		}
		if (t[1] <= 0)
			return -EIO;
		bytes = wsel + (double)M * K * 2 +
			(double)M * (first ? 272 : 3 * 2048 + 272) * 4;
		snprintf(shape, sizeof(shape), "M=%u kda %s", M,
			 first ? "f_a,beta,g_a" : "q,k,v,f_a,beta,g_a");
		if (t[0] > 0)
			row(b, "gemm_group (1 launch)", shape, t[0], bytes, 0);
		else
			fprintf(tbl, "  %-22s %-34s refused (past the group's limits)\n",
				"gemm_group (1 launch)", shape);
		row(b, first ? "gemm one by one (3)" : "gemm one by one (4)", shape, t[1], bytes,
		    0);
	}
	dfree_to(b, mark);
	return 0;
}

static int bench_gemm(struct gb *b, uint32_t M)
{
	/* small: D 2048, MLP 5632, KDA 16 x 128 (ranks 128), DSA 16 heads
	 * (q LoRA 768, latent 512 + 64, 128 + 64 query dims, v 128), index
	 * 16 x 128; 12 KDA and 4 DSA layers, 16 MLPs. */
	static const struct gemm_shape sh[] = {
		{ "kda q/k/v", 2048, 2048, 3, 12, 0, 0 },
		{ "kda f_a, g_a", 128, 2048, 1, 24, 0, 0 },
		{ "kda f_b, g_b", 2048, 128, 1, 24, 0, 0 },
		{ "kda beta", 16, 2048, 1, 12, 0, 0 },
		{ "attn out (kda, dsa)", 2048, 2048, 1, 16, 0, 0 },
		{ "dsa q_a", 768, 2048, 1, 4, 0, 0 },
		{ "dsa q_b", 3072, 768, 1, 4, 0, 0 },
		{ "dsa index q", 2048, 768, 1, 4, 0, 0 },
		{ "dsa kv_a", 576, 2048, 1, 4, 0, 0 },
		{ "dsa index k", 128, 2048, 1, 4, 0, 0 },
		{ "dsa index w", 16, 2048, 1, 4, 0, 0 },
		{ "dsa W_UV per head", 128, 512, 16, 4, 16 * 512, 512 },
		{ "mlp gate/up", 5632, 2048, 2, 16, 0, 0 },
		{ "mlp down", 2048, 5632, 1, 16, 0, 0 },
		{ "lm_head", 32000, 2048, 1, 1, 0, 0 },
	};
	const unsigned int n_sh = sizeof(sh) / sizeof(sh[0]);
	double step[2] = { 0, 0 }, step_bytes = 0;
	/* The few-row kernel's rows; above, haccel__gemm_run sends every
	 * GEMM to cuBLASLt, which alone is timed. */
	bool few = M <= HACCEL__GEMM_FEW_ROWS;
	char shape[96];

	for (unsigned int i = 0; i < n_sh; i++) {
		const struct gemm_shape *s = &sh[i];
		unsigned int mark = b->n;
		int64_t lda = s->lda ? s->lda : s->K;
		uint64_t wb = (uint64_t)s->batch * s->N * s->K * 2;
		uint64_t wstride = (wb + 255) & ~255ull;
		uint32_t copies = (uint32_t)((256ull << 20) / wstride + 1);
		uint64_t abytes = (uint64_t)M * lda * 2 + (uint64_t)s->stride_a * 2 * (s->batch - 1);
		uint64_t cbytes = (uint64_t)s->batch * M * s->N * 4;
		struct few_arg a = { .copies = copies, .wstride = wstride };
		double t[2] = { 0, 0 };
		double bytes = (double)wb + (double)M * s->K * 2 * s->batch + (double)cbytes;

		a.w0 = dalloc(b, wstride * copies);
		a.op = (struct haccel__gemm){
			.M = M, .N = s->N, .K = s->K, .A = dalloc(b, abytes), .C = dalloc(b, cbytes),
			.lda = lda, .ldb = s->K, .ldc = s->N, .stride_a = s->stride_a,
			.stride_b = (int64_t)s->N * s->K, .stride_c = (int64_t)M * s->N,
			.batch = s->batch, .trans_b = 1,
		};
		if (!a.w0 || !a.op.A || !a.op.C)
			return -ENOMEM;
		if (b->cu->MemsetD8Async(a.w0, 0x3c, wstride * copies, b->g->stream) ||
		    b->cu->MemsetD8Async(a.op.A, 0x3c, abytes, b->g->stream))
			return -EIO;
		for (int lt = !few; lt < 2; lt++) {
			a.lt = lt;
			t[lt] = time_graph(b, few_once, &a, copies < 40 ? 40 : copies);
			if (t[lt] <= 0)
				return -EIO;
			step[lt] += t[lt] * s->per_step;
		}
		step_bytes += (double)wb * s->per_step;
		char nb[16] = "";

		if (s->batch > 1)
			snprintf(nb, sizeof(nb), " x %u", s->batch);
		snprintf(shape, sizeof(shape), "M=%u %ux%u%s (%s)", M, s->N, s->K, nb, s->what);
		if (few)
			row(b, "gemm_few", shape, t[0], bytes, 0);
		row(b, "gemm_cublaslt", shape, t[1], bytes, 0);
		dfree_to(b, mark);
	}
	if (few)
		fprintf(tbl, "  decode GEMMs of small a step at M=%u: few-row kernel %.3f ms, cuBLASLt %.3f ms (%.2fx); the weights at the copy bandwidth %.3f ms\n",
			M, step[0] * 1e3, step[1] * 1e3, step[1] / step[0],
			step_bytes / b->copy_bw * 1e3);
	else
		fprintf(tbl, "  decode GEMMs of small a step at M=%u: cuBLASLt %.3f ms (%.2fx the weights at the copy bandwidth, %.3f ms)\n",
			M, step[1] * 1e3, step[1] / (step_bytes / b->copy_bw),
			step_bytes / b->copy_bw * 1e3);
	json_t *r = json_object();
	json_object_set_new(r, "kernel", json_string("decode_gemms_small"));
	json_object_set_new(r, "M", json_integer(M));
	if (few)
		json_object_set_new(r, "few_seconds_per_step", json_real(step[0]));
	json_object_set_new(r, "cublaslt_seconds_per_step", json_real(step[1]));
	json_object_set_new(r, "weight_bytes_per_step", json_real(step_bytes));
	json_object_set_new(r, "copy_bound_seconds", json_real(step_bytes / b->copy_bw));
	json_array_append_new(json_object_get(b->out, "kernels"), r);
	return 0;
}

/*
 * A --batch LIST of at most cap sizes of 1..max into out (*n of them),
 * for `what` (kernels, decode, prefill); s is cut up. 0, or a usage error
 * printed and -1.
 */
static int parse_batches(const char *what, char *s, uint64_t max, unsigned int cap,
			 uint64_t *out, unsigned int *n)
{
	unsigned int commas = 0;

	for (const char *c = s; *c; c++)
		commas += *c == ',';
	if (tool_list_has_empty(s)) {
		tool_err("%s: bad --batch '%s' (comma-separated sizes, each 1..%llu, none empty)",
			 what, s, (unsigned long long)max);
		return -1;
	}
	if (commas >= cap) {
		tool_err("%s: bad --batch '%s': at most %u values", what, s, cap);
		return -1;
	}
	*n = 0;
	for (char *tok = strtok(s, ","); tok; tok = strtok(NULL, ","))
		if (tool_parse_u64(tok, 1, max, &out[(*n)++])) {
			tool_err("%s: bad --batch value '%s' (1..%llu)", what, tok,
				 (unsigned long long)max);
			return -1;
		}
	return 0;
}

static void kusage(FILE *f)
{
	fprintf(f,
		"Usage: haccel-bench [--json] kernels [--quick] [--only NAME[,NAME...]]\n"
		"       [--index-heads N] [--context N] [--pages scattered|contiguous|shared]\n"
		"       [--batch N[,N...]]\n"
		"\n"
		"Time the CUDA kernels on shapes of the issue's targets, each next to the\n"
		"device copy bandwidth or the cuBLASLt bf16 GEMM rate measured first:\n"
		"  kda_decode    batch 1..256 sequences of 32 and 64 heads (128 x 128 state)\n"
		"  kda_chunked   one 8192-token prefill, 32 and 64 heads\n"
		"  indexer_topk  batch 1..64 queries at 64K context, 32 index heads, top-k 2048\n"
		"  sparse_mla    the same selections, 16 heads (32 and 64 too unless\n"
		"                --quick); launched back to back and replayed from\n"
		"                one CUDA graph\n"
		"  gemm          the decode GEMMs of the small preset at 1, 8, 16, 32\n"
		"                and 64 rows: the few-row kernel (up to 16 rows) and\n"
		"                cuBLASLt; a KDA layer's input projections (all six,\n"
		"                the three small ones) as one group and one by one,\n"
		"                at 1 to 64 rows\n"
		"  --quick       fewer shapes\n"
		"  --only LIST   only these (indexer_topk and sparse_mla run\n"
		"                together: sparse MLA reads the indexer's selections)\n"
		"  --index-heads N  the indexer's heads, 1..128 (default 32; the small\n"
		"                preset has 16)\n"
		"  --context N   the indexer's and sparse MLA's context, a multiple of\n"
		"                64 from 2048 to 262144 (default 65536)\n"
		"  --pages P     where each sequence's KV pages lie: scattered (default:\n"
		"                page p of sequence s at p * batch + s, as sequences that\n"
		"                grew together leave them), contiguous (a run a sequence)\n"
		"                or shared (every query reads sequence 0's pages: the\n"
		"                records stay in the L2 cache where they fit, so the\n"
		"                rates are the kernels' own, not the memory's)\n"
		"  --batch LIST  the indexer's and sparse MLA's batches, 1..128 queries\n"
		"                each, at most 8 (default 1,32,64; --quick 32)\n");
}

int bench_kernels(int argc, char **argv, int json)
{
	static const char *const names[] = { "kda_decode", "kda_chunked", "indexer_topk",
					      "sparse_mla", "gemm" };
	struct gb b = { 0 };
	bool quick = false, want[5] = { true, true, true, true, true };
	struct dsa_opts dop = { .IH = 32, .ctx = DSA_CTX };
	uint64_t v, Ds[8] = { 1, 32, 64 };
	unsigned int nd = 3;
	bool dset = false;
	int ret;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--quick")) {
			quick = true;
		} else if (!strcmp(argv[i], "--index-heads") && i + 1 < argc) {
			if (tool_parse_u64(argv[++i], 1, 128, &v)) {
				tool_err("kernels: bad --index-heads '%s' (1..128)", argv[i]);
				return EXIT_USAGE;
			}
			dop.IH = (uint32_t)v;
		} else if (!strcmp(argv[i], "--context") && i + 1 < argc) {
			if (tool_parse_u64(argv[++i], 2048, 262144, &v) || v % 64) {
				tool_err("kernels: bad --context '%s' "
					 "(a multiple of 64, 2048..262144)", argv[i]);
				return EXIT_USAGE;
			}
			dop.ctx = (uint32_t)v;
		} else if (!strcmp(argv[i], "--pages") && i + 1 < argc) {
			i++;
			if (!strcmp(argv[i], "scattered")) {
				dop.pages = PAGES_SCATTERED;
			} else if (!strcmp(argv[i], "contiguous")) {
				dop.pages = PAGES_CONTIGUOUS;
			} else if (!strcmp(argv[i], "shared")) {
				dop.pages = PAGES_SHARED;
			} else {
				tool_err("kernels: bad --pages '%s' (scattered, contiguous or shared)",
					 argv[i]);
				return EXIT_USAGE;
			}
		} else if (!strcmp(argv[i], "--batch") && i + 1 < argc) {
			if (parse_batches("kernels", argv[++i], 128, 8, Ds, &nd))
				return EXIT_USAGE;
			dset = true;
		} else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
			char *s = argv[++i], *tok;

			if (tool_list_has_empty(s)) {
				tool_err("kernels: bad --only '%s' (comma-separated names, none empty)",
					 s);
				return EXIT_USAGE;
			}
			memset(want, 0, sizeof(want));
			for (tok = strtok(s, ","); tok; tok = strtok(NULL, ",")) {
				unsigned int k = 0;

				while (k < 5 && strcmp(tok, names[k]))
					k++;
				if (k == 5) {
					tool_err("kernels: unknown kernel '%s' (kda_decode, kda_chunked, indexer_topk, sparse_mla, gemm)",
						 tok);
					return EXIT_USAGE;
				}
				want[k] = true;
			}
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			kusage(stdout);
			return EXIT_OK;
		} else if (argv[i][0] != '-') {
			tool_err("kernels: unexpected argument '%s'", argv[i]);
			kusage(stderr);
			return EXIT_USAGE;
		} else {
			tool_err("kernels: unknown option '%s'", argv[i]);
			kusage(stderr);
			return EXIT_USAGE;
		}
	}
	ret = gpu_start(&b);
	if (ret) {
		haccel_close(b.ctx);
		return EXIT_FAIL;
	}
	b.out = json_object();
	json_object_set_new(b.out, "kernels", json_array());
	/* Under --json the table goes to stderr, stdout carries the JSON. */
	tbl = json ? stderr : stdout;
	ret = ceilings(&b);
	const uint32_t Bs[] = { 1, 16, 64, 128, 256 }, Hs[] = { 32, 64 };
	for (unsigned int h = 0; want[0] && !ret && h < 2; h++)
		for (unsigned int i = 0; !ret && i < 5; i++)
			if (!quick || Bs[i] == 64)
				ret = bench_kda(&b, Hs[h], Bs[i], 0, false);
	for (unsigned int h = 0; want[1] && !ret && h < 2; h++)
		ret = bench_kda(&b, Hs[h], 0, 8192, true);
	/* the DSA batches: --batch's, else 1, 32 and 64 (--quick: 32) */
	bool dsa = want[2] || want[3];
	for (unsigned int i = 0; dsa && !ret && i < nd; i++)
		if (!quick || dset || Ds[i] == 32)
			ret = bench_dsa(&b, (uint32_t)Ds[i], &dop, 16, 2048, true);
	/* more heads (the kimi and glm presets' 32 and 64), sparse MLA's
	 * rows alone */
	const uint32_t Hm[] = { 32, 64 };
	for (unsigned int h = 0; dsa && !quick && h < 2; h++)
		for (unsigned int i = 0; !ret && i < nd; i++)
			ret = bench_dsa(&b, (uint32_t)Ds[i], &dop, Hm[h], 2048, false);
	/* the decode buckets up to 64 rows */
	const uint32_t Ms[] = { 1, 8, 16, 32, 64 };
	const unsigned int n_ms = sizeof(Ms) / sizeof(Ms[0]);

	for (unsigned int i = 0; want[4] && !ret && i < n_ms; i++)
		if (!quick || Ms[i] == 1)
			ret = bench_gemm(&b, Ms[i]);
	for (unsigned int i = 0; want[4] && !ret && i < n_ms; i++)
		if (!quick || Ms[i] == 1)
			ret = bench_group(&b, Ms[i]);
	if (ret) {
		char err[512];
		haccel_last_error(b.ctx, err, sizeof(err));
		tool_err("kernels: %s", err[0] ? err : strerror(-ret));
		json_decref(b.out);
		gpu_stop(&b);
		return EXIT_FAIL;
	}
	if (json)
		tool_print_json(b.out);
	else
		json_decref(b.out);
	gpu_stop(&b);
	return EXIT_OK;
}

/* ------------------------------------------------------------------------ */
/* Decode and prefill of a model                                            */

/*
 * The decode sequences' pages hold what the pool's memory held (zeros on a
 * fresh one): identical index keys, every score tied, the selection's
 * worst case and no model's. Fill every DSA layer's index-key and KV
 * regions with random valid records instead (as bench_dsa makes them),
 * 8192 of them tiled over each region by device copies.
 */
static int fill_caches(struct gb *b, const struct haccel_model *m)
{
	enum { NREC = 8192 };
	unsigned int mark = b->n;
	int ret = 0;

	for (uint32_t l = 0; !ret && l < HACCEL__MAX_LAYERS; l++) {
		const struct haccel_kv_region *rg[2] = { &m->ik_reg[l], &m->kv_reg[l] };

		for (int r = 0; !ret && r < 2; r++) {
			uint32_t rec = rg[r]->bytes_per_token;
			uint8_t *h;
			uint64_t src, base = (uint64_t)(uintptr_t)rg[r]->base, chunk = (uint64_t)NREC * rec;

			if (!rg[r]->base || !rg[r]->bytes)
				continue;
			h = r ? records(NREC, rec, 512, false) : records(NREC, rec, 128, true);
			src = h ? dput(b, h, chunk) : 0;
			free(h);
			if (!src)
				ret = -ENOMEM;
			for (uint64_t off = 0; !ret && off < rg[r]->bytes; off += chunk)
				ret = b->cu->MemcpyDtoD(base + off, src,
							rg[r]->bytes - off < chunk ? rg[r]->bytes - off : chunk) ?
					      -EIO : 0;
		}
	}
	dfree_to(b, mark);
	return ret;
}

/*
 * decode --trace: `steps` more steps of the B sequences with CUPTI
 * recording kernels. Each step's window is CUPTI's clock read before and
 * after haccel_model_step, which returns once the stream is synchronised:
 * every kernel of the step starts and ends inside it, and nothing else
 * runs on the GPU meanwhile. Its GPU span is then first kernel start to
 * last kernel end. Failures of tracing itself are described in why.
 */
static int trace_decode(struct haccel_model *m, struct haccel_step_item *it, const uint32_t *seq,
			uint32_t B, const int32_t *toks, uint32_t steps, json_t *r, char *why,
			size_t why_len)
{
	uint64_t *w0 = calloc(steps, sizeof(*w0)), *w1 = calloc(steps, sizeof(*w1));
	double *host = calloc(steps, sizeof(*host));
	struct trace_result tr = { 0 };
	struct trace_summary s;
	char terr[400];
	int ret = -ENOMEM, sret;

	if (!w0 || !w1 || !host) {
		snprintf(why, why_len, "--trace: no memory for %u step windows", steps);
		goto out;
	}
	ret = trace_start(terr, sizeof(terr));
	if (ret) {
		snprintf(why, why_len, "--trace: %s", terr);
		goto out;
	}
	for (uint32_t k = 0; !ret && k < steps; k++) {
		for (uint32_t q = 0; q < B; q++)
			it[q] = (struct haccel_step_item){ seq[q], 1, &toks[k], NULL };
		w0[k] = trace_now();
		ret = haccel_model_step(m, it, B);
		w1[k] = trace_now();
		host[k] = (double)(w1[k] - w0[k]);
		trace_drain();
	}
	sret = trace_stop(&tr, terr, sizeof(terr));
	/* A failed step is the model's error (haccel_last_error). */
	if (ret)
		goto out;
	ret = sret;
	if (ret) {
		snprintf(why, why_len, "--trace: %s", terr);
		goto out;
	}
	ret = trace_gaps(tr.k, tr.n, w0, w1, steps, &s);
	if (ret) {
		snprintf(why, why_len, "--trace: no memory to sort %zu kernel records", tr.n);
		goto out;
	}
	if (tr.refused)
		tool_err("decode: --trace: warning: CUPTI's record pool ran dry %llu times: kernels are missing",
			 (unsigned long long)tr.refused);
	if (s.empty)
		tool_err("decode: --trace: warning: %zu of %u steps had no kernel recorded", s.empty, steps);
	double hstep = bench_median(host, steps);
	fprintf(tbl, "trace batch %u: step span %.3f ms, kernels busy %.3f ms, gaps %.3f ms (%.1f%% of the span), %g kernels and copies a step; host step %.3f ms\n",
		B, s.span_ns / 1e6, s.busy_ns / 1e6, s.gap_ns / 1e6, 100 * s.gap_fraction, s.kernels,
		hstep / 1e6);
	fprintf(tbl, "  %-60s %9s %10s %9s\n", "kernel (top by time)", "ms/step", "count/step",
		"% of busy");
	json_t *jt = json_object(), *top = json_array();
	double per = s.steps ? 1.0 / s.steps : 0;
	for (size_t i = 0; i < s.ntop; i++) {
		const struct trace_name *t = &s.top[i];
		json_t *e = json_object();

		fprintf(tbl, "  %-60.60s %9.3f %10.1f %8.1f%%\n", t->name, t->ns * per / 1e6,
			t->count * per, s.total_busy_ns ? 100.0 * t->ns / s.total_busy_ns : 0);
		json_object_set_new(e, "name", json_string(t->name));
		json_object_set_new(e, "seconds_per_step", json_real(t->ns * per / 1e9));
		json_object_set_new(e, "count_per_step", json_real(t->count * per));
		json_array_append_new(top, e);
	}
	json_t *jg = json_array();
	for (size_t i = 0; i < s.ngaps; i++) {
		const struct trace_gap *gp = &s.gaps[i];
		json_t *e = json_object();

		fprintf(tbl, "  gap after %.40s before %.40s: %.3f ms/step (%.1f a step)\n",
			gp->before, gp->after, gp->ns * per / 1e6, gp->count * per);
		json_object_set_new(e, "before", json_string(gp->before));
		json_object_set_new(e, "after", json_string(gp->after));
		json_object_set_new(e, "seconds_per_step", json_real(gp->ns * per / 1e9));
		json_object_set_new(e, "count_per_step", json_real(gp->count * per));
		json_array_append_new(jg, e);
	}
	json_object_set_new(jt, "gaps", jg);
	json_object_set_new(jt, "steps", json_integer((json_int_t)s.steps));
	json_object_set_new(jt, "span_s", json_real(s.span_ns / 1e9));
	json_object_set_new(jt, "busy_s", json_real(s.busy_ns / 1e9));
	json_object_set_new(jt, "gap_s", json_real(s.gap_ns / 1e9));
	json_object_set_new(jt, "gap_fraction", json_real(s.gap_fraction));
	json_object_set_new(jt, "kernels_per_step", json_real(s.kernels));
	json_object_set_new(jt, "host_step_s", json_real(hstep / 1e9));
	json_object_set_new(jt, "kernel_names", json_integer((json_int_t)s.names));
	json_object_set_new(jt, "records_refused", json_integer((json_int_t)tr.refused));
	json_object_set_new(jt, "top", top);
	json_object_set_new(r, "trace", jt);
out:
	trace_result_free(&tr);
	free(w0);
	free(w1);
	free(host);
	return ret;
}

static void dusage(FILE *f, const char *what)
{
	fprintf(f,
		"Usage: haccel-bench [--json] %s MODEL_DIR [--batch B[,B...]] [--context N]\n"
		"       [--no-graphs]%s\n"
		"\n"
		"decode: sequences at a context of N tokens (made without running the\n"
		"model: their KV pages are taken and filled with random valid index-key\n"
		"and KV records, 8192 distinct ones tiled over each layer's region),\n"
		"then timed one-token steps through haccel_model_step on the GPU, next to\n"
		"the step's bytes-moved roofline at the copy bandwidth measured first.\n"
		"prefill: one sequence of N tokens in chunks of the batch value, tokens/s\n"
		"next to the GEMM-rate bound of the model's matmul flops.\n"
		"Defaults: decode --batch 1,64 --context 32768 --steps 20; prefill\n"
		"--batch 2048 --context 8192.\n"
		"\n"
		"decode --trace: after the timed steps of each batch, as many more with\n"
		"CUPTI recording every kernel, copy and memset (those replayed from CUDA\n"
		"graphs too; copies and memsets count as kernels named in parentheses);\n"
		"per batch, the median step span (first kernel start to last kernel\n"
		"end), the time they ran (their union: overlapping ones count once),\n"
		"the gaps between kernels (span - busy) as a fraction of the span,\n"
		"records a step, the top 15 by time, and the 5 pairs of names around\n"
		"the most idle time. Needs libcupti at run time (libcupti.so.13, or the\n"
		"path in HACCEL_CUPTI_LIB) and a build with CUPTI's headers.\n",
		what, strcmp(what, "decode") ? "" : " [--steps N] [--trace]");
}

int bench_model(int argc, char **argv, int json, bool prefill)
{
	const char *what = prefill ? "prefill" : "decode", *dir = NULL;
	uint64_t batches[16] = { 1, 64 }, ctxn = prefill ? 8192 : 32768, steps = 20;
	unsigned int nb = 2;
	bool no_graphs = false, trace = false;
	struct gb b = { 0 };
	char why[512] = "";
	int ret = 0;

	if (prefill)
		batches[0] = 2048, nb = 1;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			dusage(stdout, what);
			return EXIT_OK;
		} else if (!strcmp(argv[i], "--no-graphs")) {
			no_graphs = true;
		} else if (!strcmp(argv[i], "--trace") && !prefill) {
			trace = true;
		} else if (!strcmp(argv[i], "--batch") && i + 1 < argc) {
			if (parse_batches(what, argv[++i], 4096, 16, batches, &nb))
				return EXIT_USAGE;
		} else if (!strcmp(argv[i], "--context") && i + 1 < argc) {
			if (tool_parse_u64(argv[++i], 1, 1u << 20, &ctxn)) {
				tool_err("%s: bad --context '%s' (1..1048576)", what, argv[i]);
				return EXIT_USAGE;
			}
		} else if (!strcmp(argv[i], "--steps") && i + 1 < argc && !prefill) {
			if (tool_parse_u64(argv[++i], 1, 100000, &steps)) {
				tool_err("%s: bad --steps '%s' (1..100000)", what, argv[i]);
				return EXIT_USAGE;
			}
		} else if (prefill && (!strcmp(argv[i], "--steps") || !strcmp(argv[i], "--trace"))) {
			tool_err("prefill: %s is for decode only", argv[i]);
			return EXIT_USAGE;
		} else if (argv[i][0] != '-' && !dir) {
			dir = argv[i];
		} else if (argv[i][0] != '-') {
			tool_err("%s: unexpected argument '%s' (give one MODEL_DIR)", what,
				 argv[i]);
			dusage(stderr, what);
			return EXIT_USAGE;
		} else {
			tool_err("%s: unknown option '%s'", what, argv[i]);
			dusage(stderr, what);
			return EXIT_USAGE;
		}
	}
	if (!dir || !nb) {
		dusage(stderr, what);
		return EXIT_USAGE;
	}
	/* libcupti before the GPU: a run that cannot trace stops at once. */
	if (trace && trace_load(why, sizeof(why))) {
		tool_err("%s: --trace: %s", what, why);
		return EXIT_FAIL;
	}
	if (gpu_start(&b)) {
		haccel_close(b.ctx);
		return EXIT_FAIL;
	}
	b.out = json_object();
	json_object_set_new(b.out, "kernels", json_array());
	tbl = json ? stderr : stdout;
	ret = ceilings(&b);
	json_t *res = json_array();
	for (unsigned int bi = 0; !ret && bi < nb; bi++) {
		struct haccel_model_params mp;
		struct haccel_model *m = NULL;
		uint32_t B = prefill ? 1 : (uint32_t)batches[bi];
		uint32_t chunk = prefill ? (uint32_t)batches[bi] : 1;
		/* Tokens a sequence takes: the context, warm-up, timed and traced steps. */
		uint32_t ntok = (uint32_t)ctxn + (uint32_t)steps * (trace ? 2 : 1) + 8;

		haccel_model_params_init(&mp);
		mp.device = HACCEL_DEVICE_CUDA;
		mp.flags = no_graphs ? HACCEL_MODEL_NO_GRAPHS : 0;
		mp.load_flags = 0;
		mp.max_seqs = B;
		mp.max_seq_tokens = ntok;
		mp.max_step_tokens = prefill ? chunk : (B < 256 ? 256 : B);
		ret = haccel_model_open(b.ctx, dir, &mp, &m);
		if (ret)
			break;
		uint32_t *seq = calloc(B, 4), V = m->c.vocab_size;
		int32_t *toks = malloc((size_t)ntok * 4);
		struct haccel_step_item *it = calloc(B, sizeof(*it));
		for (uint32_t s = 0; !ret && s < B; s++) {
			ret = haccel_model_seq_create(m, &seq[s]);
			for (uint32_t i = 0; i < ntok; i++)
				toks[i] = (int32_t)(((uint64_t)s * 7919 + i * 31 + i / 7) % V);
			if (!ret && !prefill)
				ret = haccel__model_seq_extend(m, seq[s], toks, (uint32_t)ctxn);
		}
		if (!ret && !prefill)
			ret = fill_caches(&b, m);
		double t0 = 0, dt;
		json_t *r = json_object();
		if (!ret && !prefill) {
			/* Two untimed steps: the bucket's direct run and capture. */
			for (uint32_t k = 0; !ret && k < steps + 2; k++) {
				if (k == 2)
					t0 = (double)tool_now_ns();
				for (uint32_t s = 0; s < B; s++)
					it[s] = (struct haccel_step_item){ seq[s], 1, &toks[k], NULL };
				ret = haccel_model_step(m, it, B);
			}
			dt = ((double)tool_now_ns() - t0) / 1e9 / steps;
			struct roof_bytes rb;

			roof_decode_bytes(&m->c, m->n_params, B, (uint32_t)ctxn, &rb);
			double bytes = rb.total, roof = bytes / b.copy_bw;
			if (!ret)
				fprintf(tbl, "decode %s batch %u, context %llu: %.3f ms/step, %.0f tokens/s; roofline %.3f ms (%.2f GB at copy bandwidth): %.2fx of it, %.1f%% of copy\n",
				       dir, B, (unsigned long long)ctxn, dt * 1e3, B / dt, roof * 1e3,
				       bytes / 1e9, dt / roof, 100 * roof / dt);
			json_object_set_new(r, "batch", json_integer(B));
			json_object_set_new(r, "context", json_integer((json_int_t)ctxn));
			json_object_set_new(r, "seconds_per_step", json_real(dt));
			json_object_set_new(r, "tokens_per_s", json_real(B / dt));
			json_object_set_new(r, "roofline_bytes", json_real(bytes));
			json_object_set_new(r, "roofline_parts",
					    json_pack("{s:f, s:f, s:f, s:f, s:f}", "weights",
						      rb.weights, "kda_state", rb.kda_state,
						      "conv_tails", rb.conv_tails, "index_keys",
						      rb.index_keys, "kv_records", rb.kv_records));
			json_object_set_new(r, "roofline_seconds", json_real(roof));
			json_object_set_new(r, "x_roofline", json_real(dt / roof));
			if (!ret && trace)
				ret = trace_decode(m, it, seq, B, toks + steps + 2, (uint32_t)steps, r, why,
						   sizeof(why));
		} else if (!ret) {
			uint32_t done = 0;
			t0 = (double)tool_now_ns();
			while (!ret && done < ctxn) {
				uint32_t c = ctxn - done < chunk ? (uint32_t)ctxn - done : chunk;
				it[0] = (struct haccel_step_item){ seq[0], c, toks + done, NULL };
				ret = haccel_model_step(m, it, 1);
				done += c;
			}
			dt = ((double)tool_now_ns() - t0) / 1e9;
			double flops = 2.0 * (double)m->n_params * ctxn;
			if (!ret)
				fprintf(tbl, "prefill %s: %llu tokens in chunks of %u: %.3f s, %.0f tokens/s; matmul flops at the GEMM rate: %.3f s (%.1f%% of it)\n",
				       dir, (unsigned long long)ctxn, chunk, dt, ctxn / dt,
				       flops / b.gemm_flops, 100 * flops / b.gemm_flops / dt);
			json_object_set_new(r, "tokens", json_integer((json_int_t)ctxn));
			json_object_set_new(r, "chunk", json_integer(chunk));
			json_object_set_new(r, "seconds", json_real(dt));
			json_object_set_new(r, "tokens_per_s", json_real(ctxn / dt));
			json_object_set_new(r, "gemm_bound_seconds", json_real(flops / b.gemm_flops));
		}
		json_array_append_new(res, r);
		free(seq);
		free(toks);
		free(it);
		haccel_model_close(m);
	}
	json_object_set_new(b.out, what, res);
	if (ret) {
		char err[512];
		haccel_last_error(b.ctx, err, sizeof(err));
		if (why[0])
			tool_err("%s: %s", what, why);
		else
			tool_err("%s: %s", what, err[0] ? err : strerror(-ret));
		json_decref(b.out);
		gpu_stop(&b);
		return EXIT_FAIL;
	}
	if (json)
		tool_print_json(b.out);
	else
		json_decref(b.out);
	gpu_stop(&b);
	return EXIT_OK;
}
