// SPDX-License-Identifier: MIT
/* Module parameters: the default quotas exactly as documented, a load with other percentages enforcing them, and a percentage over 100 refusing the load with nothing left behind. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "driver-util.h"

static int exists(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0;
}

/*
 * Reload the module with params; every file of it must be closed. The
 * module is always left loaded with the defaults by the case that reloads
 * it, so a failed case does not take the next ones with it.
 */
static int reload(const char *params)
{
	int r = hd_module_unload();

	if (r && r != -ENOENT)
		return r;
	return hd_module_load(hd_module_path(), params);
}

static void back_to_defaults(void)
{
	KTAP_EXPECT_EQ(reload(""), 0);
	KTAP_EXPECT_EQ(hd_module_param("node_quota_pct"), 50);
}

/* Nothing of the module is left: no module, device, node or debugfs files. */
static void expect_nothing_loaded(void)
{
	int fd = hd_try_open();

	KTAP_EXPECT(!exists("/sys/module/haccel"));
	KTAP_EXPECT(!exists("/sys/bus/platform/devices/haccel"));
	KTAP_EXPECT(!exists("/sys/kernel/debug/haccel"));
	KTAP_EXPECT(fd < 0);
	if (fd >= 0)
		close(fd);
}

/* Each of the n parameter strings refuses the load (EINVAL), leaving
 * nothing loaded. */
static void expect_refused(const char *path, const char *const *bad, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int r = hd_module_load(path, bad[i]);

		if (r != -EINVAL)
			ktap_diag("%s: %d", bad[i], r);
		KTAP_EXPECT_EQ(r, -EINVAL);
		expect_nothing_loaded();
	}
}

static void defaults_exact(void)
{
	int fd;

	hd_module_path();
	KTAP_ASSERT_EQ(reload(""), 0);
	fd = hd_open();
	KTAP_EXPECT_EQ(hd_module_param("node_quota_pct"), 50);
	KTAP_EXPECT_EQ(hd_module_param("client_quota_pct"), 100);
	hd_expect_limits_from_params(fd);
	close(fd);
}

/* Loaded with node_quota_pct=10 client_quota_pct=5: those limits, enforced. */
static void other_percentages(void)
{
	size_t pg = hd_page();
	uint64_t client_limit;
	struct drm_haccel_quota q;
	char *mem;
	uint32_t h;
	int fd;

	hd_module_path();
	KTAP_ASSERT_EQ(reload("node_quota_pct=10 client_quota_pct=5"), 0);
	fd = hd_open();
	KTAP_EXPECT_EQ(hd_module_param("node_quota_pct"), 10);
	KTAP_EXPECT_EQ(hd_module_param("client_quota_pct"), 5);
	hd_expect_limits_from_params(fd);

	/* One page more than the client limit on node 0 is refused, the limit itself pins. */
	KTAP_ASSERT_EQ(hd_quota_get(fd, 0, &q), 0);
	client_limit = q.client_limit / pg * pg;
	mem = hd_alloc(client_limit + pg, 0);
	KTAP_EXPECT_EQ(hd_pin(fd, mem, client_limit + pg, 0, 0, &h), -EDQUOT);
	KTAP_EXPECT_EQ(hd_pin(fd, mem, client_limit, 0, 0, &h), 0);
	KTAP_EXPECT_EQ(hd_node_used(fd, 0), client_limit);
	close(fd);
	munmap(mem, client_limit + pg);
	back_to_defaults();
}

/* 100 and 0 are percentages too: the bounds load. */
static void bounds_load(void)
{
	int fd;

	hd_module_path();
	KTAP_ASSERT_EQ(reload("node_quota_pct=100 client_quota_pct=0"), 0);
	fd = hd_open();
	hd_expect_limits_from_params(fd);
	close(fd);
	back_to_defaults();
}

static void over_100_refused(void)
{
	static const char *const bad[] = {
		"node_quota_pct=101", "client_quota_pct=101",
		"node_quota_pct=50 client_quota_pct=1000",
		"node_quota_pct=4294967295",
	};
	const char *path = hd_module_path();

	KTAP_ASSERT_EQ(hd_module_unload(), 0);
	expect_refused(path, bad, sizeof(bad) / sizeof(bad[0]));
	/* insmod itself says so: it exits non-zero. */
	if (access("/bin/insmod", X_OK) == 0) {
		pid_t pid = fork();
		int status;

		KTAP_ASSERT(pid >= 0);
		if (pid == 0) {
			int null = open("/dev/null", O_WRONLY);

			dup2(null, 1);
			dup2(null, 2);
			execl("/bin/insmod", "insmod", path, "node_quota_pct=101", (char *)NULL);
			_exit(127);
		}
		KTAP_ASSERT_EQ(waitpid(pid, &status, 0), pid);
		KTAP_EXPECT(WIFEXITED(status) && WEXITSTATUS(status) != 0);
		expect_nothing_loaded();
	}
	KTAP_EXPECT_EQ(hd_module_load(path, ""), 0);
	KTAP_EXPECT_EQ(hd_module_param("node_quota_pct"), 50);
}

/*
 * page_pin_limit bounds how many times one page may be pinned (GUP adds
 * 1024 to a small page's reference count per pin, so unbounded pinning of
 * one page would overflow it): loaded with 4, a page pins 4 times, the
 * 5th PIN of it fails with EOVERFLOW and so does a larger range holding
 * it, pinning nothing; once a buffer goes it pins again. The default is
 * 1048576; 0 and values over it refuse the load.
 */
static void page_pin_limit(void)
{
	static const char *const bad[] = {
		"page_pin_limit=0", "page_pin_limit=1048577", "page_pin_limit=4294967295",
	};
	const char *path = hd_module_path();
	size_t pg = hd_page();
	char *mem = hd_alloc(2 * pg, -1);
	struct hd_stats before, after;
	long long pins;
	uint32_t h[4], h5;
	int fd;

	KTAP_ASSERT_EQ(reload(""), 0);
	KTAP_EXPECT_EQ(hd_module_param("page_pin_limit"), 1048576);
	KTAP_ASSERT_EQ(reload("page_pin_limit=4"), 0);
	KTAP_EXPECT_EQ(hd_module_param("page_pin_limit"), 4);
	fd = hd_open();
	for (int i = 0; i < 4; i++)
		KTAP_ASSERT_EQ(hd_pin(fd, mem + pg, pg, HACCEL_DRM_NODE_ANY, 0, &h[i]), 0);
	pins = hd_foll_pins();
	hd_stats(fd, &before);
	KTAP_EXPECT_EQ(hd_pin(fd, mem + pg, pg, HACCEL_DRM_NODE_ANY, 0, &h5), -EOVERFLOW);
	KTAP_EXPECT_EQ(hd_pin(fd, mem, 2 * pg, HACCEL_DRM_NODE_ANY, 0, &h5), -EOVERFLOW);
	hd_stats(fd, &after);
	KTAP_EXPECT_EQ(after.s.client_bos, before.s.client_bos);
	KTAP_EXPECT_EQ(after.s.node_total, 4 * pg);
	if (pins >= 0)
		KTAP_EXPECT_EQ(hd_foll_pins(), pins);
	/* The other page is not limited; one buffer fewer and the page pins again. */
	KTAP_EXPECT_EQ(hd_pin(fd, mem, pg, HACCEL_DRM_NODE_ANY, 0, &h5), 0);
	KTAP_EXPECT_EQ(hd_close_handle(fd, h5), 0);
	KTAP_EXPECT_EQ(hd_close_handle(fd, h[0]), 0);
	KTAP_EXPECT_EQ(hd_pin(fd, mem, 2 * pg, HACCEL_DRM_NODE_ANY, 0, &h5), 0);
	close(fd);
	munmap(mem, 2 * pg);

	KTAP_ASSERT_EQ(hd_module_unload(), 0);
	expect_refused(path, bad, sizeof(bad) / sizeof(bad[0]));
	KTAP_EXPECT_EQ(hd_module_load(path, ""), 0);
	KTAP_EXPECT_EQ(hd_module_param("page_pin_limit"), 1048576);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(defaults_exact),
	KTAP_CASE(other_percentages),
	KTAP_CASE(bounds_load),
	KTAP_CASE(over_100_refused),
	KTAP_CASE(page_pin_limit),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
