// SPDX-License-Identifier: MIT
/*
 * haccel-run: run the hybrid model. Streams the weights in through the
 * loader, prefills every prompt of a batch in chunks (all prompts in the
 * same steps), then decodes them together, and prints the tokens (and the
 * text, for byte-level vocabularies) with a summary: prefill and decode
 * tokens per second, pages and slots used, weight bytes and load speed.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "haccel.h"

struct prompt {
	int32_t *tok;
	uint32_t n;
	int32_t *out;         /* generated tokens */
	uint32_t n_out;
	uint32_t done;        /* prompt tokens already stepped */
	uint32_t seq;
	uint64_t rng;
	const char *stop;     /* NULL while it runs, then why it stopped:
			       * "max_new", "eos" or "max_seq" */
	float *logits;
};

enum { DEV_AUTO = 0, DEV_CPU, DEV_CUDA };

struct ropts {
	const char *dir, *prompt, *tokens, *batch;
	uint64_t max_new, seed, chunk, max_seq;
	double temperature, top_p;
	int json, quiet, device, no_graphs, allow_unpinned, version;
};

/* The largest --temperature taken (--help and haccel-run(1) say so). */
#define MAX_TEMPERATURE 100

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: haccel-run MODEL_DIR (--prompt TEXT | --tokens IDS | --batch FILE) [OPTIONS]\n"
		"\n"
		"Run the model in MODEL_DIR (config.json + model.safetensors; see\n"
		"haccel-ctl model init) on one prompt or a batch of prompts.\n"
		"\n"
		"Input:\n"
		"  -p, --prompt TEXT     a prompt; with a byte-level vocabulary (256 tokens)\n"
		"                        its bytes are its tokens\n"
		"  -t, --tokens IDS      a prompt as comma-separated token ids\n"
		"  -b, --batch FILE      one text prompt per line, all run together\n"
		"Generation:\n"
		"  -n, --max-new N       tokens to generate per prompt, 0..16777216 (default 32)\n"
		"      --temperature T   0 (the default) for greedy, at most 100\n"
		"      --top-p P         nucleus sampling mass, (0, 1] as a float (default 1)\n"
		"      --seed S          sampling seed, 0..2^64-1 (default 1; prompt i uses S + i)\n"
		"      --chunk N         prefill chunk size in tokens, 1..65536 (default 64)\n"
		"      --max-seq N       longest sequence (default: longest prompt + max-new + 1);\n"
		"                        a prompt stops generating when its sequence is full;\n"
		"                        at most the model's max_position_embeddings\n"
		"      --device DEV      cpu, cuda, or auto (default): cuda when there is a\n"
		"                        usable GPU and this build has GPU kernels, else cpu\n"
		"      --no-graphs       cuda: launch each step's kernels, no CUDA graphs\n"
		"      --allow-unpinned  load through staging memory that could not be\n"
		"                        pinned or registered (RLIMIT_MEMLOCK too low)\n"
		"                        instead of failing; slower, said on stderr\n"
		"Output:\n"
		"  -j, --json            one JSON object on stdout\n"
		"  -q, --quiet           no streamed text, only the summary\n"
		"  -h, --help            this help\n"
		"  -V, --version         haccel-run's and libhaccel's versions (--json: as JSON)\n"
		"\n"
		"Text output: control characters (newline and tab too) and bytes above 0x7e\n"
		"are printed as \\xNN, a backslash as \\\\, so each prompt's \"[i] text\" line is\n"
		"one line. A single prompt, streamed as it is generated (not with --json or\n"
		"--quiet), keeps its newlines and tabs as they are; so does JSON's text.\n"
		"\n"
		"Exit status: 0 success, 1 failure (the reason on stderr), 2 usage error.\n");
}

static int parse_tokens(const char *s, struct prompt *p)
{
	size_t cap = 16;
	char *end;

	if (tool_list_has_empty(s))
		return -EINVAL;
	p->tok = malloc(cap * sizeof(*p->tok));
	while (p->tok && *s) {
		long v;

		if (*s < '0' || *s > '9')
			return -EINVAL;
		errno = 0;
		v = strtol(s, &end, 10);
		if (errno || end == s || v < 0 || v > INT32_MAX || (*end && *end != ','))
			return -EINVAL;
		if (p->n == cap && !(p->tok = realloc(p->tok, (cap *= 2) * sizeof(*p->tok))))
			return -ENOMEM;
		p->tok[p->n++] = (int32_t)v;
		s = *end ? end + 1 : end;
	}
	return p->tok && p->n ? 0 : -EINVAL;
}

static int text_tokens(const char *s, size_t len, struct prompt *p)
{
	p->tok = malloc((len ? len : 1) * sizeof(*p->tok));
	if (!p->tok)
		return -ENOMEM;
	for (size_t i = 0; i < len; i++)
		p->tok[p->n++] = (unsigned char)s[i];
	return 0;
}

/* Printable text of byte tokens: controls and bytes above 0x7e escaped as
 * \xNN, a backslash as \\, so any output is safe on a terminal and in
 * JSON; with keep_nl, \n and \t are kept as they are (the streamed prompt,
 * JSON strings), else escaped too (one line per prompt). */
static char *bytes_text(const int32_t *t, uint32_t n, bool keep_nl)
{
	char *s = malloc((size_t)n * 4 + 1), *o = s;

	if (!s)
		return NULL;
	for (uint32_t i = 0; i < n; i++) {
		int c = t[i];
		if ((c >= 0x20 && c < 0x7f && c != '\\') || (keep_nl && (c == '\n' || c == '\t')))
			*o++ = (char)c;
		else if (c == '\\')
			o += sprintf(o, "\\\\");
		else
			o += sprintf(o, "\\x%02x", c & 0xff);
	}
	*o = '\0';
	return s;
}

static int parse(int argc, char **argv, struct ropts *o)
{
	enum { O_TEMP = 256, O_TOPP, O_SEED, O_CHUNK, O_MAXSEQ, O_DEVICE, O_NOGRAPHS, O_UNPINNED };
	static const struct option lo[] = {
		{ "prompt", required_argument, NULL, 'p' },
		{ "tokens", required_argument, NULL, 't' },
		{ "batch", required_argument, NULL, 'b' },
		{ "max-new", required_argument, NULL, 'n' },
		{ "temperature", required_argument, NULL, O_TEMP },
		{ "top-p", required_argument, NULL, O_TOPP },
		{ "seed", required_argument, NULL, O_SEED },
		{ "chunk", required_argument, NULL, O_CHUNK },
		{ "max-seq", required_argument, NULL, O_MAXSEQ },
		{ "device", required_argument, NULL, O_DEVICE },
		{ "no-graphs", no_argument, NULL, O_NOGRAPHS },
		{ "allow-unpinned", no_argument, NULL, O_UNPINNED },
		{ "json", no_argument, NULL, 'j' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *want = "";
	char *end;
	float f;
	int c, inputs = 0;

	*o = (struct ropts){ .max_new = 32, .seed = 1, .chunk = 64, .top_p = 1.0 };
	opterr = 0;
	while ((c = getopt_long(argc, argv, "p:t:b:n:jqhV", lo, NULL)) != -1) {
		switch (c) {
		case 'p': o->prompt = optarg; inputs++; break;
		case 't': o->tokens = optarg; inputs++; break;
		case 'b': o->batch = optarg; inputs++; break;
		case 'n':
			want = "0..16777216";
			if (tool_parse_u64(optarg, 0, 1u << 24, &o->max_new))
				goto bad;
			break;
		case O_TEMP:
			/* Checked as the float the sampler gets. */
			want = "0..100; 0 is greedy";
			o->temperature = strtod(optarg, &end);
			f = (float)o->temperature;
			if (end == optarg || *end || !isfinite(f) ||
			    !(f >= 0 && f <= MAX_TEMPERATURE))
				goto bad;
			o->temperature = f;
			break;
		case O_TOPP:
			want = "more than 0 as a float, at most 1";
			o->top_p = strtod(optarg, &end);
			f = (float)o->top_p;
			if (end == optarg || *end || !(f > 0 && f <= 1))
				goto bad;
			o->top_p = f;
			break;
		case O_SEED:
			want = "0..18446744073709551615";
			if (tool_parse_u64(optarg, 0, UINT64_MAX, &o->seed))
				goto bad;
			break;
		case O_CHUNK:
			want = "1..65536";
			if (tool_parse_u64(optarg, 1, 1u << 16, &o->chunk))
				goto bad;
			break;
		case O_MAXSEQ:
			want = "1..1073741824, at most the model's max_position_embeddings";
			if (tool_parse_u64(optarg, 1, 1u << 30, &o->max_seq))
				goto bad;
			break;
		case O_DEVICE:
			if (!strcmp(optarg, "cpu"))
				o->device = DEV_CPU;
			else if (!strcmp(optarg, "cuda"))
				o->device = DEV_CUDA;
			else if (!strcmp(optarg, "auto"))
				o->device = DEV_AUTO;
			else {
				tool_err("--device %s: give cpu, cuda or auto", optarg);
				return -EINVAL;
			}
			break;
		case O_NOGRAPHS: o->no_graphs = 1; break;
		case O_UNPINNED: o->allow_unpinned = 1; break;
		case 'j': o->json = 1; break;
		case 'q': o->quiet = 1; break;
		case 'h':
			usage(stdout);
			return 1;
		case 'V':
			o->version = 1;
			break;
		default:
			tool_option_error(NULL, argv, lo);
			usage(stderr);
			return -EINVAL;
		}
	}
	if (o->version)
		return 1;
	if (optind + 1 != argc) {
		if (optind + 1 < argc) {
			tool_err("unexpected argument '%s' (give exactly one MODEL_DIR)",
				 argv[optind + 1]);
			return -EINVAL;
		}
		tool_err("give exactly one MODEL_DIR (see haccel-run --help)");
		return -EINVAL;
	}
	if (inputs != 1) {
		tool_err("give exactly one of --prompt, --tokens and --batch");
		return -EINVAL;
	}
	o->dir = argv[optind];
	return 0;
bad:
	/* the option by its long name, however it was spelled */
	tool_err("bad value '%s' for --%s (%s)", optarg, tool_option_name(lo, c), want);
	return -EINVAL;
}

static int read_batch(const char *path, struct prompt **out, uint32_t *n)
{
	FILE *f = fopen(path, "re");
	char *line = NULL;
	size_t cap = 0, pcap = 8;
	ssize_t len;
	struct prompt *p = calloc(pcap, sizeof(*p));
	struct stat sb;

	/* A directory opens for reading: say what it is, not "no prompts". */
	if (f && !fstat(fileno(f), &sb) && S_ISDIR(sb.st_mode))
		errno = EISDIR;
	else if (f)
		errno = 0;
	if (!f || !p || errno) {
		tool_err("--batch %s: %s", path, strerror(errno ? errno : ENOMEM));
		if (f)
			fclose(f);
		free(p);
		return -1;
	}
	*n = 0;
	while ((len = getline(&line, &cap, f)) >= 0) {
		if (len && line[len - 1] == '\n')
			len--;
		if (!len)
			continue;
		if (*n == pcap)
			p = realloc(p, (pcap *= 2) * sizeof(*p));
		memset(&p[*n], 0, sizeof(*p));
		if (!p || text_tokens(line, (size_t)len, &p[(*n)++])) {
			for (uint32_t i = 0; p && i < *n; i++)
				free(p[i].tok);
			free(p);
			free(line);
			fclose(f);
			return -1;
		}
	}
	free(line);
	if (ferror(f)) {
		tool_err("--batch %s: %s", path, strerror(errno ? errno : EIO));
		for (uint32_t i = 0; i < *n; i++)
			free(p[i].tok);
		free(p);
		fclose(f);
		return -1;
	}
	fclose(f);
	if (!*n) {
		tool_err("--batch %s: no prompts (one per line)", path);
		free(p);
		return -1;
	}
	*out = p;
	return 0;
}

static int print_version(int json)
{
	json_t *v;

	if (!json) {
		printf("haccel-run %s (libhaccel %s)\n", PACKAGE_VERSION, haccel_version_string());
		return EXIT_OK;
	}
	v = json_object();
	json_object_set_new(v, "haccel_run", json_string(PACKAGE_VERSION));
	json_object_set_new(v, "libhaccel", json_string(haccel_version_string()));
	json_object_set_new(v, "libhaccel_num", json_integer(haccel_version()));
	json_object_set_new(v, "header_num", json_integer(HACCEL_VERSION));
	return tool_print_json(v) ? EXIT_FAIL : EXIT_OK;
}

/*
 * The model's max_position_embeddings from dir/config.json, or 0 when it
 * cannot be read there (the open then says why). The longest sequence a
 * model may be opened for: checked before the weights are read.
 */
static uint64_t model_positions(const char *dir)
{
	char path[4200];
	json_t *j, *v;
	uint64_t n = 0;

	snprintf(path, sizeof(path), "%s/config.json", dir);
	j = json_load_file(path, 0, NULL);
	v = json_object_get(j, "max_position_embeddings");
	if (json_is_integer(v) && json_integer_value(v) > 0)
		n = (uint64_t)json_integer_value(v);
	json_decref(j);
	return n;
}

/* A sequence longer than the model's positions: a usage error naming the
 * option that made it so. */
static void too_long(const struct ropts *o, uint64_t seq, uint32_t longest, uint64_t limit)
{
	if (o->max_seq)
		tool_err("--max-seq %llu: beyond the model's max_position_embeddings %llu",
			 (unsigned long long)seq, (unsigned long long)limit);
	else
		tool_err("--max-new %llu: a sequence of %llu tokens (longest prompt %u + %llu + 1) is beyond the model's max_position_embeddings %llu; lower --max-new, or set --max-seq %llu or less to stop there",
			 (unsigned long long)o->max_new, (unsigned long long)seq, longest,
			 (unsigned long long)o->max_new, (unsigned long long)limit,
			 (unsigned long long)limit);
}

static double now(void)
{
	return (double)tool_now_ns() / 1e9;
}

int main(int argc, char **argv)
{
	struct haccel_model_params mp;
	struct haccel_model_info info;
	struct haccel_model *m = NULL;
	struct haccel_ctx *ctx = NULL;
	struct haccel_step_item *items = NULL;
	struct prompt *p = NULL;
	struct ropts o;
	uint32_t n = 1, longest = 0;
	uint64_t pre_tok = 0, dec_tok = 0, peak_pages = 0;
	double pre_s = 0, dec_s = 0, t_open, ttft = -1, t_start = now();
	char err[1024];
	int ret, stream;

	tool_init("haccel-run");
	ret = parse(argc, argv, &o);
	if (ret > 0 && o.version)
		return print_version(o.json);
	if (ret)
		return ret > 0 ? EXIT_OK : EXIT_USAGE;
	if (o.batch) {
		if (read_batch(o.batch, &p, &n))
			return EXIT_FAIL;
	} else {
		p = calloc(1, sizeof(*p));
		if (!p)
			return EXIT_FAIL;
		ret = o.tokens ? parse_tokens(o.tokens, p) : text_tokens(o.prompt, strlen(o.prompt), p);
		if (ret || !p->n) {
			tool_err(o.tokens ? "--tokens: give comma-separated non-negative ids" :
					    "--prompt: the prompt is empty");
			ret = EXIT_USAGE;
			goto out;
		}
	}
	for (uint32_t i = 0; i < n; i++)
		if (p[i].n > longest)
			longest = p[i].n;
	if (o.max_seq && o.max_seq < longest) {
		tool_err("--max-seq %llu: the longest prompt has %u tokens",
			 (unsigned long long)o.max_seq, longest);
		ret = EXIT_USAGE;
		goto out;
	}

	/* Every sequence fits the model's positions, or it is a usage error,
	 * said before the weights are read. */
	uint64_t seq_tokens = o.max_seq ? o.max_seq : longest + o.max_new + 1;
	uint64_t positions = model_positions(o.dir);

	if (positions && seq_tokens > positions) {
		too_long(&o, seq_tokens, longest, positions);
		ret = EXIT_USAGE;
		goto out;
	}

	/* Every failure below is reported once, with haccel_last_error(). */
	if (tool_ctx_open(-1, &ctx)) {
		tool_err("cannot open libhaccel");
		ret = EXIT_FAIL;
		goto out;
	}
	haccel_model_params_init(&mp);
	if (o.device == DEV_AUTO) {
		struct haccel_gpu_info gi;

		o.device = !haccel_gpu_info(ctx, &gi) && gi.kernels ? DEV_CUDA : DEV_CPU;
	}
	mp.device = o.device == DEV_CUDA ? HACCEL_DEVICE_CUDA : HACCEL_DEVICE_CPU;
	if (o.no_graphs)
		mp.flags |= HACCEL_MODEL_NO_GRAPHS;
	if (o.allow_unpinned) {
		/* Asked for: the loader may stage through memory it could not
		 * pin or register (it says so at warn level). */
		mp.load_hostmem_flags |= HACCEL_HOSTMEM_ALLOW_UNPINNED;
		mp.load_flags |= HACCEL_LOAD_ALLOW_UNREGISTERED;
	}
	mp.max_seqs = n;
	mp.max_seq_tokens = (uint32_t)seq_tokens;
	mp.max_step_tokens = (uint32_t)(o.chunk * n);
	t_open = now();
	ret = haccel_model_open(ctx, o.dir, &mp, &m);
	t_open = now() - t_open;
	if (ret) {
		const char *beyond = "is beyond max_position_embeddings ";
		char *at;

		if (!haccel_last_error(ctx, err, sizeof(err)))
			snprintf(err, sizeof(err), "%s", haccel_strerror(ret));
		/* A config.json this tool could not read for the limit. */
		at = strstr(err, beyond);
		if (ret == -EINVAL && at) {
			too_long(&o, seq_tokens, longest, strtoull(at + strlen(beyond), NULL, 10));
			ret = EXIT_USAGE;
			goto out;
		}
		tool_unpinned_hint(err, sizeof(err), o.allow_unpinned, "loads");
		/* The directory once: most messages name it (or a file in it). */
		if (tool_mentions(err, o.dir))
			tool_err("%s", err);
		else
			tool_err("%s: %s", o.dir, err);
		ret = EXIT_FAIL;
		goto out;
	}
	haccel_model_info(m, &info);
	items = calloc(n, sizeof(*items));
	ret = items ? EXIT_OK : EXIT_FAIL;
	for (uint32_t i = 0; !ret && i < n; i++) {
		for (uint32_t t = 0; !ret && t < p[i].n; t++)
			if (p[i].tok[t] < 0 || (uint32_t)p[i].tok[t] >= info.vocab_size) {
				tool_err("prompt %u token %u = %d is outside the vocabulary (%u)", i, t,
					 p[i].tok[t], info.vocab_size);
				ret = EXIT_USAGE;
			}
		p[i].out = calloc(o.max_new + 1, sizeof(int32_t));
		p[i].logits = malloc(info.vocab_size * sizeof(float));
		p[i].rng = o.seed + i;
		if (!ret && (!p[i].out || !p[i].logits)) {
			tool_err("out of memory");
			ret = EXIT_FAIL;
		}
		if (!ret && (ret = haccel_model_seq_create(m, &p[i].seq)) != 0) {
			haccel_last_error(ctx, err, sizeof(err));
			tool_err("prompt %u: %s", i, err[0] ? err : haccel_strerror(ret));
			ret = EXIT_FAIL;
		}
	}
	if (ret)
		goto out;
	stream = n == 1 && !o.json && !o.quiet && info.vocab_size == 256;
	if (stream) {
		char *t = bytes_text(p[0].tok, p[0].n, true);
		fputs(t, stdout);
		tool_flush();
		free(t);
	}

	/*
	 * Prefill first, then decode: while any prompt still has prompt
	 * tokens, a step carries only prefill chunks (a prompt whose prefill
	 * is done waits, its first token already sampled from its last
	 * chunk's logits); then every step carries one decode token per
	 * unfinished prompt. So the prefill figures count exactly the prompt
	 * tokens and the time of the steps that ran them, the decode figures
	 * exactly the tokens fed back to generate the rest, and no step's
	 * time is split between the two. The output does not change: a
	 * token's result does not depend on how its steps were batched.
	 */
	for (;;) {
		uint32_t ni = 0, prefilling = 0, ntok = 0;

		for (uint32_t i = 0; i < n; i++)
			if (!p[i].stop && p[i].done < p[i].n)
				prefilling = 1;
		for (uint32_t i = 0; i < n; i++) {
			struct prompt *q = &p[i];
			struct haccel_step_item *it = &items[ni];

			if (q->stop || (prefilling && q->done == q->n))
				continue;
			it->seq = q->seq;
			if (q->done < q->n) {
				uint32_t c = q->n - q->done < o.chunk ? q->n - q->done : (uint32_t)o.chunk;
				it->tokens = q->tok + q->done;
				it->n_tokens = c;
				it->logits = q->done + c == q->n ? q->logits : NULL;
			} else {
				/* Feed the last generated token. */
				it->tokens = q->out + q->n_out - 1;
				it->n_tokens = 1;
				it->logits = q->logits;
			}
			ntok += it->n_tokens;
			ni++;
		}
		if (!ni)
			break;
		double t0 = now();
		ret = haccel_model_step(m, items, ni);
		double dt = now() - t0;
		if (ret) {
			haccel_last_error(ctx, err, sizeof(err));
			tool_err("step failed: %s", err[0] ? err : haccel_strerror(ret));
			ret = EXIT_FAIL;
			goto out;
		}
		if (prefilling) {
			pre_s += dt;
			pre_tok += ntok;
		} else {
			dec_s += dt;
			dec_tok += ntok;
		}
		if (info.kv) {
			struct haccel_kv_stats ks;
			haccel_kv_pool_stats(info.kv, &ks);
			if (ks.pages_used > peak_pages)
				peak_pages = ks.pages_used;
		}
		for (uint32_t k = 0, i = 0; i < n; i++) {
			struct prompt *q = &p[i];
			int32_t tok;

			/* Exactly the prompts put into items above, in order. */
			if (q->stop || (prefilling && q->done == q->n))
				continue;
			struct haccel_step_item *it = &items[k++];
			if (q->done < q->n)
				q->done += it->n_tokens;
			if (!it->logits)
				continue;
			if (q->n_out == o.max_new) {
				q->stop = "max_new";
				continue;
			}
			ret = haccel_model_sample(m, q->logits, (float)o.temperature, (float)o.top_p,
						  &q->rng, &tok);
			if (ret) {
				/* NaN or +inf logits, or all -inf: the model's
				 * output is broken, not something to print. */
				haccel_last_error(ctx, err, sizeof(err));
				tool_err("prompt %u: %s", i, err[0] ? err : haccel_strerror(ret));
				ret = EXIT_FAIL;
				goto out;
			}
			q->out[q->n_out++] = tok;
			if (ttft < 0)
				ttft = now() - t_start;
			if (stream) {
				char *t = bytes_text(&tok, 1, true);
				fputs(t, stdout);
				tool_flush();
				free(t);
			}
			/* Generating one more token feeds this one: the
			 * sequence must have room for it. */
			q->stop = tok == info.eos_token_id	       ? "eos" :
				  q->n_out == o.max_new		       ? "max_new" :
				  q->n + q->n_out > mp.max_seq_tokens ? "max_seq" :
									 NULL;
		}
	}
	if (stream) {
		fputc('\n', stdout);
		tool_flush();
	}

	struct haccel_state_stats ss = { 0 };
	struct haccel_kv_stats ks = { 0 };
	if (info.state)
		haccel_state_pool_stats(info.state, &ss);
	if (info.kv)
		haccel_kv_pool_stats(info.kv, &ks);
	double load_s = (double)info.load_ns / 1e9;
	const char *dev_name = o.device == DEV_CUDA ? "cuda" : "cpu";
	if (o.json) {
		json_t *r = json_object(), *arr = json_array();

		json_object_set_new(r, "model", json_string(o.dir));
		json_object_set_new(r, "device", json_string(dev_name));
		json_object_set_new(r, "graphs", json_boolean(o.device == DEV_CUDA && !o.no_graphs));
		json_object_set_new(r, "open_seconds", json_real(t_open));
		/* null when no token was generated (--max-new 0) */
		json_object_set_new(r, "first_token_seconds", ttft < 0 ? json_null() : json_real(ttft));
		for (uint32_t i = 0; i < n; i++) {
			json_t *e = json_object(), *toks = json_array();
			for (uint32_t t = 0; t < p[i].n_out; t++)
				json_array_append_new(toks, json_integer(p[i].out[t]));
			json_object_set_new(e, "prompt_tokens", json_integer(p[i].n));
			json_object_set_new(e, "tokens", toks);
			json_object_set_new(e, "stop", json_string(p[i].stop ? p[i].stop : "max_new"));
			if (info.vocab_size == 256) {
				char *t = bytes_text(p[i].out, p[i].n_out, true);
				json_object_set_new(e, "text", json_string(t ? t : ""));
				free(t);
			}
			json_array_append_new(arr, e);
		}
		json_object_set_new(r, "outputs", arr);
		json_object_set_new(r, "prefill", json_pack("{s:I,s:f,s:f}", "tokens", (json_int_t)pre_tok,
							     "seconds", pre_s, "tokens_per_s",
							     pre_s > 0 ? pre_tok / pre_s : 0.0));
		json_object_set_new(r, "decode", json_pack("{s:I,s:f,s:f}", "tokens", (json_int_t)dec_tok,
							    "seconds", dec_s, "tokens_per_s",
							    dec_s > 0 ? dec_tok / dec_s : 0.0));
		json_object_set_new(r, "kv_pages", json_pack("{s:I,s:I}", "total", (json_int_t)ks.pages_total,
							      "peak_used", (json_int_t)peak_pages));
		json_object_set_new(r, "state_slots", json_pack("{s:I,s:I}", "total", (json_int_t)ss.slots_total,
								 "used", (json_int_t)ss.slots_used));
		json_object_set_new(r, "load", json_pack("{s:I,s:f,s:f,s:s,s:b}", "bytes",
							  (json_int_t)info.weight_bytes, "seconds", load_s,
							  "bytes_per_s", load_s > 0 ? info.weight_bytes / load_s : 0.0,
							  "io_path", info.load_io_path == HACCEL_IO_URING ? "io_uring" : "pread",
							  "direct", info.load_direct));
		json_object_set_new(r, "params", json_integer((json_int_t)info.params));
		ret = tool_print_json(r) ? EXIT_FAIL : EXIT_OK;
	} else {
		char b[32];

		if (!stream && !o.quiet)
			for (uint32_t i = 0; i < n; i++) {
				printf("[%u] ", i);
				if (info.vocab_size == 256) {
					char *t = bytes_text(p[i].out, p[i].n_out, false);
					printf("%s\n", t ? t : "");
					free(t);
				} else {
					for (uint32_t t = 0; t < p[i].n_out; t++)
						printf("%s%d", t ? "," : "", p[i].out[t]);
					printf("\n");
				}
			}
		for (uint32_t i = 0; i < n; i++)
			if (p[i].stop && !strcmp(p[i].stop, "max_seq"))
				tool_err("prompt %u: stopped after %u generated token%s: its sequence is full (--max-seq %u)",
					 i, p[i].n_out, p[i].n_out == 1 ? "" : "s", mp.max_seq_tokens);
		char ft[64];

		if (ttft < 0)
			snprintf(ft, sizeof(ft), "no token generated");
		else
			snprintf(ft, sizeof(ft), "first token after %.3f s", ttft);
		fprintf(stderr,
			"haccel-run: %u prompt(s) on the %s; %llu parameters; %s\n"
			"  prefill  %6llu tokens in %.3f s: %10.1f tokens/s\n"
			"  decode   %6llu tokens in %.3f s: %10.1f tokens/s\n"
			"  kv pages %llu used at peak of %llu; state slots %llu of %llu\n"
			"  weights  %s in %.3f s: %.2f GB/s (%s, %s); model opened in %.3f s\n",
			n, dev_name, (unsigned long long)info.params, ft,
			(unsigned long long)pre_tok, pre_s, pre_s > 0 ? pre_tok / pre_s : 0.0,
			(unsigned long long)dec_tok, dec_s, dec_s > 0 ? dec_tok / dec_s : 0.0,
			(unsigned long long)peak_pages, (unsigned long long)ks.pages_total,
			(unsigned long long)ss.slots_used, (unsigned long long)ss.slots_total,
			tool_bytes(info.weight_bytes, b, sizeof(b)), load_s,
			load_s > 0 ? info.weight_bytes / load_s / 1e9 : 0.0,
			info.load_io_path == HACCEL_IO_URING ? "io_uring" : "pread pool",
			info.load_direct ? "O_DIRECT" : "buffered", t_open);
		ret = EXIT_OK;
	}
out:
	for (uint32_t i = 0; i < n; i++) {
		free(p[i].tok);
		free(p[i].out);
		free(p[i].logits);
	}
	free(p);
	free(items);
	haccel_model_close(m);
	haccel_close(ctx);
	return ret;
}
