// SPDX-License-Identifier: MIT
/*
 * Randomized KV pool run against a reference model that predicts everything.
 *
 * The model is deliberately naive: plain arrays for the pages, the free stack
 * and the LRU list (oldest first, removal by shifting), and no hash table at
 * all: a prefix lookup scans every page for a cached one with the wanted
 * parent identity and token ids. It follows the policy of docs/pools.md:
 *   - a new page comes from the free stack (LIFO; page 0 pops first on a
 *     fresh pool), else the least recently released cached page is evicted;
 *   - a page whose last reference goes is evictable (LRU tail) if cached,
 *     else pushed on the free stack; sequences release last page first;
 *   - a page that fills is entered into the cache unless a cached page with
 *     the same parent and tokens exists (a twin takes that page's identity);
 *   - create walks the prompt's full pages from the root, stopping at the
 *     first miss; a hit on an evictable page takes it off the LRU list;
 *   - appending into a shared partial page copies it first; into a cached
 *     partial page held alone, takes it out of the cache first;
 *   - prefix_cache_reset frees the evictable pages in page id order;
 *   - swap-out reads any page in range; swap-in writes only pages held
 *     alone (a free or evictable page is -EINVAL, a shared one -EBUSY,
 *     checked page by page before anything is copied) and takes a cached
 *     one out of the cache first;
 *   - sequence ids come from a LIFO free list (0 first).
 * Page ids are therefore predicted exactly. After EVERY operation the test
 * compares every counter of haccel_kv_pool_stats, every block table (ids,
 * pages, tokens), every page's reference count, a side-effect-free admission
 * query, the pool's own invariant check, and the KV bytes of every token of
 * every sequence (a token's KV is a function of its whole prefix, as real KV
 * is). Every call's return value, reuse count, slots, pages needed and
 * admission answer is compared when it is made.
 *
 * Swaps copy a sequence's pages (and raw ones) out and back in, as a
 * preemption does, with a bad page slipped in now and then: the host copy
 * is then scrambled, so a refused swap-in that wrote anything shows in the
 * KV bytes.
 *
 * Cases: full keys, keys narrowed to 2 bits (nearly every lookup collides;
 * the model does not hash, so it must not notice), prefix caching off.
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

#define MAX_P 8
#define MAX_PAGES 64
#define LAYERS 2
#define MAX_SEQS 10
#define MAX_TOK 64
#define N_HISTORY 8
#define DEFAULT_STEPS 10000

enum { M_FREE, M_USED, M_EVICTABLE };

struct mpage {
	int state;
	uint32_t ref;
	int cached;      /* an entry of the prefix table */
	uint64_t link;   /* the identity pages after it record as parent */
	uint64_t parent; /* its parent's link when it filled; 0 for a first page */
	int32_t tok[MAX_P];
};

struct mseq {
	int live;
	uint32_t n;      /* tokens */
	uint32_t n_pages;
	uint32_t page[MAX_TOK];
	int32_t tok[MAX_TOK];
	uint64_t h[MAX_TOK]; /* h[i]: hash of tok[0..i], decides the KV bytes */
};

struct model {
	uint32_t P, n_pages;
	int prefix;
	uint64_t key_mask;
	struct mpage pg[MAX_PAGES];
	uint32_t free_stack[MAX_PAGES], n_free; /* top: free_stack[n_free - 1] */
	uint32_t lru[MAX_PAGES], n_lru;         /* lru[0]: least recently released */
	uint64_t next_serial;
	uint32_t seq_free[MAX_SEQS], n_seq_free; /* top: seq_free[n_seq_free - 1] */
	struct mseq seq[MAX_SEQS];               /* indexed by the pool's seq id */
	uint64_t ext_refs;                       /* references held through gets */
	struct haccel_kv_stats st;               /* the cumulative counters */
	/* What the run exercised. */
	uint64_t twins, uncached_writes, nomem, e2big, enospc, einval, resets;
	uint64_t swaps_in, swap_unowned, swap_busy, swap_uncached, swap_twice;
};

static struct model M;
static struct haccel_kv_pool *pool;
static uint32_t held[MAX_PAGES], n_held; /* pages taken with pages_get */
static int32_t history[N_HISTORY][MAX_TOK];
static uint32_t history_n[N_HISTORY];
static uint64_t step_no;
static char op_desc[192];
static uint8_t *host;        /* swap buffer: MAX_PAGES + 1 pages */
static uint64_t page_bytes;

/* Any disagreement ends the case: the model no longer describes the pool. */
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

static void m_init(uint32_t P, uint32_t n_pages, int prefix, uint64_t key_mask)
{
	memset(&M, 0, sizeof(M));
	M.P = P;
	M.n_pages = n_pages;
	M.prefix = prefix;
	M.key_mask = key_mask;
	for (uint32_t i = 0; i < n_pages; i++)
		M.free_stack[i] = n_pages - 1 - i;
	M.n_free = n_pages;
	for (uint32_t s = 0; s < MAX_SEQS; s++)
		M.seq_free[s] = MAX_SEQS - 1 - s;
	M.n_seq_free = MAX_SEQS;
	M.next_serial = 1;
}

static void m_lru_remove(uint32_t id)
{
	uint32_t i = 0;

	while (i < M.n_lru && M.lru[i] != id)
		i++;
	KTAP_ASSERT(i < M.n_lru); /* a model bug, not a pool one */
	for (; i + 1 < M.n_lru; i++)
		M.lru[i] = M.lru[i + 1];
	M.n_lru--;
}

static uint32_t m_available(void)
{
	return M.n_free + M.n_lru;
}

static uint32_t m_take(void)
{
	uint32_t id;

	if (M.n_free) {
		id = M.free_stack[--M.n_free];
	} else {
		id = M.lru[0];
		m_lru_remove(id);
		M.pg[id].cached = 0;
		M.st.evictions++;
	}
	M.pg[id].ref = 1;
	M.pg[id].state = M_USED;
	M.st.pages_allocated++;
	return id;
}

static void m_release(uint32_t id)
{
	KTAP_ASSERT(M.pg[id].ref > 0);
	if (--M.pg[id].ref)
		return;
	if (M.pg[id].cached) {
		M.pg[id].state = M_EVICTABLE;
		M.lru[M.n_lru++] = id;
	} else {
		M.pg[id].state = M_FREE;
		M.free_stack[M.n_free++] = id;
	}
}

/* The cached page following parent identity `parent` with tokens toks. */
static int m_find(uint64_t parent, const int32_t *toks)
{
	int found = -1;

	for (uint32_t id = 0; id < M.n_pages; id++) {
		const struct mpage *g = &M.pg[id];

		if (g->cached && g->parent == parent &&
		    !memcmp(g->tok, toks, M.P * sizeof(*toks))) {
			KTAP_ASSERT(found < 0); /* the cache never holds a content twice */
			found = (int)id;
		}
	}
	return found;
}

/* Walk prompt from the root: cached pages matching it, stopping at a miss. */
static uint32_t m_match(const int32_t *prompt, uint32_t n, uint32_t *hits,
			uint32_t *n_evictable)
{
	uint64_t parent = 0;
	uint32_t i, ev = 0;

	for (i = 0; i < n / M.P; i++) {
		int c = m_find(parent, prompt + i * M.P);

		if (c < 0)
			break;
		hits[i] = (uint32_t)c;
		ev += M.pg[c].ref == 0;
		parent = M.pg[c].link;
	}
	*n_evictable = ev;
	return i;
}

/* Page idx of sequence s just filled. */
static void m_fill(struct mseq *s, uint32_t idx)
{
	struct mpage *g = &M.pg[s->page[idx]];
	int twin;

	g->parent = idx ? M.pg[s->page[idx - 1]].link : 0;
	twin = m_find(g->parent, g->tok);
	if (twin >= 0) {
		g->link = M.pg[twin].link;
		M.twins++;
		return;
	}
	g->cached = 1;
	g->link = M.next_serial++;
}

static void m_set_tokens(struct mseq *s, uint32_t from, const int32_t *t,
			 uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		uint64_t prev = from + i ? s->h[from + i - 1] : 0;

		s->tok[from + i] = t[i];
		s->h[from + i] = haccel__mix64(prev ^ ((uint64_t)(uint32_t)t[i] *
						       0x100000001b3ull));
	}
}

static int m_lookup(uint32_t sid)
{
	if (sid >= MAX_SEQS)
		return -EINVAL;
	return M.seq[sid].live ? 0 : -ENOENT;
}

static int m_seq_take(uint32_t *sid)
{
	if (!M.n_seq_free)
		return -ENOSPC;
	*sid = M.seq_free[--M.n_seq_free];
	memset(&M.seq[*sid], 0, sizeof(M.seq[*sid]));
	M.seq[*sid].live = 1;
	return 0;
}

static int m_create(const int32_t *prompt, uint32_t n, uint32_t *sid,
		    uint32_t *reused)
{
	uint32_t hits = 0, ev;
	struct mseq *s;
	int ret = m_seq_take(sid);

	if (ret)
		return ret;
	s = &M.seq[*sid];
	if (n && M.prefix) {
		hits = m_match(prompt, n, s->page, &ev);
		for (uint32_t i = 0; i < hits; i++) {
			struct mpage *g = &M.pg[s->page[i]];

			if (g->ref++ == 0) {
				m_lru_remove(s->page[i]);
				g->state = M_USED;
			}
		}
		s->n_pages = hits;
		m_set_tokens(s, 0, prompt, hits * M.P);
		s->n = hits * M.P;
		M.st.prefix_queries++;
		M.st.prefix_tokens_queried += n;
		M.st.prefix_tokens_reused += hits * M.P;
		M.st.prefix_hits += hits > 0;
	}
	*reused = hits * M.P;
	return 0;
}

/* Pages an append of n takes, and whether it copies a shared last page. */
static uint32_t m_need(const struct mseq *s, uint32_t n, int *cow)
{
	uint32_t after = (s->n + n + M.P - 1) / M.P;

	*cow = n && s->n % M.P && M.pg[s->page[s->n_pages - 1]].ref > 1;
	return after - s->n_pages + (*cow ? 1 : 0);
}

static int m_pages_needed(uint32_t sid, uint32_t n, uint32_t *pages)
{
	int cow, ret = m_lookup(sid);

	if (ret)
		return ret;
	if (M.seq[sid].n + n > MAX_TOK)
		return -E2BIG;
	*pages = m_need(&M.seq[sid], n, &cow);
	return 0;
}

static int m_append(uint32_t sid, const int32_t *t, uint32_t n, int64_t *slots)
{
	struct mseq *s;
	uint32_t off;
	int cow, ret = m_lookup(sid);

	if (ret)
		return ret;
	s = &M.seq[sid];
	if (s->n + n > MAX_TOK)
		return -E2BIG;
	if (m_need(s, n, &cow) > m_available())
		return -ENOMEM;
	off = s->n % M.P;
	if (n && off && !cow && M.pg[s->page[s->n_pages - 1]].cached) {
		M.pg[s->page[s->n_pages - 1]].cached = 0;
		M.uncached_writes++;
	}
	if (cow) {
		uint32_t old = s->page[s->n_pages - 1], nw = m_take();

		memcpy(M.pg[nw].tok, M.pg[old].tok, off * sizeof(int32_t));
		s->page[s->n_pages - 1] = nw;
		m_release(old);
		M.st.cow_copies++;
	}
	for (uint32_t i = 0; i < n; i++) {
		uint32_t id;

		if (off == 0)
			s->page[s->n_pages++] = m_take();
		id = s->page[s->n_pages - 1];
		M.pg[id].tok[off] = t[i];
		slots[i] = (int64_t)id * M.P + off;
		if (++off == M.P) {
			if (M.prefix)
				m_fill(s, s->n_pages - 1);
			off = 0;
		}
	}
	m_set_tokens(s, s->n, t, n);
	s->n += n;
	return 0;
}

static int m_fork(uint32_t sid, uint32_t *child)
{
	int ret = m_lookup(sid);

	if (ret)
		return ret;
	ret = m_seq_take(child);
	if (ret)
		return ret;
	M.seq[*child] = M.seq[sid];
	for (uint32_t i = 0; i < M.seq[sid].n_pages; i++)
		M.pg[M.seq[sid].page[i]].ref++;
	return 0;
}

static int m_truncate(uint32_t sid, uint32_t n)
{
	struct mseq *s;
	int ret = m_lookup(sid);

	if (ret)
		return ret;
	s = &M.seq[sid];
	if (n > s->n)
		return -EINVAL;
	while (s->n_pages > (n + M.P - 1) / M.P)
		m_release(s->page[--s->n_pages]);
	s->n = n;
	return 0;
}

static int m_free(uint32_t sid)
{
	struct mseq *s;
	int ret = m_lookup(sid);

	if (ret)
		return ret;
	s = &M.seq[sid];
	while (s->n_pages)
		m_release(s->page[--s->n_pages]);
	s->live = 0;
	s->n = 0;
	M.seq_free[M.n_seq_free++] = sid;
	return 0;
}

static int m_prefix_key(uint32_t sid, uint32_t idx, uint64_t *key)
{
	const struct mseq *s;
	uint64_t k = haccel__kv_root_key();
	int ret = m_lookup(sid);

	if (ret)
		return ret;
	if (!M.prefix)
		return -ENOTSUP;
	s = &M.seq[sid];
	if (idx >= s->n / M.P)
		return -ERANGE;
	/* docs/pools.md: key(i) = XXH3-64(tokens of page i, seed = key(i-1)). */
	for (uint32_t i = 0; i <= idx; i++)
		k = haccel__kv_chain_key(k, s->tok + i * M.P, M.P) & M.key_mask;
	*key = k;
	return 0;
}

static int m_admit(const int32_t *prompt, uint32_t n, uint32_t max_new,
		   struct haccel_kv_admission *a)
{
	uint32_t hits[MAX_TOK], h = 0, ev = 0;

	if (n + max_new > MAX_TOK)
		return -E2BIG;
	if (prompt && n && M.prefix)
		h = m_match(prompt, n, hits, &ev);
	memset(a, 0, sizeof(*a));
	a->pages_needed = (n + max_new + M.P - 1) / M.P;
	a->pages_reused = h;
	a->pages_new = a->pages_needed - h;
	a->pages_available = m_available() - ev;
	a->tokens_reused = h * M.P;
	a->fits = a->pages_new <= a->pages_available;
	return 0;
}

static int m_get(uint32_t n, uint32_t *pages)
{
	if (n > m_available())
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++)
		pages[i] = m_take();
	M.ext_refs += n;
	return 0;
}

/*
 * All or nothing: any id out of range or without a reference left refuses
 * the whole call. Pages that reach zero are placed in the order of their
 * first appearance in the list.
 */
static int m_put(const uint32_t *pages, uint32_t n)
{
	uint32_t ref[MAX_PAGES];

	if (n > M.ext_refs)
		return -EINVAL;
	for (uint32_t id = 0; id < M.n_pages; id++)
		ref[id] = M.pg[id].ref;
	for (uint32_t i = 0; i < n; i++) {
		if (pages[i] >= M.n_pages || ref[pages[i]] == 0)
			return -EINVAL;
		ref[pages[i]]--;
	}
	for (uint32_t i = 0; i < n; i++)
		M.pg[pages[i]].ref--;
	for (uint32_t i = 0; i < n; i++) {
		struct mpage *g = &M.pg[pages[i]];

		if (g->ref == 0 && g->state == M_USED) {
			g->ref = 1;
			m_release(pages[i]);
		}
	}
	M.ext_refs -= n;
	return 0;
}

static int m_reset(void)
{
	int n = 0;

	for (uint32_t id = 0; id < M.n_pages; id++) {
		if (!M.pg[id].cached)
			continue;
		n++;
		M.pg[id].cached = 0;
		if (M.pg[id].state == M_EVICTABLE) {
			m_lru_remove(id);
			M.pg[id].state = M_FREE;
			M.free_stack[M.n_free++] = id;
		}
	}
	return n;
}

/* Swap-out: every id in range. Swap-in: every page held alone and listed
 * once too, first failure wins; then cached pages leave the cache. */
static int m_swap_check(const uint32_t *pages, uint32_t n, int in)
{
	for (uint32_t i = 0; i < n; i++) {
		if (pages[i] >= M.n_pages)
			return -EINVAL;
		if (!in)
			continue;
		for (uint32_t j = 0; j < i; j++)
			if (pages[j] == pages[i])
				return -EINVAL;
		if (M.pg[pages[i]].state != M_USED)
			return -EINVAL;
		if (M.pg[pages[i]].ref > 1)
			return -EBUSY;
	}
	return 0;
}

static int m_swap_in(const uint32_t *pages, uint32_t n)
{
	int ret = m_swap_check(pages, n, 1);

	if (ret)
		return ret;
	for (uint32_t i = 0; i < n; i++)
		if (M.pg[pages[i]].cached) {
			M.pg[pages[i]].cached = 0;
			M.swap_uncached++;
		}
	return 0;
}

static void m_stats(struct haccel_kv_stats *st)
{
	*st = M.st;
	st->pages_total = M.n_pages;
	st->pages_free = M.n_free;
	st->pages_evictable = M.n_lru;
	st->pages_used = 0;
	st->pages_cached = 0;
	for (uint32_t id = 0; id < M.n_pages; id++) {
		st->pages_used += M.pg[id].state == M_USED;
		st->pages_cached += M.pg[id].cached;
	}
	st->seqs_active = 0;
	for (uint32_t s = 0; s < MAX_SEQS; s++)
		st->seqs_active += M.seq[s].live;
	st->seqs_max = MAX_SEQS;
}

/* ------------------------------------------------------------------------ */
/* KV bytes: the model writer and the reader                                */

static void pattern(uint64_t h, uint32_t region, uint8_t *out, uint32_t n)
{
	uint64_t x = haccel__mix64(h + region);

	for (uint32_t i = 0; i < n; i++)
		out[i] = (uint8_t)(x >> (8 * (i % 8))) ^ (uint8_t)i;
}

/* Write the KV of tokens [from, to) of s at the slots the append returned. */
static void write_kv(const struct mseq *s, uint32_t from, const int64_t *slots,
		     uint32_t to)
{
	for (uint32_t l = 0; l < LAYERS; l++)
		for (uint32_t st = 0; st < 2; st++) {
			struct haccel_kv_region r;

			KTAP_ASSERT_EQ(haccel_kv_pool_region(pool, l, st, &r), 0);
			for (uint32_t i = from; i < to; i++)
				pattern(s->h[i], l * 2 + st,
					(uint8_t *)r.base + slots[i - from] * r.bytes_per_token,
					r.bytes_per_token);
		}
}

static void verify_bytes(void)
{
	uint8_t want[16];

	for (uint32_t sid = 0; sid < MAX_SEQS; sid++) {
		const struct mseq *s = &M.seq[sid];

		if (!s->live)
			continue;
		for (uint32_t l = 0; l < LAYERS; l++)
			for (uint32_t st = 0; st < 2; st++) {
				struct haccel_kv_region r;

				KTAP_ASSERT_EQ(haccel_kv_pool_region(pool, l, st, &r), 0);
				for (uint32_t i = 0; i < s->n; i++) {
					int64_t slot = (int64_t)s->page[i / M.P] * M.P + i % M.P;

					pattern(s->h[i], l * 2 + st, want, r.bytes_per_token);
					if (memcmp((uint8_t *)r.base + slot * r.bytes_per_token,
						   want, r.bytes_per_token)) {
						ktap_fail_at(__FILE__, __LINE__,
							     "step %llu (%s): seq %u token %u layer %u stream %u: wrong KV bytes",
							     (unsigned long long)step_no, op_desc,
							     sid, i, l, st);
						ktap_end();
					}
				}
			}
	}
}

/* ------------------------------------------------------------------------ */
/* Comparing pool and model                                                 */

static void compare_admission(const int32_t *prompt, uint32_t n, uint32_t max_new)
{
	struct haccel_kv_admission a, w;
	int rp = haccel_kv_admit(pool, prompt, n, max_new, &a);
	int rm = m_admit(prompt, n, max_new, &w);

	MEQ(rp, rm);
	if (rm)
		return;
	MEQ(a.pages_needed, w.pages_needed);
	MEQ(a.pages_reused, w.pages_reused);
	MEQ(a.pages_new, w.pages_new);
	MEQ(a.pages_available, w.pages_available);
	MEQ(a.tokens_reused, w.tokens_reused);
	MEQ(a.fits, w.fits);
}

static void compare_all(void)
{
	struct haccel_kv_stats g, w;
	struct haccel_kv_pool_info info;
	char why[256] = "";

	KTAP_ASSERT_EQ(haccel_kv_pool_stats(pool, &g), 0);
	m_stats(&w);
	MEQ(g.pages_total, w.pages_total);
	MEQ(g.pages_free, w.pages_free);
	MEQ(g.pages_evictable, w.pages_evictable);
	MEQ(g.pages_used, w.pages_used);
	MEQ(g.pages_cached, w.pages_cached);
	MEQ(g.seqs_active, w.seqs_active);
	MEQ(g.seqs_max, w.seqs_max);
	MEQ(g.prefix_queries, w.prefix_queries);
	MEQ(g.prefix_hits, w.prefix_hits);
	MEQ(g.prefix_tokens_queried, w.prefix_tokens_queried);
	MEQ(g.prefix_tokens_reused, w.prefix_tokens_reused);
	MEQ(g.evictions, w.evictions);
	MEQ(g.cow_copies, w.cow_copies);
	MEQ(g.pages_allocated, w.pages_allocated);
	/* No hidden reserve: the three states cover every page. */
	MEQ(g.pages_free + g.pages_evictable + g.pages_used, g.pages_total);

	KTAP_ASSERT_EQ(haccel_kv_pool_info(pool, &info), 0);
	for (uint32_t sid = 0; sid < MAX_SEQS; sid++) {
		const struct mseq *s = &M.seq[sid];
		const uint32_t *bt = NULL;
		uint32_t np = 0, nt = 0;
		int ret = haccel_kv_seq_block_table(pool, sid, &bt, &np, &nt);

		MEQ(ret, s->live ? 0 : -ENOENT);
		if (!s->live)
			continue;
		MEQ(np, s->n_pages);
		MEQ(nt, s->n);
		MEQ(bt - info.block_tables, (long long)sid * info.max_pages_per_seq);
		for (uint32_t i = 0; i < np; i++)
			MEQ(bt[i], s->page[i]);
	}
	for (uint32_t id = 0; id < M.n_pages; id++)
		MEQ(haccel__kv_page_ref(pool, id), M.pg[id].ref);

	if (haccel__kv_pool_check(pool, why, sizeof(why))) {
		ktap_fail_at(__FILE__, __LINE__, "step %llu (%s): kv pool check: %s",
			     (unsigned long long)step_no, op_desc, why);
		ktap_end();
	}
	verify_bytes();

	/* The cached set, probed without side effects along a past prompt. */
	uint32_t h = (uint32_t)ktap_rand_below(N_HISTORY);
	compare_admission(history[h], history_n[h], 0);
}

/* ------------------------------------------------------------------------ */
/* Operations                                                               */

static void random_tokens(int32_t *t, uint32_t n)
{
	/* A small alphabet makes equal pages (twins) common. */
	for (uint32_t i = 0; i < n; i++)
		t[i] = (int32_t)ktap_rand_below(3);
}

static int pick_live(void)
{
	int idx[MAX_SEQS], n = 0;

	for (int s = 0; s < MAX_SEQS; s++)
		if (M.seq[s].live)
			idx[n++] = s;
	return n ? idx[ktap_rand_below((uint64_t)n)] : -1;
}

static int pick_dead(void)
{
	int idx[MAX_SEQS + 1], n = 0;

	for (int s = 0; s < MAX_SEQS; s++)
		if (!M.seq[s].live)
			idx[n++] = s;
	idx[n++] = MAX_SEQS; /* out of range */
	return idx[ktap_rand_below((uint64_t)n)];
}

/* A prompt that often shares a prefix with a live sequence or a past one. */
static uint32_t make_prompt(int32_t *t)
{
	uint32_t n = 1 + (uint32_t)ktap_rand_below(MAX_TOK), keep = 0;
	uint64_t kind = ktap_rand_below(10);
	int s = pick_live();

	if (kind < 4 && s >= 0 && M.seq[s].n) {
		keep = (uint32_t)ktap_rand_below(M.seq[s].n + 1);
		memcpy(t, M.seq[s].tok, keep * sizeof(*t));
	} else if (kind < 8) {
		uint32_t h = (uint32_t)ktap_rand_below(N_HISTORY);

		keep = (uint32_t)ktap_rand_below(history_n[h] + 1);
		memcpy(t, history[h], keep * sizeof(*t));
	}
	if (n < keep)
		n = keep;
	random_tokens(t + keep, n - keep);
	return n;
}

/* Append n tokens to sid in the pool and the model; compare the outcome. */
static int do_append(uint32_t sid, const int32_t *t, uint32_t n)
{
	int64_t got[MAX_TOK + 1], want[MAX_TOK + 1];
	uint32_t need = 0, mneed = 0, from = M.seq[sid].n;
	int rp, rm;

	rp = haccel_kv_seq_pages_needed(pool, sid, n, &need);
	rm = m_pages_needed(sid, n, &mneed);
	MEQ(rp, rm);
	if (!rm)
		MEQ(need, mneed);
	rp = haccel_kv_seq_append(pool, sid, t, n, got);
	rm = m_append(sid, t, n, want);
	MEQ(rp, rm);
	M.nomem += rm == -ENOMEM;
	M.e2big += rm == -E2BIG;
	if (rm)
		return rm;
	for (uint32_t i = 0; i < n; i++)
		MEQ(got[i], want[i]);
	write_kv(&M.seq[sid], from, got, from + n);
	return 0;
}

static void op_create_prompt(void)
{
	int32_t t[MAX_TOK];
	uint32_t n = make_prompt(t), use = n, sid = 0, msid = 0, r = 0, mr = 0;
	struct haccel_kv_admission a;
	int rp, rm;

	/* Keep one token to compute, as an engine does, half of the time. */
	if (n > 1 && ktap_rand_below(2))
		use = n - 1;
	snprintf(op_desc, sizeof(op_desc), "create from a prompt of %u (%u looked up)",
		 n, use);
	compare_admission(t, use, n - use);
	KTAP_ASSERT_EQ(haccel_kv_admit(pool, t, use, n - use, &a), 0);
	rp = haccel_kv_seq_create(pool, t, use, &sid, &r);
	rm = m_create(t, use, &msid, &mr);
	MEQ(rp, rm);
	if (rm) {
		M.enospc += rm == -ENOSPC;
		return;
	}
	MEQ(sid, msid);
	MEQ(r, mr);
	uint32_t h = (uint32_t)ktap_rand_below(N_HISTORY);
	memcpy(history[h], t, n * sizeof(*t));
	history_n[h] = n;
	if (ktap_rand_below(8) == 0)
		return; /* created, prompt not computed yet */
	compare_all();
	/* The admission answer and the append agree. */
	rp = do_append(sid, t + r, n - r);
	MEQ(rp == 0, a.fits);
}

static void op_create_empty(void)
{
	uint32_t sid = 0, msid = 0, r = 7, mr = 0;
	int rp, rm;

	snprintf(op_desc, sizeof(op_desc), "create without a prompt");
	rp = haccel_kv_seq_create(pool, NULL, 0, &sid, &r);
	rm = m_create(NULL, 0, &msid, &mr);
	MEQ(rp, rm);
	M.enospc += rm == -ENOSPC;
	if (!rm) {
		MEQ(sid, msid);
		MEQ(r, 0);
	}
}

static void op_append(void)
{
	int32_t t[MAX_TOK + 1];
	int s = pick_live();
	uint32_t room, n;

	if (s < 0)
		return;
	room = MAX_TOK - M.seq[s].n;
	switch (ktap_rand_below(10)) {
	case 0: /* past max_seq_tokens */
		n = room + 1;
		break;
	case 1: /* a lot at once: often more than the pool has */
		n = room;
		break;
	case 2:
		n = 0;
		break;
	default:
		n = room ? 1 + (uint32_t)ktap_rand_below(room < 2 * M.P ? room : 2 * M.P) : 0;
	}
	random_tokens(t, n);
	snprintf(op_desc, sizeof(op_desc), "append %u to seq %d (%u tokens)", n, s,
		 M.seq[s].n);
	do_append((uint32_t)s, t, n);
}

static void op_fork(void)
{
	int s = pick_live(), rp, rm;
	uint32_t c = 0, mc = 0;

	if (s < 0)
		return;
	snprintf(op_desc, sizeof(op_desc), "fork seq %d (%u tokens)", s, M.seq[s].n);
	rp = haccel_kv_seq_fork(pool, (uint32_t)s, &c);
	rm = m_fork((uint32_t)s, &mc);
	MEQ(rp, rm);
	M.enospc += rm == -ENOSPC;
	if (!rm)
		MEQ(c, mc);
}

static void op_truncate(void)
{
	int s = pick_live();
	uint32_t n;

	if (s < 0)
		return;
	switch (ktap_rand_below(8)) {
	case 0: /* longer than the sequence */
		n = M.seq[s].n + 1;
		break;
	case 1: /* to a page boundary */
		n = M.P * (uint32_t)ktap_rand_below(M.seq[s].n / M.P + 1);
		break;
	case 2: /* into the last full page: then an append writes a cached page */
	case 3:
		n = M.seq[s].n >= M.P ?
			    (M.seq[s].n / M.P - 1) * M.P + 1 +
				    (uint32_t)ktap_rand_below(M.P - 1) :
			    0;
		break;
	default:
		n = (uint32_t)ktap_rand_below(M.seq[s].n + 1);
	}
	snprintf(op_desc, sizeof(op_desc), "truncate seq %d from %u to %u", s,
		 M.seq[s].n, n);
	int rm = m_truncate((uint32_t)s, n);
	MEQ(haccel_kv_seq_truncate(pool, (uint32_t)s, n), rm);
	M.einval += rm == -EINVAL;
}

static void op_free(void)
{
	int s = pick_live();

	if (s < 0)
		return;
	snprintf(op_desc, sizeof(op_desc), "free seq %d (%u tokens)", s, M.seq[s].n);
	MEQ(haccel_kv_seq_free(pool, (uint32_t)s), m_free((uint32_t)s));
}

static void op_get(void)
{
	uint32_t got[MAX_PAGES], want[MAX_PAGES];
	uint32_t n = (uint32_t)ktap_rand_below(4);
	int rp, rm;

	if (ktap_rand_below(6) == 0)
		n = m_available() + 1;
	if (n_held + n > 12 && n <= m_available())
		return; /* do not let raw pages starve the sequences */
	snprintf(op_desc, sizeof(op_desc), "pages_get %u (%u available)", n,
		 m_available());
	rp = haccel_kv_pages_get(pool, n, got);
	rm = m_get(n, want);
	MEQ(rp, rm);
	M.nomem += rm == -ENOMEM;
	if (rm)
		return;
	for (uint32_t i = 0; i < n; i++) {
		MEQ(got[i], want[i]);
		held[n_held++] = got[i];
	}
}

static void op_put(void)
{
	uint32_t list[MAX_PAGES + 2], n, bad = 0;
	int rm;

	/* Shuffle what is held; put a prefix of it back. */
	for (uint32_t i = n_held; i > 1; i--) {
		uint32_t j = (uint32_t)ktap_rand_below(i), x = held[i - 1];

		held[i - 1] = held[j];
		held[j] = x;
	}
	n = n_held ? (uint32_t)ktap_rand_below(n_held + 1) : 0;
	memcpy(list, held, n * sizeof(*list));
	switch (ktap_rand_below(8)) {
	case 0: /* an id out of range */
		list[n++] = M.n_pages + (uint32_t)ktap_rand_below(3);
		bad = 1;
		break;
	case 1: /* a page held once, listed twice */
		if (n) {
			list[n] = list[ktap_rand_below(n)];
			n++;
			bad = 1;
		}
		break;
	case 2: /* a page nobody references */
		for (uint32_t id = 0; id < M.n_pages; id++)
			if (M.pg[id].ref == 0) {
				list[n++] = id;
				bad = 1;
				break;
			}
		break;
	}
	snprintf(op_desc, sizeof(op_desc), "pages_put %u of %u held%s", n, n_held,
		 bad ? " (one bad)" : "");
	rm = m_put(list, n);
	MEQ(haccel_kv_pages_put(pool, list, n), rm);
	M.einval += rm == -EINVAL;
	if (rm)
		return;
	memmove(held, held + n, (n_held - n) * sizeof(*held));
	n_held -= n;
}

static void op_query(void)
{
	int32_t t[MAX_TOK];
	uint32_t n, extra, need = 0, mneed = 0;
	int s = pick_live(), rm;

	switch (ktap_rand_below(4)) {
	case 0: /* pages an append would take, CoW included */
		if (s < 0)
			return;
		n = (uint32_t)ktap_rand_below(MAX_TOK + 2 - M.seq[s].n);
		snprintf(op_desc, sizeof(op_desc), "pages_needed seq %d +%u", s, n);
		rm = m_pages_needed((uint32_t)s, n, &mneed);
		MEQ(haccel_kv_seq_pages_needed(pool, (uint32_t)s, n, &need), rm);
		if (!rm)
			MEQ(need, mneed);
		break;
	case 1: /* admission without the cache */
		n = (uint32_t)ktap_rand_below(MAX_TOK + 1);
		extra = (uint32_t)ktap_rand_below(MAX_TOK + 2 - n);
		snprintf(op_desc, sizeof(op_desc), "admit no prompt %u + %u", n, extra);
		compare_admission(NULL, n, extra);
		break;
	default:
		n = make_prompt(t);
		extra = (uint32_t)ktap_rand_below(MAX_TOK + 2 - n);
		snprintf(op_desc, sizeof(op_desc), "admit prompt %u + %u", n, extra);
		compare_admission(t, n, extra);
	}
}

static void op_prefix_key(void)
{
	int s = pick_live(), rm;
	uint64_t key = 0, mkey = 0;
	uint32_t idx;

	if (s < 0)
		return;
	idx = (uint32_t)ktap_rand_below(M.seq[s].n / M.P + 2);
	snprintf(op_desc, sizeof(op_desc), "prefix key of seq %d page %u", s, idx);
	rm = m_prefix_key((uint32_t)s, idx, &mkey);
	MEQ(haccel_kv_seq_prefix_key(pool, (uint32_t)s, idx, &key), rm);
	if (!rm && key != mkey) {
		ktap_fail_at(__FILE__, __LINE__,
			     "step %llu (%s): key %#llx, model %#llx",
			     (unsigned long long)step_no, op_desc,
			     (unsigned long long)key, (unsigned long long)mkey);
		ktap_end();
	}
}

/* Calls on a sequence id that is not in use (or out of range) change nothing. */
static void op_bad_seq(void)
{
	int32_t t[2] = { 0, 1 };
	int64_t slots[2];
	uint32_t sid = (uint32_t)pick_dead(), x;
	uint64_t key;
	int want = m_lookup(sid);

	if (!want)
		return;
	snprintf(op_desc, sizeof(op_desc), "calls on unused seq id %u", sid);
	MEQ(haccel_kv_seq_append(pool, sid, t, 2, slots), want);
	MEQ(haccel_kv_seq_pages_needed(pool, sid, 2, &x), want);
	MEQ(haccel_kv_seq_fork(pool, sid, &x), want);
	MEQ(haccel_kv_seq_truncate(pool, sid, 0), want);
	MEQ(haccel_kv_seq_free(pool, sid), want);
	MEQ(haccel_kv_seq_block_table(pool, sid, NULL, NULL, NULL), want);
	MEQ(haccel_kv_seq_prefix_key(pool, sid, 0, &key), want);
}

/* Preempt and resume in place: a sequence's pages (or raw ones) out, then
 * back in; sometimes with a page swap-in must refuse. */
static void op_swap(void)
{
	uint32_t list[MAX_PAGES + 1], n = 0, bad_at;
	int s = pick_live(), rp, rm, twice = 0;
	const char *bad = "";

	if (s >= 0 && ktap_rand_below(4))
		for (uint32_t i = 0; i < M.seq[s].n_pages; i++)
			list[n++] = M.seq[s].page[i];
	for (uint32_t i = 0; i < n_held && n < MAX_PAGES; i++)
		if (ktap_rand_below(2))
			list[n++] = held[i];
	bad_at = (uint32_t)ktap_rand_below(n + 1);
	switch (ktap_rand_below(7)) {
	case 0:
		list[n] = M.n_pages + (uint32_t)ktap_rand_below(3);
		bad = " (one out of range)";
		break;
	case 1:
		if (!M.n_free)
			goto good;
		list[n] = M.free_stack[ktap_rand_below(M.n_free)];
		bad = " (one free)";
		break;
	case 2:
		if (!M.n_lru)
			goto good;
		list[n] = M.lru[ktap_rand_below(M.n_lru)];
		bad = " (one evictable)";
		break;
	case 3: {
		uint32_t id = (uint32_t)ktap_rand_below(M.n_pages), k = 0;

		while (k < M.n_pages && M.pg[(id + k) % M.n_pages].ref < 2)
			k++;
		if (k == M.n_pages)
			goto good;
		list[n] = (id + k) % M.n_pages;
		bad = " (one shared)";
		break;
	}
	case 4:
		if (!n)
			goto good;
		list[n] = list[ktap_rand_below(n)];
		bad = " (one listed twice)";
		twice = 1;
		break;
	default:
		goto good;
	}
	/* Anywhere in the list: pages before it must not be written either. */
	{
		uint32_t x = list[bad_at];

		list[bad_at] = list[n];
		list[n++] = x;
	}
good:
	snprintf(op_desc, sizeof(op_desc), "swap out and in %u pages%s", n, bad);
	rm = m_swap_check(list, n, 0);
	MEQ(haccel_kv_pages_swap_out(pool, list, n, host, n * page_bytes), rm);
	M.einval += rm == -EINVAL;
	if (rm)
		return;
	rm = m_swap_check(list, n, 1);
	if (rm) /* nothing may be copied: scrambled bytes would show */
		for (uint64_t i = 0; i < n * page_bytes; i++)
			host[i] = (uint8_t)(host[i] ^ 0x5a ^ i);
	rp = haccel_kv_pages_swap_in(pool, list, n, host, n * page_bytes);
	rm = m_swap_in(list, n);
	MEQ(rp, rm);
	M.swap_unowned += rm == -EINVAL;
	M.swap_busy += rm == -EBUSY;
	M.swap_twice += twice && rm == -EINVAL;
	M.swaps_in += !rm;
}

static void op_reset(void)
{
	snprintf(op_desc, sizeof(op_desc), "prefix cache reset");
	MEQ(haccel_kv_prefix_cache_reset(pool), m_reset());
	M.resets++;
}

static void run(uint32_t P, uint32_t n_pages, uint32_t flags, uint64_t key_mask)
{
	struct haccel_ctx *ctx = test_ctx_quiet();
	struct haccel_kv_pool_config c;
	unsigned long steps = test_steps(DEFAULT_STEPS);

	haccel_kv_pool_config_init(&c);
	c.flags = flags;
	c.page_tokens = P;
	c.n_pages = n_pages;
	c.n_layers = LAYERS;
	c.max_seqs = MAX_SEQS;
	c.max_seq_tokens = MAX_TOK;
	c.streams[0].bytes_per_token = 8;
	c.streams[1].bytes_per_token = 4;
	KTAP_ASSERT(P <= MAX_P && n_pages <= MAX_PAGES);
	KTAP_ASSERT_EQ(haccel_kv_pool_create(ctx, &c, &pool), 0);
	haccel__kv_pool_set_key_mask(pool, key_mask);
	struct haccel_kv_pool_info pi;
	KTAP_ASSERT_EQ(haccel_kv_pool_info(pool, &pi), 0);
	page_bytes = pi.page_bytes;
	host = malloc((MAX_PAGES + 1) * page_bytes);
	KTAP_ASSERT(host != NULL);
	m_init(P, n_pages, !(flags & HACCEL_KV_NO_PREFIX_CACHE), key_mask);
	n_held = 0;
	memset(history_n, 0, sizeof(history_n));
	step_no = 0;
	snprintf(op_desc, sizeof(op_desc), "fresh pool");
	compare_all();

	for (step_no = 1; step_no <= steps; step_no++) {
		uint64_t op = ktap_rand_below(100);

		snprintf(op_desc, sizeof(op_desc), "op %llu skipped",
			 (unsigned long long)op);
		/* A full sequence table mostly makes room (-ENOSPC stays tested). */
		if (op < 59 && !(op >= 24 && op < 50) && !M.n_seq_free &&
		    ktap_rand_below(4))
			op = 70;
		if (op < 20)
			op_create_prompt();
		else if (op < 24)
			op_create_empty();
		else if (op < 50)
			op_append();
		else if (op < 59)
			op_fork();
		else if (op < 67)
			op_truncate();
		else if (op < 79)
			op_free();
		else if (op < 83)
			op_get();
		else if (op < 87)
			op_put();
		else if (op < 94)
			op_query();
		else if (op < 97)
			op_prefix_key();
		else if (op < 98)
			op_bad_seq();
		else if (op < 99 || ktap_rand_below(4))
			op_swap();
		else
			op_reset();
		compare_all();
	}

	ktap_diag("P=%u pages=%u%s mask %#llx, %lu steps: %llu prefix queries, %llu hits (%llu tokens), %llu evictions, %llu CoW copies, %llu twins, %llu cached pages rewritten, %llu allocations",
		  P, n_pages, M.prefix ? "" : " (no prefix cache)",
		  (unsigned long long)key_mask, steps,
		  (unsigned long long)M.st.prefix_queries,
		  (unsigned long long)M.st.prefix_hits,
		  (unsigned long long)M.st.prefix_tokens_reused,
		  (unsigned long long)M.st.evictions,
		  (unsigned long long)M.st.cow_copies,
		  (unsigned long long)M.twins,
		  (unsigned long long)M.uncached_writes,
		  (unsigned long long)M.st.pages_allocated);
	ktap_diag("refused: %llu -ENOMEM, %llu -E2BIG, %llu -ENOSPC, %llu -EINVAL; %llu cache resets",
		  (unsigned long long)M.nomem, (unsigned long long)M.e2big,
		  (unsigned long long)M.enospc, (unsigned long long)M.einval,
		  (unsigned long long)M.resets);
	ktap_diag("swaps in: %llu done (%llu cached pages taken out), %llu refused unowned, %llu refused shared, %llu refused for a page listed twice",
		  (unsigned long long)M.swaps_in, (unsigned long long)M.swap_uncached,
		  (unsigned long long)M.swap_unowned, (unsigned long long)M.swap_busy,
		  (unsigned long long)M.swap_twice);
	/* The run must have exercised what it claims to. */
	if (steps >= DEFAULT_STEPS) {
		KTAP_EXPECT(M.st.cow_copies > 0 && M.nomem > 0 && M.e2big > 0 &&
			    M.einval > 0);
		KTAP_EXPECT(M.swaps_in > 0 && M.swap_unowned > 0 && M.swap_busy > 0 &&
			    M.swap_twice > 0);
		if (M.prefix)
			KTAP_EXPECT(M.st.prefix_hits > 0 && M.st.evictions > 0 &&
				    M.twins > 0 && M.uncached_writes > 0 &&
				    M.swap_uncached > 0);
	}

	snprintf(op_desc, sizeof(op_desc), "teardown");
	for (uint32_t s = 0; s < MAX_SEQS; s++)
		if (M.seq[s].live)
			MEQ(haccel_kv_seq_free(pool, s), m_free(s));
	MEQ(haccel_kv_pages_put(pool, held, n_held), m_put(held, n_held));
	compare_all();
	struct haccel_kv_stats st;
	KTAP_ASSERT_EQ(haccel_kv_pool_stats(pool, &st), 0);
	KTAP_EXPECT_EQ(st.pages_used, 0);
	KTAP_EXPECT_EQ(st.seqs_active, 0);
	haccel_kv_pool_destroy(pool);
	pool = NULL;
	free(host);
	host = NULL;
	haccel_close(ctx);
}

static void t_random_full_keys(void)
{
	run(4, 40, 0, ~0ull);
}

static void t_random_colliding_keys(void)
{
	run(8, 24, 0, 0x3);
}

static void t_random_no_prefix_cache(void)
{
	run(4, 32, HACCEL_KV_NO_PREFIX_CACHE, ~0ull);
}

static const struct ktap_case cases[] = {
	KTAP_CASE_TIMEOUT(t_random_full_keys, 120),
	KTAP_CASE_TIMEOUT(t_random_colliding_keys, 120),
	KTAP_CASE_TIMEOUT(t_random_no_prefix_cache, 120),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
