// SPDX-License-Identifier: MIT
/* Host memory over haccel.ko's quotas: the allocation fails with -EDQUOT naming the node, the limit and the usage; with HACCEL_HOSTMEM_ALLOW_UNPINNED it goes on unpinned (never mlock'ed), counted. */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "haccel.h"
#include "driver-util.h"

#define MIB (1ull << 20)

static struct hd_quotas saved;
static int saved_fd = -1;

static void restore_quotas(void)
{
	if (saved_fd >= 0)
		hd_quotas_restore(saved_fd, &saved);
	saved_fd = -1;
}

/* Saved, and put back when the case ends, even through a failed assertion. */
static void save_quotas(int fd)
{
	hd_quotas_save(fd, &saved);
	saved_fd = fd;
	atexit(restore_quotas);
}

/* The node-wide limit of node 0 reached: refusal, then the allowed fallback. */
static void node_quota_refused_then_unpinned(void)
{
	int fd = hd_open();
	struct haccel_hostmem_provider_stats ps0, ps;
	struct haccel_hostmem_stats hs0, hs;
	struct haccel_hostmem *a, *b;
	struct haccel_ctx *ctx = hl_ctx();
	struct drm_haccel_quota q;
	uint64_t used, limit;
	char want[256];
	int ret;

	save_quotas(fd);
	KTAP_ASSERT_EQ(hd_quota_get(fd, 0, &q), 0);
	used = hd_node_used(fd, 0);
	limit = used + 4 * MIB;
	KTAP_ASSERT_EQ(hd_quota_set(fd, 0, limit, q.client_limit), 0);

	KTAP_ASSERT_EQ(hl_alloc(ctx, 3 * MIB, 0, HACCEL_HOSTMEM_NO_HUGE, &a), 0);
	KTAP_EXPECT_EQ(haccel_hostmem_provider(a), HACCEL_HOSTMEM_PROVIDER_DRIVER);
	KTAP_EXPECT_EQ(hd_node_used(fd, 0), used + 3 * MIB);
	ps0 = hl_pstats(ctx);
	KTAP_ASSERT_EQ(haccel_hostmem_stats(ctx, &hs0), 0);

	/* 3 MiB + 2 MiB > 4 MiB: refused, nothing changes. */
	ret = hl_alloc(ctx, 2 * MIB, 0, HACCEL_HOSTMEM_NO_HUGE, &b);
	ktap_diag("%s", hl_err(ctx));
	KTAP_EXPECT_EQ(ret, -EDQUOT);
	KTAP_EXPECT(b == NULL);
	snprintf(want, sizeof(want),
		 "node 0's node-wide quota is %llu bytes and all clients together have %llu bytes pinned there; this buffer needs %llu more on node 0",
		 (unsigned long long)limit, (unsigned long long)(used + 3 * MIB),
		 (unsigned long long)(2 * MIB));
	HL_EXPECT_ERR(ctx, "haccel.ko refused to pin 2097152 bytes on node 0 (PIN: Disk quota exceeded)");
	HL_EXPECT_ERR(ctx, want);
	KTAP_ASSERT_EQ(haccel_hostmem_stats(ctx, &hs), 0);
	KTAP_EXPECT(memcmp(&hs, &hs0, sizeof(hs)) == 0);
	ps = hl_pstats(ctx);
	KTAP_EXPECT_EQ(ps.driver_refusals, ps0.driver_refusals + 1);
	KTAP_EXPECT_EQ(ps.bytes_driver, ps0.bytes_driver);
	KTAP_EXPECT_EQ(hd_node_used(fd, 0), used + 3 * MIB);

	/* Allowed to go on unpinned: it does, says so once, counts it, and
	 * never pins behind the quota's back with mlock. */
	KTAP_ASSERT_EQ(hl_alloc(ctx, 2 * MIB, 0, HACCEL_HOSTMEM_NO_HUGE | HACCEL_HOSTMEM_ALLOW_UNPINNED,
				&b), 0);
	KTAP_EXPECT_EQ(hl_info(b).pinned, 0);
	KTAP_EXPECT_EQ(hl_info(b).node, 0);
	KTAP_EXPECT_EQ(haccel_hostmem_provider(b), HACCEL_HOSTMEM_PROVIDER_NONE);
	KTAP_EXPECT_EQ(hl_vmlck(), 0);
	KTAP_EXPECT_EQ(hd_node_used(fd, 0), used + 3 * MIB);
	KTAP_EXPECT_EQ(hl_lines("continuing unpinned (HACCEL_HOSTMEM_ALLOW_UNPINNED)", HACCEL_LOG_WARN), 1);
	KTAP_EXPECT_EQ(hl_lines(want, HACCEL_LOG_WARN), 1);
	KTAP_ASSERT_EQ(haccel_hostmem_stats(ctx, &hs), 0);
	KTAP_EXPECT_EQ(hs.fallbacks_unpinned, hs0.fallbacks_unpinned + 1);
	KTAP_EXPECT_EQ(hs.bytes_unpinned, 2 * MIB);
	KTAP_EXPECT_EQ(hs.bytes_pinned[0], 3 * MIB);
	ps = hl_pstats(ctx);
	KTAP_EXPECT_EQ(ps.driver_refusals, ps0.driver_refusals + 2);
	memset(hl_info(b).ptr, 1, 2 * MIB);

	haccel_hostmem_free(b);
	haccel_hostmem_free(a);
	KTAP_EXPECT_EQ(hd_node_used(fd, 0), used);
	KTAP_ASSERT_EQ(haccel_hostmem_stats(ctx, &hs), 0);
	KTAP_EXPECT_EQ(hs.bytes_unpinned, 0);
	KTAP_EXPECT_EQ(hs.buffers, 0);
	restore_quotas();
	haccel_close(ctx);
}

/* The per-client limit: one context may not pin past it. */
static void client_quota_refused(void)
{
	int fd = hd_open();
	struct haccel_ctx *ctx = hl_ctx();
	struct haccel_hostmem *a, *b;
	int ret;

	save_quotas(fd);
	KTAP_ASSERT_EQ(hd_quota_set(fd, 0, HACCEL_QUOTA_UNLIMITED, 2 * MIB), 0);
	KTAP_ASSERT_EQ(hl_alloc(ctx, MIB, 0, HACCEL_HOSTMEM_NO_HUGE, &a), 0);
	ret = hl_alloc(ctx, 2 * MIB, 0, HACCEL_HOSTMEM_NO_HUGE, &b);
	ktap_diag("%s", hl_err(ctx));
	KTAP_EXPECT_EQ(ret, -EDQUOT);
	HL_EXPECT_ERR(ctx, "node 0's per-client quota is 2097152 bytes and this context has 1048576 bytes pinned there; this buffer needs 2097152 more on node 0");
	haccel_hostmem_free(a);
	restore_quotas();
	haccel_close(ctx);
}

/* Any node: the message names the node the pages landed on. */
static void any_node_names_where_pages_are(void)
{
	int fd = hd_open();
	struct haccel_ctx *ctx = hl_ctx();
	unsigned int n = hd_num_nodes(fd);
	struct haccel_hostmem *m;
	struct hd_stats st;
	char want[160];
	int ret;

	save_quotas(fd);
	hd_stats(fd, &st);
	/* No room anywhere: every online node's limit is its usage. */
	for (unsigned int k = 0; k < n; k++)
		if (saved.q[k].node != HACCEL_DRM_NODE_ANY)
			KTAP_ASSERT_EQ(hd_quota_set(fd, k, st.node[k], HACCEL_QUOTA_UNLIMITED), 0);
	ret = hl_alloc(ctx, MIB, HACCEL_NODE_ANY, HACCEL_HOSTMEM_NO_HUGE, &m);
	ktap_diag("%s", hl_err(ctx));
	KTAP_EXPECT_EQ(ret, -EDQUOT);
	HL_EXPECT_ERR(ctx, "haccel.ko refused to pin 1048576 bytes (PIN: Disk quota exceeded)");
	for (unsigned int k = 0; k < n; k++) {
		snprintf(want, sizeof(want), "node %u's node-wide quota is %llu bytes", k,
			 (unsigned long long)st.node[k]);
		if (strstr(hl_err(ctx), want))
			break;
		if (k == n - 1)
			ktap_fail_at(__FILE__, __LINE__, "no node named in: %s", hl_err(ctx));
	}
	HL_EXPECT_ERR(ctx, "`haccel-ctl driver quota set");
	restore_quotas();
	haccel_close(ctx);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(node_quota_refused_then_unpinned),
	KTAP_CASE(client_quota_refused),
	KTAP_CASE(any_node_names_where_pages_are),
};

int main(int argc, char **argv)
{
	unsetenv("HACCEL_HOSTMEM_PROVIDER");
	return KTAP_MAIN(argc, argv, cases);
}
