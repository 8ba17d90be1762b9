/* SPDX-License-Identifier: MIT */
/*
 * Memory backends behind the pools. A pool carves one allocation at
 * creation and then only asks its backend to copy or zero ranges inside it.
 * The host backend does that with memcpy/memset; the GPU backend issues the
 * same requests on the context's compute stream, so the pools never touch
 * pool memory directly except through these calls.
 */
#ifndef HACCEL_POOL_BACKEND_H
#define HACCEL_POOL_BACKEND_H

#include <stdint.h>

#include "haccel.h"

/* One copy inside pool memory; ranges never overlap. */
struct haccel__mem_copy {
	void *dst;
	const void *src;
	uint64_t bytes;
};

struct haccel__mem_ops {
	const char *name;
	/* Allocate bytes, ready to use (populated). 0 or -ENOMEM. */
	int (*alloc)(struct haccel_ctx *ctx, uint64_t bytes, void **ptr);
	void (*free)(struct haccel_ctx *ctx, void *ptr, uint64_t bytes);
	/* Perform n copies. 0 or -errno. */
	int (*copy)(struct haccel_ctx *ctx, const struct haccel__mem_copy *c,
		    uint32_t n);
	/* Zero bytes at ptr. 0 or -errno. */
	int (*zero)(struct haccel_ctx *ctx, void *ptr, uint64_t bytes);
	/* Swap: n copies between pool memory and host memory (to_host: dst
	 * is host memory; else src is), all done when the call returns. */
	int (*swap)(struct haccel_ctx *ctx, const struct haccel__mem_copy *c,
		    uint32_t n, int to_host);
};

/* Device memory on the context's GPU (gpu/backend_cuda.c). */
extern const struct haccel__mem_ops haccel__cuda_mem_ops;

/* The backend for a haccel_mem_kind, or NULL when unknown/unavailable. */
const struct haccel__mem_ops *haccel__mem_ops_get(uint32_t kind);

#endif /* HACCEL_POOL_BACKEND_H */
