// SPDX-License-Identifier: MIT
/* haccel-ctl and haccel-bench: help, usage errors, option errors, write errors on stdout, JSON output, doctor on a fixture sysfs tree, driver status/quota/clients without haccel.ko and on fixture trees, bench pools --quick and its options, bench stream --create (refusals, temporary file, signals, progress), --device without a GPU, bench decode --trace without libcupti, bench kernels --only and its indexer shape options. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "haccel.h"
#include "ktap.h"
#include "test-util.h"

#define run tool_run

static json_t *parse(const struct tool_result *r)
{
	json_error_t e;
	json_t *j = json_loads(r->out, 0, &e);

	if (!j)
		ktap_fail_at(__FILE__, __LINE__, "output is not JSON (%s at line %d): %.200s",
			     e.text, e.line, r->out);
	return j;
}

static struct tool_result r;

static void t_ctl_help_and_usage(void)
{
	run(&r, "HACCEL_CTL", "--help", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	KTAP_EXPECT(strstr(r.out, "Usage: haccel-ctl") != NULL);
	KTAP_EXPECT(strstr(r.out, "doctor") != NULL);
	run(&r, "HACCEL_CTL", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "Usage: haccel-ctl") != NULL);
	run(&r, "HACCEL_CTL", "frobnicate", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "unknown command 'frobnicate'") != NULL);
	run(&r, "HACCEL_CTL", "--bogus", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	run(&r, "HACCEL_CTL", "version", "extra", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "unexpected argument 'extra'") != NULL);
	/* the tool's own words, prefixed with its name (and the command's) */
	run(&r, "HACCEL_CTL", "--bogus", NULL);
	KTAP_EXPECT(strstr(r.err, "haccel-ctl: unknown option '--bogus'") != NULL);
	KTAP_EXPECT(strstr(r.err, "unrecognized") == NULL);
	run(&r, "HACCEL_CTL", "weights", "inspect", "x", "--bogus", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "haccel-ctl: weights: unknown option '--bogus'") != NULL);
	run(&r, "HACCEL_CTL", "weights", "inspect", "x", "--limit", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "haccel-ctl: weights: option '--limit' needs a value") != NULL);
	run(&r, "HACCEL_CTL", "model", "init", "-x", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "haccel-ctl: model: unknown option '-x'") != NULL);
	run(&r, "HACCEL_CTL", "driver", "status", "--json=yes", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "haccel-ctl: driver: option '--json' takes no value") != NULL);
	KTAP_EXPECT(strstr(r.err, "unrecognized") == NULL && strstr(r.err, "requires") == NULL &&
		    strstr(r.err, "doesn't allow") == NULL);
}

/* A write error on stdout (here /dev/full) fails the command, saying so. */
static void expect_write_error(const char *tool)
{
	char want[128];

	snprintf(want, sizeof(want), "%s: write error on standard output: %s", tool,
		 strerror(ENOSPC));
	if (r.status != 1 || !strstr(r.err, want))
		ktap_fail_at(__FILE__, __LINE__, "exit %d, want 1 with '%s' (%s)", r.status, want,
			     r.err);
}

static void t_stdout_write_errors(void)
{
	if (access("/dev/full", W_OK))
		ktap_skip("no /dev/full here");
	tool_run_out(&r, "/dev/full", "HACCEL_CTL", "version", "--json", NULL);
	expect_write_error("haccel-ctl");
	tool_run_out(&r, "/dev/full", "HACCEL_CTL", "version", NULL);
	expect_write_error("haccel-ctl");
	tool_run_out(&r, "/dev/full", "HACCEL_CTL", "doctor", NULL);
	expect_write_error("haccel-ctl");
	tool_run_out(&r, "/dev/full", "HACCEL_CTL", "--help", NULL);
	expect_write_error("haccel-ctl");
	tool_run_out(&r, "/dev/full", "HACCEL_BENCH", "--version", "--json", NULL);
	expect_write_error("haccel-bench");
	tool_run_out(&r, "/dev/full", "HACCEL_BENCH", "--json", "pools", "--quick", "--rounds", "1",
		     "--seconds", "0.01", NULL);
	expect_write_error("haccel-bench");
	tool_run_out(&r, "/dev/full", "HACCEL_BENCH", "pools", "--quick", "--rounds", "1",
		     "--seconds", "0.01", NULL);
	expect_write_error("haccel-bench");
	tool_run_out(&r, "/dev/full", "HACCEL_RUN", "--version", NULL);
	expect_write_error("haccel-run");
	/* more than stdio's buffer (12 KB of tensors for the tiny preset,
	 * 34 KB in JSON): the write fails in a flush stdio makes itself, in
	 * the middle of the output, and its cause is still the one named
	 * (on the GPU machine a flush the tool did not make lost it to EIO) */
	{
		char dir[] = "./haccel-full-XXXXXX", path[600];

		KTAP_ASSERT(mkdtemp(dir) != NULL);
		snprintf(path, sizeof(path), "%s/m", dir);
		run(&r, "HACCEL_CTL", "model", "init", "--preset", "tiny", "--out", path, NULL);
		KTAP_EXPECT_EQ(r.status, 0);
		tool_run_out(&r, "/dev/full", "HACCEL_CTL", "weights", "inspect", path, NULL);
		expect_write_error("haccel-ctl");
		tool_run_out(&r, "/dev/full", "HACCEL_CTL", "--json", "weights", "inspect", path,
			     NULL);
		expect_write_error("haccel-ctl");
		KTAP_EXPECT_EQ(test_rmtree(dir), 0);
	}
	/* a usage error stays one when nothing was written */
	tool_run_out(&r, "/dev/full", "HACCEL_CTL", "frobnicate", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "write error") == NULL);
}

/*
 * Read fd into line (len bytes, kept a string) until it holds a newline,
 * the fd ends, or nothing comes for timeout_ms.
 */
static void read_first_line(int fd, char *line, size_t len, int timeout_ms)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	size_t got = strlen(line);

	while (!strchr(line, '\n') && got < len - 1 && poll(&pf, 1, timeout_ms) == 1) {
		ssize_t n = read(fd, line + got, len - 1 - got);

		if (n <= 0)
			break;
		got += (size_t)n;
		line[got] = '\0';
	}
}

/*
 * The tools keep the buffering stdout was given before main: under
 * stdbuf -oL, haccel-bench pools' first line (printed before it measures
 * anything: then several benchmarks of at least --seconds each) reaches
 * a pipe at least 0.4 s before the pipe's end. In blocks, the whole
 * output came at once at exit.
 */
static void t_stdout_buffering_kept(void)
{
	const char *tool = getenv("HACCEL_BENCH"), *asan = getenv("ASAN_OPTIONS");
	char line[4096] = "", opts[512];
	struct pollfd pf;
	struct timespec t0, t1;
	int pout[2], st;
	double gap;
	pid_t pid;

	if (!tool)
		ktap_skip("HACCEL_BENCH not set: run through make check");
	if (access("/usr/bin/stdbuf", X_OK))
		ktap_skip("no /usr/bin/stdbuf here");
	/* (stdbuf preloads its library; a sanitizer build's runtime must
	 * then not insist on coming first) */
	snprintf(opts, sizeof(opts), "%s%sverify_asan_link_order=0", asan ? asan : "",
		 asan && *asan ? ":" : "");
	KTAP_ASSERT(pipe(pout) == 0);
	pid = fork();
	KTAP_ASSERT(pid >= 0);
	if (pid == 0) {
		dup2(pout[1], STDOUT_FILENO);
		close(pout[0]);
		setenv("ASAN_OPTIONS", opts, 1);
		execl("/usr/bin/stdbuf", "stdbuf", "-oL", tool, "pools", "--quick", "--rounds", "1",
		      "--seconds", "0.5", (char *)NULL);
		_exit(127);
	}
	close(pout[1]);
	read_first_line(pout[0], line, sizeof(line), 30000);
	pf.fd = pout[0];
	pf.events = POLLIN;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	/* the rest, to its end */
	while (poll(&pf, 1, 60000) == 1) {
		char buf[4096];

		if (read(pout[0], buf, sizeof(buf)) <= 0)
			break;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	close(pout[0]);
	KTAP_ASSERT_EQ(waitpid(pid, &st, 0), pid);
	gap = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	ktap_diag("first line %.2f s before the end: %s", gap, line);
	KTAP_EXPECT(strchr(line, '\n') != NULL);
	KTAP_EXPECT(gap >= 0.4);
	KTAP_EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void t_ctl_version(void)
{
	json_t *j;

	run(&r, "HACCEL_CTL", "version", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	KTAP_EXPECT(strstr(r.out, haccel_version_string()) != NULL);
	run(&r, "HACCEL_CTL", "version", "--json", NULL);
	KTAP_ASSERT_EQ(r.status, 0);
	j = parse(&r);
	KTAP_ASSERT(j);
	KTAP_EXPECT(!strcmp(json_string_value(json_object_get(j, "libhaccel")),
			    haccel_version_string()));
	KTAP_EXPECT_EQ(json_integer_value(json_object_get(j, "libhaccel_num")), HACCEL_VERSION);
	json_decref(j);
	run(&r, "HACCEL_CTL", "--version", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
}

static void t_ctl_doctor_this_node(void)
{
	json_t *j, *s;

	run(&r, "HACCEL_CTL", "doctor", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	KTAP_EXPECT(strstr(r.out, "io_uring") && strstr(r.out, "memlock") &&
		    strstr(r.out, "cuda") && strstr(r.out, "driver"));
	run(&r, "HACCEL_CTL", "--json", "doctor", NULL);
	KTAP_ASSERT_EQ(r.status, 0);
	j = parse(&r);
	KTAP_ASSERT(j);
	s = json_object_get(j, "io_uring");
	KTAP_EXPECT(json_is_boolean(json_object_get(s, "allowed")));
	KTAP_EXPECT(json_is_string(json_object_get(s, "reason")));
	s = json_object_get(j, "memlock");
	KTAP_EXPECT(json_is_boolean(json_object_get(s, "unlimited")));
	KTAP_EXPECT(json_is_array(json_object_get(json_object_get(j, "numa"), "nodes")));
	KTAP_EXPECT(json_is_array(json_object_get(json_object_get(j, "hugepages"), "pools")));
	s = json_object_get(j, "cuda");
	KTAP_EXPECT(json_is_boolean(json_object_get(s, "driver")));
	KTAP_EXPECT(json_is_array(json_object_get(s, "gpus")));
	KTAP_EXPECT(json_is_boolean(json_object_get(json_object_get(j, "driver"), "loaded")));
	json_decref(j);
}

static void t_ctl_doctor_fixture_sysfs(void)
{
	char root[] = "/tmp/haccel-sysfs-XXXXXX";
	json_t *j, *nodes, *n1, *d;

	KTAP_ASSERT(mkdtemp(root) != NULL);
	test_put(root, "devices/system/node/node0/cpulist", "0-3\n");
	test_put(root, "devices/system/node/node0/meminfo",
	    "Node 0 MemTotal:       1000 kB\nNode 0 MemFree:         600 kB\n");
	test_put(root, "devices/system/node/node1/cpulist", "4-7\n");
	test_put(root, "devices/system/node/node1/meminfo",
	    "Node 1 MemTotal:       2000 kB\nNode 1 MemFree:        1500 kB\n");
	test_put(root, "devices/system/node/online", "0-1\n");
	test_put(root, "kernel/mm/transparent_hugepage/enabled", "always [madvise] never\n");
	test_put(root, "kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "16\n");
	test_put(root, "kernel/mm/hugepages/hugepages-2048kB/free_hugepages", "12\n");
	test_sysfs_haccel(root, 129);

	setenv("HACCEL_SYSFS_ROOT", root, 1);
	run(&r, "HACCEL_CTL", "doctor", "--json", NULL);
	KTAP_ASSERT_EQ(r.status, 0);
	j = parse(&r);
	KTAP_ASSERT(j);
	nodes = json_object_get(json_object_get(j, "numa"), "nodes");
	KTAP_ASSERT_EQ(json_array_size(nodes), 2);
	n1 = json_array_get(nodes, 1);
	KTAP_EXPECT_EQ(json_integer_value(json_object_get(n1, "id")), 1);
	KTAP_EXPECT(!strcmp(json_string_value(json_object_get(n1, "cpus")), "4-7"));
	KTAP_EXPECT_EQ(json_integer_value(json_object_get(n1, "mem_total")), 2000 * 1024);
	KTAP_EXPECT_EQ(json_integer_value(json_object_get(n1, "mem_free")), 1500 * 1024);
	d = json_object_get(j, "hugepages");
	KTAP_EXPECT(!strcmp(json_string_value(json_object_get(d, "thp")), "madvise"));
	KTAP_EXPECT_EQ(json_integer_value(json_object_get(json_array_get(json_object_get(d, "pools"), 0), "free")), 12);
	d = json_object_get(j, "driver");
	KTAP_EXPECT(json_is_true(json_object_get(d, "loaded")));
	KTAP_EXPECT(!strcmp(json_string_value(json_object_get(d, "render_node")), "/dev/dri/renderD129"));
	json_decref(j);

	run(&r, "HACCEL_CTL", "doctor", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	KTAP_EXPECT(strstr(r.out, "node 1: CPUs 4-7, 2.0 MiB total, 1.5 MiB free") != NULL);
	KTAP_EXPECT(strstr(r.out, "render node /dev/dri/renderD129") != NULL);
	unsetenv("HACCEL_SYSFS_ROOT");
	KTAP_EXPECT_EQ(test_rmtree(root), 0);
}

/* A module installed for this kernel but not loaded: doctor says where. */
static void t_ctl_doctor_driver_installed(void)
{
	char sys[] = "/tmp/haccel-sysfs-XXXXXX", mods[] = "/tmp/haccel-mods-XXXXXX", rel[400];
	struct utsname u;
	json_t *j, *d;

	KTAP_ASSERT(mkdtemp(sys) && mkdtemp(mods) && uname(&u) == 0);
	test_put(sys, "devices/system/node/node0/cpulist", "0\n");
	snprintf(rel, sizeof(rel), "%s/modules.dep", u.release);
	test_put(mods, rel, "kernel/drivers/gpu/drm/vgem/vgem.ko.xz: kernel/drivers/gpu/drm/drm.ko.xz\n"
			    "updates/dkms/haccel.ko.xz: kernel/drivers/gpu/drm/drm.ko.xz\n");
	setenv("HACCEL_SYSFS_ROOT", sys, 1);
	setenv("HACCEL_MODULES_ROOT", mods, 1);
	run(&r, "HACCEL_CTL", "doctor", "--json", NULL);
	KTAP_ASSERT_EQ(r.status, 0);
	j = parse(&r);
	KTAP_ASSERT(j);
	d = json_object_get(j, "driver");
	KTAP_EXPECT(json_is_false(json_object_get(d, "loaded")));
	KTAP_EXPECT(json_is_string(json_object_get(d, "installed")) &&
		    !strcmp(json_string_value(json_object_get(d, "installed")),
			    "updates/dkms/haccel.ko.xz"));
	json_decref(j);
	run(&r, "HACCEL_CTL", "doctor", NULL);
	KTAP_EXPECT(strstr(r.out, "installed (updates/dkms/haccel.ko.xz) but not loaded") != NULL);
	/* Not in modules.dep: not installed. */
	test_put(mods, rel, "kernel/drivers/gpu/drm/vgem/vgem.ko.xz:\n");
	run(&r, "HACCEL_CTL", "doctor", "--json", NULL);
	j = parse(&r);
	KTAP_ASSERT(j);
	KTAP_EXPECT(json_is_null(json_object_get(json_object_get(j, "driver"), "installed")));
	json_decref(j);
	unsetenv("HACCEL_SYSFS_ROOT");
	unsetenv("HACCEL_MODULES_ROOT");
	KTAP_EXPECT_EQ(test_rmtree(sys), 0);
	KTAP_EXPECT_EQ(test_rmtree(mods), 0);
}

/* These cases are about a machine without haccel.ko (the VM has it). */
static void need_no_driver(void)
{
	struct stat st;

	if (stat("/sys/module/haccel", &st) == 0)
		ktap_skip("haccel.ko is loaded here: the VM tests cover it");
}

static void t_ctl_driver_usage(void)
{
	static const char *const bad[][8] = {
		{ "driver", NULL },
		{ "driver", "frob", NULL },
		{ "driver", "status", "extra", NULL },
		{ "driver", "status", "--client", "1G", NULL },
		{ "driver", "clients", "x", NULL },
		{ "driver", "quota", NULL },
		{ "driver", "quota", "frob", NULL },
		{ "driver", "quota", "get", "x", NULL },
		{ "driver", "quota", "get", "-1", NULL },
		{ "driver", "quota", "get", "00", NULL },
		{ "driver", "quota", "get", "0", "1", NULL },
		{ "driver", "quota", "get", "0", "--client", "1M", NULL },
		{ "driver", "quota", "set", NULL },
		{ "driver", "quota", "set", "0", NULL },
		{ "driver", "quota", "set", "x", "1G", NULL },
		{ "driver", "quota", "set", "0", "12Q", NULL },
		{ "driver", "quota", "set", "0", "-5", NULL },
		{ "driver", "quota", "set", "0", "1G", "2G", NULL },
		{ "driver", "quota", "set", "0", "1G", "--client", "many", NULL },
		{ "driver", "--bogus", NULL },
	};

	run(&r, "HACCEL_CTL", "driver", "--help", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	KTAP_EXPECT(strstr(r.out, "haccel-ctl driver quota set NODE|all BYTES|unlimited") != NULL);
	KTAP_EXPECT(strstr(r.out, "clients") && strstr(r.out, "status"));
	run(&r, "HACCEL_CTL", "driver", "status", "--help", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	KTAP_EXPECT(strstr(r.out, "Usage: haccel-ctl driver status") != NULL);
	run(&r, "HACCEL_CTL", "--help", NULL);
	KTAP_EXPECT(strstr(r.out, "driver      haccel.ko") != NULL);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		run(&r, "HACCEL_CTL", bad[i][0], bad[i][1], bad[i][2], bad[i][3], bad[i][4], bad[i][5],
		    bad[i][6], bad[i][7]);
		if (r.status != 2)
			ktap_fail_at(__FILE__, __LINE__, "%s %s %s %s: exit %d, want 2 (%s)", bad[i][0],
				     bad[i][1] ? bad[i][1] : "", bad[i][2] ? bad[i][2] : "",
				     bad[i][3] ? bad[i][3] : "", r.status, r.err);
		KTAP_EXPECT(r.err[0] != '\0');
		KTAP_EXPECT_EQ(r.out[0], '\0');
	}
}

static void t_ctl_driver_absent(void)
{
	json_t *j, *u;

	need_no_driver();
	run(&r, "HACCEL_CTL", "driver", "status", NULL);
	ktap_diag("%s", r.out);
	KTAP_EXPECT_EQ(r.status, 1);
	/* "not loaded" once, with the library's reason after it */
	KTAP_EXPECT(strstr(r.out, "haccel.ko      not loaded (no /sys/module/haccel)\n") != NULL);
	KTAP_EXPECT_EQ(test_count_of(r.out, "not loaded"), 1);
	KTAP_EXPECT(strstr(r.out, "ABI            library 1.0") != NULL);
	KTAP_EXPECT(strstr(r.out, "with mlock (provider user)") != NULL);
	KTAP_EXPECT(strstr(r.err, "haccel.ko is not loaded") != NULL);
	KTAP_EXPECT_EQ(test_count_of(r.err, "haccel.ko"), 1);
	run(&r, "HACCEL_CTL", "driver", "status", "--json", NULL);
	KTAP_EXPECT_EQ(r.status, 1);
	j = parse(&r);
	KTAP_ASSERT(j);
	KTAP_EXPECT(json_is_false(json_object_get(j, "loaded")));
	KTAP_EXPECT(json_is_false(json_object_get(j, "usable")));
	KTAP_EXPECT(!strcmp(json_string_value(json_object_get(j, "status")), "ENODEV"));
	KTAP_EXPECT(json_is_null(json_object_get(j, "render_node")));
	u = json_object_get(j, "uapi");
	KTAP_EXPECT(json_is_null(json_object_get(u, "driver")));
	KTAP_EXPECT(!strcmp(json_string_value(json_object_get(u, "library")), "1.0"));
	KTAP_EXPECT(json_is_null(json_object_get(u, "compatible")));
	KTAP_EXPECT(!strcmp(json_string_value(json_object_get(j, "provider")), "user"));
	KTAP_EXPECT(!strcmp(json_string_value(json_object_get(j, "reason")),
			    "haccel.ko is not loaded (no /sys/module/haccel)"));
	KTAP_EXPECT_EQ(json_array_size(json_object_get(j, "nodes")), 0);
	KTAP_EXPECT_EQ(json_array_size(json_object_get(j, "caps")), 0);
	json_decref(j);
	/* Forced to the driver, the library would pin nothing. */
	setenv("HACCEL_HOSTMEM_PROVIDER", "driver", 1);
	run(&r, "HACCEL_CTL", "driver", "status", NULL);
	unsetenv("HACCEL_HOSTMEM_PROVIDER");
	KTAP_EXPECT(strstr(r.out, "pinning        none: HACCEL_HOSTMEM_PROVIDER=driver") != NULL);

	run(&r, "HACCEL_CTL", "driver", "quota", "get", NULL);
	KTAP_EXPECT_EQ(r.status, 1);
	KTAP_EXPECT(strstr(r.err, "haccel-ctl: driver: cannot read its statistics and quotas: haccel.ko is not loaded") != NULL);
	run(&r, "HACCEL_CTL", "--json", "driver", "quota", "get", "0", NULL);
	KTAP_EXPECT_EQ(r.status, 1);
	KTAP_EXPECT_EQ(r.out[0], '\0');
	run(&r, "HACCEL_CTL", "driver", "quota", "set", "0", "1G", NULL);
	KTAP_EXPECT_EQ(r.status, 1);
	KTAP_EXPECT(strstr(r.err, "haccel.ko is not loaded") != NULL);
	run(&r, "HACCEL_CTL", "driver", "clients", NULL);
	ktap_diag("%s", r.err);
	KTAP_EXPECT_EQ(r.status, 1);
	KTAP_EXPECT(strstr(r.err, "haccel.ko is not loaded (no /sys/module/haccel): it has no clients to list") != NULL);
	run(&r, "HACCEL_CTL", "driver", "clients", "--json", NULL);
	KTAP_EXPECT_EQ(r.status, 1);
	KTAP_EXPECT_EQ(r.out[0], '\0');
}

/* A fixture tree: haccel.ko loaded with renderD129 (not in this /dev), and
 * its debugfs files. */
static void driver_fixture(const char *root)
{
	test_put(root, "devices/system/node/node0/cpulist", "0\n");
	test_sysfs_haccel(root, 129);
}

/* doctor and driver status report the library's one probe. */
static void t_ctl_driver_doctor_agree(void)
{
	char root[] = "/tmp/haccel-sysfs-XXXXXX";
	const char *keys[] = { "loaded", "usable", "render_node", "uapi", "caps", "provider",
			       "reason", "status" };
	json_t *s, *d;

	if (access("/dev/dri/renderD129", F_OK) == 0)
		ktap_skip("this machine has a /dev/dri/renderD129");
	KTAP_ASSERT(mkdtemp(root) != NULL);
	driver_fixture(root);
	setenv("HACCEL_SYSFS_ROOT", root, 1);
	run(&r, "HACCEL_CTL", "driver", "status", "--json", NULL);
	KTAP_EXPECT_EQ(r.status, 1);
	s = parse(&r);
	run(&r, "HACCEL_CTL", "doctor", "--json", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	d = parse(&r);
	KTAP_ASSERT(s && d);
	KTAP_EXPECT(json_is_true(json_object_get(s, "loaded")));
	KTAP_EXPECT(json_is_false(json_object_get(s, "usable")));
	KTAP_EXPECT(!strcmp(json_string_value(json_object_get(s, "render_node")), "/dev/dri/renderD129"));
	ktap_diag("%s", json_string_value(json_object_get(s, "reason")));
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
		if (!json_equal(json_object_get(s, keys[k]),
				json_object_get(json_object_get(d, "driver"), keys[k])))
			ktap_fail_at(__FILE__, __LINE__, "doctor and status differ on %s", keys[k]);
	json_decref(s);
	json_decref(d);
	run(&r, "HACCEL_CTL", "driver", "status", NULL);
#ifdef HAVE_LIBDRM
	KTAP_EXPECT(strstr(r.out, "haccel.ko      loaded, not usable by this process: its render node /dev/dri/renderD129 cannot be opened") != NULL);
#else
	KTAP_EXPECT(strstr(r.out, "haccel.ko      loaded, not usable by this process: this libhaccel was built without libdrm") != NULL);
#endif
	KTAP_EXPECT_EQ(test_count_of(r.out, "is loaded"), 0);
	run(&r, "HACCEL_CTL", "doctor", NULL);
	KTAP_EXPECT(strstr(r.out, "unusable") && strstr(r.out, "render node /dev/dri/renderD129, not usable"));
	/* Loaded per sysfs, but there is no debugfs in the tree. */
	run(&r, "HACCEL_CTL", "driver", "clients", NULL);
	ktap_diag("%s", r.err);
	KTAP_EXPECT_EQ(r.status, 1);
	KTAP_EXPECT(strstr(r.err, "debugfs is not mounted at ") && strstr(r.err, "/kernel/debug") &&
		    strstr(r.err, "mount -t debugfs"));
	unsetenv("HACCEL_SYSFS_ROOT");
	KTAP_EXPECT_EQ(test_rmtree(root), 0);
}

/* clients parses the driver's debugfs table (a fixture copy of it). */
static void t_ctl_driver_clients_fixture(void)
{
	char root[] = "/tmp/haccel-sysfs-XXXXXX";
	json_t *j, *a, *c;

	KTAP_ASSERT(mkdtemp(root) != NULL);
	driver_fixture(root);
	test_put(root, "kernel/debug/haccel/clients",
		 "     pid command          state       bos           node0           node1\n"
		 "     812 haccel-run       open          3      2147483648               0\n"
		 "     913 my loader        closed        1            4096            8192\n");
	setenv("HACCEL_SYSFS_ROOT", root, 1);
	run(&r, "HACCEL_CTL", "driver", "clients", "--json", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	j = parse(&r);
	KTAP_ASSERT(j);
	a = json_object_get(j, "clients");
	KTAP_ASSERT_EQ(json_array_size(a), 2);
	c = json_array_get(a, 0);
	KTAP_EXPECT_EQ(json_integer_value(json_object_get(c, "pid")), 812);
	KTAP_EXPECT(!strcmp(json_string_value(json_object_get(c, "command")), "haccel-run"));
	KTAP_EXPECT(!strcmp(json_string_value(json_object_get(c, "state")), "open"));
	KTAP_EXPECT_EQ(json_integer_value(json_object_get(c, "buffers")), 3);
	KTAP_EXPECT_EQ(json_integer_value(json_object_get(c, "bytes")), 2147483648ll);
	c = json_array_get(a, 1);
	KTAP_EXPECT(!strcmp(json_string_value(json_object_get(c, "command")), "my loader"));
	KTAP_EXPECT(!strcmp(json_string_value(json_object_get(c, "state")), "closed"));
	KTAP_EXPECT_EQ(json_integer_value(json_array_get(json_object_get(c, "node_bytes"), 1)), 8192);
	KTAP_EXPECT_EQ(json_integer_value(json_object_get(c, "bytes")), 12288);
	json_decref(j);
	run(&r, "HACCEL_CTL", "driver", "clients", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	KTAP_EXPECT(strstr(r.out, "     812 haccel-run       open          3        2.0 GiB  2147483648 0") != NULL);
	KTAP_EXPECT(strstr(r.out, "my loader") != NULL);

	/* An empty list, then a file that is not the driver's table. */
	test_put(root, "kernel/debug/haccel/clients",
		 "     pid command          state       bos           node0\n");
	run(&r, "HACCEL_CTL", "driver", "clients", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	KTAP_EXPECT(strstr(r.out, "(no clients)") != NULL);
	test_put(root, "kernel/debug/haccel/clients", "something else\n");
	run(&r, "HACCEL_CTL", "driver", "clients", NULL);
	KTAP_EXPECT_EQ(r.status, 1);
	KTAP_EXPECT(strstr(r.err, "does not start with the driver's header") != NULL);
	test_put(root, "kernel/debug/haccel/clients",
		 "     pid command          state       bos           node0           node1\n"
		 "     812 open 3\n");
	run(&r, "HACCEL_CTL", "driver", "clients", NULL);
	KTAP_EXPECT_EQ(r.status, 1);
	KTAP_EXPECT(strstr(r.err, "a client line has 3 fields, want at least 6") != NULL);
	unsetenv("HACCEL_SYSFS_ROOT");
	KTAP_EXPECT_EQ(test_rmtree(root), 0);
}

static void t_bench_pools_quick(void)
{
	json_t *j, *af, *ck;

	run(&r, "HACCEL_BENCH", "--json", "pools", "--quick", NULL);
	KTAP_ASSERT_EQ(r.status, 0);
	j = parse(&r);
	KTAP_ASSERT(j);
	af = json_object_get(j, "alloc_free");
	KTAP_ASSERT_EQ(json_array_size(af), 2);
	for (size_t i = 0; i < 2; i++) {
		json_t *e = json_array_get(af, i);
		KTAP_EXPECT(json_real_value(json_object_get(json_object_get(e, "pairs_per_s"), "median")) > 0);
	}
	KTAP_EXPECT(json_real_value(json_object_get(json_object_get(json_object_get(j, "prefix_hit"),
									"lookups_per_s"), "median")) > 0);
	KTAP_EXPECT(json_real_value(json_object_get(json_object_get(json_object_get(j, "fork_cow"),
									"forks_per_s"), "median")) > 0);
	ck = json_object_get(j, "state_checkpoint");
	KTAP_EXPECT(json_real_value(json_object_get(ck, "save_fraction")) > 0);
	KTAP_EXPECT(json_real_value(json_object_get(ck, "restore_fraction")) > 0);
	KTAP_EXPECT(json_integer_value(json_object_get(ck, "slot_bytes")) > 0);
	json_decref(j);

	run(&r, "HACCEL_BENCH", "pools", "--quick", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	KTAP_EXPECT(strstr(r.out, "KV page alloc+free") && strstr(r.out, "memcpy ceiling"));
}

/* --quick sets the defaults; options given explicitly apply over them,
 * before or after it. A bad value names its own option and the range. */
static void t_bench_pools_options(void)
{
	json_t *j;

	run(&r, "HACCEL_BENCH", "--json", "pools", "--rounds", "2", "--quick", "--seconds", "0.01",
	    "--state-heads", "4", NULL);
	KTAP_ASSERT_EQ(r.status, 0);
	j = parse(&r);
	KTAP_ASSERT(j);
	KTAP_EXPECT_EQ(json_integer_value(json_object_get(j, "rounds")), 2);
	KTAP_EXPECT(json_real_value(json_object_get(j, "seconds_per_round")) == 0.01);
	KTAP_EXPECT_EQ(json_array_size(json_object_get(j, "alloc_free")), 2);
	KTAP_EXPECT_EQ(json_integer_value(json_object_get(json_object_get(j, "state_checkpoint"),
							  "heads")), 4);
	json_decref(j);
	run(&r, "HACCEL_BENCH", "pools", "--state-layers", "0", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err,
			   "haccel-bench: pools: bad value '0' for --state-layers (1..256)") != NULL);
	run(&r, "HACCEL_BENCH", "pools", "--state-heads", "999", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "bad value '999' for --state-heads (1..256)") != NULL);
	run(&r, "HACCEL_BENCH", "pools", "--quick", "--cpu", "x", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "bad value 'x' for --cpu") != NULL);
	/* lists with an empty element, as haccel-run's --tokens */
	static const char *const lists[] = { "1,,2", "1,2,", ",1", "" };
	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
		run(&r, "HACCEL_BENCH", "pools", "--quick", "--sizes", lists[i], NULL);
		if (r.status != 2 || !strstr(r.err, "for --sizes (at most 16"))
			ktap_fail_at(__FILE__, __LINE__, "--sizes '%s': exit %d (%s)", lists[i],
				     r.status, r.err);
	}
	run(&r, "HACCEL_BENCH", "decode", "model", "--batch", "1,,2", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "bad --batch '1,,2'") != NULL);
	run(&r, "HACCEL_BENCH", "decode", "model", "--batch", "4,", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	run(&r, "HACCEL_BENCH", "pools", "--s", "1", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "haccel-bench: pools: option '--s' is ambiguous") != NULL);
}

/* Option errors in the tool's words, prefixed "haccel-bench: BENCHMARK:". */
static void t_bench_option_errors(void)
{
	json_t *j;

	run(&r, "HACCEL_BENCH", "stream", "x", "--bogus", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "haccel-bench: stream: unknown option '--bogus'") != NULL);
	KTAP_EXPECT(strstr(r.err, "unrecognized") == NULL);
	run(&r, "HACCEL_BENCH", "stream", "x", "--repeat", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "haccel-bench: stream: option '--repeat' needs a value") != NULL);
	run(&r, "HACCEL_BENCH", "stream", "x", "y", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "stream: unexpected argument 'y'") != NULL);
	run(&r, "HACCEL_BENCH", "pools", "-z", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "haccel-bench: pools: unknown option '-z'") != NULL);
	run(&r, "HACCEL_BENCH", "kernels", "extra", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "haccel-bench: kernels: unexpected argument 'extra'") != NULL);
	run(&r, "HACCEL_BENCH", "decode", "model", "other", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "decode: unexpected argument 'other'") != NULL);
	/* the limits, said */
	run(&r, "HACCEL_BENCH", "stream", "x", "--create", "1K", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "bad value '1K' for --create (a size of at least 4096 bytes") != NULL);
	run(&r, "HACCEL_BENCH", "stream", "x", "--chunk", "100000", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "bad value '100000' for --chunk (a multiple of 4096 from 64K to 256M)") != NULL);
	run(&r, "HACCEL_BENCH", "stream", "x", "--repeat", "65", NULL);
	KTAP_EXPECT(strstr(r.err, "bad value '65' for --repeat (1..64)") != NULL);
	/* --version with --json, before or after it */
	run(&r, "HACCEL_BENCH", "--version", "--json", NULL);
	KTAP_ASSERT_EQ(r.status, 0);
	j = parse(&r);
	KTAP_ASSERT(j);
	KTAP_EXPECT(!strcmp(json_string_value(json_object_get(j, "libhaccel")),
			    haccel_version_string()));
	KTAP_EXPECT(json_is_string(json_object_get(j, "haccel_bench")));
	json_decref(j);
	run(&r, "HACCEL_BENCH", "-j", "-V", NULL);
	KTAP_ASSERT_EQ(r.status, 0);
	j = parse(&r);
	KTAP_EXPECT(j != NULL);
	json_decref(j);
	run(&r, "HACCEL_BENCH", "--version", NULL);
	KTAP_EXPECT(!strncmp(r.out, "haccel-bench ", 13));
}

static void t_bench_usage_errors(void)
{
	run(&r, "HACCEL_BENCH", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	run(&r, "HACCEL_BENCH", "--help", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	KTAP_EXPECT(strstr(r.out, "pools") != NULL);
	run(&r, "HACCEL_BENCH", "pools", "--help", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	KTAP_EXPECT(strstr(r.out, "--sizes") != NULL);
	run(&r, "HACCEL_BENCH", "nosuch", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "unknown benchmark 'nosuch'") != NULL);
	run(&r, "HACCEL_BENCH", "pools", "--pages", "0", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "bad value '0' for --pages") != NULL);
	run(&r, "HACCEL_BENCH", "pools", "--sizes", "10,x", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	run(&r, "HACCEL_BENCH", "pools", "--pages", "100", "--sizes", "500", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "exceeds") != NULL);
	run(&r, "HACCEL_BENCH", "pools", "--seconds", "-1", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	run(&r, "HACCEL_BENCH", "pools", "stray", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	/* decode's values: which one, and what it takes */
	run(&r, "HACCEL_BENCH", "decode", "model", "--context", "-5", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "bad --context '-5' (1..1048576)") != NULL);
	run(&r, "HACCEL_BENCH", "decode", "model", "--steps", "0", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "bad --steps '0' (1..100000)") != NULL);
	run(&r, "HACCEL_BENCH", "decode", "model", "--batch", "1,5000", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "bad --batch value '5000' (1..4096)") != NULL);
	run(&r, "HACCEL_BENCH", "decode", "model", "--batch",
	    "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "at most 16 values") != NULL);
	/* a library error, reported once by the tool (not also by the
	 * library's own log line) */
	run(&r, "HACCEL_BENCH", "stream", "/nonexistent/model.safetensors", NULL);
	KTAP_EXPECT_EQ(r.status, 1);
	KTAP_EXPECT(strstr(r.err, "/nonexistent/model.safetensors: no such file") != NULL);
	KTAP_EXPECT_EQ(test_count_of(r.err, "nonexistent"), 1);
	KTAP_EXPECT(strstr(r.err, "haccel: error:") == NULL);
}

/* stream --device: its help, a bad value, and "no GPU" without one. */
static void t_bench_stream_device(void)
{
	struct haccel_gpu_info gi;
	struct haccel_ctx *ctx;
	int ret;

	run(&r, "HACCEL_BENCH", "stream", "--help", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	KTAP_EXPECT(strstr(r.out, "--device host|cuda") != NULL);
	run(&r, "HACCEL_BENCH", "stream", "model.safetensors", "--device", "tpu", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "bad value 'tpu' for --device") != NULL);

	KTAP_ASSERT_EQ(haccel_open(NULL, &ctx), 0);
	ret = haccel_gpu_info(ctx, &gi);
	haccel_close(ctx);
	if (!ret)
		ktap_skip("GPU present");
	/* Refused before the path is even looked at. */
	run(&r, "HACCEL_BENCH", "stream", "/nonexistent/model.safetensors", "--device", "cuda", NULL);
	ktap_diag("%s", r.err);
	KTAP_EXPECT_EQ(r.status, 1);
	KTAP_EXPECT(strstr(r.err, "no GPU") != NULL);
	KTAP_EXPECT(strstr(r.err, gi.reason) != NULL);
	KTAP_EXPECT(strstr(r.err, "nonexistent") == NULL);
	run(&r, "HACCEL_BENCH", "--json", "stream", "/nonexistent/model.safetensors", "--device", "cuda",
	    NULL);
	KTAP_EXPECT_EQ(r.status, 1);
	KTAP_EXPECT_EQ(r.out[0], '\0');
}

/* decode --trace: documented, decode only, and a libcupti that cannot be
 * loaded stops the run before any GPU is touched. */
static void t_bench_decode_trace(void)
{
	run(&r, "HACCEL_BENCH", "decode", "--help", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	KTAP_EXPECT(strstr(r.out, "[--trace]") != NULL);
	KTAP_EXPECT(strstr(r.out, "gaps between kernels") != NULL);
	KTAP_EXPECT(strstr(r.out, "HACCEL_CUPTI_LIB") != NULL);
	run(&r, "HACCEL_BENCH", "prefill", "/nonexistent", "--trace", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "--trace is for decode only") != NULL);
	run(&r, "HACCEL_BENCH", "prefill", "/nonexistent", "--steps", "5", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "--steps is for decode only") != NULL);
	run(&r, "HACCEL_BENCH", "prefill", "--help", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	KTAP_EXPECT(strstr(r.out, "prefill MODEL_DIR") && !strstr(r.out, "[--steps N]"));

	setenv("HACCEL_CUPTI_LIB", "/nonexistent/libcupti.so.13", 1);
	run(&r, "HACCEL_BENCH", "decode", "/nonexistent", "--trace", NULL);
	unsetenv("HACCEL_CUPTI_LIB");
	ktap_diag("%s", r.err);
	KTAP_EXPECT_EQ(r.status, 1);
	KTAP_EXPECT(strstr(r.err, "decode: --trace: ") != NULL);
#ifdef HAVE_CUPTI
	KTAP_EXPECT(strstr(r.err, "HACCEL_CUPTI_LIB=/nonexistent/libcupti.so.13") != NULL);
#else
	KTAP_EXPECT(strstr(r.err, "built without CUPTI headers (cupti_activity.h)") != NULL);
#endif
	KTAP_EXPECT(strstr(r.err, "GPU") == NULL);
}

/* kernels --only: documented, and a name that is none of the four is a
 * usage error before any GPU is looked for. */
static void t_bench_kernels_only(void)
{
	run(&r, "HACCEL_BENCH", "kernels", "--help", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	KTAP_EXPECT(strstr(r.out, "--only LIST") != NULL);
	run(&r, "HACCEL_BENCH", "kernels", "--only", "sparse_mla,bogus", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "unknown kernel 'bogus'") != NULL);
	KTAP_EXPECT(strstr(r.err, "GPU") == NULL);
}

/* kernels --index-heads, --context, --pages, --batch: documented, and values out of
 * range are usage errors before any GPU is looked for. */
static void t_bench_kernels_dsa_shape(void)
{
	static const char *const bad[][2] = {
		{ "--index-heads", "0" }, { "--index-heads", "129" }, { "--index-heads", "16x" },
		{ "--context", "1024" }, { "--context", "65537" }, { "--context", "524288" },
		{ "--pages", "random" }, { "--batch", "0" },	     { "--batch", "129" },
		{ "--batch", "1,,32" },	 { "--batch", "1,2,3,4,5,6,7,8,9" },
	};

	run(&r, "HACCEL_BENCH", "kernels", "--help", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	KTAP_EXPECT(strstr(r.out, "--index-heads N") != NULL);
	KTAP_EXPECT(strstr(r.out, "--context N") != NULL);
	KTAP_EXPECT(strstr(r.out, "--pages P") != NULL);
	KTAP_EXPECT(strstr(r.out, "or shared") != NULL);
	KTAP_EXPECT(strstr(r.out, "--batch LIST") != NULL);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		run(&r, "HACCEL_BENCH", "kernels", "--only", "indexer_topk", bad[i][0], bad[i][1],
		    NULL);
		KTAP_EXPECT_EQ(r.status, 2);
		KTAP_EXPECT(strstr(r.err, bad[i][0]) != NULL && strstr(r.err, bad[i][1]) != NULL);
		KTAP_EXPECT(strstr(r.err, "GPU") == NULL);
	}
	/* the bad layout's message names the three */
	run(&r, "HACCEL_BENCH", "kernels", "--pages", "random", NULL);
	KTAP_EXPECT(strstr(r.err, "scattered, contiguous or shared") != NULL);
	/* an option without its value */
	run(&r, "HACCEL_BENCH", "kernels", "--context", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	KTAP_EXPECT(strstr(r.err, "unknown option '--context'") != NULL);
}

/* The entries of dir (not . and ..), their names joined by spaces in ls. */
static int dir_entries(const char *dir, char *ls, size_t len)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	ls[0] = '\0';
	KTAP_ASSERT(d != NULL);
	while ((e = readdir(d)) != NULL) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(ls + strlen(ls), len - strlen(ls), "%s%s", n ? " " : "", e->d_name);
		n++;
	}
	closedir(d);
	return n;
}

/*
 * stream --create: a SIZE whose header would pass the safetensors limit, or
 * more than the file system has free, is refused at once (no file made,
 * nothing allocated: 99999T once ate all memory), and an existing file is
 * kept.
 */
static void t_bench_stream_create_refused(void)
{
	char dir[] = "./haccel-create-XXXXXX", path[600], size[64], ls[512], keep[8] = "";
	struct statvfs vfs;
	uint64_t avail;
	int fd;

	KTAP_ASSERT(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/c.safetensors", dir);
	run(&r, "HACCEL_BENCH", "stream", path, "--create", "99999T", NULL);
	ktap_diag("%s", r.err);
	KTAP_EXPECT_EQ(r.status, 1);
	KTAP_EXPECT(strstr(r.err, "haccel-bench: stream: --create 99999T: its header would pass the safetensors header limit of 100000000 bytes") != NULL);
	KTAP_EXPECT_EQ(dir_entries(dir, ls, sizeof(ls)), 0);

	KTAP_ASSERT_EQ(statvfs(dir, &vfs), 0);
	avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
	if (avail < (30ull << 40)) {
		/* 2 GiB more than there is: both numbers said */
		snprintf(size, sizeof(size), "%lluG", (unsigned long long)(avail >> 30) + 2);
		run(&r, "HACCEL_BENCH", "stream", path, "--create", size, NULL);
		ktap_diag("%s", r.err);
		KTAP_EXPECT_EQ(r.status, 1);
		KTAP_EXPECT(strstr(r.err, "--create ") && strstr(r.err, ": needs ") &&
			    strstr(r.err, "but the file system of") && strstr(r.err, " bytes (") &&
			    strstr(r.err, " free"));
		KTAP_EXPECT_EQ(dir_entries(dir, ls, sizeof(ls)), 0);
	}

	test_put(dir, "c.safetensors", "keep");
	run(&r, "HACCEL_BENCH", "stream", path, "--create", "4096", NULL);
	KTAP_EXPECT_EQ(r.status, 1);
	KTAP_EXPECT(strstr(r.err, "already exists") != NULL);
	fd = open(path, O_RDONLY);
	KTAP_ASSERT(fd >= 0);
	KTAP_EXPECT_EQ(read(fd, keep, sizeof(keep)), 4);
	close(fd);
	KTAP_EXPECT(!strcmp(keep, "keep"));
	KTAP_EXPECT_EQ(dir_entries(dir, ls, sizeof(ls)), 1);
	KTAP_EXPECT_EQ(test_rmtree(dir), 0);
}

/*
 * stream --create writes PATH.tmp-XXXXXX beside PATH and renames it when
 * complete: a SIGINT or SIGTERM while it writes leaves nothing behind, and
 * ends the run as the signal would.
 */
static void t_bench_stream_create_signal(void)
{
	static const int sigs[] = { SIGINT, SIGTERM };
	const char *tool = getenv("HACCEL_BENCH");
	char dir[] = "./haccel-create-XXXXXX", path[600], ls[512];

	if (!tool)
		ktap_skip("HACCEL_BENCH not set: run through make check");
	KTAP_ASSERT(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/c.safetensors", dir);
	for (size_t k = 0; k < sizeof(sigs) / sizeof(sigs[0]); k++) {
		int st, seen = 0;
		pid_t pid = fork();

		KTAP_ASSERT(pid >= 0);
		if (pid == 0) {
			int null = open("/dev/null", O_RDWR);

			dup2(null, STDOUT_FILENO);
			dup2(null, STDERR_FILENO);
			signal(SIGINT, SIG_DFL);
			signal(SIGTERM, SIG_DFL);
			execl(tool, tool, "stream", path, "--create", "256M", "--warm", "--repeat",
			      "1", "--allow-unpinned", (char *)NULL);
			_exit(127);
		}
		/* Signalled as soon as its temporary file is there. */
		for (int i = 0; i < 10000 && !seen; i++) {
			seen = dir_entries(dir, ls, sizeof(ls)) == 1 &&
			       !strncmp(ls, "c.safetensors.tmp-", 18);
			if (!seen)
				usleep(1000);
		}
		kill(pid, seen ? sigs[k] : SIGKILL);
		waitpid(pid, &st, 0);
		if (!seen)
			ktap_fail_at(__FILE__, __LINE__, "no c.safetensors.tmp-XXXXXX seen (%s)",
				     ls);
		if (access(path, F_OK) == 0)
			ktap_skip("the write finished before the signal came");
		KTAP_EXPECT(WIFSIGNALED(st) && WTERMSIG(st) == sigs[k]);
		if (dir_entries(dir, ls, sizeof(ls)))
			ktap_fail_at(__FILE__, __LINE__, "left behind after signal %d: %s",
				     sigs[k], ls);
	}
	KTAP_EXPECT_EQ(test_rmtree(dir), 0);
}

/*
 * stream --create shows its progress on a terminal (as the loader's
 * progress does); the file is in place once written, and stream's stdout
 * is line-buffered: its first line reaches a pipe while the run goes on.
 * Then a load whose staging buffers cannot be locked names --allow-unpinned,
 * not the library's flag.
 */
static void t_bench_stream_create_progress(void)
{
	const char *tool = getenv("HACCEL_BENCH");
	char dir[] = "./haccel-create-XXXXXX", path[600], ls[512], line[4096] = "", tty[4096] = "";
	const char *argv[12];
	struct rlimit rl, low;
	struct stat sb;
	struct pollfd pf;
	size_t got = 0;
	int pout[2], master, st, running;
	pid_t pid;

	if (!tool)
		ktap_skip("HACCEL_BENCH not set: run through make check");
	master = posix_openpt(O_RDWR | O_NOCTTY);
	if (master < 0 || grantpt(master) || unlockpt(master))
		ktap_skip("no pseudo-terminal: %s", strerror(errno));
	KTAP_ASSERT(mkdtemp(dir) != NULL);
	KTAP_ASSERT_EQ(chmod(dir, 0755), 0);
	snprintf(path, sizeof(path), "%s/c.safetensors", dir);
	KTAP_ASSERT(pipe(pout) == 0);
	pid = fork();
	KTAP_ASSERT(pid >= 0);
	if (pid == 0) {
		int slave = open(ptsname(master), O_RDWR | O_NOCTTY);

		if (slave < 0)
			_exit(126);
		dup2(pout[1], STDOUT_FILENO);
		dup2(slave, STDERR_FILENO);
		close(pout[0]);
		close(master);
		/* cold: the disk-ceiling sweep takes many seconds */
		execl(tool, tool, "stream", path, "--create", "8M", "--cold", "--repeat", "1",
		      "--probe-seconds", "1", (char *)NULL);
		_exit(127);
	}
	close(pout[1]);
	read_first_line(pout[0], line, sizeof(line), 10000);
	running = waitpid(pid, &st, WNOHANG) == 0;
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	close(pout[0]);
	got = 0;
	pf.fd = master;
	pf.events = POLLIN;
	while (got < sizeof(tty) - 1 && poll(&pf, 1, 1000) == 1) {
		ssize_t n = read(master, tty + got, sizeof(tty) - 1 - got);

		if (n <= 0)
			break;
		got += (size_t)n;
		tty[got] = '\0';
	}
	close(master);
	ktap_diag("stdout: %s", line);
	ktap_diag("tty: %s", tty);
	KTAP_EXPECT(strchr(line, '\n') && strstr(line, "haccel-bench stream: ") && running);
	KTAP_EXPECT(strstr(tty, "haccel-bench: stream: --create: writing 0.01 / 0.01 GB") != NULL);
	KTAP_EXPECT(stat(path, &sb) == 0 && sb.st_size > (8 << 20));
	KTAP_EXPECT_EQ(dir_entries(dir, ls, sizeof(ls)), 1);

	/* Not on a terminal: no progress at all. */
	run(&r, "HACCEL_BENCH", "stream", path, "--warm", "--repeat", "1", "--allow-unpinned",
	    NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	KTAP_EXPECT(strstr(r.err, "writing") == NULL);

	/* As an ordinary user (root's CAP_IPC_LOCK ignores the limit), with
	 * 64 KiB of RLIMIT_MEMLOCK: the cold load's staging cannot be locked. */
	KTAP_ASSERT_EQ(getrlimit(RLIMIT_MEMLOCK, &rl), 0);
	low = rl;
	low.rlim_cur = 64 << 10;
	KTAP_ASSERT_EQ(setrlimit(RLIMIT_MEMLOCK, &low), 0);
	argv[0] = tool;
	argv[1] = "stream";
	argv[2] = path;
	argv[3] = "--cold";
	argv[4] = "--repeat";
	argv[5] = "1";
	argv[6] = "--ceiling";
	argv[7] = "1,1M";
	argv[8] = "--probe-seconds";
	argv[9] = "0.05";
	argv[10] = NULL;
	tool_run_argv(&r, argv, geteuid() == 0 ? 65534 : 0);
	KTAP_ASSERT_EQ(setrlimit(RLIMIT_MEMLOCK, &rl), 0);
	ktap_diag("%s", r.err);
	KTAP_EXPECT_EQ(test_rmtree(dir), 0);
	if (r.status == 0)
		ktap_skip("the staging buffers were locked under a 64 KiB RLIMIT_MEMLOCK");
	if (!strstr(r.err, "staging"))
		ktap_skip("the load did not run as an ordinary user (exit %d)", r.status);
	KTAP_EXPECT_EQ(r.status, 1);
	KTAP_EXPECT(strstr(r.err, "(--allow-unpinned loads through unpinned, unregistered staging instead)") != NULL);
	KTAP_EXPECT(strstr(r.err, "HACCEL_HOSTMEM_ALLOW_UNPINNED") == NULL);
	KTAP_EXPECT(strstr(r.err, "hostmem_flags") == NULL);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_ctl_help_and_usage),
	KTAP_CASE(t_ctl_version),
	KTAP_CASE(t_stdout_write_errors),
	KTAP_CASE(t_stdout_buffering_kept),
	KTAP_CASE(t_ctl_doctor_this_node),
	KTAP_CASE(t_ctl_doctor_fixture_sysfs),
	KTAP_CASE(t_ctl_doctor_driver_installed),
	KTAP_CASE(t_ctl_driver_usage),
	KTAP_CASE(t_ctl_driver_absent),
	KTAP_CASE(t_ctl_driver_doctor_agree),
	KTAP_CASE(t_ctl_driver_clients_fixture),
	KTAP_CASE_TIMEOUT(t_bench_pools_quick, 120),
	KTAP_CASE(t_bench_pools_options),
	KTAP_CASE(t_bench_option_errors),
	KTAP_CASE(t_bench_usage_errors),
	KTAP_CASE(t_bench_stream_create_refused),
	KTAP_CASE(t_bench_stream_create_signal),
	KTAP_CASE(t_bench_stream_create_progress),
	KTAP_CASE(t_bench_stream_device),
	KTAP_CASE(t_bench_decode_trace),
	KTAP_CASE(t_bench_kernels_only),
	KTAP_CASE(t_bench_kernels_dsa_shape),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
