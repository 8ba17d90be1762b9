// SPDX-License-Identifier: MIT
/* haccel-bench: measure haccel's pools and weight loading (later: kernels, decode). */
#include "config.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "common.h"
#include "haccel.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: haccel-bench [--json] BENCHMARK [OPTIONS]\n"
		"\n"
		"Benchmarks:\n"
		"  pools    KV page alloc+free, prefix-cache hits, fork + copy-on-write,\n"
		"           recurrent-state checkpoint save/restore against memcpy\n"
		"  stream   weight loading from disk into host or GPU memory, cold and warm,\n"
		"           against the disk (and host->GPU copy) ceiling and mmap + memcpy\n"
		"  kernels  the CUDA kernels against the device copy bandwidth and the\n"
		"           cuBLASLt bf16 GEMM rate measured in the same run\n"
		"  decode   decode steps of a model on the GPU at a long context, against\n"
		"           the step's bytes-moved roofline\n"
		"  prefill  prefill of a model on the GPU, against its GEMM-rate bound\n"
		"\n"
		"Run 'haccel-bench BENCHMARK --help' for its options. See haccel-bench(1).\n"
		"Exit status: 0 success, 1 failure, 2 usage error.\n");
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double bench_median(double *v, unsigned int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int bench_measure(uint64_t (*fn)(void *arg, uint64_t iters), void *arg,
		  double seconds, unsigned int rounds, struct bench_rate *out)
{
	double rates[64];
	uint64_t iters = 1, t0, dt, work;

	if (rounds == 0 || rounds > 64)
		return -1;
	/* Calibrate: double until one round takes a tenth of the target. */
	for (;;) {
		t0 = tool_now_ns();
		fn(arg, iters);
		dt = tool_now_ns() - t0;
		if (dt >= seconds * 1e8 || iters >= (1ull << 40))
			break;
		iters *= 2;
	}
	iters = (uint64_t)(iters * (seconds * 1e9 / (double)(dt ? dt : 1)));
	if (iters == 0)
		iters = 1;
	for (unsigned int r = 0; r < rounds; r++) {
		t0 = tool_now_ns();
		work = fn(arg, iters);
		dt = tool_now_ns() - t0;
		rates[r] = (double)work * 1e9 / (double)(dt ? dt : 1);
	}
	out->iters = iters;
	out->median = bench_median(rates, rounds);
	out->min = rates[0];
	out->max = rates[rounds - 1];
	return 0;
}

static int print_version(int json)
{
	json_t *o;

	if (!json) {
		printf("haccel-bench %s (libhaccel %s)\n", PACKAGE_VERSION, haccel_version_string());
		return EXIT_OK;
	}
	o = json_object();
	json_object_set_new(o, "haccel_bench", json_string(PACKAGE_VERSION));
	json_object_set_new(o, "libhaccel", json_string(haccel_version_string()));
	json_object_set_new(o, "libhaccel_num", json_integer(haccel_version()));
	json_object_set_new(o, "header_num", json_integer(HACCEL_VERSION));
	return tool_print_json(o) ? EXIT_FAIL : EXIT_OK;
}

int main(int argc, char **argv)
{
	int json = 0, version = 0, i;

	tool_init("haccel-bench");
	/* Global options before the benchmark name; the rest is its own. */
	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--json") || !strcmp(argv[i], "-j")) {
			json = 1;
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return EXIT_OK;
		} else if (!strcmp(argv[i], "--version") || !strcmp(argv[i], "-V")) {
			version = 1;
		} else {
			tool_err("unknown option '%s' (see haccel-bench --help)", argv[i]);
			return EXIT_USAGE;
		}
	}
	/* --json before or after it: the versions as a JSON object. */
	if (version)
		return print_version(json);
	if (i >= argc) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[i], "pools"))
		return bench_pools(argc - i, argv + i, json);
	if (!strcmp(argv[i], "stream"))
		return bench_stream(argc - i, argv + i, json);
	if (!strcmp(argv[i], "kernels"))
		return bench_kernels(argc - i, argv + i, json);
	if (!strcmp(argv[i], "decode"))
		return bench_model(argc - i, argv + i, json, false);
	if (!strcmp(argv[i], "prefill"))
		return bench_model(argc - i, argv + i, json, true);
	tool_err("unknown benchmark '%s' (see haccel-bench --help)", argv[i]);
	return EXIT_USAGE;
}
