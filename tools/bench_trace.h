/* SPDX-License-Identifier: MIT */
/*
 * haccel-bench decode --trace: the kernels of decode steps as CUPTI's
 * activity API records them (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, which
 * sees kernels launched inside CUDA graphs too), and the GPU idle time
 * between them inside each step. libcupti is dlopen()ed, never linked;
 * a build without CUPTI's headers keeps trace_gaps() and refuses the rest.
 */
#ifndef HACCEL_TOOLS_BENCH_TRACE_H
#define HACCEL_TOOLS_BENCH_TRACE_H

#include <stddef.h>
#include <stdint.h>

/* One kernel execution, in CUPTI's clock (ns; the clock of trace_now()),
 * or a copy or memset (copy set, name a static "(...)" string). */
struct trace_kernel {
	uint64_t start, end;
	/* CUPTI's string, shared by every record of the kernel and never
	 * freed: possibly a mangled C++ name. */
	const char *name;
	/* A copy or memset: busy where it falls between the window's first
	 * kernel start and last kernel end, and no part of the span (the
	 * step's input and output copies lie outside its kernels). */
	int copy;
};

/* What trace_stop() collected; trace_result_free() releases it. */
struct trace_result {
	struct trace_kernel *k;  /* in the order CUPTI delivered them */
	size_t n;
	/* Buffer requests refused because the pool was empty: CUPTI dropped
	 * records, and the figures miss kernels. */
	uint64_t refused;
};

/*
 * Load libcupti: $HACCEL_CUPTI_LIB when set (the library, or a directory
 * holding libcupti.so.13 or libcupti.so), else libcupti.so.13, libcupti.so
 * and the usual CUDA directories. Once per process; later calls return
 * the first answer. Returns 0, or -ENOSYS (built without CUPTI headers),
 * -ENOENT (library not found: the names tried and dlerror() in err) or
 * -ENOEXEC (a symbol missing).
 */
int trace_load(char *err, size_t n);

/*
 * Start recording kernels (loads libcupti first). The record buffers CUPTI
 * asks for come from a pool allocated by the first call and kept for the
 * process (CUPTI may still hold one after trace_stop()), so recording
 * allocates nothing per step. Returns 0 or -errno with the reason in err.
 */
int trace_start(char *err, size_t n);

/* CUPTI's clock now, in ns: the clock of the kernel records. 0 when
 * libcupti is not loaded. */
uint64_t trace_now(void);

/*
 * Between steps, outside any measured window: when the pool runs low,
 * have CUPTI hand back its completed buffers (a blocking flush), so long
 * runs do not run the pool dry.
 */
void trace_drain(void);

/*
 * Stop recording: disable the activity kind, flush every buffer (the
 * caller has synchronised the GPU work it wants recorded) and move the
 * kernels collected since trace_start() into r. Returns 0 or -errno (err
 * says why; r is then empty).
 */
int trace_stop(struct trace_result *r, char *err, size_t n);
void trace_result_free(struct trace_result *r);

#define TRACE_TOP 15

struct trace_name {
	const char *name;  /* one of the kernels' names */
	uint64_t ns;       /* time inside the windows, summed over all of them */
	uint64_t count;    /* kernels in the windows */
};

#define TRACE_GAPS 5

/* Idle time between the kernel that ended last and the next one to start. */
struct trace_gap {
	const char *before, *after;
	uint64_t ns;       /* summed over the windows */
	uint64_t count;
};

struct trace_summary {
	size_t steps;              /* windows with at least one kernel */
	size_t empty;              /* windows without: left out of every figure */
	/* Medians over the steps. span: first kernel start to last kernel
	 * end; busy: the length of the union of the kernels (overlapping
	 * ones, parallel graph branches, count once); gap = span - busy. */
	double span_ns, busy_ns, gap_ns;
	double kernels;            /* median kernels a step */
	uint64_t total_span_ns, total_busy_ns;  /* sums over the steps */
	double gap_fraction;       /* 1 - total busy / total span (0 without steps) */
	size_t names;              /* distinct kernel names */
	size_t ntop;               /* entries of top */
	struct trace_name top[TRACE_TOP];  /* by time, longest first */
	/* The pairs of names around the most idle time, most first (left
	 * empty past 512 distinct names). */
	size_t ngaps;
	struct trace_gap gaps[TRACE_GAPS];
};

/*
 * The gaps of nwin windows [win_start[i], win_end[i]) over the n kernels of
 * k (any order). A kernel belongs to every window it overlaps, clipped to
 * it (a kernel of no length, to the window holding its start). No input
 * is changed; names are compared as strings. Returns 0 or -ENOMEM.
 */
int trace_gaps(const struct trace_kernel *k, size_t n, const uint64_t *win_start,
	       const uint64_t *win_end, size_t nwin, struct trace_summary *s);

#endif /* HACCEL_TOOLS_BENCH_TRACE_H */
