// SPDX-License-Identifier: MIT
/* After creation, no pool operation allocates: every per-token and per-step path runs on memory carved up front. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "pool-util.h"

/*
 * This binary is linked with --wrap for the allocator entry points, so every
 * call the library makes lands here and is counted.
 */
static unsigned long allocs;

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
int __real_posix_memalign(void **p, size_t a, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);
int __wrap_posix_memalign(void **p, size_t a, size_t n);

void *__wrap_malloc(size_t n)
{
	allocs++;
	return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t m)
{
	allocs++;
	return __real_calloc(n, m);
}

void *__wrap_realloc(void *p, size_t n)
{
	allocs++;
	return __real_realloc(p, n);
}

int __wrap_posix_memalign(void **p, size_t a, size_t n)
{
	allocs++;
	return __real_posix_memalign(p, a, n);
}

static void t_wrapping_counts(void)
{
	/* The counter sees the library's allocations: creation allocates. */
	struct haccel_ctx *ctx = test_ctx();
	unsigned long before = allocs;
	struct haccel_kv_pool *pool = small_kv(ctx, 16, 64, 2, 8, 1024);

	KTAP_EXPECT(allocs > before);
	haccel_kv_pool_destroy(pool);
	haccel_close(ctx);
}

static void t_kv_steps_allocate_nothing(void)
{
	struct haccel_ctx *ctx = test_ctx();
	struct haccel_kv_pool *pool = small_kv(ctx, 16, 64, 2, 8, 1024);
	struct haccel_kv_admission adm;
	struct haccel_kv_stats st;
	int32_t toks[512];
	int64_t slots[512];
	uint32_t s[4], n, pages[8];
	uint64_t key;
	unsigned long before;

	for (int i = 0; i < 512; i++)
		toks[i] = i % 37;
	before = allocs;
	for (int round = 0; round < 200; round++) {
		uint32_t r;
		KTAP_ASSERT_EQ(haccel_kv_seq_create(pool, toks, 200, &s[0], &r), 0);
		KTAP_ASSERT_EQ(haccel_kv_seq_append(pool, s[0], toks + r, 200 - r, slots), 0);
		KTAP_ASSERT_EQ(haccel_kv_seq_fork(pool, s[0], &s[1]), 0);
		KTAP_ASSERT_EQ(haccel_kv_seq_append(pool, s[1], toks, 3, slots), 0); /* CoW */
		KTAP_ASSERT_EQ(haccel_kv_seq_truncate(pool, s[1], 100), 0);
		KTAP_ASSERT_EQ(haccel_kv_seq_pages_needed(pool, s[1], 50, &n), 0);
		KTAP_ASSERT_EQ(haccel_kv_seq_prefix_key(pool, s[0], 2, &key), 0);
		KTAP_ASSERT_EQ(haccel_kv_admit(pool, toks, 300, 10, &adm), 0);
		KTAP_ASSERT_EQ(haccel_kv_pages_get(pool, 8, pages), 0);
		KTAP_ASSERT_EQ(haccel_kv_pages_put(pool, pages, 8), 0);
		KTAP_ASSERT_EQ(haccel_kv_pool_stats(pool, &st), 0);
		KTAP_ASSERT_EQ(haccel_kv_seq_free(pool, s[1]), 0);
		KTAP_ASSERT_EQ(haccel_kv_seq_free(pool, s[0]), 0);
		if (round % 50 == 49)
			KTAP_ASSERT(haccel_kv_prefix_cache_reset(pool) >= 0);
	}
	KTAP_ASSERT_EQ(haccel_kv_pool_stats(pool, &st), 0);
	KTAP_EXPECT(st.prefix_hits > 0 && st.cow_copies > 0);
	KTAP_EXPECT_EQ(allocs - before, 0);
	haccel_kv_pool_destroy(pool);
	haccel_close(ctx);
}

static void t_state_steps_allocate_nothing(void)
{
	struct haccel_ctx *ctx = test_ctx();
	struct haccel_state_pool_config c;
	struct haccel_state_pool *pool;
	uint32_t slot, ck;
	unsigned long before;

	haccel_state_pool_config_init(&c);
	c.n_heads = 2;
	c.head_dk = c.head_dv = 16;
	c.n_slots = 2;
	c.n_checkpoints = 2;
	KTAP_ASSERT_EQ(haccel_state_pool_create(ctx, &c, &pool), 0);
	before = allocs;
	for (int round = 0; round < 200; round++) {
		KTAP_ASSERT_EQ(haccel_state_slot_alloc(pool, 0, &slot), 0);
		KTAP_ASSERT_EQ(haccel_state_ckpt_save(pool, slot, (uint64_t)round, 64,
						      HACCEL_STATE_CKPT_EVICT, &ck), 0);
		KTAP_ASSERT_EQ(haccel_state_ckpt_find(pool, (uint64_t)round, 64, &ck), 0);
		KTAP_ASSERT_EQ(haccel_state_ckpt_restore(pool, ck, slot), 0);
		if (round % 3 == 0)
			KTAP_ASSERT_EQ(haccel_state_ckpt_drop(pool, ck), 0);
		KTAP_ASSERT_EQ(haccel_state_slot_free(pool, slot), 0);
	}
	KTAP_EXPECT_EQ(allocs - before, 0);
	haccel_state_pool_destroy(pool);
	haccel_close(ctx);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_wrapping_counts),
	KTAP_CASE(t_kv_steps_allocate_nothing),
	KTAP_CASE(t_state_steps_allocate_nothing),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
