// SPDX-License-Identifier: MIT
/*
 * What core/ctx.c needs from hostmem/ in the standalone fuzz build, which
 * compiles only the parser and the core (run-fuzz.sh): the context's host
 * memory counters, unused by the parser.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "core/ctx.h"
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
