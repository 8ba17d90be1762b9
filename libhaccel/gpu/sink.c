// SPDX-License-Identifier: MIT
/*
 * The GPU sink: haccel_load() into device memory, in the host layout.
 *
 * The loader reads into pinned staging buffers and hands each completed
 * chunk to put() in file order. put() queues cuMemcpyHtoDAsync from the
 * staging buffer on the sink's own non-blocking copy stream and returns at
 * once; when the loader moves on to another buffer, an event is recorded
 * for the one it left. wait(buf), called before the loader refills buf,
 * synchronizes on that buffer's event only, so reads into the other buffers
 * and copies out of this one overlap. finish() synchronizes the stream: the
 * destination is complete when haccel_load() returns.
 *
 * Pieces of one chunk (one per tensor) are contiguous in the staging buffer
 * and in the destination (a file's data region stays contiguous in the host
 * layout), so they merge into one copy per chunk: a checkpoint of many small
 * tensors (norms, FP8 scales) costs no more driver calls than one of large
 * ones. A chunk's copy is issued when its last piece reaches the end of the
 * buffer, or when the loader turns to another buffer.
 *
 * begin() registers the staging memory with the driver (cuMemHostRegister,
 * pieces of at most HACCEL__CUDA_REGISTER_CHUNK, each a whole number of
 * buffers so that no copy straddles two registrations): copies are then DMA
 * at the link's speed. A refused registration is not an error: the copies
 * go from unregistered memory, which the driver bounces through its own
 * pinned buffers (cuMemcpyHtoDAsync then returns once the source has been
 * read, so the staging protocol stays correct), and one info line says why.
 * end() synchronizes the stream (after a failure too: no copy may still
 * read a buffer the loader is about to free) and unregisters.
 *
 * The callbacks run on the loader's I/O thread, which may not be the thread
 * that made the sink: begin() makes the context current there.
 */
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/ctx.h"
#include "core/log.h"
#include "gpu/cuda.h"
#include "gpu/mem.h"
#include "hostmem/hostmem.h"

#define NO_BUF UINT32_MAX

struct haccel_gpu_sink {
	struct haccel_sink sink;       /* what haccel_load() gets; user = this */
	struct haccel_ctx *ctx;
	struct haccel__cuda *cu;
	uint64_t dptr, bytes;          /* the destination */
	bool owned;                    /* dptr from haccel__gpu_mem_alloc */
	void *stream;                  /* copy stream, non-blocking */

	/*
	 * One load at a time: begin() takes in_load with one atomic
	 * exchange (of two threads loading through this sink at once, one
	 * gets -EBUSY), and the fields below belong to the loader's I/O
	 * thread from begin() to end(), which gives it back.
	 */
	atomic_bool in_load;
	char *staging;                 /* the loader's buffers, n_buf x buf_bytes */
	uint64_t buf_bytes;
	uint32_t n_buf;
	void **events;                 /* per staging buffer; NULL: no begin() */
	bool *recorded;                /* events[b] recorded and not yet waited on */
	uint64_t piece_bytes;          /* registration pieces */
	uint32_t n_pieces;             /* pieces registered (to unregister) */
	uint32_t cur;                  /* buffer with copies queued and no event */
	struct {
		uint64_t dst;
		const char *src;
		uint64_t bytes;
	} pend;                        /* copy being merged, not yet queued */
	bool dirty;                    /* copies queued since the last stream
					* sync (what wait() syncs without events) */

	struct haccel_gpu_sink_info info; /* counters: written by the loader's
					   * thread, read between loads */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------------ */
/* Copies                                                                   */

/* Queue the merged copy, if any. */
static int flush(struct haccel_gpu_sink *s)
{
	int ret;

	if (!s->pend.bytes)
		return 0;
	ret = HACCEL__CU(s->ctx, s->cu->MemcpyHtoDAsync(s->dptr + s->pend.dst, s->pend.src,
							 s->pend.bytes, s->stream));
	if (!ret) {
		s->info.copies++;
		s->info.copy_bytes += s->pend.bytes;
		s->dirty = true;
	}
	s->pend.bytes = 0;
	return ret;
}

/* The loader is done with buffer cur for now: queue its copy and mark the
 * point in the stream that wait(cur) must reach. */
static int close_buf(struct haccel_gpu_sink *s)
{
	int ret = flush(s);

	if (!ret && s->cur != NO_BUF && s->events) {
		ret = HACCEL__CU(s->ctx, s->cu->EventRecord(s->events[s->cur], s->stream));
		if (!ret)
			s->recorded[s->cur] = true;
	}
	s->cur = NO_BUF;
	return ret;
}

static int gs_put(void *user, uint32_t tensor, uint64_t tensor_offset, uint64_t dest_offset,
		  const void *src, uint64_t bytes, uint32_t buf)
{
	struct haccel_gpu_sink *s = user;
	int ret;

	(void)tensor;
	(void)tensor_offset;
	if (dest_offset > s->bytes || bytes > s->bytes - dest_offset)
		return haccel__fail(s->ctx, -ERANGE,
				    "gpu sink: %llu bytes at offset %llu do not fit the destination of %llu bytes",
				    (unsigned long long)bytes, (unsigned long long)dest_offset,
				    (unsigned long long)s->bytes);
	if (s->events && buf >= s->n_buf)
		return haccel__fail(s->ctx, -EINVAL, "gpu sink: staging buffer %u of %u", buf,
				    s->n_buf);
	if (!bytes)
		return 0;
	if (buf != s->cur) {
		ret = close_buf(s);
		if (ret)
			return ret;
		s->cur = buf;
	}
	if (s->pend.bytes && s->pend.src + s->pend.bytes == (const char *)src &&
	    s->pend.dst + s->pend.bytes == dest_offset) {
		s->pend.bytes += bytes;
	} else {
		ret = flush(s);
		if (ret)
			return ret;
		s->pend.dst = dest_offset;
		s->pend.src = src;
		s->pend.bytes = bytes;
	}
	/* The piece reaches the end of its buffer: the chunk is complete, so
	 * start its copy now rather than at the next buffer's first put. */
	if (s->events && (const char *)src + bytes == s->staging + (uint64_t)(buf + 1) * s->buf_bytes)
		return close_buf(s);
	return 0;
}

static int gs_wait(void *user, uint32_t buf)
{
	struct haccel_gpu_sink *s = user;
	uint64_t t0 = now_ns();
	int ret = 0;

	if (buf == s->cur)
		ret = close_buf(s);
	if (!ret && s->events) {
		if (buf < s->n_buf && s->recorded[buf]) {
			ret = HACCEL__CU(s->ctx, s->cu->EventSynchronize(s->events[buf]));
			s->recorded[buf] = false;
		}
	} else if (!ret) {
		/* No begin(): no per-buffer events, so the whole stream. */
		ret = flush(s);
		if (!ret && s->dirty)
			ret = HACCEL__CU(s->ctx, s->cu->StreamSynchronize(s->stream));
		s->dirty = false;
	}
	s->info.wait_ns += now_ns() - t0;
	return ret;
}

static int gs_finish(void *user)
{
	struct haccel_gpu_sink *s = user;
	uint64_t t0 = now_ns();
	int ret;

	ret = close_buf(s);
	if (!ret)
		ret = HACCEL__CU(s->ctx, s->cu->StreamSynchronize(s->stream));
	for (uint32_t b = 0; s->recorded && b < s->n_buf; b++)
		s->recorded[b] = false;
	s->dirty = false;
	s->info.wait_ns += now_ns() - t0;
	return ret;
}

/* ------------------------------------------------------------------------ */
/* Staging registration, per load                                           */

static void unregister_staging(struct haccel_gpu_sink *s)
{
	for (uint32_t i = 0; i < s->n_pieces; i++) {
		int res = s->cu->MemHostUnregister(s->staging + (uint64_t)i * s->piece_bytes);

		if (res)
			(void)haccel__cu_check(s->ctx, res, "cuMemHostUnregister", __FILE__, __LINE__);
	}
	s->n_pieces = 0;
}

/* Register the staging buffers, or say why the copies go unregistered. */
static void register_staging(struct haccel_gpu_sink *s)
{
	const char *env = getenv("HACCEL_FORCE_UNREGISTERED");
	uint64_t total = (uint64_t)s->n_buf * s->buf_bytes;
	char *reason = s->info.fallback_reason;
	size_t rlen = sizeof(s->info.fallback_reason);

	s->piece_bytes = HACCEL__CUDA_REGISTER_CHUNK / s->buf_bytes * s->buf_bytes;
	if (!s->piece_bytes)
		s->piece_bytes = s->buf_bytes;
	if (env && *env && strcmp(env, "0")) {
		snprintf(reason, rlen, "unregistered copies forced by HACCEL_FORCE_UNREGISTERED=%s", env);
	} else {
		for (uint64_t off = 0; off < total; off += s->piece_bytes) {
			uint64_t len = total - off < s->piece_bytes ? total - off : s->piece_bytes;
			int res = s->cu->MemHostRegister(s->staging + off, len,
							 HACCEL__CU_MEMHOSTREGISTER_PORTABLE);
			const char *name = NULL;

			if (!res) {
				s->n_pieces++;
				continue;
			}
			s->cu->GetErrorName(res, &name);
			snprintf(reason, rlen, "cuMemHostRegister of %llu bytes at offset %llu refused: %s (%d)",
				 (unsigned long long)len, (unsigned long long)off,
				 name ? name : "CUDA_ERROR", res);
			unregister_staging(s);
			break;
		}
	}
	if (reason[0]) {
		haccel__info(s->ctx, "gpu sink: staging buffers not registered with CUDA (%s): copies from unregistered memory, slower",
			     reason);
		return;
	}
	s->info.registered = 1;
	s->info.registered_bytes = total;
	haccel__hostmem_note_registration(s->ctx, HACCEL__REG_CUDA, s->n_pieces);
}

static void free_events(struct haccel_gpu_sink *s)
{
	for (uint32_t b = 0; s->events && b < s->n_buf; b++)
		if (s->events[b])
			s->cu->EventDestroy(s->events[b]);
	free(s->events);
	free(s->recorded);
	s->events = NULL;
	s->recorded = NULL;
}

static int gs_begin(void *user, const struct haccel_sink_begin *b)
{
	struct haccel_gpu_sink *s = user;
	int ret;

	if (b->size < offsetof(struct haccel_sink_begin, dest_bytes) + sizeof(b->dest_bytes) ||
	    (b->n_buf && (!b->staging || !b->buf_bytes)))
		return haccel__fail(s->ctx, -EINVAL, "gpu sink: malformed begin (size %u, %u buffers)",
				    b->size, b->n_buf);
	if (b->dest_bytes > s->bytes)
		return haccel__fail(s->ctx, -EINVAL,
				    "gpu sink: destination of %llu bytes (%.3f GiB) is smaller than the %llu bytes (%.3f GiB) this checkpoint needs (haccel_weights_info().dest_bytes)",
				    (unsigned long long)s->bytes, s->bytes / 1073741824.0,
				    (unsigned long long)b->dest_bytes, b->dest_bytes / 1073741824.0);
	if (atomic_exchange(&s->in_load, true))
		return haccel__fail(s->ctx, -EBUSY, "gpu sink: already in a load (one load at a time per sink)");
	/* The loader's I/O thread may be new to CUDA. */
	ret = HACCEL__CU(s->ctx, s->cu->CtxSetCurrent(s->cu->ctx));
	if (ret) {
		atomic_store(&s->in_load, false);
		return ret;
	}
	s->info.registered = 0;
	s->info.registered_bytes = 0;
	s->info.fallback_reason[0] = '\0';
	s->cur = NO_BUF;
	s->pend.bytes = 0;
	s->dirty = false;
	s->n_buf = b->n_buf;
	s->staging = b->staging;
	s->buf_bytes = b->buf_bytes;
	if (s->n_buf) {
		s->events = calloc(s->n_buf, sizeof(*s->events));
		s->recorded = calloc(s->n_buf, sizeof(*s->recorded));
		if (!s->events || !s->recorded) {
			ret = -ENOMEM;
			goto out_events;
		}
		for (uint32_t i = 0; i < s->n_buf; i++) {
			ret = HACCEL__CU(s->ctx, s->cu->EventCreate(&s->events[i],
								    HACCEL__CU_EVENT_DISABLE_TIMING));
			if (ret)
				goto out_events;
		}
		register_staging(s);
	}
	s->info.loads++;
	return 0;

out_events:
	free_events(s);
	s->n_buf = 0;
	s->staging = NULL;
	atomic_store(&s->in_load, false);
	return ret;
}

static void gs_end(void *user)
{
	struct haccel_gpu_sink *s = user;
	int res;

	if (!atomic_load(&s->in_load))
		return;
	s->cu->CtxSetCurrent(s->cu->ctx);
	/* After a failure, a merged copy not yet queued is dropped: the
	 * destination is only partly loaded anyway. */
	s->pend.bytes = 0;
	s->cur = NO_BUF;
	/* Copies out of staging finish before it is unregistered and freed. */
	res = s->cu->StreamSynchronize(s->stream);
	if (res)
		(void)haccel__cu_check(s->ctx, res, "cuStreamSynchronize", __FILE__, __LINE__);
	s->dirty = false;
	unregister_staging(s);
	free_events(s);
	s->n_buf = 0;
	s->staging = NULL;
	atomic_store(&s->in_load, false);
}

/* ------------------------------------------------------------------------ */
/* The object                                                               */

void haccel_gpu_sink_params_init(struct haccel_gpu_sink_params *p)
{
	if (!p)
		return;
	memset(p, 0, sizeof(*p));
	p->size = sizeof(*p);
}

int haccel_gpu_sink_create(struct haccel_ctx *ctx, const struct haccel_gpu_sink_params *params,
			   struct haccel_gpu_sink **out)
{
	struct haccel_gpu_sink_params p;
	struct haccel__cuda *cu = NULL;
	struct haccel_gpu_sink *s;
	int ret;

	if (!ctx || !params || !out)
		return -EINVAL;
	*out = NULL;
	haccel_gpu_sink_params_init(&p);
	if (haccel__config_copy(&p, sizeof(p), params, sizeof(p)))
		return haccel__fail(ctx, -EINVAL, "gpu sink: params size %u not supported",
				    params->size);
	if (p.flags)
		return haccel__fail(ctx, -EINVAL, "gpu sink: unknown flags 0x%x", p.flags);
	if (!p.bytes)
		return haccel__fail(ctx, -EINVAL,
				    "gpu sink: bytes is 0: give the destination size (at least haccel_weights_info().dest_bytes)");
	ret = haccel__cuda_get(ctx, &cu);
	if (ret == -ENOMEM && !cu)
		return ret;
	if (ret)
		return haccel__fail(ctx, ret, "gpu sink: %s%s", haccel__cuda_why_prefix(cu->why),
				    cu->why);

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->ctx = ctx;
	s->cu = cu;
	s->bytes = p.bytes;
	s->cur = NO_BUF;
	atomic_init(&s->in_load, false);
	if (p.dptr) {
		s->dptr = p.dptr;
	} else {
		ret = haccel__gpu_mem_alloc(ctx, p.bytes, &s->dptr);
		if (ret)
			goto out_free;
		s->owned = true;
	}
	ret = HACCEL__CU(ctx, cu->StreamCreate(&s->stream, HACCEL__CU_STREAM_NON_BLOCKING));
	if (ret)
		goto out_mem;
	s->sink.user = s;
	s->sink.put = gs_put;
	s->sink.wait = gs_wait;
	s->sink.finish = gs_finish;
	s->sink.size = sizeof(s->sink);
	s->sink.begin = gs_begin;
	s->sink.end = gs_end;
	/* No direct_base: device memory is no place for the loader's own
	 * reads and copies, so every load goes through staging. */
	*out = s;
	return 0;

out_mem:
	if (s->owned)
		haccel__gpu_mem_free(ctx, s->dptr, s->bytes);
out_free:
	free(s);
	return ret;
}

void haccel_gpu_sink_destroy(struct haccel_gpu_sink *s)
{
	if (!s)
		return;
	/* A load that never ended (the loader always ends what it began). */
	gs_end(s);
	s->cu->CtxSetCurrent(s->cu->ctx);
	s->cu->StreamSynchronize(s->stream);
	s->cu->StreamDestroy(s->stream);
	if (s->owned)
		haccel__gpu_mem_free(s->ctx, s->dptr, s->bytes);
	free(s);
}

const struct haccel_sink *haccel_gpu_sink_sink(struct haccel_gpu_sink *s)
{
	return s ? &s->sink : NULL;
}

int haccel_gpu_sink_info(const struct haccel_gpu_sink *s, struct haccel_gpu_sink_info *out)
{
	if (!s || !out)
		return -EINVAL;
	*out = s->info;
	out->dptr = s->dptr;
	out->bytes = s->bytes;
	out->owned = s->owned;
	return 0;
}
