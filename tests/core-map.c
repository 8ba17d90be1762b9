// SPDX-License-Identifier: MIT
/* The fixed-capacity multimap keeps every entry findable through inserts and backward-shift removals. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/map.h"
#include "ktap.h"

static int count_val(const struct haccel__map *m, uint64_t key, uint32_t val)
{
	uint64_t cur = haccel__map_home(m, key);
	uint32_t v;
	int n = 0;

	while ((v = haccel__map_next(m, key, &cur)) != HACCEL__MAP_EMPTY)
		n += v == val;
	return n;
}

static void t_basic(void)
{
	struct haccel__map m;

	KTAP_EXPECT_EQ(haccel__map_init(&m, 0), -EINVAL);
	KTAP_ASSERT_EQ(haccel__map_init(&m, 4), 0);
	KTAP_EXPECT_EQ(haccel__map_bytes(&m), 8 * sizeof(struct haccel__map_entry));
	KTAP_EXPECT_EQ(haccel__map_insert(&m, 10, 1), 0);
	KTAP_EXPECT_EQ(haccel__map_insert(&m, 10, 2), 0); /* duplicate key */
	KTAP_EXPECT_EQ(haccel__map_insert(&m, 11, 3), 0);
	KTAP_EXPECT_EQ(haccel__map_insert(&m, 12, 4), 0);
	KTAP_EXPECT_EQ(haccel__map_insert(&m, 13, 5), -ENOSPC);
	/* The value that marks free buckets is no value: invalid, full or not. */
	KTAP_EXPECT_EQ(haccel__map_insert(&m, 13, HACCEL__MAP_EMPTY), -EINVAL);
	KTAP_EXPECT_EQ(count_val(&m, 10, 1) + count_val(&m, 10, 2), 2);
	KTAP_EXPECT_EQ(haccel__map_remove(&m, 10, 3), -ENOENT);
	KTAP_EXPECT_EQ(haccel__map_remove(&m, 10, 1), 0);
	KTAP_EXPECT_EQ(count_val(&m, 10, 1), 0);
	KTAP_EXPECT_EQ(count_val(&m, 10, 2), 1);
	KTAP_EXPECT_EQ(haccel__map_check(&m), 0);
	haccel__map_clear(&m);
	KTAP_EXPECT_EQ(m.count, 0);
	KTAP_EXPECT_EQ(count_val(&m, 10, 2), 0);
	KTAP_EXPECT_EQ(haccel__map_insert(&m, 10, HACCEL__MAP_EMPTY), -EINVAL);
	KTAP_EXPECT_EQ(m.count, 0);
	KTAP_EXPECT_EQ(haccel__map_check(&m), 0);
	haccel__map_fini(&m);
}

/* Random inserts and removals, with few distinct keys so runs collide and
 * wrap around the table, checked against a plain array after every step. */
static void t_random_against_model(void)
{
	enum { CAP = 200, STEPS = 20000 };
	struct haccel__map m;
	struct { uint64_t key; uint32_t val; } model[CAP];
	uint32_t n = 0, next_val = 0;

	KTAP_ASSERT_EQ(haccel__map_init(&m, CAP), 0);
	for (int step = 0; step < STEPS; step++) {
		if (n < CAP && (n == 0 || ktap_rand_below(100) < 55)) {
			uint64_t key = ktap_rand_below(3) ? ktap_rand_below(16) : ktap_rand();
			KTAP_ASSERT_EQ(haccel__map_insert(&m, key, next_val), 0);
			model[n].key = key;
			model[n].val = next_val++;
			n++;
		} else {
			uint32_t i = (uint32_t)ktap_rand_below(n);
			KTAP_ASSERT_EQ(haccel__map_remove(&m, model[i].key, model[i].val), 0);
			model[i] = model[--n];
		}
		KTAP_ASSERT_EQ(m.count, n);
		KTAP_ASSERT_EQ(haccel__map_check(&m), 0);
		if (step % 97 == 0)
			for (uint32_t i = 0; i < n; i++)
				KTAP_ASSERT_EQ(count_val(&m, model[i].key, model[i].val), 1);
	}
	haccel__map_fini(&m);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_basic),
	KTAP_CASE(t_random_against_model),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
