// SPDX-License-Identifier: MIT
/* haccel-ctl: administer a haccel node (version, doctor, weights, model, driver). */
#include "config.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "doctor.h"
#include "driver.h"
#include "haccel.h"
#include "model.h"
#include "weights.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: haccel-ctl [--json] COMMAND [OPTIONS]\n"
		"\n"
		"Commands:\n"
		"  version     print the versions of haccel-ctl and of the loaded libhaccel\n"
		"  doctor      probe what this node supports: io_uring, RLIMIT_MEMLOCK,\n"
		"              NUMA nodes, huge pages, CUDA driver and GPUs, haccel.ko\n"
		"  weights     inspect or verify a safetensors checkpoint\n"
		"              (haccel-ctl weights --help)\n"
		"  model       write a preset's config and seeded random weights\n"
		"              (haccel-ctl model --help)\n"
		"  driver      haccel.ko: status, quotas, clients\n"
		"              (haccel-ctl driver --help)\n"
		"  help        print this help\n"
		"\n"
		"Options:\n"
		"  -j, --json     machine-readable output on stdout\n"
		"  -h, --help     print this help (also: haccel-ctl COMMAND --help)\n"
		"  -V, --version  same as the version command\n"
		"\n"
		"Environment:\n"
		"  HACCEL_SYSFS_ROOT  read sysfs (and debugfs, kernel/debug) under this\n"
		"                     directory instead of /sys\n"
		"  HACCEL_HOSTMEM_PROVIDER  auto, driver or user: who pins host memory\n"
		"\n"
		"Exit status: 0 success, 1 failure, 2 usage error. See haccel-ctl(1).\n");
}

static int cmd_version(int json)
{
	if (json) {
		json_t *o = json_object();
		json_object_set_new(o, "haccel_ctl", json_string(PACKAGE_VERSION));
		json_object_set_new(o, "libhaccel", json_string(haccel_version_string()));
		json_object_set_new(o, "libhaccel_num", json_integer(haccel_version()));
		json_object_set_new(o, "header_num", json_integer(HACCEL_VERSION));
		return tool_print_json(o) ? EXIT_FAIL : EXIT_OK;
	}
	printf("haccel-ctl %s\nlibhaccel %s\n", PACKAGE_VERSION, haccel_version_string());
	return EXIT_OK;
}

static int cmd_doctor(int json)
{
	json_t *r = doctor_probe();

	if (!r) {
		tool_err("out of memory");
		return EXIT_FAIL;
	}
	if (json)
		return tool_print_json(r) ? EXIT_FAIL : EXIT_OK;
	doctor_print(r);
	json_decref(r);
	return EXIT_OK;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *cmd = NULL;
	int json = 0, help = 0, c;

	tool_init("haccel-ctl");
	/* weights has its own arguments: hand it the command line whole. The
	 * global options take no argument, so the first word that is not an
	 * option is the command. */
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
		if (argv[i][0] == '-')
			continue;
		if (!strcmp(argv[i], "weights"))
			return weights_main(argc, argv);
		if (!strcmp(argv[i], "model"))
			return model_main(argc, argv);
		if (!strcmp(argv[i], "driver"))
			return driver_main(argc, argv);
		break;
	}
	/* Options may come before or after the command. */
	opterr = 0;
	while ((c = getopt_long(argc, argv, "jhV", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = 1;
			break;
		case 'h':
			help = 1;
			break;
		case 'V':
			cmd = "version";
			break;
		default:
			tool_option_error(NULL, argv, opts);
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		if (cmd) {
			tool_err("--version takes no command");
			return EXIT_USAGE;
		}
		cmd = argv[optind++];
	}
	if (optind < argc) {
		tool_err("unexpected argument '%s' (see haccel-ctl --help)", argv[optind]);
		return EXIT_USAGE;
	}
	if (help || (cmd && !strcmp(cmd, "help"))) {
		usage(stdout);
		return EXIT_OK;
	}
	if (!cmd) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(cmd, "version"))
		return cmd_version(json);
	if (!strcmp(cmd, "doctor"))
		return cmd_doctor(json);
	tool_err("unknown command '%s' (see haccel-ctl --help)", cmd);
	return EXIT_USAGE;
}
