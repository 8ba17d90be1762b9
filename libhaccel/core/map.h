/* SPDX-License-Identifier: MIT */
/*
 * A fixed-capacity multimap from 64-bit keys to 32-bit values: open
 * addressing, linear probing, backward-shift deletion (no tombstones, so
 * probe lengths never degrade however long the pool runs). Sized once at
 * init for at most max_entries live entries at a load factor <= 1/2.
 *
 * Equal keys may coexist: callers verify each candidate themselves, which
 * is what makes a hash collision harmless for the pools.
 */
#ifndef HACCEL_CORE_MAP_H
#define HACCEL_CORE_MAP_H

#include <stdint.h>

#define HACCEL__MAP_EMPTY UINT32_MAX

struct haccel__map_entry {
	uint64_t key;
	uint32_t val;  /* HACCEL__MAP_EMPTY marks a free bucket */
	uint32_t pad;
};

struct haccel__map {
	struct haccel__map_entry *e;
	uint64_t mask;       /* buckets - 1 */
	uint32_t count;      /* live entries */
	uint32_t max_entries;
};

/* Allocate buckets for max_entries. Returns 0, -EINVAL, -ENOMEM. */
int haccel__map_init(struct haccel__map *m, uint32_t max_entries);
void haccel__map_fini(struct haccel__map *m);
/* Bytes the buckets take. */
uint64_t haccel__map_bytes(const struct haccel__map *m);
/* Remove every entry. */
void haccel__map_clear(struct haccel__map *m);

/* Start a search for key; pass the cursor to haccel__map_next. */
static inline uint64_t haccel__map_home(const struct haccel__map *m, uint64_t key)
{
	uint64_t h = key;

	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h & m->mask;
}

/*
 * Next value stored under key at or after *cursor (start with
 * haccel__map_home()); HACCEL__MAP_EMPTY when there are no more.
 */
static inline uint32_t haccel__map_next(const struct haccel__map *m,
					uint64_t key, uint64_t *cursor)
{
	uint64_t i = *cursor;

	for (;;) {
		const struct haccel__map_entry *e = &m->e[i];

		if (e->val == HACCEL__MAP_EMPTY) {
			*cursor = i;
			return HACCEL__MAP_EMPTY;
		}
		i = (i + 1) & m->mask;
		if (e->key == key) {
			*cursor = i;
			return e->val;
		}
	}
}

/* Insert (key, val); duplicates allowed. Returns 0, -ENOSPC when full, or
 * -EINVAL for the reserved value HACCEL__MAP_EMPTY. */
int haccel__map_insert(struct haccel__map *m, uint64_t key, uint32_t val);
/* Remove the entry (key, val). Returns 0 or -ENOENT. */
int haccel__map_remove(struct haccel__map *m, uint64_t key, uint32_t val);
/* Check the structure: every entry reachable from its home bucket without
 * crossing an empty one, and the count right. Returns 0 or -EBADMSG. */
int haccel__map_check(const struct haccel__map *m);

#endif /* HACCEL_CORE_MAP_H */
