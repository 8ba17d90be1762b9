/* SPDX-License-Identifier: MIT */
/* Helpers shared by tests: fixture files and trees, running the tools. */
#ifndef HACCEL_TESTS_TEST_UTIL_H
#define HACCEL_TESTS_TEST_UTIL_H

#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ktap.h"

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

/*
 * Run the tool named by environment variable env (set by make check) with
 * the NULL-terminated arguments; keep stdout and stderr. Skips the case
 * when env is unset.
 */
static inline void tool_run(struct tool_result *r, const char *env, ...)
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
	test_drain(pout[0], r->out, sizeof(r->out));
	close(pout[0]);
	waitpid(pid, &st, 0);
	lseek(efd, 0, SEEK_SET);
	test_drain(efd, r->err, sizeof(r->err));
	close(efd);
	r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

#endif /* HACCEL_TESTS_TEST_UTIL_H */
