// SPDX-License-Identifier: MIT
/* Per-context host memory counters; updated under ctx->lock by hostmem.c. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "driver.h"
#include "hostmem.h"

int haccel__hostmem_ctx_init(struct haccel_ctx *ctx)
{
	int ret;

	ctx->hostmem_stats = calloc(1, sizeof(*ctx->hostmem_stats));
	if (!ctx->hostmem_stats)
		return -ENOMEM;
	ret = haccel__driver_ctx_init(ctx);
	if (ret) {
		free(ctx->hostmem_stats);
		ctx->hostmem_stats = NULL;
	}
	return ret;
}

void haccel__hostmem_ctx_fini(struct haccel_ctx *ctx)
{
	haccel__driver_ctx_fini(ctx);
	free(ctx->hostmem_stats);
	ctx->hostmem_stats = NULL;
}

void haccel__hostmem_note_registration(struct haccel_ctx *ctx,
				       enum haccel__registration kind,
				       uint64_t n)
{
	pthread_mutex_lock(&ctx->lock);
	if (kind == HACCEL__REG_CUDA)
		ctx->hostmem_stats->cuda_registrations += n;
	else
		ctx->hostmem_stats->io_uring_registrations += n;
	pthread_mutex_unlock(&ctx->lock);
}

int haccel_hostmem_stats(struct haccel_ctx *ctx, struct haccel_hostmem_stats *out)
{
	if (!ctx || !out)
		return -EINVAL;
	pthread_mutex_lock(&ctx->lock);
	*out = *ctx->hostmem_stats;
	pthread_mutex_unlock(&ctx->lock);
	return 0;
}
