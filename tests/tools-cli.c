// SPDX-License-Identifier: MIT
/* haccel-ctl and haccel-bench: help, usage errors, JSON output, doctor on a fixture sysfs tree. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "haccel.h"
#include "ktap.h"

struct result {
	int status;      /* exit code, or 128 + signal */
	char out[65536];
	char err[8192];
};

static void drain(int fd, char *buf, size_t len)
{
	size_t got = 0;

	for (;;) {
		ssize_t n = read(fd, buf + got, len - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
		if (got == len - 1)
			break;
	}
	buf[got] = '\0';
}

/* Run tool (from the environment variable env) with args; NULL-terminated. */
static void run(struct result *r, const char *env, ...)
{
	const char *tool = getenv(env);
	const char *argv[32];
	char errpath[] = "/tmp/haccel-test-err-XXXXXX";
	int pout[2], efd, st, n = 0;
	va_list ap;
	pid_t pid;

	if (!tool)
		ktap_skip("%s not set: run through make check", env);
	argv[n++] = tool;
	va_start(ap, env);
	while (n < 31 && (argv[n] = va_arg(ap, const char *)))
		n++;
	va_end(ap);
	argv[n] = NULL;

	KTAP_ASSERT(pipe(pout) == 0);
	efd = mkstemp(errpath);
	KTAP_ASSERT(efd >= 0);
	unlink(errpath);
	pid = fork();
	KTAP_ASSERT(pid >= 0);
	if (pid == 0) {
		dup2(pout[1], STDOUT_FILENO);
		dup2(efd, STDERR_FILENO);
		close(pout[0]);
		close(pout[1]);
		execv(tool, (char *const *)argv);
		_exit(127);
	}
	close(pout[1]);
	drain(pout[0], r->out, sizeof(r->out));
	close(pout[0]);
	waitpid(pid, &st, 0);
	lseek(efd, 0, SEEK_SET);
	drain(efd, r->err, sizeof(r->err));
	close(efd);
	r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static json_t *parse(const struct result *r)
{
	json_error_t e;
	json_t *j = json_loads(r->out, 0, &e);

	if (!j)
		ktap_fail_at(__FILE__, __LINE__, "output is not JSON (%s at line %d): %.200s",
			     e.text, e.line, r->out);
	return j;
}

static struct result r;

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
	KTAP_EXPECT(!strcmp(json_string_value(json_object_get(j, "libhaccel")), haccel_version_string()));
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

static void put(const char *root, const char *rel, const char *text)
{
	char path[512], *slash;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (slash = path + strlen(root) + 1; (slash = strchr(slash, '/')); slash++) {
		*slash = '\0';
		mkdir(path, 0755);
		*slash = '/';
	}
	f = fopen(path, "w");
	KTAP_ASSERT(f != NULL);
	fputs(text, f);
	fclose(f);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void t_ctl_doctor_fixture_sysfs(void)
{
	char root[] = "/tmp/haccel-sysfs-XXXXXX", link[600], target[600];
	json_t *j, *nodes, *n1, *d;

	KTAP_ASSERT(mkdtemp(root) != NULL);
	put(root, "devices/system/node/node0/cpulist", "0-3\n");
	put(root, "devices/system/node/node0/meminfo",
	    "Node 0 MemTotal:       1000 kB\nNode 0 MemFree:         600 kB\n");
	put(root, "devices/system/node/node1/cpulist", "4-7\n");
	put(root, "devices/system/node/node1/meminfo",
	    "Node 1 MemTotal:       2000 kB\nNode 1 MemFree:        1500 kB\n");
	put(root, "devices/system/node/online", "0-1\n");
	put(root, "kernel/mm/transparent_hugepage/enabled", "always [madvise] never\n");
	put(root, "kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "16\n");
	put(root, "kernel/mm/hugepages/hugepages-2048kB/free_hugepages", "12\n");
	put(root, "module/haccel/initstate", "live\n");
	put(root, "bus/platform/drivers/haccel/uevent", "\n");
	put(root, "devices/platform/haccel.0/uevent", "\n");
	snprintf(link, sizeof(link), "%s/devices/platform/haccel.0/driver", root);
	snprintf(target, sizeof(target), "%s/bus/platform/drivers/haccel", root);
	KTAP_ASSERT_EQ(symlink(target, link), 0);
	put(root, "class/drm/renderD129/dev", "226:129\n");
	snprintf(link, sizeof(link), "%s/class/drm/renderD129/device", root);
	snprintf(target, sizeof(target), "%s/devices/platform/haccel.0", root);
	KTAP_ASSERT_EQ(symlink(target, link), 0);

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
	KTAP_EXPECT_EQ(nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS), 0);
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
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_ctl_help_and_usage),
	KTAP_CASE(t_ctl_version),
	KTAP_CASE(t_ctl_doctor_this_node),
	KTAP_CASE(t_ctl_doctor_fixture_sysfs),
	KTAP_CASE_TIMEOUT(t_bench_pools_quick, 120),
	KTAP_CASE(t_bench_usage_errors),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
