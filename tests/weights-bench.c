// SPDX-License-Identifier: MIT
/* haccel-bench stream: warm figures stand beside a memory ceiling measured in the same run, each as a fraction of it, in text and JSON; a warm-only run has no disk-ceiling lines. */
#include "config.h"

#include <jansson.h>

#include "st-writer.h"

static struct tool_result r;

/* A checkpoint of 8 MiB written by the benchmark itself. */
static char *make_checkpoint(char *p)
{
	char *dir = strdup("./haccel-bench-XXXXXX");

	KTAP_ASSERT(dir && mkdtemp(dir));
	st_join(p, dir, "model.safetensors");
	tool_run(&r, "HACCEL_BENCH", "stream", p, "--create", "8M", "--warm", "--repeat", "1", NULL);
	if (r.status)
		ktap_diag("exit %d, stderr: %.400s", r.status, r.err);
	KTAP_ASSERT_EQ(r.status, 0);
	return dir;
}

static double num(const json_t *o, const char *a, const char *b)
{
	const json_t *v = json_object_get(json_object_get(o, a), b);

	if (!json_is_number(v))
		ktap_fail_at(__FILE__, __LINE__, "%s.%s is not a number", a, b);
	return json_number_value(v);
}

static void t_warm_memory_ceiling_json(void)
{
	char p[ST_PATH], *dir;
	json_error_t e;
	json_t *j, *warm;

	if (!getenv("HACCEL_BENCH"))
		ktap_skip("HACCEL_BENCH not set: run through make check");
	dir = make_checkpoint(p);
	tool_run(&r, "HACCEL_BENCH", "--json", "stream", p, "--warm", "--repeat", "2",
		 "--threads", "3", NULL);
	KTAP_ASSERT_EQ(r.status, 0);
	j = json_loads(r.out, 0, &e);
	KTAP_ASSERT(j != NULL);
	warm = json_object_get(j, "warm");
	KTAP_ASSERT(warm != NULL);
	KTAP_EXPECT(num(warm, "memory_ceiling", "bytes_per_s") > 0);
	KTAP_EXPECT_EQ(json_integer_value(json_object_get(json_object_get(warm, "memory_ceiling"), "threads")), 3);
	KTAP_EXPECT(num(warm, "haccel", "fraction_of_ceiling") > 0);
	KTAP_EXPECT(num(warm, "mmap_memcpy", "fraction_of_ceiling") > 0);
	ktap_diag("ceiling %.2f GB/s, haccel %.0f%%, mmap + memcpy %.0f%%",
		  num(warm, "memory_ceiling", "bytes_per_s") / 1e9,
		  100 * num(warm, "haccel", "fraction_of_ceiling"),
		  100 * num(warm, "mmap_memcpy", "fraction_of_ceiling"));
	/* Warm only: no disk ceiling measured, none reported. */
	KTAP_EXPECT(json_object_get(j, "disk_ceiling") == NULL);
	KTAP_EXPECT(json_object_get(j, "ceiling_probes") == NULL);
	KTAP_EXPECT(json_object_get(j, "cold") == NULL);
	json_decref(j);
	st_rmtree(dir);
}

static void t_warm_memory_ceiling_text(void)
{
	char p[ST_PATH], *dir;

	if (!getenv("HACCEL_BENCH"))
		ktap_skip("HACCEL_BENCH not set: run through make check");
	dir = make_checkpoint(p);
	tool_run(&r, "HACCEL_BENCH", "stream", p, "--warm", "--repeat", "1", NULL);
	ktap_diag("%s", r.out);
	KTAP_EXPECT_EQ(r.status, 0);
	KTAP_EXPECT(strstr(r.out, "memory ceiling") != NULL);
	KTAP_EXPECT(strstr(r.out, "% of the memory ceiling; ") != NULL); /* haccel */
	KTAP_EXPECT(strstr(r.out, "% of the memory ceiling\n") != NULL); /* mmap */
	KTAP_EXPECT(strstr(r.out, "disk ceiling") == NULL);
	KTAP_EXPECT(strstr(r.out, "best: depth") == NULL);

	/* With cold runs the disk ceiling is there, and the warm ceiling too. */
	tool_run(&r, "HACCEL_BENCH", "stream", p, "--repeat", "1", "--ceiling", "4,1M",
		 "--probe-seconds", "0.05", NULL);
	ktap_diag("%s", r.out);
	KTAP_EXPECT_EQ(r.status, 0);
	KTAP_EXPECT(strstr(r.out, "disk ceiling") && strstr(r.out, "memory ceiling"));
	st_rmtree(dir);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_warm_memory_ceiling_json),
	KTAP_CASE(t_warm_memory_ceiling_text),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
