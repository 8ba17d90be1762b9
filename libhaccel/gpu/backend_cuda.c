// SPDX-License-Identifier: MIT
/*
 * The pools' GPU backend (HACCEL_MEM_CUDA): pool memory is device memory
 * carved once through the VMM API (gpu/mem.c), so page and slot addresses
 * captured in CUDA graphs stay valid for the life of the pool. Copies and
 * zeroing are enqueued on the context's compute stream, in order with the
 * kernels that read the pools, under the GPU runtime's lock (never into
 * another thread's graph capture); a call returns once its work is queued.
 * Pool pointers are device addresses: the host never dereferences them.
 */
#include "config.h"

#include <errno.h>

#include "core/ctx.h"
#include "core/log.h"
#include "gpu/mem.h"
#include "gpu/module.h"
#include "pool/backend.h"

static int cuda_alloc(struct haccel_ctx *ctx, uint64_t bytes, void **ptr)
{
	struct haccel__gpu *g;
	uint64_t d;
	int ret;

	/* The stream the pool's copies go on must exist before the pool. */
	ret = haccel__gpu_get(ctx, &g);
	if (ret)
		return ret;
	ret = haccel__gpu_mem_alloc(ctx, bytes, &d);
	if (ret)
		return ret;
	*ptr = (void *)(uintptr_t)d;
	return 0;
}

static void cuda_free(struct haccel_ctx *ctx, void *ptr, uint64_t bytes)
{
	haccel__gpu_mem_free(ctx, (uint64_t)(uintptr_t)ptr, bytes);
}

static int cuda_copy(struct haccel_ctx *ctx, const struct haccel__mem_copy *c, uint32_t n)
{
	struct haccel__gpu *g;
	int ret = haccel__gpu_get(ctx, &g);

	if (ret)
		return ret;
	haccel__gpu_lock(g);
	for (uint32_t i = 0; !ret && i < n; i++)
		ret = HACCEL__CU(ctx, g->cu->MemcpyDtoDAsync((uint64_t)(uintptr_t)c[i].dst,
							     (uint64_t)(uintptr_t)c[i].src,
							     c[i].bytes, g->stream));
	haccel__gpu_unlock(g);
	return ret;
}

static int cuda_zero(struct haccel_ctx *ctx, void *ptr, uint64_t bytes)
{
	struct haccel__gpu *g;
	int ret = haccel__gpu_get(ctx, &g);

	if (ret)
		return ret;
	haccel__gpu_lock(g);
	ret = HACCEL__CU(ctx, g->cu->MemsetD8Async((uint64_t)(uintptr_t)ptr, 0, bytes, g->stream));
	haccel__gpu_unlock(g);
	return ret;
}

/* All copies queued on the compute stream (after the kernels that use the
 * pages), then one wait: the host side is complete when this returns. */
static int cuda_swap(struct haccel_ctx *ctx, const struct haccel__mem_copy *c, uint32_t n,
		     int to_host)
{
	struct haccel__gpu *g = NULL;
	int ret = haccel__gpu_get(ctx, &g);

	haccel__gpu_lock(g);
	for (uint32_t i = 0; !ret && i < n; i++)
		ret = to_host ? HACCEL__CU(ctx, g->cu->MemcpyDtoHAsync(c[i].dst,
								      (uint64_t)(uintptr_t)c[i].src,
								      c[i].bytes, g->stream)) :
				HACCEL__CU(ctx, g->cu->MemcpyHtoDAsync((uint64_t)(uintptr_t)c[i].dst,
								      c[i].src, c[i].bytes,
								      g->stream));
	if (g) {
		int r = HACCEL__CU(ctx, g->cu->StreamSynchronize(g->stream));
		if (!ret)
			ret = r;
	}
	haccel__gpu_unlock(g);
	return ret;
}

const struct haccel__mem_ops haccel__cuda_mem_ops = {
	.name = "cuda",
	.alloc = cuda_alloc,
	.free = cuda_free,
	.copy = cuda_copy,
	.zero = cuda_zero,
	.swap = cuda_swap,
};
