/* SPDX-License-Identifier: MIT */
/*
 * haccel-bench decode: the bytes a decode step must move (its roofline at
 * the copy bandwidth), by part. No GPU needed: tests/tools-roof.c checks it.
 */
#ifndef HACCEL_TOOLS_BENCH_ROOF_H
#define HACCEL_TOOLS_BENCH_ROOF_H

#include <stdint.h>

struct haccel__model_config;

struct roof_bytes {
	double weights;    /* every weight once in bf16, but an untied
			    * embedding table: only its B rows */
	double kda_state;  /* each KDA state read and written (fp32) */
	double conv_tails; /* each KDA layer's q, k, v convolution tails
			    * read and written (fp32) */
	double index_keys; /* each sequence's ctx + 1 index keys, a DSA layer */
	double kv_records; /* each sequence's selected KV records, a DSA layer */
	double total;
};

/*
 * A decode step of B sequences whose new token sits at position ctx (so
 * ctx + 1 positions a sequence), for a model of config c with n_params
 * parameters (bf16 on the GPU).
 */
void roof_decode_bytes(const struct haccel__model_config *c, uint64_t n_params, uint32_t B,
		       uint32_t ctx, struct roof_bytes *out);

#endif
