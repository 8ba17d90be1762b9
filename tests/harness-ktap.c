// SPDX-License-Identifier: MIT
/* The KTAP harness itself: each outcome reported as such, seeds replay exactly, --no-fork goes on after a skip or an assertion. */
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

/* A check fails, then the case asks to skip: still a failure. */
static void inner_fail_then_skip(void)
{
	KTAP_EXPECT_EQ(1 + 1, 3);
	ktap_skip("no frobnicator after all");
}

static const struct ktap_case inner_failskip[] = {
	KTAP_CASE(inner_fail_then_skip),
	KTAP_CASE(inner_skip),
};

/* Print a case's random stream, for the replay test. */
static void print_stream(const char *tag)
{
	char line[512];
	int n = snprintf(line, sizeof(line), "rand %s:", tag);

	for (int i = 0; i < 8; i++)
		n += snprintf(line + n, sizeof(line) - (size_t)n, " %016llx",
			      (unsigned long long)ktap_rand());
	for (int i = 0; i < 8; i++)
		n += snprintf(line + n, sizeof(line) - (size_t)n, " %llu",
			      (unsigned long long)ktap_rand_below(1000));
	ktap_diag("%s", line);
}

static void inner_rand_a(void) { print_stream("a"); }
static void inner_rand_b(void) { print_stream("b"); }

static const struct ktap_case inner_rand[] = {
	KTAP_CASE(inner_rand_a),
	KTAP_CASE(inner_rand_b),
};

/* Ending the case in a process the case forked ends that process only. */
static void inner_child_assert(void)
{
	int st = 0;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	KTAP_ASSERT(pid >= 0);
	if (pid == 0) {
		KTAP_ASSERT(0);
		_exit(99);
	}
	KTAP_ASSERT_EQ(waitpid(pid, &st, 0), pid);
	KTAP_EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == KTAP_EXIT_FAIL);
}

/* Runs after a failure, a skip and an assertion in the same process. */
static void inner_after(void)
{
	KTAP_EXPECT_EQ(ktap_failures(), 0);
}

static const struct ktap_case inner_nofork[] = {
	KTAP_CASE(inner_pass),
	KTAP_CASE(inner_fail),
	KTAP_CASE(inner_skip),
	KTAP_CASE(inner_assert),
	KTAP_CASE(inner_after),
	KTAP_CASE(inner_child_assert),
};

/*
 * Run this binary in inner mode with the NULL-terminated arguments args
 * and, when env_seed is not NULL, HACCEL_TEST_SEED=env_seed (else unset);
 * capture stdout and the exit status.
 */
static int run_inner_args(const char *mode, const char *env_seed,
			  const char *const *args, char *out, size_t len,
			  int *status)
{
	const char *argv[16] = { "harness-ktap" };
	int pfd[2], argc = 1;
	pid_t pid;
	size_t got = 0;

	while (args && *args && argc < 15)
		argv[argc++] = *args++;
	argv[argc] = NULL;
	if (pipe(pfd))
		return -1;
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		dup2(pfd[1], STDOUT_FILENO);
		close(pfd[0]);
		close(pfd[1]);
		setenv("KTAP_SELFTEST_INNER", mode, 1);
		setenv("HACCEL_TEST_TIMEOUT_SCALE", "1", 1);
		if (env_seed)
			setenv("HACCEL_TEST_SEED", env_seed, 1);
		else
			unsetenv("HACCEL_TEST_SEED");
		execv("/proc/self/exe", (char *const *)argv);
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

static int run_inner(const char *mode, char *out, size_t len, int *status)
{
	static const char *const args[] = { "--seed", "42", NULL };

	return run_inner_args(mode, NULL, args, out, len, status);
}

/* Lines of out equal to line. */
static int count_lines(const char *out, const char *line)
{
	size_t n = strlen(line);
	int k = 0;

	for (const char *p = out; (p = strstr(p, line)); p += n)
		if ((p == out || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
			k++;
	return k;
}

static int has_line(const char *out, const char *line)
{
	return count_lines(out, line) > 0;
}

/* Copy the line of out that starts with prefix into line; 0 when found. */
static int find_line(const char *out, const char *prefix, char *line, size_t len)
{
	size_t n = strlen(prefix);

	for (const char *p = out; (p = strstr(p, prefix)); p += n)
		if (p == out || p[-1] == '\n') {
			size_t k = strcspn(p, "\n");

			if (k >= len)
				return -1;
			memcpy(line, p, k);
			line[k] = '\0';
			return 0;
		}
	return -1;
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

/* A skip after a failed check does not hide it, forked or not. */
static void t_skip_after_failure_fails(void)
{
	static const char *const nofork[] = { "--no-fork", NULL };
	static const char *const none[] = { NULL };
	static char out[4096];
	int status;

	for (int k = 0; k < 2; k++) {
		KTAP_ASSERT_EQ(run_inner_args("failskip", NULL, k ? nofork : none, out, sizeof(out),
					      &status), 0);
		KTAP_EXPECT(has_line(out, "not ok 1 inner_fail_then_skip"));
		KTAP_EXPECT(strstr(out, "skip asked after 1 failed check: no frobnicator after all") != NULL);
		KTAP_EXPECT(has_line(out, "ok 2 inner_skip # SKIP no frobnicator"));
		KTAP_EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == KTAP_EXIT_FAIL);
		if (ktap_failures())
			ktap_diag("inner output (%s) was:\n%s", k ? "--no-fork" : "forked", out);
	}
}

/* One inner "rand" run: the streams cases a and b printed. */
static void rand_run(const char *env_seed, const char *const *args, char *a,
		     char *b, size_t len)
{
	static char out[8192];
	int status;

	KTAP_ASSERT_EQ(run_inner_args("rand", env_seed, args, out, sizeof(out),
				      &status), 0);
	KTAP_EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == KTAP_EXIT_PASS);
	if (find_line(out, "# rand a: ", a, len) || find_line(out, "# rand b: ", b, len)) {
		ktap_fail_at(__FILE__, __LINE__, "no stream printed; output was:\n%s", out);
		ktap_end();
	}
}

static void t_seed_drives_rand(void)
{
	static const char *const seed42[] = { "--seed", "42", NULL };
	static const char *const seed43[] = { "--seed", "43", NULL };
	static const char *const seed42_nofork[] = { "--seed", "42", "--no-fork", NULL };
	static const char *const none[] = { NULL };
	char a1[512], b1[512], a2[512], b2[512];

	/* The same seed twice: the same values, case by case. */
	rand_run(NULL, seed42, a1, b1, sizeof(a1));
	rand_run(NULL, seed42, a2, b2, sizeof(a2));
	KTAP_EXPECT(!strcmp(a1, a2));
	KTAP_EXPECT(!strcmp(b1, b2));
	/* Each case has its own stream. */
	KTAP_EXPECT(strcmp(a1 + 8, b1 + 8) != 0);
	/* HACCEL_TEST_SEED replays what --seed ran, and --seed wins over it. */
	rand_run("42", none, a2, b2, sizeof(a2));
	KTAP_EXPECT(!strcmp(a1, a2) && !strcmp(b1, b2));
	rand_run("7", seed42, a2, b2, sizeof(a2));
	KTAP_EXPECT(!strcmp(a1, a2) && !strcmp(b1, b2));
	/* In-process runs draw the same streams as forked ones. */
	rand_run(NULL, seed42_nofork, a2, b2, sizeof(a2));
	KTAP_EXPECT(!strcmp(a1, a2) && !strcmp(b1, b2));
	/* Another seed, other values. */
	rand_run(NULL, seed43, a2, b2, sizeof(a2));
	KTAP_EXPECT(strcmp(a1, a2) != 0 && strcmp(b1, b2) != 0);
	if (ktap_failures())
		ktap_diag("seed 42 printed:\n# %s\n# %s", a1, b1);
}

/* --no-fork: a failure, a skip or an assertion ends its case, not the run. */
static void t_no_fork_goes_on(void)
{
	static const char *const args[] = { "--seed", "42", "--no-fork", NULL };
	static char out[16384];
	int status;

	KTAP_ASSERT_EQ(run_inner_args("nofork", NULL, args, out, sizeof(out), &status), 0);
	KTAP_EXPECT_EQ(count_lines(out, "TAP version 13"), 1);
	KTAP_EXPECT(has_line(out, "1..6"));
	KTAP_EXPECT(has_line(out, "ok 1 inner_pass"));
	KTAP_EXPECT(has_line(out, "not ok 2 inner_fail"));
	KTAP_EXPECT(has_line(out, "ok 3 inner_skip # SKIP no frobnicator"));
	KTAP_EXPECT(has_line(out, "not ok 4 inner_assert"));
	KTAP_EXPECT(strstr(out, "unreachable") == NULL);
	KTAP_EXPECT_EQ(count_lines(out, "ok 5 inner_after"), 1);
	KTAP_EXPECT_EQ(count_lines(out, "ok 6 inner_child_assert"), 1);
	KTAP_EXPECT(has_line(out, "# Totals: pass:3 fail:2 xfail:0 xpass:0 skip:1 error:0"));
	KTAP_EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == KTAP_EXIT_FAIL);
	if (ktap_failures())
		ktap_diag("inner output was:\n%s", out);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_reports_each_outcome),
	KTAP_CASE(t_all_skipped_exits_4),
	KTAP_CASE(t_skip_after_failure_fails),
	KTAP_CASE(t_seed_drives_rand),
	KTAP_CASE(t_no_fork_goes_on),
};

int main(int argc, char **argv)
{
	const char *mode = getenv("KTAP_SELFTEST_INNER");

	if (mode && !strcmp(mode, "mixed"))
		return KTAP_MAIN(argc, argv, inner);
	if (mode && !strcmp(mode, "skips"))
		return KTAP_MAIN(argc, argv, inner_skips);
	if (mode && !strcmp(mode, "failskip"))
		return KTAP_MAIN(argc, argv, inner_failskip);
	if (mode && !strcmp(mode, "rand"))
		return KTAP_MAIN(argc, argv, inner_rand);
	if (mode && !strcmp(mode, "nofork"))
		return KTAP_MAIN(argc, argv, inner_nofork);
	return KTAP_MAIN(argc, argv, cases);
}
