// SPDX-License-Identifier: MIT
/* KV sequences: slot indices, page allocation on fill, fork and copy-on-write, truncate, free, exhaustion, raw pages, swap-in only into pages held alone. */
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

/* Write a recognisable byte pattern for token slot s in every region. */
static void write_token(struct haccel_kv_pool *pool, int64_t slot, uint8_t tag)
{
	struct haccel_kv_pool_info info;

	haccel_kv_pool_info(pool, &info);
	for (uint32_t l = 0; l < info.n_layers; l++)
		for (uint32_t s = 0; s < info.n_streams; s++) {
			struct haccel_kv_region r;
			haccel_kv_pool_region(pool, l, s, &r);
			memset((char *)r.base + slot * r.bytes_per_token,
			       tag ^ (uint8_t)(l * 16 + s), r.bytes_per_token);
		}
}

static int token_is(struct haccel_kv_pool *pool, int64_t slot, uint8_t tag)
{
	struct haccel_kv_pool_info info;

	haccel_kv_pool_info(pool, &info);
	for (uint32_t l = 0; l < info.n_layers; l++)
		for (uint32_t s = 0; s < info.n_streams; s++) {
			struct haccel_kv_region r;
			const uint8_t *b;
			haccel_kv_pool_region(pool, l, s, &r);
			b = (const uint8_t *)r.base + slot * r.bytes_per_token;
			for (uint32_t i = 0; i < r.bytes_per_token; i++)
				if (b[i] != (uint8_t)(tag ^ (l * 16 + s)))
					return 0;
		}
	return 1;
}

static int32_t toks[256];

static void setup_tokens(void)
{
	for (int i = 0; i < 256; i++)
		toks[i] = 1000 + i;
}

static void t_append_slots(void)
{
	struct haccel_ctx *ctx = test_ctx();
	struct haccel_kv_pool *pool = small_kv(ctx, P, 16, 2, 4, 64);
	const uint32_t *bt;
	uint32_t seq, n_pages, n_tok, reused = 99;
	int64_t slots[8];

	setup_tokens();
	KTAP_ASSERT_EQ(haccel_kv_seq_create(pool, NULL, 0, &seq, &reused), 0);
	KTAP_EXPECT_EQ(reused, 0);
	KTAP_EXPECT_EQ(stats(pool).pages_used, 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_append(pool, seq, toks, 3, slots), 0);
	KTAP_EXPECT_EQ(stats(pool).pages_used, 1);
	KTAP_ASSERT_EQ(haccel_kv_seq_block_table(pool, seq, &bt, &n_pages, &n_tok), 0);
	KTAP_EXPECT_EQ(n_pages, 1);
	KTAP_EXPECT_EQ(n_tok, 3);
	for (int i = 0; i < 3; i++)
		KTAP_EXPECT_EQ(slots[i], (int64_t)bt[0] * P + i);
	/* Filling the page takes no new page; the next token does. */
	KTAP_ASSERT_EQ(haccel_kv_seq_append(pool, seq, toks + 3, 1, slots), 0);
	KTAP_EXPECT_EQ(slots[0], (int64_t)bt[0] * P + 3);
	KTAP_EXPECT_EQ(stats(pool).pages_used, 1);
	KTAP_ASSERT_EQ(haccel_kv_seq_append(pool, seq, toks + 4, 6, slots), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_block_table(pool, seq, &bt, &n_pages, &n_tok), 0);
	KTAP_EXPECT_EQ(n_pages, 3);
	KTAP_EXPECT_EQ(n_tok, 10);
	KTAP_EXPECT_EQ(stats(pool).pages_used, 3);
	for (int i = 0; i < 6; i++)
		KTAP_EXPECT_EQ(slots[i], (int64_t)bt[(4 + i) / P] * P + (4 + i) % P);
	/* NULL slots are allowed; zero tokens change nothing. */
	KTAP_EXPECT_EQ(haccel_kv_seq_append(pool, seq, toks, 1, NULL), 0);
	KTAP_EXPECT_EQ(haccel_kv_seq_append(pool, seq, NULL, 0, NULL), 0);
	KTAP_EXPECT_EQ(haccel_kv_seq_append(pool, seq, NULL, 1, NULL), -EINVAL);
	KTAP_ASSERT_EQ(haccel_kv_seq_block_table(pool, seq, NULL, NULL, &n_tok), 0);
	KTAP_EXPECT_EQ(n_tok, 11);

	/* The matrix row is the sequence's table. */
	struct haccel_kv_pool_info info;
	KTAP_ASSERT_EQ(haccel_kv_pool_info(pool, &info), 0);
	KTAP_EXPECT(info.block_tables + (size_t)seq * info.max_pages_per_seq == bt);
	KTAP_EXPECT_EQ(info.max_pages_per_seq, 64 / P);
	KV_CHECK(pool);
	haccel_kv_pool_destroy(pool);
	haccel_close(ctx);
}

static void t_fork_and_copy_on_write(void)
{
	struct haccel_ctx *ctx = test_ctx();
	struct haccel_kv_pool *pool = small_kv(ctx, P, 16, 2, 4, 64);
	const uint32_t *bta, *btb;
	uint32_t a, b, na, nb, need;
	int64_t slots[8];

	setup_tokens();
	KTAP_ASSERT_EQ(haccel_kv_seq_create(pool, NULL, 0, &a, NULL), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_append(pool, a, toks, 6, slots), 0);
	for (int i = 0; i < 6; i++)
		write_token(pool, slots[i], (uint8_t)(0x10 + i));
	KTAP_ASSERT_EQ(haccel_kv_seq_fork(pool, a, &b), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_block_table(pool, a, &bta, &na, NULL), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_block_table(pool, b, &btb, &nb, NULL), 0);
	KTAP_ASSERT_EQ(na, 2);
	KTAP_ASSERT_EQ(nb, 2);
	KTAP_EXPECT_EQ(btb[0], bta[0]);
	KTAP_EXPECT_EQ(btb[1], bta[1]);
	KTAP_EXPECT_EQ(haccel__kv_page_ref(pool, bta[0]), 2);
	KTAP_EXPECT_EQ(haccel__kv_page_ref(pool, bta[1]), 2);
	KTAP_EXPECT_EQ(stats(pool).pages_used, 2);
	KV_CHECK(pool);

	/* B appends into the shared partial page: it gets its own copy. */
	uint32_t shared = bta[1];
	KTAP_ASSERT_EQ(haccel_kv_seq_pages_needed(pool, b, 1, &need), 0);
	KTAP_EXPECT_EQ(need, 1);
	KTAP_ASSERT_EQ(haccel_kv_seq_append(pool, b, toks + 6, 1, slots), 0);
	KTAP_EXPECT(btb[1] != shared);
	KTAP_EXPECT_EQ(btb[0], bta[0]);
	KTAP_EXPECT_EQ(slots[0], (int64_t)btb[1] * P + 2);
	KTAP_EXPECT_EQ(stats(pool).cow_copies, 1);
	KTAP_EXPECT_EQ(haccel__kv_page_ref(pool, shared), 1);
	KTAP_EXPECT_EQ(haccel__kv_page_ref(pool, btb[1]), 1);
	/* The copy holds the first two tokens in every layer and stream. */
	KTAP_EXPECT(token_is(pool, (int64_t)btb[1] * P + 0, 0x14));
	KTAP_EXPECT(token_is(pool, (int64_t)btb[1] * P + 1, 0x15));
	write_token(pool, slots[0], 0x77);
	KTAP_EXPECT(token_is(pool, (int64_t)shared * P + 0, 0x14));
	KTAP_EXPECT(token_is(pool, (int64_t)shared * P + 1, 0x15));

	/* A is alone on its page again: it writes in place. */
	KTAP_ASSERT_EQ(haccel_kv_seq_pages_needed(pool, a, 1, &need), 0);
	KTAP_EXPECT_EQ(need, 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_append(pool, a, toks + 6, 1, slots), 0);
	KTAP_EXPECT_EQ(slots[0], (int64_t)shared * P + 2);
	KTAP_EXPECT_EQ(stats(pool).cow_copies, 1);
	KTAP_EXPECT(token_is(pool, (int64_t)btb[1] * P + 2, 0x77));

	/* Forking at a page boundary shares only full pages: no copy needed. */
	uint32_t c, nc;
	KTAP_ASSERT_EQ(haccel_kv_seq_append(pool, a, toks + 7, 1, NULL), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_fork(pool, a, &c), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_pages_needed(pool, c, 1, &need), 0);
	KTAP_EXPECT_EQ(need, 1);
	KTAP_ASSERT_EQ(haccel_kv_seq_append(pool, c, toks + 8, 1, NULL), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_block_table(pool, c, NULL, &nc, NULL), 0);
	KTAP_EXPECT_EQ(nc, 3);
	KTAP_EXPECT_EQ(stats(pool).cow_copies, 1);
	KV_CHECK(pool);

	/* Freeing the parent leaves the children intact. */
	KTAP_ASSERT_EQ(haccel_kv_seq_free(pool, a), 0);
	KTAP_EXPECT(token_is(pool, (int64_t)btb[0] * P + 3, 0x13));
	KTAP_ASSERT_EQ(haccel_kv_seq_free(pool, b), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_free(pool, c), 0);
	KTAP_EXPECT_EQ(stats(pool).pages_used, 0);
	KTAP_EXPECT_EQ(stats(pool).seqs_active, 0);
	KV_CHECK(pool);
	haccel_kv_pool_destroy(pool);
	haccel_close(ctx);
}

static void t_truncate(void)
{
	struct haccel_ctx *ctx = test_ctx();
	struct haccel_kv_pool *pool = small_kv(ctx, P, 16, 1, 4, 64);
	const uint32_t *bt;
	uint32_t a, b, n, tok, need;
	int64_t slot;

	setup_tokens();
	KTAP_ASSERT_EQ(haccel_kv_seq_create(pool, NULL, 0, &a, NULL), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_append(pool, a, toks, 10, NULL), 0);
	KTAP_EXPECT_EQ(haccel_kv_seq_truncate(pool, a, 11), -EINVAL);
	KTAP_ASSERT_EQ(haccel_kv_seq_truncate(pool, a, 5), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_block_table(pool, a, &bt, &n, &tok), 0);
	KTAP_EXPECT_EQ(n, 2);
	KTAP_EXPECT_EQ(tok, 5);
	KTAP_EXPECT_EQ(stats(pool).pages_used, 2);
	/* Appending after a truncate writes where the old tokens were: page 1
	 * was full and cached, so it leaves the cache first (pages 0 stays). */
	KTAP_EXPECT_EQ(stats(pool).pages_cached, 2);
	KTAP_ASSERT_EQ(haccel_kv_seq_append(pool, a, toks + 100, 1, &slot), 0);
	KTAP_EXPECT_EQ(slot, (int64_t)bt[1] * P + 1);
	KTAP_EXPECT_EQ(stats(pool).cow_copies, 0);
	KTAP_EXPECT_EQ(stats(pool).pages_cached, 1);

	/* Truncating into a page shared with a fork: the next append copies. */
	KTAP_ASSERT_EQ(haccel_kv_seq_append(pool, a, toks + 6, 2, NULL), 0); /* 8 tokens */
	KTAP_ASSERT_EQ(haccel_kv_seq_fork(pool, a, &b), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_truncate(pool, b, 6), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_pages_needed(pool, b, 1, &need), 0);
	KTAP_EXPECT_EQ(need, 1);
	KTAP_ASSERT_EQ(haccel_kv_seq_append(pool, b, toks + 50, 1, &slot), 0);
	KTAP_EXPECT_EQ(stats(pool).cow_copies, 1);
	KTAP_ASSERT_EQ(haccel_kv_seq_truncate(pool, b, 0), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_block_table(pool, b, NULL, &n, &tok), 0);
	KTAP_EXPECT_EQ(n, 0);
	KTAP_EXPECT_EQ(tok, 0);
	KV_CHECK(pool);
	haccel_kv_pool_destroy(pool);
	haccel_close(ctx);
}

static void t_bad_sequence_ids(void)
{
	struct haccel_ctx *ctx = test_ctx();
	struct haccel_kv_pool *pool = small_kv(ctx, P, 8, 1, 2, 16);
	uint32_t a, b, c, n;
	uint64_t key;

	setup_tokens();
	KTAP_ASSERT_EQ(haccel_kv_seq_create(pool, NULL, 0, &a, NULL), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_create(pool, NULL, 0, &b, NULL), 0);
	KTAP_EXPECT_EQ(haccel_kv_seq_create(pool, NULL, 0, &c, NULL), -ENOSPC);
	KTAP_EXPECT_EQ(haccel_kv_seq_fork(pool, a, &c), -ENOSPC);
	KTAP_ASSERT_EQ(haccel_kv_seq_free(pool, b), 0);
	KTAP_EXPECT_EQ(haccel_kv_seq_free(pool, b), -ENOENT);
	KTAP_EXPECT_EQ(haccel_kv_seq_append(pool, b, toks, 1, NULL), -ENOENT);
	KTAP_EXPECT_EQ(haccel_kv_seq_append(pool, 2, toks, 1, NULL), -EINVAL);
	KTAP_EXPECT_EQ(haccel_kv_seq_append(pool, UINT32_MAX, toks, 1, NULL), -EINVAL);
	KTAP_EXPECT_EQ(haccel_kv_seq_fork(pool, b, &c), -ENOENT);
	KTAP_EXPECT_EQ(haccel_kv_seq_truncate(pool, b, 0), -ENOENT);
	KTAP_EXPECT_EQ(haccel_kv_seq_block_table(pool, b, NULL, &n, NULL), -ENOENT);
	KTAP_EXPECT_EQ(haccel_kv_seq_pages_needed(pool, b, 1, &n), -ENOENT);
	KTAP_EXPECT_EQ(haccel_kv_seq_prefix_key(pool, b, 0, &key), -ENOENT);
	KTAP_EXPECT_EQ(haccel_kv_seq_create(pool, NULL, 3, &c, NULL), -EINVAL);
	KTAP_EXPECT_EQ(haccel_kv_seq_create(NULL, NULL, 0, &c, NULL), -EINVAL);
	KTAP_EXPECT_EQ(haccel_kv_seq_create(pool, NULL, 0, NULL, NULL), -EINVAL);
	/* Past max_seq_tokens: refused whole. */
	KTAP_EXPECT_EQ(haccel_kv_seq_append(pool, a, toks, 17, NULL), -E2BIG);
	KTAP_EXPECT_EQ(haccel_kv_seq_pages_needed(pool, a, 17, &n), -E2BIG);
	KTAP_ASSERT_EQ(haccel_kv_seq_append(pool, a, toks, 16, NULL), 0);
	KTAP_EXPECT_EQ(haccel_kv_seq_append(pool, a, toks, 1, NULL), -E2BIG);
	KTAP_EXPECT_EQ(haccel_kv_seq_prefix_key(pool, a, 4, &key), -ERANGE);
	KTAP_EXPECT_EQ(haccel_kv_seq_prefix_key(pool, a, 3, &key), 0);
	KV_CHECK(pool);
	haccel_kv_pool_destroy(pool);
	haccel_close(ctx);
}

/* Everything observable about a sequence and the pool, to compare. */
struct snapshot {
	struct haccel_kv_stats st;
	uint32_t n_pages, n_tokens, pages[16];
};

static struct snapshot snap(struct haccel_kv_pool *pool, uint32_t seq)
{
	struct snapshot s;
	const uint32_t *bt;

	memset(&s, 0, sizeof(s));
	s.st = stats(pool);
	KTAP_ASSERT_EQ(haccel_kv_seq_block_table(pool, seq, &bt, &s.n_pages, &s.n_tokens), 0);
	memcpy(s.pages, bt, s.n_pages * sizeof(*bt));
	return s;
}

static void t_exhaustion_changes_nothing(void)
{
	struct haccel_ctx *ctx = test_ctx();
	struct haccel_kv_pool *pool = small_kv(ctx, P, 4, 1, 4, 64);
	struct haccel_kv_admission adm;
	struct snapshot before, after;
	uint32_t a, b, c;
	uint32_t pages[8];

	setup_tokens();
	KTAP_ASSERT_EQ(haccel_kv_seq_create(pool, NULL, 0, &a, NULL), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_append(pool, a, toks, 10, NULL), 0); /* 3 pages */
	KTAP_ASSERT_EQ(haccel_kv_seq_create(pool, NULL, 0, &b, NULL), 0);
	KTAP_ASSERT_EQ(haccel_kv_admit(pool, NULL, 8, 0, &adm), 0);
	KTAP_EXPECT_EQ(adm.pages_needed, 2);
	KTAP_EXPECT_EQ(adm.pages_available, 1);
	KTAP_EXPECT_EQ(adm.fits, 0);

	before = snap(pool, b);
	KTAP_EXPECT_EQ(haccel_kv_seq_append(pool, b, toks, 8, NULL), -ENOMEM);
	after = snap(pool, b);
	KTAP_EXPECT(!memcmp(&before, &after, sizeof(before)));

	/* A fork whose append would need a copy and a new page. */
	KTAP_ASSERT_EQ(haccel_kv_seq_append(pool, b, toks, 4, NULL), 0); /* last page */
	KTAP_ASSERT_EQ(haccel_kv_seq_fork(pool, a, &c), 0);
	before = snap(pool, c);
	KTAP_EXPECT_EQ(haccel_kv_seq_append(pool, c, toks, 1, NULL), -ENOMEM);
	after = snap(pool, c);
	KTAP_EXPECT(!memcmp(&before, &after, sizeof(before)));
	KTAP_EXPECT_EQ(haccel_kv_pages_get(pool, 1, pages), -ENOMEM);
	KV_CHECK(pool);

	/* Freeing makes room, and then the same append works. */
	KTAP_ASSERT_EQ(haccel_kv_seq_free(pool, b), 0);
	KTAP_EXPECT_EQ(haccel_kv_seq_append(pool, c, toks, 1, NULL), 0);
	KV_CHECK(pool);
	haccel_kv_pool_destroy(pool);
	haccel_close(ctx);
}

static void t_pages_get_put(void)
{
	struct haccel_ctx *ctx = test_ctx();
	struct haccel_kv_pool *pool = small_kv(ctx, P, 8, 1, 2, 32);
	uint32_t p[8], bad[3];

	KTAP_ASSERT_EQ(haccel_kv_pages_get(pool, 5, p), 0);
	KTAP_EXPECT_EQ(stats(pool).pages_used, 5);
	KTAP_EXPECT_EQ(stats(pool).pages_allocated, 5);
	for (int i = 0; i < 5; i++)
		for (int j = 0; j < i; j++)
			KTAP_EXPECT(p[i] != p[j]);
	KTAP_EXPECT_EQ(haccel_kv_pages_get(pool, 4, p + 5), -ENOMEM);
	KTAP_EXPECT_EQ(stats(pool).pages_used, 5);
	KV_CHECK(pool);

	/* A bad id anywhere releases nothing. */
	bad[0] = p[0];
	bad[1] = 8;
	KTAP_EXPECT_EQ(haccel_kv_pages_put(pool, bad, 2), -EINVAL);
	KTAP_EXPECT_EQ(stats(pool).pages_used, 5);
	bad[0] = p[0];
	bad[1] = p[0]; /* one reference, released twice */
	KTAP_EXPECT_EQ(haccel_kv_pages_put(pool, bad, 2), -EINVAL);
	KTAP_EXPECT_EQ(haccel__kv_page_ref(pool, p[0]), 1);
	KV_CHECK(pool);

	/* A page a sequence holds was never got: refused, nothing changed,
	 * although it is referenced. */
	uint32_t seq, np;
	const uint32_t *bt;
	int32_t few[3] = { 1, 2, 3 };
	KTAP_ASSERT_EQ(haccel_kv_seq_create(pool, NULL, 0, &seq, NULL), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_append(pool, seq, few, 3, NULL), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_block_table(pool, seq, &bt, &np, NULL), 0);
	bad[0] = p[1];
	bad[1] = bt[0];
	KTAP_EXPECT_EQ(haccel_kv_pages_put(pool, bad, 2), -EINVAL);
	KTAP_EXPECT_EQ(haccel__kv_page_ref(pool, bt[0]), 1);
	KTAP_EXPECT_EQ(haccel__kv_page_ref(pool, p[1]), 1);
	KTAP_EXPECT_EQ(stats(pool).pages_used, 6);
	KV_CHECK(pool);
	KTAP_ASSERT_EQ(haccel_kv_seq_free(pool, seq), 0);

	KTAP_ASSERT_EQ(haccel_kv_pages_put(pool, p, 5), 0);
	KTAP_EXPECT_EQ(stats(pool).pages_used, 0);
	KTAP_EXPECT_EQ(stats(pool).pages_free, 8);
	KTAP_EXPECT_EQ(haccel_kv_pages_put(pool, p, 1), -EINVAL);
	KTAP_EXPECT_EQ(haccel_kv_pages_get(pool, 0, NULL), 0);
	KTAP_EXPECT_EQ(haccel_kv_pages_get(pool, 1, NULL), -EINVAL);
	KV_CHECK(pool);
	haccel_kv_pool_destroy(pool);
	haccel_close(ctx);
}

/*
 * Swap-in writes only pages the caller holds alone: a page a fork shares is
 * -EBUSY (no copy-on-write), a free or evictable page -EINVAL, all checked
 * before anything is written; a cached page held alone leaves the prefix
 * cache before it is written. Swap-out reads any page.
 */
static void t_swap_in_owned_pages_only(void)
{
	struct haccel_ctx *ctx = test_ctx();
	struct haccel_kv_pool *pool = small_kv(ctx, P, 8, 2, 4, 32);
	struct haccel_kv_pool_info info;
	uint32_t a, b, c, g, r, np, list[2], page0, page1;
	const uint32_t *bt;
	int64_t slots[6];
	uint8_t *out, *junk, *gbytes;

	setup_tokens();
	KTAP_ASSERT_EQ(haccel_kv_pool_info(pool, &info), 0);
	out = malloc(2 * info.page_bytes);
	junk = malloc(2 * info.page_bytes);
	gbytes = malloc(info.page_bytes);
	KTAP_ASSERT(out && junk && gbytes);
	memset(junk, 0x55, 2 * info.page_bytes);

	/* A: 6 tokens, page 0 full (cached), page 1 partial; B forks it. */
	KTAP_ASSERT_EQ(haccel_kv_seq_create(pool, NULL, 0, &a, NULL), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_append(pool, a, toks, 6, slots), 0);
	for (int i = 0; i < 6; i++)
		write_token(pool, slots[i], (uint8_t)(0xa0 + i));
	KTAP_ASSERT_EQ(haccel_kv_seq_block_table(pool, a, &bt, &np, NULL), 0);
	KTAP_ASSERT_EQ(np, 2);
	page0 = bt[0];
	page1 = bt[1];
	KTAP_ASSERT_EQ(haccel_kv_pages_swap_out(pool, bt, 2, out, 2 * info.page_bytes), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_fork(pool, a, &b), 0);
	KTAP_ASSERT_EQ(haccel_kv_pages_get(pool, 1, &g), 0);
	KTAP_ASSERT_EQ(haccel_kv_pages_swap_out(pool, &g, 1, gbytes, info.page_bytes), 0);

	/* Shared with B: refused, B's KV (and A's) untouched. */
	list[0] = page1;
	KTAP_EXPECT_EQ(haccel_kv_pages_swap_in(pool, list, 1, junk, info.page_bytes), -EBUSY);
	list[0] = page0;
	KTAP_EXPECT_EQ(haccel_kv_pages_swap_in(pool, list, 1, junk, info.page_bytes), -EBUSY);
	/* All or nothing: g (held alone) is not written when a later page fails. */
	list[0] = g;
	list[1] = page1;
	KTAP_EXPECT_EQ(haccel_kv_pages_swap_in(pool, list, 2, junk, 2 * info.page_bytes), -EBUSY);
	KTAP_ASSERT_EQ(haccel_kv_pages_swap_out(pool, &g, 1, junk + info.page_bytes,
						info.page_bytes), 0);
	KTAP_EXPECT(memcmp(junk + info.page_bytes, gbytes, info.page_bytes) == 0);
	memset(junk, 0x55, 2 * info.page_bytes);
	for (int i = 0; i < 6; i++)
		KTAP_EXPECT(token_is(pool, slots[i], (uint8_t)(0xa0 + i)));
	/* g listed twice: refused (its bytes would be either copy), not written;
	 * swap-out may read it twice. */
	list[0] = g;
	list[1] = g;
	KTAP_EXPECT_EQ(haccel_kv_pages_swap_in(pool, list, 2, junk, 2 * info.page_bytes), -EINVAL);
	KTAP_EXPECT_EQ(haccel_kv_pages_swap_out(pool, list, 2, junk, 2 * info.page_bytes), 0);
	KTAP_EXPECT(memcmp(junk, gbytes, info.page_bytes) == 0);
	KTAP_EXPECT(memcmp(junk + info.page_bytes, gbytes, info.page_bytes) == 0);
	memset(junk, 0x55, 2 * info.page_bytes);
	/* A duplicate or an id out of range third in the list: refused, and
	 * the marks of the two pages checked before it are gone (both swap
	 * in right after). */
	{
		uint32_t h, l3[3];
		uint8_t *three = malloc(3 * info.page_bytes);

		KTAP_ASSERT(three);
		memset(three, 0x66, 3 * info.page_bytes);
		KTAP_ASSERT_EQ(haccel_kv_pages_get(pool, 1, &h), 0);
		l3[0] = g;
		l3[1] = h;
		l3[2] = g;
		KTAP_EXPECT_EQ(haccel_kv_pages_swap_in(pool, l3, 3, three, 3 * info.page_bytes),
			       -EINVAL);
		l3[2] = info.n_pages + 5;
		KTAP_EXPECT_EQ(haccel_kv_pages_swap_in(pool, l3, 3, three, 3 * info.page_bytes),
			       -EINVAL);
		KTAP_EXPECT_EQ(haccel_kv_pages_swap_in(pool, l3, 2, three, 2 * info.page_bytes), 0);
		KTAP_ASSERT_EQ(haccel_kv_pages_swap_out(pool, l3, 2, three, 2 * info.page_bytes), 0);
		KTAP_EXPECT(three[0] == 0x66 && three[2 * info.page_bytes - 1] == 0x66);
		KTAP_EXPECT_EQ(haccel_kv_pages_swap_in(pool, &g, 1, gbytes, info.page_bytes), 0);
		KTAP_ASSERT_EQ(haccel_kv_pages_put(pool, &h, 1), 0);
		free(three);
	}
	list[1] = page1;
	/* Reading shared pages is fine. */
	KTAP_EXPECT_EQ(haccel_kv_pages_swap_out(pool, list, 2, out, 2 * info.page_bytes), 0);
	KTAP_ASSERT_EQ(haccel_kv_pages_swap_out(pool, bt, 2, out, 2 * info.page_bytes), 0);

	/* Free and evictable pages have no owner: refused. */
	KTAP_ASSERT_EQ(haccel_kv_seq_free(pool, b), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_free(pool, a), 0);
	KTAP_EXPECT_EQ(stats(pool).pages_evictable, 1); /* page 0, cached */
	list[0] = page0;
	KTAP_EXPECT_EQ(haccel_kv_pages_swap_in(pool, list, 1, junk, info.page_bytes), -EINVAL);
	list[0] = page1;
	KTAP_EXPECT_EQ(haccel_kv_pages_swap_in(pool, list, 1, junk, info.page_bytes), -EINVAL);
	list[0] = g;
	list[1] = page0;
	KTAP_EXPECT_EQ(haccel_kv_pages_swap_in(pool, list, 2, junk, 2 * info.page_bytes), -EINVAL);
	/* The cache serves the true KV of its tokens. */
	KTAP_ASSERT_EQ(haccel_kv_seq_create(pool, toks, 4, &c, &r), 0);
	KTAP_EXPECT_EQ(r, 4);
	KTAP_ASSERT_EQ(haccel_kv_seq_block_table(pool, c, &bt, &np, NULL), 0);
	KTAP_EXPECT_EQ(bt[0], page0);
	for (int i = 0; i < 4; i++)
		KTAP_EXPECT(token_is(pool, (int64_t)page0 * P + i, (uint8_t)(0xa0 + i)));

	/* C holds the cached page alone: written, after leaving the cache. */
	KTAP_EXPECT_EQ(stats(pool).pages_cached, 1);
	KTAP_EXPECT_EQ(haccel_kv_pages_swap_in(pool, bt, 1, junk, info.page_bytes), 0);
	KTAP_EXPECT_EQ(stats(pool).pages_cached, 0);
	KTAP_ASSERT_EQ(haccel_kv_pages_swap_out(pool, bt, 1, out, info.page_bytes), 0);
	KTAP_EXPECT(memcmp(out, junk, info.page_bytes) == 0);
	KV_CHECK(pool);
	KTAP_ASSERT_EQ(haccel_kv_seq_create(pool, toks, 4, &a, &r), 0);
	KTAP_EXPECT_EQ(r, 0);
	/* A raw page held alone takes any bytes. */
	KTAP_EXPECT_EQ(haccel_kv_pages_swap_in(pool, &g, 1, junk, info.page_bytes), 0);
	KTAP_ASSERT_EQ(haccel_kv_pages_put(pool, &g, 1), 0);
	KV_CHECK(pool);
	haccel_kv_pool_destroy(pool);
	free(out), free(junk), free(gbytes);
	haccel_close(ctx);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_append_slots),
	KTAP_CASE(t_fork_and_copy_on_write),
	KTAP_CASE(t_truncate),
	KTAP_CASE(t_bad_sequence_ids),
	KTAP_CASE(t_exhaustion_changes_nothing),
	KTAP_CASE(t_pages_get_put),
	KTAP_CASE(t_swap_in_owned_pages_only),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
