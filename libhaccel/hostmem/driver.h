/* SPDX-License-Identifier: MIT */
/*
 * The haccel.ko provider of pinned host memory: finding the driver, the
 * version handshake, pinning and unpinning a buffer's pages, quotas. One
 * state per context, made by haccel__hostmem_ctx_init().
 */
#ifndef HACCEL_HOSTMEM_DRIVER_H
#define HACCEL_HOSTMEM_DRIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "haccel.h"

struct haccel__driver;

/*
 * A buffer's pins: one GEM handle per piece of at most max_pin_bytes, in
 * the driver file of the process that pinned them (a forked child shares
 * that file, so only the pinning process closes them).
 */
struct haccel__pins {
	uint32_t n;
	int32_t pid;               /* the process that pinned them */
	uint32_t *handles;         /* owned */
};

/*
 * Counters by provider (index: enum haccel_hostmem_provider), under
 * ctx->lock, updated by hostmem.c with the other statistics.
 */
struct haccel__provider_counts {
	uint64_t bytes[3];
	uint64_t buffers[3];
	uint64_t driver_pins;
	uint64_t driver_refusals;
};

/* Allocate / free the context's provider state (closes the render node). */
int haccel__driver_ctx_init(struct haccel_ctx *ctx);
void haccel__driver_ctx_fini(struct haccel_ctx *ctx);

/* The counters, for a caller that holds ctx->lock. */
struct haccel__provider_counts *haccel__driver_counts(struct haccel_ctx *ctx);

/*
 * The provider new buffers get (enum haccel_hostmem_provider), picked once
 * per context and logged once: DRIVER or USER. When
 * HACCEL_HOSTMEM_PROVIDER=driver and the driver cannot be used, the
 * negative status of the probe, with its reason in why.
 */
int haccel__driver_provider(struct haccel_ctx *ctx, char *why, size_t len);

/*
 * The version rule of uapi/haccel_drm.h as a pure function: the driver
 * (ABI version drv, serving userspace from drv_min) is accepted by a
 * library speaking ours when the majors are equal and drv_min <= ours.
 * Returns 0 or -EPROTO (also for a value that is no encoded version); why
 * gets a sentence naming both versions and, when refused, what to update.
 */
int haccel__driver_version_check(uint64_t drv, uint64_t drv_min, uint64_t ours,
				 char *why, size_t len);

/*
 * Pin [ptr, ptr + bytes) (page-aligned) through the context's driver file:
 * expected on node (or -1: any), every page there when strict. Pieces of
 * at most the driver's maximum; all or nothing. Returns 0, or -EDQUOT,
 * -EXDEV (strict and a page elsewhere), -EFAULT, -EINVAL, -ENOMEM, -EINTR
 * with a message in why that names the node, the limit and the usage (or
 * the page's real node); stores nothing with haccel__fail().
 */
int haccel__driver_pin(struct haccel_ctx *ctx, void *ptr, uint64_t bytes, int node,
		       bool strict, struct haccel__pins *out, char *why, size_t len);

/*
 * Close the buffer's handles: the driver unpins and uncharges the pages.
 * In a forked child only the handle array goes: the handles live in the
 * file it shares with its parent, whose buffer they pin (as mlock, which a
 * child does not inherit, its munmap leaves the parent's pages alone).
 */
void haccel__driver_unpin(struct haccel_ctx *ctx, struct haccel__pins *pins);

/* Whether the driver checks STRICT_NODE (HACCEL_CAP_PIN_STRICT_NODE). */
bool haccel__driver_strict_node(struct haccel_ctx *ctx);

#endif /* HACCEL_HOSTMEM_DRIVER_H */
