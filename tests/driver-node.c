// SPDX-License-Identifier: MIT
/* NUMA placement and quotas: pins on node 1 verified by BO_INFO and move_pages, strict-node failure, quotas enforced, QUOTA_SET admin-only. */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "driver-util.h"

#define NPAGES 16

static void version_handshake(void)
{
	int fd = hd_open();
	uint64_t v = hd_param(fd, HACCEL_PARAM_UAPI_VERSION);
	uint64_t min = hd_param(fd, HACCEL_PARAM_UAPI_MIN_VERSION);
	uint64_t caps = hd_param(fd, HACCEL_PARAM_CAPS);

	ktap_diag("driver uapi %u.%u, serves userspace from %u.%u, caps 0x%llx",
		  HACCEL_UAPI_VERSION_MAJOR(v), HACCEL_UAPI_VERSION_MINOR(v),
		  HACCEL_UAPI_VERSION_MAJOR(min), HACCEL_UAPI_VERSION_MINOR(min),
		  (unsigned long long)caps);
	/* The rule of haccel_drm.h, from this (userspace) side. */
	KTAP_EXPECT_EQ(HACCEL_UAPI_VERSION_MAJOR(v), HACCEL_UAPI_MAJOR);
	KTAP_EXPECT(min <= HACCEL_UAPI_VERSION);
	KTAP_EXPECT(caps & HACCEL_CAP_PIN_STRICT_NODE);
	KTAP_EXPECT(caps & HACCEL_CAP_PRIME_EXPORT);
	KTAP_EXPECT(caps & HACCEL_CAP_PRIME_MMAP);
	KTAP_EXPECT(caps & HACCEL_CAP_CLIENT_QUOTA);
	KTAP_EXPECT_EQ(HACCEL_UAPI_VERSION_ENCODE(1, 2), 0x10002);
}

static void num_nodes_matches_sysfs(void)
{
	int fd = hd_open();

	KTAP_EXPECT(hd_num_nodes(fd) >= hd_online_nodes());
}

/* Pin memory bound to node with the strict flag; check every view of it. */
static void pin_on(int node)
{
	int fd = hd_open();
	size_t pg = hd_page(), size = NPAGES * pg;
	unsigned int n = hd_num_nodes(fd);
	struct hd_stats before, during, after;
	struct drm_haccel_bo_info bi;
	uint64_t pages[HD_MAX_NODES] = { 0 };
	char *mem = hd_alloc(size, node);
	uint32_t h;

	KTAP_ASSERT_EQ(hd_pages_on(mem, size, node), NPAGES);
	hd_stats(fd, &before);
	KTAP_ASSERT_EQ(hd_pin(fd, mem, size, node, HACCEL_PIN_STRICT_NODE, &h), 0);

	KTAP_ASSERT_EQ(hd_bo_info(fd, h, &bi, pages, n), 0);
	KTAP_EXPECT_EQ(bi.size, size);
	for (unsigned int i = 0; i < n; i++)
		KTAP_EXPECT_EQ(pages[i], (int)i == node ? NPAGES : 0);
	/* Pinned pages do not move: move_pages still finds them there. */
	KTAP_EXPECT_EQ(hd_pages_on(mem, size, node), NPAGES);

	hd_stats(fd, &during);
	KTAP_EXPECT_EQ(during.node[node] - before.node[node], size);
	KTAP_EXPECT_EQ(during.client[node], size);
	KTAP_EXPECT_EQ(during.s.client_total, size);
	KTAP_EXPECT_EQ(during.s.client_bos, 1);
	KTAP_EXPECT_EQ(during.s.node_bos - before.s.node_bos, 1);

	KTAP_ASSERT_EQ(hd_close_handle(fd, h), 0);
	hd_stats(fd, &after);
	KTAP_EXPECT_EQ(after.node[node], before.node[node]);
	KTAP_EXPECT_EQ(after.s.client_total, 0);
	KTAP_EXPECT_EQ(after.s.client_bos, 0);
}

static void pin_node0_strict(void)
{
	pin_on(0);
}

static void pin_node1_strict(void)
{
	hd_need_nodes(2);
	pin_on(1);
}

static void pin_any_node(void)
{
	int fd = hd_open();
	size_t size = NPAGES * hd_page();
	char *mem = hd_alloc(size, -1);
	uint32_t h;

	KTAP_ASSERT_EQ(hd_pin(fd, mem, size, HACCEL_DRM_NODE_ANY, 0, &h), 0);
	KTAP_EXPECT_EQ(hd_node_total(fd) >= size, 1);
	KTAP_EXPECT_EQ(hd_close_handle(fd, h), 0);
}

static void strict_node_mismatch_fails(void)
{
	int fd = hd_open();
	size_t size = NPAGES * hd_page();
	char *mem;
	uint64_t before;
	uint32_t h;

	hd_need_nodes(2);
	mem = hd_alloc(size, 0);
	before = hd_node_total(fd);
	KTAP_EXPECT_EQ(hd_pin(fd, mem, size, 1, HACCEL_PIN_STRICT_NODE, &h), -EXDEV);
	KTAP_EXPECT_EQ(hd_node_total(fd), before);
	/* Not strict: the node is a hint, the pages are counted where they are. */
	KTAP_ASSERT_EQ(hd_pin(fd, mem, size, 1, 0, &h), 0);
	{
		struct drm_haccel_bo_info bi;
		uint64_t pages[HD_MAX_NODES] = { 0 };

		KTAP_ASSERT_EQ(hd_bo_info(fd, h, &bi, pages, HD_MAX_NODES), 0);
		KTAP_EXPECT_EQ(pages[0], NPAGES);
		KTAP_EXPECT_EQ(pages[1], 0);
	}
	KTAP_EXPECT_EQ(hd_close_handle(fd, h), 0);
}

/* One buffer over two nodes: pages and bytes split exactly. */
static void split_across_nodes(void)
{
	int fd = hd_open();
	size_t pg = hd_page(), half = NPAGES / 2 * pg;
	struct drm_haccel_bo_info bi;
	uint64_t pages[HD_MAX_NODES] = { 0 };
	struct hd_stats st;
	char *mem;
	uint32_t h;

	hd_need_nodes(2);
	mem = mmap(NULL, 2 * half, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	KTAP_ASSERT(mem != MAP_FAILED);
	for (int node = 0; node < 2; node++) {
		unsigned long mask = 1ul << node;

		KTAP_ASSERT_EQ(syscall(SYS_mbind, mem + node * half, half, 2, &mask,
				       sizeof(mask) * 8 + 1, 0), 0);
	}
	memset(mem, 1, 2 * half);
	KTAP_ASSERT_EQ(hd_pin(fd, mem, 2 * half, 0, HACCEL_PIN_STRICT_NODE, &h), -EXDEV);
	KTAP_ASSERT_EQ(hd_pin(fd, mem, 2 * half, HACCEL_DRM_NODE_ANY, 0, &h), 0);
	KTAP_ASSERT_EQ(hd_bo_info(fd, h, &bi, pages, HD_MAX_NODES), 0);
	KTAP_EXPECT_EQ(pages[0], NPAGES / 2);
	KTAP_EXPECT_EQ(pages[1], NPAGES / 2);
	hd_stats(fd, &st);
	KTAP_EXPECT_EQ(st.client[0], half);
	KTAP_EXPECT_EQ(st.client[1], half);
	KTAP_EXPECT_EQ(hd_close_handle(fd, h), 0);
}

static void hugetlb_pin(void)
{
	int fd = hd_open();
	size_t huge = 2u << 20;
	struct drm_haccel_bo_info bi;
	uint64_t pages[HD_MAX_NODES] = { 0 };
	FILE *f = fopen("/proc/sys/vm/nr_hugepages", "w");
	char *mem;
	uint32_t h;

	if (f) {
		fputs("2", f);
		fclose(f);
	}
	mem = mmap(NULL, huge, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
	if (mem == MAP_FAILED)
		ktap_skip("no 2 MiB huge pages: %s", strerror(errno));
	memset(mem, 3, huge);
	KTAP_ASSERT_EQ(hd_pin(fd, mem, huge, HACCEL_DRM_NODE_ANY, 0, &h), 0);
	KTAP_ASSERT_EQ(hd_bo_info(fd, h, &bi, pages, HD_MAX_NODES), 0);
	KTAP_EXPECT_EQ(bi.size, huge);
	KTAP_EXPECT_EQ(pages[0] + pages[1], huge / hd_page());
	KTAP_EXPECT_EQ(hd_close_handle(fd, h), 0);
	munmap(mem, huge);
}

/* --- quotas ----------------------------------------------------------------- */

static void quota_node_limit(void)
{
	int fd = hd_open(), fd2 = hd_open();
	size_t pg = hd_page();
	char *mem = hd_alloc(NPAGES * pg, 0);
	struct hd_quotas saved;
	uint32_t h[4], extra;

	hd_quotas_save(fd, &saved);
	KTAP_ASSERT_EQ(hd_quota_set(fd, 0, 4 * pg + hd_node_used(fd, 0),
				    HACCEL_QUOTA_UNLIMITED), 0);
	for (int i = 0; i < 4; i++)
		KTAP_EXPECT_EQ(hd_pin(fd, mem + i * pg, pg, 0, 0, &h[i]), 0);
	/* Full: neither this client nor another one gets a page more. */
	KTAP_EXPECT_EQ(hd_pin(fd, mem + 4 * pg, pg, 0, 0, &extra), -EDQUOT);
	KTAP_EXPECT_EQ(hd_pin(fd2, mem + 4 * pg, pg, 0, 0, &extra), -EDQUOT);
	KTAP_EXPECT_EQ(hd_pin(fd2, mem + 4 * pg, pg, HACCEL_DRM_NODE_ANY, 0, &extra),
		       -EDQUOT);
	KTAP_EXPECT_EQ(hd_close_handle(fd, h[0]), 0);
	KTAP_EXPECT_EQ(hd_pin(fd2, mem + 4 * pg, pg, 0, 0, &extra), 0);
	KTAP_EXPECT_EQ(hd_close_handle(fd2, extra), 0);
	for (int i = 1; i < 4; i++)
		KTAP_EXPECT_EQ(hd_close_handle(fd, h[i]), 0);
	hd_quotas_restore(fd, &saved);
}

static void quota_client_limit(void)
{
	int fd = hd_open(), fd2 = hd_open();
	size_t pg = hd_page();
	char *mem = hd_alloc(NPAGES * pg, 0);
	struct hd_quotas saved;
	uint32_t a[2], b[2], extra;

	hd_quotas_save(fd, &saved);
	KTAP_ASSERT_EQ(hd_quota_set(fd, 0, HACCEL_QUOTA_UNLIMITED, 2 * pg), 0);
	for (int i = 0; i < 2; i++) {
		KTAP_EXPECT_EQ(hd_pin(fd, mem + i * pg, pg, 0, 0, &a[i]), 0);
		KTAP_EXPECT_EQ(hd_pin(fd2, mem + i * pg, pg, 0, 0, &b[i]), 0);
	}
	KTAP_EXPECT_EQ(hd_pin(fd, mem + 2 * pg, pg, 0, 0, &extra), -EDQUOT);
	KTAP_EXPECT_EQ(hd_pin(fd2, mem + 2 * pg, pg, 0, 0, &extra), -EDQUOT);
	/* A pin that does not fit whole fails whole. */
	KTAP_EXPECT_EQ(hd_close_handle(fd, a[1]), 0);
	KTAP_EXPECT_EQ(hd_pin(fd, mem + 2 * pg, 2 * pg, 0, 0, &extra), -EDQUOT);
	KTAP_EXPECT_EQ(hd_pin(fd, mem + 2 * pg, pg, 0, 0, &extra), 0);
	KTAP_EXPECT_EQ(hd_close_handle(fd, extra), 0);
	KTAP_EXPECT_EQ(hd_close_handle(fd, a[0]), 0);
	for (int i = 0; i < 2; i++)
		KTAP_EXPECT_EQ(hd_close_handle(fd2, b[i]), 0);
	hd_quotas_restore(fd, &saved);
}

/* The expected node's quota is checked before any page is pinned. */
static void quota_on_expected_node(void)
{
	int fd = hd_open();
	size_t pg = hd_page();
	char *mem;
	struct hd_quotas saved;
	uint32_t h;

	hd_need_nodes(2);
	mem = hd_alloc(NPAGES * pg, 0);
	hd_quotas_save(fd, &saved);
	KTAP_ASSERT_EQ(hd_quota_set(fd, 1, 0, 0), 0);
	KTAP_EXPECT_EQ(hd_pin(fd, mem, pg, 1, 0, &h), -EDQUOT);
	/* The pages are on node 0, whose quota is untouched. */
	KTAP_EXPECT_EQ(hd_pin(fd, mem, pg, HACCEL_DRM_NODE_ANY, 0, &h), 0);
	KTAP_EXPECT_EQ(hd_close_handle(fd, h), 0);
	hd_quotas_restore(fd, &saved);
}

static void quota_lowered_below_usage(void)
{
	int fd = hd_open();
	size_t pg = hd_page();
	char *mem = hd_alloc(NPAGES * pg, 0);
	struct hd_quotas saved;
	uint32_t h, extra;

	hd_quotas_save(fd, &saved);
	KTAP_ASSERT_EQ(hd_pin(fd, mem, 4 * pg, 0, 0, &h), 0);
	KTAP_ASSERT_EQ(hd_quota_set(fd, 0, HACCEL_QUOTA_UNLIMITED, pg), 0);
	KTAP_EXPECT_EQ(hd_pin(fd, mem + 4 * pg, pg, 0, 0, &extra), -EDQUOT);
	/* What was pinned stays pinned and counted. */
	{
		struct hd_stats st;

		hd_stats(fd, &st);
		KTAP_EXPECT_EQ(st.client[0], 4 * pg);
	}
	KTAP_EXPECT_EQ(hd_close_handle(fd, h), 0);
	KTAP_EXPECT_EQ(hd_pin(fd, mem + 4 * pg, pg, 0, 0, &extra), 0);
	KTAP_EXPECT_EQ(hd_close_handle(fd, extra), 0);
	hd_quotas_restore(fd, &saved);
}

static void quota_set_every_node(void)
{
	int fd = hd_open();
	unsigned int n = hd_online_nodes();
	struct hd_quotas saved;
	struct drm_haccel_quota q;

	hd_quotas_save(fd, &saved);
	KTAP_ASSERT_EQ(hd_quota_set(fd, HACCEL_DRM_NODE_ANY, 12345 * 4096ull, 777 * 4096ull), 0);
	for (unsigned int i = 0; i < n; i++) {
		KTAP_ASSERT_EQ(hd_quota_get(fd, i, &q), 0);
		KTAP_EXPECT_EQ(q.node_limit, 12345 * 4096ull);
		KTAP_EXPECT_EQ(q.client_limit, 777 * 4096ull);
	}
	hd_quotas_restore(fd, &saved);
	for (unsigned int i = 0; i < n; i++) {
		KTAP_ASSERT_EQ(hd_quota_get(fd, i, &q), 0);
		KTAP_EXPECT_EQ(q.node_limit, saved.q[i].node_limit);
	}
}

/* Loaded by the runner with the defaults: 50 % of each node, 100 % per client. */
static void quota_defaults_from_params(void)
{
	int fd = hd_open();

	KTAP_EXPECT_EQ(hd_module_param("node_quota_pct"), 50);
	KTAP_EXPECT_EQ(hd_module_param("client_quota_pct"), 100);
	hd_expect_limits_from_params(fd);
}

static void quota_set_needs_cap_sys_admin(void)
{
	int fd = hd_open(), status;
	struct drm_haccel_quota before, after;
	pid_t pid;

	hd_need_root();
	KTAP_ASSERT_EQ(hd_quota_get(fd, 0, &before), 0);
	pid = fork();
	KTAP_ASSERT(pid >= 0);
	if (pid == 0) {
		struct drm_haccel_quota q;
		size_t pg = hd_page();
		char *mem = hd_alloc(pg, -1);
		uint32_t h;
		int ok = 1;

		/* The file stays open across the drop: only the caller's
		 * capability decides. */
		if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
			_exit(3);
		ok &= hd_quota_set(fd, 0, 0, 0) == -EPERM;
		ok &= hd_quota_set(fd, HACCEL_DRM_NODE_ANY, 0, 0) == -EPERM;
		/* Reading the quotas and pinning are open to every client. */
		ok &= hd_quota_get(fd, 0, &q) == 0;
		ok &= hd_pin(fd, mem, pg, HACCEL_DRM_NODE_ANY, 0, &h) == 0;
		ok &= hd_close_handle(fd, h) == 0;
		_exit(ok ? 0 : 1);
	}
	KTAP_ASSERT_EQ(waitpid(pid, &status, 0), pid);
	KTAP_EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	KTAP_ASSERT_EQ(hd_quota_get(fd, 0, &after), 0);
	KTAP_EXPECT_EQ(after.node_limit, before.node_limit);
	KTAP_EXPECT_EQ(after.client_limit, before.client_limit);
}

static void quota_unlimited(void)
{
	int fd = hd_open();
	size_t size = NPAGES * hd_page();
	char *mem = hd_alloc(size, 0);
	struct hd_quotas saved;
	uint32_t h;

	hd_quotas_save(fd, &saved);
	KTAP_ASSERT_EQ(hd_quota_set(fd, 0, HACCEL_QUOTA_UNLIMITED,
				    HACCEL_QUOTA_UNLIMITED), 0);
	KTAP_EXPECT_EQ(hd_pin(fd, mem, size, 0, 0, &h), 0);
	KTAP_EXPECT_EQ(hd_close_handle(fd, h), 0);
	hd_quotas_restore(fd, &saved);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(version_handshake),
	KTAP_CASE(num_nodes_matches_sysfs),
	KTAP_CASE(pin_node0_strict),
	KTAP_CASE(pin_node1_strict),
	KTAP_CASE(pin_any_node),
	KTAP_CASE(strict_node_mismatch_fails),
	KTAP_CASE(split_across_nodes),
	KTAP_CASE(hugetlb_pin),
	KTAP_CASE(quota_node_limit),
	KTAP_CASE(quota_client_limit),
	KTAP_CASE(quota_on_expected_node),
	KTAP_CASE(quota_lowered_below_usage),
	KTAP_CASE(quota_set_every_node),
	KTAP_CASE(quota_defaults_from_params),
	KTAP_CASE(quota_set_needs_cap_sys_admin),
	KTAP_CASE(quota_unlimited),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
