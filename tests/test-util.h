/* SPDX-License-Identifier: MIT */
/* Helpers shared by tests: fixture files and trees, running the tools. */
#ifndef HACCEL_TESTS_TEST_UTIL_H
#define HACCEL_TESTS_TEST_UTIL_H

#include <fcntl.h>
#include <grp.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "haccel.h"
#include "ktap.h"

/* The whole file at path (NUL-terminated; free() it); a file that cannot
 * be read fails the case. */
static inline char *test_slurp(const char *path)
{
	char *buf;
	FILE *f;
	long n;

	f = fopen(path, "re");
	if (!f)
		ktap_diag("cannot read %s", path);
	KTAP_ASSERT(f != NULL);
	KTAP_ASSERT(fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0);
	rewind(f);
	buf = malloc((size_t)n + 1);
	KTAP_ASSERT(buf && fread(buf, 1, (size_t)n, f) == (size_t)n);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* The whole file rel under $srcdir (make check sets it), for the tests
 * that read the sources and docs; free() it. Skips outside make check;
 * a file that cannot be read there fails. */
static inline char *test_slurp_src(const char *rel)
{
	const char *src = getenv("srcdir");
	char path[1024];

	if (!src)
		ktap_skip("srcdir not set: run through make check");
	snprintf(path, sizeof(path), "%s/%s", src, rel);
	return test_slurp(path);
}

/* Write text to root/rel, making the directories on the way. */
static inline void test_put(const char *root, const char *rel, const char *text)
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

static inline int test_rm_one(const char *path, const struct stat *st, int flag,
			      struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* Remove a tree (links are removed, not followed). Returns 0 or -1. */
static inline int test_rmtree(const char *dir)
{
	return nftw(dir, test_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Occurrences of needle in s (a message printed once or twice). */
static inline int test_count_of(const char *s, const char *needle)
{
	int n = 0;

	for (const char *p = s; (p = strstr(p, needle)) != NULL; p += strlen(needle))
		n++;
	return n;
}

/* What a tool run printed and how it ended. */
struct tool_result {
	int status;      /* exit code, or 128 + signal */
	char out[65536];
	char err[8192];
};

static inline void test_drain(int fd, char *buf, size_t len)
{
	size_t got = 0;

	for (;;) {
		ssize_t n = read(fd, buf + got, len - 1 - got);
		if (n <= 0 || (got += (size_t)n) == len - 1)
			break;
	}
	buf[got] = '\0';
}

/* A context that keeps its log lines (all levels, the first 64), for
 * tests of what the library says. */
struct log_cap {
	int n;
	int level[64];
	char line[64][512];
};

static inline void cap_log(void *user, int level, const char *msg)
{
	struct log_cap *c = user;

	if (c->n < 64) {
		c->level[c->n] = level;
		snprintf(c->line[c->n], sizeof(c->line[0]), "%s", msg);
		c->n++;
	}
}

static inline struct haccel_ctx *cap_ctx(struct log_cap *c)
{
	struct haccel_open_params p;
	struct haccel_ctx *ctx = NULL;

	memset(c, 0, sizeof(*c));
	haccel_open_params_init(&p);
	p.log_fn = cap_log;
	p.log_user = c;
	p.log_level = HACCEL_LOG_DEBUG;
	KTAP_ASSERT_EQ(haccel_open(&p, &ctx), 0);
	return ctx;
}

/* Lines logged at level that contain s (NULL: any), each printed. */
static inline int cap_count(const struct log_cap *c, int level, const char *s)
{
	int n = 0;

	for (int i = 0; i < c->n; i++)
		if (c->level[i] == level && (!s || strstr(c->line[i], s))) {
			ktap_diag("log %d: %s", level, c->line[i]);
			n++;
		}
	return n;
}

/* A symbolic link root/rel -> root/to. */
static inline void test_link(const char *root, const char *rel, const char *to)
{
	char link[600], target[600];

	snprintf(link, sizeof(link), "%s/%s", root, rel);
	snprintf(target, sizeof(target), "%s/%s", root, to);
	KTAP_ASSERT_EQ(symlink(target, link), 0);
}

/*
 * Under a fixture sysfs root: haccel.ko loaded with render node
 * renderD<minor>, as the kernel lays it out (its platform device, which no
 * driver binds, known by its modalias), and a GPU's render node renderD128
 * before it, bound to its driver, which must not be taken for haccel's.
 */
static inline void test_sysfs_haccel(const char *root, unsigned int minor)
{
	char rel[64], dev[32];

	test_put(root, "module/haccel/initstate", "live\n");
	test_put(root, "devices/platform/haccel/modalias", "platform:haccel\n");
	snprintf(rel, sizeof(rel), "class/drm/renderD%u/dev", minor);
	snprintf(dev, sizeof(dev), "226:%u\n", minor);
	test_put(root, rel, dev);
	snprintf(rel, sizeof(rel), "class/drm/renderD%u/device", minor);
	test_link(root, rel, "devices/platform/haccel");
	test_put(root, "devices/pci0000:00/0000:00:06.0/modalias",
		 "pci:v000010DEd00002335sv000010DEsd000018BEbc03sc02i00\n");
	test_put(root, "bus/pci/drivers/nvidia/uevent", "\n");
	test_link(root, "devices/pci0000:00/0000:00:06.0/driver", "bus/pci/drivers/nvidia");
	test_put(root, "class/drm/renderD128/dev", "226:128\n");
	test_link(root, "class/drm/renderD128/device", "devices/pci0000:00/0000:00:06.0");
}

/*
 * Run argv[0] with argv (NULL-terminated), as user uid when uid is not 0
 * (the caller must be root); keep stderr, and stdout unless out_path names
 * a file to open as stdout instead (r->out then stays empty). Status 126:
 * the child could not become uid or open out_path.
 */
static inline void tool_spawn(struct tool_result *r, const char *const *argv, uid_t uid,
			      const char *out_path)
{
	char errpath[] = "/tmp/haccel-test-err-XXXXXX";
	int pout[2] = { -1, -1 }, efd, st;
	pid_t pid;

	if (!out_path)
		KTAP_ASSERT(pipe(pout) == 0);
	efd = mkstemp(errpath);
	KTAP_ASSERT(efd >= 0);
	unlink(errpath);
	pid = fork();
	KTAP_ASSERT(pid >= 0);
	if (pid == 0) {
		int ofd = out_path ? open(out_path, O_WRONLY | O_CLOEXEC) : pout[1];

		if (ofd < 0)
			_exit(126);
		dup2(ofd, STDOUT_FILENO);
		dup2(efd, STDERR_FILENO);
		if (!out_path) {
			close(pout[0]);
			close(pout[1]);
		}
		if (uid && (setgroups(0, NULL) || setresgid(uid, uid, uid) || setresuid(uid, uid, uid)))
			_exit(126);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	r->out[0] = '\0';
	if (!out_path) {
		close(pout[1]);
		test_drain(pout[0], r->out, sizeof(r->out));
		close(pout[0]);
	}
	waitpid(pid, &st, 0);
	lseek(efd, 0, SEEK_SET);
	test_drain(efd, r->err, sizeof(r->err));
	close(efd);
	r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* tool_spawn with stdout kept. */
static inline void tool_run_argv(struct tool_result *r, const char *const *argv, uid_t uid)
{
	tool_spawn(r, argv, uid, NULL);
}

/* The tool named by env, then the arguments of ap up to NULL, into argv
 * (32 entries). */
static inline void tool_argv(const char **argv, const char *tool, va_list ap)
{
	int n = 0;

	argv[n++] = tool;
	while (n < 31 && (argv[n] = va_arg(ap, const char *)))
		n++;
	argv[n] = NULL;
}

/* The tool named by environment variable env with the arguments of ap up
 * to NULL, its standard output kept (out_path NULL) or opened on
 * out_path. Skips the case when env is unset. */
static inline void tool_vrun(struct tool_result *r, const char *out_path, const char *env,
			     va_list ap)
{
	const char *tool = getenv(env);
	const char *argv[32];

	if (!tool)
		ktap_skip("%s not set: run through make check", env);
	tool_argv(argv, tool, ap);
	tool_spawn(r, argv, 0, out_path);
}

/*
 * Run the tool named by environment variable env (set by make check) with
 * the NULL-terminated arguments; keep stdout and stderr. Skips the case
 * when env is unset.
 */
static inline void tool_run(struct tool_result *r, const char *env, ...)
{
	va_list ap;

	va_start(ap, env);
	tool_vrun(r, NULL, env, ap);
	va_end(ap);
}

/*
 * As tool_run, but with standard output opened on out_path (/dev/full:
 * every write to it fails) instead of kept: r->out is left empty. Status
 * 126: out_path could not be opened.
 */
static inline void tool_run_out(struct tool_result *r, const char *out_path, const char *env, ...)
{
	va_list ap;

	va_start(ap, env);
	tool_vrun(r, out_path, env, ap);
	va_end(ap);
}

#endif /* HACCEL_TESTS_TEST_UTIL_H */
