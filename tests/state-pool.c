// SPDX-License-Identifier: MIT
/* Recurrent-state pool: slot layout, zeroed slots, swaps, checkpoints saved, found, restored, overwritten, evicted and dropped; stale checkpoint ids refused. */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pool-util.h"

static struct haccel_state_pool *make(struct haccel_ctx *ctx, uint32_t slots,
				      uint32_t ckpts)
{
	struct haccel_state_pool_config c;
	struct haccel_state_pool *pool = NULL;

	haccel_state_pool_config_init(&c);
	c.n_layers = 3;
	c.n_heads = 2;
	c.head_dk = 4;
	c.head_dv = 8;
	c.n_slots = slots;
	c.n_checkpoints = ckpts;
	KTAP_ASSERT_EQ(haccel_state_pool_create(ctx, &c, &pool), 0);
	return pool;
}

static struct haccel_state_stats stats(struct haccel_state_pool *pool)
{
	struct haccel_state_stats st;

	KTAP_ASSERT_EQ(haccel_state_pool_stats(pool, &st), 0);
	KTAP_EXPECT_EQ(st.slots_used + st.slots_free, st.slots_total);
	KTAP_EXPECT_EQ(st.ckpts_used + st.ckpts_free, st.ckpts_total);
	KTAP_EXPECT_EQ(st.bytes_total, (st.slots_total + st.ckpts_total) * st.slot_bytes);
	return st;
}

static uint8_t *slot_mem(struct haccel_state_pool *pool, uint32_t s)
{
	struct haccel_state_layout l;

	haccel_state_pool_layout(pool, &l);
	return (uint8_t *)l.slots_base + (uint64_t)s * l.slot_bytes;
}

static int all_bytes(const uint8_t *p, uint64_t n, uint8_t v)
{
	for (uint64_t i = 0; i < n; i++)
		if (p[i] != v)
			return 0;
	return 1;
}

static void t_layout(void)
{
	struct haccel_ctx *ctx = test_ctx();
	struct haccel_state_pool *pool = make(ctx, 4, 2);
	struct haccel_state_layout l;

	KTAP_ASSERT_EQ(haccel_state_pool_layout(pool, &l), 0);
	KTAP_EXPECT_EQ(l.state_offset, 0);
	KTAP_EXPECT_EQ(l.state_bytes, 2 * 4 * 8 * 4);        /* heads x dk x dv fp32 */
	KTAP_EXPECT_EQ(l.conv_q_offset, 256);
	KTAP_EXPECT_EQ(l.conv_q_bytes, 3 * 2 * 4 * 4);       /* (width-1) x heads*dk */
	KTAP_EXPECT_EQ(l.conv_k_offset, 512);
	KTAP_EXPECT_EQ(l.conv_k_bytes, 3 * 2 * 4 * 4);
	KTAP_EXPECT_EQ(l.conv_v_offset, 768);
	KTAP_EXPECT_EQ(l.conv_v_bytes, 3 * 2 * 8 * 4);       /* (width-1) x heads*dv */
	KTAP_EXPECT_EQ(l.layer_bytes, 1024);
	KTAP_EXPECT_EQ(l.slot_bytes, 4096);
	KTAP_EXPECT_EQ(l.n_slots, 4);
	KTAP_EXPECT_EQ(l.n_checkpoints, 2);
	KTAP_EXPECT((uint8_t *)l.ckpt_base == (uint8_t *)l.slots_base + 4 * 4096);
	KTAP_EXPECT_EQ((uintptr_t)l.slots_base % 4096, 0);
	haccel_state_pool_destroy(pool);

	/* Kimi-Linear-like dims: 2 MiB of fp32 state per layer plus tails. */
	struct haccel_state_pool_config c;
	haccel_state_pool_config_init(&c);
	KTAP_EXPECT_EQ(c.n_heads, 32);
	KTAP_EXPECT_EQ(c.conv_width, 4);
	c.n_layers = 20;
	c.conv_elem_bytes = 2;
	c.n_slots = 2;
	KTAP_ASSERT_EQ(haccel_state_pool_create(ctx, &c, &pool), 0);
	KTAP_ASSERT_EQ(haccel_state_pool_layout(pool, &l), 0);
	KTAP_EXPECT_EQ(l.state_bytes, 2u << 20);
	KTAP_EXPECT_EQ(l.conv_v_bytes, 3 * 32 * 128 * 2);
	KTAP_EXPECT_EQ(l.layer_bytes, (2u << 20) + 3 * 3 * 32 * 128 * 2);
	KTAP_EXPECT_EQ(l.slot_bytes, 20 * l.layer_bytes);
	haccel_state_pool_destroy(pool);
	haccel_close(ctx);
}

static void t_slots(void)
{
	struct haccel_ctx *ctx = test_ctx();
	struct haccel_state_pool *pool = make(ctx, 3, 0);
	uint32_t a, b, c, d;

	KTAP_ASSERT_EQ(haccel_state_slot_alloc(pool, 0, &a), 0);
	KTAP_EXPECT(all_bytes(slot_mem(pool, a), 4096, 0));
	memset(slot_mem(pool, a), 0xff, 4096);
	KTAP_ASSERT_EQ(haccel_state_slot_free(pool, a), 0);
	/* The same slot comes back (LIFO), zeroed again. */
	KTAP_ASSERT_EQ(haccel_state_slot_alloc(pool, 0, &b), 0);
	KTAP_EXPECT_EQ(b, a);
	KTAP_EXPECT(all_bytes(slot_mem(pool, b), 4096, 0));
	memset(slot_mem(pool, b), 0xab, 4096);
	KTAP_ASSERT_EQ(haccel_state_slot_free(pool, b), 0);
	KTAP_ASSERT_EQ(haccel_state_slot_alloc(pool, HACCEL_STATE_SLOT_NOZERO, &b), 0);
	KTAP_EXPECT(all_bytes(slot_mem(pool, b), 4096, 0xab));
	KTAP_EXPECT_EQ(haccel_state_slot_alloc(pool, 2, &c), -EINVAL);
	KTAP_ASSERT_EQ(haccel_state_slot_alloc(pool, 0, &c), 0);
	KTAP_ASSERT_EQ(haccel_state_slot_alloc(pool, 0, &d), 0);
	KTAP_EXPECT(b != c && c != d && b != d);
	KTAP_EXPECT_EQ(stats(pool).slots_used, 3);
	KTAP_EXPECT_EQ(haccel_state_slot_alloc(pool, 0, &a), -ENOMEM);
	KTAP_EXPECT_EQ(stats(pool).slots_used, 3);
	KTAP_ASSERT_EQ(haccel_state_slot_free(pool, c), 0);
	KTAP_EXPECT_EQ(haccel_state_slot_free(pool, c), -ENOENT);
	KTAP_EXPECT_EQ(haccel_state_slot_free(pool, 3), -EINVAL);
	KTAP_EXPECT_EQ(haccel_state_slot_free(NULL, 0), -EINVAL);
	KTAP_EXPECT_EQ(haccel_state_slot_alloc(pool, 0, NULL), -EINVAL);
	KTAP_EXPECT_EQ(stats(pool).slots_free, 1);
	STATE_CHECK(pool);
	haccel_state_pool_destroy(pool);
	haccel_close(ctx);
}

/*
 * Swaps: slots out to host memory and back, in list order; a swap-in that
 * lists a slot twice (the slot would hold whichever copy landed last) or a
 * slot not in use is refused and writes nothing, a swap-out may read a
 * slot twice.
 */
static void t_swap(void)
{
	struct haccel_ctx *ctx = test_ctx();
	struct haccel_state_pool *pool = make(ctx, 3, 0);
	struct haccel_state_layout l;
	uint32_t a, b, list[3];
	uint8_t *host;

	haccel_state_pool_layout(pool, &l);
	host = malloc(3 * l.slot_bytes);
	KTAP_ASSERT(host);
	KTAP_ASSERT_EQ(haccel_state_slot_alloc(pool, 0, &a), 0);
	KTAP_ASSERT_EQ(haccel_state_slot_alloc(pool, 0, &b), 0);
	memset(slot_mem(pool, a), 0x11, l.slot_bytes);
	memset(slot_mem(pool, b), 0x22, l.slot_bytes);
	list[0] = a;
	list[1] = b;
	list[2] = a;
	KTAP_ASSERT_EQ(haccel_state_slots_swap_out(pool, list, 3, host, 3 * l.slot_bytes), 0);
	KTAP_EXPECT(all_bytes(host, l.slot_bytes, 0x11));
	KTAP_EXPECT(all_bytes(host + l.slot_bytes, l.slot_bytes, 0x22));
	KTAP_EXPECT(all_bytes(host + 2 * l.slot_bytes, l.slot_bytes, 0x11));
	memset(host, 0x33, 3 * l.slot_bytes);
	/* a listed twice: refused, neither slot written */
	KTAP_EXPECT_EQ(haccel_state_slots_swap_in(pool, list, 3, host, 3 * l.slot_bytes), -EINVAL);
	KTAP_EXPECT(all_bytes(slot_mem(pool, a), l.slot_bytes, 0x11));
	KTAP_EXPECT(all_bytes(slot_mem(pool, b), l.slot_bytes, 0x22));
	/* a slot out of range or not in use after a good one: the same */
	list[1] = 3;
	KTAP_EXPECT_EQ(haccel_state_slots_swap_in(pool, list, 2, host, 2 * l.slot_bytes), -EINVAL);
	list[1] = a == 2 || b == 2 ? (a == 1 || b == 1 ? 0 : 1) : 2;
	KTAP_EXPECT_EQ(haccel_state_slots_swap_in(pool, list, 2, host, 2 * l.slot_bytes), -EINVAL);
	KTAP_EXPECT(all_bytes(slot_mem(pool, a), l.slot_bytes, 0x11));
	/* the marks of the refused calls are gone: each slot once, in order */
	list[0] = b;
	list[1] = a;
	KTAP_EXPECT_EQ(haccel_state_slots_swap_in(pool, list, 2, host, 2 * l.slot_bytes), 0);
	KTAP_EXPECT(all_bytes(slot_mem(pool, a), l.slot_bytes, 0x33));
	KTAP_EXPECT(all_bytes(slot_mem(pool, b), l.slot_bytes, 0x33));
	KTAP_EXPECT_EQ(haccel_state_slots_swap_in(pool, list, 2, host, 2 * l.slot_bytes), 0);
	KTAP_ASSERT_EQ(haccel_state_slot_free(pool, a), 0);
	KTAP_ASSERT_EQ(haccel_state_slot_free(pool, b), 0);
	STATE_CHECK(pool);
	free(host);
	haccel_state_pool_destroy(pool);
	haccel_close(ctx);
}

static void t_checkpoints(void)
{
	struct haccel_ctx *ctx = test_ctx();
	struct haccel_state_pool *pool = make(ctx, 2, 4);
	uint32_t a, b, c, c2, f;

	KTAP_ASSERT_EQ(haccel_state_slot_alloc(pool, 0, &a), 0);
	KTAP_ASSERT_EQ(haccel_state_slot_alloc(pool, 0, &b), 0);
	memset(slot_mem(pool, a), 0x11, 4096);
	KTAP_ASSERT_EQ(haccel_state_ckpt_save(pool, a, 1, 64, 0, &c), 0);
	memset(slot_mem(pool, a), 0x22, 4096);
	KTAP_ASSERT_EQ(haccel_state_ckpt_restore(pool, c, a), 0);
	KTAP_EXPECT(all_bytes(slot_mem(pool, a), 4096, 0x11));
	/* Restore into another slot too. */
	KTAP_ASSERT_EQ(haccel_state_ckpt_restore(pool, c, b), 0);
	KTAP_EXPECT(all_bytes(slot_mem(pool, b), 4096, 0x11));

	KTAP_ASSERT_EQ(haccel_state_ckpt_find(pool, 1, 64, &f), 0);
	KTAP_EXPECT_EQ(f, c);
	KTAP_EXPECT_EQ(haccel_state_ckpt_find(pool, 1, 65, &f), -ENOENT);
	KTAP_EXPECT_EQ(haccel_state_ckpt_find(pool, 2, 64, &f), -ENOENT);

	/* Saving the same key again overwrites in place. */
	memset(slot_mem(pool, b), 0x33, 4096);
	KTAP_ASSERT_EQ(haccel_state_ckpt_save(pool, b, 1, 64, 0, &c2), 0);
	KTAP_EXPECT_EQ(c2, c);
	KTAP_EXPECT_EQ(stats(pool).ckpts_used, 1);
	KTAP_ASSERT_EQ(haccel_state_ckpt_restore(pool, c, a), 0);
	KTAP_EXPECT(all_bytes(slot_mem(pool, a), 4096, 0x33));

	/* A slot not in use cannot be saved from or restored into. */
	KTAP_ASSERT_EQ(haccel_state_slot_free(pool, b), 0);
	KTAP_EXPECT_EQ(haccel_state_ckpt_save(pool, b, 5, 0, 0, &c2), -ENOENT);
	KTAP_EXPECT_EQ(haccel_state_ckpt_restore(pool, c, b), -ENOENT);
	KTAP_EXPECT_EQ(haccel_state_ckpt_save(pool, a, 5, 0, 4, &c2), -EINVAL);
	KTAP_EXPECT_EQ(haccel_state_ckpt_save(pool, a, 5, 0, 0, NULL), -EINVAL);
	/* Ids are opaque: ones never handed out name no checkpoint. */
	KTAP_EXPECT_EQ(haccel_state_ckpt_restore(pool, 4, a), -ENOENT);
	KTAP_EXPECT_EQ(haccel_state_ckpt_restore(pool, 3, a), -ENOENT);
	KTAP_EXPECT_EQ(haccel_state_ckpt_restore(pool, UINT32_MAX, a), -ENOENT);
	KTAP_EXPECT_EQ(haccel_state_ckpt_restore(NULL, c, a), -EINVAL);

	KTAP_ASSERT_EQ(haccel_state_ckpt_drop(pool, c), 0);
	KTAP_EXPECT_EQ(haccel_state_ckpt_drop(pool, c), -ENOENT);
	KTAP_EXPECT_EQ(haccel_state_ckpt_find(pool, 1, 64, &f), -ENOENT);
	KTAP_EXPECT_EQ(haccel_state_ckpt_restore(pool, c, a), -ENOENT);
	struct haccel_state_stats st = stats(pool);
	KTAP_EXPECT_EQ(st.saves, 2);
	KTAP_EXPECT_EQ(st.restores, 3);
	KTAP_EXPECT_EQ(st.drops, 1);
	KTAP_EXPECT_EQ(st.ckpts_used, 0);
	STATE_CHECK(pool);
	haccel_state_pool_destroy(pool);
	haccel_close(ctx);
}

static void t_full_and_evict(void)
{
	struct haccel_ctx *ctx = test_ctx();
	struct haccel_state_pool *pool = make(ctx, 1, 3);
	uint32_t a, c[4], f;

	KTAP_ASSERT_EQ(haccel_state_slot_alloc(pool, 0, &a), 0);
	for (uint32_t k = 0; k < 3; k++) {
		memset(slot_mem(pool, a), 0x40 + k, 4096);
		KTAP_ASSERT_EQ(haccel_state_ckpt_save(pool, a, 100 + k, 0, 0, &c[k]), 0);
	}
	KTAP_EXPECT_EQ(haccel_state_ckpt_save(pool, a, 103, 0, 0, &c[3]), -ENOMEM);
	KTAP_EXPECT_EQ(stats(pool).ckpts_used, 3);
	KTAP_EXPECT_EQ(haccel_state_ckpt_find(pool, 103, 0, &f), -ENOENT);
	/* A restore refreshes 100: the least recently used is now 101. */
	KTAP_ASSERT_EQ(haccel_state_ckpt_restore(pool, c[0], a), 0);
	memset(slot_mem(pool, a), 0x99, 4096);
	KTAP_ASSERT_EQ(haccel_state_ckpt_save(pool, a, 103, 0, HACCEL_STATE_CKPT_EVICT, &c[3]), 0);
	/* 103 took 101's place, under a new id: 101's id is stale. */
	KTAP_EXPECT(c[3] != c[1]);
	KTAP_EXPECT_EQ(haccel_state_ckpt_restore(pool, c[1], a), -ENOENT);
	KTAP_EXPECT_EQ(haccel_state_ckpt_find(pool, 101, 0, &f), -ENOENT);
	KTAP_ASSERT_EQ(haccel_state_ckpt_find(pool, 100, 0, &f), 0);
	KTAP_ASSERT_EQ(haccel_state_ckpt_find(pool, 102, 0, &f), 0);
	KTAP_ASSERT_EQ(haccel_state_ckpt_find(pool, 103, 0, &f), 0);
	KTAP_ASSERT_EQ(haccel_state_ckpt_restore(pool, f, a), 0);
	KTAP_EXPECT(all_bytes(slot_mem(pool, a), 4096, 0x99));
	KTAP_ASSERT_EQ(haccel_state_ckpt_find(pool, 102, 0, &f), 0);
	KTAP_ASSERT_EQ(haccel_state_ckpt_restore(pool, f, a), 0);
	KTAP_EXPECT(all_bytes(slot_mem(pool, a), 4096, 0x42));
	KTAP_EXPECT_EQ(stats(pool).ckpt_evictions, 1);
	STATE_CHECK(pool);
	haccel_state_pool_destroy(pool);

	/* No checkpoints configured: saves are refused, even with EVICT. */
	pool = make(ctx, 1, 0);
	KTAP_ASSERT_EQ(haccel_state_slot_alloc(pool, 0, &a), 0);
	KTAP_EXPECT_EQ(haccel_state_ckpt_save(pool, a, 1, 0, HACCEL_STATE_CKPT_EVICT, &f), -ENOMEM);
	KTAP_EXPECT_EQ(haccel_state_ckpt_find(pool, 1, 0, &f), -ENOENT);
	KTAP_EXPECT_EQ(haccel_state_ckpt_restore(pool, 0, a), -EINVAL);
	KTAP_EXPECT_EQ(haccel_state_ckpt_drop(pool, 0), -EINVAL);
	STATE_CHECK(pool);
	haccel_state_pool_destroy(pool);
	haccel_close(ctx);
}

static uint8_t *ckpt_mem(struct haccel_state_pool *pool, uint32_t id)
{
	struct haccel_state_layout l;

	haccel_state_pool_layout(pool, &l);
	return (uint8_t *)l.ckpt_base + (uint64_t)(id % l.n_checkpoints) * l.slot_bytes;
}

/*
 * Speculative decoding with one checkpoint place: seq 0 saves before a
 * draft; seq 1's EVICT save takes the place. Seq 0's id is stale: its
 * restore and drop find nothing (-ENOENT) rather than seq 1's state, and
 * seq 1's checkpoint survives. The same after a drop, and ids never repeat
 * while the place is reused.
 */
static void t_stale_ids(void)
{
	struct haccel_ctx *ctx = test_ctx();
	struct haccel_state_pool *pool = make(ctx, 2, 1);
	uint32_t s0, s1, ck0, ck1, ck2, f, seen[64];

	KTAP_ASSERT_EQ(haccel_state_slot_alloc(pool, 0, &s0), 0);
	KTAP_ASSERT_EQ(haccel_state_slot_alloc(pool, 0, &s1), 0);
	memset(slot_mem(pool, s0), 0x11, 4096);
	memset(slot_mem(pool, s1), 0x22, 4096);
	KTAP_ASSERT_EQ(haccel_state_ckpt_save(pool, s0, 100, 64, 0, &ck0), 0);
	KTAP_ASSERT_EQ(haccel_state_ckpt_save(pool, s1, 200, 64, HACCEL_STATE_CKPT_EVICT, &ck1), 0);
	KTAP_EXPECT(ck1 != ck0);
	KTAP_EXPECT(ckpt_mem(pool, ck1) == ckpt_mem(pool, ck0)); /* the same place */
	KTAP_EXPECT(all_bytes(ckpt_mem(pool, ck1), 4096, 0x22));
	KTAP_EXPECT_EQ(haccel_state_ckpt_find(pool, 100, 64, &f), -ENOENT);
	KTAP_ASSERT_EQ(haccel_state_ckpt_find(pool, 200, 64, &f), 0);
	KTAP_EXPECT_EQ(f, ck1);

	memset(slot_mem(pool, s0), 0x33, 4096); /* seq 0's draft */
	KTAP_EXPECT_EQ(haccel_state_ckpt_restore(pool, ck0, s0), -ENOENT);
	KTAP_EXPECT(all_bytes(slot_mem(pool, s0), 4096, 0x33));
	KTAP_EXPECT_EQ(haccel_state_ckpt_drop(pool, ck0), -ENOENT);
	KTAP_ASSERT_EQ(haccel_state_ckpt_find(pool, 200, 64, &f), 0);
	KTAP_EXPECT_EQ(f, ck1);
	KTAP_ASSERT_EQ(haccel_state_ckpt_restore(pool, ck1, s0), 0);
	KTAP_EXPECT(all_bytes(slot_mem(pool, s0), 4096, 0x22));

	/* Overwriting keeps the id; a drop makes it stale too. */
	KTAP_ASSERT_EQ(haccel_state_ckpt_save(pool, s1, 200, 64, 0, &ck2), 0);
	KTAP_EXPECT_EQ(ck2, ck1);
	KTAP_ASSERT_EQ(haccel_state_ckpt_drop(pool, ck1), 0);
	memset(slot_mem(pool, s0), 0x55, 4096);
	KTAP_ASSERT_EQ(haccel_state_ckpt_save(pool, s0, 300, 0, 0, &ck2), 0);
	KTAP_EXPECT_EQ(haccel_state_ckpt_drop(pool, ck1), -ENOENT);
	KTAP_EXPECT_EQ(haccel_state_ckpt_restore(pool, ck1, s1), -ENOENT);
	KTAP_EXPECT(all_bytes(slot_mem(pool, s1), 4096, 0x22));
	KTAP_EXPECT_EQ(stats(pool).ckpts_used, 1);

	/* The place reused again and again: every id differs. */
	for (uint32_t i = 0; i < 64; i++) {
		KTAP_ASSERT_EQ(haccel_state_ckpt_save(pool, s0, 1000 + i, 0,
						      HACCEL_STATE_CKPT_EVICT, &seen[i]), 0);
		KTAP_EXPECT(seen[i] != ck0 && seen[i] != ck1 && seen[i] != ck2);
		for (uint32_t j = 0; j < i; j++)
			KTAP_EXPECT(seen[j] != seen[i]);
	}
	KTAP_EXPECT_EQ(stats(pool).ckpt_evictions, 65);
	STATE_CHECK(pool);
	haccel_state_pool_destroy(pool);

	/* Several places: an id names its place (id % n_checkpoints). */
	pool = make(ctx, 1, 3);
	KTAP_ASSERT_EQ(haccel_state_slot_alloc(pool, 0, &s0), 0);
	for (uint32_t i = 0; i < 3; i++) {
		memset(slot_mem(pool, s0), 0x40 + i, 4096);
		KTAP_ASSERT_EQ(haccel_state_ckpt_save(pool, s0, i, 0, 0, &seen[i]), 0);
	}
	KTAP_ASSERT_EQ(haccel_state_ckpt_drop(pool, seen[1]), 0);
	memset(slot_mem(pool, s0), 0x77, 4096);
	KTAP_ASSERT_EQ(haccel_state_ckpt_save(pool, s0, 9, 0, 0, &ck0), 0);
	KTAP_EXPECT_EQ(ck0 % 3, seen[1] % 3);
	KTAP_EXPECT(ck0 != seen[1]);
	for (uint32_t i = 0; i < 3; i++)
		KTAP_EXPECT(all_bytes(ckpt_mem(pool, i == 1 ? ck0 : seen[i]), 4096,
				      i == 1 ? 0x77 : 0x40 + i));
	KTAP_EXPECT_EQ(haccel_state_ckpt_restore(pool, seen[1], s0), -ENOENT);
	/* 3 does not divide 2^32: the last id is beyond every generation. */
	KTAP_EXPECT_EQ(haccel_state_ckpt_restore(pool, UINT32_MAX, s0), -EINVAL);
	STATE_CHECK(pool);
	haccel_state_pool_destroy(pool);
	haccel_close(ctx);
}

static void t_config(void)
{
	struct haccel_ctx *ctx = test_ctx_quiet();
	struct haccel_state_pool_config c, good;
	struct haccel_state_pool *pool;
	struct haccel_state_layout l;

	haccel_state_pool_config_init(&good);
	good.n_heads = 2;
	good.head_dk = good.head_dv = 16;
	good.n_checkpoints = 3;
	good.budget_bytes = 10 * 4096 + 100;
	KTAP_ASSERT_EQ(haccel_state_pool_create(ctx, &good, &pool), 0);
	KTAP_ASSERT_EQ(haccel_state_pool_layout(pool, &l), 0);
	KTAP_EXPECT_EQ(l.slot_bytes, 4096);
	KTAP_EXPECT_EQ(l.n_slots, 7); /* budget minus the checkpoints */
	haccel_state_pool_destroy(pool);

#define BAD(stmt, err)                                                      \
	do {                                                                \
		c = good;                                                   \
		stmt;                                                       \
		pool = (struct haccel_state_pool *)&c;                      \
		KTAP_EXPECT_EQ(haccel_state_pool_create(ctx, &c, &pool), err); \
		KTAP_EXPECT(pool == NULL);                                  \
	} while (0)
	BAD(c.flags = 1, -EINVAL);
	BAD(c.reserved = 1, -EINVAL);
	BAD(c.n_layers = 0, -EINVAL);
	BAD(c.n_heads = 0, -EINVAL);
	BAD(c.head_dk = 0, -EINVAL);
	BAD(c.head_dv = 0, -EINVAL);
	BAD(c.conv_width = 0, -EINVAL);
	BAD(c.conv_elem_bytes = 3, -EINVAL);
	BAD(c.mem = 7, -EINVAL);
	BAD(c.budget_bytes = 3 * 4096, -EINVAL); /* checkpoints leave no slot */
	BAD(c.size = 12, -EINVAL);
	BAD((c.n_heads = UINT32_MAX, c.head_dk = UINT32_MAX, c.head_dv = UINT32_MAX), -EOVERFLOW);
#undef BAD
	haccel_state_pool_destroy(NULL);
	haccel_close(ctx);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_layout),
	KTAP_CASE(t_slots),
	KTAP_CASE(t_swap),
	KTAP_CASE(t_checkpoints),
	KTAP_CASE(t_full_and_evict),
	KTAP_CASE(t_stale_ids),
	KTAP_CASE(t_config),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
