/* SPDX-License-Identifier: MIT */
/* Helpers shared by the host memory and topology tests: fixture sysfs trees, a context that records its log, stats. */
#ifndef HACCEL_TESTS_HOSTMEM_UTIL_H
#define HACCEL_TESTS_HOSTMEM_UTIL_H

#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "haccel.h"
#include "ktap.h"
#include "test-util.h"

/* --- a context whose log lines are counted, not printed ----------------- */

static unsigned int hm_warnings, hm_errors;
static char hm_last_warning[1024];

static inline void hm_log(void *user, int level, const char *msg)
{
	(void)user;
	if (level == HACCEL_LOG_WARN) {
		hm_warnings++;
		snprintf(hm_last_warning, sizeof(hm_last_warning), "%s", msg);
	} else if (level == HACCEL_LOG_ERROR) {
		hm_errors++;
	}
}

/* Open a context; $HACCEL_SYSFS_ROOT is read now, so set it first. */
static inline struct haccel_ctx *hm_ctx(void)
{
	struct haccel_open_params p;
	struct haccel_ctx *ctx = NULL;

	haccel_open_params_init(&p);
	p.log_fn = hm_log;
	p.log_level = HACCEL_LOG_WARN;
	KTAP_ASSERT_EQ(haccel_open(&p, &ctx), 0);
	return ctx;
}

/* The context's last error, in a static buffer. */
static inline const char *hm_err(struct haccel_ctx *ctx)
{
	static char buf[1024];

	haccel_last_error(ctx, buf, sizeof(buf));
	return buf;
}

/* Expect the last error to contain needle, and show it when it does not. */
#define HM_EXPECT_ERR(ctx, needle)                                            \
	do {                                                                  \
		const char *e_ = hm_err(ctx);                                 \
		if (!strstr(e_, needle))                                      \
			ktap_fail_at(__FILE__, __LINE__,                      \
				     "last error lacks \"%s\": %s", needle, e_); \
	} while (0)

static inline struct haccel_hostmem_stats hm_stats(struct haccel_ctx *ctx)
{
	struct haccel_hostmem_stats s;

	KTAP_ASSERT_EQ(haccel_hostmem_stats(ctx, &s), 0);
	return s;
}

#define HM_EXPECT_STATS_EQ(a, b)                                              \
	KTAP_EXPECT(memcmp(&(a), &(b), sizeof(a)) == 0)

/* --- fixture sysfs trees ------------------------------------------------- */

static char hm_fixture[64];

static inline void hm_fixture_remove(void)
{
	if (hm_fixture[0])
		test_rmtree(hm_fixture);
	hm_fixture[0] = '\0';
}

/*
 * Make an empty fixture tree, point $HACCEL_SYSFS_ROOT at it and return its
 * path; it is removed when the case exits, even through a failed assertion.
 */
static inline const char *hm_fixture_new(void)
{
	static bool registered;

	hm_fixture_remove();
	if (!registered)
		atexit(hm_fixture_remove);
	registered = true;
	snprintf(hm_fixture, sizeof(hm_fixture), "/tmp/haccel-sysfs-XXXXXX");
	KTAP_ASSERT(mkdtemp(hm_fixture) != NULL);
	KTAP_ASSERT_EQ(setenv("HACCEL_SYSFS_ROOT", hm_fixture, 1), 0);
	return hm_fixture;
}

#define hm_put test_put

/* A fixture node with a cpulist and (if mem_kb) a meminfo. */
static inline void hm_put_node(const char *root, int id, const char *cpulist,
			       unsigned long long total_kb,
			       unsigned long long free_kb)
{
	char rel[128], text[256];

	snprintf(rel, sizeof(rel), "devices/system/node/node%d/cpulist", id);
	hm_put(root, rel, cpulist);
	if (!total_kb)
		return;
	snprintf(rel, sizeof(rel), "devices/system/node/node%d/meminfo", id);
	snprintf(text, sizeof(text),
		 "Node %d MemTotal:       %llu kB\nNode %d MemFree:        %llu kB\nNode %d MemUsed:        %llu kB\n",
		 id, total_kb, id, free_kb, id, total_kb - free_kb);
	hm_put(root, rel, text);
}

/* --- locking ------------------------------------------------------------- */

/* True if this process has capability bit cap in its effective set. */
static inline bool hm_has_cap(int cap)
{
	char line[256];
	bool has = false;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "CapEff:", 7))
			has = (strtoull(line + 7, NULL, 16) >> cap) & 1;
	fclose(f);
	return has;
}

/*
 * Whether bytes more can be locked here (CAP_IPC_LOCK, or RLIMIT_MEMLOCK
 * with room); when not, the reason for a skip.
 */
static inline bool hm_can_lock(unsigned long long bytes, char *why, size_t len)
{
	struct rlimit rl;

	if (hm_has_cap(14))
		return true;
	if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 &&
	    (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= bytes + (1ull << 20)))
		return true;
	snprintf(why, len, "RLIMIT_MEMLOCK %llu is too low to lock %llu bytes and no CAP_IPC_LOCK",
		 (unsigned long long)rl.rlim_cur, bytes);
	return false;
}

#endif /* HACCEL_TESTS_HOSTMEM_UTIL_H */
