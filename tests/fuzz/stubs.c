// SPDX-License-Identifier: MIT
/*
 * What core/ctx.c needs from hostmem/ and gpu/ in the standalone fuzz build,
 * which compiles only the parser and the core (run-fuzz.sh): the context's
 * host memory counters, and the GPU teardown, which has nothing to undo
 * because the parser never opens the GPU.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "core/ctx.h"
#include "gpu/comm.h"
#include "gpu/cuda.h"
#include "gpu/module.h"
#include "hostmem/hostmem.h"

int haccel__hostmem_ctx_init(struct haccel_ctx *ctx)
{
	ctx->hostmem_stats = calloc(1, sizeof(*ctx->hostmem_stats));
	return ctx->hostmem_stats ? 0 : -ENOMEM;
}

void haccel__hostmem_ctx_fini(struct haccel_ctx *ctx)
{
	free(ctx->hostmem_stats);
	ctx->hostmem_stats = NULL;
}

void haccel__gpu_fini(struct haccel_ctx *ctx)
{
	(void)ctx;
}

void haccel__cuda_fini(struct haccel_ctx *ctx)
{
	(void)ctx;
}

void haccel__nccl_fini(struct haccel_ctx *ctx)
{
	(void)ctx;
}
