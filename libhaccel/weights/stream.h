/* SPDX-License-Identifier: MIT */
/* Internal helpers of the weight loader. */
#ifndef HACCEL_WEIGHTS_STREAM_H
#define HACCEL_WEIGHTS_STREAM_H

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

#endif /* HACCEL_WEIGHTS_STREAM_H */
