/* SPDX-License-Identifier: MIT */
/* Internal helpers of the weight loader. */
#ifndef HACCEL_WEIGHTS_STREAM_H
#define HACCEL_WEIGHTS_STREAM_H

#include <stddef.h>
#include <stdint.h>

struct haccel_ctx;

/*
 * Direct I/O alignment of fd: memory and file-offset alignment, from
 * statx(STATX_DIOALIGN), else the device's logical block size, else 4096.
 * *how says which. Returns 0, or -EOPNOTSUPP when the filesystem reports
 * no direct I/O support.
 */
int haccel__dio_align(struct haccel_ctx *ctx, int fd, uint32_t *mem_align,
		      uint32_t *off_align, const char **how);

/*
 * How many of the pages of fd (the file at path, size bytes) are in the page
 * cache: cachestat(2), else mincore(2) where it tells the truth (a file
 * this process owns or may write; for any other it reports every page
 * resident). Returns 0 with *resident of *pages, or -1 when it cannot be
 * known, with why (len bytes) saying why. The loader and haccel-bench
 * stream both judge residency with it.
 */
int haccel__file_resident_pages(int fd, const char *path, uint64_t size, uint64_t *resident,
				uint64_t *pages, char *why, size_t len);

#endif /* HACCEL_WEIGHTS_STREAM_H */
