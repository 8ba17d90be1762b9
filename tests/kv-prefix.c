// SPDX-License-Identifier: MIT
/* KV prefix cache: longest verified prefix reused, LRU eviction only when needed, collisions harmless, admission exact, preemption through swap never corrupts it. */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pool-util.h"

#define P 4

static struct haccel_kv_stats stats(struct haccel_kv_pool *pool)
{
	struct haccel_kv_stats st;

	KTAP_ASSERT_EQ(haccel_kv_pool_stats(pool, &st), 0);
	return st;
}

static uint32_t seq_with(struct haccel_kv_pool *pool, const int32_t *t, uint32_t n,
			 uint32_t *reused)
{
	uint32_t s, r;

	KTAP_ASSERT_EQ(haccel_kv_seq_create(pool, t, n, &s, &r), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_append(pool, s, t + r, n - r, NULL), 0);
	if (reused)
		*reused = r;
	return s;
}

static const uint32_t *table(struct haccel_kv_pool *pool, uint32_t s, uint32_t *n)
{
	const uint32_t *bt;

	KTAP_ASSERT_EQ(haccel_kv_seq_block_table(pool, s, &bt, n, NULL), 0);
	return bt;
}

static void t_longest_prefix_reused(void)
{
	struct haccel_ctx *ctx = test_ctx();
	struct haccel_kv_pool *pool = small_kv(ctx, P, 32, 1, 8, 64);
	int32_t a[14], b[14];
	uint32_t sa, sb, r, na, nb;
	const uint32_t *ta, *tb;

	for (int i = 0; i < 14; i++)
		a[i] = b[i] = 500 + i;
	b[10] = -1;
	sa = seq_with(pool, a, 14, &r);
	KTAP_EXPECT_EQ(r, 0);
	KTAP_EXPECT_EQ(stats(pool).pages_cached, 3);
	KTAP_EXPECT_EQ(stats(pool).prefix_queries, 1);
	KTAP_EXPECT_EQ(stats(pool).prefix_hits, 0);

	/* Diverges inside page 2: pages 0 and 1 are reused, shared. */
	sb = seq_with(pool, b, 14, &r);
	KTAP_EXPECT_EQ(r, 8);
	ta = table(pool, sa, &na);
	tb = table(pool, sb, &nb);
	KTAP_EXPECT_EQ(tb[0], ta[0]);
	KTAP_EXPECT_EQ(tb[1], ta[1]);
	KTAP_EXPECT(tb[2] != ta[2]);
	KTAP_EXPECT_EQ(haccel__kv_page_ref(pool, ta[0]), 2);
	KTAP_EXPECT_EQ(stats(pool).prefix_hits, 1);
	KTAP_EXPECT_EQ(stats(pool).prefix_tokens_reused, 8);
	KTAP_EXPECT_EQ(stats(pool).prefix_tokens_queried, 28);

	/* Only full pages count; a prompt ending mid-page keeps its tail. */
	uint32_t s;
	KTAP_ASSERT_EQ(haccel_kv_seq_create(pool, a, 14, &s, &r), 0);
	KTAP_EXPECT_EQ(r, 12);
	KTAP_ASSERT_EQ(haccel_kv_seq_free(pool, s), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_create(pool, a, 12, &s, &r), 0);
	KTAP_EXPECT_EQ(r, 12);
	KTAP_ASSERT_EQ(haccel_kv_seq_free(pool, s), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_create(pool, a, 11, &s, &r), 0);
	KTAP_EXPECT_EQ(r, 8);
	KTAP_ASSERT_EQ(haccel_kv_seq_free(pool, s), 0);
	/* A different first token: nothing. */
	b[0] = -7;
	KTAP_ASSERT_EQ(haccel_kv_seq_create(pool, b, 14, &s, &r), 0);
	KTAP_EXPECT_EQ(r, 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_free(pool, s), 0);
	KV_CHECK(pool);
	haccel_kv_pool_destroy(pool);
	haccel_close(ctx);
}

static void t_lru_eviction_only_when_needed(void)
{
	struct haccel_ctx *ctx = test_ctx();
	struct haccel_kv_pool *pool = small_kv(ctx, P, 8, 1, 8, 64);
	int32_t a[12];
	uint32_t sa, r, n, pa[3], got[8];
	const uint32_t *t;

	for (int i = 0; i < 12; i++)
		a[i] = 7 * i + 1;
	sa = seq_with(pool, a, 12, NULL);
	t = table(pool, sa, &n);
	memcpy(pa, t, sizeof(pa));
	KTAP_ASSERT_EQ(haccel_kv_seq_free(pool, sa), 0);
	KTAP_EXPECT_EQ(stats(pool).pages_evictable, 3);
	KTAP_EXPECT_EQ(stats(pool).pages_free, 5);
	KTAP_EXPECT_EQ(stats(pool).pages_cached, 3);

	/* Free pages go first: the cached prefix survives. */
	KTAP_ASSERT_EQ(haccel_kv_pages_get(pool, 5, got), 0);
	KTAP_EXPECT_EQ(stats(pool).evictions, 0);
	KTAP_EXPECT_EQ(stats(pool).pages_cached, 3);
	/* Then the least recently used: the sequence's last page first. */
	KTAP_ASSERT_EQ(haccel_kv_pages_get(pool, 1, got + 5), 0);
	KTAP_EXPECT_EQ(got[5], pa[2]);
	KTAP_EXPECT_EQ(stats(pool).evictions, 1);
	KTAP_EXPECT_EQ(stats(pool).pages_cached, 2);
	KV_CHECK(pool);

	/* The two surviving pages still serve the prefix. */
	uint32_t s;
	KTAP_ASSERT_EQ(haccel_kv_seq_create(pool, a, 12, &s, &r), 0);
	KTAP_EXPECT_EQ(r, 8);
	t = table(pool, s, &n);
	KTAP_EXPECT_EQ(t[0], pa[0]);
	KTAP_EXPECT_EQ(t[1], pa[1]);
	KTAP_EXPECT_EQ(stats(pool).pages_evictable, 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_free(pool, s), 0);

	/* Freeing releases the tail first, so the tail is evicted first. */
	KTAP_ASSERT_EQ(haccel_kv_pages_get(pool, 1, got + 6), 0);
	KTAP_EXPECT_EQ(got[6], pa[1]);
	KTAP_ASSERT_EQ(haccel_kv_pages_get(pool, 1, got + 7), 0);
	KTAP_EXPECT_EQ(got[7], pa[0]);
	KTAP_EXPECT_EQ(stats(pool).evictions, 3);
	KTAP_EXPECT_EQ(stats(pool).pages_cached, 0);
	KTAP_ASSERT_EQ(haccel_kv_pages_put(pool, got, 8), 0);
	KV_CHECK(pool);
	haccel_kv_pool_destroy(pool);
	haccel_close(ctx);
}

static void t_collisions_never_serve_wrong_kv(void)
{
	struct haccel_ctx *ctx = test_ctx();
	struct haccel_kv_pool *pool = small_kv(ctx, P, 32, 1, 8, 64);
	int32_t a[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	int32_t b[8] = { 9, 9, 9, 9, 5, 6, 7, 8 }; /* same second page as a */
	int32_t z[8] = { 0, 0, 0, 0, 0, 0, 0, 0 };
	uint32_t sa, sb, s, r, n;
	const uint32_t *ta, *tb, *t;

	/* Every key becomes 0: each lookup sees every cached page. */
	haccel__kv_pool_set_key_mask(pool, 0);
	sa = seq_with(pool, a, 8, NULL);
	sb = seq_with(pool, b, 8, &r);
	KTAP_EXPECT_EQ(r, 0);
	KTAP_EXPECT_EQ(stats(pool).pages_cached, 4);
	ta = table(pool, sa, &n);
	tb = table(pool, sb, &n);

	KTAP_ASSERT_EQ(haccel_kv_seq_create(pool, b, 8, &s, &r), 0);
	KTAP_EXPECT_EQ(r, 8);
	t = table(pool, s, &n);
	KTAP_EXPECT_EQ(t[0], tb[0]);
	KTAP_EXPECT_EQ(t[1], tb[1]); /* b's page, not a's identical-token page */
	KTAP_EXPECT(t[1] != ta[1]);
	KTAP_ASSERT_EQ(haccel_kv_seq_free(pool, s), 0);

	KTAP_ASSERT_EQ(haccel_kv_seq_create(pool, a, 8, &s, &r), 0);
	KTAP_EXPECT_EQ(r, 8);
	t = table(pool, s, &n);
	KTAP_EXPECT_EQ(t[1], ta[1]);
	KTAP_ASSERT_EQ(haccel_kv_seq_free(pool, s), 0);

	KTAP_ASSERT_EQ(haccel_kv_seq_create(pool, z, 8, &s, &r), 0);
	KTAP_EXPECT_EQ(r, 0);
	KV_CHECK(pool);
	haccel_kv_pool_destroy(pool);
	haccel_close(ctx);
}

static void t_twins_and_children(void)
{
	struct haccel_ctx *ctx = test_ctx();
	struct haccel_kv_pool *pool = small_kv(ctx, P, 32, 1, 8, 64);
	int32_t t12[12];
	uint32_t sa, sb, s, r, n;
	const uint32_t *ta, *tb, *t;

	for (int i = 0; i < 12; i++)
		t12[i] = 40 + i;
	sa = seq_with(pool, t12, 8, NULL);
	/* B computes the same two pages itself (no prompt given), then one more. */
	KTAP_ASSERT_EQ(haccel_kv_seq_create(pool, NULL, 0, &sb, NULL), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_append(pool, sb, t12, 12, NULL), 0);
	KTAP_EXPECT_EQ(stats(pool).pages_cached, 3); /* twins are not entered twice */
	ta = table(pool, sa, &n);
	tb = table(pool, sb, &n);
	/* B's third page hangs under A's cached second page. */
	KTAP_ASSERT_EQ(haccel_kv_seq_create(pool, t12, 12, &s, &r), 0);
	KTAP_EXPECT_EQ(r, 12);
	t = table(pool, s, &n);
	KTAP_EXPECT_EQ(t[0], ta[0]);
	KTAP_EXPECT_EQ(t[1], ta[1]);
	KTAP_EXPECT_EQ(t[2], tb[2]);
	/* Keys agree along equal prefixes. */
	uint64_t ka, kb, k0 = haccel__kv_root_key();
	for (uint32_t i = 0; i < 2; i++) {
		KTAP_ASSERT_EQ(haccel_kv_seq_prefix_key(pool, sa, i, &ka), 0);
		KTAP_ASSERT_EQ(haccel_kv_seq_prefix_key(pool, sb, i, &kb), 0);
		KTAP_EXPECT(ka == kb);
		k0 = haccel__kv_chain_key(k0, t12 + i * P, P);
		KTAP_EXPECT(ka == k0);
	}
	KTAP_EXPECT_EQ(haccel_kv_seq_prefix_key(pool, sa, 2, &ka), -ERANGE);
	KV_CHECK(pool);
	haccel_kv_pool_destroy(pool);
	haccel_close(ctx);
}

static void t_cached_page_never_rewritten(void)
{
	struct haccel_ctx *ctx = test_ctx();
	struct haccel_kv_pool *pool = small_kv(ctx, P, 16, 1, 4, 64);
	struct haccel_kv_region reg;
	int32_t t8[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	int32_t x = 99;
	int64_t slots[8], slot;
	uint32_t a, b, s, r, n;
	const uint32_t *t;

	KTAP_ASSERT_EQ(haccel_kv_pool_region(pool, 0, 0, &reg), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_create(pool, NULL, 0, &a, NULL), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_append(pool, a, t8, 8, slots), 0);
	for (int i = 0; i < 8; i++)
		memset((char *)reg.base + slots[i] * reg.bytes_per_token, i + 1,
		       reg.bytes_per_token);
	KTAP_ASSERT_EQ(haccel_kv_seq_fork(pool, a, &b), 0);

	/* A ends inside cached page 1, which B shares: A writes a copy. */
	KTAP_ASSERT_EQ(haccel_kv_seq_truncate(pool, a, 6), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_append(pool, a, &x, 1, &slot), 0);
	KTAP_EXPECT_EQ(stats(pool).cow_copies, 1);
	KTAP_EXPECT(slot != slots[6]);
	memset((char *)reg.base + slot * reg.bytes_per_token, 0xee, reg.bytes_per_token);
	/* The cached page still holds tokens 5..8 and their bytes. */
	KTAP_ASSERT_EQ(haccel_kv_seq_create(pool, t8, 8, &s, &r), 0);
	KTAP_EXPECT_EQ(r, 8);
	t = table(pool, s, &n);
	KTAP_EXPECT_EQ(t[1], (uint32_t)(slots[4] / P));
	for (int i = 4; i < 8; i++) {
		const uint8_t *bytes = (const uint8_t *)reg.base +
				       ((int64_t)t[1] * P + i - 4) * reg.bytes_per_token;
		KTAP_EXPECT_EQ(bytes[0], i + 1);
	}
	KTAP_ASSERT_EQ(haccel_kv_seq_free(pool, s), 0);

	/* B alone holds it now: truncating into it takes it out of the cache
	 * before writing, so no later prompt can be served the new bytes. */
	KTAP_ASSERT_EQ(haccel_kv_seq_truncate(pool, b, 6), 0);
	KTAP_EXPECT_EQ(stats(pool).pages_cached, 2);
	KTAP_ASSERT_EQ(haccel_kv_seq_append(pool, b, &x, 1, &slot), 0);
	KTAP_EXPECT_EQ(slot, slots[6]);
	KTAP_EXPECT_EQ(stats(pool).cow_copies, 1);
	KTAP_EXPECT_EQ(stats(pool).pages_cached, 1);
	KTAP_ASSERT_EQ(haccel_kv_seq_create(pool, t8, 8, &s, &r), 0);
	KTAP_EXPECT_EQ(r, 4);
	KV_CHECK(pool);
	haccel_kv_pool_destroy(pool);
	haccel_close(ctx);
}

/* Token i's KV in every stream: bytes of value tag + i. */
static void put_kv(struct haccel_kv_pool *pool, const int64_t *slots, uint32_t n, uint8_t tag)
{
	for (uint32_t s = 0; s < 2; s++) {
		struct haccel_kv_region r;

		KTAP_ASSERT_EQ(haccel_kv_pool_region(pool, 0, s, &r), 0);
		for (uint32_t i = 0; i < n; i++)
			memset((char *)r.base + slots[i] * r.bytes_per_token, tag + i,
			       r.bytes_per_token);
	}
}

static int kv_is(struct haccel_kv_pool *pool, uint32_t seq, uint32_t n, uint8_t tag)
{
	uint32_t np;
	const uint32_t *t = table(pool, seq, &np);

	for (uint32_t s = 0; s < 2; s++) {
		struct haccel_kv_region r;

		KTAP_ASSERT_EQ(haccel_kv_pool_region(pool, 0, s, &r), 0);
		for (uint32_t i = 0; i < n; i++) {
			const uint8_t *b = (const uint8_t *)r.base +
					   ((int64_t)t[i / P] * P + i % P) * r.bytes_per_token;

			for (uint32_t k = 0; k < r.bytes_per_token; k++)
				if (b[k] != (uint8_t)(tag + i))
					return 0;
		}
	}
	return 1;
}

/*
 * docs/pools.md's preemption: A's pages swapped out, A freed, its cached
 * pages evicted by others; A resumed from its tokens reattaches what is
 * still cached (shared with B: swap-in refuses it) and gets the swapped
 * bytes back in its new pages, which leave the prefix cache as they are
 * written.
 */
static void t_preempt_and_resume(void)
{
	struct haccel_ctx *ctx = test_ctx();
	struct haccel_kv_pool *pool = small_kv(ctx, P, 6, 1, 4, 64);
	struct haccel_kv_pool_info info;
	int32_t a[10], b[8], c[16];
	int64_t slots[16];
	uint32_t sa, sb, sc, sd, r, n;
	const uint32_t *t;
	uint8_t *host;

	for (int i = 0; i < 10; i++)
		a[i] = 1 + i;
	for (int i = 0; i < 8; i++)
		b[i] = i < 4 ? a[i] : 50 + i;
	for (int i = 0; i < 16; i++)
		c[i] = 100 + i;
	KTAP_ASSERT_EQ(haccel_kv_pool_info(pool, &info), 0);
	host = malloc(3 * info.page_bytes);
	KTAP_ASSERT(host != NULL);

	KTAP_ASSERT_EQ(haccel_kv_seq_create(pool, NULL, 0, &sa, NULL), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_append(pool, sa, a, 10, slots), 0);
	put_kv(pool, slots, 10, 0x10);
	sb = seq_with(pool, b, 8, &r);
	KTAP_EXPECT_EQ(r, 4); /* B shares A's first page */

	/* Preempt A: every page out (shared and cached ones too), then free. */
	t = table(pool, sa, &n);
	KTAP_ASSERT_EQ(n, 3);
	KTAP_ASSERT_EQ(haccel_kv_pages_swap_out(pool, t, 3, host, 3 * info.page_bytes), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_free(pool, sa), 0);
	/* C takes 4 pages: A's second page, only cached, is evicted. */
	sc = seq_with(pool, c, 16, NULL);
	KTAP_EXPECT_EQ(stats(pool).evictions, 1);
	KTAP_ASSERT_EQ(haccel_kv_seq_free(pool, sc), 0);

	/* Resume A: page 0 is reattached, the rest appended, then swapped in. */
	KTAP_ASSERT_EQ(haccel_kv_seq_create(pool, a, 10, &sa, &r), 0);
	KTAP_EXPECT_EQ(r, 4);
	KTAP_ASSERT_EQ(haccel_kv_seq_append(pool, sa, a + r, 10 - r, NULL), 0);
	t = table(pool, sa, &n);
	KTAP_ASSERT_EQ(n, 3);
	/* Cached: A's page 0, B's page 1, 2 of C's 4 (2 evicted for A), A's page 1. */
	KTAP_EXPECT_EQ(stats(pool).pages_cached, 5);
	KTAP_EXPECT_EQ(haccel_kv_pages_swap_in(pool, t, 1, host, info.page_bytes), -EBUSY);
	KTAP_EXPECT_EQ(haccel_kv_pages_swap_in(pool, t, 3, host, 3 * info.page_bytes), -EBUSY);
	KTAP_EXPECT(!kv_is(pool, sa, 10, 0x10)); /* pages 1 and 2 not written */
	KTAP_ASSERT_EQ(haccel_kv_pages_swap_in(pool, t + 1, 2, host + info.page_bytes,
					       2 * info.page_bytes), 0);
	KTAP_EXPECT(kv_is(pool, sa, 10, 0x10));
	KTAP_EXPECT(kv_is(pool, sb, 4, 0x10));
	/* A's restored full page left the cache: only page 0 is served. */
	KTAP_EXPECT_EQ(stats(pool).pages_cached, 4);
	KTAP_ASSERT_EQ(haccel_kv_seq_create(pool, a, 8, &sd, &r), 0);
	KTAP_EXPECT_EQ(r, 4);
	KTAP_EXPECT(kv_is(pool, sd, 4, 0x10));
	KV_CHECK(pool);
	haccel_kv_pool_destroy(pool);
	free(host);
	haccel_close(ctx);
}

static void t_admission_counts_hits(void)
{
	struct haccel_ctx *ctx = test_ctx();
	struct haccel_kv_pool *pool = small_kv(ctx, P, 8, 1, 8, 64);
	struct haccel_kv_admission adm;
	struct haccel_kv_stats before;
	int32_t a[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, o[8] = { 0 };
	uint32_t got[6];

	KTAP_ASSERT_EQ(haccel_kv_seq_free(pool, seq_with(pool, a, 8, NULL)), 0);
	before = stats(pool);
	KTAP_ASSERT_EQ(haccel_kv_admit(pool, a, 8, 8, &adm), 0);
	KTAP_EXPECT_EQ(adm.pages_needed, 4);
	KTAP_EXPECT_EQ(adm.pages_reused, 2);
	KTAP_EXPECT_EQ(adm.tokens_reused, 8);
	KTAP_EXPECT_EQ(adm.pages_new, 2);
	KTAP_EXPECT_EQ(adm.pages_available, 6);
	KTAP_EXPECT_EQ(adm.fits, 1);
	/* Admission is a question: nothing changed. */
	struct haccel_kv_stats after = stats(pool);
	KTAP_EXPECT(!memcmp(&before, &after, sizeof(before)));

	/* Only the two cached pages left: reusing them cannot also evict them. */
	KTAP_ASSERT_EQ(haccel_kv_pages_get(pool, 6, got), 0);
	KTAP_ASSERT_EQ(haccel_kv_admit(pool, a, 8, 4, &adm), 0);
	KTAP_EXPECT_EQ(adm.pages_new, 1);
	KTAP_EXPECT_EQ(adm.pages_available, 0);
	KTAP_EXPECT_EQ(adm.fits, 0);
	KTAP_ASSERT_EQ(haccel_kv_admit(pool, o, 8, 0, &adm), 0);
	KTAP_EXPECT_EQ(adm.pages_new, 2);
	KTAP_EXPECT_EQ(adm.pages_available, 2);
	KTAP_EXPECT_EQ(adm.fits, 1);
	KTAP_ASSERT_EQ(haccel_kv_admit(pool, NULL, 0, 9, &adm), 0);
	KTAP_EXPECT_EQ(adm.pages_needed, 3);
	KTAP_EXPECT_EQ(adm.fits, 0);
	KTAP_EXPECT_EQ(haccel_kv_admit(pool, NULL, 60, 5, &adm), -E2BIG);
	KTAP_ASSERT_EQ(haccel_kv_pages_put(pool, got, 6), 0);
	KV_CHECK(pool);
	haccel_kv_pool_destroy(pool);
	haccel_close(ctx);
}

static void t_reset_and_disabled(void)
{
	struct haccel_ctx *ctx = test_ctx();
	struct haccel_kv_pool *pool = small_kv(ctx, P, 16, 1, 8, 64);
	struct haccel_kv_pool_config c;
	int32_t a[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	uint32_t s, r, keep;
	uint64_t key;

	keep = seq_with(pool, a, 8, NULL);
	KTAP_ASSERT_EQ(haccel_kv_seq_free(pool, seq_with(pool, a, 8, NULL)), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_free(pool, keep), 0);
	KTAP_EXPECT_EQ(stats(pool).pages_evictable, 2);
	KTAP_EXPECT_EQ(haccel_kv_prefix_cache_reset(pool), 2);
	KTAP_EXPECT_EQ(stats(pool).pages_cached, 0);
	KTAP_EXPECT_EQ(stats(pool).pages_free, 16);
	KTAP_ASSERT_EQ(haccel_kv_seq_create(pool, a, 8, &s, &r), 0);
	KTAP_EXPECT_EQ(r, 0);
	KV_CHECK(pool);
	haccel_kv_pool_destroy(pool);

	haccel_kv_pool_config_init(&c);
	c.flags = HACCEL_KV_NO_PREFIX_CACHE;
	c.page_tokens = P;
	c.n_pages = 16;
	KTAP_ASSERT_EQ(haccel_kv_pool_create(ctx, &c, &pool), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_free(pool, seq_with(pool, a, 8, NULL)), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_create(pool, a, 8, &s, &r), 0);
	KTAP_EXPECT_EQ(r, 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_append(pool, s, a, 8, NULL), 0);
	KTAP_EXPECT_EQ(stats(pool).pages_cached, 0);
	KTAP_EXPECT_EQ(stats(pool).pages_evictable, 0);
	KTAP_EXPECT_EQ(haccel_kv_seq_prefix_key(pool, s, 0, &key), -ENOTSUP);
	KV_CHECK(pool);
	haccel_kv_pool_destroy(pool);
	haccel_close(ctx);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_longest_prefix_reused),
	KTAP_CASE(t_lru_eviction_only_when_needed),
	KTAP_CASE(t_collisions_never_serve_wrong_kv),
	KTAP_CASE(t_twins_and_children),
	KTAP_CASE(t_cached_page_never_rewritten),
	KTAP_CASE(t_preempt_and_resume),
	KTAP_CASE(t_admission_counts_hits),
	KTAP_CASE(t_reset_and_disabled),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
