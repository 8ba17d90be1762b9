// SPDX-License-Identifier: MIT
/* The embedded kernels and the per-context GPU runtime; see module.h. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "core/log.h"
#include "gpu/blas.h"
#include "gpu/module.h"

int haccel__gpu_get(struct haccel_ctx *ctx, struct haccel__gpu **out)
{
	struct haccel__cuda *cu;
	struct haccel__gpu *g;
	const char *env;
	int ret;

	*out = NULL;
	ret = haccel__cuda_get(ctx, &cu);
	if (ret)
		return ret;
	pthread_mutex_lock(&ctx->lock);
	g = ctx->gpu;
	pthread_mutex_unlock(&ctx->lock);
	if (g) {
		*out = g;
		return 0;
	}
	if (!haccel__fatbin_size)
		return haccel__fail(ctx, -ENOEXEC, "cuda: this build carries no GPU kernels (configured without nvcc)");
	/* sm_90a machine code and compute_90a PTX (the warpgroup MMA)
	 * serve compute capability 9.0 only. */
	if (cu->cc_major != 9 || cu->cc_minor != 0)
		return haccel__fail(ctx, -ENOEXEC,
				    "cuda: %s is sm_%d%d; this build's kernels are for sm_90a (H100, H200) only",
				    cu->name, cu->cc_major, cu->cc_minor);
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->ctx = ctx;
	g->cu = cu;
	env = getenv("HACCEL_GEMM");
	g->gemm_lt_only = env && !strcmp(env, "cublaslt");
	env = getenv("HACCEL_GEMM_ROWS");
	g->gemm_rows_exact = env && !strcmp(env, "exact");
	env = getenv("HACCEL_KDA_PASS2");
	g->kda_pass2 = !env		       ? 0 :
		       !strcmp(env, "mma")  ? 1 :
		       !strcmp(env, "wg32") ? 32 :
		       !strcmp(env, "wg64") ? 64 :
					      0;
	env = getenv("HACCEL_KDA_TILE");
	g->kda_tile = !env		   ? 0 :
		      !strcmp(env, "32") ? 32 :
		      !strcmp(env, "64") ? 64 :
					   0;
	env = getenv("HACCEL_SPARSE_MLA");
	g->sparse_mla = !env		    ? 0 :
			!strcmp(env, "mma") ? 1 :
			!strcmp(env, "ws")  ? 2 :
			!strcmp(env, "ws3") ? 3 :
			!strcmp(env, "h32") ? 4 :
					      0;
	env = getenv("HACCEL_MLA_MERGE");
	g->mla_merge = env && !strcmp(env, "kernel") ? 1 : 0;
	env = getenv("HACCEL_IX_TOPK");
	g->ix_topk = env && !strcmp(env, "l2") ? 1 : 0;
	env = getenv("HACCEL_PDL");
	g->pdl = cu->cc_major >= 9 && !(env && !strcmp(env, "0"));
	pthread_mutexattr_t ma;

	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&g->lock, &ma);
	pthread_mutexattr_destroy(&ma);
	ret = HACCEL__CU(ctx, cu->ModuleLoadData(&g->module, haccel__fatbin));
	if (!ret)
		ret = HACCEL__CU(ctx, cu->StreamCreate(&g->stream, HACCEL__CU_STREAM_NON_BLOCKING));
	if (ret) {
		if (g->module)
			cu->ModuleUnload(g->module);
		pthread_mutex_destroy(&g->lock);
		free(g);
		return ret;
	}
	pthread_mutex_lock(&ctx->lock);
	if (ctx->gpu) {
		/* Another thread won the race: keep theirs. */
		pthread_mutex_unlock(&ctx->lock);
		cu->StreamDestroy(g->stream);
		cu->ModuleUnload(g->module);
		pthread_mutex_destroy(&g->lock);
		free(g);
		*out = ctx->gpu;
		return 0;
	}
	ctx->gpu = g;
	pthread_mutex_unlock(&ctx->lock);
	*out = g;
	return 0;
}

struct haccel__gpu *haccel__gpu_peek(struct haccel_ctx *ctx)
{
	struct haccel__gpu *g;

	pthread_mutex_lock(&ctx->lock);
	g = ctx->gpu;
	pthread_mutex_unlock(&ctx->lock);
	return g;
}

int haccel__gpu_side_streams(struct haccel__gpu *g, void **s2, void **s3)
{
	struct haccel__cuda *cu = g->cu;
	int ret = 0;

	pthread_mutex_lock(&g->ctx->lock);
	for (int i = 0; !ret && i < 2; i++)
		if (!g->side[i])
			ret = HACCEL__CU(g->ctx, cu->StreamCreate(&g->side[i],
								  HACCEL__CU_STREAM_NON_BLOCKING));
	*s2 = g->side[0];
	*s3 = g->side[1];
	pthread_mutex_unlock(&g->ctx->lock);
	return ret;
}

void haccel__gpu_fini(struct haccel_ctx *ctx)
{
	struct haccel__gpu *g = ctx->gpu;

	if (!g)
		return;
	g->cu->StreamSynchronize(g->stream);
	for (int i = 0; i < 2; i++)
		if (g->side[i])
			g->cu->StreamSynchronize(g->side[i]);
	haccel__blas_fini(g);
	for (int i = 0; i < 2; i++)
		if (g->side[i])
			g->cu->StreamDestroy(g->side[i]);
	g->cu->StreamDestroy(g->stream);
	g->cu->ModuleUnload(g->module);
	pthread_mutex_destroy(&g->lock);
	free(g);
	ctx->gpu = NULL;
}

int haccel__gpu_fn(struct haccel__gpu *g, const char *name, void **fn)
{
	int ret = 0;

	pthread_mutex_lock(&g->ctx->lock);
	for (uint32_t i = 0; i < g->n_fns; i++)
		if (!strcmp(g->fns[i].name, name)) {
			*fn = g->fns[i].fn;
			pthread_mutex_unlock(&g->ctx->lock);
			return 0;
		}
	if (g->cu->ModuleGetFunction(fn, g->module, name)) {
		ret = -ENOENT;
	} else if (g->n_fns < HACCEL__GPU_MAX_FNS) {
		g->fns[g->n_fns].name = name;
		g->fns[g->n_fns++].fn = *fn;
	}
	pthread_mutex_unlock(&g->ctx->lock);
	if (ret)
		return haccel__fail(g->ctx, ret, "cuda: no kernel %s in the embedded module", name);
	return 0;
}

int haccel__gpu_launch(struct haccel__gpu *g, void *fn, unsigned int gx, unsigned int gy,
		       unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz,
		       unsigned int smem, void *stream, void **params, const char *file, int line)
{
	struct haccel__cu_launch_attr attr = {
		.id = HACCEL__CU_LAUNCH_ATTR_PROGRAMMATIC_SERIALIZATION,
		.value.i = 1,
	};
	struct haccel__cu_launch_config cfg = {
		.gx = gx, .gy = gy, .gz = gz, .bx = bx, .by = by, .bz = bz, .smem = smem,
		.stream = stream ? stream : g->stream, .attrs = &attr, .n_attrs = 1,
	};
	int res;

	if (!g->pdl)
		res = g->cu->LaunchKernel(fn, gx, gy, gz, bx, by, bz, smem, cfg.stream, params,
					  NULL);
	else
		res = g->cu->LaunchKernelEx(&cfg, fn, params, NULL);
	return haccel__cu_check(g->ctx, res, g->pdl ? "cuLaunchKernelEx" : "cuLaunchKernel",
				file, line);
}

int haccel__gpu_launch_cl(struct haccel__gpu *g, void *fn, unsigned int gx, unsigned int cx,
			  unsigned int bx, unsigned int smem, void *stream, void **params,
			  const char *file, int line)
{
	struct haccel__cu_launch_attr attr[2] = {
		{ .id = HACCEL__CU_LAUNCH_ATTR_CLUSTER_DIMENSION, .value.dim = { cx, 1, 1 } },
		{ .id = HACCEL__CU_LAUNCH_ATTR_PROGRAMMATIC_SERIALIZATION, .value.i = 1 },
	};
	struct haccel__cu_launch_config cfg = {
		.gx = gx, .gy = 1, .gz = 1, .bx = bx, .by = 1, .bz = 1, .smem = smem,
		.stream = stream ? stream : g->stream, .attrs = attr, .n_attrs = g->pdl ? 2 : 1,
	};

	return haccel__cu_check(g->ctx, g->cu->LaunchKernelEx(&cfg, fn, params, NULL),
				"cuLaunchKernelEx", file, line);
}

int haccel__gpu_launch_coop(struct haccel__gpu *g, void *fn, unsigned int gx, unsigned int bx,
			    unsigned int smem, void *stream, void **params, const char *file,
			    int line)
{
	struct haccel__cu_launch_attr attr[2] = {
		{ .id = HACCEL__CU_LAUNCH_ATTR_COOPERATIVE, .value.i = 1 },
		{ .id = HACCEL__CU_LAUNCH_ATTR_PROGRAMMATIC_SERIALIZATION, .value.i = 1 },
	};
	struct haccel__cu_launch_config cfg = {
		.gx = gx, .gy = 1, .gz = 1, .bx = bx, .by = 1, .bz = 1, .smem = smem,
		.stream = stream ? stream : g->stream, .attrs = attr, .n_attrs = g->pdl ? 2 : 1,
	};
	int res;

	if (g->coop_refuse)
		return -EBUSY;
	res = g->cu->LaunchKernelEx(&cfg, fn, params, NULL);
	if (res == HACCEL__CU_COOPERATIVE_TOO_LARGE)
		return -EBUSY;
	return haccel__cu_check(g->ctx, res, "cuLaunchKernelEx (cooperative)", file, line);
}

unsigned int haccel__gpu_max_clusters(struct haccel__gpu *g, void *fn, unsigned int cx,
				      unsigned int bx, unsigned int smem)
{
	struct haccel__cu_launch_attr attr = {
		.id = HACCEL__CU_LAUNCH_ATTR_CLUSTER_DIMENSION, .value.dim = { cx, 1, 1 },
	};
	struct haccel__cu_launch_config cfg = {
		.gx = cx, .gy = 1, .gz = 1, .bx = bx, .by = 1, .bz = 1, .smem = smem,
		.stream = g->stream, .attrs = &attr, .n_attrs = 1,
	};
	int n = 0, have = 0;

	if (!cx || cx > 8 || g->cu->cc_major < 9)
		return 0;
	pthread_mutex_lock(&g->ctx->lock);
	for (uint32_t i = 0; i < g->n_clusters; i++)
		if (g->clusters[i].fn == fn && g->clusters[i].cx == cx) {
			have = g->clusters[i].n;
			break;
		}
	pthread_mutex_unlock(&g->ctx->lock);
	if (have)
		return have > 0 ? (unsigned int)have : 0;
	if (g->cu->OccupancyMaxActiveClusters(&n, fn, &cfg) || n <= 0)
		n = -1;
	pthread_mutex_lock(&g->ctx->lock);
	if (g->n_clusters < HACCEL__GPU_MAX_CLUSTER_ASKS) {
		g->clusters[g->n_clusters].fn = fn;
		g->clusters[g->n_clusters].cx = cx;
		g->clusters[g->n_clusters++].n = n;
	}
	pthread_mutex_unlock(&g->ctx->lock);
	return n > 0 ? (unsigned int)n : 0;
}
