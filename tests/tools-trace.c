// SPDX-License-Identifier: MIT
/* haccel-bench decode --trace: trace_gaps on hand-made kernel sets (overlapping, nested, touching, straddling a window edge, empty windows, unsorted input, names) with exact answers; no GPU. */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ktap.h"
#include "tools/bench_trace.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* Figures of a summary that must be whole numbers of ns: medians of
 * integers (or halfway between two), exact in a double, so compared
 * exactly. */
#define EXPECT_NS(v, want)                                                          \
	do {                                                                        \
		double ns_got_ = (v);                                               \
		long long ns_want_ = (want);                                        \
		if (ns_got_ != (double)ns_want_)                                    \
			ktap_fail_at(__FILE__, __LINE__, "%s == %s: %.17g != %lld", \
				     #v, #want, ns_got_, ns_want_);                 \
	} while (0)

static struct trace_summary one(const struct trace_kernel *k, size_t n, uint64_t ws, uint64_t we)
{
	struct trace_summary s;

	KTAP_ASSERT_EQ(trace_gaps(k, n, &ws, &we, 1, &s), 0);
	return s;
}

/* [100,200) and [150,300): busy 200, span 200, no gap. */
static void t_overlapping(void)
{
	const struct trace_kernel k[] = { { 100, 200, "a", 0 }, { 150, 300, "b", 0 } };
	struct trace_summary s = one(k, N(k), 0, 1000);

	KTAP_EXPECT_EQ(s.steps, 1);
	KTAP_EXPECT_EQ(s.empty, 0);
	EXPECT_NS(s.span_ns, 200);
	EXPECT_NS(s.busy_ns, 200);
	EXPECT_NS(s.gap_ns, 0);
	EXPECT_NS(s.kernels, 2);
	KTAP_EXPECT_EQ(s.total_span_ns, 200);
	KTAP_EXPECT_EQ(s.total_busy_ns, 200);
	KTAP_EXPECT(s.gap_fraction == 0);
	/* Per name: each kernel's own time, overlap included in both. */
	KTAP_ASSERT_EQ(s.ntop, 2);
	KTAP_EXPECT_EQ(s.names, 2);
	KTAP_EXPECT(!strcmp(s.top[0].name, "b"));
	KTAP_EXPECT_EQ(s.top[0].ns, 150);
	KTAP_EXPECT_EQ(s.top[0].count, 1);
	KTAP_EXPECT(!strcmp(s.top[1].name, "a"));
	KTAP_EXPECT_EQ(s.top[1].ns, 100);
}

/* [0,1000) holding [100,200) and [300,900), then [1100,1200): busy 1100
 * of a 1200 span, the gap [1000,1100). */
static void t_nested(void)
{
	const struct trace_kernel k[] = {
		{ 0, 1000, "outer", 0 }, { 100, 200, "in", 0 }, { 300, 900, "in", 0 }, { 1100, 1200, "after", 0 },
	};
	struct trace_summary s = one(k, N(k), 0, 5000);

	EXPECT_NS(s.span_ns, 1200);
	EXPECT_NS(s.busy_ns, 1100);
	EXPECT_NS(s.gap_ns, 100);
	EXPECT_NS(s.kernels, 4);
	KTAP_EXPECT(s.gap_fraction == 100.0 / 1200.0);
	KTAP_ASSERT_EQ(s.ntop, 3);
	KTAP_EXPECT(!strcmp(s.top[0].name, "outer"));
	KTAP_EXPECT_EQ(s.top[0].ns, 1000);
	KTAP_EXPECT(!strcmp(s.top[1].name, "in"));
	KTAP_EXPECT_EQ(s.top[1].ns, 700);
	KTAP_EXPECT_EQ(s.top[1].count, 2);
	KTAP_EXPECT(!strcmp(s.top[2].name, "after"));
	KTAP_EXPECT_EQ(s.top[2].ns, 100);
}

/* Back to back: no gap at the joins; then one gap of 50. */
static void t_touching(void)
{
	const struct trace_kernel k[] = {
		{ 10, 20, "x", 0 }, { 20, 30, "x", 0 }, { 30, 40, "x", 0 }, { 90, 100, "x", 0 },
	};
	struct trace_summary s = one(k, N(k), 10, 100);

	EXPECT_NS(s.span_ns, 90);
	EXPECT_NS(s.busy_ns, 40);
	EXPECT_NS(s.gap_ns, 50);
	KTAP_EXPECT_EQ(s.names, 1);
	KTAP_EXPECT_EQ(s.top[0].count, 4);
	KTAP_EXPECT_EQ(s.top[0].ns, 40);
}

/* Window [100,200): a kernel from 50 to 130 counts from 100, one from 180
 * to 260 until 200; [60,100) ends at the edge and is out, as is one
 * starting at 200. */
static void t_straddling(void)
{
	const struct trace_kernel k[] = {
		{ 50, 130, "left", 0 }, { 150, 160, "mid", 0 }, { 180, 260, "right", 0 },
		{ 60, 100, "before", 0 }, { 200, 220, "next", 0 },
	};
	struct trace_summary s = one(k, N(k), 100, 200);

	EXPECT_NS(s.span_ns, 100);
	EXPECT_NS(s.busy_ns, 30 + 10 + 20);
	EXPECT_NS(s.gap_ns, 40);
	EXPECT_NS(s.kernels, 3);
	KTAP_EXPECT_EQ(s.names, 3);
	KTAP_ASSERT_EQ(s.ntop, 3);
	KTAP_EXPECT(!strcmp(s.top[0].name, "left"));
	KTAP_EXPECT_EQ(s.top[0].ns, 30);
	KTAP_EXPECT(!strcmp(s.top[1].name, "right"));
	KTAP_EXPECT_EQ(s.top[1].ns, 20);
	KTAP_EXPECT(!strcmp(s.top[2].name, "mid"));
	KTAP_EXPECT_EQ(s.top[2].ns, 10);
}

/* Windows without kernels are counted apart and change no figure. */
static void t_empty(void)
{
	const struct trace_kernel k[] = { { 10, 20, "a", 0 }, { 40, 50, "a", 0 } };
	const uint64_t ws[] = { 0, 100, 300, 500 }, we[] = { 100, 200, 300, 400 };
	struct trace_summary s;

	KTAP_ASSERT_EQ(trace_gaps(k, N(k), ws, we, N(ws), &s), 0);
	KTAP_EXPECT_EQ(s.steps, 1);
	KTAP_EXPECT_EQ(s.empty, 3);
	EXPECT_NS(s.span_ns, 40);
	EXPECT_NS(s.busy_ns, 20);
	EXPECT_NS(s.gap_ns, 20);
	EXPECT_NS(s.kernels, 2);
	KTAP_EXPECT(s.gap_fraction == 0.5);

	/* No kernels, no windows: zeros, not a division by zero. */
	KTAP_ASSERT_EQ(trace_gaps(NULL, 0, ws, we, N(ws), &s), 0);
	KTAP_EXPECT_EQ(s.steps, 0);
	KTAP_EXPECT_EQ(s.empty, 4);
	EXPECT_NS(s.span_ns, 0);
	KTAP_EXPECT(s.gap_fraction == 0);
	KTAP_EXPECT_EQ(s.ntop, 0);
	KTAP_ASSERT_EQ(trace_gaps(k, N(k), NULL, NULL, 0, &s), 0);
	KTAP_EXPECT_EQ(s.steps + s.empty, 0);
	/* Kernels outside every window name nothing. */
	KTAP_EXPECT_EQ(s.names, 0);
}

/* Three steps given out of order, their kernels shuffled: the medians of
 * spans 100, 300, 200 and so on, exact, and the input left as it was. */
static void t_unsorted(void)
{
	struct trace_kernel k[] = {
		{ 2250, 2300, "g", 0 }, { 1000, 1100, "g", 0 }, { 30, 60, "h", 0 }, { 2000, 2100, "h", 0 },
		{ 1200, 1300, "g", 0 }, { 0, 10, "g", 0 }, { 1000, 1050, "h", 0 }, { 90, 100, "g", 0 },
		{ 2100, 2200, "h", 0 },
	};
	const uint64_t ws[] = { 2000, 0, 1000 }, we[] = { 3000, 1000, 2000 };
	struct trace_kernel copy[N(k)];
	struct trace_summary s;

	memcpy(copy, k, sizeof(k));
	KTAP_ASSERT_EQ(trace_gaps(k, N(k), ws, we, N(ws), &s), 0);
	KTAP_EXPECT(!memcmp(copy, k, sizeof(k)));
	/* Step [0,1000): span 100, busy 10 + 30 + 10 = 50.
	 * Step [1000,2000): span 300, busy 100 + 100 = 200.
	 * Step [2000,3000): span 300, busy 200 + 50 = 250. */
	KTAP_EXPECT_EQ(s.steps, 3);
	EXPECT_NS(s.span_ns, 300);
	EXPECT_NS(s.busy_ns, 200);
	EXPECT_NS(s.gap_ns, 50);
	EXPECT_NS(s.kernels, 3);
	KTAP_EXPECT_EQ(s.total_span_ns, 700);
	KTAP_EXPECT_EQ(s.total_busy_ns, 500);
	KTAP_EXPECT(s.gap_fraction == 200.0 / 700.0);
	KTAP_ASSERT_EQ(s.ntop, 2);
	KTAP_EXPECT(!strcmp(s.top[0].name, "h"));
	KTAP_EXPECT_EQ(s.top[0].ns, 30 + 50 + 100 + 100);
	KTAP_EXPECT_EQ(s.top[0].count, 4);
	KTAP_EXPECT(!strcmp(s.top[1].name, "g"));
	KTAP_EXPECT_EQ(s.top[1].ns, 10 + 10 + 100 + 100 + 50);
	KTAP_EXPECT_EQ(s.top[1].count, 5);
}

/* An even number of steps: medians halfway; kernels of no length count. */
static void t_even_median(void)
{
	const struct trace_kernel k[] = {
		{ 0, 10, "a", 0 }, { 100, 130, "a", 0 }, { 200, 200, "z", 0 }, { 200, 210, "a", 0 },
	};
	const uint64_t ws[] = { 0, 100, 200 }, we[] = { 100, 200, 300 };
	struct trace_summary s;

	KTAP_ASSERT_EQ(trace_gaps(k, N(k), ws, we, 2, &s), 0);
	EXPECT_NS(s.span_ns, 20);
	EXPECT_NS(s.busy_ns, 20);
	EXPECT_NS(s.kernels, 1);
	KTAP_ASSERT_EQ(trace_gaps(k, N(k), ws, we, 3, &s), 0);
	KTAP_EXPECT_EQ(s.steps, 3);
	EXPECT_NS(s.kernels, 1);
	KTAP_EXPECT_EQ(s.names, 2);
	KTAP_ASSERT_EQ(s.ntop, 2);
	KTAP_EXPECT(!strcmp(s.top[1].name, "z"));
	KTAP_EXPECT_EQ(s.top[1].count, 1);
	KTAP_EXPECT_EQ(s.top[1].ns, 0);
}

/* More names than the table: the 15 longest, longest first, equal names
 * from different strings merged. */
static void t_top(void)
{
	struct trace_kernel k[40];
	char names[20][8];
	struct trace_summary s;
	uint64_t ws = 0, we = 1u << 20, t = 0;

	for (int i = 0; i < 20; i++) {
		snprintf(names[i], sizeof(names[i]), "k%02d", i);
		/* Two records of each name, the second from its own copy. */
		k[2 * i] = (struct trace_kernel){ t, t + 10 * (uint64_t)(i + 1), names[i], 0 };
		t += 1000;
		k[2 * i + 1] = (struct trace_kernel){ t, t + 1, i % 2 ? strdup(names[i]) : names[i], 0 };
		t += 1000;
	}
	KTAP_ASSERT_EQ(trace_gaps(k, N(k), &ws, &we, 1, &s), 0);
	KTAP_EXPECT_EQ(s.names, 20);
	KTAP_ASSERT_EQ(s.ntop, TRACE_TOP);
	for (int i = 0; i < TRACE_TOP; i++) {
		KTAP_EXPECT(!strcmp(s.top[i].name, names[19 - i]));
		KTAP_EXPECT_EQ(s.top[i].ns, 10 * (uint64_t)(20 - i) + 1);
		KTAP_EXPECT_EQ(s.top[i].count, 2);
	}
	for (int i = 1; i < 20; i += 2)
		free((void *)k[2 * i + 1].name);
}

/*
 * Copies and memsets: busy only between the window's first kernel start
 * and last kernel end (the step's input copy before its kernels and the
 * tail of its output copy after them are no part of the span); a copy
 * with no kernel in its window leaves the window empty.
 */
static void t_copies(void)
{
	const struct trace_kernel k[] = {
		{ 100, 200, "a", 0 },     { 300, 400, "a", 0 },   { 50, 80, "(copy)", 1 },
		{ 220, 250, "(copy)", 1 }, { 380, 500, "(copy)", 1 }, { 2000, 2100, "(copy)", 1 },
	};
	uint64_t ws[2] = { 0, 1500 }, we[2] = { 1000, 3000 };
	struct trace_summary s;

	KTAP_ASSERT_EQ(trace_gaps(k, N(k), ws, we, 2, &s), 0);
	KTAP_EXPECT_EQ(s.steps, 1);
	KTAP_EXPECT_EQ(s.empty, 1);
	EXPECT_NS(s.span_ns, 300);
	/* [100, 200) + [220, 250) + [300, 400): the last copy's [380, 400)
	 * lies inside a kernel. */
	EXPECT_NS(s.busy_ns, 230);
	EXPECT_NS(s.gap_ns, 70);
	EXPECT_NS(s.kernels, 4);
	KTAP_ASSERT_EQ(s.ntop, 2);
	KTAP_EXPECT(!strcmp(s.top[0].name, "a"));
	KTAP_EXPECT_EQ(s.top[0].ns, 200);
	KTAP_EXPECT(!strcmp(s.top[1].name, "(copy)"));
	KTAP_EXPECT_EQ(s.top[1].ns, 50);
	KTAP_EXPECT_EQ(s.top[1].count, 2);
}

/* Idle time by the pair of names around it: a -> b twice (10 + 5), b -> a
 * once (20), most first; overlapping kernels leave no gap. */
static void t_gap_pairs(void)
{
	const struct trace_kernel k[] = {
		{ 0, 10, "a", 0 }, { 20, 30, "b", 0 }, { 50, 60, "a", 0 },
		{ 55, 58, "c", 0 }, { 65, 70, "b", 0 },
	};
	struct trace_summary s = one(k, N(k), 0, 100);

	EXPECT_NS(s.gap_ns, 35);
	KTAP_ASSERT_EQ(s.ngaps, 2);
	KTAP_EXPECT(!strcmp(s.gaps[0].before, "b") && !strcmp(s.gaps[0].after, "a"));
	KTAP_EXPECT_EQ(s.gaps[0].ns, 20);
	KTAP_EXPECT_EQ(s.gaps[0].count, 1);
	KTAP_EXPECT(!strcmp(s.gaps[1].before, "a") && !strcmp(s.gaps[1].after, "b"));
	KTAP_EXPECT_EQ(s.gaps[1].ns, 15);
	KTAP_EXPECT_EQ(s.gaps[1].count, 2);
}

/* The stubs of a build without CUPTI, or a load that names what failed. */
static void t_load_error(void)
{
	char err[512] = "";
	struct trace_result r = { .n = 1 };

#ifdef HAVE_CUPTI
	setenv("HACCEL_CUPTI_LIB", "/nonexistent/libcupti.so.13", 1);
	KTAP_EXPECT_EQ(trace_load(err, sizeof(err)), -ENOENT);
	ktap_diag("%s", err);
	KTAP_EXPECT(strstr(err, "HACCEL_CUPTI_LIB=/nonexistent/libcupti.so.13") != NULL);
	KTAP_EXPECT(strstr(err, "cannot open") != NULL);
	/* The first answer holds for the process. */
	unsetenv("HACCEL_CUPTI_LIB");
	KTAP_EXPECT_EQ(trace_start(err, sizeof(err)), -ENOENT);
	KTAP_EXPECT_EQ(trace_stop(&r, err, sizeof(err)), -EINVAL);
#else
	KTAP_EXPECT_EQ(trace_load(err, sizeof(err)), -ENOSYS);
	KTAP_EXPECT(!strcmp(err, "haccel-bench was built without CUPTI headers (cupti_activity.h)"));
	KTAP_EXPECT_EQ(trace_start(err, sizeof(err)), -ENOSYS);
	KTAP_EXPECT_EQ(trace_stop(&r, err, sizeof(err)), -ENOSYS);
	KTAP_EXPECT_EQ(trace_now(), 0);
#endif
	KTAP_EXPECT(r.k == NULL && r.n == 0);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_overlapping),
	KTAP_CASE(t_nested),
	KTAP_CASE(t_touching),
	KTAP_CASE(t_straddling),
	KTAP_CASE(t_empty),
	KTAP_CASE(t_unsorted),
	KTAP_CASE(t_even_median),
	KTAP_CASE(t_top),
	KTAP_CASE(t_copies),
	KTAP_CASE(t_gap_pairs),
	KTAP_CASE(t_load_error),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
