/* SPDX-License-Identifier: MIT */
/* The context: the only mutable state of the library outside its objects. */
#ifndef HACCEL_CORE_CTX_H
#define HACCEL_CORE_CTX_H

#include "haccel.h"

struct haccel_ctx {
	/* Set at open, read-only after: a context may be shared by threads
	 * that each own different pools. */
	int log_level;
	void (*log_fn)(void *user, int level, const char *msg);
	void *log_user;
};

/*
 * Copy a caller's versioned config struct into a full-size local copy:
 * fields the caller's (older, smaller) struct lacks keep the defaults that
 * dst already holds. A struct larger than ours is accepted only when the
 * extra bytes are zero, so a newer caller's unknown settings never vanish
 * silently. Returns 0 or -EINVAL.
 */
int haccel__config_copy(void *dst, size_t dst_size, const void *src,
			size_t min_size);

#endif /* HACCEL_CORE_CTX_H */
