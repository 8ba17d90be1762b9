// SPDX-License-Identifier: MIT
/*
 * haccel-bench decode's roofline (tools/bench_roof.c) on the `small`
 * preset: each part against figures worked out by hand from the preset's
 * shapes (docs/model.md), an untied and a tied embedding table, a context
 * shorter than top-k, a model without DSA layers. No GPU.
 */
#include "config.h"

#include <string.h>

#include "ktap.h"
#include "model/model_config.h"
#include "tools/bench_roof.h"

/* Doubles that hold whole numbers of bytes, compared exactly. */
#define EXPECT_BYTES(v, want) KTAP_EXPECT_EQ((long long)(v), (long long)(want))

static struct haccel__model_config small(void)
{
	struct haccel__model_config c;

	KTAP_ASSERT_EQ(haccel__config_preset("small", &c), 0);
	/* the shapes the figures below assume */
	KTAP_ASSERT(c.hidden_size == 2048 && c.vocab_size == 32000 && !c.tie_word_embeddings);
	KTAP_ASSERT(c.n_kda == 12 && c.n_dsa == 4 && c.kda.num_heads == 16);
	KTAP_ASSERT(c.kda.head_k_dim == 128 && c.kda.head_v_dim == 128 && c.kda.conv_size == 4);
	KTAP_ASSERT(c.dsa.qk_rope_head_dim == 64 && c.dsa.index_topk == 2048);
	return c;
}

static void expect_sum(const struct roof_bytes *r)
{
	EXPECT_BYTES(r->total, r->weights + r->kda_state + r->conv_tails + r->index_keys +
				       r->kv_records);
}

/* Batch 64 at 32K positions, the shape. */
static void t_small_batch64(void)
{
	struct haccel__model_config c = small();
	struct roof_bytes r;

	roof_decode_bytes(&c, 950000000, 64, 32767, &r);
	/* 2 bytes a parameter, less the untied table (32000 x 2048 x 2 =
	 * 131,072,000) but its 64 rows (262,144) */
	EXPECT_BYTES(r.weights, 1900000000LL - 131072000 + 262144);
	/* 2 x 64 sequences x 12 layers x 16 heads x 128 x 128 x 4 bytes */
	EXPECT_BYTES(r.kda_state, 1610612736LL);
	/* 2 x 64 x 12 x 3 taps x (16 x (128 + 128 + 128)) channels x 4 */
	EXPECT_BYTES(r.conv_tails, 113246208LL);
	/* 64 x 4 layers x 32768 keys x 132 bytes */
	EXPECT_BYTES(r.index_keys, 1107296256LL);
	/* 64 x 4 x 2048 records x 656 bytes */
	EXPECT_BYTES(r.kv_records, 343932928LL);
	expect_sum(&r);
}

/* A tied table is the logits' weight, read whole: every parameter counts,
 * and nothing else changes. */
static void t_tied(void)
{
	struct haccel__model_config c = small();
	struct roof_bytes a, b;

	roof_decode_bytes(&c, 950000000, 64, 32767, &a);
	c.tie_word_embeddings = true;
	roof_decode_bytes(&c, 950000000, 64, 32767, &b);
	EXPECT_BYTES(b.weights, 1900000000LL);
	EXPECT_BYTES(b.kda_state, a.kda_state);
	EXPECT_BYTES(b.conv_tails, a.conv_tails);
	expect_sum(&b);
}

/* 100 positions, fewer than top-k: every record is read once. One
 * sequence: one embedding row. */
static void t_short_context(void)
{
	struct haccel__model_config c = small();
	struct roof_bytes r;

	roof_decode_bytes(&c, 950000000, 1, 99, &r);
	EXPECT_BYTES(r.weights, 1900000000LL - 131072000 + 4096);
	EXPECT_BYTES(r.index_keys, 4 * 100 * 132);
	EXPECT_BYTES(r.kv_records, 4 * 100 * 656);
	EXPECT_BYTES(r.conv_tails, 1769472);
	expect_sum(&r);
}

/* No DSA layer: no keys, no records (whatever top-k says). */
static void t_no_dsa(void)
{
	struct haccel__model_config c = small();
	struct roof_bytes r;

	c.n_kda += c.n_dsa;
	c.n_dsa = 0;
	roof_decode_bytes(&c, 950000000, 8, 32767, &r);
	EXPECT_BYTES(r.index_keys, 0);
	EXPECT_BYTES(r.kv_records, 0);
	EXPECT_BYTES(r.kda_state, 2LL * 8 * 16 * 16 * 128 * 128 * 4);
	expect_sum(&r);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_small_batch64),
	KTAP_CASE(t_tied),
	KTAP_CASE(t_short_context),
	KTAP_CASE(t_no_dsa),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
