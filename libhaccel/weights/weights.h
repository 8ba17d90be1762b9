/* SPDX-License-Identifier: MIT */
/*
 * Internal representation of an opened checkpoint, shared by the parser
 * (safetensors.c) and the loader (stream.c).
 */
#ifndef HACCEL_WEIGHTS_WEIGHTS_H
#define HACCEL_WEIGHTS_WEIGHTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "haccel.h"

/* Largest header accepted, as in the reference implementation. */
#define HACCEL__ST_MAX_HEADER (100u * 1000 * 1000)

struct haccel__tensor {
	char *name;
	uint32_t dtype;            /* enum haccel_dtype */
	uint32_t n_dims;
	uint64_t shape[HACCEL_MAX_DIMS];
	uint32_t file;
	uint64_t begin, end;       /* data_offsets: relative to the data start */
	uint64_t checksum;
	bool has_checksum;
};

/* One safetensors file, as it was when opened. */
struct haccel__wfile {
	char *path;
	uint64_t size;             /* st_size at open */
	struct timespec mtime;     /* st_mtim at open */
	dev_t dev;
	ino_t ino;
	uint64_t data_start;       /* 8 + header length */
	uint64_t data_bytes;       /* size - data_start = last tensor end */
	uint64_t dest_base;        /* this file's data in a host load destination */
	uint32_t first_tensor;     /* its tensors: tensors[first, first + n) */
	uint32_t n_tensors;
	uint32_t n_meta;           /* __metadata__, in header order */
	char **meta_key;
	char **meta_val;
};

struct haccel_weights {
	struct haccel_ctx *ctx;
	struct haccel__wfile *files;
	uint32_t n_files;
	struct haccel__tensor *tensors; /* by file, then by begin */
	uint32_t n_tensors;
	uint32_t *by_name;         /* tensor indices sorted by name */
	uint64_t tensor_bytes;
	uint64_t dest_bytes;
	uint32_t n_checksums;
};

/*
 * The result of parsing one file's header: tensors sorted by begin, the
 * metadata, and the data region. Used by haccel_weights_open() and by the
 * fuzz target, which feeds whole files from memory.
 */
struct haccel__st_header {
	uint64_t data_start;
	uint64_t data_bytes;
	struct haccel__tensor *tensors;
	uint32_t n_tensors;
	uint32_t n_meta;
	char **meta_key;
	char **meta_val;
};

/*
 * Parse and validate a safetensors header. buf holds the first buf_len
 * bytes of a file of file_size bytes. When buf_len is too short (fewer than
 * 8 bytes, or fewer than 8 + header length) it returns -EAGAIN and says how
 * many bytes it needs through *need (need may be NULL). A file shorter than
 * 8 bytes is -EBADMSG. label names the file in messages. Returns 0,
 * -EAGAIN, -EBADMSG (with haccel_last_error() naming file, tensor and rule),
 * -ENOMEM.
 */
int haccel__st_parse(struct haccel_ctx *ctx, const char *label,
		     const uint8_t *buf, size_t buf_len, uint64_t file_size,
		     uint64_t *need, struct haccel__st_header *out);
void haccel__st_header_free(struct haccel__st_header *h);

/* The destination of tensor t in a host load. */
static inline uint64_t haccel__tensor_dest(const struct haccel_weights *w,
					   const struct haccel__tensor *t)
{
	return w->files[t->file].dest_base + t->begin;
}

#endif /* HACCEL_WEIGHTS_WEIGHTS_H */
