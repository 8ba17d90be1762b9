/* SPDX-License-Identifier: MIT */
/*
 * Helpers for the GPU tests: open the GPU or skip the case ("no GPU"),
 * device buffers freed together at the end of a case, uploads and
 * downloads, and comparisons with stated tolerances.
 */
#ifndef HACCEL_TESTS_GPU_UTIL_H
#define HACCEL_TESTS_GPU_UTIL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ktap.h"
#include "core/ctx.h"
#include "gpu/cuda.h"
#include "gpu/module.h"
#include "gpu/ops.h"

static struct haccel_ctx *gpu_ctx;
static struct haccel__gpu *gpu_g;
static haccel__dptr gpu_bufs[128];
static unsigned int gpu_n_bufs;

/*
 * The GPU of this case, or skip it: "no GPU" where there is none (no
 * driver, no device), "no GPU kernels" where the build has none. Any other
 * failure to open it fails the case.
 */
static inline struct haccel__gpu *gpu_open(void)
{
	struct haccel_gpu_info info;
	int ret;

	if (gpu_g)
		return gpu_g;
	KTAP_ASSERT(haccel_open(NULL, &gpu_ctx) == 0);
	ret = haccel_gpu_info(gpu_ctx, &info);
	if (ret == -ENODEV || ret == -ENOSYS) {
		ktap_diag("%s", info.reason);
		ktap_skip("no GPU");
	}
	KTAP_ASSERT_EQ(ret, 0);
	if (!info.kernels)
		ktap_skip("no GPU kernels in this build (configured without nvcc)");
	ret = haccel__gpu_get(gpu_ctx, &gpu_g);
	if (ret) {
		char err[512];

		haccel_last_error(gpu_ctx, err, sizeof(err));
		ktap_diag("%s", err);
	}
	KTAP_ASSERT_EQ(ret, 0);
	return gpu_g;
}

static inline haccel__dptr gpu_alloc(size_t bytes)
{
	haccel__dptr p = 0;

	KTAP_ASSERT(gpu_n_bufs < sizeof(gpu_bufs) / sizeof(gpu_bufs[0]));
	KTAP_ASSERT(gpu_g->cu->MemAlloc(&p, bytes ? bytes : 1) == 0);
	KTAP_ASSERT(gpu_g->cu->MemsetD8Async(p, 0, bytes ? bytes : 1, gpu_g->stream) == 0);
	gpu_bufs[gpu_n_bufs++] = p;
	return p;
}

/* A device copy of n bytes at src. */
static inline haccel__dptr gpu_up(const void *src, size_t bytes)
{
	haccel__dptr p = gpu_alloc(bytes);

	/* On the stream and waited for: cuMemcpyHtoD from pageable memory
	 * may return before its DMA lands, unordered with the kernels of the
	 * (non-blocking) stream, which then read the buffer's zeros. */
	if (bytes)
		KTAP_ASSERT(gpu_g->cu->MemcpyHtoDAsync(p, src, bytes, gpu_g->stream) == 0);
	KTAP_ASSERT(gpu_g->cu->StreamSynchronize(gpu_g->stream) == 0);
	return p;
}

/* Wait for the stream (failing the case on an error), then copy back. */
static inline void gpu_down(void *dst, haccel__dptr src, size_t bytes)
{
	KTAP_ASSERT(gpu_g->cu->StreamSynchronize(gpu_g->stream) == 0);
	if (bytes)
		KTAP_ASSERT(gpu_g->cu->MemcpyDtoH(dst, src, bytes) == 0);
}

/* Whether two device buffers of bytes hold the same bytes (after the
 * stream's work). */
static inline bool gpu_same(haccel__dptr a, haccel__dptr b, size_t bytes)
{
	uint8_t *x = malloc(bytes ? bytes : 1), *y = malloc(bytes ? bytes : 1);
	bool same;

	KTAP_ASSERT(x && y);
	gpu_down(x, a, bytes);
	gpu_down(y, b, bytes);
	same = memcmp(x, y, bytes) == 0;
	free(x);
	free(y);
	return same;
}

static inline void gpu_sync(void)
{
	KTAP_ASSERT(gpu_g->cu->StreamSynchronize(gpu_g->stream) == 0);
}

/* Free the buffers allocated since gpu_n_bufs was mark (a case's loop
 * over many shapes). */
static inline void gpu_free_to(unsigned int mark)
{
	KTAP_ASSERT(gpu_g->cu->StreamSynchronize(gpu_g->stream) == 0);
	while (gpu_n_bufs > mark)
		gpu_g->cu->MemFree(gpu_bufs[--gpu_n_bufs]);
}

/* Free every buffer and the context; call at the end of each case. */
static inline void gpu_close(void)
{
	if (!gpu_g) {
		if (gpu_ctx)
			haccel_close(gpu_ctx);
		gpu_ctx = NULL;
		return;
	}
	gpu_g->cu->StreamSynchronize(gpu_g->stream);
	while (gpu_n_bufs)
		gpu_g->cu->MemFree(gpu_bufs[--gpu_n_bufs]);
	haccel_close(gpu_ctx);
	gpu_ctx = NULL;
	gpu_g = NULL;
}

/*
 * Compare n values of got against want: each |got - want| <= atol + rtol *
 * |want| where want is finite (got must be finite too); a non-finite want
 * must be matched exactly (NaN by any NaN, an infinity by the same one).
 * Reports the worst element and the max error; returns 1 when all are
 * within.
 */
static inline int gpu_close_enough(const char *what, const float *got, const float *want,
				   size_t n, double atol, double rtol)
{
	double worst = 0.0, max_err = 0.0;
	size_t wi = 0, bad = 0;

	for (size_t i = 0; i < n; i++) {
		if (!isfinite(want[i]) || !isfinite(got[i])) {
			/* No tolerance here: an infinite one would pass
			 * anything, and a NaN compares false either way. */
			bool same = isnan(want[i]) ? isnan(got[i]) : got[i] == want[i];

			if (!same && bad++ == 0)
				wi = i, worst = INFINITY;
			continue;
		}
		double e = fabs((double)got[i] - (double)want[i]);
		double lim = atol + rtol * fabs((double)want[i]);
		if (e > max_err)
			max_err = e;
		if (e > lim) {
			if (e / lim > worst)
				worst = e / lim, wi = i;
			bad++;
		}
	}
	ktap_diag("%s: %zu values, max abs error %.3g (atol %.3g rtol %.3g), %zu outside",
		  what, n, max_err, atol, rtol, bad);
	if (bad)
		ktap_diag("%s: worst at %zu: got %.9g want %.9g", what, wi, (double)got[wi],
			  (double)want[wi]);
	return bad == 0;
}

#endif /* HACCEL_TESTS_GPU_UTIL_H */
