// SPDX-License-Identifier: MIT
/*
 * haccel-bench pools: the pool operations a scheduler runs per step.
 *
 *  - page alloc+free for request sizes 10..1000 over a 100,000-page pool,
 *    the shape of vLLM's block-pool benchmark; one alloc and one free of a
 *    page count as one pair. Only page metadata is touched, so the pool's
 *    page memory is a single byte per token;
 *  - prefix-cache hits: a sequence created from a cached prompt;
 *  - fork + copy-on-write of a partial page across all layers;
 *  - recurrent-state checkpoint save and restore, against a plain memcpy
 *    of the same bytes between buffers allocated the same way, measured
 *    in the same run (rounds interleaved, medians compared).
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "bench.h"
#include "common.h"
#include "haccel.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define TARGET_PAIRS_PER_S 50e6
#define TARGET_CKPT_FRACTION 0.90

struct opts {
	uint64_t pages;
	uint64_t sizes[16];
	unsigned int n_sizes;
	double seconds;
	unsigned int rounds;
	int cpu;
	uint32_t state_layers, state_heads, state_dk, state_dv;
	uint32_t prompt_tokens;
	uint32_t cow_layers;
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: haccel-bench [--json] pools [OPTIONS]\n"
		"\n"
		"Options:\n"
		"  --pages N        pages in the alloc/free pool, up to 2^30 (default 100000)\n"
		"  --sizes LIST     request sizes in pages, comma-separated, at most 16\n"
		"                   (default 10,50,100,500,1000)\n"
		"  --seconds S      time per round, up to 60 (default 0.25)\n"
		"  --rounds N       rounds per figure, median reported (default 7, max 64)\n"
		"  --state-layers N KDA layers in a state slot, 1..256 (default 20)\n"
		"  --state-heads N  heads per KDA layer, 1..256 (default 32, dk = dv = 128)\n"
		"  --cpu N          pin to CPU N (default: the CPU it starts on)\n"
		"  --quick          small, short run (a smoke test, not a measurement):\n"
		"                   10000 pages, sizes 10,100, 3 rounds of 0.02 s, 2 state\n"
		"                   layers of 8 heads; options given too apply over these,\n"
		"                   before or after --quick\n"
		"  -j, --json       JSON on stdout\n"
		"  -h, --help       this help\n");
}

static int parse_sizes(const char *s, struct opts *o)
{
	char buf[256], *tok, *save = NULL;

	if (strlen(s) >= sizeof(buf) || tool_list_has_empty(s))
		return -EINVAL;
	snprintf(buf, sizeof(buf), "%s", s);
	o->n_sizes = 0;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (o->n_sizes == 16 ||
		    tool_parse_u64(tok, 1, 1u << 24, &o->sizes[o->n_sizes]))
			return -EINVAL;
		o->n_sizes++;
	}
	return o->n_sizes ? 0 : -EINVAL;
}

/* The defaults, or --quick's: a small, short run. */
static void defaults(struct opts *o, int quick)
{
	*o = (struct opts){
		.pages = 100000, .sizes = { 10, 50, 100, 500, 1000 }, .n_sizes = 5,
		.seconds = 0.25, .rounds = 7, .cpu = -1,
		.state_layers = 20, .state_heads = 32, .state_dk = 128, .state_dv = 128,
		.prompt_tokens = 4096, .cow_layers = 4,
	};
	if (!quick)
		return;
	o->pages = 10000;
	o->sizes[0] = 10;
	o->sizes[1] = 100;
	o->n_sizes = 2;
	o->seconds = 0.02;
	o->rounds = 3;
	o->state_layers = 2;
	o->state_heads = 8;
	o->prompt_tokens = 512;
	o->cow_layers = 2;
}

static int parse(int argc, char **argv, struct opts *o, int *json)
{
	enum { O_PAGES = 256, O_SIZES, O_SECONDS, O_ROUNDS, O_CPU, O_QUICK,
	       O_SLAYERS, O_SHEADS };
	static const struct option lo[] = {
		{ "pages", required_argument, NULL, O_PAGES },
		{ "sizes", required_argument, NULL, O_SIZES },
		{ "seconds", required_argument, NULL, O_SECONDS },
		{ "rounds", required_argument, NULL, O_ROUNDS },
		{ "cpu", required_argument, NULL, O_CPU },
		{ "state-layers", required_argument, NULL, O_SLAYERS },
		{ "state-heads", required_argument, NULL, O_SHEADS },
		{ "quick", no_argument, NULL, O_QUICK },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *want = "";
	uint64_t v;
	char *end;
	int c, quick = 0;

	/* --quick sets the defaults, wherever it is: the options given
	 * explicitly apply over them. A first pass looks for it alone. */
	opterr = 0;
	optind = 0;
	while ((c = getopt_long(argc, argv, "jh", lo, NULL)) != -1)
		if (c == O_QUICK)
			quick = 1;
	defaults(o, quick);
	optind = 0;
	while ((c = getopt_long(argc, argv, "jh", lo, NULL)) != -1) {
		switch (c) {
		case O_PAGES:
			want = "1..1073741824";
			if (tool_parse_u64(optarg, 1, 1u << 30, &o->pages))
				goto bad;
			break;
		case O_SIZES:
			want = "at most 16 comma-separated page counts, each 1..16777216";
			if (parse_sizes(optarg, o))
				goto bad;
			break;
		case O_SECONDS:
			want = "more than 0, at most 60";
			o->seconds = strtod(optarg, &end);
			if (end == optarg || *end || !(o->seconds > 0 && o->seconds <= 60))
				goto bad;
			break;
		case O_ROUNDS:
			want = "1..64";
			if (tool_parse_u64(optarg, 1, 64, &v))
				goto bad;
			o->rounds = (unsigned int)v;
			break;
		case O_CPU:
			want = "a CPU number, 0..1023";
			if (tool_parse_u64(optarg, 0, CPU_SETSIZE - 1, &v))
				goto bad;
			o->cpu = (int)v;
			break;
		case O_SLAYERS:
			want = "1..256";
			if (tool_parse_u64(optarg, 1, 256, &v))
				goto bad;
			o->state_layers = (uint32_t)v;
			break;
		case O_SHEADS:
			want = "1..256";
			if (tool_parse_u64(optarg, 1, 256, &v))
				goto bad;
			o->state_heads = (uint32_t)v;
			break;
		case O_QUICK:
			break;
		case 'j':
			*json = 1;
			break;
		case 'h':
			usage(stdout);
			return 1;
		default:
			tool_option_error("pools", argv, lo);
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		tool_err("pools: unexpected argument '%s'", argv[optind]);
		return -EINVAL;
	}
	for (unsigned int i = 0; i < o->n_sizes; i++)
		if (o->sizes[i] > o->pages) {
			tool_err("pools: request of %llu pages exceeds the %llu-page pool",
				 (unsigned long long)o->sizes[i], (unsigned long long)o->pages);
			return -EINVAL;
		}
	return 0;
bad:
	tool_err("pools: bad value '%s' for --%s (%s)", optarg, tool_option_name(lo, c), want);
	return -EINVAL;
}

/* --- page alloc + free ---------------------------------------------------- */

struct af_arg {
	struct haccel_kv_pool *pool;
	uint32_t n;
	uint32_t *ids;
	int err;
};

static uint64_t run_alloc_free(void *a, uint64_t iters)
{
	struct af_arg *x = a;

	for (uint64_t i = 0; i < iters; i++) {
		int r = haccel_kv_pages_get(x->pool, x->n, x->ids);
		r |= haccel_kv_pages_put(x->pool, x->ids, x->n);
		if (r)
			x->err = r;
	}
	return iters * x->n;
}

/* --- prefix hit ----------------------------------------------------------- */

struct ph_arg {
	struct haccel_kv_pool *pool;
	const int32_t *prompt;
	uint32_t n;
	uint32_t reused;
	int err;
};

static uint64_t run_prefix_hit(void *a, uint64_t iters)
{
	struct ph_arg *x = a;

	for (uint64_t i = 0; i < iters; i++) {
		uint32_t s;
		int r = haccel_kv_seq_create(x->pool, x->prompt, x->n, &s, &x->reused);
		r |= haccel_kv_seq_free(x->pool, s);
		if (r)
			x->err = r;
	}
	return iters;
}

/* --- fork + CoW ----------------------------------------------------------- */

struct fc_arg {
	struct haccel_kv_pool *pool;
	uint32_t parent;
	int err;
};

static uint64_t run_fork_cow(void *a, uint64_t iters)
{
	struct fc_arg *x = a;
	int32_t tok = 7;

	for (uint64_t i = 0; i < iters; i++) {
		uint32_t c;
		int r = haccel_kv_seq_fork(x->pool, x->parent, &c);
		r |= haccel_kv_seq_append(x->pool, c, &tok, 1, NULL);
		r |= haccel_kv_seq_free(x->pool, c);
		if (r)
			x->err = r;
	}
	return iters;
}

/* --- state checkpoints ---------------------------------------------------- */

struct ck_arg {
	struct haccel_state_pool *pool;
	uint32_t slot, ckpt;
	uint64_t bytes;
	void *src, *dst; /* for the memcpy ceiling */
	int err;
};

static uint64_t run_save(void *a, uint64_t iters)
{
	struct ck_arg *x = a;

	for (uint64_t i = 0; i < iters; i++)
		if (haccel_state_ckpt_save(x->pool, x->slot, 1, 64, 0, &x->ckpt))
			x->err = 1;
	return iters * x->bytes;
}

static uint64_t run_restore(void *a, uint64_t iters)
{
	struct ck_arg *x = a;

	for (uint64_t i = 0; i < iters; i++)
		if (haccel_state_ckpt_restore(x->pool, x->ckpt, x->slot))
			x->err = 1;
	return iters * x->bytes;
}

static uint64_t run_memcpy(void *a, uint64_t iters)
{
	struct ck_arg *x = a;

	for (uint64_t i = 0; i < iters; i++) {
		memcpy(x->dst, x->src, x->bytes);
		/* Keep the copy from being elided. */
		__asm__ volatile("" : : "r"(x->dst) : "memory");
	}
	return iters * x->bytes;
}

/* Buffers for the ceiling, made as the host pool backend makes its memory. */
static void *ceiling_buffer(uint64_t bytes)
{
	const size_t align = 2u << 20;
	char *raw = mmap(NULL, bytes + align, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	char *p;

	if (raw == MAP_FAILED)
		return NULL;
	/* 2 MiB aligned, as the pool's memory is, so both get huge pages. */
	p = (char *)(((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1));
	if (p > raw)
		munmap(raw, (size_t)(p - raw));
	munmap(p + bytes, (size_t)(raw + bytes + align - (p + bytes)));
	madvise(p, bytes, MADV_HUGEPAGE);
	if (madvise(p, bytes, MADV_POPULATE_WRITE))
		memset(p, 0, bytes);
	memset(p, 0x5a, bytes);
	return p;
}

/* --- driver --------------------------------------------------------------- */

static json_t *rate_json(const struct bench_rate *r)
{
	json_t *o = json_object();

	json_object_set_new(o, "median", json_real(r->median));
	json_object_set_new(o, "min", json_real(r->min));
	json_object_set_new(o, "max", json_real(r->max));
	json_object_set_new(o, "iters_per_round", json_integer((json_int_t)r->iters));
	return o;
}

static int fail(const char *what, int err)
{
	tool_err("pools: %s: %s", what, haccel_strerror(err));
	return EXIT_FAIL;
}

int bench_pools(int argc, char **argv, int json)
{
	struct haccel_kv_pool_config kc;
	struct haccel_state_pool_config sc;
	struct haccel_kv_pool *pool = NULL;
	struct haccel_state_pool *sp = NULL;
	struct haccel_ctx *ctx = NULL;
	struct bench_rate r, save, restore, ceil;
	struct opts o;
	json_t *out = json_object(), *arr = json_array();
	int ret, cpu;

	ret = parse(argc, argv, &o, &json);
	if (ret) {
		json_decref(out);
		json_decref(arr);
		return ret > 0 ? EXIT_OK : EXIT_USAGE;
	}
	cpu = o.cpu >= 0 ? o.cpu : sched_getcpu();
	if (cpu >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set)) {
			tool_err("pools: cannot pin to CPU %d: %s", cpu, strerror(errno));
			return EXIT_FAIL;
		}
	}
	ret = haccel_open(NULL, &ctx);
	if (ret)
		return fail("haccel_open", ret);

	json_object_set_new(out, "benchmark", json_string("pools"));
	json_object_set_new(out, "haccel_version", json_string(haccel_version_string()));
	json_object_set_new(out, "cpu", json_integer(cpu));
	json_object_set_new(out, "rounds", json_integer(o.rounds));
	json_object_set_new(out, "seconds_per_round", json_real(o.seconds));
	if (!json)
		printf("haccel-bench pools: haccel %s, CPU %d, %u rounds of %.2f s, medians\n\n",
		       haccel_version_string(), cpu, o.rounds, o.seconds);

	/* 1. page alloc + free */
	haccel_kv_pool_config_init(&kc);
	kc.n_pages = (uint32_t)o.pages;
	kc.n_streams = 1;
	kc.streams[0].bytes_per_token = 1;
	kc.streams[1] = (struct haccel_kv_stream){ 0 };
	ret = haccel_kv_pool_create(ctx, &kc, &pool);
	if (ret)
		return fail("creating the alloc/free pool", ret);
	uint32_t *ids = calloc(o.pages, sizeof(*ids));
	if (!ids)
		return fail("allocating ids", -ENOMEM);
	if (!json)
		printf("KV page alloc+free, %llu-page pool (target >= %.0f M pairs/s)\n"
		       "  %8s %14s %10s %10s\n", (unsigned long long)o.pages,
		       TARGET_PAIRS_PER_S / 1e6, "pages", "pairs/s", "ns/pair", "x target");
	for (unsigned int i = 0; i < o.n_sizes; i++) {
		struct af_arg a = { pool, (uint32_t)o.sizes[i], ids, 0 };
		json_t *e = json_object();

		bench_measure(run_alloc_free, &a, o.seconds, o.rounds, &r);
		if (a.err)
			return fail("page alloc/free", a.err);
		json_object_set_new(e, "pages", json_integer((json_int_t)o.sizes[i]));
		json_object_set_new(e, "pairs_per_s", rate_json(&r));
		json_object_set_new(e, "ns_per_pair", json_real(1e9 / r.median));
		json_object_set_new(e, "target_pairs_per_s", json_real(TARGET_PAIRS_PER_S));
		json_array_append_new(arr, e);
		if (!json)
			printf("  %8llu %12.1f M %10.2f %10.2f\n",
			       (unsigned long long)o.sizes[i], r.median / 1e6,
			       1e9 / r.median, r.median / TARGET_PAIRS_PER_S);
	}
	json_object_set_new(out, "alloc_free", arr);
	free(ids);
	haccel_kv_pool_destroy(pool);

	/* 2. prefix-cache hit: the cached pages idle on the LRU list between hits */
	haccel_kv_pool_config_init(&kc);
	kc.n_pages = o.prompt_tokens / 64 * 2;
	ret = haccel_kv_pool_create(ctx, &kc, &pool);
	if (ret)
		return fail("creating the prefix pool", ret);
	int32_t *prompt = malloc(o.prompt_tokens * sizeof(*prompt));
	uint32_t s;
	if (!prompt)
		return fail("allocating the prompt", -ENOMEM);
	for (uint32_t i = 0; i < o.prompt_tokens; i++)
		prompt[i] = (int32_t)((i * 2654435761u) % 151936);
	ret = haccel_kv_seq_create(pool, NULL, 0, &s, NULL);
	if (!ret)
		ret = haccel_kv_seq_append(pool, s, prompt, o.prompt_tokens, NULL);
	if (!ret)
		ret = haccel_kv_seq_free(pool, s);
	if (ret)
		return fail("filling the prefix cache", ret);
	{
		struct ph_arg a = { pool, prompt, o.prompt_tokens, 0, 0 };
		json_t *e = json_object();
		uint32_t pages = o.prompt_tokens / 64;

		bench_measure(run_prefix_hit, &a, o.seconds, o.rounds, &r);
		if (a.err)
			return fail("prefix hit", a.err);
		if (a.reused != o.prompt_tokens)
			return fail("prefix hit reused too little", -EBADMSG);
		json_object_set_new(e, "prompt_tokens", json_integer(o.prompt_tokens));
		json_object_set_new(e, "pages_hit", json_integer(pages));
		json_object_set_new(e, "lookups_per_s", rate_json(&r));
		json_object_set_new(e, "ns_per_page", json_real(1e9 / r.median / pages));
		json_object_set_new(e, "tokens_per_s", json_real(r.median * o.prompt_tokens));
		json_object_set_new(out, "prefix_hit", e);
		if (!json)
			printf("\nprefix-cache hit: %u-token prompt, %u cached pages of 64 (create + free)\n"
			       "  %10.0f lookups/s  %6.1f ns/page  %6.2f G tokens/s verified\n",
			       o.prompt_tokens, pages, r.median, 1e9 / r.median / pages,
			       r.median * o.prompt_tokens / 1e9);
	}
	free(prompt);
	haccel_kv_pool_destroy(pool);

	/* 3. fork + copy-on-write of a partial page */
	haccel_kv_pool_config_init(&kc);
	kc.n_layers = o.cow_layers;
	kc.n_pages = 64;
	ret = haccel_kv_pool_create(ctx, &kc, &pool);
	if (ret)
		return fail("creating the fork pool", ret);
	{
		struct fc_arg a = { pool, 0, 0 };
		int32_t t[1000];
		uint32_t partial = 1000 % 64;
		uint64_t cow_bytes = (uint64_t)partial * (656 + 132) * o.cow_layers;
		json_t *e = json_object();

		for (int i = 0; i < 1000; i++)
			t[i] = i;
		ret = haccel_kv_seq_create(pool, NULL, 0, &a.parent, NULL);
		if (!ret)
			ret = haccel_kv_seq_append(pool, a.parent, t, 1000, NULL);
		if (ret)
			return fail("filling the fork pool", ret);
		bench_measure(run_fork_cow, &a, o.seconds, o.rounds, &r);
		if (a.err)
			return fail("fork + CoW", a.err);
		json_object_set_new(e, "layers", json_integer(o.cow_layers));
		json_object_set_new(e, "parent_tokens", json_integer(1000));
		json_object_set_new(e, "cow_bytes", json_integer((json_int_t)cow_bytes));
		json_object_set_new(e, "forks_per_s", rate_json(&r));
		json_object_set_new(e, "cow_bytes_per_s", json_real(r.median * (double)cow_bytes));
		json_object_set_new(out, "fork_cow", e);
		if (!json)
			printf("\nfork + append 1 token (copy-on-write of a %u-token page, %u layers, %llu bytes) + free\n"
			       "  %10.0f forks/s  %6.2f GB/s copied\n",
			       partial, o.cow_layers, (unsigned long long)cow_bytes,
			       r.median, r.median * (double)cow_bytes / 1e9);
	}
	haccel_kv_pool_destroy(pool);

	/* 4. state checkpoints against memcpy */
	haccel_state_pool_config_init(&sc);
	sc.n_layers = o.state_layers;
	sc.n_heads = o.state_heads;
	sc.head_dk = o.state_dk;
	sc.head_dv = o.state_dv;
	sc.conv_elem_bytes = 2;
	sc.n_slots = 1;
	sc.n_checkpoints = 1;
	ret = haccel_state_pool_create(ctx, &sc, &sp);
	if (ret)
		return fail("creating the state pool", ret);
	{
		struct haccel_state_layout l;
		struct ck_arg a = { sp, 0, 0, 0, NULL, NULL, 0 };
		double sv[64], rs[64], mc[64], fs[64], fr[64];
		json_t *e = json_object();

		haccel_state_pool_layout(sp, &l);
		a.bytes = l.slot_bytes;
		a.src = ceiling_buffer(l.slot_bytes);
		a.dst = ceiling_buffer(l.slot_bytes);
		if (!a.src || !a.dst)
			return fail("allocating memcpy buffers", -ENOMEM);
		ret = haccel_state_slot_alloc(sp, 0, &a.slot);
		if (!ret)
			ret = haccel_state_ckpt_save(sp, a.slot, 1, 64, 0, &a.ckpt);
		if (ret)
			return fail("preparing checkpoints", ret);
		/* Interleave single rounds so drift hits all three alike. */
		for (unsigned int i = 0; i < o.rounds; i++) {
			bench_measure(run_memcpy, &a, o.seconds, 1, &ceil);
			mc[i] = ceil.median;
			bench_measure(run_save, &a, o.seconds, 1, &save);
			sv[i] = save.median;
			bench_measure(run_restore, &a, o.seconds, 1, &restore);
			rs[i] = restore.median;
			/* Fractions per round: a neighbour's noise cancels out. */
			fs[i] = sv[i] / mc[i];
			fr[i] = rs[i] / mc[i];
		}
		double save_frac = bench_median(fs, o.rounds);
		double restore_frac = bench_median(fr, o.rounds);
		if (a.err)
			return fail("checkpoint save/restore", -EIO);
		ceil.median = bench_median(mc, o.rounds);
		ceil.min = mc[0];
		ceil.max = mc[o.rounds - 1];
		save.median = bench_median(sv, o.rounds);
		save.min = sv[0];
		save.max = sv[o.rounds - 1];
		restore.median = bench_median(rs, o.rounds);
		restore.min = rs[0];
		restore.max = rs[o.rounds - 1];
		json_object_set_new(e, "layers", json_integer(o.state_layers));
		json_object_set_new(e, "heads", json_integer(o.state_heads));
		json_object_set_new(e, "dk", json_integer(o.state_dk));
		json_object_set_new(e, "dv", json_integer(o.state_dv));
		json_object_set_new(e, "slot_bytes", json_integer((json_int_t)l.slot_bytes));
		json_object_set_new(e, "memcpy_bytes_per_s", rate_json(&ceil));
		json_object_set_new(e, "save_bytes_per_s", rate_json(&save));
		json_object_set_new(e, "restore_bytes_per_s", rate_json(&restore));
		json_object_set_new(e, "save_fraction", json_real(save_frac));
		json_object_set_new(e, "restore_fraction", json_real(restore_frac));
		json_object_set_new(e, "target_fraction", json_real(TARGET_CKPT_FRACTION));
		json_object_set_new(out, "state_checkpoint", e);
		if (!json) {
			char b[32];
			printf("\nstate checkpoint: %u KDA layers x %u heads x %ux%u fp32 + bf16 conv tails, %s per slot\n"
			       "  memcpy ceiling %7.2f GB/s\n"
			       "  save           %7.2f GB/s  %5.1f%% of memcpy (target >= %.0f%%)\n"
			       "  restore        %7.2f GB/s  %5.1f%% of memcpy\n"
			       "  (fractions: median over rounds of each round's ratio to the memcpy round before it)\n",
			       o.state_layers, o.state_heads, o.state_dk, o.state_dv,
			       tool_bytes(l.slot_bytes, b, sizeof(b)), ceil.median / 1e9,
			       save.median / 1e9, 100 * save_frac,
			       100 * TARGET_CKPT_FRACTION, restore.median / 1e9,
			       100 * restore_frac);
		}
		munmap(a.src, l.slot_bytes);
		munmap(a.dst, l.slot_bytes);
	}
	haccel_state_pool_destroy(sp);
	haccel_close(ctx);
	if (json)
		return tool_print_json(out) ? EXIT_FAIL : EXIT_OK;
	json_decref(out);
	return EXIT_OK;
}
