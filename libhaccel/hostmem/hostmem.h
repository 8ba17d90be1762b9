/* SPDX-License-Identifier: MIT */
/*
 * Internal side of host staging memory and NUMA topology: per-context
 * counters, registration bookkeeping, thread placement.
 */
#ifndef HACCEL_HOSTMEM_HOSTMEM_H
#define HACCEL_HOSTMEM_HOSTMEM_H

#include <stdint.h>

#include "haccel.h"

/*
 * CUDA registers host memory in pieces of at most this many bytes (the GPU
 * backend, later): registering TBs in one call stalls for minutes and fails
 * as a whole; bounded chunks keep progress visible and failures local.
 */
#define HACCEL__CUDA_REGISTER_CHUNK (1ull << 30)

enum haccel__registration { HACCEL__REG_IO_URING = 0, HACCEL__REG_CUDA = 1 };

/* Allocate / free the context's hostmem counters (haccel_open/close). */
int haccel__hostmem_ctx_init(struct haccel_ctx *ctx);
void haccel__hostmem_ctx_fini(struct haccel_ctx *ctx);

/* Count n buffers registered with io_uring or CUDA. */
void haccel__hostmem_note_registration(struct haccel_ctx *ctx,
				       enum haccel__registration kind,
				       uint64_t n);

/*
 * Run the calling thread on the CPUs of node (read from sysfs), so the I/O
 * thread works on the node it fills. HACCEL_NODE_ANY changes nothing.
 * Returns 0, -ENODEV (no such node or no CPUs), or -errno.
 */
int haccel__numa_bind_thread(struct haccel_ctx *ctx, int node);

#endif /* HACCEL_HOSTMEM_HOSTMEM_H */
