/* SPDX-License-Identifier: MIT */
/*
 * The CUDA driver, loaded at run time: dlopen("libcuda.so.1") and one table
 * of entry points taken through cuGetProcAddress at a pinned API version
 * (HACCEL__CUDA_API), so a newer driver keeps giving the semantics this code
 * was written for. Nothing here needs CUDA headers: the few types and
 * constants the driver API uses are declared below with its ABI, so the
 * library builds and runs on machines with no CUDA at all, where the table
 * reports why it is empty.
 */
#ifndef HACCEL_GPU_CUDA_H
#define HACCEL_GPU_CUDA_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "haccel.h"

/* The driver API version every entry point is requested at (CUDA 12.0). */
#define HACCEL__CUDA_API 12000

/* Driver API ABI: the values and layouts of cuda.h that are used here. */
#define HACCEL__CU_STREAM_NON_BLOCKING 0x1
#define HACCEL__CU_EVENT_DISABLE_TIMING 0x2
#define HACCEL__CU_MEMHOSTREGISTER_PORTABLE 0x1
#define HACCEL__CU_STREAM_CAPTURE_MODE_GLOBAL 0
#define HACCEL__CU_STREAM_CAPTURE_MODE_THREAD_LOCAL 1
#define HACCEL__CU_DEV_ATTR_SM_COUNT 16
#define HACCEL__CU_DEV_ATTR_CC_MAJOR 75
#define HACCEL__CU_DEV_ATTR_CC_MINOR 76
#define HACCEL__CU_DEV_ATTR_L2_CACHE_SIZE 38
#define HACCEL__CU_FUNC_ATTR_MAX_DYN_SMEM 8
#define HACCEL__CU_MEM_ALLOCATION_TYPE_PINNED 0x1
#define HACCEL__CU_MEM_LOCATION_TYPE_DEVICE 0x1
#define HACCEL__CU_MEM_ACCESS_RW 0x3
#define HACCEL__CU_MEM_GRANULARITY_MINIMUM 0
#define HACCEL__CU_ERROR_NO_DEVICE 100

struct haccel__cu_mem_location {
	int type;
	int id;
};

struct haccel__cu_mem_prop {        /* CUmemAllocationProp */
	int type;
	int requested_handle_types;
	struct haccel__cu_mem_location location;
	void *win32_meta;
	struct {
		unsigned char compression_type;
		unsigned char gpu_direct_rdma_capable;
		unsigned short usage;
		unsigned char reserved[4];
	} alloc_flags;
};

struct haccel__cu_access_desc {     /* CUmemAccessDesc */
	struct haccel__cu_mem_location location;
	int flags;
};

/* CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE: not every block of a
 * cooperative launch could be resident at once */
#define HACCEL__CU_COOPERATIVE_TOO_LARGE 720

/* CUlaunchAttribute and CUlaunchConfig (cuLaunchKernelEx, CUDA 11.8+) */
#define HACCEL__CU_LAUNCH_ATTR_COOPERATIVE 2
#define HACCEL__CU_LAUNCH_ATTR_CLUSTER_DIMENSION 4
#define HACCEL__CU_LAUNCH_ATTR_PROGRAMMATIC_SERIALIZATION 6

struct haccel__cu_launch_attr {
	int id;
	char pad[4];
	union {
		char pad[64];
		int i;
		struct {
			unsigned int x, y, z;
		} dim;
	} value;
};

struct haccel__cu_launch_config {
	unsigned int gx, gy, gz, bx, by, bz, smem;
	void *stream;
	struct haccel__cu_launch_attr *attrs;
	unsigned int n_attrs;
};

/* One table per process would be global state: it hangs off the context. */
struct haccel__cuda {
	void *lib;
	int status;                 /* 0: usable; else -ENODEV/-ENOSYS... */
	char why[256];              /* why not usable, for "no GPU" messages */
	int driver_version;
	int n_devices;
	int device;                 /* the device in use (0) */
	void *ctx;                  /* its primary context */
	int sm_count, cc_major, cc_minor;
	int l2_bytes;               /* the L2's size */
	char name[128];
	char pci_bus_id[32];

#define HACCEL__CUDA_FN(ret, name, args) ret(*name) args;
#include "gpu/cuda_fns.h"
#undef HACCEL__CUDA_FN
};

/*
 * Load the driver and open device 0 once per context (later calls return
 * the same result). Returns 0, or -ENODEV (no driver or no GPU: the reason
 * in cu->why and the log, once), -ENOSYS (a driver too old or without the
 * entry points this code needs), -EIO (a driver that failed to initialise
 * or open device 0: "unusable GPU" and the driver's error in cu->why),
 * -ENOMEM. *out is set except for -ENOMEM.
 */
int haccel__cuda_get(struct haccel_ctx *ctx, struct haccel__cuda **out);

/* What goes before cu->why in a message: "no GPU: " unless the reason
 * already says "no GPU" or "unusable GPU". */
static inline const char *haccel__cuda_why_prefix(const char *why)
{
	return strncmp(why, "no GPU", 6) && strncmp(why, "unusable GPU", 12) ? "no GPU: " : "";
}
void haccel__cuda_fini(struct haccel_ctx *ctx);

/*
 * Map a driver result to -errno, logging the driver's error name and the
 * call site; 0 stays 0.
 */
int haccel__cu_check(struct haccel_ctx *ctx, int res, const char *what,
		     const char *file, int line);
#define HACCEL__CU(ctx, call) \
	haccel__cu_check(ctx, (call), #call, __FILE__, __LINE__)

#endif /* HACCEL_GPU_CUDA_H */
