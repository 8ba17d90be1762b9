// SPDX-License-Identifier: MIT
/* Valid safetensors files: sizes, offsets and destinations, padding, scalars, packed dtypes, metadata order, checksums, lookups, API arguments. */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "st-writer.h"
#include "weights/weights.h"

static struct haccel_ctx *ctx;
static char *dir;
static char path[ST_PATH];

static void setup(const char *name)
{
	ctx = st_ctx();
	dir = st_tmpdir();
	st_join(path, dir, name);
}

static void teardown(void)
{
	st_rmtree(dir);
	haccel_close(ctx);
}

static struct haccel_weights_info info(struct haccel_weights *w)
{
	struct haccel_weights_info wi;

	KTAP_ASSERT_EQ(haccel_weights_info(w, &wi), 0);
	return wi;
}

static struct haccel_tensor_info tensor(struct haccel_weights *w, const char *name)
{
	struct haccel_tensor_info ti;
	uint32_t i;

	KTAP_ASSERT_EQ(haccel_weights_find(w, name, &i), 0);
	KTAP_ASSERT_EQ(haccel_weights_tensor(w, i, &ti), 0);
	KTAP_EXPECT(!strcmp(ti.name, name));
	return ti;
}

static void t_empty_checkpoint(void)
{
	struct st_spec s = { .pad = 6 };
	struct haccel_weights *w;
	struct haccel_weights_info wi;
	struct haccel_tensor_info ti;

	setup("empty.safetensors");
	/* "{}" plus 6 spaces: the reference writer's empty file, byte for byte. */
	KTAP_EXPECT_EQ(st_write(path, &s), 16);
	w = ST_OPEN(ctx, path);
	wi = info(w);
	KTAP_EXPECT_EQ(wi.n_files, 1);
	KTAP_EXPECT_EQ(wi.n_tensors, 0);
	KTAP_EXPECT_EQ(wi.tensor_bytes, 0);
	KTAP_EXPECT_EQ(wi.file_bytes, 16);
	KTAP_EXPECT_EQ(wi.dest_bytes, 0);
	KTAP_EXPECT_EQ(haccel_weights_tensor(w, 0, &ti), -ERANGE);
	KTAP_EXPECT(!strcmp(haccel_weights_file(w, 0), path));
	KTAP_EXPECT(haccel_weights_file(w, 1) == NULL);
	haccel_weights_close(w);
	teardown();
}

static void t_sizes_offsets_destinations(void)
{
	struct st_tensor t[] = {
		ST_T("zero", "U8", 0, 0, 0), ST_T("one", "U8", 0, 0, 1),
		ST_T("page_and_one", "U8", 0, 0, 4097), ST_T("f32", "F32", 0, 0, 3, 5),
	};
	struct st_spec s = { .tensors = t, .n = 4 };
	struct haccel_tensor_info ti;
	struct haccel_weights *w;
	uint64_t data_start, size;
	char *hdr;

	setup("sizes.safetensors");
	st_pack(t, 4);
	size = st_write(path, &s);
	hdr = st_header_json(&s);
	data_start = 8 + strlen(hdr);
	free(hdr);
	KTAP_EXPECT(size % 4096 != 0);
	w = ST_OPEN(ctx, path);
	KTAP_EXPECT_EQ(info(w).n_tensors, 4);
	KTAP_EXPECT_EQ(info(w).tensor_bytes, 0 + 1 + 4097 + 60);
	KTAP_EXPECT_EQ(info(w).file_bytes, size);
	/* One file: the destination is its data region as is. */
	KTAP_EXPECT_EQ(info(w).dest_bytes, 4158);
	for (int i = 0; i < 4; i++) {
		ti = tensor(w, t[i].name);
		KTAP_EXPECT_EQ(ti.bytes, t[i].end - t[i].begin);
		KTAP_EXPECT_EQ(ti.file_offset, data_start + t[i].begin);
		KTAP_EXPECT_EQ(ti.dest_offset, t[i].begin);
		KTAP_EXPECT_EQ(ti.file, 0);
		KTAP_EXPECT_EQ(ti.has_checksum, 0);
	}
	ti = tensor(w, "f32");
	KTAP_EXPECT_EQ(ti.dtype, HACCEL_DTYPE_F32);
	KTAP_EXPECT_EQ(ti.n_dims, 2);
	KTAP_EXPECT_EQ(ti.shape[0], 3);
	KTAP_EXPECT_EQ(ti.shape[1], 5);
	KTAP_EXPECT_EQ(ti.shape[2], 0);
	haccel_weights_close(w);
	teardown();
}

static void t_header_space_padding(void)
{
	struct st_tensor t[] = { ST_T("w", "BF16", 0, 6, 3) };
	struct st_spec s = { .tensors = t, .n = 1 };
	struct haccel_weights *w;
	char *hdr = st_header_json(&s);

	setup("pad.safetensors");
	for (uint32_t pad = 0; pad < 9; pad += 4) {
		s.pad = pad;
		st_write(path, &s);
		w = ST_OPEN(ctx, path);
		KTAP_EXPECT_EQ(tensor(w, "w").file_offset, 8 + strlen(hdr) + pad);
		haccel_weights_close(w);
	}
	free(hdr);
	teardown();
}

static void t_scalars(void)
{
	struct st_tensor t[] = { ST_SCALAR("step", "I64", 0, 8), ST_SCALAR("lr", "F32", 8, 12) };
	struct st_spec s = { .tensors = t, .n = 2 };
	struct haccel_tensor_info ti;
	struct haccel_weights *w;

	setup("scalar.safetensors");
	st_write(path, &s);
	w = ST_OPEN(ctx, path);
	ti = tensor(w, "step");
	KTAP_EXPECT_EQ(ti.n_dims, 0);
	KTAP_EXPECT_EQ(ti.bytes, 8);
	KTAP_EXPECT_EQ(tensor(w, "lr").bytes, 4);
	haccel_weights_close(w);
	teardown();
}

static void t_packed_subbyte_dtypes(void)
{
	struct st_tensor t[] = {
		ST_T("f4", "F4", 0, 0, 2, 3),       /* 6 x 4 bits = 3 bytes */
		ST_T("f6a", "F6_E2M3", 0, 0, 4),    /* 4 x 6 bits = 3 bytes */
		ST_T("f6b", "F6_E3M2", 0, 0, 8, 2), /* 16 x 6 bits = 12 bytes */
		ST_T("e8", "F8_E8M0", 0, 0, 2),
	};
	struct st_spec s = { .tensors = t, .n = 4 };
	struct haccel_weights *w;

	setup("packed.safetensors");
	st_pack(t, 4);
	st_write(path, &s);
	w = ST_OPEN(ctx, path);
	KTAP_EXPECT_EQ(tensor(w, "f4").bytes, 3);
	KTAP_EXPECT_EQ(tensor(w, "f4").dtype, HACCEL_DTYPE_F4);
	KTAP_EXPECT_EQ(tensor(w, "f6a").bytes, 3);
	KTAP_EXPECT_EQ(tensor(w, "f6b").bytes, 12);
	KTAP_EXPECT_EQ(tensor(w, "e8").bytes, 2);
	haccel_weights_close(w);
	teardown();
}

static void t_every_dtype(void)
{
	static const char *const names[] = {
		"BOOL", "U8", "I8", "F8_E4M3", "F8_E5M2", "F8_E8M0", "I16", "U16",
		"F16", "BF16", "I32", "U32", "F32", "I64", "U64", "F64", "C64",
		"F4", "F6_E2M3", "F6_E3M2", "F8_E4M3FNUZ", "F8_E5M2FNUZ",
	};
	static const uint32_t bits[] = { 8, 8, 8, 8, 8, 8, 16, 16, 16, 16, 32,
					 32, 32, 64, 64, 64, 64, 4, 6, 6, 8, 8 };
	struct st_tensor t[HACCEL_DTYPE_COUNT];
	struct st_spec s = { .tensors = t, .n = HACCEL_DTYPE_COUNT };
	struct haccel_weights *w;

	KTAP_ASSERT_EQ(sizeof(names) / sizeof(names[0]), HACCEL_DTYPE_COUNT);
	for (uint32_t d = 0; d < HACCEL_DTYPE_COUNT; d++) {
		KTAP_EXPECT(!strcmp(haccel_dtype_name(d), names[d]));
		KTAP_EXPECT_EQ(haccel_dtype_bits(d), bits[d]);
		t[d] = (struct st_tensor)ST_T(names[d], names[d], 0, 0, 8);
	}
	KTAP_EXPECT(haccel_dtype_name(HACCEL_DTYPE_COUNT) == NULL);
	KTAP_EXPECT_EQ(haccel_dtype_bits(HACCEL_DTYPE_COUNT), 0);
	KTAP_EXPECT(haccel_dtype_name(UINT32_MAX) == NULL);

	setup("dtypes.safetensors");
	st_pack(t, HACCEL_DTYPE_COUNT);
	st_write(path, &s);
	w = ST_OPEN(ctx, path);
	for (uint32_t d = 0; d < HACCEL_DTYPE_COUNT; d++) {
		struct haccel_tensor_info ti = tensor(w, names[d]);

		KTAP_EXPECT_EQ(ti.dtype, d);
		KTAP_EXPECT_EQ(ti.bytes, bits[d]);
	}
	haccel_weights_close(w);
	teardown();
}

static void t_metadata_in_header_order(void)
{
	struct st_tensor t[] = { ST_T("w", "U8", 0, 1, 1) };
	struct st_spec s = { .tensors = t, .n = 1,
			     .meta = "{\"zeta\":\"1\",\"alpha\":\"\",\"format\":\"pt\",\"note\":\"a \\\"q\\\" \\u00e9\"}" };
	static const char *const keys[] = { "zeta", "alpha", "format", "note" };
	static const char *const vals[] = { "1", "", "pt", "a \"q\" \xc3\xa9" };
	struct haccel_weights *w;
	const char *k, *v;

	setup("meta.safetensors");
	st_write(path, &s);
	w = ST_OPEN(ctx, path);
	for (uint32_t i = 0; i < 4; i++) {
		KTAP_ASSERT_EQ(haccel_weights_metadata(w, 0, i, &k, &v), 0);
		KTAP_EXPECT(!strcmp(k, keys[i]));
		KTAP_EXPECT(!strcmp(v, vals[i]));
	}
	KTAP_EXPECT_EQ(haccel_weights_metadata(w, 0, 4, &k, &v), -ERANGE);
	KTAP_EXPECT_EQ(haccel_weights_metadata(w, 1, 0, &k, &v), -EINVAL);
	KTAP_EXPECT_EQ(haccel_weights_metadata(NULL, 0, 0, &k, &v), -EINVAL);
	KTAP_EXPECT_EQ(haccel_weights_metadata(w, 0, 0, NULL, NULL), 0);
	haccel_weights_close(w);
	teardown();
}

static void t_checksums(void)
{
	struct st_tensor t[] = { ST_T("a", "U8", 0, 1, 1), ST_T("b", "U8", 1, 2, 1),
				 ST_T("c", "U8", 2, 3, 1) };
	struct st_spec s = { .tensors = t, .n = 3,
			     .meta = "{\"haccel.xxh3:c\":\"0123456789abcdef\",\"format\":\"pt\","
				     "\"haccel.xxh3:a\":\"ffffffffffffffff\",\"haccel.xxh3\":\"not a checksum key\"}" };
	struct haccel_tensor_info ti;
	struct haccel_weights *w;
	const char *k;

	setup("sums.safetensors");
	st_write(path, &s);
	w = ST_OPEN(ctx, path);
	KTAP_EXPECT_EQ(info(w).n_checksums, 2);
	ti = tensor(w, "c");
	KTAP_EXPECT_EQ(ti.has_checksum, 1);
	KTAP_EXPECT(ti.checksum == 0x0123456789abcdefull);
	ti = tensor(w, "a");
	KTAP_EXPECT_EQ(ti.has_checksum, 1);
	KTAP_EXPECT(ti.checksum == UINT64_MAX);
	ti = tensor(w, "b");
	KTAP_EXPECT_EQ(ti.has_checksum, 0);
	KTAP_EXPECT(ti.checksum == 0);
	/* The checksum entries stay in the metadata, in place. */
	KTAP_ASSERT_EQ(haccel_weights_metadata(w, 0, 0, &k, NULL), 0);
	KTAP_EXPECT(!strcmp(k, "haccel.xxh3:c"));
	haccel_weights_close(w);
	teardown();
}

static void t_find_by_name(void)
{
	/* The empty name is a valid key for the reference, so for us too. */
	struct st_tensor t[] = {
		ST_T("", "U8", 0, 0, 1), ST_T("q\"uote\\d", "U8", 0, 0, 1),
		ST_T("caf\xc3\xa9", "U8", 0, 0, 1), ST_T("tab\there", "U8", 0, 0, 1),
		ST_T("__metadata", "U8", 0, 0, 1),
	};
	struct st_spec s = { .tensors = t, .n = 5 };
	struct haccel_weights *w;
	uint32_t i;

	setup("names.safetensors");
	st_pack(t, 5);
	st_write(path, &s);
	w = ST_OPEN(ctx, path);
	for (int n = 0; n < 5; n++)
		KTAP_EXPECT_EQ(tensor(w, t[n].name).dest_offset, t[n].begin);
	KTAP_EXPECT_EQ(haccel_weights_find(w, "cafe", &i), -ENOENT);
	KTAP_EXPECT_EQ(haccel_weights_find(w, "__metadata__", &i), -ENOENT);
	KTAP_EXPECT_EQ(haccel_weights_find(w, NULL, &i), -EINVAL);
	KTAP_EXPECT_EQ(haccel_weights_find(w, "", NULL), -EINVAL);
	KTAP_EXPECT_EQ(haccel_weights_find(NULL, "", &i), -EINVAL);
	haccel_weights_close(w);
	teardown();
}

static void t_many_tensors(void)
{
	enum { N = 5000 };
	struct st_tensor *t = calloc(N, sizeof(*t));
	char (*names)[32] = calloc(N, sizeof(*names));
	struct st_spec s = { .tensors = t, .n = N };
	struct haccel_tensor_info ti;
	struct haccel_weights *w;
	uint64_t prev = 0;

	KTAP_ASSERT(t && names);
	/* Written in reverse name order, with sizes 0..3 bytes. */
	for (int i = 0; i < N; i++) {
		snprintf(names[i], sizeof(names[i]), "model.layers.%d.w", N - 1 - i);
		t[i] = (struct st_tensor)ST_T(names[i], "U8", 0, 0, (uint64_t)(i % 4));
	}
	st_pack(t, N);
	setup("many.safetensors");
	st_write(path, &s);
	w = ST_OPEN(ctx, path);
	KTAP_ASSERT_EQ(info(w).n_tensors, N);
	for (uint32_t i = 0; i < N; i++) {
		KTAP_ASSERT_EQ(haccel_weights_tensor(w, i, &ti), 0);
		KTAP_EXPECT(ti.dest_offset >= prev);
		prev = ti.dest_offset;
	}
	for (int i = 0; i < N; i += 7)
		KTAP_EXPECT_EQ(tensor(w, names[i]).dest_offset, t[i].begin);
	haccel_weights_close(w);
	free(names);
	free(t);
	teardown();
}

static void t_api_arguments(void)
{
	struct st_tensor t[] = { ST_T("w", "U8", 0, 1, 1) };
	struct st_spec s = { .tensors = t, .n = 1 };
	struct haccel_weights *w = (struct haccel_weights *)1;
	struct haccel_weights_info wi;
	struct haccel_tensor_info ti;

	setup("args.safetensors");
	st_write(path, &s);
	KTAP_EXPECT_EQ(haccel_weights_open(ctx, path, 1, &w), -EINVAL);
	KTAP_EXPECT(w == NULL);
	KTAP_EXPECT_EQ(haccel_weights_open(ctx, NULL, 0, &w), -EINVAL);
	KTAP_EXPECT_EQ(haccel_weights_open(ctx, "", 0, &w), -EINVAL);
	KTAP_EXPECT_EQ(haccel_weights_open(NULL, path, 0, &w), -EINVAL);
	KTAP_EXPECT_EQ(haccel_weights_open(ctx, path, 0, NULL), -EINVAL);
	w = ST_OPEN(ctx, path);
	KTAP_EXPECT_EQ(haccel_weights_info(NULL, &wi), -EINVAL);
	KTAP_EXPECT_EQ(haccel_weights_info(w, NULL), -EINVAL);
	KTAP_EXPECT_EQ(haccel_weights_tensor(w, 1, &ti), -ERANGE);
	KTAP_EXPECT_EQ(haccel_weights_tensor(w, 0, NULL), -EINVAL);
	KTAP_EXPECT_EQ(haccel_weights_tensor(NULL, 0, &ti), -EINVAL);
	KTAP_EXPECT(haccel_weights_file(NULL, 0) == NULL);
	haccel_weights_close(w);
	haccel_weights_close(NULL);
	teardown();
}

static void t_missing_and_special_files(void)
{
	char missing[ST_PATH];

	setup("x.safetensors");
	st_join(missing, dir, "nope.safetensors");
	ST_EXPECT_FAIL(ctx, missing, -ENOENT, missing, "no such file");
	st_join(missing, dir, "nodir/nope.safetensors");
	ST_EXPECT_FAIL(ctx, missing, -ENOENT, missing);
	KTAP_ASSERT_EQ(mkfifo(path, 0600), 0);
	ST_EXPECT_FAIL(ctx, path, -EINVAL, path, "not a regular file");
	teardown();
}

/*
 * The parser reads only the bytes it was given: the header in an exactly
 * sized buffer, never the data (under ASan or valgrind an over-read is a
 * failure), and it asks for more with -EAGAIN.
 */
static void t_parse_reads_header_only(void)
{
	struct st_tensor t[] = { ST_T("w", "F32", 0, 4096, 1024) };
	struct st_tensor bad[] = { ST_T("w", "F32", 0, 4095, 1024) };
	struct st_spec s = { .tensors = t, .n = 1, .pad = 3 };
	struct haccel__st_header h;
	uint64_t need = 0;
	size_t len, hlen;
	uint8_t *img = st_image(&s, &len), *part;
	char *hdr = st_header_json(&s);

	ctx = st_ctx();
	hlen = 8 + strlen(hdr) + 3;
	KTAP_EXPECT_EQ(haccel__st_parse(ctx, "mem", img, 3, len, &need, &h), -EAGAIN);
	KTAP_EXPECT_EQ(need, 8);
	KTAP_EXPECT_EQ(haccel__st_parse(ctx, "mem", img, 8, len, &need, &h), -EAGAIN);
	KTAP_EXPECT_EQ(need, hlen);
	KTAP_EXPECT_EQ(haccel__st_parse(ctx, "mem", img, hlen - 1, len, &need, &h), -EAGAIN);
	part = malloc(hlen);
	KTAP_ASSERT(part != NULL);
	memcpy(part, img, hlen);
	KTAP_ASSERT_EQ(haccel__st_parse(ctx, "mem", part, hlen, len, &need, &h), 0);
	KTAP_EXPECT_EQ(h.data_start, hlen);
	KTAP_EXPECT_EQ(h.data_bytes, 4096);
	KTAP_EXPECT_EQ(h.n_tensors, 1);
	KTAP_EXPECT(!strcmp(h.tensors[0].name, "w"));
	haccel__st_header_free(&h);
	KTAP_EXPECT(h.tensors == NULL);
	free(part);
	free(img);
	free(hdr);

	/* A bad header is rejected from the header bytes alone. */
	s.tensors = bad;
	img = st_image(&s, &len);
	hdr = st_header_json(&s);
	hlen = 8 + strlen(hdr) + 3;
	part = malloc(hlen);
	KTAP_ASSERT(part != NULL);
	memcpy(part, img, hlen);
	KTAP_EXPECT_EQ(haccel__st_parse(ctx, "mem", part, hlen, len, &need, &h), -EBADMSG);
	KTAP_EXPECT(h.tensors == NULL && h.n_tensors == 0 && h.meta_key == NULL);
	free(part);
	free(img);
	free(hdr);
	haccel__st_header_free(NULL);
	haccel_close(ctx);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_empty_checkpoint),
	KTAP_CASE(t_sizes_offsets_destinations),
	KTAP_CASE(t_header_space_padding),
	KTAP_CASE(t_scalars),
	KTAP_CASE(t_packed_subbyte_dtypes),
	KTAP_CASE(t_every_dtype),
	KTAP_CASE(t_metadata_in_header_order),
	KTAP_CASE(t_checksums),
	KTAP_CASE(t_find_by_name),
	KTAP_CASE(t_many_tensors),
	KTAP_CASE(t_api_arguments),
	KTAP_CASE(t_missing_and_special_files),
	KTAP_CASE(t_parse_reads_header_only),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
