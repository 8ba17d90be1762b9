// SPDX-License-Identifier: MIT
/* Log lines go to the caller's callback, or to stderr as one write each. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "log.h"

static const char *const level_names[] = { "error", "warn", "info", "debug" };

int haccel__log_level_parse(const char *s)
{
	if (!s || !*s)
		return -EINVAL;
	if (s[0] >= '0' && s[0] <= '3' && s[1] == '\0')
		return s[0] - '0';
	for (int i = 0; i < 4; i++)
		if (!strcasecmp(s, level_names[i]))
			return i;
	return -EINVAL;
}

static void emit(const struct haccel_ctx *ctx, int level, const char *line);

void haccel__log(const struct haccel_ctx *ctx, int level, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	if (!ctx || level > ctx->log_level)
		return;
	if (level < 0)
		level = 0;
	if (level > HACCEL_LOG_DEBUG)
		level = HACCEL_LOG_DEBUG;
	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n >= 0)
		emit(ctx, level, line);
}

/* The last failure recorded by this thread (of any context): the library's
 * own callers compare counts around a call to tell whether that call said
 * why, without mistaking another thread's failure for it. */
static _Thread_local struct {
	const struct haccel_ctx *ctx;
	uint64_t n;
	char msg[1024];
} thread_err;

int haccel__fail(struct haccel_ctx *ctx, int status, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	if (!ctx)
		return status;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&ctx->lock);
	memcpy(ctx->last_error, line, sizeof(line));
	ctx->n_errors++;
	pthread_mutex_unlock(&ctx->lock);
	thread_err.ctx = ctx;
	thread_err.n++;
	memcpy(thread_err.msg, line, sizeof(line));
	if (ctx->log_level >= HACCEL_LOG_ERROR)
		emit(ctx, HACCEL_LOG_ERROR, line);
	return status;
}

uint64_t haccel__thread_errors(void)
{
	return thread_err.n;
}

size_t haccel__thread_last_error(const struct haccel_ctx *ctx, char *buf, size_t len)
{
	size_t n = thread_err.ctx == ctx ? strlen(thread_err.msg) : 0;

	if (buf && len) {
		size_t c = n < len - 1 ? n : len - 1;

		memcpy(buf, thread_err.msg, c);
		buf[c] = '\0';
	}
	return n;
}

size_t haccel_last_error(struct haccel_ctx *ctx, char *buf, size_t len)
{
	size_t n;

	if (!ctx)
		return 0;
	pthread_mutex_lock(&ctx->lock);
	n = strlen(ctx->last_error);
	if (buf && len) {
		size_t c = n < len - 1 ? n : len - 1;
		memcpy(buf, ctx->last_error, c);
		buf[c] = '\0';
	}
	pthread_mutex_unlock(&ctx->lock);
	return n;
}

static void emit(const struct haccel_ctx *ctx, int level, const char *line)
{
	int n;

	if (ctx->log_fn) {
		ctx->log_fn(ctx->log_user, level, line);
		return;
	}
	/* One write per line so lines of concurrent threads never interleave. */
	char out[1100];
	n = snprintf(out, sizeof(out), "haccel: %s: %s\n", level_names[level], line);
	if (n > 0) {
		size_t len = (size_t)n < sizeof(out) ? (size_t)n : sizeof(out) - 1;
		ssize_t w = write(STDERR_FILENO, out, len);
		(void)w;
	}
}
