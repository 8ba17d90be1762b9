// SPDX-License-Identifier: MIT
/* Sharded checkpoints and directories: the index against its shards, shard names, file order, destinations, directory resolution. */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "st-writer.h"

#define S1 "model-00001-of-00002.safetensors"
#define S2 "model-00002-of-00002.safetensors"
#define INDEX "model.safetensors.index.json"

static struct haccel_ctx *ctx;
static char *dir;
static char index_path[ST_PATH], p1[ST_PATH], p2[ST_PATH];

/* Shard 1: embed + layer 0 (4097 + 8 bytes); shard 2: layer 1 + head. */
static struct st_tensor sh1[] = {
	ST_T("model.embed.weight", "U8", 0, 0, 4097),
	ST_T("model.layers.0.w", "BF16", 0, 0, 2, 2),
};
static struct st_tensor sh2[] = {
	ST_T("model.layers.1.w", "BF16", 0, 0, 2, 2),
	ST_T("lm_head.weight", "F32", 0, 0, 3),
};

static const char *good_index =
	"{\"metadata\":{\"total_size\":4129,\"note\":[1,2]},\"weight_map\":{"
	"\"lm_head.weight\":\"" S2 "\","
	"\"model.embed.weight\":\"" S1 "\","
	"\"model.layers.0.w\":\"" S1 "\","
	"\"model.layers.1.w\":\"" S2 "\"}}";

static void setup(void)
{
	struct st_spec s1 = { .tensors = sh1, .n = 2, .meta = "{\"shard\":\"1\"}" };
	struct st_spec s2 = { .tensors = sh2, .n = 2, .pad = 5 };

	ctx = st_ctx();
	dir = st_tmpdir();
	st_join(index_path, dir, INDEX);
	st_join(p1, dir, S1);
	st_join(p2, dir, S2);
	st_pack(sh1, 2);
	st_pack(sh2, 2);
	st_write(p1, &s1);
	st_write(p2, &s2);
	st_write_text(index_path, good_index);
}

static void teardown(void)
{
	st_rmtree(dir);
	haccel_close(ctx);
}

static void check_good(struct haccel_weights *w)
{
	static const char *const order[] = {
		"model.embed.weight", "model.layers.0.w", "model.layers.1.w", "lm_head.weight",
	};
	struct haccel_weights_info wi;
	struct haccel_tensor_info ti;
	const char *k, *v;
	uint32_t i;

	KTAP_ASSERT_EQ(haccel_weights_info(w, &wi), 0);
	KTAP_EXPECT_EQ(wi.n_files, 2);
	KTAP_EXPECT_EQ(wi.n_tensors, 4);
	KTAP_EXPECT_EQ(wi.tensor_bytes, 4097 + 8 + 8 + 12);
	/* Files by name; shard 2's data starts at the next 4 KiB boundary. */
	KTAP_EXPECT(!strcmp(haccel_weights_file(w, 0), p1));
	KTAP_EXPECT(!strcmp(haccel_weights_file(w, 1), p2));
	KTAP_EXPECT_EQ(wi.dest_bytes, 8192 + 20);
	for (i = 0; i < 4; i++) {
		KTAP_ASSERT_EQ(haccel_weights_tensor(w, i, &ti), 0);
		KTAP_EXPECT(!strcmp(ti.name, order[i]));
		KTAP_EXPECT_EQ(ti.file, i < 2 ? 0 : 1);
	}
	KTAP_ASSERT_EQ(haccel_weights_find(w, "lm_head.weight", &i), 0);
	KTAP_EXPECT_EQ(i, 3);
	KTAP_ASSERT_EQ(haccel_weights_tensor(w, i, &ti), 0);
	KTAP_EXPECT_EQ(ti.dest_offset, 8192 + 8);
	KTAP_EXPECT_EQ(ti.bytes, 12);
	KTAP_ASSERT_EQ(haccel_weights_find(w, "model.layers.0.w", &i), 0);
	KTAP_ASSERT_EQ(haccel_weights_tensor(w, i, &ti), 0);
	KTAP_EXPECT_EQ(ti.dest_offset, 4097);
	/* Each shard keeps its own metadata. */
	KTAP_ASSERT_EQ(haccel_weights_metadata(w, 0, 0, &k, &v), 0);
	KTAP_EXPECT(!strcmp(k, "shard") && !strcmp(v, "1"));
	KTAP_EXPECT_EQ(haccel_weights_metadata(w, 1, 0, &k, &v), -ERANGE);
}

static void t_index_good(void)
{
	struct haccel_weights *w;

	setup();
	w = ST_OPEN(ctx, index_path);
	check_good(w);
	haccel_weights_close(w);
	teardown();
}

static void t_directory_prefers_index(void)
{
	struct st_tensor t[] = { ST_T("solo", "U8", 0, 1, 1) };
	struct st_spec s = { .tensors = t, .n = 1 };
	char single[ST_PATH], slashed[ST_PATH];
	struct haccel_weights *w;

	setup();
	st_write(st_join(single, dir, "model.safetensors"), &s);
	w = ST_OPEN(ctx, dir);
	check_good(w);
	haccel_weights_close(w);
	snprintf(slashed, sizeof(slashed), "%s/", dir);
	w = ST_OPEN(ctx, slashed);
	check_good(w);
	haccel_weights_close(w);

	/* Without the index: model.safetensors, even beside other files. */
	KTAP_ASSERT_EQ(unlink(index_path), 0);
	w = ST_OPEN(ctx, dir);
	KTAP_EXPECT(!strcmp(haccel_weights_file(w, 0), single));
	haccel_weights_close(w);

	/* Neither: several *.safetensors are ambiguous, one is taken. */
	KTAP_ASSERT_EQ(unlink(single), 0);
	ST_EXPECT_FAIL(ctx, dir, -EINVAL, dir, "2 *.safetensors files but no " INDEX);
	KTAP_ASSERT_EQ(unlink(p2), 0);
	w = ST_OPEN(ctx, dir);
	KTAP_EXPECT(!strcmp(haccel_weights_file(w, 0), p1));
	haccel_weights_close(w);
	KTAP_ASSERT_EQ(unlink(p1), 0);
	ST_EXPECT_FAIL(ctx, dir, -ENOENT, dir, "no " INDEX ", model.safetensors or other *.safetensors");
	teardown();
}

static void t_index_relative_path(void)
{
	struct haccel_weights *w;

	setup();
	KTAP_ASSERT_EQ(chdir(dir), 0);
	w = ST_OPEN(ctx, INDEX);
	KTAP_EXPECT(!strcmp(haccel_weights_file(w, 0), S1));
	haccel_weights_close(w);
	teardown();
}

static void t_index_missing_shard(void)
{
	setup();
	KTAP_ASSERT_EQ(unlink(p2), 0);
	ST_EXPECT_FAIL(ctx, index_path, -ENOENT, p2, "no such file");
	teardown();
}

static void t_index_bad_shard_rejected(void)
{
	struct st_tensor bad[] = { ST_T("model.layers.1.w", "BF16", 0, 8, 2, 2),
				   ST_T("lm_head.weight", "F32", 12, 24, 3) };
	struct st_spec s = { .tensors = bad, .n = 2 };

	setup();
	st_write(p2, &s);
	ST_EXPECT_FAIL(ctx, index_path, -EBADMSG, p2, "tensor \"lm_head.weight\"", "leave a hole");
	teardown();
}

static void t_index_tensor_in_two_shards(void)
{
	struct st_tensor t[] = { ST_T("model.layers.1.w", "BF16", 0, 8, 2, 2),
				 ST_T("lm_head.weight", "F32", 8, 20, 3),
				 ST_T("model.layers.0.w", "BF16", 20, 28, 2, 2) };
	struct st_spec s = { .tensors = t, .n = 3 };

	setup();
	st_write(p2, &s);
	ST_EXPECT_FAIL(ctx, index_path, -EBADMSG, "tensor \"model.layers.0.w\" is in both",
		       p1, p2, "a name may appear in one shard only");
	teardown();
}

static void t_index_lacks_shard_tensor(void)
{
	struct st_tensor t[] = { ST_T("model.layers.1.w", "BF16", 0, 8, 2, 2),
				 ST_T("lm_head.weight", "F32", 8, 20, 3),
				 ST_T("extra.bias", "U8", 20, 21, 1) };
	struct st_spec s = { .tensors = t, .n = 3 };

	setup();
	st_write(p2, &s);
	ST_EXPECT_FAIL(ctx, index_path, -EBADMSG, index_path, "tensor \"extra.bias\"", p2,
		       "is not in the weight_map");
	teardown();
}

static void t_index_names_absent_tensor(void)
{
	setup();
	st_write_text(index_path,
		      "{\"weight_map\":{\"lm_head.weight\":\"" S2 "\",\"model.embed.weight\":\"" S1 "\","
		      "\"model.layers.0.w\":\"" S1 "\",\"model.layers.1.w\":\"" S2 "\","
		      "\"model.ghost\":\"" S1 "\"}}");
	ST_EXPECT_FAIL(ctx, index_path, -EBADMSG, index_path, "tensor \"model.ghost\"",
		       "\"" S1 "\"", "that shard has no such tensor");
	teardown();
}

static void t_index_wrong_shard(void)
{
	setup();
	st_write_text(index_path,
		      "{\"weight_map\":{\"lm_head.weight\":\"" S1 "\",\"model.embed.weight\":\"" S1 "\","
		      "\"model.layers.0.w\":\"" S1 "\",\"model.layers.1.w\":\"" S2 "\"}}");
	ST_EXPECT_FAIL(ctx, index_path, -EBADMSG, index_path, "tensor \"lm_head.weight\" is in", p2,
		       "but the weight_map puts it in \"" S1 "\"");
	teardown();
}

static void t_index_shard_names_must_be_plain(void)
{
	static const char *const bad[] = {
		"../" S1, "/tmp/" S1, "sub/" S1, "..", ".", "",
	};
	char text[512], want[128];

	setup();
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), "{\"weight_map\":{\"model.embed.weight\":\"%s\"}}", bad[i]);
		st_write_text(index_path, text);
		snprintf(want, sizeof(want), "weight_map entry \"%s\" is not a plain file name", bad[i]);
		ST_EXPECT_FAIL(ctx, index_path, -EBADMSG, index_path,
			       "tensor \"model.embed.weight\"", want);
	}
	st_write_text(index_path, "{\"weight_map\":{\"model.embed.weight\":1}}");
	ST_EXPECT_FAIL(ctx, index_path, -EBADMSG, "weight_map entry an integer");
	teardown();
}

static void t_index_schema(void)
{
	setup();
	st_write_text(index_path, "[]");
	ST_EXPECT_FAIL(ctx, index_path, -EBADMSG, index_path, "index is an array, not a JSON object");
	st_write_text(index_path, "{\"metadata\":{}}");
	ST_EXPECT_FAIL(ctx, index_path, -EBADMSG, index_path, "needs a non-empty \"weight_map\"");
	st_write_text(index_path, "{\"weight_map\":{}}");
	ST_EXPECT_FAIL(ctx, index_path, -EBADMSG, index_path, "needs a non-empty \"weight_map\"");
	st_write_text(index_path, "{\"weight_map\":[]}");
	ST_EXPECT_FAIL(ctx, index_path, -EBADMSG, index_path, "needs a non-empty \"weight_map\"");
	st_write_text(index_path, "{\"weight_map\":{\"a\":\"" S1 "\"},\"wieght_map\":{}}");
	ST_EXPECT_FAIL(ctx, index_path, -EBADMSG, index_path, "unknown key \"wieght_map\"");
	st_write_text(index_path, "{\"weight_map\":{\"a\":\"" S1 "\",\"a\":\"" S2 "\"}}");
	ST_EXPECT_FAIL(ctx, index_path, -EBADMSG, index_path, "not valid JSON", "duplicate");
	st_write_text(index_path, "{\"weight_map\":");
	ST_EXPECT_FAIL(ctx, index_path, -EBADMSG, index_path, "not valid JSON at line 1");
	teardown();
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_index_good),
	KTAP_CASE(t_directory_prefers_index),
	KTAP_CASE(t_index_relative_path),
	KTAP_CASE(t_index_missing_shard),
	KTAP_CASE(t_index_bad_shard_rejected),
	KTAP_CASE(t_index_tensor_in_two_shards),
	KTAP_CASE(t_index_lacks_shard_tensor),
	KTAP_CASE(t_index_names_absent_tensor),
	KTAP_CASE(t_index_wrong_shard),
	KTAP_CASE(t_index_shard_names_must_be_plain),
	KTAP_CASE(t_index_schema),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
