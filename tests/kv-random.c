// SPDX-License-Identifier: MIT
/*
 * Randomized KV pool run against a model: creates (with prompts that share
 * prefixes), appends, forks, truncates, frees, raw gets and puts, cache
 * resets. After every step the pool's invariants are checked, and the bytes
 * of every token of every sequence are compared with what a model writer
 * put there: a token's KV is a function of its whole prefix, as real KV is,
 * so any wrong reuse, lost copy or stray write shows up. Run with real keys
 * and with keys narrowed to 2 bits (nearly every lookup collides).
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "pool-util.h"

#define P 8
#define PAGES 64
#define LAYERS 2
#define MAX_SEQS 12
#define MAX_TOK 160
#define STEPS 6000

struct mseq {
	int live;
	uint32_t id;
	uint32_t n;
	int32_t tok[MAX_TOK];
	uint64_t h[MAX_TOK]; /* h[i]: hash of tok[0..i] */
};

static struct mseq seqs[MAX_SEQS];
static uint32_t held[PAGES * 2];
static uint32_t n_held;
/* Past prompts to draw shared prefixes from. */
static int32_t history[8][MAX_TOK];
static uint32_t history_n[8];

static uint64_t prefix_hash(uint64_t prev, int32_t t)
{
	return haccel__mix64(prev ^ ((uint64_t)(uint32_t)t * 0x100000001b3ull));
}

static void pattern(uint64_t h, uint32_t region, uint8_t *out, uint32_t n)
{
	uint64_t x = haccel__mix64(h + region);

	for (uint32_t i = 0; i < n; i++)
		out[i] = (uint8_t)(x >> (8 * (i % 8))) ^ (uint8_t)i;
}

/* The model writer: put the KV of tokens [from, to) of s where slots say. */
static void write_kv(struct haccel_kv_pool *pool, const struct mseq *s,
		     uint32_t from, const int64_t *slots, uint32_t to)
{
	for (uint32_t l = 0; l < LAYERS; l++)
		for (uint32_t st = 0; st < 2; st++) {
			struct haccel_kv_region r;
			haccel_kv_pool_region(pool, l, st, &r);
			for (uint32_t i = from; i < to; i++)
				pattern(s->h[i], l * 2 + st,
					(uint8_t *)r.base + slots[i - from] * r.bytes_per_token,
					r.bytes_per_token);
		}
}

/* Compare every token of every live sequence with the model. */
static void verify_all(struct haccel_kv_pool *pool, int step)
{
	uint8_t want[16];

	for (int k = 0; k < MAX_SEQS; k++) {
		const struct mseq *s = &seqs[k];
		const uint32_t *bt;
		uint32_t np, nt;

		if (!s->live)
			continue;
		KTAP_ASSERT_EQ(haccel_kv_seq_block_table(pool, s->id, &bt, &np, &nt), 0);
		KTAP_ASSERT_EQ(nt, s->n);
		for (uint32_t l = 0; l < LAYERS; l++)
			for (uint32_t st = 0; st < 2; st++) {
				struct haccel_kv_region r;
				haccel_kv_pool_region(pool, l, st, &r);
				for (uint32_t i = 0; i < s->n; i++) {
					int64_t slot = (int64_t)bt[i / P] * P + i % P;
					pattern(s->h[i], l * 2 + st, want, r.bytes_per_token);
					if (memcmp((uint8_t *)r.base + slot * r.bytes_per_token,
						   want, r.bytes_per_token)) {
						ktap_fail_at(__FILE__, __LINE__,
							     "step %d: seq %u token %u layer %u stream %u: wrong KV bytes",
							     step, s->id, i, l, st);
						ktap_end();
					}
				}
			}
	}
}

static void random_tokens(int32_t *t, uint32_t n)
{
	/* A small alphabet makes equal pages (twins) common. */
	for (uint32_t i = 0; i < n; i++)
		t[i] = (int32_t)ktap_rand_below(3);
}

static void set_tokens(struct mseq *s, uint32_t from, const int32_t *t, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		s->tok[from + i] = t[i];
		s->h[from + i] = prefix_hash(from + i ? s->h[from + i - 1] : 0, t[i]);
	}
}

static int free_slot(void)
{
	for (int k = 0; k < MAX_SEQS; k++)
		if (!seqs[k].live)
			return k;
	return -1;
}

static int pick_live(void)
{
	int idx[MAX_SEQS], n = 0;

	for (int k = 0; k < MAX_SEQS; k++)
		if (seqs[k].live)
			idx[n++] = k;
	return n ? idx[ktap_rand_below(n)] : -1;
}

static uint32_t available(struct haccel_kv_pool *pool)
{
	struct haccel_kv_stats st;

	haccel_kv_pool_stats(pool, &st);
	return (uint32_t)(st.pages_free + st.pages_evictable);
}

/* Append n tokens to s, expecting -ENOMEM exactly when pages lack. */
static void do_append(struct haccel_kv_pool *pool, struct mseq *s, const int32_t *t,
		      uint32_t n, int step)
{
	int64_t slots[MAX_TOK];
	uint32_t need;
	int ret;

	KTAP_ASSERT_EQ(haccel_kv_seq_pages_needed(pool, s->id, n, &need), 0);
	uint32_t avail = available(pool);
	ret = haccel_kv_seq_append(pool, s->id, t, n, slots);
	if (need > avail) {
		KTAP_ASSERT_EQ(ret, -ENOMEM);
		return;
	}
	if (ret)
		ktap_diag("step %d: append %u to seq %u: %d", step, n, s->id, ret);
	KTAP_ASSERT_EQ(ret, 0);
	KTAP_ASSERT_EQ(available(pool), avail - need);
	set_tokens(s, s->n, t, n);
	write_kv(pool, s, s->n, slots, s->n + n);
	s->n += n;
}

static void run(uint64_t key_mask)
{
	struct haccel_ctx *ctx = test_ctx();
	struct haccel_kv_pool *pool = small_kv(ctx, P, PAGES, LAYERS, MAX_SEQS, MAX_TOK);
	int32_t t[MAX_TOK];
	uint64_t hits = 0, reused = 0, nomem = 0;

	haccel__kv_pool_set_key_mask(pool, key_mask);
	memset(seqs, 0, sizeof(seqs));
	n_held = 0;
	memset(history_n, 0, sizeof(history_n));

	for (int step = 0; step < STEPS; step++) {
		uint64_t op = ktap_rand_below(100);
		int k;

		if (op < 22) { /* create, often from an earlier prompt's prefix */
			k = free_slot();
			if (k < 0)
				continue;
			struct mseq *s = &seqs[k];
			uint32_t n = 1 + (uint32_t)ktap_rand_below(MAX_TOK / 2), r, h;

			h = (uint32_t)ktap_rand_below(8);
			if (history_n[h] && ktap_rand_below(3)) {
				uint32_t keep = (uint32_t)ktap_rand_below(history_n[h] + 1);
				memcpy(t, history[h], keep * sizeof(*t));
				random_tokens(t + keep, n > keep ? n - keep : 0);
				n = n > keep ? n : keep;
			} else {
				random_tokens(t, n);
			}
			memcpy(history[h], t, n * sizeof(*t));
			history_n[h] = n;
			KTAP_ASSERT_EQ(haccel_kv_seq_create(pool, t, n, &s->id, &r), 0);
			KTAP_ASSERT(r % P == 0 && r <= n);
			s->live = 1;
			s->n = 0;
			set_tokens(s, 0, t, r);
			s->n = r;
			hits += r > 0;
			reused += r;
			if (n > r) {
				uint32_t before = s->n;
				do_append(pool, s, t + r, n - r, step);
				nomem += s->n == before;
			}
		} else if (op < 55) { /* append */
			k = pick_live();
			if (k < 0)
				continue;
			struct mseq *s = &seqs[k];
			uint32_t room = MAX_TOK - s->n;
			if (!room)
				continue;
			uint32_t n = 1 + (uint32_t)ktap_rand_below(room < 2 * P ? room : 2 * P);
			random_tokens(t, n);
			uint32_t before = s->n;
			do_append(pool, s, t, n, step);
			nomem += s->n == before;
		} else if (op < 65) { /* fork */
			k = pick_live();
			int c = free_slot();
			if (k < 0 || c < 0)
				continue;
			KTAP_ASSERT_EQ(haccel_kv_seq_fork(pool, seqs[k].id, &seqs[c].id), 0);
			uint32_t id = seqs[c].id;
			seqs[c] = seqs[k];
			seqs[c].id = id;
		} else if (op < 73) { /* truncate */
			k = pick_live();
			if (k < 0)
				continue;
			uint32_t n = (uint32_t)ktap_rand_below(seqs[k].n + 1);
			KTAP_ASSERT_EQ(haccel_kv_seq_truncate(pool, seqs[k].id, n), 0);
			seqs[k].n = n;
		} else if (op < 88) { /* free */
			k = pick_live();
			if (k < 0)
				continue;
			KTAP_ASSERT_EQ(haccel_kv_seq_free(pool, seqs[k].id), 0);
			seqs[k].live = 0;
		} else if (op < 94) { /* raw get */
			uint32_t n = (uint32_t)ktap_rand_below(4), avail = available(pool);
			int ret = haccel_kv_pages_get(pool, n, held + n_held);
			if (n > avail) {
				KTAP_ASSERT_EQ(ret, -ENOMEM);
			} else {
				KTAP_ASSERT_EQ(ret, 0);
				n_held += n;
			}
		} else if (op < 99) { /* raw put */
			uint32_t n = n_held ? (uint32_t)ktap_rand_below(n_held) + 1 : 0;
			KTAP_ASSERT_EQ(haccel_kv_pages_put(pool, held + n_held - n, n), 0);
			n_held -= n;
		} else {
			KTAP_ASSERT(haccel_kv_prefix_cache_reset(pool) >= 0);
		}
		KV_CHECK(pool);
		if (ktap_failures())
			ktap_diag("after step %d (op %llu)", step, (unsigned long long)op);
		KTAP_ASSERT_EQ(ktap_failures(), 0);
		verify_all(pool, step);
	}
	struct haccel_kv_stats st;
	KTAP_ASSERT_EQ(haccel_kv_pool_stats(pool, &st), 0);
	ktap_diag("key mask %#llx: %llu prefix hits (%llu tokens), %llu evictions, %llu CoW copies, %llu appends refused for lack of pages",
		  (unsigned long long)key_mask, (unsigned long long)hits,
		  (unsigned long long)reused, (unsigned long long)st.evictions,
		  (unsigned long long)st.cow_copies, (unsigned long long)nomem);
	/* The run must have exercised what it claims to. */
	KTAP_EXPECT(hits > 0 && st.evictions > 0 && st.cow_copies > 0 && nomem > 0);
	for (int k = 0; k < MAX_SEQS; k++)
		if (seqs[k].live)
			KTAP_ASSERT_EQ(haccel_kv_seq_free(pool, seqs[k].id), 0);
	KTAP_ASSERT_EQ(haccel_kv_pages_put(pool, held, n_held), 0);
	KTAP_ASSERT_EQ(haccel_kv_pool_stats(pool, &st), 0);
	KTAP_EXPECT_EQ(st.pages_used, 0);
	KTAP_EXPECT_EQ(st.seqs_active, 0);
	KV_CHECK(pool);
	haccel_kv_pool_destroy(pool);
	haccel_close(ctx);
}

static void t_random_full_keys(void)
{
	run(~0ull);
}

static void t_random_colliding_keys(void)
{
	run(0x3);
}

static const struct ktap_case cases[] = {
	KTAP_CASE_TIMEOUT(t_random_full_keys, 120),
	KTAP_CASE_TIMEOUT(t_random_colliding_keys, 120),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
