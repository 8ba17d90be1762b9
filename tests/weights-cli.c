// SPDX-License-Identifier: MIT
/* haccel-ctl weights: inspect on good and bad checkpoints, --json (also on failure), --limit, verify against stored checksums (every mismatch listed; a changed file an error, not a mismatch), usage errors. */
#include "config.h"

#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include "st-writer.h"
#include "test-util.h"

static struct tool_result r;
static char *dir;
static char path[ST_PATH];

/* Run $HACCEL_CTL with args (NULL-terminated); stdout and stderr kept. */
#define ctl(...)                                                         \
	do {                                                             \
		tool_run(&r, "HACCEL_CTL", __VA_ARGS__);                 \
		if (r.status != 0)                                       \
			ktap_diag("exit %d, stderr: %.300s", r.status, r.err); \
	} while (0)

static json_t *parse_out(void)
{
	json_error_t e;
	json_t *j = json_loads(r.out, 0, &e);

	if (!j)
		ktap_fail_at(__FILE__, __LINE__, "output is not JSON (%s at line %d): %.200s",
			     e.text, e.line, r.out);
	return j;
}

static struct st_tensor good[] = {
	ST_T("model.embed.weight", "BF16", 0, 0, 16, 8),
	ST_T("model.norm.weight", "F32", 0, 0, 8),
	ST_T("model.q.weight", "F4", 0, 0, 4, 8),
	ST_T("b", "U8", 0, 0, 5),
	ST_T("a", "U8", 0, 0, 3),
};

/* Write the good checkpoint with a checksum for each tensor (wrong ones
 * for tensors `bad` and `bad2`, when >= 0). */
static void write_good2(int with_sums, int bad, int bad2)
{
	struct st_spec s = { .tensors = good, .n = 5 };
	uint8_t data[512];
	char meta[2048];
	size_t o;

	st_pack(good, 5);
	KTAP_ASSERT(good[4].end <= sizeof(data));
	/* The bytes st_write() puts in the data buffer. */
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = st_data_byte(i);
	o = (size_t)snprintf(meta, sizeof(meta), "{\"format\":\"pt\"");
	for (int i = 0; with_sums && i < 5; i++) {
		uint64_t h = XXH3_64bits(data + good[i].begin, good[i].end - good[i].begin);

		o += (size_t)snprintf(meta + o, sizeof(meta) - o,
				      ",\"haccel.xxh3:%s\":\"%016llx\"", good[i].name,
				      (unsigned long long)(i == bad || i == bad2 ? h ^ 1 : h));
	}
	snprintf(meta + o, sizeof(meta) - o, "}");
	s.meta = meta;
	st_write(path, &s);
}

static void write_good(int with_sums, int bad)
{
	write_good2(with_sums, bad, -1);
}

static void setup(void)
{
	/* Skip before making anything that a skip would leave behind. */
	if (!getenv("HACCEL_CTL"))
		ktap_skip("HACCEL_CTL not set: run through make check");
	dir = st_tmpdir();
	st_join(path, dir, "model.safetensors");
}

static void t_inspect_human(void)
{
	setup();
	write_good(1, -1);
	ctl("weights", "inspect", path, NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	KTAP_EXPECT(strstr(r.out, "1 file, 5 tensors") != NULL);
	KTAP_EXPECT(strstr(r.out, "model.embed.weight") && strstr(r.out, "[16, 8]") &&
		    strstr(r.out, "BF16") && strstr(r.out, "256 B"));
	KTAP_EXPECT(strstr(r.out, "  BF16            1 tensor        256 B\n") != NULL);
	KTAP_EXPECT(strstr(r.out, "312 B, 5 with a stored checksum") != NULL);
	KTAP_EXPECT(strstr(r.out, "format = pt") != NULL);
	KTAP_EXPECT(strstr(r.out, "(5 haccel.xxh3:<tensor> checksum entries)") != NULL);
	/* Listed in file order: "a" after "model.embed.weight". */
	KTAP_EXPECT(strstr(r.out, "model.embed.weight") < strstr(r.out, "  a "));
	/* Options before the command work too; a directory is a checkpoint. */
	ctl("--json", "weights", "inspect", dir, NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	json_decref(parse_out());
	st_rmtree(dir);
}

static void t_inspect_json(void)
{
	json_t *j, *t, *f, *tot;

	setup();
	write_good(0, -1);
	ctl("weights", "inspect", path, "--json", NULL);
	KTAP_ASSERT_EQ(r.status, 0);
	j = parse_out();
	KTAP_ASSERT(j);
	f = json_array_get(json_object_get(j, "files"), 0);
	KTAP_EXPECT(!strcmp(json_string_value(json_object_get(f, "path")), path));
	KTAP_EXPECT_EQ(json_integer_value(json_object_get(f, "tensors")), 5);
	KTAP_EXPECT(json_integer_value(json_object_get(f, "header_bytes")) > 0);
	KTAP_EXPECT(!strcmp(json_string_value(json_object_get(json_object_get(f, "metadata"), "format")), "pt"));
	KTAP_ASSERT_EQ(json_array_size(json_object_get(j, "tensors")), 5);
	t = json_array_get(json_object_get(j, "tensors"), 2);
	KTAP_EXPECT(!strcmp(json_string_value(json_object_get(t, "name")), "model.q.weight"));
	KTAP_EXPECT(!strcmp(json_string_value(json_object_get(t, "dtype")), "F4"));
	KTAP_EXPECT_EQ(json_integer_value(json_array_get(json_object_get(t, "shape"), 1)), 8);
	KTAP_EXPECT_EQ(json_integer_value(json_object_get(t, "bytes")), 16);
	KTAP_EXPECT_EQ(json_integer_value(json_object_get(t, "offset")),
		       json_integer_value(json_object_get(f, "header_bytes")) + 8 + 256 + 32);
	KTAP_EXPECT(json_is_null(json_object_get(t, "checksum")));
	tot = json_object_get(j, "totals");
	KTAP_EXPECT_EQ(json_integer_value(json_object_get(tot, "tensors")), 5);
	KTAP_EXPECT_EQ(json_integer_value(json_object_get(tot, "tensor_bytes")), 256 + 32 + 16 + 8);
	KTAP_EXPECT_EQ(json_integer_value(json_object_get(json_object_get(json_object_get(tot, "by_dtype"), "U8"), "tensors")), 2);
	json_decref(j);
	st_rmtree(dir);
}

static void t_inspect_limit(void)
{
	json_t *j;

	setup();
	write_good(0, -1);
	ctl("weights", "inspect", "--limit", "2", path, NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	KTAP_EXPECT(strstr(r.out, "... 3 more (--limit 0 lists all)") != NULL);
	KTAP_EXPECT(strstr(r.out, "model.q.weight") == NULL);
	KTAP_EXPECT(strstr(r.out, "5 tensors") != NULL);
	ctl("weights", "inspect", "-j", "-n", "1", path, NULL);
	KTAP_ASSERT_EQ(r.status, 0);
	j = parse_out();
	KTAP_ASSERT(j);
	KTAP_EXPECT_EQ(json_array_size(json_object_get(j, "tensors")), 1);
	KTAP_EXPECT_EQ(json_integer_value(json_object_get(j, "tensors_listed")), 1);
	KTAP_EXPECT_EQ(json_integer_value(json_object_get(json_object_get(j, "totals"), "tensors")), 5);
	json_decref(j);
	st_rmtree(dir);
}

static void t_inspect_bad_file(void)
{
	struct st_tensor bad[] = { ST_T("model.layers.0.mlp.up_proj.weight", "BF16", 0, 100, 10, 20) };
	struct st_spec s = { .tensors = bad, .n = 1 };
	char want[1024];

	setup();
	st_write(path, &s);
	ctl("weights", "inspect", path, NULL);
	KTAP_EXPECT_EQ(r.status, 1);
	snprintf(want, sizeof(want),
		 "haccel-ctl: %s: tensor \"model.layers.0.mlp.up_proj.weight\": data_offsets [0, 100] hold 100 bytes but shape [10, 20] of BF16 needs 400\n",
		 path);
	KTAP_EXPECT(!strcmp(r.err, want));
	KTAP_EXPECT_EQ(r.out[0], '\0');
	/* --json: the failure as a JSON object on stdout too. */
	ctl("weights", "inspect", "--json", path, NULL);
	KTAP_EXPECT_EQ(r.status, 1);
	KTAP_EXPECT(strstr(r.err, "needs 400") != NULL);
	json_t *j = parse_out();
	KTAP_ASSERT(j);
	KTAP_EXPECT(json_is_false(json_object_get(j, "ok")));
	KTAP_EXPECT(!strcmp(json_string_value(json_object_get(j, "stage")), "open"));
	KTAP_EXPECT(strstr(json_string_value(json_object_get(j, "error")), "needs 400") != NULL);
	json_decref(j);
	st_join(want, dir, "missing.safetensors");
	ctl("weights", "inspect", want, NULL);
	KTAP_EXPECT_EQ(r.status, 1);
	KTAP_EXPECT(strstr(r.err, "missing.safetensors: no such file") != NULL);
	st_rmtree(dir);
}

static void t_verify(void)
{
	json_t *j;

	setup();
	write_good(1, -1);
	ctl("weights", "verify", path, NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	KTAP_EXPECT(strstr(r.out, "5 tensors read, 5 match their stored checksum, 0 have none") != NULL);
	ctl("weights", "verify", path, "--json", NULL);
	KTAP_ASSERT_EQ(r.status, 0);
	j = parse_out();
	KTAP_ASSERT(j);
	KTAP_EXPECT(json_is_true(json_object_get(j, "ok")));
	KTAP_EXPECT_EQ(json_integer_value(json_object_get(j, "verified")), 5);
	KTAP_EXPECT_EQ(json_integer_value(json_object_get(j, "mismatches")), 0);
	json_decref(j);

	/* No stored checksums: read and counted as unverified. */
	write_good(0, -1);
	ctl("weights", "verify", path, NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	KTAP_EXPECT(strstr(r.out, "0 match their stored checksum, 5 have none") != NULL);

	/* A wrong checksum fails, naming the tensor. */
	write_good(1, 3);
	ctl("weights", "verify", path, NULL);
	KTAP_EXPECT_EQ(r.status, 1);
	KTAP_EXPECT(strstr(r.err, "verify failed") && strstr(r.err, "\"b\""));
	ctl("weights", "verify", "--json", path, NULL);
	KTAP_EXPECT_EQ(r.status, 1);
	j = parse_out();
	KTAP_ASSERT(j);
	KTAP_EXPECT(json_is_false(json_object_get(j, "ok")));
	KTAP_EXPECT_EQ(json_integer_value(json_object_get(j, "mismatches")), 1);
	json_decref(j);

	/* Every tensor is checked: two wrong ones (the first and the last in
	 * file order) are both counted and named; the others still match. */
	write_good2(1, 0, 4);
	ctl("weights", "verify", path, NULL);
	KTAP_EXPECT_EQ(r.status, 1);
	KTAP_EXPECT(strstr(r.err, "2 of 5 tensors") != NULL);
	KTAP_EXPECT(strstr(r.err, "\"model.embed.weight\": checksum mismatch") != NULL);
	KTAP_EXPECT(strstr(r.err, "\"a\": checksum mismatch") != NULL);
	ctl("weights", "verify", "--json", path, NULL);
	KTAP_EXPECT_EQ(r.status, 1);
	j = parse_out();
	KTAP_ASSERT(j);
	KTAP_EXPECT(json_is_false(json_object_get(j, "ok")));
	KTAP_EXPECT_EQ(json_integer_value(json_object_get(j, "mismatches")), 2);
	KTAP_EXPECT_EQ(json_integer_value(json_object_get(j, "verified")), 3);
	json_t *list = json_object_get(j, "mismatched");
	KTAP_ASSERT_EQ(json_array_size(list), 2);
	KTAP_EXPECT(!strcmp(json_string_value(json_object_get(json_array_get(list, 0), "name")),
			    "model.embed.weight"));
	KTAP_EXPECT(!strcmp(json_string_value(json_object_get(json_array_get(list, 1), "name")), "a"));
	KTAP_EXPECT(json_is_string(json_object_get(json_array_get(list, 1), "read")));
	json_decref(j);
	st_rmtree(dir);
}

/* Stamps a new modification time on the file, again and again, while a
 * verify runs: the file changes between the open and the load's checks. */
struct toucher {
	pthread_t th;
	volatile int stop;
};

static void *touch_loop(void *arg)
{
	struct toucher *t = arg;
	struct timespec ts[2] = { { 0, UTIME_OMIT }, { 1000000000, 0 } };

	while (!t->stop) {
		ts[1].tv_nsec = (ts[1].tv_nsec + 1) % 1000000000;
		utimensat(AT_FDCWD, path, ts, 0);
	}
	return NULL;
}

/*
 * A file changed under the load is an error of the load ("stage": "load",
 * the reason in "error"), not a checksum mismatch: "mismatches" counts
 * only tensors read in full whose checksum differs, here none.
 */
static void t_verify_changed_file(void)
{
	struct st_tensor big[] = { ST_T("big", "U8", 0, 0, 16u << 20), ST_T("tail", "U8", 0, 0, 5) };
	struct st_spec s = { .tensors = big, .n = 2 };
	struct toucher t = { 0 };
	json_t *j = NULL;

	setup();
	st_pack(big, 2);
	st_write(path, &s);
	for (int attempt = 0; attempt < 5; attempt++) {
		t.stop = 0;
		KTAP_ASSERT(pthread_create(&t.th, NULL, touch_loop, &t) == 0);
		ctl("weights", "verify", "--json", path, NULL);
		t.stop = 1;
		pthread_join(t.th, NULL);
		if (r.status != 0)
			break;
		ktap_diag("attempt %d: the load finished between two stamps", attempt);
	}
	if (r.status == 0) {
		st_rmtree(dir);
		ktap_skip("could not change the file during a load in 5 attempts");
	}
	KTAP_EXPECT_EQ(r.status, 1);
	j = parse_out();
	KTAP_ASSERT(j);
	ktap_diag("error: %s", json_string_value(json_object_get(j, "error")));
	KTAP_EXPECT(json_is_false(json_object_get(j, "ok")));
	KTAP_EXPECT(!strcmp(json_string_value(json_object_get(j, "stage")), "load"));
	KTAP_EXPECT(strstr(json_string_value(json_object_get(j, "error")), "changed") != NULL);
	KTAP_EXPECT_EQ(json_integer_value(json_object_get(j, "mismatches")), 0);
	KTAP_EXPECT_EQ(json_array_size(json_object_get(j, "mismatched")), 0);
	json_decref(j);
	st_rmtree(dir);
}

static void t_usage_errors(void)
{
	ctl("weights", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "missing subcommand") != NULL);
	ctl("weights", "frob", "x", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "unknown subcommand 'frob'") != NULL);
	ctl("weights", "inspect", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "missing PATH") != NULL);
	ctl("weights", "inspect", "a", "b", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "unexpected argument 'b'") != NULL);
	ctl("weights", "inspect", "a", "--limit", "x", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "bad value 'x' for --limit") != NULL);
	ctl("weights", "inspect", "a", "--limit", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	ctl("weights", "verify", "a", "--limit", "3", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	ctl("weights", "inspect", "a", "--allow-unpinned", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "--allow-unpinned applies to verify only") != NULL);
	ctl("weights", "inspect", "a", "--bogus", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	ctl("weights", "--help", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	KTAP_EXPECT(strstr(r.out, "haccel-ctl weights inspect PATH") && strstr(r.out, "verify"));
	KTAP_EXPECT(strstr(r.out, "--allow-unpinned") != NULL);
	ctl("weights", "inspect", "--help", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	ctl("--help", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	KTAP_EXPECT(strstr(r.out, "weights") != NULL);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_inspect_human),
	KTAP_CASE(t_inspect_json),
	KTAP_CASE(t_inspect_limit),
	KTAP_CASE(t_inspect_bad_file),
	KTAP_CASE(t_verify),
	KTAP_CASE(t_verify_changed_file),
	KTAP_CASE(t_usage_errors),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
