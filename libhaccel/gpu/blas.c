// SPDX-License-Identifier: MIT
/* cuBLASLt at run time; see blas.h. */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "core/log.h"
#include "gpu/blas.h"
#include "gpu/mem.h"

/* cuBLASLt ABI (cublasLt.h, cublas_api.h, library_types.h). */
#define LT_R_32F 0
#define LT_R_16BF 14
#define LT_COMPUTE_32F 68
#define LT_OP_N 0
#define LT_OP_T 1
#define LT_DESC_TRANSA 3
#define LT_DESC_TRANSB 4
#define LT_DESC_EPILOGUE 7
#define LT_DESC_BIAS_POINTER 8
#define LT_EPILOGUE_DEFAULT 1
#define LT_EPILOGUE_BIAS 4
#define LT_LAYOUT_COLS 3
#define LT_LAYOUT_BATCH_COUNT 5
#define LT_LAYOUT_STRIDED_BATCH_OFFSET 6
#define LT_PREF_MAX_WORKSPACE_BYTES 1

struct lt_heuristic {             /* cublasLtMatmulHeuristicResult_t */
	uint64_t algo[8];
	size_t workspace;
	int state;
	float waves;
	int reserved[4];
};

#define WORKSPACE_BYTES (32u << 20)
/* A decode bucket uses about 22 shapes (batched, accumulating and plain
 * GEMMs), and so does each size of rows a prefill chunk rounds to
 * (haccel__gemm_rows: four an octave), and each row count the rounded
 * shape's algorithm does not serve; past MAX_SHAPES the least recently
 * used one makes room. */
#define MAX_SHAPES HACCEL__GEMM_MAX_SHAPES

struct shape {
	struct haccel__gemm key;  /* the first call's (its pointers unused); M the rows
				   * it was made for */
	bool exact;               /* for its M alone (HACCEL_GEMM_ROWS=exact, a batch
				   * layout that cannot share, or rows its rounded
				   * shape's algorithm refused) */
	uint64_t cols;            /* the rows its layouts hold now */
	uint64_t served;          /* the row count cublasLtMatmulAlgoCheck last
				   * accepted for its algorithm (0 none) */
	void *desc, *la, *lb, *lc;
	uint64_t algo[8];
	uint64_t used;            /* the blas tick of its last call */
};

struct haccel__blas {
	pthread_mutex_t lock;     /* the shape table (not ctx->lock: errors take it) */
	void *lib;
	void *handle;
	void *pref;
	/* One workspace per stream that runs GEMMs (parallel branches must
	 * not share one), made the first time a stream is seen (the models'
	 * branch streams are the context's, so models add none). */
	struct {
		void *stream;
		uint64_t ws;
	} lanes[16];
	uint32_t n_lanes;
	int (*Create)(void **h);
	int (*Destroy)(void *h);
	const char *(*StatusName)(int s);
	int (*DescCreate)(void **d, int compute, int scale);
	int (*DescDestroy)(void *d);
	int (*DescSet)(void *d, int attr, const void *buf, size_t n);
	int (*LayoutCreate)(void **l, int type, uint64_t rows, uint64_t cols, int64_t ld);
	int (*LayoutDestroy)(void *l);
	int (*LayoutSet)(void *l, int attr, const void *buf, size_t n);
	int (*PrefCreate)(void **p);
	int (*PrefDestroy)(void *p);
	int (*PrefSet)(void *p, int attr, const void *buf, size_t n);
	int (*Heuristic)(void *h, void *desc, void *a, void *b, void *c, void *d, void *pref,
			 int n, struct lt_heuristic *out, int *got);
	int (*AlgoCheck)(void *h, void *desc, void *a, void *b, void *c, void *d,
			 const void *algo, struct lt_heuristic *out);
	int (*Matmul)(void *h, void *desc, const void *alpha, uint64_t A, void *la, uint64_t B,
		      void *lb, const void *beta, uint64_t C, void *lc, uint64_t D, void *ld,
		      const void *algo, uint64_t ws, size_t ws_bytes, void *stream);
	struct shape *shapes;
	uint32_t n_shapes;
	uint64_t tick;            /* calls so far, for the least recently used */
	uint64_t evicted;         /* shapes dropped to make room */
	uint64_t refused;         /* row counts a rounded shape's algorithm refused */
};

static const char *const lib_names[] = {
	"libcublasLt.so.13", "libcublasLt.so.12", "/usr/local/cuda/lib64/libcublasLt.so.13",
	"/usr/local/cuda/lib64/libcublasLt.so.12", "libcublasLt.so",
};

static int lt_fail_b(struct haccel__gpu *g, struct haccel__blas *b, int st, const char *what)
{
	return haccel__fail(g->ctx, -EIO, "cublasLt: %s failed: %s (%d)", what,
			    b && b->StatusName ? b->StatusName(st) : "?", st);
}

static void blas_free(struct haccel__gpu *g, struct haccel__blas *b);

/* Loads cuBLASLt for g, publishing g->blas only when it is whole; callers
 * hold blas_load_lock (two models' first GEMMs may meet). */
static pthread_mutex_t blas_load_lock = PTHREAD_MUTEX_INITIALIZER;

static int blas_load(struct haccel__gpu *g)
{
	struct haccel__blas *b;
	uint64_t ws = WORKSPACE_BYTES;
	int st, ret;

	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	for (size_t i = 0; !b->lib && i < sizeof(lib_names) / sizeof(lib_names[0]); i++)
		b->lib = dlopen(lib_names[i], RTLD_NOW | RTLD_LOCAL);
	if (!b->lib) {
		free(b);
		return haccel__fail(g->ctx, -ENODEV,
				    "cublasLt: libcublasLt.so.13 (or .12) not found on the library path nor in /usr/local/cuda/lib64");
	}
#define SYM(field, name)                                                                  \
	if (!(*(void **)&b->field = dlsym(b->lib, name))) {                               \
		dlclose(b->lib);                                                          \
		free(b);                                                                  \
		return haccel__fail(g->ctx, -ENODEV, "cublasLt: the library lacks %s", name); \
	}
	SYM(Create, "cublasLtCreate");
	SYM(Destroy, "cublasLtDestroy");
	SYM(StatusName, "cublasLtGetStatusName");
	SYM(DescCreate, "cublasLtMatmulDescCreate");
	SYM(DescDestroy, "cublasLtMatmulDescDestroy");
	SYM(DescSet, "cublasLtMatmulDescSetAttribute");
	SYM(LayoutCreate, "cublasLtMatrixLayoutCreate");
	SYM(LayoutDestroy, "cublasLtMatrixLayoutDestroy");
	SYM(LayoutSet, "cublasLtMatrixLayoutSetAttribute");
	SYM(PrefCreate, "cublasLtMatmulPreferenceCreate");
	SYM(PrefDestroy, "cublasLtMatmulPreferenceDestroy");
	SYM(PrefSet, "cublasLtMatmulPreferenceSetAttribute");
	SYM(Heuristic, "cublasLtMatmulAlgoGetHeuristic");
	SYM(AlgoCheck, "cublasLtMatmulAlgoCheck");
	SYM(Matmul, "cublasLtMatmul");
#undef SYM
	pthread_mutex_init(&b->lock, NULL);
	b->shapes = calloc(MAX_SHAPES, sizeof(*b->shapes));
	ret = b->shapes ? 0 : -ENOMEM;
	if (!ret && (st = b->Create(&b->handle)) != 0)
		ret = lt_fail_b(g, b, st, "cublasLtCreate");
	if (!ret && (st = b->PrefCreate(&b->pref)) != 0)
		ret = lt_fail_b(g, b, st, "cublasLtMatmulPreferenceCreate");
	if (!ret && (st = b->PrefSet(b->pref, LT_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws))) != 0)
		ret = lt_fail_b(g, b, st, "preference workspace");
	if (ret)
		blas_free(g, b);
	else
		__atomic_store_n(&g->blas, b, __ATOMIC_RELEASE);
	return ret;
}

/* Destroy what a shape holds (what shape_make made of it, if it failed
 * half way). */
static void shape_drop(struct haccel__blas *b, struct shape *s)
{
	if (s->la)
		b->LayoutDestroy(s->la);
	if (s->lb)
		b->LayoutDestroy(s->lb);
	if (s->lc)
		b->LayoutDestroy(s->lc);
	if (s->desc)
		b->DescDestroy(s->desc);
	memset(s, 0, sizeof(*s));
}

void haccel__blas_fini(struct haccel__gpu *g)
{
	if (g->blas)
		blas_free(g, g->blas);
	g->blas = NULL;
}

static void blas_free(struct haccel__gpu *g, struct haccel__blas *b)
{
	for (uint32_t i = 0; i < b->n_shapes; i++)
		shape_drop(b, &b->shapes[i]);
	if (b->pref)
		b->PrefDestroy(b->pref);
	if (b->handle)
		b->Destroy(b->handle);
	for (uint32_t i = 0; i < b->n_lanes; i++)
		haccel__gpu_mem_free(g->ctx, b->lanes[i].ws, WORKSPACE_BYTES);
	free(b->shapes);
	pthread_mutex_destroy(&b->lock);
	dlclose(b->lib);
	free(b);
}

static int lt_fail(struct haccel__gpu *g, int st, const char *what)
{
	return lt_fail_b(g, g->blas, st, what);
}

static int layout(struct haccel__blas *b, void **l, int type, uint64_t rows, uint64_t cols,
		  int64_t ld, uint32_t batch, int64_t stride)
{
	int32_t n = (int32_t)batch;
	int st = b->LayoutCreate(l, type, rows, cols, ld);

	if (!st && batch > 1) {
		st = b->LayoutSet(*l, LT_LAYOUT_BATCH_COUNT, &n, sizeof(n));
		if (!st)
			st = b->LayoutSet(*l, LT_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride));
	}
	return st;
}

/*
 * Row-major C = A . op(B) is column-major C^T = op(B)^T . A^T: cuBLASLt's
 * "A" is our B (N x K: stored [N][K] row-major is K x N column-major, so
 * transposed when trans_b), its "B" is our A (K x M column-major, ld lda),
 * and C^T is N x M column-major with ld ldc.
 */
static int shape_make(struct haccel__gpu *g, const struct haccel__gemm *k, struct shape *s)
{
	struct haccel__blas *b = g->blas;
	int32_t ta = k->trans_b ? LT_OP_T : LT_OP_N, tb = LT_OP_N;
	uint32_t epi = k->bias ? LT_EPILOGUE_BIAS : LT_EPILOGUE_DEFAULT;
	struct lt_heuristic h;
	int got = 0, st;

	memset(s, 0, sizeof(*s));
	s->key = *k;
	s->cols = k->M;
	if ((st = b->DescCreate(&s->desc, LT_COMPUTE_32F, LT_R_32F)) ||
	    (st = b->DescSet(s->desc, LT_DESC_TRANSA, &ta, sizeof(ta))) ||
	    (st = b->DescSet(s->desc, LT_DESC_TRANSB, &tb, sizeof(tb))) ||
	    (st = b->DescSet(s->desc, LT_DESC_EPILOGUE, &epi, sizeof(epi))))
		return lt_fail(g, st, "matmul descriptor");
	if (k->trans_b)
		st = layout(b, &s->la, LT_R_16BF, k->K, k->N, k->ldb, k->batch, k->stride_b);
	else
		st = layout(b, &s->la, LT_R_16BF, k->N, k->K, k->ldb, k->batch, k->stride_b);
	if (!st)
		st = layout(b, &s->lb, LT_R_16BF, k->K, k->M, k->lda, k->batch, k->stride_a);
	if (!st)
		st = layout(b, &s->lc, k->c_bf16 ? LT_R_16BF : LT_R_32F, k->N, k->M, k->ldc,
			    k->batch, k->stride_c);
	if (st)
		return lt_fail(g, st, "matrix layout");
	if (k->bias) {
		/* The heuristic needs a pointer set; the real one goes in per call. */
		uint64_t p = k->bias;

		st = b->DescSet(s->desc, LT_DESC_BIAS_POINTER, &p, sizeof(p));
		if (st)
			return lt_fail(g, st, "bias pointer");
	}
	st = b->Heuristic(b->handle, s->desc, s->la, s->lb, s->lc, s->lc, b->pref, 1, &h, &got);
	if (st || got < 1)
		return haccel__fail(g->ctx, -ENOTSUP,
				    "cublasLt: no bf16 algorithm for %ux%ux%u (batch %u, lda %lld ldb %lld ldc %lld)",
				    k->M, k->N, k->K, k->batch, (long long)k->lda, (long long)k->ldb,
				    (long long)k->ldc);
	memcpy(s->algo, h.algo, sizeof(s->algo));
	return 0;
}

uint32_t haccel__gemm_rows(uint32_t M)
{
	uint32_t p, q;
	uint64_t r;

	if (M <= 16)
		return M;
	p = 1u << (31 - __builtin_clz(M));
	q = p / 4;
	r = ((uint64_t)M + q - 1) / q * q;
	/* (cuBLASLt's layouts take rows an int32_t holds) */
	return r > INT32_MAX ? M : (uint32_t)r;
}

static int same_shape(const struct haccel__gemm *a, const struct haccel__gemm *b)
{
	return a->M == b->M && a->N == b->N && a->K == b->K && a->lda == b->lda &&
	       a->ldb == b->ldb && a->ldc == b->ldc && a->stride_a == b->stride_a &&
	       a->stride_b == b->stride_b && a->stride_c == b->stride_c &&
	       (a->batch > 1 ? a->batch : 1) == (b->batch > 1 ? b->batch : 1) &&
	       a->trans_b == b->trans_b && !a->bias == !b->bias && !a->accumulate == !b->accumulate &&
	       !a->c_bf16 == !b->c_bf16;
}

static struct shape *shape_find(struct haccel__blas *b, const struct haccel__gemm *k, bool exact)
{
	for (uint32_t i = 0; i < b->n_shapes; i++)
		if (b->shapes[i].exact == exact && same_shape(&b->shapes[i].key, k))
			return &b->shapes[i];
	return NULL;
}

/* A new shape for k (for its M rows, exact or rounded) in *out, the least
 * recently used one making room in a full table (which moves the last
 * shape: pointers into the table from before the call are stale). */
static int shape_add(struct haccel__gpu *g, struct haccel__blas *b, const struct haccel__gemm *k,
		     bool exact, struct shape **out)
{
	uint32_t slot = b->n_shapes;
	int ret;

	if (slot == MAX_SHAPES) {
		slot = 0;
		for (uint32_t i = 1; i < b->n_shapes; i++)
			if (b->shapes[i].used < b->shapes[slot].used)
				slot = i;
		shape_drop(b, &b->shapes[slot]);
		if (!b->evicted++)
			haccel__info(g->ctx,
				     "cublasLt: %d GEMM shapes cached: the least recently used make room from now on",
				     MAX_SHAPES);
		/* The table stays dense: the last shape fills the hole until
		 * the new one takes it. */
		b->shapes[slot] = b->shapes[--b->n_shapes];
		slot = b->n_shapes;
	}
	ret = shape_make(g, k, &b->shapes[slot]);
	if (ret) {
		shape_drop(b, &b->shapes[slot]);
		return ret;
	}
	b->shapes[slot].exact = exact;
	*out = &b->shapes[b->n_shapes++];
	return 0;
}

/* The shape's layouts set to M rows (cuBLASLt's columns of its B and C). */
static int shape_cols(struct haccel__gpu *g, struct haccel__blas *b, struct shape *s, uint32_t M)
{
	uint64_t cols = M;
	int st;

	if (s->cols == cols)
		return 0;
	if ((st = b->LayoutSet(s->lb, LT_LAYOUT_COLS, &cols, sizeof(cols))) != 0 ||
	    (st = b->LayoutSet(s->lc, LT_LAYOUT_COLS, &cols, sizeof(cols))) != 0) {
		/* half set: the next call sets both again */
		s->cols = 0;
		return lt_fail(g, st, "matrix layout rows");
	}
	s->cols = cols;
	return 0;
}

/*
 * Whether a GEMM may share the shape made for R rows (R >= its M): one
 * that is not batched, or a batched one whose batches' rows of A and C
 * are interleaved with each other's (a stride below the row pitch: the
 * heads of one token's row) or lie R rows or more apart (A: or shared,
 * stride 0), so that the layouts at R rows, which the heuristic sees, do
 * not overlap where op's do not.
 */
static bool rows_shareable(const struct haccel__gemm *op, uint32_t R)
{
	if (op->batch <= 1)
		return true;
	return op->stride_a >= 0 && op->stride_c >= 0 &&
	       (op->stride_a == 0 || op->stride_a < op->lda ||
		op->stride_a >= (int64_t)R * op->lda) &&
	       (op->stride_c < op->ldc || op->stride_c >= (int64_t)R * op->ldc);
}

/* Whether the shape's algorithm serves the rows its layouts now hold,
 * asked of cuBLASLt once for the same rows in a row (a prefill's chunks
 * repeat theirs; g->gemm_rows_refuse: a test's way to make it refuse). */
static bool algo_serves(struct haccel__gpu *g, struct haccel__blas *b, struct shape *s)
{
	struct lt_heuristic h;

	if (g->gemm_rows_refuse)
		return false;
	if (s->served == s->cols)
		return true;
	if (b->AlgoCheck(b->handle, s->desc, s->la, s->lb, s->lc, s->lc, s->algo, &h) ||
	    h.workspace > WORKSPACE_BYTES)
		return false;
	s->served = s->cols;
	return true;
}

/*
 * The shape for op, its layouts set to op's rows: a GEMM shares the shape
 * made for its rows rounded up (haccel__gemm_rows; where rows_shareable),
 * with that shape's algorithm where cuBLASLt says it serves op's rows
 * (cublasLtMatmulAlgoCheck, within the workspace), else with a shape made
 * for op's rows alone, which later calls of those rows find first; so a
 * row count always runs the same algorithm. HACCEL_GEMM_ROWS=exact gives
 * every row count a shape of its own.
 */
static int shape_for(struct haccel__gpu *g, struct haccel__blas *b, const struct haccel__gemm *op,
		     struct shape **out)
{
	struct haccel__gemm key = *op;
	uint32_t R = haccel__gemm_rows(op->M);
	bool exact = g->gemm_rows_exact || !rows_shareable(op, R);
	struct shape *s = NULL;
	int ret = 0;

	if (!exact) {
		key.M = R;
		/* rows the shared shape's algorithm refused before */
		if (R != op->M)
			s = shape_find(b, op, true);
	}
	if (!s && !(s = shape_find(b, &key, exact)))
		ret = shape_add(g, b, &key, exact, &s);
	if (!ret)
		s->used = ++b->tick;
	/* (an exact shape's layouts always hold its rows) */
	if (ret || s->exact) {
		*out = s;
		return ret;
	}
	ret = shape_cols(g, b, s, op->M);
	if (ret || R == op->M || algo_serves(g, b, s)) {
		*out = s;
		return ret;
	}
	if (!b->refused++)
		haccel__info(g->ctx,
			     "cublasLt: the algorithm for %u rows does not serve %u: a shape of their own",
			     R, op->M);
	ret = shape_add(g, b, op, true, &s);
	if (!ret)
		s->used = ++b->tick;
	*out = s;
	return ret;
}

void haccel__blas_counts(struct haccel__gpu *g, struct haccel__blas_counts *c)
{
	struct haccel__blas *b = __atomic_load_n(&g->blas, __ATOMIC_ACQUIRE);

	memset(c, 0, sizeof(*c));
	if (!b)
		return;
	pthread_mutex_lock(&b->lock);
	c->shapes = b->n_shapes;
	for (uint32_t i = 0; i < b->n_shapes; i++)
		c->exact += b->shapes[i].exact;
	c->evicted = b->evicted;
	c->refused = b->refused;
	pthread_mutex_unlock(&b->lock);
}

/* The layouts the few-row kernels read (blas.h), whatever M. */
static bool few_layout(const struct haccel__gemm *k)
{
	bool batched = k->batch > 1;

	return k->trans_b && !(k->c_bf16 && k->accumulate) && k->K % 8 == 0 &&
	       k->lda % 8 == 0 && k->ldb % 8 == 0 && k->lda >= k->K && k->ldb >= k->K &&
	       k->ldc >= k->N && k->A % 16 == 0 && k->B % 16 == 0 &&
	       k->C % (k->c_bf16 ? 2 : 4) == 0 && k->bias % 4 == 0 &&
	       (!batched || (k->stride_a % 8 == 0 && k->stride_b % 8 == 0)) &&
	       k->batch <= 65535 && k->N <= 0x7fffffffu;
}

/* The shapes haccel__gemm_few takes (blas.h). */
static bool few_fits(const struct haccel__gemm *k)
{
	return k->M <= HACCEL__GEMM_FEW_ROWS && few_layout(k);
}

/* Blocks (or clusters) for nt tiles and room for cap of them in a wave:
 * as many as keep every one on an equal count of tiles. */
static uint32_t few_spread(uint32_t nt, uint32_t cap)
{
	uint32_t per = (nt + cap - 1) / cap;

	return (nt + per - 1) / per;
}

/* Launch the few-row kernel for a shape few_fits took. */
static int few_launch(struct haccel__gpu *g, void *stream, const struct haccel__gemm *op)
{
	uint32_t nt = (op->N + 15) / 16, batch = op->batch > 1 ? op->batch : 1;
	uint32_t acc = op->accumulate ? 1 : 0, cbf = op->c_bf16 ? 1 : 0, cap;
	uint64_t C = op->C, A = op->A, B = op->B, bias = op->bias;
	void *fn;
	int ret;

	if (!op->M || !op->N)
		return 0;
	ret = haccel__gpu_fn(g, op->M <= 8 ? "haccel_gemm_few8" : "haccel_gemm_few16", &fn);
	if (ret)
		return ret;
	/* Two blocks an SM (the kernels' launch bounds) in one wave, each
	 * through an equal count of 16-row tiles. The batch strides are
	 * read only for blockIdx.y > 0. */
	cap = (2 * haccel__gpu_sms(g) + batch - 1) / batch;
	return HACCEL__LAUNCH(g, fn, few_spread(nt, cap), batch, 1, 256, 1, 1, 0, stream, &C, &A,
			      &B, &bias, (void *)&op->M, (void *)&op->N, (void *)&op->K,
			      (void *)&op->lda, (void *)&op->ldb, (void *)&op->ldc,
			      (void *)&op->stride_a, (void *)&op->stride_b, (void *)&op->stride_c,
			      &acc, &cbf);
}

int haccel__gemm_few(struct haccel__gpu *g, void *stream, const struct haccel__gemm *op)
{
	return few_fits(op) ? few_launch(g, stream, op) : -ENOTSUP;
}

/*
 * Weights of at least this many bytes a call go to cuBLASLt even when
 * the few-row kernel takes the shape: there its blocks' whole tiles leave
 * part of the last wave idle, and cuBLASLt streams them as fast or faster
 * (H200, graph-timed: at one row 90% against 82% of the copy bandwidth
 * for a 131 MB lm_head; at 16 rows, 65% against 59% for the 25 MB q/k/v
 * and 53% against 51% for the 23 MB MLP down). Below, the kernel is
 * ahead, by up to 2x on the small projections, and at up to 8 rows on
 * the MLP's 46 MB gate and up since its first weights stream before the
 * programmatic wait: 88% against 83% at one row, 85% against 82% at 8
 * (docs/benchmarks.md). The kernel for 9-16 rows reads twice the
 * activations of the one for up to 8.
 */
#define FEW_MAX_BYTES(M) ((M) <= 8 ? 64ull << 20 : 16ull << 20)

/* kernels/gemm.cu's struct gemm_m and gemm_grp, field for field. */
struct few_member {
	uint64_t A, B, C, bias;
	int64_t lda, ldb, ldc;
	uint32_t N, K, t0, c_bf16;
};

struct few_group {
	struct few_member m[HACCEL__GEMM_GROUP_MAX];
	uint32_t n, ntile, M, accumulate;
};

_Static_assert(sizeof(struct few_member) == 72 && sizeof(struct few_group) == 592,
	       "the layout of kernels/gemm.cu's gemm_m and gemm_grp");

/*
 * Groups of 17-64 rows are for small projections only, all of them under
 * FEW_GROUP_BIG_BYTES: either every member with K >= FEW_GROUP_MIN_K (K
 * split over clusters of FEW_KS blocks: few32g, few64g) or every member
 * with a shorter K (whole tiles a block: few32g1, few64g1). H200,
 * graph-timed: a KDA layer's f_a, beta and g_a (1 MB) 0.006 / 0.008 ms at
 * 32 / 64 rows as a group, 0.015 one by one on cuBLASLt; but one 3 MB
 * projection 0.014 ms at 64 rows against cuBLASLt's 0.006. They run on a
 * graph branch beside a large cuBLASLt GEMM (the KDA layer's q/k/v), one
 * block an SM: clusters of 4 rather than 8 leave it the SMs it needs,
 * decode of `small` at batch 64 2.447-2.454 -> 2.374-2.375 ms with the
 * short-K groups (docs/benchmarks.md, twenty-ninth entry).
 */
#define FEW_KS 4
#define FEW_GROUP_MIN_K 1024
#define FEW_GROUP_BIG_BYTES (4ull << 20)

int haccel__gemm_group(struct haccel__gpu *g, void *stream, const struct haccel__gemm *ops,
		       uint32_t n)
{
	struct few_group grp = { .n = n };
	uint64_t wbytes = 0;
	uint32_t nt = 0, cap, M = n ? ops[0].M : 0, ks = 1;
	void *fn;
	int ret;

	if (!n || n > HACCEL__GEMM_GROUP_MAX || g->gemm_lt_only || M > 64)
		return -ENOTSUP;
	/* 17-64 rows: K split over clusters where the first member's K is
	 * long, and then every member's must be. */
	if (M > HACCEL__GEMM_FEW_ROWS && ops[0].K >= FEW_GROUP_MIN_K)
		ks = FEW_KS;
	for (uint32_t i = 0; i < n; i++) {
		const struct haccel__gemm *op = &ops[i];

		if (!few_layout(op) || op->batch > 1 || op->M != M || !op->N ||
		    !op->accumulate != !ops[0].accumulate ||
		    (M > HACCEL__GEMM_FEW_ROWS && (op->K >= FEW_GROUP_MIN_K) != (ks > 1)))
			return -ENOTSUP;
		wbytes += (uint64_t)op->N * op->K * 2;
		grp.m[i] = (struct few_member){
			.A = op->A, .B = op->B, .C = op->C, .bias = op->bias, .lda = op->lda,
			.ldb = op->ldb, .ldc = op->ldc, .N = op->N, .K = op->K, .t0 = nt,
			.c_bf16 = op->c_bf16 ? 1 : 0,
		};
		nt += (op->N + 15) / 16;
	}
	if (wbytes >= (M <= HACCEL__GEMM_FEW_ROWS ? FEW_MAX_BYTES(M) : FEW_GROUP_BIG_BYTES))
		return -ENOTSUP;
	if (!M)
		return 0;
	grp.ntile = nt;
	grp.M = M;
	grp.accumulate = ops[0].accumulate ? 1 : 0;
	ret = haccel__gpu_fn(g, M <= 8	     ? "haccel_gemm_few8g" :
				M <= 16	     ? "haccel_gemm_few16g" :
				M <= 32	     ? (ks > 1 ? "haccel_gemm_few32g" : "haccel_gemm_few32g1") :
					       (ks > 1 ? "haccel_gemm_few64g" : "haccel_gemm_few64g1"),
			     &fn);
	if (ret)
		return ret;
	/* As few_launch: two blocks an SM in one wave (clusters of ks), equal
	 * counts of tiles. */
	cap = 2 * haccel__gpu_sms(g) / ks;
	return HACCEL__LAUNCH(g, fn, few_spread(nt, cap ? cap : 1) * ks, 1, 1, 256, 1, 1, 0, stream,
			      &grp);
}

int haccel__gemm_run(struct haccel__gpu *g, void *stream, const struct haccel__gemm *op)
{
	uint64_t wbytes = (uint64_t)(op->batch > 1 ? op->batch : 1) * op->N * op->K * 2;

	if (!g->gemm_lt_only && few_fits(op) && wbytes < FEW_MAX_BYTES(op->M))
		return few_launch(g, stream, op);
	return haccel__gemm_lt(g, stream, op);
}

static int gemm_lt(struct haccel__gpu *g, void *stream, const struct haccel__gemm *op);

/* Under the GPU runtime's lock (recursive: a model's step already holds
 * it), taken before the shapes' lock, so that a first GEMM's workspace
 * allocation, which synchronizes the context, keeps that order too. */
int haccel__gemm_lt(struct haccel__gpu *g, void *stream, const struct haccel__gemm *op)
{
	int ret;

	haccel__gpu_lock(g);
	ret = gemm_lt(g, stream, op);
	haccel__gpu_unlock(g);
	return ret;
}

static int gemm_lt(struct haccel__gpu *g, void *stream, const struct haccel__gemm *op)
{
	struct haccel__blas *b;
	struct shape *s = NULL;
	const float one = 1.0f, zero = 0.0f;
	uint64_t ws = 0;
	int ret = 0, st;

	if (!stream)
		stream = g->stream;
	if (op->c_bf16 && op->accumulate)
		return haccel__fail(g->ctx, -EINVAL, "cublasLt: a bf16 C does not accumulate");
	if (!op->M || !op->N)
		return 0;
	/* Loaded once a context, by the first GEMM of any of its models
	 * (each model driven by one thread at a time, but two models of a
	 * context may start together). */
	b = __atomic_load_n(&g->blas, __ATOMIC_ACQUIRE);
	if (!b) {
		pthread_mutex_lock(&blas_load_lock);
		if (!g->blas)
			ret = blas_load(g);
		b = g->blas;
		pthread_mutex_unlock(&blas_load_lock);
		if (ret)
			return ret;
	}
	/* Held through the call: the shape's descriptor takes this call's
	 * bias pointer and its layouts the call's rows, and eviction may
	 * destroy a shape's descriptors. */
	pthread_mutex_lock(&b->lock);
	ret = shape_for(g, b, op, &s);
	for (uint32_t i = 0; !ret && i < b->n_lanes; i++)
		if (b->lanes[i].stream == stream)
			ws = b->lanes[i].ws;
	if (!ret && !ws) {
		if (b->n_lanes == sizeof(b->lanes) / sizeof(b->lanes[0]))
			ret = haccel__fail(g->ctx, -ENOSPC, "cublasLt: GEMMs on more than %zu streams",
					   sizeof(b->lanes) / sizeof(b->lanes[0]));
		else if (!(ret = haccel__gpu_mem_alloc(g->ctx, WORKSPACE_BYTES, &ws))) {
			b->lanes[b->n_lanes].stream = stream;
			b->lanes[b->n_lanes++].ws = ws;
		}
	}
	if (ret) {
		pthread_mutex_unlock(&b->lock);
		return ret;
	}
	if (op->bias) {
		uint64_t p = op->bias;

		/* The descriptor is the shape's: a failed set would leave the
		 * last call's bias in it. */
		st = b->DescSet(s->desc, LT_DESC_BIAS_POINTER, &p, sizeof(p));
		if (st) {
			pthread_mutex_unlock(&b->lock);
			return lt_fail(g, st, "bias pointer");
		}
	}
	st = b->Matmul(b->handle, s->desc, &one, op->B, s->la, op->A, s->lb,
		       op->accumulate ? &one : &zero, op->C, s->lc, op->C, s->lc, s->algo, ws,
		       WORKSPACE_BYTES, stream);
	pthread_mutex_unlock(&b->lock);
	return st ? lt_fail(g, st, "cublasLtMatmul") : 0;
}

int haccel__cuda_linear(struct haccel__gpu *g, void *stream, uint64_t y, uint64_t x, int64_t ldx,
			uint64_t W, uint64_t bias, uint32_t T, uint32_t N, uint32_t K)
{
	struct haccel__gemm op = {
		.M = T, .N = N, .K = K, .A = x, .B = W, .C = y, .bias = bias,
		.lda = ldx, .ldb = K, .ldc = N, .batch = 1, .trans_b = 1,
	};

	return haccel__gemm_run(g, stream, &op);
}
