// SPDX-License-Identifier: MIT
/*
 * Paged KV pool for the sparse-attention layers.
 *
 * Memory: one allocation from the backend, cut into n_layers x n_streams
 * regions; in each region token slot s (= page * page_tokens + offset) sits
 * at base + s * bytes_per_token, so one page id indexes every layer.
 *
 * Page life cycle (state[] says which, and each page is in exactly one):
 *   FREE       on the free stack: no content worth keeping, ref 0
 *   USED       ref > 0: in block tables and/or held by pages_get
 *   EVICTABLE  ref 0 but in the prefix table: on the LRU list, reused by a
 *              prefix hit or taken (evicted) only when the free stack is empty
 *
 * Prefix cache: when a page fills, key = XXH3(token ids, seed = parent key).
 * Equal keys prove nothing, so a hit also requires equal token ids and the
 * same parent identity (`link`): a serial number unique to each entry of the
 * table, which a page records as `parent` when it fills. Matching walks from
 * the root and checks both at every page, so a served prefix equals the
 * prompt token for token, even when keys collide. A page that fills with the
 * same content as a cached one is not entered twice: it takes that entry's
 * link, so its children hang under the cached parent.
 *
 * A page in the prefix table is never written again. Appending into a
 * partial page that is shared (ref > 1) first copies it (copy-on-write); a
 * sequence truncated into a cached page it alone holds (rejected draft
 * tokens, say) takes it out of the table and writes in place. Swap-in
 * writes only pages held alone (ref == 1) and takes a cached one out of the
 * table first; it refuses free, evictable and shared pages.
 *
 * Every array is carved in haccel_kv_pool_create(); nothing else allocates.
 */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "backend.h"
#include "core/ctx.h"
#include "core/log.h"
#include "core/map.h"
#include "core/util.h"
#include "kernels/haccel_format.h"
#include "kv.h"

#define NONE UINT32_MAX
/* max_seqs' limit: a page's references (one a sequence, one from
 * haccel_kv_pages_get) stay below 2^31, whose bit swap-in marks with. */
#define MAX_SEQS 0x7ffffffeu
#define REGION_ALIGN 4096u

enum page_state { PAGE_FREE = 0, PAGE_USED = 1, PAGE_EVICTABLE = 2 };

struct kv_seq {
	uint32_t n_tokens;
	uint32_t n_pages;
	uint32_t active;
	uint32_t next_free; /* free-list link while inactive */
};

struct haccel_kv_pool {
	struct haccel_ctx *ctx;
	const struct haccel__mem_ops *mem;
	struct haccel_kv_pool_config cfg;

	uint32_t P;                 /* page_tokens */
	uint32_t n_pages;
	uint32_t max_pages_per_seq;
	uint32_t n_regions;         /* n_layers * n_streams */
	bool prefix;                /* prefix caching on */

	void *base;                 /* backend allocation */
	uint64_t bytes;
	uint64_t page_bytes;
	void **region_base;         /* [layer * n_streams + stream] */
	uint32_t *region_bpt;       /* bytes per token of each region */
	struct haccel__mem_copy *cow; /* one descriptor per region */

	/* Page metadata, struct-of-arrays so the alloc path touches little. */
	uint32_t *ref;
	uint8_t *state;
	uint32_t *free_ids;         /* stack */
	uint32_t n_free;
	uint32_t *lru_prev, *lru_next;
	uint32_t lru_head, lru_tail, n_evictable;
	uint64_t *key;              /* chained key, set when the page fills */
	uint64_t *serial;           /* != 0 iff in the prefix table */
	uint64_t *link;             /* identity children record as parent */
	uint64_t *parent;           /* parent's link (0 for a first page) */
	int32_t *tokens;            /* [page][P] token ids */
	uint64_t next_serial;
	uint64_t ext_refs;          /* references held through pages_get */
	uint32_t *ext;              /* per page: how many of them it holds */
	uint64_t key_mask;          /* all ones; narrowed by tests to force collisions */
	struct haccel__map map;

	struct kv_seq *seqs;
	uint32_t *bt;               /* [max_seqs][max_pages_per_seq] */
	uint32_t seq_free_head;
	uint32_t n_seqs_active;

	struct haccel_kv_stats st;  /* cumulative counters only */
};

/* ------------------------------------------------------------------------ */
/* Keys                                                                     */

uint64_t haccel__kv_root_key(void)
{
	return 0x6861636365006b76ull; /* "hacce\0kv": any fixed seed */
}

uint64_t haccel__kv_chain_key(uint64_t parent_key, const int32_t *tokens,
			      uint32_t n)
{
	return XXH3_64bits_withSeed(tokens, (size_t)n * sizeof(*tokens),
				    parent_key);
}

static inline uint64_t page_key(const struct haccel_kv_pool *p,
				uint64_t parent_key, const int32_t *toks)
{
	return haccel__kv_chain_key(parent_key, toks, p->P) & p->key_mask;
}

/* ------------------------------------------------------------------------ */
/* Page lists                                                               */

static inline void lru_remove(struct haccel_kv_pool *p, uint32_t id)
{
	uint32_t pr = p->lru_prev[id], nx = p->lru_next[id];

	if (pr != NONE)
		p->lru_next[pr] = nx;
	else
		p->lru_head = nx;
	if (nx != NONE)
		p->lru_prev[nx] = pr;
	else
		p->lru_tail = pr;
	p->lru_prev[id] = p->lru_next[id] = NONE;
	p->n_evictable--;
}

static inline void lru_push_tail(struct haccel_kv_pool *p, uint32_t id)
{
	p->lru_prev[id] = p->lru_tail;
	p->lru_next[id] = NONE;
	if (p->lru_tail != NONE)
		p->lru_next[p->lru_tail] = id;
	else
		p->lru_head = id;
	p->lru_tail = id;
	p->n_evictable++;
}

static void uncache(struct haccel_kv_pool *p, uint32_t id)
{
	int ret = haccel__map_remove(&p->map, p->key[id], id);

	(void)ret; /* cannot fail: serial != 0 means the entry is there */
	p->serial[id] = 0;
}

/* Take one page; the caller checked n_free + n_evictable > 0. */
static inline uint32_t take_page(struct haccel_kv_pool *p)
{
	uint32_t id;

	if (HACCEL__LIKELY(p->n_free)) {
		id = p->free_ids[--p->n_free];
	} else {
		/* Oldest unreferenced cached page: its prefix is forgotten. */
		id = p->lru_head;
		lru_remove(p, id);
		uncache(p, id);
		p->st.evictions++;
	}
	p->ref[id] = 1;
	p->state[id] = PAGE_USED;
	p->st.pages_allocated++;
	return id;
}

/* Drop one reference; at zero the page keeps its cached prefix or is freed. */
static inline void release_page(struct haccel_kv_pool *p, uint32_t id)
{
	if (--p->ref[id])
		return;
	if (p->serial[id]) {
		p->state[id] = PAGE_EVICTABLE;
		lru_push_tail(p, id);
	} else {
		p->state[id] = PAGE_FREE;
		p->free_ids[p->n_free++] = id;
	}
}

static inline uint32_t available(const struct haccel_kv_pool *p)
{
	return p->n_free + p->n_evictable;
}

/* ------------------------------------------------------------------------ */
/* Creation                                                                 */

void haccel_kv_pool_config_init(struct haccel_kv_pool_config *cfg)
{
	if (!cfg)
		return;
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
	cfg->page_tokens = HACCEL_KV_PAGE_TOKENS;
	cfg->n_layers = 1;
	cfg->n_streams = 2;
	cfg->max_seqs = 256;
	cfg->max_seq_tokens = 131072;
	cfg->mem = HACCEL_MEM_HOST;
	snprintf(cfg->streams[0].name, sizeof(cfg->streams[0].name), "kv");
	cfg->streams[0].bytes_per_token = HACCEL_KV_TOKEN_BYTES;
	snprintf(cfg->streams[1].name, sizeof(cfg->streams[1].name), "index_k");
	cfg->streams[1].bytes_per_token = HACCEL_INDEX_K_TOKEN_BYTES;
}

/* Bytes of page memory for n pages (regions 4 KiB aligned); false on overflow. */
static bool layout_bytes(const struct haccel_kv_pool_config *c, uint64_t n,
			 uint64_t *total)
{
	uint64_t t = 0, r;

	for (uint32_t l = 0; l < c->n_layers; l++)
		for (uint32_t s = 0; s < c->n_streams; s++) {
			if (!haccel__mul_u64(n, c->page_tokens, &r) ||
			    !haccel__mul_u64(r, c->streams[s].bytes_per_token, &r) ||
			    !haccel__align_u64(r, REGION_ALIGN, &r) ||
			    !haccel__add_u64(t, r, &t))
				return false;
		}
	*total = t;
	return true;
}

static int validate_config(struct haccel_ctx *ctx,
			   const struct haccel_kv_pool_config *c)
{
	if (c->flags & ~HACCEL_KV_NO_PREFIX_CACHE || c->reserved) {
		haccel__err(ctx, "kv pool: unknown flags 0x%x or non-zero reserved field",
			    c->flags);
		return -EINVAL;
	}
	if (c->page_tokens == 0 || c->page_tokens > 4096 || c->n_layers == 0 ||
	    c->n_layers > 4096 || c->n_streams == 0 ||
	    c->n_streams > HACCEL_KV_MAX_STREAMS || c->max_seqs == 0 ||
	    c->max_seqs > MAX_SEQS || c->max_seq_tokens == 0) {
		haccel__err(ctx, "kv pool: page_tokens (1..4096), n_layers (1..4096), n_streams (1..%d), max_seqs (1..%u) and max_seq_tokens must be set",
			    HACCEL_KV_MAX_STREAMS, MAX_SEQS);
		return -EINVAL;
	}
	for (uint32_t s = 0; s < c->n_streams; s++) {
		const struct haccel_kv_stream *st = &c->streams[s];

		if (st->bytes_per_token == 0 || st->reserved ||
		    memchr(st->name, '\0', sizeof(st->name)) == NULL ||
		    st->name[0] == '\0') {
			haccel__err(ctx, "kv pool: stream %u needs a name (< %d chars) and bytes_per_token > 0",
				    s, HACCEL_KV_STREAM_NAME_MAX);
			return -EINVAL;
		}
		for (uint32_t t = 0; t < s; t++)
			if (!strcmp(c->streams[t].name, st->name)) {
				haccel__err(ctx, "kv pool: stream name \"%s\" used twice",
					    st->name);
				return -EINVAL;
			}
		/* A region's page_bytes is a uint32_t (struct haccel_kv_region). */
		if ((uint64_t)c->page_tokens * st->bytes_per_token > UINT32_MAX) {
			haccel__err(ctx, "kv pool: stream \"%s\": %u tokens x %u bytes per token make a page of 4 GiB or more",
				    st->name, c->page_tokens, st->bytes_per_token);
			return -EOVERFLOW;
		}
	}
	for (uint32_t s = c->n_streams; s < HACCEL_KV_MAX_STREAMS; s++)
		if (c->streams[s].bytes_per_token || c->streams[s].name[0] ||
		    c->streams[s].reserved) {
			haccel__err(ctx, "kv pool: streams[%u] set beyond n_streams=%u",
				    s, c->n_streams);
			return -EINVAL;
		}
	if (haccel__mem_ops_get(c->mem) == NULL) {
		haccel__err(ctx, "kv pool: unknown memory kind %u", c->mem);
		return -EINVAL;
	}
	return 0;
}

/* Pages: explicit, or the most that budget_bytes holds. */
static int size_pool(struct haccel_ctx *ctx, const struct haccel_kv_pool_config *c,
		     uint32_t *n_pages, uint64_t *bytes)
{
	uint64_t per_page = 0, n, total;

	if (c->n_pages) {
		n = c->n_pages;
	} else {
		if (!c->budget_bytes) {
			haccel__err(ctx, "kv pool: set n_pages or budget_bytes");
			return -EINVAL;
		}
		for (uint32_t s = 0; s < c->n_streams; s++)
			per_page += (uint64_t)c->page_tokens *
				    c->streams[s].bytes_per_token * c->n_layers;
		n = c->budget_bytes / per_page;
		/* Region alignment may cost a little: step down until it fits. */
		while (n && (!layout_bytes(c, n, &total) || total > c->budget_bytes))
			n--;
		if (n == 0) {
			haccel__err(ctx, "kv pool: budget of %llu bytes holds no page of %llu bytes",
				    (unsigned long long)c->budget_bytes,
				    (unsigned long long)per_page);
			return -EINVAL;
		}
	}
	/* Page ids and slot indices must stay representable. */
	if (n >= NONE || (uint64_t)n * c->page_tokens > (uint64_t)INT64_MAX / 2)
		return -EOVERFLOW;
	if (!layout_bytes(c, n, &total))
		return -EOVERFLOW;
	*n_pages = (uint32_t)n;
	*bytes = total;
	return 0;
}

static uint64_t meta_bytes(const struct haccel_kv_pool *p);

/* Free the host bookkeeping arrays (NULL ones too: calloc'd pool struct). */
static void free_meta(struct haccel_kv_pool *p)
{
	free(p->bt);
	free(p->seqs);
	free(p->tokens);
	free(p->parent);
	free(p->link);
	free(p->serial);
	free(p->key);
	free(p->lru_next);
	free(p->lru_prev);
	free(p->free_ids);
	free(p->state);
	free(p->ref);
	free(p->ext);
	free(p->cow);
	free(p->region_bpt);
	free(p->region_base);
}

#define CALLOC_N(ptr, n)                                                      \
	do {                                                                  \
		(ptr) = calloc((size_t)(n) + 1, sizeof(*(ptr))); \
		if (!(ptr))                                                   \
			goto err_meta;                                        \
	} while (0)

int haccel_kv_pool_create(struct haccel_ctx *ctx,
			  const struct haccel_kv_pool_config *cfg,
			  struct haccel_kv_pool **out)
{
	struct haccel_kv_pool *p;
	struct haccel_kv_pool_config c;
	uint32_t n_pages;
	uint64_t bytes, off = 0;
	int ret;

	if (!ctx || !cfg || !out)
		return -EINVAL;
	*out = NULL;
	haccel_kv_pool_config_init(&c);
	ret = haccel__config_copy(&c, sizeof(c), cfg, sizeof(c));
	if (ret) {
		haccel__err(ctx, "kv pool: config size %u not supported", cfg->size);
		return ret;
	}
	ret = validate_config(ctx, &c);
	if (ret)
		return ret;
	ret = size_pool(ctx, &c, &n_pages, &bytes);
	if (ret)
		return ret;

	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->ctx = ctx;
	p->cfg = c;
	p->mem = haccel__mem_ops_get(c.mem);
	p->P = c.page_tokens;
	p->n_pages = n_pages;
	p->max_pages_per_seq = (uint32_t)(((uint64_t)c.max_seq_tokens + p->P - 1) / p->P);
	p->n_regions = c.n_layers * c.n_streams;
	p->prefix = !(c.flags & HACCEL_KV_NO_PREFIX_CACHE);
	p->key_mask = ~0ull;
	p->bytes = bytes;
	for (uint32_t s = 0; s < c.n_streams; s++)
		p->page_bytes += (uint64_t)p->P * c.streams[s].bytes_per_token;
	p->page_bytes *= c.n_layers;

	uint64_t bt_len;
	if (!haccel__mul_u64(c.max_seqs, p->max_pages_per_seq, &bt_len) ||
	    bt_len > ((uint64_t)1 << 34)) {
		haccel__err(ctx, "kv pool: block tables of %u sequences x %u pages are too large",
			    c.max_seqs, p->max_pages_per_seq);
		ret = -EOVERFLOW;
		goto err_pool;
	}

	ret = -ENOMEM;
	CALLOC_N(p->region_base, p->n_regions);
	CALLOC_N(p->region_bpt, p->n_regions);
	CALLOC_N(p->cow, p->n_regions);
	CALLOC_N(p->ref, n_pages);
	CALLOC_N(p->ext, n_pages);
	CALLOC_N(p->state, n_pages);
	CALLOC_N(p->free_ids, n_pages);
	CALLOC_N(p->lru_prev, n_pages);
	CALLOC_N(p->lru_next, n_pages);
	CALLOC_N(p->key, n_pages);
	CALLOC_N(p->serial, n_pages);
	CALLOC_N(p->link, n_pages);
	CALLOC_N(p->parent, n_pages);
	CALLOC_N(p->tokens, (uint64_t)n_pages * p->P);
	CALLOC_N(p->seqs, c.max_seqs);
	CALLOC_N(p->bt, bt_len);
	if (haccel__map_init(&p->map, n_pages))
		goto err_meta;

	ret = p->mem->alloc(ctx, bytes, &p->base);
	if (ret) {
		haccel__err(ctx, "kv pool: cannot allocate %llu bytes of %s memory for %u pages",
			    (unsigned long long)bytes, p->mem->name, n_pages);
		goto err_map;
	}
	for (uint32_t l = 0; l < c.n_layers; l++)
		for (uint32_t s = 0; s < c.n_streams; s++) {
			uint32_t r = l * c.n_streams + s;
			uint64_t rb = (uint64_t)n_pages * p->P *
				      c.streams[s].bytes_per_token;

			p->region_base[r] = (char *)p->base + off;
			p->region_bpt[r] = c.streams[s].bytes_per_token;
			haccel__align_u64(rb, REGION_ALIGN, &rb);
			off += rb;
		}

	/* Pop order 0, 1, 2...: low page ids first, which keeps tests readable. */
	for (uint32_t i = 0; i < n_pages; i++) {
		p->free_ids[i] = n_pages - 1 - i;
		p->lru_prev[i] = p->lru_next[i] = NONE;
	}
	p->n_free = n_pages;
	p->lru_head = p->lru_tail = NONE;
	for (uint32_t s = 0; s < c.max_seqs; s++)
		p->seqs[s].next_free = s + 1 < c.max_seqs ? s + 1 : NONE;
	p->seq_free_head = 0;
	p->next_serial = 1;

	haccel__info(ctx, "kv pool: %u pages x %u tokens, %u layers x %u streams, %.1f MiB %s memory, %.1f MiB metadata",
		     n_pages, p->P, c.n_layers, c.n_streams,
		     (double)bytes / (1 << 20), p->mem->name,
		     (double)meta_bytes(p) / (1 << 20));
	*out = p;
	return 0;

err_map:
	haccel__map_fini(&p->map);
err_meta:
	free_meta(p);
err_pool:
	free(p);
	return ret;
}

void haccel_kv_pool_destroy(struct haccel_kv_pool *p)
{
	if (!p)
		return;
	p->mem->free(p->ctx, p->base, p->bytes);
	haccel__map_fini(&p->map);
	free_meta(p);
	free(p);
}

static uint64_t meta_bytes(const struct haccel_kv_pool *p)
{
	uint64_t n = p->n_pages;

	return n * (sizeof(*p->ref) + sizeof(*p->ext) + sizeof(*p->state) + sizeof(*p->free_ids) +
		    sizeof(*p->lru_prev) + sizeof(*p->lru_next) + sizeof(*p->key) +
		    sizeof(*p->serial) + sizeof(*p->link) + sizeof(*p->parent) +
		    (uint64_t)p->P * sizeof(*p->tokens)) +
	       haccel__map_bytes(&p->map) +
	       (uint64_t)p->cfg.max_seqs * (sizeof(struct kv_seq) +
					   (uint64_t)p->max_pages_per_seq * sizeof(uint32_t));
}

int haccel_kv_pool_info(const struct haccel_kv_pool *p,
			struct haccel_kv_pool_info *out)
{
	if (!p || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->page_tokens = p->P;
	out->n_pages = p->n_pages;
	out->n_layers = p->cfg.n_layers;
	out->n_streams = p->cfg.n_streams;
	out->max_seqs = p->cfg.max_seqs;
	out->max_pages_per_seq = p->max_pages_per_seq;
	out->page_bytes = p->page_bytes;
	out->bytes_total = p->bytes;
	out->meta_bytes = meta_bytes(p);
	out->block_tables = p->bt;
	return 0;
}

int haccel_kv_pool_region(const struct haccel_kv_pool *p, uint32_t layer,
			  uint32_t stream, struct haccel_kv_region *out)
{
	uint32_t r;

	if (!p || !out || layer >= p->cfg.n_layers || stream >= p->cfg.n_streams)
		return -EINVAL;
	r = layer * p->cfg.n_streams + stream;
	out->base = p->region_base[r];
	out->bytes_per_token = p->region_bpt[r];
	/* Exact: creation refuses a stream whose page is 4 GiB or more. */
	out->page_bytes = (uint32_t)((uint64_t)p->P * p->region_bpt[r]);
	out->bytes = (uint64_t)p->n_pages * out->page_bytes;
	return 0;
}

int haccel_kv_pool_stats(const struct haccel_kv_pool *p,
			 struct haccel_kv_stats *out)
{
	if (!p || !out)
		return -EINVAL;
	*out = p->st;
	out->pages_total = p->n_pages;
	out->pages_free = p->n_free;
	out->pages_evictable = p->n_evictable;
	out->pages_used = p->n_pages - p->n_free - p->n_evictable;
	out->pages_cached = p->map.count;
	out->seqs_active = p->n_seqs_active;
	out->seqs_max = p->cfg.max_seqs;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Sequences                                                                */

static inline uint32_t *row(const struct haccel_kv_pool *p, uint32_t seq)
{
	return p->bt + (uint64_t)seq * p->max_pages_per_seq;
}

static int seq_lookup(const struct haccel_kv_pool *p, uint32_t seq)
{
	if (!p)
		return -EINVAL;
	if (seq >= p->cfg.max_seqs)
		return -EINVAL;
	return p->seqs[seq].active ? 0 : -ENOENT;
}

static int seq_take(struct haccel_kv_pool *p, uint32_t *seq)
{
	uint32_t s = p->seq_free_head;

	if (s == NONE)
		return -ENOSPC;
	p->seq_free_head = p->seqs[s].next_free;
	p->seqs[s] = (struct kv_seq){ .active = 1, .next_free = NONE };
	p->n_seqs_active++;
	*seq = s;
	return 0;
}

static void seq_put(struct haccel_kv_pool *p, uint32_t s)
{
	p->seqs[s].active = 0;
	p->seqs[s].n_tokens = p->seqs[s].n_pages = 0;
	p->seqs[s].next_free = p->seq_free_head;
	p->seq_free_head = s;
	p->n_seqs_active--;
}

/*
 * The cached page holding toks[0..P) right after the page whose link is
 * parent_link, or NONE. Verified token for token: a key match alone never
 * serves a page.
 */
static uint32_t cache_find(const struct haccel_kv_pool *p, uint64_t key,
			   uint64_t parent_link, const int32_t *toks)
{
	uint64_t cur = haccel__map_home(&p->map, key);
	uint32_t c;

	while ((c = haccel__map_next(&p->map, key, &cur)) != HACCEL__MAP_EMPTY) {
		if (p->parent[c] == parent_link &&
		    !memcmp(p->tokens + (uint64_t)c * p->P, toks,
			    (size_t)p->P * sizeof(*toks)))
			return c;
	}
	return NONE;
}

/* A page of seq's row just filled: give it its key and cache entry. */
static void page_filled(struct haccel_kv_pool *p, const uint32_t *r, uint32_t idx)
{
	uint32_t id = r[idx];
	uint64_t parent_key = idx ? p->key[r[idx - 1]] : haccel__kv_root_key();
	uint64_t parent_link = idx ? p->link[r[idx - 1]] : 0;
	const int32_t *toks = p->tokens + (uint64_t)id * p->P;
	uint64_t key = page_key(p, parent_key, toks);
	uint32_t twin;

	p->key[id] = key;
	p->parent[id] = parent_link;
	twin = cache_find(p, key, parent_link, toks);
	if (twin != NONE) {
		/* Same content already cached: hang children under it. */
		p->link[id] = p->link[twin];
		return;
	}
	p->serial[id] = p->next_serial++;
	p->link[id] = p->serial[id];
	/* Cannot fail: at most one entry per page and the map holds n_pages. */
	(void)haccel__map_insert(&p->map, key, id);
}

/* Walk the cache along prompt; fill hits[] (may be NULL), return the count. */
static uint32_t match_prefix(const struct haccel_kv_pool *p,
			     const int32_t *prompt, uint32_t n_prompt,
			     uint32_t *hits, uint32_t *n_evictable_hits)
{
	uint64_t parent_key = haccel__kv_root_key(), parent_link = 0;
	uint32_t n_full = n_prompt / p->P, i, ev = 0;

	if (n_full > p->max_pages_per_seq)
		n_full = p->max_pages_per_seq;
	for (i = 0; i < n_full; i++) {
		const int32_t *toks = prompt + (uint64_t)i * p->P;
		uint64_t key = page_key(p, parent_key, toks);
		uint32_t c = cache_find(p, key, parent_link, toks);

		if (c == NONE)
			break;
		if (hits)
			hits[i] = c;
		if (p->ref[c] == 0)
			ev++;
		parent_key = key;
		parent_link = p->link[c];
	}
	if (n_evictable_hits)
		*n_evictable_hits = ev;
	return i;
}

int haccel_kv_seq_create(struct haccel_kv_pool *p, const int32_t *prompt,
			 uint32_t n_prompt, uint32_t *seq, uint32_t *n_reused)
{
	uint32_t s, hits = 0;
	int ret;

	if (!p || !seq || (n_prompt && !prompt))
		return -EINVAL;
	ret = seq_take(p, &s);
	if (ret)
		return ret;
	if (n_prompt && p->prefix) {
		uint32_t *r = row(p, s);

		hits = match_prefix(p, prompt, n_prompt, r, NULL);
		for (uint32_t i = 0; i < hits; i++) {
			uint32_t c = r[i];

			if (p->ref[c]++ == 0) {
				lru_remove(p, c);
				p->state[c] = PAGE_USED;
			}
		}
		p->seqs[s].n_pages = hits;
		p->seqs[s].n_tokens = hits * p->P;
		p->st.prefix_queries++;
		p->st.prefix_tokens_queried += n_prompt;
		p->st.prefix_tokens_reused += (uint64_t)hits * p->P;
		if (hits)
			p->st.prefix_hits++;
	}
	*seq = s;
	if (n_reused)
		*n_reused = hits * p->P;
	return 0;
}

/* Pages an append of n tokens takes: new pages plus one for copy-on-write. */
static uint32_t append_need(const struct haccel_kv_pool *p, const struct kv_seq *q,
			    const uint32_t *r, uint32_t n, bool *cow)
{
	uint64_t end = (uint64_t)q->n_tokens + n;
	uint32_t pages_after = (uint32_t)((end + p->P - 1) / p->P);
	uint32_t off = q->n_tokens % p->P;

	*cow = n && off && p->ref[r[q->n_pages - 1]] > 1;
	return pages_after - q->n_pages + (*cow ? 1 : 0);
}

int haccel_kv_seq_pages_needed(const struct haccel_kv_pool *p, uint32_t seq,
			       uint32_t n, uint32_t *pages)
{
	int ret = seq_lookup(p, seq);
	bool cow;

	if (ret)
		return ret;
	if (!pages)
		return -EINVAL;
	if ((uint64_t)p->seqs[seq].n_tokens + n > p->cfg.max_seq_tokens)
		return -E2BIG;
	*pages = append_need(p, &p->seqs[seq], row(p, seq), n, &cow);
	return 0;
}

/* Copy the first n_tok tokens of page src into dst, in every region. */
static int copy_page(struct haccel_kv_pool *p, uint32_t dst, uint32_t src,
		     uint32_t n_tok)
{
	for (uint32_t r = 0; r < p->n_regions; r++) {
		uint64_t pb = (uint64_t)p->P * p->region_bpt[r];

		p->cow[r].dst = (char *)p->region_base[r] + dst * pb;
		p->cow[r].src = (char *)p->region_base[r] + src * pb;
		p->cow[r].bytes = (uint64_t)n_tok * p->region_bpt[r];
	}
	memcpy(p->tokens + (uint64_t)dst * p->P, p->tokens + (uint64_t)src * p->P,
	       (size_t)n_tok * sizeof(*p->tokens));
	return p->mem->copy(p->ctx, p->cow, p->n_regions);
}

int haccel_kv_seq_append(struct haccel_kv_pool *p, uint32_t seq,
			 const int32_t *tokens, uint32_t n, int64_t *slots)
{
	struct kv_seq *q;
	uint32_t *r, need, off, done = 0;
	bool cow;
	int ret = seq_lookup(p, seq);

	if (ret)
		return ret;
	if (n && !tokens)
		return -EINVAL;
	q = &p->seqs[seq];
	r = row(p, seq);
	if ((uint64_t)q->n_tokens + n > p->cfg.max_seq_tokens)
		return -E2BIG;
	need = append_need(p, q, r, n, &cow);
	if (need > available(p))
		return -ENOMEM;

	off = q->n_tokens % p->P;
	if (n && off && !cow && p->serial[r[q->n_pages - 1]])
		uncache(p, r[q->n_pages - 1]);
	if (cow) {
		uint32_t old = r[q->n_pages - 1], nw = take_page(p);

		ret = copy_page(p, nw, old, off);
		if (ret) {
			/*
			 * The backend's copy failed (a device error). The
			 * sequence is unchanged and nw goes back to the free
			 * stack, but taking nw may have evicted a cached page:
			 * that prefix is gone from the cache for good (and
			 * counted in evictions and pages_allocated).
			 */
			release_page(p, nw);
			return ret;
		}
		r[q->n_pages - 1] = nw;
		release_page(p, old);
		p->st.cow_copies++;
	}
	while (done < n) {
		uint32_t id, chunk;
		int32_t *dst;

		if (off == 0)
			r[q->n_pages++] = take_page(p);
		id = r[q->n_pages - 1];
		chunk = p->P - off;
		if (chunk > n - done)
			chunk = n - done;
		dst = p->tokens + (uint64_t)id * p->P + off;
		memcpy(dst, tokens + done, (size_t)chunk * sizeof(*tokens));
		if (slots) {
			int64_t s0 = (int64_t)id * p->P + off;

			for (uint32_t i = 0; i < chunk; i++)
				slots[done + i] = s0 + i;
		}
		done += chunk;
		off += chunk;
		if (off == p->P) {
			if (p->prefix)
				page_filled(p, r, q->n_pages - 1);
			off = 0;
		}
	}
	q->n_tokens += n;
	return 0;
}

int haccel_kv_seq_fork(struct haccel_kv_pool *p, uint32_t seq, uint32_t *child)
{
	const struct kv_seq *q;
	uint32_t c, *dst;
	const uint32_t *src;
	int ret = seq_lookup(p, seq);

	if (ret)
		return ret;
	if (!child)
		return -EINVAL;
	ret = seq_take(p, &c);
	if (ret)
		return ret;
	q = &p->seqs[seq];
	src = row(p, seq);
	dst = row(p, c);
	for (uint32_t i = 0; i < q->n_pages; i++) {
		dst[i] = src[i];
		p->ref[src[i]]++;
	}
	p->seqs[c].n_pages = q->n_pages;
	p->seqs[c].n_tokens = q->n_tokens;
	*child = c;
	return 0;
}

/* Release pages [keep, n_pages) of seq, last first: a sequence's tail is
 * then the first of its cached pages to be evicted, its root the last. */
static void release_tail(struct haccel_kv_pool *p, uint32_t seq, uint32_t keep)
{
	struct kv_seq *q = &p->seqs[seq];
	uint32_t *r = row(p, seq);

	while (q->n_pages > keep)
		release_page(p, r[--q->n_pages]);
}

int haccel_kv_seq_truncate(struct haccel_kv_pool *p, uint32_t seq,
			   uint32_t n_tokens)
{
	int ret = seq_lookup(p, seq);

	if (ret)
		return ret;
	if (n_tokens > p->seqs[seq].n_tokens)
		return -EINVAL;
	release_tail(p, seq, (uint32_t)(((uint64_t)n_tokens + p->P - 1) / p->P));
	p->seqs[seq].n_tokens = n_tokens;
	return 0;
}

int haccel_kv_seq_free(struct haccel_kv_pool *p, uint32_t seq)
{
	int ret = seq_lookup(p, seq);

	if (ret)
		return ret;
	release_tail(p, seq, 0);
	seq_put(p, seq);
	return 0;
}

int haccel_kv_seq_block_table(const struct haccel_kv_pool *p, uint32_t seq,
			      const uint32_t **pages, uint32_t *n_pages,
			      uint32_t *n_tokens)
{
	int ret = seq_lookup(p, seq);

	if (ret)
		return ret;
	if (pages)
		*pages = row(p, seq);
	if (n_pages)
		*n_pages = p->seqs[seq].n_pages;
	if (n_tokens)
		*n_tokens = p->seqs[seq].n_tokens;
	return 0;
}

int haccel_kv_seq_prefix_key(const struct haccel_kv_pool *p, uint32_t seq,
			     uint32_t page_index, uint64_t *key)
{
	int ret = seq_lookup(p, seq);

	if (ret)
		return ret;
	if (!key)
		return -EINVAL;
	if (!p->prefix)
		return -ENOTSUP;
	if ((uint64_t)page_index >= p->seqs[seq].n_tokens / p->P)
		return -ERANGE;
	*key = p->key[row(p, seq)[page_index]];
	return 0;
}

int haccel_kv_admit(const struct haccel_kv_pool *p, const int32_t *prompt,
		    uint32_t n_prompt, uint32_t max_new,
		    struct haccel_kv_admission *out)
{
	uint64_t total = (uint64_t)n_prompt + max_new;
	uint32_t hits = 0, ev = 0;

	if (!p || !out)
		return -EINVAL;
	if (total > p->cfg.max_seq_tokens)
		return -E2BIG;
	if (prompt && n_prompt && p->prefix)
		hits = match_prefix(p, prompt, n_prompt, NULL, &ev);
	memset(out, 0, sizeof(*out));
	out->pages_needed = (uint32_t)((total + p->P - 1) / p->P);
	out->pages_reused = hits;
	out->pages_new = out->pages_needed - hits;
	out->pages_available = available(p) - ev;
	out->tokens_reused = hits * p->P;
	out->fits = out->pages_new <= out->pages_available;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Pages outside sequences                                                  */

/* Swap-in's mark of a page it has checked, in its reference count, whose
 * top bit no reference sets: a page has at most one reference from each
 * sequence (max_seqs < 2^31) and one from haccel_kv_pages_get. */
#define SWAP_MARK 0x80000000u

/*
 * A page swap_in may write: one the caller holds alone. A free page has no
 * owner; an evictable one is held by the prefix cache only, which would
 * then serve the written bytes for its tokens; a page with more than one
 * reference is another sequence's KV as well (a fork, prefix hits of
 * several sequences), and a swap has no copy-on-write to give the writer
 * its own copy.
 */
static int swap_in_check(struct haccel_kv_pool *p, uint32_t id)
{
	if (p->state[id] == PAGE_FREE)
		return haccel__fail(p->ctx, -EINVAL,
				    "kv swap in: page %u is free: write only pages you hold (haccel_kv_pages_get, a block table)",
				    id);
	if (p->state[id] == PAGE_EVICTABLE)
		return haccel__fail(p->ctx, -EINVAL,
				    "kv swap in: page %u is unreferenced (evictable, kept by the prefix cache only): write only pages you hold",
				    id);
	if (p->ref[id] > 1)
		return haccel__fail(p->ctx, -EBUSY,
				    "kv swap in: page %u is shared (%u references): writing it would change every holder's KV",
				    id, p->ref[id]);
	return 0;
}

/* Swap pages to or from host memory, in rounds of a fixed batch of copy
 * descriptors (no allocation). Every page is checked before anything is
 * written. */
static int pages_swap(struct haccel_kv_pool *p, const uint32_t *pages, uint32_t n, char *host,
		      uint64_t host_bytes, int to_host)
{
	struct haccel__mem_copy c[256];
	uint32_t nc = 0;
	uint64_t off = 0;
	int ret = 0;

	if (!p || (n && (!pages || !host)))
		return -EINVAL;
	if (host_bytes / (p->page_bytes ? p->page_bytes : 1) < n)
		return haccel__fail(p->ctx, -EINVAL, "kv swap: %u pages need %llu host bytes, %llu given",
				    n, (unsigned long long)(n * p->page_bytes),
				    (unsigned long long)host_bytes);
	/*
	 * Swap-in marks each page it has checked in its reference count's
	 * top bit (a page it may write holds exactly one reference), so a
	 * page listed twice, whose bytes would be whichever copy landed last,
	 * is refused like the others; the marks go before it returns.
	 */
	uint32_t i;

	for (i = 0; !ret && i < n; i++) {
		if (pages[i] >= p->n_pages)
			ret = haccel__fail(p->ctx, -EINVAL, "kv swap: page %u out of range (%u pages)",
					   pages[i], p->n_pages);
		else if (!to_host && (p->ref[pages[i]] & SWAP_MARK))
			ret = haccel__fail(p->ctx, -EINVAL,
					   "kv swap in: page %u is listed twice: its bytes would be either copy",
					   pages[i]);
		else if (!to_host && !(ret = swap_in_check(p, pages[i])))
			p->ref[pages[i]] |= SWAP_MARK;
	}
	/* (a refused entry, maybe out of range, was not marked) */
	if (!to_host)
		for (uint32_t j = 0; j < (ret ? i - 1 : i); j++)
			p->ref[pages[j]] &= ~SWAP_MARK;
	if (ret)
		return ret;
	/*
	 * All pass. A page the caller holds alone may still be in the prefix
	 * table (it filled in an append, or a prefix hit attached it): it
	 * leaves the table before it is written, as a truncated page does
	 * before an append, so the cache never serves bytes that were not
	 * computed from its tokens.
	 */
	if (!to_host)
		for (i = 0; i < n; i++)
			if (p->serial[pages[i]])
				uncache(p, pages[i]);
	for (i = 0; !ret && i < n; i++)
		for (uint32_t r = 0; !ret && r < p->n_regions; r++) {
			uint64_t pb = (uint64_t)p->P * p->region_bpt[r];
			char *dev = (char *)p->region_base[r] + (uint64_t)pages[i] * pb;

			c[nc++] = to_host ? (struct haccel__mem_copy){ host + off, dev, pb } :
					    (struct haccel__mem_copy){ dev, host + off, pb };
			off += pb;
			if (nc == sizeof(c) / sizeof(c[0])) {
				ret = p->mem->swap(p->ctx, c, nc, to_host);
				nc = 0;
			}
		}
	if (!ret && nc)
		ret = p->mem->swap(p->ctx, c, nc, to_host);
	return ret;
}

int haccel_kv_pages_swap_out(struct haccel_kv_pool *p, const uint32_t *pages, uint32_t n,
			     void *host, uint64_t host_bytes)
{
	return pages_swap(p, pages, n, host, host_bytes, 1);
}

int haccel_kv_pages_swap_in(struct haccel_kv_pool *p, const uint32_t *pages, uint32_t n,
			    const void *host, uint64_t host_bytes)
{
	return pages_swap(p, pages, n, (char *)(uintptr_t)host, host_bytes, 0);
}

int haccel_kv_pages_get(struct haccel_kv_pool *p, uint32_t n, uint32_t *pages)
{
	if (!p || (n && !pages))
		return -EINVAL;
	if (n > available(p))
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		pages[i] = take_page(p);
		p->ext[pages[i]]++;
	}
	p->ext_refs += n;
	return 0;
}

int haccel_kv_pages_put(struct haccel_kv_pool *p, const uint32_t *pages,
			uint32_t n)
{
	uint32_t i;

	if (!p || (n && !pages))
		return -EINVAL;
	if ((uint64_t)n > p->ext_refs)
		return -EINVAL;
	/*
	 * Two passes keep it all or nothing, duplicates included: first drop
	 * the references (undoing them if one is bad), then place each page
	 * that reached zero exactly once (state is still USED the first time).
	 */
	for (i = 0; i < n; i++) {
		uint32_t id = pages[i];

		/* Only references that pages_get handed out: a page a sequence
		 * holds, or one put more times than it was got, is refused. */
		if (id >= p->n_pages || p->ext[id] == 0)
			break;
		p->ext[id]--;
		p->ref[id]--;
	}
	if (i < n) {
		uint32_t bad = pages[i];

		while (i--) {
			p->ext[pages[i]]++;
			p->ref[pages[i]]++;
		}
		return haccel__fail(p->ctx, -EINVAL, "kv pages put: page %u %s", bad,
				    bad >= p->n_pages ? "is out of range" :
				    "holds no reference from haccel_kv_pages_get()");
	}
	for (i = 0; i < n; i++) {
		uint32_t id = pages[i];

		if (p->ref[id] || p->state[id] != PAGE_USED)
			continue;
		p->ref[id] = 1;
		release_page(p, id);
	}
	p->ext_refs -= n;
	return 0;
}

int haccel_kv_prefix_cache_reset(struct haccel_kv_pool *p)
{
	int n;

	if (!p)
		return -EINVAL;
	n = (int)p->map.count;
	for (uint32_t id = 0; id < p->n_pages; id++) {
		if (!p->serial[id])
			continue;
		p->serial[id] = 0;
		/* Content stays valid for its holders; only findability goes.
		 * Links keep their values, so no child can match them again
		 * (they are no longer in the table to be walked through). */
		if (p->state[id] == PAGE_EVICTABLE) {
			lru_remove(p, id);
			p->state[id] = PAGE_FREE;
			p->free_ids[p->n_free++] = id;
		}
	}
	haccel__map_clear(&p->map);
	return n;
}

/* ------------------------------------------------------------------------ */
/* Invariants                                                               */

uint32_t haccel__kv_page_ref(const struct haccel_kv_pool *p, uint32_t page)
{
	return page < p->n_pages ? p->ref[page] : 0;
}

#define FAIL(...)                                         \
	do {                                              \
		snprintf(why, why_len, __VA_ARGS__);      \
		ret = -EBADMSG;                           \
		goto out;                                 \
	} while (0)

int haccel__kv_pool_check(const struct haccel_kv_pool *p, char *why,
			  size_t why_len)
{
	uint32_t *occ = calloc(p->n_pages ? p->n_pages : 1, sizeof(*occ));
	uint8_t *seen = calloc(p->n_pages ? p->n_pages : 1, 1);
	uint64_t ref_sum = 0, occ_sum = 0;
	uint32_t used = 0, ev = 0, cached = 0, active = 0, nfree_seq = 0;
	int ret = 0;

	if (!occ || !seen) {
		free(occ);
		free(seen);
		snprintf(why, why_len, "out of memory");
		return -ENOMEM;
	}

	/* Free stack: only FREE pages, each once. */
	if (p->n_free > p->n_pages)
		FAIL("n_free %u > n_pages %u", p->n_free, p->n_pages);
	for (uint32_t i = 0; i < p->n_free; i++) {
		uint32_t id = p->free_ids[i];

		if (id >= p->n_pages || seen[id])
			FAIL("free stack entry %u: page %u repeated or out of range", i, id);
		seen[id] = 1;
		if (p->state[id] != PAGE_FREE || p->ref[id] || p->serial[id])
			FAIL("page %u on free stack: state %u ref %u serial %llu",
			     id, p->state[id], p->ref[id],
			     (unsigned long long)p->serial[id]);
	}
	/* LRU list: only EVICTABLE pages, each once, links consistent. */
	uint32_t prev = NONE;
	for (uint32_t id = p->lru_head, k = 0; id != NONE; id = p->lru_next[id], k++) {
		if (id >= p->n_pages || seen[id] || k > p->n_pages)
			FAIL("LRU list: page %u repeated or out of range", id);
		seen[id] = 2;
		if (p->lru_prev[id] != prev)
			FAIL("LRU list: page %u prev %u, expected %u", id,
			     p->lru_prev[id], prev);
		if (p->state[id] != PAGE_EVICTABLE || p->ref[id] || !p->serial[id])
			FAIL("page %u on LRU list: state %u ref %u serial %llu",
			     id, p->state[id], p->ref[id],
			     (unsigned long long)p->serial[id]);
		prev = id;
		ev++;
	}
	if (prev != p->lru_tail)
		FAIL("LRU tail %u, list ends at %u", p->lru_tail, prev);
	if (ev != p->n_evictable)
		FAIL("LRU list holds %u pages, n_evictable %u", ev, p->n_evictable);

	/* Sequences: rows consistent with lengths; count page occurrences. */
	for (uint32_t s = 0; s < p->cfg.max_seqs; s++) {
		const struct kv_seq *q = &p->seqs[s];
		const uint32_t *r = row(p, s);

		if (!q->active) {
			if (q->n_pages || q->n_tokens)
				FAIL("inactive sequence %u holds %u pages", s, q->n_pages);
			continue;
		}
		active++;
		if ((uint64_t)q->n_pages != ((uint64_t)q->n_tokens + p->P - 1) / p->P ||
		    q->n_pages > p->max_pages_per_seq)
			FAIL("sequence %u: %u tokens in %u pages", s, q->n_tokens, q->n_pages);
		for (uint32_t i = 0; i < q->n_pages; i++) {
			if (r[i] >= p->n_pages)
				FAIL("sequence %u page %u: id %u out of range", s, i, r[i]);
			occ[r[i]]++;
			occ_sum++;
		}
		/* Full pages carry the chained key of their content. */
		if (p->prefix) {
			uint64_t pk = haccel__kv_root_key();
			for (uint32_t i = 0; i < q->n_tokens / p->P; i++) {
				uint64_t k = page_key(p, pk, p->tokens + (uint64_t)r[i] * p->P);
				if (k != p->key[r[i]])
					FAIL("sequence %u page %u (id %u): key does not match its tokens",
					     s, i, r[i]);
				pk = k;
			}
		}
	}
	for (uint32_t s = p->seq_free_head, k = 0; s != NONE; s = p->seqs[s].next_free, k++) {
		if (s >= p->cfg.max_seqs || p->seqs[s].active || k > p->cfg.max_seqs)
			FAIL("sequence free list broken at %u", s);
		nfree_seq++;
	}
	if (active != p->n_seqs_active || active + nfree_seq != p->cfg.max_seqs)
		FAIL("sequences: %u active (counter %u), %u free, %u total", active,
		     p->n_seqs_active, nfree_seq, p->cfg.max_seqs);

	/* Pages: USED exactly when referenced; refs cover the block tables. */
	for (uint32_t id = 0; id < p->n_pages; id++) {
		ref_sum += p->ref[id];
		if (p->serial[id])
			cached++;
		if (p->ref[id] < occ[id])
			FAIL("page %u: ref %u < %u block-table uses", id, p->ref[id], occ[id]);
		switch (p->state[id]) {
		case PAGE_USED:
			used++;
			if (!p->ref[id] || seen[id])
				FAIL("page %u USED with ref %u (listed: %u)", id, p->ref[id], seen[id]);
			break;
		case PAGE_FREE:
			if (seen[id] != 1)
				FAIL("page %u FREE but not on the free stack", id);
			break;
		case PAGE_EVICTABLE:
			if (seen[id] != 2)
				FAIL("page %u EVICTABLE but not on the LRU list", id);
			break;
		default:
			FAIL("page %u: bad state %u", id, p->state[id]);
		}
	}
	if (used + p->n_free + p->n_evictable != p->n_pages)
		FAIL("pages: %u used + %u free + %u evictable != %u", used, p->n_free,
		     p->n_evictable, p->n_pages);
	uint64_t ext_sum = 0;
	for (uint32_t id = 0; id < p->n_pages; id++) {
		ext_sum += p->ext[id];
		if (p->ext[id] > p->ref[id])
			FAIL("page %u: %u gets held but %u references", id, p->ext[id], p->ref[id]);
	}
	if (ext_sum != p->ext_refs)
		FAIL("per-page gets sum to %llu, %llu counted", (unsigned long long)ext_sum,
		     (unsigned long long)p->ext_refs);
	if (ref_sum != occ_sum + p->ext_refs)
		FAIL("sum of refs %llu != %llu block-table uses + %llu gets",
		     (unsigned long long)ref_sum, (unsigned long long)occ_sum,
		     (unsigned long long)p->ext_refs);

	/* Prefix table: one entry per cached page, under its key, serials unique. */
	if (haccel__map_check(&p->map))
		FAIL("prefix table structure broken");
	if (cached != p->map.count)
		FAIL("%u pages have a serial, table holds %u", cached, p->map.count);
	for (uint64_t b = 0; b <= p->map.mask; b++) {
		const struct haccel__map_entry *e = &p->map.e[b];

		if (e->val == HACCEL__MAP_EMPTY)
			continue;
		if (e->val >= p->n_pages || !p->serial[e->val] || p->key[e->val] != e->key)
			FAIL("table entry %llu -> page %u: not a cached page under its key",
			     (unsigned long long)b, e->val);
		if (p->serial[e->val] != p->link[e->val] || p->serial[e->val] >= p->next_serial)
			FAIL("cached page %u: serial %llu link %llu", e->val,
			     (unsigned long long)p->serial[e->val],
			     (unsigned long long)p->link[e->val]);
	}
	if (!p->prefix && cached)
		FAIL("prefix caching off but %u pages cached", cached);
out:
	free(occ);
	free(seen);
	return ret;
}

void haccel__kv_pool_set_key_mask(struct haccel_kv_pool *p, uint64_t mask)
{
	p->key_mask = mask;
}
