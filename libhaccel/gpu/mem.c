// SPDX-License-Identifier: MIT
/* Device memory through the virtual memory API; see mem.h. */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "core/ctx.h"
#include "core/log.h"
#include "gpu/cuda.h"
#include "gpu/mem.h"
#include "gpu/module.h"

static void prop_init(struct haccel__cu_mem_prop *p, int dev)
{
	memset(p, 0, sizeof(*p));
	p->type = HACCEL__CU_MEM_ALLOCATION_TYPE_PINNED;
	p->location.type = HACCEL__CU_MEM_LOCATION_TYPE_DEVICE;
	p->location.id = dev;
}

static uint64_t rounded(struct haccel__cuda *cu, uint64_t bytes)
{
	struct haccel__cu_mem_prop p;
	size_t gran = 0;

	prop_init(&p, cu->device);
	if (cu->MemGetAllocationGranularity(&gran, &p, HACCEL__CU_MEM_GRANULARITY_MINIMUM) || !gran)
		gran = 2u << 20;
	return (bytes + gran - 1) / gran * gran;
}

static int mem_alloc(struct haccel_ctx *ctx, uint64_t bytes, uint64_t *dptr)
{
	struct haccel__cu_mem_prop p;
	struct haccel__cu_access_desc a;
	struct haccel__cuda *cu = NULL;
	unsigned long long h = 0;
	uint64_t va = 0, size;
	int ret;

	*dptr = 0;
	ret = haccel__cuda_get(ctx, &cu);
	if (ret)
		return ret == -ENOMEM ? ret :
				      haccel__fail(ctx, ret, "cuda: %s%s", haccel__cuda_why_prefix(cu->why),
						   cu->why);
	size = rounded(cu, bytes ? bytes : 1);
	prop_init(&p, cu->device);
	ret = HACCEL__CU(ctx, cu->MemAddressReserve(&va, size, 0, 0, 0));
	if (ret)
		return ret;
	int res = cu->MemCreate(&h, size, &p, 0);
	if (res) {
		size_t fr = 0, tot = 0;

		cu->MemAddressFree(va, size);
		cu->MemGetInfo(&fr, &tot);
		if (res == 2)
			return haccel__fail(ctx, -ENOMEM,
					    "cuda: cannot allocate %.2f GiB of GPU memory: %.2f GiB free of %.2f GiB",
					    size / 1073741824.0, fr / 1073741824.0, tot / 1073741824.0);
		return haccel__cu_check(ctx, res, "cuMemCreate", __FILE__, __LINE__);
	}
	ret = HACCEL__CU(ctx, cu->MemMap(va, size, 0, h, 0));
	/* The mapping keeps the memory; the handle can go. */
	cu->MemRelease(h);
	if (ret) {
		cu->MemAddressFree(va, size);
		return ret;
	}
	memset(&a, 0, sizeof(a));
	a.location.type = HACCEL__CU_MEM_LOCATION_TYPE_DEVICE;
	a.location.id = cu->device;
	a.flags = HACCEL__CU_MEM_ACCESS_RW;
	ret = HACCEL__CU(ctx, cu->MemSetAccess(va, size, &a, 1));
	if (!ret)
		ret = HACCEL__CU(ctx, cu->MemsetD8Async(va, 0, size, NULL));
	if (!ret)
		ret = HACCEL__CU(ctx, cu->CtxSynchronize());
	if (ret) {
		cu->MemUnmap(va, size);
		cu->MemAddressFree(va, size);
		return ret;
	}
	*dptr = va;
	return 0;
}

/* Both synchronize the context: under the GPU runtime's lock, if it is
 * made, so never inside another thread's capture. */
int haccel__gpu_mem_alloc(struct haccel_ctx *ctx, uint64_t bytes, uint64_t *dptr)
{
	struct haccel__gpu *g = haccel__gpu_peek(ctx);
	int ret;

	haccel__gpu_lock(g);
	ret = mem_alloc(ctx, bytes, dptr);
	haccel__gpu_unlock(g);
	return ret;
}

void haccel__gpu_mem_free(struct haccel_ctx *ctx, uint64_t dptr, uint64_t bytes)
{
	struct haccel__cuda *cu = ctx->cuda;
	struct haccel__gpu *g;
	uint64_t size;

	if (!dptr || !cu || cu->status)
		return;
	g = haccel__gpu_peek(ctx);
	haccel__gpu_lock(g);
	size = rounded(cu, bytes ? bytes : 1);
	cu->CtxSetCurrent(cu->ctx);
	/* Work still queued may use it. */
	cu->CtxSynchronize();
	cu->MemUnmap(dptr, size);
	cu->MemAddressFree(dptr, size);
	haccel__gpu_unlock(g);
}
