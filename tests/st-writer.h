/* SPDX-License-Identifier: MIT */
/*
 * Writes safetensors checkpoints from test code, valid or broken on purpose:
 * a list of (name, dtype, shape, begin, end) plus raw overrides of the
 * header, its length field and the data size, so each rule of the parser
 * has a test that builds its own bad file. Files go to a mkdtemp directory
 * under /tmp that the test removes with st_rmtree().
 *
 *   struct st_tensor t[] = { ST_T("w", "BF16", 0, 8, 2, 2) };
 *   struct st_spec s = { .tensors = t, .n = 1 };
 *   char *dir = st_tmpdir(), path[ST_PATH];
 *   st_write(st_join(path, dir, "model.safetensors"), &s);
 *
 * Data byte i of a file is st_data_byte(i), so a loader test can check
 * what it read.
 */
#ifndef HACCEL_TESTS_ST_WRITER_H
#define HACCEL_TESTS_ST_WRITER_H

#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "haccel.h"
#include "ktap.h"
#include "test-util.h"

#define ST_PATH 512
#define ST_MAX_DIMS (HACCEL_MAX_DIMS + 4) /* room for too many dims */

struct st_tensor {
	const char *name;
	const char *dtype;
	uint64_t begin, end;
	uint32_t n_dims;
	uint64_t shape[ST_MAX_DIMS];
};

/* A tensor at [begin, end) with the given dims: ST_T("w", "F32", 0, 16, 2, 2). */
#define ST_T(nm, dt, b, e, ...)                                                \
	{ .name = (nm), .dtype = (dt), .begin = (b), .end = (e),               \
	  .n_dims = sizeof((uint64_t[]){ __VA_ARGS__ }) / sizeof(uint64_t),   \
	  .shape = { __VA_ARGS__ } }
/* A scalar (shape []). */
#define ST_SCALAR(nm, dt, b, e)                                                \
	{ .name = (nm), .dtype = (dt), .begin = (b), .end = (e), .n_dims = 0 }

struct st_spec {
	const struct st_tensor *tensors;
	size_t n;
	const char *meta;       /* raw JSON for "__metadata__", written first; NULL: none */
	const char *extra;      /* raw members appended to the header object */
	const char *header;     /* raw header replacing the generated one */
	uint32_t pad;           /* spaces after the header, counted in its length */
	int64_t data_adjust;    /* data bytes added (or cut, < 0) past the last end */
	bool len_set;           /* write len as the header length field */
	uint64_t len;
};

static inline uint8_t st_data_byte(uint64_t i)
{
	return (uint8_t)(i * 31 + 7 + (i >> 8));
}

/* Bits of a dtype given by name, 0 when unknown to the library. */
static inline uint32_t st_dtype_bits(const char *dtype)
{
	for (uint32_t d = 0; haccel_dtype_name(d); d++)
		if (!strcmp(haccel_dtype_name(d), dtype))
			return haccel_dtype_bits(d);
	return 0;
}

/* Lay the tensors out one after another from 0, sized by shape and dtype. */
static inline void st_pack(struct st_tensor *t, size_t n)
{
	uint64_t at = 0;

	for (size_t i = 0; i < n; i++) {
		uint64_t el = 1;

		for (uint32_t d = 0; d < t[i].n_dims; d++)
			el *= t[i].shape[d];
		t[i].begin = at;
		at += el * st_dtype_bits(t[i].dtype) / 8;
		t[i].end = at;
	}
}

/* A growing string. */
struct st_buf {
	char *s;
	size_t len, cap;
};

static inline void st_puts(struct st_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static inline void st_puts(struct st_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	KTAP_ASSERT(n >= 0);
	if (b->len + (size_t)n + 1 > b->cap) {
		b->cap = (b->len + (size_t)n + 1) * 2;
		b->s = realloc(b->s, b->cap);
		KTAP_ASSERT(b->s != NULL);
	}
	va_start(ap, fmt);
	vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

static inline void st_put_jstr(struct st_buf *b, const char *s)
{
	st_puts(b, "\"");
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			st_puts(b, "\\%c", c);
		else if (c < 0x20)
			st_puts(b, "\\u%04x", c);
		else
			st_puts(b, "%c", c);
	}
	st_puts(b, "\"");
}

/* The header JSON the spec describes (without padding); free() it. */
static inline char *st_header_json(const struct st_spec *s)
{
	struct st_buf b = { 0 };
	bool first = true;

	if (s->header) {
		st_puts(&b, "%s", s->header);
		return b.s;
	}
	st_puts(&b, "{");
	if (s->meta) {
		st_puts(&b, "\"__metadata__\":%s", s->meta);
		first = false;
	}
	for (size_t i = 0; i < s->n; i++) {
		const struct st_tensor *t = &s->tensors[i];

		st_puts(&b, "%s", first ? "" : ",");
		first = false;
		st_put_jstr(&b, t->name);
		st_puts(&b, ":{\"dtype\":\"%s\",\"shape\":[", t->dtype);
		for (uint32_t d = 0; d < t->n_dims; d++)
			st_puts(&b, "%s%llu", d ? "," : "",
				(unsigned long long)t->shape[d]);
		st_puts(&b, "],\"data_offsets\":[%llu,%llu]}",
			(unsigned long long)t->begin, (unsigned long long)t->end);
	}
	if (s->extra)
		st_puts(&b, "%s%s", first ? "" : ",", s->extra);
	st_puts(&b, "}");
	return b.s;
}

/* The whole file image; free() it. */
static inline uint8_t *st_image(const struct st_spec *s, size_t *len)
{
	char *hdr = st_header_json(s);
	uint64_t hlen = strlen(hdr) + s->pad, data = 0, n;
	uint8_t *img;

	for (size_t i = 0; i < s->n; i++)
		if (s->tensors[i].end > data)
			data = s->tensors[i].end;
	KTAP_ASSERT(s->data_adjust >= 0 || (uint64_t)-s->data_adjust <= data);
	data += (uint64_t)s->data_adjust;
	n = s->len_set ? s->len : hlen;
	*len = 8 + hlen + data;
	img = malloc(*len ? *len : 1);
	KTAP_ASSERT(img != NULL);
	for (int i = 0; i < 8; i++)
		img[i] = (uint8_t)(n >> (8 * i));
	memcpy(img + 8, hdr, strlen(hdr));
	memset(img + 8 + strlen(hdr), ' ', s->pad);
	for (uint64_t i = 0; i < data; i++)
		img[8 + hlen + i] = st_data_byte(i);
	free(hdr);
	return img;
}

static inline void st_write_bytes(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	KTAP_ASSERT(fd >= 0);
	KTAP_ASSERT(write(fd, buf, len) == (ssize_t)len);
	KTAP_ASSERT(close(fd) == 0);
}

static inline void st_write_text(const char *path, const char *text)
{
	st_write_bytes(path, text, strlen(text));
}

/* Write the file the spec describes; returns its size. */
static inline size_t st_write(const char *path, const struct st_spec *s)
{
	size_t len;
	uint8_t *img = st_image(s, &len);

	st_write_bytes(path, img, len);
	free(img);
	return len;
}

static inline const char *st_join(char *buf, const char *dir, const char *name)
{
	int n = snprintf(buf, ST_PATH, "%s/%s", dir, name);

	KTAP_ASSERT(n > 0 && n < ST_PATH);
	return buf;
}

/* A fresh directory under /tmp; remove it with st_rmtree(). */
static inline char *st_tmpdir(void)
{
	char *dir = strdup("/tmp/haccel-st-XXXXXX");

	KTAP_ASSERT(dir != NULL);
	KTAP_ASSERT(mkdtemp(dir) != NULL);
	return dir;
}

static inline void st_rmtree(char *dir)
{
	KTAP_EXPECT_EQ(test_rmtree(dir), 0);
	free(dir);
}

/* A context whose log goes nowhere: the tests provoke errors on purpose. */
static inline void st_log_sink(void *user, int level, const char *msg)
{
	(void)user;
	(void)level;
	(void)msg;
}

static inline struct haccel_ctx *st_ctx(void)
{
	struct haccel_open_params p;
	struct haccel_ctx *ctx = NULL;

	haccel_open_params_init(&p);
	p.log_fn = st_log_sink;
	KTAP_ASSERT_EQ(haccel_open(&p, &ctx), 0);
	return ctx;
}

/*
 * Expect haccel_weights_open(path) to fail with status and the last error
 * to contain each string of the NULL-terminated list (the file, the tensor,
 * the rule). Prints the message either way, so the log shows the wording.
 */
static inline void st_expect_fail_at(const char *file, int line,
				     struct haccel_ctx *ctx, const char *path,
				     int status, ...)
{
	struct haccel_weights *w = (struct haccel_weights *)1;
	char msg[1024] = "";
	const char *want;
	va_list ap;
	int ret;

	ret = haccel_weights_open(ctx, path, 0, &w);
	haccel_last_error(ctx, msg, sizeof(msg));
	ktap_diag("%s", msg);
	if (ret != status)
		ktap_fail_at(file, line, "open %s: %d (%s), expected %d", path,
			     ret, haccel_status_name(ret), status);
	if (w) {
		ktap_fail_at(file, line, "failed open left *out set");
		if (!ret)
			haccel_weights_close(w);
	}
	va_start(ap, status);
	while ((want = va_arg(ap, const char *)))
		if (!strstr(msg, want))
			ktap_fail_at(file, line, "message lacks '%s'", want);
	va_end(ap);
}

#define ST_EXPECT_FAIL(ctx, path, status, ...) \
	st_expect_fail_at(__FILE__, __LINE__, ctx, path, status, __VA_ARGS__, (const char *)NULL)

/* Open path, which must succeed. */
static inline struct haccel_weights *st_open_at(const char *file, int line,
						struct haccel_ctx *ctx,
						const char *path)
{
	struct haccel_weights *w = NULL;
	char msg[1024] = "";
	int ret = haccel_weights_open(ctx, path, 0, &w);

	if (ret) {
		haccel_last_error(ctx, msg, sizeof(msg));
		ktap_fail_at(file, line, "open %s: %s: %s", path,
			     haccel_status_name(ret), msg);
		ktap_end();
	}
	return w;
}

#define ST_OPEN(ctx, path) st_open_at(__FILE__, __LINE__, ctx, path)

/* Load w through sink with flags, queue depth qd, chunk bytes and three
 * threads, its stats into *stats (zeroed first); returns the status. */
static inline int st_load(struct haccel_weights *w, const struct haccel_sink *sink,
			  uint32_t flags, uint32_t qd, uint32_t chunk,
			  struct haccel_load_stats *stats)
{
	struct haccel_load_params p;

	haccel_load_params_init(&p);
	p.flags = flags;
	p.queue_depth = qd;
	p.chunk_bytes = chunk;
	p.threads = 3;
	memset(stats, 0, sizeof(*stats));
	return haccel_load(w, &p, sink, stats);
}

/* Every tensor of w at its dest_offset in dest holds the bytes st-writer
 * wrote for it (a failure names the first wrong byte). */
static inline void st_expect_tensors(struct haccel_weights *w, const uint8_t *dest,
				     const char *what)
{
	struct haccel_weights_info info;

	haccel_weights_info(w, &info);
	for (uint32_t i = 0; i < info.n_tensors; i++) {
		struct haccel_tensor_info t, f0;

		haccel_weights_tensor(w, i, &t);
		/* The first tensor of a file begins its data region (no holes),
		 * and st-writer made data byte k equal to st_data_byte(k). */
		for (uint32_t k = 0;; k++) {
			haccel_weights_tensor(w, k, &f0);
			if (f0.file == t.file)
				break;
		}
		uint64_t region_off = t.file_offset - f0.file_offset;
		for (uint64_t k = 0; k < t.bytes; k++)
			if (dest[t.dest_offset + k] != st_data_byte(region_off + k)) {
				ktap_fail_at(__FILE__, __LINE__, "%s: tensor %s byte %llu wrong",
					     what, t.name, (unsigned long long)k);
				return;
			}
	}
}

#endif /* HACCEL_TESTS_ST_WRITER_H */
