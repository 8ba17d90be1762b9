// SPDX-License-Identifier: MIT
/* The KTAP harness: see ktap.h. */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ktap.h"

static unsigned int failures;
static uint64_t seed;
static uint64_t rng_state;
static int skip_fd = -1; /* child writes its skip reason here */

/*
 * --no-fork: the case runs in this process, and ktap_end()/ktap_skip()
 * jump back to the runner instead of exiting, so the next case still runs.
 * case_pid guards against a process the case forked itself: there, ending
 * the case must exit that process, never resume the runner's loop.
 */
static jmp_buf *case_jmp;
static pid_t case_pid;
static int case_result;
static char case_skip_reason[256];

void ktap_diag(const char *fmt, ...)
{
	va_list ap;

	fputs("# ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
}

void ktap_fail_at(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	printf("# %s:%d: ", file, line);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
	failures++;
}

unsigned int ktap_failures(void)
{
	return failures;
}

/* Back to the in-process runner, when there is one (--no-fork). */
static void end_in_process(int result)
{
	if (case_jmp && getpid() == case_pid) {
		case_result = result;
		longjmp(*case_jmp, 1);
	}
}

void ktap_end(void)
{
	int result = failures ? KTAP_EXIT_FAIL : KTAP_EXIT_PASS;

	fflush(stdout);
	end_in_process(result);
	/* exit(), not _exit(): LeakSanitizer and valgrind check at exit, so a
	 * case that leaks fails under them. */
	exit(result);
}

void ktap_skip(const char *fmt, ...)
{
	char reason[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	/* A case that already failed a check stays failed: a skip after it
	 * must not turn it into "ok # SKIP". */
	if (failures) {
		printf("# skip asked after %d failed check%s: %s\n", failures,
		       failures == 1 ? "" : "s", reason);
		ktap_end();
	}
	if (skip_fd >= 0) {
		ssize_t w = write(skip_fd, reason, strlen(reason));
		(void)w;
	}
	fflush(stdout);
	if (case_jmp && getpid() == case_pid)
		snprintf(case_skip_reason, sizeof(case_skip_reason), "%s", reason);
	end_in_process(KTAP_EXIT_SKIP);
	exit(KTAP_EXIT_SKIP);
}

uint64_t ktap_seed(void)
{
	return seed;
}

uint64_t ktap_rand(void)
{
	uint64_t x = rng_state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	rng_state = x;
	return x * 0x2545f4914f6cdd1dull;
}

uint64_t ktap_rand_below(uint64_t n)
{
	return ktap_rand() % n;
}

static void seed_case(size_t index)
{
	uint64_t x = seed + 0x9e3779b97f4a7c15ull * (index + 1);

	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	rng_state = x ? x : 1;
}

static double timeout_scale(void)
{
	const char *s = getenv("HACCEL_TEST_TIMEOUT_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;

	return v > 0 ? v : 1.0;
}

/* Run one case in a child; returns the KTAP_EXIT_* code, fills detail. */
static int run_forked(const struct ktap_case *c, size_t index, char *detail,
		      size_t detail_len)
{
	unsigned int limit = c->timeout_s ? c->timeout_s : KTAP_DEFAULT_TIMEOUT;
	struct timespec ts;
	sigset_t mask, old;
	int pfd[2], status = 0;
	pid_t pid;

	limit = (unsigned int)(limit * timeout_scale() + 0.5);
	detail[0] = '\0';
	if (pipe(pfd)) {
		snprintf(detail, detail_len, "pipe: %s", strerror(errno));
		return KTAP_EXIT_FAIL;
	}
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigprocmask(SIG_BLOCK, &mask, &old);
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		snprintf(detail, detail_len, "fork: %s", strerror(errno));
		sigprocmask(SIG_SETMASK, &old, NULL);
		close(pfd[0]);
		close(pfd[1]);
		return KTAP_EXIT_FAIL;
	}
	if (pid == 0) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		close(pfd[0]);
		skip_fd = pfd[1];
		failures = 0;
		seed_case(index);
		c->fn();
		ktap_end();
	}
	close(pfd[1]);

	/* Wait for the child or the deadline, whichever comes first. */
	ts.tv_sec = limit;
	ts.tv_nsec = 0;
	for (;;) {
		pid_t w = waitpid(pid, &status, WNOHANG);

		if (w == pid)
			break;
		if (sigtimedwait(&mask, NULL, &ts) < 0 && errno == EAGAIN) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			snprintf(detail, detail_len, "timed out after %u s", limit);
			status = -1;
			break;
		}
		/* A SIGCHLD arrived: loop to reap; the remaining time shrinks
		 * only approximately, which is fine for a hang detector. */
	}
	sigprocmask(SIG_SETMASK, &old, NULL);

	char reason[256];
	ssize_t n = read(pfd[0], reason, sizeof(reason) - 1);
	close(pfd[0]);
	reason[n > 0 ? n : 0] = '\0';

	if (status == -1)
		return KTAP_EXIT_FAIL;
	if (WIFSIGNALED(status)) {
		snprintf(detail, detail_len, "killed by signal %d (%s)",
			 WTERMSIG(status), strsignal(WTERMSIG(status)));
		return KTAP_EXIT_FAIL;
	}
	if (!WIFEXITED(status)) {
		snprintf(detail, detail_len, "ended abnormally");
		return KTAP_EXIT_FAIL;
	}
	switch (WEXITSTATUS(status)) {
	case KTAP_EXIT_PASS:
		return KTAP_EXIT_PASS;
	case KTAP_EXIT_SKIP:
		snprintf(detail, detail_len, "%s", reason[0] ? reason : "skipped");
		return KTAP_EXIT_SKIP;
	case KTAP_EXIT_FAIL:
		return KTAP_EXIT_FAIL;
	default:
		snprintf(detail, detail_len, "exited with status %d",
			 WEXITSTATUS(status));
		return KTAP_EXIT_FAIL;
	}
}

/*
 * Run one case in this process (--no-fork, for a debugger): a crash or a
 * hang takes the whole run down and there is no timeout, but a skip or a
 * failed assertion ends only its case. Memory and descriptors the case had
 * not released when it ended stay allocated until the process exits.
 */
static int run_in_process(const struct ktap_case *c, size_t index, char *detail,
			  size_t detail_len)
{
	jmp_buf jb;

	detail[0] = '\0';
	case_skip_reason[0] = '\0';
	failures = 0;
	seed_case(index);
	case_pid = getpid();
	if (setjmp(jb) == 0) {
		case_jmp = &jb;
		c->fn();
		case_result = failures ? KTAP_EXIT_FAIL : KTAP_EXIT_PASS;
	}
	case_jmp = NULL;
	fflush(stdout);
	if (case_result == KTAP_EXIT_SKIP)
		snprintf(detail, detail_len, "%s",
			 case_skip_reason[0] ? case_skip_reason : "skipped");
	return case_result;
}

static void usage(const char *argv0)
{
	printf("usage: %s [--list] [--run NAME] [--seed N] [--no-fork]\n", argv0);
}

int ktap_main(int argc, char **argv, const struct ktap_case *cases, size_t n)
{
	const char *only = NULL, *env;
	int no_fork = 0, list = 0;
	unsigned int pass = 0, fail = 0, skip = 0;
	size_t planned = n;

	env = getenv("HACCEL_TEST_SEED");
	seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--list")) {
			list = 1;
		} else if (!strcmp(argv[i], "--run") && i + 1 < argc) {
			only = argv[++i];
		} else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
			seed = strtoull(argv[++i], NULL, 0);
		} else if (!strcmp(argv[i], "--no-fork")) {
			no_fork = 1;
		} else {
			usage(argv[0]);
			return strcmp(argv[i], "--help") ? 2 : 0;
		}
	}
	if (list) {
		for (size_t i = 0; i < n; i++)
			printf("%s\n", cases[i].name);
		return 0;
	}
	if (only) {
		planned = 0;
		for (size_t i = 0; i < n; i++)
			planned += !strcmp(cases[i].name, only);
		if (!planned) {
			fprintf(stderr, "no test case named %s\n", only);
			return 2;
		}
	}
	/* stdout may be a pipe to the TAP driver: keep lines in order. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("TAP version 13\n1..%zu\n", planned);
	printf("# seed: %llu (replay with HACCEL_TEST_SEED=%llu)\n",
	       (unsigned long long)seed, (unsigned long long)seed);

	size_t num = 0;
	for (size_t i = 0; i < n; i++) {
		char detail[320];
		int r;

		if (only && strcmp(cases[i].name, only))
			continue;
		num++;
		if (no_fork) {
			r = run_in_process(&cases[i], i, detail, sizeof(detail));
		} else {
			r = run_forked(&cases[i], i, detail, sizeof(detail));
		}
		switch (r) {
		case KTAP_EXIT_PASS:
			printf("ok %zu %s\n", num, cases[i].name);
			pass++;
			break;
		case KTAP_EXIT_SKIP:
			printf("ok %zu %s # SKIP %s\n", num, cases[i].name, detail);
			skip++;
			break;
		default:
			if (detail[0])
				printf("# %s: %s\n", cases[i].name, detail);
			printf("not ok %zu %s\n", num, cases[i].name);
			fail++;
		}
	}
	printf("# Totals: pass:%u fail:%u xfail:0 xpass:0 skip:%u error:0\n",
	       pass, fail, skip);
	if (fail)
		return KTAP_EXIT_FAIL;
	return pass == 0 && skip ? KTAP_EXIT_SKIP : KTAP_EXIT_PASS;
}
