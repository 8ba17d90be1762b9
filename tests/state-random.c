// SPDX-License-Identifier: MIT
/*
 * Randomized state pool run against a reference model that predicts everything.
 *
 * The model is plain arrays: slots and checkpoints with their in-use flags,
 * the two free stacks (LIFO; id 0 pops first on a fresh pool), the
 * checkpoint LRU list (oldest first, removal by shifting; saves and restores
 * refresh, finds do not) and a linear search for (key, position) instead of
 * a hash table. Every byte of a slot or checkpoint carries a model tag (its
 * pattern, all zeros, or unknown before first written).
 *
 * Checkpoint ids are predicted too: gen * n_checkpoints + place, the place's
 * generation advancing each time it is released. Restores and drops use
 * ids handed out earlier (live or stale: a stale one must find nothing),
 * small ids, and ids beyond every generation.
 *
 * Operations: slot alloc (zeroed or NOZERO) and free, state updates, saves
 * with and without EVICT, finds, restores, drops, swaps out and in, and
 * every documented refusal (-EINVAL, -ENOENT, -ENOMEM). Each call's result
 * and returned id is compared when made; after EVERY step, every counter of
 * haccel_state_pool_stats, every checkpoint's (key, position) lookup, the
 * invariant check and every byte of every slot and checkpoint are compared.
 * HACCEL_TEST_STEPS overrides the number of steps per case.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "pool-util.h"

#define MAX_SLOTS 8
#define MAX_CKPTS 8
#define NKEYS 6
#define N_ISSUED 16
#define DEFAULT_STEPS 20000
#define TAG_ZERO 0ull
#define TAG_UNKNOWN UINT64_MAX

struct mslot {
	int used;
	uint64_t tag; /* what its bytes hold, used or not */
};

struct mckpt {
	int used;
	uint64_t key;
	uint32_t pos;
	uint64_t tag;
	uint32_t gen;  /* the place's generation: part of the id */
};

struct model {
	uint32_t n_slots, n_ckpts;
	uint64_t gens; /* generations an id can carry: 2^32 / n_ckpts */
	struct mslot slot[MAX_SLOTS];
	uint32_t slot_free[MAX_SLOTS], n_slot_free; /* top: last */
	struct mckpt ck[MAX_CKPTS];
	uint32_t ck_free[MAX_CKPTS], n_ck_free;     /* top: last */
	uint32_t lru[MAX_CKPTS], n_lru;             /* lru[0]: least recently used */
	uint64_t saves, restores, drops, evictions;
	uint64_t host_tag[MAX_SLOTS];               /* the swap buffer's slots */
	/* What the run exercised. */
	uint64_t overwrites, nomem, einval, enoent, swaps, nozero, stale, swap_twice;
};

static struct model M;
static struct haccel_state_pool *pool;
static struct haccel_state_layout lay;
static uint8_t *host;
static uint64_t step_no, next_tag;
static uint32_t issued[N_ISSUED], n_issued; /* ids saves returned, some stale */
static char op_desc[160];

static const uint64_t keys[NKEYS] = {
	0, 1, 0x8000000000000000ull, 0xdeadbeefcafef00dull, UINT64_MAX, 42,
};
static const uint32_t positions[] = { 0, 64, 128, 7 };

#define MEQ(got, want)                                                        \
	do {                                                                  \
		long long g_ = (long long)(got), w_ = (long long)(want);      \
		if (g_ != w_) {                                               \
			ktap_fail_at(__FILE__, __LINE__,                      \
				     "step %llu (%s): %s = %lld, model: %s = %lld (replay: HACCEL_TEST_SEED=%llu)", \
				     (unsigned long long)step_no, op_desc, #got, g_, \
				     #want, w_, (unsigned long long)ktap_seed()); \
			ktap_end();                                           \
		}                                                             \
	} while (0)

/* ------------------------------------------------------------------------ */
/* The reference model                                                      */

static void m_init(uint32_t n_slots, uint32_t n_ckpts)
{
	memset(&M, 0, sizeof(M));
	M.n_slots = n_slots;
	M.n_ckpts = n_ckpts;
	M.gens = n_ckpts ? (1ull << 32) / n_ckpts : 1;
	for (uint32_t i = 0; i < n_slots; i++) {
		M.slot_free[i] = n_slots - 1 - i;
		M.slot[i].tag = TAG_UNKNOWN;
	}
	M.n_slot_free = n_slots;
	for (uint32_t i = 0; i < n_ckpts; i++)
		M.ck_free[i] = n_ckpts - 1 - i;
	M.n_ck_free = n_ckpts;
	for (uint32_t i = 0; i < MAX_SLOTS; i++)
		M.host_tag[i] = TAG_UNKNOWN;
}

static void m_lru_remove(uint32_t c)
{
	uint32_t i = 0;

	while (i < M.n_lru && M.lru[i] != c)
		i++;
	KTAP_ASSERT(i < M.n_lru); /* a model bug, not a pool one */
	for (; i + 1 < M.n_lru; i++)
		M.lru[i] = M.lru[i + 1];
	M.n_lru--;
}

static int m_find(uint64_t key, uint32_t pos)
{
	for (uint32_t c = 0; c < M.n_ckpts; c++)
		if (M.ck[c].used && M.ck[c].key == key && M.ck[c].pos == pos)
			return (int)c;
	return -1;
}

static int m_slot_check(uint32_t s)
{
	if (s >= M.n_slots)
		return -EINVAL;
	return M.slot[s].used ? 0 : -ENOENT;
}

static uint32_t m_id(uint32_t c)
{
	return (uint32_t)((uint64_t)M.ck[c].gen * M.n_ckpts + c);
}

/* The place of the live checkpoint with this id. */
static int m_ck_check(uint32_t id, uint32_t *c)
{
	if (!M.n_ckpts || id / M.n_ckpts >= M.gens)
		return -EINVAL;
	*c = id % M.n_ckpts;
	return M.ck[*c].used && M.ck[*c].gen == id / M.n_ckpts ? 0 : -ENOENT;
}

static int m_alloc(uint32_t flags, uint32_t *s)
{
	if (flags & ~HACCEL_STATE_SLOT_NOZERO)
		return -EINVAL;
	if (!M.n_slot_free)
		return -ENOMEM;
	*s = M.slot_free[--M.n_slot_free];
	M.slot[*s].used = 1;
	if (!(flags & HACCEL_STATE_SLOT_NOZERO))
		M.slot[*s].tag = TAG_ZERO;
	return 0;
}

static int m_slot_free(uint32_t s)
{
	int ret = m_slot_check(s);

	if (ret)
		return ret;
	M.slot[s].used = 0; /* its bytes stay as they were */
	M.slot_free[M.n_slot_free++] = s;
	return 0;
}

static void m_ck_release(uint32_t c)
{
	m_lru_remove(c);
	M.ck[c].used = 0;
	M.ck[c].gen = (uint32_t)((M.ck[c].gen + 1ull) % M.gens);
	M.ck_free[M.n_ck_free++] = c;
}

static int m_save(uint32_t s, uint64_t key, uint32_t pos, uint32_t flags,
		  uint32_t *out)
{
	int c, ret = m_slot_check(s);

	if (ret)
		return ret;
	if (flags & ~HACCEL_STATE_CKPT_EVICT)
		return -EINVAL;
	c = m_find(key, pos);
	if (c >= 0) {
		m_lru_remove((uint32_t)c);
		M.overwrites++;
	} else {
		if (!M.n_ck_free) {
			if (!(flags & HACCEL_STATE_CKPT_EVICT) || !M.n_lru)
				return -ENOMEM;
			m_ck_release(M.lru[0]);
			M.evictions++;
		}
		c = (int)M.ck_free[--M.n_ck_free];
		M.ck[c].used = 1;
		M.ck[c].key = key;
		M.ck[c].pos = pos;
	}
	M.lru[M.n_lru++] = (uint32_t)c;
	M.ck[c].tag = M.slot[s].tag;
	M.saves++;
	*out = m_id((uint32_t)c);
	return 0;
}

static int m_restore(uint32_t id, uint32_t s)
{
	uint32_t c = 0;
	int ret = m_ck_check(id, &c);

	if (ret)
		return ret;
	ret = m_slot_check(s);
	if (ret)
		return ret;
	M.slot[s].tag = M.ck[c].tag;
	m_lru_remove(c);
	M.lru[M.n_lru++] = c;
	M.restores++;
	return 0;
}

static int m_drop(uint32_t id)
{
	uint32_t c = 0;
	int ret = m_ck_check(id, &c);

	if (ret)
		return ret;
	m_ck_release(c);
	M.drops++;
	return 0;
}

/* Swaps check every slot and the buffer size before copying anything. */
static int m_swap(const uint32_t *slots, uint32_t n, uint64_t host_bytes,
		  int out)
{
	if (host_bytes / lay.slot_bytes < n)
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++) {
		if (m_slot_check(slots[i]))
			return -EINVAL;
		/* swap-in: a slot listed twice would hold either copy */
		for (uint32_t j = 0; !out && j < i; j++)
			if (slots[j] == slots[i]) {
				M.swap_twice++;
				return -EINVAL;
			}
	}
	for (uint32_t i = 0; i < n; i++) {
		if (out)
			M.host_tag[i] = M.slot[slots[i]].tag;
		else
			M.slot[slots[i]].tag = M.host_tag[i];
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Bytes                                                                    */

static void fill(uint8_t *p, uint64_t n, uint64_t tag)
{
	for (uint64_t i = 0; i < n; i += 8) {
		uint64_t v = tag == TAG_ZERO ? 0 : haccel__mix64(tag + i);

		memcpy(p + i, &v, 8);
	}
}

static int matches(const uint8_t *p, uint64_t n, uint64_t tag)
{
	if (tag == TAG_UNKNOWN)
		return 1;
	for (uint64_t i = 0; i < n; i += 8) {
		uint64_t v = tag == TAG_ZERO ? 0 : haccel__mix64(tag + i);

		if (memcmp(p + i, &v, 8))
			return 0;
	}
	return 1;
}

static uint8_t *slot_ptr(uint32_t s)
{
	return (uint8_t *)lay.slots_base + (uint64_t)s * lay.slot_bytes;
}

static uint8_t *ck_ptr(uint32_t c)
{
	return (uint8_t *)lay.ckpt_base + (uint64_t)c * lay.slot_bytes;
}

/* ------------------------------------------------------------------------ */
/* Comparing pool and model                                                 */

static void compare_all(void)
{
	struct haccel_state_stats g;
	char why[256] = "";
	uint64_t used = 0;

	KTAP_ASSERT_EQ(haccel_state_pool_stats(pool, &g), 0);
	for (uint32_t s = 0; s < M.n_slots; s++)
		used += M.slot[s].used;
	MEQ(g.slots_total, M.n_slots);
	MEQ(g.slots_used, used);
	MEQ(g.slots_free, M.n_slots - used);
	used = 0;
	for (uint32_t c = 0; c < M.n_ckpts; c++)
		used += M.ck[c].used;
	MEQ(g.ckpts_total, M.n_ckpts);
	MEQ(g.ckpts_used, used);
	MEQ(g.ckpts_free, M.n_ckpts - used);
	MEQ(g.slot_bytes, lay.slot_bytes);
	MEQ(g.bytes_total, (uint64_t)(M.n_slots + M.n_ckpts) * lay.slot_bytes);
	MEQ(g.saves, M.saves);
	MEQ(g.restores, M.restores);
	MEQ(g.drops, M.drops);
	MEQ(g.ckpt_evictions, M.evictions);

	for (uint32_t c = 0; c < M.n_ckpts; c++) {
		uint32_t got = UINT32_MAX;

		if (!M.ck[c].used)
			continue;
		MEQ(haccel_state_ckpt_find(pool, M.ck[c].key, M.ck[c].pos, &got), 0);
		MEQ(got, m_id(c));
	}

	if (haccel__state_pool_check(pool, why, sizeof(why))) {
		ktap_fail_at(__FILE__, __LINE__, "step %llu (%s): state pool check: %s",
			     (unsigned long long)step_no, op_desc, why);
		ktap_end();
	}
	/* Free slots too: nothing may write where no one owns. */
	for (uint32_t s = 0; s < M.n_slots; s++)
		if (!matches(slot_ptr(s), lay.slot_bytes, M.slot[s].tag)) {
			ktap_fail_at(__FILE__, __LINE__, "step %llu (%s): slot %u bytes wrong",
				     (unsigned long long)step_no, op_desc, s);
			ktap_end();
		}
	for (uint32_t c = 0; c < M.n_ckpts; c++)
		if (M.ck[c].used && !matches(ck_ptr(c), lay.slot_bytes, M.ck[c].tag)) {
			ktap_fail_at(__FILE__, __LINE__, "step %llu (%s): checkpoint %u bytes wrong",
				     (unsigned long long)step_no, op_desc, c);
			ktap_end();
		}
}

/* ------------------------------------------------------------------------ */
/* Operations                                                               */

/* A slot id: mostly in range, sometimes one past the end. */
static uint32_t any_slot(void)
{
	return (uint32_t)ktap_rand_below(M.n_slots + (ktap_rand_below(10) == 0));
}

/* A checkpoint id: one a save returned (live or stale), a small one (a
 * place's first generation, or one past), or anything at all. */
static uint32_t any_ckpt(void)
{
	switch (ktap_rand_below(10)) {
	case 0:
		return UINT32_MAX;
	case 1:
		return (uint32_t)ktap_rand_below(1ull << 32);
	case 2:
	case 3:
	case 4:
	case 5:
		if (n_issued)
			return issued[ktap_rand_below(n_issued)];
		/* fall through */
	default:
		return (uint32_t)ktap_rand_below(M.n_ckpts +
						 (!M.n_ckpts || ktap_rand_below(10) == 0));
	}
}

/* Remember an id a save returned, to try it again once it may be stale. */
static void remember(uint32_t id)
{
	if (n_issued < N_ISSUED)
		issued[n_issued++] = id;
	else
		issued[ktap_rand_below(N_ISSUED)] = id;
}

/* Whether id was handed out once but names no live checkpoint now. */
static int stale(uint32_t id)
{
	uint32_t c;

	if (m_ck_check(id, &c) != -ENOENT)
		return 0;
	for (uint32_t i = 0; i < n_issued; i++)
		if (issued[i] == id)
			return 1;
	return 0;
}

static void count(int rm)
{
	M.nomem += rm == -ENOMEM;
	M.einval += rm == -EINVAL;
	M.enoent += rm == -ENOENT;
}

static void op_alloc(void)
{
	uint32_t flags = ktap_rand_below(3) ? 0 : HACCEL_STATE_SLOT_NOZERO;
	uint32_t s = UINT32_MAX, ms = 0;
	int rp, rm;

	if (ktap_rand_below(20) == 0)
		flags = 2; /* unknown flag */
	snprintf(op_desc, sizeof(op_desc), "alloc flags %u", flags);
	rp = haccel_state_slot_alloc(pool, flags, &s);
	rm = m_alloc(flags, &ms);
	MEQ(rp, rm);
	count(rm);
	if (!rm) {
		MEQ(s, ms);
		M.nozero += flags != 0;
	}
}

static void op_free(void)
{
	uint32_t s = any_slot();
	int rm = m_slot_free(s);

	snprintf(op_desc, sizeof(op_desc), "free slot %u", s);
	MEQ(haccel_state_slot_free(pool, s), rm);
	count(rm);
}

/* A decode step writes new state into a slot in use. */
static void op_update(void)
{
	uint32_t s = (uint32_t)ktap_rand_below(M.n_slots);

	if (!M.slot[s].used)
		return;
	snprintf(op_desc, sizeof(op_desc), "update slot %u", s);
	M.slot[s].tag = next_tag++;
	fill(slot_ptr(s), lay.slot_bytes, M.slot[s].tag);
}

static void op_save(void)
{
	uint32_t s = any_slot(), pos = positions[ktap_rand_below(4)];
	uint64_t key = keys[ktap_rand_below(NKEYS)];
	uint32_t flags = ktap_rand_below(2) ? HACCEL_STATE_CKPT_EVICT : 0;
	uint32_t c = UINT32_MAX, mc = 0;
	int rp, rm;

	if (ktap_rand_below(20) == 0)
		flags = 2; /* unknown flag */
	snprintf(op_desc, sizeof(op_desc), "save slot %u as (%#llx, %u) flags %u", s,
		 (unsigned long long)key, pos, flags);
	rp = haccel_state_ckpt_save(pool, s, key, pos, flags, &c);
	rm = m_save(s, key, pos, flags, &mc);
	MEQ(rp, rm);
	count(rm);
	if (!rm) {
		MEQ(c, mc);
		remember(c);
	}
}

static void op_find_restore(void)
{
	uint32_t s = any_slot(), pos = positions[ktap_rand_below(4)];
	uint64_t key = keys[ktap_rand_below(NKEYS)];
	uint32_t c = UINT32_MAX;
	int want = m_find(key, pos), rm;

	snprintf(op_desc, sizeof(op_desc), "find (%#llx, %u)", (unsigned long long)key,
		 pos);
	MEQ(haccel_state_ckpt_find(pool, key, pos, &c), want >= 0 ? 0 : -ENOENT);
	if (want >= 0)
		MEQ(c, m_id((uint32_t)want));
	else
		c = any_ckpt(); /* restore from whatever id, in use, stale or not */
	if (ktap_rand_below(4) == 0)
		return; /* found, not restored: no LRU refresh */
	snprintf(op_desc, sizeof(op_desc), "restore checkpoint %u into slot %u", c, s);
	M.stale += stale(c) && !m_slot_check(s);
	rm = m_restore(c, s);
	MEQ(haccel_state_ckpt_restore(pool, c, s), rm);
	count(rm);
}

static void op_drop(void)
{
	uint32_t c = any_ckpt();
	int rm;

	snprintf(op_desc, sizeof(op_desc), "drop checkpoint %u", c);
	M.stale += stale(c);
	rm = m_drop(c);
	MEQ(haccel_state_ckpt_drop(pool, c), rm);
	count(rm);
}

static void op_swap(void)
{
	uint32_t list[MAX_SLOTS], n = 0;
	uint64_t bytes;
	int out = (int)ktap_rand_below(2), rm;

	for (uint32_t s = 0; s < M.n_slots; s++)
		if (M.slot[s].used && ktap_rand_below(2))
			list[n++] = s;
	if (n < MAX_SLOTS && ktap_rand_below(8) == 0)
		list[n++] = any_slot(); /* maybe not in use, or out of range */
	if (n && n < MAX_SLOTS && ktap_rand_below(8) == 0) {
		list[n] = list[ktap_rand_below(n)]; /* listed twice */
		n++;
	}
	/* Swap in order reversed now and then: slot i of the buffer goes to list[i]. */
	if (n > 1 && ktap_rand_below(2)) {
		uint32_t x = list[0];

		list[0] = list[n - 1];
		list[n - 1] = x;
	}
	bytes = (uint64_t)n * lay.slot_bytes;
	if (n && ktap_rand_below(10) == 0)
		bytes--; /* one byte short */
	snprintf(op_desc, sizeof(op_desc), "swap %s %u slots", out ? "out" : "in", n);
	rm = m_swap(list, n, bytes, out);
	if (out)
		MEQ(haccel_state_slots_swap_out(pool, list, n, host, bytes), rm);
	else
		MEQ(haccel_state_slots_swap_in(pool, list, n, host, bytes), rm);
	count(rm);
	M.swaps += !rm && n;
}

static void run(uint32_t n_slots, uint32_t n_ckpts)
{
	struct haccel_ctx *ctx = test_ctx_quiet();
	struct haccel_state_pool_config cfg;
	unsigned long steps = test_steps(DEFAULT_STEPS);

	KTAP_ASSERT(n_slots <= MAX_SLOTS && n_ckpts <= MAX_CKPTS);
	haccel_state_pool_config_init(&cfg);
	cfg.n_layers = 2;
	cfg.n_heads = 2;
	cfg.head_dk = 8;
	cfg.head_dv = 8;
	cfg.n_slots = n_slots;
	cfg.n_checkpoints = n_ckpts;
	KTAP_ASSERT_EQ(haccel_state_pool_create(ctx, &cfg, &pool), 0);
	KTAP_ASSERT_EQ(haccel_state_pool_layout(pool, &lay), 0);
	KTAP_ASSERT_EQ(lay.slot_bytes % 8, 0);
	host = malloc(MAX_SLOTS * lay.slot_bytes);
	KTAP_ASSERT(host != NULL);
	m_init(n_slots, n_ckpts);
	n_issued = 0;
	next_tag = 1;
	step_no = 0;
	snprintf(op_desc, sizeof(op_desc), "fresh pool");
	compare_all();

	for (step_no = 1; step_no <= steps; step_no++) {
		uint64_t op = ktap_rand_below(100);

		snprintf(op_desc, sizeof(op_desc), "op %llu skipped",
			 (unsigned long long)op);
		if (op < 15)
			op_alloc();
		else if (op < 27)
			op_free();
		else if (op < 40)
			op_update();
		else if (op < 65)
			op_save();
		else if (op < 82)
			op_find_restore();
		else if (op < 92)
			op_drop();
		else
			op_swap();
		compare_all();
	}

	ktap_diag("%u slots, %u checkpoints, %lu steps: %llu saves (%llu overwrites), %llu restores, %llu drops, %llu evictions, %llu swaps, %llu NOZERO allocs",
		  n_slots, n_ckpts, steps, (unsigned long long)M.saves,
		  (unsigned long long)M.overwrites, (unsigned long long)M.restores,
		  (unsigned long long)M.drops, (unsigned long long)M.evictions,
		  (unsigned long long)M.swaps, (unsigned long long)M.nozero);
	ktap_diag("refused: %llu -ENOMEM, %llu -EINVAL (%llu swap-ins listing a slot twice), %llu -ENOENT (%llu stale ids)",
		  (unsigned long long)M.nomem, (unsigned long long)M.einval,
		  (unsigned long long)M.swap_twice, (unsigned long long)M.enoent,
		  (unsigned long long)M.stale);
	/* The run must have exercised what it claims to. */
	if (steps >= DEFAULT_STEPS) {
		KTAP_EXPECT(M.nomem > 0 && M.einval > 0 && M.enoent > 0 && M.swaps > 0 &&
			    M.swap_twice > 0);
		if (n_ckpts)
			KTAP_EXPECT(M.saves > 0 && M.restores > 0 && M.drops > 0 &&
				    M.overwrites > 0 && M.stale > 0);
		if (n_ckpts && n_ckpts < NKEYS * 4)
			KTAP_EXPECT(M.evictions > 0);
	}
	free(host);
	haccel_state_pool_destroy(pool);
	pool = NULL;
	haccel_close(ctx);
}

static void t_random(void)
{
	run(6, 5);
}

static void t_random_one_checkpoint(void)
{
	run(3, 1);
}

static void t_random_no_checkpoints(void)
{
	run(4, 0);
}

static const struct ktap_case cases[] = {
	KTAP_CASE_TIMEOUT(t_random, 120),
	KTAP_CASE_TIMEOUT(t_random_one_checkpoint, 120),
	KTAP_CASE_TIMEOUT(t_random_no_checkpoints, 120),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
