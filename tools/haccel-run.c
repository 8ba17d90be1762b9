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
#include <stdlib.h>
#include <string.h>
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
	int json, quiet, device, no_graphs, allow_unpinned;
};

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
		"  -n, --max-new N       tokens to generate per prompt (default 32)\n"
		"      --temperature T   0 for greedy (default 0)\n"
		"      --top-p P         nucleus sampling mass, (0, 1] (default 1)\n"
		"      --seed S          sampling seed (default 1; prompt i uses S + i)\n"
		"      --chunk N         prefill chunk size in tokens (default 64)\n"
		"      --max-seq N       longest sequence (default: longest prompt + max-new + 1);\n"
		"                        a prompt stops generating when its sequence is full\n"
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
		"\n"
		"Exit status: 0 success, 1 failure (the reason on stderr), 2 usage error.\n");
}

static int parse_tokens(const char *s, struct prompt *p)
{
	size_t cap = 16;
	char *end;

	p->tok = malloc(cap * sizeof(*p->tok));
	while (p->tok && *s) {
		long v = strtol(s, &end, 10);
		if (end == s || v < 0 || v > INT32_MAX || (*end && *end != ','))
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

/* Printable text of byte tokens: \n and \t kept, other controls and bytes
 * above 0x7e escaped, so any output is safe on a terminal and in JSON. */
static char *bytes_text(const int32_t *t, uint32_t n)
{
	char *s = malloc((size_t)n * 4 + 1), *o = s;

	if (!s)
		return NULL;
	for (uint32_t i = 0; i < n; i++) {
		int c = t[i];
		if ((c >= 0x20 && c < 0x7f && c != '\\') || c == '\n' || c == '\t')
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
		{ NULL, 0, NULL, 0 },
	};
	char *end;
	int c, inputs = 0;

	*o = (struct ropts){ .max_new = 32, .seed = 1, .chunk = 64, .top_p = 1.0 };
	while ((c = getopt_long(argc, argv, "p:t:b:n:jqh", lo, NULL)) != -1) {
		switch (c) {
		case 'p': o->prompt = optarg; inputs++; break;
		case 't': o->tokens = optarg; inputs++; break;
		case 'b': o->batch = optarg; inputs++; break;
		case 'n':
			if (tool_parse_u64(optarg, 0, 1u << 24, &o->max_new))
				goto bad;
			break;
		case O_TEMP:
			o->temperature = strtod(optarg, &end);
			if (*end || !(o->temperature >= 0 && o->temperature <= 100))
				goto bad;
			break;
		case O_TOPP:
			o->top_p = strtod(optarg, &end);
			if (*end || !(o->top_p > 0 && o->top_p <= 1))
				goto bad;
			break;
		case O_SEED:
			if (tool_parse_u64(optarg, 0, UINT64_MAX, &o->seed))
				goto bad;
			break;
		case O_CHUNK:
			if (tool_parse_u64(optarg, 1, 1u << 16, &o->chunk))
				goto bad;
			break;
		case O_MAXSEQ:
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
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind + 1 != argc) {
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
	for (const struct option *l = lo; l->name; l++)
		if (l->val == c) {
			tool_err("bad value '%s' for --%s", optarg, l->name);
			return -EINVAL;
		}
	tool_err("bad value '%s'", optarg);
	return -EINVAL;
}

static int read_batch(const char *path, struct prompt **out, uint32_t *n)
{
	FILE *f = fopen(path, "re");
	char *line = NULL;
	size_t cap = 0, pcap = 8;
	ssize_t len;
	struct prompt *p = calloc(pcap, sizeof(*p));

	if (!f || !p) {
		tool_err("--batch %s: %s", path, strerror(errno));
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
	fclose(f);
	if (!*n) {
		tool_err("--batch %s: no prompts (one per line)", path);
		free(p);
		return -1;
	}
	*out = p;
	return 0;
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

	tool_name = "haccel-run";
	ret = parse(argc, argv, &o);
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
	mp.max_seq_tokens = (uint32_t)(o.max_seq ? o.max_seq : longest + o.max_new + 1);
	mp.max_step_tokens = (uint32_t)(o.chunk * n);
	t_open = now();
	ret = haccel_model_open(ctx, o.dir, &mp, &m);
	t_open = now() - t_open;
	if (ret) {
		haccel_last_error(ctx, err, sizeof(err));
		tool_err("%s: %s%s", o.dir, err[0] ? err : haccel_strerror(ret),
			 !o.allow_unpinned && (strstr(err, "staging") || strstr(err, "registration")) ?
				 " (--allow-unpinned loads through unpinned, unregistered staging instead)" :
				 "");
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
		char *t = bytes_text(p[0].tok, p[0].n);
		fputs(t, stdout);
		fflush(stdout);
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
				char *t = bytes_text(&tok, 1);
				fputs(t, stdout);
				fflush(stdout);
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
		fflush(stdout);
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
				char *t = bytes_text(p[i].out, p[i].n_out);
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
					char *t = bytes_text(p[i].out, p[i].n_out);
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
