// SPDX-License-Identifier: MIT
/*
 * The CUDA driver at run time. libcuda.so.1 is dlopen()ed the first time a
 * context asks for the GPU; cuGetProcAddress (the _v2 form where the driver
 * exports it) resolves every entry point of gpu/cuda_fns.h at
 * HACCEL__CUDA_API, so the versioned variants (cuMemAlloc_v2...) are picked
 * by the driver, not by us. No driver, no device, or a driver too old are
 * all "no GPU" (-ENODEV, -ENOSYS); a driver that finds a device but fails
 * to initialise or open it is an "unusable GPU" (-EIO), told apart so that
 * a broken node is not mistaken for one without a GPU. Either is reported
 * once with the reason, never a crash, and the CPU backend goes on.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "core/log.h"
#include "gpu/cuda.h"
#include "gpu/module.h"

/* cuGetProcAddress: the v2 form (CUDA 12.5+) adds a symbol status out. */
static int get_proc(void *v1, void *v2, const char *sym, void **fn)
{
	if (v2) {
		int (*f)(const char *, void **, int, uint64_t, int *) = (int (*)(const char *, void **, int, uint64_t, int *))v2;
		int status = 0;

		return f(sym, fn, HACCEL__CUDA_API, 0, &status);
	}
	int (*f)(const char *, void **, int, uint64_t) = (int (*)(const char *, void **, int, uint64_t))v1;
	return f(sym, fn, HACCEL__CUDA_API, 0);
}

static int load(struct haccel_ctx *ctx, struct haccel__cuda *cu)
{
	void *v1, *v2;
	int res, dev;

	cu->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!cu->lib) {
		const char *e = dlerror();
		snprintf(cu->why, sizeof(cu->why), "no CUDA driver (%s)",
			 e ? e : "not found");
		return -ENODEV;
	}
	*(void **)&v1 = dlsym(cu->lib, "cuGetProcAddress");
	*(void **)&v2 = dlsym(cu->lib, "cuGetProcAddress_v2");
	if (!v1 && !v2) {
		snprintf(cu->why, sizeof(cu->why), "CUDA driver too old: no cuGetProcAddress (needs 12.0 or later)");
		return -ENOSYS;
	}
#define HACCEL__CUDA_FN(ret, name, args)                                                  \
	if (get_proc(v1, v2, "cu" #name, (void **)&cu->name) || !cu->name) {            \
		snprintf(cu->why, sizeof(cu->why), "CUDA driver lacks cu%s at API %d", #name, \
			 HACCEL__CUDA_API);                                                \
		return -ENOSYS;                                                            \
	}
#include "gpu/cuda_fns.h"
#undef HACCEL__CUDA_FN

	cu->DriverGetVersion(&cu->driver_version);
	if (cu->driver_version < HACCEL__CUDA_API) {
		snprintf(cu->why, sizeof(cu->why), "CUDA driver %d is older than %d", cu->driver_version,
			 HACCEL__CUDA_API);
		return -ENOSYS;
	}
	res = cu->Init(0);
	if (!res)
		res = cu->DeviceGetCount(&cu->n_devices);
	if (res || !cu->n_devices) {
		const char *name = NULL;

		if (res)
			cu->GetErrorName(res, &name);
		name = name ? name : "cuInit failed";
		/* CUDA_ERROR_NO_DEVICE (100), or none counted: no GPU. A
		 * driver older than its user space (CUDA_ERROR_INSUFFICIENT_DRIVER,
		 * 35) is a driver too old. Anything else: the driver is there
		 * and failed. */
		if (!res || res == 100) {
			snprintf(cu->why, sizeof(cu->why), "no GPU (%s)", res ? name : "no device");
			return -ENODEV;
		}
		if (res == 35) {
			snprintf(cu->why, sizeof(cu->why), "CUDA driver too old (%s)", name);
			return -ENOSYS;
		}
		snprintf(cu->why, sizeof(cu->why), "unusable GPU: cuInit failed: %s (%d)", name, res);
		return -EIO;
	}
	res = cu->DeviceGet(&dev, 0);
	if (!res) {
		res = cu->DevicePrimaryCtxRetain(&cu->ctx, dev);
		if (!res && (res = cu->CtxSetCurrent(cu->ctx)) != 0) {
			cu->DevicePrimaryCtxRelease(dev);
			cu->ctx = NULL;
		}
	}
	if (res) {
		const char *name = NULL;

		cu->GetErrorName(res, &name);
		snprintf(cu->why, sizeof(cu->why), "unusable GPU: cannot open GPU 0: %s (%d)",
			 name ? name : "?", res);
		return -EIO;
	}
	cu->device = dev;
	cu->DeviceGetAttribute(&cu->sm_count, HACCEL__CU_DEV_ATTR_SM_COUNT, dev);
	cu->DeviceGetAttribute(&cu->cc_major, HACCEL__CU_DEV_ATTR_CC_MAJOR, dev);
	cu->DeviceGetAttribute(&cu->cc_minor, HACCEL__CU_DEV_ATTR_CC_MINOR, dev);
	cu->DeviceGetAttribute(&cu->l2_bytes, HACCEL__CU_DEV_ATTR_L2_CACHE_SIZE, dev);
	cu->DeviceGetName(cu->name, sizeof(cu->name), dev);
	cu->DeviceGetPCIBusId(cu->pci_bus_id, sizeof(cu->pci_bus_id), dev);
	haccel__info(ctx, "cuda: %s (sm_%d%d, %d SMs, %.1f MiB of L2) at %s, driver %d", cu->name,
		     cu->cc_major, cu->cc_minor, cu->sm_count, cu->l2_bytes / 1048576.0,
		     cu->pci_bus_id, cu->driver_version);
	return 0;
}

int haccel__cuda_get(struct haccel_ctx *ctx, struct haccel__cuda **out)
{
	struct haccel__cuda *cu;
	int ret;

	pthread_mutex_lock(&ctx->lock);
	cu = ctx->cuda;
	if (!cu) {
		cu = calloc(1, sizeof(*cu));
		if (!cu) {
			pthread_mutex_unlock(&ctx->lock);
			return -ENOMEM;
		}
		cu->status = load(ctx, cu);
		if (cu->status)
			haccel__info(ctx, "cuda: %s; using the CPU backend", cu->why);
		ctx->cuda = cu;
	}
	pthread_mutex_unlock(&ctx->lock);
	ret = cu->status;
	if (!ret) {
		int res = cu->CtxSetCurrent(cu->ctx);

		if (res) {
			const char *name = NULL;

			cu->GetErrorName(res, &name);
			pthread_mutex_lock(&ctx->lock);
			snprintf(cu->why, sizeof(cu->why),
				 "unusable GPU: cuCtxSetCurrent failed: %s (%d)", name ? name : "?", res);
			pthread_mutex_unlock(&ctx->lock);
			ret = -EIO;
		}
	}
	*out = cu;
	return ret;
}

void haccel__cuda_fini(struct haccel_ctx *ctx)
{
	struct haccel__cuda *cu = ctx->cuda;

	if (!cu)
		return;
	if (!cu->status && cu->ctx)
		cu->DevicePrimaryCtxRelease(cu->device);
	if (cu->lib)
		dlclose(cu->lib);
	free(cu);
	ctx->cuda = NULL;
}

int haccel__cu_check(struct haccel_ctx *ctx, int res, const char *what, const char *file,
		     int line)
{
	struct haccel__cuda *cu = ctx->cuda;
	const char *name = NULL, *str = NULL;

	if (!res)
		return 0;
	if (cu && cu->GetErrorName) {
		cu->GetErrorName(res, &name);
		cu->GetErrorString(res, &str);
	}
	/* Out of memory is the one a caller can act on. */
	int err = res == 2 ? -ENOMEM : -EIO;
	return haccel__fail(ctx, err, "cuda: %s failed: %s (%d: %s) at %s:%d", what,
			    name ? name : "CUDA_ERROR", res, str ? str : "", file, line);
}

int haccel_gpu_info(struct haccel_ctx *ctx, struct haccel_gpu_info *out)
{
	struct haccel__cuda *cu;
	int ret;

	if (!ctx || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->kernels = haccel__fatbin_size > 0;
	ret = haccel__cuda_get(ctx, &cu);
	if (ret == -ENOMEM)
		return ret;
	snprintf(out->reason, sizeof(out->reason), "%s", ret ? cu->why : "");
	if (ret)
		return ret;
	out->n_devices = (uint32_t)cu->n_devices;
	out->driver_version = (uint32_t)cu->driver_version;
	out->sm_count = (uint32_t)cu->sm_count;
	out->cc_major = (uint32_t)cu->cc_major;
	out->cc_minor = (uint32_t)cu->cc_minor;
	snprintf(out->name, sizeof(out->name), "%s", cu->name);
	snprintf(out->pci_bus_id, sizeof(out->pci_bus_id), "%s", cu->pci_bus_id);
	size_t f = 0, t = 0;
	if (!cu->MemGetInfo(&f, &t)) {
		out->mem_free = f;
		out->mem_total = t;
	}
	return 0;
}
