// SPDX-License-Identifier: MIT
/* haccel-ctl model init: a preset's config.json and seeded random weights. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common.h"
#include "haccel.h"
#include "model.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: haccel-ctl model init --preset NAME --out DIR [--seed N] [--force] [--json]\n"
		"\n"
		"Write DIR/config.json and DIR/model.safetensors for a preset, the weights\n"
		"drawn from a seeded generator (the same seed gives the same bytes) and\n"
		"scaled so activations stay in range through every layer, with stored\n"
		"checksums. Shape-only presets (for kernel benchmarks) get config.json only.\n"
		"\n"
		"Presets:");
	for (uint32_t i = 0; haccel_model_preset_name(i); i++)
		fprintf(f, " %s", haccel_model_preset_name(i));
	fprintf(f, "\n\n"
		"Options:\n"
		"  -p, --preset NAME   the preset\n"
		"  -o, --out DIR       output directory (created, with its parents, if missing)\n"
		"  -s, --seed N        generator seed, 0..2^63-1 (default 1)\n"
		"  -f, --force         overwrite a model already in DIR\n"
		"  -j, --json          JSON on stdout\n"
		"  -h, --help          this help\n"
		"\n"
		"Exit status: 0 success, 1 failure (the reason on stderr), 2 usage error.\n");
}

int model_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "preset", required_argument, NULL, 'p' },
		{ "out", required_argument, NULL, 'o' },
		{ "seed", required_argument, NULL, 's' },
		{ "force", no_argument, NULL, 'f' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *preset = NULL, *out = NULL, *sub;
	uint64_t seed = 1;
	int json = 0, force = 0, help = 0, c, ret, rc;
	struct haccel_ctx *ctx;
	struct timespec t0, t1;
	char err[1024], path[4200];

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "p:o:s:fjh", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			preset = optarg;
			break;
		case 'o':
			out = optarg;
			break;
		case 's':
			/* JSON output carries it as an integer: at most 2^63 - 1. */
			if (tool_parse_u64(optarg, 0, INT64_MAX, &seed)) {
				tool_err("bad value '%s' for --seed (0..9223372036854775807)", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'f':
			force = 1;
			break;
		case 'j':
			json = 1;
			break;
		case 'h':
			help = 1;
			break;
		default:
			tool_option_error("model", argv, opts);
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	sub = tool_subcommand(argc, argv, "model", "init", help, usage, &rc);
	if (!sub)
		return rc;
	if (strcmp(sub, "init")) {
		tool_err("model: unknown subcommand '%s' (init)", sub);
		return EXIT_USAGE;
	}
	if (optind < argc) {
		tool_err("unexpected argument '%s' (see haccel-ctl model --help)", argv[optind]);
		return EXIT_USAGE;
	}
	if (!preset || !out) {
		tool_err("model init: --preset and --out are required");
		return EXIT_USAGE;
	}
	if (tool_ctx_open(-1, &ctx)) {
		tool_err("cannot open libhaccel");
		return EXIT_FAIL;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ret = haccel_model_init(ctx, preset, out, seed, force ? HACCEL_MODEL_INIT_FORCE : 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (ret) {
		haccel_last_error(ctx, err, sizeof(err));
		if (!err[0])
			snprintf(err, sizeof(err), "model init: %s: %s", out, haccel_strerror(ret));
		if (ret == -EEXIST) {
			/* The library's advice names its flag; this tool's is --force. */
			char *advice = strstr(err, " (HACCEL_MODEL_INIT_FORCE");

			if (advice)
				*advice = '\0';
			if (!strstr(err, "--force")) {
				size_t n = strlen(err);

				snprintf(err + n, sizeof(err) - n, " (--force overwrites it)");
			}
		}
		tool_err("%s", err);
		haccel_close(ctx);
		/* An unknown preset is a bad argument, not a failure. */
		return strstr(err, "no preset") ? EXIT_USAGE : EXIT_FAIL;
	}
	haccel_close(ctx);
	struct stat sb;
	snprintf(path, sizeof(path), "%s/model.safetensors", out);
	long long wbytes = stat(path, &sb) == 0 ? (long long)sb.st_size : 0;
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (json) {
		json_t *o = json_object();
		json_object_set_new(o, "preset", json_string(preset));
		json_object_set_new(o, "dir", json_string(out));
		json_object_set_new(o, "seed", json_integer((json_int_t)seed));
		json_object_set_new(o, "weights_bytes", json_integer(wbytes));
		json_object_set_new(o, "shape_only", json_boolean(wbytes == 0));
		json_object_set_new(o, "seconds", json_real(secs));
		return tool_print_json(o) ? EXIT_FAIL : EXIT_OK;
	}
	char b[32];
	if (wbytes)
		printf("%s: preset %s, seed %llu: config.json and model.safetensors (%s) in %.2f s\n",
		       out, preset, (unsigned long long)seed, tool_bytes((uint64_t)wbytes, b, sizeof(b)), secs);
	else
		printf("%s: preset %s is shape-only: config.json written, no weights\n", out, preset);
	return EXIT_OK;
}
