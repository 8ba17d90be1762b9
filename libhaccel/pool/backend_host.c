// SPDX-License-Identifier: MIT
/*
 * Host backend: anonymous memory, faulted in at creation so no page fault
 * ever lands on the per-token path, with transparent huge pages requested
 * to keep TLB misses off large pools.
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend.h"
#include "core/log.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define HUGE_ALIGN (2u << 20)

/*
 * Map bytes at a 2 MiB boundary so transparent huge pages can back all of
 * it: map a little more, then unmap the unaligned head and the tail, which
 * leaves exactly [p, p + bytes) mapped for munmap() to release.
 */
static void *map_aligned(uint64_t bytes)
{
	size_t len = (size_t)bytes + HUGE_ALIGN;
	char *raw, *p;

	if (len < bytes)
		return NULL;
	raw = mmap(NULL, len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (raw == MAP_FAILED)
		return NULL;
	p = (char *)(((uintptr_t)raw + HUGE_ALIGN - 1) & ~(uintptr_t)(HUGE_ALIGN - 1));
	if (p > raw)
		munmap(raw, (size_t)(p - raw));
	if (raw + len > p + bytes)
		munmap(p + bytes, (size_t)(raw + len - (p + bytes)));
	return p;
}

static int host_alloc(struct haccel_ctx *ctx, uint64_t bytes, void **ptr)
{
	void *p;

	if (bytes == 0 || bytes > (uint64_t)SIZE_MAX)
		return -EINVAL;
	p = map_aligned(bytes);
	if (!p) {
		int e = errno;
		haccel__err(ctx, "host pool: mmap of %llu bytes failed: %s",
			    (unsigned long long)bytes, strerror(e));
		return -ENOMEM;
	}
	/* Advice only: without THP the pool still works, on 4 KiB pages. */
	(void)madvise(p, (size_t)bytes, MADV_HUGEPAGE);
	if (madvise(p, (size_t)bytes, MADV_POPULATE_WRITE) != 0) {
		int e = errno;
		if (e == ENOMEM || e == EFAULT || e == EHWPOISON) {
			haccel__err(ctx, "host pool: cannot populate %llu bytes: %s",
				    (unsigned long long)bytes, strerror(e));
			munmap(p, (size_t)bytes);
			return -ENOMEM;
		}
		/* Kernels before 5.14 lack POPULATE_WRITE: touch each page. */
		long pg = sysconf(_SC_PAGESIZE);
		if (pg <= 0)
			pg = 4096;
		for (uint64_t off = 0; off < bytes; off += (uint64_t)pg)
			((volatile char *)p)[off] = 0;
	}
	*ptr = p;
	return 0;
}

static void host_free(struct haccel_ctx *ctx, void *ptr, uint64_t bytes)
{
	if (ptr)
		munmap(ptr, (size_t)bytes);
}

static int host_copy(struct haccel_ctx *ctx, const struct haccel__mem_copy *c,
		     uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		memcpy(c[i].dst, c[i].src, (size_t)c[i].bytes);
	return 0;
}

static int host_zero(struct haccel_ctx *ctx, void *ptr, uint64_t bytes)
{
	memset(ptr, 0, (size_t)bytes);
	return 0;
}

static int host_swap(struct haccel_ctx *ctx, const struct haccel__mem_copy *c, uint32_t n,
		     int to_host)
{
	(void)to_host;
	return host_copy(ctx, c, n);
}

static const struct haccel__mem_ops host_ops = {
	.name = "host",
	.alloc = host_alloc,
	.free = host_free,
	.copy = host_copy,
	.zero = host_zero,
	.swap = host_swap,
};

const struct haccel__mem_ops *haccel__mem_ops_get(uint32_t kind)
{
	switch (kind) {
	case HACCEL_MEM_HOST:
		return &host_ops;
	case HACCEL_MEM_CUDA:
		return &haccel__cuda_mem_ops;
	default:
		return NULL;
	}
}
