/* SPDX-License-Identifier: MIT */
/* Helpers shared by the pool tests. */
#ifndef HACCEL_TESTS_POOL_UTIL_H
#define HACCEL_TESTS_POOL_UTIL_H

#include <stdlib.h>
#include <string.h>

#include "haccel.h"
#include "ktap.h"
#include "pool/kv.h"
#include "pool/state.h"

/* A context that logs errors only (tests provoke many on purpose). */
static inline struct haccel_ctx *test_ctx(void)
{
	struct haccel_open_params p;
	struct haccel_ctx *ctx = NULL;

	haccel_open_params_init(&p);
	p.log_level = HACCEL_LOG_ERROR;
	KTAP_ASSERT_EQ(haccel_open(&p, &ctx), 0);
	return ctx;
}

/* A context whose log goes nowhere, for tests that expect errors. */
static inline void test_log_sink(void *user, int level, const char *msg)
{
	(void)user;
	(void)level;
	(void)msg;
}

static inline struct haccel_ctx *test_ctx_quiet(void)
{
	struct haccel_open_params p;
	struct haccel_ctx *ctx = NULL;

	haccel_open_params_init(&p);
	p.log_fn = test_log_sink;
	KTAP_ASSERT_EQ(haccel_open(&p, &ctx), 0);
	return ctx;
}

/* A small KV pool: layers x 2 streams of 8 and 4 bytes per token. */
static inline struct haccel_kv_pool *small_kv(struct haccel_ctx *ctx,
					      uint32_t page_tokens,
					      uint32_t n_pages, uint32_t layers,
					      uint32_t max_seqs,
					      uint32_t max_seq_tokens)
{
	struct haccel_kv_pool_config c;
	struct haccel_kv_pool *pool = NULL;

	haccel_kv_pool_config_init(&c);
	c.page_tokens = page_tokens;
	c.n_pages = n_pages;
	c.n_layers = layers;
	c.max_seqs = max_seqs;
	c.max_seq_tokens = max_seq_tokens;
	c.streams[0].bytes_per_token = 8;
	c.streams[1].bytes_per_token = 4;
	KTAP_ASSERT_EQ(haccel_kv_pool_create(ctx, &c, &pool), 0);
	return pool;
}

/* Steps of a randomized case: HACCEL_TEST_STEPS for a longer (or shorter)
 * soak, else def. */
static inline unsigned long test_steps(unsigned long def)
{
	const char *s = getenv("HACCEL_TEST_STEPS");
	unsigned long v = s ? strtoul(s, NULL, 0) : 0;

	return v ? v : def;
}

#define KV_CHECK(pool)                                                        \
	do {                                                                  \
		char why_[256] = "";                                          \
		int r_ = haccel__kv_pool_check(pool, why_, sizeof(why_));     \
		if (r_)                                                       \
			ktap_fail_at(__FILE__, __LINE__, "kv pool check: %s", why_); \
	} while (0)

#define STATE_CHECK(pool)                                                     \
	do {                                                                  \
		char why_[256] = "";                                          \
		int r_ = haccel__state_pool_check(pool, why_, sizeof(why_));  \
		if (r_)                                                       \
			ktap_fail_at(__FILE__, __LINE__, "state pool check: %s", why_); \
	} while (0)

#endif /* HACCEL_TESTS_POOL_UTIL_H */
