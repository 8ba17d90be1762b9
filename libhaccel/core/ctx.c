// SPDX-License-Identifier: MIT
/* Context lifetime, version queries, versioned config structs. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/comm.h"
#include "gpu/cuda.h"
#include "gpu/module.h"
#include "hostmem/hostmem.h"
#include "log.h"

#define HACCEL__STR2(x) #x
#define HACCEL__STR(x) HACCEL__STR2(x)

unsigned int haccel_version(void)
{
	return HACCEL_VERSION;
}

const char *haccel_version_string(void)
{
	return HACCEL__STR(HACCEL_VERSION_MAJOR) "." HACCEL__STR(
		HACCEL_VERSION_MINOR) "." HACCEL__STR(HACCEL_VERSION_PATCH);
}

int haccel__config_copy(void *dst, size_t dst_size, const void *src,
			size_t min_size)
{
	uint32_t size;

	if (!src)
		return -EINVAL;
	memcpy(&size, src, sizeof(size));
	if (size < min_size)
		return -EINVAL;
	if (size > dst_size) {
		const unsigned char *extra = (const unsigned char *)src + dst_size;
		for (size_t i = 0; i < size - dst_size; i++)
			if (extra[i])
				return -EINVAL;
		size = (uint32_t)dst_size;
	}
	memcpy(dst, src, size);
	/* dst now claims its own full size: the tail kept the defaults. */
	memcpy(dst, &(uint32_t){ (uint32_t)dst_size }, sizeof(uint32_t));
	return 0;
}

void haccel_open_params_init(struct haccel_open_params *p)
{
	if (!p)
		return;
	memset(p, 0, sizeof(*p));
	p->size = sizeof(*p);
	p->log_level = HACCEL_LOG_WARN;
}

int haccel_open(const struct haccel_open_params *params,
		struct haccel_ctx **out)
{
	struct haccel_open_params p;
	struct haccel_ctx *ctx;
	const char *env;
	int ret;

	if (!out)
		return -EINVAL;
	*out = NULL;
	haccel_open_params_init(&p);
	if (params) {
		ret = haccel__config_copy(&p, sizeof(p), params,
					  sizeof(struct haccel_open_params));
		if (ret)
			return ret;
	}
	if (p.flags || p.reserved || p.log_level < HACCEL_LOG_ERROR ||
	    p.log_level > HACCEL_LOG_DEBUG)
		return -EINVAL;

	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	ret = haccel__hostmem_ctx_init(ctx);
	if (ret) {
		free(ctx);
		return ret;
	}
	pthread_mutex_init(&ctx->lock, NULL);
	ctx->log_level = p.log_level;
	ctx->log_fn = p.log_fn;
	ctx->log_user = p.log_user;

	env = getenv("HACCEL_LOG");
	if (env) {
		ret = haccel__log_level_parse(env);
		if (ret >= 0)
			ctx->log_level = ret;
		else
			haccel__warn(ctx, "HACCEL_LOG=%s not understood (use error, warn, info or debug); keeping level %d",
				     env, ctx->log_level);
	}

	/* A cut root would read another tree's files: refuse it, loudly. */
	env = getenv("HACCEL_SYSFS_ROOT");
	if (!env || !*env)
		env = "/sys";
	if (strlen(env) >= sizeof(ctx->sysfs_root)) {
		/* Logged only: no context survives to hold a last error. */
		haccel__err(ctx, "HACCEL_SYSFS_ROOT is %zu bytes long, more than the %zu a sysfs root may have: \"%.60s...\"",
			    strlen(env), sizeof(ctx->sysfs_root) - 1, env);
		haccel__hostmem_ctx_fini(ctx);
		pthread_mutex_destroy(&ctx->lock);
		free(ctx);
		return -EINVAL;
	}
	memcpy(ctx->sysfs_root, env, strlen(env) + 1);
	haccel__dbg(ctx, "libhaccel %s opened", haccel_version_string());
	*out = ctx;
	return 0;
}

void haccel_close(struct haccel_ctx *ctx)
{
	if (!ctx)
		return;
	haccel__gpu_fini(ctx);
	haccel__nccl_fini(ctx);
	haccel__cuda_fini(ctx);
	haccel__hostmem_ctx_fini(ctx);
	pthread_mutex_destroy(&ctx->lock);
	free(ctx);
}

const char *haccel__sysfs_path(const struct haccel_ctx *ctx, char *buf,
			       size_t len, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(buf, len, "%s/", ctx->sysfs_root);

	if (n < 0 || (size_t)n >= len)
		n = 0;
	va_start(ap, fmt);
	vsnprintf(buf + n, len - (size_t)n, fmt, ap);
	va_end(ap);
	return buf;
}
