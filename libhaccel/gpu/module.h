/* SPDX-License-Identifier: MIT */
/*
 * The GPU runtime of a context: the embedded kernels (one fatbin, SASS for
 * sm_90a and PTX, built by nvcc at make time and linked into the library),
 * a compute stream, and a launch helper. No kernel is compiled at run time.
 */
#ifndef HACCEL_GPU_MODULE_H
#define HACCEL_GPU_MODULE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu/cuda.h"

/* The fatbin linked into the library; size 0 when built without CUDA. */
extern const unsigned char haccel__fatbin[];
extern const uint64_t haccel__fatbin_size;

#define HACCEL__GPU_MAX_FNS 64
#define HACCEL__GPU_MAX_CLUSTER_ASKS 16

struct haccel__gpu {
	struct haccel_ctx *ctx;
	struct haccel__cuda *cu;
	void *module;
	void *stream;              /* compute stream, non-blocking */
	pthread_mutex_t lock;      /* recursive: held by whoever puts work on the
				    * context's streams (the models' steps and
				    * captures, the pools' copies) or
				    * synchronizes the context, so that one
				    * thread's capture never takes in, or is
				    * broken by, another thread's work */
	void *side[2];             /* the models' branch streams (haccel__gpu_side_streams);
				    * under ctx->lock */
	struct haccel__blas *blas; /* cuBLASLt, loaded on first GEMM */
	bool gemm_lt_only;         /* HACCEL_GEMM=cublaslt: no few-row kernel */
	bool gemm_rows_exact;      /* HACCEL_GEMM_ROWS=exact: a cuBLASLt shape a row count */
	bool gemm_rows_refuse;     /* tests: every rounded shape's algorithm refused */
	int kda_pass2;             /* HACCEL_KDA_PASS2: 0 auto, 1 mma, 32 or 64 (wg32, wg64) */
	int kda_tile;              /* HACCEL_KDA_TILE: 0 auto, 32 or 64 columns (recurrence) */
	int sparse_mla;            /* HACCEL_SPARSE_MLA: 0 auto, 1 mma, 2 ws, 3 ws3, 4 h32 */
	bool pdl;                  /* programmatic dependent launches (sm_90+) */
	int mla_merge;             /* HACCEL_MLA_MERGE: 0 auto (in the cluster), 1 kernel */
	int mla_coop;              /* the flags merge's first launch, cooperative (ops_dsa.c):
				    * 0 not yet made, 1 taken (plain launches from then on),
				    * -1 refused (the combine kernel from then on) */
	bool coop_refuse;          /* tests: every cooperative launch refused, none made */
	int ix_topk;               /* HACCEL_IX_TOPK: 0 auto (rows staged in shared memory), 1 l2 */
	struct {
		void *fn;
		unsigned int cx;
		int n;             /* clusters resident at once; -1 none */
	} clusters[HACCEL__GPU_MAX_CLUSTER_ASKS]; /* haccel__gpu_max_clusters; under ctx->lock */
	uint32_t n_clusters;
	struct {
		const char *name;
		void *fn;
	} fns[HACCEL__GPU_MAX_FNS]; /* lookups, cached; under ctx->lock */
	uint32_t n_fns;
};

/* The device's multiprocessor count (1 if unknown). */
static inline uint32_t haccel__gpu_sms(const struct haccel__gpu *g)
{
	return g && g->cu && g->cu->sm_count > 0 ? (uint32_t)g->cu->sm_count : 1;
}

/* The context's GPU runtime if it has been made, else NULL. */
struct haccel__gpu *haccel__gpu_peek(struct haccel_ctx *ctx);

static inline void haccel__gpu_lock(struct haccel__gpu *g)
{
	if (g)
		pthread_mutex_lock(&g->lock);
}

static inline void haccel__gpu_unlock(struct haccel__gpu *g)
{
	if (g)
		pthread_mutex_unlock(&g->lock);
}

/*
 * The context's GPU runtime, made on first use. Returns 0, -ENODEV or
 * -ENOSYS (no GPU: haccel_gpu_info() says why), -ENOEXEC (this build has no
 * kernels: built without nvcc), -EIO (an unusable GPU, or a driver call
 * failed), -ENOMEM.
 */
int haccel__gpu_get(struct haccel_ctx *ctx, struct haccel__gpu **out);
void haccel__gpu_fini(struct haccel_ctx *ctx);

/*
 * The two non-blocking streams that models fork their graph branches onto,
 * made on first use and kept until the context closes, so that every model
 * of the context gets the same two (a model opened after others were
 * closed ran its decode steps up to 2% slower on an H200 with streams of
 * its own; docs/benchmarks.md, thirty-fourth entry). Returns 0 or -EIO.
 */
int haccel__gpu_side_streams(struct haccel__gpu *g, void **s2, void **s3);

/* The kernel called name (extern "C" in kernels/). Returns 0 or -ENOENT. */
int haccel__gpu_fn(struct haccel__gpu *g, const char *name, void **fn);

/* Launch fn on stream (NULL: the runtime's stream) with params (an array
 * of pointers to each argument, as cuLaunchKernel takes). 0 or -errno. */
int haccel__gpu_launch(struct haccel__gpu *g, void *fn, unsigned int gx,
		       unsigned int gy, unsigned int gz, unsigned int bx,
		       unsigned int by, unsigned int bz, unsigned int smem,
		       void *stream, void **params, const char *file, int line);

#define HACCEL__LAUNCH(g, fn, gx, gy, gz, bx, by, bz, smem, stream, ...)      \
	haccel__gpu_launch(g, fn, gx, gy, gz, bx, by, bz, smem, stream,      \
			   (void *[]){ __VA_ARGS__ }, __FILE__, __LINE__)

/* The same in clusters of cx blocks along x (sm_90; gx a multiple of cx). */
int haccel__gpu_launch_cl(struct haccel__gpu *g, void *fn, unsigned int gx, unsigned int cx,
			  unsigned int bx, unsigned int smem, void *stream, void **params,
			  const char *file, int line);

/*
 * The same as one cooperative launch (cuLaunchKernelEx with its
 * cooperative attribute): the driver starts it only where every block
 * can be resident at once, so that blocks may wait for each other.
 * -EBUSY, with no error recorded, where it refuses (a GPU shared through
 * MPS with fewer SMs, another context's work; the caller takes another
 * way), or always with g->coop_refuse (tests); else 0 or -errno.
 */
int haccel__gpu_launch_coop(struct haccel__gpu *g, void *fn, unsigned int gx, unsigned int bx,
			    unsigned int smem, void *stream, void **params, const char *file,
			    int line);

/*
 * How many clusters of cx blocks (at most 8) of bx threads and smem bytes
 * of fn can be resident at once (cuOccupancyMaxActiveClusters), 0 when
 * none can or the driver will not say. Asked once for each kernel and
 * cluster size and kept (HACCEL__GPU_MAX_CLUSTER_ASKS of them; past that
 * asked each time), so a caller must not ask with another bx or smem for
 * the same kernel: the answer depends on the blocks' resources.
 */
unsigned int haccel__gpu_max_clusters(struct haccel__gpu *g, void *fn, unsigned int cx,
				      unsigned int bx, unsigned int smem);

#endif /* HACCEL_GPU_MODULE_H */
