// SPDX-License-Identifier: MIT
/* KV pool creation: defaults, sizing from a budget, region layout, and every bad config refused. */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "kernels/haccel_format.h"
#include "pool-util.h"

static void t_defaults(void)
{
	struct haccel_kv_pool_config c;

	haccel_kv_pool_config_init(&c);
	KTAP_EXPECT_EQ(c.size, sizeof(c));
	KTAP_EXPECT_EQ(c.page_tokens, 64);
	KTAP_EXPECT_EQ(c.n_streams, 2);
	KTAP_EXPECT(!strcmp(c.streams[0].name, "kv"));
	KTAP_EXPECT_EQ(c.streams[0].bytes_per_token, 656);
	KTAP_EXPECT(!strcmp(c.streams[1].name, "index_k"));
	KTAP_EXPECT_EQ(c.streams[1].bytes_per_token, 132);
	/* The format header and the architecture agree. */
	KTAP_EXPECT_EQ(HACCEL_KV_TOKEN_BYTES, 512 + 4 * 4 + 64 * 2);
	KTAP_EXPECT_EQ(HACCEL_INDEX_K_TOKEN_BYTES, 128 + 4);
}

static void t_budget_sizing(void)
{
	struct haccel_ctx *ctx = test_ctx();
	struct haccel_kv_pool_config c;
	struct haccel_kv_pool *pool;
	struct haccel_kv_pool_info info;
	struct haccel_kv_stats st;
	uint64_t page_bytes = 3ull * 64 * (656 + 132);

	haccel_kv_pool_config_init(&c);
	c.n_layers = 3;
	c.budget_bytes = 64ull << 20;
	KTAP_ASSERT_EQ(haccel_kv_pool_create(ctx, &c, &pool), 0);
	KTAP_ASSERT_EQ(haccel_kv_pool_info(pool, &info), 0);
	KTAP_EXPECT_EQ(info.page_bytes, page_bytes);
	KTAP_EXPECT(info.bytes_total <= c.budget_bytes);
	/* As many pages as fit: one more would not. */
	KTAP_EXPECT(info.bytes_total + page_bytes + 6 * 4096 > c.budget_bytes);
	KTAP_EXPECT(info.n_pages >= c.budget_bytes / page_bytes - 1);
	KTAP_EXPECT_EQ(info.max_pages_per_seq, 131072 / 64);
	KTAP_ASSERT_EQ(haccel_kv_pool_stats(pool, &st), 0);
	KTAP_EXPECT_EQ(st.pages_total, info.n_pages);
	KTAP_EXPECT_EQ(st.pages_free, info.n_pages);
	KTAP_EXPECT_EQ(st.pages_used + st.pages_evictable + st.pages_cached, 0);
	haccel_kv_pool_destroy(pool);
	haccel_close(ctx);
}

static void t_regions_disjoint_and_aligned(void)
{
	struct haccel_ctx *ctx = test_ctx();
	struct haccel_kv_pool *pool = small_kv(ctx, 16, 37, 3, 4, 1024);
	struct haccel_kv_pool_info info;
	struct haccel_kv_region r[6];
	uint64_t sum = 0;

	KTAP_ASSERT_EQ(haccel_kv_pool_info(pool, &info), 0);
	for (uint32_t l = 0; l < 3; l++)
		for (uint32_t s = 0; s < 2; s++) {
			struct haccel_kv_region *x = &r[l * 2 + s];
			KTAP_ASSERT_EQ(haccel_kv_pool_region(pool, l, s, x), 0);
			KTAP_EXPECT_EQ(x->bytes_per_token, s ? 4 : 8);
			KTAP_EXPECT_EQ(x->page_bytes, 16 * x->bytes_per_token);
			KTAP_EXPECT_EQ(x->bytes, 37ull * x->page_bytes);
			KTAP_EXPECT_EQ((uintptr_t)x->base % 4096, 0);
			sum += x->bytes;
			/* Writable end to end. */
			memset(x->base, 0x5a, x->bytes);
		}
	for (int i = 0; i < 6; i++)
		for (int j = 0; j < i; j++) {
			uintptr_t a = (uintptr_t)r[i].base, b = (uintptr_t)r[j].base;
			KTAP_EXPECT(a + r[i].bytes <= b || b + r[j].bytes <= a);
		}
	KTAP_EXPECT(sum <= info.bytes_total);
	KTAP_EXPECT_EQ(info.page_bytes, 3ull * 16 * 12);
	KTAP_EXPECT_EQ(haccel_kv_pool_region(pool, 3, 0, &r[0]), -EINVAL);
	KTAP_EXPECT_EQ(haccel_kv_pool_region(pool, 0, 2, &r[0]), -EINVAL);
	KTAP_EXPECT_EQ(haccel_kv_pool_region(pool, 0, 0, NULL), -EINVAL);
	haccel_kv_pool_destroy(pool);
	haccel_close(ctx);
}

static int try_create(struct haccel_ctx *ctx, const struct haccel_kv_pool_config *c)
{
	struct haccel_kv_pool *pool = (struct haccel_kv_pool *)&pool;
	int ret = haccel_kv_pool_create(ctx, c, &pool);

	if (ret == 0)
		haccel_kv_pool_destroy(pool);
	else if (pool != NULL)
		ktap_fail_at(__FILE__, __LINE__, "failed create left *out set");
	return ret;
}

static void t_bad_configs_refused(void)
{
	struct haccel_ctx *ctx = test_ctx_quiet();
	struct haccel_kv_pool_config c, good;

	haccel_kv_pool_config_init(&good);
	good.n_pages = 8;
	KTAP_EXPECT_EQ(try_create(ctx, &good), 0);

#define BAD(stmt, err)                                   \
	do {                                             \
		c = good;                                \
		stmt;                                    \
		KTAP_EXPECT_EQ(try_create(ctx, &c), err); \
	} while (0)
	BAD(c.flags = 1u << 7, -EINVAL);
	BAD(c.reserved = 1, -EINVAL);
	BAD(c.page_tokens = 0, -EINVAL);
	BAD(c.n_layers = 0, -EINVAL);
	BAD(c.n_streams = 0, -EINVAL);
	BAD(c.n_streams = HACCEL_KV_MAX_STREAMS + 1, -EINVAL);
	BAD(c.max_seqs = 0, -EINVAL);
	BAD(c.max_seqs = 0x7fffffff, -EINVAL); /* references must stay below 2^31 */
	BAD(c.max_seq_tokens = 0, -EINVAL);
	BAD(c.mem = 99, -EINVAL);
	BAD(c.streams[1].bytes_per_token = 0, -EINVAL);
	BAD(c.streams[1].reserved = 1, -EINVAL);
	BAD(strcpy(c.streams[1].name, "kv"), -EINVAL);          /* duplicate */
	BAD(c.streams[1].name[0] = '\0', -EINVAL);               /* unnamed */
	BAD(memset(c.streams[0].name, 'x', sizeof(c.streams[0].name)), -EINVAL); /* unterminated */
	BAD(c.streams[2].bytes_per_token = 4, -EINVAL);          /* beyond n_streams */
	BAD((c.n_pages = 0, c.budget_bytes = 0), -EINVAL);
	BAD((c.n_pages = 0, c.budget_bytes = 1000), -EINVAL);    /* smaller than a page */
	BAD(c.n_pages = UINT32_MAX, -EOVERFLOW);
	BAD(c.size = 8, -EINVAL);
	BAD((c.n_layers = 4096, c.streams[0].bytes_per_token = UINT32_MAX, c.n_pages = UINT32_MAX - 1), -EOVERFLOW);
	/* One stream's page must fit haccel_kv_region.page_bytes (32 bits),
	 * however few pages: 4096 x (2^20 + 1) bytes wrapped to 4096. */
	BAD((c.page_tokens = 4096, c.streams[0].bytes_per_token = (1u << 20) + 1, c.n_pages = 1),
	    -EOVERFLOW);
	BAD((c.page_tokens = 4096, c.streams[1].bytes_per_token = 1u << 20, c.n_pages = 1),
	    -EOVERFLOW);
#undef BAD
	KTAP_EXPECT_EQ(haccel_kv_pool_create(NULL, &good, &(struct haccel_kv_pool *){ 0 }), -EINVAL);
	KTAP_EXPECT_EQ(haccel_kv_pool_create(ctx, NULL, &(struct haccel_kv_pool *){ 0 }), -EINVAL);
	KTAP_EXPECT_EQ(haccel_kv_pool_create(ctx, &good, NULL), -EINVAL);
	haccel_kv_pool_destroy(NULL);
	haccel_close(ctx);
}

static void t_out_of_memory_is_clean(void)
{
	/* With the address space capped, carving fails with -ENOMEM and
	 * leaves nothing behind; a budget beyond 2^32 pages is -EOVERFLOW. */
	struct haccel_ctx *ctx = test_ctx_quiet();
	struct haccel_kv_pool_config c;

	haccel_kv_pool_config_init(&c);
	c.budget_bytes = 1ull << 62;
	KTAP_EXPECT_EQ(try_create(ctx, &c), -EOVERFLOW);
#if defined(__SANITIZE_ADDRESS__)
	haccel_close(ctx);
	ktap_skip("RLIMIT_AS cannot be capped under ASan (shadow memory)");
#else
	struct rlimit rl;

	KTAP_ASSERT_EQ(getrlimit(RLIMIT_AS, &rl), 0);
	rl.rlim_cur = 1ull << 30;
	KTAP_ASSERT_EQ(setrlimit(RLIMIT_AS, &rl), 0);
	c.budget_bytes = 4ull << 30;
	KTAP_EXPECT_EQ(try_create(ctx, &c), -ENOMEM);
	c.budget_bytes = 16ull << 20;
	KTAP_EXPECT_EQ(try_create(ctx, &c), 0);
	haccel_close(ctx);
#endif
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_defaults),
	KTAP_CASE(t_budget_sizing),
	KTAP_CASE(t_regions_disjoint_and_aligned),
	KTAP_CASE(t_bad_configs_refused),
	KTAP_CASE(t_out_of_memory_is_clean),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
