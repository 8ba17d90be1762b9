/* SPDX-License-Identifier: MIT */
/* The context: the only mutable state of the library outside its objects. */
#ifndef HACCEL_CORE_CTX_H
#define HACCEL_CORE_CTX_H

#include <stddef.h>

#include "haccel.h"

#include <pthread.h>

struct haccel_hostmem_stats;
struct haccel__cuda;
struct haccel__driver;
struct haccel__gpu;

struct haccel_ctx {
	/* Set at open, read-only after: a context may be shared by threads
	 * that each own different pools. */
	int log_level;
	void (*log_fn)(void *user, int level, const char *msg);
	void *log_user;
	char sysfs_root[256];        /* $HACCEL_SYSFS_ROOT or "/sys" */

	/* Protected by lock: written by any thread. */
	pthread_mutex_t lock;
	char last_error[1024];
	uint64_t n_errors;           /* haccel__fail() calls: tells a caller
				      * whether a callee stored its own message */
	struct haccel_hostmem_stats *hostmem_stats; /* owned, see hostmem.c */
	/* Which provider pins host memory (haccel.ko or mlock) and the
	 * driver's file: owned, made with hostmem_stats; its own lock
	 * serialises the one-time probe (see hostmem/driver.c). */
	struct haccel__driver *driver;
	struct haccel__cuda *cuda;   /* loaded on first use, see gpu/cuda.c */
	struct haccel__gpu *gpu;     /* module and streams, see gpu/module.c */
	struct haccel__nccl *nccl;   /* loaded on first use, see gpu/comm.c */
};

/*
 * Log msg at error level and keep it as the context's last error (see
 * haccel_last_error()); returns status, so that `return haccel__fail(ctx,
 * -EINVAL, "...")` reports and fails in one step.
 */
int haccel__fail(struct haccel_ctx *ctx, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Join root and a relative sysfs path ("devices/system/node") into buf. */
const char *haccel__sysfs_path(const struct haccel_ctx *ctx, char *buf,
			       size_t len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/*
 * Copy a caller's versioned config struct into a full-size local copy:
 * fields the caller's (older, smaller) struct lacks keep the defaults that
 * dst already holds. A struct larger than ours is accepted only when the
 * extra bytes are zero, so a newer caller's unknown settings never vanish
 * silently. Returns 0 or -EINVAL.
 */
int haccel__config_copy(void *dst, size_t dst_size, const void *src,
			size_t min_size);

#endif /* HACCEL_CORE_CTX_H */
