/* SPDX-License-Identifier: MIT */
/* Internal view of the KV page pool, for its invariant checker and tests. */
#ifndef HACCEL_POOL_KV_H
#define HACCEL_POOL_KV_H

#include <stddef.h>
#include <stdint.h>

#include "haccel.h"

/*
 * Check every invariant of the pool: page states against the free stack and
 * the LRU list, reference counts against block tables and outside gets, the
 * prefix table against page keys and token ids, sequence bookkeeping and the
 * stats identities. Returns 0, or -EBADMSG with a reason in why. Allocates
 * scratch memory: for tests and debugging, never on a hot path.
 */
int haccel__kv_pool_check(const struct haccel_kv_pool *pool, char *why,
			  size_t why_len);

/* Reference count of one page (tests compare it with their model). */
uint32_t haccel__kv_page_ref(const struct haccel_kv_pool *pool, uint32_t page);

/* The chained key of a full page of token ids following parent_key
 * (parent_key of the first page: haccel__kv_root_key()). */
uint64_t haccel__kv_chain_key(uint64_t parent_key, const int32_t *tokens,
			      uint32_t n);
uint64_t haccel__kv_root_key(void);

/* Narrow every key to mask (tests force hash collisions with it). */
void haccel__kv_pool_set_key_mask(struct haccel_kv_pool *pool, uint64_t mask);

#endif /* HACCEL_POOL_KV_H */
