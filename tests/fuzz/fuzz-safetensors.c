// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the safetensors header parser: the input is a whole
 * file image. It is parsed the way haccel_weights_open() reads a file (the
 * 8-byte length, then exactly the header, each in an exactly sized buffer,
 * so an over-read is an ASan error) and in one piece; both must agree. A
 * success must keep the parser's promises (tensors tile the data buffer,
 * sizes match shape x dtype) and a rejection must carry a message naming
 * the file. Anything else abort()s, which the fuzzer reports as a crash.
 *
 * tests/weights-fuzz-replay.c includes this file to replay the corpus and
 * the regressions in make check.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "haccel.h"
#include "weights/weights.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int fuzz_st_one(struct haccel_ctx *ctx, const uint8_t *data, size_t size);

static void fuzz_quiet(void *user, int level, const char *msg)
{
	(void)user;
	(void)level;
	(void)msg;
}

static int fuzz_cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void fuzz_check(const struct haccel__st_header *h, size_t size)
{
	uint64_t at = 0;
	char **names;

	if (h->data_start < 8 || h->data_start > size ||
	    h->data_start + h->data_bytes != size)
		abort();
	for (uint32_t i = 0; i < h->n_tensors; i++) {
		const struct haccel__tensor *t = &h->tensors[i];
		unsigned __int128 bits = haccel_dtype_bits(t->dtype);

		if (!t->name || t->dtype >= HACCEL_DTYPE_COUNT ||
		    t->n_dims > HACCEL_MAX_DIMS || t->file)
			abort();
		if (t->begin != at || t->end < t->begin)
			abort();
		for (uint32_t d = 0; d < t->n_dims && bits; d++) {
			bits *= t->shape[d];
			if (bits > (unsigned __int128)UINT64_MAX)
				abort(); /* passed the parser's overflow checks */
		}
		if (bits % 8 || bits / 8 != t->end - t->begin)
			abort();
		at = t->end;
	}
	if (at != h->data_bytes)
		abort();
	for (uint32_t i = 0; i < h->n_meta; i++)
		if (!h->meta_key[i] || !h->meta_val[i])
			abort();
	/* Names are unique. */
	names = malloc((h->n_tensors + 1) * sizeof(*names));
	if (!names)
		return;
	for (uint32_t i = 0; i < h->n_tensors; i++)
		names[i] = h->tensors[i].name;
	qsort(names, h->n_tensors, sizeof(*names), fuzz_cmp_name);
	for (uint32_t i = 1; i < h->n_tensors; i++)
		if (!strcmp(names[i - 1], names[i]))
			abort();
	free(names);
}

/* Parse buf[0, len) of a file of size bytes from an exactly sized copy. */
static int fuzz_parse(struct haccel_ctx *ctx, const uint8_t *data, size_t len,
		      size_t size, uint64_t *need, struct haccel__st_header *h)
{
	uint8_t *copy = malloc(len ? len : 1);
	int ret;

	if (!copy)
		return -ENOMEM;
	memcpy(copy, data, len);
	ret = haccel__st_parse(ctx, "fuzz", copy, len, size, need, h);
	free(copy);
	return ret;
}

int fuzz_st_one(struct haccel_ctx *ctx, const uint8_t *data, size_t size)
{
	struct haccel__st_header h, whole;
	uint64_t need = 0;
	char msg[1024];
	int ret, ret_whole;

	ret = fuzz_parse(ctx, data, size < 8 ? size : 8, size, &need, &h);
	if (ret == -EAGAIN) {
		if (need < 8 || need > size)
			abort();
		ret = fuzz_parse(ctx, data, need, size, &need, &h);
		if (ret == -EAGAIN)
			abort();
	}
	if (ret == -EBADMSG) {
		haccel_last_error(ctx, msg, sizeof(msg));
		if (strncmp(msg, "fuzz: ", 6))
			abort();
	} else if (ret && ret != -ENOMEM) {
		abort();
	}

	ret_whole = haccel__st_parse(ctx, "fuzz", data, size, size, NULL, &whole);
	if (ret_whole != ret && ret != -ENOMEM && ret_whole != -ENOMEM)
		abort();
	if (!ret_whole) {
		fuzz_check(&whole, size);
		if (!ret && (whole.n_tensors != h.n_tensors || whole.n_meta != h.n_meta))
			abort();
		haccel__st_header_free(&whole);
	}
	if (!ret)
		haccel__st_header_free(&h);
	return ret;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct haccel_ctx *ctx;
	struct haccel_open_params p;

	if (!ctx) {
		haccel_open_params_init(&p);
		p.log_fn = fuzz_quiet;
		if (haccel_open(&p, &ctx))
			abort();
	}
	fuzz_st_one(ctx, data, size);
	return 0;
}
