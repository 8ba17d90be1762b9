// SPDX-License-Identifier: MIT
/*
 * Randomized state pool run against a model: slot alloc/free, checkpoint
 * save/restore/find/drop with and without eviction. Each slot's and each
 * checkpoint's bytes are tagged by the model; after every step the
 * invariants are checked and every byte compared with its tag's pattern.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "pool-util.h"

#define SLOTS 6
#define CKPTS 5
#define STEPS 5000
#define NKEYS 9

static uint64_t slot_tag[SLOTS];  /* 0: not in use */
static uint64_t ck_tag[CKPTS];    /* 0: not in use */
static uint64_t ck_key[CKPTS];
static uint32_t ck_pos[CKPTS];
static uint64_t ck_age[CKPTS];    /* last save or restore, for LRU */

static void fill(uint8_t *p, uint64_t n, uint64_t tag)
{
	for (uint64_t i = 0; i < n; i += 8) {
		uint64_t v = haccel__mix64(tag + i);
		memcpy(p + i, &v, 8);
	}
}

static int matches(const uint8_t *p, uint64_t n, uint64_t tag)
{
	for (uint64_t i = 0; i < n; i += 8) {
		uint64_t v = haccel__mix64(tag + i);
		if (memcmp(p + i, &v, 8))
			return 0;
	}
	return 1;
}

static int model_find(uint64_t key, uint32_t pos)
{
	for (int c = 0; c < CKPTS; c++)
		if (ck_tag[c] && ck_key[c] == key && ck_pos[c] == pos)
			return c;
	return -1;
}

static void t_random(void)
{
	struct haccel_ctx *ctx = test_ctx();
	struct haccel_state_pool_config cfg;
	struct haccel_state_pool *pool;
	struct haccel_state_layout l;
	uint64_t next_tag = 1, evictions = 0, full = 0;

	haccel_state_pool_config_init(&cfg);
	cfg.n_layers = 2;
	cfg.n_heads = 2;
	cfg.head_dk = 8;
	cfg.head_dv = 8;
	cfg.n_slots = SLOTS;
	cfg.n_checkpoints = CKPTS;
	KTAP_ASSERT_EQ(haccel_state_pool_create(ctx, &cfg, &pool), 0);
	KTAP_ASSERT_EQ(haccel_state_pool_layout(pool, &l), 0);
	memset(slot_tag, 0, sizeof(slot_tag));
	memset(ck_tag, 0, sizeof(ck_tag));

	for (uint64_t step = 1; step <= STEPS; step++) {
		uint64_t op = ktap_rand_below(100);
		uint32_t s = (uint32_t)ktap_rand_below(SLOTS), c;
		uint8_t *sp = (uint8_t *)l.slots_base + s * l.slot_bytes;
		uint64_t key = ktap_rand_below(NKEYS);
		uint32_t pos = (uint32_t)ktap_rand_below(2) * 64;
		int ret;

		if (op < 20) { /* alloc */
			ret = haccel_state_slot_alloc(pool, 0, &c);
			int any = 0;
			for (int i = 0; i < SLOTS; i++)
				any |= !slot_tag[i];
			if (!any) {
				KTAP_ASSERT_EQ(ret, -ENOMEM);
				continue;
			}
			KTAP_ASSERT_EQ(ret, 0);
			KTAP_ASSERT(c < SLOTS && !slot_tag[c]);
			uint8_t *cp = (uint8_t *)l.slots_base + c * l.slot_bytes;
			for (uint64_t i = 0; i < l.slot_bytes; i++)
				KTAP_ASSERT_EQ(cp[i], 0);
			slot_tag[c] = next_tag++;
			fill(cp, l.slot_bytes, slot_tag[c]);
		} else if (op < 32) { /* free */
			ret = haccel_state_slot_free(pool, s);
			KTAP_ASSERT_EQ(ret, slot_tag[s] ? 0 : -ENOENT);
			slot_tag[s] = 0;
		} else if (op < 45) { /* mutate a slot, as a decode step would */
			if (!slot_tag[s])
				continue;
			slot_tag[s] = next_tag++;
			fill(sp, l.slot_bytes, slot_tag[s]);
		} else if (op < 70) { /* save */
			uint32_t flags = ktap_rand_below(2) ? HACCEL_STATE_CKPT_EVICT : 0;
			int have = model_find(key, pos), freec = -1, lru = -1;
			for (int i = 0; i < CKPTS; i++) {
				if (!ck_tag[i] && freec < 0)
					freec = i;
				if (ck_tag[i] && (lru < 0 || ck_age[i] < ck_age[lru]))
					lru = i;
			}
			ret = haccel_state_ckpt_save(pool, s, key, pos, flags, &c);
			if (!slot_tag[s]) {
				KTAP_ASSERT_EQ(ret, -ENOENT);
				continue;
			}
			if (have < 0 && freec < 0 && !flags) {
				KTAP_ASSERT_EQ(ret, -ENOMEM);
				full++;
				continue;
			}
			KTAP_ASSERT_EQ(ret, 0);
			if (have >= 0) {
				KTAP_ASSERT_EQ(c, have);
			} else if (freec < 0) {
				KTAP_ASSERT_EQ(c, lru); /* the least recently used went */
				evictions++;
			}
			ck_tag[c] = slot_tag[s];
			ck_key[c] = key;
			ck_pos[c] = pos;
			ck_age[c] = step;
		} else if (op < 85) { /* find + restore */
			int have = model_find(key, pos);
			ret = haccel_state_ckpt_find(pool, key, pos, &c);
			if (have < 0) {
				KTAP_ASSERT_EQ(ret, -ENOENT);
				continue;
			}
			KTAP_ASSERT_EQ(ret, 0);
			KTAP_ASSERT_EQ(c, have);
			ret = haccel_state_ckpt_restore(pool, c, s);
			if (!slot_tag[s]) {
				KTAP_ASSERT_EQ(ret, -ENOENT);
				continue;
			}
			KTAP_ASSERT_EQ(ret, 0);
			slot_tag[s] = ck_tag[c];
			ck_age[c] = step;
		} else { /* drop */
			c = (uint32_t)ktap_rand_below(CKPTS);
			ret = haccel_state_ckpt_drop(pool, c);
			KTAP_ASSERT_EQ(ret, ck_tag[c] ? 0 : -ENOENT);
			ck_tag[c] = 0;
		}
		STATE_CHECK(pool);
		KTAP_ASSERT_EQ(ktap_failures(), 0);
		for (int i = 0; i < SLOTS; i++)
			if (slot_tag[i] && !matches((uint8_t *)l.slots_base + i * l.slot_bytes,
						    l.slot_bytes, slot_tag[i])) {
				ktap_fail_at(__FILE__, __LINE__, "step %llu: slot %d bytes wrong",
					     (unsigned long long)step, i);
				ktap_end();
			}
		for (int i = 0; i < CKPTS; i++)
			if (ck_tag[i] && !matches((uint8_t *)l.ckpt_base + i * l.slot_bytes,
						  l.slot_bytes, ck_tag[i])) {
				ktap_fail_at(__FILE__, __LINE__, "step %llu: checkpoint %d bytes wrong",
					     (unsigned long long)step, i);
				ktap_end();
			}
	}
	struct haccel_state_stats st;
	KTAP_ASSERT_EQ(haccel_state_pool_stats(pool, &st), 0);
	KTAP_EXPECT_EQ(st.ckpt_evictions, evictions);
	ktap_diag("%llu saves, %llu restores, %llu evictions, %llu saves refused (full)",
		  (unsigned long long)st.saves, (unsigned long long)st.restores,
		  (unsigned long long)evictions, (unsigned long long)full);
	KTAP_EXPECT(evictions > 0 && full > 0 && st.restores > 0);
	haccel_state_pool_destroy(pool);
	haccel_close(ctx);
}

static const struct ktap_case cases[] = {
	KTAP_CASE_TIMEOUT(t_random, 120),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
