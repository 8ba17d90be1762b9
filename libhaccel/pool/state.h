/* SPDX-License-Identifier: MIT */
/* Internal view of the recurrent-state pool, for its invariant checker. */
#ifndef HACCEL_POOL_STATE_H
#define HACCEL_POOL_STATE_H

#include <stddef.h>

#include "haccel.h"

/*
 * Check the pool's invariants: slot and checkpoint free stacks against the
 * in-use flags, the checkpoint LRU list, and the key table. Returns 0, or
 * -EBADMSG with a reason in why. Allocates scratch memory: tests only.
 */
int haccel__state_pool_check(const struct haccel_state_pool *pool, char *why,
			     size_t why_len);

#endif /* HACCEL_POOL_STATE_H */
