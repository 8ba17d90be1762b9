/* SPDX-License-Identifier: MIT */
/* Logging through the context's sink; formats on the stack, never allocates. */
#ifndef HACCEL_CORE_LOG_H
#define HACCEL_CORE_LOG_H

#include "ctx.h"

void haccel__log(const struct haccel_ctx *ctx, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define haccel__err(ctx, ...) haccel__log(ctx, HACCEL_LOG_ERROR, __VA_ARGS__)
#define haccel__warn(ctx, ...) haccel__log(ctx, HACCEL_LOG_WARN, __VA_ARGS__)
#define haccel__info(ctx, ...) haccel__log(ctx, HACCEL_LOG_INFO, __VA_ARGS__)
#define haccel__dbg(ctx, ...) haccel__log(ctx, HACCEL_LOG_DEBUG, __VA_ARGS__)

/* Failures haccel__fail() recorded in this thread, and the last one's
 * message if it was for ctx (else ""): for the library's own use around
 * a call whose failure it wraps (haccel_last_error() is the context's,
 * whichever thread failed). */
uint64_t haccel__thread_errors(void);
size_t haccel__thread_last_error(const struct haccel_ctx *ctx, char *buf, size_t len);

/* Parse "error|warn|info|debug" or a digit; -EINVAL when neither. */
int haccel__log_level_parse(const char *s);

#endif /* HACCEL_CORE_LOG_H */
