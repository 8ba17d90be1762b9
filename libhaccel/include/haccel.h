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
	X(ECANCELED, "operation canceled")                                    \
	X(EPROTO, "incompatible interface version")

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
	 * into the context. Called from whichever thread logs, several at
	 * once when threads share the context: it must be thread-safe. NULL:
	 * lines go to stderr prefixed "haccel: ", one write(2) a line. */
	void (*log_fn)(void *user, int level, const char *msg);
	void *log_user;
};

/* Fill p with defaults (log level WARN, stderr). */
HACCEL_API void haccel_open_params_init(struct haccel_open_params *p);
/*
 * Create a context. params may be NULL for defaults. On success *out owns
 * the context; release it with haccel_close() after destroying its pools.
 * Returns 0, -EINVAL (bad params, or $HACCEL_SYSFS_ROOT longer than 255
 * bytes: logged at error level through params' log sink, as there is no
 * context to ask haccel_last_error()), -ENOMEM.
 */
HACCEL_API int haccel_open(const struct haccel_open_params *params,
			   struct haccel_ctx **out);
/* Release a context. NULL is ignored. Pools made from it must be gone. */
HACCEL_API void haccel_close(struct haccel_ctx *ctx);

/*
 * Copy the context's most recent detailed error message (which file, which
 * tensor, which rule; which limit and how to raise it) into buf, NUL
 * terminated. Returns the message length (0: none yet). Thread-safe, but
 * the message is the context's, whichever thread failed last: where
 * several threads may fail at once on one context, take each failure's
 * message from log_fn (called once per failure, before the failing call
 * returns: in the calling thread, or in a worker thread of that call, as
 * a weights load's I/O thread) or give each thread its own context.
 */
HACCEL_API size_t haccel_last_error(struct haccel_ctx *ctx, char *buf, size_t len);

/* Where a pool's memory lives. */
enum haccel_mem_kind {
	HACCEL_MEM_HOST = 0, /* anonymous host memory, populated at creation */
	HACCEL_MEM_CUDA = 1, /* device memory on the context's GPU (VMM API):
			      * fixed addresses; copies ordered on the GPU
			      * runtime's stream; -ENODEV without a GPU */
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
	uint32_t max_seqs;      /* sequence table size (default 256; below 2^31 - 1) */
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
 * including a budget too small for one page), -EOVERFLOW (sizes that do not
 * fit, among them a stream whose page_tokens * bytes_per_token is 4 GiB or
 * more), -ENOMEM.
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
	uint32_t page_bytes;      /* page_tokens * bytes_per_token (exact: pool
				   * creation refuses 4 GiB or more) */
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
	uint64_t pages_cached;    /* in the prefix table (used or evictable); a
				   * few can no longer be reached (their parent
				   * left the table) and wait for eviction */
	uint64_t seqs_active;
	uint64_t seqs_max;
	uint64_t prefix_queries;  /* prefix lookups: sequences created with a
				   * prompt while prefix caching is on */
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
 * entered into the prefix cache (unless a cached page with the same content
 * and parent is there already: that one stays the entry, and later pages
 * chain under it): the caller must write its KV before another sequence is
 * created from the same prompt. All or nothing: on failure the
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
/*
 * Swap: copy n pages (every layer and stream of each) between the pool and
 * host memory, batched; done when the call returns. The host side holds
 * the pages one after another, each haccel_kv_pool_info().page_bytes long
 * (its regions in layer-major, stream order), so host_bytes must be at
 * least n * page_bytes. swap_out reads pages[i] into slot i (any page).
 * swap_in writes slot i into pages[i], each of which the caller must hold
 * alone: exactly one reference, from haccel_kv_pages_get or one sequence's
 * block table. A free page, an unreferenced (evictable) cached one and a
 * shared one (forked, or attached by several sequences: there is no
 * copy-on-write here) are refused; a page held alone that is in the prefix
 * cache leaves the cache before it is written (the pool cannot tell
 * restored KV from other bytes). docs/pools.md, "Swap", gives the
 * preemption workflow. For a pool in GPU memory the copies run on the GPU
 * runtime's stream after the work queued there; pinned host memory
 * (haccel_hostmem) makes them DMA at full speed. Every page is checked
 * before anything is copied. Returns 0, -EINVAL (NULL, an id out of range,
 * host_bytes too small; for swap_in also a free or evictable page; nothing
 * copied), -EBUSY (swap_in: a page with more than one reference; nothing
 * copied), -EIO.
 */
HACCEL_API int haccel_kv_pages_swap_out(struct haccel_kv_pool *pool,
					const uint32_t *pages, uint32_t n,
					void *host, uint64_t host_bytes);
HACCEL_API int haccel_kv_pages_swap_in(struct haccel_kv_pool *pool,
				       const uint32_t *pages, uint32_t n,
				       const void *host, uint64_t host_bytes);
/* Drop one reference from each of n pages taken with haccel_kv_pages_get.
 * Returns 0 or -EINVAL (nothing released when any id is out of range or
 * holds no reference from haccel_kv_pages_get: a page only a sequence
 * holds, or one put more times than it was got). */
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
	void *ckpt_base;        /* checkpoint id c at ckpt_base +
				 * (c % n_checkpoints) * slot_bytes */
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
 * key is overwritten (its id stays), else a free one is taken. *ckpt gets
 * its id, an opaque value: valid until the checkpoint is dropped or evicted
 * (or a save into it fails), after which restore and drop refuse it with
 * -ENOENT even once another checkpoint takes its place (ids carry a
 * generation; they repeat only after 2^32 / n_checkpoints reuses of one
 * place). Returns 0, -EINVAL, -ENOENT (slot not in use), -ENOMEM (none free
 * and no EVICT flag).
 */
HACCEL_API int haccel_state_ckpt_save(struct haccel_state_pool *pool,
				      uint32_t slot, uint64_t key, uint32_t pos,
				      uint32_t flags, uint32_t *ckpt);
/*
 * Swap: copy n slots (their whole layout, slot_bytes each) to host memory
 * one after another, or back into slots (in use); batched, done on return.
 * Returns 0, -EINVAL (NULL, a slot out of range or not in use, host_bytes
 * below n * slot_bytes; nothing copied), -EIO.
 */
HACCEL_API int haccel_state_slots_swap_out(struct haccel_state_pool *pool,
					   const uint32_t *slots, uint32_t n,
					   void *host, uint64_t host_bytes);
HACCEL_API int haccel_state_slots_swap_in(struct haccel_state_pool *pool,
					  const uint32_t *slots, uint32_t n,
					  const void *host, uint64_t host_bytes);
/* Find the checkpoint keyed (key, pos) and set *ckpt to its id (the one
 * save returned). Returns 0, -EINVAL, -ENOENT. */
HACCEL_API int haccel_state_ckpt_find(struct haccel_state_pool *pool,
				      uint64_t key, uint32_t pos, uint32_t *ckpt);
/* Copy checkpoint ckpt (an id from save or find) into slot (in use).
 * Returns 0, -EINVAL (no pool, no checkpoints, or an id this pool never
 * gives out), -ENOENT (slot not in use, or no such checkpoint: a stale id,
 * its checkpoint dropped or evicted, finds nothing). */
HACCEL_API int haccel_state_ckpt_restore(struct haccel_state_pool *pool,
					 uint32_t ckpt, uint32_t slot);
/* Drop checkpoint ckpt (an id from save or find). Returns 0, -EINVAL,
 * -ENOENT (as restore: a stale id drops nothing). */
HACCEL_API int haccel_state_ckpt_drop(struct haccel_state_pool *pool,
				      uint32_t ckpt);

/* ------------------------------------------------------------------------ */
/* GPU                                                                      */

struct haccel_gpu_info {
	uint32_t n_devices;
	uint32_t driver_version;   /* e.g. 13000 */
	uint32_t sm_count;
	uint32_t cc_major, cc_minor;
	uint32_t kernels;          /* 1: this build carries GPU kernels */
	uint64_t mem_total, mem_free;
	char name[128];
	char pci_bus_id[32];
	char reason[256];          /* why there is no usable GPU, or "" */
};

/*
 * Probe the GPU through the CUDA driver (loaded at run time; the library
 * never needs it to build or run). Returns 0 with the device described, or
 * -ENODEV (no driver, no device) / -ENOSYS (a driver too old) / -EIO (an
 * unusable GPU: the driver is there but failed to initialise or to open
 * device 0, its error named) with the reason in out->reason: the caller
 * goes on with the CPU backend.
 */
HACCEL_API int haccel_gpu_info(struct haccel_ctx *ctx, struct haccel_gpu_info *out);

struct haccel_nccl_info {
	uint32_t version;          /* e.g. 22803 for NCCL 2.28.3; 0 when absent */
	uint32_t reserved;
	char path[256];            /* the library loaded, or "" */
	char reason[640];          /* why there is no NCCL, or "" */
};

/*
 * Probe NCCL, loaded at run time (libnccl.so.2 on the library path or in
 * the CUDA toolkit, or the file HACCEL_NCCL_LIBRARY names) for work across
 * GPUs. Needs no GPU. Returns 0 with the version, or -ENODEV with the reason
 * (the library goes on with one GPU), -EINVAL, -ENOMEM.
 */
HACCEL_API int haccel_nccl_info(struct haccel_ctx *ctx, struct haccel_nccl_info *out);

/*
 * A GPU sink: haccel_load() into device memory, in the host layout (tensor
 * i at dest + haccel_tensor_info.dest_offset, haccel_weights_info.dest_bytes
 * in all), as haccel_host_sink does in host memory. Reads always go through
 * the loader's pinned staging buffers, which the sink registers with the
 * CUDA driver for the load (cuMemHostRegister, in pieces of at most 1 GiB);
 * each staging buffer's bytes are copied to the device on the sink's own
 * copy stream (cuMemcpyHtoDAsync) and the buffer is refilled only after its
 * copy is done, so disk reads and copies overlap. Every copy is complete
 * when haccel_load() returns. Where the driver refuses the registration,
 * the copies go from unregistered memory (one info line says why): still
 * correct, slower. HACCEL_FORCE_UNREGISTERED=1 in the environment forces
 * that. See docs/weights.md, "Loading into GPU memory".
 */
struct haccel_gpu_sink;
struct haccel_sink;

struct haccel_gpu_sink_params {
	uint32_t size;      /* sizeof(struct haccel_gpu_sink_params) */
	uint32_t flags;     /* none defined: must be 0 */
	uint64_t dptr;      /* destination: a device address (CUdeviceptr) of
			     * the context's GPU, owned by the caller; 0: the
			     * sink allocates `bytes` and frees them on destroy */
	uint64_t bytes;     /* destination size: at least the dest_bytes of
			     * each checkpoint loaded through the sink (> 0) */
};

/* Defaults: no flags, dptr 0 (the sink allocates), bytes 0 (must be set). */
HACCEL_API void haccel_gpu_sink_params_init(struct haccel_gpu_sink_params *p);

/*
 * Make a GPU sink on the context's GPU (device 0). The parameters are
 * checked first (-EINVAL); then -ENODEV (no driver or no GPU), -ENOSYS
 * (a driver too old) or -EIO (an unusable GPU), with the reason in
 * haccel_last_error() as in haccel_gpu_info(); -ENOMEM (device memory for an allocated destination:
 * the message gives what was asked and what is free), -EIO (another driver
 * error, named in the message). One load at a time per sink; a sink is
 * reused by any number of loads.
 */
HACCEL_API int haccel_gpu_sink_create(struct haccel_ctx *ctx,
				      const struct haccel_gpu_sink_params *p,
				      struct haccel_gpu_sink **out);
/* Free the sink (and the destination when the sink allocated it), before
 * haccel_close(ctx). NULL is ignored. */
HACCEL_API void haccel_gpu_sink_destroy(struct haccel_gpu_sink *s);

/*
 * The sink to pass to haccel_load(); owned by s, valid until destroy. A
 * load whose dest_bytes exceeds the sink's bytes fails with -EINVAL before
 * any byte is read, naming both sizes.
 */
HACCEL_API const struct haccel_sink *haccel_gpu_sink_sink(struct haccel_gpu_sink *s);

struct haccel_gpu_sink_info {
	uint64_t dptr;              /* destination device address */
	uint64_t bytes;             /* destination size */
	uint32_t owned;             /* 1: allocated (and freed) by the sink */
	uint32_t registered;        /* last load: 1 staging registered with
				     * CUDA (DMA), 0 unregistered copies */
	uint64_t registered_bytes;  /* last load: staging bytes registered */
	uint64_t loads;             /* loads begun through this sink */
	uint64_t copies;            /* cuMemcpyHtoDAsync calls, all loads */
	uint64_t copy_bytes;        /* bytes copied to the device, all loads */
	uint64_t wait_ns;           /* loader blocked in wait() and finish() */
	char fallback_reason[160];  /* last load: why staging was not
				     * registered, or "" */
};

/* Describe the sink. Returns 0 or -EINVAL. */
HACCEL_API int haccel_gpu_sink_info(const struct haccel_gpu_sink *s,
				    struct haccel_gpu_sink_info *out);

/* ------------------------------------------------------------------------ */
/* NUMA topology                                                            */

#define HACCEL_MAX_NODES 64
#define HACCEL_MAX_CPUS 1024

struct haccel_numa_node {
	int32_t id;
	uint32_t n_cpus;
	uint64_t mem_total;     /* bytes; 0 when sysfs does not say */
	uint64_t mem_free;
	uint64_t cpus[HACCEL_MAX_CPUS / 64]; /* bit c set: CPU c is on this node */
};

/*
 * Describe the NUMA nodes, read from sysfs (under $HACCEL_SYSFS_ROOT when
 * set, else /sys). Fills up to max entries in id order and returns the
 * number of nodes (a machine without NUMA, i.e. without node<N>
 * directories, reports one node 0 with the online CPUs), or -ENOENT (no
 * sysfs), -EBADMSG (a malformed cpulist or meminfo), -ERANGE (a CPU at or
 * beyond HACCEL_MAX_CPUS, or a node directory with an id of 1024 or more),
 * -EINVAL.
 */
HACCEL_API int haccel_numa_nodes(struct haccel_ctx *ctx,
				 struct haccel_numa_node *nodes, uint32_t max);

/*
 * NUMA node of a PCI device such as a GPU, from its bus id ("0000:3b:00.0";
 * the "0000:" domain may be omitted; any case). *node is -1 when the
 * platform does not say (one node). Returns 0, -EINVAL (malformed id),
 * -ENOENT (no such device), -EBADMSG (numa_node is not "-1" or a node id
 * below 1024: an optional '-', digits and at most one newline).
 */
HACCEL_API int haccel_numa_node_of_pci(struct haccel_ctx *ctx,
				       const char *bus_id, int *node);

/* ------------------------------------------------------------------------ */
/* Pinned host memory                                                       */

struct haccel_hostmem;

#define HACCEL_NODE_ANY (-1)

/* Use hugetlbfs pages (MAP_HUGETLB); fail if the pool has too few. */
#define HACCEL_HOSTMEM_HUGETLB (1u << 0)
/* 4 KiB pages only (no transparent huge pages). */
#define HACCEL_HOSTMEM_NO_HUGE (1u << 1)
/* If locking fails (RLIMIT_MEMLOCK), continue unpinned: logged and counted. */
#define HACCEL_HOSTMEM_ALLOW_UNPINNED (1u << 2)
/* If binding to the node fails, continue wherever the kernel puts it. */
#define HACCEL_HOSTMEM_ALLOW_UNPLACED (1u << 3)

struct haccel_hostmem_params {
	uint32_t size;    /* sizeof(struct haccel_hostmem_params) */
	uint32_t flags;   /* HACCEL_HOSTMEM_* */
	int32_t node;     /* NUMA node, or HACCEL_NODE_ANY */
	uint32_t reserved;
	uint64_t bytes;   /* exact size wanted (> 0) */
};

/* Defaults: any node, transparent huge pages when available, no fallbacks. */
HACCEL_API void haccel_hostmem_params_init(struct haccel_hostmem_params *p);

/*
 * Allocate host memory that is mapped, placed on p->node (mbind), faulted in
 * and locked, ready to be registered with io_uring (and with CUDA by the GPU
 * backend). The size is exact, rounded only to the page size used. Failure
 * says which step failed and why (RLIMIT_MEMLOCK, node without memory, no
 * huge pages) through haccel_last_error(). Returns 0, -EINVAL, -ENOMEM,
 * -EPERM (locking refused by RLIMIT_MEMLOCK, or binding refused by a
 * policy), -ENODEV (no such node). The byte counters of
 * haccel_hostmem_stats() count mapped_bytes.
 *
 * Where haccel.ko pins the buffer instead of mlock (see
 * haccel_hostmem_provider()), also -EDQUOT (a node-wide or per-client quota
 * of the driver; the message names the node, the limit and the usage),
 * -EFAULT (the driver cannot pin the range), and with
 * HACCEL_HOSTMEM_PROVIDER=driver the status of haccel_driver_info() when
 * the driver cannot be used. HACCEL_HOSTMEM_ALLOW_UNPINNED turns a refused
 * pin into an unpinned buffer, never into an mlock behind the quota's back.
 * -EINTR comes back only from this driver path, without
 * HACCEL_HOSTMEM_ALLOW_UNPINNED, when a fatal signal stops haccel.ko's pin
 * (the process is then being killed); an ordinary signal is retried there,
 * and the mlock path never returns -EINTR.
 */
HACCEL_API int haccel_hostmem_alloc(struct haccel_ctx *ctx,
				    const struct haccel_hostmem_params *p,
				    struct haccel_hostmem **out);
/*
 * Unpin (close the buffer's haccel.ko handles, or unlock), unmap and forget
 * the buffer. NULL is ignored. In a forked child, freeing an inherited
 * buffer leaves the parent's pin in place (as it does with mlock).
 */
HACCEL_API void haccel_hostmem_free(struct haccel_hostmem *m);

enum haccel_huge_kind {
	HACCEL_HUGE_NONE = 0,    /* 4 KiB pages */
	HACCEL_HUGE_THP = 1,     /* transparent huge pages requested */
	HACCEL_HUGE_HUGETLB = 2, /* hugetlbfs pages */
};

struct haccel_hostmem_info {
	void *ptr;
	uint64_t bytes;        /* as requested */
	uint64_t mapped_bytes; /* rounded to page_size */
	uint64_t page_size;
	int32_t node;          /* node it is bound to, -1 if unplaced */
	uint32_t pinned;       /* 1 when locked */
	uint32_t huge;         /* enum haccel_huge_kind */
	uint32_t reserved;
};

/* Describe a buffer. Returns 0 or -EINVAL. */
HACCEL_API int haccel_hostmem_info(const struct haccel_hostmem *m,
				   struct haccel_hostmem_info *out);

struct haccel_hostmem_stats {
	uint64_t bytes_pinned[HACCEL_MAX_NODES]; /* locked, bound to node i */
	uint64_t bytes_pinned_unplaced;          /* locked, on no particular node */
	uint64_t bytes_unpinned;                 /* allowed fallback: not locked */
	uint64_t buffers;                        /* live buffers */
	uint64_t fallbacks_unpinned;             /* buffers that fell back, ever */
	uint64_t fallbacks_unplaced;
	uint64_t io_uring_registrations;         /* buffers registered, ever */
	uint64_t cuda_registrations;
};

/* The context's host memory counters. Returns 0 or -EINVAL. */
HACCEL_API int haccel_hostmem_stats(struct haccel_ctx *ctx,
				    struct haccel_hostmem_stats *out);

/*
 * Who pins a buffer (docs/hostmem.md, "Providers"). A context picks its
 * provider once, at its first allocation (or haccel_driver_info() or
 * haccel_hostmem_provider_stats() call): haccel.ko when it is loaded, its
 * render node can be opened and its ABI version is compatible, else mlock.
 * HACCEL_HOSTMEM_PROVIDER=auto|driver|user in the environment overrides the
 * choice ("driver": fail rather than fall back to mlock).
 */
enum haccel_hostmem_provider {
	HACCEL_HOSTMEM_PROVIDER_NONE = 0,   /* not pinned (HACCEL_HOSTMEM_ALLOW_UNPINNED) */
	HACCEL_HOSTMEM_PROVIDER_USER = 1,   /* mlock(2): RLIMIT_MEMLOCK applies */
	HACCEL_HOSTMEM_PROVIDER_DRIVER = 2, /* pinned by haccel.ko: node-wide quotas apply */
};

/* The provider that pinned m (enum haccel_hostmem_provider), or -EINVAL. */
HACCEL_API int haccel_hostmem_provider(const struct haccel_hostmem *m);

struct haccel_hostmem_provider_stats {
	uint32_t size;            /* in: sizeof(struct haccel_hostmem_provider_stats) */
	uint32_t provider;        /* what new buffers get: USER, DRIVER, or NONE
				   * when HACCEL_HOSTMEM_PROVIDER=driver and the
				   * driver cannot be used (allocations fail) */
	uint64_t bytes_driver;    /* mapped bytes of live buffers pinned by haccel.ko */
	uint64_t bytes_user;      /* ... locked with mlock */
	uint64_t buffers_driver;  /* live buffers pinned by haccel.ko */
	uint64_t buffers_user;    /* live buffers locked with mlock */
	uint64_t driver_pins;     /* PIN calls the driver accepted, ever */
	uint64_t driver_refusals; /* PIN calls it refused (quota, node), ever */
};

/*
 * The context's counters by provider (a buffer's bytes are also in
 * haccel_hostmem_stats() by node). out->size must be set; the library
 * writes that much at most. Picks the provider if none was picked yet.
 * Returns 0 or -EINVAL.
 */
HACCEL_API int haccel_hostmem_provider_stats(struct haccel_ctx *ctx,
					     struct haccel_hostmem_provider_stats *out);

/* ------------------------------------------------------------------------ */
/* haccel.ko, the pinned host memory broker (docs/driver.md)                */

/* Capability bits of haccel_driver_info.caps (HACCEL_CAP_* of uapi/haccel_drm.h). */
#define HACCEL_DRIVER_CAP_PIN_STRICT_NODE (1ull << 0)
#define HACCEL_DRIVER_CAP_PRIME_EXPORT (1ull << 1)
#define HACCEL_DRIVER_CAP_PRIME_MMAP (1ull << 2)
#define HACCEL_DRIVER_CAP_CLIENT_QUOTA (1ull << 3)
/* A quota limit meaning "no limit". */
#define HACCEL_DRIVER_UNLIMITED UINT64_MAX
/* ABI versions below are (major << 16) | minor, as in uapi/haccel_drm.h. */
#define HACCEL_DRIVER_VERSION_MAJOR(v) ((uint32_t)(v) >> 16)
#define HACCEL_DRIVER_VERSION_MINOR(v) ((uint32_t)(v) & 0xffff)

struct haccel_driver_info {
	uint32_t size;             /* in: sizeof(struct haccel_driver_info) */
	uint32_t loaded;           /* 1: haccel.ko is loaded (sysfs module/haccel,
				    * or its render node answered) */
	uint32_t usable;           /* 1: opened and compatible: the context can
				    * pin through it */
	uint32_t compatible;       /* 1: the versions agree (when uapi_version
				    * is known) */
	uint32_t uapi_version;     /* the driver's ABI version; 0: unknown */
	uint32_t uapi_min_version; /* the oldest userspace ABI it serves; 0: unknown */
	uint32_t lib_uapi_version; /* the ABI version this library speaks */
	uint32_t num_nodes;        /* node ids the driver counts: 0 .. num_nodes - 1 */
	uint64_t caps;             /* HACCEL_DRIVER_CAP_* */
	uint64_t page_size;        /* pin granularity */
	uint64_t max_pin_bytes;    /* largest single pin */
	char render_node[64];      /* "/dev/dri/renderD128", or "" when none */
	char reason[512];          /* why it is not usable, or "" */
};

/*
 * Probe haccel.ko for this context (once: the result is kept until
 * haccel_close()): loaded or not (sysfs under $HACCEL_SYSFS_ROOT), its
 * render node (found through libdrm by the driver name "haccel"), its ABI
 * version against this library's (same major, and the driver's minimum
 * userspace version at most ours), capabilities and limits. out->size
 * must be set. Returns 0 (usable), -ENODEV (not loaded, or no render
 * node), -EACCES (its render node cannot be opened: group render),
 * -EPROTO (incompatible version), -ENOTSUP (libhaccel built without
 * libdrm), -EINVAL; out->reason says why in each failure case.
 */
HACCEL_API int haccel_driver_info(struct haccel_ctx *ctx, struct haccel_driver_info *out);

/* One node as the driver sees it (haccel_driver_stats()). */
struct haccel_driver_node {
	uint32_t node;
	uint32_t online;          /* 0: offline, no quota (the limits read 0) */
	uint64_t pinned_bytes;    /* pinned on the node by every client */
	uint64_t client_bytes;    /* ... charged to this context */
	uint64_t node_limit;      /* all clients together, or HACCEL_DRIVER_UNLIMITED */
	uint64_t client_limit;    /* one client (open file), or HACCEL_DRIVER_UNLIMITED */
};

struct haccel_driver_stats {
	uint32_t size;            /* in: sizeof(struct haccel_driver_stats) */
	uint32_t num_nodes;       /* as in haccel_driver_info */
	uint64_t pinned_bytes;    /* all nodes, every client */
	uint64_t client_bytes;    /* all nodes, this context */
	uint64_t buffers;         /* live buffers, every client */
	uint64_t client_buffers;  /* live buffers of this context */
};

/*
 * The driver's node-wide and this context's pinned memory (one snapshot),
 * and each node's limits. Fills min(max_nodes, num_nodes) entries of nodes
 * (NULL when max_nodes is 0) and returns num_nodes, like snprintf; or the
 * status of haccel_driver_info() when the driver cannot be used, -EINVAL,
 * -ENOMEM, or another -errno from the driver.
 */
HACCEL_API int haccel_driver_stats(struct haccel_ctx *ctx, struct haccel_driver_stats *out,
				   struct haccel_driver_node *nodes, uint32_t max_nodes);

/*
 * Set a node's limits (HACCEL_NODE_ANY: every online node), effective for
 * the next pin; lowering one below usage unpins nothing. Needs
 * CAP_SYS_ADMIN. Returns 0, -EPERM (no CAP_SYS_ADMIN), -EINVAL (node not
 * online), the status of haccel_driver_info() when the driver cannot be
 * used, or another -errno; haccel_last_error() says which.
 */
HACCEL_API int haccel_driver_quota_set(struct haccel_ctx *ctx, int32_t node,
				       uint64_t node_limit, uint64_t client_limit);

/* ------------------------------------------------------------------------ */
/* Weights: safetensors checkpoints                                         */

struct haccel_weights;

enum haccel_dtype {
	HACCEL_DTYPE_BOOL = 0,
	HACCEL_DTYPE_U8,
	HACCEL_DTYPE_I8,
	HACCEL_DTYPE_F8_E4M3,
	HACCEL_DTYPE_F8_E5M2,
	HACCEL_DTYPE_F8_E8M0,
	HACCEL_DTYPE_I16,
	HACCEL_DTYPE_U16,
	HACCEL_DTYPE_F16,
	HACCEL_DTYPE_BF16,
	HACCEL_DTYPE_I32,
	HACCEL_DTYPE_U32,
	HACCEL_DTYPE_F32,
	HACCEL_DTYPE_I64,
	HACCEL_DTYPE_U64,
	HACCEL_DTYPE_F64,
	HACCEL_DTYPE_C64,
	HACCEL_DTYPE_F4,       /* packed two per byte */
	HACCEL_DTYPE_F6_E2M3,  /* packed, 6 bits each */
	HACCEL_DTYPE_F6_E3M2,
	HACCEL_DTYPE_F8_E4M3FNUZ,
	HACCEL_DTYPE_F8_E5M2FNUZ,
	HACCEL_DTYPE_COUNT
};

/* The safetensors name of a dtype ("BF16"), or NULL. */
HACCEL_API const char *haccel_dtype_name(uint32_t dtype);
/* Bits per element, 0 for an unknown dtype. */
HACCEL_API uint32_t haccel_dtype_bits(uint32_t dtype);

#define HACCEL_MAX_DIMS 16

struct haccel_tensor_info {
	const char *name;       /* owned by the weights object */
	uint32_t dtype;         /* enum haccel_dtype */
	uint32_t n_dims;
	uint64_t shape[HACCEL_MAX_DIMS];
	uint32_t file;          /* index into the checkpoint's files */
	uint32_t reserved;
	uint64_t file_offset;   /* absolute byte offset in its file */
	uint64_t bytes;
	uint64_t dest_offset;   /* where a host load places it (see haccel_load) */
	uint64_t checksum;      /* stored XXH3-64, valid when has_checksum */
	uint32_t has_checksum;
	uint32_t reserved2;
};

/*
 * Open a checkpoint: a .safetensors file, a model.safetensors.index.json, or
 * a directory holding either (the index wins). Every header is parsed and
 * validated in full (offsets inside the file, sizes equal to shape x dtype,
 * no overlaps, no holes, no duplicates, known dtypes, header at most 100 MB;
 * for an index, every shard present and every tensor in exactly one shard)
 * before anything is returned; no tensor data is read. A rejection names the
 * file, the tensor and the rule (haccel_last_error()). flags: none yet.
 * Returns 0, -EINVAL (bad arguments; a directory with several .safetensors
 * files and no index), -ENOENT, -EBADMSG (malformed), -EIO, -ENOMEM, or
 * another -errno from open(2) such as -EACCES.
 */
HACCEL_API int haccel_weights_open(struct haccel_ctx *ctx, const char *path,
				   uint32_t flags, struct haccel_weights **out);
/* Close the checkpoint. NULL is ignored. */
HACCEL_API void haccel_weights_close(struct haccel_weights *w);

struct haccel_weights_info {
	uint32_t n_files;
	uint32_t n_tensors;
	uint64_t tensor_bytes;  /* sum of tensor sizes */
	uint64_t file_bytes;    /* sum of file sizes */
	uint64_t dest_bytes;    /* size of a host load destination */
	uint32_t n_checksums;   /* tensors with a stored checksum */
	uint32_t reserved;
};

/* Describe the checkpoint. Returns 0 or -EINVAL. */
HACCEL_API int haccel_weights_info(const struct haccel_weights *w,
				   struct haccel_weights_info *out);
/* Tensor i in file order (file, then offset). Returns 0, -EINVAL, -ERANGE. */
HACCEL_API int haccel_weights_tensor(const struct haccel_weights *w, uint32_t i,
				     struct haccel_tensor_info *out);
/* Index of the tensor called name. Returns 0, -EINVAL (NULL argument) or
 * -ENOENT. */
HACCEL_API int haccel_weights_find(const struct haccel_weights *w,
				   const char *name, uint32_t *index);
/* Path of file i (owned by w), or NULL when out of range. */
HACCEL_API const char *haccel_weights_file(const struct haccel_weights *w,
					   uint32_t i);
/*
 * Entry i of file f's __metadata__ (strings owned by w). Returns 0, -EINVAL,
 * -ERANGE (past the last entry).
 */
HACCEL_API int haccel_weights_metadata(const struct haccel_weights *w,
				       uint32_t file, uint32_t i,
				       const char **key, const char **value);

/* Metadata key prefix of a stored tensor checksum: "haccel.xxh3:<tensor>"
 * = 16 lowercase hex digits of XXH3-64 over the tensor's bytes. */
#define HACCEL_CHECKSUM_PREFIX "haccel.xxh3:"

/* ------------------------------------------------------------------------ */
/* Loading weights                                                          */

/*
 * Where loaded bytes go. The loader calls put() for each piece of a tensor
 * as it arrives, in file order: bytes [tensor_offset, tensor_offset + bytes)
 * of tensor `tensor` (haccel_weights_tensor() order), whose place in the
 * host layout is dest_offset, now at src in staging buffer `buf`. A sink may
 * copy asynchronously (a GPU copy on a stream): then the loader calls
 * wait(buf) before it reuses that staging buffer, and finish() at the end.
 * When direct_base is set (host memory in the host layout, at least
 * dest_bytes long), the loader writes there itself and does not call put():
 * buffered loads read straight into it, direct loads copy from the staging
 * buffers with several threads.
 *
 * The host layout: the files' data regions one after another, each starting
 * at a multiple of 4096 bytes, a tensor at its offset inside its region
 * (haccel_tensor_info.dest_offset; haccel_weights_info.dest_bytes in all).
 *
 * Optional hooks around each load (fields read only when `size` covers
 * them): begin() once, before any byte moves, tells the sink the size of
 * the checkpoint's host layout and where the staging buffers are, so that a
 * GPU sink can register them with the driver once (DMA instead of pageable
 * copies); end() once, after the last put(), wait() and finish(), on
 * success and on failure alike, before the staging memory is freed: a sink
 * that copies asynchronously lets every copy out of staging finish there.
 * end() is called only when begin() returned 0; a status from begin() fails
 * the load (a library sink says why through haccel_last_error()).
 *
 * ABI: this struct has no size field at its start, so it grows behind
 * `size`: a caller sets size = sizeof(struct haccel_sink) (the library's
 * sinks do), and the loader reads the fields after flags only as far as
 * size says. size 0 (a zeroed sink) means none of them; a larger struct
 * than the library knows is accepted when its extra bytes are zero.
 */
struct haccel_sink_begin {
	uint32_t size;        /* sizeof(struct haccel_sink_begin); may grow */
	uint32_t n_buf;       /* staging buffers; 0 when the load reads
			       * straight into direct_base (no staging) */
	void *staging;        /* buffer b is [staging + b * buf_bytes, +buf_bytes) */
	uint64_t buf_bytes;   /* bytes per buffer (the load's chunk_bytes) */
	uint64_t dest_bytes;  /* the checkpoint's host layout, in bytes */
};

struct haccel_sink {
	void *user;
	int (*put)(void *user, uint32_t tensor, uint64_t tensor_offset,
		   uint64_t dest_offset, const void *src, uint64_t bytes,
		   uint32_t buf);
	int (*wait)(void *user, uint32_t buf);  /* NULL: put is synchronous */
	int (*finish)(void *user);              /* NULL: nothing to finish */
	void *direct_base;
	uint64_t direct_bytes;
	uint32_t size;      /* sizeof(struct haccel_sink), or 0: see above */
	uint32_t flags;     /* none defined: must be 0 */
	int (*begin)(void *user, const struct haccel_sink_begin *b); /* NULL: none */
	void (*end)(void *user);                /* NULL: nothing to undo */
};

/* A sink that copies into host memory at base + tensor.dest_offset;
 * bytes must be at least haccel_weights_info().dest_bytes. */
struct haccel_host_sink {
	struct haccel_sink sink;
	void *base;
	uint64_t bytes;
};
HACCEL_API void haccel_host_sink_init(struct haccel_host_sink *s, void *base,
				      uint64_t bytes);

/* O_DIRECT reads through pinned staging buffers (default: when the file is
 * not already in the page cache). */
#define HACCEL_LOAD_DIRECT (1u << 0)
/* Buffered reads through the page cache (default: when it is cached). */
#define HACCEL_LOAD_BUFFERED (1u << 1)
/* Check each tensor's XXH3-64 against its stored checksum. */
#define HACCEL_LOAD_VERIFY (1u << 2)
/* Progress on stderr (bytes, GB/s, ETA), only when stderr is a terminal. */
#define HACCEL_LOAD_PROGRESS (1u << 3)
/* Use the pread thread pool instead of io_uring (HACCEL_FORCE_PREAD=1 too). */
#define HACCEL_LOAD_PREAD (1u << 4)
/*
 * If io_uring refuses to register the staging buffers as fixed buffers
 * (typically RLIMIT_MEMLOCK: registered buffers count against it without
 * CAP_IPC_LOCK), read into them unregistered: logged at warn level and
 * counted in haccel_load_stats.staging_unregistered. Without this flag that
 * refusal fails the load, naming io_uring buffer registration and the
 * kernel's reason. (Unpinned staging is HACCEL_HOSTMEM_ALLOW_UNPINNED in
 * hostmem_flags.)
 */
#define HACCEL_LOAD_ALLOW_UNREGISTERED (1u << 5)
/*
 * Buffered loads through the staging buffers (a sink without a host
 * layout, such as the GPU sink, reading cached files) by default keep the
 * buffers few and small, so that the page-cache copies into them and the
 * sink's reads out of them stay in the CPU caches: reads of at most
 * HACCEL_LOAD_STAGED_CHUNK bytes, at most max(8, HACCEL_LOAD_STAGED_INFLIGHT
 * / that size) in flight (an H200 host: 42.8 GB/s into GPU memory with
 * 2 MiB x 8, 24.8 GB/s with the 4 MiB x 32 that suits O_DIRECT).
 * With this flag they use queue_depth and chunk_bytes as given.
 */
#define HACCEL_LOAD_AS_GIVEN (1u << 6)
#define HACCEL_LOAD_STAGED_CHUNK (2u << 20)
#define HACCEL_LOAD_STAGED_INFLIGHT (16u << 20)

struct haccel_load_params {
	uint32_t size;         /* sizeof(struct haccel_load_params) */
	uint32_t flags;        /* HACCEL_LOAD_* */
	uint32_t queue_depth;  /* reads in flight (default 32) */
	uint32_t chunk_bytes;  /* bytes per read (default 4 MiB) */
	uint32_t threads;      /* pread pool / copy threads (default 8) */
	int32_t node;          /* NUMA node of staging and I/O (default any) */
	uint32_t hostmem_flags; /* HACCEL_HOSTMEM_* for the staging buffers */
	uint32_t reserved;
};

/* Defaults as above. */
HACCEL_API void haccel_load_params_init(struct haccel_load_params *p);

enum haccel_io_path {
	HACCEL_IO_URING = 0,
	HACCEL_IO_PREAD = 1,
};

struct haccel_load_stats {
	uint64_t tensor_bytes;   /* bytes delivered to the sink */
	uint64_t read_bytes;     /* bytes read from files (aligned extents) */
	uint64_t ns;             /* wall time of the load */
	uint32_t io_path;        /* enum haccel_io_path */
	uint32_t direct;         /* 1: O_DIRECT, 0: buffered */
	uint32_t tensors_verified;
	uint32_t tensors_unverified; /* verify asked, no stored checksum */
	uint64_t short_reads;    /* partial reads resubmitted */
	uint64_t retries;        /* EINTR/EAGAIN resubmissions */
	uint64_t wait_ns;        /* I/O thread blocked waiting for reads */
	uint64_t sink_ns;        /* I/O thread handing bytes to the sink */
	char fallback_reason[160]; /* why io_uring was not used, or "" */
	/* Fallbacks the caller allowed, each logged at warn level when taken: */
	uint32_t staging_unpinned;     /* 1: staging buffers not locked
					* (HACCEL_HOSTMEM_ALLOW_UNPINNED) */
	uint32_t staging_unregistered; /* 1: staging buffers not registered
					* with io_uring, plain reads
					* (HACCEL_LOAD_ALLOW_UNREGISTERED) */
};

/*
 * Read every tensor of w into sink. Checks each file is still what was
 * opened (size, modification time) before and after, so a truncated or
 * rewritten file is an error, never garbage. On failure the sink may hold
 * part of the data. p may be NULL for defaults; stats may be NULL (else
 * filled on failure too). Staging buffers that cannot be locked or
 * registered with io_uring fail the load unless the caller allowed that
 * fallback (HACCEL_HOSTMEM_ALLOW_UNPINNED, HACCEL_LOAD_ALLOW_UNREGISTERED).
 * Returns 0, -EIO (a read failed), -EBADMSG (checksum mismatch; a file
 * truncated, rewritten or replaced since it was opened), -ENOENT or -EACCES
 * (a file removed, or its permissions changed, since haccel_weights_open()),
 * -ENOMEM (out of memory; also: io_uring refused to register the staging
 * buffers), -EPERM (staging not lockable under RLIMIT_MEMLOCK), -EINVAL (bad
 * parameters; a sink with an unknown size or flags; a direct_base shorter
 * than dest_bytes, refused before any read in every mode), -EBUSY (a GPU
 * sink already in another load), -EAGAIN (a thread could not be started),
 * -EINTR (a fatal signal while haccel.ko pinned the staging buffers),
 * another status of the staging allocation (haccel_hostmem_alloc()) or of
 * io_uring_enter(2) (EINTR, EAGAIN and EBUSY from it are retried), or the
 * sink's error. After a failure every read has completed before this
 * returns, except when even waiting for them fails (logged at error level):
 * then they may still write to the destination.
 */
HACCEL_API int haccel_load(struct haccel_weights *w,
			   const struct haccel_load_params *p,
			   const struct haccel_sink *sink,
			   struct haccel_load_stats *stats);

/* ------------------------------------------------------------------------ */
/* The hybrid model (docs/model.md)                                         */

struct haccel_model;

/* Name of preset i ("tiny", "small", "kimi-linear-48b-a3b", ...); NULL past
 * the last. */
HACCEL_API const char *haccel_model_preset_name(uint32_t i);

/* Overwrite files that already exist in the output directory. */
#define HACCEL_MODEL_INIT_FORCE (1u << 0)

/*
 * Write preset's config.json and, unless the preset is shape-only,
 * model.safetensors with seeded random weights (same seed, same bytes;
 * scaled so activations stay in range through every layer, with stored
 * checksums) into dir, which is created if missing, with any missing
 * directories above it. Returns 0, -ENOENT (no such preset), -EEXIST (files
 * there, no FORCE), -EINVAL, -EIO, -ENOMEM, or the -errno of a directory
 * that cannot be made (-ENOTDIR: a file is in the way).
 */
HACCEL_API int haccel_model_init(struct haccel_ctx *ctx, const char *preset,
				 const char *dir, uint64_t seed, uint32_t flags);

enum haccel_device {
	HACCEL_DEVICE_CPU = 0,   /* the reference backend */
	HACCEL_DEVICE_CUDA = 1,  /* GPU 0 through CUDA: weights, pools and
				  * workspace in GPU memory, decode steps
				  * replayed from CUDA graphs */
};

/* CUDA backend: launch every step's kernels directly, no CUDA graphs. */
#define HACCEL_MODEL_NO_GRAPHS (1u << 0)

struct haccel_model_params {
	uint32_t size;            /* sizeof(struct haccel_model_params) */
	uint32_t flags;           /* HACCEL_MODEL_* */
	uint32_t device;          /* enum haccel_device */
	uint32_t max_seqs;        /* sequences at once (default 16) */
	uint32_t max_seq_tokens;  /* longest sequence (default min(4096, config)) */
	uint32_t max_step_tokens; /* tokens in one step, all items (default 256) */
	uint32_t kv_pages;        /* 0: enough for max_seqs full sequences */
	uint32_t load_flags;      /* HACCEL_LOAD_* for the weights (default VERIFY) */
	uint32_t load_hostmem_flags; /* HACCEL_HOSTMEM_* for the loader's staging
				      * (default 0: pinned and placed, or the
				      * open fails saying why) */
};

/* Defaults as above. */
HACCEL_API void haccel_model_params_init(struct haccel_model_params *p);

/*
 * Open the model in dir: read and validate config.json, stream
 * model.safetensors (or its index) through the loader, check every tensor's
 * name, shape and dtype, and carve the KV and state pools and all step
 * workspace once. Returns 0, -EINVAL, -ENOENT, -EBADMSG (bad config or
 * weights, with haccel_last_error()), -ENOTSUP (shape-only preset), -EIO,
 * -ENOMEM.
 */
HACCEL_API int haccel_model_open(struct haccel_ctx *ctx, const char *dir,
				 const struct haccel_model_params *p,
				 struct haccel_model **out);
/* Close the model and free everything it carved. NULL is ignored. */
HACCEL_API void haccel_model_close(struct haccel_model *m);

struct haccel_model_info {
	uint32_t vocab_size;
	uint32_t hidden_size;
	uint32_t num_layers;
	uint32_t n_kda, n_dsa;
	uint32_t max_seqs, max_seq_tokens, max_step_tokens;
	int32_t eos_token_id;      /* -1: none */
	uint64_t params;
	uint64_t weight_bytes;     /* tensor bytes read from the checkpoint */
	uint64_t load_ns;
	uint32_t load_io_path;     /* enum haccel_io_path */
	uint32_t load_direct;
	struct haccel_kv_pool *kv;       /* the model's pools (for stats) */
	struct haccel_state_pool *state;
};

/* Describe the model. Returns 0 or -EINVAL. */
HACCEL_API int haccel_model_info(const struct haccel_model *m,
				 struct haccel_model_info *out);

/* Start a sequence (a KV block table and a zeroed state slot). Returns 0,
 * -EINVAL, -ENOSPC (max_seqs reached), -ENOMEM. */
HACCEL_API int haccel_model_seq_create(struct haccel_model *m, uint32_t *seq);
/* End a sequence and release its pages and slot. Returns 0, -EINVAL, -ENOENT. */
HACCEL_API int haccel_model_seq_free(struct haccel_model *m, uint32_t seq);
/* Tokens seq has processed. Returns 0, -EINVAL, -ENOENT. */
HACCEL_API int haccel_model_seq_length(const struct haccel_model *m,
				       uint32_t seq, uint32_t *n_tokens);

/* One sequence's share of a step: a prefill chunk or a decode token. */
struct haccel_step_item {
	uint32_t seq;
	uint32_t n_tokens;         /* >= 1 */
	const int32_t *tokens;
	float *logits;             /* NULL, or vocab_size floats: the logits
				    * predicting the token after the last one */
};

/*
 * Run one batched step: every item's tokens are appended to its sequence
 * and run through every layer; logits are written where asked. Sequences
 * may not repeat within a step. All or nothing: on failure no sequence
 * advanced. Returns 0, -EINVAL, -ENOENT, -E2BIG (more than max_step_tokens
 * or past max_seq_tokens), -ENOMEM (KV pages exhausted).
 */
HACCEL_API int haccel_model_step(struct haccel_model *m,
				 const struct haccel_step_item *items,
				 uint32_t n_items);

/*
 * Pick the next token from logits: greedy when temperature is 0 (ties to
 * the smaller id), else softmax(logits / temperature) cut to the smallest
 * set of most likely tokens whose mass reaches top_p, drawn with the
 * xorshift generator in *rng (advanced). Allocates nothing. Returns 0, or
 * -EINVAL (a bad argument; a NaN or +inf logit, or every logit -inf: the
 * model's output is broken, said in haccel_last_error(); *rng and *token
 * untouched). -inf logits are masks: never drawn.
 */
HACCEL_API int haccel_model_sample(struct haccel_model *m, const float *logits,
				   float temperature, float top_p, uint64_t *rng,
				   int32_t *token);

#ifdef __cplusplus
}
#endif

#endif /* HACCEL_H */
