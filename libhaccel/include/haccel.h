/* SPDX-License-Identifier: MIT */
/*
 * haccel.h - public API of libhaccel, the runtime for hybrid-attention LLMs.
 *
 * Conventions (every function below follows them):
 *  - Functions return 0 (or a non-negative count) on success and a negative
 *    errno-style status on failure; haccel_strerror() describes a status.
 *  - Objects are opaque and created/destroyed in pairs. Nothing is global:
 *    all state hangs off the context haccel_open() returns.
 *  - Configuration structs start with a `size` field that their _init()
 *    function sets; the library accepts any size from the first release's up
 *    to its own, so structs only ever grow at the end.
 *  - A pool is not thread-safe: one thread (the scheduler) owns it. Different
 *    pools may be used from different threads.
 *  - Nothing on the per-token path allocates: pools are carved once.
 */
#ifndef HACCEL_H
#define HACCEL_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define HACCEL_API __attribute__((visibility("default")))
#else
#define HACCEL_API
#endif

/* ------------------------------------------------------------------------ */
/* Version                                                                  */

#define HACCEL_VERSION_MAJOR 0
#define HACCEL_VERSION_MINOR 1
#define HACCEL_VERSION_PATCH 0
#define HACCEL_VERSION_NUM(maj, min, pat) (((maj) << 16) | ((min) << 8) | (pat))
#define HACCEL_VERSION                                                        \
	HACCEL_VERSION_NUM(HACCEL_VERSION_MAJOR, HACCEL_VERSION_MINOR,        \
			   HACCEL_VERSION_PATCH)

/* Version of the library actually loaded, as HACCEL_VERSION_NUM(). */
HACCEL_API unsigned int haccel_version(void);
/* The same as "MAJOR.MINOR.PATCH"; a static string. */
HACCEL_API const char *haccel_version_string(void);

/* ------------------------------------------------------------------------ */
/* Status codes                                                             */

/*
 * One table gives both the enum and the messages, so they never drift.
 * Every value is a negated errno; a function may also return another -errno
 * passed up from the system, which haccel_strerror() describes too.
 */
#define HACCEL_STATUS_MAP(X)                                                  \
	X(EPERM, "operation not permitted")                                   \
	X(ENOENT, "no such object")                                           \
	X(EIO, "input/output error")                                          \
	X(E2BIG, "request larger than the configured maximum")                \
	X(EAGAIN, "resource temporarily unavailable")                         \
	X(ENOMEM, "out of memory: pool or allocation exhausted")              \
	X(EACCES, "permission denied")                                        \
	X(EFAULT, "bad address")                                              \
	X(EBUSY, "object busy or still referenced")                           \
	X(EEXIST, "object already exists")                                    \
	X(ENODEV, "no such device")                                           \
	X(EINVAL, "invalid argument")                                         \
	X(ENOSPC, "no free entry left in a fixed-size table")                 \
	X(ERANGE, "value out of range")                                       \
	X(ENOSYS, "not implemented on this system")                           \
	X(EOVERFLOW, "size computation overflows")                            \
	X(EBADMSG, "malformed data")                                          \
	X(ENOTSUP, "operation not supported")                                 \
	X(ETIMEDOUT, "timed out")                                             \
	X(EDQUOT, "quota exceeded")                                           \
	X(ECANCELED, "operation canceled")

enum haccel_status {
	HACCEL_OK = 0,
#define HACCEL__STATUS_ENUM(name, msg) HACCEL_##name = -(name),
	HACCEL_STATUS_MAP(HACCEL__STATUS_ENUM)
#undef HACCEL__STATUS_ENUM
};

/* A static description of status (0 or a negative errno); never NULL. */
HACCEL_API const char *haccel_strerror(int status);
/* The symbolic name ("EINVAL", "OK"), or "EUNKNOWN"; a static string. */
HACCEL_API const char *haccel_status_name(int status);

/* ------------------------------------------------------------------------ */
/* Context                                                                  */

struct haccel_ctx;

enum haccel_log_level {
	HACCEL_LOG_ERROR = 0,
	HACCEL_LOG_WARN = 1,
	HACCEL_LOG_INFO = 2,
	HACCEL_LOG_DEBUG = 3,
};

struct haccel_open_params {
	uint32_t size;         /* sizeof(struct haccel_open_params) */
	uint32_t flags;        /* none defined yet: must be 0 */
	int32_t log_level;     /* enum haccel_log_level; HACCEL_LOG env overrides */
	uint32_t reserved;     /* must be 0 */
	/* Receives each log line (no trailing newline); must not call back
	 * into the context. NULL: lines go to stderr prefixed "haccel: ". */
	void (*log_fn)(void *user, int level, const char *msg);
	void *log_user;
};

/* Fill p with defaults (log level WARN, stderr). */
HACCEL_API void haccel_open_params_init(struct haccel_open_params *p);
/*
 * Create a context. params may be NULL for defaults. On success *out owns
 * the context; release it with haccel_close() after destroying its pools.
 * Returns 0, -EINVAL (bad params), -ENOMEM.
 */
HACCEL_API int haccel_open(const struct haccel_open_params *params,
			   struct haccel_ctx **out);
/* Release a context. NULL is ignored. Pools made from it must be gone. */
HACCEL_API void haccel_close(struct haccel_ctx *ctx);

/* Where a pool's memory lives. */
enum haccel_mem_kind {
	HACCEL_MEM_HOST = 0, /* anonymous host memory, populated at creation */
};

/* ------------------------------------------------------------------------ */
/* KV page pool (sparse-attention layers)                                   */

struct haccel_kv_pool;

#define HACCEL_KV_MAX_STREAMS 8
#define HACCEL_KV_STREAM_NAME_MAX 16

/* A per-layer stream of per-token records (the main KV, the indexer keys...). */
struct haccel_kv_stream {
	char name[HACCEL_KV_STREAM_NAME_MAX]; /* NUL-terminated, unique */
	uint32_t bytes_per_token;             /* > 0 */
	uint32_t reserved;                    /* must be 0 */
};

/* Disable prefix caching: full pages are never hashed nor reused. */
#define HACCEL_KV_NO_PREFIX_CACHE (1u << 0)

struct haccel_kv_pool_config {
	uint32_t size;          /* sizeof(struct haccel_kv_pool_config) */
	uint32_t flags;         /* HACCEL_KV_* */
	uint32_t page_tokens;   /* tokens per page (default 64) */
	uint32_t n_layers;      /* layers sharing page ids (default 1) */
	uint32_t n_streams;     /* entries used in streams[] (default 2) */
	uint32_t n_pages;       /* pages to carve; 0: as many as budget_bytes holds */
	uint64_t budget_bytes;  /* used when n_pages is 0 */
	uint32_t max_seqs;      /* sequence table size (default 256) */
	uint32_t max_seq_tokens; /* longest sequence (default 131072) */
	uint32_t mem;           /* enum haccel_mem_kind (default HACCEL_MEM_HOST) */
	uint32_t reserved;      /* must be 0 */
	/* Default: "kv" 656 B/token and "index_k" 132 B/token (docs/pools.md). */
	struct haccel_kv_stream streams[HACCEL_KV_MAX_STREAMS];
};

/* Fill cfg with the defaults above; n_pages and budget_bytes stay 0. */
HACCEL_API void haccel_kv_pool_config_init(struct haccel_kv_pool_config *cfg);

/*
 * Carve a pool: all page memory, block tables, page metadata and the prefix
 * table are allocated here and nowhere else. Returns 0, -EINVAL (bad config,
 * including a budget too small for one page), -EOVERFLOW, -ENOMEM.
 */
HACCEL_API int haccel_kv_pool_create(struct haccel_ctx *ctx,
				     const struct haccel_kv_pool_config *cfg,
				     struct haccel_kv_pool **out);
/* Release the pool and all its memory. NULL is ignored. */
HACCEL_API void haccel_kv_pool_destroy(struct haccel_kv_pool *pool);

struct haccel_kv_pool_info {
	uint32_t page_tokens;
	uint32_t n_pages;
	uint32_t n_layers;
	uint32_t n_streams;
	uint32_t max_seqs;
	uint32_t max_pages_per_seq;  /* row length of the block-table matrix */
	uint64_t page_bytes;         /* one page id across all layers and streams */
	uint64_t bytes_total;        /* page memory carved */
	uint64_t meta_bytes;         /* host bookkeeping carved (tables, hashes) */
	/* Block tables of all sequences: row s (max_pages_per_seq entries) is
	 * sequence s's table; only its first n_pages entries are meaningful. */
	const uint32_t *block_tables;
};

/* Describe the pool. Returns 0 or -EINVAL. */
HACCEL_API int haccel_kv_pool_info(const struct haccel_kv_pool *pool,
				   struct haccel_kv_pool_info *out);

/* One (layer, stream) region: token slot s lives at base + s * bytes_per_token. */
struct haccel_kv_region {
	void *base;
	uint64_t bytes;           /* n_pages * page_tokens * bytes_per_token */
	uint32_t bytes_per_token;
	uint32_t page_bytes;      /* page_tokens * bytes_per_token */
};

/* Locate a region. Returns 0 or -EINVAL (layer or stream out of range). */
HACCEL_API int haccel_kv_pool_region(const struct haccel_kv_pool *pool,
				     uint32_t layer, uint32_t stream,
				     struct haccel_kv_region *out);

struct haccel_kv_stats {
	uint64_t pages_total;     /* = pages_free + pages_evictable + pages_used */
	uint64_t pages_free;      /* empty, ready to use */
	uint64_t pages_evictable; /* unreferenced but holding a cached prefix */
	uint64_t pages_used;      /* referenced by a sequence or a get */
	uint64_t pages_cached;    /* in the prefix table (used or evictable) */
	uint64_t seqs_active;
	uint64_t seqs_max;
	uint64_t prefix_queries;  /* sequences created with a prompt */
	uint64_t prefix_hits;     /* ... that reused at least one page */
	uint64_t prefix_tokens_queried;
	uint64_t prefix_tokens_reused;
	uint64_t evictions;       /* cached pages taken for new content */
	uint64_t cow_copies;      /* partial pages copied on write */
	uint64_t pages_allocated; /* cumulative page allocations */
};

/* Snapshot the counters. Returns 0 or -EINVAL. */
HACCEL_API int haccel_kv_pool_stats(const struct haccel_kv_pool *pool,
				    struct haccel_kv_stats *out);

/*
 * Start a sequence. With a prompt, attach the longest run of cached full
 * pages whose token ids equal the prompt's (verified, never by hash alone)
 * and set *n_reused to the tokens they cover (a multiple of page_tokens, at
 * most n_prompt); the caller then appends prompt[*n_reused..]. To keep at
 * least one token to compute, pass n_prompt - 1. prompt may be NULL when
 * n_prompt is 0. Returns 0, -EINVAL, -ENOSPC (sequence table full).
 */
HACCEL_API int haccel_kv_seq_create(struct haccel_kv_pool *pool,
				    const int32_t *prompt, uint32_t n_prompt,
				    uint32_t *seq, uint32_t *n_reused);

/*
 * Append n tokens. Pages are taken only when one fills; a partial last page
 * shared with another sequence is first copied (copy-on-write), and one that
 * this sequence alone holds but the prefix cache still lists (after a
 * truncate) leaves the cache before it is written. When slots is not NULL,
 * slots[i] = page * page_tokens + offset of token i. A page that fills is
 * entered into the prefix cache: the caller must write its KV before another
 * sequence is created from the same prompt. All or nothing: on failure the
 * sequence is unchanged. Returns 0, -EINVAL, -ENOENT (no such sequence),
 * -E2BIG (past max_seq_tokens), -ENOMEM (not enough free + evictable pages).
 */
HACCEL_API int haccel_kv_seq_append(struct haccel_kv_pool *pool, uint32_t seq,
				    const int32_t *tokens, uint32_t n,
				    int64_t *slots);

/* Pages an append of n tokens to seq would take now (CoW included). */
HACCEL_API int haccel_kv_seq_pages_needed(const struct haccel_kv_pool *pool,
					  uint32_t seq, uint32_t n,
					  uint32_t *pages);

/*
 * Fork: *child shares every page of seq by reference; the first append to a
 * shared partial page copies it. Returns 0, -EINVAL, -ENOENT, -ENOSPC.
 */
HACCEL_API int haccel_kv_seq_fork(struct haccel_kv_pool *pool, uint32_t seq,
				  uint32_t *child);

/*
 * Shorten seq to n_tokens (<= its length), releasing pages past the end,
 * for example after rejected draft tokens. Returns 0, -EINVAL, -ENOENT.
 */
HACCEL_API int haccel_kv_seq_truncate(struct haccel_kv_pool *pool, uint32_t seq,
				      uint32_t n_tokens);

/* End seq and release its pages (cached ones stay reusable until evicted). */
HACCEL_API int haccel_kv_seq_free(struct haccel_kv_pool *pool, uint32_t seq);

/*
 * Read seq's block table: *pages points into the pool's block-table matrix
 * (valid until seq is changed or freed), *n_pages entries, *n_tokens tokens.
 * Any output pointer may be NULL. Returns 0, -EINVAL, -ENOENT.
 */
HACCEL_API int haccel_kv_seq_block_table(const struct haccel_kv_pool *pool,
					 uint32_t seq, const uint32_t **pages,
					 uint32_t *n_pages, uint32_t *n_tokens);

/*
 * Chained prefix key of seq's full page `page_index` (a hash of its parent's
 * key and its token ids), the key recurrent-state checkpoints use for the
 * same boundary. Returns 0, -EINVAL, -ENOENT, -ERANGE (page not full),
 * -ENOTSUP (prefix caching off).
 */
HACCEL_API int haccel_kv_seq_prefix_key(const struct haccel_kv_pool *pool,
					uint32_t seq, uint32_t page_index,
					uint64_t *key);

struct haccel_kv_admission {
	uint32_t pages_needed;   /* pages the whole request spans */
	uint32_t pages_reused;   /* of those, cached pages it would attach */
	uint32_t pages_new;      /* pages it would take from free + evictable */
	uint32_t pages_available; /* free + evictable not counting its own hits */
	uint32_t tokens_reused;
	uint32_t fits;           /* 1 when pages_new <= pages_available */
};

/*
 * Admission check for a request of n_prompt prompt tokens plus max_new
 * generated ones, without changing anything (no LRU touch, no counters).
 * prompt may be NULL to ignore the prefix cache. Returns 0, -EINVAL,
 * -E2BIG (longer than max_seq_tokens).
 */
HACCEL_API int haccel_kv_admit(const struct haccel_kv_pool *pool,
			       const int32_t *prompt, uint32_t n_prompt,
			       uint32_t max_new,
			       struct haccel_kv_admission *out);

/*
 * Take n pages outside any sequence (for swap-in, scratch, tests); each gets
 * one reference. All or nothing. Returns 0, -EINVAL, -ENOMEM.
 */
HACCEL_API int haccel_kv_pages_get(struct haccel_kv_pool *pool, uint32_t n,
				   uint32_t *pages);
/* Drop one reference from each of n pages taken with haccel_kv_pages_get.
 * Returns 0 or -EINVAL (nothing released when any id is out of range or
 * unreferenced). */
HACCEL_API int haccel_kv_pages_put(struct haccel_kv_pool *pool,
				   const uint32_t *pages, uint32_t n);

/* Forget every cached prefix; returns the number of pages uncached. */
HACCEL_API int haccel_kv_prefix_cache_reset(struct haccel_kv_pool *pool);

/* ------------------------------------------------------------------------ */
/* Recurrent-state pool (linear-attention layers)                           */

struct haccel_state_pool;

struct haccel_state_pool_config {
	uint32_t size;            /* sizeof(struct haccel_state_pool_config) */
	uint32_t flags;           /* none defined yet: must be 0 */
	uint32_t n_layers;        /* KDA layers (default 1) */
	uint32_t n_heads;         /* heads per layer (default 32) */
	uint32_t head_dk;         /* key dim per head (default 128) */
	uint32_t head_dv;         /* value dim per head (default 128) */
	uint32_t conv_width;      /* short-convolution width (default 4) */
	uint32_t conv_elem_bytes; /* 4 (fp32, default) or 2 (bf16) */
	uint32_t n_slots;         /* 0: what budget_bytes holds after checkpoints */
	uint32_t n_checkpoints;   /* checkpoint slots (default 0) */
	uint64_t budget_bytes;    /* used when n_slots is 0 */
	uint32_t mem;             /* enum haccel_mem_kind */
	uint32_t reserved;        /* must be 0 */
};

/* Fill cfg with the defaults above. */
HACCEL_API void haccel_state_pool_config_init(struct haccel_state_pool_config *cfg);

/*
 * Carve a state pool: n_slots + n_checkpoints slots of identical layout.
 * Returns 0, -EINVAL, -EOVERFLOW, -ENOMEM.
 */
HACCEL_API int haccel_state_pool_create(struct haccel_ctx *ctx,
					const struct haccel_state_pool_config *cfg,
					struct haccel_state_pool **out);
/* Release the pool. NULL is ignored. */
HACCEL_API void haccel_state_pool_destroy(struct haccel_state_pool *pool);

/*
 * Layout of one slot (checkpoints are identical): layer l starts at
 * l * layer_bytes; inside it the fp32 state [heads][dk][dv] at state_offset,
 * then the conv tails [conv_width-1][heads*dk] for q and k and
 * [conv_width-1][heads*dv] for v, oldest first.
 */
struct haccel_state_layout {
	void *slots_base;       /* slot s at slots_base + s * slot_bytes */
	void *ckpt_base;        /* checkpoint c at ckpt_base + c * slot_bytes */
	uint64_t slot_bytes;
	uint64_t layer_bytes;
	uint64_t state_offset, state_bytes;
	uint64_t conv_q_offset, conv_k_offset, conv_v_offset;
	uint64_t conv_q_bytes, conv_k_bytes, conv_v_bytes;
	uint32_t n_slots;
	uint32_t n_checkpoints;
};

/* Describe the layout. Returns 0 or -EINVAL. */
HACCEL_API int haccel_state_pool_layout(const struct haccel_state_pool *pool,
					struct haccel_state_layout *out);

struct haccel_state_stats {
	uint64_t slots_total;  /* = slots_used + slots_free */
	uint64_t slots_used;
	uint64_t slots_free;
	uint64_t ckpts_total;  /* = ckpts_used + ckpts_free */
	uint64_t ckpts_used;
	uint64_t ckpts_free;
	uint64_t slot_bytes;
	uint64_t bytes_total;  /* (slots_total + ckpts_total) * slot_bytes */
	uint64_t saves, restores, drops, ckpt_evictions;
};

/* Snapshot the counters. Returns 0 or -EINVAL. */
HACCEL_API int haccel_state_pool_stats(const struct haccel_state_pool *pool,
				       struct haccel_state_stats *out);

/* Leave the new slot's bytes as they are (the caller restores a checkpoint). */
#define HACCEL_STATE_SLOT_NOZERO (1u << 0)

/* Take a slot, zeroed unless flags has NOZERO. Returns 0, -EINVAL, -ENOMEM. */
HACCEL_API int haccel_state_slot_alloc(struct haccel_state_pool *pool,
				       uint32_t flags, uint32_t *slot);
/* Give a slot back. Returns 0, -EINVAL (out of range), -ENOENT (not in use). */
HACCEL_API int haccel_state_slot_free(struct haccel_state_pool *pool,
				      uint32_t slot);

/* When no checkpoint is free, reuse the least recently used one. */
#define HACCEL_STATE_CKPT_EVICT (1u << 0)

/*
 * Copy slot into the checkpoint keyed (key, pos): an existing one with that
 * key is overwritten, else a free one is taken. Returns 0, -EINVAL, -ENOENT
 * (slot not in use), -ENOMEM (none free and no EVICT flag).
 */
HACCEL_API int haccel_state_ckpt_save(struct haccel_state_pool *pool,
				      uint32_t slot, uint64_t key, uint32_t pos,
				      uint32_t flags, uint32_t *ckpt);
/* Find the checkpoint keyed (key, pos). Returns 0 or -ENOENT. */
HACCEL_API int haccel_state_ckpt_find(struct haccel_state_pool *pool,
				      uint64_t key, uint32_t pos, uint32_t *ckpt);
/* Copy checkpoint ckpt into slot (in use). Returns 0, -EINVAL, -ENOENT. */
HACCEL_API int haccel_state_ckpt_restore(struct haccel_state_pool *pool,
					 uint32_t ckpt, uint32_t slot);
/* Drop checkpoint ckpt. Returns 0, -EINVAL, -ENOENT. */
HACCEL_API int haccel_state_ckpt_drop(struct haccel_state_pool *pool,
				      uint32_t ckpt);

#ifdef __cplusplus
}
#endif

#endif /* HACCEL_H */
