// SPDX-License-Identifier: MIT
/* The library picks haccel.ko to pin host memory when it is loaded (charged node-wide, not mlock'ed), logs it once per context, honours HACCEL_HOSTMEM_PROVIDER, and refuses an incompatible ABI version. */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "haccel.h"
#include "driver-util.h"

#define MIB (1ull << 20)

static void fill_and_check(const struct haccel_hostmem_info *i)
{
	unsigned char *p = i->ptr;

	memset(p, 0xa5, (size_t)i->bytes);
	KTAP_EXPECT_EQ(p[0], 0xa5);
	KTAP_EXPECT_EQ(p[i->bytes - 1], 0xa5);
}

static void picks_driver_provider(void)
{
	int fd = hd_open();
	struct haccel_driver_info di = { .size = sizeof(di) };
	struct haccel_hostmem_provider_stats ps;
	struct haccel_hostmem_stats hs;
	struct haccel_hostmem_info i;
	struct haccel_hostmem *m[3];
	struct haccel_ctx *ctx = hl_ctx();
	uint64_t base = hd_node_total(fd);
	long long pins = hd_foll_pins();
	struct stat a, b;

	KTAP_ASSERT_EQ(haccel_driver_info(ctx, &di), 0);
	ktap_diag("driver at %s, ABI %u.%u, caps 0x%llx", di.render_node,
		  HACCEL_DRIVER_VERSION_MAJOR(di.uapi_version),
		  HACCEL_DRIVER_VERSION_MINOR(di.uapi_version), (unsigned long long)di.caps);
	KTAP_EXPECT(di.loaded && di.usable && di.compatible);
	KTAP_EXPECT_EQ(di.reason[0], '\0');
	KTAP_EXPECT_EQ(di.uapi_version, hd_param(fd, HACCEL_PARAM_UAPI_VERSION));
	KTAP_EXPECT_EQ(di.uapi_min_version, hd_param(fd, HACCEL_PARAM_UAPI_MIN_VERSION));
	KTAP_EXPECT_EQ(di.lib_uapi_version, HACCEL_UAPI_VERSION);
	KTAP_EXPECT_EQ(di.caps, hd_param(fd, HACCEL_PARAM_CAPS));
	KTAP_EXPECT_EQ(di.num_nodes, hd_num_nodes(fd));
	KTAP_EXPECT_EQ(di.page_size, hd_page());
	KTAP_EXPECT_EQ(di.max_pin_bytes, hd_param(fd, HACCEL_PARAM_MAX_PIN_SIZE));
	/* The same device the tests' own scan opened. */
	KTAP_ASSERT_EQ(stat(di.render_node, &a), 0);
	KTAP_ASSERT_EQ(fstat(fd, &b), 0);
	KTAP_EXPECT_EQ(a.st_rdev, b.st_rdev);

	for (int k = 0; k < 3; k++) {
		KTAP_ASSERT_EQ(hl_alloc(ctx, MIB + 4096 * (uint64_t)k, HACCEL_NODE_ANY, 0, &m[k]), 0);
		KTAP_EXPECT_EQ(haccel_hostmem_provider(m[k]), HACCEL_HOSTMEM_PROVIDER_DRIVER);
		i = hl_info(m[k]);
		KTAP_EXPECT_EQ(i.pinned, 1);
		fill_and_check(&i);
	}
	i = hl_info(m[0]);
	/* Charged to the driver's node-wide count, and not mlock'ed. */
	KTAP_EXPECT_EQ(hd_node_total(fd), base + 3 * MIB + 3 * 4096);
	if (pins >= 0)
		KTAP_EXPECT_EQ(hd_foll_pins(), pins + (3 * MIB + 3 * 4096) / hd_page());
	KTAP_EXPECT_EQ(hl_vmlck(), 0);
	ps = hl_pstats(ctx);
	KTAP_EXPECT_EQ(ps.provider, HACCEL_HOSTMEM_PROVIDER_DRIVER);
	KTAP_EXPECT_EQ(ps.bytes_driver, 3 * MIB + 3 * 4096);
	KTAP_EXPECT_EQ(ps.buffers_driver, 3);
	KTAP_EXPECT_EQ(ps.bytes_user, 0);
	KTAP_EXPECT_EQ(ps.driver_pins, 3);
	KTAP_EXPECT_EQ(ps.driver_refusals, 0);
	KTAP_ASSERT_EQ(haccel_hostmem_stats(ctx, &hs), 0);
	KTAP_EXPECT_EQ(hs.bytes_pinned_unplaced, 3 * MIB + 3 * 4096);
	KTAP_EXPECT_EQ(hs.buffers, 3);
	for (int k = 0; k < 3; k++)
		haccel_hostmem_free(m[k]);
	KTAP_EXPECT_EQ(hd_node_total(fd), base);
	if (pins >= 0)
		KTAP_EXPECT_EQ(hd_foll_pins(), pins);
	ps = hl_pstats(ctx);
	KTAP_EXPECT_EQ(ps.bytes_driver, 0);
	KTAP_EXPECT_EQ(ps.buffers_driver, 0);
	/* Said once for the context, however many buffers and queries. */
	KTAP_EXPECT_EQ(hl_lines("pinning through haccel.ko at /dev/dri/renderD", HACCEL_LOG_INFO), 1);
	KTAP_EXPECT_EQ(hl_lines("mlock", -1), 0);
	hl_log_dump();
	haccel_close(ctx);
}

/* Each context is a client of its own, and says which provider once. */
static void logged_once_per_context(void)
{
	struct haccel_ctx *a = hl_ctx(), *b = hl_ctx();
	struct haccel_hostmem *m;
	int fd = hd_open();

	for (int k = 0; k < 2; k++) {
		KTAP_ASSERT_EQ(hl_alloc(a, MIB, HACCEL_NODE_ANY, 0, &m), 0);
		haccel_hostmem_free(m);
	}
	KTAP_EXPECT_EQ(hl_lines("pinning through haccel.ko", -1), 1);
	KTAP_ASSERT_EQ(hl_alloc(b, MIB, HACCEL_NODE_ANY, 0, &m), 0);
	KTAP_EXPECT_EQ(hl_lines("pinning through haccel.ko", -1), 2);
	/* Both contexts have their driver file open; the debugfs list shows them. */
	if (hd_debugfs_clients_of(getpid()) >= 0)
		KTAP_EXPECT_EQ(hd_debugfs_clients_of(getpid()), 3);
	haccel_hostmem_free(m);
	haccel_close(a);
	haccel_close(b);
	if (hd_debugfs_clients_of(getpid()) >= 0)
		KTAP_EXPECT_EQ(hd_debugfs_clients_of(getpid()), 1);
	close(fd);
}

/* A buffer bound to a node is pinned with STRICT_NODE and charged there. */
static void node_bound_charged_to_node(void)
{
	int fd = hd_open();
	struct haccel_ctx *ctx;
	struct haccel_hostmem_stats hs;
	struct haccel_hostmem *m;
	struct hd_stats before, after;

	hd_need_nodes(2);
	ctx = hl_ctx();
	for (int node = 0; node < 2; node++) {
		hd_stats(fd, &before);
		KTAP_ASSERT_EQ(hl_alloc(ctx, 2 * MIB, node, HACCEL_HOSTMEM_NO_HUGE, &m), 0);
		KTAP_EXPECT_EQ(hl_info(m).node, node);
		KTAP_EXPECT_EQ(haccel_hostmem_provider(m), HACCEL_HOSTMEM_PROVIDER_DRIVER);
		KTAP_EXPECT_EQ(hd_pages_on(hl_info(m).ptr, 2 * MIB, node), 2 * MIB / hd_page());
		hd_stats(fd, &after);
		KTAP_EXPECT_EQ(after.node[node], before.node[node] + 2 * MIB);
		KTAP_EXPECT_EQ(after.node[1 - node], before.node[1 - node]);
		KTAP_ASSERT_EQ(haccel_hostmem_stats(ctx, &hs), 0);
		KTAP_EXPECT_EQ(hs.bytes_pinned[node], 2 * MIB);
		haccel_hostmem_free(m);
		hd_stats(fd, &after);
		KTAP_EXPECT_EQ(after.node[node], before.node[node]);
	}
	haccel_close(ctx);
}

/* hugetlb pages (reserved here for the case) pinned by the driver too. */
static long long hugepages(long long set)
{
	FILE *f = fopen("/proc/sys/vm/nr_hugepages", set >= 0 ? "w" : "r");
	long long v = -1;

	if (!f)
		return -1;
	if (set >= 0)
		v = fprintf(f, "%lld", set) > 0 ? set : -1;
	else if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

static long long saved_huge = -1;

static void restore_huge(void)
{
	if (saved_huge >= 0)
		hugepages(saved_huge);
}

static void hugetlb_pinned_by_driver(void)
{
	int fd = hd_open();
	struct haccel_ctx *ctx = hl_ctx();
	struct haccel_hostmem *m;
	uint64_t base = hd_node_total(fd);
	int ret;

	saved_huge = hugepages(-1);
	if (saved_huge < 0)
		ktap_skip("no /proc/sys/vm/nr_hugepages");
	atexit(restore_huge);
	hugepages(saved_huge + 3);
	ret = hl_alloc(ctx, 4 * MIB + 1, HACCEL_NODE_ANY, HACCEL_HOSTMEM_HUGETLB, &m);
	if (ret == -ENOMEM)
		ktap_skip("the kernel reserved too few huge pages: %s", hl_err(ctx));
	KTAP_ASSERT_EQ(ret, 0);
	KTAP_EXPECT_EQ(hl_info(m).huge, HACCEL_HUGE_HUGETLB);
	KTAP_EXPECT_EQ(hl_info(m).mapped_bytes, 6 * MIB);
	KTAP_EXPECT_EQ(haccel_hostmem_provider(m), HACCEL_HOSTMEM_PROVIDER_DRIVER);
	KTAP_EXPECT_EQ(hd_node_total(fd), base + 6 * MIB);
	memset(hl_info(m).ptr, 7, 4 * MIB + 1);
	haccel_hostmem_free(m);
	KTAP_EXPECT_EQ(hd_node_total(fd), base);
	haccel_close(ctx);
	restore_huge();
	saved_huge = -1;
}

static void forced_user_uses_mlock(void)
{
	int fd = hd_open();
	struct haccel_hostmem_provider_stats ps;
	struct haccel_hostmem *m;
	struct haccel_ctx *ctx;
	uint64_t base = hd_node_total(fd);

	setenv("HACCEL_HOSTMEM_PROVIDER", "user", 1);
	ctx = hl_ctx();
	KTAP_ASSERT_EQ(hl_alloc(ctx, MIB, HACCEL_NODE_ANY, 0, &m), 0);
	KTAP_EXPECT_EQ(haccel_hostmem_provider(m), HACCEL_HOSTMEM_PROVIDER_USER);
	KTAP_EXPECT_EQ(hl_info(m).pinned, 1);
	KTAP_EXPECT_EQ(hd_node_total(fd), base);
	KTAP_EXPECT_EQ(hl_vmlck(), MIB);
	ps = hl_pstats(ctx);
	KTAP_EXPECT_EQ(ps.provider, HACCEL_HOSTMEM_PROVIDER_USER);
	KTAP_EXPECT_EQ(ps.bytes_user, MIB);
	KTAP_EXPECT_EQ(ps.bytes_driver, 0);
	KTAP_EXPECT_EQ(hl_lines("HACCEL_HOSTMEM_PROVIDER=user: pinning with mlock", HACCEL_LOG_INFO), 1);
	haccel_hostmem_free(m);
	KTAP_EXPECT_EQ(hl_vmlck(), 0);
	haccel_close(ctx);

	setenv("HACCEL_HOSTMEM_PROVIDER", "driver", 1);
	ctx = hl_ctx();
	KTAP_ASSERT_EQ(hl_alloc(ctx, MIB, HACCEL_NODE_ANY, 0, &m), 0);
	KTAP_EXPECT_EQ(haccel_hostmem_provider(m), HACCEL_HOSTMEM_PROVIDER_DRIVER);
	KTAP_EXPECT_EQ(hd_node_total(fd), base + MIB);
	haccel_hostmem_free(m);
	haccel_close(ctx);
	unsetenv("HACCEL_HOSTMEM_PROVIDER");
}

/*
 * The library claims another ABI version (a test knob): the real driver is
 * refused with both versions named, its file closed, and mlock used.
 */
static void refused(const char *ours, int status, const char *reason)
{
	struct haccel_driver_info di = { .size = sizeof(di) };
	int fd = hd_open();
	struct haccel_hostmem *m;
	struct haccel_ctx *ctx;
	uint64_t base = hd_node_total(fd);

	setenv("HACCEL_TEST_UAPI_VERSION", ours, 1);
	ctx = hl_ctx();
	KTAP_EXPECT_EQ(haccel_driver_info(ctx, &di), status);
	ktap_diag("%s: %s", ours, di.reason);
	if (status) {
		KTAP_EXPECT(di.loaded && !di.usable && !di.compatible);
		KTAP_EXPECT(!strcmp(di.reason, reason));
		KTAP_EXPECT_EQ(di.uapi_version, hd_param(fd, HACCEL_PARAM_UAPI_VERSION));
		/* Nothing kept open: no client of this process but the test's. */
		if (hd_debugfs_clients_of(getpid()) >= 0)
			KTAP_EXPECT_EQ(hd_debugfs_clients_of(getpid()), 1);
	} else {
		KTAP_EXPECT(di.usable && di.compatible);
	}
	KTAP_ASSERT_EQ(hl_alloc(ctx, MIB, HACCEL_NODE_ANY, 0, &m), 0);
	KTAP_EXPECT_EQ(haccel_hostmem_provider(m),
		       status ? HACCEL_HOSTMEM_PROVIDER_USER : HACCEL_HOSTMEM_PROVIDER_DRIVER);
	KTAP_EXPECT_EQ(hd_node_total(fd), base + (status ? 0 : MIB));
	if (status)
		/* A driver someone installed and the library cannot use: a warning. */
		KTAP_EXPECT_EQ(hl_lines(reason, HACCEL_LOG_WARN), 1);
	haccel_hostmem_free(m);
	haccel_close(ctx);

	if (status) {
		/* Forced to the driver, the allocation fails saying why. */
		setenv("HACCEL_HOSTMEM_PROVIDER", "driver", 1);
		ctx = hl_ctx();
		KTAP_EXPECT_EQ(hl_alloc(ctx, MIB, HACCEL_NODE_ANY, 0, &m), status);
		KTAP_EXPECT(m == NULL);
		HL_EXPECT_ERR(ctx, "HACCEL_HOSTMEM_PROVIDER=driver, but haccel.ko cannot be used");
		HL_EXPECT_ERR(ctx, reason);
		KTAP_EXPECT_EQ(hl_pstats(ctx).provider, HACCEL_HOSTMEM_PROVIDER_NONE);
		haccel_close(ctx);
		unsetenv("HACCEL_HOSTMEM_PROVIDER");
	}
	unsetenv("HACCEL_TEST_UAPI_VERSION");
}

static void newer_major_refused(void)
{
	refused("2.0", -EPROTO,
		"haccel.ko speaks ABI 1.0 (serves userspace from 1.0); this library speaks 2.0: update haccel.ko");
}

static void older_major_refused(void)
{
	refused("0.9", -EPROTO,
		"haccel.ko speaks ABI 1.0 (serves userspace from 1.0); this library speaks 0.9: update libhaccel");
}

static void newer_minor_accepted(void)
{
	refused("1.7", 0, NULL);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(picks_driver_provider),
	KTAP_CASE(logged_once_per_context),
	KTAP_CASE(node_bound_charged_to_node),
	KTAP_CASE(hugetlb_pinned_by_driver),
	KTAP_CASE(forced_user_uses_mlock),
	KTAP_CASE(newer_major_refused),
	KTAP_CASE(older_major_refused),
	KTAP_CASE(newer_minor_accepted),
};

int main(int argc, char **argv)
{
	unsetenv("HACCEL_HOSTMEM_PROVIDER");
	unsetenv("HACCEL_TEST_UAPI_VERSION");
	return KTAP_MAIN(argc, argv, cases);
}
