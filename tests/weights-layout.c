// SPDX-License-Identifier: MIT
/* safetensors data layout: sizes equal shape x dtype (overflow-checked), no holes, no overlaps, no trailing or missing bytes. */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "st-writer.h"

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

static void write_spec(struct st_tensor *t, size_t n, int64_t adjust)
{
	struct st_spec s = { .tensors = t, .n = n, .data_adjust = adjust };

	st_write(path, &s);
}

static void t_end_before_begin(void)
{
	struct st_tensor t[] = { ST_T("a", "U8", 0, 4, 4), ST_T("b", "U8", 8, 4, 4) };

	setup("rev.safetensors");
	write_spec(t, 2, 4);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "tensor \"b\"",
		       "data_offsets [8, 4] end before they begin");
	teardown();
}

static void t_size_disagrees_with_shape(void)
{
	struct st_tensor t[] = {
		ST_T("model.layers.0.mlp.up_proj.weight", "BF16", 0, 100, 10, 20),
	};
	char want[1024], msg[1024];

	setup("model-00001-of-00002.safetensors");
	write_spec(t, 1, 0);
	snprintf(want, sizeof(want),
		 "%s: tensor \"model.layers.0.mlp.up_proj.weight\": data_offsets [0, 100] hold 100 bytes but shape [10, 20] of BF16 needs 400",
		 path);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, want);
	haccel_last_error(ctx, msg, sizeof(msg));
	KTAP_EXPECT(!strcmp(msg, want));
	/* Too many bytes is as wrong as too few. */
	t[0].end = 401;
	write_spec(t, 1, 0);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "hold 401 bytes but shape [10, 20] of BF16 needs 400");
	teardown();
}

static void t_subbyte_counts_must_fill_bytes(void)
{
	struct st_tensor f4[] = { ST_T("q", "F4", 0, 2, 3) };
	struct st_tensor f6[] = { ST_T("q", "F6_E2M3", 0, 2, 3) };
	struct st_tensor f6b[] = { ST_T("q", "F6_E3M2", 0, 3, 1, 4) };

	setup("f4.safetensors");
	/* 3 x 4 bits = 12 bits: half a byte left over. */
	write_spec(f4, 1, 0);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "tensor \"q\"",
		       "shape [3] of F4 is 3 elements of 4 bits, not a whole number of bytes");
	write_spec(f6, 1, 0);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "tensor \"q\"",
		       "shape [3] of F6_E2M3 is 3 elements of 6 bits, not a whole number of bytes");
	/* 4 x 6 bits = 3 bytes exactly. */
	write_spec(f6b, 1, 0);
	haccel_weights_close(ST_OPEN(ctx, path));
	teardown();
}

static void t_element_count_overflow(void)
{
	struct st_tensor t[] = { ST_T("big", "U8", 0, 0, 1ull << 32, 1ull << 32) };
	struct st_tensor z[] = { ST_T("z", "U8", 0, 0, 0, 1ull << 62, 1ull << 62) };
	struct st_tensor zl[] = { ST_T("z", "U8", 0, 0, 1ull << 62, 1ull << 62, 0) };

	setup("ovf.safetensors");
	write_spec(t, 1, 0);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "tensor \"big\"",
		       "shape [4294967296, 4294967296] has more than 2^64 elements");
	/* Left to right as the reference multiplies: a leading zero keeps the
	 * product at zero, a trailing one comes too late. */
	write_spec(z, 1, 0);
	haccel_weights_close(ST_OPEN(ctx, path));
	write_spec(zl, 1, 0);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "tensor \"z\"", "more than 2^64 elements");
	teardown();
}

static void t_bit_count_overflow(void)
{
	struct st_tensor t[] = { ST_T("big", "F64", 0, 8, 1ull << 61) };

	setup("bits.safetensors");
	write_spec(t, 1, 0);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "tensor \"big\"",
		       "shape [2305843009213693952] of F64 is more than 2^64 bits");
	teardown();
}

static void t_first_tensor_not_at_zero(void)
{
	struct st_tensor t[] = { ST_T("w", "U8", 4, 8, 4) };

	setup("first.safetensors");
	write_spec(t, 1, 0);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "tensor \"w\"", "data_offsets [4, 8]",
		       "the first tensor must begin at byte 0", "bytes [0, 4) belong to no tensor");
	teardown();
}

static void t_hole_between_tensors(void)
{
	struct st_tensor t[] = { ST_T("a", "U8", 0, 4, 4), ST_T("b", "U8", 8, 12, 4) };

	setup("hole.safetensors");
	write_spec(t, 2, 0);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "tensor \"b\"",
		       "data_offsets [8, 12] leave a hole: bytes [4, 8) after tensor \"a\" belong to no tensor");
	teardown();
}

static void t_overlapping_tensors(void)
{
	struct st_tensor t[] = { ST_T("a", "U8", 0, 8, 8), ST_T("b", "U8", 4, 12, 8) };
	struct st_tensor same[] = { ST_T("a", "U8", 0, 8, 8), ST_T("b", "U8", 0, 8, 8) };
	struct st_tensor zero[] = { ST_T("a", "U8", 0, 8, 8), ST_T("z", "U8", 4, 4, 0) };

	setup("overlap.safetensors");
	write_spec(t, 2, 0);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "tensor \"b\"",
		       "data_offsets [4, 12] overlap tensor \"a\" at [0, 8]");
	/* Two names for the same bytes. */
	write_spec(same, 2, 0);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "tensor \"b\"",
		       "data_offsets [0, 8] overlap tensor \"a\" at [0, 8]");
	/* An empty tensor inside another one is misplaced too. */
	write_spec(zero, 2, 0);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "tensor \"z\"",
		       "data_offsets [4, 4] overlap tensor \"a\"");
	teardown();
}

static void t_trailing_data(void)
{
	struct st_tensor t[] = { ST_T("a", "U8", 0, 4, 4), ST_T("b", "U8", 4, 8, 4) };
	struct st_spec empty = { .data_adjust = 5 };

	setup("trail.safetensors");
	write_spec(t, 2, 3);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "tensor \"b\"",
		       "the last tensor ends at byte 8 of the 11-byte data buffer: 3 trailing bytes belong to no tensor");
	st_write(path, &empty);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path,
		       "no tensors, but the data buffer holds 5 bytes");
	teardown();
}

static void t_truncated_data(void)
{
	struct st_tensor t[] = { ST_T("a", "U8", 0, 4, 4), ST_T("b", "F32", 4, 4100, 1024) };

	setup("trunc.safetensors");
	write_spec(t, 2, -1);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "tensor \"b\"",
		       "data_offsets [4, 4100] run past the end of the data buffer (4099 bytes): file truncated?");
	/* Cut inside the header: its length now runs past the end. */
	KTAP_ASSERT(truncate(path, 20) == 0);
	ST_EXPECT_FAIL(ctx, path, -EBADMSG, path, "runs past the end of the 20-byte file");
	teardown();
}

static void t_any_header_order_accepted(void)
{
	/* Writers order entries by name or dtype, not by offset. */
	struct st_tensor t[] = {
		ST_T("c", "U8", 12, 16, 4), ST_T("a", "U8", 0, 4, 4),
		ST_T("z", "U8", 4, 4, 0), ST_T("b", "U16", 4, 12, 4),
		ST_T("e", "U8", 16, 16, 0), ST_T("d", "U8", 16, 16, 0),
	};
	static const char *const order[] = { "a", "z", "b", "c", "d", "e" };
	struct haccel_tensor_info ti;
	struct haccel_weights *w;

	setup("order.safetensors");
	write_spec(t, 6, 0);
	w = ST_OPEN(ctx, path);
	/* By offset, zero-size tensors first where they share one, then by name. */
	for (uint32_t i = 0; i < 6; i++) {
		KTAP_ASSERT_EQ(haccel_weights_tensor(w, i, &ti), 0);
		KTAP_EXPECT(!strcmp(ti.name, order[i]));
	}
	haccel_weights_close(w);
	teardown();
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_end_before_begin),
	KTAP_CASE(t_size_disagrees_with_shape),
	KTAP_CASE(t_subbyte_counts_must_fill_bytes),
	KTAP_CASE(t_element_count_overflow),
	KTAP_CASE(t_bit_count_overflow),
	KTAP_CASE(t_first_tensor_not_at_zero),
	KTAP_CASE(t_hole_between_tensors),
	KTAP_CASE(t_overlapping_tensors),
	KTAP_CASE(t_trailing_data),
	KTAP_CASE(t_truncated_data),
	KTAP_CASE(t_any_header_order_accepted),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
