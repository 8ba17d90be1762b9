/* SPDX-License-Identifier: MIT */
/*
 * A small KTAP test harness in the kselftest manner: the plan first, each
 * case in a forked child (a crash or a hang fails that case only), a
 * per-case timeout, "ok N name # SKIP reason" for skips, and kselftest exit
 * codes (0 pass, 1 fail, 4 all skipped).
 *
 * Usage:
 *   static void t_alloc(void) { KTAP_EXPECT_EQ(f(), 0); }
 *   static const struct ktap_case cases[] = { KTAP_CASE(t_alloc), ... };
 *   int main(int argc, char **argv) { return KTAP_MAIN(argc, argv, cases); }
 *
 * Options: --list, --run NAME, --seed N, --no-fork. Environment:
 * HACCEL_TEST_SEED (replay a randomized run), HACCEL_TEST_TIMEOUT_SCALE
 * (multiply every timeout, for sanitizer or valgrind builds).
 *
 * --no-fork runs every case in the harness's own process, for a debugger.
 * A failed expectation, a failed KTAP_ASSERT, ktap_end() and ktap_skip()
 * end only their case (they jump back to the runner) and the next case
 * runs, with the same seed stream as a forked run. What the case had not
 * released when it ended (memory, descriptors, children) stays until the
 * process exits, and a crash, an abort or a hang stops the whole run: there
 * is no timeout. ktap_end() or ktap_skip() called in a process the case
 * forked ends that process, as without --no-fork.
 */
#ifndef HACCEL_TESTS_KTAP_H
#define HACCEL_TESTS_KTAP_H

#include <stddef.h>
#include <stdint.h>

#define KTAP_EXIT_PASS 0
#define KTAP_EXIT_FAIL 1
#define KTAP_EXIT_SKIP 4

#define KTAP_DEFAULT_TIMEOUT 60

struct ktap_case {
	const char *name;
	void (*fn)(void);
	unsigned int timeout_s; /* 0: KTAP_DEFAULT_TIMEOUT */
};

#define KTAP_CASE(fn) { #fn, fn, 0 }
#define KTAP_CASE_TIMEOUT(fn, s) { #fn, fn, (s) }

int ktap_main(int argc, char **argv, const struct ktap_case *cases, size_t n);
#define KTAP_MAIN(argc, argv, cases) \
	ktap_main(argc, argv, cases, sizeof(cases) / sizeof((cases)[0]))

/* Inside a case. */
void ktap_diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ktap_fail_at(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* End the case now: failed if any expectation failed, else passed. */
void ktap_end(void) __attribute__((noreturn));
/* Skip the case with a reason (a missing GPU, privilege, package...). */
void ktap_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* Failures recorded so far in this case. */
unsigned int ktap_failures(void);

/* Seed of this run: --seed, HACCEL_TEST_SEED, or time; printed in the log. */
uint64_t ktap_seed(void);
/* Per-case PRNG (xorshift64*), seeded from ktap_seed() and the case index. */
uint64_t ktap_rand(void);
/* Uniform in [0, n) (n > 0). */
uint64_t ktap_rand_below(uint64_t n);

#define KTAP_EXPECT(cond)                                                     \
	do {                                                                  \
		if (!(cond))                                                  \
			ktap_fail_at(__FILE__, __LINE__, "expected %s", #cond); \
	} while (0)

#define KTAP_ASSERT(cond)                                                     \
	do {                                                                  \
		if (!(cond)) {                                                \
			ktap_fail_at(__FILE__, __LINE__, "required %s", #cond); \
			ktap_end();                                           \
		}                                                             \
	} while (0)

#define KTAP_EXPECT_EQ(a, b)                                                  \
	do {                                                                  \
		long long ktap_a_ = (long long)(a), ktap_b_ = (long long)(b); \
		if (ktap_a_ != ktap_b_)                                       \
			ktap_fail_at(__FILE__, __LINE__,                      \
				     "%s == %s: %lld != %lld", #a, #b,        \
				     ktap_a_, ktap_b_);                       \
	} while (0)

#define KTAP_ASSERT_EQ(a, b)                                                  \
	do {                                                                  \
		long long ktap_a_ = (long long)(a), ktap_b_ = (long long)(b); \
		if (ktap_a_ != ktap_b_) {                                     \
			ktap_fail_at(__FILE__, __LINE__,                      \
				     "%s == %s: %lld != %lld", #a, #b,        \
				     ktap_a_, ktap_b_);                       \
			ktap_end();                                           \
		}                                                             \
	} while (0)

#endif /* HACCEL_TESTS_KTAP_H */
