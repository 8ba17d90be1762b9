// SPDX-License-Identifier: MIT
/* haccel-ctl model init and haccel-run: outputs, JSON, batches, determinism, sampling seeds, usage errors. */
#include "config.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "haccel.h"
#include "ktap.h"
#include "test-util.h"

static struct tool_result r, r2;
static char *dir;
static char model[600];

static json_t *js(const struct tool_result *x)
{
	json_error_t e;
	json_t *j = json_loads(x->out, 0, &e);

	if (!j) {
		ktap_fail_at(__FILE__, __LINE__, "not JSON (%s): %.300s / %.300s", e.text, x->out, x->err);
		ktap_end();
	}
	return j;
}

static void setup(void)
{
	dir = strdup("./haccel-cli-XXXXXX");
	KTAP_ASSERT(dir && mkdtemp(dir));
	snprintf(model, sizeof(model), "%s/tiny", dir);
	tool_run(&r, "HACCEL_CTL", "model", "init", "--preset", "tiny", "--out", model, NULL);
	KTAP_ASSERT_EQ(r.status, 0);
}

static void teardown(void)
{
	test_rmtree(dir);
	free(dir);
}

static void t_model_init(void)
{
	json_t *j;

	setup();
	KTAP_EXPECT(strstr(r.out, "preset tiny") != NULL);
	tool_run(&r, "HACCEL_CTL", "model", "init", "--preset", "tiny", "--out", model, NULL);
	KTAP_EXPECT_EQ(r.status, 1);
	KTAP_EXPECT(strstr(r.err, "already holds a model") != NULL);
	tool_run(&r, "HACCEL_CTL", "--json", "model", "init", "--preset", "tiny", "--out", model,
		 "--force", "--seed", "9", NULL);
	KTAP_ASSERT_EQ(r.status, 0);
	j = js(&r);
	KTAP_EXPECT(json_integer_value(json_object_get(j, "weights_bytes")) > 100000);
	KTAP_EXPECT_EQ(json_integer_value(json_object_get(j, "seed")), 9);
	json_decref(j);
	tool_run(&r, "HACCEL_CTL", "model", "init", "--preset", "nosuch", "--out", model, NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "tiny") && strstr(r.err, "small"));
	KTAP_EXPECT_EQ(test_count_of(r.err, "nosuch"), 1);
	KTAP_EXPECT(strstr(r.err, "haccel: error:") == NULL);
	tool_run(&r, "HACCEL_CTL", "model", "init", "--preset", "tiny", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	tool_run(&r, "HACCEL_CTL", "model", "frob", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	/* --out with missing parents is made whole (trailing slash too); a
	 * file in the way is a clear failure and stays as it was. */
	char nested[700], inway[700];

	snprintf(nested, sizeof(nested), "%s/a/b//c/", dir);
	tool_run(&r, "HACCEL_CTL", "model", "init", "--preset", "tiny", "--out", nested, NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	snprintf(nested, sizeof(nested), "%s/a/b/c/model.safetensors", dir);
	KTAP_EXPECT(access(nested, R_OK) == 0);
	test_put(dir, "afile", "x");
	snprintf(inway, sizeof(inway), "%s/afile/m", dir);
	tool_run(&r, "HACCEL_CTL", "model", "init", "--preset", "tiny", "--out", inway, NULL);
	KTAP_EXPECT_EQ(r.status, 1);
	KTAP_EXPECT(strstr(r.err, "cannot create") && strstr(r.err, "Not a directory"));
	snprintf(inway, sizeof(inway), "%s/afile", dir);
	tool_run(&r, "HACCEL_CTL", "model", "init", "--preset", "tiny", "--out", inway, NULL);
	KTAP_EXPECT_EQ(r.status, 1);
	KTAP_EXPECT(strstr(r.err, "Not a directory") != NULL);
	struct stat st;

	KTAP_EXPECT(stat(inway, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 1);
	tool_run(&r, "HACCEL_CTL", "model", "--help", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	KTAP_EXPECT(strstr(r.out, "kimi-linear-48b-a3b") != NULL);
	teardown();
}

static json_t *tokens_of(json_t *j, size_t i)
{
	return json_object_get(json_array_get(json_object_get(j, "outputs"), i), "tokens");
}

static void t_run_json_and_chunks(void)
{
	json_t *a, *b;

	setup();
	tool_run(&r, "HACCEL_RUN", model, "--prompt", "Hello, haccel", "--max-new", "12", "--json", NULL);
	KTAP_ASSERT_EQ(r.status, 0);
	a = js(&r);
	KTAP_EXPECT_EQ(json_array_size(tokens_of(a, 0)), 12);
	KTAP_EXPECT_EQ(json_integer_value(json_object_get(json_object_get(a, "prefill"), "tokens")), 13);
	KTAP_EXPECT_EQ(json_integer_value(json_object_get(json_object_get(a, "decode"), "tokens")), 11);
	KTAP_EXPECT(json_is_string(json_object_get(json_array_get(json_object_get(a, "outputs"), 0), "text")));
	KTAP_EXPECT(json_integer_value(json_object_get(json_object_get(a, "load"), "bytes")) > 0);
	KTAP_EXPECT(json_integer_value(json_object_get(json_object_get(a, "kv_pages"), "peak_used")) >= 1);
	/* Prefill in chunks of 1: the same tokens. */
	tool_run(&r2, "HACCEL_RUN", model, "--prompt", "Hello, haccel", "--max-new", "12", "--json",
		 "--chunk", "1", NULL);
	KTAP_ASSERT_EQ(r2.status, 0);
	b = js(&r2);
	KTAP_EXPECT(json_equal(tokens_of(a, 0), tokens_of(b, 0)));
	json_decref(b);
	/* Human output: the prompt, then the text, then the summary. */
	tool_run(&r2, "HACCEL_RUN", model, "--prompt", "Hello, haccel", "--max-new", "12", NULL);
	KTAP_EXPECT_EQ(r2.status, 0);
	KTAP_EXPECT(!strncmp(r2.out, "Hello, haccel", 13));
	KTAP_EXPECT(strstr(r2.err, "tokens/s") && strstr(r2.err, "kv pages"));
	json_decref(a);
	teardown();
}

static void t_run_batch(void)
{
	char batch[700];
	json_t *all, *one;
	const char *lines[3] = { "first prompt", "a second, longer prompt than the first", "3" };

	setup();
	snprintf(batch, sizeof(batch), "%s/prompts.txt", dir);
	test_put(dir, "prompts.txt", "first prompt\na second, longer prompt than the first\n\n3\n");
	tool_run(&r, "HACCEL_RUN", model, "--batch", batch, "--max-new", "9", "--json", "--chunk", "5", NULL);
	KTAP_ASSERT_EQ(r.status, 0);
	all = js(&r);
	KTAP_ASSERT_EQ(json_array_size(json_object_get(all, "outputs")), 3);
	/* Each prompt of the batch generates what it generates alone. */
	for (size_t i = 0; i < 3; i++) {
		tool_run(&r2, "HACCEL_RUN", model, "--prompt", lines[i], "--max-new", "9", "--json", NULL);
		KTAP_ASSERT_EQ(r2.status, 0);
		one = js(&r2);
		KTAP_EXPECT(json_equal(tokens_of(all, i), tokens_of(one, 0)));
		json_decref(one);
	}
	json_decref(all);
	teardown();
}

static json_int_t summary(json_t *j, const char *phase, const char *what)
{
	return json_integer_value(json_object_get(json_object_get(j, phase), what));
}

static double seconds_of(json_t *j, const char *phase)
{
	return json_real_value(json_object_get(json_object_get(j, phase), "seconds"));
}

/*
 * The summary of a batch: prefill counts exactly the prompt tokens, decode
 * exactly the tokens fed back (each prompt's first generated token comes
 * from its prefill's last logits; haccel-run(1)). Uneven prompts and a
 * chunk smaller than most of them, so that some prompts finish their
 * prefill while others are still at it: a run that mixed one prompt's
 * decode into another's prefill steps would count those tokens twice.
 */
static void t_run_batch_summary(void)
{
	char batch[700];
	json_t *j;
	/* 12, 3 and 7 bytes: 22 prompt tokens; chunks of 4 */
	const json_int_t prompt_total = 12 + 3 + 7;

	setup();
	snprintf(batch, sizeof(batch), "%s/uneven.txt", dir);
	test_put(dir, "uneven.txt", "twelve bytes\nabc\nseven b\n");
	tool_run(&r, "HACCEL_RUN", model, "--batch", batch, "--max-new", "5", "--json", "--chunk", "4",
		 NULL);
	KTAP_ASSERT_EQ(r.status, 0);
	j = js(&r);
	json_t *outs = json_object_get(j, "outputs");
	KTAP_ASSERT_EQ(json_array_size(outs), 3);
	json_int_t prompts = 0, generated = 0, with_output = 0;
	for (size_t i = 0; i < 3; i++) {
		json_t *e = json_array_get(outs, i);
		size_t g = json_array_size(json_object_get(e, "tokens"));

		prompts += json_integer_value(json_object_get(e, "prompt_tokens"));
		generated += (json_int_t)g;
		with_output += g > 0;
		KTAP_EXPECT_EQ(g, 5);
	}
	KTAP_EXPECT_EQ(prompts, prompt_total);
	KTAP_EXPECT_EQ(summary(j, "prefill", "tokens"), prompt_total);
	KTAP_EXPECT_EQ(summary(j, "decode", "tokens"), generated - with_output);
	KTAP_EXPECT_EQ(summary(j, "decode", "tokens"), 3 * (5 - 1));
	KTAP_EXPECT(seconds_of(j, "prefill") > 0 && seconds_of(j, "decode") > 0);
	json_decref(j);

	/* One token each: all of it from the prefill, no decode step. */
	tool_run(&r, "HACCEL_RUN", model, "--batch", batch, "--max-new", "1", "--json", "--chunk", "4",
		 NULL);
	KTAP_ASSERT_EQ(r.status, 0);
	j = js(&r);
	KTAP_EXPECT_EQ(summary(j, "prefill", "tokens"), prompt_total);
	KTAP_EXPECT_EQ(summary(j, "decode", "tokens"), 0);
	KTAP_EXPECT(seconds_of(j, "decode") == 0);
	json_decref(j);

	/* The human summary says the same. */
	tool_run(&r, "HACCEL_RUN", model, "--batch", batch, "--max-new", "5", "--chunk", "4", NULL);
	KTAP_ASSERT_EQ(r.status, 0);
	KTAP_EXPECT(strstr(r.err, "prefill      22 tokens") != NULL);
	KTAP_EXPECT(strstr(r.err, "decode       12 tokens") != NULL);
	teardown();
}

static void t_run_sampling_seeds(void)
{
	json_t *a, *b;

	setup();
	tool_run(&r, "HACCEL_RUN", model, "--tokens", "1,2,3,4", "--max-new", "24", "--json",
		 "--temperature", "1.5", "--top-p", "0.95", "--seed", "5", NULL);
	tool_run(&r2, "HACCEL_RUN", model, "--tokens", "1,2,3,4", "--max-new", "24", "--json",
		 "--temperature", "1.5", "--top-p", "0.95", "--seed", "5", NULL);
	KTAP_ASSERT(r.status == 0 && r2.status == 0);
	a = js(&r);
	b = js(&r2);
	KTAP_EXPECT(json_equal(tokens_of(a, 0), tokens_of(b, 0)));
	json_decref(b);
	tool_run(&r2, "HACCEL_RUN", model, "--tokens", "1,2,3,4", "--max-new", "24", "--json",
		 "--temperature", "1.5", "--top-p", "0.95", "--seed", "6", NULL);
	b = js(&r2);
	KTAP_EXPECT(!json_equal(tokens_of(a, 0), tokens_of(b, 0)));
	json_decref(a);
	json_decref(b);
	teardown();
}

/* --max-seq: a prompt stops where its sequence is full, with the tokens it
 * had made so far (greedy: the start of the longer run's), and says why. */
static void t_run_max_seq(void)
{
	json_t *a, *b;

	setup();
	tool_run(&r, "HACCEL_RUN", model, "--tokens", "1,2,3", "--max-new", "5", "--json", NULL);
	tool_run(&r2, "HACCEL_RUN", model, "--tokens", "1,2,3", "--max-new", "5", "--max-seq", "4",
		 "--json", NULL);
	KTAP_ASSERT(r.status == 0 && r2.status == 0);
	a = js(&r);
	b = js(&r2);
	KTAP_EXPECT_EQ(json_array_size(tokens_of(a, 0)), 5);
	/* 3 prompt tokens in a sequence of 4: 4 - 3 + 1 generated */
	KTAP_ASSERT_EQ(json_array_size(tokens_of(b, 0)), 2);
	for (size_t i = 0; i < 2; i++)
		KTAP_EXPECT(json_equal(json_array_get(tokens_of(a, 0), i),
				       json_array_get(tokens_of(b, 0), i)));
	KTAP_EXPECT(!strcmp(json_string_value(json_object_get(
				    json_array_get(json_object_get(a, "outputs"), 0), "stop")),
			    "max_new"));
	KTAP_EXPECT(!strcmp(json_string_value(json_object_get(
				    json_array_get(json_object_get(b, "outputs"), 0), "stop")),
			    "max_seq"));
	json_decref(a);
	json_decref(b);
	tool_run(&r, "HACCEL_RUN", model, "--tokens", "1,2,3", "--max-new", "5", "--max-seq", "3",
		 "--quiet", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	KTAP_EXPECT(strstr(r.err, "prompt 0: stopped after 1 generated token: its sequence is full (--max-seq 3)") != NULL);
	/* nothing generated: no time to a first token */
	tool_run(&r, "HACCEL_RUN", model, "--tokens", "1,2,3", "--max-new", "0", "--json", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	a = js(&r);
	KTAP_EXPECT(json_is_null(json_object_get(a, "first_token_seconds")));
	KTAP_EXPECT_EQ(json_array_size(tokens_of(a, 0)), 0);
	json_decref(a);
	tool_run(&r, "HACCEL_RUN", model, "--tokens", "1,2,3", "--max-seq", "2", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "--max-seq 2: the longest prompt has 3 tokens") != NULL);
	teardown();
}

static void t_run_usage_errors(void)
{
	setup();
	tool_run(&r, "HACCEL_RUN", model, NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	tool_run(&r, "HACCEL_RUN", model, "--prompt", "a", "--tokens", "1", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	tool_run(&r, "HACCEL_RUN", model, "--prompt", "a", "--top-p", "0", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "bad value '0' for --top-p") != NULL);
	/* the option is named however it was spelled */
	tool_run(&r, "HACCEL_RUN", model, "--prompt", "a", "-n", "x", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "bad value 'x' for --max-new") != NULL);
	tool_run(&r, "HACCEL_RUN", model, "--prompt", "a", "--chunk=0", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "bad value '0' for --chunk") != NULL);
	tool_run(&r, "HACCEL_RUN", model, "--prompt", "a", "--device", "tpu", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "cpu, cuda or auto") != NULL);
	tool_run(&r, "HACCEL_RUN", model, "--tokens", "1,999", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "outside the vocabulary") != NULL);
	tool_run(&r, "HACCEL_RUN", model, "--tokens", "1,x", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	tool_run(&r, "HACCEL_RUN", "./no-such-model", "--prompt", "a", NULL);
	KTAP_EXPECT_EQ(r.status, 1);
	KTAP_EXPECT(strstr(r.err, "config.json") != NULL);
	/* once, by the tool: the library's error line is not printed too */
	KTAP_EXPECT_EQ(test_count_of(r.err, "config.json"), 1);
	KTAP_EXPECT(strstr(r.err, "haccel: error:") == NULL);
	tool_run(&r, "HACCEL_RUN", "--help", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	KTAP_EXPECT(strstr(r.out, "--max-new") != NULL);
	teardown();
}

/* --device cuda: runs where there is a GPU, else fails (exit 1) with the
 * driver's reason; auto picks the one that works and says which. */
static void t_run_device(void)
{
	struct haccel_gpu_info gi;
	struct haccel_ctx *ctx;
	int gpu;

	setup();
	KTAP_ASSERT_EQ(haccel_open(NULL, &ctx), 0);
	gpu = haccel_gpu_info(ctx, &gi) == 0 && gi.kernels;
	haccel_close(ctx);
	tool_run(&r, "HACCEL_RUN", model, "--prompt", "ab", "--max-new", "4", "--device", "cuda",
		 "--json", NULL);
	if (gpu) {
		KTAP_EXPECT_EQ(r.status, 0);
	} else {
		KTAP_EXPECT_EQ(r.status, 1);
		KTAP_EXPECT(strstr(r.err, "cuda") != NULL);
	}
	tool_run(&r, "HACCEL_RUN", model, "--prompt", "ab", "--max-new", "4", "--json", NULL);
	KTAP_ASSERT_EQ(r.status, 0);
	json_t *j = json_loads(r.out, 0, NULL);
	KTAP_ASSERT(j != NULL);
	KTAP_EXPECT(!strcmp(json_string_value(json_object_get(j, "device")), gpu ? "cuda" : "cpu"));
	KTAP_EXPECT(json_real_value(json_object_get(j, "first_token_seconds")) > 0);
	json_decref(j);
	teardown();
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_run_device),
	KTAP_CASE(t_model_init),
	KTAP_CASE(t_run_json_and_chunks),
	KTAP_CASE(t_run_batch),
	KTAP_CASE(t_run_batch_summary),
	KTAP_CASE(t_run_sampling_seeds),
	KTAP_CASE(t_run_max_seq),
	KTAP_CASE(t_run_usage_errors),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
