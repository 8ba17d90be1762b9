// SPDX-License-Identifier: MIT
/*
 * Direct I/O alignment of an open file. Kept apart from the loader because
 * it needs the kernel's struct statx (with the DIO fields, Linux 6.1),
 * which clashes with glibc's <sys/stat.h>.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "core/ctx.h"
#include "stream.h"

#ifndef STATX_DIOALIGN
#define STATX_DIOALIGN 0x00002000U
#endif

/* Logical block size of the device holding the file, from sysfs. */
static uint32_t logical_block_size(const struct haccel_ctx *ctx, unsigned int maj,
				   unsigned int min)
{
	char path[512], buf[32];
	FILE *f;
	unsigned long v = 0;

	/* A partition's queue/ sits one level up, under its disk. */
	const char *const rel[] = { "dev/block/%u:%u/queue/logical_block_size",
				    "dev/block/%u:%u/../queue/logical_block_size" };
	for (int i = 0; i < 2; i++) {
		char fmt[128];

		snprintf(fmt, sizeof(fmt), "%s", rel[i]);
		haccel__sysfs_path(ctx, path, sizeof(path), fmt, maj, min);
		f = fopen(path, "re");
		if (!f)
			continue;
		if (fgets(buf, sizeof(buf), f))
			v = strtoul(buf, NULL, 10);
		fclose(f);
		if (v)
			return (uint32_t)v;
	}
	return 0;
}

int haccel__dio_align(struct haccel_ctx *ctx, int fd, uint32_t *mem_align,
		      uint32_t *off_align, const char **how)
{
	struct statx stx;

	memset(&stx, 0, sizeof(stx));
	if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 &&
	    (stx.stx_mask & STATX_DIOALIGN)) {
		if (!stx.stx_dio_offset_align)
			return -EOPNOTSUPP; /* the filesystem has no direct I/O */
		*mem_align = stx.stx_dio_mem_align;
		*off_align = stx.stx_dio_offset_align;
		*how = "statx(STATX_DIOALIGN)";
		return 0;
	}
	/* Older kernel: the device's logical block size bounds both. */
	uint32_t lbs = logical_block_size(ctx, stx.stx_dev_major, stx.stx_dev_minor);
	if (lbs) {
		*mem_align = *off_align = lbs;
		*how = "logical block size";
	} else {
		*mem_align = *off_align = 4096;
		*how = "assumed 4096";
	}
	return 0;
}
