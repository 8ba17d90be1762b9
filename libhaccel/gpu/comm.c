// SPDX-License-Identifier: MIT
/*
 * NCCL at run time (see comm.h). The table is loaded once per context; a
 * missing library is not an error of the context, only of the calls that
 * need NCCL, so a one-GPU node without NCCL runs as before.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "core/log.h"
#include "gpu/comm.h"

static const char *const nccl_names[] = {
	"libnccl.so.2",
	"/usr/local/cuda/lib/libnccl.so.2",
	"/usr/local/cuda/lib64/libnccl.so.2",
	"/usr/lib/x86_64-linux-gnu/libnccl.so.2",
};

static void nccl_load(struct haccel__nccl *n)
{
	const char *env = getenv("HACCEL_NCCL_LIBRARY");
	const char *tried = env && *env ? env : "libnccl.so.2 (library path, /usr/local/cuda/lib, lib64, /usr/lib/x86_64-linux-gnu)";

	if (env && *env) {
		n->lib = dlopen(env, RTLD_NOW | RTLD_LOCAL);
		if (n->lib)
			snprintf(n->path, sizeof(n->path), "%s", env);
	} else {
		for (size_t i = 0; !n->lib && i < sizeof(nccl_names) / sizeof(nccl_names[0]); i++) {
			n->lib = dlopen(nccl_names[i], RTLD_NOW | RTLD_LOCAL);
			if (n->lib)
				snprintf(n->path, sizeof(n->path), "%s", nccl_names[i]);
		}
	}
	if (!n->lib) {
		const char *e = dlerror();

		snprintf(n->why, sizeof(n->why), "no NCCL: %s not found%s%s", tried, e ? ": " : "",
			 e ? e : "");
		n->status = -ENODEV;
		return;
	}
#define SYM(field, name)                                                                    \
	if (!(*(void **)&n->field = dlsym(n->lib, name))) {                                 \
		snprintf(n->why, sizeof(n->why), "no NCCL: %s lacks %s", n->path, name);    \
		n->status = -ENODEV;                                                        \
		return;                                                                     \
	}
	SYM(GetVersion, "ncclGetVersion");
	SYM(GetErrorString, "ncclGetErrorString");
	SYM(CommInitAll, "ncclCommInitAll");
	SYM(CommDestroy, "ncclCommDestroy");
	SYM(CommCount, "ncclCommCount");
	SYM(AllReduce, "ncclAllReduce");
	SYM(GroupStart, "ncclGroupStart");
	SYM(GroupEnd, "ncclGroupEnd");
#undef SYM
	if (n->GetVersion(&n->version) != 0 || n->version < 20000) {
		snprintf(n->why, sizeof(n->why), "no NCCL: %s reports version %d (2.x needed)",
			 n->path, n->version);
		n->status = -ENODEV;
	}
}

int haccel__nccl_get(struct haccel_ctx *ctx, struct haccel__nccl **out)
{
	struct haccel__nccl *n;

	pthread_mutex_lock(&ctx->lock);
	n = ctx->nccl;
	if (!n) {
		n = calloc(1, sizeof(*n));
		if (!n) {
			pthread_mutex_unlock(&ctx->lock);
			return -ENOMEM;
		}
		nccl_load(n);
		ctx->nccl = n;
	}
	pthread_mutex_unlock(&ctx->lock);
	*out = n;
	return n->status;
}

void haccel__nccl_fini(struct haccel_ctx *ctx)
{
	struct haccel__nccl *n = ctx->nccl;

	if (!n)
		return;
	if (n->lib)
		dlclose(n->lib);
	free(n);
	ctx->nccl = NULL;
}

int haccel_nccl_info(struct haccel_ctx *ctx, struct haccel_nccl_info *out)
{
	struct haccel__nccl *n;
	int ret;

	if (!ctx || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	ret = haccel__nccl_get(ctx, &n);
	if (ret == -ENOMEM)
		return ret;
	out->version = n->status ? 0 : (uint32_t)n->version;
	snprintf(out->path, sizeof(out->path), "%s", n->status ? "" : n->path);
	snprintf(out->reason, sizeof(out->reason), "%s", n->status ? n->why : "");
	return ret;
}

static int nccl_fail(struct haccel_ctx *ctx, struct haccel__nccl *n, int r, const char *what)
{
	return haccel__fail(ctx, -EIO, "nccl: %s failed: %s (%d)", what, n->GetErrorString(r), r);
}

int haccel__comm_init_all(struct haccel_ctx *ctx, uint32_t count, const int *devs, void **comms)
{
	struct haccel__nccl *n;
	int ret, r;

	if (!count || count > 64 || !devs || !comms)
		return -EINVAL;
	ret = haccel__nccl_get(ctx, &n);
	if (ret)
		return ret == -ENOMEM ? ret : haccel__fail(ctx, ret, "%s", n->why);
	r = n->CommInitAll(comms, (int)count, devs);
	return r ? nccl_fail(ctx, n, r, "ncclCommInitAll") : 0;
}

void haccel__comm_destroy_all(struct haccel_ctx *ctx, uint32_t count, void **comms)
{
	struct haccel__nccl *n = ctx->nccl;

	for (uint32_t i = 0; n && !n->status && i < count; i++)
		if (comms[i])
			n->CommDestroy(comms[i]);
}

int haccel__comm_all_reduce_f32(struct haccel_ctx *ctx, uint32_t count, void **comms,
				const uint64_t *send, const uint64_t *recv, size_t elems,
				void **streams)
{
	struct haccel__nccl *n = ctx->nccl;
	int r, r2;

	if (!n || n->status)
		return haccel__fail(ctx, -ENODEV, "nccl: not loaded");
	/* One group: a single thread drives every rank without deadlock. */
	r = n->GroupStart();
	for (uint32_t i = 0; !r && i < count; i++)
		r = n->AllReduce((const void *)(uintptr_t)send[i], (void *)(uintptr_t)recv[i], elems,
				 HACCEL__NCCL_FLOAT32, HACCEL__NCCL_SUM, comms[i], streams[i]);
	r2 = n->GroupEnd();
	if (r)
		return nccl_fail(ctx, n, r, "ncclAllReduce");
	return r2 ? nccl_fail(ctx, n, r2, "ncclGroupEnd") : 0;
}
