// SPDX-License-Identifier: MIT
/* Fixed-capacity open-addressing multimap; see map.h. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "map.h"
#include "util.h"

int haccel__map_init(struct haccel__map *m, uint32_t max_entries)
{
	uint64_t buckets;

	memset(m, 0, sizeof(*m));
	if (max_entries == 0 || max_entries == UINT32_MAX)
		return -EINVAL;
	/* Load factor at most 1/2 keeps linear probes short. */
	buckets = haccel__pow2_ceil((uint64_t)max_entries * 2);
	m->e = malloc(buckets * sizeof(*m->e));
	if (!m->e)
		return -ENOMEM;
	m->mask = buckets - 1;
	m->max_entries = max_entries;
	haccel__map_clear(m);
	return 0;
}

void haccel__map_fini(struct haccel__map *m)
{
	free(m->e);
	memset(m, 0, sizeof(*m));
}

uint64_t haccel__map_bytes(const struct haccel__map *m)
{
	return (m->mask + 1) * sizeof(*m->e);
}

void haccel__map_clear(struct haccel__map *m)
{
	for (uint64_t i = 0; i <= m->mask; i++) {
		m->e[i].key = 0;
		m->e[i].val = HACCEL__MAP_EMPTY;
		m->e[i].pad = 0;
	}
	m->count = 0;
}

int haccel__map_insert(struct haccel__map *m, uint64_t key, uint32_t val)
{
	uint64_t i;

	/* The reserved value marks free buckets: it cannot be stored. */
	if (val == HACCEL__MAP_EMPTY)
		return -EINVAL;
	if (m->count >= m->max_entries)
		return -ENOSPC;
	i = haccel__map_home(m, key);
	while (m->e[i].val != HACCEL__MAP_EMPTY)
		i = (i + 1) & m->mask;
	m->e[i].key = key;
	m->e[i].val = val;
	m->count++;
	return 0;
}

int haccel__map_remove(struct haccel__map *m, uint64_t key, uint32_t val)
{
	uint64_t i = haccel__map_home(m, key);

	for (;;) {
		if (m->e[i].val == HACCEL__MAP_EMPTY)
			return -ENOENT;
		if (m->e[i].key == key && m->e[i].val == val)
			break;
		i = (i + 1) & m->mask;
	}
	/*
	 * Backward-shift: pull later entries of the run into the hole when
	 * their home bucket does not lie cyclically in (hole, j], so every
	 * entry stays reachable from its home without tombstones.
	 */
	uint64_t hole = i, j = i;
	for (;;) {
		j = (j + 1) & m->mask;
		if (m->e[j].val == HACCEL__MAP_EMPTY)
			break;
		uint64_t home = haccel__map_home(m, m->e[j].key);
		if (((j - home) & m->mask) >= ((j - hole) & m->mask)) {
			m->e[hole] = m->e[j];
			hole = j;
		}
	}
	m->e[hole].key = 0;
	m->e[hole].val = HACCEL__MAP_EMPTY;
	m->count--;
	return 0;
}

int haccel__map_check(const struct haccel__map *m)
{
	uint32_t live = 0;

	for (uint64_t i = 0; i <= m->mask; i++) {
		if (m->e[i].val == HACCEL__MAP_EMPTY)
			continue;
		live++;
		for (uint64_t k = haccel__map_home(m, m->e[i].key); k != i;
		     k = (k + 1) & m->mask)
			if (m->e[k].val == HACCEL__MAP_EMPTY)
				return -EBADMSG;
	}
	return live == m->count ? 0 : -EBADMSG;
}
