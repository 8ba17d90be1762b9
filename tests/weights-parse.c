// SPDX-License-Identifier: MIT
/* safetensors framing and header schema: each rule rejected with -EBADMSG and a message naming file, tensor and rule. */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* One well-formed tensor, used where the rule under test is elsewhere. */
static const struct st_tensor one[] = { ST_T("w", "F32", 0, 8, 2) };

/* A file whose header is the given raw JSON and whose data is data bytes. */
static void write_raw_header(const char *header, int64_t data)
{
	struct st_spec s = { .header = header, .data_adjust = data };

	st_write(path, &s);
}

static void t_file_shorter_than_length_field(void)
{
	setup("short.safetensors");
	st_write_bytes(path, "", 0);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "file is 0 bytes",
		       "shorter than the 8-byte header length");
	st_write_bytes(path, "\x02\0\0\0\0\0\0", 7);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "file is 7 bytes",
		       "shorter than the 8-byte header length");
	teardown();
}

static void t_header_length_over_limit(void)
{
	struct st_spec s = { .tensors = one, .n = 1, .len_set = true };

	setup("huge.safetensors");
	/* The length is checked before anything is allocated for it. */
	s.len = HACCEL__ST_MAX_HEADER + 1ull;
	st_write(path, &s);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "header length 100000001",
		       "exceeds the limit of 100000000 bytes");
	s.len = UINT64_MAX;
	st_write(path, &s);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "header length 18446744073709551615",
		       "exceeds the limit");
	teardown();
}

static void t_header_length_past_eof(void)
{
	struct st_spec s = { .tensors = one, .n = 1, .len_set = true };
	char *hdr = st_header_json(&s);
	char want[128];

	setup("past.safetensors");
	/* file = 8 + header + 8 data bytes; claim 9 bytes more than remain. */
	s.len = strlen(hdr) + 8 + 1;
	st_write(path, &s);
	snprintf(want, sizeof(want), "header length %llu runs past the end of the %zu-byte file",
		 (unsigned long long)s.len, 8 + strlen(hdr) + 8);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, want);
	free(hdr);
	teardown();
}

static void t_header_not_an_object(void)
{
	setup("notobj.safetensors");
	write_raw_header("[]", 0);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "does not start with '{'");
	write_raw_header(" {}", 0);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "does not start with '{'");
	write_raw_header("", 0);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "does not start with '{'");
	write_raw_header("\"x\"", 0);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "does not start with '{'");
	teardown();
}

static void t_header_trailing_bytes(void)
{
	setup("trail.safetensors");
	/* Only spaces may pad the header; newlines, tabs and NULs may not. */
	write_raw_header("{}\n", 0);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "does not end with '}'");
	write_raw_header("{}\t ", 0);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "does not end with '}'");
	st_write_bytes(path, "\x03\0\0\0\0\0\0\0{}\0", 11);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "does not end with '}'");
	write_raw_header("{}{}", 0);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "not valid UTF-8 JSON");
	teardown();
}

static void t_header_bad_json(void)
{
	setup("json.safetensors");
	write_raw_header("{\"w\":}", 0);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "not valid UTF-8 JSON at header byte 6");
	write_raw_header("{\"w\xff\":{}}", 0);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "not valid UTF-8 JSON", "0xff");
	/* A NUL inside a name would cut it short in C: rejected. */
	write_raw_header("{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}}", 1);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "not valid UTF-8 JSON", "\\u0000");
	/* Integers past 2^63 do not parse: no offset can be that large. */
	write_raw_header("{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,18446744073709551616]}}", 0);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "too big integer");
	teardown();
}

static void t_duplicate_tensor_name(void)
{
	setup("dup.safetensors");
	write_raw_header("{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
			 "\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}", 2);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "repeats a key", "\"w\"",
		       "names and keys must be unique");
	/* A key repeated inside a tensor entry is caught the same way. */
	write_raw_header("{\"w\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "repeats a key", "\"dtype\"");
	teardown();
}

static void t_tensor_not_an_object(void)
{
	setup("entry.safetensors");
	write_raw_header("{\"layer.0\":[0,1]}", 0);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "tensor \"layer.0\"",
		       "entry is an array, not an object");
	write_raw_header("{\"layer.0\":null}", 0);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "tensor \"layer.0\"", "entry is null");
	teardown();
}

static void t_tensor_missing_key(void)
{
	setup("missing.safetensors");
	write_raw_header("{\"w\":{\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "tensor \"w\"", "missing \"dtype\"");
	write_raw_header("{\"w\":{\"dtype\":\"U8\",\"data_offsets\":[0,1]}}", 1);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "tensor \"w\"", "missing \"shape\"");
	write_raw_header("{\"w\":{\"dtype\":\"U8\",\"shape\":[1]}}", 1);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "tensor \"w\"", "missing \"data_offsets\"");
	teardown();
}

static void t_tensor_unknown_key(void)
{
	setup("unknown.safetensors");
	/* The reference ignores unknown keys; we do not. */
	write_raw_header("{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"offsets\":[0,1]}}", 1);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "tensor \"w\"", "unknown key \"offsets\"",
		       "exactly dtype, shape and data_offsets");
	teardown();
}

static void t_unknown_dtype(void)
{
	struct st_tensor t[] = { ST_T("emb", "F128", 0, 32, 2) };
	struct st_spec s = { .tensors = t, .n = 1 };

	setup("dtype.safetensors");
	st_write(path, &s);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "tensor \"emb\"", "unknown dtype \"F128\"");
	/* Names are case-sensitive, as in the reference. */
	t[0].dtype = "bf16";
	t[0].end = 4;
	st_write(path, &s);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "tensor \"emb\"", "unknown dtype \"bf16\"");
	write_raw_header("{\"emb\":{\"dtype\":16,\"shape\":[1],\"data_offsets\":[0,2]}}", 2);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "tensor \"emb\"", "dtype is an integer, not a string");
	teardown();
}

static void t_shape_not_integers(void)
{
	struct st_tensor t[] = { ST_T("w", "U8", 0, 1, 1) };
	struct st_spec s = { .tensors = t, .n = 1 };

	setup("shape.safetensors");
	write_raw_header("{\"w\":{\"dtype\":\"U8\",\"shape\":4,\"data_offsets\":[0,4]}}", 4);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "tensor \"w\"", "shape is an integer, not an array");
	write_raw_header("{\"w\":{\"dtype\":\"U8\",\"shape\":[2,-2],\"data_offsets\":[0,4]}}", 4);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "tensor \"w\"", "shape[1] is negative");
	write_raw_header("{\"w\":{\"dtype\":\"U8\",\"shape\":[4.0],\"data_offsets\":[0,4]}}", 4);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "tensor \"w\"", "shape[0] is a real number");
	write_raw_header("{\"w\":{\"dtype\":\"U8\",\"shape\":[\"4\"],\"data_offsets\":[0,4]}}", 4);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "tensor \"w\"", "shape[0] is a string");
	/* 16 dimensions are fine, 17 are not. */
	t[0].n_dims = HACCEL_MAX_DIMS;
	for (int d = 0; d < ST_MAX_DIMS; d++)
		t[0].shape[d] = 1;
	st_write(path, &s);
	haccel_weights_close(ST_OPEN(ctx, path));
	t[0].n_dims = HACCEL_MAX_DIMS + 1;
	st_write(path, &s);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "tensor \"w\"",
		       "shape has 17 dimensions, at most 16 are supported");
	teardown();
}

static void t_data_offsets_not_a_pair(void)
{
	static const char *const bad[] = {
		"[0]", "[0,1,1]", "[-1,0]", "[0,1.5]", "{\"begin\":0}", "\"0,1\"", "[0,null]",
	};
	char hdr[256];

	setup("offsets.safetensors");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(hdr, sizeof(hdr),
			 "{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":%s}}", bad[i]);
		write_raw_header(hdr, 1);
		ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "tensor \"w\"",
			       "data_offsets must be [begin, end], two non-negative integers");
	}
	teardown();
}

static void t_metadata_not_strings(void)
{
	struct st_spec s = { .tensors = one, .n = 1 };

	setup("meta.safetensors");
	s.meta = "[\"a\"]";
	st_write(path, &s);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "__metadata__ is an array, not an object of strings");
	s.meta = "null";
	st_write(path, &s);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "__metadata__ is null");
	s.meta = "{\"format\":\"pt\",\"step\":100}";
	st_write(path, &s);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "__metadata__ key \"step\" is an integer, not a string");
	s.meta = "{\"nested\":{\"a\":\"b\"}}";
	st_write(path, &s);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "__metadata__ key \"nested\" is an object");
	teardown();
}

static void t_checksum_malformed(void)
{
	static const char *const bad[] = {
		"0123456789ABCDEF",   /* uppercase */
		"0123456789abcde",    /* 15 digits */
		"0123456789abcdef0",  /* 17 digits */
		"0123456789abcdeg",   /* not hex */
		"0x23456789abcdef",
		"",
	};
	struct st_spec s = { .tensors = one, .n = 1 };
	char meta[128], want[64];

	setup("sum.safetensors");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(meta, sizeof(meta), "{\"haccel.xxh3:w\":\"%s\"}", bad[i]);
		s.meta = meta;
		st_write(path, &s);
		snprintf(want, sizeof(want), "checksum \"%s\"", bad[i]);
		ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "tensor \"w\"", want,
			       "is not 16 lowercase hex digits");
	}
	s.meta = "{\"haccel.xxh3:w\":12}";
	st_write(path, &s);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "\"haccel.xxh3:w\" is an integer, not a string");
	teardown();
}

static void t_checksum_for_missing_tensor(void)
{
	struct st_spec s = { .tensors = one, .n = 1,
			     .meta = "{\"haccel.xxh3:w\":\"0000000000000001\",\"haccel.xxh3:v\":\"0000000000000002\"}" };

	setup("sum.safetensors");
	st_write(path, &s);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "tensor \"v\"",
		       "holds a checksum for it, but the file has no such tensor");
	teardown();
}

static void t_long_and_odd_names_quoted(void)
{
	struct st_tensor t[] = { ST_T("", "F64", 0, 8, 2) };
	struct st_spec s = { .tensors = t, .n = 1 };
	char name[4096], msg[1024];

	setup("names.safetensors");
	/* A control byte and a quote are escaped in the message. */
	t[0].name = "a\"b\nc";
	st_write(path, &s);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, "tensor \"a\\\"b\\x0ac\"", "hold 8 bytes",
		       "needs 16");
	/* A long name is cut so the rule still fits in the message. */
	memset(name, 'n', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	t[0].name = name;
	st_write(path, &s);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "nnn...\"", "needs 16");
	haccel_last_error(ctx, msg, sizeof(msg));
	KTAP_EXPECT(strlen(msg) < 600);
	/* Cut inside a UTF-8 character: the partial character goes too. */
	memset(name, 'n', 95);
	strcpy(name + 95, "\xc3\xa9tail");
	st_write(path, &s);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "nnn...\"", "needs 16");
	haccel_last_error(ctx, msg, sizeof(msg));
	KTAP_EXPECT(strstr(msg, "\xc3") == NULL);
	/* Cut after a whole one: it stays. */
	memset(name, 'n', 94);
	strcpy(name + 94, "\xc3\xa9tail");
	st_write(path, &s);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "n\xc3\xa9...\"", "needs 16");
	teardown();
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_file_shorter_than_length_field),
	KTAP_CASE(t_header_length_over_limit),
	KTAP_CASE(t_header_length_past_eof),
	KTAP_CASE(t_header_not_an_object),
	KTAP_CASE(t_header_trailing_bytes),
	KTAP_CASE(t_header_bad_json),
	KTAP_CASE(t_duplicate_tensor_name),
	KTAP_CASE(t_tensor_not_an_object),
	KTAP_CASE(t_tensor_missing_key),
	KTAP_CASE(t_tensor_unknown_key),
	KTAP_CASE(t_unknown_dtype),
	KTAP_CASE(t_shape_not_integers),
	KTAP_CASE(t_data_offsets_not_a_pair),
	KTAP_CASE(t_metadata_not_strings),
	KTAP_CASE(t_checksum_malformed),
	KTAP_CASE(t_checksum_for_missing_tensor),
	KTAP_CASE(t_long_and_odd_names_quoted),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
