// SPDX-License-Identifier: MIT
/* Without haccel.ko the userspace (mlock) provider pins host memory and the log says so once per context; HACCEL_HOSTMEM_PROVIDER forces a provider; a loaded driver whose node cannot be opened (a fixture sysfs tree) is reported and not used; the knobs are documented. */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hostmem-util.h"
#include "test-util.h"

#define MIB (1ull << 20)

static char lines[32][1024];
static int levels[32];
static unsigned int n_lines;

static void record(void *user, int level, const char *msg)
{
	(void)user;
	if (n_lines < 32) {
		snprintf(lines[n_lines], sizeof(lines[0]), "%s", msg);
		levels[n_lines++] = level;
	}
}

/* Lines so far containing needle (at level, or any when -1). */
static unsigned int logged(const char *needle, int level)
{
	unsigned int n = 0;

	for (unsigned int i = 0; i < n_lines; i++)
		if (strstr(lines[i], needle) && (level < 0 || levels[i] == level))
			n++;
	return n;
}

static void dump(void)
{
	for (unsigned int i = 0; i < n_lines; i++)
		ktap_diag("log %d: %s", levels[i], lines[i]);
}

static struct haccel_ctx *ctx_info(void)
{
	struct haccel_open_params p;
	struct haccel_ctx *ctx = NULL;

	haccel_open_params_init(&p);
	p.log_fn = record;
	p.log_level = HACCEL_LOG_INFO;
	KTAP_ASSERT_EQ(haccel_open(&p, &ctx), 0);
	return ctx;
}

/* These cases are about a machine without the driver. */
static void need_no_driver(void)
{
	struct stat st;

	if (stat("/sys/module/haccel", &st) == 0)
		ktap_skip("haccel.ko is loaded here: these cases need a machine without it (the VM tests cover it loaded)");
}

/* Flags for a buffer this process can have: pinned if it may lock. */
static uint32_t lock_flags(void)
{
	char why[256];

	return hm_can_lock(MIB, why, sizeof(why)) ? 0 : HACCEL_HOSTMEM_ALLOW_UNPINNED;
}

static int alloc(struct haccel_ctx *ctx, uint32_t flags, struct haccel_hostmem **m)
{
	struct haccel_hostmem_params p;

	haccel_hostmem_params_init(&p);
	p.bytes = MIB;
	p.flags = flags;
	return haccel_hostmem_alloc(ctx, &p, m);
}

static void t_user_provider_logged_once_per_context(void)
{
	struct haccel_driver_info di = { .size = sizeof(di) };
	struct haccel_hostmem_provider_stats ps = { .size = sizeof(ps) };
	struct haccel_ctx *a, *b;
	struct haccel_hostmem *m[3];
	uint32_t flags = lock_flags();
	int want = flags ? HACCEL_HOSTMEM_PROVIDER_NONE : HACCEL_HOSTMEM_PROVIDER_USER;

	need_no_driver();
	a = ctx_info();
	for (int k = 0; k < 3; k++) {
		KTAP_ASSERT_EQ(alloc(a, flags, &m[k]), 0);
		KTAP_EXPECT_EQ(haccel_hostmem_provider(m[k]), want);
	}
	KTAP_EXPECT_EQ(haccel_driver_info(a, &di), -ENODEV);
	KTAP_EXPECT_EQ(haccel_hostmem_provider_stats(a, &ps), 0);
	dump();
	/* One line, at info level: there is nothing to fix. */
	KTAP_EXPECT_EQ(logged("hostmem: haccel.ko is not loaded (no /sys/module/haccel); pinning with mlock instead",
			      HACCEL_LOG_INFO), 1);
	KTAP_EXPECT_EQ(logged("haccel.ko", -1), 1);
	KTAP_EXPECT(!di.loaded && !di.usable && !di.compatible);
	KTAP_EXPECT(!strcmp(di.reason, "haccel.ko is not loaded (no /sys/module/haccel)"));
	KTAP_EXPECT_EQ(di.render_node[0], '\0');
	KTAP_EXPECT_EQ(di.uapi_version, 0);
	KTAP_EXPECT_EQ(di.lib_uapi_version, 1u << 16);
	KTAP_EXPECT_EQ(ps.provider, HACCEL_HOSTMEM_PROVIDER_USER);
	KTAP_EXPECT_EQ(ps.bytes_driver, 0);
	KTAP_EXPECT_EQ(ps.buffers_user, flags ? 0 : 3);
	KTAP_EXPECT_EQ(ps.bytes_user, flags ? 0 : 3 * MIB);
	KTAP_EXPECT_EQ(ps.driver_pins, 0);
	for (int k = 0; k < 3; k++)
		haccel_hostmem_free(m[k]);
	KTAP_EXPECT_EQ(haccel_hostmem_provider_stats(a, &ps), 0);
	KTAP_EXPECT_EQ(ps.bytes_user, 0);
	KTAP_EXPECT_EQ(ps.buffers_user, 0);

	/* Per context: a second one has a log sink of its own and says it too. */
	b = ctx_info();
	KTAP_ASSERT_EQ(alloc(b, flags, &m[0]), 0);
	haccel_hostmem_free(m[0]);
	KTAP_EXPECT_EQ(logged("haccel.ko is not loaded", HACCEL_LOG_INFO), 2);
	KTAP_ASSERT_EQ(alloc(a, flags, &m[0]), 0);
	haccel_hostmem_free(m[0]);
	KTAP_EXPECT_EQ(logged("haccel.ko is not loaded", HACCEL_LOG_INFO), 2);
	haccel_close(a);
	haccel_close(b);
}

/* At the default level (warn) nothing is printed for a missing driver. */
static void t_silent_at_warn(void)
{
	struct haccel_open_params p;
	struct haccel_ctx *ctx;
	struct haccel_hostmem *m;

	need_no_driver();
	haccel_open_params_init(&p);
	p.log_fn = record;
	KTAP_ASSERT_EQ(haccel_open(&p, &ctx), 0);
	KTAP_ASSERT_EQ(alloc(ctx, lock_flags(), &m), 0);
	haccel_hostmem_free(m);
	KTAP_EXPECT_EQ(n_lines, 0);
	haccel_close(ctx);
}

static void t_forced_driver_fails(void)
{
	struct haccel_hostmem_stats s0, s;
	struct haccel_hostmem_provider_stats ps = { .size = sizeof(ps) };
	struct haccel_ctx *ctx;
	struct haccel_hostmem *m = (struct haccel_hostmem *)1;

	need_no_driver();
	setenv("HACCEL_HOSTMEM_PROVIDER", "driver", 1);
	ctx = ctx_info();
	s0 = hm_stats(ctx);
	for (int k = 0; k < 2; k++) {
		KTAP_EXPECT_EQ(alloc(ctx, HACCEL_HOSTMEM_ALLOW_UNPINNED, &m), -ENODEV);
		KTAP_EXPECT(m == NULL);
		HM_EXPECT_ERR(ctx, "hostmem: HACCEL_HOSTMEM_PROVIDER=driver, but haccel.ko cannot be used: haccel.ko is not loaded (no /sys/module/haccel)");
	}
	ktap_diag("%s", hm_err(ctx));
	s = hm_stats(ctx);
	HM_EXPECT_STATS_EQ(s, s0);
	KTAP_EXPECT_EQ(haccel_hostmem_provider_stats(ctx, &ps), 0);
	KTAP_EXPECT_EQ(ps.provider, HACCEL_HOSTMEM_PROVIDER_NONE);
	/* Not a fallback to mlock: nothing said but the errors. */
	KTAP_EXPECT_EQ(logged("pinning with mlock", -1), 0);
	haccel_close(ctx);
	unsetenv("HACCEL_HOSTMEM_PROVIDER");
}

static void t_forced_user(void)
{
	struct haccel_ctx *ctx;
	struct haccel_hostmem *m;

	setenv("HACCEL_HOSTMEM_PROVIDER", "user", 1);
	ctx = ctx_info();
	KTAP_ASSERT_EQ(alloc(ctx, lock_flags(), &m), 0);
	KTAP_EXPECT(haccel_hostmem_provider(m) != HACCEL_HOSTMEM_PROVIDER_DRIVER);
	haccel_hostmem_free(m);
	KTAP_ASSERT_EQ(alloc(ctx, lock_flags(), &m), 0);
	haccel_hostmem_free(m);
	dump();
	KTAP_EXPECT_EQ(logged("HACCEL_HOSTMEM_PROVIDER=user: pinning with mlock", HACCEL_LOG_INFO), 1);
	/* The driver was not even looked for. */
	KTAP_EXPECT_EQ(logged("haccel.ko is", -1), 0);
	haccel_close(ctx);
	unsetenv("HACCEL_HOSTMEM_PROVIDER");
}

static void t_bad_provider_value(void)
{
	struct haccel_hostmem_provider_stats ps = { .size = sizeof(ps) };
	struct haccel_ctx *ctx;
	struct haccel_hostmem *m;

	need_no_driver();
	setenv("HACCEL_HOSTMEM_PROVIDER", "kernel", 1);
	ctx = ctx_info();
	KTAP_ASSERT_EQ(alloc(ctx, lock_flags(), &m), 0);
	haccel_hostmem_free(m);
	KTAP_ASSERT_EQ(alloc(ctx, lock_flags(), &m), 0);
	haccel_hostmem_free(m);
	KTAP_EXPECT_EQ(logged("HACCEL_HOSTMEM_PROVIDER=kernel not understood (use auto, driver or user); using auto",
			      HACCEL_LOG_WARN), 1);
	KTAP_EXPECT_EQ(haccel_hostmem_provider_stats(ctx, &ps), 0);
	KTAP_EXPECT_EQ(ps.provider, HACCEL_HOSTMEM_PROVIDER_USER);
	haccel_close(ctx);
	unsetenv("HACCEL_HOSTMEM_PROVIDER");
}

/* sysfs says the module is loaded with a render node that is not in /dev. */
static void t_fixture_loaded_node_missing(void)
{
	const char *root = hm_fixture_new();
	struct haccel_driver_info di = { .size = sizeof(di) };
	struct haccel_ctx *ctx;
	struct haccel_hostmem *m;
	int ret;

	test_sysfs_haccel(root, 250);
	if (access("/dev/dri/renderD250", F_OK) == 0)
		ktap_skip("this machine has a /dev/dri/renderD250");

	ctx = ctx_info();
	ret = haccel_driver_info(ctx, &di);
	ktap_diag("%d: %s", ret, di.reason);
#ifdef HAVE_LIBDRM
	KTAP_EXPECT_EQ(ret, -ENODEV);
	KTAP_EXPECT(!strcmp(di.reason, "haccel.ko is loaded, but its render node /dev/dri/renderD250 cannot be opened (No such file or directory)"));
#else
	KTAP_EXPECT_EQ(ret, -ENOTSUP);
	KTAP_EXPECT(strstr(di.reason, "built without libdrm") != NULL);
#endif
	KTAP_EXPECT(di.loaded && !di.usable);
	KTAP_EXPECT(!strcmp(di.render_node, "/dev/dri/renderD250"));
	KTAP_ASSERT_EQ(alloc(ctx, lock_flags(), &m), 0);
	KTAP_EXPECT(haccel_hostmem_provider(m) != HACCEL_HOSTMEM_PROVIDER_DRIVER);
	haccel_hostmem_free(m);
	/* A driver someone loaded and the library cannot use: a warning, once. */
	dump();
	KTAP_EXPECT_EQ(logged("; pinning with mlock instead", HACCEL_LOG_WARN), 1);
	KTAP_EXPECT_EQ(logged(di.reason, HACCEL_LOG_WARN), 1);
	haccel_close(ctx);
	hm_fixture_remove();
}

static void t_fixture_not_loaded(void)
{
	const char *root = hm_fixture_new();
	struct haccel_driver_info di = { .size = sizeof(di) };
	struct haccel_ctx *ctx;
	char want[600];

	hm_put(root, "module/ext4/initstate", "live\n");
	ctx = ctx_info();
	KTAP_EXPECT_EQ(haccel_driver_info(ctx, &di), -ENODEV);
	snprintf(want, sizeof(want), "haccel.ko is not loaded (no %s/module/haccel)", root);
	KTAP_EXPECT(!strcmp(di.reason, want));
	KTAP_EXPECT(!di.loaded);
	haccel_close(ctx);
	hm_fixture_remove();
}

/* Caller-sized output structs: what the size allows, nothing more. */
static void t_sizes(void)
{
	struct haccel_driver_info di;
	struct haccel_hostmem_provider_stats ps;
	struct haccel_driver_stats ds = { .size = sizeof(ds) };
	struct haccel_ctx *ctx = hm_ctx();

	memset(&di, 0x55, sizeof(di));
	di.size = 12;
	haccel_driver_info(ctx, &di);
	KTAP_EXPECT_EQ(di.size, 12);
	KTAP_EXPECT_EQ(di.uapi_version, 0x55555555u);
	di.size = 0;
	KTAP_EXPECT_EQ(haccel_driver_info(ctx, &di), -EINVAL);
	KTAP_EXPECT_EQ(haccel_driver_info(ctx, NULL), -EINVAL);
	KTAP_EXPECT_EQ(haccel_driver_info(NULL, &di), -EINVAL);
	memset(&ps, 0x55, sizeof(ps));
	ps.size = 8;
	KTAP_EXPECT_EQ(haccel_hostmem_provider_stats(ctx, &ps), 0);
	KTAP_EXPECT_EQ(ps.bytes_driver, 0x5555555555555555ull);
	ps.size = 0;
	KTAP_EXPECT_EQ(haccel_hostmem_provider_stats(ctx, &ps), -EINVAL);
	KTAP_EXPECT_EQ(haccel_hostmem_provider(NULL), -EINVAL);
	KTAP_EXPECT_EQ(haccel_driver_stats(ctx, &ds, NULL, 1), -EINVAL);
	KTAP_EXPECT_EQ(haccel_driver_quota_set(ctx, -2, 0, 0), -EINVAL);
	if (access("/sys/module/haccel", F_OK)) {
		KTAP_EXPECT_EQ(haccel_driver_stats(ctx, &ds, NULL, 0), -ENODEV);
		KTAP_EXPECT_EQ(haccel_driver_quota_set(ctx, 0, 1, 1), -ENODEV);
		HM_EXPECT_ERR(ctx, "driver: cannot set a quota: haccel.ko is not loaded");
	}
	haccel_close(ctx);
}

/* Every variable driver.c reads is in docs/hostmem.md and the man pages'
 * ENVIRONMENT sections. */
static void t_knobs_documented(void)
{
	static const char *const pages[] = { "docs/man/libhaccel.3", "docs/man/haccel-ctl.1" };
	char *src = test_slurp_src("libhaccel/hostmem/driver.c");
	char *md = test_slurp_src("docs/hostmem.md");
	char names[8][64];
	int n = 0;

	for (const char *p = src; (p = strstr(p, "getenv(\"")) && n < 8;) {
		const char *b = p + 8, *e = strchr(b, '"');

		p = b;
		if (!e || e - b >= 64)
			continue;
		memcpy(names[n], b, (size_t)(e - b));
		names[n++][e - b] = '\0';
	}
	KTAP_EXPECT(n >= 2);
	for (int i = 0; i < n; i++) {
		ktap_diag("driver.c reads %s", names[i]);
		if (!strstr(md, names[i]))
			ktap_fail_at(__FILE__, __LINE__, "docs/hostmem.md lacks %s", names[i]);
	}
	for (size_t p = 0; p < sizeof(pages) / sizeof(pages[0]); p++) {
		char *man = test_slurp_src(pages[p]), *b = strstr(man, "\n.SH ENVIRONMENT\n"), *e;

		KTAP_ASSERT(b != NULL);
		e = strstr(b + 1, "\n.SH ");
		if (e)
			*e = '\0';
		for (int i = 0; i < n; i++)
			if (!strstr(b, names[i]))
				ktap_fail_at(__FILE__, __LINE__, "%s: ENVIRONMENT lacks %s", pages[p],
					     names[i]);
		free(man);
	}
	free(md);
	free(src);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_user_provider_logged_once_per_context),
	KTAP_CASE(t_silent_at_warn),
	KTAP_CASE(t_forced_driver_fails),
	KTAP_CASE(t_forced_user),
	KTAP_CASE(t_bad_provider_value),
	KTAP_CASE(t_fixture_loaded_node_missing),
	KTAP_CASE(t_fixture_not_loaded),
	KTAP_CASE(t_sizes),
	KTAP_CASE(t_knobs_documented),
};

int main(int argc, char **argv)
{
	unsetenv("HACCEL_HOSTMEM_PROVIDER");
	unsetenv("HACCEL_TEST_UAPI_VERSION");
	unsetenv("HACCEL_LOG");
	return KTAP_MAIN(argc, argv, cases);
}
