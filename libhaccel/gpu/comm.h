/* SPDX-License-Identifier: MIT */
/*
 * NCCL, loaded at run time like the CUDA driver and cuBLASLt: dlopen of
 * libnccl.so.2 (the library path, then the CUDA toolkit's lib folders, or
 * HACCEL_NCCL_LIBRARY), entry points by dlsym into one table hanging off
 * the context. Nothing needs NCCL to build; where it is absent the library
 * works on one GPU and says why there is no NCCL. NCCL's own types are
 * declared here with its ABI (nccl.h, 2.x).
 */
#ifndef HACCEL_GPU_COMM_H
#define HACCEL_GPU_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "haccel.h"

#define HACCEL__NCCL_FLOAT32 7   /* ncclFloat32 */
#define HACCEL__NCCL_SUM 0       /* ncclSum */

struct haccel__nccl {
	void *lib;
	int version;             /* ncclGetVersion: X*10000 + Y*100 + Z */
	int status;              /* 0 loaded, else -ENODEV with why */
	char path[256];
	char why[640];
	int (*GetVersion)(int *v);
	const char *(*GetErrorString)(int r);
	int (*CommInitAll)(void **comms, int ndev, const int *devs);
	int (*CommDestroy)(void *comm);
	int (*CommCount)(void *comm, int *count);
	int (*AllReduce)(const void *send, void *recv, size_t count, int type, int op,
			 void *comm, void *stream);
	int (*GroupStart)(void);
	int (*GroupEnd)(void);
};

/* The context's NCCL table, loaded on first use (under ctx->lock).
 * Returns 0, or -ENODEV with the reason in (*out)->why. */
int haccel__nccl_get(struct haccel_ctx *ctx, struct haccel__nccl **out);
void haccel__nccl_fini(struct haccel_ctx *ctx);

/* One communicator per local device of devs (ncclCommInitAll: one process
 * driving every GPU). comms has n entries. Returns 0, -ENODEV, -EINVAL, -EIO
 * (NCCL's error string logged). */
int haccel__comm_init_all(struct haccel_ctx *ctx, uint32_t n, const int *devs, void **comms);
void haccel__comm_destroy_all(struct haccel_ctx *ctx, uint32_t n, void **comms);

/* In-place or out-of-place fp32 sum over the communicators' ranks: rank i
 * reads send[i] and writes recv[i] (device addresses) on streams[i], all in
 * one NCCL group. Returns 0 or -EIO. */
int haccel__comm_all_reduce_f32(struct haccel_ctx *ctx, uint32_t n, void **comms,
				const uint64_t *send, const uint64_t *recv, size_t count,
				void **streams);

#endif /* HACCEL_GPU_COMM_H */
