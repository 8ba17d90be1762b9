/* SPDX-License-Identifier: MIT */
/* haccel-bench: benchmarks, each one a subcommand. */
#ifndef HACCEL_TOOLS_BENCH_H
#define HACCEL_TOOLS_BENCH_H

#include <stdbool.h>
#include <stdint.h>

/* haccel-bench pools [OPTIONS]: returns an exit code. */
int bench_pools(int argc, char **argv, int json);
/* haccel-bench stream PATH [OPTIONS]: returns an exit code. */
int bench_stream(int argc, char **argv, int json);

/* haccel-bench kernels / decode / prefill (bench_gpu.c). */
int bench_kernels(int argc, char **argv, int json);
int bench_model(int argc, char **argv, int json, bool prefill);

/*
 * One timed measurement: fn runs `iters` iterations and returns the work
 * done (pages, bytes...). Calibrated to about `seconds` per round; the
 * median, min and max rate (work per second) over `rounds` are returned.
 */
struct bench_rate {
	double median, min, max;
	uint64_t iters;  /* iterations per round */
};

int bench_measure(uint64_t (*fn)(void *arg, uint64_t iters), void *arg,
		  double seconds, unsigned int rounds, struct bench_rate *out);

/* Median of n values (sorts them). */
double bench_median(double *v, unsigned int n);

#endif /* HACCEL_TOOLS_BENCH_H */
