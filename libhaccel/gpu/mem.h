/* SPDX-License-Identifier: MIT */
/*
 * GPU memory carved once: each allocation reserves its own virtual address
 * range and maps physical memory into it with the driver's virtual memory
 * API (cuMemAddressReserve / cuMemCreate / cuMemMap), so the addresses
 * captured in CUDA graphs never change for the life of the allocation.
 * Sizes round up to the allocation granularity (2 MiB on current GPUs).
 * Used by the pools' HACCEL_MEM_CUDA backend, the model's weights and
 * workspace, and the weights loader's GPU sink.
 */
#ifndef HACCEL_GPU_MEM_H
#define HACCEL_GPU_MEM_H

#include <stdint.h>

#include "haccel.h"

/* Allocate bytes of device memory on the context's GPU, zeroed. Returns 0,
 * -ENODEV (no GPU), -ENOMEM (not enough free device memory; the message
 * says how much was asked and how much is free), -EIO. */
int haccel__gpu_mem_alloc(struct haccel_ctx *ctx, uint64_t bytes, uint64_t *dptr);
/* Free what haccel__gpu_mem_alloc returned (bytes as asked). 0 is ignored. */
void haccel__gpu_mem_free(struct haccel_ctx *ctx, uint64_t dptr, uint64_t bytes);

#endif /* HACCEL_GPU_MEM_H */
