// SPDX-License-Identifier: MIT
/* The KTAP harness itself: a crash, a hang, a failure and a skip are each reported as such. */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ktap.h"

/* Inner cases, run by a child copy of this binary. */
static void inner_pass(void) { KTAP_EXPECT_EQ(1 + 1, 2); }
static void inner_fail(void) { KTAP_EXPECT_EQ(1 + 1, 3); }
static void inner_crash(void) { raise(SIGKILL); }
static void inner_hang(void) { for (;;) pause(); }
static void inner_skip(void) { ktap_skip("no frobnicator"); }
static void inner_assert(void)
{
	KTAP_ASSERT(0);
	printf("# unreachable line printed\n");
}

static void *volatile leaked;
static void inner_leak(void)
{
	leaked = malloc(4096);
	leaked = NULL;
}

static const struct ktap_case inner[] = {
	KTAP_CASE(inner_pass),
	KTAP_CASE(inner_fail),
	KTAP_CASE(inner_crash),
	KTAP_CASE_TIMEOUT(inner_hang, 1),
	KTAP_CASE(inner_skip),
	KTAP_CASE(inner_assert),
	KTAP_CASE(inner_leak),
};

static const struct ktap_case inner_skips[] = {
	KTAP_CASE(inner_skip),
};

/* Run this binary in inner mode; capture stdout and the exit status. */
static int run_inner(const char *mode, char *out, size_t len, int *status)
{
	int pfd[2];
	pid_t pid;
	size_t got = 0;

	if (pipe(pfd))
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		dup2(pfd[1], STDOUT_FILENO);
		close(pfd[0]);
		close(pfd[1]);
		setenv("KTAP_SELFTEST_INNER", mode, 1);
		setenv("HACCEL_TEST_TIMEOUT_SCALE", "1", 1);
		execl("/proc/self/exe", "harness-ktap", "--seed", "42", (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	for (;;) {
		ssize_t n = read(pfd[0], out + got, len - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	out[got] = '\0';
	close(pfd[0]);
	waitpid(pid, status, 0);
	return 0;
}

static int has_line(const char *out, const char *line)
{
	size_t n = strlen(line);

	for (const char *p = out; (p = strstr(p, line)); p += n)
		if ((p == out || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
			return 1;
	return 0;
}

static void t_reports_each_outcome(void)
{
	static char out[16384];
	int status;

	KTAP_ASSERT_EQ(run_inner("mixed", out, sizeof(out), &status), 0);
	KTAP_EXPECT(!strncmp(out, "TAP version 13\n1..7\n", 20));
	KTAP_EXPECT(has_line(out, "# seed: 42 (replay with HACCEL_TEST_SEED=42)"));
	KTAP_EXPECT(has_line(out, "ok 1 inner_pass"));
	KTAP_EXPECT(has_line(out, "not ok 2 inner_fail"));
	KTAP_EXPECT(strstr(out, "1 + 1 == 3: 2 != 3") != NULL);
	KTAP_EXPECT(has_line(out, "not ok 3 inner_crash"));
	KTAP_EXPECT(strstr(out, "inner_crash: killed by signal 9") != NULL);
	KTAP_EXPECT(has_line(out, "not ok 4 inner_hang"));
	KTAP_EXPECT(strstr(out, "inner_hang: timed out after 1 s") != NULL);
	KTAP_EXPECT(has_line(out, "ok 5 inner_skip # SKIP no frobnicator"));
	KTAP_EXPECT(has_line(out, "not ok 6 inner_assert"));
	KTAP_EXPECT(strstr(out, "unreachable") == NULL);
#if defined(__SANITIZE_ADDRESS__)
	/* LeakSanitizer runs when a case exits: a leak fails the case. */
	KTAP_EXPECT(has_line(out, "not ok 7 inner_leak"));
	KTAP_EXPECT(has_line(out, "# Totals: pass:1 fail:5 xfail:0 xpass:0 skip:1 error:0"));
#else
	KTAP_EXPECT(has_line(out, "ok 7 inner_leak"));
	KTAP_EXPECT(has_line(out, "# Totals: pass:2 fail:4 xfail:0 xpass:0 skip:1 error:0"));
#endif
	KTAP_EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == KTAP_EXIT_FAIL);
	if (ktap_failures())
		ktap_diag("inner output was:\n%s", out);
}

static void t_all_skipped_exits_4(void)
{
	static char out[4096];
	int status;

	KTAP_ASSERT_EQ(run_inner("skips", out, sizeof(out), &status), 0);
	KTAP_EXPECT(has_line(out, "ok 1 inner_skip # SKIP no frobnicator"));
	KTAP_EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == KTAP_EXIT_SKIP);
}

static void t_seed_drives_rand(void)
{
	/* Same seed and case index give the same stream: replays are exact. */
	uint64_t a = ktap_rand(), b = ktap_rand();

	KTAP_EXPECT(a != b);
	KTAP_EXPECT(ktap_rand_below(7) < 7);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_reports_each_outcome),
	KTAP_CASE(t_all_skipped_exits_4),
	KTAP_CASE(t_seed_drives_rand),
};

int main(int argc, char **argv)
{
	const char *mode = getenv("KTAP_SELFTEST_INNER");

	if (mode && !strcmp(mode, "mixed"))
		return KTAP_MAIN(argc, argv, inner);
	if (mode && !strcmp(mode, "skips"))
		return KTAP_MAIN(argc, argv, inner_skips);
	return KTAP_MAIN(argc, argv, cases);
}
